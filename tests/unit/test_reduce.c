/* Reduce kernels: every ISA variant available on this CPU against the scalar
 * reference (every type and op, lengths 0..300 and a stride up to 4097,
 * misaligned pointers, guard bytes), hand-computed rounding cases, NaN and
 * signed-zero rules of min/max, integer wrapping, in-place narrow,
 * SUMCAST_ISA forcing and the load/acc/store wrappers. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reduce.h"

#define POOL_N (4097 + 160)
#define GUARD 64
#define BUF_BYTES (POOL_N * 8 + 2 * GUARD + 16)
#define GUARD_BYTE 0xA5

/* Kernel kinds and data generators. */
enum kind { K_RED, K_ACC, K_WIDEN, K_NARROW };
enum gen { G_ACC_F16 = SC_DTYPE_COUNT, G_ACC_BF16, G_COUNT };

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

static uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static const uint32_t f32_special[] = {
	0x7fc00000, 0xffc00000, 0x7f800001, 0x7f800000, 0xff800000, 0x00000001, 0x80000001,
	0x007fffff, 0x00000000, 0x80000000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000,
};
static const uint64_t f64_special[] = {
	0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
	0x7ff0000000000000ull, 0xfff0000000000000ull, 0x0000000000000001ull,
	0x8000000000000001ull, 0x0000000000000000ull, 0x8000000000000000ull,
	0x7fefffffffffffffull, 0x3ff0000000000000ull,
};
static const uint16_t f16_special[] = { 0x7e00, 0xfe00, 0x7c01, 0x7c00, 0xfc00, 0x0001,
					0x8001, 0x03ff, 0x0000, 0x8000, 0x7bff, 0x3c00 };
static const uint16_t bf16_special[] = { 0x7fc0, 0xffc0, 0x7f81, 0x7f80, 0xff80, 0x0001,
					 0x8001, 0x0000, 0x8000, 0x7f7f, 0x3f80 };
static const uint64_t int_special[] = { 0, 1, ~0ull, 0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000,
					0xffffffff, 0x7fffffffffffffffull,
					0x8000000000000000ull };

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void gen_one(int g, void *p)
{
	uint64_t r = rng();
	int special = (r & 15) == 0;

	r >>= 4;
	switch (g) {
	case SC_F32: {
		uint32_t u = special ? f32_special[r % NELEM(f32_special)]
				     : (uint32_t)(r & 0x807fffff) | ((107u + (r >> 40) % 40) << 23);
		memcpy(p, &u, 4);
		break;
	}
	case SC_F64: {
		uint64_t u = special ? f64_special[r % NELEM(f64_special)]
				     : (r & 0x800fffffffffffffull) |
					       ((uint64_t)(1003 + (rng() % 40)) << 52);
		memcpy(p, &u, 8);
		break;
	}
	case SC_F16:
	case SC_BF16: {
		uint16_t u = special ? (g == SC_F16 ? f16_special[r % NELEM(f16_special)]
						    : bf16_special[r % NELEM(bf16_special)])
				     : (uint16_t)r;
		memcpy(p, &u, 2);
		break;
	}
	case G_ACC_F16:
	case G_ACC_BF16: {
		uint32_t u;

		if (special) {
			u = f32_special[r % NELEM(f32_special)];
		} else if (g == G_ACC_F16) {
			/* f16 subnormals .. overflow, a quarter of them on or
			 * next to a rounding tie. */
			u = (uint32_t)(r & 0x807fffff) | ((100u + (r >> 40) % 46) << 23);
			if ((r >> 50) % 4 == 0)
				u = (u & ~0x1fffu) | (0x0fffu + (uint32_t)((r >> 53) % 3));
		} else {
			u = (uint32_t)r;
			if ((r >> 50) % 4 == 0)
				u = (u & ~0xffffu) | (0x7fffu + (uint32_t)((r >> 53) % 3));
			if ((u & 0x7f800000) == 0x7f800000 && (r >> 56) % 4)
				u &= 0xbfffffff; /* fewer NaN/Inf */
		}
		memcpy(p, &u, 4);
		break;
	}
	default: {
		uint64_t u = special ? int_special[r % NELEM(int_special)] : rng();

		memcpy(p, &u, sc_dtype_size((enum sc_dtype)g));
		break;
	}
	}
}

static size_t gen_size(int g)
{
	return g >= SC_DTYPE_COUNT ? 4 : sc_dtype_size((enum sc_dtype)g);
}

static unsigned char *pool[G_COUNT][2];

