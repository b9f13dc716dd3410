/* connect: NCCL's collective setup of a collnet communicator (once per
 * node, the same answer expected everywhere). Above rank 0's SUMCAST_FAN_IN
 * nodes the communicator is a tree's (collnet_tree.c: its ring, then inner
 * communicators made by coll_comm_create); otherwise every node sets up its ring
 * neighbours (ring.c), tries to join the aggregators (collnet_join.c), then
 * the nodes agree over the ring (a min-allreduce of {naggs, -naggs, joined
 * per aggregator}: collnet_agree.c) before answering. The aggregators every
 * node joined are used; if none (or the lists differ), every node drops
 * them and the collnet is a pure ring (one WARN line says why). connect
 * blocks, bounded by SUMCAST_CONNECT_TIMEOUT. Failover (failover.c) and the
 * adaptive split (collnet_adapt.c) start here; requests come next
 * (collnet_allreduce.c, collnet_window.c). */
#include "collnet.h"

#include <errno.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static const struct coll_handle *handle_check(void *p, int i)
{
	const struct coll_handle *h = p;

	if (!h || h->magic != COLL_MAGIC || h->addrlen == 0 || h->addrlen > FABRIC_ADDR_MAX) {
		SC_WARN("collnet connect: handle of rank %d is not a Sumcast collnet handle", i);
		return NULL;
	}
	return h;
}

void coll_conf_apply(struct coll_comm *cc, const struct coll_handle *h0)
{
	cc->model = (struct split_model){
		.fixed = h0->split_ppm < 0 ? -1 : h0->split_ppm / 1e6,
		.link_gbps = h0->link_mbps / 1000.0,
		.agg_gbps = h0->agg_mbps / 1000.0,
		.agg_eff = h0->agg_eff_ppm / 1e6,
		.nranks = cc->nranks,
		.small_bytes = h0->small_bytes,
		.lat_us = h0->lat_ns / 1000.0,
		.shared_host = h0->flags & COLL_F_SHARED_HOST,
	};
	cc->eager_bytes = h0->eager_bytes;
	cc->ring.eager_bytes = h0->eager_bytes;
	cc->deterministic = h0->flags & COLL_F_DETERMINISTIC;
	cc->failover = !(h0->flags & COLL_F_NO_FAILOVER);
	/* a moving split moves which elements the aggregators sum: not with
	 * the deterministic (run to run identical) sums */
	cc->adaptive = h0->split_ppm == -1 && !cc->deterministic;
}

int collnet_connect(void *handles[], int nranks, int rank, void *listen_comm, void **coll_comm)
{
	struct coll_listen *lc = listen_comm;
	const struct coll_handle *h0, *hn, *hp;
	uint64_t t0 = sc_now_ns();
	uint64_t deadline = t0 + (uint64_t)plugin_cfg.connect_timeout_ms * 1000000ull;
	int rc;

	*coll_comm = NULL;
	if (nranks < 1 || nranks > COLL_RANKS_MAX || rank < 0 || rank >= nranks || !lc || !lc->f) {
		SC_WARN("collnet connect: rank %d of %d (at most %d nodes)", rank, nranks,
			COLL_RANKS_MAX);
		return -EINVAL;
	}
	h0 = handle_check(handles[0], 0);
	hn = handle_check(handles[(rank + 1) % nranks], (rank + 1) % nranks);
	hp = handle_check(handles[(rank + nranks - 1) % nranks], (rank + nranks - 1) % nranks);
	if (!h0 || !hn || !hp)
		return -EINVAL;
	struct coll_conf c = {
		.h0 = h0,
		.job_id = h0->job_id,
		.rank = (uint32_t)rank,
		.nranks = (uint32_t)nranks,
		.next = hn->addr,
		.next_len = hn->addrlen,
		.prev = hp->addr,
		.prev_len = hp->addrlen,
	};
	struct fabric *f = lc->f;
	lc->f = NULL; /* NCCL closes the listen comm after a successful connect */
	if (h0->fan_in >= 2 && (uint32_t)nranks > h0->fan_in) {
		/* the tree's communicator: its ring, then collnet_tree.c */
		struct coll_comm *cc = calloc(1, sizeof(*cc));
		if (!cc) {
			fabric_close(f);
			return -ENOMEM;
		}
		cc->f = f;
		cc->rank = c.rank;
		cc->nranks = c.nranks;
		cc->job_id = c.job_id;
		rc = ring_init(&cc->ring, cc->f, c.next, c.next_len, c.prev, c.prev_len, cc->rank,
			       cc->nranks, plugin_cfg.ring_chunk_bytes, (uint32_t)plugin_cfg.ring_window,
			       COLL_REQS);
		bool ring_ok = rc == 0;
		if (ring_ok) {
			coll_conf_apply(cc, h0);
			rc = coll_tree_connect(cc, h0, t0, deadline);
		}
		if (rc) {
			if (ring_ok)
				ring_fini(&cc->ring);
			fabric_close(cc->f);
			ring_free(&cc->ring);
			free(cc);
			return rc;
		}
		coll_trace_open(cc);
		coll_adapt_publish(cc, -1);
		*coll_comm = cc;
		return 0;
	}
	return coll_comm_create(f, &c, (struct coll_comm **)coll_comm);
}

