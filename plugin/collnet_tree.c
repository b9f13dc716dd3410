/* A tree where fan-in ends: above rank 0's SUMCAST_FAN_IN (F) nodes, a
 * collnet communicator is two levels of collnet communicators of its own
 * engine (docs/plugin.md, "A tree where fan-in ends"). The N nodes form
 * G = ceil(N/F) groups of consecutive ranks, sizes as even as possible
 * (each <= F); a buffer is cut into F' = ceil(N/G) shards, shard s owned in
 * a group of g nodes by member s % g (a member of a smaller group owns the
 * leftover shard too). An allreduce is
 *   1. a reduce-scatter inside the group (the "rs" communicator, owner-only
 *      windows: collnet_ireducescatter), the group's partial sum of each
 *      shard landing in its owner's recv buffer;
 *   2. an allreduce of each owned shard among its owners across the G
 *      groups (a "cross" communicator per shard, collnet_iallreduce, in
 *      place in recv);
 *   3. an allgather inside the group (the "ag" communicator,
 *      collnet_iallgather).
 * Each of those communicators is a whole engine instance (coll_comm_create:
 * its own endpoint and ring, its own aggregator job of at most max(F', G)
 * ranks, its own failover, adaptive split, sealing and multicast), so every
 * level survives an aggregator fault as a flat collnet does. The inner
 * endpoints' addresses travel over this communicator's own ring at connect
 * (one agreement), and the inner job ids derive from its job id.
 *
 * Order: a communicator's requests must come in the same order on every
 * node. Each inner communicator carries one stage of every request, in
 * request order: a stage of request i is issued only when every stage of
 * the earlier requests on that communicator has been (tree_progress), so
 * the order is the same everywhere whatever the timing. That is why the
 * reduce-scatter and the allgather have communicators of their own: on one
 * communicator, request i + 1's reduce-scatter and request i's allgather
 * would come in the order each node's cross allreduce finished.
 *
 * The arithmetic (groups, owners, neighbours, job ids, each request's
 * stages) is tree_plan.c's, pure and tested alone.
 *
 * This communicator keeps its ring (window collectives NCCL issues on it go
 * there: correct, slower) and joins no aggregator itself. */
#include "collnet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tree_plan.h"

#define TREE_ADDR_WORDS (1 + FABRIC_ADDR_MAX / 8) /* length, then the address */
enum { TOP_WAIT = 0, TOP_ISSUED, TOP_DONE };

struct tree_op {
	uint8_t comm;  /* index into tree->inner */
	uint8_t kind;  /* TK_*: also its stage (0, 1, 2) */
	uint8_t state; /* TOP_* */
	size_t base, len; /* elements: where its window / shard starts, how long */
	struct coll_req *req; /* the inner request while issued */
};

struct tree_req {
	uint32_t nops;
	int err;
	struct tree_op ops[TREE_STAGES_MAX];
	ncclDataType_t t;
	ncclRedOp_t op;
	size_t sh; /* shard elements */
};

struct coll_tree {
	struct tree_shape shape; /* groups, shards (tree_plan.h) */
	struct tree_place pl;    /* this node's group, place, inner communicators */
	struct coll_comm *inner[TREE_INNER_MAX];
	uint64_t oldest; /* the oldest request that may still be live */
	struct tree_req reqs[COLL_REQS];
	uint64_t agg_sent; /* bytes sent to the aggregators at every level */
};

/* ---- connect ---- */

/* Where node `rank`'s address for inner slot `slot` sits in the agreed vector. */
static int64_t *addr_words(int64_t *v, uint32_t rank, uint32_t slot)
{
	return v + 3 + ((size_t)rank * TREE_INNER_MAX + slot) * TREE_ADDR_WORDS;
}

