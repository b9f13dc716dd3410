/* Client library: joins a job on every aggregator over TCP and drives
 * allreduces over the libfabric endpoint. See client.h for the contract and
 * docs/client.md for the design notes.
 *
 * Memory: everything is allocated in client_create (aggregator table, one
 * slot per (aggregator, window position), the request pool with one cursor
 * per (request, aggregator)). client_allreduce/progress/test never allocate.
 *
 * Per aggregator, chunks are numbered c = 0, 1, 2, ... in issue order across
 * calls; chunk c uses slot c % window and seq c mod 2^26. A slot is reused
 * only when both its result receive and its send have completed, which is
 * the protocol's credit rule (chunk c waits for the result of c - window). */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "wire.h"
#include "clock.h"

#define CLIENT_CHUNK_DEFAULT (256u * 1024)
#define CLIENT_WINDOW_DEFAULT 8u
#define CLIENT_TIMEOUT_DEFAULT 30000u
#define CLIENT_REQS_DEFAULT 64u
#ifndef CLIENT_EAGER_CHUNKS
#define CLIENT_EAGER_CHUNKS 4u /* eager cut for shards up to this many eager chunks */
#endif
#define CLIENT_CQ_BATCH 32
#define CLIENT_CTL_INTERVAL_NS 1000000ull /* control sockets: at most every 1 ms */
/* A result-less aggregator is declared dead this long after the job timeout it
 * granted: when a rank is the one stuck, the aggregator's ABORT (which names
 * the rank) arrives first and is what the user sees. */
#define CLIENT_SILENCE_GRACE_MS 2000u
#define CLIENT_DRAIN_MS 2000u             /* bounded wait for cancelled receives */
#define CLIENT_NAME_MAX 280
#define CLIENT_ERR_MAX 512

enum agg_state {
	AGG_CONNECTING, /* TCP connect in progress */
	AGG_HELLO,      /* connected, waiting for HELLO */
	AGG_JOINING,    /* JOIN sent, waiting for JOIN_OK */
	AGG_WAIT_READY, /* JOIN_OK received, waiting for READY */
	AGG_READY,
	AGG_DEAD,
};

static const char *const agg_state_what[] = {
	"connecting", "waiting for HELLO", "waiting for JOIN_OK", "waiting for READY",
	"ready", "dead",
};

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
	size_t off, len; /* bytes, relative to the request's buffers */
	uint8_t recv_posted;  /* result receive outstanding */
	uint8_t send_posted;  /* send outstanding */
	uint8_t send_pending; /* receive posted, send not yet accepted (-FI_EAGAIN) */
};

struct client_agg {
	char name[CLIENT_NAME_MAX]; /* "host:port" as given */
	struct sockaddr_storage sa;
	socklen_t salen;
	int fd;
	enum agg_state st;
	uint8_t rbuf[WIRE_MSG_MAX];
	size_t rlen;
	uint8_t wbuf[WIRE_MSG_MAX];
	size_t wlen, woff;
	uint32_t job_handle, window, chunk_bytes, timeout_ms;
	fi_addr_t fi_addr;
	bool av_inserted;
	struct client_slot *slots; /* c->window entries; the first `window` are used */
	uint64_t next_c;           /* running chunk counter (issue order) */
	uint32_t inflight;         /* busy slots */
	int32_t pending_slot;      /* slot whose send got -FI_EAGAIN, -1: none */
	int32_t q_head, q_tail;    /* requests with chunks not yet issued here */
	uint64_t last_ns;          /* last completion, or first post after idle */
	int err;
};

struct req_agg {
	size_t off, end; /* bytes of this aggregator's shard not yet issued */
	size_t chunk;    /* chunk bytes for this request here (client_chunk_for) */
	int32_t next;    /* next request in this aggregator's queue */
};

struct client_req {
	uint32_t idx;
	bool in_use;
	const uint8_t *send;
	uint8_t *recv;
	void *sdesc, *rdesc;
	enum sc_dtype t;
	enum sc_op op;
	size_t esize;
	size_t chunks_left; /* chunks whose result has not arrived */
	size_t inflight;    /* chunks holding a slot */
	int err;
	uint64_t fail_ns;
	struct req_agg *ra; /* naggs entries */
};

struct client {
	struct fabric *fab;
	bool own_fabric;
	uint64_t job_id;
	uint32_t rank, nranks, chunk_bytes, window, dtype_mask, timeout_ms, eager_bytes, join_flags;
	uint8_t key[256];
	size_t key_len;
	size_t naggs;
	struct client_agg *aggs;
	struct client_op *ops; /* naggs * window * 2 */
	size_t nops;
	struct client_slot *slot_mem;
	uint32_t max_requests;
	struct client_req *reqs;
	struct req_agg *ra_mem;
	uint32_t *free_reqs;
	uint32_t nfree;
	uint64_t deadline_ns; /* connect deadline */
	uint64_t last_ctl_ns;
	bool all_ready;
	bool broken; /* an aggregator died: every request fails from now on */
	int err;
	char errmsg[CLIENT_ERR_MAX];
	client_foreign_cqe_fn foreign_fn;
	void *foreign_arg;
};

void client_shard(size_t count, size_t elem_size, size_t naggs, size_t agg, size_t *first,
		  size_t *n)
{
	size_t align, per, lo, hi;

	if (!naggs || agg >= naggs || !elem_size) {
		*first = 0;
		*n = 0;
		return;
	}
	align = elem_size >= 64 ? 1 : 64 / elem_size;
	per = (count + naggs - 1) / naggs;
	per = (per + align - 1) / align * align;
	lo = agg * per < count ? agg * per : count;
	hi = agg == naggs - 1 ? count : ((agg + 1) * per < count ? (agg + 1) * per : count);
	*first = lo;
	*n = hi - lo;
}

