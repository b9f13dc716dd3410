/* Ring collectives among the nodes over the collnet's own fabric endpoint:
 * allreduce (reduce-scatter + allgather), and NCCL's CollNet Direct
 * reduce-scatter and allgather of a window of blocks; tagged messages,
 * chunked, pipelined across chunk columns, reduced on the host with
 * sc_reduce. Non-blocking: the caller polls ring_poll() and
 * ring_op_progress() from test().
 *
 * The ring part [first, first + count) of a request is cut into nranks
 * segments; segment k is cut into columns of chunk_elems. A column walks
 * 2(N-1) steps; in each it sends one chunk to the next rank and receives one
 * from the previous, and moves on when both completed (so no buffer is
 * written while a send still reads it). Up to `window` columns are active.
 *
 * Tags (common/tags.h): a request's ring part uses kind 0x5 | seq:20 |
 * step:12 | column:28; ring_op_start_tagged lets the collnet's failover
 * run allreduces under its own tag prefixes (the step and column fields
 * then sit below step_shift). Results are bitwise equal on every rank:
 * each segment is reduced once, by its owner's chain, and the allgather
 * copies it.
 *
 * Which segment a step sends and receives, the columns and the tags are
 * ring_step.c's pure functions (ring_step.h), tested alone.
 *
 * Window operations (ring_op_start_window): the global buffer is nranks
 * blocks of `block` elements, block k belonging to rank k; the operation
 * covers the window [win, win + count) of it, and segment k is block k's
 * part of the window (possibly empty). Segments of unequal length cut into
 * the same columns; a column past a segment's end moves nothing there.
 *   RING_REDUCE_SCATTER: send is the window (count elements) of this
 *     rank's contribution; recv is this rank's segment of the result. N-1
 *     steps: at step g rank r sends the partial of segment r-1-g (its own
 *     contribution at g = 0, else what it received at g-1) and receives the
 *     partial of segment r-2-g from prev, into staging (two column buffers,
 *     by step parity), adding its own contribution; the last step receives
 *     segment r itself, into recv. recv may be exactly send's segment r
 *     (in place); any other overlap is refused.
 *   RING_ALLGATHER (bytes: type u8): send is this rank's segment (copied
 *     into recv at the start, memmove), recv the window. N-1 steps: at step
 *     g rank r sends segment r-g from recv and receives r-1-g into recv.
 * Nothing outside the window (recv's count elements for allgather, the
 * segment for reduce-scatter) is written. */
#ifndef SUMCAST_PLUGIN_RING_H
#define SUMCAST_PLUGIN_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "reduce.h"
#include "ring_step.h"

#define RING_WINDOW_MAX 16

struct ring {
	struct fabric *f;
	fi_addr_t next, prev;
	uint32_t rank, nranks;
	size_t chunk_bytes;
	uint32_t window;
	/* The provider's eager limit, 0: none. A request whose segments fit in
	 * window x eager_bytes is cut into columns of eager_bytes (every step
	 * message eager) instead of chunk_bytes. Same on every rank (set from
	 * rank 0's handle after ring_init). */
	size_t eager_bytes;
	/* staging for in-place requests: nslots x window x chunk_bytes */
	struct fabric_buf tmp;
	/* staging for reduce-scatter partials: nslots x 2 x window x chunk_bytes
	 * (allocated at the first reduce-scatter) */
	struct fabric_buf tmp_rs;
	uint32_t tmp_slots;
	int err; /* sticky CQ failure */
	uint32_t posted;   /* operations posted on f and not completed (ring_post, ring_poll) */
	uint64_t completions; /* completions ring_poll has read, ever (a blocking wait's progress) */
	uint64_t polled_ns; /* last ring_poll */
};

/* Every operation on the collnet's endpoint is a ring_xfer: ring_poll
 * marks them done, whoever posted them. */
enum { RING_X_IDLE = 0, RING_X_POSTED, RING_X_DONE };
struct ring_xfer {
	struct fabric_op fop;
	uint8_t state; /* RING_X_* */
	int err;
	size_t len;
};

/* Posts x on the collnet's endpoint (a send to the next rank, or a receive
 * from anyone) and counts it: 0 (x is RING_X_POSTED), -FI_EAGAIN (x stays
 * as it was: retry later) or a provider error. */
int ring_post(struct ring *rg, struct ring_xfer *x, bool send, const void *buf, size_t len,
	      void *desc, uint64_t tag);
