/* Results spread over a job's lanes (daemon/dp_result.c, "Spread"), driven
 * directly: two data-thread structs (no threads started), jobs of two lanes
 * built by hand, the result backend's send_result on the slot's lane and
 * dp_spread_run on the other's. fabric_tinject is wrapped (the linker's
 * --wrap, tests/CMakeLists.txt): it records each send, or refuses one
 * address with -FI_EAGAIN as a full queue does. Checked: which lane sends
 * to which rank, an item for a job that ended and joined again under its id
 * (another handle) dropped, a refused send letting the items after it go,
 * and failing its job (timeout) once refused for the job's timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <rdma/fi_errno.h>

#include "dp.h"
#include "dp_result.h"

#define MAX_SENT 64

static struct {
	struct {
		struct fabric *f;
		fi_addr_t to;
		uint64_t tag;
		size_t len;
	} s[MAX_SENT];
	int n;
	fi_addr_t refuse; /* -FI_EAGAIN for this address (0: none) */
} sent;

int __wrap_fabric_tinject(struct fabric *f, const void *buf, size_t len, fi_addr_t dst, uint64_t tag,
			  uint32_t data);
int __wrap_fabric_tinject(struct fabric *f, const void *buf, size_t len, fi_addr_t dst, uint64_t tag,
			  uint32_t data)
{
	(void)buf;
	(void)data;
	if (dst == sent.refuse)
		return -FI_EAGAIN;
	assert_true(sent.n < MAX_SENT);
	sent.s[sent.n].f = f;
	sent.s[sent.n].to = dst;
	sent.s[sent.n].tag = tag;
	sent.s[sent.n].len = len;
	sent.n++;
	return 0;
}

static struct evq evq;
static struct dthread th[2];
static struct fabric fab[2];
static struct job *made[16];
static unsigned nmade;
static uint8_t acc[64];

static void thread_init(struct dthread *t, unsigned index)
{
	memset(t, 0, sizeof(*t));
	t->index = index;
	t->wake_fd = -1;
	t->evq = &evq;
	t->result = &result_default_ops;
	t->slot_ops = &dp_slot_ops;
	pthread_mutex_init(&t->spread_lock, NULL);
	STAILQ_INIT(&t->spread_in);
	STAILQ_INIT(&t->spread_q);
	STAILQ_INIT(&t->cmds);
	SLIST_INIT(&t->jobs);
	defer_queue_init(&t->retry);
	fab[index].inject_size = 64;
}

static int setup(void **state)
{
	(void)state;
	memset(&sent, 0, sizeof(sent));
	assert_int_equal(evq_init(&evq), 0);
	thread_init(&th[0], 0);
	thread_init(&th[1], 1);
	nmade = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	dp_spread_fini(&th[0]);
	dp_spread_fini(&th[1]);
	for (unsigned i = 0; i < nmade; i++) {
		free(made[i]->slots);
		free(made[i]->rslots);
		free(made[i]);
	}
	evq_fini(&evq);
	return 0;
}

/* Lane `lane` of a job of 2 lanes on th[lane]; rank r's address there is
 * base + r. */
static struct job *lane_new(uint64_t id, uint32_t handle, uint32_t nranks, uint32_t lane, fi_addr_t base)
{
	struct job *j = calloc(1, sizeof(*j) + nranks * sizeof(struct job_rank));

	assert_non_null(j);
	j->id = id;
	j->handle = handle;
	j->nranks = nranks;
	j->window = 2;
	j->lane = lane;
	j->lanes = 2;
	j->lane_window = 1;
	j->spread = 64;
	j->timeout_ms = 30000;
	j->thread = &th[lane];
	j->fab = &fab[lane];
	j->slots = calloc(j->window, sizeof(*j->slots));
	j->rslots = calloc((size_t)j->window * nranks, sizeof(*j->rslots));
	assert_true(j->slots && j->rslots);
	for (uint32_t s = 0; s < j->window; s++) {
		j->slots[s].job = j;
		j->slots[s].index = s;
	}
	for (uint32_t r = 0; r < nranks; r++) {
		j->ranks[r].fi_addr = base + r;
		j->ranks[r].added = true;
		j->ranks[r].result_key = 7;
	}
	assert_int_equal(result_default_ops.init(&th[lane], j), 0);
	SLIST_INSERT_HEAD(&th[lane].jobs, j, dlink);
	made[nmade++] = j;
	return j;
}

/* A job of 2 lanes: lane 0 (the lead) on th[0], lane 1 on th[1]. */
static struct job *job_new(uint64_t id, uint32_t handle, uint32_t nranks, fi_addr_t base0, fi_addr_t base1)
{
	struct job *l0 = lane_new(id, handle, nranks, 0, base0), *l1 = lane_new(id, handle, nranks, 1, base1);

	l0->lead = l1->lead = l0;
	l0->lane_next = l1;
	return l0;
}

