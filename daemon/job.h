/* One job: the ranks that joined under one job id, and (on its data thread)
 * its slots and buffers.
 *
 * Ownership. The control thread allocates and frees struct job and owns the
 * "control" fields. The data thread the job is assigned to owns the "data"
 * fields from the ADD_JOB command until it answers the REMOVE_JOB command;
 * the control thread never touches them in between. The "shared" fields are
 * written by the data thread only and read by the control thread with
 * relaxed loads (stats, the partial-slot count). Commands and events travel
 * through mutex-protected queues, which order everything written before
 * them. Command structs are embedded in the job and answered in place, so a
 * job's commands die with it.
 *
 * Life and end of a job: one path over two threads. Control-thread verbs
 * are declared in ctl.h (ctl_job.c), data-thread verbs in dp.h (dp_job.c);
 * neither plane includes the other's header.
 *
 *   control thread                         data thread
 *   job_create (first JOIN) --- ADD_JOB --> dp_job_add: register, result init
 *   (each JOIN) -------------- ADD_RANK --> dp_rank_add: AV, post receives
 *   job_abort <-------------- DEV_ABORT --- dp_job_fail: bad data, timeout,
 *     ABORT to every attached rank,           fabric error
 *     then:
 *   job_end ---------------- REMOVE_JOB --> dp_job_remove: cancel receives
 *   job_region_released <-- DEV_RELEASED -- dp_job_release_stuck: sends still
 *     (buffers uncharged)                     outstanding after stuck-grace
 *                                           dp_job_reap: no operation is
 *                                             outstanding any more: deregister,
 *   job_free <------ REMOVE_JOB answered ---  unmap, answer
 *
 * - job_end (control) is the one way a job ends: state ENDING, every
 *   connection detached, REMOVE_JOB sent. Idempotent. Called by job_abort,
 *   by job_rank_gone when the last rank is gone and nothing waits, and by
 *   admission when the only rank of a joining job was refused.
 * - job_abort (control) tells every rank still attached (ABORT, then the
 *   connection closes), then job_end. Called by the join timer,
 *   job_rank_gone, the drain, a failed ADD_JOB and DEV_ABORT. No-op on an
 *   ENDING job.
 * - job_free (control) is the only place struct job is freed: when the data
 *   thread answered REMOVE_JOB, or in control_stop after the data threads
 *   stopped.
 * - The data thread never ends or frees a job. dp_job_fail marks it dead
 *   (no contribution is taken any more, receives are cancelled) and asks
 *   the control thread to abort it (DEV_ABORT), once. dp_job_remove and
 *   dp_job_reap run only after job_end's REMOVE_JOB; dp_job_reap is called
 *   again after every completion of a removed job until it answers.
 *
 * Memory: one page-aligned region per job, registered once:
 *   [window x nranks receive buffers of chunk bytes][window accumulators]
 *   and in multicast jobs [window x nranks NACK buffers of JOB_NACK_UNIT]
 * An accumulator is chunk bytes, or 2 x chunk (f32) when the job may send
 * f16/bf16. So a job's region is window x chunk x (nranks + 1, or + 2)
 * bytes; the budget is charged that plus the bookkeeping (job_book_bytes).
 *
 * Buffers rotate. Each slot owns nranks + 1 chunk-sized units: its ranks'
 * receive buffers (rslot->buf) and its accumulator (slot->acc), pointers
 * into the region that start at the layout above (job_slots_init). When the
 * first contribution of a slot arrives in a type the daemon accumulates as
 * is (not f16/bf16), the slot adopts the rank's buffer as its accumulator
 * and the rank's next receive goes into the old accumulator: no copy. A job
 * with f16/bf16 has one more unit per slot that never moves,
 * job_acc_hi(): a 16-bit chunk of n elements widens its first chunk / 4
 * elements into slot->acc and the rest (at most chunk / 4) there, and the
 * rounded result is written back contiguously into slot->acc.
 *
 * Lanes: one job over several data threads ([data] job-threads). A job of
 * L lanes is L struct jobs of the same id, handle, ranks and parameters,
 * one per data thread, each with an endpoint address of its own (JOIN_OK
 * names them all, wire.h version 7). Slot s lives on lane s % L: the
 * ranks send slot s's chunks to that lane, so every contribution of a
 * chunk meets on one thread and the slot state machine stays
 * single-threaded. Lane 0 is the lead: the job as the control thread sees
 * it (the daemon's job list, connections, READY, the pacer, /stats); the
 * others hang off it (lane_next) and only carry commands to their threads
 * and back. A lane's region holds its own slots only (lane_window of them,
 * slot s at index s / L); its slots[] and rslots[] arrays are the whole
 * window's, the other lanes' slots FREE and never posted. What the data
 * threads write into the shared fields is summed over the lanes when the
 * control thread reads it (job_sum_*). A small result (at most the job's
 * spread, wire.h version 8) goes to rank r from lane (s + r) % L: the
 * lane of slot s hands the other lanes their ranks' sends (dp_result.c,
 * "Spread"). */
