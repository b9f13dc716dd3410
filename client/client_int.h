/* Client library internals, shared by its files, in layers; a file calls
 * only into its own layer's files below it and into lower layers:
 *
 *   requests      client.c        lifecycle: create/destroy, the progress
 *                                 loop, test, accessors
 *                 client_req.c    starting a request: shards, chunk
 *                                 numbers, the aggregators' queues
 *   membership    client_member.c an aggregator's failure (settled here,
 *                                 whoever found it), fence, rejoin,
 *                                 retire, the stall watch
 *                 client_ctl.c    the control protocol per aggregator over
 *                                 TCP (connect, HELLO, JOIN, READY,
 *                                 PING/PONG, ABORT, LEAVE)
 *   slots         client_slot.c   issue, completions, results, fence
 *                 client_retain.c what failover needs: retention, which
 *                                 chunks are held
 *   multicast     client_mcast.c  results by multicast: the group,
 *                                 datagrams, NACKs (a transport for slots)
 *   geometry      client_shard.c  which bytes a chunk carries and the
 *                                 role this rank plays in it (pure)
 *
 * A layer below membership that finds an aggregator failed records it
 * (client_agg_down: the aggregator is dead from then on, its sentence
 * kept) and returns; the membership layer settles the consequences
 * (client_agg_settle: fence, or fail every request) before the loop goes
 * on. Nothing here is part of the library's interface (client.h). */
#ifndef SUMCAST_CLIENT_INT_H
#define SUMCAST_CLIENT_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "defer.h"
#include "hostport.h"
#include "mcast_link.h"
#include "seal.h"
#include "wire.h"

#define CLIENT_CHUNK_DEFAULT (256u * 1024)
#define CLIENT_WINDOW_DEFAULT 8u
#define CLIENT_TIMEOUT_DEFAULT 30000u
#define CLIENT_REQS_DEFAULT 64u
#define CLIENT_CQ_BATCH 32
#define CLIENT_CTL_INTERVAL_NS 1000000ull /* control sockets: at most every 1 ms */
#define CLIENT_PING_FLOWING 4u             /* PINGs this many times rarer while results flow */
/* A result-less aggregator is declared dead this long after the job timeout it
 * granted: when a rank is the one stuck, the aggregator's ABORT (which names
 * the rank) arrives first and is what the user sees. */
#define CLIENT_SILENCE_GRACE_MS 2000u
#define CLIENT_DRAIN_MS 2000u             /* bounded wait for cancelled receives */
#define CLIENT_NAME_MAX HOSTPORT_TEXT_MAX
#define CLIENT_ERR_MAX 512
#define CLIENT_NO_CHUNK UINT64_MAX

enum agg_state {
	AGG_CONNECTING, /* TCP connect in progress */
	AGG_HELLO,      /* connected, waiting for HELLO */
	AGG_JOINING,    /* JOIN sent, waiting for JOIN_OK */
	AGG_WAIT_READY, /* JOIN_OK received, waiting for READY */
	AGG_READY,
	AGG_DEAD,       /* failed (with failover: fenced, see client_agg_fence) */
	AGG_LEFT,       /* retired after a DRAIN (client_agg_retire): left cleanly */
};

extern const char *const client_agg_state_what[];

/* Context of one posted operation; lives in c->ops. */
struct client_op {
	struct fabric_op fop; /* first */
	uint32_t agg;
	uint32_t slot;
	uint32_t is_recv;
};

