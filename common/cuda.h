/* CUDA's driver API, loaded at run time (dlopen of libcuda.so.1), so that
 * one build of the plugin and the tools runs on hosts with and without
 * CUDA. Only what Sumcast calls is resolved; the types are the driver
 * API's own in width (cuda.h is not needed to build). On a host without
 * the driver every entry point is NULL and sc_cuda_get says why.
 *
 * Users: the GPU memory probe (fabric_hmem.c: can the provider register
 * device memory?) and bench/gpusum (the ring part's sum on the GPU against
 * staging through host memory). docs/plugin.md "GPU memory". */
#ifndef SUMCAST_CUDA_H
#define SUMCAST_CUDA_H

#include <stdbool.h>
#include <stddef.h>

typedef int sc_cu_result; /* CUresult: 0 is CUDA_SUCCESS */
typedef int sc_cu_device;
typedef unsigned long long sc_cu_ptr; /* CUdeviceptr */
typedef void *sc_cu_context, *sc_cu_stream, *sc_cu_module, *sc_cu_function, *sc_cu_event;

#define SC_CU_NO_CONTEXT 201 /* CUDA_ERROR_INVALID_CONTEXT */

struct sc_cuda {
	int driver_version; /* e.g. 13000 for 13.0 */
	int devices;
	sc_cu_result (*init)(unsigned flags);
	sc_cu_result (*driver_get_version)(int *v);
	sc_cu_result (*get_error_string)(sc_cu_result r, const char **s);
	sc_cu_result (*device_get_count)(int *n);
	sc_cu_result (*device_get)(sc_cu_device *d, int ordinal);
	sc_cu_result (*device_get_name)(char *name, int len, sc_cu_device d);
	sc_cu_result (*primary_ctx_retain)(sc_cu_context *c, sc_cu_device d);
	sc_cu_result (*primary_ctx_release)(sc_cu_device d);
	sc_cu_result (*ctx_get_current)(sc_cu_context *c);
	sc_cu_result (*ctx_set_current)(sc_cu_context c);
	sc_cu_result (*ctx_get_device)(sc_cu_device *d);
	sc_cu_result (*ctx_synchronize)(void);
	sc_cu_result (*mem_alloc)(sc_cu_ptr *p, size_t len);
	sc_cu_result (*mem_free)(sc_cu_ptr p);
	sc_cu_result (*mem_host_alloc)(void **p, size_t len, unsigned flags);
	sc_cu_result (*mem_free_host)(void *p);
	sc_cu_result (*memcpy_htod)(sc_cu_ptr dst, const void *src, size_t len);
	sc_cu_result (*memcpy_dtoh)(void *dst, sc_cu_ptr src, size_t len);
	sc_cu_result (*memcpy_htod_async)(sc_cu_ptr dst, const void *src, size_t len, sc_cu_stream s);
	sc_cu_result (*memcpy_dtoh_async)(void *dst, sc_cu_ptr src, size_t len, sc_cu_stream s);
	sc_cu_result (*memset_d8)(sc_cu_ptr dst, unsigned char v, size_t len);
	sc_cu_result (*stream_create)(sc_cu_stream *s, unsigned flags);
	sc_cu_result (*stream_destroy)(sc_cu_stream s);
	sc_cu_result (*stream_synchronize)(sc_cu_stream s);
	sc_cu_result (*module_load_data)(sc_cu_module *m, const void *image);
	sc_cu_result (*module_unload)(sc_cu_module m);
	sc_cu_result (*module_get_function)(sc_cu_function *f, sc_cu_module m, const char *name);
	sc_cu_result (*launch_kernel)(sc_cu_function f, unsigned gx, unsigned gy, unsigned gz,
				      unsigned bx, unsigned by, unsigned bz, unsigned shared,
				      sc_cu_stream s, void **params, void **extra);
};

/* The driver API, loaded and initialised once (thread-safe); NULL when
 * there is none, with why (e.g. "libcuda.so.1: cannot open shared object
 * file", "cuInit: no CUDA-capable device is detected") in why. */
const struct sc_cuda *sc_cuda_get(char *why, size_t len);

/* "name (code)" of a driver result, for messages. */
const char *sc_cuda_strerror(const struct sc_cuda *cu, sc_cu_result r);

/* One line of what was found: "libcuda 13.0, 1 device (NVIDIA H100 80GB
 * HBM3)" or why there is none. */
void sc_cuda_describe(char *line, size_t len);

#endif
