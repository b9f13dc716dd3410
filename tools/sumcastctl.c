/* sumcastctl: what a sumcastd is doing, for people and scripts.
 *
 * Reads the daemon's HTTP endpoints (/healthz, /stats JSON, /metrics
 * Prometheus text, /config) with libcurl, every request bounded by a
 * connect and a total timeout, and prints tables (default) or JSON (--json).
 *
 * Exit codes: 0 ok; 1 the daemon answered something unexpected (bad JSON,
 * HTTP error); 2 the daemon is unreachable or did not answer in time;
 * 64 usage error. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define EXIT_BAD_ANSWER 1
#define EXIT_UNREACHABLE 2
#define EXIT_USAGE 64
#define BODY_MAX (16u << 20) /* a /stats with thousands of ranks fits */

struct opts {
	const char *host;
	unsigned port;
	bool json;
	long timeout_ms;
	double interval_s;
	long iterations; /* top: 0 = until q */
};

static struct opts o = { "127.0.0.1", 7801, false, 3000, 1.0, 0 };
static CURL *curl;
static volatile sig_atomic_t quit_flag;

/* ---- output helpers ---- */

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("sumcastctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* Bytes in binary units (memory, sizes). */
static const char *fmt_bytes(double v, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;

	while (fabs(v) >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i && v != floor(v) ? "%.1f %s" : "%.0f %s", v, u[i]);
	return buf;
}

/* Traffic in decimal units, as link speeds are quoted (GB/s = 10^9 B/s). */
static const char *fmt_si(double v, const char *unit, char *buf, size_t len)
{
	static const char *const p[] = { "", "k", "M", "G", "T", "P" };
	int i = 0;

	while (fabs(v) >= 1000 && i < 5) {
		v /= 1000;
		i++;
	}
	snprintf(buf, len, i ? "%.2f %s%s" : "%.0f %s%s", v, p[i], unit);
	return buf;
}

static const char *fmt_secs(double s, char *buf, size_t len)
{
	if (isnan(s))
		snprintf(buf, len, "-");
	else if (s < 1e-3)
		snprintf(buf, len, "%.1f us", s * 1e6);
	else if (s < 1)
		snprintf(buf, len, "%.2f ms", s * 1e3);
	else
		snprintf(buf, len, "%.2f s", s);
	return buf;
}

static const char *fmt_uptime(double s, char *buf, size_t len)
{
	uint64_t t = (uint64_t)s;

	if (t >= 86400)
		snprintf(buf, len, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", t / 86400,
			 t % 86400 / 3600, t % 3600 / 60);
	else if (t >= 3600)
		snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", t / 3600,
			 t % 3600 / 60, t % 60);
	else
		snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", t / 60, t % 60);
	return buf;
}

/* Integral values as JSON integers (counts, bytes), others as reals. */
static json_t *jval(double v)
{
	if (isnan(v) || isinf(v))
		return json_null();
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		return json_integer((json_int_t)v);
	return json_real(v);
}

static void json_print(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
}

/* ---- HTTP ---- */

struct body {
	char *p;
	size_t len, cap;
};

static size_t body_write(char *data, size_t sz, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = sz * n;

	if (b->len + add + 1 > BODY_MAX)
		return 0; /* makes curl fail with CURLE_WRITE_ERROR */
	if (b->len + add + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 8192;
		while (cap < b->len + add + 1)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np)
			return 0;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, add);
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

/* GET path into b. Returns the HTTP status; exits 2 when the daemon cannot be
 * reached or does not answer within the timeout. */
static long http_get(const char *path, struct body *b, char *ctype, size_t ctype_len)
{
	char url[512];
	char err[CURL_ERROR_SIZE] = "";
	long status = 0;
	CURLcode rc;

	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
	snprintf(url, sizeof(url), "http://%s%s%s:%u%s", strchr(o.host, ':') ? "[" : "", o.host,
		 strchr(o.host, ':') ? "]" : "", o.port, path);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, body_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, err);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, o.timeout_ms);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, o.timeout_ms);
	curl_easy_setopt(curl, CURLOPT_NOPROXY, "*"); /* the stats port is never behind a proxy */
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "sumcastctl/" SUMCAST_VERSION);
	rc = curl_easy_perform(curl);
	if (rc != CURLE_OK)
		die(EXIT_UNREACHABLE, "cannot read %s: %s (is sumcastd running with [http] enabled on %s port %u?)",
		    url, *err ? err : curl_easy_strerror(rc), o.host, o.port);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (ctype) {
		char *ct = NULL;
		curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
		snprintf(ctype, ctype_len, "%s", ct ? ct : "");
	}
	if (!b->p)
		body_write((char *)"", 0, 0, b);
	return status;
}

