/* sumcastctl status: health, version, provider, threads, uptime, jobs,
 * ranks, memory, throughput (sampled over --interval), reduce time,
 * straggler wait, errors. Also the head of top. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "sumcastctl.h"

void status_collect(struct status_view *s, const json_t *prev, double prev_t)
{
	struct body b = { 0 };
	double t;

	s->health_code = http_get("/healthz", &b, NULL, 0);
	snprintf(s->health, sizeof(s->health), "%.*s", (int)strcspn(b.p, "\r\n"), b.p);
	free(b.p);
	s->stats = get_json("/stats");
	t = sc_now_s();
	metrics_fetch(&s->m);
	s->ranks = metric_sum(&s->m, "sumcast_ranks");
	if (isnan(s->ranks)) {
		json_t *j;
		size_t i;
		s->ranks = 0;
		json_array_foreach(json_object_get(s->stats, "jobs"), i, j)
			s->ranks += jnum(j, "joined");
	}
	if (prev) {
		double dt = jnum(s->stats, "uptime_seconds") - jnum(prev, "uptime_seconds");
		if (!(dt > 0))
			dt = t - prev_t;
		s->rate_window = dt;
		s->rate_in = (jnum(s->stats, "received_bytes") - jnum(prev, "received_bytes")) / dt;
		s->rate_out = (jnum(s->stats, "sent_bytes") - jnum(prev, "sent_bytes")) / dt;
		s->rate_chunks = (jnum(s->stats, "chunks") - jnum(prev, "chunks")) / dt;
	} else {
		double up = jnum(s->stats, "uptime_seconds");
		s->rate_window = 0;
		s->rate_in = up > 0 ? jnum(s->stats, "received_bytes") / up : 0;
		s->rate_out = up > 0 ? jnum(s->stats, "sent_bytes") / up : 0;
		s->rate_chunks = up > 0 ? jnum(s->stats, "chunks") / up : 0;
	}
}

void status_free(struct status_view *s)
{
	json_decref(s->stats);
	free(s->m.s);
	s->stats = NULL;
	s->m.s = NULL;
}

/* Live jobs that were sent DRAIN (moving off), and all live jobs. */
static void drain_jobs(const json_t *st, unsigned *moving, unsigned *live)
{
	json_t *j;
	size_t i;

	*moving = *live = 0;
	json_array_foreach(json_object_get(st, "jobs"), i, j) {
		if (!strcmp(jstr(j, "state"), "ending"))
			continue;
		(*live)++;
		*moving += json_is_true(json_object_get(j, "draining"));
	}
}

static json_t *errors_json(const struct metrics *m, double *total)
{
	json_t *by = json_object();

	*total = 0;
	for (size_t i = 0; i < m->n; i++) {
		const char *k;
		if (strcmp(m->s[i].name, "sumcast_errors_total") || !(k = strstr(m->s[i].labels, "kind=\"")))
			continue;
		char kind[64];
		snprintf(kind, sizeof(kind), "%.*s", (int)strcspn(k + 6, "\""), k + 6);
		json_object_set_new(by, kind, json_integer((json_int_t)m->s[i].v));
		*total += m->s[i].v;
	}
	return by;
}