struct client_slot {
	int32_t req;     /* request index, -1: free */
	uint32_t seq;
	uint32_t imm;    /* immediate data sent (dtype, op, seq) */
	uint64_t chunk;  /* chunk number it carries or carried last (kept after release) */
	size_t off, len; /* bytes, relative to the request's buffers */
	uint8_t recv_posted;  /* result receive outstanding */
	uint8_t send_posted;  /* send outstanding */
	uint8_t send_pending; /* receive posted, send not yet accepted (-FI_EAGAIN) */
	uint8_t got;          /* the result of `chunk` arrived */
	uint8_t bounced;      /* the result lands in the slot's bounce buffer */
	uint8_t role;         /* enum client_role of `chunk` (kept after release) */
	/* multicast (client_mcast.c): the result is expected from the group;
	 * it came from there (the unicast receive is being cancelled); a NACK
	 * is due (not yet accepted by the provider) / was sent (a unicast
	 * result is coming into the receive) */
	uint8_t mc_exp, mc_done, nack_due, nacked;
	uint8_t mc_got;       /* the group's datagrams completed it: the slot layer takes it in */
	uint64_t mc_t0;       /* when the result was expected */
	uint64_t mc_ev;       /* when evidence of a loss was first seen, 0: none */
	/* its send refused -FI_EAGAIN: on the aggregator's queue (in order) */
	struct defer send_defer;
	struct client *c;
	uint32_t ai, si;
};

struct client_agg {
	char name[CLIENT_NAME_MAX]; /* "host:port" as given */
	struct sockaddr_storage sa;
	socklen_t salen;
	int fd;
	enum agg_state st;
	uint8_t rbuf[WIRE_MSG_MAX];
	size_t rlen;
	uint8_t wbuf[4 * WIRE_MSG_MAX];
	size_t wlen, woff;
	uint32_t job_handle, window, chunk_bytes, timeout_ms;
	struct fabric *ep;         /* this aggregator's own endpoint on c->fab's domain */
	/* the job's data endpoints there (JOIN_OK): one per lane, slot si's
	 * chunks, NACKs and results go through lane si % lanes (wire.h, 7) */
	uint32_t lanes;
	fi_addr_t lane_addr[WIRE_LANES_MAX];
	/* results of at most this many payload bytes come from lane
	 * (si + rank) % lanes (wire_result_lane, version 8); 0: from si's */
	uint32_t spread;
	bool av_inserted;
	struct client_slot *slots; /* c->window entries; the first `window` are used */
	uint64_t next_c;           /* next chunk number to issue */
	uint64_t next_assign;      /* next chunk number to give a request (>= next_c) */
	uint64_t hi;               /* 1 + the highest chunk number whose result arrived */
	uint32_t inflight;         /* busy slots */
	/* sends refused -FI_EAGAIN (defer.h, in order: a later chunk never
	 * overtakes an earlier one) */
	struct defer_queue deferred;
	STAILQ_HEAD(, req_agg) queue; /* requests with chunks not yet issued here (FIFO) */
	uint64_t last_ns;          /* last completion, or first post after idle */
	uint64_t heard_ns;         /* last word from it: control message (PONG included), result */
	uint64_t result_ns;        /* last result received from it */
	uint64_t ping_ns;          /* last PING sent */
	uint64_t ping_wait_ns;     /* oldest PING not answered yet (nothing heard since), 0: none */
	uint64_t ping_token;
	uint16_t ver;              /* wire version spoken: the newest both speak (HELLO) */
	uint16_t weight;           /* granted at JOIN_OK (1 below version 4) */
	bool has_load;             /* a PONG of version 3 came: load_pm, jobs */
	uint16_t load_pm, jobs;
	bool draining;             /* it sent DRAIN (version 5): move off, then retire it */
	struct client_retained *ret; /* failover: what each of `window` retention slots holds */
	/* multicast results (WIRE_OK_F_MCAST): the group's socket and the
	 * assembly of results from its datagrams */
	bool mc;                   /* offered */
	bool mc_in;                /* in the group: mc_sock open, mc_rx set up */
	struct sc_mc_receiver mc_sock;
	struct sc_mc_rx mc_rx;
	uint32_t mc_nack_ranges;   /* ranges a NACK carries (fits an inject) */
	uint64_t mc_hi;            /* 1 + the highest chunk completed from the group */
	uint64_t mc_by_group, mc_by_unicast, mc_nacks;
	char mc_why[200];
	uint64_t rejoin_ns;        /* joining again (client_agg_rejoin): READY by then, 0: not */
	bool sealed;               /* the daemon seals this job's data (WIRE_OK_F_SEALED) */
	struct sc_seal seal;       /* keyed at JOIN_OK when sealed */
	int err;
	char why[CLIENT_ERR_MAX];  /* the failure, once dead */
	uint32_t down;             /* failed and not yet settled: its order among failures (1..) */
};

