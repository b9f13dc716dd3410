/* Control plane: TCP joins and leaves, job lifetime, events from the data
 * threads, drain on SIGTERM, reload on SIGHUP. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "reduce.h"

enum conn_state { CONN_HELLO = 0, CONN_JOINING, CONN_JOINED, CONN_CLOSING };

struct conn {
	struct daemon *d;
	struct bufferevent *bev;
	uint64_t nonce;
	int state;
	struct job *job;
	uint32_t rank;
	char peer[64];
	struct conn *prev, *next;
};

static void job_end(struct daemon *d, struct job *j);
static void conn_event_cb(struct bufferevent *bev, short what, void *arg);
static void rank_gone(struct conn *c, bool clean);

/* ---- connections ---- */

/* Every way a connection closes goes through conn_free or
 * conn_close_after_flush, and both first detach it from its job: a rank
 * whose connection goes away without a LEAVE is gone (rank_gone), so no
 * job ever keeps a pointer to a freed connection. */
static void conn_detach(struct conn *c)
{
	if (c->job)
		rank_gone(c, false);
}

static void conn_free(struct conn *c)
{
	struct daemon *d = c->d;

	conn_detach(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d->nconns--;
	bufferevent_free(c->bev);
	free(c);
}

static void conn_flushed_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		conn_free(c);
}

