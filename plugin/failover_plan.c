/* Failover's decisions (failover_plan.h): pure functions of what the nodes
 * agreed on and of what this node reports of its chunks. Every node runs
 * the same functions on the same agreed values, so the parts of a repair
 * that must match across nodes (which chunk is copied from which holder,
 * which is recomputed, under which tag) match; each node's own part
 * follows from what it holds, lacks and wants. */
#include "failover_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- epochs ---- */

uint64_t fo_plan_live_for(const struct fo_epoch *e, size_t n, uint64_t idx, uint32_t *epoch)
{
	while (n > 1 && idx < e[n - 1].from)
		n--;
	*epoch = (uint32_t)(n - 1);
	return e[n - 1].live;
}

struct fo_epoch fo_plan_epoch_next(const struct fo_epoch *prev, uint64_t set, uint64_t back,
				   uint64_t from)
{
	return (struct fo_epoch){ .from = from, .live = (prev->live & ~set) | back };
}

/* ---- round 1, naggs values each: [0] -(failed) for the max, [1] failed
 * for the min, [2] the low marks, [3] -(tried) for the max, [4] joined for
 * the min, [5] -(drain) for the max, [6] left for the min; then -(next
 * index) for the max and the next index for the min ---- */

size_t fo_plan_round1_len(size_t naggs)
{
	return 7 * naggs + 2;
}

void fo_plan_round1_fill(size_t naggs, const struct fo_round1_in *in, int64_t *v)
{
	for (size_t ai = 0; ai < naggs; ai++) {
		bool f = in->fenced >> ai & 1;
		v[ai] = -(int64_t)f;
		v[naggs + ai] = f;
		v[2 * naggs + ai] = f ? (int64_t)in->lo[ai] : FO_NONE;
		v[3 * naggs + ai] = -(int64_t)(in->tried >> ai & 1);
		v[4 * naggs + ai] = (int64_t)(in->joined >> ai & 1);
		v[5 * naggs + ai] = -(int64_t)(in->drain >> ai & 1);
		v[6 * naggs + ai] = (int64_t)(in->left >> ai & 1);
	}
	v[7 * naggs] = -(int64_t)in->next;
	v[7 * naggs + 1] = (int64_t)in->next;
}

void fo_plan_round1_read(size_t naggs, const int64_t *v, struct fo_round1 *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t ai = 0; ai < naggs; ai++) {
		out->any |= (uint64_t)(-v[ai] == 1) << ai;
		out->all |= (uint64_t)(v[naggs + ai] == 1) << ai;
		out->lo[ai] = (uint64_t)v[2 * naggs + ai];
		out->tried |= (uint64_t)(-v[3 * naggs + ai] == 1) << ai;
		out->joined |= (uint64_t)(v[4 * naggs + ai] == 1) << ai;
		out->drain |= (uint64_t)(-v[5 * naggs + ai] == 1) << ai;
		out->left |= (uint64_t)(v[6 * naggs + ai] == 1) << ai;
	}
	out->next = (uint64_t)-v[7 * naggs];
	out->next_min = (uint64_t)v[7 * naggs + 1];
}

bool fo_plan_round1_agreed(const struct fo_round1 *r)
{
	return r->any == r->all;
}

uint64_t fo_plan_back(size_t naggs, const struct fo_round1 *r, uint64_t out, const uint64_t *out_from)
{
	uint64_t back = 0;

	for (size_t ai = 0; ai < naggs; ai++)
		if ((r->joined & out & ~r->any) >> ai & 1 && r->next_min >= out_from[ai])
			back |= 1ull << ai;
	return back;
}

uint64_t fo_plan_drain(const struct fo_round1 *r, uint64_t live)
{
	return r->drain & live & ~r->any;
}

/* ---- round 2: per aggregator of the set, w holders then w lackers ---- */

size_t fo_plan_round2_len(size_t naggs, uint64_t set, const uint32_t *w)
{
	size_t n = 0;

	for (size_t ai = 0; ai < naggs; ai++)
		if (set >> ai & 1)
			n += 2 * (size_t)w[ai];
	return n ? n : 1;
}

void fo_plan_round2_fill(int64_t *v, uint32_t w, uint32_t j, uint32_t rank, bool held, bool lacks)
{
	v[j] = held ? (int64_t)rank : FO_NONE;
	v[w + j] = lacks ? (int64_t)rank : FO_NONE;
}

int fo_plan_round2_read(const int64_t *v, uint64_t lo, uint32_t w, struct fo_dead *d)
{
	d->lo = lo;
	d->w = w;
	d->holder = malloc((w ? w : 1) * sizeof(int64_t));
	d->lacker = malloc((w ? w : 1) * sizeof(int64_t));
	if (!d->holder || !d->lacker)
		return -ENOMEM;
	memcpy(d->holder, v, w * sizeof(int64_t));
	memcpy(d->lacker, v + w, w * sizeof(int64_t));
	return 0;
}

