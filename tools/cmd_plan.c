/* sumcastctl plan: what a deployment needs and what it gains, from the
 * sizing model (plan_model.h, docs/sizing.md). No daemon is asked.
 *
 *   sumcastctl plan --nodes N --heads H --aggs M --link-gbps B
 *                   --agg-link-gbps BA --bytes S[,S...] [--fan-in F]
 *                   [--chunk C] [--window W] [--agg-threads T] [--job-threads J] [--tcp]
 *                   [--loopback --cores K] [--json]
 *
 * --nodes, --aggs and --bytes take comma lists: one row per combination
 * (bytes innermost). Sizes take K, M, G, T (powers of 1024). */
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../daemon/settings.h"
#include "config.h"
#include "plan_model.h"
#include "sumcastctl.h"

#define PLAN_LIST_MAX 64

static void plan_usage(FILE *out)
{
	fprintf(out,
		"Usage: sumcastctl plan --nodes N --heads H --aggs M --link-gbps B --agg-link-gbps BA\n"
		"                       --bytes S[,S...] [--fan-in F] [--chunk C] [--window W]\n"
		"                       [--agg-threads T] [--job-threads J] [--tcp] [--loopback --cores K] [--json]\n"
		"Predicts a collnet allreduce of S bytes on each of a node's H heads (communicators,\n"
		"each on its own link of B Gb/s; NCCL's allreduce of H x S under CollNet Direct)\n"
		"from the sizing model (docs/sizing.md): the ring, the\n"
		"aggregators alone (flat, or a two-level tree when N > F), split=auto's share and time,\n"
		"memory and posted receives per aggregator, the aggregators needed, connect time,\n"
		"and whether the daemons admit the jobs, by their own admission rules (common/admit.c):\n"
		"each aggregator's jobs join it in turn; the first refused names the rule.\n"
		"--nodes, --aggs, --bytes take comma lists (one row each). Sizes: K, M, G, T.\n"
		"  --fan-in F        SUMCAST_FAN_IN (64)       --chunk C      SUMCAST_CHUNK_BYTES (256K)\n"
		"  --window W        SUMCAST_WINDOW (8)        --agg-threads  [data] threads (1)\n"
		"  --max-inflight C  [job] max-inflight (64M)  --mem-budget C [job] memory-budget (1G)\n"
		"  --rx-queue Q      a data thread's provider receive queue (8192)\n"
		"  --job-threads J   [data] job-threads (0: all): data threads one job is spread over\n"
		"  --max-jobs J      [job] max-jobs (64)       --max-memory-share X [job] max-memory-share (0.5)\n"
		"  --max-window W    [job] max-window (64)     --max-chunk C  [job] max-chunk (4M)\n"
		"  --min-chunk C     [job] min-chunk (16K)     --sealed       the daemons have a key ([auth] key-file)\n"
		"  --daemon-config FILE  the daemons' sumcastd.conf: the [job], [data] threads, job-threads and [auth]\n"
		"                    settings above from it, as sumcastd reads it (flags given too win)\n"
		"  --tcp             tcp;ofi_rxm: aggregators copy what they receive (default: RDMA)\n"
		"  --loopback        every process on one host of --cores K cores (the costs measured\n"
		"                    here on tcp loopback); link speeds then not needed\n"
		"  --json            one JSON object per row\n");
}

/* "a,b,c" into v[]: sizes, or whole numbers in [min, max]. */
static int plan_list(const char *opt, const char *arg, bool size, uint64_t min, uint64_t max, uint64_t *v)
{
	char buf[1024], *items[PLAN_LIST_MAX];
	int n = arg_list("plan", opt, arg, items, PLAN_LIST_MAX, buf, sizeof(buf));

	for (int i = 0; i < n; i++)
		v[i] = size ? arg_size("plan", opt, items[i], min, max) : arg_count("plan", opt, items[i], min, max);
	return n;
}

/* --daemon-config FILE: the admission settings of a sumcastd.conf, read
 * through the daemon's own table (daemon/settings.c), SUMCASTD_* overrides
 * included, as the daemon would read them. */
static void plan_daemon_config(struct plan_in *in, const char *path)
{
	static struct settings st;
	static enum cfg_source src[SETTINGS_MAX];
	struct cfg_error err;

	if (settings_load(&st, path, src, &err)) {
		fprintf(stderr, "sumcastctl plan: --daemon-config %s: %s\n", path, err.msg);
		exit(EXIT_USAGE);
	}
	in->max_jobs = (uint32_t)st.max_jobs;
	in->mem_budget = st.memory_budget;
	in->max_memory_share = st.max_memory_share;
	in->max_window = (uint32_t)st.max_window;
	in->max_chunk = st.max_chunk;
	in->max_inflight = st.max_inflight;
	in->min_chunk = st.min_chunk;
	in->agg_threads = (uint32_t)st.threads;
	in->job_threads = (uint32_t)st.job_threads;
	in->sealed = st.key_file[0] != 0;
}

