/* sumcastctl: what a sumcastd is doing, for people and scripts.
 *
 * Reads the daemon's HTTP endpoints (/healthz, /stats JSON, /metrics
 * Prometheus text, /config) with libcurl, every request bounded by a
 * connect and a total timeout, and prints tables (default) or JSON (--json).
 *
 * Exit codes: 0 ok; 1 the daemon answered something unexpected (bad JSON,
 * HTTP error); 2 the daemon is unreachable or did not answer in time;
 * 64 usage error.
 *
 * This file: options, usage, the command table. The commands are
 * cmd_<command>.c; the shared plumbing http.c (HTTP, JSON), prom.c
 * (Prometheus text) and format.c (output); sumcastctl.h declares them. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sumcastctl.h"

volatile sig_atomic_t quit_flag;

void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - floor(s)) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR && !quit_flag)
		;
}

/* ---- main ---- */

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: sumcastctl [options] COMMAND [options]\n"
		"Shows what a sumcastd aggregator is doing, from its HTTP endpoints.\n\n"
		"Commands:\n"
		"  status          version, provider, threads, uptime, jobs, ranks, throughput, reduce\n"
		"                  time, straggler wait, errors (throughput sampled over --interval)\n"
		"  jobs            per job: ranks, chunk, window, memory, bytes, chunks, and the rank\n"
		"                  most often last (the straggler) with its mean wait\n"
		"  top             status + jobs, refreshed every --interval; q or Ctrl-C quits\n"
		"  config          the daemon's effective configuration (the ports it bound)\n"
		"  metrics [PREFIX] the Prometheus text (only families starting with PREFIX)\n"
		"  drain [--wait S] stop the daemon the way SIGTERM does: its jobs\n"
		"                  move off, then it exits (POST /drain; sumcastctl drain --help)\n"
		"  plan ...        sizing: aggregators, tree, split, memory and speed-up for a job, and\n"
		"                  whether the daemons admit it (asks no daemon; sumcastctl plan --help)\n"
		"  profile PATH... a job's collectives from its SUMCAST_TRACE files: calls, bytes,\n"
		"                  paths, rates, faults, split changes, the slowest node; --png FILE\n"
		"                  plots them (asks no daemon; sumcastctl profile --help)\n\n"
		"Every command answers COMMAND --help without asking a daemon.\n\n"
		"Options (before or after the command):\n"
		"      --daemon URL    the daemon's HTTP address: http://HOST:PORT, HOST:PORT, [V6]:PORT\n"
		"  -H, --host H        daemon's HTTP address (default 127.0.0.1, env SUMCASTCTL_HOST)\n"
		"  -p, --port P        daemon's HTTP port ([http] port, default 7801, env SUMCASTCTL_PORT)\n"
		"  -j, --json          structured output (top: one JSON object per line)\n"
		"  -t, --timeout S     connect + read timeout per request, seconds (default 3)\n"
		"  -i, --interval S    sampling interval for rates and top (default 1; status: 0 =\n"
		"                      averages since start, no wait)\n"
		"  -n, --iterations N  top: stop after N frames\n"
		"  -D, --daemons LIST  status, jobs, top: several daemons in one view, each a row (a\n"
		"                      daemon that does not answer too: exit 2). LIST: HTTP endpoints\n"
		"                      host:port,..., names (every address; port --port), srv:NAME,\n"
		"                      @FILE (docs/operations.md, \"A fleet in one view\")\n"
		"  -A, --aggregators LIST  the same from the plugin's SUMCAST_AGGREGATORS (control\n"
		"                      ports; each daemon asked at --port): -A \"$SUMCAST_AGGREGATORS\"\n"
		"  -V, --version       print the version\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 ok, 1 unexpected answer (metrics: no family starts with PREFIX;\n"
		"profile: unreadable or no traces), 2 daemon\n"
		"unreachable or timed out, 64 usage\n"
		"(drain: 3 when --wait ran out while it still drained).\n");
}

/* ---- options: the global ones go before or after the command ---- */

struct gopt {
	const char *name; /* --name */
	char letter;      /* -X, or 0 */
	bool arg;
};

static const struct gopt gopts[] = {
	{ "host", 'H', true },     { "port", 'p', true },      { "daemon", 0, true },
	{ "json", 'j', false },    { "timeout", 't', true },   { "interval", 'i', true },
	{ "iterations", 'n', true }, { "version", 'V', false },
	{ "daemons", 'D', true },  { "aggregators", 'A', true },
	{ NULL, 0, false },
};

