/* tools/plan_model.c, the sizing model behind `sumcastctl plan`: its
 * invariants. Times never fall as the message grows; the tree's bytes per
 * node are S (1 + 2/F') and its shape is the plugin's tree's (groups of at most
 * F, as even as possible); the grant and memory follow the daemons'
 * in-flight cap rule; the ring time is 2(N-1) hops + r S / B; on loopback
 * the harness's napping adds its terms past 8 node processes per core and
 * connect is (a P + b P^2) / K; bad input is refused with a sentence. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../tools/plan_model.h"
#include "../../plugin/tree_plan.h"

static struct plan_in fabric(uint32_t n, uint32_t h, uint32_t m, double b, double ba, uint64_t s)
{
	struct plan_in in;

	memset(&in, 0, sizeof(in));
	in.nodes = n;
	in.heads = h;
	in.aggs = m;
	in.link_gbps = b;
	in.agg_link_gbps = ba;
	in.bytes = s;
	plan_in_defaults(&in);
	return in;
}

static struct plan_out run(const struct plan_in *in)
{
	struct plan_out o;
	char err[256] = "";

	if (plan_run(in, &o, err, sizeof(err)))
		fail_msg("plan_run refused N=%u M=%u S=%llu: %s", in->nodes, in->aggs,
			 (unsigned long long)in->bytes, err);
	return o;
}

/* Every time is finite, positive and does not fall as S doubles, in both
 * modes, flat and tree, over 8 B .. 1 GiB. */
static void monotonic_in_bytes(void **state)
{
	static const uint32_t ns[] = { 2, 4, 16, 64, 65, 256, 1024, 4096 };
	static const uint32_t ms[] = { 1, 2, 8, 64 };

	(void)state;
	for (int lb = 0; lb < 2; lb++)
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			for (size_t k = 0; k < sizeof(ms) / sizeof(ms[0]); k++) {
				struct plan_in in = fabric(ns[i], ns[i] >= 256 ? 8 : 1, ms[k], 100, 200, 8);
				struct plan_out prev;
				in.loopback = lb;
				in.cores = lb ? 2 : 1;
				if (lb && ns[i] > 64)
					continue;
				memset(&prev, 0, sizeof(prev));
				for (uint64_t s = 8; s <= (1ull << 30); s *= 2) {
					in.bytes = s;
					struct plan_out o = run(&in);
					assert_true(isfinite(o.t_ring_us) && o.t_ring_us > 0);
					assert_true(isfinite(o.t_agg_us) && o.t_agg_us > 0);
					assert_true(isfinite(o.t_auto_us) && o.t_auto_us > 0);
					if (o.t_ring_us < prev.t_ring_us * (1 - 1e-9) ||
					    o.t_agg_us < prev.t_agg_us * (1 - 1e-9))
						fail_msg("N=%u M=%u loopback %d: %llu B ring %.3f agg %.3f us, "
							 "half of it %.3f / %.3f", ns[i], ms[k], lb,
							 (unsigned long long)s, o.t_ring_us, o.t_agg_us,
							 prev.t_ring_us, prev.t_agg_us);
					/* auto is one of its paths' times or a split between */
					assert_true(o.split >= 0 && o.split <= 1);
					assert_true(o.speedup_vs_ring > 0);
					prev = o;
				}
			}
}

/* The tree (plugin/tree_plan.h): G = ceil(N/F) groups, F' = ceil(N/G), bytes per node
 * S (1 + 2/F'), the largest job's fan-in max(F', G), two levels up to F^2. */
