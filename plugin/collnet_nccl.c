/* ncclCollNet v8..v12, the NCCL adapter of the collnet: NCCL's vtables and
 * the adapters from each version's calling convention to the engine's
 * entry points (collnet_listen, collnet_iallreduce, ... in the other
 * collnet_*.c files), which take and return negative errnos;
 * plugin_result() maps them to ncclResult_t here, in one place. Names say
 * which side a function is on: nccl_coll_* here (and nccl_net_* in
 * net_nccl.c, the ncclNet adapter), collnet_* in the engine. Nothing but
 * the vtables is exported. */
#include "collnet.h"
#include "net_comm.h"

#include <stdlib.h>

struct nccl_coll_ctx {
	uint64_t comm_id;
};

static ncclResult_t nccl_coll_init_common(ncclDebugLogger_t logger)
{
	int rc = plugin_init(logger);

	if (!rc)
		rc = netc_init();
	return plugin_result(rc);
}

static ncclResult_t nccl_coll_devices(int *ndev)
{
	return plugin_result(netc_devices(ndev));
}

static ncclResult_t nccl_coll_props_v9(int dev, ncclNetProperties_v9_t *out)
{
	struct plugin_props p;
	int rc = plugin_props_get(netc_fabric(), dev, &p);

	if (rc)
		return plugin_result(rc);
	plugin_props_v9(&p, dev, 1024, 1, out);
	return ncclSuccess;
}

static ncclResult_t nccl_coll_props_v12(int dev, ncclNetProperties_v12_t *out)
{
	return plugin_props_as_v12(nccl_coll_props_v9, dev, out);
}

static ncclResult_t nccl_coll_props_v11(int dev, ncclNetProperties_v11_t *out)
{
	return plugin_props_as_v11(nccl_coll_props_v9, dev, out);
}

static ncclResult_t nccl_coll_props_v8(int dev, ncclNetProperties_v8_t *out)
{
	return plugin_props_as_v8(nccl_coll_props_v9, dev, out);
}

static ncclResult_t nccl_coll_listen(int dev, void *handle, void **listen_comm)
{
	return plugin_result(collnet_listen(dev, handle, listen_comm));
}

static ncclResult_t nccl_coll_connect(void *handles[], int nranks, int rank, void *listen_comm,
				 void **coll_comm)
{
	return plugin_result(collnet_connect(handles, nranks, rank, listen_comm, coll_comm));
}

static ncclResult_t nccl_coll_reduce_support(ncclDataType_t t, ncclRedOp_t op, int *supported)
{
	return plugin_result(collnet_reduce_support(t, op, supported));
}

static ncclResult_t nccl_coll_reg_mr(void *c, void *data, size_t size, int type, void **mhandle)
{
	return plugin_result(collnet_reg_mr(c, data, size, type, mhandle));
}

static ncclResult_t nccl_coll_reg_mr_dmabuf(void *c, void *data, size_t size, int type, uint64_t offset,
				       int fd, void **mhandle)
{
	(void)offset;
	(void)fd;
	return nccl_coll_reg_mr(c, data, size, type, mhandle);
}

static ncclResult_t nccl_coll_dereg_mr(void *c, void *mhandle)
{
	return plugin_result(collnet_dereg_mr(c, mhandle));
}

static ncclResult_t nccl_coll_iallreduce(void *c, void *send, void *recv, size_t count, ncclDataType_t t,
				    ncclRedOp_t op, void *smh, void *rmh, void **request)
{
	return plugin_result(collnet_iallreduce(c, send, recv, count, t, op, smh, rmh, request));
}

static ncclResult_t nccl_coll_iallreduce_v8(void *c, void *send, void *recv, int count, ncclDataType_t t,
				       ncclRedOp_t op, void *smh, void *rmh, void **request)
{
	if (count < 0)
		return ncclInvalidArgument;
	return nccl_coll_iallreduce(c, send, recv, (size_t)count, t, op, smh, rmh, request);
}

/* CollNet Direct's window collectives: one part (NCCL's proxy always
 * passes one; its v8 layer refuses more), v8's part has a 32-bit size. */
static ncclResult_t nccl_coll_iallgather(void *c, void *send, int nparts, ncclNetSGE_t *parts,
				    size_t bpr, size_t wo, size_t wb, void *smh, void **request)
{
	return plugin_result(collnet_iallgather(c, send, nparts, parts, bpr, wo, wb, smh, request));
}

static ncclResult_t nccl_coll_ireducescatter(void *c, int nparts, ncclNetSGE_t *parts, void *recv,
					size_t bpr, size_t wo, size_t wb, ncclDataType_t t,
					ncclRedOp_t op, void *rmh, void **request)
{
	return plugin_result(
		collnet_ireducescatter(c, nparts, parts, recv, bpr, wo, wb, t, op, rmh, request));
}

static int sge_from_v8(int nparts, const ncclNetSGE_v8_t *in, ncclNetSGE_t *out)
{
	if (nparts != 1 || !in)
		return -1;
	out->mhandle = in->mhandle;
	out->address = in->address;
	out->size = in->size;
	return 0;
}

static ncclResult_t nccl_coll_iallgather_v8(void *c, void *send, int nparts, ncclNetSGE_v8_t *parts,
				       size_t bpr, size_t wo, size_t wb, void *smh, void **request)
{
	ncclNetSGE_t p;

	*request = NULL;
	if (sge_from_v8(nparts, parts, &p))
		return nccl_coll_iallgather(c, send, nparts, NULL, bpr, wo, wb, smh, request);
	return nccl_coll_iallgather(c, send, 1, &p, bpr, wo, wb, smh, request);
}