/* Below lo every node has it; in the window, the agreed holder and lacker
 * say; past the window no node can hold it (credit flow: a node holding c
 * means every node holds every chunk up to c - window). */
enum fo_fate fo_plan_fate(const struct fo_dead *d, uint64_t c)
{
	if (c < d->lo)
		return FO_HELD;
	if (c - d->lo < d->w && d->holder[c - d->lo] != FO_NONE)
		return d->lacker[c - d->lo] == FO_NONE ? FO_HELD : FO_COPY;
	return FO_REDO;
}

/* ---- this node's part ---- */

int fo_plan_copy(const struct fo_dead *d, uint32_t k, uint32_t rank, uint32_t nranks,
		 const struct fo_chunk *ch, struct fo_act *out, const char **what)
{
	bool has_req = ch->slot >= 0;

	memset(out, 0, sizeof(*out));
	out->kind = FO_ACT_COPY;
	out->c = d->lo + k;
	out->n = 1;
	out->k = k;
	out->root = d->holder[k];
	out->slot = ch->slot;
	if (ch->held) {
		if (!ch->retained) {
			*what = "is held here but not retained";
			return -EPROTO;
		}
		out->here = FO_COPY_SENDS;
	} else if (ch->lacks) {
		if (!has_req) {
			*what = "is lacking here but belongs to no request in flight";
			return -EPROTO;
		}
		out->here = FO_COPY_TAKES;
	} else {
		out->here = FO_COPY_PASSES; /* a reduce-scatter non-owner: the length comes with it */
	}
	out->from_recv = ch->held && has_req && ch->in_recv;
	out->from_send = ch->held && has_req && ch->known && ch->issued && ch->in_send;
	/* A request whose buffer holds our copy, or receives it, stays ours
	 * until the copy has passed; one whose chunk never came back here
	 * ends it when the copy is done. */
	out->settle = has_req && ch->known && !ch->got;
	out->keep_req = has_req && (!ch->held || out->from_recv || out->from_send || out->settle);
	/* The copy walks the ring from the root: every node but the root
	 * receives it, every node but the root's predecessor sends it on. */
	out->rx = (int64_t)rank != out->root;
	out->tx = (int64_t)((rank + 1) % nranks) != out->root;
	out->tx_after_rx = out->tx && !ch->held;
	return 0;
}

int fo_plan_redo_chunk(const struct fo_chunk *ch, struct fo_act *out, const char **what)
{
	/* a reduce-scatter non-owner (GIVE) and an allgather source want no
	 * result; a TAKE gives nothing (zeros) */
	bool wants = ch->role == CLIENT_ROLE_ALL || ch->role == CLIENT_ROLE_TAKE;
	bool has_req = ch->issued && ch->slot >= 0;

	memset(out, 0, sizeof(*out));
	if (!ch->len || (wants && !ch->got && !has_req) || (ch->role != CLIENT_ROLE_TAKE && !ch->gives)) {
		*what = !ch->len    ? "is to be recomputed, but this node has nothing of it"
			: !ch->gives ? "is to be recomputed, but this node has not kept what it sent"
				     : "is to be recomputed, but this node has no request to take it";
		return -EPROTO;
	}
	out->kind = FO_ACT_REDO_CHUNK;
	out->n = 1;
	out->slot = has_req ? ch->slot : -1;
	out->zero = !ch->gives;
	out->settle = has_req && !ch->got;
	out->take = wants && !ch->got;
	return 0;
}

bool fo_plan_redo_run(const struct fo_dead *d, uint64_t c0, uint64_t n, uint64_t *from,
		      uint64_t *rc0, uint64_t *rn)
{
	uint64_t c = *from;

	while (c < c0 + n && fo_plan_fate(d, c) != FO_REDO)
		c++;
	if (c >= c0 + n) {
		*from = c;
		return false;
	}
	*rc0 = c;
	while (c < c0 + n && fo_plan_fate(d, c) == FO_REDO)
		c++;
	*rn = c - *rc0;
	*from = c;
	return true;
}

static int refuse(const struct fo_view *v, size_t agg, uint64_t c, const char *what)
{
	if (what)
		v->refuse(v->ctx, agg, c, what);
	return -EPROTO;
}

/* Chunk c (fate FO_REDO) of a window op in flight here, alone. */
static int redo_window_chunk(const struct fo_view *v, size_t ai, uint64_t c, struct fo_counts *n)
{
	struct fo_chunk ch;
	struct fo_act a;
	const char *what;
	int rc;

	v->chunk(v->ctx, ai, c, &ch);
	if (!ch.known)
		return -EPROTO;
	if (fo_plan_redo_chunk(&ch, &a, &what))
		return refuse(v, ai, c, what);
	a.agg = ai;
	a.c = c;
	if ((rc = v->act(v->ctx, &a)))
		return rc;
	n->redo_chunks++;
	n->redo_bytes += ch.len;
	return 0;
}

