#include "dataplane.h"

#include <errno.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "reduce.h"
#include "result.h"
#include "settings.h"

#define CQ_BATCH 32
#define SCAN_INTERVAL_NS 20000000ull /* timeouts, retries of stuck jobs */
#define DEEP_IDLE_NS 100000000ull
#define DEEP_IDLE_SLEEP_US 1000

/* ---- event queue ---- */

int evq_init(struct evq *q)
{
	memset(q, 0, sizeof(*q));
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0)
		return -errno;
	pthread_mutex_init(&q->lock, NULL);
	return 0;
}

void evq_fini(struct evq *q)
{
	if (q->efd >= 0)
		close(q->efd);
	q->efd = -1;
	pthread_mutex_destroy(&q->lock);
}

void evq_push(struct evq *q, struct dcmd *ev)
{
	uint64_t one = 1;

	ev->next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = ev;
	else
		q->head = ev;
	q->tail = ev;
	pthread_mutex_unlock(&q->lock);
	if (write(q->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "eventfd write: %s", strerror(errno));
}

struct dcmd *evq_take(struct evq *q)
{
	uint64_t v;
	struct dcmd *h;

	if (read(q->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "eventfd read: %s", strerror(errno));
	pthread_mutex_lock(&q->lock);
	h = q->head;
	q->head = q->tail = NULL;
	pthread_mutex_unlock(&q->lock);
	return h;
}

/* ---- commands ---- */

void dthread_cmd(struct dthread *t, struct dcmd *c)
{
	c->next = NULL;
	pthread_mutex_lock(&t->cmd_lock);
	if (t->cmd_tail)
		t->cmd_tail->next = c;
	else
		t->cmd_head = c;
	t->cmd_tail = c;
	atomic_store_explicit(&t->cmd_pending, 1, memory_order_release);
	pthread_mutex_unlock(&t->cmd_lock);
}

void dthread_retry_add(struct dthread *t, struct slot *s)
{
	if (s->in_retry)
		return;
	s->in_retry = true;
	s->retry_next = t->retry_head;
	t->retry_head = s;
}

static void count_err(struct dthread *t, unsigned kind)
{
	ctr_add(&t->stats.errors[kind], 1);
}

/* ---- job failure ---- */

static void job_cancel_recvs(struct dthread *t, struct job *j)
{
	for (uint32_t s = 0; s < j->window; s++)
		for (uint32_t r = 0; r < j->nranks; r++) {
			struct rslot *rs = job_rslot(j, s, r);
			if (rs->state == RS_POSTED)
				fabric_cancel(t->fabric, &rs->rop.op);
			else if (rs->state == RS_REPOST)
				rs->state = RS_IDLE;
		}
}

/* The job cannot go on: tell the control thread (once), stop receiving. */
static void job_fail(struct dthread *t, struct job *j, enum wire_code code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void job_fail(struct dthread *t, struct job *j, enum wire_code code, const char *fmt, ...)
{
	va_list ap;

	if (j->dead)
		return;
	j->dead = true;
	va_start(ap, fmt);
	vsnprintf(j->abort_text, sizeof(j->abort_text), fmt, ap);
	va_end(ap);
	j->abort_code = (uint16_t)code;
	count_err(t, code);
	memset(&j->abort_ev, 0, sizeof(j->abort_ev));
	j->abort_ev.type = DEV_ABORT;
	j->abort_ev.job = j;
	evq_push(t->evq, &j->abort_ev);
	job_cancel_recvs(t, j);
}

/* ---- receive buffers ---- */

static void post_recv(struct dthread *t, struct job *j, uint32_t s, uint32_t r)
{
	struct rslot *rs = job_rslot(j, s, r);
	int rc;

	if (j->dead) {
		rs->state = RS_IDLE;
		return;
	}
	rc = fabric_trecv(t->fabric, rs->buf, j->chunk, j->mr.desc, FI_ADDR_UNSPEC,
			  wire_tag_make(WIRE_TAG_DATA, j->handle, r, s), 0, &rs->rop.op);
	if (rc == 0) {
		rs->state = RS_POSTED;
		j->ops_out++;
	} else if (rc == -FI_EAGAIN) {
		ctr_add(&t->stats.eagain[EAGAIN_RECV], 1);
		rs->state = RS_REPOST;
		dthread_retry_add(t, &j->slots[s]);
	} else {
		rs->state = RS_IDLE;
		job_fail(t, j, WIRE_E_INTERNAL, "posting a receive for rank %u slot %u failed: %s", r, s,
			 fi_strerror(-rc));
	}
}

/* ---- slots ---- */

static void slot_contribute(struct dthread *t, struct job *j, uint32_t s, uint32_t r);

/* f16/bf16 accumulate in f32: the first chunk / 4 elements in sl->acc, the
 * rest in the slot's fixed job_acc_hi() unit. Returns the split. */
static size_t acc16_split(const struct job *j, size_t n)
{
	size_t h = j->chunk / 4;
	return n < h ? n : h;
}

/* Rank r's contribution (in rs->buf) into the slot. The rank's receive must
 * not be posted: the first contribution of a type accumulated as is is
 * adopted, its buffer swapped with the accumulator (the caller posts the
 * rank's next receive into rs->buf afterwards, the old accumulator). */
static void slot_reduce_one(struct job *j, struct slot *sl, uint32_t r, bool first)
{
	enum sc_dtype dt = (enum sc_dtype)wire_imm_dtype(sl->imm);
	enum sc_op op = (enum sc_op)wire_imm_op(sl->imm);
	size_t n = sl->len / sc_dtype_size(dt);
	struct rslot *rs = job_rslot(j, sl->index, r);
	uint64_t t0 = sc_now_ns();

	if (sc_dtype_acc(dt) != dt) {
		size_t h = acc16_split(j, n);
		const uint16_t *src = (const uint16_t *)rs->buf;
		uint8_t *hi = job_acc_hi(j, sl->index);
		if (first) {
			sc_reduce_load(dt, sl->acc, src, h);
			if (n > h)
				sc_reduce_load(dt, hi, src + h, n - h);
		} else {
			sc_reduce_acc(dt, op, sl->acc, src, h);
			if (n > h)
				sc_reduce_acc(dt, op, hi, src + h, n - h);
		}
	} else if (first) {
		uint8_t *b = rs->buf;
		rs->buf = sl->acc;
		sl->acc = b;
	} else {
		sc_reduce_acc(dt, op, sl->acc, rs->buf, n);
	}
	sl->reduce_ns += sc_now_ns() - t0;
}

static void slot_complete(struct dthread *t, struct job *j, struct slot *sl)
{
	enum sc_dtype dt = (enum sc_dtype)wire_imm_dtype(sl->imm);
	size_t n = sl->len / sc_dtype_size(dt);
	uint64_t wait = sl->last_ns - sl->first_ns;
	int rc;

	if (j->flags & WIRE_JOIN_F_DETERMINISTIC) {
		for (uint32_t r = 0; r < j->nranks; r++)
			slot_reduce_one(j, sl, r, r == 0);
		for (uint32_t r = 0; r < j->nranks; r++)
			post_recv(t, j, sl->index, r);
	}
	if (sc_dtype_acc(dt) != dt) {
		/* Rounded in place, ascending: the low part's 16-bit values
		 * end at 2h, where the high part's go. */
		size_t h = acc16_split(j, n);
		uint64_t t0 = sc_now_ns();
		sc_reduce_store(dt, sl->acc, sl->acc, h);
		if (n > h)
			sc_reduce_store(dt, sl->acc + 2 * h, job_acc_hi(j, sl->index), n - h);
		sl->reduce_ns += sc_now_ns() - t0;
	}

	ctr_add(&t->stats.chunks, 1);
	ctr_add(&j->chunks, 1);
	hist_observe(&t->stats.reduce, hist_reduce_le, sl->reduce_ns);
	hist_observe(&t->stats.straggler, hist_straggler_le, wait);
	ctr_add(&j->ranks[sl->last_rank].last_count, 1);
	ctr_add(&j->ranks[sl->last_rank].last_wait_ns, wait);
	atomic_fetch_sub_explicit(&j->partial, 1, memory_order_relaxed);

	sl->state = SLOT_SENDING;
	sl->send_next = 0;
	sl->sends_left = 0;
	rc = t->result->send_result(t, j, sl);
	if (rc)
		job_fail(t, j, WIRE_E_INTERNAL, "sending the result of chunk seq %u failed: %s", sl->seq,
			 fi_strerror(-rc));
}

static void slot_free(struct dthread *t, struct job *j, struct slot *sl)
{
	sl->state = SLOT_FREE;
	sl->ncontrib = 0;
	sl->reduce_ns = 0;
	sl->seq = (sl->seq + j->window) & WIRE_SEQ_MASK;
	for (uint32_t r = 0; r < j->nranks; r++)
		job_rslot(j, sl->index, r)->contributed = false;
	if (!sl->npending)
		return;
	sl->npending = 0;
	for (uint32_t r = 0; r < j->nranks && !j->dead; r++) {
		struct rslot *rs = job_rslot(j, sl->index, r);
		if (rs->state == RS_PENDING) {
			rs->state = RS_IDLE;
			slot_contribute(t, j, sl->index, r);
		}
	}
}

/* Rank r's message (rs->imm, rs->len) for slot s is in its buffer. */
static void slot_contribute(struct dthread *t, struct job *j, uint32_t s, uint32_t r)
{
	struct slot *sl = &j->slots[s];
	struct rslot *rs = job_rslot(j, s, r);
	unsigned dt = wire_imm_dtype(rs->imm);
	uint32_t seq = wire_imm_seq(rs->imm);
	size_t esz;
	uint64_t now;

	if (dt >= SC_DTYPE_COUNT || !(j->dtype_mask & (1u << dt))) {
		job_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u as type %u, not in the job's types 0x%x",
			 r, seq, dt, j->dtype_mask);
		return;
	}
	esz = sc_dtype_size((enum sc_dtype)dt);
	if (rs->len == 0 || rs->len % esz || rs->len > j->chunk) {
		job_fail(t, j, WIRE_E_DATA,
			 "rank %u sent %u bytes for chunk seq %u: not a positive multiple of the %s size up to %u",
			 r, rs->len, seq, sc_dtype_name((enum sc_dtype)dt), j->chunk);
		return;
	}
	if (sl->state == SLOT_SENDING) {
		if (seq == ((sl->seq + j->window) & WIRE_SEQ_MASK)) {
			rs->state = RS_PENDING;
			sl->npending++;
			return;
		}
		job_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u into slot %u, which still sends seq %u",
			 r, seq, s, sl->seq);
		return;
	}
	if (seq != sl->seq) {
		job_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u into slot %u, expected seq %u", r,
			 seq, s, sl->seq);
		return;
	}
	if (rs->contributed) {
		job_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u twice", r, seq);
		return;
	}
	now = sc_now_ns();
	if (sl->ncontrib == 0) {
		sl->imm = rs->imm;
		sl->len = rs->len;
		sl->first_ns = now;
		sl->state = SLOT_FILLING;
		atomic_fetch_add_explicit(&j->partial, 1, memory_order_relaxed);
	} else if (rs->imm != sl->imm || rs->len != sl->len) {
		job_fail(t, j, WIRE_E_DATA,
			 "chunk seq %u: rank %u sent %s %s of %u bytes, an earlier rank %s %s of %u bytes",
			 seq, r, sc_dtype_name((enum sc_dtype)dt),
			 sc_op_name((enum sc_op)wire_imm_op(rs->imm)), rs->len,
			 sc_dtype_name((enum sc_dtype)wire_imm_dtype(sl->imm)),
			 sc_op_name((enum sc_op)wire_imm_op(sl->imm)), sl->len);
		return;
	}
	rs->contributed = true;
	sl->ncontrib++;
	sl->last_ns = now;
	sl->last_rank = r;
	j->last_activity_ns = now;
	if (j->flags & WIRE_JOIN_F_DETERMINISTIC) {
		rs->state = RS_HELD;
	} else {
		slot_reduce_one(j, sl, r, sl->ncontrib == 1);
		post_recv(t, j, s, r);
	}
	if (sl->ncontrib == j->nranks)
		slot_complete(t, j, sl);
}

