/* sumcastctl's fleet view: status, jobs and top over several daemons at
 * once (--daemons, --aggregators; docs/operations.md "A fleet in one
 * view").
 *
 * Each daemon's /stats is read with the usual per-request timeout; a daemon
 * that does not answer (or answers something that is not its /stats) is a
 * row saying so, the others are shown, and the command exits 2. The jobs
 * table joins the daemons' job lists by job id: one row per job with its
 * label, the aggregators that serve it, its ranks, bytes and chunks summed
 * over them, and its straggler over all of them (the rank most often last
 * to contribute, from each daemon's per-rank last_count and
 * last_wait_seconds_total, summed), then one row per aggregator. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agglist.h"
#include "clock.h"
#include "sumcastctl.h"

#define FLEET_MAX 256

struct member {
	char name[AGGLIST_TEXT_MAX]; /* "host:port" of its HTTP endpoint */
	struct opts o;               /* o.host points at host */
	char host[INET6_ADDRSTRLEN];
	bool up;
	char why[384];
	json_t *stats, *prev; /* this sample's /stats and the one before */
	double t, prev_t;     /* when they were read (sc_now_s) */
};

struct fleet {
	struct member *m;
	size_t n;
};

/* The daemons: --daemons as HTTP endpoints (a name's port: --port), or
 * --aggregators as the plugin's SUMCAST_AGGREGATORS, each asked at --port. */
static void fleet_open(const struct opts *o, struct fleet *f)
{
	struct agg_addr *a = calloc(FLEET_MAX, sizeof(*a));
	const char *spec = o->daemons ? o->daemons : o->aggregators;
	char why[384];
	size_t n = 0;

	if (!a)
		die(EXIT_BAD_ANSWER, "out of memory");
	if (agglist_resolve(spec, o->daemons ? (uint16_t)o->port : AGGLIST_PORT_DEFAULT, a, FLEET_MAX, &n,
			    why, sizeof(why)))
		die(EXIT_USAGE, "%s %s: %s", o->daemons ? "--daemons" : "--aggregators", spec, why);
	if (!n)
		die(EXIT_USAGE, "%s: no daemons", o->daemons ? "--daemons" : "--aggregators");
	f->m = calloc(n, sizeof(*f->m));
	if (!f->m)
		die(EXIT_BAD_ANSWER, "out of memory");
	f->n = 0;
	for (size_t i = 0; i < n; i++) {
		struct member *m = &f->m[f->n];
		bool seen = false;
		/* --aggregators' ports are control ports: every daemon is asked
		 * at --port, its [http] port; one row per address */
		if (!o->daemons)
			a[i].port = (uint16_t)o->port;
		for (size_t k = 0; k < i && !seen; k++)
			seen = !memcmp(&a[k], &a[i], sizeof(a[i]));
		if (seen)
			continue;
		f->n++;
		inet_ntop(a[i].family == 4 ? AF_INET : AF_INET6, a[i].addr, m->host, sizeof(m->host));
		agglist_text(&a[i], m->name, sizeof(m->name));
		m->o = *o;
		m->o.host = m->host;
		m->o.port = a[i].port;
	}
	free(a);
}

static void fleet_close(struct fleet *f)
{
	for (size_t i = 0; i < f->n; i++) {
		json_decref(f->m[i].stats);
		json_decref(f->m[i].prev);
	}
	free(f->m);
	f->m = NULL;
	f->n = 0;
}

/* Every daemon's /stats; the previous sample kept for rates. */
static void fleet_sample(struct fleet *f)
{
	for (size_t i = 0; i < f->n; i++) {
		struct member *m = &f->m[i];
		struct body b = { 0 };
		json_error_t je;
		long st;

		json_decref(m->prev);
		m->prev = m->stats;
		m->prev_t = m->t;
		m->stats = NULL;
		http_target(&m->o);
		st = http_try("GET", "/stats", &b, NULL, 0, m->why, sizeof(m->why));
		m->t = sc_now_s();
		if (st == 200) {
			m->stats = json_loadb(b.p, b.len, 0, &je);
			if (!m->stats || !json_is_object(m->stats) ||
			    !json_is_array(json_object_get(m->stats, "jobs"))) {
				snprintf(m->why, sizeof(m->why), "GET /stats: not sumcastd's /stats: %s", je.text);
				json_decref(m->stats);
				m->stats = NULL;
			}
		} else if (st > 0) {
			snprintf(m->why, sizeof(m->why), "GET /stats: HTTP %ld", st);
		}
		free(b.p);
		m->up = m->stats != NULL;
		if (!m->up) {
			json_decref(m->prev);
			m->prev = NULL;
		}
	}
}

