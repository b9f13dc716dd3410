/* A double of the libibverbs and librdmacm calls Sumcast's InfiniBand/RoCE
 * multicast transport makes (common/mcast_ib.c), for machines without an
 * RDMA device: preloaded (LD_PRELOAD) into the daemon and the ranks, it
 * carries each UD send as a UDP datagram to the IPv4 group the CM id
 * joined, on the interface it was bound to, and enforces UD's rules as an
 * HCA would:
 *
 *   - a CM id binds only to an address of a local interface that is not
 *     loopback (the RDMA device's netdev); the port's active MTU is 2048
 *     bytes (SC_IBDOUBLE_MTU: 256 .. 4096);
 *   - the memory a work request names must lie in a registration of the
 *     same protection domain, under its lkey;
 *   - a send carries at most the path MTU; it goes to the group's QPN with
 *     the group's Q_Key, and a receiver drops a datagram whose Q_Key is not
 *     its own (UD delivers nothing else);
 *   - a receive starts with the 40-byte GRH (zeros, then the sender's
 *     address as RoCE v2 writes an IPv4 header's); byte_len counts it; a
 *     datagram longer than the receive buffer completes with
 *     IBV_WC_LOC_LEN_ERR; one that finds no receive posted is lost;
 *   - at most max_send_wr sends are outstanding (an unsignalled send
 *     completes with the next signalled one), max_recv_wr receives posted;
 *   - the SM's answer to a join comes as a CM event on the channel
 *     (RDMA_CM_EVENT_MULTICAST_JOIN with the group's UD parameters);
 *   - datagrams are lost at random: SC_IBDOUBLE_DROP per mille of them.
 *
 * Counters of what it refused or dropped go to stderr at exit when
 * SC_IBDOUBLE_VERBOSE is set. Nothing here is linked into the product. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#undef ibv_reg_mr
#undef ibv_query_port

#define DBL_PORT 4791 /* RoCE v2's UDP port: the groups' datagrams */
#define DBL_GRH 40
#define DBL_MAGIC 0x5344424cu /* "SDBL" */
#define DBL_CQ_MAX 4096

struct dbl_hdr { /* before each datagram's payload */
	uint32_t magic, qkey, src_qpn, len;
};

struct dbl_cq {
	struct ibv_cq cq; /* first */
	struct ibv_wc wc[DBL_CQ_MAX];
	int head, n;
	struct dbl_qp *qps[8];
	int nqps;
};

struct dbl_mr {
	struct ibv_mr mr; /* first */
	struct dbl_mr *next;
};

struct dbl_qp {
	struct ibv_qp qp; /* first */
	struct dbl_cq *scq, *rcq;
	uint32_t max_send, max_recv;
	uint32_t outstanding;           /* sends posted, their completion not yet polled */
	uint64_t unsignalled[4096];     /* wr_ids of the sends since the last signalled one */
	int nunsig;
	struct ibv_recv_wr *rq;         /* posted receives, FIFO (copies) */
	int nrq;
	int sock;                       /* UDP: the groups joined */
	uint32_t qkey;
	struct in_addr bound;
};

struct dbl_pd {
	struct ibv_pd pd; /* first */
	struct dbl_mr *mrs;
};

struct dbl_ev {
	struct rdma_cm_event ev;
	struct dbl_ev *next;
};

