/* A data thread: its poll loop (completions, commands, retries, periodic
 * scans, idle policy) and its start and stop. What a completion means for
 * a slot is dp_slot.c's business, for a job dp_job.c's. */
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "dp.h"
#include "log.h"
#include "mcast.h"
#include "dp_result.h"
#include "settings.h"

#define CQ_BATCH 64
#define SCAN_INTERVAL_NS 20000000ull /* timeouts, retries of stuck jobs */
#define DEEP_IDLE_NS 100000000ull
#define DEEP_IDLE_SLEEP_US 1000

/* ---- posts refused -FI_EAGAIN (defer.h) ---- */

/* A slot's posts that wait: its ranks' receives and NACK receives, and its
 * result sends. Always done with it: what is refused again queues the slot
 * again through dthread_retry_add. */
static int slot_retry(struct defer *d)
{
	struct slot *s = container_of(d, struct slot, retry);
	struct job *j = s->job;
	struct dthread *t = j->thread;

	for (uint32_t r = 0; r < j->nranks && !j->dead; r++)
		if (job_rslot(j, s->index, r)->state == RS_REPOST)
			dp_recv_post(t, j, s->index, r);
	for (uint32_t r = 0; r < j->nranks && !j->dead; r++)
		if (job_rslot(j, s->index, r)->nstate == RS_REPOST)
			dp_nack_post(t, j, s->index, r);
	if (!j->dead && s->state == SLOT_SENDING && s->send_next < j->nranks) {
		int rc = t->result->send_result(t, j, s);
		if (rc < 0)
			dp_job_fail(t, j, WIRE_E_INTERNAL, "result send failed: %s", fi_strerror(-rc));
		else if (rc > 0)
			slot_free(t, j, s);
	}
	return 0;
}

void dthread_retry_add(struct dthread *t, struct slot *s)
{
	defer_add(&t->retry, &s->retry, slot_retry);
}

void dthread_retry_purge(struct dthread *t, struct job *j)
{
	for (uint32_t w = 0; w < j->window; w++)
		defer_cancel(&t->retry, &j->slots[w].retry);
}

/* Every slot queued now, once: one refused again waits for the next pass. */
static void retries_run(struct dthread *t)
{
	defer_run(&t->retry, DEFER_ANY_ORDER);
}

/* ---- commands ---- */

/* The hold of result sends (dp_result.c) serves one result per rank per walk
 * of the rank's queue: a job's window no longer sets its share of the
 * thread, so jobs of different windows (weights, docs/daemon.md) would get
 * the same. With those on the thread, results go as before; a rank's sends
 * held now are released as their rank's last send completes. */
static void dthread_hold_update(struct dthread *t)
{
	uint32_t w = 0;
	bool mixed = false;
	struct job *j;

	SLIST_FOREACH(j, &t->jobs, dlink) {
		if (j->dead || j->removing)
			continue;
		mixed |= w && j->window != w;
		w = j->window;
	}
	t->res_hold = t->res_one && !mixed;
}

static void cmds_run(struct dthread *t)
{
	struct dcmd_list cmds;
	struct dcmd *c, *next;

	dp_cmds_take(t, &cmds);
	for (c = STAILQ_FIRST(&cmds); c; c = next) {
		next = STAILQ_NEXT(c, link); /* an answer reuses c's link */
		switch (c->type) {
		case DCMD_ADD_JOB:
			c->rc = dp_job_add(t, c->job);
			if (!c->rc)
				t->sweep->posted += job_lane_recvs(c->job);
			dthread_hold_update(t);
			evq_push(t->evq, c);
			break;
		case DCMD_ADD_RANK:
			c->rc = dp_rank_add(t, c->job, c->rank);
			evq_push(t->evq, c);
			break;
		case DCMD_REMOVE_JOB:
			t->sweep->posted -= job_lane_recvs(c->job);
			dp_job_remove(t, c->job);
			dthread_hold_update(t);
			break;
		case DCMD_RANK_LEFT:
			dp_rank_left(t, c->job, c->rank);
			break;
		default:
			SC_ERR("data thread %u: unknown command %d", t->index, c->type);
		}
	}
}

/* ---- completions ---- */

/* A NACK (wire.h, mode NACK) from rank d->rank for the chunk in slot
 * d->slot: opened when sealed, its body must name this job, rank and the
 * chunk (mcast.h; the ranges it lists are not needed: the repair is the
 * whole result). Its receive is posted again before the NACK is acted on,
 * so that the next one (chunk + window, sent only once this is answered)
 * always finds it posted. */
