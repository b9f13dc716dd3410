/* The tree's arithmetic (plugin/tree_plan.c) on its own: for every N up to
 * 200 and every fan-in F below N (and a few large N), the groups are
 * consecutive, within F and as even as possible; every shard has one owner
 * per group and every cross communicator's ring closes over the G owners
 * with the address slots each owner really uses; inner job ids are
 * distinct; and, followed element by element the way collnet_tree.c issues
 * the stages, every element of a buffer is reduced once in each group (by
 * one owner), allreduced once across the groups (the same shard on each
 * side of a cross ring), and gathered back on every member. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tree_plan.h"

#define NMAX 200

static void shape_groups(void **state)
{
	(void)state;
	for (uint32_t n = 3; n <= NMAX; n++)
		for (uint32_t F = 2; F < n; F++) {
			struct tree_shape s;
			tree_shape_of(n, F, &s);
			assert_true(s.G >= 2 && s.Fp >= 2);
			uint32_t next = 0, lo = UINT32_MAX, hi = 0;
			for (uint32_t k = 0; k < s.G; k++) {
				uint32_t g = tree_grp_size(&s, k);
				assert_int_equal(tree_grp_start(&s, k), next);
				assert_true(g >= 1 && g <= F && g <= s.Fp && g + 1 >= s.Fp);
				lo = g < lo ? g : lo;
				hi = g > hi ? g : hi;
				for (uint32_t r = next; r < next + g; r++)
					assert_int_equal(tree_grp_of(&s, r), k);
				next += g;
			}
			assert_int_equal(next, n);
			assert_true(hi - lo <= 1 && hi == s.Fp);
			/* two levels keep every job within F up to F^2 nodes */
			if (n <= F * F)
				assert_true(s.G <= F);
		}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every node's inner communicators: ranks and sizes, rings closed with the
 * slots the neighbours use, job ids distinct per (kind, group or shard). */
static void inner_rings(void **state)
{
	static struct tree_place pl[NMAX];
	static uint64_t ids[3 * NMAX];

	(void)state;
	for (uint32_t n = 3; n <= NMAX; n++)
		for (uint32_t F = 2; F < n; F++) {
			struct tree_shape s;
			uint64_t job = 0x1234567890abcdefull ^ ((uint64_t)n << 32) ^ F;
			size_t nid = 0;
			tree_shape_of(n, F, &s);
			for (uint32_t r = 0; r < n; r++)
				tree_place_of(&s, r, &pl[r]);
			/* one owner per (group, shard), the shard among its owner's */
			for (uint32_t k = 0; k < s.G; k++)
				for (uint32_t sh = 0; sh < s.Fp; sh++) {
					uint32_t o = tree_owner(&s, k, sh), slot = tree_cross_slot(&s, k, sh);
					assert_int_equal(tree_grp_of(&s, o), k);
					assert_true(slot >= TREE_X0 && slot < pl[o].ninner);
					assert_int_equal(pl[o].shard[slot], sh);
				}
			for (uint32_t r = 0; r < n; r++) {
				uint32_t owned = 0;
				for (uint32_t i = TREE_X0; i < pl[r].ninner; i++) {
					assert_int_equal(tree_owner(&s, pl[r].group, pl[r].shard[i]), r);
					owned++;
				}
				/* every shard of the group has one owner in it: the
				 * shards owned in a group add up to F' */
				assert_true(owned >= 1 && owned <= TREE_INNER_MAX - TREE_X0);
				for (uint32_t i = 0; i < pl[r].ninner; i++) {
					struct tree_inner in, nx, pv;
					tree_inner_of(&s, &pl[r], job, i, &in);
					assert_true(in.rank < in.nranks && in.next < n && in.prev < n);
					tree_inner_of(&s, &pl[in.next], job, in.next_slot, &nx);
					tree_inner_of(&s, &pl[in.prev], job, in.prev_slot, &pv);
					/* the neighbour is in the same communicator, one on */
					assert_true(nx.job_id == in.job_id && pv.job_id == in.job_id);
					assert_int_equal(nx.nranks, in.nranks);
					assert_int_equal(nx.rank, (in.rank + 1) % in.nranks);
					assert_int_equal(pv.rank, (in.rank + in.nranks - 1) % in.nranks);
					assert_int_equal(nx.prev, r);
					assert_int_equal(nx.prev_slot, i);
					if (in.rank == 0) /* one id per communicator */
						ids[nid++] = in.job_id;
				}
			}
			assert_int_equal(nid, 2 * s.G + s.Fp);
			qsort(ids, nid, sizeof(ids[0]), cmp_u64);
			for (size_t a = 0; a < nid; a++) {
				assert_true(ids[a] != job);
				assert_true(a == 0 || ids[a] != ids[a - 1]);
			}
		}
}

/* The stages of one allreduce, followed element by element: after the
 * reduce-scatter each element is held reduced over its group by exactly
 * one member (the owner of the element's shard), the cross allreduces
 * cover each such element once per group, on communicators whose members
 * all plan it, and the allgather brings every element to every member. */
