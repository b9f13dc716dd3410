/* The tuner's cost function and table edit (plugin/tuner.c), alone: what
 * CollNet costs by the sizing model at sizes on both sides of its
 * crossover, what the table NCCL hands over looks like afterwards, and the
 * live figures a communicator publishes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../plugin/nccl_tuner.h"
#include "../../plugin/tuner.h"

/* N nodes, M aggregators, links of `gbps` everywhere, 10 us a hop, RDMA. */
static struct tuner_figs figs(uint32_t n, uint32_t m, double gbps)
{
	struct tuner_figs f;

	memset(&f, 0, sizeof(f));
	f.nodes = n;
	f.aggs = m;
	f.link_gbps = gbps;
	f.agg_gbps = gbps;
	f.hop_us = 10;
	f.agg_eff = 0.85;
	f.fan_in = 64;
	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++)
		f.split_ppm[c] = -1;
	return f;
}

/* 8 B over 4 nodes: the ring takes 6 hops, the tree 4, CollNet its four
 * round trips (8 hops) and more: NCCL's. */
static void small_loses(void **state)
{
	struct tuner_figs f = figs(4, 2, 100);
	struct tuner_est e;
	(void)state;
	assert_int_equal(tuner_allreduce_est(&f, 8, 1, &e), 0);
	assert_false(e.wins);
	assert_true(e.collnet_us >= TUNER_AGG_RTTS * 2 * f.hop_us);
	assert_true(e.tree_us < e.collnet_us);
	assert_true(e.tree_us < e.ring_us);
}

/* 64 MiB, four aggregators as fast as the nodes: CollNet moves S each way
 * on a node link, the ring and the tree about 2S (N-1)/N: CollNet. */
static void large_wins(void **state)
{
	struct tuner_figs f = figs(4, 4, 100);
	struct tuner_est e;
	(void)state;
	assert_int_equal(tuner_allreduce_est(&f, 64u << 20, 1, &e), 0);
	assert_true(e.wins);
	assert_true(e.collnet_us < e.ring_us * 0.8);
	/* the bytes: 64 MiB at 100 Gb/s x 0.957 is 5.6 ms; nothing is faster */
	assert_true(e.collnet_us > 5400 && e.collnet_us < 7000);
}

/* One slow aggregator for 8 nodes: its link carries 8 S; the split sends
 * most to the ring, which it cannot beat by much: still no worse than the
 * ring in the model, but the fixed round trips make it lose at 1 MiB. */
static void slow_aggregators_lose(void **state)
{
	struct tuner_figs f = figs(8, 1, 100);
	struct tuner_est e;
	(void)state;
	f.agg_gbps = 10;
	assert_int_equal(tuner_allreduce_est(&f, 1u << 20, 1, &e), 0);
	assert_false(e.wins);
}

/* No aggregator joined: CollNet is the plugin's ring on host memory. */
static void no_aggregators(void **state)
{
	struct tuner_figs f = figs(4, 0, 100);
	struct tuner_est e;
	(void)state;
	assert_int_equal(tuner_allreduce_est(&f, 64u << 20, 1, &e), 0);
	assert_false(e.wins);
	assert_int_equal(tuner_crossover(&f, 1), 0);
}

/* The crossover: CollNet loses at half of it and wins at it. */
static void crossover_both_sides(void **state)
{
	struct tuner_figs f = figs(4, 4, 100);
	struct tuner_est below, at;
	uint64_t x;
	(void)state;
	x = tuner_crossover(&f, 1);
	assert_true(x > 8 && x <= (64u << 20));
	assert_int_equal(tuner_allreduce_est(&f, x / 2, 1, &below), 0);
	assert_int_equal(tuner_allreduce_est(&f, x, 1, &at), 0);
	assert_false(below.wins);
	assert_true(at.wins);
}

/* More aggregators carry more of the bytes at once: CollNet wins from
 * smaller sizes (8 nodes: one aggregator's link takes 8 S, eight take S). */
static void more_aggregators_earlier(void **state)
{
	struct tuner_figs f1 = figs(8, 1, 100), f2 = figs(8, 2, 100), f8 = figs(8, 8, 100);
	(void)state;
	uint64_t x1 = tuner_crossover(&f1, 1), x2 = tuner_crossover(&f2, 1), x8 = tuner_crossover(&f8, 1);
	assert_true(x8 > 0);
	assert_true(x8 < x2);
	assert_true(x2 < x1);
}

/* The split the adaptive control measured is the one costed: measured at
 * 0 (all on the ring) CollNet is the ring plus its fixed round trips. */
