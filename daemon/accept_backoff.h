/* A listener that backs off when accept() fails.
 *
 * accept() fails for lack of a descriptor or of memory (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM) while the connection stays in the kernel's queue, so a
 * level-triggered listener is called again at once: libevent retried and
 * logged every failure (8 million lines in 26 s with 1,100 connections
 * under `ulimit -n 1024`). Here a failure turns the listener off and a
 * timer turns it on again, the pause doubling from 10 ms to 1 s while
 * failures go on; a successful accept resets it. Failures are counted
 * (errors{kind="accept"}) and logged at most once a second with how many
 * there were. Main thread (the event loop) only. */
#ifndef SUMCASTD_ACCEPT_BACKOFF_H
#define SUMCASTD_ACCEPT_BACKOFF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct event;
struct event_base;
struct evconnlistener;

struct accept_backoff {
	struct evconnlistener *lev;
	struct event *timer;
	const char *what;          /* "control", "HTTP": for the log */
	_Atomic uint64_t *counter; /* incremented once per failed accept */
	/* Whether the owner wants the listener on after a pause (false while
	 * draining, or at a connection cap). NULL: always. */
	bool (*may_resume)(void *arg);
	void *arg;
	unsigned pause_ms;  /* next pause */
	bool paused;        /* off because of a failure, timer pending */
	uint64_t failures;  /* since the last log line */
	uint64_t last_log_ns;
};

/* Sets lev's error callback (b must stay where it is until
 * accept_backoff_fini). 0, -ENOMEM, or -ENOSPC (more than 4 at once). */
int accept_backoff_init(struct accept_backoff *b, struct event_base *base,
			struct evconnlistener *lev, const char *what, _Atomic uint64_t *counter,
			bool (*may_resume)(void *arg), void *arg);
/* Before the listener is freed. */
void accept_backoff_fini(struct accept_backoff *b);
/* An accept succeeded: the next failure pauses for the shortest time. */
void accept_backoff_reset(struct accept_backoff *b);
/* True while a failure keeps the listener off (the owner must not turn
 * it on; the timer will, asking may_resume). */
bool accept_backoff_paused(const struct accept_backoff *b);

#endif
