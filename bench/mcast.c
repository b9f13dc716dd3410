/* How to send multicast results: the sender's cost of putting
 * results on an IP multicast group, by the ways a transport could do it.
 *
 * The bench moves itself into a network namespace of its own (root: with
 * only its loopback, set to multicast and an MTU of 1500, and a route for
 * 239.0.0.0/8), forks `receivers` processes that join the group and count
 * what arrives, and sends --bytes of 1 MiB results cut into datagrams of
 * the multicast header (common/mcast.h) and 1432 payload bytes, each way:
 *
 *   sendmsg   one sendmsg per datagram (header and payload gathered)
 *   sendmmsg  64 datagrams per sendmmsg
 *   gso       the transport's send (common/mcast_udp.c): UDP generic
 *             segmentation offload, 44 datagrams laid out in one 64 KiB
 *             buffer (header copied beside each payload), one sendmsg with
 *             UDP_SEGMENT; the kernel cuts them
 *   fi_udp    libfabric's udp provider, FI_EP_DGRAM with fi_join: one
 *             fi_send per datagram (1472 bytes at most)
 *
 * Per way: the sender's throughput and CPU seconds per GB sent, and what
 * the receivers got (unpaced: on loopback a receiver that falls behind
 * drops, which is what the NACK path is for). The repetitions interleave
 * the ways. Prints a table (or --json rows); never fails on time; exit 77
 * when it cannot make its namespace (not root).
 *
 *   mcast [--bytes 256M] [--receivers 2] [--reps 3] [--json] */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "mcast.h"
#include "mcast_udp.h"

#define GROUP "239.77.0.1"
#define PORT 7977
#define PAYLOAD 1432 /* 1500 - 20 (IP) - 8 (UDP) - 40 (ours) */
#define DGRAM (SC_MC_HDR + PAYLOAD)
#define RESULT (1u << 20)
#define BATCH 64

enum way { W_SENDMSG, W_SENDMMSG, W_GSO, W_FI, W_COUNT };
static const char *const way_name[W_COUNT] = { "sendmsg", "sendmmsg", "gso", "fi_udp" };

struct counts { /* shared with the receivers */
	uint64_t dgrams[8], bytes[8];
	double cpu[8];
};

static double cpu_s(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static int netns_setup(char *why, size_t n)
{
	if (unshare(CLONE_NEWNET)) {
		snprintf(why, n, "unshare(CLONE_NEWNET): %s (needs root)", strerror(errno));
		return -1;
	}
	const char *cmds[] = { "ip link set lo up", "ip link set lo mtu 1500", "ip link set lo multicast on",
			       "ip route add 239.0.0.0/8 dev lo" };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (system(cmds[i])) {
			snprintf(why, n, "%s failed", cmds[i]);
			return -1;
		}
	return 0;
}

/* A receiver: joins, counts until a datagram of length 1 (the end mark). */
static void receiver(int idx, struct counts *c, int ready_fd)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1, buf = 64 << 20;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct ip_mreq m;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	inet_pton(AF_INET, GROUP, &a.sin_addr);
	inet_pton(AF_INET, GROUP, &m.imr_multiaddr);
	inet_pton(AF_INET, "127.0.0.1", &m.imr_interface);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m))) {
		perror("receiver bind/join");
		_exit(1);
	}
	struct timeval tv = { 5, 0 }; /* a lost end mark ends the round too */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)!write(ready_fd, "r", 1);
	static uint8_t bufs[BATCH][2048];
	struct mmsghdr mm[BATCH];
	struct iovec iov[BATCH];
	for (;;) {
		double c0 = cpu_s();
		uint64_t dg = 0, by = 0;
		bool end = false;
		while (!end) {
			for (int i = 0; i < BATCH; i++) {
				iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
				mm[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
			}
			int n = recvmmsg(fd, mm, BATCH, MSG_WAITFORONE, NULL);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				end = true; /* timed out */
				break;
			}
			for (int i = 0; i < n; i++) {
				if (mm[i].msg_len == 1) {
					end = true;
					continue;
				}
				dg++;
				by += mm[i].msg_len > SC_MC_HDR ? mm[i].msg_len - SC_MC_HDR : 0;
			}
		}
		c->dgrams[idx] = dg;
		c->bytes[idx] = by;
		c->cpu[idx] = cpu_s() - c0;
		(void)!write(ready_fd, "d", 1);
	}
}

/* ---- the ways ---- */

