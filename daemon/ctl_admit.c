/* Admission: whether a JOIN may join (the checks, in the order
 * docs/daemon.md lists them, each failing one refused with its code and a
 * sentence naming the values), what it is granted (window, chunk, timeout),
 * and the answer once the data thread has the rank (JOIN_OK; the last one
 * makes the job READY). Also LEAVE, the way out. */
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <string.h>

#include "admit.h"
#include "ctl.h"
#include "fabric.h"
#include "log.h"
#include "mcast_link.h"
#include "notify.h"
#include "reduce.h"

static const uint32_t MASK16 = (1u << SC_F16) | (1u << SC_BF16);

/* The refusals any JOIN meets before its job is looked up: a second JOIN
 * on the connection, a daemon shutting down, a tag that does not match,
 * another provider, an address the data endpoints refuse. true: refused
 * (the answer sent). */
static bool join_refused(struct conn *c, const struct wire_join *w)
{
	struct daemon *d = c->d;

	if (c->state != CONN_HELLO) {
		conn_refuse(c, WIRE_E_MALFORMED, "this connection already joined job 0x%" PRIx64
			    "; one connection per rank", c->job ? c->job->id : 0);
		return true;
	}
	if (d->draining) {
		conn_refuse(c, WIRE_E_SHUTDOWN, "daemon is shutting down");
		return true;
	}
	if (d->key_len && wire_join_verify(d->key, d->key_len, c->nonce, w)) {
		conn_refuse(c, WIRE_E_AUTH, "job 0x%" PRIx64 " rank %u: authentication tag does not match",
			    w->job_id, w->rank);
		return true;
	}
	if (!fabric_provider_same(w->provider, d->provider)) {
		conn_refuse(c, WIRE_E_PROVIDER, "daemon's data endpoints use provider %s, request says %s",
			    d->provider, w->provider);
		return true;
	}
	/* Before anything is inserted anywhere: every data thread's endpoint
	 * has the same provider and address format. */
	const struct fabric *f0 = d->threads[0].fabric;
	const char *why = NULL;
	if (fabric_addr_check(f0, w->addr, w->addr_len, &why)) {
		conn_refuse(c, WIRE_E_MALFORMED, "rank %u's fabric address (%u bytes) was refused: %s "
			    "(this daemon's %s endpoints take %s addresses)",
			    w->rank, w->addr_len, why, fabric_provider(f0),
			    fi_tostr(&f0->info->addr_format, FI_TYPE_ADDR_FORMAT));
		return true;
	}
	return false;
}

/* A refusing verdict said to the joining rank, with the values that
 * decided it. true: refused. */
static bool verdict_refused(struct conn *c, const struct wire_join *w, const struct admit_verdict *v,
			    bool has16)
{
	const struct daemon *d = c->d;
	const struct settings *cfg = &d->cfg;

	switch (v->rule) {
	case ADMIT_OK:
		return false;
	case ADMIT_SEALED_CHUNK:
		conn_refuse(c, WIRE_E_PARAMS, "job 0x%" PRIx64 ": chunk %u cannot carry sealed data "
			    "(this daemon has a key: %u bytes of each chunk hold the seal)",
			    w->job_id, v->chunk, JOB_SEAL_ROOM);
		break;
	case ADMIT_MAX_JOBS:
		conn_refuse(c, WIRE_E_TOO_MANY_JOBS, "daemon serves %u jobs, max-jobs is %lld",
			    d->njobs_live, (long long)cfg->max_jobs);
		break;
	case ADMIT_MEMORY_SHARE:
	case ADMIT_MEMORY_BUDGET: {
		char need[192];
		snprintf(need, sizeof(need), "job 0x%" PRIx64 " needs %" PRIu64 " bytes (window %u x chunk %u x "
			 "(%u ranks + %u) + %" PRIu64 " bookkeeping)", w->job_id, v->mem_bytes, v->window,
			 v->chunk, w->nranks, has16 ? 2 : 1, v->book_bytes);
		if (v->rule == ADMIT_MEMORY_SHARE)
			conn_refuse(c, WIRE_E_MEMORY, "%s, more than max-memory-share %g of the %" PRIu64
				    " byte budget (%" PRIu64 ")", need, cfg->max_memory_share,
				    (uint64_t)cfg->memory_budget, v->share_bytes);
		else
			conn_refuse(c, WIRE_E_MEMORY, "%s, %" PRIu64 " of the %" PRIu64 " byte budget are free",
				    need, v->budget_free, (uint64_t)cfg->memory_budget);
		break;
	}
	case ADMIT_RECEIVE_QUEUE:
		conn_refuse(c, WIRE_E_MEMORY,
			    "job 0x%" PRIx64 " posts %" PRIu64 " receives (window %u x %u ranks); no data thread's receive queue has room, nor do the threads for its lanes (at most %" PRIu64 " of %" PRIu64 " free: [data] threads, or the provider's queue size, FI_OFI_RXM_RX_SIZE / FI_SHM_RX_SIZE)",
			    w->job_id, v->recvs, v->window, w->nranks, v->rx_room, d->threads[0].rx_queue);
		break;
	}
	return true;
}

