/* The daemon's slot state machine (daemon/dp_slot.c), driven directly: no
 * thread, no fabric. Receives are "posted" by a recording slot_ops, result
 * sends by a recording result backend, and each contribution is written
 * into the rank's current buffer, as the fabric would. Every result is
 * compared with a reference computed here with plain C arithmetic. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dp.h"
#include "reduce.h"
#include "dp_result.h"

#define MAX_RANKS 8
#define MAX_WINDOW 4
#define CHUNK 4096

/* ---- what the state machine asked for ---- */

static struct {
	unsigned posts[MAX_WINDOW][MAX_RANKS]; /* post_recv per (slot, rank) */
	unsigned fails;
	enum wire_code code;
	char text[256];
	unsigned sends;                   /* send_result calls */
	unsigned posts_at_send[MAX_RANKS]; /* posts of the sent slot when it was sent */
	uint8_t result[CHUNK];            /* the last result sent */
	uint32_t result_len, result_imm, result_seq;
} rec;

static void fake_post_recv(struct dthread *t, struct job *j, uint32_t s, uint32_t r)
{
	struct rslot *rs = job_rslot(j, s, r);

	(void)t;
	if (j->dead) {
		rs->state = RS_IDLE;
		return;
	}
	rs->state = RS_POSTED;
	rec.posts[s][r]++;
}

static void fake_fail(struct dthread *t, struct job *j, enum wire_code code, const char *fmt,
		      va_list ap)
{
	(void)t;
	if (j->dead)
		return;
	j->dead = true;
	rec.fails++;
	rec.code = code;
	vsnprintf(rec.text, sizeof(rec.text), fmt, ap);
}

static const struct slot_ops test_slot_ops = {
	.post_recv = fake_post_recv,
	.fail = fake_fail,
};

static int fake_init(struct dthread *t, struct job *j)
{
	(void)t;
	(void)j;
	return 0;
}

/* Every rank's send is "posted" at once. */
static int fake_send(struct dthread *t, struct job *j, struct slot *s)
{
	(void)t;
	assert_true(s->len <= CHUNK);
	memcpy(rec.result, s->acc, s->len);
	rec.result_len = s->len;
	rec.result_imm = s->imm;
	rec.result_seq = s->seq;
	memcpy(rec.posts_at_send, rec.posts[s->index], sizeof(rec.posts_at_send));
	rec.sends++;
	s->send_next = j->nranks;
	s->sends_left = j->nranks;
	return 0;
}

static bool fake_done(struct dthread *t, struct job *j, struct slot *s, uint32_t rank, int err)
{
	(void)t;
	(void)rank;
	(void)err;
	s->sends_left--;
	return s->sends_left == 0 && s->send_next == j->nranks;
}

static void fake_fini(struct dthread *t, struct job *j)
{
	(void)t;
	(void)j;
}

static const struct result_ops test_result_ops = {
	.name = "test",
	.init = fake_init,
	.send_result = fake_send,
	.on_send_complete = fake_done,
	.fini = fake_fini,
};

/* ---- a job without a daemon ---- */

static struct dthread thr;

static struct job *job_new(uint32_t nranks, uint32_t window, uint32_t dtype_mask, uint16_t flags)
{
	bool has16 = dtype_mask & ((1u << SC_F16) | (1u << SC_BF16));
	struct job *j = calloc(1, sizeof(*j) + nranks * sizeof(struct job_rank));

	assert_non_null(j);
	assert_true(nranks <= MAX_RANKS && window <= MAX_WINDOW);
	j->nranks = nranks;
	j->window = window;
	j->lanes = 1; /* one lane: every slot (job.h) */
	j->lane_window = window;
	j->chunk = CHUNK;
	j->payload = CHUNK;
	j->dtype_mask = dtype_mask;
	j->flags = flags;
	j->has16 = has16;
	j->acc_bytes = has16 ? 2 * (size_t)CHUNK : CHUNK;
	j->region_bytes = job_region_bytes(window, CHUNK, nranks, has16, false);
	j->region = calloc(1, j->region_bytes);
	j->slots = calloc(window, sizeof(*j->slots));
	j->rslots = calloc((size_t)window * nranks, sizeof(*j->rslots));
	assert_non_null(j->region);
	assert_non_null(j->slots);
	assert_non_null(j->rslots);
	job_slots_init(j);
	for (uint32_t s = 0; s < window; s++)
		for (uint32_t r = 0; r < nranks; r++)
			job_rslot(j, s, r)->state = RS_POSTED;
	memset(&rec, 0, sizeof(rec));
	memset(&thr, 0, sizeof(thr));
	thr.result = &test_result_ops;
	thr.slot_ops = &test_slot_ops;
	return j;
}