struct sender {
	int fd;
	struct sockaddr_in to;
	uint8_t *result;
	uint64_t chunk;
	struct sc_mc_udp_tx udp; /* the gso way */
	/* fi_udp */
	struct fi_info *fi;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_eq *eq;
	struct fid_mc *mc;
	fi_addr_t mc_addr;
	char fi_why[160];
};

static void hdr_for(struct sender *s, uint32_t off, uint32_t plen, uint8_t *out)
{
	struct sc_mc_hdr h = { 1, 0x5eedull, s->chunk, 0, RESULT, off, (uint16_t)plen };
	sc_mc_hdr_encode(&h, out);
}

static void send_result_sendmsg(struct sender *s)
{
	uint8_t hdr[SC_MC_HDR];
	for (uint32_t off = 0; off < RESULT; off += PAYLOAD) {
		uint32_t pl = RESULT - off < PAYLOAD ? RESULT - off : PAYLOAD;
		hdr_for(s, off, pl, hdr);
		struct iovec iov[2] = { { hdr, SC_MC_HDR }, { s->result + off, pl } };
		struct msghdr m = { .msg_name = &s->to, .msg_namelen = sizeof(s->to), .msg_iov = iov,
				    .msg_iovlen = 2 };
		while (sendmsg(s->fd, &m, 0) < 0 && (errno == ENOBUFS || errno == EAGAIN))
			sched_yield();
	}
}

static void send_result_sendmmsg(struct sender *s)
{
	static uint8_t hdr[BATCH][SC_MC_HDR];
	struct iovec iov[BATCH][2];
	struct mmsghdr mm[BATCH];
	uint32_t off = 0;
	while (off < RESULT) {
		int n = 0;
		for (; n < BATCH && off < RESULT; n++, off += PAYLOAD) {
			uint32_t pl = RESULT - off < PAYLOAD ? RESULT - off : PAYLOAD;
			hdr_for(s, off, pl, hdr[n]);
			iov[n][0] = (struct iovec){ hdr[n], SC_MC_HDR };
			iov[n][1] = (struct iovec){ s->result + off, pl };
			mm[n].msg_hdr = (struct msghdr){ .msg_name = &s->to, .msg_namelen = sizeof(s->to),
							 .msg_iov = iov[n], .msg_iovlen = 2 };
		}
		for (int done = 0; done < n;) {
			int k = sendmmsg(s->fd, mm + done, (unsigned)(n - done), 0);
			if (k > 0)
				done += k;
			else
				sched_yield();
		}
	}
}

/* The transport's own send (common/mcast_udp.c): GSO. */
static void send_result_gso(struct sender *s)
{
	if (sc_mc_udp_send(&s->udp, 1, 0x5eedull, s->chunk, 0, s->result, RESULT)) {
		perror("sc_mc_udp_send");
		exit(1);
	}
}

static int fi_setup(struct sender *s)
{
	struct fi_info *h = fi_allocinfo();
	struct sockaddr_in src = { .sin_family = AF_INET };
	int rc;

	inet_pton(AF_INET, "127.0.0.1", &src.sin_addr);
	h->ep_attr->type = FI_EP_DGRAM;
	h->caps = FI_MSG | FI_MULTICAST | FI_SEND;
	h->addr_format = FI_SOCKADDR_IN;
	h->fabric_attr->prov_name = strdup("udp");
	h->src_addr = malloc(sizeof(src));
	memcpy(h->src_addr, &src, sizeof(src));
	h->src_addrlen = sizeof(src);
	rc = fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, h, &s->fi);
	fi_freeinfo(h);
	if (rc) {
		snprintf(s->fi_why, sizeof(s->fi_why), "fi_getinfo: %s", fi_strerror(-rc));
		return rc;
	}
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT, .size = 1024 };
	struct fi_av_attr ava = { .type = FI_AV_MAP };
	struct fi_eq_attr eqa = { .size = 16, .wait_obj = FI_WAIT_UNSPEC };
	if ((rc = fi_fabric(s->fi->fabric_attr, &s->fab, NULL)) ||
	    (rc = fi_eq_open(s->fab, &eqa, &s->eq, NULL)) ||
	    (rc = fi_domain(s->fab, s->fi, &s->dom, NULL)) ||
	    (rc = fi_endpoint(s->dom, s->fi, &s->ep, NULL)) ||
	    (rc = fi_ep_bind(s->ep, &s->eq->fid, 0)) ||
	    (rc = fi_cq_open(s->dom, &cqa, &s->cq, NULL)) ||
	    (rc = fi_av_open(s->dom, &ava, &s->av, NULL)) ||
	    (rc = fi_ep_bind(s->ep, &s->cq->fid, FI_SEND | FI_RECV)) ||
	    (rc = fi_ep_bind(s->ep, &s->av->fid, 0)) || (rc = fi_enable(s->ep))) {
		snprintf(s->fi_why, sizeof(s->fi_why), "setup: %s", fi_strerror(-rc));
		return rc;
	}
	rc = (int)fi_join(s->ep, &s->to, 0, &s->mc, NULL);
	if (rc) {
		snprintf(s->fi_why, sizeof(s->fi_why), "fi_join: %s", fi_strerror(-rc));
		return rc;
	}
	/* the join completes on the event queue */
	uint32_t ev;
	struct fi_eq_entry ent;
	ssize_t n = fi_eq_sread(s->eq, &ev, &ent, sizeof(ent), 3000, 0);
	if (n < 0 || ev != FI_JOIN_COMPLETE) {
		snprintf(s->fi_why, sizeof(s->fi_why), "fi_join did not complete: %s",
			 n < 0 ? fi_strerror((int)-n) : "another event");
		return -1;
	}
	/* udp (libfabric 1.17) sends to the group through an address vector
	 * entry of it; fi_mc_addr's address crashed its fi_send here */
	if (fi_av_insert(s->av, &s->to, 1, &s->mc_addr, 0, NULL) != 1) {
		snprintf(s->fi_why, sizeof(s->fi_why), "fi_av_insert of the group failed");
		return -1;
	}
	return 0;
}