/* ---- job setup and teardown (commands) ---- */

static int addr_get(struct dthread *t, const uint8_t *addr, size_t len, fi_addr_t *out)
{
	for (size_t i = 0; i < t->naddrs; i++)
		if (t->addrs[i].len == len && !memcmp(t->addrs[i].addr, addr, len)) {
			t->addrs[i].refs++;
			*out = t->addrs[i].fa;
			return 0;
		}
	if (t->naddrs == t->addrs_cap) {
		size_t cap = t->addrs_cap ? 2 * t->addrs_cap : 16;
		struct addr_ref *n = realloc(t->addrs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		t->addrs = n;
		t->addrs_cap = cap;
	}
	struct addr_ref *a = &t->addrs[t->naddrs];
	int rc = fabric_av_insert(t->fabric, addr, len, &a->fa);
	if (rc)
		return rc;
	memcpy(a->addr, addr, len);
	a->len = len;
	a->refs = 1;
	t->naddrs++;
	*out = a->fa;
	return 0;
}

static void addr_put(struct dthread *t, fi_addr_t fa)
{
	for (size_t i = 0; i < t->naddrs; i++)
		if (t->addrs[i].fa == fa) {
			if (--t->addrs[i].refs == 0) {
				fabric_av_remove(t->fabric, fa);
				t->addrs[i] = t->addrs[--t->naddrs];
			}
			return;
		}
}

static uint32_t addr_refs(struct dthread *t, fi_addr_t fa)
{
	for (size_t i = 0; i < t->naddrs; i++)
		if (t->addrs[i].fa == fa)
			return t->addrs[i].refs;
	return 0;
}

static int cmd_add_job(struct dthread *t, struct job *j)
{
	int rc = fabric_mr_reg(t->fabric, j->region, j->region_bytes, &j->mr);

	if (rc)
		return rc;
	rc = t->result->init(t, j);
	if (rc) {
		fabric_mr_dereg(&j->mr);
		return rc;
	}
	j->dnext = t->jobs;
	t->jobs = j;
	j->last_activity_ns = sc_now_ns();
	return 0;
}

static int cmd_add_rank(struct dthread *t, struct job *j, uint32_t r)
{
	struct job_rank *jr = &j->ranks[r];
	int rc = addr_get(t, jr->addr, jr->addr_len, &jr->fi_addr);

	if (rc)
		return rc;
	jr->added = true;
	for (uint32_t s = 0; s < j->window; s++)
		post_recv(t, j, s, r);
	return 0;
}

static void retry_purge(struct dthread *t, struct job *j)
{
	struct slot **pp = &t->retry_head;

	while (*pp) {
		if ((*pp)->job == j) {
			(*pp)->in_retry = false;
			*pp = (*pp)->retry_next;
		} else {
			pp = &(*pp)->retry_next;
		}
	}
}

/* Every operation of a removed job completed: give its memory back. */
static void job_finish(struct dthread *t, struct job *j)
{
	struct job **pp = &t->jobs;

	while (*pp && *pp != j)
		pp = &(*pp)->dnext;
	if (*pp)
		*pp = j->dnext;
	retry_purge(t, j);
	t->result->fini(t, j);
	fabric_mr_dereg(&j->mr);
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->ranks[r].added) {
			addr_put(t, j->ranks[r].fi_addr);
			j->ranks[r].added = false;
		}
	munmap(j->region, j->region_bytes);
	j->region = NULL;
	j->cmd_remove.rc = 0;
	evq_push(t->evq, &j->cmd_remove);
}