struct dbl_ch {
	struct rdma_event_channel ch; /* first: fd is a pipe's read end */
	int wfd;
	struct dbl_ev *head, *tail;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context ctx;
static struct ibv_device dev = { .name = "sc_ibdouble0", .node_type = IBV_NODE_CA,
				 .transport_type = IBV_TRANSPORT_IB };
static uint32_t next_qpn = 0x100, next_key = 0x1000;
static unsigned long n_drop_random, n_drop_qkey, n_drop_norecv, n_len_err, n_refused;

static int mtu_enum(void)
{
	const char *e = getenv("SC_IBDOUBLE_MTU");
	int b = e ? atoi(e) : 2048;
	return b >= 4096 ? IBV_MTU_4096 : b >= 2048 ? IBV_MTU_2048 : b >= 1024 ? IBV_MTU_1024
	       : b >= 512 ? IBV_MTU_512 : IBV_MTU_256;
}

static size_t mtu_bytes(void)
{
	return (size_t)128 << mtu_enum();
}

static void refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void refuse(const char *fmt, ...)
{
	va_list ap;

	n_refused++;
	fprintf(stderr, "ibdouble: refused: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static __attribute__((destructor)) void report(void)
{
	if (getenv("SC_IBDOUBLE_VERBOSE"))
		fprintf(stderr, "ibdouble[%d]: dropped %lu at random, %lu by Q_Key, %lu with no receive posted; "
			"%lu too long for their receive; %lu requests refused\n", (int)getpid(), n_drop_random,
			n_drop_qkey, n_drop_norecv, n_len_err, n_refused);
}

/* ---- the memory rule ---- */

static bool covered(struct ibv_pd *pd, uint64_t addr, uint32_t len, uint32_t lkey)
{
	for (struct dbl_mr *m = ((struct dbl_pd *)pd)->mrs; m; m = m->next)
		if (m->mr.lkey == lkey && addr >= (uintptr_t)m->mr.addr &&
		    addr + len <= (uintptr_t)m->mr.addr + m->mr.length)
			return true;
	return false;
}

/* ---- completions ---- */

static void cq_push(struct dbl_cq *c, const struct ibv_wc *wc)
{
	if (c->n == DBL_CQ_MAX) {
		refuse("CQ overrun: more than %d completions not polled", DBL_CQ_MAX);
		return;
	}
	c->wc[(c->head + c->n++) % DBL_CQ_MAX] = *wc;
}

/* Takes the datagrams waiting on qp's socket into its posted receives. */
static void qp_receive(struct dbl_qp *q)
{
	uint8_t buf[65536];
	struct sockaddr_in from;
	socklen_t fl;

	for (;;) {
		fl = sizeof(from);
		ssize_t n = recvfrom(q->sock, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n < 0)
			return;
		struct dbl_hdr h;
		if ((size_t)n < sizeof(h))
			continue;
		memcpy(&h, buf, sizeof(h));
		if (h.magic != DBL_MAGIC || h.len != (size_t)n - sizeof(h))
			continue;
		const char *d = getenv("SC_IBDOUBLE_DROP");
		if (d && atoi(d) > 0 && random() % 1000 < atoi(d)) {
			n_drop_random++;
			continue;
		}
		if (h.qkey != q->qkey) {
			n_drop_qkey++;
			continue;
		}
		if (!q->nrq || !q->rcq) {
			n_drop_norecv++;
			continue;
		}
		struct ibv_recv_wr wr = q->rq[0];
		memmove(q->rq, q->rq + 1, (size_t)--q->nrq * sizeof(*q->rq));
		struct ibv_wc wc = { .wr_id = wr.wr_id, .opcode = IBV_WC_RECV, .qp_num = q->qp.qp_num,
				     .src_qp = h.src_qpn, .wc_flags = IBV_WC_GRH };
		size_t total = DBL_GRH + h.len;
		if (total > wr.sg_list[0].length) {
			wc.status = IBV_WC_LOC_LEN_ERR;
			n_len_err++;
		} else {
			uint8_t *dst = (uint8_t *)(uintptr_t)wr.sg_list[0].addr;
			memset(dst, 0, DBL_GRH);
			/* RoCE v2: the last 20 bytes are the IPv4 header; its source */
			dst[20] = 0x45;
			memcpy(dst + 20 + 12, &from.sin_addr, 4);
			memcpy(dst + DBL_GRH, buf + sizeof(h), h.len);
			wc.status = IBV_WC_SUCCESS;
			wc.byte_len = (uint32_t)total;
		}
		free(wr.sg_list);
		cq_push(q->rcq, &wc);
	}
}

static int dbl_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	struct dbl_cq *c = (struct dbl_cq *)cq;
	int k = 0;

	pthread_mutex_lock(&mu);
	for (int i = 0; i < c->nqps; i++)
		qp_receive(c->qps[i]);
	for (; k < num && c->n; k++) {
		wc[k] = c->wc[c->head];
		c->head = (c->head + 1) % DBL_CQ_MAX;
		c->n--;
		/* a signalled send's completion frees it and the unsignalled
		 * ones before it (their count rode in vendor_err) */
		uint32_t freed = wc[k].vendor_err + 1;
		wc[k].vendor_err = 0;
		for (int i = 0; i < c->nqps && wc[k].opcode == IBV_WC_SEND; i++)
			if (c->qps[i]->qp.qp_num == wc[k].qp_num)
				c->qps[i]->outstanding -= freed;
	}
	pthread_mutex_unlock(&mu);
	return k;
}

static int dbl_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct dbl_qp *q = (struct dbl_qp *)qp;
	int rc = 0;

	pthread_mutex_lock(&mu);
	for (; wr; wr = wr->next) {
		struct ibv_ah *ah = wr->wr.ud.ah;
		if (wr->opcode != IBV_WR_SEND || wr->num_sge != 1 || !ah) {
			refuse("send: opcode %d, %d SGEs, ah %p (UD: one SGE, an address handle)", wr->opcode,
			       wr->num_sge, (void *)ah);
			rc = EINVAL;
			break;
		}
		if (!covered(qp->pd, wr->sg_list[0].addr, wr->sg_list[0].length, wr->sg_list[0].lkey)) {
			refuse("send of %u bytes at 0x%llx: no registration of the PD under lkey 0x%x covers it",
			       wr->sg_list[0].length, (unsigned long long)wr->sg_list[0].addr, wr->sg_list[0].lkey);
			rc = EINVAL;
			break;
		}
		if (wr->sg_list[0].length > mtu_bytes()) {
			refuse("send of %u bytes: above the path MTU of %zu (UD)", wr->sg_list[0].length, mtu_bytes());
			rc = EINVAL;
			break;
		}
		if (q->outstanding >= q->max_send) {
			refuse("send: %u sends outstanding, max_send_wr %u (the send queue is full)", q->outstanding,
			       q->max_send);
			rc = ENOMEM;
			break;
		}
		uint8_t buf[sizeof(struct dbl_hdr) + 4096];
		struct dbl_hdr h = { DBL_MAGIC, (uint32_t)wr->wr.ud.remote_qkey, q->qp.qp_num, wr->sg_list[0].length };
		memcpy(buf, &h, sizeof(h));
		memcpy(buf + sizeof(h), (void *)(uintptr_t)wr->sg_list[0].addr, h.len);
		struct sockaddr_in g = { .sin_family = AF_INET, .sin_port = htons(DBL_PORT) };
		/* the group: the AH's GID holds it (ah_attr.grh.dgid, IPv4-mapped) */
		memcpy(&g.sin_addr, &((struct ibv_ah *)ah)[1], 4);
		if (wr->wr.ud.remote_qpn != 0xFFFFFF)
			refuse("send to QPN 0x%x: a group's QPN is 0xFFFFFF", wr->wr.ud.remote_qpn);
		(void)sendto(q->sock, buf, sizeof(h) + h.len, 0, (struct sockaddr *)&g, sizeof(g));
		q->outstanding++;
		if (wr->send_flags & IBV_SEND_SIGNALED) {
			struct ibv_wc wc = { .wr_id = wr->wr_id, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_SEND,
					     .qp_num = q->qp.qp_num };
			wc.vendor_err = (uint32_t)q->nunsig; /* how many unsignalled it completes */
			q->nunsig = 0;
			cq_push(q->scq, &wc);
		} else {
			q->nunsig++;
		}
	}
	pthread_mutex_unlock(&mu);
	if (rc && bad)
		*bad = wr;
	return rc;
}

static int dbl_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct dbl_qp *q = (struct dbl_qp *)qp;
	int rc = 0;

