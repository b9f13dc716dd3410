/* Unexpected messages: tagged messages that match no posted receive.
 *
 * libfabric 1.17's rxm (tcp;ofi_rxm, verbs;ofi_rxm) keeps each one in its
 * unexpected queue, in a receive buffer (16 KiB + header) from a pool that
 * grows without limit and is never given back, until a receive matching it
 * is posted. A sender that guesses no tag at all (60,000 x 4 KiB in about a
 * second) took the daemon from 77 MB to 1,068 MB for good.
 *
 * A legitimate message always finds its receive posted: a rank sends chunk
 * c only after it has the result of chunk c - window (client/client_slot.c), and
 * the daemon posts rank r's receive for the slot of chunk c as soon as r's
 * contribution to c - window is reduced (deterministic jobs: once the slot
 * completes), before any result of c - window is sent; JOIN_OK goes out
 * after the rank's first receives are posted. A NACK (multicast jobs) has a
 * receive of its own per (slot, rank), posted with the rank's first
 * receives and again before the NACK is acted on; a rank sends one for
 * chunk c only before it sends c + window. Receives name their rank's
 * address (dp_job.c), so another endpoint's message under a rank's tag
 * never takes them. The one exception is a receive the provider refused
 * with -FI_EAGAIN (RS_REPOST: its message may be waiting until the
 * repost). So while no receive of this thread waits for a repost, whatever
 * sits in the unexpected queue is foreign (or late: a job that ended) and
 * is discarded.
 *
 * How, first: fi_trecvmsg with FI_PEEK | FI_DISCARD for any tag from
 * anyone (fabric_tdiscard) drops the oldest unexpected message without
 * touching its data or its sender's connection. That matters: rxm 1.17
 * keeps an unexpected rendezvous message (larger than the eager limit:
 * only its header has arrived) after its sender's connection is shut down
 * (the sender closed its endpoint, or exited): rxm_close_conn() sets
 * conn->msg_ep to NULL and leaves the message queued, and a receive that
 * matches it then reads the payload through that NULL endpoint
 * (rxm_rndv_read -> fi_readv): SIGSEGV. A sender that sends a large
 * message and closes before the sweep took it (a rank whose aggregator it
 * fenced while the aggregator was stopped; anyone who reaches the data
 * port) killed the daemon (functional/test_daemon_departed). But each such
 * peek progresses the endpoint, which takes in up to 32 more messages, so
 * a pass peeks at most SWEEP_SAFE_BURST times, and a flood outruns it.
 *
 * How, in a flood (the queue not once found empty for SWEEP_FAST_AFTER_NS,
 * 10 ms, and SWEEP_FAST_AFTER_COUNT, 64, messages discarded since: a
 * backlog of late messages, a few windows of chunks per rank of a job
 * that ended, is gone before either on a quiet host, and before the count
 * on a loaded one, where 10 ms pass while the daemon waits for a core; a
 * flood sender's 10 ms is thousands of messages), until the queue is found
 * empty, and at once for any run of messages that starts within
 * SWEEP_FLOOD_LINGER_NS, 1 s, of a flood's last discard (a flood outruns
 * the sender's socket now and then, and each new 10 ms of FI_DISCARD took
 * in another backlog: the peak of 60,000 x 4 KiB fell from +17-21 MiB to
 * +14-15 MiB, test_daemon_attack_flood): a receive for any
 * tag from anyone into a 64-byte scratch buffer, cancelled at once. Posting it takes the oldest unexpected message if
 * there is one (eager: the first 64 bytes are copied, the rest dropped;
 * rendezvous: 64 bytes are read from the sender, which then completes) and
 * completes it truncated; otherwise the cancel removes it. Nothing can
 * arrive in between: no receive is posted between the two calls, and a
 * message that did arrive would match an older (earlier-posted) receive
 * first. Neither call progresses the endpoint, nor does reading the error
 * completions they leave (fabric_cq_poll reads errors with fi_cq_readerr):
 * a whole burst costs one progress at the next CQ read, which takes in at
 * most rxm's 32 messages, so a burst of SWEEP_BURST_MAX empties the queue
 * faster than any sender fills it. (FI_PEEK | FI_DISCARD alone progressed
 * once per message discarded, and each progress took in up to 32 more: a
 * flood of small messages outran it 32 to 1.) Such a receive does read a
 * rendezvous message through its connection: a sender that floods for
 * longer than SWEEP_FAST_AFTER_NS and then leaves a large message behind as it closes can
 * still crash the daemon (docs/daemon.md, "Threat model").
 *
 * When: a thread sweeps every SWEEP_INTERVAL_NS (100 us: one look, well
 * under 1 % of a core; k x 100 us while its jobs keep k x 512 receives or
 * more posted; doubled after each look in a row that found nothing, up to
 * SWEEP_QUIET_MAX_NS, 1 ms: sweep_interval), and at once again, with a
 * full burst, while the last one found something; a thread woken from its
 * idle wait whose wake-up completed nothing sweeps at once (a foreign
 * message wakes it but completes nothing). What the daemon holds is then
 * rxm's shared receive buffers ([fabric] rx-buffers,
 * FI_OFI_RXM_MSG_RX_SIZE) plus what arrives between two sweeps:
 * docs/daemon.md, "Threat model". Each discard is counted
 * (errors{kind="unexpected"}) and reported at most once a second.
 *
 * A receive refused with -FI_EAGAIN cannot happen on rxm: admission keeps
 * the receives a data thread posts within the provider's receive queue
 * (ctl_job.c). Should one still wait for its repost, sweeping pauses
 * until it is posted: its rank's message may be the one in the queue.
 *
 * Only rxm is known to do this: other providers (shm, efa) are left alone. */
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "log.h"

