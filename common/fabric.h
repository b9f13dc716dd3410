/* Thin libfabric wrapper shared by the daemon, the client library and the
 * plugin: one RDM endpoint with its fabric, domain, address vector and
 * completion queue; memory registration; tagged send/recv with 32 bits of
 * immediate data; non-blocking completion polling.
 *
 * Every posted operation carries a struct fabric_op (which embeds the
 * provider's fi_context2 scratch space) inside the caller's own request
 * struct; completions hand the op back, callers use container_of.
 *
 * Nothing here allocates, locks or logs on the data path (fabric_tsend,
 * fabric_trecv, fabric_cq_poll). */
#ifndef SUMCAST_FABRIC_H
#define SUMCAST_FABRIC_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FABRIC_ADDR_MAX 64
#define FABRIC_PROV_DEFAULT "tcp;ofi_rxm"
#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

struct fabric_params {
	/* "tcp;ofi_rxm" (also spelled "tcp"), "shm", "efa", "verbs;ofi_rxm";
	 * NULL or "" or "auto": the first RDM provider libfabric offers that
	 * has tagged messages, in libfabric's order of preference. */
	const char *provider;
	/* Local address to bind (e.g. "127.0.0.1" or an interface's IP);
	 * NULL: the provider's choice. Ignored by shm. */
	const char *node;
	size_t cq_size;   /* 0: 1024 */
	bool thread_safe; /* FI_THREAD_SAFE instead of FI_THREAD_DOMAIN */
	bool no_source;   /* do not ask for FI_SOURCE (as with a provider without it) */
	/* A CQ with a wait object (FI_WAIT_FD) where the provider has one, so
	 * that an idle thread can block in fabric_wait instead of polling. */
	bool wait;
};

struct fabric {
	struct fabric *parent; /* a sibling's root (shares fabric, domain, info); NULL: a root */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	uint8_t addr[FABRIC_ADDR_MAX];
	size_t addrlen;
	bool mr_local;   /* descriptors required on local buffers */
	bool has_source; /* completions carry the sender's fi_addr, and receives can name it (FI_SOURCE + FI_DIRECTED_RECV) */
	size_t inject_size; /* largest fabric_tinject message (tx_attr->inject_size) */
	int wait_fd;        /* the CQ's wait object (fabric_params.wait), -1: none */
	char prov_name[64];
};

struct fabric_mr {
	struct fid_mr *mr;
	void *desc;
	uint64_t key;
};

/* Context of one posted operation. Must outlive the operation. */
struct fabric_op {
	struct fi_context2 fi; /* first: provider scratch */
};

struct fabric_cqe {
	struct fabric_op *op;
	uint64_t flags; /* FI_SEND / FI_RECV / FI_REMOTE_CQ_DATA ... */
	size_t len;     /* bytes received (recv) */
	uint64_t tag;
	uint32_t data;  /* immediate data, valid if flags & FI_REMOTE_CQ_DATA */
	fi_addr_t src;  /* FI_ADDR_NOTAVAIL if unknown */
	int err;        /* 0, or a negative FI_E* (e.g. -FI_ETRUNC, -FI_ECANCELED) */
	size_t olen;    /* on -FI_ETRUNC: the length the sender sent */
};

int fabric_open(const struct fabric_params *p, struct fabric **out);
/* Another endpoint, with its own address vector and completion queue, on
 * root's domain: memory registered on root serves it too. Closing it
 * (fabric_close) tears down its connections and operations, and only
 * those: once fabric_close returns, nothing posted on it touches memory
 * again, whatever its peer does. The client library keeps one per
 * aggregator so that a failed aggregator can be cut off this way. root
 * must outlive its siblings. cq_size 0: 1024. */
int fabric_open_sibling(struct fabric *root, size_t cq_size, struct fabric **out);
/* A root (after its siblings) or a sibling. */
void fabric_close(struct fabric *f);
/* The endpoint only (with its queue and address vector): every operation
 * posted on it ends, without a completion; the domain stays, so that the
 * memory those operations used can be deregistered next, in RDMA's order
 * (endpoint, registrations, domain), before fabric_close ends the rest.
 * Nothing may be posted on f afterwards. */
void fabric_close_ep(struct fabric *f);
/* Blocks until the CQ may have a completion, other_fd (>= 0) is readable,
 * or timeout_ms passed; returns at once when completions are there
 * already (fi_trywait). 0 or a positive count when woken or timed out,
 * -FI_ENOSYS without a wait object (f->wait_fd < 0), another negative
 * FI_E* on error. Completions are then read with fabric_cq_poll. */
