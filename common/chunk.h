/* The one chunk policy of every Sumcast sender: the client library cutting
 * a shard for an aggregator, and the collnet ring cutting a segment into
 * columns.
 *
 * A part that fits in a few eager-sized messages (at most SC_EAGER_CHUNKS,
 * and no more than the window keeps in flight) goes as eager messages: a
 * message above the provider's eager limit costs ofi_rxm several progress
 * round trips (SAR or rendezvous), which on a loaded host are scheduler
 * waits. Larger parts keep the configured chunk: there the per-message
 * costs are amortised and more, smaller messages only add completions.
 * Chunks are whole elements (callers that want aligned chunks pass aligned
 * sizes); the same inputs give the same cut on every rank. */
#ifndef SUMCAST_CHUNK_H
#define SUMCAST_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#define SC_EAGER_CHUNKS 4u

/* Chunk bytes for a part of part_bytes of elem_size elements, with the
 * configured chunk, the window (chunks in flight) and the provider's eager
 * limit (0: no eager cut). */
static inline size_t sc_chunk_for(size_t part_bytes, size_t elem_size, size_t chunk_bytes,
				  uint32_t window, size_t eager_bytes)
{
	uint32_t n = window < SC_EAGER_CHUNKS ? window : SC_EAGER_CHUNKS;
	size_t chunk, eager;

	if (!elem_size)
		return chunk_bytes;
	chunk = chunk_bytes / elem_size * elem_size;
	eager = eager_bytes / elem_size * elem_size;
	if (!chunk)
		chunk = elem_size;
	if (eager && eager < chunk && part_bytes > eager && part_bytes <= (size_t)n * eager)
		return eager;
	return chunk;
}

#endif
