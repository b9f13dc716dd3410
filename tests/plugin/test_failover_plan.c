/* Failover's decisions (plugin/failover_plan.c) on their own: no process,
 * no fabric, no daemon. A model of N nodes stands in for the client
 * library: per aggregator, which chunk results each node has, the role of
 * each chunk there (allreduce, reduce-scatter owner or not, allgather
 * source or receiver), which requests each node has in flight or
 * completed. The test runs the two agreement rounds as the ring would
 * (every node's values, element-wise minimum), then each node's plan, and
 * checks what the fault tests (tests/plugin/harness_fault.c) check end to
 * end: every result a node lacks reaches it exactly once, by a copy from
 * the lowest holder or a recomputation that every node joins; the nodes
 * decide alike; the counts of the fault's WARN line. And the corners the
 * fault tests cannot aim at: a chunk held by some and lacked by others at
 * the window's edge, low marks that differ, every aggregator gone, a
 * failed set that differs between nodes, a request issued late. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failover_plan.h"

#define NN 8   /* nodes */
#define NA 4   /* aggregators */
#define NC 48  /* chunks per aggregator */
#define NR 8   /* requests (= request slots) */
#define NACT 256
#define CB 100 /* bytes per chunk */

struct mreq {
	bool window;
	uint64_t c0[NA], n[NA]; /* chunks on each aggregator (n = 0: none there) */
};

struct mnode {
	bool got[NA][NC];                /* its result (or empty result) arrived */
	enum client_role role[NA][NC];   /* default ALL */
	bool started[NR], done[NR];      /* issued here; completed here */
	bool forgot[NA][NC];             /* completed and no longer retained */
	bool no_data[NA][NC];            /* held, but its data is gone (a fault in the model) */
	bool unknown[NA][NC];            /* client_chunk_info finds nothing (a fault in the model) */
	uint64_t fenced;                 /* failed here, not agreed yet */
	uint64_t next;                   /* requests issued here */
};

struct world {
	uint32_t n;
	size_t naggs;
	uint32_t w;
	struct mreq req[NR];
	uint32_t nreq;
	struct mnode node[NN];
	/* results of run() */
	uint32_t attempts;
	struct fo_round1 r1;
	uint64_t set;
	struct fo_dead dead[NA];
	struct fo_act act[NN][NACT];
	size_t nact[NN];
	struct fo_counts cnt[NN];
	int rc[NN];
	char refused[NN][160];
};

struct nview {
	struct world *w;
	uint32_t me;
};

static int req_of(const struct world *w, size_t a, uint64_t c)
{
	for (uint32_t r = 0; r < w->nreq; r++)
		if (c >= w->req[r].c0[a] && c - w->req[r].c0[a] < w->req[r].n[a])
			return (int)r;
	return -1;
}

static bool wants(enum client_role role)
{
	return role == CLIENT_ROLE_ALL || role == CLIENT_ROLE_TAKE;
}

/* client_chunk_held / _lacks / _info / _data, as client.h says them. */
static void m_chunk(void *ctx, size_t a, uint64_t c, struct fo_chunk *out)
{
	struct nview *v = ctx;
	const struct mnode *nd = &v->w->node[v->me];
	int r = req_of(v->w, a, c);
	bool started = r >= 0 && nd->started[r], flight = started && !nd->done[r];
	enum client_role role = nd->role[a][c];

	memset(out, 0, sizeof(*out));
	out->held = nd->got[a][c] && role != CLIENT_ROLE_GIVE;
	out->lacks = !started || (wants(role) && !nd->got[a][c]);
	out->known = (flight || (started && !nd->forgot[a][c])) && !nd->unknown[a][c];
	if (out->known) {
		out->got = nd->got[a][c];
		out->issued = flight;
		out->gives = role != CLIENT_ROLE_TAKE;
		out->role = role;
		out->len = CB;
	}
	out->slot = flight ? r : -1;
	out->range_len = flight ? CB : 0;
	if (out->held) {
		out->retained = out->known && !nd->no_data[a][c];
		out->in_recv = out->retained && flight && role != CLIENT_ROLE_SOURCE;
		out->in_send = out->retained && flight && role == CLIENT_ROLE_SOURCE;
	}
}

static bool m_req(void *ctx, uint32_t slot, size_t a, bool *window, uint64_t *c0, uint64_t *n)
{
	struct nview *v = ctx;
	const struct mnode *nd = &v->w->node[v->me];

	if (slot >= v->w->nreq || !nd->started[slot] || nd->done[slot] || !v->w->req[slot].n[a])
		return false;
	*window = v->w->req[slot].window;
	*c0 = v->w->req[slot].c0[a];
	*n = v->w->req[slot].n[a];
	return true;
}

static size_t m_span(void *ctx, uint32_t slot, size_t a, uint64_t c0, uint64_t n)
{
	(void)ctx, (void)slot, (void)a, (void)c0;
	return n * CB;
}

static int m_act(void *ctx, const struct fo_act *a)
{
	struct nview *v = ctx;
	size_t *n = &v->w->nact[v->me];

	assert_true(*n < NACT);
	v->w->act[v->me][(*n)++] = *a;
	return 0;
}

static void m_refuse(void *ctx, size_t a, uint64_t c, const char *what)
{
	struct nview *v = ctx;

	snprintf(v->w->refused[v->me], sizeof(v->w->refused[v->me]), "chunk %llu of aggregator %zu %s",
		 (unsigned long long)c, a, what);
}

static struct fo_view view_of(struct nview *nv)
{
	return (struct fo_view){ .ctx = nv, .rank = nv->me, .nranks = nv->w->n, .naggs = nv->w->naggs,
				 .nslots = NR, .chunk = m_chunk, .req = m_req, .span = m_span,
				 .act = m_act, .refuse = m_refuse };
}

/* client_agg_lo: the lowest chunk whose result has not arrived here. */
static uint64_t m_lo(const struct mnode *nd, size_t a)
{
	uint64_t c = 0;

	while (c < NC && nd->got[a][c])
		c++;
	return c;
}