#ifndef SUMCASTD_JOB_H
#define SUMCASTD_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "admit.h"
#include "defer.h"
#include "fabric.h"
#include "seal.h"
#include "wire.h"

/* SLIST_REMOVE for an element that may not be in the list, where glibc's
 * would walk off its end: a job whose ADD_JOB failed was never on its data
 * thread's list. One pass from the head, as SLIST_REMOVE. */
#define SC_SLIST_UNLINK(head, elm, type, field)                                  \
	do {                                                                     \
		struct type **pp_ = &SLIST_FIRST(head);                          \
		while (*pp_ && *pp_ != (elm))                                    \
			pp_ = &SLIST_NEXT(*pp_, field);                          \
		if (*pp_)                                                        \
			*pp_ = SLIST_NEXT(elm, field);                           \
	} while (0)

struct conn;
struct dthread;
struct sc_mc_sender;
struct job;

/* Completion context of one posted operation. */
enum dop_kind { DOP_RECV = 1, DOP_SEND = 2, DOP_SWEEP = 3 /* dp_sweep.c */, DOP_NACK = 4 };
struct dop {
	struct fabric_op op; /* first */
	struct job *job;
	uint32_t slot;
	uint16_t rank;
	uint8_t kind;
};

/* One rank's receive buffer in one slot (data thread). */
enum rslot_state {
	RS_IDLE = 0, /* not posted */
	RS_POSTED,   /* receive posted */
	RS_REPOST,   /* must be posted (the provider said -FI_EAGAIN) */
	RS_PENDING,  /* holds chunk c + window while the slot still sends chunk c */
	RS_HELD,     /* contributed, not reduced yet (deterministic mode) */
};
struct rslot {
	struct dop rop, sop; /* receive into the buffer; result send to the rank */
	struct dop nop;      /* multicast jobs: the rank's NACK receive for this slot */
	uint8_t nstate;      /* of that receive: RS_IDLE, RS_POSTED or RS_REPOST */
	uint8_t *buf;        /* receive buffer, chunk bytes (rotates with slot->acc) */
	uint32_t imm, len;   /* of the message that arrived */
	uint8_t state;
	bool contributed;    /* to the slot's current seq */
	bool wants;          /* its mode (wire.h) asks for the result, not an empty one */
	/* multicast jobs: the rank asked for this seq's result by unicast
	 * (a NACK), or for seq + window's (the NACK came first); its unicast
	 * send is still to be posted */
	bool nack, nack_next, uni;
	bool held; /* uni, held for the rank's last result send (dp_result.c) */
	bool out;  /* its result send posted and not completed (dp_result.c) */
};

enum slot_state { SLOT_FREE = 0, SLOT_FILLING, SLOT_SENDING };
struct slot {
	struct job *job;
	uint32_t index;
	uint8_t state;
	uint32_t seq;        /* seq the slot expects (or is sending) */
	uint64_t chunk;      /* the job's chunk number of seq (sealed IVs) */
	uint32_t imm, len;   /* imm without its mode (wire_imm_plain), of the first
			      * message; len of the first with data: all must agree */
	uint32_t ncontrib;   /* messages in, TAKE's empty ones included */
	uint32_t ndata;      /* contributions with data (ALL, GIVE) */
	uint32_t npending;
	uint32_t send_next;  /* lowest rank whose unicast result send may still be due */
	bool planned;        /* dp_result.c decided who gets it how (reset at completion) */
	bool mc;             /* the result went to the job's multicast group: kept
			      * until every rank sent seq + window (dp_result.c) */
	uint32_t sends_left; /* result sends not completed yet */
	uint32_t last_rank;
	uint64_t first_ns, last_ns, reduce_ns;
	uint8_t *acc;        /* chunk bytes; f16/bf16: + job_acc_hi() (see above) */
	struct defer retry;  /* a post of it refused -FI_EAGAIN: on the thread's queue */
};