static void pools_init(void)
{
	if (pool[0][0])
		return;
	for (int g = 0; g < G_COUNT; g++) {
		size_t sz = gen_size(g);

		for (int w = 0; w < 2; w++) {
			pool[g][w] = malloc(POOL_N * sz);
			assert_non_null(pool[g][w]);
			for (size_t i = 0; i < POOL_N; i++)
				gen_one(g, pool[g][w] + i * sz);
		}
		/* Some equal pairs (min/max ties, x-x). */
		for (size_t i = 0; i < POOL_N; i += 1 + rng() % 13)
			memcpy(pool[g][1] + i * sz, pool[g][0] + i * sz, sz);
	}
}

/* ---- comparison ---- */

static int is_nan_bits(int t, const unsigned char *p)
{
	switch (t) {
	case SC_F32: {
		uint32_t u;

		memcpy(&u, p, 4);
		return (u & 0x7fffffff) > 0x7f800000;
	}
	case SC_F64: {
		uint64_t u;

		memcpy(&u, p, 8);
		return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
	}
	case SC_F16: {
		uint16_t u;

		memcpy(&u, p, 2);
		return (u & 0x7fff) > 0x7c00;
	}
	case SC_BF16: {
		uint16_t u;

		memcpy(&u, p, 2);
		return (u & 0x7fff) > 0x7f80;
	}
	default:
		return 0;
	}
}

/* Bitwise equal, any NaN equals any NaN. Returns the first bad index or -1. */
static long cmp_elems(int t, const unsigned char *a, const unsigned char *b, size_t n)
{
	size_t sz = sc_dtype_size((enum sc_dtype)t);

	for (size_t i = 0; i < n; i++, a += sz, b += sz) {
		if (!memcmp(a, b, sz))
			continue;
		if (is_nan_bits(t, a) && is_nan_bits(t, b))
			continue;
		return (long)i;
	}
	return -1;
}

static void hex(char *out, const unsigned char *p, size_t sz)
{
	out[0] = 0;
	for (size_t i = sz; i-- > 0;)
		sprintf(out + strlen(out), "%02x", p[i]);
}

/* ---- one kernel run against the reference ---- */

struct kdesc {
	enum kind kind;
	int t;	 /* dtype for K_RED, 0/1 (f16/bf16) otherwise */
	int op;
	char name[40];
	size_t dsz, ssz;
	int dgen, sgen; /* pools */
	int dtype;	/* type of the output, for comparison */
};

static sc_reduce_fn kfn(const struct sc_reduce_ops *o, const struct kdesc *k)
{
	switch (k->kind) {
	case K_RED:
		return o->reduce[k->t][k->op];
	case K_ACC:
		return o->acc16[k->t][k->op];
	case K_WIDEN:
		return o->widen16[k->t];
	case K_NARROW:
		return o->narrow16[k->t];
	}
	return NULL;
}

static struct kdesc kernels[SC_DTYPE_COUNT * SC_OP_COUNT + 12];
static size_t nkernels;

static void kernels_init(void)
{
	struct kdesc *k;

	if (nkernels)
		return;
	for (int t = 0; t < SC_DTYPE_COUNT; t++)
		for (int op = 0; op < SC_OP_COUNT; op++) {
			k = &kernels[nkernels++];
			*k = (struct kdesc){ .kind = K_RED, .t = t, .op = op,
					     .dsz = sc_dtype_size((enum sc_dtype)t),
					     .ssz = sc_dtype_size((enum sc_dtype)t), .dgen = t,
					     .sgen = t, .dtype = t };
			snprintf(k->name, sizeof(k->name), "reduce %s %s",
				 sc_dtype_name((enum sc_dtype)t), sc_op_name((enum sc_op)op));
		}
	for (int h = 0; h < 2; h++) {
		int t16 = h ? SC_BF16 : SC_F16;

		for (int op = 0; op < SC_OP_COUNT; op++) {
			k = &kernels[nkernels++];
			*k = (struct kdesc){ .kind = K_ACC, .t = h, .op = op, .dsz = 4, .ssz = 2,
					     .dgen = G_ACC_F16 + h, .sgen = t16, .dtype = SC_F32 };
			snprintf(k->name, sizeof(k->name), "acc16 %s %s",
				 sc_dtype_name((enum sc_dtype)t16), sc_op_name((enum sc_op)op));
		}
		k = &kernels[nkernels++];
		*k = (struct kdesc){ .kind = K_WIDEN, .t = h, .dsz = 4, .ssz = 2,
				     .dgen = G_ACC_F16 + h, .sgen = t16, .dtype = SC_F32 };
		snprintf(k->name, sizeof(k->name), "widen16 %s", sc_dtype_name((enum sc_dtype)t16));
		k = &kernels[nkernels++];
		*k = (struct kdesc){ .kind = K_NARROW, .t = h, .dsz = 2, .ssz = 4, .dgen = t16,
				     .sgen = G_ACC_F16 + h, .dtype = t16 };
		snprintf(k->name, sizeof(k->name), "narrow16 %s", sc_dtype_name((enum sc_dtype)t16));
	}
}

