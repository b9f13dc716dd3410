/* ncclNet v8..v12, the NCCL adapter of the p2p engine (net_comm.c, netc_*):
 * NCCL's vtables and a thin adapter per version, named nccl_net_* (as the
 * collnet's are nccl_coll_*, collnet_nccl.c). Errors become ncclResult_t in
 * plugin_result() only. */
#include "net_comm.h"

#include <string.h>

#include <errno.h>
#include <stdlib.h>

#include "log.h"

/* ncclNet v11 / v12 context: one per NCCL communicator. */
struct nccl_net_ctx {
	uint64_t comm_id;
};

/* prof: NCCL's profiler callback (v10 and later), NULL before v10. */
static ncclResult_t nccl_net_init_common(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	int rc = plugin_init(logger);

	if (!rc)
		rc = netc_init();
	if (rc)
		SC_WARN("ncclNet init failed: %d", rc);
	else
		plugin_prof_set(prof);
	return plugin_result(rc);
}

static ncclResult_t nccl_net_devices(int *ndev)
{
	return plugin_result(netc_devices(ndev));
}

static ncclResult_t nccl_net_props_v9(int dev, ncclNetProperties_v9_t *out)
{
	struct plugin_props p;
	int rc = plugin_props_get(netc_fabric(), dev, &p);

	if (rc)
		return plugin_result(rc);
	plugin_props_v9(&p, dev, 65536, p.max_recvs, out);
	return ncclSuccess;
}

static ncclResult_t nccl_net_props_v12(int dev, ncclNetProperties_v12_t *out)
{
	return plugin_props_as_v12(nccl_net_props_v9, dev, out);
}

static ncclResult_t nccl_net_props_v11(int dev, ncclNetProperties_v11_t *out)
{
	return plugin_props_as_v11(nccl_net_props_v9, dev, out);
}

static ncclResult_t nccl_net_props_v8(int dev, ncclNetProperties_v8_t *out)
{
	return plugin_props_as_v8(nccl_net_props_v9, dev, out);
}

static ncclResult_t nccl_net_listen(int dev, void *handle, void **listen_comm)
{
	return plugin_result(netc_listen(dev, handle, listen_comm));
}

static ncclResult_t nccl_net_connect(int dev, void *handle, void **send_comm, ncclNetDeviceHandle_t **dev_comm)
{
	/* Host-only plugin: no device offload, whatever NCCL asks. */
	if (dev_comm)
		*dev_comm = NULL;
	return plugin_result(netc_connect(dev, handle, send_comm));
}

static ncclResult_t nccl_net_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t **dev_comm)
{
	if (dev_comm)
		*dev_comm = NULL;
	return plugin_result(netc_accept(listen_comm, recv_comm));
}

static ncclResult_t nccl_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	return plugin_result(netc_reg_mr(comm, data, size, type, mhandle));
}

static ncclResult_t nccl_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				      int fd, void **mhandle)
{
	(void)offset;
	(void)fd;
	/* Only NCCL_PTR_HOST is announced, so NCCL never hands us a dma-buf;
	 * a host pointer through this door is still fine. */
	return nccl_net_reg_mr(comm, data, size, type, mhandle);
}

static ncclResult_t nccl_net_dereg_mr(void *comm, void *mhandle)
{
	return plugin_result(netc_dereg_mr(comm, mhandle));
}

static ncclResult_t nccl_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request)
{
	return plugin_result(netc_isend(send_comm, data, size, tag, mhandle, phandle, request));
}

static ncclResult_t nccl_net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request)
{
	return plugin_result(netc_irecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request));
}

static ncclResult_t nccl_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			       void **request)
{
	(void)recv_comm;
	(void)n;
	(void)data;
	(void)sizes;
	(void)mhandles;
	/* Host memory: what the CPU received is visible; nothing to flush. */
	*request = NULL;
	return ncclSuccess;
}

static ncclResult_t nccl_net_test(void *request, int *done, int *sizes)
{
	return plugin_result(netc_test(request, done, sizes));
}

static ncclResult_t nccl_net_close_send(void *c)
{
	return plugin_result(netc_close_send(c));
}

static ncclResult_t nccl_net_close_recv(void *c)
{
	return plugin_result(netc_close_recv(c));
}

static ncclResult_t nccl_net_close_listen(void *c)
{
	return plugin_result(netc_close_listen(c));
}

/* ---- v11 and v12 (v12: v11's calls, the v12 properties) ---- */

static ncclResult_t nccl_net_init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
				 ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	struct nccl_net_ctx *c;
	ncclResult_t r;

	(void)config;
	r = nccl_net_init_common(logger, prof);
	if (r)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->comm_id = comm_id;
	*ctx = c;
	SC_DBG("ncclNet init for comm 0x%llx", (unsigned long long)comm_id);
	return ncclSuccess;
}

static ncclResult_t nccl_net_listen_v11(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx;
	return nccl_net_listen(dev, handle, listen_comm);
}

static ncclResult_t nccl_net_connect_v11(void *ctx, int dev, void *handle, void **send_comm,
				    ncclNetDeviceHandle_t **dev_comm)
{
	(void)ctx;
	return nccl_net_connect(dev, handle, send_comm, dev_comm);
}

static ncclResult_t nccl_net_finalize_v11(void *ctx)
{
	free(ctx);
	netc_fini();
	return ncclSuccess;
}

static ncclResult_t nccl_net_set_attr_v11(void *ctx, ncclNetAttr_v11_t *attr)
{
	(void)ctx;
	(void)attr;
	return ncclSuccess; /* hints only; one endpoint serves every flow */
}

/* v11 and v12: the same calls (setNetAttr's ncclNetAttr_v12_t has v11's
 * layout); v12's properties have the 8-device vProps and railId / planeId. */