static void job_delete(struct job *j)
{
	free(j->region);
	free(j->slots);
	free(j->rslots);
	free(j);
}

/* The fabric's part: rank r's message lands in its buffer of slot s. */
static void deliver(struct job *j, uint32_t s, uint32_t r, enum sc_dtype dt, enum sc_op op,
		    uint32_t seq, const void *data, uint32_t len)
{
	struct rslot *rs = job_rslot(j, s, r);

	assert_int_equal(rs->state, RS_POSTED);
	memcpy(rs->buf, data, len);
	rs->imm = wire_imm_make(dt, op, seq);
	rs->len = len;
	rs->state = RS_IDLE;
	slot_contribute(&thr, j, s, r);
}

/* The result backend's part: every send of slot s completes. */
static void sends_complete(struct job *j, uint32_t s)
{
	struct slot *sl = &j->slots[s];

	assert_int_equal(sl->state, SLOT_SENDING);
	for (uint32_t r = 0; r < j->nranks; r++)
		if (thr.result->on_send_complete(&thr, j, sl, r, 0))
			slot_free(&thr, j, sl);
}

static uint32_t rnd_state = 12345;

static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

static float rnd_float(void)
{
	return (float)(rnd() % 2000001) / 1000.0f - 1000.0f;
}

/* ---- tests ---- */

/* f32 sum, contributions in every order of 4 ranks, through a window of
 * 2 slots that are reused 12 times each. Random values: the sum depends on
 * the order, so the reference adds in arrival order, and the result must
 * equal it bit for bit. The first contribution is adopted (its buffer
 * becomes the accumulator, no copy) and each rank's buffer is reposted as
 * soon as its contribution is reduced, the last one's after the result is
 * sent (the sends are the chunk's latency). */
static void test_f32_sum_any_order(void **state)
{
	enum { N = 4, W = 2, E = CHUNK / 4 };
	struct job *j = job_new(N, W, 1u << SC_F32, 0);
	static float in[N][E], ref[E];
	uint32_t perm[N] = { 0, 1, 2, 3 };
	unsigned iter = 0;

	(void)state;
	/* 24 orders (Heap's algorithm would do too; a simple next-permutation) */
	for (;;) {
		uint32_t s = iter % W, seq = iter;
		struct slot *sl = &j->slots[s];
		for (uint32_t r = 0; r < N; r++)
			for (uint32_t i = 0; i < E; i++)
				in[r][i] = rnd_float();
		memcpy(ref, in[perm[0]], sizeof(ref));
		for (uint32_t k = 1; k < N; k++)
			for (uint32_t i = 0; i < E; i++)
				ref[i] += in[perm[k]][i];
		assert_int_equal(sl->seq, seq);
		assert_int_equal(sl->state, SLOT_FREE);
		unsigned sends = rec.sends;
		for (uint32_t k = 0; k < N; k++) {
			uint32_t r = perm[k];
			uint8_t *acc_before = sl->acc;
			unsigned posts = rec.posts[s][r];
			deliver(j, s, r, SC_F32, SC_OP_SUM, seq, in[r], sizeof(in[r]));
			if (k == 0) /* adopted: the rank now receives into the old accumulator */
				assert_ptr_equal(job_rslot(j, s, r)->buf, acc_before);
			assert_int_equal(rec.posts[s][r], posts + 1);
			if (k + 1 < N) {
				assert_int_equal(sl->state, SLOT_FILLING);
				assert_int_equal(atomic_load(&j->partial), 1);
			}
		}
		assert_int_equal(rec.fails, 0);
		assert_int_equal(rec.sends, sends + 1);
		for (uint32_t k = 0; k < N; k++)
			assert_int_equal(rec.posts_at_send[perm[k]], rec.posts[s][perm[k]] - (k + 1 == N));
		assert_int_equal(sl->state, SLOT_SENDING);
		assert_int_equal(atomic_load(&j->partial), 0);
		assert_int_equal(rec.result_len, sizeof(ref));
		assert_int_equal(rec.result_seq, seq);
		assert_memory_equal(rec.result, ref, sizeof(ref));
		assert_int_equal(sl->last_rank, perm[N - 1]);
		sends_complete(j, s);
		assert_int_equal(sl->state, SLOT_FREE);
		assert_int_equal(sl->seq, seq + W); /* reused for the chunk a window further */
		iter++;
		/* next permutation */
		int i = N - 2;
		while (i >= 0 && perm[i] > perm[i + 1])
			i--;
		if (i < 0)
			break;
		int k = N - 1;
		while (perm[k] < perm[i])
			k--;
		uint32_t tmp = perm[i];
		perm[i] = perm[k];
		perm[k] = tmp;
		for (int a = i + 1, b = N - 1; a < b; a++, b--) {
			tmp = perm[a];
			perm[a] = perm[b];
			perm[b] = tmp;
		}
	}
	assert_int_equal(iter, 24);
	assert_int_equal(atomic_load(&j->chunks), 24);
	assert_int_equal(atomic_load(&thr.stats.chunks), 24);
	job_delete(j);
}

