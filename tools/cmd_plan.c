/* sumcastctl plan: what a deployment needs and what it gains, from the
 * sizing model (plan_model.h, docs/sizing.md). No daemon is asked.
 *
 *   sumcastctl plan --nodes N --heads H --aggs M --link-gbps B
 *                   --agg-link-gbps BA --bytes S[,S...] [--fan-in F]
 *                   [--chunk C] [--window W] [--agg-threads T] [--tcp]
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

#include "config.h"
#include "plan_model.h"
#include "sumcastctl.h"

#define PLAN_LIST_MAX 64

static void plan_usage(FILE *out)
{
	fprintf(out,
		"Usage: sumcastctl plan --nodes N --heads H --aggs M --link-gbps B --agg-link-gbps BA\n"
		"                       --bytes S[,S...] [--fan-in F] [--chunk C] [--window W]\n"
		"                       [--agg-threads T] [--tcp] [--loopback --cores K] [--json]\n"
		"Predicts a collnet allreduce of S bytes on each of a node's H heads (communicators,\n"
		"each on its own link of B Gb/s; NCCL's allreduce of H x S under CollNet Direct)\n"
		"from the sizing model (docs/sizing.md): the ring, the\n"
		"aggregators alone (flat, or a two-level tree when N > F), split=auto's share and time,\n"
		"memory and posted receives per aggregator, the aggregators needed, connect time.\n"
		"--nodes, --aggs, --bytes take comma lists (one row each). Sizes: K, M, G, T.\n"
		"  --fan-in F        SUMCAST_FAN_IN (64)       --chunk C      SUMCAST_CHUNK_BYTES (256K)\n"
		"  --window W        SUMCAST_WINDOW (8)        --agg-threads  [data] threads (1)\n"
		"  --max-inflight C  [job] max-inflight (64M)  --mem-budget C [job] memory-budget (1G)\n"
		"  --rx-queue Q      a data thread's provider receive queue (8192)\n"
		"  --tcp             tcp;ofi_rxm: aggregators copy what they receive (default: RDMA)\n"
		"  --loopback        every process on one host of --cores K cores (the costs measured\n"
		"                    here on tcp loopback); link speeds then not needed\n"
		"  --json            one JSON object per row\n");
}

static double plan_num(const char *opt, const char *s, double min, double max)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= min && v <= max)) {
		fprintf(stderr, "sumcastctl plan: %s %s: expected a number in [%g, %g]\n", opt, s, min, max);
		exit(EXIT_USAGE);
	}
	return v;
}

/* A size through the config module's parser (common/config.c: K, M, G, T). */
static uint64_t plan_size(const char *opt, const char *s)
{
	struct holder {
		uint64_t v;
	} h;
	static const struct cfg_entry e = { "", "size", CFG_SIZE, "0", "", offsetof(struct holder, v), 0, 0,
					    false };
	struct cfg_error err;

	if (cfg_set(&e, &h, s, &err)) {
		fprintf(stderr, "sumcastctl plan: %s %s: %s\n", opt, s, err.msg);
		exit(EXIT_USAGE);
	}
	return h.v;
}

/* "a,b,c" into v[]; sizes or plain counts. */
static int plan_list(const char *opt, const char *arg, bool size, double min, double max, uint64_t *v)
{
	char buf[1024], *save = NULL, *tok;
	int n = 0;

	if (strlen(arg) >= sizeof(buf)) {
		fprintf(stderr, "sumcastctl plan: %s: list too long\n", opt);
		exit(EXIT_USAGE);
	}
	strcpy(buf, arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == PLAN_LIST_MAX) {
			fprintf(stderr, "sumcastctl plan: %s: at most %d values\n", opt, PLAN_LIST_MAX);
			exit(EXIT_USAGE);
		}
		v[n++] = size ? plan_size(opt, tok) : (uint64_t)plan_num(opt, tok, min, max);
	}
	if (!n) {
		fprintf(stderr, "sumcastctl plan: %s: no value\n", opt);
		exit(EXIT_USAGE);
	}
	return n;
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
	json_object_set_new(j, "admitted", json_boolean(!po->refused));
	json_object_set_new(j, "refused", json_string(po->refused ? po->refused : ""));
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
	       "# why the daemons would refuse the jobs at these settings (memory, receive queue)\n");
}

