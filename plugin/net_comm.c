/* ncclNet p2p engine over one libfabric RDM endpoint per process: the
 * endpoint, completion polling, and the comms (listen, connect, accept,
 * close); requests on a comm (isend, irecv, test) are net_req.c's, the
 * NCCL adapter is net_nccl.c, the shared structs net_comm_int.h.
 *
 * Tags (64 bits): kind:4 | id:28 | low:32.
 *   CONN  kind=1, low = listen id        connector -> listener: {send id, addr}
 *   ACK   kind=2, low = send id          listener -> connector: {recv id}
 *   DATA  kind=3, id = receiver's recv id, low = NCCL tag
 * Ids are unique in the process, so a receive matches exactly one comm and
 * messages of one (comm, tag) match in posting order (FI_ORDER_SAS).
 *
 * Threads: NCCL calls connect/accept and isend/irecv/test from different
 * threads, on different comms. The endpoint is FI_THREAD_SAFE; completion
 * polling runs under a trylock (test never blocks) and only writes the
 * completed op's fields, published with a release store of its state.
 *
 * connect/accept never block: the connector keeps its half-built comm in
 * the handle NCCL hands back on every retry (NCCL's handle buffer is ours,
 * NCCL_NET_HANDLE_MAXSIZE bytes).
 *
 * Closing: a comm's ops live inside it, and a completion writes into its
 * op. A comm closed while the fabric still holds one of its ops (a cancel
 * or a send that did not finish within its bound) is parked, not freed: it
 * stays allocated on a list until its last op completes, and the progress
 * call that reads that completion frees it. The endpoint is never closed
 * (netc_fini), so a comm whose op never completes stays parked for the
 * life of the process: the memory of the comms closed that way, counted in
 * the log line that parks each one.
 *
 * The handshake's messages (a comm's conn and ack) sit in memory
 * registered with the comm (comm_ctl_reg): FI_MR_LOCAL providers (verbs,
 * efa) take only registered buffers with their descriptor. */
#include "net_comm_int.h"

#include <errno.h>
#include <pthread.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tags.h"

struct netc_state netc = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.progress = PTHREAD_MUTEX_INITIALIZER,
	.next_id = 1,
	.parked = SLIST_HEAD_INITIALIZER(netc.parked),
};

static uint32_t netc_id_new(void)
{
	uint32_t id;

	do
		id = __atomic_fetch_add(&netc.next_id, 1, __ATOMIC_RELAXED) & NETC_ID_MASK;
	while (id == 0);
	return id;
}

int netc_init(void)
{
	int rc = 0;

	pthread_mutex_lock(&netc.lock);
	if (!netc.f) {
		rc = plugin_fabric_open(true, &netc.f);
		if (!rc) {
			char a[128];
			fabric_addr_str(netc.f, netc.f->addr, netc.f->addrlen, a, sizeof(a));
			SC_INFO("p2p endpoint %s on %s", a, fabric_provider(netc.f));
		}
	}
	if (!rc)
		netc.refs++;
	pthread_mutex_unlock(&netc.lock);
	return rc;
}

void netc_fini(void)
{
	pthread_mutex_lock(&netc.lock);
	/* The endpoint stays open for the life of the process: comms of
	 * other communicators may still use it, and NCCL does not promise to
	 * close every comm before finalize. */
	if (netc.refs > 0)
		netc.refs--;
	pthread_mutex_unlock(&netc.lock);
}

struct fabric *netc_fabric(void)
{
	return netc.f;
}

int netc_devices(int *ndev)
{
	*ndev = netc.f ? 1 : 0;
	return 0;
}

/* The ops of c the fabric still holds (posted, not completed). */
static int comm_posted(struct netc_comm *c)
{
	int n = 0;

	n += __atomic_load_n(&c->ctl_op.state, __ATOMIC_ACQUIRE) == OP_POSTED;
	n += __atomic_load_n(&c->ctl_op2.state, __ATOMIC_ACQUIRE) == OP_POSTED;
	for (int i = 0; i < NETC_REQS; i++)
		for (int j = 0; j < PLUGIN_MAX_RECVS; j++)
			n += __atomic_load_n(&c->reqs[i].ops[j].state, __ATOMIC_ACQUIRE) == OP_POSTED;
	return n;
}

static const char *comm_kind_name(enum comm_kind k)
{
	return k == COMM_LISTEN ? "listen" : k == COMM_SEND ? "send" : "receive";
}

