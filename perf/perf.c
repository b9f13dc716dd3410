/* sumcast-perf: the acceptance run for a user's cluster, without GPUs
 * (docs/first-run.md). One process per node (or per GPU head, --heads),
 * started by the user's launcher; each loads the installed plugin as NCCL
 * does (host.h) and runs allreduce, ReduceScatter and AllGather over
 * nccl-tests' size sweep, with the ring, the aggregators and auto side by
 * side, every result checked; rank 0 prints nccl-tests' columns, what the
 * sizing model (tools/plan_model.h, `sumcastctl plan`) predicts for the
 * same shape, and a verdict.
 *
 *   mpirun -np N sumcast-perf [-b 8] [-e 32M] [-f 4] [-n 20] [-w 5] [-c 1]
 *          [-d float] [-o sum] [--coll allreduce,reducescatter,allgather]
 *          [--modes ring,aggs,auto] [--heads H] [--link-gbps G]
 *          [--agg-link-gbps G] [--plugin PATH] [--timeout S] [--json] [--verbose]
 *
 * Exit: 0 when the verdict is PASS, 1 when it is LOOK or FAIL, 2 usage. */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot.h"
#include "clock.h"
#include "config.h"
#include "host.h"
#include "agglist.h"
#include "perf_check.h"
#include "reduce.h"
#include "../tools/plan_model.h"

#define MODES 3
#define COLLS 3
#define MAX_SIZES 64
#define AGGS_MAX 64

enum { M_RING, M_AGGS, M_AUTO };
static const char *const mode_names[MODES] = { "ring", "aggs", "auto" };
static const char *const mode_titles[MODES] = { "ring", "aggregators", "auto" };
static const char *const coll_names[COLLS] = { "allreduce", "reducescatter", "allgather" };

static struct {
	size_t minb, maxb;
	double factor;
	int iters, warmup, check, heads;
	ncclDataType_t t;
	ncclRedOp_t op;
	bool coll[COLLS], mode[MODES];
	double link_gbps, agg_link_gbps, timeout_s;
	const char *plugin;
	bool json, verbose;
} o = { .minb = 8, .maxb = 32u << 20, .factor = 4, .iters = 20, .warmup = 5, .check = 1, .heads = 1,
	.t = ncclFloat32, .op = ncclSum, .coll = { true, true, true }, .mode = { true, true, true },
	.timeout_s = 120 };

static struct boot B;
static struct host H[MODES];

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sumcast-perf [-b minbytes] [-e maxbytes] [-f stepfactor] [-n iters] [-w warmup]\n"
		"                    [-c 0|1] [-d float|half|bfloat16|double|int8|uint8|int32|uint32|int64|uint64]\n"
		"                    [-o sum|prod|min|max] [--coll allreduce,reducescatter,allgather]\n"
		"                    [--modes ring,aggs,auto] [--heads H] [--link-gbps G] [--agg-link-gbps G]\n"
		"                    [--plugin PATH] [--timeout S] [--json] [--verbose]\n"
		"Start one process per node (per GPU head with --heads) with your launcher:\n"
		"  mpirun -np N sumcast-perf          (a build with MPI)\n"
		"  srun -N N --ntasks-per-node 1 sumcast-perf   with SUMCAST_PERF_RDV=<node0>:<port>\n"
		"The aggregators: SUMCAST_AGGREGATORS=host:port,... as for training. docs/first-run.md.\n");
}

static size_t parse_bytes(const char *opt, const char *s)
{
	uint64_t v = 0;

	if (cfg_parse_size(s, &v) || !v || v > (1ull << 40)) {
		fprintf(stderr, "sumcast-perf: %s %s: a size from 1 to 1T (K, M, G, T: powers of 1024)\n", opt, s);
		exit(2);
	}
	return (size_t)v;
}

static double parse_num(const char *opt, const char *s, double min, double max)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= min && v <= max)) {
		fprintf(stderr, "sumcast-perf: %s %s: a number from %g to %g\n", opt, s, min, max);
		exit(2);
	}
	return v;
}

