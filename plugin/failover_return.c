/* Failover's other half: aggregators that come back into the running
 * communicator, and drained ones that the nodes move off and leave
 * (docs/plugin.md, failure model: "Coming back"). failover.c runs the
 * notices and the agreement rounds and calls in here: whether this node
 * wants an agreement with nothing failed (failover_return_wanted), what an
 * agreed round means for the joins and the drained (failover_return_settle,
 * failover_return_apply), and between agreements the joins and leaves
 * themselves (failover_return_progress). The decisions are
 * failover_plan.c's fo_plan_back and fo_plan_drain. */
#include "collnet.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* How long a join of ours may hold up an agreement another node asked for. */
#define FO_JOIN_GRACE_NS 50000000ull

void fo_out_hold(struct fo_out *o, uint64_t now, bool flapped)
{
	uint64_t base = fo_ms_ns(plugin_cfg.readmit_ms), cap = fo_ms_ns(plugin_cfg.readmit_max_ms);

	if (cap < base)
		cap = base;
	if (!flapped || !o->hold_ns)
		o->hold_ns = base;
	else
		o->hold_ns = 2 * o->hold_ns < cap ? 2 * o->hold_ns : cap;
	o->next_ns = now + o->hold_ns;
}

/* Whether this node takes part in an agreement now, nothing having failed:
 * it has a join READY or a DRAIN to tell, or another node asks for one.
 * Joins that failed here are dropped (the daemon sends READY to none until
 * all have joined: nobody else needs to hear of it). */
bool failover_return_wanted(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;
	size_t na = cc->naggs;
	uint64_t ready = 0, pending = 0;

	for (size_t ai = 0; ai < na; ai++) {
		if (!(fo->back >> ai & 1))
			continue;
		int j = client_agg_joined(cc->client, ai);
		if (j == 1)
			ready |= 1ull << ai;
		else if (j == 0)
			pending |= 1ull << ai;
	}
	uint64_t drain = client_draining(cc->client) & fo_live(fo);
	for (size_t ai = 0; ai < na; ai++)
		if ((fo->back & ~ready & ~pending) >> ai & 1) {
			fo->back &= ~(1ull << ai);
			fo->outs[ai].next_ns = sc_now_ns() + fo_ms_ns(plugin_cfg.readmit_ms);
			SC_DBG("collnet rank %u: joining aggregator %zu again failed: %s", cc->rank, ai,
			       client_agg_why(cc->client, ai));
		}
	if (ready || drain)
		fo->want = fo->want > fo_run(fo) + 1 ? fo->want : fo_run(fo) + 1;
	if (fo->want <= fo_run(fo)) {
		fo->want_ns = 0;
		return false; /* nothing to agree on */
	}
	if (pending) {
		/* A join of ours under way while an agreement is asked
		 * for: its READY may be on its way (the daemon sends
		 * it to every rank at once), so wait a little; but a
		 * node already in the agreement joins nothing, so do
		 * not wait for the join's own timeout: let it go. */
		uint64_t now = sc_now_ns();
		if (!fo->want_ns)
			fo->want_ns = now;
		if (now - fo->want_ns < FO_JOIN_GRACE_NS)
			return false;
		for (size_t ai = 0; ai < na; ai++)
			if (pending >> ai & 1)
				client_agg_fence(cc->client, ai, "an agreement came first: joined again later");
	}
	fo->want_ns = 0;
	return true;
}

/* Round 1 is agreed (with `set` failed, `back` taken back): the drained
 * aggregators every node has left are closed (nothing of their old
 * membership can be needed: try them again at once, they may be back
 * already); a join of this run that is not taken back is fenced on every
 * node, tried again after a wait that grows (it is reachable from some
 * nodes only, or flaps). */
void failover_return_settle(struct coll_comm *cc, uint64_t set, uint64_t back, uint64_t now)
{
	struct failover *fo = &cc->fo;
	uint64_t missed = fo->r1.tried & ~back;
	uint64_t closing = fo->r1.left & fo->gone & ~set & ~fo->closed;

	for (size_t ai = 0; ai < cc->naggs; ai++)
		if (closing >> ai & 1)
			fo->outs[ai].next_ns = now;
	fo->closed |= closing;
	for (size_t ai = 0; ai < cc->naggs; ai++) {
		if (!(missed >> ai & 1))
			continue;
		if ((fo->back >> ai & 1) && client_agg_joined(cc->client, ai) >= 0)
			client_agg_fence(cc->client, ai, "not taken back: not READY again on every node");
		const char *why = !(fo->r1.joined >> ai & 1) ? "not READY again on every node"
				  : fo->r1.any >> ai & 1 ? "it failed again"
							 : "a node has yet to issue requests of its old membership";
		fo_out_hold(&fo->outs[ai], now, true);
		SC_INFO("collnet job 0x%016llx rank %u: aggregator %s not taken back (%s); tried again in "
			"%.1f s", (unsigned long long)cc->job_id, cc->rank, cc->aggs[ai], why,
			fo->outs[ai].hold_ns / 1e9);
	}
	fo->back = 0;
}

