/* Internals shared by the plugin's modules: settings, logging into NCCL,
 * error mapping, device properties, the p2p engine (net_comm.c) and the
 * collnet engine (collnet_*.c, ring.c, split.c). Nothing here is exported;
 * only the vtables in net_nccl.c and collnet_nccl.c carry SC_EXPORT. */
#ifndef SUMCAST_PLUGIN_H
#define SUMCAST_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fabric.h"
#include "nccl_net.h"
#include "reduce.h"
#include "clock.h"

#define SC_EXPORT __attribute__((visibility("default")))
#define PLUGIN_NAME "Sumcast"
#define PLUGIN_MAX_RECVS 8

/* SUMCAST_* settings (one table, plugin.c), each logged once at init. */
struct plugin_settings {
	char provider[CFG_STR_MAX];    /* libfabric provider, "auto": best available */
	char iface[CFG_STR_MAX];       /* local address to bind, "": provider's choice */
	char aggregators[CFG_STR_MAX]; /* "host:port,host:port"; "": ring only */
	char split[CFG_STR_MAX];       /* "auto" or a fraction in [0, 1] */
	double link_gbps;              /* node link; 0: from provider, else 25 */
	double agg_gbps;               /* one aggregator's link; 0: same as link */
	double agg_eff;                /* split model: aggregator path's share of its link */
	char key_file[CFG_STR_MAX];
	uint64_t chunk_bytes;          /* aggregator chunk */
	int64_t window;                /* aggregator chunks in flight */
	int64_t weight;                /* the window's multiplier, as the daemons grant it */
	uint64_t ring_chunk_bytes;
	int64_t ring_window;
	uint64_t small_bytes;          /* latency rule threshold */
	int64_t connect_timeout_ms;
	int64_t agg_timeout_ms;        /* job timeout asked of the aggregators; recovery's bound */
	int64_t agg_deadline_ms;       /* an aggregator that answers no PING this long has failed */
	bool failover;                 /* survive aggregator faults (else they fail the requests) */
	int64_t retain_hold_ms;        /* a complete request's report held for fewer retention copies */
	int64_t readmit_ms;            /* a failed aggregator is tried again this often; 0: never */
	int64_t readmit_max_ms;        /* the most a flapping aggregator is kept out at a time */
	bool multicast;                /* join an aggregator's multicast group when it offers one */
	int64_t mc_nack_us;            /* quiet time before a missing multicast result is NACKed */
	int64_t test_mc_drop;          /* test hook: datagrams dropped per mille */
	int64_t max_recvs;
	char log_level[CFG_STR_MAX];
	uint64_t eager_bytes;          /* CFG_SIZE_AUTO_VALUE: the provider's eager limit; 0: off */
	bool deterministic;            /* aggregators reduce in rank order (rank 0's decides) */
	char trace[CFG_STR_MAX];       /* file prefix for the per-allreduce trace; "": off */
	int64_t fan_in;                /* most nodes one aggregator job takes in; above: a tree */
	char job_label[CFG_STR_MAX];   /* the scheduler's name for the job (JOIN, /stats); "":
					* SLURM_JOB_ID, else POD_NAME, else none (plugin.c) */
	bool tuner;                    /* the tuner sets CollNet's costs (tuner_nccl.c); false: NCCL's */
};

extern struct plugin_settings plugin_cfg;
/* The table behind plugin_cfg (tests: every setting's spellings). */
const struct cfg_entry *plugin_settings_table(void);

/* Once per process: installs the NCCL logger as log sink, loads and logs the
 * settings, picks the reduce kernels. Later calls only refresh the logger. */
int plugin_init(ncclDebugLogger_t logger);

/* NCCL's profiler callback (ncclNet v10+ init), kept plugin-wide as the
 * logger is: a non-NULL one replaces the last, NULL changes nothing (v11
 * inits come per communicator, all with NCCL's one function). The p2p
 * engine reports its events through it (plugin/prof_events.h); NULL: none
 * given, and the only cost is the branch on it. */
extern ncclProfilerCallback_t plugin_prof_cb;
void plugin_prof_set(ncclProfilerCallback_t cb);
static inline ncclProfilerCallback_t plugin_prof(void)
{
	return __atomic_load_n(&plugin_prof_cb, __ATOMIC_ACQUIRE);
}

/* The one way the plugin opens an endpoint of its own (the ncclNet one,
 * a collnet communicator's ring, a tree's inner ones): SUMCAST_PROVIDER on
 * SUMCAST_IFACE, a CQ of 4,096. */
int plugin_fabric_open(bool thread_safe, struct fabric **out);

/* The one place negative errnos / FI_E* become ncclResult_t. */
ncclResult_t plugin_result(int rc);

/* Properties shared by ncclNet and ncclCollNet. */
struct plugin_props {
	const char *name;
	int speed_mbps;
	float latency_us;
	int max_recvs;
	size_t max_p2p_bytes, max_coll_bytes;
};
/* Of the device behind f (the p2p endpoint, or the collnet's own). */
int plugin_props_get(const struct fabric *f, int dev, struct plugin_props *out);
/* NCCL property structs: both vtables fill the v9 layout (zeroed first:
 * vProps.devs has more slots than are set) and convert it to v8 / v11 /
 * v12 field by field (v12: railId and planeId NCCL_NET_ID_UNDEF). */
void plugin_props_v9(const struct plugin_props *p, int dev, int max_comms, int max_recvs,
		     ncclNetProperties_v9_t *out);
/* A vtable's own v9 getter, then the v8 / v11 / v12 conversion of what it filled. */
typedef ncclResult_t (*plugin_props_v9_fn)(int dev, ncclNetProperties_v9_t *out);
ncclResult_t plugin_props_as_v8(plugin_props_v9_fn v9, int dev, ncclNetProperties_v8_t *out);
ncclResult_t plugin_props_as_v11(plugin_props_v9_fn v9, int dev, ncclNetProperties_v11_t *out);
ncclResult_t plugin_props_as_v12(plugin_props_v9_fn v9, int dev, ncclNetProperties_v12_t *out);

/* dtype/op mapping. Returns 0 or -ENOTSUP. */
int plugin_dtype(ncclDataType_t t, enum sc_dtype *out);
int plugin_op(ncclRedOp_t op, enum sc_op *out);


#endif
