/* Ring agreements: a min-allreduce of a few int64 over the collnet's ring
 * under a tag of its own, every node's values in, their minimum out (a
 * maximum travels negated). Every decision the nodes must take alike goes
 * through one: connect's aggregator set (collnet_connect.c) and close's
 * barrier (collnet_close.c), both blocking here (coll_agree, under the
 * agreement tags of epoch 0xFFFF, apart from failover's); failover's rounds
 * (failover.c) and the adaptive split's windows (collnet_adapt.c), driven
 * from test. */
#include "collnet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tags.h"

int coll_agreement_alloc(struct coll_comm *cc, struct coll_agreement *ag, size_t n)
{
	int rc = fabric_buf_alloc(cc->f, 2 * n * sizeof(int64_t), &ag->mem);

	if (rc)
		return rc;
	ag->in = ag->mem.buf;
	ag->out = ag->in + n;
	ag->n = n;
	memset(ag->in, 0, 2 * n * sizeof(int64_t));
	return 0;
}

void coll_agreement_start(struct coll_comm *cc, struct coll_agreement *ag, uint64_t tag)
{
	ring_op_start_tagged(&cc->ring, &ag->op, tag, SC_TAG_FO_STEP_SHIFT, ag->in, ag->out, ag->n,
			     SC_I64, SC_OP_MIN, ag->mem.mr.desc, ag->mem.mr.desc, NULL, NULL);
}

void coll_agreement_free(struct coll_agreement *ag)
{
	fabric_buf_free(&ag->mem);
	ag->in = ag->out = NULL;
	ag->n = 0;
}

int coll_agree(struct coll_comm *cc, int64_t *vals, size_t n, uint32_t round, uint64_t deadline,
	       bool serve)
{
	struct coll_agreement *ag = calloc(1, sizeof(*ag));
	int rc;

	if (!ag)
		return -ENOMEM;
	rc = coll_agreement_alloc(cc, ag, n);
	if (rc)
		goto out_free;
	memcpy(ag->in, vals, n * sizeof(*vals));
	/* epoch 0xFFFF: before failover's epochs exist */
	coll_agreement_start(cc, ag, sc_tag_agree(0xFFFF, 0, round));
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
	if (rc < 0)
		ring_op_abort(&ag->op);
	else
		memcpy(vals, ag->out, n * sizeof(*vals));
	coll_agreement_free(ag);
out_free:
	free(ag);
	return rc < 0 ? rc : 0;
}
