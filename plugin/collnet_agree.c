/* Ring agreements: a min-allreduce of a few int64 over the collnet's ring
 * under a tag of its own, every node's values in, their minimum out (a
 * maximum travels negated). Every decision the nodes must take alike goes
 * through one: connect's aggregator set (collnet_connect.c) and close's
 * barrier (collnet_close.c), both blocking in the engine's coll_agree
 * (collnet_engine.c; begun and ended here, under the agreement tags of
 * epoch 0xFFFF, apart from failover's); failover's rounds (failover.c) and
 * the adaptive split's windows (collnet_adapt.c), driven from test. */
#include "collnet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

int coll_agree_begin(struct coll_comm *cc, const int64_t *vals, size_t n, uint32_t round,
		     struct coll_agreement **out)
{
	struct coll_agreement *ag = calloc(1, sizeof(*ag));
	int rc;

	if (!ag)
		return -ENOMEM;
	rc = coll_agreement_alloc(cc, ag, n);
	if (rc) {
		free(ag);
		return rc;
	}
	memcpy(ag->in, vals, n * sizeof(*vals));
	/* epoch 0xFFFF: before failover's epochs exist */
	coll_agreement_start(cc, ag, sc_tag_agree(0xFFFF, 0, round));
	*out = ag;
	return 0;
}

int coll_agree_end(struct coll_agreement *ag, int rc, int64_t *vals)
{
	if (rc < 0)
		ring_op_abort(&ag->op);
	else
		memcpy(vals, ag->out, ag->n * sizeof(*vals));
	coll_agreement_free(ag);
	free(ag);
	return rc < 0 ? rc : 0;
}