json_t *status_json(const struct opts *o, const struct status_view *s)
{
	const json_t *st = s->stats;
	double etotal;
	json_t *by = errors_json(&s->m, &etotal);
	json_t *out = json_object(), *rate = json_object();
	json_t *red = json_object(), *str = json_object();
	double v;

	json_object_set_new(out, "endpoint", json_string(o->host));
	json_object_set_new(out, "port", json_integer(o->port));
	json_object_set_new(out, "health", json_string(s->health));
	json_object_set_new(out, "version", json_string(jstr(st, "version")));
	json_object_set_new(out, "provider", json_string(jstr(st, "provider")));
	json_object_set_new(out, "isa", json_string(jstr(st, "isa")));
	json_object_set_new(out, "threads", jval(jnum(st, "threads")));
	json_object_set_new(out, "uptime_seconds", jval(jnum(st, "uptime_seconds")));
	json_object_set_new(out, "draining", json_boolean(json_is_true(json_object_get(st, "draining"))));
	if (json_is_true(json_object_get(st, "draining"))) {
		unsigned moving, live;
		drain_jobs(st, &moving, &live);
		json_object_set_new(out, "drain", json_pack("{s:f, s:f, s:I, s:I}", "seconds",
							    jnum(st, "drain_seconds"), "timeout_seconds",
							    jnum(st, "drain_timeout_ms") / 1000.0,
							    "jobs_moving_off", (json_int_t)moving,
							    "jobs_left", (json_int_t)live));
	}
	json_object_set_new(out, "jobs_drained", jval(metric_sum(&s->m, "sumcast_jobs_drained_total")));
	json_object_set_new(out, "jobs_rejoined", jval(metric_sum(&s->m, "sumcast_jobs_rejoined_total")));
	json_object_set_new(out, "jobs", json_integer((json_int_t)json_array_size(json_object_get(st, "jobs"))));
	json_object_set_new(out, "ranks", jval(s->ranks));
	json_object_set_new(out, "memory_used_bytes", jval(jnum(st, "memory_used")));
	json_object_set_new(out, "memory_budget_bytes", jval(jnum(st, "memory_budget")));
	json_object_set_new(out, "received_bytes", jval(jnum(st, "received_bytes")));
	json_object_set_new(out, "sent_bytes", jval(jnum(st, "sent_bytes")));
	json_object_set_new(out, "chunks", jval(jnum(st, "chunks")));
	json_object_set_new(rate, "interval_seconds", json_real(s->rate_window));
	json_object_set_new(rate, "method", json_string(s->rate_window > 0 ? "sampled" : "average since start"));
	json_object_set_new(rate, "received_bytes_per_second", json_real(s->rate_in));
	json_object_set_new(rate, "sent_bytes_per_second", json_real(s->rate_out));
	json_object_set_new(rate, "chunks_per_second", json_real(s->rate_chunks));
	json_object_set_new(out, "rate", rate);
	if (!isnan(v = hist_quantile(&s->m, "sumcast_reduce_duration_seconds", 0.5)))
		json_object_set_new(red, "p50", json_real(v));
	if (!isnan(v = hist_quantile(&s->m, "sumcast_reduce_duration_seconds", 0.99)))
		json_object_set_new(red, "p99", json_real(v));
	if (!isnan(v = hist_quantile(&s->m, "sumcast_straggler_wait_seconds", 0.5)))
		json_object_set_new(str, "p50", json_real(v));
	if (!isnan(v = hist_quantile(&s->m, "sumcast_straggler_wait_seconds", 0.99)))
		json_object_set_new(str, "p99", json_real(v));
	json_object_set_new(out, "reduce_duration_seconds", red);
	json_object_set_new(out, "straggler_wait_seconds", str);
	json_object_set_new(out, "errors", json_pack("{s:I, s:o}", "total", (json_int_t)etotal,
						     "by_kind", by));
	return out;
}

