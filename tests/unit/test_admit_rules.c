/* Admission's decision (common/admit.c, admit_decide), which the daemon's
 * admit_join and sumcastctl plan both take: each rule refuses on its own,
 * at its edge, in the daemon's order; the grant; the data thread a job
 * goes to. Figures from docs/daemon.md, "Admission". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "admit.h"
#include "grant.h"

#define K 1024ull
#define M (1024ull * 1024ull)

static const struct admit_sizes SZ = { 100, 10, 20, 5 };

/* The daemon's defaults (daemon/settings.c), 1 GiB budget. */
static struct admit_limits defaults(void)
{
	return (struct admit_limits){
		.max_jobs = 64,
		.memory_budget = 1024 * M,
		.max_memory_share = 0.5,
		.max_window = 64,
		.max_weight = 1,
		.max_chunk = 4 * M,
		.max_inflight = GRANT_INFLIGHT_DEFAULT,
		.min_chunk = GRANT_MIN_CHUNK_DEFAULT,
		.mc_inflight = GRANT_MC_INFLIGHT_DEFAULT,
		.sizes = SZ,
	};
}

/* An idle daemon of nthreads threads with rx free receives each. */
struct state {
	uint64_t rx_free[4];
	uint32_t jobs[4];
	struct admit_load load;
};

static void idle(struct state *s, unsigned nthreads, uint64_t rx)
{
	for (unsigned i = 0; i < 4; i++) {
		s->rx_free[i] = rx;
		s->jobs[i] = 0;
	}
	s->load = (struct admit_load){ 0, 0, nthreads, s->rx_free, s->jobs, 0 };
}

static struct admit_ask ask(uint32_t nranks, uint32_t window, uint32_t chunk)
{
	return (struct admit_ask){ .nranks = nranks, .window = window, .chunk = chunk, .unicast = true };
}

/* A small job at the defaults: admitted with what it asked, its memory
 * window x chunk x (n + 1) + bookkeeping, window x n receives. */
static void test_small_admitted(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(4, 8, 256 * K);

	idle(&s, 1, 8192);
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
	assert_int_equal(v.window, 8);
	assert_int_equal(v.chunk, 256 * K);
	assert_int_equal(v.mem_bytes, 8 * 256 * K * 5 + 100 + 4 * 10 + 8 * (20 + 4 * 5));
	assert_int_equal(v.book_bytes, 100 + 4 * 10 + 8 * (20 + 4 * 5));
	assert_int_equal(v.recvs, 32);
	assert_int_equal(v.thread, 0);
	assert_string_equal(admit_rule_name(v.rule), "admitted");
	/* f16 among the types: one more chunk per slot */
	a.has16 = true;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.mem_bytes, 8 * 256 * K * 6 + v.book_bytes);
}

/* max-jobs: the 65th job of a daemon serving 64 is refused, the 64th not. */
static void test_max_jobs(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(4, 8, 4 * K);

	idle(&s, 1, UINT64_MAX);
	s.load.njobs = 63;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
	s.load.njobs = 64;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MAX_JOBS);
	assert_int_equal(v.thread, -1);
	assert_string_equal(admit_rule_name(v.rule), "max-jobs");
	lim.max_jobs = 2;
	s.load.njobs = 2;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MAX_JOBS);
}

/* memory-share: one job over max-memory-share of the budget, even on an
 * idle daemon; at the share exactly, admitted. */
static void test_memory_share(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(3, 2, 64 * K); /* 2 x 64K x 4 = 512 KiB + book */
	uint64_t need;

	idle(&s, 1, UINT64_MAX);
	admit_decide(&lim, &s.load, &a, &v);
	need = v.mem_bytes;
	lim.memory_budget = 2 * need; /* share 0.5: need exactly */
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
	assert_int_equal(v.share_bytes, need);
	lim.memory_budget = 2 * need - 2;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MEMORY_SHARE);
	assert_string_equal(admit_rule_name(v.rule), "memory-share");
	lim.max_memory_share = 1;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
}

/* memory-budget: what the jobs before it hold counts; at the free bytes
 * exactly, admitted. */