/* Stop reading, free once what is queued has been written. */
static void conn_close_after_flush(struct conn *c)
{
	conn_detach(c);
	c->state = CONN_CLOSING;
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	bufferevent_setcb(c->bev, NULL, conn_flushed_cb, conn_event_cb, c);
	/* A peer that never reads must not pin the connection forever. */
	struct timeval tv = { 5, 0 };
	bufferevent_set_timeouts(c->bev, NULL, &tv);
	bufferevent_enable(c->bev, EV_WRITE);
	/* Freed from the loop, never here: callers still hold c. */
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		bufferevent_trigger(c->bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

static int conn_send(struct conn *c, const struct wire_msg *m)
{
	uint8_t buf[WIRE_MSG_MAX];
	int n = wire_msg_encode(m, buf, sizeof(buf));

	if (n < 0) {
		SC_ERR("%s: encoding %s failed: %s", c->peer, wire_type_name(m->type), strerror(-n));
		return n;
	}
	return bufferevent_write(c->bev, buf, (size_t)n) ? -ENOMEM : 0;
}

static void text_msg(struct wire_msg *m, uint16_t type, uint32_t handle, enum wire_code code,
		     const char *fmt, va_list ap)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	struct wire_text *t = type == WIRE_REFUSE ? &m->u.refuse : &m->u.abort;
	t->job_handle = handle;
	t->code = (uint16_t)code;
	vsnprintf(t->text, sizeof(t->text), fmt, ap);
	for (char *p = t->text; *p; p++) /* the wire wants printable ASCII */
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
}

/* REFUSE(code, sentence), count it, close after flush. */
static void conn_refuse(struct conn *c, enum wire_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void conn_refuse(struct conn *c, enum wire_code code, const char *fmt, ...)
{
	struct wire_msg m;
	va_list ap;

	va_start(ap, fmt);
	text_msg(&m, WIRE_REFUSE, 0, code, fmt, ap);
	va_end(ap);
	ctr_add(&c->d->stats.errors[code], 1);
	SC_INFO("%s: join refused (%s): %s", c->peer, wire_code_name(code), m.u.refuse.text);
	conn_send(c, &m);
	conn_close_after_flush(c);
}

static void conn_abort(struct conn *c, uint32_t handle, enum wire_code code, const char *text)
{
	struct wire_msg m;

	memset(&m, 0, sizeof(m));
	m.type = WIRE_ABORT;
	m.u.abort.job_handle = handle;
	m.u.abort.code = (uint16_t)code;
	snprintf(m.u.abort.text, sizeof(m.u.abort.text), "%s", text);
	conn_send(c, &m);
	conn_close_after_flush(c);
}

/* ---- jobs ---- */

static struct job *job_find(struct daemon *d, uint64_t id)
{
	for (struct job *j = d->jobs; j; j = j->next)
		if (j->id == id && j->state != JOB_ENDING)
			return j;
	return NULL;
}

static struct job *job_by_handle(struct daemon *d, uint32_t h)
{
	for (struct job *j = d->jobs; j; j = j->next)
		if (j->handle == h)
			return j;
	return NULL;
}

static uint32_t handle_alloc(struct daemon *d)
{
	for (uint32_t tries = 0; tries < WIRE_JOB_HANDLE_MAX; tries++) {
		uint32_t h = d->next_handle;
		d->next_handle = h >= WIRE_JOB_HANDLE_MAX ? 1 : h + 1;
		if (!job_by_handle(d, h))
			return h;
	}
	return 0;
}

/* Tells every rank still attached, then ends the job. */
static void job_abort(struct daemon *d, struct job *j, enum wire_code code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void job_abort(struct daemon *d, struct job *j, enum wire_code code, const char *fmt, ...)
{
	char text[WIRE_TEXT_MAX];
	va_list ap;
	uint32_t told = 0;

	if (j->state == JOB_ENDING)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	for (uint32_t r = 0; r < j->nranks; r++) {
		struct job_rank *jr = &j->ranks[r];
		struct conn *c = jr->conn;
		if (c) {
			/* Detached first: the ABORT closes it, and its rank is
			 * not "gone" on its own account. */
			jr->conn = NULL;
			c->job = NULL;
			conn_abort(c, j->handle, code, text);
			told++;
		}
	}
	SC_WARN("job 0x%" PRIx64 " (handle %u) aborted (%s): %s; told %u rank(s)", j->id, j->handle,
		wire_code_name(code), text, told);
	job_end(d, j);
}

static void job_join_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	struct daemon *d = j->ctl;

	(void)fd;
	(void)what;
	if (j->state == JOB_JOINING)
		job_abort(d, j, WIRE_E_TIMEOUT, "job 0x%" PRIx64 " has %u of %u ranks after %llu ms",
			  j->id, j->acked, j->nranks,
			  (unsigned long long)(sc_now_ms() - j->created_ms));
}

/* The job's memory returns when the data thread answers (EV_REMOVED). */
static void job_end(struct daemon *d, struct job *j)
{
	if (j->state == JOB_ENDING)
		return;
	j->state = JOB_ENDING;
	d->njobs_live--;
	daemon_status_changed(d);
	if (j->join_timer)
		event_del(j->join_timer);
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->ranks[r].conn) {
			j->ranks[r].conn->job = NULL;
			j->ranks[r].conn = NULL;
		}
	j->stuck_grace_ms = (uint32_t)d->cfg.stuck_grace_ms;
	memset(&j->cmd_remove, 0, sizeof(j->cmd_remove));
	j->cmd_remove.type = DCMD_REMOVE_JOB;
	j->cmd_remove.job = j;
	dthread_cmd(j->thread, &j->cmd_remove);
}

static void job_free(struct daemon *d, struct job *j)
{
	struct job **pp = &d->jobs;

	while (*pp && *pp != j)
		pp = &(*pp)->next;
	if (*pp)
		*pp = j->next;
	d->njobs_total--;
	if (j->join_timer)
		event_free(j->join_timer);
	if (j->region)
		munmap(j->region, j->region_bytes);
	d->mem_used -= j->region_released ? j->mem_bytes - j->region_bytes : j->mem_bytes;
	j->thread->njobs--;
	free(j->slots);
	free(j->rslots);
	free(j);
}

static struct dthread *thread_pick(struct daemon *d)
{
	struct dthread *best = &d->threads[0];

	for (unsigned i = 1; i < d->nthreads; i++)
		if (d->threads[i].njobs < best->njobs)
			best = &d->threads[i];
	return best;
}

static struct job *job_create(struct daemon *d, const struct wire_join *w, uint32_t window,
			      uint32_t chunk, uint32_t timeout_ms, bool has16, uint64_t mem)
{
	uint64_t region = job_region_bytes(window, chunk, w->nranks, has16);
	struct job *j = calloc(1, sizeof(*j) + (size_t)w->nranks * sizeof(struct job_rank));

	if (!j)
		return NULL;
	j->slots = calloc(window, sizeof(*j->slots));
	j->rslots = calloc((size_t)window * w->nranks, sizeof(*j->rslots));
	if (!j->slots || !j->rslots)
		goto err;
	/* Prefaulted: the budget is real memory, and the data path never
	 * takes a page fault on a fresh buffer. */
	j->region = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
			 -1, 0);
	if (j->region == MAP_FAILED) {
		j->region = NULL;
		goto err;
	}
	j->ctl = d;
	j->id = w->job_id;
	j->nranks = w->nranks;
	j->window = window;
	j->chunk = chunk;
	j->dtype_mask = w->dtype_mask;
	j->timeout_ms = timeout_ms;
	j->flags = w->flags;
	j->has16 = has16;
	j->acc_bytes = has16 ? 2 * (size_t)chunk : chunk;
	j->region_bytes = region;
	j->mem_bytes = mem;
	j->req_chunk = w->chunk_bytes;
	j->req_window = w->window;
	j->req_timeout_ms = w->timeout_ms;
	j->created_ms = sc_now_ms();
	j->handle = handle_alloc(d);
	if (!j->handle)
		goto err;
	for (uint32_t s = 0; s < window; s++) {
		j->slots[s].job = j;
		j->slots[s].index = s;
		j->slots[s].seq = s & WIRE_SEQ_MASK;
		j->slots[s].acc = job_acc0(j, s);
		for (uint32_t r = 0; r < j->nranks; r++)
			job_rslot(j, s, r)->buf = job_rbuf(j, s, r);
	}
	j->join_timer = evtimer_new(d->base, job_join_timeout_cb, j);
	if (!j->join_timer)
		goto err;
	struct timeval tv = { d->cfg.join_timeout_ms / 1000, (d->cfg.join_timeout_ms % 1000) * 1000 };
	evtimer_add(j->join_timer, &tv);
	j->thread = thread_pick(d);
	j->thread->njobs++;
	j->next = d->jobs;
	d->jobs = j;
	d->njobs_live++;
	d->njobs_total++;
	d->mem_used += mem;
	j->cmd_add.type = DCMD_ADD_JOB;
	j->cmd_add.job = j;
	dthread_cmd(j->thread, &j->cmd_add);
	return j;
err:
	if (j->region)
		munmap(j->region, region);
	free(j->slots);
	free(j->rslots);
	free(j);
	return NULL;
}

