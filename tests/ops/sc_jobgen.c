/* sc_jobgen: training jobs in miniature, for the operations and scale tests
 * and the docs' evidence. Plays --jobs J jobs (distinct job ids: --job-id,
 * --job-id + 1, ...) of --ranks N ranks each; each rank joins the given
 * sumcastd aggregators with the client library and loops f32 sum
 * allreduces until --seconds have passed or it has done --iters of them.
 *
 * Processes: one per rank by default; with --procs P the J x N ranks are
 * spread over P processes (consecutive ranks together), each driving its
 * ranks' client instances from one loop with the library's asynchronous
 * calls (client_connect_poll, client_allreduce, client_test), the clients
 * of a process sharing one fabric domain (client_params.fabric). That is
 * how 1,024 ranks fit on a host where 1,024 processes do not.
 *
 * Ranks agree on when to stop through the allreduce itself: element 0
 * carries "my clock is past the deadline, or this is my --iters-th call",
 * so every rank of a job sees the same sum and stops after the same call.
 * Every element of every result is checked exactly: element i > 0 of rank r
 * of job k is (r + 1)(k + 1) + i mod 5, so its sum is (k + 1)N(N + 1)/2 +
 * N (i mod 5), which tells a chunk of another job, another offset or a rank
 * missing apart. --slow-rank R makes rank R sleep before each call, so it
 * is the straggler the daemon should name (one rank per process only).
 *
 * Every process waits until all have joined before its first allreduce,
 * so the jobs run at the same time.
 *
 * Each process raises its open-file limit to the hard limit (each client
 * holds a few descriptors per aggregator) and prints one line with its
 * ranks, allreduces, connect time, resident memory (VmRSS, VmHWM) and open
 * descriptors; the first rank of each job prints what each aggregator
 * granted ("grant agg A window W chunk C").
 *
 * Usage: sc_jobgen --aggs host:port[,host:port] [--provider P] [--ranks N]
 *        [--jobs J] [--procs P] [--seconds S] [--iters K] [--count ELEMS]
 *        [--chunk BYTES] [--window W] [--timeout-ms MS]
 *        [--slow-rank R --slow-us US] [--job-id ID] [--label L]
 * --label gives the jobs that label (client_params.label, as
 * SUMCAST_JOB_LABEL does for the plugin).
 * Exit: 0 every rank finished with correct sums; 1 otherwise; 77 when the
 * fabric provider is not available here. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "client.h"
#include "clock.h"
#include "fabric.h"
#include "fabric_env.h"
#include "hostport.h"
#include "proc.h"
#include "wait.h"
#include "ranks.h"

#define MAX_RANKS 65536u
#define MAX_JOBS 64u

static struct {
	const char *provider;
	const char *aggs[CLIENT_AGGS_MAX];
	size_t naggs;
	unsigned nranks, njobs, nprocs;
	double seconds;
	unsigned long iters;
	size_t count;
	unsigned chunk, window, timeout_ms;
	int slow_rank;
	unsigned slow_us;
	uint64_t job_id;
	const char *label; /* --label: the job's SUMCAST_JOB_LABEL, NULL: none */
} g = { "tcp;ofi_rxm", { 0 }, 0, 2, 1, 0, 5, 0, 1u << 20, 0, 0, 60000, -1, 0, 0x0b5, NULL };

/* The start barrier: each process writes a byte to ready[1] once all its
 * ranks have joined, then waits for go[1] to close (EOF on go[0]), which the
 * parent does once every process is ready (or the join time is up): the
 * jobs then run at the same time, not one after another. */
static int ready_pipe[2] = { -1, -1 }, go_pipe[2] = { -1, -1 };

struct inst {
	struct client *c;
	unsigned job, rank;
	float *sb, *rb;
	struct fabric_mr smr, rmr;
	struct client_req *r;
	unsigned long ops;
	bool ready, done;
};

static float expect(const struct inst *x, size_t i)
{
	double n = g.nranks;
	return (float)((x->job + 1) * n * (n + 1) / 2 + n * (double)(i % 5));
}

