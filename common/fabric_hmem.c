/* Can the provider take GPU memory? (fabric.h, fabric_hmem_cuda_probe)
 *
 * libfabric takes device memory where a provider was built with the
 * device's library and reports FI_HMEM: a registration names the memory's
 * interface (FI_HMEM_CUDA) and device. A provider can report FI_HMEM and
 * still lack CUDA (Debian 12's libfabric 1.17 is built without it), so
 * only a registration of real device memory answers: the probe asks for
 * FI_HMEM, opens a domain of its own, allocates 64 KiB in the current CUDA
 * context and registers it. It never creates a context: without a current
 * one (no CUDA user in this thread) it says so and answers no. */
#include "fabric.h"

#include <rdma/fi_errno.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"

#define PROBE_BYTES (64u << 10)

/* Registers PROBE_BYTES of device memory on a domain of the provider's
 * FI_HMEM info. 0 or a negative fi_errno; what failed in what. */
static int probe_register(struct fi_info *info, const struct sc_cuda *cu, const char **what)
{
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_mr *mr = NULL;
	sc_cu_device dev = 0;
	sc_cu_ptr mem = 0;
	int rc;

	*what = "fi_fabric";
	rc = fi_fabric(info->fabric_attr, &fab, NULL);
	if (!rc) {
		*what = "fi_domain";
		rc = fi_domain(fab, info, &dom, NULL);
	}
	if (!rc && (cu->ctx_get_device(&dev) || cu->mem_alloc(&mem, PROBE_BYTES))) {
		*what = "cuMemAlloc";
		rc = -FI_ENOMEM;
	}
	if (!rc) {
		struct iovec iov = { .iov_base = (void *)(uintptr_t)mem, .iov_len = PROBE_BYTES };
		struct fi_mr_attr attr = {
			.mr_iov = &iov,
			.iov_count = 1,
			.access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
			.requested_key = 0x5c0da,
			.iface = FI_HMEM_CUDA,
			.device.cuda = dev,
		};
		*what = "fi_mr_regattr(FI_HMEM_CUDA)";
		rc = fi_mr_regattr(dom, &attr, 0, &mr);
	}
	if (mr)
		fi_close(&mr->fid);
	if (mem)
		cu->mem_free(mem);
	if (dom)
		fi_close(&dom->fid);
	if (fab)
		fi_close(&fab->fid);
	return rc;
}

int fabric_hmem_cuda_probe(const char *provider, char *line, size_t len)
{
	char found[200];
	const struct sc_cuda *cu = sc_cuda_get(NULL, 0);
	struct fabric_params p = { .provider = provider };
	struct fi_info *hints, *info = NULL;
	sc_cu_context ctx = NULL;
	const char *what;
	int rc;

	sc_cuda_describe(found, sizeof(found));
	if (!cu || !cu->devices) {
		snprintf(line, len, "%s", found);
		return 0;
	}
	if (cu->ctx_get_current(&ctx) || !ctx) {
		snprintf(line, len, "%s; no current CUDA context: %s not probed", found, provider);
		return 0;
	}
	hints = fabric_hints_make(&p, FI_TAGGED | FI_MSG | FI_HMEM);
	if (!hints) {
		snprintf(line, len, "%s; out of memory", found);
		return 0;
	}
	hints->domain_attr->mr_mode |= FI_MR_HMEM;
	rc = fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (rc) {
		snprintf(line, len, "%s; %s offers no FI_HMEM (%s)", found, provider, fi_strerror(-rc));
		return 0;
	}
	rc = probe_register(info, cu, &what);
	fi_freeinfo(info);
	if (rc) {
		snprintf(line, len, "%s; %s reports FI_HMEM but %s failed: %s", found, provider, what,
			 fi_strerror(-rc));
		return 0;
	}
	snprintf(line, len, "%s; %s registers CUDA device memory (FI_HMEM_CUDA)", found, provider);
	return 1;
}
