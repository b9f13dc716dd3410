/* The split model (plugin/split.c): the fractions the plugin computes for
 * one message, against the closed forms in split.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "split.h"

static struct split_model model(uint32_t n, uint32_t m, double link, double agg, double eff)
{
	return (struct split_model){ .fixed = -1, .link_gbps = link, .agg_gbps = agg, .agg_eff = eff,
				     .nranks = n, .naggs = m, .small_bytes = 64 << 10, .lat_us = 10 };
}

static void parse(void **state)
{
	double v;
	(void)state;
	assert_int_equal(split_parse("auto", &v), 0);
	assert_true(v < 0);
	assert_int_equal(split_parse(NULL, &v), 0);
	assert_true(v < 0);
	assert_int_equal(split_parse("0.25", &v), 0);
	assert_true(v == 0.25);
	assert_int_equal(split_parse("1", &v), 0);
	assert_true(v == 1);
	assert_int_equal(split_parse("1.01", &v), -EINVAL);
	assert_int_equal(split_parse("-0.1", &v), -EINVAL);
	assert_int_equal(split_parse("0.5x", &v), -EINVAL);
	assert_int_equal(split_parse("nan", &v), -EINVAL);
}

/* W=4, one aggregator, equal links: r = 1.5, k = 4. e = 1: a = 1/3 (both
 * links carry 4/3); e = 0.85: a = 1.5 / (4/0.85 + 0.5) = 0.2881. */
static void one_aggregator(void **state)
{
	(void)state;
	struct split_model m = model(4, 1, 100, 100, 1);
	assert_float_equal(split_model_fraction(&m), 1.0 / 3, 1e-9);
	m.agg_eff = 0.85;
	double a = split_model_fraction(&m);
	assert_float_equal(a, 1.5 / (4 / 0.85 + 0.5), 1e-9);
	/* At that a the aggregator, slowed by e, and the node link finish together. */
	assert_float_equal(a * 4 / 0.85, a + (1 - a) * 1.5, 1e-9);
	/* 0 (and anything out of (0, 1]) means 1. */
	m.agg_eff = 0;
	assert_float_equal(split_model_fraction(&m), 1.0 / 3, 1e-9);
	m.agg_eff = 7;
	assert_float_equal(split_model_fraction(&m), 1.0 / 3, 1e-9);
}

/* As many aggregators as nodes: aggregators only is one pipeline and is not
 * slowed by e; it beats any split (measured: 0.85-0.95 were 4-7% slower). */
static void aggregators_not_bottleneck(void **state)
{
	(void)state;
	for (uint32_t n = 2; n <= 64; n *= 2) {
		struct split_model m = model(n, n, 100, 100, 0.85);
		assert_float_equal(split_model_fraction(&m), 1, 0);
		/* N = 2: the ring moves as much (r = 1), the tie goes to it. */
		assert_float_equal(split_fraction(&m, 64 << 20), n > 2 ? 1 : 0, 0);
		m = model(n, n / 2 ? n / 2 : 1, 100, 400, 0.5); /* faster aggregators */
		assert_float_equal(split_model_fraction(&m), 1, 0);
	}
}

/* k slightly above 1: a = 1 costs k, the split a_e + (1-a_e) r; the cheaper wins. */
static void near_balance(void **state)
{
	(void)state;
	struct split_model m = model(4, 4, 100, 95, 0.85); /* k = 1.053 */
	assert_float_equal(split_model_fraction(&m), 1, 0);
	m = model(4, 2, 100, 100, 0.85); /* k = 2: a_e = 1.5/(2/0.85+0.5) = 0.5258 */
	assert_float_equal(split_model_fraction(&m), 1.5 / (2 / 0.85 + 0.5), 1e-9);
	m = model(2, 1, 100, 100, 1); /* r = 1, k = 2: a = 1/2 */
	assert_float_equal(split_model_fraction(&m), 0.5, 1e-9);
}

