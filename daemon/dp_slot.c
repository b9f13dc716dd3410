/* The slot state machine: one slot of a job's window collects one chunk
 * from every rank, reduces it and sends the result, then takes the chunk
 * window further on.
 *
 *   FREE --first contribution--> FILLING --last--> SENDING --every result
 *   send completed (slot_free)--> FREE, seq += window
 *
 * Per rank (struct rslot): IDLE -> POSTED (receive posted) -> IDLE (arrived)
 * -> reduced and POSTED again (a TAKE message, wire.h, is empty: counted,
 * nothing reduced; the contribution that completes the slot is posted
 * again after the result sends); HELD until the slot completes in
 * deterministic mode, posted again after its result sends; PENDING when
 * chunk seq + window arrives while the slot still sends seq, taken when
 * the slot frees. Every contribution is
 * checked (type, length, seq, duplicate, agreement with the first one); one
 * that does not fit fails the job, never a wrong sum.
 *
 * It posts nothing itself: receives through t->slot_ops, result sends
 * through t->result, so a unit test drives it without a thread or a fabric. */
#include <rdma/fi_errno.h>
#include <stdarg.h>
#include <stddef.h>

#include "clock.h"
#include "dp.h"
#include "reduce.h"
#include "dp_result.h"

static void slot_fail(struct dthread *t, struct job *j, enum wire_code code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void slot_fail(struct dthread *t, struct job *j, enum wire_code code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t->slot_ops->fail(t, j, code, fmt, ap);
	va_end(ap);
}

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

/* Every rank contributed: finish the sum (deterministic: reduce in rank
 * order now; 16-bit: round back), count it, start the result sends. */
static void slot_complete(struct dthread *t, struct job *j, struct slot *sl)
{
	enum sc_dtype dt = (enum sc_dtype)wire_imm_dtype(sl->imm);
	size_t n = sl->len / sc_dtype_size(dt);
	uint64_t wait = sl->last_ns - sl->first_ns;
	int rc;

	if (!sl->ndata) {
		slot_fail(t, j, WIRE_E_DATA, "chunk seq %u: every rank asked for the result and none "
			  "contributed (mode take)", sl->seq);
		return;
	}
	if (j->flags & WIRE_JOIN_F_DETERMINISTIC) {
		bool first = true;
		for (uint32_t r = 0; r < j->nranks; r++) {
			if (job_rslot(j, sl->index, r)->len) {
				slot_reduce_one(j, sl, r, first);
				first = false;
			}
		}
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

	if (j->sealed && sc_seal(&j->seal, SC_SEAL_RESULT, SC_SEAL_ANY_RANK, sl->chunk, sl->imm, sl->acc,
				 sl->len, sl->acc)) {
		slot_fail(t, j, WIRE_E_INTERNAL, "sealing the result of chunk seq %u failed (OpenSSL)", sl->seq);
		return;
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
	sl->planned = false;
	sl->mc = false;
	rc = t->result->send_result(t, j, sl);
	if (rc < 0)
		slot_fail(t, j, WIRE_E_INTERNAL, "sending the result of chunk seq %u failed: %s", sl->seq,
			  fi_strerror(-rc));
	else if (rc > 0)
		slot_free(t, j, sl); /* delivered already (injected) */
	/* Deterministic: the held buffers take their next chunks, posted
	 * after the sends (slot_contribute says why). */
	for (uint32_t r = 0; r < j->nranks && (j->flags & WIRE_JOIN_F_DETERMINISTIC); r++)
		if (job_rslot(j, sl->index, r)->state == RS_HELD)
			t->slot_ops->post_recv(t, j, sl->index, r);
}

void slot_free(struct dthread *t, struct job *j, struct slot *sl)
{
	sl->state = SLOT_FREE;
	sl->ncontrib = 0;
	sl->ndata = 0;
	sl->len = 0;
	sl->reduce_ns = 0;
	sl->seq = (sl->seq + j->window) & WIRE_SEQ_MASK;
	sl->chunk += j->window;
	sl->planned = false;
	sl->mc = false;
	for (uint32_t r = 0; r < j->nranks; r++) {
		struct rslot *rs = job_rslot(j, sl->index, r);
		rs->contributed = false;
		rs->nack = rs->nack_next;
		rs->nack_next = rs->uni = rs->held = false;
	}
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

void slot_contribute(struct dthread *t, struct job *j, uint32_t s, uint32_t r)
{
	struct slot *sl = &j->slots[s];
	struct rslot *rs = job_rslot(j, s, r);
	unsigned dt = wire_imm_dtype(rs->imm);
	unsigned mode = wire_imm_mode(rs->imm);
	uint32_t seq = wire_imm_seq(rs->imm);
	uint32_t imm = wire_imm_plain(rs->imm);
	size_t esz;
	uint64_t now;

	if (dt >= SC_DTYPE_COUNT || !(j->dtype_mask & (1u << dt))) {
		slot_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u as type %u, not in the job's types 0x%x",
			  r, seq, dt, j->dtype_mask);
		return;
	}
	if (mode > WIRE_MODE_MAX) {
		slot_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u in mode %u, which does not exist",
			  r, seq, mode);
		return;
	}
	esz = sc_dtype_size((enum sc_dtype)dt);
	if (mode == WIRE_MODE_TAKE && rs->len) {
		slot_fail(t, j, WIRE_E_DATA, "rank %u sent %u bytes for chunk seq %u in mode take, which "
			  "contributes nothing (its message must be empty)", r, rs->len, seq);
		return;
	}
	if (mode != WIRE_MODE_TAKE && (rs->len == 0 || rs->len % esz || rs->len > j->payload)) {
		slot_fail(t, j, WIRE_E_DATA,
			  "rank %u sent %u bytes for chunk seq %u: not a positive multiple of the %s size up to %u",
			  r, rs->len, seq, sc_dtype_name((enum sc_dtype)dt), j->payload);
		return;
	}
	if (sl->state == SLOT_SENDING) {
		if (seq == ((sl->seq + j->window) & WIRE_SEQ_MASK)) {
			rs->state = RS_PENDING;
			sl->npending++;
			/* a multicast result is kept until every rank has it */
			if (sl->mc && sl->npending == j->nranks && t->result->released(t, j, sl))
				slot_free(t, j, sl);
			return;
		}
		slot_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u into slot %u, which still sends seq %u",
			  r, seq, s, sl->seq);
		return;
	}
	if (seq != sl->seq) {
		slot_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u into slot %u, expected seq %u", r,
			  seq, s, sl->seq);
		return;
	}
	if (rs->contributed) {
		slot_fail(t, j, WIRE_E_DATA, "rank %u sent chunk seq %u twice", r, seq);
		return;
	}
	if (j->nleft) {
		/* A rank that left cleanly will never send this chunk. */
		for (uint32_t lr = 0; lr < j->nranks; lr++)
			if (lr != r && j->ranks[lr].left && !job_rslot(j, s, lr)->contributed) {
				slot_fail(t, j, WIRE_E_RANK_LEFT, "rank %u left job 0x%llx and chunk seq %u needs it",
					  lr, (unsigned long long)j->id, seq);
				return;
			}
	}
	now = sc_now_ns();
	if ((sl->ncontrib && imm != sl->imm) || (rs->len && sl->ndata && rs->len != sl->len)) {
		slot_fail(t, j, WIRE_E_DATA,
			  "chunk seq %u: rank %u sent %s %s of %u bytes, an earlier rank %s %s of %u bytes",
			  seq, r, sc_dtype_name((enum sc_dtype)dt),
			  sc_op_name((enum sc_op)wire_imm_op(rs->imm)), rs->len,
			  sc_dtype_name((enum sc_dtype)wire_imm_dtype(sl->imm)),
			  sc_op_name((enum sc_op)wire_imm_op(sl->imm)), sl->len);
		return;
	}
	if (sl->ncontrib == 0) {
		sl->imm = imm;
		sl->first_ns = now;
		sl->state = SLOT_FILLING;
		atomic_fetch_add_explicit(&j->partial, 1, memory_order_relaxed);
	}
	if (rs->len) {
		sl->len = rs->len;
		sl->ndata++;
	}
	rs->contributed = true;
	rs->wants = mode != WIRE_MODE_GIVE;
	sl->ncontrib++;
	sl->last_ns = now;
	sl->last_rank = r;
	j->last_activity_ns = now;
	if (j->flags & WIRE_JOIN_F_DETERMINISTIC) {
		rs->state = RS_HELD;
	} else if (rs->len) {
		slot_reduce_one(j, sl, r, sl->ndata == 1);
	}
	bool last = sl->ncontrib == j->nranks;
	/* The rank's buffer takes its next chunk; after the last
	 * contribution only once the result sends are posted, which are the
	 * chunk's latency. The rank sends into this slot again (chunk seq +
	 * window) only once it has this result; should that message be
	 * there before the post, the provider keeps it as unexpected until
	 * the post, which comes in this same call. */
	if (!last && !(j->flags & WIRE_JOIN_F_DETERMINISTIC))
		t->slot_ops->post_recv(t, j, s, r);
	if (!last)
		return;
	slot_complete(t, j, sl);
	if (!(j->flags & WIRE_JOIN_F_DETERMINISTIC))
		t->slot_ops->post_recv(t, j, s, r);
}

