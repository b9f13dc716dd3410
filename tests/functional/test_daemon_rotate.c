/* Buffer rotation in sumcastd: a slot adopts the buffer of its first
 * contribution as the accumulator (types accumulated as is) and the rank's
 * next receive goes into the old accumulator, so receive buffers and
 * accumulators move around a slot's units from chunk to chunk. Many chunks
 * go through few slots (window 1 and 2), the type, op and length change
 * from chunk to chunk (all ten types; f16/bf16 at full length use the
 * slot's second accumulator unit, short ones do not), and values depend on
 * the chunk, so a result read from a stale or wrong buffer shows. Each
 * rank refills and resends a slot as soon as its own result is in, so
 * chunks c + window also arrive while slot c still sends (pending). Runs
 * normal and deterministic mode, jobs with and without 16-bit types. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_daemon_harness.h"

#define MAXR 4
#define MAXW 2
#define CHUNK (64u << 10)

static struct sd d;

static const enum sc_dtype all_types[] = { SC_F32, SC_F16, SC_BF16, SC_F64, SC_I32,
					   SC_U32, SC_I64, SC_U64,  SC_I8,  SC_U8 };
static const enum sc_dtype no16_types[] = { SC_F32, SC_I32, SC_F64, SC_U8 };

static struct {
	uint32_t window, mask;
	bool det;
	const enum sc_dtype *types;
	size_t ntypes;
} cfg;

static void tweak(struct wire_join *j)
{
	j->window = cfg.window;
	j->dtype_mask = cfg.mask;
	if (cfg.det)
		j->flags |= WIRE_JOIN_F_DETERMINISTIC;
}

/* Chunk c: type, op, length (bytes). Lengths alternate full and short. */
static enum sc_dtype ctype(uint32_t c)
{
	return cfg.types[(c * 7 + c / cfg.ntypes) % cfg.ntypes];
}
static enum sc_op cop(uint32_t c)
{
	return (enum sc_op)((c / 3) % 4 == 1 ? SC_OP_MAX : (c / 3) % 4 == 3 ? SC_OP_MIN : SC_OP_SUM);
}
static size_t clen(uint32_t c)
{
	size_t esz = sc_dtype_size(ctype(c));
	size_t n = c % 3 == 2 ? 1000 + c : CHUNK / esz; /* short ones stay below chunk / 4 */
	return n * esz;
}

/* Small integers, exact in every type (sums of 4 ranks below 127). */
static int val(uint32_t r, uint32_t c, size_t i)
{
	return (int)((r + 1) * ((i + 5 * c + r) % 11));
}


static void fill_send(struct trank *rk, uint32_t r, uint32_t c)
{
	uint32_t s = c % cfg.window;
	enum sc_dtype t = ctype(c);
	size_t len = clen(c), n = len / sc_dtype_size(t);
	uint8_t *sb = rk->buf + (size_t)s * CHUNK;
	for (size_t i = 0; i < n; i++)
		th_put(t, sb, i, val(r, c, i));
	/* Garbage past the end: a wrong length would show. */
	memset(rk->buf + rk->cap / 2 + (size_t)s * CHUNK, 0xa5, CHUNK);
}

