/* One multicast sender and receiver over either transport: see mcast_link.h. */
#include "mcast_link.h"

#include <errno.h>
#include <string.h>

const char *sc_mc_via_name(enum sc_mc_via via)
{
	return via == SC_MC_VIA_IB ? "ib" : "ip";
}

int sc_mc_sender_open(struct sc_mc_sender *s, enum sc_mc_via via, const char *iface,
		      const struct sockaddr_in *group, size_t payload, char *why, size_t whylen)
{
	memset(s, 0, sizeof(*s));
	s->udp.fd = -1;
	s->via = via;
	if (via == SC_MC_VIA_IB)
		return sc_mc_ib_tx_open(&s->ib, iface, group, payload, why, whylen);
	return sc_mc_udp_tx_open(&s->udp, iface, group, payload, 1, why, whylen); /* ttl 1: the link */
}

int sc_mc_sender_send(struct sc_mc_sender *s, const struct sc_mc_hdr *r, const void *buf)
{
	if (s->via == SC_MC_VIA_IB)
		return sc_mc_ib_send(s->ib, r, buf);
	return sc_mc_udp_send(&s->udp, r->job, r->key, r->chunk, r->imm, buf, r->len);
}

uint64_t sc_mc_sender_datagrams(const struct sc_mc_sender *s)
{
	return s->via == SC_MC_VIA_IB ? sc_mc_ib_tx_datagrams(s->ib) : s->udp.datagrams;
}

void sc_mc_sender_close(struct sc_mc_sender *s)
{
	if (s->via == SC_MC_VIA_IB)
		sc_mc_ib_tx_close(s->ib);
	else
		sc_mc_udp_tx_close(&s->udp);
	s->ib = NULL;
}

int sc_mc_receiver_open(struct sc_mc_receiver *r, enum sc_mc_via via, const struct sockaddr_in *group,
			const char *iface, size_t payload, char *why, size_t whylen)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->udp.fd = -1;
	r->via = via;
	rc = via == SC_MC_VIA_IB ? sc_mc_ib_rx_open(&r->ib, group, iface, payload, why, whylen)
				 : sc_mc_udp_rx_open(&r->udp, group, iface, payload, why, whylen);
	r->open = rc == 0;
	return rc;
}

int sc_mc_receiver_poll(struct sc_mc_receiver *r, struct sc_mc_rx *rx, int max,
			void (*done)(void *arg, uint64_t chunk), void *arg)
{
	if (!r->open)
		return -EBADF;
	if (r->via == SC_MC_VIA_IB)
		return sc_mc_ib_poll(r->ib, rx, max, done, arg);
	return sc_mc_udp_poll(&r->udp, rx, max, done, arg);
}

void sc_mc_receiver_close(struct sc_mc_receiver *r)
{
	if (!r->open)
		return;
	if (r->via == SC_MC_VIA_IB)
		sc_mc_ib_rx_close(r->ib);
	else
		sc_mc_udp_rx_close(&r->udp);
	r->ib = NULL;
	r->open = false;
}
