/* Private to the reduce kernels: the per-ISA tables and the loop templates
 * that every ISA file instantiates.
 *
 * An ISA file defines a handful of primitives on its vector types, then
 * instantiates the templates below. Every kernel is the same loop: four
 * vectors per iteration, then one vector at a time, then the scalar
 * reference for the last few elements (so tails are the reference by
 * construction). Loads and stores are unaligned. Vectors are processed in
 * ascending order, one load-op-store step after the other, which is what
 * makes the in-place narrow16 (dst16 == acc) safe: the 16-bit store of a
 * step only covers bytes whose floats have already been loaded.
 *
 * Primitives an ISA file provides for the 16-bit family (SC_DEF_16BIT):
 *   V_LDF(p), V_STF(p, v)        load/store V_L floats (unaligned)
 *   V_LD16(p), V_ST16(p, h)      load/store V_L 16-bit values
 *   V_F16W(h), V_F16N(v)         f16 <-> f32 (round to nearest even)
 *   V_BF16W(h), V_BF16N(v)       bf16 <-> f32 (round to nearest even)
 *   V_ADDF, V_MULF, V_MINF, V_MAXF  float ops with the semantics of reduce.h
 *   V_L                          floats per vector */
#ifndef SUMCAST_REDUCE_IMPL_H
#define SUMCAST_REDUCE_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce.h"

extern const struct sc_reduce_ops sc_reduce_ops_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const struct sc_reduce_ops sc_reduce_ops_sse2;
extern const struct sc_reduce_ops sc_reduce_ops_avx2;
extern const struct sc_reduce_ops sc_reduce_ops_avx512;
#endif
#if defined(__aarch64__)
extern const struct sc_reduce_ops sc_reduce_ops_neon;
#endif

/* Reference functions used for tails. */
#define SC_TAIL_RED(t, op) sc_reduce_ops_scalar.reduce[t][op]
#define SC_TAIL_ACC(k, op) sc_reduce_ops_scalar.acc16[k][op]
#define SC_TAIL_WIDEN(k) sc_reduce_ops_scalar.widen16[k]
#define SC_TAIL_NARROW(k) sc_reduce_ops_scalar.narrow16[k]

/* One kernel: dst has DSZ-byte elements, src SSZ-byte ones, STEP(dp, sp, ...)
 * processes L elements starting at byte pointers dp/sp. */
#define SC_LOOP(fname, DSZ, SSZ, L, TAIL, STEP, ...)                                 \
	static void fname(void *dst, const void *src, size_t n)                      \
	{                                                                            \
		char *d_ = dst;                                                      \
		const char *s_ = src;                                                \
		size_t i_ = 0;                                                       \
		for (; i_ + 4 * (size_t)(L) <= n; i_ += 4 * (size_t)(L)) {           \
			STEP(d_ + (i_ + 0 * (L)) * (DSZ), s_ + (i_ + 0 * (L)) * (SSZ), __VA_ARGS__); \
			STEP(d_ + (i_ + 1 * (L)) * (DSZ), s_ + (i_ + 1 * (L)) * (SSZ), __VA_ARGS__); \
			STEP(d_ + (i_ + 2 * (L)) * (DSZ), s_ + (i_ + 2 * (L)) * (SSZ), __VA_ARGS__); \
			STEP(d_ + (i_ + 3 * (L)) * (DSZ), s_ + (i_ + 3 * (L)) * (SSZ), __VA_ARGS__); \
		}                                                                    \
		for (; i_ + (size_t)(L) <= n; i_ += (L))                             \
			STEP(d_ + i_ * (DSZ), s_ + i_ * (SSZ), __VA_ARGS__);         \
		if (i_ < n)                                                          \
			TAIL(d_ + i_ * (DSZ), s_ + i_ * (SSZ), n - i_);              \
	}