static void on_nack(struct dthread *t, const struct fabric_cqe *e, struct dop *d)
{
	struct job *j = d->job;
	struct rslot *rs = job_rslot(j, d->slot, d->rank);
	struct slot *sl = &j->slots[d->slot];
	uint8_t *buf = job_nbuf(j, d->slot, d->rank);
	uint32_t imm = (uint32_t)e->data, seq = wire_imm_seq(imm);
	size_t len = e->len;
	struct sc_mc_nack m;

	j->ops_out--;
	rs->nstate = RS_IDLE;
	if (j->dead) {
		dp_job_reap(t, j);
		return;
	}
	if (e->err) {
		if (e->err == -FI_ECANCELED && !j->ranks[d->rank].left) {
			dp_nack_post(t, j, d->slot, d->rank);
			return;
		}
		if (e->err == -FI_ECANCELED)
			return;
		dp_count_err(t, e->err == -FI_ETRUNC ? ERR_TRUNCATED : ERR_RECV_ERROR);
		dp_nack_post(t, j, d->slot, d->rank); /* a stranger's, or the rank's own: see on_recv */
		return;
	}
	if (j->fab->has_source && e->src != j->ranks[d->rank].fi_addr) {
		dp_count_err(t, ERR_FOREIGN_SOURCE);
		dp_nack_post(t, j, d->slot, d->rank);
		return;
	}
	/* the chunk of seq: the slot's, the next one (the NACK came before the
	 * rank's data), or the one before it (a late NACK) */
	uint64_t ch = seq == sl->seq ? sl->chunk
		      : seq == ((sl->seq + j->window) & WIRE_SEQ_MASK) ? sl->chunk + j->window
									: sl->chunk - j->window;
	if (j->sealed && (len < SC_SEAL_TAG || !(e->flags & FI_REMOTE_CQ_DATA) ||
			  sc_unseal(&j->seal, SC_SEAL_NACK, d->rank, ch, imm, buf, len - SC_SEAL_TAG, buf))) {
		dp_count_err(t, ERR_UNSEALED);
		dp_nack_post(t, j, d->slot, d->rank);
		return;
	}
	if (j->sealed)
		len -= SC_SEAL_TAG;
	dp_nack_post(t, j, d->slot, d->rank);
	if (!(e->flags & FI_REMOTE_CQ_DATA) || wire_imm_mode(imm) != WIRE_MODE_NACK ||
	    sc_mc_nack_decode(buf, len, &m) || m.job != j->handle || m.rank != d->rank ||
	    (m.chunk & WIRE_SEQ_MASK) != seq || m.chunk % j->window != d->slot) {
		dp_job_fail(t, j, WIRE_E_DATA, "rank %u sent a malformed NACK (%zu bytes) in slot %u", d->rank,
			    len, d->slot);
		return;
	}
	slot_nack(t, j, d->slot, d->rank, seq);
}

