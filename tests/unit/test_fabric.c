/* Fabric wrapper against real libfabric providers on this host: two
 * endpoints in one process exchange tagged messages with immediate data;
 * truncation is reported as an error completion, not a crash. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>
#include <sys/socket.h>

#include "fabric.h"

static struct fabric_cqe backlog[8];
static int nbacklog;

static int wait_one(struct fabric *a, struct fabric *b, struct fabric_cqe *got)
{
	struct fabric_cqe c;
	if (nbacklog) {
		*got = backlog[0];
		memmove(backlog, backlog + 1, --nbacklog * sizeof(backlog[0]));
		return 0;
	}
	for (int i = 0; i < 2000000; i++) {
		if (fabric_cq_poll(b, &c, 1) == 1) {
			*got = c;
			return 0;
		}
		struct fabric_cqe d;
		if (fabric_cq_poll(a, &d, 1) == 1) {
			*got = d;
			return 0;
		}
	}
	return -1;
}

/* Completions seen while retrying a send that hit -FI_EAGAIN (rxm returns
 * it until the connection to a new peer is up) are kept in backlog. */
static int send_retry(struct fabric *a, struct fabric *b, const void *buf, size_t len,
		      void *desc, fi_addr_t dest, uint64_t tag, uint32_t data, struct fabric_op *op)
{
	for (int i = 0; i < 2000000; i++) {
		int rc = fabric_tsend(a, buf, len, desc, dest, tag, data, op);
		if (rc != -FI_EAGAIN)
			return rc;
		struct fabric_cqe c;
		if (fabric_cq_poll(a, &c, 1) == 1 && nbacklog < 8)
			backlog[nbacklog++] = c;
		if (fabric_cq_poll(b, &c, 1) == 1 && nbacklog < 8)
			backlog[nbacklog++] = c;
	}
	return -FI_ETIMEDOUT;
}

static void exchange(const char *prov)
{
	struct fabric_params p = { .provider = prov, .node = "127.0.0.1" };
	struct fabric *a, *b;
	if (fabric_open(&p, &a)) {
		if (!strcmp(prov, "shm"))
			skip();
		fail_msg("fabric_open(%s) failed", prov);
	}
	assert_int_equal(fabric_open(&p, &b), 0);
	fi_addr_t ab, ba;
	assert_int_equal(fabric_av_insert(a, b->addr, b->addrlen, &ab), 0);
	assert_int_equal(fabric_av_insert(b, a->addr, a->addrlen, &ba), 0);

	size_t n = 1 << 20;
	char *sbuf = malloc(n), *rbuf = calloc(1, n);
	for (size_t i = 0; i < n; i++)
		sbuf[i] = (char)(i * 7);
	struct fabric_mr smr = { 0 }, rmr = { 0 };
	assert_int_equal(fabric_mr_reg(a, sbuf, n, &smr), 0);
	assert_int_equal(fabric_mr_reg(b, rbuf, n, &rmr), 0);
	struct fabric_op sop, rop;
	assert_int_equal(fabric_trecv(b, rbuf, n, rmr.desc, FI_ADDR_UNSPEC, 0x55, 0, &rop), 0);
	assert_int_equal(send_retry(a, b, sbuf, n, smr.desc, ab, 0x55, 0xdeadbeef, &sop), 0);
	int seen_send = 0, seen_recv = 0;
	for (int k = 0; k < 2; k++) {
		struct fabric_cqe c;
		assert_int_equal(wait_one(a, b, &c), 0);
		assert_int_equal(c.err, 0);
		if (c.op == &sop) {
			seen_send++;
		} else {
			assert_ptr_equal(c.op, &rop);
			assert_int_equal(c.len, n);
			assert_int_equal(c.tag, 0x55);
			assert_true(c.flags & FI_REMOTE_CQ_DATA);
			assert_int_equal(c.data, 0xdeadbeef);
			if (b->has_source)
				assert_int_equal(c.src, ba);
			seen_recv++;
		}
	}
	assert_int_equal(seen_send + seen_recv, 2);
	assert_memory_equal(sbuf, rbuf, n);

	/* A message longer than the posted buffer: error completion, no overrun. */
	memset(rbuf, 0, n);
	assert_int_equal(fabric_trecv(b, rbuf, 100, rmr.desc, FI_ADDR_UNSPEC, 0x66, 0, &rop), 0);
	assert_int_equal(send_retry(a, b, sbuf, 4096, smr.desc, ab, 0x66, 1, &sop), 0);
	int trunc = 0;
	for (int k = 0; k < 2; k++) {
		struct fabric_cqe c;
		assert_int_equal(wait_one(a, b, &c), 0);
		if (c.op == &rop) {
			assert_int_equal(c.err, -FI_ETRUNC);
			trunc = 1;
		}
	}
	assert_true(trunc);
	for (size_t i = 100; i < 4096; i++)
		assert_int_equal(rbuf[i], 0);

	/* Cancel a posted receive. */
	assert_int_equal(fabric_trecv(b, rbuf, 100, rmr.desc, FI_ADDR_UNSPEC, 0x77, 0, &rop), 0);
	assert_int_equal(fabric_cancel(b, &rop), 0);
	struct fabric_cqe c;
	assert_int_equal(wait_one(a, b, &c), 0);
	assert_ptr_equal(c.op, &rop);
	assert_int_equal(c.err, -FI_ECANCELED);

	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
	fabric_close(a);
	fabric_close(b);
	free(sbuf);
	free(rbuf);
}