static void stages_cover(void **state)
{
	static const size_t counts[] = { 1, 2, 3, 15, 16, 17, 100, 1007, 4096, 65549 };
	static const size_t sizes[] = { 1, 2, 4, 8 };

	(void)state;
	for (uint32_t n = 3; n <= 40; n++)
		for (uint32_t F = 2; F < n; F++)
			for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
				for (size_t ei = 0; ei < sizeof(sizes) / sizeof(sizes[0]); ei++) {
					size_t count = counts[ci], es = sizes[ei];
					if (count > 4096 && n > 10)
						continue; /* the large count on small trees only */
					struct tree_shape s;
					tree_shape_of(n, F, &s);
					uint32_t *held = calloc(count, sizeof(*held)); /* owners per element, summed over groups */
					uint32_t *ar = calloc(count, sizeof(*ar));
					uint8_t *mine = malloc(count); /* this node: 1 held, 2 allreduced */
					assert_non_null(held);
					assert_non_null(ar);
					assert_non_null(mine);
					for (uint32_t r = 0; r < n; r++) {
						struct tree_place p;
						struct tree_stage st[TREE_STAGES_MAX];
						size_t sh;
						tree_place_of(&s, r, &p);
						uint32_t ns = tree_plan_req(&s, &p, count, es, st, &sh);
						assert_true(ns <= TREE_STAGES_MAX && sh * s.Fp >= count);
						assert_int_equal(sh * es % (es < 64 ? 64 : es), 0);
						uint8_t last = TK_RS;
						memset(mine, 0, count);
						size_t rs_cov = 0, ag_cov = 0;
						for (uint32_t k = 0; k < ns; k++) {
							assert_true(st[k].kind >= last); /* stage order */
							last = st[k].kind;
							assert_true(st[k].len > 0 && st[k].base + st[k].len <= count);
							if (st[k].kind == TK_AR) {
								assert_true(st[k].comm >= TREE_X0 && st[k].comm < p.ninner);
								assert_int_equal(st[k].base, (size_t)p.shard[st[k].comm] * sh);
								for (size_t e = st[k].base; e < st[k].base + st[k].len; e++) {
									ar[e]++;
									mine[e] |= 2;
								}
								continue;
							}
							assert_int_equal(st[k].comm, st[k].kind == TK_RS ? TREE_RS : TREE_AG);
							*(st[k].kind == TK_RS ? &rs_cov : &ag_cov) += st[k].len;
							/* this member's block of the window: what it owns */
							size_t lo = st[k].base + (size_t)p.member * sh;
							for (size_t e = lo; e < lo + sh && e < st[k].base + st[k].len; e++)
								if (st[k].kind == TK_RS) {
									held[e]++;
									mine[e] |= 1;
								}
						}
						/* what this node holds reduced over its group is
						 * what it allreduces across the groups */
						for (size_t e = 0; e < count; e++)
							assert_true(mine[e] == 0 || mine[e] == 3);
						/* the windows cover the buffer once, both ways */
						assert_int_equal(rs_cov, count);
						assert_int_equal(ag_cov, count);
					}
					for (size_t e = 0; e < count; e++) {
						assert_int_equal(held[e], s.G); /* one owner per group */
						assert_int_equal(ar[e], s.G);   /* each owner allreduces it */
					}
					free(held);
					free(ar);
					free(mine);
				}
}

/* The inner jobs' asks (tree_inner_ask): summed over every inner job of a
 * tree, window x chunk x nranks stays within one default daemon's cap, as
 * a flat job's grant does, unless the floors (window 2, min-chunk) are
 * reached; a small tree asks for the settings unchanged. */
static void inner_asks(void **state)
{
	(void)state;
	static const uint32_t ns[] = { 8, 130, 256, 1000, 1024, 4096 };
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		struct tree_shape s;
		tree_shape_of(ns[i], ns[i] <= 130 ? 4 : 64, &s);
		uint64_t total = 0, floor = 0;
		for (uint32_t k = 0; k < s.G; k++) { /* rs and ag per group */
			uint32_t g = tree_grp_size(&s, k);
			struct grant a = tree_inner_ask(&s, g, 8, 256 << 10);
			assert_true(a.window >= 2 && a.window <= 8);
			assert_true(a.chunk >= GRANT_MIN_CHUNK_DEFAULT && a.chunk <= (256u << 10));
			total += 2ull * a.window * a.chunk * g;
			floor += 2ull * 2 * GRANT_MIN_CHUNK_DEFAULT * g;
		}
		struct grant x = tree_inner_ask(&s, s.G, 8, 256 << 10); /* a cross job */
		total += (uint64_t)s.Fp * x.window * x.chunk * s.G;
		floor += (uint64_t)s.Fp * 2 * GRANT_MIN_CHUNK_DEFAULT * s.G;
		assert_int_equal(tree_rank_slots(&s), 2ull * s.n + (uint64_t)s.Fp * s.G);
		assert_true(total <= (floor > GRANT_INFLIGHT_DEFAULT ? floor : GRANT_INFLIGHT_DEFAULT));
	}
	/* 8 nodes in 2 groups of 4: 24 slots, 64 MiB x 4 / 24 = 10.7 MiB per
	 * group job of 4, above 8 x 256 KiB x 4: the settings unchanged; 1,024
	 * in 16 groups of 64: 3,072 slots, 64 MiB x 64 / 3,072 = 1.33 MiB per
	 * group job: window 2, chunk 256 KiB / 32 = 8 KiB -> min-chunk 16 KiB */
	struct tree_shape s;
	tree_shape_of(8, 4, &s);
	struct grant a = tree_inner_ask(&s, 4, 8, 256 << 10);
	assert_int_equal(a.window, 8);
	assert_int_equal(a.chunk, 256 << 10);
	tree_shape_of(1024, 64, &s);
	assert_int_equal(tree_rank_slots(&s), 3072);
	a = tree_inner_ask(&s, 64, 8, 256 << 10);
	assert_int_equal(a.window, 2);
	assert_int_equal(a.chunk, 16 << 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(shape_groups),
		cmocka_unit_test(inner_rings),
		cmocka_unit_test(stages_cover),
		cmocka_unit_test(inner_asks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
