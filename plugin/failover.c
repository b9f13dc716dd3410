/* Surviving aggregator faults: every request completes with exactly the
 * right result on every node when an aggregator dies, stalls, is cut off
 * from some nodes or aborts the job for a reason of its own.
 *
 * Detect. The client library (params.failover) fences an aggregator the
 * moment this node sees it fail (closed connection, ABORT, completion
 * error, no PONG within SUMCAST_AGG_DEADLINE, silence past the job
 * timeout): its control connection and its own endpoint are closed, so
 * nothing it sends can land in our memory afterwards, and it shows in
 * client_failed().
 *
 * Tell. The set of failed aggregators a node knows travels the ring as a
 * notice (prev -> this node -> next); a node that learns something new
 * fences those aggregators too (the partition case: only one node could
 * not reach it) and passes the notice on. Until the nodes have agreed, new
 * requests wait (iallreduce hands NCCL no request; NCCL retries).
 *
 * Agree, over the ring (min-allreduces), in two rounds per epoch:
 *   1. per aggregator: failed here (as a max and a min), the lowest chunk
 *      number whose result this node lacks; and the next request index.
 *      If the nodes did not all report the same failed set, each fences the
 *      union and round 1 runs again (attempt + 1). Otherwise F is the set,
 *      lo[a] the agreed low mark and S the first request to use the new
 *      set (every request issued so far has an index below S).
 *   2. per aggregator of F, per chunk lo .. lo + window - 1: the lowest rank
 *      holding its result and the lowest rank lacking it (a window op's
 *      chunk may be neither: a reduce-scatter non-owner wants no result;
 *      an allgather's source holds it from the start).
 * Credit flow means a node that holds chunk c means every node holds every
 * chunk up to c - window, so these `window` chunks are the only ones some
 * node may hold and another lack; a node keeps them (client retention).
 *
 * Repair, with everything agreed, the same decision on every node:
 *   - a chunk some node holds and some lacks is copied along the ring from
 *     its lowest holder (each node passes it on; one that holds it already
 *     receives it into a sink);
 *   - an allreduce's chunk no node holds belongs to a request no node has
 *     completed, so every node still has that request's send data: it is
 *     recomputed by a ring allreduce of its bytes (runs of consecutive such
 *     chunks of one request go as one allreduce). Requests issued later
 *     with an index below S that were sharded over a failed aggregator redo
 *     their whole shard there the same way, when they are issued.
 *   - a window op's chunk no node holds (a reduce-scatter chunk its owner
 *     lacks) is recomputed alone, by a ring allreduce of every node's
 *     contribution: its send data while the request is in flight, else
 *     the retention copy (a non-owner's request may have completed: it
 *     keeps what it sent, client.h), zero from an allgather's receivers;
 *     the owner takes the sum, the others drop it.
 * Requests from S on are sharded over the surviving aggregators (or go to
 * the ring alone when none is left). A failed aggregator is not used again
 * by this communicator; a restarted one serves the next communicator.
 *
 * Bounds: agreement and repairs must finish within SUMCAST_AGG_TIMEOUT of
 * the first sign of the fault; a node that does not take part by then is
 * dead or stuck, and every request of the communicator fails (as a dead
 * node is with any NCCL transport). */
#include "collnet.h"

#include <errno.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tags.h"

enum { FO_IDLE = 0, FO_ROUND1, FO_ROUND2 };
enum { ITEM_COPY = 1, ITEM_REDO };

#define NONE INT64_MAX

struct fo_item {
	struct fo_item *next;
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
	char *tmp;
	struct fabric_mr tmp_mr;
	/* a window op's chunk, redone alone (tmp: contribution, then sum) */
	void *take;           /* where the sum goes here, NULL: dropped */
};

