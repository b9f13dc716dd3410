/* The collnet engine's private header: what the files of the engine share.
 * Nothing here is exported. Names say where a function sits:
 *   nccl_coll_*    the NCCL adapter (collnet_nccl.c: the vtables), static;
 *   collnet_*      the engine's entry points, one per NCCL call, which the
 *                  adapter calls (negative errnos in, out);
 *   coll_<obj>_*   helpers the engine's files share, named for the object
 *                  they work on (coll_req_*, coll_mr_*, coll_trace_*);
 *   coll_adapt_*   the adaptive split as a communicator runs it (collnet_adapt.c;
 *                  split.c has the controller it runs);
 *   failover_*, ring_*, split_*: the modules below the engine.
 *
 * The flow of one collective, and the file for each step:
 *
 *   listen, connect    collnet_listen.c (the handle: rank 0's settings),
 *                      collnet_connect.c (ring neighbours, then the
 *                      aggregators: collnet_join.c; the nodes agree on the
 *                      set over the ring: collnet_agree.c)
 *   regMr              collnet_mr.c (on the ring's endpoint and the client's)
 *   NCCL call          collnet_allreduce.c (iallreduce), collnet_window.c
 *                      (iallgather / ireducescatter: CollNet Direct windows)
 *   -> split           split.c (the model, and the adaptive split's
 *                      controller), collnet_adapt.c (the adaptive split as
 *                      a communicator runs it: measure, agree, apply)
 *   -> aggregators     the client library (client.h), and / or
 *   -> ring            ring.c
 *   -> completion      collnet_req.c (request slots, test), collnet_engine.c
 *                      (the one loop every call and wait turns: test,
 *                      refusals, blocking agreements), collnet_trace.c
 *                      (a JSON line per request), collnet_stall.c (what a
 *                      request waits for, when it waits too long)
 *   faults             failover.c (notices, agreement), failover_plan.c
 *                      (its decisions, pure), failover_repair.c (copies and
 *                      redos over the ring), failover_return.c (returns,
 *                      drains)
 *   closeColl          collnet_close.c
 *   above SUMCAST_FAN_IN nodes: collnet_tree.c, a tree's communicator whose
 *                      allreduce is three stages on inner communicators,
 *                      each made and run by the flow above */
#ifndef SUMCAST_PLUGIN_COLLNET_H
#define SUMCAST_PLUGIN_COLLNET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/queue.h>

#include "agglist.h"
#include "client.h"
#include "failover_plan.h"
#include "plugin.h"
#include "ring.h"
#include "split.h"

#define COLL_REQS 16
#define COLL_RANKS_MAX 2048 /* ring tags carry the step in 12 bits */

/* ---- the listen handle (collnet_listen.c fills it, collnet_connect.c
 * reads rank 0's: the settings every node must share travel in it) ---- */

#define COLL_MAGIC 0x53434331u /* "SCC1" */
#define COLL_F_SHARED_HOST 1u /* every aggregator on this host: never split */
#define COLL_F_DETERMINISTIC 2u /* SUMCAST_DETERMINISTIC on rank 0: rank-order sums */
#define COLL_F_NO_FAILOVER 4u   /* SUMCAST_FAILOVER=false on rank 0: faults fail requests */