/* The min-allreduce of the nodes' values, as the ring computes it. */
static void ring_min(int64_t (*v)[512], uint32_t n, size_t len, int64_t *out)
{
	for (size_t i = 0; i < len; i++) {
		out[i] = v[0][i];
		for (uint32_t k = 1; k < n; k++)
			out[i] = v[k][i] < out[i] ? v[k][i] : out[i];
	}
}

static int64_t vals[NN][512];
static int64_t agreed[512];

/* Both rounds, then every node's plan. */
static void run(struct world *w)
{
	size_t len = fo_plan_round1_len(w->naggs);

	assert_true(len <= 512);
	for (w->attempts = 1;; w->attempts++) {
		for (uint32_t k = 0; k < w->n; k++) {
			uint64_t lo[NA];
			for (size_t a = 0; a < w->naggs; a++)
				lo[a] = m_lo(&w->node[k], a);
			struct fo_round1_in in = { .fenced = w->node[k].fenced, .lo = lo, .next = w->node[k].next };
			fo_plan_round1_fill(w->naggs, &in, vals[k]);
		}
		ring_min(vals, w->n, len, agreed);
		fo_plan_round1_read(w->naggs, agreed, &w->r1);
		if (fo_plan_round1_agreed(&w->r1))
			break;
		assert_true(w->attempts < 4);
		for (uint32_t k = 0; k < w->n; k++)
			w->node[k].fenced |= w->r1.any; /* every node fences the union */
	}
	w->set = w->r1.any;
	uint32_t win[NA];
	for (size_t a = 0; a < NA; a++)
		win[a] = w->w;
	len = fo_plan_round2_len(w->naggs, w->set, win);
	assert_true(len <= 512);
	for (uint32_t k = 0; k < w->n; k++) {
		size_t off = 0;
		for (size_t a = 0; a < w->naggs; a++) {
			if (!(w->set >> a & 1))
				continue;
			for (uint32_t j = 0; j < w->w; j++) {
				struct nview nv = { w, k };
				struct fo_chunk ch;
				m_chunk(&nv, a, w->r1.lo[a] + j, &ch);
				fo_plan_round2_fill(vals[k] + off, w->w, j, k, ch.held, ch.lacks);
			}
			off += 2 * (size_t)w->w;
		}
	}
	ring_min(vals, w->n, len, agreed);
	size_t off = 0;
	for (size_t a = 0; a < w->naggs; a++) {
		if (!(w->set >> a & 1))
			continue;
		assert_int_equal(fo_plan_round2_read(agreed + off, w->r1.lo[a], w->w, &w->dead[a]), 0);
		off += 2 * (size_t)w->w;
	}
	for (uint32_t k = 0; k < w->n; k++) {
		struct nview nv = { w, k };
		struct fo_view v = view_of(&nv);
		w->rc[k] = fo_plan_decide(&v, w->dead, w->set, &w->cnt[k]);
	}
}

static void world_free(struct world *w)
{
	for (size_t a = 0; a < NA; a++) {
		free(w->dead[a].holder);
		free(w->dead[a].lacker);
	}
	free(w);
}

static struct world *world_new(uint32_t n, size_t naggs, uint32_t window)
{
	struct world *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	w->n = n;
	w->naggs = naggs;
	w->w = window;
	return w;
}

/* Request r: chunks [c0, c0 + cn) on aggregator a (and nothing elsewhere
 * unless added), started on every node. */
static void add_req(struct world *w, bool window, size_t a, uint64_t c0, uint64_t cn)
{
	struct mreq *q = &w->req[w->nreq];

	q->window = window;
	q->c0[a] = c0;
	q->n[a] = cn;
	for (uint32_t k = 0; k < w->n; k++) {
		w->node[k].started[w->nreq] = true;
		w->node[k].next = w->nreq + 1;
	}
	w->nreq++;
}

/* Node k has the results of chunks [0, upto) of aggregator a. */
static void got_upto(struct world *w, uint32_t k, size_t a, uint64_t upto)
{
	for (uint64_t c = 0; c < upto; c++)
		w->node[k].got[a][c] = true;
}

/* Requests whose every chunk arrived at node k are completed there. */
static void complete_done(struct world *w)
{
	for (uint32_t k = 0; k < w->n; k++)
		for (uint32_t r = 0; r < w->nreq; r++) {
			bool all = w->node[k].started[r];
			for (size_t a = 0; a < w->naggs && all; a++)
				for (uint64_t c = w->req[r].c0[a]; c < w->req[r].c0[a] + w->req[r].n[a]; c++)
					all &= w->node[k].got[a][c];
			w->node[k].done[r] = all;
		}
}

static void fence_all(struct world *w, uint64_t set)
{
	for (uint32_t k = 0; k < w->n; k++)
		w->node[k].fenced = set;
}

/* The acts of node k of one kind on aggregator a covering chunk c. */
static const struct fo_act *find(const struct world *w, uint32_t k, enum fo_act_kind kind, size_t a,
				 uint64_t c)
{
	for (size_t i = 0; i < w->nact[k]; i++) {
		const struct fo_act *x = &w->act[k][i];
		if (x->kind == kind && x->agg == a && c >= x->c && c < x->c + x->n)
			return x;
	}
	return NULL;
}

/* What every fault test asserts, here per chunk: every node that lacks a
 * result of a request in flight gets it exactly once (a copy it takes, or a
 * recomputation whose sum it takes); a node that has it takes nothing;
 * every copy starts at the lowest holder and walks the ring; every
 * recomputation is joined by every node that still has the request (a
 * ring allreduce needs them all), under the same run numbers. */