static const char *plan_bytes(double v, char *buf, size_t len)
{
	return fmt_bytes(v, buf, len);
}

static const char *plan_time(double us, char *buf, size_t len)
{
	if (us < 1000)
		snprintf(buf, len, "%.1f us", us);
	else if (us < 1e6)
		snprintf(buf, len, "%.2f ms", us / 1e3);
	else
		snprintf(buf, len, "%.2f s", us / 1e6);
	return buf;
}

static void plan_row_json(const struct plan_in *in, const struct plan_out *po)
{
	json_t *j = json_object();

	json_object_set_new(j, "nodes", json_integer(in->nodes));
	json_object_set_new(j, "heads", json_integer(in->heads));
	json_object_set_new(j, "aggs", json_integer(in->aggs));
	json_object_set_new(j, "bytes", json_integer((json_int_t)in->bytes));
	json_object_set_new(j, "link_gbps", json_real(in->loopback ? 0 : in->link_gbps));
	json_object_set_new(j, "agg_link_gbps", json_real(in->loopback ? 0 : in->agg_link_gbps));
	json_object_set_new(j, "loopback", json_boolean(in->loopback));
	json_object_set_new(j, "cores", json_integer(in->loopback ? in->cores : 0));
	json_object_set_new(j, "fan_in", json_integer(in->fan_in));
	json_object_set_new(j, "tree_levels", json_integer(po->tree_levels));
	json_object_set_new(j, "groups", json_integer(po->groups));
	json_object_set_new(j, "group_size", json_integer(po->group_size));
	json_object_set_new(j, "max_job_ranks", json_integer(po->max_job_ranks));
	json_object_set_new(j, "jobs_per_agg", json_integer(po->jobs_per_agg));
	json_object_set_new(j, "byte_factor", json_real(po->byte_factor));
	json_object_set_new(j, "split", json_real(round(po->split * 1e4) / 1e4));
	json_object_set_new(j, "split_model", json_real(round(po->split_model * 1e4) / 1e4));
	json_object_set_new(j, "speedup_vs_ring", json_real(round(po->speedup_vs_ring * 1e4) / 1e4));
	json_object_set_new(j, "t_ring_us", json_real(round(po->t_ring_us * 100) / 100));
	json_object_set_new(j, "t_agg_us", json_real(round(po->t_agg_us * 100) / 100));
	json_object_set_new(j, "t_split_us", json_real(round(po->t_split_us * 100) / 100));
	json_object_set_new(j, "t_auto_us", json_real(round(po->t_auto_us * 100) / 100));
	json_object_set_new(j, "agg_bound", json_string(po->bound));
	json_object_set_new(j, "agg_mem_bytes", json_integer((json_int_t)po->agg_mem_bytes));
	json_object_set_new(j, "agg_posted_recvs", json_integer((json_int_t)po->agg_posted_recvs));
	json_object_set_new(j, "job_window", json_integer(po->grant.window));
	json_object_set_new(j, "job_chunk", json_integer((json_int_t)po->grant.chunk));
	json_object_set_new(j, "aggs_needed", json_integer(po->aggs_needed));
	json_object_set_new(j, "agg_cpu_short", json_boolean(po->agg_cpu_short));
	json_object_set_new(j, "job_lanes", json_integer(po->job_lanes));
	json_object_set_new(j, "admitted", json_boolean(!po->refused));
	json_object_set_new(j, "refused", json_string(po->refused ? po->refused : ""));
	json_object_set_new(j, "jobs_admitted", json_integer(po->jobs_admitted));
	json_object_set_new(j, "connect_s", json_real(round(po->connect_s * 1e4) / 1e4));
	char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	if (s)
		puts(s);
	free(s);
	json_decref(j);
}

static void plan_legend(void)
{
	printf("# split: share to the aggregators (auto); speedup: ring / auto; agg mem, recvs: per\n"
	       "# aggregator, all jobs; needed: aggregators that carry everything at the node links'\n"
	       "# speed (*: their CPU never keeps up); bound: what limits the aggregators alone, or\n"
	       "# the admission rule by which the daemons would refuse a job at these settings\n"
	       "# (max-jobs, memory-share, memory-budget, receive-queue, sealed-chunk) and how many\n"
	       "# of an aggregator's jobs it took first\n");
}

