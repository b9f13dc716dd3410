/* Client library: the data path. See client.h for the contract.
 *
 * Per aggregator, chunks are numbered c = 0, 1, 2, ... when requests start
 * (client_allreduce_on assigns each shard its range), and issued in that
 * order; chunk c uses slot c % window and seq c mod 2^24. A slot is reused
 * only when both its result receive and its send have completed, which is
 * the protocol's credit rule (chunk c waits for the result of c - window).
 * Results land in the caller's receive buffer, except with failover for an
 * in-place request: there they land in the slot's bounce buffer and are
 * copied in, so that a result cut off half-way never overwrites the send
 * data a repair may still need.
 *
 * Failover (client.h, "Failover"): a failed aggregator is fenced (its
 * endpoint closed: nothing it sends lands afterwards); its slots keep the
 * chunk number they carried and whether its result arrived, which is what
 * client_agg_lo and client_chunk_held report; when a request completes,
 * its chunks among each aggregator's last `window` results are copied to
 * the retention slots for ranks that may still lack them. */
#include "client_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "clock.h"
#include "log.h"

static bool mc_expect(struct client *c, struct client_agg *a, struct client_slot *s,
		      struct client_req *r, size_t off, size_t len);
static void mc_poll(struct client *c, size_t ai);

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

size_t client_chunk_for(size_t shard_bytes, size_t elem_size, uint32_t chunk_bytes,
			uint32_t window, uint32_t eager_bytes)
{
	return sc_chunk_for(shard_bytes, elem_size, chunk_bytes, window, eager_bytes);
}

enum client_role client_role_of(const struct client *c, const struct client_req *r, size_t off,
				size_t len)
{
	const struct client_blocks *b = &r->blocks;

	if (b->kind == CLIENT_ALLREDUCE || !len)
		return CLIENT_ROLE_ALL;
	uint64_t first = (b->base + off) / b->block, last = (b->base + off + len - 1) / b->block;
	bool mine = c->rank >= first && c->rank <= last;
	if (b->kind == CLIENT_REDUCE_SCATTER)
		return mine ? CLIENT_ROLE_ALL : CLIENT_ROLE_GIVE;
	if (!mine)
		return CLIENT_ROLE_TAKE;
	return first == last ? CLIENT_ROLE_SOURCE : CLIENT_ROLE_ALL;
}

/* Bytes of the message a slot sends, and of the result it gets (without a
 * seal's tag): a TAKE sends nothing; a GIVE or SOURCE gets an empty result
 * (in a sealed job a tag alone, sealed for this rank: wire.h). */
static size_t slot_send_len(const struct client_slot *s)
{
	return s->role == CLIENT_ROLE_TAKE ? 0 : s->len;
}

static bool role_gives_only(unsigned role)
{
	return role == CLIENT_ROLE_GIVE || role == CLIENT_ROLE_SOURCE;
}

static size_t slot_result_len(const struct client_slot *s)
{
	return role_gives_only(s->role) ? 0 : s->len;
}

static unsigned role_mode(unsigned role)
{
	return role == CLIENT_ROLE_TAKE ? WIRE_MODE_TAKE
	       : role_gives_only(role)  ? WIRE_MODE_GIVE
					: WIRE_MODE_ALL;
}

/* ---- requests and slots ---- */

void client_req_free(struct client *c, struct client_req *r)
{
	r->in_use = false;
	c->free_reqs[c->nfree++] = r->idx;
}

static void slot_release_maybe(struct client *c, struct client_agg *a, struct client_slot *s)
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
void client_data_fail_all(struct client *c)
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
		a->q_head = a->q_tail = -1;
		a->pending_slot = -1;
		for (uint32_t si = 0; si < c->window; si++) {
			struct client_slot *s = &a->slots[si];
			if (s->req < 0)
				continue;
			if (s->send_pending || (s->mc_exp && !s->mc_done)) {
				s->send_pending = 0;
				s->mc_exp = 0; /* the group is left: nothing more lands */
				slot_release_maybe(c, a, s);
			}
			if (s->recv_posted && a->ep) {
				int rc = fabric_cancel(a->ep, &client_op_of(c, ai, si, 1)->fop);
				if (rc && rc != -FI_ENOENT)
					SC_DBG("fi_cancel(%s slot %u): %s", a->name, si, fi_strerror(-rc));
			}
		}
	}
}

