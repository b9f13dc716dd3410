/* Client library: what failover needs of the data path (client.h,
 * "Failover"). A failed aggregator's slots keep the chunk number they
 * carried and whether its result arrived, which is what client_agg_lo and
 * client_chunk_held report; when a request completes, its chunks among each
 * aggregator's last `window` results are copied to the retention slots for
 * ranks that may still lack them, and client_chunk_data finds a result
 * there or in a request still in flight. */
#include "client_int.h"

#include <errno.h>
#include <string.h>

/* The chunks of a request's shard ra on a that need a retention copy now,
 * [*lo, *hi) (empty when *lo >= *hi). Only results among the last `window`
 * that arrived here can be missing elsewhere (client.h, "Failover");
 * results of later requests that came before this look shrink that. */
static void retain_span(const struct client_agg *a, const struct req_agg *ra, uint64_t *lo,
			uint64_t *hi)
{
	uint64_t from = a->hi > a->window ? a->hi - a->window : 0;
	uint64_t end = ra->c0 + ra->nchunks;

	*lo = from > ra->c0 ? from : ra->c0;
	*hi = ra->nchunks && a->window ? (end < a->hi ? end : a->hi) : 0;
}

void client_retain_req(struct client *c, struct client_req *r)
{
	if (!c->retention)
		return;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		uint64_t lo, to;
		/* (copying each result as it lands, while in the cache, copied
		 * more and cost more: docs/journal/2026-11-26-failover-cost.md) */
		retain_span(a, &r->ra[ai], &lo, &to);
		for (uint64_t ch = lo; ch < to; ch++) {
			size_t off, len;
			client_req_chunk_range(r, ai, ch, &off, &len);
			uint32_t k = (uint32_t)(ch % a->window);
			enum client_role role = client_role_of(c, r, off, len);
			/* A GIVE or SOURCE keeps what it sent: a repair may need
			 * it (the contribution, or the result it is). */
			memcpy(client_slot_buf(c->retention, c, ai, k),
			       (client_role_gives_only(role) ? r->send : r->recv) + off, len);
			c->retained++;
			c->retained_bytes += len;
			a->ret[k].chunk = ch;
			a->ret[k].len = len;
			a->ret[k].imm = wire_imm_make(r->t, r->op, 0);
			a->ret[k].role = (uint8_t)role;
		}
	}
}

bool client_retain_hold(const struct client *c, const struct client_req *r, uint64_t now)
{
	bool hold = false;

	if (!c->retention || !c->retain_hold_ms || (r->aggs & c->failed) ||
	    now - r->complete_ns >= (uint64_t)c->retain_hold_ms * 1000000ull)
		return false;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		const struct client_agg *a = &c->aggs[ai];
		const struct req_agg *ra = &r->ra[ai];
		uint64_t lo, to;
		retain_span(a, ra, &lo, &to);
		if (lo >= to)
			continue; /* nothing of r to copy here */
		/* the results that would spare the copy are not all issued, or
		 * waiting for them would leave the aggregator short of work */
		if (a->st != AGG_READY ||
		    a->next_assign < ra->c0 + ra->nchunks + 2 * (uint64_t)a->window)
			return false;
		hold = true;
	}
	return hold;
}

void client_retained(const struct client *c, uint64_t *chunks, uint64_t *bytes)
{
	*chunks = c->retained;
	*bytes = c->retained_bytes;
}

uint64_t client_req_complete_ns(const struct client_req *r)
{
	return r->complete_ns;
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
		if (client_role_gives_only(k->role))
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
	return !client_role_gives_only(k.role) && !k.got;
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