/* fabric_buf: page-aligned memory registered on its fabric, good for both
 * ends of a message; its registration goes first (before the domain
 * closes), the memory with fabric_buf_free; without a fabric, memory only. */
static void test_buf(void **state)
{
	(void)state;
	struct fabric_params p = { .provider = "tcp", .node = "127.0.0.1" };
	struct fabric *a, *b;
	assert_int_equal(fabric_open(&p, &a), 0);
	assert_int_equal(fabric_open(&p, &b), 0);
	fi_addr_t ab;
	assert_int_equal(fabric_av_insert(a, b->addr, b->addrlen, &ab), 0);

	struct fabric_buf s = { 0 }, r = { 0 }, z = { 0 }, m = { 0 };
	size_t n = 10000;
	assert_int_equal(fabric_buf_alloc(a, n, &s), 0);
	assert_int_equal(fabric_buf_alloc(b, n, &r), 0);
	assert_int_equal((uintptr_t)s.buf % 4096, 0);
	assert_int_equal(s.len, n);
	assert_non_null(s.mr.mr);
	for (size_t i = 0; i < n; i++)
		((char *)s.buf)[i] = (char)(i * 13);
	memset(r.buf, 0, n);
	struct fabric_op sop, rop;
	assert_int_equal(fabric_trecv(b, r.buf, n, r.mr.desc, FI_ADDR_UNSPEC, 0x42, 0, &rop), 0);
	assert_int_equal(send_retry(a, b, s.buf, n, s.mr.desc, ab, 0x42, 7, &sop), 0);
	for (int k = 0; k < 2; k++) {
		struct fabric_cqe c;
		assert_int_equal(wait_one(a, b, &c), 0);
		assert_int_equal(c.err, 0);
	}
	assert_memory_equal(s.buf, r.buf, n);

	/* 0 bytes: one byte, registered (a registration needs one) */
	assert_int_equal(fabric_buf_alloc(a, 0, &z), 0);
	assert_int_equal(z.len, 1);
	assert_non_null(z.buf);
	assert_non_null(z.mr.mr);
	/* without a fabric: memory only, for a caller that registers it elsewhere */
	assert_int_equal(fabric_buf_alloc(NULL, 5000, &m), 0);
	assert_int_equal((uintptr_t)m.buf % 4096, 0);
	assert_null(m.mr.mr);
	/* in two steps: the registration goes, the memory stays until freed */
	fabric_buf_dereg(&r);
	assert_null(r.mr.mr);
	assert_null(r.mr.desc);
	assert_memory_equal(s.buf, r.buf, n);
	fabric_buf_free(&r);
	assert_null(r.buf);
	assert_int_equal(r.len, 0);
	fabric_buf_free(&r); /* an empty one: nothing to do */
#if !defined(__SANITIZE_ADDRESS__)
	/* no memory: an error, and *out as it was */
	struct fabric_buf big = { .len = 77 };
	assert_int_equal(fabric_buf_alloc(NULL, SIZE_MAX - 8192, &big), -ENOMEM);
	assert_int_equal(big.len, 77);
	assert_null(big.buf);
#endif
	fabric_buf_free(&s);
	fabric_buf_free(&z);
	fabric_buf_free(&m);
	fabric_close(a);
	fabric_close(b);
}