static void parse_list(const char *opt, const char *s, const char *const *names, int n, bool *out)
{
	char buf[256], *save = NULL;

	memset(out, 0, sizeof(bool) * (size_t)n);
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		int k;
		for (k = 0; k < n && strcmp(w, names[k]); k++)
			;
		if (k == n) {
			fprintf(stderr, "sumcast-perf: %s: \"%s\" is not one of", opt, w);
			for (k = 0; k < n; k++)
				fprintf(stderr, " %s", names[k]);
			fprintf(stderr, "\n");
			exit(2);
		}
		out[k] = true;
	}
}

static const struct {
	const char *name;
	ncclDataType_t t;
} types[] = { { "int8", ncclInt8 },	{ "uint8", ncclUint8 },	  { "int32", ncclInt32 },
	      { "uint32", ncclUint32 }, { "int64", ncclInt64 },	  { "uint64", ncclUint64 },
	      { "half", ncclFloat16 },	{ "float", ncclFloat32 }, { "double", ncclFloat64 },
	      { "bfloat16", ncclBfloat16 } };
static const char *const op_names[] = { "sum", "prod", "max", "min" };

static const char *type_name(ncclDataType_t t)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].t == t)
			return types[i].name;
	return "?";
}

static void options(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "minbytes", 1, 0, 'b' }, { "maxbytes", 1, 0, 'e' }, { "stepfactor", 1, 0, 'f' },
		{ "iters", 1, 0, 'n' }, { "warmup_iters", 1, 0, 'w' }, { "check", 1, 0, 'c' },
		{ "datatype", 1, 0, 'd' }, { "op", 1, 0, 'o' }, { "coll", 1, 0, 'C' }, { "modes", 1, 0, 'M' },
		{ "heads", 1, 0, 'H' }, { "link-gbps", 1, 0, 'L' }, { "agg-link-gbps", 1, 0, 'A' },
		{ "plugin", 1, 0, 'p' }, { "timeout", 1, 0, 'T' }, { "json", 0, 0, 'j' },
		{ "verbose", 0, 0, 'v' }, { "help", 0, 0, 'h' }, { "version", 0, 0, 'V' }, { 0, 0, 0, 0 }
	};
	int c;

	while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:d:o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'b': o.minb = parse_bytes("-b", optarg); break;
		case 'e': o.maxb = parse_bytes("-e", optarg); break;
		case 'f': o.factor = parse_num("-f", optarg, 1.01, 1024); break;
		case 'n': o.iters = (int)parse_num("-n", optarg, 1, 1e6); break;
		case 'w': o.warmup = (int)parse_num("-w", optarg, 0, 1e6); break;
		case 'c': o.check = (int)parse_num("-c", optarg, 0, 1); break;
		case 'd': {
			size_t i;
			for (i = 0; i < sizeof(types) / sizeof(types[0]) && strcmp(types[i].name, optarg); i++)
				;
			if (i == sizeof(types) / sizeof(types[0])) {
				fprintf(stderr, "sumcast-perf: -d %s: not a type NCCL's collnet takes\n", optarg);
				exit(2);
			}
			o.t = types[i].t;
			break;
		}
		case 'o': {
			int k;
			for (k = 0; k < 4 && strcmp(op_names[k], optarg); k++)
				;
			if (k == 4) {
				fprintf(stderr, "sumcast-perf: -o %s: sum, prod, min or max\n", optarg);
				exit(2);
			}
			o.op = (ncclRedOp_t)k;
			break;
		}
		case 'C': parse_list("--coll", optarg, coll_names, COLLS, o.coll); break;
		case 'M': parse_list("--modes", optarg, mode_names, MODES, o.mode); break;
		case 'H': o.heads = (int)parse_num("--heads", optarg, 1, 64); break;
		case 'L': o.link_gbps = parse_num("--link-gbps", optarg, 1e-3, 1e5); break;
		case 'A': o.agg_link_gbps = parse_num("--agg-link-gbps", optarg, 1e-3, 1e5); break;
		case 'p': o.plugin = optarg; break;
		case 'T': o.timeout_s = parse_num("--timeout", optarg, 1, 86400); break;
		case 'j': o.json = true; break;
		case 'v': o.verbose = true; break;
		case 'h': usage(stdout); exit(0);
		case 'V': printf("sumcast-perf %s\n", SUMCAST_VERSION); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sumcast-perf: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		exit(2);
	}
	if (o.minb > o.maxb) {
		fprintf(stderr, "sumcast-perf: -b %zu is above -e %zu\n", o.minb, o.maxb);
		exit(2);
	}
	/* the types and ops whose every order of reduction is exact (below) */
	if (o.op == ncclProd && (o.t == ncclFloat16 || o.t == ncclBfloat16 || o.t == ncclInt8 || o.t == ncclUint8))
		fprintf(stderr, "sumcast-perf: note: -o prod of %s overflows with many ranks; the check "
				"compares against the same wrapped or infinite value\n", type_name(o.t));
}

