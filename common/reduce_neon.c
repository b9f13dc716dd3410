/* NEON (AArch64 Advanced SIMD) kernels. fp16 <-> fp32 conversion is baseline
 * on AArch64 (fcvtl/fcvtn, round to nearest even under the default FPCR).
 * min/max use compare + select, not fmin/fmax: FMIN(-0, +0) is -0 and the
 * reference wants (a < b ? a : b). 64-bit prod has no NEON instruction and
 * is left to the scalar reference (NULL entry, filled by reduce.c). */
#include <arm_neon.h>

#include "reduce_impl.h"

#define NE_STEP(dp, sp, F, sfx)                                                      \
	vst1q_##sfx((void *)(dp), F(vld1q_##sfx((const void *)(dp)), vld1q_##sfx((const void *)(sp))))
#define NE_STEP_F32(dp, sp, F) NE_STEP(dp, sp, F, f32)
#define NE_STEP_F64(dp, sp, F) NE_STEP(dp, sp, F, f64)
#define NE_STEP_S32(dp, sp, F) NE_STEP(dp, sp, F, s32)
#define NE_STEP_U32(dp, sp, F) NE_STEP(dp, sp, F, u32)
#define NE_STEP_S64(dp, sp, F) NE_STEP(dp, sp, F, s64)
#define NE_STEP_U64(dp, sp, F) NE_STEP(dp, sp, F, u64)
#define NE_STEP_S8(dp, sp, F) NE_STEP(dp, sp, F, s8)
#define NE_STEP_U8(dp, sp, F) NE_STEP(dp, sp, F, u8)

/* NaN if a is NaN, else a < b ? a : b (a NaN b fails the compare: b). */
static inline float32x4_t ne_min_f32(float32x4_t a, float32x4_t b)
{
	return vbslq_f32(vceqq_f32(a, a), vbslq_f32(vcltq_f32(a, b), a, b), a);
}

static inline float32x4_t ne_max_f32(float32x4_t a, float32x4_t b)
{
	return vbslq_f32(vceqq_f32(a, a), vbslq_f32(vcgtq_f32(a, b), a, b), a);
}

static inline float64x2_t ne_min_f64(float64x2_t a, float64x2_t b)
{
	return vbslq_f64(vceqq_f64(a, a), vbslq_f64(vcltq_f64(a, b), a, b), a);
}

static inline float64x2_t ne_max_f64(float64x2_t a, float64x2_t b)
{
	return vbslq_f64(vceqq_f64(a, a), vbslq_f64(vcgtq_f64(a, b), a, b), a);
}

static inline int64x2_t ne_min_s64(int64x2_t a, int64x2_t b)
{
	return vbslq_s64(vcltq_s64(a, b), a, b);
}

static inline int64x2_t ne_max_s64(int64x2_t a, int64x2_t b)
{
	return vbslq_s64(vcgtq_s64(a, b), a, b);
}

static inline uint64x2_t ne_min_u64(uint64x2_t a, uint64x2_t b)
{
	return vbslq_u64(vcltq_u64(a, b), a, b);
}

static inline uint64x2_t ne_max_u64(uint64x2_t a, uint64x2_t b)
{
	return vbslq_u64(vcgtq_u64(a, b), a, b);
}

/* ---- 16-bit conversions, 4 lanes ---- */

static inline float32x4_t ne_f16w(uint16x4_t h)
{
	return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

static inline uint16x4_t ne_f16n(float32x4_t f)
{
	return vreinterpret_u16_f16(vcvt_f16_f32(f));
}

static inline float32x4_t ne_bf16w(uint16x4_t h)
{
	return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

static inline uint16x4_t ne_bf16n(float32x4_t f)
{
	uint32x4_t u = vreinterpretq_u32_f32(f);
	uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
	uint32x4_t r = vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), lsb);
	uint32x4_t q = vorrq_u32(u, vdupq_n_u32(0x00400000));

	return vshrn_n_u32(vbslq_u32(vceqq_f32(f, f), r, q), 16);
}

#define V_L 4
#define V_LDF(p) vld1q_f32((const void *)(p))
#define V_STF(p, v) vst1q_f32((void *)(p), (v))
#define V_LD16(p) vld1_u16((const void *)(p))
#define V_ST16(p, h) vst1_u16((void *)(p), (h))
#define V_F16W ne_f16w
#define V_F16N ne_f16n
#define V_BF16W ne_bf16w
#define V_BF16N ne_bf16n
#define V_ADDF vaddq_f32
#define V_MULF vmulq_f32
#define V_MINF ne_min_f32
#define V_MAXF ne_max_f32

SC_BIN4(f32, SC_F32, 4, 4, NE_STEP_F32, vaddq_f32, vmulq_f32, ne_min_f32, ne_max_f32)
SC_BIN4(f64, SC_F64, 8, 2, NE_STEP_F64, vaddq_f64, vmulq_f64, ne_min_f64, ne_max_f64)
SC_BIN4(i32, SC_I32, 4, 4, NE_STEP_S32, vaddq_s32, vmulq_s32, vminq_s32, vmaxq_s32)
SC_BIN4(u32, SC_U32, 4, 4, NE_STEP_U32, vaddq_u32, vmulq_u32, vminq_u32, vmaxq_u32)
SC_BIN(i64, sum, SC_I64, SC_OP_SUM, 8, 2, NE_STEP_S64, vaddq_s64)
SC_BIN(i64, min, SC_I64, SC_OP_MIN, 8, 2, NE_STEP_S64, ne_min_s64)
SC_BIN(i64, max, SC_I64, SC_OP_MAX, 8, 2, NE_STEP_S64, ne_max_s64)
SC_BIN(u64, sum, SC_U64, SC_OP_SUM, 8, 2, NE_STEP_U64, vaddq_u64)
SC_BIN(u64, min, SC_U64, SC_OP_MIN, 8, 2, NE_STEP_U64, ne_min_u64)
SC_BIN(u64, max, SC_U64, SC_OP_MAX, 8, 2, NE_STEP_U64, ne_max_u64)
SC_BIN4(i8, SC_I8, 1, 16, NE_STEP_S8, vaddq_s8, vmulq_s8, vminq_s8, vmaxq_s8)
SC_BIN4(u8, SC_U8, 1, 16, NE_STEP_U8, vaddq_u8, vmulq_u8, vminq_u8, vmaxq_u8)
SC_DEF_16BIT()

const struct sc_reduce_ops sc_reduce_ops_neon = {
	.name = "neon",
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
