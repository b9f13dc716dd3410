/* The bench mode (bench/allreduce): ring, aggregators and split modes
 * interleaved in the same ranks, one copy of the plugin each. */
#include "harness.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fabric.h"
#include "hostport.h"
#include "sumcastd_proc.h"
#include "../../plugin/split.h"

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

int bench_coll; /* --coll: 0 allreduce, 1 reducescatter, 2 allgather */
static bool bench_no_rtt; /* --no-rtt: no fabric_rtt samples (profiles of the modes alone) */
/* --timeline: also a JSON row per sample (mode, round, wall time at its
 * end), for runs whose conditions change under them (bench/cluster/run
 * --scenario) */
static bool bench_timeline;
static const char *const bench_coll_names[] = { "allreduce", "reducescatter", "allgather" };

/* ---- fabric_rtt: an 8-byte ping-pong between ranks 0 and 1 over the
 * provider the plugin uses (SUMCAST_PROVIDER, SUMCAST_IFACE), on an
 * endpoint of its own (common/fabric.c, the wrapper the plugin and the
 * client use), interleaved with the modes in the rounds of the first size.
 * The floor of the aggregator path: node -> aggregator -> node is one
 * round trip. ---- */

#define RTT_PER_SAMPLE 100

struct rtt {
	struct fabric *f;
	fi_addr_t peer;
	uint8_t *buf; /* [0, 64): send, [64, 128): receive */
	struct fabric_mr mr;
	bool on;
};

static void rtt_open(struct rtt *x)
{
	uint8_t addr[FABRIC_ADDR_MAX];

	memset(x, 0, sizeof(*x));
	if (opt.nranks < 2 || my_rank > 1 || bench_no_rtt)
		return;
	const char *iface = getenv("SUMCAST_IFACE");
	struct fabric_params p = { .provider = getenv("SUMCAST_PROVIDER"),
				   .node = iface && *iface ? iface : NULL };
	REQUIRE(fabric_open(&p, &x->f) == 0, "fabric_rtt: fabric_open(%s) failed", p.provider);
	x->buf = aligned_alloc(4096, 4096);
	REQUIRE(x->buf && fabric_mr_reg(x->f, x->buf, 4096, &x->mr) == 0, "fabric_rtt: memory");
	memset(x->buf, 0, 4096);
	memset(addr, 0, sizeof(addr));
	memcpy(addr, x->f->addr, x->f->addrlen);
	rv_put("rtt-addr", my_rank, addr, sizeof(addr));
	rv_get("rtt-addr", 1 - my_rank, addr, sizeof(addr));
	REQUIRE(fabric_av_insert(x->f, addr, x->f->addrlen, &x->peer) == 0, "fabric_rtt: av insert");
	x->on = true;
}

static double rtt_sample(struct rtt *x);

/* After rtt_open on ranks 0 and 1: the connection set up (rxm connects at
 * the first send), outside the samples. */
static void rtt_warm(struct rtt *x)
{
	if (x->on)
		(void)rtt_sample(x);
}

static void rtt_close(struct rtt *x)
{
	if (!x->on)
		return;
	fabric_mr_dereg(&x->mr);
	fabric_close(x->f);
	free(x->buf);
	x->on = false;
}

/* Posts a send (tag 1 from rank 0, 2 from rank 1) or a receive of 8 bytes. */
static void rtt_post(struct rtt *x, bool send, uint64_t tag, struct fabric_op *op, double end)
{
	struct fabric_cqe cqe;
	int rc;

	for (;;) {
		rc = send ? fabric_tsend(x->f, x->buf, 8, x->mr.desc, x->peer, tag, 0, op)
			  : fabric_trecv(x->f, x->buf + 64, 8, x->mr.desc, FI_ADDR_UNSPEC, tag, 0, op);
		if (rc != -FI_EAGAIN)
			break;
		REQUIRE(fabric_cq_poll(x->f, &cqe, 0) >= 0 && sc_now_s() < end,
		      "fabric_rtt: queue full");
	}
	REQUIRE(rc == 0, "fabric_rtt: post: %d", rc);
}

