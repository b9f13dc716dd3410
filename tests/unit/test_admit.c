/* The in-flight cap (common/grant.c, grant_inflight, which daemon/ctl_admit.c applies): the window
 * and chunk a job is granted for what it asks, its rank count and
 * [job] max-inflight / min-chunk. Figures from docs/daemon.md, "Admission". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "admit.h"
#include "config.h"
#include "grant.h"
#include "job.h"
#include "settings.h"

#define K 1024u
#define M (1024u * 1024u)
#define CAP (64ull * M)
#define MIN (16u * K)

static void grant(uint32_t w, uint32_t c, uint32_t n, uint32_t want_w, uint32_t want_c)
{
	struct grant g = grant_inflight(w, c, n, CAP, MIN, 0);
	assert_int_equal(g.window, want_w);
	assert_int_equal(g.chunk, want_c);
}

/* Small jobs keep what they ask: 8 x 256 KiB x 16 = 32 MiB <= 64 MiB, and
 * 8 x 256 KiB x 32 = 64 MiB exactly. */
static void test_small_jobs_unchanged(void **state)
{
	(void)state;
	grant(8, 256 * K, 1, 8, 256 * K);
	grant(8, 256 * K, 16, 8, 256 * K);
	grant(8, 256 * K, 32, 8, 256 * K);
	grant(64, 4 * K, 64, 64, 4 * K);
}

/* The window comes down first: N = 64 -> 64 MiB / (256 KiB x 64) = 4;
 * N = 33 -> floor(64 / 8.25) = 7; N = 128 -> 2 (2 x 256 KiB x 128 = 64 MiB). */
static void test_window_first(void **state)
{
	(void)state;
	grant(8, 256 * K, 33, 7, 256 * K);
	grant(8, 256 * K, 64, 4, 256 * K);
	grant(8, 256 * K, 128, 2, 256 * K);
	/* never above what was asked */
	grant(3, 256 * K, 64, 3, 256 * K);
	grant(1, 256 * K, 128, 1, 256 * K);
}

/* Then the chunk halves, window 2: N = 256 -> 128 KiB; N = 1024 -> 32 KiB;
 * N = 4096 -> 16 KiB (min-chunk: 2 x 16 KiB x 4096 = 128 MiB, left above
 * the cap for the budget to judge). */
static void test_chunk_halves(void **state)
{
	(void)state;
	grant(8, 256 * K, 129, 3, 128 * K); /* 64 MiB / (128 KiB x 129) = 3.97 */
	grant(8, 256 * K, 256, 2, 128 * K);
	grant(8, 256 * K, 512, 2, 64 * K);
	grant(8, 256 * K, 1024, 2, 32 * K);
	grant(8, 256 * K, 2048, 2, 16 * K);
	grant(8, 256 * K, 4096, 2, 16 * K);
	/* every grant with window >= 2 and chunk above min-chunk fits the cap */
	for (uint32_t n = 1; n <= 4096; n = n * 3 + 1) {
		struct grant g = grant_inflight(8, 256 * K, n, CAP, MIN, 0);
		assert_true(g.window >= 2 && g.window <= 8 && g.chunk % 8 == 0);
		if (g.chunk > MIN)
			assert_true((uint64_t)g.window * g.chunk * n <= CAP);
	}
}

/* A chunk that is not a power of two stays a multiple of 8; halving stops
 * at min-chunk (24 KiB -> 16 KiB, not 12 KiB); a job that asks for less
 * than min-chunk keeps its chunk. */
static void test_chunk_floor(void **state)
{
	(void)state;
	struct grant g = grant_inflight(8, 100008, 4096, CAP, MIN, 0);
	assert_int_equal(g.chunk % 8, 0);
	assert_int_equal(g.chunk, MIN);
	g = grant_inflight(8, 24 * K, 4096, CAP, MIN, 0);
	assert_int_equal(g.chunk, MIN);
	assert_int_equal(g.window, 2);
	g = grant_inflight(8, 4 * K, 100000, CAP, MIN, 0);
	assert_int_equal(g.chunk, 4 * K);
	assert_int_equal(g.window, 2);
	/* odd figures: 100008 -> 50000 -> 25000 (multiples of 8) at N = 1024 */
	g = grant_inflight(8, 100008, 1024, CAP, 8, 0);
	assert_int_equal(g.chunk, 25000);
	assert_int_equal(g.window, 2);
}

