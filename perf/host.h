/* NCCL's side of the plugin in an acceptance run (sumcast-perf): the
 * installed libnccl-net-sumcast.so loaded as NCCL 2.28 loads it (dlopen,
 * ncclNetPlugin_v11 and ncclCollNetPlugin_v11, init with a logger, the
 * collnet's listen, the handles exchanged, connect, regMr) and driven as
 * NCCL's proxy drives it: requests of at most 2 MiB, up to 8 in flight,
 * tested in order, a NULL request retried.
 *
 * Ring, aggregators and auto run side by side in one process: each mode is
 * its own instance of the plugin, a copy of the library under another name
 * (dlopen loads a file once), initialised with its own settings: ring
 * without SUMCAST_AGGREGATORS, aggregators with SUMCAST_SPLIT=1, auto with
 * the user's SUMCAST_SPLIT (auto by default). */
#ifndef SUMCAST_PERF_HOST_H
#define SUMCAST_PERF_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../plugin/nccl_net.h"
#include "boot.h"

#define HOST_LINE 512

struct host {
	const char *mode;          /* "ring", "aggs", "auto" */
	void *dl;
	const ncclNet_v11_t *net;
	const ncclCollNet_v11_t *coll;
	void *nctx, *cctx;
	void *cc, *mh;             /* this process's collnet communicator, its region's handle */
	int speed_mbps;            /* the device's speed, as the plugin reports it */
	char dev[64];              /* the device's name ("sumcast-tcp;ofi_rxm") */
	/* what the plugin told NCCL's logger */
	int warns, faults, agg_path, naggs;
	char connect_line[HOST_LINE]; /* "collnet job ...: rank r of n, ..." */
	char first_warn[HOST_LINE];
	char closed[HOST_LINE];       /* the close summary ("... closed: ... split ...") */
	double agg_gb, ring_gb;       /* parsed from it */
	bool verbose;
};

/* The library NCCL would load: path, else NCCL_NET_PLUGIN (a path, or a
 * name: libnccl-net-<name>.so on the library path), else
 * libnccl-net-sumcast.so. Its file, resolved, into out. 0 or -1 with err. */
int host_find(const char *path, char *out, size_t len, char *err, size_t errlen);
/* An instance of the library at lib for `mode`, copied into dir and
 * loaded from there; the copy is removed on every way out (loaded or not),
 * so dir is left empty. The plugin reads its settings now: SUMCAST_AGGREGATORS is hidden from the
 * ring's, SUMCAST_SPLIT set to split (NULL: as the environment has it). */
int host_open(struct host *h, const char *lib, const char *dir, const char *mode, bool aggregators,
	      const char *split, bool verbose, char *err, size_t errlen);
/* The collnet communicator of this process's head: listen, handles
 * exchanged (b: every process, heads processes per node, head = rank %
 * heads), connect, then region registered. 0 or -1 with err. */
int host_connect(struct host *h, struct boot *b, int heads, void *region, size_t region_len, char *err,
		 size_t errlen);
/* One allreduce of count elements as NCCL's proxy issues it. 0, or -1
 * with err (an error from the plugin, or no completion for timeout_s). */
int host_allreduce(struct host *h, void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
		   double timeout_s, char *err, size_t errlen);
/* One ReduceScatter (kind 1) or AllGather (kind 2) of nranks blocks of bpr
 * bytes through NCCL's windows (at most 2 MiB, 8 in flight, NCCL's pointer
 * rule): RS send is the whole buffer, recv this rank's block; AG the
 * other way round. */
int host_window(struct host *h, int kind, void *send, void *recv, size_t bpr, int nranks, int rank,
		ncclDataType_t t, ncclRedOp_t op, double timeout_s, char *err, size_t errlen);
/* deregMr, closeColl (the plugin logs its summary), finalize. */
void host_close(struct host *h);

#endif