static int addr_get(int64_t *v, uint32_t rank, uint32_t slot, const void **a, size_t *len)
{
	int64_t *w = addr_words(v, rank, slot);

	if (w[0] <= 0 || w[0] > FABRIC_ADDR_MAX)
		return -EPROTO;
	*a = w + 1;
	*len = (size_t)w[0];
	return 0;
}

int coll_tree_connect(struct coll_comm *cc, const struct coll_handle *h0, uint64_t t0,
		      uint64_t deadline)
{
	uint32_t n = cc->nranks, F = h0->fan_in;
	struct coll_tree *t = calloc(1, sizeof(*t));
	struct fabric *fs[TREE_INNER_MAX] = { 0 };
	int64_t *v = NULL;
	int rc = -ENOMEM;

	if (!t)
		return -ENOMEM;
	tree_shape_of(n, F, &t->shape);
	tree_place_of(&t->shape, cc->rank, &t->pl);

	coll_aggs_parse(cc, h0);
	/* rank 0's settings, the aggregator list's length (as min and max),
	 * whether every node opened its inner endpoints, and their addresses */
	size_t nv = 3 + (size_t)n * TREE_INNER_MAX * TREE_ADDR_WORDS;
	v = malloc(nv * sizeof(*v));
	if (!v)
		goto out;
	for (size_t i = 0; i < nv; i++)
		v[i] = INT64_MAX;
	bool ok = cc->naggs > 0;
	for (uint32_t i = 0; ok && i < t->pl.ninner; i++) {
		if (plugin_fabric_open(false, &fs[i])) {
			ok = false;
			break;
		}
		int64_t *w = addr_words(v, cc->rank, i);
		w[0] = (int64_t)fs[i]->addrlen;
		memcpy(w + 1, fs[i]->addr, fs[i]->addrlen);
	}
	v[0] = (int64_t)cc->naggs;
	v[1] = -(int64_t)cc->naggs;
	v[2] = ok;
	rc = coll_agree(cc, v, nv, COLL_AGREE_TREE,
			deadline + (uint64_t)plugin_cfg.connect_timeout_ms * 1000000ull, false);
	if (rc) {
		SC_WARN("collnet connect: rank %u of %u: ring to the neighbours failed: %s", cc->rank, n,
			rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
		goto out;
	}
	if (v[0] != -v[1] || v[0] <= 0 || v[2] != 1) {
		if (cc->naggs || v[0] > 0)
			SC_WARN("collnet job 0x%016llx: aggregators unusable on %s (this node: %s); "
				"all %u nodes use the ring", (unsigned long long)cc->job_id,
				v[0] != -v[1] ? "some nodes (lists differ)" : "at least one node",
				ok ? "endpoints open" : "no endpoints", n);
		else
			SC_INFO("collnet job 0x%016llx: rank %u of %u, no SUMCAST_AGGREGATORS: ring only",
				(unsigned long long)cc->job_id, cc->rank, n);
		rc = 0;
		goto out;
	}
	cc->tree = t;
	for (uint32_t i = 0; i < t->pl.ninner; i++) {
		struct tree_inner in;
		tree_inner_of(&t->shape, &t->pl, cc->job_id, i, &in);
		struct grant ask = tree_inner_ask(&t->shape, in.nranks, (uint32_t)plugin_cfg.window,
						  (uint32_t)plugin_cfg.chunk_bytes);
		struct coll_conf c = { .h0 = h0, .parent = cc, .job_id = in.job_id, .rank = in.rank,
				       .nranks = in.nranks, .window = ask.window, .chunk = ask.chunk };
		rc = addr_get(v, in.next, in.next_slot, &c.next, &c.next_len);
		if (!rc)
			rc = addr_get(v, in.prev, in.prev_slot, &c.prev, &c.prev_len);
		if (rc) {
			SC_WARN("collnet job 0x%016llx rank %u: tree: no address for inner communicator %u",
				(unsigned long long)cc->job_id, cc->rank, i);
			goto out;
		}
		struct fabric *f = fs[i];
		fs[i] = NULL;
		rc = coll_comm_create(f, &c, &t->inner[i]);
		if (rc) {
			SC_WARN("collnet job 0x%016llx rank %u: tree: inner communicator %u (job 0x%016llx, "
				"rank %u of %u) failed: %s", (unsigned long long)cc->job_id, cc->rank, i,
				(unsigned long long)c.job_id, c.rank, c.nranks, strerror(-rc));
			goto out;
		}
	}
	char owned[32] = "";
	for (uint32_t i = TREE_X0, l = 0; i < t->pl.ninner; i++)
		l += (uint32_t)snprintf(owned + l, sizeof(owned) - l, "%s%u", l ? "," : "", t->pl.shard[i]);
	SC_INFO("collnet job 0x%016llx: rank %u of %u, tree (fan-in %u): %u groups, this node member "
		"%u of group %u (%u nodes), shard(s) %s of %u; inner jobs of at most %u nodes; "
		"connected in %.1f ms",
		(unsigned long long)cc->job_id, cc->rank, n, F, t->shape.G, t->pl.member, t->pl.group,
		t->pl.g, owned, t->shape.Fp, t->shape.Fp > t->shape.G ? t->shape.Fp : t->shape.G,
		(sc_now_ns() - t0) / 1e6);
	free(v);
	return 0;
out:
	if (cc->tree) {
		coll_tree_close(cc); /* what was made, and t */
		t = NULL;
	}
	for (uint32_t i = 0; i < TREE_INNER_MAX; i++)
		if (fs[i])
			fabric_close(fs[i]);
	free(v);
	free(t);
	return rc;
}

/* ---- requests ---- */

static struct coll_mr *inner_mr(struct coll_mr *m, uint32_t i)
{
	return m && m->inner && i < m->ninner ? &m->inner[i] : NULL;
}

/* Issues op on its inner communicator: 0 with *req NULL (retry later). */
static int op_issue(struct coll_tree *t, struct coll_req *r, struct tree_req *tr,
		    struct tree_op *op, void **req)
{
	struct coll_comm *ic = t->inner[op->comm];
	size_t es = r->es, sh = tr->sh;
	char *send = (char *)r->send, *recv = r->recv;
	struct coll_mr *sm = inner_mr(r->sm, op->comm), *rm = inner_mr(r->rm, op->comm);
	/* this node's block of the window: NCCL's pointer rule (collnet_window.c) */
	size_t mine = (size_t)t->pl.member * sh < op->len ? (size_t)t->pl.member * sh : op->len;

	*req = NULL;
	switch (op->kind) {
	case TK_RS: {
		ncclNetSGE_t part = { .mhandle = sm, .address = send + op->base * es, .size = op->len * es };
		return collnet_ireducescatter(ic, 1, &part, recv + (op->base + mine) * es, sh * es, 0,
					      op->len * es, tr->t, tr->op, rm, req);
	}
	case TK_AR:
		return collnet_iallreduce(ic, recv + op->base * es, recv + op->base * es, op->len, tr->t,
					  tr->op, rm, rm, req);
	default: {
		ncclNetSGE_t part = { .mhandle = rm, .address = recv + op->base * es, .size = op->len * es };
		return collnet_iallgather(ic, recv + (op->base + mine) * es, 1, &part, sh * es, 0,
					  op->len * es, rm, req);
	}
	}
}

/* Moves every request of the tree: each inner communicator's queues read
 * once, each issued stage tested, each stage whose turn has come issued.
 * A stage's turn: the stages before it in its request are done, and no
 * earlier stage on its communicator waits to be issued (so each inner
 * communicator sees the requests in the same order on every node). */
static void tree_progress(struct coll_comm *cc)
{
	struct coll_tree *t = cc->tree;
	int prc[TREE_INNER_MAX];
	bool blocked[TREE_INNER_MAX] = { false };

	for (uint32_t i = 0; i < t->pl.ninner; i++)
		prc[i] = coll_comm_poll(t->inner[i]);
	while (t->oldest < cc->next_idx) {
		struct coll_req *r = &cc->reqs[t->oldest % COLL_REQS];
		if (r->used && r->idx == t->oldest)
			break;
		t->oldest++;
	}
	for (uint64_t idx = t->oldest; idx < cc->next_idx; idx++) {
		uint32_t slot = (uint32_t)(idx % COLL_REQS);
		struct coll_req *r = &cc->reqs[slot];
		struct tree_req *tr = &t->reqs[slot];
		if (!r->used || r->idx != idx || r->coll != COLL_TREE)
			continue;
		uint8_t stage = TK_AG + 1;
		for (uint32_t k = 0; k < tr->nops; k++) {
			struct tree_op *op = &tr->ops[k];
			if (op->state == TOP_ISSUED) {
				int d = 0;
				int rc = coll_req_test(op->req, prc[op->comm], &d, NULL);
				if (rc) {
					tr->err = tr->err ? tr->err : rc;
					op->state = TOP_DONE;
					op->req = NULL;
				} else if (d) {
					/* the trace row of the tree's request: what its
					 * stages sent and got, repaired, and the latest
					 * failover epoch any of them ran in */
					r->agg_give += op->req->agg_give;
					r->agg_take += op->req->agg_take;
					r->redone_bytes += op->req->redone_bytes;
					if (op->req->epoch > r->epoch)
						r->epoch = op->req->epoch;
					op->state = TOP_DONE;
					op->req = NULL;
				}
			}
			if (op->state != TOP_DONE && op->kind < stage)
				stage = op->kind;
		}
		for (uint32_t k = 0; k < tr->nops; k++) {
			struct tree_op *op = &tr->ops[k];
			if (op->state != TOP_WAIT)
				continue;
			if (tr->err || op->kind > stage || blocked[op->comm]) {
				blocked[op->comm] = true;
				continue;
			}
			void *req = NULL;
			int rc = op_issue(t, r, tr, op, &req);
			if (rc) {
				tr->err = rc;
				blocked[op->comm] = true;
			} else if (!req) {
				blocked[op->comm] = true; /* the inner communicator is full or agreeing */
			} else {
				op->req = req;
				op->state = TOP_ISSUED;
			}
		}
	}
}

int coll_tree_iallreduce(struct coll_comm *cc, void *send, void *recv, size_t count,
			 ncclDataType_t t, ncclRedOp_t op, struct coll_mr *sm, struct coll_mr *rm,
			 void **request)
{
	struct coll_tree *tree = cc->tree;
	uint32_t slot = (uint32_t)(cc->next_idx % COLL_REQS);
	struct coll_req *r = &cc->reqs[slot];
	enum sc_dtype d;
	enum sc_op o;

	*request = NULL;
	if (plugin_dtype(t, &d) || plugin_op(op, &o))
		return -EINVAL;
	if (cc->failed)
		return -EPIPE;
	if (r->used) { /* the oldest request still runs: NCCL retries */
		tree_progress(cc);
		return 0;
	}
	coll_req_init(cc, r, COLL_TREE, count, d, o, send, recv, sm, rm);
	struct tree_req *tr = &tree->reqs[slot];
	memset(tr, 0, sizeof(*tr));
	tr->t = t;
	tr->op = op;
	struct tree_stage st[TREE_STAGES_MAX];
	tr->nops = tree_plan_req(&tree->shape, &tree->pl, count, r->es, st, &tr->sh);
	for (uint32_t k = 0; k < tr->nops; k++)
		tr->ops[k] = (struct tree_op){ .comm = st[k].comm, .kind = st[k].kind,
					       .base = st[k].base, .len = st[k].len };
	r->t0 = sc_now_ns();
	r->agg_done = r->ring_done = true;
	cc->next_idx++;
	tree_progress(cc);
	*request = r;
	return 0;
}

int coll_tree_test(struct coll_req *r, int *done, int *size)
{
	struct coll_comm *cc = r->cc;
	struct coll_tree *t = cc->tree;
	struct tree_req *tr = &t->reqs[r - cc->reqs];

	*done = 0;
	tree_progress(cc);
	bool all = true;
	for (uint32_t k = 0; k < tr->nops; k++)
		all = all && tr->ops[k].state == TOP_DONE;
	uint64_t t_end = sc_now_ns();
	if (tr->err) {
		SC_WARN("collnet job 0x%016llx rank %u: tree allreduce seq %u failed: %s",
			(unsigned long long)cc->job_id, cc->rank, r->seq, strerror(-tr->err));
		coll_trace_req(cc, r, t_end, tr->err);
		r->used = false;
		cc->failed = true;
		return tr->err;
	}
	if (!all)
		return 0;
	r->a = r->agg_give ? r->count : 0;
	r->t_agg = t_end;
	r->frac = r->a ? 1.0 : 0.0;
	coll_trace_req(cc, r, t_end, 0);
	/* closeColl's line: an allreduce through the aggregators when any
	 * stage of it was */
	cc->st.ops++;
	cc->st.bytes += r->count * r->es;
	cc->st.agg_bytes += r->a * r->es;
	cc->st.ring_bytes += (r->count - r->a) * r->es;
	*(r->a ? &cc->st.agg_ns : &cc->st.ring_ns) += t_end - r->t0;
	t->agg_sent += r->agg_give;
	if (size)
		*size = (int)(r->count * r->es);
	r->used = false;
	*done = 1;
	return 0;
}

/* ---- memory registration, serving, close ---- */

int coll_tree_mr_reg(struct coll_comm *cc, void *data, size_t size, struct coll_mr *m)
{
	struct coll_tree *t = cc->tree;

	m->inner = calloc(t->pl.ninner, sizeof(*m->inner));
	if (!m->inner)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->pl.ninner; i++) {
		int rc = coll_mr_reg(t->inner[i], data, size, &m->inner[i]);
		if (rc) {
			coll_tree_mr_dereg(m);
			return rc;
		}
		m->ninner = i + 1;
	}
	return 0;
}

