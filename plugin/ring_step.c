/* The ring's arithmetic (ring_step.h): pure functions of the operation's
 * shape and of a rank's place in the ring, the same on every rank. */
#include "ring_step.h"

#include "chunk.h"

uint32_t ring_step_count(enum ring_kind kind, uint32_t n)
{
	return kind == RING_ALLREDUCE ? 2 * (n - 1) : n - 1;
}

void ring_step_segs(enum ring_kind kind, uint32_t n, uint32_t r, uint32_t g, uint32_t *send,
		    uint32_t *recv)
{
	if (kind == RING_REDUCE_SCATTER) {
		/* ends with segment r at rank r */
		*send = (r + 2 * n - 1 - g) % n;
		*recv = (r + 2 * n - 2 - g) % n;
		return;
	}
	if (kind == RING_ALLGATHER) {
		/* starts with segment r at rank r */
		*send = (r + n - g) % n;
		*recv = (r + 2 * n - 1 - g) % n;
		return;
	}
	if (g < n - 1) {
		*send = (r + n - g % n) % n;
		*recv = (r + 2 * n - g - 1) % n;
	} else {
		uint32_t t = g - (n - 1);
		*send = (r + 1 + n - t) % n;
		*recv = (r + n - t) % n;
	}
}

uint64_t ring_step_tag(uint64_t tag_base, unsigned step_shift, uint32_t g, size_t col)
{
	return tag_base | (uint64_t)(g & 0xFFF) << step_shift |
	       ((uint64_t)col & ((1ull << step_shift) - 1));
}

void ring_step_seg(size_t count, size_t seg, uint32_t k, size_t *b, size_t *e)
{
	size_t s = (size_t)k * seg;

	*b = s < count ? s : count;
	s += seg;
	*e = s < count ? s : count;
}

void ring_step_col(size_t b, size_t e, size_t col, size_t j, size_t *off, size_t *len)
{
	*off = b + j * col;
	if (*off >= e) {
		*off = e;
		*len = 0;
		return;
	}
	*len = e - *off < col ? e - *off : col;
}

void ring_window_part(size_t block, size_t win, size_t count, uint32_t k, size_t *off, size_t *len)
{
	size_t lo = (size_t)k * block, hi = lo + block, we = win + count;

	if (hi <= win || lo >= we) {
		*off = *len = 0;
		return;
	}
	*off = (lo > win ? lo : win) - win;
	*len = (hi < we ? hi : we) - win - *off;
}

size_t ring_step_window_seg_max(size_t block, size_t win, size_t count)
{
	size_t k0 = win / block, k1 = (win + count - 1) / block;

	if (k0 == k1)
		return count;
	size_t first = (k0 + 1) * block - win, last = win + count - k1 * block;
	size_t m = first > last ? first : last;
	return k1 - k0 >= 2 && block > m ? block : m;
}

size_t ring_step_col_elems(size_t seg_elems, size_t es, size_t chunk_bytes, uint32_t window,
			   size_t eager_bytes, unsigned col_bits)
{
	size_t e = sc_chunk_for(seg_elems * es, es, chunk_bytes, window, eager_bytes & ~(size_t)63) / es;
	size_t cols_max = col_bits >= 40 ? SIZE_MAX : (size_t)1 << col_bits;

	if (!e)
		e = 1;
	if ((seg_elems + e - 1) / e > cols_max)
		e = (seg_elems + cols_max - 1) / cols_max;
	return e;
}