/* Polls until n operations completed (each of ours exactly once). */
static void rtt_wait(struct rtt *x, int n, double end)
{
	struct fabric_cqe cqe;

	while (n > 0) {
		int k = fabric_cq_poll(x->f, &cqe, 1);
		REQUIRE(k >= 0 && (k == 0 || cqe.err == 0), "fabric_rtt: completion error %d / %d", k,
		      k > 0 ? cqe.err : 0);
		n -= k;
		REQUIRE(sc_now_s() < end, "fabric_rtt: no completion in 30 s");
		/* no yield: the provider's raw round trip, as fi_pingpong
		 * measures it (the other ranks sleep meanwhile) */
	}
}

/* One sample: RTT_PER_SAMPLE round trips; rank 0's mean in us (rank 1: 0).
 * Rank 0 posts its receive before its send, rank 1 answers each ping. */
static double rtt_sample(struct rtt *x)
{
	double end = sc_now_s() + 30;
	struct fabric_op sop, rop;
	uint64_t t0 = sc_now_ns();

	for (int i = 0; i < RTT_PER_SAMPLE; i++) {
		if (my_rank == 0) {
			rtt_post(x, false, 2, &rop, end);
			rtt_post(x, true, 1, &sop, end);
			rtt_wait(x, 2, end);
		} else {
			rtt_post(x, false, 1, &rop, end);
			rtt_wait(x, 1, end);
			rtt_post(x, true, 2, &sop, end);
			rtt_wait(x, 1, end);
		}
	}
	return my_rank == 0 ? (sc_now_ns() - t0) / 1e3 / RTT_PER_SAMPLE : 0;
}

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
/* Enough for bench/latency-profile's window on a quiet host (8 bytes, N = 4:
 * ~1.3 ms a round, 2,000 rounds were 2.6 s). */
#define BENCH_ROUNDS_MAX 20000
/* Modes: ring, agg, auto by default; --variant NAME=SPLIT[@PLUGIN] (repeated)
 * replaces them, e.g. to compare two builds of the plugin in one run, where
 * the machine's load hits both alike. SPLIT 0 means no aggregators. */
static int BENCH_MODES = 3;
static bool bench_default = true;
static const char *bench_names[BENCH_MAX] = { "ring", "agg", "auto" };
static const char *bench_split_env[BENCH_MAX] = { "0", "1", "auto" };
static const char *bench_plugin[BENCH_MAX];
/* "VAR=VAL[%VAR=VAL...]": set while this variant's plugin initialises */
static char *bench_env[BENCH_MAX];

/* Sets (on) or unsets (!on) every VAR=VAL of a variant's list. */
static void bench_env_apply(const char *list, bool on)
{
	char buf[1024];

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *e = strtok_r(buf, "%", &save); e; e = strtok_r(NULL, "%", &save)) {
		char *eq = strchr(e, '=');
		if (!eq)
			continue;
		*eq = 0;
		if (on)
			setenv(e, eq + 1, 1);
		else
			unsetenv(e);
	}
}
/* SUMCAST_HARNESS_AGG_METRICS=1 (bench/cluster/run, agg-mcast): rank 0
 * reads every aggregator's /metrics (HTTP port 7801 on the host of each
 * SUMCAST_AGGREGATORS entry) before each mode's sample and at the end of
 * each round, outside the timed calls, and gives each mode the aggregators'
 * RESULT bytes sent, CPU seconds and multicast repairs between its reads. */
struct aggm {
	double tx, cpu, repairs;
};
static bool aggm_on;

