/* Requests on a connected p2p comm: NCCL's regMr, isend, irecv (up to
 * PLUGIN_MAX_RECVS grouped receives) and test, the data path of ncclNet
 * (net_comm.c sets the comms up and reads the completions, netc_progress).
 * Data messages carry the receiver's comm id and NCCL's tag (DATA in
 * net_comm.c's tag layout), so messages of one (comm, tag) match in
 * posting order; a request whose subs cannot all be posted yet
 * (-FI_EAGAIN) holds back the comm's later requests until they are, so
 * that order holds. test never blocks. */
#include "net_comm_int.h"

#include <errno.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "prof_events.h"

int netc_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct netc_mr *m;
	int rc;

	(void)comm;
	if (type != NCCL_PTR_HOST) {
		SC_WARN("regMr: pointer type %d is not host memory; this plugin announces NCCL_PTR_HOST only",
			type);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	rc = fabric_mr_reg(netc.f, data, size ? size : 1, &m->mr);
	if (rc) {
		free(m);
		return rc;
	}
	*mhandle = m;
	return 0;
}

int netc_dereg_mr(void *comm, void *mhandle)
{
	struct netc_mr *m = mhandle;

	(void)comm;
	if (m) {
		fabric_mr_dereg(&m->mr);
		free(m);
	}
	return 0;
}

static struct netc_req *req_get(struct netc_comm *c)
{
	for (int i = 0; i < NETC_REQS; i++)
		if (!c->reqs[i].used) {
			struct netc_req *r = &c->reqs[i];
			memset(r, 0, offsetof(struct netc_req, ops));
			r->comm = c;
			r->used = 1;
			return r;
		}
	return NULL;
}

static void req_put(struct netc_req *r)
{
	r->used = 0;
}

/* Posts what is left of r. 0 when all is posted, -FI_EAGAIN to retry. */
static int req_post(struct netc_req *r)
{
	struct netc_comm *c = r->comm;

	while (r->nposted < r->n) {
		int i = r->nposted, rc;
		struct netc_op *op = &r->ops[i];
		op->req = r;
		op->err = 0;
		op->len = 0;
		__atomic_fetch_add(&r->pending, 1, __ATOMIC_RELAXED);
		if (r->send)
			rc = netc_op_send(op, r->data[i], r->size[i], r->desc[i], c->peer,
				     sc_tag_net(SC_TAG_NET_DATA, c->peer_id, r->tag[i]));
		else
			rc = netc_op_recv(op, r->data[i], r->size[i], r->desc[i],
				     sc_tag_net(SC_TAG_NET_DATA, c->id, r->tag[i]));
		if (rc) {
			__atomic_fetch_sub(&r->pending, 1, __ATOMIC_RELAXED);
			return rc;
		}
		r->nposted++;
	}
	return 0;
}

static int req_retry(struct defer *d)
{
	return req_post(container_of(d, struct netc_req, defer));
}

/* A comm whose earlier request still has unposted subs accepts nothing new
 * (that would reorder messages of one tag). */
static bool comm_unblock(struct netc_comm *c)
{
	if (defer_empty(&c->deferred))
		return true;
	netc_progress();
	return !defer_run(&c->deferred, DEFER_IN_ORDER);
}

/* Profiler events (plugin/prof_events.h): one per message, from the
 * call that accepts the request to the test that finds it done (or the
 * close of its comm), parented under the proxy step NCCL names in
 * ph[i]. NCCL's callback dereferences the parent of a start, so a
 * message without one (ph NULL, or ph[i] NULL) gets no event. */
static void req_prof_start(struct netc_req *r, ncclProfilerCallback_t cb, void *const *ph)
{
	for (int i = 0; i < r->n; i++) {
		if (!ph[i])
			continue;
		sc_prof_descr_v1_t d = {
			.kind = r->send ? SC_PROF_SEND : SC_PROF_RECV,
			.sub = (uint8_t)i,
			.nsubs = (uint8_t)r->n,
			.deferred = r->nposted < r->n,
			.comm = r->comm->id,
			.tag = r->tag[i],
			.bytes = r->size[i],
		};
		r->prof_eh[i] = NULL; /* stays NULL when the profiler takes no net events */
		cb(&r->prof_eh[i], SC_PROF_CB_START, ph[i], SC_PROF_PLUGIN_ID, &d);
		if (r->prof_eh[i])
			r->prof = true;
	}
}

/* done: the request completed (its result goes with the stop); else its
 * comm is closing under it (a plain stop). */