static void test_memory_budget(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(3, 2, 64 * K);

	idle(&s, 1, UINT64_MAX);
	admit_decide(&lim, &s.load, &a, &v);
	uint64_t need = v.mem_bytes;
	lim.memory_budget = 4 * need;
	s.load.mem_used = 3 * need;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
	assert_int_equal(v.budget_free, need);
	s.load.mem_used = 3 * need + 1;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MEMORY_BUDGET);
	assert_string_equal(admit_rule_name(v.rule), "memory-budget");
	/* a budget already overdrawn (a reload lowered it) has nothing free */
	s.load.mem_used = 5 * need;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MEMORY_BUDGET);
	assert_int_equal(v.budget_free, 0);
}

/* receive-queue: the job goes to the thread with room and the fewest jobs;
 * none with room refuses, and says the most room any had (one lane here:
 * test_lanes_room spreads it). */
static void test_receive_queue(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(16, 8, 4 * K); /* 128 receives */

	lim.job_threads = 1;

	idle(&s, 3, 1000);
	s.jobs[0] = 2;
	s.jobs[1] = 1;
	s.jobs[2] = 1;
	s.rx_free[1] = 127;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
	assert_int_equal(v.thread, 2); /* thread 1 has fewer jobs but no room */
	s.rx_free[0] = 128;
	s.rx_free[2] = 100;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.thread, 0); /* room exactly */
	s.rx_free[0] = 127;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_RECEIVE_QUEUE);
	assert_int_equal(v.rx_room, 127);
	assert_int_equal(v.recvs, 128);
	assert_string_equal(admit_rule_name(v.rule), "receive-queue");
}

/* Lanes: a job over L data threads holds its bookkeeping L times (each
 * lane the whole window's slot arrays), its region once; job-threads, the
 * threads, WIRE_LANES_MAX (8) and the window bound L; multicast and a rank
 * that cannot address lanes keep one. */
static void test_lanes(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(4, 8, 256 * K);
	const uint64_t book = 100 + 4 * 10 + 8 * (20 + 4 * 5), region = 8 * 256 * K * 5;

	idle(&s, 3, 8192);
	admit_decide(&lim, &s.load, &a, &v); /* job-threads 0: every thread */
	assert_int_equal(v.lanes, 3);
	assert_int_equal(v.book_bytes, 3 * book);
	assert_int_equal(v.mem_bytes, region + 3 * book);
	lim.job_threads = 2;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.lanes, 2);
	assert_int_equal(v.mem_bytes, region + 2 * book);
	a.one_lane = true;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.lanes, 1);
	assert_int_equal(v.mem_bytes, region + book);
	a.one_lane = false;
	lim.mcast = true;
	a.unicast = false;
	admit_decide(&lim, &s.load, &a, &v); /* results by multicast: one sender per group */
	assert_true(v.mc);
	assert_int_equal(v.lanes, 1);
	assert_int_equal(admit_lanes(&lim, 3, 8, true, false), 1);
	lim.mcast = false;
	a.unicast = true;
	lim.job_threads = 0;
	assert_int_equal(admit_lanes(&lim, 16, 64, false, false), 8); /* WIRE_LANES_MAX */
	assert_int_equal(admit_lanes(&lim, 16, 3, false, false), 3);  /* the window */
	assert_int_equal(admit_lanes(&lim, 1, 64, false, false), 1);
	lim.job_threads = 4;
	assert_int_equal(admit_lanes(&lim, 2, 64, false, false), 2); /* more than the threads */
	/* the budget counts every lane's bookkeeping */
	lim.job_threads = 3;
	lim.memory_budget = region + 3 * book;
	lim.max_memory_share = 1.0;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
	lim.memory_budget = region + 3 * book - 1;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MEMORY_SHARE);
}

/* Lanes and receive room: each lane goes to a thread of its own with room
 * for its slots' receives (lane 0 first, the fewest jobs, ties in turn
 * from load.tie), so a job no thread has room for whole is taken spread;
 * where the lanes do not all fit, one lane where the whole job fits, its
 * bookkeeping charged once; neither: receive-queue. */
