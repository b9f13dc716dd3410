/* Client library: the geometry of a request, pure. Which bytes each
 * aggregator's shard and each chunk of it carry, the role this rank plays
 * in a chunk (client.h, "Collectives of blocks": what it sends, what it
 * takes), and how many ranks take the result (multicast's rule). Nothing
 * here changes state. */
#include "client_int.h"

#include "chunk.h"

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

uint32_t client_chunk_takers(const struct client *c, const struct client_req *r, size_t off,
			     size_t len)
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

size_t client_req_left(const struct client_req *r)
{
	return r->chunks_left;
}
