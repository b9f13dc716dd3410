/* The scale runs' sweep (harness scale --sweep COUNT): what a user's job
 * asks of one communicator at scale, driven as NCCL's proxy drives it and
 * checked exactly. Allreduce of every type and op at 1 and COUNT elements,
 * and of four pairs at 524,288 (2 MiB of f32: NCCL's request; 4 MiB of f64
 * in two), then CollNet Direct's ReduceScatter (every type and op) and
 * AllGather with COUNT elements per rank through NCCL's windows
 * (window_chunked), which start mid-block when COUNT divides nothing.
 *
 * With --heads H the sweep's items (a type and op's allreduces, one
 * ReduceScatter, one AllGather: 84 in all) are dealt over the H
 * communicators, item i to communicator i % H: every item runs once, at
 * the communicators' size, while the other H - 1 run theirs beside it
 * (the same requests H times over would prove nothing more and take H
 * times the cores).
 *
 * Inputs repeat every 9 elements (harness_check.c's in_val), so the
 * references are tables of 9 (ref_val is O(N) per element: at N = 64 the
 * checks would take the cores from the requests). The AllGather's byte
 * depends on the rank and its place in the block. */
#include "harness.h"

#include <string.h>

#define SWEEP_BIG 524288u /* the large allreduces' elements: 2 MiB of f32, NCCL's request */

/* in9[k], ref9[k]: the input of this rank and the reduction of every rank
 * at element indices i with i % 9 == k, as type t (es bytes each). */
struct tables {
	uint8_t in9[9][8], ref9[9][8];
};

static void tables_make(struct tables *tb, ncclDataType_t t, ncclRedOp_t op)
{
	for (size_t k = 0; k < 9; k++) {
		put(t, tb->in9[k], 0, in_val(t, op, my_rank, k));
		put(t, tb->ref9[k], 0, ref_val(t, op, k));
		REQUIRE(in_val(t, op, my_rank, k + 9) == in_val(t, op, my_rank, k) &&
			      ref_val(t, op, k + 9) == ref_val(t, op, k),
		      "harness: inputs no longer repeat every 9 elements");
	}
}

/* dst[0..n) = the input at global element indices first .. first + n. */
static void fill(const struct tables *tb, size_t es, uint8_t *dst, size_t first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		memcpy(dst + i * es, tb->in9[(first + i) % 9], es);
}

/* The first element of res[0..n) that is not the reduction at global
 * indices first .., or n: all right. */
static size_t first_wrong(const struct tables *tb, size_t es, const uint8_t *res, size_t first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(res + i * es, tb->ref9[(first + i) % 9], es))
			return i;
	return n;
}

static uint8_t ag_byte(int rank, size_t j)
{
	return (uint8_t)(rank * 31 + (int)(j % 251) * 7 + 1);
}

static void sweep_allreduce(void *cc, void *mh, uint8_t *send, uint8_t *recv, ncclDataType_t t,
			    ncclRedOp_t op, size_t count)
{
	struct tables tb;
	size_t es = type_size(t);

	tables_make(&tb, t, op);
	fill(&tb, es, send, 0, count);
	memset(recv, 0xA5, count * es + 64);
	allreduce_chunked(cc, send, recv, count, t, op, mh);
	size_t bad = first_wrong(&tb, es, recv, 0, count);
	REQUIRE(bad == count, "sweep: allreduce of %zu x %s %s: element %zu is wrong", count, type_name(t),
	      op_name(op), bad);
	REQUIRE(recv[count * es] == 0xA5, "sweep: allreduce of %zu x %s %s wrote past the end", count,
	      type_name(t), op_name(op));
}

/* ReduceScatter of nranks blocks of bpr elements: this rank's block of
 * the reduction lands in recv. */
static void sweep_rs(void *cc, void *mh, uint8_t *send, uint8_t *recv, ncclDataType_t t, ncclRedOp_t op,
		     size_t bpr)
{
	struct tables tb;
	size_t es = type_size(t), mine = (size_t)my_rank * bpr;

	tables_make(&tb, t, op);
	fill(&tb, es, send, 0, bpr * (size_t)opt.nranks);
	memset(recv, 0xA5, bpr * es + 64);
	window_chunked(cc, 1, send, recv, bpr * es, t, op, mh);
	size_t bad = first_wrong(&tb, es, recv, mine, bpr);
	REQUIRE(bad == bpr, "sweep: reduce-scatter of %zu x %s %s per rank: element %zu of this rank's "
	      "block is wrong", bpr, type_name(t), op_name(op), bad);
	REQUIRE(recv[bpr * es] == 0xA5, "sweep: reduce-scatter of %zu x %s %s wrote past this rank's block",
	      bpr, type_name(t), op_name(op));
}

