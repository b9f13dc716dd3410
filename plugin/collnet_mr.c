/* Memory registration (NCCL's regMr / deregMr, before any request): a
 * buffer NCCL will pass to requests is registered on the collnet's own
 * endpoint (the ring, ring.c, and failover's repairs) and, with
 * aggregators, on the client's domain (every aggregator's endpoint shares
 * it). Host memory only. The window ops' staging (collnet_window.c) uses
 * the same pair. */
#include "collnet.h"

#include <errno.h>
#include <stdlib.h>

#include "log.h"

/* Registers [data, + size) on the collnet's endpoint and, with aggregators,
 * on the client's domain. */
int coll_mr_reg(struct coll_comm *cc, void *data, size_t size, struct coll_mr *m)
{
	int rc = fabric_mr_reg(cc->f, data, size, &m->ring);

	if (rc)
		return rc;
	m->has_agg = false;
	if (cc->client) {
		rc = client_mr_reg(cc->client, data, size, &m->agg);
		if (rc) {
			fabric_mr_dereg(&m->ring);
			return rc;
		}
		m->has_agg = true;
	}
	return 0;
}

void coll_mr_dereg(struct coll_mr *m)
{
	if (m->inner)
		coll_tree_mr_dereg(m);
	if (m->has_agg)
		fabric_mr_dereg(&m->agg);
	fabric_mr_dereg(&m->ring);
}

int collnet_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle)
{
	struct coll_comm *cc = coll_comm;
	struct coll_mr *m;
	int rc;

	if (type != NCCL_PTR_HOST) {
		SC_WARN("collnet regMr: pointer type %d is not host memory (NCCL_PTR_HOST only)", type);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	rc = coll_mr_reg(cc, data, size ? size : 1, m);
	if (rc) {
		free(m);
		return rc;
	}
	if (cc->tree) { /* and on every inner communicator (collnet_tree.c) */
		rc = coll_tree_mr_reg(cc, data, size ? size : 1, m);
		if (rc) {
			coll_mr_dereg(m);
			free(m);
			return rc;
		}
	}
	*mhandle = m;
	return 0;
}

int collnet_dereg_mr(void *coll_comm, void *mhandle)
{
	struct coll_mr *m = mhandle;

	(void)coll_comm;
	if (m) {
		coll_mr_dereg(m);
		free(m);
	}
	return 0;
}
