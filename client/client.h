/* Client library: what a rank (the plugin, tests, benches) uses to allreduce
 * through sumcastd aggregators. No threads, no blocking calls: every
 * function returns at once and client_progress()/client_test() drive the
 * state machines, the way NCCL's proxy thread drives a plugin.
 *
 * A client belongs to one rank of one job. It opens its own fabric endpoint
 * (or uses one given to it), joins the job on each aggregator over TCP
 * (HELLO -> JOIN (HMAC-signed) -> JOIN_OK -> READY), then each
 * client_allreduce() shards [0, count) over the aggregators (contiguous,
 * aligned ranges), cuts each shard into chunks of chunk_bytes, and sends
 * them with at most `window` chunks in flight per aggregator; results land
 * directly in the caller's receive buffer (no copy).
 *
 * Calls must be issued in the same order on every rank of the job (NCCL
 * guarantees this per communicator); each call's chunks take the next
 * sequence numbers on each aggregator.
 *
 * Errors: an aggregator that refuses, closes, sends ABORT or stops
 * answering for timeout_ms is marked dead; its pending requests complete
 * with an error (never with wrong data) and client_error() says why.
 *
 * Failover (params.failover, the plugin's mode): an aggregator fault is not
 * an error. The aggregator is fenced at once (its control connection and its
 * own endpoint closed: nothing it sends can land in memory afterwards), it
 * shows in client_failed(), and requests keep their chunks on it pending
 * until the caller repairs them (client_chunk_done) from results other
 * ranks hold or by recomputing them: see "Failover" below. Every
 * aggregator has its own endpoint on one domain, so memory registered with
 * client_mr_reg serves all of them. */
#ifndef SUMCAST_CLIENT_H
#define SUMCAST_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "reduce.h"

#define CLIENT_AGGS_MAX 64

struct client_params {
	const char *provider; /* libfabric provider, must match the daemons' */
	const char *node;     /* local address to bind the endpoint to, NULL: any */
	struct fabric *fabric; /* optional: an endpoint to share; NULL opens one */
	uint64_t job_id;
	uint32_t rank, nranks;
	uint32_t chunk_bytes; /* 0: 256 KiB */
	uint32_t window;      /* chunks in flight per aggregator, 0: 8 */
	uint32_t dtype_mask;  /* bit per enum sc_dtype; 0: all */
	uint32_t timeout_ms;  /* join + silence limit, 0: 30000 */
	const uint8_t *key;   /* shared key for HMAC, NULL: none */
	size_t key_len;
	size_t naggs;
	const char *const *aggs; /* "host:port" control endpoints */
	uint32_t max_requests;   /* outstanding client_allreduce calls, 0: 64 */
	/* v1.2: the provider's eager limit (largest message it sends without a
	 * rendezvous / SAR exchange), 0: no eager cut. A request whose shard on
	 * an aggregator fits in window x eager_bytes is cut into chunks of at
	 * most eager_bytes there (one round trip each instead of several);
	 * larger shards use the granted chunk. Every rank of a job must pass
	 * the same value (chunk boundaries decide which bytes a seq carries).
	 * client_eager_default() gives a provider's figure. */
	uint32_t eager_bytes;
	/* v1.3: WIRE_JOIN_F_* flags for the join, 0: none. WIRE_JOIN_F_DETERMINISTIC:
	 * the aggregators reduce each chunk in rank order once every rank's copy is
	 * in (bitwise the same result run after run; costs holding the copies).
	 * Every rank of a job must pass the same flags (the daemon refuses a
	 * mismatch). */
	uint32_t join_flags;
	/* v1.4: aggregator faults are reported (client_failed), not errors. */
	bool failover;
	/* v1.4, failover: PING every aggregator every deadline_ms / 8 and
	 * declare it failed when nothing (PONG or any message) came back for
	 * deadline_ms; 0: no PING (faults are then seen by a closed connection,
	 * an ABORT, a completion error or timeout_ms + 2 s of silence). */
	uint32_t deadline_ms;
	/* v1.7: results by multicast, where an aggregator offers them
	 * (fabric.multicast; docs/daemon.md, "Multicast results"): 0 joins the
	 * job's group; CLIENT_MC_OFF asks for a unicast job (JOIN flag
	 * WIRE_JOIN_F_UNICAST: every rank must pass the same);
	 * CLIENT_MC_NOJOIN (tests) takes the offer but does not join, as a
	 * rank that cannot: it asks for every result by unicast (NACK), the
	 * others still use the group. mc_nack_us: how long a result may stay incomplete
	 * while the group is quiet before this rank asks for it by unicast;
	 * 0: 2000. mc_drop_permille: a test hook that drops this share of the
	 * datagrams read, as a lossy network would; 0 in use. */
	int multicast;
	uint32_t mc_nack_us;
	uint32_t mc_drop_permille;
	/* v1.9: the job's weight (SUMCAST_WEIGHT), 0: 1. An aggregator of
	 * protocol 4 grants window x min(weight, its [job] max-weight) slots:
	 * the job's share of it against other jobs' (docs/daemon.md,
	 * "Weights"). window stays the window per unit of weight; the client
	 * sizes its buffers for window x weight. Every rank of a job must pass
	 * the same. */
	uint32_t weight;
	/* The job's label (SUMCAST_JOB_LABEL: the scheduler's name for the
	 * job), sent in JOIN to aggregators of protocol 6, which show it in
	 * /stats; NULL or "": none. At most WIRE_LABEL_MAX printable bytes
	 * (wire_label_check). */
	const char *label;
	/* v1.12, failover: a request whose results are all in is reported
	 * done up to retain_hold_ms later, while results of this rank's later
	 * requests already issued will show every rank holds its chunks, so
	 * that they need no retention copy (client_retain_hold, "Failover"
	 * below); 0: reported at once, its last `window` chunks per
	 * aggregator copied. */
	uint32_t retain_hold_ms;
};
#define CLIENT_MC_OFF (-1)
#define CLIENT_MC_NOJOIN (-2)

