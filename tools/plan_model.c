/* The sizing model (plan_model.h, docs/sizing.md).
 *
 * Fabric mode: the links are the limit. N nodes, H communicators per node
 * (CollNet heads), each an allreduce of S bytes (--bytes) on its own link
 * of B (a NIC per GPU; H = 1: the node's link), all at once; M aggregators
 * with links of B_a, shared by the H communicators:
 *  - ring (the plugin's, one per head): 2(N-1) steps of S/N:
 *    2(N-1) hop + r S / B, r = 2(N-1)/N;
 *  - aggregators, flat: latency 2 hop + one chunk's store-and-forward
 *    through a node link and an aggregator link, then the slowest of
 *      a head's link:       S f / B           (f = 1 flat, 1 + 2/F' tree)
 *      an aggregator link:  N H S f / (M B_a) (ingress; unicast egress is
 *                                              never more: full duplex)
 *      an aggregator's CPU: RDMA, its messages x per-message cost + its
 *                           input bytes / reduce rate; tcp, its input
 *                           bytes x the measured CPU per byte; spread over
 *                           min(data threads, jobs) threads
 *    (B and B_a times the links' measured efficiency);
 *  - the tree (N > F): reduce-scatter in groups of F', allreduce of each
 *    shard among its G owners, allgather in the group, each a job of its
 *    own; NCCL keeps requests in flight, so the three phases of successive
 *    requests overlap and the busiest resource sets the pace (f above);
 *    latency three phases of 2 hops;
 *  - split at a: both paths' latencies (they share the node's queues, as
 *    plugin/split.h says) + the slowest of a head link's (a f + (1-a) r)
 *    S / B and the aggregators' a x (link / agg_eff, CPU);
 *  - auto: the best split (see plan_run).
 *
 * Loopback mode (every process on one host of K cores): the cores are the
 * limit. P = N H + M processes. The ring and the aggregators are different
 * code paths, each with its own figures: a dependent step (a ring step,
 * one message of a daemon's serial loop) costs a fixed part plus what the
 * other runnable processes take, P x share / K (processor sharing); each
 * ring column above the eager cut costs CPU (rendezvous messages and eager
 * columns with their own figures); the bytes cost CPU copying through the
 * kernel, byte_ns x (1 + byte_proc x P) per byte (cache and scheduler
 * pressure grow with the processes), shared by the K cores.
 *
 * Past 8 node processes per core the plugin harness's waits nap (16 us
 * doubling to 1 ms: tests/plugin/harness_nccl.c) instead of yielding; then
 * each ring step also waits for a napping process to wake and, when its
 * segment is above the eager cut, a time per byte of the segment (its
 * messages' progress round trips each wait for a wake-up; eager columns
 * with their own figure), and each daemon message pays a share per process
 * for the nappers' wake-ups. Connect: CPU per node process and per pair of
 * them.
 *
 * Aggregator memory and posted receives follow the daemons' in-flight cap
 * (plan_grant). */
#include "plan_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../plugin/split.h"
#include "../plugin/tree_plan.h"
#include "chunk.h"
#include "admit.h"
#include "grant.h"
#include "wire.h"