#define SWEEP_INTERVAL_NS 100000ull /* an empty queue is looked at again after 100 us */
#define SWEEP_POSTED_UNIT 512u      /* ... per this many receives the jobs keep posted */
#define SWEEP_BURST_MAX 256u        /* receives posted in one pass (and a quarter of the CQ) */
#define SWEEP_SCRATCH 64u           /* bytes kept of a discarded message (never read) */
#define SWEEP_SAFE_BURST 8u         /* FI_DISCARD peeks in one pass (each one progresses) */
#define SWEEP_FAST_AFTER_NS 10000000ull /* a queue never empty for this long ... */
#define SWEEP_FAST_AFTER_COUNT 64u      /* ... and this many discarded is a flood */
#define SWEEP_FLOOD_LINGER_NS 1000000000ull /* a flood's next burst, this soon, is one at once */
#define SWEEP_LOG_NS 1000000000ull
#define SWEEP_QUIET_MAX_NS 1000000ull /* the longest wait after looks that found nothing */
#define SWEEP_QUIET_SHIFT 4u           /* 100 us doubled at most this often (1.6 ms, capped) */

int dp_sweep_init(struct dthread *t, size_t cq_size, bool on)
{
	struct dp_sweep *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	bool rxm = strstr(fabric_provider(t->fabric), "ofi_rxm") != NULL;

	w->on = on && rxm;
	/* Each receive writes one completion, and takes an entry of the
	 * provider's receive queue while posted: a quarter of either at most,
	 * the rest for the jobs (t->rx_queue). */
	uint64_t room = t->rx_queue < cq_size ? t->rx_queue : cq_size;
	w->burst_max = room / 4 < SWEEP_BURST_MAX ? (uint32_t)(room / 4) : SWEEP_BURST_MAX;
	if (!w->burst_max)
		w->burst_max = 1;
	w->ops = calloc(w->burst_max, sizeof(*w->ops));
	w->free = calloc(w->burst_max, sizeof(*w->free));
	w->scratch = aligned_alloc(64, SWEEP_SCRATCH);
	if (!w->ops || !w->free || !w->scratch) {
		rc = -ENOMEM;
		goto err;
	}
	for (uint32_t i = 0; i < w->burst_max; i++) {
		w->ops[i].kind = DOP_SWEEP;
		w->ops[i].slot = i;
		w->free[i] = i;
	}
	w->nfree = w->burst_max;
	if (w->on) {
		rc = fabric_mr_reg(t->fabric, w->scratch, SWEEP_SCRATCH, &w->mr);
		if (rc) {
			SC_ERR("data thread %u: registering the sweep's buffer failed: %s", t->index,
			       fi_strerror(-rc));
			goto err;
		}
		w->registered = true;
	} else if (rxm) {
		SC_WARN("data thread %u: [data] sweep = false: unexpected messages are left to the provider (no discard), which holds each until a receive matches it",
			t->index);
	} else {
		SC_INFO("data thread %u: provider %s: unexpected messages are left to the provider (no discard)",
			t->index, fabric_provider(t->fabric));
	}
	t->sweep = w;
	return 0;

err:
	free(w->scratch);
	free(w->free);
	free(w->ops);
	free(w);
	return rc;
}