static unsigned char buf_ref[BUF_BYTES], buf_vec[BUF_BYTES], buf_src[BUF_BYTES];

/* Runs kernel k of table o and the reference on n elements at byte offsets
 * doff/soff; returns 0 if equal and the guards are intact. */
static int check_one(const struct sc_reduce_ops *o, const struct kdesc *k, size_t n, size_t doff,
		     size_t soff, size_t start)
{
	const struct sc_reduce_ops *ref = sc_reduce_ops_get(SC_ISA_SCALAR);
	unsigned char *dr = buf_ref + GUARD + doff, *dv = buf_vec + GUARD + doff;
	unsigned char *s = buf_src + GUARD + soff;
	size_t dbytes = n * k->dsz;
	char a[40], b[40];
	long bad;

	memset(buf_ref, GUARD_BYTE, sizeof(buf_ref));
	memset(buf_vec, GUARD_BYTE, sizeof(buf_vec));
	memcpy(dr, pool[k->dgen][0] + start * k->dsz, dbytes);
	memcpy(dv, dr, dbytes);
	memcpy(s, pool[k->sgen][1] + start * k->ssz, n * k->ssz);

	kfn(ref, k)(dr, s, n);
	kfn(o, k)(dv, s, n);

	bad = cmp_elems(k->dtype, dr, dv, n);
	if (bad >= 0) {
		hex(a, dr + bad * k->dsz, k->dsz);
		hex(b, dv + bad * k->dsz, k->dsz);
		print_error("%s %s n=%zu doff=%zu soff=%zu: [%ld] ref %s got %s\n", o->name,
			    k->name, n, doff, soff, bad, a, b);
		return -1;
	}
	for (size_t i = 0; i < sizeof(buf_vec); i++) {
		if (dv <= buf_vec + i && buf_vec + i < dv + dbytes)
			continue;
		if (buf_vec[i] != GUARD_BYTE) {
			print_error("%s %s n=%zu doff=%zu: wrote outside dst at byte %ld\n",
				    o->name, k->name, n, doff, (long)(buf_vec + i - dv));
			return -1;
		}
	}
	return 0;
}

static int next_len(int n)
{
	if (n < 300 || n >= 4094)
		return n + 1;
	return n + 37 > 4095 ? 4095 : n + 37;
}

static void test_variants_vs_scalar(void **state)
{
	int tested = 0;

	(void)state;
	pools_init();
	kernels_init();
	for (int isa = SC_ISA_SCALAR + 1; isa < SC_ISA_COUNT; isa++) {
		const struct sc_reduce_ops *o = sc_reduce_ops_get((enum sc_isa)isa);

		if (!o)
			continue;
		tested++;
		for (size_t ki = 0; ki < nkernels; ki++) {
			const struct kdesc *k = &kernels[ki];

			for (int n = 0; n <= 4097; n = next_len(n)) {
				/* Vary alignment with the length: 0..7 bytes. */
				size_t doff = (size_t)n % 8, soff = ((size_t)n * 5 + 3) % 8;

				if (check_one(o, k, (size_t)n, doff, soff, (size_t)n % 61))
					fail_msg("%s %s differs from scalar", o->name, k->name);
			}
		}
	}
	print_message("[ INFO     ] compared %d vector variant(s) with scalar\n", tested);
}

static void test_misaligned(void **state)
{
	static const size_t lens[] = { 1, 33, 131, 1029 };

	(void)state;
	pools_init();
	kernels_init();
	for (int isa = SC_ISA_SCALAR + 1; isa < SC_ISA_COUNT; isa++) {
		const struct sc_reduce_ops *o = sc_reduce_ops_get((enum sc_isa)isa);

		if (!o)
			continue;
		for (size_t ki = 0; ki < nkernels; ki++)
			for (size_t li = 0; li < NELEM(lens); li++)
				for (size_t doff = 0; doff < 8; doff++)
					for (size_t soff = 0; soff < 8; soff++)
						if (check_one(o, &kernels[ki], lens[li], doff, soff,
							      li * 7))
							fail_msg("%s %s misaligned", o->name,
								 kernels[ki].name);
	}
}

/* ---- hand-computed rounding ---- */

struct conv_case {
	uint32_t f;
	uint16_t h;
};