static void send_result_fi(struct sender *s)
{
	static uint8_t dg[256][DGRAM];
	static struct fi_context ctx[256];
	struct fi_cq_entry ev[64];
	unsigned next = 0, inflight = 0;
	for (uint32_t off = 0; off < RESULT;) {
		uint32_t pl = RESULT - off < PAYLOAD ? RESULT - off : PAYLOAD;
		if (inflight < 256) {
			uint8_t *b = dg[next];
			hdr_for(s, off, pl, b);
			memcpy(b + SC_MC_HDR, s->result + off, pl);
			ssize_t rc = fi_send(s->ep, b, SC_MC_HDR + pl, NULL, s->mc_addr, &ctx[next]);
			if (rc == 0) {
				next = (next + 1) % 256;
				inflight++;
				off += pl;
				continue;
			}
			if (rc != -FI_EAGAIN) {
				fprintf(stderr, "fi_send: %s\n", fi_strerror((int)-rc));
				exit(1);
			}
		}
		ssize_t n = fi_cq_read(s->cq, ev, 64);
		if (n > 0)
			inflight -= (unsigned)n;
	}
	while (inflight) {
		ssize_t n = fi_cq_read(s->cq, ev, 64);
		if (n > 0)
			inflight -= (unsigned)n;
	}
}

