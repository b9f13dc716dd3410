/* The daemon's weighted shares (daemon/pacer.c, pace_shares): the caps it
 * gives jobs of different weights for a measured capacity, from their
 * rates and the caps they had. Figures in bytes/s, capacity 300. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "pacer.h"

#define NEAR(a, b) assert_true((a) > (b) - 1e-6 && (a) < (b) + 1e-6)

/* Not held yet: every job wants more; caps are the weighted shares, with
 * room to grow. */
static void test_first_tick(void **state)
{
	struct pace_share v[2] = { { .weight = 2, .rate = 150 }, { .weight = 1, .rate = 150 } };

	(void)state;
	pace_shares(v, 2, 300);
	NEAR(v[0].cap, 200 * PACE_ROOM);
	NEAR(v[1].cap, 100 * PACE_ROOM);
}

/* Held, both using their caps: the same caps again (a steady state). */
static void test_steady(void **state)
{
	struct pace_share v[2] = { { .weight = 2, .rate = 195, .cap = 200 * PACE_ROOM },
				   { .weight = 1, .rate = 104, .cap = 100 * PACE_ROOM } };

	(void)state;
	pace_shares(v, 2, 300);
	NEAR(v[0].cap, 200 * PACE_ROOM);
	NEAR(v[1].cap, 100 * PACE_ROOM);
}

/* The heavy job wants less than its share (its split moved to the ring):
 * the light one gets the rest; the heavy one keeps its share to come back
 * to. */
static void test_demand_limited(void **state)
{
	struct pace_share v[2] = { { .weight = 2, .rate = 50, .cap = 200 * PACE_ROOM },
				   { .weight = 1, .rate = 104, .cap = 100 * PACE_ROOM } };

	(void)state;
	pace_shares(v, 2, 300);
	NEAR(v[0].cap, 200);
	NEAR(v[1].cap, 250 * PACE_ROOM);
}

/* A job under its cap but over its share is not left alone: the kernel
 * gave it that, not its demand. */
static void test_over_share_held(void **state)
{
	struct pace_share v[2] = { { .weight = 2, .rate = 180, .cap = 0 },
				   { .weight = 1, .rate = 120, .cap = 200 } };

	(void)state;
	pace_shares(v, 2, 300);
	NEAR(v[0].cap, 200 * PACE_ROOM);
	NEAR(v[1].cap, 100 * PACE_ROOM);
}

/* The heavy job under its cap on a full link (the kernel gave the light
 * one as much): marked link, it counts as wanting more, and the light job
 * goes back to its share. Unmarked, the light one would keep 190. */
static void test_full_link(void **state)
{
	struct pace_share v[2] = { { .weight = 2, .rate = 208, .cap = 265, .link = true },
				   { .weight = 1, .rate = 190, .cap = 190 } };

	(void)state;
	pace_shares(v, 2, 398);
	NEAR(v[0].cap, 398.0 * 2 / 3 * PACE_ROOM);
	NEAR(v[1].cap, 398.0 / 3 * PACE_ROOM);
	v[0] = (struct pace_share){ .weight = 2, .rate = 208, .cap = 265 };
	v[1] = (struct pace_share){ .weight = 1, .rate = 190, .cap = 190 };
	pace_shares(v, 2, 398);
	NEAR(v[1].cap, 190 * PACE_ROOM);
}

/* A job that wants no more is charged its rate, not its room to grow, so
 * the others' caps never fall below what they carry now: no spiral down
 * of the measured capacity. */
static void test_no_spiral(void **state)
{
	struct pace_share v[2] = { { .weight = 2, .rate = 150, .cap = 200 * PACE_ROOM },
				   { .weight = 1, .rate = 150, .cap = 150 * PACE_ROOM } };

	(void)state;
	pace_shares(v, 2, 300);
	NEAR(v[0].cap, 200);
	assert_true(v[1].cap >= 150);
	NEAR(v[1].cap, 150 * PACE_ROOM);
}

/* Three jobs, weights 1, 1, 2, all wanting more; and none at all. */
static void test_three_and_none(void **state)
{
	struct pace_share v[3] = { { .weight = 1, .rate = 100 }, { .weight = 1, .rate = 100 },
				   { .weight = 2, .rate = 200 } };

	(void)state;
	pace_shares(v, 3, 400);
	NEAR(v[0].cap, 100 * PACE_ROOM);
	NEAR(v[1].cap, 100 * PACE_ROOM);
	NEAR(v[2].cap, 200 * PACE_ROOM);
	pace_shares(v, 0, 400);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_tick),      cmocka_unit_test(test_steady),
		cmocka_unit_test(test_demand_limited),  cmocka_unit_test(test_over_share_held),
		cmocka_unit_test(test_no_spiral),       cmocka_unit_test(test_three_and_none),
		cmocka_unit_test(test_full_link),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