void coll_tree_mr_dereg(struct coll_mr *m)
{
	for (uint32_t i = 0; i < m->ninner; i++)
		coll_mr_dereg(&m->inner[i]);
	free(m->inner);
	m->inner = NULL;
	m->ninner = 0;
}

uint32_t coll_tree_ninner(const struct coll_comm *cc)
{
	return cc->tree ? cc->tree->pl.ninner : 0;
}

struct coll_comm *coll_tree_inner(const struct coll_comm *cc, uint32_t i)
{
	return cc->tree && i < cc->tree->pl.ninner ? cc->tree->inner[i] : NULL;
}

void coll_tree_close(struct coll_comm *cc)
{
	struct coll_tree *t = cc->tree;

	if (!t)
		return;
	if (cc->st.ops)
		SC_INFO("collnet job 0x%016llx rank %u/%u (tree of %u groups): %.3f GB sent to the "
			"aggregators at every level for %.3f GB of allreduces",
			(unsigned long long)cc->job_id, cc->rank, cc->nranks, t->shape.G, t->agg_sent / 1e9,
			cc->st.bytes / 1e9);
	/* in one order on every node; each inner close's waits serve the
	 * inner communicators not closed yet (coll_serve) */
	for (uint32_t i = 0; i < t->pl.ninner; i++) {
		struct coll_comm *x = t->inner[i];
		if (!x)
			continue;
		if (cc->failed)
			x->failed = true; /* NCCL has an error: no barrier */
		collnet_close(x);
		t->inner[i] = NULL;
	}
	cc->tree = NULL;
	free(t);
}
