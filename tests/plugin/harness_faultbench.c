/* The fault benchmark (bench/faults): what an aggregator fault costs a job.
 *
 *   faults --nranks N --naggs M [--kinds kill,stop,term,restart] [-b BYTES]
 *          [--type T] [--split S] [--before S] [--after S] [--retention-bytes B] [--json]
 *
 * First the fault-free cost of being able to survive faults: allreduces of
 * --retention-bytes through the aggregators with SUMCAST_FAILOVER on and
 * off, interleaved in the same ranks (two copies of the plugin), median of
 * 5 rounds each. Then per fault kind, on a fresh communicator over every
 * aggregator: allreduces of BYTES back to back for --before seconds, the
 * fault (from rank 0, between two allreduces), --after seconds more, then
 * a fresh communicator over the surviving aggregators for --after seconds.
 * Per kind (rank 0's clock; every rank runs the same steps):
 *   detect    first sign of the fault on a node - the injection (min..max
 *             over the nodes; a stopped aggregator is seen at the PING
 *             deadline, a killed one at once)
 *   agree     the nodes' agreement, from the first sign to the decision
 *   recover   from the first sign to the first allreduce completed after it
 *   p50/max   latency of the allreduces from 1 s before the fault to 1 s
 *             after recovery
 *   before / after / fresh   throughput (algbw) before the fault, and
 *             after it against a fresh communicator over the survivors,
 *             sampled alternately (6 rounds, median) so that other load on
 *             the machine hits both alike; after/fresh should be about 1
 * The failed aggregator is restarted (or resumed) before the next kind.
 *
 * Kinds of a return (the aggregator comes back into the running
 * communicator, plugin/failover.c "Coming back"): readmit (SIGKILL and a
 * new daemon on its port at once), resume (SIGSTOP, SIGCONT 3 s later:
 * past the PING deadline), upgrade (SIGTERM: it drains and exits, a new
 * daemon on its port once the port is free). Per kind:
 *   back      from the restart (or SIGCONT) to the return, on the slowest
 *             node
 *   out       from the first sign to the return
 *   before / out / after   throughput before the fault, while it was out,
 *             and from 0.5 s after the return (after/before should be ~1)
 *   faults    fault lines the nodes logged (an upgrade that drains: 0)
 * The row "watch" is what watching for a return costs: one aggregator's
 * address is dead, SUMCAST_READMIT 1 s against 0 (never), interleaved in
 * the same ranks, median of 5.
 * Benchmarks report; they never fail on time. */
#include "harness.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "clock.h"

static const char *fb_kinds = "kill,stop,term,restart,readmit,resume,upgrade";
static bool fb_watch_on = true;
static size_t fb_bytes = 2u << 20, fb_ret_bytes = 64u << 20;
static double fb_before = 2.0, fb_after = 3.0;
static ncclDataType_t fb_type = ncclFloat32;

int faultbench_option(int c, const char *arg)
{
	switch (c) {
	case 'K': fb_kinds = arg; return 0;
	case 'B': fb_before = atof(arg); return fb_before > 0 ? 0 : -1;
	case 'Z': fb_after = atof(arg); return fb_after > 0 ? 0 : -1;
	case 'Y': fb_ret_bytes = parse_size(arg); return fb_ret_bytes ? 0 : -1;
	case 't':
		for (int t = 0; t < 10; t++)
			if (!strcmp(arg, type_name((ncclDataType_t)t))) {
				fb_type = (ncclDataType_t)t;
				return 0;
			}
		return -1;
	default: return -1;
	}
}

void faultbench_bytes(size_t b)
{
	fb_bytes = b;
}

/* A separate instance of the plugin (a copy of the .so under another name)
 * whose settings come from the environment as it is now. */
static void fb_open(const char *name)
{
	char so[PATH_MAX + 32], cmd[2 * PATH_MAX + 64];
	const char *orig = opt.plugin;

	snprintf(so, sizeof(so), "%s/plugin-%s.so", rv_dir, name);
	if (my_rank == 0) {
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", orig, so);
		REQUIRE(system(cmd) == 0, "%s", cmd);
	}
	char bar[64];
	snprintf(bar, sizeof(bar), "so-%s", name);
	rv_barrier(bar);
	opt.plugin = so;
	memset(&P, 0, sizeof(P));
	plugin_open(true);
	opt.plugin = orig;
}

static void fb_close(void *cc, void *mh)
{
	NCHECK(CN_CALL(deregMr, cc, mh));
	NCHECK(CN_CALL(closeColl, cc));
}