struct client;
struct client_req;

/* Validates params, opens/records the endpoint, starts non-blocking TCP
 * connects to every aggregator. */
int client_create(const struct client_params *p, struct client **out);

/* Drives the joins. 0: every aggregator is READY; -EAGAIN: in progress;
 * other negative errno: an aggregator refused, is unreachable or timed out
 * (client_error() has the sentence, e.g. "127.0.0.1:7000 refused join:
 * nranks: job 0x2a has 4 ranks, request says 8"). */
int client_connect_poll(struct client *c);

/* Registers a buffer with the client's endpoint; *desc is what
 * client_allreduce wants. Where the provider asks for FI_MR_LOCAL (verbs,
 * efa, the fabric's strict mode: common/fabric_strict.h) a request's send
 * and receive buffers must be registered and both descriptors given, or
 * client_allreduce refuses it (-EINVAL); elsewhere NULL is fine. */
int client_mr_reg(struct client *c, void *buf, size_t len, struct fabric_mr *out);

/* Starts one allreduce. count elements of type t; send and recv may be the
 * same buffer. -EAGAIN: no free request (progress and retry); -EINVAL: type
 * not in the job's dtype_mask, bad op, or a descriptor missing under
 * FI_MR_LOCAL; -EPIPE: an aggregator is dead (without failover). */
int client_allreduce(struct client *c, const void *send, void *recv, size_t count,
		     enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
		     struct client_req **out);
/* The same over the aggregators in the bit mask `aggs` (0: all): [0, count)
 * is sharded over them in index order (client_shard over their number).
 * With failover, a failed aggregator in the mask gets its shard's chunks
 * numbered but not sent; they stay pending for the caller to repair. */
int client_allreduce_on(struct client *c, const void *send, void *recv, size_t count,
			enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
			uint64_t aggs, struct client_req **out);

/* Polls the CQ and the control sockets, posts queued chunks. Returns 0 or a
 * negative errno if an aggregator died (also reported through requests). */
int client_progress(struct client *c);

/* Progresses, then *done = 1 if r finished (r is then freed). Returns 0, or
 * a negative errno if r failed (r is freed too; recv contents undefined). */
int client_test(struct client *c, struct client_req *r, int *done);
/* v1.5: client_test without the progress, for a caller that has just
 * called client_progress. */
int client_req_check(struct client *c, struct client_req *r, int *done);

const char *client_error(const struct client *c);
size_t client_naggs(const struct client *c);
bool client_agg_alive(const struct client *c, size_t agg);
/* The aggregator's load from its last PONG (wire version 3): the busiest
 * data thread's busy share per mille and the jobs it serves. 0, or
 * -ENODATA (no such PONG yet, a version 2 daemon, or not alive). */
