/* Client library: slots and completions, per aggregator. Chunks are
 * issued in number order; chunk c uses slot c % window and seq c mod 2^24.
 * Per chunk the result receive is posted first, then the send. A slot is
 * reused only when both its result receive and its send have completed,
 * which is the protocol's credit rule (chunk c waits for the result of
 * c - window). Every result is checked against what was sent. Results land
 * in the caller's receive buffer, except with failover for an in-place
 * request: there they land in the slot's bounce buffer and are copied in,
 * so that a result cut off half-way never overwrites the send data a
 * repair may still need. A failure cancels (without failover) or fences
 * (with failover: the endpoint closed, nothing it sends lands afterwards)
 * what the slots hold. See client.h for the contract. */
#include "client_int.h"

#include <errno.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <string.h>

#include "clock.h"
#include "log.h"

/* The data word's mode for a chunk of this role (wire.h, "Modes"). */
static unsigned role_mode(unsigned role)
{
	return role == CLIENT_ROLE_TAKE	      ? WIRE_MODE_TAKE
	       : client_role_gives_only(role) ? WIRE_MODE_GIVE
					      : WIRE_MODE_ALL;
}

/* Frees slot s once nothing of it is outstanding. */
static void slot_release_if_done(struct client *c, struct client_agg *a, struct client_slot *s)
{
	/* a result from the group holds its slot until it is in */
	if (s->req < 0 || s->recv_posted || s->send_posted || s->send_pending || (s->mc_exp && !s->mc_done))
		return;
	struct client_req *r = &c->reqs[s->req];
	s->req = -1;
	a->inflight--;
	if (r->inflight)
		r->inflight--;
}

/* Without failover, after a failure nothing new is issued; posted receives
 * are cancelled so that no result lands in a buffer whose request has been
 * reported. */
void client_slot_fail_all(struct client *c)
{
	uint64_t t = sc_now_ns();

	c->broken = true;
	for (size_t ai = 0; ai < c->naggs; ai++)
		client_mc_leave(&c->aggs[ai]); /* no datagram lands in a reported request */
	for (uint32_t i = 0; i < c->max_requests; i++) {
		struct client_req *r = &c->reqs[i];
		if (r->in_use && !r->err) {
			r->err = c->err ? c->err : -EPIPE;
			r->fail_ns = t;
		}
	}
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		STAILQ_INIT(&a->queue);
		defer_clear(&a->deferred);
		for (uint32_t si = 0; si < c->window; si++) {
			struct client_slot *s = &a->slots[si];
			if (s->req < 0)
				continue;
			if (s->send_pending || (s->mc_exp && !s->mc_done)) {
				s->send_pending = 0;
				s->mc_exp = 0; /* the group is left: nothing more lands */
				slot_release_if_done(c, a, s);
			}
			if (s->recv_posted && a->ep) {
				int rc = fabric_cancel(a->ep, &client_op_of(c, ai, si, 1)->fop);
				if (rc && rc != -FI_ENOENT)
					SC_DBG("fi_cancel(%s slot %u): %s", a->name, si, fi_strerror(-rc));
			}
		}
	}
}

void client_slot_fence(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];

	/* Closing the endpoint ends every operation posted on it: no result
	 * can land in our buffers afterwards, and no completion comes. */
	if (a->ep) {
		fabric_close(a->ep);
		a->ep = NULL;
		a->av_inserted = false;
	}
	client_mc_leave(a);
	for (uint32_t si = 0; si < c->window; si++) {
		struct client_slot *s = &a->slots[si];
		if (s->req < 0)
			continue;
		s->recv_posted = s->send_posted = s->send_pending = 0;
		s->mc_exp = 0;
		slot_release_if_done(c, a, s);
	}
	STAILQ_INIT(&a->queue);
	defer_clear(&a->deferred);
}

static int slot_send(struct client *c, struct client_agg *a, size_t ai, uint32_t si);

