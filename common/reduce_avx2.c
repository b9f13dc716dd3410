/* AVX2 + FMA + F16C kernels (FMA is never used: no contraction, results
 * equal the scalar reference). 64-bit prod has no AVX2 instruction and is
 * left to the scalar reference (NULL entry, filled by reduce.c). */
#include <immintrin.h>

#include "reduce_impl.h"

#define A2_LDPS(p) _mm256_loadu_ps((const void *)(p))
#define A2_LDPD(p) _mm256_loadu_pd((const void *)(p))
#define A2_LDSI(p) _mm256_loadu_si256((const void *)(p))
#define A2_STEP_PS(dp, sp, F) _mm256_storeu_ps((void *)(dp), F(A2_LDPS(dp), A2_LDPS(sp)))
#define A2_STEP_PD(dp, sp, F) _mm256_storeu_pd((void *)(dp), F(A2_LDPD(dp), A2_LDPD(sp)))
#define A2_STEP_SI(dp, sp, F) _mm256_storeu_si256((void *)(dp), F(A2_LDSI(dp), A2_LDSI(sp)))

/* minps/maxps return the second operand when either is NaN: put a NaN dst back. */
static inline __m256 a2_min_ps(__m256 a, __m256 b)
{
	return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

static inline __m256 a2_max_ps(__m256 a, __m256 b)
{
	return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

static inline __m256d a2_min_pd(__m256d a, __m256d b)
{
	return _mm256_blendv_pd(_mm256_min_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}

static inline __m256d a2_max_pd(__m256d a, __m256d b)
{
	return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}

static inline __m256i a2_min_i64(__m256i a, __m256i b)
{
	return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(b, a));
}

static inline __m256i a2_max_i64(__m256i a, __m256i b)
{
	return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b));
}

/* Unsigned compares: flip the sign bit, compare signed. */
static inline __m256i a2_min_u64(__m256i a, __m256i b)
{
	const __m256i bias = _mm256_set1_epi64x((long long)0x8000000000000000ull);

	return _mm256_blendv_epi8(
		b, a, _mm256_cmpgt_epi64(_mm256_xor_si256(b, bias), _mm256_xor_si256(a, bias)));
}

static inline __m256i a2_max_u64(__m256i a, __m256i b)
{
	const __m256i bias = _mm256_set1_epi64x((long long)0x8000000000000000ull);

	return _mm256_blendv_epi8(
		b, a, _mm256_cmpgt_epi64(_mm256_xor_si256(a, bias), _mm256_xor_si256(b, bias)));
}

/* 8-bit product from 16-bit multiplies (see reduce_sse2.c). */
static inline __m256i a2_mul8(__m256i a, __m256i b)
{
	__m256i even = _mm256_mullo_epi16(a, b);
	__m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));

	return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xff)),
			       _mm256_slli_epi16(odd, 8));
}

/* ---- 16-bit conversions, 8 lanes ---- */

#define a2_f16w(h) _mm256_cvtph_ps(h)
#define a2_f16n(v) _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT)

static inline __m256 a2_bf16w(__m128i h)
{
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Rounded bf16 in the low 16 bits of each 32-bit lane (RNE, quiet NaN). */
static inline __m256i a2_bf16r(__m256 f)
{
	__m256i u = _mm256_castps_si256(f);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
	__m256i q = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));

	r = _mm256_blendv_epi8(r, q, _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
	return _mm256_srli_epi32(r, 16);
}

static inline __m128i a2_bf16n(__m256 f)
{
	__m256i r = a2_bf16r(f);

	return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* bf16 dst op= src, 16 elements: unpacking with zero widens by a shift; the
 * unpack and the pack are both per 128-bit lane, so the order comes back. */
#define A2_STEP_BF16(dp, sp, F)                                                      \
	do {                                                                         \
		__m256i bd_ = A2_LDSI(dp), bs_ = A2_LDSI(sp), bz_ = _mm256_setzero_si256();   \
		__m256 blo_ = F(_mm256_castsi256_ps(_mm256_unpacklo_epi16(bz_, bd_)),   \
			       _mm256_castsi256_ps(_mm256_unpacklo_epi16(bz_, bs_)));  \
		__m256 bhi_ = F(_mm256_castsi256_ps(_mm256_unpackhi_epi16(bz_, bd_)),   \
			       _mm256_castsi256_ps(_mm256_unpackhi_epi16(bz_, bs_)));  \
		_mm256_storeu_si256((void *)(dp),                                    \
				    _mm256_packus_epi32(a2_bf16r(blo_), a2_bf16r(bhi_)));  \
	} while (0)

/* bf16 dst op= src for sum and prod, 16 elements, no shuffles: each 32-bit
 * lane holds an even element (low half) and an odd one (high half). Odd:
 * v & 0xffff0000 is already its f32; even: v << 16. After the op, the RNE add
 * r + 0x7fff + ((r >> 16) & 1) rounds both; the odd bf16 is then in the high
 * half, the even one is shifted down, and one vpblendw puts them together.
 * No NaN fix-up: the inputs are widened bf16 (low 16 bits zero) and the
 * hardware returns such an input NaN quieted or the default NaN, so a NaN r
 * has its low 16 bits zero and the quiet bit set, and the RNE add leaves its
 * high half unchanged (still a quiet NaN). Not valid for min/max, which can
 * return a signalling NaN input as is. */
static inline __m256i a2_bf16_rne(__m256i r)
{
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(r, 16), _mm256_set1_epi32(1));

	return _mm256_add_epi32(_mm256_add_epi32(r, _mm256_set1_epi32(0x7fff)), lsb);
}

