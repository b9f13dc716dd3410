/* The InfiniBand/RoCE multicast transport: see mcast_ib.h. */
#include "mcast_ib.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifndef SUMCAST_HAVE_IB

bool sc_mc_ib_built(void) { return false; }

static int not_built(char *why, size_t whylen)
{
	snprintf(why, whylen, "this build has no InfiniBand/RoCE multicast (built without librdmacm-dev "
		 "and libibverbs-dev)");
	return -ENOSYS;
}

int sc_mc_ib_probe(const char *iface, size_t *mtu, char *why, size_t whylen)
{
	(void)iface;
	(void)mtu;
	return not_built(why, whylen);
}

int sc_mc_ib_tx_open(struct sc_mc_ib_tx **t, const char *iface, const struct sockaddr_in *group,
		     size_t payload, char *why, size_t whylen)
{
	(void)iface;
	(void)group;
	(void)payload;
	*t = NULL;
	return not_built(why, whylen);
}

int sc_mc_ib_send(struct sc_mc_ib_tx *t, const struct sc_mc_hdr *r, const void *buf)
{
	(void)t;
	(void)r;
	(void)buf;
	return -ENOSYS;
}

uint64_t sc_mc_ib_tx_datagrams(const struct sc_mc_ib_tx *t)
{
	(void)t;
	return 0;
}

void sc_mc_ib_tx_close(struct sc_mc_ib_tx *t) { (void)t; }

int sc_mc_ib_rx_open(struct sc_mc_ib_rx **r, const struct sockaddr_in *group, const char *iface,
		     size_t payload, char *why, size_t whylen)
{
	(void)group;
	(void)iface;
	(void)payload;
	*r = NULL;
	return not_built(why, whylen);
}

int sc_mc_ib_poll(struct sc_mc_ib_rx *r, struct sc_mc_rx *rx, int max,
		  void (*done)(void *arg, uint64_t chunk), void *arg)
{
	(void)r;
	(void)rx;
	(void)max;
	(void)done;
	(void)arg;
	return -ENOSYS;
}

void sc_mc_ib_rx_close(struct sc_mc_ib_rx *r) { (void)r; }

#else

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "hostport.h"

bool sc_mc_ib_built(void) { return true; }

/* What a sender and a receiver both hold: the CM id bound to the
 * interface's RDMA device, its UD QP, and registered packet buffers. */
struct ib_ep {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *mem;
	size_t slot; /* bytes per buffer */
	struct sockaddr_in group;
	bool joined;
	size_t mtu;
	struct rdma_ud_param ud; /* from the join: address, QPN, Q_Key */
};

struct sc_mc_ib_tx {
	struct ib_ep e;
	struct ibv_ah *ah;
	size_t payload;
	uint64_t head, tail; /* sends posted, and completed (ring positions) */
	uint64_t datagrams;
};

struct sc_mc_ib_rx {
	struct ib_ep e;
};

static int ep_fail(int rc, char *why, size_t whylen, const char *iface, const char *what)
{
	snprintf(why, whylen, "InfiniBand/RoCE multicast on %s: %s: %s", iface, what, strerror(-rc));
	return rc;
}

static void ep_close(struct ib_ep *e)
{
	if (e->joined)
		rdma_leave_multicast(e->id, (struct sockaddr *)&e->group);
	if (e->id && e->id->qp)
		rdma_destroy_qp(e->id);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->id)
		rdma_destroy_id(e->id);
	if (e->ch)
		rdma_destroy_event_channel(e->ch);
	free(e->mem);
	memset(e, 0, sizeof(*e));
}

