/* A listener that backs off when accept() fails (accept_backoff.h). */
#include "accept_backoff.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "stats.h"

#define BACKOFF_MIN_MS 10u
#define BACKOFF_MAX_MS 1000u
#define BACKOFF_LOG_NS 1000000000ull
#define BACKOFF_MAX 4

/* libevent hands the error callback the listener's own argument (for
 * evhttp's listener, the struct evhttp), so the guard is found by its
 * listener. */
static struct accept_backoff *backoffs[BACKOFF_MAX];

static struct accept_backoff *backoff_of(struct evconnlistener *lev)
{
	for (int i = 0; i < BACKOFF_MAX; i++)
		if (backoffs[i] && backoffs[i]->lev == lev)
			return backoffs[i];
	return NULL;
}

static void backoff_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct accept_backoff *b = arg;

	(void)fd;
	(void)what;
	b->paused = false;
	if (!b->may_resume || b->may_resume(b->arg))
		evconnlistener_enable(b->lev);
}

static void backoff_error_cb(struct evconnlistener *lev, void *arg)
{
	struct accept_backoff *b = backoff_of(lev);
	int err = EVUTIL_SOCKET_ERROR();
	uint64_t now = sc_now_ns();

	(void)arg;
	if (!b) {
		evconnlistener_disable(lev); /* cannot happen; never spin */
		return;
	}
	struct timeval tv = { b->pause_ms / 1000, (long)(b->pause_ms % 1000) * 1000 };

	ctr_add(b->counter, 1);
	b->failures++;
	if (now - b->last_log_ns >= BACKOFF_LOG_NS) {
		SC_WARN("%s listener: accept failed: %s (%" PRIu64 " failure(s) since the last report); not accepting for %u ms",
			b->what, strerror(err), b->failures, b->pause_ms);
		b->last_log_ns = now;
		b->failures = 0;
	}
	evconnlistener_disable(lev);
	b->paused = true;
	evtimer_add(b->timer, &tv);
	b->pause_ms = b->pause_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b->pause_ms * 2;
}

int accept_backoff_init(struct accept_backoff *b, struct event_base *base,
			struct evconnlistener *lev, const char *what, _Atomic uint64_t *counter,
			bool (*may_resume)(void *arg), void *arg)
{
	memset(b, 0, sizeof(*b));
	b->lev = lev;
	b->what = what;
	b->counter = counter;
	b->may_resume = may_resume;
	b->arg = arg;
	b->pause_ms = BACKOFF_MIN_MS;
	int slot = -1;
	for (int i = 0; i < BACKOFF_MAX && slot < 0; i++)
		if (!backoffs[i])
			slot = i;
	if (slot < 0)
		return -ENOSPC;
	b->timer = evtimer_new(base, backoff_timer_cb, b);
	if (!b->timer)
		return -ENOMEM;
	backoffs[slot] = b;
	evconnlistener_set_error_cb(lev, backoff_error_cb);
	return 0;
}

void accept_backoff_fini(struct accept_backoff *b)
{
	for (int i = 0; i < BACKOFF_MAX; i++)
		if (backoffs[i] == b)
			backoffs[i] = NULL;
	if (b->lev)
		evconnlistener_set_error_cb(b->lev, NULL);
	b->lev = NULL;
	if (b->timer)
		event_free(b->timer);
	b->timer = NULL;
	b->paused = false;
}

void accept_backoff_reset(struct accept_backoff *b)
{
	b->pause_ms = BACKOFF_MIN_MS;
}

bool accept_backoff_paused(const struct accept_backoff *b)
{
	return b->paused;
}
