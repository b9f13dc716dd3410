/* closeColl, the end of a communicator: a barrier every node leaves from
 * together (failover may still need a node whose requests are all done),
 * the summary lines (the statistics test gathered, collnet_req.c), then the
 * teardown in the order the fabric needs: registrations before their
 * domains, memory after the endpoints. */
#include "collnet.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

/* A node whose requests are all done may still be needed by another: to
 * take part in the agreement on a fault only that node saw, or to send it
 * a result it lacks (from retention). So with failover and aggregators the
 * nodes leave together: a ring barrier during which each node goes on
 * serving notices, agreements and copies, bounded by SUMCAST_AGG_TIMEOUT
 * (a node that died: the others have failed their requests by then). Not
 * for a broken communicator or one closed with requests in flight. */
static void close_barrier(struct coll_comm *cc)
{
	if (!cc->client || !(cc->failover || cc->adaptive) || cc->nranks < 2 || cc->fo.err ||
	    cc->failed)
		return;
	for (int i = 0; i < COLL_REQS; i++)
		if (cc->reqs[i].used)
			return;
	int64_t v = 0;
	uint64_t t0 = sc_now_ns();
	int rc = coll_agree(cc, &v, 1, COLL_AGREE_CLOSE,
			    t0 + (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull, true);
	if (rc)
		SC_WARN("collnet job 0x%016llx rank %u: closing: not every node reached close within "
			"SUMCAST_AGG_TIMEOUT (%u ms): %s", (unsigned long long)cc->job_id, cc->rank,
			(unsigned)plugin_cfg.agg_timeout_ms, strerror(-rc));
	else if (sc_now_ns() - t0 > 100000000ull)
		SC_INFO("collnet job 0x%016llx rank %u: closing: waited %.1f ms for the other nodes",
			(unsigned long long)cc->job_id, cc->rank, (sc_now_ns() - t0) / 1e6);
}

int collnet_close(void *coll_comm)
{
	struct coll_comm *cc = coll_comm;
	struct coll_stats *s;

	if (!cc)
		return 0;
	coll_tree_close(cc); /* a tree's inner communicators first (collnet_tree.c) */
	coll_adapt_fini(cc, sc_now_ns() + (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull);
	close_barrier(cc);
	s = &cc->st;
	for (int i = 0; i < COLL_REQS; i++)
		if (cc->reqs[i].used && !cc->reqs[i].ring_done)
			ring_op_abort(&cc->reqs[i].ring);
	uint64_t ret_n = 0, ret_b = 0;
	if (cc->client)
		client_retained(cc->client, &ret_n, &ret_b);
	SC_INFO("collnet job 0x%016llx rank %u/%u closed: %llu allreduces, %.3f GB, split %.3f "
		"(aggregators %.3f GB at %.2f GB/s, ring %.3f GB at %.2f GB/s); aggregator faults %llu "
		"(epoch %u): %.3f GB copied from other nodes, %.3f GB redone over the ring; aggregators "
		"back %llu, drained %llu; retention copies %llu (%.3f GB)",
		(unsigned long long)cc->job_id, cc->rank, cc->nranks, (unsigned long long)s->ops,
		s->bytes / 1e9, s->bytes ? (double)s->agg_bytes / s->bytes : 0.0, s->agg_bytes / 1e9,
		s->agg_ns ? s->agg_bytes / (double)s->agg_ns : 0.0, s->ring_bytes / 1e9,
		s->ring_ns ? s->ring_bytes / (double)s->ring_ns : 0.0,
		(unsigned long long)cc->fo.faults, cc->fo.epoch, cc->fo.copied_bytes / 1e9,
		cc->fo.redone_bytes / 1e9, (unsigned long long)cc->fo.readmits,
		(unsigned long long)cc->fo.drains, (unsigned long long)ret_n, ret_b / 1e9);
	if (s->rs_ops || s->ag_ops)
		SC_INFO("collnet job 0x%016llx rank %u/%u: %llu reduce-scatters (%.3f GB of windows at "
			"%.2f GB/s, %.3f GB through the aggregators), %llu allgathers (%.3f GB at %.2f GB/s, "
			"%.3f GB through the aggregators)",
			(unsigned long long)cc->job_id, cc->rank, cc->nranks,
			(unsigned long long)s->rs_ops, s->rs_bytes / 1e9,
			s->rs_ns ? s->rs_bytes / (double)s->rs_ns : 0.0, s->rs_agg_bytes / 1e9,
			(unsigned long long)s->ag_ops, s->ag_bytes / 1e9,
			s->ag_ns ? s->ag_bytes / (double)s->ag_ns : 0.0, s->ag_agg_bytes / 1e9);
	coll_trace_close(cc);
	failover_stop(cc);
	for (size_t ai = 0; cc->client && ai < client_naggs(cc->client); ai++) {
		struct client_mc_info mi;
		if (client_mc_info(cc->client, ai, &mi) || !mi.offered)
			continue;
		SC_INFO("aggregator %zu multicast: %s; %llu results from the group, %llu by unicast, "
			"%llu NACKs; datagrams dropped: %llu foreign, %llu stale, %llu malformed, %llu duplicate",
			ai, mi.in_group ? "in its group" : mi.why[0] ? mi.why : "out of its group (fenced or closed)",
			(unsigned long long)mi.by_group,
			(unsigned long long)mi.by_unicast, (unsigned long long)mi.nacks,
			(unsigned long long)mi.foreign, (unsigned long long)mi.stale,
			(unsigned long long)mi.malformed, (unsigned long long)mi.dups);
	}
	/* RDMA's order: the endpoints first (what requests abandoned after an
	 * error still have posted ends there), then the registrations, then
	 * the domains */
	if (cc->client)
		client_quiesce(cc->client);
	fabric_close_ep(cc->f);
	failover_fini(cc);
	for (int i = 0; i < COLL_REQS; i++)
		coll_wstage_dereg(&cc->wstage[i]);
	ring_fini(&cc->ring);
	if (cc->client)
		client_destroy(cc->client);
	fabric_close(cc->f);
	/* requests abandoned after an error may have had operations on these
	 * until the endpoints closed */
	ring_free(&cc->ring);
	for (int i = 0; i < COLL_REQS; i++)
		coll_wstage_free(&cc->wstage[i]);
	coll_agreement_free(&cc->adapt.ag);
	free(cc);
	return 0;
}
