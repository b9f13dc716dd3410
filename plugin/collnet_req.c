/* A request's life from slot to completion: the request slots every call
 * takes one of (collnet_allreduce.c, collnet_window.c), one turn of its
 * ring part, the note of its times into its window of the adaptive split,
 * and its check once the engine has turned the communicator
 * (collnet_engine.c, NCCL's test): its aggregator part with the client,
 * and its completion when both paths and its repairs are done: the trace
 * line (collnet_trace.c), the statistics the close line sums
 * (collnet_close.c), a window's part out of the staging. */
#include "collnet.h"

#include <string.h>

#include "log.h"
#include "tags.h"

struct coll_req *coll_req_slot(struct coll_comm *cc, uint32_t *slot)
{
	for (uint32_t i = 0; i < COLL_REQS; i++)
		if (!cc->reqs[i].used) {
			*slot = i;
			return &cc->reqs[i];
		}
	return NULL;
}

void coll_req_init(struct coll_comm *cc, struct coll_req *r, enum coll_kind kind, size_t count,
		   enum sc_dtype d, enum sc_op o, const void *send, void *recv, struct coll_mr *sm,
		   struct coll_mr *rm)
{
	memset(r, 0, offsetof(struct coll_req, ring));
	r->cc = cc;
	r->used = true;
	r->coll = (uint8_t)kind;
	r->idx = cc->next_idx;
	r->seq = (uint32_t)(cc->next_idx & SC_TAG_RING_SEQ_MASK);
	r->count = count;
	r->es = sc_dtype_size(d);
	r->dtype = (uint8_t)d;
	r->op = (uint8_t)o;
	r->send = send;
	r->recv = recv;
	r->sm = sm;
	r->rm = rm;
}

int coll_req_progress(struct coll_req *r)
{
	int rc;

	if (!r->ring_done) {
		rc = ring_op_progress(&r->ring);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			r->ring_done = true;
			r->t_ring = sc_now_ns();
		}
	}
	return 0;
}

static void req_end(struct coll_comm *cc, struct coll_req *r)
{
	failover_req_gone(cc, r);
	r->used = false;
}

/* An adaptive request's times go into its window (coll_adapt_done) as
 * soon as both of its paths and its repairs are done, whichever call
 * finds it so, not when NCCL's test of it does. The window's agreement
 * waits for every one of its requests on every node, and a request of
 * the next window but one is refused until it is agreed
 * (coll_adapt_split); NCCL's proxy tests nothing of a sub while it
 * retries that sub's refused call (src/transport/coll_net.cc,
 * sendProxyProgress: "continue"), and with more than one group of subs
 * (more than 8 channels) the refused group's own untested requests can
 * be in that window: it waited for a test that waited for it. */
void coll_req_adapt_note(struct coll_comm *cc, struct coll_req *r, uint64_t now)
{
	if (!r->adaptive || r->adapt_noted || !r->ring_done || r->repairs)
		return;
	if (!r->agg_done) {
		if (!r->creq || !client_req_all_in(r->creq, now))
			return;
		if (!r->t_agg)
			r->t_agg = client_req_complete_ns(r->creq);
	}
	r->adapt_noted = true;
	coll_adapt_done(cc, r, now);
}

int coll_req_test(struct coll_req *r, int rc, int *done, int *size)
{
	struct coll_comm *cc = r->cc;

	*done = 0;
	/* every request moved in the turn (coll_comm_poll); this one's error, if any */
	if (!rc)
		rc = coll_req_progress(r);
	if (!rc && !r->agg_done) {
		int d = 0;
		rc = client_req_check(cc->client, r->creq, &d);
		if (rc) {
			r->creq = NULL; /* freed by client_req_check */
			SC_WARN("%s seq %u through the aggregators failed: %s", coll_kind_name((enum coll_kind)r->coll), r->seq,
				client_error(cc->client));
		} else if (d) {
			r->creq = NULL;
			r->agg_done = true;
			if (!r->t_agg)
				r->t_agg = sc_now_ns();
		} else if (!r->t_agg) {
			/* complete, its report held back (client.h, "Holding a
			 * report back"): the split times when the data was in */
			r->t_agg = client_req_complete_ns(r->creq);
		}
	}
	if (rc) {
		if (!r->ring_done)
			ring_op_abort(&r->ring);
		if (r->creq)
			r->agg_done = true; /* left to client_destroy */
		coll_trace_req(cc, r, sc_now_ns(), rc);
		req_end(cc, r);
		cc->failed = true;
		return rc;
	}
	if (!r->agg_done || !r->ring_done || r->repairs) {
		if (!r->stall_logged && sc_now_ns() - r->t0 > (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull)
			coll_stall_dump(cc, r);
		return 0;
	}
	uint64_t t_end = sc_now_ns();
	coll_trace_req(cc, r, t_end, 0);
	if (r->adaptive && !r->adapt_noted) {
		r->adapt_noted = true;
		coll_adapt_done(cc, r, t_end);
	}
	if (size)
		*size = (int)(r->count * r->es);
	if (r->coll != COLL_ALLREDUCE) {
		bool rs = r->coll == COLL_REDUCE_SCATTER;
		if (r->win_len) /* through the aggregators: this node's part */
			memmove(r->win_dst, (const char *)r->recv + r->win_off, r->win_len);
		(*(rs ? &cc->st.rs_ops : &cc->st.ag_ops))++;
		*(rs ? &cc->st.rs_bytes : &cc->st.ag_bytes) += r->count * r->es;
		*(rs ? &cc->st.rs_agg_bytes : &cc->st.ag_agg_bytes) += r->a * r->es;
		*(rs ? &cc->st.rs_ns : &cc->st.ag_ns) += (r->a ? r->t_agg : r->t_ring) - r->t0;
		req_end(cc, r);
		*done = 1;
		return 0;
	}
	cc->st.ops++;
	cc->st.bytes += r->count * r->es;
	cc->st.agg_bytes += r->a * r->es;
	cc->st.ring_bytes += (r->count - r->a) * r->es;
	if (r->a)
		cc->st.agg_ns += r->t_agg - r->t0;
	if (r->count > r->a)
		cc->st.ring_ns += r->t_ring - r->t0;
	req_end(cc, r);
	*done = 1;
	return 0;
}
