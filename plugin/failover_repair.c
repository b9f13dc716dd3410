/* Failover's repairs: what the nodes decided (failover_plan.c) carried out
 * over the ring. Sits after the agreement (failover.c): the plan reads this
 * node's state through a view of the client library (view_*), and each of
 * its decisions becomes an item here, driven from test (collnet_req.c,
 * through failover_step) until done:
 *   - a copy: a chunk's result walks the ring from its lowest holder; a
 *     node that lacks it keeps it in its request, one that holds it
 *     receives it into the sink, one that wants none of it (a reduce-scatter
 *     non-owner) passes it on through a buffer of its own;
 *   - a redo: a ring allreduce recomputes an allreduce's run of chunks from
 *     its send data, or one chunk of a window op from every node's
 *     contribution (its send data, or the retention copy once its request
 *     completed; zeros from an allgather's receivers).
 * When an item ends, its chunks end in their request (client_chunk_done)
 * and the request, held until then, may complete. */
#include "collnet.h"

#include <errno.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tags.h"

enum { ITEM_COPY = 1, ITEM_REDO };

struct fo_item {
	SLIST_ENTRY(fo_item) link; /* on cc->fo.items, newest first */
	int kind;
	size_t agg;
	struct coll_req *req; /* held until the item ends (NULL: none here) */
	uint64_t c0, n;       /* chunks it covers */
	size_t bytes;         /* bytes it writes here (0: passes a copy on) */
	bool settle;          /* ends the chunks of req here (client_chunk_done) */
	/* copy: from the holder along the ring */
	bool lack;            /* this node lacks the chunk */
	bool rx_need, tx_need, tx_after_rx;
	struct ring_xfer rx, tx;
	void *rx_buf, *rx_desc;
	const void *tx_buf;
	void *tx_desc;
	size_t len;
	/* redo: a ring allreduce of the run's bytes */
	struct ring_op op;
	struct fabric_buf tmp; /* a copy passed on; a redo's staging */
	/* a window op's chunk, redone alone (tmp: contribution, then sum) */
	void *take;           /* where the sum goes here, NULL: dropped */
};

/* ---- the request a chunk belongs to, here ---- */

static struct coll_req *req_of_chunk(struct coll_comm *cc, size_t agg, uint64_t chunk)
{
	for (int i = 0; i < COLL_REQS; i++) {
		struct coll_req *r = &cc->reqs[i];
		uint64_t c0, n;
		if (!r->used || !r->creq || !(r->aggs >> agg & 1))
			continue;
		client_req_chunks(r->creq, agg, &c0, &n);
		if (chunk >= c0 && chunk - c0 < n)
			return r;
	}
	return NULL;
}

/* ---- items ---- */

static void item_free(struct fo_item *it)
{
	fabric_buf_free(&it->tmp);
	free(it);
}

static void item_link(struct failover *fo, struct fo_item *it)
{
	SLIST_INSERT_HEAD(&fo->items, it, link);
	if (it->req)
		it->req->repairs++;
}

/* A registered buffer of len bytes for an item (it->tmp). */
static int item_tmp(struct coll_comm *cc, struct fo_item *it, size_t len)
{
	return fabric_buf_alloc(cc->f, len, &it->tmp) ? -ENOMEM : 0;
}

static struct coll_req *act_req(struct coll_comm *cc, const struct fo_act *a)
{
	return a->slot >= 0 ? &cc->reqs[a->slot] : NULL;
}

/* The copy of chunk a->c of aggregator a->agg along the ring (fo_plan_copy
 * decided this node's part). */