static int slot_send_retry(struct defer *d)
{
	struct client_slot *s = container_of(d, struct client_slot, send_defer);

	return slot_send(s->c, &s->c->aggs[s->ai], s->ai, s->si);
}

static int slot_send(struct client *c, struct client_agg *a, size_t ai, uint32_t si)
{
	struct client_slot *s = &a->slots[si];
	struct client_req *r = &c->reqs[s->req];
	const void *buf = a->sealed ? client_seal_buf(c, ai, si, 0) : r->send + s->off;
	size_t len = client_slot_send_len(s) + (a->sealed ? SC_SEAL_TAG : 0);
	uint64_t tag = wire_tag_make(WIRE_TAG_DATA, a->job_handle, c->rank, si);
	/* Small chunks are injected: copied at once, no completion to reap. */
	bool inject = len <= a->ep->inject_size;
	fi_addr_t dst = client_agg_addr(a, si);
	int rc = inject ? fabric_tinject(a->ep, buf, len, dst, tag, s->imm)
			: fabric_tsend(a->ep, buf, len, a->sealed ? c->seal_mr.desc : r->sdesc, dst,
				       tag, s->imm, &client_op_of(c, ai, si, 0)->fop);
	if (rc == 0) {
		s->send_pending = 0;
		s->send_posted = !inject;
		return 0;
	}
	if (rc == -FI_EAGAIN) {
		defer_add(&a->deferred, &s->send_defer, slot_send_retry);
		return rc;
	}
	s->send_pending = 0;
	client_agg_down(c, a, -EIO, "%s: posting chunk seq %u: %s", a->name, s->seq, fi_strerror(-rc));
	return rc;
}

static int post_result(struct client *c, size_t ai, uint32_t si, void *dst, size_t cap, void *desc)
{
	struct client_agg *a = &c->aggs[ai];
	fi_addr_t src = a->ep->has_source ? client_result_addr(a, si, c->rank, a->slots[si].len)
					  : FI_ADDR_UNSPEC;

	return fabric_trecv(a->ep, dst, cap, desc, src,
			    wire_tag_make(WIRE_TAG_RESULT, (uint32_t)ai, c->rank, si), 0,
			    &client_op_of(c, ai, si, 1)->fop);
}

/* Where slot si's result lands (its request r's bytes at off): the
 * receive buffer, the slot's bounce buffer (failover, in place) or its
 * sealed staging; and that memory's descriptor. */
static uint8_t *slot_dst(struct client *c, size_t ai, uint32_t si, struct client_req *r, size_t off,
			void **desc)
{
	const struct client_agg *a = &c->aggs[ai];

	if (a->sealed) { /* the result is opened out of its staging buffer */
		*desc = c->seal_mr.desc;
		return client_seal_buf(c, ai, si, 1);
	}
	if (a->slots[si].bounced) {
		*desc = c->bounce_mr.desc;
		return client_slot_buf(c->bounce, c, ai, si);
	}
	*desc = r->rdesc;
	return r->recv + off;
}

/* Posts slot si's unicast result receive (chunk of r at off). */
static int slot_post_result(struct client *c, size_t ai, uint32_t si, struct client_req *r, size_t off)
{
	const struct client_agg *a = &c->aggs[ai];
	void *desc;
	uint8_t *dst = slot_dst(c, ai, si, r, off, &desc);

	return post_result(c, ai, si, dst, client_slot_result_len(&a->slots[si]) + (a->sealed ? SC_SEAL_TAG : 0),
			   desc);
}

