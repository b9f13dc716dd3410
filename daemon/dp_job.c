/* A job on its data thread, from ADD_JOB to the answer to REMOVE_JOB (the
 * whole path, both threads: job.h): its endpoint and registration, its
 * ranks' addresses and receives, failure, removal, reaping, the release of
 * a job whose sends are stuck, and the job timeout. */
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "clock.h"
#include "dp.h"
#include "log.h"
#include "dp_result.h"

static void rslot_cancel(struct job *j, struct rslot *rs);

const struct slot_ops dp_slot_ops = {
	.post_recv = dp_recv_post,
	.fail = dp_job_failv,
};

/* ---- setup (commands) ---- */

void dp_job_ep_close(struct dthread *t, struct job *j)
{
	if (t->isolate)
		fabric_close(j->fab);
	j->fab = NULL;
}

int dp_job_add(struct dthread *t, struct job *j)
{
	int rc = 0;

	j->fab = t->fabric;
	if (t->isolate) {
		rc = fabric_open_sibling(t->fabric, t->cq_size, &j->fab);
		if (rc) {
			j->fab = NULL;
			return rc;
		}
	}
	/* registered on the thread's domain: its endpoints share it */
	rc = fabric_mr_reg(t->fabric, j->region, j->region_bytes, &j->mr);
	if (rc)
		goto err_ep;
	rc = t->result->init(t, j);
	if (rc)
		goto err_mr;
	SLIST_INSERT_HEAD(&t->jobs, j, dlink);
	j->last_activity_ns = sc_now_ns();
	return 0;

err_mr:
	fabric_mr_dereg(&j->mr);
err_ep:
	dp_job_ep_close(t, j);
	return rc;
}

int dp_rank_add(struct dthread *t, struct job *j, uint32_t r)
{
	struct job_rank *jr = &j->ranks[r];
	int rc = t->isolate ? fabric_av_insert(j->fab, jr->addr, jr->addr_len, &jr->fi_addr)
			   : dp_av_get(t, jr->addr, jr->addr_len, &jr->fi_addr);

	if (rc)
		return rc;
	jr->added = true;
	for (uint32_t s = j->lane; s < j->window; s += j->lanes) { /* the lane's slots (job.h) */
		dp_recv_post(t, j, s, r);
		if (j->mc)
			dp_nack_post(t, j, s, r);
	}
	return 0;
}

void dp_rank_left(struct dthread *t, struct job *j, uint32_t r)
{
	struct job_rank *jr = &j->ranks[r];

	if (j->dead || jr->left)
		return;
	jr->left = true;
	j->nleft++;
	for (uint32_t s = 0; s < j->window; s++)
		rslot_cancel(j, job_rslot(j, s, r));
	for (uint32_t s = 0; s < j->window; s++) {
		const struct slot *sl = &j->slots[s];
		if (sl->state == SLOT_FILLING && !job_rslot(j, s, r)->contributed) {
			dp_job_fail(t, j, WIRE_E_RANK_LEFT, "rank %u left job 0x%" PRIx64 " and chunk seq %u needs it",
				    r, j->id, sl->seq);
			return;
		}
	}
}

/* ---- receives ---- */

/* One of rank r's receives in slot s (its data, or its NACK), whose state
 * *st follows: posted, queued for a retry, or the job fails. Where the
 * provider matches on the sender (FI_DIRECTED_RECV, with FI_SOURCE:
 * has_source), the receive takes only the rank's own messages: another
 * endpoint sending under the rank's tag cannot take its buffer, and what
 * it sent stays unexpected until the sweep drops it (dp_sweep.c). */
static void recv_post(struct dthread *t, struct job *j, uint32_t s, uint32_t r, void *buf, size_t len,
		      uint64_t tag, struct fabric_op *op, uint8_t *st, const char *what)
{
	fi_addr_t src = j->fab->has_source ? j->ranks[r].fi_addr : FI_ADDR_UNSPEC;
	int rc = fabric_trecv(j->fab, buf, len, j->mr.desc, src, tag, 0, op);

	if (rc == 0) {
		*st = RS_POSTED;
		j->ops_out++;
	} else if (rc == -FI_EAGAIN) {
		ctr_add(&t->stats.eagain[EAGAIN_RECV], 1);
		*st = RS_REPOST;
		dthread_retry_add(t, &j->slots[s]);
	} else {
		*st = RS_IDLE;
		dp_job_fail(t, j, WIRE_E_INTERNAL, "posting %s for rank %u slot %u failed: %s", what, r, s,
			    fi_strerror(-rc));
	}
}