void client_data_fence(struct client *c, size_t ai)
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
		slot_release_maybe(c, a, s);
	}
	a->q_head = a->q_tail = -1;
	a->pending_slot = -1;
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
	const void *buf = a->sealed ? client_seal_buf(c, ai, si, 0) : r->send + s->off;
	size_t len = slot_send_len(s) + (a->sealed ? SC_SEAL_TAG : 0);
	uint64_t tag = wire_tag_make(WIRE_TAG_DATA, a->job_handle, c->rank, si);
	/* Small chunks are injected: copied at once, no completion to reap. */
	bool inject = len <= a->ep->inject_size;
	int rc = inject ? fabric_tinject(a->ep, buf, len, a->fi_addr, tag, s->imm)
			: fabric_tsend(a->ep, buf, len, a->sealed ? c->seal_mr.desc : r->sdesc, a->fi_addr,
				       tag, s->imm, &client_op_of(c, ai, si, 0)->fop);
	if (rc == 0) {
		s->send_pending = 0;
		s->send_posted = !inject;
		a->pending_slot = -1;
		return 0;
	}
	if (rc == -FI_EAGAIN) {
		a->pending_slot = (int32_t)si;
		return rc;
	}
	s->send_pending = 0;
	client_agg_fail(c, a, -EIO, "%s: posting chunk seq %u: %s", a->name, s->seq, fi_strerror(-rc));
	return rc;
}

static int post_result(struct client *c, size_t ai, uint32_t si, void *dst, size_t cap, void *desc)
{
	struct client_agg *a = &c->aggs[ai];
	fi_addr_t src = a->ep->has_source ? a->fi_addr : FI_ADDR_UNSPEC;

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
static int post_result_slot(struct client *c, size_t ai, uint32_t si, struct client_req *r, size_t off)
{
	const struct client_agg *a = &c->aggs[ai];
	void *desc;
	uint8_t *dst = slot_dst(c, ai, si, r, off, &desc);

	return post_result(c, ai, si, dst, slot_result_len(&a->slots[si]) + (a->sealed ? SC_SEAL_TAG : 0),
			   desc);
}

/* Issues queued chunks of aggregator ai while slots are free. */
void client_data_issue(struct client *c, size_t ai)
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
		size_t len = ra->end - ra->off < ra->chunk ? ra->end - ra->off : ra->chunk;
		uint32_t seq = (uint32_t)(a->next_c & WIRE_SEQ_MASK);
		s->role = (uint8_t)client_role_of(c, r, ra->off, len);
		s->len = len;
		s->bounced = c->failover && r->inplace && !a->sealed;
		s->chunk = a->next_c;
		s->imm = wire_imm_with_mode(wire_imm_make(r->t, r->op, seq), role_mode(s->role));
		/* from the group: no unicast receive unless it is NACKed */
		bool group = mc_expect(c, a, s, r, ra->off, len);
		int rc = group ? 0 : post_result_slot(c, ai, si, r, ra->off);
		if (rc == -FI_EAGAIN)
			break;
		if (rc) {
			client_agg_fail(c, a, -EIO, "%s: posting result receive for seq %u: %s", a->name,
					seq, fi_strerror(-rc));
			return;
		}
		if (!a->inflight)
			a->last_ns = sc_now_ns();
		s->req = (int32_t)r->idx;
		s->seq = seq;
		s->off = ra->off;
		if (a->sealed && sc_seal(&a->seal, SC_SEAL_DATA, (uint16_t)c->rank, s->chunk, s->imm,
					 r->send + ra->off, slot_send_len(s), client_seal_buf(c, ai, si, 0))) {
			client_agg_fail(c, a, -EIO, "%s: sealing chunk seq %u failed (OpenSSL)", a->name, seq);
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
			q_pop(c, a, ai);
		if (slot_send(c, a, ai, si))
			return; /* -FI_EAGAIN: retried on the next progress; or dead */
	}
}

/* The result of slot si is in its landing place (unicast or the group's
 * datagrams): opened when sealed, copied in from the bounce buffer, counted.
 * False when it does not open under the job key. */
static bool result_in(struct client *c, struct client_agg *a, size_t ai, uint32_t si,
		      struct client_req *r)
{
	struct client_slot *s = &a->slots[si];

