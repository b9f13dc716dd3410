/* Reference kernels: plain C, one element at a time, the definition every
 * SIMD variant is tested against (see the semantics in reduce.h).
 *
 * Elements are accessed with memcpy because the API allows misaligned
 * pointers (a misaligned float * dereference is undefined behaviour and
 * UBSan reports it); gcc turns each memcpy into a single move. Integer ops
 * are computed in uint64_t so that wrapping is defined. */
#include <string.h>

#include "reduce.h"
#include "reduce_impl.h"

/* ---- f16 / bf16 conversions (round to nearest even) ---- */

float sc_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ff;
	uint32_t u;
	float f;

	if (e == 0x1f) {
		u = sign | 0x7f800000 | (m << 13); /* Inf, NaN keeps its payload */
	} else if (e != 0) {
		u = sign | ((e + 112) << 23) | (m << 13);
	} else if (m == 0) {
		u = sign;
	} else {
		/* Subnormal m * 2^-24: normalize. */
		e = 113;
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		u = sign | (e << 23) | ((m & 0x3ff) << 13);
	}
	memcpy(&f, &u, sizeof(f));
	return f;
}

uint16_t sc_f32_to_f16(float f)
{
	uint32_t u, a, sign;

	memcpy(&u, &f, sizeof(u));
	sign = (u >> 16) & 0x8000;
	a = u & 0x7fffffff;
	if (a > 0x7f800000) /* NaN: quiet, top payload bits kept */
		return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
	if (a >= 0x477ff000) /* >= 65520 (incl. Inf) rounds to Inf */
		return (uint16_t)(sign | 0x7c00);
	if (a >= 0x38800000) { /* >= 2^-14: normal result */
		uint32_t r = a - (112u << 23);

		r += 0xfff + ((r >> 13) & 1);
		return (uint16_t)(sign | (r >> 13));
	}
	if (a < 0x33000000) /* < 2^-25 (and 2^-25 ties to even): zero */
		return (uint16_t)sign;
	{
		/* Subnormal result: round(|f| * 2^24) = round(m * 2^(e - 126)). */
		uint32_t e = a >> 23;
		uint32_t m = (a & 0x7fffff) | 0x800000;
		uint32_t shift = 126 - e; /* 14..24 */
		uint32_t q = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);

		if (rem > half || (rem == half && (q & 1)))
			q++;
		return (uint16_t)(sign | q);
	}
}

float sc_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

uint16_t sc_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* ---- element access and ops ---- */

#define SC_LDST(tname, T)                                                            \
	static inline T ld_##tname(const void *p, size_t i)                          \
	{                                                                            \
		T v;                                                                 \
		memcpy(&v, (const char *)p + i * sizeof(T), sizeof(T));             \
		return v;                                                            \
	}                                                                            \
	static inline void st_##tname(void *p, size_t i, T v)                        \
	{                                                                            \
		memcpy((char *)p + i * sizeof(T), &v, sizeof(T));                    \
	}
SC_LDST(f32, float)
SC_LDST(f64, double)
SC_LDST(h16, uint16_t)
SC_LDST(i32, int32_t)
SC_LDST(u32, uint32_t)
SC_LDST(i64, int64_t)
SC_LDST(u64, uint64_t)
SC_LDST(i8, int8_t)
SC_LDST(u8, uint8_t)

#define F_SUM(a, b) ((a) + (b))
#define F_PROD(a, b) ((a) * (b))
#define F_MIN(a, b) ((a) != (a) ? (a) : (a) < (b) ? (a) : (b))
#define F_MAX(a, b) ((a) != (a) ? (a) : (a) > (b) ? (a) : (b))
#define I_SUM(a, b) ((uint64_t)(a) + (uint64_t)(b))
#define I_PROD(a, b) ((uint64_t)(a) * (uint64_t)(b))
#define I_MIN(a, b) ((a) < (b) ? (a) : (b))
#define I_MAX(a, b) ((a) > (b) ? (a) : (b))

/* dst[i] = OP(dst[i], src[i]); the cast to T wraps integers (gcc defines the
 * conversion of an out-of-range value to a signed type as modulo 2^N). */
