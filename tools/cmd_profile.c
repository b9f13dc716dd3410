/* sumcastctl profile: what a job's collectives were, from the plugin's
 * SUMCAST_TRACE files (docs/plugin.md, "Trace"; plugin/collnet_trace.c):
 * one JSON line per request in <prefix>.<job id>.<rank>.jsonl, one file
 * per node and communicator. No daemon is asked.
 *
 *   sumcastctl profile [--json] [--png FILE] [--job ID] PATH...
 *
 * PATH: a directory (its *.jsonl files), a trace file, or a prefix as given
 * to SUMCAST_TRACE (the files <prefix>.*.jsonl). Rows are grouped by their
 * job; per job: calls and bytes per collective and size class (powers of
 * 4), the share of bytes through the aggregators, the achieved rate per
 * path, faults (epochs, repaired bytes) and split changes over time, each
 * node's time in its calls and the node that spent the longest. Times over
 * a run are relative to each node's first request (start_ns is
 * CLOCK_MONOTONIC: comparable between the nodes of one host only).
 *
 * A line that is not a trace row is skipped and counted; no row at all is
 * an error (exit 1), as are a path that does not exist and a --png that
 * could not be drawn (the report is printed first). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../plugin/split.h"
#include "sumcastctl.h"
#include "profile.h"

/* ---- one job's profile ---- */

static int size_class(uint64_t b)
{
	int k = 0;
	while (b >= 4 && k < PROF_NCLASS - 1) {
		b /= 4;
		k++;
	}
	return k;
}

static const char *class_label(int k, char *buf, size_t len)
{
	char lo[24], hi[24];
	fmt_bytes(ldexp(1, 2 * k), lo, sizeof(lo));
	fmt_bytes(ldexp(1, 2 * k + 2), hi, sizeof(hi));
	snprintf(buf, len, "%s-%s", lo, hi);
	return buf;
}

/* Sums of one group of rows (a class, a bucket, a node). */
struct agg {
	uint64_t rows, bytes, agg_bytes, ring_bytes, redone, errors, late; /* late: epoch > 0 */
	double time_us, agg_us, ring_us, split_sum;
	uint64_t ar_rows; /* allreduce rows (flat or tree), ar_split their splits */
	double ar_split;
	uint32_t epoch_max;
};

static void agg_add(struct agg *a, const struct row *r)
{
	a->rows++;
	a->bytes += r->bytes;
	a->agg_bytes += r->agg_bytes;
	a->redone += r->redone;
	a->errors += !r->ok;
	a->late += r->epoch > 0;
	a->time_us += r->time_us;
	a->split_sum += r->split;
	if (r->coll == C_ALLREDUCE || r->coll == C_TREE) {
		a->ar_rows++;
		a->ar_split += r->split;
	}
	if (r->epoch > a->epoch_max)
		a->epoch_max = r->epoch;
	if (r->ok && !isnan(r->agg_us) && r->agg_bytes)
		a->agg_us += r->agg_us;
	if (r->ok && !isnan(r->ring_us) && r->bytes > r->agg_bytes) {
		a->ring_us += r->ring_us;
		a->ring_bytes += r->bytes - r->agg_bytes;
	}
}

/* Bytes per second of a path: its bytes over the time its requests took on
 * it (each request from issue until the path finished), NAN without any. */
static double rate(uint64_t bytes, double us)
{
	return us > 0 ? bytes / (us * 1e-6) : NAN;
}

static double share(const struct agg *a)
{
	return a->bytes ? (double)a->agg_bytes / a->bytes : NAN;
}