/* ---- one sample ---- */

struct row {
	size_t bytes, count;
	double us[MODES];    /* slowest rank's mean per collective; < 0: failed */
	double wrong[MODES]; /* over every rank */
	double plan_us[MODES];
	bool planned;
};

static struct {
	int nodes, node, head;
	uint8_t *send, *recv;
	size_t region;
	char failed[MODES][HOST_LINE]; /* why a mode stopped */
	struct perf_data data;
} R;

/* One collective of `bytes` in mode m. 0, -1 failed here. */
static int one(int m, int coll, size_t bytes, char *err, size_t len)
{
	size_t es = coll == C_AG ? 1 : perf_type_size(o.t);

	if (coll == C_AR)
		return host_allreduce(&H[m], R.send, R.recv, bytes / es, o.t, o.op, o.timeout_s, err, len);
	size_t bpr = bytes / es / (size_t)R.nodes * es;
	return host_window(&H[m], coll == C_RS ? 1 : 2, R.send, R.recv, bpr, R.nodes, R.node, o.t, o.op,
			   o.timeout_s, err, len);
}

/* Every rank agrees a mode failed when one did: the flags travel with the
 * times (boot_max). */
static void sample(int coll, struct row *w)
{
	int order[MODES], n = 0;
	char err[HOST_LINE];

	for (int k = 0; k < MODES; k++) {
		int m = (k + (int)(w->bytes % MODES)) % MODES; /* the order rotates with the size */
		if (o.mode[m] && !R.failed[m][0])
			order[n++] = m;
	}
	for (int k = 0; k < n; k++) {
		int m = order[k];
		double v[3] = { 0, 0, 0 }; /* failed, time, wrong */
		int rc = 0;
		err[0] = 0;
		if (o.check)
			perf_prepare(&R.data, coll, w->bytes);
		for (int i = 0; i < o.warmup && !rc; i++)
			rc = one(m, coll, w->bytes, err, sizeof(err));
		double f = rc ? 1 : 0;
		if (boot_max(&B, &f, 1) || f) {
			snprintf(R.failed[m], sizeof(R.failed[m]), "%s", err[0] ? err : "failed on another rank");
			w->us[m] = -1;
			continue;
		}
		double t0 = sc_now_s();
		for (int i = 0; i < o.iters && !rc; i++)
			rc = one(m, coll, w->bytes, err, sizeof(err));
		v[1] = (sc_now_s() - t0) / o.iters * 1e6;
		if (!rc && o.check) {
			perf_prepare(&R.data, coll, w->bytes);
			rc = one(m, coll, w->bytes, err, sizeof(err));
			if (!rc)
				v[2] = (double)perf_count_wrong(&R.data, coll, w->bytes);
		}
		v[0] = rc ? 1 : 0;
		double wr = v[2];
		if (boot_max(&B, v, 2) || boot_sum(&B, &wr, 1)) {
			fprintf(stderr, "sumcast-perf: rank %d: the bootstrap failed\n", B.rank);
			exit(1);
		}
		if (v[0]) {
			snprintf(R.failed[m], sizeof(R.failed[m]), "%s", err[0] ? err : "failed on another rank");
			w->us[m] = -1;
			continue;
		}
		w->us[m] = v[1];
		w->wrong[m] = wr;
	}
}

