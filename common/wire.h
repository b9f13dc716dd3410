/* Sumcast wire protocol, version 8 (WIRE_VERSION), speaking 2 to 7 too
 * (WIRE_VERSION_MIN; 1 had no mode bits: its seq was 26 bits).
 *
 * Control plane: TCP to the daemon's control port. Every message is a
 * 16-byte header followed by a body of at most WIRE_BODY_MAX bytes, all
 * integers little-endian with explicit sizes:
 *
 *   u32 magic "SCST" | u16 version | u16 type | u32 body length | u32 zero
 *
 * Exchange: daemon sends HELLO (carrying a fresh nonce) on accept; the rank
 * sends JOIN with an HMAC-SHA256 tag over ("sumcast-join-v1", nonce, body);
 * the daemon answers JOIN_OK or REFUSE; once all nranks joined it sends
 * READY to every rank. LEAVE ends a rank's membership; ABORT tells a rank
 * its job died (reason code + sentence). A closed TCP connection is a LEAVE.
 * PING (rank -> daemon, any time after JOIN_OK) is answered at once by a
 * PONG with the same token from the daemon's control thread: a rank tells a
 * stopped or unreachable daemon from one that waits for a slow rank.
 *
 * Versions: 3 is 2 with the daemon's load in the PONG (the busiest data
 * thread's busy share, the jobs that share it: the asker's and those that
 * moved data lately). The daemon's HELLO (sent in
 * version 2, so that a version 2 rank reads it) offers 2..3; a rank
 * answers in the highest it speaks, and the daemon answers each rank in
 * the version of its JOIN. A PONG without the load fields is valid in
 * both; the codec itself reads and writes the load in either, the daemon
 * sends it to version 3 ranks only (a version 2 decoder refuses it).
 * 4 is 3 with the job's weight: a u16 after the JOIN's tag (signed with
 * the body: the tag covers body + weight) and the weight granted after
 * the JOIN_OK's last field. The same rule: the codec reads and writes them
 * in any version, a rank sends a weight to a version 4 daemon only, and
 * the daemon grants one to version 4 ranks only.
 * 5 is 4 with DRAIN (daemon -> rank, body u32 deadline_ms): the daemon is
 * going away and asks the job to move off it; it keeps serving the job for
 * deadline_ms, then aborts what is left (ABORT shutdown). The rank stops
 * giving the aggregator new work, sends LEAVE once nothing of its own is in
 * flight there, and closes. The daemon sends DRAIN only to ranks whose JOIN
 * came in version 5 or later, and only to READY jobs all of whose ranks
 * speak 5; a rank takes it only from an aggregator it negotiated 5 with
 * and that is READY (else it is malformed).
 * 6 is 5 with the job's label (SUMCAST_JOB_LABEL: the scheduler's name for
 * the job, docs/client.md): after the weight (which a JOIN with a label
 * always carries, 1 when none was asked), a u8 length 1..WIRE_LABEL_MAX and
 * that many printable ASCII bytes, signed with the body as the weight is.
 * The same rule again: the codec reads and writes it in any version, a
 * rank sends a label to a version 6 daemon only.
 * 7 is 6 with a job's lanes: a daemon may spread one job over several of
 * its data threads (docs/daemon.md, "Data plane"), each with an endpoint of
 * its own. The JOIN_OK then carries, after the weight (which it always has
 * then), a u8 lane count 2..WIRE_LANES_MAX and the addresses of lanes
 * 1..count-1 (u16 length, bytes each; lane 0's is the JOIN_OK's address).
 * Slot s of the job lives on lane s % count: the rank sends every DATA
 * and NACK of slot s to that lane's address and takes its RESULTs from
 * there. The daemon gives lanes to a job whose first JOIN came in version
 * 7 only, and refuses (version) an older rank that joins such a job.
 * 8 is 7 with the results spread over the lanes: after the lanes' addresses
 * a JOIN_OK may carry a u32 spread limit, 1..WIRE_SPREAD_MAX. A result of
 * slot s whose payload is at most that many bytes goes to rank r from lane
 * (s + r) % count, not from s % count, so that the count lanes' threads
 * share a small result's sends; a larger one comes from lane s % count as
 * in 7. The daemon spreads the results of a job whose first JOIN came in
 * version 8 only, and refuses (version) an older rank that joins such a
 * job.
 *
 * Data plane: libfabric tagged messages on the endpoint named in JOIN_OK.
 * The 64-bit tag routes, the 32-bit immediate data describes the chunk:
 *
 *   tag:  kind:4 | job or result key:20 | rank:16 | slot:24
 *   data: dtype:4 | op:2 | mode:2 | seq:24
 *
 * DATA (rank -> daemon) tags carry the daemon's job handle; RESULT
 * (daemon -> rank) tags carry the rank's result key from JOIN, so a rank can
 * tell results of several daemons apart. Chunk c of a job uses slot
 * c % window and seq c mod 2^24; a rank sends chunk c only after it has the
 * result of chunk c - window (credit flow control: a rank can never overrun
 * the daemon's buffers).
 *
 * The mode of a DATA message says what the rank gives and takes for that
 * chunk (enum wire_mode): ALL (its contribution, and the result back: an
 * allreduce, the block owner of a reduce-scatter), GIVE (its contribution,
 * no result: a non-owner of a reduce-scatter, the only source of an
 * allgather), TAKE (an empty message, no contribution, the result back:
 * an allgather's receivers). Every RESULT carries the data word with mode 0;
 * a GIVE rank's RESULT is empty (in a sealed job a tag alone, sealed for that
 * rank: seal.h) and still returns its credit.
 * In a multicast job a rank may also send a NACK (tag NACK, mode NACK) for a
 * chunk it contributed to and still lacks; exactly one unicast RESULT of
 * that chunk answers it.
 * At least one rank of a chunk must contribute; contributions of a chunk all
 * have the same length.
 *
 * Every decoder validates every field before use and returns -EBADMSG (or
 * -EPROTO for a version mismatch) without touching *out on failure. */
