/* The ring agreement: a blocking min-allreduce of a few int64 over the
 * collnet's ring, bounded by a deadline. connect agrees on the aggregator
 * set with it (collnet_connect.c), close uses it as the barrier every node
 * leaves from (collnet_close.c); both run under the agreement tags of epoch
 * 0xFFFF, so they never meet failover's own agreements (failover.c), which
 * it keeps serving meanwhile when asked to. */
#include "collnet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tags.h"

int coll_agree(struct coll_comm *cc, int64_t *vals, size_t n, uint32_t round, uint64_t deadline,
	       bool serve)
{
	size_t bytes = n * sizeof(*vals);
	int64_t *buf = calloc(2, bytes);
	struct fabric_mr mr = { 0 };
	struct ring_op *o = calloc(1, sizeof(*o));
	int rc;

	if (!buf || !o) {
		rc = -ENOMEM;
		goto out_free;
	}
	rc = fabric_mr_reg(cc->f, buf, 2 * bytes, &mr);
	if (rc)
		goto out_free;
	memcpy(buf, vals, bytes);
	/* epoch 0xFFFF: before failover's epochs exist */
	ring_op_start_tagged(&cc->ring, o, sc_tag_agree(0xFFFF, 0, round), SC_TAG_FO_STEP_SHIFT, buf,
			     buf + n, n, SC_I64, SC_OP_MIN, mr.desc, mr.desc, NULL, NULL);
	for (;;) {
		ring_poll(&cc->ring);
		if (serve)
			(void)failover_progress(cc); /* notices, agreements, copies for others */
		rc = ring_op_progress(o);
		if (rc)
			break;
		if (sc_now_ns() > deadline) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	if (rc < 0)
		ring_op_abort(o);
	else
		memcpy(vals, buf + n, bytes);
	fabric_mr_dereg(&mr);
out_free:
	free(o);
	free(buf);
	return rc < 0 ? rc : 0;
}