static json_t *agg_json(const struct agg *a, unsigned nodes)
{
	json_t *j = json_object();
	json_object_set_new(j, "rows", json_integer((json_int_t)a->rows));
	json_object_set_new(j, "bytes", jval((double)a->bytes));
	if (nodes) {
		json_object_set_new(j, "calls_per_node", jval((double)a->rows / nodes));
		json_object_set_new(j, "bytes_per_node", jval((double)a->bytes / nodes));
	}
	json_object_set_new(j, "agg_bytes", jval((double)a->agg_bytes));
	json_object_set_new(j, "agg_share", jval(share(a)));
	json_object_set_new(j, "split_mean", jval(a->rows ? round(a->split_sum / a->rows * 1e4) / 1e4 : NAN));
	json_object_set_new(j, "rate_Bps", jval(round(rate(a->bytes, a->time_us))));
	json_object_set_new(j, "agg_rate_Bps", jval(round(rate(a->agg_bytes, a->agg_us))));
	json_object_set_new(j, "ring_rate_Bps", jval(round(rate(a->ring_bytes, a->ring_us))));
	json_object_set_new(j, "errors", json_integer((json_int_t)a->errors));
	json_object_set_new(j, "redone_bytes", jval((double)a->redone));
	json_object_set_new(j, "epoch_max", json_integer(a->epoch_max));
	json_object_set_new(j, "rows_after_fault", json_integer((json_int_t)a->late));
	return j;
}

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct node {
	struct agg a;
	uint64_t t0, t_end; /* first start, last end (ns, its own clock) */
	double median_us;
	uint32_t epoch_changes, split_changes;
	bool seen;
};

struct change {
	double t_s;
	uint32_t seq, rank;
	double from, to; /* split; epoch numbers for an epoch change */
	uint64_t bytes;
};

struct prof {
	struct job *j;
	struct agg total, cls[C_N][PROF_NCLASS], bucket[PROF_BUCKETS];
	struct node *node;
	unsigned nodes, ref;    /* nodes with rows; the node whose changes are listed */
	uint64_t calls_min, calls_max;
	double span_s;          /* the longest node's run */
	struct change *splits, *epochs;
	size_t nsplits, nepochs;
	int slow_total, slow_median;
};

static void add_change(struct change **v, size_t *n, struct change c)
{
	*v = realloc(*v, (*n + 1) * sizeof(**v));
	if (!*v)
		die(EXIT_BAD_ANSWER, "out of memory");
	(*v)[(*n)++] = c;
}