/* Issues queued chunks of aggregator ai while slots are free. */
void client_slot_issue(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];
	struct req_agg *ra;

	if (a->st != AGG_READY)
		return;
	if (defer_run(&a->deferred, DEFER_IN_ORDER))
		return;
	while ((ra = STAILQ_FIRST(&a->queue))) {
		struct client_req *r = ra->req;
		uint32_t si = (uint32_t)(a->next_c % a->window);
		struct client_slot *s = &a->slots[si];
		if (s->req >= 0)
			break; /* credit: chunk c - window has not completed */
		size_t len = ra->end - ra->off < ra->chunk ? ra->end - ra->off : ra->chunk;
		uint32_t seq = (uint32_t)(a->next_c & WIRE_SEQ_MASK);
		s->role = (uint8_t)client_role_of(c, r, ra->off, len);
		s->len = len;
		s->bounced = c->failover && r->inplace && !a->sealed;
		s->chunk = a->next_c;
		s->imm = wire_imm_with_mode(wire_imm_make(r->t, r->op, seq), role_mode(s->role));
		/* from the group: no unicast receive unless it is NACKed */
		void *desc;
		bool group = client_mc_expect(c, a, s, r, ra->off, len, slot_dst(c, ai, si, r, ra->off, &desc));
		int rc = group ? 0 : slot_post_result(c, ai, si, r, ra->off);
		if (rc == -FI_EAGAIN)
			break;
		if (rc) {
			client_agg_down(c, a, -EIO, "%s: posting result receive for seq %u: %s", a->name,
					seq, fi_strerror(-rc));
			return;
		}
		if (!a->inflight)
			a->last_ns = sc_now_ns();
		s->req = (int32_t)r->idx;
		s->seq = seq;
		s->off = ra->off;
		if (a->sealed && sc_seal(&a->seal, SC_SEAL_DATA, (uint16_t)c->rank, s->chunk, s->imm,
					 r->send + ra->off, client_slot_send_len(s), client_seal_buf(c, ai, si, 0))) {
			client_agg_down(c, a, -EIO, "%s: sealing chunk seq %u failed (OpenSSL)", a->name, seq);
			return;
		}
		s->recv_posted = !group;
		s->send_posted = 0;
		s->send_pending = 1;
		s->got = 0;
		a->inflight++;
		r->inflight++;
		a->next_c++;
		ra->off += len;
		if (ra->off == ra->end)
			STAILQ_REMOVE_HEAD(&a->queue, link);
		if (slot_send(c, a, ai, si))
			return; /* -FI_EAGAIN: retried on the next progress; or dead */
	}
}

/* The result of slot si is in its landing place (unicast or the group's
 * datagrams): opened when sealed, copied in from the bounce buffer, counted.
 * False when it does not open under the job key. */
static bool slot_result_in(struct client *c, struct client_agg *a, size_t ai, uint32_t si,
			   struct client_req *r)
{
	struct client_slot *s = &a->slots[si];

	if (a->sealed && sc_unseal(&a->seal, SC_SEAL_RESULT,
				   client_role_gives_only(s->role) ? (uint16_t)c->rank : SC_SEAL_ANY_RANK,
				   s->chunk, wire_imm_plain(s->imm), client_seal_buf(c, ai, si, 1),
				   client_slot_result_len(s), r->recv + s->off))
		return false;
	if (r->err)
		return true;
	if (s->bounced && !client_role_gives_only(s->role))
		memcpy(r->recv + s->off, client_slot_buf(c->bounce, c, ai, si), s->len);
	s->got = 1;
	a->result_ns = sc_now_ns();
	if (s->chunk + 1 > a->hi)
		a->hi = s->chunk + 1;
	r->chunks_left--;
	return true;
}

