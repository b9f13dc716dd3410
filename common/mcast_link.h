/* A job's multicast transport, as JOIN_OK names it (WIRE_OK_F_MCAST_IB or
 * not): one way for the daemon to send results and for a rank to take
 * them, whichever transport carries the packets (mcast_udp.h, mcast_ib.h).
 * Both carry the same datagrams (mcast.h). */
#ifndef SUMCAST_MCAST_LINK_H
#define SUMCAST_MCAST_LINK_H

#include "mcast_ib.h"
#include "mcast_udp.h"

enum sc_mc_via {
	SC_MC_VIA_IP = 0, /* UDP to an IPv4 group */
	SC_MC_VIA_IB = 1, /* UD QP joined by librdmacm */
};

const char *sc_mc_via_name(enum sc_mc_via via);

struct sc_mc_sender {
	enum sc_mc_via via;
	struct sc_mc_udp_tx udp;
	struct sc_mc_ib_tx *ib;
};

/* A sender of results to group (its port: UDP only) from the interface
 * with address iface, `payload` result bytes per datagram. 0 or -errno
 * with *why a sentence. */
int sc_mc_sender_open(struct sc_mc_sender *s, enum sc_mc_via via, const char *iface,
		      const struct sockaddr_in *group, size_t payload, char *why, size_t whylen);
/* Every datagram of result r (r->len bytes at buf). 0 or -errno. */
int sc_mc_sender_send(struct sc_mc_sender *s, const struct sc_mc_hdr *r, const void *buf);
uint64_t sc_mc_sender_datagrams(const struct sc_mc_sender *s);
void sc_mc_sender_close(struct sc_mc_sender *s);

struct sc_mc_receiver {
	enum sc_mc_via via;
	bool open;
	struct sc_mc_udp_rx udp;
	struct sc_mc_ib_rx *ib;
};

int sc_mc_receiver_open(struct sc_mc_receiver *r, enum sc_mc_via via, const struct sockaddr_in *group,
			const char *iface, size_t payload, char *why, size_t whylen);
/* The datagrams that are there (about max) into rx (sc_mc_rx_take). The
 * number read, or -errno. */
int sc_mc_receiver_poll(struct sc_mc_receiver *r, struct sc_mc_rx *rx, int max,
			void (*done)(void *arg, uint64_t chunk), void *arg);
/* Leaves the group. Safe on a closed one. */
void sc_mc_receiver_close(struct sc_mc_receiver *r);

#endif