static bool aggm_read(struct aggm *out)
{
	static char body[1 << 16];
	const char *list = getenv("SUMCAST_AGGREGATORS");
	struct hostport hp;
	int rc;

	memset(out, 0, sizeof(*out));
	while ((rc = hostport_list_next(&list, &hp, NULL, 0)) > 0) {
		if (sc_http_get_at(hp.host, 7801, "/metrics", NULL, 0, body, sizeof(body), 2000) != 200)
			return false;
		double v[3] = { sc_metric_value(body, "sumcast_sent_bytes_total"),
				sc_metric_value(body, "process_cpu_seconds_total"),
				sc_metric_value(body, "sumcast_multicast_repairs_total") };
		out->tx += v[0] > 0 ? v[0] : 0;
		out->cpu += v[1] > 0 ? v[1] : 0;
		out->repairs += v[2] > 0 ? v[2] : 0;
	}
	return rc == 0;
}

/* A read: what came since the last one goes to mode `last`; the next to m
 * (-1: nobody). */
static void aggm_mark(struct aggm *acc, int *last, struct aggm *prev, int m)
{
	struct aggm now;

	if (!aggm_on || my_rank != 0)
		return;
	if (!aggm_read(&now)) {
		fprintf(stderr, "bench: an aggregator's /metrics did not answer; no aggregator figures\n");
		aggm_on = false;
		return;
	}
	if (*last >= 0) {
		acc[*last].tx += now.tx - prev->tx;
		acc[*last].cpu += now.cpu - prev->cpu;
		acc[*last].repairs += now.repairs - prev->repairs;
	}
	*prev = now;
	*last = m;
}

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
		bench_env_apply(bench_env[m], true);
	opt.plugin = so;
	memset(&P, 0, sizeof(P));
	plugin_open(true);
	if (bench_env[m])
		bench_env_apply(bench_env[m], false);
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

/* One collective of `bytes` (the nccl-tests size: the whole buffer for
 * reduce-scatter and allgather, nranks blocks of bytes / nranks). */
static void bench_op(struct bench_inst *b, uint8_t *send, uint8_t *recv, size_t bytes, ncclDataType_t t)
{
	size_t es = type_size(t);
	if (bench_coll == 0) {
		allreduce_chunked(b->cc, send, recv, bytes / es, t, ncclSum, b->mh);
		return;
	}
	size_t bpr = bytes / (size_t)opt.nranks / es * es;
	window_chunked(b->cc, bench_coll, send, recv, bpr, t, ncclSum, b->mh);
}

/* The bytes one collective of `size` moves here: the nccl-tests size
 * rounded to nranks whole-element blocks for the window collectives. */
static size_t bench_bytes(size_t size, size_t es)
{
	if (bench_coll == 0)
		return size / es * es;
	return size / (size_t)opt.nranks / es * es * (size_t)opt.nranks;
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
	if (bench_coll) /* windows of at most 2 MiB go all to one path */
		return split_window_agg(&m, bytes < (2u << 20) ? bytes : (2u << 20), bench_coll == 2) ? 1 : 0;
	return split_fraction(&m, bytes);
}