int coll_comm_create(struct fabric *f, const struct coll_conf *c, struct coll_comm **out)
{
	struct coll_comm *cc;
	uint64_t t0 = sc_now_ns();
	uint64_t deadline = t0 + (uint64_t)plugin_cfg.connect_timeout_ms * 1000000ull;
	int rank = (int)c->rank, nranks = (int)c->nranks;
	int rc;

	*out = NULL;
	cc = calloc(1, sizeof(*cc));
	if (!cc) {
		fabric_close(f);
		return -ENOMEM;
	}
	cc->f = f;
	cc->rank = c->rank;
	cc->nranks = c->nranks;
	cc->job_id = c->job_id;
	cc->parent = c->parent;
	cc->ask_window = c->window;
	cc->ask_chunk = c->chunk;
	rc = ring_init(&cc->ring, cc->f, c->next, c->next_len, c->prev, c->prev_len, cc->rank,
		       cc->nranks, plugin_cfg.ring_chunk_bytes, (uint32_t)plugin_cfg.ring_window,
		       COLL_REQS);
	if (rc)
		goto err_free;
	coll_conf_apply(cc, c->h0);

	coll_aggs_parse(cc, c->h0);
	bool joined = cc->naggs && coll_join(cc, deadline) == 0;
	/* Agree: the same number of aggregators everywhere, and which of them
	 * every node joined (those are used, the others dropped everywhere). */
	int64_t v[2 + CLIENT_AGGS_MAX];
	size_t nv = 2 + CLIENT_AGGS_MAX;
	v[0] = (int64_t)cc->naggs;
	v[1] = -(int64_t)cc->naggs;
	for (size_t ai = 0; ai < CLIENT_AGGS_MAX; ai++)
		v[2 + ai] = joined && ai < cc->naggs && client_agg_alive(cc->client, ai);
	rc = coll_agree(cc, v, nv, COLL_AGREE_CONNECT,
			deadline + (uint64_t)plugin_cfg.connect_timeout_ms * 1000000ull, false);
	if (rc) {
		SC_WARN("collnet connect: rank %d of %d: ring to the neighbours failed: %s", rank, nranks,
			rc == -ETIMEDOUT ? "timed out" : fi_strerror(-rc));
		goto err_ring;
	}
	uint64_t live = 0;
	for (size_t ai = 0; ai < cc->naggs && v[0] == -v[1]; ai++)
		live |= (uint64_t)(v[2 + ai] == 1) << ai;
	bool use_aggs = live != 0;
	if (!use_aggs && cc->client) {
		client_destroy(cc->client);
		cc->client = NULL;
	}
	if (use_aggs) {
		char split_s[16], dropped[160] = "", fault_s[64], list[512] = "";
		for (size_t ai = 0, l = 0; ai < cc->naggs && l < sizeof(list); ai++, l = strlen(list))
			snprintf(list + l, sizeof(list) - l, "%s%s", ai ? "," : "", cc->aggs[ai]);
		if (cc->failover)
			snprintf(fault_s, sizeof(fault_s), "failover on (PING deadline %lld ms)",
				 (long long)plugin_cfg.agg_deadline_ms);
		else
			snprintf(fault_s, sizeof(fault_s), "failover off (a fault fails the requests)");
		for (size_t ai = 0; ai < cc->naggs; ai++)
			if (!(live >> ai & 1)) {
				/* joined here but not everywhere: the daemon's job waits
				 * for ranks that will not come; leave it. */
				client_agg_fence(cc->client, ai, "not joined by every node at connect");
				size_t l = strlen(dropped);
				snprintf(dropped + l, sizeof(dropped) - l, "%s%s", l ? "," : "", cc->aggs[ai]);
			}
		rc = failover_init(cc, live);
		if (rc)
			goto err_ring;
		cc->model.naggs = (uint32_t)__builtin_popcountll(live);
		rc = coll_adapt_init(cc);
		if (rc) {
			failover_fini(cc);
			goto err_ring;
		}
		/* rank 0's split, which every node uses */
		if (cc->adapt.on)
			snprintf(split_s, sizeof(split_s), "adaptive");
		else if (cc->model.fixed < 0)
			snprintf(split_s, sizeof(split_s), "model");
		else
			snprintf(split_s, sizeof(split_s), "%.3f", cc->model.fixed);
		if (dropped[0])
			SC_WARN("collnet job 0x%016llx: aggregators %s not joined by every node; using the "
				"other %u", (unsigned long long)cc->job_id, dropped, cc->model.naggs);
		SC_INFO("collnet job 0x%016llx: rank %d of %d, %u aggregators (%s) + ring, split %s "
			"(model %.3f, link %.1f / aggregator %.1f Gb/s x %.2f, hop %.1f us%s), eager cut %u B%s, "
			"%s, connected in %.1f ms",
			(unsigned long long)cc->job_id, rank, nranks, cc->model.naggs, list,
			split_s, split_model_fraction(&cc->model), cc->model.link_gbps, cc->model.agg_gbps,
			cc->model.agg_eff, cc->model.lat_us,
			cc->model.shared_host ? ", aggregators on this host: ring or aggregators, no split"
					      : "",
			cc->eager_bytes, cc->deterministic ? ", deterministic (rank-order sums)" : "",
			fault_s, (sc_now_ns() - t0) / 1e6);
	} else if (cc->naggs || v[0] > 0) {
		/* One clear line per node: every node takes the same decision. */
		SC_WARN("collnet job 0x%016llx: aggregators unusable on %s (this node: %s); "
			"all %d nodes use the ring",
			(unsigned long long)cc->job_id, v[0] != -v[1] ? "some nodes (lists differ)"
			: "at least one node", joined ? "joined" : "not joined", nranks);
	} else {
		SC_INFO("collnet job 0x%016llx: rank %d of %d, no SUMCAST_AGGREGATORS: ring only",
			(unsigned long long)cc->job_id, rank, nranks);
	}
	if (!cc->parent) {
		coll_trace_open(cc);
		coll_adapt_publish(cc, cc->client ? cc->model.naggs : 0);
	}
	*out = cc;
	return 0;

err_ring:
	if (cc->client)
		client_destroy(cc->client);
	ring_fini(&cc->ring);
err_free:
	fabric_close(cc->f);
	ring_free(&cc->ring);
	free(cc);
	return rc;
}