/* A command to a data thread, answered (the same struct) as an event. */
enum dcmd_type {
	DCMD_ADD_JOB = 1, /* rc: 0 or -errno (MR registration) */
	DCMD_ADD_RANK,    /* rc: 0 or -errno (bad address) */
	DCMD_REMOVE_JOB,  /* answered (same type) once every operation completed */
	DEV_ABORT,        /* data thread -> control: job->abort_code/text */
	DEV_RELEASED,     /* data -> control: a removed job's region was given back
			   * to the kernel (stuck sends); its operations are
			   * still outstanding */
	DCMD_RANK_LEFT,   /* a rank left cleanly, the job goes on: a chunk that
			   * needs it fails the job at once (not answered) */
};
struct dcmd {
	int type;
	int rc;
	struct job *job;
	uint32_t rank;
	STAILQ_ENTRY(dcmd) link; /* in a command or an event queue */
};

enum rank_state { RANK_NONE = 0, RANK_ADDING, RANK_JOINED, RANK_LEFT, RANK_GONE };

struct job_rank {
	/* control */
	struct conn *conn;
	uint8_t state;
	uint16_t result_key;
	uint16_t addr_len;
	uint8_t addr[WIRE_ADDR_MAX];
	uint8_t lane_acks, lane_fails; /* lead: lanes that answered its ADD_RANK, failed */
	struct dcmd cmd_add;
	struct dcmd cmd_left; /* DCMD_RANK_LEFT */
	/* data */
	fi_addr_t fi_addr;
	bool added; /* holds a reference on fi_addr */
	bool left;  /* left cleanly: it will contribute nothing more */
	/* result sends (with a completion) posted to it, not completed; a
	 * slot's send to it held until that one completes (dp_result.c) */
	uint32_t res_out;
	bool res_wait;
	int16_t lane_rc; /* control, lead: a failed lane's ADD_RANK error (here: padding) */
	/* shared (data writes) */
	_Atomic uint64_t bytes_in, last_count, last_wait_ns;
};

enum job_state { JOB_JOINING = 0, JOB_READY, JOB_ENDING };

struct job {
	/* immutable after creation */
	uint64_t id;
	uint32_t handle;
	uint32_t nranks, window, chunk, dtype_mask, timeout_ms;
	/* lanes (above): this struct's lane, the job's count, and how many
	 * slots of the window are this lane's */
	uint32_t lane, lanes, lane_window;
	/* results of at most this many payload bytes go to rank r from lane
	 * (s + r) % lanes (wire_result_lane; JOIN_OK, version 8); 0: from s's */
	uint32_t spread;
	uint16_t flags;
	bool has16;
	/* Sealed (the daemon has a key, seal.h): every DATA and RESULT is
	 * payload + SC_SEAL_TAG. Buffers stay chunk bytes; the payload granted
	 * is chunk - JOB_SEAL_ROOM. The key is derived at creation and used
	 * by the data thread only. */
	bool sealed;
	uint32_t payload;    /* largest contribution: chunk, or chunk - JOB_SEAL_ROOM */
	uint64_t data_nonce; /* sent in JOIN_OK */
	struct sc_seal seal;
	/* Multicast results (fabric.multicast, dp_result.c): the job's group, its
	 * random key (in every datagram) and result bytes per datagram. */
	bool mc;
	int mc_via;        /* enum sc_mc_via (mcast_link.h) */
	uint32_t mc_group; /* IPv4, host byte order */
	uint16_t mc_port, mc_payload;
	uint64_t mc_key;
	size_t acc_bytes; /* per slot */
	size_t region_bytes; /* the buffer region (mmap, registered) */
	size_t mem_bytes;    /* region + bookkeeping: what the budget is charged */
	struct dthread *thread;
	/* what the first JOIN asked for (later JOINs must ask the same) */
	uint32_t req_chunk, req_window, req_timeout_ms;
	uint16_t req_weight; /* asked (1 when none was sent: version < 4) */
	uint16_t weight;     /* granted: the window is the base window times this */
	/* the job's label (SUMCAST_JOB_LABEL, protocol 6), printable ASCII:
	 * the first JOIN's that had one; "": none. Shown in /stats, never a
	 * metric label (unbounded values). */
	char label[WIRE_LABEL_MAX + 1];