int fabric_wait(struct fabric *f, int other_fd, int timeout_ms);

/* libfabric's shm provider (1.17) names each endpoint's region
 * /dev/shm/<pid>:<domain>:<endpoint> (16 MiB and more: 64 MiB at the
 * daemon's FI_SHM_RX_SIZE) and removes it only when the endpoint closes: a
 * process killed (SIGKILL, OOM, a crash) leaves its regions behind, and a
 * later process given the same pid (a daemon restarted in a fresh pid
 * namespace, as in a container, is pid 1 again) failed to open its first
 * endpoint with EBUSY. So fabric_open removes the regions named after its
 * own pid before this process's first shm endpoint: no live process can
 * own them. (A /dev/shm shared by several pid namespaces is the exception,
 * where the same names would collide anyway.) This removes the regions of
 * pid's; returns how many. Call it for a pid no live process has. */
int fabric_shm_sweep(pid_t pid);

/* libfabric's shm in 1.x (1.17 read) keeps one spin lock in each
 * endpoint's shared region: every sender takes the receiver's, and the
 * receiver holds its own for the whole walk of its command queue, data
 * copies included. A process killed there (SIGKILL, the OOM killer, a
 * crash) leaves the lock held, and every later send to it spins inside
 * libfabric for good, where no timeout of Sumcast's can run: a dead
 * aggregator can hang its ranks, a dead rank its aggregator. 2.x (2.6
 * read) has no such lock; its regions' pool lock is held for one push or
 * pop. True where the loaded library is 1.x; fabric_open says so once per
 * process when it opens shm there. */
bool fabric_shm_lock_hazard(void);

/* The one spelling of a provider name: "tcp" -> "tcp;ofi_rxm", "verbs" ->
 * "verbs;ofi_rxm", others as given; NULL for NULL, "" and "auto" (libfabric
 * picks). Daemon and ranks compare providers by this (fabric_provider_same). */
const char *fabric_provider_canonical(const char *p);
/* Whether endpoints of providers a and b (fabric_provider() names, as a
 * JOIN carries them) speak the same protocol: the same after
 * fabric_provider_canonical, except that an endpoint whose provider is a
 * bare "tcp" is tcp's own RDM endpoint (libfabric 1.18 and later offer it,
 * before tcp;ofi_rxm, to a request without a provider: fabric_open skips
 * it for "auto"), which no tcp;ofi_rxm endpoint talks to. NULL, "" and
 * "auto" match nothing. */
bool fabric_provider_same(const char *a, const char *b);
/* The hints every endpoint is opened with (RDM, tagged, manual progress,
 * the mr_mode bits Sumcast handles) for caps; fi_freeinfo it. */
struct fi_info *fabric_hints_make(const struct fabric_params *p, uint64_t caps);
/* Whether the provider registers CUDA device memory (FI_HMEM, iface
 * FI_HMEM_CUDA) in the calling thread's current CUDA context: 1 yes, 0
 * no, with one line of what was found and tried in line (fabric_hmem.c). */
int fabric_hmem_cuda_probe(const char *provider, char *line, size_t len);
/* "libfabric 2.6 (built against 2.6)": the version loaded (fi_version) and
 * the headers', for logs; returns buf. */
const char *fabric_lib_version(char *buf, size_t len);
/* Provider's human name for logs: "tcp;ofi_rxm". */
const char *fabric_provider(const struct fabric *f);
/* Link speed in Gb/s from the provider's NIC attributes, 0 if unknown. */
double fabric_link_gbps(const struct fabric *f);

/* Whether addr (len bytes), as a peer hands it over, is an address of the
 * same kind as own (own_len bytes, an endpoint's own name) in libfabric's
 * address format fmt (FI_SOCKADDR_IN, FI_ADDR_STR, ...), one that the
 * address vector can take without harm:
 *   IP formats   own's family and length, a port, not the wildcard, a
 *                multicast or the broadcast address, IPv4's padding
 *                zero (libfabric 1.17's
 *                util AV takes its entry length from each inserted
 *                address's family: one of an unknown family left it
 *                refusing every later insert);
 *   FI_ADDR_STR  (shm) a NUL-terminated name within len, own's scheme
 *                ("fi_shm://"), then only [A-Za-z0-9._:-];
 *   other        (efa, verbs, ib) own's length.
 * 0, or -EINVAL with what is wrong in *why (a static string). A pure
 * function of its arguments: the fuzzer's and the unit tests' subject. */
