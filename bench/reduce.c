/* Reduce kernel benchmark: GB/s of src read, Gelem/s, and the ratio to a
 * streaming roofline measured in the same run on the same buffers.
 *
 * Roofline: the best memory can do for the access pattern, i.e. a loop
 * that reads dst and src and writes dst with plain vector loads/stores (the
 * widest ISA this CPU has, 4 vectors per iteration, one integer add so the
 * loop cannot be elided). For the daemon's acc16 kernels (f32 acc op=
 * widen(16-bit src)) the pattern is "read 4n B acc, read 2n B src, write
 * 4n B acc", and its roofline loop does exactly that (zero-extended src
 * added to the acc vector), so GB/s of 16-bit src is compared with GB/s of
 * 16-bit src.
 *
 * Timing: CLOCK_MONOTONIC; buffers are filled (touched) before timing; each
 * measurement repeats the kernel for at least --time seconds (default 0.2)
 * and at least 3 times (small sizes are timed in batches of >= 1 MiB) and
 * reports the best (fastest) repetition, for the kernels and the roofline
 * alike. Benchmarks report; they never fail on time. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "reduce.h"
#include "clock.h"

enum kernel { KER_REDUCE, KER_ACC16 };
static const char *const kernel_names[] = { "reduce", "acc16" };

/* ---- roofline loops ---- */

typedef void (*roof_fn)(void *d, const void *s, size_t src_bytes);

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void roof_avx512(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;
	size_t i = 0;

	for (; i + 256 <= nb; i += 256)
		for (int k = 0; k < 256; k += 64)
			_mm512_storeu_si512(dp + i + k,
					    _mm512_add_epi32(_mm512_loadu_si512(dp + i + k),
							     _mm512_loadu_si512(sp + i + k)));
	for (; i < nb; i++)
		dp[i] = (char)(dp[i] + sp[i]);
}

/* acc (2 * nb bytes) += zext(src16) */
__attribute__((target("avx512f"))) static void roof_acc_avx512(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;
	size_t i = 0;

	for (; i + 128 <= nb; i += 128)
		for (int k = 0; k < 128; k += 32)
			_mm512_storeu_si512(
				dp + 2 * (i + k),
				_mm512_add_epi32(_mm512_loadu_si512(dp + 2 * (i + k)),
						 _mm512_zextsi256_si512(_mm256_loadu_si256(
							 (const void *)(sp + i + k)))));
}

__attribute__((target("avx2"))) static void roof_avx2(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;
	size_t i = 0;

	for (; i + 128 <= nb; i += 128)
		for (int k = 0; k < 128; k += 32)
			_mm256_storeu_si256((void *)(dp + i + k),
					    _mm256_add_epi32(_mm256_loadu_si256((void *)(dp + i + k)),
							     _mm256_loadu_si256((const void *)(sp + i + k))));
	for (; i < nb; i++)
		dp[i] = (char)(dp[i] + sp[i]);
}

__attribute__((target("avx2"))) static void roof_acc_avx2(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;
	size_t i = 0;

	for (; i + 64 <= nb; i += 64)
		for (int k = 0; k < 64; k += 16)
			_mm256_storeu_si256(
				(void *)(dp + 2 * (i + k)),
				_mm256_add_epi32(_mm256_loadu_si256((void *)(dp + 2 * (i + k))),
						 _mm256_zextsi128_si256(_mm_loadu_si128(
							 (const void *)(sp + i + k)))));
}
#endif

#define ROOF_W 16
#if defined(__aarch64__)
static void roof_vec(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;
	size_t i = 0;

	for (; i + 4 * ROOF_W <= nb; i += 4 * ROOF_W)
		for (int k = 0; k < 4 * ROOF_W; k += ROOF_W)
			vst1q_u32((void *)(dp + i + k),
				  vaddq_u32(vld1q_u32((void *)(dp + i + k)),
					    vld1q_u32((const void *)(sp + i + k))));
	for (; i < nb; i++)
		dp[i] = (char)(dp[i] + sp[i]);
}

