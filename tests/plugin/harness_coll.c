/* The collnet test: reduceSupport, then an allreduce of every type and op
 * over odd counts against the reference, in place, optionally the
 * rank-order check, bitwise agreement of all ranks, the trace and the
 * path connect chose. */
#include "harness.h"

#include <dlfcn.h>
#include <string.h>

#include "../../plugin/nccl_tuner.h"

int tuner_live_aggs(void)
{
	const ncclTuner_v5_t *tu = dlsym(P.dl, "ncclTunerPlugin_v5");
	ncclNvlDomainInfo_v5_t nvl = { opt.nranks, 1, 1 };
	ncclTunerConstants_v5_t k;
	void *ctx = NULL;

	REQUIRE(tu, "ncclTunerPlugin_v5 not exported");
	memset(&k, 0, sizeof(k));
	saw_tuner_aggs = saw_tuner_live = -1;
	/* NCCL: one rank per node here, nNodes = the collnet's ranks */
	NCHECK(tu->init(&ctx, 0x1234, (size_t)opt.nranks, (size_t)opt.nranks, hlog, &nvl, &k));
	REQUIRE(saw_tuner_live == 1, "the tuner took the settings, not the connected communicator's figures");
	NCHECK(tu->finalize(ctx));
	return saw_tuner_aggs;
}

void tuner_check_live(void)
{
	/* the tree publishes the aggregators listed (its inner jobs join them) */
	int want = tree_on() ? -1 : opt.expect && !strcmp(opt.expect, "ring") ? 0 : saw_naggs;
	int got = tuner_live_aggs();

	REQUIRE(want < 0 || got == want, "the tuner sees %d aggregators, connect announced %d", got, want);
	if (my_rank == 0)
		printf("coll: the tuner costs CollNet from this communicator's figures (%d aggregators)\n",
		       saw_tuner_aggs);
}

