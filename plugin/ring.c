/* The ring among the nodes, at the ring step of the flow (NCCL call ->
 * split -> aggregators / ring -> completion): an allreduce's ring part
 * (collnet_allreduce.c), a window op that does not go to the aggregators
 * (collnet_window.c), and failover's and the adaptive split's agreements
 * and recomputations, all as ring_ops on the collnet's own endpoint. This
 * file posts and completes the messages, stages and reduces; which segment
 * each step moves, how segments are cut into columns and the tags come
 * from ring_step.c (pure). ring.h has the whole story. */
#include "ring.h"

#include <errno.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "tags.h"

#define X_IDLE RING_X_IDLE
#define X_POSTED RING_X_POSTED
#define X_DONE RING_X_DONE

int ring_init(struct ring *r, struct fabric *f, const void *next_addr, size_t next_len,
	      const void *prev_addr, size_t prev_len, uint32_t rank, uint32_t nranks,
	      size_t chunk_bytes, uint32_t window, uint32_t tmp_slots)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->f = f;
	r->rank = rank;
	r->nranks = nranks;
	r->chunk_bytes = chunk_bytes & ~(size_t)63;
	if (r->chunk_bytes < 64)
		r->chunk_bytes = 64;
	r->window = window < 1 ? 1 : window > RING_WINDOW_MAX ? RING_WINDOW_MAX : window;
	r->tmp_slots = tmp_slots;
	if (nranks > 1) {
		rc = fabric_av_insert(f, next_addr, next_len, &r->next);
		if (!rc)
			rc = fabric_av_insert(f, prev_addr, prev_len, &r->prev);
		if (rc) {
			SC_WARN("ring: fi_av_insert of a neighbour: %s", fi_strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Staging of `per` bytes per slot in *buf, allocated and registered at the
 * first use: jobs that never need it pay nothing. */
static char *ring_staging(struct ring *r, struct fabric_buf *b, size_t per, uint32_t slot,
			  void **desc)
{
	if (!b->buf && fabric_buf_alloc(r->f, per * r->tmp_slots, b))
		return NULL;
	*desc = b->mr.desc;
	return (char *)b->buf + per * slot;
}

/* Staging for in-place requests: window x chunk per slot. */
static char *ring_tmp(struct ring *r, uint32_t slot, void **desc)
{
	return ring_staging(r, &r->tmp, (size_t)r->window * r->chunk_bytes, slot, desc);
}

/* Reduce-scatter staging: two column buffers per column in flight. */
static char *ring_tmp_rs(struct ring *r, uint32_t slot, void **desc)
{
	return ring_staging(r, &r->tmp_rs, 2 * (size_t)r->window * r->chunk_bytes, slot, desc);
}

void ring_fini(struct ring *r)
{
	fabric_buf_dereg(&r->tmp);
	fabric_buf_dereg(&r->tmp_rs);
}

void ring_free(struct ring *r)
{
	fabric_buf_free(&r->tmp);
	fabric_buf_free(&r->tmp_rs);
}

int ring_post(struct ring *rg, struct ring_xfer *x, bool send, const void *buf, size_t len,
	      void *desc, uint64_t tag)
{
	int rc = send ? fabric_tsend(rg->f, buf, len, desc, rg->next, tag, 0, &x->fop)
		      : fabric_trecv(rg->f, (void *)buf, len, desc, FI_ADDR_UNSPEC, tag, 0, &x->fop);
	if (rc)
		return rc;
	x->state = X_POSTED;
	x->err = 0;
	rg->posted++;
	return 0;
}

bool ring_quiet(const struct ring *rg, uint32_t standing, uint64_t now_ns)
{
	return rg->posted <= standing && now_ns - rg->polled_ns < RING_QUIET_NS;
}

int ring_poll(struct ring *r)
{
	struct fabric_cqe cqe[32];
	int n;

	r->polled_ns = sc_now_ns();
	do {
		n = fabric_cq_poll(r->f, cqe, 32);
		if (n > 0) {
			r->posted = (uint32_t)n < r->posted ? r->posted - (uint32_t)n : 0;
			r->completions += (uint64_t)n;
		}
		for (int i = 0; i < n; i++) {
			struct ring_xfer *x = container_of(cqe[i].op, struct ring_xfer, fop);
			x->len = cqe[i].err ? cqe[i].olen : cqe[i].len;
			x->err = cqe[i].err;
			x->state = X_DONE;
		}
	} while (n == 32);
	if (n < 0) {
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "ring completion queue: %s", fi_strerror(-n));
		r->err = n;
	}
	return n < 0 ? n : 0;
}

static inline uint64_t op_tag(const struct ring_op *o, uint32_t step, size_t col)
{
	return ring_step_tag(o->tag_base, o->step_shift, step, col);
}

/* Segment k: [b, e) in elements of the op's buffer (the window for window
 * operations: block k's part of it, empty when they do not meet). */
static void seg_range(const struct ring_op *o, uint32_t k, size_t *b, size_t *e)
{
	if (o->kind != RING_ALLREDUCE) {
		size_t len;
		ring_window_part(o->block, o->win, o->count, k, b, &len);
		*e = *b + len;
		return;
	}
	ring_step_seg(o->count, o->seg_elems, k, b, e);
}

void ring_op_segment(const struct ring_op *o, uint32_t k, size_t *off, size_t *len)
{
	size_t b, e;

	seg_range(o, k, &b, &e);
	*off = b;
	*len = e - b;
}

static uint32_t op_nsteps(const struct ring_op *o)
{
	return ring_step_count((enum ring_kind)o->kind, o->ring->nranks);
}

/* Chunk j of segment k: element offset and length (0 if past its end). */
static void chunk_range(const struct ring_op *o, uint32_t k, size_t j, size_t *off, size_t *len)
{
	size_t b, e;

	seg_range(o, k, &b, &e);
	ring_step_col(b, e, o->chunk_elems, j, off, len);
}

/* The segments this rank sends to next and receives from prev at step g. */
static void step_segs(const struct ring_op *o, uint32_t g, uint32_t *sseg, uint32_t *rseg)
{
	ring_step_segs((enum ring_kind)o->kind, o->ring->nranks, o->ring->rank, g, sseg, rseg);
}

static void col_enter(struct ring_op *o, struct ring_col *c)
{
	uint32_t ss, rs;
	size_t off, len;

	step_segs(o, c->step, &ss, &rs);
	chunk_range(o, ss, c->j, &off, &len);
	c->s.state = len ? X_IDLE : X_DONE;
	c->s.err = 0;
	chunk_range(o, rs, c->j, &off, &len);
	c->r.state = len ? X_IDLE : X_DONE;
	c->r.err = 0;
	c->r.len = 0;
}

/* Reduce-scatter: the staging buffer of column slot `slot` that step g
 * receives into (the next step sends from it). */
static char *rs_buf(const struct ring_op *o, size_t slot, uint32_t g)
{
	return o->tmp + (2 * slot + (g & 1)) * o->chunk_elems * o->es;
}

/* Posts what the column's current step still needs. */
static int col_post(struct ring_op *o, struct ring_col *c, size_t slot)
{
	struct ring *rg = o->ring;
	uint32_t ss, rs;
	size_t off, len;
	int rc;

	step_segs(o, c->step, &ss, &rs);
	if (c->r.state == X_IDLE) {
		chunk_range(o, rs, c->j, &off, &len);
		void *dst = o->recv + off * o->es, *desc = o->rdesc;
		if (o->kind == RING_REDUCE_SCATTER) {
			if (c->step == rg->nranks - 2 && !o->inplace) {
				dst = o->recv + (off - o->mine_off) * o->es;
			} else {
				dst = rs_buf(o, slot, c->step);
				desc = o->tmp_desc;
			}
		} else if (o->kind == RING_ALLREDUCE && c->step < rg->nranks - 1 && o->inplace) {
			dst = o->tmp + slot * o->chunk_elems * o->es;
			desc = o->tmp_desc;
		}
		rc = ring_post(rg, &c->r, false, dst, len * o->es, desc, op_tag(o, c->step, c->j));
		if (rc == -FI_EAGAIN)
			return 0;
		if (rc)
			return rc;
	}
	if (c->s.state == X_IDLE) {
		chunk_range(o, ss, c->j, &off, &len);
		const void *src = (c->step == 0 ? o->send : o->recv) + off * o->es;
		void *desc = c->step == 0 ? o->sdesc : o->rdesc;
		if (o->kind == RING_REDUCE_SCATTER && c->step > 0) {
			/* the partial received at the previous step */
			src = rs_buf(o, slot, c->step - 1);
			desc = o->tmp_desc;
		} else if (o->kind == RING_ALLGATHER) {
			src = o->recv + off * o->es; /* this rank's segment was copied in */
			desc = o->rdesc;
		}
		rc = ring_post(rg, &c->s, true, src, len * o->es, desc, op_tag(o, c->step, c->j));
		if (rc == -FI_EAGAIN)
			return 0;
		if (rc)
			return rc;
	}
	return 0;
}

/* Column elements for segments of seg_elems (ring_step_col_elems). */
static size_t ring_chunk_elems(const struct ring *r, size_t seg_elems, size_t es, unsigned col_bits)
{
	return ring_step_col_elems(seg_elems, es, r->chunk_bytes, r->window, r->eager_bytes, col_bits);
}

size_t ring_op_tmp_bytes(const struct ring *r, size_t count, enum sc_dtype t, unsigned step_shift)
{
	size_t es = sc_dtype_size(t);

	if (r->nranks == 1 || !count)
		return 0;
	size_t seg = (count + r->nranks - 1) / r->nranks;
	return (size_t)r->window * ring_chunk_elems(r, seg, es, step_shift) * es;
}

/* The fields every ring operation starts with; the rest zero. */
static void op_init(struct ring_op *o, struct ring *r, enum ring_kind kind, const void *send,
		    void *recv, void *sdesc, void *rdesc, size_t count, enum sc_dtype t, enum sc_op op,
		    uint64_t tag_base, unsigned step_shift)
{
	memset(o, 0, sizeof(*o));
	o->ring = r;
	o->kind = (uint8_t)kind;
	o->send = send;
	o->recv = recv;
	o->sdesc = sdesc;
	o->rdesc = rdesc;
	o->count = count;
	o->es = sc_dtype_size(t);
	o->dtype = t;
	o->op = op;
	o->tag_base = tag_base;
	o->step_shift = step_shift;
}

void ring_op_start_tagged(struct ring *r, struct ring_op *o, uint64_t tag_base, unsigned step_shift,
			  const void *send, void *recv, size_t count, enum sc_dtype t, enum sc_op op,
			  void *sdesc, void *rdesc, char *tmp, void *tmp_desc)
{
	op_init(o, r, RING_ALLREDUCE, send, recv, sdesc, rdesc, count, t, op, tag_base, step_shift);
	if (r->nranks == 1 || count == 0) {
		if (send != recv && count)
			memmove(recv, send, count * o->es);
		return; /* ncols = 0: done */
	}
	o->seg_elems = (count + r->nranks - 1) / r->nranks;
	o->chunk_elems = ring_chunk_elems(r, o->seg_elems, o->es, step_shift);
	o->ncols = (o->seg_elems + o->chunk_elems - 1) / o->chunk_elems;
	const char *sb = send, *rb = recv;
	o->inplace = sb < rb + count * o->es && rb < sb + count * o->es;
	if (o->inplace) {
		o->tmp = tmp;
		o->tmp_desc = tmp_desc;
		if (!o->tmp) {
			SC_WARN("ring: no staging memory for an in-place request");
			o->err = -ENOMEM;
		}
	}
}

void ring_op_start_window(struct ring *r, struct ring_op *o, enum ring_kind kind, uint32_t seq,
			  const void *send, void *recv, size_t block, size_t win, size_t count,
			  enum sc_dtype t, enum sc_op op, void *sdesc, void *rdesc, uint32_t slot)
{
	size_t mine_len;

	op_init(o, r, kind, send, recv, sdesc, rdesc, count, t, op, sc_tag_ring(seq, 0, 0), 28);
	o->seq = seq;
	o->block = block;
	o->win = win;
	if (!count || !block)
		return; /* ncols = 0: done */
	ring_op_segment(o, r->rank, &o->mine_off, &mine_len);
	size_t mb = mine_len * o->es;
	const char *sb = send, *rb = recv;
	if (kind == RING_ALLGATHER) {
		/* This rank's part first: then send is never read again, so no
		 * overlap of send and recv can matter. */
		if (mb && rb + o->mine_off * o->es != sb)
			memmove((char *)recv + o->mine_off * o->es, send, mb);
	} else {
		size_t wbytes = count * o->es;
		if (mb && sb < rb + mb && rb < sb + wbytes) {
			if (rb != sb + o->mine_off * o->es) {
				SC_WARN("ring: reduce-scatter seq %u: the result (%p, %zu bytes) overlaps "
					"the window (%p, %zu bytes) other than at this rank's block part",
					seq, recv, mb, send, wbytes);
				o->err = -EINVAL;
				return;
			}
			o->inplace = true;
		}
		if (r->nranks == 1) {
			if (!o->inplace && mb)
				memmove(recv, sb + o->mine_off * o->es, mb);
			return;
		}
	}
	if (r->nranks == 1)
		return;
	o->seg_elems = ring_step_window_seg_max(block, win, count);
	o->chunk_elems = ring_chunk_elems(r, o->seg_elems, o->es, o->step_shift);
	o->ncols = (o->seg_elems + o->chunk_elems - 1) / o->chunk_elems;
	if (kind == RING_REDUCE_SCATTER) {
		size_t need = 2 * (size_t)r->window * o->chunk_elems * o->es;
		o->tmp = ring_tmp_rs(r, slot, &o->tmp_desc);
		if (!o->tmp || need > 2 * (size_t)r->window * r->chunk_bytes) {
			SC_WARN("ring: no staging memory for reduce-scatter seq %u (%zu bytes)", seq, need);
			o->err = -ENOMEM;
		}
	}
}

void ring_op_start(struct ring *r, struct ring_op *o, uint32_t seq, const void *send, void *recv,
		   size_t count, enum sc_dtype t, enum sc_op op, void *sdesc, void *rdesc,
		   uint32_t slot)
{
	const char *sb = send, *rb = recv;
	size_t bytes = count * sc_dtype_size(t);
	char *tmp = NULL;
	void *tmp_desc = NULL;

	if (r->nranks > 1 && count && sb < rb + bytes && rb < sb + bytes)
		tmp = ring_tmp(r, slot, &tmp_desc);
	ring_op_start_tagged(r, o, sc_tag_ring(seq, 0, 0), 28, send, recv, count, t, op, sdesc, rdesc,
			     tmp, tmp_desc);
	o->seq = seq;
}

/* A step of column c (in column slot `slot`) received len elements of
 * its receive segment at off: add this rank's contribution where the kind
 * asks for it. */
static void col_reduce(struct ring_op *o, const struct ring_col *c, size_t slot, size_t off,
		       size_t len)
{
	uint32_t n = o->ring->nranks;

	switch (o->kind) {
	case RING_ALLREDUCE:
		if (c->step < n - 1) {
			const void *src = o->inplace ? o->tmp + slot * o->chunk_elems * o->es
						     : o->send + off * o->es;
			sc_reduce(o->dtype, o->op, o->recv + off * o->es, src, len);
		}
		break;
	case RING_REDUCE_SCATTER:
		if (c->step < n - 2)
			sc_reduce(o->dtype, o->op, rs_buf(o, slot, c->step), o->send + off * o->es, len);
		else if (!o->inplace)
			sc_reduce(o->dtype, o->op, o->recv + (off - o->mine_off) * o->es,
				  o->send + off * o->es, len);
		else /* recv is send's segment: this rank's contribution is there */
			sc_reduce(o->dtype, o->op, o->recv + (off - o->mine_off) * o->es,
				  rs_buf(o, slot, c->step), len);
		break;
	default:
		break;
	}
}

int ring_op_progress(struct ring_op *o)
{
	struct ring *rg = o->ring;
	uint32_t nsteps = op_nsteps(o);
	int rc;

	if (o->err)
		return o->err;
	if (rg->err)
		return o->err = rg->err;
	for (size_t i = 0; i < rg->window; i++) {
		struct ring_col *c = &o->cols[i];
		if (!c->active) {
			if (o->next_col >= o->ncols)
				continue;
			c->active = true;
			c->j = o->next_col++;
			c->step = 0;
			col_enter(o, c);
		}
		for (;;) {
			rc = col_post(o, c, i);
			if (rc) {
				SC_WARN("ring: posting step %u of column %zu: %s", c->step, c->j,
					fi_strerror(-rc));
				return o->err = rc;
			}
			if (c->s.state != X_DONE || c->r.state != X_DONE)
				break;
			if (c->s.err || c->r.err) {
				rc = c->s.err ? c->s.err : c->r.err;
				SC_WARN("ring: step %u of column %zu (seq %u) failed: %s", c->step, c->j,
					o->seq, fi_strerror(-rc));
				return o->err = rc;
			}
			uint32_t ss, rs;
			size_t off, len;
			step_segs(o, c->step, &ss, &rs);
			chunk_range(o, rs, c->j, &off, &len);
			if (len && c->r.len != len * o->es) {
				SC_WARN("ring: step %u got %zu bytes, expected %zu", c->step, c->r.len,
					len * o->es);
				return o->err = -EPROTO;
			}
			if (len)
				col_reduce(o, c, i, off, len);
			if (++c->step == nsteps) {
				c->active = false;
				o->cols_done++;
				if (o->next_col < o->ncols) {
					c->active = true;
					c->j = o->next_col++;
					c->step = 0;
					col_enter(o, c);
					continue;
				}
				break;
			}
			col_enter(o, c);
		}
	}
	return o->cols_done == o->ncols ? 1 : 0;
}

void ring_op_abort(struct ring_op *o)
{
	struct ring *rg = o->ring;

	for (size_t i = 0; i < rg->window; i++) {
		struct ring_col *c = &o->cols[i];
		if (c->active && c->r.state == X_POSTED)
			fabric_cancel(rg->f, &c->r.fop);
	}
	/* Sends finish by themselves or fail; wait (bounded) for everything. */
	for (int spin = 0; spin < 200000; spin++) {
		bool busy = false;
		for (size_t i = 0; i < rg->window; i++) {
			struct ring_col *c = &o->cols[i];
			busy |= c->active && (c->r.state == X_POSTED || c->s.state == X_POSTED);
		}
		if (!busy)
			return;
		ring_poll(rg);
	}
	SC_WARN("ring: request seq %u still has transfers in flight after abort", o->seq);
}

static const char *xfer_state(const struct ring_xfer *x)
{
	return x->state == X_IDLE ? "not posted" : x->state == X_POSTED ? "posted, waiting" : "done";
}

void ring_op_dump(const struct ring_op *o, int level, const char *what)
{
	const struct ring *rg = o->ring;
	uint32_t prev = (rg->rank + rg->nranks - 1) % rg->nranks, next = (rg->rank + 1) % rg->nranks;

	SC_LOG_AT(level, "    %s: ring columns %zu/%zu done, next %zu, %u steps each%s", what, o->cols_done,
		  o->ncols, o->next_col, o->ncols ? op_nsteps(o) : 0, o->err ? " (failed)" : "");
	for (size_t i = 0; i < rg->window && o->ncols; i++) {
		const struct ring_col *c = &o->cols[i];
		if (!c->active)
			continue;
		uint64_t tag = op_tag(o, c->step, c->j);
		SC_LOG_AT(level, "      column %zu step %u: receive from rank %u (tag 0x%016llx) %s; send to "
			  "rank %u (the same tag) %s", c->j, c->step, prev, (unsigned long long)tag,
			  xfer_state(&c->r), next, xfer_state(&c->s));
	}
}