static void check_repair(const struct world *w)
{
	for (size_t a = 0; a < w->naggs; a++) {
		if (!(w->set >> a & 1))
			continue;
		const struct fo_dead *d = &w->dead[a];
		for (uint64_t c = 0; c < NC; c++) {
			int r = req_of(w, a, c);
			if (r < 0)
				continue;
			enum fo_fate f = fo_plan_fate(d, c);
			const struct fo_act *copy0 = find(w, 0, FO_ACT_COPY, a, c);
			int64_t holder = FO_NONE;
			for (uint32_t k = 0; k < w->n && holder == FO_NONE; k++) {
				struct nview nv = { (struct world *)w, k };
				struct fo_chunk ch;
				m_chunk(&nv, a, c, &ch);
				if (ch.held && c >= d->lo)
					holder = k;
			}
			for (uint32_t k = 0; k < w->n; k++) {
				const struct mnode *nd = &w->node[k];
				bool flight = nd->started[r] && !nd->done[r];
				bool lacking = flight && wants(nd->role[a][c]) && !nd->got[a][c];
				const struct fo_act *cp = find(w, k, FO_ACT_COPY, a, c);
				const struct fo_act *run = find(w, k, FO_ACT_REDO_RUN, a, c);
				const struct fo_act *one = find(w, k, FO_ACT_REDO_CHUNK, a, c);
				int takes = (cp && cp->here == FO_COPY_TAKES) + (run != NULL) +
					    (one && one->take);
				assert_int_equal(takes, lacking ? 1 : 0);
				/* the same decision on every node */
				assert_true(!cp == !copy0);
				assert_true(f == FO_COPY ? cp != NULL : cp == NULL);
				if (cp) {
					assert_int_equal(cp->root, holder);
					assert_int_equal(cp->k, c - d->lo);
					assert_int_equal(cp->rx, k != (uint32_t)holder);
					assert_int_equal(cp->tx, (k + 1) % w->n != (uint32_t)holder);
					assert_int_equal(cp->here == FO_COPY_SENDS, (int64_t)k == holder ||
							 (nd->got[a][c] && nd->role[a][c] != CLIENT_ROLE_GIVE));
					assert_int_equal(cp->tx_after_rx, cp->tx && cp->here != FO_COPY_SENDS);
					/* the chunk ends in its request where it did not come */
					assert_int_equal(cp->settle, flight && !nd->got[a][c]);
				}
				if (f == FO_REDO && !w->req[r].window && flight) {
					assert_non_null(run);
					const struct fo_act *run0 = find(w, 0, FO_ACT_REDO_RUN, a, c);
					if (run0) {
						assert_int_equal(run->c, run0->c);
						assert_int_equal(run->n, run0->n);
						assert_int_equal(run->run, run0->run);
					}
				}
				if (f == FO_REDO && w->req[r].window && nd->started[r] && !nd->forgot[a][c])
					assert_non_null(one); /* every node joins the ring allreduce */
				if (f != FO_REDO)
					assert_true(!run && !one);
			}
		}
	}
}

/* ---- the cases of the fault tests ---- */

/* fault_kill_*: an aggregator dies with allreduces in flight. N = 3, its
 * chunks 0..9 in three requests; node 0 has 0..5, node 1 0..6, node 2
 * 0..4. The low marks differ (6, 7, 5): the agreed one is 5. Chunks 5 and 6
 * are held by some and lacked by others: copies from nodes 0 and 1;
 * 7, 8 (the window's end) and 9 (past it) nobody holds: recomputed, one run
 * per request. */
static void kill_allreduce(void **state)
{
	(void)state;
	struct world *w = world_new(3, 2, 4);
	add_req(w, false, 1, 0, 4);
	add_req(w, false, 1, 4, 4);
	add_req(w, false, 1, 8, 2);
	got_upto(w, 0, 1, 6);
	got_upto(w, 1, 1, 7);
	got_upto(w, 2, 1, 5);
	complete_done(w);
	fence_all(w, 2);
	run(w);
	assert_int_equal(w->attempts, 1);
	assert_int_equal(w->set, 2);
	assert_int_equal(w->dead[1].lo, 5);
	assert_int_equal(fo_plan_fate(&w->dead[1], 4), FO_HELD);
	assert_int_equal(fo_plan_fate(&w->dead[1], 5), FO_COPY);
	assert_int_equal(fo_plan_fate(&w->dead[1], 6), FO_COPY);
	assert_int_equal(fo_plan_fate(&w->dead[1], 7), FO_REDO);
	assert_int_equal(fo_plan_fate(&w->dead[1], 8), FO_REDO);
	assert_int_equal(fo_plan_fate(&w->dead[1], 9), FO_REDO);
	for (uint32_t k = 0; k < 3; k++)
		assert_int_equal(w->rc[k], 0);
	check_repair(w);
	/* copy of 5 from node 0: node 2 lacks it; of 6 from node 1: 0 and 2 */
	assert_int_equal(find(w, 2, FO_ACT_COPY, 1, 5)->root, 0);
	assert_int_equal(find(w, 0, FO_ACT_COPY, 1, 6)->root, 1);
	/* runs: request 1's chunk 7 (run 0), request 2's 8..9 (run 0) */
	const struct fo_act *r1 = find(w, 0, FO_ACT_REDO_RUN, 1, 7), *r2 = find(w, 0, FO_ACT_REDO_RUN, 1, 8);
	assert_int_equal(r1->c, 7);
	assert_int_equal(r1->n, 1);
	assert_int_equal(r1->slot, 1);
	assert_int_equal(r2->c, 8);
	assert_int_equal(r2->n, 2);
	assert_int_equal(r2->run, 0);
	/* the WARN line's counts */
	assert_int_equal(w->cnt[2].lacking, 2);
	assert_int_equal(w->cnt[2].copy_bytes, 2 * CB);
	assert_int_equal(w->cnt[0].lacking, 1);
	assert_int_equal(w->cnt[1].lacking, 0);
	for (uint32_t k = 0; k < 3; k++) {
		assert_int_equal(w->cnt[k].redo_chunks, 3);
		assert_int_equal(w->cnt[k].redo_bytes, 3 * CB);
		assert_int_equal(w->cnt[k].kept, 0);
		assert_int_equal(w->cnt[k].passed, 0);
	}
	/* requests from S on use the other aggregator */
	struct fo_epoch e[2] = { { 0, 3 } };
	e[1] = fo_plan_epoch_next(&e[0], w->set, 0, w->r1.next);
	uint32_t ep;
	assert_int_equal(w->r1.next, 3);
	assert_int_equal(fo_plan_live_for(e, 2, 2, &ep), 3);
	assert_int_equal(ep, 0);
	assert_int_equal(fo_plan_live_for(e, 2, 3, &ep), 1);
	assert_int_equal(ep, 1);
	world_free(w);
}