static void sweep_ag(void *cc, void *mh, uint8_t *send, uint8_t *recv, size_t bpr)
{
	size_t total = bpr * (size_t)opt.nranks;

	for (size_t j = 0; j < bpr; j++)
		send[j] = ag_byte(my_rank, j);
	memset(recv, 0xA5, total + 64);
	window_chunked(cc, 2, send, recv, bpr, ncclInt8, ncclSum, mh);
	for (int k = 0; k < opt.nranks; k++)
		for (size_t j = 0; j < bpr; j++)
			REQUIRE(recv[(size_t)k * bpr + j] == ag_byte(k, j),
			      "sweep: allgather of %zu bytes per rank: byte %zu of rank %d's block is wrong", bpr,
			      j, k);
	REQUIRE(recv[total] == 0xA5, "sweep: allgather of %zu bytes per rank wrote past the end", bpr);
}

size_t sweep_region_bytes(size_t count, size_t wcount)
{
	size_t per = wcount > count ? wcount : count;
	size_t total = per * 8 * (size_t)opt.nranks, ar = (size_t)SWEEP_BIG * 8;
	size_t half = (total > ar ? total : ar) + 4096;
	return 2 * ((half + 4095) & ~(size_t)4095);
}

/* sweep_run's checks with every item run (its loops, counted: the scale
 * report fails when the communicators' checks do not add up to this) */
int sweep_checks_all(size_t count, size_t wcount)
{
	return 40 * 2 + 4 + 40 + 1 + (wcount != count ? 2 : 0) + 1;
}

/* Item i of the sweep is this communicator's (above): counts it. */
static bool mine(int *item)
{
	return (*item)++ % opt.heads == my_head;
}

int sweep_run(void *cc, void *mh, uint8_t *region, size_t region_len, size_t count, size_t wcount)
{
	size_t half = region_len / 2;
	uint8_t *send = region, *recv = region + half;
	int checks = 0, item = 0;

	REQUIRE(region_len >= sweep_region_bytes(count, wcount), "sweep: region too small");
	for (int t = 0; t < 10; t++)
		for (int op = 0; op < 4; op++) {
			if (!mine(&item))
				continue;
			sweep_allreduce(cc, mh, send, recv, (ncclDataType_t)t, (ncclRedOp_t)op, 1);
			sweep_allreduce(cc, mh, send, recv, (ncclDataType_t)t, (ncclRedOp_t)op, count);
			checks += 2;
			/* NCCL's 2 MiB requests (two for 8-byte types), several in
			 * flight: the pairs the hangs at N = 48 and 64 were seen in */
			if ((t == ncclFloat32 && op == ncclSum) || (t == ncclFloat64 && op == ncclProd) ||
			    (t == ncclInt64 && op == ncclProd) || (t == ncclInt8 && op == ncclMax)) {
				sweep_allreduce(cc, mh, send, recv, (ncclDataType_t)t, (ncclRedOp_t)op, SWEEP_BIG);
				checks++;
			}
		}
	for (int t = 0; t < 10; t++)
		for (int op = 0; op < 4; op++)
			if (mine(&item)) {
				sweep_rs(cc, mh, send, recv, (ncclDataType_t)t, (ncclRedOp_t)op, wcount);
				checks++;
			}
	if (mine(&item)) {
		sweep_ag(cc, mh, send, recv, wcount);
		checks++;
	}
	if (wcount != count) { /* the large windows once */
		if (mine(&item)) {
			sweep_rs(cc, mh, send, recv, ncclFloat32, ncclSum, count);
			checks++;
		}
		if (mine(&item)) {
			sweep_ag(cc, mh, send, recv, count);
			checks++;
		}
	}
	if (mine(&item)) {
		sweep_ag(cc, mh, send, recv, 8 * wcount);
		checks++;
	}
	return checks;
}