/* Other types and ops, short chunks (the length is the message's, not the
 * chunk's), three ranks in the order 2, 0, 1. */
static void test_types_and_ops(void **state)
{
	enum { N = 3, E = 37 };
	static const uint32_t order[N] = { 2, 0, 1 };
	(void)state;

	{ /* i32 prod (wraps) */
		struct job *j = job_new(N, 1, 1u << SC_I32, 0);
		int32_t in[N][E];
		uint32_t ref[E];
		for (uint32_t r = 0; r < N; r++)
			for (uint32_t i = 0; i < E; i++)
				in[r][i] = (int32_t)rnd() - (1 << 22);
		for (uint32_t i = 0; i < E; i++)
			ref[i] = (uint32_t)in[2][i] * (uint32_t)in[0][i] * (uint32_t)in[1][i];
		for (uint32_t k = 0; k < N; k++)
			deliver(j, 0, order[k], SC_I32, SC_OP_PROD, 0, in[order[k]], sizeof(in[0]));
		assert_int_equal(rec.sends, 1);
		assert_int_equal(rec.result_len, sizeof(ref));
		assert_memory_equal(rec.result, ref, sizeof(ref));
		job_delete(j);
	}
	{ /* u8 max */
		struct job *j = job_new(N, 1, 1u << SC_U8, 0);
		uint8_t in[N][E], ref[E];
		for (uint32_t r = 0; r < N; r++)
			for (uint32_t i = 0; i < E; i++)
				in[r][i] = (uint8_t)rnd();
		for (uint32_t i = 0; i < E; i++) {
			ref[i] = in[0][i];
			for (uint32_t r = 1; r < N; r++)
				ref[i] = in[r][i] > ref[i] ? in[r][i] : ref[i];
		}
		for (uint32_t k = 0; k < N; k++)
			deliver(j, 0, order[k], SC_U8, SC_OP_MAX, 0, in[order[k]], sizeof(in[0]));
		assert_int_equal(rec.sends, 1);
		assert_memory_equal(rec.result, ref, sizeof(ref));
		job_delete(j);
	}
	{ /* f64 min */
		struct job *j = job_new(N, 1, 1u << SC_F64, 0);
		double in[N][E], ref[E];
		for (uint32_t r = 0; r < N; r++)
			for (uint32_t i = 0; i < E; i++)
				in[r][i] = (double)rnd_float() * 1.5;
		for (uint32_t i = 0; i < E; i++) {
			ref[i] = in[0][i];
			for (uint32_t r = 1; r < N; r++)
				ref[i] = in[r][i] < ref[i] ? in[r][i] : ref[i];
		}
		for (uint32_t k = 0; k < N; k++)
			deliver(j, 0, order[k], SC_F64, SC_OP_MIN, 0, in[order[k]], sizeof(in[0]));
		assert_int_equal(rec.sends, 1);
		assert_memory_equal(rec.result, ref, sizeof(ref));
		job_delete(j);
	}
}

