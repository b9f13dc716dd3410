/* The ring's arithmetic (plugin/ring_step.c) on its own: for every rank of
 * rings of 1 to 9 nodes, the segments each step sends and receives are
 * followed as sets of contributions, the way ring.c moves and reduces the
 * bytes: a reduce-scatter must leave each segment holding every node's
 * contribution exactly once (on its owner for the window op), an allreduce
 * and an allgather every segment on every node. Then the tags, the
 * segment and column cuts, the window parts and the column size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <string.h>

#include "ring_step.h"
#include "tags.h"

#define NMAX 9

/* What rank r + 1 receives at step g is what rank r sends at step g, for
 * every kind, and the step counts. */
static void steps_chain(void **state)
{
	(void)state;
	for (int kind = RING_ALLREDUCE; kind <= RING_ALLGATHER; kind++)
		for (uint32_t n = 1; n <= NMAX; n++) {
			uint32_t steps = ring_step_count((enum ring_kind)kind, n);
			assert_int_equal(steps, kind == RING_ALLREDUCE ? 2 * (n - 1) : n - 1);
			for (uint32_t g = 0; g < steps; g++)
				for (uint32_t r = 0; r < n; r++) {
					uint32_t s, x, y, rr;
					ring_step_segs((enum ring_kind)kind, n, r, g, &s, &x);
					ring_step_segs((enum ring_kind)kind, n, (r + 1) % n, g, &y, &rr);
					assert_true(s < n && x < n);
					assert_int_equal(rr, s);
				}
		}
}

/* Allreduce: steps 0 .. n-2 receive a partial and add this rank's own
 * contribution (ring.c's col_reduce), then the allgather copies. */
static void allreduce_reduces_once(void **state)
{
	(void)state;
	for (uint32_t n = 1; n <= NMAX; n++) {
		uint32_t have[NMAX][NMAX], msg[NMAX], full = (1u << n) - 1;
		for (uint32_t r = 0; r < n; r++)
			for (uint32_t s = 0; s < n; s++)
				have[r][s] = 1u << r;
		for (uint32_t g = 0; g < ring_step_count(RING_ALLREDUCE, n); g++) {
			uint32_t sseg[NMAX], rseg[NMAX];
			for (uint32_t r = 0; r < n; r++) {
				ring_step_segs(RING_ALLREDUCE, n, r, g, &sseg[r], &rseg[r]);
				msg[r] = have[r][sseg[r]];
				if (g >= n - 1) /* the allgather sends reduced segments only */
					assert_int_equal(msg[r], full);
			}
			for (uint32_t q = 0; q < n; q++) {
				uint32_t from = (q + n - 1) % n;
				if (g < n - 1) {
					assert_int_equal(msg[from] & 1u << q, 0); /* never twice */
					have[q][rseg[q]] = msg[from] | 1u << q;
				} else {
					have[q][rseg[q]] = msg[from];
				}
			}
		}
		for (uint32_t r = 0; r < n; r++)
			for (uint32_t s = 0; s < n; s++)
				assert_int_equal(have[r][s], full);
	}
}

/* The window reduce-scatter: step 0 sends this rank's contribution, each
 * later step the partial received at the step before; the last step
 * receives segment r itself, which then holds every contribution once. */
static void reduce_scatter_ends_on_owner(void **state)
{
	(void)state;
	for (uint32_t n = 1; n <= NMAX; n++) {
		uint32_t part[NMAX], pseg[NMAX], msg[NMAX], full = (1u << n) - 1;
		uint32_t steps = ring_step_count(RING_REDUCE_SCATTER, n);
		for (uint32_t g = 0; g < steps; g++) {
			uint32_t sseg[NMAX], rseg[NMAX];
			for (uint32_t r = 0; r < n; r++) {
				ring_step_segs(RING_REDUCE_SCATTER, n, r, g, &sseg[r], &rseg[r]);
				if (g > 0)
					assert_int_equal(sseg[r], pseg[r]); /* what it received */
				msg[r] = g ? part[r] : 1u << r;
			}
			for (uint32_t q = 0; q < n; q++) {
				uint32_t from = (q + n - 1) % n;
				assert_int_equal(msg[from] & 1u << q, 0);
				part[q] = msg[from] | 1u << q;
				pseg[q] = rseg[q];
			}
		}
		for (uint32_t r = 0; r < n && steps; r++) {
			assert_int_equal(pseg[r], r);
			assert_int_equal(part[r], full);
		}
	}
}

/* The window allgather: rank r starts with segment r; it sends only what
 * it has and never receives what it has; at the end every rank has all. */
static void allgather_fills(void **state)
{
	(void)state;
	for (uint32_t n = 1; n <= NMAX; n++) {
		uint32_t have[NMAX];
		for (uint32_t r = 0; r < n; r++)
			have[r] = 1u << r;
		for (uint32_t g = 0; g < ring_step_count(RING_ALLGATHER, n); g++) {
			uint32_t s[NMAX], x[NMAX];
			for (uint32_t r = 0; r < n; r++) {
				ring_step_segs(RING_ALLGATHER, n, r, g, &s[r], &x[r]);
				assert_true(have[r] >> s[r] & 1);
				assert_false(have[r] >> x[r] & 1);
			}
			for (uint32_t r = 0; r < n; r++)
				have[r] |= 1u << x[r];
		}
		for (uint32_t r = 0; r < n; r++)
			assert_int_equal(have[r], (1u << n) - 1);
	}
}