static void profile_build(struct job *j, struct prof *p)
{
	double *t = malloc((j->n ? j->n : 1) * sizeof(*t));

	memset(p, 0, sizeof(*p));
	p->j = j;
	p->node = calloc(j->nranks, sizeof(*p->node));
	if (!t || !p->node)
		die(EXIT_BAD_ANSWER, "out of memory");
	qsort(j->r, j->n, sizeof(*j->r), cmp_row);
	p->slow_total = p->slow_median = -1;
	p->ref = UINT32_MAX;
	/* per node: its span, its time in calls, its median call */
	for (size_t i = 0, s = 0; i <= j->n; i++) {
		if (i < j->n && j->r[i].rank == j->r[s].rank)
			continue;
		struct node *nd = &p->node[j->r[s].rank];
		/* the split adapts per class (plugin/split.h): a change is a
		 * class's split moving; an epoch change a higher epoch than any
		 * before (requests issued before the fault may finish after) */
		double prev_split[SPLIT_ADAPT_CLASSES];
		uint32_t prev_epoch = 0;
		for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++)
			prev_split[c] = NAN;
		nd->seen = true;
		nd->t0 = j->r[s].start_ns;
		if (p->ref == UINT32_MAX)
			p->ref = j->r[s].rank; /* the lowest rank traced */
		for (size_t k = s; k < i; k++) {
			const struct row *r = &j->r[k];
			uint64_t end = r->start_ns + (uint64_t)(r->time_us * 1e3);
			double ts = (r->start_ns - nd->t0) * 1e-9;
			agg_add(&nd->a, r);
			t[k - s] = r->time_us;
			if (end > nd->t_end)
				nd->t_end = end;
			if (r->epoch > prev_epoch) {
				nd->epoch_changes++;
				if (j->r[s].rank == p->ref)
					add_change(&p->epochs, &p->nepochs,
						   (struct change){ ts, r->seq, r->rank, prev_epoch, r->epoch,
								    r->bytes });
				prev_epoch = r->epoch;
			}
			int sc = r->adaptive && r->coll == C_ALLREDUCE ? split_adapt_class(r->bytes) : -1;
			if (sc >= 0 && sc < (int)SPLIT_ADAPT_CLASSES) {
				if (!isnan(prev_split[sc]) && fabs(r->split - prev_split[sc]) >= 1e-4) {
					nd->split_changes++;
					if (j->r[s].rank == p->ref)
						add_change(&p->splits, &p->nsplits,
							   (struct change){ ts, r->seq, r->rank, prev_split[sc],
									    r->split, r->bytes });
				}
				prev_split[sc] = r->split;
			}
		}
		qsort(t, i - s, sizeof(*t), cmp_dbl);
		nd->median_us = (i - s) % 2 ? t[(i - s) / 2] : (t[(i - s) / 2 - 1] + t[(i - s) / 2]) / 2;
		if ((nd->t_end - nd->t0) * 1e-9 > p->span_s)
			p->span_s = (nd->t_end - nd->t0) * 1e-9;
		p->nodes++;
		if (!p->calls_min || nd->a.rows < p->calls_min)
			p->calls_min = nd->a.rows;
		if (nd->a.rows > p->calls_max)
			p->calls_max = nd->a.rows;
		if (p->slow_total < 0 || nd->a.time_us > p->node[p->slow_total].a.time_us)
			p->slow_total = (int)j->r[s].rank;
		if (p->slow_median < 0 || nd->median_us > p->node[p->slow_median].median_us)
			p->slow_median = (int)j->r[s].rank;
		s = i;
	}
	free(t);
	/* per class, per interval of the run */
	for (size_t i = 0; i < j->n; i++) {
		const struct row *r = &j->r[i];
		double ts = (r->start_ns - p->node[r->rank].t0) * 1e-9;
		int b = p->span_s > 0 ? (int)(ts / p->span_s * PROF_BUCKETS) : 0;
		agg_add(&p->total, r);
		agg_add(&p->cls[r->coll][size_class(r->bytes)], r);
		agg_add(&p->bucket[b < PROF_BUCKETS ? b : PROF_BUCKETS - 1], r);
	}
}

static void profile_free(struct prof *p)
{
	free(p->node);
	free(p->splits);
	free(p->epochs);
}

static json_t *change_json(const struct change *c, size_t n, bool epoch)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *obj = json_object();
		json_object_set_new(obj, "t_s", json_real(round(c[i].t_s * 1e6) / 1e6));
		json_object_set_new(obj, "seq", json_integer(c[i].seq));
		json_object_set_new(obj, "bytes", jval((double)c[i].bytes));
		json_object_set_new(obj, "from", epoch ? json_integer((json_int_t)c[i].from) : json_real(c[i].from));
		json_object_set_new(obj, "to", epoch ? json_integer((json_int_t)c[i].to) : json_real(c[i].to));
		json_array_append_new(a, obj);
	}
	return a;
}