/* A comm's control messages (conn, ack) live in memory registered on the
 * endpoint: on FI_MR_LOCAL providers (verbs, efa) the handshake posts them
 * with their descriptor. 0 or fi_mr_reg's error. */
_Static_assert(offsetof(struct netc_comm, ack) > offsetof(struct netc_comm, conn),
	       "conn then ack: one registration covers both");
static int comm_ctl_reg(struct netc_comm *c)
{
	size_t len = offsetof(struct netc_comm, ack) + sizeof(c->ack) - offsetof(struct netc_comm, conn);

	return fabric_mr_reg(netc.f, &c->conn, len, &c->ctl_mr);
}

/* Frees a comm none of whose operations is posted any more. */
static void comm_free(struct netc_comm *c)
{
	fabric_mr_dereg(&c->ctl_mr);
	free(c);
}

/* Frees the parked comms whose last op has completed. Progress lock held. */
static void netc_reap_parked(void)
{
	struct netc_comm *c, *next;

	for (c = SLIST_FIRST(&netc.parked); c; c = next) {
		next = SLIST_NEXT(c, parked_link);
		if (comm_posted(c))
			continue;
		/* a walk from the head: comms are parked only when the fabric
		 * loses an operation, a handful in a process's life */
		SLIST_REMOVE(&netc.parked, c, netc_comm, parked_link);
		netc.nparked--;
		SC_INFO("p2p %s comm %u: its last operation completed after close; freed (%d still parked)",
			comm_kind_name(c->kind), c->id, netc.nparked);
		comm_free(c);
	}
}

void netc_progress(void)
{
	struct fabric_cqe cqe[32];
	int n;

	if (pthread_mutex_trylock(&netc.progress))
		return;
	n = fabric_cq_poll(netc.f, cqe, 32);
	for (int i = 0; i < n; i++) {
		struct netc_op *op = container_of(cqe[i].op, struct netc_op, fop);
		op->len = cqe[i].err ? cqe[i].olen : cqe[i].len;
		op->err = cqe[i].err;
		if (op->req)
			__atomic_fetch_sub(&op->req->pending, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&op->state, OP_DONE, __ATOMIC_RELEASE);
	}
	if (n > 0 && !SLIST_EMPTY(&netc.parked))
		netc_reap_parked();
	pthread_mutex_unlock(&netc.progress);
	if (n < 0)
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "p2p completion queue: %s", fi_strerror(-n));
}

bool netc_op_done(struct netc_op *op)
{
	return __atomic_load_n(&op->state, __ATOMIC_ACQUIRE) == OP_DONE;
}

/* Waits (bounded) for a posted op to finish after fi_cancel; if it does
 * not, the comm that holds it is parked when released (comm_release). */
void netc_op_cancel_wait(struct netc_op *op)
{
	if (__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) != OP_POSTED)
		return;
	fabric_cancel(netc.f, &op->fop);
	uint64_t end = sc_now_ns() + 2000000000ull;
	while (!netc_op_done(op) && sc_now_ns() < end)
		netc_progress();
}

/* The end of a closed (or never finished) comm: freed, or parked while the
 * fabric still holds one of its ops, so that a late completion writes into
 * live memory; netc_progress frees it after that completion. */
static void comm_release(struct netc_comm *c)
{
	pthread_mutex_lock(&netc.progress);
	int posted = comm_posted(c);
	if (posted) {
		SLIST_INSERT_HEAD(&netc.parked, c, parked_link);
		netc.nparked++;
		SC_WARN("p2p %s comm %u: %d operation(s) still posted 2 s after close; parked until they "
			"complete (%d comm(s) of %zu bytes parked)", comm_kind_name(c->kind), c->id, posted,
			netc.nparked, sizeof(*c));
	}
	pthread_mutex_unlock(&netc.progress);
	if (!posted)
		comm_free(c);
}

int netc_op_recv(struct netc_op *op, void *buf, size_t len, void *desc, uint64_t tag)
{
	op->state = OP_POSTED;
	int rc = fabric_trecv(netc.f, buf, len, desc, FI_ADDR_UNSPEC, tag, 0, &op->fop);
	if (rc)
		op->state = OP_IDLE;
	return rc;
}

