/* The ring part's sum with GPU buffers: a CUDA kernel against staging
 * through pinned host memory (docs/plugin.md "GPU memory").
 *
 * In a ring step a node adds a peer's chunk to its own data. With GPU
 * buffers the own data is in device memory and the CPU cannot add to it.
 * Three ways, each timed per chunk size (f32, median of --reps, after one
 * warm-up), each result checked element by element:
 *   kernel  the chunk already in device memory (a fabric that writes GPU
 *           memory, FI_HMEM): one kernel, dst += chunk;
 *   h2d+k   the chunk in pinned host memory (the fabric wrote it there):
 *           copy it to the device, then the kernel;
 *   stage   the chunk in pinned host memory: copy dst to the host, add on
 *           the CPU (Sumcast's reduce kernels), copy dst back.
 * GB/s is the chunk's bytes over the time; cpu_us is the CPU's own add in
 * stage. The kernel (bench/gpusum.cu) is PTX beside this program, built
 * where the CUDA toolkit is; CUDA itself is loaded at run time
 * (common/cuda.h). First it says, for shm and tcp, whether libfabric
 * registers device memory (fabric_hmem_cuda_probe). Without a GPU it says
 * why and exits 0: a benchmark never fails on what the host lacks, only on
 * a wrong sum (exit 1).
 *
 *   gpusum [--min-bytes 64K] [--max-bytes 64M] [--reps 20] [--ptx FILE] */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "cuda.h"
#include "fabric.h"
#include "reduce.h"

#define MAX_REPS 1000

struct gpu {
	const struct sc_cuda *cu;
	sc_cu_stream stream;
	sc_cu_function sum; /* NULL: no PTX */
	sc_cu_ptr dst, chunk;
	float *h_dst, *h_chunk, *expect;
};

static int cu_check(const struct gpu *g, sc_cu_result r, const char *what)
{
	if (r)
		fprintf(stderr, "gpusum: %s: %s\n", what, sc_cuda_strerror(g->cu, r));
	return r ? -1 : 0;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < (64 << 20) &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
		if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else {
			buf[n] = 0;
		}
	}
	fclose(f);
	return buf;
}

/* gpusum.ptx beside this program. */
static void ptx_default(char *path, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", path, len - 16);

	if (n <= 0) {
		snprintf(path, len, "gpusum.ptx");
		return;
	}
	path[n] = 0;
	char *slash = strrchr(path, '/');
	snprintf(slash ? slash + 1 : path, 16, "gpusum.ptx");
}

static void sum_launch_args(unsigned long long n, unsigned *grid)
{
	unsigned long long blocks = (n / 4 + 255) / 256;

	*grid = blocks < 1 ? 1 : blocks > 4096 ? 4096 : (unsigned)blocks;
}

/* dst = 1..n pattern, chunk = small integers: every f32 sum is exact. */
static int fill(struct gpu *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		g->h_dst[i] = (float)(i % 1024);
		g->h_chunk[i] = (float)((i * 7) % 512);
		g->expect[i] = g->h_dst[i] + g->h_chunk[i];
	}
	if (cu_check(g, g->cu->memcpy_htod(g->dst, g->h_dst, n * 4), "cuMemcpyHtoD") ||
	    cu_check(g, g->cu->memcpy_htod(g->chunk, g->h_chunk, n * 4), "cuMemcpyHtoD"))
		return -1;
	return 0;
}

/* The device's dst against the expected sum: 0, or 1 with the first wrong element. */
static int verify(struct gpu *g, size_t n, const char *mode, size_t bytes)
{
	if (cu_check(g, g->cu->memcpy_dtoh(g->h_dst, g->dst, n * 4), "cuMemcpyDtoH"))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (g->h_dst[i] != g->expect[i]) {
			fprintf(stderr, "gpusum: WRONG %s %zu B: [%zu] = %g, expected %g\n", mode, bytes, i,
				(double)g->h_dst[i], (double)g->expect[i]);
			return 1;
		}
	return 0;
}