	if (a->sealed && sc_unseal(&a->seal, SC_SEAL_RESULT,
				   role_gives_only(s->role) ? (uint16_t)c->rank : SC_SEAL_ANY_RANK,
				   s->chunk, wire_imm_plain(s->imm), client_seal_buf(c, ai, si, 1),
				   slot_result_len(s), r->recv + s->off))
		return false;
	if (r->err)
		return true;
	if (s->bounced && !role_gives_only(s->role))
		memcpy(r->recv + s->off, client_slot_buf(c->bounce, c, ai, si), s->len);
	s->got = 1;
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
			client_agg_fail(c, a, -EIO, "%s: sending chunk seq %u (%zu bytes) failed: %s",
					a->name, s->seq, s->len, fi_strerror(-e->err));
		slot_release_maybe(c, a, s);
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
		client_agg_fail(c, a, -ECONNRESET,
				"%s: the result receive for chunk seq %u was cancelled by the provider "
				"(the connection was lost)", a->name, s->seq);
	} else if (e->err == -FI_ETRUNC) {
		client_agg_fail(c, a, -EPROTO,
				"%s sent a result of %zu bytes for chunk seq %u of %zu bytes (slot %u)",
				a->name, e->olen, s->seq, s->len, o->slot);
	} else if (e->err) {
		client_agg_fail(c, a, -EIO, "%s: result receive for chunk seq %u failed: %s", a->name,
				s->seq, fi_strerror(-e->err));
	} else if (!(e->flags & FI_REMOTE_CQ_DATA) || e->data != wire_imm_plain(s->imm) ||
		   e->len != slot_result_len(s) + (a->sealed ? SC_SEAL_TAG : 0)) {
		client_agg_fail(c, a, -EPROTO,
				"%s sent a bad result in slot %u: expected seq %u %s %s %zu bytes, got "
				"%s%u %s %s %zu bytes",
				a->name, o->slot, s->seq, sc_dtype_name(wire_imm_dtype(s->imm)),
				sc_op_name(wire_imm_op(s->imm)), slot_result_len(s),
				e->flags & FI_REMOTE_CQ_DATA ? "seq " : "no immediate data, ",
				wire_imm_seq(e->data),
				wire_imm_dtype(e->data) < SC_DTYPE_COUNT
					? sc_dtype_name(wire_imm_dtype(e->data)) : "?",
				sc_op_name(wire_imm_op(e->data)), e->len);
	} else if (!result_in(c, a, ai, o->slot, r)) {
		/* Not sealed by the job key: someone else's message under our
		 * tag. Dropped; the real result still comes to this receive. */
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "%s: a result for chunk seq %u did not open (not sealed "
				 "with the job's key): dropped", a->name, s->seq);
		int rc = post_result(c, ai, o->slot, client_seal_buf(c, ai, o->slot, 1),
				     slot_result_len(s) + SC_SEAL_TAG, c->seal_mr.desc);
		if (rc == 0) {
			s->recv_posted = 1;
			return;
		}
		client_agg_fail(c, a, -EIO, "%s: reposting the result receive of seq %u: %s", a->name, s->seq,
				fi_strerror(-rc));
	} else if (s->mc_exp) { /* expected from the group, came by unicast */
		if (a->mc_in)
			sc_mc_rx_drop(&a->mc_rx, s->chunk);
		s->mc_exp = 0;
		a->mc_by_unicast++;
	}
	slot_release_maybe(c, a, s);
}

/* ---- multicast results (docs/daemon.md, "Multicast results") ----
 *
 * In a job whose aggregator multicasts (WIRE_OK_F_MCAST), the result of a
 * chunk that two or more ranks take (chunk_takers: the aggregator counts
 * the same from the modes) goes to the group; every other result, and one
 * a rank asked for by NACK, comes by unicast RESULT as before. A rank in
 * the group assembles such a result from the datagrams into the place its
 * receive would have used (sc_mc_rx) and posts no receive for it; when it
 * misses datagrams it posts the receive, then sends a NACK (a tagged
 * message of its own, tag NACK, the chunk's slot), and exactly one unicast
 * RESULT answers (the datagrams may still complete it first: the unicast
 * then brings the same bytes, and the slot waits for it). A rank out of
 * the group NACKs each such chunk once its data is posted. A rank in it
 * NACKs a chunk mc_nack_ns after the first evidence of a loss
 * (sc_mc_rx_gap, a later chunk completed, or no datagram from the group
 * yet at all), or 100 x mc_nack_ns after it was expected in any case. */

