/* Every 64-bit tag layout Sumcast puts on a libfabric tagged message, in one
 * place, so that no two layouts can collide. The top 4 bits are the kind:
 *
 *   kind  who                       bits below the kind
 *   0x1   plugin p2p: connect       id:28 (0) | listen id:32
 *   0x2   plugin p2p: connect ack   id:28 (0) | comm id:32
 *   0x3   plugin p2p: data          comm id:28 | NCCL tag:32
 *   0x4   collnet: split agreement  window:32 | step:12 | column:12
 *   0x5   collnet ring              seq:20 | step:12 | column:28
 *   0x6   failover: redo over ring  seq:20 | aggregator:6 | run:10 | step:12 | column:12
 *   0x7   failover: agreement       epoch:16 | attempt:8 | round:4 | step:12 | column:12
 *   0x8   failover: result copy     aggregator:6 @34 | chunk offset:20 @0
 *   0x9   failover: fault notice    0
 *   0xA   rank -> aggregator data   job handle:20 | rank:16 | slot:24
 *   0xC   failover: chunk redo      aggregator:6 | chunk:30 | step:12 | column:12
 *   0xB   aggregator -> rank result result key:20 | rank:16 | slot:24
 *   0xD   rank -> aggregator NACK   job handle:20 | rank:16 | slot:24
 *
 * Receives never ignore the kind bits, so a message of one kind can only
 * match a receive of the same kind. */
#ifndef SUMCAST_TAGS_H
#define SUMCAST_TAGS_H

#include <stddef.h>
#include <stdint.h>

enum sc_tag_kind {
	SC_TAG_NET_CONN = 0x1,
	SC_TAG_NET_ACK = 0x2,
	SC_TAG_NET_DATA = 0x3,
	SC_TAG_ADAPT = 0x4,
	SC_TAG_RING = 0x5,
	SC_TAG_REDO = 0x6,
	SC_TAG_AGREE = 0x7,
	SC_TAG_COPY = 0x8,
	SC_TAG_NOTICE = 0x9,
	WIRE_TAG_DATA = 0xA,
	WIRE_TAG_RESULT = 0xB,
	SC_TAG_REDO_CHUNK = 0xC,
	WIRE_TAG_NACK = 0xD,
};

static inline unsigned sc_tag_kind(uint64_t t) { return (unsigned)(t >> 60); }

/* ---- aggregator data plane (rank <-> sumcastd) ---- */
static inline uint64_t wire_tag_make(unsigned kind, uint32_t job_or_key, uint32_t rank, uint32_t slot)
{
	return ((uint64_t)(kind & 0xF) << 60) | ((uint64_t)(job_or_key & 0xFFFFF) << 40) |
	       ((uint64_t)(rank & 0xFFFF) << 24) | (uint64_t)(slot & 0xFFFFFF);
}
static inline unsigned wire_tag_kind(uint64_t t) { return sc_tag_kind(t); }
static inline uint32_t wire_tag_job(uint64_t t) { return (uint32_t)(t >> 40) & 0xFFFFF; }
static inline uint32_t wire_tag_rank(uint64_t t) { return (uint32_t)(t >> 24) & 0xFFFF; }
static inline uint32_t wire_tag_slot(uint64_t t) { return (uint32_t)t & 0xFFFFFF; }
/* Ignore mask matching any slot (for wildcard receives of one rank). */
#define WIRE_TAG_IGNORE_SLOT 0xFFFFFFull

/* ---- plugin p2p (ncclNet) ---- */
#define SC_TAG_NET_ID_MASK 0x0fffffffu
static inline uint64_t sc_tag_net(unsigned kind, uint32_t id, uint32_t low)
{
	return (uint64_t)(kind & 0xF) << 60 | (uint64_t)(id & SC_TAG_NET_ID_MASK) << 32 | low;
}

/* ---- collnet ring ---- */
#define SC_TAG_RING_SEQ_MASK 0xFFFFFu
static inline uint64_t sc_tag_ring(uint32_t seq, uint32_t step, size_t col)
{
	return (uint64_t)SC_TAG_RING << 60 | (uint64_t)(seq & SC_TAG_RING_SEQ_MASK) << 40 |
	       (uint64_t)(step & 0xFFF) << 28 | (uint64_t)(col & 0xFFFFFFF);
}

/* ---- collnet failover (plugin/failover*.c); ring ops put their step at
 * bit SC_TAG_FO_STEP_SHIFT and the column below ---- */
#define SC_TAG_FO_STEP_SHIFT 12u
static inline uint64_t sc_tag_redo(uint32_t seq, uint32_t agg, uint32_t run)
{
	return (uint64_t)SC_TAG_REDO << 60 | (uint64_t)(seq & SC_TAG_RING_SEQ_MASK) << 40 |
	       (uint64_t)(agg & 0x3F) << 34 | (uint64_t)(run & 0x3FF) << 24;
}
static inline uint64_t sc_tag_agree(uint32_t epoch, uint32_t attempt, uint32_t round)
{
	return (uint64_t)SC_TAG_AGREE << 60 | (uint64_t)(epoch & 0xFFFF) << 40 |
	       (uint64_t)(attempt & 0xFF) << 32 | (uint64_t)(round & 0xF) << 28;
}
static inline uint64_t sc_tag_copy(uint32_t agg, uint32_t k)
{
	return (uint64_t)SC_TAG_COPY << 60 | (uint64_t)(agg & 0x3F) << 34 | (uint64_t)(k & 0xFFFFF);
}
/* The ring allreduce that recomputes one chunk of a failed aggregator from
 * every node's contribution (a window op's chunk: failover_repair.c). */
static inline uint64_t sc_tag_redo_chunk(uint32_t agg, uint64_t chunk)
{
	return (uint64_t)SC_TAG_REDO_CHUNK << 60 | (uint64_t)(agg & 0x3F) << 54 |
	       (chunk & 0x3FFFFFFFull) << 24;
}
/* The agreement on window n's figures of the adaptive split (plugin/collnet_adapt.c). */
static inline uint64_t sc_tag_adapt(uint64_t n)
{
	return (uint64_t)SC_TAG_ADAPT << 60 | (n & 0xFFFFFFFFull) << 24;
}
static inline uint64_t sc_tag_notice(void)
{
	return (uint64_t)SC_TAG_NOTICE << 60;
}

#endif