/* a + b as a * 1 + b: bit-identical to the add (the product is exact and
 * there is one rounding), but it runs on the multiply pipes, which the
 * shifts and integer adds of the bf16 kernels leave free. */
static inline __m256 a2_add1_ps(__m256 a, __m256 b)
{
	return _mm256_fmadd_ps(a, _mm256_set1_ps(1.0f), b);
}

#define A2_STEP_BF16_EO(dp, sp, F)                                                   \
	do {                                                                         \
		const __m256i hi_ = _mm256_set1_epi32((int)0xffff0000u);             \
		__m256i ed_ = A2_LDSI(dp), es_ = A2_LDSI(sp);                          \
		__m256i re_ = _mm256_castps_si256(                                   \
			F(_mm256_castsi256_ps(_mm256_slli_epi32(ed_, 16)),            \
			  _mm256_castsi256_ps(_mm256_slli_epi32(es_, 16))));          \
		__m256i ro_ = _mm256_castps_si256(                                   \
			F(_mm256_castsi256_ps(_mm256_and_si256(ed_, hi_)),            \
			  _mm256_castsi256_ps(_mm256_and_si256(es_, hi_))));          \
		re_ = _mm256_srli_epi32(a2_bf16_rne(re_), 16);                       \
		ro_ = a2_bf16_rne(ro_);                                              \
		_mm256_storeu_si256((void *)(dp), _mm256_blend_epi16(re_, ro_, 0xaa)); \
	} while (0)

#define V_L 8
#define V_LDF(p) A2_LDPS(p)
#define V_STF(p, v) _mm256_storeu_ps((void *)(p), (v))
#define V_LD16(p) _mm_loadu_si128((const void *)(p))
#define V_ST16(p, h) _mm_storeu_si128((void *)(p), (h))
#define V_F16W a2_f16w
#define V_F16N a2_f16n
#define V_BF16W a2_bf16w
#define V_BF16N a2_bf16n
#define V_ADDF a2_add1_ps
#define V_MULF _mm256_mul_ps
#define V_MINF a2_min_ps
#define V_MAXF a2_max_ps

SC_BIN4(f32, SC_F32, 4, 8, A2_STEP_PS, _mm256_add_ps, _mm256_mul_ps, a2_min_ps, a2_max_ps)
SC_BIN4(f64, SC_F64, 8, 4, A2_STEP_PD, _mm256_add_pd, _mm256_mul_pd, a2_min_pd, a2_max_pd)
SC_BIN4(i32, SC_I32, 4, 8, A2_STEP_SI, _mm256_add_epi32, _mm256_mullo_epi32, _mm256_min_epi32,
	_mm256_max_epi32)
SC_BIN4(u32, SC_U32, 4, 8, A2_STEP_SI, _mm256_add_epi32, _mm256_mullo_epi32, _mm256_min_epu32,
	_mm256_max_epu32)
SC_BIN(i64, sum, SC_I64, SC_OP_SUM, 8, 4, A2_STEP_SI, _mm256_add_epi64)
SC_BIN(i64, min, SC_I64, SC_OP_MIN, 8, 4, A2_STEP_SI, a2_min_i64)
SC_BIN(i64, max, SC_I64, SC_OP_MAX, 8, 4, A2_STEP_SI, a2_max_i64)
SC_BIN(u64, sum, SC_U64, SC_OP_SUM, 8, 4, A2_STEP_SI, _mm256_add_epi64)
SC_BIN(u64, min, SC_U64, SC_OP_MIN, 8, 4, A2_STEP_SI, a2_min_u64)
SC_BIN(u64, max, SC_U64, SC_OP_MAX, 8, 4, A2_STEP_SI, a2_max_u64)
SC_BIN4(i8, SC_I8, 1, 32, A2_STEP_SI, _mm256_add_epi8, a2_mul8, _mm256_min_epi8, _mm256_max_epi8)
SC_BIN4(u8, SC_U8, 1, 32, A2_STEP_SI, _mm256_add_epi8, a2_mul8, _mm256_min_epu8, _mm256_max_epu8)
SC_DEF_16BIT_RED(f16, SC_F16, V_F16W, V_F16N)
SC_DEF_16BIT_ACC(f16, 0, V_F16W, V_F16N)
SC_DEF_16BIT_ACC(bf16, 1, V_BF16W, V_BF16N)
SC_BIN(bf16, sum, SC_BF16, SC_OP_SUM, 2, 16, A2_STEP_BF16_EO, a2_add1_ps)
SC_BIN(bf16, prod, SC_BF16, SC_OP_PROD, 2, 16, A2_STEP_BF16_EO, _mm256_mul_ps)
SC_BIN(bf16, min, SC_BF16, SC_OP_MIN, 2, 16, A2_STEP_BF16, a2_min_ps)
SC_BIN(bf16, max, SC_BF16, SC_OP_MAX, 2, 16, A2_STEP_BF16, a2_max_ps)

const struct sc_reduce_ops sc_reduce_ops_avx2 = {
	.name = "avx2",
	.reduce = {
		[SC_F32] = SC_ROW4(f32),
		[SC_F16] = SC_ROW4(f16),
		[SC_BF16] = SC_ROW4(bf16),
		[SC_F64] = SC_ROW4(f64),
		[SC_I32] = SC_ROW4(i32),
		[SC_U32] = SC_ROW4(u32),
		[SC_I64] = { k_i64_sum, NULL, k_i64_min, k_i64_max },
		[SC_U64] = { k_u64_sum, NULL, k_u64_min, k_u64_max },
		[SC_I8] = SC_ROW4(i8),
		[SC_U8] = SC_ROW4(u8),
	},
	SC_TBL_16BIT(),
};