void run_coll(void)
{
	const size_t half = 8u << 20;
	uint8_t *region = aligned_alloc(4096, 2 * half), *ref = malloc(half);
	void *mh = NULL;
	uint64_t hash = 0xcbf29ce484222325ull;

	REQUIRE(region && ref, "malloc");
	plugin_open(true);
	/* reduceSupport: honest for every (type, op) NCCL asks, Avg included. */
	for (int t = 0; t < 12; t++)
		for (int op = 0; op < 5; op++) {
			int sup = -1;
			NCHECK(CN_CALL(reduceSupport, t, op, &sup));
			REQUIRE(sup == (t < 10 && op < 4), "reduceSupport(%d, %d) = %d", t, op, sup);
		}
	void *cc = coll_setup(region, 2 * half, &mh);
	uint8_t *send = region, *recv = region + half;

	static const size_t counts[] = { 1, 3, 17, 1007, 65549, 524289 };
	int ncases = 0;
	for (int t = 0; t < 10; t++)
		for (int op = 0; op < 4; op++)
			for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
				size_t count = counts[k], es = type_size(t);
				/* The largest count only where it adds coverage. */
				if (count > 100000 && !(op == ncclSum && (t == ncclFloat32 || t == ncclBfloat16 || t == ncclInt8)))
					continue;
				REQUIRE(count * es <= half, "case too large");
				for (size_t i = 0; i < count; i++) {
					put(t, send, i, in_val(t, op, my_rank, i));
					put(t, ref, i, ref_val(t, op, i));
				}
				memset(recv, 0xA5, count * es + 64);
				allreduce_chunked(cc, send, recv, count, t, op, mh);
				for (size_t i = 0; i < count; i++)
					REQUIRE(!memcmp(recv + i * es, ref + i * es, es),
					      "%s %s count %zu: element %zu differs from the reference",
					      type_name(t), op_name(op), count, i);
				REQUIRE(recv[count * es] == 0xA5, "%s %s count %zu: wrote past the end",
				      type_name(t), op_name(op), count);
				hash = fnv(hash, recv, count * es);
				ncases++;
			}
	/* In place (send == recv), as NCCL's user-buffer path may issue. */
	for (size_t i = 0; i < 300001; i++)
		put(ncclFloat32, recv, i, in_val(ncclFloat32, ncclSum, my_rank, i));
	allreduce_chunked(cc, recv, recv, 300001, ncclFloat32, ncclSum, mh);
	for (size_t i = 0; i < 300001; i++) {
		float w = (float)ref_val(ncclFloat32, ncclSum, i);
		REQUIRE(((float *)recv)[i] == w, "in-place f32 sum: element %zu", i);
	}
	/* --groups G: NCCL's proxy over G x 8 channels (allreduce_grouped),
	 * 256 KiB requests: with the adaptive split (--split auto) a window's
	 * split waits for the agreement on the window before last, which
	 * must not wait for a test the refused group will not make. Several
	 * rounds, every element checked. */
	for (int round = 0; opt.groups && round < 4; round++) {
		size_t count = half / 4, off = (size_t)round * 7;
		for (size_t i = 0; i < count; i++)
			put(ncclFloat32, send, i, in_val(ncclFloat32, ncclSum, my_rank, i + off));
		memset(recv, 0xA5, count * 4);
		allreduce_grouped(cc, send, recv, count, ncclFloat32, ncclSum, mh, opt.groups, 256u << 10);
		for (size_t i = 0; i < count; i++) {
			float w = (float)ref_val(ncclFloat32, ncclSum, i + off);
			REQUIRE(((float *)recv)[i] == w, "grouped (%d groups) round %d: element %zu", opt.groups,
			      round, i);
		}
		hash = fnv(hash, recv, count * 4);
		ncases++;
	}
	/* --stall R: a slow peer is not an error, and a wait says what it
	 * waits for. Rank R goes quiet for 2.5 x SUMCAST_AGG_TIMEOUT with its
	 * first requests issued: the others' ring parts wait for it, so each
	 * of them logs a stall report whose ring lines name the peer and the
	 * tag of the message a column waits for; then R goes on and every
	 * element is right, with no fault on any node. */
	if (opt.stall_rank >= 0) {
		/* the plugin's spelling: ms unless it ends in s (and not ms) */
		const char *e = getenv("SUMCAST_AGG_TIMEOUT");
		char *unit = NULL;
		double to = e ? strtod(e, &unit) : 0;
		if (to > 0 && unit && !strcmp(unit, "s"))
			to *= 1000;
		to = to > 0 ? to / 1000 : 30;
		size_t count = half / 4;
		stall_quiet_s = 2.5 * to;
		for (size_t i = 0; i < count; i++)
			put(ncclFloat32, send, i, in_val(ncclFloat32, ncclSum, my_rank, i));
		memset(recv, 0xA5, count * 4);
		stall_now = true;
		allreduce_chunked(cc, send, recv, count, ncclFloat32, ncclSum, mh);
		for (size_t i = 0; i < count; i++)
			REQUIRE(((float *)recv)[i] == (float)ref_val(ncclFloat32, ncclSum, i),
			      "after the stall: element %zu", i);
		REQUIRE(!saw_fault, "a slow peer was taken for a fault (%d fault lines)", saw_fault);
		if (my_rank != opt.stall_rank)
			REQUIRE(saw_stall > 0 && saw_stall_peer > 0, "rank %d went quiet %.1f s: %d stall reports "
			      "here, %d of their lines named a ring peer and tag", opt.stall_rank, stall_quiet_s,
			      saw_stall, saw_stall_peer);
		if (my_rank == 0)
			printf("coll: rank %d quiet %.1f s: the others' stall reports named the ring peer and tag "
			       "(%d lines here), results exact\n", opt.stall_rank, stall_quiet_s, saw_stall_peer);
		hash = fnv(hash, recv, count * 4);
		ncases++;
	}
	if (opt.deterministic)
		hash = check_rank_order(cc, send, recv, half, mh, hash);
	tuner_check_live();
	/* Bitwise equal on every rank. */
	int other = rv_first_differing("hash", hash);
	REQUIRE(other < 0, "results of rank %d differ bitwise from ours", other);
	/* What the daemons hold of the job, and counted from this rank, while
	 * it is still open: this rank's last request has completed, so every
	 * byte it sent has been counted. */
	coll_finish(cc, mh);
	prof_finish(); /* no call: the collnet's have no pHandle */
	if (my_rank == 0)
		printf("coll: %d nodes, %d cases passed, results bitwise equal on every node\n",
		       opt.nranks, ncases);
	free(ref);
	free(region);
}
