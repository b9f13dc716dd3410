/* Plays NCCL against libnccl-net-sumcast.so: N processes, each one node's
 * head rank, dlopen the plugin, exchange listen handles (files in a temp
 * dir stand in for NCCL's bootstrap), connect on one thread while another
 * issues requests, as NCCL's proxy does.
 *
 *   harness p2p   --nranks N [--version 11|8]
 *   harness coll  --nranks N [--naggs M] [--split S] [--version 11|8]
 *                 [--trace]   (SUMCAST_TRACE: each rank checks its trace file)
 *                 [--deterministic]   (SUMCAST_DETERMINISTIC=1, --split 1: sums
 *                 whose rounding depends on the order must equal the rank-order sum)
 *   harness bench --nranks N [--naggs M] [-b BYTES] [-e BYTES] [-f FACTOR] [--type T] [--json]
 *                 [--rounds R] [--time-per-size S]   (ring, agg, auto interleaved)
 *                 [--splits 0,0.25,0.5,0.75,1,auto]   (one variant per split, interleaved)
 *
 * Emulated cluster (bench/cluster/run): with SUMCAST_HARNESS_NETNS=ns0,ns1,...
 * rank r enters network namespace r (setns on /run/netns/<name>) right after
 * the fork, before the plugin is opened, and with SUMCAST_HARNESS_IFACES=
 * ip0,ip1,... binds there (SUMCAST_IFACE). The rendezvous is files in a
 * /tmp dir, which every namespace shares. SUMCAST_HARNESS_NETDEV=eth0: bench
 * rows carry each mode's in-band link rates (the rank's /proc/self/net/dev
 * counters around its timed samples).
 *
 * Exit: 0 pass, 1 fail, 77 skipped (reason on stderr). Every loop is bounded
 * in count and time. bench/allreduce.c builds the bench mode as its own
 * program. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../plugin/nccl_net.h"
#include "reduce.h"
#include "clock.h"
#include "sumcastd_proc.h"

#ifndef HARNESS_PLUGIN_PATH
#define HARNESS_PLUGIN_PATH ""
#endif
#ifndef HARNESS_DAEMON_PATH
#define HARNESS_DAEMON_PATH ""
#endif

#define SKIP 77
#define MAX_RANKS 16
#define MAX_AGGS 8

static struct opts {
	const char *mode, *plugin, *daemon;
	int nranks, naggs, version;
	const char *split;
	size_t min_bytes, max_bytes;
	const char *type;
	const char *aggs; /* given addresses: no daemons started */
	bool json, verbose;
	int timeout_s;
	int key; /* 0: no auth, 1: same key, 2: ranks use another key */
	const char *expect; /* "agg" or "ring": the path connect must choose */
	bool deterministic; /* SUMCAST_DETERMINISTIC=1 and the rank-order check */
	bool trace;         /* SUMCAST_TRACE=<rv_dir>/trace and the trace check */
} opt = { .nranks = 2, .version = 11, .min_bytes = 8, .max_bytes = 256 << 20, .type = "f32",
	  .timeout_s = 240 };

static int my_rank = -1;
static char rv_dir[PATH_MAX];
static int run_gen; /* names of one set of ranks never meet the next set's */
static int log_prefix_ok; /* lines that came through NCCL's logger with our prefix */
/* Which path collnet connect announced (from its log lines). */
static int saw_agg_path, saw_fallback;