/* Where each measured constant comes from (docs/journal/2026-11-26-simulator.md
 * has the commands and the fits):
 *
 * | constant      | value  | source |
 * |---------------|--------|--------|
 * | link_eff      | 0.957  | emulated cluster linktest: 478.5 of 500 Mbit/s per link (docs/journal/2026-11-22-cluster-agg-efficiency-32k.md, full run) |
 * | agg_eff       | 0.85   | the split cliff at W=4, A=1 (same entry; SUMCAST_AGG_EFFICIENCY's default) |
 * | hop_us        | 10     | the plugin's hop figure when the provider reports none (plugin/collnet_listen.c); tcp on loopback measured 6-10 us a hop (fabric_rtt 12.5-20 us, 2026-11-26-simulator.md) |
 * | agg_msg_us    | 1.5    | daemon data thread per message, shm (no kernel copy of the stream: the closest to RDMA here): bench/ingest --provider shm --chunk 4K, 1.37 GB/s of 4 KiB contributions = 335 K messages in and as many result sends a second (2026-11-26-simulator.md; an upper bound: 2 shared cores) |
 * | agg_tcp_ns    | 1.5    | aggregator CPU per byte received on tcp, all of it (copies, reduce, messages, sends): 12.1 s per GB of allreduce at W=8, A=8 = 8 GB of ingress, 32 KiB chunks (docs/benchmarks.md, agg-mcast table) |
 * | lane_cpu      | 1.0    | a job over 2 data threads (lanes) against 1: daemon CPU per GB of input, bench/ingest N = 4, medians of 6 paired rounds: tcp 0.633 against 0.683 s/GB (0.93), shm 0.385 against 0.397 (0.97); against the base's one thread 0.94 and 1.00 (docs/journal/2026-11-29-job-threads.md) |
 * | reduce_gbps   | 45     | f32 sum, one core, 4 MiB: 48.7-50.7 GB/s less a margin (docs/journal/2026-11-22-reduce-kernels.md) |
 * | lb_* spinning | fit    | plugin_harness bench with a harness that yields at every N (2026-11-26-simulator.md's runs), N = 4, 8, 24, 48 nodes, M = 2, 8 B and 2 MiB, the fastest of 1-8 runs each (calibration: least squares on the log of the times; N = 16, 32, 64 validate); refit with the eager columns (lb_ring_eager_us) in 2026-11-26-plan-validation-2.md |
 * | lb_nap_per_core | 8    | the plugin harness naps past 8 node processes per core (tests/plugin/harness_nccl.c, poll_us) |
 * | lb_*nap*      | fit    | the harness's napping waits: plugin_harness bench at N = 24, 48 with main's harness of 2026-11-26, the spinning figures kept (N = 32, 64 validate; N = 4, 8, 16 check those), 2026-11-26-plan-validation-2.md |
 * | lb_conn_*     | fit    | connect on loopback: the slowest node's "connected in", least squares of the relative error over N = 4, 8, 24, 48 of the same runs |
 */
void plan_costs_default(struct plan_costs *c)
{
	memset(c, 0, sizeof(*c));
	c->link_eff = 0.957;
	c->agg_eff = 0.85;
	c->hop_us = 10;
	c->agg_msg_us = 1.5;
	c->agg_tcp_ns = 1.5;
	c->lane_cpu = 1.0;
	c->reduce_gbps = 45;
	c->lb_ring_step_us = 14.93;
	c->lb_ring_share_us = 1.682;
	c->lb_ring_msg_us = 5.727;
	c->lb_ring_eager_us = 11.01;
	c->lb_ring_byte_ns = 0.5676;
	c->lb_ring_byte_proc = 0.009435;
	c->lb_agg_step_us = 6.187;
	c->lb_agg_msg_us = 6.999;
	c->lb_agg_share_us = 0.1613;
	c->lb_agg_byte_ns = 0.5982;
	c->lb_agg_byte_proc = 0.008607;
	c->lb_nap_per_core = 8;
	c->lb_ring_nap_us = 327.7;
	c->lb_ring_nap_data_ns = 23.51;
	c->lb_ring_nap_eager_ns = 39.56;
	c->lb_agg_nap_share_us = 2.57;
	c->lb_agg_nap_data_us = 5.482;
	c->lb_conn_us = 20989;
	c->lb_conn_sq_us = 68.6;
}

void plan_in_defaults(struct plan_in *in)
{
	if (!in->heads)
		in->heads = 1;
	if (!in->fan_in)
		in->fan_in = 64;
	if (!in->chunk)
		in->chunk = 256 << 10;
	if (!in->window)
		in->window = 8;
	if (!in->max_inflight)
		in->max_inflight = 64ull << 20;
	if (!in->min_chunk)
		in->min_chunk = 16 << 10;
	if (!in->agg_threads)
		in->agg_threads = 1;
	if (!in->cores)
		in->cores = 1;
	if (!in->mem_budget)
		in->mem_budget = 1ull << 30;
	if (!in->rx_queue)
		in->rx_queue = 8192;
	if (!in->max_jobs)
		in->max_jobs = 64;
	if (!(in->max_memory_share > 0))
		in->max_memory_share = 0.5;
	if (!in->max_window)
		in->max_window = 64;
	if (!in->max_chunk)
		in->max_chunk = 4ull << 20;
	if (in->cost.link_eff <= 0)
		plan_costs_default(&in->cost);
}