static void gopt_apply(struct opts *o, const struct gopt *g, const char *v, const char *cmd)
{
	switch (g->letter ? g->letter : 'd') {
	case 'H':
		if (!*v) {
			fprintf(stderr, "sumcastctl: --host needs an address\n");
			exit(EXIT_USAGE);
		}
		o->host = v;
		break;
	case 'p':
		o->port = (unsigned)arg_count(cmd, "--port", v, 1, 65535);
		break;
	case 'd':
		arg_daemon(o, cmd, v);
		break;
	case 'j':
		o->json = true;
		break;
	case 't':
		o->timeout_ms = (long)(arg_real(cmd, "--timeout", v, 0.001, false, 3600, "seconds") * 1000);
		break;
	case 'i':
		o->interval_s = arg_real(cmd, "--interval", v, 0, false, 3600, "seconds");
		break;
	case 'n':
		o->iterations = (long)arg_count(cmd, "--iterations", v, 1, 1000000000);
		break;
	case 'D':
		o->daemons = v;
		break;
	case 'A':
		o->aggregators = v;
		break;
	case 'V':
		printf("sumcastctl %s\n", SUMCAST_VERSION);
		exit(0);
	}
}

/* If argv[i] is a global option, applies it and returns how many words it
 * took (1 or 2); 0 when it is not one. Long names are matched whole
 * (--json, --port=7801), short ones alone or with their value (-p7801). */
static int gopt_take(struct opts *o, int argc, char **argv, int i, const char *cmd)
{
	const char *a = argv[i];

	for (const struct gopt *g = gopts; g->name; g++) {
		const char *v = NULL;
		size_t n = strlen(g->name);
		if (a[0] == '-' && a[1] == '-' && !strncmp(a + 2, g->name, n) && (!a[2 + n] || a[2 + n] == '='))
			v = a[2 + n] == '=' ? a + 3 + n : NULL;
		else if (g->letter && a[0] == '-' && a[1] == g->letter && (!a[2] || g->arg))
			v = a[2] ? a + 2 : NULL;
		else
			continue;
		if (!g->arg) {
			if (v) {
				fprintf(stderr, "sumcastctl: --%s takes no value\n", g->name);
				exit(EXIT_USAGE);
			}
			gopt_apply(o, g, NULL, cmd);
			return 1;
		}
		if (v) {
			gopt_apply(o, g, v, cmd);
			return 1;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "sumcastctl: --%s needs a value\n", g->name);
			exit(EXIT_USAGE);
		}
		gopt_apply(o, g, argv[i + 1], cmd);
		return 2;
	}
	return 0;
}

/* ---- the commands ---- */

enum cmd_kind { CMD_DAEMON, CMD_OWN_FLAGS, CMD_OWN_FLAGS_DAEMON };

struct command {
	const char *name;
	enum cmd_kind kind;
	int max_args;     /* positional arguments (CMD_DAEMON) */
	const char *help; /* CMD_DAEMON: what --help prints */
	union {
		int (*plain)(struct opts *o, const char *arg);
		int (*flags)(struct opts *o, int argc, char **argv);
	} run;
};

/* status, jobs and top: one daemon, or with --daemons / --aggregators the
 * fleet (fleet.c) */
static int run_status(struct opts *o, const char *arg)
{
	(void)arg;
	return o->daemons || o->aggregators ? fleet_status(o) : cmd_status(o);
}

static int run_jobs(struct opts *o, const char *arg)
{
	(void)arg;
	return o->daemons || o->aggregators ? fleet_jobs(o) : cmd_jobs(o);
}

static int run_top(struct opts *o, const char *arg)
{
	(void)arg;
	return o->daemons || o->aggregators ? fleet_top(o) : cmd_top(o);
}

static int run_config(struct opts *o, const char *arg)
{
	(void)arg;
	return cmd_config(o);
}

static int run_metrics(struct opts *o, const char *arg)
{
	return cmd_metrics(o, arg);
}

static int run_plan(struct opts *o, int argc, char **argv)
{
	return cmd_plan(o, argc, argv);
}

static int run_profile(struct opts *o, int argc, char **argv)
{
	return cmd_profile(o, argc, argv);
}

#define COMMON_OPTS                                                                              \
	"Options (here or before the command): --daemon URL | -H HOST -p PORT, -j/--json,\n"    \
	"-t/--timeout S (see sumcastctl --help)\n"
#define FLEET_OPTS                                                                               \
	"-D/--daemons LIST or -A/--aggregators LIST: every daemon of the list in one view, one\n" \
	"row each (exit 2 when one does not answer; docs/operations.md, A fleet in one view)\n"

