/* Private to the data-plane files; everything here runs on a data thread
 * (except dthread_cmd's producer side, dp_api.h). One file per object:
 *
 *   dp_queue.c   the command queue (control -> data) and the event queue
 *                (data -> control)
 *   dp_thread.c  the thread: poll loop, completion dispatch, commands,
 *                retries, periodic scans, idle policy, start/stop
 *   dp_job.c     a job on its data thread: add, add rank, receive posting,
 *                fail, remove, reap, stuck release, timeout
 *   dp_av.c      the fabric address cache (AV entries shared by ranks)
 *   dp_slot.c    the slot state machine: contributions, reduction,
 *                completion, free/reuse; no fabric calls of its own
 *   dp_result.c  result delivery (dp_result.h)
 *
 * The control plane never includes this header. */
#ifndef SUMCASTD_DP_H
#define SUMCASTD_DP_H

#include <stdarg.h>
#include <stdint.h>

#include "dp_api.h"
#include "fabric.h"
#include "job.h"
#include "stats.h"
#include "wire.h"

static inline void dp_count_err(struct dthread *t, unsigned kind)
{
	ctr_add(&t->stats.errors[kind], 1);
}

/* ---- dp_queue.c ---- */

/* Moves every queued command into out (FIFO, out initialised here). */
void dp_cmds_take(struct dthread *t, struct dcmd_list *out);

/* ---- dp_thread.c ---- */

/* Puts s on the thread's retry list (a receive or result send the provider
 * refused with -FI_EAGAIN); retried on the next loop pass. For the slot
 * machinery and result backends. */
void dthread_retry_add(struct dthread *t, struct slot *s);
/* Takes every slot of j off the retry list. */
void dthread_retry_purge(struct dthread *t, struct job *j);

/* ---- dp_sweep.c: unexpected messages ---- */

struct dp_sweep {
	struct dop *ops;     /* burst_max receive contexts (kind DOP_SWEEP, slot: index) */
	uint32_t *free;      /* indices of ops not posted */
	uint32_t nfree, burst_max;
	uint8_t *scratch;    /* where discarded messages land (never read) */
	struct fabric_mr mr;
	bool registered;
	bool on;             /* the provider keeps unexpected messages (rxm) */
	bool found;          /* the last pass took something: take a whole burst next */
	bool fast;           /* a flood: take by receive + cancel, not by FI_DISCARD */
	uint32_t empty;      /* looks in a row that found the queue empty: the wait
				before the next one doubles with each, up to
				SWEEP_QUIET_MAX_NS */
	uint32_t run_count;  /* messages discarded since the queue was last found empty */
	uint64_t run_ns;     /* when the queue was first found non-empty since it was
				last found empty (0: it is empty) */
	uint64_t next_ns;    /* when to look next */
	uint64_t flood_ns;   /* the last discard of a flood (fast): for SWEEP_FLOOD_LINGER_NS
				after it, the next run is a flood at once */
	uint64_t posted;     /* receives the thread's jobs keep posted (window x nranks
				each): the list each cancel walks */
	uint64_t discarded;  /* since the last log line */
	uint64_t last_tag, last_log_ns;
};

/* t->sweep, on for rxm providers unless !on ([data] sweep = false: only to
 * measure its cost). 0 or -ENOMEM. */
int dp_sweep_init(struct dthread *t, size_t cq_size, bool on);
void dp_sweep_fini(struct dthread *t);
/* Once per loop pass: discards unexpected messages when due. */
void dp_sweep_run(struct dthread *t, uint64_t now);
/* Something arrived while the thread was blocked and completed nothing
 * (a foreign message wakes the thread but completes nothing): sweep at
 * the next pass. */
void dp_sweep_kick(struct dthread *t);
/* A completion of one of its receives: true when it discarded a message
 * (counted), false when it found none. */
bool dp_sweep_done(struct dthread *t, const struct fabric_cqe *e, uint64_t now);

/* ---- dp_result.c: results spread over a job's lanes ---- */

/* Sends what other lanes' threads handed this one (dp_result.c,
 * "Spread"); an item whose send the provider refuses waits for the next
 * pass (the job fails, timeout, once it has waited the job's timeout),
 * the others go on. Returns the sends made. */
int dp_spread_run(struct dthread *t);
/* Frees what is left (the thread stopped). */
void dp_spread_fini(struct dthread *t);

/* ---- dp_av.c: rank addresses, one AV entry per distinct address ---- */

struct addr_ref {
	uint8_t addr[FABRIC_ADDR_MAX];
	size_t len;
	fi_addr_t fa;
	uint32_t refs;
};

/* A reference on addr's AV entry, inserted on first use. 0 or -errno/FI_E*. */
int dp_av_get(struct dthread *t, const uint8_t *addr, size_t len, fi_addr_t *out);
/* Drops one reference; the last one removes the entry from the AV. */
void dp_av_put(struct dthread *t, fi_addr_t fa);
/* References held on fa (0: not in the cache). */
uint32_t dp_av_refs(struct dthread *t, fi_addr_t fa);
/* Frees the cache (the AV itself goes with the endpoint). */
void dp_av_fini(struct dthread *t);