static void job_maybe_finish(struct dthread *t, struct job *j)
{
	if (j->removing && j->ops_out == 0)
		job_finish(t, j);
}

static void cmd_remove_job(struct dthread *t, struct dcmd *c)
{
	struct job *j = c->job;

	(void)c;
	j->removing = true;
	j->removed_ns = sc_now_ns();
	if (!j->dead) {
		j->dead = true; /* the control thread decided; no event needed */
		job_cancel_recvs(t, j);
	}
	job_maybe_finish(t, j);
}

static void cmds_run(struct dthread *t)
{
	struct dcmd *c;

	pthread_mutex_lock(&t->cmd_lock);
	c = t->cmd_head;
	t->cmd_head = t->cmd_tail = NULL;
	atomic_store_explicit(&t->cmd_pending, 0, memory_order_relaxed);
	pthread_mutex_unlock(&t->cmd_lock);
	while (c) {
		struct dcmd *next = c->next;
		switch (c->type) {
		case DCMD_ADD_JOB:
			c->rc = cmd_add_job(t, c->job);
			evq_push(t->evq, c);
			break;
		case DCMD_ADD_RANK:
			c->rc = cmd_add_rank(t, c->job, c->rank);
			evq_push(t->evq, c);
			break;
		case DCMD_REMOVE_JOB:
			cmd_remove_job(t, c);
			break;
		default:
			SC_ERR("data thread %u: unknown command %d", t->index, c->type);
		}
		c = next;
	}
}