static unsigned open_fds(void)
{
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fd");

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n > 3 ? n - 3 : 0; /* ., .. and the DIR's own */
}

/* Soft open-file limit up to the hard one: a process of many clients (and
 * a daemon of many ranks) needs more than the usual 1,024. */
static void nofile_raise(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int inst_start(struct inst *x, struct fabric *shared)
{
	struct client_params p = {
		.provider = g.provider,
		.node = "127.0.0.1",
		.fabric = shared,
		.job_id = g.job_id + x->job,
		.rank = x->rank,
		.nranks = g.nranks,
		.chunk_bytes = g.chunk,
		.window = g.window,
		.timeout_ms = g.timeout_ms,
		.naggs = g.naggs,
		.aggs = g.aggs,
		.max_requests = 2,
		.label = g.label,
	};
	int rc = client_create(&p, &x->c);

	if (rc) {
		fprintf(stderr, "job %u rank %u: client_create: %s\n", x->job, x->rank, strerror(-rc));
		return rc;
	}
	return 0;
}

/* One pass of client_connect_poll over the first n clients not yet ready. */
static int join_pass(struct inst *xs, unsigned n, unsigned *ready)
{
	for (unsigned i = 0; i < n; i++) {
		if (xs[i].ready)
			continue;
		int rc = client_connect_poll(xs[i].c);
		if (rc == -EAGAIN)
			continue;
		if (rc) {
			fprintf(stderr, "job %u rank %u: connect: %s\n", xs[i].job, xs[i].rank,
				client_error(xs[i].c));
			return rc;
		}
		xs[i].ready = true;
		(*ready)++;
	}
	return 0;
}

static int inst_buffers(struct inst *x)
{
	x->sb = malloc(g.count * sizeof(float));
	x->rb = malloc(g.count * sizeof(float));
	if (!x->sb || !x->rb || client_mr_reg(x->c, x->sb, g.count * sizeof(float), &x->smr) ||
	    client_mr_reg(x->c, x->rb, g.count * sizeof(float), &x->rmr)) {
		fprintf(stderr, "job %u rank %u: buffers failed\n", x->job, x->rank);
		return -ENOMEM;
	}
	for (size_t i = 0; i < g.count; i++)
		x->sb[i] = (float)((x->rank + 1) * (x->job + 1) + i % 5);
	return 0;
}

/* One step of x's loop: start its next allreduce, or test the one in
 * flight and check it. 0, 1 when one completed, or -errno with the reason
 * printed. */
static int inst_step(struct inst *x, uint64_t deadline)
{
	int rc, done = 0;

	if (!x->r) {
		if ((int)x->rank == g.slow_rank && g.slow_us)
			usleep(g.slow_us);
		bool last = sc_now_ms() >= deadline || (g.iters && x->ops + 1 >= g.iters);
		x->sb[0] = last ? 1.0f : 0.0f;
		rc = client_allreduce(x->c, x->sb, x->rb, g.count, SC_F32, SC_OP_SUM, x->smr.desc,
				      x->rmr.desc, &x->r);
		if (rc == -EAGAIN) { /* no free request: the next pass tries again */
			x->r = NULL;
			client_progress(x->c);
			return 0;
		}
		if (rc) {
			fprintf(stderr, "job %u rank %u: allreduce: %s (%s)\n", x->job, x->rank,
				strerror(-rc), client_error(x->c));
			x->r = NULL;
			return rc;
		}
		return 0;
	}
	rc = client_test(x->c, x->r, &done);
	if (rc) {
		fprintf(stderr, "job %u rank %u: allreduce %lu failed: %s (%s)\n", x->job, x->rank,
			x->ops, strerror(-rc), client_error(x->c));
		x->r = NULL;
		return rc;
	}
	if (!done)
		return 0;
	x->r = NULL;
	x->ops++;
	for (size_t i = 1; i < g.count; i++)
		if (x->rb[i] != expect(x, i)) {
			fprintf(stderr, "job %u rank %u: allreduce %lu: element %zu is %g, want %g\n", x->job,
				x->rank, x->ops, i, (double)x->rb[i], (double)expect(x, i));
			return -EBADMSG;
		}
	/* the ranks past their deadline: a whole number in [0, N] */
	if (x->rb[0] < 0 || x->rb[0] > (float)g.nranks || x->rb[0] != (float)(unsigned)x->rb[0]) {
		fprintf(stderr, "job %u rank %u: allreduce %lu: stop flag %g, want 0 .. %u\n", x->job,
			x->rank, x->ops, (double)x->rb[0], g.nranks);
		return -EBADMSG;
	}
	if (x->rb[0] > 0)
		x->done = true;
	return 1;
}

/* Process k of g.nprocs: ranks [k T / P, (k + 1) T / P) of the T = J x N. */
static int proc_main(int k, void *arg)
{
	uint64_t total = (uint64_t)g.njobs * g.nranks;
	uint64_t lo = total * (uint64_t)k / g.nprocs, hi = total * (uint64_t)(k + 1) / g.nprocs;
	unsigned n = (unsigned)(hi - lo), left = n, ready = 0;
	struct inst *xs = calloc(n ? n : 1, sizeof(*xs));
	struct fabric *shared = NULL;
	unsigned long ops = 0;
	int rc = 0;

	(void)arg;
	close(ready_pipe[0]);
	close(go_pipe[1]);
	nofile_raise();
	if (!xs)
		return 1;
	if (n > 1) {
		struct fabric_params fp = { .provider = g.provider, .node = "127.0.0.1" };
		rc = fabric_open(&fp, &shared);
		if (rc) {
			fprintf(stderr, "proc %d: fabric_open %s: %d\n", k, g.provider, rc);
			free(xs);
			return rc == -FI_ENODATA ? 77 : 1;
		}
	}
	uint64_t t0 = sc_now_ms();
	/* Each client created is polled from then on, as a rank's own thread
	 * would: a daemon closes a connection that sends no JOIN within its
	 * handshake timeout (10 s), and creating 256 clients takes longer
	 * than that on a loaded host. */
	for (unsigned i = 0; i < n; i++) {
		xs[i].job = (unsigned)((lo + i) / g.nranks);
		xs[i].rank = (unsigned)((lo + i) % g.nranks);
		if ((rc = inst_start(&xs[i], shared)) || (rc = join_pass(xs, i + 1, &ready)))
			goto out;
	}
	/* joins: every client polled in turn, bounded by the join timeout */
	while (ready < n) {
		unsigned before = ready;
		if ((rc = join_pass(xs, n, &ready)))
			goto out;
		if (sc_now_ms() - t0 > g.timeout_ms + 10000ull) {
			fprintf(stderr, "proc %d: %u of %u ranks joined in %u ms\n", k, ready, n,
				g.timeout_ms + 10000);
			rc = -ETIMEDOUT;
			goto out;
		}
		if (ready == before)
			usleep(n > 64 ? 200 : 100); /* nothing moved: leave the cores to the others */
	}
	uint64_t t_conn = sc_now_ms() - t0;
	char b = 'r';
	(void)!write(ready_pipe[1], &b, 1);
	struct pollfd pf = { .fd = go_pipe[0], .events = POLLIN };
	(void)poll(&pf, 1, (int)g.timeout_ms + 20000); /* EOF: every process joined */
	rc = 0;
	for (unsigned i = 0; i < n && !rc; i++)
		rc = inst_buffers(&xs[i]);
	if (rc)
		goto out;
	for (unsigned i = 0; i < n; i++) {
		if (xs[i].rank)
			continue;
		for (size_t a = 0; a < g.naggs; a++) {
			uint32_t h, w, ch;
			if (!client_agg_info(xs[i].c, a, &h, &w, &ch))
				printf("sc_jobgen: job 0x%" PRIx64 " grant agg %zu window %u chunk %u\n",
				       g.job_id + xs[i].job, a, w, ch);
		}
	}
	uint64_t t1 = sc_now_ms(), deadline = t1 + (uint64_t)(g.seconds * 1000);
	unsigned nap = 0;
	while (left) {
		bool moved = false;
		for (unsigned i = 0; i < n; i++) {
			if (xs[i].done)
				continue;
			if ((rc = inst_step(&xs[i], deadline)) < 0)
				goto out;
			moved |= rc > 0;
			if (xs[i].done)
				left--;
		}
		rc = 0;
		/* a pass that completed nothing naps (a rank waiting on
		 * --slow-rank's sleep would spin through it) */
		th_nap(&nap, moved);
		if (sc_now_ms() - t1 > (uint64_t)(g.seconds * 1000) + 60000) {
			fprintf(stderr, "proc %d: %u of %u ranks never agreed to stop\n", k, left, n);
			rc = -ETIME;
			goto out;
		}
	}
	for (unsigned i = 0; i < n; i++)
		ops += xs[i].ops;
	printf("sc_jobgen: proc %d: %u ranks (job %u rank %u .. job %u rank %u), %lu allreduces of "
	       "%zu f32 in %.2f s, connected in %.2f s, VmRSS %lld kB, VmHWM %lld kB, %u fds\n",
	       k, n, n ? xs[0].job : 0, n ? xs[0].rank : 0, n ? xs[n - 1].job : 0,
	       n ? xs[n - 1].rank : 0, ops, g.count, (double)(sc_now_ms() - t1) / 1000,
	       (double)t_conn / 1000, sc_proc_status(0, "VmRSS"), sc_proc_status(0, "VmHWM"), open_fds());
out:
	for (unsigned i = 0; i < n; i++) {
		fabric_mr_dereg(&xs[i].smr);
		fabric_mr_dereg(&xs[i].rmr);
		client_destroy(xs[i].c);
		free(xs[i].sb);
		free(xs[i].rb);
	}
	fabric_close(shared);
	free(xs);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "aggs", required_argument, NULL, 'a' },   { "provider", required_argument, NULL, 'P' },
		{ "ranks", required_argument, NULL, 'n' },  { "seconds", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'c' },  { "chunk", required_argument, NULL, 'C' },
		{ "window", required_argument, NULL, 'w' }, { "slow-rank", required_argument, NULL, 'r' },
		{ "slow-us", required_argument, NULL, 'u' }, { "job-id", required_argument, NULL, 'j' },
		{ "jobs", required_argument, NULL, 'J' },   { "procs", required_argument, NULL, 'p' },
		{ "iters", required_argument, NULL, 'i' },  { "timeout-ms", required_argument, NULL, 't' },
		{ "label", required_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	static struct hostport agg_list[CLIENT_AGGS_MAX];
	struct sc_ranks ranks;
	char why[300];
	const char *aggs = NULL;
	int opt, skip = 0;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'a':
			aggs = optarg;
			break;
		case 'P':
			g.provider = optarg;
			break;
		case 'n':
			g.nranks = (unsigned)atoi(optarg);
			break;
		case 's':
			g.seconds = atof(optarg);
			break;
		case 'c':
			g.count = strtoull(optarg, NULL, 0);
			break;
		case 'C':
			g.chunk = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'w':
			g.window = (unsigned)atoi(optarg);
			break;
		case 'r':
			g.slow_rank = atoi(optarg);
			break;
		case 'u':
			g.slow_us = (unsigned)atoi(optarg);
			break;
		case 'j':
			g.job_id = strtoull(optarg, NULL, 0);
			break;
		case 'J':
			g.njobs = (unsigned)atoi(optarg);
			break;
		case 'p':
			g.nprocs = (unsigned)atoi(optarg);
			break;
		case 'i':
			g.iters = strtoul(optarg, NULL, 0);
			break;
		case 't':
			g.timeout_ms = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'L':
			g.label = optarg;
			break;
		default:
			fprintf(stderr, "usage: see the comment at the top of sc_jobgen.c\n");
			return 2;
		}
	}
	if (hostport_list_parse(aggs, agg_list, CLIENT_AGGS_MAX, &g.naggs, why, sizeof(why))) {
		fprintf(stderr, "sc_jobgen: --aggs: %s\n", why);
		return 2;
	}
	for (size_t i = 0; i < g.naggs; i++)
		g.aggs[i] = agg_list[i].text;
	uint64_t total = (uint64_t)g.njobs * g.nranks;
	if (!g.nprocs)
		g.nprocs = (unsigned)total; /* one process per rank */
	if (!g.naggs || g.nranks < 1 || g.nranks > MAX_RANKS || g.njobs < 1 || g.njobs > MAX_JOBS ||
	    g.count < 2 || g.seconds < 0 || g.nprocs < 1 || g.nprocs > SC_RANKS_MAX ||
	    g.nprocs > total || g.timeout_ms < 100) {
		fprintf(stderr, "sc_jobgen: need --aggs, 1..%u ranks, 1..%u jobs, 1..%d processes (not "
			"more than ranks x jobs), --count >= 2, --timeout-ms >= 100\n", MAX_RANKS, MAX_JOBS,
			SC_RANKS_MAX);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* rxm's buffers as the plugin sets them (fabric_env.h): its defaults
	 * hold 67 MB per endpoint, one per client per aggregator. A client
	 * posts at most a window of receives per endpoint: a queue of 256
	 * instead of rxm's 2,048 saves 0.8 MB of the 5 MB each endpoint holds
	 * (docs/journal/2026-11-26-aggregator-receives.md). */
	struct fabric_env fe = { .provider = g.provider, .rx_buffers = FABRIC_ENV_RX_BUFFERS,
				 .rx_buffer_size = FABRIC_ENV_RX_BUFFER_SIZE,
				 .rx_size = g.window > 256 ? g.window : 256 };
	char line[384];
	fabric_env_defaults(&fe, line, sizeof(line));
	uint64_t t0 = sc_now_ms();
	if (pipe(ready_pipe) || pipe(go_pipe)) {
		perror("pipe");
		return 1;
	}
	int rc = sc_ranks_start(&ranks, (int)g.nprocs, proc_main, NULL, true);
	if (rc) {
		fprintf(stderr, "fork: %s\n", strerror(-rc));
		return 1;
	}
	close(ready_pipe[1]);
	close(go_pipe[0]);
	/* every process joined, or the join time is up, or they all exited */
	unsigned nready = 0;
	for (uint64_t end = sc_now_ms() + g.timeout_ms + 15000; nready < g.nprocs && sc_now_ms() < end;) {
		struct pollfd pf = { .fd = ready_pipe[0], .events = POLLIN };
		char buf[64];
		if (poll(&pf, 1, 200) <= 0)
			continue;
		ssize_t got = read(ready_pipe[0], buf, sizeof(buf));
		if (got <= 0)
			break;
		nready += (unsigned)got;
	}
	if (nready == g.nprocs && g.nprocs > 1)
		printf("sc_jobgen: all %u processes joined after %.2f s\n", g.nprocs,
		       (double)(sc_now_ms() - t0) / 1000);
	close(go_pipe[1]);
	sc_ranks_wait(&ranks, 0, false, NULL, NULL, NULL); /* each process bounds its own time */
	for (unsigned p = 0; p < g.nprocs; p++) {
		int st = ranks.status[p];
		CHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 77),
		      "process %u ended with status 0x%x", p, st);
		skip += WIFEXITED(st) && WEXITSTATUS(st) == 77;
	}
	if (th_failed)
		fprintf(stderr, "sc_jobgen: %d of %u processes failed\n", th_failed, g.nprocs);
	else
		printf("sc_jobgen: %u jobs x %u ranks in %u processes: every result exact, %.1f s\n",
		       g.njobs, g.nranks, g.nprocs, (double)(sc_now_ms() - t0) / 1000);
	return th_failed ? 1 : skip ? 77 : 0;
}