/* Deterministic mode: contributions are held (not reduced, not reposted)
 * until the last one, then reduced in rank order, so two different arrival
 * orders give the same bits: those of ((r0 + r1) + r2) + r3. */
static void test_deterministic_holds(void **state)
{
	enum { N = 4, E = CHUNK / 4 };
	static const uint32_t orders[2][N] = { { 3, 1, 0, 2 }, { 2, 3, 1, 0 } };
	static float in[N][E], ref[E];
	uint8_t first_result[CHUNK];

	(void)state;
	for (uint32_t r = 0; r < N; r++)
		for (uint32_t i = 0; i < E; i++)
			in[r][i] = rnd_float() * 1e-3f + (float)(r * 1000);
	for (uint32_t i = 0; i < E; i++)
		ref[i] = ((in[0][i] + in[1][i]) + in[2][i]) + in[3][i];
	for (int o = 0; o < 2; o++) {
		struct job *j = job_new(N, 1, 1u << SC_F32, WIRE_JOIN_F_DETERMINISTIC);
		for (uint32_t k = 0; k < N; k++) {
			uint32_t r = orders[o][k];
			deliver(j, 0, r, SC_F32, SC_OP_SUM, 0, in[r], sizeof(in[r]));
			if (k + 1 < N) {
				struct rslot *rs = job_rslot(j, 0, r);
				assert_int_equal(rs->state, RS_HELD);
				assert_int_equal(rec.posts[0][r], 0);
				/* held as it arrived: the copy is intact */
				assert_memory_equal(rs->buf, in[r], sizeof(in[r]));
				assert_int_equal(rec.sends, 0);
			}
		}
		for (uint32_t r = 0; r < N; r++) {
			assert_int_equal(rec.posts[0][r], 1);
			assert_int_equal(rec.posts_at_send[r], 0); /* posted after the send */
		}
		assert_int_equal(rec.sends, 1);
		assert_int_equal(rec.fails, 0);
		assert_memory_equal(rec.result, ref, sizeof(ref));
		if (o == 0)
			memcpy(first_result, rec.result, sizeof(ref));
		else
			assert_memory_equal(rec.result, first_result, sizeof(ref));
		job_delete(j);
	}
}

/* f16 and bf16 are accumulated in f32 and rounded once: the result equals
 * the f32 sum rounded, bit for bit (in arrival order; deterministic: in rank
 * order). A full chunk uses the slot's second accumulator unit; a short one
 * does not. Each job first passes an f32 chunk through the slot, so the
 * 16-bit sum starts in an accumulator that rotated into a rank's buffer
 * slot: it must stay within its chunk-sized unit (a held neighbour would
 * be overwritten). 16-bit contributions are widened, never adopted: the
 * rank's buffer stays. */
