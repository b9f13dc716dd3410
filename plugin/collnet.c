/* ncclCollNet engine: allreduce split between sumcastd aggregators
 * (client.h) and a ring among the nodes (ring.c), both running at once;
 * failover.c keeps requests right when an aggregator fails.
 *
 * connect() is a collective (NCCL calls it once per node and expects the
 * same answer everywhere): every node sets up its ring neighbours, tries to
 * join the aggregators, then the nodes agree over the ring (a min-allreduce
 * of {naggs, -naggs, ready per aggregator}) before answering. The
 * aggregators every node joined are used; if none (or the lists differ),
 * every node drops them and the collnet is a pure ring (one WARN line says
 * why). connect blocks, bounded by SUMCAST_CONNECT_TIMEOUT: NCCL's collnet
 * setup calls it exactly once.
 *
 * Settings that must agree across nodes (split, bandwidths, small-message
 * threshold, job id) travel in rank 0's listen handle. NCCL's vtables and
 * the version adapters are in collnet_api.c. */
#include "collnet.h"

#include <errno.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "tags.h"
#include "wire.h"

#define COLL_MAGIC 0x53434331u /* "SCC1" */
#define COLL_F_SHARED_HOST 1u /* every aggregator on this host: never split */
#define COLL_F_DETERMINISTIC 2u /* SUMCAST_DETERMINISTIC on rank 0: rank-order sums */
#define COLL_F_NO_FAILOVER 4u   /* SUMCAST_FAILOVER=false on rank 0: faults fail requests */