static const struct conv_case f16_cases[] = {
	{ 0x3f800000, 0x3c00 }, /* 1 */
	{ 0x3f801000, 0x3c00 }, /* 1 + 2^-11: tie, to even */
	{ 0x3f803000, 0x3c02 }, /* 1 + 3*2^-11: tie, to even (up) */
	{ 0x3f801001, 0x3c01 }, /* just above the tie */
	{ 0x3f800fff, 0x3c00 }, /* just below */
	{ 0xbf803000, 0xbc02 },
	{ 0x477fe000, 0x7bff }, /* 65504, largest finite */
	{ 0x477fefff, 0x7bff },
	{ 0x477ff000, 0x7c00 }, /* 65520: tie, rounds to Inf */
	{ 0x501502f9, 0x7c00 }, /* 1e10: overflow */
	{ 0xd01502f9, 0xfc00 },
	{ 0x7f800000, 0x7c00 }, /* Inf */
	{ 0xff800000, 0xfc00 },
	{ 0x38800000, 0x0400 }, /* 2^-14, smallest normal */
	{ 0x387fe000, 0x0400 }, /* 1023.5 * 2^-24: tie, to even = 1024 */
	{ 0x387fc000, 0x03ff }, /* 1023 * 2^-24 */
	{ 0x33800000, 0x0001 }, /* 2^-24, smallest subnormal */
	{ 0x33000000, 0x0000 }, /* 2^-25: tie, to even = 0 */
	{ 0x33000001, 0x0001 },
	{ 0x33c00000, 0x0002 }, /* 1.5 * 2^-24: tie, to even = 2 */
	{ 0xb3c00000, 0x8002 },
	{ 0x80000000, 0x8000 }, /* -0 */
	{ 0x00000001, 0x0000 }, /* f32 subnormal */
	{ 0x80000001, 0x8000 },
	{ 0x7fc00000, 0x7e00 }, /* NaN (any NaN accepted) */
	{ 0x7f800001, 0x7e00 }, /* signalling NaN: stays NaN, not Inf */
	{ 0xffc00000, 0xfe00 },
};

static const struct conv_case bf16_cases[] = {
	{ 0x3f800000, 0x3f80 },
	{ 0x3f808000, 0x3f80 }, /* 1 + 2^-8: tie, to even */
	{ 0x3f818000, 0x3f82 }, /* 1 + 3*2^-8: tie, to even (up) */
	{ 0x3f808001, 0x3f81 },
	{ 0x3f807fff, 0x3f80 },
	{ 0xbf818000, 0xbf82 },
	{ 0x7f7fffff, 0x7f80 }, /* FLT_MAX rounds to Inf */
	{ 0x7f7f7fff, 0x7f7f },
	{ 0x7f7f8000, 0x7f80 }, /* tie at the top: to even = Inf */
	{ 0x7f800000, 0x7f80 },
	{ 0xff800000, 0xff80 },
	{ 0x00008000, 0x0000 }, /* subnormal tie, to even */
	{ 0x00018000, 0x0002 },
	{ 0x00000001, 0x0000 },
	{ 0x80000000, 0x8000 },
	{ 0x7fc00000, 0x7fc0 },
	{ 0x7f800001, 0x7fc0 }, /* signalling NaN: stays NaN, not Inf */
	{ 0xffffffff, 0xffc0 },
};

static void check_conv(const struct conv_case *c, size_t nc, int t16)
{
	enum { N = 200 };
	float acc[N];
	uint16_t out[N];

	/* Scalar helpers. */
	for (size_t i = 0; i < nc; i++) {
		uint16_t h = t16 == SC_F16 ? sc_f32_to_f16(u2f(c[i].f)) : sc_f32_to_bf16(u2f(c[i].f));

		if (h != c[i].h && !(is_nan_bits(t16, (void *)&h) &&
				     is_nan_bits(t16, (const void *)&c[i].h)))
			fail_msg("%s(0x%08x) = 0x%04x, want 0x%04x", sc_dtype_name(t16), c[i].f, h,
				 c[i].h);
	}
	/* Every table's narrow16, long enough to go through the vector loop. */
	for (int isa = 0; isa < SC_ISA_COUNT; isa++) {
		const struct sc_reduce_ops *o = sc_reduce_ops_get((enum sc_isa)isa);

		if (!o)
			continue;
		for (size_t i = 0; i < N; i++)
			acc[i] = u2f(c[i % nc].f);
		o->narrow16[t16 == SC_BF16](out, acc, N);
		for (size_t i = 0; i < N; i++) {
			const struct conv_case *e = &c[i % nc];

			if (out[i] != e->h && !(is_nan_bits(t16, (void *)&out[i]) &&
						is_nan_bits(t16, (const void *)&e->h)))
				fail_msg("%s narrow16 %s(0x%08x) = 0x%04x, want 0x%04x", o->name,
					 sc_dtype_name(t16), e->f, out[i], e->h);
		}
	}
}