/* Sums of grants over many jobs in double, then back (never wraps). */
static uint64_t clamp_u64(double v)
{
	return v >= 1.8e19 ? UINT64_MAX : (uint64_t)v;
}

void plan_admit_limits(const struct plan_in *in, struct admit_limits *lim)
{
	*lim = (struct admit_limits){
		.max_jobs = in->max_jobs,
		.memory_budget = in->mem_budget,
		.max_memory_share = in->max_memory_share,
		.max_window = in->max_window,
		.max_weight = 1,
		.max_chunk = in->max_chunk,
		.max_inflight = in->max_inflight,
		.min_chunk = in->min_chunk,
		.mc_inflight = 0,
		.sealed = in->sealed,
		.mcast = false, /* the model's results are unicast */
		.job_threads = in->job_threads,
		.sizes = ADMIT_SIZES_LP64,
	};
}

void plan_grant(const struct plan_in *in, uint32_t n, const struct tree_shape *tree, struct plan_grant *g)
{
	uint32_t window = in->window, chunk = (uint32_t)in->chunk;
	struct admit_limits lim;
	struct admit_verdict v;
	uint64_t free[256];
	uint32_t none[256];
	unsigned nthreads = in->agg_threads < 256 ? in->agg_threads : 256;
	struct admit_load idle = { 0, 0, nthreads ? nthreads : 1, free, none, 0 };

	for (unsigned i = 0; i < 256; i++) {
		free[i] = UINT64_MAX;
		none[i] = 0;
	}

	if (n < 1)
		n = 1;
	/* a tree's inner job asks for its share of a default daemon's cap
	 * (plugin/tree_plan.c); the daemon then grants by its own settings
	 * (common/admit.c) */
	if (tree) {
		struct grant ask = tree_inner_ask(tree, n, window, chunk);
		window = ask.window;
		chunk = ask.chunk;
	}
	plan_admit_limits(in, &lim);
	admit_decide(&lim, &idle, &(struct admit_ask){ .nranks = n, .window = window, .chunk = chunk,
						    .has16 = in->wide_types, .unicast = true }, &v);
	g->window = v.window;
	g->chunk = v.chunk;
	g->lanes = v.lanes;
	g->mem_bytes = v.mem_bytes;
	g->posted_recvs = v.recvs;
	g->ask_window = window;
	g->ask_chunk = chunk;
}

/* The jobs of one aggregator joining it in turn (each head's: flat, its job
 * of N; tree, 2G of F' then F' of G), each decided by the daemons' rule
 * (common/admit.c) against the load of those before it; the first refusal
 * stops it. Returns the rule's name or NULL; *admitted: the jobs taken. */
static const char *plan_admit_all(const struct plan_in *in, uint32_t levels, uint32_t groups, uint32_t gsize,
				  const struct plan_grant *g_group, const struct plan_grant *g_shard,
				  uint32_t *admitted)
{
	uint64_t rx_free[256];
	uint32_t thread_jobs[256];
	struct admit_limits lim;
	struct admit_load load = { 0, 0, in->agg_threads, rx_free, thread_jobs, 0 };
	uint32_t keep = in->rx_queue / 4 < 256 ? in->rx_queue / 4 : 256;
	uint64_t per_head = levels == 1 ? 1 : 2ull * groups + gsize;

	plan_admit_limits(in, &lim);
	for (unsigned i = 0; i < in->agg_threads && i < 256; i++) {
		rx_free[i] = in->rx_queue - keep;
		thread_jobs[i] = 0;
	}
	*admitted = 0;
	for (uint64_t k = 0; k < in->heads * per_head; k++) {
		uint64_t i = k % per_head;
		bool group_job = levels == 1 || i < 2ull * groups;
		const struct plan_grant *g = group_job ? g_group : g_shard;
		uint32_t n = levels == 1 ? in->nodes : group_job ? gsize : groups;
		struct admit_ask ask = { .nranks = n, .window = g->ask_window, .chunk = (uint32_t)g->ask_chunk,
					 .has16 = in->wide_types, .unicast = true };
		struct admit_verdict v;

		load.tie = (unsigned)((k + 1) % in->agg_threads); /* the daemon's next handle */
		admit_decide(&lim, &load, &ask, &v);
		if (v.rule != ADMIT_OK)
			return admit_rule_name(v.rule);
		load.njobs++;
		load.mem_used += v.mem_bytes;
		/* as the daemon reserves: each lane's receives on its thread */
		for (uint32_t l = 0; l < v.lanes; l++) {
			rx_free[v.lane_thread[l]] -= admit_recvs(admit_lane_window(v.window, l, v.lanes), n, v.mc);
			thread_jobs[v.lane_thread[l]]++;
		}
		(*admitted)++;
	}
	return NULL;
}