static size_t fleet_down(const struct fleet *f)
{
	size_t k = 0;

	for (size_t i = 0; i < f->n; i++)
		k += !f->m[i].up;
	return k;
}

/* A rate of field between m's two samples, or the average since its start
 * without a previous one. */
static double member_rate(const struct member *m, const char *field)
{
	if (m->prev) {
		double dt = jnum(m->stats, "uptime_seconds") - jnum(m->prev, "uptime_seconds");
		if (!(dt > 0))
			dt = m->t - m->prev_t;
		return dt > 0 ? (jnum(m->stats, field) - jnum(m->prev, field)) / dt : 0;
	}
	double up = jnum(m->stats, "uptime_seconds");
	return up > 0 ? jnum(m->stats, field) / up : 0;
}

/* ---- status: one row per daemon ---- */

/* The ranks joined on a daemon, over its jobs. */
static double member_ranks(const struct member *m)
{
	double ranks = 0;
	json_t *j;
	size_t k;

	json_array_foreach(json_object_get(m->stats, "jobs"), k, j)
		ranks += jnum(j, "joined");
	return ranks;
}

static json_t *daemons_json(const struct fleet *f)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < f->n; i++) {
		const struct member *m = &f->m[i];
		json_t *d = json_object();
		json_object_set_new(d, "endpoint", json_string(m->name));
		json_object_set_new(d, "up", json_boolean(m->up));
		if (!m->up) {
			json_object_set_new(d, "error", json_string(m->why));
			json_array_append_new(arr, d);
			continue;
		}
		const json_t *st = m->stats;
		double ranks = member_ranks(m);
		json_object_set_new(d, "version", json_string(jstr(st, "version")));
		json_object_set_new(d, "provider", json_string(jstr(st, "provider")));
		json_object_set_new(d, "draining", json_boolean(json_is_true(json_object_get(st, "draining"))));
		json_object_set_new(d, "uptime_seconds", jval(jnum(st, "uptime_seconds")));
		json_object_set_new(d, "jobs", json_integer((json_int_t)json_array_size(json_object_get(st, "jobs"))));
		json_object_set_new(d, "ranks", jval(ranks));
		json_object_set_new(d, "memory_used_bytes", jval(jnum(st, "memory_used")));
		json_object_set_new(d, "memory_budget_bytes", jval(jnum(st, "memory_budget")));
		json_object_set_new(d, "received_bytes_per_second", json_real(member_rate(m, "received_bytes")));
		json_object_set_new(d, "sent_bytes_per_second", json_real(member_rate(m, "sent_bytes")));
		json_object_set_new(d, "chunks_per_second", json_real(member_rate(m, "chunks")));
		json_array_append_new(arr, d);
	}
	return arr;
}

static void daemons_print(const struct fleet *f)
{
	printf("%-22s %-9s %-8s %-4s %-5s %-19s %-11s %-11s %s\n", "DAEMON", "STATE", "VERSION",
	       "JOBS", "RANKS", "MEMORY", "IN/s", "OUT/s", "UPTIME");
	for (size_t i = 0; i < f->n; i++) {
		const struct member *m = &f->m[i];
		char a[32], b[32], c[32], d[32], e[32], mem[48];
		if (!m->up) {
			printf("%-22s %-9s %s\n", m->name, "DOWN", m->why);
			continue;
		}
		const json_t *st = m->stats;
		double ranks = member_ranks(m);
		snprintf(mem, sizeof(mem), "%s/%s", fmt_bytes(jnum(st, "memory_used"), a, sizeof(a)),
			 fmt_bytes(jnum(st, "memory_budget"), b, sizeof(b)));
		printf("%-22s %-9s %-8s %-4zu %-5.0f %-19s %-11s %-11s %s\n", m->name,
		       json_is_true(json_object_get(st, "draining")) ? "draining" : "ok", jstr(st, "version"),
		       json_array_size(json_object_get(st, "jobs")), ranks, mem,
		       fmt_si(member_rate(m, "received_bytes"), "B/s", c, sizeof(c)),
		       fmt_si(member_rate(m, "sent_bytes"), "B/s", d, sizeof(d)),
		       fmt_uptime(jnum(st, "uptime_seconds"), e, sizeof(e)));
	}
}