struct coll_handle {
	uint32_t magic;
	uint16_t addrlen;
	uint16_t flags; /* COLL_F_* */
	uint8_t addr[FABRIC_ADDR_MAX];
	uint64_t job_id;
	int32_t split_ppm; /* -1: auto (adaptive), -2: model */
	uint32_t link_mbps, agg_mbps;
	uint32_t agg_eff_ppm; /* split model's aggregator efficiency, parts per million */
	uint32_t lat_ns; /* one hop, for the split's latency terms */
	uint64_t small_bytes;
	uint32_t eager_bytes; /* eager cut for aggregator chunks and ring columns, 0: none */
};
_Static_assert(sizeof(struct coll_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

struct coll_listen {
	struct fabric *f;
	uint64_t job_id;
};

/* SUMCAST_EAGER_BYTES: "auto" (the provider's figure, client_eager_default;
 * 0 while the provider is not known yet), or a size with K/M suffix, 0: off. */
static int eager_parse(const char *s, const char *provider, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || !strcasecmp(s, "auto")) {
		*out = provider ? client_eager_default(provider) : 0;
		return 0;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (errno || *end || end == s || v > (64ull << 20))
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int colln_listen(int dev, void *handle, void **listen_comm)
{
	struct coll_handle *h = handle;
	struct coll_listen *lc;
	double split;
	uint32_t eager;
	int rc;

	if (dev != 0)
		return -EINVAL;
	if (eager_parse(plugin_cfg.eager_bytes, NULL, &eager)) {
		SC_WARN("SUMCAST_EAGER_BYTES=%s: want auto or a size up to 64M", plugin_cfg.eager_bytes);
		return -EINVAL;
	}
	if (split_parse(plugin_cfg.split, &split)) {
		SC_WARN("SUMCAST_SPLIT=%s: want auto, model or a fraction in [0, 1]", plugin_cfg.split);
		return -EINVAL;
	}
	lc = calloc(1, sizeof(*lc));
	if (!lc)
		return -ENOMEM;
	struct fabric_params p = {
		.provider = plugin_cfg.provider,
		.node = plugin_cfg.iface[0] ? plugin_cfg.iface : NULL,
		.cq_size = 4096,
	};
	rc = fabric_open(&p, &lc->f);
	if (rc) {
		free(lc);
		return rc;
	}
	if (getrandom(&lc->job_id, sizeof(lc->job_id), 0) != sizeof(lc->job_id))
		lc->job_id = sc_now_ns() ^ ((uint64_t)getpid() << 32);
	memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
	h->magic = COLL_MAGIC;
	h->addrlen = (uint16_t)lc->f->addrlen;
	memcpy(h->addr, lc->f->addr, lc->f->addrlen);
	h->job_id = lc->job_id;
	h->split_ppm = split == SPLIT_MODEL ? -2 : split < 0 ? -1 : (int32_t)(split * 1e6 + 0.5);
	struct plugin_props pp;
	h->link_mbps = plugin_props_get(lc->f, 0, &pp) ? 25000 : (uint32_t)pp.speed_mbps;
	h->agg_mbps = plugin_cfg.agg_gbps > 0 ? (uint32_t)(plugin_cfg.agg_gbps * 1000) : h->link_mbps;
	h->agg_eff_ppm = (uint32_t)(plugin_cfg.agg_eff * 1e6 + 0.5);
	h->small_bytes = plugin_cfg.small_bytes;
	eager_parse(plugin_cfg.eager_bytes, fabric_provider(lc->f), &h->eager_bytes);
	h->lat_ns = plugin_props_get(lc->f, 0, &pp) ? 10000 : (uint32_t)(pp.latency_us * 1000);
	if (split_hosts_local(plugin_cfg.aggregators))
		h->flags |= COLL_F_SHARED_HOST;
	if (plugin_cfg.deterministic)
		h->flags |= COLL_F_DETERMINISTIC;
	if (!plugin_cfg.failover)
		h->flags |= COLL_F_NO_FAILOVER;
	*listen_comm = lc;
	return 0;
}

int colln_close_listen(void *listen_comm)
{
	struct coll_listen *lc = listen_comm;

	if (lc) {
		fabric_close(lc->f); /* NULL once a collComm owns it */
		free(lc);
	}
	return 0;
}

static void aggs_parse(struct coll_comm *cc)
{
	char *save = NULL;

	snprintf(cc->aggs_buf, sizeof(cc->aggs_buf), "%s", plugin_cfg.aggregators);
	for (char *t = strtok_r(cc->aggs_buf, ", ", &save); t && cc->naggs < CLIENT_AGGS_MAX;
	     t = strtok_r(NULL, ", ", &save))
		cc->aggs[cc->naggs++] = t;
}

/* The same reader as the daemon's (wire_key_load), so a key file means the
 * same bytes on both sides. */
static int key_load(struct coll_comm *cc)
{
	const char *why;
	int rc;

	if (!plugin_cfg.key_file[0])
		return 0;
	rc = wire_key_load(plugin_cfg.key_file, cc->key, &cc->key_len, &why);
	if (rc)
		SC_WARN("SUMCAST_KEY_FILE=%s: %s", plugin_cfg.key_file, why);
	return rc;
}

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

static const struct coll_handle *handle_check(void *p, int i)
{
	const struct coll_handle *h = p;

	if (!h || h->magic != COLL_MAGIC || h->addrlen == 0 || h->addrlen > FABRIC_ADDR_MAX) {
		SC_WARN("collnet connect: handle of rank %d is not a Sumcast collnet handle", i);
		return NULL;
	}
	return h;
}

/* Tries to join every aggregator; 0 when each is READY or failed and at
 * least one is READY (client_agg_alive tells which). */
static int coll_join(struct coll_comm *cc, uint64_t deadline)
{
	/* The key must be loaded before the params copy its length. */
	if (key_load(cc))
		return -EACCES;
	struct client_params p = {
		.provider = plugin_cfg.provider,
		.node = plugin_cfg.iface[0] ? plugin_cfg.iface : NULL,
		.job_id = cc->job_id,
		.rank = cc->rank,
		.nranks = cc->nranks,
		.chunk_bytes = (uint32_t)plugin_cfg.chunk_bytes,
		.window = (uint32_t)plugin_cfg.window,
		.weight = (uint32_t)plugin_cfg.weight,
		.timeout_ms = (uint32_t)plugin_cfg.agg_timeout_ms,
		.key = cc->key_len ? cc->key : NULL,
		.key_len = cc->key_len,
		.naggs = cc->naggs,
		.aggs = cc->aggs,
		.eager_bytes = cc->eager_bytes,
		.join_flags = cc->deterministic ? WIRE_JOIN_F_DETERMINISTIC : 0,
		.failover = cc->failover,
		.deadline_ms = (uint32_t)plugin_cfg.agg_deadline_ms,
		.multicast = plugin_cfg.multicast ? 0 : CLIENT_MC_OFF,
		.mc_nack_us = (uint32_t)plugin_cfg.mc_nack_us,
		.mc_drop_permille = (uint32_t)plugin_cfg.test_mc_drop,
	};
	int rc = client_create(&p, &cc->client);
	if (rc) {
		SC_WARN("aggregators %s: client setup failed: %s", plugin_cfg.aggregators,
			strerror(-rc));
		cc->client = NULL;
		return rc;
	}
	do {
		rc = client_connect_poll(cc->client);
		if (rc != -EAGAIN)
			break;
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	} while (sc_now_ns() < deadline);
	if (rc == -EAGAIN) {
		SC_WARN("aggregators %s: not ready within SUMCAST_CONNECT_TIMEOUT (%s)",
			plugin_cfg.aggregators, client_error(cc->client));
		rc = -ETIMEDOUT;
	} else if (rc) {
		SC_WARN("aggregators %s: %s", plugin_cfg.aggregators, client_error(cc->client));
	}
	return rc;
}

/* SUMCAST_TRACE=<prefix>: <prefix>.<job id>.<rank>.jsonl, one line per
 * allreduce as it completes or fails (docs/plugin.md, "Trace"). A file that
 * cannot be opened costs a WARN, not the job. */
static void trace_open(struct coll_comm *cc)
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

static const char *const coll_names[] = { "allreduce", "reducescatter", "allgather" };

static void trace_req(struct coll_comm *cc, const struct coll_req *r, uint64_t t_end, int rc)
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
		coll_names[r->coll], r->coll == COLL_ALLREDUCE ? r->frac : r->a ? 1.0 : 0.0,
		r->tuned ? "true" : "false", rc ? "error" : "ok");
}

int colln_connect(void *handles[], int nranks, int rank, void *listen_comm, void **coll_comm)
{
	struct coll_listen *lc = listen_comm;
	struct coll_comm *cc;
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
	cc = calloc(1, sizeof(*cc));
	if (!cc)
		return -ENOMEM;
	cc->f = lc->f;
	lc->f = NULL; /* NCCL closes the listen comm after a successful connect */
	cc->rank = (uint32_t)rank;
	cc->nranks = (uint32_t)nranks;
	cc->job_id = h0->job_id;
	cc->model = (struct split_model){
		.fixed = h0->split_ppm < 0 ? -1 : h0->split_ppm / 1e6,
		.link_gbps = h0->link_mbps / 1000.0,
		.agg_gbps = h0->agg_mbps / 1000.0,
		.agg_eff = h0->agg_eff_ppm / 1e6,
		.nranks = (uint32_t)nranks,
		.small_bytes = h0->small_bytes,
		.lat_us = h0->lat_ns / 1000.0,
		.shared_host = h0->flags & COLL_F_SHARED_HOST,
	};
	rc = ring_init(&cc->ring, cc->f, hn->addr, hn->addrlen, hp->addr, hp->addrlen, cc->rank,
		       cc->nranks, plugin_cfg.ring_chunk_bytes, (uint32_t)plugin_cfg.ring_window,
		       COLL_REQS);
	if (rc)
		goto err_free;
	cc->eager_bytes = h0->eager_bytes;
	cc->ring.eager_bytes = h0->eager_bytes;
	cc->deterministic = h0->flags & COLL_F_DETERMINISTIC;
	cc->failover = !(h0->flags & COLL_F_NO_FAILOVER);
	/* a moving split moves which elements the aggregators sum: not with
	 * the deterministic (run to run identical) sums */
	cc->adaptive = h0->split_ppm == -1 && !cc->deterministic;

	aggs_parse(cc);
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
		char split_s[16], dropped[160] = "", fault_s[64];
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
		rc = tune_init(cc);
		if (rc) {
			failover_fini(cc);
			goto err_ring;
		}
		/* rank 0's split, which every node uses */
		if (cc->tune.on)
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
			(unsigned long long)cc->job_id, rank, nranks, cc->model.naggs, plugin_cfg.aggregators,
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
	trace_open(cc);
	*coll_comm = cc;
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

int colln_reduce_support(ncclDataType_t t, ncclRedOp_t op, int *supported)
{
	enum sc_dtype d;
	enum sc_op o;

	*supported = plugin_dtype(t, &d) == 0 && plugin_op(op, &o) == 0;
	return 0;
}

/* Registers [data, + size) on the collnet's endpoint and, with aggregators,
 * on the client's domain. */
static int coll_mr_reg(struct coll_comm *cc, void *data, size_t size, struct coll_mr *m)
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

static void coll_mr_dereg(struct coll_mr *m)
{
	if (m->has_agg)
		fabric_mr_dereg(&m->agg);
	fabric_mr_dereg(&m->ring);
}

int colln_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle)
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
	*mhandle = m;
	return 0;
}