static void tree_shape_and_bytes(void **state)
{
	static const struct {
		uint32_t n, f, g, fp;
	} c[] = { { 64, 64, 1, 64 }, { 65, 64, 2, 33 }, { 100, 64, 2, 50 }, { 256, 64, 4, 64 },
		  { 1024, 64, 16, 64 }, { 4096, 64, 64, 64 }, { 16, 4, 4, 4 }, { 10, 4, 3, 4 } };

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint32_t g, fp;
		plan_tree_shape(c[i].n, c[i].f, &g, &fp);
		assert_int_equal(g, c[i].g);
		assert_int_equal(fp, c[i].fp);
		assert_true(fp <= c[i].f && g * fp >= c[i].n && (g - 1) * fp < c[i].n);

		struct plan_in in = fabric(c[i].n, 1, 8, 100, 100, 256u << 20);
		in.fan_in = c[i].f;
		struct plan_out o = run(&in);
		assert_int_equal(o.tree_levels, g > 1 ? 2 : 1);
		assert_true(fabs(o.byte_factor - (g > 1 ? 1 + 2.0 / fp : 1)) < 1e-12);
		assert_int_equal(o.max_job_ranks, g > 1 ? (fp > g ? fp : g) : c[i].n);
		assert_int_equal(o.jobs_per_agg, g > 1 ? 2 * g + fp : 1);
	}
	/* the node link's share: with aggregators to spare the tree's time is
	 * the flat one's times the byte factor (bandwidth-bound, 1 GiB) */
	struct plan_in flat = fabric(256, 1, 4096, 100, 400, 1ull << 30), tree = flat;
	flat.fan_in = 256;
	flat.agg_threads = 64;
	tree = flat;
	tree.fan_in = 64;
	struct plan_out of = run(&flat), ot = run(&tree);
	assert_int_equal(of.tree_levels, 1);
	assert_int_equal(ot.tree_levels, 2);
	double want = (1 + 2.0 / 64), got = ot.t_agg_us / of.t_agg_us;
	if (fabs(got - want) > 0.002)
		fail_msg("tree / flat %.5f, want %.5f", got, want);
	/* beyond two levels: refused */
	struct plan_in big = fabric(4097, 1, 8, 100, 100, 1 << 20);
	struct plan_out o;
	char err[256] = "";
	assert_int_equal(plan_run(&big, &o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "two levels"));
}

/* The grant (common/grant.h): w = min(window, max(2, floor(cap / (c N)))); while 2 c N >
 * cap the chunk halves down to min-chunk; memory w c (N + 1, + 2 with 16-bit
 * types) + bookkeeping; posted receives w N. */
static void grant_and_memory(void **state)
{
	static const struct {
		uint32_t n, w;
		uint64_t c;
	} c[] = { { 2, 8, 256 << 10 }, { 32, 8, 256 << 10 }, { 33, 7, 256 << 10 }, { 64, 4, 256 << 10 },
		  { 128, 2, 256 << 10 }, { 129, 3, 128 << 10 }, { 1024, 2, 32 << 10 },
		  { 4096, 2, 16 << 10 } /* the floor: 2 x 16K x 4096 = 128 MiB, left above the cap */ };

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct plan_in in = fabric(c[i].n, 1, 1, 100, 100, 1 << 20);
		struct plan_grant g;
		plan_grant(&in, c[i].n, NULL, &g);
		if (g.window != c[i].w || g.chunk != c[i].c)
			fail_msg("N=%u: window %u chunk %llu, want %u %llu", c[i].n, g.window,
				 (unsigned long long)g.chunk, c[i].w, (unsigned long long)c[i].c);
		uint64_t book = 976 + 192ull * c[i].n + g.window * (128 + 272ull * c[i].n); /* ADMIT_SIZES_LP64 */
		assert_int_equal(g.mem_bytes, (uint64_t)g.window * g.chunk * (c[i].n + 1) + book);
		assert_int_equal(g.posted_recvs, (uint64_t)g.window * c[i].n);
		if (c[i].n <= 1024) /* the cap holds wherever min-chunk allows */
			assert_true((uint64_t)g.window * g.chunk * c[i].n <= in.max_inflight);
		in.wide_types = true;
		plan_grant(&in, c[i].n, NULL, &g);
		assert_int_equal(g.mem_bytes, (uint64_t)g.window * g.chunk * (c[i].n + 2) + book);

		/* per aggregator: H jobs of the flat communicator */
		in.wide_types = false;
		in.heads = 8;
		struct plan_out o = run(&in);
		if (o.tree_levels == 1) {
			plan_grant(&in, c[i].n, NULL, &g);
			assert_int_equal(o.agg_mem_bytes, 8 * g.mem_bytes);
			assert_int_equal(o.agg_posted_recvs, 8 * g.posted_recvs);
		}
	}
	/* the tree: 2G jobs of F' ranks and F' jobs of G ranks per head */
	struct plan_in in = fabric(1024, 8, 4, 100, 100, 1 << 20);
	struct plan_grant gf, gg;
	struct plan_out o = run(&in);
	struct tree_shape sh;
	tree_shape_of(1024, 64, &sh);
	plan_grant(&in, 64, &sh, &gf);
	plan_grant(&in, 16, &sh, &gg);
	/* the tree's inner jobs ask for their share of one cap (plugin/tree_plan.c) */
	assert_true(2 * 16 * gf.window * gf.chunk * 64 + 64 * gg.window * gg.chunk * 16 <= 2 * (64ull << 20));
	assert_int_equal(o.agg_mem_bytes, 8 * (2 * 16 * gf.mem_bytes + 64 * gg.mem_bytes));
	assert_int_equal(o.agg_posted_recvs, 8 * (2 * 16 * gf.posted_recvs + 64 * gg.posted_recvs));
}

