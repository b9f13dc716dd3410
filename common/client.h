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
 * with an error (never with wrong data) and client_error() says why. */
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
};

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
 * client_allreduce wants (NULL is fine for providers without FI_MR_LOCAL). */
int client_mr_reg(struct client *c, void *buf, size_t len, struct fabric_mr *out);

/* Starts one allreduce. count elements of type t; send and recv may be the
 * same buffer. -EAGAIN: no free request (progress and retry); -EINVAL: type
 * not in the job's dtype_mask or bad op; -EPIPE: an aggregator is dead. */
int client_allreduce(struct client *c, const void *send, void *recv, size_t count,
		     enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
		     struct client_req **out);

/* Polls the CQ and the control sockets, posts queued chunks. Returns 0 or a
 * negative errno if an aggregator died (also reported through requests). */
int client_progress(struct client *c);

/* Progresses, then *done = 1 if r finished (r is then freed). Returns 0, or
 * a negative errno if r failed (r is freed too; recv contents undefined). */
int client_test(struct client *c, struct client_req *r, int *done);

const char *client_error(const struct client *c);
size_t client_naggs(const struct client *c);
bool client_agg_alive(const struct client *c, size_t agg);

/* Sends LEAVE to every aggregator, cancels what is posted, frees all. */
void client_destroy(struct client *c);

/* Per-aggregator shard of [0, count): contiguous, each boundary a multiple
 * of 64 bytes' worth of elements, the last shard takes the remainder.
 * Exposed so tests and the plugin agree on who owns what. */
void client_shard(size_t count, size_t elem_size, size_t naggs, size_t agg, size_t *first,
		  size_t *n);

/* Additions (client library v1.1) ------------------------------------- */

/* The endpoint the client uses (its own, or the one given in params). */
struct fabric *client_fabric(const struct client *c);

/* What aggregator agg granted at JOIN_OK. -ENOTCONN until it is READY. */
int client_agg_info(const struct client *c, size_t agg, uint32_t *job_handle, uint32_t *window,
		    uint32_t *chunk_bytes);

/* Shared endpoints (params.fabric set): client_progress() polls the CQ and
 * hands completions that are not the client's to fn (without fn they are
 * dropped with a warning). An owner that polls the CQ itself passes every
 * completion to client_handle_cqe(), which returns 1 if it was the
 * client's (consumed) and 0 if not. */
typedef void (*client_foreign_cqe_fn)(void *arg, const struct fabric_cqe *e);
void client_set_foreign_cqe(struct client *c, client_foreign_cqe_fn fn, void *arg);
int client_handle_cqe(struct client *c, const struct fabric_cqe *e);

/* Additions (client library v1.2) ------------------------------------- */

/* The eager limit to use for a provider name as fabric_provider() spells it
 * ("tcp;ofi_rxm", "shm", ...): 16 KiB for the ofi_rxm providers (rxm's
 * FI_OFI_RXM_EAGER_LIMIT default; the environment variable overrides it if
 * set), 0 (no eager cut) for the others. */
uint32_t client_eager_default(const char *provider);

/* Chunk size in bytes that client_allreduce() uses for a shard of
 * shard_bytes of elements of elem_size on an aggregator that granted
 * chunk_bytes and window, with the given eager limit. Exposed so tests and
 * the docs agree with the code. */
size_t client_chunk_for(size_t shard_bytes, size_t elem_size, uint32_t chunk_bytes,
			uint32_t window, uint32_t eager_bytes);

#endif
