/* The trace (SUMCAST_TRACE=<prefix>): <prefix>.<job id>.<rank>.jsonl, one
 * JSON line per request as it completes or fails (docs/plugin.md, "Trace"),
 * written at the end of the flow: opened by connect (collnet_connect.c),
 * a line from test (collnet_req.c), closed by closeColl
 * (collnet_close.c). A file that cannot be opened costs a WARN, not the
 * job. */
#include "collnet.h"

#include <errno.h>
#include <string.h>

#include "log.h"

void coll_trace_open(struct coll_comm *cc)
{
	char path[CFG_STR_MAX + 64];

	if (!plugin_cfg.trace[0])
		return;
	snprintf(path, sizeof(path), "%s.%016llx.%u.jsonl", plugin_cfg.trace,
		 (unsigned long long)cc->job_id, cc->rank);
	cc->trace = fopen(path, "we");
	if (!cc->trace)
		SC_WARN("SUMCAST_TRACE: cannot open %s: %s; no trace for job 0x%016llx", path,
			strerror(errno), (unsigned long long)cc->job_id);
	else
		SC_INFO("collnet job 0x%016llx: tracing every allreduce to %s",
			(unsigned long long)cc->job_id, path);
}

static const char *const coll_names[] = { "allreduce", "reducescatter", "allgather", "tree" };

const char *coll_kind_name(enum coll_kind k)
{
	return coll_names[k];
}

void coll_trace_req(struct coll_comm *cc, const struct coll_req *r, uint64_t t_end, int rc)
{
	char agg[32] = "null", ring[32] = "null";

	if (!cc->trace)
		return;
	if (r->a && r->agg_done && r->t_agg)
		snprintf(agg, sizeof(agg), "%.1f", (r->t_agg - r->t0) / 1e3);
	if (r->count > r->a && r->ring_done)
		snprintf(ring, sizeof(ring), "%.1f", (r->t_ring - r->t0) / 1e3);
	fprintf(cc->trace,
		"{\"job\":\"0x%016llx\",\"rank\":%u,\"nranks\":%u,\"seq\":%u,\"type\":\"%s\","
		"\"op\":\"%s\",\"count\":%zu,\"bytes\":%zu,\"agg_bytes\":%zu,\"start_ns\":%llu,"
		"\"time_us\":%.1f,\"agg_us\":%s,\"ring_us\":%s,\"epoch\":%u,\"redone_bytes\":%llu,"
		"\"agg_sent\":%zu,\"agg_got\":%zu,\"coll\":\"%s\",\"split\":%.4f,\"adaptive\":%s,"
		"\"status\":\"%s\"}\n",
		(unsigned long long)cc->job_id, cc->rank, cc->nranks, r->seq,
		sc_dtype_name((enum sc_dtype)r->dtype),
		r->coll == COLL_ALLGATHER ? "none" : sc_op_name((enum sc_op)r->op), r->count,
		r->count * r->es, r->a * r->es, (unsigned long long)r->t0, (t_end - r->t0) / 1e3, agg,
		ring, r->epoch, (unsigned long long)r->redone_bytes, r->agg_give, r->agg_take,
		coll_kind_name((enum coll_kind)r->coll), r->coll == COLL_ALLREDUCE ? r->frac : r->a ? 1.0 : 0.0,
		r->adaptive ? "true" : "false", rc ? "error" : "ok");
}

void coll_trace_close(struct coll_comm *cc)
{
	if (cc->trace && fclose(cc->trace))
		SC_WARN("SUMCAST_TRACE: closing the trace of job 0x%016llx: %s",
			(unsigned long long)cc->job_id, strerror(errno));
	cc->trace = NULL;
}