struct coll_handle {
	uint32_t magic;
	uint16_t addrlen;
	uint16_t flags; /* COLL_F_* */
	uint8_t addr[FABRIC_ADDR_MAX];
	uint64_t job_id;
	int32_t split_ppm; /* -1: auto (adaptive), -2: model */
	uint32_t link_mbps, agg_mbps;
	uint32_t agg_eff_ppm; /* split model's aggregator efficiency, parts per million */
	uint32_t lat_ns; /* one hop, for the split's latency terms */
	uint64_t small_bytes;
	uint32_t eager_bytes; /* eager cut for aggregator chunks and ring columns, 0: none */
	uint32_t fan_in; /* SUMCAST_FAN_IN: above it the collnet is a tree (collnet_tree.c) */
	/* Rank 0's aggregators (SUMCAST_AGGREGATORS resolved, agglist.h), the
	 * list every node uses (collnet_join.c). In the handle's last 8 bytes,
	 * zero from a plugin before them (COLL_AGGS_SENT clear: each node its
	 * own list, as then). The entries themselves, agglist_pack's form,
	 * follow the fabric address in addr[] (addr[addrlen..addrlen +
	 * aggs_len)) when they fit (COLL_AGGS_INLINE); else every node sorts
	 * its own list (agglist_sort) and checks it against aggs_digest. */
	uint8_t aggs_n;       /* entries of rank 0's list, 0: none */
	uint8_t aggs_fmt;     /* AGGLIST_F_* | COLL_AGGS_SENT | COLL_AGGS_INLINE */
	uint16_t aggs_len;    /* bytes packed after the address (COLL_AGGS_INLINE) */
	uint32_t aggs_digest; /* agglist_digest of the list as packed, or sorted */
};
_Static_assert(sizeof(struct coll_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

#define COLL_AGGS_SENT 0x40   /* rank 0 filled the aggs_* fields */
#define COLL_AGGS_INLINE 0x80 /* its list is in addr[] after the address */

struct coll_listen {
	struct fabric *f; /* NULL once a collComm owns it */
	uint64_t job_id;
};

struct coll_mr {
	struct fabric_mr ring; /* on the collnet's endpoint (ring, repairs) */
	struct fabric_mr agg;  /* on the client's domain (aggregators) */
	bool has_agg;
	/* a tree's communicator (collnet_tree.c): the same buffer on each of
	 * its inner communicators, ninner of them; NULL on a flat one */
	struct coll_mr *inner;
	uint32_t ninner;
};

struct coll_comm;

/* What a request is: NCCL's allreduce (aggregators + ring), or CollNet
 * Direct's reduce-scatter / allgather of a window (the ring, or all of it
 * through the aggregators owner-only, client_start: split_window_agg). */
enum coll_kind { COLL_ALLREDUCE = 0, COLL_REDUCE_SCATTER, COLL_ALLGATHER, COLL_TREE };

struct coll_req {
	struct coll_comm *cc;
	bool used;
	uint8_t coll;  /* enum coll_kind */
	uint64_t idx;  /* 0, 1, 2, ... in issue order: the same request on every node */
	uint32_t seq;  /* idx in tags (20 bits) */
	size_t count, es, a; /* window ops: count x es = the window's bytes, a = 0 */
	uint8_t dtype, op; /* enum sc_dtype / sc_op */
	const void *send;
	void *recv;
	struct coll_mr *sm, *rm;
	struct client_req *creq;
	uint64_t aggs;   /* aggregators the aggregator part is sharded over */
	uint32_t epoch;  /* the failover epoch whose aggregator set it uses */
	bool agg_done, ring_done;
	uint32_t repairs;      /* failover repairs of this request still running */
	uint64_t redone_bytes; /* bytes of it repaired here (copied from a node or redone) */
	uint64_t t0, t_agg, t_ring;
	double frac;   /* the share decided for the aggregators (trace) */
	bool adaptive; /* an adaptive request: adapt_ord is its number among them */
	uint64_t adapt_ord;
	int32_t adapt_ppm;
	/* its times are in its window (coll_adapt_done): noted as soon as both
	 * paths are done, whether NCCL has tested it yet or not */
	bool adapt_noted;
	bool stall_logged; /* waited past SUMCAST_AGG_TIMEOUT: the state was logged */
	/* a reduce-scatter window through the aggregators: its reduced window
	 * lands in the slot's staging (recv), this node's part is copied to
	 * win_dst when the request is done */
	void *win_dst;
	size_t win_off, win_len;
	/* a window through the aggregators: its place in the global buffer,
	 * which decides each chunk's role here (client.h, v1.6) */
	struct client_blocks blocks;
	size_t agg_give, agg_take; /* bytes sent to / received from the aggregators */
	struct ring_op ring;
};

struct coll_stats {
	uint64_t ops, bytes, agg_bytes, ring_bytes, agg_ns, ring_ns;
	/* window ops (ring): requests, window bytes, time from issue to done */
	uint64_t rs_ops, rs_bytes, rs_ns, ag_ops, ag_bytes, ag_ns;
	uint64_t rs_agg_bytes, ag_agg_bytes; /* of those, through the aggregators */
};

/* A request slot's staging for a window through the aggregators (the
 * allgather's zero-padded send, the reduce-scatter's reduced window),
 * registered on both endpoints; grown on demand, freed at close. */
struct coll_wstage {
	struct fabric_buf mem; /* memory only: mr registers it on both endpoints */
	struct coll_mr mr;
	bool reg;              /* mr holds registrations */
};

/* A min-allreduce of n int64 over the ring (collnet_agree.c): this node's
 * values in `in`, every node's minimum in `out` once op completes. */
struct coll_agreement {
	struct fabric_buf mem; /* in[n], then out[n], registered on the ring's endpoint */
	int64_t *in, *out;
	size_t n;
	struct ring_op op;
};

/* ---- failover (failover.c) ---- */

struct fo_item;

/* One aggregator out of use, failed or drained: when it may be tried again
 * (failover.c, "Coming back"). */
struct fo_out {
	uint64_t from;      /* the first request that no longer used it */
	uint64_t next_ns;   /* join it again no earlier than this */
	uint64_t hold_ns;   /* the wait after its next fault (doubles while it flaps) */
	uint64_t back_ns;   /* when it came back last, 0: never */
	uint32_t back_epoch;/* the epoch it came back in: older fault notices of it are stale */
};

enum { FO_IDLE = 0, FO_ROUND1, FO_ROUND2 }; /* struct failover's state */

struct failover {
	uint32_t epoch;  /* decisions taken (0: the connect-time set) */
	uint64_t known;  /* aggregators known to have failed, here or by notice */
	uint64_t dead;   /* failed and decided */
	int state;       /* FO_IDLE, FO_ROUND1, FO_ROUND2 */
	uint32_t attempt;
	uint64_t t_first_ns; /* first sign of the fault being agreed */
	uint64_t deadline_ns; /* agreement and repairs must be done by then */
	int err;         /* a repair failed: the communicator is broken */
	/* notices: the known mask, the sender's epoch and the agreement it
	 * wants travel the ring (prev -> us -> next) */
	struct ring_xfer nrx, ntx[4];
	struct fabric_buf nmem;
	uint64_t *nbuf;  /* nmem: [0, 3) receive, [3 + 3i, 6 + 3i) send i */
	bool nrx_posted;
	uint64_t told;   /* largest mask sent to next */
	uint64_t want;   /* 1 + the agreement (fo_run) some node asked for; 0: none */
	uint64_t want_ns;/* since when it is asked for while a join of ours is under way */
	uint64_t told_want;
	uint64_t later;  /* failures notified from an epoch this node has not reached */
	uint32_t later_epoch;
	/* coming back (failover.c): aggregators being joined again here, not
	 * yet agreed; drained ones (out of use, not fenced), and those of them
	 * this node has still to leave */
	uint64_t back, gone, leaving;
	uint64_t closed; /* drained, and every node has left it: it may be joined again */
	struct fo_out outs[CLIENT_AGGS_MAX];
	struct fo_round1 r1;
	/* agreement: a min-allreduce over the ring (one per round) */
	struct coll_agreement agree;
	uint64_t fenced; /* the set this node reported in round 1 */
	/* history */
	struct fo_epoch *epochs;
	size_t nepochs;
	struct fo_dead deads[CLIENT_AGGS_MAX];
	SLIST_HEAD(fo_items, fo_item) items; /* repairs under way (failover_repair.c) */
	/* a registered chunk-sized sink for copies a node passes on but holds */
	struct fabric_buf sink;
	size_t sink_bytes;
	/* retention copies of the client, registered on the collnet endpoint */
	struct fabric_mr ret_mr;
	bool ret_reg;
	/* totals for the close summary */
	uint64_t faults, copied_bytes, redone_bytes, readmits, drains;
};

/* ---- the adaptive split (collnet_adapt.c; split.h has the controller) ---- */

#define ADAPT_WINS 4 /* windows being measured or agreed at once, at most */

/* One window of adaptive requests, by number within the window. */
struct coll_adapt_win {
	uint32_t done;
	struct split_rec rec[SPLIT_ADAPT_WINDOW];
};

struct coll_adapt {
	bool on;
	struct split_adapt sa;   /* the state after the last agreed window */
	/* window w's splits: plan0 for windows 0 and 1, plan[w % ADAPT_WINS]
	 * from 2 on (decided on window w - 2) */
	int32_t plan0[SPLIT_ADAPT_CLASSES];
	int32_t plan[ADAPT_WINS][SPLIT_ADAPT_CLASSES];
	uint64_t issued;         /* adaptive requests issued */
	uint64_t agreed;         /* windows 0 .. agreed - 1 agreed and decided */
	struct coll_adapt_win win[ADAPT_WINS];
	struct split_ends ends[SPLIT_ADAPT_CLASSES]; /* of the windows measured so far */
	/* the agreement on window `agreed`: this node's figures in, the agreed
	 * out (collnet_adapt.c's ADAPT_NV values) */
	struct coll_agreement ag;
	bool running;
	uint64_t changes;        /* splits changed (close summary) */
	int64_t jobs;            /* agreed: jobs the busiest aggregator serves (0: unknown) */
	int64_t load_pm;         /* agreed: the busiest aggregator's load */
};

/* ---- the communicator ---- */

struct coll_tree;

struct coll_comm {
	struct fabric *f;
	struct ring ring;
	struct client *client;
	uint32_t rank, nranks;
	uint64_t job_id;
	struct split_model model;
	uint32_t eager_bytes; /* rank 0's */
	bool deterministic;    /* rank 0's SUMCAST_DETERMINISTIC: join with WIRE_JOIN_F_DETERMINISTIC */
	bool failover;         /* rank 0's SUMCAST_FAILOVER: survive aggregator faults (failover.c) */
	bool adaptive;         /* rank 0's SUMCAST_SPLIT=auto, not deterministic: collnet_adapt.c */
	FILE *trace;           /* SUMCAST_TRACE: a JSON line per allreduce; NULL: off */
	uint64_t next_idx;     /* requests issued */
	bool failed;           /* a request failed: NCCL has an error (no close barrier) */
	struct coll_stats st;
	char aggs_buf[CLIENT_AGGS_MAX * AGGLIST_TEXT_MAX];
	const char *aggs[CLIENT_AGGS_MAX];
	size_t naggs;
	uint8_t key[256];
	size_t key_len;
	struct failover fo;
	struct coll_adapt adapt;
	struct coll_req reqs[COLL_REQS];
	struct coll_wstage wstage[COLL_REQS];
	/* a tree (collnet_tree.c): the inner communicators and the requests'
	 * stages on this, the tree's communicator; NULL: flat */
	struct coll_tree *tree;
	/* an inner communicator of a tree: the tree's communicator, whose
	 * other inner communicators its blocking waits serve (coll_serve) */
	struct coll_comm *parent;
	uint32_t ask_window, ask_chunk; /* coll_conf's window, chunk (0: the settings) */
	uint64_t refused_ns;  /* the first call handed no request since the last one was (0: none) */
	bool refused_logged;  /* that wait was logged (coll_refused) */
};

/* What a communicator is made of, whoever makes it: NCCL's connect from
 * the handles (collnet_connect.c), or a tree from the addresses its nodes
 * exchanged (collnet_tree.c). */
struct coll_conf {
	const struct coll_handle *h0; /* rank 0's settings */
	uint64_t job_id;
	uint32_t rank, nranks;
	const void *next, *prev;      /* the ring neighbours' addresses */
	size_t next_len, prev_len;
	struct coll_comm *parent;     /* a tree's inner communicator: its tree; no trace */
	uint32_t window, chunk;       /* asked of the aggregators; 0: SUMCAST_WINDOW / _CHUNK_BYTES */
};

/* ---- the engine's entry points (collnet_*.c), called by collnet_nccl.c ---- */
int collnet_listen(int dev, void *handle, void **listen_comm);
int collnet_connect(void *handles[], int nranks, int rank, void *listen_comm, void **coll_comm);
int collnet_reduce_support(ncclDataType_t t, ncclRedOp_t op, int *supported);
int collnet_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle);
int collnet_dereg_mr(void *coll_comm, void *mhandle);
int collnet_iallreduce(void *coll_comm, void *send, void *recv, size_t count, ncclDataType_t t,
		     ncclRedOp_t op, void *send_mh, void *recv_mh, void **request);
/* CollNet Direct's window collectives (docs/plugin.md, "ReduceScatter and
 * AllGather"): one part, the window [window_offset, + window_bytes) of the
 * global buffer of nranks x bytes_per_rank bytes. iallgather's send points
 * at this node's block where the window meets it (NCCL's pointer rule);
 * ireducescatter's recv likewise. NULL *request: retry. */
int collnet_iallgather(void *coll_comm, void *send, int nparts, const ncclNetSGE_t *parts,
		     size_t bytes_per_rank, size_t window_offset, size_t window_bytes, void *send_mh,
		     void **request);
int collnet_ireducescatter(void *coll_comm, int nparts, const ncclNetSGE_t *parts, void *recv,
			 size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
			 ncclDataType_t t, ncclRedOp_t op, void *recv_mh, void **request);
int collnet_test(void *request, int *done, int *size);
int collnet_close(void *coll_comm);
int collnet_close_listen(void *listen_comm);


/* ---- shared between the engine's files ---- */

/* collnet_connect.c: a communicator on endpoint f (owned from here on,
 * closed on failure too): the ring to c's neighbours, the join, the
 * agreement on the aggregator set, failover and the adaptive split; what
 * connect did with the handles. Blocking, bounded by
 * SUMCAST_CONNECT_TIMEOUT twice. */
int coll_comm_create(struct fabric *f, const struct coll_conf *c, struct coll_comm **out);
/* The settings of rank 0's handle every communicator of a job shares. */
void coll_conf_apply(struct coll_comm *cc, const struct coll_handle *h0);

/* collnet_tree.c: above SUMCAST_FAN_IN nodes, the two-level collnet
 * (docs/plugin.md, "A tree where fan-in ends"). connect's part from the
 * ring on: the tree's communicator cc has its ring; the rest is made
 * here. */
int coll_tree_connect(struct coll_comm *cc, const struct coll_handle *h0, uint64_t t0,
		      uint64_t deadline);
int coll_tree_iallreduce(struct coll_comm *cc, void *send, void *recv, size_t count,
			 ncclDataType_t t, ncclRedOp_t op, struct coll_mr *sm, struct coll_mr *rm,
			 void **request);
int coll_tree_test(struct coll_req *r, int *done, int *size);
int coll_tree_mr_reg(struct coll_comm *cc, void *data, size_t size, struct coll_mr *m);
void coll_tree_mr_dereg(struct coll_mr *m);
void coll_tree_close(struct coll_comm *cc);
/* A tree communicator's inner communicators (0 and NULL on another). */
uint32_t coll_tree_ninner(const struct coll_comm *cc);
struct coll_comm *coll_tree_inner(const struct coll_comm *cc, uint32_t i);
/* collnet_engine.c: the one loop, and the waits built on it.
 * coll_comm_poll: one turn of a communicator (the completion queues read
 * once, failover driven, every request in flight moved, the adaptive
 * split driven): 0 or the error that broke it. NCCL's test is a turn and
 * then its request's check (coll_req_test); a tree tests its stages'
 * requests so (collnet_tree.c).
 * coll_serve: while an inner communicator waits (close's barrier, the
 * adaptive split's last agreements), its siblings keep serving notices,
 * agreements and copies: a node waiting in one may be needed in another.
 * No-op on a communicator that is not inner.
 * coll_agree: a blocking (bounded by deadline) min-allreduce of n int64
 * over the ring, under the agreement tags of epoch 0xFFFF (before and
 * after failover's epochs) and `round`; serve: drive failover_progress
 * and the siblings meanwhile.
 * coll_adapt_fini: finishes the adaptive split's agreements every node
 * has started (close: a node that left early must not leave another's
 * agreement without its part), bounded by deadline; then frees. */
int coll_comm_poll(struct coll_comm *cc);
void coll_serve(struct coll_comm *cc);
enum { COLL_AGREE_CONNECT = 0, COLL_AGREE_CLOSE = 1, COLL_AGREE_TREE = 2 };
int coll_agree(struct coll_comm *cc, int64_t *vals, size_t n, uint32_t round, uint64_t deadline,
	       bool serve);
void coll_adapt_fini(struct coll_comm *cc, uint64_t deadline);

/* collnet_req.c: a request's check once the communicator turned (rc: the
 * turn's; collnet_test's answer); one turn of a request's ring part (0 or
 * the ring's error); an adaptive request's times into its window as soon
 * as its paths are done (coll_adapt_done). */
int coll_req_test(struct coll_req *r, int rc, int *done, int *size);
int coll_req_progress(struct coll_req *r);
void coll_req_adapt_note(struct coll_comm *cc, struct coll_req *r, uint64_t now);

/* collnet_agree.c: a struct coll_agreement's buffer (in zeroed), its start
 * under `tag`, and its end (the memory: an aborted op's receive may write
 * it until the endpoint closes, so callers that abort keep it until then,
 * freeing only the registration with fabric_buf_dereg(&ag->mem)).
 * Progress: ring_op_progress(&ag->op). coll_agree_begin / _end: the
 * blocking agreement's (coll_agree) start with vals in, and its end with
 * rc, the op's last progress (1: done, vals out; negative: aborted), freed;
 * 0 or rc. */
int coll_agreement_alloc(struct coll_comm *cc, struct coll_agreement *ag, size_t n);
void coll_agreement_start(struct coll_comm *cc, struct coll_agreement *ag, uint64_t tag);
void coll_agreement_free(struct coll_agreement *ag);
int coll_agree_begin(struct coll_comm *cc, const int64_t *vals, size_t n, uint32_t round,
		     struct coll_agreement **out);
int coll_agree_end(struct coll_agreement *ag, int rc, int64_t *vals);

/* collnet_join.c: SUMCAST_AGGREGATORS into cc->aggs; then every
 * aggregator joined: 0 when each is READY or failed and at least one is
 * READY (client_agg_alive tells which). */
void coll_aggs_parse(struct coll_comm *cc, const struct coll_handle *h0);
/* For listen (collnet_listen.c): SUMCAST_AGGREGATORS resolved into h's
 * aggs_* (this node's list; where it is rank 0, every node's), and whether
 * every aggregator is on this host. */
void coll_handle_aggs_fill(struct coll_handle *h, bool *shared_host);
int coll_join(struct coll_comm *cc, uint64_t deadline);

/* collnet_mr.c: [data, + size) registered on the collnet's endpoint and,
 * with aggregators, on the client's domain. */
int coll_mr_reg(struct coll_comm *cc, void *data, size_t size, struct coll_mr *m);
void coll_mr_dereg(struct coll_mr *m);

/* collnet_req.c: a free request slot (NULL: all in flight, NCCL retries),
 * and the fields every request starts with (the rest zero). */
struct coll_req *coll_req_slot(struct coll_comm *cc, uint32_t *slot);
void coll_req_init(struct coll_comm *cc, struct coll_req *r, enum coll_kind kind, size_t count,
		   enum sc_dtype d, enum sc_op o, const void *send, void *recv, struct coll_mr *sm,
		   struct coll_mr *rm);

/* collnet_window.c: a window slot's staging registrations go before the
 * domains close (collnet_close.c), the memory after the endpoints. */
void coll_wstage_dereg(struct coll_wstage *w);
void coll_wstage_free(struct coll_wstage *w);

/* collnet_trace.c: SUMCAST_TRACE's file, a line per request as it ends. */
const char *coll_kind_name(enum coll_kind k);
void coll_trace_open(struct coll_comm *cc);
void coll_trace_req(struct coll_comm *cc, const struct coll_req *r, uint64_t t_end, int rc);
void coll_trace_close(struct coll_comm *cc);

/* collnet_stall.c: request r has waited past SUMCAST_AGG_TIMEOUT: log once
 * what this node waits for. */
void coll_stall_dump(struct coll_comm *cc, struct coll_req *r);
/* A call that hands NCCL no request (NCCL retries it) for the reason why:
 * once the refusals have lasted SUMCAST_AGG_TIMEOUT, logged once with what
 * this node waits for (a wait that says nothing is the worst hang).
 * Returns 0. coll_accepted: a request was handed out, the count ends. */
int coll_refused(struct coll_comm *cc, const char *why);
/* A call hands NCCL no request (collnet_engine.c): the communicator polled
 * first (coll_comm_poll: every request moved, the agreements driven),
 * for NCCL's proxy tests nothing of a sub while it retries that sub's
 * refused call, so what the refusal waits for must move on those calls
 * alone; then coll_refused. 0, or the error that broke the communicator.
 * A call that takes its request polls no more than before. */
int coll_refuse(struct coll_comm *cc, const char *why);
void coll_accepted(struct coll_comm *cc);

/* failover.c */
/* After connect: epoch 0 over the aggregators every node joined. */
int failover_init(struct coll_comm *cc, uint64_t live);
/* At close: the agreement aborted, repairs and the notice receive
 * cancelled, their ends awaited (bounded), while the endpoint is open;
 * failover_fini frees the memory once the endpoint is closed. */
void failover_stop(struct coll_comm *cc);
void failover_fini(struct coll_comm *cc);
/* Drives notices, agreement and repairs; called from test and iallreduce.
 * 0, or the error that broke the communicator. */
int failover_progress(struct coll_comm *cc);
/* The same without reading the client's and the ring's completion queues,
 * for a caller that has just read them (test: each queue once a call). */
int failover_step(struct coll_comm *cc);
/* Whether new requests must wait (an agreement is under way). */
bool failover_busy(const struct coll_comm *cc);
/* The aggregator set and epoch for request idx. */
uint64_t failover_live_for(const struct coll_comm *cc, uint64_t idx, uint32_t *epoch);
/* A request just issued whose set holds failed aggregators: repair their
 * shards (all of their chunks are redone over the ring). */
int failover_req_started(struct coll_comm *cc, struct coll_req *r);
/* The failover's state and repairs under way, one line each, at `level`. */
void failover_dump(const struct coll_comm *cc, int level);
/* A request leaves (completed or failed): forget it in repairs. */
void failover_req_gone(struct coll_comm *cc, struct coll_req *r);
/* Recovering failed (err): every request of the communicator fails. */
void failover_fail(struct coll_comm *cc, int err, const char *what);

static inline uint64_t fo_ms_ns(int64_t ms)
{
	return (uint64_t)ms * 1000000ull;
}
/* The agreement run this node is at: every run ends in a new epoch
 * (attempt 0) or a new attempt, so runs only grow. */
static inline uint64_t fo_run(const struct failover *fo)
{
	return (uint64_t)fo->epoch << 32 | fo->attempt;
}
/* The set requests use now. */
static inline uint64_t fo_live(const struct failover *fo)
{
	return fo->epochs[fo->nepochs - 1].live;
}

/* failover_return.c: aggregators that come back, and drained ones. */
/* o's next try after it failed: SUMCAST_READMIT later, doubled each time it
 * failed again soon after coming back (flapped), capped at SUMCAST_READMIT_MAX. */
void fo_out_hold(struct fo_out *o, uint64_t now, bool flapped);
bool failover_return_wanted(struct coll_comm *cc);
void failover_return_settle(struct coll_comm *cc, uint64_t set, uint64_t back, uint64_t now);
void failover_return_apply(struct coll_comm *cc, uint64_t back, uint64_t drain, uint64_t from, uint64_t now);
void failover_return_progress(struct coll_comm *cc);

/* failover_repair.c: the repairs failover_plan.c decides, carried out. */
/* This node's part of the repair of `set` (cc->fo.deads agreed): 0 or the
 * error that stopped it; the counts the fault's WARN line gives. */
int failover_repair_plan(struct coll_comm *cc, uint64_t set, struct fo_counts *n);
/* Request r, just issued, redoes its part on the aggregators already dead. */
int failover_repair_req(struct coll_comm *cc, struct coll_req *r, struct fo_counts *n);
/* Drives every repair; a failed one fails the failover (failover_fail). */
void failover_repair_progress(struct coll_comm *cc);
/* Close: cancels the repairs' receives and ring ops, then tells whether
 * copies still have transfers posted, then frees them. */
void failover_repair_cancel(struct coll_comm *cc);
bool failover_repair_posted(const struct coll_comm *cc);
void failover_repair_free(struct coll_comm *cc);
/* Repairs no longer hold r (it left). */
void failover_repair_forget(struct coll_comm *cc, const struct coll_req *r);
/* One line per repair under way, at `level`. */
void failover_repair_dump(const struct coll_comm *cc, int level);

/* collnet_adapt.c */
/* With SUMCAST_SPLIT=auto, aggregators and at least two nodes: start
 * adapting from the model's splits (cc->model holds the live set). */
int coll_adapt_init(struct coll_comm *cc);
/* Publishes the communicator's figures to the tuner (tuner.h): `aggs`
 * aggregators joined by every node (-1: as many as SUMCAST_AGGREGATORS
 * lists, for the tree, whose inner communicators join them), its link
 * speeds and hop, and each size class's split where the adaptive split has
 * measured it (a fixed SUMCAST_SPLIT: that, for every class). aggs > 0
 * counts the failover's live set instead where it has one. At connect,
 * after every adaptive decision and every failover epoch, by top-level
 * communicators only. */
void coll_adapt_publish(const struct coll_comm *cc, int64_t aggs);
/* Whether this node owes agreements every node has started (the windows
 * it completed; collnet_engine.c's coll_adapt_fini turns until not), and
 * the end: an agreement still running aborted, the registration dropped,
 * the summary logged. */
bool coll_adapt_owed(const struct coll_comm *cc);
void coll_adapt_release(struct coll_comm *cc);
/* The split of an allreduce of `bytes` about to be issued: 1 and *ppm (an
 * adaptive request), 0 (not adaptive: the model decides), -EAGAIN (its
 * window's decision is not agreed yet: NCCL retries). */
int coll_adapt_split(struct coll_comm *cc, size_t bytes, int32_t *ppm);
/* The adaptive request r was issued at r->adapt_ppm. */
void coll_adapt_issued(struct coll_comm *cc, struct coll_req *r);
/* An adaptive request completed at t_end. */
void coll_adapt_done(struct coll_comm *cc, const struct coll_req *r, uint64_t t_end);
/* Drives the agreements (no completion queue read). 0 or the error. */
int coll_adapt_step(struct coll_comm *cc);

#endif
