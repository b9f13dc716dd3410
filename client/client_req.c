/* Client library: starting a request. Its elements are sharded over the
 * aggregators it uses (client_shard), each shard cut into chunks
 * (client_chunk_for) numbered per aggregator when the request starts: chunk
 * numbers are assigned in call order, the same on every rank, and chunk c
 * later uses slot c % window (client_slot.c). A request keeps one cursor per
 * aggregator, not one struct per chunk, and waits in each aggregator's queue
 * until its chunks are issued. See client.h for the contract. */
#include "client_int.h"

#include <errno.h>


void client_req_free(struct client *c, struct client_req *r)
{
	r->in_use = false;
	c->free_reqs[c->nfree++] = r->idx;
}

int client_start(struct client *c, const struct client_blocks *b, const void *send, void *recv,
		 size_t count, enum sc_dtype t, enum sc_op op, void *send_desc, void *recv_desc,
		 uint64_t aggs, struct client_req **out)
{
	uint64_t all = c->naggs >= 64 ? ~0ull : (1ull << c->naggs) - 1;
	struct client_req *r;

	uint64_t left = 0; /* retired (client_agg_retire): no longer ours to use */
	for (size_t ai = 0; ai < c->naggs; ai++)
		left |= (uint64_t)(c->aggs[ai].st == AGG_LEFT) << ai;
	if (!aggs)
		aggs = all & ~left;
	if (!aggs || (aggs & left))
		return -EINVAL;
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
	/* FI_MR_LOCAL (verbs, efa; the fabric's strict mode): the provider
	 * reads and writes registered memory only, named by its descriptor */
	if (count && c->fab->mr_local && (!send_desc || !recv_desc))
		return -EINVAL;
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
	r->complete_ns = 0;
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
			r->take_bytes += client_role_gives_only(role) ? 0 : len;
		}
		if (a->st == AGG_DEAD) {
			ra->off = ra->end; /* failover: the caller repairs these */
			continue;
		}
		STAILQ_INSERT_TAIL(&a->queue, ra, link);
	}
	for (size_t ai = 0; ai < c->naggs && !c->broken; ai++)
		if (r->ra[ai].off != r->ra[ai].end)
			client_slot_issue(c, ai);
	client_agg_settle(c);
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
