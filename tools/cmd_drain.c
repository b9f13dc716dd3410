/* sumcastctl drain [--daemon URL] [--wait SECONDS]: POST /drain, which
 * starts what SIGTERM starts (daemon/ctl_main.c): joins refused, the jobs
 * whose ranks speak DRAIN asked to move off, the others aborted once idle,
 * the daemon exits when no job is left or at its drain-timeout. Prints what
 * the daemon answered; with --wait, follows the drain until the daemon
 * stops answering (bounded) and says whether every job moved off.
 *
 * Whether every job moved off is read from the daemon while it answers:
 * the jobs live before the POST, the jobs drained so far, and the drain's
 * age against its drain-timeout, all from one GET /stats. A job still
 * moving off at the last look, when the daemon stopped answering before
 * its drain-timeout, moved off: the daemon aborts such a job only at the
 * timeout (or on a second signal, or when a rank of it disconnects without
 * LEAVE, which this cannot tell from a clean end; the daemon's log says). */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "sumcastctl.h"

#define POLL_S 0.1

static void drain_usage(FILE *out)
{
	fprintf(out,
		"Usage: sumcastctl [options] drain [--daemon URL] [--wait SECONDS] [options]\n"
		"Asks the daemon to drain (POST /drain, from its own host: the daemon takes it\n"
		"from a loopback address only), as SIGTERM or systemctl stop do: joins are\n"
		"refused, jobs are asked to move off, the daemon exits once they have.\n\n"
		"  --daemon URL      the daemon's HTTP address, http://HOST:PORT or HOST:PORT\n"
		"                    (default: --host/--port)\n"
		"  --wait SECONDS    wait until the daemon stops answering, at most SECONDS, and\n"
		"                    say whether every job moved off\n\n"
		"Exit status: 0 drain started (with --wait: every job moved off), 1 the daemon\n"
		"refused or some job did not move off, 2 unreachable, 3 --wait ran out while the\n"
		"daemon still drained, 64 usage.\n");
}

/* What one look at the daemon saw. */
struct look {
	double drained;    /* jobs_drained (sumcast_jobs_drained_total) */
	unsigned moving;   /* live jobs sent DRAIN */
	unsigned other;    /* live jobs not sent DRAIN (older ranks: aborted once idle) */
	double timeout_s;  /* its drain-timeout */
	double age_s;      /* how long it has drained */
	char ids[256];     /* the live jobs' ids */
};

/* false once the daemon no longer answers (or answers nonsense). */
static bool look_at(struct look *l)
{
	struct body b = { 0 };
	char why[512];
	json_error_t je;
	json_t *st, *j;
	size_t i, len = 0;

	if (http_try("GET", "/stats", &b, NULL, 0, why, sizeof(why)) != 200) {
		free(b.p);
		return false;
	}
	st = json_loadb(b.p, b.len, 0, &je);
	free(b.p);
	if (!st)
		return false;
	memset(l, 0, sizeof(*l));
	l->timeout_s = jnum(st, "drain_timeout_ms") / 1000.0;
	l->age_s = jnum(st, "drain_seconds");
	json_array_foreach(json_object_get(st, "jobs"), i, j) {
		if (!strcmp(jstr(j, "state"), "ending"))
			continue;
		if (json_is_true(json_object_get(j, "draining")))
			l->moving++;
		else
			l->other++;
		if (len < sizeof(l->ids) - 32)
			len += (size_t)snprintf(l->ids + len, sizeof(l->ids) - len, "%s%s", len ? ", " : "",
						jstr(j, "id"));
	}
	/* From the same answer as the jobs: the daemon counts a job drained
	 * and drops it from the list in one step on the thread that answers,
	 * so one look never counts a job both moving and drained. */
	l->drained = jnum(st, "jobs_drained");
	json_decref(st);
	return true;
}