void plan_tree_shape(uint32_t n, uint32_t fan_in, uint32_t *groups, uint32_t *group_size)
{
	struct tree_shape sh = { .n = n, .G = 1, .Fp = n };

	if (fan_in && n > fan_in)
		tree_shape_of(n, fan_in, &sh);
	*groups = sh.G;
	*group_size = sh.Fp;
}

/* ---- the pieces ---- */

struct ctx {
	const struct plan_in *in;
	double n, h, m, s, sh;   /* nodes, heads, aggs, bytes, bytes per head */
	double r, f;             /* ring factor, tree byte factor */
	double b, ba;            /* bytes/s of a node link, an aggregator link */
	double m_used;           /* aggregators a head's bytes are sharded over */
	double chunk;            /* bytes per aggregator message */
	double procs;            /* loopback: processes on the host */
	uint32_t levels, groups, gsize;
	double jobs;             /* collnet jobs per communicator */
	double lanes;            /* data threads each job is spread over (job_lanes) */
};

static double dmax(double a, double b)
{
	return a > b ? a : b;
}

/* Loopback: what P runnable processes add to each dependent step, and
 * the CPU per byte, which grows with the processes on the host (caches,
 * the scheduler), both shared by K cores. */
static double lb_procs_k(const struct ctx *x, double per_us)
{
	return per_us * x->procs / x->in->cores;
}

static double lb_bytes_s(const struct ctx *x, double ns, double growth)
{
	return ns * 1e-9 * (1 + growth * x->procs) / x->in->cores;
}

/* Loopback: whether the harness's node processes nap while they wait
 * (more than lb_nap_per_core of them per core). */
static bool lb_napping(const struct ctx *x)
{
	return x->n * x->h > x->in->cost.lb_nap_per_core * x->in->cores;
}

/* The eager cut of tcp;ofi_rxm (the plugin's SUMCAST_EAGER_BYTES auto):
 * a message above it costs progress round trips on both sides. */
#define LB_EAGER 16384.0

/* Messages one aggregator takes in per allreduce (all heads): one of the
 * m_used a head's bytes are sharded over (aligned ranges: a small message
 * goes to fewer than M). */
static double agg_msgs_in(const struct ctx *x)
{
	double per = ceil(x->sh / x->m_used / x->chunk);

	if (per < 1)
		per = 1;
	if (x->levels == 1)
		return x->n * x->h * per;
	/* reduce-scatter: the head's bytes; allreduce and allgather: a shard
	 * of 1/F' each */
	double sub = ceil(x->sh / x->gsize / x->m_used / x->chunk);
	if (sub < 1)
		sub = 1;
	return x->n * x->h * (per + 2 * sub);
}