static ncclResult_t nccl_coll_ireducescatter_v8(void *c, int nparts, ncclNetSGE_v8_t *parts, void *recv,
					   size_t bpr, size_t wo, size_t wb, ncclDataType_t t,
					   ncclRedOp_t op, void *rmh, void **request)
{
	ncclNetSGE_t p;

	*request = NULL;
	if (sge_from_v8(nparts, parts, &p))
		return nccl_coll_ireducescatter(c, nparts, NULL, recv, bpr, wo, wb, t, op, rmh, request);
	return nccl_coll_ireducescatter(c, 1, &p, recv, bpr, wo, wb, t, op, rmh, request);
}

static ncclResult_t nccl_coll_iflush(void *c, void *data, int size, void *mhandle, void **request)
{
	(void)c;
	(void)data;
	(void)size;
	(void)mhandle;
	*request = NULL; /* host memory: nothing to flush */
	return ncclSuccess;
}

static ncclResult_t nccl_coll_test(void *request, int *done, int *size)
{
	return plugin_result(collnet_test(request, done, size));
}

static ncclResult_t nccl_coll_close(void *c)
{
	return plugin_result(collnet_close(c));
}

static ncclResult_t nccl_coll_close_listen(void *c)
{
	return plugin_result(collnet_close_listen(c));
}

static ncclResult_t nccl_coll_init_v11(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger)
{
	struct nccl_coll_ctx *c;
	ncclResult_t r = nccl_coll_init_common(logger);

	if (r)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->comm_id = comm_id;
	*ctx = c;
	return ncclSuccess;
}

static ncclResult_t nccl_coll_listen_v11(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx;
	return nccl_coll_listen(dev, handle, listen_comm);
}

static ncclResult_t nccl_coll_finalize_v11(void *ctx)
{
	free(ctx);
	netc_fini();
	return ncclSuccess;
}

static ncclResult_t nccl_coll_init_v8(ncclDebugLogger_t logger)
{
	return nccl_coll_init_common(logger);
}

/* v11 and v12: the same calls; v12's properties have the 8-device vProps
 * and railId / planeId. */
#define NCCL_COLL_V11_BODY(props)                                                          \
	.name = PLUGIN_NAME, .init = nccl_coll_init_v11, .devices = nccl_coll_devices,          \
	.getProperties = (props), .listen = nccl_coll_listen_v11, .connect = nccl_coll_connect, \
	.reduceSupport = nccl_coll_reduce_support, .regMr = nccl_coll_reg_mr,                   \
	.regMrDmaBuf = nccl_coll_reg_mr_dmabuf, .deregMr = nccl_coll_dereg_mr,                  \
	.iallreduce = nccl_coll_iallreduce, .iallgather = nccl_coll_iallgather,                \
	.ireducescatter = nccl_coll_ireducescatter,                                        \
	.iflush = nccl_coll_iflush, .test = nccl_coll_test, .closeColl = nccl_coll_close,            \
	.closeListen = nccl_coll_close_listen,                                             \
	.makeVDevice = NULL, /* NULL: NCCL uses the physical devices */                    \
	.finalize = nccl_coll_finalize_v11

SC_EXPORT const ncclCollNet_v12_t ncclCollNetPlugin_v12 = { NCCL_COLL_V11_BODY(nccl_coll_props_v12) };
SC_EXPORT const ncclCollNet_v11_t ncclCollNetPlugin_v11 = { NCCL_COLL_V11_BODY(nccl_coll_props_v11) };

#define NCCL_COLL_V9_BODY                                                                  \
	.name = PLUGIN_NAME, .init = nccl_coll_init_v8, .devices = nccl_coll_devices,           \
	.getProperties = nccl_coll_props_v9, .listen = nccl_coll_listen, .connect = nccl_coll_connect, \
	.reduceSupport = nccl_coll_reduce_support, .regMr = nccl_coll_reg_mr,                   \
	.regMrDmaBuf = nccl_coll_reg_mr_dmabuf, .deregMr = nccl_coll_dereg_mr,                  \
	.iallreduce = nccl_coll_iallreduce, .iallgather = nccl_coll_iallgather,                \
	.ireducescatter = nccl_coll_ireducescatter,                                        \
	.iflush = nccl_coll_iflush, .test = nccl_coll_test, .closeColl = nccl_coll_close,            \
	.closeListen = nccl_coll_close_listen, .makeVDevice = NULL

SC_EXPORT const ncclCollNet_v10_t ncclCollNetPlugin_v10 = { NCCL_COLL_V9_BODY };
SC_EXPORT const ncclCollNet_v9_t ncclCollNetPlugin_v9 = { NCCL_COLL_V9_BODY };

SC_EXPORT const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
	.name = PLUGIN_NAME,
	.init = nccl_coll_init_v8,
	.devices = nccl_coll_devices,
	.getProperties = nccl_coll_props_v8,
	.listen = nccl_coll_listen,
	.connect = nccl_coll_connect,
	.reduceSupport = nccl_coll_reduce_support,
	.regMr = nccl_coll_reg_mr,
	.regMrDmaBuf = nccl_coll_reg_mr_dmabuf,
	.deregMr = nccl_coll_dereg_mr,
	.iallreduce = nccl_coll_iallreduce_v8,
	.iallgather = nccl_coll_iallgather_v8,
	.ireducescatter = nccl_coll_ireducescatter_v8,
	.iflush = nccl_coll_iflush,
	.test = nccl_coll_test,
	.closeColl = nccl_coll_close,
	.closeListen = nccl_coll_close_listen,
};
