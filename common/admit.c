/* Admission of a new job (admit.h): the grant, then the rules in the
 * daemon's order, the first that fails refusing. */
#include "admit.h"

#include <string.h>

#include "grant.h"
#include "wire.h"

uint64_t admit_book_bytes(const struct admit_sizes *sz, uint32_t window, uint32_t nranks)
{
	return sz->job + (uint64_t)nranks * sz->rank + (uint64_t)window * (sz->slot + (uint64_t)nranks * sz->rslot);
}

uint64_t admit_region_bytes(uint32_t window, uint32_t chunk, uint32_t nranks, bool has16, bool mc)
{
	return (uint64_t)window * chunk * (nranks + (has16 ? 2u : 1u)) +
	       (mc ? (uint64_t)window * nranks * ADMIT_NACK_UNIT : 0);
}

uint64_t admit_recvs(uint32_t window, uint32_t nranks, bool mc)
{
	return (uint64_t)window * nranks * (mc ? 2u : 1u);
}

uint32_t admit_lanes(const struct admit_limits *lim, unsigned nthreads, uint32_t window, bool mc,
		     bool one_lane)
{
	uint32_t want = lim->job_threads && lim->job_threads < nthreads ? lim->job_threads : nthreads;

	if (want > WIRE_LANES_MAX)
		want = WIRE_LANES_MAX;
	if (want > window)
		want = window;
	return want < 2 || mc || one_lane ? 1 : want;
}

const char *admit_rule_name(enum admit_rule r)
{
	switch (r) {
	case ADMIT_OK:
		return "admitted";
	case ADMIT_SEALED_CHUNK:
		return "sealed-chunk";
	case ADMIT_MAX_JOBS:
		return "max-jobs";
	case ADMIT_MEMORY_SHARE:
		return "memory-share";
	case ADMIT_MEMORY_BUDGET:
		return "memory-budget";
	case ADMIT_RECEIVE_QUEUE:
		return "receive-queue";
	}
	return "?";
}

/* The data thread with room for need receives and the fewest jobs, ties
 * to the first in turn from thread `from`, not one of used (NULL: none
 * used), or -1; room (NULL: not asked): the most room any thread has. */
static int admit_pick(const struct admit_load *load, uint64_t need, const bool *used, unsigned from,
		      uint64_t *room)
{
	unsigned nt = load->nthreads < 256 ? load->nthreads : 256; /* [data] threads: daemon/settings.c */
	int best = -1;

	if (room)
		*room = 0;
	for (unsigned n = 0; n < nt; n++) {
		unsigned i = (from + n) % nt;
		uint64_t free = load->rx_free[i];
		if (room && free > *room)
			*room = free;
		if ((!used || !used[i]) && free >= need &&
		    (best < 0 || load->thread_jobs[i] < load->thread_jobs[best]))
			best = (int)i;
	}
	return best;
}

/* The job's lanes on distinct data threads, each with room for its own
 * slots' receives (lane 0, with the most slots, first): the fewest jobs,
 * ties in turn from load->tie. false: they do not all fit. */
static bool admit_place(const struct admit_load *load, uint32_t lanes, uint32_t window,
			uint32_t nranks, bool mc, int *lane_thread)
{
	bool used[256] = { false };

	for (uint32_t k = 0; k < lanes; k++) {
		int best = admit_pick(load, admit_recvs(admit_lane_window(window, k, lanes), nranks, mc),
				      used, load->tie, NULL);
		if (best < 0)
			return false;
		used[best] = true;
		lane_thread[k] = best;
	}
	return true;
}

void admit_decide(const struct admit_limits *lim, const struct admit_load *load,
		  const struct admit_ask *ask, struct admit_verdict *v)
{
	uint32_t asked = ask->weight ? ask->weight : 1;
	uint64_t chunk_floor = lim->sealed ? 2 * ADMIT_SEAL_ROOM : 0;

	memset(v, 0, sizeof(*v));
	v->thread = -1;
	/* the window per unit of weight, times the weight granted: a job's
	 * credit, its share of the daemon against the other jobs'
	 * (docs/daemon.md, "Weights") */
	v->weight = asked < lim->max_weight ? asked : (uint32_t)lim->max_weight;
	uint64_t base = ask->window < lim->max_window ? ask->window : lim->max_window;
	v->asked_window = base * v->weight < WIRE_SLOTS_MAX ? (uint32_t)(base * v->weight) : WIRE_SLOTS_MAX;
	v->asked_chunk = ask->chunk < lim->max_chunk ? ask->chunk : (uint32_t)lim->max_chunk;
	struct grant gr = grant_inflight(v->asked_window, v->asked_chunk, ask->nranks, lim->max_inflight,
					 lim->min_chunk, chunk_floor);
	/* A multicast job's results: window x chunk within multicast-inflight,
	 * by the same rule with one receiver (the group): datagrams have no
	 * congestion control, the credit window is all that bounds what a
	 * job's results put into a node's switch port at once
	 * (docs/daemon.md, "Multicast results"). */
	v->mc = lim->mcast && !ask->unicast;
	if (v->mc && lim->mc_inflight) {
		struct grant m = grant_inflight(gr.window, gr.chunk, 1, lim->mc_inflight, lim->min_chunk, chunk_floor);
		v->mc_capped = m.window < gr.window || m.chunk < gr.chunk;
		gr = m;
	}
	v->window = gr.window;
	v->chunk = gr.chunk;
	v->recvs = admit_recvs(v->window, ask->nranks, v->mc);
	/* the lanes where their receives fit, else one lane where the whole
	 * job's fit (th < 0: nowhere) */
	int th = admit_pick(load, v->recvs, NULL, 0, &v->rx_room);
	v->lanes = admit_lanes(lim, load->nthreads, v->window, v->mc, ask->one_lane);
	if (v->lanes > 1 && admit_place(load, v->lanes, v->window, ask->nranks, v->mc, v->lane_thread))
		th = v->lane_thread[0];
	else
		v->lanes = 1;
	v->lane_recvs = admit_recvs(admit_lane_window(v->window, 0, v->lanes), ask->nranks, v->mc);
	v->book_bytes = v->lanes * admit_book_bytes(&lim->sizes, v->window, ask->nranks);
	v->mem_bytes = admit_region_bytes(v->window, v->chunk, ask->nranks, ask->has16, v->mc) + v->book_bytes;
	v->share_bytes = (uint64_t)((double)lim->memory_budget * lim->max_memory_share);
	v->budget_free = lim->memory_budget > load->mem_used ? lim->memory_budget - load->mem_used : 0;

	if (lim->sealed && v->chunk <= 2 * ADMIT_SEAL_ROOM)
		v->rule = ADMIT_SEALED_CHUNK;
	else if (load->njobs >= lim->max_jobs)
		v->rule = ADMIT_MAX_JOBS;
	else if (v->mem_bytes > v->share_bytes)
		v->rule = ADMIT_MEMORY_SHARE;
	else if (v->mem_bytes > v->budget_free)
		v->rule = ADMIT_MEMORY_BUDGET;
	else if (th < 0)
		v->rule = ADMIT_RECEIVE_QUEUE;
	else {
		v->rule = ADMIT_OK;
		v->thread = th;
		if (v->lanes == 1)
			v->lane_thread[0] = th;
	}
}