static json_t *get_json(const char *path)
{
	struct body b = { 0 };
	json_error_t je;
	long st = http_get(path, &b, NULL, 0);
	json_t *j;

	if (st != 200)
		die(EXIT_BAD_ANSWER, "GET %s: HTTP %ld", path, st);
	j = json_loadb(b.p, b.len, 0, &je);
	free(b.p);
	if (!j || !json_is_object(j))
		die(EXIT_BAD_ANSWER, "GET %s: not a JSON object: %s (line %d)", path, je.text, je.line);
	return j;
}

/* ---- Prometheus text ---- */

struct sample {
	char name[128];
	char labels[256]; /* inside the braces, as written */
	double v;
};

struct metrics {
	struct sample *s;
	size_t n;
};

static void metrics_parse(const char *text, struct metrics *m)
{
	const char *p = text;

	m->s = NULL;
	m->n = 0;
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char line[1024];

		if (len && len < sizeof(line) && *p != '#') {
			struct sample s = { 0 };
			char *q, *val;
			memcpy(line, p, len);
			line[len] = '\0';
			q = line + strcspn(line, "{ ");
			if (*q == '{') {
				char *end = strchr(q, '}');
				if (end) {
					*q = '\0';
					*end = '\0';
					snprintf(s.labels, sizeof(s.labels), "%s", q + 1);
					val = end + 1;
				} else {
					val = NULL;
				}
			} else {
				*q = '\0';
				val = q + 1;
			}
			snprintf(s.name, sizeof(s.name), "%.127s", line);
			if (val) {
				char *endv;
				while (*val == ' ')
					val++;
				s.v = strtod(val, &endv);
				if (endv != val) {
					struct sample *ns = realloc(m->s, (m->n + 1) * sizeof(*ns));
					if (!ns)
						die(EXIT_BAD_ANSWER, "out of memory");
					m->s = ns;
					m->s[m->n++] = s;
				}
			}
		}
		p += len + (eol ? 1 : 0);
	}
}

static void metrics_fetch(struct metrics *m)
{
	struct body b = { 0 };
	long st = http_get("/metrics", &b, NULL, 0);

	if (st != 200)
		die(EXIT_BAD_ANSWER, "GET /metrics: HTTP %ld", st);
	metrics_parse(b.p, m);
	free(b.p);
}

/* Sum of every sample called name (all label sets); NAN if none. */
static double metric_sum(const struct metrics *m, const char *name)
{
	double v = 0;
	bool found = false;

	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->s[i].name, name)) {
			v += m->s[i].v;
			found = true;
		}
	return found ? v : NAN;
}

/* Quantile q of histogram name, interpolated inside the bucket as
 * Prometheus' histogram_quantile() does. NAN if it has no observations. */
static double hist_quantile(const struct metrics *m, const char *name, double q)
{
	char bname[160];
	double le[64], cum[64], prev_le = 0, prev_c = 0, rank;
	size_t n = 0;

	snprintf(bname, sizeof(bname), "%s_bucket", name);
	for (size_t i = 0; i < m->n && n < 64; i++) {
		const char *l;
		if (strcmp(m->s[i].name, bname) || !(l = strstr(m->s[i].labels, "le=\"")))
			continue;
		le[n] = strncmp(l + 4, "+Inf", 4) ? strtod(l + 4, NULL) : INFINITY;
		cum[n++] = m->s[i].v;
	}
	if (!n || cum[n - 1] <= 0)
		return NAN;
	rank = q * cum[n - 1];
	for (size_t i = 0; i < n; i++) {
		if (cum[i] >= rank) {
			if (isinf(le[i]))
				return prev_le; /* highest finite bound, as Prometheus does */
			if (cum[i] == prev_c)
				return le[i];
			return prev_le + (le[i] - prev_le) * (rank - prev_c) / (cum[i] - prev_c);
		}
		prev_le = le[i];
		prev_c = cum[i];
	}
	return NAN;
}

