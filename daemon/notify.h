/* systemd integration: sd_notify (READY, STATUS, RELOADING, STOPPING) and
 * the watchdog. Every call is a no-op without NOTIFY_SOCKET (not under
 * systemd). libsystemd is a build requirement (CMakeLists.txt).
 * Main thread. */
#ifndef SUMCASTD_NOTIFY_H
#define SUMCASTD_NOTIFY_H

#include <stddef.h>

struct daemon;

/* One sd_notify message, printf-style. */
void daemon_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Jobs or ranks changed: a STATUS= line ("Serving: N jobs, M ranks; ...")
 * follows within 100 ms, coalesced, and only if the text changed. */
void daemon_status_changed(struct daemon *d);
/* Everything is up: READY=1 with the first STATUS=, the STATUS= timer, the
 * watchdog when systemd asks for one. */
void notify_ready(struct daemon *d);
/* A SIGHUP was handled (rc from control_reload, why its reason): READY=1
 * with the STATUS= line, which names a failed reload until one succeeds. */
void notify_reloaded(struct daemon *d, int rc, const char *why);
/* The drain's STATUS= line (ctl_main.c, every 50 ms): jobs still moving
 * off (DRAIN sent) and jobs of older ranks finishing chunks in flight;
 * sent only when the text changed. */
void notify_draining(struct daemon *d, uint32_t moving, uint32_t busy);
/* Frees the timers (after the loop ended). */
void notify_stop(struct daemon *d);

#endif
