/* Job lifecycle on the control thread: create (memory, handle, join timer,
 * data thread), READY, and the end: abort, end, free. The whole path over
 * both threads, and who may call what: job.h. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <event2/event.h>

#include "clock.h"
#include "ctl.h"
#include "mcast.h"
#include "log.h"
#include "notify.h"

/* ---- the job table ---- */

struct job *job_find(struct daemon *d, uint64_t id)
{
	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link))
		if (j->id == id && j->state != JOB_ENDING)
			return j;
	return NULL;
}

static struct job *job_by_handle(struct daemon *d, uint32_t h)
{
	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link))
		if (j->handle == h)
			return j;
	return NULL;
}

static uint32_t handle_alloc(struct daemon *d)
{
	for (uint32_t tries = 0; tries < WIRE_JOB_HANDLE_MAX; tries++) {
		uint32_t h = d->next_handle;
		d->next_handle = h >= WIRE_JOB_HANDLE_MAX ? 1 : h + 1;
		if (!job_by_handle(d, h))
			return h;
	}
	return 0;
}

void job_admit_state(const struct daemon *d, struct admit_limits *lim, struct admit_load *load,
		     uint64_t *rx_free, uint32_t *thread_jobs)
{
	const struct settings *cfg = &d->cfg;

	*lim = (struct admit_limits){
		.max_jobs = (uint64_t)cfg->max_jobs,
		.memory_budget = cfg->memory_budget,
		.max_memory_share = cfg->max_memory_share,
		.max_window = (uint64_t)cfg->max_window,
		.max_weight = (uint64_t)cfg->max_weight,
		.max_chunk = cfg->max_chunk,
		.max_inflight = cfg->max_inflight,
		.min_chunk = cfg->min_chunk,
		.mc_inflight = cfg->mc_inflight,
		.sealed = d->key_len != 0,
		.mcast = d->mc,
		.job_threads = (uint32_t)cfg->job_threads,
		.sizes = job_admit_sizes(),
	};
	for (unsigned i = 0; i < d->nthreads; i++) {
		const struct dthread *t = &d->threads[i];
		rx_free[i] = t->rx_queue > t->rx_reserved ? t->rx_queue - t->rx_reserved : 0;
		thread_jobs[i] = t->njobs;
	}
	*load = (struct admit_load){
		.njobs = d->njobs_live,
		.mem_used = d->mem_used,
		.nthreads = d->nthreads,
		.rx_free = rx_free,
		.thread_jobs = thread_jobs,
		.tie = d->nthreads ? d->next_handle % d->nthreads : 0,
	};
}

/* ---- create, ready ---- */

static void job_join_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	struct daemon *d = j->ctl;

	(void)fd;
	(void)what;
	if (j->state == JOB_JOINING)
		job_abort(d, j, WIRE_E_TIMEOUT, "job 0x%" PRIx64 " has %u of %u ranks after %llu ms",
			  j->id, j->acked, j->nranks,
			  (unsigned long long)(sc_now_ms() - j->created_ms));
}

/* Frees one lane's memory (not its charge: job_free). */
static void lane_destroy(struct job *j)
{
	if (j->sealed)
		sc_seal_fini(&j->seal);
	if (j->region)
		munmap(j->region, j->region_bytes);
	free(j->slots);
	free(j->rslots);
	free(j);
}

/* One lane of a new job (job.h, "Lanes"): the struct with its ranks, the
 * whole window's slots, a region for its own slots, and the job's
 * parameters every lane has alike (the lead's own: job_create). */
static struct job *lane_alloc(struct daemon *d, const struct wire_join *w, uint32_t window,
			      uint32_t chunk, uint32_t timeout_ms, bool has16, bool mc, uint32_t lane,
			      uint32_t lanes)
{
	uint32_t lw = job_lane_window(window, lane, lanes);
	uint64_t region = job_region_bytes(lw, chunk, w->nranks, has16, mc);
	struct job *j = calloc(1, sizeof(*j) + (size_t)w->nranks * sizeof(struct job_rank));

	if (!j)
		return NULL;
	j->lane = lane;
	j->lanes = lanes;
	j->lane_window = lw;
	j->region_bytes = region;
	j->slots = calloc(window, sizeof(*j->slots));
	j->rslots = calloc((size_t)window * w->nranks, sizeof(*j->rslots));
	/* Prefaulted: the budget is real memory, and the data path never
	 * takes a page fault on a fresh buffer. */
	j->region = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
			 -1, 0);
	if (j->region == MAP_FAILED)
		j->region = NULL;
	if (!j->slots || !j->rslots || !j->region) {
		lane_destroy(j);
		return NULL;
	}
	j->ctl = d;
	j->id = w->job_id;
	j->nranks = w->nranks;
	j->window = window;
	j->chunk = chunk;
	j->dtype_mask = w->dtype_mask;
	j->timeout_ms = timeout_ms;
	j->flags = w->flags;
	j->has16 = has16;
	j->payload = chunk;
	j->acc_bytes = has16 ? 2 * (size_t)chunk : chunk;
	/* its region and bookkeeping (the slot arrays are the whole
	 * window's): summed over the lanes, what admission charged */
	j->mem_bytes = region + job_book_bytes(window, w->nranks);
	j->req_chunk = w->chunk_bytes;
	j->req_window = w->window;
	j->req_timeout_ms = w->timeout_ms;
	return j;
}