static json_t *profile_json(const struct prof *p)
{
	json_t *j = json_object(), *a;
	char lbl[64];

	json_object_set_new(j, "job", json_string(p->j->id));
	json_object_set_new(j, "nranks", json_integer(p->j->nranks));
	json_object_set_new(j, "nranks_min", json_integer(p->j->nranks_min));
	json_object_set_new(j, "nodes_traced", json_integer(p->nodes));
	json_object_set_new(j, "calls_per_node_min", json_integer((json_int_t)p->calls_min));
	json_object_set_new(j, "calls_per_node_max", json_integer((json_int_t)p->calls_max));
	json_object_set_new(j, "span_s", json_real(round(p->span_s * 1e6) / 1e6));
	json_object_set_new(j, "total", agg_json(&p->total, p->nodes));
	a = json_array();
	for (int c = 0; c < C_N; c++)
		for (int k = 0; k < PROF_NCLASS; k++) {
			if (!p->cls[c][k].rows)
				continue;
			json_t *obj = agg_json(&p->cls[c][k], p->nodes);
			json_object_set_new(obj, "coll", json_string(coll_name[c]));
			json_object_set_new(obj, "size_min", jval(ldexp(1, 2 * k)));
			json_object_set_new(obj, "size_class", json_string(class_label(k, lbl, sizeof(lbl))));
			json_array_append_new(a, obj);
		}
	json_object_set_new(j, "classes", a);
	a = json_array();
	for (unsigned r = 0; r < p->j->nranks; r++) {
		const struct node *nd = &p->node[r];
		if (!nd->seen)
			continue;
		json_t *obj = agg_json(&nd->a, 0);
		json_object_set_new(obj, "rank", json_integer(r));
		json_object_set_new(obj, "time_s", json_real(round(nd->a.time_us) / 1e6));
		json_object_set_new(obj, "median_us", json_real(round(nd->median_us * 10) / 10));
		json_object_set_new(obj, "span_s", json_real(round((nd->t_end - nd->t0) * 1e-3) / 1e6));
		json_object_set_new(obj, "epoch_changes", json_integer(nd->epoch_changes));
		json_object_set_new(obj, "split_changes", json_integer(nd->split_changes));
		json_array_append_new(a, obj);
	}
	json_object_set_new(j, "nodes", a);
	json_object_set_new(j, "slowest_rank_total", json_integer(p->slow_total));
	json_object_set_new(j, "slowest_rank_median", json_integer(p->slow_median));
	json_object_set_new(j, "changes_of_rank", json_integer(p->ref));
	json_object_set_new(j, "epoch_changes", change_json(p->epochs, p->nepochs, true));
	json_object_set_new(j, "split_changes", change_json(p->splits, p->nsplits, false));
	a = json_array();
	for (int b = 0; b < PROF_BUCKETS; b++) {
		const struct agg *g = &p->bucket[b];
		if (!g->rows)
			continue;
		json_t *obj = agg_json(g, 0);
		json_object_set_new(obj, "t_s", json_real(round(p->span_s * b / PROF_BUCKETS * 1e6) / 1e6));
		json_object_set_new(obj, "allreduce_split_mean",
				    jval(g->ar_rows ? round(g->ar_split / g->ar_rows * 1e4) / 1e4 : NAN));
		json_array_append_new(a, obj);
	}
	json_object_set_new(j, "over_time", a);
	return j;
}

static const char *rate_s(double v, char *buf, size_t len)
{
	return isnan(v) ? snprintf(buf, len, "-"), buf : fmt_si(v, "B/s", buf, len);
}