void status_print(const struct opts *o, const struct status_view *s)
{
	const json_t *st = s->stats;
	char a[48], b[48], c[64];
	double etotal;
	json_t *by = errors_json(&s->m, &etotal);

	printf("sumcastd %s at %s:%u: %s%s\n", jstr(st, "version"), o->host, o->port, s->health,
	       s->health_code == 200 ? "" : " (HTTP 503)");
	printf("  %-12s %-22s reduce kernels %s\n", "provider", jstr(st, "provider"), jstr(st, "isa"));
	snprintf(c, sizeof(c), "%.0f", jnum(st, "threads"));
	printf("  %-12s %-22s uptime %s\n", "threads", c,
	       fmt_uptime(jnum(st, "uptime_seconds"), a, sizeof(a)));
	snprintf(c, sizeof(c), "%zu", json_array_size(json_object_get(st, "jobs")));
	printf("  %-12s %-22s ranks %.0f; since start %.0f joined again, %.0f drained\n", "jobs", c,
	       s->ranks, metric_sum(&s->m, "sumcast_jobs_rejoined_total"),
	       metric_sum(&s->m, "sumcast_jobs_drained_total"));
	if (json_is_true(json_object_get(st, "draining"))) {
		unsigned moving, live;
		drain_jobs(st, &moving, &live);
		printf("  %-12s for %.1f s of %.0f s: %u job(s) left, %u of them moving off (%.0f drained)\n",
		       "draining", jnum(st, "drain_seconds"), jnum(st, "drain_timeout_ms") / 1000.0, live,
		       moving, metric_sum(&s->m, "sumcast_jobs_drained_total"));
	}
	printf("  %-12s %s of %s\n", "memory", fmt_bytes(jnum(st, "memory_used"), a, sizeof(a)),
	       fmt_bytes(jnum(st, "memory_budget"), b, sizeof(b)));
	snprintf(c, sizeof(c), "in %s", fmt_si(s->rate_in, "B/s", a, sizeof(a)));
	printf("  %-12s %-22s out %s, %.0f chunks/s (%s)\n", "throughput", c,
	       fmt_si(s->rate_out, "B/s", b, sizeof(b)), s->rate_chunks,
	       s->rate_window > 0 ? (snprintf(a, sizeof(a), "over the last %.1f s", s->rate_window), a)
				  : "average since start");
	snprintf(c, sizeof(c), "in %s", fmt_si(jnum(st, "received_bytes"), "B", a, sizeof(a)));
	printf("  %-12s %-22s out %s, %.0f chunks\n", "total", c,
	       fmt_si(jnum(st, "sent_bytes"), "B", b, sizeof(b)), jnum(st, "chunks"));
	snprintf(c, sizeof(c), "p50 %s",
		 fmt_secs(hist_quantile(&s->m, "sumcast_reduce_duration_seconds", 0.5), a, sizeof(a)));
	printf("  %-12s %-22s p99 %s (per chunk, since start)\n", "reduce time", c,
	       fmt_secs(hist_quantile(&s->m, "sumcast_reduce_duration_seconds", 0.99), b, sizeof(b)));
	snprintf(c, sizeof(c), "p50 %s",
		 fmt_secs(hist_quantile(&s->m, "sumcast_straggler_wait_seconds", 0.5), a, sizeof(a)));
	printf("  %-12s %-22s p99 %s (first to last rank)\n", "straggler", c,
	       fmt_secs(hist_quantile(&s->m, "sumcast_straggler_wait_seconds", 0.99), b, sizeof(b)));
	printf("  %-12s %.0f", "errors", etotal);
	if (etotal > 0) {
		const char *k;
		json_t *v;
		bool first = true;
		printf(" (");
		json_object_foreach(by, k, v)
			if (json_integer_value(v)) {
				printf("%s%s %" JSON_INTEGER_FORMAT, first ? "" : ", ", k,
				       json_integer_value(v));
				first = false;
			}
		printf(")");
	}
	printf("\n");
	json_decref(by);
}

int cmd_status(const struct opts *o)
{
	struct status_view s = { 0 };
	json_t *prev = NULL;
	double t0 = 0;

	if (o->interval_s > 0) {
		prev = get_json("/stats");
		t0 = sc_now_s();
		sleep_s(o->interval_s);
	}
	status_collect(&s, prev, t0);
	if (o->json) {
		json_t *j = status_json(o, &s);
		json_print(j);
		json_decref(j);
	} else {
		status_print(o, &s);
	}
	json_decref(prev);
	status_free(&s);
	return 0;
}
