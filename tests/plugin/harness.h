/* The harness that plays NCCL against libnccl-net-sumcast.so: N processes,
 * each one node's head rank, dlopen the plugin, exchange listen handles
 * (files in a temp dir stand in for NCCL's bootstrap), connect on one
 * thread while another issues requests, as NCCL's proxy does.
 *
 *   harness p2p   --nranks N [--version 12|11|10|8]   (10: with --profile-events)
 *                 [--close-inflight]   (closeSend with a send the peer has not received:
 *                 the comm must outlive the late completion)
 *   p2p and coll: [--profile-events [--profiler LIB]]   (v10 and later: NCCL's
 *                 profiler callback and a pHandle per message, every event
 *                 started, nested and closed; the collnet makes none: harness_prof.c;
 *                 HARNESS_PROF_MASK: the events the harness's recorder asks for)
 *   harness coll  --nranks N [--naggs M] [--split S] [--version 12|11|10|9|8]
 *                 [--expect agg|joined|ring]   (the path every node must have taken,
 *                 checked on the bytes it carried: harness_check.c; turns on --trace)
 *                 [--trace]   (SUMCAST_TRACE: each rank checks its trace file)
 *                 [--deterministic]   (SUMCAST_DETERMINISTIC=1, --split 1: sums
 *                 whose rounding depends on the order must equal the rank-order sum)
 *   harness rsag  --nranks N [--version 12|11|10|9|8] [--trace] [--naggs M --expect joined]
 *                 (ReduceScatter and AllGather windows: harness_rsag.c)
 *   harness scale --nranks N [--heads H] [--naggs M] [--split S] [--iters K]
 *                 [--expect agg|ring] [--max-connect S] [--max-idle-cpu S] [--json]
 *                 (H x N processes, one per GPU rank: head h of every node forms
 *                 collnet communicator h, as NCCL's CollNet Direct builds them;
 *                 K allreduces of 8 B and of 2 MiB each, exact; connect time from
 *                 the first listen to the last connect, idle CPU, RSS, the
 *                 daemons' jobs: harness_scale.c)
 *   harness fault --nranks N --naggs M --fault KIND[,KIND] [--fault-agg I] [--ops K]
 *                 (aggregator faults during many mixed allreduces: harness_fault.c)
 *   harness bench --nranks N [--naggs M] [-b BYTES] [-e BYTES] [-f FACTOR] [--type T] [--json]
 *                 [--rounds R] [--time-per-size S]   (ring, agg, auto interleaved)
 *                 [--splits 0,0.25,0.5,0.75,1,auto]   (one variant per split, interleaved)
 *                 [--coll allreduce|reducescatter|allgather]   (the collective timed;
 *                 the last two: NCCL's window calls, ring only)
 *                 a fabric_rtt row (8-byte ping-pong, ranks 0 and 1, interleaved with
 *                 the first size's rounds; --no-rtt: none)
 *
 * Emulated cluster (bench/cluster/run): with SUMCAST_HARNESS_NETNS=ns0,ns1,...
 * rank r enters network namespace r (setns on /run/netns/<name>) right after
 * the fork, before the plugin is opened, and with SUMCAST_HARNESS_IFACES=
 * ip0,ip1,... binds there (SUMCAST_IFACE). The rendezvous is files in a
 * /tmp dir, which every namespace shares. SUMCAST_HARNESS_NETDEV=eth0: bench
 * rows carry each mode's in-band link rates (the rank's /proc/self/net/dev
 * counters around its timed samples).
 *
 * Exit: 0 pass, 1 fail, 77 skipped (reason on stderr). Every loop is bounded
 * in count and time. bench/allreduce.c runs the bench mode as its own
 * program.
 *
 * One file per step, in the order a run takes them:
 *   harness_main.c     options, environment, key files; runs the mode
 *   harness_daemons.c  sumcastd aggregators on 127.0.0.1: start, stop, /metrics
 *   harness_ranks.c    the rank processes: fork, network namespace, wait;
 *                      the rendezvous files that stand in for NCCL's bootstrap
 *   harness_nccl.c     NCCL's side of the plugin: dlopen, the v11/v8 vtables,
 *                      the logger, NCCL's proxy loop for collnet requests
 *   harness_p2p.c      the p2p test (ncclNet over a ring of ranks)
 *   harness_prof.c     --profile-events: NCCL's profiler callback, proxy steps
 *                      and a recording profiler (or a profiler plugin's)
 *   harness_coll.c     the collnet test (allreduce of every type and op)
 *   harness_rsag.c     the window test: CollNet Direct's ireducescatter and
 *                      iallgather driven as NCCL's proxy drives them
 *   harness_check.c    reference inputs and results, rank-order sums, the
 *                      trace check, the path check (--expect)
 *   harness_bench.c    the bench mode (bench/allreduce)
 *   harness_scale.c    the scale test and bench/scale's runs (--heads)
 *   harness_fault.c    the fault test (aggregators killed, stopped, drained,
 *                      restarted, cut off; a node killed)
 *   harness_faultbench.c  the fault benchmark (bench/faults)
 *   harness_cli.c      main() of plugin_harness
 * This header is private to those files (and bench/allreduce.c). */