struct job *job_create(struct daemon *d, const struct wire_join *w, struct dthread *const *ts,
		       uint32_t lanes, uint32_t window, uint32_t chunk, uint32_t timeout_ms, bool has16)
{
	bool mc = d->mc && !(w->flags & WIRE_JOIN_F_UNICAST);
	uint8_t k[SC_SEAL_KEY] = { 0 };
	struct job *j = lane_alloc(d, w, window, chunk, timeout_ms, has16, mc, 0, lanes);

	if (!j)
		return NULL;
	j->lead = j;
	if (d->key_len) {
		/* Sealed: the job key from the shared key and a fresh nonce. */
		if (getrandom(&j->data_nonce, sizeof(j->data_nonce), 0) != sizeof(j->data_nonce) ||
		    sc_seal_derive(d->key, d->key_len, w->job_id, j->data_nonce, k) || sc_seal_init(&j->seal, k))
			goto err;
		j->sealed = true;
		j->payload = chunk - JOB_SEAL_ROOM;
	}
	j->created_ms = sc_now_ms();
	j->handle = handle_alloc(d);
	if (!j->handle)
		goto err;
	if (mc) {
		/* One group per job (handles are unique among live jobs; a
		 * range smaller than the jobs shares groups, which the key in
		 * every datagram keeps apart). */
		j->mc = true;
		j->mc_group = d->mc_first + (j->handle - 1) % d->mc_count;
		j->mc_via = d->mc_via;
		j->mc_port = (uint16_t)d->cfg.multicast_port;
		j->mc_payload = d->mc_payload;
		if (getrandom(&j->mc_key, sizeof(j->mc_key), 0) != sizeof(j->mc_key))
			goto err;
	}
	job_slots_init(j);
	/* The other lanes: what the lead drew (handle, seal), their own slots
	 * and key context (multicast jobs have one lane: admit_lanes). */
	struct job **tail = &j->lane_next;
	for (uint32_t i = 1; i < lanes; i++) {
		struct job *l = lane_alloc(d, w, window, chunk, timeout_ms, has16, mc, i, lanes);
		if (!l)
			goto err;
		*tail = l;
		tail = &l->lane_next;
		l->lead = j;
		l->handle = j->handle;
		l->payload = j->payload;
		l->data_nonce = j->data_nonce;
		l->created_ms = j->created_ms;
		if (j->sealed) {
			if (sc_seal_init(&l->seal, k))
				goto err;
			l->sealed = true;
		}
		job_slots_init(l);
	}
	OPENSSL_cleanse(k, sizeof(k));
	j->join_timer = evtimer_new(d->base, job_join_timeout_cb, j);
	if (!j->join_timer)
		goto err;
	struct timeval tv = { d->cfg.join_timeout_ms / 1000, (d->cfg.join_timeout_ms % 1000) * 1000 };
	evtimer_add(j->join_timer, &tv);
	SLIST_INSERT_HEAD(&d->jobs, j, link);
	d->njobs_live++;
	d->njobs_total++;
	uint32_t i = 0;
	JOB_FOR_LANES(j, l) {
		l->thread = ts[i++];
		l->thread->njobs++;
		l->thread->rx_reserved += job_lane_recvs(l);
		d->mem_used += l->mem_bytes;
		l->cmd_add.type = DCMD_ADD_JOB;
		l->cmd_add.job = l;
		dthread_cmd(l->thread, &l->cmd_add);
	}
	return j;
err:
	OPENSSL_cleanse(k, sizeof(k));
	for (struct job *l = j, *next; l; l = next) {
		next = l->lane_next;
		lane_destroy(l);
	}
	return NULL;
}

void job_ready(struct daemon *d, struct job *j)
{
	struct wire_msg m;

	j->state = JOB_READY;
	event_del(j->join_timer);
	ctr_add(&d->stats.jobs_started, 1);
	if (j->flags & WIRE_JOIN_F_REJOIN)
		ctr_add(&d->stats.jobs_rejoined, 1);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_READY;
	m.u.ready.job_handle = j->handle;
	m.u.ready.nranks = j->nranks;
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->ranks[r].conn)
			conn_send(j->ranks[r].conn, &m);
	SC_INFO("job 0x%" PRIx64 " (handle %u) ready: %u ranks%s", j->id, j->handle, j->nranks,
		j->flags & WIRE_JOIN_F_REJOIN ? " (joined again: a running communicator takes this address back)" : "");
}

/* ---- the end ---- */

