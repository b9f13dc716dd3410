/* The data plane as the control thread sees it.
 *
 * Data-plane threads: each owns one fabric endpoint (on shm one more per
 * job: dp_thread.c), the jobs assigned to it and their slots, and polls its
 * completion queues; it never runs inside the event loop. The control
 * thread gives it commands (dthread_cmd) and hears back through an event
 * queue (struct evq) that wakes the event loop with an eventfd. What the data-plane files share among themselves is in dp.h. */
#ifndef SUMCASTD_DP_API_H
#define SUMCASTD_DP_API_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "defer.h"
#include "stats.h"

struct addr_ref;
struct dcmd;
struct dp_sweep;
struct fabric;
struct job;
struct result_ops;
struct settings;
struct slot;
struct slot_ops;
struct spread_item;

/* The lists of job.h's objects (sys/queue.h), named here, where the
 * threads and the daemon that hold them are. */
SLIST_HEAD(job_list, job);     /* struct job, by link or dlink */
STAILQ_HEAD(dcmd_list, dcmd);  /* struct dcmd, by link: FIFO */
STAILQ_HEAD(spread_list, spread_item); /* dp_result.c: FIFO */

/* Events back to the control thread (multi-producer, one consumer). */
struct evq {
	pthread_mutex_t lock;
	struct dcmd_list q;
	int efd; /* eventfd, readable when events are queued */
};

int evq_init(struct evq *q);
void evq_fini(struct evq *q);
void evq_push(struct evq *q, struct dcmd *ev);
/* Moves every queued event into out (FIFO, out initialised here), clears
 * the eventfd. */
void evq_take(struct evq *q, struct dcmd_list *out);

struct dthread {
	unsigned index;
	int cpu; /* -1: not pinned */
	struct fabric *fabric;
	const struct result_ops *result;  /* how results reach the ranks (dp_result.h) */
	const struct slot_ops *slot_ops;  /* what the slot state machine calls (dp.h) */
	struct evq *evq;
	pthread_t tid;
	bool started;
	_Atomic bool stop;
	/* Receives the jobs may have posted at once: the provider's receive
	 * queue (fi_info rx_attr->size; UINT64_MAX: unknown) less the sweep's
	 * (dp_sweep.c). Set at start. */
	uint64_t rx_queue;
	unsigned spin_us, sleep_us;
	/* Each job gets an endpoint of its own (sibling of this one, own AV and
	 * CQ): on providers where one peer that never takes a message stalls
	 * every later send of the sender's endpoint (shm; dp_thread.c). */
	bool isolate;
	/* At most one result send in flight per rank (dp_result.c): [data]
	 * result-one-per-rank on shm (res_one), and res_hold while the
	 * thread's jobs all have one window (dthread_hold_update). */
	bool res_one, res_hold;
	size_t cq_size; /* of the thread's CQ and of the jobs' own */
	int wake_fd; /* eventfd: a command is queued (wakes a thread blocked in fabric_wait) */
	char mc_iface[64]; /* multicast jobs: the sending interface's address */

	/* command queue */
	pthread_mutex_t cmd_lock;
	struct dcmd_list cmds;
	_Atomic int cmd_pending;
	/* results other lanes' threads hand this one to send (dp_result.c,
	 * "Spread"): pushed under spread_lock; a push wakes the thread when it
	 * blocks in fabric_wait (waiting) */
	pthread_mutex_t spread_lock;
	struct spread_list spread_in;
	_Atomic int spread_pending;
	_Atomic bool waiting;

	/* owned by the data thread */
	struct job_list jobs;    /* by dlink, the newest first */
	struct defer_queue retry; /* slots with a post to retry (defer.h, any order) */
	struct addr_ref *addrs; /* address cache (dp_av.c) */
	struct dp_sweep *sweep; /* unexpected messages (dp_sweep.c) */
	struct spread_list spread_q; /* taken from spread_in, not all sent yet */
	size_t naddrs, addrs_cap;
	uint64_t next_scan_ns;

	/* owned by the control thread */
	uint32_t njobs;
	uint64_t rx_reserved; /* receives its jobs post: window x nranks each */
	uint64_t load_busy_seen; /* busy_ns at the last load sample (daemon_load_pm) */

	/* written by the data thread only */
	struct stats stats;
	_Atomic uint64_t busy_ns, idle_ns;
	_Atomic uint64_t heartbeat_ns; /* last poll loop pass (watchdog) */
};

/* Opens the endpoint (provider, node from settings), starts the thread. */
int dthread_start(struct dthread *t, unsigned index, int cpu, const struct settings *s,
		  struct evq *evq);
/* Stops and joins the thread (once; a thread never started: nothing). A
 * daemon halts all its threads before it stops any: a running thread may
 * hand results to another (dp_result.c, "Spread"). */
void dthread_halt(struct dthread *t);
/* Halts the thread, then releases every job's memory (jobs still
 * attached are left to the caller to free) and closes the endpoint. */
void dthread_stop(struct dthread *t);
/* Whether a command or a handed-over result wakes the thread at once when
 * it idles (it blocks on its CQ's wait object and the eventfd): else it
 * sleeps [data] idle-sleep between polls. */
static inline bool dthread_wakeable(const struct dthread *t)
{
	return t->wake_fd >= 0 && !t->isolate;
}
/* Queues a command (ADD_JOB, ADD_RANK, REMOVE_JOB; job.h) for the thread. */
void dthread_cmd(struct dthread *t, struct dcmd *c);

#endif