/* CM id on the interface's device, its port's MTU. */
static int ep_bind(struct ib_ep *e, const char *iface, char *why, size_t whylen)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct ibv_port_attr pa;

	if (inet_pton(AF_INET, iface, &a.sin_addr) != 1) {
		snprintf(why, whylen, "InfiniBand/RoCE multicast: bad interface address \"%s\"", iface);
		return -EINVAL;
	}
	/* (the CM binds a loopback address to any device: not what was meant) */
	if (hostport_is_loopback(iface))
		return ep_fail(-ENODEV, why, whylen, iface, "a loopback address is on no RDMA device");
	e->ch = rdma_create_event_channel();
	if (!e->ch)
		return ep_fail(-errno, why, whylen, iface, "no RDMA device (rdma_create_event_channel)");
	if (fcntl(e->ch->fd, F_SETFL, fcntl(e->ch->fd, F_GETFL) | O_NONBLOCK))
		return ep_fail(-errno, why, whylen, iface, "event channel");
	if (rdma_create_id(e->ch, &e->id, NULL, RDMA_PS_UDP))
		return ep_fail(-errno, why, whylen, iface, "rdma_create_id");
	if (rdma_bind_addr(e->id, (struct sockaddr *)&a))
		return ep_fail(-errno, why, whylen, iface, "the address is on no RDMA device (rdma_bind_addr)");
	if (!e->id->verbs)
		return ep_fail(-ENODEV, why, whylen, iface, "the address is on no RDMA device");
	if (ibv_query_port(e->id->verbs, e->id->port_num, &pa))
		return ep_fail(-errno, why, whylen, iface, "ibv_query_port");
	e->mtu = sc_mc_ib_mtu_bytes(pa.active_mtu);
	if (!e->mtu)
		return ep_fail(-EPROTO, why, whylen, iface, "the port reports no active MTU");
	return 0;
}

/* ep_bind for packets of SC_MC_HDR + payload bytes, which the port's MTU
 * must carry. */
static int ep_bind_for(struct ib_ep *e, const char *iface, size_t payload, char *why, size_t whylen)
{
	int rc = ep_bind(e, iface, why, whylen);

	if (rc)
		return rc;
	if (!payload || SC_MC_HDR + payload > e->mtu) {
		snprintf(why, whylen, "InfiniBand/RoCE multicast on %s: %zu-byte packets exceed the port's "
			 "MTU of %zu", iface, SC_MC_HDR + payload, e->mtu);
		return -EMSGSIZE;
	}
	return 0;
}

/* PD, CQ, UD QP (librdmacm takes a UD QP of a RDMA_PS_UDP id to RTS with
 * its Q_Key), `n` registered buffers of `slot` bytes. */
static int ep_setup(struct ib_ep *e, const char *iface, size_t slot, int n, bool recv, char *why,
		    size_t whylen)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = recv ? 1 : (uint32_t)n, .max_recv_wr = recv ? (uint32_t)n : 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	e->slot = slot;
	e->mem = malloc((size_t)n * slot);
	if (!e->mem)
		return ep_fail(-ENOMEM, why, whylen, iface, "packet buffers");
	e->pd = ibv_alloc_pd(e->id->verbs);
	if (!e->pd)
		return ep_fail(-ENOMEM, why, whylen, iface, "ibv_alloc_pd");
	e->cq = ibv_create_cq(e->id->verbs, n, NULL, NULL, 0);
	if (!e->cq)
		return ep_fail(-errno ? -errno : -ENOMEM, why, whylen, iface, "ibv_create_cq");
	e->mr = ibv_reg_mr(e->pd, e->mem, (size_t)n * slot, IBV_ACCESS_LOCAL_WRITE);
	if (!e->mr)
		return ep_fail(-errno ? -errno : -ENOMEM, why, whylen, iface, "ibv_reg_mr");
	qa.send_cq = qa.recv_cq = e->cq;
	if (rdma_create_qp(e->id, e->pd, &qa))
		return ep_fail(-errno, why, whylen, iface, "rdma_create_qp (UD)");
	return 0;
}