#define SC_REF(tname, T, opname, OP)                                                 \
	static void r_##tname##_##opname(void *dst, const void *src, size_t n)       \
	{                                                                            \
		for (size_t i = 0; i < n; i++) {                                     \
			T a = ld_##tname(dst, i), b = ld_##tname(src, i);            \
			st_##tname(dst, i, (T)OP(a, b));                             \
		}                                                                    \
	}
#define SC_REF4(tname, T, P)                                                         \
	SC_REF(tname, T, sum, P##_SUM)                                               \
	SC_REF(tname, T, prod, P##_PROD)                                             \
	SC_REF(tname, T, min, P##_MIN)                                               \
	SC_REF(tname, T, max, P##_MAX)
#define SC_REFROW(tname) { r_##tname##_sum, r_##tname##_prod, r_##tname##_min, r_##tname##_max }

SC_REF4(f32, float, F)
SC_REF4(f64, double, F)
SC_REF4(i32, int32_t, I)
SC_REF4(u32, uint32_t, I)
SC_REF4(i64, int64_t, I)
SC_REF4(u64, uint64_t, I)
SC_REF4(i8, int8_t, I)
SC_REF4(u8, uint8_t, I)

/* 16-bit: reduce computes in f32 and rounds once; acc16 accumulates into f32. */
#define SC_REF16(tname, W, N, opname, OP)                                            \
	static void r_##tname##_##opname(void *dst, const void *src, size_t n)       \
	{                                                                            \
		for (size_t i = 0; i < n; i++) {                                     \
			float a = W(ld_h16(dst, i)), b = W(ld_h16(src, i));          \
			st_h16(dst, i, N(OP(a, b)));                                 \
		}                                                                    \
	}                                                                            \
	static void c_##tname##_##opname(void *acc, const void *src, size_t n)       \
	{                                                                            \
		for (size_t i = 0; i < n; i++) {                                     \
			float a = ld_f32(acc, i), b = W(ld_h16(src, i));             \
			st_f32(acc, i, OP(a, b));                                    \
		}                                                                    \
	}
/* narrow16 reads acc[i] before writing dst16[i], ascending: safe in place. */
#define SC_REF16ALL(tname, W, N)                                                     \
	SC_REF16(tname, W, N, sum, F_SUM)                                            \
	SC_REF16(tname, W, N, prod, F_PROD)                                          \
	SC_REF16(tname, W, N, min, F_MIN)                                            \
	SC_REF16(tname, W, N, max, F_MAX)                                            \
	static void w_##tname(void *acc, const void *src, size_t n)                  \
	{                                                                            \
		for (size_t i = 0; i < n; i++)                                       \
			st_f32(acc, i, W(ld_h16(src, i)));                           \
	}                                                                            \
	static void n_##tname(void *dst, const void *acc, size_t n)                  \
	{                                                                            \
		for (size_t i = 0; i < n; i++)                                       \
			st_h16(dst, i, N(ld_f32(acc, i)));                           \
	}

SC_REF16ALL(f16, sc_f16_to_f32, sc_f32_to_f16)
SC_REF16ALL(bf16, sc_bf16_to_f32, sc_f32_to_bf16)

const struct sc_reduce_ops sc_reduce_ops_scalar = {
	.name = "scalar",
	.reduce = {
		[SC_F32] = SC_REFROW(f32),
		[SC_F16] = SC_REFROW(f16),
		[SC_BF16] = SC_REFROW(bf16),
		[SC_F64] = SC_REFROW(f64),
		[SC_I32] = SC_REFROW(i32),
		[SC_U32] = SC_REFROW(u32),
		[SC_I64] = SC_REFROW(i64),
		[SC_U64] = SC_REFROW(u64),
		[SC_I8] = SC_REFROW(i8),
		[SC_U8] = SC_REFROW(u8),
	},
	.acc16 = {
		{ c_f16_sum, c_f16_prod, c_f16_min, c_f16_max },
		{ c_bf16_sum, c_bf16_prod, c_bf16_min, c_bf16_max },
	},
	.widen16 = { w_f16, w_bf16 },
	.narrow16 = { n_f16, n_bf16 },
};