static int copy_item(struct coll_comm *cc, const struct fo_act *a)
{
	struct failover *fo = &cc->fo;
	const struct fo_dead *d = &fo->deads[a->agg];
	struct coll_req *r = act_req(cc, a);
	struct fo_item *it = calloc(1, sizeof(*it));
	const void *mine = NULL;
	size_t len = 0;

	if (!it)
		return -ENOMEM;
	it->kind = ITEM_COPY;
	it->agg = a->agg;
	it->c0 = a->c;
	it->n = 1;
	if (a->here == FO_COPY_SENDS) {
		mine = client_chunk_data(cc->client, a->agg, a->c, &len);
	} else if (a->here == FO_COPY_TAKES) {
		size_t off;
		client_req_chunk_range(r->creq, a->agg, a->c, &off, &len);
		it->lack = true;
		it->rx_buf = (char *)r->recv + off;
		it->rx_desc = r->rm ? r->rm->ring.desc : NULL;
		it->bytes = len;
	} else { /* passes it on: the length comes with it */
		if (item_tmp(cc, it, fo->sink_bytes)) {
			free(it);
			return -ENOMEM;
		}
		it->rx_buf = it->tmp.buf;
		it->rx_desc = it->tmp.mr.desc;
	}
	it->len = len;
	it->req = a->keep_req ? r : NULL;
	it->settle = a->settle;
	it->rx_need = a->rx;
	if (a->rx && a->here == FO_COPY_SENDS) {
		it->rx_buf = fo->sink.buf;
		it->rx_desc = fo->sink.mr.desc;
	}
	it->tx_need = a->tx;
	it->tx_after_rx = a->tx_after_rx;
	if (a->tx && a->here == FO_COPY_SENDS) {
		it->tx_buf = mine;
		it->tx_desc = a->from_recv ? (r->rm ? r->rm->ring.desc : NULL)
			    : a->from_send ? (r->sm ? r->sm->ring.desc : NULL) : fo->ret_mr.desc;
	} else if (a->tx) {
		it->tx_buf = it->rx_buf;
		it->tx_desc = it->rx_desc;
	}
	SC_DBG("collnet rank %u: copy chunk %" PRIu64 " of aggregator %zu (holder rank %" PRId64
	       ", lowest lacking rank %" PRId64 "): %s here, %zu bytes, request %s%s%s", cc->rank, a->c,
	       a->agg, a->root, d->lacker[a->k], a->here == FO_COPY_SENDS ? "held"
	       : a->here == FO_COPY_TAKES ? "lacking" : "not wanted", len, r ? "in flight" : "gone",
	       it->rx_need ? ", receives" : "", it->tx_need ? ", passes on" : "");
	item_link(fo, it);
	return 0;
}

/* Where a redone chunk's sum lies in it->tmp (after the contribution). */
static size_t redo_sum_off(size_t len)
{
	return (len + 63) & ~(size_t)63;
}

/* Chunk a->c of a window op on aggregator a->agg, which no node holds: a
 * ring allreduce of every node's contribution (client_chunk_info: the send
 * data or its retention copy; zeros from a TAKE) in it->tmp, its sum
 * copied to the request's receive buffer where this node wants it. */
static int redo_chunk_item(struct coll_comm *cc, const struct fo_act *a)
{
	struct failover *fo = &cc->fo;
	struct coll_req *r = act_req(cc, a);
	struct client_chunk k;

	if (client_chunk_info(cc->client, a->agg, a->c, &k))
		return -EPROTO;
	struct fo_item *it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	size_t es = sc_dtype_size(k.t), len = k.len, half = redo_sum_off(len);
	if (item_tmp(cc, it, 2 * half)) {
		free(it);
		return -ENOMEM;
	}
	char *tmp = it->tmp.buf;
	if (a->zero)
		memset(tmp, 0, len);
	else
		memcpy(tmp, k.give, len);
	it->kind = ITEM_REDO;
	it->agg = a->agg;
	it->c0 = a->c;
	it->n = 1;
	it->len = len;
	it->bytes = len;
	it->req = r;
	it->settle = a->settle;
	if (a->take)
		it->take = (char *)r->recv + k.off;
	ring_op_start_tagged(&cc->ring, &it->op, sc_tag_redo_chunk((uint32_t)a->agg, a->c),
			     SC_TAG_FO_STEP_SHIFT, tmp, tmp + half, len / es, k.t, k.op, it->tmp.mr.desc,
			     it->tmp.mr.desc, NULL, NULL);
	SC_DBG("collnet rank %u: redo window chunk %" PRIu64 " of aggregator %zu alone (%zu bytes, role "
	       "%d, request %s%s)", cc->rank, a->c, a->agg, len, (int)k.role, r ? "in flight" : "gone",
	       it->take ? ", takes the sum" : "");
	item_link(fo, it);
	return 0;
}