struct sample {
	double t0, t1; /* s */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Back-to-back allreduces of count elements until `until` (agreed: rank 0
 * decides, by a 1-element max-allreduce every 8 calls, when everyone stops).
 * Samples appended to s[*n]. `inject` (rank 0): called once when at >= 0
 * seconds have passed. */
static void fb_run(void *cc, void *mh, uint8_t *send, uint8_t *recv, size_t count, double secs,
		   struct sample *s, size_t *n, size_t cap, double inject_at, void (*inject)(void))
{
	double start = sc_now_s();
	bool injected = inject_at < 0;
	uint32_t *flag = (uint32_t *)(recv + count * type_size(fb_type) + 64);

	for (size_t k = 0;; k++) {
		if (k % 8 == 0) {
			flag[0] = my_rank == 0 && sc_now_s() - start >= secs;
			allreduce_chunked(cc, (uint8_t *)flag, (uint8_t *)flag, 1, ncclUint32, ncclMax, mh);
			if (flag[0])
				return;
		}
		if (!injected && my_rank == 0 && sc_now_s() - start >= inject_at) {
			inject();
			injected = true;
		}
		double t0 = sc_now_s();
		allreduce_chunked(cc, send, recv, count, fb_type, ncclSum, mh);
		if (*n < cap)
			s[(*n)++] = (struct sample){ t0, sc_now_s() };
	}
}

static double fb_gbps(const struct sample *s, size_t n, double from, double to, size_t bytes)
{
	size_t k = 0;
	double busy = 0;

	for (size_t i = 0; i < n; i++)
		if (s[i].t0 >= from && s[i].t1 <= to) {
			k++;
			busy += s[i].t1 - s[i].t0;
		}
	return busy > 0 ? k * (double)bytes / busy / 1e9 : 0;
}

#define FB_ROUNDS 6 /* interleaved samples of the survivors vs a fresh communicator */

static int fb_agg;  /* the aggregator of the kind being measured */
static int fb_kind; /* 0 kill, 1 stop, 2 term, 3 restart */
static double fb_t_inject;

static void fb_inject(void)
{
	static const int sig[] = { SIGKILL, SIGSTOP, SIGTERM, SIGKILL };

	fb_t_inject = sc_now_s();
	REQUIRE(daemon_signal(fb_agg, sig[fb_kind]) == 0, "signal to aggregator %d", fb_agg);
}

/* The failed aggregator serves again (for the next kind). */
static void fb_heal(void)
{
	if (my_rank != 0)
		return;
	if (fb_kind == 1) {
		daemon_signal(fb_agg, SIGCONT);
		return;
	}
	uint64_t end = sc_now_ms() + 10000;
	while (daemon_signal(fb_agg, 0) == 0 && sc_now_ms() < end)
		usleep(20000); /* a draining daemon exits by itself */
	/* the port is free once the old one is gone */
	for (int tries = 0; tries < 100 && daemon_restart(fb_agg); tries++)
		usleep(100000);
}

/* Two copies of the plugin, one with `var` = on_val at its init and one
 * with off_val, each on a communicator of its own: samples of `reps`
 * allreduces of count elements, the two interleaved (the order rotating),
 * median of 5 each into out[0] (on) and out[1] (off). */
static void fb_ab(uint8_t *region, size_t half, size_t count, const char *var, const char *on_val,
		  const char *off_val, const char *name, int reps, double out[2])
{
	static char names[2][48];
	void *cc[2], *mh[2];
	struct plug inst[2];
	double t[2][5];

	for (int v = 0; v < 2; v++) {
		setenv(var, v ? off_val : on_val, 1);
		snprintf(names[v], sizeof(names[v]), "%s-%s", name, v ? "off" : "on");
		fb_open(names[v]);
		inst[v] = P;
		coll_rv_name = names[v];
		cc[v] = coll_setup(region, 2 * half, &mh[v]);
	}
	unsetenv(var);
	for (int round = 0; round < 5; round++)
		for (int k = 0; k < 2; k++) {
			int v = (round + k) % 2;
			P = inst[v];
			uint32_t *flag = (uint32_t *)(region + half + count * type_size(fb_type) + 64);
			flag[0] = 0;
			allreduce_chunked(cc[v], (uint8_t *)flag, (uint8_t *)flag, 1, ncclUint32, ncclMax, mh[v]);
			double t0 = sc_now_s();
			for (int i = 0; i < reps; i++)
				allreduce_chunked(cc[v], region, region + half, count, fb_type, ncclSum, mh[v]);
			t[v][round] = sc_now_s() - t0;
		}
	out[0] = median(t[0], 5);
	out[1] = median(t[1], 5);
	for (int v = 0; v < 2; v++) {
		P = inst[v];
		fb_close(cc[v], mh[v]);
	}
}

/* The fault-free cost: failover on vs off. */
static void fb_retention(uint8_t *region, size_t half)
{
	double t[2];

	setenv("SUMCAST_SPLIT", "1", 1);
	fb_ab(region, half, fb_ret_bytes / type_size(fb_type), "SUMCAST_FAILOVER", "true", "false",
	      "failover", 1, t);
	double on = t[0], off = t[1];
	if (my_rank != 0)
		return;
	if (opt.json)
		printf("{\"bench\":\"faults\",\"row\":\"retention\",\"nranks\":%d,\"naggs\":%d,\"bytes\":%zu,"
		       "\"type\":\"%s\",\"failover_on_s\":%.6f,\"failover_off_s\":%.6f,\"cost\":%.4f}\n",
		       opt.nranks, opt.naggs, fb_ret_bytes, type_name(fb_type), on, off, on / off - 1);
	else
		printf("# fault-free cost of failover (retention copies, in-place bounce, PING), %zu bytes %s "
		       "through %d aggregators, median of 5 interleaved: on %.2f ms, off %.2f ms: %+.1f%%\n",
		       fb_ret_bytes, type_name(fb_type), opt.naggs, on * 1e3, off * 1e3, (on / off - 1) * 100);
}

/* ---- returns ---- */

static double fb_t_heal; /* restart or SIGCONT, rank 0's clock */

/* Rank 0, each allreduce: the fault at `fb_before`, the heal when due. */
static void fb_return_tick(double elapsed)
{
	if (!fb_t_inject && elapsed >= fb_before) {
		fb_t_inject = sc_now_s();
		int sig = fb_kind == 4 ? SIGKILL : fb_kind == 5 ? SIGSTOP : SIGTERM;
		REQUIRE(daemon_signal(fb_agg, sig) == 0, "signal to aggregator %d", fb_agg);
	}
	if (!fb_t_inject || fb_t_heal)
		return;
	if (fb_kind == 5) { /* resume: past the PING deadline */
		if (sc_now_s() - fb_t_inject >= 3.0) {
			daemon_signal(fb_agg, SIGCONT);
			fb_t_heal = sc_now_s();
		}
		return;
	}
	if (!daemon_port_free(fb_agg) && sc_now_s() - fb_t_inject < 10)
		return; /* a draining daemon exits by itself */
	if (daemon_restart(fb_agg) == 0)
		fb_t_heal = sc_now_s();
}

/* One return kind: a communicator over every aggregator, --before
 * seconds, the fault and the heal, until 3 s after every node has it back
 * (at most 30 s). */
static void fb_return(uint8_t *region, size_t half, size_t count, struct sample *s, size_t cap,
		      const char *kname, int round)
{
	char name[32];
	snprintf(name, sizeof(name), "rb-%d", round);
	fb_open(name);
	coll_rv_name = name;
	void *mh, *cc = coll_setup(region, 2 * half, &mh);
	size_t n = 0;
	saw_fault = saw_back = 0;
	saw_back_t = fb_t_first = fb_t_decided = 0;
	fb_t_inject = fb_t_heal = 0;
	uint32_t *flag = (uint32_t *)(region + half + count * type_size(fb_type) + 64);
	double t_start = sc_now_s(), t_all_back = 0;
	for (size_t k = 0;; k++) {
		double el = sc_now_s() - t_start;
		if (k % 8 == 0) {
			/* rank 0 says when all have it back (a sum) and when to stop */
			flag[0] = saw_back > 0;
			flag[1] = my_rank == 0 && (el > 30 || (t_all_back && sc_now_s() - t_all_back > 3));
			allreduce_chunked(cc, (uint8_t *)flag, (uint8_t *)flag, 2, ncclUint32, ncclSum, mh);
			if (flag[0] == (uint32_t)opt.nranks && !t_all_back)
				t_all_back = sc_now_s();
			if (flag[1])
				break;
		}
		if (my_rank == 0)
			fb_return_tick(el);
		double t0 = sc_now_s();
		allreduce_chunked(cc, region, region + half, count, fb_type, ncclSum, mh);
		if (n < cap)
			s[n++] = (struct sample){ t0, sc_now_s() };
	}
	/* every node's return and first sign; rank 0's injection and heal */
	double mine[4] = { saw_back_t, fb_t_first, fb_t_inject, fb_t_heal }, all[MAX_RANKS][4];
	char tname[48];
	snprintf(tname, sizeof(tname), "times-%s", name);
	rv_put(tname, my_rank, mine, sizeof(mine));
	for (int r = 0; r < opt.nranks; r++)
		rv_get(tname, r, all[r], sizeof(all[r]));
	double back = 0, first = INFINITY;
	bool everyone = true;
	for (int r = 0; r < opt.nranks; r++) {
		everyone &= all[r][0] > 0;
		back = all[r][0] > back ? all[r][0] : back;
		if (all[r][1] > 0 && all[r][1] < first)
			first = all[r][1];
	}
	double t_inj = all[0][2], t_heal = all[0][3];
	if (!isfinite(first))
		first = t_inj; /* a drain: no fault line, out from the signal */
	uint64_t faults = (uint64_t)saw_fault;
	snprintf(tname, sizeof(tname), "faults-%s", name);
	rv_all_sum(tname, &faults, 1);
	double before = fb_gbps(s, n, t_start, t_inj, fb_bytes);
	double out = everyone ? fb_gbps(s, n, first, back, fb_bytes) : 0;
	double after = everyone ? fb_gbps(s, n, back + 0.5, INFINITY, fb_bytes) : 0;
	fb_close(cc, mh);
	snprintf(tname, sizeof(tname), "end-%s", name);
	rv_barrier(tname);
	if (my_rank != 0)
		return;
	double back_ms = everyone && t_heal ? (back - t_heal) * 1e3 : NAN;
	double out_ms = everyone ? (back - first) * 1e3 : NAN;
	if (opt.json)
		printf("{\"bench\":\"faults\",\"row\":\"return\",\"kind\":\"%s\",\"nranks\":%d,\"naggs\":%d,"
		       "\"bytes\":%zu,\"type\":\"%s\",\"back_ms\":%.1f,\"out_ms\":%.1f,\"before_gbps\":%.4f,"
		       "\"out_gbps\":%.4f,\"after_gbps\":%.4f,\"after_before\":%.3f,\"faults_logged\":%llu}\n",
		       kname, opt.nranks, opt.naggs, fb_bytes, type_name(fb_type), back_ms, out_ms, before, out,
		       after, before > 0 ? after / before : 0, (unsigned long long)faults);
	else
		printf(" %-8s %9.1f %9.1f %10.3f %10.3f %10.3f %8.3f %7llu\n", kname, back_ms, out_ms, before,
		       out, after, before > 0 ? after / before : 0, (unsigned long long)faults);
	fflush(stdout);
}

/* What watching for a return costs: a dead address in the list, readmit
 * on (1 s) and off. */
static void fb_watch(uint8_t *region, size_t half, size_t count, const char *aggs_all)
{
	double t[2];
	char list[1100];

	/* a port nobody listens on: bound and closed */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		getsockname(fd, (struct sockaddr *)&a, &al) == 0, "a free port");
	close(fd);
	snprintf(list, sizeof(list), "%s,127.0.0.1:%u", aggs_all, ntohs(a.sin_port));
	setenv("SUMCAST_AGGREGATORS", list, 1);
	/* 20 allreduces a sample: a second or more, a try or two in it */
	fb_ab(region, half, count, "SUMCAST_READMIT", "1s", "0", "watch", 20, t);
	setenv("SUMCAST_AGGREGATORS", aggs_all, 1);
	double on = t[0], off = t[1];
	if (my_rank != 0)
		return;
	if (opt.json)
		printf("{\"bench\":\"faults\",\"row\":\"watch\",\"nranks\":%d,\"naggs\":%d,\"bytes\":%zu,"
		       "\"readmit_on_s\":%.6f,\"readmit_off_s\":%.6f,\"cost\":%.4f}\n", opt.nranks, opt.naggs,
		       fb_bytes, on, off, on / off - 1);
	else
		printf("# watching for a return (one dead address tried every 1 s), 20 x %zu bytes, median "
		       "of 5 interleaved: on %.1f ms, off %.1f ms: %+.1f%%\n", fb_bytes, on * 1e3, off * 1e3,
		       (on / off - 1) * 100);
}

