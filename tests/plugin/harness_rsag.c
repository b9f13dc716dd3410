/* The window test (harness rsag): CollNet Direct's ireducescatter and
 * iallgather, driven the way NCCL's proxy drives them (NCCL v2.28.9,
 * src/transport/coll_net.cc: sendProxyProgress, calcAlgoOffset,
 * collNet[Reg]Iallgather, collNet[Reg]Ireducescatter):
 *
 *   - the global buffer is nNodes blocks of bytesPerRank, block k being
 *     collnet rank k's; sub s of step t covers [(t*nsubs + s)*chunk, + chunk)
 *     of it, clamped to the buffer, and each group of 8 subs issues one
 *     request for its subs' span: windows that start mid-block and span
 *     block boundaries, whole blocks, bits of one block;
 *   - requests go out in (step, group) order on every node, each group
 *     keeps up to NCCL_STEPS (8) outstanding and tests its oldest; a NULL
 *     request is retried as the same call;
 *   - "region" cases use NCCL's staging: every request has its own send
 *     and receive slices (the window, or this node's part of it), fenced
 *     by canaries, checked when the request completes: the exact result,
 *     no byte written outside what the request owns, the send data intact;
 *   - "user buffer" cases use NCCL's registered-buffer rule: the window
 *     pointer is the buffer + windowOffset, the other one this node's
 *     block, advanced by windowOffset % bytesPerRank only when the window
 *     starts in that block; checked at the end, and after each completion
 *     nothing written past the windows issued so far; in place too;
 *   - every type and op reduceSupport accepts, windows of single elements,
 *     explicit windows (empty part on this node, all of one block, the
 *     whole buffer), pipelines deeper than the plugin's 16 requests (NULL
 *     retries must happen), allreduces interleaved with windows (one
 *     request order), and a node that starts late.
 * Results must equal an exact reference (inputs make every order of
 * reduction exact), and the allgather results must be bitwise equal on
 * every node. */
#include "harness.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"

#define GUARD 64
#define CANARY 0xA5
#define STEPS 8      /* NCCL_STEPS: outstanding per group */
#define GROUP_SUBS 8 /* COLLNET_GROUP_NSUBS */
#define MAX_GROUPS 4
#define AR_COUNT 257 /* the allreduce interleaved with windows (f32 sum) */

enum { RS = 0, AG = 1 };

struct wcase {
	const char *name;
	int kind;            /* RS or AG */
	ncclDataType_t t;    /* RS: the type (AG: bytes) */
	ncclRedOp_t op;
	size_t bpr_elems;    /* bytesPerRank / element size */
	size_t chunk_elems;  /* NCCL's chunkSize, in elements */
	int nsubs;           /* subs of the op: groups of 8 */
	bool ub;             /* registered user buffers, else staging slices */
	bool inplace;        /* ub: RS recv = send + rank block, AG send = recv + rank block */
	bool mix_ar;         /* an allreduce after every window */
	bool late;           /* the last rank starts late, rank 0 pauses half-way */
	/* 24 outstanding, the plugin has 16, and the last node late: windows of
	 * block 1 on wait for it at rank 0, whose 17th call must return NULL */
	bool expect_nulls;
	/* explicit windows {offset, length} in elements instead of NCCL's
	 * schedule (they overlap: staging slices only, as NCCL never has two
	 * requests write the same bytes) */
	const size_t (*windows)[2];
	size_t nwindows;
};

struct win {
	size_t off, bytes; /* in the global buffer */
	int group;         /* MAX_GROUPS: the interleaved allreduce */
};

struct slot {
	bool busy;
	size_t w;       /* window index */
	void *req;
	uint8_t *send, *recv; /* region: this slot's slices (after the front guard) */
};

static size_t es_of(const struct wcase *c)
{
	return c->kind == AG ? 1 : type_size(c->t);
}

/* The allgather's byte at global offset g (depends on g only: a byte in the
 * wrong place, or from the wrong node's block, shows). */
static uint8_t ag_byte(size_t g)
{
	uint8_t b = (uint8_t)((g * 0x9E3779B97F4A7C15ull) >> 56);
	return b == CANARY ? (uint8_t)(b ^ 0x5A) : b;
}

/* This node's part of window [wo, wo + wb): [*b, *e) in global bytes
 * (empty: *b == *e). */