static const uint32_t MASK16 = (1u << SC_F16) | (1u << SC_BF16);

static void handle_join(struct conn *c, const struct wire_join *w)
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
	const char *wp = fabric_provider_canonical(w->provider);
	if (!wp || strcmp(wp, fabric_provider_canonical(d->provider))) {
		conn_refuse(c, WIRE_E_PROVIDER, "daemon's data endpoints use provider %s, request says %s",
			    d->provider, w->provider);
		return;
	}
	j = job_find(d, w->job_id);
	if (!j) {
		uint32_t window = w->window < (uint64_t)cfg->max_window ? w->window : (uint32_t)cfg->max_window;
		uint32_t chunk = w->chunk_bytes < cfg->max_chunk ? w->chunk_bytes : (uint32_t)cfg->max_chunk;
		uint32_t timeout = (uint32_t)cfg->timeout_ms;
		bool has16 = w->dtype_mask & MASK16;
		uint64_t mem = job_mem_bytes(window, chunk, w->nranks, has16);

		if (w->timeout_ms && w->timeout_ms < timeout)
			timeout = w->timeout_ms;
		if (d->njobs_live >= (uint64_t)cfg->max_jobs) {
			conn_refuse(c, WIRE_E_TOO_MANY_JOBS, "daemon serves %u jobs, max-jobs is %lld",
				    d->njobs_live, (long long)cfg->max_jobs);
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
		j = job_create(d, w, window, chunk, timeout, has16, mem);
		if (!j) {
			conn_refuse(c, WIRE_E_MEMORY, "job 0x%" PRIx64 ": could not allocate %" PRIu64 " bytes",
				    w->job_id, mem);
			return;
		}
		SC_INFO("job 0x%" PRIx64 ": handle %u, %u ranks, window %u, chunk %u, types 0x%x, timeout %u ms, %" PRIu64
			" bytes, data thread %u",
			j->id, j->handle, j->nranks, j->window, j->chunk, j->dtype_mask, j->timeout_ms,
			j->mem_bytes, j->thread->index);
	} else {
		if (w->nranks != j->nranks) {
			conn_refuse(c, WIRE_E_NRANKS, "job 0x%" PRIx64 " has %u ranks, request says %u", j->id,
				    j->nranks, w->nranks);
			return;
		}
		if (w->chunk_bytes != j->req_chunk || w->window != j->req_window ||
		    w->dtype_mask != j->dtype_mask || w->flags != j->flags ||
		    w->timeout_ms != j->req_timeout_ms) {
			conn_refuse(c, WIRE_E_PARAMS,
				    "job 0x%" PRIx64 " was joined with chunk %u window %u types 0x%x flags 0x%x timeout %u ms, request says chunk %u window %u types 0x%x flags 0x%x timeout %u ms",
				    j->id, j->req_chunk, j->req_window, j->dtype_mask, j->flags,
				    j->req_timeout_ms, w->chunk_bytes, w->window, w->dtype_mask, w->flags,
				    w->timeout_ms);
			return;
		}
		if (j->state != JOB_JOINING || j->joined == j->nranks) {
			conn_refuse(c, WIRE_E_JOB_FULL, "job 0x%" PRIx64 " already has all %u ranks", j->id,
				    j->nranks);
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
	bufferevent_set_timeouts(c->bev, NULL, NULL);
	memset(&jr->cmd_add, 0, sizeof(jr->cmd_add));
	jr->cmd_add.type = DCMD_ADD_RANK;
	jr->cmd_add.job = j;
	jr->cmd_add.rank = w->rank;
	dthread_cmd(j->thread, &jr->cmd_add);
}

/* The rank on c is gone: LEAVE (clean) or its connection closed. */
static void rank_gone(struct conn *c, bool clean)
{
	struct daemon *d = c->d;
	struct job *j = c->job;
	uint32_t r = c->rank;

	c->job = NULL;
	if (!j || j->state == JOB_ENDING)
		return;
	struct job_rank *jr = &j->ranks[r];
	bool was_joined = jr->state == RANK_JOINED;
	jr->conn = NULL;
	jr->state = clean && was_joined ? RANK_LEFT : RANK_GONE;
	j->gone++;
	daemon_status_changed(d);
	uint32_t partial = atomic_load_explicit(&j->partial, memory_order_relaxed);
	SC_INFO("job 0x%" PRIx64 " rank %u %s%s", j->id, r, clean ? "left" : "disconnected",
		partial ? " with chunks in flight" : "");
	if (j->gone == j->joined && (j->state == JOB_READY || j->joined == 1) && (clean || !partial)) {
		/* Everybody is gone and nobody waits for anything. */
		SC_INFO("job 0x%" PRIx64 " (handle %u) finished: %" PRIu64 " chunks", j->id, j->handle,
			ctr_get(&j->chunks));
		job_end(d, j);
		return;
	}
	if (j->state == JOB_JOINING) {
		job_abort(d, j, WIRE_E_RANK_LEFT, "rank %u %s job 0x%" PRIx64 " before all %u ranks joined", r,
			  clean ? "left" : "disconnected from", j->id, j->nranks);
		return;
	}
	if (!clean || partial)
		job_abort(d, j, WIRE_E_RANK_LEFT, "rank %u %s job 0x%" PRIx64 "%s", r,
			  clean ? "left" : "disconnected from", j->id,
			  partial ? " while chunks were in flight" : "");
	/* A clean LEAVE between collectives: the others finish and leave too. */
}

static void handle_leave(struct conn *c, const struct wire_leave *l)
{
	if (!c->job || c->job->handle != l->job_handle || c->state != CONN_JOINED) {
		conn_refuse(c, WIRE_E_UNKNOWN_JOB, "no job with handle %u on this connection",
			    l->job_handle);
		return;
	}
	rank_gone(c, true);
	conn_close_after_flush(c);
}

static void conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (c->state == CONN_HELLO || c->state == CONN_JOINED) {
		size_t have = evbuffer_get_length(in);
		struct wire_hdr h;
		struct wire_msg m;
		uint8_t *p;
		int rc;

		if (have < WIRE_HDR_LEN)
			return;
		p = evbuffer_pullup(in, WIRE_HDR_LEN);
		rc = wire_hdr_decode(p, WIRE_HDR_LEN, &h);
		if (rc == -EPROTO) {
			evbuffer_drain(in, have);
			conn_refuse(c, WIRE_E_VERSION,
				    "protocol version %u is not supported, this daemon speaks %u",
				    h.version, WIRE_VERSION);
			return;
		}
		if (rc) {
			ctr_add(&c->d->stats.errors[ERR_BAD_HEADER], 1);
			SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "%s: not a sumcast header, closing", c->peer);
			conn_free(c);
			return;
		}
		if (have < WIRE_HDR_LEN + h.len)
			return;
		p = evbuffer_pullup(in, (ev_ssize_t)(WIRE_HDR_LEN + h.len));
		rc = wire_msg_decode(h.type, p + WIRE_HDR_LEN, h.len, &m);
		evbuffer_drain(in, WIRE_HDR_LEN + h.len);
		if (rc) {
			conn_refuse(c, WIRE_E_MALFORMED, "%s message of %u bytes failed validation",
				    wire_type_name(h.type), h.len);
			return;
		}
		switch (m.type) {
		case WIRE_JOIN:
			handle_join(c, &m.u.join);
			break;
		case WIRE_LEAVE:
			handle_leave(c, &m.u.leave);
			return;
		default:
			conn_refuse(c, WIRE_E_MALFORMED, "a rank may not send %s", wire_type_name(h.type));
			return;
		}
	}
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	if (what & BEV_EVENT_TIMEOUT) {
		if (c->state == CONN_HELLO) {
			ctr_add(&c->d->stats.errors[ERR_HANDSHAKE_TIMEOUT], 1);
			SC_DBG("%s: no JOIN within the handshake timeout, closing", c->peer);
		}
	}
	conn_free(c);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
		      void *arg)
{
	struct daemon *d = arg;
	struct conn *c;
	struct wire_msg m;
	char host[INET6_ADDRSTRLEN] = "?";
	int one = 1;

	(void)l;
	(void)salen;
	if (d->nconns >= (uint64_t)d->cfg.max_connections || d->draining) {
		ctr_add(&d->stats.errors[ERR_CONN_LIMIT], 1);
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "closing a new control connection: %u open, max-connections is %lld",
				 d->nconns, (long long)d->cfg.max_connections);
		evutil_closesocket(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		evutil_closesocket(fd);
		return;
	}
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(c->peer, sizeof(c->peer), "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(c->peer, sizeof(c->peer), "[%s]:%u", host, ntohs(in6->sin6_port));
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->d = d;
	c->bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev || getrandom(&c->nonce, sizeof(c->nonce), 0) != sizeof(c->nonce)) {
		if (c->bev)
			bufferevent_free(c->bev);
		else
			evutil_closesocket(fd);
		free(c);
		return;
	}
	c->next = d->conns;
	if (d->conns)
		d->conns->prev = c;
	d->conns = c;
	d->nconns++;
	bufferevent_setcb(c->bev, conn_read_cb, NULL, conn_event_cb, c);
	struct timeval tv = { d->cfg.handshake_timeout_ms / 1000,
			      (d->cfg.handshake_timeout_ms % 1000) * 1000 };
	bufferevent_set_timeouts(c->bev, &tv, NULL);
	bufferevent_setwatermark(c->bev, EV_READ, 0, WIRE_MSG_MAX * 4);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	m.u.hello.version_min = WIRE_VERSION;
	m.u.hello.version_max = WIRE_VERSION;
	m.u.hello.nonce = c->nonce;
	conn_send(c, &m);
}