int client_agg_load(const struct client *c, size_t agg, unsigned *load_pm, unsigned *jobs);

/* Sends LEAVE to every aggregator, cancels what is posted (waiting a
 * second at most for the cancels), closes every aggregator's endpoint:
 * nothing posted there touches memory afterwards, so the caller may
 * deregister its requests' memory next, in RDMA's order (endpoints,
 * registrations, domain). The client then takes nothing but
 * client_destroy. */
void client_quiesce(struct client *c);
/* client_quiesce if not done, then frees all (the domain last). */
void client_destroy(struct client *c);

/* Per-aggregator shard of [0, count): contiguous, each boundary a multiple
 * of 64 bytes' worth of elements, the last shard takes the remainder.
 * Exposed so tests and the plugin agree on who owns what. */
void client_shard(size_t count, size_t elem_size, size_t naggs, size_t agg, size_t *first,
		  size_t *n);

/* Additions (client library v1.1) ------------------------------------- */

/* The root endpoint whose domain the client's endpoints share (its own, or
 * the one given in params: the client never polls or posts on that one). */
struct fabric *client_fabric(const struct client *c);

/* What aggregator agg granted at JOIN_OK. -ENOTCONN until it is READY. */
int client_agg_info(const struct client *c, size_t agg, uint32_t *job_handle, uint32_t *window,
		    uint32_t *chunk_bytes);

/* v1.7: multicast results on aggregator agg. -EINVAL for a bad index. */
struct client_mc_info {
	bool offered;   /* the aggregator multicasts this job's results */
	bool in_group;  /* this rank joined the group (else: unicast by NACK) */
	uint64_t by_group;   /* results taken from the group's datagrams */
	uint64_t by_unicast; /* results that came by unicast (NACKed, or sent so) */
	uint64_t nacks;      /* NACKs sent */
	uint64_t datagrams;  /* datagrams taken into a result */
	uint64_t dropped;    /* datagrams dropped by the test hook */
	uint64_t foreign, stale, dups, malformed; /* datagrams dropped (mcast.h) */
	char why[200];       /* offered but not in the group: why */
};
int client_mc_info(const struct client *c, size_t agg, struct client_mc_info *out);

/* Additions (client library v1.2) ------------------------------------- */

/* The eager limit to use for a provider name as fabric_provider() spells it
 * ("tcp;ofi_rxm", "shm", ...): for the ofi_rxm providers the one their rxm
 * comes to in this process (fabric_rxm_eager_in_force: 16 KiB unless
 * FI_OFI_RXM_EAGER_LIMIT says otherwise, fabric_env.h), at most 64 MiB;
 * 0 (no eager cut) for the others. */
uint32_t client_eager_default(const char *provider);

/* Chunk size in bytes that client_allreduce() uses for a shard of
 * shard_bytes of elements of elem_size on an aggregator that granted
 * chunk_bytes and window, with the given eager limit. Exposed so tests and
 * the docs agree with the code. */
size_t client_chunk_for(size_t shard_bytes, size_t elem_size, uint32_t chunk_bytes,
			uint32_t window, uint32_t eager_bytes);

/* Failover (client library v1.4, params.failover) ---------------------
 *
 * Chunks. On each aggregator, chunks are numbered 0, 1, 2, ... in the order
 * requests are started, the same numbers on every rank (requests start in
 * the same order, shards and chunk cuts are the same). Credit flow (chunk c
 * is sent only once the result of c - window is in) bounds how far ranks
 * drift apart: if any rank has the result of c, every rank has the results
 * of every chunk up to c - window. So a rank keeps copies of its most recent
 * `window` results per aggregator (retention) after their request
 * completed, and a result some rank lacks is always still held by every
 * rank that has it.
 *
 * Holding a report back (params.retain_hold_ms). A request's chunk c on an
 * aggregator needs no copy once this rank holds the result of c + window
 * (then every rank holds c). When this rank has already issued at least
 * 2 x window later chunks there, those results are on their way, and a
 * full window of work still queued behind them keeps the aggregator busy:
 * the request is then reported only when they are in (no copy), or after
 * retain_hold_ms (then copied as before). Not while an aggregator of the
 * request failed. Until it is reported the request counts as in flight,
 * its buffers its caller's. */