#ifndef SUMCAST_WIRE_H
#define SUMCAST_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tags.h"

#define WIRE_MAGIC 0x54534353u /* "SCST" little-endian */
#define WIRE_VERSION 8     /* the newest this build speaks */
#define WIRE_VERSION_MIN 2 /* the oldest it still speaks */
#define WIRE_HDR_LEN 16
#define WIRE_BODY_MAX 1024
#define WIRE_MSG_MAX (WIRE_HDR_LEN + WIRE_BODY_MAX)
#define WIRE_ADDR_MAX 64
#define WIRE_PROV_MAX 32
#define WIRE_TEXT_MAX 256
#define WIRE_TAG_LEN 32 /* HMAC-SHA256 */
#define WIRE_LABEL_MAX 64 /* a job label's bytes (version 6) */
#define WIRE_LABEL_VERSION 6 /* the first version that carries a job label */
#define WIRE_LANES_VERSION 7 /* the first version whose JOIN_OK may name lanes */
#define WIRE_LANES_MAX 8     /* a job's lanes (data threads) on one daemon */
#define WIRE_SPREAD_VERSION 8 /* the first version whose JOIN_OK may spread results */
#define WIRE_SPREAD_MAX 65536 /* the largest spread limit (result payload bytes) */

#define WIRE_RANKS_MAX 65535u      /* rank field is 16 bits */
#define WIRE_SLOTS_MAX (1u << 20)  /* window: below the seq's 2^24 (slot field is 24 bits) */
#define WIRE_JOB_HANDLE_MAX ((1u << 20) - 1)
#define WIRE_SEQ_MASK ((1u << 24) - 1)

enum wire_type {
	WIRE_HELLO = 1,   /* daemon -> rank */
	WIRE_JOIN = 2,    /* rank -> daemon */
	WIRE_JOIN_OK = 3, /* daemon -> rank */
	WIRE_REFUSE = 4,  /* daemon -> rank, then close */
	WIRE_READY = 5,   /* daemon -> rank: all ranks joined */
	WIRE_LEAVE = 6,   /* rank -> daemon */
	WIRE_ABORT = 7,   /* daemon -> rank: job is dead */
	WIRE_PING = 8,    /* rank -> daemon: liveness probe */
	WIRE_PONG = 9,    /* daemon -> rank: the PING's token */
	WIRE_DRAIN = 10,  /* daemon -> rank, version 5: move off this daemon */
	WIRE_TYPE_MAX = 10,
};

