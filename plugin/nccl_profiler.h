/* NCCL's profiler plugin ABI (ncclProfiler_v5 / _v6), the part Sumcast's
 * tests speak: the harness's NCCL side (tests/plugin/harness_prof.c), the
 * recording profiler for real NCCL (tests/gpu/prof_record.c) and its unit
 * test. The plugin itself only calls NCCL's callback (nccl_net.h) with its
 * own event data (prof_events.h).
 *
 * Layouts from nccl_profiler.h, profiler_v5.h and profiler_v6.h of
 * NVIDIA/nccl v2.28.9-1 and v2.30.x. The v5 and v6 tables have the same
 * calls, and their descriptors differ only in union members none of these
 * read (netPlugin at offset 24 in both); only the members used here are
 * named, then room for the largest union member. */
#ifndef SUMCAST_NCCL_PROFILER_H
#define SUMCAST_NCCL_PROFILER_H

#include <stdint.h>
#include <sys/types.h>

#include "nccl_net.h"

/* The event types (bits of the activation mask). */
enum {
	ncclProfileGroup = 1 << 0,
	ncclProfileColl = 1 << 1,
	ncclProfileP2p = 1 << 2,
	ncclProfileProxyOp = 1 << 3,
	ncclProfileProxyStep = 1 << 4,
	ncclProfileProxyCtrl = 1 << 5,
	ncclProfileKernelCh = 1 << 6,
	ncclProfileNetPlugin = 1 << 7,
};
#define NCCL_PROFILE_NTYPES 15 /* v6: up to ncclProfileCeBatch (1 << 14) */
#define ncclProfilerNetPluginUpdate 21

typedef struct {
	uint64_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			int64_t id;
			void *data;
		} netPlugin;
		struct {
			int step;
		} proxyStep;
		struct {
			pid_t pid;
			uint8_t channelId;
			int peer, nSteps, chunkSize, isSend;
		} proxyOp;
		uint8_t room[128];
	};
} ncclProfilerEventDescr_t;
_Static_assert(__builtin_offsetof(ncclProfilerEventDescr_t, netPlugin) == 24, "NCCL's netPlugin offset");

/* ncclProfilerEventStateArgs_v5_t / _v6_t: a union, netPlugin.data first. */
typedef union {
	struct {
		void *data;
	} netPlugin;
	uint8_t room[128];
} ncclProfilerEventStateArgs_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName,
			     int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
	ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_t *descr);
	ncclResult_t (*stopEvent)(void *eHandle);
	ncclResult_t (*recordEventState)(void *eHandle, int eState, ncclProfilerEventStateArgs_t *args);
	ncclResult_t (*finalize)(void *context);
} ncclProfiler_t;

#endif