/* The ring: 2(N-1) hops + 2(N-1)/N S over a node link at its efficiency. */
static void ring_formula(void **state)
{
	(void)state;
	for (uint32_t n = 2; n <= 4096; n *= 4) {
		struct plan_in in = fabric(n, 1, 2, 100, 100, 64u << 20);
		in.fan_in = 64;
		struct plan_out o = run(&in);
		double b = 100e9 / 8 * in.cost.link_eff;
		double want = 2.0 * (n - 1) * in.cost.hop_us + 2.0 * (n - 1) / n * (64u << 20) / b * 1e6;
		if (fabs(o.t_ring_us - want) > want * 1e-9)
			fail_msg("N=%u ring %.3f us, want %.3f", n, o.t_ring_us, want);
	}
}

static struct plan_out loopback(uint32_t n, uint64_t s, const struct plan_costs *c)
{
	struct plan_in in = fabric(n, 1, 2, 0, 0, s);

	in.loopback = true;
	in.cores = 2;
	if (c)
		in.cost = *c;
	return run(&in);
}

/* Loopback, past lb_nap_per_core node processes per core (the harness's
 * napping waits): each of the ring's 2(N-1) steps costs lb_ring_nap_us
 * more, plus, for a segment above the eager cut, one of the per-byte
 * figures (common/chunk.h's cut: a segment of up to 64 KiB is eager
 * columns, above it rendezvous); each daemon message lb_agg_nap_* per
 * process / K; none of it at or below the threshold. Connect is
 * (a P + b P^2) / K. */
static void loopback_napping(void **state)
{
	struct plan_costs def, spin;

	(void)state;
	plan_costs_default(&def);
	spin = def;
	spin.lb_ring_nap_us = spin.lb_ring_nap_data_ns = spin.lb_ring_nap_eager_ns = 0;
	spin.lb_agg_nap_share_us = spin.lb_agg_nap_data_us = 0;
	assert_true(def.lb_nap_per_core > 0 && def.lb_ring_nap_us > 0 && def.lb_agg_nap_share_us > 0);
	static const struct {
		uint32_t n;
		uint64_t s;
		int cut; /* the segment: 0 eager or none, 1 rendezvous, 2 eager columns */
	} c[] = { { 16, 8, 0 }, { 17, 8, 0 }, { 32, 8, 0 }, { 16, 2u << 20, 1 }, { 17, 2u << 20, 1 },
		  { 24, 2u << 20, 1 }, { 32, 2u << 20, 2 }, { 48, 2u << 20, 2 }, { 64, 2u << 20, 2 },
		  { 16, 32u << 20, 1 }, { 32, 32u << 20, 1 }, { 1024, 4u << 20, 0 } };
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct plan_out a = loopback(c[i].n, c[i].s, &def), b = loopback(c[i].n, c[i].s, &spin);
		bool nap = c[i].n > def.lb_nap_per_core * 2;
		double n = c[i].n, procs = n + 2;
		double seg = (double)c[i].s / n;
		double want = nap ? 2 * (n - 1) *
					    (def.lb_ring_nap_us +
					     (c[i].cut == 1 ? seg * def.lb_ring_nap_data_ns * 1e-3 : 0) +
					     (c[i].cut == 2 ? seg * def.lb_ring_nap_eager_ns * 1e-3 : 0))
				  : 0;
		if (fabs(a.t_ring_us - b.t_ring_us - want) > 1e-6 * a.t_ring_us)
			fail_msg("N=%u S=%llu: ring %.3f us, %.3f without napping, want %.3f more", c[i].n,
				 (unsigned long long)c[i].s, a.t_ring_us, b.t_ring_us, want);
		/* 8 B: one message to one aggregator and one back per node */
		if (c[i].s == 8) {
			double w = nap ? 2 * n * procs * def.lb_agg_nap_share_us / 2 : 0;
			if (fabs(a.t_agg_us - b.t_agg_us - w) > 1e-6 * a.t_agg_us)
				fail_msg("N=%u 8 B: aggregators %.3f us, %.3f without napping, want %.3f more",
					 c[i].n, a.t_agg_us, b.t_agg_us, w);
		} else if (nap) {
			assert_true(a.t_agg_us > b.t_agg_us);
		} else {
			assert_true(a.t_agg_us == b.t_agg_us);
		}
		double p = n, conn = (def.lb_conn_us * p + def.lb_conn_sq_us * p * p) * 1e-6 / 2;
		if (fabs(a.connect_s - conn) > 1e-9 * conn)
			fail_msg("N=%u: connect %.6f s, want %.6f", c[i].n, a.connect_s, conn);
	}
}