static double ring_s(const struct ctx *x)
{
	const struct plan_costs *c = &x->in->cost;

	if (x->n < 2)
		return 0;
	if (x->in->loopback) {
		/* 2(N-1) steps; in each, every node sends S/N in the plugin's
		 * ring columns (common/chunk.h with plugin/ring_step.c's window
		 * 4 and chunk 512 KiB): above the eager cut (16 KiB) rendezvous
		 * messages of up to 512 KiB, or, for a segment of up to 4 eager
		 * messages, eager columns, each with its own cost */
		double seg = x->sh / x->n;
		size_t col = sc_chunk_for((size_t)seg, 4, 512 << 10, 4, (size_t)LB_EAGER);
		double cols = seg > LB_EAGER ? ceil(seg / (double)col) : 0;
		bool eager = col <= LB_EAGER;
		double step = c->lb_ring_step_us + lb_procs_k(x, c->lb_ring_share_us) +
			      x->n * x->h * cols * (eager ? c->lb_ring_eager_us : c->lb_ring_msg_us) / x->in->cores;
		if (lb_napping(x))
			step += c->lb_ring_nap_us +
				(cols ? seg * (eager ? c->lb_ring_nap_eager_ns : c->lb_ring_nap_data_ns) * 1e-3 : 0);
		return 2 * (x->n - 1) * step * 1e-6 +
		       x->n * x->r * x->s * lb_bytes_s(x, c->lb_ring_byte_ns, c->lb_ring_byte_proc) +
		       (x->n - 1) * x->s / (c->reduce_gbps * 1e9) / x->in->cores;
	}
	return 2 * (x->n - 1) * c->hop_us * 1e-6 + x->r * x->s / x->b;
}

/* The aggregator path's pieces at split 1: latency, node link, aggregator
 * link, aggregator CPU (seconds). */
struct agg_parts {
	double lat, node, link, cpu;
};

static void agg_parts(const struct ctx *x, struct agg_parts *p)
{
	const struct plan_costs *c = &x->in->cost;
	double phases = x->levels == 1 ? 1 : 3;
	double in_bytes = x->n * x->s * x->f / x->m_used; /* one aggregator's input */
	double msgs = 2 * agg_msgs_in(x);             /* in and out (unicast) */
	double jobs = x->h * x->jobs;
	/* each job keeps its lanes busy, the jobs share the threads; a job
	 * spread over several costs lane_cpu times one thread's CPU per byte */
	double threads = dmax(1, fmin(x->in->agg_threads, jobs * x->lanes));
	if (x->lanes > 1)
		threads /= x->in->cost.lane_cpu;
	double cchunk = fmin(x->chunk, x->sh / x->m_used);

	memset(p, 0, sizeof(*p));
	if (x->in->loopback) {
		/* each daemon's data thread takes its messages one at a time, each
		 * behind what the runnable processes take; the bytes are copied
		 * through the kernel by all cores */
		double share = c->lb_agg_share_us;
		if (lb_napping(x))
			share += c->lb_agg_nap_share_us + (cchunk > LB_EAGER ? c->lb_agg_nap_data_us : 0);
		p->lat = 2 * phases * c->lb_agg_step_us * 1e-6;
		p->cpu = msgs * (c->lb_agg_msg_us + lb_procs_k(x, share)) * 1e-6 / threads /
			 fmin(1, (double)x->in->cores / x->m_used);
		p->node = 2 * x->n * x->s * x->f * lb_bytes_s(x, c->lb_agg_byte_ns, c->lb_agg_byte_proc) +
			  x->n * x->s * x->f / (c->reduce_gbps * 1e9) / x->in->cores;
		p->link = 0;
		return;
	}
	p->lat = phases * (2 * c->hop_us * 1e-6 + cchunk / x->b + cchunk / x->ba);
	p->node = x->s * x->f / x->b;
	p->link = in_bytes / x->ba;
	/* tcp: the measured CPU per byte received covers it all (receive
	 * copies, reduce, messages, result sends); RDMA: per message and the
	 * reduce */
	if (x->in->tcp)
		p->cpu = in_bytes * c->agg_tcp_ns * 1e-9 / threads;
	else
		p->cpu = (msgs * c->agg_msg_us * 1e-6 + in_bytes / (c->reduce_gbps * 1e9)) / threads;
}

