/* ncclTuner v1..v6, the NCCL adapter of the tuner (tuner.c): NCCL's tables
 * and a thin adapter per version, named nccl_tuner_* (as net_nccl.c's are
 * nccl_net_*). NCCL 2.21 on finds them in this library when
 * NCCL_TUNER_PLUGIN is unset and NCCL_NET_PLUGIN names it. v3 on: only
 * CollNet's rows are ever changed, AllReduce's both, ReduceScatter's and
 * AllGather's Direct (tuner.h says how). v1, v2
 * (NCCL 2.19-2.21) have no cost table and choose outright: CollNet Chain
 * where the model says CollNet wins, else nothing (NCCL's own choice).
 * SUMCAST_TUNER=0 leaves every table and choice to NCCL. Errors become
 * ncclResult_t in plugin_result() only. */
#include "nccl_tuner.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "plugin.h"
#include "tuner.h"

/* The estimates of the last sizes asked, by size (NCCL asks the same few
 * sizes again and again: a model run takes microseconds), dropped when the
 * figures change. */
#define NCCL_TUNER_CACHE 64
_Static_assert(NCCL_TUNER_CACHE == 64, "the slot is the top 6 bits of the size's hash");

struct nccl_tuner_memo {
	size_t bytes; /* 0: empty */
	int rd, rc;   /* tuner_allreduce_est's results */
	struct tuner_est direct, chain;
};

/* One per NCCL communicator. */
struct nccl_tuner_ctx {
	struct nccl_tuner_memo memo[NCCL_TUNER_CACHE];
	uint64_t comm_id;
	uint32_t nodes, heads; /* heads: ranks per node, CollNet Direct's */
	uint64_t gen;          /* the live figures' generation copied */
	struct tuner_figs figs;
	uint64_t chain, direct; /* the crossovers last logged (tuner_crossover) */
	bool logged;
};

/* At INFO when a crossover moved (or the first time), else at DEBUG: the
 * adaptive split publishes after every window that moved a split. */
static void nccl_tuner_log_figs(struct nccl_tuner_ctx *c, const char *why)
{
	uint64_t chain = tuner_crossover(&c->figs, 1), direct = tuner_crossover(&c->figs, c->heads);
	char cs[32] = "never", ds[32] = "never";
	bool moved = !c->logged || chain != c->chain || direct != c->direct;

	if (chain)
		snprintf(cs, sizeof(cs), "%" PRIu64 " B", chain);
	if (direct)
		snprintf(ds, sizeof(ds), "%" PRIu64 " B", direct);
	c->logged = true;
	c->chain = chain;
	c->direct = direct;
	SC_LOG_AT(moved ? SC_LOG_INFO : SC_LOG_DEBUG,
		  "tuner: comm 0x%016" PRIx64 ", %u nodes x %u ranks, %u aggregators, link %.1f / "
		  "aggregator %.1f Gb/s, hop %.1f us (%s): AllReduce on CollNet Chain from %s, "
		  "Direct from %s",
		  c->comm_id, c->nodes, c->heads, c->figs.aggs, c->figs.link_gbps, c->figs.agg_gbps,
		  c->figs.hop_us, why, cs, ds);
}

static ncclResult_t nccl_tuner_init_common(uint64_t comm_id, size_t nranks, size_t nnodes,
					   ncclDebugLogger_t logger, void **ctx)
{
	struct nccl_tuner_ctx *c;
	int rc = plugin_init(logger);

	if (rc)
		return plugin_result(rc);
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->comm_id = comm_id;
	c->nodes = nnodes > UINT32_MAX ? UINT32_MAX : (uint32_t)nnodes;
	c->heads = nnodes && nranks / nnodes ? (uint32_t)(nranks / nnodes) : 1;
	if (c->heads > 64)
		c->heads = 64;
	c->gen = tuner_live_gen();
	if (tuner_live_get(c->nodes, &c->figs))
		tuner_figs_from_settings(c->nodes, &c->figs);
	if (plugin_cfg.tuner && c->nodes >= 2)
		nccl_tuner_log_figs(c, c->figs.live ? "live" : "settings");
	else if (!plugin_cfg.tuner)
		SC_DBG("tuner: off (SUMCAST_TUNER): NCCL's costs stand");
	*ctx = c;
	return ncclSuccess;
}

/* The AllReduce estimates for nbytes (the live figures taken first where
 * a communicator published new ones), or NULL where the tuner does not
 * answer: off, a collective other than AllReduce, ReduceScatter and
 * AllGather, one node. */
