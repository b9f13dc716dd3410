/* Daemon ingest bandwidth against the raw fabric it runs on.
 *
 * For each provider: starts one sumcastd (ephemeral ports, port-file), forks
 * `ranks` client processes that allreduce `bytes` of f32 sum through it, and
 * reports the daemon's ingest rate = ranks x bytes / time of one allreduce
 * (time = slowest rank, from a barrier to completion). In the same run two
 * processes stream `bytes` over the same fabric wrapper, in chunk-sized
 * tagged messages with the same window, one sender to one receiver: that is
 * the raw rate. Both rates are the best of --reps repetitions (after one
 * warm-up); the median is printed beside them. ratio = ingest / raw.
 * The repetitions are interleaved (ingest, raw, raw, ingest, ...): every
 * process stays up for the whole run and the parent starts each repetition
 * through a pipe, the others blocked in read() meanwhile, so on a shared
 * host both rates see the same background load.
 * Waiting processes (ranks, raw sender and receiver) sched_yield() when a
 * poll found nothing (--spin: never yield): this host has fewer cores than
 * busy processes, and a spinning peer otherwise holds the core the copy
 * needs for a whole time slice.
 * --pin A,B: the daemon's data thread ([data] cpus) and the raw receiver on
 * CPU A, the ranks and the raw sender on CPU B.
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
		if (g.sleep_us)
			usleep((useconds_t)g.sleep_us);
		else if (g.yield)
			sched_yield();
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
	for (int rep = 0; rep <= g.reps && !rc; rep++) {
		struct client_req *r;
		float one = 1, sum;
		char go;
		if (read_full(go_fd, &go, 1, 600000))
			return 1;
		rc = client_allreduce(c, &one, &sum, 1, SC_F32, SC_OP_SUM, NULL, NULL, &r);
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
	client_destroy(c);
	return 0;
}

/* The ingest side: the daemon and its ranks, up for the whole run. Rank
 * r waits for a byte on go[r] (from gp[r]) before each repetition and
 * writes its time to res[r] (from rp[r]). */
struct ingest {
	struct sc_daemon daemon;
	struct sc_ranks ranks;
	const char *prov;
	int gp[MAX_RANKS][2], rp[MAX_RANKS][2];
	int go[MAX_RANKS], res[MAX_RANKS];
};

/* A forked rank keeps its own two pipe ends only. */
static int ingest_rank(int r, void *arg)
{
	struct ingest *in = arg;

	for (int k = 0; k < g.ranks; k++) {
		close(in->gp[k][1]);
		close(in->rp[k][0]);
		if (k != r) {
			close(in->gp[k][0]);
			close(in->rp[k][1]);
		}
	}
	pin_self(g.pin_r);
	return rank_main(in->prov, in->daemon.ctl, (uint32_t)r, in->gp[r][0], in->rp[r][1]);
}

static void ingest_start(struct ingest *in, const char *prov)
{
	daemon_start(&in->daemon, prov);
	in->prov = prov;
	for (int r = 0; r < g.ranks; r++)
		if (pipe(in->gp[r]) || pipe(in->rp[r]))
			die("pipe: %s", strerror(errno));
	int rc = sc_ranks_start(&in->ranks, g.ranks, ingest_rank, in, true);
	if (rc)
		die("fork: %s", strerror(-rc));
	for (int r = 0; r < g.ranks; r++) {
		close(in->gp[r][0]);
		close(in->rp[r][1]);
		in->go[r] = in->gp[r][1];
		in->res[r] = in->rp[r][0];
	}
}

/* One repetition: the time of the slowest rank, or a negative number. */
static double ingest_rep(struct ingest *in, const char *prov)
{
	double t = 0;
	for (int r = 0; r < g.ranks; r++)
		if (write(in->go[r], "g", 1) != 1)
			return -1;
	for (int r = 0; r < g.ranks; r++) {
		double tr;
		if (read_full(in->res[r], &tr, sizeof(tr), 120000)) {
			fprintf(stderr, "ingest: rank %d of the %s allreduce reported nothing\n", r, prov);
			return -1;
		}
		if (tr > t)
			t = tr;
	}
	return t;
}

