/* Surviving aggregator faults: every request completes with exactly the
 * right result on every node when an aggregator dies, stalls, is cut off
 * from some nodes or aborts the job for a reason of its own. Driven from
 * the calls of the flow (iallreduce, the window ops, test: failover_step);
 * this file holds the notices, the agreement rounds and the epochs;
 * failover_plan.c the decisions (pure functions of what was agreed),
 * failover_repair.c the copies and redos that carry them out, and
 * failover_return.c the returns and drains ("Coming back", "Drain" below).
 *
 * Detect. The client library (params.failover) fences an aggregator the
 * moment this node sees it fail (closed connection, ABORT, completion
 * error, no PONG within SUMCAST_AGG_DEADLINE, silence past the job
 * timeout): its control connection and its own endpoint are closed, so
 * nothing it sends can land in our memory afterwards, and it shows in
 * client_failed().
 *
 * Tell. The set of failed aggregators a node knows travels the ring as a
 * notice (prev -> this node -> next); a node that learns something new
 * fences those aggregators too (the partition case: only one node could
 * not reach it) and passes the notice on. Until the nodes have agreed, new
 * requests wait (iallreduce hands NCCL no request; NCCL retries).
 *
 * Agree, over the ring (min-allreduces), in two rounds per epoch:
 *   1. per aggregator: failed here (as a max and a min), the lowest chunk
 *      number whose result this node lacks; and the next request index.
 *      If the nodes did not all report the same failed set, each fences the
 *      union and round 1 runs again (attempt + 1). Otherwise F is the set,
 *      lo[a] the agreed low mark and S the first request to use the new
 *      set (every request issued so far has an index below S).
 *   2. per aggregator of F, per chunk lo .. lo + window - 1: the lowest rank
 *      holding its result and the lowest rank lacking it (a window op's
 *      chunk may be neither: a reduce-scatter non-owner wants no result;
 *      an allgather's source holds it from the start).
 * Credit flow means a node that holds chunk c means every node holds every
 * chunk up to c - window, so these `window` chunks are the only ones some
 * node may hold and another lack; a node keeps them (client retention).
 *
 * Repair, with everything agreed, the same decision on every node
 * (fo_plan_decide):
 *   - a chunk some node holds and some lacks is copied along the ring from
 *     its lowest holder (each node passes it on; one that holds it already
 *     receives it into a sink);
 *   - an allreduce's chunk no node holds belongs to a request no node has
 *     completed, so every node still has that request's send data: it is
 *     recomputed by a ring allreduce of its bytes (runs of consecutive such
 *     chunks of one request go as one allreduce). Requests issued later
 *     with an index below S that were sharded over a failed aggregator redo
 *     their whole shard there the same way, when they are issued.
 *   - a window op's chunk no node holds (a reduce-scatter chunk its owner
 *     lacks) is recomputed alone, by a ring allreduce of every node's
 *     contribution: its send data while the request is in flight, else
 *     the retention copy (a non-owner's request may have completed: it
 *     keeps what it sent, client.h), zero from an allgather's receivers;
 *     the owner takes the sum, the others drop it.
 * Requests from S on are sharded over the surviving aggregators (or go to
 * the ring alone when none is left).
 *
 * Coming back. Every SUMCAST_READMIT (1 s) each node tries to join a
 * failed (or drained) aggregator again, alone: the same job id and rank on
 * a fresh endpoint (client_agg_rejoin), once nothing of it is still needed
 * here (no repair, no request in flight over it, and every request below
 * the one that stopped using it issued). The daemon sends READY only when
 * every rank has joined, so a dead address costs each node a refused
 * connect, and a half-reachable one a join that times out: neither needs
 * the others. A node that has it READY asks for an agreement (the notice
 * carries the wanted run); round 1 then carries per aggregator "tried"
 * (max) and "READY here" (min) and the lowest next index. It comes back
 * (fo_plan_back) from S on when READY on every node, not failing now, and
 * every node is past its old requests; else every node fences its new
 * membership and waits. An aggregator that fails again within
 * SUMCAST_READMIT_MAX of coming back waits twice as long each time (capped
 * there): a flapping host costs bounded time, never a result.
 *
 * Drain. A daemon that is stopped asks its ranks to move off (DRAIN); round
 * 1 carries it (max), and from S on the aggregator is out of use with no
 * fence and no repair: requests below S complete on it as usual, and each
 * node leaves it (LEAVE) once it has issued every request below S and none
 * of them is in flight over it. Once restarted it comes back as above.
 *
 * Bounds: agreement and repairs must finish within SUMCAST_AGG_TIMEOUT of
 * the first sign of the fault; a node that does not take part by then is
 * dead or stuck, and every request of the communicator fails (as a dead
 * node is with any NCCL transport). */