	/* control */
	void *ctl; /* struct daemon */
	struct job *lead;      /* lane 0 (itself there) */
	struct job *lane_next; /* the lead's chain of the other lanes */
	uint32_t lanes_removed; /* lead: lanes whose REMOVE_JOB was answered */
	int state;
	/* chunks as of the last PONG's look, and when they last moved (ms, 0:
	 * never): a tenant of the daemon is a job that moves data (ctl_conn.c) */
	uint64_t chunks_seen, active_ms;
	/* the pacer's (pacer.c): bytes_out at its last tick, the job's rate
	 * (bytes/s, smoothed) and the rate it holds the job to (0: none) */
	uint64_t pace_seen;
	uint32_t pace_ticks; /* ticks its rate was measured moving data, up to PACE_WARM_TICKS */
	uint32_t pace_backoff; /* ticks before it may count as held by the link again */
	bool pace_link;        /* counted as held by the link at the last tick */
	double pace_rate, pace_cap;
	uint32_t joined, acked, gone;
	uint64_t created_ms;
	/* the drain (ctl_main.c): DRAIN went to every rank at drain_ms, when
	 * the job had reduced drain_chunks; it ends by its ranks' LEAVEs */
	bool draining;
	uint64_t drain_ms, drain_chunks;
	struct event *join_timer;
	SLIST_ENTRY(job) link;   /* the daemon's jobs (control thread) */
	bool abort_sent;
	uint32_t stuck_grace_ms; /* set before REMOVE_JOB, read by the data thread */
	bool region_released;    /* DEV_RELEASED seen: region_bytes not charged */
	struct dcmd cmd_add, cmd_remove; /* commands live in the job: no malloc */

	/* data */
	void *region;
	struct fabric_mr mr;
	/* The endpoint its ranks talk to: the thread's, or one of its own
	 * (where thread->isolate), set by ADD_JOB, read for JOIN_OK. NULL
	 * once closed (dp_job_ep_close). */
	struct fabric *fab;
	struct sc_mc_sender *mc_tx; /* the job's multicast sender (mc jobs) */
	struct slot *slots;
	struct rslot *rslots; /* [slot * nranks + rank] */
	SLIST_ENTRY(job) dlink; /* its data thread's jobs */
	uint32_t ops_out;      /* posted receives + sends not completed */
	uint32_t nleft;        /* ranks with left set */
	uint32_t trunc_drops;  /* oversize messages dropped (source unknown) */
	uint64_t last_activity_ns;
	bool dead, removing;
	uint64_t removed_ns;   /* when REMOVE_JOB arrived */
	/* result sends held to pace_bps (dp_result.c): a token bucket, bytes
	 * (negative: owed), refilled up to when */
	int64_t pace_tokens;
	uint64_t pace_ns;
	bool stuck_reported;   /* ops outstanding past stuck_grace_ms: handled */
	struct dcmd release_ev; /* DEV_RELEASED */
	struct dcmd abort_ev;
	uint16_t abort_code;
	char abort_text[WIRE_TEXT_MAX];

	/* shared (data writes, control reads) */
	_Atomic uint32_t partial; /* slots with some but not all contributions */
	_Atomic uint32_t ops_seen; /* ops_out as of the last scan (every 20 ms) */
	_Atomic uint64_t bytes_in, bytes_out, chunks;
	/* control writes, data reads: result bytes/s the job is held to
	 * (pacer.h; 0: none) */
	_Atomic uint64_t pace_bps;

	struct job_rank ranks[];
};

static inline struct rslot *job_rslot(struct job *j, uint32_t slot, uint32_t rank)
{
	return &j->rslots[(size_t)slot * j->nranks + rank];
}

/* Slots of a window of w on lane `lane` of `lanes`: s < w with s % lanes == lane. */
static inline uint32_t job_lane_window(uint32_t w, uint32_t lane, uint32_t lanes)
{
	return admit_lane_window(w, lane, lanes);
}

/* Whether slot s is this lane's. */
static inline bool job_slot_mine(const struct job *j, uint32_t s)
{
	return s % j->lanes == j->lane;
}

/* Where rank's receive buffer of slot starts (before any rotation); slot
 * is one of this lane's. */
static inline uint8_t *job_rbuf(struct job *j, uint32_t slot, uint32_t rank)
{
	return (uint8_t *)j->region + ((size_t)(slot / j->lanes) * j->nranks + rank) * j->chunk;
}

/* Where slot's accumulator starts (before any rotation). */
static inline uint8_t *job_acc0(struct job *j, uint32_t slot)
{
	return (uint8_t *)j->region + (size_t)j->lane_window * j->nranks * j->chunk +
	       (size_t)(slot / j->lanes) * j->acc_bytes;
}

/* A job with f16/bf16: the slot's fixed second accumulator unit. */
static inline uint8_t *job_acc_hi(struct job *j, uint32_t slot)
{
	return job_acc0(j, slot) + j->chunk;
}

/* Every slot at its first seq with its units at their starting places in
 * the region (before any rotation). */