/* The ring allreduce of chunks [a->c, + a->n) of the request in a->slot on
 * aggregator a->agg. */
static int redo_item(struct coll_comm *cc, const struct fo_act *a)
{
	struct failover *fo = &cc->fo;
	struct coll_req *r = act_req(cc, a);
	struct fo_item *it = calloc(1, sizeof(*it));
	size_t off0, len0, offn, lenn;

	if (!it)
		return -ENOMEM;
	client_req_chunk_range(r->creq, a->agg, a->c, &off0, &len0);
	client_req_chunk_range(r->creq, a->agg, a->c + a->n - 1, &offn, &lenn);
	size_t bytes = offn + lenn - off0, count = bytes / r->es;
	const char *send = (const char *)r->send + off0;
	char *recv = (char *)r->recv + off0;
	it->kind = ITEM_REDO;
	it->agg = a->agg;
	it->req = r;
	it->settle = a->settle;
	it->c0 = a->c;
	it->n = a->n;
	it->bytes = bytes;
	if (send < recv + bytes && recv < send + bytes) {
		size_t tb = ring_op_tmp_bytes(&cc->ring, count, (enum sc_dtype)r->dtype, SC_TAG_FO_STEP_SHIFT);
		if (tb && item_tmp(cc, it, tb)) {
			free(it);
			return -ENOMEM;
		}
	}
	ring_op_start_tagged(&cc->ring, &it->op, sc_tag_redo(r->seq, (uint32_t)a->agg, a->run),
			     SC_TAG_FO_STEP_SHIFT, send, recv, count, (enum sc_dtype)r->dtype,
			     (enum sc_op)r->op, r->sm ? r->sm->ring.desc : NULL,
			     r->rm ? r->rm->ring.desc : NULL, it->tmp.buf, it->tmp.mr.desc);
	SC_DBG("collnet rank %u: redo chunks %" PRIu64 "..%" PRIu64 " of aggregator %zu (request %" PRIu64
	       " seq %u run %u): bytes %zu..%zu of the request%s", cc->rank, a->c, a->c + a->n - 1,
	       a->agg, r->idx, r->seq, a->run, off0, off0 + bytes, send == recv ? ", in place" : "");
	item_link(fo, it);
	return 0;
}

static void item_done(struct coll_comm *cc, struct fo_item *it)
{
	struct failover *fo = &cc->fo;
	struct coll_req *r = it->req;

	if (it->take)
		memcpy(it->take, (char *)it->tmp.buf + redo_sum_off(it->len), it->len);
	if (r && r->creq && it->settle)
		for (uint64_t c = it->c0; c < it->c0 + it->n; c++)
			client_chunk_done(cc->client, r->creq, it->agg, c);
	if (r) {
		r->redone_bytes += it->bytes;
		if (r->repairs)
			r->repairs--;
	}
	if (it->kind == ITEM_REDO)
		fo->redone_bytes += it->bytes;
	else
		fo->copied_bytes += it->bytes;
}

static int xfer_post(struct coll_comm *cc, struct ring_xfer *x, bool send, void *buf, size_t len,
		     void *desc, uint64_t tag)
{
	int rc = ring_post(&cc->ring, x, send, buf, len, desc, tag);

	return rc == -FI_EAGAIN ? 0 : rc; /* not posted: x stays idle, retried next pass */
}