#define NCCL_NET_V11_BODY(props)                                                           \
	.name = PLUGIN_NAME, .init = nccl_net_init_v11, .devices = nccl_net_devices,           \
	.getProperties = (props), .listen = nccl_net_listen_v11,                           \
	.connect = nccl_net_connect_v11, .accept = nccl_net_accept, .regMr = nccl_net_reg_mr,  \
	.regMrDmaBuf = nccl_net_reg_mr_dmabuf, .deregMr = nccl_net_dereg_mr,                  \
	.isend = nccl_net_isend, .irecv = nccl_net_irecv, .iflush = nccl_net_iflush,          \
	.test = nccl_net_test, .closeSend = nccl_net_close_send,                              \
	.closeRecv = nccl_net_close_recv, .closeListen = nccl_net_close_listen,               \
	.getDeviceMr = NULL, /* host only: NCCL checks for NULL */                         \
	.irecvConsumed = NULL,                                                             \
	.makeVDevice = NULL, /* NULL: NCCL uses the physical devices */                    \
	.finalize = nccl_net_finalize_v11, .setNetAttr = nccl_net_set_attr_v11

SC_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = { NCCL_NET_V11_BODY(nccl_net_props_v12) };
SC_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = { NCCL_NET_V11_BODY(nccl_net_props_v11) };

/* ---- v10 ---- */

static ncclResult_t nccl_net_init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	return nccl_net_init_common(logger, prof);
}

static ncclResult_t nccl_net_connect_v10(int dev, ncclNetCommConfig_t *config, void *handle,
				    void **send_comm, ncclNetDeviceHandle_t **dev_comm)
{
	(void)config;
	return nccl_net_connect(dev, handle, send_comm, dev_comm);
}

SC_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = PLUGIN_NAME,
	.init = nccl_net_init_v10,
	.devices = nccl_net_devices,
	.getProperties = nccl_net_props_v9,
	.listen = nccl_net_listen,
	.connect = nccl_net_connect_v10,
	.accept = nccl_net_accept,
	.regMr = nccl_net_reg_mr,
	.regMrDmaBuf = nccl_net_reg_mr_dmabuf,
	.deregMr = nccl_net_dereg_mr,
	.isend = nccl_net_isend,
	.irecv = nccl_net_irecv,
	.iflush = nccl_net_iflush,
	.test = nccl_net_test,
	.closeSend = nccl_net_close_send,
	.closeRecv = nccl_net_close_recv,
	.closeListen = nccl_net_close_listen,
	.getDeviceMr = NULL, /* host only: NCCL checks for NULL */
	.irecvConsumed = NULL,
	.makeVDevice = NULL, /* NULL: NCCL uses the physical devices */
};

/* ---- v9 ---- */

static ncclResult_t nccl_net_init_v9(ncclDebugLogger_t logger)
{
	return nccl_net_init_common(logger, NULL);
}

static ncclResult_t nccl_net_isend_v9(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				 void **request)
{
	return nccl_net_isend(send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t nccl_net_irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				 void **mhandles, void **request)
{
	return nccl_net_irecv(recv_comm, n, data, sizes, tags, mhandles, NULL, request);
}

SC_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = PLUGIN_NAME,
	.init = nccl_net_init_v9,
	.devices = nccl_net_devices,
	.getProperties = nccl_net_props_v9,
	.listen = nccl_net_listen,
	.connect = nccl_net_connect,
	.accept = nccl_net_accept,
	.regMr = nccl_net_reg_mr,
	.regMrDmaBuf = nccl_net_reg_mr_dmabuf,
	.deregMr = nccl_net_dereg_mr,
	.isend = nccl_net_isend_v9,
	.irecv = nccl_net_irecv_v9,
	.iflush = nccl_net_iflush,
	.test = nccl_net_test,
	.closeSend = nccl_net_close_send,
	.closeRecv = nccl_net_close_recv,
	.closeListen = nccl_net_close_listen,
	.getDeviceMr = NULL, /* host only: NCCL checks for NULL */
	.irecvConsumed = NULL,
	.makeVDevice = NULL, /* NULL: NCCL uses the physical devices */
};

/* ---- v8 ---- */

static ncclResult_t nccl_net_isend_v8(void *send_comm, void *data, int size, int tag, void *mhandle,
				 void **request)
{
	if (size < 0)
		return ncclInvalidArgument;
	return nccl_net_isend(send_comm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t nccl_net_irecv_v8(void *recv_comm, int n, void **data, int *sizes, int *tags,
				 void **mhandles, void **request)
{
	size_t sz[PLUGIN_MAX_RECVS];

	if (n < 1 || n > PLUGIN_MAX_RECVS)
		return ncclInvalidArgument;
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0)
			return ncclInvalidArgument;
		sz[i] = (size_t)sizes[i];
	}
	return nccl_net_irecv(recv_comm, n, data, sz, tags, mhandles, NULL, request);
}

SC_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = PLUGIN_NAME,
	.init = nccl_net_init_v9,
	.devices = nccl_net_devices,
	.getProperties = nccl_net_props_v8,
	.listen = nccl_net_listen,
	.connect = nccl_net_connect,
	.accept = nccl_net_accept,
	.regMr = nccl_net_reg_mr,
	.regMrDmaBuf = nccl_net_reg_mr_dmabuf,
	.deregMr = nccl_net_dereg_mr,
	.isend = nccl_net_isend_v8,
	.irecv = nccl_net_irecv_v8,
	.iflush = nccl_net_iflush,
	.test = nccl_net_test,
	.closeSend = nccl_net_close_send,
	.closeRecv = nccl_net_close_recv,
	.closeListen = nccl_net_close_listen,
	.getDeviceMr = NULL, /* host only: NCCL checks for NULL */
	.irecvConsumed = NULL,
};