static const struct nccl_tuner_memo *nccl_tuner_est(struct nccl_tuner_ctx *c, ncclFunc_t coll,
						    size_t nbytes)
{
	struct nccl_tuner_memo *m;
	uint64_t g;

	if (!c || !plugin_cfg.tuner || c->nodes < 2 ||
	    (coll != ncclFuncAllReduce && coll != ncclFuncReduceScatter && coll != ncclFuncAllGather))
		return NULL;
	g = tuner_live_gen();
	if (g != c->gen) {
		struct tuner_figs f;
		c->gen = g;
		if (!tuner_live_get(c->nodes, &f)) {
			c->figs = f;
			memset(c->memo, 0, sizeof(c->memo));
			nccl_tuner_log_figs(c, "live");
		}
	}
	m = &c->memo[(nbytes * 0x9e3779b97f4a7c15ull) >> 58]; /* 64 slots */
	if (m->bytes != nbytes || !nbytes) {
		m->bytes = nbytes;
		m->rd = tuner_allreduce_est(&c->figs, nbytes, c->heads, &m->direct);
		m->rc = tuner_allreduce_est(&c->figs, nbytes, 1, &m->chain);
	}
	return m;
}

static ncclResult_t nccl_tuner_coll_info(void *ctx, ncclFunc_t coll, size_t nbytes, float **table,
					 int nalgo, int nproto)
{
	const struct nccl_tuner_memo *m = nccl_tuner_est(ctx, coll, nbytes);
	struct nccl_tuner_ctx *c = ctx;

	if (!m || !table)
		return ncclSuccess;
	/* NCCL's table is float[nalgo][nproto], passed as float ** */
	if (coll == ncclFuncAllReduce) {
		tuner_table_apply((float *)table, nalgo, nproto, m->rd ? NULL : &m->direct,
				  m->rc ? NULL : &m->chain);
	} else if (!m->rd) {
		/* NCCL runs these on CollNet Direct only (Chain's row is left) */
		struct tuner_est rs;
		tuner_rsag_est(&m->direct, c->figs.aggs, &rs);
		tuner_table_apply((float *)table, nalgo, nproto, &rs, NULL);
	}
	return ncclSuccess;
}

static ncclResult_t nccl_tuner_coll_info_v4(void *ctx, ncclFunc_t coll, size_t nbytes, int npipe,
					    float **table, int nalgo, int nproto, int reg_buff,
					    int *nchannels)
{
	(void)npipe;
	(void)reg_buff;
	(void)nchannels; /* NCCL's own */
	return nccl_tuner_coll_info(ctx, coll, nbytes, table, nalgo, nproto);
}

static ncclResult_t nccl_tuner_coll_info_v3(void *ctx, ncclFunc_t coll, size_t nbytes, int npipe,
					    float **table, int nalgo, int nproto, int *nchannels)
{
	(void)npipe;
	(void)nchannels;
	return nccl_tuner_coll_info(ctx, coll, nbytes, table, nalgo, nproto);
}

static ncclResult_t nccl_tuner_fini(void *ctx)
{
	free(ctx);
	return ncclSuccess;
}

/* ---- v5 and v6: init(&ctx, commId, ...); the NVLink domains and NCCL's
 * constants are left as they are ---- */

static ncclResult_t nccl_tuner_init_v5(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes,
				       ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t *nvl,
				       ncclTunerConstants_v5_t *constants)
{
	(void)nvl;
	(void)constants;
	return nccl_tuner_init_common(comm_id, nranks, nnodes, logger, ctx);
}

SC_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
	.name = PLUGIN_NAME,
	.init = nccl_tuner_init_v5,
	.getCollInfo = nccl_tuner_coll_info_v4,
	.finalize = nccl_tuner_fini,
	.getChunkSize = NULL, /* optional: NCCL's chunk sizes */
};

SC_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
	.name = PLUGIN_NAME,
	.init = nccl_tuner_init_v5,
	.getCollInfo = nccl_tuner_coll_info_v4,
	.finalize = nccl_tuner_fini,
};

/* ---- v3 and v4: init(nRanks, nNodes, logger, &ctx), no commId ---- */

static ncclResult_t nccl_tuner_init_v3(size_t nranks, size_t nnodes, ncclDebugLogger_t logger, void **ctx)
{
	return nccl_tuner_init_common(0, nranks, nnodes, logger, ctx);
}

SC_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
	.name = PLUGIN_NAME,
	.init = nccl_tuner_init_v3,
	.getCollInfo = nccl_tuner_coll_info_v4,
	.destroy = nccl_tuner_fini,
};

SC_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {
	.name = PLUGIN_NAME,
	.init = nccl_tuner_init_v3,
	.getCollInfo = nccl_tuner_coll_info_v3,
	.destroy = nccl_tuner_fini,
};