/* A run of chunks no node holds splits where a chunk in the middle is
 * copied: two ring allreduces of one request, numbered 0 and 1 (their
 * tags). */
static void runs_split_by_copy(void **state)
{
	(void)state;
	struct world *w = world_new(2, 1, 8);
	add_req(w, false, 0, 0, 8);
	got_upto(w, 0, 0, 2);
	got_upto(w, 1, 0, 2);
	w->node[1].got[0][3] = true; /* out of order: chunk 3 came to node 1 only */
	complete_done(w);
	fence_all(w, 1);
	run(w);
	check_repair(w);
	const struct fo_act *a = find(w, 0, FO_ACT_REDO_RUN, 0, 2), *b = find(w, 0, FO_ACT_REDO_RUN, 0, 4);
	assert_int_equal(a->c, 2);
	assert_int_equal(a->n, 1);
	assert_int_equal(a->run, 0);
	assert_int_equal(b->c, 4);
	assert_int_equal(b->n, 4);
	assert_int_equal(b->run, 1);
	assert_int_equal(find(w, 0, FO_ACT_COPY, 0, 3)->root, 1);
	assert_int_equal(w->cnt[0].redo_chunks, 5);
	world_free(w);
}

/* fault_stop_* and a fault seen at different times: node 0 has fenced
 * aggregator 0 (its PING deadline passed), nodes 1 and 2 fenced 0 and 1.
 * Round 1 does not agree (the sets differ): every node fences the union,
 * and the second attempt agrees on both. fault_twice_*: two aggregators in
 * one epoch. */
static void set_differs_two_aggregators(void **state)
{
	(void)state;
	struct world *w = world_new(3, 3, 4);
	add_req(w, false, 0, 0, 6);
	w->req[0].c0[1] = 0;
	w->req[0].n[1] = 6;
	for (uint32_t k = 0; k < 3; k++) {
		got_upto(w, k, 0, 2 + k);
		got_upto(w, k, 1, 3);
	}
	complete_done(w);
	w->node[0].fenced = 1;
	w->node[1].fenced = 3;
	w->node[2].fenced = 3;
	run(w);
	assert_int_equal(w->attempts, 2);
	assert_int_equal(w->set, 3);
	assert_int_equal(w->dead[0].lo, 2);
	assert_int_equal(w->dead[1].lo, 3);
	check_repair(w);
	/* node 0 lacks 2 and 3 of aggregator 0, node 1 lacks 3 */
	assert_int_equal(w->cnt[0].lacking, 2);
	assert_int_equal(w->cnt[1].lacking, 1);
	assert_int_equal(w->cnt[2].lacking, 0);
	/* aggregator 0: 4, 5; aggregator 1: 3, 4, 5 */
	assert_int_equal(w->cnt[2].redo_chunks, 5);
	world_free(w);
}

static void fill1(uint64_t fenced, const uint64_t *lo, uint64_t next, int64_t *v)
{
	struct fo_round1_in in = { .fenced = fenced, .lo = lo, .next = next };

	fo_plan_round1_fill(4, &in, v);
}

/* The element-wise minimum of n nodes' round-1 values. */
static void min_of(int64_t v[][32], int n, size_t len, int64_t *m)
{
	for (size_t i = 0; i < len; i++) {
		m[i] = v[0][i];
		for (int k = 1; k < n; k++)
			if (v[k][i] < m[i])
				m[i] = v[k][i];
	}
}

/* Re-admission: aggregator 1 failed at request 20 (out_from) and 2 drained
 * at 30. Aggregator 1 is taken back only once READY on every node, no node
 * sees it fail again, and every node has issued request 20 and beyond;
 * a node that did not join leaves it out. */
static void readmit_values(void **state)
{
	(void)state;
	int64_t v[3][32], m[32];
	uint64_t lo[4] = { 0 }, out_from[4] = { 0, 20, 30, 0 };
	uint64_t out = 0x6; /* 1 failed, 2 drained and left */
	struct fo_round1 r;
	size_t len = fo_plan_round1_len(4);

	assert_true(len <= 32);
	for (int k = 0; k < 3; k++) {
		struct fo_round1_in in = { .lo = lo, .next = 25 + (uint64_t)k, .tried = 0x6, .joined = 0x6 };
		fo_plan_round1_fill(4, &in, v[k]);
	}
	min_of(v, 3, len, m);
	fo_plan_round1_read(4, m, &r);
	assert_true(fo_plan_round1_agreed(&r));
	assert_int_equal(r.any, 0);
	assert_int_equal(r.tried, 0x6);
	assert_int_equal(r.joined, 0x6);
	assert_int_equal(r.next, 27);
	assert_int_equal(r.next_min, 25);
	/* 2 left at 30, node 0 has issued only 25: not yet */
	assert_int_equal(fo_plan_back(4, &r, out, out_from), 0x2);
	/* node 1 is not READY on 1 (still joining, or refused) */
	struct fo_round1_in in1 = { .lo = lo, .next = 31, .tried = 0x6, .joined = 0x4 };
	fo_plan_round1_fill(4, &in1, v[1]);
	struct fo_round1_in in0 = { .lo = lo, .next = 30, .tried = 0x6, .joined = 0x6 };
	fo_plan_round1_fill(4, &in0, v[0]);
	in0.next = 32;
	fo_plan_round1_fill(4, &in0, v[2]);
	min_of(v, 3, len, m);
	fo_plan_round1_read(4, m, &r);
	assert_int_equal(r.tried, 0x6);
	assert_int_equal(r.joined, 0x4);
	assert_int_equal(r.next_min, 30);
	assert_int_equal(fo_plan_back(4, &r, out, out_from), 0x4);
	/* node 2 sees 2 fail again while the others report it READY: a fault,
	 * not a return */
	struct fo_round1_in in2 = { .fenced = 0x4, .lo = lo, .next = 31, .tried = 0x6, .joined = 0x2 };
	fo_plan_round1_fill(4, &in2, v[2]);
	min_of(v, 3, len, m);
	fo_plan_round1_read(4, m, &r);
	assert_int_equal(r.any, 0x4);
	assert_int_equal(fo_plan_back(4, &r, out, out_from), 0);
	/* nobody tried: nothing comes back, whatever out says */
	for (int k = 0; k < 3; k++) {
		struct fo_round1_in in = { .lo = lo, .next = 40 };
		fo_plan_round1_fill(4, &in, v[k]);
	}
	min_of(v, 3, len, m);
	fo_plan_round1_read(4, m, &r);
	assert_int_equal(fo_plan_back(4, &r, out, out_from), 0);
}