/* ---- events from the data threads ---- */

static void on_rank_added(struct daemon *d, struct dcmd *ev)
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
	daemon_status_changed(d);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_JOIN_OK;
	m.u.join_ok.job_handle = j->handle;
	m.u.join_ok.window = j->window;
	m.u.join_ok.chunk_bytes = j->chunk;
	m.u.join_ok.timeout_ms = j->timeout_ms;
	m.u.join_ok.addr_len = (uint16_t)j->thread->fabric->addrlen;
	memcpy(m.u.join_ok.addr, j->thread->fabric->addr, j->thread->fabric->addrlen);
	conn_send(c, &m);
	c->state = CONN_JOINED;
	SC_DBG("job 0x%" PRIx64 ": rank %u joined from %s (%u of %u)", j->id, ev->rank, c->peer, j->acked,
	       j->nranks);
	if (j->acked == j->nranks) {
		j->state = JOB_READY;
		event_del(j->join_timer);
		memset(&m, 0, sizeof(m));
		m.type = WIRE_READY;
		m.u.ready.job_handle = j->handle;
		m.u.ready.nranks = j->nranks;
		for (uint32_t r = 0; r < j->nranks; r++)
			if (j->ranks[r].conn)
				conn_send(j->ranks[r].conn, &m);
		SC_INFO("job 0x%" PRIx64 " (handle %u) ready: %u ranks", j->id, j->handle, j->nranks);
	}
	/* Bytes the rank sent after JOIN were left in the buffer. */
	conn_read_cb(c->bev, c);
}