void dp_recv_post(struct dthread *t, struct job *j, uint32_t s, uint32_t r)
{
	struct rslot *rs = job_rslot(j, s, r);

	if (j->dead) {
		rs->state = RS_IDLE;
		return;
	}
	recv_post(t, j, s, r, rs->buf, j->chunk, wire_tag_make(WIRE_TAG_DATA, j->handle, r, s), &rs->rop.op,
		  &rs->state, "a receive");
}

void dp_nack_post(struct dthread *t, struct job *j, uint32_t s, uint32_t r)
{
	struct rslot *rs = job_rslot(j, s, r);

	if (j->dead || j->ranks[r].left) {
		rs->nstate = RS_IDLE;
		return;
	}
	recv_post(t, j, s, r, job_nbuf(j, s, r), JOB_NACK_UNIT, wire_tag_make(WIRE_TAG_NACK, j->handle, r, s),
		  &rs->nop.op, &rs->nstate, "a NACK receive");
}

/* The rank's receives in one slot (DATA, NACK) cancelled or forgotten. */
static void rslot_cancel(struct job *j, struct rslot *rs)
{
	if (rs->state == RS_POSTED)
		fabric_cancel(j->fab, &rs->rop.op);
	else if (rs->state == RS_REPOST)
		rs->state = RS_IDLE;
	if (rs->nstate == RS_POSTED)
		fabric_cancel(j->fab, &rs->nop.op);
	else if (rs->nstate == RS_REPOST)
		rs->nstate = RS_IDLE;
}

static void job_cancel_recvs(struct job *j)
{
	for (uint32_t s = 0; s < j->window; s++)
		for (uint32_t r = 0; r < j->nranks; r++)
			rslot_cancel(j, job_rslot(j, s, r));
}

/* ---- the end of a job ---- */

void dp_job_failv(struct dthread *t, struct job *j, enum wire_code code, const char *fmt, va_list ap)
{
	if (j->dead)
		return;
	j->dead = true;
	vsnprintf(j->abort_text, sizeof(j->abort_text), fmt, ap);
	j->abort_code = (uint16_t)code;
	dp_count_err(t, code);
	memset(&j->abort_ev, 0, sizeof(j->abort_ev));
	j->abort_ev.type = DEV_ABORT;
	j->abort_ev.job = j;
	evq_push(t->evq, &j->abort_ev);
	job_cancel_recvs(j);
}

void dp_job_fail(struct dthread *t, struct job *j, enum wire_code code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dp_job_failv(t, j, code, fmt, ap);
	va_end(ap);
}

void dp_job_remove(struct dthread *t, struct job *j)
{
	j->removing = true;
	j->removed_ns = sc_now_ns();
	if (!j->dead) {
		j->dead = true; /* the control thread decided; no event needed */
		job_cancel_recvs(j);
	}
	dp_job_reap(t, j);
}

void dp_job_reap(struct dthread *t, struct job *j)
{
	if (!j->removing || j->ops_out != 0)
		return;
	SC_SLIST_UNLINK(&t->jobs, j, job, dlink);
	dthread_retry_purge(t, j);
	t->result->fini(t, j);
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->ranks[r].added) {
			if (!t->isolate)
				dp_av_put(t, j->ranks[r].fi_addr);
			j->ranks[r].added = false;
		}
	dp_job_ep_close(t, j); /* its own endpoint first, then its memory's registration */
	fabric_mr_dereg(&j->mr);
	munmap(j->region, j->region_bytes);
	j->region = NULL;
	/* nothing outstanding: what the control thread sums over a job's
	 * lanes while another lane still waits (job.h) */
	atomic_store_explicit(&j->ops_seen, 0, memory_order_relaxed);
	j->cmd_remove.rc = 0;
	evq_push(t->evq, &j->cmd_remove);
}

