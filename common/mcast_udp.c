/* The IP multicast transport: see mcast_udp.h. */
#include "mcast_udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/udp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define RX_BATCH 32
#define RX_GRO_BATCH 8
#define RX_GRO_BYTES 65536 /* a coalesced datagram (UDP_GRO) is at most this */
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/* A socket buffer of `bytes`: past the system's limit where allowed
 * (root: the FORCE option), else what the limit gives. */
static void sock_buf(int fd, int force_opt, int opt, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)))
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

int sc_mc_udp_tx_open(struct sc_mc_udp_tx *t, const char *iface, const struct sockaddr_in *group,
		      size_t payload, int ttl, char *why, size_t whylen)
{
	struct in_addr ifa;
	int rc;

	memset(t, 0, sizeof(*t));
	t->fd = -1;
	if (!payload || SC_MC_HDR + payload > 65507 || inet_pton(AF_INET, iface, &ifa) != 1) {
		snprintf(why, whylen, "multicast sender: bad interface address \"%s\" or payload %zu", iface,
			 payload);
		return -EINVAL;
	}
	t->group = *group;
	t->payload = payload;
	t->segs = 65507 / (SC_MC_HDR + payload); /* a UDP datagram's limit per send */
	if (t->segs > SC_MC_UDP_SEGS)
		t->segs = SC_MC_UDP_SEGS;
	t->gso = true;
	t->lay = malloc(SC_MC_UDP_SEGS * (SC_MC_HDR + payload));
	t->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (!t->lay || t->fd < 0) {
		rc = t->lay ? -errno : -ENOMEM;
		snprintf(why, whylen, "multicast sender: %s", strerror(-rc));
		sc_mc_udp_tx_close(t);
		return rc;
	}
	unsigned char u = (unsigned char)ttl;
	if (setsockopt(t->fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof(ifa)) ||
	    setsockopt(t->fd, IPPROTO_IP, IP_MULTICAST_TTL, &u, sizeof(u))) {
		rc = -errno;
		snprintf(why, whylen, "multicast sender on %s: %s", iface, strerror(-rc));
		sc_mc_udp_tx_close(t);
		return rc;
	}
	sock_buf(t->fd, SO_SNDBUFFORCE, SO_SNDBUF, 16 << 20);
	return 0;
}

void sc_mc_udp_tx_close(struct sc_mc_udp_tx *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	free(t->lay);
	t->lay = NULL;
}

/* n datagrams of `seg` bytes each (the last may be shorter) in t->lay. */
static int send_laid(struct sc_mc_udp_tx *t, int n, size_t seg, size_t total)
{
	if (t->gso && n > 1) {
		char ctl[CMSG_SPACE(sizeof(uint16_t))];
		struct iovec iov = { t->lay, total };
		struct msghdr m = { .msg_name = &t->group, .msg_namelen = sizeof(t->group), .msg_iov = &iov,
				    .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		memset(ctl, 0, sizeof(ctl));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		uint16_t s16 = (uint16_t)seg;
		memcpy(CMSG_DATA(cm), &s16, sizeof(s16));
		for (;;) {
			if (sendmsg(t->fd, &m, 0) >= 0) {
				t->sends++;
				t->datagrams += (uint64_t)n;
				return 0;
			}
			if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
				sched_yield();
				continue;
			}
			if (errno != EIO && errno != EINVAL && errno != ENOPROTOOPT && errno != EOPNOTSUPP)
				return -errno;
			t->gso = false; /* no segmentation here: one datagram each */
			t->gso_refused++;
			break;
		}
	}
	struct mmsghdr mm[SC_MC_UDP_SEGS];
	struct iovec iov[SC_MC_UDP_SEGS];
	for (int i = 0; i < n; i++) {
		size_t off = (size_t)i * seg;
		iov[i] = (struct iovec){ t->lay + off, total - off < seg ? total - off : seg };
		mm[i].msg_hdr = (struct msghdr){ .msg_name = &t->group, .msg_namelen = sizeof(t->group),
						 .msg_iov = &iov[i], .msg_iovlen = 1 };
	}
	for (int done = 0; done < n;) {
		int k = sendmmsg(t->fd, mm + done, (unsigned)(n - done), 0);
		if (k > 0) {
			done += k;
			t->sends++;
		} else if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
			sched_yield();
		} else {
			return -errno;
		}
	}
	t->datagrams += (uint64_t)n;
	return 0;
}