/* Joins the group (attaching the QP) and waits, bounded, for the answer. */
static int ep_join(struct ib_ep *e, const char *iface, const struct sockaddr_in *group, char *why,
		   size_t whylen)
{
	char g[INET_ADDRSTRLEN] = "?";
	char what[96];
	uint64_t end = sc_now_ms() + SC_MC_IB_JOIN_MS;

	inet_ntop(AF_INET, &group->sin_addr, g, sizeof(g));
	e->group = *group;
	e->group.sin_port = 0;
	if (rdma_join_multicast(e->id, (struct sockaddr *)&e->group, e)) {
		snprintf(what, sizeof(what), "joining %s (rdma_join_multicast)", g);
		return ep_fail(-errno, why, whylen, iface, what);
	}
	for (;;) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(e->ch, &ev) == 0) {
			enum rdma_cm_event_type t = ev->event;
			if (t == RDMA_CM_EVENT_MULTICAST_JOIN)
				e->ud = ev->param.ud;
			int st = ev->status;
			rdma_ack_cm_event(ev);
			if (t == RDMA_CM_EVENT_MULTICAST_JOIN) {
				e->joined = true;
				return 0;
			}
			snprintf(what, sizeof(what), "joining %s: %s (status %d)", g, rdma_event_str(t), st);
			return ep_fail(-EPROTO, why, whylen, iface, what);
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return ep_fail(-errno, why, whylen, iface, "rdma_get_cm_event");
		uint64_t now = sc_now_ms();
		if (now >= end) {
			snprintf(what, sizeof(what), "joining %s: no answer in %d ms", g, SC_MC_IB_JOIN_MS);
			return ep_fail(-ETIMEDOUT, why, whylen, iface, what);
		}
		struct pollfd p = { .fd = e->ch->fd, .events = POLLIN };
		(void)poll(&p, 1, (int)(end - now));
	}
}

/* ---- sender ---- */

int sc_mc_ib_tx_open(struct sc_mc_ib_tx **out, const char *iface, const struct sockaddr_in *group,
		     size_t payload, char *why, size_t whylen)
{
	struct sc_mc_ib_tx *t = calloc(1, sizeof(*t));
	int rc;

	*out = NULL;
	if (!t)
		return ep_fail(-ENOMEM, why, whylen, iface, "sender");
	t->payload = payload;
	if ((rc = ep_bind_for(&t->e, iface, payload, why, whylen)))
		goto fail;
	if ((rc = ep_setup(&t->e, iface, SC_MC_HDR + payload, SC_MC_IB_RING, false, why, whylen)) ||
	    (rc = ep_join(&t->e, iface, group, why, whylen)))
		goto fail;
	t->ah = ibv_create_ah(t->e.pd, &t->e.ud.ah_attr);
	if (!t->ah) {
		rc = ep_fail(-errno ? -errno : -ENOMEM, why, whylen, iface, "ibv_create_ah for the group");
		goto fail;
	}
	*out = t;
	return 0;
fail:
	sc_mc_ib_tx_close(t);
	return rc;
}

/* Reaps send completions: a signalled send frees the ring up to it. */
static int tx_reap(struct sc_mc_ib_tx *t)
{
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(t->e.cq, 16, wc);

	if (n < 0)
		return -EIO;
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS)
			return -EIO;
		if (wc[i].wr_id + 1 > t->tail)
			t->tail = wc[i].wr_id + 1;
	}
	return n;
}

int sc_mc_ib_send(struct sc_mc_ib_tx *t, const struct sc_mc_hdr *r, const void *buf)
{
	uint32_t off = 0;

	do {
		while (t->head - t->tail >= SC_MC_IB_RING) { /* ring full: wait for the HCA */
			int rc = tx_reap(t);
			if (rc < 0)
				return rc;
		}
		uint8_t *p = t->e.mem + (t->head % SC_MC_IB_RING) * t->e.slot;
		size_t b = sc_mc_pack(p, r, buf, off, t->payload);
		struct ibv_sge sg = { .addr = (uintptr_t)p, .length = (uint32_t)b, .lkey = t->e.mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = t->head,
			.sg_list = &sg,
			.num_sge = 1,
			.opcode = IBV_WR_SEND,
			.send_flags = t->head % SC_MC_IB_SIGNAL == SC_MC_IB_SIGNAL - 1 ? IBV_SEND_SIGNALED : 0,
			.wr.ud = { .ah = t->ah, .remote_qpn = t->e.ud.qp_num, .remote_qkey = t->e.ud.qkey },
		}, *bad;
		if (ibv_post_send(t->e.id->qp, &wr, &bad))
			return -EIO;
		t->head++;
		t->datagrams++;
		off += (uint32_t)(b - SC_MC_HDR);
	} while (off < r->len);
	return 0;
}

