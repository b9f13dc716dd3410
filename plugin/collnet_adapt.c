/* The adaptive split (SUMCAST_SPLIT=auto) as a communicator runs it, at the
 * split step of the flow: iallreduce asks it for a request's split
 * (coll_adapt_split), test tells it the request's times when it completes
 * (coll_adapt_done), and it drives the agreements from both (split.c has
 * the controller it runs, split_adapt_*). Every node measures each window
 * of SPLIT_ADAPT_WINDOW adaptive requests (split.h: the figures and the
 * controller), the nodes agree on the minimum of each figure with a tagged
 * min-allreduce over the ring (the failover agreement's mechanism, under
 * its own tag kind), and every node runs the same controller on the same
 * figures: no node decides for the others, and all hold the same splits.
 * The decision on window n applies from window n + 2, so that a node has
 * finished window n and agreed on it while window n + 1 runs; a node that
 * gets to window n + 2 first waits (NULL request, as during a fault's
 * agreement). docs/plugin.md, "Adaptive split". */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "collnet.h"
#include "log.h"
#include "tags.h"
#include "tuner.h"

/* The agreed vector: each class's figures, then the aggregators' tenancy:
 * the jobs the busiest aggregator serves (min over nodes: what every node
 * has heard), and minus its load (so the min is the max load). */
#define ADAPT_CLS (SPLIT_ADAPT_CLASSES * SPLIT_MEAS_VALS)
#define ADAPT_JOBS ADAPT_CLS
#define ADAPT_LOAD (ADAPT_CLS + 1)
#define ADAPT_NV (ADAPT_CLS + 2)

int coll_adapt_init(struct coll_comm *cc)
{
	struct coll_adapt *t = &cc->adapt;
	int rc;

	if (!cc->client || cc->nranks < 2 || !cc->adaptive)
		return 0;
	rc = coll_agreement_alloc(cc, &t->ag, ADAPT_NV);
	if (rc)
		return rc;
	split_adapt_init(&t->sa, &cc->model);
	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++)
		t->plan0[c] = t->sa.c[c].ppm;
	t->on = true;
	return 0;
}

void coll_adapt_publish(const struct coll_comm *cc, int64_t aggs)
{
	struct tuner_figs f;
	const char *prov = cc->f ? fabric_provider(cc->f) : NULL;

	tuner_figs_from_settings(cc->nranks, &f);
	/* the aggregators requests use now: after a fault or a return, the
	 * failover's epoch (failover.c, decide) */
	if (aggs > 0 && cc->client && cc->fo.nepochs)
		aggs = __builtin_popcountll(fo_live(&cc->fo));
	if (aggs >= 0)
		f.aggs = (uint32_t)aggs;
	if (cc->model.link_gbps > 0)
		f.link_gbps = cc->model.link_gbps;
	f.agg_gbps = cc->model.agg_gbps > 0 ? cc->model.agg_gbps : f.link_gbps;
	if (cc->model.lat_us > 0)
		f.hop_us = cc->model.lat_us;
	if (cc->model.agg_eff > 0)
		f.agg_eff = cc->model.agg_eff;
	if (prov)
		f.tcp = strstr(prov, "tcp") != NULL;
	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++) {
		const struct split_class *k = &cc->adapt.sa.c[c];
		if (cc->adapt.on && (k->prev_x > 0 || k->steady_x > 0))
			f.split_ppm[c] = k->ppm;
		else if (!cc->adapt.on && cc->model.fixed >= 0)
			f.split_ppm[c] = (int32_t)(cc->model.fixed * SPLIT_PPM);
	}
	tuner_live_publish(&f);
}

static const char *class_name(unsigned c, char *buf, size_t len)
{
	size_t b = (size_t)1 << (SPLIT_ADAPT_MIN_SHIFT + c);
	const char *more = c + 1 == SPLIT_ADAPT_CLASSES ? "+" : "";

	if (b >= 1u << 20)
		snprintf(buf, len, "%zu MiB%s", b >> 20, more);
	else
		snprintf(buf, len, "%zu KiB%s", b >> 10, more);
	return buf;
}

/* Window `agreed`'s agreed figures are in v[ADAPT_NV..]: decide, plan
 * window agreed + 2. */