static uint64_t fo_timeout_ns(void)
{
	return (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull;
}

static void fo_fail(struct coll_comm *cc, int err, const char *what)
{
	struct failover *fo = &cc->fo;

	if (fo->err)
		return;
	fo->err = err;
	SC_WARN("collnet job 0x%016llx rank %u: recovering from an aggregator fault failed: %s (%s; "
		"epoch %u attempt %u, failed aggregators 0x%llx of which agreed 0x%llx, %s); every request "
		"of this communicator fails",
		(unsigned long long)cc->job_id, cc->rank, what,
		err == -ETIMEDOUT ? "timed out" : fi_strerror(-err), fo->epoch, fo->attempt,
		(unsigned long long)fo->known, (unsigned long long)fo->dead,
		fo->state == FO_ROUND1 ? "in round 1" : fo->state == FO_ROUND2 ? "in round 2"
		: fo->items ? "repairing" : "idle");
}

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

/* ---- notices ---- */

static void note_known(struct coll_comm *cc, uint64_t mask, bool here)
{
	struct failover *fo = &cc->fo;
	uint64_t fresh = mask & ~fo->known;

	if (!fresh)
		return;
	uint64_t now = sc_now_ns();
	if (!(fo->known & ~fo->dead))
		fo->t_first_ns = now; /* the first sign of what the next agreement decides */
	if (fo->deadline_ns < now + fo_timeout_ns())
		fo->deadline_ns = now + fo_timeout_ns();
	for (size_t ai = 0; ai < cc->naggs; ai++) {
		if (!(fresh >> ai & 1))
			continue;
		struct fo_dead *d = &fo->deads[ai];
		if (here) {
			snprintf(d->why, sizeof(d->why), "%s", client_agg_why(cc->client, ai));
		} else {
			client_agg_fence(cc->client, ai, "another node reported it failed");
			snprintf(d->why, sizeof(d->why), "reported by another node");
		}
	}
	fo->known |= fresh;
}

static void notice_post_rx(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	if (fo->nrx_posted || cc->nranks < 2)
		return;
	int rc = ring_post(&cc->ring, &fo->nrx, false, &fo->nbuf[0], sizeof(uint64_t), fo->nmr.desc,
			   sc_tag_notice());
	if (rc == 0)
		fo->nrx_posted = true;
	else
		fo->nrx.state = RING_X_IDLE; /* -FI_EAGAIN: next pass */
}

static void notice_progress(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	if (cc->nranks < 2)
		return;
	if (fo->nrx_posted && fo->nrx.state == RING_X_DONE) {
		fo->nrx_posted = false;
		if (fo->nrx.err)
			fo_fail(cc, fo->nrx.err, "receiving a fault notice from the previous node");
		else
			note_known(cc, fo->nbuf[0] & (cc->naggs >= 64 ? ~0ull : (1ull << cc->naggs) - 1),
				   false);
	}
	notice_post_rx(cc);
	if ((fo->known & ~fo->told) == 0)
		return;
	for (int i = 0; i < 4; i++) {
		struct ring_xfer *x = &fo->ntx[i];
		if (x->state == RING_X_POSTED)
			continue;
		if (x->state == RING_X_DONE && x->err)
			fo_fail(cc, x->err, "sending a fault notice to the next node");
		fo->nbuf[1 + i] = fo->known;
		int rc = ring_post(&cc->ring, x, true, &fo->nbuf[1 + i], sizeof(uint64_t), fo->nmr.desc,
				   sc_tag_notice());
		if (rc) {
			x->state = RING_X_IDLE;
			if (rc != -FI_EAGAIN)
				fo_fail(cc, rc, "sending a fault notice to the next node");
			return;
		}
		fo->told = fo->known;
		return;
	}
}

/* ---- agreement ---- */

static void agree_free(struct failover *fo)
{
	fabric_mr_dereg(&fo->vmr_in);
	fabric_mr_dereg(&fo->vmr_out);
	free(fo->vin);
	free(fo->vout);
	fo->vin = fo->vout = NULL;
	fo->nvals = 0;
}

static int agree_start(struct coll_comm *cc, size_t n, uint32_t round)
{
	struct failover *fo = &cc->fo;
	int rc;

	/* vin is filled by the caller after this returns: allocate first */
	fo->vin = calloc(n, sizeof(int64_t));
	fo->vout = calloc(n, sizeof(int64_t));
	if (!fo->vin || !fo->vout)
		return -ENOMEM;
	fo->nvals = n;
	rc = fabric_mr_reg(cc->f, fo->vin, n * sizeof(int64_t), &fo->vmr_in);
	if (!rc)
		rc = fabric_mr_reg(cc->f, fo->vout, n * sizeof(int64_t), &fo->vmr_out);
	(void)round;
	return rc;
}

static void agree_go(struct coll_comm *cc, uint32_t round)
{
	struct failover *fo = &cc->fo;

	ring_op_start_tagged(&cc->ring, &fo->agree, sc_tag_agree(fo->epoch, fo->attempt, round),
			     SC_TAG_FO_STEP_SHIFT, fo->vin, fo->vout, fo->nvals, SC_I64, SC_OP_MIN,
			     fo->vmr_in.desc, fo->vmr_out.desc, NULL, NULL);
}

static int round1_start(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;
	size_t na = cc->naggs;
	int rc = agree_start(cc, 3 * na + 1, 1);

	if (rc)
		return rc;
	fo->fenced = fo->known & ~fo->dead;
	for (size_t ai = 0; ai < na; ai++) {
		bool f = fo->fenced >> ai & 1;
		fo->vin[ai] = -(int64_t)f;         /* min: -(max) */
		fo->vin[na + ai] = f;              /* min */
		fo->vin[2 * na + ai] = f ? (int64_t)client_agg_lo(cc->client, ai) : NONE;
	}
	fo->vin[3 * na] = -(int64_t)cc->next_idx; /* min: -(max) */
	agree_go(cc, 1);
	fo->state = FO_ROUND1;
	return 0;
}

static int round2_start(struct coll_comm *cc, uint64_t set)
{
	struct failover *fo = &cc->fo;
	size_t n = 0;
	int rc;

	for (size_t ai = 0; ai < cc->naggs; ai++)
		if (set >> ai & 1)
			n += 2 * (size_t)client_agg_window(cc->client, ai);
	rc = agree_start(cc, n ? n : 1, 2);
	if (rc)
		return rc;
	size_t k = 0;
	for (size_t ai = 0; ai < cc->naggs; ai++) {
		if (!(set >> ai & 1))
			continue;
		uint32_t w = client_agg_window(cc->client, ai);
		for (uint32_t j = 0; j < w; j++) {
			uint64_t c = fo->r1_lo[ai] + j;
			bool held = client_chunk_held(cc->client, ai, c);
			bool lacks = client_chunk_lacks(cc->client, ai, c);
			fo->vin[k + j] = held ? (int64_t)cc->rank : NONE;
			fo->vin[k + w + j] = lacks ? (int64_t)cc->rank : NONE;
		}
		k += 2 * (size_t)w;
	}
	agree_go(cc, 2);
	fo->state = FO_ROUND2;
	return 0;
}

/* ---- repairs ---- */

static void item_free(struct fo_item *it)
{
	if (it->tmp) {
		fabric_mr_dereg(&it->tmp_mr);
		free(it->tmp);
	}
	free(it);
}

static void item_link(struct failover *fo, struct fo_item *it)
{
	it->next = fo->items;
	fo->items = it;
	if (it->req)
		it->req->repairs++;
}

/* Chunk c of a failed aggregator: 0 held by every node, 1 copied from a
 * holder, 2 recomputed over the ring. The same answer on every node. */
static int chunk_fate(const struct fo_dead *d, uint64_t c)
{
	if (c < d->lo)
		return 0;
	if (c - d->lo < d->w && d->holder[c - d->lo] != NONE)
		return d->lacker[c - d->lo] == NONE ? 0 : 1;
	return 2;
}

/* A registered buffer of len bytes for an item (it->tmp). */
static int item_tmp(struct coll_comm *cc, struct fo_item *it, size_t len)
{
	if (!len)
		len = 1;
	if (posix_memalign((void **)&it->tmp, 4096, len)) {
		it->tmp = NULL;
		return -ENOMEM;
	}
	if (fabric_mr_reg(cc->f, it->tmp, len, &it->tmp_mr)) {
		free(it->tmp);
		it->tmp = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* The copy of chunk lo + k of aggregator ai along the ring: the holder
 * sends it on, each node passes it on; a node that lacks it keeps it, one
 * that holds it already receives it into the sink, one that wants none of
 * it (a reduce-scatter non-owner) through a buffer of its own. */
static int copy_item(struct coll_comm *cc, size_t ai, uint32_t k, uint64_t *lacking, size_t *bytes)
{
	struct failover *fo = &cc->fo;
	const struct fo_dead *d = &fo->deads[ai];
	uint64_t c = d->lo + k;
	int64_t root = d->holder[k];
	struct fo_item *it = calloc(1, sizeof(*it));
	struct client_chunk info;

	if (!it)
		return -ENOMEM;
	it->kind = ITEM_COPY;
	it->agg = ai;
	it->c0 = c;
	it->n = 1;
	bool known = client_chunk_info(cc->client, ai, c, &info) == 0;
	bool held = client_chunk_held(cc->client, ai, c);
	bool lacks = client_chunk_lacks(cc->client, ai, c);
	struct coll_req *r = req_of_chunk(cc, ai, c);
	const void *mine = NULL;
	size_t len = 0;
	if (held) {
		mine = client_chunk_data(cc->client, ai, c, &len);
		if (!mine) {
			free(it);
			SC_WARN("collnet: chunk %" PRIu64 " of aggregator %zu is held here but not retained",
				c, ai);
			return -EPROTO;
		}
	} else if (lacks) {
		if (!r) {
			free(it);
			SC_WARN("collnet: chunk %" PRIu64 " of aggregator %zu is lacking here but belongs to "
				"no request in flight", c, ai);
			return -EPROTO;
		}
		size_t off;
		client_req_chunk_range(r->creq, ai, c, &off, &len);
		it->lack = true;
		it->rx_buf = (char *)r->recv + off;
		it->rx_desc = r->rm ? r->rm->ring.desc : NULL;
		it->bytes = len;
		(*lacking)++;
		*bytes += len;
	} else { /* passes it on: the length comes with it */
		if (item_tmp(cc, it, fo->sink_bytes)) {
			free(it);
			return -ENOMEM;
		}
		it->rx_buf = it->tmp;
		it->rx_desc = it->tmp_mr.desc;
	}
	it->len = len;
	/* A request whose buffer holds our copy, or receives it, stays ours
	 * until the copy has passed; one whose chunk never came back here
	 * ends it when the copy is done. */
	bool in_req = held && r && (const char *)mine >= (const char *)r->recv &&
		      (const char *)mine < (const char *)r->recv + r->count * r->es;
	bool in_send = held && r && known && info.req && mine == info.give; /* a SOURCE's */
	bool settle = r && known && !info.got;
	it->req = !held || in_req || in_send || settle ? r : NULL;
	it->settle = settle;
	uint32_t me = cc->rank, next = (me + 1) % cc->nranks;
	if ((int64_t)me != root) {
		it->rx_need = true;
		if (held) {
			it->rx_buf = fo->sink;
			it->rx_desc = fo->sink_mr.desc;
		}
	}
	if ((int64_t)next != root) {
		it->tx_need = true;
		if (held) {
			it->tx_buf = mine;
			it->tx_desc = in_req ? (r->rm ? r->rm->ring.desc : NULL)
				    : in_send ? (r->sm ? r->sm->ring.desc : NULL) : fo->ret_mr.desc;
		} else {
			it->tx_after_rx = true;
			it->tx_buf = it->rx_buf;
			it->tx_desc = it->rx_desc;
		}
	}
	SC_DBG("collnet rank %u: copy chunk %" PRIu64 " of aggregator %zu (holder rank %" PRId64
	       ", lowest lacking rank %" PRId64 "): %s here, %zu bytes, request %s%s%s", me, c, ai, root,
	       d->lacker[k], held ? "held" : lacks ? "lacking" : "not wanted", len,
	       r ? "in flight" : "gone", it->rx_need ? ", receives" : "", it->tx_need ? ", passes on" : "");
	item_link(fo, it);
	return 0;
}

/* Where a redone chunk's sum lies in it->tmp (after the contribution). */
static size_t redo_sum_off(size_t len)
{
	return (len + 63) & ~(size_t)63;
}

/* Chunk c of a window op on aggregator ai, which no node holds: a ring
 * allreduce of every node's contribution (client_chunk_info: the send data
 * or its retention copy; nothing from a TAKE) in it->tmp, its sum copied
 * to the request's receive buffer where this node wants it. */
static int redo_chunk_item(struct coll_comm *cc, size_t ai, uint64_t c, const struct client_chunk *k)
{
	struct failover *fo = &cc->fo;
	size_t es = sc_dtype_size(k->t);
	bool wants = k->role == CLIENT_ROLE_ALL || k->role == CLIENT_ROLE_TAKE;
	struct coll_req *r = k->req ? req_of_chunk(cc, ai, c) : NULL;

	if (!k->len || (wants && !k->got && !r) || (k->role != CLIENT_ROLE_TAKE && !k->give)) {
		SC_WARN("collnet: chunk %" PRIu64 " of aggregator %zu is to be recomputed, but this node "
			"has %s", c, ai, !k->len ? "nothing of it" : !k->give ? "not kept what it sent"
			: "no request to take it");
		return -EPROTO;
	}
	struct fo_item *it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	size_t len = k->len, half = redo_sum_off(len);
	if (item_tmp(cc, it, 2 * half)) {
		free(it);
		return -ENOMEM;
	}
	if (k->give)
		memcpy(it->tmp, k->give, len);
	else
		memset(it->tmp, 0, len);
	it->kind = ITEM_REDO;
	it->agg = ai;
	it->c0 = c;
	it->n = 1;
	it->len = len;
	it->bytes = len;
	it->req = r;
	it->settle = r && !k->got;
	if (wants && !k->got)
		it->take = (char *)r->recv + k->off;
	ring_op_start_tagged(&cc->ring, &it->op, sc_tag_redo_chunk((uint32_t)ai, c), SC_TAG_FO_STEP_SHIFT,
			     it->tmp, it->tmp + half, len / es, k->t, k->op, it->tmp_mr.desc,
			     it->tmp_mr.desc, NULL, NULL);
	SC_DBG("collnet rank %u: redo window chunk %" PRIu64 " of aggregator %zu alone (%zu bytes, role "
	       "%d, request %s%s)", cc->rank, c, ai, len, (int)k->role, r ? "in flight" : "gone",
	       it->take ? ", takes the sum" : "");
	item_link(fo, it);
	return 0;
}

/* Every chunk of window request r on failed aggregator ai that no node
 * holds, each alone. */
static int redo_window_req(struct coll_comm *cc, struct coll_req *r, size_t ai, uint64_t *chunks,
			   size_t *bytes)
{
	const struct fo_dead *d = &cc->fo.deads[ai];
	uint64_t c0, n;
	int rc;

	client_req_chunks(r->creq, ai, &c0, &n);
	for (uint64_t c = c0; c < c0 + n; c++) {
		struct client_chunk k;
		if (chunk_fate(d, c) != 2)
			continue;
		if (client_chunk_info(cc->client, ai, c, &k))
			return -EPROTO;
		if ((rc = redo_chunk_item(cc, ai, c, &k)))
			return rc;
		(*chunks)++;
		*bytes += k.len;
	}
	return 0;
}

/* The ring allreduce of chunks [c0, c0 + n) of request r on aggregator ai. */
static int redo_item(struct coll_comm *cc, struct coll_req *r, size_t ai, uint64_t c0, uint64_t n,
		     uint32_t run)
{
	struct failover *fo = &cc->fo;
	struct fo_item *it = calloc(1, sizeof(*it));
	size_t off0, len0, offn, lenn;

	if (!it)
		return -ENOMEM;
	client_req_chunk_range(r->creq, ai, c0, &off0, &len0);
	client_req_chunk_range(r->creq, ai, c0 + n - 1, &offn, &lenn);
	size_t bytes = offn + lenn - off0, count = bytes / r->es;
	const char *send = (const char *)r->send + off0;
	char *recv = (char *)r->recv + off0;
	it->kind = ITEM_REDO;
	it->agg = ai;
	it->req = r;
	it->settle = true;
	it->c0 = c0;
	it->n = n;
	it->bytes = bytes;
	if (send < recv + bytes && recv < send + bytes) {
		size_t tb = ring_op_tmp_bytes(&cc->ring, count, (enum sc_dtype)r->dtype, SC_TAG_FO_STEP_SHIFT);
		if (tb && (posix_memalign((void **)&it->tmp, 4096, tb) ||
			   fabric_mr_reg(cc->f, it->tmp, tb, &it->tmp_mr))) {
			free(it->tmp);
			free(it);
			return -ENOMEM;
		}
	}
	ring_op_start_tagged(&cc->ring, &it->op, sc_tag_redo(r->seq, (uint32_t)ai, run),
			     SC_TAG_FO_STEP_SHIFT, send, recv, count, (enum sc_dtype)r->dtype,
			     (enum sc_op)r->op, r->sm ? r->sm->ring.desc : NULL,
			     r->rm ? r->rm->ring.desc : NULL, it->tmp, it->tmp ? it->tmp_mr.desc : NULL);
	SC_DBG("collnet rank %u: redo chunks %" PRIu64 "..%" PRIu64 " of aggregator %zu (request %" PRIu64
	       " seq %u run %u): bytes %zu..%zu of the request%s", cc->rank, c0, c0 + n - 1, ai, r->idx,
	       r->seq, run, off0, off0 + bytes, send == recv ? ", in place" : "");
	item_link(fo, it);
	return 0;
}

/* Every chunk of r on failed aggregator ai that no node holds: runs of
 * consecutive ones, each one ring allreduce. Copies are separate items. */
static int redo_req(struct coll_comm *cc, struct coll_req *r, size_t ai, uint64_t *chunks,
		    size_t *bytes)
{
	const struct fo_dead *d = &cc->fo.deads[ai];
	uint64_t c0, n, run_start = 0;
	uint32_t run = 0;
	bool in_run = false;
	int rc;

	client_req_chunks(r->creq, ai, &c0, &n);
	for (uint64_t c = c0; c <= c0 + n; c++) {
		bool redo = c < c0 + n && chunk_fate(d, c) == 2;
		if (redo && !in_run) {
			run_start = c;
			in_run = true;
		} else if (!redo && in_run) {
			rc = redo_item(cc, r, ai, run_start, c - run_start, run++);
			if (rc)
				return rc;
			size_t off0, len0, offn, lenn;
			client_req_chunk_range(r->creq, ai, run_start, &off0, &len0);
			client_req_chunk_range(r->creq, ai, c - 1, &offn, &lenn);
			*chunks += c - run_start;
			*bytes += offn + lenn - off0;
			in_run = false;
		}
	}
	return 0;
}

static void item_done(struct coll_comm *cc, struct fo_item *it)
{
	struct failover *fo = &cc->fo;
	struct coll_req *r = it->req;

	if (it->take)
		memcpy(it->take, it->tmp + redo_sum_off(it->len), it->len);
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
	if (it->rx_need && !it->lack && it->rx_buf == it->tmp && rx_ok)
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

static void items_progress(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	for (struct fo_item **pp = &fo->items; *pp && !fo->err;) {
		struct fo_item *it = *pp;
		int rc = item_progress(cc, it);
		if (rc < 0) {
			fo_fail(cc, rc, it->kind == ITEM_REDO ? "recomputing chunks over the ring"
							       : "copying a result along the ring");
			return;
		}
		if (rc == 0) {
			pp = &it->next;
			continue;
		}
		item_done(cc, it);
		*pp = it->next;
		item_free(it);
	}
}

/* ---- decision ---- */

static int decide(struct coll_comm *cc, uint64_t set, uint64_t from)
{
	struct failover *fo = &cc->fo;
	uint64_t prev_live = fo->epochs[fo->nepochs - 1].live;
	struct fo_epoch *e = realloc(fo->epochs, (fo->nepochs + 1) * sizeof(*e));
	uint64_t lacking = 0, redo_chunks = 0, kept = 0, passed = 0;
	size_t copy_bytes = 0, redo_bytes = 0;
	int rc = 0;

	if (!e)
		return -ENOMEM;
	fo->epochs = e;
	fo->epoch++;
	e[fo->nepochs].from = from;
	e[fo->nepochs].live = prev_live & ~set;
	fo->nepochs++;
	size_t k = 0;
	for (size_t ai = 0; ai < cc->naggs; ai++) {
		if (!(set >> ai & 1))
			continue;
		struct fo_dead *d = &fo->deads[ai];
		uint32_t w = client_agg_window(cc->client, ai);
		d->agreed = true;
		d->epoch = fo->epoch;
		d->lo = fo->r1_lo[ai];
		d->w = w;
		d->holder = malloc((w ? w : 1) * sizeof(int64_t));
		d->lacker = malloc((w ? w : 1) * sizeof(int64_t));
		if (!d->holder || !d->lacker)
			return -ENOMEM;
		memcpy(d->holder, fo->vout + k, w * sizeof(int64_t));
		memcpy(d->lacker, fo->vout + k + w, w * sizeof(int64_t));
		k += 2 * (size_t)w;
		if (SC_LOG_DEBUG <= sc_log_level_cur) {
			char hl[512];
			size_t o = 0;
			for (uint32_t j = 0; j < w && o + 48 < sizeof(hl); j++)
				o += (size_t)snprintf(hl + o, sizeof(hl) - o, " %" PRIu64 ":%s/%s", d->lo + j,
						      d->holder[j] == NONE ? "-" : "h", d->lacker[j] == NONE ? "-" : "l");
			SC_DBG("collnet rank %u: epoch %u aggregator %zu: lo %" PRIu64 ", from request %" PRIu64
			       ", here lo %" PRIu64 ";%s", cc->rank, fo->epoch, ai, d->lo, from,
			       client_agg_lo(cc->client, ai), hl);
		}
	}
	fo->dead |= set;
	fo->faults += (uint64_t)__builtin_popcountll(set);
	for (size_t ai = 0; ai < cc->naggs && !rc; ai++) {
		if (!(set >> ai & 1))
			continue;
		const struct fo_dead *d = &fo->deads[ai];
		for (uint32_t j = 0; j < d->w && !rc; j++) {
			if (d->holder[j] != NONE && d->lacker[j] != NONE) {
				uint64_t l0 = lacking;
				rc = copy_item(cc, ai, j, &lacking, &copy_bytes);
				passed += !rc && lacking == l0 && !client_chunk_held(cc->client, ai, d->lo + j);
				continue;
			}
			/* Held where it is wanted, so nothing moves; but a node
			 * that wants none of it (a reduce-scatter non-owner, an
			 * allgather source) may not have had its empty result:
			 * its request ends the chunk here. */
			struct client_chunk kc;
			struct coll_req *r;
			if (d->holder[j] != NONE && !client_chunk_info(cc->client, ai, d->lo + j, &kc) &&
			    kc.req && !kc.got && (r = req_of_chunk(cc, ai, d->lo + j)))
				client_chunk_done(cc->client, r->creq, ai, d->lo + j);
		}
		for (int i = 0; i < COLL_REQS && !rc; i++) {
			struct coll_req *r = &cc->reqs[i];
			if (r->used && r->creq && (r->aggs >> ai & 1))
				rc = r->coll == COLL_ALLREDUCE
					     ? redo_req(cc, r, ai, &redo_chunks, &redo_bytes)
					     : redo_window_req(cc, r, ai, &redo_chunks, &redo_bytes);
		}
		/* window chunks no node holds whose request completed here: what
		 * this node sent is in retention */
		for (uint32_t j = 0; j < d->w && !rc; j++) {
			struct client_chunk kc;
			if (chunk_fate(d, d->lo + j) != 2 ||
			    client_chunk_info(cc->client, ai, d->lo + j, &kc) || kc.req)
				continue;
			rc = redo_chunk_item(cc, ai, d->lo + j, &kc);
			redo_chunks++;
			kept++;
			redo_bytes += kc.len;
		}
	}
	uint64_t live = e[fo->nepochs - 1].live;
	double ms = (sc_now_ns() - fo->t_first_ns) / 1e6;
	for (size_t ai = 0; ai < cc->naggs; ai++)
		if (set >> ai & 1)
			SC_WARN("collnet job 0x%016llx rank %u: aggregator %s failed (%s); epoch %u: from "
				"request %" PRIu64 " on %d aggregator(s) + ring; here %" PRIu64
				" chunk(s) (%zu bytes) are copied from other nodes and %" PRIu64
				" chunk(s) (%zu bytes) redone over the ring; agreed %.1f ms after the first sign; "
				"window chunks: %" PRIu64 " redone from what this node kept after its request "
				"completed, %" PRIu64 " copies passed on for others",
				(unsigned long long)cc->job_id, cc->rank, cc->aggs[ai], fo->deads[ai].why,
				fo->epoch, from, __builtin_popcountll(live), lacking, copy_bytes, redo_chunks,
				redo_bytes, ms, kept, passed);
	return rc;
}

static void agree_progress(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;
	size_t na = cc->naggs;
	int rc;

	if (fo->state == FO_IDLE) {
		if (!(fo->known & ~fo->dead))
			return;
		rc = round1_start(cc);
		if (rc)
			fo_fail(cc, rc, "starting the agreement");
		return;
	}
	rc = ring_op_progress(&fo->agree);
	if (rc == 0)
		return;
	if (rc < 0) {
		fo_fail(cc, rc, "agreeing over the ring");
		return;
	}
	if (fo->state == FO_ROUND1) {
		uint64_t maxf = 0, minf = 0;
		for (size_t ai = 0; ai < na; ai++) {
			maxf |= (uint64_t)(-fo->vout[ai] == 1) << ai;
			minf |= (uint64_t)(fo->vout[na + ai] == 1) << ai;
			fo->r1_lo[ai] = (uint64_t)fo->vout[2 * na + ai];
		}
		fo->r1_next = (uint64_t)-fo->vout[3 * na];
		agree_free(fo);
		if (maxf != minf) {
			/* Not every node had fenced the same set: all fence the
			 * union, and report again. */
			note_known(cc, maxf, false);
			fo->attempt++;
			rc = round1_start(cc);
		} else {
			rc = round2_start(cc, maxf);
		}
		if (rc)
			fo_fail(cc, rc, "starting the agreement");
		return;
	}
	/* round 2: decided */
	uint64_t set = fo->fenced;
	rc = decide(cc, set, fo->r1_next);
	agree_free(fo);
	fo->state = FO_IDLE;
	fo->attempt = 0;
	if (rc)
		fo_fail(cc, rc, "setting up the repairs");
}

/* ---- interface ---- */

int failover_init(struct coll_comm *cc, uint64_t live)
{
	struct failover *fo = &cc->fo;
	size_t rlen;
	int rc;

	fo->epochs = calloc(1, sizeof(*fo->epochs));
	fo->nbuf = calloc(5, sizeof(uint64_t));
	fo->sink_bytes = plugin_cfg.chunk_bytes;
	fo->sink = malloc(fo->sink_bytes);
	if (!fo->epochs || !fo->nbuf || !fo->sink)
		return -ENOMEM;
	fo->epochs[0].from = 0;
	fo->epochs[0].live = live;
	fo->nepochs = 1;
	/* aggregators not in the connect-time set are simply never used */
	fo->known = fo->dead = cc->naggs >= 64 ? ~live : ((1ull << cc->naggs) - 1) & ~live;
	fo->told = fo->known;
	if ((rc = fabric_mr_reg(cc->f, fo->nbuf, 5 * sizeof(uint64_t), &fo->nmr)) ||
	    (rc = fabric_mr_reg(cc->f, fo->sink, fo->sink_bytes, &fo->sink_mr)))
		return rc;
	void *ret = client_retention(cc->client, &rlen);
	if (ret) {
		rc = fabric_mr_reg(cc->f, ret, rlen, &fo->ret_mr);
		if (rc)
			return rc;
		fo->ret_reg = true;
	}
	notice_post_rx(cc);
	return 0;
}

void failover_fini(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	if (fo->state != FO_IDLE)
		ring_op_abort(&fo->agree);
	for (struct fo_item *it = fo->items, *next; it; it = next) {
		next = it->next;
		if (it->kind == ITEM_REDO) {
			ring_op_abort(&it->op);
		} else {
			if (it->rx.state == RING_X_POSTED)
				fabric_cancel(cc->f, &it->rx.fop);
		}
	}
	if (fo->nrx_posted)
		fabric_cancel(cc->f, &fo->nrx.fop);
	/* Let cancels and sends complete (bounded) before their memory goes. */
	uint64_t until = sc_now_ns() + 200ull * 1000000ull;
	for (;;) {
		bool busy = fo->nrx_posted && fo->nrx.state == RING_X_POSTED;
		for (int i = 0; i < 4; i++)
			busy |= fo->ntx[i].state == RING_X_POSTED;
		for (struct fo_item *it = fo->items; it; it = it->next)
			busy |= it->kind == ITEM_COPY &&
				(it->rx.state == RING_X_POSTED || it->tx.state == RING_X_POSTED);
		if (!busy || sc_now_ns() > until)
			break;
		ring_poll(&cc->ring);
	}
	while (fo->items) {
		struct fo_item *it = fo->items;
		fo->items = it->next;
		item_free(it);
	}
	agree_free(fo);
	for (size_t ai = 0; ai < CLIENT_AGGS_MAX; ai++) {
		free(fo->deads[ai].holder);
		free(fo->deads[ai].lacker);
	}
	if (fo->ret_reg)
		fabric_mr_dereg(&fo->ret_mr);
	fabric_mr_dereg(&fo->sink_mr);
	fabric_mr_dereg(&fo->nmr);
	free(fo->sink);
	free(fo->nbuf);
	free(fo->epochs);
}

int failover_progress(struct coll_comm *cc)
{
	if (!cc->client || !cc->failover || cc->fo.err)
		return cc->fo.err;
	client_progress(cc->client);
	ring_poll(&cc->ring);
	return failover_step(cc);
}

int failover_step(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	if (!cc->client || !cc->failover || fo->err)
		return fo->err;
	uint64_t mine = client_failed(cc->client) & ~fo->known;
	if (mine)
		note_known(cc, mine, true);
	notice_progress(cc);
	if (!fo->err)
		agree_progress(cc);
	if (!fo->err)
		items_progress(cc);
	if (!fo->err && (fo->state != FO_IDLE || fo->items || (fo->known & ~fo->dead)) &&
	    sc_now_ns() > fo->deadline_ns)
		fo_fail(cc, -ETIMEDOUT, fo->state != FO_IDLE ? "a node does not take part in the agreement"
							      : "a node does not take part in the repairs");
	return fo->err;
}

bool failover_busy(const struct coll_comm *cc)
{
	return cc->client && cc->failover && (cc->fo.known & ~cc->fo.dead);
}

uint64_t failover_live_for(const struct coll_comm *cc, uint64_t idx, uint32_t *epoch)
{
	const struct failover *fo = &cc->fo;
	size_t e = fo->nepochs;

	while (e > 1 && idx < fo->epochs[e - 1].from)
		e--;
	*epoch = (uint32_t)(e - 1);
	return fo->epochs[e - 1].live;
}

int failover_req_started(struct coll_comm *cc, struct coll_req *r)
{
	uint64_t chunks = 0;
	size_t bytes = 0;
	int rc = 0;

	for (size_t ai = 0; ai < cc->naggs && !rc; ai++)
		if ((r->aggs & cc->fo.dead) >> ai & 1)
			rc = r->coll == COLL_ALLREDUCE ? redo_req(cc, r, ai, &chunks, &bytes)
						       : redo_window_req(cc, r, ai, &chunks, &bytes);
	if (rc)
		fo_fail(cc, rc, "setting up the repair of a request");
	else if (cc->fo.deadline_ns < sc_now_ns() + fo_timeout_ns())
		cc->fo.deadline_ns = sc_now_ns() + fo_timeout_ns();
	return rc;
}

void failover_req_gone(struct coll_comm *cc, struct coll_req *r)
{
	for (struct fo_item *it = cc->fo.items; it; it = it->next)
		if (it->req == r)
			it->req = NULL;
}

void failover_dump(const struct coll_comm *cc, int level)
{
	const struct failover *fo = &cc->fo;

	SC_LOG_AT(level, "collnet rank %u: failover epoch %u %s, known 0x%llx dead 0x%llx, err %d",
		  cc->rank, fo->epoch,
		  fo->state == FO_ROUND1 ? "round 1" : fo->state == FO_ROUND2 ? "round 2" : "idle",
		  (unsigned long long)fo->known, (unsigned long long)fo->dead, fo->err);
	for (const struct fo_item *it = fo->items; it; it = it->next) {
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