/* Ranks that take the result of r's bytes [off, off + len) (modes all and
 * take): the aggregator multicasts a result two or more take. */
static uint32_t chunk_takers(const struct client *c, const struct client_req *r, size_t off, size_t len)
{
	const struct client_blocks *b = &r->blocks;

	if (b->kind == CLIENT_ALLREDUCE || !len)
		return c->nranks;
	uint64_t first = (b->base + off) / b->block, last = (b->base + off + len - 1) / b->block;
	if (last >= c->nranks)
		last = c->nranks - 1;
	if (b->kind == CLIENT_REDUCE_SCATTER)
		return first <= last ? (uint32_t)(last - first + 1) : 0;
	return first == last ? c->nranks - 1 : c->nranks; /* allgather: all but a lone source */
}

/* A new chunk of r (bytes [off, off + len)) in slot s: true when its result
 * comes from the group into its landing place (assembly set up), false
 * when a unicast receive must be posted (not a multicast result, or this
 * rank is not in the group: then a NACK asks for it). */
static bool mc_expect(struct client *c, struct client_agg *a, struct client_slot *s,
		      struct client_req *r, size_t off, size_t len)
{
	s->mc_exp = s->mc_done = s->nack_due = s->nacked = 0;
	s->mc_ev = 0;
	if (!a->mc || !slot_result_len(s) || chunk_takers(c, r, off, len) < 2)
		return false;
	s->mc_exp = 1;
	s->mc_t0 = sc_now_ns();
	uint32_t full = (uint32_t)(slot_result_len(s) + (a->sealed ? SC_SEAL_TAG : 0));
	void *desc;
	uint8_t *dst = slot_dst(c, (size_t)(a - c->aggs), (uint32_t)(s - a->slots), r, off, &desc);
	if (a->mc_in && !sc_mc_rx_expect(&a->mc_rx, s->chunk, full, wire_imm_plain(s->imm), dst))
		return true;
	s->nack_due = 1;
	return false;
}

static void mc_nack(struct client *c, struct client_agg *a, uint32_t si)
{
	struct client_slot *s = &a->slots[si];
	struct sc_mc_nack m = { .job = a->job_handle, .rank = c->rank, .chunk = s->chunk };
	uint8_t buf[SC_MC_NACK_MAX + SC_SEAL_TAG];
	uint32_t full = (uint32_t)(slot_result_len(s) + (a->sealed ? SC_SEAL_TAG : 0));

	m.nranges = a->mc_in ? (uint8_t)sc_mc_rx_missing(&a->mc_rx, s->chunk, m.r, a->mc_nack_ranges) : 0;
	if (!m.nranges) { /* not in the group, or nothing of it assembled */
		m.nranges = 1;
		m.r[0] = (struct sc_mc_range){ 0, full };
	}
	if (!s->recv_posted) { /* the unicast answer lands where the datagrams would */
		size_t ai = (size_t)(a - c->aggs);
		int rc = post_result_slot(c, ai, si, &c->reqs[s->req], s->off);
		if (rc == -FI_EAGAIN) {
			s->nack_due = 1;
			return;
		}
		if (rc) {
			client_agg_fail(c, a, -EIO, "%s: posting the result receive of seq %u: %s", a->name,
					s->seq, fi_strerror(-rc));
			return;
		}
		s->recv_posted = 1;
	}
	SC_DBG("%s: NACK chunk %llu after %.1f ms (evidence %.1f ms ago, %s); tick %llu, hi %llu, %u ranges",
		 a->name, (unsigned long long)s->chunk, (sc_now_ns() - s->mc_t0) / 1e6,
		 s->mc_ev ? (sc_now_ns() - s->mc_ev) / 1e6 : -1.0, a->mc_in ? "in" : "out",
		 (unsigned long long)a->mc_rx.tick, (unsigned long long)a->mc_hi, m.nranges);
	int n = sc_mc_nack_encode(&m, buf, sizeof(buf));
	uint32_t imm = wire_imm_with_mode(s->imm, WIRE_MODE_NACK);
	if (n > 0 && a->sealed) {
		if (sc_seal(&a->seal, SC_SEAL_NACK, (uint16_t)c->rank, s->chunk, imm, buf, (size_t)n, buf)) {
			client_agg_fail(c, a, -EIO, "%s: sealing a NACK failed (OpenSSL)", a->name);
			return;
		}
		n += SC_SEAL_TAG;
	}
	if (n < 0)
		return;
	int rc = fabric_tinject(a->ep, buf, (size_t)n, a->fi_addr,
				wire_tag_make(WIRE_TAG_NACK, a->job_handle, c->rank, si), imm);
	if (rc == -FI_EAGAIN) {
		s->nack_due = 1;
		return;
	}
	if (rc) {
		client_agg_fail(c, a, -EIO, "%s: sending a NACK for chunk seq %u: %s", a->name, s->seq,
				fi_strerror(-rc));
		return;
	}
	s->nack_due = 0;
	s->nacked = 1;
	a->mc_nacks++;
}