#ifndef SUMCAST_TESTS_PLUGIN_HARNESS_H
#define SUMCAST_TESTS_PLUGIN_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <signal.h>

#include "../../plugin/nccl_net.h"
#include "check.h"

#define SKIP 77
#define MAX_RANKS 256 /* nodes of one communicator */
#define MAX_AGGS 8

/* ---- options (harness_main.c) ---- */

struct opts {
	const char *mode, *plugin, *daemon;
	int nranks, naggs, version;
	const char *split;
	size_t min_bytes, max_bytes;
	const char *type;
	const char *aggs; /* given addresses: no daemons started */
	/* with aggs: their HTTP addresses (host:port, in aggs' order), so
	 * daemon_jobs can read the /stats of daemons it did not start */
	const char *agg_http;
	bool json, verbose;
	int timeout_s;
	int key; /* 0: no auth, 1: same key, 2: ranks use another key */
	const char *expect; /* "agg", "joined" or "ring": the path every node takes */
	bool deterministic; /* SUMCAST_DETERMINISTIC=1 and the rank-order check */
	bool trace;         /* SUMCAST_TRACE=<rv_dir>/trace and the trace check */
	bool close_inflight; /* p2p: close a send comm with a send in flight */
	int mc;             /* --multicast: datagrams dropped per mille; -1: unicast results */
	bool expect_adaptive; /* the trace must show adaptive requests at two splits or more */
	int heads;          /* collnet communicators per node (CollNet Direct heads), 1: one */
	int groups;         /* coll --groups G: allreduces through NCCL's proxy of G x 8 channels (0: none) */
	int stall_rank;     /* coll --stall R: rank R goes quiet in an allreduce (-1: none) */
	int iters;          /* scale: allreduces of each size */
	size_t sweep;       /* scale --sweep COUNT[,WCOUNT]: harness_sweep.c's checks, 0: none */
	size_t sweep_w;     /* WCOUNT: the windows' elements per rank (COUNT unless given) */
	double max_connect_s;  /* scale: fail when connect took longer (0: no bound) */
	double max_idle_cpu;   /* scale: fail when a process used more CPU per idle second (s) */
	int fan_in;         /* --fan-in: SUMCAST_FAN_IN; 0: the plugin's default */
	bool profile_events; /* NCCL's profiler callback and pHandles (harness_prof.c) */
	const char *profiler; /* --profiler LIB: a profiler plugin instead of the harness's recorder */
};
extern struct opts opt;
/* The collnet is a tree (opt.fan_in below opt.nranks): its shape as the
 * plugin computes it (plugin/collnet_tree.c), for the checks. */
static inline bool tree_on(void)
{
	return opt.fan_in >= 2 && opt.nranks > opt.fan_in;
}