/* Drain: one node heard DRAIN from aggregator 0 and 3; 3 is not in use,
 * 0 fails at the same time on another node: only the live, not failed
 * ones move off, and the epoch after it takes back what returned. */
static void drain_values(void **state)
{
	(void)state;
	int64_t v[2][32], m[32];
	uint64_t lo[4] = { 0 };
	struct fo_round1 r;
	size_t len = fo_plan_round1_len(4);
	struct fo_round1_in a = { .lo = lo, .next = 8, .drain = 0x9 };
	struct fo_round1_in b = { .lo = lo, .next = 8, .drain = 0x2 };

	fo_plan_round1_fill(4, &a, v[0]);
	fo_plan_round1_fill(4, &b, v[1]);
	min_of(v, 2, len, m);
	fo_plan_round1_read(4, m, &r);
	assert_int_equal(r.drain, 0xB);
	assert_int_equal(r.left, 0);
	a.left = 0x2;
	b.left = 0x6;
	fo_plan_round1_fill(4, &a, v[0]);
	fo_plan_round1_fill(4, &b, v[1]);
	min_of(v, 2, len, m);
	fo_plan_round1_read(4, m, &r);
	assert_int_equal(r.left, 0x2);
	assert_int_equal(fo_plan_drain(&r, 0x7), 0x3);
	struct fo_epoch e[2] = { { 0, 0x7 } };
	e[1] = fo_plan_epoch_next(&e[0], fo_plan_drain(&r, 0x7), 0x8, r.next);
	uint32_t ep;
	assert_int_equal(fo_plan_live_for(e, 2, 7, &ep), 0x7);
	assert_int_equal(fo_plan_live_for(e, 2, 8, &ep), 0xC);
	assert_int_equal(ep, 1);
	b.fenced = 0x1;
	fo_plan_round1_fill(4, &b, v[1]);
	min_of(v, 2, len, m);
	fo_plan_round1_read(4, m, &r);
	assert_int_equal(fo_plan_drain(&r, 0x7), 0x2);
}

/* The first attempt of round 1 on its own: the values are the nodes'
 * minimum; any (a max), all (a min), the lowest low mark of the nodes that
 * fenced it, the largest next index. */
static void round1_values(void **state)
{
	(void)state;
	int64_t v[3][32], m[32];
	uint64_t lo0[4] = { 7, 9, 0, 0 }, lo1[4] = { 5, 1, 0, 0 }, lo2[4] = { 6, 4, 0, 0 };
	struct fo_round1 r;

	assert_int_equal(fo_plan_round1_len(4), 30);
	fill1(0x3, lo0, 10, v[0]); /* fenced 0, 1 */
	fill1(0x1, lo1, 12, v[1]); /* fenced 0: its lo[1] is not read */
	fill1(0x3, lo2, 11, v[2]);
	for (int i = 0; i < 30; i++)
		m[i] = v[0][i] < v[1][i] ? (v[0][i] < v[2][i] ? v[0][i] : v[2][i])
					 : (v[1][i] < v[2][i] ? v[1][i] : v[2][i]);
	fo_plan_round1_read(4, m, &r);
	assert_int_equal(r.any, 0x3);
	assert_int_equal(r.all, 0x1);
	assert_false(fo_plan_round1_agreed(&r));
	assert_int_equal(r.lo[0], 5);
	assert_int_equal(r.lo[1], 4);
	assert_int_equal(r.lo[2], (uint64_t)FO_NONE);
	assert_int_equal(r.next, 12);
	assert_int_equal(r.next_min, 10);
	fill1(0x3, lo1, 12, v[1]);
	for (int i = 0; i < 30; i++)
		m[i] = v[0][i] < v[1][i] ? (v[0][i] < v[2][i] ? v[0][i] : v[2][i])
					 : (v[1][i] < v[2][i] ? v[1][i] : v[2][i]);
	fo_plan_round1_read(4, m, &r);
	assert_true(fo_plan_round1_agreed(&r));
	assert_int_equal(r.lo[1], 1);
}

/* cluster/partition: the aggregator cannot reach node 0; nodes 1 and 2
 * have every result. Node 0's chunks are copied from node 1 (the lowest
 * holder): 1 sends, 2 receives into its sink and sends its own copy on, 0
 * takes it and sends nothing back to the root. */