/* A request's ring tags are common/tags.h's sc_tag_ring; failover's and
 * the adaptive split's (step at SC_TAG_FO_STEP_SHIFT) keep their base and
 * tell every (step, column) apart. */
static void tags(void **state)
{
	(void)state;
	for (uint32_t g = 0; g < 16; g++)
		for (size_t col = 0; col < 1000; col += 37)
			assert_true(ring_step_tag(sc_tag_ring(77, 0, 0), 28, g, col) ==
				    sc_tag_ring(77, g, col));
	/* the step's low 12 bits in their field, the column's below: a column
	 * past the field must not spill into the step */
	for (uint32_t g = 0; g < 5000; g += 97)
		for (size_t col = 0; col < 10000; col += 331) {
			uint64_t t = ring_step_tag(sc_tag_agree(1, 0, 1), SC_TAG_FO_STEP_SHIFT, g, col);
			assert_int_equal(t >> SC_TAG_FO_STEP_SHIFT & 0xFFF, g & 0xFFF);
			assert_int_equal(t & 0xFFF, col & 0xFFF);
		}
	uint64_t base = sc_tag_agree(3, 1, 2), seen[16 * 64];
	size_t n = 0;
	for (uint32_t g = 0; g < 16; g++)
		for (size_t col = 0; col < 4096; col += 64) {
			uint64_t t = ring_step_tag(base, SC_TAG_FO_STEP_SHIFT, g, col);
			assert_true((t & ~((1ull << (SC_TAG_FO_STEP_SHIFT + 12)) - 1)) == base);
			for (size_t i = 0; i < n; i++)
				assert_true(seen[i] != t);
			seen[n++] = t;
		}
}

/* An allreduce's segments, and their columns, cover [0, count) once. */
static void segments_cover(void **state)
{
	(void)state;
	for (uint32_t n = 1; n <= NMAX; n++)
		for (size_t count = 0; count < 60; count += 7) {
			size_t seg = (count + n - 1) / n, next = 0;
			for (uint32_t k = 0; k < n; k++) {
				size_t b, e;
				ring_step_seg(count, seg, k, &b, &e);
				assert_int_equal(b, next);
				assert_true(e >= b && e <= count);
				for (size_t col = 1; col <= 4; col++) {
					size_t at = b, off, len;
					for (size_t j = 0; j <= (e - b) / col + 1; j++) {
						ring_step_col(b, e, col, j, &off, &len);
						if (!len) {
							assert_int_equal(off, e);
							continue;
						}
						assert_int_equal(off, at);
						assert_true(len <= col);
						at += len;
					}
					assert_int_equal(at, e);
				}
				next = e;
			}
			assert_int_equal(next, count);
		}
}

/* A window's parts by block cover it once, in block order; the longest is
 * ring_step_window_seg_max. */
static void window_parts(void **state)
{
	(void)state;
	for (size_t block = 1; block <= 7; block++)
		for (uint32_t n = 1; n <= 5; n++)
			for (size_t win = 0; win < n * block; win++)
				for (size_t count = 1; win + count <= n * block; count++) {
					size_t at = 0, longest = 0;
					for (uint32_t k = 0; k < n; k++) {
						size_t off, len;
						ring_window_part(block, win, count, k, &off, &len);
						if (!len)
							continue;
						assert_int_equal(off, at);
						at += len;
						longest = len > longest ? len : longest;
					}
					assert_int_equal(at, count);
					assert_int_equal(ring_step_window_seg_max(block, win, count), longest);
				}
}

/* Columns: the chunk (whole elements), eager-sized where a segment fits in
 * a few eager messages, and never more than the tag's column field holds. */
static void column_size(void **state)
{
	(void)state;
	/* 512 KiB chunks of f32, window 4: a 1 MiB segment keeps the chunk */
	assert_int_equal(ring_step_col_elems(262144, 4, 512 << 10, 4, 16384, 28), 131072);
	/* a 48 KiB segment fits in 3 eager messages of 16 KiB: eager columns */
	assert_int_equal(ring_step_col_elems(12288, 4, 512 << 10, 4, 16384, 28), 4096);
	/* ... but not in a window of 2 */
	assert_int_equal(ring_step_col_elems(12288, 4, 512 << 10, 2, 16384, 28), 131072);
	/* the eager limit counts in 64-byte units */
	assert_int_equal(ring_step_col_elems(3000, 1, 512 << 10, 4, 1000, 28), 960);
	/* failover's 12-bit column field: at most 4096 columns */
	size_t e = ring_step_col_elems((size_t)1 << 30, 1, 4096, 4, 0, 12);
	assert_true(((size_t)1 << 30) / e <= 4096);
	assert_int_equal(ring_step_col_elems(1, 8, 3, 4, 0, 28), 1); /* never 0 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(steps_chain),
		cmocka_unit_test(allreduce_reduces_once),
		cmocka_unit_test(reduce_scatter_ends_on_owner),
		cmocka_unit_test(allgather_fills),
		cmocka_unit_test(tags),
		cmocka_unit_test(segments_cover),
		cmocka_unit_test(window_parts),
		cmocka_unit_test(column_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
