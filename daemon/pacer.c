/* Weighted shares of the daemon's capacity: the control thread's side
 * (pacer.h). Runs every PACE_TICK_MS on the control thread, which owns the
 * job list; the data threads only read each job's pace_bps. */
#include "pacer.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdbool.h>

#include "clock.h"
#include "daemon.h"
#include "job.h"
#include "log.h"

#define PACE_WANTS 0.85   /* a held job that used this much of its cap wants more */
#define PACE_GROW 1.25    /* a job that wants no more: room to grow, times its rate */
#define PACE_IDLE 0.01    /* a job under this share of the capacity is not a tenant */
#define PACE_SMOOTH 0.3   /* weight of the newest tick in a job's rate */
#define PACE_FULL 0.95    /* carried this much of the capacity: the link is full */
#define PACE_BACKOFF 20   /* ticks a job found to ask less stays judged by its rate */

void pace_shares(struct pace_share *v, size_t n, double capacity)
{
	bool fixed[PACE_MAX_JOBS];
	double left = capacity, wsum = 0, level = 0;

	if (n > PACE_MAX_JOBS)
		n = PACE_MAX_JOBS;
	for (size_t i = 0; i < n; i++) {
		fixed[i] = false;
		wsum += v[i].weight;
	}
	if (!n || wsum <= 0)
		return;
	double all = wsum;
	/* Water-filling: the level is what a unit of weight gets of what is
	 * left; a job that wants no more and uses less than its level keeps
	 * its rate (charged that, not more: charging its room to grow would
	 * shrink the others' caps below what the link gives them, and the
	 * capacity seen with them). */
	for (;;) {
		level = left / wsum;
		bool more = false;
		for (size_t i = 0; i < n; i++) {
			bool wants = v[i].link || v[i].cap <= 0 || v[i].rate >= PACE_WANTS * v[i].cap;
			if (fixed[i] || wants || v[i].rate > level * v[i].weight)
				continue;
			fixed[i] = true;
			left -= v[i].rate;
			wsum -= v[i].weight;
			more = true;
		}
		if (!more || wsum <= 0)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		double fair = capacity * v[i].weight / all;
		if (fixed[i]) {
			double grow = v[i].rate * PACE_GROW;
			v[i].cap = grow > fair ? grow : fair;
		} else {
			v[i].cap = level * v[i].weight * PACE_ROOM;
		}
	}
}

static bool job_paceable(const struct job *j)
{
	return j->state == JOB_READY && j->thread;
}

/* Each job's rate over the last tick, smoothed (as it is while warming up);
 * the daemon's total over the last PACE_WINDOW ticks (one 100 ms tick is
 * too noisy to take a maximum of: a result completes in bursts), and its
 * capacity: the highest such total, decaying by PACE_DECAY a tick while
 * data moves. Overestimated, it only leaves the weights to the windows for
 * a while; underestimated, it would hold every job below what the link
 * gives (it grows 2 % a tick): so it never decays while the jobs are idle,
 * and a job is held only once its rate has been measured PACE_WARM_TICKS
 * times. */
static double pace_measure(struct daemon *d, uint64_t now)
{
	struct pacer *p = &d->pace;
	double dt = (double)(now - p->last_ns) / 1e9, bytes = 0, wb = 0, wt = 0;

	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link)) {
		uint64_t b = job_sum_bytes_out(j);
		double r = (double)(b - j->pace_seen) / dt;
		j->pace_seen = b;
		if (!job_paceable(j))
			continue;
		bytes += r * dt;
		if (j->pace_ticks < PACE_WARM_TICKS && r > 0) {
			j->pace_rate = r; /* as it is until it is held: a job starts mid-tick */
			j->pace_ticks++;
		} else {
			j->pace_rate = PACE_SMOOTH * r + (1 - PACE_SMOOTH) * j->pace_rate;
		}
	}
	p->win_bytes[p->at % PACE_WINDOW] = bytes;
	p->win_s[p->at++ % PACE_WINDOW] = dt;
	for (unsigned i = 0; i < PACE_WINDOW; i++) {
		wb += p->win_bytes[i];
		wt += p->win_s[i];
	}
	p->total = wt > 0 ? wb / wt : 0;
	if (bytes > 0 && p->at >= PACE_WINDOW)
		p->capacity = p->total > p->capacity * PACE_DECAY ? p->total : p->capacity * PACE_DECAY;
	return p->capacity;
}

