/* The ring's arithmetic, as pure functions (ring_step.c): how many steps an
 * operation takes, which segment a rank sends and receives at each step,
 * how segments are cut into columns, and the tag of each message. ring.c
 * moves the bytes by these; tests/plugin/test_ring_step.c checks them
 * alone, for every rank of rings of 1 to 9 nodes: every segment ends up
 * reduced exactly once, on its owner (reduce-scatter) or everywhere
 * (allreduce, allgather), and what a rank receives at step g is what its
 * predecessor sends at step g. */
#ifndef SUMCAST_PLUGIN_RING_STEP_H
#define SUMCAST_PLUGIN_RING_STEP_H

#include <stddef.h>
#include <stdint.h>

/* What a ring operation is (ring.h): an allreduce (reduce-scatter, then
 * allgather), or one of CollNet Direct's window operations. */
enum ring_kind { RING_ALLREDUCE = 0, RING_REDUCE_SCATTER, RING_ALLGATHER };

/* Steps of an operation among n ranks: 2(n-1) for an allreduce, n-1 for a
 * window reduce-scatter or allgather. */
uint32_t ring_step_count(enum ring_kind kind, uint32_t n);

/* The segments rank r of n sends to next and receives from prev at step g.
 *   allreduce: steps 0 .. n-2 reduce-scatter (rank r sends segment r - g,
 *     receives r - 1 - g and adds its own contribution), then n-1 ..
 *     2n-3 allgather of the reduced segments (rank r ends the reduce-scatter
 *     holding segment r + 1);
 *   window reduce-scatter: rank r sends segment r - 1 - g, receives
 *     r - 2 - g and adds its own; the last step receives segment r;
 *   window allgather: rank r starts with segment r, sends r - g and
 *     receives r - 1 - g.
 * Rank r + 1 receives at step g what rank r sends at step g. */
void ring_step_segs(enum ring_kind kind, uint32_t n, uint32_t r, uint32_t g, uint32_t *send,
		    uint32_t *recv);

/* The tag of step g of column col: tag_base (kind and id, above the step
 * field), the step's low 12 bits at step_shift, the column's low step_shift
 * bits below (ring_step_col_elems makes the columns few enough). */
uint64_t ring_step_tag(uint64_t tag_base, unsigned step_shift, uint32_t g, size_t col);

/* Segment k of an allreduce of count elements in segments of seg
 * elements: [*b, *e), empty past the end. */
void ring_step_seg(size_t count, size_t seg, uint32_t k, size_t *b, size_t *e);
/* Column j of the segment [b, e) in columns of col elements: *off, and
 * *len (0: the column lies past the segment's end, *off = e). */
void ring_step_col(size_t b, size_t e, size_t col, size_t j, size_t *off, size_t *len);
/* Block k's part of window [win, win + count) of a buffer of blocks of
 * `block` (any unit): [*off, *off + *len) relative to the window, *len 0
 * when they do not meet. A window operation's segment k. */
void ring_window_part(size_t block, size_t win, size_t count, uint32_t k, size_t *off, size_t *len);
/* The longest segment of a window operation (the window's part of its
 * first block, of its last, or a whole block between them): the column
 * count follows from it. */
size_t ring_step_window_seg_max(size_t block, size_t win, size_t count);
/* Column elements for segments of seg_elems elements of es bytes: the one
 * chunk policy (common/chunk.h: chunk_bytes, window, eager_bytes), made
 * large enough that the columns fit in col_bits. */
size_t ring_step_col_elems(size_t seg_elems, size_t es, size_t chunk_bytes, uint32_t window,
			   size_t eager_bytes, unsigned col_bits);

#endif