static void req_prof_stop(struct netc_req *r, bool done)
{
	ncclProfilerCallback_t cb = plugin_prof();

	for (int i = 0; i < r->n && cb; i++) {
		if (!r->prof_eh[i])
			continue;
		if (done) {
			sc_prof_done_v1_t d = {
				.kind = r->send ? SC_PROF_SEND : SC_PROF_RECV,
				.status = r->ops[i].err,
				.bytes = r->send ? r->size[i] : r->ops[i].len,
			};
			cb(&r->prof_eh[i], SC_PROF_CB_UPDATE_STOP, NULL, 0, &d);
		} else {
			cb(&r->prof_eh[i], SC_PROF_CB_STOP, NULL, 0, NULL);
		}
		r->prof_eh[i] = NULL;
	}
	r->prof = false;
}

void netc_prof_close(struct netc_comm *c)
{
	for (int i = 0; i < NETC_REQS; i++)
		if (c->reqs[i].used && c->reqs[i].prof)
			req_prof_stop(&c->reqs[i], false);
}

int netc_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
	       void **request)
{
	struct netc_comm *c = send_comm;
	struct netc_req *r;
	int rc;

	*request = NULL;
	if (!comm_unblock(c) || !(r = req_get(c)))
		return 0;
	r->send = true;
	r->n = 1;
	r->data[0] = data;
	r->size[0] = size;
	r->desc[0] = mhandle ? ((struct netc_mr *)mhandle)->mr.desc : NULL;
	r->tag[0] = (uint32_t)tag;
	rc = req_post(r);
	if (rc == -FI_EAGAIN) {
		netc_progress();
		req_put(r);
		return 0;
	}
	if (rc) {
		SC_WARN("isend of %zu bytes: %s", size, fi_strerror(-rc));
		req_put(r);
		return rc;
	}
	ncclProfilerCallback_t cb = plugin_prof();
	if (__builtin_expect(cb != NULL, 0) && phandle)
		req_prof_start(r, cb, &phandle);
	*request = r;
	return 0;
}

int netc_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
	       void **mhandles, void **phandles, void **request)
{
	struct netc_comm *c = recv_comm;
	struct netc_req *r;
	int rc;

	*request = NULL; /* also clears NCCL_NET_OPTIONAL_RECV_COMPLETION */
	if (n < 1 || n > PLUGIN_MAX_RECVS) {
		SC_WARN("irecv: %d grouped receives, this plugin announced at most %d", n,
			(int)plugin_cfg.max_recvs);
		return -EINVAL;
	}
	if (!comm_unblock(c) || !(r = req_get(c)))
		return 0;
	r->send = false;
	r->n = n;
	for (int i = 0; i < n; i++) {
		r->data[i] = data[i];
		r->size[i] = sizes[i];
		r->desc[i] = mhandles && mhandles[i] ? ((struct netc_mr *)mhandles[i])->mr.desc : NULL;
		r->tag[i] = (uint32_t)tags[i];
	}
	rc = req_post(r);
	if (rc == -FI_EAGAIN) {
		if (r->nposted == 0) {
			req_put(r);
			netc_progress();
			return 0;
		}
		defer_add(&c->deferred, &r->defer, req_retry); /* the rest by later calls */
	} else if (rc) {
		SC_WARN("irecv: %s", fi_strerror(-rc));
		if (r->nposted == 0) {
			req_put(r);
			return rc;
		}
		defer_add(&c->deferred, &r->defer, req_retry);
	}
	ncclProfilerCallback_t cb = plugin_prof();
	if (__builtin_expect(cb != NULL, 0) && phandles)
		req_prof_start(r, cb, phandles);
	*request = r;
	return 0;
}

int netc_test(void *request, int *done, int *sizes)
{
	struct netc_req *r = request;
	struct netc_comm *c = r->comm;
	int err = 0;

	*done = 0;
	netc_progress();
	if (r->nposted < r->n) {
		if (defer_queued(&r->defer))
			defer_run(&c->deferred, DEFER_IN_ORDER);
		return 0;
	}
	if (__atomic_load_n(&r->pending, __ATOMIC_ACQUIRE) != 0)
		return 0;
	for (int i = 0; i < r->n; i++) {
		if (!netc_op_done(&r->ops[i]))
			return 0;
		if (r->ops[i].err && !err) {
			err = r->ops[i].err;
			SC_WARN("%s of %zu bytes (tag %u) failed: %s%s", r->send ? "send" : "receive",
				r->size[i], r->tag[i], fi_strerror(-err),
				err == -FI_ETRUNC ? " (message larger than the receive buffer)" : "");
		}
		if (sizes)
			sizes[i] = (int)(r->send ? r->size[i] : r->ops[i].len);
	}
	*done = 1;
	if (r->prof)
		req_prof_stop(r, true);
	req_put(r);
	return err;
}