/* Retention copies made so far: results copied, and their bytes. */
void client_retained(const struct client *c, uint64_t *chunks, uint64_t *bytes);
/* When every result of r was first seen in (client_req_check), 0 before:
 * the time a request held back by retain_hold_ms was complete. */
uint64_t client_req_complete_ns(const struct client_req *r);
/* v1.13: whether every result of r is in (and none failed), whatever the caller
 * has been told yet: client_req_check's "done" before a hold and before
 * r is freed. The first call that finds it so notes now as the time it
 * was complete (client_req_complete_ns). r stays the caller's to check. */
bool client_req_all_in(struct client_req *r, uint64_t now);

/* Aggregators that failed, bit per index. */
uint64_t client_failed(const struct client *c);
/* Why aggregator agg failed (a sentence), "" if it did not. */
const char *client_agg_why(const struct client *c, size_t agg);
/* Fences agg now (another rank saw it fail): no-op if already failed. */
void client_agg_fence(struct client *c, size_t agg, const char *why);
/* v1.10: joins agg again after it failed: the same job id, rank and
 * parameters, on a fresh endpoint of its own, as at connect. Nothing of
 * its earlier membership survives: chunk numbers start at 0 again, the
 * retention of its results is dropped. -EBUSY while a request in flight
 * here was sharded over agg (its repair may still read what agg held),
 * -EINVAL unless agg failed; else 0, and the join runs in
 * client_progress: client_agg_joined() says when it is done, and a join
 * that fails or is not READY within timeout_ms fails agg again (it shows
 * in client_failed() as before). The caller decides with the other ranks
 * when requests use agg again (client_allreduce_on's mask). */
int client_agg_rejoin(struct client *c, size_t agg, uint32_t timeout_ms);
/* 1: agg is READY; 0: its join is under way; -1: it failed (or was never
 * rejoined and is dead). */
int client_agg_joined(const struct client *c, size_t agg);
/* The window agg granted (0 before JOIN_OK). */
uint32_t client_agg_window(const struct client *c, size_t agg);
/* v1.9: the weight agg granted (1 from an aggregator of protocol < 4; 0
 * before JOIN_OK). */
uint32_t client_agg_weight(const struct client *c, size_t agg);
/* Lowest chunk number on agg whose result has not arrived here; every
 * lower one has. Final once agg is fenced. */
uint64_t client_agg_lo(const struct client *c, size_t agg);
/* Whether this rank holds the result of chunk: it arrived here (from agg
 * or repaired), or this rank is the chunk's only source and its empty
 * result arrived (v1.6). */
bool client_chunk_held(const struct client *c, size_t agg, uint64_t chunk);
/* The held result of chunk: its request's receive buffer (a SOURCE's send
 * data) while the request is in flight here, else the retention copy. NULL
 * if not held here or no longer retained. */
const void *client_chunk_data(const struct client *c, size_t agg, uint64_t chunk, size_t *len);
/* The chunks of req on agg: numbers [*c0, *c0 + *n). */
void client_req_chunks(const struct client_req *r, size_t agg, uint64_t *c0, uint64_t *n);
/* Byte range of chunk (one of req's on agg) in req's buffers. */
void client_req_chunk_range(const struct client_req *r, size_t agg, uint64_t chunk, size_t *off,
			    size_t *len);
/* The request's buffers as given to client_allreduce_on. */
void client_req_bufs(const struct client_req *r, const void **send, void **recv);
/* agg's data path state (busy slots), logged at `level` (enum sc_log_level):
 * for a request that waits far too long. */
void client_agg_dump(const struct client *c, size_t agg, int level);
/* Chunks of req whose result has neither arrived nor been repaired. */
size_t client_req_left(const struct client_req *r);
/* The caller wrote chunk's result into req's receive buffer. */
void client_chunk_done(struct client *c, struct client_req *req, size_t agg, uint64_t chunk);
/* The retention copies (naggs x window x chunk bytes), to register with the
 * endpoint that sends them to other ranks. NULL without failover. */
void *client_retention(const struct client *c, size_t *len);

