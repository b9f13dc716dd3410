/* Reduce kernels: dst = op(dst, src), element-wise, for every supported
 * (type, op) pair, plus the 16-bit-into-f32 accumulate pair the daemon uses.
 *
 * One file per ISA (reduce_scalar.c is the reference; reduce_sse2.c,
 * reduce_avx2.c, reduce_avx512.c, reduce_neon.c), each exporting a
 * struct sc_reduce_ops. sc_reduce_init() picks the best variant the CPU
 * supports, unless SUMCAST_ISA=scalar|sse2|avx2|avx512|neon forces one.
 *
 * Semantics (every variant equals the scalar reference bit for bit):
 * - Element-wise, no reassociation, no FMA, no FTZ/DAZ: float results are
 *   identical across ISAs. NaN payloads may differ (any NaN equals any NaN).
 * - min/max: NaN if either input is NaN, else (a < b ? a : b) / (a > b ? a : b)
 *   with a = dst, b = src (so min(-0, +0) = +0, as x86 minps does).
 * - Integers wrap (two's complement) on sum and prod.
 * - f16/bf16 dst op= src: computed in f32, rounded once to nearest even.
 * - Rounding f32 -> f16/bf16: round to nearest even; Inf stays Inf, NaN stays
 *   NaN (quiet), overflow goes to Inf.
 * - Pointers need no alignment; n may be 0. */
#ifndef SUMCAST_REDUCE_H
#define SUMCAST_REDUCE_H

#include <stddef.h>
#include <stdint.h>

enum sc_dtype {
	SC_F32 = 0,
	SC_F16,
	SC_BF16,
	SC_F64,
	SC_I32,
	SC_U32,
	SC_I64,
	SC_U64,
	SC_I8,
	SC_U8,
	SC_DTYPE_COUNT
};

enum sc_op { SC_OP_SUM = 0, SC_OP_PROD, SC_OP_MIN, SC_OP_MAX, SC_OP_COUNT };

enum sc_isa { SC_ISA_SCALAR = 0, SC_ISA_SSE2, SC_ISA_AVX2, SC_ISA_AVX512, SC_ISA_NEON, SC_ISA_COUNT };

typedef void (*sc_reduce_fn)(void *dst, const void *src, size_t n);

/* One table per ISA. A NULL entry means "use the scalar one" (sc_reduce_init
 * fills the holes, so the active table never has NULLs). */
struct sc_reduce_ops {
	const char *name;
	/* dst[i] = op(dst[i], src[i]), both of type t. */
	sc_reduce_fn reduce[SC_DTYPE_COUNT][SC_OP_COUNT];
	/* 16-bit accumulate pair, index 0 = f16, 1 = bf16:
	 * acc (float *) op= widen(src16[i]). */
	sc_reduce_fn acc16[2][SC_OP_COUNT];
	/* acc (float *) = widen(src16[i]): the first contribution. */
	sc_reduce_fn widen16[2];
	/* dst16[i] = round(acc[i]); dst16 may equal acc (in place, ascending). */
	sc_reduce_fn narrow16[2];
};

size_t sc_dtype_size(enum sc_dtype t);
const char *sc_dtype_name(enum sc_dtype t);           /* "f32", "bf16", ... */
int sc_dtype_parse(const char *s, enum sc_dtype *out); /* 0 or -EINVAL */
/* Type the daemon accumulates in: f32 for f16/bf16, t otherwise. */
enum sc_dtype sc_dtype_acc(enum sc_dtype t);
const char *sc_op_name(enum sc_op op); /* "sum", "prod", "min", "max" */
int sc_op_parse(const char *s, enum sc_op *out);
const char *sc_isa_name(enum sc_isa isa); /* "scalar", "sse2", "avx2", "avx512", "neon" */
int sc_isa_parse(const char *s, enum sc_isa *out);

/* Table for one ISA, NULL if not built in or not supported by this CPU.
 * Holes are filled with the scalar functions. Thread-safe after the first call. */
const struct sc_reduce_ops *sc_reduce_ops_get(enum sc_isa isa);
/* Picks the active ISA: SUMCAST_ISA if set (returns -ENOTSUP if that ISA is
 * unavailable here, -EINVAL if unknown), else the best supported. Idempotent
 * unless force is used. */
int sc_reduce_init(void);
enum sc_isa sc_reduce_isa(void);
const struct sc_reduce_ops *sc_reduce_active(void); /* calls sc_reduce_init if needed */

/* Convenience wrappers on the active table. */
void sc_reduce(enum sc_dtype t, enum sc_op op, void *dst, const void *src, size_t n);
/* Daemon pair. For f16/bf16: acc is float[n]; for other types these are
 * plain copy (load) / reduce (acc) / no-op (store) on type t. */
void sc_reduce_load(enum sc_dtype t, void *acc, const void *src, size_t n);
void sc_reduce_acc(enum sc_dtype t, enum sc_op op, void *acc, const void *src, size_t n);
void sc_reduce_store(enum sc_dtype t, void *dst, const void *acc, size_t n);

/* Scalar f16/bf16 conversions (reference, also used by tests and tools). */
float sc_f16_to_f32(uint16_t h);
uint16_t sc_f32_to_f16(float f);
float sc_bf16_to_f32(uint16_t h);
uint16_t sc_f32_to_bf16(float f);

#endif
