/* The control plane as main.c and http.c see it: start, stop, drain,
 * reload, and the one count it answers for others. Main thread only. */
#ifndef SUMCASTD_CONTROL_H
#define SUMCASTD_CONTROL_H

#include <stddef.h>
#include <stdint.h>

struct daemon;

/* control.c: the control listener and the data threads' event queue. */
int control_start(struct daemon *d);
/* Frees connections and jobs; after the data threads stopped. */
void control_stop(struct daemon *d);
/* SIGTERM: refuse joins, let chunks in flight finish, abort, exit the loop. */
void control_drain(struct daemon *d);
/* Ranks currently joined, over all jobs. */
uint32_t control_ranks(const struct daemon *d);

/* ctl_reload.c: SIGHUP. 0, or -EINVAL with why (what failed) when the
 * running configuration was kept. */
int control_reload(struct daemon *d, char *why, size_t why_len);
/* Warns when the key file can be read or written by every user. */
void control_key_mode_check(const char *path);

#endif