/* Whether a CQ read can wait: nothing is posted but `standing` receives
 * that may wait long (failover's notice), and the queue was read less
 * than RING_QUIET_NS ago (so those are still served within that). */
#define RING_QUIET_NS 100000ull
bool ring_quiet(const struct ring *rg, uint32_t standing, uint64_t now_ns);

struct ring_col {
	size_t j;      /* column index */
	uint32_t step; /* 0 .. 2(N-1)-1 */
	bool active;
	struct ring_xfer s, r;
};

struct ring_op {
	struct ring *ring;
	uint8_t kind; /* enum ring_kind */
	const char *send;
	char *recv;
	void *sdesc, *rdesc;
	size_t count, es;
	enum sc_dtype dtype;
	enum sc_op op;
	uint32_t seq;
	uint64_t tag_base;   /* tag bits above the step field */
	unsigned step_shift; /* step:12 sits at [step_shift, step_shift + 12), column below */
	size_t seg_elems, chunk_elems, ncols, next_col, cols_done;
	/* window operations: blocks of `block` elements, the window starts at
	 * element `win` of the global buffer; this rank's segment starts at
	 * window element mine_off */
	size_t block, win, mine_off;
	bool inplace;
	char *tmp; /* this op's staging (window x chunk) if inplace */
	void *tmp_desc;
	int err;
	struct ring_col cols[RING_WINDOW_MAX];
};

int ring_init(struct ring *r, struct fabric *f, const void *next_addr, size_t next_len,
	      const void *prev_addr, size_t prev_len, uint32_t rank, uint32_t nranks,
	      size_t chunk_bytes, uint32_t window, uint32_t tmp_slots);
/* Deregisters the staging (before the endpoint's domain closes); ring_free
 * frees it once the endpoint is closed (an aborted op's receive may still
 * be posted into it until then). */
void ring_fini(struct ring *r);
void ring_free(struct ring *r);

/* Starts an allreduce of count elements at send/recv (already offset to the
 * ring part). slot picks the staging area for in-place requests. */
void ring_op_start(struct ring *r, struct ring_op *o, uint32_t seq, const void *send, void *recv,
		   size_t count, enum sc_dtype t, enum sc_op op, void *sdesc, void *rdesc,
		   uint32_t slot);
/* The same under tag_base (kind and id bits above step_shift + 12), the
 * step at step_shift and the column below it (columns are made large
 * enough to number them in step_shift bits). In-place requests stage in
 * tmp (ring_op_tmp_bytes, registered: tmp_desc); tmp may be NULL when send
 * and recv do not overlap. */
void ring_op_start_tagged(struct ring *r, struct ring_op *o, uint64_t tag_base, unsigned step_shift,
			  const void *send, void *recv, size_t count, enum sc_dtype t, enum sc_op op,
			  void *sdesc, void *rdesc, char *tmp, void *tmp_desc);
size_t ring_op_tmp_bytes(const struct ring *r, size_t count, enum sc_dtype t, unsigned step_shift);
/* A window operation (RING_REDUCE_SCATTER or RING_ALLGATHER, see above):
 * block and win in elements of t (u8 for allgather), count the window's
 * elements. Staging comes from slot's share of the ring's reduce-scatter
 * area. Errors (bad overlap, no memory) show in ring_op_progress. */
void ring_op_start_window(struct ring *r, struct ring_op *o, enum ring_kind kind, uint32_t seq,
			  const void *send, void *recv, size_t block, size_t win, size_t count,
			  enum sc_dtype t, enum sc_op op, void *sdesc, void *rdesc, uint32_t slot);
/* Segment k of a window operation: element offset in the window and length. */
void ring_op_segment(const struct ring_op *o, uint32_t k, size_t *off, size_t *len);
/* 1: done, 0: in progress, <0: failed. */
int ring_op_progress(struct ring_op *o);
/* Reads completions. Returns 0 or a negative FI_E*. */
int ring_poll(struct ring *r);
/* Cancels what o has posted and waits (bounded) for the cancels. */
void ring_op_abort(struct ring_op *o);
/* Logs at level what o waits for: each active column's step, the message
 * it receives from the previous rank (its tag) and its send to the next,
 * posted or done. what names the operation. */
void ring_op_dump(const struct ring_op *o, int level, const char *what);

#endif