static void queue_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct dcmd *ev = evq_take(&d->evq);

	(void)fd;
	(void)what;
	while (ev) {
		struct dcmd *next = ev->next;
		struct job *j = ev->job;
		switch (ev->type) {
		case DCMD_ADD_JOB:
			if (ev->rc && j->state != JOB_ENDING)
				job_abort(d, j, WIRE_E_INTERNAL, "registering %zu bytes for job 0x%" PRIx64 " failed: %s",
					  j->region_bytes, j->id, fi_strerror(-ev->rc));
			break;
		case DCMD_ADD_RANK:
			on_rank_added(d, ev);
			break;
		case DEV_ABORT:
			job_abort(d, j, (enum wire_code)j->abort_code, "%s", j->abort_text);
			break;
		case DEV_RELEASED:
			/* Stuck sends: the buffers are back, the bookkeeping stays
			 * charged until the job is freed. */
			j->region_released = true;
			d->mem_used -= j->region_bytes;
			break;
		case DCMD_REMOVE_JOB:
			SC_DBG("job 0x%" PRIx64 " (handle %u): %zu bytes back in the pool", j->id, j->handle,
			       j->mem_bytes);
			job_free(d, j);
			break;
		}
		ev = next;
	}
}

/* ---- drain, reload, start, stop ---- */