static double agg_s(const struct ctx *x, const char **bound)
{
	struct agg_parts p;
	double t;

	agg_parts(x, &p);
	if (x->in->loopback) {
		/* one pool of cores: the daemon's serial messages and the copies
		 * add up */
		if (bound)
			*bound = p.cpu > p.node ? "agg-cpu" : "host-cpu";
		return p.lat + p.cpu + p.node;
	}
	t = dmax(p.node, dmax(p.link, p.cpu));
	if (bound)
		*bound = p.lat > t ? "latency"
			 : t == p.node ? "node-link"
			 : t == p.link ? "agg-link" : "agg-cpu";
	return p.lat + t;
}

static double split_s(const struct ctx *x, double a)
{
	struct agg_parts p;
	const struct plan_costs *c = &x->in->cost;
	double e = c->agg_eff > 0 && c->agg_eff <= 1 ? c->agg_eff : 1, node, t;

	if (a <= 0)
		return ring_s(x);
	if (a >= 1)
		return agg_s(x, NULL);
	agg_parts(x, &p);
	if (x->in->loopback) /* the work of both, on the same cores */
		return a * agg_s(x, NULL) + (1 - a) * ring_s(x);
	node = (a * x->f + (1 - a) * x->r) * x->s / x->b;
	t = dmax(node, a * dmax(p.link / e, p.cpu));
	return p.lat + 2 * (x->n - 1) * c->hop_us * 1e-6 + t;
}

static double connect_s(const struct ctx *x)
{
	const struct plan_costs *c = &x->in->cost;
	double p = x->n * x->h;

	if (x->in->loopback)
		return (p * c->lb_conn_us + p * p * c->lb_conn_sq_us) * 1e-6 / x->in->cores;
	/* HELLO and JOIN are two round trips to each aggregator (in
	 * parallel), then the agreement goes round the ring (2(N-1) hops;
	 * in the tree each job's own, at once). A lower bound: the daemons'
	 * work per JOIN and per job (buffers) is not measured apart from the
	 * loopback's, where the processes' CPU dominates (docs/sizing.md) */
	return (4 * c->hop_us + 2 * (x->n - 1) * c->hop_us) * 1e-6;
}