/* Split 1 (the aggregators alone) where their links match the nodes'
 * (M B_a >= N B), an interior split below that, the speed-up at most the
 * ring's byte factor r when the aggregators carry everything. */
static void split_and_speedup(void **state)
{
	(void)state;
	struct plan_in in = fabric(16, 1, 16, 100, 100, 1u << 30);
	struct plan_out o = run(&in);
	assert_true(o.split == 1);
	/* r = 1.875 on bandwidth, a little more with the ring's 30 hops against 2 */
	assert_true(o.speedup_vs_ring > 1.85 && o.speedup_vs_ring < 1.9);
	assert_int_equal(o.aggs_needed, 16);
	in.aggs = 2;
	o = run(&in);
	assert_true(o.split > 0 && o.split < 1);
	assert_true(o.speedup_vs_ring > 1 && o.speedup_vs_ring < 1.2);
	/* 400 Gb/s aggregators for 100 Gb/s nodes: N/4 of them, once their CPU
	 * keeps up (8 heads' jobs over 8 data threads); one data thread cannot
	 * take in 50 GB/s (the reduce alone runs at 45) */
	in.agg_link_gbps = 400;
	in.aggs = 2;
	in.heads = 8;
	in.agg_threads = 8;
	in.link_gbps = 100.0 / 8; /* each head's NIC: 100 Gb/s a node */
	o = run(&in);
	assert_int_equal(o.aggs_needed, 4);
	in.link_gbps = 100; /* 100 Gb/s a head: N H B / B_a = 32 */
	o = run(&in);
	assert_int_equal(o.aggs_needed, 32);
	in.heads = 1; /* one 100 Gb/s node link, one data thread */
	in.agg_threads = 1;
	o = run(&in);
	assert_true(o.aggs_needed > 4);
}

/* Admission at the daemons' defaults: 1 GiB budget (a job at most half),
 * a receive queue of 8192 less 256 per data thread. */
static void admission(void **state)
{
	(void)state;
	struct plan_in in = fabric(16, 1, 4, 100, 100, 1 << 20);
	struct plan_out o = run(&in);
	assert_null(o.refused);
	in = fabric(4096, 1, 64, 100, 100, 1 << 20);
	in.fan_in = 4096; /* flat: 2 x 16 KiB x 4096 = 8192 receives on one thread */
	o = run(&in);
	assert_int_equal(o.agg_posted_recvs, 8192);
	assert_string_equal(o.refused, "receive-queue");
	assert_int_equal(o.jobs_admitted, 0);
	in.rx_queue = 16384;
	o = run(&in);
	assert_null(o.refused);
	in.heads = 8; /* 8 jobs of 128 MiB: over 1 GiB */
	in.agg_threads = 8;
	o = run(&in);
	assert_string_equal(o.refused, "memory-budget");
	assert_int_equal(o.jobs_admitted, 7);
	in.mem_budget = 2ull << 30;
	o = run(&in);
	assert_null(o.refused);
	assert_int_equal(o.jobs_admitted, 8);
	/* one job over max-memory-share (0.5) of the budget */
	in.mem_budget = 200ull << 20;
	o = run(&in);
	assert_string_equal(o.refused, "memory-share");
	/* max-jobs: N = 128, H = 8 is a tree of 2 x 64, 8 x (2 x 2 + 64) = 544
	 * jobs per aggregator; a daemon at its defaults takes 64 */
	in = fabric(128, 8, 16, 100, 400, 1 << 20);
	in.agg_threads = 8;
	o = run(&in);
	assert_int_equal(o.jobs_per_agg, 544);
	assert_string_equal(o.refused, "max-jobs");
	assert_int_equal(o.jobs_admitted, 64);
	in.max_jobs = 544;
	o = run(&in);
	assert_null(o.refused);
	assert_int_equal(o.jobs_admitted, 544);
	/* a sealed daemon refuses a chunk that cannot carry the seal */
	in = fabric(4, 1, 1, 100, 100, 1 << 20);
	in.chunk = 128;
	in.min_chunk = 64;
	in.sealed = true;
	o = run(&in);
	assert_string_equal(o.refused, "sealed-chunk");
}