/* The eager cut: a shard that fits in one window of eager-sized chunks goes
 * as eager messages (each one send + one completion on both sides), since a
 * message above the provider's eager limit costs rxm several progress round
 * trips (SAR or rendezvous), which on a loaded host are scheduler waits.
 * Larger shards keep the granted chunk: there the per-message costs are
 * amortised and more, smaller messages only add completions. Chunks are
 * whole elements; the same inputs give the same cut on every rank. */
size_t client_chunk_for(size_t shard_bytes, size_t elem_size, uint32_t chunk_bytes,
			uint32_t window, uint32_t eager_bytes)
{
	size_t chunk, eager;

	if (!elem_size)
		return chunk_bytes;
	chunk = chunk_bytes / elem_size * elem_size;
	eager = eager_bytes / elem_size * elem_size;
	if (eager && eager < chunk && shard_bytes > eager &&
	    shard_bytes <= (size_t)(window < CLIENT_EAGER_CHUNKS ? window : CLIENT_EAGER_CHUNKS) * eager)
		return eager;
	return chunk;
}

uint32_t client_eager_default(const char *provider)
{
	const char *env;
	char *end;

	if (!provider || !strstr(provider, "ofi_rxm"))
		return 0;
	env = getenv("FI_OFI_RXM_EAGER_LIMIT");
	if (env && *env) {
		unsigned long long v = strtoull(env, &end, 0);
		if (!*end && v <= (64ull << 20))
			return (uint32_t)v;
	}
	return 16384;
}

/* ---- errors ---- */

static int refuse_errno(unsigned code)
{
	switch (code) {
	case WIRE_E_VERSION:
		return -EPROTONOSUPPORT;
	case WIRE_E_AUTH:
		return -EACCES;
	case WIRE_E_MEMORY:
		return -ENOMEM;
	case WIRE_E_JOB_FULL:
	case WIRE_E_RANK_TAKEN:
	case WIRE_E_TOO_MANY_JOBS:
		return -EBUSY;
	case WIRE_E_NRANKS:
	case WIRE_E_PARAMS:
	case WIRE_E_PROVIDER:
	case WIRE_E_MALFORMED:
		return -EINVAL;
	case WIRE_E_TIMEOUT:
		return -ETIMEDOUT;
	case WIRE_E_SHUTDOWN:
		return -ESHUTDOWN;
	case WIRE_E_DATA:
		return -EPROTO;
	default:
		return -ECONNABORTED;
	}
}

static void close_fd(struct client_agg *a)
{
	if (a->fd >= 0) {
		close(a->fd);
		a->fd = -1;
	}
}

static void client_fail_all(struct client *c);

/* Marks aggregator a dead with err and a sentence (first error of the
 * client wins client_error()); every outstanding request fails. */
__attribute__((format(printf, 4, 5))) static void agg_fail(struct client *c, struct client_agg *a,
							   int err, const char *fmt, ...)
{
	char msg[CLIENT_ERR_MAX];
	va_list ap;

	if (a->st == AGG_DEAD)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	a->st = AGG_DEAD;
	a->err = err;
	close_fd(a);
	SC_ERR("%s", msg);
	if (!c->err) {
		c->err = err;
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", msg);
	}
	client_fail_all(c);
}

/* ---- requests and slots ---- */

static void req_free(struct client *c, struct client_req *r)
{
	r->in_use = false;
	c->free_reqs[c->nfree++] = r->idx;
}

static void slot_release_maybe(struct client *c, struct client_agg *a, struct client_slot *s)
{
	if (s->req < 0 || s->recv_posted || s->send_posted || s->send_pending)
		return;
	struct client_req *r = &c->reqs[s->req];
	s->req = -1;
	a->inflight--;
	if (r->inflight)
		r->inflight--;
}

/* After a failure nothing new is issued; posted receives are cancelled so
 * that no result lands in a buffer whose request has been reported. */
static void client_fail_all(struct client *c)
{
	uint64_t t = sc_now_ns();

	c->broken = true;
	for (uint32_t i = 0; i < c->max_requests; i++) {
		struct client_req *r = &c->reqs[i];
		if (r->in_use && !r->err) {
			r->err = c->err ? c->err : -EPIPE;
			r->fail_ns = t;
		}
	}
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		a->q_head = a->q_tail = -1;
		a->pending_slot = -1;
		for (uint32_t si = 0; si < c->window; si++) {
			struct client_slot *s = &a->slots[si];
			if (s->req < 0)
				continue;
			if (s->send_pending) {
				s->send_pending = 0;
				slot_release_maybe(c, a, s);
			}
			if (s->recv_posted) {
				struct client_op *o = &c->ops[(ai * c->window + si) * 2 + 1];
				int rc = fabric_cancel(c->fab, &o->fop);
				if (rc && rc != -FI_ENOENT)
					SC_DBG("fi_cancel(%s slot %u): %s", a->name, si, fi_strerror(-rc));
			}
		}
	}
}

static void q_push(struct client *c, struct client_agg *a, struct client_req *r, size_t ai)
{
	r->ra[ai].next = -1;
	if (a->q_tail >= 0)
		c->reqs[a->q_tail].ra[ai].next = (int32_t)r->idx;
	else
		a->q_head = (int32_t)r->idx;
	a->q_tail = (int32_t)r->idx;
}

