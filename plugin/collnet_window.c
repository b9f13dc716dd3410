/* CollNet Direct's window collectives, NCCL's iallgather and
 * ireducescatter calls (ZeRO / FSDP): each window goes all of it one way,
 * decided alike on every node (split_window_agg, split.c): through the
 * aggregators owner-only (the client library's collectives of blocks,
 * client_start), or over the ring (ring_op_start_window, ring.c); never
 * split. Completion, and the copy of a reduce-scatter's part out of the
 * staging, in test (collnet_req.c); faults: failover.c.
 *
 * NCCL (src/transport/coll_net.cc, v2.28.9: sendProxyProgress,
 * collNet[Reg]Iallgather, collNet[Reg]Ireducescatter) sees a global buffer
 * of nNodes blocks of bytesPerRank bytes, block k belonging to collnet rank
 * k, and issues one request per window [windowOffset, + windowBytes) of it,
 * with one SGE part covering the window: iallgather's recvParts[0] (the
 * result), ireducescatter's sendParts[0] (this node's contribution). The
 * other pointer covers only this node's block's part of the window, and
 * NCCL advances it by windowOffset % bytesPerRank when the window starts in
 * this node's block, not otherwise: so it always points at global offset
 * max(windowOffset, rank x bytesPerRank). docs/plugin.md has the details. */
#include "collnet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int window_check(const struct coll_comm *cc, const char *what, int nparts,
			const ncclNetSGE_t *parts, size_t bpr, size_t wo, size_t wb, size_t es)
{
	if (nparts != 1 || !parts) {
		SC_WARN("%s: %d parts; NCCL passes exactly one", what, nparts);
		return -EINVAL;
	}
	if (parts[0].size < wb) {
		SC_WARN("%s: the part holds %zu bytes, the window is %zu", what, (size_t)parts[0].size, wb);
		return -EINVAL;
	}
	if (wb && (!bpr || bpr > SIZE_MAX / cc->nranks || wo > bpr * cc->nranks ||
		   wb > bpr * cc->nranks - wo)) {
		SC_WARN("%s: window [%zu, +%zu) is not inside %u blocks of %zu bytes", what, wo, wb,
			cc->nranks, bpr);
		return -EINVAL;
	}
	if (bpr % es || wo % es || wb % es) {
		SC_WARN("%s: bytesPerRank %zu, windowOffset %zu, windowBytes %zu: not whole %zu-byte "
			"elements", what, bpr, wo, wb, es);
		return -EINVAL;
	}
	return 0;
}

static void window_req_init(struct coll_comm *cc, struct coll_req *r, enum coll_kind kind,
			    size_t count, enum sc_dtype d, enum sc_op o, const void *send, void *recv,
			    struct coll_mr *sm, struct coll_mr *rm)
{
	coll_req_init(cc, r, kind, count, d, o, send, recv, sm, rm);
	r->agg_done = true; /* no aggregator part */
	r->epoch = cc->fo.epoch;
	r->t0 = sc_now_ns();
	cc->next_idx++;
}

/* After a window op's start (rc: the ring op's error, or window_agg_start's):
 * issued, or not issued at all (the request and its index given back):
 * -EAGAIN (the client had no request free) is a NULL request NCCL retries,
 * another error (an overlap the ring cannot work with, no staging memory,
 * the aggregators refused) fails the call. */
static int window_issued(struct coll_comm *cc, struct coll_req *r, int rc, void **request)
{
	if (rc && !r->creq) {
		r->used = false;
		cc->next_idx--;
	}
	if (rc == -EAGAIN)
		return coll_refuse(cc, "the client library has no request free");
	if (rc)
		return rc;
	coll_accepted(cc);
	*request = r;
	return 0;
}

/* ---- windows through the aggregators ----
 *
 * A window split_window_agg sends to the aggregators goes all of it as one
 * client request of blocks (client_start, client.h v1.6), cut into chunks
 * as an allreduce; each chunk's role follows from the blocks it touches.
 * Reduce-scatter: every node sends sendParts[0]; a chunk's result comes
 * back only to the owner(s) of the blocks it touches, into the slot's
 * staging, and this node's part is copied to recvData when done. Allgather:
 * a chunk inside one block is sent by its owner only (from a staging copy of
 * the window, zero but for this node's part) and its result goes to the
 * others; a chunk across blocks is sent by each owner (its part, zero
 * elsewhere: a u8 sum is exact) and returns to all; this node's own part is
 * copied into recvParts[0] at the start. Faults: failover.c (a result some
 * node lacks is copied from a holder, the owner's data included; one no node
 * holds is recomputed over the ring from every node's contribution, kept in
 * retention when its request completed). */

