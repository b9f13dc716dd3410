/* The InfiniBand/RoCE transport of multicast results: a UD QP
 * joined to the job's group through librdmacm (rdma_join_multicast: the
 * IPv4 group maps to an MGID the subnet manager, or RoCE, knows), one
 * MTU-sized packet per datagram. Everything above the packet (header,
 * packetisation, assembly, loss detection, NACK and repair, windows) is
 * the shared logic of mcast.h, which the IP transport's tests exercise;
 * this file only moves packets, so it stays thin.
 *
 * Built when librdmacm and libibverbs are (SUMCAST_HAVE_IB, CMake; the
 * Debian packages librdmacm-dev and libibverbs-dev, scripts/deps.sh).
 * Without them, or without an RDMA device on the interface, every open
 * fails with a sentence (-ENODEV, -ENOSYS) and callers go on without:
 * the daemon by config (fabric.multicast = ib refuses to start, auto
 * takes ip), a rank by NACK and unicast as for any rank that cannot join.
 *
 * Sender: a ring of registered packet buffers, each laid out with
 * sc_mc_pack, posted as UD sends to the group's address handle (QPN
 * 0xFFFFFF, the join's Q_Key); every SC_MC_IB_SIGNAL-th is signalled, and
 * its completion frees the ring up to it. Receiver: a ring of receive
 * buffers, each the 40-byte GRH the HCA writes first and then a packet;
 * sc_mc_ib_poll hands each packet to sc_mc_rx_take and reposts. */
#ifndef SUMCAST_MCAST_IB_H
#define SUMCAST_MCAST_IB_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcast.h"

#define SC_MC_IB_GRH 40     /* a UD receive starts with the GRH (RoCE v2: zeros + IPv4 header) */
#define SC_MC_IB_RING 256   /* packet buffers per sender and per receiver */
#define SC_MC_IB_SIGNAL 16  /* every this many sends one is signalled */
#define SC_MC_IB_JOIN_MS 5000 /* how long a join may take (the SM answers) */

struct sc_mc_ib_tx;
struct sc_mc_ib_rx;

/* Whether this build has the transport. */
bool sc_mc_ib_built(void);

/* The RDMA device that has the interface address iface (dotted IPv4; an
 * IPoIB or RoCE netdev's): 0 and its port's active MTU in bytes, or
 * -errno with *why a sentence (no RDMA device, not built). */
int sc_mc_ib_probe(const char *iface, size_t *mtu, char *why, size_t whylen);

/* A sender to group from iface, packets of SC_MC_HDR + payload bytes (at
 * most the port's MTU). 0, or -errno with *why. */
int sc_mc_ib_tx_open(struct sc_mc_ib_tx **t, const char *iface, const struct sockaddr_in *group,
		     size_t payload, char *why, size_t whylen);
/* Every packet of result r (r->len bytes at buf). 0 or -errno. */
int sc_mc_ib_send(struct sc_mc_ib_tx *t, const struct sc_mc_hdr *r, const void *buf);
uint64_t sc_mc_ib_tx_datagrams(const struct sc_mc_ib_tx *t);
/* Waits (bounded) for posted sends, leaves the group, frees. NULL is fine. */
void sc_mc_ib_tx_close(struct sc_mc_ib_tx *t);

/* A receiver of group on iface for packets of up to `payload` result
 * bytes. 0, or -errno with *why. */
int sc_mc_ib_rx_open(struct sc_mc_ib_rx **r, const struct sockaddr_in *group, const char *iface,
		     size_t payload, char *why, size_t whylen);
/* Takes the packets that are there (max at most) into rx, done(arg, chunk)
 * for each result they complete. The packets read, or -errno. */
int sc_mc_ib_poll(struct sc_mc_ib_rx *r, struct sc_mc_rx *rx, int max,
		  void (*done)(void *arg, uint64_t chunk), void *arg);
void sc_mc_ib_rx_close(struct sc_mc_ib_rx *r);

/* The packet in a UD receive of n bytes at buf (after the GRH): its
 * bytes, or 0 for a receive too short to hold one. */
static inline size_t sc_mc_ib_unwrap(const uint8_t *buf, size_t n, const uint8_t **pkt)
{
	if (n <= SC_MC_IB_GRH)
		return 0;
	*pkt = buf + SC_MC_IB_GRH;
	return n - SC_MC_IB_GRH;
}

/* IB MTU enum (ibv_mtu: 1 = 256 ... 5 = 4096) in bytes, 0 if unknown. */
static inline size_t sc_mc_ib_mtu_bytes(int e)
{
	return e >= 1 && e <= 5 ? (size_t)128 << e : 0;
}

#endif