/* Refusal and abort codes. Each has a fixed short name (metrics label) and
 * the daemon adds a sentence with the values involved. */
enum wire_code {
	WIRE_OK = 0,
	WIRE_E_VERSION = 1,     /* protocol version mismatch */
	WIRE_E_AUTH = 2,        /* bad authentication tag */
	WIRE_E_JOB_FULL = 3,    /* all nranks already joined */
	WIRE_E_RANK_TAKEN = 4,  /* this rank already joined */
	WIRE_E_NRANKS = 5,      /* nranks differs from the job's */
	WIRE_E_MEMORY = 6,      /* the daemon's memory budget would be exceeded */
	WIRE_E_UNKNOWN_JOB = 7, /* no such job */
	WIRE_E_PARAMS = 8,      /* chunk/window/types differ from the job's or are invalid */
	WIRE_E_MALFORMED = 9,   /* message failed validation */
	WIRE_E_PROVIDER = 10,   /* rank uses another libfabric provider */
	WIRE_E_TIMEOUT = 11,    /* a rank was silent longer than the job timeout */
	WIRE_E_RANK_LEFT = 12,  /* a rank left or disconnected mid-job */
	WIRE_E_SHUTDOWN = 13,   /* daemon is shutting down */
	WIRE_E_DATA = 14,       /* contributions disagree (type, op, length, seq) */
	WIRE_E_INTERNAL = 15,   /* resource failure inside the daemon */
	WIRE_E_TOO_MANY_JOBS = 16,
	WIRE_CODE_MAX = 16,
};

const char *wire_code_name(enum wire_code c);   /* "auth", "job_full", ... */
const char *wire_type_name(enum wire_type t);

struct wire_hdr {
	uint16_t version;
	uint16_t type;
	uint32_t len; /* body length */
};

struct wire_hello {
	uint16_t version_min, version_max;
	uint64_t nonce;
};

struct wire_join {
	uint64_t job_id;
	uint32_t rank, nranks;
	uint32_t chunk_bytes; /* > 0, multiple of 8 */
	uint32_t window;      /* slots, 1..WIRE_SLOTS_MAX */
	uint32_t dtype_mask;  /* bit per enum sc_dtype the job may use */
	uint32_t timeout_ms;  /* rank silence limit the job asks for, 0: daemon default */
	uint16_t result_key;  /* echoed in RESULT tags (20-bit field, 16 used) */
	uint16_t flags;       /* WIRE_JOIN_F_* */
	uint16_t addr_len;
	uint8_t addr[WIRE_ADDR_MAX]; /* the rank's fabric address */
	char provider[WIRE_PROV_MAX]; /* NUL-terminated */
	uint8_t tag[WIRE_TAG_LEN];
	uint16_t weight; /* version 4: the job's share of the daemon against other
			  * jobs', 1..WIRE_WEIGHT_MAX; 0: none sent (1) */
	char label[WIRE_LABEL_MAX + 1]; /* version 6: the job's label, printable;
					 * "": none sent */
};

#define WIRE_WEIGHT_MAX 64

#define WIRE_JOIN_F_DETERMINISTIC 0x1 /* reduce in rank order */
#define WIRE_JOIN_F_UNICAST 0x2       /* results by unicast even where the daemon multicasts */
/* version 5: the ranks join a running communicator's job again (after a
 * fault or a drain of this address): the daemon counts the job rejoined */
#define WIRE_JOIN_F_REJOIN 0x4
#define WIRE_JOIN_F_ALL 0x7