int colln_dereg_mr(void *coll_comm, void *mhandle)
{
	struct coll_mr *m = mhandle;

	(void)coll_comm;
	if (m) {
		coll_mr_dereg(m);
		free(m);
	}
	return 0;
}

int colln_iallreduce(void *coll_comm, void *send, void *recv, size_t count, ncclDataType_t t,
		     ncclRedOp_t op, void *send_mh, void *recv_mh, void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_mr *sm = send_mh, *rm = recv_mh;
	struct coll_req *r = NULL;
	enum sc_dtype d;
	enum sc_op o;
	uint32_t slot;
	int rc;

	*request = NULL;
	if (plugin_dtype(t, &d) || plugin_op(op, &o)) {
		SC_WARN("iallreduce: type %d / op %d was announced unsupported by reduceSupport", t, op);
		return -EINVAL;
	}
	rc = failover_progress(cc);
	if (!rc)
		rc = tune_step(cc);
	if (rc)
		return rc;
	if (failover_busy(cc))
		return 0; /* the nodes are agreeing on a fault: NCCL retries */
	for (slot = 0; slot < COLL_REQS; slot++)
		if (!cc->reqs[slot].used) {
			r = &cc->reqs[slot];
			break;
		}
	if (!r)
		return 0; /* NCCL retries */
	size_t es = sc_dtype_size(d);
	uint32_t epoch = 0;
	uint64_t aggs = cc->client ? failover_live_for(cc, cc->next_idx, &epoch) : 0;
	struct split_model m = cc->model;
	m.naggs = (uint32_t)__builtin_popcountll(aggs);
	int32_t tppm = -1;
	int tuned = aggs ? tune_split(cc, count * es, &tppm) : 0;
	if (tuned == -EAGAIN)
		return 0; /* its window's split is not agreed yet: NCCL retries */
	double frac = !aggs ? 0 : tuned ? tppm / (double)SPLIT_PPM : split_fraction(&m, count * es);
	size_t a = split_count(frac, count, es);
	struct client_req *creq = NULL;
	if (a) {
		rc = client_allreduce_on(cc->client, send, recv, a, d, o, sm && sm->has_agg ? sm->agg.desc : NULL,
					 rm && rm->has_agg ? rm->agg.desc : NULL, aggs, &creq);
		if (rc == -EAGAIN)
			return 0;
		if (rc) {
			SC_WARN("iallreduce of %zu x %s through the aggregators: %s (%s)", a,
				sc_dtype_name(d), strerror(-rc), client_error(cc->client));
			return rc;
		}
	}
	memset(r, 0, offsetof(struct coll_req, ring));
	r->cc = cc;
	r->used = true;
	r->coll = COLL_ALLREDUCE;
	r->idx = cc->next_idx;
	r->seq = (uint32_t)(cc->next_idx & SC_TAG_RING_SEQ_MASK);
	r->count = count;
	r->es = es;
	r->a = a;
	r->dtype = (uint8_t)d;
	r->op = (uint8_t)o;
	r->send = send;
	r->recv = recv;
	r->sm = sm;
	r->rm = rm;
	r->creq = creq;
	if (creq)
		client_req_bytes(creq, &r->agg_give, &r->agg_take);
	r->aggs = a ? aggs : 0;
	r->epoch = epoch;
	r->agg_done = a == 0;
	r->frac = frac;
	r->tune_ppm = tppm;
	if (tuned)
		tune_issued(cc, r);
	r->t0 = sc_now_ns();
	ring_op_start(&cc->ring, &r->ring, r->seq, (const char *)send + a * es, (char *)recv + a * es,
		      count - a, d, o, sm ? sm->ring.desc : NULL, rm ? rm->ring.desc : NULL, slot);
	cc->next_idx++;
	if (r->aggs & cc->fo.dead) {
		rc = failover_req_started(cc, r);
		if (rc)
			return rc;
	}
	*request = r;
	return 0;
}