static void handle_cqe(struct client *c, size_t ai, const struct fabric_cqe *e)
{
	struct client_op *o = (struct client_op *)e->op;
	struct client_agg *a = &c->aggs[ai];
	struct client_slot *s = &a->slots[o->slot];
	struct client_req *r = s->req >= 0 ? &c->reqs[s->req] : NULL;

	if (a->st == AGG_DEAD && c->failover)
		return; /* fenced in this very batch: what follows does not count */
	if (!r || o->agg != ai) {
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "%s: completion for idle slot %u (err %d)",
				 a->name, o->slot, e->err);
		return;
	}
	a->last_ns = sc_now_ns();
	if (!o->is_recv) {
		s->send_posted = 0;
		/* We never cancel a send: a cancelled one is the provider
		 * dropping the connection (ofi_rxm does when the peer goes). */
		if (e->err && (e->err != -FI_ECANCELED || !c->broken))
			client_agg_down(c, a, -EIO, "%s: sending chunk seq %u (%zu bytes) failed: %s",
					a->name, s->seq, s->len, fi_strerror(-e->err));
		slot_release_if_done(c, a, s);
		return;
	}
	s->recv_posted = 0;
	if (s->mc_done) {
		/* the result came from the group and is in: this is the receive
		 * we cancelled, or the unicast answer to our NACK (the same bytes) */
	} else if (e->err == -FI_ECANCELED && c->broken) {
		/* we cancelled it after a failure: r->err is already set */
	} else if (e->err == -FI_ECANCELED) {
		/* Not us: the provider flushed a receive directed at this
		 * aggregator because its connection went (ofi_rxm does). The
		 * result never came; taking it as a free slot would lose the
		 * chunk (and, with failover, report it held). */
		client_agg_down(c, a, -ECONNRESET,
				"%s: the result receive for chunk seq %u was cancelled by the provider "
				"(the connection was lost)", a->name, s->seq);
	} else if (e->err == -FI_ETRUNC) {
		client_agg_down(c, a, -EPROTO,
				"%s sent a result of %zu bytes for chunk seq %u of %zu bytes (slot %u)",
				a->name, e->olen, s->seq, s->len, o->slot);
	} else if (e->err) {
		client_agg_down(c, a, -EIO, "%s: result receive for chunk seq %u failed: %s", a->name,
				s->seq, fi_strerror(-e->err));
	} else if (!(e->flags & FI_REMOTE_CQ_DATA) || e->data != wire_imm_plain(s->imm) ||
		   e->len != client_slot_result_len(s) + (a->sealed ? SC_SEAL_TAG : 0)) {
		client_agg_down(c, a, -EPROTO,
				"%s sent a bad result in slot %u: expected seq %u %s %s %zu bytes, got "
				"%s%u %s %s %zu bytes",
				a->name, o->slot, s->seq, sc_dtype_name(wire_imm_dtype(s->imm)),
				sc_op_name(wire_imm_op(s->imm)), client_slot_result_len(s),
				e->flags & FI_REMOTE_CQ_DATA ? "seq " : "no immediate data, ",
				wire_imm_seq(e->data),
				wire_imm_dtype(e->data) < SC_DTYPE_COUNT
					? sc_dtype_name(wire_imm_dtype(e->data)) : "?",
				sc_op_name(wire_imm_op(e->data)), e->len);
	} else if (!slot_result_in(c, a, ai, o->slot, r)) {
		/* Not sealed by the job key: someone else's message under our
		 * tag. Dropped; the real result still comes to this receive. */
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "%s: a result for chunk seq %u did not open (not sealed "
				 "with the job's key): dropped", a->name, s->seq);
		int rc = post_result(c, ai, o->slot, client_seal_buf(c, ai, o->slot, 1),
				     client_slot_result_len(s) + SC_SEAL_TAG, c->seal_mr.desc);
		if (rc == 0) {
			s->recv_posted = 1;
			return;
		}
		client_agg_down(c, a, -EIO, "%s: reposting the result receive of seq %u: %s", a->name, s->seq,
				fi_strerror(-rc));
	} else if (s->mc_exp) { /* expected from the group, came by unicast */
		if (a->mc_in)
			sc_mc_rx_drop(&a->mc_rx, s->chunk);
		s->mc_exp = 0;
		a->mc_by_unicast++;
	}
	slot_release_if_done(c, a, s);
}

