/* The tuner's cost function and the live figures (tuner.h). */
#include "tuner.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "nccl_tuner.h"
#include "plan_model.h"
#include "plugin.h"

int tuner_allreduce_est(const struct tuner_figs *f, size_t bytes, uint32_t heads, struct tuner_est *out)
{
	struct plan_in in;
	struct plan_out o;
	char err[160];
	double hops_ring, hops_tree, fixed;
	int cls;

	if (!f || f->nodes < 2 || heads < 1 || bytes < 1)
		return -EINVAL;
	memset(&in, 0, sizeof(in));
	in.nodes = f->nodes;
	in.heads = heads;
	in.aggs = f->aggs ? f->aggs : 1; /* the ring's time needs none; CollNet then loses below */
	in.link_gbps = f->link_gbps;
	in.agg_link_gbps = f->agg_gbps > 0 ? f->agg_gbps : f->link_gbps;
	in.bytes = bytes / heads ? bytes / heads : 1;
	in.fan_in = f->fan_in;
	in.tcp = f->tcp;
	plan_in_defaults(&in);
	if (f->hop_us > 0)
		in.cost.hop_us = f->hop_us;
	if (f->agg_eff > 0 && f->agg_eff <= 1)
		in.cost.agg_eff = f->agg_eff;
	cls = split_adapt_class((size_t)in.bytes);
	if (cls >= 0 && f->split_ppm[cls] >= 0) {
		in.split_given = true;
		in.split_at = f->split_ppm[cls] / (double)SPLIT_PPM;
	}
	if (plan_run(&in, &o, err, sizeof(err)))
		return -EINVAL;
	hops_ring = 2.0 * (f->nodes - 1);
	hops_tree = 2.0 * ceil(log2((double)f->nodes));
	fixed = (TUNER_AGG_RTTS - 1) * 2 * in.cost.hop_us;
	out->ring_us = o.t_ring_us;
	out->tree_us = o.t_ring_us - (hops_ring - hops_tree) * in.cost.hop_us;
	out->collnet_us = o.t_auto_us + fixed;
	out->split = o.split;
	out->wins = f->aggs > 0 && out->collnet_us < out->ring_us && out->collnet_us < out->tree_us;
	return 0;
}

void tuner_rsag_est(const struct tuner_est *allreduce, uint32_t aggs, struct tuner_est *out)
{
	*out = *allreduce;
	out->ring_us = allreduce->ring_us / 2;
	out->tree_us = out->ring_us;
	out->wins = aggs > 0 && out->collnet_us < out->ring_us;
}

static bool collnet_row(int a)
{
	return a == NCCL_ALGO_COLLNET_DIRECT || a == NCCL_ALGO_COLLNET_CHAIN;
}

int tuner_table_apply(float *table, int nalgo, int nproto, const struct tuner_est *direct,
		      const struct tuner_est *chain)
{
	const struct tuner_est *row[2] = { direct, chain };
	const int algo[2] = { NCCL_ALGO_COLLNET_DIRECT, NCCL_ALGO_COLLNET_CHAIN };
	double best = -1, lowest = -1, k = 1;
	int changed = 0;

	if (!table || nalgo < 1 || nproto < 1)
		return 0;
	for (int a = 0; a < nalgo; a++)
		for (int p = 0; p < nproto && !collnet_row(a); p++) {
			float t = table[a * nproto + p];
			if (t >= 0 && (best < 0 || t < best))
				best = t;
		}
	/* one factor for both rows keeps their order (the model's) */
	for (int i = 0; i < 2; i++)
		if (row[i] && row[i]->wins && algo[i] < nalgo && (lowest < 0 || row[i]->collnet_us < lowest))
			lowest = row[i]->collnet_us;
	if (best >= 0 && lowest > best * TUNER_UNDERCUT)
		k = best * TUNER_UNDERCUT / lowest;
	for (int i = 0; i < 2; i++) {
		if (!row[i] || algo[i] >= nalgo)
			continue;
		for (int p = 0; p < nproto; p++) {
			float *t = &table[algo[i] * nproto + p];
			if (*t < 0) /* NCCL's: not usable here, whatever the model says */
				continue;
			if (row[i]->wins)
				*t = (float)(row[i]->collnet_us * k);
			else if (best >= 0) /* never leave NCCL without an entry */
				*t = (float)NCCL_ALGO_PROTO_IGNORE;
			else
				continue;
			changed++;
		}
	}
	return changed;
}

