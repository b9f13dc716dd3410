/* Unexpected messages: tagged messages that match no posted receive.
 *
 * libfabric 1.17's rxm (tcp;ofi_rxm, verbs;ofi_rxm) keeps each one in its
 * unexpected queue, in a receive buffer from a pool that grows without
 * limit and is never given back, until a receive matching it is posted.
 * A sender that guesses no tag at all (60,000 x 16 KB) took the daemon
 * from 77 MB to 1,068 MB for good, and matching then walked that queue.
 *
 * A legitimate message always finds its receive posted: a rank sends chunk
 * c only after it has the result of chunk c - window (client_data.c), and
 * the daemon posts rank r's receive for the slot of chunk c as soon as r's
 * contribution to c - window is reduced (deterministic jobs: once the slot
 * completes), before any result of c - window is sent; JOIN_OK goes out
 * after the rank's first receives are posted. A NACK (multicast jobs) has a
 * receive of its own per (slot, rank), posted with the rank's first
 * receives and again before the NACK is acted on; a rank sends one for
 * chunk c only before it sends c + window. The one exception is a
 * receive the provider refused with -FI_EAGAIN (RS_REPOST: its message may
 * be waiting until the repost). So while no receive of this thread waits
 * for a repost, whatever sits in the unexpected queue is foreign (or late:
 * a job that ended) and is discarded.
 *
 * How: a tagged "peek" for any tag with FI_DISCARD (fi_trecvmsg with
 * FI_PEEK | FI_DISCARD) drops the oldest unexpected message and writes a
 * completion carrying its tag, or an error completion -FI_ENOMSG when
 * there is none; rxm frees the buffer (for a rendezvous message nothing
 * is read from the sender). Every peek first progresses the endpoint, so
 * an idle thread peeks once a millisecond, and one that found something
 * peeks again at once, doubling up to SWEEP_BURST_MAX per pass, until it is
 * empty. Each discard is counted (errors{kind="unexpected"}) and reported
 * at most once a second.
 *
 * A receive refused with -FI_EAGAIN cannot happen on rxm: admission keeps
 * the receives a data thread posts within the provider's receive queue
 * (ctl_job.c). Should one still wait for its repost, sweeping pauses
 * until it is posted: its rank's message may be the one in the queue.
 *
 * Only rxm is known to do this: other providers (shm, efa) are left alone
 * (shm 1.17 would take FI_PEEK as an ordinary receive). */
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "log.h"

#define SWEEP_IDLE_NS 1000000ull     /* an empty queue is looked at again after 1 ms */
#define SWEEP_BURST_MAX 128u         /* peeks posted in one pass (and a quarter of the CQ) */
#define SWEEP_LOG_NS 1000000000ull

int dp_sweep_init(struct dthread *t, size_t cq_size)
{
	struct dp_sweep *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->op.kind = DOP_SWEEP;
	w->burst = 1;
	/* Each peek writes one completion: leave the CQ room for the rest. */
	w->burst_max = cq_size / 4 < SWEEP_BURST_MAX ? (uint32_t)(cq_size / 4) : SWEEP_BURST_MAX;
	if (!w->burst_max)
		w->burst_max = 1;
	w->on = strstr(fabric_provider(t->fabric), "ofi_rxm") != NULL;
	t->sweep = w;
	if (!w->on)
		SC_INFO("data thread %u: provider %s: unexpected messages are left to the provider (no discard)",
			t->index, fabric_provider(t->fabric));
	return 0;
}

void dp_sweep_fini(struct dthread *t)
{
	free(t->sweep);
	t->sweep = NULL;
}

/* A receive of this thread refused with -FI_EAGAIN: its rank's message may
 * be in the unexpected queue, waiting for the repost. */
static bool sweep_recv_waiting(const struct dthread *t)
{
	for (const struct slot *s = t->retry_head; s; s = s->retry_next)
		for (uint32_t r = 0; r < s->job->nranks; r++)
			if (job_rslot(s->job, s->index, r)->state == RS_REPOST ||
			    job_rslot(s->job, s->index, r)->nstate == RS_REPOST)
				return true;
	return false;
}

/* Drops the oldest unexpected message, whatever its tag. */
static int sweep_peek(struct dthread *t, struct dp_sweep *w)
{
	struct fi_msg_tagged msg = {
		.addr = FI_ADDR_UNSPEC,
		.tag = 0,
		.ignore = ~0ull,
		.context = &w->op.op.fi,
	};

	return (int)fi_trecvmsg(t->fabric->ep, &msg, FI_PEEK | FI_DISCARD);
}

static bool sweep_posted(struct dthread *t, struct dp_sweep *w, int rc)
{
	if (rc == 0) {
		w->inflight++;
		return true;
	}
	if (rc != -FI_EAGAIN) {
		w->on = false;
		SC_ERR("data thread %u: peeking at unexpected messages failed: %s; they are no longer discarded",
		       t->index, fi_strerror(-rc));
	}
	return false;
}

void dp_sweep_kick(struct dthread *t)
{
	t->sweep->next_ns = 0;
}

void dp_sweep_run(struct dthread *t, uint64_t now)
{
	struct dp_sweep *w = t->sweep;

	if (!w->on || w->inflight || now < w->next_ns)
		return;
	w->found_empty = false;
	w->next_ns = now + SWEEP_IDLE_NS;
	if (sweep_recv_waiting(t)) {
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "data thread %u: a receive waits for its repost (provider queue full): unexpected messages are kept until it is posted",
				 t->index);
		return;
	}
	for (uint32_t i = 0; i < w->burst; i++)
		if (!sweep_posted(t, w, sweep_peek(t, w)))
			break;
}

static void sweep_discarded(struct dthread *t, struct dp_sweep *w, uint64_t tag)
{
	dp_count_err(t, ERR_UNEXPECTED);
	w->discarded++;
	w->last_tag = tag;
}

void dp_sweep_done(struct dthread *t, const struct fabric_cqe *e, uint64_t now)
{
	struct dp_sweep *w = t->sweep;

	if (w->inflight)
		w->inflight--;
	if (e->err == -FI_ENOMSG) {
		w->found_empty = true;
	} else if (e->err) {
		w->found_empty = true;
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "data thread %u: peek at unexpected messages: %s",
				 t->index, fi_strerror(-e->err));
	} else {
		sweep_discarded(t, w, e->tag);
	}
	if (w->inflight)
		return;
	/* The burst is over: all found something, so look again at once
	 * with more; or the queue is empty. */
	if (w->found_empty) {
		w->burst = 1;
	} else {
		w->burst = w->burst * 2 > w->burst_max ? w->burst_max : w->burst * 2;
		w->next_ns = now;
	}
	if (w->discarded && now - w->last_log_ns >= SWEEP_LOG_NS) {
		uint64_t tag = w->last_tag;
		SC_WARN("data thread %u: discarded %" PRIu64 " unexpected message(s) that matched no receive (last: tag 0x%016" PRIx64 ", kind 0x%x job handle %u rank %u slot %u)",
			t->index, w->discarded, tag, wire_tag_kind(tag), wire_tag_job(tag), wire_tag_rank(tag),
			wire_tag_slot(tag));
		w->discarded = 0;
		w->last_log_ns = now;
	}
}
