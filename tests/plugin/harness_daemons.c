/* The aggregators of a run: sumcastd on 127.0.0.1 with free ports
 * (tests/support/sumcastd_proc.h), stopped when the run ends. */
#include "harness.h"

#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "sumcastd_proc.h"

static struct sc_daemon daemons[MAX_AGGS];
static int ndaemons;

void daemons_stop(void)
{
	sc_daemons_stop(daemons, (size_t)ndaemons, SIGTERM, 3000);
	ndaemons = 0;
}


/* Starts M sumcastd on 127.0.0.1 with free ports; returns "host:port,...". */
int daemons_start(char *aggs, size_t len)
{
	if (!opt.daemon || !*opt.daemon || access(opt.daemon, X_OK)) {
		fprintf(stderr, "SKIP: sumcastd not built (%s)\n", opt.daemon && *opt.daemon ? opt.daemon : "no path");
		return SKIP;
	}
	/* HARNESS_DAEMON_CONF: extra lines for the daemons, e.g.
	 * "[data]\nidle-spin = 1000" (\n as two characters) */
	const char *env = getenv("HARNESS_DAEMON_CONF");
	size_t cap = PATH_MAX + 64 + (env ? strlen(env) + 2 : 0), n = 0;
	char *extra = malloc(cap);
	CHECK(extra, "malloc");
	if (opt.key)
		n += (size_t)snprintf(extra, cap, "[auth]\nkey-file = %s/daemon.key\n", rv_dir);
	for (const char *e = env; e && *e && n < cap - 2; e++) {
		if (e[0] == '\\' && e[1] == 'n') {
			extra[n++] = '\n';
			e++;
		} else {
			extra[n++] = *e;
		}
	}
	if (env)
		extra[n++] = '\n';
	extra[n] = 0;
	aggs[0] = 0;
	for (int i = 0; i < opt.naggs; i++) {
		char name[32];
		snprintf(name, sizeof(name), "agg%d", i);
		struct sc_daemon_opts o = {
			.binary = opt.daemon,
			.provider = "tcp",
			.node = "127.0.0.1",
			.extra = extra,
			.dir = rv_dir,
			.name = name,
			.log = !opt.verbose,
			.timeout_ms = 15000,
		};
		struct sc_daemon *d = &daemons[ndaemons++];
		int rc = sc_daemon_start(d, &o);
		if (rc == SC_DAEMON_EXITED && *d->log) {
			char cmd[PATH_MAX + 64];
			snprintf(cmd, sizeof(cmd), "cat %s >&2", d->log);
			(void)!system(cmd);
		}
		if (rc) {
			free(extra);
			return 1;
		}
		snprintf(aggs + strlen(aggs), len - strlen(aggs), "%s127.0.0.1:%u", i ? "," : "", d->ctl);
	}
	free(extra);
	return 0;
}
