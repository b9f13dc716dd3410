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
#include <getopt.h>
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
		"Usage: sumcastctl [options] COMMAND\n"
		"Shows what a sumcastd aggregator is doing, from its HTTP endpoints.\n\n"
		"Commands:\n"
		"  status          version, provider, threads, uptime, jobs, ranks, throughput, reduce\n"
		"                  time, straggler wait, errors (throughput sampled over --interval)\n"
		"  jobs            per job: ranks, chunk, window, memory, bytes, chunks, and the rank\n"
		"                  most often last (the straggler) with its mean wait\n"
		"  top             status + jobs, refreshed every --interval; q or Ctrl-C quits\n"
		"  config          the daemon's effective configuration\n"
		"  metrics [PREFIX] the Prometheus text (only families starting with PREFIX)\n"
		"  drain [--daemon URL] [--wait S]  stop the daemon the way SIGTERM does: its jobs\n"
		"                  move off, then it exits (POST /drain; sumcastctl drain --help)\n"
		"  plan ...        sizing: aggregators, tree, split, memory and speed-up for a job\n"
		"                  (asks no daemon; sumcastctl plan --help)\n"
		"  profile PATH... a job's collectives from its SUMCAST_TRACE files: calls, bytes,\n"
		"                  paths, rates, faults, split changes, the slowest node; --png FILE\n"
		"                  plots them (asks no daemon; sumcastctl profile --help)\n\n"
		"Options:\n"
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
		"Exit status: 0 ok, 1 unexpected answer (profile: unreadable or no traces), 2 daemon\n"
		"unreachable or timed out, 64 usage\n"
		"(drain: 3 when --wait ran out while it still drained).\n");
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
	struct opts o = { "127.0.0.1", 7801, false, 3000, 1.0, 0, NULL, NULL };
	static const struct option lo[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "daemons", required_argument, NULL, 'D' },
		{ "aggregators", required_argument, NULL, 'A' },
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
	while ((opt = getopt_long(argc, argv, "+H:p:jt:i:n:D:A:Vh", lo, NULL)) != -1) {
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
		case 'D':
			o.daemons = optarg;
			break;
		case 'A':
			o.aggregators = optarg;
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
	if (!strcmp(cmd, "plan")) /* its own flags; no daemon */
		return cmd_plan(&o, argc - optind + 1, argv + optind - 1);
	if (!strcmp(cmd, "profile")) /* its own flags; no daemon */
		return cmd_profile(&o, argc - optind + 1, argv + optind - 1);
	if (!strcmp(cmd, "drain")) { /* its own flags */
		if (http_init(&o))
			die(EXIT_BAD_ANSWER, "libcurl initialisation failed");
		rc = cmd_drain(&o, argc - optind + 1, argv + optind - 1);
		http_fini();
		return rc;
	}
	if (argc - optind > (!strcmp(cmd, "metrics") ? 1 : 0)) {
		fprintf(stderr, "sumcastctl: unexpected argument %s\n", argv[argc - 1]);
		return EXIT_USAGE;
	}
	if (http_init(&o))
		die(EXIT_BAD_ANSWER, "libcurl initialisation failed");
	if ((o.daemons || o.aggregators) && !strcmp(cmd, "status"))
		rc = fleet_status(&o);
	else if ((o.daemons || o.aggregators) && !strcmp(cmd, "jobs"))
		rc = fleet_jobs(&o);
	else if ((o.daemons || o.aggregators) && !strcmp(cmd, "top"))
		rc = fleet_top(&o);
	else if (!strcmp(cmd, "status"))
		rc = cmd_status(&o);
	else if (!strcmp(cmd, "jobs"))
		rc = cmd_jobs(&o);
	else if (!strcmp(cmd, "top"))
		rc = cmd_top(&o);
	else if (!strcmp(cmd, "config"))
		rc = cmd_config(&o);
	else if (!strcmp(cmd, "metrics"))
		rc = cmd_metrics(&o, optind < argc ? argv[optind++] : NULL);
	else {
		fprintf(stderr, "sumcastctl: unknown command %s\n", cmd);
		usage(stderr);
		rc = EXIT_USAGE;
	}
	http_fini();
	return rc;
}