	pthread_mutex_lock(&mu);
	for (; wr; wr = wr->next) {
		if (wr->num_sge != 1 ||
		    !covered(qp->pd, wr->sg_list[0].addr, wr->sg_list[0].length, wr->sg_list[0].lkey)) {
			refuse("receive of %u bytes at 0x%llx: not one SGE in a registration under lkey 0x%x",
			       wr->sg_list[0].length, (unsigned long long)wr->sg_list[0].addr, wr->sg_list[0].lkey);
			rc = EINVAL;
			break;
		}
		if ((uint32_t)q->nrq >= q->max_recv) {
			refuse("receive: %d posted, max_recv_wr %u", q->nrq, q->max_recv);
			rc = ENOMEM;
			break;
		}
		struct ibv_recv_wr c = *wr;
		c.sg_list = malloc(sizeof(*c.sg_list));
		if (!c.sg_list) {
			rc = ENOMEM;
			break;
		}
		*c.sg_list = wr->sg_list[0];
		c.next = NULL;
		q->rq[q->nrq++] = c;
	}
	pthread_mutex_unlock(&mu);
	if (rc && bad)
		*bad = wr;
	return rc;
}

/* ---- the verbs ---- */

__attribute__((constructor)) static void init(void)
{
	ctx.device = &dev;
	ctx.ops.poll_cq = dbl_poll_cq;
	ctx.ops.post_send = dbl_post_send;
	ctx.ops.post_recv = dbl_post_recv;
	ctx.abi_compat = NULL; /* not an extended context: the exported calls */
	ctx.async_fd = -1;
	ctx.cmd_fd = -1;
	srandom((unsigned)getpid());
}