void dp_sweep_fini(struct dthread *t)
{
	struct dp_sweep *w = t->sweep;

	if (!w)
		return;
	if (w->registered)
		fabric_mr_dereg(&w->mr);
	free(w->scratch);
	free(w->free);
	free(w->ops);
	free(w);
	t->sweep = NULL;
}

/* A receive of this thread refused with -FI_EAGAIN: its rank's message may
 * be in the unexpected queue, waiting for the repost. */
static bool sweep_recv_waiting(const struct dthread *t)
{
	const struct defer *d;

	STAILQ_FOREACH(d, &t->retry.head, link) {
		const struct slot *s = container_of(d, struct slot, retry);
		for (uint32_t r = 0; r < s->job->nranks; r++)
			if (job_rslot(s->job, s->index, r)->state == RS_REPOST ||
			    job_rslot(s->job, s->index, r)->nstate == RS_REPOST)
				return true;
	}
	return false;
}

/* Takes the oldest unexpected message, whatever its tag and sender, or
 * nothing: 0 (one completion will come), or a negative FI_E*. */
static int sweep_take(struct dthread *t, struct dp_sweep *w, struct dop *o)
{
	if (!w->fast)
		return fabric_tdiscard(t->fabric, FI_ADDR_UNSPEC, 0, ~0ull, &o->op);

	int rc = fabric_trecv(t->fabric, w->scratch, SWEEP_SCRATCH, w->mr.desc, FI_ADDR_UNSPEC, 0, ~0ull,
			      &o->op);

	if (rc == 0)
		fabric_cancel(t->fabric, &o->op);
	return rc;
}

void dp_sweep_kick(struct dthread *t)
{
	t->sweep->next_ns = 0;
}

/* rxm's cancel searches the posted receives from the oldest, and the
 * sweep's receive is the newest: each look walks the jobs' receives
 * (~25 % of a data thread at 4,096 posted, every 100 us:
 * docs/journal/2026-11-26-aggregator-receives.md). The wait between two
 * looks that found nothing grows with them, so that the walk costs what
 * 512 receives cost every 100 us; one that finds something goes on at
 * once, as ever.
 *
 * And it doubles with each look in a row that found nothing, up to
 * SWEEP_QUIET_MAX_NS: a look progresses the endpoint and leaves an
 * FI_ENOMSG completion to read, while a thread busy with its jobs'
 * traffic progresses it anyway (at W = 8 the looks were ~10 % of the
 * data threads' CPU, most of it receiving they would have done; backing
 * off saved no measurable bandwidth there:
 * docs/journal/2026-11-26-w8-gap.md). A thread that is not busy
 * blocks, and a foreign message that wakes it is looked at at once
 * (dp_sweep_kick); so only a message that comes while the thread works
 * waits longer, at most SWEEP_QUIET_MAX_NS, and the first one found
 * brings the look back to every pass. */