/* A removed job whose operations have not all completed: receives were
 * cancelled, so what is left are result sends to ranks that do not take
 * them (a hung process keeps a rendezvous send waiting). The buffers may
 * still be read by the provider, so they are never freed before the
 * completion. After stuck_grace_ms the job is logged, once. */
void dp_job_release_stuck(struct dthread *t, struct job *j, uint64_t now)
{
	if (j->stuck_reported || now - j->removed_ns < (uint64_t)j->stuck_grace_ms * 1000000ull)
		return;
	j->stuck_reported = true;
	if (t->isolate) {
		/* Its own endpoint: closed, the sends go with it (and the
		 * stall they put on every later send of that endpoint), and
		 * the job is reaped now. */
		SC_WARN("job 0x%" PRIx64 " (handle %u): %u operation(s) outstanding %llu ms after it ended; "
			"closed its endpoint",
			j->id, j->handle, j->ops_out, (unsigned long long)((now - j->removed_ns) / 1000000ull));
		dp_job_ep_close(t, j);
		j->ops_out = 0;
		dp_job_reap(t, j);
		return;
	}
	/* Drop this job's AV references; an address no other job uses is
	 * removed, and rxm then closes the connection and fails the sends. */
	uint32_t removed = 0, shared = 0;
	for (uint32_t r = 0; r < j->nranks; r++) {
		struct job_rank *jr = &j->ranks[r];
		if (!jr->added)
			continue;
		if (dp_av_refs(t, jr->fi_addr) > 1) {
			shared++;
			continue;
		}
		dp_av_put(t, jr->fi_addr);
		jr->added = false;
		removed++;
	}
	/* On RDMA (FI_MR_LOCAL: verbs, efa, the strict mode) memory under a
	 * posted operation stays registered: the HCA may still read it, and a
	 * protection error would break the endpoint every job of this thread
	 * shares. Without the addresses the provider fails the sends, and the
	 * job is reaped as ever when their completions come. */
	if (j->fab->mr_local) {
		SC_WARN("job 0x%" PRIx64 " (handle %u): %u result send(s) outstanding %llu ms after it ended; "
			"removed %u rank address(es) from the AV (%u shared with other jobs kept); its %zu buffer "
			"bytes stay registered until those sends end (RDMA)", j->id, j->handle, j->ops_out,
			(unsigned long long)((now - j->removed_ns) / 1000000ull), removed, shared, j->region_bytes);
		return;
	}
	/* Elsewhere, give the buffers back without unmapping them:
	 * deregistered, a provider (or a peer's RMA read) can no longer use
	 * them through the MR, and MADV_DONTNEED frees the pages while the
	 * range stays mapped (a stray read sees zeros, never a fault). The job
	 * struct, which the operation contexts point into, lives on until they
	 * complete or the daemon stops. */
	fabric_mr_dereg(&j->mr);
	int rc = madvise(j->region, j->region_bytes, MADV_DONTNEED);
	SC_WARN("job 0x%" PRIx64 " (handle %u): %u result send(s) outstanding %llu ms after it ended; removed %u rank address(es) from the AV (%u shared with other jobs kept), %s its %zu buffer bytes",
		j->id, j->handle, j->ops_out, (unsigned long long)((now - j->removed_ns) / 1000000ull),
		removed, shared, rc ? "could not release" : "released", j->region_bytes);
	if (rc)
		return;
	memset(&j->release_ev, 0, sizeof(j->release_ev));
	j->release_ev.type = DEV_RELEASED;
	j->release_ev.job = j;
	evq_push(t->evq, &j->release_ev);
}

/* ---- timeout ---- */

/* The oldest slot whose result some rank has not taken: a result send
 * that does not complete (a rank that stopped taking messages: each one
 * the receiver copies it) stalls the job as a missing contribution does,
 * with no slot left filling. NULL if none. */