static void measured_split(void **state)
{
	struct tuner_figs f = figs(4, 4, 100);
	struct tuner_est model, ring_only;
	size_t s = 16u << 20;
	int cls = split_adapt_class(s);
	(void)state;
	assert_true(cls >= 0);
	assert_int_equal(tuner_allreduce_est(&f, s, 1, &model), 0);
	f.split_ppm[cls] = 0;
	assert_int_equal(tuner_allreduce_est(&f, s, 1, &ring_only), 0);
	assert_true(model.wins);
	assert_false(ring_only.wins);
	assert_true(ring_only.split == 0);
	assert_true(ring_only.collnet_us > ring_only.ring_us);
	/* another class is not affected */
	f.split_ppm[cls] = -1;
	f.split_ppm[(cls + 1) % SPLIT_ADAPT_CLASSES] = 0;
	assert_int_equal(tuner_allreduce_est(&f, s, 1, &ring_only), 0);
	assert_true(fabs(ring_only.collnet_us - model.collnet_us) < 1e-6);
}

/* CollNet Direct: each of H heads moves S/H on its own link. */
static void direct_heads(void **state)
{
	struct tuner_figs f = figs(4, 8, 100);
	struct tuner_est chain, direct;
	(void)state;
	assert_int_equal(tuner_allreduce_est(&f, 64u << 20, 1, &chain), 0);
	assert_int_equal(tuner_allreduce_est(&f, 64u << 20, 8, &direct), 0);
	assert_true(direct.collnet_us < chain.collnet_us / 2);
	assert_int_equal(tuner_allreduce_est(&f, 8, 0, &direct), -EINVAL);
	f.nodes = 1;
	assert_int_equal(tuner_allreduce_est(&f, 8, 1, &direct), -EINVAL);
}

#define NA 7
#define NP 3

static void table_fill(float t[NA][NP])
{
	for (int a = 0; a < NA; a++)
		for (int p = 0; p < NP; p++)
			t[a][p] = (float)NCCL_ALGO_PROTO_IGNORE;
	for (int p = 0; p < NP; p++) {
		t[NCCL_ALGO_TREE][p] = 100.0f + p;
		t[NCCL_ALGO_RING][p] = 200.0f + p;
	}
	t[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE] = 20.0f;
	t[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] = 30.0f;
}

/* Losing: CollNet's usable entries become -1, nothing else changes. */
static void table_lose(void **state)
{
	float t[NA][NP], before[NA][NP];
	struct tuner_est e = { .collnet_us = 500, .ring_us = 100, .tree_us = 90, .wins = false };
	(void)state;
	table_fill(t);
	memcpy(before, t, sizeof(t));
	assert_int_equal(tuner_table_apply(&t[0][0], NA, NP, &e, &e), 2);
	assert_true(t[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE] == (float)NCCL_ALGO_PROTO_IGNORE);
	assert_true(t[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] == (float)NCCL_ALGO_PROTO_IGNORE);
	for (int a = 0; a < NA; a++)
		for (int p = 0; p < NP; p++)
			if (a != NCCL_ALGO_COLLNET_DIRECT && a != NCCL_ALGO_COLLNET_CHAIN)
				assert_true(t[a][p] == before[a][p]);
	/* LL and LL128 on CollNet stay as NCCL left them (ignored) */
	assert_true(t[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_LL] == (float)NCCL_ALGO_PROTO_IGNORE);
}

/* Winning: the model's time where it is below NCCL's best other entry,
 * else just under that, both rows by one factor (their order kept). */
static void table_win(void **state)
{
	float t[NA][NP];
	struct tuner_est d = { .collnet_us = 50, .wins = true }, c = { .collnet_us = 80, .wins = true };
	(void)state;
	table_fill(t);
	assert_int_equal(tuner_table_apply(&t[0][0], NA, NP, &d, &c), 2);
	assert_true(fabsf(t[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE] - 50) < 1e-3);
	assert_true(fabsf(t[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] - 80) < 1e-3);
	d.collnet_us = 400;
	c.collnet_us = 800;
	table_fill(t);
	tuner_table_apply(&t[0][0], NA, NP, &d, &c);
	float td = t[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE];
	float tc = t[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE];
	assert_true(td <= 100 * TUNER_UNDERCUT + 1e-3);
	assert_true(td < tc);
	assert_true(fabsf(tc / td - 2) < 1e-3);
	assert_true(t[NCCL_ALGO_TREE][NCCL_PROTO_LL] == 100.0f);
	/* NCCL's -1 is never made usable */
	table_fill(t);
	t[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE] = (float)NCCL_ALGO_PROTO_IGNORE;
	assert_int_equal(tuner_table_apply(&t[0][0], NA, NP, &d, NULL), 0);
	assert_true(t[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE] == (float)NCCL_ALGO_PROTO_IGNORE);
	assert_true(t[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] == 30.0f);
}