/* ---- jobs: one row per job id, then its aggregators ---- */

struct fjob {
	const char *id, *label;
	double nranks, joined_min, bytes_in, bytes_out, chunks, rate_in, rate_out;
	size_t naggs;
	bool mixed;        /* its aggregators do not all say the same state */
	const char *state; /* the first aggregator's */
	double *last, *wait; /* per rank, summed over aggregators */
	size_t nr;
	long slowest;
	double share, mean_wait;
};

static const json_t *job_in(const json_t *stats, const char *id)
{
	json_t *j;
	size_t i;

	if (!stats)
		return NULL;
	json_array_foreach(json_object_get(stats, "jobs"), i, j)
		if (!strcmp(jstr(j, "id"), id))
			return j;
	return NULL;
}

static double job_rate(const struct member *m, const json_t *j, const char *field)
{
	const json_t *p = m->prev ? job_in(m->prev, jstr(j, "id")) : NULL;
	double dt = m->t - m->prev_t;

	if (!m->prev || !(dt > 0))
		return NAN;
	return p ? (jnum(j, field) - jnum(p, field)) / dt : 0;
}

/* The jobs of every daemon that answered, joined by id, in the order met. */
static struct fjob *jobs_gather(const struct fleet *f, size_t *nout)
{
	struct fjob *v = NULL;
	size_t n = 0, cap = 0;

	for (size_t i = 0; i < f->n; i++) {
		const struct member *m = &f->m[i];
		json_t *j;
		size_t k;
		if (!m->up)
			continue;
		json_array_foreach(json_object_get(m->stats, "jobs"), k, j) {
			const char *id = jstr(j, "id");
			struct fjob *fj = NULL;
			for (size_t x = 0; x < n && !fj; x++)
				if (!strcmp(v[x].id, id))
					fj = &v[x];
			if (!fj) {
				if (n == cap) {
					cap = cap ? 2 * cap : 16;
					v = realloc(v, cap * sizeof(*v));
					if (!v)
						die(EXIT_BAD_ANSWER, "out of memory");
				}
				fj = &v[n++];
				memset(fj, 0, sizeof(*fj));
				fj->id = id;
				fj->label = "";
				fj->state = jstr(j, "state");
				fj->nranks = jnum(j, "nranks");
				fj->joined_min = INFINITY;
				fj->slowest = -1;
				fj->nr = fj->nranks > 0 && fj->nranks < 1e6 ? (size_t)fj->nranks : 0;
				fj->last = calloc(fj->nr + 1, sizeof(double));
				fj->wait = calloc(fj->nr + 1, sizeof(double));
				fj->rate_in = fj->rate_out = m->prev ? 0 : NAN;
			}
			if (!fj->label[0] && json_is_string(json_object_get(j, "label")))
				fj->label = jstr(j, "label");
			fj->naggs++;
			fj->mixed |= strcmp(fj->state, jstr(j, "state")) != 0;
			if (jnum(j, "joined") < fj->joined_min)
				fj->joined_min = jnum(j, "joined");
			fj->bytes_in += jnum(j, "bytes_in");
			fj->bytes_out += jnum(j, "bytes_out");
			fj->chunks += jnum(j, "chunks");
			if (m->prev) {
				double ri = job_rate(m, j, "bytes_in"), ro = job_rate(m, j, "bytes_out");
				fj->rate_in += isnan(ri) ? 0 : ri;
				fj->rate_out += isnan(ro) ? 0 : ro;
			}
			json_t *r;
			size_t q;
			json_array_foreach(json_object_get(j, "ranks"), q, r) {
				double rk = jnum(r, "rank"), c = jnum(r, "last_count");
				if (isnan(rk) || rk < 0 || (size_t)rk >= fj->nr || isnan(c))
					continue;
				fj->last[(size_t)rk] += c;
				fj->wait[(size_t)rk] += jnum(r, "last_wait_seconds_total");
			}
		}
	}
	for (size_t x = 0; x < n; x++) {
		struct fjob *fj = &v[x];
		double best = 0, total = 0;
		for (size_t r = 0; r < fj->nr; r++) {
			total += fj->last[r];
			if (fj->last[r] > best) {
				best = fj->last[r];
				fj->slowest = (long)r;
			}
		}
		fj->share = fj->slowest >= 0 && total > 0 ? best / total : NAN;
		fj->mean_wait = fj->slowest >= 0 ? fj->wait[fj->slowest] / best : NAN;
	}
	*nout = n;
	return v;
}