static void test_tcp(void **state)
{
	(void)state;
	exchange("tcp");
}

static void test_shm(void **state)
{
	(void)state;
	exchange("shm");
}

/* Which providers' endpoints talk to each other (a JOIN's against the
 * daemon's), and what "auto" opens: never tcp's own RDM endpoint (a bare
 * "tcp", libfabric 1.18 and later), which no tcp;ofi_rxm endpoint talks to. */
static void test_provider_same(void **state)
{
	(void)state;
	assert_true(fabric_provider_same("tcp;ofi_rxm", "tcp;ofi_rxm"));
	assert_true(fabric_provider_same("shm", "shm"));
	assert_true(fabric_provider_same("verbs;ofi_rxm", "verbs;ofi_rxm"));
	assert_false(fabric_provider_same("shm", "tcp;ofi_rxm"));
	assert_false(fabric_provider_same("tcp", "tcp;ofi_rxm"));
	assert_false(fabric_provider_same("tcp;ofi_rxm", "tcp"));
	assert_true(fabric_provider_same("tcp", "tcp"));
	assert_false(fabric_provider_same("auto", "auto"));
	assert_false(fabric_provider_same(NULL, "shm"));
	assert_false(fabric_provider_same("", ""));

	struct fabric_params p = { .provider = "auto", .node = "127.0.0.1" };
	struct fabric *f;
	if (fabric_open(&p, &f))
		skip();
	print_message("auto: %s\n", fabric_provider(f));
	assert_string_not_equal(fabric_provider(f), "tcp");
	fabric_close(f);
}

static void test_unknown_provider(void **state)
{
	(void)state;
	struct fabric_params p = { .provider = "nosuchprov" };
	struct fabric *f = NULL;
	assert_true(fabric_open(&p, &f) < 0);
	assert_null(f);
}

/* fabric_addr_check_fmt: what a JOIN's address must be, per format. */
static size_t sin4(uint8_t *out, sa_family_t fam, const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = fam, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	memcpy(out, &a, sizeof(a));
	return sizeof(a);
}

static size_t sin6(uint8_t *out, const char *ip, uint16_t port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port) };

	inet_pton(AF_INET6, ip, &a.sin6_addr);
	memcpy(out, &a, sizeof(a));
	return sizeof(a);
}