static void test_rounding_hand(void **state)
{
	(void)state;
	check_conv(f16_cases, NELEM(f16_cases), SC_F16);
	check_conv(bf16_cases, NELEM(bf16_cases), SC_BF16);
	/* Widening is exact: f16 -> f32 -> f16 is the identity (NaN stays NaN). */
	for (uint32_t h = 0; h < 0x10000; h++) {
		uint16_t x = (uint16_t)h, y = sc_f32_to_f16(sc_f16_to_f32(x)),
			 z = sc_f32_to_bf16(sc_bf16_to_f32(x));

		if (is_nan_bits(SC_F16, (void *)&x))
			assert_true(is_nan_bits(SC_F16, (void *)&y));
		else
			assert_int_equal(x, y);
		if (is_nan_bits(SC_BF16, (void *)&x))
			assert_true(is_nan_bits(SC_BF16, (void *)&z));
		else
			assert_int_equal(x, z);
	}
	assert_true(sc_f16_to_f32(0x0001) == 0x1p-24f);
	assert_true(sc_f16_to_f32(0x7bff) == 65504.0f);
	assert_true(sc_f16_to_f32(0xc000) == -2.0f);
	assert_true(sc_bf16_to_f32(0x3f80) == 1.0f);
	/* f16 sum through f32: 1 + 2^-10 is exact. */
	{
		uint16_t a[64], b[64];

		for (int i = 0; i < 64; i++) {
			a[i] = 0x3c00;	/* 1 */
			b[i] = 0x1400; /* 2^-10 */
		}
		sc_reduce_ops_get(SC_ISA_SCALAR)->reduce[SC_F16][SC_OP_SUM](a, b, 64);
		assert_int_equal(a[63], 0x3c01); /* 1 + 2^-10 */
	}
}

/* ---- 16-bit reduce on every pair of special values ---- */

/* The vector f16/bf16 kernels skip the NaN fix-up (bf16 sum/prod) and add
 * with fma(a, 1, b): every (dst, src) pair of specials (NaN, sNaN, +-Inf,
 * +-0, subnormals, max finite, 1, ties) against the reference, all ops. */
static void test_16bit_special_pairs(void **state)
{
	static const uint16_t f16_extra[] = { 0x7bff, 0xfbff, 0x3c01, 0x1000, 0x0200, 0x8200 };
	static const uint16_t bf16_extra[] = { 0x7f7f, 0xff7f, 0x3f81, 0x3b80, 0x0040, 0x8040 };
	enum { MAXV = 24, N = MAXV * MAXV };
	static uint16_t vals[MAXV], d_ref[N], d_vec[N], src[N];

	(void)state;
	for (int h = 0; h < 2; h++) {
		int t = h ? SC_BF16 : SC_F16;
		size_t nv = 0, n;

		if (h) {
			memcpy(vals, bf16_special, sizeof(bf16_special));
			nv = NELEM(bf16_special);
			memcpy(vals + nv, bf16_extra, sizeof(bf16_extra));
			nv += NELEM(bf16_extra);
		} else {
			memcpy(vals, f16_special, sizeof(f16_special));
			nv = NELEM(f16_special);
			memcpy(vals + nv, f16_extra, sizeof(f16_extra));
			nv += NELEM(f16_extra);
		}
		n = nv * nv;
		for (int isa = SC_ISA_SCALAR + 1; isa < SC_ISA_COUNT; isa++) {
			const struct sc_reduce_ops *o = sc_reduce_ops_get((enum sc_isa)isa);

			if (!o)
				continue;
			for (int op = 0; op < SC_OP_COUNT; op++) {
				long bad;

				for (size_t i = 0; i < n; i++) {
					d_ref[i] = vals[i / nv];
					src[i] = vals[i % nv];
				}
				memcpy(d_vec, d_ref, n * 2);
				sc_reduce_ops_get(SC_ISA_SCALAR)->reduce[t][op](d_ref, src, n);
				o->reduce[t][op](d_vec, src, n);
				bad = cmp_elems(t, (void *)d_ref, (void *)d_vec, n);
				if (bad >= 0)
					fail_msg("%s reduce %s %s: 0x%04x op 0x%04x = 0x%04x, want 0x%04x",
						 o->name, sc_dtype_name((enum sc_dtype)t),
						 sc_op_name((enum sc_op)op), vals[bad / (long)nv],
						 src[bad], d_vec[bad], d_ref[bad]);
			}
		}
	}
}

/* ---- min/max NaN and signed zero ---- */

