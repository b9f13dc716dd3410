/* The fabric layer's strict mode (fabric_strict.h) on a real tcp;ofi_rxm
 * endpoint pair on 127.0.0.1: each RDMA rule broken once must be caught,
 * and a correct exchange must pass without a word. Violations are counted
 * (fabric_strict_fail) instead of ending the process. The mode is read
 * from SUMCAST_FABRIC_STRICT once per process: the test sets it to "rdma"
 * unless the environment asks for "efa" (unit/test_fabric_strict_efa),
 * where inject_size is cut to efa's 4096 bytes too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>
#include <rdma/fi_errno.h>

#include "clock.h"
#include "fabric.h"
#include "fabric_strict.h"

static int violations;
static char last[512];

static void count(const char *msg)
{
	violations++;
	snprintf(last, sizeof(last), "%s", msg);
}

struct pair {
	struct fabric *a, *b;
	fi_addr_t a2b, b2a;
	uint8_t *buf, *buf2;
	struct fabric_mr ma, mb, ma2;
};

static struct pair P;

static int setup(void **state)
{
	struct fabric_params p = { .provider = "tcp", .node = "127.0.0.1" };

	(void)state;
	if (!getenv("SUMCAST_FABRIC_STRICT"))
		setenv("SUMCAST_FABRIC_STRICT", "rdma", 1);
	fabric_strict_fail = count;
	if (fabric_open(&p, &P.a) || fabric_open(&p, &P.b))
		return -1;
	if (fabric_av_insert(P.a, P.b->addr, P.b->addrlen, &P.a2b) ||
	    fabric_av_insert(P.b, P.a->addr, P.a->addrlen, &P.b2a))
		return -1;
	P.buf = aligned_alloc(4096, 1 << 16);
	P.buf2 = aligned_alloc(4096, 1 << 16);
	if (!P.buf || !P.buf2 || fabric_mr_reg(P.a, P.buf, 1 << 16, &P.ma) ||
	    fabric_mr_reg(P.b, P.buf, 1 << 16, &P.mb) || fabric_mr_reg(P.a, P.buf2, 1 << 16, &P.ma2))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fabric_mr_dereg(&P.ma);
	fabric_mr_dereg(&P.mb);
	fabric_mr_dereg(&P.ma2);
	fabric_close(P.a);
	fabric_close(P.b);
	free(P.buf);
	free(P.buf2);
	return 0;
}

/* Polls both until n completions of ops came (bounded). */
static void wait_for(int n)
{
	struct fabric_cqe e[8];
	uint64_t end = sc_now_ms() + 5000;

	while (n > 0 && sc_now_ms() < end) {
		int k = fabric_cq_poll(P.a, e, 8);
		int j = fabric_cq_poll(P.b, e, 8);
		n -= (k > 0 ? k : 0) + (j > 0 ? j : 0);
	}
	assert_int_equal(n, 0);
}

static void test_mode(void **state)
{
	(void)state;
	assert_int_not_equal(fabric_strict_level(), FABRIC_STRICT_OFF);
	assert_true(P.a->mr_local); /* the descriptor paths, as on verbs and efa */
	if (fabric_strict_level() == FABRIC_STRICT_EFA)
		assert_true(P.a->inject_size <= FABRIC_STRICT_EFA_INJECT);
}

/* A send, retried while the provider says -FI_EAGAIN (rxm connects at the
 * first send). */
static int send_retry(const void *buf, size_t len, void *desc, uint64_t tag, struct fabric_op *op)
{
	struct fabric_cqe e[4];
	uint64_t end = sc_now_ms() + 5000;
	int rc;

	while ((rc = fabric_tsend(P.a, buf, len, desc, P.a2b, tag, 1, op)) == -FI_EAGAIN && sc_now_ms() < end) {
		/* progress only: nothing of ours completes before the send */
		if (fabric_cq_poll(P.a, e, 4) > 0 || fabric_cq_poll(P.b, e, 4) > 0)
			fail_msg("a completion while connecting");
	}
	return rc;
}

/* A right exchange: a receive with b's descriptor, a send with a's. */
static void test_correct(void **state)
{
	struct fabric_op rop, sop;

	(void)state;
	violations = 0;
	assert_int_equal(fabric_trecv(P.b, P.buf + 4096, 1024, P.mb.desc, FI_ADDR_UNSPEC, 7, 0, &rop), 0);
	assert_int_equal(send_retry(P.buf, 1024, P.ma.desc, 7, &sop), 0);
	wait_for(2);
	/* a zero-byte message needs no descriptor */
	assert_int_equal(fabric_trecv(P.b, NULL, 0, NULL, FI_ADDR_UNSPEC, 8, 0, &rop), 0);
	assert_int_equal(send_retry(NULL, 0, NULL, 8, &sop), 0);
	wait_for(2);
	int rc;
	uint64_t end = sc_now_ms() + 5000;
	struct fabric_cqe e;
	while ((rc = fabric_tinject(P.a, P.buf, P.a->inject_size, P.a2b, 9, 0)) == -FI_EAGAIN && sc_now_ms() < end)
		if (fabric_cq_poll(P.a, &e, 1) > 0)
			fail_msg("a completion after an inject");
	assert_int_equal(rc, 0);
	assert_int_equal(violations, 0);
	/* the injected message, taken so that no later test sees it */
	assert_int_equal(fabric_trecv(P.b, P.buf + 8192, 4096, P.mb.desc, FI_ADDR_UNSPEC, 9, 0, &rop), 0);
	wait_for(1);
	assert_int_equal(violations, 0);
}