/* The log line of a job created: what it was granted, and where. */
static void job_created_log(const struct job *j, const struct admit_verdict *v, uint32_t asked)
{
	char capped[96] = "", where[160];

	if (j->lanes > 1)
		snprintf(where, sizeof(where), "%u data threads from %u (job-threads; %" PRIu64
			 " receives on the first; results up to %u bytes spread)", j->lanes,
			 j->thread->index, v->lane_recvs, j->spread);
	else
		snprintf(where, sizeof(where), "data thread %u", j->thread->index);
	if (v->window < v->asked_window || v->chunk < v->asked_chunk)
		snprintf(capped, sizeof(capped), " (%s: window %u and chunk %u asked)",
			 v->mc_capped ? "multicast-inflight" : "max-inflight", v->asked_window, v->asked_chunk);
	SC_INFO("job 0x%" PRIx64 "%s%s%s: handle %u, %u ranks, window %u (weight %u%s), chunk %u%s, types 0x%x, "
		"timeout %u ms, %" PRIu64 " bytes, %" PRIu64 " receives posted, %s",
		j->id, j->label[0] ? " (" : "", j->label, j->label[0] ? ")" : "",
		j->handle, j->nranks, j->window, j->weight,
		asked > v->weight ? ", capped by max-weight" : "", j->chunk, capped, j->dtype_mask,
		j->timeout_ms, job_sum_mem(j), v->recvs, where);
}

/* The spread limit of a new job j (wire.h, version 8; dp_result.c,
 * "Spread"): [data] result-spread, held below what every lane's provider
 * injects, for a job of lanes without a group whose first rank speaks 8,
 * on threads a handed-over result wakes at once; else 0. */
static uint32_t job_spread(const struct daemon *d, const struct job *j, uint16_t ver)
{
	size_t tag = j->sealed ? SC_SEAL_TAG : 0;
	uint64_t lim = d->cfg.result_spread;

	if (j->lanes < 2 || j->mc || ver < WIRE_SPREAD_VERSION)
		return 0;
	JOB_FOR_LANES((struct job *)j, l) {
		size_t inj = l->thread->fabric->inject_size;
		if (!dthread_wakeable(l->thread))
			return 0;
		if (inj < tag + lim)
			lim = inj > tag ? inj - tag : 0;
	}
	return (uint32_t)(lim < WIRE_SPREAD_MAX ? lim : WIRE_SPREAD_MAX);
}

/* A job's first JOIN: the decision (common/admit.c, which sumcastctl plan
 * takes too: the grant, then seal room, max-jobs, memory share, budget and
 * a data thread's receive queue, in that order), and the job created on
 * the lanes picked. NULL: refused (the answer sent). */
static struct job *join_create(struct conn *c, const struct wire_join *w, uint32_t asked)
{
	struct daemon *d = c->d;
	uint64_t rx_free[256]; /* [data] threads is at most 256: daemon/settings.c */
	uint32_t thread_jobs[256];
	struct admit_limits lim;
	struct admit_load load;
	struct admit_ask ask = {
		.nranks = w->nranks,
		.window = w->window,
		.chunk = w->chunk_bytes,
		.weight = asked,
		.has16 = (w->dtype_mask & MASK16) != 0,
		.unicast = (w->flags & WIRE_JOIN_F_UNICAST) != 0,
		.one_lane = c->ver < WIRE_LANES_VERSION,
	};
	struct admit_verdict v;

	job_admit_state(d, &lim, &load, rx_free, thread_jobs);
	admit_decide(&lim, &load, &ask, &v);
	if (verdict_refused(c, w, &v, ask.has16))
		return NULL;
	uint32_t timeout = (uint32_t)d->cfg.timeout_ms;
	if (w->timeout_ms && w->timeout_ms < timeout)
		timeout = w->timeout_ms;
	struct dthread *ts[WIRE_LANES_MAX];
	for (uint32_t k = 0; k < v.lanes; k++)
		ts[k] = &d->threads[v.lane_thread[k]];
	struct job *j = job_create(d, w, ts, v.lanes, v.window, v.chunk, timeout, ask.has16);
	if (!j) {
		conn_refuse(c, WIRE_E_MEMORY, "job 0x%" PRIx64 ": could not allocate %" PRIu64 " bytes",
			    w->job_id, v.mem_bytes);
		return NULL;
	}
	j->weight = (uint16_t)v.weight;
	j->req_weight = (uint16_t)asked;
	uint32_t spread = job_spread(d, j, c->ver);
	JOB_FOR_LANES(j, l)
		l->spread = spread;
	memcpy(j->label, w->label, sizeof(j->label));
	job_created_log(j, &v, asked);
	return j;
}