static struct slot *slot_untaken(struct job *j)
{
	struct slot *old = NULL;

	for (uint32_t s = 0; s < j->window; s++) {
		struct slot *sl = &j->slots[s];
		if (sl->state == SLOT_SENDING && (sl->sends_left || sl->send_next < j->nranks) &&
		    (!old || sl->chunk < old->chunk))
			old = sl;
	}
	return old;
}

/* Whether slot sl waits for rank r: its contribution (a filling slot), or
 * its taking the result (a sending one). */
static bool slot_waits_for(struct job *j, const struct slot *sl, uint32_t r)
{
	const struct rslot *rs = job_rslot(j, sl->index, r);

	if (sl->state == SLOT_FILLING)
		return !rs->contributed;
	return rs->out || (rs->held && j->ranks[r].res_out);
}

/* "rank 3", "ranks 3, 7-9 (4 of 64)": the ranks sl waits for, as ranges,
 * cut short with "..." past the buffer. */
static void slot_waits_fmt(struct job *j, const struct slot *sl, char *buf, size_t cap)
{
	uint32_t n = 0, first = UINT32_MAX;
	size_t len = 0;
	bool cut = false;

	buf[0] = '\0';
	for (uint32_t r = 0; r <= j->nranks; r++) {
		bool w = r < j->nranks && slot_waits_for(j, sl, r);
		n += w;
		if (w && first == UINT32_MAX)
			first = r;
		if (w || first == UINT32_MAX)
			continue;
		/* a run [first, r) ended */
		if (!cut && len + 24 < cap)
			len += (size_t)snprintf(buf + len, cap - len, "%s%u", len ? ", " : "", first);
		else
			cut = true;
		if (!cut && r - 1 > first)
			len += (size_t)snprintf(buf + len, cap - len, "-%u", r - 1);
		first = UINT32_MAX;
	}
	if (cut && len + 5 < cap)
		len += (size_t)snprintf(buf + len, cap - len, ", ...");
	char head[48];
	snprintf(head, sizeof(head), "rank%s ", n == 1 ? "" : "s");
	size_t hl = strlen(head);
	if (len + hl + 24 < cap) {
		memmove(buf + hl, buf, len + 1);
		memcpy(buf, head, hl);
		len += hl;
		if (n > 1)
			snprintf(buf + len, cap - len, " (%u of %u)", n, j->nranks);
	}
}

void dp_job_check_timeout(struct dthread *t, struct job *j, uint64_t now)
{
	char who[200];

	if (j->dead)
		return;
	uint64_t idle = now - j->last_activity_ns;
	if (idle < (uint64_t)j->timeout_ms * 1000000ull)
		return;
	if (!atomic_load_explicit(&j->partial, memory_order_relaxed)) {
		struct slot *sl = slot_untaken(j);
		if (sl) {
			slot_waits_fmt(j, sl, who, sizeof(who));
			dp_job_fail(t, j, WIRE_E_TIMEOUT, "%s took no result for %llu ms (chunk seq %u)", who,
				    (unsigned long long)(idle / 1000000ull), sl->seq);
		}
		return;
	}
	/* The oldest partially filled slot names the ranks we wait for. */
	struct slot *old = NULL;
	for (uint32_t s = 0; s < j->window; s++) {
		struct slot *sl = &j->slots[s];
		if (sl->state == SLOT_FILLING && (!old || sl->first_ns < old->first_ns))
			old = sl;
	}
	if (old)
		slot_waits_fmt(j, old, who, sizeof(who));
	else
		snprintf(who, sizeof(who), "no rank");
	if (j->trunc_drops)
		dp_job_fail(t, j, WIRE_E_TIMEOUT,
			    "%s sent nothing for %llu ms (chunk seq %u); %u oversize messages "
			    "were dropped", who, (unsigned long long)(idle / 1000000ull),
			    old ? old->seq : 0, j->trunc_drops);
	else
		dp_job_fail(t, j, WIRE_E_TIMEOUT, "%s sent nothing for %llu ms (chunk seq %u)",
			    who, (unsigned long long)(idle / 1000000ull), old ? old->seq : 0);
}
