/* The collnet engine's one loop and the waits built on it. Everything that
 * moves a communicator runs from here, in this order: the ring's
 * completion queue, the aggregators' (client_progress), failover (notices,
 * agreements, repairs), every request's ring part, the adaptive split; a
 * tree's inner communicator also serves its siblings while it blocks. The
 * steps below (collnet_req.c, failover*.c, collnet_adapt.c,
 * collnet_agree.c, ring.c, the client) each do one turn of their own work
 * and return; none calls back up into this file. Its callers are the
 * entry points: NCCL's test (collnet_test, collnet_req.c), a refused call
 * (collnet_allreduce.c, collnet_window.c), connect's and close's blocking
 * agreements (collnet_connect.c, collnet_close.c, collnet_tree.c). */
#include "collnet.h"

#include <inttypes.h>
#include <time.h>

#include "log.h"

/* NCCL's test: a turn of the request's communicator, then its check (a
 * tree's: a turn of each stage's inner communicator, collnet_tree.c). */
int collnet_test(void *request, int *done, int *size)
{
	struct coll_req *r = request;

	if (r->coll == COLL_TREE)
		return coll_tree_test(r, done, size);
	return coll_req_test(r, coll_comm_poll(r->cc), done, size);
}

int coll_refuse(struct coll_comm *cc, const char *why)
{
	int rc = coll_comm_poll(cc);

	return rc ? rc : coll_refused(cc, why);
}

int coll_comm_poll(struct coll_comm *cc)
{
	int rc;

	/* each completion queue read once per call (a poll() each on tcp), the
	 * ring's only when something but the standing notice receive is
	 * posted there, or every RING_QUIET_NS */
	if (!ring_quiet(&cc->ring, cc->fo.nrx_posted ? 1 : 0, sc_now_ns()))
		ring_poll(&cc->ring);
	if (cc->client)
		client_progress(cc->client);
	rc = failover_step(cc);
	/* Every active request moves, not only the one NCCL asks about (an
	 * error is its test's to report: ring_op_progress keeps it). */
	uint64_t now = sc_now_ns();
	for (int i = 0; i < COLL_REQS; i++) {
		struct coll_req *q = &cc->reqs[i];
		if (!q->used || q->coll == COLL_TREE)
			continue;
		if (!coll_req_progress(q))
			coll_req_adapt_note(cc, q, now);
	}
	if (!rc)
		rc = coll_adapt_step(cc);
	return rc;
}

void coll_serve(struct coll_comm *cc)
{
	struct coll_comm *p = cc->parent;
	uint32_t n = p ? coll_tree_ninner(p) : 0;

	for (uint32_t i = 0; i < n; i++) {
		struct coll_comm *x = coll_tree_inner(p, i);
		if (x && x != cc && failover_progress(x) == 0)
			(void)coll_adapt_step(x);
	}
}

int coll_agree(struct coll_comm *cc, int64_t *vals, size_t n, uint32_t round, uint64_t deadline,
	       bool serve)
{
	struct coll_agreement *ag;
	int rc = coll_agree_begin(cc, vals, n, round, &ag);

	if (rc)
		return rc;
	/* A blocking collective (NCCL waits in it): while nothing completes,
	 * nap, doubling from 16 us to 1 ms, so that nodes waiting for slower
	 * ones leave them the cores (64 nodes and more on a few cores: a
	 * spinning connect starved the ring's own steps past the timeout). */
	uint64_t seen = cc->ring.completions;
	unsigned nap_us = 0;
	for (;;) {
		ring_poll(&cc->ring);
		if (serve) {
			(void)failover_progress(cc); /* notices, agreements, copies for others */
			coll_serve(cc); /* and a tree's other inner communicators */
		}
		rc = ring_op_progress(&ag->op);
		if (rc)
			break;
		if (sc_now_ns() > deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		if (cc->ring.completions != seen) {
			seen = cc->ring.completions;
			nap_us = 0;
			continue;
		}
		nap_us = nap_us ? (nap_us < 500 ? nap_us * 2 : 1000) : 16;
		struct timespec ts = { 0, (long)nap_us * 1000 };
		nanosleep(&ts, NULL);
	}
	return coll_agree_end(ag, rc, vals);
}

void coll_adapt_fini(struct coll_comm *cc, uint64_t deadline)
{
	while (coll_adapt_owed(cc)) {
		ring_poll(&cc->ring);
		client_progress(cc->client);
		(void)failover_step(cc); /* serve the others' notices and copies meanwhile */
		coll_serve(cc);
		if (coll_adapt_step(cc))
			break;
		if (sc_now_ns() > deadline) {
			SC_WARN("collnet job 0x%016llx rank %u: closing: the agreement on the split of "
				"window %" PRIu64 " did not end within SUMCAST_AGG_TIMEOUT",
				(unsigned long long)cc->job_id, cc->rank, cc->adapt.agreed);
			break;
		}
	}
	coll_adapt_release(cc);
}