struct client_retained {
	uint64_t chunk; /* CLIENT_NO_CHUNK: nothing */
	size_t len;
	uint32_t imm;   /* the chunk's data word (type, op) */
	uint8_t role;   /* GIVE, SOURCE: what is kept is the contribution */
};

/* One request's shard on one aggregator. Chunk numbers c0 .. c0 + nchunks - 1
 * cover bytes [first, end) in chunks of `chunk` (the last one shorter). */
struct req_agg {
	size_t first, end; /* the shard, bytes */
	size_t off;        /* next byte to issue */
	size_t chunk;      /* chunk bytes for this request here (client_chunk_for) */
	uint64_t c0;       /* chunk number of the shard's first chunk */
	uint64_t nchunks;
	struct client_req *req;     /* whose shard this is */
	STAILQ_ENTRY(req_agg) link; /* in this aggregator's queue */
};

struct client_req {
	uint32_t idx;
	bool in_use;
	bool inplace; /* send and recv overlap */
	const uint8_t *send;
	uint8_t *recv;
	void *sdesc, *rdesc;
	enum sc_dtype t;
	enum sc_op op;
	size_t esize;
	struct client_blocks blocks; /* kind CLIENT_ALLREDUCE: every chunk ALL */
	size_t give_bytes, take_bytes; /* client_req_bytes */
	uint64_t aggs;      /* aggregators the request is sharded over */
	size_t chunks_left; /* chunks whose result has not arrived (or been repaired) */
	size_t inflight;    /* chunks holding a slot */
	int err;
	uint64_t fail_ns;
	uint64_t complete_ns; /* every result in, first seen (client_req_check); 0 before */
	struct req_agg *ra; /* naggs entries */
};

struct client {
	struct fabric *fab; /* root: the domain every aggregator endpoint shares */
	bool own_fabric;
	uint64_t job_id;
	uint32_t rank, nranks, chunk_bytes, window, dtype_mask, timeout_ms, eager_bytes, join_flags;
	uint32_t base_window, weight; /* params: window = base_window x weight */
	char label[WIRE_LABEL_MAX + 1]; /* params.label, "": none */
	uint32_t deadline_ms; /* failover: PING answer limit; 0: no PING */
	int multicast;        /* params.multicast */
	uint64_t mc_nack_ns;
	uint32_t mc_drop_permille;
	bool failover;
	uint32_t downs;       /* aggregator failures recorded (client_agg_down) */
	uint8_t key[256];
	size_t key_len;
	size_t naggs;
	struct client_agg *aggs;
	struct client_op *ops; /* naggs * window * 2 */
	size_t nops;
	struct client_slot *slot_mem;
	bool quiesced; /* client_quiesce: its endpoints are closed */
	uint32_t max_requests;
	struct client_req *reqs;
	struct req_agg *ra_mem;
	uint32_t *free_reqs;
	uint32_t nfree;
	uint64_t deadline_ns; /* connect deadline */
	uint64_t last_ctl_ns;
	bool all_ready;
	bool broken; /* without failover: an aggregator died, every request fails */
	uint64_t failed; /* failover: aggregators that failed (bit per index) */
	int err;
	char errmsg[CLIENT_ERR_MAX];
	/* failover only, allocated at create, touched lazily */
	uint8_t *retention;  /* naggs x window x chunk_bytes: recent results */
	uint32_t retain_hold_ms;             /* params.retain_hold_ms */
	uint64_t retained, retained_bytes;   /* copies made (client_retained) */
	uint8_t *bounce;     /* naggs x window x chunk_bytes: in-place results */
	size_t region_bytes; /* each of the two */
	struct fabric_mr bounce_mr;
	bool bounce_reg;
	/* with a key: per (aggregator, slot) a sealed send and a sealed result,
	 * c->chunk_bytes + SC_SEAL_TAG each */
	uint8_t *seal_mem;
	size_t seal_bytes;
	struct fabric_mr seal_mr;
	bool seal_reg;
};