int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *out)
{
	struct ibv_port_attr *a = (struct ibv_port_attr *)out;

	if (c != &ctx || port != 1) {
		errno = EINVAL;
		return EINVAL;
	}
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = (enum ibv_mtu)mtu_enum();
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct dbl_pd *p = calloc(1, sizeof(*p));

	if (p)
		p->pd.context = c;
	return p ? &p->pd : NULL;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	if (((struct dbl_pd *)pd)->mrs) {
		refuse("ibv_dealloc_pd with memory still registered in it");
		return EBUSY;
	}
	free(pd);
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *ch,
			     int vector)
{
	(void)cq_context, (void)ch, (void)vector;
	if (cqe < 1 || cqe > DBL_CQ_MAX) {
		errno = EINVAL;
		return NULL;
	}
	struct dbl_cq *q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->cq.context = c;
	q->cq.cqe = cqe;
	return &q->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	free(cq);
	return 0;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct dbl_mr *m = calloc(1, sizeof(*m));

	(void)access;
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&mu);
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.lkey = m->mr.rkey = next_key++;
	m->next = ((struct dbl_pd *)pd)->mrs;
	((struct dbl_pd *)pd)->mrs = m;
	pthread_mutex_unlock(&mu);
	return &m->mr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	(void)iova;
	return ibv_reg_mr(pd, addr, length, (int)access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct dbl_pd *p = (struct dbl_pd *)mr->pd;

	pthread_mutex_lock(&mu);
	for (struct dbl_mr **m = &p->mrs; *m; m = &(*m)->next)
		if (&(*m)->mr == mr) {
			struct dbl_mr *x = *m;
			*m = x->next;
			free(x);
			break;
		}
	pthread_mutex_unlock(&mu);
	return 0;
}

/* An address handle to a group: the group's IPv4 address follows it. */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah *ah = calloc(1, sizeof(*ah) + 4);

	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->context = pd->context;
	ah->pd = pd;
	memcpy(&ah[1], attr->grh.dgid.raw + 12, 4); /* IPv4-mapped GID */
	return ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}

