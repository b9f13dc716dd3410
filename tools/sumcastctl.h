/* sumcastctl's shared declarations: the options, the HTTP/JSON plumbing
 * (http.c), the Prometheus text (prom.c), the output helpers (format.c) and
 * the commands (cmd_<command>.c), which top reuses. */
#ifndef SUMCASTCTL_H
#define SUMCASTCTL_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXIT_BAD_ANSWER 1
#define EXIT_UNREACHABLE 2
#define EXIT_USAGE 64

/* ---- sumcastctl.c: options, the quit flag ---- */

struct opts {
	const char *host;
	unsigned port;
	bool json;
	long timeout_ms;
	double interval_s;
	long iterations; /* top: 0 = until q */
	/* the fleet view (fleet.c): several daemons' HTTP endpoints, or
	 * SUMCAST_AGGREGATORS' daemons at port; NULL: the one daemon above */
	const char *daemons, *aggregators;
};

extern volatile sig_atomic_t quit_flag; /* SIGINT/SIGTERM during top */

/* Sleeps s seconds, or until quit_flag is set. */
void sleep_s(double s);

/* ---- args.c: the command line's values, refused in the user's terms
 * (exit 64); cmd is the command for the message's prefix, or NULL ---- */

/* A whole number in [min, max]: "16.5" and "1e3" are refused. */
uint64_t arg_count(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max);
/* A real number from min (above it when min_open) to max, in unit. */
double arg_real(const char *cmd, const char *opt, const char *s, double min, bool min_open, double max,
		const char *unit);
/* A size (K, M, G, T: powers of 1024) in [min, max]. */
uint64_t arg_size(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max);
/* "a,b,c" copied into buf (len bytes) and cut into items[] (at most max);
 * an empty item ("128,,4", "4,") is refused. Returns the count. */
int arg_list(const char *cmd, const char *opt, const char *arg, char **items, int max, char *buf, size_t len);
/* --daemon URL: http://HOST:PORT, HOST:PORT or [V6]:PORT into o->host, o->port. */
void arg_daemon(struct opts *o, const char *cmd, const char *url);
/* A size as people write it: "1 byte", "64 KiB", "1048577 bytes". */
const char *arg_fmt_size(uint64_t v, char *buf, size_t len);

/* ---- format.c: output ---- */

/* "sumcastctl: <message>" on stderr, exit(code). */
void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* Bytes in binary units (memory, sizes). */
const char *fmt_bytes(double v, char *buf, size_t len);
/* Traffic in decimal units, as link speeds are quoted (GB/s = 10^9 B/s). */
const char *fmt_si(double v, const char *unit, char *buf, size_t len);
const char *fmt_secs(double s, char *buf, size_t len);
const char *fmt_uptime(double s, char *buf, size_t len);
/* Integral values as JSON integers (counts, bytes), others as reals. */
json_t *jval(double v);
/* Indented JSON on stdout. */
void json_print(json_t *j);
/* One compact line of JSON on stdout (a frame of top). */
void json_print_line(json_t *j);
/* The local time of day, HH:MM:SS (top's frame titles). */
const char *fmt_clock(char *buf, size_t len);

/* ---- http.c: HTTP and JSON ---- */

struct body {
	char *p;
	size_t len, cap;
};

/* libcurl set up / torn down, once per process. 0 or -1. The requests go to
 * daemon->host, port, within timeout_ms, as *daemon says at each request. */
int http_init(const struct opts *daemon);
void http_fini(void);
/* GET path into b. Returns the HTTP status; exits 2 when the daemon cannot be
 * reached or does not answer within the timeout. */
long http_get(const char *path, struct body *b, char *ctype, size_t ctype_len);
/* method ("GET" or "POST", an empty body) path into b. Returns the HTTP
 * status, or -1 with a sentence in why when the daemon cannot be reached or
 * does not answer within the timeout. */
long http_try(const char *method, const char *path, struct body *b, char *ctype, size_t ctype_len,
	      char *why, size_t why_len);
/* Later requests go to daemon->host, port (the fleet view's daemons). */
void http_target(const struct opts *daemon);
/* GET path as a JSON object; exits 1 on anything else. */
json_t *get_json(const char *path);
/* A number field (NAN if absent), a string field ("?" if absent). */
double jnum(const json_t *obj, const char *key);
const char *jstr(const json_t *obj, const char *key);

/* ---- prom.c: Prometheus text ---- */

struct sample {
	char name[128];
	char labels[256]; /* inside the braces, as written */
	double v;
};

struct metrics {
	struct sample *s;
	size_t n;
};

void metrics_parse(const char *text, struct metrics *m);
/* GET /metrics, parsed; exits 1 unless HTTP 200. */
void metrics_fetch(struct metrics *m);
/* Sum of every sample called name (all label sets); NAN if none. */
double metric_sum(const struct metrics *m, const char *name);
/* Quantile q of histogram name, interpolated inside the bucket as
 * Prometheus' histogram_quantile() does. NAN if it has no observations. */
double hist_quantile(const struct metrics *m, const char *name, double q);

/* ---- cmd_status.c ---- */

struct status_view {
	long health_code;
	char health[32];
	json_t *stats;
	struct metrics m;
	double rate_in, rate_out, rate_chunks, rate_window; /* rate_window 0: averages since start */
	double ranks;
};

/* /healthz, /stats, /metrics; rates against prev (taken at prev_t), or
 * averages since start without one. */
void status_collect(struct status_view *s, const json_t *prev, double prev_t);
void status_free(struct status_view *s);
json_t *status_json(const struct opts *o, const struct status_view *s);
void status_print(const struct opts *o, const struct status_view *s);
int cmd_status(const struct opts *o);

/* ---- cmd_jobs.c ---- */

/* The job table; with prev, rates over dt seconds instead of totals. */
void jobs_print(const json_t *stats, const json_t *prev, double dt);
json_t *jobs_json(const json_t *stats, const json_t *prev, double dt);
int cmd_jobs(const struct opts *o);

/* ---- fleet.c: status, jobs and top over several daemons; exit 2 when
 * any did not answer ---- */

int fleet_status(const struct opts *o);
int fleet_jobs(const struct opts *o);
int fleet_top(const struct opts *o);

/* ---- cmd_drain.c: argv[0] is "drain" ---- */

#define EXIT_STILL_DRAINING 3 /* drain --wait ran out while the daemon still answered */
int cmd_drain(struct opts *o, int argc, char **argv);

/* ---- cmd_top.c, cmd_config.c, cmd_metrics.c ---- */

int cmd_top(struct opts *o);
int cmd_config(const struct opts *o);
/* Exits 1 with a sentence when names are given and no family matches. */
int cmd_metrics(const struct opts *o, const char *prefix);

/* ---- cmd_plan.c: the sizing model (plan_model.h); argv[0] is "plan" ---- */

int cmd_plan(const struct opts *o, int argc, char **argv);

/* ---- cmd_profile.c: SUMCAST_TRACE files; argv[0] is "profile" ---- */

int cmd_profile(const struct opts *o, int argc, char **argv);

#endif
