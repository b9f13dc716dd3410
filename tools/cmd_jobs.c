/* sumcastctl jobs: per job its ranks, chunk, window, memory, bytes, chunks,
 * and the rank most often last (the straggler) with its mean wait. Also the
 * job table of top. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sumcastctl.h"

/* Derived view of one job in /stats. */
struct job_view {
	const char *id, *label, *state; /* label: "" when the job has none */
	double nranks, joined, window, weight, chunk, memory, thread, bytes_in, bytes_out, chunks;
	long slowest;   /* rank most often last, -1 if none yet */
	double last_share; /* how often it was last, of chunks with a last rank */
	double mean_wait;  /* its mean wait (first to last contribution), seconds */
};

static void job_view(const json_t *j, struct job_view *v)
{
	json_t *ranks = json_object_get(j, "ranks"), *r;
	double best = 0, total = 0;
	size_t i;

	v->id = jstr(j, "id");
	v->label = json_is_string(json_object_get(j, "label")) ? jstr(j, "label") : "";
	v->state = jstr(j, "state");
	v->nranks = jnum(j, "nranks");
	v->joined = jnum(j, "joined");
	v->window = jnum(j, "window");
	v->weight = jnum(j, "weight");
	v->chunk = jnum(j, "chunk");
	v->memory = jnum(j, "memory");
	v->thread = jnum(j, "thread");
	v->bytes_in = jnum(j, "bytes_in");
	v->bytes_out = jnum(j, "bytes_out");
	v->chunks = jnum(j, "chunks");
	v->slowest = -1;
	v->last_share = NAN;
	v->mean_wait = NAN;
	json_array_foreach(ranks, i, r) {
		double c = jnum(r, "last_count");
		if (isnan(c))
			continue;
		total += c;
		if (c > best) {
			best = c;
			v->slowest = (long)jnum(r, "rank");
			v->mean_wait = jnum(r, "last_wait_seconds_total") / c;
		}
	}
	if (v->slowest >= 0 && total > 0)
		v->last_share = best / total;
}

static json_t *job_view_json(const json_t *j, const struct job_view *v, double rate_in,
			     double rate_out)
{
	json_t *out = json_object();

	json_object_set_new(out, "id", json_string(v->id));
	json_object_set_new(out, "label", json_string(v->label));
	json_object_set_new(out, "state", json_string(v->state));
	json_object_set_new(out, "nranks", jval(v->nranks));
	json_object_set_new(out, "joined", jval(v->joined));
	json_object_set_new(out, "window", jval(v->window));
	json_object_set_new(out, "weight", jval(v->weight));
	json_object_set_new(out, "chunk_bytes", jval(v->chunk));
	json_object_set_new(out, "memory_bytes", jval(v->memory));
	json_object_set_new(out, "thread", jval(v->thread));
	json_object_set_new(out, "received_bytes", jval(v->bytes_in));
	json_object_set_new(out, "sent_bytes", jval(v->bytes_out));
	json_object_set_new(out, "chunks", jval(v->chunks));
	if (!isnan(rate_in)) {
		json_object_set_new(out, "received_bytes_per_second", jval(rate_in));
		json_object_set_new(out, "sent_bytes_per_second", jval(rate_out));
	}
	if (v->slowest >= 0) {
		json_t *s = json_object();
		json_object_set_new(s, "rank", json_integer(v->slowest));
		json_object_set_new(s, "last_share", jval(v->last_share));
		json_object_set_new(s, "mean_wait_seconds", jval(v->mean_wait));
		json_object_set_new(out, "slowest_rank", s);
	} else {
		json_object_set_new(out, "slowest_rank", json_null());
	}
	json_object_set(out, "ranks", json_object_get(j, "ranks"));
	return out;
}

static const json_t *job_find(const json_t *stats, const char *id)
{
	json_t *jobs = json_object_get(stats, "jobs"), *j;
	size_t i;

	if (!stats)
		return NULL;
	json_array_foreach(jobs, i, j)
		if (!strcmp(jstr(j, "id"), id))
			return j;
	return NULL;
}

void jobs_print(const json_t *stats, const json_t *prev, double dt)
{
	json_t *jobs = json_object_get(stats, "jobs"), *j;
	size_t i;
	char a[32], b[32], c[32], d[32], e[32];

	if (!json_array_size(jobs)) {
		printf("no jobs\n");
		return;
	}
	printf("%-18s %-20s %-7s %-5s %-3s %-9s %-4s %-9s %-11s %-11s %-9s %-8s %-5s %s\n", "JOB",
	       "LABEL", "STATE", "RANKS", "THR", "CHUNK", "WIN", "MEMORY", prev ? "IN/s" : "IN",
	       prev ? "OUT/s" : "OUT", "CHUNKS", "SLOWEST", "LAST", "MEAN WAIT");
	json_array_foreach(jobs, i, j) {
		struct job_view v;
		const json_t *pj;
		char ranks[48], slow[32], share[16];
		job_view(j, &v);
		pj = prev ? job_find(prev, v.id) : NULL;
		snprintf(ranks, sizeof(ranks), "%.0f/%.0f", v.joined, v.nranks);
		snprintf(slow, sizeof(slow), v.slowest >= 0 ? "rank %ld" : "-", v.slowest);
		snprintf(share, sizeof(share), v.slowest >= 0 ? "%.0f%%" : "-", v.last_share * 100);
		if (prev) {
			double in = pj ? (v.bytes_in - jnum(pj, "bytes_in")) / dt : 0;
			double out = pj ? (v.bytes_out - jnum(pj, "bytes_out")) / dt : 0;
			fmt_si(in, "B/s", c, sizeof(c));
			fmt_si(out, "B/s", d, sizeof(d));
		} else {
			fmt_si(v.bytes_in, "B", c, sizeof(c));
			fmt_si(v.bytes_out, "B", d, sizeof(d));
		}
		printf("%-18s %-20.20s %-7s %-5s %-3.0f %-9s %-4.0f %-9s %-11s %-11s %-9.0f %-8s %-5s %s\n",
		       v.id, v.label[0] ? v.label : "-", v.state, ranks, v.thread, fmt_bytes(v.chunk, a, sizeof(a)), v.window,
		       fmt_bytes(v.memory, b, sizeof(b)), c, d, v.chunks, slow, share,
		       fmt_secs(v.mean_wait, e, sizeof(e)));
	}
}

json_t *jobs_json(const json_t *stats, const json_t *prev, double dt)
{
	json_t *arr = json_array(), *j;
	size_t i;

	json_array_foreach(json_object_get(stats, "jobs"), i, j) {
		struct job_view v;
		const json_t *pj;
		double in = NAN, out = NAN;
		job_view(j, &v);
		if (prev) {
			pj = job_find(prev, v.id);
			in = pj ? (v.bytes_in - jnum(pj, "bytes_in")) / dt : 0;
			out = pj ? (v.bytes_out - jnum(pj, "bytes_out")) / dt : 0;
		}
		json_array_append_new(arr, job_view_json(j, &v, in, out));
	}
	return arr;
}

int cmd_jobs(const struct opts *o)
{
	json_t *s = get_json("/stats");

	if (o->json) {
		json_t *j = jobs_json(s, NULL, 0);
		json_print(j);
		json_decref(j);
	} else {
		jobs_print(s, NULL, 0);
	}
	json_decref(s);
	return 0;
}
