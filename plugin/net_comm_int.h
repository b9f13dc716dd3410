/* The p2p engine's private header: what net_comm.c (the endpoint, comms:
 * connect, accept, close) and net_req.c (requests on a comm: isend, irecv,
 * test) share. net_comm.h is what the adapter (net_nccl.c) sees. */
#ifndef SUMCAST_PLUGIN_NET_COMM_INT_H
#define SUMCAST_PLUGIN_NET_COMM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/queue.h>

#include "defer.h"
#include "net_comm.h"
#include "tags.h"

#define NETC_MAGIC 0x53434e31u /* "SCN1" */
#define NETC_REQS 64           /* per comm; NCCL keeps at most 32 in flight */
#define NETC_ID_MASK SC_TAG_NET_ID_MASK

enum { OP_IDLE = 0, OP_POSTED, OP_DONE };

struct netc_op {
	struct fabric_op fop;
	int state; /* OP_*, atomic */
	int err;
	size_t len;
	struct netc_req *req;
};

struct netc_handle {
	uint32_t magic;
	uint32_t listen_id;
	uint16_t addrlen;
	uint16_t pad;
	uint8_t addr[FABRIC_ADDR_MAX];
	struct netc_comm *pending; /* connector's own state between retries */
};
_Static_assert(sizeof(struct netc_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

struct netc_conn_msg {
	uint32_t magic;
	uint32_t send_id;
	uint32_t addrlen;
	uint8_t addr[FABRIC_ADDR_MAX];
};

struct netc_ack_msg {
	uint32_t magic;
	uint32_t recv_id;
};

struct netc_req {
	struct netc_comm *comm;
	int used;
	int n;       /* sub-operations */
	int nposted; /* posted so far (the rest waits for -FI_EAGAIN to clear) */
	int pending; /* posted, not completed; atomic */
	bool send;
	void *data[PLUGIN_MAX_RECVS];
	size_t size[PLUGIN_MAX_RECVS];
	void *desc[PLUGIN_MAX_RECVS];
	uint32_t tag[PLUGIN_MAX_RECVS];
	/* profiler events open per sub (NCCL's eHandles; NULL: none) */
	void *prof_eh[PLUGIN_MAX_RECVS];
	bool prof;  /* some prof_eh is open */
	struct netc_op ops[PLUGIN_MAX_RECVS];
	struct defer defer; /* subs not posted yet: on the comm's queue */
};

enum comm_kind { COMM_LISTEN = 1, COMM_SEND, COMM_RECV };

struct netc_comm {
	enum comm_kind kind;
	uint32_t id;      /* listen id, send id or recv id */
	uint32_t peer_id; /* send comm: the peer's recv id */
	fi_addr_t peer;
	int stage;        /* connect/accept progress */
	/* requests with unposted subs (defer.h, in order): later ones wait */
	struct defer_queue deferred;
	struct netc_op ctl_op, ctl_op2;
	struct netc_conn_msg conn;  /* listen: incoming; send: outgoing */
	struct netc_ack_msg ack;    /* send: incoming; recv (via listen): outgoing */
	struct fabric_mr ctl_mr;    /* conn and ack registered (FI_MR_LOCAL: net_comm.c) */
	struct netc_comm *accepting; /* listen: recv comm being set up */
	SLIST_ENTRY(netc_comm) parked_link; /* on netc.parked (closed, ops still posted) */
	struct netc_req reqs[NETC_REQS];
};

struct netc_mr {
	struct fabric_mr mr;
};

/* The process's one p2p endpoint and what hangs off it (net_comm.c). */
struct netc_state {
	pthread_mutex_t lock; /* open/close */
	pthread_mutex_t progress; /* completion polling, and the parked list */
	int refs;
	struct fabric *f;
	uint32_t next_id;
	SLIST_HEAD(netc_parked, netc_comm) parked; /* closed comms with ops still posted */
	int nparked;
};
extern struct netc_state netc;

/* Shared by net_comm.c (comms) and net_req.c (requests), net_comm.c's: */
/* reads completions; never blocks (another thread polling is as good) */
void netc_progress(void);
/* an op's state, as the completion published it */
bool netc_op_done(struct netc_op *op);
/* posts an op: 0, -FI_EAGAIN (retry) or the provider's error */
int netc_op_recv(struct netc_op *op, void *buf, size_t len, void *desc, uint64_t tag);
int netc_op_send(struct netc_op *op, const void *buf, size_t len, void *desc, fi_addr_t to,
		 uint64_t tag);
/* cancels a posted op and waits for it (bounded) */
void netc_op_cancel_wait(struct netc_op *op);
/* net_req.c's: ends the profiler events of c's requests still open (close) */
void netc_prof_close(struct netc_comm *c);

#endif