static void test_16bit_accumulate(void **state)
{
	enum { N = 3, EF = 64 };
	static const uint32_t order[N] = { 1, 2, 0 };
	static const enum sc_dtype types[2] = { SC_F16, SC_BF16 };
	static const uint32_t lens[2] = { CHUNK, 2 * 301 };
	static uint16_t in[N][CHUNK / 2], ref[CHUNK / 2];
	static float acc[CHUNK / 2], f32[EF];

	(void)state;
	for (int det = 0; det < 2; det++)
		for (int ti = 0; ti < 2; ti++)
			for (int li = 0; li < 2; li++) {
				enum sc_dtype dt = types[ti];
				uint32_t n = lens[li] / 2;
				struct job *j = job_new(N, 1, (1u << dt) | (1u << SC_F32),
							det ? WIRE_JOIN_F_DETERMINISTIC : 0);
				for (uint32_t i = 0; i < EF; i++)
					f32[i] = (float)i;
				for (uint32_t k = 0; k < N; k++)
					deliver(j, 0, order[k], SC_F32, SC_OP_SUM, 0, f32, sizeof(f32));
				assert_int_equal(rec.sends, 1);
				sends_complete(j, 0);
				assert_ptr_not_equal(j->slots[0].acc, job_acc0(j, 0)); /* rotated */

				for (uint32_t r = 0; r < N; r++)
					for (uint32_t i = 0; i < n; i++) {
						float v = rnd_float() / 7.0f;
						in[r][i] = dt == SC_F16 ? sc_f32_to_f16(v) : sc_f32_to_bf16(v);
					}
				for (uint32_t i = 0; i < n; i++) {
					for (uint32_t k = 0; k < N; k++) {
						uint16_t h = in[det ? k : order[k]][i];
						float v = dt == SC_F16 ? sc_f16_to_f32(h) : sc_bf16_to_f32(h);
						acc[i] = k ? acc[i] + v : v;
					}
					ref[i] = dt == SC_F16 ? sc_f32_to_f16(acc[i]) : sc_f32_to_bf16(acc[i]);
				}
				for (uint32_t k = 0; k < N; k++) {
					uint32_t r = order[k];
					uint8_t *buf = job_rslot(j, 0, r)->buf;
					deliver(j, 0, r, dt, SC_OP_SUM, 1, in[r], lens[li]);
					assert_ptr_equal(job_rslot(j, 0, r)->buf, buf);
				}
				assert_int_equal(rec.fails, 0);
				assert_int_equal(rec.sends, 2);
				assert_int_equal(rec.result_len, lens[li]);
				assert_int_equal(wire_imm_dtype(rec.result_imm), dt);
				assert_memory_equal(rec.result, ref, lens[li]);
				job_delete(j);
			}
}

/* A contribution that does not fit fails the job with WIRE_E_DATA and a
 * sentence that names what was wrong; no result is ever sent. */
static void test_mismatch_fails(void **state)
{
	static float a[64], b[64];
	struct {
		const char *what;
		enum sc_dtype dt;
		enum sc_op op;
		uint32_t seq, len;
		uint32_t rank; /* of the second delivery */
	} cases[] = {
		{ "an earlier rank", SC_F32, SC_OP_MAX, 0, sizeof(a), 1 },   /* other op */
		{ "an earlier rank", SC_I32, SC_OP_SUM, 0, sizeof(a), 1 },   /* other type */
		{ "an earlier rank", SC_F32, SC_OP_SUM, 0, sizeof(a) / 2, 1 }, /* other length */
		{ "expected seq", SC_F32, SC_OP_SUM, 4, sizeof(a), 1 },      /* wrong seq */
		{ "twice", SC_F32, SC_OP_SUM, 0, sizeof(a), 0 },             /* same rank again */
		{ "not in the job's types", SC_U64, SC_OP_SUM, 0, sizeof(a), 1 },
		{ "not a positive multiple", SC_F32, SC_OP_SUM, 0, 6, 1 },
		{ "not a positive multiple", SC_F32, SC_OP_SUM, 0, CHUNK + 4, 1 },
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct job *j = job_new(3, 2, (1u << SC_F32) | (1u << SC_I32), 0);
		deliver(j, 0, 0, SC_F32, SC_OP_SUM, 0, a, sizeof(a));
		assert_int_equal(rec.fails, 0);
		if (cases[c].rank == 0) /* the fabric would post it again */
			job_rslot(j, 0, 0)->state = RS_POSTED;
		struct rslot *rs = job_rslot(j, 0, cases[c].rank);
		memcpy(rs->buf, b, sizeof(b));
		rs->imm = wire_imm_make(cases[c].dt, cases[c].op, cases[c].seq);
		rs->len = cases[c].len;
		rs->state = RS_IDLE;
		slot_contribute(&thr, j, 0, cases[c].rank);
		assert_int_equal(rec.fails, 1);
		assert_int_equal(rec.code, WIRE_E_DATA);
		if (!strstr(rec.text, cases[c].what))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", c, rec.text, cases[c].what);
		assert_true(j->dead);
		assert_int_equal(rec.sends, 0);
		assert_int_equal(j->slots[0].ncontrib, 1);
		job_delete(j);
	}
}

/* Window 1: chunk seq 1 arriving while the slot still sends seq 0 is kept
 * pending in the rank's buffer (not reposted), and taken when the slot
 * frees; seq 2 at that point is a protocol error. */