static void profile_print(const struct prof *p)
{
	char b1[32], b2[32], b3[32], b4[32], lbl[64];
	const struct agg *T = &p->total;

	printf("job %s: %u of %u nodes traced, %" PRIu64 " calls per node", p->j->id, p->nodes,
	       p->j->nranks, p->calls_max);
	if (p->calls_min != p->calls_max)
		printf(" (from %" PRIu64 ": the nodes' traces disagree)", p->calls_min);
	if (p->j->nranks_min != p->j->nranks)
		printf(" (rows say nranks %u to %u: several communicators of one job id?)", p->j->nranks_min,
		       p->j->nranks);
	printf(", %s per node in %s\n", fmt_bytes((double)T->bytes / p->nodes, b1, sizeof(b1)),
	       fmt_secs(p->span_s, b2, sizeof(b2)));
	printf("through the aggregators %.1f%% of the bytes; rate %s, aggregators %s, ring %s\n",
	       100 * share(T), rate_s(rate(T->bytes, T->time_us), b1, sizeof(b1)),
	       rate_s(rate(T->agg_bytes, T->agg_us), b2, sizeof(b2)),
	       rate_s(rate(T->ring_bytes, T->ring_us), b3, sizeof(b3)));
	printf("\n%-13s %-15s %8s %11s %6s %6s %13s %13s %13s %9s\n", "COLLECTIVE", "SIZE", "CALLS",
	       "BYTES", "AGG%", "SPLIT", "RATE", "AGG RATE", "RING RATE", "MEDIAN");
	for (int c = 0; c < C_N; c++)
		for (int k = 0; k < PROF_NCLASS; k++) {
			const struct agg *g = &p->cls[c][k];
			char rb[24], ab[24], gb[24];
			if (!g->rows)
				continue;
			printf("%-13s %-15s %8.0f %11s %5.1f%% %6.3f %13s %13s %13s %9s\n", coll_name[c],
			       class_label(k, lbl, sizeof(lbl)), (double)g->rows / p->nodes,
			       fmt_bytes((double)g->bytes / p->nodes, b1, sizeof(b1)), 100 * share(g),
			       g->split_sum / g->rows, rate_s(rate(g->bytes, g->time_us), rb, sizeof(rb)),
			       rate_s(rate(g->agg_bytes, g->agg_us), ab, sizeof(ab)),
			       rate_s(rate(g->ring_bytes, g->ring_us), gb, sizeof(gb)),
			       fmt_secs(g->time_us / g->rows * 1e-6, b4, sizeof(b4)));
		}
	printf("(calls and bytes per node; rates: bytes over the time the requests took on the path)\n");

	printf("\nfaults: epoch %u at the end, %" PRIu64 " rows in an epoch after 0, %s repaired, "
	       "%" PRIu64 " failed requests\n",
	       T->epoch_max, T->late, fmt_bytes((double)T->redone, b1, sizeof(b1)), T->errors);
	for (size_t i = 0; i < p->nepochs; i++)
		printf("  rank %u at %s: epoch %.0f -> %.0f from request %u\n", p->epochs[i].rank,
		       fmt_secs(p->epochs[i].t_s, b1, sizeof(b1)), p->epochs[i].from, p->epochs[i].to,
		       p->epochs[i].seq);
	printf("split changes (adaptive): %zu on rank %u", p->nsplits, p->ref);
	for (size_t i = 0; i < p->nsplits && i < PROF_SHOW_CHANGES; i++)
		printf("%s%s: %.3f -> %.3f (%s)", i ? ", " : "\n  ", fmt_secs(p->splits[i].t_s, b1, sizeof(b1)),
		       p->splits[i].from, p->splits[i].to, fmt_bytes((double)p->splits[i].bytes, b2, sizeof(b2)));
	if (p->nsplits > PROF_SHOW_CHANGES)
		printf(", ... (--json lists all)");
	printf("\n\n%-6s %8s %11s %10s %10s %7s %7s\n", "RANK", "CALLS", "BYTES", "IN CALLS", "MEDIAN",
	       "EPOCHS", "SPLITS");
	unsigned shown = 0;
	for (unsigned r = 0; r < p->j->nranks; r++) {
		const struct node *nd = &p->node[r];
		if (!nd->seen || (p->nodes > PROF_SHOW_RANKS && (int)r != p->slow_total &&
				  (int)r != p->slow_median && shown >= PROF_SHOW_RANKS - 2))
			continue;
		shown++;
		printf("%-6u %8" PRIu64 " %11s %10s %10s %7u %7u\n", r, nd->a.rows,
		       fmt_bytes((double)nd->a.bytes, b1, sizeof(b1)), fmt_secs(nd->a.time_us * 1e-6, b2, sizeof(b2)),
		       fmt_secs(nd->median_us * 1e-6, b3, sizeof(b3)), nd->epoch_changes, nd->split_changes);
	}
	if (shown < p->nodes)
		printf("(%u more nodes: --json lists all)\n", p->nodes - shown);
	printf("slowest node: rank %d in total (%s in calls), rank %d at the median (%s)\n", p->slow_total,
	       fmt_secs(p->node[p->slow_total].a.time_us * 1e-6, b1, sizeof(b1)), p->slow_median,
	       fmt_secs(p->node[p->slow_median].median_us * 1e-6, b2, sizeof(b2)));
}

