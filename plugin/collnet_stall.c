/* Stall diagnostics, at the completion step (collnet_req.c's test): a
 * request NCCL has waited on for longer than SUMCAST_AGG_TIMEOUT (every
 * fault is absorbed or an error by then) logs once, as WARN lines, what
 * this node waits for: every request in flight with its aggregator chunks
 * (held here or not) and ring columns (each active column's step, the
 * peer and tag of the message it waits for: ring_op_dump), the adaptive
 * split's agreement, the aggregators' busy slots (client.h) and failover's
 * agreement and repairs (failover.c). */
#include "collnet.h"

#include <inttypes.h>
#include <stdio.h>

#include "log.h"

/* What this node waits for, as WARN lines: every request in flight, the
 * adaptive split's agreement, the aggregators, failover. */
static void coll_state_dump(struct coll_comm *cc)
{
	for (int i = 0; i < COLL_REQS; i++) {
		const struct coll_req *q = &cc->reqs[i];
		if (!q->used)
			continue;
		SC_WARN("  request %" PRIu64 " kind %u aggs 0x%llx epoch %u: aggregators %s (%zu chunks left), "
			"ring %s (columns %zu/%zu, next %zu), repairs %u", q->idx, q->coll,
			(unsigned long long)q->aggs, q->epoch, q->agg_done ? "done" : "waiting",
			q->creq ? client_req_left(q->creq) : 0, q->ring_done ? "done" : "waiting",
			q->ring.cols_done, q->ring.ncols, q->ring.next_col, q->repairs);
		for (size_t ai = 0; q->creq && ai < cc->naggs; ai++) {
			uint64_t c0, n;
			char held[80];
			size_t k = 0;
			client_req_chunks(q->creq, ai, &c0, &n);
			if (!n)
				continue;
			for (; k < n && k + 1 < sizeof(held); k++)
				held[k] = client_chunk_held(cc->client, ai, c0 + k) ? 'h' : '-';
			held[k] = 0;
			SC_WARN("    aggregator %zu: chunks %" PRIu64 "+%" PRIu64 " held here: %s", ai, c0, n, held);
		}
		if (!q->ring_done)
			ring_op_dump(&q->ring, SC_LOG_WARN, "its ring part");
	}
	if (cc->adapt.running) {
		char what[96];
		snprintf(what, sizeof(what), "the adaptive split's agreement on window %" PRIu64, cc->adapt.agreed);
		ring_op_dump(&cc->adapt.ag.op, SC_LOG_WARN, what);
	}
	for (size_t ai = 0; cc->client && ai < cc->naggs; ai++)
		client_agg_dump(cc->client, ai, SC_LOG_WARN);
	failover_dump(cc, SC_LOG_WARN);
}

/* A request NCCL has waited on for longer than SUMCAST_AGG_TIMEOUT (every
 * fault is absorbed or an error by then): say so once, with what this
 * node is waiting for, so that a hang can be told apart and diagnosed. */
void coll_stall_dump(struct coll_comm *cc, struct coll_req *r)
{
	r->stall_logged = true;
	SC_WARN("collnet job 0x%016llx rank %u: request %" PRIu64 " has waited %.1f s (SUMCAST_AGG_TIMEOUT "
		"is %u ms); what this node waits for:", (unsigned long long)cc->job_id, cc->rank, r->idx,
		(sc_now_ns() - r->t0) / 1e9, (unsigned)plugin_cfg.agg_timeout_ms);
	coll_state_dump(cc);
}

int coll_refused(struct coll_comm *cc, const char *why)
{
	uint64_t now = sc_now_ns();

	if (!cc->refused_ns) {
		cc->refused_ns = now;
		return 0;
	}
	if (cc->refused_logged || now - cc->refused_ns <= (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull)
		return 0;
	cc->refused_logged = true;
	SC_WARN("collnet job 0x%016llx rank %u: no new request taken for %.1f s (SUMCAST_AGG_TIMEOUT is %u "
		"ms): %s; request %" PRIu64 " would be next; what this node waits for:",
		(unsigned long long)cc->job_id, cc->rank, (now - cc->refused_ns) / 1e9,
		(unsigned)plugin_cfg.agg_timeout_ms, why, cc->next_idx);
	coll_state_dump(cc);
	return 0;
}

void coll_accepted(struct coll_comm *cc)
{
	if (cc->refused_logged)
		SC_WARN("collnet job 0x%016llx rank %u: requests taken again after %.1f s", (unsigned long long)cc->job_id,
			cc->rank, (sc_now_ns() - cc->refused_ns) / 1e9);
	cc->refused_ns = 0;
	cc->refused_logged = false;
}