uint64_t sc_mc_ib_tx_datagrams(const struct sc_mc_ib_tx *t) { return t->datagrams; }

void sc_mc_ib_tx_close(struct sc_mc_ib_tx *t)
{
	if (!t)
		return;
	/* the sends before the last signalled one, a second at most */
	uint64_t end = sc_now_ms() + 1000, want = t->head - t->head % SC_MC_IB_SIGNAL;
	while (t->e.cq && t->tail < want && sc_now_ms() < end && tx_reap(t) >= 0)
		;
	if (t->ah)
		ibv_destroy_ah(t->ah);
	ep_close(&t->e);
	free(t);
}

/* ---- receiver ---- */

static int rx_post(struct sc_mc_ib_rx *r, uint64_t i)
{
	struct ibv_sge sg = { .addr = (uintptr_t)(r->e.mem + i * r->e.slot), .length = (uint32_t)r->e.slot,
			      .lkey = r->e.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sg, .num_sge = 1 }, *bad;

	return ibv_post_recv(r->e.id->qp, &wr, &bad) ? -EIO : 0;
}

int sc_mc_ib_rx_open(struct sc_mc_ib_rx **out, const struct sockaddr_in *group, const char *iface,
		     size_t payload, char *why, size_t whylen)
{
	struct sc_mc_ib_rx *r = calloc(1, sizeof(*r));
	int rc;

	*out = NULL;
	if (!r)
		return ep_fail(-ENOMEM, why, whylen, iface, "receiver");
	if ((rc = ep_bind_for(&r->e, iface, payload, why, whylen)))
		goto fail;
	if ((rc = ep_setup(&r->e, iface, SC_MC_IB_GRH + SC_MC_HDR + payload, SC_MC_IB_RING, true, why,
			   whylen)))
		goto fail;
	for (uint64_t i = 0; i < SC_MC_IB_RING; i++)
		if ((rc = rx_post(r, i))) {
			ep_fail(rc, why, whylen, iface, "ibv_post_recv");
			goto fail;
		}
	if ((rc = ep_join(&r->e, iface, group, why, whylen)))
		goto fail;
	*out = r;
	return 0;
fail:
	sc_mc_ib_rx_close(r);
	return rc;
}

int sc_mc_ib_poll(struct sc_mc_ib_rx *r, struct sc_mc_rx *rx, int max,
		  void (*done)(void *arg, uint64_t chunk), void *arg)
{
	struct ibv_wc wc[32];
	int total = 0;

	while (total < max) {
		int n = ibv_poll_cq(r->e.cq, 32, wc);
		if (n < 0)
			return -EIO;
		for (int i = 0; i < n; i++) {
			const uint8_t *pkt = NULL;
			size_t len = wc[i].status == IBV_WC_SUCCESS
					     ? sc_mc_ib_unwrap(r->e.mem + wc[i].wr_id * r->e.slot, wc[i].byte_len, &pkt)
					     : 0;
			if (len)
				sc_mc_rx_take(rx, pkt, len, done, arg);
			else
				rx->n.malformed++;
			int rc = rx_post(r, wc[i].wr_id);
			if (rc)
				return rc;
		}
		total += n;
		if (n < 32)
			break;
	}
	return total;
}

void sc_mc_ib_rx_close(struct sc_mc_ib_rx *r)
{
	if (!r)
		return;
	ep_close(&r->e);
	free(r);
}

int sc_mc_ib_probe(const char *iface, size_t *mtu, char *why, size_t whylen)
{
	struct ib_ep e = { 0 };
	int rc = ep_bind(&e, iface, why, whylen);

	if (!rc)
		*mtu = e.mtu;
	ep_close(&e);
	return rc;
}

#endif
