/* Client library: the control protocol with each aggregator, over TCP.
 *
 *   connect -> HELLO (nonce) -> JOIN (HMAC-signed) -> JOIN_OK -> READY
 *
 * then, with failover, a PING every deadline / 8 that the daemon's control
 * thread answers with a PONG: an aggregator from which nothing was heard
 * for the deadline (no PONG, no result) is stopped or cut off, even while
 * it has no chunk of ours (a daemon that waits for a slow rank still
 * answers). While its results flow, the PINGs are CLIENT_PING_FLOWING
 * times rarer. ABORT, REFUSE after
 * READY, a closed connection or a protocol error fail the aggregator
 * (client_agg_down). Everything is non-blocking; client_ctl_poll runs at
 * most every CLIENT_CTL_INTERVAL_NS from client_progress. */
#include "client_int.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "hostport.h"
#include "log.h"

const char *const client_agg_state_what[] = {
	"connecting", "waiting for HELLO", "waiting for JOIN_OK", "waiting for READY",
	"ready", "dead", "left",
};

static int refuse_errno(unsigned code)
{
	switch (code) {
	case WIRE_E_VERSION:
		return -EPROTONOSUPPORT;
	case WIRE_E_AUTH:
		return -EACCES;
	case WIRE_E_MEMORY:
		return -ENOMEM;
	case WIRE_E_JOB_FULL:
	case WIRE_E_RANK_TAKEN:
	case WIRE_E_TOO_MANY_JOBS:
		return -EBUSY;
	case WIRE_E_NRANKS:
	case WIRE_E_PARAMS:
	case WIRE_E_PROVIDER:
	case WIRE_E_MALFORMED:
		return -EINVAL;
	case WIRE_E_TIMEOUT:
		return -ETIMEDOUT;
	case WIRE_E_SHUTDOWN:
		return -ESHUTDOWN;
	case WIRE_E_DATA:
		return -EPROTO;
	default:
		return -ECONNABORTED;
	}
}