/* The registrations go before their domains close; the memory only once
 * no operation can read it any more: after the client's and the ring's
 * endpoints are closed (collnet_close.c), or when the slot is reused by a
 * request of a communicator where none has failed (window_aggs), so the
 * slot's previous request completed and its operations with it. */
void coll_wstage_dereg(struct coll_wstage *w)
{
	if (!w->reg)
		return;
	coll_mr_dereg(&w->mr);
	w->reg = false;
}

void coll_wstage_free(struct coll_wstage *w)
{
	coll_wstage_dereg(w);
	fabric_buf_free(&w->mem);
}

static struct coll_mr *wstage_get(struct coll_comm *cc, uint32_t slot, size_t bytes)
{
	struct coll_wstage *w = &cc->wstage[slot];
	size_t cap = bytes < (64u << 10) ? (64u << 10) : (bytes + 4095) & ~(size_t)4095;

	if (w->reg && w->mem.len >= bytes)
		return &w->mr;
	coll_wstage_free(w);
	if (fabric_buf_alloc(NULL, cap, &w->mem))
		return NULL;
	if (coll_mr_reg(cc, w->mem.buf, cap, &w->mr)) {
		fabric_buf_free(&w->mem);
		return NULL;
	}
	w->reg = true;
	return &w->mr;
}

/* The aggregators this window goes to (0: the ring), decided alike on
 * every node: from the request index's aggregator set and rank 0's model.
 * -EAGAIN: the nodes are agreeing on a fault, NCCL retries. */
static int window_aggs(struct coll_comm *cc, size_t window_bytes, bool gather, uint64_t *aggs,
		       uint32_t *epoch)
{
	*aggs = 0;
	*epoch = cc->fo.epoch;
	if (!cc->client)
		return 0;
	if (cc->failed) /* NCCL has an error: no new operation on the staging */
		return -EPIPE;
	if (failover_busy(cc))
		return -EAGAIN;
	uint64_t live = failover_live_for(cc, cc->next_idx, epoch);
	struct split_model m = cc->model;
	m.naggs = (uint32_t)__builtin_popcountll(live);
	if (split_window_agg(&m, window_bytes, gather))
		*aggs = live;
	return 0;
}

/* Starts window request r (set up by window_req_init, r->blocks set) on
 * the aggregators: send -> recv, count elements of the global buffer's
 * blocks. 0, -EAGAIN (no client request free: nothing consumed) or an
 * error. */
static int window_agg_start(struct coll_comm *cc, struct coll_req *r, uint64_t aggs, uint32_t epoch)
{
	enum sc_dtype d = (enum sc_dtype)r->dtype;
	struct client_req *creq = NULL;
	int rc = client_start(cc->client, &r->blocks, r->send, r->recv, r->count, d, (enum sc_op)r->op,
			      r->sm && r->sm->has_agg ? r->sm->agg.desc : NULL,
			      r->rm && r->rm->has_agg ? r->rm->agg.desc : NULL, aggs, &creq);
	if (rc == -EAGAIN)
		return rc;
	if (rc) {
		SC_WARN("%s window of %zu bytes through the aggregators: %s (%s)",
			r->coll == COLL_ALLGATHER ? "allgather" : "reduce-scatter", r->count * r->es,
			strerror(-rc), client_error(cc->client));
		return rc;
	}
	r->creq = creq;
	client_req_bytes(creq, &r->agg_give, &r->agg_take);
	r->a = r->count;
	r->aggs = aggs;
	r->epoch = epoch;
	r->agg_done = false;
	r->ring_done = true; /* no ring part */
	if (r->aggs & cc->fo.dead)
		return failover_req_started(cc, r);
	return 0;
}

/* What a window op is about to take: a request slot, and the path. */
struct window_start {
	struct coll_req *r; /* NULL: NCCL retries */
	uint32_t slot, epoch;
	uint64_t aggs;      /* 0: the ring */
};

/* What every window op does first: check the call (window_check), drive
 * failover, take a request slot and decide the path (window_aggs). 0 with
 * ws->r NULL: nothing free, or the nodes agreeing on a fault (NCCL
 * retries); an error fails the call. */
static int window_begin(struct coll_comm *cc, const char *what, int nparts,
			const ncclNetSGE_t *parts, size_t bpr, size_t wo, size_t wb, size_t es,
			bool gather, struct window_start *ws)
{
	int rc = window_check(cc, what, nparts, parts, bpr, wo, wb, es);

	if (rc)
		return rc;
	rc = failover_progress(cc);
	if (rc)
		return rc;
	ws->r = coll_req_slot(cc, &ws->slot);
	rc = window_aggs(cc, wb, gather, &ws->aggs, &ws->epoch);
	if (!ws->r || rc == -EAGAIN) {
		ws->r = NULL;
		return coll_refuse(cc, rc == -EAGAIN ? "the nodes are agreeing on an aggregator fault"
						      : "every request slot is in flight");
	}
	return rc;
}