/* A later JOIN of job j: the shape its first rank asked for, a protocol
 * that can address its lanes, a rank free. false: refused (the answer
 * sent). */
static bool join_fits(struct conn *c, const struct wire_join *w, const struct job *j, uint32_t asked)
{
	if (w->nranks != j->nranks) {
		conn_refuse_job(c, WIRE_E_NRANKS, "the job has another number of ranks",
				"job 0x%" PRIx64 " has %u ranks, request says %u", j->id, j->nranks,
				w->nranks);
		return false;
	}
	if (w->chunk_bytes != j->req_chunk || w->window != j->req_window ||
	    w->dtype_mask != j->dtype_mask || w->flags != j->flags ||
	    w->timeout_ms != j->req_timeout_ms || asked != j->req_weight) {
		conn_refuse_job(c, WIRE_E_PARAMS, "the job was joined with other parameters",
				"job 0x%" PRIx64 " was joined with chunk %u window %u types 0x%x flags 0x%x timeout %u ms weight %u, request says chunk %u window %u types 0x%x flags 0x%x timeout %u ms weight %u",
				j->id, j->req_chunk, j->req_window, j->dtype_mask, j->flags,
				j->req_timeout_ms, j->req_weight, w->chunk_bytes, w->window, w->dtype_mask,
				w->flags, w->timeout_ms, asked);
		return false;
	}
	if (j->lanes > 1 && c->ver < WIRE_LANES_VERSION) {
		conn_refuse(c, WIRE_E_VERSION, "job 0x%" PRIx64 " is spread over %u data threads of "
			    "this daemon, which its ranks address in protocol %u; this rank speaks %u",
			    j->id, j->lanes, WIRE_LANES_VERSION, c->ver);
		return false;
	}
	if (j->spread && c->ver < WIRE_SPREAD_VERSION) {
		conn_refuse(c, WIRE_E_VERSION, "job 0x%" PRIx64 " spreads its results over %u data "
			    "threads of this daemon, which its ranks take in protocol %u; this rank speaks %u",
			    j->id, j->lanes, WIRE_SPREAD_VERSION, c->ver);
		return false;
	}
	if (j->state != JOB_JOINING || j->joined == j->nranks) {
		conn_refuse_job(c, WIRE_E_JOB_FULL, "the job has all its ranks",
				"job 0x%" PRIx64 " already has all %u ranks", j->id, j->nranks);
		return false;
	}
	if (j->ranks[w->rank].state != RANK_NONE) {
		conn_refuse(c, WIRE_E_RANK_TAKEN, "rank %u of job 0x%" PRIx64 " is already taken",
			    w->rank, j->id);
		return false;
	}
	return true;
}

/* Rank w->rank of job j is c's: every lane's data thread told to add it
 * (admit_rank_added answers once they have). */
static void join_add_rank(struct conn *c, const struct wire_join *w, struct job *j)
{
	if (!j->label[0] && w->label[0]) /* the first rank came without one */
		memcpy(j->label, w->label, sizeof(j->label));
	struct job_rank *jr = &j->ranks[w->rank];
	jr->conn = c;
	jr->state = RANK_ADDING;
	jr->result_key = w->result_key;
	jr->addr_len = w->addr_len;
	memcpy(jr->addr, w->addr, w->addr_len);
	j->joined++;
	c->state = CONN_JOINING;
	c->job = j;
	c->rank = w->rank;
	conn_handshake_done(c);
	jr->lane_acks = jr->lane_fails = 0;
	JOB_FOR_LANES(j, l) { /* every lane has the rank (job.h) */
		struct job_rank *lr = &l->ranks[w->rank];
		if (l != j) {
			lr->result_key = jr->result_key;
			lr->addr_len = jr->addr_len;
			memcpy(lr->addr, jr->addr, jr->addr_len);
		}
		memset(&lr->cmd_add, 0, sizeof(lr->cmd_add));
		lr->cmd_add.type = DCMD_ADD_RANK;
		lr->cmd_add.job = l;
		lr->cmd_add.rank = w->rank;
		dthread_cmd(l->thread, &lr->cmd_add);
	}
}