static void pace_tick(struct daemon *d, uint64_t now)
{
	struct pacer *p = &d->pace;
	double capacity = pace_measure(d, now);
	struct pace_share v[PACE_MAX_JOBS];
	struct job *js[PACE_MAX_JOBS];
	size_t n = 0;
	bool mixed = false;
	double wsum = 0;

	/* the tenants: jobs moving data (past PACE_MAX_JOBS: the kernel shares) */
	for (struct job *j = SLIST_FIRST(&d->jobs); j && n < PACE_MAX_JOBS && d->cfg.pace; j = SLIST_NEXT(j, link)) {
		if (!job_paceable(j) || j->pace_ticks < PACE_WARM_TICKS ||
		    j->pace_rate < PACE_IDLE * capacity || j->pace_rate <= 0)
			continue;
		mixed |= n && j->weight != js[0]->weight;
		js[n] = j;
		v[n++] = (struct pace_share){ .weight = j->weight, .rate = j->pace_rate, .cap = j->pace_cap };
		wsum += j->weight;
	}
	/* A job under its cap is not always one that asks no more: on a full
	 * link the kernel shares per connection, so the light job at its cap
	 * keeps the heavy one under its own (the very case the pacer is for).
	 * On a full link a job under its weighted share counts as wanting more;
	 * should the link then not stay full while the job still uses less than
	 * its cap, it was its own demand: not again for PACE_BACKOFF ticks. */
	bool full = p->total >= PACE_FULL * capacity;
	for (size_t i = 0; i < n; i++) {
		struct job *j = js[i];
		if (j->pace_backoff)
			j->pace_backoff--;
		if (j->pace_link && !full && j->pace_rate < PACE_WANTS * j->pace_cap)
			j->pace_backoff = PACE_BACKOFF;
		v[i].link = j->pace_link = full && !j->pace_backoff &&
					   j->pace_rate < PACE_FULL * capacity * j->weight / wsum;
	}
	if (n < 2 || !mixed)
		n = 0;
	pace_shares(v, n, capacity);
	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link))
		j->pace_cap = 0;
	for (size_t i = 0; i < n; i++) {
		js[i]->pace_cap = v[i].cap;
		SC_DBG("pace: job 0x%" PRIx64 " weight %u: %.0f Mbit/s, held to %.0f (capacity %.0f)",
			 js[i]->id, js[i]->weight, v[i].rate * 8 / 1e6, v[i].cap * 8 / 1e6, capacity * 8 / 1e6);
	}
	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link))
		JOB_FOR_LANES(j, l) /* each lane sends its slots' results: an equal share */
			atomic_store_explicit(&l->pace_bps, (uint64_t)(j->pace_cap / j->lanes),
					      memory_order_relaxed);
	if ((n > 0) != (p->paced > 0)) {
		if (n)
			SC_INFO("pacing %zu jobs of different weights to shares of %.0f Mbit/s of results",
				n, capacity * 8 / 1e6);
		else
			SC_INFO("pacing off: %s", d->cfg.pace ? "no two jobs of different weights move data"
								: "[job] pace = false");
	}
	p->paced = (uint32_t)n;
}

static void pace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	uint64_t now = sc_now_ns();

	(void)fd;
	(void)what;
	if (now > d->pace.last_ns)
		pace_tick(d, now);
	d->pace.last_ns = now;
}

int pacer_start(struct daemon *d)
{
	struct timeval tv = { 0, PACE_TICK_MS * 1000 };

	d->pace.last_ns = sc_now_ns();
	d->pace.ev = event_new(d->base, -1, EV_PERSIST, pace_cb, d);
	if (!d->pace.ev || event_add(d->pace.ev, &tv))
		return -ENOMEM;
	return 0;
}

void pacer_stop(struct daemon *d)
{
	if (d->pace.ev)
		event_free(d->pace.ev);
	d->pace.ev = NULL;
}
