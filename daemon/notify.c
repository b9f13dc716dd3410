/* systemd integration: sd_notify messages, the coalesced STATUS= line and
 * the watchdog ping. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "clock.h"
#include "ctl_api.h"
#include "daemon.h"
#include "log.h"
#include "notify.h"

void daemon_notify(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!getenv("NOTIFY_SOCKET"))
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sd_notify(0, buf);
}

/* ---- STATUS= ---- */

/* "Serving: 2 jobs, 6 ranks; control port 7800, HTTP port 7801", and
 * while the last reload failed, that the previous configuration is kept. */
static void status_format(const struct daemon *d, char *buf, size_t len)
{
	uint32_t ranks = control_ranks(d);

	snprintf(buf, len, "Serving: %u job%s, %u rank%s; control port %u, HTTP port %u%s%s",
		 d->njobs_live, d->njobs_live == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s",
		 d->control_port, d->http_port,
		 d->reload_failed ? "; last reload failed, previous configuration kept: " : "",
		 d->reload_failed ? d->reload_error : "");
}

static void status_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	char buf[sizeof(d->status_sent)];

	(void)fd;
	(void)what;
	if (!d->ready || d->draining) /* drain has its own STATUS lines */
		return;
	status_format(d, buf, sizeof(buf));
	if (!strcmp(buf, d->status_sent))
		return;
	daemon_notify("STATUS=%s", buf);
	memcpy(d->status_sent, buf, sizeof(buf));
}

void daemon_status_changed(struct daemon *d)
{
	struct timeval tv = { 0, 100000 };

	if (d->ev_status && !d->draining && !evtimer_pending(d->ev_status, NULL))
		evtimer_add(d->ev_status, &tv);
}

void notify_draining(struct daemon *d, uint32_t moving, uint32_t busy)
{
	char buf[sizeof(d->status_sent)];

	snprintf(buf, sizeof(buf),
		 "Draining: %u job%s still moving off, %u finishing chunks in flight; refusing joins",
		 moving, moving == 1 ? "" : "s", busy);
	if (!strcmp(buf, d->status_sent))
		return;
	daemon_notify("STATUS=%s", buf);
	memcpy(d->status_sent, buf, sizeof(buf));
}

void notify_reloaded(struct daemon *d, int rc, const char *why)
{
	d->reload_failed = rc != 0;
	snprintf(d->reload_error, sizeof(d->reload_error), "%s", why);
	for (char *p = d->reload_error; *p; p++) /* one STATUS line */
		if (*p == '\n')
			*p = ' ';
	status_format(d, d->status_sent, sizeof(d->status_sent));
	daemon_notify("READY=1\nSTATUS=%s%s", d->status_sent, rc ? "" : "; configuration reloaded");
}

/* ---- watchdog ---- */

/* WATCHDOG=1 while the event loop runs and every data thread polls: a data
 * thread stuck for a whole WatchdogSec withholds the ping, and systemd
 * restarts the daemon. */
static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	uint64_t now = sc_now_ns();

	(void)fd;
	(void)what;
	for (unsigned i = 0; i < d->nthreads; i++) {
		uint64_t hb = atomic_load_explicit(&d->threads[i].heartbeat_ns, memory_order_relaxed);
		if (now > hb && now - hb > d->watchdog_usec * 1000ull) {
			SC_LOG_RATELIMIT(SC_LOG_ERROR, 1000,
					 "data thread %u has not polled for %llu ms: no watchdog ping",
					 i, (unsigned long long)((now - hb) / 1000000ull));
			return;
		}
	}
	daemon_notify("WATCHDOG=1");
}

static void watchdog_start(struct daemon *d)
{
	uint64_t usec = 0;
	struct timeval tv;

	if (sd_watchdog_enabled(0, &usec) <= 0 || !usec)
		return;
	d->watchdog_usec = usec;
	d->ev_watchdog = event_new(d->base, -1, EV_PERSIST, watchdog_cb, d);
	tv.tv_sec = (time_t)(usec / 2 / 1000000);
	tv.tv_usec = (suseconds_t)(usec / 2 % 1000000);
	if (!d->ev_watchdog || event_add(d->ev_watchdog, &tv)) {
		SC_ERR("systemd watchdog: cannot start the timer");
		return;
	}
	SC_INFO("systemd watchdog: WatchdogSec %llu ms, WATCHDOG=1 every %llu ms",
		(unsigned long long)(usec / 1000), (unsigned long long)(usec / 2000));
	daemon_notify("WATCHDOG=1");
}

/* ---- start, stop ---- */

void notify_ready(struct daemon *d)
{
	d->ev_status = evtimer_new(d->base, status_cb, d);
	status_format(d, d->status_sent, sizeof(d->status_sent));
	daemon_notify("READY=1\nSTATUS=%s", d->status_sent);
	watchdog_start(d);
}

void notify_stop(struct daemon *d)
{
	if (d->ev_status)
		event_free(d->ev_status);
	if (d->ev_watchdog)
		event_free(d->ev_watchdog);
	d->ev_status = d->ev_watchdog = NULL;
}
