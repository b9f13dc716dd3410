/* SSE2 kernels (x86-64 baseline). No F16C here: f16 conversions use the
 * exact integer/float bit tricks from ryg's half_to_float / float_to_half
 * (round to nearest even, denormals, Inf, NaN), which assume the default
 * MXCSR (no DAZ/FTZ). 64-bit prod/min/max have no SSE2 instructions and are
 * left to the scalar reference (NULL entries are filled by reduce.c). */
#include <emmintrin.h>

#include "reduce_impl.h"

#define S2_LDPS(p) _mm_loadu_ps((const void *)(p))
#define S2_LDPD(p) _mm_loadu_pd((const void *)(p))
#define S2_LDSI(p) _mm_loadu_si128((const void *)(p))
#define S2_STEP_PS(dp, sp, F) _mm_storeu_ps((void *)(dp), F(S2_LDPS(dp), S2_LDPS(sp)))
#define S2_STEP_PD(dp, sp, F) _mm_storeu_pd((void *)(dp), F(S2_LDPD(dp), S2_LDPD(sp)))
#define S2_STEP_SI(dp, sp, F) _mm_storeu_si128((void *)(dp), F(S2_LDSI(dp), S2_LDSI(sp)))

static inline __m128i s2_sel(__m128i m, __m128i a, __m128i b)
{
	return _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b));
}

/* minps/maxps return the second operand when either is NaN: put a NaN dst back. */
static inline __m128 s2_min_ps(__m128 a, __m128 b)
{
	__m128 nan = _mm_cmpunord_ps(a, a);

	return _mm_or_ps(_mm_and_ps(nan, a), _mm_andnot_ps(nan, _mm_min_ps(a, b)));
}

static inline __m128 s2_max_ps(__m128 a, __m128 b)
{
	__m128 nan = _mm_cmpunord_ps(a, a);

	return _mm_or_ps(_mm_and_ps(nan, a), _mm_andnot_ps(nan, _mm_max_ps(a, b)));
}

static inline __m128d s2_min_pd(__m128d a, __m128d b)
{
	__m128d nan = _mm_cmpunord_pd(a, a);

	return _mm_or_pd(_mm_and_pd(nan, a), _mm_andnot_pd(nan, _mm_min_pd(a, b)));
}

static inline __m128d s2_max_pd(__m128d a, __m128d b)
{
	__m128d nan = _mm_cmpunord_pd(a, a);

	return _mm_or_pd(_mm_and_pd(nan, a), _mm_andnot_pd(nan, _mm_max_pd(a, b)));
}

/* 32-bit low multiply (pmulld is SSE4.1): two 32x32->64 multiplies. */
static inline __m128i s2_mul32(__m128i a, __m128i b)
{
	__m128i even = _mm_mul_epu32(a, b);
	__m128i odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), _mm_srli_epi64(b, 32));

	return _mm_unpacklo_epi32(_mm_shuffle_epi32(even, _MM_SHUFFLE(0, 0, 2, 0)),
				  _mm_shuffle_epi32(odd, _MM_SHUFFLE(0, 0, 2, 0)));
}

static inline __m128i s2_min_i32(__m128i a, __m128i b)
{
	return s2_sel(_mm_cmpgt_epi32(b, a), a, b);
}

static inline __m128i s2_max_i32(__m128i a, __m128i b)
{
	return s2_sel(_mm_cmpgt_epi32(a, b), a, b);
}

/* Unsigned compares: flip the sign bit, compare signed. */
static inline __m128i s2_min_u32(__m128i a, __m128i b)
{
	const __m128i bias = _mm_set1_epi32((int)0x80000000u);

	return s2_sel(_mm_cmpgt_epi32(_mm_xor_si128(b, bias), _mm_xor_si128(a, bias)), a, b);
}

static inline __m128i s2_max_u32(__m128i a, __m128i b)
{
	const __m128i bias = _mm_set1_epi32((int)0x80000000u);

	return s2_sel(_mm_cmpgt_epi32(_mm_xor_si128(a, bias), _mm_xor_si128(b, bias)), a, b);
}

/* 8-bit product from 16-bit multiplies: the low byte of a 16-bit product only
 * depends on the low bytes of the operands (same bits signed or unsigned). */
static inline __m128i s2_mul8(__m128i a, __m128i b)
{
	__m128i even = _mm_mullo_epi16(a, b);
	__m128i odd = _mm_mullo_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8));

	return _mm_or_si128(_mm_and_si128(even, _mm_set1_epi16(0xff)), _mm_slli_epi16(odd, 8));
}

static inline __m128i s2_min_i8(__m128i a, __m128i b)
{
	const __m128i bias = _mm_set1_epi8((char)0x80);

	return _mm_xor_si128(_mm_min_epu8(_mm_xor_si128(a, bias), _mm_xor_si128(b, bias)), bias);
}

static inline __m128i s2_max_i8(__m128i a, __m128i b)
{
	const __m128i bias = _mm_set1_epi8((char)0x80);

	return _mm_xor_si128(_mm_max_epu8(_mm_xor_si128(a, bias), _mm_xor_si128(b, bias)), bias);
}