static uint64_t sweep_interval(const struct dp_sweep *w)
{
	uint64_t k = w->posted / SWEEP_POSTED_UNIT;
	uint64_t base = SWEEP_INTERVAL_NS * (k > 1 ? k : 1);
	uint64_t quiet = SWEEP_INTERVAL_NS << (w->empty < SWEEP_QUIET_SHIFT ? w->empty : SWEEP_QUIET_SHIFT);

	if (quiet > SWEEP_QUIET_MAX_NS)
		quiet = SWEEP_QUIET_MAX_NS;
	return base > quiet ? base : quiet;
}

void dp_sweep_run(struct dthread *t, uint64_t now)
{
	struct dp_sweep *w = t->sweep;

	if (!w->on || now < w->next_ns || !w->nfree)
		return;
	w->next_ns = now + sweep_interval(w);
	if (sweep_recv_waiting(t)) {
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "data thread %u: a receive waits for its repost (provider queue full): unexpected messages are kept until it is posted",
				 t->index);
		return;
	}
	uint32_t n = !w->found ? 1 : w->fast || w->nfree < SWEEP_SAFE_BURST ? w->nfree : SWEEP_SAFE_BURST;
	w->found = false;
	for (uint32_t i = 0; i < n; i++) {
		struct dop *o = &w->ops[w->free[w->nfree - 1]];
		int rc = sweep_take(t, w, o);
		if (rc == -FI_EAGAIN)
			break;
		if (rc) {
			w->on = false;
			SC_ERR("data thread %u: discarding unexpected messages failed: %s; they are no longer discarded",
			       t->index, fi_strerror(-rc));
			break;
		}
		w->nfree--;
	}
}

bool dp_sweep_done(struct dthread *t, const struct fabric_cqe *e, uint64_t now)
{
	struct dp_sweep *w = t->sweep;
	struct dop *o = (struct dop *)e->op;

	w->free[w->nfree++] = o->slot;
	if (e->err == -FI_ECANCELED || e->err == -FI_ENOMSG) {
		/* The queue was empty: whatever comes next is looked at first,
		 * and the next look waits longer (sweep_interval). */
		w->run_ns = 0;
		w->run_count = 0;
		w->fast = false;
		if (w->empty < SWEEP_QUIET_SHIFT)
			w->empty++;
		return false;
	}
	if (e->err && e->err != -FI_ETRUNC) {
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "data thread %u: discarding an unexpected message: %s",
				 t->index, fi_strerror(-e->err));
		return false;
	}
	dp_count_err(t, ERR_UNEXPECTED);
	w->discarded++;
	if (!w->run_ns)
		w->run_ns = now ? now : 1;
	w->run_count++;
	if (!w->fast && w->flood_ns && now - w->flood_ns < SWEEP_FLOOD_LINGER_NS) {
		w->fast = true; /* the same flood, after the queue ran dry for a moment */
	} else if (!w->fast && now - w->run_ns >= SWEEP_FAST_AFTER_NS &&
		   w->run_count >= SWEEP_FAST_AFTER_COUNT) {
		w->fast = true;
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "data thread %u: a flood of unexpected messages (none empty for %llu ms): discarding them by receive and cancel until the queue is empty",
				 t->index, (unsigned long long)(SWEEP_FAST_AFTER_NS / 1000000));
	}
	if (w->fast)
		w->flood_ns = now ? now : 1;
	w->last_tag = e->tag;
	/* There may be more: the next pass takes a whole burst. */
	w->found = true;
	w->empty = 0;
	w->next_ns = 0;
	if (now - w->last_log_ns >= SWEEP_LOG_NS) {
		uint64_t tag = w->last_tag;
		SC_WARN("data thread %u: discarded %" PRIu64 " unexpected message(s) that matched no receive (last: tag 0x%016" PRIx64 ", kind 0x%x job handle %u rank %u slot %u)",
			t->index, w->discarded, tag, wire_tag_kind(tag), wire_tag_job(tag), wire_tag_rank(tag),
			wire_tag_slot(tag));
		w->discarded = 0;
		w->last_log_ns = now;
	}
	return true;
}
