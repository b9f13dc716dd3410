/* Client library: the membership of each aggregator, above the slots.
 * An aggregator's failure is recorded by whichever layer finds it
 * (client_agg_down, client_int.h) and settled here, in the order found:
 * without failover the first one fails every request, with failover the
 * aggregator is fenced and the caller (the plugin) decides with the other
 * ranks. Also here: fencing on the caller's word, joining again, leaving
 * an aggregator that drains, and the watch that fails an aggregator whose
 * results stopped. client_ctl.c speaks the control protocol below this. */
#include "client_int.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "clock.h"
#include "log.h"

/* ---- failure ---- */

static void agg_settle(struct client *c, struct client_agg *a)
{
	a->down = 0;
	if (c->failover) {
		/* The caller decides with the other ranks (and logs once). */
		SC_INFO("%s", a->why);
		c->failed |= 1ull << (a - c->aggs);
		client_slot_fence(c, (size_t)(a - c->aggs));
		return;
	}
	SC_ERR("%s", a->why);
	if (!c->err) {
		c->err = a->err;
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", a->why);
	}
	client_slot_fail_all(c);
}

void client_agg_settle(struct client *c)
{
	for (;;) {
		struct client_agg *first = NULL;
		for (size_t ai = 0; ai < c->naggs; ai++)
			if (c->aggs[ai].down && (!first || c->aggs[ai].down < first->down))
				first = &c->aggs[ai];
		if (!first)
			return;
		agg_settle(c, first);
	}
}

void client_agg_fail(struct client *c, struct client_agg *a, int err, const char *fmt, ...)
{
	char msg[CLIENT_ERR_MAX];
	va_list ap;

	if (a->st == AGG_DEAD)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	client_agg_down(c, a, err, "%s", msg);
	client_agg_settle(c);
}

void client_agg_fence(struct client *c, size_t agg, const char *why)
{
	if (agg < c->naggs)
		client_agg_fail(c, &c->aggs[agg], -ECONNABORTED, "%s: %s", c->aggs[agg].name, why);
}

/* ---- joining again ---- */

int client_agg_rejoin(struct client *c, size_t agg, uint32_t timeout_ms)
{
	if (agg >= c->naggs || (c->aggs[agg].st != AGG_DEAD && c->aggs[agg].st != AGG_LEFT))
		return -EINVAL;
	struct client_agg *a = &c->aggs[agg];
	for (uint32_t i = 0; i < c->max_requests; i++)
		if (c->reqs[i].in_use && (c->reqs[i].aggs >> agg & 1))
			return -EBUSY;
	for (uint32_t si = 0; si < c->window; si++)
		if (a->slots[si].req >= 0)
			return -EBUSY;
	/* Everything of the membership that ended: what JOIN_OK sets comes
	 * again, the rest starts as at create. Its endpoint is opened when the
	 * daemon answers (HELLO): a dead address costs a refused connect. */
	for (uint32_t si = 0; si < c->window; si++) {
		struct client_slot *s = &a->slots[si];
		memset(s, 0, sizeof(*s));
		s->c = c;
		s->ai = (uint32_t)agg;
		s->si = si;
		s->req = -1;
		s->chunk = CLIENT_NO_CHUNK;
	}
	for (uint32_t k = 0; a->ret && k < c->window; k++)
		a->ret[k].chunk = CLIENT_NO_CHUNK;
	if (a->mc_rx.slots)
		sc_mc_rx_fini(&a->mc_rx);
	if (a->sealed)
		sc_seal_fini(&a->seal);
	a->sealed = a->mc = false;
	a->mc_hi = 0;
	a->mc_why[0] = '\0';
	a->rlen = a->wlen = a->woff = 0;
	a->job_handle = a->window = a->chunk_bytes = a->timeout_ms = 0;
	a->av_inserted = false;
	a->next_c = a->next_assign = a->hi = 0;
	a->inflight = 0;
	STAILQ_INIT(&a->queue);
	defer_queue_init(&a->deferred);
	a->last_ns = a->heard_ns = a->result_ns = a->ping_ns = a->ping_wait_ns = 0;
	a->ver = a->weight = 0;
	a->has_load = false;
	a->draining = false;
	a->err = 0;
	a->why[0] = '\0';
	a->rejoin_ns = sc_now_ns() + (uint64_t)(timeout_ms ? timeout_ms : c->timeout_ms) * 1000000ull;
	c->failed &= ~(1ull << agg);
	client_ctl_connect(c, a);
	client_agg_settle(c); /* a refused connect: dead again at once */
	return 0;
}

int client_agg_joined(const struct client *c, size_t agg)
{
	if (agg >= c->naggs || c->aggs[agg].st == AGG_DEAD || c->aggs[agg].st == AGG_LEFT)
		return -1;
	return c->aggs[agg].st == AGG_READY;
}