static void ingest_stop(struct ingest *in, bool failed)
{
	for (int r = 0; r < g.ranks; r++) {
		close(in->go[r]);
		close(in->res[r]);
	}
	if (failed)
		sc_ranks_kill(&in->ranks);
	else
		sc_ranks_wait(&in->ranks, 0, false, NULL, NULL, NULL);
	daemon_stop(&in->daemon);
}

/* ---- raw stream ---- */

struct raw_op {
	struct fabric_op op;
	size_t idx;
};

static int raw_poll_all(struct fabric *f, size_t *done)
{
	struct fabric_cqe ev[32];
	int n = fabric_cq_poll(f, ev, 32);
	for (int i = 0; i < n; i++) {
		if (ev[i].err)
			return ev[i].err;
		(*done)++;
	}
	return n < 0 ? n : 0;
}

/* Receiver: per rep, posts `window` receives at a time into a bytes-sized
 * buffer, says ready, writes the time of the last completion. */
static int raw_receiver(const char *prov, int addr_fd, int ready_fd, int go_fd, int time_fd)
{
	struct fabric_params fp = { .provider = prov, .node = "127.0.0.1" };
	struct fabric *f;
	if (fabric_open(&fp, &f))
		return 1;
	if (write(addr_fd, &f->addrlen, sizeof(f->addrlen)) < 0 ||
	    write(addr_fd, f->addr, f->addrlen) < 0)
		return 1;
	uint8_t *buf = malloc(g.bytes);
	struct fabric_mr mr = { 0 };
	if (!buf || fabric_mr_reg(f, buf, g.bytes, &mr))
		return 1;
	size_t nchunks = (g.bytes + g.chunk - 1) / g.chunk;
	struct raw_op *ops = calloc(nchunks, sizeof(*ops)); /* one context per message */
	for (int rep = 0; rep <= g.reps; rep++) {
		size_t posted = 0, done = 0;
		while (posted < nchunks && posted < g.window) {
			size_t len = g.bytes - posted * g.chunk < g.chunk ? g.bytes - posted * g.chunk : g.chunk;
			int rc = fabric_trecv(f, buf + posted * g.chunk, len, mr.desc, FI_ADDR_UNSPEC, 1,
					      0, &ops[posted].op);
			if (rc == -FI_EAGAIN)
				continue;
			if (rc)
				return 1;
			posted++;
		}
		(void)!write(ready_fd, "r", 1);
		char go;
		if (read_full(go_fd, &go, 1, 600000))
			return 1;
		uint64_t until = sc_now_ns() + 60000000000ull;
		while (done < nchunks && sc_now_ns() < until) {
			size_t before = done;
			if (raw_poll_all(f, &done))
				return 1;
			if (before == done && g.yield)
				sched_yield(); /* same waiting as the ranks */
			for (; before < done && posted < nchunks; before++) {
				size_t off = posted * g.chunk;
				size_t len = g.bytes - off < g.chunk ? g.bytes - off : g.chunk;
				int rc;
				while ((rc = fabric_trecv(f, buf + off, len, mr.desc, FI_ADDR_UNSPEC, 1, 0,
							  &ops[posted].op)) == -FI_EAGAIN)
					;
				if (rc)
					return 1;
				posted++;
			}
		}
		uint64_t t_end = sc_now_ns();
		if (done < nchunks)
			return 1;
		(void)!write(time_fd, &t_end, sizeof(t_end));
	}
	fabric_mr_dereg(&mr);
	fabric_close(f);
	return 0;
}

/* Sender: per rep, waits for ready, then streams with `window` sends in
 * flight (send c after send c - window completed); writes its start time. */