#define FAIL(...)                                                                    \
	do {                                                                         \
		fprintf(stderr, "[rank %d] FAIL %s:%d: ", my_rank, __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                        \
		fprintf(stderr, "\n");                                               \
		exit(1);                                                             \
	} while (0)
#define CHECK(cond, ...)                 \
	do {                             \
		if (!(cond))             \
			FAIL(__VA_ARGS__); \
	} while (0)
#define NCHECK(call)                                                        \
	do {                                                                \
		ncclResult_t r_ = (call);                                   \
		if (r_ != ncclSuccess)                                      \
			FAIL("%s returned %d", #call, (int)r_);              \
	} while (0)

static void hlog(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		 const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	(void)flags;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!strncmp(buf, "NET/Sumcast", 11))
		__atomic_fetch_add(&log_prefix_ok, 1, __ATOMIC_RELAXED);
	if (strstr(buf, "aggregators unusable"))
		__atomic_store_n(&saw_fallback, 1, __ATOMIC_RELAXED);
	else if (strstr(buf, " aggregators (") && strstr(buf, "+ ring"))
		__atomic_store_n(&saw_agg_path, 1, __ATOMIC_RELAXED);
	if (level <= NCCL_LOG_WARN || (opt.verbose && level == NCCL_LOG_INFO))
		fprintf(stderr, "[rank %d] %s %s:%d %s\n", my_rank,
			level <= NCCL_LOG_WARN ? "WARN" : "INFO", file, line, buf);
}

/* ---------------- rendezvous (stands in for NCCL's bootstrap) ---------------- */

static void rv_put(const char *name, int rank, const void *buf, size_t len)
{
	char p[PATH_MAX + 64], t[PATH_MAX + 80];
	snprintf(p, sizeof(p), "%s/%d.%s.%d", rv_dir, run_gen, name, rank);
	snprintf(t, sizeof(t), "%s.tmp", p);
	FILE *f = fopen(t, "wb");
	CHECK(f && fwrite(buf, 1, len, f) == len, "rv_put %s: %s", t, strerror(errno));
	fclose(f);
	CHECK(rename(t, p) == 0, "rename %s", p);
}

static void rv_get(const char *name, int rank, void *buf, size_t len)
{
	char p[PATH_MAX + 64];
	double end = (sc_now_ns() / 1e9) + 60;
	snprintf(p, sizeof(p), "%s/%d.%s.%d", rv_dir, run_gen, name, rank);
	for (;;) {
		FILE *f = fopen(p, "rb");
		if (f) {
			size_t n = fread(buf, 1, len, f);
			fclose(f);
			CHECK(n == len, "rv_get %s: %zu of %zu bytes", p, n, len);
			return;
		}
		CHECK((sc_now_ns() / 1e9) < end, "rendezvous: %s did not appear in 60 s", p);
		usleep(1000);
	}
}

static void rv_barrier(const char *name)
{
	char b = 1;
	rv_put(name, my_rank, &b, 1);
	for (int r = 0; r < opt.nranks; r++)
		rv_get(name, r, &b, 1);
}

/* ---------------- emulated cluster: one network namespace per rank ---------------- */

/* The n-th entry of a comma list, or -1. */
static int list_nth(const char *list, int n, char *out, size_t len)
{
	for (int i = 0; list && *list; i++) {
		size_t l = strcspn(list, ",");
		if (i == n) {
			if (!l || l >= len)
				return -1;
			memcpy(out, list, l);
			out[l] = 0;
			return 0;
		}
		list += l;
		if (*list == ',')
			list++;
	}
	return -1;
}

/* Rank r, just forked (one thread, nothing of the plugin or libfabric open
 * yet): enters namespace r of SUMCAST_HARNESS_NETNS and binds to address r
 * of SUMCAST_HARNESS_IFACES. The rendezvous files stay reachable: namespaces
 * share the filesystem (the harness uses no Unix sockets, whose abstract
 * names would be per namespace). */
static void enter_netns(int r)
{
	const char *ns = getenv("SUMCAST_HARNESS_NETNS"), *ifs = getenv("SUMCAST_HARNESS_IFACES");
	char name[256], path[PATH_MAX];

	if (ns && *ns) {
		CHECK(list_nth(ns, r, name, sizeof(name)) == 0,
		      "SUMCAST_HARNESS_NETNS=%s has no entry for rank %d", ns, r);
		snprintf(path, sizeof(path), strchr(name, '/') ? "%s" : "/run/netns/%s", name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
		CHECK(setns(fd, CLONE_NEWNET) == 0, "setns %s: %s", path, strerror(errno));
		close(fd);
	}
	if (ifs && *ifs) {
		CHECK(list_nth(ifs, r, name, sizeof(name)) == 0,
		      "SUMCAST_HARNESS_IFACES=%s has no entry for rank %d", ifs, r);
		setenv("SUMCAST_IFACE", name, 1);
	}
}

/* tx/rx byte counters of SUMCAST_HARNESS_NETDEV in this process's namespace
 * (/proc/self/net/dev follows setns; /sys/class/net would show the namespace
 * sysfs was mounted in). False when unset or not found. */
static bool netdev_bytes(uint64_t *tx, uint64_t *rx)
{
	static int fd = -2;
	const char *dev = getenv("SUMCAST_HARNESS_NETDEV");
	char buf[8192];

	if (!dev || !*dev)
		return false;
	if (fd == -2)
		fd = open("/proc/self/net/dev", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	size_t dl = strlen(dev);
	for (char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		while (*l == ' ')
			l++;
		if (!strncmp(l, dev, dl) && l[dl] == ':') {
			unsigned long long v[9];
			if (sscanf(l + dl + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
				   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) != 9)
				return false;
			*rx = v[0];
			*tx = v[8];
			return true;
		}
	}
	return false;
}

static double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---------------- the plugin, through one version of its ABI ---------------- */

static struct plug {
	void *dl;
	const ncclNet_v11_t *n11;
	const ncclNet_v8_t *n8;
	const ncclCollNet_v11_t *c11;
	const ncclCollNet_v8_t *c8;
	void *nctx, *cctx;
} P;

static void plugin_open(bool coll)
{
	P.dl = dlopen(opt.plugin, RTLD_NOW | RTLD_LOCAL);
	CHECK(P.dl, "dlopen %s: %s", opt.plugin, dlerror());
	if (opt.version == 11) {
		P.n11 = dlsym(P.dl, "ncclNetPlugin_v11");
		P.c11 = dlsym(P.dl, "ncclCollNetPlugin_v11");
		CHECK(P.n11 && P.c11, "v11 symbols missing");
		CHECK(!strcmp(P.n11->name, "Sumcast"), "net name %s", P.n11->name);
		ncclNetCommConfig_t cfg = { -1 };
		NCHECK(P.n11->init(&P.nctx, 0x1234, &cfg, hlog, NULL));
		if (coll)
			NCHECK(P.c11->init(&P.cctx, 0x1234, hlog));
	} else {
		P.n8 = dlsym(P.dl, "ncclNetPlugin_v8");
		P.c8 = dlsym(P.dl, "ncclCollNetPlugin_v8");
		CHECK(P.n8 && P.c8, "v8 symbols missing");
		NCHECK(P.n8->init(hlog));
		if (coll)
			NCHECK(P.c8->init(hlog));
	}
	int ndev = 0;
	NCHECK(opt.version == 11 ? P.n11->devices(&ndev) : P.n8->devices(&ndev));
	CHECK(ndev == 1, "devices: %d", ndev);
	if (opt.version == 11) {
		ncclNetProperties_v11_t p;
		memset(&p, 0xff, sizeof(p));
		NCHECK(P.n11->getProperties(0, &p));
		CHECK(p.name && p.ptrSupport == NCCL_PTR_HOST && p.speed > 0 && p.maxRecvs >= 1 &&
			      p.maxRecvs <= 8 && p.netDeviceType == NCCL_NET_DEVICE_HOST &&
			      p.maxP2pBytes >= (64u << 20) && p.maxCollBytes > 0 && p.regIsGlobal == 0 &&
			      p.maxMultiRequestSize == 1,
		      "v11 properties: name %s ptr %d speed %d maxRecvs %d", p.name, p.ptrSupport,
		      p.speed, p.maxRecvs);
	} else {
		ncclNetProperties_v8_t p;
		NCHECK(P.n8->getProperties(0, &p));
		CHECK(p.name && p.ptrSupport == NCCL_PTR_HOST && p.speed > 0 && p.maxRecvs >= 1,
		      "v8 properties");
	}
}

static int max_recvs(void)
{
	if (opt.version == 11) {
		ncclNetProperties_v11_t p;
		NCHECK(P.n11->getProperties(0, &p));
		return p.maxRecvs;
	}
	ncclNetProperties_v8_t p;
	NCHECK(P.n8->getProperties(0, &p));
	return p.maxRecvs;
}

static void net_listen(void *h, void **lc)
{
	NCHECK(opt.version == 11 ? P.n11->listen(P.nctx, 0, h, lc) : P.n8->listen(0, h, lc));
}
static ncclResult_t net_connect(void *h, void **sc)
{
	ncclNetDeviceHandle_t *dh = NULL;
	return opt.version == 11 ? P.n11->connect(P.nctx, 0, h, sc, &dh) : P.n8->connect(0, h, sc, &dh);
}
static ncclResult_t net_accept(void *lc, void **rc)
{
	ncclNetDeviceHandle_t *dh = NULL;
	return opt.version == 11 ? P.n11->accept(lc, rc, &dh) : P.n8->accept(lc, rc, &dh);
}
static void *net_reg(void *comm, void *p, size_t len)
{
	void *mh = NULL;
	NCHECK(opt.version == 11 ? P.n11->regMr(comm, p, len, NCCL_PTR_HOST, &mh)
				 : P.n8->regMr(comm, p, len, NCCL_PTR_HOST, &mh));
	return mh;
}
static void net_dereg(void *comm, void *mh)
{
	NCHECK(opt.version == 11 ? P.n11->deregMr(comm, mh) : P.n8->deregMr(comm, mh));
}
static void *net_isend(void *sc, void *p, size_t len, int tag, void *mh)
{
	void *req = NULL;
	NCHECK(opt.version == 11 ? P.n11->isend(sc, p, len, tag, mh, NULL, &req)
				 : P.n8->isend(sc, p, (int)len, tag, mh, &req));
	return req;
}
static void *net_irecv(void *rc, int n, void **p, size_t *len, int *tags, void **mh)
{
	void *req = (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION; /* NCCL's hint; not a request */
	if (opt.version == 11) {
		void *ph[8] = { 0 };
		NCHECK(P.n11->irecv(rc, n, p, len, tags, mh, ph, &req));
	} else {
		int l[8];
		for (int i = 0; i < n; i++)
			l[i] = (int)len[i];
		req = NULL;
		NCHECK(P.n8->irecv(rc, n, p, l, tags, mh, &req));
	}
	return req;
}
static int net_test(void *req, int *sizes)
{
	int done = 0;
	NCHECK(opt.version == 11 ? P.n11->test(req, &done, sizes) : P.n8->test(req, &done, sizes));
	return done;
}

/* Tests until done, bounded. */
static void net_wait(void *req, int *sizes, const char *what)
{
	double end = (sc_now_ns() / 1e9) + 60;
	while (!net_test(req, sizes))
		CHECK((sc_now_ns() / 1e9) < end, "%s: not complete after 60 s", what);
}

/* ---------------- p2p mode ---------------- */

struct conn_arg {
	void *handle;
	void *comm;
};

static void *connect_thread(void *a)
{
	struct conn_arg *c = a;
	double end = (sc_now_ns() / 1e9) + 60;
	int tries = 0;
	while (!c->comm) {
		NCHECK(net_connect(c->handle, &c->comm));
		tries++;
		CHECK((sc_now_ns() / 1e9) < end, "connect: no sendComm after 60 s (%d tries)", tries);
	}
	return NULL;
}

static uint8_t pat(int rank, size_t i, unsigned salt)
{
	return (uint8_t)(rank * 131 + i * 7 + (i >> 8) * 13 + salt * 29);
}

static void run_p2p(void)
{
	int N = opt.nranks, next = (my_rank + 1) % N, prev = (my_rank + N - 1) % N;
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE], hn[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL;

	plugin_open(false);
	net_listen(h, &lc);
	rv_put("p2p", my_rank, h, sizeof(h));
	rv_get("p2p", next, hn, sizeof(hn));

	/* Connect on one thread while this one accepts: as NCCL's proxy. */
	struct conn_arg ca = { hn, NULL };
	pthread_t th;
	pthread_create(&th, NULL, connect_thread, &ca);
	void *rc = NULL;
	double end = (sc_now_ns() / 1e9) + 60;
	while (!rc) {
		NCHECK(net_accept(lc, &rc));
		CHECK((sc_now_ns() / 1e9) < end, "accept: no recvComm after 60 s");
	}
	pthread_join(th, NULL);
	void *sc = ca.comm;

	/* Registering a CUDA pointer must fail: we announced host only. */
	void *bad = NULL;
	ncclResult_t br = opt.version == 11 ? P.n11->regMr(sc, h, 64, NCCL_PTR_CUDA, &bad)
					    : P.n8->regMr(sc, h, 64, NCCL_PTR_CUDA, &bad);
	CHECK(br != ncclSuccess, "regMr of NCCL_PTR_CUDA succeeded");

	const size_t big = (64u << 20) + 64;
	uint8_t *sbuf = malloc(big), *rbuf[8];
	CHECK(sbuf, "malloc");
	void *smh = net_reg(sc, sbuf, big), *rmh[8];
	for (int i = 0; i < 8; i++) {
		rbuf[i] = malloc(big);
		CHECK(rbuf[i], "malloc");
		rmh[i] = net_reg(rc, rbuf[i], big);
	}
	unsigned salt = 0;

	/* 1. Sizes 0 .. 64 MiB, each receive buffer 64 bytes larger than the message. */
	static const size_t sizes[] = { 0, 1, 7, 64, 4096, 16385, 24576, 1 << 20, (4 << 20) + 3,
					 16 << 20, 64 << 20 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++, salt++) {
		size_t len = sizes[k];
		if (opt.version == 8 && len > INT_MAX - 64)
			continue;
		for (size_t i = 0; i < len; i++)
			sbuf[i] = pat(my_rank, i, salt);
		memset(rbuf[0], 0xEE, len + 64);
		void *rp[1] = { rbuf[0] };
		size_t rl[1] = { len + 64 };
		int tg[1] = { 7 };
		void *rr = NULL, *sr = NULL;
		double e2 = (sc_now_ns() / 1e9) + 30;
		while (!(rr = net_irecv(rc, 1, rp, rl, tg, &rmh[0])))
			CHECK((sc_now_ns() / 1e9) < e2, "irecv refused for 30 s");
		while (!(sr = net_isend(sc, sbuf, len, 7, smh)))
			CHECK((sc_now_ns() / 1e9) < e2, "isend refused for 30 s");
		int ss[8] = { -1 }, rs[8] = { -1 };
		net_wait(sr, ss, "isend");
		net_wait(rr, rs, "irecv");
		CHECK((size_t)rs[0] == len, "size %zu: receive reported %d bytes", len, rs[0]);
		for (size_t i = 0; i < len; i++)
			CHECK(rbuf[0][i] == pat(prev, i, salt), "size %zu: byte %zu is %u, want %u", len,
			      i, rbuf[0][i], pat(prev, i, salt));
		CHECK(rbuf[0][len] == 0xEE, "size %zu: wrote past the message", len);
	}

	/* 2. Order per tag and tag matching: 8 sends over 3 tags, all outstanding. */
	for (int round = 0; round < 20; round++) {
		void *sr[8], *rr[8];
		uint32_t *sv = (uint32_t *)sbuf;
		for (int i = 0; i < 8; i++) {
			int tag = i % 3;
			void *rp[1] = { rbuf[i] };
			size_t rl[1] = { 4096 };
			double e2 = (sc_now_ns() / 1e9) + 30;
			while (!(rr[i] = net_irecv(rc, 1, rp, rl, &tag, &rmh[i])))
				CHECK((sc_now_ns() / 1e9) < e2, "irecv refused");
		}
		for (int i = 0; i < 8; i++) {
			sv[i * 1024] = (uint32_t)(my_rank << 16 | round << 8 | i);
			double e2 = (sc_now_ns() / 1e9) + 30;
			while (!(sr[i] = net_isend(sc, &sv[i * 1024], 16 + (size_t)i * 100, i % 3, smh)))
				CHECK((sc_now_ns() / 1e9) < e2, "isend refused");
		}
		for (int i = 0; i < 8; i++) {
			int s1[8], s2[8];
			net_wait(sr[i], s1, "isend");
			net_wait(rr[i], s2, "irecv");
			uint32_t want = (uint32_t)(prev << 16 | round << 8 | i);
			CHECK(*(uint32_t *)rbuf[i] == want && s2[0] == 16 + i * 100,
			      "round %d recv %d: got 0x%x (%d bytes), want 0x%x (%d bytes)", round, i,
			      *(uint32_t *)rbuf[i], s2[0], want, 16 + i * 100);
		}
	}

	/* 3. Grouped receive: n = maxRecvs subs with distinct tags, sent in reverse. */
	int n = max_recvs();
	if (n > 1) {
		void *rp[8];
		size_t rl[8];
		int tags[8];
		for (int i = 0; i < n; i++) {
			rp[i] = rbuf[i];
			rl[i] = 1 << 20;
			tags[i] = 100 + i;
		}
		void *rr = NULL, *sr[8];
		double e2 = (sc_now_ns() / 1e9) + 30;
		while (!(rr = net_irecv(rc, n, rp, rl, tags, rmh)))
			CHECK((sc_now_ns() / 1e9) < e2, "grouped irecv refused");
		for (int i = n - 1; i >= 0; i--) {
			memset(sbuf + (size_t)i * (1 << 20), 0x40 + i + my_rank, 1000 + (size_t)i);
			while (!(sr[i] = net_isend(sc, sbuf + (size_t)i * (1 << 20), 1000 + (size_t)i,
						   100 + i, smh)))
				CHECK((sc_now_ns() / 1e9) < e2, "isend refused");
		}
		int rs[8] = { 0 }, s1[8];
		net_wait(rr, rs, "grouped irecv");
		for (int i = 0; i < n; i++) {
			net_wait(sr[i], s1, "isend");
			CHECK(rs[i] == 1000 + i && rbuf[i][999 + i] == (uint8_t)(0x40 + i + prev),
			      "grouped sub %d: %d bytes, byte 0x%x", i, rs[i], rbuf[i][999 + i]);
		}
	}

	/* 4. Streams: 200 messages of 256 KiB, up to 8 outstanding each way. */
	{
		const int total = 200, win = 8;
		const size_t len = 256 << 10;
		void *sr[8] = { 0 }, *rr[8] = { 0 };
		int sent = 0, recvd = 0, sdone = 0, rdone = 0;
		double e2 = (sc_now_ns() / 1e9) + 60;
		while (sdone < total || rdone < total) {
			CHECK((sc_now_ns() / 1e9) < e2, "stream: %d/%d sent, %d/%d received after 60 s", sdone,
			      total, rdone, total);
			if (recvd < total && recvd - rdone < win) {
				void *rp[1] = { rbuf[recvd % win] };
				size_t rl[1] = { len };
				int tg[1] = { 3 };
				void *r = net_irecv(rc, 1, rp, rl, tg, &rmh[recvd % win]);
				if (r)
					rr[recvd++ % win] = r;
			}
			if (sent < total && sent - sdone < win) {
				uint8_t *p = sbuf + (size_t)(sent % win) * len;
				memset(p, (uint8_t)(sent + my_rank), len);
				void *r = net_isend(sc, p, len, 3, smh);
				if (r)
					sr[sent++ % win] = r;
			}
			int s[8];
			if (sdone < sent && net_test(sr[sdone % win], s))
				sdone++;
			if (rdone < recvd && net_test(rr[rdone % win], s)) {
				uint8_t *p = rbuf[rdone % win];
				CHECK(s[0] == (int)len && p[0] == (uint8_t)(rdone + prev) &&
					      p[len - 1] == (uint8_t)(rdone + prev),
				      "stream message %d: %d bytes, byte 0x%x", rdone, s[0], p[0]);
				rdone++;
			}
		}
	}
	rv_barrier("p2p-done");
	net_dereg(sc, smh);
	for (int i = 0; i < 8; i++) {
		net_dereg(rc, rmh[i]);
		free(rbuf[i]);
	}
	free(sbuf);
	if (opt.version == 11) {
		NCHECK(P.n11->closeSend(sc));
		NCHECK(P.n11->closeRecv(rc));
		NCHECK(P.n11->closeListen(lc));
		NCHECK(P.n11->finalize(P.nctx));
	} else {
		NCHECK(P.n8->closeSend(sc));
		NCHECK(P.n8->closeRecv(rc));
		NCHECK(P.n8->closeListen(lc));
	}
	CHECK(log_prefix_ok > 0, "no log line came through NCCL's logger with the NET/Sumcast prefix");
}

/* ---------------- collnet mode ---------------- */

static void *coll_listen(void *h)
{
	void *lc = NULL;
	NCHECK(opt.version == 11 ? P.c11->listen(P.cctx, 0, h, &lc) : P.c8->listen(0, h, &lc));
	return lc;
}

static const char *coll_rv_name = "coll"; /* one name per collnet set up */

struct cconn_arg {
	void **handles;
	void *lc, *cc;
	uint8_t *region;
	size_t region_len;
	void *mh;
	ncclResult_t ret;
};

/* NCCL calls the collnet connect (a blocking collective) and regMr from
 * its proxy service thread; the requests come later from the progress
 * thread. */
static void *coll_connect_thread(void *a)
{
	struct cconn_arg *c = a;
	c->ret = opt.version == 11
		 ? P.c11->connect(c->handles, opt.nranks, my_rank, c->lc, &c->cc)
		 : P.c8->connect(c->handles, opt.nranks, my_rank, c->lc, &c->cc);
	if (c->ret != ncclSuccess || !c->cc)
		return NULL;
	NCHECK(opt.version == 11 ? P.c11->closeListen(c->lc) : P.c8->closeListen(c->lc));
	NCHECK(opt.version == 11 ? P.c11->regMr(c->cc, c->region, c->region_len, NCCL_PTR_HOST, &c->mh)
				 : P.c8->regMr(c->cc, c->region, c->region_len, NCCL_PTR_HOST, &c->mh));
	return NULL;
}

static void *coll_setup(uint8_t *region, size_t region_len, void **mh)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	static uint8_t all[MAX_RANKS][NCCL_NET_HANDLE_MAXSIZE];
	void *handles[MAX_RANKS];

	struct cconn_arg ca = { handles, coll_listen(h), NULL, region, region_len, NULL, 0 };
	rv_put(coll_rv_name, my_rank, h, sizeof(h));
	for (int r = 0; r < opt.nranks; r++) {
		rv_get(coll_rv_name, r, all[r], sizeof(all[r]));
		handles[r] = all[r];
	}
	pthread_t th;
	pthread_create(&th, NULL, coll_connect_thread, &ca);
	pthread_join(th, NULL);
	CHECK(ca.ret == ncclSuccess && ca.cc, "collnet connect returned %d", (int)ca.ret);
	*mh = ca.mh;
	return ca.cc;
}

static size_t type_size(ncclDataType_t t)
{
	static const size_t s[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2 };
	return s[t];
}

/* Requests this rank issued (and their bytes): what its trace must list. */
static uint64_t issued_reqs, issued_bytes;

static void *c_iallreduce(void *cc, void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
			  void *mh)
{
	void *req = NULL;
	NCHECK(opt.version == 11 ? P.c11->iallreduce(cc, s, r, count, t, op, mh, mh, &req)
				 : P.c8->iallreduce(cc, s, r, (int)count, t, op, mh, mh, &req));
	if (req) {
		issued_reqs++;
		issued_bytes += count * type_size(t);
	}
	return req;
}

static int c_test(void *req, int *size)
{
	int done = 0;
	NCHECK(opt.version == 11 ? P.c11->test(req, &done, size) : P.c8->test(req, &done, size));
	return done;
}

static const char *type_name(ncclDataType_t t)
{
	static const char *const n[] = { "i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16" };
	return (unsigned)t < 10 ? n[t] : "?";
}

static const char *op_name(ncclRedOp_t op)
{
	static const char *const n[] = { "sum", "prod", "max", "min" };
	return (unsigned)op < 4 ? n[op] : "?";
}

/* SUMCAST_HARNESS_POLL_US: sleep this long after a test() that found
 * nothing done (default 0: spin, yielding when there are more ranks than 2).
 * On the emulated cluster W ranks and A daemons share 2 cores with the
 * kernel's veth/tbf/TCP work; spinning ranks would starve it. */
static long poll_us(void)
{
	static long v = -1;
	if (v < 0) {
		const char *e = getenv("SUMCAST_HARNESS_POLL_US");
		v = e && atol(e) > 0 ? atol(e) : 0;
	}
	return v;
}

/* NCCL's proxy: chunks of at most 2 MiB, up to 8 outstanding, tested in order. */
static void allreduce_chunked(void *cc, uint8_t *send, uint8_t *recv, size_t count, ncclDataType_t t,
			      ncclRedOp_t op, void *mh)
{
	size_t es = type_size(t), per = (2u << 20) / es, nchunks = (count + per - 1) / per;
	void *reqs[8];
	size_t issued = 0, done = 0;
	double end = (sc_now_ns() / 1e9) + 120;

	if (count == 0)
		return;
	while (done < nchunks) {
		CHECK((sc_now_ns() / 1e9) < end, "allreduce of %zu x %s %s: %zu/%zu chunks after 120 s", count,
		      type_name(t), op_name(op), done, nchunks);
		if (issued < nchunks && issued - done < 8) {
			size_t off = issued * per, n = count - off < per ? count - off : per;
			void *r = c_iallreduce(cc, send + off * es, recv + off * es, n, t, op, mh);
			if (r)
				reqs[issued++ % 8] = r;
		}
		int size = -1;
		if (done < issued && !c_test(reqs[done % 8], &size)) {
			if (poll_us())
				usleep((useconds_t)poll_us());
			else if (opt.nranks > 2)
				sched_yield(); /* more ranks than cores here: let the peers run */
		} else if (done < issued) {
			size_t off = done * per, n = count - off < per ? count - off : per;
			CHECK((size_t)size == n * es, "test size %d, want %zu", size, n * es);
			done++;
		}
	}
}

static bool is_float(ncclDataType_t t)
{
	return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}
static bool is_unsigned(ncclDataType_t t)
{
	return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

/* Inputs are small integers (powers of two for prod) so every order of
 * reduction gives the same exact result: references compare bitwise. */
static int64_t in_val(ncclDataType_t t, ncclRedOp_t op, int rank, size_t i)
{
	if (op == ncclProd) {
		int m = (int)((i + (size_t)rank) % 3);
		return m == 0 ? 2 : m == 1 || is_unsigned(t) ? 1 : -1;
	}
	int64_t v = (int64_t)((i * 7 + (size_t)rank * 3 + 1) % 9);
	return is_unsigned(t) ? v : v - 4;
}

static void put(ncclDataType_t t, void *buf, size_t i, int64_t v)
{
	switch (t) {
	case ncclInt8: case ncclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case ncclInt32: case ncclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case ncclInt64: case ncclUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case ncclFloat16: ((uint16_t *)buf)[i] = sc_f32_to_f16((float)v); break;
	case ncclBfloat16: ((uint16_t *)buf)[i] = sc_f32_to_bf16((float)v); break;
	case ncclFloat32: ((float *)buf)[i] = (float)v; break;
	case ncclFloat64: ((double *)buf)[i] = (double)v; break;
	default: break;
	}
}

static int64_t ref_val(ncclDataType_t t, ncclRedOp_t op, size_t i)
{
	int64_t acc = in_val(t, op, 0, i);
	for (int r = 1; r < opt.nranks; r++) {
		int64_t v = in_val(t, op, r, i);
		switch (op) {
		case ncclSum: acc += v; break;
		case ncclProd: acc *= v; break;
		case ncclMax: acc = v > acc ? v : acc; break;
		default: acc = v < acc ? v : acc; break;
		}
	}
	(void)is_float;
	return acc;
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* An f32 input whose sum rounds differently in different orders: mantissas
 * and exponents spread over 2^-20..2^20, sign by rank and index. */
static float order_val(int rank, size_t i)
{
	uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(rank + 1) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	float m = 1.0f + (float)(h % 8388608) / 8388608.0f;
	int e = (int)((h >> 23) % 41) - 20;
	return ((h >> 40) & 1 ? -1.0f : 1.0f) * ldexpf(m, e);
}

/* SUMCAST_DETERMINISTIC (--deterministic, split 1): every element must be the
 * rank-order sum ((x0 + x1) + x2) + ... in f32, and bf16 the f32 rank-order
 * sum rounded once, however the copies arrived. The f32 case also checks the
 * inputs are order-sensitive at all: the reverse order must differ somewhere,
 * or the check would prove nothing. */
static uint64_t check_rank_order(void *cc, uint8_t *send, uint8_t *recv, size_t half, void *mh,
				 uint64_t hash)
{
	size_t count = half / sizeof(float), differ = 0;
	float *s = (float *)send, *r = (float *)recv;

	for (int pass = 0; pass < 3; pass++) {
		size_t shift = (size_t)pass * 7; /* other inputs each pass */
		for (size_t i = 0; i < count; i++)
			s[i] = order_val(my_rank, i + shift);
		allreduce_chunked(cc, send, recv, count, ncclFloat32, ncclSum, mh);
		for (size_t i = 0; i < count; i++) {
			size_t x = i + shift;
			float fwd = order_val(0, x), rev = order_val(opt.nranks - 1, x);
			for (int k = 1; k < opt.nranks; k++) {
				fwd += order_val(k, x);
				rev += order_val(opt.nranks - 1 - k, x);
			}
			CHECK(memcmp(&r[i], &fwd, sizeof(fwd)) == 0,
			      "deterministic f32 sum, pass %d: element %zu is %a, rank order gives %a", pass, i,
			      (double)r[i], (double)fwd);
			differ += memcmp(&fwd, &rev, sizeof(fwd)) != 0;
		}
		hash = fnv(hash, recv, count * sizeof(float));
	}
	CHECK(differ > 0, "deterministic check: no element's sum depends on the order (inputs useless)");
	count = half / 2;
	uint16_t *s16 = (uint16_t *)send, *r16 = (uint16_t *)recv;
	for (size_t i = 0; i < count; i++)
		s16[i] = sc_f32_to_bf16(order_val(my_rank, i));
	allreduce_chunked(cc, send, recv, count, ncclBfloat16, ncclSum, mh);
	for (size_t i = 0; i < count; i++) {
		float acc = sc_bf16_to_f32(sc_f32_to_bf16(order_val(0, i)));
		for (int k = 1; k < opt.nranks; k++)
			acc += sc_bf16_to_f32(sc_f32_to_bf16(order_val(k, i)));
		uint16_t want = sc_f32_to_bf16(acc);
		CHECK(r16[i] == want, "deterministic bf16 sum: element %zu is 0x%04x, rank order gives 0x%04x",
		      i, r16[i], want);
	}
	if (my_rank == 0)
		fprintf(stderr, "deterministic: %zu f32 elements x 3 and %zu bf16 equal to the rank-order sum "
			"(%zu f32 sums differ in reverse order)\n", half / sizeof(float), count, differ);
	return fnv(hash, recv, count * 2);
}

/* --trace: this rank's file <rv_dir>/trace.<job>.<rank>.jsonl (closed by
 * closeColl) lists every request it issued, in order of completion: one
 * well-formed line each, status ok, bytes adding up, seqs all different. */
static void check_trace(void)
{
	char suffix[32], path[PATH_MAX + 300] = "", line[1024];
	DIR *d = opendir(rv_dir);
	struct dirent *e;
	int files = 0;

	CHECK(d, "opendir %s", rv_dir);
	snprintf(suffix, sizeof(suffix), ".%d.jsonl", my_rank);
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name), k = strlen(suffix);
		if (!strncmp(e->d_name, "trace.", 6) && n > k && !strcmp(e->d_name + n - k, suffix)) {
			snprintf(path, sizeof(path), "%s/%s", rv_dir, e->d_name);
			files++;
		}
	}
	closedir(d);
	CHECK(files == 1, "trace: %d files for rank %d, want 1", files, my_rank);
	FILE *f = fopen(path, "r");
	CHECK(f, "trace: open %s", path);
	uint64_t lines = 0, bytes = 0;
	static uint8_t seen[1 << 17]; /* seq bits: at most 2^20 */
	memset(seen, 0, sizeof(seen));
	while (fgets(line, sizeof(line), f)) {
		unsigned rank = 0, nranks = 0, seq = 0;
		unsigned long long job = 0;
		size_t count = 0, b = 0, ab = 0;
		char type[8] = "", op[8] = "";
		int n = sscanf(line, "{\"job\":\"0x%llx\",\"rank\":%u,\"nranks\":%u,\"seq\":%u,"
			       "\"type\":\"%7[a-z0-9]\",\"op\":\"%7[a-z]\",\"count\":%zu,\"bytes\":%zu,"
			       "\"agg_bytes\":%zu,", &job, &rank, &nranks, &seq, type, op, &count, &b, &ab);
		CHECK(n == 9, "trace line %llu does not parse (%d fields): %s", (unsigned long long)lines + 1, n, line);
		CHECK(rank == (unsigned)my_rank && nranks == (unsigned)opt.nranks && ab <= b && b > 0,
		      "trace line %llu: %s", (unsigned long long)lines + 1, line);
		CHECK(strstr(line, "\"status\":\"ok\"}") && strstr(line, "\"time_us\":"),
		      "trace line %llu: %s", (unsigned long long)lines + 1, line);
		CHECK(!(seen[seq >> 3] & (1u << (seq & 7))), "trace: seq %u twice", seq);
		seen[seq >> 3] |= (uint8_t)(1u << (seq & 7));
		lines++;
		bytes += b;
	}
	fclose(f);
	CHECK(lines == issued_reqs && bytes == issued_bytes,
	      "trace: %llu lines / %llu bytes, issued %llu requests / %llu bytes",
	      (unsigned long long)lines, (unsigned long long)bytes, (unsigned long long)issued_reqs,
	      (unsigned long long)issued_bytes);
	if (my_rank == 0)
		fprintf(stderr, "trace: %llu allreduces, %llu bytes, one line each\n",
			(unsigned long long)lines, (unsigned long long)bytes);
}

static void run_coll(void)
{
	const size_t half = 8u << 20;
	uint8_t *region = aligned_alloc(4096, 2 * half), *ref = malloc(half);
	void *mh = NULL;
	uint64_t hash = 0xcbf29ce484222325ull;

	CHECK(region && ref, "malloc");
	plugin_open(true);
	/* reduceSupport: honest for every (type, op) NCCL asks, Avg included. */
	for (int t = 0; t < 12; t++)
		for (int op = 0; op < 5; op++) {
			int sup = -1;
			NCHECK(opt.version == 11 ? P.c11->reduceSupport(t, op, &sup)
						 : P.c8->reduceSupport(t, op, &sup));
			CHECK(sup == (t < 10 && op < 4), "reduceSupport(%d, %d) = %d", t, op, sup);
		}
	void *cc = coll_setup(region, 2 * half, &mh);
	uint8_t *send = region, *recv = region + half;

	static const size_t counts[] = { 1, 3, 17, 1007, 65549, 524289 };
	int ncases = 0;
	for (int t = 0; t < 10; t++)
		for (int op = 0; op < 4; op++)
			for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
				size_t count = counts[k], es = type_size(t);
				/* The largest count only where it adds coverage. */
				if (count > 100000 && !(op == ncclSum && (t == ncclFloat32 || t == ncclBfloat16 || t == ncclInt8)))
					continue;
				CHECK(count * es <= half, "case too large");
				for (size_t i = 0; i < count; i++) {
					put(t, send, i, in_val(t, op, my_rank, i));
					put(t, ref, i, ref_val(t, op, i));
				}
				memset(recv, 0xA5, count * es + 64);
				allreduce_chunked(cc, send, recv, count, t, op, mh);
				for (size_t i = 0; i < count; i++)
					CHECK(!memcmp(recv + i * es, ref + i * es, es),
					      "%s %s count %zu: element %zu differs from the reference",
					      type_name(t), op_name(op), count, i);
				CHECK(recv[count * es] == 0xA5, "%s %s count %zu: wrote past the end",
				      type_name(t), op_name(op), count);
				hash = fnv(hash, recv, count * es);
				ncases++;
			}
	/* In place (send == recv), as NCCL's user-buffer path may issue. */
	for (size_t i = 0; i < 300001; i++)
		put(ncclFloat32, recv, i, in_val(ncclFloat32, ncclSum, my_rank, i));
	allreduce_chunked(cc, recv, recv, 300001, ncclFloat32, ncclSum, mh);
	for (size_t i = 0; i < 300001; i++) {
		float w = (float)ref_val(ncclFloat32, ncclSum, i);
		CHECK(((float *)recv)[i] == w, "in-place f32 sum: element %zu", i);
	}
	if (opt.deterministic)
		hash = check_rank_order(cc, send, recv, half, mh, hash);
	/* Bitwise equal on every rank. */
	rv_put("hash", my_rank, &hash, sizeof(hash));
	for (int r = 0; r < opt.nranks; r++) {
		uint64_t o;
		rv_get("hash", r, &o, sizeof(o));
		CHECK(o == hash, "results of rank %d differ bitwise from ours", r);
	}
	NCHECK(opt.version == 11 ? P.c11->deregMr(cc, mh) : P.c8->deregMr(cc, mh));
	NCHECK(opt.version == 11 ? P.c11->closeColl(cc) : P.c8->closeColl(cc));
	if (opt.trace)
		check_trace();
	if (opt.version == 11) {
		NCHECK(P.c11->finalize(P.cctx));
		NCHECK(P.n11->finalize(P.nctx));
	}
	if (opt.expect) {
		bool want_agg = !strcmp(opt.expect, "agg");
		CHECK(want_agg ? saw_agg_path && !saw_fallback : saw_fallback && !saw_agg_path,
		      "expected the %s path; connect logged aggregators=%d fallback=%d", opt.expect,
		      saw_agg_path, saw_fallback);
	}
	if (my_rank == 0)
		printf("coll: %d nodes, %d cases passed, results bitwise equal on every node\n",
		       opt.nranks, ncases);
	free(ref);
	free(region);
}

/* ---------------- bench mode ---------------- */

/* The three modes run in one set of processes, interleaved: each rank loads
 * its own copy of the plugin per mode (a copy of the .so under another name
 * is a separate instance with its own settings): ring only (no
 * SUMCAST_AGGREGATORS), aggregators only (SUMCAST_SPLIT=1) and the split
 * (SUMCAST_SPLIT=auto, or --split). For each size, rounds run one sample of
 * every mode, in an order that rotates per round, so load from other
 * processes on the machine hits the three alike. A sample: a 1-element
 * allreduce on the mode's collnet (a barrier, which also wakes the
 * daemons), then k back-to-back allreduces (k = 16 up to 64 KiB, 4 up to
 * 1 MiB, else 1), timed on every rank. A round ends with a max-allreduce of
 * {stop, sample times} over the ring collnet, so all ranks agree on when to
 * stop and each sample's time is the slowest rank's. Reported: the median
 * sample per allreduce (min and mean in JSON). Rounds: at least 5 (3 above
 * 16 MiB), at most --rounds (25), and no new round after --time-per-size
 * seconds (2). */
#include "../../plugin/split.c"

static size_t parse_size(const char *s);

static int parse_type(const char *s, ncclDataType_t *out)
{
	for (int t = 0; t < 10; t++)
		if (!strcmp(s, type_name((ncclDataType_t)t))) {
			*out = (ncclDataType_t)t;
			return 0;
		}
	return -1;
}

#define BENCH_MAX 6
#define BENCH_ROUNDS_MAX 200
/* Modes: ring, agg, auto by default; --variant NAME=SPLIT[@PLUGIN] (repeated)
 * replaces them, e.g. to compare two builds of the plugin in one run, where
 * the machine's load hits both alike. SPLIT 0 means no aggregators. */
static int BENCH_MODES = 3;
static bool bench_default = true;
static const char *bench_names[BENCH_MAX] = { "ring", "agg", "auto" };
static const char *bench_split_env[BENCH_MAX] = { "0", "1", "auto" };
static const char *bench_plugin[BENCH_MAX];
static char *bench_env[BENCH_MAX]; /* "VAR=VAL": set while this variant's plugin initialises */
static int bench_rounds = 25;
static double bench_time_per_size = 2.0, bench_factor = 2.0;

struct bench_inst {
	struct plug p;
	void *cc, *mh;
	bool on;
};

static void bench_open(struct bench_inst *b, int m, uint8_t *region, size_t len)
{
	char so[PATH_MAX + 32], name[32];
	snprintf(so, sizeof(so), "%s/plugin-%s.so", rv_dir, bench_names[m]);
	const char *orig = opt.plugin;
	const char *aggs = getenv("SUMCAST_AGGREGATORS");
	char saved[1024];
	snprintf(saved, sizeof(saved), "%s", aggs ? aggs : "");
	if (!strcmp(bench_split_env[m], "0"))
		unsetenv("SUMCAST_AGGREGATORS");
	setenv("SUMCAST_SPLIT", bench_split_env[m], 1);
	if (bench_env[m])
		putenv(bench_env[m]);
	opt.plugin = so;
	memset(&P, 0, sizeof(P));
	plugin_open(true);
	if (bench_env[m]) {
		char var[128];
		snprintf(var, sizeof(var), "%.*s", (int)strcspn(bench_env[m], "="), bench_env[m]);
		unsetenv(var);
	}
	opt.plugin = orig;
	if (aggs)
		setenv("SUMCAST_AGGREGATORS", saved, 1);
	snprintf(name, sizeof(name), "coll-%s", bench_names[m]);
	coll_rv_name = name;
	b->cc = coll_setup(region, len, &b->mh);
	coll_rv_name = "coll";
	b->p = P;
	b->on = true;
}

static double dmedian(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* What the auto split sends to the aggregators for one message: split.c
 * itself, with the model the plugin builds from the same settings. */
static double bench_lat_us = 10;

static double bench_auto_split(int mode, size_t bytes, int speed_mbps)
{
	if (!opt.naggs)
		return 0;
	double fixed = -1;
	if (split_parse(bench_split_env[mode], &fixed))
		return -1;
	const char *l = getenv("SUMCAST_LINK_GBPS"), *a = getenv("SUMCAST_AGG_GBPS");
	const char *sm = getenv("SUMCAST_SMALL_BYTES"), *e = getenv("SUMCAST_AGG_EFFICIENCY");
	struct split_model m = {
		.fixed = fixed,
		.link_gbps = l && atof(l) > 0 ? atof(l) : speed_mbps / 1000.0,
		.nranks = (uint32_t)opt.nranks,
		.naggs = (uint32_t)opt.naggs,
		.small_bytes = sm ? parse_size(sm) : 64 << 10,
		.lat_us = bench_lat_us,
		.shared_host = split_hosts_local(getenv("SUMCAST_AGGREGATORS")),
	};
	m.agg_gbps = a && atof(a) > 0 ? atof(a) : m.link_gbps;
	m.agg_eff = atof(e && *e ? e : SPLIT_AGG_EFF_DEFAULT);
	return split_fraction(&m, bytes);
}

static void run_bench(void)
{
	ncclDataType_t t = ncclFloat32;
	CHECK(parse_type(opt.type, &t) == 0, "--type %s: one of i8 u8 i32 u32 i64 u64 f16 f32 f64 bf16", opt.type);
	size_t es = type_size(t), half = opt.max_bytes < 64 ? 64 : opt.max_bytes;
	half = (half + 4095) & ~(size_t)4095;
	size_t region_len = 2 * half + 4096; /* + the round barrier's buffers */
	uint8_t *region = aligned_alloc(4096, region_len);
	struct bench_inst inst[BENCH_MAX];
	int N = opt.nranks, speed = 0;
	bool have_aggs = getenv("SUMCAST_AGGREGATORS") && *getenv("SUMCAST_AGGREGATORS");

	CHECK(region, "malloc %zu", region_len);
	memset(region, 0, region_len);
	memset(inst, 0, sizeof(inst));
	for (int m = 0; m < BENCH_MODES; m++) {
		if (strcmp(bench_split_env[m], "0") && !have_aggs)
			continue;
		bench_open(&inst[m], m, region, region_len);
		if (m == 0) {
			ncclNetProperties_v8_t p8;
			ncclNetProperties_v11_t p11;
			if (opt.version == 11) {
				NCHECK(P.n11->getProperties(0, &p11));
				speed = p11.speed;
				bench_lat_us = p11.latency;
			} else {
				NCHECK(P.n8->getProperties(0, &p8));
				speed = p8.speed;
				bench_lat_us = p8.latency;
			}
		}
	}
	uint8_t *send = region, *recv = region + half;
	/* Every rank contributes 1.0: sums stay exact, reductions do real work,
	 * and the first call of every mode and size is checked (sum == N). */
	uint8_t one[8] = { 0 }, want[8] = { 0 };
	bool checked = t == ncclFloat32 || t == ncclBfloat16 || t == ncclFloat16;
	if (checked) {
		put(t, one, 0, 1);
		put(t, want, 0, N);
		for (size_t i = 0; i < half / es; i++)
			memcpy(send + i * es, one, es);
	}
	double *tx = (double *)(region + 2 * half), *rx = tx + 8;
	/* link rates and wrong counts per mode: lt[] max over ranks, ls[] sums */
	double *lt = tx + 16, *lr = tx + 64, *ls = tx + 112, *lsr = tx + 160;
	static double samples[BENCH_MAX][BENCH_ROUNDS_MAX];
	bool have_netdev;
	{
		uint64_t a, b;
		have_netdev = netdev_bytes(&a, &b);
	}

	if (my_rank == 0 && !opt.json) {
		printf("# %d nodes, %d aggregators, provider %s, %s sum, FI_OFI_RXM_EAGER_LIMIT=%s;\n"
		       "# time = median over rounds of one sample per mode (k allreduces back to back,\n"
		       "# slowest rank), modes interleaved\n"
		       "#%11s %11s %5s %5s %3s",
		       N, opt.naggs, getenv("SUMCAST_PROVIDER"), type_name(t),
		       getenv("FI_OFI_RXM_EAGER_LIMIT") ? getenv("FI_OFI_RXM_EAGER_LIMIT") : "(default)",
		       "size", "count", "type", "redop", "k");
		for (int m = 0; m < BENCH_MODES; m++) {
			char h[64];
			snprintf(h, sizeof(h), "%s(us)", bench_names[m]);
			printf(" %10s %7s", h, "busbw");
		}
		if (bench_default)
			printf(" %6s %9s", "split", "auto/best");
		printf("\n");
	}
	for (double fb = (double)opt.min_bytes; fb <= (double)opt.max_bytes; fb *= bench_factor) {
		size_t bytes = (size_t)fb;
		size_t count = bytes / es;
		if (!count)
			continue;
		int k = bytes <= (64 << 10) ? 16 : bytes <= (1 << 20) ? 4 : 1;
		int min_rounds = bytes <= (16 << 20) ? 5 : 3;
		int nr = 0;
		double wrong[BENCH_MAX] = { 0 }, ltime[BENCH_MAX] = { 0 };
		uint64_t ltx[BENCH_MAX] = { 0 }, lrx[BENCH_MAX] = { 0 };
		/* warm-up: every mode once at this size, checked */
		for (int m = 0; m < BENCH_MODES; m++) {
			if (!inst[m].on)
				continue;
			P = inst[m].p;
			if (checked)
				memset(recv, 0xA5, count * es);
			allreduce_chunked(inst[m].cc, send, recv, count, t, ncclSum, inst[m].mh);
			for (size_t i = 0; checked && i < count; i++)
				if (memcmp(recv + i * es, want, es))
					wrong[m]++;
		}
		double tstart = (sc_now_ns() / 1e9), t_start = wall_s();
		for (;;) {
			/* round barrier + agreement to go on */
			P = inst[0].p;
			memset(tx, 0, 8 * sizeof(double));
			tx[0] = nr >= bench_rounds || nr >= BENCH_ROUNDS_MAX ||
				(nr >= min_rounds && (sc_now_ns() / 1e9) - tstart > bench_time_per_size);
			if (nr > 0)
				for (int m = 0; m < BENCH_MODES; m++)
					tx[1 + m] = samples[m][nr - 1];
			allreduce_chunked(inst[0].cc, (uint8_t *)tx, (uint8_t *)rx, 8, ncclFloat64, ncclMax,
					  inst[0].mh);
			if (nr > 0)
				for (int m = 0; m < BENCH_MODES; m++)
					samples[m][nr - 1] = rx[1 + m];
			if (rx[0] > 0)
				break;
			for (int j = 0; j < BENCH_MODES; j++) {
				int m = (j + nr) % BENCH_MODES;
				if (!inst[m].on)
					continue;
				P = inst[m].p;
				allreduce_chunked(inst[m].cc, send, recv, 1, t, ncclSum, inst[m].mh);
				uint64_t tx0 = 0, rx0 = 0, tx1 = 0, rx1 = 0;
				if (have_netdev)
					netdev_bytes(&tx0, &rx0);
				double t0 = (sc_now_ns() / 1e9);
				for (int i = 0; i < k; i++)
					allreduce_chunked(inst[m].cc, send, recv, count, t, ncclSum, inst[m].mh);
				double t1 = (sc_now_ns() / 1e9);
				samples[m][nr] = (t1 - t0) / k * 1e6;
				if (have_netdev && netdev_bytes(&tx1, &rx1)) {
					ltx[m] += tx1 - tx0;
					lrx[m] += rx1 - rx0;
					ltime[m] += t1 - t0;
				}
			}
			nr++;
		}
		double t_end = wall_s();
		/* Per mode: this rank's link rates over its timed samples (Mbit/s);
		 * max and sum over ranks, and the wrong elements of every rank. */
		P = inst[0].p;
		memset(lt, 0, 96 * sizeof(double));
		for (int m = 0; m < BENCH_MODES; m++) {
			double a = ltime[m] > 0 ? ltx[m] * 8 / ltime[m] / 1e6 : 0;
			double b = ltime[m] > 0 ? lrx[m] * 8 / ltime[m] / 1e6 : 0;
			lt[m] = a > b ? a : b;
			lt[BENCH_MAX + m] = a;
			lt[2 * BENCH_MAX + m] = b;
			ls[m] = a;
			ls[BENCH_MAX + m] = b;
			ls[2 * BENCH_MAX + m] = wrong[m];
		}
		allreduce_chunked(inst[0].cc, (uint8_t *)lt, (uint8_t *)lr, 3 * BENCH_MAX, ncclFloat64, ncclMax,
				  inst[0].mh);
		allreduce_chunked(inst[0].cc, (uint8_t *)ls, (uint8_t *)lsr, 3 * BENCH_MAX, ncclFloat64, ncclSum,
				  inst[0].mh);
		if (my_rank != 0)
			continue;
		for (int m = 0; m < BENCH_MODES; m++)
			if (inst[m].on && lsr[2 * BENCH_MAX + m] > 0)
				fprintf(stderr, "WRONG: %s, %zu bytes %s: %.0f elements differ from the sum\n",
					bench_names[m], bytes, type_name(t), lsr[2 * BENCH_MAX + m]);
		double med[BENCH_MAX] = { 0 }, mn[BENCH_MAX] = { 0 }, mean[BENCH_MAX] = { 0 };
		for (int m = 0; m < BENCH_MODES; m++) {
			if (!inst[m].on)
				continue;
			double tmp[BENCH_ROUNDS_MAX];
			for (int i = 0; i < nr; i++) {
				tmp[i] = samples[m][i];
				mean[m] += tmp[i] / nr;
			}
			med[m] = dmedian(tmp, nr);
			mn[m] = tmp[0];
		}
		if (opt.json) {
			for (int m = 0; m < BENCH_MODES; m++) {
				if (!inst[m].on)
					continue;
				double algbw = bytes / med[m] / 1e3, busbw = algbw * 2 * (N - 1) / N;
				printf("{\"bench\":\"allreduce\",\"mode\":\"%s\",\"split\":%.3f,\"nranks\":%d,"
				       "\"naggs\":%d,\"provider\":\"%s\",\"type\":\"%s\",\"op\":\"sum\","
				       "\"bytes\":%zu,\"time_us\":%.2f,\"min_us\":%.2f,\"mean_us\":%.2f,"
				       "\"samples\":%d,\"per_sample\":%d,\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,"
				       "\"t_start\":%.3f,\"t_end\":%.3f",
				       bench_names[m], bench_auto_split(m, bytes, speed), N, opt.naggs,
				       getenv("SUMCAST_PROVIDER"), type_name(t), bytes, med[m], mn[m], mean[m],
				       nr, k, algbw, busbw, t_start, t_end);
				if (checked)
					printf(",\"wrong\":%.0f", lsr[2 * BENCH_MAX + m]);
				if (have_netdev)
					printf(",\"link_tx_mbit\":%.1f,\"link_rx_mbit\":%.1f,\"link_max_mbit\":%.1f",
					       lsr[m] / N, lsr[BENCH_MAX + m] / N, lr[m]);
				printf("}\n");
			}
		} else {
			printf(" %11zu %11zu %5s %5s %3d", bytes, count, type_name(t), "sum", k);
			for (int m = 0; m < BENCH_MODES; m++) {
				if (inst[m].on)
					printf(" %10.1f %7.3f", med[m], bytes / med[m] / 1e3 * 2 * (N - 1) / N);
				else
					printf(" %10s %7s", "-", "-");
			}
			if (bench_default && inst[1].on && inst[2].on) {
				double best = med[0] < med[1] ? med[0] : med[1];
				printf(" %6.3f %9.3f", bench_auto_split(2, bytes, speed), med[2] / best);
			}
			printf("\n");
		}
		fflush(stdout);
	}
	for (int m = BENCH_MODES - 1; m >= 0; m--) {
		if (!inst[m].on)
			continue;
		P = inst[m].p;
		NCHECK(opt.version == 11 ? P.c11->deregMr(inst[m].cc, inst[m].mh)
					 : P.c8->deregMr(inst[m].cc, inst[m].mh));
		NCHECK(opt.version == 11 ? P.c11->closeColl(inst[m].cc) : P.c8->closeColl(inst[m].cc));
	}
	free(region);
}

/* ---------------- processes and daemons ---------------- */

static struct sc_daemon daemons[MAX_AGGS];
static int ndaemons;

static void daemons_stop(void)
{
	sc_daemons_stop(daemons, (size_t)ndaemons, SIGTERM, 3000);
	ndaemons = 0;
}

static void rm_dir(void)
{
	DIR *d = opendir(rv_dir);
	struct dirent *e;
	char p[PATH_MAX + 300];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", rv_dir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(rv_dir);
}

/* Starts M sumcastd on 127.0.0.1 with free ports; returns "host:port,...". */
static int daemons_start(char *aggs, size_t len)
{
	if (!opt.daemon || !*opt.daemon || access(opt.daemon, X_OK)) {
		fprintf(stderr, "SKIP: sumcastd not built (%s)\n", opt.daemon && *opt.daemon ? opt.daemon : "no path");
		return SKIP;
	}
	/* HARNESS_DAEMON_CONF: extra lines for the daemons, e.g.
	 * "[data]\nidle-spin = 1000" (\n as two characters) */
	const char *env = getenv("HARNESS_DAEMON_CONF");
	size_t cap = PATH_MAX + 64 + (env ? strlen(env) + 2 : 0), n = 0;
	char *extra = malloc(cap);
	CHECK(extra, "malloc");
	if (opt.key)
		n += (size_t)snprintf(extra, cap, "[auth]\nkey-file = %s/daemon.key\n", rv_dir);
	for (const char *e = env; e && *e && n < cap - 2; e++) {
		if (e[0] == '\\' && e[1] == 'n') {
			extra[n++] = '\n';
			e++;
		} else {
			extra[n++] = *e;
		}
	}
	if (env)
		extra[n++] = '\n';
	extra[n] = 0;
	aggs[0] = 0;
	for (int i = 0; i < opt.naggs; i++) {
		char name[32];
		snprintf(name, sizeof(name), "agg%d", i);
		struct sc_daemon_opts o = {
			.binary = opt.daemon,
			.provider = "tcp",
			.node = "127.0.0.1",
			.extra = extra,
			.dir = rv_dir,
			.name = name,
			.log = !opt.verbose,
			.timeout_ms = 15000,
		};
		struct sc_daemon *d = &daemons[ndaemons++];
		int rc = sc_daemon_start(d, &o);
		if (rc == SC_DAEMON_EXITED && *d->log) {
			char cmd[PATH_MAX + 64];
			snprintf(cmd, sizeof(cmd), "cat %s >&2", d->log);
			(void)!system(cmd);
		}
		if (rc) {
			free(extra);
			return 1;
		}
		snprintf(aggs + strlen(aggs), len - strlen(aggs), "%s127.0.0.1:%u", i ? "," : "", d->ctl);
	}
	free(extra);
	return 0;
}

/* SIGTERM/SIGINT in the parent: stop the ranks and daemons, remove the
 * rendezvous dir, exit 128 + signal (bench/cluster/run stops us so). */
static volatile sig_atomic_t stop_sig;
static void on_stop(int sig)
{
	stop_sig = sig;
}

static int run_ranks(void (*fn)(void))
{
	pid_t pids[MAX_RANKS];
	int rc = 0;

	fflush(stdout);
	run_gen++;
	for (int r = 0; r < opt.nranks; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			my_rank = r;
			signal(SIGTERM, SIG_DFL);
			signal(SIGINT, SIG_DFL);
			enter_netns(r);
			fn();
			fflush(stdout);
			_exit(0);
		}
	}
	double end = (sc_now_ns() / 1e9) + opt.timeout_s;
	int left = opt.nranks;
	while (left) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p > 0) {
			for (int r = 0; r < opt.nranks; r++)
				if (pids[r] == p) {
					pids[r] = 0;
					left--;
					if (!WIFEXITED(st) || WEXITSTATUS(st)) {
						fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
						rc = rc ? rc : WIFEXITED(st) ? WEXITSTATUS(st) : 1;
					}
				}
			continue;
		}
		if ((sc_now_ns() / 1e9) > end) {
			fprintf(stderr, "timeout after %d s: killing %d ranks\n", opt.timeout_s, left);
			rc = 1;
			break;
		}
		if (rc)
			break; /* one rank failed: the others may wait forever */
		if (stop_sig) {
			fprintf(stderr, "signal %d: stopping %d ranks\n", (int)stop_sig, left);
			rc = 128 + stop_sig;
			break;
		}
		usleep(2000);
	}
	for (int r = 0; r < opt.nranks; r++)
		if (pids[r] > 0) {
			kill(pids[r], SIGKILL);
			waitpid(pids[r], NULL, 0);
		}
	return rc;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s p2p|coll|bench [--nranks N] [--naggs M] [--aggs host:port,...]\n"
		"       [--split auto|F] [--version 11|8] [--plugin PATH] [--daemon PATH]\n"
		"       [-b|--min-bytes B] [-e|--max-bytes B] [--type T] [--json] [--verbose]\n"
		"       [--key same|other] [--expect agg|ring]\n"
		"       bench: [-f|--factor F] [--rounds R] [--time-per-size S]\n"
		"              [--variant NAME=SPLIT[@PLUGIN][%%VAR=VALUE]]... [--splits S,S,...]\n",
		program_invocation_short_name);
	exit(2);
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return (size_t)v;
}