static void test_minmax_rules(void **state)
{
	/* (dst, src) -> min, max with a = dst, b = src. */
	static const float in[][4] = {
		/* a, b, min, max; NAN in the result means "any NaN" */
		{ NAN, 1.0f, NAN, NAN },  { 1.0f, NAN, NAN, NAN },  { NAN, NAN, NAN, NAN },
		{ -0.0f, 0.0f, 0.0f, 0.0f }, { 0.0f, -0.0f, -0.0f, -0.0f },
		{ 1.0f, 2.0f, 1.0f, 2.0f }, { 2.0f, 1.0f, 1.0f, 2.0f },
		{ -INFINITY, INFINITY, -INFINITY, INFINITY },
	};
	enum { N = 96 };

	(void)state;
	for (int isa = 0; isa < SC_ISA_COUNT; isa++) {
		const struct sc_reduce_ops *o = sc_reduce_ops_get((enum sc_isa)isa);

		if (!o)
			continue;
		for (int op = SC_OP_MIN; op <= SC_OP_MAX; op++) {
			float d32[N], s32[N];
			double d64[N], s64[N];
			uint16_t d16[2][N], s16[2][N];
			float acc[2][N];

			for (int i = 0; i < N; i++) {
				const float *c = in[i % NELEM(in)];

				d32[i] = c[0];
				s32[i] = c[1];
				d64[i] = c[0];
				s64[i] = c[1];
				d16[0][i] = sc_f32_to_f16(c[0]);
				s16[0][i] = sc_f32_to_f16(c[1]);
				d16[1][i] = sc_f32_to_bf16(c[0]);
				s16[1][i] = sc_f32_to_bf16(c[1]);
				acc[0][i] = acc[1][i] = c[0];
			}
			o->reduce[SC_F32][op](d32, s32, N);
			o->reduce[SC_F64][op](d64, s64, N);
			o->reduce[SC_F16][op](d16[0], s16[0], N);
			o->reduce[SC_BF16][op](d16[1], s16[1], N);
			o->acc16[0][op](acc[0], s16[0], N);
			o->acc16[1][op](acc[1], s16[1], N);
			for (int i = 0; i < N; i++) {
				float want = in[i % NELEM(in)][op == SC_OP_MIN ? 2 : 3];
				float got[6] = { d32[i],
						 (float)d64[i],
						 sc_f16_to_f32(d16[0][i]),
						 sc_bf16_to_f32(d16[1][i]),
						 acc[0][i],
						 acc[1][i] };

				for (int j = 0; j < 6; j++) {
					int ok = want != want ? got[j] != got[j]
							      : f2u(got[j]) == f2u(want);
					if (!ok)
						fail_msg("%s %s case %d variant %d: got %g (0x%08x) want %g",
							 o->name, sc_op_name((enum sc_op)op),
							 i % (int)NELEM(in), j, (double)got[j],
							 f2u(got[j]), (double)want);
				}
			}
		}
	}
}

/* ---- integer wrapping ---- */

static void test_int_wrap(void **state)
{
	enum { N = 150 };

	(void)state;
	for (int isa = 0; isa < SC_ISA_COUNT; isa++) {
		const struct sc_reduce_ops *o = sc_reduce_ops_get((enum sc_isa)isa);
		int32_t i32d[N], i32s[N];
		uint32_t u32d[N], u32s[N];
		int64_t i64d[N], i64s[N];
		uint64_t u64d[N], u64s[N];
		int8_t i8d[N], i8s[N];
		uint8_t u8d[N], u8s[N];

		if (!o)
			continue;
		for (int i = 0; i < N; i++) {
			i32d[i] = INT32_MAX;
			i32s[i] = 1;
			u32d[i] = UINT32_MAX;
			u32s[i] = 2;
			i64d[i] = (int64_t)1 << 32;
			i64s[i] = ((int64_t)1 << 32) + 3;
			u64d[i] = UINT64_MAX;
			u64s[i] = 2;
			i8d[i] = INT8_MIN;
			i8s[i] = -1;
			u8d[i] = 200;
			u8s[i] = 100;
		}
		o->reduce[SC_I32][SC_OP_SUM](i32d, i32s, N);
		o->reduce[SC_U32][SC_OP_SUM](u32d, u32s, N);
		o->reduce[SC_I64][SC_OP_PROD](i64d, i64s, N);
		o->reduce[SC_U64][SC_OP_SUM](u64d, u64s, N);
		o->reduce[SC_I8][SC_OP_PROD](i8d, i8s, N);
		o->reduce[SC_U8][SC_OP_SUM](u8d, u8s, N);
		for (int i = 0; i < N; i++) {
			assert_int_equal(i32d[i], INT32_MIN);
			assert_int_equal(u32d[i], 1);
			assert_true(i64d[i] == (int64_t)3 << 32); /* 2^64 wraps away */
			assert_true(u64d[i] == 1);
			assert_int_equal(i8d[i], INT8_MIN); /* -128 * -1 wraps */
			assert_int_equal(u8d[i], 44);
		}
		for (int i = 0; i < N; i++) {
			u8d[i] = (uint8_t)(16 + i);
			u8s[i] = 16;
			i8d[i] = (int8_t)(-100 + i);
			i8s[i] = (int8_t)(i - 7);
		}
		o->reduce[SC_U8][SC_OP_PROD](u8d, u8s, N);
		o->reduce[SC_I8][SC_OP_MIN](i8d, i8s, N);
		for (int i = 0; i < N; i++) {
			int8_t a = (int8_t)(-100 + i), b = (int8_t)(i - 7);

			assert_int_equal(u8d[i], (uint8_t)((16 + i) * 16));
			assert_int_equal(i8d[i], a < b ? a : b);
		}
	}
}

