/* AVX-512 F/BW/VL/DQ + F16C kernels: every (type, op) pair is vectorized
 * (DQ gives the 64-bit multiply, BW the 8/16-bit lanes). Tails go to the
 * scalar reference. Deliberately no AVX512_BF16: vcvtneps2bf16 flushes
 * denormals, which the reference does not. */
#include <immintrin.h>

#include "reduce_impl.h"

#define A5_LDPS(p) _mm512_loadu_ps((const void *)(p))
#define A5_LDPD(p) _mm512_loadu_pd((const void *)(p))
#define A5_LDSI(p) _mm512_loadu_si512((const void *)(p))
#define A5_STEP_PS(dp, sp, F) _mm512_storeu_ps((void *)(dp), F(A5_LDPS(dp), A5_LDPS(sp)))
#define A5_STEP_PD(dp, sp, F) _mm512_storeu_pd((void *)(dp), F(A5_LDPD(dp), A5_LDPD(sp)))
#define A5_STEP_SI(dp, sp, F) _mm512_storeu_si512((void *)(dp), F(A5_LDSI(dp), A5_LDSI(sp)))

/* vminps/vmaxps return the second operand when either is NaN: put a NaN dst back. */
static inline __m512 a5_min_ps(__m512 a, __m512 b)
{
	return _mm512_mask_mov_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}

static inline __m512 a5_max_ps(__m512 a, __m512 b)
{
	return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}

static inline __m512d a5_min_pd(__m512d a, __m512d b)
{
	return _mm512_mask_mov_pd(_mm512_min_pd(a, b), _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), a);
}

static inline __m512d a5_max_pd(__m512d a, __m512d b)
{
	return _mm512_mask_mov_pd(_mm512_max_pd(a, b), _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), a);
}

/* 8-bit product from 16-bit multiplies (see reduce_sse2.c). */
static inline __m512i a5_mul8(__m512i a, __m512i b)
{
	__m512i even = _mm512_mullo_epi16(a, b);
	__m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));

	return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0xff)),
			       _mm512_slli_epi16(odd, 8));
}

/* ---- 16-bit conversions, 16 lanes ---- */

#define a5_f16w(h) _mm512_cvtph_ps(h)
#define a5_f16n(v) _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT)

static inline __m512 a5_bf16w(__m256i h)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Rounded bf16 in the low 16 bits of each 32-bit lane (RNE, quiet NaN). */
static inline __m512i a5_bf16r(__m512 f)
{
	__m512i u = _mm512_castps_si512(f);
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);

	r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), u,
				 _mm512_set1_epi32(0x00400000));
	return _mm512_srli_epi32(r, 16);
}

static inline __m256i a5_bf16n(__m512 f)
{
	return _mm512_cvtepi32_epi16(a5_bf16r(f));
}

/* bf16 dst op= src, 32 elements: unpacking with zero widens by a shift; the
 * unpack and the pack are both per 128-bit lane, so the order comes back. */
#define A5_STEP_BF16(dp, sp, F)                                                      \
	do {                                                                         \
		__m512i bd_ = A5_LDSI(dp), bs_ = A5_LDSI(sp), bz_ = _mm512_setzero_si512();   \
		__m512 blo_ = F(_mm512_castsi512_ps(_mm512_unpacklo_epi16(bz_, bd_)),   \
			       _mm512_castsi512_ps(_mm512_unpacklo_epi16(bz_, bs_)));  \
		__m512 bhi_ = F(_mm512_castsi512_ps(_mm512_unpackhi_epi16(bz_, bd_)),   \
			       _mm512_castsi512_ps(_mm512_unpackhi_epi16(bz_, bs_)));  \
		_mm512_storeu_si512((void *)(dp),                                    \
				    _mm512_packus_epi32(a5_bf16r(blo_), a5_bf16r(bhi_)));  \
	} while (0)

/* bf16 dst op= src for sum and prod, 32 elements, no shuffles: the even/odd
 * split of reduce_avx2.c (A2_STEP_BF16_EO, where the NaN argument is), with
 * a masked word blend. */
static inline __m512i a5_bf16_rne(__m512i r)
{
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(r, 16), _mm512_set1_epi32(1));

	return _mm512_add_epi32(_mm512_add_epi32(r, _mm512_set1_epi32(0x7fff)), lsb);
}

/* a + b as a * 1 + b: bit-identical to the add (the product is exact and
 * there is one rounding), but it runs on the multiply pipes, which the
 * shifts and integer adds of the bf16 kernels leave free. */
static inline __m512 a5_add1_ps(__m512 a, __m512 b)
{
	return _mm512_fmadd_ps(a, _mm512_set1_ps(1.0f), b);
}

#define A5_STEP_BF16_EO(dp, sp, F)                                                   \
	do {                                                                         \
		const __m512i hi_ = _mm512_set1_epi32((int)0xffff0000u);             \
		__m512i ed_ = A5_LDSI(dp), es_ = A5_LDSI(sp);                          \
		__m512i re_ = _mm512_castps_si512(                                   \
			F(_mm512_castsi512_ps(_mm512_slli_epi32(ed_, 16)),            \
			  _mm512_castsi512_ps(_mm512_slli_epi32(es_, 16))));          \
		__m512i ro_ = _mm512_castps_si512(                                   \
			F(_mm512_castsi512_ps(_mm512_and_si512(ed_, hi_)),            \
			  _mm512_castsi512_ps(_mm512_and_si512(es_, hi_))));          \
		re_ = _mm512_srli_epi32(a5_bf16_rne(re_), 16);                       \
		ro_ = a5_bf16_rne(ro_);                                              \
		_mm512_storeu_si512((void *)(dp),                                    \
				    _mm512_mask_blend_epi16(0xaaaaaaaau, re_, ro_)); \
	} while (0)