/* ---- completions ---- */

static void on_recv(struct dthread *t, const struct fabric_cqe *e, struct dop *d)
{
	struct job *j = d->job;
	struct rslot *rs = job_rslot(j, d->slot, d->rank);

	j->ops_out--;
	rs->state = RS_IDLE;
	if (j->dead) {
		job_maybe_finish(t, j);
		return;
	}
	if (e->err) {
		if (e->err == -FI_ECANCELED)
			return;
		if (e->err == -FI_ETRUNC) {
			/* An error completion carries no source (libfabric 1.17 has
			 * no src_addr in fi_cq_err_entry), so the sender may be
			 * anyone who guessed the tag: drop it and keep the job. If
			 * it was the rank itself, its chunk is missing and the job
			 * timeout names it (with this drop in the sentence). */
			count_err(t, ERR_TRUNCATED);
			j->trunc_drops++;
			SC_LOG_RATELIMIT(SC_LOG_WARN, 1000,
					 "job 0x%" PRIx64 ": dropped a %zu-byte message for rank %u slot %u "
					 "(chunk is %u bytes, sender unknown)",
					 j->id, (size_t)j->chunk + e->olen, d->rank, d->slot, j->chunk);
			post_recv(t, j, d->slot, d->rank);
			return;
		}
		count_err(t, ERR_RECV_ERROR);
		job_fail(t, j, WIRE_E_INTERNAL, "receive from rank %u failed: %s", d->rank,
			 fi_strerror(-e->err));
		return;
	}
	if (t->fabric->has_source && e->src != j->ranks[d->rank].fi_addr) {
		/* Someone else used the rank's tag: drop it, keep the buffer. */
		count_err(t, ERR_FOREIGN_SOURCE);
		post_recv(t, j, d->slot, d->rank);
		return;
	}
	if (!(e->flags & FI_REMOTE_CQ_DATA)) {
		count_err(t, ERR_NO_IMMEDIATE);
		job_fail(t, j, WIRE_E_DATA, "rank %u sent data without immediate data (slot %u)",
			 d->rank, d->slot);
		return;
	}
	rs->imm = e->data;
	rs->len = (uint32_t)e->len;
	ctr_add(&t->stats.rx_bytes, e->len);
	ctr_add(&j->bytes_in, e->len);
	ctr_add(&j->ranks[d->rank].bytes_in, e->len);
	slot_contribute(t, j, d->slot, d->rank);
}