/* ---- 16-bit conversions, 4 lanes ---- */

static inline __m128 s2_f16w(__m128i h16)
{
	__m128i h = _mm_unpacklo_epi16(h16, _mm_setzero_si128());
	__m128i expmant = _mm_and_si128(h, _mm_set1_epi32(0x7fff));
	__m128i sign = _mm_slli_epi32(_mm_xor_si128(h, expmant), 16);
	/* Exponent and mantissa in f32 position, scaled by 2^112 (exact,
	 * normalizes subnormals); Inf/NaN get the all-ones exponent. */
	__m128 scaled = _mm_mul_ps(_mm_castsi128_ps(_mm_slli_epi32(expmant, 13)),
				   _mm_castsi128_ps(_mm_set1_epi32((254 - 15) << 23)));
	__m128i infnan = _mm_and_si128(_mm_cmpgt_epi32(expmant, _mm_set1_epi32(0x7bff)),
				       _mm_set1_epi32(255 << 23));

	return _mm_or_ps(scaled, _mm_castsi128_ps(_mm_or_si128(sign, infnan)));
}

static inline __m128i s2_f16n(__m128 f)
{
	const __m128i sub_magic = _mm_set1_epi32(((127 - 15) + (23 - 10) + 1) << 23);
	__m128 justsign = _mm_and_ps(f, _mm_castsi128_ps(_mm_set1_epi32((int)0x80000000u)));
	__m128 absf = _mm_xor_ps(f, justsign);
	__m128i a = _mm_castps_si128(absf);
	__m128i isnan = _mm_castps_si128(_mm_cmpunord_ps(absf, absf));
	/* Below 2^16: finite result or rounds up to Inf by the normal path. */
	__m128i isregular = _mm_cmpgt_epi32(_mm_set1_epi32((127 + 16) << 23), a);
	__m128i infnan = _mm_or_si128(_mm_and_si128(isnan, _mm_set1_epi32(0x200)),
				      _mm_set1_epi32(0x7c00));
	__m128i issub = _mm_cmpgt_epi32(_mm_set1_epi32((127 - 14) << 23), a);
	/* Subnormal result: adding 0.5 rounds |f| to a multiple of 2^-24 (RNE). */
	__m128i sub = _mm_sub_epi32(_mm_castps_si128(_mm_add_ps(absf, _mm_castsi128_ps(sub_magic))),
				    sub_magic);
	/* Normal result: rebias, add 0xfff + lsb, shift. */
	__m128i odd = _mm_srai_epi32(_mm_slli_epi32(a, 31 - 13), 31);
	__m128i normal = _mm_srli_epi32(
		_mm_sub_epi32(_mm_add_epi32(a, _mm_set1_epi32(0xfff - ((127 - 15) << 23))), odd), 13);
	__m128i r = s2_sel(isregular, s2_sel(issub, sub, normal), infnan);

	r = _mm_or_si128(r, _mm_srli_epi32(_mm_castps_si128(justsign), 16));
	/* Sign-extend so the signed-saturating pack keeps all 16 bits. */
	r = _mm_srai_epi32(_mm_slli_epi32(r, 16), 16);
	return _mm_packs_epi32(r, r);
}

static inline __m128 s2_bf16w(__m128i h)
{
	return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
}

/* Rounded bf16, sign-extended in each 32-bit lane (RNE, quiet NaN). */
static inline __m128i s2_bf16r(__m128 f)
{
	__m128i u = _mm_castps_si128(f);
	__m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
	__m128i r = _mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0x7fff)), lsb);
	__m128i q = _mm_or_si128(u, _mm_set1_epi32(0x00400000));

	r = s2_sel(_mm_castps_si128(_mm_cmpunord_ps(f, f)), q, r);
	/* Arithmetic shift: the pack below saturates signed values. */
	return _mm_srai_epi32(r, 16);
}

static inline __m128i s2_bf16n(__m128 f)
{
	__m128i r = s2_bf16r(f);

	return _mm_packs_epi32(r, r);
}

/* bf16 dst op= src, 8 elements: unpacking with zero widens by a shift. */
#define S2_STEP_BF16(dp, sp, F)                                                      \
	do {                                                                         \
		__m128i bd_ = S2_LDSI(dp), bs_ = S2_LDSI(sp), bz_ = _mm_setzero_si128();   \
		__m128 blo_ = F(_mm_castsi128_ps(_mm_unpacklo_epi16(bz_, bd_)),      \
				_mm_castsi128_ps(_mm_unpacklo_epi16(bz_, bs_)));     \
		__m128 bhi_ = F(_mm_castsi128_ps(_mm_unpackhi_epi16(bz_, bd_)),      \
				_mm_castsi128_ps(_mm_unpackhi_epi16(bz_, bs_)));     \
		_mm_storeu_si128((void *)(dp),                                       \
				 _mm_packs_epi32(s2_bf16r(blo_), s2_bf16r(bhi_)));   \
	} while (0)