static void self_relative(char *out, size_t len, const char *rel)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		out[0] = 0;
		return;
	}
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	snprintf(out, len, "%s/%s", exe, rel);
}

int harness_main(int argc, char **argv, const char *forced_mode);
int harness_main(int argc, char **argv, const char *forced_mode)
{
	static const struct option lo[] = {
		{ "nranks", 1, 0, 'n' }, { "naggs", 1, 0, 'm' }, { "split", 1, 0, 's' },
		{ "version", 1, 0, 'v' }, { "plugin", 1, 0, 'p' }, { "daemon", 1, 0, 'd' },
		{ "min-bytes", 1, 0, 'b' }, { "max-bytes", 1, 0, 'e' }, { "type", 1, 0, 't' },
		{ "json", 0, 0, 'j' }, { "verbose", 0, 0, 'V' }, { "aggs", 1, 0, 'a' },
		{ "timeout", 1, 0, 'T' }, { "key", 1, 0, 'k' },
		{ "expect", 1, 0, 'x' }, { "rounds", 1, 0, 'R' }, { "time-per-size", 1, 0, 'S' },
		{ "factor", 1, 0, 'f' }, { "variant", 1, 0, 'W' }, { "splits", 1, 0, 'L' },
		{ "deterministic", 0, 0, 'D' }, { "trace", 0, 0, 'r' }, { 0, 0, 0, 0 }
	};
	static char plugin_buf[PATH_MAX + 64], daemon_buf[PATH_MAX + 64], aggs[1024];
	bool timeout_given = false;
	int c;

	opt.mode = forced_mode;
	if (!forced_mode) {
		if (argc < 2)
			usage();
		opt.mode = argv[1];
		argv++;
		argc--;
	}
	opt.plugin = HARNESS_PLUGIN_PATH;
	opt.daemon = HARNESS_DAEMON_PATH;
	while ((c = getopt_long(argc, argv, "n:m:s:v:p:d:b:e:t:jVa:T:k:x:R:S:f:W:L:Dr", lo, NULL)) != -1) {
		switch (c) {
		case 'n': opt.nranks = atoi(optarg); break;
		case 'm': opt.naggs = atoi(optarg); break;
		case 's': opt.split = optarg; break;
		case 'v': opt.version = atoi(optarg); break;
		case 'p': opt.plugin = optarg; break;
		case 'd': opt.daemon = optarg; break;
		case 'b': opt.min_bytes = parse_size(optarg); break;
		case 'e': opt.max_bytes = parse_size(optarg); break;
		case 't': opt.type = optarg; break;
		case 'j': opt.json = true; break;
		case 'V': opt.verbose = true; break;
		case 'a': opt.aggs = optarg; break;
		case 'T': opt.timeout_s = atoi(optarg); timeout_given = true; break;
		case 'R': bench_rounds = atoi(optarg); break;
		case 'S': bench_time_per_size = atof(optarg); break;
		case 'f': bench_factor = atof(optarg); break;
		case 'W': {
			if (bench_default) {
				bench_default = false;
				BENCH_MODES = 0;
			}
			char *v = strdup(optarg), *eq = strchr(v, '='), *at = eq ? strchr(eq, '@') : NULL;
			char *pct = eq ? strchr(eq, '%') : NULL;
			if (!eq || BENCH_MODES == BENCH_MAX)
				usage();
			if (pct) {
				*pct = 0;
				bench_env[BENCH_MODES] = pct + 1;
			}
			*eq = 0;
			if (at)
				*at = 0;
			bench_names[BENCH_MODES] = v;
			bench_split_env[BENCH_MODES] = eq + 1;
			bench_plugin[BENCH_MODES++] = at ? at + 1 : NULL;
			break;
		}
		case 'L': {
			/* --splits 0,0.25,...,auto: one variant per split, named
			 * "x<split>" ("auto" for auto), interleaved as --variant */
			char *list = strdup(optarg), *save = NULL;
			bench_default = false;
			BENCH_MODES = 0;
			for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
				double f;
				if (BENCH_MODES == BENCH_MAX || split_parse(e, &f))
					usage();
				char *name = malloc(strlen(e) + 2);
				sprintf(name, "%s%s", f < 0 ? "" : "x", f < 0 ? "auto" : e);
				bench_names[BENCH_MODES] = name;
				bench_split_env[BENCH_MODES] = f < 0 ? "auto" : e;
				bench_plugin[BENCH_MODES++] = NULL;
			}
			if (!BENCH_MODES)
				usage();
			break;
		}
		case 'x':
			opt.expect = optarg;
			if (strcmp(optarg, "agg") && strcmp(optarg, "ring"))
				usage();
			break;
		case 'D': opt.deterministic = true; break;
		case 'r': opt.trace = true; break;
		case 'k':
			opt.key = !strcmp(optarg, "same") ? 1 : !strcmp(optarg, "other") ? 2 : -1;
			if (opt.key < 0)
				usage();
			break;
		default: usage();
		}
	}
	if (opt.nranks < 1 || opt.nranks > MAX_RANKS || opt.naggs < 0 || opt.naggs > MAX_AGGS ||
	    (opt.version != 11 && opt.version != 8) || opt.min_bytes < 1 || opt.min_bytes > opt.max_bytes ||
	    bench_rounds < 1 || bench_rounds > BENCH_ROUNDS_MAX || !(bench_factor > 1))
		usage();
	if (!*opt.plugin) {
		self_relative(plugin_buf, sizeof(plugin_buf), "../plugin/libnccl-net-sumcast.so");
		opt.plugin = plugin_buf;
	}
	if (!*opt.daemon) {
		self_relative(daemon_buf, sizeof(daemon_buf), "../daemon/sumcastd");
		opt.daemon = daemon_buf;
	}
	if (access(opt.plugin, R_OK)) {
		fprintf(stderr, "SKIP: plugin %s: %s\n", opt.plugin, strerror(errno));
		return SKIP;
	}
	snprintf(rv_dir, sizeof(rv_dir), "/tmp/sumcast-harness-XXXXXX");
	CHECK(mkdtemp(rv_dir), "mkdtemp");
	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	setenv("SUMCAST_PROVIDER", "tcp", 0);
	setenv("SUMCAST_IFACE", "127.0.0.1", 0);
	setenv("SUMCAST_CONNECT_TIMEOUT", "10s", 0);
	if (opt.split)
		setenv("SUMCAST_SPLIT", opt.split, 1);
	if (opt.trace) {
		char tp[PATH_MAX + 16];
		snprintf(tp, sizeof(tp), "%s/trace", rv_dir);
		setenv("SUMCAST_TRACE", tp, 1);
	}
	if (opt.deterministic) {
		/* The rank-order check holds for the aggregators' part only. */
		CHECK(opt.split && !strcmp(opt.split, "1") && opt.naggs > 0,
		      "--deterministic wants --split 1 and --naggs M");
		setenv("SUMCAST_DETERMINISTIC", "1", 1);
	}
	if (!strcmp(opt.mode, "bench") && !timeout_given)
		opt.timeout_s = 3600; /* every size is bounded by --time-per-size */
	if (opt.verbose)
		setenv("SUMCAST_LOG_LEVEL", "info", 0);

	if (opt.key) {
		/* Daemons read daemon.key, ranks rank.key: the same bytes, or
		 * (--key other) a different key, which every daemon must refuse
		 * and every node must answer by falling back to the ring. The
		 * rank's copy ends in a newline, as `echo` writes it. */
		char path[PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/daemon.key", rv_dir);
		FILE *kf = fopen(path, "w");
		CHECK(kf && fputs("harness-shared-key-0123456789", kf) >= 0, "%s", path);
		fclose(kf);
		snprintf(path, sizeof(path), "%s/rank.key", rv_dir);
		kf = fopen(path, "w");
		CHECK(kf && fputs(opt.key == 1 ? "harness-shared-key-0123456789\n" : "another-key-9876543210\n",
				  kf) >= 0, "%s", path);
		fclose(kf);
		setenv("SUMCAST_KEY_FILE", path, 1);
	}
	int rc = 0;
	if (opt.aggs) {
		/* Given addresses: no daemons started, but the tables, the JSON
		 * rows and the auto-split column count them. */
		opt.naggs = 1;
		for (const char *p = opt.aggs; *p; p++)
			opt.naggs += *p == ',';
		setenv("SUMCAST_AGGREGATORS", opt.aggs, 1);
	} else if (opt.naggs > 0) {
		rc = daemons_start(aggs, sizeof(aggs));
		if (rc)
			goto out;
		setenv("SUMCAST_AGGREGATORS", aggs, 1);
	} else {
		unsetenv("SUMCAST_AGGREGATORS");
	}
	if (!strcmp(opt.mode, "p2p")) {
		rc = run_ranks(run_p2p);
	} else if (!strcmp(opt.mode, "coll")) {
		rc = run_ranks(run_coll);
	} else if (!strcmp(opt.mode, "bench")) {
		/* One copy of the plugin per mode (bench_open): the same file
		 * twice would be one instance with one set of settings. */
		if (opt.split && bench_default)
			bench_split_env[2] = opt.split;
		for (int m = 0; m < BENCH_MODES && !rc; m++) {
			char cmd[3 * PATH_MAX];
			snprintf(cmd, sizeof(cmd), "cp '%s' '%s/plugin-%s.so'",
				 bench_plugin[m] ? bench_plugin[m] : opt.plugin, rv_dir, bench_names[m]);
			if (system(cmd)) {
				fprintf(stderr, "%s failed\n", cmd);
				rc = 1;
			}
		}
		if (!rc)
			rc = run_ranks(run_bench);
	} else {
		usage();
	}
out:
	daemons_stop();
	rm_dir();
	return rc;
}

#ifndef HARNESS_NO_MAIN
int main(int argc, char **argv)
{
	return harness_main(argc, argv, NULL);
}
#endif