/* Runs nchunks; returns the number of wrong elements, -1 if it did not complete. */
static long run(struct trank *rk, uint32_t n, uint32_t nchunks)
{
	struct top sops[MAXR][MAXW], rops[MAXR][MAXW];
	uint32_t next[MAXR] = { 0 }, got[MAXR] = { 0 };
	uint64_t deadline = sc_now_ms() + 60000;
	struct trank *all[MAXR];
	long wrong = 0;

	for (uint32_t r = 0; r < n; r++)
		all[r] = &rk[r];
	for (uint32_t r = 0; r < n; r++)
		for (uint32_t c = 0; c < cfg.window && c < nchunks; c++) {
			fill_send(&rk[r], r, c);
			if (trank_post_result(&rk[r], c, (size_t)c * CHUNK, CHUNK, &rops[r][c]) ||
			    trank_send_chunk(&rk[r], c, c, ctype(c), cop(c), (size_t)c * CHUNK, clen(c),
					     &sops[r][c]))
				return -1;
			next[r] = c + 1;
		}
	while (sc_now_ms() < deadline) {
		bool all_done = true;
		tranks_poll(all, n, 0);
		/* Ranks in a varying order, so different ranks come first. */
		for (uint32_t k = 0; k < n; k++) {
			uint32_t r = (k + got[0] * 3) % n;
			if (got[r] < nchunks)
				all_done = false;
			if (got[r] >= nchunks)
				continue;
			uint32_t c = got[r], s = c % cfg.window;
			struct top *ro = &rops[r][s];
			if (!ro->done || !sops[r][s].done)
				continue;
			enum sc_dtype t = ctype(c);
			enum sc_op o = cop(c);
			size_t len = clen(c), ne = len / sc_dtype_size(t);
			if (ro->err || ro->len != len || wire_imm_seq(ro->data) != c ||
			    wire_imm_dtype(ro->data) != t || wire_imm_op(ro->data) != o) {
				fprintf(stderr, "rank %u chunk %u: err %d len %zu (want %zu) seq %u\n", r, c,
					ro->err, ro->len, len, wire_imm_seq(ro->data));
				return -1;
			}
			const uint8_t *rb = rk[r].buf + rk[r].cap / 2 + (size_t)s * CHUNK;
			long bad = 0;
			for (size_t i = 0; i < ne; i++) {
				int want = val(0, c, i);
				for (uint32_t q = 1; q < n; q++) {
					int v = val(q, c, i);
					want = o == SC_OP_SUM ? want + v
					       : o == SC_OP_MAX ? (v > want ? v : want)
								: (v < want ? v : want);
				}
				bad += th_get(t, rb, i) != (double)want;
			}
			if (bad)
				fprintf(stderr, "rank %u chunk %u (%s %s, %zu bytes): %ld wrong\n", r, c,
					sc_dtype_name(t), sc_op_name(o), len, bad);
			wrong += bad;
			got[r]++;
			uint32_t nc = next[r];
			if (nc < nchunks) {
				fill_send(&rk[r], r, nc);
				if (trank_post_result(&rk[r], s, (size_t)s * CHUNK, CHUNK, &rops[r][s]) ||
				    trank_send_chunk(&rk[r], s, nc & WIRE_SEQ_MASK, ctype(nc), cop(nc),
						     (size_t)s * CHUNK, clen(nc), &sops[r][s]))
					return -1;
				next[r]++;
			}
		}
		if (all_done)
			return wrong;
	}
	fprintf(stderr, "timed out: rank 0 has %u of %u results\n", got[0], nchunks);
	return -1;
}

static void one_job(uint64_t id, uint32_t n, uint32_t window, bool det, bool with16,
		    uint32_t nchunks)
{
	struct trank rk[MAXR];
	struct wire_msg m;
	int ok = 1;

	cfg.window = window;
	cfg.det = det;
	if (with16) {
		cfg.types = all_types;
		cfg.ntypes = sizeof(all_types) / sizeof(all_types[0]);
	} else {
		cfg.types = no16_types;
		cfg.ntypes = sizeof(no16_types) / sizeof(no16_types[0]);
	}
	cfg.mask = 0;
	for (size_t i = 0; i < cfg.ntypes; i++)
		cfg.mask |= 1u << cfg.types[i];
	for (uint32_t r = 0; r < n; r++) {
		ok &= trank_open(&rk[r], 2 * MAXW * CHUNK) == 0;
		ok &= ok && trank_join(&rk[r], &d, id, r, n, tweak) == 0;
	}
	CHECK(ok, "job 0x%llx: open/join failed", (unsigned long long)id);
	if (!ok)
		return;
	for (uint32_t r = 0; r < n; r++)
		CHECK(trank_ready(&rk[r], 5000) == 0, "rank %u: no READY", r);
	long wrong = run(rk, n, nchunks);
	CHECK(wrong == 0, "job 0x%llx: %u ranks, window %u%s%s, %u chunks: %ld wrong elements",
	      (unsigned long long)id, n, window, det ? ", deterministic" : "",
	      with16 ? ", all types" : ", no 16-bit types", nchunks, wrong);
	printf("  job 0x%llx: %u ranks, window %u%s, %s, %u chunks: %s\n", (unsigned long long)id, n,
	       window, det ? ", deterministic" : "", with16 ? "all 10 types" : "f32/i32/f64/u8",
	       nchunks, wrong == 0 ? "results correct" : "WRONG");
	for (uint32_t r = 0; r < n; r++) {
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = rk[r].handle;
		CHECK(ctl_send(rk[r].fd, &l) == 0, "LEAVE rank %u", r);
		CHECK(ctl_recv(rk[r].fd, &m, 2000) == -EPIPE, "rank %u: no clean close after LEAVE", r);
	}
	for (uint32_t r = 0; r < n; r++)
		trank_close(&rk[r]);
}

int main(void)
{
	if (sd_start(&d, "[job]\nmemory-budget = 256M\n"))
		th_skip("sumcastd did not start (see above)");
	one_job(0x201, 3, 2, false, true, 90);
	one_job(0x202, 4, 1, false, true, 50);
	one_job(0x203, 3, 2, true, true, 60);
	one_job(0x204, 2, 1, false, false, 40);
	one_job(0x205, 4, 2, true, false, 40);
	double chunks = sd_metric(&d, "sumcast_chunks_reduced_total");
	CHECK(chunks == 90 + 50 + 60 + 40 + 40, "chunks reduced %g", chunks);
	/* A job's memory returns once its last operations completed. */
	sd_wait_idle(&d, "after the jobs");
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	return th_summary("test_daemon_rotate");
}