struct wire_join_ok {
	uint32_t job_handle; /* goes in DATA tags */
	uint32_t window, chunk_bytes, timeout_ms;
	uint16_t flags;      /* WIRE_OK_F_* */
	uint16_t addr_len;
	uint8_t addr[WIRE_ADDR_MAX]; /* the daemon's data endpoint for this job */
	uint64_t data_nonce; /* WIRE_OK_F_SEALED: the job key's nonce (seal.h) */
	/* WIRE_OK_F_MCAST: results of this job also go to a multicast group
	 * (mcast.h; IPv4, over UDP or WIRE_OK_F_MCAST_IB); these follow
	 * data_nonce on the wire, 16 bytes */
	uint32_t mc_group;   /* IPv4 group, host byte order (224.0.0.0/4) */
	uint16_t mc_port;    /* UDP port, > 0 */
	uint16_t mc_payload; /* result bytes per datagram, 1..65507 - SC_MC_HDR */
	uint64_t mc_key;     /* the job's multicast key (in every datagram) */
	uint16_t weight;     /* version 4: the weight granted (JOIN's, capped by the
			      * daemon's max-weight); 0: none sent */
	/* version 7: the job's lanes (1: one, nothing sent; else 2..WIRE_LANES_MAX,
	 * which needs a weight) and the data endpoints of lanes 1..lanes-1
	 * (lane 0's is addr): slot s goes to lane s % lanes */
	uint8_t lanes;
	uint16_t lane_len[WIRE_LANES_MAX];
	uint8_t lane_addr[WIRE_LANES_MAX][WIRE_ADDR_MAX];
	/* version 8, with lanes: results of at most this many payload bytes
	 * come to rank r from lane (s + r) % lanes (wire_result_lane); 0: none
	 * sent, every result from lane s % lanes */
	uint32_t spread;
};

/* The daemon has a shared key: every data message of the job, both ways,
 * is sealed under the job key derived from it and data_nonce (seal.h);
 * chunk_bytes is the payload, the message carries SC_SEAL_TAG more. */
#define WIRE_OK_F_SEALED 0x1
/* The daemon multicasts results of this job (docs/daemon.md, "Multicast
 * results"): a rank that joins mc_group takes results from it; one that
 * cannot asks for each result by NACK (mode NACK) and gets it by unicast. */
#define WIRE_OK_F_MCAST 0x2
/* With WIRE_OK_F_MCAST: the group is joined over InfiniBand/RoCE (a UD
 * QP, librdmacm; mcast_ib.h), not by a UDP socket; mc_port is unused. */
#define WIRE_OK_F_MCAST_IB 0x4
#define WIRE_OK_F_ALL 0x7

struct wire_text {
	uint32_t job_handle; /* ABORT; 0 for REFUSE */
	uint16_t code;       /* enum wire_code */
	char text[WIRE_TEXT_MAX]; /* NUL-terminated sentence */
};

struct wire_ready {
	uint32_t job_handle;
	uint32_t nranks;
};

struct wire_leave {
	uint32_t job_handle;
};

struct wire_ping {
	uint64_t token; /* PING and PONG */
	/* PONG, version 3: the daemon's load when it answered */
	bool has_load;
	uint16_t load_pm; /* the busiest data thread's busy share over the last second, per mille */
	uint16_t jobs;    /* the asker's job + other jobs that moved data lately */
};

/* DRAIN: how long the daemon keeps serving the job, from when it sent this,
 * before it aborts what is left with WIRE_E_SHUTDOWN (0: it aborts at once). */
struct wire_drain {
	uint32_t deadline_ms;
};
#define WIRE_DRAIN_VERSION 5 /* the first version that has DRAIN */

struct wire_msg {
	uint16_t version; /* the header's; 0 encodes as WIRE_VERSION */
	uint16_t type;
	union {
		struct wire_hello hello;
		struct wire_join join;
		struct wire_join_ok join_ok;
		struct wire_text refuse; /* REFUSE */
		struct wire_text abort;  /* ABORT */
		struct wire_ready ready;
		struct wire_leave leave;
		struct wire_ping ping; /* PING, PONG */
		struct wire_drain drain;
	} u;
};

/* Header: needs WIRE_HDR_LEN bytes. Checks magic, reserved, type range,
 * length <= WIRE_BODY_MAX; -EPROTO if only the version is wrong (the
 * daemon answers that with a REFUSE in the rank's version when it can). */
int wire_hdr_decode(const uint8_t *buf, size_t len, struct wire_hdr *out);

/* Encodes header + body into buf. Returns the total length or -EINVAL
 * (invalid field) / -ENOSPC. Validates as strictly as the decoder. */
int wire_msg_encode(const struct wire_msg *m, uint8_t *buf, size_t cap);

/* Decodes and validates one body of the given type. */
int wire_msg_decode(uint16_t type, const uint8_t *body, size_t len, struct wire_msg *out);

/* Byte length of the JOIN body up to (not including) the tag. */
size_t wire_join_signed_len(const struct wire_join *j);