static void own_part(size_t bpr, size_t wo, size_t wb, size_t *b, size_t *e)
{
	size_t lo = (size_t)my_rank * bpr, hi = lo + bpr;
	*b = wo > lo ? wo : lo;
	*e = wo + wb < hi ? wo + wb : hi;
	if (*e < *b || *b >= hi || *e <= lo)
		*b = *e = lo;
}

/* The data this node contributes at global bytes [b, e) (RS: its input of
 * the whole buffer; AG: its block). */
static void fill_input(const struct wcase *c, uint8_t *dst, size_t b, size_t e)
{
	size_t es = es_of(c);
	if (c->kind == AG) {
		for (size_t g = b; g < e; g++)
			dst[g - b] = ag_byte(g);
		return;
	}
	for (size_t i = b / es; i < e / es; i++)
		put(c->t, dst, i - b / es, in_val(c->t, c->op, my_rank, i));
}

/* 0 when dst holds the result of global bytes [b, e), else the first byte
 * offset that differs + 1. */
static size_t check_result(const struct wcase *c, const uint8_t *dst, size_t b, size_t e)
{
	size_t es = es_of(c);
	uint8_t want[8];
	if (c->kind == AG) {
		for (size_t g = b; g < e; g++)
			if (dst[g - b] != ag_byte(g))
				return g - b + 1;
		return 0;
	}
	for (size_t i = b / es; i < e / es; i++) {
		put(c->t, want, 0, ref_val(c->t, c->op, i));
		if (memcmp(dst + (i - b / es) * es, want, es))
			return (i - b / es) * es + 1;
	}
	return 0;
}

static size_t check_input(const struct wcase *c, const uint8_t *src, size_t b, size_t e)
{
	size_t es = es_of(c);
	uint8_t want[8];
	if (c->kind == AG) {
		for (size_t g = b; g < e; g++)
			if (src[g - b] != ag_byte(g))
				return g - b + 1;
		return 0;
	}
	for (size_t i = b / es; i < e / es; i++) {
		put(c->t, want, 0, in_val(c->t, c->op, my_rank, i));
		if (memcmp(src + (i - b / es) * es, want, es))
			return (i - b / es) * es + 1;
	}
	return 0;
}

/* First byte of [p, p + n) that is not the canary, + 1; 0 if none. */
static size_t canary_bad(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != CANARY)
			return i + 1;
	return 0;
}

/* NCCL's schedule (calcAlgoOffset with isAllNotOne = 1): step t, group g
 * covers subs [8g, min(8g + 8, nsubs)) of chunk-sized pieces; empty windows
 * are not issued (NCCL finishes them trivially). */
static size_t schedule(const struct wcase *c, size_t total, struct win *w, size_t max)
{
	size_t n = 0, es = es_of(c), chunk = c->chunk_elems * es;
	int ngroups = (c->nsubs + GROUP_SUBS - 1) / GROUP_SUBS;

	if (c->windows) {
		for (size_t i = 0; i < c->nwindows && n < max; i++) {
			size_t wo = c->windows[i][0] * es, wb = c->windows[i][1] * es;
			/* sizes given in blocks beyond the buffer are cut to it */
			if (wo >= total)
				continue;
			if (wb > total - wo)
				wb = total - wo;
			w[n++] = (struct win){ wo, wb, (int)(i % (size_t)ngroups) };
		}
		return n;
	}
	for (size_t t = 0;; t++) {
		size_t base = t * (size_t)c->nsubs * chunk;
		if (base >= total)
			break;
		for (int g = 0; g < ngroups; g++) {
			size_t s0 = (size_t)g * GROUP_SUBS, s1 = s0 + GROUP_SUBS;
			if (s1 > (size_t)c->nsubs)
				s1 = (size_t)c->nsubs;
			size_t b = base + s0 * chunk, e = base + s1 * chunk;
			b = b < total ? b : total;
			e = e < total ? e : total;
			if (e > b) {
				REQUIRE(n < max, "schedule: more than %zu windows", max);
				w[n++] = (struct win){ b, e - b, g };
			}
		}
	}
	return n;
}

static ncclResult_t issue_window(const struct wcase *c, void *cc, void *mh, const struct win *w,
				 uint8_t *send, uint8_t *recv, void **req)
{
	size_t bpr = c->bpr_elems * es_of(c);
	if (c->kind == AG)
		return c_iallgather_rc(cc, send, recv, bpr, w->off, w->bytes, mh, mh, req);
	return c_ireducescatter_rc(cc, send, recv, bpr, w->off, w->bytes, c->t, c->op, mh, mh, req);
}

