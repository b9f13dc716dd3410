/* Reduce dispatch: names, CPU detection, the filled per-ISA tables and the
 * active one, and the convenience wrappers. The kernels themselves live in
 * reduce_scalar.c (reference) and one file per ISA. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "log.h"
#include "reduce.h"
#include "reduce_impl.h"

static const char *const sc_dtype_names[SC_DTYPE_COUNT] = {
	[SC_F32] = "f32", [SC_F16] = "f16", [SC_BF16] = "bf16", [SC_F64] = "f64",
	[SC_I32] = "i32", [SC_U32] = "u32", [SC_I64] = "i64",   [SC_U64] = "u64",
	[SC_I8] = "i8",   [SC_U8] = "u8",
};
static const unsigned char sc_dtype_sizes[SC_DTYPE_COUNT] = {
	[SC_F32] = 4, [SC_F16] = 2, [SC_BF16] = 2, [SC_F64] = 8, [SC_I32] = 4,
	[SC_U32] = 4, [SC_I64] = 8, [SC_U64] = 8,  [SC_I8] = 1,  [SC_U8] = 1,
};
static const char *const sc_op_names[SC_OP_COUNT] = { "sum", "prod", "min", "max" };
static const char *const sc_isa_names[SC_ISA_COUNT] = { "scalar", "sse2", "avx2", "avx512",
							"neon" };

size_t sc_dtype_size(enum sc_dtype t)
{
	return (unsigned)t < SC_DTYPE_COUNT ? sc_dtype_sizes[t] : 0;
}

const char *sc_dtype_name(enum sc_dtype t)
{
	return (unsigned)t < SC_DTYPE_COUNT ? sc_dtype_names[t] : "?";
}

static int sc_name_parse(const char *s, const char *const *names, int count)
{
	if (!s)
		return -EINVAL;
	for (int i = 0; i < count; i++)
		if (!strcasecmp(s, names[i]))
			return i;
	return -EINVAL;
}

int sc_dtype_parse(const char *s, enum sc_dtype *out)
{
	int i = sc_name_parse(s, sc_dtype_names, SC_DTYPE_COUNT);

	if (i < 0)
		return i;
	*out = (enum sc_dtype)i;
	return 0;
}

enum sc_dtype sc_dtype_acc(enum sc_dtype t)
{
	return (t == SC_F16 || t == SC_BF16) ? SC_F32 : t;
}

const char *sc_op_name(enum sc_op op)
{
	return (unsigned)op < SC_OP_COUNT ? sc_op_names[op] : "?";
}

int sc_op_parse(const char *s, enum sc_op *out)
{
	int i = sc_name_parse(s, sc_op_names, SC_OP_COUNT);

	if (i < 0)
		return i;
	*out = (enum sc_op)i;
	return 0;
}

const char *sc_isa_name(enum sc_isa isa)
{
	return (unsigned)isa < SC_ISA_COUNT ? sc_isa_names[isa] : "?";
}

int sc_isa_parse(const char *s, enum sc_isa *out)
{
	int i = sc_name_parse(s, sc_isa_names, SC_ISA_COUNT);

	if (i < 0)
		return i;
	*out = (enum sc_isa)i;
	return 0;
}

/* ---- per-ISA tables ---- */

/* The table an ISA file exports, or NULL if not built in or not supported
 * by this CPU (and OS: __builtin_cpu_supports checks XSAVE state for AVX). */
#if defined(__x86_64__)
/* F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
 * does not know "f16c". F16C uses the AVX register state, which the avx2
 * check below has already required the OS to enable. */