/* ---- CollNet Direct's window collectives, over the ring ----
 *
 * NCCL (src/transport/coll_net.cc, v2.28.9: sendProxyProgress,
 * collNet[Reg]Iallgather, collNet[Reg]Ireducescatter) sees a global buffer
 * of nNodes blocks of bytesPerRank bytes, block k belonging to collnet rank
 * k, and issues one request per window [windowOffset, + windowBytes) of it,
 * with one SGE part covering the window: iallgather's recvParts[0] (the
 * result), ireducescatter's sendParts[0] (this node's contribution). The
 * other pointer covers only this node's block's part of the window, and
 * NCCL advances it by windowOffset % bytesPerRank when the window starts in
 * this node's block, not otherwise: so it always points at global offset
 * max(windowOffset, rank x bytesPerRank). docs/plugin.md has the details. */

static int window_check(const struct coll_comm *cc, const char *what, int nparts,
			const ncclNetSGE_t *parts, size_t bpr, size_t wo, size_t wb, size_t es)
{
	if (nparts != 1 || !parts) {
		SC_WARN("%s: %d parts; NCCL passes exactly one", what, nparts);
		return -EINVAL;
	}
	if (parts[0].size < wb) {
		SC_WARN("%s: the part holds %zu bytes, the window is %zu", what, (size_t)parts[0].size, wb);
		return -EINVAL;
	}
	if (wb && (!bpr || bpr > SIZE_MAX / cc->nranks || wo > bpr * cc->nranks ||
		   wb > bpr * cc->nranks - wo)) {
		SC_WARN("%s: window [%zu, +%zu) is not inside %u blocks of %zu bytes", what, wo, wb,
			cc->nranks, bpr);
		return -EINVAL;
	}
	if (bpr % es || wo % es || wb % es) {
		SC_WARN("%s: bytesPerRank %zu, windowOffset %zu, windowBytes %zu: not whole %zu-byte "
			"elements", what, bpr, wo, wb, es);
		return -EINVAL;
	}
	return 0;
}

/* A free request for a window op, or NULL (NCCL retries). */
static struct coll_req *window_req(struct coll_comm *cc, uint32_t *slot)
{
	for (uint32_t i = 0; i < COLL_REQS; i++)
		if (!cc->reqs[i].used) {
			*slot = i;
			return &cc->reqs[i];
		}
	return NULL;
}

static void window_req_init(struct coll_comm *cc, struct coll_req *r, enum coll_kind kind,
			    size_t count, enum sc_dtype d, enum sc_op o, const void *send, void *recv,
			    struct coll_mr *sm, struct coll_mr *rm)
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
	r->agg_done = true; /* no aggregator part */
	r->epoch = cc->fo.epoch;
	r->t0 = sc_now_ns();
	cc->next_idx++;
}