static void test_pending_then_reuse(void **state)
{
	enum { N = 2, E = 256 };
	static float in[3][N][E], ref[E];

	(void)state;
	for (int q = 0; q < 3; q++)
		for (uint32_t r = 0; r < N; r++)
			for (uint32_t i = 0; i < E; i++)
				in[q][r][i] = (float)(int)(rnd() % 1000);

	struct job *j = job_new(N, 1, 1u << SC_F32, 0);
	struct slot *sl = &j->slots[0];
	deliver(j, 0, 0, SC_F32, SC_OP_SUM, 0, in[0][0], sizeof(in[0][0]));
	deliver(j, 0, 1, SC_F32, SC_OP_SUM, 0, in[0][1], sizeof(in[0][1]));
	assert_int_equal(sl->state, SLOT_SENDING);
	assert_int_equal(rec.sends, 1);
	/* rank 1 is ahead: its seq 1 arrives before seq 0's sends completed */
	unsigned posts1 = rec.posts[0][1];
	deliver(j, 0, 1, SC_F32, SC_OP_SUM, 1, in[1][1], sizeof(in[1][1]));
	assert_int_equal(job_rslot(j, 0, 1)->state, RS_PENDING);
	assert_int_equal(sl->npending, 1);
	assert_int_equal(rec.posts[0][1], posts1);
	assert_int_equal(rec.fails, 0);
	/* the sends complete: the slot takes seq 1 and rank 1's pending chunk */
	sends_complete(j, 0);
	assert_int_equal(sl->seq, 1);
	assert_int_equal(sl->state, SLOT_FILLING);
	assert_int_equal(sl->ncontrib, 1);
	assert_int_equal(sl->npending, 0);
	assert_int_equal(rec.posts[0][1], posts1 + 1);
	deliver(j, 0, 0, SC_F32, SC_OP_SUM, 1, in[1][0], sizeof(in[1][0]));
	assert_int_equal(rec.sends, 2);
	assert_int_equal(rec.result_seq, 1);
	for (uint32_t i = 0; i < E; i++)
		ref[i] = in[1][1][i] + in[1][0][i];
	assert_memory_equal(rec.result, ref, sizeof(ref));
	/* while seq 1 sends, seq 2 is fine (pending) but seq 3 is not */
	deliver(j, 0, 0, SC_F32, SC_OP_SUM, 3, in[2][0], sizeof(in[2][0]));
	assert_int_equal(rec.fails, 1);
	assert_int_equal(rec.code, WIRE_E_DATA);
	assert_non_null(strstr(rec.text, "which still sends seq 1"));
	job_delete(j);
}

/* Modes (wire.h): a reduce-scatter chunk (rank 2 owns it: ALL, the others
 * GIVE) sums every contribution and only rank 2 wants the result; an
 * allgather chunk (rank 1 the source, GIVE; the others TAKE, empty) is rank
 * 1's bytes, the empty messages in any position, deterministic or not. */