/* 1: done, 0: in progress, < 0: failed. */
static int item_progress(struct coll_comm *cc, struct fo_item *it)
{
	struct failover *fo = &cc->fo;
	int rc;

	if (it->kind == ITEM_REDO)
		return ring_op_progress(&it->op);
	uint64_t tag = sc_tag_copy((uint32_t)it->agg, (uint32_t)(it->c0 - fo->deads[it->agg].lo));
	if (it->rx_need && it->rx.state == RING_X_IDLE) {
		size_t cap = it->lack ? it->len : fo->sink_bytes;
		rc = xfer_post(cc, &it->rx, false, it->rx_buf, cap, it->rx_desc, tag);
		if (rc)
			return rc;
	}
	bool rx_ok = !it->rx_need || (it->rx.state == RING_X_DONE && !it->rx.err);
	if (it->rx_need && it->rx.state == RING_X_DONE && it->rx.err)
		return it->rx.err;
	if (it->rx_need && !it->lack && it->rx_buf == it->tmp.buf && rx_ok)
		it->len = it->rx.len; /* passed on as it came */
	if (it->rx_need && it->lack && rx_ok && it->rx.len != it->len) {
		SC_WARN("collnet: the copy of chunk %" PRIu64 " of aggregator %zu came with %zu bytes, "
			"expected %zu", it->c0, it->agg, it->rx.len, it->len);
		return -EPROTO;
	}
	if (it->tx_need && it->tx.state == RING_X_IDLE && (!it->tx_after_rx || rx_ok)) {
		rc = xfer_post(cc, &it->tx, true, (void *)it->tx_buf, it->len, it->tx_desc, tag);
		if (rc)
			return rc;
	}
	if (it->tx_need && it->tx.state == RING_X_DONE && it->tx.err)
		return it->tx.err;
	bool tx_ok = !it->tx_need || it->tx.state == RING_X_DONE;
	return rx_ok && tx_ok;
}

void failover_repair_progress(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	struct fo_item *it, *next;

	for (it = SLIST_FIRST(&fo->items); it && !fo->err; it = next) {
		next = SLIST_NEXT(it, link);
		int rc = item_progress(cc, it);
		if (rc < 0) {
			failover_fail(cc, rc, it->kind == ITEM_REDO ? "recomputing chunks over the ring"
								    : "copying a result along the ring");
			return;
		}
		if (rc == 0)
			continue;
		item_done(cc, it);
		/* a walk from the head: the items are a window's worth at most */
		SLIST_REMOVE(&fo->items, it, fo_item, link);
		item_free(it);
	}
}

/* ---- the plan's view of this node: the client library's state ---- */

static void view_chunk(void *ctx, size_t ai, uint64_t c, struct fo_chunk *out)
{
	struct coll_comm *cc = ctx;
	struct client_chunk info;
	struct coll_req *r = req_of_chunk(cc, ai, c);

	memset(out, 0, sizeof(*out));
	out->known = client_chunk_info(cc->client, ai, c, &info) == 0;
	out->held = client_chunk_held(cc->client, ai, c);
	out->lacks = client_chunk_lacks(cc->client, ai, c);
	out->slot = r ? (int)(r - cc->reqs) : -1;
	if (r) {
		size_t off;
		client_req_chunk_range(r->creq, ai, c, &off, &out->range_len);
	}
	if (out->known) {
		out->got = info.got;
		out->issued = info.req != NULL;
		out->gives = info.give != NULL;
		out->role = info.role;
		out->len = info.len;
	}
	if (out->held) {
		size_t len;
		const char *mine = client_chunk_data(cc->client, ai, c, &len);
		out->retained = mine != NULL;
		out->in_recv = mine && r && mine >= (const char *)r->recv &&
			       mine < (const char *)r->recv + r->count * r->es;
		out->in_send = mine && out->known && (const void *)mine == info.give;
	}
}

static bool view_req(void *ctx, uint32_t slot, size_t ai, bool *window, uint64_t *c0, uint64_t *n)
{
	struct coll_comm *cc = ctx;
	struct coll_req *r = &cc->reqs[slot];

	if (!r->used || !r->creq || !(r->aggs >> ai & 1))
		return false;
	*window = r->coll != COLL_ALLREDUCE;
	client_req_chunks(r->creq, ai, c0, n);
	return true;
}

static size_t view_span(void *ctx, uint32_t slot, size_t ai, uint64_t c0, uint64_t n)
{
	struct coll_comm *cc = ctx;
	struct coll_req *r = &cc->reqs[slot];
	size_t off0, len0, offn, lenn;

	client_req_chunk_range(r->creq, ai, c0, &off0, &len0);
	client_req_chunk_range(r->creq, ai, c0 + n - 1, &offn, &lenn);
	return offn + lenn - off0;
}