static void on_send(struct dthread *t, const struct fabric_cqe *e, struct dop *d)
{
	struct job *j = d->job;
	struct slot *sl = &j->slots[d->slot];

	j->ops_out--;
	if (e->err)
		count_err(t, ERR_SEND_ERROR);
	else {
		ctr_add(&t->stats.tx_bytes, sl->len);
		ctr_add(&j->bytes_out, sl->len);
	}
	if (j->dead) {
		job_maybe_finish(t, j);
		return;
	}
	if (t->result->on_send_complete(t, j, sl, d->rank, e->err))
		slot_free(t, j, sl);
}

static void retries_run(struct dthread *t)
{
	struct slot *s = t->retry_head;

	t->retry_head = NULL;
	while (s) {
		struct slot *next = s->retry_next;
		struct job *j = s->job;
		s->in_retry = false;
		for (uint32_t r = 0; r < j->nranks && !j->dead; r++)
			if (job_rslot(j, s->index, r)->state == RS_REPOST)
				post_recv(t, j, s->index, r);
		if (!j->dead && s->state == SLOT_SENDING && s->send_next < j->nranks) {
			int rc = t->result->send_result(t, j, s);
			if (rc)
				job_fail(t, j, WIRE_E_INTERNAL, "result send failed: %s", fi_strerror(-rc));
		}
		s = next;
	}
}