static void on_recv(struct dthread *t, const struct fabric_cqe *e, struct dop *d)
{
	struct job *j = d->job;
	struct rslot *rs = job_rslot(j, d->slot, d->rank);

	j->ops_out--;
	rs->state = RS_IDLE;
	if (j->dead) {
		dp_job_reap(t, j);
		return;
	}
	if (e->err) {
		if (e->err == -FI_ECANCELED) {
			/* Ours (the rank left) ends here; one the provider
			 * flushed on its own is posted again (the rank's own
			 * side sees the lost connection and says so). */
			if (!j->ranks[d->rank].left)
				dp_recv_post(t, j, d->slot, d->rank);
			return;
		}
		if (e->err == -FI_ETRUNC) {
			/* An error completion carries no source (libfabric 1.17 has
			 * no src_addr in fi_cq_err_entry), so the sender may be
			 * anyone who guessed the tag: drop it and keep the job. If
			 * it was the rank itself, its chunk is missing and the job
			 * timeout names it (with this drop in the sentence). */
			dp_count_err(t, ERR_TRUNCATED);
			j->trunc_drops++;
			SC_LOG_RATELIMIT(SC_LOG_WARN, 1000,
					 "job 0x%" PRIx64 ": dropped a %zu-byte message for rank %u slot %u "
					 "(chunk is %u bytes, sender unknown)",
					 j->id, (size_t)j->chunk + e->olen, d->rank, d->slot, j->chunk);
			dp_recv_post(t, j, d->slot, d->rank);
			return;
		}
		dp_count_err(t, ERR_RECV_ERROR);
		dp_job_fail(t, j, WIRE_E_INTERNAL, "receive from rank %u failed: %s", d->rank,
			    fi_strerror(-e->err));
		return;
	}
	if (j->fab->has_source && e->src != j->ranks[d->rank].fi_addr) {
		/* Someone else used the rank's tag: drop it, keep the buffer. */
		dp_count_err(t, ERR_FOREIGN_SOURCE);
		dp_recv_post(t, j, d->slot, d->rank);
		return;
	}
	if (!(e->flags & FI_REMOTE_CQ_DATA)) {
		dp_count_err(t, ERR_NO_IMMEDIATE);
		dp_job_fail(t, j, WIRE_E_DATA, "rank %u sent data without immediate data (slot %u)",
			    d->rank, d->slot);
		return;
	}
	size_t len = e->len;
	if (j->sealed) {
		/* The chunk number of this message's seq: the slot's, or the
		 * next one's (a rank may be a window ahead). A message sealed by
		 * anyone without the job key does not open: dropped, counted. */
		struct slot *sl = &j->slots[d->slot];
		uint64_t ch = sl->chunk + ((wire_imm_seq((uint32_t)e->data) - sl->seq) & WIRE_SEQ_MASK);
		if (len < SC_SEAL_TAG ||
		    sc_unseal(&j->seal, SC_SEAL_DATA, d->rank, ch, (uint32_t)e->data, rs->buf,
			      len - SC_SEAL_TAG, rs->buf)) {
			dp_count_err(t, ERR_UNSEALED);
			SC_LOG_RATELIMIT(SC_LOG_WARN, 1000,
					 "job 0x%" PRIx64 ": dropped a %zu-byte message for rank %u slot %u that "
					 "did not open under the job key", j->id, len, d->rank, d->slot);
			dp_recv_post(t, j, d->slot, d->rank);
			return;
		}
		len -= SC_SEAL_TAG;
	}
	rs->imm = e->data;
	rs->len = (uint32_t)len;
	ctr_add(&t->stats.rx_bytes, len); /* payload: a sealed message's tag is not data */
	ctr_add(&j->bytes_in, len);
	ctr_add(&j->ranks[d->rank].bytes_in, len);
	slot_contribute(t, j, d->slot, d->rank);
}

static void on_send(struct dthread *t, const struct fabric_cqe *e, struct dop *d)
{
	struct job *j = d->job;
	struct slot *sl = &j->slots[d->slot];

	j->ops_out--;
	if (e->err)
		dp_count_err(t, ERR_SEND_ERROR);
	else if (job_rslot(j, d->slot, d->rank)->wants) {
		ctr_add(&t->stats.tx_bytes, sl->len);
		ctr_add(&j->bytes_out, sl->len);
	}
	if (j->dead) {
		dp_job_reap(t, j);
		return;
	}
	if (t->result->on_send_complete(t, j, sl, d->rank, e->err))
		slot_free(t, j, sl);
}

/* ---- periodic scan (every SCAN_INTERVAL_NS) ---- */

static void jobs_scan(struct dthread *t, uint64_t now)
{
	/* next read first: a stuck job with an endpoint of its own is reaped
	 * here, and the control thread may free it at once */
	for (struct job *j = SLIST_FIRST(&t->jobs), *next; j; j = next) {
		next = SLIST_NEXT(j, dlink);
		atomic_store_explicit(&j->ops_seen, j->ops_out, memory_order_relaxed);
		if (j->removing)
			dp_job_release_stuck(t, j, now);
		else
			dp_job_check_timeout(t, j, now);
	}
}

/* ---- the loop ---- */

/* Idle past idle-spin: block on the CQ's wait object (fabric_wait) until
 * the fabric or a command (wake_fd) wakes the thread, or the next scan is
 * due: an idle daemon then costs what its wake-ups cost, not a poll every
 * idle-sleep. Without a wait object, or with sends to retry, sleep
 * idle-sleep between polls (deep idle, nothing for 100 ms: longer, so an
 * unused daemon costs ~1% of a core, not ~6%). True when something woke
 * the thread from its wait object. */
static bool idle_wait(struct dthread *t, uint64_t now, uint64_t idle)
{
	if (dthread_wakeable(t) && defer_empty(&t->retry) && STAILQ_EMPTY(&t->spread_q)) {
		uint64_t left = t->next_scan_ns > now ? t->next_scan_ns - now : 0;
		/* a result handed over (spread_push) wakes it: seq_cst, both ways */
		atomic_store(&t->waiting, true);
		if (atomic_load(&t->spread_pending)) {
			atomic_store(&t->waiting, false);
			return true;
		}
		int rc = fabric_wait(t->fabric, t->wake_fd, (int)(left / 1000000) + 1);
		atomic_store(&t->waiting, false);
		if (rc > 0) {
			uint64_t v;
			(void)!read(t->wake_fd, &v, sizeof(v));
		}
		if (rc >= 0)
			return rc > 0;
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "data thread %u: waiting on the completion queue failed: %s; "
				 "polling instead", t->index, fi_strerror(-rc));
	}
	long us = idle > DEEP_IDLE_NS ? DEEP_IDLE_SLEEP_US : (long)t->sleep_us;
	if (us < (long)t->sleep_us)
		us = (long)t->sleep_us;
	struct timespec ts = { 0, us * 1000 };
	nanosleep(&ts, NULL);
	return false;
}

