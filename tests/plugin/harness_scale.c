/* The scale test (harness scale) and bench/scale's runs: --heads H plays
 * CollNet Direct's communicators, one process per GPU rank. Process p is
 * head h = p / N of node n = p % N; head h of every node forms collnet
 * communicator h (NCCL's ncclTransportCollNetSetup builds one per head
 * position), with its own listen, rendezvous, connect, job id and requests
 * in flight. Each process times its connect (listen to connect), runs
 * 1 + --iters allreduces of 8 B and of 2 MiB (f32 sums, each checked
 * exactly; the first untimed),
 * then every process meets at a barrier: process 0 reads the daemons'
 * /stats (every job held by every daemon, every rank joined, chunks > 0,
 * posted receives, RSS) while the jobs are open, and holds the barrier a
 * second, over which each process measures its CPU time (its waits, the
 * plugin's, libfabric's and the client library's threads: nothing may
 * spin). The parent (scale_report) reads every process's figures: connect
 * time from the first listen to the last connect, RSS, idle CPU, the
 * allreduce times; one line, or a JSON row with --json. */
#include "harness.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "proc.h"
#include "ranks.h"

/* What each process leaves for the parent. */
struct scale_res {
	double t_start, t_listen, t_connected; /* CLOCK_MONOTONIC, s: one clock for all processes */
	double t_small, t_big, t_closed;       /* the 8 B, the 2 MiB allreduces, close ended */
	double t_sweep;                        /* --sweep ended (0: none) */
	int sweep_checks;
	double t8_us, t2m_us;         /* mean time of one allreduce of 8 B, of 2 MiB */
	double idle_cpu_s, idle_wall_s;
	double connect_cpu_s;  /* CPU time from listen to connected */
	int threads;           /* this process's threads while idle */
	uint64_t rss_kb, hwm_kb;
	int agg_path, warns;
};

/* What process 0 saw of the daemons while every job was open. */
struct scale_aggs {
	int ndaemons, jobs_ok;
	uint64_t rss_kb_max, posted_max, memory_max, min_chunks, bytes_in;
};