/* Slot s of lane j reduced: an 8-byte result every rank takes, sent. */
static int complete(struct job *j, uint32_t s)
{
	struct slot *sl = &j->slots[s];

	sl->state = SLOT_SENDING;
	sl->len = 8;
	sl->acc = acc;
	sl->imm = wire_imm_make(0, 0, s);
	sl->chunk = s;
	for (uint32_t r = 0; r < j->nranks; r++) {
		job_rslot(j, s, r)->wants = true;
		job_rslot(j, s, r)->uni = true;
	}
	return j->thread->result->send_result(j->thread, j, sl);
}

static uint32_t tag_rank(uint64_t tag)
{
	return (uint32_t)(tag >> 24) & 0xffff;
}

/* 3 ranks, slot 0 on lane 0: ranks 0 and 2 from lane 0, rank 1 from lane 1
 * (wire_result_lane); the slot is done at the handover. */
static void test_spread_lanes(void **state)
{
	(void)state;
	struct job *j = job_new(0x42, 5, 3, 0x100, 0x200);

	assert_int_equal(complete(j, 0), 1); /* every send made or handed over */
	assert_int_equal(sent.n, 2);
	for (int i = 0; i < 2; i++) {
		assert_ptr_equal(sent.s[i].f, &fab[0]);
		assert_int_equal(wire_result_lane(0, tag_rank(sent.s[i].tag), 2, 64, 8), 0);
	}
	assert_int_equal(dp_spread_run(&th[0]), 0); /* nothing for lane 0 */
	assert_int_equal(dp_spread_run(&th[1]), 1);
	assert_int_equal(sent.n, 3);
	assert_ptr_equal(sent.s[2].f, &fab[1]);
	assert_int_equal(sent.s[2].to, 0x201);
	assert_int_equal(tag_rank(sent.s[2].tag), 1);
	assert_int_equal(sent.s[2].len, 8);
	assert_int_equal(ctr_get(&th[1].stats.results_spread), 1);
	assert_int_equal(ctr_get(&th[1].stats.tx_bytes), 8);
	assert_int_equal(ctr_get(&j->lane_next->bytes_out), 8);

	/* a result above the limit: every send from the slot's lane */
	sent.n = 0;
	j->spread = j->lane_next->spread = 4;
	j->slots[0].planned = false;
	j->slots[0].send_next = 0;
	assert_int_equal(complete(j, 0), 1);
	assert_int_equal(sent.n, 3);
	for (int i = 0; i < 3; i++)
		assert_ptr_equal(sent.s[i].f, &fab[0]);
	assert_int_equal(dp_spread_run(&th[1]), 0);
}

/* The job ends and joins again under its id before lane 1's thread took
 * the item: the new job (another handle, one rank) gets nothing of it. */
static void test_spread_rejoined(void **state)
{
	(void)state;
	struct job *x = job_new(0x42, 5, 3, 0x100, 0x200);

	assert_int_equal(complete(x, 0), 1);
	x->lane_next->removing = x->lane_next->dead = true;
	SLIST_REMOVE(&th[1].jobs, x->lane_next, job, dlink); /* reaped */
	struct job *y = lane_new(0x42, 6, 1, 1, 0x900);
	(void)y;
	sent.n = 0;
	assert_int_equal(dp_spread_run(&th[1]), 0);
	assert_int_equal(sent.n, 0);
	assert_true(STAILQ_EMPTY(&th[1].spread_q)); /* dropped */
}

/* A refused send waits in its item; the next item (another job) goes on;
 * once the queue takes it, it is sent; refused for the job's timeout, it
 * fails the job (timeout), naming the rank. */
static void test_spread_refused(void **state)
{
	(void)state;
	struct job *a = job_new(0x50, 7, 2, 0x300, 0x400), *b = job_new(0x60, 8, 2, 0x500, 0x600);

	sent.refuse = 0x401; /* a's rank 1 on lane 1 */
	assert_int_equal(complete(a, 0), 1);
	assert_int_equal(complete(b, 0), 1);
	sent.n = 0;
	assert_int_equal(dp_spread_run(&th[1]), 1); /* b's, past a's */
	assert_int_equal(sent.n, 1);
	assert_int_equal(sent.s[0].to, 0x601);
	assert_false(STAILQ_EMPTY(&th[1].spread_q));
	sent.refuse = 0;
	assert_int_equal(dp_spread_run(&th[1]), 1);
	assert_int_equal(sent.s[1].to, 0x401);
	assert_true(STAILQ_EMPTY(&th[1].spread_q));
	assert_false(a->lane_next->dead);

	/* refused past the timeout */
	a->lane_next->timeout_ms = 1;
	sent.refuse = 0x401;
	a->slots[0].planned = false;
	a->slots[0].send_next = 0;
	assert_int_equal(complete(a, 0), 1);
	assert_int_equal(dp_spread_run(&th[1]), 0);
	assert_false(a->lane_next->dead);
	struct timespec ts = { 0, 3000000 };
	nanosleep(&ts, NULL);
	assert_int_equal(dp_spread_run(&th[1]), 0);
	assert_true(a->lane_next->dead);
	assert_int_equal(a->lane_next->abort_code, WIRE_E_TIMEOUT);
	assert_non_null(strstr(a->lane_next->abort_text, "rank 1 took no result"));
	assert_true(STAILQ_EMPTY(&th[1].spread_q));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_spread_lanes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spread_rejoined, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spread_refused, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
