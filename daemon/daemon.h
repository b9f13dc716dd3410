/* sumcastd's control plane: the one libevent loop that accepts control
 * connections, runs joins and leaves, serves HTTP, handles signals and
 * hears from the data threads. Everything here runs on the main thread. */
#ifndef SUMCASTD_DAEMON_H
#define SUMCASTD_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane.h"
#include "job.h"
#include "settings.h"
#include "stats.h"
#include "clock.h"

struct event_base;
struct event;
struct evconnlistener;
struct evhttp;

struct daemon {
	struct settings cfg;     /* running configuration */
	enum cfg_source cfg_src[SETTINGS_MAX]; /* per settings_table row, for cfg */
	struct settings loaded;  /* last file + env read (differs from cfg where a
				  * change needs a restart): /config "pending" */
	const char *config_path; /* NULL: defaults + env */
	char cli_log_level[32];  /* --log-level wins over the file */
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *ev_queue, *ev_sigterm, *ev_sigint, *ev_sighup, *ev_drain;
	struct event *ev_status;   /* coalesces STATUS= updates (main.c) */
	struct event *ev_watchdog; /* WATCHDOG=1 every WatchdogSec / 2 */
	uint64_t watchdog_usec;    /* 0: no systemd watchdog */
	char status_sent[400];     /* last STATUS= text sent */
	bool reload_failed;        /* the last SIGHUP kept the previous configuration */
	char reload_error[200];
	struct evhttp *http;
	uint16_t control_port, http_port;

	struct dthread *threads;
	unsigned nthreads;
	struct evq evq;
	char provider[64];

	uint8_t key[256];
	size_t key_len;

	struct job *jobs;      /* every job until its memory is back, ENDING ones too */
	uint32_t njobs_live;   /* jobs not ENDING */
	uint32_t njobs_total;
	uint64_t mem_used;
	uint32_t next_handle;
	struct conn *conns;
	uint32_t nconns;

	bool ready, draining, stopping;
	uint64_t start_ms, drain_start_ms;
	double start_unix; /* CLOCK_REALTIME at start, seconds */
	struct stats stats; /* control-thread errors */
};


/* control.c */
int control_start(struct daemon *d);
void control_stop(struct daemon *d); /* frees conns and jobs, after threads stopped */
void control_drain(struct daemon *d); /* SIGTERM: refuse joins, finish, abort, exit loop */
/* SIGHUP. 0, or -EINVAL with why (what failed) when the running
 * configuration was kept. */
int control_reload(struct daemon *d, char *why, size_t why_len);
/* Ranks currently joined, over all jobs. */
uint32_t control_ranks(const struct daemon *d);

/* http.c */
int http_start(struct daemon *d);
void http_stop(struct daemon *d);

/* sd_notify, a no-op without libsystemd or NOTIFY_SOCKET. */
void daemon_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Jobs or ranks changed: a STATUS= line ("Serving: N jobs, M ranks; ...")
 * follows within 100 ms, coalesced, and only if the text changed. */
void daemon_status_changed(struct daemon *d);

#endif