static void plan_header(void)
{
	printf("%6s %5s %5s %9s %-11s %6s %8s %10s %10s %10s %10s %9s %7s %9s %-9s\n", "nodes", "heads",
	       "aggs", "bytes", "tree", "split", "speedup", "ring", "aggs only", "auto", "agg mem", "recvs",
	       "needed", "connect", "bound / refused");
}

static void plan_row(const struct plan_in *in, const struct plan_out *po)
{
	char b[6][32], tree[32];

	if (po->tree_levels == 1)
		snprintf(tree, sizeof(tree), "flat %u", in->nodes);
	else
		snprintf(tree, sizeof(tree), "%ux%u", po->groups, po->group_size);
	printf("%6u %5u %5u %9s %-11s %6.3f %7.2fx %10s %10s %10s %10s %9llu %6u%s %9s %-9s\n", in->nodes,
	       in->heads, in->aggs, plan_bytes((double)in->bytes, b[0], sizeof(b[0])), tree, po->split,
	       po->speedup_vs_ring, plan_time(po->t_ring_us, b[1], sizeof(b[1])),
	       plan_time(po->t_agg_us, b[2], sizeof(b[2])), plan_time(po->t_auto_us, b[3], sizeof(b[3])),
	       plan_bytes((double)po->agg_mem_bytes, b[4], sizeof(b[4])),
	       (unsigned long long)po->agg_posted_recvs, po->aggs_needed, po->agg_cpu_short ? "*" : " ",
	       plan_time(po->connect_s * 1e6, b[5], sizeof(b[5])),
	       po->refused ? po->refused : po->bound);
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
		{ "max-inflight", required_argument, NULL, 'I' },
		{ "mem-budget", required_argument, NULL, 'B' },
		{ "rx-queue", required_argument, NULL, 'Q' },
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
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': nn = plan_list("--nodes", optarg, false, 2, 1 << 20, nodes); break;
		case 'H': in.heads = (uint32_t)plan_num("--heads", optarg, 1, 64); break;
		case 'm': na = plan_list("--aggs", optarg, false, 1, 1 << 16, aggs); break;
		case 'b': in.link_gbps = plan_num("--link-gbps", optarg, 1e-3, 1e5); break;
		case 'a': in.agg_link_gbps = plan_num("--agg-link-gbps", optarg, 1e-3, 1e5); break;
		case 's': nb = plan_list("--bytes", optarg, true, 0, 0, bytes); break;
		case 'F': in.fan_in = (uint32_t)plan_num("--fan-in", optarg, 2, 65536); break;
		case 'c': in.chunk = plan_size("--chunk", optarg); break;
		case 'w': in.window = (uint32_t)plan_num("--window", optarg, 1, 1024); break;
		case 'T': in.agg_threads = (uint32_t)plan_num("--agg-threads", optarg, 1, 256); break;
		case 'I': in.max_inflight = plan_size("--max-inflight", optarg); break;
		case 'B': in.mem_budget = plan_size("--mem-budget", optarg); break;
		case 'Q': in.rx_queue = (uint32_t)plan_num("--rx-queue", optarg, 16, 1 << 24); break;
		case 'r': in.tcp = true; break;
		case 'L': in.loopback = true; break;
		case 'K': in.cores = (uint32_t)plan_num("--cores", optarg, 1, 4096); break;
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
		if (pass == 1 && !json) {
			if (in.loopback)
				printf("# loopback: every process on one host of %u cores (tcp, costs measured here)\n",
				       in.cores);
			else
				printf("# node links %g Gb/s, aggregator links %g Gb/s%s; fan-in %u, chunk %llu, window %u\n",
				       in.link_gbps, in.agg_link_gbps,
				       in.tcp ? " (tcp: receive copies on the aggregators)" : " (RDMA)", in.fan_in,
				       (unsigned long long)in.chunk, in.window);
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
