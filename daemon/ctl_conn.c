/* Control connections: the listener, accept (HELLO with a fresh nonce),
 * framing (a header, then the message it announces, dispatched to
 * admission), sending, refusals, and the two ways a connection closes. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "clock.h"
#include "ctl.h"
#include "log.h"

static void conn_event_cb(struct bufferevent *bev, short what, void *arg);

/* ---- closing ---- */

static void conn_detach(struct conn *c)
{
	if (c->job)
		job_rank_gone(c, false);
}

void conn_free(struct conn *c)
{
	struct daemon *d = c->d;

	conn_detach(c);
	LIST_REMOVE(c, link);
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

void conn_close_after_flush(struct conn *c)
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

void conn_free_all(struct daemon *d)
{
	for (struct conn *c = LIST_FIRST(&d->conns); c; c = LIST_NEXT(c, link))
		c->job = NULL; /* the jobs are freed after this, nobody is told */
	while (!LIST_EMPTY(&d->conns))
		conn_free(LIST_FIRST(&d->conns));
}

/* The busiest data thread's share of busy time since the last sample, per
 * mille, sampled at most every 250 ms (PINGs come every deadline / 8 from
 * each rank): what a PONG of version 3 reports as the daemon's load. */
uint16_t daemon_load_pm(struct daemon *d)
{
	uint64_t now = sc_now_ns(), dt = now - d->load_t_ns, most = 0;

	if (d->load_t_ns && dt < 250000000ull)
		return d->load_pm;
	for (unsigned i = 0; i < d->nthreads; i++) {
		struct dthread *t = &d->threads[i];
		uint64_t b = ctr_get(&t->busy_ns);
		if (b - t->load_busy_seen > most)
			most = b - t->load_busy_seen;
		t->load_busy_seen = b;
	}
	d->load_pm = !d->load_t_ns ? 0 : most >= dt ? 1000 : (uint16_t)(most * 1000 / dt);
	d->load_t_ns = now;
	return d->load_pm;
}

/* The jobs a PONG to a rank of self reports: self, and every other live job
 * that moved a chunk within [job] tenant-idle. A job joined but not sending
 * (one whose ranks start 6-8 s after their JOIN in the emulated cluster; a
 * communicator NCCL made and never uses) takes nothing from the others,
 * and self always counts, so that its own pauses change nothing it hears.
 * The default is long (60 s) because a process's communicators take turns:
 * the cluster bench's six interleaved splits each ran every ~8 s, and with
 * 10 s the count went up and down between them, each change a trial.
 * Chunk counts are looked at here, at each PONG. */
uint16_t daemon_jobs_for(struct daemon *d, const struct job *self)
{
	uint64_t now = sc_now_ms(), n = 1;

	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link)) {
		uint64_t c = job_sum_chunks(j);
		if (c != j->chunks_seen) {
			j->chunks_seen = c;
			j->active_ms = now;
		}
		if (j != self && j->state != JOB_ENDING && j->active_ms &&
		    now - j->active_ms < (uint64_t)d->cfg.tenant_idle_ms)
			n++;
	}
	return n > 0xFFFF ? 0xFFFF : (uint16_t)n;
}

/* ---- sending ---- */