/* The region bytes case c needs (run_case's layout, below). */
static size_t case_need(const struct wcase *c)
{
	size_t es = es_of(c), bpr = c->bpr_elems * es, total = bpr * (size_t)opt.nranks;
	int ngroups = (c->nsubs + GROUP_SUBS - 1) / GROUP_SUBS;
	size_t maxw = c->windows ? total : (size_t)GROUP_SUBS * c->chunk_elems * es;
	if (maxw > total)
		maxw = total;
	size_t slice = (maxw + 2 * GUARD + 63) & ~(size_t)63;
	size_t ar_slice = (AR_COUNT * 4 + 2 * GUARD + 63) & ~(size_t)63;
	size_t need = c->ub ? total + bpr + 4 * GUARD : (size_t)ngroups * STEPS * 2 * slice;
	need = (need + 63) & ~(size_t)63;
	return need + STEPS * 2 * ar_slice;
}

static uint64_t run_case(const struct wcase *c, void *cc, void *mh, uint8_t *region, size_t region_len,
			 uint64_t *nulls_out)
{
	size_t es = es_of(c), bpr = c->bpr_elems * es, total = bpr * (size_t)opt.nranks;
	size_t own_b = (size_t)my_rank * bpr;
	int ngroups = (c->nsubs + GROUP_SUBS - 1) / GROUP_SUBS;
	size_t maxw = c->windows ? total : (size_t)GROUP_SUBS * c->chunk_elems * es;
	if (maxw > total)
		maxw = total;
	size_t nmax = c->windows ? c->nwindows : (total + c->chunk_elems * es - 1) / (c->chunk_elems * es) + 8;
	struct win *wins = calloc(2 * nmax + 1, sizeof(*wins));
	REQUIRE(wins && ngroups <= MAX_GROUPS, "case %s: setup", c->name);
	size_t nw = schedule(c, total, wins, nmax);
	if (c->mix_ar) {
		/* an allreduce after every window, in its own FIFO */
		for (size_t i = nw; i-- > 0;) {
			wins[2 * i] = wins[i];
			wins[2 * i + 1] = (struct win){ 0, AR_COUNT * 4, MAX_GROUPS };
		}
		nw *= 2;
	}
	/* Memory: region mode, per (group, FIFO position) a send and a receive
	 * slice of maxw + 2 guards; user buffers: send and receive buffers of
	 * the whole buffer / a block; allreduce slices after them. */
	size_t slice = (maxw + 2 * GUARD + 63) & ~(size_t)63;
	size_t ar_slice = (AR_COUNT * 4 + 2 * GUARD + 63) & ~(size_t)63;
	size_t ub_send = c->kind == RS ? total : bpr, ub_recv = c->kind == RS ? bpr : total;
	size_t need = c->ub ? ub_send + ub_recv + 4 * GUARD : (size_t)ngroups * STEPS * 2 * slice;
	need = (need + 63) & ~(size_t)63; /* the allreduce slices: f32-aligned */
	need += STEPS * 2 * ar_slice;
	REQUIRE(need == case_need(c), "case %s: case_need says %zu, the layout %zu", c->name, case_need(c), need);
	REQUIRE(need <= region_len, "case %s needs %zu bytes of region, have %zu", c->name, need, region_len);
	memset(region, CANARY, need);
	uint8_t *ub_s = region + GUARD, *ub_r = region + ub_send + 3 * GUARD;
	uint8_t *ar_base = region + need - STEPS * 2 * ar_slice;
	if (c->ub) {
		if (c->inplace && c->kind == RS)
			ub_r = ub_s + own_b; /* NCCL's in-place reduce-scatter */
		else if (c->inplace)
			ub_s = ub_r + own_b; /* and in-place allgather */
		if (c->kind == RS)
			fill_input(c, ub_s, 0, total);
		else
			fill_input(c, ub_s, own_b, own_b + bpr);
	}

	struct slot slots[MAX_GROUPS + 1][STEPS];
	size_t head[MAX_GROUPS + 1] = { 0 }, tail[MAX_GROUPS + 1] = { 0 };
	memset(slots, 0, sizeof(slots));
	size_t next = 0, done = 0, frontier = 0;
	uint64_t nulls = 0, hash = 0;
	bool paused = false;

	REQUIRE(!(c->windows && c->ub), "case %s: explicit windows want staging slices", c->name);
	double end = sc_now_s() + 120;

	if (c->late && my_rank == opt.nranks - 1)
		usleep(200000); /* the others issue and wait for this node */
	while (done < nw) {
		REQUIRE(sc_now_s() < end, "case %s: %zu of %zu requests done after 120 s (%llu NULL "
		      "returns)", c->name, done, nw, (unsigned long long)nulls);
		if (next < nw) {
			const struct win *w = &wins[next];
			int g = w->group;
			if (tail[g] - head[g] < STEPS) {
				struct slot *s = &slots[g][tail[g] % STEPS];
				uint8_t *snd, *rcv;
				ncclResult_t rc;
				if (c->late && my_rank == 0 && next == nw / 2 && !paused) {
					paused = true; /* the others run ahead now */
					usleep(100000);
				}
				if (g == MAX_GROUPS) {
					uint8_t *a = ar_base + (tail[g] % STEPS) * 2 * ar_slice;
					snd = a + GUARD;
					rcv = a + ar_slice + GUARD;
					for (size_t i = 0; i < AR_COUNT; i++)
						put(ncclFloat32, snd, i, in_val(ncclFloat32, ncclSum, my_rank, i + next));
					memset(rcv, CANARY, AR_COUNT * 4);
					rc = c_iallreduce_rc(cc, snd, rcv, AR_COUNT, ncclFloat32, ncclSum, mh, &s->req);
				} else if (c->ub) {
					size_t ob, oe;
					own_part(bpr, w->off, w->bytes, &ob, &oe);
					/* NCCL's rule: advance the node-side pointer by
					 * windowOffset % bytesPerRank only when the
					 * window starts in this node's block */
					size_t adv = w->off / bpr == (size_t)my_rank ? w->off % bpr : 0;
					if (c->kind == RS) {
						snd = ub_s + w->off;
						rcv = ub_r + adv;
					} else {
						snd = ub_s + adv;
						rcv = ub_r + w->off;
					}
					rc = issue_window(c, cc, mh, w, snd, rcv, &s->req);
				} else {
					uint8_t *a = region + ((size_t)g * STEPS + tail[g] % STEPS) * 2 * slice;
					size_t ob, oe;
					own_part(bpr, w->off, w->bytes, &ob, &oe);
					snd = a + GUARD;
					rcv = a + slice + GUARD;
					memset(a, CANARY, 2 * slice);
					if (c->kind == RS)
						fill_input(c, snd, w->off, w->off + w->bytes);
					else
						fill_input(c, snd, ob, oe);
					rc = issue_window(c, cc, mh, w, snd, rcv, &s->req);
				}
				REQUIRE(rc == ncclSuccess, "case %s: request %zu (window %zu +%zu) returned %d",
				      c->name, next, w->off, w->bytes, (int)rc);
				if (!s->req) {
					nulls++; /* NCCL retries the same call */
				} else {
					s->busy = true;
					s->w = next;
					s->send = snd;
					s->recv = rcv;
					tail[g]++;
					if (g != MAX_GROUPS && w->off + w->bytes > frontier)
						frontier = w->off + w->bytes;
					next++;
				}
			}
		}
		bool any = false;
		for (int g = 0; g <= MAX_GROUPS; g++) {
			if (head[g] == tail[g])
				continue;
			struct slot *s = &slots[g][head[g] % STEPS];
			int size = -1;
			if (!c_test(s->req, &size))
				continue;
			any = true;
			const struct win *w = &wins[s->w];
			size_t bad;
			if (g == MAX_GROUPS) {
				REQUIRE(size == AR_COUNT * 4, "case %s: allreduce size %d", c->name, size);
				for (size_t i = 0; i < AR_COUNT; i++) {
					float v = ((float *)s->recv)[i], want = (float)ref_val(ncclFloat32, ncclSum, i + s->w);
					REQUIRE(v == want, "case %s: interleaved allreduce %zu element %zu: %g, want %g",
					      c->name, s->w, i, (double)v, (double)want);
				}
				REQUIRE(!canary_bad(s->recv + AR_COUNT * 4, GUARD) && !canary_bad(s->recv - GUARD, GUARD),
				      "case %s: interleaved allreduce wrote outside its buffer", c->name);
			} else {
				REQUIRE((size_t)size == w->bytes, "case %s: test size %d, window %zu", c->name, size, w->bytes);
				size_t ob, oe;
				own_part(bpr, w->off, w->bytes, &ob, &oe);
				if (!c->ub) {
					/* the exact result, and nothing else written */
					size_t rb = c->kind == RS ? ob : w->off, re = c->kind == RS ? oe : w->off + w->bytes;
					bad = check_result(c, s->recv, rb, re);
					REQUIRE(!bad, "case %s: window [%zu, +%zu) result byte %zu (global %zu) wrong",
					      c->name, w->off, w->bytes, bad - 1, rb + bad - 1);
					if (c->kind == AG) /* groups complete in any order: a sum */
						hash += fnv(0xcbf29ce484222325ull ^ s->w, s->recv, re - rb);
					bad = canary_bad(s->recv - GUARD, GUARD);
					REQUIRE(!bad, "case %s: window [%zu, +%zu): byte %zu before the result written",
					      c->name, w->off, w->bytes, GUARD - bad + 1);
					bad = canary_bad(s->recv + (re - rb), slice - 2 * GUARD - (re - rb) + GUARD);
					REQUIRE(!bad, "case %s: window [%zu, +%zu) (%zu bytes here): byte %zu past the "
					      "result written", c->name, w->off, w->bytes, re - rb, bad - 1);
					size_t sb = c->kind == RS ? w->off : ob, se = c->kind == RS ? w->off + w->bytes : oe;
					bad = check_input(c, s->send, sb, se);
					REQUIRE(!bad, "case %s: window [%zu, +%zu): send data changed at byte %zu",
					      c->name, w->off, w->bytes, bad - 1);
					REQUIRE(!canary_bad(s->send + (se - sb), GUARD) && !canary_bad(s->send - GUARD, GUARD),
					      "case %s: window [%zu, +%zu): written next to the send data", c->name,
					      w->off, w->bytes);
				} else if (!c->inplace) {
					/* nothing past the windows issued so far (next 256 bytes) */
					if (c->kind == AG) {
						size_t n = total - frontier < 256 ? total - frontier : 256;
						bad = canary_bad(ub_r + frontier, n);
						REQUIRE(!bad, "case %s: window [%zu, +%zu) done: byte %zu of the result "
						      "written before its window was issued", c->name, w->off,
						      w->bytes, frontier + bad - 1);
					} else if (frontier < own_b + bpr) {
						size_t f = frontier > own_b ? frontier - own_b : 0, n = bpr - f < 256 ? bpr - f : 256;
						bad = canary_bad(ub_r + f, n);
						REQUIRE(!bad, "case %s: window [%zu, +%zu) done: byte %zu of this block's "
						      "result written before its window was issued", c->name,
						      w->off, w->bytes, f + bad - 1);
					}
				}
			}
			s->busy = false;
			s->req = NULL;
			head[g]++;
			done++;
		}
		if (!any && harness_oversubscribed())
			sched_yield();
	}
	if (c->ub) {
		/* the whole result, the guards, the send data */
		size_t bad;
		if (c->kind == RS) {
			bad = check_result(c, ub_r, own_b, own_b + bpr);
			REQUIRE(!bad, "case %s: result byte %zu of this node's block wrong", c->name, bad - 1);
			if (c->inplace) {
				bad = check_input(c, ub_s, 0, own_b);
				REQUIRE(!bad, "case %s: in place: input byte %zu (another block) changed", c->name, bad - 1);
				bad = check_input(c, ub_s + own_b + bpr, own_b + bpr, total);
				REQUIRE(!bad, "case %s: in place: input byte %zu (another block) changed", c->name,
				      own_b + bpr + bad - 1);
			} else {
				bad = check_input(c, ub_s, 0, total);
				REQUIRE(!bad, "case %s: send data changed at byte %zu", c->name, bad - 1);
			}
		} else {
			bad = check_result(c, ub_r, 0, total);
			REQUIRE(!bad, "case %s: result byte %zu wrong", c->name, bad - 1);
			hash += fnv(0xcbf29ce484222325ull, ub_r, total);
			if (!c->inplace) {
				bad = check_input(c, ub_s, own_b, own_b + bpr);
				REQUIRE(!bad, "case %s: send data changed at byte %zu", c->name, bad - 1);
			}
		}
		uint8_t *r0 = c->inplace && c->kind == RS ? ub_s : ub_r;
		size_t rl = c->inplace && c->kind == RS ? total : ub_recv;
		uint8_t *s0 = c->inplace && c->kind == AG ? ub_r : ub_s;
		size_t sl = c->inplace && c->kind == AG ? total : ub_send;
		REQUIRE(!canary_bad(r0 - GUARD, GUARD) && !canary_bad(r0 + rl, GUARD) &&
		      !canary_bad(s0 - GUARD, GUARD) && !canary_bad(s0 + sl, GUARD),
		      "case %s: written outside the buffers", c->name);
	}
	free(wins);
	*nulls_out += nulls;
	return hash;
}

