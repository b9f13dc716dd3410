/* The control plane as main.c and http.c see it: start, stop, drain,
 * reload, and the one count it answers for others. Main thread only. */
#ifndef SUMCASTD_CTL_API_H
#define SUMCASTD_CTL_API_H

#include <stddef.h>
#include <stdint.h>

struct daemon;

/* ctl_main.c: the control listener and the data threads' event queue. */
int control_start(struct daemon *d);
/* Frees connections and jobs; after the data threads stopped. */
void control_stop(struct daemon *d);
/* The drain (SIGTERM, POST /drain; ctl_main.c has the whole story): refuse
 * joins, ask the jobs that speak DRAIN to move off, let the others finish
 * their chunks in flight, abort what is left at drain-timeout, exit the
 * loop once no job remains. Returns the jobs asked to move off now; 0 and
 * nothing else when already draining. */
int control_drain(struct daemon *d);
/* A stop signal: the drain, or when already draining, the end of the wait
 * (every job left is aborted now). */
void control_drain_now(struct daemon *d);
/* Jobs that were sent DRAIN and have not ended yet. */
uint32_t control_draining_jobs(const struct daemon *d);
/* Ranks currently joined, over all jobs. */
uint32_t control_ranks(const struct daemon *d);

/* ctl_reload.c: SIGHUP. 0, or -EINVAL with why (what failed) when the
 * running configuration was kept. */
int control_reload(struct daemon *d, char *why, size_t why_len);
/* Warns when the key file can be read or written by every user. */
void control_key_mode_check(const char *path);

#endif