static void ctl_flush(struct client *c, struct client_agg *a)
{
	while (a->woff < a->wlen) {
		ssize_t n = send(a->fd, a->wbuf + a->woff, a->wlen - a->woff, MSG_NOSIGNAL);
		if (n > 0) {
			a->woff += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		client_agg_down(c, a, -ECONNRESET, "%s: connection lost while sending: %s", a->name,
				strerror(errno));
		return;
	}
	a->woff = a->wlen = 0;
}

/* Appends m to what goes out on a's socket and sends what it can. */
static int ctl_queue(struct client *c, struct client_agg *a, const struct wire_msg *m)
{
	if (a->woff && a->woff == a->wlen)
		a->woff = a->wlen = 0;
	struct wire_msg v = *m;
	v.version = a->ver ? a->ver : WIRE_VERSION_MIN;
	int n = wire_msg_encode(&v, a->wbuf + a->wlen, sizeof(a->wbuf) - a->wlen);
	if (n == -ENOSPC)
		return -EAGAIN; /* a full socket: the message goes on a later pass */
	if (n < 0) {
		client_agg_down(c, a, -EINVAL, "%s: cannot encode %s: %s", a->name,
				wire_type_name(m->type), strerror(-n));
		return n;
	}
	a->wlen += (size_t)n;
	ctl_flush(c, a);
	return 0;
}

static void send_join(struct client *c, struct client_agg *a, size_t ai, uint64_t nonce)
{
	struct wire_msg m = { .type = WIRE_JOIN };
	struct wire_join *j = &m.u.join;

	j->job_id = c->job_id;
	j->rank = c->rank;
	j->nranks = c->nranks;
	j->chunk_bytes = c->chunk_bytes;
	j->window = c->base_window;
	if (c->weight > 1 && a->ver >= 4)
		j->weight = (uint16_t)c->weight;
	else if (c->weight > 1)
		SC_WARN("%s speaks protocol %u: weight %u not sent (weights need 4); it grants window %u",
			a->name, a->ver, c->weight, c->base_window);
	if (a->ver >= WIRE_LABEL_VERSION)
		memcpy(j->label, c->label, sizeof(j->label));
	j->dtype_mask = c->dtype_mask;
	j->timeout_ms = c->timeout_ms;
	j->result_key = (uint16_t)ai;
	j->flags = (uint16_t)(c->join_flags | (a->rejoin_ns && a->ver >= 5 ? WIRE_JOIN_F_REJOIN : 0));
	/* Results come to this aggregator's own endpoint. */
	j->addr_len = (uint16_t)a->ep->addrlen;
	memcpy(j->addr, a->ep->addr, a->ep->addrlen);
	snprintf(j->provider, sizeof(j->provider), "%s", fabric_provider(a->ep));
	if (wire_join_sign(c->key, c->key_len, nonce, j)) {
		client_agg_down(c, a, -EIO, "%s: signing JOIN failed (HMAC-SHA256)", a->name);
		return;
	}
	a->st = AGG_JOINING;
	ctl_queue(c, a, &m);
}

static void handle_msg(struct client *c, struct client_agg *a, size_t ai, const struct wire_msg *m)
{
	a->heard_ns = sc_now_ns();
	a->ping_wait_ns = 0;
	switch (m->type) {
	case WIRE_HELLO:
		if (a->st != AGG_HELLO)
			break;
		if (m->u.hello.version_min > WIRE_VERSION || m->u.hello.version_max < WIRE_VERSION_MIN) {
			client_agg_down(c, a, -EPROTONOSUPPORT,
				 "%s speaks protocol versions %u..%u, this client speaks %u..%u", a->name,
				 m->u.hello.version_min, m->u.hello.version_max, WIRE_VERSION_MIN,
				 WIRE_VERSION);
			return;
		}
		/* the newest both speak (wire.h, "Versions") */
		a->ver = m->u.hello.version_max < WIRE_VERSION ? m->u.hello.version_max : WIRE_VERSION;
		if (!a->ep) { /* joining again (client_agg_rejoin): a fresh endpoint */
			int rc = fabric_open_sibling(c->fab, 0, &a->ep);
			if (rc) {
				client_agg_down(c, a, rc < 0 ? rc : -rc, "%s: opening an endpoint to join again: %s",
						a->name, fi_strerror(rc < 0 ? -rc : rc));
				return;
			}
		}
		send_join(c, a, ai, m->u.hello.nonce);
		return;
	case WIRE_JOIN_OK: {
		const struct wire_join_ok *o = &m->u.join_ok;
		if (a->st != AGG_JOINING)
			break;
		if (!o->window || o->window > c->window) {
			client_agg_down(c, a, -EPROTO, "%s granted a window of %u, more than the %u asked for",
				 a->name, o->window, c->window);
			return;
		}
		/* A chunk below the one asked for is the aggregator's to give
		 * ([job] max-inflight): each aggregator's own grant cuts its
		 * shard (client_req.c); a larger one would not fit the slots. */
		if (!o->chunk_bytes || o->chunk_bytes % 8 || o->chunk_bytes > c->chunk_bytes) {
			client_agg_down(c, a, -EPROTO, "%s granted a chunk of %u bytes, asked for %u "
				 "(a multiple of 8, not above it)", a->name, o->chunk_bytes, c->chunk_bytes);
			return;
		}
		/* Lanes (version 7): the job is spread over the daemon's data
		 * threads, an endpoint each; a window not a multiple of them
		 * still works (slot si on lane si % lanes). */
		if (o->lanes > 1 && (a->ver < WIRE_LANES_VERSION || o->lanes > o->window)) {
			client_agg_down(c, a, -EPROTO, "%s named %u lanes for a window of %u in protocol %u",
					a->name, o->lanes, o->window, a->ver);
			return;
		}
		/* Results spread over the lanes (version 8): small ones come to
		 * this rank from lane (si + rank) % lanes. */
		if (o->spread && a->ver < WIRE_SPREAD_VERSION) {
			client_agg_down(c, a, -EPROTO, "%s spread results over its lanes in protocol %u",
					a->name, a->ver);
			return;
		}
		a->lanes = o->lanes > 1 ? o->lanes : 1;
		a->spread = o->spread;
		for (uint32_t k = 0; k < a->lanes; k++) {
			const uint8_t *la = k ? o->lane_addr[k] : o->addr;
			size_t ll = k ? o->lane_len[k] : o->addr_len;
			int rc = fabric_av_insert(a->ep, la, ll, &a->lane_addr[k]);
			if (rc) {
				client_agg_down(c, a, -EIO, "%s: cannot add its data address%s to the AV (%s): %s",
						a->name, k ? " of a lane" : "", fabric_provider(a->ep),
						fi_strerror(-rc));
				return;
			}
		}
		a->av_inserted = true;
		if (o->flags & WIRE_OK_F_SEALED) {
			uint8_t k[SC_SEAL_KEY];
			if (!c->key_len) {
				client_agg_down(c, a, -EPROTO, "%s seals the job's data but this rank has no key", a->name);
				return;
			}
			if (sc_seal_derive(c->key, c->key_len, c->job_id, o->data_nonce, k) ||
			    sc_seal_init(&a->seal, k)) {
				client_agg_down(c, a, -EIO, "%s: cannot key the data seal (OpenSSL)", a->name);
				return;
			}
			a->sealed = true;
		}
		a->job_handle = o->job_handle;
		a->window = o->window;
		a->weight = o->weight ? o->weight : 1;
		if (a->weight < c->weight && a->ver >= 4)
			SC_WARN("%s grants weight %u of the %u asked (its [job] max-weight): window %u",
				a->name, a->weight, c->weight, a->window);
		a->chunk_bytes = o->chunk_bytes;
		a->timeout_ms = o->timeout_ms;
		if (o->flags & WIRE_OK_F_MCAST) {
			client_mc_join(c, ai, o);
			if (a->st == AGG_DEAD)
				return;
		}
		a->st = AGG_WAIT_READY;
		SC_DBG("%s: joined job 0x%llx as rank %u of %u (handle %u, window %u, weight %u, chunk %u)",
		       a->name, (unsigned long long)c->job_id, c->rank, c->nranks, a->job_handle,
		       a->window, a->weight, a->chunk_bytes);
		return;
	}
	case WIRE_READY:
		if (a->st != AGG_WAIT_READY)
			break;
		if (m->u.ready.job_handle != a->job_handle || m->u.ready.nranks != c->nranks) {
			client_agg_down(c, a, -EPROTO,
				 "%s sent READY for job handle %u with %u ranks, expected handle %u "
				 "with %u ranks",
				 a->name, m->u.ready.job_handle, m->u.ready.nranks, a->job_handle,
				 c->nranks);
			return;
		}
		a->st = AGG_READY;
		a->heard_ns = a->ping_ns = sc_now_ns();
		return;
	case WIRE_REFUSE:
		if (a->st == AGG_READY)
			break;
		client_agg_down(c, a, refuse_errno(m->u.refuse.code), "%s refused join: %s: %s", a->name,
			 wire_code_name(m->u.refuse.code), m->u.refuse.text);
		return;
	case WIRE_ABORT:
		client_agg_down(c, a, m->u.abort.code == WIRE_E_TIMEOUT ? -ETIMEDOUT : -ECONNABORTED,
			 "%s aborted the job: %s: %s", a->name, wire_code_name(m->u.abort.code),
			 m->u.abort.text);
		return;
	case WIRE_PONG:
		if (a->st != AGG_READY)
			break;
		if (m->u.ping.has_load) {
			a->has_load = true;
			a->load_pm = m->u.ping.load_pm;
			a->jobs = m->u.ping.jobs;
		}
		return; /* heard_ns is what counts; a late token is fine too */
	case WIRE_DRAIN:
		/* version 5: the daemon goes away and serves the job for
		 * deadline_ms more; the caller moves off and retires it
		 * (client_agg_retire). PINGs go on until then. */
		if (a->st != AGG_READY || a->ver < WIRE_DRAIN_VERSION)
			break;
		if (!a->draining)
			SC_INFO("%s drains: it asks job 0x%llx to move off (it serves it for %u ms more)",
				a->name, (unsigned long long)c->job_id, m->u.drain.deadline_ms);
		a->draining = true;
		return;
	default:
		break;
	}
	client_agg_down(c, a, -EPROTO, "%s: protocol error: unexpected %s while %s", a->name,
		 wire_type_name(m->type), client_agg_state_what[a->st]);
}

void client_ctl_liveness(struct client *c, uint64_t now)
{
	uint64_t limit = (uint64_t)c->deadline_ms * 1000000ull, every = limit / 8;

	if (!c->deadline_ms)
		return;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		if (a->st != AGG_READY)
			continue;
		/* A result from the aggregator is word from it, as a PONG is:
		 * while results flow, a PING only every CLIENT_PING_FLOWING
		 * eighths (the PONG's load and tenants, collnet_adapt.c). */
		if (a->result_ns > a->heard_ns) {
			a->heard_ns = a->result_ns;
			a->ping_wait_ns = 0;
		}
		/* Failed: nothing heard for the deadline although a PING has
		 * been waiting long enough for an answer (an eighth of it). The
		 * second part keeps a caller that did not progress us for a
		 * while from taking its own pause for the aggregator's. */
		if (a->ping_wait_ns && now - a->heard_ns >= limit && now - a->ping_wait_ns >= every) {
			client_agg_down(c, a, -ETIMEDOUT,
					"%s: no answer to PING for %u ms (stopped, or cut off from this node)",
					a->name, c->deadline_ms);
			continue;
		}
		if (now - a->ping_ns < (now - a->result_ns < every ? CLIENT_PING_FLOWING * every : every))
			continue;
		struct wire_msg m = { .type = WIRE_PING };
		m.u.ping.token = ++a->ping_token;
		if (ctl_queue(c, a, &m) == 0) {
			a->ping_ns = now;
			if (!a->ping_wait_ns)
				a->ping_wait_ns = now;
		}
	}
}

