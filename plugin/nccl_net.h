/* NCCL network plugin ABI, versions 8 to 12.
 *
 * Written from the layouts documented in NCCL's ext-net/README.md and
 * src/include/plugin/net/net_v*.h (v8..v11: tag v2.28.9-1; v12: NCCL
 * 2.30's net_v12.h). Only what this plugin and its harness need; member
 * order and types must match NCCL exactly, so do not reorder anything here
 * (the static assertions at the end pin the property layouts on LP64).
 * Version differences worth knowing:
 *   v8:  isend/irecv sizes are int; no pHandles; iallreduce count is int;
 *        properties have no forceFlush/vProps/maxP2pBytes/maxCollBytes.
 *   v9:  size_t sizes; makeVDevice; vProps; maxP2pBytes/maxCollBytes.
 *   v10: init(logger, profiler); connect(dev, config, ...); pHandles.
 *   v11: init(&ctx, commId, config, logger, profiler); listen/connect take
 *        ctx; finalize(ctx), setNetAttr(ctx, attr); properties end with
 *        maxMultiRequestSize. CollNet v11: init(&ctx, commId, logger),
 *        listen(ctx, ...), finalize(ctx).
 *   v12: the v11 calls; vProps holds 8 devices instead of 4
 *        (NCCL_NET_MAX_DEVS_PER_NIC_V12), so every property after vProps
 *        moves; properties end with railId and planeId (int16_t,
 *        NCCL_NET_ID_UNDEF when unknown). */
#ifndef SUMCAST_NCCL_NET_H
#define SUMCAST_NCCL_NET_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
} ncclResult_t;

typedef enum {
	ncclInt8 = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclFloat32 = 7,
	ncclFloat64 = 8,
	ncclBfloat16 = 9,
	ncclFloat8e4m3 = 10,
	ncclFloat8e5m2 = 11,
	ncclNumTypes = 12,
} ncclDataType_t;

/* NCCL queries reduceSupport for ops 0..3 only; Avg reaches the network as
 * Sum (NCCL scales on the GPU). */
typedef enum {
	ncclSum = 0,
	ncclProd = 1,
	ncclMax = 2,
	ncclMin = 3,
	ncclAvg = 4,
	ncclNumOps = 5,
	ncclMaxRedOp = 0x7fffffff,
} ncclRedOp_t;

typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

enum {
	NCCL_INIT = 0x1,
	NCCL_COLL = 0x2,
	NCCL_P2P = 0x4,
	NCCL_NET = 0x10,
	NCCL_ENV = 0x80,
};

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
				  int line, const char *fmt, ...);
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
					       int64_t pluginId, void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4
/* *request on entry to v11 irecv may hold this hint; it is not a request. */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0

typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;

typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle;
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_t; /* v7..v11 share this layout */

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_t; /* v9..v11 */

#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

/* railId / planeId of a device nobody knows the rail or plane of (v12). */
#define NCCL_NET_ID_UNDEF (-1)

typedef struct {
	int trafficClass;
} ncclNetCommConfig_t; /* v10, v11 */

typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
	ncclNetCommAttr_v11_t sendCommAttr;
	ncclNetCommAttr_v11_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_v11_t;

typedef ncclNetAttr_v11_t ncclNetAttr_v12_t; /* same layout */

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int speed; /* Mbps */
	int port;
	float latency; /* us */
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v12_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;
	int16_t planeId;
} ncclNetProperties_v12_t;

typedef struct {
	void *mhandle;
	void *address;
	uint32_t size;
} ncclNetSGE_v8_t;

typedef struct {
	void *mhandle;
	void *address;
	size_t size;
} ncclNetSGE_t; /* v9..v11 */

/* ---- ncclNet ---- */

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm, ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags, void **mhandles,
			      void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm, ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
} ncclNet_v9_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_t *config, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
} ncclNet_v10_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,
			     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