struct mc_ctx {
	struct client *c;
	size_t ai;
};

/* The group's datagrams completed chunk. */
static void mc_done(void *arg, uint64_t chunk)
{
	struct mc_ctx *x = arg;
	struct client *c = x->c;
	struct client_agg *a = &c->aggs[x->ai];
	uint32_t si = (uint32_t)(chunk % a->window);
	struct client_slot *s = &a->slots[si];

	if (s->req < 0 || s->chunk != chunk || !s->mc_exp || s->mc_done)
		return; /* cannot happen: only expected chunks complete */
	if (!result_in(c, a, x->ai, si, &c->reqs[s->req])) {
		s->nack_due = !s->nacked; /* did not open: the unicast one will */
		return;
	}
	s->mc_done = 1;
	s->nack_due = 0;
	a->mc_by_group++;
	if (chunk + 1 > a->mc_hi)
		a->mc_hi = chunk + 1;
	/* NACKed: its unicast answer still comes into the receive */
	slot_release_maybe(c, a, s);
}

/* Datagrams in, and NACKs due. */
static void mc_poll(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];
	uint64_t now = sc_now_ns();

	if (a->mc_in) {
		struct mc_ctx x = { c, ai };
		int n = sc_mc_receiver_poll(&a->mc_sock, &a->mc_rx, 8192, mc_done, &x); /* what is there */
		if (n < 0) {
			snprintf(a->mc_why, sizeof(a->mc_why), "reading the group failed: %s", strerror(-n));
			SC_WARN("%s: %s; results by unicast from now on", a->name, a->mc_why);
			client_mc_leave(a);
		}
	}
	if (!a->inflight || a->st == AGG_DEAD)
		return;
	for (uint32_t si = 0; si < a->window && a->st != AGG_DEAD; si++) {
		struct client_slot *s = &a->slots[si];
		if (s->req < 0 || !s->mc_exp || s->mc_done || s->nacked || s->send_pending)
			continue;
		bool due = s->nack_due || !a->mc_in;
		if (!due) {
			/* Evidence of loss (a gap, or a later result began or
			 * completed) held for mc_nack_ns: reordering is over by
			 * then. Without evidence, only a long silence: the result
			 * may still queue behind the other aggregators' on this
			 * node's link, or wait for a slow rank. */
			/* (nothing from the group yet at all: the switch may not
			 * have learnt the join, so no evidence would ever come) */
			bool lost = sc_mc_rx_gap(&a->mc_rx, s->chunk) || a->mc_hi > s->chunk + 1 ||
				    !a->mc_rx.tick;
			if (!lost)
				s->mc_ev = 0;
			else if (!s->mc_ev)
				s->mc_ev = now;
			due = (lost && now - s->mc_ev > c->mc_nack_ns) || now - s->mc_t0 > 100 * c->mc_nack_ns;
		}
		if (due)
			mc_nack(c, a, si);
	}
}

void client_mc_leave(struct client_agg *a)
{
	if (!a->mc_in)
		return;
	sc_mc_receiver_close(&a->mc_sock);
	a->mc_in = false;
}