/* Explicit windows, in elements {offset, length} with B = 10 elements per
 * block below (lengths cut at the end of the buffer): inside one block,
 * crossing one or more boundaries, exactly a block, starting at a block's
 * last element, the whole buffer, single elements. On a node whose block
 * the window misses, reduce-scatter must write nothing, allgather must
 * still fill the window. */
static const size_t explicit_windows[][2] = {
	{ 0, 1 }, { 0, 10 }, { 3, 4 }, { 9, 1 }, { 9, 2 }, { 5, 10 }, { 10, 10 }, { 7, 25 },
	{ 11, 1 }, { 19, 3 }, { 0, 1000 }, { 1, 1000 }, { 20, 10 }, { 25, 3 }, { 29, 20 }, { 30, 50 },
	{ 2, 7 }, { 13, 40 }, { 38, 2 }, { 70, 10 },
};

#define EXPLICIT .windows = explicit_windows, \
	.nwindows = sizeof(explicit_windows) / sizeof(explicit_windows[0])

static const struct wcase cases[] = {
	/* allgather (bytes): mid-block windows over boundaries, whole blocks,
	 * several blocks per window, single bytes */
	{ .name = "ag region", .kind = AG, .bpr_elems = 10007, .chunk_elems = 389, .nsubs = 8 },
	{ .name = "ag user buffers", .kind = AG, .bpr_elems = 10007, .chunk_elems = 389, .nsubs = 8,
	  .ub = true },
	{ .name = "ag window = block", .kind = AG, .bpr_elems = 4096, .chunk_elems = 512, .nsubs = 8,
	  .ub = true },
	{ .name = "ag window 2.5 blocks", .kind = AG, .bpr_elems = 1000, .chunk_elems = 320, .nsubs = 8 },
	{ .name = "ag single bytes", .kind = AG, .bpr_elems = 7, .chunk_elems = 1, .nsubs = 1 },
	{ .name = "ag in place", .kind = AG, .bpr_elems = 10007, .chunk_elems = 389, .nsubs = 8,
	  .ub = true, .inplace = true },
	{ .name = "ag large", .kind = AG, .bpr_elems = 1200003, .chunk_elems = 65536, .nsubs = 8,
	  .ub = true },
	{ .name = "ag deep (3 groups)", .kind = AG, .bpr_elems = 30011, .chunk_elems = 101, .nsubs = 24,
	  .late = true, .expect_nulls = true },
	{ .name = "ag + allreduce", .kind = AG, .bpr_elems = 5003, .chunk_elems = 211, .nsubs = 8,
	  .ub = true, .mix_ar = true },
	{ .name = "ag late node", .kind = AG, .bpr_elems = 20011, .chunk_elems = 997, .nsubs = 16,
	  .late = true },
	{ .name = "ag explicit", .kind = AG, .bpr_elems = 10, .nsubs = 8, EXPLICIT },
	/* reduce-scatter */
	{ .name = "rs region", .kind = RS, .t = ncclFloat32, .op = ncclSum, .bpr_elems = 10007,
	  .chunk_elems = 389, .nsubs = 8 },
	{ .name = "rs user buffers", .kind = RS, .t = ncclFloat32, .op = ncclSum, .bpr_elems = 10007,
	  .chunk_elems = 389, .nsubs = 8, .ub = true },
	{ .name = "rs window = block", .kind = RS, .t = ncclBfloat16, .op = ncclSum, .bpr_elems = 4096,
	  .chunk_elems = 512, .nsubs = 8, .ub = true },
	{ .name = "rs window 2.5 blocks", .kind = RS, .t = ncclInt8, .op = ncclMax, .bpr_elems = 1000,
	  .chunk_elems = 320, .nsubs = 8 },
	{ .name = "rs single elements", .kind = RS, .t = ncclFloat64, .op = ncclSum, .bpr_elems = 7,
	  .chunk_elems = 1, .nsubs = 1 },
	{ .name = "rs in place", .kind = RS, .t = ncclFloat32, .op = ncclSum, .bpr_elems = 10007,
	  .chunk_elems = 389, .nsubs = 8, .ub = true, .inplace = true },
	{ .name = "rs large", .kind = RS, .t = ncclFloat32, .op = ncclSum, .bpr_elems = 300007,
	  .chunk_elems = 16384, .nsubs = 8, .ub = true },
	{ .name = "rs deep (3 groups)", .kind = RS, .t = ncclFloat32, .op = ncclSum, .bpr_elems = 30011,
	  .chunk_elems = 101, .nsubs = 24, .late = true, .expect_nulls = true },
	{ .name = "rs + allreduce", .kind = RS, .t = ncclInt32, .op = ncclSum, .bpr_elems = 5003,
	  .chunk_elems = 211, .nsubs = 8, .ub = true, .mix_ar = true },
	{ .name = "rs late node", .kind = RS, .t = ncclFloat16, .op = ncclSum, .bpr_elems = 20011,
	  .chunk_elems = 997, .nsubs = 16, .late = true },
	{ .name = "rs explicit", .kind = RS, .t = ncclFloat32, .op = ncclSum, .bpr_elems = 10, .nsubs = 8,
	  EXPLICIT },
	{ .name = "rs explicit i64 prod", .kind = RS, .t = ncclInt64, .op = ncclProd, .bpr_elems = 10,
	  .nsubs = 8, EXPLICIT },
};