void slot_nack(struct dthread *t, struct job *j, uint32_t s, uint32_t r, uint32_t seq)
{
	struct slot *sl = &j->slots[s];
	struct rslot *rs = job_rslot(j, s, r);

	if (!j->mc) {
		slot_fail(t, j, WIRE_E_DATA, "rank %u sent a NACK for chunk seq %u, but the job's results "
			  "go by unicast only", r, seq);
		return;
	}
	if (seq == ((sl->seq - j->window) & WIRE_SEQ_MASK)) {
		/* The slot moved on: that result went to every rank by unicast
		 * (a multicast one is kept until this rank's next chunk). */
		ctr_add(&t->stats.mc_nack_late, 1);
		return;
	}
	/* A NACK travels apart from the rank's data: it may come before its
	 * chunk's contribution is in, even while the slot still keeps the
	 * chunk a window before (the rank had that result, others not yet). */
	bool early = seq == ((sl->seq + j->window) & WIRE_SEQ_MASK) && sl->state != SLOT_FREE;
	if ((seq != sl->seq && !early) || (early ? rs->nack_next : rs->nack)) {
		slot_fail(t, j, WIRE_E_DATA, "rank %u sent a NACK for chunk seq %u in slot %u, which holds "
			  "seq %u%s", r, seq, s, sl->seq,
			  seq == sl->seq || early ? " (a second NACK for that chunk)" : "");
		return;
	}
	ctr_add(&t->stats.mc_nacks, 1);
	if (early) {
		rs->nack_next = true; /* slot_free carries it over */
		return;
	}
	rs->nack = true;
	if (sl->state != SLOT_SENDING)
		return; /* the plan at completion sends it by unicast */
	if (!sl->mc) {
		ctr_add(&t->stats.mc_nack_late, 1); /* its unicast is out or due */
		return;
	}
	int rc = t->result->repair(t, j, sl, r);
	if (rc < 0)
		slot_fail(t, j, WIRE_E_INTERNAL, "repairing the result of chunk seq %u for rank %u failed: %s",
			  sl->seq, r, fi_strerror(-rc));
	else if (rc > 0)
		slot_free(t, j, sl);
}
