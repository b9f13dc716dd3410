/* Posts the provider refused with -FI_EAGAIN ("retry after progress"),
 * kept to be retried on the poller's next pass: the one mechanism for it
 * (libfabric's rxm keeps one the same way, rxm_queue_deferred_tx). An
 * object embeds a struct defer and names the function that retries it.
 * Two ways to run a queue:
 *
 *   DEFER_ANY_ORDER  every item queued when the run starts is tried once;
 *                    one refused again is queued for the next run (the
 *                    daemon's slots: independent of each other);
 *   DEFER_IN_ORDER   items are tried from the head and the first refused
 *                    again ends the run, so nothing behind it overtakes it
 *                    (a rank's chunks to one aggregator, a comm's messages
 *                    of one tag: their order is the matching order).
 *
 * A retry function returns -FI_EAGAIN to stay queued, anything else when
 * it is done with the item (posted, or failed for good and handled). It may
 * queue other items, or its own again (defer_add does nothing for an item
 * already queued). Single-threaded, like the poller that owns the queue.
 * Header only: tests/unit/test_defer.c. */
#ifndef SUMCAST_DEFER_H
#define SUMCAST_DEFER_H

#include <rdma/fi_errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>

struct defer;
typedef int (*defer_fn)(struct defer *d);

struct defer {
	STAILQ_ENTRY(defer) link;
	defer_fn retry;
	unsigned gen; /* the queue's run count when it was queued */
	bool queued;
};

struct defer_queue {
	STAILQ_HEAD(, defer) head;
	unsigned gen; /* runs so far (DEFER_ANY_ORDER) */
};

enum defer_order { DEFER_ANY_ORDER, DEFER_IN_ORDER };

static inline void defer_queue_init(struct defer_queue *q)
{
	STAILQ_INIT(&q->head);
	q->gen = 0;
}

static inline bool defer_empty(const struct defer_queue *q)
{
	return STAILQ_EMPTY(&q->head);
}

/* The oldest item queued, NULL if none. */
static inline struct defer *defer_first(const struct defer_queue *q)
{
	return STAILQ_FIRST(&q->head);
}

static inline bool defer_queued(const struct defer *d)
{
	return d->queued;
}

/* Queues d at the tail, to be retried by fn; nothing if it is queued. */
static inline void defer_add(struct defer_queue *q, struct defer *d, defer_fn fn)
{
	if (d->queued)
		return;
	d->retry = fn;
	d->gen = q->gen;
	d->queued = true;
	STAILQ_INSERT_TAIL(&q->head, d, link);
}

/* Takes d off q (its post is no longer wanted); nothing if not queued. */
static inline void defer_cancel(struct defer_queue *q, struct defer *d)
{
	if (!d->queued)
		return;
	STAILQ_REMOVE(&q->head, d, defer, link);
	d->queued = false;
}

/* Takes every item off q (their posts are no longer wanted). */
static inline void defer_clear(struct defer_queue *q)
{
	struct defer *d;

	while ((d = STAILQ_FIRST(&q->head))) {
		STAILQ_REMOVE_HEAD(&q->head, link);
		d->queued = false;
	}
}

/* Retries q's items (see above). Returns whether any is still queued. */
static inline bool defer_run(struct defer_queue *q, enum defer_order order)
{
	struct defer *d;

	if (order == DEFER_IN_ORDER) {
		while ((d = STAILQ_FIRST(&q->head))) {
			if (d->retry(d) == -FI_EAGAIN)
				return true;
			/* the retry may have taken it off already */
			if (d->queued && STAILQ_FIRST(&q->head) == d) {
				STAILQ_REMOVE_HEAD(&q->head, link);
				d->queued = false;
			}
		}
		return false;
	}
	/* The items queued before this run, once each, from the head; what is
	 * queued during it (one refused again among them) carries this run's
	 * number and waits at the tail for the next. Items stay on q
	 * throughout, so a retry may cancel any of them. */
	unsigned now = ++q->gen;
	while ((d = STAILQ_FIRST(&q->head)) && d->gen != now) {
		STAILQ_REMOVE_HEAD(&q->head, link);
		d->queued = false;
		if (d->retry(d) == -FI_EAGAIN)
			defer_add(q, d, d->retry);
	}
	return !defer_empty(q);
}

#endif