static void test_modes(void **state)
{
	enum { N = 4, E = 128 };
	static float in[N][E], ref[E];
	static uint8_t src[200];

	(void)state;
	for (uint32_t r = 0; r < N; r++)
		for (uint32_t i = 0; i < E; i++)
			in[r][i] = (float)(int)(rnd() % 1000);
	for (uint16_t flags = 0; flags <= WIRE_JOIN_F_DETERMINISTIC; flags++) {
		struct job *j = job_new(N, 2, (1u << SC_F32) | (1u << SC_U8), flags);
		for (uint32_t i = 0; i < E; i++)
			ref[i] = in[3][i] + in[0][i] + in[2][i] + in[1][i];
		static const uint32_t order[N] = { 3, 0, 2, 1 };
		for (uint32_t k = 0; k < N; k++) {
			uint32_t r = order[k];
			struct rslot *rs = job_rslot(j, 0, r);
			memcpy(rs->buf, in[r], sizeof(in[r]));
			rs->imm = wire_imm_with_mode(wire_imm_make(SC_F32, SC_OP_SUM, 0),
						     r == 2 ? WIRE_MODE_ALL : WIRE_MODE_GIVE);
			rs->len = sizeof(in[r]);
			rs->state = RS_IDLE;
			slot_contribute(&thr, j, 0, r);
		}
		assert_int_equal(rec.fails, 0);
		assert_int_equal(rec.sends, 1);
		assert_int_equal(rec.result_imm, wire_imm_make(SC_F32, SC_OP_SUM, 0));
		if (flags)
			for (uint32_t i = 0; i < E; i++) /* rank order */
				ref[i] = in[0][i] + in[1][i] + in[2][i] + in[3][i];
		assert_memory_equal(rec.result, ref, sizeof(ref));
		for (uint32_t r = 0; r < N; r++)
			assert_int_equal(job_rslot(j, 0, r)->wants, r == 2);

		/* allgather in slot 1: the source arrives second */
		for (size_t i = 0; i < sizeof(src); i++)
			src[i] = (uint8_t)rnd();
		static const uint32_t order2[N] = { 0, 1, 3, 2 };
		for (uint32_t k = 0; k < N; k++) {
			uint32_t r = order2[k];
			struct rslot *rs = job_rslot(j, 1, r);
			if (r == 1)
				memcpy(rs->buf, src, sizeof(src));
			rs->imm = wire_imm_with_mode(wire_imm_make(SC_U8, SC_OP_SUM, 1),
						     r == 1 ? WIRE_MODE_GIVE : WIRE_MODE_TAKE);
			rs->len = r == 1 ? sizeof(src) : 0;
			rs->state = RS_IDLE;
			slot_contribute(&thr, j, 1, r);
		}
		assert_int_equal(rec.fails, 0);
		assert_int_equal(rec.sends, 2);
		assert_int_equal(rec.result_len, sizeof(src));
		assert_memory_equal(rec.result, src, sizeof(src));
		for (uint32_t r = 0; r < N; r++)
			assert_int_equal(job_rslot(j, 1, r)->wants, r != 1);
		job_delete(j);
	}
}

/* What a mode may not do: TAKE with data, a mode that does not exist, a
 * chunk nobody contributes to. Each fails the job naming it; no result. */
static void test_mode_errors(void **state)
{
	static float a[16];
	struct {
		const char *what;
		unsigned mode[2];
		uint32_t len[2];
	} cases[] = {
		{ "must be empty", { WIRE_MODE_ALL, WIRE_MODE_TAKE }, { sizeof(a), sizeof(a) } },
		{ "does not exist", { WIRE_MODE_ALL, 3 }, { sizeof(a), sizeof(a) } },
		{ "none contributed", { WIRE_MODE_TAKE, WIRE_MODE_TAKE }, { 0, 0 } },
		{ "not a positive multiple", { WIRE_MODE_TAKE, WIRE_MODE_GIVE }, { 0, 0 } },
		{ "an earlier rank", { WIRE_MODE_GIVE, WIRE_MODE_ALL }, { sizeof(a), sizeof(a) / 2 } },
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct job *j = job_new(2, 2, 1u << SC_F32, 0);
		for (uint32_t r = 0; r < 2 && !rec.fails; r++) {
			struct rslot *rs = job_rslot(j, 0, r);
			memcpy(rs->buf, a, sizeof(a));
			rs->imm = wire_imm_with_mode(wire_imm_make(SC_F32, SC_OP_SUM, 0), cases[c].mode[r]);
			rs->len = cases[c].len[r];
			rs->state = RS_IDLE;
			slot_contribute(&thr, j, 0, r);
		}
		assert_int_equal(rec.fails, 1);
		assert_int_equal(rec.code, WIRE_E_DATA);
		if (!strstr(rec.text, cases[c].what))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", c, rec.text, cases[c].what);
		assert_int_equal(rec.sends, 0);
		job_delete(j);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f32_sum_any_order),
		cmocka_unit_test(test_types_and_ops),
		cmocka_unit_test(test_deterministic_holds),
		cmocka_unit_test(test_16bit_accumulate),
		cmocka_unit_test(test_mismatch_fails),
		cmocka_unit_test(test_pending_then_reuse),
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_mode_errors),
	};

	if (sc_reduce_init())
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