/* A sealed job's chunk stays above 2 x JOB_SEAL_ROOM (the seal's room),
 * even with min-chunk 8. */
static void test_sealed_floor(void **state)
{
	(void)state;
	struct grant g = grant_inflight(8, 4 * K, 1u << 20, CAP, 8, 2 * JOB_SEAL_ROOM);
	assert_true(g.chunk > 2 * JOB_SEAL_ROOM);
	assert_true(g.chunk / 2 <= 2 * JOB_SEAL_ROOM + 8);
	/* unsealed it goes on to 32 (2 x 32 x 2^20 = the cap) */
	g = grant_inflight(8, 4 * K, 1u << 20, CAP, 8, 0);
	assert_int_equal(g.chunk, 32);
}

/* Another cap: 1 MiB with 16 ranks and 8 KiB min-chunk -> chunk 32 KiB,
 * window 2; 16 MiB -> window 4 at 256 KiB. */
static void test_other_caps(void **state)
{
	(void)state;
	struct grant g = grant_inflight(8, 256 * K, 16, 1 * M, 8 * K, 0);
	assert_int_equal(g.chunk, 32 * K);
	assert_int_equal(g.window, 2);
	g = grant_inflight(8, 256 * K, 16, 16 * M, 8 * K, 0);
	assert_int_equal(g.chunk, 256 * K);
	assert_int_equal(g.window, 4);
	/* nranks 0 or chunk 0 (refused elsewhere) do not divide by zero */
	g = grant_inflight(8, 256 * K, 0, CAP, MIN, 0);
	assert_int_equal(g.window, 8);
	g = grant_inflight(8, 0, 16, CAP, MIN, 0);
	assert_int_equal(g.window, 8);
	assert_int_equal(g.chunk, 0);
}

/* The daemon's defaults are the constants the plugin's tree and the sizing
 * model assume of a daemon left at its defaults. */
static void test_defaults_shared(void **state)
{
	(void)state;
	struct settings s;
	struct cfg_error err;
	assert_int_equal(cfg_set_defaults(settings_table, &s, &err), 0);
	assert_int_equal(s.max_inflight, GRANT_INFLIGHT_DEFAULT);
	assert_int_equal(s.min_chunk, GRANT_MIN_CHUNK_DEFAULT);
	assert_int_equal(s.mc_inflight, GRANT_MC_INFLIGHT_DEFAULT);
}

/* The bookkeeping sizes sumcastctl plan assumes of a daemon
 * (ADMIT_SIZES_LP64, common/admit.h) are this daemon's structs. */
static void test_plan_sizes(void **state)
{
	(void)state;
	struct admit_sizes d = job_admit_sizes(), p = ADMIT_SIZES_LP64;
	if (sizeof(void *) != 8)
		skip();
	assert_int_equal(d.job, p.job);
	assert_int_equal(d.rank, p.rank);
	assert_int_equal(d.slot, p.slot);
	assert_int_equal(d.rslot, p.rslot);
}

/* multicast-inflight's default, one receiver (the group): the plugin's
 * 256 KiB chunk keeps its chunk at window 2; the bench's 32 KiB keeps
 * window 8; a 1 MiB chunk halves to 256 KiB. */
static void test_mc_default(void **state)
{
	(void)state;
	struct grant g = grant_inflight(8, 256 * K, 1, GRANT_MC_INFLIGHT_DEFAULT, MIN, 0);
	assert_int_equal(g.window, 2);
	assert_int_equal(g.chunk, 256 * K);
	g = grant_inflight(8, 32 * K, 1, GRANT_MC_INFLIGHT_DEFAULT, MIN, 0);
	assert_int_equal(g.window, 8);
	assert_int_equal(g.chunk, 32 * K);
	g = grant_inflight(8, 1 * M, 1, GRANT_MC_INFLIGHT_DEFAULT, MIN, 0);
	assert_int_equal(g.window, 2);
	assert_int_equal(g.chunk, 256 * K);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_jobs_unchanged),
		cmocka_unit_test(test_defaults_shared),
		cmocka_unit_test(test_window_first),
		cmocka_unit_test(test_chunk_halves),
		cmocka_unit_test(test_chunk_floor),
		cmocka_unit_test(test_sealed_floor),
		cmocka_unit_test(test_other_caps),
		cmocka_unit_test(test_mc_default),
		cmocka_unit_test(test_plan_sizes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