void job_abort(struct daemon *d, struct job *j, enum wire_code code, const char *fmt, ...)
{
	char text[WIRE_TEXT_MAX];
	va_list ap;
	uint32_t told = 0;

	if (j->state == JOB_ENDING)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	for (uint32_t r = 0; r < j->nranks; r++) {
		struct job_rank *jr = &j->ranks[r];
		struct conn *c = jr->conn;
		if (c) {
			/* Detached first: the ABORT closes it, and its rank is
			 * not "gone" on its own account. */
			jr->conn = NULL;
			c->job = NULL;
			conn_abort(c, j->handle, code, text);
			told++;
		}
	}
	ctr_add(&d->stats.aborted[code <= WIRE_CODE_MAX ? code : WIRE_E_INTERNAL], 1);
	SC_WARN("job 0x%" PRIx64 " (handle %u) aborted (%s): %s; told %u rank(s)", j->id, j->handle,
		wire_code_name(code), text, told);
	job_end(d, j);
}

void job_end(struct daemon *d, struct job *j)
{
	if (j->state == JOB_ENDING)
		return;
	j->state = JOB_ENDING;
	d->njobs_live--;
	daemon_status_changed(d);
	if (j->join_timer)
		event_del(j->join_timer);
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->ranks[r].conn) {
			j->ranks[r].conn->job = NULL;
			j->ranks[r].conn = NULL;
		}
	j->lanes_removed = 0;
	JOB_FOR_LANES(j, l) {
		l->stuck_grace_ms = (uint32_t)d->cfg.stuck_grace_ms;
		memset(&l->cmd_remove, 0, sizeof(l->cmd_remove));
		l->cmd_remove.type = DCMD_REMOVE_JOB;
		l->cmd_remove.job = l;
		dthread_cmd(l->thread, &l->cmd_remove);
	}
}

void job_region_released(struct daemon *d, struct job *j)
{
	j->region_released = true;
	d->mem_used -= j->region_bytes;
}

void job_free(struct daemon *d, struct job *j)
{
	SC_SLIST_UNLINK(&d->jobs, j, job, link);
	d->njobs_total--;
	if (j->join_timer)
		event_free(j->join_timer);
	for (struct job *l = j, *next; l; l = next) {
		next = l->lane_next;
		d->mem_used -= l->region_released ? l->mem_bytes - l->region_bytes : l->mem_bytes;
		l->thread->njobs--;
		l->thread->rx_reserved -= job_lane_recvs(l);
		lane_destroy(l);
	}
}

/* ---- a rank gone ---- */

void job_rank_gone(struct conn *c, bool clean)
{
	struct daemon *d = c->d;
	struct job *j = c->job;
	uint32_t r = c->rank;

	c->job = NULL;
	if (!j || j->state == JOB_ENDING)
		return;
	struct job_rank *jr = &j->ranks[r];
	bool was_joined = jr->state == RANK_JOINED;
	jr->conn = NULL;
	jr->state = clean && was_joined ? RANK_LEFT : RANK_GONE;
	j->gone++;
	daemon_status_changed(d);
	uint32_t partial = job_sum_partial(j);
	SC_INFO("job 0x%" PRIx64 " rank %u %s%s", j->id, r, clean ? "left" : "disconnected",
		partial ? " with chunks in flight" : "");
	if (j->gone == j->joined && (j->state == JOB_READY || j->joined == 1) && (clean || !partial)) {
		/* Everybody is gone and nobody waits for anything. */
		if (j->draining) {
			/* asked to move off (ctl_main.c, the drain), and it did */
			ctr_add(&d->stats.jobs_drained, 1);
			SC_INFO("job 0x%" PRIx64 " drained: its %u ranks moved off after %" PRIu64
				" chunks (%llu ms after DRAIN; %" PRIu64 " chunks in all)", j->id, j->nranks,
				job_sum_chunks(j) - j->drain_chunks,
				(unsigned long long)(sc_now_ms() - j->drain_ms), job_sum_chunks(j));
		} else {
			ctr_add(&d->stats.jobs_finished, 1);
			SC_INFO("job 0x%" PRIx64 " (handle %u) finished: %" PRIu64 " chunks", j->id,
				j->handle, job_sum_chunks(j));
		}
		job_end(d, j);
		return;
	}
	if (j->state == JOB_JOINING) {
		job_abort(d, j, WIRE_E_RANK_LEFT, "rank %u %s job 0x%" PRIx64 " before all %u ranks joined", r,
			  clean ? "left" : "disconnected from", j->id, j->nranks);
		return;
	}
	if (!clean || partial) {
		job_abort(d, j, WIRE_E_RANK_LEFT, "rank %u %s job 0x%" PRIx64 "%s", r,
			  clean ? "left" : "disconnected from", j->id,
			  partial ? " while chunks were in flight" : "");
		return;
	}
	/* A clean LEAVE between collectives: the others finish and leave too.
	 * The data thread is told, so that a chunk that needs this rank (one
	 * in flight that the partial count above did not see yet, or a new
	 * one) fails the job at once instead of after the job timeout. */
	JOB_FOR_LANES(j, l) {
		struct job_rank *lr = &l->ranks[r];
		memset(&lr->cmd_left, 0, sizeof(lr->cmd_left));
		lr->cmd_left.type = DCMD_RANK_LEFT;
		lr->cmd_left.job = l;
		lr->cmd_left.rank = r;
		dthread_cmd(l->thread, &lr->cmd_left);
	}
}