/* NCCL_ALGO=collnet (nothing else usable): CollNet is never ruled out,
 * which would leave NCCL without an algorithm. And NCCL 2.22's table of 6
 * algorithms is handled as such. */
static void table_only_collnet(void **state)
{
	float t[NA][NP];
	struct tuner_est e = { .collnet_us = 500, .wins = false };
	(void)state;
	table_fill(t);
	for (int p = 0; p < NP; p++)
		t[NCCL_ALGO_TREE][p] = t[NCCL_ALGO_RING][p] = (float)NCCL_ALGO_PROTO_IGNORE;
	assert_int_equal(tuner_table_apply(&t[0][0], NA, NP, &e, &e), 0);
	assert_true(t[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] == 30.0f);
	float t6[6][NP];
	for (int a = 0; a < 6; a++)
		for (int p = 0; p < NP; p++)
			t6[a][p] = a == NCCL_ALGO_COLLNET_CHAIN && p != NCCL_PROTO_SIMPLE ? -1.0f : 10.0f * (a + 1);
	assert_int_equal(tuner_table_apply(&t6[0][0], 6, NP, &e, &e), 4);
	assert_true(t6[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] == -1.0f);
	assert_true(t6[5][NCCL_PROTO_SIMPLE] == 60.0f);
}

/* A communicator's figures reach a tuner of as many nodes, and only it;
 * the generation moves with each publication that changes a figure; the
 * oldest of nine node counts goes. */
static void live(void **state)
{
	struct tuner_figs f = figs(4, 3, 200), got;
	uint64_t g0 = tuner_live_gen();
	(void)state;
	assert_int_equal(tuner_live_get(4, &got), -ENOENT);
	tuner_live_publish(&f);
	assert_true(tuner_live_gen() > g0);
	assert_int_equal(tuner_live_get(4, &got), 0);
	assert_true(got.live);
	assert_int_equal(got.aggs, 3);
	assert_true(got.link_gbps == 200);
	assert_int_equal(tuner_live_get(5, &got), -ENOENT);
	uint64_t g1 = tuner_live_gen();
	tuner_live_publish(&f); /* the same figures again: no news */
	assert_true(tuner_live_gen() == g1);
	f.aggs = 2; /* the same node count again: replaced, not added */
	tuner_live_publish(&f);
	assert_int_equal(tuner_live_get(4, &got), 0);
	assert_int_equal(got.aggs, 2);
	for (uint32_t n = 10; n < 18; n++) {
		f.nodes = n;
		tuner_live_publish(&f);
	}
	assert_int_equal(tuner_live_get(4, &got), -ENOENT);
	assert_int_equal(tuner_live_get(17, &got), 0);
	assert_int_equal(tuner_live_get(10, &got), 0);
}

/* ReduceScatter and AllGather: NCCL's ring does half an AllReduce, the
 * aggregators as much as in one. At 4 nodes the ring wins at every size
 * (CollNet's best is the AllReduce's two times less traffic); at 64 nodes
 * a 64 KiB one is the ring's 63 hops against CollNet's round trips:
 * CollNet; without aggregators never. */
static void rsag(void **state)
{
	struct tuner_figs f4 = figs(4, 4, 100), f64 = figs(64, 8, 100), f0 = figs(64, 0, 100);
	struct tuner_est ar, rs;
	(void)state;
	for (unsigned s = 3; s <= 30; s++) {
		assert_int_equal(tuner_allreduce_est(&f4, (size_t)1 << s, 1, &ar), 0);
		tuner_rsag_est(&ar, f4.aggs, &rs);
		assert_true(rs.ring_us == ar.ring_us / 2 && rs.tree_us == rs.ring_us);
		assert_true(rs.collnet_us == ar.collnet_us);
		assert_false(rs.wins);
	}
	assert_int_equal(tuner_allreduce_est(&f64, 64u << 10, 1, &ar), 0);
	tuner_rsag_est(&ar, f64.aggs, &rs);
	assert_true(rs.wins);
	assert_true(rs.collnet_us < rs.ring_us);
	assert_int_equal(tuner_allreduce_est(&f0, 64u << 10, 1, &ar), 0);
	tuner_rsag_est(&ar, f0.aggs, &rs);
	assert_false(rs.wins);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(small_loses),
		cmocka_unit_test(large_wins),
		cmocka_unit_test(slow_aggregators_lose),
		cmocka_unit_test(no_aggregators),
		cmocka_unit_test(crossover_both_sides),
		cmocka_unit_test(more_aggregators_earlier),
		cmocka_unit_test(measured_split),
		cmocka_unit_test(direct_heads),
		cmocka_unit_test(table_lose),
		cmocka_unit_test(table_win),
		cmocka_unit_test(table_only_collnet),
		cmocka_unit_test(live),
		cmocka_unit_test(rsag),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