/* ---- dp_slot.c: the slot state machine ---- */

/* What the state machine needs from outside it. The data thread's set,
 * dp_slot_ops (dp_job.c), posts on the fabric and fails the job for real;
 * a unit test drives the state machine with its own. Result sends go
 * through t->result (dp_result.h). */
struct slot_ops {
	/* Rank r's buffer of slot s (rslot->buf) may take its next chunk: post
	 * the receive (rslot state POSTED, REPOST or, on a dead job, IDLE). */
	void (*post_recv)(struct dthread *t, struct job *j, uint32_t s, uint32_t r);
	/* The job cannot go on: sets j->dead, so the state machine takes no
	 * further contribution; reports once. */
	void (*fail)(struct dthread *t, struct job *j, enum wire_code code, const char *fmt,
		     va_list ap);
};

/* Rank r's message for slot s is in its buffer, rslot->imm and rslot->len
 * set, its receive not posted. Checks it against the slot, reduces it (or
 * holds it in deterministic mode, or keeps it pending while the slot still
 * sends seq - window), posts the rank's next receive, and on the last
 * contribution completes the slot and starts its result sends. A
 * contribution that does not fit fails the job (WIRE_E_DATA). */
void slot_contribute(struct dthread *t, struct job *j, uint32_t s, uint32_t r);
/* Rank r's NACK for chunk seq in slot s (wire.h, mode NACK): in a
 * multicast job the rank gets that result by unicast once (now when the
 * slot sends it, else when it completes; a NACK for the slot's next seq,
 * which came before the rank's data, is kept for it); a NACK for the
 * previous seq of the slot, whose result went by unicast, is ignored; any
 * other, or a second one for a chunk, fails the job. */
void slot_nack(struct dthread *t, struct job *j, uint32_t s, uint32_t r, uint32_t seq);
/* Every result send of sl completed: the slot takes seq + window, and the
 * contributions kept pending for it are taken in rank order. */
void slot_free(struct dthread *t, struct job *j, struct slot *sl);

/* ---- dp_job.c: a job on its data thread (job.h: the life of a job) ---- */

extern const struct slot_ops dp_slot_ops;

/* ADD_JOB: its own endpoint (t->isolate), the region registered, the result
 * backend initialised. */
int dp_job_add(struct dthread *t, struct job *j);
/* The job's own endpoint closed (t->isolate; a no-op on the thread's): its
 * operations and AV go with it, nothing posted on it touches memory again. */
void dp_job_ep_close(struct dthread *t, struct job *j);
/* ADD_RANK: the rank's address into the AV, its receives posted. */
int dp_rank_add(struct dthread *t, struct job *j, uint32_t r);
/* RANK_LEFT: rank r left cleanly. Its receives are cancelled; a chunk in
 * flight without its contribution fails the job (rank_left) now, a later
 * one in slot_contribute. */
void dp_rank_left(struct dthread *t, struct job *j, uint32_t r);
/* Multicast jobs: posts rank r's NACK receive of slot s (-FI_EAGAIN:
 * retried; nothing on a dead job or for a rank that left). */
void dp_nack_post(struct dthread *t, struct job *j, uint32_t s, uint32_t r);
/* Posts rank r's receive into its buffer of slot s (-FI_EAGAIN: retried). */
void dp_recv_post(struct dthread *t, struct job *j, uint32_t s, uint32_t r);
/* The job cannot go on: marks it dead, cancels its receives and asks the
 * control thread to abort it (DEV_ABORT). Once; later calls do nothing. */
void dp_job_fail(struct dthread *t, struct job *j, enum wire_code code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void dp_job_failv(struct dthread *t, struct job *j, enum wire_code code, const char *fmt,
		  va_list ap) __attribute__((format(printf, 4, 0)));
/* REMOVE_JOB (from job_end): dead, receives cancelled, reaped when idle. */
void dp_job_remove(struct dthread *t, struct job *j);
/* A removed job with no operation outstanding: unlinked, deregistered,
 * unmapped, REMOVE_JOB answered. Does nothing otherwise; called after each
 * completion of a dead job. */
void dp_job_reap(struct dthread *t, struct job *j);
/* A removed job still waiting for sends stuck-grace after REMOVE_JOB: its
 * rank addresses leave the AV, its buffers go back to the kernel
 * (DEV_RELEASED). Once. */
void dp_job_release_stuck(struct dthread *t, struct job *j, uint64_t now);
/* A job with a partially filled slot and no contribution for its timeout
 * fails with WIRE_E_TIMEOUT, naming the rank it waits for. */
void dp_job_check_timeout(struct dthread *t, struct job *j, uint64_t now);

#endif
