/* Private to the control-plane files; everything here runs on the main
 * thread (the event loop). One file per step of a rank's way in and out:
 *
 *   ctl_conn.c    a control connection: accept, framing (header, message,
 *                 dispatch), send, refuse, close
 *   ctl_admit.c   admission: the JOIN checks and refusals, the grants,
 *                 JOIN_OK and READY once the data thread has the rank;
 *                 LEAVE
 *   ctl_job.c     job lifecycle: create, ready, abort, end, free, the join
 *                 timer, a rank gone (job.h: the whole path, both threads)
 *   ctl_main.c    start and stop, events from the data threads, drain
 *   ctl_reload.c  SIGHUP
 *
 * The data plane never includes this header. */
#ifndef SUMCASTD_CTL_H
#define SUMCASTD_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon.h"
#include "job.h"
#include "wire.h"

struct bufferevent;

/* ---- ctl_conn.c: control connections ---- */

enum conn_state {
	CONN_HELLO = 0, /* HELLO sent, waiting for JOIN (handshake timeout) */
	CONN_JOINING,   /* JOIN taken, the data thread is adding the rank */
	CONN_JOINED,    /* JOIN_OK sent: LEAVE is the only message left */
	CONN_CLOSING,   /* reads off, freed once the output is written */
};

struct conn {
	struct daemon *d;
	struct bufferevent *bev;
	uint64_t nonce;
	int state;
	struct job *job; /* set while the connection is a rank of job (detach: job_rank_gone) */
	uint32_t rank;
	uint16_t ver; /* wire version: WIRE_VERSION_MIN until the rank's JOIN says */
	char peer[64];
	LIST_ENTRY(conn) link; /* the daemon's conns */
};

/* The daemon's load for a PONG (version 3): the busiest data thread's busy
 * share over the last quarter second or more, per mille. */
uint16_t daemon_load_pm(struct daemon *d);
/* The jobs for a PONG to a rank of self (version 3): self and the other
 * live jobs that moved a chunk within [job] tenant-idle. */
uint16_t daemon_jobs_for(struct daemon *d, const struct job *self);

/* The control listener ([control] listen, port). */
int conn_listen_start(struct daemon *d);
void conn_listen_stop(struct daemon *d);
/* Encodes and queues m. 0 or -errno. */
int conn_send(struct conn *c, const struct wire_msg *m);
/* REFUSE(code, sentence), counted as an error of that kind, then closed
 * after the write. */
void conn_refuse(struct conn *c, enum wire_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same for a sentence that names another job's settings (its ranks,
 * chunk, window, ...): a daemon without a key, which anyone who reaches
 * the port can ask, sends only `reason` (which names no value of the job);
 * the daemon's log has the whole sentence either way. */
void conn_refuse_job(struct conn *c, enum wire_code code, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* ABORT(handle, code, text), then closed after the write. */
void conn_abort(struct conn *c, uint32_t handle, enum wire_code code, const char *text);
/* Every way a connection closes goes through conn_free or
 * conn_close_after_flush, and both first detach it from its job: a rank
 * whose connection goes away without a LEAVE is gone (job_rank_gone), so no
 * job ever keeps a pointer to a freed connection. A caller that must not
 * make the rank "gone" (job_abort, job_end) clears c->job and the rank's
 * conn first. */
void conn_free(struct conn *c);
/* Stop reading, free once what is queued has been written (bounded). Never
 * frees c before returning. */
void conn_close_after_flush(struct conn *c);
/* The JOIN was taken: the handshake timeout no longer applies. */
void conn_handshake_done(struct conn *c);
/* Reads what the peer sent while the JOIN was pending. */
void conn_read_pending(struct conn *c);
/* control_stop: every connection freed, nobody told. */
void conn_free_all(struct daemon *d);

/* ---- ctl_admit.c: admission ---- */

/* JOIN on c: every check, in order (docs/daemon.md), a refusal naming the
 * first that fails, else the rank is taken (job created on its first JOIN)
 * and the data thread asked to add it (ADD_RANK). */
void admit_join(struct conn *c, const struct wire_join *w);
/* The data thread answered ADD_RANK: JOIN_OK (and READY to every rank once
 * all joined), or a refusal when the provider rejected the address. */
void admit_rank_added(struct daemon *d, struct dcmd *ev);
/* LEAVE on c: the rank is gone cleanly, the connection closes. */
void admit_leave(struct conn *c, const struct wire_leave *l);

/* ---- ctl_job.c: job lifecycle (job.h: who calls what) ---- */

/* The live (not ENDING) job with this id, or NULL. */
struct job *job_find(struct daemon *d, uint64_t id);
/* What admission (common/admit.h) reads of d: its settings as limits, its
 * load (jobs, memory, each data thread's free receive queue and jobs, into
 * rx_free[] and thread_jobs[] of d->nthreads entries). A new job goes to
 * the data thread with room for its receives and the fewest jobs: a
 * receive the provider refuses waits for a repost while its rank's message
 * waits in the unexpected queue, so past the queue's size a job could
 * deadlock, its reposts losing every free entry to the other ranks'. */
void job_admit_state(const struct daemon *d, struct admit_limits *lim, struct admit_load *load,
		     uint64_t *rx_free, uint32_t *thread_jobs);
/* A new job for w's first JOIN with the granted window, chunk, timeout,
 * in `lanes` lanes (job.h), lane i on data thread ts[i] (job_admit_state,
 * admit_decide: admit_verdict lane_thread); each lane is charged its region and
 * bookkeeping. Its regions are mapped, its join timer armed and ADD_JOB
 * sent to each lane's thread. NULL: no memory or no free handle. Returns
 * the lead (lane 0). */
struct job *job_create(struct daemon *d, const struct wire_join *w, struct dthread *const *ts,
		       uint32_t lanes, uint32_t window, uint32_t chunk, uint32_t timeout_ms, bool has16);
/* Every rank joined: READY, join timer off, READY sent to every rank. */
void job_ready(struct daemon *d, struct job *j);
/* Tells every rank still attached (ABORT), then job_end. */
void job_abort(struct daemon *d, struct job *j, enum wire_code code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The one way a job ends: ENDING, connections detached, REMOVE_JOB sent.
 * Its memory returns when the data thread answers (job_free). */
void job_end(struct daemon *d, struct job *j);
/* Unlinks and frees j (a lead) with its lanes and uncharges their memory:
 * every lane's REMOVE_JOB answered, or control_stop with the data threads
 * stopped. */
void job_free(struct daemon *d, struct job *j);
/* DEV_RELEASED: the region's pages are back; only the bookkeeping stays
 * charged until job_free. */
void job_region_released(struct daemon *d, struct job *j);
/* The rank on c is gone: LEAVE (clean) or its connection closed. Ends the
 * job when every rank is gone and nothing waits, aborts it when others
 * still wait; detaches c either way. */
void job_rank_gone(struct conn *c, bool clean);

/* ---- ctl_reload.c ---- */

/* Loads auth.key-file (empty path: no key). 0 or -errno, logged. */
int ctl_key_load(const char *path, uint8_t *key, size_t *len);

#endif
