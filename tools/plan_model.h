/* The sizing model behind `sumcastctl plan` (docs/sizing.md): what a collnet
 * allreduce of S bytes costs through the aggregators (flat, or the two-level
 * tree of plugin setting SUMCAST_FAN_IN), on the plugin's ring, split and
 * under split=auto, and what it holds on each aggregator. Analytical, with
 * the queueing of processes on shared cores for the loopback mode; pure
 * functions, no I/O.
 *
 * Every constant in struct plan_costs comes from this project's own
 * measurements; plan_model.c's table names the source of each. */
#ifndef SUMCAST_PLAN_MODEL_H
#define SUMCAST_PLAN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

/* Measured costs (plan_costs_default fills them; plan_model.c says where
 * each one was measured). */
struct plan_costs {
	/* fabric (links are the limit) */
	double link_eff;      /* share of a link's rate reached by long transfers */
	double agg_eff;       /* aggregator path's share of its link inside a split */
	double hop_us;        /* one hop: a message from a node to its peer */
	double agg_msg_us;    /* aggregator data thread, per message (in or out) */
	double agg_tcp_ns;    /* aggregator CPU per byte received on tcp (all of it) */
	double lane_cpu;      /* a job spread over data threads (lanes): its CPU per byte
			       * against one thread's (>= 1: what the spreading costs) */
	double reduce_gbps;   /* one core, f32 sum, GB/s of input */
	/* loopback (every process on one host of K cores: the CPUs are the
	 * limit); P = processes on the host. The ring and the aggregators are
	 * different code paths (the plugin's ring over p2p; the client and a
	 * daemon's data thread), each with its own figures */
	double lb_ring_step_us;  /* a ring step's fixed part (wake-up, poll) */
	double lb_ring_share_us; /* CPU a runnable process takes per round, per ring step */
	double lb_ring_msg_us;   /* a ring message above the eager cut (rendezvous) */
	double lb_ring_eager_us; /* a ring column of a segment cut into eager columns (common/chunk.h) */
	double lb_ring_byte_ns;  /* CPU per ring byte (send and receive copies) */
	double lb_ring_byte_proc;/* growth of that per process on the host */
	double lb_agg_step_us;   /* the aggregator path's fixed part, per phase and way */
	double lb_agg_msg_us;    /* daemon data thread, per message */
	double lb_agg_share_us;  /* what a runnable process adds to each of them */
	double lb_agg_byte_ns;   /* CPU per byte to and from the daemons */
	double lb_agg_byte_proc; /* growth of that per process on the host */
	/* past lb_nap_per_core node processes per core the harness's waits
	 * nap (16 us doubling to 1 ms) instead of yielding: a step then waits
	 * for a napping process to wake, and the nappers' wake-ups load the
	 * cores */
	double lb_nap_per_core;  /* the harness's threshold (node processes per core) */
	double lb_ring_nap_us;   /* napping: each ring step */
	double lb_ring_nap_data_ns; /* napping: per byte of a ring step's segment above the eager cut */
	double lb_ring_nap_eager_ns;/* napping: the same where the segment is cut into eager columns */
	double lb_agg_nap_share_us; /* napping: per daemon message, per process on the host */
	double lb_agg_nap_data_us;  /* napping: the same for messages above the eager cut */
	double lb_conn_us;       /* connect: CPU per node process */
	double lb_conn_sq_us;    /* connect: CPU per pair of node processes */
};

void plan_costs_default(struct plan_costs *c);

struct plan_in {
	uint32_t nodes;        /* N: ranks of each collnet communicator */
	uint32_t heads;        /* H: communicators per node (CollNet Direct heads) */
	uint32_t aggs;         /* M */
	double link_gbps;      /* B: one head's link (a NIC per GPU; H = 1: the node's) */
	double agg_link_gbps;  /* B_a: one aggregator's link */
	uint64_t bytes;        /* one communicator's (head's) allreduce: S/H of a node's S */
	uint32_t fan_in;       /* F: SUMCAST_FAN_IN (64) */
	uint64_t chunk;        /* SUMCAST_CHUNK_BYTES (256 KiB) */
	uint32_t window;       /* SUMCAST_WINDOW (8) */
	uint64_t max_inflight; /* the daemons' [job] max-inflight (64 MiB) */
	uint64_t min_chunk;    /* the daemons' [job] min-chunk (16 KiB) */
	uint32_t agg_threads;  /* data threads per aggregator ([data] threads) */
	uint32_t job_threads;  /* data threads one job is spread over ([data] job-threads; 0: all) */
	uint64_t mem_budget;   /* [job] memory-budget (1 GiB) */
	uint32_t rx_queue;     /* a data thread's provider receive queue (8192) */
	uint32_t max_jobs;     /* [job] max-jobs (64) */
	double max_memory_share; /* [job] max-memory-share (0.5) */
	uint32_t max_window;   /* [job] max-window (64) */
	uint64_t max_chunk;    /* [job] max-chunk (4 MiB) */
	bool sealed;           /* the daemons have a key ([auth] key-file) */
	bool wide_types;       /* f16/bf16 among the job's types: + 2 buffers (the plugin joins with all) */
	bool tcp;              /* tcp;ofi_rxm: the aggregator copies what it receives (else RDMA: verbs, efa) */
	bool loopback;         /* every process on one host of `cores` cores */
	uint32_t cores;
	/* the split a communicator measured (the adaptive split's, for
	 * this size: plugin/tuner.c passes it): t_auto_us and split are then
	 * at it, not at the best the model finds; false: the model's */
	bool split_given;
	double split_at;       /* [0, 1] */
	struct plan_costs cost;
};