/* HARNESS_SWEEP_ROUNDS: the sweep that many times over (default 1). */
static int sweep_rounds(void)
{
	const char *e = getenv("HARNESS_SWEEP_ROUNDS");
	return e && atoi(e) > 0 ? atoi(e) : 1;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --iters allreduces of count f32 (inputs shifted each time), every
 * element checked against the reference; the mean time of one (the checks
 * outside it), in us. Inputs and sums of ncclSum repeat every 9 elements
 * (harness_check.c's in_val): one table of each, so that 128 processes'
 * checks do not take the host's cores from the requests. */
static double allreduces(void *cc, uint8_t *send, uint8_t *recv, size_t count, void *mh)
{
	float in9[9], ref9[9];
	double t = 0;

	for (size_t k = 0; k < 9; k++) {
		in9[k] = (float)in_val(ncclFloat32, ncclSum, my_rank, k);
		ref9[k] = (float)ref_val(ncclFloat32, ncclSum, k);
		REQUIRE(in9[k] == (float)in_val(ncclFloat32, ncclSum, my_rank, k + 9) &&
			      ref9[k] == (float)ref_val(ncclFloat32, ncclSum, k + 9),
		      "harness: ncclSum inputs no longer repeat every 9 elements");
	}
	rv_barrier(count > 2 ? "big" : "small");
	/* it -1: untimed, checked: the first request of a size (connections
	 * the provider sets up at first use) and the barrier's skew */
	for (int it = -1; it < opt.iters; it++) {
		float *s = (float *)send, *r = (float *)recv;
		for (size_t i = 0; i < count; i++)
			s[i] = in9[(i + (size_t)(it + 9)) % 9];
		memset(recv, 0xA5, count * 4);
		double t0 = sc_now_s();
		allreduce_chunked(cc, send, recv, count, ncclFloat32, ncclSum, mh);
		if (it >= 0)
			t += sc_now_s() - t0;
		for (size_t i = 0; i < count; i++)
			REQUIRE(r[i] == ref9[(i + (size_t)(it + 9)) % 9],
			      "allreduce %d of %zu f32: element %zu is %g, want %g", it, count, i,
			      (double)r[i], (double)ref9[(i + (size_t)(it + 9)) % 9]);
	}
	return t / opt.iters * 1e6;
}

/* Process 0, every job open: each daemon must hold the H jobs, every rank
 * joined, each with chunks reduced (with --expect agg). */
static void check_daemons(const char *name, bool final)
{
	struct scale_aggs a = { .ndaemons = daemons_count(), .min_chunks = UINT64_MAX };
	unsigned long long ids[SC_RANKS_MAX];
	int head = my_head;

	for (int h = 0; h < opt.heads; h++) {
		my_head = h;
		rv_get("jobid", 0, &ids[h], sizeof(ids[h]));
		for (int k = 0; k < h; k++)
			REQUIRE(ids[k] != ids[h], "heads %d and %d have the same job id 0x%llx", k, h, ids[h]);
	}
	my_head = head;
	for (int i = 0; i < a.ndaemons; i++) {
		struct agg_jobs j;
		REQUIRE(daemon_jobs(i, ids, opt.heads, &j) == 0, "aggregator %d: /stats did not answer or parse", i);
		a.jobs_ok += j.held;
		a.rss_kb_max = j.rss_kb > a.rss_kb_max ? j.rss_kb : a.rss_kb_max;
		a.posted_max = j.posted_recvs > a.posted_max ? j.posted_recvs : a.posted_max;
		a.memory_max = j.memory > a.memory_max ? j.memory : a.memory_max;
		a.min_chunks = j.min_chunks < a.min_chunks ? j.min_chunks : a.min_chunks;
		a.bytes_in += j.bytes_in;
		if (final && opt.expect && !strcmp(opt.expect, "agg"))
			REQUIRE(j.held == opt.heads && j.min_chunks > 0,
			      "aggregator %d holds %d of the %d jobs with every rank joined, the fewest chunks "
			      "one reduced: %llu", i, j.held, opt.heads, (unsigned long long)j.min_chunks);
	}
	if (!a.ndaemons)
		a.min_chunks = 0;
	rv_put(name, 0, &a, sizeof(a));
}

void run_scale(void)
{
	const size_t big = (2u << 20) / 4;
	size_t region_len = 2 * (2u << 20);
	if (opt.sweep && sweep_region_bytes(opt.sweep, opt.sweep_w) > region_len)
		region_len = sweep_region_bytes(opt.sweep, opt.sweep_w);
	uint8_t *region = aligned_alloc(4096, region_len);
	struct scale_res res = { 0 };
	void *mh = NULL;
	bool agg = opt.expect && !strcmp(opt.expect, "agg");

	REQUIRE(region, "malloc");
	res.t_start = sc_now_s();
	plugin_open(true);
	res.t_listen = sc_now_s();
	double cc0 = cpu_s();
	void *cc = coll_setup(region, region_len, &mh);
	res.t_connected = sc_now_s();
	res.connect_cpu_s = cpu_s() - cc0;
	/* every node of a communicator announces the same job: rank 0's */
	if (my_rank == 0)
		rv_put("jobid", 0, &saw_job_id, sizeof(saw_job_id));
	unsigned long long job0 = 0;
	rv_get("jobid", 0, &job0, sizeof(job0));
	REQUIRE(saw_job_id && saw_job_id == job0, "connect announced job 0x%llx, rank 0 of this "
	      "communicator job 0x%llx", saw_job_id, job0);
	if (agg)
		REQUIRE(saw_agg_path && !saw_fallback && saw_naggs == opt.naggs,
		      "expected the aggregators: connect logged aggregators=%d (%d of %d) fallback=%d",
		      saw_agg_path, saw_naggs, opt.naggs, saw_fallback);
	if (opt.expect && !strcmp(opt.expect, "ring"))
		REQUIRE(!saw_agg_path, "expected the ring: connect announced the aggregators");
	uint8_t *send = region, *recv = region + (2u << 20);
	res.t8_us = allreduces(cc, send, recv, 2, mh);
	res.t_small = sc_now_s();
	res.t2m_us = allreduces(cc, send, recv, big, mh);
	res.t_big = sc_now_s();
	if (opt.sweep) {
		/* the daemons' byte counts of the allreduces above, before the
		 * sweep's windows (owner-only) add theirs */
		rv_barrier_all("presweep", 0);
		if (my_proc == 0)
			check_daemons("aggs", false);
		rv_barrier_all("presweep-checked", 0);
		for (int k = 0; k < sweep_rounds(); k++)
			res.sweep_checks += sweep_run(cc, mh, region, region_len, opt.sweep, opt.sweep_w);
		res.t_sweep = sc_now_s();
	}
	long long rss = sc_proc_status(0, "VmRSS"), hwm = sc_proc_status(0, "VmHWM");
	res.rss_kb = rss > 0 ? (uint64_t)rss : 0;
	res.hwm_kb = hwm > 0 ? (uint64_t)hwm : 0;
	/* every request of every process done: the daemons' counters, then an
	 * idle second (process 0 holds the barrier) */
	rv_barrier_all("done", 0);
	if (my_proc == 0)
		check_daemons(opt.sweep ? "aggs-end" : "aggs", true);
	rv_barrier_all("checked", 0);
	double c0 = cpu_s(), w0 = sc_now_s();
	rv_barrier_all("idle", 1.0);
	res.idle_cpu_s = cpu_s() - c0;
	res.idle_wall_s = sc_now_s() - w0;
	long long nthreads = sc_proc_status(0, "Threads");
	res.threads = nthreads > 0 ? (int)nthreads : 0;
	NCHECK(CN_CALL(deregMr, cc, mh));
	NCHECK(CN_CALL(closeColl, cc));
	plugin_finalize(true);
	res.t_closed = sc_now_s();
	res.agg_path = saw_agg_path;
	res.warns = saw_warn;
	if (agg)
		REQUIRE(!saw_warn, "the plugin logged %d WARN line(s) (a fallback, a fault)", saw_warn);
	rv_put("res", my_rank, &res, sizeof(res));
	free(region);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* What process 0 saw of the daemons (check_daemons), zeros when missing. */
static void read_aggs(const char *name, struct scale_aggs *a)
{
	char p[PATH_MAX + 64];
	FILE *f;

	memset(a, 0, sizeof(*a));
	rv_path(p, sizeof(p), name, 0, 0);
	f = fopen(p, "rb");
	if (!f)
		return;
	if (fread(a, sizeof(*a), 1, f) != 1)
		memset(a, 0, sizeof(*a));
	fclose(f);
}

int scale_report(void)
{
	int nproc = opt.nranks * opt.heads, rc = 0;
	double t_first = 1e300, t_last = 0, proc_max = 0, t8 = 0, t2m = 0, idle_max = 0;
	double t_start = 1e300, t_small = 0, t_big = 0, t_closed = 0, idle_sum = 0, ccpu_max = 0;
	int threads = 0, warns = 0, sweep_total = 0;
	double t_sweep = 0;
	static double conn[SC_RANKS_MAX];
	uint64_t rss_max = 0, rss_sum = 0, hwm_max = 0;
	struct scale_aggs a, pre; /* at the end; before the sweep (the end without one) */
	char p[PATH_MAX + 64];

	for (int q = 0; q < nproc; q++) {
		struct scale_res r;
		rv_path(p, sizeof(p), "res", q / opt.nranks, q % opt.nranks);
		FILE *f = fopen(p, "rb");
		if (!f || fread(&r, sizeof(r), 1, f) != 1) {
			fprintf(stderr, "FAIL: process %d left no result (%s)\n", q, p);
			if (f)
				fclose(f);
			return 1;
		}
		fclose(f);
		t_first = r.t_listen < t_first ? r.t_listen : t_first;
		t_start = r.t_start < t_start ? r.t_start : t_start;
		t_small = r.t_small > t_small ? r.t_small : t_small;
		t_big = r.t_big > t_big ? r.t_big : t_big;
		t_closed = r.t_closed > t_closed ? r.t_closed : t_closed;
		t_sweep = r.t_sweep > t_sweep ? r.t_sweep : t_sweep;
		if (q % opt.nranks == 0) /* one process per communicator: they share its items */
			sweep_total += r.sweep_checks;
		t_last = r.t_connected > t_last ? r.t_connected : t_last;
		conn[q] = r.t_connected - r.t_listen;
		proc_max = conn[q] > proc_max ? conn[q] : proc_max;
		t8 = r.t8_us > t8 ? r.t8_us : t8;
		t2m = r.t2m_us > t2m ? r.t2m_us : t2m;
		double idle = r.idle_cpu_s / (r.idle_wall_s > 0 ? r.idle_wall_s : 1);
		idle_max = idle > idle_max ? idle : idle_max;
		idle_sum += idle;
		ccpu_max = r.connect_cpu_s > ccpu_max ? r.connect_cpu_s : ccpu_max;
		threads = r.threads > threads ? r.threads : threads;
		warns += r.warns;
		rss_max = r.rss_kb > rss_max ? r.rss_kb : rss_max;
		hwm_max = r.hwm_kb > hwm_max ? r.hwm_kb : hwm_max;
		rss_sum += r.rss_kb;
	}
	qsort(conn, (size_t)nproc, sizeof(conn[0]), cmp_double);
	read_aggs(opt.sweep ? "aggs-end" : "aggs", &a);
	read_aggs("aggs", &pre);
	double connect_s = t_last - t_first;
	const char *fan = getenv("SUMCAST_FAN_IN");
	if (opt.json)
		printf("{\"bench\":\"scale\",\"nodes\":%d,\"heads\":%d,\"processes\":%d,\"aggs\":%d,"
		       "\"fan_in\":%s,\"split\":\"%s\",\"iters\":%d,\"connect_s\":%.3f,"
		       "\"connect_proc_median_s\":%.3f,\"connect_proc_max_s\":%.3f,\"node_rss_kb_max\":%llu,"
		       "\"node_rss_kb_mean\":%llu,\"node_hwm_kb_max\":%llu,\"idle_cpu_max\":%.4f,"
		       "\"idle_cpu_sum\":%.4f,\"connect_cpu_max_s\":%.3f,\"node_threads\":%d,\"plugin_warns\":%d,"
		       "\"t_8B_us\":%.1f,\"t_2MiB_us\":%.1f,\"agg_jobs_held\":%d,\"agg_rss_kb_max\":%llu,"
		       "\"agg_posted_recvs_max\":%llu,\"agg_job_memory_max\":%llu,\"agg_min_chunks\":%llu}\n",
		       opt.nranks, opt.heads, nproc, opt.naggs, fan && *fan ? fan : "null",
		       opt.split ? opt.split : "default", opt.iters, connect_s, conn[nproc / 2], proc_max,
		       (unsigned long long)rss_max, (unsigned long long)(rss_sum / (uint64_t)nproc),
		       (unsigned long long)hwm_max, idle_max, idle_sum, ccpu_max, threads, warns, t8, t2m, a.jobs_ok,
		       (unsigned long long)a.rss_kb_max, (unsigned long long)a.posted_max,
		       (unsigned long long)a.memory_max, (unsigned long long)a.min_chunks);
	else
		printf("scale: %d nodes x %d heads (%d processes), %d aggregators: connect %.2f s (first "
		       "listen to last connect; one process: median %.2f, max %.2f s); allreduce 8 B %.1f us, "
		       "2 MiB %.1f us (max over processes of the mean of %d, each exact); node RSS max %llu "
		       "kB (mean %llu, peak %llu); idle CPU max %.1f ms/s, all processes %.1f ms/s (%d threads "
		       "each at most); connect CPU max %.2f s; aggregators: %d jobs held, RSS max "
		       "%llu kB, posted receives max %llu, job memory %llu B, fewest chunks %llu\n",
		       opt.nranks, opt.heads, nproc, opt.naggs, connect_s, conn[nproc / 2], proc_max, t8, t2m,
		       opt.iters, (unsigned long long)rss_max, (unsigned long long)(rss_sum / (uint64_t)nproc),
		       (unsigned long long)hwm_max, idle_max * 1e3, idle_sum * 1e3, threads, ccpu_max, a.jobs_ok,
		       (unsigned long long)a.rss_kb_max, (unsigned long long)a.posted_max,
		       (unsigned long long)a.memory_max, (unsigned long long)a.min_chunks);
	/* split 1: every byte of every request went to the aggregators, once */
	uint64_t want_in = (uint64_t)nproc * (uint64_t)(opt.iters + 1) * (8 + (2u << 20));
	if (opt.expect && !strcmp(opt.expect, "agg") && opt.split && !strcmp(opt.split, "1") &&
	    pre.bytes_in != want_in) {
		fprintf(stderr, "FAIL: the aggregators counted %llu bytes in, the requests carried %llu\n",
			(unsigned long long)pre.bytes_in, (unsigned long long)want_in);
		rc = 1;
	}
	if (!opt.json)
		printf("scale: phases (s, the last process to end each): started to first listen %.2f, "
		       "connected %.2f, 8 B done %.2f, 2 MiB done %.2f, closed %.2f\n", t_first - t_start,
		       t_last - t_start, t_small - t_start, t_big - t_start, t_closed - t_start);
	if (opt.sweep && !opt.json)
		printf("scale: sweep of %zu elements, windows of %zu per rank: %d checks over the %d "
		       "communicator(s), each exact on every process of its communicator, done at %.2f s\n",
		       opt.sweep, opt.sweep_w, sweep_total, opt.heads, t_sweep - t_start);
	int sweep_want = sweep_rounds() * sweep_checks_all(opt.sweep, opt.sweep_w);
	if (opt.sweep && sweep_total != sweep_want) {
		fprintf(stderr, "FAIL: the communicators made %d of the sweep's %d checks\n", sweep_total,
			sweep_want);
		rc = 1;
	}
	if (opt.expect && !strcmp(opt.expect, "agg") && a.jobs_ok != opt.heads * opt.naggs) {
		fprintf(stderr, "FAIL: the aggregators held %d jobs with every rank joined, want %d\n",
			a.jobs_ok, opt.heads * opt.naggs);
		rc = 1;
	}
	if (opt.max_connect_s > 0 && connect_s > opt.max_connect_s) {
		fprintf(stderr, "FAIL: connect took %.2f s, bound %.2f s\n", connect_s, opt.max_connect_s);
		rc = 1;
	}
	/* all processes together: H x N processes share the host's cores, so
	 * one that spins shows as the cores' share it got, not as 1 s */
	if (opt.max_idle_cpu > 0 && idle_sum > opt.max_idle_cpu) {
		fprintf(stderr, "FAIL: the %d processes used %.1f ms of CPU per idle second together "
			"(one at most %.1f ms), bound %.1f ms\n", nproc, idle_sum * 1e3, idle_max * 1e3,
			opt.max_idle_cpu * 1e3);
		rc = 1;
	}
	return rc;
}