int cmd_drain(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "daemon", required_argument, NULL, 'd' },
		{ "wait", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	double wait_s = -1;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "d:w:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'd':
			arg_daemon(o, "drain", optarg);
			break;
		case 'w':
			wait_s = arg_real("drain", "--wait", optarg, 0, false, 86400, "seconds");
			break;
		case 'h':
			drain_usage(stdout);
			return 0;
		default:
			drain_usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sumcastctl drain: unexpected argument %s\n", argv[optind]);
		return EXIT_USAGE;
	}

	struct look first, last;
	bool seen = look_at(&first);
	double t0 = sc_now_s();
	struct body b = { 0 };
	char why[512];
	long st = http_try("POST", "/drain", &b, NULL, 0, why, sizeof(why));
	if (st < 0)
		die(EXIT_UNREACHABLE, "%s", why);
	json_error_t je;
	json_t *ans = st == 200 ? json_loadb(b.p, b.len, 0, &je) : NULL;
	if (!ans) {
		fprintf(stderr, "sumcastctl drain: POST /drain: HTTP %ld: %s", st, b.p ? b.p : "");
		free(b.p);
		return EXIT_BAD_ANSWER;
	}
	free(b.p);
	unsigned asked = (unsigned)jnum(ans, "jobs");
	if (!o->json)
		printf("%s:%u draining: %u job(s) asked to move off\n", o->host, o->port, asked);
	if (wait_s < 0) {
		if (o->json)
			json_print(ans);
		json_decref(ans);
		return 0;
	}

	/* Follow it: every POLL_S a look, until the daemon stops answering. */
	bool answered = look_at(&last);
	if (!answered && seen)
		last = first;
	unsigned shown = UINT32_MAX;
	double t_end = t0 + wait_s;
	while (answered && sc_now_s() < t_end) {
		if (!o->json && last.moving + last.other != shown) {
			shown = last.moving + last.other;
			printf("  %u job(s) still moving off, %u on the old path (older ranks)%s%s\n", last.moving,
			       last.other, shown ? ": " : "", last.ids);
		}
		sleep_s(POLL_S);
		struct look now;
		if (!(answered = look_at(&now)))
			break;
		last = now;
	}
	double took = sc_now_s() - t0;
	int rc;
	json_t *out = json_object();
	json_object_set_new(out, "draining", json_true());
	json_object_set_new(out, "jobs", json_integer(asked));
	json_object_set_new(out, "stopped", json_boolean(!answered));
	json_object_set_new(out, "seconds", json_real(took));
	if (answered) {
		if (!o->json)
			printf("still draining after %.1f s: %u job(s) left (%s)\n", took, last.moving + last.other,
			       last.ids);
		json_object_set_new(out, "jobs_left", json_integer(last.moving + last.other));
		rc = EXIT_STILL_DRAINING;
	} else {
		/* Stopped. Moved off: the jobs counted drained by the last look,
		 * and the ones still moving off then if the daemon stopped before
		 * its drain-timeout (it aborts them only then). Every other job
		 * live before the POST was aborted (older ranks, or late). */
		bool in_time = isnan(last.timeout_s) || last.age_s + 2 * POLL_S < last.timeout_s;
		double d0 = seen && !isnan(first.drained) ? first.drained : 0;
		unsigned counted = isnan(last.drained) || last.drained < d0 ? 0 : (unsigned)(last.drained - d0);
		unsigned drained = counted + (in_time ? last.moving : 0);
		unsigned before = seen ? first.moving + first.other : asked;
		unsigned not_off = before > drained ? before - drained : 0;
		json_object_set_new(out, "moved_off", json_integer(drained));
		json_object_set_new(out, "aborted", json_integer(not_off));
		if (!o->json) {
			if (!not_off)
				printf("the daemon stopped after %.1f s: every job moved off (%u drained)\n", took,
				       drained);
			else
				printf("the daemon stopped after %.1f s: %u job(s) moved off, %u did not "
				       "(older ranks, or the drain-timeout ran out): aborted, see the "
				       "daemon's log\n", took, drained, not_off);
		}
		rc = not_off ? EXIT_BAD_ANSWER : 0;
	}
	if (o->json)
		json_print(out);
	json_decref(out);
	json_decref(ans);
	return rc;
}