void client_mc_join(struct client *c, size_t ai, const struct wire_join_ok *o)
{
	struct client_agg *a = &c->aggs[ai];
	size_t tag = a->sealed ? SC_SEAL_TAG : 0;
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	char ifa[INET_ADDRSTRLEN] = "";
	struct sockaddr_in g = { .sin_family = AF_INET, .sin_port = htons(o->mc_port),
				 .sin_addr.s_addr = htonl(o->mc_group) };
	enum sc_mc_via via = o->flags & WIRE_OK_F_MCAST_IB ? SC_MC_VIA_IB : SC_MC_VIA_IP;

	a->mc = true;
	if (a->ep->inject_size < 24 + 8 + tag) {
		client_agg_fail(c, a, -EPROTO, "%s multicasts results, and a NACK (%zu bytes) is more than "
				"%s injects (%zu)", a->name, 24 + 8 + tag, fabric_provider(a->ep),
				a->ep->inject_size);
		return;
	}
	size_t nr = (a->ep->inject_size - 24 - tag) / 8;
	a->mc_nack_ranges = nr < SC_MC_NACK_RANGES ? (uint32_t)nr : SC_MC_NACK_RANGES;
	if (c->multicast == CLIENT_MC_NOJOIN) {
		snprintf(a->mc_why, sizeof(a->mc_why), "told not to join (CLIENT_MC_NOJOIN)");
		return;
	}
	/* the interface this rank reaches the aggregator from */
	if (getsockname(a->fd, (struct sockaddr *)&me, &ml) || me.ss_family != AF_INET ||
	    !inet_ntop(AF_INET, &((struct sockaddr_in *)&me)->sin_addr, ifa, sizeof(ifa))) {
		snprintf(a->mc_why, sizeof(a->mc_why), "the control connection is not IPv4");
	} else if (sc_mc_rx_init(&a->mc_rx, o->job_handle, o->mc_key, o->window, o->mc_payload,
				 o->chunk_bytes + tag)) {
		snprintf(a->mc_why, sizeof(a->mc_why), "out of memory for the group's assembly");
	} else if (sc_mc_receiver_open(&a->mc_sock, via, &g, ifa, o->mc_payload, a->mc_why,
				       sizeof(a->mc_why)) == 0) {
		a->mc_rx.drop_permille = c->mc_drop_permille;
		a->mc_rx.seed ^= 0x9e3779b97f4a7c15ull * (c->rank + 1); /* ranks drop apart */
		a->mc_in = true;
		a->mc_why[0] = '\0';
		return;
	} else {
		sc_mc_rx_fini(&a->mc_rx);
	}
	SC_WARN("%s: cannot take results from multicast group (%s); this rank asks for each by unicast",
		a->name, a->mc_why);
}

int client_data_poll(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];
	struct fabric_cqe ev[CLIENT_CQ_BATCH];

	for (int round = 0; round < 8 && a->ep; round++) {
		int n = fabric_cq_poll(a->ep, ev, CLIENT_CQ_BATCH);
		if (n < 0) {
			client_agg_fail(c, a, -EIO, "%s: completion queue (%s) failed: %s", a->name,
					fabric_provider(a->ep), fi_strerror(-n));
			return n;
		}
		for (int i = 0; i < n; i++)
			handle_cqe(c, ai, &ev[i]);
		if (n < CLIENT_CQ_BATCH)
			break;
	}
	if (a->mc)
		mc_poll(c, ai);
	return 0;
}

/* ---- requests ---- */

int client_start(struct client *c, const struct client_blocks *b, const void *send, void *recv,
		 size_t count, enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
		 uint64_t aggs, struct client_req **out)
{
	uint64_t all = c->naggs >= 64 ? ~0ull : (1ull << c->naggs) - 1;
	struct client_req *r;

	if (!aggs)
		aggs = all;
	if ((unsigned)t >= SC_DTYPE_COUNT || (unsigned)op >= SC_OP_COUNT ||
	    !(c->dtype_mask & (1u << t)) || (count && (!send || !recv)) || (aggs & ~all) ||
	    (b && ((unsigned)b->kind > CLIENT_ALLGATHER || (b->kind != CLIENT_ALLREDUCE && !b->block))))
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
	r->blocks = b ? *b : (struct client_blocks){ .kind = CLIENT_ALLREDUCE };
	r->aggs = aggs;
	r->chunks_left = 0;
	r->give_bytes = r->take_bytes = 0;
	r->inflight = 0;
	r->err = 0;
	r->fail_ns = 0;
	const uint8_t *sb = send;
	uint8_t *rb = recv;
	size_t bytes = count * r->esize;
	r->inplace = count && sb < rb + bytes && rb < sb + bytes;
	size_t m = (size_t)__builtin_popcountll(aggs), k = 0;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		struct req_agg *ra = &r->ra[ai];
		size_t first = 0, n = 0;
		if (aggs >> ai & 1)
			client_shard(count, r->esize, m, k++, &first, &n);
		ra->first = ra->off = first * r->esize;
		ra->end = (first + n) * r->esize;
		ra->next = -1;
		ra->c0 = a->next_assign;
		ra->nchunks = 0;
		ra->chunk = 0;
		if (!n)
			continue;
		/* A sealed message carries the tag too: the eager cut leaves room. */
		uint32_t eager = c->eager_bytes > SC_SEAL_TAG && a->sealed ? c->eager_bytes - SC_SEAL_TAG
									    : c->eager_bytes;
		ra->chunk = client_chunk_for(n * r->esize, r->esize, a->chunk_bytes, a->window, eager);
		ra->nchunks = (n * r->esize + ra->chunk - 1) / ra->chunk;
		a->next_assign += ra->nchunks;
		r->chunks_left += ra->nchunks;
		for (uint64_t q = 0; q < ra->nchunks; q++) {
			size_t off, len;
			client_req_chunk_range(r, ai, ra->c0 + q, &off, &len);
			enum client_role role = client_role_of(c, r, off, len);
			r->give_bytes += role == CLIENT_ROLE_TAKE ? 0 : len;
			r->take_bytes += role_gives_only(role) ? 0 : len;
		}
		if (a->st == AGG_DEAD) {
			ra->off = ra->end; /* failover: the caller repairs these */
			continue;
		}
		q_push(c, a, r, ai);
	}
	for (size_t ai = 0; ai < c->naggs && !c->broken; ai++)
		if (r->ra[ai].off != r->ra[ai].end)
			client_data_issue(c, ai);
	*out = r;
	return 0;
}