static void q_pop(struct client *c, struct client_agg *a, size_t ai)
{
	struct client_req *r = &c->reqs[a->q_head];
	a->q_head = r->ra[ai].next;
	if (a->q_head < 0)
		a->q_tail = -1;
}

static int slot_send(struct client *c, struct client_agg *a, size_t ai, uint32_t si)
{
	struct client_slot *s = &a->slots[si];
	struct client_req *r = &c->reqs[s->req];
	struct client_op *o = &c->ops[(ai * c->window + si) * 2];
	int rc = fabric_tsend(c->fab, r->send + s->off, s->len, r->sdesc, a->fi_addr,
			      wire_tag_make(WIRE_TAG_DATA, a->job_handle, c->rank, si), s->imm, &o->fop);
	if (rc == 0) {
		s->send_pending = 0;
		s->send_posted = 1;
		a->pending_slot = -1;
		return 0;
	}
	if (rc == -FI_EAGAIN) {
		a->pending_slot = (int32_t)si;
		return rc;
	}
	s->send_pending = 0;
	agg_fail(c, a, -EIO, "%s: posting chunk seq %u: %s", a->name, s->seq, fi_strerror(-rc));
	return rc;
}

/* Issues queued chunks of aggregator ai while slots are free. */
static void agg_issue(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];

	if (a->st != AGG_READY)
		return;
	if (a->pending_slot >= 0 && slot_send(c, a, ai, (uint32_t)a->pending_slot))
		return;
	while (a->q_head >= 0) {
		struct client_req *r = &c->reqs[a->q_head];
		struct req_agg *ra = &r->ra[ai];
		uint32_t si = (uint32_t)(a->next_c % a->window);
		struct client_slot *s = &a->slots[si];
		if (s->req >= 0)
			break; /* credit: chunk c - window has not completed */
		size_t chunk = ra->chunk;
		size_t len = ra->end - ra->off < chunk ? ra->end - ra->off : chunk;
		uint32_t seq = (uint32_t)(a->next_c & WIRE_SEQ_MASK);
		struct client_op *ro = &c->ops[(ai * c->window + si) * 2 + 1];
		fi_addr_t src = c->fab->has_source ? a->fi_addr : FI_ADDR_UNSPEC;
		int rc = fabric_trecv(c->fab, r->recv + ra->off, len, r->rdesc, src,
				      wire_tag_make(WIRE_TAG_RESULT, (uint32_t)ai, c->rank, si), 0,
				      &ro->fop);
		if (rc == -FI_EAGAIN)
			break;
		if (rc) {
			agg_fail(c, a, -EIO, "%s: posting result receive for seq %u: %s", a->name,
				 seq, fi_strerror(-rc));
			return;
		}
		if (!a->inflight)
			a->last_ns = sc_now_ns();
		s->req = (int32_t)r->idx;
		s->seq = seq;
		s->imm = wire_imm_make(r->t, r->op, seq);
		s->off = ra->off;
		s->len = len;
		s->recv_posted = 1;
		s->send_posted = 0;
		s->send_pending = 1;
		a->inflight++;
		r->inflight++;
		a->next_c++;
		ra->off += len;
		if (ra->off == ra->end)
			q_pop(c, a, ai);
		if (slot_send(c, a, ai, si))
			return; /* -FI_EAGAIN: retried on the next progress; or dead */
	}
}

static void handle_cqe(struct client *c, const struct fabric_cqe *e)
{
	struct client_op *o = (struct client_op *)e->op;
	struct client_agg *a = &c->aggs[o->agg];
	struct client_slot *s = &a->slots[o->slot];
	struct client_req *r = s->req >= 0 ? &c->reqs[s->req] : NULL;

	if (!r) {
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "%s: completion for idle slot %u (err %d)",
				 a->name, o->slot, e->err);
		return;
	}
	a->last_ns = sc_now_ns();
	if (!o->is_recv) {
		s->send_posted = 0;
		if (e->err && e->err != -FI_ECANCELED)
			agg_fail(c, a, -EIO, "%s: sending chunk seq %u (%zu bytes) failed: %s",
				 a->name, s->seq, s->len, fi_strerror(-e->err));
		slot_release_maybe(c, a, s);
		return;
	}
	s->recv_posted = 0;
	if (e->err == -FI_ECANCELED) {
		/* cancelled after a failure: r->err is already set */
	} else if (e->err == -FI_ETRUNC) {
		agg_fail(c, a, -EPROTO,
			 "%s sent a result of %zu bytes for chunk seq %u of %zu bytes (slot %u)",
			 a->name, e->olen, s->seq, s->len, o->slot);
	} else if (e->err) {
		agg_fail(c, a, -EIO, "%s: result receive for chunk seq %u failed: %s", a->name,
			 s->seq, fi_strerror(-e->err));
	} else if (!(e->flags & FI_REMOTE_CQ_DATA) || e->data != s->imm || e->len != s->len) {
		agg_fail(c, a, -EPROTO,
			 "%s sent a bad result in slot %u: expected seq %u %s %s %zu bytes, got "
			 "%s%u %s %s %zu bytes",
			 a->name, o->slot, s->seq, sc_dtype_name(wire_imm_dtype(s->imm)),
			 sc_op_name(wire_imm_op(s->imm)), s->len,
			 e->flags & FI_REMOTE_CQ_DATA ? "seq " : "no immediate data, ",
			 wire_imm_seq(e->data),
			 wire_imm_dtype(e->data) < SC_DTYPE_COUNT
				 ? sc_dtype_name(wire_imm_dtype(e->data)) : "?",
			 sc_op_name(wire_imm_op(e->data)), e->len);
	} else if (!r->err) {
		r->chunks_left--;
	}
	slot_release_maybe(c, a, s);
}