int collnet_iallgather(void *coll_comm, void *send, int nparts, const ncclNetSGE_t *parts,
		     size_t bytes_per_rank, size_t window_offset, size_t window_bytes, void *send_mh,
		     void **request)
{
	struct coll_comm *cc = coll_comm;
	struct window_start ws;
	int rc;

	*request = NULL;
	rc = window_begin(cc, "iallgather", nparts, parts, bytes_per_rank, window_offset, window_bytes,
			  1, true, &ws);
	if (rc || !ws.r)
		return rc;
	struct coll_req *r = ws.r;
	uint32_t slot = ws.slot;
	struct coll_mr *sm = send_mh, *rm = parts[0].mhandle;
	if (ws.aggs) {
		struct coll_mr *st = wstage_get(cc, slot, window_bytes);
		size_t lo, len;
		if (!st)
			return -ENOMEM;
		ring_window_part(bytes_per_rank, window_offset, window_bytes, cc->rank, &lo, &len);
		memset(cc->wstage[slot].mem.buf, 0, window_bytes);
		if (len) { /* NCCL may pass no send pointer for an empty part */
			memcpy((char *)cc->wstage[slot].mem.buf + lo, send, len);
			/* no result comes back for the chunks only this node sends */
			if ((char *)parts[0].address + lo != (char *)send)
				memmove((char *)parts[0].address + lo, send, len);
		}
		window_req_init(cc, r, COLL_ALLGATHER, window_bytes, SC_U8, SC_OP_SUM,
				cc->wstage[slot].mem.buf, parts[0].address, st, rm);
		r->blocks = (struct client_blocks){ CLIENT_ALLGATHER, window_offset, bytes_per_rank };
		return window_issued(cc, r, window_agg_start(cc, r, ws.aggs, ws.epoch), request);
	}
	window_req_init(cc, r, COLL_ALLGATHER, window_bytes, SC_U8, SC_OP_SUM, send, parts[0].address,
			sm, rm);
	ring_op_start_window(&cc->ring, &r->ring, RING_ALLGATHER, r->seq, send, parts[0].address,
			     bytes_per_rank, window_offset, window_bytes, SC_U8, SC_OP_SUM,
			     sm ? sm->ring.desc : NULL, rm ? rm->ring.desc : NULL, slot);
	return window_issued(cc, r, r->ring.err, request);
}

int collnet_ireducescatter(void *coll_comm, int nparts, const ncclNetSGE_t *parts, void *recv,
			 size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
			 ncclDataType_t t, ncclRedOp_t op, void *recv_mh, void **request)
{
	struct coll_comm *cc = coll_comm;
	struct window_start ws;
	enum sc_dtype d;
	enum sc_op o;
	int rc;

	*request = NULL;
	if (plugin_dtype(t, &d) || plugin_op(op, &o)) {
		SC_WARN("ireducescatter: type %d / op %d was announced unsupported by reduceSupport", t,
			op);
		return -EINVAL;
	}
	size_t es = sc_dtype_size(d);
	rc = window_begin(cc, "ireducescatter", nparts, parts, bytes_per_rank, window_offset,
			  window_bytes, es, false, &ws);
	if (rc || !ws.r)
		return rc;
	struct coll_req *r = ws.r;
	uint32_t slot = ws.slot;
	struct coll_mr *sm = parts[0].mhandle, *rm = recv_mh;
	if (ws.aggs) {
		struct coll_mr *st = wstage_get(cc, slot, window_bytes);
		if (!st)
			return -ENOMEM;
		window_req_init(cc, r, COLL_REDUCE_SCATTER, window_bytes / es, d, o, parts[0].address,
				cc->wstage[slot].mem.buf, sm, st);
		r->win_dst = recv;
		ring_window_part(bytes_per_rank, window_offset, window_bytes, cc->rank, &r->win_off,
				 &r->win_len);
		r->blocks = (struct client_blocks){ CLIENT_REDUCE_SCATTER, window_offset, bytes_per_rank };
		return window_issued(cc, r, window_agg_start(cc, r, ws.aggs, ws.epoch), request);
	}
	window_req_init(cc, r, COLL_REDUCE_SCATTER, window_bytes / es, d, o, parts[0].address, recv,
			sm, rm);
	ring_op_start_window(&cc->ring, &r->ring, RING_REDUCE_SCATTER, r->seq, parts[0].address, recv,
			     bytes_per_rank / es, window_offset / es, window_bytes / es, d, o,
			     sm ? sm->ring.desc : NULL, rm ? rm->ring.desc : NULL, slot);
	return window_issued(cc, r, r->ring.err, request);
}