/* --png: rates per path and the split over the run, through gnuplot. */
static int profile_png(const struct prof *p, const char *png)
{
	char data[] = "/tmp/sumcastctl-profile-XXXXXX";
	int fd = mkstemp(data), rc;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL, *g;

	if (!f) {
		fprintf(stderr, "sumcastctl: profile --png: a temporary file: %s\n", strerror(errno));
		return EXIT_BAD_ANSWER;
	}
	fprintf(f, "# t_s rate_GBps agg_GBps ring_GBps split_mean agg_share epoch_max\n");
	for (int b = 0; b < PROF_BUCKETS; b++) {
		const struct agg *a = &p->bucket[b];
		if (!a->rows)
			continue;
		double r = rate(a->bytes, a->time_us), ra = rate(a->agg_bytes, a->agg_us),
		       rr = rate(a->ring_bytes, a->ring_us);
		/* a path without bytes in the interval: "nan", a gap in its line */
		fprintf(f, "%.6f %.6f %.6f %.6f %.4f %.4f %u\n", p->span_s * (b + 0.5) / PROF_BUCKETS,
			r / 1e9, ra / 1e9, rr / 1e9, a->ar_rows ? a->ar_split / a->ar_rows : NAN, share(a),
			a->epoch_max);
	}
	fclose(f);
	/* Without gnuplot the shell exits at once, and writing the script to
	 * it would kill this process by SIGPIPE: ignored here, the write fails
	 * and pclose tells why. */
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	sigaction(SIGPIPE, &ign, &old);
	g = popen("gnuplot 2>&1", "w");
	if (!g) {
		sigaction(SIGPIPE, &old, NULL);
		unlink(data);
		fprintf(stderr, "sumcastctl: profile --png: cannot run gnuplot: %s\n", strerror(errno));
		return EXIT_BAD_ANSWER;
	}
	fprintf(g,
		"if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		"  set terminal pngcairo size 900,700 font 'sans,10'\n"
		"} else { set terminal png size 900,700 }\n"
		"set output '%s'\n"
		"set datafile missing 'nan'\n"
		"set multiplot layout 2,1 title 'job %s: %u nodes, %" PRIu64 " calls per node'\n"
		"set grid\nset key top right\nset xrange [0:%g]\n"
		"set ylabel 'GB/s (bytes / time on the path)'\nset yrange [0:*]\n"
		"plot '%s' u 1:2 w lp t 'all', '' u 1:3 w lp t 'aggregators', '' u 1:4 w lp t 'ring'\n"
		"set xlabel 'seconds since each node''s first request'\n"
		"set ylabel 'share to the aggregators'\nset yrange [0:1.05]\n"
		"set y2label 'failover epoch'\nset y2range [0:%u]\nset y2tics 1\n"
		"plot '%s' u 1:5 w lp t 'split decided (allreduce)', '' u 1:6 w lp t 'bytes through them',"
		" '' u 1:7 axes x1y2 w steps lw 2 t 'epoch'\n"
		"unset multiplot\n",
		png, p->j->id, p->nodes, p->calls_max, p->span_s > 0 ? p->span_s : 1, data,
		p->total.epoch_max + 1, data);
	rc = pclose(g);
	sigaction(SIGPIPE, &old, NULL);
	unlink(data);
	if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc)) {
		fprintf(stderr, "sumcastctl: profile --png: %s; no picture written\n",
			rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 127
				? "gnuplot is not on PATH (scripts/deps.sh installs it)"
				: "gnuplot failed (its message above)");
		return EXIT_BAD_ANSWER;
	}
	return 0;
}