static void roof_acc_vec(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;

	for (size_t i = 0; i + 8 <= nb; i += 8)
		vst1q_u32((void *)(dp + 2 * i),
			  vaddq_u32(vld1q_u32((void *)(dp + 2 * i)),
				    vcombine_u32(vld1_u32((const void *)(sp + i)), vdup_n_u32(0))));
}
#elif defined(__x86_64__)
/* SSE2 is the x86-64 baseline. */
static void roof_vec(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;
	size_t i = 0;

	for (; i + 4 * ROOF_W <= nb; i += 4 * ROOF_W)
		for (int k = 0; k < 4 * ROOF_W; k += ROOF_W)
			_mm_storeu_si128((void *)(dp + i + k),
					 _mm_add_epi32(_mm_loadu_si128((void *)(dp + i + k)),
						       _mm_loadu_si128((const void *)(sp + i + k))));
	for (; i < nb; i++)
		dp[i] = (char)(dp[i] + sp[i]);
}

static void roof_acc_vec(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;

	for (size_t i = 0; i + 8 <= nb; i += 8)
		_mm_storeu_si128((void *)(dp + 2 * i),
				 _mm_add_epi32(_mm_loadu_si128((void *)(dp + 2 * i)),
					       _mm_loadl_epi64((const void *)(sp + i))));
}
#else
static void roof_vec(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;

	for (size_t i = 0; i < nb; i++)
		dp[i] = (char)(dp[i] + sp[i]);
}

static void roof_acc_vec(void *d, const void *s, size_t nb)
{
	char *dp = d;
	const char *sp = s;

	for (size_t i = 0; i < nb; i++)
		dp[2 * i] = (char)(dp[2 * i] + sp[i]);
}
#endif

static roof_fn roof, roof_acc;
static const char *roof_name = "vec128";

static void roof_pick(void)
{
	roof = roof_vec;
	roof_acc = roof_acc_vec;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx512f")) {
		roof = roof_avx512;
		roof_acc = roof_acc_avx512;
		roof_name = "avx512";
	} else if (__builtin_cpu_supports("avx2")) {
		roof = roof_avx2;
		roof_acc = roof_acc_avx2;
		roof_name = "avx2";
	}
#endif
}

/* ---- timing ---- */

struct job {
	enum kernel ker;
	sc_reduce_fn fn; /* kernel, or NULL for a roofline */
	roof_fn rfn;
	void *d;
	const void *s;
	size_t n, src_bytes;
};

static double min_time = 0.2;

static void job_run(const struct job *j)
{
	if (j->fn)
		j->fn(j->d, j->s, j->n);
	else
		j->rfn(j->d, j->s, j->src_bytes);
}

/* Best seconds per call. */
static double job_time(const struct job *j)
{
	size_t batch = j->src_bytes >= (1u << 20) ? 1 : (1u << 20) / (j->src_bytes ? j->src_bytes : 1);
	double best = 1e30, start, t0, t1;
	int reps = 0;

	job_run(j); /* warm caches and TLB */
	start = sc_now_s();
	do {
		t0 = sc_now_s();
		for (size_t b = 0; b < batch; b++)
			job_run(j);
		t1 = sc_now_s();
		if ((t1 - t0) / (double)batch < best)
			best = (t1 - t0) / (double)batch;
		reps++;
	} while (reps < 3 || t1 - start < min_time);
	return best;
}

/* ---- data ---- */

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Values that stay normal under repetition: small integers for float sum
 * (no denormals, no overflow in a random walk), 1 for prod. */
static void fill(enum sc_dtype t, enum sc_op op, void *p, size_t n, int is_src)
{
	for (size_t i = 0; i < n; i++) {
		int v = is_src ? (int)(rng() % 5) - 2 : (int)(rng() % 201) - 100;
		float f;

		if (op == SC_OP_PROD && is_src)
			v = 1;
		if (v == 0 && op == SC_OP_SUM && is_src)
			v = 1;
		f = (float)v;
		switch (t) {
		case SC_F32:
			((float *)p)[i] = f;
			break;
		case SC_F64:
			((double *)p)[i] = f;
			break;
		case SC_F16:
			((uint16_t *)p)[i] = sc_f32_to_f16(f);
			break;
		case SC_BF16:
			((uint16_t *)p)[i] = sc_f32_to_bf16(f);
			break;
		default: {
			uint64_t u = (op == SC_OP_PROD && is_src) ? 1 : rng();

			memcpy((char *)p + i * sc_dtype_size(t), &u, sc_dtype_size(t));
			break;
		}
		}
	}
}