/* A job label (SUMCAST_JOB_LABEL) as a JOIN may carry it: at most
 * WIRE_LABEL_MAX bytes of printable ASCII (0x20..0x7e); "" is no label.
 * 0, or -EINVAL with a sentence in why that quotes the offending byte. */
int wire_label_check(const char *label, char *why, size_t whylen);

/* HMAC-SHA256 of ("sumcast-join-v1" || nonce (u64 LE) || join body without
 * the tag). key_len 0 writes zeros (authentication off). Returns 0 or -EIO. */
int wire_join_sign(const uint8_t *key, size_t key_len, uint64_t nonce, struct wire_join *j);
/* 0 if the tag matches (constant-time compare), -EACCES if not. */
int wire_join_verify(const uint8_t *key, size_t key_len, uint64_t nonce, const struct wire_join *j);

/* Reads a shared key file: at least 16 bytes after trimming trailing
 * whitespace, at most 256. Returns 0 or -errno / -EINVAL (too short);
 * *why gets a sentence for logs. */
int wire_key_load(const char *path, uint8_t *key, size_t *key_len, const char **why);

/* What a rank gives and takes for one chunk (the data word's mode). */
enum wire_mode {
	WIRE_MODE_ALL = 0,  /* contributes, gets the result */
	WIRE_MODE_GIVE = 1, /* contributes, gets an empty result (its credit) */
	WIRE_MODE_TAKE = 2, /* sends an empty message, gets the result */
	WIRE_MODE_MAX = 2,  /* the modes of a contribution */
	/* Not a contribution: in a multicast job (WIRE_OK_F_MCAST), "send me
	 * the result of this chunk by unicast" — the rank missed datagrams, or
	 * is not in the group. Tag NACK(job handle, rank, the chunk's slot)
	 * (tags.h), data word with the chunk's seq and this mode, sent after
	 * the rank's contribution; its payload is a NACK (mcast.h: the ranges
	 * missing, for the record) and, sealed, opens under SC_SEAL_NACK. The
	 * daemon sends the whole result once to that rank. */
	WIRE_MODE_NACK = 3,
};

/* Immediate data of a data-plane message (tags: tags.h). */
#define WIRE_IMM_MODE_SHIFT 24
#define WIRE_IMM_MODE_MASK (0x3u << WIRE_IMM_MODE_SHIFT)
static inline uint32_t wire_imm_make(unsigned dtype, unsigned op, uint32_t seq)
{
	return ((uint32_t)(dtype & 0xF) << 28) | ((uint32_t)(op & 0x3) << 26) | (seq & WIRE_SEQ_MASK);
}
static inline uint32_t wire_imm_with_mode(uint32_t d, unsigned mode)
{
	return (d & ~WIRE_IMM_MODE_MASK) | ((uint32_t)(mode & 0x3) << WIRE_IMM_MODE_SHIFT);
}
static inline unsigned wire_imm_dtype(uint32_t d) { return d >> 28; }
static inline unsigned wire_imm_op(uint32_t d) { return (d >> 26) & 0x3; }
static inline unsigned wire_imm_mode(uint32_t d) { return (d >> WIRE_IMM_MODE_SHIFT) & 0x3; }
/* The data word without its mode: what a RESULT carries and seals. */
static inline uint32_t wire_imm_plain(uint32_t d) { return d & ~WIRE_IMM_MODE_MASK; }
static inline uint32_t wire_imm_seq(uint32_t d) { return d & WIRE_SEQ_MASK; }

/* Whether a result of `len` payload bytes is spread over the lanes, under
 * spread limit `spread` (JOIN_OK, version 8; 0: none). */
static inline bool wire_result_spread(uint32_t spread, size_t len)
{
	return spread && len <= spread;
}

/* The lane that sends rank `rank` the result of slot `slot` whose payload
 * is `len` bytes, in a job of `lanes` lanes with spread limit `spread`: the
 * rule the daemon sends by and the rank posts its directed receive by. */
static inline uint32_t wire_result_lane(uint32_t slot, uint32_t rank, uint32_t lanes, uint32_t spread,
					size_t len)
{
	if (lanes <= 1)
		return 0;
	return wire_result_spread(spread, len) ? (uint32_t)(((uint64_t)slot + rank) % lanes) : slot % lanes;
}

#endif