int fabric_addr_check_fmt(uint32_t fmt, const void *own, size_t own_len, const void *addr, size_t len,
			  const char **why);
/* The same against f's own address and format. */
int fabric_addr_check(const struct fabric *f, const void *addr, size_t len, const char **why);
/* libfabric's shm from 2.5 on cannot connect two endpoints of one process
 * for messages above its inject size (4 KiB): its in-process shortcut
 * (smr_map_to_region()) leaves the peer's mapping unset on the endpoint
 * that opened the connection, and the first command passed out of line
 * segfaults its progress. Sumcast's aggregators and ranks are processes of
 * their own; fabric_av_insert warns once when a peer of this process is
 * inserted there (not the endpoint itself). */
int fabric_av_insert(struct fabric *f, const void *addr, size_t len, fi_addr_t *out);
int fabric_av_remove(struct fabric *f, fi_addr_t a);
/* Printable form of an address of this fabric's format. */
void fabric_addr_str(const struct fabric *f, const void *addr, size_t len, char *buf, size_t buflen);

int fabric_mr_reg(struct fabric *f, void *buf, size_t len, struct fabric_mr *out);
void fabric_mr_dereg(struct fabric_mr *mr);

/* A buffer of our own for the fabric to send from and receive into:
 * page-aligned memory, registered on f. Its contents start undefined and
 * nothing touches them here, so pages the fabric never uses stay
 * unbacked (large staging areas cost address space only). */
struct fabric_buf {
	void *buf;            /* NULL: none */
	size_t len;
	struct fabric_mr mr;  /* registered while mr.mr != NULL */
};
/* Allocates len bytes (0: 1) and registers them on f; f NULL: memory
 * only, for a caller that registers it elsewhere (on several domains).
 * 0, -ENOMEM or fi_mr_reg's error; *out is written on success only. */
int fabric_buf_alloc(struct fabric *f, size_t len, struct fabric_buf *out);
/* The registration only, before f's domain closes; the memory stays
 * (an operation the provider has not let go of may still write it until
 * the endpoint is closed). */
void fabric_buf_dereg(struct fabric_buf *b);
/* Deregisters if still registered, frees, and leaves b empty. A zeroed
 * or already freed b is fine. */
void fabric_buf_free(struct fabric_buf *b);

/* Post a tagged send / receive. Return 0, -FI_EAGAIN (queue full: poll the
 * CQ and retry), or another negative FI_E*. desc may be NULL when !mr_local. */
int fabric_tsend(struct fabric *f, const void *buf, size_t len, void *desc, fi_addr_t dest,
		 uint64_t tag, uint32_t data, struct fabric_op *op);
int fabric_trecv(struct fabric *f, void *buf, size_t len, void *desc, fi_addr_t src,
		 uint64_t tag, uint64_t ignore, struct fabric_op *op);
/* A tagged send of at most f->inject_size bytes that the provider copies
 * at once: buf is free on return and no completion ever comes (a lost
 * peer shows elsewhere). 0, -FI_EAGAIN or another negative FI_E*. */
int fabric_tinject(struct fabric *f, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
		   uint32_t data);
/* Drops the oldest unexpected tagged message that matches (fi_trecvmsg
 * with FI_PEEK | FI_DISCARD): its completion arrives without error once one
 * was dropped (len 0, its tag), or with -FI_ENOMSG when none matched. The
 * message's data is never touched, nor is its sender's connection. Each
 * call progresses the endpoint. */
int fabric_tdiscard(struct fabric *f, fi_addr_t src, uint64_t tag, uint64_t ignore, struct fabric_op *op);
/* Cancel a posted receive; its completion arrives with -FI_ECANCELED. */
int fabric_cancel(struct fabric *f, struct fabric_op *op);

/* Completions fabric_cq_poll asks the provider for in one call (each call
 * progresses the endpoint once). */
#define FABRIC_CQ_READ_MAX 64
/* Reads up to n completions, errors included, never blocks. Returns the
 * number read (0 if none) or a negative FI_E* on a CQ failure. */
int fabric_cq_poll(struct fabric *f, struct fabric_cqe *out, size_t n);

#endif