#include "collnet.h"

#include <errno.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tags.h"

static uint64_t fo_timeout_ns(void)
{
	return (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull;
}

/* What is under way for a fault must be done SUMCAST_AGG_TIMEOUT from now
 * at the latest (an agreement only on returns and drains has no bound of
 * its own: UINT64_MAX, like a collective waiting for a slow node). */
static void fo_bound(struct failover *fo)
{
	uint64_t t = sc_now_ns() + fo_timeout_ns();

	if (fo->deadline_ns == UINT64_MAX || fo->deadline_ns < t)
		fo->deadline_ns = t;
}

static uint64_t aggs_mask(const struct coll_comm *cc)
{
	return cc->naggs >= 64 ? ~0ull : (1ull << cc->naggs) - 1;
}


void failover_fail(struct coll_comm *cc, int err, const char *what)
{
	struct failover *fo = &cc->fo;

	if (fo->err)
		return;
	fo->err = err;
	SC_WARN("collnet job 0x%016llx rank %u: recovering from an aggregator fault failed: %s (%s; "
		"epoch %u attempt %u, failed aggregators 0x%llx of which agreed 0x%llx, %s); every request "
		"of this communicator fails",
		(unsigned long long)cc->job_id, cc->rank, what,
		err == -ETIMEDOUT ? "timed out" : fi_strerror(-err), fo->epoch, fo->attempt,
		(unsigned long long)fo->known, (unsigned long long)fo->dead,
		fo->state == FO_ROUND1 ? "in round 1" : fo->state == FO_ROUND2 ? "in round 2"
		: !SLIST_EMPTY(&fo->items) ? "repairing" : "idle");
}

/* ---- notices ---- */

static void note_known(struct coll_comm *cc, uint64_t mask, bool here)
{
	struct failover *fo = &cc->fo;
	uint64_t fresh = mask & ~fo->known;

	if (!fresh)
		return;
	uint64_t now = sc_now_ns();
	if (!(fo->known & ~fo->dead))
		fo->t_first_ns = now; /* the first sign of what the next agreement decides */
	fo_bound(fo);
	for (size_t ai = 0; ai < cc->naggs; ai++) {
		if (!(fresh >> ai & 1))
			continue;
		struct fo_dead *d = &fo->deads[ai];
		if (here) {
			snprintf(d->why, sizeof(d->why), "%s", client_agg_why(cc->client, ai));
		} else {
			client_agg_fence(cc->client, ai, "another node reported it failed");
			snprintf(d->why, sizeof(d->why), "reported by another node");
		}
	}
	fo->known |= fresh;
}

static void notice_post_rx(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	if (fo->nrx_posted || cc->nranks < 2)
		return;
	int rc = ring_post(&cc->ring, &fo->nrx, false, &fo->nbuf[0], 3 * sizeof(uint64_t), fo->nmem.mr.desc,
			   sc_tag_notice());
	if (rc == 0)
		fo->nrx_posted = true;
	else
		fo->nrx.state = RING_X_IDLE; /* -FI_EAGAIN: next pass */
}

/* Failures a node notified at its epoch `ep`: an aggregator that came back
 * after that epoch is not meant (the notice is older than its return); a
 * notice from an epoch this node has not reached yet waits for it (the
 * sender may mean an aggregator that comes back here in that epoch). */
static void note_notice(struct coll_comm *cc, uint64_t mask, uint32_t ep)
{
	struct failover *fo = &cc->fo;

	if (ep > fo->epoch) {
		fo->later |= mask;
		fo->later_epoch = ep > fo->later_epoch ? ep : fo->later_epoch;
		return;
	}
	for (size_t ai = 0; ai < cc->naggs; ai++)
		if (fo->outs[ai].back_epoch > ep)
			mask &= ~(1ull << ai);
	note_known(cc, mask, false);
}

static void notice_progress(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	if (cc->nranks < 2)
		return;
	if (fo->nrx_posted && fo->nrx.state == RING_X_DONE) {
		fo->nrx_posted = false;
		if (fo->nrx.err) {
			failover_fail(cc, fo->nrx.err, "receiving a fault notice from the previous node");
		} else {
			note_notice(cc, fo->nbuf[0] & aggs_mask(cc), (uint32_t)fo->nbuf[1]);
			if (fo->nbuf[2] > fo->want)
				fo->want = fo->nbuf[2];
		}
	}
	if (fo->later && fo->epoch >= fo->later_epoch) {
		uint64_t m = fo->later;
		fo->later = 0;
		note_notice(cc, m, fo->later_epoch);
	}
	notice_post_rx(cc);
	if ((fo->known & ~fo->told) == 0 && fo->want <= fo->told_want)
		return;
	for (int i = 0; i < 4; i++) {
		struct ring_xfer *x = &fo->ntx[i];
		if (x->state == RING_X_POSTED)
			continue;
		if (x->state == RING_X_DONE && x->err)
			failover_fail(cc, x->err, "sending a fault notice to the next node");
		uint64_t *b = &fo->nbuf[3 + 3 * i];
		b[0] = fo->known;
		b[1] = fo->epoch;
		b[2] = fo->want;
		int rc = ring_post(&cc->ring, x, true, b, 3 * sizeof(uint64_t), fo->nmem.mr.desc, sc_tag_notice());
		if (rc) {
			x->state = RING_X_IDLE;
			if (rc != -FI_EAGAIN)
				failover_fail(cc, rc, "sending a fault notice to the next node");
			return;
		}
		fo->told = fo->known;
		fo->told_want = fo->want;
		return;
	}
}

/* ---- agreement ---- */

/* Round `round`'s agreement of this epoch and attempt: its buffers are
 * allocated before the caller fills them (coll_agreement_alloc), then it
 * starts. */
static void agree_go(struct coll_comm *cc, uint32_t round)
{
	struct failover *fo = &cc->fo;

	coll_agreement_start(cc, &fo->agree, sc_tag_agree(fo->epoch, fo->attempt, round));
}

static int round1_start(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;
	uint64_t lo[CLIENT_AGGS_MAX];
	int rc = coll_agreement_alloc(cc, &fo->agree, fo_plan_round1_len(cc->naggs));

	if (rc)
		return rc;
	fo->fenced = fo->known & ~fo->dead;
	struct fo_round1_in in = { .fenced = fo->fenced, .lo = lo, .next = cc->next_idx, .tried = fo->back,
				   .drain = client_draining(cc->client) & fo_live(fo), .left = fo->gone & ~fo->leaving };
	for (size_t ai = 0; ai < cc->naggs; ai++) {
		lo[ai] = fo->fenced >> ai & 1 ? client_agg_lo(cc->client, ai) : 0;
		if (client_agg_joined(cc->client, ai) == 1)
			in.joined |= fo->back & 1ull << ai;
	}
	fo_plan_round1_fill(cc->naggs, &in, fo->agree.in);
	if (fo->fenced)
		fo_bound(fo);
	else if (SLIST_EMPTY(&fo->items))
		fo->deadline_ns = UINT64_MAX; /* returns and drains only: no bound */
	agree_go(cc, 1);
	fo->state = FO_ROUND1;
	return 0;
}

static int round2_start(struct coll_comm *cc, uint64_t set)
{
	struct failover *fo = &cc->fo;
	uint32_t w[CLIENT_AGGS_MAX] = { 0 };
	int rc;

	for (size_t ai = 0; ai < cc->naggs; ai++)
		if (set >> ai & 1)
			w[ai] = client_agg_window(cc->client, ai);
	rc = coll_agreement_alloc(cc, &fo->agree, fo_plan_round2_len(cc->naggs, set, w));
	if (rc)
		return rc;
	size_t k = 0;
	for (size_t ai = 0; ai < cc->naggs; ai++) {
		if (!(set >> ai & 1))
			continue;
		for (uint32_t j = 0; j < w[ai]; j++) {
			uint64_t c = fo->r1.lo[ai] + j;
			fo_plan_round2_fill(fo->agree.in + k, w[ai], j, cc->rank,
					    client_chunk_held(cc->client, ai, c),
					    client_chunk_lacks(cc->client, ai, c));
		}
		k += 2 * (size_t)w[ai];
	}
	agree_go(cc, 2);
	fo->state = FO_ROUND2;
	return 0;
}

/* ---- decision ---- */

/* The set's repairs: the agreed state of each failed aggregator (round 2),
 * then this node's part (failover_plan.c decides it, failover_repair.c
 * carries it out), and the fault's WARN line. */
static int decide_faults(struct coll_comm *cc, uint64_t set, uint64_t from, uint64_t now)
{
	struct failover *fo = &cc->fo;
	struct fo_counts n = { 0 };
	int rc = 0;
	size_t k = 0;

	for (size_t ai = 0; ai < cc->naggs; ai++) {
		if (!(set >> ai & 1))
			continue;
		struct fo_dead *d = &fo->deads[ai];
		struct fo_out *o = &fo->outs[ai];
		uint32_t w = client_agg_window(cc->client, ai);
		d->agreed = true;
		d->epoch = fo->epoch;
		rc = fo_plan_round2_read(fo->agree.out + k, fo->r1.lo[ai], w, d);
		if (rc)
			return rc;
		k += 2 * (size_t)w;
		if (!(fo->gone >> ai & 1))
			o->from = from;
		fo_out_hold(o, now, o->back_ns && now - o->back_ns < fo_ms_ns(plugin_cfg.readmit_max_ms));
		if (SC_LOG_DEBUG <= sc_log_level_cur) {
			char hl[512];
			size_t off = 0;
			for (uint32_t j = 0; j < w && off + 48 < sizeof(hl); j++)
				off += (size_t)snprintf(hl + off, sizeof(hl) - off, " %" PRIu64 ":%s/%s", d->lo + j,
							d->holder[j] == FO_NONE ? "-" : "h",
							d->lacker[j] == FO_NONE ? "-" : "l");
			SC_DBG("collnet rank %u: epoch %u aggregator %zu: lo %" PRIu64 ", from request %" PRIu64
			       ", here lo %" PRIu64 ";%s", cc->rank, fo->epoch, ai, d->lo, from,
			       client_agg_lo(cc->client, ai), hl);
		}
	}
	fo->dead |= set;
	fo->gone &= ~set;
	fo->leaving &= ~set;
	fo->faults += (uint64_t)__builtin_popcountll(set);
	rc = failover_repair_plan(cc, set, &n);
	double ms = (now - fo->t_first_ns) / 1e6;
	for (size_t ai = 0; ai < cc->naggs; ai++)
		if (set >> ai & 1)
			SC_WARN("collnet job 0x%016llx rank %u: aggregator %s failed (%s); epoch %u: from "
				"request %" PRIu64 " on %d aggregator(s) + ring; here %" PRIu64
				" chunk(s) (%zu bytes) are copied from other nodes and %" PRIu64
				" chunk(s) (%zu bytes) redone over the ring; agreed %.1f ms after the first sign; "
				"window chunks: %" PRIu64 " redone from what this node kept after its request "
				"completed, %" PRIu64 " copies passed on for others; tried again in %.1f s",
				(unsigned long long)cc->job_id, cc->rank, cc->aggs[ai], fo->deads[ai].why,
				fo->epoch, from, __builtin_popcountll(fo_live(fo)), n.lacking, n.copy_bytes,
				n.redo_chunks, n.redo_bytes, ms, n.kept, n.passed, fo->outs[ai].hold_ns / 1e9);
	return rc;
}

/* Round 1 (and round 2 when something failed) is in: the next epoch, with
 * `set` failed, `gone` drained and `back` returned from request `from` on;
 * the joins of this run that did not make it are fenced. */
static int decide(struct coll_comm *cc, uint64_t set, uint64_t back, uint64_t drain, uint64_t from)
{
	struct failover *fo = &cc->fo;
	uint64_t now = sc_now_ns();
	int rc = 0;

	failover_return_settle(cc, set, back, now);
	if (!(set | back | drain)) {
		fo->attempt++;
		return 0;
	}
	struct fo_epoch *e = realloc(fo->epochs, (fo->nepochs + 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	fo->epochs = e;
	fo->epoch++;
	fo->attempt = 0;
	e[fo->nepochs] = fo_plan_epoch_next(&e[fo->nepochs - 1], set | drain, back, from);
	fo->nepochs++;
	if (set)
		rc = decide_faults(cc, set, from, now);
	failover_return_apply(cc, back, drain, from, now);
	if (!cc->parent) /* the tuner costs CollNet with the aggregators left */
		coll_adapt_publish(cc, cc->model.naggs);
	return rc;
}

static void agree_progress(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;
	size_t na = cc->naggs;
	int rc;

	if (fo->state == FO_IDLE) {
		if (!(fo->known & ~fo->dead) && !failover_return_wanted(cc))
			return;
		rc = round1_start(cc);
		if (rc)
			failover_fail(cc, rc, "starting the agreement");
		return;
	}
	rc = ring_op_progress(&fo->agree.op);
	if (rc == 0)
		return;
	if (rc < 0) {
		failover_fail(cc, rc, "agreeing over the ring");
		return;
	}
	if (fo->state == FO_ROUND1) {
		fo_plan_round1_read(na, fo->agree.out, &fo->r1);
		coll_agreement_free(&fo->agree);
		if (!fo_plan_round1_agreed(&fo->r1)) {
			/* Not every node had fenced the same set: all fence the
			 * union, and report again. */
			note_known(cc, fo->r1.any, false);
			fo->attempt++;
			rc = round1_start(cc);
		} else if (fo->r1.any) {
			rc = round2_start(cc, fo->r1.any);
		} else {
			/* nothing failed: a return or a drain, no repair */
			uint64_t froms[CLIENT_AGGS_MAX];
			for (size_t ai = 0; ai < na; ai++)
				froms[ai] = fo->outs[ai].from;
			uint64_t back = fo_plan_back(na, &fo->r1, fo->dead | fo->gone, froms);
			rc = decide(cc, 0, back, fo_plan_drain(&fo->r1, fo_live(fo)), fo->r1.next);
			fo->state = FO_IDLE;
			if (rc)
				failover_fail(cc, rc, "taking an aggregator back");
			return;
		}
		if (rc)
			failover_fail(cc, rc, "starting the agreement");
		return;
	}
	/* round 2: decided */
	uint64_t set = fo->fenced;
	uint64_t froms[CLIENT_AGGS_MAX];
	for (size_t ai = 0; ai < na; ai++)
		froms[ai] = fo->outs[ai].from;
	uint64_t back = fo_plan_back(na, &fo->r1, (fo->dead | fo->gone) & ~set, froms);
	rc = decide(cc, set, back, fo_plan_drain(&fo->r1, fo_live(fo)) & ~set, fo->r1.next);
	coll_agreement_free(&fo->agree);
	fo->state = FO_IDLE;
	if (rc)
		failover_fail(cc, rc, "setting up the repairs");
}

/* ---- interface ---- */

int failover_init(struct coll_comm *cc, uint64_t live)
{
	struct failover *fo = &cc->fo;
	size_t rlen;
	int rc;

	fo->epochs = calloc(1, sizeof(*fo->epochs));
	fo->sink_bytes = plugin_cfg.chunk_bytes;
	if (!fo->epochs)
		return -ENOMEM;
	fo->epochs[0].from = 0;
	fo->epochs[0].live = live;
	fo->nepochs = 1;
	/* aggregators not in the connect-time set are simply never used */
	fo->known = fo->dead = cc->naggs >= 64 ? ~live : ((1ull << cc->naggs) - 1) & ~live;
	fo->told = fo->known;
	/* One READY here but not on every node is let go, so that it can come
	 * back like any failed one. */
	for (size_t ai = 0; ai < cc->naggs; ai++)
		if ((fo->dead >> ai & 1) && client_agg_joined(cc->client, ai) >= 0)
			client_agg_fence(cc->client, ai, "not in use: not READY on every node at connect");
	if ((rc = fabric_buf_alloc(cc->f, 15 * sizeof(uint64_t), &fo->nmem)) ||
	    (rc = fabric_buf_alloc(cc->f, fo->sink_bytes, &fo->sink)))
		return rc;
	fo->nbuf = fo->nmem.buf;
	memset(fo->nbuf, 0, 15 * sizeof(uint64_t));
	void *ret = client_retention(cc->client, &rlen);
	if (ret) {
		rc = fabric_mr_reg(cc->f, ret, rlen, &fo->ret_mr);
		if (rc)
			return rc;
		fo->ret_reg = true;
	}
	notice_post_rx(cc);
	return 0;
}

void failover_stop(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	if (fo->state != FO_IDLE)
		ring_op_abort(&fo->agree.op);
	failover_repair_cancel(cc);
	if (fo->nrx_posted)
		fabric_cancel(cc->f, &fo->nrx.fop);
	/* Let cancels and sends complete (bounded); what does not ends when
	 * the endpoint closes, before failover_fini frees the memory. */
	uint64_t until = sc_now_ns() + 200ull * 1000000ull;
	for (;;) {
		bool busy = fo->nrx_posted && fo->nrx.state == RING_X_POSTED;
		for (int i = 0; i < 4; i++)
			busy |= fo->ntx[i].state == RING_X_POSTED;
		busy |= failover_repair_posted(cc);
		if (!busy || sc_now_ns() > until)
			break;
		ring_poll(&cc->ring);
	}
}

void failover_fini(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	failover_repair_free(cc);
	coll_agreement_free(&fo->agree);
	for (size_t ai = 0; ai < CLIENT_AGGS_MAX; ai++) {
		free(fo->deads[ai].holder);
		free(fo->deads[ai].lacker);
	}
	if (fo->ret_reg)
		fabric_mr_dereg(&fo->ret_mr);
	fabric_buf_free(&fo->sink);
	fabric_buf_free(&fo->nmem);
	free(fo->epochs);
}

int failover_progress(struct coll_comm *cc)
{
	if (!cc->client || !cc->failover || cc->fo.err)
		return cc->fo.err;
	client_progress(cc->client);
	ring_poll(&cc->ring);
	return failover_step(cc);
}

int failover_step(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;

	if (!cc->client || !cc->failover || fo->err)
		return fo->err;
	/* a drained aggregator this node has left fails only its next
	 * membership, which is not in use until the nodes agree on it */
	uint64_t mine = client_failed(cc->client) & ~fo->known & ~(fo->gone & ~fo->leaving);
	if (mine)
		note_known(cc, mine, true);
	notice_progress(cc);
	if (!fo->err)
		agree_progress(cc);
	if (!fo->err)
		failover_repair_progress(cc);
	if (!fo->err)
		failover_return_progress(cc);
	if (!fo->err && (fo->state != FO_IDLE || !SLIST_EMPTY(&fo->items) || (fo->known & ~fo->dead)) &&
	    sc_now_ns() > fo->deadline_ns)
		failover_fail(cc, -ETIMEDOUT, fo->state != FO_IDLE ? "a node does not take part in the agreement"
							      : "a node does not take part in the repairs");
	return fo->err;
}

bool failover_busy(const struct coll_comm *cc)
{
	return cc->client && cc->failover && ((cc->fo.known & ~cc->fo.dead) || cc->fo.state != FO_IDLE);
}

uint64_t failover_live_for(const struct coll_comm *cc, uint64_t idx, uint32_t *epoch)
{
	return fo_plan_live_for(cc->fo.epochs, cc->fo.nepochs, idx, epoch);
}

int failover_req_started(struct coll_comm *cc, struct coll_req *r)
{
	struct fo_counts n = { 0 };
	int rc = failover_repair_req(cc, r, &n);

	if (rc)
		failover_fail(cc, rc, "setting up the repair of a request");
	else
		fo_bound(&cc->fo);
	return rc;
}

void failover_req_gone(struct coll_comm *cc, struct coll_req *r)
{
	failover_repair_forget(cc, r);
}

void failover_dump(const struct coll_comm *cc, int level)
{
	const struct failover *fo = &cc->fo;

	SC_LOG_AT(level, "collnet rank %u: failover epoch %u %s, known 0x%llx dead 0x%llx, err %d",
		  cc->rank, fo->epoch,
		  fo->state == FO_ROUND1 ? "round 1" : fo->state == FO_ROUND2 ? "round 2" : "idle",
		  (unsigned long long)fo->known, (unsigned long long)fo->dead, fo->err);
	if (fo->state != FO_IDLE)
		ring_op_dump(&fo->agree.op, level, fo->state == FO_ROUND1 ? "the agreement's round 1"
									: "the agreement's round 2");
	failover_repair_dump(cc, level);
}