int client_allreduce_on(struct client *c, const void *send, void *recv, size_t count,
			enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
			uint64_t aggs, struct client_req **out)
{
	return client_start(c, NULL, send, recv, count, t, op, send_desc, recv_desc, aggs, out);
}

int client_allreduce(struct client *c, const void *send, void *recv, size_t count,
		     enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
		     struct client_req **out)
{
	return client_allreduce_on(c, send, recv, count, t, op, send_desc, recv_desc, 0, out);
}

/* ---- failover ---- */

void client_data_retain(struct client *c, struct client_req *r)
{
	if (!c->retention)
		return;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		const struct req_agg *ra = &r->ra[ai];
		if (!ra->nchunks || !a->window)
			continue;
		/* Only results among the last `window` that arrived here can be
		 * missing elsewhere (client.h, "Failover"). */
		uint64_t from = a->hi > a->window ? a->hi - a->window : 0;
		uint64_t to = ra->c0 + ra->nchunks < a->hi ? ra->c0 + ra->nchunks : a->hi;
		for (uint64_t ch = from > ra->c0 ? from : ra->c0; ch < to; ch++) {
			size_t off, len;
			client_req_chunk_range(r, ai, ch, &off, &len);
			uint32_t k = (uint32_t)(ch % a->window);
			enum client_role role = client_role_of(c, r, off, len);
			/* A GIVE or SOURCE keeps what it sent: a repair may need
			 * it (the contribution, or the result it is). */
			memcpy(client_slot_buf(c->retention, c, ai, k),
			       (role_gives_only(role) ? r->send : r->recv) + off, len);
			a->ret[k].chunk = ch;
			a->ret[k].len = len;
			a->ret[k].imm = wire_imm_make(r->t, r->op, 0);
			a->ret[k].role = (uint8_t)role;
		}
	}
}

uint64_t client_agg_lo(const struct client *c, size_t agg)
{
	const struct client_agg *a = &c->aggs[agg];
	uint64_t lo = a->next_c;

	for (uint32_t si = 0; si < a->window; si++) {
		const struct client_slot *s = &a->slots[si];
		if (s->chunk != CLIENT_NO_CHUNK && !s->got && s->chunk < lo)
			lo = s->chunk;
	}
	return lo;
}

