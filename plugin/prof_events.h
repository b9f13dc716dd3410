/* Sumcast's network-plugin profiler events: what libnccl-net-sumcast.so
 * hands NCCL's profiler callback (ncclNet v10+ init), in NCCL's
 * documented form, and what a profiler plugin reads back.
 *
 * The plugin calls the callback as NCCL's own IB and socket transports do:
 *   start:  cb(&eHandle, 0, pHandle, SC_PROF_PLUGIN_ID, &descr)
 *   end:    cb(&eHandle, 3, NULL, 0, &done)   (update and stop)
 *           cb(&eHandle, 1, NULL, 0, NULL)    (stop: a comm closed first)
 * NCCL turns a start into a profiler startEvent of type
 * ncclProfileNetPlugin (1 << 7) whose descriptor carries netPlugin.id =
 * SC_PROF_PLUGIN_ID and netPlugin.data = &descr, parented under the proxy
 * step that pHandle names; the update becomes recordEventState(eHandle,
 * ncclProfilerNetPluginUpdate = 21, {.netPlugin.data = &done}). Both
 * pointers are valid during the call only: a profiler copies what it
 * keeps. docs/plugin.md, "Profiler events", says when each is sent.
 *
 * The plugin id packs the version into its low 16 bits and the type into
 * the next 16 (NCCL's NCCL_PROFILER_NET_VER_BITS; NCCL itself names IB
 * 1 << 16 and socket 2 << 16). Sumcast's type is 0x5343 ("SC"). A new
 * layout of either struct gets a new version; a profiler that does not
 * know the version must not read data.
 *
 * Plain C, no plugin types: profiler plugins include this header. */
#ifndef SUMCAST_PROF_EVENTS_H
#define SUMCAST_PROF_EVENTS_H

#include <stdint.h>

#define SC_PROF_NET_VER_BITS 16
#define SC_PROF_NET_TYPE_SUMCAST (0x5343u << SC_PROF_NET_VER_BITS)
#define SC_PROF_NET_VER 1
#define SC_PROF_PLUGIN_ID ((int64_t)(SC_PROF_NET_TYPE_SUMCAST | SC_PROF_NET_VER))
#define SC_PROF_TYPE_OF(id) ((uint64_t)(id) & (0xffffull << SC_PROF_NET_VER_BITS))
#define SC_PROF_VER_OF(id) ((uint64_t)(id) & 0xffffull)

/* NCCL's callback types (nccl_common.h, ncclProfilerNetEvent*). */
enum {
	SC_PROF_CB_START = 0,
	SC_PROF_CB_STOP = 1,
	SC_PROF_CB_UPDATE = 2,
	SC_PROF_CB_UPDATE_STOP = 3,
};

/* Event kinds: the descriptor's first byte, as in NCCL's IB and socket
 * descriptors. */
enum sc_prof_kind {
	SC_PROF_SEND = 1, /* one ncclNet isend: posted .. completed */
	SC_PROF_RECV = 2, /* one receive of an irecv (one per grouped sub) */
	SC_PROF_KIND_MAX = SC_PROF_RECV,
};

/* The start descriptor (netPlugin.data of the start). */
typedef struct {
	uint8_t kind;   /* enum sc_prof_kind */
	uint8_t sub;    /* receive: which of the irecv's subs; send: 0 */
	uint8_t nsubs;  /* receive: the irecv's subs; send: 1 */
	uint8_t deferred; /* 1: the provider had no room; posted by a later call */
	uint32_t comm;  /* the comm's id (unique in the process while open) */
	uint32_t tag;   /* NCCL's tag */
	uint32_t pad;
	uint64_t bytes; /* send: the message; receive: the buffer */
} sc_prof_descr_v1_t;

/* The update that ends an event (netPlugin.data of the update). */
typedef struct {
	uint8_t kind;   /* the start's kind */
	uint8_t pad[3];
	int32_t status; /* 0, or the negative errno / libfabric error it failed with */
	uint64_t bytes; /* bytes moved: the send's, the received message's */
} sc_prof_done_v1_t;

_Static_assert(sizeof(sc_prof_descr_v1_t) == 24, "sc_prof_descr_v1_t layout");
_Static_assert(sizeof(sc_prof_done_v1_t) == 16, "sc_prof_done_v1_t layout");

#endif
