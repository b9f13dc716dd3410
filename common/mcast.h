/* Multicast results: the part of the protocol every multicast transport
 * shares (IP multicast over UDP, InfiniBand/RoCE UD multicast), so that the
 * logic is exercised where tests can run it (docs/daemon.md, "Multicast
 * results"). The daemon sends with it (dp_result.c), the client receives
 * (client/client_mcast.c).
 *
 * The aggregator sends each result once to the job's group, cut into
 * datagrams of at most an MTU. Every datagram carries a header (below):
 * the job handle and the job's multicast key (a random 64-bit number the
 * daemon gives each job in JOIN_OK), so a rank takes packets only of its
 * own job and drops foreign or forged ones (counted); the chunk number,
 * the result's data word and length, and the payload's offset. A rank
 * expects each chunk it sent (sc_mc_rx_expect: where the result goes,
 * how long it is), assembles it from datagrams in any order, duplicates
 * dropped, and after a deadline asks the aggregator for what is missing
 * (sc_mc_rx_missing, a NACK of byte ranges over the reliable endpoint),
 * which repairs by unicast. Nothing here allocates after init, blocks or
 * touches a socket.
 *
 * Header, 40 bytes, little-endian:
 *   u16 magic "MC" | u8 version | u8 zero | u32 job | u64 key | u64 chunk |
 *   u32 imm | u32 len | u32 off | u16 plen | u16 zero
 * followed by plen payload bytes: result bytes [off, off + plen). */
#ifndef SUMCAST_MCAST_H
#define SUMCAST_MCAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SC_MC_MAGIC 0x434Du /* "MC" little-endian */
#define SC_MC_VERSION 1
#define SC_MC_HDR 40
#define SC_MC_NACK_RANGES 16

struct sc_mc_hdr {
	uint32_t job;   /* the daemon's job handle */
	uint64_t key;   /* the job's multicast key */
	uint64_t chunk; /* the job's chunk number */
	uint32_t imm;   /* the result's data word (wire.h, mode 0) */
	uint32_t len;   /* the result's bytes */
	uint32_t off;   /* this datagram's payload offset in the result */
	uint16_t plen;  /* payload bytes that follow */
};

void sc_mc_hdr_encode(const struct sc_mc_hdr *h, uint8_t out[SC_MC_HDR]);
/* A datagram of n bytes: 0 and *out, or -EBADMSG (bad magic, version,
 * reserved bits, plen not what follows, payload outside the result, an
 * empty payload of a non-empty result) leaving *out alone. */
int sc_mc_hdr_decode(const uint8_t *buf, size_t n, struct sc_mc_hdr *out);

/* Lays out at out the datagram of result r (job, key, chunk, imm, len;
 * r->off and r->plen are ignored) that starts at result byte off: the
 * header and up to `payload` bytes of src + off. Returns its bytes. Every
 * transport sends these. */
size_t sc_mc_pack(uint8_t *out, const struct sc_mc_hdr *r, const uint8_t *src, uint32_t off,
		  size_t payload);

/* Datagrams of a result of len bytes with `payload` bytes per datagram
 * (an empty result is one datagram). */
static inline uint32_t sc_mc_npackets(uint32_t len, size_t payload)
{
	return len ? (uint32_t)((len + payload - 1) / payload) : 1;
}

struct sc_mc_range {
	uint32_t off, len;
};

/* One result being assembled (a slot of the job's window). */
struct sc_mc_slot {
	uint64_t chunk;
	uint32_t imm, len;
	uint32_t npk, ngot; /* datagrams of the result, and those in */
	uint32_t hi;        /* 1 + the highest datagram index in */
	uint64_t first_tick, last_tick; /* rx->tick of its first and last datagram */
	uint8_t *dst;       /* where the result goes */
	uint64_t *bits;     /* npk bits: which datagrams are in */
	bool active;        /* expected and not complete */
};

struct sc_mc_counts {
	uint64_t packets;   /* datagrams taken into a result */
	uint64_t dups;      /* datagrams already in (dropped) */
	uint64_t foreign;   /* another job's or key's (dropped) */
	uint64_t malformed; /* failed sc_mc_hdr_decode (dropped) */
	uint64_t stale;     /* of a chunk not expected now, or disagreeing with it (dropped) */
	uint64_t repaired;  /* byte ranges filled by sc_mc_rx_fill (unicast repairs) */
	uint64_t dropped;   /* by the test hook (drop_permille) */
};