/* One batch of completions of one CQ (the thread's, or a job's own),
 * handled. f is not touched once they are: the last one can reap a job
 * and close its endpoint. Returns how many were work: a sweep's receive
 * that found nothing is not (an idle thread would never block). */
static int cq_run(struct dthread *t, struct fabric *f)
{
	struct fabric_cqe cqe[CQ_BATCH];
	int n = fabric_cq_poll(f, cqe, CQ_BATCH);

	if (n < 0) {
		dp_count_err(t, ERR_CQ);
		SC_LOG_RATELIMIT(SC_LOG_ERROR, 1000, "data thread %u: CQ read failed: %s", t->index,
				 fi_strerror(-n));
		return 0;
	}
	int work = n;
	for (int i = 0; i < n; i++) {
		struct dop *d = (struct dop *)cqe[i].op;
		if (!d)
			continue;
		if (d->kind == DOP_RECV)
			on_recv(t, &cqe[i], d);
		else if (d->kind == DOP_SEND)
			on_send(t, &cqe[i], d);
		else if (d->kind == DOP_NACK)
			on_nack(t, &cqe[i], d);
		else if (!dp_sweep_done(t, &cqe[i], sc_now_ns()))
			work--;
	}
	return work;
}

static void *dthread_main(void *arg)
{
	struct dthread *t = arg;
	uint64_t idle_since = 0, last = sc_now_ns();
	bool woke = false;
	char name[16];

	snprintf(name, sizeof(name), "sumcastd-data%u", t->index);
	pthread_setname_np(pthread_self(), name);
	while (!atomic_load_explicit(&t->stop, memory_order_relaxed)) {
		int n = cq_run(t, t->fabric);
		/* the jobs' own CQs (shm); next read first: the job's last
		 * completion may reap it */
		for (struct job *j = t->isolate ? SLIST_FIRST(&t->jobs) : NULL, *next; j; j = next) {
			next = SLIST_NEXT(j, dlink);
			if (j->fab)
				n += cq_run(t, j->fab);
		}
		if (atomic_load_explicit(&t->cmd_pending, memory_order_acquire))
			cmds_run(t);
		if (!STAILQ_EMPTY(&t->spread_q) ||
		    atomic_load_explicit(&t->spread_pending, memory_order_acquire))
			n += dp_spread_run(t);
		if (!defer_empty(&t->retry))
			retries_run(t);
		/* Woken, and the wake-up completed nothing: a foreign message,
		 * looked at now. One that brought the jobs' completions is
		 * traffic: the sweep keeps its interval (dp_sweep.c). */
		if (woke && n <= 0)
			dp_sweep_kick(t);
		woke = false;

		uint64_t now = sc_now_ns();
		dp_sweep_run(t, now);
		atomic_store_explicit(&t->heartbeat_ns, now, memory_order_relaxed);
		if (now >= t->next_scan_ns) {
			jobs_scan(t, now);
			t->next_scan_ns = now + SCAN_INTERVAL_NS;
		}
		if (n > 0) {
			ctr_add(&t->busy_ns, now - last);
			idle_since = 0;
		} else {
			if (!idle_since)
				idle_since = now;
			uint64_t idle = now - idle_since;
			if (idle > (uint64_t)t->spin_us * 1000ull) {
				woke = idle_wait(t, now, idle);
			} else {
				sched_yield();
			}
			ctr_add(&t->idle_ns, now - last);
		}
		last = now;
	}
	return NULL;
}

/* ---- start, stop ---- */

int dthread_start(struct dthread *t, unsigned index, int cpu, const struct settings *s,
		  struct evq *evq)
{
	struct fabric_params p = {
		.provider = s->provider,
		.node = *s->node ? s->node : NULL,
		.cq_size = (size_t)s->cq_size,
		.no_source = !s->source_check,
		.wait = s->idle_wait,
	};
	int rc;