static bool jobs_in_flight(const struct daemon *d)
{
	for (const struct job *j = d->jobs; j; j = j->next)
		if (j->state != JOB_ENDING &&
		    atomic_load_explicit((_Atomic uint32_t *)&j->partial, memory_order_relaxed))
			return true;
	return false;
}

static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	uint64_t waited = sc_now_ms() - d->drain_start_ms;

	(void)fd;
	(void)what;
	if (!d->stopping) {
		if (jobs_in_flight(d) && waited < (uint64_t)d->cfg.drain_timeout_ms)
			return;
		d->stopping = true;
		d->drain_start_ms = sc_now_ms();
		for (struct job *j = d->jobs; j; j = j->next)
			job_abort(d, j, WIRE_E_SHUTDOWN, "daemon is shutting down");
		daemon_notify("STATUS=Stopping: waiting for ABORTs to be written");
	}
	/* Wait (bounded) for ABORTs to be written and jobs to release memory. */
	bool busy = false;
	for (struct conn *c = d->conns; c; c = c->next)
		if (c->state == CONN_CLOSING)
			busy = true;
	if (d->jobs)
		busy = true;
	if (!busy || sc_now_ms() - d->drain_start_ms > 2000)
		event_base_loopexit(d->base, NULL);
}

void control_drain(struct daemon *d)
{
	struct timeval tv = { 0, 50000 };

	if (d->draining) {
		SC_WARN("second stop signal: aborting jobs now");
		d->cfg.drain_timeout_ms = 0;
		return;
	}
	d->draining = true;
	d->drain_start_ms = sc_now_ms();
	daemon_notify("STOPPING=1\nSTATUS=Draining: refusing joins, finishing chunks in flight");
	SC_INFO("draining: refusing joins, waiting up to %lld ms for chunks in flight",
		(long long)d->cfg.drain_timeout_ms);
	if (d->listener)
		evconnlistener_disable(d->listener);
	d->ev_drain = event_new(d->base, -1, EV_PERSIST, drain_cb, d);
	if (!d->ev_drain) {
		event_base_loopexit(d->base, NULL);
		return;
	}
	event_add(d->ev_drain, &tv);
	drain_cb(-1, 0, d);
}

