/* The state of sumcastd's control thread: the one libevent loop that
 * accepts control connections, runs joins and leaves, serves HTTP, handles
 * signals and hears from the data threads. Everything here is touched on
 * the main thread only. Its functions are declared by the files that
 * define them: ctl_api.h, http.h, notify.h (and ctl.h, private to the
 * control plane). */
#ifndef SUMCASTD_DAEMON_H
#define SUMCASTD_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "accept_backoff.h"
#include "dp_api.h" /* struct evq */
#include "pacer.h"
#include "settings.h"
#include "stats.h"

struct conn;
struct job;
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
	struct event *ev_status;   /* coalesces STATUS= updates (notify.c) */
	struct event *ev_watchdog; /* WATCHDOG=1 every WatchdogSec / 2 */
	uint64_t watchdog_usec;    /* 0: no systemd watchdog */
	char status_sent[400];     /* last STATUS= text sent */
	bool reload_failed;        /* the last SIGHUP kept the previous configuration */
	char reload_error[200];
	struct evhttp *http;
	struct evconnlistener *http_listener; /* evhttp's, for the cap and the back-off */
	struct accept_backoff ctl_backoff, http_backoff;
	uint32_t http_conns;     /* HTTP connections open (http.c) */
	bool http_capped;        /* listener off: http.max-connections reached */
	SLIST_HEAD(, http_pending) http_pending; /* accepted, close callback not set yet */
	struct event *ev_http_pending;
	uint16_t control_port, http_port;

	struct dthread *threads;
	unsigned nthreads;
	/* the load each PONG of version 3 reports (ctl_conn.c, daemon_load_pm) */
	uint64_t load_t_ns;
	uint16_t load_pm;
	struct evq evq;
	char provider[64];

	uint8_t key[256];
	size_t key_len;

	/* fabric.multicast resolved at start: jobs get a group of
	 * [mc_first, mc_first + mc_count) */
	bool mc;
	int mc_via;          /* enum sc_mc_via: ip, or ib (mcast_link.h) */
	uint16_t mc_payload; /* result bytes per datagram, from the path's MTU */
	uint32_t mc_first, mc_count;

	struct job_list jobs;  /* by link, the newest first; every job until its
				* memory is back, ENDING ones too */
	uint32_t njobs_live;   /* jobs not ENDING */
	uint32_t njobs_total;
	uint64_t mem_used;
	struct pacer pace;     /* weighted shares (pacer.c) */
	uint32_t next_handle;
	LIST_HEAD(, conn) conns; /* the newest first */
	uint32_t nconns;

	bool ready, draining, stopping;
	uint32_t drain_aborted; /* jobs the drain aborted (joining, older ranks, too late) */
	uint64_t start_ms, drain_start_ms;
	double start_unix; /* CLOCK_REALTIME at start, seconds */
	double drain_began_unix; /* CLOCK_REALTIME when the drain began, seconds */
	struct stats stats; /* control-thread errors */
};

#endif