static void partition_one_node(void **state)
{
	(void)state;
	struct world *w = world_new(3, 1, 4);
	add_req(w, false, 0, 0, 6);
	got_upto(w, 0, 0, 2);
	got_upto(w, 1, 0, 6);
	got_upto(w, 2, 0, 6);
	complete_done(w);
	fence_all(w, 1);
	run(w);
	check_repair(w);
	for (uint64_t c = 2; c < 6; c++) {
		const struct fo_act *a0 = find(w, 0, FO_ACT_COPY, 0, c), *a1 = find(w, 1, FO_ACT_COPY, 0, c),
				    *a2 = find(w, 2, FO_ACT_COPY, 0, c);
		assert_int_equal(a1->here, FO_COPY_SENDS);
		assert_false(a1->rx);
		assert_true(a1->tx);
		assert_int_equal(a2->here, FO_COPY_SENDS);
		assert_true(a2->rx && a2->tx);
		assert_int_equal(a0->here, FO_COPY_TAKES);
		assert_true(a0->rx);
		assert_false(a0->tx);
		assert_true(a0->keep_req);
		assert_true(a0->settle);
		/* node 1's request completed: its copy comes from retention */
		assert_false(a1->keep_req);
		assert_false(a1->from_recv || a1->from_send);
		assert_false(a1->settle);
	}
	assert_int_equal(w->cnt[0].lacking, 4);
	assert_int_equal(w->cnt[0].copy_bytes, 4 * CB);
	assert_int_equal(w->cnt[0].redo_chunks, 0);
	world_free(w);
}

/* Reduce-scatter windows through the aggregator (rsag_agg_*, and the fault
 * tests' windows): chunks 0..5 of one window, chunk c in node c / 2's
 * block; the owner's role ALL, the others' GIVE (they want no result: an
 * empty one returns their credit).
 *   0  every node had its result or empty result: below the low mark;
 *   1  nobody had anything but node 1: no node holds it (node 1's empty
 *      result is no result), recomputed alone, node 0 takes the sum;
 *   2  node 1 has it, the others their empty results: held;
 *   3  node 1 has it, node 0's empty result did not come: held, and node 0
 *      ends it in its request (nothing moves);
 *   4, 5  node 2, the owner, lacks them: recomputed alone.
 * Node 1 had every result and empty result it waits for: its request
 * completed, and it joins the recomputations with what it kept. */
static void reduce_scatter_window(void **state)
{
	(void)state;
	struct world *w = world_new(3, 1, 6);
	add_req(w, true, 0, 0, 6);
	for (uint32_t k = 0; k < 3; k++)
		for (uint64_t c = 0; c < 6; c++)
			w->node[k].role[0][c] = c / 2 == k ? CLIENT_ROLE_ALL : CLIENT_ROLE_GIVE;
	got_upto(w, 1, 0, 6);
	w->node[0].got[0][0] = w->node[0].got[0][2] = w->node[0].got[0][4] = true;
	got_upto(w, 2, 0, 4);
	complete_done(w);
	assert_true(w->node[1].done[0]);
	fence_all(w, 1);
	run(w);
	for (uint32_t k = 0; k < 3; k++)
		assert_int_equal(w->rc[k], 0);
	check_repair(w);
	const struct fo_dead *d = &w->dead[0];
	assert_int_equal(d->lo, 1);
	assert_int_equal(fo_plan_fate(d, 1), FO_REDO);
	assert_int_equal(fo_plan_fate(d, 2), FO_HELD);
	assert_int_equal(fo_plan_fate(d, 3), FO_HELD);
	assert_int_equal(fo_plan_fate(d, 4), FO_REDO);
	assert_int_equal(fo_plan_fate(d, 5), FO_REDO);
	for (uint64_t c = 1; c < 6; c += c == 1 ? 3 : 1) {
		for (uint32_t k = 0; k < 3; k++) {
			const struct fo_act *a = find(w, k, FO_ACT_REDO_CHUNK, 0, c);
			assert_non_null(a);
			assert_int_equal(a->take, k == c / 2); /* only the owner takes the sum */
			assert_false(a->zero);                 /* every node contributes */
			/* a node that had its empty result keeps it ended */
			assert_int_equal(a->settle, k != 1 && !w->node[k].got[0][c]);
		}
		assert_int_equal(find(w, 1, FO_ACT_REDO_CHUNK, 0, c)->slot, -1); /* from what it kept */
	}
	assert_non_null(find(w, 0, FO_ACT_END, 0, 3));
	assert_null(find(w, 0, FO_ACT_END, 0, 2));
	assert_null(find(w, 2, FO_ACT_END, 0, 3));
	assert_int_equal(w->cnt[1].kept, 3);
	assert_int_equal(w->cnt[1].redo_chunks, 3);
	assert_int_equal(w->cnt[0].kept, 0);
	assert_int_equal(w->cnt[0].redo_chunks, 3);
	assert_int_equal(w->cnt[0].redo_bytes, 3 * CB);
	world_free(w);
}

/* A copy passes through a node that wants none of it (cluster/partition's
 * --small-rs case): a reduce-scatter chunk across the blocks of nodes 1
 * and 2 (both ALL; node 0 GIVE) reached node 2 only. It goes 2 -> 0 -> 1:
 * node 0 passes it on through a buffer of its own, node 1 takes it and
 * sends nothing back to the root. */
static void reduce_scatter_pass_through(void **state)
{
	(void)state;
	struct world *w = world_new(3, 1, 4);
	add_req(w, true, 0, 0, 4);
	for (uint32_t k = 0; k < 3; k++)
		for (uint64_t c = 0; c < 4; c++)
			w->node[k].role[0][c] = k == 0 ? CLIENT_ROLE_GIVE : CLIENT_ROLE_ALL;
	for (uint32_t k = 0; k < 3; k++)
		w->node[k].got[0][0] = true;
	w->node[2].got[0][1] = true;
	w->node[2].got[0][2] = true;
	w->node[0].got[0][2] = true; /* node 0's empty result of chunk 2 came */
	fence_all(w, 1);
	complete_done(w);
	run(w);
	check_repair(w);
	const struct fo_act *p = find(w, 0, FO_ACT_COPY, 0, 1), *t = find(w, 1, FO_ACT_COPY, 0, 1);
	const struct fo_act *p2 = find(w, 0, FO_ACT_COPY, 0, 2);
	/* whether or not its empty result came, the passer's request waits for
	 * the copy to pass; it ends the chunk only where it did not come */
	assert_true(p2->keep_req);
	assert_false(p2->settle);
	assert_true(p->settle);
	assert_int_equal(p->root, 2);
	assert_int_equal(p->here, FO_COPY_PASSES);
	assert_true(p->rx && p->tx && p->tx_after_rx);
	assert_true(p->keep_req); /* its request waits for the chunk's end */
	assert_int_equal(t->here, FO_COPY_TAKES);
	assert_true(t->rx);
	assert_false(t->tx);
	assert_int_equal(find(w, 2, FO_ACT_COPY, 0, 1)->here, FO_COPY_SENDS);
	assert_int_equal(w->cnt[0].passed, 2);
	assert_int_equal(w->cnt[0].lacking, 0);
	assert_int_equal(w->cnt[1].lacking, 2);
	assert_int_equal(w->cnt[1].passed, 0);
	world_free(w);
}