static bool cpu_has_f16c(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

static const struct sc_reduce_ops *sc_reduce_ops_raw(enum sc_isa isa)
{
	switch (isa) {
	case SC_ISA_SCALAR:
		return &sc_reduce_ops_scalar;
#if defined(__x86_64__)
	case SC_ISA_SSE2:
		return __builtin_cpu_supports("sse2") ? &sc_reduce_ops_sse2 : NULL;
	case SC_ISA_AVX2:
		return __builtin_cpu_supports("avx2") && cpu_has_f16c() &&
			       __builtin_cpu_supports("fma")
			       ? &sc_reduce_ops_avx2
			       : NULL;
	case SC_ISA_AVX512:
		return __builtin_cpu_supports("avx512f") &&
			       __builtin_cpu_supports("avx512bw") &&
			       __builtin_cpu_supports("avx512vl") &&
			       __builtin_cpu_supports("avx512dq") && cpu_has_f16c()
			       ? &sc_reduce_ops_avx512
			       : NULL;
#endif
#if defined(__aarch64__)
	case SC_ISA_NEON: /* Advanced SIMD and fp16 conversions are baseline on aarch64. */
		return &sc_reduce_ops_neon;
#endif
	default:
		return NULL;
	}
}

static struct sc_reduce_ops sc_reduce_filled[SC_ISA_COUNT];
static const struct sc_reduce_ops *sc_reduce_avail[SC_ISA_COUNT];
static pthread_once_t sc_reduce_once = PTHREAD_ONCE_INIT;

static void sc_fill(sc_reduce_fn *f, sc_reduce_fn ref)
{
	if (!*f)
		*f = ref;
}

static void sc_reduce_tables_build(void)
{
	const struct sc_reduce_ops *ref = &sc_reduce_ops_scalar;

	for (int isa = 0; isa < SC_ISA_COUNT; isa++) {
		const struct sc_reduce_ops *raw = sc_reduce_ops_raw((enum sc_isa)isa);
		struct sc_reduce_ops *o = &sc_reduce_filled[isa];

		if (!raw)
			continue;
		*o = *raw;
		for (int t = 0; t < SC_DTYPE_COUNT; t++)
			for (int op = 0; op < SC_OP_COUNT; op++)
				sc_fill(&o->reduce[t][op], ref->reduce[t][op]);
		for (int k = 0; k < 2; k++) {
			for (int op = 0; op < SC_OP_COUNT; op++)
				sc_fill(&o->acc16[k][op], ref->acc16[k][op]);
			sc_fill(&o->widen16[k], ref->widen16[k]);
			sc_fill(&o->narrow16[k], ref->narrow16[k]);
		}
		sc_reduce_avail[isa] = o;
	}
}

const struct sc_reduce_ops *sc_reduce_ops_get(enum sc_isa isa)
{
	if ((unsigned)isa >= SC_ISA_COUNT)
		return NULL;
	pthread_once(&sc_reduce_once, sc_reduce_tables_build);
	return sc_reduce_avail[isa];
}

/* ---- active table ---- */

static const struct sc_reduce_ops *sc_reduce_cur;
static enum sc_isa sc_reduce_cur_isa = SC_ISA_SCALAR;

static enum sc_isa sc_reduce_best(void)
{
	static const enum sc_isa order[] = { SC_ISA_AVX512, SC_ISA_AVX2, SC_ISA_NEON,
					     SC_ISA_SSE2 };

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (sc_reduce_ops_get(order[i]))
			return order[i];
	return SC_ISA_SCALAR;
}

static void sc_reduce_set(enum sc_isa isa)
{
	__atomic_store_n(&sc_reduce_cur_isa, isa, __ATOMIC_RELAXED);
	__atomic_store_n(&sc_reduce_cur, sc_reduce_ops_get(isa), __ATOMIC_RELEASE);
}

/* Reads SUMCAST_ISA on every call, so a test (or a tool) can setenv and call
 * again; with the same environment the result is the same. On error the
 * active table is left as it was. */
int sc_reduce_init(void)
{
	const char *env = getenv("SUMCAST_ISA");
	enum sc_isa isa;

	if (env && *env) {
		if (sc_isa_parse(env, &isa)) {
			SC_ERR("SUMCAST_ISA=%s: unknown ISA (scalar, sse2, avx2, avx512, neon)",
			       env);
			return -EINVAL;
		}
		if (!sc_reduce_ops_get(isa)) {
			SC_ERR("SUMCAST_ISA=%s: not supported by this CPU or build", env);
			return -ENOTSUP;
		}
		sc_reduce_set(isa);
		SC_INFO("reduce: using %s kernels (SUMCAST_ISA)", sc_isa_name(isa));
		return 0;
	}
	isa = sc_reduce_best();
	sc_reduce_set(isa);
	SC_DBG("reduce: using %s kernels", sc_isa_name(isa));
	return 0;
}

enum sc_isa sc_reduce_isa(void)
{
	(void)sc_reduce_active();
	return __atomic_load_n(&sc_reduce_cur_isa, __ATOMIC_RELAXED);
}

const struct sc_reduce_ops *sc_reduce_active(void)
{
	const struct sc_reduce_ops *o = __atomic_load_n(&sc_reduce_cur, __ATOMIC_ACQUIRE);

	if (o)
		return o;
	if (sc_reduce_init()) {
		/* A bad SUMCAST_ISA was already logged; never run without kernels. */
		SC_WARN("reduce: ignoring SUMCAST_ISA, using the best supported kernels");
		sc_reduce_set(sc_reduce_best());
	}
	return __atomic_load_n(&sc_reduce_cur, __ATOMIC_ACQUIRE);
}

/* ---- wrappers ---- */

static int sc_dtype_16bit(enum sc_dtype t)
{
	return t == SC_F16 ? 0 : t == SC_BF16 ? 1 : -1;
}

void sc_reduce(enum sc_dtype t, enum sc_op op, void *dst, const void *src, size_t n)
{
	sc_reduce_active()->reduce[t][op](dst, src, n);
}

void sc_reduce_load(enum sc_dtype t, void *acc, const void *src, size_t n)
{
	int k = sc_dtype_16bit(t);

	if (k >= 0)
		sc_reduce_active()->widen16[k](acc, src, n);
	else if (acc != src)
		memmove(acc, src, n * sc_dtype_size(t));
}

void sc_reduce_acc(enum sc_dtype t, enum sc_op op, void *acc, const void *src, size_t n)
{
	int k = sc_dtype_16bit(t);

	if (k >= 0)
		sc_reduce_active()->acc16[k][op](acc, src, n);
	else
		sc_reduce_active()->reduce[t][op](acc, src, n);
}

void sc_reduce_store(enum sc_dtype t, void *dst, const void *acc, size_t n)
{
	int k = sc_dtype_16bit(t);

	if (k >= 0)
		sc_reduce_active()->narrow16[k](dst, acc, n);
	else if (dst != acc)
		memmove(dst, acc, n * sc_dtype_size(t));
}