static void adapt_decide(struct coll_comm *cc)
{
	struct coll_adapt *t = &cc->adapt;
	struct split_meas meas[SPLIT_ADAPT_CLASSES];
	char why[SPLIT_ADAPT_CLASSES][96];
	int32_t before[SPLIT_ADAPT_CLASSES];
	uint64_t n = t->agreed;
	unsigned told;

	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++) {
		const int64_t *o = t->ag.out + c * SPLIT_MEAS_VALS;
		meas[c] = (struct split_meas){ o[0], o[1], o[2], o[3], o[4] };
		before[c] = t->sa.c[c].ppm;
	}
	/* the aggregators' tenants changed (a job came or left: the daemons
	 * say so in their PONGs): what the climb found may no longer hold.
	 * Fewer tenants leave more of the aggregators to this job: it tries a
	 * larger share first (a smaller one when one came). */
	int64_t jobs = t->ag.out[ADAPT_JOBS], load = -t->ag.out[ADAPT_LOAD];
	if (jobs > 0 && t->jobs > 0 && jobs != t->jobs) {
		split_adapt_rearm(&t->sa, jobs < t->jobs ? 1 : -1);
		SC_LOG_AT(cc->rank == 0 ? SC_LOG_INFO : SC_LOG_DEBUG,
			  "collnet job 0x%016llx: the aggregators serve %lld jobs (were %lld) at window %" PRIu64
			  ": the split climbs again, %s first", (unsigned long long)cc->job_id, (long long)jobs,
			  (long long)t->jobs, n, jobs < t->jobs ? "up" : "down");
	}
	if (jobs > 0)
		t->jobs = jobs;
	t->load_pm = load;
	told = split_adapt_decide(&t->sa, meas, why);
	char load_s[64] = "";
	if (t->jobs > 0)
		snprintf(load_s, sizeof(load_s), " [aggregators: %lld job(s), busiest %.0f %% busy]",
			 (long long)t->jobs, load / 10.0);
	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++) {
		t->plan[(n + 2) % ADAPT_WINS][c] = t->sa.c[c].ppm;
		if (!(told >> c & 1))
			continue;
		int32_t d = t->sa.c[c].ppm - before[c];
		char cn[32];
		t->changes += d != 0;
		/* a large step or a trial's start or end: INFO on rank 0; the rest
		 * at DEBUG */
		bool loud = cc->rank == 0 && (d >= SPLIT_PPM / 10 || d <= -SPLIT_PPM / 10 ||
					      !strncmp(why[c], "tr", 2));
		SC_LOG_AT(loud ? SC_LOG_INFO : SC_LOG_DEBUG,
			  "collnet job 0x%016llx: split for %s requests %.3f -> %.3f from window %" PRIu64
			  ": %s%s", (unsigned long long)cc->job_id, class_name(c, cn, sizeof(cn)),
			  before[c] / (double)SPLIT_PPM, t->sa.c[c].ppm / (double)SPLIT_PPM, n + 2, why[c],
			  load_s);
	}
	t->agreed++;
	if (!cc->parent)
		coll_adapt_publish(cc, cc->model.naggs);
}

/* Window `agreed` complete here: put its figures in and start agreeing. */
static void adapt_start(struct coll_comm *cc)
{
	struct coll_adapt *t = &cc->adapt;
	struct coll_adapt_win *w = &t->win[t->agreed % ADAPT_WINS];

	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++) {
		struct split_meas m;
		int64_t *o = t->ag.in + c * SPLIT_MEAS_VALS;
		split_meas_window(w->rec, SPLIT_ADAPT_WINDOW, (int)c, &t->ends[c], &m);
		o[0] = m.n;
		o[1] = m.ppm;
		o[2] = m.x_bps;
		o[3] = m.agg_bps;
		o[4] = m.ring_bps;
	}
	/* the tenancy every node has heard of (0: no version 3 daemon) */
	unsigned most_jobs = 0, most_load = 0;
	for (size_t ai = 0; cc->client && ai < cc->naggs; ai++) {
		unsigned pm, jobs;
		if (client_agg_load(cc->client, ai, &pm, &jobs))
			continue;
		most_jobs = jobs > most_jobs ? jobs : most_jobs;
		most_load = pm > most_load ? pm : most_load;
	}
	t->ag.in[ADAPT_JOBS] = most_jobs;
	t->ag.in[ADAPT_LOAD] = -(int64_t)most_load;
	w->done = 0;
	coll_agreement_start(cc, &t->ag, sc_tag_adapt(t->agreed));
	t->running = true;
}

