/* sumcastd: the Sumcast aggregator daemon. This file is the process:
 * options, the start-up order (data threads, control listener, HTTP,
 * signals, port file, READY), the signals, and the shutdown. */
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ctl_api.h"
#include "daemon.h"
#include "fabric.h"
#include "fabric_env.h"
#include "http.h"
#include "log.h"
#include "notify.h"
#include "reduce.h"
#include "wire.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: sumcastd [options]\n"
		"Sumcast aggregator: reduces the chunks ranks send and sends the sums back.\n\n"
		"  -c, --config FILE   read settings from FILE (INI; see --dump-config)\n"
		"      --dump-config   print every setting with its value and help, then exit\n"
		"      --check-config  validate the configuration, then exit (0 = valid)\n"
		"      --log-level L   error, warn, info, debug or trace (overrides [log] level)\n"
		"      --version       print the version\n"
		"  -h, --help          this text\n\n"
		"Every setting can be overridden with SUMCASTD_<SECTION>_<KEY>, e.g.\n"
		"SUMCASTD_JOB_MEMORY_BUDGET=4G. SIGHUP re-reads the file; SIGTERM drains and exits.\n");
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
	if (sig == SIGHUP) {
		char why[sizeof(d->reload_error)] = "";
		SC_INFO("SIGHUP: reloading %s", d->config_path ? d->config_path : "(no file: env only)");
		daemon_notify("RELOADING=1");
		int rc = control_reload(d, why, sizeof(why));
		http_reloaded(d);
		notify_reloaded(d, rc, why);
		return;
	}
	SC_INFO("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	control_drain_now(d);
}

static int port_file_write(const struct daemon *d)
{
	char tmp[CFG_STR_MAX + 16];
	FILE *f;

	if (!*d->cfg.port_file)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", d->cfg.port_file);
	f = fopen(tmp, "w");
	if (!f) {
		SC_ERR("port-file %s: %s", tmp, strerror(errno));
		return -errno;
	}
	fprintf(f, "control=%u http=%u\n", d->control_port, d->http_port);
	if (fclose(f) || rename(tmp, d->cfg.port_file)) {
		SC_ERR("port-file %s: %s", d->cfg.port_file, strerror(errno));
		unlink(tmp);
		return -errno;
	}
	return 0;
}

static int threads_start(struct daemon *d)
{
	int cpus[SETTINGS_CPUS_MAX];
	int ncpus = settings_parse_cpus(d->cfg.cpus, cpus, SETTINGS_CPUS_MAX);
	int rc;

	d->threads = calloc((size_t)d->cfg.threads, sizeof(*d->threads));
	if (!d->threads)
		return -ENOMEM;
	d->nthreads = (unsigned)d->cfg.threads;
	for (unsigned i = 0; i < d->nthreads; i++) {
		int cpu = ncpus > 0 ? cpus[i % (unsigned)ncpus] : -1;
		rc = dthread_start(&d->threads[i], i, cpu, &d->cfg, &d->evq);
		if (rc) {
			d->nthreads = i;
			return rc;
		}
		char a[128];
		struct fabric *f = d->threads[i].fabric;
		fabric_addr_str(f, f->addr, f->addrlen, a, sizeof(a));
		SC_INFO("data thread %u: %s endpoint %s, receive queue %llu, results up to %zu bytes "
			"injected%s%s", i, fabric_provider(f), a, (unsigned long long)d->threads[i].rx_queue,
			f->inject_size, cpu >= 0 ? ", CPU " : "",
			cpu >= 0 ? (snprintf(a, sizeof(a), "%d", cpu), a) : "");
		if (!f->has_source)
			SC_WARN("provider %s does not report message sources: DATA from endpoints other than the joined ranks cannot be told apart",
				fabric_provider(f));
	}
	snprintf(d->provider, sizeof(d->provider), "%s", fabric_provider(d->threads[0].fabric));
	return 0;
}

static void threads_stop(struct daemon *d)
{
	for (unsigned i = 0; i < d->nthreads; i++)
		dthread_halt(&d->threads[i]);
	for (unsigned i = 0; i < d->nthreads; i++)
		dthread_stop(&d->threads[i]);
}

/* rxm's receive buffers (fabric_env.h) before the first endpoint opens:
 * [fabric] rx-buffers of rx-buffer-size, and a receive queue of
 * FABRIC_ENV_DAEMON_RX_SIZE (rxm and shm) for the jobs' posted receives. Unexpected messages wait in them
 * (larger ones in memory of their own), then in buffers rxm adds without
 * limit; the sweep (dp_sweep.c) keeps that second part small. */
static void rxm_env_set(const struct settings *s)
{
	struct fabric_env e = { .provider = s->provider, .rx_buffers = (size_t)s->rx_buffers,
				.rx_buffer_size = s->rx_buffer_size, .rx_size = FABRIC_ENV_DAEMON_RX_SIZE };
	char line[384];

	fabric_env_defaults(&e, line, sizeof(line));
	SC_INFO("rxm receive buffers: %s", line);
}