static bool op_is_ours(const struct client *c, const struct fabric_op *op)
{
	uintptr_t p = (uintptr_t)op, lo = (uintptr_t)c->ops, hi = (uintptr_t)(c->ops + c->nops);
	return p >= lo && p < hi && (p - lo) % sizeof(struct client_op) == 0;
}

int client_handle_cqe(struct client *c, const struct fabric_cqe *e)
{
	if (!op_is_ours(c, e->op))
		return 0;
	handle_cqe(c, e);
	return 1;
}

void client_set_foreign_cqe(struct client *c, client_foreign_cqe_fn fn, void *arg)
{
	c->foreign_fn = fn;
	c->foreign_arg = arg;
}

static int poll_cq(struct client *c)
{
	struct fabric_cqe ev[CLIENT_CQ_BATCH];

	for (int round = 0; round < 8; round++) {
		int n = fabric_cq_poll(c->fab, ev, CLIENT_CQ_BATCH);
		if (n < 0) {
			if (!c->err) {
				c->err = -EIO;
				snprintf(c->errmsg, sizeof(c->errmsg), "completion queue (%s) failed: %s",
					 fabric_provider(c->fab), fi_strerror(-n));
				SC_ERR("%s", c->errmsg);
			}
			for (size_t ai = 0; ai < c->naggs; ai++)
				if (c->aggs[ai].st != AGG_DEAD) {
					c->aggs[ai].st = AGG_DEAD;
					c->aggs[ai].err = -EIO;
				}
			client_fail_all(c);
			return n;
		}
		for (int i = 0; i < n; i++) {
			if (op_is_ours(c, ev[i].op))
				handle_cqe(c, &ev[i]);
			else if (c->foreign_fn)
				c->foreign_fn(c->foreign_arg, &ev[i]);
			else
				SC_LOG_RATELIMIT(SC_LOG_WARN, 1000,
						 "dropping a completion that is not the client's "
						 "(shared endpoint without client_set_foreign_cqe)");
		}
		if (n < CLIENT_CQ_BATCH)
			break;
	}
	return 0;
}

/* ---- control plane ---- */

