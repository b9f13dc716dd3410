/* Daemon ingest bandwidth and CPU against a two-way raw stream.
 *
 * For each provider: starts one sumcastd (ephemeral ports, port-file), forks
 * `ranks` client processes that allreduce `bytes` of f32 sum through it, and
 * reports the daemon's ingest rate = ranks x bytes / time of one allreduce
 * (time = slowest rank, from a barrier to completion). In the same run a
 * raw server process (the daemon's stand-in, no reduce) and `ranks` sender
 * processes move the same bytes over the same fabric wrapper both ways:
 * each sender streams `bytes` in chunk-sized tagged messages with the same
 * window, and the server sends each message's bytes back to its sender
 * (N in, N out, as the daemon takes N contributions and sends N results);
 * raw rate = ranks x bytes / time (slowest sender, from a barrier through
 * the server to its last echo). Both rates are the best of --reps
 * repetitions (after one warm-up); the median is printed beside them.
 * ratio = ingest / raw (best / best); paired = the median of the
 * repetitions' own ratios (each ingest repetition with the raw one beside
 * it, the same moment's load). The CPU columns are the daemon's and the server's
 * utime + stime (/proc/<pid>/stat, every thread) over the timed
 * repetitions per GB of input, and that times 12.5 GB/s: the cores one
 * such process needs per 100 Gb/s of input; the last two columns are the
 * ranks' and the raw senders' CPU together per GB of input.
 * The repetitions are interleaved (ingest, raw, raw, ingest, ...): every
 * process stays up for the whole run and the parent starts each repetition
 * through a pipe, the others blocked in read() meanwhile, so on a shared
 * host both rates see the same background load.
 * Waiting processes (ranks, raw senders) sched_yield() when a poll found
 * nothing (--spin: never yield, and the server never sleeps; --sleep US:
 * usleep(US) instead of yielding): this host
 * has fewer cores than busy processes, and a spinning peer otherwise holds
 * the core the copy needs for a whole time slice. The raw server waits as
 * the daemon's data thread does at its defaults (see raw_server).
 * --pin A,B: the daemon's data thread ([data] cpus) and the raw server on
 * CPU A, the ranks and the raw senders on CPU B. The processes are named
 * (comm) ingest-rank, raw-server and raw-sender for a system-wide perf.
 *
 *   ingest [--provider shm|tcp|both] [--ranks 4] [--bytes 64M] [--reps 5]
 *          [--chunk 256K] [--window 8] [--threads 1] [--pin A,B] [--json]
 *
 * The daemon is $SUMCASTD, else ../daemon/sumcastd next to this binary. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "fabric.h"
#include "log.h"
#include "ranks.h"
#include "sumcastd_proc.h"
#include "clock.h"

#define MAX_RANKS 32
#define MAX_REPS 50

static struct {
	int ranks, reps, threads;
	size_t bytes;
	uint32_t chunk, window;
	bool json, yield;
	int sleep_us;
	int pin_d, pin_r; /* -1: not pinned */
	char dir[128];
	char daemon[PATH_MAX];
} g = { .ranks = 4, .reps = 5, .threads = 1, .bytes = 64u << 20, .chunk = 256 * 1024,
	.window = 8, .yield = true, .pin_d = -1, .pin_r = -1 };

static void pin_self(int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "ingest: pinning to CPU %d: %s\n", cpu, strerror(errno));
}

__attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "ingest: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return (size_t)v;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Reads exactly n bytes from fd within ms; 0 or -1. */
static int read_full(int fd, void *buf, size_t n, int ms)
{
	uint8_t *p = buf;
	uint64_t until = sc_now_ns() + (uint64_t)ms * 1000000ull;
	while (n) {
		struct pollfd pf = { fd, POLLIN, 0 };
		if (sc_now_ns() > until)
			return -1;
		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t r = read(fd, p, n);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* A rank or raw sender whose poll found nothing: --sleep's usleep, else
 * sched_yield() unless --spin. */
static void wait_pause(void)
{
	if (g.sleep_us)
		usleep((useconds_t)g.sleep_us);
	else if (g.yield)
		sched_yield();
}

/* ---- daemon ---- */

static void daemon_start(struct sc_daemon *d, const char *prov)
{
	char name[64], extra[256];
	int n = snprintf(extra, sizeof(extra),
			 "[data]\nthreads = %d\n[job]\ntimeout = 30s\n[log]\nlevel = warn\n", g.threads);
	if (g.pin_d >= 0)
		snprintf(extra + n, sizeof(extra) - (size_t)n, "[data]\ncpus = %d\n", g.pin_d);
	snprintf(name, sizeof(name), "ingest-%s", prov);
	struct sc_daemon_opts o = {
		.binary = g.daemon,
		.provider = prov,
		.node = "127.0.0.1",
		.listen = "127.0.0.1",
		.extra = extra,
		.dir = g.dir,
		.name = name,
		.pdeathsig = true, /* never outlive the bench */
		.timeout_ms = 10000,
	};
	if (sc_daemon_start(d, &o)) {
		sc_daemon_cleanup(d, false);
		die("sumcastd (%s) did not start", g.daemon);
	}
}

static void daemon_stop(struct sc_daemon *d)
{
	sc_daemon_stop(d, SIGTERM, 5000);
	sc_daemon_cleanup(d, false);
}

/* ---- allreduce ranks ---- */

static int wait_req(struct client *c, struct client_req *r)
{
	uint64_t until = sc_now_ns() + 60000000000ull;
	int done = 0, rc;
	do {
		rc = client_test(c, r, &done);
		if (done)
			return rc;
		/* More processes than cores here: let the daemon run. */
		wait_pause();
	} while (sc_now_ns() < until);
	return -ETIME;
}

/* One rank: per rep (the first is the warm-up) waits for the parent's byte
 * on go_fd, then a 1-element barrier and the timed allreduce; writes the
 * rep's time (seconds, a double) to fd, nothing on error. */
static int rank_main(const char *prov, uint16_t port, uint32_t rank, int go_fd, int fd)
{
	char agg[64];
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", port);
	const char *aggs[] = { agg };
	struct client_params p = {
		.provider = prov, .node = "127.0.0.1", .job_id = 0xbe7c, .rank = rank,
		.nranks = (uint32_t)g.ranks, .chunk_bytes = g.chunk, .window = g.window,
		.timeout_ms = 30000, .naggs = 1, .aggs = aggs,
	};
	struct client *c;
	int rc = client_create(&p, &c);
	if (rc)
		return 1;
	while ((rc = client_connect_poll(c)) == -EAGAIN)
		;
	if (rc) {
		fprintf(stderr, "rank %u: %s\n", rank, client_error(c));
		return 1;
	}
	size_t n = g.bytes / 4;
	float *sb = malloc(g.bytes), *rb = malloc(g.bytes);
	struct fabric_mr smr = { 0 }, rmr = { 0 };
	if (!sb || !rb || client_mr_reg(c, sb, g.bytes, &smr) || client_mr_reg(c, rb, g.bytes, &rmr))
		return 1;
	for (size_t i = 0; i < n; i++)
		sb[i] = (float)(i % 7);
	memset(rb, 0, g.bytes);
	/* the barrier's 1-element allreduce: registered too (FI_MR_LOCAL) */
	static float one = 1, sum;
	struct fabric_mr omr, umr;
	if (client_mr_reg(c, &one, sizeof(one), &omr) || client_mr_reg(c, &sum, sizeof(sum), &umr))
		return 1;
	for (int rep = 0; rep <= g.reps && !rc; rep++) {
		struct client_req *r;
		char go;
		if (read_full(go_fd, &go, 1, 600000))
			return 1;
		rc = client_allreduce(c, &one, &sum, 1, SC_F32, SC_OP_SUM, omr.desc, umr.desc, &r);
		if (!rc)
			rc = wait_req(c, r);
		uint64_t t0 = sc_now_ns();
		if (!rc)
			rc = client_allreduce(c, sb, rb, n, SC_F32, SC_OP_SUM, smr.desc, rmr.desc, &r);
		if (!rc)
			rc = wait_req(c, r);
		double t = (double)(sc_now_ns() - t0) / 1e9;
		if (rc)
			break;
		if (rb[7] != (float)(7 % 7 * g.ranks) || rb[n - 1] != (float)((n - 1) % 7 * g.ranks)) {
			fprintf(stderr, "rank %u: wrong result\n", rank);
			return 1;
		}
		(void)!write(fd, &t, sizeof(t));
	}
	if (rc) {
		fprintf(stderr, "rank %u: allreduce: %s (%s)\n", rank, strerror(-rc), client_error(c));
		return 1;
	}
	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
	fabric_mr_dereg(&omr);
	fabric_mr_dereg(&umr);
	client_destroy(c);
	return 0;
}

/* How the parent runs a repetition in g.ranks processes: process r waits
 * for a byte on go[r] before each repetition and writes its time to
 * res[r]. */
struct reps {
	int go[MAX_RANKS][2], res[MAX_RANKS][2];
};

static void reps_open(struct reps *p)
{
	for (int r = 0; r < g.ranks; r++)
		if (pipe(p->go[r]) || pipe(p->res[r]))
			die("pipe: %s", strerror(errno));
}

/* In process r after the fork: its own two ends only. */
static void reps_child(struct reps *p, int r)
{
	for (int k = 0; k < g.ranks; k++) {
		close(p->go[k][1]);
		close(p->res[k][0]);
		if (k != r) {
			close(p->go[k][0]);
			close(p->res[k][1]);
		}
	}
}

/* In the parent after the forks: the processes' ends closed. */
static void reps_parent(struct reps *p)
{
	for (int r = 0; r < g.ranks; r++) {
		close(p->go[r][0]);
		close(p->res[r][1]);
	}
}

static void reps_close(struct reps *p)
{
	for (int r = 0; r < g.ranks; r++) {
		close(p->go[r][1]);
		close(p->res[r][0]);
	}
}

/* Starts one repetition in every process and takes their times: the
 * slowest, or -1 with *silent the process that reported nothing (-1: a
 * start failed). */
static double reps_slowest(const struct reps *p, int *silent)
{
	double t = 0;
	*silent = -1;
	for (int r = 0; r < g.ranks; r++)
		if (write(p->go[r][1], "g", 1) != 1)
			return -1;
	for (int r = 0; r < g.ranks; r++) {
		double tr;
		if (read_full(p->res[r][0], &tr, sizeof(tr), 120000)) {
			*silent = r;
			return -1;
		}
		if (tr > t)
			t = tr;
	}
	return t;
}

/* The ingest side: the daemon and its ranks, up for the whole run. */
struct ingest {
	struct sc_daemon daemon;
	struct sc_ranks ranks;
	const char *prov;
	struct reps reps;
};

/* A forked rank keeps its own two pipe ends only. */
static int ingest_rank(int r, void *arg)
{
	struct ingest *in = arg;

	reps_child(&in->reps, r);
	prctl(PR_SET_NAME, "ingest-rank");
	pin_self(g.pin_r);
	return rank_main(in->prov, in->daemon.ctl, (uint32_t)r, in->reps.go[r][0], in->reps.res[r][1]);
}

static void ingest_start(struct ingest *in, const char *prov)
{
	daemon_start(&in->daemon, prov);
	in->prov = prov;
	reps_open(&in->reps);
	int rc = sc_ranks_start(&in->ranks, g.ranks, ingest_rank, in, true);
	if (rc)
		die("fork: %s", strerror(-rc));
	reps_parent(&in->reps);
}

/* One repetition: the time of the slowest rank, or a negative number. */
static double ingest_rep(struct ingest *in, const char *prov)
{
	int silent;
	double t = reps_slowest(&in->reps, &silent);
	if (silent >= 0)
		fprintf(stderr, "ingest: rank %d of the %s allreduce reported nothing\n", silent, prov);
	return t;
}

static void ingest_stop(struct ingest *in, bool failed)
{
	reps_close(&in->reps);
	if (failed)
		sc_ranks_kill(&in->ranks);
	else
		sc_ranks_wait(&in->ranks, 0, false, NULL, NULL, NULL);
	daemon_stop(&in->daemon);
}

/* ---- two-way raw stream ---- */

/* The daemon's job without the reduce: N senders stream chunk-sized tagged
 * messages to one server, which sends each message's bytes back to its
 * sender from the buffer it arrived in (N in, N out, as the daemon takes N
 * contributions and sends N results). The same chunk and window as the
 * ranks: a sender issues chunk c (echo receive posted first, then the send)
 * once both operations of chunk c - window completed, the client
 * library's credit rule. Before each repetition a 1-element barrier
 * through the server, as the ranks' barrier allreduce. The server holds
 * two buffers per sender and slot (the daemon: the rank's buffer and the
 * slot's accumulator), so chunk c + window can land while c is still
 * being sent back, and waits as the daemon's data thread does when idle:
 * idle-spin 50 us of sched_yield(), then idle-sleep 100 us between polls
 * (shm) or blocking on the completion queue (tcp, idle-wait). */

enum { RAW_DATA = 1, RAW_ECHO, RAW_BAR, RAW_BAR_ECHO };
#define RAW_IDLE_SPIN_NS 50000ull
#define RAW_IDLE_SLEEP_NS 100000L

static uint64_t raw_tag(unsigned kind, uint32_t sender, uint32_t slot)
{
	return (uint64_t)kind << 56 | (uint64_t)sender << 24 | slot;
}

struct raw_op {
	struct fabric_op op;
	uint32_t sender, slot;
	uint8_t kind, buf; /* RAW_*; the server's buffer 0 or 1 */
	bool send;
};

/* The server's state of one sender's slot. */
struct raw_sslot {
	struct raw_op rop[2], sop[2];
	int8_t posted;   /* the buffer its receive is posted into, -1: none */
	bool sending[2];
	bool want_recv;  /* a receive to post once a buffer is free */
	bool want_send[2]; /* refused -FI_EAGAIN: retried */
	uint32_t len[2];
};

struct raw_srv {
	struct fabric *f;
	struct fabric_mr mr;
	uint8_t *buf;
	fi_addr_t peer[MAX_RANKS];
	struct raw_sslot *ss; /* [sender][slot] */
	struct raw_op brop[MAX_RANKS], bsop[MAX_RANKS];
	uint64_t *bar_in, *bar_out; /* 8-byte barrier buffers, after the slots' in buf */
	bool bar_recv_want[MAX_RANKS], bar_send_want[MAX_RANKS];
	int pending;
	size_t nbar, nbar_sent, echoed; /* over the whole run */
};

/* Buffer b of a slot neither sent from nor waiting to be. */
static bool raw_sfree(const struct raw_sslot *x, int b)
{
	return !x->sending[b] && !x->want_send[b];
}

static uint8_t *raw_sbuf(struct raw_srv *v, uint32_t s, uint32_t slot, int b)
{
	return v->buf + (((size_t)s * g.window + slot) * 2 + (size_t)b) * g.chunk;
}

/* Post (or queue for retry) the receive of sender s's slot into a free buffer. */
static int raw_srv_recv(struct raw_srv *v, uint32_t s, uint32_t slot)
{
	struct raw_sslot *x = &v->ss[s * g.window + slot];
	int b = raw_sfree(x, 0) ? 0 : raw_sfree(x, 1) ? 1 : -1;
	x->want_recv = false;
	if (b < 0) {
		x->want_recv = true; /* posted when a send completes */
		return 0;
	}
	struct raw_op *o = &x->rop[b];
	*o = (struct raw_op){ .sender = s, .slot = slot, .kind = RAW_DATA, .buf = (uint8_t)b };
	int rc = fabric_trecv(v->f, raw_sbuf(v, s, slot, b), g.chunk, v->mr.desc, v->peer[s],
			      raw_tag(RAW_DATA, s, slot), 0, &o->op);
	if (rc == -FI_EAGAIN) {
		x->want_recv = true;
		v->pending++;
		return 0;
	}
	if (!rc)
		x->posted = (int8_t)b;
	return rc;
}

static int raw_srv_send(struct raw_srv *v, uint32_t s, uint32_t slot, int b)
{
	struct raw_sslot *x = &v->ss[s * g.window + slot];
	struct raw_op *o = &x->sop[b];
	*o = (struct raw_op){ .sender = s, .slot = slot, .kind = RAW_ECHO, .buf = (uint8_t)b, .send = true };
	x->want_send[b] = false;
	int rc = fabric_tsend(v->f, raw_sbuf(v, s, slot, b), x->len[b], v->mr.desc, v->peer[s],
			      raw_tag(RAW_ECHO, s, slot), 0, &o->op);
	if (rc == -FI_EAGAIN) {
		x->want_send[b] = true;
		v->pending++;
		return 0;
	}
	if (!rc)
		x->sending[b] = true;
	return rc;
}

static int raw_srv_bar_recv(struct raw_srv *v, uint32_t s)
{
	v->brop[s] = (struct raw_op){ .sender = s, .kind = RAW_BAR };
	v->bar_recv_want[s] = false;
	int rc = fabric_trecv(v->f, &v->bar_in[s], sizeof(v->bar_in[s]), v->mr.desc, v->peer[s],
			      raw_tag(RAW_BAR, s, 0), 0, &v->brop[s].op);
	if (rc == -FI_EAGAIN) {
		v->bar_recv_want[s] = true;
		v->pending++;
		return 0;
	}
	return rc;
}

static int raw_srv_bar_send(struct raw_srv *v, uint32_t s)
{
	v->bsop[s] = (struct raw_op){ .sender = s, .kind = RAW_BAR_ECHO, .send = true };
	v->bar_send_want[s] = false;
	v->bar_out[s] = (uint64_t)g.ranks;
	int rc = fabric_tsend(v->f, &v->bar_out[s], sizeof(v->bar_out[s]), v->mr.desc, v->peer[s],
			      raw_tag(RAW_BAR_ECHO, s, 0), 0, &v->bsop[s].op);
	if (rc == -FI_EAGAIN) {
		v->bar_send_want[s] = true;
		v->pending++;
		return 0;
	}
	return rc;
}

/* Posts refused -FI_EAGAIN, once each. */
static int raw_srv_retry(struct raw_srv *v)
{
	int rc = 0;
	v->pending = 0;
	for (uint32_t s = 0; s < (uint32_t)g.ranks && !rc; s++) {
		if (v->bar_recv_want[s])
			rc = raw_srv_bar_recv(v, s);
		if (!rc && v->bar_send_want[s])
			rc = raw_srv_bar_send(v, s);
		for (uint32_t k = 0; k < g.window && !rc; k++) {
			struct raw_sslot *x = &v->ss[s * g.window + k];
			for (int b = 0; b < 2 && !rc; b++)
				if (x->want_send[b])
					rc = raw_srv_send(v, s, k, b);
			if (!rc && x->want_recv && x->posted < 0 && (raw_sfree(x, 0) || raw_sfree(x, 1)))
				rc = raw_srv_recv(v, s, k);
		}
	}
	return rc;
}

static int raw_srv_cqe(struct raw_srv *v, const struct fabric_cqe *e)
{
	struct raw_op *o = container_of(e->op, struct raw_op, op);
	if (e->err)
		return e->err;
	uint32_t s = o->sender;
	struct raw_sslot *x = &v->ss[s * g.window + o->slot];
	switch (o->kind) {
	case RAW_BAR:
		if (++v->nbar % g.ranks == 0)
			for (uint32_t k = 0; k < (uint32_t)g.ranks; k++) {
				int rc = raw_srv_bar_send(v, k);
				if (rc)
					return rc;
			}
		return raw_srv_bar_recv(v, s); /* the next repetition's */
	case RAW_BAR_ECHO:
		v->nbar_sent++;
		return 0;
	case RAW_DATA: {
		int b = o->buf, rc;
		x->posted = -1;
		x->len[b] = (uint32_t)e->len;
		rc = raw_srv_send(v, s, o->slot, b);
		return rc ? rc : raw_srv_recv(v, s, o->slot);
	}
	case RAW_ECHO:
		x->sending[o->buf] = false;
		v->echoed++;
		if (x->want_recv && x->posted < 0)
			return raw_srv_recv(v, s, o->slot);
		return 0;
	default:
		return -FI_EINVAL;
	}
}

/* The server: per repetition waits for the parent's byte on go_fd, then
 * answers the barrier and sends back every sender's nchunks messages. */
static int raw_server(const char *prov, int addr_fd, int peers_fd, int go_fd)
{
	struct fabric_params fp = { .provider = prov, .node = "127.0.0.1", .wait = true };
	struct raw_srv v = { 0 };
	if (fabric_open(&fp, &v.f))
		return 1;
	bool block = v.f->wait_fd >= 0 && strcmp(fabric_provider(v.f), "shm");
	if (write(addr_fd, &v.f->addrlen, sizeof(v.f->addrlen)) < 0 ||
	    write(addr_fd, v.f->addr, v.f->addrlen) < 0)
		return 1;
	for (int s = 0; s < g.ranks; s++) {
		size_t alen;
		uint8_t addr[FABRIC_ADDR_MAX];
		if (read_full(peers_fd, &alen, sizeof(alen), 30000) || alen > sizeof(addr) ||
		    read_full(peers_fd, addr, alen, 10000) || fabric_av_insert(v.f, addr, alen, &v.peer[s]))
			return 1;
	}
	size_t slots = (size_t)g.ranks * g.window * 2 * g.chunk;
	size_t bytes = slots + 2 * (size_t)g.ranks * sizeof(uint64_t);
	v.buf = malloc(bytes);
	v.ss = calloc((size_t)g.ranks * g.window, sizeof(*v.ss));
	if (!v.buf || !v.ss || fabric_mr_reg(v.f, v.buf, bytes, &v.mr))
		return 1;
	v.bar_in = (uint64_t *)(v.buf + slots); /* chunk % 8 == 0: aligned */
	v.bar_out = v.bar_in + g.ranks;
	for (uint32_t s = 0; s < (uint32_t)g.ranks; s++) {
		if (raw_srv_bar_recv(&v, s))
			return 1;
		for (uint32_t k = 0; k < g.window; k++) {
			v.ss[s * g.window + k].posted = -1;
			if (raw_srv_recv(&v, s, k))
				return 1;
		}
	}
	size_t nchunks = (g.bytes + g.chunk - 1) / g.chunk;
	for (int rep = 0; rep <= g.reps; rep++) {
		char go;
		if (read_full(go_fd, &go, 1, 600000))
			return 1;
		/* Counted over the run, not per repetition: a sender that got
		 * its last echo may start the next barrier before the send's
		 * completion is read here. */
		uint64_t until = sc_now_ns() + 60000000000ull, idle_since = 0;
		size_t bar_due = (size_t)(rep + 1) * (size_t)g.ranks;
		while (v.nbar_sent < bar_due || v.echoed < bar_due * nchunks) {
			struct fabric_cqe ev[64];
			int n = fabric_cq_poll(v.f, ev, 64);
			if (n < 0)
				return 1;
			for (int i = 0; i < n; i++) {
				int rc = raw_srv_cqe(&v, &ev[i]);
				if (rc) {
					fprintf(stderr, "ingest: raw server: %s\n", fi_strerror(-rc));
					return 1;
				}
			}
			if (v.pending && raw_srv_retry(&v))
				return 1;
			uint64_t now = sc_now_ns();
			if (now > until) {
				fprintf(stderr, "ingest: raw server: repetition %d not done in 60 s\n", rep);
				return 1;
			}
			if (n > 0 || !g.yield) {
				idle_since = 0;
				continue;
			}
			if (!idle_since)
				idle_since = now;
			if (now - idle_since < RAW_IDLE_SPIN_NS || v.pending) {
				sched_yield();
			} else if (block) {
				if (fabric_wait(v.f, -1, 1) < 0)
					return 1;
			} else {
				struct timespec ts = { 0, RAW_IDLE_SLEEP_NS };
				nanosleep(&ts, NULL);
			}
		}
	}
	/* Let the senders' last completions come before the endpoint goes. */
	usleep(100000);
	fabric_mr_dereg(&v.mr);
	fabric_close(v.f);
	return 0;
}

/* A sender's state. */
struct raw_snd {
	struct fabric *f;
	struct fabric_mr smr, rmr;
	uint8_t *sb, *rb;
	fi_addr_t srv;
	struct raw_op *ops; /* [slot][send, echo receive] */
	uint32_t *busy;     /* per slot: operations outstanding */
	struct raw_op bop[2];
	uint64_t *bar_out, *bar_in; /* after the data in sb's registration */
	int bar_left;
	size_t echoes;
};

static int raw_snd_cqe(struct raw_snd *x, const struct fabric_cqe *e)
{
	struct raw_op *o = container_of(e->op, struct raw_op, op);
	if (e->err)
		return e->err;
	if (o->kind == RAW_BAR || o->kind == RAW_BAR_ECHO) {
		x->bar_left--;
		return 0;
	}
	if (o->kind == RAW_ECHO && !o->send) {
		if (e->len != g.chunk && e->len != g.bytes % g.chunk)
			return -FI_ETRUNC;
		x->echoes++;
	}
	x->busy[o->slot]--;
	return 0;
}

static int raw_snd_poll(struct raw_snd *x, int *got)
{
	struct fabric_cqe ev[64];
	int n = fabric_cq_poll(x->f, ev, 64);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		int rc = raw_snd_cqe(x, &ev[i]);
		if (rc)
			return rc;
	}
	*got = n;
	return 0;
}

/* One repetition: the barrier, then every chunk sent and echoed; writes the
 * time from the barrier's end to the last echo (a double) to fd. */
static int raw_snd_rep(struct raw_snd *x, uint32_t me, size_t nchunks, int fd)
{
	uint64_t until = sc_now_ns() + 60000000000ull;
	int got, rc;
	/* the barrier: echo receive first, then the send */
	x->bar_left = 2;
	x->bop[0] = (struct raw_op){ .sender = me, .kind = RAW_BAR_ECHO };
	x->bop[1] = (struct raw_op){ .sender = me, .kind = RAW_BAR, .send = true };
	while ((rc = fabric_trecv(x->f, x->bar_in, sizeof(*x->bar_in), x->smr.desc, x->srv,
				  raw_tag(RAW_BAR_ECHO, me, 0), 0, &x->bop[0].op)) == -FI_EAGAIN)
		if ((rc = raw_snd_poll(x, &got)))
			return rc;
	*x->bar_out = me;
	while (!rc && (rc = fabric_tsend(x->f, x->bar_out, sizeof(*x->bar_out), x->smr.desc, x->srv,
					  raw_tag(RAW_BAR, me, 0), 0, &x->bop[1].op)) == -FI_EAGAIN)
		rc = raw_snd_poll(x, &got);
	while (!rc && x->bar_left && sc_now_ns() < until)
		if (!(rc = raw_snd_poll(x, &got)) && !got)
			wait_pause();
	if (rc || x->bar_left)
		return rc ? rc : -FI_ETIMEDOUT;
	uint64_t t0 = sc_now_ns();
	size_t next = 0;
	bool send_due = false; /* chunk `next`'s receive is posted, its send not yet */
	x->echoes = 0;
	while (x->echoes < nchunks && !rc && sc_now_ns() < until) {
		while (next < nchunks) {
			uint32_t k = (uint32_t)(next % g.window);
			size_t off = next * g.chunk;
			size_t len = g.bytes - off < g.chunk ? g.bytes - off : g.chunk;
			struct raw_op *so = &x->ops[2 * k], *ro = &x->ops[2 * k + 1];
			if (!send_due) {
				if (x->busy[k])
					break;
				*ro = (struct raw_op){ .sender = me, .slot = k, .kind = RAW_ECHO };
				memset(x->rb + off, 0xee, 8); /* overwritten by the echo */
				rc = fabric_trecv(x->f, x->rb + off, len, x->rmr.desc, x->srv,
						  raw_tag(RAW_ECHO, me, k), 0, &ro->op);
				if (rc == -FI_EAGAIN) {
					rc = 0;
					break;
				}
				if (rc)
					break;
				x->busy[k]++;
				send_due = true;
			}
			*so = (struct raw_op){ .sender = me, .slot = k, .kind = RAW_DATA, .send = true };
			rc = fabric_tsend(x->f, x->sb + off, len, x->smr.desc, x->srv, raw_tag(RAW_DATA, me, k),
					  0, &so->op);
			if (rc == -FI_EAGAIN) {
				rc = 0;
				break;
			}
			if (rc)
				break;
			x->busy[k]++;
			send_due = false;
			next++;
		}
		if (!rc && !(rc = raw_snd_poll(x, &got)) && !got)
			wait_pause();
	}
	/* the last sends' completions */
	for (uint32_t k = 0; k < g.window && !rc; k++)
		while (!rc && x->busy[k] && sc_now_ns() < until)
			rc = raw_snd_poll(x, &got);
	double t = (double)(sc_now_ns() - t0) / 1e9;
	if (rc)
		return rc;
	if (x->echoes < nchunks)
		return -FI_ETIMEDOUT;
	for (size_t c = 0; c < nchunks; c++)
		if (memcmp(x->rb + c * g.chunk, x->sb + c * g.chunk, 8)) {
			fprintf(stderr, "ingest: raw sender %u: chunk %zu came back wrong\n", me, c);
			return -FI_EIO;
		}
	(void)!write(fd, &t, sizeof(t));
	return 0;
}

/* A sender: hands its address to the parent, takes the server's, then per
 * repetition waits for the parent's byte on go_fd. */
static int raw_sender(const char *prov, uint32_t me, int addr_fd, int srv_fd, int go_fd, int fd)
{
	struct fabric_params fp = { .provider = prov, .node = "127.0.0.1" };
	struct raw_snd x = { 0 };
	size_t alen;
	uint8_t addr[FABRIC_ADDR_MAX];
	if (fabric_open(&fp, &x.f))
		return 1;
	if (write(addr_fd, &x.f->addrlen, sizeof(x.f->addrlen)) < 0 ||
	    write(addr_fd, x.f->addr, x.f->addrlen) < 0)
		return 1;
	if (read_full(srv_fd, &alen, sizeof(alen), 30000) || alen > sizeof(addr) ||
	    read_full(srv_fd, addr, alen, 10000) || fabric_av_insert(x.f, addr, alen, &x.srv))
		return 1;
	size_t boff = (g.bytes + 7) & ~(size_t)7, pad = boff - g.bytes + 2 * sizeof(uint64_t);
	x.sb = malloc(g.bytes + pad);
	x.rb = malloc(g.bytes);
	x.ops = calloc(2 * (size_t)g.window, sizeof(*x.ops));
	x.busy = calloc(g.window, sizeof(*x.busy));
	if (!x.sb || !x.rb || !x.ops || !x.busy || fabric_mr_reg(x.f, x.sb, g.bytes + pad, &x.smr) ||
	    fabric_mr_reg(x.f, x.rb, g.bytes, &x.rmr))
		return 1;
	x.bar_out = (uint64_t *)(x.sb + boff);
	x.bar_in = x.bar_out + 1;
	for (size_t i = 0; i < g.bytes; i++)
		x.sb[i] = (uint8_t)(i * 7 + me);
	memset(x.rb, 0, g.bytes);
	size_t nchunks = (g.bytes + g.chunk - 1) / g.chunk;
	for (int rep = 0; rep <= g.reps; rep++) {
		char go;
		if (read_full(go_fd, &go, 1, 600000))
			return 1;
		int rc = raw_snd_rep(&x, me, nchunks, fd);
		if (rc) {
			fprintf(stderr, "ingest: raw sender %u: %s\n", me, fi_strerror(-rc));
			return 1;
		}
	}
	usleep(100000);
	fabric_mr_dereg(&x.smr);
	fabric_mr_dereg(&x.rmr);
	fabric_close(x.f);
	return 0;
}

/* The raw side: one server and `ranks` senders, up for the whole run. */
struct raw {
	pid_t srv;
	struct sc_ranks snd;
	const char *prov;
	int srv_go;
	int ap[MAX_RANKS][2], sp[MAX_RANKS][2];
	struct reps reps;
};

static int raw_sender_main(int r, void *arg)
{
	struct raw *w = arg;
	for (int k = 0; k < g.ranks; k++) {
		close(w->ap[k][0]);
		close(w->sp[k][1]);
		if (k != r) {
			close(w->ap[k][1]);
			close(w->sp[k][0]);
		}
	}
	reps_child(&w->reps, r);
	close(w->srv_go);
	prctl(PR_SET_NAME, "raw-sender");
	pin_self(g.pin_r);
	return raw_sender(w->prov, (uint32_t)r, w->ap[r][1], w->sp[r][0], w->reps.go[r][0],
			  w->reps.res[r][1]);
}

/* Reads one length-prefixed address from fd and writes it to each of out[0..n). */
static int raw_pass_addr(int fd, const int *out, int n)
{
	size_t alen;
	uint8_t addr[FABRIC_ADDR_MAX];
	if (read_full(fd, &alen, sizeof(alen), 30000) || alen > sizeof(addr) ||
	    read_full(fd, addr, alen, 10000))
		return -1;
	for (int i = 0; i < n; i++)
		if (write(out[i], &alen, sizeof(alen)) != sizeof(alen) ||
		    write(out[i], addr, alen) != (ssize_t)alen)
			return -1;
	return 0;
}

static void raw_start(struct raw *w, const char *prov)
{
	int addr_p[2], peers_p[2], go_p[2];
	w->prov = prov;
	if (pipe(addr_p) || pipe(peers_p) || pipe(go_p))
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	w->srv = fork();
	if (w->srv < 0)
		die("fork: %s", strerror(errno));
	if (w->srv == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(addr_p[0]);
		close(peers_p[1]);
		close(go_p[1]);
		prctl(PR_SET_NAME, "raw-server");
		pin_self(g.pin_d);
		_exit(raw_server(prov, addr_p[1], peers_p[0], go_p[0]));
	}
	close(addr_p[1]);
	close(peers_p[0]);
	close(go_p[0]);
	w->srv_go = go_p[1];
	for (int r = 0; r < g.ranks; r++)
		if (pipe(w->ap[r]) || pipe(w->sp[r]))
			die("pipe: %s", strerror(errno));
	reps_open(&w->reps);
	int rc = sc_ranks_start(&w->snd, g.ranks, raw_sender_main, w, true);
	if (rc)
		die("fork: %s", strerror(-rc));
	int to_srv[1] = { peers_p[1] }, to_snd[MAX_RANKS];
	for (int r = 0; r < g.ranks; r++) {
		close(w->ap[r][1]);
		close(w->sp[r][0]);
		to_snd[r] = w->sp[r][1];
	}
	reps_parent(&w->reps);
	if (raw_pass_addr(addr_p[0], to_snd, g.ranks))
		die("the raw %s server gave no address", prov);
	for (int r = 0; r < g.ranks; r++)
		if (raw_pass_addr(w->ap[r][0], to_srv, 1))
			die("raw %s sender %d gave no address", prov, r);
	close(addr_p[0]);
	close(peers_p[1]);
	for (int r = 0; r < g.ranks; r++) {
		close(w->ap[r][0]);
		close(w->sp[r][1]);
	}
}

/* One repetition: the time of the slowest sender, or a negative number. */
static double raw_rep(struct raw *w, const char *prov)
{
	int silent;
	if (write(w->srv_go, "g", 1) != 1)
		return -1;
	double t = reps_slowest(&w->reps, &silent);
	if (silent >= 0)
		fprintf(stderr, "ingest: raw %s sender %d reported nothing\n", prov, silent);
	return t;
}

static void raw_stop(struct raw *w, bool failed)
{
	int st;
	close(w->srv_go);
	reps_close(&w->reps);
	if (failed) {
		sc_ranks_kill(&w->snd);
		kill(w->srv, SIGKILL);
	} else {
		sc_ranks_wait(&w->snd, 30000, false, NULL, NULL, NULL);
		sc_ranks_kill(&w->snd);
	}
	waitpid(w->srv, &st, 0);
	sc_shm_sweep(w->srv);
}

/* ---- CPU time of a process ---- */

/* utime + stime of pid in seconds (/proc/<pid>/stat), -1 when unreadable. */
static double proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* fields after the command's closing parenthesis: state is field 3,
	 * utime 14, stime 15 */
	char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A repetition of either side with the CPU time its daemon or server took
 * meanwhile (seconds, in *cpu; 0 when /proc could not be read). */
/* The CPU seconds of the ranks' (or senders') processes together. */
static double ranks_cpu_s(const struct sc_ranks *rs)
{
	double sum = 0;
	for (int r = 0; r < rs->n; r++) {
		double c = proc_cpu_s(rs->pid[r]);
		if (c < 0)
			return -1;
		sum += c;
	}
	return sum;
}

/* A repetition of either side with the CPU seconds its daemon or server
 * (cpu[0]) and its ranks or senders (cpu[1]) took meanwhile (0 when /proc
 * could not be read). */
static double ingest_rep_cpu(struct ingest *in, const char *prov, double cpu[2])
{
	double c0 = proc_cpu_s(in->daemon.pid), r0 = ranks_cpu_s(&in->ranks);
	double t = ingest_rep(in, prov);
	double c1 = proc_cpu_s(in->daemon.pid), r1 = ranks_cpu_s(&in->ranks);
	cpu[0] = c0 < 0 || c1 < 0 ? 0 : c1 - c0;
	cpu[1] = r0 < 0 || r1 < 0 ? 0 : r1 - r0;
	return t;
}

static double raw_rep_cpu(struct raw *w, const char *prov, double cpu[2])
{
	double c0 = proc_cpu_s(w->srv), r0 = ranks_cpu_s(&w->snd);
	double t = raw_rep(w, prov);
	double c1 = proc_cpu_s(w->srv), r1 = ranks_cpu_s(&w->snd);
	cpu[0] = c0 < 0 || c1 < 0 ? 0 : c1 - c0;
	cpu[1] = r0 < 0 || r1 < 0 ? 0 : r1 - r0;
	return t;
}

static void usage(void)
{
	fprintf(stderr, "usage: ingest [--provider shm|tcp|both] [--ranks N] [--bytes B] "
			"[--reps R] [--chunk B] [--window W] [--threads T] [--pin A,B] [--spin] [--sleep US] "
			"[--json]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' }, { "ranks", required_argument, NULL, 'n' },
		{ "bytes", required_argument, NULL, 'b' },    { "reps", required_argument, NULL, 'r' },
		{ "chunk", required_argument, NULL, 'c' },    { "window", required_argument, NULL, 'w' },
		{ "threads", required_argument, NULL, 't' },  { "json", no_argument, NULL, 'j' },
		{ "spin", no_argument, NULL, 's' },           { "sleep", required_argument, NULL, 'z' },
		{ "pin", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	const char *which = "both";
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'p': which = optarg; break;
		case 'n': g.ranks = atoi(optarg); break;
		case 'b': g.bytes = parse_size(optarg); break;
		case 'r': g.reps = atoi(optarg); break;
		case 'c': g.chunk = (uint32_t)parse_size(optarg); break;
		case 'w': g.window = (uint32_t)atoi(optarg); break;
		case 't': g.threads = atoi(optarg); break;
		case 'j': g.json = true; break;
		case 's': g.yield = false; break;
		case 'z': g.sleep_us = atoi(optarg); break;
		case 'P':
			if (sscanf(optarg, "%d,%d", &g.pin_d, &g.pin_r) != 2 || g.pin_d < 0 || g.pin_r < 0)
				usage();
			break;
		default: usage();
		}
	}
	if (g.ranks < 1 || g.ranks > MAX_RANKS || g.reps < 1 || g.reps > MAX_REPS ||
	    g.bytes < 4 || g.bytes % 4 || !g.chunk || g.chunk % 8 || !g.window)
		usage();
	if (getenv("SUMCASTD")) {
		snprintf(g.daemon, sizeof(g.daemon), "%s", getenv("SUMCASTD"));
	} else {
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			die("readlink /proc/self/exe: %s", strerror(errno));
		self[n] = 0;
		snprintf(g.daemon, sizeof(g.daemon), "%s/../daemon/sumcastd", dirname(self));
	}
	if (access(g.daemon, X_OK))
		die("no sumcastd at %s (set SUMCASTD)", g.daemon);
	snprintf(g.dir, sizeof(g.dir), "/tmp/sumcast-ingest-XXXXXX");
	if (!mkdtemp(g.dir))
		die("mkdtemp: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	sc_log_set_level(SC_LOG_WARN);

	const char *provs[2];
	int nprov = 0;
	if (!strcmp(which, "both") || !strcmp(which, "shm"))
		provs[nprov++] = "shm";
	if (!strcmp(which, "both") || !strcmp(which, "tcp"))
		provs[nprov++] = "tcp";
	if (!nprov)
		usage();

	if (!g.json)
		printf("# ingest = %d ranks x bytes / allreduce time (slowest rank); raw = the same "
		       "bytes in and back out through one server process (no reduce), same chunk (%u) "
		       "and window (%u); GB/s = 1e9 B/s of input, best of %d (median in brackets); "
		       "CPU = the daemon's / the server's utime + stime per GB of input over the timed "
		       "repetitions, cores = CPU s/GB x 12.5 (cores per 100 Gb/s of input); "
		       "ranks / senders = the CPU of the %d ranks / raw senders together per GB; "
		       "paired = median over the repetitions of ingest / raw of the same repetition\n"
		       "%-6s %6s %10s %16s %16s %7s %6s %8s %6s %8s %6s %8s %8s\n",
		       g.ranks, g.chunk, g.window, g.reps, g.ranks, "prov", "ranks", "bytes",
		       "ingest GB/s", "raw GB/s", "ratio", "paired", "cpu s/GB", "cores", "raw s/GB",
		       "cores", "ranks", "senders");
	int rc = 0;
	for (int i = 0; i < nprov; i++) {
		double ta[MAX_REPS], tr[MAX_REPS], ga[MAX_REPS], gr[MAX_REPS];
		/* CPU seconds over the timed repetitions: daemon, ranks, server, senders */
		double cpu_a = 0, cpu_ar = 0, cpu_r = 0, cpu_rs = 0;
		struct ingest in;
		struct raw w;
		bool failed = false;
		ingest_start(&in, provs[i]);
		raw_start(&w, provs[i]);
		/* Rep 0 warms both up; then ingest, raw / raw, ingest / ... */
		for (int rep = 0; rep <= g.reps && !failed; rep++) {
			double a, b, ca[2] = { 0, 0 }, cr[2] = { 0, 0 };
			if (rep % 2) {
				a = ingest_rep_cpu(&in, provs[i], ca);
				b = a < 0 ? -1 : raw_rep_cpu(&w, provs[i], cr);
			} else {
				b = raw_rep_cpu(&w, provs[i], cr);
				a = b < 0 ? -1 : ingest_rep_cpu(&in, provs[i], ca);
			}
			failed = a < 0 || b < 0;
			if (rep && !failed) {
				ta[rep - 1] = a;
				tr[rep - 1] = b;
				cpu_a += ca[0];
				cpu_ar += ca[1];
				cpu_r += cr[0];
				cpu_rs += cr[1];
			}
		}
		raw_stop(&w, failed);
		ingest_stop(&in, failed);
		if (failed) {
			rc = 1;
			continue;
		}
		double in_gb = (double)g.ranks * (double)g.bytes / 1e9; /* per repetition */
		double pr[MAX_REPS]; /* each repetition's pair: ingest / raw of the same moment */
		for (int k = 0; k < g.reps; k++) {
			ga[k] = in_gb / ta[k];
			gr[k] = in_gb / tr[k];
			pr[k] = tr[k] / ta[k];
		}
		qsort(pr, (size_t)g.reps, sizeof(double), cmp_d);
		double pair_med = pr[g.reps / 2];
		double gb = in_gb * g.reps;
		double spg_a = cpu_a / gb, spg_r = cpu_r / gb, spg_ar = cpu_ar / gb, spg_rs = cpu_rs / gb;
		qsort(ga, (size_t)g.reps, sizeof(double), cmp_d);
		qsort(gr, (size_t)g.reps, sizeof(double), cmp_d);
		double best_a = ga[g.reps - 1], best_r = gr[g.reps - 1];
		double med_a = ga[g.reps / 2], med_r = gr[g.reps / 2];
		if (g.json)
			printf("{\"bench\":\"ingest\",\"provider\":\"%s\",\"nranks\":%d,\"bytes\":%zu,"
			       "\"chunk\":%u,\"window\":%u,\"threads\":%d,\"reps\":%d,\"stat\":\"best\","
			       "\"gbps\":%.3f,\"raw_gbps\":%.3f,\"ratio\":%.3f,\"gbps_median\":%.3f,"
			       "\"raw_gbps_median\":%.3f,\"raw\":\"two-way\",\"cpu_s_per_gb\":%.4f,"
			       "\"cores_per_100g\":%.3f,\"raw_cpu_s_per_gb\":%.4f,"
			       "\"raw_cores_per_100g\":%.3f,\"ranks_cpu_s_per_gb\":%.4f,"
			       "\"raw_senders_cpu_s_per_gb\":%.4f,\"ratio_paired_median\":%.3f}\n",
			       provs[i], g.ranks, g.bytes, g.chunk, g.window, g.threads, g.reps, best_a,
			       best_r, best_a / best_r, med_a, med_r, spg_a, spg_a * 12.5, spg_r,
			       spg_r * 12.5, spg_ar, spg_rs, pair_med);
		else
			printf("%-6s %6d %10zu %7.2f (%6.2f) %7.2f (%6.2f) %7.2f %6.2f %8.3f %6.2f %8.3f "
			       "%6.2f %8.3f %8.3f\n",
			       provs[i], g.ranks, g.bytes, best_a, med_a, best_r, med_r, best_a / best_r,
			       pair_med, spg_a, spg_a * 12.5, spg_r, spg_r * 12.5, spg_ar, spg_rs);
		fflush(stdout);
	}
	rmdir(g.dir);
	return rc;
}