/* The aggregator's data address for slot si (its lane's). */
static inline fi_addr_t client_agg_addr(const struct client_agg *a, uint32_t si)
{
	return a->lane_addr[a->lanes > 1 ? si % a->lanes : 0];
}

/* Where slot si's result of len payload bytes comes from (its lane's
 * address, or with the results spread the lane wire_result_lane names). */
static inline fi_addr_t client_result_addr(const struct client_agg *a, uint32_t si, uint32_t rank,
					   size_t len)
{
	return a->lane_addr[wire_result_lane(si, rank, a->lanes, a->spread, len)];
}

/* Bytes of one sealed message buffer (payload + tag). */
static inline size_t client_seal_unit(const struct client *c)
{
	return (size_t)c->chunk_bytes + SC_SEAL_TAG;
}

static inline uint8_t *client_seal_buf(const struct client *c, size_t ai, uint32_t si, int result)
{
	return c->seal_mem + (((size_t)ai * c->window + si) * 2 + (result ? 1 : 0)) * client_seal_unit(c);
}

static inline struct client_op *client_op_of(struct client *c, size_t ai, uint32_t si, int recv)
{
	return &c->ops[(ai * c->window + si) * 2 + (recv ? 1 : 0)];
}

static inline uint8_t *client_slot_buf(uint8_t *region, const struct client *c, size_t ai, uint32_t si)
{
	return region + ((size_t)ai * c->window + si) * c->chunk_bytes;
}

/* Bytes of the message a slot sends, and of the result it gets (without a
 * seal's tag): a TAKE sends nothing; a GIVE or SOURCE gets an empty result
 * (in a sealed job a tag alone, sealed for this rank: wire.h). */
static inline bool client_role_gives_only(unsigned role)
{
	return role == CLIENT_ROLE_GIVE || role == CLIENT_ROLE_SOURCE;
}

static inline size_t client_slot_send_len(const struct client_slot *s)
{
	return s->role == CLIENT_ROLE_TAKE ? 0 : s->len;
}

static inline size_t client_slot_result_len(const struct client_slot *s)
{
	return client_role_gives_only(s->role) ? 0 : s->len;
}

/* ---- requests: client_req.c ---- */
void client_req_free(struct client *c, struct client_req *r);

static inline void client_close_fd(struct client_agg *a)
{
	if (a->fd >= 0) {
		close(a->fd);
		a->fd = -1;
	}
}

/* An aggregator failed, found by any layer: it is dead from now on (its
 * control connection closed, err and the first sentence kept); what that
 * means for its slots and the requests is settled by the membership layer
 * (client_agg_settle) when the caller returns. */
static inline __attribute__((format(printf, 4, 5))) void
client_agg_down(struct client *c, struct client_agg *a, int err, const char *fmt, ...)
{
	va_list ap;

	if (a->st == AGG_DEAD)
		return;
	va_start(ap, fmt);
	vsnprintf(a->why, sizeof(a->why), fmt, ap);
	va_end(ap);
	a->st = AGG_DEAD;
	a->err = err;
	a->down = ++c->downs;
	client_close_fd(a);
}

/* ---- membership: client_member.c ---- */
/* Settles every failure recorded since (client_agg_down), in the order
 * they were found: without failover every request fails with the first
 * one's error, which becomes client_error(); with failover the aggregator
 * is fenced and recorded in client_failed(), requests go on. */