static int view_act(void *ctx, const struct fo_act *a)
{
	struct coll_comm *cc = ctx;

	switch (a->kind) {
	case FO_ACT_COPY:
		return copy_item(cc, a);
	case FO_ACT_END:
		client_chunk_done(cc->client, act_req(cc, a)->creq, a->agg, a->c);
		return 0;
	case FO_ACT_REDO_RUN:
		return redo_item(cc, a);
	case FO_ACT_REDO_CHUNK:
		return redo_chunk_item(cc, a);
	}
	return -EINVAL;
}

static void view_refuse(void *ctx, size_t ai, uint64_t c, const char *what)
{
	(void)ctx;
	SC_WARN("collnet: chunk %" PRIu64 " of aggregator %zu %s", c, ai, what);
}

static struct fo_view view_of(struct coll_comm *cc)
{
	return (struct fo_view){ .ctx = cc, .rank = cc->rank, .nranks = cc->nranks,
				 .naggs = cc->naggs, .nslots = COLL_REQS, .chunk = view_chunk,
				 .req = view_req, .span = view_span, .act = view_act,
				 .refuse = view_refuse };
}

int failover_repair_plan(struct coll_comm *cc, uint64_t set, struct fo_counts *n)
{
	struct fo_view v = view_of(cc);

	return fo_plan_decide(&v, cc->fo.deads, set, n);
}

int failover_repair_req(struct coll_comm *cc, struct coll_req *r, struct fo_counts *n)
{
	struct fo_view v = view_of(cc);

	return fo_plan_req(&v, cc->fo.deads, r->aggs & cc->fo.dead, (uint32_t)(r - cc->reqs), n);
}

/* ---- teardown and diagnostics ---- */

void failover_repair_cancel(struct coll_comm *cc)
{
	struct fo_item *it;

	SLIST_FOREACH(it, &cc->fo.items, link) {
		if (it->kind == ITEM_REDO) {
			ring_op_abort(&it->op);
		} else {
			if (it->rx.state == RING_X_POSTED)
				fabric_cancel(cc->f, &it->rx.fop);
		}
	}
}

bool failover_repair_posted(const struct coll_comm *cc)
{
	const struct fo_item *it;
	bool busy = false;

	SLIST_FOREACH(it, &cc->fo.items, link)
		busy |= it->kind == ITEM_COPY &&
			(it->rx.state == RING_X_POSTED || it->tx.state == RING_X_POSTED);
	return busy;
}

void failover_repair_free(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	while (!SLIST_EMPTY(&fo->items)) {
		struct fo_item *it = SLIST_FIRST(&fo->items);
		SLIST_REMOVE_HEAD(&fo->items, link);
		item_free(it);
	}
}

void failover_repair_forget(struct coll_comm *cc, const struct coll_req *r)
{
	struct fo_item *it;

	SLIST_FOREACH(it, &cc->fo.items, link)
		if (it->req == r)
			it->req = NULL;
}

void failover_repair_dump(const struct coll_comm *cc, int level)
{
	const struct fo_item *it;

	SLIST_FOREACH(it, &cc->fo.items, link) {
		if (it->kind == ITEM_REDO)
			SC_LOG_AT(level, "  redo agg %zu chunks %" PRIu64 "+%" PRIu64 " request %s: ring "
				  "columns %zu/%zu done, next %zu, err %d", it->agg, it->c0, it->n,
				  it->req ? "held" : "gone", it->op.cols_done, it->op.ncols, it->op.next_col,
				  it->op.err);
		else
			SC_LOG_AT(level, "  copy agg %zu chunk %" PRIu64 " %s: rx %s%d, tx %s%d", it->agg,
				  it->c0, it->lack ? "lacking" : "held", it->rx_need ? "" : "(none) ",
				  it->rx.state, it->tx_need ? "" : "(none) ", it->tx.state);
	}
}
