/* Counters and histograms. Each set is written by exactly one thread (a
 * data thread, or the control thread) with relaxed atomic load + store, and
 * read by the control thread with relaxed loads when /metrics or /stats is
 * scraped. No locks, no read-modify-write on the data path. */
#ifndef SUMCASTD_STATS_H
#define SUMCASTD_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "wire.h"

/* errors{kind=...}: the wire codes (1..WIRE_CODE_MAX) then daemon kinds. */
enum err_kind {
	ERR_FOREIGN_SOURCE = WIRE_CODE_MAX + 1, /* DATA from an endpoint that is not the rank */
	ERR_TRUNCATED,      /* DATA longer than the job's chunk */
	ERR_BAD_HEADER,     /* control bytes that are not a protocol header */
	ERR_RECV_ERROR,     /* receive completed with an error */
	ERR_SEND_ERROR,     /* result send failed */
	ERR_NO_IMMEDIATE,   /* DATA without immediate data */
	ERR_CQ,             /* completion queue read failure */
	ERR_HANDSHAKE_TIMEOUT,
	ERR_CONN_LIMIT,     /* connection refused at accept: max-connections */
	ERR_ACCEPT,         /* accept() failed (EMFILE...): the listener paused */
	ERR_UNEXPECTED,     /* a tagged message no receive matched, discarded */
	ERR_UNSEALED,       /* DATA that did not open under the job key (sealed jobs), dropped */
	ERR_KIND_COUNT,
};

const char *err_kind_name(unsigned kind);

#define HIST_BUCKETS 14
extern const double hist_reduce_le[HIST_BUCKETS];    /* seconds, last is +Inf */
extern const double hist_straggler_le[HIST_BUCKETS];

struct hist {
	_Atomic uint64_t bucket[HIST_BUCKETS]; /* not cumulative */
	_Atomic uint64_t count;
	_Atomic uint64_t sum_ns;
};

/* Operations the provider refused with -FI_EAGAIN (each is retried). */
enum eagain_op { EAGAIN_SEND = 0, EAGAIN_RECV, EAGAIN_OPS };

struct stats {
	_Atomic uint64_t rx_bytes, tx_bytes, chunks;
	_Atomic uint64_t eagain[EAGAIN_OPS];
	/* result sends held until the rank's last one completed
	 * ([data] result-one-per-rank, dp_result.c), each counted once */
	_Atomic uint64_t result_holds;
	/* result messages this thread sent for a slot of another lane of the
	 * job ([data] result-spread, dp_result.c) */
	_Atomic uint64_t results_spread;
	/* multicast results: results and datagrams sent to groups, NACKs
	 * taken, unicast repairs sent, NACKs for results already sent by
	 * unicast (ignored) */
	_Atomic uint64_t mc_results, mc_datagrams, mc_tx_bytes, mc_nacks, mc_repairs, mc_nack_late;
	_Atomic uint64_t errors[ERR_KIND_COUNT];
	/* control thread: jobs whose ranks all moved off during a drain */
	_Atomic uint64_t jobs_drained;
	/* control thread: jobs whose ranks joined again into a running
	 * communicator (JOIN flag WIRE_JOIN_F_REJOIN), at READY */
	_Atomic uint64_t jobs_rejoined;
	/* control thread: JOINs answered JOIN_OK; jobs READY (every rank
	 * joined); jobs whose ranks all left cleanly, not asked to (a drain's
	 * are jobs_drained) */
	_Atomic uint64_t joins, jobs_started, jobs_finished;
	/* control thread, by wire code: JOINs refused (REFUSE) and jobs
	 * aborted (ABORT). WIRE_E_SHUTDOWN is the normal stop: joins refused
	 * while draining, jobs aborted at its end; /metrics shows it apart. */
	_Atomic uint64_t refused[WIRE_CODE_MAX + 1], aborted[WIRE_CODE_MAX + 1];
	struct hist reduce, straggler;
};

static inline void ctr_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

static inline uint64_t ctr_get(const _Atomic uint64_t *c)
{
	return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

static inline void hist_observe(struct hist *h, const double *le, uint64_t ns)
{
	double s = (double)ns * 1e-9;
	int i = 0;

	while (i < HIST_BUCKETS - 1 && s > le[i])
		i++;
	ctr_add(&h->bucket[i], 1);
	ctr_add(&h->count, 1);
	ctr_add(&h->sum_ns, ns);
}

/* sum += one (control thread, at scrape time). */
void stats_accumulate(struct stats *sum, const struct stats *one);

#endif
