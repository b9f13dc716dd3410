/* Admission of a new job: whether an aggregator takes a JOIN that starts a
 * job, what it grants and, when it refuses, by which rule. One pure
 * decision from the daemon's settings, its current load and the request's
 * shape, taken by the daemon (daemon/ctl_admit.c, admit_join) and by the
 * sizing model (tools/plan_model.c, `sumcastctl plan`), so that plan
 * refuses what the daemons refuse. No I/O, no allocation
 * (tests/unit/test_admit_rules.c).
 *
 * The rules, in the order the daemon applies them (docs/daemon.md,
 * "Admission"):
 *   sealed-chunk      a daemon with a key keeps ADMIT_SEAL_ROOM of each
 *                     chunk for the seal; a granted chunk of at most twice
 *                     that cannot carry data
 *   max-jobs          [job] max-jobs jobs are served already
 *   memory-share      the job alone needs more than [job] max-memory-share
 *                     of [job] memory-budget
 *   memory-budget     the job needs more than the budget has free
 *   receive-queue     no data thread's receive queue has room for the
 *                     job's posted receives, nor, for a job of lanes,
 *                     distinct threads each for its lane's share
 * The grant before them: the window per unit of weight up to max-window,
 * times the weight up to max-weight; the chunk up to max-chunk; then the
 * in-flight cap (common/grant.h), and for a multicast job the
 * multicast-inflight cap with one receiver. The memory a job needs counts
 * its bookkeeping once per lane (the data threads it is spread over:
 * admit_lanes), each lane holding the whole window's slot arrays. */
#ifndef SUMCAST_ADMIT_H
#define SUMCAST_ADMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "wire.h"

/* Room a sealed job keeps in each chunk buffer for the tag (a multiple of
 * 64 so that payloads stay aligned for every type). */
#define ADMIT_SEAL_ROOM 64u
/* A multicast job's NACK buffer per (slot, rank). */
#define ADMIT_NACK_UNIT 256u

/* The daemon's bookkeeping per job: struct job, and per rank, per slot and
 * per (slot, rank) on the heap. The daemon passes its sizeof()s
 * (daemon/job.h, job_admit_sizes); a model without the daemon's structs
 * uses ADMIT_SIZES_LP64, which tests/unit/test_admit.c checks against
 * them. */
struct admit_sizes {
	uint32_t job, rank, slot, rslot;
};
#define ADMIT_SIZES_LP64 ((struct admit_sizes){ 976, 192, 128, 272 })

/* The daemon's settings that admission reads ([job], [auth], [fabric]). */
struct admit_limits {
	uint64_t max_jobs;
	uint64_t memory_budget;
	double max_memory_share;
	uint64_t max_window;   /* per unit of weight */
	uint64_t max_weight;
	uint64_t max_chunk;
	uint64_t max_inflight;
	uint64_t min_chunk;
	uint64_t mc_inflight;  /* 0: no multicast cap */
	bool sealed;           /* the daemon has a key */
	bool mcast;            /* results by multicast unless the job asks for unicast */
	uint32_t job_threads;  /* [data] job-threads: the lanes of a job (0: every data thread) */
	struct admit_sizes sizes;
};

/* What the daemon holds when the JOIN comes. Data thread i has rx_free[i]
 * receives of room in its queue (UINT64_MAX: the provider reports no
 * limit) and thread_jobs[i] jobs. A job's lanes go to the threads with the
 * fewest jobs, ties taken in turn from thread `tie` (the daemon moves it
 * with each job). */
struct admit_load {
	uint64_t njobs;
	uint64_t mem_used;
	unsigned nthreads;
	const uint64_t *rx_free;
	const uint32_t *thread_jobs;
	unsigned tie;
};

/* The JOIN's shape. */
struct admit_ask {
	uint32_t nranks;
	uint32_t window;  /* per unit of weight */
	uint32_t chunk;
	uint32_t weight;  /* 0: 1 */
	bool has16;       /* f16 or bf16 among its types: an accumulator of 2 chunks */
	bool unicast;     /* asks for unicast results */
	bool one_lane;    /* its ranks cannot address lanes (protocol below 7) */
};

enum admit_rule {
	ADMIT_OK = 0,
	ADMIT_SEALED_CHUNK,
	ADMIT_MAX_JOBS,
	ADMIT_MEMORY_SHARE,
	ADMIT_MEMORY_BUDGET,
	ADMIT_RECEIVE_QUEUE,
};

struct admit_verdict {
	enum admit_rule rule;
	uint32_t weight;              /* granted */
	uint32_t window, chunk;       /* granted */
	uint32_t asked_window, asked_chunk; /* before the in-flight caps */
	bool mc;                      /* results by multicast */
	bool mc_capped;               /* the multicast cap, not max-inflight, set the grant */
	uint32_t lanes;               /* data threads it is spread over (admit_lanes, or 1
				       * where they lack room for its lanes' receives) */
	int lane_thread[WIRE_LANES_MAX]; /* lane k's data thread (k < lanes; lane 0's is thread) */
	uint64_t mem_bytes;           /* charged to the budget */
	uint64_t book_bytes;          /* of which bookkeeping (each lane's) */
	uint64_t recvs;               /* receives the job keeps posted */
	uint64_t share_bytes;         /* max-memory-share of the budget */
	uint64_t budget_free;         /* the budget's free bytes before the job */
	uint64_t rx_room;             /* the most room any data thread has */
	uint64_t lane_recvs;          /* receives lane 0 keeps posted (recvs with one lane) */
	int thread;                   /* the data thread it goes to; -1 when refused */
};

/* The decision; every field of *v is written. */
void admit_decide(const struct admit_limits *lim, const struct admit_load *load,
		  const struct admit_ask *ask, struct admit_verdict *v);
/* The rule's name as operators read it: "admitted", "sealed-chunk",
 * "max-jobs", "memory-share", "memory-budget", "receive-queue". */
const char *admit_rule_name(enum admit_rule r);

/* Bookkeeping (one lane's) and buffer region of a job of these parameters;
 * admit_decide charges the region plus the bookkeeping once per lane. */
uint64_t admit_book_bytes(const struct admit_sizes *sz, uint32_t window, uint32_t nranks);
uint64_t admit_region_bytes(uint32_t window, uint32_t chunk, uint32_t nranks, bool has16, bool mc);
/* The data threads a job of this window is spread over (daemon/job.h,
 * "Lanes"): [data] job-threads of the nthreads (0: all of them), at most
 * WIRE_LANES_MAX and the window; one for a multicast job (one sender per
 * group) or ranks that cannot address lanes. admit_decide takes one where
 * the threads lack room for the lanes' receives and one thread has room
 * for the whole job's. */
uint32_t admit_lanes(const struct admit_limits *lim, unsigned nthreads, uint32_t window, bool mc,
		     bool one_lane);
/* Slots of a window of w on lane `lane` of `lanes`: s < w with s % lanes == lane. */
static inline uint32_t admit_lane_window(uint32_t w, uint32_t lane, uint32_t lanes)
{
	return w > lane ? (w - lane + lanes - 1) / lanes : 0;
}
/* Receives a job keeps posted: one per (slot, rank), twice that with multicast. */
uint64_t admit_recvs(uint32_t window, uint32_t nranks, bool mc);

#endif