static void test_no_descriptor(void **state)
{
	struct fabric_op op = { 0 };

	(void)state;
	violations = 0;
	fabric_strict_post(P.a, "send", P.buf, 512, NULL, &op);
	assert_int_equal(violations, 1);
	assert_non_null(strstr(last, "no descriptor"));
}

static void test_outside_registration(void **state)
{
	struct fabric_op op = { 0 };

	(void)state;
	violations = 0;
	/* the last 100 bytes and 100 past the end */
	fabric_strict_post(P.a, "receive", P.buf + (1 << 16) - 100, 200, P.ma.desc, &op);
	assert_int_equal(violations, 1);
	if (!strstr(last, "no live registration"))
		fail_msg("%s", last);
	/* unregistered memory with a descriptor of something else */
	uint8_t stack[64];
	fabric_strict_post(P.a, "send", stack, sizeof(stack), P.ma.desc, &op);
	assert_int_equal(violations, 2);
}

static void test_wrong_descriptor(void **state)
{
	struct fabric_op op = { 0 };

	(void)state;
	violations = 0;
	/* buf is registered on a with ma; ma2 is buf2's */
	fabric_strict_post(P.a, "send", P.buf, 64, P.ma2.desc, &op);
	assert_int_equal(violations, 1);
	assert_non_null(strstr(last, "not the registration's"));
	/* b's registration of the same memory is another domain's */
	fabric_strict_post(P.a, "send", P.buf, 64, P.mb.desc, &op);
	assert_int_equal(violations, 2);
}

static void test_context_twice(void **state)
{
	struct fabric_op op = { 0 };
	struct fabric_cqe e;

	(void)state;
	violations = 0;
	assert_int_equal(fabric_trecv(P.b, P.buf, 64, P.mb.desc, FI_ADDR_UNSPEC, 42, 0, &op), 0);
	fabric_strict_post(P.b, "receive", P.buf + 64, 64, P.mb.desc, &op);
	assert_int_equal(violations, 1);
	assert_non_null(strstr(last, "still posted"));
	/* a completion for a context never posted */
	struct fabric_op stray;
	fabric_strict_done(P.b, &stray);
	assert_int_equal(violations, 2);
	assert_non_null(strstr(last, "not posted"));
	/* cancelled: its completion ends it, and it may be posted again */
	assert_int_equal(fabric_cancel(P.b, &op), 0);
	uint64_t end = sc_now_ms() + 5000;
	while (fabric_cq_poll(P.b, &e, 1) < 1 && sc_now_ms() < end)
		;
	assert_int_equal(e.err, -FI_ECANCELED);
	fabric_strict_post(P.b, "receive", P.buf, 64, P.mb.desc, &op);
	assert_int_equal(violations, 2);
}

static void test_dereg_in_flight(void **state)
{
	struct fabric_op op = { 0 };
	struct fabric_mr m;
	struct fabric_cqe e;
	uint8_t *x = aligned_alloc(4096, 8192);

	(void)state;
	violations = 0;
	assert_non_null(x);
	assert_int_equal(fabric_mr_reg(P.b, x, 8192, &m), 0);
	assert_int_equal(fabric_trecv(P.b, x + 100, 64, m.desc, FI_ADDR_UNSPEC, 43, 0, &op), 0);
	fabric_mr_dereg(&m);
	assert_int_equal(violations, 1);
	assert_non_null(strstr(last, "still covers"));
	fabric_cancel(P.b, &op);
	uint64_t end = sc_now_ms() + 5000;
	while (fabric_cq_poll(P.b, &e, 1) < 1 && sc_now_ms() < end)
		;
	free(x);
}

static void test_inject_and_size(void **state)
{
	struct fabric_op op = { 0 };

	(void)state;
	violations = 0;
	fabric_strict_inject(P.a, P.buf, P.a->inject_size + 1);
	assert_int_equal(violations, 1);
	assert_non_null(strstr(last, "above inject_size"));
	size_t max = P.a->info->ep_attr->max_msg_size;
	if (max && max < SIZE_MAX) {
		fabric_strict_post(P.a, "send", P.buf, max + 1, P.ma.desc, &op);
		assert_true(violations >= 2);
		assert_non_null(strstr(last, "max_msg_size") ? last : strstr(last, "registration"));
	}
}

static void test_unmapped_registration(void **state)
{
	(void)state;
	violations = 0;
	void *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	munmap(p, 8192);
	struct fabric_mr m = { 0 };
	fabric_strict_mr_reg(P.a, p, 8192, &m);
	assert_int_equal(violations, 1);
	assert_non_null(strstr(last, "not allocated memory"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mode),
		cmocka_unit_test(test_correct),
		cmocka_unit_test(test_no_descriptor),
		cmocka_unit_test(test_outside_registration),
		cmocka_unit_test(test_wrong_descriptor),
		cmocka_unit_test(test_context_twice),
		cmocka_unit_test(test_dereg_in_flight),
		cmocka_unit_test(test_inject_and_size),
		cmocka_unit_test(test_unmapped_registration),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