/* The part on failed aggregator ai of the request in slot: an allreduce's
 * runs of chunks no node holds, each one ring allreduce; a window op's
 * such chunks, each alone. Copies are separate (fo_plan_decide). */
static int redo_req(const struct fo_view *v, const struct fo_dead *d, size_t ai, uint32_t slot,
		    struct fo_counts *n)
{
	uint64_t c0, cn, from, rc0, rn;
	uint32_t run = 0;
	bool window;
	int rc;

	if (!v->req(v->ctx, slot, ai, &window, &c0, &cn))
		return 0;
	if (window) {
		for (uint64_t c = c0; c < c0 + cn; c++)
			if (fo_plan_fate(d, c) == FO_REDO && (rc = redo_window_chunk(v, ai, c, n)))
				return rc;
		return 0;
	}
	from = c0;
	while (fo_plan_redo_run(d, c0, cn, &from, &rc0, &rn)) {
		struct fo_act a = { .kind = FO_ACT_REDO_RUN, .agg = ai, .c = rc0, .n = rn,
				    .slot = (int)slot, .run = run++, .settle = true };
		if ((rc = v->act(v->ctx, &a)))
			return rc;
		n->redo_chunks += rn;
		n->redo_bytes += v->span(v->ctx, slot, ai, rc0, rn);
	}
	return 0;
}

/* The window's chunks of failed aggregator ai: copies, and the ends of
 * chunks held everywhere that wants them. */
static int window_chunks(const struct fo_view *v, const struct fo_dead *d, size_t ai,
			 struct fo_counts *n)
{
	for (uint32_t j = 0; j < d->w; j++) {
		uint64_t c = d->lo + j;
		struct fo_chunk ch;
		struct fo_act a;
		const char *what;
		int rc;

		if (d->holder[j] == FO_NONE)
			continue; /* recomputed: the requests' part, or kept_chunks */
		v->chunk(v->ctx, ai, c, &ch);
		if (d->lacker[j] != FO_NONE) {
			if (fo_plan_copy(d, j, v->rank, v->nranks, &ch, &a, &what))
				return refuse(v, ai, c, what);
			a.agg = ai;
			if ((rc = v->act(v->ctx, &a)))
				return rc;
			if (a.here == FO_COPY_TAKES) {
				n->lacking++;
				n->copy_bytes += ch.range_len;
			} else if (a.here == FO_COPY_PASSES) {
				n->passed++;
			}
			continue;
		}
		/* Held where it is wanted, so nothing moves; but a node that
		 * wants none of it (a reduce-scatter non-owner, an allgather
		 * source) may not have had its empty result: its request ends
		 * the chunk here. */
		if (ch.known && ch.issued && !ch.got && ch.slot >= 0) {
			a = (struct fo_act){ .kind = FO_ACT_END, .agg = ai, .c = c, .n = 1,
					     .slot = ch.slot };
			if ((rc = v->act(v->ctx, &a)))
				return rc;
		}
	}
	return 0;
}

/* Window chunks no node holds whose request completed here: what this node
 * sent is in retention (a reduce-scatter non-owner's request completes
 * with its empty result). */
static int kept_chunks(const struct fo_view *v, const struct fo_dead *d, size_t ai,
		       struct fo_counts *n)
{
	int rc = 0;

	for (uint32_t j = 0; j < d->w && !rc; j++) {
		uint64_t c = d->lo + j;
		struct fo_chunk ch;
		struct fo_act a;
		const char *what;

		if (fo_plan_fate(d, c) != FO_REDO)
			continue;
		v->chunk(v->ctx, ai, c, &ch);
		if (!ch.known || ch.issued)
			continue;
		if (fo_plan_redo_chunk(&ch, &a, &what)) {
			rc = refuse(v, ai, c, what);
		} else {
			a.agg = ai;
			a.c = c;
			rc = v->act(v->ctx, &a);
		}
		/* counted whatever came of it: the WARN line says what was due */
		n->redo_chunks++;
		n->kept++;
		n->redo_bytes += ch.len;
	}
	return rc;
}

int fo_plan_decide(const struct fo_view *v, const struct fo_dead *deads, uint64_t set,
		   struct fo_counts *n)
{
	int rc = 0;

	for (size_t ai = 0; ai < v->naggs && !rc; ai++) {
		if (!(set >> ai & 1))
			continue;
		rc = window_chunks(v, &deads[ai], ai, n);
		for (uint32_t i = 0; i < v->nslots && !rc; i++)
			rc = redo_req(v, &deads[ai], ai, i, n);
		if (!rc)
			rc = kept_chunks(v, &deads[ai], ai, n);
	}
	return rc;
}

int fo_plan_req(const struct fo_view *v, const struct fo_dead *deads, uint64_t dead, uint32_t slot,
		struct fo_counts *n)
{
	int rc = 0;

	for (size_t ai = 0; ai < v->naggs && !rc; ai++)
		if (dead >> ai & 1)
			rc = redo_req(v, &deads[ai], ai, slot, n);
	return rc;
}