/* After a window op's start (rc: the ring op's error, or window_agg_start's):
 * issued, or not issued at all (the request and its index given back):
 * -EAGAIN (the client had no request free) is a NULL request NCCL retries,
 * another error (an overlap the ring cannot work with, no staging memory,
 * the aggregators refused) fails the call. */
static int window_issued(struct coll_comm *cc, struct coll_req *r, int rc, void **request)
{
	if (rc && !r->creq) {
		r->used = false;
		cc->next_idx--;
	}
	if (rc == -EAGAIN)
		return 0;
	if (rc)
		return rc;
	*request = r;
	return 0;
}

/* ---- windows through the aggregators ----
 *
 * A window split_window_agg sends to the aggregators goes all of it as one
 * client request of blocks (client_start, client.h v1.6), cut into chunks
 * as an allreduce; each chunk's role follows from the blocks it touches.
 * Reduce-scatter: every node sends sendParts[0]; a chunk's result comes
 * back only to the owner(s) of the blocks it touches, into the slot's
 * staging, and this node's part is copied to recvData when done. Allgather:
 * a chunk inside one block is sent by its owner only (from a staging copy of
 * the window, zero but for this node's part) and its result goes to the
 * others; a chunk across blocks is sent by each owner (its part, zero
 * elsewhere: a u8 sum is exact) and returns to all; this node's own part is
 * copied into recvParts[0] at the start. Faults: failover.c (a result some
 * node lacks is copied from a holder, the owner's data included; one no node
 * holds is recomputed over the ring from every node's contribution, kept in
 * retention when its request completed). */

/* The registrations go before their domains close; the memory only once
 * no operation can read it any more: after the client's and the ring's
 * endpoints are closed (colln_close), or when the slot is reused by a
 * request of a communicator where none has failed (window_aggs), so the
 * slot's previous request completed and its operations with it. */
static void wstage_dereg(struct coll_wstage *w)
{
	if (!w->cap)
		return;
	coll_mr_dereg(&w->mr);
	w->cap = 0;
}

static void wstage_free(struct coll_wstage *w)
{
	wstage_dereg(w);
	free(w->buf);
	w->buf = NULL;
}

static struct coll_mr *wstage_get(struct coll_comm *cc, uint32_t slot, size_t bytes)
{
	struct coll_wstage *w = &cc->wstage[slot];
	size_t cap = bytes < (64u << 10) ? (64u << 10) : (bytes + 4095) & ~(size_t)4095;

	if (w->buf && w->cap >= bytes)
		return &w->mr;
	wstage_free(w);
	if (posix_memalign(&w->buf, 4096, cap)) {
		w->buf = NULL;
		return NULL;
	}
	if (coll_mr_reg(cc, w->buf, cap, &w->mr)) {
		free(w->buf);
		w->buf = NULL;
		return NULL;
	}
	w->cap = cap;
	return &w->mr;
}

/* The aggregators this window goes to (0: the ring), decided alike on
 * every node: from the request index's aggregator set and rank 0's model.
 * -EAGAIN: the nodes are agreeing on a fault, NCCL retries. */
static int window_aggs(struct coll_comm *cc, size_t window_bytes, bool gather, uint64_t *aggs,
		       uint32_t *epoch)
{
	*aggs = 0;
	*epoch = cc->fo.epoch;
	if (!cc->client)
		return 0;
	if (cc->failed) /* NCCL has an error: no new operation on the staging */
		return -EPIPE;
	if (failover_busy(cc))
		return -EAGAIN;
	uint64_t live = failover_live_for(cc, cc->next_idx, epoch);
	struct split_model m = cc->model;
	m.naggs = (uint32_t)__builtin_popcountll(live);
	if (split_window_agg(&m, window_bytes, gather))
		*aggs = live;
	return 0;
}

/* Starts window request r (set up by window_req_init, r->blocks set) on
 * the aggregators: send -> recv, count elements of the global buffer's
 * blocks. 0, -EAGAIN (no client request free: nothing consumed) or an
 * error. */
static int window_agg_start(struct coll_comm *cc, struct coll_req *r, uint64_t aggs, uint32_t epoch)
{
	enum sc_dtype d = (enum sc_dtype)r->dtype;
	struct client_req *creq = NULL;
	int rc = client_start(cc->client, &r->blocks, r->send, r->recv, r->count, d, (enum sc_op)r->op,
			      r->sm && r->sm->has_agg ? r->sm->agg.desc : NULL,
			      r->rm && r->rm->has_agg ? r->rm->agg.desc : NULL, aggs, &creq);
	if (rc == -EAGAIN)
		return rc;
	if (rc) {
		SC_WARN("%s window of %zu bytes through the aggregators: %s (%s)",
			r->coll == COLL_ALLGATHER ? "allgather" : "reduce-scatter", r->count * r->es,
			strerror(-rc), client_error(cc->client));
		return rc;
	}
	r->creq = creq;
	client_req_bytes(creq, &r->agg_give, &r->agg_take);
	r->a = r->count;
	r->aggs = aggs;
	r->epoch = epoch;
	r->agg_done = false;
	r->ring_done = true; /* no ring part */
	if (r->aggs & cc->fo.dead)
		return failover_req_started(cc, r);
	return 0;
}