void run_rsag(void)
{
	/* the largest case's layout (the user-buffer cases grow with nranks) */
	size_t region_len = 48u << 20;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		if (case_need(&cases[k]) > region_len)
			region_len = (case_need(&cases[k]) + 4095) & ~(size_t)4095;
	uint8_t *region = aligned_alloc(4096, region_len);
	void *mh = NULL;
	uint64_t hash = 0xcbf29ce484222325ull, nulls = 0, deep_nulls = 0;
	int ncases = 0;

	REQUIRE(region, "malloc");
	plugin_open(true);
	/* No NULL entry NCCL's version layers could call. */
	if (opt.version == 12)
		REQUIRE(P.c12->iallgather && P.c12->ireducescatter, "v12: iallgather/ireducescatter NULL");
	else if (opt.version == 11)
		REQUIRE(P.c11->iallgather && P.c11->ireducescatter, "v11: iallgather/ireducescatter NULL");
	else if (opt.version == 8)
		REQUIRE(P.c8->iallgather && P.c8->ireducescatter, "v8: iallgather/ireducescatter NULL");
	else
		REQUIRE(P.c9->iallgather && P.c9->ireducescatter, "v%d: iallgather/ireducescatter NULL",
		      opt.version);
	void *cc = coll_setup(region, region_len, &mh);

	/* Arguments NCCL never passes are refused, not guessed at. */
	{
		void *req = (void *)1;
		REQUIRE(c_iallgather_rc(cc, region, region + 4096, 100, 100 * (size_t)opt.nranks - 10, 20, mh, mh,
				      &req) != ncclSuccess && !req,
		      "a window past the end of the buffer was accepted");
		REQUIRE(c_ireducescatter_rc(cc, region, region + 4096, 100, 2, 8, ncclFloat32, ncclSum, mh, mh,
					  &req) != ncclSuccess && !req,
		      "a window that is not whole f32 elements was accepted");
	}

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		uint64_t n = 0;
		hash = fnv(hash, (const uint8_t *)&k, sizeof(k));
		uint64_t h = run_case(&cases[k], cc, mh, region, region_len, &n);
		hash = fnv(hash, (const uint8_t *)&h, sizeof(h));
		nulls += n;
		if (cases[k].expect_nulls)
			deep_nulls += n;
		ncases++;
	}
	/* Every (type, op) reduceSupport accepts, through reduce-scatter:
	 * windows over block boundaries, staging and user buffers alternately. */
	for (int t = 0; t < 10; t++)
		for (int op = 0; op < 4; op++) {
			int sup = 0;
			NCHECK(CN_CALL(reduceSupport, (ncclDataType_t)t, (ncclRedOp_t)op, &sup));
			REQUIRE(sup, "reduceSupport(%d, %d) = 0", t, op);
			char name[64];
			snprintf(name, sizeof(name), "rs %s %s", type_name(t), op_name(op));
			struct wcase c = { .name = name, .kind = RS, .t = (ncclDataType_t)t,
					   .op = (ncclRedOp_t)op, .bpr_elems = 1001, .chunk_elems = 97,
					   .nsubs = 8, .ub = (t + op) % 2 == 1 };
			uint64_t n = 0;
			run_case(&c, cc, mh, region, region_len, &n);
			nulls += n;
			ncases++;
		}
	/* NULL retries must have happened in the deep cases (on some node). */
	uint64_t all_nulls = deep_nulls;
	rv_all_sum("nulls", &all_nulls, 1);
	REQUIRE(all_nulls > 0, "the deep cases never got a NULL request: the retry path was not tested");
	/* allgather results bitwise equal on every node */
	int other = rv_first_differing("hash", hash);
	REQUIRE(other < 0, "allgather results of rank %d differ bitwise from ours", other);
	/* --expect: what the daemons hold of the job while it is open */
	coll_finish(cc, mh);
	/* Which path the windows took (split_window_agg): a fixed split above
	 * 0 sends them to the aggregators, auto does for the small ones from 4
	 * nodes on (2 hops against N - 1), never at 3 or fewer. */
	if (opt.expect && !strcmp(opt.expect, "agg")) {
		bool fixed = opt.split && strcmp(opt.split, "auto");
		bool want = fixed ? atof(opt.split) > 0 : opt.nranks >= 4;
		REQUIRE(want ? trace_win_agg > 0 : trace_win_agg == 0,
		      "windows through the aggregators: %llu bytes, expected %s", (unsigned long long)trace_win_agg,
		      want ? "some" : "none");
		/* Owner-only: a reduce-scatter chunk comes back only to the
		 * owners of the blocks it touches, an allgather chunk inside
		 * one block goes up only from its owner (the daemons' count of
		 * what this rank sent is checked against agg_sent). */
		REQUIRE(!want || (trace_rs_got < trace_rs_agg && trace_ag_sent < trace_ag_agg),
		      "windows through the aggregators are not owner-only: reduce-scatter %llu of %llu "
		      "bytes came back here, allgather %llu of %llu bytes went up from here",
		      (unsigned long long)trace_rs_got, (unsigned long long)trace_rs_agg,
		      (unsigned long long)trace_ag_sent, (unsigned long long)trace_ag_agg);
		if (my_rank == 0)
			fprintf(stderr, "windows: %llu bytes through the aggregators; reduce-scatter %llu of "
				"%llu bytes came back here, allgather %llu of %llu went up from here\n",
				(unsigned long long)trace_win_agg, (unsigned long long)trace_rs_got,
				(unsigned long long)trace_rs_agg, (unsigned long long)trace_ag_sent,
				(unsigned long long)trace_ag_agg);
	}
	if (my_rank == 0)
		printf("rsag: %d nodes, v%d table, %d cases passed (%llu NULL requests retried here, %llu in "
		       "the deep cases on all nodes), allgather results bitwise equal on every node\n",
		       opt.nranks, opt.version, ncases, (unsigned long long)nulls,
		       (unsigned long long)all_nulls);
	free(region);
}