/* ---- the CM ---- */

struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct dbl_ch *c = calloc(1, sizeof(*c));
	int p[2];

	if (!c || pipe2(p, O_CLOEXEC)) {
		free(c);
		return NULL;
	}
	c->ch.fd = p[0];
	c->wfd = p[1];
	return &c->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *ch)
{
	struct dbl_ch *c = (struct dbl_ch *)ch;

	close(c->ch.fd);
	close(c->wfd);
	free(c);
}

int rdma_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *context, enum rdma_port_space ps)
{
	struct rdma_cm_id *x = calloc(1, sizeof(*x));

	if (!x) {
		errno = ENOMEM;
		return -1;
	}
	x->channel = ch;
	x->context = context;
	x->ps = ps;
	*id = x;
	return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	free(id);
	return 0;
}

/* An address of a local interface that is up and not loopback. */
static bool local_rdma_addr(struct in_addr a)
{
	struct ifaddrs *ifs, *i;
	bool ok = false;

	if (getifaddrs(&ifs))
		return false;
	for (i = ifs; i && !ok; i = i->ifa_next)
		ok = i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK) &&
		     (i->ifa_flags & IFF_UP) && ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a.s_addr;
	freeifaddrs(ifs);
	return ok;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct sockaddr_in *a = (struct sockaddr_in *)addr;

	if (addr->sa_family != AF_INET || !local_rdma_addr(a->sin_addr)) {
		errno = ENODEV;
		return -1;
	}
	id->verbs = &ctx;
	id->port_num = 1;
	memcpy(&id->route.addr.src_sin, a, sizeof(*a));
	return 0;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct dbl_qp *q;
	int one = 1;

	if (attr->qp_type != IBV_QPT_UD || id->ps != RDMA_PS_UDP || !attr->send_cq || !attr->recv_cq ||
	    attr->cap.max_send_wr < 1 || attr->cap.max_recv_wr < 1 || attr->cap.max_send_wr > 4096) {
		refuse("rdma_create_qp: not a UD QP of a UDP id with both CQs and queues");
		errno = EINVAL;
		return -1;
	}
	q = calloc(1, sizeof(*q));
	if (!q || !(q->rq = calloc(attr->cap.max_recv_wr, sizeof(*q->rq)))) {
		free(q);
		errno = ENOMEM;
		return -1;
	}
	q->sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(DBL_PORT) };
	if (q->sock < 0 || setsockopt(q->sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(q->sock, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    bind(q->sock, (struct sockaddr *)&any, sizeof(any))) {
		int e = errno;
		if (q->sock >= 0)
			close(q->sock);
		free(q->rq);
		free(q);
		errno = e;
		return -1;
	}
	q->bound = id->route.addr.src_sin.sin_addr;
	(void)setsockopt(q->sock, IPPROTO_IP, IP_MULTICAST_IF, &q->bound, sizeof(q->bound));
	(void)setsockopt(q->sock, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one));
	int zero = 0; /* only the groups this QP joined, as an HCA attaches a QP */
	(void)setsockopt(q->sock, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
	pthread_mutex_lock(&mu);
	q->qp.context = &ctx;
	q->qp.pd = pd;
	q->qp.qp_type = IBV_QPT_UD;
	q->qp.state = IBV_QPS_RTS;
	q->qp.qp_num = next_qpn++;
	q->qp.send_cq = attr->send_cq;
	q->qp.recv_cq = attr->recv_cq;
	q->scq = (struct dbl_cq *)attr->send_cq;
	q->rcq = (struct dbl_cq *)attr->recv_cq;
	q->max_send = attr->cap.max_send_wr;
	q->max_recv = attr->cap.max_recv_wr;
	q->qkey = RDMA_UDP_QKEY; /* librdmacm's for a UDP port space id */
	if (q->scq->nqps < 8)
		q->scq->qps[q->scq->nqps++] = q;
	if (q->rcq != q->scq && q->rcq->nqps < 8)
		q->rcq->qps[q->rcq->nqps++] = q;
	pthread_mutex_unlock(&mu);
	id->qp = &q->qp;
	return 0;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	struct dbl_qp *q = (struct dbl_qp *)id->qp;

	if (!q)
		return;
	pthread_mutex_lock(&mu);
	for (struct dbl_cq *c = q->scq; c; c = c == q->rcq ? NULL : q->rcq) {
		for (int i = 0; i < c->nqps; i++)
			if (c->qps[i] == q)
				c->qps[i--] = c->qps[--c->nqps];
		if (c == q->rcq)
			break;
	}
	for (int i = 0; i < q->nrq; i++)
		free(q->rq[i].sg_list);
	pthread_mutex_unlock(&mu);
	close(q->sock);
	free(q->rq);
	free(q);
	id->qp = NULL;
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	struct sockaddr_in *g = (struct sockaddr_in *)addr;
	struct dbl_qp *q = (struct dbl_qp *)id->qp;
	struct dbl_ch *c = (struct dbl_ch *)id->channel;

	if (!q || addr->sa_family != AF_INET || !IN_MULTICAST(ntohl(g->sin_addr.s_addr))) {
		errno = EINVAL;
		return -1;
	}
	struct ip_mreq m = { .imr_multiaddr = g->sin_addr, .imr_interface = q->bound };
	if (setsockopt(q->sock, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)))
		return -1;
	/* the SM's answer: the group's UD parameters */
	struct dbl_ev *e = calloc(1, sizeof(*e));
	if (!e) {
		errno = ENOMEM;
		return -1;
	}
	e->ev.id = id;
	e->ev.event = RDMA_CM_EVENT_MULTICAST_JOIN;
	e->ev.status = 0;
	struct rdma_ud_param *ud = &e->ev.param.ud;
	ud->private_data = context;
	ud->qp_num = 0xFFFFFF;
	ud->qkey = RDMA_UDP_QKEY;
	ud->ah_attr.is_global = 1;
	ud->ah_attr.port_num = 1;
	ud->ah_attr.grh.dgid.raw[10] = 0xff;
	ud->ah_attr.grh.dgid.raw[11] = 0xff;
	memcpy(ud->ah_attr.grh.dgid.raw + 12, &g->sin_addr, 4);
	pthread_mutex_lock(&mu);
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	pthread_mutex_unlock(&mu);
	char one = 1;
	(void)!write(c->wfd, &one, 1);
	return 0;
}

int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct dbl_qp *q = (struct dbl_qp *)id->qp;
	struct sockaddr_in *g = (struct sockaddr_in *)addr;

	if (q) {
		struct ip_mreq m = { .imr_multiaddr = g->sin_addr, .imr_interface = q->bound };
		(void)setsockopt(q->sock, IPPROTO_IP, IP_DROP_MEMBERSHIP, &m, sizeof(m));
	}
	return 0;
}

int rdma_get_cm_event(struct rdma_event_channel *ch, struct rdma_cm_event **event)
{
	struct dbl_ch *c = (struct dbl_ch *)ch;
	char b;

	pthread_mutex_lock(&mu);
	struct dbl_ev *e = c->head;
	if (e) {
		c->head = e->next;
		if (!c->head)
			c->tail = NULL;
	}
	pthread_mutex_unlock(&mu);
	if (!e) {
		errno = EAGAIN;
		return -1;
	}
	(void)!read(c->ch.fd, &b, 1);
	*event = &e->ev;
	return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	free(event);
	return 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	return event == RDMA_CM_EVENT_MULTICAST_JOIN ? "RDMA_CM_EVENT_MULTICAST_JOIN" : "RDMA_CM_EVENT_(other)";
}