static void profile_usage(FILE *out)
{
	fprintf(out,
		"Usage: sumcastctl profile [--json] [--png FILE] [--job ID] PATH...\n"
		"A job's collectives from its SUMCAST_TRACE files (every node's): calls and bytes per\n"
		"collective and size class, the share through the aggregators, rates per path,\n"
		"faults and split changes over time, each node's time in calls, the slowest node.\n"
		"PATH: a directory (its *.jsonl), a trace file, or the SUMCAST_TRACE prefix.\n"
		"  --json      one JSON object: the files, rows, skipped lines and every job's profile\n"
		"  --png FILE  rates per path and the split over the run, drawn by gnuplot\n"
		"              (one job: with several, name it with --job)\n"
		"  --job ID    only this job (as in the trace: 0x...)\n"
		"Lines that are not trace rows are skipped and counted. Exit: 0 ok; 1 no rows, a path\n"
		"that cannot be read, or no picture; 64 usage.\n");
}

int cmd_profile(const struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "png", required_argument, NULL, 'P' },
		{ "job", required_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *png = NULL, *only = NULL;
	int opt, rc = 0;
	bool json = o->json;
	json_t *jobs;

	optind = 0; /* a fresh scan: options after the paths too */
	while ((opt = getopt_long(argc, argv, "jh", lo, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json = true;
			break;
		case 'P':
			png = optarg;
			break;
		case 'J':
			only = optarg;
			break;
		case 'h':
			profile_usage(stdout);
			return 0;
		default:
			profile_usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "sumcastctl profile: no PATH\n");
		profile_usage(stderr);
		return EXIT_USAGE;
	}
	if (png && strpbrk(png, "'\n\\")) {
		fprintf(stderr, "sumcastctl profile: --png %s: a name without quotes, backslashes or newlines\n",
			png);
		return EXIT_USAGE;
	}
	prof_read_paths(argv + optind, (size_t)(argc - optind));
	if (P.skipped)
		fprintf(stderr, "sumcastctl profile: skipped %zu line(s) that are not trace rows (first: %s)\n",
			P.skipped, P.first_skip);
	if (!P.rows)
		die(EXIT_BAD_ANSWER, "profile: no trace rows in %zu file(s)", P.files);
	if (only) {
		size_t k;
		for (k = 0; k < P.n && strcmp(P.j[k].id, only); k++)
			;
		if (k == P.n)
			die(EXIT_BAD_ANSWER, "profile: no job %s in the traces (%zu job(s) there)", only, P.n);
		P.j[0] = P.j[k];
		P.n = 1;
	}
	if (png && P.n > 1) {
		fprintf(stderr, "sumcastctl profile: --png draws one job; the traces hold %zu:", P.n);
		for (size_t k = 0; k < P.n; k++)
			fprintf(stderr, " %s", P.j[k].id);
		fprintf(stderr, " (pick one with --job)\n");
		return EXIT_USAGE;
	}
	jobs = json_array();
	for (size_t k = 0; k < P.n; k++) {
		struct prof p;
		profile_build(&P.j[k], &p);
		if (json)
			json_array_append_new(jobs, profile_json(&p));
		else {
			if (k)
				printf("\n");
			profile_print(&p);
		}
		if (png && !rc)
			rc = profile_png(&p, png);
		profile_free(&p);
	}
	if (json) {
		json_t *all = json_object();
		json_object_set_new(all, "files", json_integer((json_int_t)P.files));
		json_object_set_new(all, "rows", json_integer((json_int_t)P.rows));
		json_object_set_new(all, "skipped_lines", json_integer((json_int_t)P.skipped));
		json_object_set_new(all, "first_skipped", P.skipped ? json_string(P.first_skip) : json_null());
		json_object_set_new(all, "jobs", jobs);
		json_print(all);
		json_decref(all);
	} else {
		json_decref(jobs);
	}
	return rc;
}