static int raw_sender(const char *prov, int addr_fd, int ready_fd, int go_fd, int time_fd)
{
	struct fabric_params fp = { .provider = prov, .node = "127.0.0.1" };
	struct fabric *f;
	size_t alen;
	uint8_t addr[FABRIC_ADDR_MAX];
	fi_addr_t dst;
	if (fabric_open(&fp, &f) || read_full(addr_fd, &alen, sizeof(alen), 10000) ||
	    alen > sizeof(addr) || read_full(addr_fd, addr, alen, 10000) ||
	    fabric_av_insert(f, addr, alen, &dst))
		return 1;
	uint8_t *buf = malloc(g.bytes);
	struct fabric_mr mr = { 0 };
	if (!buf || fabric_mr_reg(f, buf, g.bytes, &mr))
		return 1;
	memset(buf, 1, g.bytes);
	size_t nchunks = (g.bytes + g.chunk - 1) / g.chunk;
	struct raw_op *ops = calloc(nchunks, sizeof(*ops)); /* one context per message */
	for (int rep = 0; rep <= g.reps; rep++) {
		char r;
		if (read_full(ready_fd, &r, 1, 600000) || read_full(go_fd, &r, 1, 600000))
			return 1;
		uint64_t t0 = sc_now_ns(), until = t0 + 60000000000ull;
		size_t sent = 0, done = 0;
		while (done < nchunks && sc_now_ns() < until) {
			while (sent < nchunks && sent - done < g.window) {
				size_t off = sent * g.chunk;
				size_t len = g.bytes - off < g.chunk ? g.bytes - off : g.chunk;
				int rc = fabric_tsend(f, buf + off, len, mr.desc, dst, 1, (uint32_t)sent,
						      &ops[sent].op);
				if (rc == -FI_EAGAIN)
					break;
				if (rc)
					return 1;
				sent++;
			}
			size_t before = done;
			if (raw_poll_all(f, &done))
				return 1;
			if (before == done && g.yield)
				sched_yield();
		}
		if (done < nchunks)
			return 1;
		(void)!write(time_fd, &t0, sizeof(t0));
	}
	/* Let the receiver drain before the endpoint goes away. */
	usleep(100000);
	fabric_mr_dereg(&mr);
	fabric_close(f);
	return 0;
}

/* The raw side: one receiver and one sender, up for the whole run. */
struct raw {
	pid_t rx, tx;
	int go_rx, go_tx, ts, te;
};

static void raw_start(struct raw *w, const char *prov)
{
	int addr_p[2], ready_p[2], ts_p[2], te_p[2], grx[2], gtx[2];
	if (pipe(addr_p) || pipe(ready_p) || pipe(ts_p) || pipe(te_p) || pipe(grx) || pipe(gtx))
		die("pipe: %s", strerror(errno));
	w->rx = fork();
	if (w->rx == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pin_self(g.pin_d);
		_exit(raw_receiver(prov, addr_p[1], ready_p[1], grx[0], te_p[1]));
	}
	w->tx = fork();
	if (w->tx == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pin_self(g.pin_r);
		_exit(raw_sender(prov, addr_p[0], ready_p[0], gtx[0], ts_p[1]));
	}
	close(addr_p[0]);
	close(addr_p[1]);
	close(ready_p[0]);
	close(ready_p[1]);
	close(ts_p[1]);
	close(te_p[1]);
	close(grx[0]);
	close(gtx[0]);
	w->go_rx = grx[1];
	w->go_tx = gtx[1];
	w->ts = ts_p[0];
	w->te = te_p[0];
}

static double raw_rep(struct raw *w, const char *prov)
{
	uint64_t t0, t1;
	if (write(w->go_rx, "g", 1) != 1 || write(w->go_tx, "g", 1) != 1 ||
	    read_full(w->ts, &t0, sizeof(t0), 120000) || read_full(w->te, &t1, sizeof(t1), 120000)) {
		fprintf(stderr, "ingest: raw %s stream failed\n", prov);
		return -1;
	}
	return (double)(t1 - t0) / 1e9;
}