static void plan_header(void)
{
	printf("%6s %5s %5s %9s %-11s %6s %8s %10s %10s %10s %10s %9s %7s %9s %s\n", "nodes", "heads",
	       "aggs", "bytes", "tree", "split", "speedup", "ring", "aggs only", "auto", "agg mem", "recvs",
	       "needed", "connect", "bound / refused");
}

static void plan_row(const struct plan_in *in, const struct plan_out *po)
{
	char b[6][32], tree[32], verdict[64];

	if (po->tree_levels == 1)
		snprintf(tree, sizeof(tree), "flat %u", in->nodes);
	else
		snprintf(tree, sizeof(tree), "%ux%u", po->groups, po->group_size);
	if (po->refused)
		snprintf(verdict, sizeof(verdict), "%s (%u of %u jobs)", po->refused, po->jobs_admitted,
			 po->jobs_per_agg);
	printf("%6u %5u %5u %9s %-11s %6.3f %7.2fx %10s %10s %10s %10s %9llu %6u%s %9s %s\n", in->nodes,
	       in->heads, in->aggs, plan_bytes((double)in->bytes, b[0], sizeof(b[0])), tree, po->split,
	       po->speedup_vs_ring, plan_time(po->t_ring_us, b[1], sizeof(b[1])),
	       plan_time(po->t_agg_us, b[2], sizeof(b[2])), plan_time(po->t_auto_us, b[3], sizeof(b[3])),
	       plan_bytes((double)po->agg_mem_bytes, b[4], sizeof(b[4])),
	       (unsigned long long)po->agg_posted_recvs, po->aggs_needed, po->agg_cpu_short ? "*" : " ",
	       plan_time(po->connect_s * 1e6, b[5], sizeof(b[5])),
	       po->refused ? verdict : po->bound);
}