/* A removed job whose operations have not all completed: receives were
 * cancelled, so what is left are result sends to ranks that do not take
 * them (a hung process keeps a rendezvous send waiting). The buffers may
 * still be read by the provider, so they are never freed before the
 * completion. After stuck_grace_ms the job is logged, once. */
static void stuck_check(struct dthread *t, struct job *j, uint64_t now)
{
	if (j->stuck_reported || now - j->removed_ns < (uint64_t)j->stuck_grace_ms * 1000000ull)
		return;
	j->stuck_reported = true;
	/* Drop this job's AV references; an address no other job uses is
	 * removed, and rxm then closes the connection and fails the sends. */
	uint32_t removed = 0, shared = 0;
	for (uint32_t r = 0; r < j->nranks; r++) {
		struct job_rank *jr = &j->ranks[r];
		if (!jr->added)
			continue;
		if (addr_refs(t, jr->fi_addr) > 1) {
			shared++;
			continue;
		}
		addr_put(t, jr->fi_addr);
		jr->added = false;
		removed++;
	}
	/* Give the buffers back without unmapping them: deregistered, a
	 * provider (or a peer's RMA read) can no longer use them through the
	 * MR, and MADV_DONTNEED frees the pages while the range stays mapped
	 * (a stray read sees zeros, never a fault). The job struct, which the
	 * operation contexts point into, lives on until they complete or the
	 * daemon stops. */
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

static void timeouts_scan(struct dthread *t, uint64_t now)
{
	for (struct job *j = t->jobs; j; j = j->dnext) {
		atomic_store_explicit(&j->ops_seen, j->ops_out, memory_order_relaxed);
		if (j->removing) {
			stuck_check(t, j, now);
			continue;
		}
		if (j->dead || !atomic_load_explicit(&j->partial, memory_order_relaxed))
			continue;
		uint64_t idle = now - j->last_activity_ns;
		if (idle < (uint64_t)j->timeout_ms * 1000000ull)
			continue;
		/* The oldest partially filled slot names the rank we wait for. */
		struct slot *old = NULL;
		for (uint32_t s = 0; s < j->window; s++) {
			struct slot *sl = &j->slots[s];
			if (sl->state == SLOT_FILLING && (!old || sl->first_ns < old->first_ns))
				old = sl;
		}
		uint32_t missing = 0;
		if (old)
			for (uint32_t r = 0; r < j->nranks; r++)
				if (!job_rslot(j, old->index, r)->contributed) {
					missing = r;
					break;
				}
		if (j->trunc_drops)
			job_fail(t, j, WIRE_E_TIMEOUT,
				 "rank %u sent nothing for %llu ms (chunk seq %u); %u oversize messages "
				 "were dropped", missing, (unsigned long long)(idle / 1000000ull),
				 old ? old->seq : 0, j->trunc_drops);
		else
			job_fail(t, j, WIRE_E_TIMEOUT, "rank %u sent nothing for %llu ms (chunk seq %u)",
				 missing, (unsigned long long)(idle / 1000000ull), old ? old->seq : 0);
	}
}

static void *dthread_main(void *arg)
{
	struct dthread *t = arg;
	struct fabric_cqe cqe[CQ_BATCH];
	uint64_t idle_since = 0, last = sc_now_ns();
	char name[16];

	snprintf(name, sizeof(name), "sumcastd-data%u", t->index);
	pthread_setname_np(pthread_self(), name);
	while (!atomic_load_explicit(&t->stop, memory_order_relaxed)) {
		int n = fabric_cq_poll(t->fabric, cqe, CQ_BATCH);
		if (n < 0) {
			count_err(t, ERR_CQ);
			SC_LOG_RATELIMIT(SC_LOG_ERROR, 1000, "data thread %u: CQ read failed: %s",
					 t->index, fi_strerror(-n));
			n = 0;
		}
		for (int i = 0; i < n; i++) {
			struct dop *d = (struct dop *)cqe[i].op;
			if (!d)
				continue;
			if (d->kind == DOP_RECV)
				on_recv(t, &cqe[i], d);
			else
				on_send(t, &cqe[i], d);
		}
		if (atomic_load_explicit(&t->cmd_pending, memory_order_acquire))
			cmds_run(t);
		if (t->retry_head)
			retries_run(t);

		uint64_t now = sc_now_ns();
		atomic_store_explicit(&t->heartbeat_ns, now, memory_order_relaxed);
		if (now >= t->next_scan_ns) {
			timeouts_scan(t, now);
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
				/* Deep idle (nothing for 100 ms): sleep longer so an
				 * unused daemon costs ~1% of a core, not ~6%. */
				long us = idle > DEEP_IDLE_NS ? DEEP_IDLE_SLEEP_US : (long)t->sleep_us;
				if (us < (long)t->sleep_us)
					us = (long)t->sleep_us;
				struct timespec ts = { 0, us * 1000 };
				nanosleep(&ts, NULL);
			} else {
				sched_yield();
			}
			ctr_add(&t->idle_ns, now - last);
		}
		last = now;
	}
	return NULL;
}