static void fleet_jobs_free(struct fjob *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].last);
		free(v[i].wait);
	}
	free(v);
}

static json_t *jobs_fleet_json(const struct fleet *f)
{
	size_t n;
	struct fjob *v = jobs_gather(f, &n);
	json_t *arr = json_array();

	for (size_t x = 0; x < n; x++) {
		const struct fjob *fj = &v[x];
		json_t *o = json_object(), *aggs = json_array();
		json_object_set_new(o, "id", json_string(fj->id));
		json_object_set_new(o, "label", json_string(fj->label));
		json_object_set_new(o, "state", json_string(fj->mixed ? "mixed" : fj->state));
		json_object_set_new(o, "nranks", jval(fj->nranks));
		json_object_set_new(o, "joined", jval(fj->joined_min));
		json_object_set_new(o, "received_bytes", jval(fj->bytes_in));
		json_object_set_new(o, "sent_bytes", jval(fj->bytes_out));
		json_object_set_new(o, "chunks", jval(fj->chunks));
		if (!isnan(fj->rate_in)) {
			json_object_set_new(o, "received_bytes_per_second", jval(fj->rate_in));
			json_object_set_new(o, "sent_bytes_per_second", jval(fj->rate_out));
		}
		if (fj->slowest >= 0)
			json_object_set_new(o, "slowest_rank",
					    json_pack("{s:I, s:o, s:o}", "rank", (json_int_t)fj->slowest,
						      "last_share", jval(fj->share), "mean_wait_seconds",
						      jval(fj->mean_wait)));
		else
			json_object_set_new(o, "slowest_rank", json_null());
		for (size_t i = 0; i < f->n; i++) {
			const struct member *m = &f->m[i];
			const json_t *j = m->up ? job_in(m->stats, fj->id) : NULL;
			if (!j)
				continue;
			json_array_append_new(aggs, json_pack("{s:s, s:s, s:o, s:o, s:o, s:o}", "daemon",
							      m->name, "state", jstr(j, "state"), "joined",
							      jval(jnum(j, "joined")), "received_bytes",
							      jval(jnum(j, "bytes_in")), "sent_bytes",
							      jval(jnum(j, "bytes_out")), "chunks",
							      jval(jnum(j, "chunks"))));
		}
		json_object_set_new(o, "aggregators", aggs);
		json_array_append_new(arr, o);
	}
	fleet_jobs_free(v, n);
	return arr;
}

static void jobs_fleet_print(const struct fleet *f)
{
	size_t n;
	struct fjob *v = jobs_gather(f, &n);
	bool rates = n && !isnan(v[0].rate_in);

	if (!n)
		printf("no jobs on the %zu daemon(s) that answered\n", f->n - fleet_down(f));
	else
		printf("%-18s %-20s %-7s %-5s %-4s %-11s %-11s %-9s %-8s %-5s %s\n", "JOB", "LABEL",
		       "STATE", "RANKS", "AGGS", rates ? "IN/s" : "IN", rates ? "OUT/s" : "OUT", "CHUNKS",
		       "SLOWEST", "LAST", "MEAN WAIT");
	for (size_t x = 0; x < n; x++) {
		const struct fjob *fj = &v[x];
		char a[32], b[32], c[32], ranks[32], slow[32], share[16], aggs[16];
		snprintf(ranks, sizeof(ranks), "%.0f/%.0f", fj->joined_min, fj->nranks);
		snprintf(aggs, sizeof(aggs), "%zu", fj->naggs);
		snprintf(slow, sizeof(slow), fj->slowest >= 0 ? "rank %ld" : "-", fj->slowest);
		snprintf(share, sizeof(share), fj->slowest >= 0 ? "%.0f%%" : "-", fj->share * 100);
		printf("%-18s %-20.20s %-7s %-5s %-4s %-11s %-11s %-9.0f %-8s %-5s %s\n", fj->id,
		       fj->label[0] ? fj->label : "-", fj->mixed ? "mixed" : fj->state, ranks, aggs,
		       rates ? fmt_si(fj->rate_in, "B/s", a, sizeof(a)) : fmt_si(fj->bytes_in, "B", a, sizeof(a)),
		       rates ? fmt_si(fj->rate_out, "B/s", b, sizeof(b)) : fmt_si(fj->bytes_out, "B", b, sizeof(b)),
		       fj->chunks, slow, share, fmt_secs(fj->mean_wait, c, sizeof(c)));
		for (size_t i = 0; i < f->n; i++) {
			const struct member *m = &f->m[i];
			const json_t *j = m->up ? job_in(m->stats, fj->id) : NULL;
			if (!j)
				continue;
			double ri = rates ? job_rate(m, j, "bytes_in") : NAN;
			double ro = rates ? job_rate(m, j, "bytes_out") : NAN;
			snprintf(ranks, sizeof(ranks), "%.0f/%.0f", jnum(j, "joined"), jnum(j, "nranks"));
			printf("  on %-35s %-7s %-5s %-4s %-11s %-11s %-9.0f\n", m->name, jstr(j, "state"),
			       ranks, "",
			       rates ? fmt_si(isnan(ri) ? 0 : ri, "B/s", a, sizeof(a))
				     : fmt_si(jnum(j, "bytes_in"), "B", a, sizeof(a)),
			       rates ? fmt_si(isnan(ro) ? 0 : ro, "B/s", b, sizeof(b))
				     : fmt_si(jnum(j, "bytes_out"), "B", b, sizeof(b)),
			       jnum(j, "chunks"));
		}
	}
	for (size_t i = 0; i < f->n; i++)
		if (!f->m[i].up)
			printf("%-18s %s DOWN: %s\n", "-", f->m[i].name, f->m[i].why);
	fleet_jobs_free(v, n);
}