/* Allgather windows: chunk 0 inside node 2's block (SOURCE there, TAKE
 * elsewhere), chunk 1 inside node 0's. Chunk 0: node 2's empty result came
 * (an allgather's source then holds it: its send data), node 0 got it,
 * node 1 did not: copied from the lowest holder, node 0, and node 2 passes
 * its own copy on from its send data. Chunk 1: its source's empty result
 * did not come and nobody got it: recomputed alone, the source giving its
 * data, the others zeros, and they take the sum. */
static void allgather_window(void **state)
{
	(void)state;
	struct world *w = world_new(3, 1, 4);
	add_req(w, true, 0, 0, 2);
	for (uint32_t k = 0; k < 3; k++) {
		w->node[k].role[0][0] = k == 2 ? CLIENT_ROLE_SOURCE : CLIENT_ROLE_TAKE;
		w->node[k].role[0][1] = k == 0 ? CLIENT_ROLE_SOURCE : CLIENT_ROLE_TAKE;
	}
	w->node[2].got[0][0] = true;
	w->node[0].got[0][0] = true;
	complete_done(w);
	fence_all(w, 1);
	run(w);
	check_repair(w);
	const struct fo_act *c0 = find(w, 2, FO_ACT_COPY, 0, 0);
	assert_int_equal(c0->root, 0);
	assert_int_equal(c0->here, FO_COPY_SENDS);
	assert_true(c0->from_send);  /* a source's copy is its send data */
	assert_false(c0->from_recv);
	assert_int_equal(find(w, 0, FO_ACT_COPY, 0, 0)->here, FO_COPY_SENDS);
	assert_true(find(w, 0, FO_ACT_COPY, 0, 0)->from_recv);
	for (uint32_t k = 0; k < 3; k++) {
		const struct fo_act *a = find(w, k, FO_ACT_REDO_CHUNK, 0, 1);
		assert_non_null(a);
		assert_int_equal(a->zero, k != 0);
		assert_int_equal(a->take, k != 0);
		assert_int_equal(a->settle, true);
	}
	world_free(w);
}

/* The window's edge: chunk lo + w - 1 held by some and lacked by others is
 * copied (tag offset w - 1); chunk lo + w is recomputed, whatever any node
 * reports of it (credit flow: no node can hold it). */
static void window_edge(void **state)
{
	(void)state;
	struct world *w = world_new(2, 1, 4);
	add_req(w, false, 0, 0, 12);
	got_upto(w, 0, 0, 3);
	got_upto(w, 1, 0, 3);
	w->node[1].got[0][6] = true; /* lo + w - 1 */
	complete_done(w);
	fence_all(w, 1);
	run(w);
	check_repair(w);
	const struct fo_dead *d = &w->dead[0];
	assert_int_equal(d->lo, 3);
	assert_int_equal(fo_plan_fate(d, 6), FO_COPY);
	assert_int_equal(fo_plan_fate(d, 7), FO_REDO);
	const struct fo_act *a = find(w, 0, FO_ACT_COPY, 0, 6);
	assert_int_equal(a->k, 3);
	assert_int_equal(a->root, 1);
	/* runs 3..5 and 7..11 */
	assert_int_equal(find(w, 0, FO_ACT_REDO_RUN, 0, 3)->n, 3);
	assert_int_equal(find(w, 0, FO_ACT_REDO_RUN, 0, 7)->c, 7);
	assert_int_equal(find(w, 0, FO_ACT_REDO_RUN, 0, 11)->n, 5);
	world_free(w);
}

/* fault_all_*: every aggregator fails. Both are decided in one epoch;
 * requests from S on have no aggregator (the ring alone), earlier ones
 * keep the connect-time set (and redo their parts). */
static void every_aggregator(void **state)
{
	(void)state;
	struct world *w = world_new(4, 2, 4);
	add_req(w, false, 0, 0, 3);
	w->req[0].n[1] = 3;
	for (uint32_t k = 0; k < 4; k++) {
		got_upto(w, k, 0, 1);
		got_upto(w, k, 1, 2);
	}
	complete_done(w);
	fence_all(w, 3);
	run(w);
	check_repair(w);
	assert_int_equal(w->set, 3);
	struct fo_epoch e[2] = { { 0, 3 } };
	e[1] = fo_plan_epoch_next(&e[0], w->set, 0, w->r1.next);
	assert_int_equal(e[1].live, 0);
	assert_int_equal(e[1].from, 1);
	uint32_t ep;
	assert_int_equal(fo_plan_live_for(e, 2, 0, &ep), 3);
	assert_int_equal(fo_plan_live_for(e, 2, 1, &ep), 0);
	assert_int_equal(ep, 1);
	for (uint32_t k = 0; k < 4; k++)
		assert_int_equal(w->cnt[k].redo_chunks, 3);
	world_free(w);
}

/* A request issued late: node 1 had not issued request 1 when the nodes
 * agreed (S = 2 from node 0's count). When it does, its part on the dead
 * aggregator is redone under the same runs as node 0's. */