int dthread_start(struct dthread *t, unsigned index, int cpu, const struct settings *s,
		  struct evq *evq)
{
	struct fabric_params p = {
		.provider = s->provider,
		.node = *s->node ? s->node : NULL,
		.cq_size = (size_t)s->cq_size,
	};
	int rc;

	memset(t, 0, sizeof(*t));
	t->index = index;
	t->cpu = cpu;
	t->evq = evq;
	t->result = &result_unicast_ops;
	t->spin_us = (unsigned)s->idle_spin_us;
	t->sleep_us = (unsigned)s->idle_sleep_us;
	atomic_store(&t->heartbeat_ns, sc_now_ns());
	pthread_mutex_init(&t->cmd_lock, NULL);
	rc = fabric_open(&p, &t->fabric);
	if (rc)
		goto err_lock;
	rc = -pthread_create(&t->tid, NULL, dthread_main, t);
	if (rc) {
		SC_ERR("data thread %u: pthread_create: %s", index, strerror(-rc));
		goto err_fabric;
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

err_fabric:
	fabric_close(t->fabric);
	t->fabric = NULL;
err_lock:
	pthread_mutex_destroy(&t->cmd_lock);
	return rc;
}

void dthread_stop(struct dthread *t)
{
	if (!t->fabric)
		return;
	if (t->started) {
		atomic_store(&t->stop, true);
		pthread_join(t->tid, NULL);
		t->started = false;
	}
	/* Commands never run are dropped; they live in their jobs. */
	t->cmd_head = t->cmd_tail = NULL;
	/* Registrations go before the domain; buffers after the endpoint is
	 * closed (nothing may still write into them). */
	for (struct job *j = t->jobs; j; j = j->dnext) {
		t->result->fini(t, j);
		fabric_mr_dereg(&j->mr);
	}
	fabric_close(t->fabric);
	t->fabric = NULL;
	for (struct job *j = t->jobs; j; j = j->dnext) {
		munmap(j->region, j->region_bytes);
		j->region = NULL;
	}
	t->jobs = NULL;
	free(t->addrs);
	t->addrs = NULL;
	pthread_mutex_destroy(&t->cmd_lock);
}