/* bf16 dst op= src for sum and prod, 8 elements, no unpack/pack: the
 * even/odd split of reduce_avx2.c (A2_STEP_BF16_EO, where the argument for
 * skipping the NaN fix-up is); SSE2 has no pblendw, so and + or. */
static inline __m128i s2_bf16_rne(__m128i r)
{
	__m128i lsb = _mm_and_si128(_mm_srli_epi32(r, 16), _mm_set1_epi32(1));

	return _mm_add_epi32(_mm_add_epi32(r, _mm_set1_epi32(0x7fff)), lsb);
}

#define S2_STEP_BF16_EO(dp, sp, F)                                                   \
	do {                                                                         \
		const __m128i hi_ = _mm_set1_epi32((int)0xffff0000u);                \
		__m128i ed_ = S2_LDSI(dp), es_ = S2_LDSI(sp);                        \
		__m128i re_ = _mm_castps_si128(F(_mm_castsi128_ps(_mm_slli_epi32(ed_, 16)), \
						 _mm_castsi128_ps(_mm_slli_epi32(es_, 16)))); \
		__m128i ro_ = _mm_castps_si128(F(_mm_castsi128_ps(_mm_and_si128(ed_, hi_)), \
						 _mm_castsi128_ps(_mm_and_si128(es_, hi_)))); \
		re_ = _mm_srli_epi32(s2_bf16_rne(re_), 16);                          \
		ro_ = _mm_and_si128(s2_bf16_rne(ro_), hi_);                          \
		_mm_storeu_si128((void *)(dp), _mm_or_si128(re_, ro_));              \
	} while (0)

#define V_L 4
#define V_LDF(p) S2_LDPS(p)
#define V_STF(p, v) _mm_storeu_ps((void *)(p), (v))
#define V_LD16(p) _mm_loadl_epi64((const void *)(p))
#define V_ST16(p, h) _mm_storel_epi64((void *)(p), (h))
#define V_F16W s2_f16w
#define V_F16N s2_f16n
#define V_BF16W s2_bf16w
#define V_BF16N s2_bf16n
#define V_ADDF _mm_add_ps
#define V_MULF _mm_mul_ps
#define V_MINF s2_min_ps
#define V_MAXF s2_max_ps

SC_BIN4(f32, SC_F32, 4, 4, S2_STEP_PS, _mm_add_ps, _mm_mul_ps, s2_min_ps, s2_max_ps)
SC_BIN4(f64, SC_F64, 8, 2, S2_STEP_PD, _mm_add_pd, _mm_mul_pd, s2_min_pd, s2_max_pd)
SC_BIN4(i32, SC_I32, 4, 4, S2_STEP_SI, _mm_add_epi32, s2_mul32, s2_min_i32, s2_max_i32)
SC_BIN4(u32, SC_U32, 4, 4, S2_STEP_SI, _mm_add_epi32, s2_mul32, s2_min_u32, s2_max_u32)
SC_BIN(i64, sum, SC_I64, SC_OP_SUM, 8, 2, S2_STEP_SI, _mm_add_epi64)
SC_BIN(u64, sum, SC_U64, SC_OP_SUM, 8, 2, S2_STEP_SI, _mm_add_epi64)
SC_BIN4(i8, SC_I8, 1, 16, S2_STEP_SI, _mm_add_epi8, s2_mul8, s2_min_i8, s2_max_i8)
SC_BIN4(u8, SC_U8, 1, 16, S2_STEP_SI, _mm_add_epi8, s2_mul8, _mm_min_epu8, _mm_max_epu8)
SC_DEF_16BIT_RED(f16, SC_F16, V_F16W, V_F16N)
SC_DEF_16BIT_ACC(f16, 0, V_F16W, V_F16N)
SC_DEF_16BIT_ACC(bf16, 1, V_BF16W, V_BF16N)
SC_BIN(bf16, sum, SC_BF16, SC_OP_SUM, 2, 8, S2_STEP_BF16_EO, _mm_add_ps)
SC_BIN(bf16, prod, SC_BF16, SC_OP_PROD, 2, 8, S2_STEP_BF16_EO, _mm_mul_ps)
SC_BIN(bf16, min, SC_BF16, SC_OP_MIN, 2, 8, S2_STEP_BF16, s2_min_ps)
SC_BIN(bf16, max, SC_BF16, SC_OP_MAX, 2, 8, S2_STEP_BF16, s2_max_ps)

const struct sc_reduce_ops sc_reduce_ops_sse2 = {
	.name = "sse2",
	.reduce = {
		[SC_F32] = SC_ROW4(f32),
		[SC_F16] = SC_ROW4(f16),
		[SC_BF16] = SC_ROW4(bf16),
		[SC_F64] = SC_ROW4(f64),
		[SC_I32] = SC_ROW4(i32),
		[SC_U32] = SC_ROW4(u32),
		[SC_I64] = { k_i64_sum },
		[SC_U64] = { k_u64_sum },
		[SC_I8] = SC_ROW4(i8),
		[SC_U8] = SC_ROW4(u8),
	},
	SC_TBL_16BIT(),
};