/* A rank's receiver for one job and aggregator: `window` slots, results of
 * at most max_len bytes, `payload` bytes per datagram (the sender's). */
struct sc_mc_rx {
	uint32_t job;
	uint64_t key;
	uint32_t window;
	size_t payload, max_len;
	struct sc_mc_slot *slots;
	uint64_t *bits_mem;
	size_t words; /* bitmap words per slot */
	uint64_t tick;       /* datagrams taken so far (a clock) */
	uint64_t last_start; /* tick of the latest first datagram of a result */
	/* test hook: sc_mc_rx_take drops this share (per mille) of datagrams,
	 * as a lossy network would (netem is not available here); 0 in use */
	unsigned drop_permille;
	uint64_t seed; /* of the drop hook's xorshift */
	struct sc_mc_counts n;
};

/* 0, -EINVAL or -ENOMEM. */
int sc_mc_rx_init(struct sc_mc_rx *rx, uint32_t job, uint64_t key, uint32_t window, size_t payload,
		  size_t max_len);
void sc_mc_rx_fini(struct sc_mc_rx *rx);
/* The result of chunk (len bytes, data word imm) goes to dst. -EBUSY when
 * its slot still assembles another chunk, -EINVAL for a bad length. */
int sc_mc_rx_expect(struct sc_mc_rx *rx, uint64_t chunk, uint32_t len, uint32_t imm, void *dst);
/* The result of chunk came another way (unicast) or is not wanted any
 * more: its slot is free, later datagrams of it are stale. */
void sc_mc_rx_drop(struct sc_mc_rx *rx, uint64_t chunk);
/* One datagram. Returns 1 when it completed a result (*done = its chunk;
 * the slot is free again), 0 when taken or dropped (counted). Never
 * writes outside an expected result's dst. */
int sc_mc_rx_packet(struct sc_mc_rx *rx, const uint8_t *pkt, size_t n, uint64_t *done);
/* A datagram as a transport read it: through the drop hook into
 * sc_mc_rx_packet, done(arg, chunk) when it completed a result. */
void sc_mc_rx_take(struct sc_mc_rx *rx, const uint8_t *pkt, size_t n,
		   void (*done)(void *arg, uint64_t chunk), void *arg);
/* Evidence that datagrams of chunk were lost (one sender sends each
 * result whole, in order, before the next): one is missing below the
 * highest that came, or another result began after this one's last
 * datagram. False when nothing of it came yet, or it is not assembling. */
bool sc_mc_rx_gap(const struct sc_mc_rx *rx, uint64_t chunk);
/* Byte ranges of chunk not in yet, merged, at most max (the rest is in
 * a later NACK). 0 when the chunk is not being assembled. */
size_t sc_mc_rx_missing(const struct sc_mc_rx *rx, uint64_t chunk, struct sc_mc_range *out,
			size_t max);
/* A unicast repair of chunk's bytes [off, off + len) arrived in dst (the
 * caller received it there): the datagrams wholly inside it count as in.
 * Returns 1 when the result is complete now, 0 otherwise, -EINVAL when the
 * chunk is not being assembled or the range is outside it. */
int sc_mc_rx_fill(struct sc_mc_rx *rx, uint64_t chunk, uint32_t off, uint32_t len);

/* NACK, rank -> aggregator over the reliable endpoint: job, rank, chunk,
 * up to SC_MC_NACK_RANGES byte ranges (an empty one at 0: the whole of an
 * empty result). Little-endian:
 *   u16 magic "MN" | u8 version | u8 nranges | u32 job | u32 rank | u32 zero |
 *   u64 chunk | nranges x (u32 off, u32 len) */
#define SC_MC_NACK_MAGIC 0x4E4Du /* "MN" */
struct sc_mc_nack {
	uint32_t job, rank;
	uint64_t chunk;
	uint8_t nranges;
	struct sc_mc_range r[SC_MC_NACK_RANGES];
};
#define SC_MC_NACK_MAX (24 + 8 * SC_MC_NACK_RANGES)
/* Bytes written, or -EINVAL (no range, too many, a range that wraps). */
int sc_mc_nack_encode(const struct sc_mc_nack *m, uint8_t *out, size_t cap);
/* 0, or -EBADMSG (bad magic, version, length, a range that wraps,
 * reserved bits) leaving *out alone. */
int sc_mc_nack_decode(const uint8_t *buf, size_t n, struct sc_mc_nack *out);

#endif
