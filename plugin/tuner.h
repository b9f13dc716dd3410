/* The tuner: what NCCL's tuner plugin interface asks (a cost per algorithm
 * and protocol, per collective and size) answered for CollNet from the
 * sizing model (tools/plan_model.h), with the communicator's live figures
 * where the collnet has published them. NCCL's versioned tables are in
 * tuner_nccl.c; this file's functions are pure except the live table and
 * the settings (docs/plugin.md, "Tuner").
 *
 * For an AllReduce of S bytes over N nodes the model gives Sumcast's time
 * (its aggregator path, at the split the adaptive control measured for
 * that size, else the best the model finds) and, on the same links, a ring
 * between the nodes (2(N-1) hops + 2(N-1)/N S / B) and a double binary
 * tree (2 ceil(log2 N) hops, the ring's bytes: each node's link carries
 * about 2S each way in it too). Sumcast's time has TUNER_AGG_RTTS fabric
 * round trips of fixed cost (the model counts one). CollNet wins where its
 * time is below both. */
#ifndef SUMCAST_PLUGIN_TUNER_H
#define SUMCAST_PLUGIN_TUNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "split.h"

/* Fabric round trips a CollNet allreduce through the aggregators costs
 * however small it is. Its floor is one (node -> aggregator -> node), which
 * the model counts; measured, 8 bytes took 2.7 to 5.4 round trips at 2 to 4
 * nodes on tcp (docs/plugin.md, "8-byte latency against the fabric round
 * trip": the plugin, the client, the daemon's serial messages). The model's
 * per-message CPU covers the growth with N; the rest is charged as
 * (TUNER_AGG_RTTS - 1) more round trips. */
#define TUNER_AGG_RTTS 4

/* Where NCCL's best other entry is below the model's CollNet time but the
 * model says CollNet wins, CollNet's entry is written this share of it. */
#define TUNER_UNDERCUT 0.99

struct tuner_figs {
	uint32_t nodes;     /* N: ranks of a collnet communicator */
	uint32_t aggs;      /* M joined by every node; 0: ring only */
	double link_gbps;   /* one head's link */
	double agg_gbps;    /* one aggregator's link */
	double hop_us;      /* one hop */
	double agg_eff;     /* the split model's aggregator efficiency */
	uint32_t fan_in;
	bool tcp;           /* the aggregators copy what they receive */
	bool live;          /* from a connected communicator (else the settings) */
	/* the split in use per adaptive size class (split.h), parts per
	 * million; -1: not measured yet (the model's best is taken) */
	int32_t split_ppm[SPLIT_ADAPT_CLASSES];
};

struct tuner_est {
	double collnet_us;  /* Sumcast's CollNet: the model + the fixed round trips */
	double ring_us;     /* a ring between the nodes on the same links */
	double tree_us;     /* a double binary tree between the nodes */
	double split;       /* the share the aggregators take */
	bool wins;          /* collnet_us below both */
};

/* Sumcast's AllReduce of `bytes` (the whole, NCCL's nBytes) over `heads`
 * collnet communicators per node (CollNet Direct: the ranks per node;
 * Chain: 1), each moving bytes / heads. 0, or -EINVAL where the model
 * refuses the figures (out untouched). With no aggregators CollNet is the
 * plugin's ring on host memory: it never wins (out->wins false). */
int tuner_allreduce_est(const struct tuner_figs *f, size_t bytes, uint32_t heads, struct tuner_est *out);

/* A ReduceScatter or AllGather of `bytes` (NCCL's nBytes: the whole
 * buffer, nRanks x count) from the AllReduce estimate of the same bytes
 * (tuner_allreduce_est): through the aggregators a node sends S and takes
 * S / N back (ReduceScatter), or the reverse (AllGather), its link as busy
 * as in the AllReduce, the aggregators' ingress (or egress) and CPU no
 * more: the AllReduce's CollNet time, an upper bound. NCCL's ring does half
 * an AllReduce ((N-1) hops + (N-1)/N S / B): the ring's time halved. NCCL
 * runs neither on its tree (tree_us = ring_us). CollNet wins where it is
 * below that ring. */
void tuner_rsag_est(const struct tuner_est *allreduce, uint32_t aggs, struct tuner_est *out);

/* NCCL's cost table (float[nalgo][nproto], microseconds, -1: ignored) for
 * one collective: CollNet Direct's and Chain's rows from the estimates
 * (NULL: that row untouched). Only entries NCCL made usable (>= 0) change:
 * where the estimate wins they take its time, scaled (both rows by one
 * factor) to TUNER_UNDERCUT of the best other usable entry where that is
 * lower; where it loses they become -1, unless no other entry is usable.
 * Ring, tree and the rest are never touched. Returns the entries changed. */
int tuner_table_apply(float *table, int nalgo, int nproto, const struct tuner_est *direct,
		      const struct tuner_est *chain);

/* The smallest power of two from 1 B to 64 GiB at which CollNet wins, or
 * 0 where it wins at none. */
uint64_t tuner_crossover(const struct tuner_figs *f, uint32_t heads);

/* The figures from the SUMCAST_* settings alone (before a communicator
 * connects): the aggregators listed, the link speeds (25 Gb/s where 0: what
 * the plugin takes when the provider reports none), 10 us a hop. */
void tuner_figs_from_settings(uint32_t nodes, struct tuner_figs *out);

/* The live figures: a connected collnet communicator of `nodes` ranks
 * publishes its own (collnet_adapt.c), the last one per node count wins;
 * a tuner of that many nodes reads them. tuner_live_gen changes with
 * every publication that changes a figure (a reader copies only then). */
void tuner_live_publish(const struct tuner_figs *f);
uint64_t tuner_live_gen(void);
/* 0, or -ENOENT where no communicator of `nodes` ranks published. */
int tuner_live_get(uint32_t nodes, struct tuner_figs *out);

#endif