int cmd_plan(const struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "nodes", required_argument, NULL, 'n' },
		{ "heads", required_argument, NULL, 'H' },
		{ "aggs", required_argument, NULL, 'm' },
		{ "link-gbps", required_argument, NULL, 'b' },
		{ "agg-link-gbps", required_argument, NULL, 'a' },
		{ "bytes", required_argument, NULL, 's' },
		{ "fan-in", required_argument, NULL, 'F' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "window", required_argument, NULL, 'w' },
		{ "agg-threads", required_argument, NULL, 'T' },
		{ "job-threads", required_argument, NULL, 'G' },
		{ "max-inflight", required_argument, NULL, 'I' },
		{ "mem-budget", required_argument, NULL, 'B' },
		{ "rx-queue", required_argument, NULL, 'Q' },
		{ "max-jobs", required_argument, NULL, 'J' },
		{ "max-memory-share", required_argument, NULL, 'S' },
		{ "max-window", required_argument, NULL, 'W' },
		{ "max-chunk", required_argument, NULL, 'C' },
		{ "min-chunk", required_argument, NULL, 'N' },
		{ "sealed", no_argument, NULL, 'k' },
		{ "daemon-config", required_argument, NULL, 'D' },
		{ "tcp", no_argument, NULL, 'r' },
		{ "loopback", no_argument, NULL, 'L' },
		{ "cores", required_argument, NULL, 'K' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t nodes[PLAN_LIST_MAX], aggs[PLAN_LIST_MAX], bytes[PLAN_LIST_MAX];
	int nn = 0, na = 0, nb = 0, opt;
	struct plan_in in;
	bool json = o->json;

	memset(&in, 0, sizeof(in));
	/* the plugin and the client library join with every type they can
	 * reduce (client/client.c): f16 and bf16 among them, an accumulator
	 * of two chunks per slot */
	in.wide_types = true;
	optind = 1;
	/* --daemon-config first, the flags then override it */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1)
		if (opt == 'D')
			plan_daemon_config(&in, optarg);
	opterr = 1;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': nn = plan_list("--nodes", optarg, false, 2, 1 << 20, nodes); break;
		case 'H': in.heads = (uint32_t)arg_count("plan", "--heads", optarg, 1, 64); break;
		case 'm': na = plan_list("--aggs", optarg, false, 1, 1 << 16, aggs); break;
		case 'b': in.link_gbps = arg_real("plan", "--link-gbps", optarg, 0, true, 1e5, "Gb/s"); break;
		case 'a': in.agg_link_gbps = arg_real("plan", "--agg-link-gbps", optarg, 0, true, 1e5, "Gb/s"); break;
		case 's': nb = plan_list("--bytes", optarg, true, 1, 1ull << 40, bytes); break;
		case 'F': in.fan_in = (uint32_t)arg_count("plan", "--fan-in", optarg, 2, 65536); break;
		case 'c': in.chunk = arg_size("plan", "--chunk", optarg, 64, 64ull << 20); break;
		case 'w': in.window = (uint32_t)arg_count("plan", "--window", optarg, 1, 1024); break;
		case 'T': in.agg_threads = (uint32_t)arg_count("plan", "--agg-threads", optarg, 1, 256); break;
		case 'G': in.job_threads = (uint32_t)arg_count("plan", "--job-threads", optarg, 0, 256); break;
		case 'I': in.max_inflight = arg_size("plan", "--max-inflight", optarg, 4096, 1ull << 40); break;
		case 'B': in.mem_budget = arg_size("plan", "--mem-budget", optarg, 1, 1ull << 50); break;
		case 'Q': in.rx_queue = (uint32_t)arg_count("plan", "--rx-queue", optarg, 16, 1 << 24); break;
		case 'J': in.max_jobs = (uint32_t)arg_count("plan", "--max-jobs", optarg, 1, 1048575); break;
		case 'S': in.max_memory_share = arg_real("plan", "--max-memory-share", optarg, 0, true, 1, NULL); break;
		case 'W': in.max_window = (uint32_t)arg_count("plan", "--max-window", optarg, 1, 1 << 20); break;
		case 'C': in.max_chunk = arg_size("plan", "--max-chunk", optarg, 8, 1ull << 30); break;
		case 'N': in.min_chunk = arg_size("plan", "--min-chunk", optarg, 8, 64ull << 20); break;
		case 'k': in.sealed = true; break;
		case 'D': break;
		case 'r': in.tcp = true; break;
		case 'L': in.loopback = true; break;
		case 'K': in.cores = (uint32_t)arg_count("plan", "--cores", optarg, 1, 4096); break;
		case 'j': json = true; break;
		case 'h': plan_usage(stdout); return 0;
		default: plan_usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sumcastctl plan: unexpected argument %s\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (!nn || !na || !nb || (!in.loopback && (!(in.link_gbps > 0) || !(in.agg_link_gbps > 0)))) {
		fprintf(stderr, "sumcastctl plan: --nodes, --aggs and --bytes are needed, and --link-gbps "
				"and --agg-link-gbps unless --loopback\n");
		plan_usage(stderr);
		return EXIT_USAGE;
	}
	if (in.loopback && !in.cores) {
		fprintf(stderr, "sumcastctl plan: --loopback needs --cores K\n");
		return EXIT_USAGE;
	}
	if (in.cores && !in.loopback) {
		fprintf(stderr, "sumcastctl plan: --cores goes with --loopback\n");
		return EXIT_USAGE;
	}
	plan_in_defaults(&in);
	/* Two passes over the rows: the first only checks them, so that bad
	 * input prints nothing but the sentence; the second prints them (the
	 * model is cheap to run again). */
	for (int pass = 0; pass < 2; pass++) {
		char cb[3][48];
		if (pass == 1 && !json) {
			if (in.loopback)
				printf("# loopback: every process on one host of %u cores (tcp, costs measured here)\n",
				       in.cores);
			else
				printf("# node links %g Gb/s, aggregator links %g Gb/s%s; fan-in %u, chunk %s, window %u\n",
				       in.link_gbps, in.agg_link_gbps,
				       in.tcp ? " (tcp: receive copies on the aggregators)" : " (RDMA)", in.fan_in,
				       arg_fmt_size(in.chunk, cb[0], sizeof(cb[0])), in.window);
			printf("# daemons: max-jobs %u, memory-budget %s (max-memory-share %g), max-inflight %s, "
			       "%u data thread%s of %u receives%s\n",
			       in.max_jobs, arg_fmt_size(in.mem_budget, cb[1], sizeof(cb[1])), in.max_memory_share,
			       arg_fmt_size(in.max_inflight, cb[2], sizeof(cb[2])), in.agg_threads,
			       in.agg_threads == 1 ? "" : "s", in.rx_queue, in.sealed ? ", sealed" : "");
			plan_header();
			atexit(plan_legend);
		}
		for (int i = 0; i < nn; i++)
			for (int k = 0; k < na; k++)
				for (int l = 0; l < nb; l++) {
					struct plan_out out;
					char err[256];
					in.nodes = (uint32_t)nodes[i];
					in.aggs = (uint32_t)aggs[k];
					in.bytes = bytes[l];
					if (plan_run(&in, &out, err, sizeof(err))) {
						fprintf(stderr, "sumcastctl plan: %s\n", err);
						return EXIT_USAGE;
					}
					if (pass == 0)
						continue;
					if (json)
						plan_row_json(&in, &out);
					else
						plan_row(&in, &out);
				}
	}
	return 0;
}
