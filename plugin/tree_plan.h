/* The tree's arithmetic, as pure functions (tree_plan.c): the groups, the
 * shards and their owners, which inner communicators a node is in and where
 * its neighbours' addresses sit in the connect agreement, the inner job
 * ids, and the stages of one allreduce. collnet_tree.c runs the tree by
 * these; tests/plugin/test_tree_plan.c checks them alone, for every N and F
 * up to a few hundred: group sizes within F and even, every shard owned
 * once per group, every cross communicator's ring closed with the slots its
 * members use, job ids distinct, and every element of a buffer reduced
 * once in its group, allreduced once across, and gathered everywhere. */
#ifndef SUMCAST_PLUGIN_TREE_PLAN_H
#define SUMCAST_PLUGIN_TREE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "grant.h"

#define TREE_INNER_MAX 4 /* rs, ag, and a cross per owned shard (at most 2) */
#define TREE_STAGES_MAX 6 /* rs x 2, cross allreduce x 2, ag x 2 */
enum { TREE_RS = 0, TREE_AG = 1, TREE_X0 = 2 }; /* inner communicator slots */
enum { TK_RS = 0, TK_AR, TK_AG };               /* stage kinds, in stage order */

/* n nodes, fan-in F: G = ceil(n/F) groups, F' = ceil(n/G) shards. */
struct tree_shape {
	uint32_t n, G, Fp;
};
void tree_shape_of(uint32_t n, uint32_t F, struct tree_shape *s);
/* Group k: its size (n/G or one more, the larger first) and first rank. */
uint32_t tree_grp_size(const struct tree_shape *s, uint32_t k);
uint32_t tree_grp_start(const struct tree_shape *s, uint32_t k);
uint32_t tree_grp_of(const struct tree_shape *s, uint32_t rank);
/* The global rank owning shard `shard` in group k (member shard % size). */
uint32_t tree_owner(const struct tree_shape *s, uint32_t k, uint32_t shard);
/* The inner slot where shard's owner in group k keeps its cross
 * communicator: TREE_X0 + shard / size (its shards in ascending order). */
uint32_t tree_cross_slot(const struct tree_shape *s, uint32_t k, uint32_t shard);

/* One node's place: its group, member index, group size and first rank,
 * the inner communicators it is in (ninner: 2 + its shards), and for each
 * cross slot its shard. */
struct tree_place {
	uint32_t group, member, g, start, ninner;
	uint32_t shard[TREE_INNER_MAX];
};
void tree_place_of(const struct tree_shape *s, uint32_t rank, struct tree_place *p);

/* Inner communicator `slot` of node p: its job id (from the tree's), this
 * node's rank and the size in it, and the global ranks and slots of its
 * ring neighbours (whose addresses the connect agreement carries). */
struct tree_inner {
	uint64_t job_id;
	uint32_t rank, nranks;
	uint32_t next, next_slot, prev, prev_slot;
};
void tree_inner_of(const struct tree_shape *s, const struct tree_place *p, uint64_t job,
		   uint32_t slot, struct tree_inner *out);

/* What a tree asks each aggregator for one inner job of nranks ranks: the
 * share of a default daemon's in-flight cap (common/grant.h) that its
 * ranks are of all the rank slots of the tree's inner jobs (2n for the
 * group jobs, F' x G for the cross jobs), under the same rule the daemon
 * applies. Without it each of the 2G + F' inner jobs would be granted a
 * whole cap of its own: 2G + F' times a flat job's memory and receives on
 * every aggregator. A daemon with a smaller cap cuts further. */
uint64_t tree_rank_slots(const struct tree_shape *s);
struct grant tree_inner_ask(const struct tree_shape *s, uint32_t nranks, uint32_t window,
			    uint32_t chunk);

/* One stage of an allreduce of count elements of es bytes: on inner
 * communicator `comm`, kind TK_*, the window (TK_RS, TK_AG: blocks of sh
 * elements, one per group member, starting at element base of the buffer)
 * or the shard (TK_AR) [base, base + len). Empty shards have no stage. */
struct tree_stage {
	uint8_t comm, kind;
	size_t base, len;
};
/* Node p's stages in issue order; the shard size in *sh. */
uint32_t tree_plan_req(const struct tree_shape *s, const struct tree_place *p, size_t count,
		       size_t es, struct tree_stage st[TREE_STAGES_MAX], size_t *sh);

#endif