/* Results the group's datagrams completed (client_mc_recv): opened and
 * counted as a unicast one is; one that does not open is NACKed. */
static void slot_take_group(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];

	for (uint32_t si = 0; si < a->window; si++) {
		struct client_slot *s = &a->slots[si];
		if (!s->mc_got)
			continue;
		s->mc_got = 0;
		if (!slot_result_in(c, a, ai, si, &c->reqs[s->req])) {
			s->nack_due = !s->nacked; /* did not open: the unicast one will */
			continue;
		}
		s->mc_done = 1;
		s->nack_due = 0;
		a->mc_by_group++;
		if (s->chunk + 1 > a->mc_hi)
			a->mc_hi = s->chunk + 1;
		/* NACKed: its unicast answer still comes into the receive */
		slot_release_if_done(c, a, s);
	}
}

/* NACKs due (client_mc_due): the unicast receive first, where the
 * datagrams would have landed, then the NACK. */
static void slot_nack(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];

	for (uint32_t si = 0; si < a->window && a->st != AGG_DEAD; si++) {
		struct client_slot *s = &a->slots[si];
		if (s->req < 0 || !s->nack_due || !s->mc_exp || s->mc_done || s->nacked || s->send_pending)
			continue;
		if (!s->recv_posted) {
			int rc = slot_post_result(c, ai, si, &c->reqs[s->req], s->off);
			if (rc == -FI_EAGAIN)
				continue;
			if (rc) {
				client_agg_down(c, a, -EIO, "%s: posting the result receive of seq %u: %s",
						a->name, s->seq, fi_strerror(-rc));
				return;
			}
			s->recv_posted = 1;
		}
		client_mc_nack(c, a, si);
	}
}

int client_slot_poll(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];
	struct fabric_cqe ev[CLIENT_CQ_BATCH];

	for (int round = 0; round < 8 && a->ep && !a->down; round++) {
		int n = fabric_cq_poll(a->ep, ev, CLIENT_CQ_BATCH);
		if (n < 0) {
			client_agg_down(c, a, -EIO, "%s: completion queue (%s) failed: %s", a->name,
					fabric_provider(a->ep), fi_strerror(-n));
			return n;
		}
		for (int i = 0; i < n; i++)
			handle_cqe(c, ai, &ev[i]);
		if (n < CLIENT_CQ_BATCH)
			break;
	}
	if (a->mc && !a->down) {
		client_mc_recv(c, ai);
		slot_take_group(c, ai);
		client_mc_due(c, ai);
		slot_nack(c, ai);
	}
	return 0;
}

void client_agg_dump(const struct client *c, size_t agg, int level)
{
	const struct client_agg *a = &c->aggs[agg];
	const struct req_agg *head = STAILQ_FIRST(&a->queue);
	uint64_t now = sc_now_ns();

	SC_LOG_AT(level, "%s: state %d, next chunk %" PRIu64 " (assigned %" PRIu64 "), hi %" PRIu64
		  ", %u busy, pending slot %d, queue head %d, last completion %.1f s ago", a->name,
		  (int)a->st, a->next_c, a->next_assign, a->hi, a->inflight,
		  defer_empty(&a->deferred) ? -1
					    : (int)container_of(defer_first(&a->deferred), struct client_slot, send_defer)->si,
		  head ? (int)head->req->idx : -1,
		  (now - a->last_ns) / 1e9);
	for (uint32_t si = 0; si < a->window; si++) {
		const struct client_slot *s = &a->slots[si];
		if (s->req >= 0)
			SC_LOG_AT(level, "  slot %u: request %d chunk %" PRIu64 " seq %u, %zu bytes, recv %s, "
				  "send %s%s%s", si, s->req, s->chunk, s->seq, s->len,
				  s->recv_posted ? "posted" : "done", s->send_posted ? "posted" : "done",
				  s->send_pending ? " (pending)" : "", s->got ? ", got" : "");
	}
}