/* ---- the model ---- */

static struct plan_in plan_base;
static bool plan_ok;
static char plan_why[200];

static void plan_row(struct row *w)
{
	struct plan_in in = plan_base;
	struct plan_out out;
	char err[200];

	in.bytes = w->bytes;
	if (!plan_ok || plan_run(&in, &out, err, sizeof(err))) {
		if (plan_ok)
			snprintf(plan_why, sizeof(plan_why), "%s", err);
		return;
	}
	w->plan_us[M_RING] = out.t_ring_us;
	w->plan_us[M_AGGS] = out.t_agg_us;
	w->plan_us[M_AUTO] = out.t_auto_us;
	w->planned = true;
}

/* ---- output ---- */

static double busbw_factor(int coll)
{
	double n = R.nodes;
	return coll == C_AR ? 2 * (n - 1) / n : (n - 1) / n;
}

static void print_head(int coll)
{
	printf("#\n# %s, %s %s%s\n", coll_names[coll], type_name(o.t), coll == C_AG ? "(bytes)" : op_names[o.op],
	       coll == C_AR ? "" : ": size is the whole buffer, nranks blocks");
	printf("# %10s %12s", "", "");
	for (int m = 0; m < MODES; m++)
		if (o.mode[m])
			printf(" %-34s", mode_titles[m]);
	if (coll == C_AR && plan_ok)
		printf("  plan (us)");
	printf("\n# %10s %12s", "size", "count");
	for (int m = 0; m < MODES; m++)
		if (o.mode[m])
			printf(" %9s %7s %7s %8s", "time", "algbw", "busbw", "#wrong");
	if (coll == C_AR && plan_ok)
		printf(" %9s %9s %9s", "ring", "aggs", "auto");
	printf("\n# %10s %12s", "(B)", "(elements)");
	for (int m = 0; m < MODES; m++)
		if (o.mode[m])
			printf(" %9s %7s %7s %8s", "(us)", "(GB/s)", "(GB/s)", "");
	printf("\n");
}

static void print_row(int coll, const struct row *w)
{
	printf("  %10zu %12zu", w->bytes, w->count);
	for (int m = 0; m < MODES; m++) {
		if (!o.mode[m])
			continue;
		if (w->us[m] < 0) {
			printf(" %9s %7s %7s %8s", "failed", "-", "-", "-");
			continue;
		}
		double alg = w->bytes / w->us[m] / 1e3;
		printf(" %9.1f %7.3f %7.3f %8.0f", w->us[m], alg, alg * busbw_factor(coll), w->wrong[m]);
	}
	if (coll == C_AR && w->planned)
		printf(" %9.1f %9.1f %9.1f", w->plan_us[M_RING], w->plan_us[M_AGGS], w->plan_us[M_AUTO]);
	printf("\n");
	if (!o.json)
		return;
	for (int m = 0; m < MODES; m++) {
		if (!o.mode[m])
			continue;
		printf("{\"bench\":\"sumcast-perf\",\"coll\":\"%s\",\"mode\":\"%s\",\"nodes\":%d,\"heads\":%d,"
		       "\"bytes\":%zu,\"count\":%zu,\"type\":\"%s\",\"op\":\"%s\"", coll_names[coll], mode_names[m],
		       R.nodes, o.heads, w->bytes, w->count, type_name(o.t), op_names[o.op]);
		if (w->us[m] >= 0)
			printf(",\"time_us\":%.2f,\"algbw_gbps\":%.5f,\"busbw_gbps\":%.5f,\"wrong\":%.0f", w->us[m],
			       w->bytes / w->us[m] / 1e3, w->bytes / w->us[m] / 1e3 * busbw_factor(coll), w->wrong[m]);
		else
			printf(",\"failed\":true");
		if (coll == C_AR && w->planned)
			printf(",\"plan_us\":%.2f", w->plan_us[m]);
		printf("}\n");
	}
}