static void test_addr_check(void **state)
{
	uint8_t own4[FABRIC_ADDR_MAX], own6[FABRIC_ADDR_MAX], a[FABRIC_ADDR_MAX + 8];
	size_t l4 = sin4(own4, AF_INET, "10.0.0.1", 7000), l6 = sin6(own6, "fd00::1", 7000), n;
	const char *why = NULL;
	const char shm[] = "fi_shm://4242";

	(void)state;
	/* IPv4 */
	n = sin4(a, AF_INET, "10.0.0.2", 7001);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, n, &why), 0);
	n = sin4(a, AF_INET, "127.0.0.1", 7001);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, n, &why), 0);
	n = sin4(a, AF_INET, "10.0.0.2", 0);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, n, &why), -EINVAL);
	assert_string_equal(why, "port 0");
	const char *bad4[] = { "0.0.0.0", "255.255.255.255", "224.0.0.1", "239.255.0.1" };
	for (size_t i = 0; i < 4; i++) {
		n = sin4(a, AF_INET, bad4[i], 7001);
		why = NULL;
		assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, n, &why), -EINVAL);
		assert_non_null(why);
	}
	n = sin4(a, AF_UNIX, "10.0.0.2", 7001);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, n, &why), -EINVAL);
	memset(a, 0xff, l4);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, l4, &why), -EINVAL);
	n = sin4(a, AF_INET, "10.0.0.2", 7001);
	a[12] = 1; /* sin_zero: libfabric refuses it */
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, n, &why), -EINVAL);
	n = sin4(a, AF_INET, "10.0.0.2", 7001);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, n - 1, &why), -EINVAL);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, 0, &why), -EINVAL);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, FABRIC_ADDR_MAX + 1, &why), -EINVAL);
	/* an IPv6 address to an IPv4 endpoint, also under FI_SOCKADDR */
	n = sin6(a, "fd00::2", 7001);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN, own4, l4, a, n, &why), -EINVAL);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR, own4, l4, a, n, &why), -EINVAL);
	/* IPv6 */
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN6, own6, l6, a, n, &why), 0);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR, own6, l6, a, n, &why), 0);
	const char *bad6[] = { "::", "ff02::1" };
	for (size_t i = 0; i < 2; i++) {
		n = sin6(a, bad6[i], 7001);
		assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN6, own6, l6, a, n, &why), -EINVAL);
	}
	n = sin6(a, "fd00::2", 0);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN6, own6, l6, a, n, &why), -EINVAL);
	n = sin4(a, AF_INET, "10.0.0.2", 7001);
	assert_int_equal(fabric_addr_check_fmt(FI_SOCKADDR_IN6, own6, l6, a, n, &why), -EINVAL);
	/* shm names */
	const struct {
		const char *s;
		size_t len;
		int rc;
	} names[] = {
		{ "fi_shm://99", 12, 0 },
		{ "fi_shm://a.b_c-d:1", 19, 0 },
		{ "fi_shm://99\0junk", 17, 0 }, /* ends at the NUL */
		{ "fi_shm://99", 11, -EINVAL },  /* no NUL within len */
		{ "fi_shm://", 10, -EINVAL },
		{ "fi_shm://../x", 14, -EINVAL },
		{ "fi_shm://a b", 13, -EINVAL },
		{ "fi_sockets://1", 15, -EINVAL },
		{ "fi_shm:/x", 10, -EINVAL },
		{ "", 1, -EINVAL },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_int_equal(fabric_addr_check_fmt(FI_ADDR_STR, shm, sizeof(shm), names[i].s, names[i].len, &why),
				 names[i].rc);
	/* other formats: the endpoint's own length */
	memset(a, 0x5a, 32);
	assert_int_equal(fabric_addr_check_fmt(FI_ADDR_EFA, own4, 32, a, 32, &why), 0);
	assert_int_equal(fabric_addr_check_fmt(FI_ADDR_EFA, own4, 32, a, 31, &why), -EINVAL);
}

/* Against a real endpoint: its own address passes, and so does a peer's. */
static void test_addr_check_real(void **state)
{
	struct fabric_params p = { .provider = "tcp", .node = "127.0.0.1" };
	struct fabric *a, *b;
	const char *why = NULL;

	(void)state;
	if (fabric_open(&p, &a))
		skip();
	assert_int_equal(fabric_open(&p, &b), 0);
	assert_int_equal(fabric_addr_check(a, b->addr, b->addrlen, &why), 0);
	assert_int_equal(fabric_addr_check(a, a->addr, a->addrlen, &why), 0);
	fabric_close(b);
	fabric_close(a);
}

/* What the GPU memory probe says here: on a host without the CUDA driver
 * (CI) "no CUDA driver (...)" and no; with one, the driver and device
 * first, and no current context in this thread (the probe never makes
 * one), so no again: never a crash, never an empty line. */
static void test_hmem_probe(void **state)
{
	char line[400] = "";
	(void)state;
	for (int i = 0; i < 2; i++) {
		const char *prov = i ? "tcp;ofi_rxm" : "shm";
		assert_int_equal(fabric_hmem_cuda_probe(prov, line, sizeof(line)), 0);
		assert_true(!strncmp(line, "no CUDA driver (", 16) ||
			    (!strncmp(line, "libcuda ", 8) && (strstr(line, "no current CUDA context") ||
							   strstr(line, " 0 devices"))));
		char again[400];
		fabric_hmem_cuda_probe(prov, again, sizeof(again));
		assert_string_equal(line, again); /* loaded once, the same answer */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcp),
		cmocka_unit_test(test_buf),
		cmocka_unit_test(test_shm),
		cmocka_unit_test(test_provider_same),
		cmocka_unit_test(test_unknown_provider),
		cmocka_unit_test(test_addr_check),
		cmocka_unit_test(test_addr_check_real),
		cmocka_unit_test(test_hmem_probe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