int colln_iallgather(void *coll_comm, void *send, int nparts, const ncclNetSGE_t *parts,
		     size_t bytes_per_rank, size_t window_offset, size_t window_bytes, void *send_mh,
		     void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_req *r;
	uint64_t aggs;
	uint32_t slot, epoch;
	int rc;

	*request = NULL;
	rc = window_check(cc, "iallgather", nparts, parts, bytes_per_rank, window_offset,
			  window_bytes, 1);
	if (rc)
		return rc;
	rc = failover_progress(cc);
	if (rc)
		return rc;
	r = window_req(cc, &slot);
	rc = window_aggs(cc, window_bytes, true, &aggs, &epoch);
	if (!r || rc == -EAGAIN)
		return 0; /* NCCL retries */
	if (rc)
		return rc;
	struct coll_mr *sm = send_mh, *rm = parts[0].mhandle;
	if (aggs) {
		struct coll_mr *st = wstage_get(cc, slot, window_bytes);
		size_t lo, len;
		if (!st)
			return -ENOMEM;
		ring_window_part(bytes_per_rank, window_offset, window_bytes, cc->rank, &lo, &len);
		memset(cc->wstage[slot].buf, 0, window_bytes);
		if (len) { /* NCCL may pass no send pointer for an empty part */
			memcpy((char *)cc->wstage[slot].buf + lo, send, len);
			/* no result comes back for the chunks only this node sends */
			memcpy((char *)parts[0].address + lo, send, len);
		}
		window_req_init(cc, r, COLL_ALLGATHER, window_bytes, SC_U8, SC_OP_SUM,
				cc->wstage[slot].buf, parts[0].address, st, rm);
		r->blocks = (struct client_blocks){ CLIENT_ALLGATHER, window_offset, bytes_per_rank };
		return window_issued(cc, r, window_agg_start(cc, r, aggs, epoch), request);
	}
	window_req_init(cc, r, COLL_ALLGATHER, window_bytes, SC_U8, SC_OP_SUM, send, parts[0].address,
			sm, rm);
	ring_op_start_window(&cc->ring, &r->ring, RING_ALLGATHER, r->seq, send, parts[0].address,
			     bytes_per_rank, window_offset, window_bytes, SC_U8, SC_OP_SUM,
			     sm ? sm->ring.desc : NULL, rm ? rm->ring.desc : NULL, slot);
	return window_issued(cc, r, r->ring.err, request);
}

int colln_ireducescatter(void *coll_comm, int nparts, const ncclNetSGE_t *parts, void *recv,
			 size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
			 ncclDataType_t t, ncclRedOp_t op, void *recv_mh, void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_req *r;
	enum sc_dtype d;
	enum sc_op o;
	uint64_t aggs;
	uint32_t slot, epoch;
	int rc;

	*request = NULL;
	if (plugin_dtype(t, &d) || plugin_op(op, &o)) {
		SC_WARN("ireducescatter: type %d / op %d was announced unsupported by reduceSupport", t,
			op);
		return -EINVAL;
	}
	size_t es = sc_dtype_size(d);
	rc = window_check(cc, "ireducescatter", nparts, parts, bytes_per_rank, window_offset,
			  window_bytes, es);
	if (rc)
		return rc;
	rc = failover_progress(cc);
	if (rc)
		return rc;
	r = window_req(cc, &slot);
	rc = window_aggs(cc, window_bytes, false, &aggs, &epoch);
	if (!r || rc == -EAGAIN)
		return 0; /* NCCL retries */
	if (rc)
		return rc;
	struct coll_mr *sm = parts[0].mhandle, *rm = recv_mh;
	if (aggs) {
		struct coll_mr *st = wstage_get(cc, slot, window_bytes);
		if (!st)
			return -ENOMEM;
		window_req_init(cc, r, COLL_REDUCE_SCATTER, window_bytes / es, d, o, parts[0].address,
				cc->wstage[slot].buf, sm, st);
		r->win_dst = recv;
		ring_window_part(bytes_per_rank, window_offset, window_bytes, cc->rank, &r->win_off,
				 &r->win_len);
		r->blocks = (struct client_blocks){ CLIENT_REDUCE_SCATTER, window_offset, bytes_per_rank };
		return window_issued(cc, r, window_agg_start(cc, r, aggs, epoch), request);
	}
	window_req_init(cc, r, COLL_REDUCE_SCATTER, window_bytes / es, d, o, parts[0].address, recv,
			sm, rm);
	ring_op_start_window(&cc->ring, &r->ring, RING_REDUCE_SCATTER, r->seq, parts[0].address, recv,
			     bytes_per_rank / es, window_offset / es, window_bytes / es, d, o,
			     sm ? sm->ring.desc : NULL, rm ? rm->ring.desc : NULL, slot);
	return window_issued(cc, r, r->ring.err, request);
}

