/* The IP multicast transport of multicast results: a UDP socket
 * that sends each result to the job's group with generic segmentation
 * offload (bench/mcast: half the CPU per byte of one send per datagram),
 * and the receiving socket of a rank, whose datagrams go to the shared
 * protocol logic (mcast.h). The daemon's result backend sends with it
 * (daemon/dp_result.c), the client library receives (client/client_mcast.c).
 *
 * Sender: the datagrams of a result are laid out header + payload in a
 * buffer of up to 44 (64 KiB) and sent with one sendmsg and UDP_SEGMENT;
 * where the kernel refuses UDP_SEGMENT, sendmmsg of the same datagrams
 * (counted). Receiver: bound to the group and port, joined on the rank's
 * interface, non-blocking; sc_mc_udp_poll reads what is there (recvmmsg)
 * into a receiver (sc_mc_rx_take). IPv4 only. */
#ifndef SUMCAST_MCAST_UDP_H
#define SUMCAST_MCAST_UDP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcast.h"

#define SC_MC_UDP_SEGS 44 /* datagrams per GSO send at most (44 x 1472 < 64 KiB) */

struct sc_mc_udp_tx {
	int fd;
	struct sockaddr_in group;
	size_t payload; /* bytes per datagram after the header */
	int segs;       /* datagrams per send (SC_MC_UDP_SEGS, fewer for large ones) */
	uint8_t *lay;   /* SC_MC_UDP_SEGS datagrams */
	bool gso;       /* false once the kernel refused UDP_SEGMENT */
	uint64_t datagrams, sends, gso_refused;
};

/* A sender from the interface with address iface (dotted IPv4) to group;
 * ttl 1 keeps it on the link. 0, or -errno with *why a sentence. */
int sc_mc_udp_tx_open(struct sc_mc_udp_tx *t, const char *iface, const struct sockaddr_in *group,
		      size_t payload, int ttl, char *why, size_t whylen);
void sc_mc_udp_tx_close(struct sc_mc_udp_tx *t);
/* Every datagram of one result (len bytes at buf). 0 or -errno (a full
 * socket buffer is waited out: the caller bounds what it sends). */
int sc_mc_udp_send(struct sc_mc_udp_tx *t, uint32_t job, uint64_t key, uint64_t chunk, uint32_t imm,
		   const void *buf, uint32_t len);

struct sc_mc_udp_rx {
	int fd;
	uint8_t *bufs; /* receive buffers of dgram bytes */
	size_t dgram;  /* one receive: a datagram + 1, or 64 KiB with gro */
	size_t seg;    /* a datagram at most: header + payload */
	bool gro;      /* UDP_GRO: consecutive datagrams come coalesced */
};

/* A receiver of group on the interface with address iface, non-blocking,
 * with a large receive buffer, for datagrams of up to `payload` result
 * bytes (the sender's). 0 or -errno with *why. */
int sc_mc_udp_rx_open(struct sc_mc_udp_rx *r, const struct sockaddr_in *group, const char *iface,
		      size_t payload, char *why, size_t whylen);
void sc_mc_udp_rx_close(struct sc_mc_udp_rx *r);
/* Reads the datagrams that are there (about max at most) into rx; done(arg,
 * chunk) for each result they complete. Returns the datagrams read, or
 * -errno. With UDP_GRO (where the kernel has it) a read may bring many. */
int sc_mc_udp_poll(struct sc_mc_udp_rx *r, struct sc_mc_rx *rx, int max,
		   void (*done)(void *arg, uint64_t chunk), void *arg);

#endif