void client_agg_settle(struct client *c);
/* client_agg_down, then settled at once. */
void client_agg_fail(struct client *c, struct client_agg *a, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Every ms: joins again not READY in time, and aggregators with chunks in
 * flight that sent nothing for their timeout, fail (saying what waits). */
void client_agg_watch(struct client *c, uint64_t now);

/* ---- membership: client_ctl.c ---- */
void client_ctl_connect(struct client *c, struct client_agg *a);
/* One non-blocking pass over every control socket. */
void client_ctl_poll(struct client *c);
/* PINGs due, and the answer deadline (failover). */
void client_ctl_liveness(struct client *c, uint64_t now);
/* Best-effort LEAVE on a joined aggregator's socket. */
void client_ctl_leave(struct client *c, struct client_agg *a);
/* LEAVE on a READY aggregator's socket after what is queued there, written
 * for sure, and the daemon's close awaited, all by `until` (sc_now_ns).
 * 0 once the LEAVE is written (the close awaited or not), or -errno: not
 * written by `until` (-ETIMEDOUT), or the aggregator failed (a->st says). */
int client_ctl_leave_flush(struct client *c, struct client_agg *a, uint64_t until);
/* a->name and a->sa from "host:port" (hostport.h), the host resolved.
 * 0, -EINVAL (not host:port) or -EHOSTUNREACH, with a sentence in why. */
int client_parse_endpoint(const char *s, struct client_agg *a, char *why, size_t whylen);

/* ---- slots: client_slot.c ---- */
/* Issues queued chunks of aggregator ai while slots are free. */
void client_slot_issue(struct client *c, size_t ai);
/* Reaps aggregator ai's completions (and its multicast datagrams). */
int client_slot_poll(struct client *c, size_t ai);
/* Without failover: every request fails, posted receives are cancelled. */
void client_slot_fail_all(struct client *c);
/* Cuts a failed aggregator off (closes its endpoint), releases its slots. */
void client_slot_fence(struct client *c, size_t ai);

/* ---- slots: client_retain.c ---- */
/* Copies the request's recent results into the retention slots. */
void client_retain_req(struct client *c, struct client_req *r);
/* r's results are all in (now: the time): whether to report it later so
 * that fewer of them need a copy (client.h, "Holding a report back"). */
bool client_retain_hold(const struct client *c, const struct client_req *r, uint64_t now);

/* ---- multicast: client_mcast.c ---- */
/* JOIN_OK offered multicast: join the group (or say why not; an
 * aggregator whose NACK cannot be injected is down). */
void client_mc_join(struct client *c, size_t ai, const struct wire_join_ok *o);
/* Leaves the group: the socket closed (nothing lands afterwards). */
void client_mc_leave(struct client_agg *a);
/* A new chunk of r (bytes [off, off + len)) in slot s whose result lands
 * at dst: true when it comes from the group. */
bool client_mc_expect(struct client *c, struct client_agg *a, struct client_slot *s,
		      const struct client_req *r, size_t off, size_t len, uint8_t *dst);
/* Datagrams in: each slot whose result the group completed gets mc_got. */
void client_mc_recv(struct client *c, size_t ai);
/* Marks nack_due on each slot whose result from the group is overdue. */
void client_mc_due(struct client *c, size_t ai);
/* Sends slot si's NACK (its unicast receive posted first by the caller):
 * 0, -FI_EAGAIN (nack_due stays), or an error (the aggregator is down). */
int client_mc_nack(struct client *c, struct client_agg *a, uint32_t si);

/* ---- geometry: client_shard.c ---- */
/* The role here of r's bytes [off, off + len) (client.h, v1.6). */
enum client_role client_role_of(const struct client *c, const struct client_req *r, size_t off,
				size_t len);
/* Ranks that take the result of r's bytes [off, off + len) (modes all and
 * take): an aggregator multicasts a result two or more take. */
uint32_t client_chunk_takers(const struct client *c, const struct client_req *r, size_t off,
			     size_t len);

#endif