/* ---- the watch ---- */

/* No completion from aggregator a for lim ms with chunks in flight: it
 * fails, and the message says which chunk waits and for what (its send
 * taken by the provider or not, its result), and whether the aggregator
 * still answers PING (a daemon that is alive but lost the chunk: a bug to
 * report, not a dead host). */
static void client_agg_stalled(struct client *c, struct client_agg *a, uint32_t lim, uint64_t now)
{
	const struct client_slot *old = NULL;
	char heard[64];

	for (uint32_t si = 0; si < a->window; si++) {
		const struct client_slot *s = &a->slots[si];
		if (s->req >= 0 && (!old || s->chunk < old->chunk))
			old = s;
	}
	if (a->heard_ns && now - a->heard_ns < (uint64_t)lim * 1000000ull)
		snprintf(heard, sizeof(heard), "it answered %.1f s ago", (now - a->heard_ns) / 1e9);
	else
		snprintf(heard, sizeof(heard), "no word from it either");
	if (!old) {
		client_agg_down(c, a, -ETIMEDOUT, "%s: no result for %u ms with %u chunks in flight (%s)",
				a->name, lim, a->inflight, heard);
		return;
	}
	client_agg_down(c, a, -ETIMEDOUT,
			"%s: no result for %u ms with %u chunks in flight; the oldest, chunk %" PRIu64
			" (seq %u, slot %u, %zu bytes, job handle %u, rank %u): %s, its result %s; %s",
			a->name, lim, a->inflight, old->chunk, old->seq, old->si, old->len, a->job_handle,
			c->rank,
			old->send_pending ? "its send not yet taken by the provider"
			: old->send_posted ? "its send not completed"
					   : "its send completed",
			old->got ? "in" : old->mc_exp ? "expected from the multicast group" : "not come",
			heard);
}

void client_agg_watch(struct client *c, uint64_t now)
{
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		if (a->rejoin_ns && a->st == AGG_READY)
			a->rejoin_ns = 0;
		else if (a->rejoin_ns && a->st != AGG_DEAD && now > a->rejoin_ns)
			client_agg_down(c, a, -ETIMEDOUT, "%s: joining again: not READY in time (%s)",
					a->name, client_agg_state_what[a->st]);
	}
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		if (a->st != AGG_READY || !a->inflight)
			continue;
		uint32_t lim = (a->timeout_ms && a->timeout_ms < c->timeout_ms ? a->timeout_ms
									: c->timeout_ms) +
			       CLIENT_SILENCE_GRACE_MS;
		if (now - a->last_ns > (uint64_t)lim * 1000000ull)
			client_agg_stalled(c, a, lim, now);
	}
}

/* ---- drain: an aggregator that asks to be left (wire version 5) ---- */

#define CLIENT_RETIRE_MS 500u /* LEAVE written and the daemon's close, at most */

uint64_t client_draining(const struct client *c)
{
	uint64_t bits = 0;

	for (size_t ai = 0; ai < c->naggs; ai++)
		if (c->aggs[ai].draining && c->aggs[ai].st != AGG_DEAD && c->aggs[ai].st != AGG_LEFT)
			bits |= 1ull << ai;
	return bits;
}

int client_agg_retire(struct client *c, size_t agg)
{
	if (agg >= c->naggs)
		return -EINVAL;
	struct client_agg *a = &c->aggs[agg];
	if (a->st == AGG_LEFT)
		return 0;
	if (a->st != AGG_READY)
		return -ENOTCONN;
	if (a->inflight || !STAILQ_EMPTY(&a->queue) || !defer_empty(&a->deferred))
		return -EBUSY;
	for (uint32_t si = 0; si < c->window; si++)
		if (a->slots[si].req >= 0)
			return -EBUSY;
	int rc = client_ctl_leave_flush(c, a, sc_now_ns() + CLIENT_RETIRE_MS * 1000000ull);
	client_agg_settle(c);
	if (rc && a->st != AGG_DEAD) /* a daemon that does not read: not a clean leave */
		client_agg_fail(c, a, rc, "%s: LEAVE not written within %u ms: %s", a->name,
				CLIENT_RETIRE_MS, strerror(-rc));
	if (a->st == AGG_DEAD)
		return rc ? rc : -ECONNRESET; /* failed on the way out: reported as any fault */
	/* Cut off the way a fence cuts (client_slot_fence: the endpoint
	 * closed, nothing of it lands afterwards), but not failed. */
	client_close_fd(a);
	client_slot_fence(c, agg);
	a->st = AGG_LEFT;
	SC_INFO("%s: left job 0x%llx (it drains)", a->name, (unsigned long long)c->job_id);
	return 0;
}