static int req_progress(struct coll_req *r)
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

/* A request NCCL has waited on for longer than SUMCAST_AGG_TIMEOUT (every
 * fault is absorbed or an error by then): say so once, with what this
 * node is waiting for, so that a hang can be told apart and diagnosed. */
static void stall_dump(struct coll_comm *cc, struct coll_req *r)
{
	r->stall_logged = true;
	SC_WARN("collnet job 0x%016llx rank %u: request %" PRIu64 " has waited %.1f s (SUMCAST_AGG_TIMEOUT "
		"is %u ms); what this node waits for:", (unsigned long long)cc->job_id, cc->rank, r->idx,
		(sc_now_ns() - r->t0) / 1e9, (unsigned)plugin_cfg.agg_timeout_ms);
	for (int i = 0; i < COLL_REQS; i++) {
		const struct coll_req *q = &cc->reqs[i];
		if (!q->used)
			continue;
		SC_WARN("  request %" PRIu64 " kind %u aggs 0x%llx epoch %u: aggregators %s (%zu chunks left), "
			"ring %s (columns %zu/%zu, next %zu), repairs %u", q->idx, q->coll,
			(unsigned long long)q->aggs, q->epoch, q->agg_done ? "done" : "waiting",
			q->creq ? client_req_left(q->creq) : 0, q->ring_done ? "done" : "waiting",
			q->ring.cols_done, q->ring.ncols, q->ring.next_col, q->repairs);
		for (size_t ai = 0; q->creq && ai < cc->naggs; ai++) {
			uint64_t c0, n;
			char held[80];
			size_t k = 0;
			client_req_chunks(q->creq, ai, &c0, &n);
			if (!n)
				continue;
			for (; k < n && k + 1 < sizeof(held); k++)
				held[k] = client_chunk_held(cc->client, ai, c0 + k) ? 'h' : '-';
			held[k] = 0;
			SC_WARN("    aggregator %zu: chunks %" PRIu64 "+%" PRIu64 " held here: %s", ai, c0, n, held);
		}
	}
	for (size_t ai = 0; cc->client && ai < cc->naggs; ai++)
		client_agg_dump(cc->client, ai, SC_LOG_WARN);
	failover_dump(cc, SC_LOG_WARN);
}

static void req_end(struct coll_comm *cc, struct coll_req *r)
{
	failover_req_gone(cc, r);
	r->used = false;
}