int netc_op_send(struct netc_op *op, const void *buf, size_t len, void *desc, fi_addr_t to,
		 uint64_t tag)
{
	op->state = OP_POSTED;
	int rc = fabric_tsend(netc.f, buf, len, desc, to, tag, 0, &op->fop);
	if (rc)
		op->state = OP_IDLE;
	return rc;
}

int netc_listen(int dev, void *handle, void **listen_comm)
{
	struct netc_handle *h = handle;
	struct netc_comm *lc;
	int rc;

	if (dev != 0 || !netc.f)
		return -EINVAL;
	lc = calloc(1, sizeof(*lc));
	if (!lc)
		return -ENOMEM;
	defer_queue_init(&lc->deferred);
	lc->kind = COMM_LISTEN;
	lc->id = netc_id_new();
	rc = comm_ctl_reg(lc);
	if (rc) {
		free(lc);
		return rc;
	}
	do {
		rc = netc_op_recv(&lc->ctl_op, &lc->conn, sizeof(lc->conn), lc->ctl_mr.desc,
			     sc_tag_net(SC_TAG_NET_CONN, 0, lc->id));
		if (rc == -FI_EAGAIN)
			netc_progress();
	} while (rc == -FI_EAGAIN);
	if (rc) {
		SC_WARN("listen: posting the connect receive failed: %s", fi_strerror(-rc));
		comm_free(lc);
		return rc;
	}
	memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
	h->magic = NETC_MAGIC;
	h->listen_id = lc->id;
	h->addrlen = (uint16_t)netc.f->addrlen;
	memcpy(h->addr, netc.f->addr, netc.f->addrlen);
	*listen_comm = lc;
	return 0;
}

int netc_connect(int dev, void *handle, void **send_comm)
{
	struct netc_handle *h = handle;
	struct netc_comm *c = h->pending;
	int rc;

	*send_comm = NULL;
	if (dev != 0 || h->magic != NETC_MAGIC || h->addrlen == 0 || h->addrlen > FABRIC_ADDR_MAX) {
		SC_WARN("connect: handle is not a Sumcast p2p handle (magic 0x%x)", h->magic);
		return -EINVAL;
	}
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		defer_queue_init(&c->deferred);
		c->kind = COMM_SEND;
		c->id = netc_id_new();
		rc = fabric_av_insert(netc.f, h->addr, h->addrlen, &c->peer);
		if (rc) {
			SC_WARN("connect: fi_av_insert: %s", fi_strerror(-rc));
			free(c);
			return rc;
		}
		rc = comm_ctl_reg(c);
		if (rc) {
			free(c);
			return rc;
		}
		c->conn.magic = NETC_MAGIC;
		c->conn.send_id = c->id;
		c->conn.addrlen = (uint32_t)netc.f->addrlen;
		memcpy(c->conn.addr, netc.f->addr, netc.f->addrlen);
		h->pending = c;
	}
	netc_progress();
	if (c->stage == 0) {
		rc = netc_op_recv(&c->ctl_op2, &c->ack, sizeof(c->ack), c->ctl_mr.desc,
				  sc_tag_net(SC_TAG_NET_ACK, 0, c->id));
		if (rc == -FI_EAGAIN)
			return 0;
		if (rc)
			goto fail;
		c->stage = 1;
	}
	if (c->stage == 1) {
		/* rxm answers -FI_EAGAIN until its connection to the peer is up. */
		rc = netc_op_send(&c->ctl_op, &c->conn, sizeof(c->conn), c->ctl_mr.desc, c->peer,
			     sc_tag_net(SC_TAG_NET_CONN, 0, h->listen_id));
		if (rc == -FI_EAGAIN)
			return 0;
		if (rc)
			goto fail;
		c->stage = 2;
	}
	if (!netc_op_done(&c->ctl_op) || !netc_op_done(&c->ctl_op2))
		return 0;
	if (c->ctl_op.err || c->ctl_op2.err || c->ack.magic != NETC_MAGIC) {
		rc = c->ctl_op.err ? c->ctl_op.err : c->ctl_op2.err ? c->ctl_op2.err : -FI_EOTHER;
		goto fail;
	}
	c->peer_id = c->ack.recv_id;
	h->pending = NULL;
	*send_comm = c;
	return 0;
fail:
	SC_WARN("connect to listen id %u failed: %s", h->listen_id, fi_strerror(-rc));
	netc_op_cancel_wait(&c->ctl_op2);
	h->pending = NULL;
	comm_release(c);
	return rc;
}