int client_chunk_info(const struct client *c, size_t agg, uint64_t chunk, struct client_chunk *out)
{
	const struct client_agg *a = &c->aggs[agg];
	const struct client_slot *s = a->window ? &a->slots[chunk % a->window] : NULL;

	*out = (struct client_chunk){ .role = CLIENT_ROLE_ALL };
	if (s && s->chunk == chunk)
		out->got = s->got;
	else
		out->got = chunk < client_agg_lo(c, agg);
	for (uint32_t i = 0; i < c->max_requests; i++) {
		struct client_req *r = &c->reqs[i];
		const struct req_agg *ra = &r->ra[agg];
		if (r->in_use && chunk >= ra->c0 && chunk - ra->c0 < ra->nchunks) {
			client_req_chunk_range(r, agg, chunk, &out->off, &out->len);
			out->req = r;
			out->role = client_role_of(c, r, out->off, out->len);
			out->give = out->role == CLIENT_ROLE_TAKE ? NULL : r->send + out->off;
			out->t = r->t;
			out->op = r->op;
			return 0;
		}
	}
	if (a->ret && a->window && a->ret[chunk % a->window].chunk == chunk) {
		const struct client_retained *k = &a->ret[chunk % a->window];
		out->role = (enum client_role)k->role;
		out->len = k->len;
		out->t = (enum sc_dtype)wire_imm_dtype(k->imm);
		out->op = (enum sc_op)wire_imm_op(k->imm);
		if (role_gives_only(k->role))
			out->give = client_slot_buf(c->retention, c, agg, (uint32_t)(chunk % a->window));
		return 0;
	}
	return -ENOENT;
}

/* client_chunk_held from what client_chunk_info said (rc its return). */
static bool chunk_held(const struct client_chunk *k, int rc)
{
	if (rc)
		return k->got;
	/* A source holds its data from the start, but reports it only once
	 * its empty result came: then every rank has sent the chunk, so a
	 * rank that lacks it has its request in flight (failover.c). */
	if (k->role == CLIENT_ROLE_SOURCE)
		return k->got && k->give != NULL;
	return k->role != CLIENT_ROLE_GIVE && k->got;
}

bool client_chunk_held(const struct client *c, size_t agg, uint64_t chunk)
{
	struct client_chunk k;
	int rc = client_chunk_info(c, agg, chunk, &k);

	return chunk_held(&k, rc);
}

bool client_chunk_lacks(const struct client *c, size_t agg, uint64_t chunk)
{
	struct client_chunk k;

	client_chunk_info(c, agg, chunk, &k);
	return !role_gives_only(k.role) && !k.got;
}

void client_req_bytes(const struct client_req *r, size_t *give, size_t *take)
{
	*give = r->give_bytes;
	*take = r->take_bytes;
}

void client_req_chunks(const struct client_req *r, size_t agg, uint64_t *c0, uint64_t *n)
{
	*c0 = r->ra[agg].c0;
	*n = r->ra[agg].nchunks;
}

void client_req_chunk_range(const struct client_req *r, size_t agg, uint64_t chunk, size_t *off,
			    size_t *len)
{
	const struct req_agg *ra = &r->ra[agg];

	*off = ra->first + (size_t)(chunk - ra->c0) * ra->chunk;
	*len = ra->end - *off < ra->chunk ? ra->end - *off : ra->chunk;
}

void client_req_bufs(const struct client_req *r, const void **send, void **recv)
{
	*send = r->send;
	*recv = r->recv;
}

const void *client_chunk_data(const struct client *c, size_t agg, uint64_t chunk, size_t *len)
{
	const struct client_agg *a = &c->aggs[agg];
	struct client_chunk k;

	int rc = client_chunk_info(c, agg, chunk, &k);

	if (rc || !chunk_held(&k, rc))
		return NULL;
	*len = k.len;
	if (k.role == CLIENT_ROLE_SOURCE)
		return k.give;
	if (k.req)
		return k.req->recv + k.off;
	return client_slot_buf(c->retention, c, agg, (uint32_t)(chunk % a->window));
}

void client_agg_dump(const struct client *c, size_t agg, int level)
{
	const struct client_agg *a = &c->aggs[agg];
	uint64_t now = sc_now_ns();

	SC_LOG_AT(level, "%s: state %d, next chunk %" PRIu64 " (assigned %" PRIu64 "), hi %" PRIu64
		  ", %u busy, pending slot %d, queue head %d, last completion %.1f s ago", a->name,
		  (int)a->st, a->next_c, a->next_assign, a->hi, a->inflight, a->pending_slot, a->q_head,
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

size_t client_req_left(const struct client_req *r)
{
	return r->chunks_left;
}

void client_chunk_done(struct client *c, struct client_req *r, size_t agg, uint64_t chunk)
{
	(void)c;
	(void)agg;
	(void)chunk;
	if (r->chunks_left)
		r->chunks_left--;
}

void *client_retention(const struct client *c, size_t *len)
{
	*len = c->retention ? c->region_bytes : 0;
	return c->retention;
}