enum mode { M_KERNEL, M_H2D_KERNEL, M_STAGE, M_COUNT };
static const char *const mode_names[] = { "kernel", "h2d+k", "stage" };

/* One sum of n floats the mode's way, synchronised; the CPU's own add in *cpu_ns. */
static int one_sum(struct gpu *g, enum mode m, size_t n, uint64_t *cpu_ns)
{
	const struct sc_cuda *cu = g->cu;
	unsigned long long nn = n;
	sc_cu_ptr src = g->chunk;
	void *args[] = { &g->dst, &src, &nn };
	unsigned grid;

	*cpu_ns = 0;
	sum_launch_args(nn, &grid);
	switch (m) {
	case M_H2D_KERNEL:
		if (cu_check(g, cu->memcpy_htod_async(g->chunk, g->h_chunk, n * 4, g->stream), "HtoDAsync"))
			return -1;
		/* fall through */
	case M_KERNEL:
		if (cu_check(g, cu->launch_kernel(g->sum, grid, 1, 1, 256, 1, 1, 0, g->stream, args, NULL),
			     "cuLaunchKernel"))
			return -1;
		break;
	case M_STAGE: {
		if (cu_check(g, cu->memcpy_dtoh_async(g->h_dst, g->dst, n * 4, g->stream), "DtoHAsync") ||
		    cu_check(g, cu->stream_synchronize(g->stream), "cuStreamSynchronize"))
			return -1;
		uint64_t t0 = sc_now_ns();
		sc_reduce(SC_F32, SC_OP_SUM, g->h_dst, g->h_chunk, n);
		*cpu_ns = sc_now_ns() - t0;
		if (cu_check(g, cu->memcpy_htod_async(g->dst, g->h_dst, n * 4, g->stream), "HtoDAsync"))
			return -1;
		break;
	}
	default:
		return -1;
	}
	return cu_check(g, cu->stream_synchronize(g->stream), "cuStreamSynchronize");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Times one mode at one size: median of reps, each rep on fresh data (the
 * sum is checked after the first). 0, 1 wrong sum, -1 CUDA error. */
static int time_mode(struct gpu *g, enum mode m, size_t bytes, int reps)
{
	size_t n = bytes / 4;
	uint64_t t[MAX_REPS], cpu[MAX_REPS], c;
	int rc;

	for (int r = -1; r < reps; r++) {
		if (fill(g, n) || cu_check(g, g->cu->ctx_synchronize(), "cuCtxSynchronize"))
			return -1;
		uint64_t t0 = sc_now_ns();
		if (one_sum(g, m, n, &c))
			return -1;
		uint64_t dt = sc_now_ns() - t0;
		if (r < 0) { /* the warm-up's result is checked */
			rc = verify(g, n, mode_names[m], bytes);
			if (rc)
				return rc;
			continue;
		}
		t[r] = dt;
		cpu[r] = c;
	}
	qsort(t, (size_t)reps, sizeof(t[0]), cmp_u64);
	qsort(cpu, (size_t)reps, sizeof(cpu[0]), cmp_u64);
	double us = (double)t[reps / 2] / 1e3;
	printf("%10zu  %-7s %10.1f %9.2f %9.1f\n", bytes, mode_names[m], us, (double)bytes / us / 1e3,
	       (double)cpu[reps / 2] / 1e3);
	return 0;
}

static int gpu_open(struct gpu *g, const char *ptx_path, size_t max_bytes)
{
	const struct sc_cuda *cu = g->cu;
	sc_cu_device dev;
	sc_cu_context ctx;
	sc_cu_module mod;

	if (cu_check(g, cu->device_get(&dev, 0), "cuDeviceGet") ||
	    cu_check(g, cu->primary_ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
	    cu_check(g, cu->ctx_set_current(ctx), "cuCtxSetCurrent") ||
	    cu_check(g, cu->stream_create(&g->stream, 1 /* non-blocking */), "cuStreamCreate") ||
	    cu_check(g, cu->mem_alloc(&g->dst, max_bytes), "cuMemAlloc") ||
	    cu_check(g, cu->mem_alloc(&g->chunk, max_bytes), "cuMemAlloc") ||
	    cu_check(g, cu->mem_host_alloc((void **)&g->h_dst, max_bytes, 0), "cuMemHostAlloc") ||
	    cu_check(g, cu->mem_host_alloc((void **)&g->h_chunk, max_bytes, 0), "cuMemHostAlloc"))
		return -1;
	g->expect = malloc(max_bytes);
	if (!g->expect)
		return -1;
	char *ptx = read_file(ptx_path);
	if (!ptx) {
		printf("# no kernel: %s: %s (built without the CUDA toolkit?): stage only\n", ptx_path,
		       strerror(errno ? errno : ENOENT));
		return 0;
	}
	sc_cu_result r = cu->module_load_data(&mod, ptx);
	free(ptx);
	if (cu_check(g, r, "cuModuleLoadData") ||
	    cu_check(g, cu->module_get_function(&g->sum, mod, "sc_sum_f32"), "cuModuleGetFunction"))
		return -1;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: gpusum [--min-bytes 64K] [--max-bytes 64M] [--reps 20] [--ptx FILE]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "min-bytes", required_argument, NULL, 'b' }, { "max-bytes", required_argument, NULL, 'e' },
		{ "reps", required_argument, NULL, 'r' },      { "ptx", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },            { NULL, 0, NULL, 0 },
	};
	uint64_t lo = 64 << 10, hi = 64 << 20;
	long reps = 20;
	char ptx[PATH_MAX], why[200], line[300];
	struct gpu g = { 0 };
	int c, rc = 0;

	ptx_default(ptx, sizeof(ptx));
	while ((c = getopt_long(argc, argv, "b:e:r:p:h", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'b':
		case 'e':
			if (cfg_parse_size(optarg, c == 'b' ? &lo : &hi)) {
				fprintf(stderr, "gpusum: --%s %s: not a size\n", c == 'b' ? "min-bytes" : "max-bytes",
					optarg);
				return 2;
			}
			break;
		case 'r':
			reps = strtol(optarg, &end, 10);
			if (*end || reps < 1 || reps > MAX_REPS) {
				fprintf(stderr, "gpusum: --reps %s: 1..%d\n", optarg, MAX_REPS);
				return 2;
			}
			break;
		case 'p':
			snprintf(ptx, sizeof(ptx), "%s", optarg);
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (lo < 1024 || hi < lo || hi > (1ull << 32) || lo % 16 || hi % 16) {
		fprintf(stderr, "gpusum: sizes 1K..4G, multiples of 16, min <= max\n");
		return 2;
	}
	if (sc_reduce_init())
		return 2;
	sc_cuda_describe(line, sizeof(line));
	printf("# %s; CPU adds with %s\n", line, sc_isa_name(sc_reduce_isa()));
	g.cu = sc_cuda_get(why, sizeof(why));
	if (!g.cu || !g.cu->devices) {
		printf("# no GPU here: nothing to measure\n");
		return 0;
	}
	if (gpu_open(&g, ptx, hi))
		return 2;
	/* With a current context, what each provider does with device memory
	 * (the plugin says the same once, for its own provider). */
	for (int i = 0; i < 2; i++) {
		const char *prov = i ? "tcp;ofi_rxm" : "shm";
		fabric_hmem_cuda_probe(prov, line, sizeof(line));
		printf("# %s: %s\n", prov, line);
	}
	printf("%10s  %-7s %10s %9s %9s\n", "bytes", "mode", "us", "GB/s", "cpu_us");
	for (uint64_t b = lo; b <= hi && !rc; b *= 4)
		for (int m = g.sum ? 0 : M_STAGE; m < M_COUNT && !rc; m++)
			rc = time_mode(&g, (enum mode)m, b, (int)reps);
	return rc < 0 ? 2 : rc;
}