void run_bench(void)
{
	ncclDataType_t t = ncclFloat32;
	REQUIRE(parse_type(opt.type, &t) == 0, "--type %s: one of i8 u8 i32 u32 i64 u64 f16 f32 f64 bf16", opt.type);
	size_t es = type_size(t), half = opt.max_bytes < 64 ? 64 : opt.max_bytes;
	half = (half + 4095) & ~(size_t)4095;
	size_t region_len = 2 * half + 4096; /* + the round barrier's buffers */
	uint8_t *region = aligned_alloc(4096, region_len);
	struct bench_inst inst[BENCH_MAX];
	int N = opt.nranks, speed = 0;
	bool have_aggs = getenv("SUMCAST_AGGREGATORS") && *getenv("SUMCAST_AGGREGATORS");

	REQUIRE(region, "malloc %zu", region_len);
	memset(region, 0, region_len);
	memset(inst, 0, sizeof(inst));
	for (int m = 0; m < BENCH_MODES; m++) {
		if (strcmp(bench_split_env[m], "0") && !have_aggs)
			continue;
		bench_open(&inst[m], m, region, region_len);
		if (m == 0)
			net_props(&speed, &bench_lat_us, NULL);
	}
	uint8_t *send = region, *recv = region + half;
	/* Every rank contributes 1.0: sums stay exact, reductions do real work,
	 * and the first call of every mode and size is checked (sum == N;
	 * allgather: 1.0 everywhere). */
	uint8_t one[8] = { 0 }, want[8] = { 0 };
	bool checked = t == ncclFloat32 || t == ncclBfloat16 || t == ncclFloat16;
	double bus = bench_coll ? (double)(N - 1) / N : 2.0 * (N - 1) / N;
	struct rtt rtt;
	rtt_open(&rtt);
	rtt_warm(&rtt);
	if (checked) {
		put(t, one, 0, 1);
		put(t, want, 0, bench_coll == 2 ? 1 : N);
		for (size_t i = 0; i < half / es; i++)
			memcpy(send + i * es, one, es);
	}
	double *tx = (double *)(region + 2 * half), *rx = tx + 8;
	/* link rates and wrong counts per mode: lt[] max over ranks, ls[] sums */
	double *lt = tx + 16, *lr = tx + 64, *ls = tx + 112, *lsr = tx + 160;
	static double samples[BENCH_MAX + 1][BENCH_ROUNDS_MAX]; /* [BENCH_MODES]: fabric_rtt */
	static double sample_end[BENCH_MAX][BENCH_ROUNDS_MAX];  /* wall time (rank 0's) */
	static double sample_start[BENCH_MAX][BENCH_ROUNDS_MAX]; /* of its first timed call */
	int RTT = BENCH_MODES;
	bool rtt_done = false;
	bool have_netdev;
	{
		uint64_t a, b;
		have_netdev = netdev_bytes(&a, &b);
	}

	if (my_rank == 0 && !opt.json) {
		printf("# %s: %d nodes, %d aggregators, provider %s, %s sum, FI_OFI_RXM_EAGER_LIMIT=%s;\n"
		       "# time = median over rounds of one sample per mode (k %ss back to back,\n"
		       "# slowest rank), modes interleaved; busbw = algbw x %s\n",
		       bench_coll_names[bench_coll], N, opt.naggs, getenv("SUMCAST_PROVIDER"), type_name(t),
		       getenv("FI_OFI_RXM_EAGER_LIMIT") ? getenv("FI_OFI_RXM_EAGER_LIMIT") : "(default)",
		       bench_coll_names[bench_coll], bench_coll ? "(N-1)/N" : "2(N-1)/N");
		if (bench_coll)
			printf("# size = the whole buffer (N blocks), as nccl-tests; CollNet Direct windows of at\n"
			       "# most 2 MiB, 8 outstanding, each all on the ring or all through the\n"
			       "# aggregators (owner-only: each result to its block's owner, each allgather part up once; split = auto's choice: 1 aggregators)\n");
		printf("#%11s %11s %5s %5s %3s", "size", "count", "type", "redop", "k");
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
		size_t bytes = bench_bytes((size_t)fb, es);
		size_t count = bytes / es;
		/* elements of the result: all of them, or this node's block */
		size_t rcount = bench_coll == 1 ? count / (size_t)N : count;
		if (!count)
			continue;
		bool with_rtt = rtt_done == false && N > 1 && !bench_no_rtt;
		rtt_done = true;
		int k = bytes <= (64 << 10) ? 16 : bytes <= (1 << 20) ? 4 : 1;
		int min_rounds = bytes <= (16 << 20) ? 5 : 3;
		int nr = 0;
		double wrong[BENCH_MAX] = { 0 }, ltime[BENCH_MAX] = { 0 };
		struct aggm am[BENCH_MAX] = { 0 }, am_prev = { 0 };
		int am_last = -1;
		aggm_on = getenv("SUMCAST_HARNESS_AGG_METRICS") && *getenv("SUMCAST_HARNESS_AGG_METRICS") &&
			  getenv("SUMCAST_AGGREGATORS");
		uint64_t ltx[BENCH_MAX] = { 0 }, lrx[BENCH_MAX] = { 0 };
		/* warm-up: every mode once at this size, checked */
		for (int m = 0; m < BENCH_MODES; m++) {
			if (!inst[m].on)
				continue;
			P = inst[m].p;
			if (checked)
				memset(recv, 0xA5, rcount * es);
			bench_op(&inst[m], send, recv, bytes, t);
			for (size_t i = 0; checked && i < rcount; i++)
				if (memcmp(recv + i * es, want, es))
					wrong[m]++;
		}
		double tstart = sc_now_s(), t_start = sc_wall_s();
		for (;;) {
			/* round barrier + agreement to go on */
			P = inst[0].p;
			memset(tx, 0, 8 * sizeof(double));
			tx[0] = nr >= bench_rounds || nr >= BENCH_ROUNDS_MAX ||
				(nr >= min_rounds && sc_now_s() - tstart > bench_time_per_size);
			if (nr > 0)
				for (int m = 0; m < BENCH_MODES + with_rtt; m++)
					tx[1 + m] = samples[m][nr - 1];
			allreduce_chunked(inst[0].cc, (uint8_t *)tx, (uint8_t *)rx, 8, ncclFloat64, ncclMax,
					  inst[0].mh);
			if (nr > 0)
				for (int m = 0; m < BENCH_MODES + with_rtt; m++)
					samples[m][nr - 1] = rx[1 + m];
			if (rx[0] > 0)
				break;
			for (int j = 0; j < BENCH_MODES + with_rtt; j++) {
				int m = (j + nr) % (BENCH_MODES + with_rtt);
				if (m == RTT) {
					/* ranks 0 and 1 ping-pong; the others sleep
					 * meanwhile (a spinning rank would take a core
					 * from them), woken by a file from rank 0 */
					char name[32];
					snprintf(name, sizeof(name), "rtt-%zu-%d", bytes, nr);
					/* a barrier first: ranks 0 and 1 spinning in the
					 * ping-pong would starve a rank still finishing the
					 * previous mode's last allreduce (measured: that
					 * mode's time doubled) */
					P = inst[0].p;
					allreduce_chunked(inst[0].cc, send, recv, 1, t, ncclSum, inst[0].mh);
					samples[m][nr] = rtt.on ? rtt_sample(&rtt) : 0;
					if (my_rank == 0)
						rv_put(name, 0, "", 0);
					else if (my_rank > 1)
						rv_get(name, 0, NULL, 0);
					continue;
				}
				if (!inst[m].on)
					continue;
				aggm_mark(am, &am_last, &am_prev, m);
				P = inst[m].p;
				allreduce_chunked(inst[m].cc, send, recv, 1, t, ncclSum, inst[m].mh);
				uint64_t tx0 = 0, rx0 = 0, tx1 = 0, rx1 = 0;
				if (have_netdev)
					netdev_bytes(&tx0, &rx0);
				sample_start[m][nr] = sc_wall_s();
				double t0 = sc_now_s();
				for (int i = 0; i < k; i++)
					bench_op(&inst[m], send, recv, bytes, t);
				double t1 = sc_now_s();
				samples[m][nr] = (t1 - t0) / k * 1e6;
				sample_end[m][nr] = sc_wall_s();
				if (have_netdev && netdev_bytes(&tx1, &rx1)) {
					ltx[m] += tx1 - tx0;
					lrx[m] += rx1 - rx0;
					ltime[m] += t1 - t0;
				}
			}
			aggm_mark(am, &am_last, &am_prev, -1);
			nr++;
		}
		double t_end = sc_wall_s();
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
		double med[BENCH_MAX + 1] = { 0 }, mn[BENCH_MAX + 1] = { 0 }, mean[BENCH_MAX + 1] = { 0 };
		for (int m = 0; m < BENCH_MODES + with_rtt; m++) {
			if (m < BENCH_MODES && !inst[m].on)
				continue;
			static double tmp[BENCH_ROUNDS_MAX];
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
				double algbw = bytes / med[m] / 1e3, busbw = algbw * bus;
				printf("{\"bench\":\"%s\",\"mode\":\"%s\",\"split\":%.3f,\"nranks\":%d,"
				       "\"naggs\":%d,\"provider\":\"%s\",\"type\":\"%s\",\"op\":\"sum\","
				       "\"bytes\":%zu,\"time_us\":%.2f,\"min_us\":%.2f,\"mean_us\":%.2f,"
				       "\"samples\":%d,\"per_sample\":%d,\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,"
				       "\"t_start\":%.3f,\"t_end\":%.3f",
				       bench_coll_names[bench_coll], bench_names[m],
				       bench_auto_split(m, bytes, speed), N, opt.naggs,
				       getenv("SUMCAST_PROVIDER"), type_name(t), bytes, med[m], mn[m], mean[m],
				       nr, k, algbw, busbw, t_start, t_end);
				if (checked)
					printf(",\"wrong\":%.0f", lsr[2 * BENCH_MAX + m]);
				if (aggm_on)
					printf(",\"agg_calls\":%d,\"agg_tx_bytes\":%.0f,\"agg_cpu_s\":%.4f,"
					       "\"repairs\":%.0f", nr * k, am[m].tx, am[m].cpu, am[m].repairs);
				if (have_netdev)
					printf(",\"link_tx_mbit\":%.1f,\"link_rx_mbit\":%.1f,\"link_max_mbit\":%.1f",
					       lsr[m] / N, lsr[BENCH_MAX + m] / N, lr[m]);
				/* each round's timed calls of this mode (wall clock):
				 * bench/cluster/profile.py splits interleaved modes by them */
				printf(",\"windows\":[");
				for (int i = 0; i < nr; i++)
					printf("%s[%.4f,%.4f]", i ? "," : "", sample_start[m][i], sample_end[m][i]);
				printf("]}\n");
			}
			for (int i = 0; bench_timeline && i < nr; i++)
				for (int m = 0; m < BENCH_MODES; m++)
					if (inst[m].on)
						printf("{\"bench\":\"timeline\",\"mode\":\"%s\",\"split\":%.3f,"
						       "\"nranks\":%d,\"naggs\":%d,\"bytes\":%zu,\"round\":%d,"
						       "\"t\":%.3f,\"time_us\":%.2f,\"algbw_gbps\":%.4f}\n",
						       bench_names[m], bench_auto_split(m, bytes, speed), N, opt.naggs,
						       bytes, i, sample_end[m][i], samples[m][i],
						       bytes / samples[m][i] / 1e3);
			if (with_rtt)
				printf("{\"bench\":\"%s\",\"mode\":\"fabric_rtt\",\"nranks\":%d,\"naggs\":%d,"
				       "\"provider\":\"%s\",\"ranks\":[0,1],\"bytes\":8,\"time_us\":%.2f,"
				       "\"min_us\":%.2f,\"mean_us\":%.2f,\"samples\":%d,\"per_sample\":%d,"
				       "\"t_start\":%.3f,\"t_end\":%.3f}\n",
				       bench_coll_names[bench_coll], N, opt.naggs, getenv("SUMCAST_PROVIDER"),
				       med[RTT], mn[RTT], mean[RTT], nr, RTT_PER_SAMPLE, t_start, t_end);
		} else {
			printf(" %11zu %11zu %5s %5s %3d", bytes, count, type_name(t), "sum", k);
			for (int m = 0; m < BENCH_MODES; m++) {
				if (inst[m].on)
					printf(" %10.1f %7.3f", med[m], bytes / med[m] / 1e3 * bus);
				else
					printf(" %10s %7s", "-", "-");
			}
			if (bench_default && inst[1].on && inst[2].on) {
				double best = med[0] < med[1] ? med[0] : med[1];
				printf(" %6.3f %9.3f", bench_auto_split(2, bytes, speed), med[2] / best);
			}
			printf("\n");
			if (with_rtt) {
				printf("# fabric_rtt %.1f us: 8-byte ping-pong, ranks 0 and 1, %s, own endpoint "
				       "(median of %d samples of %d, min %.1f); %zu-byte row / fabric_rtt:",
				       med[RTT], getenv("SUMCAST_PROVIDER"), nr, RTT_PER_SAMPLE, mn[RTT], bytes);
				for (int m = 0; m < BENCH_MODES; m++)
					if (inst[m].on)
						printf(" %s %.2fx", bench_names[m], med[m] / med[RTT]);
				printf("\n");
			}
		}
		fflush(stdout);
	}
	for (int m = BENCH_MODES - 1; m >= 0; m--) {
		if (!inst[m].on)
			continue;
		P = inst[m].p;
		NCHECK(CN_CALL(deregMr, inst[m].cc, inst[m].mh));
		NCHECK(CN_CALL(closeColl, inst[m].cc));
	}
	rtt_close(&rtt);
	free(region);
}