static void per_message(void **state)
{
	(void)state;
	struct split_model m = model(4, 1, 0.5, 0.5, 0.85);
	double a = split_model_fraction(&m);
	/* Small: fewer hops (aggregators, 2 < 6). */
	assert_float_equal(split_fraction(&m, 8), 1, 0);
	assert_float_equal(split_fraction(&m, 64 << 10), 1, 0);
	/* Large on slow links: the split. */
	assert_float_equal(split_fraction(&m, 64 << 20), a, 0);
	/* Shared host: never a split, ring (cheaper than 4x through one aggregator). */
	m.shared_host = true;
	assert_float_equal(split_fraction(&m, 64 << 20), 0, 0);
	/* A fixed split is returned as given. */
	m = model(4, 1, 0.5, 0.5, 0.85);
	m.fixed = 0.3;
	assert_float_equal(split_fraction(&m, 64 << 20), 0.3, 0);
	/* No aggregators: the ring. */
	m = model(4, 0, 0.5, 0.5, 0.85);
	assert_float_equal(split_fraction(&m, 64 << 20), 0, 0);
}

static void counts(void **state)
{
	(void)state;
	assert_int_equal(split_count(0, 1000, 4), 0);
	assert_int_equal(split_count(1, 1001, 4), 1001);
	assert_int_equal(split_count(0.5, 1000, 4), 496); /* 500 rounded down to 16 elements */
	assert_int_equal(split_count(0.2881, 1 << 24, 4) % 16, 0);
	assert_true(split_count(0.9999, 10, 8) <= 10);
}

static void local_hosts(void **state)
{
	(void)state;
	assert_true(split_hosts_local("127.0.0.1:7800,127.0.0.2:7800"));
	assert_true(split_hosts_local("[::1]:7800, localhost:1"));
	assert_false(split_hosts_local("127.0.0.1:7800,10.0.0.2:7800"));
	assert_false(split_hosts_local(""));
	assert_false(split_hosts_local(NULL));
}

/* Windows (split_window_agg): all to one path, by hops and bytes.
 * N = 16, M = 2, equal 25 Gb/s links, 10 us a hop: lk = 0.32 ns/B, the
 * aggregator's 8/25 x 16/2 = 2.56 ns/B; crossover 13 x 10 us / (2.56 -
 * 0.3) ns/B = 57522 bytes. */
static void windows(void **state)
{
	(void)state;
	struct split_model m = model(16, 2, 25, 25, 0.85);
	double lk = 8 / 25.0, ag = 8 / 25.0 * 16 / 2, x = 13 * 10e3 / (ag - 15.0 / 16 * lk);
	/* allgather: (N-1)/M out of an aggregator instead of N/M into it */
	double agg_ag = 8 / 25.0 * 15 / 2, xg = 13 * 10e3 / (agg_ag - 15.0 / 16 * lk);
	assert_true(xg > x);
	for (int g = 0; g < 2; g++) {
		assert_true(split_window_agg(&m, 1, g));
		assert_true(split_window_agg(&m, (size_t)(g ? xg : x) - 64, g));
		assert_false(split_window_agg(&m, (size_t)(g ? xg : x) + 64, g));
	}
	assert_true(split_window_agg(&m, (size_t)x + 64, true)); /* between the two */
	/* 3 nodes: 2 hops either way, the ring moves fewer bytes */
	m = model(3, 1, 25, 25, 0.85);
	assert_false(split_window_agg(&m, 8, false));
	assert_false(split_window_agg(&m, 8, true));
	/* 4 nodes, one hop saved */
	m = model(4, 4, 25, 25, 0.85);
	assert_true(split_window_agg(&m, 8, false));
	/* fixed: any share sends them, 0 keeps the ring; never without
	 * aggregators, an empty window or above the staging cap */
	m = model(3, 1, 25, 25, 0.85);
	m.fixed = 0.25;
	assert_true(split_window_agg(&m, 1 << 20, false));
	assert_false(split_window_agg(&m, SPLIT_WINDOW_AGG_MAX + 1, true));
	assert_false(split_window_agg(&m, 0, false));
	m.fixed = 0;
	assert_false(split_window_agg(&m, 8, true));
	m.fixed = 1;
	m.naggs = 0;
	assert_false(split_window_agg(&m, 8, false));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse),
		cmocka_unit_test(one_aggregator),
		cmocka_unit_test(aggregators_not_bottleneck),
		cmocka_unit_test(near_balance),
		cmocka_unit_test(per_message),
		cmocka_unit_test(counts),
		cmocka_unit_test(local_hosts),
		cmocka_unit_test(windows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