static void late_request(void **state)
{
	(void)state;
	struct world *w = world_new(2, 1, 4);
	add_req(w, false, 0, 0, 2);
	add_req(w, false, 0, 2, 3);
	w->node[1].started[1] = false;
	w->node[1].next = 1;
	got_upto(w, 0, 0, 1);
	got_upto(w, 1, 0, 1);
	complete_done(w);
	fence_all(w, 1);
	run(w);
	assert_int_equal(w->r1.next, 2);
	assert_null(find(w, 1, FO_ACT_REDO_RUN, 0, 2));
	w->node[1].started[1] = true;
	struct nview nv = { w, 1 };
	struct fo_view v = view_of(&nv);
	struct fo_counts n = { 0 };
	size_t before = w->nact[1];
	assert_int_equal(fo_plan_req(&v, w->dead, 1, 1, &n), 0);
	assert_int_equal(w->nact[1], before + 1);
	const struct fo_act *late = &w->act[1][before], *early = find(w, 0, FO_ACT_REDO_RUN, 0, 2);
	assert_int_equal(late->kind, FO_ACT_REDO_RUN);
	assert_int_equal(late->c, early->c);
	assert_int_equal(late->n, early->n);
	assert_int_equal(late->run, early->run);
	assert_int_equal(n.redo_chunks, 3);
	/* a set without the request's aggregators: nothing */
	n = (struct fo_counts){ 0 };
	assert_int_equal(fo_plan_req(&v, w->dead, 0, 1, &n), 0);
	assert_int_equal(w->nact[1], before + 1);
	world_free(w);
}

/* The pieces alone: what a node cannot repair is refused, with what, as
 * the WARN says; a TAKE recomputes with zeros; a node that has a result
 * takes no sum; a plan that meets a refusal or an unknown chunk stops. */
static void pieces_and_refusals(void **state)
{
	(void)state;
	struct fo_dead d = { .lo = 10, .w = 2 };
	int64_t holder[2] = { 1, FO_NONE }, lacker[2] = { 0, FO_NONE };
	struct fo_chunk ch = { .held = true, .retained = false, .slot = 3 };
	struct fo_act a;
	const char *what = NULL;

	d.holder = holder;
	d.lacker = lacker;
	assert_int_equal(fo_plan_copy(&d, 0, 1, 2, &ch, &a, &what), -EPROTO);
	assert_string_equal(what, "is held here but not retained");
	ch = (struct fo_chunk){ .lacks = true, .slot = -1 };
	assert_int_equal(fo_plan_copy(&d, 0, 0, 2, &ch, &a, &what), -EPROTO);
	assert_string_equal(what, "is lacking here but belongs to no request in flight");
	ch = (struct fo_chunk){ .known = true, .role = CLIENT_ROLE_ALL, .gives = true, .len = 0 };
	assert_int_equal(fo_plan_redo_chunk(&ch, &a, &what), -EPROTO);
	assert_string_equal(what, "is to be recomputed, but this node has nothing of it");
	ch = (struct fo_chunk){ .known = true, .role = CLIENT_ROLE_GIVE, .gives = false, .len = 8 };
	assert_int_equal(fo_plan_redo_chunk(&ch, &a, &what), -EPROTO);
	assert_string_equal(what, "is to be recomputed, but this node has not kept what it sent");
	ch = (struct fo_chunk){ .known = true, .role = CLIENT_ROLE_ALL, .gives = true, .len = 8,
				.slot = -1 };
	assert_int_equal(fo_plan_redo_chunk(&ch, &a, &what), -EPROTO);
	assert_string_equal(what, "is to be recomputed, but this node has no request to take it");
	/* a TAKE has nothing to give and needs nothing kept */
	ch = (struct fo_chunk){ .known = true, .issued = true, .role = CLIENT_ROLE_TAKE, .len = 8,
				.slot = 2 };
	assert_int_equal(fo_plan_redo_chunk(&ch, &a, &what), 0);
	assert_true(a.zero && a.take && a.settle);
	assert_int_equal(a.slot, 2);
	/* one that has its result takes no sum (and does not end it again) */
	ch = (struct fo_chunk){ .known = true, .issued = true, .got = true, .role = CLIENT_ROLE_ALL,
				.gives = true, .len = 8, .slot = 2 };
	assert_int_equal(fo_plan_redo_chunk(&ch, &a, &what), 0);
	assert_false(a.take || a.settle || a.zero);
	/* a plan that meets one stops there: the world below lost node 0's
	 * data of a chunk it holds and another node lacks */
	struct world *w = world_new(2, 1, 4);
	add_req(w, false, 0, 0, 4);
	got_upto(w, 0, 0, 2);
	got_upto(w, 1, 0, 1);
	w->node[0].no_data[0][1] = true;
	complete_done(w);
	fence_all(w, 1);
	run(w);
	assert_int_equal(w->rc[0], -EPROTO);
	assert_string_equal(w->refused[0], "chunk 1 of aggregator 0 is held here but not retained");
	assert_int_equal(w->nact[0], 0);
	assert_int_equal(w->rc[1], 0);
	world_free(w);
	/* a window chunk in flight that the client does not know: the plan
	 * stops with -EPROTO (nothing to say but the error) */
	w = world_new(2, 1, 4);
	add_req(w, true, 0, 0, 2);
	w->node[1].unknown[0][1] = true;
	complete_done(w);
	fence_all(w, 1);
	run(w);
	assert_int_equal(w->rc[1], -EPROTO);
	assert_string_equal(w->refused[1], "");
	assert_int_equal(w->rc[0], 0);
	world_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kill_allreduce),
		cmocka_unit_test(runs_split_by_copy),
		cmocka_unit_test(set_differs_two_aggregators),
		cmocka_unit_test(round1_values),
		cmocka_unit_test(partition_one_node),
		cmocka_unit_test(reduce_scatter_window),
		cmocka_unit_test(reduce_scatter_pass_through),
		cmocka_unit_test(allgather_window),
		cmocka_unit_test(window_edge),
		cmocka_unit_test(every_aggregator),
		cmocka_unit_test(late_request),
		cmocka_unit_test(pieces_and_refusals),
		cmocka_unit_test(readmit_values),
		cmocka_unit_test(drain_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