/* ---- v1 and v2 (NCCL 2.19-2.21): no cost table; getCollInfo chooses an
 * algorithm and a protocol outright, and NCCL uses them unchecked, its
 * own choice only where both are left undefined. So the tuner chooses
 * only what is valid wherever NCCL offers CollNet: Chain on Simple
 * (Direct needs an NVSwitch, which the tuner cannot see), where the
 * model's Chain estimate wins. Where CollNet loses it leaves the choice
 * to NCCL (these versions cannot rule one algorithm out without choosing
 * among the others); likewise with NCCL_ALGO or NCCL_PROTO set, which a
 * choice made here would override. ---- */

static void nccl_tuner_choose(struct nccl_tuner_ctx *c, ncclFunc_t coll, size_t nbytes, int collnet,
			      int *algo, int *proto)
{
	const struct nccl_tuner_memo *m;

	if (collnet != 1 || !algo || !proto || getenv("NCCL_ALGO") || getenv("NCCL_PROTO"))
		return;
	m = coll == ncclFuncAllReduce ? nccl_tuner_est(c, coll, nbytes) : NULL;
	if (m && !m->rc && m->chain.wins) {
		*algo = NCCL_ALGO_COLLNET_CHAIN;
		*proto = NCCL_PROTO_SIMPLE;
	}
}

static ncclResult_t nccl_tuner_coll_info_v2(void *ctx, ncclFunc_t coll, size_t nbytes, int collnet,
					    int nvls, int npipe, int *algo, int *proto, int *nchannels)
{
	(void)nvls;
	(void)npipe;
	(void)nchannels; /* NCCL's own */
	nccl_tuner_choose(ctx, coll, nbytes, collnet, algo, proto);
	return ncclSuccess;
}

SC_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {
	.name = PLUGIN_NAME,
	.init = nccl_tuner_init_v3,
	.getCollInfo = nccl_tuner_coll_info_v2,
	.destroy = nccl_tuner_fini,
};

/* v1 passes no context: the tuner answers for the one communicator that
 * initialized it, and leaves every choice to NCCL while communicators of
 * another shape (nodes, ranks per node) are live beside it. */
static struct {
	pthread_mutex_t lock;
	struct nccl_tuner_ctx *ctx;
	unsigned live;  /* init() minus destroy() */
	bool ambiguous; /* a communicator of another shape is (or was) live beside it */
} nccl_tuner_v1 = { .lock = PTHREAD_MUTEX_INITIALIZER };

static ncclResult_t nccl_tuner_init_v1(size_t nranks, size_t nnodes, ncclDebugLogger_t logger)
{
	void *ctx = NULL;
	ncclResult_t r = nccl_tuner_init_common(0, nranks, nnodes, logger, &ctx);

	if (r != ncclSuccess)
		return r;
	pthread_mutex_lock(&nccl_tuner_v1.lock);
	struct nccl_tuner_ctx *c = ctx, *cur = nccl_tuner_v1.ctx;
	if (!nccl_tuner_v1.live++) {
		nccl_tuner_v1.ctx = c;
		c = NULL;
	} else if (cur->nodes != c->nodes || cur->heads != c->heads) {
		nccl_tuner_v1.ambiguous = true;
	}
	pthread_mutex_unlock(&nccl_tuner_v1.lock);
	free(c);
	return ncclSuccess;
}

static ncclResult_t nccl_tuner_coll_info_v1(ncclFunc_t coll, size_t nbytes, int collnet, int nvls,
					    int npipe, int *algo, int *proto, int *nchannels)
{
	(void)nvls;
	(void)npipe;
	(void)nchannels;
	pthread_mutex_lock(&nccl_tuner_v1.lock);
	if (nccl_tuner_v1.live && !nccl_tuner_v1.ambiguous)
		nccl_tuner_choose(nccl_tuner_v1.ctx, coll, nbytes, collnet, algo, proto);
	pthread_mutex_unlock(&nccl_tuner_v1.lock);
	return ncclSuccess;
}

static ncclResult_t nccl_tuner_fini_v1(void)
{
	struct nccl_tuner_ctx *c = NULL;

	pthread_mutex_lock(&nccl_tuner_v1.lock);
	if (nccl_tuner_v1.live && !--nccl_tuner_v1.live) {
		c = nccl_tuner_v1.ctx;
		nccl_tuner_v1.ctx = NULL;
		nccl_tuner_v1.ambiguous = false;
	}
	pthread_mutex_unlock(&nccl_tuner_v1.lock);
	free(c);
	return ncclSuccess;
}

SC_EXPORT const ncclTuner_v1_t ncclTunerPlugin_v1 = {
	.name = PLUGIN_NAME,
	.init = nccl_tuner_init_v1,
	.getCollInfo = nccl_tuner_coll_info_v1,
	.destroy = nccl_tuner_fini_v1,
};