int netc_accept(void *listen_comm, void **recv_comm)
{
	struct netc_comm *lc = listen_comm;
	struct netc_comm *c = lc->accepting;
	int rc;

	*recv_comm = NULL;
	netc_progress();
	if (!c) {
		if (!netc_op_done(&lc->ctl_op))
			return 0;
		if (lc->ctl_op.err || lc->conn.magic != NETC_MAGIC || lc->conn.addrlen == 0 ||
		    lc->conn.addrlen > FABRIC_ADDR_MAX) {
			SC_WARN("accept: bad connect message (%s)", lc->ctl_op.err ?
				fi_strerror(-lc->ctl_op.err) : "magic/address");
			return -EPROTO;
		}
		c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		defer_queue_init(&c->deferred);
		c->kind = COMM_RECV;
		c->id = netc_id_new();
		rc = fabric_av_insert(netc.f, lc->conn.addr, lc->conn.addrlen, &c->peer);
		if (rc) {
			SC_WARN("accept: fi_av_insert: %s", fi_strerror(-rc));
			free(c);
			return rc;
		}
		rc = comm_ctl_reg(c);
		if (rc) {
			free(c);
			return rc;
		}
		c->peer_id = lc->conn.send_id;
		c->ack.magic = NETC_MAGIC;
		c->ack.recv_id = c->id;
		lc->accepting = c;
		/* Ready for the next connector. */
		lc->ctl_op.state = OP_IDLE;
		rc = netc_op_recv(&lc->ctl_op, &lc->conn, sizeof(lc->conn), lc->ctl_mr.desc,
			     sc_tag_net(SC_TAG_NET_CONN, 0, lc->id));
		if (rc)
			SC_WARN("accept: reposting the connect receive: %s", fi_strerror(-rc));
	}
	if (c->stage == 0) {
		rc = netc_op_send(&c->ctl_op, &c->ack, sizeof(c->ack), c->ctl_mr.desc, c->peer,
			     sc_tag_net(SC_TAG_NET_ACK, 0, c->peer_id));
		if (rc == -FI_EAGAIN)
			return 0;
		if (rc) {
			SC_WARN("accept: sending the ack: %s", fi_strerror(-rc));
			lc->accepting = NULL;
			comm_free(c);
			return rc;
		}
		c->stage = 1;
	}
	if (!netc_op_done(&c->ctl_op))
		return 0;
	lc->accepting = NULL;
	if (c->ctl_op.err) {
		rc = c->ctl_op.err;
		SC_WARN("accept: ack failed: %s", fi_strerror(-rc));
		comm_free(c);
		return rc;
	}
	*recv_comm = c;
	return 0;
}

static void comm_drain(struct netc_comm *c)
{
	for (int i = 0; i < NETC_REQS; i++) {
		struct netc_req *r = &c->reqs[i];
		if (!r->used)
			continue;
		for (int j = 0; j < r->nposted; j++)
			if (!r->send)
				netc_op_cancel_wait(&r->ops[j]);
	}
}

int netc_close_send(void *send_comm)
{
	struct netc_comm *c = send_comm;

	if (!c)
		return 0;
	/* Sends in flight complete on their own; wait for them (bounded). */
	uint64_t end = sc_now_ns() + 2000000000ull;
	for (int i = 0; i < NETC_REQS; i++)
		while (c->reqs[i].used && __atomic_load_n(&c->reqs[i].pending, __ATOMIC_ACQUIRE) &&
		       sc_now_ns() < end)
			netc_progress();
	netc_prof_close(c);
	comm_release(c);
	return 0;
}

int netc_close_recv(void *recv_comm)
{
	struct netc_comm *c = recv_comm;

	if (!c)
		return 0;
	comm_drain(c);
	netc_prof_close(c);
	comm_release(c);
	return 0;
}

int netc_close_listen(void *listen_comm)
{
	struct netc_comm *lc = listen_comm;

	if (!lc)
		return 0;
	netc_op_cancel_wait(&lc->ctl_op);
	if (lc->accepting) {
		uint64_t end = sc_now_ns() + 2000000000ull;
		while (lc->accepting->stage == 1 && !netc_op_done(&lc->accepting->ctl_op) &&
		       sc_now_ns() < end)
			netc_progress();
		comm_release(lc->accepting);
	}
	comm_release(lc);
	return 0;
}