void admit_join(struct conn *c, const struct wire_join *w)
{
	uint32_t asked = w->weight ? w->weight : 1; /* none sent (version < 4): 1 */

	if (join_refused(c, w))
		return;
	struct job *j = job_find(c->d, w->job_id);
	if (j ? !join_fits(c, w, j, asked) : !(j = join_create(c, w, asked)))
		return;
	join_add_rank(c, w, j);
}

void admit_rank_added(struct daemon *d, struct dcmd *ev)
{
	struct job *j = ev->job->lead; /* ev->job: one of its lanes */
	struct job_rank *jr = &j->ranks[ev->rank];
	struct conn *c = jr->conn;
	struct wire_msg m;

	if (j->state == JOB_ENDING || !c || jr->state != RANK_ADDING)
		return;
	/* every lane answers; the rank's JOIN is answered after the last */
	jr->lane_acks++;
	if (ev->rc) {
		jr->lane_fails++;
		jr->lane_rc = (int16_t)ev->rc;
	}
	if (jr->lane_acks < j->lanes)
		return;
	if (jr->lane_fails && jr->lane_fails < j->lanes) {
		/* some lanes have the rank (receives posted), others refused it */
		job_abort(d, j, WIRE_E_INTERNAL, "rank %u's fabric address was taken by %u of the job's %u "
			  "data threads, refused by the others: %s", ev->rank, j->lanes - jr->lane_fails,
			  j->lanes, fi_strerror(-jr->lane_rc));
		return;
	}
	if (jr->lane_fails) {
		jr->conn = NULL;
		jr->state = RANK_NONE;
		j->joined--;
		c->job = NULL;
		char a[128];
		fabric_addr_str(j->thread->fabric, jr->addr, jr->addr_len, a, sizeof(a));
		conn_refuse(c, WIRE_E_MALFORMED, "rank %u's fabric address (%u bytes, %s) was not accepted: %s",
			    ev->rank, jr->addr_len, a, fi_strerror(-jr->lane_rc));
		if (j->joined == 0)
			job_end(d, j);
		return;
	}
	jr->state = RANK_JOINED;
	j->acked++;
	ctr_add(&d->stats.joins, 1);
	daemon_status_changed(d);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_JOIN_OK;
	m.u.join_ok.job_handle = j->handle;
	m.u.join_ok.window = j->window;
	m.u.join_ok.chunk_bytes = j->payload;
	m.u.join_ok.flags = (j->sealed ? WIRE_OK_F_SEALED : 0) | (j->mc ? WIRE_OK_F_MCAST : 0) |
				(j->mc && j->mc_via == SC_MC_VIA_IB ? WIRE_OK_F_MCAST_IB : 0);
	m.u.join_ok.mc_group = j->mc_group;
	m.u.join_ok.mc_port = j->mc_port;
	m.u.join_ok.mc_payload = j->mc_payload;
	m.u.join_ok.mc_key = j->mc_key;
	m.u.join_ok.data_nonce = j->data_nonce;
	m.u.join_ok.timeout_ms = j->timeout_ms;
	if (c->ver >= 4)
		m.u.join_ok.weight = j->weight;
	/* the job's endpoint (its own on shm), set by ADD_JOB before this */
	m.u.join_ok.addr_len = (uint16_t)j->fab->addrlen;
	memcpy(m.u.join_ok.addr, j->fab->addr, j->fab->addrlen);
	if (j->lanes > 1) { /* version 7: each lane's endpoint */
		m.u.join_ok.lanes = (uint8_t)j->lanes;
		JOB_FOR_LANES(j, l)
			if (l != j) {
				m.u.join_ok.lane_len[l->lane] = (uint16_t)l->fab->addrlen;
				memcpy(m.u.join_ok.lane_addr[l->lane], l->fab->addr, l->fab->addrlen);
			}
		if (c->ver >= WIRE_SPREAD_VERSION) /* version 8 */
			m.u.join_ok.spread = j->spread;
	}
	conn_send(c, &m);
	c->state = CONN_JOINED;
	SC_DBG("job 0x%" PRIx64 ": rank %u joined from %s (%u of %u)", j->id, ev->rank, c->peer, j->acked,
	       j->nranks);
	if (j->acked == j->nranks)
		job_ready(d, j);
	/* Bytes the rank sent after JOIN were left in the buffer. */
	conn_read_pending(c);
}

void admit_leave(struct conn *c, const struct wire_leave *l)
{
	if (!c->job || c->job->handle != l->job_handle || c->state != CONN_JOINED) {
		conn_refuse(c, WIRE_E_UNKNOWN_JOB, "no job with handle %u on this connection",
			    l->job_handle);
		return;
	}
	job_rank_gone(c, true);
	conn_close_after_flush(c);
}