/* Collectives of blocks (client library v1.6) --------------------------
 *
 * ReduceScatter and AllGather on a global buffer of nranks blocks of
 * `block` bytes, block k belonging to rank k: a request covers bytes
 * [base, base + count x size) of it, sharded and cut into chunks as an
 * allreduce, and each chunk's role here follows from the blocks it touches:
 *   reduce-scatter: ALL if it touches this rank's block (the result comes
 *     here), else GIVE (the contribution goes, an empty result comes back);
 *   allgather: inside one block, SOURCE for its owner (the send data is the
 *     result: it goes, nothing comes back) and TAKE for the others (an empty
 *     message goes, the result comes); across blocks ALL for their owners
 *     (each sends its part, zero elsewhere, summed as u8) and TAKE for the
 *     others.
 * So a reduce-scatter result leaves the aggregator to its owner(s) only and
 * an allgather chunk enters it from its source only. Chunks whose role
 * brings no result leave the receive buffer alone. */
enum client_kind { CLIENT_ALLREDUCE = 0, CLIENT_REDUCE_SCATTER, CLIENT_ALLGATHER };
enum client_role { CLIENT_ROLE_ALL = 0, CLIENT_ROLE_GIVE, CLIENT_ROLE_SOURCE, CLIENT_ROLE_TAKE };

struct client_blocks {
	enum client_kind kind;
	uint64_t base;  /* global byte offset of the request's first byte */
	uint64_t block; /* bytes per block (> 0) */
};

/* client_allreduce_on for a collective of blocks (b NULL: an allreduce). */
int client_start(struct client *c, const struct client_blocks *b, const void *send, void *recv,
		 size_t count, enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
		 uint64_t aggs, struct client_req **out);

/* Bytes r sends to the aggregators from here and gets back (the chunks
 * whose role brings a result; a sealed job sends every result whole). */
void client_req_bytes(const struct client_req *r, size_t *give, size_t *take);

/* What this rank knows of one chunk of agg (failover: for repairs). */
struct client_chunk {
	enum client_role role;
	bool got;              /* its result (or empty result) arrived here */
	const void *give;      /* this rank's contribution: send data or its retention copy;
				* NULL: role TAKE, or neither in flight nor retained here */
	struct client_req *req; /* in flight here; NULL: completed or not issued yet */
	size_t off, len;       /* the chunk's bytes in req's buffers (len also when retained) */
	enum sc_dtype t;
	enum sc_op op;
};
/* 0, or -ENOENT when this rank has nothing of the chunk (not issued yet, or
 * too old to be retained): out->role is then ALL and out->got whether it
 * is below client_agg_lo. */
int client_chunk_info(const struct client *c, size_t agg, uint64_t chunk, struct client_chunk *out);
/* Whether this rank wants the chunk's result and lacks it (ALL and TAKE
 * chunks whose result has not arrived, and chunks not issued here yet). */
bool client_chunk_lacks(const struct client *c, size_t agg, uint64_t chunk);

/* Drain (client library v1.10, wire version 5) -------------------------
 *
 * A daemon that is stopped (SIGTERM, systemctl stop, sumcastctl drain)
 * sends DRAIN to the ranks of its jobs: it goes away, and serves the job
 * for a while more (its [control] drain-timeout) so that the job can move
 * off without a fault. The caller stops giving it new requests (at a
 * request every rank agrees on), lets the ones that use it complete, and
 * retires it; the daemon counts the job drained once every rank left.
 * Nothing is repaired and nothing is an error. PINGs go on until then. */

/* Aggregators that sent DRAIN and are neither dead nor retired, bit per
 * index. */
uint64_t client_draining(const struct client *c);
/* Leaves agg cleanly: LEAVE (written for sure, bounded: 0.5 s), its control
 * connection and its endpoint closed as a fence closes them, state "left".
 * 0 (also when it was left already); -EBUSY while a chunk of any request
 * is queued or in flight on it (retire it once the requests that use it
 * are complete); -ENOTCONN when it is not READY (dead, or still joining);
 * -EINVAL for a bad index; another -errno when it failed on the way out
 * (the connection lost, or the LEAVE not written within 0.5 s: then it is
 * dead and in client_failed(), as any fault). A retired
 * aggregator is not in client_failed(), client_agg_alive() is false for it,
 * and requests may no longer use it: client_start over a mask that holds
 * it is -EINVAL, and the mask 0 means every aggregator not retired. */
int client_agg_retire(struct client *c, size_t agg);

#endif