/* ---- options and output ---- */

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if ((*end == 'i' || *end == 'B') && end[1] == 'B')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v == 0)
		return -EINVAL;
	*out = v;
	return 0;
}

static void size_str(char *out, size_t len, size_t b)
{
	if (b >= (1u << 30) && b % (1u << 30) == 0)
		snprintf(out, len, "%zuG", b >> 30);
	else if (b >= (1u << 20) && b % (1u << 20) == 0)
		snprintf(out, len, "%zuM", b >> 20);
	else if (b >= 1024 && b % 1024 == 0)
		snprintf(out, len, "%zuK", b >> 10);
	else
		snprintf(out, len, "%zu", b);
}

static int json;

static void row(enum sc_dtype t, enum kernel k, enum sc_op op, const char *isa, size_t bytes,
		size_t n, double sec, double roof_sec)
{
	double gbps = (double)bytes / sec / 1e9, gelems = (double)n / sec / 1e9;
	double rgbps = (double)bytes / roof_sec / 1e9;
	char sz[32];

	if (json) {
		printf("{\"bench\":\"reduce\",\"type\":\"%s\",\"kernel\":\"%s\",\"op\":\"%s\","
		       "\"isa\":\"%s\",\"bytes\":%zu,\"gbps\":%.3f,\"gelems\":%.4f,"
		       "\"roofline_gbps\":%.3f,\"ratio\":%.3f,\"roofline_isa\":\"%s\"}\n",
		       sc_dtype_name(t), kernel_names[k], sc_op_name(op), isa, bytes, gbps, gelems,
		       rgbps, gbps / rgbps, roof_name);
	} else {
		size_str(sz, sizeof(sz), bytes);
		printf("%-5s %-6s %-4s %-7s %7s %9.2f %9.3f %9.2f %6.2f\n", sc_dtype_name(t),
		       kernel_names[k], sc_op_name(op), isa, sz, gbps, gelems, rgbps, gbps / rgbps);
	}
	fflush(stdout);
}

static int parse_list(const char *arg, int (*parse)(const char *, int *), int *out, int max)
{
	char buf[512], *save = NULL, *tok;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max || parse(tok, &out[n]))
			return -EINVAL;
		n++;
	}
	return n;
}

static int p_type(const char *s, int *o)
{
	enum sc_dtype t;
	int rc = sc_dtype_parse(s, &t);

	*o = (int)t;
	return rc;
}

static int p_op(const char *s, int *o)
{
	enum sc_op op;
	int rc = sc_op_parse(s, &op);

	*o = (int)op;
	return rc;
}