	memset(t, 0, sizeof(*t));
	STAILQ_INIT(&t->cmds);
	SLIST_INIT(&t->jobs);
	defer_queue_init(&t->retry);
	t->wake_fd = -1;
	t->index = index;
	t->cpu = cpu;
	t->evq = evq;
	t->result = &result_default_ops;
	t->slot_ops = &dp_slot_ops;
	t->spin_us = (unsigned)s->idle_spin_us;
	settings_strcpy(t->mc_iface, sizeof(t->mc_iface), settings_mc_iface(s));
	t->sleep_us = (unsigned)s->idle_sleep_us;
	atomic_store(&t->heartbeat_ns, sc_now_ns());
	pthread_mutex_init(&t->cmd_lock, NULL);
	pthread_mutex_init(&t->spread_lock, NULL);
	STAILQ_INIT(&t->spread_in);
	STAILQ_INIT(&t->spread_q);
	rc = fabric_open(&p, &t->fabric);
	if (rc)
		goto err_lock;
	t->cq_size = p.cq_size;
	/* libfabric 1.17's shm completes a sender's operations in the order
	 * they were sent (smr_progress_resp stops at the oldest not yet taken):
	 * one rank that never takes a result it was sent (killed, or sending
	 * past its credit so that results find no receive) would stall every
	 * later send of the endpoint, every other job's results with them.
	 * So on shm each job gets an endpoint of its own, closed when the job
	 * ends (dp_job.c): a stuck send stalls only its own job. */
	t->isolate = !strcmp(fabric_provider(t->fabric), "shm");
	/* the lock result-one-per-rank avoids is shm's (dp_result.c) */
	t->res_one = t->isolate && s->result_one_per_rank;
	if (t->isolate)
		SC_INFO("data thread %u: provider shm: each job gets an endpoint of its own", index);
	if (t->fabric->wait_fd >= 0) {
		t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (t->wake_fd < 0) {
			rc = -errno;
			SC_ERR("data thread %u: eventfd: %s", index, strerror(errno));
			goto err_fabric;
		}
	}
	SC_INFO("data thread %u: idle after %u us: %s", index, t->spin_us,
		t->wake_fd >= 0 ? "blocks on the completion queue's wait object"
				: "sleeps between polls");
	t->rx_queue = t->fabric->info->rx_attr && t->fabric->info->rx_attr->size
			      ? t->fabric->info->rx_attr->size
			      : UINT64_MAX;
	rc = dp_sweep_init(t, p.cq_size, s->sweep);
	if (rc)
		goto err_fabric;
	if (t->sweep->on && t->rx_queue != UINT64_MAX)
		t->rx_queue -= t->sweep->burst_max; /* the sweep's receives (dp_sweep.c) */
	rc = -pthread_create(&t->tid, NULL, dthread_main, t);
	if (rc) {
		SC_ERR("data thread %u: pthread_create: %s", index, strerror(-rc));
		goto err_sweep;
	}
	t->started = true;
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		int e = pthread_setaffinity_np(t->tid, sizeof(set), &set);
		if (e)
			SC_WARN("data thread %u: pinning to CPU %d failed: %s", index, cpu, strerror(e));
	}
	return 0;

err_sweep:
	dp_sweep_fini(t);
err_fabric:
	fabric_close(t->fabric);
	t->fabric = NULL;
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	t->wake_fd = -1;
err_lock:
	pthread_mutex_destroy(&t->cmd_lock);
	pthread_mutex_destroy(&t->spread_lock);
	return rc;
}

void dthread_halt(struct dthread *t)
{
	if (t->started) {
		atomic_store(&t->stop, true);
		pthread_join(t->tid, NULL);
		t->started = false;
	}
}

void dthread_stop(struct dthread *t)
{
	struct job *j;

	if (!t->fabric)
		return;
	dthread_halt(t);
	/* Commands never run are dropped; they live in their jobs. */
	STAILQ_INIT(&t->cmds);
	dp_spread_fini(t);
	/* RDMA's order: the endpoints first (what is posted on them ends),
	 * then the registrations, then the domain; the buffers last (nothing
	 * may still write into them). */
	fabric_close_ep(t->fabric);
	SLIST_FOREACH(j, &t->jobs, dlink) {
		t->result->fini(t, j);
		dp_job_ep_close(t, j);
		fabric_mr_dereg(&j->mr);
	}
	dp_sweep_fini(t); /* its registration goes before the domain */
	fabric_close(t->fabric);
	t->fabric = NULL;
	SLIST_FOREACH(j, &t->jobs, dlink) {
		munmap(j->region, j->region_bytes);
		j->region = NULL;
	}
	SLIST_INIT(&t->jobs);
	dp_av_fini(t);
	pthread_mutex_destroy(&t->cmd_lock);
	pthread_mutex_destroy(&t->spread_lock);
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	t->wake_fd = -1;
}