/* --rounds, --time-per-size, --factor, --variant, --splits. */
int bench_option(int c, const char *arg)
{
	switch (c) {
	case 'R': bench_rounds = atoi(arg); return 0;
	case 'S': bench_time_per_size = atof(arg); return 0;
	case 'f': bench_factor = atof(arg); return 0;
	case 'Q': bench_no_rtt = true; return 0;
	case 0x104: bench_timeline = true; return 0;
	case 'X':
		for (int i = 0; i < 3; i++)
			if (!strcmp(arg, bench_coll_names[i])) {
				bench_coll = i;
				return 0;
			}
		return -1;
	case 'W': {
		if (bench_default) {
			bench_default = false;
			BENCH_MODES = 0;
		}
		char *v = strdup(arg), *eq = strchr(v, '='), *at = eq ? strchr(eq, '@') : NULL;
		char *pct = eq ? strchr(eq, '%') : NULL;
		if (!eq || BENCH_MODES == BENCH_MAX)
			return -1;
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
		return 0;
	}
	case 'L': {
		/* --splits 0,0.25,...,auto: one variant per split, named
		 * "x<split>" ("auto" for auto), interleaved as --variant */
		char *list = strdup(arg), *save = NULL;
		bench_default = false;
		BENCH_MODES = 0;
		for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
			double f;
			if (BENCH_MODES == BENCH_MAX || split_parse(e, &f))
				return -1;
			char *name = malloc(strlen(e) + 2);
			sprintf(name, "%s%s", f < 0 ? "" : "x", e);
			bench_names[BENCH_MODES] = name;
			bench_split_env[BENCH_MODES] = e;
			bench_plugin[BENCH_MODES++] = NULL;
		}
		return BENCH_MODES ? 0 : -1;
	}
	default: return -1;
	}
}

bool bench_options_ok(void)
{
	return bench_rounds >= 1 && bench_rounds <= BENCH_ROUNDS_MAX && bench_factor > 1;
}

/* One copy of the plugin per mode (bench_open): the same file twice would
 * be one instance with one set of settings. */
int bench_prepare(void)
{
	if (opt.split && bench_default)
		bench_split_env[2] = opt.split;
	for (int m = 0; m < BENCH_MODES; m++) {
		char cmd[3 * PATH_MAX];
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s/plugin-%s.so'",
			 bench_plugin[m] ? bench_plugin[m] : opt.plugin, rv_dir, bench_names[m]);
		if (system(cmd)) {
			fprintf(stderr, "%s failed\n", cmd);
			return 1;
		}
	}
	return 0;
}