/* ---- /stats helpers ---- */

static double jnum(const json_t *o_, const char *key)
{
	json_t *v = json_object_get(o_, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *jstr(const json_t *o_, const char *key)
{
	json_t *v = json_object_get(o_, key);
	return json_is_string(v) ? json_string_value(v) : "?";
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - floor(s)) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR && !quit_flag)
		;
}

/* Derived view of one job in /stats. */
struct job_view {
	const char *id, *state;
	double nranks, joined, window, chunk, memory, thread, bytes_in, bytes_out, chunks;
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
	v->state = jstr(j, "state");
	v->nranks = jnum(j, "nranks");
	v->joined = jnum(j, "joined");
	v->window = jnum(j, "window");
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
	json_object_set_new(out, "state", json_string(v->state));
	json_object_set_new(out, "nranks", jval(v->nranks));
	json_object_set_new(out, "joined", jval(v->joined));
	json_object_set_new(out, "window", jval(v->window));
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

/* ---- status ---- */

struct status_view {
	long health_code;
	char health[32];
	json_t *stats;
	struct metrics m;
	double rate_in, rate_out, rate_chunks, rate_window; /* rate_window 0: averages since start */
	double ranks;
};

static void status_collect(struct status_view *s, const json_t *prev, double prev_t)
{
	struct body b = { 0 };
	double t;

	s->health_code = http_get("/healthz", &b, NULL, 0);
	snprintf(s->health, sizeof(s->health), "%.*s", (int)strcspn(b.p, "\r\n"), b.p);
	free(b.p);
	s->stats = get_json("/stats");
	t = (sc_now_ns() / 1e9);
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

static void status_free(struct status_view *s)
{
	json_decref(s->stats);
	free(s->m.s);
	s->stats = NULL;
	s->m.s = NULL;
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

static json_t *status_json(const struct status_view *s)
{
	const json_t *st = s->stats;
	double etotal;
	json_t *by = errors_json(&s->m, &etotal);
	json_t *out = json_object(), *rate = json_object();
	json_t *red = json_object(), *str = json_object();
	double v;

	json_object_set_new(out, "endpoint", json_string(o.host));
	json_object_set_new(out, "port", json_integer(o.port));
	json_object_set_new(out, "health", json_string(s->health));
	json_object_set_new(out, "version", json_string(jstr(st, "version")));
	json_object_set_new(out, "provider", json_string(jstr(st, "provider")));
	json_object_set_new(out, "isa", json_string(jstr(st, "isa")));
	json_object_set_new(out, "threads", jval(jnum(st, "threads")));
	json_object_set_new(out, "uptime_seconds", jval(jnum(st, "uptime_seconds")));
	json_object_set_new(out, "draining", json_boolean(json_is_true(json_object_get(st, "draining"))));
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

static void status_print(const struct status_view *s)
{
	const json_t *st = s->stats;
	char a[48], b[48], c[64];
	double etotal;
	json_t *by = errors_json(&s->m, &etotal);

	printf("sumcastd %s at %s:%u: %s%s\n", jstr(st, "version"), o.host, o.port, s->health,
	       s->health_code == 200 ? "" : " (HTTP 503)");
	printf("  %-12s %-22s reduce kernels %s\n", "provider", jstr(st, "provider"), jstr(st, "isa"));
	snprintf(c, sizeof(c), "%.0f", jnum(st, "threads"));
	printf("  %-12s %-22s uptime %s\n", "threads", c,
	       fmt_uptime(jnum(st, "uptime_seconds"), a, sizeof(a)));
	snprintf(c, sizeof(c), "%zu", json_array_size(json_object_get(st, "jobs")));
	printf("  %-12s %-22s ranks %.0f\n", "jobs", c, s->ranks);
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

static int cmd_status(void)
{
	struct status_view s = { 0 };
	json_t *prev = NULL;
	double t0 = 0;

	if (o.interval_s > 0) {
		prev = get_json("/stats");
		t0 = (sc_now_ns() / 1e9);
		sleep_s(o.interval_s);
	}
	status_collect(&s, prev, t0);
	if (o.json) {
		json_t *j = status_json(&s);
		json_print(j);
		json_decref(j);
	} else {
		status_print(&s);
	}
	json_decref(prev);
	status_free(&s);
	return 0;
}

/* ---- jobs ---- */

static void jobs_print(const json_t *stats, const json_t *prev, double dt)
{
	json_t *jobs = json_object_get(stats, "jobs"), *j;
	size_t i;
	char a[32], b[32], c[32], d[32], e[32];

	if (!json_array_size(jobs)) {
		printf("no jobs\n");
		return;
	}
	printf("%-18s %-7s %-5s %-3s %-9s %-4s %-9s %-11s %-11s %-9s %-8s %-5s %s\n", "JOB",
	       "STATE", "RANKS", "THR", "CHUNK", "WIN", "MEMORY", prev ? "IN/s" : "IN",
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
		printf("%-18s %-7s %-5s %-3.0f %-9s %-4.0f %-9s %-11s %-11s %-9.0f %-8s %-5s %s\n", v.id,
		       v.state, ranks, v.thread, fmt_bytes(v.chunk, a, sizeof(a)), v.window,
		       fmt_bytes(v.memory, b, sizeof(b)), c, d, v.chunks, slow, share,
		       fmt_secs(v.mean_wait, e, sizeof(e)));
	}
}

static json_t *jobs_json(const json_t *stats, const json_t *prev, double dt)
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

static int cmd_jobs(void)
{
	json_t *s = get_json("/stats");

	if (o.json) {
		json_t *j = jobs_json(s, NULL, 0);
		json_print(j);
		json_decref(j);
	} else {
		jobs_print(s, NULL, 0);
	}
	json_decref(s);
	return 0;
}

/* ---- top ---- */

static struct termios tty_saved;
static bool tty_raw;

static void tty_restore(void)
{
	if (tty_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &tty_saved);
	tty_raw = false;
}

static void on_signal(int sig)
{
	(void)sig;
	quit_flag = 1;
}

/* Waits up to s seconds for 'q' on a terminal stdin; true if the user quit. */
static bool top_wait(double s)
{
	double end = (sc_now_ns() / 1e9) + s;

	while (!quit_flag) {
		double left = end - (sc_now_ns() / 1e9);
		if (left <= 0)
			return false;
		if (!tty_raw) {
			sleep_s(left);
			continue;
		}
		struct pollfd p = { STDIN_FILENO, POLLIN, 0 };
		if (poll(&p, 1, (int)(left * 1000) + 1) > 0) {
			char ch;
			if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q' || ch == 3))
				return true;
		}
	}
	return true;
}

static int cmd_top(void)
{
	struct sigaction sa = { 0 };
	bool clear = isatty(STDOUT_FILENO) && !o.json;
	json_t *prev = NULL;
	double prev_t = 0;

	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &tty_saved)) {
		struct termios t = tty_saved;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		if (!tcsetattr(STDIN_FILENO, TCSANOW, &t)) {
			tty_raw = true;
			atexit(tty_restore);
		}
	}
	if (o.interval_s <= 0)
		o.interval_s = 1;
	for (long it = 0; !quit_flag && (!o.iterations || it < o.iterations); it++) {
		struct status_view s = { 0 };
		if (!prev) {
			/* First frame: a baseline, so even frame 1 shows current rates. */
			prev = get_json("/stats");
			prev_t = (sc_now_ns() / 1e9);
			if (top_wait(o.interval_s))
				break;
		}
		status_collect(&s, prev, prev_t);
		if (o.json) {
			json_t *j = status_json(&s);
			json_object_set_new(j, "jobs_detail", jobs_json(s.stats, prev, s.rate_window));
			json_dumpf(j, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
			fputc('\n', stdout);
			json_decref(j);
		} else {
			time_t now = time(NULL);
			char ts[32];
			strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&now));
			if (clear)
				fputs("\033[H\033[2J", stdout);
			else if (it)
				fputs("\n", stdout);
			printf("sumcastctl top - %s - every %.1f s%s\n", ts, o.interval_s,
			       tty_raw ? ", q to quit" : "");
			status_print(&s);
			printf("\n");
			jobs_print(s.stats, prev, s.rate_window > 0 ? s.rate_window : 1);
		}
		fflush(stdout);
		json_decref(prev);
		prev = json_incref(s.stats);
		prev_t = (sc_now_ns() / 1e9);
		status_free(&s);
		if (o.iterations && it + 1 >= o.iterations)
			break;
		if (top_wait(o.interval_s))
			break;
	}
	json_decref(prev);
	tty_restore();
	return 0;
}

/* ---- config ---- */

static int cmd_config(void)
{
	struct body b = { 0 };
	char ctype[128];
	long st = http_get("/config", &b, ctype, sizeof(ctype));

	if (st == 200) {
		if (strstr(ctype, "json")) {
			json_error_t je;
			json_t *j = json_loadb(b.p, b.len, 0, &je);
			if (!j)
				die(EXIT_BAD_ANSWER, "GET /config: bad JSON: %s", je.text);
			if (o.json) {
				json_print(j);
			} else {
				/* {"settings":[{"section","key","value","default","source"}...]} */
				json_t *e, *arr = json_object_get(j, "settings");
				size_t i;
				const char *sec = "";
				json_array_foreach(arr, i, e) {
					if (strcmp(sec, jstr(e, "section")))
						printf("%s[%s]\n", i ? "\n" : "", sec = jstr(e, "section"));
					printf("%s = %s", jstr(e, "key"), jstr(e, "value"));
					if (json_object_get(e, "source") && strcmp(jstr(e, "source"), "default"))
						printf("    # from %s, default %s", jstr(e, "source"),
						       jstr(e, "default"));
					printf("\n");
				}
			}
			json_decref(j);
		} else if (o.json) {
			json_t *j = json_pack("{s:s, s:s}", "format", "ini", "text", b.p);
			json_print(j);
			json_decref(j);
		} else {
			fputs(b.p, stdout);
		}
		free(b.p);
		return 0;
	}
	free(b.p);
	if (st != 404)
		die(EXIT_BAD_ANSWER, "GET /config: HTTP %ld", st);
	/* Older daemon without /config: what /stats knows. */
	json_t *s = get_json("/stats");
	if (o.json) {
		json_t *j = json_pack("{s:s, s:s, s:o, s:o, s:o}", "source", "/stats (daemon has no /config)",
				      "fabric.provider", jstr(s, "provider"), "data.threads",
				      jval(jnum(s, "threads")), "job.memory-budget", jval(jnum(s, "memory_budget")),
				      "job.timeout_ms", jval(jnum(s, "timeout_ms")));
		json_print(j);
		json_decref(j);
	} else {
		char a[32];
		fprintf(stderr, "sumcastctl: this sumcastd has no /config endpoint; showing what /stats reports\n");
		printf("[fabric]\nprovider = %s\n\n[data]\nthreads = %.0f\n\n[job]\nmemory-budget = %s\n"
		       "timeout = %.0fms\n",
		       jstr(s, "provider"), jnum(s, "threads"),
		       fmt_bytes(jnum(s, "memory_budget"), a, sizeof(a)), jnum(s, "timeout_ms"));
	}
	json_decref(s);
	return 0;
}

/* ---- metrics ---- */

static int cmd_metrics(const char *prefix)
{
	struct body b = { 0 };
	long st = http_get("/metrics", &b, NULL, 0);

	if (st != 200)
		die(EXIT_BAD_ANSWER, "GET /metrics: HTTP %ld", st);
	if (o.json) {
		struct metrics m;
		json_t *arr = json_array();
		metrics_parse(b.p, &m);
		for (size_t i = 0; i < m.n; i++) {
			if (prefix && strncmp(m.s[i].name, prefix, strlen(prefix)))
				continue;
			json_t *labels = json_object();
			const char *p = m.s[i].labels;
			while (*p) { /* name="value",... (our values never hold quotes) */
				const char *eq = strchr(p, '='), *q1, *q2;
				if (!eq || eq[1] != '"' || !(q2 = strchr((q1 = eq + 2), '"')))
					break;
				char k[64], v[128];
				snprintf(k, sizeof(k), "%.*s", (int)(eq - p), p);
				snprintf(v, sizeof(v), "%.*s", (int)(q2 - q1), q1);
				json_object_set_new(labels, k, json_string(v));
				p = q2 + 1;
				if (*p == ',')
					p++;
			}
			json_array_append_new(arr, json_pack("{s:s, s:o, s:f}", "name", m.s[i].name,
							     "labels", labels, "value", m.s[i].v));
		}
		json_print(arr);
		json_decref(arr);
		free(m.s);
	} else if (prefix) {
		char *save, *line;
		for (line = strtok_r(b.p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			const char *name = line;
			if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7))
				name = line + 7;
			if (!strncmp(name, prefix, strlen(prefix)))
				puts(line);
		}
	} else {
		fputs(b.p, stdout);
	}
	free(b.p);
	return 0;
}

/* ---- main ---- */

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: sumcastctl [options] COMMAND\n"
		"Shows what a sumcastd aggregator is doing, from its HTTP endpoints.\n\n"
		"Commands:\n"
		"  status          version, provider, threads, uptime, jobs, ranks, throughput, reduce\n"
		"                  time, straggler wait, errors (throughput sampled over --interval)\n"
		"  jobs            per job: ranks, chunk, window, memory, bytes, chunks, and the rank\n"
		"                  most often last (the straggler) with its mean wait\n"
		"  top             status + jobs, refreshed every --interval; q or Ctrl-C quits\n"
		"  config          the daemon's effective configuration\n"
		"  metrics [PREFIX] the Prometheus text (only families starting with PREFIX)\n\n"
		"Options:\n"
		"  -H, --host H        daemon's HTTP address (default 127.0.0.1, env SUMCASTCTL_HOST)\n"
		"  -p, --port P        daemon's HTTP port ([http] port, default 7801, env SUMCASTCTL_PORT)\n"
		"  -j, --json          structured output (top: one JSON object per line)\n"
		"  -t, --timeout S     connect + read timeout per request, seconds (default 3)\n"
		"  -i, --interval S    sampling interval for rates and top (default 1; status: 0 =\n"
		"                      averages since start, no wait)\n"
		"  -n, --iterations N  top: stop after N frames\n"
		"  -V, --version       print the version\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 ok, 1 unexpected answer, 2 daemon unreachable or timed out, 64 usage.\n");
}