/* HARNESS_MC_VIA=ib with --multicast: results by the InfiniBand/RoCE
 * transport (common/mcast_ib.c) on the verbs double (tests/support/
 * ibdouble.c, preloaded by the test): the daemons listen on a dummy
 * interface's address in the run's network namespace, which the double
 * takes for an RDMA device's (one end of a veth pair: this kernel may lack dummy links); that address, or NULL for IP multicast. */
#define HARNESS_MC_IB_ADDR "10.213.0.1"
static inline const char *harness_mc_ib(void)
{
	const char *v = getenv("HARNESS_MC_VIA");
	return v && !strcmp(v, "ib") ? HARNESS_MC_IB_ADDR : NULL;
}
/* Default paths of the plugin and the daemon; "" (the default): next to
 * this binary (../plugin, ../daemon). plugin_harness sets the build's. */
extern const char *harness_plugin_default, *harness_daemon_default;

/* Runs one invocation; forced_mode NULL takes the mode from argv[1].
 * Returns the exit code. */
int harness_main(int argc, char **argv, const char *forced_mode);
size_t parse_size(const char *s);
void usage(void) __attribute__((noreturn));

/* --expect-adaptive: adapt_note takes every trace line, adapt_check
 * fails unless at least three windows of adaptive requests ran and their
 * splits took two values or more (the split moved). */
void adapt_note(const char *line);
void adapt_check(void);

/* ---- failing (every file) ---- */

/* The process tests' assertions (tests/support/check.h). Every check of
 * the harness is a REQUIRE: a rank that fails one stops there (the others
 * would wait for it), and run_ranks then ends the run. FAIL lines carry
 * the rank ("[rank 2] FAIL ..."). */
extern int my_rank; /* -1 in the parent */
/* --heads H: H x nranks processes; process p is head p / nranks of node
 * p % nranks, rank my_rank = p % nranks of communicator my_head. The
 * rendezvous names below are per communicator (my_head). */
extern int my_head, my_proc;