int main(int argc, char **argv)
{
	uint64_t bytes = 256ull << 20;
	int nrecv = 2, reps = 3;
	bool json = false;
	static const struct option lo[] = { { "bytes", 1, 0, 'b' }, { "receivers", 1, 0, 'r' },
					    { "reps", 1, 0, 'n' }, { "json", 0, 0, 'j' }, { 0, 0, 0, 0 } };
	for (int c; (c = getopt_long(argc, argv, "b:r:n:j", lo, NULL)) != -1;) {
		if (c == 'b') {
			char *e;
			bytes = strtoull(optarg, &e, 10);
			bytes <<= *e == 'G' ? 30 : *e == 'M' ? 20 : *e == 'K' ? 10 : 0;
		} else if (c == 'r') {
			nrecv = atoi(optarg);
		} else if (c == 'n') {
			reps = atoi(optarg);
		} else if (c == 'j') {
			json = true;
		} else {
			fprintf(stderr, "usage: mcast [--bytes 256M] [--receivers 2] [--reps 3] [--json]\n");
			return 2;
		}
	}
	if (nrecv < 1 || nrecv > 8 || reps < 1 || bytes < RESULT) {
		fprintf(stderr, "mcast: --receivers 1..8, --reps >= 1, --bytes >= 1M\n");
		return 2;
	}
	char why[256];
	if (netns_setup(why, sizeof(why))) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	struct counts *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int pr[2];
	if (c == MAP_FAILED || pipe(pr))
		return 1;
	pid_t kids[8];
	for (int i = 0; i < nrecv; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			close(pr[0]);
			receiver(i, c, pr[1]);
		}
	}
	close(pr[1]);
	char ch;
	for (int i = 0; i < nrecv; i++)
		(void)!read(pr[0], &ch, 1);

	struct sender s = { 0 };
	s.fd = socket(AF_INET, SOCK_DGRAM, 0);
	s.to = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(PORT) };
	inet_pton(AF_INET, GROUP, &s.to.sin_addr);
	struct in_addr ifa;
	inet_pton(AF_INET, "127.0.0.1", &ifa);
	int sndbuf = 16 << 20;
	setsockopt(s.fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof(ifa));
	setsockopt(s.fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf));
	s.result = malloc(RESULT);
	for (uint32_t i = 0; i < RESULT; i++)
		s.result[i] = (uint8_t)(i * 131 + 7);
	bool fi_ok = fi_setup(&s) == 0;
	if (sc_mc_udp_tx_open(&s.udp, "127.0.0.1", &s.to, PAYLOAD, 1, why, sizeof(why))) {
		fprintf(stderr, "mcast: %s\n", why);
		return 1;
	}

	double gbps[W_COUNT][16], cpu_gb[W_COUNT][16], got[W_COUNT][16], rcpu[W_COUNT][16];
	uint64_t results = bytes / RESULT;
	for (int rep = 0; rep < reps && rep < 16; rep++) {
		for (int w = 0; w < W_COUNT; w++) {
			if (w == W_FI && !fi_ok)
				continue;
			double t0 = sc_now_s(), c0 = cpu_s();
			for (uint64_t k = 0; k < results; k++) {
				s.chunk = k;
				if (w == W_SENDMSG)
					send_result_sendmsg(&s);
				else if (w == W_SENDMMSG)
					send_result_sendmmsg(&s);
				else if (w == W_GSO)
					send_result_gso(&s);
				else
					send_result_fi(&s);
			}
			double t = sc_now_s() - t0, cs = cpu_s() - c0;
			usleep(200000);
			for (int e = 0; e < 3; e++) /* end marks (one may drop) */
				sendto(s.fd, "e", 1, 0, (struct sockaddr *)&s.to, sizeof(s.to));
			for (int i = 0; i < nrecv; i++)
				(void)!read(pr[0], &ch, 1);
			usleep(50000);
			double sent = (double)results * RESULT, rec = 0, rc = 0;
			for (int i = 0; i < nrecv; i++) {
				rec += (double)c->bytes[i];
				rc += c->cpu[i];
			}
			gbps[w][rep] = sent * 8 / t / 1e9;
			cpu_gb[w][rep] = cs / (sent / 1e9);
			got[w][rep] = rec / (sent * nrecv);
			rcpu[w][rep] = rc / nrecv / (sent / 1e9);
		}
	}
	if (!json)
		printf("# %llu MiB of 1 MiB results per way, datagrams of %d bytes (%d payload), %d receivers "
		       "on the loopback of a namespace of its own (MTU 1500); median of %d\n"
		       "# way        sender Gb/s   sender CPU s/GB   received   receiver CPU s/GB\n",
		       (unsigned long long)(bytes >> 20), DGRAM, PAYLOAD, nrecv, reps);
	for (int w = 0; w < W_COUNT; w++) {
		if (w == W_FI && !fi_ok) {
			if (!json)
				printf("  %-10s unavailable: %s\n", way_name[w], s.fi_why);
			continue;
		}
		double *v[4] = { gbps[w], cpu_gb[w], got[w], rcpu[w] }, med[4];
		for (int k = 0; k < 4; k++) { /* median: sort a copy */
			double a[16];
			int n = reps < 16 ? reps : 16;
			memcpy(a, v[k], n * sizeof(double));
			for (int i = 1; i < n; i++)
				for (int j = i; j > 0 && a[j - 1] > a[j]; j--) {
					double x = a[j];
					a[j] = a[j - 1];
					a[j - 1] = x;
				}
			med[k] = a[n / 2];
		}
		if (json)
			printf("{\"bench\":\"mcast\",\"way\":\"%s\",\"bytes\":%llu,\"receivers\":%d,\"gbps\":%.3f,"
			       "\"cpu_s_per_gb\":%.3f,\"received\":%.4f,\"recv_cpu_s_per_gb\":%.3f}\n",
			       way_name[w], (unsigned long long)bytes, nrecv, med[0], med[1], med[2], med[3]);
		else
			printf("  %-10s %10.2f   %15.3f   %7.1f %%   %17.3f\n", way_name[w], med[0], med[1],
			       100 * med[2], med[3]);
	}
	for (int i = 0; i < nrecv; i++)
		kill(kids[i], SIGKILL);
	while (wait(NULL) > 0)
		;
	return 0;
}