int conn_send(struct conn *c, const struct wire_msg *m)
{
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_msg v = *m;

	v.version = c->ver; /* the rank's version (wire.h, "Versions") */
	int n = wire_msg_encode(&v, buf, sizeof(buf));

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

static void refuse_send(struct conn *c, enum wire_code code, struct wire_msg *m, const char *logged)
{
	ctr_add(&c->d->stats.refused[code], 1);
	if (code != WIRE_E_SHUTDOWN) /* a normal stop is not an error */
		ctr_add(&c->d->stats.errors[code], 1);
	SC_INFO("%s: join refused (%s): %s", c->peer, wire_code_name(code), logged);
	conn_send(c, m);
	conn_close_after_flush(c);
}

void conn_refuse(struct conn *c, enum wire_code code, const char *fmt, ...)
{
	struct wire_msg m;
	va_list ap;

	va_start(ap, fmt);
	text_msg(&m, WIRE_REFUSE, 0, code, fmt, ap);
	va_end(ap);
	refuse_send(c, code, &m, m.u.refuse.text);
}

void conn_refuse_job(struct conn *c, enum wire_code code, const char *reason, const char *fmt, ...)
{
	struct wire_msg m;
	char full[sizeof(m.u.refuse.text)];
	va_list ap;

	va_start(ap, fmt);
	text_msg(&m, WIRE_REFUSE, 0, code, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "%s", m.u.refuse.text);
	if (!c->d->key_len)
		snprintf(m.u.refuse.text, sizeof(m.u.refuse.text), "%s", reason);
	refuse_send(c, code, &m, full);
}

void conn_abort(struct conn *c, uint32_t handle, enum wire_code code, const char *text)
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

/* ---- reading: framing and dispatch ---- */

#define CONN_PONG_BACKLOG_MAX (64u << 10) /* bytes queued to a rank: PONGs stop */

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
				    "protocol version %u is not supported, this daemon speaks %u..%u",
				    h.version, WIRE_VERSION_MIN, WIRE_VERSION);
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
			if (c->state == CONN_HELLO)
				c->ver = h.version; /* answered in it from here on */
			admit_join(c, &m.u.join);
			break;
		case WIRE_LEAVE:
			admit_leave(c, &m.u.leave);
			return;
		case WIRE_PING:
			/* A joined rank's liveness probe, answered from this thread
			 * whatever the data threads are doing; not queued without
			 * bound for a peer that never reads. */
			if (c->state != CONN_JOINED) {
				conn_refuse(c, WIRE_E_MALFORMED, "PING before JOIN_OK");
				return;
			}
			if (evbuffer_get_length(bufferevent_get_output(c->bev)) < CONN_PONG_BACKLOG_MAX) {
				struct wire_msg pong = { .type = WIRE_PONG };
				pong.u.ping.token = m.u.ping.token;
				if (c->ver >= 3) {
					pong.u.ping.has_load = true;
					pong.u.ping.load_pm = daemon_load_pm(c->d);
					pong.u.ping.jobs = daemon_jobs_for(c->d, c->job);
				}
				conn_send(c, &pong);
			}
			break;
		default:
			conn_refuse(c, WIRE_E_MALFORMED, "a rank may not send %s", wire_type_name(h.type));
			return;
		}
	}
}

void conn_read_pending(struct conn *c)
{
	conn_read_cb(c->bev, c);
}

void conn_handshake_done(struct conn *c)
{
	bufferevent_set_timeouts(c->bev, NULL, NULL);
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

/* ---- accepting ---- */

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
	accept_backoff_reset(&d->ctl_backoff);
	if (d->draining) { /* accepted before the listener went off */
		SC_DBG("draining: closing a new control connection");
		evutil_closesocket(fd);
		return;
	}
	if (d->nconns >= (uint64_t)d->cfg.max_connections) {
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
	c->ver = WIRE_VERSION_MIN; /* the HELLO, which every version reads */
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
	LIST_INSERT_HEAD(&d->conns, c, link);
	d->nconns++;
	bufferevent_setcb(c->bev, conn_read_cb, NULL, conn_event_cb, c);
	struct timeval tv = { d->cfg.handshake_timeout_ms / 1000,
			      (d->cfg.handshake_timeout_ms % 1000) * 1000 };
	bufferevent_set_timeouts(c->bev, &tv, NULL);
	bufferevent_setwatermark(c->bev, EV_READ, 0, WIRE_MSG_MAX * 4);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	m.u.hello.version_min = WIRE_VERSION_MIN;
	m.u.hello.version_max = WIRE_VERSION;
	m.u.hello.nonce = c->nonce;
	conn_send(c, &m);
}

/* After an accept failure pause: not while draining (the listener is off
 * for good then). */
static bool listen_may_resume(void *arg)
{
	const struct daemon *d = arg;

	return !d->draining;
}

int conn_listen_start(struct daemon *d)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	char addr[300];

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
	/* The kernel's accept queue holds the joins that arrive at once: all
	 * of a job's ranks do (128 reset some of 2,048 joining together);
	 * max-connections, which the kernel clamps to net.core.somaxconn. */
	int backlog = d->cfg.max_connections < 65535 ? (int)d->cfg.max_connections : 65535;
	d->listener = evconnlistener_new_bind(d->base, accept_cb, d,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
					      backlog, (struct sockaddr *)&ss, sslen);
	if (!d->listener) {
		SC_ERR("control listener on %s: %s", addr, strerror(errno));
		return -errno ? -errno : -EADDRINUSE;
	}
	int rc = accept_backoff_init(&d->ctl_backoff, d->base, d->listener, "control",
				     &d->stats.errors[ERR_ACCEPT], listen_may_resume, d);
	if (rc) {
		evconnlistener_free(d->listener);
		d->listener = NULL;
		return rc;
	}
	struct sockaddr_storage b;
	socklen_t blen = sizeof(b);
	getsockname(evconnlistener_get_fd(d->listener), (struct sockaddr *)&b, &blen);
	d->control_port = ntohs(((struct sockaddr_in *)&b)->sin_port);
	SC_INFO("control listener on %s port %u", d->cfg.control_listen, d->control_port);
	return 0;
}

void conn_listen_stop(struct daemon *d)
{
	accept_backoff_fini(&d->ctl_backoff);
	if (d->listener)
		evconnlistener_free(d->listener);
	d->listener = NULL;
}