int colln_test(void *request, int *done, int *size)
{
	struct coll_req *r = request;
	struct coll_comm *cc = r->cc;
	int rc;

	*done = 0;
	/* each completion queue read once per call (a poll() each on tcp), the
	 * ring's only when something but the standing notice receive is
	 * posted there, or every RING_QUIET_NS */
	if (!ring_quiet(&cc->ring, cc->fo.nrx_posted ? 1 : 0, sc_now_ns()))
		ring_poll(&cc->ring);
	if (cc->client)
		client_progress(cc->client);
	rc = failover_step(cc);
	if (!rc)
		rc = tune_step(cc);
	/* Every active request moves, not only the one NCCL asks about. */
	for (int i = 0; i < COLL_REQS; i++)
		if (cc->reqs[i].used && &cc->reqs[i] != r)
			(void)req_progress(&cc->reqs[i]);
	if (!rc)
		rc = req_progress(r);
	if (!rc && !r->agg_done) {
		int d = 0;
		rc = client_req_check(cc->client, r->creq, &d);
		if (rc) {
			r->creq = NULL; /* freed by client_req_check */
			SC_WARN("%s seq %u through the aggregators failed: %s", coll_names[r->coll], r->seq,
				client_error(cc->client));
		} else if (d) {
			r->creq = NULL;
			r->agg_done = true;
			r->t_agg = sc_now_ns();
		}
	}
	if (rc) {
		if (!r->ring_done)
			ring_op_abort(&r->ring);
		if (r->creq)
			r->agg_done = true; /* left to client_destroy */
		trace_req(cc, r, sc_now_ns(), rc);
		req_end(cc, r);
		cc->failed = true;
		return rc;
	}
	if (!r->agg_done || !r->ring_done || r->repairs) {
		if (!r->stall_logged && sc_now_ns() - r->t0 > (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull)
			stall_dump(cc, r);
		return 0;
	}
	uint64_t t_end = sc_now_ns();
	trace_req(cc, r, t_end, 0);
	if (r->tuned)
		tune_done(cc, r, t_end);
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

/* A node whose requests are all done may still be needed by another: to
 * take part in the agreement on a fault only that node saw, or to send it
 * a result it lacks (from retention). So with failover and aggregators the
 * nodes leave together: a ring barrier during which each node goes on
 * serving notices, agreements and copies, bounded by SUMCAST_AGG_TIMEOUT
 * (a node that died: the others have failed their requests by then). Not
 * for a broken communicator or one closed with requests in flight. */
static void close_barrier(struct coll_comm *cc)
{
	if (!cc->client || !(cc->failover || cc->adaptive) || cc->nranks < 2 || cc->fo.err ||
	    cc->failed)
		return;
	for (int i = 0; i < COLL_REQS; i++)
		if (cc->reqs[i].used)
			return;
	int64_t v = 0;
	uint64_t t0 = sc_now_ns();
	int rc = coll_agree(cc, &v, 1, COLL_AGREE_CLOSE,
			    t0 + (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull, true);
	if (rc)
		SC_WARN("collnet job 0x%016llx rank %u: closing: not every node reached close within "
			"SUMCAST_AGG_TIMEOUT (%u ms): %s", (unsigned long long)cc->job_id, cc->rank,
			(unsigned)plugin_cfg.agg_timeout_ms, strerror(-rc));
	else if (sc_now_ns() - t0 > 100000000ull)
		SC_INFO("collnet job 0x%016llx rank %u: closing: waited %.1f ms for the other nodes",
			(unsigned long long)cc->job_id, cc->rank, (sc_now_ns() - t0) / 1e6);
}

int colln_close(void *coll_comm)
{
	struct coll_comm *cc = coll_comm;
	struct coll_stats *s;

	if (!cc)
		return 0;
	tune_fini(cc, sc_now_ns() + (uint64_t)plugin_cfg.agg_timeout_ms * 1000000ull);
	close_barrier(cc);
	s = &cc->st;
	for (int i = 0; i < COLL_REQS; i++)
		if (cc->reqs[i].used && !cc->reqs[i].ring_done)
			ring_op_abort(&cc->reqs[i].ring);
	SC_INFO("collnet job 0x%016llx rank %u/%u closed: %llu allreduces, %.3f GB, split %.3f "
		"(aggregators %.3f GB at %.2f GB/s, ring %.3f GB at %.2f GB/s); aggregator faults %llu "
		"(epoch %u): %.3f GB copied from other nodes, %.3f GB redone over the ring",
		(unsigned long long)cc->job_id, cc->rank, cc->nranks, (unsigned long long)s->ops,
		s->bytes / 1e9, s->bytes ? (double)s->agg_bytes / s->bytes : 0.0, s->agg_bytes / 1e9,
		s->agg_ns ? s->agg_bytes / (double)s->agg_ns : 0.0, s->ring_bytes / 1e9,
		s->ring_ns ? s->ring_bytes / (double)s->ring_ns : 0.0,
		(unsigned long long)cc->fo.faults, cc->fo.epoch, cc->fo.copied_bytes / 1e9,
		cc->fo.redone_bytes / 1e9);
	if (s->rs_ops || s->ag_ops)
		SC_INFO("collnet job 0x%016llx rank %u/%u: %llu reduce-scatters (%.3f GB of windows at "
			"%.2f GB/s, %.3f GB through the aggregators), %llu allgathers (%.3f GB at %.2f GB/s, "
			"%.3f GB through the aggregators)",
			(unsigned long long)cc->job_id, cc->rank, cc->nranks,
			(unsigned long long)s->rs_ops, s->rs_bytes / 1e9,
			s->rs_ns ? s->rs_bytes / (double)s->rs_ns : 0.0, s->rs_agg_bytes / 1e9,
			(unsigned long long)s->ag_ops, s->ag_bytes / 1e9,
			s->ag_ns ? s->ag_bytes / (double)s->ag_ns : 0.0, s->ag_agg_bytes / 1e9);
	if (cc->trace && fclose(cc->trace))
		SC_WARN("SUMCAST_TRACE: closing the trace of job 0x%016llx: %s",
			(unsigned long long)cc->job_id, strerror(errno));
	failover_fini(cc);
	for (int i = 0; i < COLL_REQS; i++)
		wstage_dereg(&cc->wstage[i]);
	for (size_t ai = 0; cc->client && ai < client_naggs(cc->client); ai++) {
		struct client_mc_info mi;
		if (client_mc_info(cc->client, ai, &mi) || !mi.offered)
			continue;
		SC_INFO("aggregator %zu multicast: %s; %llu results from the group, %llu by unicast, "
			"%llu NACKs; datagrams dropped: %llu foreign, %llu stale, %llu malformed, %llu duplicate",
			ai, mi.in_group ? "in its group" : mi.why[0] ? mi.why : "out of its group (fenced or closed)",
			(unsigned long long)mi.by_group,
			(unsigned long long)mi.by_unicast, (unsigned long long)mi.nacks,
			(unsigned long long)mi.foreign, (unsigned long long)mi.stale,
			(unsigned long long)mi.malformed, (unsigned long long)mi.dups);
	}
	if (cc->client)
		client_destroy(cc->client);
	ring_fini(&cc->ring);
	fabric_close(cc->f);
	/* requests abandoned after an error may have had operations on these
	 * until the endpoints closed */
	ring_free(&cc->ring);
	for (int i = 0; i < COLL_REQS; i++)
		wstage_free(&cc->wstage[i]);
	free(cc->tune.v);
	free(cc);
	return 0;
}