static void ctl_flush(struct client *c, struct client_agg *a)
{
	while (a->woff < a->wlen) {
		ssize_t n = send(a->fd, a->wbuf + a->woff, a->wlen - a->woff, MSG_NOSIGNAL);
		if (n > 0) {
			a->woff += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		agg_fail(c, a, -ECONNRESET, "%s: connection lost while sending: %s", a->name,
			 strerror(errno));
		return;
	}
	a->woff = a->wlen = 0;
}

static void send_join(struct client *c, struct client_agg *a, size_t ai, uint64_t nonce)
{
	struct wire_msg m = { .type = WIRE_JOIN };
	struct wire_join *j = &m.u.join;
	int n;

	j->job_id = c->job_id;
	j->rank = c->rank;
	j->nranks = c->nranks;
	j->chunk_bytes = c->chunk_bytes;
	j->window = c->window;
	j->dtype_mask = c->dtype_mask;
	j->timeout_ms = c->timeout_ms;
	j->result_key = (uint16_t)ai;
	j->flags = (uint16_t)c->join_flags;
	j->addr_len = (uint16_t)c->fab->addrlen;
	memcpy(j->addr, c->fab->addr, c->fab->addrlen);
	snprintf(j->provider, sizeof(j->provider), "%s", fabric_provider(c->fab));
	if (wire_join_sign(c->key, c->key_len, nonce, j)) {
		agg_fail(c, a, -EIO, "%s: signing JOIN failed (HMAC-SHA256)", a->name);
		return;
	}
	n = wire_msg_encode(&m, a->wbuf, sizeof(a->wbuf));
	if (n < 0) {
		agg_fail(c, a, -EINVAL, "%s: cannot encode JOIN: %s", a->name, strerror(-n));
		return;
	}
	a->wlen = (size_t)n;
	a->woff = 0;
	a->st = AGG_JOINING;
	ctl_flush(c, a);
}

static void handle_msg(struct client *c, struct client_agg *a, size_t ai, const struct wire_msg *m)
{
	switch (m->type) {
	case WIRE_HELLO:
		if (a->st != AGG_HELLO)
			break;
		if (m->u.hello.version_min > WIRE_VERSION || m->u.hello.version_max < WIRE_VERSION) {
			agg_fail(c, a, -EPROTONOSUPPORT,
				 "%s speaks protocol versions %u..%u, this client speaks %u", a->name,
				 m->u.hello.version_min, m->u.hello.version_max, WIRE_VERSION);
			return;
		}
		send_join(c, a, ai, m->u.hello.nonce);
		return;
	case WIRE_JOIN_OK: {
		const struct wire_join_ok *o = &m->u.join_ok;
		if (a->st != AGG_JOINING)
			break;
		if (o->window > c->window) {
			agg_fail(c, a, -EPROTO, "%s granted a window of %u, more than the %u asked for",
				 a->name, o->window, c->window);
			return;
		}
		int rc = fabric_av_insert(c->fab, o->addr, o->addr_len, &a->fi_addr);
		if (rc) {
			agg_fail(c, a, -EIO, "%s: cannot add its data address to the AV (%s): %s",
				 a->name, fabric_provider(c->fab), fi_strerror(-rc));
			return;
		}
		a->av_inserted = true;
		a->job_handle = o->job_handle;
		a->window = o->window;
		a->chunk_bytes = o->chunk_bytes;
		a->timeout_ms = o->timeout_ms;
		a->st = AGG_WAIT_READY;
		SC_DBG("%s: joined job 0x%llx as rank %u of %u (handle %u, window %u, chunk %u)",
		       a->name, (unsigned long long)c->job_id, c->rank, c->nranks, a->job_handle,
		       a->window, a->chunk_bytes);
		return;
	}
	case WIRE_READY:
		if (a->st != AGG_WAIT_READY)
			break;
		if (m->u.ready.job_handle != a->job_handle || m->u.ready.nranks != c->nranks) {
			agg_fail(c, a, -EPROTO,
				 "%s sent READY for job handle %u with %u ranks, expected handle %u "
				 "with %u ranks",
				 a->name, m->u.ready.job_handle, m->u.ready.nranks, a->job_handle,
				 c->nranks);
			return;
		}
		a->st = AGG_READY;
		return;
	case WIRE_REFUSE:
		if (a->st == AGG_READY)
			break;
		agg_fail(c, a, refuse_errno(m->u.refuse.code), "%s refused join: %s: %s", a->name,
			 wire_code_name(m->u.refuse.code), m->u.refuse.text);
		return;
	case WIRE_ABORT:
		agg_fail(c, a, m->u.abort.code == WIRE_E_TIMEOUT ? -ETIMEDOUT : -ECONNABORTED,
			 "%s aborted the job: %s: %s", a->name, wire_code_name(m->u.abort.code),
			 m->u.abort.text);
		return;
	default:
		break;
	}
	agg_fail(c, a, -EPROTO, "%s: protocol error: unexpected %s while %s", a->name,
		 wire_type_name(m->type), agg_state_what[a->st]);
}

/* Frames and handles every complete message in a->rbuf. */
static void ctl_parse(struct client *c, struct client_agg *a, size_t ai)
{
	size_t pos = 0;

	while (a->st != AGG_DEAD && a->rlen - pos >= WIRE_HDR_LEN) {
		struct wire_hdr h;
		struct wire_msg m;
		int rc = wire_hdr_decode(a->rbuf + pos, a->rlen - pos, &h);
		if (rc == -EPROTO) {
			agg_fail(c, a, -EPROTONOSUPPORT,
				 "%s: protocol error: message in protocol version %u, this client "
				 "speaks %u",
				 a->name, h.version, WIRE_VERSION);
			return;
		}
		if (rc) {
			agg_fail(c, a, -EPROTO, "%s: protocol error: invalid message header", a->name);
			return;
		}
		if (a->rlen - pos < WIRE_HDR_LEN + h.len)
			break;
		rc = wire_msg_decode(h.type, a->rbuf + pos + WIRE_HDR_LEN, h.len, &m);
		if (rc) {
			agg_fail(c, a, -EPROTO, "%s: protocol error: invalid %s message (%u bytes)",
				 a->name, wire_type_name(h.type), h.len);
			return;
		}
		pos += WIRE_HDR_LEN + h.len;
		handle_msg(c, a, ai, &m);
	}
	if (a->st != AGG_DEAD && pos) {
		memmove(a->rbuf, a->rbuf + pos, a->rlen - pos);
		a->rlen -= pos;
	}
}

static void ctl_read(struct client *c, struct client_agg *a, size_t ai)
{
	for (int i = 0; i < 16 && a->st != AGG_DEAD; i++) {
		ssize_t n = recv(a->fd, a->rbuf + a->rlen, sizeof(a->rbuf) - a->rlen, 0);
		if (n > 0) {
			a->rlen += (size_t)n;
			ctl_parse(c, a, ai);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == 0) {
			agg_fail(c, a, a->st == AGG_READY ? -ECONNRESET : -ECONNREFUSED,
				 "%s closed the connection%s%s", a->name,
				 a->st == AGG_READY ? "" : " while ",
				 a->st == AGG_READY ? "" : agg_state_what[a->st]);
			return;
		}
		if (a->st == AGG_HELLO)
			agg_fail(c, a, -errno, "%s unreachable: %s", a->name, strerror(errno));
		else
			agg_fail(c, a, -errno, "%s: connection lost: %s", a->name, strerror(errno));
		return;
	}
}

/* One non-blocking pass over every control socket. */
static void ctl_poll(struct client *c)
{
	struct pollfd pfd[CLIENT_AGGS_MAX];
	size_t idx[CLIENT_AGGS_MAX], n = 0;

	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		if (a->fd < 0 || a->st == AGG_DEAD)
			continue;
		pfd[n].fd = a->fd;
		pfd[n].events = a->st == AGG_CONNECTING ? POLLOUT : (short)(POLLIN | (a->wlen ? POLLOUT : 0));
		pfd[n].revents = 0;
		idx[n++] = ai;
	}
	if (!n || poll(pfd, n, 0) <= 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct client_agg *a = &c->aggs[idx[i]];
		if (!pfd[i].revents || a->st == AGG_DEAD)
			continue;
		if (a->st == AGG_CONNECTING) {
			int err = 0;
			socklen_t l = sizeof(err);
			if (getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
				err = errno;
			if (err) {
				agg_fail(c, a, -err, "%s unreachable: %s", a->name, strerror(err));
				continue;
			}
			a->st = AGG_HELLO;
			continue; /* HELLO is read on the next pass */
		}
		if (a->wlen && (pfd[i].revents & POLLOUT))
			ctl_flush(c, a);
		if (a->st != AGG_DEAD && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
			ctl_read(c, a, idx[i]);
	}
}

/* ---- creation ---- */

static int parse_endpoint(const char *s, struct client_agg *a, char *why, size_t whylen)
{
	char host[CLIENT_NAME_MAX];
	const char *colon = strrchr(s, ':'), *h = s;
	size_t hlen;
	char *end;

	if (strlen(s) >= CLIENT_NAME_MAX) {
		snprintf(why, whylen, "aggregator address too long: \"%.40s...\"", s);
		return -EINVAL;
	}
	snprintf(a->name, sizeof(a->name), "%s", s);
	if (!colon || colon == s || !colon[1]) {
		snprintf(why, whylen, "aggregator \"%s\" is not host:port", s);
		return -EINVAL;
	}
	hlen = (size_t)(colon - s);
	if (s[0] == '[' && colon[-1] == ']') {
		h = s + 1;
		hlen -= 2;
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port == 0 || port > 65535) {
		snprintf(why, whylen, "aggregator \"%s\": bad port \"%s\"", s, colon + 1);
		return -EINVAL;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc || !res) {
		snprintf(why, whylen, "aggregator \"%s\": cannot resolve \"%s\": %s", s, host,
			 gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	memcpy(&a->sa, res->ai_addr, res->ai_addrlen);
	a->salen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void agg_connect(struct client *c, struct client_agg *a)
{
	int one = 1;

	a->fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		agg_fail(c, a, -errno, "%s: socket: %s", a->name, strerror(errno));
		return;
	}
	setsockopt(a->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(a->fd, (struct sockaddr *)&a->sa, a->salen) == 0) {
		a->st = AGG_HELLO;
		return;
	}
	if (errno == EINPROGRESS || errno == EINTR) {
		a->st = AGG_CONNECTING;
		return;
	}
	agg_fail(c, a, -errno, "%s unreachable: %s", a->name, strerror(errno));
}

static int params_check(const struct client_params *p, char *why, size_t len)
{
	if (!p->naggs || p->naggs > CLIENT_AGGS_MAX || !p->aggs)
		snprintf(why, len, "naggs %zu: need 1..%d aggregators", p->naggs, CLIENT_AGGS_MAX);
	else if (!p->nranks || p->nranks > WIRE_RANKS_MAX)
		snprintf(why, len, "nranks %u: need 1..%u", p->nranks, WIRE_RANKS_MAX);
	else if (p->rank >= p->nranks)
		snprintf(why, len, "rank %u is not below nranks %u", p->rank, p->nranks);
	else if (p->chunk_bytes && (p->chunk_bytes % 8 || p->chunk_bytes > (64u << 20)))
		snprintf(why, len, "chunk_bytes %u: need a multiple of 8 up to 64 MiB",
			 p->chunk_bytes);
	else if (p->window > 65536)
		snprintf(why, len, "window %u: at most 65536 chunks in flight", p->window);
	else if (p->dtype_mask >> SC_DTYPE_COUNT)
		snprintf(why, len, "dtype_mask 0x%x has bits beyond the %d types", p->dtype_mask,
			 SC_DTYPE_COUNT);
	else if (p->key_len > 256 || (p->key_len && !p->key))
		snprintf(why, len, "key of %zu bytes: at most 256", p->key_len);
	else if (p->max_requests > 65536)
		snprintf(why, len, "max_requests %u: at most 65536", p->max_requests);
	else if (p->join_flags & ~(uint32_t)WIRE_JOIN_F_DETERMINISTIC)
		snprintf(why, len, "join_flags 0x%x: unknown bits 0x%x", p->join_flags,
			 p->join_flags & ~(uint32_t)WIRE_JOIN_F_DETERMINISTIC);
	else
		return 0;
	return -EINVAL;
}

int client_create(const struct client_params *p, struct client **out)
{
	char why[CLIENT_ERR_MAX];
	struct client *c;
	int rc;

	if (!p || !out)
		return -EINVAL;
	rc = params_check(p, why, sizeof(why));
	if (rc) {
		SC_ERR("client: %s", why);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->job_id = p->job_id;
	c->rank = p->rank;
	c->nranks = p->nranks;
	c->chunk_bytes = p->chunk_bytes ? p->chunk_bytes : CLIENT_CHUNK_DEFAULT;
	c->window = p->window ? p->window : CLIENT_WINDOW_DEFAULT;
	c->dtype_mask = p->dtype_mask ? p->dtype_mask : (1u << SC_DTYPE_COUNT) - 1;
	c->timeout_ms = p->timeout_ms ? p->timeout_ms : CLIENT_TIMEOUT_DEFAULT;
	c->max_requests = p->max_requests ? p->max_requests : CLIENT_REQS_DEFAULT;
	c->eager_bytes = p->eager_bytes;
	c->join_flags = p->join_flags;
	if (p->key_len)
		memcpy(c->key, p->key, p->key_len);
	c->key_len = p->key_len;
	c->naggs = p->naggs;

	c->aggs = calloc(c->naggs, sizeof(*c->aggs));
	c->nops = c->naggs * c->window * 2;
	c->ops = calloc(c->nops, sizeof(*c->ops));
	c->slot_mem = calloc(c->naggs * c->window, sizeof(*c->slot_mem));
	c->reqs = calloc(c->max_requests, sizeof(*c->reqs));
	c->ra_mem = calloc((size_t)c->max_requests * c->naggs, sizeof(*c->ra_mem));
	c->free_reqs = calloc(c->max_requests, sizeof(*c->free_reqs));
	if (!c->aggs || !c->ops || !c->slot_mem || !c->reqs || !c->ra_mem || !c->free_reqs) {
		rc = -ENOMEM;
		goto err_free;
	}
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		a->fd = -1;
		a->st = AGG_CONNECTING;
		a->q_head = a->q_tail = -1;
		a->pending_slot = -1;
		a->slots = &c->slot_mem[ai * c->window];
		for (uint32_t si = 0; si < c->window; si++) {
			a->slots[si].req = -1;
			for (uint32_t k = 0; k < 2; k++) {
				struct client_op *o = &c->ops[(ai * c->window + si) * 2 + k];
				o->agg = (uint32_t)ai;
				o->slot = si;
				o->is_recv = k;
			}
		}
		if (!p->aggs[ai]) {
			snprintf(why, sizeof(why), "aggregator %zu is NULL", ai);
			rc = -EINVAL;
		} else {
			rc = parse_endpoint(p->aggs[ai], a, why, sizeof(why));
		}
		if (rc) {
			SC_ERR("client: %s", why);
			goto err_free;
		}
	}
	for (uint32_t i = 0; i < c->max_requests; i++) {
		c->reqs[i].idx = i;
		c->reqs[i].ra = &c->ra_mem[(size_t)i * c->naggs];
		c->free_reqs[i] = c->max_requests - 1 - i;
	}
	c->nfree = c->max_requests;

	if (p->fabric) {
		c->fab = p->fabric;
	} else {
		struct fabric_params fp = { .provider = p->provider, .node = p->node };
		rc = fabric_open(&fp, &c->fab);
		if (rc) {
			rc = rc < 0 ? rc : -rc;
			goto err_free;
		}
		c->own_fabric = true;
	}
	if (c->fab->addrlen > WIRE_ADDR_MAX || strlen(fabric_provider(c->fab)) >= WIRE_PROV_MAX) {
		SC_ERR("client: fabric address of %zu bytes or provider name \"%s\" does not fit "
		       "the JOIN message", c->fab->addrlen, fabric_provider(c->fab));
		rc = -EINVAL;
		goto err_fabric;
	}
	c->deadline_ns = sc_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	for (size_t ai = 0; ai < c->naggs; ai++)
		agg_connect(c, &c->aggs[ai]);
	*out = c;
	return 0;

err_fabric:
	if (c->own_fabric)
		fabric_close(c->fab);
err_free:
	free(c->free_reqs);
	free(c->ra_mem);
	free(c->reqs);
	free(c->slot_mem);
	free(c->ops);
	free(c->aggs);
	free(c);
	return rc;
}

int client_connect_poll(struct client *c)
{
	if (c->all_ready)
		return c->err;
	if (!c->err)
		ctl_poll(c);
	if (c->err)
		return c->err;

	size_t ready = 0;
	for (size_t ai = 0; ai < c->naggs; ai++)
		ready += c->aggs[ai].st == AGG_READY;
	if (ready == c->naggs) {
		c->all_ready = true;
		c->last_ctl_ns = sc_now_ns();
		return 0;
	}
	if (sc_now_ns() < c->deadline_ns)
		return -EAGAIN;
	/* Name the aggregator that got least far. */
	struct client_agg *slow = NULL;
	for (size_t ai = 0; ai < c->naggs; ai++)
		if (c->aggs[ai].st != AGG_READY && (!slow || c->aggs[ai].st < slow->st))
			slow = &c->aggs[ai];
	if (slow->st == AGG_WAIT_READY)
		agg_fail(c, slow, -ETIMEDOUT,
			 "%s: timed out after %u ms waiting for READY (joined job 0x%llx as rank %u "
			 "of %u; %zu of %zu aggregators ready; other ranks have not all joined)",
			 slow->name, c->timeout_ms, (unsigned long long)c->job_id, c->rank,
			 c->nranks, ready, c->naggs);
	else
		agg_fail(c, slow, -ETIMEDOUT, "%s: timed out after %u ms %s (%zu of %zu aggregators "
			 "ready)", slow->name, c->timeout_ms, agg_state_what[slow->st], ready,
			 c->naggs);
	return c->err;
}

int client_mr_reg(struct client *c, void *buf, size_t len, struct fabric_mr *out)
{
	return fabric_mr_reg(c->fab, buf, len, out);
}

/* ---- data path ---- */

int client_allreduce(struct client *c, const void *send, void *recv, size_t count,
		     enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
		     struct client_req **out)
{
	struct client_req *r;

	if ((unsigned)t >= SC_DTYPE_COUNT || (unsigned)op >= SC_OP_COUNT ||
	    !(c->dtype_mask & (1u << t)) || (count && (!send || !recv)))
		return -EINVAL;
	if (c->broken)
		return -EPIPE;
	if (!c->all_ready)
		return -ENOTCONN;
	if (!c->nfree)
		return -EAGAIN;
	r = &c->reqs[c->free_reqs[--c->nfree]];
	r->in_use = true;
	r->send = send;
	r->recv = recv;
	r->sdesc = send_desc;
	r->rdesc = recv_desc;
	r->t = t;
	r->op = op;
	r->esize = sc_dtype_size(t);
	r->chunks_left = 0;
	r->inflight = 0;
	r->err = 0;
	r->fail_ns = 0;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		size_t first, n;
		client_shard(count, r->esize, c->naggs, ai, &first, &n);
		r->ra[ai].off = first * r->esize;
		r->ra[ai].end = (first + n) * r->esize;
		r->ra[ai].next = -1;
		if (!n)
			continue;
		size_t chunk = client_chunk_for(n * r->esize, r->esize, a->chunk_bytes, a->window,
						c->eager_bytes);
		r->ra[ai].chunk = chunk;
		r->chunks_left += (n * r->esize + chunk - 1) / chunk;
		q_push(c, a, r, ai);
	}
	for (size_t ai = 0; ai < c->naggs && !c->broken; ai++)
		if (r->ra[ai].off != r->ra[ai].end)
			agg_issue(c, ai);
	*out = r;
	return 0;
}

int client_progress(struct client *c)
{
	if (poll_cq(c))
		return c->err;
	if (!c->broken)
		for (size_t ai = 0; ai < c->naggs; ai++)
			if (c->aggs[ai].q_head >= 0 || c->aggs[ai].pending_slot >= 0)
				agg_issue(c, ai);

	uint64_t t = sc_now_ns();
	if (t - c->last_ctl_ns >= CLIENT_CTL_INTERVAL_NS) {
		c->last_ctl_ns = t;
		if (!c->all_ready) {
			if (!c->broken)
				ctl_poll(c);
			return c->err;
		}
		ctl_poll(c);
		for (size_t ai = 0; ai < c->naggs; ai++) {
			struct client_agg *a = &c->aggs[ai];
			if (a->st != AGG_READY || !a->inflight)
				continue;
			uint32_t lim = (a->timeout_ms && a->timeout_ms < c->timeout_ms ? a->timeout_ms
										: c->timeout_ms) +
				       CLIENT_SILENCE_GRACE_MS;
			if (t - a->last_ns > (uint64_t)lim * 1000000ull)
				agg_fail(c, a, -ETIMEDOUT,
					 "%s: no result for %u ms with %u chunks in flight and no word "
					 "from it (the aggregator is stuck, or cannot be reached)",
					 a->name, lim, a->inflight);
		}
	}
	return c->err;
}

int client_test(struct client *c, struct client_req *r, int *done)
{
	*done = 0;
	client_progress(c);
	if (!r->in_use)
		return -EINVAL;
	if (r->err) {
		if (r->inflight && sc_now_ns() - r->fail_ns < CLIENT_DRAIN_MS * 1000000ull)
			return 0; /* cancelled receives still draining */
		if (r->inflight)
			SC_WARN("request failed with %zu chunks still posted after %u ms; reporting it "
				"anyway", r->inflight, CLIENT_DRAIN_MS);
		int err = r->err;
		req_free(c, r);
		*done = 1;
		return err;
	}
	if (r->chunks_left || r->inflight)
		return 0;
	req_free(c, r);
	*done = 1;
	return 0;
}

const char *client_error(const struct client *c)
{
	return c->errmsg[0] ? c->errmsg : "no error";
}

size_t client_naggs(const struct client *c)
{
	return c->naggs;
}

bool client_agg_alive(const struct client *c, size_t agg)
{
	return agg < c->naggs && c->aggs[agg].st != AGG_DEAD;
}

struct fabric *client_fabric(const struct client *c)
{
	return c->fab;
}

int client_agg_info(const struct client *c, size_t agg, uint32_t *job_handle, uint32_t *window,
		    uint32_t *chunk_bytes)
{
	if (agg >= c->naggs || c->aggs[agg].st != AGG_READY)
		return -ENOTCONN;
	*job_handle = c->aggs[agg].job_handle;
	*window = c->aggs[agg].window;
	*chunk_bytes = c->aggs[agg].chunk_bytes;
	return 0;
}

void client_destroy(struct client *c)
{
	if (!c)
		return;
	/* LEAVE to every aggregator we joined (best effort: a few bytes into an
	 * idle socket; a closed connection is a LEAVE anyway). */
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		if (a->fd >= 0 && (a->st == AGG_READY || a->st == AGG_WAIT_READY)) {
			struct wire_msg m = { .type = WIRE_LEAVE, .u.leave.job_handle = a->job_handle };
			uint8_t buf[WIRE_MSG_MAX];
			int n = wire_msg_encode(&m, buf, sizeof(buf));
			if (n > 0 && send(a->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
				SC_DBG("%s: LEAVE not sent: %s", a->name, strerror(errno));
		}
	}
	/* Cancel posted receives and wait (bounded) for their completions, so
	 * that a shared endpoint never reports an op of freed memory. */
	bool posted = false;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		for (uint32_t si = 0; si < c->window; si++) {
			struct client_slot *s = &a->slots[si];
			s->send_pending = 0;
			if (s->recv_posted) {
				fabric_cancel(c->fab, &c->ops[(ai * c->window + si) * 2 + 1].fop);
				posted = true;
			}
			posted |= s->send_posted;
		}
	}
	c->broken = true;
	uint64_t until = sc_now_ns() + 1000ull * 1000000ull;
	while (posted && sc_now_ns() < until) {
		if (poll_cq(c))
			break;
		posted = false;
		for (size_t i = 0; i < c->naggs * c->window && !posted; i++)
			posted = c->slot_mem[i].recv_posted || c->slot_mem[i].send_posted;
	}
	if (posted)
		SC_WARN("client: operations still posted after 1 s at close");
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		close_fd(a);
		if (a->av_inserted && !c->own_fabric)
			fabric_av_remove(c->fab, a->fi_addr);
	}
	if (c->own_fabric)
		fabric_close(c->fab);
	free(c->free_reqs);
	free(c->ra_mem);
	free(c->reqs);
	free(c->slot_mem);
	free(c->ops);
	free(c->aggs);
	explicit_bzero(c->key, sizeof(c->key));
	free(c);
}
