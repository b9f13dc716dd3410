/* CUDA's driver API loaded at run time (cuda.h in this directory). */
#include "cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct sc_cuda cuda;
static const struct sc_cuda *cuda_ok;
static char cuda_why[160];
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

/* Symbol names as libcuda exports them (the _v2 ones are the 64-bit
 * versions cuda.h maps the plain names to). */
#define SYM(field, name) { offsetof(struct sc_cuda, field), name }
static const struct {
	size_t off;
	const char *name;
} cuda_syms[] = {
	SYM(init, "cuInit"),
	SYM(driver_get_version, "cuDriverGetVersion"),
	SYM(get_error_string, "cuGetErrorString"),
	SYM(device_get_count, "cuDeviceGetCount"),
	SYM(device_get, "cuDeviceGet"),
	SYM(device_get_name, "cuDeviceGetName"),
	SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain"),
	SYM(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2"),
	SYM(ctx_get_current, "cuCtxGetCurrent"),
	SYM(ctx_set_current, "cuCtxSetCurrent"),
	SYM(ctx_get_device, "cuCtxGetDevice"),
	SYM(ctx_synchronize, "cuCtxSynchronize"),
	SYM(mem_alloc, "cuMemAlloc_v2"),
	SYM(mem_free, "cuMemFree_v2"),
	SYM(mem_host_alloc, "cuMemHostAlloc"),
	SYM(mem_free_host, "cuMemFreeHost"),
	SYM(memcpy_htod, "cuMemcpyHtoD_v2"),
	SYM(memcpy_dtoh, "cuMemcpyDtoH_v2"),
	SYM(memcpy_htod_async, "cuMemcpyHtoDAsync_v2"),
	SYM(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2"),
	SYM(memset_d8, "cuMemsetD8_v2"),
	SYM(stream_create, "cuStreamCreate"),
	SYM(stream_destroy, "cuStreamDestroy_v2"),
	SYM(stream_synchronize, "cuStreamSynchronize"),
	SYM(module_load_data, "cuModuleLoadData"),
	SYM(module_unload, "cuModuleUnload"),
	SYM(module_get_function, "cuModuleGetFunction"),
	SYM(launch_kernel, "cuLaunchKernel"),
};
#undef SYM

static void cuda_load(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!lib) {
		snprintf(cuda_why, sizeof(cuda_why), "%s", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(cuda_syms) / sizeof(cuda_syms[0]); i++) {
		void *fn = dlsym(lib, cuda_syms[i].name);
		if (!fn) {
			snprintf(cuda_why, sizeof(cuda_why), "libcuda.so.1 lacks %s", cuda_syms[i].name);
			dlclose(lib);
			return;
		}
		memcpy((char *)&cuda + cuda_syms[i].off, &fn, sizeof(fn));
	}
	sc_cu_result r = cuda.init(0);
	if (!r)
		r = cuda.driver_get_version(&cuda.driver_version);
	if (!r)
		r = cuda.device_get_count(&cuda.devices);
	if (r) {
		/* The library stays loaded: its error strings are used above. */
		snprintf(cuda_why, sizeof(cuda_why), "cuInit: %s", sc_cuda_strerror(&cuda, r));
		return;
	}
	cuda_ok = &cuda;
}

const struct sc_cuda *sc_cuda_get(char *why, size_t len)
{
	pthread_once(&cuda_once, cuda_load);
	if (!cuda_ok && why && len)
		snprintf(why, len, "%s", cuda_why);
	return cuda_ok;
}

const char *sc_cuda_strerror(const struct sc_cuda *cu, sc_cu_result r)
{
	static __thread char buf[96];
	const char *s = NULL;

	if (!cu || !cu->get_error_string || cu->get_error_string(r, &s) || !s)
		s = "unknown";
	snprintf(buf, sizeof(buf), "%s (%d)", s, r);
	return buf;
}

void sc_cuda_describe(char *line, size_t len)
{
	char why[160];
	const struct sc_cuda *cu = sc_cuda_get(why, sizeof(why));
	char name[96] = "";
	sc_cu_device d;

	if (!cu) {
		snprintf(line, len, "no CUDA driver (%s)", why);
		return;
	}
	if (cu->devices > 0 && !cu->device_get(&d, 0))
		cu->device_get_name(name, sizeof(name), d);
	snprintf(line, len, "libcuda %d.%d, %d device%s%s%s%s", cu->driver_version / 1000,
		 cu->driver_version % 1000 / 10, cu->devices, cu->devices == 1 ? "" : "s",
		 *name ? " (" : "", name, *name ? (cu->devices > 1 ? ", ...)" : ")") : "");
}