static void raw_stop(struct raw *w, bool failed)
{
	int st;
	close(w->go_rx);
	close(w->go_tx);
	if (failed) {
		kill(w->rx, SIGKILL);
		kill(w->tx, SIGKILL);
	}
	waitpid(w->rx, &st, 0);
	waitpid(w->tx, &st, 0);
	close(w->ts);
	close(w->te);
}

static void usage(void)
{
	fprintf(stderr, "usage: ingest [--provider shm|tcp|both] [--ranks N] [--bytes B] "
			"[--reps R] [--chunk B] [--window W] [--threads T] [--pin A,B] [--spin] [--json]\n");
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
		printf("# ingest = %d ranks x bytes / allreduce time (slowest rank); raw = one stream "
		       "of bytes, same chunk (%u) and window (%u); GB/s = 1e9 B/s, best of %d "
		       "(median in brackets)\n"
		       "%-6s %6s %10s %16s %16s %7s\n",
		       g.ranks, g.chunk, g.window, g.reps, "prov", "ranks", "bytes", "ingest GB/s",
		       "raw GB/s", "ratio");
	int rc = 0;
	for (int i = 0; i < nprov; i++) {
		double ta[MAX_REPS], tr[MAX_REPS], ga[MAX_REPS], gr[MAX_REPS];
		struct ingest in;
		struct raw w;
		bool failed = false;
		ingest_start(&in, provs[i]);
		raw_start(&w, provs[i]);
		/* Rep 0 warms both up; then ingest, raw / raw, ingest / ... */
		for (int rep = 0; rep <= g.reps && !failed; rep++) {
			double a, b;
			if (rep % 2) {
				a = ingest_rep(&in, provs[i]);
				b = a < 0 ? -1 : raw_rep(&w, provs[i]);
			} else {
				b = raw_rep(&w, provs[i]);
				a = b < 0 ? -1 : ingest_rep(&in, provs[i]);
			}
			failed = a < 0 || b < 0;
			if (rep) {
				ta[rep - 1] = a;
				tr[rep - 1] = b;
			}
		}
		raw_stop(&w, failed);
		ingest_stop(&in, failed);
		if (failed) {
			rc = 1;
			continue;
		}
		for (int k = 0; k < g.reps; k++) {
			ga[k] = (double)g.ranks * (double)g.bytes / ta[k] / 1e9;
			gr[k] = (double)g.bytes / tr[k] / 1e9;
		}
		qsort(ga, (size_t)g.reps, sizeof(double), cmp_d);
		qsort(gr, (size_t)g.reps, sizeof(double), cmp_d);
		double best_a = ga[g.reps - 1], best_r = gr[g.reps - 1];
		double med_a = ga[g.reps / 2], med_r = gr[g.reps / 2];
		if (g.json)
			printf("{\"bench\":\"ingest\",\"provider\":\"%s\",\"nranks\":%d,\"bytes\":%zu,"
			       "\"chunk\":%u,\"window\":%u,\"threads\":%d,\"reps\":%d,\"stat\":\"best\","
			       "\"gbps\":%.3f,\"raw_gbps\":%.3f,\"ratio\":%.3f,\"gbps_median\":%.3f,"
			       "\"raw_gbps_median\":%.3f}\n",
			       provs[i], g.ranks, g.bytes, g.chunk, g.window, g.threads, g.reps, best_a,
			       best_r, best_a / best_r, med_a, med_r);
		else
			printf("%-6s %6d %10zu %7.2f (%6.2f) %7.2f (%6.2f) %7.2f\n", provs[i], g.ranks,
			       g.bytes, best_a, med_a, best_r, med_r, best_a / best_r);
		fflush(stdout);
	}
	rmdir(g.dir);
	return rc;
}