/* ---- narrow16 in place (dst16 == acc) ---- */

static void test_narrow_inplace(void **state)
{
	enum { N = 1029 };
	static unsigned char mem[N * 4 + 16], out_ref[N * 2];

	(void)state;
	pools_init();
	for (int h = 0; h < 2; h++) {
		for (int isa = 0; isa < SC_ISA_COUNT; isa++) {
			const struct sc_reduce_ops *o = sc_reduce_ops_get((enum sc_isa)isa);

			if (!o)
				continue;
			for (size_t off = 0; off < 4; off++) {
				unsigned char *p = mem + off;

				memcpy(p, pool[G_ACC_F16 + h][0], N * 4);
				sc_reduce_ops_get(SC_ISA_SCALAR)->narrow16[h](out_ref, p, N);
				o->narrow16[h](p, p, N);
				if (cmp_elems(h ? SC_BF16 : SC_F16, out_ref, p, N) >= 0)
					fail_msg("%s narrow16 %s in place (offset %zu) differs",
						 o->name, h ? "bf16" : "f16", off);
			}
		}
	}
}

/* ---- names ---- */

static void test_names(void **state)
{
	(void)state;
	for (int t = 0; t < SC_DTYPE_COUNT; t++) {
		enum sc_dtype x;

		assert_int_equal(sc_dtype_parse(sc_dtype_name((enum sc_dtype)t), &x), 0);
		assert_int_equal(x, t);
		assert_true(sc_dtype_size((enum sc_dtype)t) > 0);
	}
	for (int op = 0; op < SC_OP_COUNT; op++) {
		enum sc_op x;

		assert_int_equal(sc_op_parse(sc_op_name((enum sc_op)op), &x), 0);
		assert_int_equal(x, op);
	}
	for (int isa = 0; isa < SC_ISA_COUNT; isa++) {
		enum sc_isa x;

		assert_int_equal(sc_isa_parse(sc_isa_name((enum sc_isa)isa), &x), 0);
		assert_int_equal(x, isa);
	}
	{
		enum sc_dtype t = SC_I8;
		enum sc_op op = SC_OP_MAX;
		enum sc_isa isa = SC_ISA_NEON;

		assert_int_equal(sc_dtype_parse("f128", &t), -EINVAL);
		assert_int_equal(sc_dtype_parse(NULL, &t), -EINVAL);
		assert_int_equal(t, SC_I8); /* untouched on error */
		assert_int_equal(sc_op_parse("avg", &op), -EINVAL);
		assert_int_equal(op, SC_OP_MAX);
		assert_int_equal(sc_isa_parse("sse4", &isa), -EINVAL);
		assert_int_equal(isa, SC_ISA_NEON);
	}
	assert_string_equal(sc_dtype_name(SC_BF16), "bf16");
	assert_string_equal(sc_isa_name(SC_ISA_AVX512), "avx512");
	assert_int_equal(sc_dtype_size(SC_F16), 2);
	assert_int_equal(sc_dtype_size(SC_U64), 8);
	assert_int_equal(sc_dtype_acc(SC_BF16), SC_F32);
	assert_int_equal(sc_dtype_acc(SC_F16), SC_F32);
	assert_int_equal(sc_dtype_acc(SC_I8), SC_I8);
}

static void test_tables_full(void **state)
{
	(void)state;
	assert_non_null(sc_reduce_ops_get(SC_ISA_SCALAR));
	assert_null(sc_reduce_ops_get(SC_ISA_COUNT));
#if defined(__x86_64__)
	assert_null(sc_reduce_ops_get(SC_ISA_NEON));
	assert_non_null(sc_reduce_ops_get(SC_ISA_SSE2));
#elif defined(__aarch64__)
	assert_non_null(sc_reduce_ops_get(SC_ISA_NEON));
	assert_null(sc_reduce_ops_get(SC_ISA_AVX2));
#endif
	for (int isa = 0; isa < SC_ISA_COUNT; isa++) {
		const struct sc_reduce_ops *o = sc_reduce_ops_get((enum sc_isa)isa);

		if (!o)
			continue;
		assert_string_equal(o->name, sc_isa_name((enum sc_isa)isa));
		for (int t = 0; t < SC_DTYPE_COUNT; t++)
			for (int op = 0; op < SC_OP_COUNT; op++)
				assert_non_null(o->reduce[t][op]);
		for (int k = 0; k < 2; k++) {
			for (int op = 0; op < SC_OP_COUNT; op++)
				assert_non_null(o->acc16[k][op]);
			assert_non_null(o->widen16[k]);
			assert_non_null(o->narrow16[k]);
		}
	}
}

