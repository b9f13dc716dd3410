/* Result delivery: how a slot's finished sum reaches the job's ranks.
 *
 * The slot state machine (dp_slot.c) and the data thread (dp_thread.c,
 * dp_job.c) only call these functions, so the way results travel (one
 * tagged send per rank; one send to a job's multicast group, dp_result.c) is
 * the backend's business, not the slots' or the reduction's. A backend
 * never allocates on the data path: whatever per-send state it needs is
 * set up in init(). */
#ifndef SUMCASTD_DP_RESULT_H
#define SUMCASTD_DP_RESULT_H

#include <stdbool.h>
#include <stdint.h>

struct dthread;
struct job;
struct slot;

struct result_ops {
	const char *name;
	/* Once per job on its data thread, after the job's memory is registered. */
	int (*init)(struct dthread *t, struct job *j);
	/* The result is in s->acc: s->len bytes, immediate data s->imm. Posts
	 * what the provider accepts now and queues the rest for retry
	 * (dthread_retry_add, dp.h); sets s->sends_left. Also called again from the
	 * retry list. Returns 1 when the whole result is delivered already (sends
	 * that complete nothing, e.g. injected: the slot may be reused now), 0
	 * when completions (on_send_complete) or retries are still to come, or a
	 * negative FI_E* the job cannot survive. */
	int (*send_result)(struct dthread *t, struct job *j, struct slot *s);
	/* One send of s completed (err 0 or negative FI_E*). Returns true once
	 * the whole result is delivered and the slot may be reused. */
	bool (*on_send_complete)(struct dthread *t, struct job *j, struct slot *s, uint32_t rank,
				 int err);
	/* Multicast jobs: rank asked for s's result by unicast (a NACK) while
	 * the slot still keeps it. As send_result. */
	int (*repair)(struct dthread *t, struct job *j, struct slot *s, uint32_t rank);
	/* A SENDING slot took a pending contribution: true when it may be
	 * freed now (every send completed, nothing keeps the result). */
	bool (*released)(struct dthread *t, struct job *j, struct slot *s);
	/* Once per job when it ends (every operation has completed). */
	void (*fini)(struct dthread *t, struct job *j);
};

/* One tagged send per rank, tag RESULT(result_key, rank, slot); in a
 * multicast job one send to the group for the ranks that take the result. */
extern const struct result_ops result_default_ops;

#endif