/* f16 dst op= src, 8 elements with ymm conversions: on Zen 4 the zmm
 * vcvtph2ps/vcvtps2ph pair runs at about 12 Gelem/s in this kernel, the ymm
 * one at 17 (bench/reduce --type f16 --isa avx2,avx512, 4M: 0.50 vs 0.69 of
 * the roofline), so the plain f16 reduce uses 256-bit vectors. */
static inline __m256 a5y_add1_ps(__m256 a, __m256 b)
{
	return _mm256_fmadd_ps(a, _mm256_set1_ps(1.0f), b);
}

static inline __m256 a5y_min_ps(__m256 a, __m256 b)
{
	return _mm256_mask_mov_ps(_mm256_min_ps(a, b), _mm256_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}

static inline __m256 a5y_max_ps(__m256 a, __m256 b)
{
	return _mm256_mask_mov_ps(_mm256_max_ps(a, b), _mm256_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}

#define A5_STEP_F16Y(dp, sp, F)                                                      \
	_mm_storeu_si128((void *)(dp),                                               \
			 _mm256_cvtps_ph(F(_mm256_cvtph_ps(_mm_loadu_si128((const void *)(dp))), \
					   _mm256_cvtph_ps(_mm_loadu_si128((const void *)(sp)))), \
					 _MM_FROUND_TO_NEAREST_INT))

#define V_L 16
#define V_LDF(p) A5_LDPS(p)
#define V_STF(p, v) _mm512_storeu_ps((void *)(p), (v))
#define V_LD16(p) _mm256_loadu_si256((const void *)(p))
#define V_ST16(p, h) _mm256_storeu_si256((void *)(p), (h))
#define V_F16W a5_f16w
#define V_F16N a5_f16n
#define V_BF16W a5_bf16w
#define V_BF16N a5_bf16n
#define V_ADDF a5_add1_ps
#define V_MULF _mm512_mul_ps
#define V_MINF a5_min_ps
#define V_MAXF a5_max_ps

SC_BIN4(f32, SC_F32, 4, 16, A5_STEP_PS, _mm512_add_ps, _mm512_mul_ps, a5_min_ps, a5_max_ps)
SC_BIN4(f64, SC_F64, 8, 8, A5_STEP_PD, _mm512_add_pd, _mm512_mul_pd, a5_min_pd, a5_max_pd)
SC_BIN4(i32, SC_I32, 4, 16, A5_STEP_SI, _mm512_add_epi32, _mm512_mullo_epi32, _mm512_min_epi32,
	_mm512_max_epi32)
SC_BIN4(u32, SC_U32, 4, 16, A5_STEP_SI, _mm512_add_epi32, _mm512_mullo_epi32, _mm512_min_epu32,
	_mm512_max_epu32)
SC_BIN4(i64, SC_I64, 8, 8, A5_STEP_SI, _mm512_add_epi64, _mm512_mullo_epi64, _mm512_min_epi64,
	_mm512_max_epi64)
SC_BIN4(u64, SC_U64, 8, 8, A5_STEP_SI, _mm512_add_epi64, _mm512_mullo_epi64, _mm512_min_epu64,
	_mm512_max_epu64)
SC_BIN4(i8, SC_I8, 1, 64, A5_STEP_SI, _mm512_add_epi8, a5_mul8, _mm512_min_epi8, _mm512_max_epi8)
SC_BIN4(u8, SC_U8, 1, 64, A5_STEP_SI, _mm512_add_epi8, a5_mul8, _mm512_min_epu8, _mm512_max_epu8)
SC_BIN4(f16, SC_F16, 2, 8, A5_STEP_F16Y, a5y_add1_ps, _mm256_mul_ps, a5y_min_ps, a5y_max_ps)
SC_DEF_16BIT_ACC(f16, 0, V_F16W, V_F16N)
SC_DEF_16BIT_ACC(bf16, 1, V_BF16W, V_BF16N)
SC_BIN(bf16, sum, SC_BF16, SC_OP_SUM, 2, 32, A5_STEP_BF16_EO, a5_add1_ps)
SC_BIN(bf16, prod, SC_BF16, SC_OP_PROD, 2, 32, A5_STEP_BF16_EO, _mm512_mul_ps)
SC_BIN(bf16, min, SC_BF16, SC_OP_MIN, 2, 32, A5_STEP_BF16, a5_min_ps)
SC_BIN(bf16, max, SC_BF16, SC_OP_MAX, 2, 32, A5_STEP_BF16, a5_max_ps)

const struct sc_reduce_ops sc_reduce_ops_avx512 = {
	.name = "avx512",
	.reduce = {
		[SC_F32] = SC_ROW4(f32),
		[SC_F16] = SC_ROW4(f16),
		[SC_BF16] = SC_ROW4(bf16),
		[SC_F64] = SC_ROW4(f64),
		[SC_I32] = SC_ROW4(i32),
		[SC_U32] = SC_ROW4(u32),
		[SC_I64] = SC_ROW4(i64),
		[SC_U64] = SC_ROW4(u64),
		[SC_I8] = SC_ROW4(i8),
		[SC_U8] = SC_ROW4(u8),
	},
	SC_TBL_16BIT(),
};