static int key_load(struct daemon *d, const char *path, uint8_t *key, size_t *len)
{
	const char *why = NULL;
	int rc;

	if (!*path) {
		*len = 0;
		return 0;
	}
	rc = wire_key_load(path, key, len, &why);
	if (rc)
		SC_ERR("auth.key-file %s: %s", path, why ? why : strerror(-rc));
	(void)d;
	return rc;
}

int control_reload(struct daemon *d, char *why, size_t why_len)
{
	struct settings n;
	enum cfg_source nsrc[SETTINGS_MAX];
	struct cfg_error err = { { 0 } };
	enum sc_log_level lvl;
	uint8_t key[256];
	size_t key_len = 0;
	int changed = 0, restart = 0;

	if (settings_load(&n, d->config_path, nsrc, &err)) {
		SC_ERR("reload: %s; keeping the running configuration", err.msg);
		snprintf(why, why_len, "%s", err.msg);
		return -EINVAL;
	}
	if (*d->cli_log_level)
		settings_strcpy(n.log_level, sizeof(n.log_level), d->cli_log_level);
	if (key_load(d, n.key_file, key, &key_len)) {
		SC_ERR("reload: keeping the running configuration");
		snprintf(why, why_len, "auth.key-file %s is not usable", n.key_file);
		return -EINVAL;
	}
	for (const struct cfg_entry *e = settings_table; e->key; e++) {
		char a[CFG_STR_MAX + 32], b[CFG_STR_MAX + 32];
		cfg_format(e, &d->cfg, a, sizeof(a));
		cfg_format(e, &n, b, sizeof(b));
		if (!strcmp(a, b) && !(e->offset == offsetof(struct settings, key_file) && *b))
			continue;
		if (!strcmp(a, b)) {
			SC_INFO("reload: %s.%s = %s re-read", e->section, e->key, b);
			changed++;
			continue;
		}
		if (e->reloadable) {
			SC_INFO("reload: %s.%s: %s -> %s", e->section, e->key, a, b);
			changed++;
		} else {
			SC_WARN("reload: %s.%s: %s -> %s needs a restart; keeping %s", e->section, e->key, a,
				b, a);
			restart++;
		}
	}
	/* Apply the reloadable ones; a source follows its value. */
	for (const struct cfg_entry *e = settings_table; e->key; e++) {
		char a[CFG_STR_MAX + 32], b[CFG_STR_MAX + 32];
		size_t i = (size_t)(e - settings_table);
		cfg_format(e, &d->cfg, a, sizeof(a));
		cfg_format(e, &n, b, sizeof(b));
		if (e->reloadable || !strcmp(a, b))
			d->cfg_src[i] = nsrc[i];
		if (!e->reloadable)
			continue;
		cfg_set(e, &d->cfg, b, NULL);
	}
	d->loaded = n;
	memcpy(d->key, key, key_len);
	d->key_len = key_len;
	if (!sc_log_level_parse(d->cfg.log_level, &lvl))
		sc_log_set_level(lvl);
	if (!d->key_len)
		SC_WARN("authentication is off (auth.key-file is empty): anyone who reaches the control port can join jobs");
	SC_INFO("reload: %d setting(s) applied, %d need a restart", changed, restart);
	return 0;
}