void run_faultbench(void)
{
	size_t half = (fb_ret_bytes > fb_bytes ? fb_ret_bytes : fb_bytes) + 8192;
	uint8_t *region = aligned_alloc(4096, 2 * half);
	size_t cap = 200000, count = fb_bytes / type_size(fb_type);
	struct sample *s = malloc(cap * sizeof(*s));
	static const char *const kind_names[] = { "kill", "stop", "term", "restart", "readmit",
						  "resume", "upgrade" };
	char aggs_all[1024];

	REQUIRE(!opt.type || faultbench_option('t', opt.type) == 0, "--type %s: unknown", opt.type);
	count = fb_bytes / type_size(fb_type);
	REQUIRE(region && s && count, "malloc");
	memset(region, 0, 2 * half);
	for (size_t i = 0; i < count; i++)
		put(fb_type, region, i, in_val(fb_type, ncclSum, my_rank, i));
	snprintf(aggs_all, sizeof(aggs_all), "%s", getenv("SUMCAST_AGGREGATORS"));
	fb_retention(region, half);
	if (my_rank == 0 && !opt.json)
		printf("# %d nodes, %d aggregators, %zu-byte %s allreduces, split %s, PING deadline %s\n"
		       "#%-8s %14s %8s %9s %8s %8s %10s %10s %10s %8s\n",
		       opt.nranks, opt.naggs, fb_bytes, type_name(fb_type), opt.split ? opt.split : "1",
		       getenv("SUMCAST_AGG_DEADLINE") ? getenv("SUMCAST_AGG_DEADLINE") : "2s", "kind",
		       "detect ms", "agree ms", "recover ms", "p50 ms", "max ms", "before GB/s", "after GB/s",
		       "fresh GB/s", "aft/fre");
	setenv("SUMCAST_SPLIT", opt.split ? opt.split : "1", 1);
	int round = 0;
	bool return_head = false;
	for (const char *k = fb_kinds; *k; round++) {
		size_t len = strcspn(k, ",");
		fb_kind = -1;
		for (int i = 0; i < 7; i++)
			if (strlen(kind_names[i]) == len && !strncmp(k, kind_names[i], len))
				fb_kind = i;
		REQUIRE(fb_kind >= 0, "--kinds: unknown kind %.*s", (int)len, k);
		k += len + (k[len] == ',');
		fb_agg = round % opt.naggs;
		if (fb_kind >= 4) {
			if (my_rank == 0 && !opt.json && !return_head)
				printf("# returns: the aggregator comes back into the running communicator\n"
				       "#%-8s %9s %9s %10s %10s %10s %8s %7s\n", "kind", "back ms", "out ms",
				       "before GB/s", "out GB/s", "after GB/s", "aft/bef", "faults");
			return_head = true;
			setenv("SUMCAST_AGGREGATORS", aggs_all, 1);
			fb_return(region, half, count, s, cap, kind_names[fb_kind], round);
			continue;
		}
		char name[32];
		snprintf(name, sizeof(name), "fb-%d", round);
		setenv("SUMCAST_AGGREGATORS", aggs_all, 1);
		fb_open(name);
		coll_rv_name = name;
		void *mh, *cc = coll_setup(region, 2 * half, &mh);
		size_t n = 0;
		saw_fault = 0;
		fb_t_first = fb_t_decided = 0;
		fb_run(cc, mh, region, region + half, count, 0.3, s, &n, cap, -1, NULL); /* warm-up */
		n = 0;
		double t_start = sc_now_s();
		fb_run(cc, mh, region, region + half, count, fb_before + fb_after, s, &n, cap, fb_before,
		       fb_inject);
		struct plug faulted = P;
		/* every node's first sign and decision; rank 0's injection time */
		double mine[3] = { fb_t_first, fb_t_decided, fb_t_inject }, all[MAX_RANKS][3];
		char tname[48];
		snprintf(tname, sizeof(tname), "times-%s", name);
		rv_put(tname, my_rank, mine, sizeof(mine));
		for (int r = 0; r < opt.nranks; r++)
			rv_get(tname, r, all[r], sizeof(all[r]));
		double t_inj = all[0][2], first_min = INFINITY, first_max = 0, agree_max = 0;
		for (int r = 0; r < opt.nranks; r++) {
			if (all[r][0] <= 0)
				continue;
			first_min = all[r][0] < first_min ? all[r][0] : first_min;
			first_max = all[r][0] > first_max ? all[r][0] : first_max;
			double ag = all[r][1] - all[r][0];
			agree_max = ag > agree_max ? ag : agree_max;
		}
		double recovered = 0;
		for (size_t i = 0; i < n && isfinite(first_min); i++)
			if (s[i].t1 > first_min && (!recovered || s[i].t1 < recovered))
				recovered = s[i].t1;
		static double lat[200000];
		size_t nl = 0;
		double maxl = 0;
		for (size_t i = 0; i < n && recovered; i++)
			if (s[i].t1 >= t_inj - 1 && s[i].t0 <= recovered + 1) {
				lat[nl++] = s[i].t1 - s[i].t0;
				maxl = s[i].t1 - s[i].t0 > maxl ? s[i].t1 - s[i].t0 : maxl;
			}
		double p50 = median(lat, nl);
		double before = fb_gbps(s, n, t_start, t_inj, fb_bytes);
		/* A fresh communicator over the survivors, measured interleaved
		 * with the one that survived the fault: load from elsewhere on the
		 * machine hits both alike. */
		char surv[1024] = "";
		const char *p = aggs_all;
		for (int i = 0; *p; i++) {
			size_t l = strcspn(p, ",");
			if (i != fb_agg)
				snprintf(surv + strlen(surv), sizeof(surv) - strlen(surv), "%s%.*s",
					 surv[0] ? "," : "", (int)l, p);
			p += l + (p[l] == ',');
		}
		snprintf(name, sizeof(name), "fresh-%d", round);
		if (surv[0])
			setenv("SUMCAST_AGGREGATORS", surv, 1);
		else
			unsetenv("SUMCAST_AGGREGATORS");
		fb_open(name);
		struct plug fresh_p = P;
		coll_rv_name = name;
		void *mh2, *cc2 = coll_setup(region, 2 * half, &mh2);
		double g[2][FB_ROUNDS];
		for (int r = 0; r < FB_ROUNDS; r++)
			for (int x = 0; x < 2; x++) {
				int v = (r + x) % 2;
				size_t m = 0;
				P = v ? fresh_p : faulted;
				double f0 = sc_now_s();
				fb_run(v ? cc2 : cc, v ? mh2 : mh, region, region + half, count, fb_after / FB_ROUNDS,
				       s + n, &m, cap - n, -1, NULL);
				g[v][r] = fb_gbps(s + n, m, f0, sc_now_s(), fb_bytes);
			}
		double after = median(g[0], FB_ROUNDS), fresh = median(g[1], FB_ROUNDS);
		P = fresh_p;
		fb_close(cc2, mh2);
		P = faulted;
		fb_close(cc, mh);
		fb_heal();
		snprintf(tname, sizeof(tname), "end-%s", name);
		rv_barrier(tname);
		if (my_rank != 0)
			continue;
		double detect_lo = isfinite(first_min) ? (first_min - t_inj) * 1e3 : NAN;
		double detect_hi = isfinite(first_min) ? (first_max - t_inj) * 1e3 : NAN;
		double rec = recovered && isfinite(first_min) ? (recovered - first_min) * 1e3 : NAN;
		if (opt.json)
			printf("{\"bench\":\"faults\",\"row\":\"fault\",\"kind\":\"%s\",\"nranks\":%d,\"naggs\":%d,"
			       "\"bytes\":%zu,\"type\":\"%s\",\"detect_ms_min\":%.1f,\"detect_ms_max\":%.1f,"
			       "\"agree_ms\":%.1f,\"recover_ms\":%.1f,\"p50_ms\":%.2f,\"max_ms\":%.1f,"
			       "\"before_gbps\":%.4f,\"after_gbps\":%.4f,\"fresh_gbps\":%.4f,\"after_fresh\":%.3f,"
			       "\"faults_logged\":%d}\n",
			       kind_names[fb_kind], opt.nranks, opt.naggs, fb_bytes, type_name(fb_type), detect_lo,
			       detect_hi, agree_max * 1e3, rec, p50 * 1e3, maxl * 1e3, before, after, fresh,
			       fresh > 0 ? after / fresh : 0, saw_fault);
		else
			printf(" %-8s %6.1f..%-6.1f %8.1f %9.1f %8.2f %8.1f %10.3f %10.3f %10.3f %8.3f\n",
			       kind_names[fb_kind], detect_lo, detect_hi, agree_max * 1e3, rec, p50 * 1e3,
			       maxl * 1e3, before, after, fresh, fresh > 0 ? after / fresh : 0);
		fflush(stdout);
	}
	if (fb_watch_on) {
		setenv("SUMCAST_SPLIT", opt.split ? opt.split : "1", 1);
		fb_watch(region, half, count, aggs_all);
	}
	free(s);
	free(region);
}