#define NCHECK(call)                                                        \
	do {                                                                \
		ncclResult_t r_ = (call);                                   \
		REQUIRE(r_ == ncclSuccess, "%s returned %d", #call, (int)r_); \
	} while (0)

/* ---- rank processes and rendezvous (harness_ranks.c) ---- */

extern char rv_dir[PATH_MAX]; /* the run's temp dir: rendezvous, keys, logs, traces */
/* Set by the parent's SIGTERM/SIGINT handler. */
extern volatile sig_atomic_t stop_sig;

/* Forks opt.nranks ranks running fn, waits for all (bounded by
 * opt.timeout_s); the first failure kills the rest. The exit code. */
int run_ranks(void (*fn)(void));
void on_stop(int sig);
/* Removes rv_dir and what is in it. */
void rm_dir(void);
/* Publishes / waits (60 s) for rank's copy of name; a barrier of all ranks. */
void rv_put(const char *name, int rank, const void *buf, size_t len);
void rv_get(const char *name, int rank, void *buf, size_t len);
void rv_barrier(const char *name);
/* A barrier of every process (all heads); process 0 lets the others go
 * hold_s seconds after the last arrived. */
void rv_barrier_all(const char *name, double hold_s);
/* The path of a rendezvous file (this run's generation). */
void rv_path(char *out, size_t len, const char *name, int head, int rank);
/* v[0..n) summed over all ranks (n <= 8), in place. */
void rv_all_sum(const char *name, uint64_t *v, size_t n);
/* The first rank whose v differs from this rank's, or -1: all equal. */
int rv_first_differing(const char *name, uint64_t v);
/* tx/rx byte counters of SUMCAST_HARNESS_NETDEV; false when unset. */
bool netdev_bytes(uint64_t *tx, uint64_t *rx);

/* ---- NCCL's side of the plugin (harness_nccl.c) ---- */

struct plug {
	void *dl;
	const ncclNet_v12_t *n12;
	const ncclNet_v11_t *n11;
	const ncclNet_v8_t *n8;  /* the net table of --version 8, 9 and 10 (v10: the calls v8's has alike) */
	const ncclNet_v10_t *n10; /* --version 10: init (the profiler callback), connect, isend, irecv */
	const ncclCollNet_v12_t *c12;
	const ncclCollNet_v11_t *c11;
	const ncclCollNet_v8_t *c8;
	const ncclCollNet_v9_t *c9; /* ncclCollNetPlugin_v9 or _v10 (one layout) */
	void *nctx, *cctx;
};
extern struct plug P; /* the plugin instance the calls below go to */

/* v11 and v12: the tables with a context (init gives it, listen / connect
 * take it, finalize ends it); their calls are the same but for the
 * properties and vProps layouts. */
#define HARNESS_CTX_ABI (opt.version >= 11)
/* An entry point of those two tables, through the table of opt.version
 * (ncclNet: NET_CTX_CALL, ncclCollNet: CN_CTX_CALL). */
#define NET_CTX_CALL(fn, ...) \
	(opt.version == 12 ? P.n12->fn(__VA_ARGS__) : P.n11->fn(__VA_ARGS__))
#define CN_CTX_CALL(fn, ...) \
	(opt.version == 12 ? P.c12->fn(__VA_ARGS__) : P.c11->fn(__VA_ARGS__))
/* A net entry point whose signature is the same in every version
 * (devices, accept, regMr, deregMr, test, closeSend, closeRecv,
 * closeListen), through the table of opt.version (v9, v10: v8's). */
#define NET_CALL(fn, ...) \
	(HARNESS_CTX_ABI ? NET_CTX_CALL(fn, __VA_ARGS__) : P.n8->fn(__VA_ARGS__))
/* A collnet entry point whose signature is the same in every version
 * (devices, connect, reduceSupport, regMr, deregMr, test, closeColl,
 * closeListen), through the table of opt.version. */
#define CN_CALL(fn, ...)                                                    \
	(HARNESS_CTX_ABI ? CN_CTX_CALL(fn, __VA_ARGS__)                     \
	 : opt.version == 8 ? P.c8->fn(__VA_ARGS__) : P.c9->fn(__VA_ARGS__))

/* What the plugin told NCCL's logger: lines with the NET/Sumcast prefix,
 * and which path collnet connect announced. */
extern int log_prefix_ok, saw_agg_path, saw_fallback;
/* Aggregator faults the plugin logged (its one WARN per fault), and how
 * many aggregators the last collnet connect announced (-1: none yet). */
extern int saw_fault, saw_naggs;
/* The tuner's last "tuner: comm" line: its aggregators (-1: none yet) and
 * whether the figures were a communicator's (1) or the settings' (0). */
extern int saw_tuner_aggs, saw_tuner_live;
/* NCCL's logger as the harness hands it to the plugin. */
void hlog(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...);
/* NCCL's tuner in this process, with the collnet communicator connected:
 * it must cost CollNet from the communicator's own figures (harness_coll.c). */
void tuner_check_live(void);
/* The aggregators the tuner costs CollNet with: a tuner initialized as
 * NCCL does (v5), after this rank's communicator published its figures. */
int tuner_live_aggs(void);
/* stall reports logged ("has waited"), and their ring lines naming the
 * peer and the tag a column waits for */
extern int saw_stall, saw_stall_peer;
/* --stall: the next allreduce_chunked of rank opt.stall_rank goes quiet
 * (no plugin call) for stall_quiet_s once its first request is issued */
extern volatile bool stall_now;
extern double stall_quiet_s;
/* re-admissions logged ("is back"), and the waits the fault lines name
 * ("tried again in S s"), in order */
extern int saw_back, saw_nholds, saw_drain; /* and drains logged ("drains (it asked") */
extern double saw_back_t;
extern double saw_holds[16];
/* WARN lines the plugin logged; the job id connect announced (0: none). */
extern int saw_warn;
extern unsigned long long saw_job_id;
extern uint64_t saw_copied; /* bytes the fault lines say were copied from other nodes */
/* window chunks the fault lines say were redone from kept contributions /
 * copies passed on by nodes that want none of them */
extern uint64_t saw_kept, saw_passed;
/* When the first fault line came (s, monotonic), and the first sign it names. */
extern double fb_t_first, fb_t_decided;
/* When the latest fault line came (sc_now_ns; 0: none yet). */
extern uint64_t saw_fault_last_ns;
/* p2p comms the plugin parked at close (ops still posted), and freed later. */
extern int saw_parked, saw_unparked;
/* Requests this rank issued (and their bytes): what its trace must list. */
extern uint64_t issued_reqs, issued_bytes;
extern const char *coll_rv_name; /* rendezvous name of the next coll_setup */

void plugin_open(bool coll);
/* v11 / v12: the collnet's finalize (coll) and the net's; others: nothing. */
void plugin_finalize(bool coll);
/* Device 0's properties through the table of opt.version. */
void net_props(int *speed, double *latency_us, int *max_recvs);
int max_recvs(void);
void net_listen(void *h, void **lc);
ncclResult_t net_connect(void *h, void **sc);
ncclResult_t net_accept(void *lc, void **rc);
void *net_reg(void *comm, void *p, size_t len);
void net_dereg(void *comm, void *mh);
void *net_isend(void *sc, void *p, size_t len, int tag, void *mh);
void *net_irecv(void *rc, int n, void **p, size_t *len, int *tags, void **mh);
int net_test(void *req, int *sizes);
void net_wait(void *req, int *sizes, const char *what);
/* collnet listen + rendezvous + connect and regMr on a proxy thread. */
void *coll_setup(uint8_t *region, size_t region_len, void **mh);
void *c_iallreduce(void *cc, void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
		   void *mh);
int c_test(void *req, int *size);
/* The same, handing back what the plugin returned instead of failing. */
ncclResult_t c_iallreduce_rc(void *cc, void *s, void *r, size_t count, ncclDataType_t t,
			     ncclRedOp_t op, void *mh, void **req);
ncclResult_t c_test_rc(void *req, int *done, int *size);
/* CollNet Direct's window calls through the table of opt.version (v8: the
 * part converted to its 32-bit size). What the plugin returned. */
ncclResult_t c_iallgather_rc(void *cc, void *send, void *recv, size_t bpr, size_t wo, size_t wb,
			     void *smh, void *rmh, void **req);
ncclResult_t c_ireducescatter_rc(void *cc, void *send, void *recv, size_t bpr, size_t wo,
				 size_t wb, ncclDataType_t t, ncclRedOp_t op, void *smh, void *rmh,
				 void **req);
/* NCCL's proxy for CollNet Direct: kind 1 reduce-scatter, 2 allgather of
 * nranks blocks of bpr bytes, windows of at most 2 MiB, 8 outstanding. */
void window_chunked(void *cc, int kind, uint8_t *send, uint8_t *recv, size_t bpr, ncclDataType_t t,
		    ncclRedOp_t op, void *mh);
/* More spinning ranks and daemons than CPUs: waiting loops yield. */
bool harness_oversubscribed(void);
/* A waiting loop's pass: moved (something completed) resets *nap; else,
 * as SUMCAST_HARNESS_POLL_US says (harness_nccl.c), a nap doubling from
 * 16 us to 1 ms, a sleep, a yield when oversubscribed, or nothing. */
void harness_idle(unsigned *nap, bool moved);
/* NCCL's proxy: chunks of at most 2 MiB, up to 8 outstanding, in order. */
void allreduce_chunked(void *cc, uint8_t *send, uint8_t *recv, size_t count, ncclDataType_t t,
		       ncclRedOp_t op, void *mh);
/* NCCL's proxy as it runs an allreduce over ngroups x 8 channels: pieces
 * of piece_bytes, piece p being group p % ngroups's step p / ngroups;
 * groups post in order, 8 outstanding each, and a group tests nothing in
 * a pass in which it posted or got a NULL request (harness_nccl.c). */
void allreduce_grouped(void *cc, uint8_t *send, uint8_t *recv, size_t count, ncclDataType_t t,
		       ncclRedOp_t op, void *mh, int ngroups, size_t piece_bytes);

/* ---- NCCL's profiler (harness_prof.c; all do nothing without --profile-events) ---- */

/* Loads the profiler, starts the proxy op; the callback for the net's
 * init (NULL without --profile-events). */
ncclProfilerCallback_t prof_setup(void);
/* Before an isend / irecv: a proxy step per sub, their pHandles into
 * phandles[0..n); after it: the request it returned (NULL: refused, the
 * steps end). prof_done: test() said the request is done. */
void prof_post(int kind, int n, const int *tags, const size_t *sizes, void **phandles);
void prof_posted(void *req, int n, void **phandles);
void prof_done(void *req);
/* The end of a test: the steps still open end, then the checks. */
void prof_finish(void);

/* ---- the tests (harness_p2p.c, harness_coll.c, harness_bench.c) ---- */

void run_p2p(void);
void run_coll(void);
void run_rsag(void); /* harness_rsag.c: ReduceScatter / AllGather windows */
/* bench/allreduce --coll: which collective the bench mode times */
extern int bench_coll; /* 0 allreduce, 1 reducescatter, 2 allgather */
void run_bench(void);
void run_fault(void);
/* harness_sweep.c: allreduce of every type and op at 1 and count elements
 * (four pairs at 524,288), ReduceScatter and AllGather through NCCL's windows at wcount
 * per rank, each checked exactly (with --heads, this communicator's share
 * of them); the checks it made. sweep_checks_all: the checks of the whole
 * sweep. sweep_region_bytes: the region it needs. */
int sweep_checks_all(size_t count, size_t wcount);
size_t sweep_region_bytes(size_t count, size_t wcount);
int sweep_run(void *cc, void *mh, uint8_t *region, size_t region_len, size_t count, size_t wcount);
/* harness_scale.c: many ranks and communicators (--heads), connect time,
 * idle CPU, RSS; scale_report: the parent's summary of every process. */
void run_scale(void);
int scale_report(void);
void run_faultbench(void); /* bench/faults: harness_faultbench.c */
int faultbench_option(int c, const char *arg); /* 0, or -1: usage */
void faultbench_bytes(size_t b);
/* fault options */
struct fault_opts {
	int k1, k2;      /* fault kinds (harness_fault.c), 0: none */
	int agg;         /* the aggregator of the first fault (the second: the next one) */
	uint64_t ops;    /* allreduces */
	uint64_t at;     /* the first fault comes as this one starts (0: ops / 3) */
	bool copies;     /* some node must copy a result from another */
	bool small_rs;   /* every collective a small reduce-scatter (one window) */
	bool kept;       /* some node must redo a window chunk from what it kept */
	int cut_node;    /* cmd: the node whose route the command cuts (-1: not said) */
	bool done1, done2;
	bool readmit;    /* the aggregator must come back into this communicator */
	int flaps;       /* --fault flap: kill and restart it this many times */
};
extern struct fault_opts fopt;
int fault_option(const char *kinds); /* 0, or -1: usage */
/* The fault kind restarts every daemon from rank 0 (rolling): the parent's
 * view of them is stale at the end. */
bool fault_replaces_daemons(void);
const char *fault_skip_why(void);   /* NULL, or why this fault cannot run on this libfabric */
bool fault_options_ok(void);          /* after every option: --cut-node where needed */
/* bench options */
int bench_option(int c, const char *arg); /* 0, or -1: usage */
bool bench_options_ok(void);
/* Before the ranks: one copy of the plugin per mode. 0 or 1. */
int bench_prepare(void);

/* ---- references and checks (harness_check.c) ---- */

size_t type_size(ncclDataType_t t);
const char *type_name(ncclDataType_t t);
const char *op_name(ncclRedOp_t op);
int64_t in_val(ncclDataType_t t, ncclRedOp_t op, int rank, size_t i);
int64_t ref_val(ncclDataType_t t, ncclRedOp_t op, size_t i);
void put(ncclDataType_t t, void *buf, size_t i, int64_t v);
uint64_t fnv(uint64_t h, const uint8_t *p, size_t n);
uint64_t check_rank_order(void *cc, uint8_t *send, uint8_t *recv, size_t half, void *mh,
			  uint64_t hash);
/* Checks this rank's trace file; returns the bytes it lists as sent
 * to the aggregators (agg_sent). */
/* Window bytes through the aggregators (agg_bytes of reduce-scatter /
 * allgather lines), and of those: reduce-scatter bytes whose result came
 * back here (agg_got), allgather bytes sent from here (agg_sent). */
extern uint64_t trace_win_agg, trace_rs_agg, trace_rs_got, trace_ag_agg, trace_ag_sent;
uint64_t check_trace(void);
struct agg_view;
/* --expect: the path every node took, from what connect logged, what the
 * trace lists and what the daemons counted from this rank. */
void check_expect(const struct agg_view *v, uint64_t trace_agg_bytes);
/* The end of a collnet test: the daemons' view of the job while it is
 * still open (--expect), deregMr, closeColl, the trace (--trace), the v11
 * finalize calls, then the --expect check. */
void coll_finish(void *cc, void *mh);

/* ---- aggregators (harness_daemons.c) ---- */

/* Starts opt.naggs sumcastd; aggs gets "host:port,...". 0, 1 or SKIP. */
int daemons_start(char *aggs, size_t len);
void daemons_stop(void);
/* What the daemons this run started hold (their /stats) of the job of
 * opt.nranks ranks, from rank's side. */
struct agg_view {
	int ndaemons; /* started by this run (0 with --aggs) */
	int jobs;     /* such jobs, over all daemons */
	int holding;  /* daemons holding exactly one, every rank joined */
	uint64_t bytes[MAX_AGGS]; /* DATA bytes each daemon counted from rank */
};
/* 0, or -1 when a daemon did not answer or its /stats did not parse. */
int daemons_view(int rank, struct agg_view *v);
/* --heads: one daemon's view of the jobs in ids[0..n): how many it holds
 * ready with every one of nranks ranks joined, the fewest chunks any of them
 * reduced, their DATA bytes in, their posted receives (window x nranks
 * summed over every job it holds), its RSS (kB). 0 or -1. */
struct agg_jobs {
	int held;
	int rejoined; /* of those held, joined again by a running communicator ("rejoined") */
	uint64_t min_chunks, bytes_in, posted_recvs, rss_kb, memory;
};
int daemon_jobs(int i, const unsigned long long *ids, int n, struct agg_jobs *out);
int daemons_count(void);
/* A tree's inner jobs on the daemons this run started: every job each
 * holds, whatever its size. */
struct tree_view {
	int ndaemons;
	int jobs;           /* over all daemons */
	int joined_all;     /* of those, with every rank joined */
	int idle;           /* of those, with no DATA byte counted */
	uint32_t max_nranks;
	uint64_t sum_nranks, bytes; /* over all daemons and jobs */
};
int daemons_tree_view(struct tree_view *v);
/* --expect agg on a tree: the inner jobs every daemon holds (the view taken
 * while they are open), and their bytes against every node's trace. */
void check_tree(const struct tree_view *v, uint64_t trace_sent);
/* --multicast: the multicast counters of the daemons that answer
 * /metrics (a killed or stopped one does not), summed. 0, or -1 when none
 * answered. */
int daemons_mc(uint64_t *results, uint64_t *nacks);
/* How many of this run's daemons (their log files: not with --verbose)
 * logged a line containing s. */
int daemons_log_count(const char *s);
/* Aggregator i of this run: a signal to it, its control port, and a new
 * sumcastd on that port (started by, and dying with, the caller). */
int daemon_signal(int i, int sig);
uint16_t daemon_port(int i);
int daemon_restart(int i);
/* Nothing answers aggregator i's control port (the old process is gone). */
bool daemon_port_free(int i);

#endif