uint32_t control_ranks(const struct daemon *d)
{
	uint32_t n = 0;

	for (const struct job *j = d->jobs; j; j = j->next)
		if (j->state != JOB_ENDING)
			for (uint32_t r = 0; r < j->nranks; r++)
				n += j->ranks[r].state == RANK_JOINED;
	return n;
}

int control_start(struct daemon *d)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	char addr[300];

	if (key_load(d, d->cfg.key_file, d->key, &d->key_len))
		return -EINVAL;
	if (!d->key_len)
		SC_WARN("authentication is off (auth.key-file is empty): anyone who reaches the control port can join jobs");
	d->next_handle = 1;
	d->ev_queue = event_new(d->base, d->evq.efd, EV_READ | EV_PERSIST, queue_cb, d);
	if (!d->ev_queue || event_add(d->ev_queue, NULL))
		return -ENOMEM;
	memset(&ss, 0, sizeof(ss));
	snprintf(addr, sizeof(addr), "%s port %lld", d->cfg.control_listen,
		 (long long)d->cfg.control_port);
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, d->cfg.control_listen, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)d->cfg.control_port);
		sslen = sizeof(*in4);
	} else if (inet_pton(AF_INET6, d->cfg.control_listen, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)d->cfg.control_port);
		sslen = sizeof(*in6);
	} else {
		SC_ERR("control.listen = %s: not an IP address", d->cfg.control_listen);
		return -EINVAL;
	}
	d->listener = evconnlistener_new_bind(d->base, accept_cb, d,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
					      128, (struct sockaddr *)&ss, sslen);
	if (!d->listener) {
		SC_ERR("control listener on %s: %s", addr, strerror(errno));
		return -errno ? -errno : -EADDRINUSE;
	}
	struct sockaddr_storage b;
	socklen_t blen = sizeof(b);
	getsockname(evconnlistener_get_fd(d->listener), (struct sockaddr *)&b, &blen);
	d->control_port = ntohs(((struct sockaddr_in *)&b)->sin_port);
	SC_INFO("control listener on %s port %u", d->cfg.control_listen, d->control_port);
	return 0;
}

void control_stop(struct daemon *d)
{
	for (struct conn *c = d->conns; c; c = c->next)
		c->job = NULL; /* the jobs are freed below, nobody is told */
	while (d->conns)
		conn_free(d->conns);
	while (d->jobs)
		job_free(d, d->jobs);
	if (d->listener)
		evconnlistener_free(d->listener);
	d->listener = NULL;
	if (d->ev_queue)
		event_free(d->ev_queue);
	if (d->ev_drain)
		event_free(d->ev_drain);
	d->ev_queue = d->ev_drain = NULL;
}