/* What one aggregator grants one job of n ranks (the in-flight cap rule
 * the daemons share: docs/sizing.md). */
struct plan_grant {
	uint32_t window;
	uint64_t chunk;
	uint32_t lanes;        /* data threads the job is spread over (admit_lanes) */
	uint64_t mem_bytes;    /* window x chunk x (n + 1, or + 2) + bookkeeping x lanes */
	uint64_t posted_recvs; /* window x n */
	uint32_t ask_window;   /* what the job asks (a tree's inner job: its share, plugin/tree_plan.c) */
	uint64_t ask_chunk;
};

struct plan_out {
	uint32_t tree_levels;  /* 1 flat, 2 tree */
	uint32_t groups;       /* G (1 when flat) */
	uint32_t group_size;   /* F' = ceil(N / G): a group's ranks */
	uint32_t max_job_ranks;/* largest fan-in of any aggregator job: max(F', G) */
	uint32_t jobs_per_agg; /* collnet jobs each aggregator holds: H (flat), H (2G + F') (tree) */
	double byte_factor;    /* bytes a node sends per byte of S through the aggregators: 1 or 1 + 2/F' */
	double split;          /* share to the aggregators under split=auto: on loopback where it
				* starts (plugin/split.c), on a fabric the best this model finds
				* (where the adaptive split climbs) */
	double split_model;    /* where the plugin's model starts it (plugin/split.c) */
	double t_ring_us;      /* the plugin's ring alone */
	double t_agg_us;       /* the aggregators alone (flat or tree) */
	double t_split_us;     /* at split_model */
	double t_auto_us;      /* at split */
	double speedup_vs_ring;/* t_ring / t_auto */
	const char *bound;     /* what limits the aggregator path: "node-link", "agg-link", "agg-cpu", "latency" */
	uint64_t agg_mem_bytes;   /* per aggregator, all jobs */
	uint64_t agg_posted_recvs;/* per aggregator, all jobs */
	struct plan_grant grant;  /* of the largest job */
	uint32_t aggs_needed;  /* the fewest aggregators that carry everything (split 1) at the nodes' link speed */
	bool agg_cpu_short;    /* at no count up to 2^16 x that do their CPUs keep up (per-message costs) */
	uint32_t job_lanes;    /* data threads each job of an aggregator is spread over (its lanes) */
	/* whether the daemons admit the jobs at these settings: NULL, or the
	 * first admission rule (common/admit.h) that refuses one of them as
	 * they join an aggregator in turn: "max-jobs", "memory-share",
	 * "memory-budget", "receive-queue" (a data thread's queue less the
	 * quarter, at most 256, the sweep keeps), "sealed-chunk" */
	const char *refused;
	uint32_t jobs_admitted;   /* of jobs_per_agg, before the first refusal */
	double connect_s;      /* collnet connect */
};

/* What one aggregator grants a job of `nranks` ranks (common/grant.h). */
struct tree_shape;
/* tree: the tree whose inner job it is (its ask, plugin/tree_plan.h), or NULL */
void plan_grant(const struct plan_in *in, uint32_t nranks, const struct tree_shape *tree,
		struct plan_grant *g);
/* Two-level tree shape for N ranks at fan-in F: groups G = ceil(N/F) (1
 * when N <= F), F' = ceil(N/G). */
void plan_tree_shape(uint32_t n, uint32_t fan_in, uint32_t *groups, uint32_t *group_size);
/* Validates `in` (0, or -1 with a sentence in err) and fills `out`. */
int plan_run(const struct plan_in *in, struct plan_out *out, char *err, int errlen);
/* Fills defaults (chunk, window, fan-in, caps, threads, costs) into a zeroed in. */
void plan_in_defaults(struct plan_in *in);
/* The daemons' admission limits (common/admit.h) at in's settings. */
struct admit_limits;
void plan_admit_limits(const struct plan_in *in, struct admit_limits *lim);

#endif