/* v11's members, with the v12 properties, vProps and attributes. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,
			     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v12_t *netAttr);
} ncclNet_v12_t;

/* ---- ncclCollNet ---- */

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
	ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
	ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *collComm, void *mhandle);
	ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count,
				   ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
				   void *recvMhandle, void **request);
	ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
				   ncclNetSGE_v8_t *recvParts, size_t bytesPerRank, size_t windowOffset,
				   size_t windowBytes, void *sendMhandle, void **request);
	ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v8_t *sendParts,
				       void *recvData, size_t bytesPerRank, size_t windowOffset,
				       size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
				       void *recvMhandle, void **request);
	ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
	ncclResult_t (*test)(void *request, int *done, int *size);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
} ncclCollNet_v8_t;

/* v9 and v10 differ only in the properties type name (same layout). */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
	ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
	ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *collComm, void *mhandle);
	ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
				   ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
				   void *recvMhandle, void **request);
	ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
				   ncclNetSGE_t *recvParts, size_t bytesPerRank, size_t windowOffset,
				   size_t windowBytes, void *sendMhandle, void **request);
	ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_t *sendParts,
				       void *recvData, size_t bytesPerRank, size_t windowOffset,
				       size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
				       void *recvMhandle, void **request);
	ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
	ncclResult_t (*test)(void *request, int *done, int *size);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
} ncclCollNet_v9_t;

typedef ncclCollNet_v9_t ncclCollNet_v10_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
	ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
	ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *collComm, void *mhandle);
	ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
				   ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
				   void *recvMhandle, void **request);
	ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
				   ncclNetSGE_t *recvParts, size_t bytesPerRank, size_t windowOffset,
				   size_t windowBytes, void *sendMhandle, void **request);
	ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_t *sendParts,
				       void *recvData, size_t bytesPerRank, size_t windowOffset,
				       size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
				       void *recvMhandle, void **request);
	ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
	ncclResult_t (*test)(void *request, int *done, int *size);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
	ncclResult_t (*finalize)(void *ctx);
} ncclCollNet_v11_t;

/* v11's members, with the v12 properties and vProps. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
	ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
	ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *collComm, void *mhandle);
	ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
				   ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
				   void *recvMhandle, void **request);
	ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
				   ncclNetSGE_t *recvParts, size_t bytesPerRank, size_t windowOffset,
				   size_t windowBytes, void *sendMhandle, void **request);
	ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_t *sendParts,
				       void *recvData, size_t bytesPerRank, size_t windowOffset,
				       size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
				       void *recvMhandle, void **request);
	ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
	ncclResult_t (*test)(void *request, int *done, int *size);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
	ncclResult_t (*finalize)(void *ctx);
} ncclCollNet_v12_t;

/* The property layouts NCCL reads on LP64 (x86_64, aarch64), from its
 * headers' member lists: a vProps of the wrong size, or a field out of
 * place, moves every offset after it and fails the build here. */
#if defined(__LP64__)
static_assert(sizeof(ncclNetVDeviceProps_t) == 20, "v9..v11 vProps: ndevs + 4 devices");
static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36, "v12 vProps: ndevs + 8 devices");
static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64 &&
		      offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88 &&
		      offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96 &&
		      sizeof(ncclNetProperties_v9_t) == 104,
	      "ncclNetProperties_v9_t layout");
static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88 &&
		      offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104 &&
		      sizeof(ncclNetProperties_v11_t) == 112,
	      "ncclNetProperties_v11_t layout");
static_assert(offsetof(ncclNetProperties_v12_t, vProps) == 64 &&
		      offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104 &&
		      offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112 &&
		      offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120 &&
		      offsetof(ncclNetProperties_v12_t, railId) == 124 &&
		      offsetof(ncclNetProperties_v12_t, planeId) == 126 &&
		      sizeof(ncclNetProperties_v12_t) == 128,
	      "ncclNetProperties_v12_t layout");
#endif

#endif