/* The decision is in: `back` returned and `drain` moved off from request
 * `from` on (the new epoch is made): their state, counts and INFO lines. */
void failover_return_apply(struct coll_comm *cc, uint64_t back, uint64_t drain, uint64_t from, uint64_t now)
{
	struct failover *fo = &cc->fo;

	for (size_t ai = 0; ai < cc->naggs; ai++) {
		struct fo_out *o = &fo->outs[ai];
		if (back >> ai & 1) {
			struct fo_dead *d = &fo->deads[ai];
			double out_s = o->next_ns > o->hold_ns ? (now - (o->next_ns - o->hold_ns)) / 1e9 : 0;
			free(d->holder);
			free(d->lacker);
			memset(d, 0, sizeof(*d));
			o->back_ns = now;
			o->back_epoch = fo->epoch;
			fo->readmits++;
			SC_INFO("collnet job 0x%016llx rank %u: aggregator %s is back (READY again on every "
				"node, out %.1f s); epoch %u: from request %" PRIu64 " on %d aggregator(s) + ring",
				(unsigned long long)cc->job_id, cc->rank, cc->aggs[ai], out_s, fo->epoch, from,
				__builtin_popcountll(fo_live(fo)));
		}
		if (drain >> ai & 1) {
			o->from = from;
			o->next_ns = now + fo_ms_ns(plugin_cfg.readmit_ms);
			o->hold_ns = fo_ms_ns(plugin_cfg.readmit_ms);
			fo->drains++;
			SC_INFO("collnet job 0x%016llx rank %u: aggregator %s drains (it asked the nodes to "
				"move off); epoch %u: from request %" PRIu64 " on %d aggregator(s) + ring, nothing "
				"copied or redone", (unsigned long long)cc->job_id, cc->rank, cc->aggs[ai],
				fo->epoch, from, __builtin_popcountll(fo_live(fo)));
		}
	}
	fo->known &= ~back;
	fo->dead &= ~back;
	fo->told &= ~back;
	fo->gone = (fo->gone & ~back) | drain;
	fo->closed &= ~(back | drain);
	fo->leaving |= drain;
}

/* Joins an aggregator out of use again once its wait is over and nothing
 * of its old membership is needed here any more; leaves a drained one once
 * this node's requests below its switch point are done. */
void failover_return_progress(struct coll_comm *cc)
{
	struct failover *fo = &cc->fo;
	uint64_t now = sc_now_ns();

	for (size_t ai = 0; ai < cc->naggs; ai++) {
		uint64_t bit = 1ull << ai;
		struct fo_out *o = &fo->outs[ai];
		if ((fo->leaving & bit) && cc->next_idx >= o->from && client_agg_retire(cc->client, ai) == 0) {
			fo->leaving &= ~bit;
			o->next_ns = now + 20000000ull; /* the others leave about now too */
		}
		/* Left here: once every node has (an agreement says so) its old
		 * membership is over, and nothing of it can be needed again; ask
		 * again every quarter of SUMCAST_READMIT until then. */
		if ((fo->gone & ~fo->leaving & ~fo->closed & bit) && now >= o->next_ns) {
			fo->want = fo->want > fo_run(fo) + 1 ? fo->want : fo_run(fo) + 1;
			o->next_ns = now + fo_ms_ns(plugin_cfg.readmit_ms) / 4;
		}
		if (!plugin_cfg.readmit_ms || fo->state != FO_IDLE || !SLIST_EMPTY(&fo->items) ||
		    (fo->known & ~fo->dead) || !((fo->dead | (fo->gone & fo->closed)) & ~fo->back & bit) ||
		    now < o->next_ns || cc->next_idx < o->from)
			continue;
		int64_t t = 2 * plugin_cfg.agg_deadline_ms;
		int rc = client_agg_rejoin(cc->client, ai, (uint32_t)(t > 2000 ? t : 2000));
		if (rc == 0) {
			fo->back |= bit;
			SC_DBG("collnet rank %u: joining aggregator %s again", cc->rank, cc->aggs[ai]);
		} else if (rc != -EBUSY) {
			o->next_ns = now + fo_ms_ns(plugin_cfg.readmit_ms);
			SC_DBG("collnet rank %u: cannot join aggregator %s again: %s", cc->rank, cc->aggs[ai],
			       strerror(-rc));
		}
	}
}