/* ---- the commands ---- */

static int fleet_exit(const struct fleet *f)
{
	size_t down = fleet_down(f);

	if (down)
		fprintf(stderr, "sumcastctl: %zu of %zu daemons did not answer\n", down, f->n);
	return down ? EXIT_UNREACHABLE : 0;
}

int fleet_status(const struct opts *o)
{
	struct fleet f;
	int rc;

	fleet_open(o, &f);
	if (o->interval_s > 0) {
		fleet_sample(&f);
		sleep_s(o->interval_s);
	}
	fleet_sample(&f);
	if (o->json) {
		json_t *j = json_pack("{s:o}", "daemons", daemons_json(&f));
		json_print(j);
		json_decref(j);
	} else {
		daemons_print(&f);
	}
	rc = fleet_exit(&f);
	fleet_close(&f);
	return rc;
}

int fleet_jobs(const struct opts *o)
{
	struct fleet f;
	int rc;

	fleet_open(o, &f);
	fleet_sample(&f);
	if (o->json) {
		json_t *j = json_pack("{s:o, s:o}", "daemons", daemons_json(&f), "jobs", jobs_fleet_json(&f));
		json_print(j);
		json_decref(j);
	} else {
		jobs_fleet_print(&f);
	}
	rc = fleet_exit(&f);
	fleet_close(&f);
	return rc;
}

static void on_signal(int sig)
{
	(void)sig;
	quit_flag = 1;
}

int fleet_top(const struct opts *o)
{
	struct sigaction sa = { 0 };
	struct fleet f;
	double every = o->interval_s > 0 ? o->interval_s : 1;
	int rc = 0;

	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	fleet_open(o, &f);
	fleet_sample(&f); /* a baseline, so frame 1 has rates */
	for (long it = 0; !quit_flag && (!o->iterations || it < o->iterations); it++) {
		sleep_s(every);
		if (quit_flag)
			break;
		fleet_sample(&f);
		if (o->json) {
			json_t *j = json_pack("{s:o, s:o}", "daemons", daemons_json(&f), "jobs",
					      jobs_fleet_json(&f));
			json_print_line(j);
			json_decref(j);
		} else {
			char ts[32];
			if (it)
				fputs("\n", stdout);
			printf("sumcastctl top - %s - %zu daemons, every %.1f s\n", fmt_clock(ts, sizeof(ts)), f.n,
			       every);
			daemons_print(&f);
			printf("\n");
			jobs_fleet_print(&f);
		}
		fflush(stdout);
		rc = fleet_down(&f) ? EXIT_UNREACHABLE : rc;
	}
	if (rc)
		fprintf(stderr, "sumcastctl: a daemon did not answer in at least one frame\n");
	fleet_close(&f);
	return rc;
}