static void refuses_bad_input(void **state)
{
	struct plan_out o;
	char err[256];

	(void)state;
	struct plan_in in = fabric(1, 1, 1, 100, 100, 8);
	assert_int_equal(plan_run(&in, &o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nodes"));
	in = fabric(4, 1, 0, 100, 100, 8);
	assert_int_equal(plan_run(&in, &o, err, sizeof(err)), -1);
	in = fabric(4, 1, 1, 0, 100, 8);
	assert_int_equal(plan_run(&in, &o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "link"));
	in = fabric(4, 1, 1, 100, 100, 0);
	assert_int_equal(plan_run(&in, &o, err, sizeof(err)), -1);
	in = fabric(4, 1, 1, 100, 100, 8);
	in.chunk = 100; /* not a multiple of 8 */
	assert_int_equal(plan_run(&in, &o, err, sizeof(err)), -1);
}

/* A given split (the one a communicator measured: plugin/tuner.c) is the
 * one costed: at 0 the ring's time, at 1 the aggregators' alone; the best
 * split is never slower than a given one; a split outside [0, 1] is
 * refused. */
static void split_given(void **state)
{
	struct plan_in in = fabric(8, 1, 4, 100, 100, 64u << 20);
	struct plan_out best, at0, at1, half;
	char err[256] = "";

	(void)state;
	best = run(&in);
	in.split_given = true;
	in.split_at = 0;
	at0 = run(&in);
	assert_true(at0.split == 0);
	assert_true(fabs(at0.t_auto_us - at0.t_ring_us) < 1e-9);
	in.split_at = 1;
	at1 = run(&in);
	assert_true(fabs(at1.t_auto_us - at1.t_agg_us) < 1e-9);
	in.split_at = 0.5;
	half = run(&in);
	assert_true(half.split == 0.5);
	assert_true(best.t_auto_us <= at0.t_auto_us && best.t_auto_us <= at1.t_auto_us &&
		    best.t_auto_us <= half.t_auto_us);
	assert_true(fabs(half.t_ring_us - best.t_ring_us) < 1e-9);
	in.split_at = 1.5;
	assert_int_equal(plan_run(&in, &half, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "split"));
}

/* A job is spread over its lanes (docs/daemon.md, "Data plane"): one job
 * of 16 nodes on 16 400G aggregators is bound by one data thread's CPU,
 * not by 4 (the lanes carry it at the links' speed); job-threads 1 is the
 * one thread again; the lanes stop at 8 and at the granted window. */
static void job_lanes(void **state)
{
	(void)state;
	struct plan_in in = fabric(16, 1, 16, 400, 400, 256ull << 20);
	struct plan_out one = run(&in);
	assert_int_equal(one.job_lanes, 1);
	assert_string_equal(one.bound, "agg-cpu");
	in.agg_threads = 4;
	struct plan_out four = run(&in);
	assert_int_equal(four.job_lanes, 4);
	assert_string_not_equal(four.bound, "agg-cpu");
	assert_true(four.t_agg_us < one.t_agg_us);
	in.job_threads = 1;
	struct plan_out pinned = run(&in);
	assert_int_equal(pinned.job_lanes, 1);
	assert_string_equal(pinned.bound, "agg-cpu");
	in.job_threads = 0;
	in.agg_threads = 16;
	assert_int_equal(run(&in).job_lanes, 8); /* WIRE_LANES_MAX */
	in.window = 2;
	assert_int_equal(run(&in).job_lanes, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(monotonic_in_bytes), cmocka_unit_test(tree_shape_and_bytes),
		cmocka_unit_test(grant_and_memory),   cmocka_unit_test(ring_formula),
		cmocka_unit_test(split_and_speedup),  cmocka_unit_test(admission),
		cmocka_unit_test(refuses_bad_input),  cmocka_unit_test(loopback_napping),
		cmocka_unit_test(split_given),        cmocka_unit_test(job_lanes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