static void test_lanes_room(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(16, 8, 4 * K); /* 128 receives; 3 lanes: 48, 48, 32 */
	const uint64_t book = admit_book_bytes(&lim.sizes, 8, 16);

	idle(&s, 3, 100);
	s.rx_free[0] = 40;
	admit_decide(&lim, &s.load, &a, &v); /* no thread has 128 */
	assert_int_equal(v.rule, ADMIT_OK);
	assert_int_equal(v.lanes, 3);
	assert_int_equal(v.lane_thread[0], 1);
	assert_int_equal(v.lane_thread[1], 2);
	assert_int_equal(v.lane_thread[2], 0); /* 40: room for lane 2's 32 */
	assert_int_equal(v.thread, 1);
	assert_int_equal(v.recvs, 128);
	assert_int_equal(v.lane_recvs, 48);
	assert_int_equal(v.book_bytes, 3 * book);
	s.rx_free[2] = 30; /* lane 1 fits nowhere, the whole job neither */
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_RECEIVE_QUEUE);
	assert_int_equal(v.lanes, 1);
	assert_int_equal(v.rx_room, 100);
	s.rx_free[0] = 200; /* one lane, where the whole job fits */
	s.rx_free[1] = 30;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
	assert_int_equal(v.lanes, 1);
	assert_int_equal(v.thread, 0);
	assert_int_equal(v.lane_thread[0], 0);
	assert_int_equal(v.lane_recvs, 128);
	assert_int_equal(v.book_bytes, book);
	/* ties in turn from load.tie; fewer jobs first */
	idle(&s, 3, 1000);
	lim.job_threads = 2;
	s.load.tie = 1;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.lanes, 2);
	assert_int_equal(v.lane_thread[0], 1);
	assert_int_equal(v.lane_thread[1], 2);
	s.jobs[1] = 1;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.lane_thread[0], 2);
	assert_int_equal(v.lane_thread[1], 0);
}

/* The order: a job that fails every rule is refused by the first of them;
 * taking the rules away one by one shows the next. */
static void test_order(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(4096, 8, 128); /* under min-chunk: kept */

	idle(&s, 1, 16);
	lim.sealed = true;
	lim.min_chunk = 8;
	lim.max_inflight = 4096; /* chunk falls to the seal's floor */
	lim.memory_budget = 1000;
	s.load.njobs = 64;
	s.load.mem_used = 900;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_SEALED_CHUNK);
	lim.sealed = false;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MAX_JOBS);
	s.load.njobs = 0;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MEMORY_SHARE);
	lim.max_memory_share = 1;
	lim.memory_budget = v.mem_bytes + 899; /* free: 899 short */
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_MEMORY_BUDGET);
	s.load.mem_used = 0;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_RECEIVE_QUEUE);
	s.rx_free[0] = UINT64_MAX;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.rule, ADMIT_OK);
}

/* The grant before the rules: max-window per unit of weight times the
 * weight (max-weight), max-chunk, then max-inflight; multicast results
 * take the multicast cap unless the job asks for unicast, and their NACK
 * buffers and receives. */
static void test_grant(void **state)
{
	(void)state;
	struct admit_limits lim = defaults();
	struct state s;
	struct admit_verdict v;
	struct admit_ask a = ask(2, 100, 8 * M);

	idle(&s, 1, UINT64_MAX);
	lim.max_inflight = 1ull << 40;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.asked_window, 64);
	assert_int_equal(v.asked_chunk, 4 * M);
	assert_int_equal(v.window, 64);
	a.weight = 4;
	lim.max_weight = 2;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.weight, 2);
	assert_int_equal(v.window, 128);
	/* max-inflight: 64 MiB / (4 MiB x 2) = 8 */
	lim.max_inflight = 64 * M;
	admit_decide(&lim, &s.load, &a, &v);
	assert_int_equal(v.window, 8);
	assert_false(v.mc);
	/* multicast */
	lim.mcast = true;
	a = ask(4, 8, 256 * K);
	a.unicast = false;
	admit_decide(&lim, &s.load, &a, &v);
	assert_true(v.mc);
	assert_true(v.mc_capped);
	assert_int_equal(v.window, 2);
	assert_int_equal(v.recvs, 2 * 4 * 2);
	assert_int_equal(v.mem_bytes, 2 * 256 * K * 5 + 2 * 4 * ADMIT_NACK_UNIT + v.book_bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_admitted),
		cmocka_unit_test(test_max_jobs),
		cmocka_unit_test(test_memory_share),
		cmocka_unit_test(test_memory_budget),
		cmocka_unit_test(test_receive_queue),
		cmocka_unit_test(test_lanes),
		cmocka_unit_test(test_lanes_room),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_grant),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