static const struct command commands[] = {
	{ "status", CMD_DAEMON, 0,
	  "Usage: sumcastctl status [--json] [-i S] [options]\n"
	  "The daemon's version, provider, threads, uptime, jobs, ranks, throughput, reduce time,\n"
	  "straggler wait and errors (/healthz, /stats, /metrics). Throughput is sampled over\n"
	  "--interval S (default 1); -i 0 gives averages since start without waiting.\n"
	  "--json: the same as one JSON object.\n" COMMON_OPTS FLEET_OPTS,
	  { .plain = run_status } },
	{ "jobs", CMD_DAEMON, 0,
	  "Usage: sumcastctl jobs [--json] [options]\n"
	  "Per job: ranks, chunk, window, memory, bytes, chunks, and the rank most often last\n"
	  "(the straggler) with its mean wait (/stats). --json: an array of objects.\n" COMMON_OPTS FLEET_OPTS,
	  { .plain = run_jobs } },
	{ "top", CMD_DAEMON, 0,
	  "Usage: sumcastctl top [-i S] [-n N] [--json] [options]\n"
	  "status and jobs, refreshed every --interval S (default 1); q or Ctrl-C quits;\n"
	  "-n N stops after N frames. --json: one JSON object per frame and line.\n" COMMON_OPTS FLEET_OPTS,
	  { .plain = run_top } },
	{ "config", CMD_DAEMON, 0,
	  "Usage: sumcastctl config [--json] [options]\n"
	  "The daemon's effective configuration (/config): every setting with where its value\n"
	  "came from; the ports it actually bound where the file says 0.\n" COMMON_OPTS,
	  { .plain = run_config } },
	{ "metrics", CMD_DAEMON, 1,
	  "Usage: sumcastctl metrics [PREFIX] [--json] [options]\n"
	  "The daemon's Prometheus text (/metrics), or only the families whose names start\n"
	  "with PREFIX (exit 1 when none does). --json: one object per sample.\n" COMMON_OPTS,
	  { .plain = run_metrics } },
	{ "drain", CMD_OWN_FLAGS_DAEMON, 0, NULL, { .flags = cmd_drain } },
	{ "plan", CMD_OWN_FLAGS, 0, NULL, { .flags = run_plan } },
	{ "profile", CMD_OWN_FLAGS, 0, NULL, { .flags = run_profile } },
	{ NULL, 0, 0, NULL, { NULL } },
};

int main(int argc, char **argv)
{
	struct opts o = { "127.0.0.1", 7801, false, 3000, 1.0, 0, NULL, NULL };
	const struct command *c;
	char **cargv;
	int i = 1, cargc = 0, rc;

	if (getenv("SUMCASTCTL_HOST") && *getenv("SUMCASTCTL_HOST"))
		o.host = getenv("SUMCASTCTL_HOST");
	if (getenv("SUMCASTCTL_PORT") && *getenv("SUMCASTCTL_PORT"))
		o.port = (unsigned)arg_count(NULL, "SUMCASTCTL_PORT", getenv("SUMCASTCTL_PORT"), 1, 65535);
	/* before the command: global options only */
	while (i < argc && argv[i][0] == '-' && argv[i][1]) {
		int k;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (!(k = gopt_take(&o, argc, argv, i, NULL))) {
			fprintf(stderr, "sumcastctl: unknown option %s (sumcastctl --help lists them)\n", argv[i]);
			return EXIT_USAGE;
		}
		i += k;
	}
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (c = commands; c->name && strcmp(c->name, argv[i]); c++)
		;
	if (!c->name) {
		fprintf(stderr, "sumcastctl: unknown command %s\n", argv[i]);
		usage(stderr);
		return EXIT_USAGE;
	}
	/* after it: the global options are taken out, the rest is the
	 * command's (after "--", all of it) */
	cargv = calloc((size_t)argc + 1, sizeof(*cargv));
	if (!cargv)
		die(EXIT_BAD_ANSWER, "out of memory");
	cargv[cargc++] = argv[i++];
	for (bool rest = false; i < argc; i++) {
		int k;
		if (!rest && !strcmp(argv[i], "--")) {
			rest = true;
			if (c->kind != CMD_DAEMON)
				cargv[cargc++] = argv[i];
			continue;
		}
		if (!rest && argv[i][0] == '-' && (k = gopt_take(&o, argc, argv, i, c->name))) {
			i += k - 1;
			continue;
		}
		cargv[cargc++] = argv[i];
	}
	if (c->kind == CMD_OWN_FLAGS) {
		rc = c->run.flags(&o, cargc, cargv);
		free(cargv);
		return rc;
	}
	const char *arg = NULL;
	if (c->kind == CMD_DAEMON) {
		int npos = 0;
		for (int k = 1; k < cargc; k++) {
			if (!strcmp(cargv[k], "-h") || !strcmp(cargv[k], "--help")) {
				fputs(c->help, stdout);
				free(cargv);
				return 0;
			}
		}
		for (int k = 1; k < cargc; k++) {
			if (cargv[k][0] == '-' && cargv[k][1]) {
				fprintf(stderr, "sumcastctl %s: unknown option %s (sumcastctl %s --help)\n", c->name,
					cargv[k], c->name);
				free(cargv);
				return EXIT_USAGE;
			}
			if (++npos > c->max_args) {
				fprintf(stderr, "sumcastctl %s: unexpected argument %s (sumcastctl %s --help)\n",
					c->name, cargv[k], c->name);
				free(cargv);
				return EXIT_USAGE;
			}
			arg = cargv[k];
		}
	}
	if (http_init(&o))
		die(EXIT_BAD_ANSWER, "libcurl initialisation failed");
	rc = c->kind == CMD_DAEMON ? c->run.plain(&o, arg) : c->run.flags(&o, cargc, cargv);
	http_fini();
	free(cargv);
	return rc;
}