/* bench/allreduce --coll: a reduce-scatter (kind 1) or allgather (kind 2)
 * of nranks blocks of bpr bytes as NCCL's proxy issues it on registered
 * buffers: windows of at most 2 MiB (8 subs of 256 KiB), up to 8
 * outstanding, in order, NULL retried, NCCL's pointer rule. RS: send is
 * the whole buffer, recv this node's block; AG: the other way round. */
void window_chunked(void *cc, int kind, uint8_t *send, uint8_t *recv, size_t bpr, ncclDataType_t t,
		    ncclRedOp_t op, void *mh)
{
	const size_t wmax = 2u << 20;
	size_t es = kind == 2 ? 1 : type_size(t), total = bpr * (size_t)opt.nranks;
	size_t w = wmax / es * es, nwin = (total + w - 1) / w, issued = 0, done = 0;
	void *reqs[STEPS];
	double end = sc_now_s() + 120;

	while (done < nwin) {
		REQUIRE(sc_now_s() < end, "%s of %zu bytes: %zu/%zu windows after 120 s",
		      kind == 2 ? "allgather" : "reduce-scatter", total, done, nwin);
		if (issued < nwin && issued - done < STEPS) {
			size_t wo = issued * w, wb = total - wo < w ? total - wo : w;
			size_t adv = wo / bpr == (size_t)my_rank ? wo % bpr : 0;
			void *r = NULL;
			ncclResult_t rc = kind == 2
				? c_iallgather_rc(cc, send + adv, recv + wo, bpr, wo, wb, mh, mh, &r)
				: c_ireducescatter_rc(cc, send + wo, recv + adv, bpr, wo, wb, t, op, mh, mh, &r);
			REQUIRE(rc == ncclSuccess, "window [%zu, +%zu): %d", wo, wb, (int)rc);
			if (r)
				reqs[issued++ % STEPS] = r;
		}
		int size = -1;
		if (done < issued && c_test(reqs[done % STEPS], &size))
			done++;
		else if (harness_oversubscribed())
			sched_yield();
	}
}