/* ---- the verdict ---- */

static struct row rows[COLLS][MAX_SIZES];
static int nrows[COLLS];

static const char *look_at(const char *bound)
{
	if (!strcmp(bound, "agg-link"))
		return "the aggregators' links (their speed: --agg-link-gbps; `sumcastctl top` on each)";
	if (!strcmp(bound, "agg-cpu"))
		return "the aggregators' CPUs (`sumcastctl top`: a data thread near 100 % busy; [data] threads)";
	if (!strcmp(bound, "host-cpu"))
		return "this host's cores, which every process shares (the model's loopback figures are a fit "
		       "of this project's host; a cluster is judged by its links)";
	if (!strcmp(bound, "node-link"))
		return "the nodes' links to the aggregators (routes, MTU, the provider: docs/first-run.md)";
	return "latency: each hop's time (the provider, polling, interrupts)";
}

static int verdict(double share_agg, double share_total, int expect_aggs)
{
	double bad = 0;
	const char *where = NULL;
	char why[1024];
	int rc = 0;

	for (int c = 0; c < COLLS; c++)
		for (int i = 0; i < nrows[c]; i++)
			for (int m = 0; m < MODES; m++)
				if (rows[c][i].wrong[m] > 0 && rows[c][i].us[m] >= 0) {
					if (!where) {
						static char w[128];
						snprintf(w, sizeof(w), "%s %s at %zu B", mode_names[m], coll_names[c],
							 rows[c][i].bytes);
						where = w;
					}
					bad += rows[c][i].wrong[m];
				}
	if (bad > 0) {
		printf("verdict: FAIL: %.0f wrong elements (first: %s); this is a bug: send this output and the "
		       "plugin's log (--verbose) as docs/first-run.md says\n", bad, where);
		return 1;
	}
	for (int m = 0; m < MODES; m++)
		if (o.mode[m] && R.failed[m][0]) {
			printf("verdict: FAIL: the %s mode failed: %s; look at: the plugin's lines above "
			       "(docs/first-run.md, \"When it fails\")\n", mode_titles[m], R.failed[m]);
			return 1;
		}
	if (o.mode[M_AGGS] && (!H[M_AGGS].agg_path || H[M_AGGS].naggs < expect_aggs)) {
		printf("verdict: LOOK: the aggregators were not used (%d of %d joined): %s; look at: "
		       "SUMCAST_AGGREGATORS, the daemons (`sumcastctl status`), their provider and key\n",
		       H[M_AGGS].agg_path ? H[M_AGGS].naggs : 0, expect_aggs,
		       H[M_AGGS].first_warn[0] ? H[M_AGGS].first_warn : "no aggregator was announced at connect");
		return 1;
	}
	if (H[M_AGGS].faults || H[M_AUTO].faults) {
		printf("verdict: LOOK: an aggregator failed during the run (results stayed right): %s; look at: "
		       "that daemon's log and `sumcastctl status`\n",
		       H[M_AGGS].faults ? H[M_AGGS].first_warn : H[M_AUTO].first_warn);
		return 1;
	}
	/* the largest allreduce of 1 MiB or more that ran in all three modes
	 * (below that the hops, not the links, set the times) */
	const struct row *big = NULL;
	for (int i = 0; o.coll[C_AR] && i < nrows[C_AR]; i++)
		if (rows[C_AR][i].bytes >= (1u << 20) && rows[C_AR][i].us[M_RING] > 0 &&
		    rows[C_AR][i].us[M_AUTO] > 0 && rows[C_AR][i].us[M_AGGS] > 0)
			big = &rows[C_AR][i];
	snprintf(why, sizeof(why), "results right, %d aggregators used", expect_aggs);
	if (share_total > 0)
		snprintf(why + strlen(why), sizeof(why) - strlen(why), ", which carried %.0f %% of auto's bytes",
			 100 * share_agg / share_total);
	if (!big) {
		printf("verdict: PASS: %s (no allreduce of 1 MiB or more in all three modes: the speed-up "
		       "is not judged)\n", why);
		return 0;
	}
	double speed = big->us[M_RING] / big->us[M_AUTO];
	snprintf(why + strlen(why), sizeof(why) - strlen(why), "; auto %.2fx the ring at %zu B", speed, big->bytes);
	if (!big->planned) {
		printf("verdict: PASS: %s (no model: %s)\n", why, plan_why[0] ? plan_why : "see above");
		return 0;
	}
	double model = big->plan_us[M_RING] / big->plan_us[M_AUTO];
	bool within = fabs(speed / model - 1) <= 0.25;
	snprintf(why + strlen(why), sizeof(why) - strlen(why), " (model %.2fx: %s 25 %%)", model,
		 within ? "within" : "not within");
	if (within) {
		printf("verdict: PASS: %s\n", why);
		return 0;
	}
	/* what is off: the path furthest from its prediction */
	double r_ring = big->us[M_RING] / big->plan_us[M_RING], r_agg = big->us[M_AGGS] / big->plan_us[M_AGGS];
	struct plan_in in = plan_base;
	struct plan_out out;
	char err[200];
	in.bytes = big->bytes;
	const char *bound = plan_run(&in, &out, err, sizeof(err)) ? "latency" : out.bound;
	if (r_ring > 1.25 && r_ring >= r_agg)
		printf("verdict: LOOK: %s; the ring took %.1fx the model's time: look at: the links between "
		       "the nodes (their speed: --link-gbps; the provider)\n", why, r_ring);
	else if (r_agg > 1.25)
		printf("verdict: LOOK: %s; the aggregators alone took %.1fx the model's time (bound: %s): "
		       "look at: %s\n", why, r_agg, bound, look_at(bound));
	else
		printf("verdict: LOOK: %s; each path is near the model (ring %.2fx, aggregators %.2fx its time) "
		       "but auto is not: look at: the adaptive split (SUMCAST_SPLIT, the plugin's split lines "
		       "with --verbose)\n", why, r_ring, r_agg);
	rc = 1;
	return rc;
}

