/* Admission: whether a JOIN may join (the checks, in the order
 * docs/daemon.md lists them, each failing one refused with its code and a
 * sentence naming the values), what it is granted (window, chunk, timeout),
 * and the answer once the data thread has the rank (JOIN_OK; the last one
 * makes the job READY). Also LEAVE, the way out. */
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <string.h>

#include "ctl.h"
#include "fabric.h"
#include "log.h"
#include "mcast_link.h"
#include "grant.h"
#include "notify.h"
#include "reduce.h"

static const uint32_t MASK16 = (1u << SC_F16) | (1u << SC_BF16);

void admit_join(struct conn *c, const struct wire_join *w)
{
	struct daemon *d = c->d;
	const struct settings *cfg = &d->cfg;
	struct job *j;

	if (c->state != CONN_HELLO) {
		conn_refuse(c, WIRE_E_MALFORMED, "this connection already joined job 0x%" PRIx64
			    "; one connection per rank", c->job ? c->job->id : 0);
		return;
	}
	if (d->draining) {
		conn_refuse(c, WIRE_E_SHUTDOWN, "daemon is shutting down");
		return;
	}
	if (d->key_len && wire_join_verify(d->key, d->key_len, c->nonce, w)) {
		conn_refuse(c, WIRE_E_AUTH, "job 0x%" PRIx64 " rank %u: authentication tag does not match",
			    w->job_id, w->rank);
		return;
	}
	if (!fabric_provider_same(w->provider, d->provider)) {
		conn_refuse(c, WIRE_E_PROVIDER, "daemon's data endpoints use provider %s, request says %s",
			    d->provider, w->provider);
		return;
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
		return;
	}
	j = job_find(d, w->job_id);
	uint32_t asked = w->weight ? w->weight : 1; /* none sent (version < 4): 1 */
	if (!j) {
		/* the window per unit of weight, times the weight granted: a
		 * job's credit, which is its share of this daemon against the
		 * other jobs' (docs/daemon.md, "Weights") */
		uint32_t weight = asked < (uint64_t)cfg->max_weight ? asked : (uint32_t)cfg->max_weight;
		uint64_t base = w->window < (uint64_t)cfg->max_window ? w->window : (uint64_t)cfg->max_window;
		uint32_t window = base * weight < WIRE_SLOTS_MAX ? (uint32_t)(base * weight) : WIRE_SLOTS_MAX;
		uint32_t chunk = w->chunk_bytes < cfg->max_chunk ? w->chunk_bytes : (uint32_t)cfg->max_chunk;
		uint32_t asked_window = window, asked_chunk = chunk;
		uint64_t chunk_floor = d->key_len ? 2 * JOB_SEAL_ROOM : 0;
		struct grant gr = grant_inflight(window, chunk, w->nranks, cfg->max_inflight, cfg->min_chunk, chunk_floor);
		bool mc = d->mc && !(w->flags & WIRE_JOIN_F_UNICAST);
		/* A multicast job's results: window x chunk within
		 * multicast-inflight, by the same rule with one receiver (the
		 * group). Datagrams have no congestion control; the credit
		 * window is all that bounds what the job's results put into a
		 * node's switch port at once (docs/daemon.md, "Multicast
		 * results"). */
		bool mc_capped = false;
		if (mc && cfg->mc_inflight) {
			struct grant m = grant_inflight(gr.window, gr.chunk, 1, cfg->mc_inflight, cfg->min_chunk, chunk_floor);
			mc_capped = m.window < gr.window || m.chunk < gr.chunk;
			gr = m;
		}
		window = gr.window;
		chunk = gr.chunk;
		uint32_t timeout = (uint32_t)cfg->timeout_ms;
		bool has16 = w->dtype_mask & MASK16;
		uint64_t mem = job_mem_bytes(window, chunk, w->nranks, has16, mc);

		if (w->timeout_ms && w->timeout_ms < timeout)
			timeout = w->timeout_ms;
		if (d->key_len && chunk <= 2 * JOB_SEAL_ROOM) {
			conn_refuse(c, WIRE_E_PARAMS, "job 0x%" PRIx64 ": chunk %u cannot carry sealed data "
				    "(this daemon has a key: %u bytes of each chunk hold the seal)",
				    w->job_id, chunk, JOB_SEAL_ROOM);
			return;
		}
		if (d->njobs_live >= (uint64_t)cfg->max_jobs) {
			conn_refuse(c, WIRE_E_TOO_MANY_JOBS, "daemon serves %u jobs, max-jobs is %lld",
				    d->njobs_live, (long long)cfg->max_jobs);
			return;
		}
		uint64_t share = (uint64_t)((double)cfg->memory_budget * cfg->max_memory_share);
		if (mem > share) {
			conn_refuse(c, WIRE_E_MEMORY,
				    "job 0x%" PRIx64 " needs %" PRIu64 " bytes (window %u x chunk %u x (%u ranks + %u) + %" PRIu64
				    " bookkeeping), more than max-memory-share %g of the %" PRIu64 " byte budget (%" PRIu64 ")",
				    w->job_id, mem, window, chunk, w->nranks, has16 ? 2 : 1,
				    job_book_bytes(window, w->nranks), cfg->max_memory_share,
				    (uint64_t)cfg->memory_budget, share);
			return;
		}
		if (d->mem_used + mem > cfg->memory_budget) {
			conn_refuse(c, WIRE_E_MEMORY,
				    "job 0x%" PRIx64 " needs %" PRIu64 " bytes (window %u x chunk %u x (%u ranks + %u) + %" PRIu64
				    " bookkeeping), %" PRIu64 " of the %" PRIu64 " byte budget are free",
				    w->job_id, mem, window, chunk, w->nranks, has16 ? 2 : 1,
				    job_book_bytes(window, w->nranks),
				    cfg->memory_budget > d->mem_used ? cfg->memory_budget - d->mem_used : 0,
				    (uint64_t)cfg->memory_budget);
			return;
		}
		uint64_t recvs = job_recvs(window, w->nranks, mc), room;
		struct dthread *th = job_thread_pick(d, recvs, &room);
		if (!th) {
			conn_refuse(c, WIRE_E_MEMORY,
				    "job 0x%" PRIx64 " posts %" PRIu64 " receives (window %u x %u ranks); no data thread's receive queue has room (at most %" PRIu64 " of %" PRIu64 " free: [data] threads, or the provider's queue size, FI_OFI_RXM_RX_SIZE / FI_SHM_RX_SIZE)",
				    w->job_id, recvs, window, w->nranks, room, d->threads[0].rx_queue);
			return;
		}
		j = job_create(d, w, th, window, chunk, timeout, has16, mem);
		if (!j) {
			conn_refuse(c, WIRE_E_MEMORY, "job 0x%" PRIx64 ": could not allocate %" PRIu64 " bytes",
				    w->job_id, mem);
			return;
		}
		j->weight = (uint16_t)weight;
		j->req_weight = (uint16_t)asked;
		char capped[96] = "";
		if (window < asked_window || chunk < asked_chunk)
			snprintf(capped, sizeof(capped), " (%s: window %u and chunk %u asked)",
				 mc_capped ? "multicast-inflight" : "max-inflight", asked_window, asked_chunk);
		SC_INFO("job 0x%" PRIx64 ": handle %u, %u ranks, window %u (weight %u%s), chunk %u%s, types 0x%x, "
			"timeout %u ms, %" PRIu64 " bytes, %" PRIu64 " receives posted, data thread %u",
			j->id, j->handle, j->nranks, j->window, j->weight,
			asked > weight ? ", capped by max-weight" : "", j->chunk, capped, j->dtype_mask,
			j->timeout_ms, j->mem_bytes, recvs, j->thread->index);
	} else {
		if (w->nranks != j->nranks) {
			conn_refuse_job(c, WIRE_E_NRANKS, "the job has another number of ranks",
					"job 0x%" PRIx64 " has %u ranks, request says %u", j->id, j->nranks,
					w->nranks);
			return;
		}
		if (w->chunk_bytes != j->req_chunk || w->window != j->req_window ||
		    w->dtype_mask != j->dtype_mask || w->flags != j->flags ||
		    w->timeout_ms != j->req_timeout_ms || asked != j->req_weight) {
			conn_refuse_job(c, WIRE_E_PARAMS, "the job was joined with other parameters",
					"job 0x%" PRIx64 " was joined with chunk %u window %u types 0x%x flags 0x%x timeout %u ms weight %u, request says chunk %u window %u types 0x%x flags 0x%x timeout %u ms weight %u",
					j->id, j->req_chunk, j->req_window, j->dtype_mask, j->flags,
					j->req_timeout_ms, j->req_weight, w->chunk_bytes, w->window, w->dtype_mask,
					w->flags, w->timeout_ms, asked);
			return;
		}
		if (j->state != JOB_JOINING || j->joined == j->nranks) {
			conn_refuse_job(c, WIRE_E_JOB_FULL, "the job has all its ranks",
					"job 0x%" PRIx64 " already has all %u ranks", j->id, j->nranks);
			return;
		}
		if (j->ranks[w->rank].state != RANK_NONE) {
			conn_refuse(c, WIRE_E_RANK_TAKEN, "rank %u of job 0x%" PRIx64 " is already taken",
				    w->rank, j->id);
			return;
		}
	}
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
	memset(&jr->cmd_add, 0, sizeof(jr->cmd_add));
	jr->cmd_add.type = DCMD_ADD_RANK;
	jr->cmd_add.job = j;
	jr->cmd_add.rank = w->rank;
	dthread_cmd(j->thread, &jr->cmd_add);
}

void admit_rank_added(struct daemon *d, struct dcmd *ev)
{
	struct job *j = ev->job;
	struct job_rank *jr = &j->ranks[ev->rank];
	struct conn *c = jr->conn;
	struct wire_msg m;

	if (j->state == JOB_ENDING || !c || jr->state != RANK_ADDING)
		return;
	if (ev->rc) {
		jr->conn = NULL;
		jr->state = RANK_NONE;
		j->joined--;
		c->job = NULL;
		char a[128];
		fabric_addr_str(j->thread->fabric, jr->addr, jr->addr_len, a, sizeof(a));
		conn_refuse(c, WIRE_E_MALFORMED, "rank %u's fabric address (%u bytes, %s) was not accepted: %s",
			    ev->rank, jr->addr_len, a, fi_strerror(-ev->rc));
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