int coll_adapt_step(struct coll_comm *cc)
{
	struct coll_adapt *t = &cc->adapt;

	if (!t->on)
		return 0;
	for (;;) {
		if (t->running) {
			int rc = ring_op_progress(&t->ag.op);
			if (rc == 0)
				return 0;
			t->running = false;
			if (rc < 0) {
				SC_WARN("collnet job 0x%016llx rank %u: agreeing on the split of window %" PRIu64
					" over the ring: %s", (unsigned long long)cc->job_id, cc->rank,
					t->agreed, fi_strerror(-rc));
				t->on = false;
				return rc;
			}
			adapt_decide(cc);
		}
		if (t->win[t->agreed % ADAPT_WINS].done < SPLIT_ADAPT_WINDOW)
			return 0;
		adapt_start(cc);
	}
}

int coll_adapt_split(struct coll_comm *cc, size_t bytes, int32_t *ppm)
{
	struct coll_adapt *t = &cc->adapt;
	int c = split_adapt_class(bytes);
	uint64_t w;

	if (!t->on || c < 0)
		return 0;
	w = t->issued / SPLIT_ADAPT_WINDOW;
	if (w < 2) {
		*ppm = t->plan0[c];
		return 1;
	}
	if (t->agreed < w - 1)
		return -EAGAIN;
	*ppm = t->plan[w % ADAPT_WINS][c];
	return 1;
}

void coll_adapt_issued(struct coll_comm *cc, struct coll_req *r)
{
	r->adaptive = true;
	r->adapt_ord = cc->adapt.issued++;
}

void coll_adapt_done(struct coll_comm *cc, const struct coll_req *r, uint64_t t_end)
{
	struct coll_adapt_win *w = &cc->adapt.win[(r->adapt_ord / SPLIT_ADAPT_WINDOW) % ADAPT_WINS];
	struct split_rec *q = &w->rec[r->adapt_ord % SPLIT_ADAPT_WINDOW];

	*q = (struct split_rec){
		.t0 = r->t0,
		.t_agg = r->a ? r->t_agg : 0,
		.t_ring = r->count > r->a ? r->t_ring : 0,
		.t_end = t_end,
		.bytes = r->count * r->es,
		.agg_bytes = r->a * r->es,
		.ppm = r->adapt_ppm,
		.cls = (int8_t)split_adapt_class(r->count * r->es),
	};
	w->done++;
}

bool coll_adapt_owed(const struct coll_comm *cc)
{
	const struct coll_adapt *t = &cc->adapt;

	/* the windows this node completed: every node completed them, and
	 * some may wait in their agreement for this node's part */
	return t->ag.in && t->on && !cc->failed &&
	       (t->running || t->win[t->agreed % ADAPT_WINS].done == SPLIT_ADAPT_WINDOW);
}

void coll_adapt_release(struct coll_comm *cc)
{
	struct coll_adapt *t = &cc->adapt;

	if (!t->ag.in)
		return;
	if (t->running)
		ring_op_abort(&t->ag.op);
	t->running = false;
	t->on = false;
	fabric_buf_dereg(&t->ag.mem);
	if (t->agreed && cc->rank == 0) {
		char now[SPLIT_ADAPT_CLASSES * 24] = "", cn[32];
		size_t l = 0;
		for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++)
			if (t->sa.c[c].last_meas_ppm >= 0)
				l += (size_t)snprintf(now + l, sizeof(now) - l, "%s%s %.3f", l ? ", " : "",
						      class_name(c, cn, sizeof(cn)),
						      t->sa.c[c].ppm / (double)SPLIT_PPM);
		SC_INFO("collnet job 0x%016llx: adaptive split: %" PRIu64 " windows agreed, %" PRIu64
			" changes; now %s", (unsigned long long)cc->job_id, t->agreed, t->changes,
			now[0] ? now : "(no class measured)");
	}
	/* t->ag's memory is freed after the endpoint closes (an aborted receive) */
}