int plan_run(const struct plan_in *in0, struct plan_out *o, char *err, int errlen)
{
	struct plan_in in = *in0;
	struct ctx x;
	struct plan_grant g;

	plan_in_defaults(&in);
	memset(o, 0, sizeof(*o));
#define BAD(...) do { snprintf(err, (size_t)errlen, __VA_ARGS__); return -1; } while (0)
	if (in.nodes < 2 || in.nodes > 1u << 20)
		BAD("--nodes %u: 2 to %u", in.nodes, 1u << 20);
	if (in.heads > 64)
		BAD("--heads %u: 1 to 64", in.heads);
	if (in.aggs < 1 || in.aggs > 1u << 16)
		BAD("--aggs %u: 1 to %u", in.aggs, 1u << 16);
	if (in.bytes < 1)
		BAD("--bytes must be at least 1 byte");
	if (in.bytes > (1ull << 40))
		BAD("--bytes %llu: at most 1 TiB", (unsigned long long)in.bytes);
	if (in.fan_in < 2)
		BAD("--fan-in must be at least 2 (got %u)", in.fan_in);
	if (in.nodes > (uint64_t)in.fan_in * in.fan_in)
		BAD("--nodes %u: two levels at --fan-in %u reach %llu nodes (raise --fan-in)", in.nodes, in.fan_in,
		    (unsigned long long)in.fan_in * in.fan_in);
	if (in.chunk < 64 || in.chunk % 8 || in.chunk > (64u << 20))
		BAD("--chunk %llu: a multiple of 8 bytes from 64 bytes to 64 MiB", (unsigned long long)in.chunk);
	if (in.window < 1 || in.window > 1024)
		BAD("--window %u: 1 to 1024", in.window);
	if (in.max_inflight < 4096 || in.max_inflight > (1ull << 40))
		BAD("--max-inflight %llu: 4 KiB to 1 TiB", (unsigned long long)in.max_inflight);
	if (in.min_chunk < 8 || in.min_chunk > in.chunk)
		BAD("--min-chunk %llu: 8 bytes up to --chunk", (unsigned long long)in.min_chunk);
	if (in.max_jobs < 1 || in.max_jobs > 1048575)
		BAD("--max-jobs %u: 1 to 1048575", in.max_jobs);
	if (!(in.max_memory_share > 0 && in.max_memory_share <= 1))
		BAD("--max-memory-share %g: above 0 and at most 1", in.max_memory_share);
	if (in.agg_threads > 256)
		BAD("--agg-threads %u: 1 to 256", in.agg_threads);
	if (!in.loopback && (!(in.link_gbps > 0 && in.link_gbps <= 1e5) ||
			     !(in.agg_link_gbps > 0 && in.agg_link_gbps <= 1e5)))
		BAD("--link-gbps and --agg-link-gbps: above 0 and at most 100000 Gb/s");
	if (in.split_given && !(in.split_at >= 0 && in.split_at <= 1))
		BAD("split %g: 0 to 1", in.split_at);
	if (in.loopback && (in.cores < 1 || in.cores > 4096))
		BAD("--cores %u: 1 to 4096", in.cores);
#undef BAD

	memset(&x, 0, sizeof(x));
	x.in = &in;
	x.n = in.nodes;
	x.h = in.heads;
	x.m = in.aggs;
	/* --bytes is one communicator's allreduce (each head's: what the
	 * plugin's iallreduce gets, NCCL's S / H under CollNet Direct); a node
	 * moves H of them at once */
	x.sh = (double)in.bytes;
	x.s = x.sh * x.h;
	x.r = 2 * (x.n - 1) / x.n;
	plan_tree_shape(in.nodes, in.fan_in, &x.groups, &x.gsize);
	x.levels = x.groups > 1 ? 2 : 1;
	x.f = x.levels == 1 ? 1 : 1 + 2.0 / x.gsize;
	x.jobs = x.levels == 1 ? 1 : 2.0 * x.groups + x.gsize;
	/* each head has its own link (one NIC per GPU, as SUMCAST_LINK_GBPS
	 * is what each head's plugin sees): a node moves S over H of them */
	x.b = x.h * in.link_gbps * 1e9 / 8 * in.cost.link_eff;
	x.ba = in.agg_link_gbps * 1e9 / 8 * in.cost.link_eff;
	x.m_used = fmax(1, fmin(x.m, ceil(x.sh / 64)));
	x.procs = x.n * x.h + x.m;

	/* grants: flat, one job of N per head; tree, 2G jobs of F' and F'
	 * jobs of G per head */
	if (x.levels == 1) {
		plan_grant(&in, in.nodes, NULL, &g);
		o->grant = g;
		o->agg_mem_bytes = clamp_u64(x.h * (double)g.mem_bytes);
		o->agg_posted_recvs = clamp_u64(x.h * (double)g.posted_recvs);
	} else {
		struct plan_grant gg;
		struct tree_shape sh;
		tree_shape_of(in.nodes, in.fan_in, &sh);
		plan_grant(&in, x.gsize, &sh, &g);
		plan_grant(&in, x.groups, &sh, &gg);
		o->grant = x.gsize >= x.groups ? g : gg;
		o->agg_mem_bytes = clamp_u64(x.h * (2.0 * x.groups * (double)g.mem_bytes + (double)x.gsize * (double)gg.mem_bytes));
		o->agg_posted_recvs =
			clamp_u64(x.h * (2.0 * x.groups * (double)g.posted_recvs + (double)x.gsize * (double)gg.posted_recvs));
	}
	x.chunk = (double)o->grant.chunk;
	/* lanes (docs/daemon.md, "Data plane"): the daemons' rule, as the
	 * grant took it */
	o->job_lanes = o->grant.lanes;
	x.lanes = o->job_lanes;

	o->tree_levels = x.levels;
	o->groups = x.groups;
	o->group_size = x.gsize;
	o->max_job_ranks = x.levels == 1 ? in.nodes : (x.gsize > x.groups ? x.gsize : x.groups);
	o->jobs_per_agg = (uint32_t)(in.heads * x.jobs);
	o->byte_factor = x.f;

	o->t_ring_us = ring_s(&x) * 1e6;
	o->t_agg_us = agg_s(&x, &o->bound) * 1e6;

	/* the split: the plugin's own model (plugin/split.c) for one head's
	 * S/H bytes. On loopback with the figures the plugin has there (the
	 * provider gives none: 25 Gb/s; every aggregator on this host: ring
	 * or aggregators, never a split), which is where auto starts and what
	 * the short bench runs measure. On a fabric with each head's share of
	 * the aggregators, B_a / (H f): the H communicators (and the tree's
	 * extra bytes) share them, which one head's plugin does not know when
	 * it starts; the adaptive split measures its way there (within 0.97-1.06
	 * of the best fixed split: docs/benchmarks.md) */
	struct split_model sm = {
		.fixed = SPLIT_AUTO,
		.link_gbps = in.loopback ? 25 : in.link_gbps,
		.agg_gbps = in.loopback ? 25 : in.agg_link_gbps / (x.h * x.f),
		.agg_eff = in.cost.agg_eff,
		.nranks = in.nodes,
		.naggs = in.aggs,
		.small_bytes = 64 << 10,
		.lat_us = in.cost.hop_us,
		.shared_host = in.loopback,
	};
	o->split_model = split_fraction(&sm, (size_t)x.sh);
	o->split = o->split_model;
	o->t_split_us = split_s(&x, o->split_model) * 1e6;
	o->t_auto_us = o->t_split_us;
	/* a split the communicator measured (plugin/tuner.c): that one */
	if (in.split_given) {
		o->split = in.split_at;
		o->t_auto_us = split_s(&x, in.split_at) * 1e6;
	}
	/* on a fabric the adaptive split climbs from there to the best fixed
	 * split it measures (endpoints included; 0.97-1.06 of the best:
	 * docs/benchmarks.md): the best of a grid of 1/64 steps, whose time
	 * this model knows where the plugin's start does not (CPU, the tree) */
	for (int i = 0; !in.loopback && !in.split_given && i <= 64; i++) {
		double t = split_s(&x, i / 64.0) * 1e6;
		if (t < o->t_auto_us * (1 - 1e-9)) {
			o->t_auto_us = t;
			o->split = i / 64.0;
		}
	}
	o->speedup_vs_ring = o->t_auto_us > 0 ? o->t_ring_us / o->t_auto_us : 0;

	/* the fewest aggregators that carry everything (split 1) as fast as
	 * the node links: their links need M >= N H B f / B_a; their CPU
	 * falls as M grows only while each job's shard spans several chunks
	 * (every aggregator takes at least one message of every rank of every
	 * job), so from there M doubles (at most 16 times) until it keeps up;
	 * when it never does, the link count stays and agg_cpu_short says so */
	{
		struct ctx y = x;
		struct agg_parts p;
		double ml = ceil(x.n * x.h * in.link_gbps * x.f / in.agg_link_gbps * (1 - 1e-12));
		if (in.loopback)
			ml = 1;
		y.m = ml < 1 ? 1 : ml > (1u << 20) ? (1u << 20) : ml;
		o->aggs_needed = (uint32_t)y.m;
		o->agg_cpu_short = true;
		for (int i = 0; i <= 16 && y.m <= (1u << 20); i++, y.m *= 2) {
			y.m_used = fmax(1, fmin(y.m, ceil(x.sh / 64)));
			agg_parts(&y, &p);
			if (p.cpu <= p.node * 1.0001) {
				o->aggs_needed = (uint32_t)y.m;
				o->agg_cpu_short = false;
				break;
			}
		}
	}
	o->connect_s = connect_s(&x);

	/* admission: each job of one aggregator joins in turn, decided by
	 * the daemons' own rule (common/admit.c) at these settings */
	if (x.levels == 1) {
		o->refused = plan_admit_all(&in, 1, 1, in.nodes, &o->grant, &o->grant, &o->jobs_admitted);
	} else {
		struct plan_grant gg, gs;
		struct tree_shape sh;
		tree_shape_of(in.nodes, in.fan_in, &sh);
		plan_grant(&in, x.gsize, &sh, &gg);
		plan_grant(&in, x.groups, &sh, &gs);
		o->refused = plan_admit_all(&in, 2, x.groups, x.gsize, &gg, &gs, &o->jobs_admitted);
	}
	return 0;
}