static double parse_num(const char *opt, const char *s, double min, double max)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= min && v <= max)) {
		fprintf(stderr, "sumcastctl: %s %s: expected a number in [%g, %g]\n", opt, s, min, max);
		exit(EXIT_USAGE);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd;
	int opt, rc;

	if (getenv("SUMCASTCTL_HOST") && *getenv("SUMCASTCTL_HOST"))
		o.host = getenv("SUMCASTCTL_HOST");
	if (getenv("SUMCASTCTL_PORT") && *getenv("SUMCASTCTL_PORT"))
		o.port = (unsigned)parse_num("SUMCASTCTL_PORT", getenv("SUMCASTCTL_PORT"), 1, 65535);
	while ((opt = getopt_long(argc, argv, "+H:p:jt:i:n:Vh", lo, NULL)) != -1) {
		switch (opt) {
		case 'H':
			o.host = optarg;
			break;
		case 'p':
			o.port = (unsigned)parse_num("--port", optarg, 1, 65535);
			break;
		case 'j':
			o.json = true;
			break;
		case 't':
			o.timeout_ms = (long)(parse_num("--timeout", optarg, 0.001, 3600) * 1000);
			break;
		case 'i':
			o.interval_s = parse_num("--interval", optarg, 0, 3600);
			break;
		case 'n':
			o.iterations = (long)parse_num("--iterations", optarg, 1, 1e9);
			break;
		case 'V':
			printf("sumcastctl %s\n", SUMCAST_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[optind++];
	if (argc - optind > (!strcmp(cmd, "metrics") ? 1 : 0)) {
		fprintf(stderr, "sumcastctl: unexpected argument %s\n", argv[argc - 1]);
		return EXIT_USAGE;
	}
	if (curl_global_init(CURL_GLOBAL_NOTHING) || !(curl = curl_easy_init()))
		die(EXIT_BAD_ANSWER, "libcurl initialisation failed");
	if (!strcmp(cmd, "status"))
		rc = cmd_status();
	else if (!strcmp(cmd, "jobs"))
		rc = cmd_jobs();
	else if (!strcmp(cmd, "top"))
		rc = cmd_top();
	else if (!strcmp(cmd, "config"))
		rc = cmd_config();
	else if (!strcmp(cmd, "metrics"))
		rc = cmd_metrics(optind < argc ? argv[optind++] : NULL);
	else {
		fprintf(stderr, "sumcastctl: unknown command %s\n", cmd);
		usage(stderr);
		rc = EXIT_USAGE;
	}
	curl_easy_cleanup(curl);
	curl_global_cleanup();
	return rc;
}
