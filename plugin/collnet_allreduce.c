/* iallreduce, NCCL's allreduce call: the split, then both paths at once.
 * [0, a) goes to the aggregators of the request's epoch (the client
 * library, client_allreduce_on), [a, count) to the ring (ring.c); a comes
 * from rank 0's model (split.c) or the adaptive split (collnet_adapt.c), so every
 * node cuts alike. A request whose aggregator set holds one that already
 * failed is repaired at once (failover.c). Completion: collnet_req.c.
 * Returns a NULL request (NCCL retries) when every request slot is in
 * flight, the client has no request free, or the nodes are agreeing on an
 * aggregator fault. */
#include "collnet.h"

#include <errno.h>
#include <string.h>

#include "log.h"

int collnet_reduce_support(ncclDataType_t t, ncclRedOp_t op, int *supported)
{
	enum sc_dtype d;
	enum sc_op o;

	*supported = plugin_dtype(t, &d) == 0 && plugin_op(op, &o) == 0;
	return 0;
}

int collnet_iallreduce(void *coll_comm, void *send, void *recv, size_t count, ncclDataType_t t,
		     ncclRedOp_t op, void *send_mh, void *recv_mh, void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_mr *sm = send_mh, *rm = recv_mh;
	struct coll_req *r;
	enum sc_dtype d;
	enum sc_op o;
	uint32_t slot;
	int rc;

	*request = NULL;
	if (plugin_dtype(t, &d) || plugin_op(op, &o)) {
		SC_WARN("iallreduce: type %d / op %d was announced unsupported by reduceSupport", t, op);
		return -EINVAL;
	}
	if (cc->tree)
		return coll_tree_iallreduce(cc, send, recv, count, t, op, sm, rm, request);
	rc = failover_progress(cc);
	if (!rc)
		rc = coll_adapt_step(cc);
	if (rc)
		return rc;
	if (failover_busy(cc)) /* NCCL retries */
		return coll_refuse(cc, "the nodes are agreeing on an aggregator fault");
	r = coll_req_slot(cc, &slot);
	if (!r)
		return coll_refuse(cc, "every request slot is in flight");
	size_t es = sc_dtype_size(d);
	uint32_t epoch = 0;
	uint64_t aggs = cc->client ? failover_live_for(cc, cc->next_idx, &epoch) : 0;
	struct split_model m = cc->model;
	m.naggs = (uint32_t)__builtin_popcountll(aggs);
	int32_t tppm = -1;
	int adaptive = aggs ? coll_adapt_split(cc, count * es, &tppm) : 0;
	if (adaptive == -EAGAIN)
		return coll_refuse(cc, "the split of its window of the adaptive split is not agreed yet");
	double frac = !aggs ? 0 : adaptive ? tppm / (double)SPLIT_PPM : split_fraction(&m, count * es);
	size_t a = split_count(frac, count, es);
	struct client_req *creq = NULL;
	if (a) {
		rc = client_allreduce_on(cc->client, send, recv, a, d, o, sm && sm->has_agg ? sm->agg.desc : NULL,
					 rm && rm->has_agg ? rm->agg.desc : NULL, aggs, &creq);
		if (rc == -EAGAIN)
			return coll_refuse(cc, "the client library has no request free");
		if (rc) {
			SC_WARN("iallreduce of %zu x %s through the aggregators: %s (%s)", a,
				sc_dtype_name(d), strerror(-rc), client_error(cc->client));
			return rc;
		}
	}
	coll_req_init(cc, r, COLL_ALLREDUCE, count, d, o, send, recv, sm, rm);
	r->a = a;
	r->creq = creq;
	if (creq)
		client_req_bytes(creq, &r->agg_give, &r->agg_take);
	r->aggs = a ? aggs : 0;
	r->epoch = epoch;
	r->agg_done = a == 0;
	r->frac = frac;
	r->adapt_ppm = tppm;
	if (adaptive)
		coll_adapt_issued(cc, r);
	r->t0 = sc_now_ns();
	ring_op_start(&cc->ring, &r->ring, r->seq, (const char *)send + a * es, (char *)recv + a * es,
		      count - a, d, o, sm ? sm->ring.desc : NULL, rm ? rm->ring.desc : NULL, slot);
	cc->next_idx++;
	if (r->aggs & cc->fo.dead) {
		rc = failover_req_started(cc, r);
		if (rc)
			return rc;
	}
	coll_accepted(cc);
	*request = r;
	return 0;
}