static inline void job_slots_init(struct job *j)
{
	for (uint32_t s = 0; s < j->window; s++) {
		j->slots[s].job = j;
		j->slots[s].index = s;
		j->slots[s].seq = s & WIRE_SEQ_MASK;
		j->slots[s].chunk = s;
		if (!job_slot_mine(j, s))
			continue; /* another lane's: stays FREE, never posted */
		j->slots[s].acc = job_acc0(j, s);
		for (uint32_t r = 0; r < j->nranks; r++)
			job_rslot(j, s, r)->buf = job_rbuf(j, s, r);
	}
}

/* Multicast jobs: each (slot, rank) has a NACK receive of its own (tag
 * NACK, tags.h) into a buffer of this many bytes after the accumulators,
 * so that a NACK always finds its receive posted (dp_sweep.c). */
#define JOB_NACK_UNIT ADMIT_NACK_UNIT

static inline uint8_t *job_nbuf(struct job *j, uint32_t slot, uint32_t rank)
{
	return (uint8_t *)j->region + j->region_bytes -
	       ((size_t)j->lane_window * j->nranks - ((size_t)(slot / j->lanes) * j->nranks + rank)) *
		       JOB_NACK_UNIT;
}

/* Room a sealed job keeps in each chunk buffer for the tag (a multiple of
 * 64 so that payloads stay aligned for every type). */
#define JOB_SEAL_ROOM ADMIT_SEAL_ROOM

/* The sizes of this daemon's bookkeeping, for admission's arithmetic
 * (common/admit.h): struct job with its ranks, the slots and the
 * per-rank-per-slot rslots. */
static inline struct admit_sizes job_admit_sizes(void)
{
	return (struct admit_sizes){ sizeof(struct job), sizeof(struct job_rank), sizeof(struct slot),
				     sizeof(struct rslot) };
}

/* Receives a job keeps posted: a DATA one per (slot, rank), and a NACK one
 * in multicast jobs. */
static inline uint64_t job_recvs(uint32_t window, uint32_t nranks, bool mc)
{
	return admit_recvs(window, nranks, mc);
}

/* Bytes of a job's buffer region (receive buffers + accumulators [+ NACK
 * buffers]). */
static inline uint64_t job_region_bytes(uint32_t window, uint32_t chunk, uint32_t nranks, bool has16,
					bool mc)
{
	return admit_region_bytes(window, chunk, nranks, has16, mc);
}

/* Bytes of a job's bookkeeping on the heap. */
static inline uint64_t job_book_bytes(uint32_t window, uint32_t nranks)
{
	struct admit_sizes sz = job_admit_sizes();
	return admit_book_bytes(&sz, window, nranks);
}

/* What the data threads of a job's lanes wrote, summed (control thread,
 * relaxed loads; lead is lane 0). */
#define JOB_FOR_LANES(lead, l) for (struct job *l = (lead); l; l = l->lane_next)

static inline uint64_t job_sum_ctr(const struct job *lead, size_t off)
{
	uint64_t v = 0;
	JOB_FOR_LANES((struct job *)lead, l)
		v += atomic_load_explicit((const _Atomic uint64_t *)((const char *)l + off), memory_order_relaxed);
	return v;
}
#define job_sum_chunks(j) job_sum_ctr((j), offsetof(struct job, chunks))
#define job_sum_bytes_in(j) job_sum_ctr((j), offsetof(struct job, bytes_in))
#define job_sum_bytes_out(j) job_sum_ctr((j), offsetof(struct job, bytes_out))

static inline uint32_t job_sum_partial(const struct job *lead)
{
	uint32_t v = 0;
	JOB_FOR_LANES((struct job *)lead, l)
		v += atomic_load_explicit(&l->partial, memory_order_relaxed);
	return v;
}

static inline uint32_t job_sum_ops_seen(const struct job *lead)
{
	uint32_t v = 0;
	JOB_FOR_LANES((struct job *)lead, l)
		v += atomic_load_explicit(&l->ops_seen, memory_order_relaxed);
	return v;
}

/* Bytes charged for the job, all lanes. */
static inline uint64_t job_sum_mem(const struct job *lead)
{
	uint64_t v = 0;
	JOB_FOR_LANES((struct job *)lead, l)
		v += l->mem_bytes;
	return v;
}

/* Receives the lane keeps posted (job_recvs of its own slots). */
static inline uint64_t job_lane_recvs(const struct job *j)
{
	return job_recvs(j->lane_window, j->nranks, j->mc);
}

#endif