/* Same-type binary kernel: STEP(dp, sp, OPF) does dst = OPF(dst, src). */
#define SC_BIN(tname, opname, T, OP, SZ, L, STEP, OPF)                               \
	SC_LOOP(k_##tname##_##opname, SZ, SZ, L, SC_TAIL_RED(T, OP), STEP, OPF)

/* All four ops of a type. */
#define SC_BIN4(tname, T, SZ, L, STEP, SUMF, PRODF, MINF, MAXF)                      \
	SC_BIN(tname, sum, T, SC_OP_SUM, SZ, L, STEP, SUMF)                          \
	SC_BIN(tname, prod, T, SC_OP_PROD, SZ, L, STEP, PRODF)                       \
	SC_BIN(tname, min, T, SC_OP_MIN, SZ, L, STEP, MINF)                          \
	SC_BIN(tname, max, T, SC_OP_MAX, SZ, L, STEP, MAXF)

#define SC_ROW4(tname) { k_##tname##_sum, k_##tname##_prod, k_##tname##_min, k_##tname##_max }

/* 16-bit family steps, written with the V_* primitives of the ISA file.
 * W/N select the widen/narrow pair (V_F16W/V_F16N or V_BF16W/V_BF16N). */
#define SC_STEP16_RED(dp, sp, W, N, F) V_ST16(dp, N(F(W(V_LD16(dp)), W(V_LD16(sp)))))
#define SC_STEP16_ACC(dp, sp, W, N, F) V_STF(dp, F(V_LDF(dp), W(V_LD16(sp))))
#define SC_STEP16_WIDEN(dp, sp, W, N, F) V_STF(dp, W(V_LD16(sp)))
#define SC_STEP16_NARROW(dp, sp, W, N, F) V_ST16(dp, N(V_LDF(sp)))

/* f16/bf16 dst op= src: widen both, op in f32, round once. */
#define SC_DEF_16BIT_RED(tname, T, W, N)                                             \
	SC_LOOP(k_##tname##_sum, 2, 2, V_L, SC_TAIL_RED(T, SC_OP_SUM),               \
		SC_STEP16_RED, W, N, V_ADDF)                                         \
	SC_LOOP(k_##tname##_prod, 2, 2, V_L, SC_TAIL_RED(T, SC_OP_PROD),             \
		SC_STEP16_RED, W, N, V_MULF)                                         \
	SC_LOOP(k_##tname##_min, 2, 2, V_L, SC_TAIL_RED(T, SC_OP_MIN),               \
		SC_STEP16_RED, W, N, V_MINF)                                         \
	SC_LOOP(k_##tname##_max, 2, 2, V_L, SC_TAIL_RED(T, SC_OP_MAX),               \
		SC_STEP16_RED, W, N, V_MAXF)

/* The daemon pair: acc16, widen16, narrow16. */
#define SC_DEF_16BIT_ACC(tname, K, W, N)                                             \
	SC_LOOP(a_##tname##_sum, 4, 2, V_L, SC_TAIL_ACC(K, SC_OP_SUM),               \
		SC_STEP16_ACC, W, N, V_ADDF)                                         \
	SC_LOOP(a_##tname##_prod, 4, 2, V_L, SC_TAIL_ACC(K, SC_OP_PROD),             \
		SC_STEP16_ACC, W, N, V_MULF)                                         \
	SC_LOOP(a_##tname##_min, 4, 2, V_L, SC_TAIL_ACC(K, SC_OP_MIN),               \
		SC_STEP16_ACC, W, N, V_MINF)                                         \
	SC_LOOP(a_##tname##_max, 4, 2, V_L, SC_TAIL_ACC(K, SC_OP_MAX),               \
		SC_STEP16_ACC, W, N, V_MAXF)                                         \
	SC_LOOP(w_##tname, 4, 2, V_L, SC_TAIL_WIDEN(K), SC_STEP16_WIDEN, W, N, 0)   \
	SC_LOOP(n_##tname, 2, 4, V_L, SC_TAIL_NARROW(K), SC_STEP16_NARROW, W, N, 0)

/* Defines the 20 kernels of f16 and bf16 (reduce, acc16, widen16, narrow16). */
#define SC_DEF_16BIT()                                                               \
	SC_DEF_16BIT_RED(f16, SC_F16, V_F16W, V_F16N)                                \
	SC_DEF_16BIT_RED(bf16, SC_BF16, V_BF16W, V_BF16N)                            \
	SC_DEF_16BIT_ACC(f16, 0, V_F16W, V_F16N)                                     \
	SC_DEF_16BIT_ACC(bf16, 1, V_BF16W, V_BF16N)

/* Designated initializers for the acc16/widen16/narrow16 members; the
 * reduce rows are SC_ROW4(f16) and SC_ROW4(bf16). */
#define SC_TBL_16BIT()                                                               \
	.acc16 = { { a_f16_sum, a_f16_prod, a_f16_min, a_f16_max },                  \
		   { a_bf16_sum, a_bf16_prod, a_bf16_min, a_bf16_max } },            \
	.widen16 = { w_f16, w_bf16 }, .narrow16 = { n_f16, n_bf16 }

#endif