void client_ctl_leave(struct client *c, struct client_agg *a)
{
	(void)c;
	if (a->fd < 0 || (a->st != AGG_READY && a->st != AGG_WAIT_READY))
		return;
	/* Best effort: a few bytes into an idle socket; a closed connection
	 * is a LEAVE anyway. */
	struct wire_msg m = { .version = a->ver, .type = WIRE_LEAVE,
			      .u.leave.job_handle = a->job_handle };
	uint8_t buf[WIRE_MSG_MAX];
	int n = wire_msg_encode(&m, buf, sizeof(buf));
	if (n > 0 && send(a->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
		SC_DBG("%s: LEAVE not sent: %s", a->name, strerror(errno));
}

/* client_agg_retire's way out: LEAVE after what is queued, everything
 * written, our side shut, and the daemon's close awaited, each bounded by
 * `until`. Closing with unread bytes (a PONG) would send a reset, which can
 * drop the LEAVE before the daemon reads it and turn a clean leave into a
 * lost rank. 0, or -errno when the LEAVE may not have arrived. */
int client_ctl_leave_flush(struct client *c, struct client_agg *a, uint64_t until)
{
	struct wire_msg m = { .type = WIRE_LEAVE, .u.leave.job_handle = a->job_handle };
	bool queued = false;

	for (;;) {
		if (a->st == AGG_DEAD)
			return a->err ? a->err : -ECONNRESET;
		if (a->woff == a->wlen) {
			a->woff = a->wlen = 0;
			if (queued)
				break; /* the LEAVE is written */
		}
		if (!queued) {
			int rc = ctl_queue(c, a, &m); /* after what is queued, or once it is out */
			if (rc == 0) {
				queued = true;
				continue;
			}
			if (rc != -EAGAIN)
				return rc;
		}
		uint64_t now = sc_now_ns();
		if (now >= until)
			return -ETIMEDOUT;
		struct pollfd p = { a->fd, POLLOUT, 0 };
		poll(&p, 1, (int)((until - now) / 1000000ull) + 1);
		ctl_flush(c, a);
	}
	shutdown(a->fd, SHUT_WR);
	for (;;) {
		char buf[WIRE_MSG_MAX];
		ssize_t n = recv(a->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return 0; /* the daemon took the LEAVE and closed (or reset) */
		uint64_t now = sc_now_ns();
		if (now >= until)
			return 0; /* written; the daemon's close is late, not ours to wait for */
		if (n > 0)
			continue; /* PONGs: nothing to act on any more */
		struct pollfd p = { a->fd, POLLIN, 0 };
		poll(&p, 1, (int)((until - now) / 1000000ull) + 1);
	}
}

/* Frames and handles every complete message in a->rbuf. */
static void ctl_parse(struct client *c, struct client_agg *a, size_t ai)
{
	size_t pos = 0;

	while (a->st != AGG_DEAD && a->rlen - pos >= WIRE_HDR_LEN) {
		struct wire_hdr h;
		struct wire_msg m;
		int rc = wire_hdr_decode(a->rbuf + pos, a->rlen - pos, &h);
		if (rc == -EPROTO) {
			client_agg_down(c, a, -EPROTONOSUPPORT,
				 "%s: protocol error: message in protocol version %u, this client "
				 "speaks %u..%u",
				 a->name, h.version, WIRE_VERSION_MIN, WIRE_VERSION);
			return;
		}
		if (rc) {
			client_agg_down(c, a, -EPROTO, "%s: protocol error: invalid message header", a->name);
			return;
		}
		if (a->rlen - pos < WIRE_HDR_LEN + h.len)
			break;
		rc = wire_msg_decode(h.type, a->rbuf + pos + WIRE_HDR_LEN, h.len, &m);
		if (rc) {
			client_agg_down(c, a, -EPROTO, "%s: protocol error: invalid %s message (%u bytes)",
				 a->name, wire_type_name(h.type), h.len);
			return;
		}
		pos += WIRE_HDR_LEN + h.len;
		handle_msg(c, a, ai, &m);
	}
	if (a->st != AGG_DEAD && pos) {
		memmove(a->rbuf, a->rbuf + pos, a->rlen - pos);
		a->rlen -= pos;
	}
}

static void ctl_read(struct client *c, struct client_agg *a, size_t ai)
{
	for (int i = 0; i < 16 && a->st != AGG_DEAD; i++) {
		ssize_t n = recv(a->fd, a->rbuf + a->rlen, sizeof(a->rbuf) - a->rlen, 0);
		if (n > 0) {
			a->rlen += (size_t)n;
			ctl_parse(c, a, ai);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == 0) {
			client_agg_down(c, a, a->st == AGG_READY ? -ECONNRESET : -ECONNREFUSED,
				 "%s closed the connection%s%s", a->name,
				 a->st == AGG_READY ? "" : " while ",
				 a->st == AGG_READY ? "" : client_agg_state_what[a->st]);
			return;
		}
		if (a->st == AGG_HELLO)
			client_agg_down(c, a, -errno, "%s unreachable: %s", a->name, strerror(errno));
		else
			client_agg_down(c, a, -errno, "%s: connection lost: %s", a->name, strerror(errno));
		return;
	}
}

/* One non-blocking pass over every control socket. */
void client_ctl_poll(struct client *c)
{
	struct pollfd pfd[CLIENT_AGGS_MAX];
	size_t idx[CLIENT_AGGS_MAX], n = 0;

	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		if (a->fd < 0 || a->st == AGG_DEAD)
			continue;
		pfd[n].fd = a->fd;
		pfd[n].events = a->st == AGG_CONNECTING ? POLLOUT : (short)(POLLIN | (a->wlen ? POLLOUT : 0));
		pfd[n].revents = 0;
		idx[n++] = ai;
	}
	if (!n || poll(pfd, n, 0) <= 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct client_agg *a = &c->aggs[idx[i]];
		if (!pfd[i].revents || a->st == AGG_DEAD)
			continue;
		if (a->st == AGG_CONNECTING) {
			int err = 0;
			socklen_t l = sizeof(err);
			if (getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
				err = errno;
			if (err) {
				client_agg_down(c, a, -err, "%s unreachable: %s", a->name, strerror(err));
				continue;
			}
			a->st = AGG_HELLO;
			continue; /* HELLO is read on the next pass */
		}
		if (a->wlen && (pfd[i].revents & POLLOUT))
			ctl_flush(c, a);
		if (a->st != AGG_DEAD && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
			ctl_read(c, a, idx[i]);
	}
}

int client_parse_endpoint(const char *s, struct client_agg *a, char *why, size_t whylen)
{
	struct hostport hp;
	char port[8], what[CLIENT_ERR_MAX];

	snprintf(a->name, sizeof(a->name), "%s", s);
	if (hostport_parse(s, &hp, what, sizeof(what))) {
		snprintf(why, whylen, "aggregator %s", what);
		return -EINVAL;
	}
	snprintf(port, sizeof(port), "%u", hp.port);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(hp.host, port, &hints, &res);
	if (rc || !res) {
		snprintf(why, whylen, "aggregator \"%s\": cannot resolve \"%s\": %s", s, hp.host,
			 gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	memcpy(&a->sa, res->ai_addr, res->ai_addrlen);
	a->salen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

void client_ctl_connect(struct client *c, struct client_agg *a)
{
	int one = 1;

	a->fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		client_agg_down(c, a, -errno, "%s: socket: %s", a->name, strerror(errno));
		return;
	}
	setsockopt(a->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(a->fd, (struct sockaddr *)&a->sa, a->salen) == 0) {
		a->st = AGG_HELLO;
		return;
	}
	if (errno == EINPROGRESS || errno == EINTR) {
		a->st = AGG_CONNECTING;
		return;
	}
	client_agg_down(c, a, -errno, "%s unreachable: %s", a->name, strerror(errno));
}