/* ---- main ---- */

/* The aggregators named (0: none), and whether every one of them is a
 * loopback address; -1: the list does not parse. */
/* SUMCAST_AGGREGATORS as the plugin resolves it (common/agglist.h: names,
 * srv:, @file too): how many, and whether all are on this host. -1 with
 * the reason in why when it does not resolve. */
static int count_aggs(bool *loopback, char *why, size_t whylen)
{
	struct agg_addr a[AGGS_MAX];
	size_t n = 0;
	const char *spec = getenv("SUMCAST_AGGREGATORS");

	*loopback = false;
	if (!spec || !*spec)
		return 0;
	if (agglist_resolve(spec, AGGLIST_PORT_DEFAULT, a, AGGS_MAX, &n, why, whylen))
		return -1;
	*loopback = agglist_all_loopback(a, n);
	return (int)n;
}

/* Every process on this host (the hostnames gathered). */
static bool one_host(void)
{
	char me[64] = "", *all = malloc(sizeof(me) * (size_t)B.size);
	bool same = all != NULL;

	gethostname(me, sizeof(me) - 1);
	if (!all || boot_allgather(&B, me, sizeof(me), all)) {
		free(all);
		return false;
	}
	for (int r = 0; r < B.size && same; r++)
		same = !strncmp(me, all + (size_t)r * sizeof(me), sizeof(me));
	free(all);
	return same;
}