static int p_isa(const char *s, int *o)
{
	enum sc_isa isa;
	int rc = sc_isa_parse(s, &isa);

	*o = (int)isa;
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: reduce [--type f32,f16,...] [--op sum,...] [--isa avx2,...]\n"
		"              [--sizes 64K,1M,...] [--quick] [--time SEC] [--json]\n"
		"Sizes are bytes of src (input) per call. Default: all types, op sum, every\n"
		"ISA this CPU has, 64K,1M,4M,64M,256M. f16/bf16 also get an acc16 row (the\n"
		"daemon's f32 accumulate). ratio = GB/s / roofline GB/s, same run and size.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "type", required_argument, NULL, 't' }, { "op", required_argument, NULL, 'o' },
		{ "isa", required_argument, NULL, 'i' },  { "sizes", required_argument, NULL, 's' },
		{ "quick", no_argument, NULL, 'q' },	  { "time", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },	  { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int types[SC_DTYPE_COUNT], ops[SC_OP_COUNT] = { SC_OP_SUM }, isas[SC_ISA_COUNT];
	int ntypes = SC_DTYPE_COUNT, nops = 1, nisas = 0, c;
	size_t sizes[16] = { 64u << 10, 1u << 20, 4u << 20, 64u << 20, 256u << 20 };
	int nsizes = 5, explicit_sizes = 0;
	char *save, *tok, buf[512];

	for (int t = 0; t < SC_DTYPE_COUNT; t++)
		types[t] = t;
	for (int i = 0; i < SC_ISA_COUNT; i++)
		if (sc_reduce_ops_get((enum sc_isa)i))
			isas[nisas++] = i;
	while ((c = getopt_long(argc, argv, "t:o:i:s:qT:jh", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			ntypes = parse_list(optarg, p_type, types, SC_DTYPE_COUNT);
			break;
		case 'o':
			nops = parse_list(optarg, p_op, ops, SC_OP_COUNT);
			break;
		case 'i':
			nisas = parse_list(optarg, p_isa, isas, SC_ISA_COUNT);
			for (int i = 0; i < nisas; i++)
				if (!sc_reduce_ops_get((enum sc_isa)isas[i])) {
					fprintf(stderr, "reduce: ISA %s not available here\n",
						sc_isa_name((enum sc_isa)isas[i]));
					return 2;
				}
			break;
		case 's':
			nsizes = 0;
			explicit_sizes = 1;
			snprintf(buf, sizeof(buf), "%s", optarg);
			save = NULL;
			for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				if (nsizes == 16 || parse_size(tok, &sizes[nsizes++])) {
					fprintf(stderr, "reduce: bad size '%s'\n", tok);
					return 2;
				}
			break;
		case 'q':
			if (!explicit_sizes) {
				sizes[0] = 64u << 10;
				sizes[1] = 1u << 20;
				nsizes = 2;
			}
			min_time = 0.01;
			break;
		case 'T':
			min_time = atof(optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (ntypes <= 0 || nops <= 0 || nisas <= 0) {
			fprintf(stderr, "reduce: bad list '%s'\n", optarg);
			return 2;
		}
	}
	roof_pick();
	if (!json) {
		printf("# reduce kernels: GB/s of src read per call, best of >= 3 reps and >= %.2f s;\n"
		       "# roofline = %s loop with the same access pattern and bytes, same run\n",
		       min_time, roof_name);
		printf("%-5s %-6s %-4s %-7s %7s %9s %9s %9s %6s\n", "type", "kernel", "op", "isa",
		       "size", "GB/s", "Gelem/s", "roofGB/s", "ratio");
	}

	for (int si = 0; si < nsizes; si++) {
		size_t bytes = sizes[si];
		/* dst has room for the f32 accumulator of 2-byte src. */
		char *src = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
		char *dst = aligned_alloc(4096, (2 * bytes + 4095) / 4096 * 4096);

		if (!src || !dst) {
			fprintf(stderr, "reduce: cannot allocate %zu bytes\n", 3 * bytes);
			return 1;
		}
		for (int ti = 0; ti < ntypes; ti++) {
			enum sc_dtype t = (enum sc_dtype)types[ti];
			size_t n = bytes / sc_dtype_size(t);
			int is16 = t == SC_F16 || t == SC_BF16;

			for (int oi = 0; oi < nops; oi++) {
				enum sc_op op = (enum sc_op)ops[oi];

				for (int k = KER_REDUCE; k <= (is16 ? KER_ACC16 : KER_REDUCE); k++) {
					struct job j = { .ker = (enum kernel)k, .d = dst, .s = src,
							 .n = n, .src_bytes = bytes };
					double rsec;

					fill(t, op, src, n, 1);
					if (k == KER_ACC16)
						fill(SC_F32, op, dst, n, 0);
					else
						fill(t, op, dst, n, 0);
					j.rfn = k == KER_ACC16 ? roof_acc : roof;
					rsec = job_time(&j);
					for (int ii = 0; ii < nisas; ii++) {
						const struct sc_reduce_ops *o =
							sc_reduce_ops_get((enum sc_isa)isas[ii]);

						j.rfn = NULL;
						j.fn = k == KER_ACC16 ? o->acc16[t == SC_BF16][op]
								      : o->reduce[t][op];
						row(t, (enum kernel)k, op, o->name, bytes, n, job_time(&j),
						    rsec);
						j.fn = NULL;
					}
				}
			}
		}
		free(src);
		free(dst);
	}
	return 0;
}