int sc_mc_udp_send(struct sc_mc_udp_tx *t, uint32_t job, uint64_t key, uint64_t chunk, uint32_t imm,
		   const void *buf, uint32_t len)
{
	const uint8_t *src = buf;
	const struct sc_mc_hdr r = { .job = job, .key = key, .chunk = chunk, .imm = imm, .len = len };
	size_t seg = SC_MC_HDR + t->payload;
	uint32_t off = 0;

	do {
		size_t total = 0;
		int n = 0;
		/* Full datagrams together; a result's short last one ends a
		 * send (GSO segments are all `seg` bytes but the last). */
		while (n < t->segs && (off < len || (!len && !n))) {
			size_t b = sc_mc_pack(t->lay + total, &r, src, off, t->payload);
			total += b;
			off += (uint32_t)(b - SC_MC_HDR);
			n++;
			if (b - SC_MC_HDR < t->payload)
				break;
		}
		int rc = send_laid(t, n, seg, total);
		if (rc)
			return rc;
	} while (off < len);
	return 0;
}

int sc_mc_udp_rx_open(struct sc_mc_udp_rx *r, const struct sockaddr_in *group, const char *iface,
		      size_t payload, char *why, size_t whylen)
{
	struct ip_mreq m;
	int one = 1, rc;

	memset(r, 0, sizeof(*r));
	r->seg = SC_MC_HDR + payload;
	r->dgram = r->seg + 1; /* + 1: a longer datagram shows as truncated */
	r->bufs = payload && r->seg <= 65507 ? malloc(RX_GRO_BATCH * RX_GRO_BYTES) : NULL;
	r->fd = r->bufs ? socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;
	if (!r->bufs) {
		snprintf(why, whylen, "multicast receiver: payload %zu bytes per datagram: out of memory "
			 "or more than UDP carries", payload);
		return -EINVAL;
	}
	if (r->fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "multicast receiver: %s", strerror(-rc));
		sc_mc_udp_rx_close(r);
		return rc;
	}
	m.imr_multiaddr = group->sin_addr;
	if (inet_pton(AF_INET, iface, &m.imr_interface) != 1) {
		snprintf(why, whylen, "multicast receiver: bad interface address \"%s\"", iface);
		sc_mc_udp_rx_close(r);
		return -EINVAL;
	}
	if (setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(r->fd, (const struct sockaddr *)group, sizeof(*group)) ||
	    setsockopt(r->fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m))) {
		rc = -errno;
		char g[INET_ADDRSTRLEN] = "?";
		inet_ntop(AF_INET, &group->sin_addr, g, sizeof(g));
		snprintf(why, whylen, "joining multicast group %s:%u on %s: %s", g, ntohs(group->sin_port),
			 iface, strerror(-rc));
		sc_mc_udp_rx_close(r);
		return rc;
	}
	sock_buf(r->fd, SO_RCVBUFFORCE, SO_RCVBUF, 64 << 20);
	/* GRO: the kernel hands consecutive datagrams of a GSO send over in
	 * one piece (fewer packets to allocate, segment and read). */
	r->gro = !setsockopt(r->fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
	if (r->gro)
		r->dgram = RX_GRO_BYTES;
	return 0;
}

void sc_mc_udp_rx_close(struct sc_mc_udp_rx *r)
{
	if (r->fd >= 0)
		close(r->fd); /* leaves the group */
	r->fd = -1;
	free(r->bufs);
	r->bufs = NULL;
}

int sc_mc_udp_poll(struct sc_mc_udp_rx *r, struct sc_mc_rx *rx, int max,
		   void (*done)(void *arg, uint64_t chunk), void *arg)
{
	struct mmsghdr mm[RX_BATCH];
	struct iovec iov[RX_BATCH];
	char ctl[RX_BATCH][CMSG_SPACE(sizeof(uint16_t))];
	int batch = r->gro ? RX_GRO_BATCH : RX_BATCH, total = 0;

	while (total < max) {
		int want = batch;
		for (int i = 0; i < want; i++) {
			iov[i] = (struct iovec){ r->bufs + (size_t)i * r->dgram, r->dgram };
			mm[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1,
							 .msg_control = r->gro ? ctl[i] : NULL,
							 .msg_controllen = r->gro ? sizeof(ctl[i]) : 0 };
		}
		int n = recvmmsg(r->fd, mm, (unsigned)want, MSG_DONTWAIT, NULL);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? total : -errno;
		for (int i = 0; i < n; i++) {
			const uint8_t *p = r->bufs + (size_t)i * r->dgram;
			size_t len = mm[i].msg_len, seg = len;
			if ((mm[i].msg_hdr.msg_flags & MSG_TRUNC) || len >= r->dgram) {
				rx->n.malformed++;
				continue;
			}
			for (struct cmsghdr *cm = r->gro ? CMSG_FIRSTHDR(&mm[i].msg_hdr) : NULL; cm;
			     cm = CMSG_NXTHDR(&mm[i].msg_hdr, cm))
				if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
					uint16_t g;
					memcpy(&g, CMSG_DATA(cm), sizeof(g));
					seg = g ? g : len;
				}
			/* coalesced: datagrams of seg bytes, the last shorter */
			for (size_t off = 0; off < len; off += seg, total++)
				sc_mc_rx_take(rx, p + off, len - off < seg ? len - off : seg, done, arg);
		}
		if (n < want)
			break;
	}
	return total;
}
