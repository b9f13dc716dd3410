/* NCCL tuner plugin ABI, versions 1 to 6 (the ones this library exports:
 * plugin/tuner_nccl.c).
 *
 * Written from NCCL's src/include/nccl_tuner.h (tags v2.19.3-1, v2.21.5-1,
 * v2.22.3-1, v2.24.3-1) and src/include/plugin/tuner/tuner_v{3,4,5,6}.h
 * (v2.28.9-1, v2.30.7-1).
 * Member order and types must match NCCL exactly: do not reorder anything
 * (the static assertions at the end pin the layouts on LP64).
 *   v1 (NCCL 2.19, 2.20): init(nRanks, nNodes, logger), no context;
 *       getCollInfo(collType, nBytes, collNetSupport, nvlsSupport,
 *       numPipeOps, &algorithm, &protocol, &nChannels) chooses outright
 *       (NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF left: NCCL chooses); destroy().
 *       NCCL loads it from NCCL_TUNER_PLUGIN's library only.
 *   v2 (NCCL 2.21): v1 with a context (init's last argument, the others'
 *       first).
 *   v3 (NCCL 2.22-): init(nRanks, nNodes, logger, &ctx); getCollInfo with
 *       the cost table (float[numAlgo][numProto], microseconds, -1.0 =
 *       NCCL_ALGO_PROTO_IGNORE); destroy(ctx).
 *   v4 (NCCL 2.24-): getCollInfo takes regBuff too.
 *   v5 (NCCL 2.28-): init(&ctx, commId, nRanks, nNodes, logger,
 *       nvlDomainInfo, constants); finalize(ctx).
 *   v6 (NCCL 2.30-): v5 and getChunkSize (optional: NULL keeps NCCL's).
 * NCCL looks up the newest name it knows first (ncclTunerPlugin_v6, then
 * v5, ...) in NCCL_TUNER_PLUGIN's library or, unset (2.21 on), in the net
 * plugin's (docs/plugin.md, "Tuner"). */
#ifndef SUMCAST_NCCL_TUNER_H
#define SUMCAST_NCCL_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net.h"

typedef enum {
	ncclFuncBroadcast = 0,
	ncclFuncReduce = 1,
	ncclFuncAllGather = 2,
	ncclFuncReduceScatter = 3,
	ncclFuncAllReduce = 4,
	ncclFuncSendRecv = 5,
	ncclFuncSend = 6,
	ncclFuncRecv = 7,
} ncclFunc_t;

/* The cost table's rows and columns (the same indices in every version
 * since 2.22; NCCL 2.22 has 6 algorithms, 2.24 and later 7, with PAT). */
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_ALGO_PROTO_IGNORE -1.0
#define NCCL_ALGO_UNDEF -1
#define NCCL_PROTO_UNDEF -1

typedef struct {
	int nNvlDomains;
	int minRanksPerNvlDomain;
	int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

#define NCCL_NUM_ALGORITHMS_V5 7
#define NCCL_NUM_PROTOCOLS_V5 3
#define NCCL_NUM_HW_LINKS_V5 3
#define NCCL_NUM_COMPCAPS_V5 4
#define NCCL_NUM_TUNING_SCALES_V5 3

typedef struct {
	double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
	double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
	double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
	double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
	double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
	double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
	double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction);
	ncclResult_t (*getCollInfo)(ncclFunc_t collType, size_t nBytes, int collNetSupport,
				    int nvlsSupport, int numPipeOps, int *algorithm, int *protocol,
				    int *nChannels);
	ncclResult_t (*destroy)(void);
} ncclTuner_v1_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
	ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
				    int nvlsSupport, int numPipeOps, int *algorithm, int *protocol,
				    int *nChannels);
	ncclResult_t (*destroy)(void *context);
} ncclTuner_v2_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
	ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int *nChannels);
	ncclResult_t (*destroy)(void *context);
} ncclTuner_v3_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
	ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int regBuff,
				    int *nChannels);
	ncclResult_t (*destroy)(void *context);
} ncclTuner_v4_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
			     ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvlDomainInfo,
			     ncclTunerConstants_v5_t *constants);
	ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int regBuff,
				    int *nChannels);
	ncclResult_t (*finalize)(void *context);
} ncclTuner_v5_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
			     ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t *nvlDomainInfo,
			     ncclTunerConstants_v6_t *constants);
	ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int regBuff,
				    int *nChannels);
	ncclResult_t (*finalize)(void *context);
	ncclResult_t (*getChunkSize)(void *context, ncclFunc_t collType, size_t nBytes, int algo,
				     int proto, int nChannels, size_t *chunkSize);
} ncclTuner_v6_t;

#if defined(__LP64__)
static_assert(sizeof(ncclTuner_v1_t) == 32, "ncclTuner_v1_t layout");
static_assert(sizeof(ncclTuner_v2_t) == 32, "ncclTuner_v2_t layout");
static_assert(sizeof(ncclTuner_v3_t) == 32, "ncclTuner_v3_t layout");
static_assert(sizeof(ncclTuner_v4_t) == 32, "ncclTuner_v4_t layout");
static_assert(sizeof(ncclTuner_v5_t) == 32, "ncclTuner_v5_t layout");
static_assert(sizeof(ncclTuner_v6_t) == 40, "ncclTuner_v6_t layout");
static_assert(offsetof(ncclTuner_v6_t, getChunkSize) == 32, "ncclTuner_v6_t layout");
static_assert(sizeof(ncclNvlDomainInfo_v5_t) == 12, "ncclNvlDomainInfo_v5_t layout");
static_assert(sizeof(ncclTunerConstants_v5_t) == 144 * sizeof(double), "ncclTunerConstants_v5_t layout");
#endif

#endif