/* Each rank holds a control connection and a fabric connection (two
 * descriptors or more); a daemon of 2,048 ranks needs more than the usual
 * soft limit of 1,024 open files: up to the hard limit (the unit's
 * LimitNOFILE). */
static void nofile_raise(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			rl.rlim_cur = was;
	}
	SC_INFO("open files: up to %llu", (unsigned long long)rl.rlim_cur);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "dump-config", no_argument, NULL, 'D' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct daemon dd;
	struct daemon *d = &dd;
	struct cfg_error err = { { 0 } };
	bool dump = false, check = false;
	enum sc_log_level lvl;
	int opt, rc, status = 1;

	sc_log_set_ident("sumcastd");
	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			d->config_path = optarg;
			break;
		case 'D':
			dump = true;
			break;
		case 'C':
			check = true;
			break;
		case 'l':
			if (sc_log_level_parse(optarg, &lvl)) {
				fprintf(stderr, "sumcastd: --log-level %s: expected error, warn, info, debug or trace\n",
					optarg);
				return 2;
			}
			snprintf(d->cli_log_level, sizeof(d->cli_log_level), "%s", optarg);
			break;
		case 'V':
			printf("sumcastd %s (protocol %u)\n", SUMCAST_VERSION, WIRE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sumcastd: unexpected argument %s\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (settings_load(&d->cfg, d->config_path, d->cfg_src, &err)) {
		fprintf(stderr, "sumcastd: %s\n", err.msg);
		return 1;
	}
	if (*d->cli_log_level)
		settings_strcpy(d->cfg.log_level, sizeof(d->cfg.log_level), d->cli_log_level);
	d->loaded = d->cfg;
	if (dump) {
		settings_dump(&d->cfg, stdout);
		return 0;
	}
	if (check) {
		if (*d->cfg.key_file) {
			uint8_t key[256];
			size_t len;
			const char *why = NULL;
			if (wire_key_load(d->cfg.key_file, key, &len, &why)) {
				fprintf(stderr, "sumcastd: auth.key-file %s: %s\n", d->cfg.key_file,
					why ? why : "unreadable");
				return 1;
			}
			control_key_mode_check(d->cfg.key_file);
		}
		printf("%s: configuration is valid\n", d->config_path ? d->config_path : "(defaults)");
		return 0;
	}
	sc_log_level_parse(d->cfg.log_level, &lvl);
	sc_log_set_level(lvl);
	rc = sc_reduce_init();
	if (rc) {
		SC_ERR("reduce kernels: %s", strerror(-rc));
		return 1;
	}
	char fv[64];
	SC_INFO("sumcastd %s starting: %s, reduce kernels %s, config %s", SUMCAST_VERSION,
		fabric_lib_version(fv, sizeof(fv)), sc_isa_name(sc_reduce_isa()),
		d->config_path ? d->config_path : "(defaults + env)");

	signal(SIGPIPE, SIG_IGN);
	d->start_ms = sc_now_ms();
	d->start_unix = sc_wall_s();
	d->base = event_base_new();
	if (!d->base || evq_init(&d->evq)) {
		SC_ERR("event loop setup failed");
		return 1;
	}
	nofile_raise();
	rxm_env_set(&d->cfg);
	if ((rc = threads_start(d)) || (rc = control_start(d)) || (rc = http_start(d)))
		goto out;
	d->ev_sigterm = evsignal_new(d->base, SIGTERM, signal_cb, d);
	d->ev_sigint = evsignal_new(d->base, SIGINT, signal_cb, d);
	d->ev_sighup = evsignal_new(d->base, SIGHUP, signal_cb, d);
	if (!d->ev_sigterm || !d->ev_sigint || !d->ev_sighup || event_add(d->ev_sigterm, NULL) ||
	    event_add(d->ev_sigint, NULL) || event_add(d->ev_sighup, NULL))
		goto out;
	if (port_file_write(d))
		goto out;
	d->ready = true;
	SC_INFO("ready: control port %u, HTTP port %u, %u data thread(s), memory budget %llu bytes",
		d->control_port, d->http_port, d->nthreads, (unsigned long long)d->cfg.memory_budget);
	notify_ready(d);
	event_base_dispatch(d->base);
	status = 0;
	SC_INFO("stopped");
out:
	http_stop(d);
	threads_stop(d);
	control_stop(d);
	if (d->ev_sigterm)
		event_free(d->ev_sigterm);
	if (d->ev_sigint)
		event_free(d->ev_sigint);
	if (d->ev_sighup)
		event_free(d->ev_sighup);
	notify_stop(d);
	free(d->threads);
	evq_fini(&d->evq);
	event_base_free(d->base);
	libevent_global_shutdown();
	if (*d->cfg.port_file && status == 0)
		unlink(d->cfg.port_file);
	return status;
}