/* ---- SUMCAST_ISA ---- */

static void test_init_env(void **state)
{
	enum sc_isa best = SC_ISA_SCALAR;

	(void)state;
	unsetenv("SUMCAST_ISA");
	assert_int_equal(sc_reduce_init(), 0);
	best = sc_reduce_isa();
	assert_ptr_equal(sc_reduce_active(), sc_reduce_ops_get(best));
	/* The best is the widest available. */
	{
		static const enum sc_isa order[] = { SC_ISA_AVX512, SC_ISA_AVX2, SC_ISA_NEON,
						     SC_ISA_SSE2, SC_ISA_SCALAR };
		size_t i = 0;

		while (!sc_reduce_ops_get(order[i]))
			i++;
		assert_int_equal(best, order[i]);
	}

	for (int isa = 0; isa < SC_ISA_COUNT; isa++) {
		setenv("SUMCAST_ISA", sc_isa_name((enum sc_isa)isa), 1);
		if (sc_reduce_ops_get((enum sc_isa)isa)) {
			assert_int_equal(sc_reduce_init(), 0);
			assert_int_equal(sc_reduce_isa(), isa);
			assert_ptr_equal(sc_reduce_active(), sc_reduce_ops_get((enum sc_isa)isa));
		} else {
			enum sc_isa before = sc_reduce_isa();

			assert_int_equal(sc_reduce_init(), -ENOTSUP);
			assert_int_equal(sc_reduce_isa(), before); /* unchanged */
		}
	}
	setenv("SUMCAST_ISA", "scalar", 1);
	assert_int_equal(sc_reduce_init(), 0);
	setenv("SUMCAST_ISA", "avx1024", 1);
	assert_int_equal(sc_reduce_init(), -EINVAL);
	assert_int_equal(sc_reduce_isa(), SC_ISA_SCALAR);
	unsetenv("SUMCAST_ISA");
	assert_int_equal(sc_reduce_init(), 0);
	assert_int_equal(sc_reduce_isa(), best);
}

/* ---- wrappers ---- */

static void test_wrappers(void **state)
{
	enum { N = 77 };
	int32_t acc[N], src[N], out[N];
	uint8_t acc8[N], src8[N];
	float facc[N];
	uint16_t h[N], h2[N];

	(void)state;
	unsetenv("SUMCAST_ISA");
	assert_int_equal(sc_reduce_init(), 0);
	for (int i = 0; i < N; i++) {
		src[i] = i * 1000 - 7;
		src8[i] = (uint8_t)(i * 3);
		h[i] = sc_f32_to_f16((float)i * 0.25f);
	}
	/* Non-16-bit types: load copies, acc reduces, store copies (no-op in place). */
	memset(acc, 0x55, sizeof(acc));
	sc_reduce_load(SC_I32, acc, src, N);
	assert_memory_equal(acc, src, sizeof(acc));
	sc_reduce_acc(SC_I32, SC_OP_SUM, acc, src, N);
	sc_reduce_acc(SC_I32, SC_OP_MAX, acc, src, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(acc[i], src[i] < 0 ? src[i] : 2 * src[i]);
	sc_reduce_store(SC_I32, out, acc, N);
	assert_memory_equal(out, acc, sizeof(out));
	sc_reduce_store(SC_I32, acc, acc, N);
	assert_memory_equal(out, acc, sizeof(out));

	sc_reduce_load(SC_U8, acc8, src8, N);
	sc_reduce_acc(SC_U8, SC_OP_PROD, acc8, src8, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(acc8[i], (uint8_t)(src8[i] * src8[i]));

	sc_reduce(SC_I32, SC_OP_MIN, out, src, N); /* out >= src everywhere */
	assert_memory_equal(out, src, sizeof(out));

	/* f16: load widens, acc accumulates in f32, store narrows once. */
	sc_reduce_load(SC_F16, facc, h, N);
	for (int i = 0; i < N; i++)
		assert_true(facc[i] == (float)i * 0.25f);
	sc_reduce_acc(SC_F16, SC_OP_SUM, facc, h, N);
	sc_reduce_acc(SC_F16, SC_OP_SUM, facc, h, N);
	sc_reduce_store(SC_F16, h2, facc, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(h2[i], sc_f32_to_f16((float)i * 0.75f));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_tables_full),
		cmocka_unit_test(test_init_env),
		cmocka_unit_test(test_rounding_hand),
		cmocka_unit_test(test_16bit_special_pairs),
		cmocka_unit_test(test_minmax_rules),
		cmocka_unit_test(test_int_wrap),
		cmocka_unit_test(test_narrow_inplace),
		cmocka_unit_test(test_wrappers),
		cmocka_unit_test(test_misaligned),
		cmocka_unit_test(test_variants_vs_scalar),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