int main(int argc, char **argv)
{
	char err[HOST_LINE * 2], lib[PATH_MAX], dir[] = "/tmp/sumcast-perf.XXXXXX";
	int rc = 0;

	options(argc, argv); /* usage and --help without a launcher */
	if (boot_init(&B, &argc, &argv, err, sizeof(err))) {
		fprintf(stderr, "sumcast-perf: %s\n", err);
		return 1;
	}
	if (B.size % o.heads) {
		fprintf(stderr, "sumcast-perf: %d processes are not %d heads per node\n", B.size, o.heads);
		return 2;
	}
	R.nodes = B.size / o.heads;
	R.node = B.rank / o.heads;
	R.head = B.rank % o.heads;
	bool aggs_local = false;
	char why[320];
	int naggs = count_aggs(&aggs_local, why, sizeof(why));
	if (naggs < 0) {
		fprintf(stderr, "sumcast-perf: SUMCAST_AGGREGATORS: %s\n", why);
		return 2;
	}
	if (!naggs && B.rank == 0)
		fprintf(stderr, "sumcast-perf: SUMCAST_AGGREGATORS is not set: only the ring can run; the "
				"aggregators' and auto's columns show the ring\n");
	/* dir: the plugin's copies while host_open loads them (it removes
	 * each); removed itself on every way out once it exists */
	if (host_find(o.plugin, lib, sizeof(lib), err, sizeof(err)) || !mkdtemp(dir)) {
		fprintf(stderr, "sumcast-perf: %s\n", err[0] ? err : strerror(errno));
		return 1;
	}
	/* NCCL's staging: one region, registered once per mode */
	R.region = 2 * (o.maxb + 4096);
	uint8_t *region = aligned_alloc(4096, (R.region + 4095) & ~(size_t)4095);
	if (!region) {
		fprintf(stderr, "sumcast-perf: no memory for 2 x %zu bytes\n", o.maxb);
		rmdir(dir);
		return 1;
	}
	memset(region, 0, R.region);
	R.send = region;
	R.recv = region + o.maxb + 4096;
	R.data = (struct perf_data){ .t = o.t, .op = o.op, .nodes = R.nodes, .node = R.node,
				     .send = R.send, .recv = R.recv };
	perf_data_init(&R.data);
	for (int m = 0; m < MODES; m++) {
		if (!o.mode[m])
			continue;
		if (host_open(&H[m], lib, dir, mode_names[m], m != M_RING, m == M_AGGS ? "1" : NULL, o.verbose, err,
			      sizeof(err)) ||
		    host_connect(&H[m], &B, o.heads, region, R.region, err, sizeof(err))) {
			fprintf(stderr, "sumcast-perf: rank %d: %s\n", B.rank, err);
			rmdir(dir);
			return 1;
		}
	}
	rmdir(dir);

	/* the model: this shape, the links given or reported */
	const struct host *any = o.mode[M_AUTO] ? &H[M_AUTO] : o.mode[M_AGGS] ? &H[M_AGGS] : &H[M_RING];
	double link = o.link_gbps > 0 ? o.link_gbps : any->speed_mbps / 1000.0;
	bool guessed = o.link_gbps <= 0 && !getenv("SUMCAST_LINK_GBPS") &&
		       (strstr(any->dev, "tcp") || strstr(any->dev, "shm"));
	plan_base.nodes = (uint32_t)R.nodes;
	plan_base.heads = (uint32_t)o.heads;
	plan_base.aggs = (uint32_t)(naggs ? naggs : 1);
	plan_base.link_gbps = link;
	plan_base.agg_link_gbps = o.agg_link_gbps > 0 ? o.agg_link_gbps : link;
	plan_base.tcp = strstr(any->dev, "tcp") != NULL;
	/* the plugin's settings the model takes, as the plugin reads them */
	uint64_t v;
	const char *e = getenv("SUMCAST_CHUNK_BYTES");
	if (e && !cfg_parse_size(e, &v) && v)
		plan_base.chunk = v;
	e = getenv("SUMCAST_WINDOW");
	if (e && atoi(e) > 0)
		plan_base.window = (uint32_t)atoi(e);
	/* every process and aggregator on this host: its cores are the limit
	 * (the model's loopback mode, fitted on tcp here) */
	bool local = one_host() && aggs_local;
	if (local && plan_base.tcp) {
		long k = sysconf(_SC_NPROCESSORS_ONLN);
		plan_base.loopback = true;
		plan_base.cores = k > 0 ? (uint32_t)k : 1;
	}
	plan_in_defaults(&plan_base);
	plan_ok = naggs > 0 && R.nodes >= 2;
	if (!plan_ok)
		snprintf(plan_why, sizeof(plan_why), "%s", naggs ? "one node" : "no aggregators");

	if (B.rank == 0) {
		printf("# sumcast-perf %s: %d nodes x %d head%s, %d aggregator%s (%s)\n", SUMCAST_VERSION, R.nodes,
		       o.heads, o.heads == 1 ? "" : "s", naggs, naggs == 1 ? "" : "s",
		       naggs ? getenv("SUMCAST_AGGREGATORS") : "none");
		printf("# plugin %s (ncclNetPlugin_v11, ncclCollNetPlugin_v11), device %s; ranks: %s\n", lib, any->dev,
		       B.how);
		if (plan_base.loopback)
			printf("# model: every process and aggregator on this host of %u cores (the cores are "
			       "the limit, not the links)\n", plan_base.cores);
		printf("# links: nodes %.3g Gb/s%s, aggregators %.3g Gb/s%s; -n %d -w %d -c %d\n", link,
		       o.link_gbps > 0 ? " (--link-gbps)" : guessed ? " (the provider reports none: the plugin's "
								  "default; give --link-gbps)"
								: " (the provider's)",
		       plan_base.agg_link_gbps, o.agg_link_gbps > 0 ? " (--agg-link-gbps)" : " (as the nodes')",
		       o.iters, o.warmup, o.check);
		if (H[M_AUTO].connect_line[0])
			printf("# auto: %s\n", H[M_AUTO].connect_line);
		fflush(stdout);
	}
	for (int c = 0; c < COLLS; c++) {
		if (!o.coll[c])
			continue;
		if (B.rank == 0)
			print_head(c);
		size_t es = c == C_AG ? 1 : perf_type_size(o.t), unit = c == C_AR ? es : es * (size_t)R.nodes;
		for (double s = (double)o.minb; s <= (double)o.maxb * 1.0000001 && nrows[c] < MAX_SIZES; s *= o.factor) {
			size_t bytes = (size_t)s / unit * unit;
			if (!bytes || (nrows[c] && rows[c][nrows[c] - 1].bytes == bytes))
				continue;
			struct row *w = &rows[c][nrows[c]++];
			memset(w, 0, sizeof(*w));
			w->bytes = bytes;
			w->count = bytes / es;
			sample(c, w);
			if (c == C_AR)
				plan_row(w);
			if (B.rank == 0) {
				print_row(c, w);
				fflush(stdout);
			}
		}
	}
	for (int m = 0; m < MODES; m++)
		if (o.mode[m])
			host_close(&H[m]);
	double share[2] = { H[M_AUTO].agg_gb, H[M_AUTO].agg_gb + H[M_AUTO].ring_gb };
	if (B.rank == 0) {
		printf("#\n");
		for (int m = 0; m < MODES; m++)
			if (o.mode[m] && R.failed[m][0])
				printf("# %s failed: %s\n", mode_titles[m], R.failed[m]);
		if (o.mode[M_AUTO] && share[1] > 0)
			printf("# auto: the aggregators carried %.3f of %.3f GB (rank 0's allreduce and windows)\n",
			       share[0], share[1]);
		rc = verdict(share[0], share[1], naggs);
		fflush(stdout);
	}
	double r = rc;
	boot_max(&B, &r, 1);
	boot_fini(&B);
	free(region);
	return r > 0 ? 1 : 0;
}