uint64_t tuner_crossover(const struct tuner_figs *f, uint32_t heads)
{
	struct tuner_est e;

	for (unsigned s = 0; s <= 36; s++)
		if (!tuner_allreduce_est(f, (size_t)1 << s, heads, &e) && e.wins)
			return 1ull << s;
	return 0;
}

void tuner_figs_from_settings(uint32_t nodes, struct tuner_figs *out)
{
	const char *a = plugin_cfg.aggregators;
	uint32_t n = 0;

	memset(out, 0, sizeof(*out));
	for (const char *p = a; *p; p++)
		n += *p == ',';
	out->nodes = nodes;
	out->aggs = a[0] ? n + 1 : 0;
	out->link_gbps = plugin_cfg.link_gbps > 0 ? plugin_cfg.link_gbps : 25;
	out->agg_gbps = plugin_cfg.agg_gbps > 0 ? plugin_cfg.agg_gbps : out->link_gbps;
	out->hop_us = 10;
	out->agg_eff = plugin_cfg.agg_eff;
	out->fan_in = (uint32_t)plugin_cfg.fan_in;
	out->tcp = strstr(plugin_cfg.provider, "tcp") != NULL;
	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++)
		out->split_ppm[c] = -1;
}

/* A few node counts at once (a job's communicators of different sizes);
 * the oldest slot goes when they are all taken. */
#define TUNER_LIVE_SLOTS 8

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tuner_figs live[TUNER_LIVE_SLOTS];
static uint64_t live_when[TUNER_LIVE_SLOTS];
static uint64_t live_gen;

static bool figs_same(const struct tuner_figs *a, const struct tuner_figs *b)
{
	return a->nodes == b->nodes && a->aggs == b->aggs && a->link_gbps == b->link_gbps &&
	       a->agg_gbps == b->agg_gbps && a->hop_us == b->hop_us && a->agg_eff == b->agg_eff &&
	       a->fan_in == b->fan_in && a->tcp == b->tcp && a->live == b->live &&
	       !memcmp(a->split_ppm, b->split_ppm, sizeof(a->split_ppm));
}

void tuner_live_publish(const struct tuner_figs *f)
{
	int slot = 0;

	pthread_mutex_lock(&live_lock);
	for (int i = 0; i < TUNER_LIVE_SLOTS; i++) {
		if (live_when[i] && live[i].nodes == f->nodes) {
			slot = i;
			break;
		}
		if (live_when[i] < live_when[slot])
			slot = i;
	}
	struct tuner_figs nf = *f;
	nf.live = true;
	/* the same figures again (a window that changed no split): no news
	 * for the readers */
	if (!live_when[slot] || !figs_same(&live[slot], &nf)) {
		live[slot] = nf;
		live_when[slot] = __atomic_add_fetch(&live_gen, 1, __ATOMIC_ACQ_REL);
	}
	pthread_mutex_unlock(&live_lock);
}

uint64_t tuner_live_gen(void)
{
	return __atomic_load_n(&live_gen, __ATOMIC_ACQUIRE);
}

int tuner_live_get(uint32_t nodes, struct tuner_figs *out)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&live_lock);
	for (int i = 0; i < TUNER_LIVE_SLOTS; i++)
		if (live_when[i] && live[i].nodes == nodes) {
			*out = live[i];
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&live_lock);
	return rc;
}
