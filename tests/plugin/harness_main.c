/* One run of the harness: options, the environment the plugin reads
 * (SUMCAST_*), key files, the aggregators, then the mode's ranks. */
#include "harness.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <dirent.h>
#include <sched.h>
#include <sys/stat.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "ranks.h"

struct opts opt = { .nranks = 2, .version = 11, .min_bytes = 8, .max_bytes = 256 << 20, .type = "f32",
		    .timeout_s = 240, .heads = 1, .iters = 4 };
const char *harness_plugin_default = "", *harness_daemon_default = "";

void usage(void)
{
	fprintf(stderr,
		"usage: %s p2p|coll|rsag|bench|fault|scale [--nranks N] [--naggs M] [--aggs host:port,...]\n"
		"       [--split auto|F] [--version 12|11|8] [--plugin PATH] [--daemon PATH]\n"
		"       (coll and rsag: --version 12|11|10|9|8)\n"
		"       [-b|--min-bytes B] [-e|--max-bytes B] [--type T] [--json] [--verbose]\n"
		"       [--key same|other] [--expect agg|joined|ring] [--trace [--expect-adaptive]]\n"
		"       [--keep-trace DIR]   (--trace, and the trace files copied into DIR at the end)\n"
		"       [--fan-in F]   (SUMCAST_FAN_IN: above F nodes the collnet is a two-level tree;\n"
		"       --expect agg then checks the tree's inner jobs on the daemons)\n"
		"       p2p: [--close-inflight]\n"
		"       p2p, coll: [--profile-events [--profiler LIB]]   (--version 12|11|10)\n"
		"       coll: [--stall R]   (rank R goes quiet 2.5 x SUMCAST_AGG_TIMEOUT in one allreduce:\n"
		"              the others' stall reports must name the ring peer and tag they wait for)\n"
		"       coll: [--groups G]   (then allreduces through NCCL's proxy of G x 8 channels:\n"
		"              groups in order, 8 requests each, no test in a pass that got NULL)\n"
		"       fault: --fault kill|idle|stop|blip|term|restart|flap|rolling|all|connect|node|cmd|drain[,KIND]\n"
		"              [--fault-agg I] [--ops K] [--fault-at K] [--expect-copies] [--readmit]\n"
		"              [--flaps K] [--cut-node R]   (cmd: the node it cuts off; a tree needs it)\n"
		"              [--agg-http host:port,...]   (with --aggs: their HTTP, for --readmit's\n"
		"              check that the daemon serves the job again)\n"
		"              [--small-rs] [--expect-kept] [--multicast PERMILLE]\n"
		"       faults (bench/faults): [--kinds kill,stop,term,restart,readmit,resume,upgrade]\n"
		"              [-e BYTES] [--before S]\n"
		"              [--after S] [--retention-bytes B] [--type T] [--json]\n"
		"       scale: [--heads H] [--iters K] [--max-connect S] [--max-idle-cpu S] [--json]\n"
		"              [--sweep COUNT[,WCOUNT]]   (every type and op: allreduce of COUNT,\n"
		"              ReduceScatter and AllGather of WCOUNT per rank)\n"
		"       bench: [-f|--factor F] [--rounds R] [--time-per-size S]\n"
		"              [--coll allreduce|reducescatter|allgather] [--no-rtt] [--timeline]\n"
		"              [--variant NAME=SPLIT[@PLUGIN][%%VAR=VALUE...]]... [--splits S,S,...]\n",
		program_invocation_short_name);
	exit(2);
}

size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return (size_t)v;
}

static void self_relative(char *out, size_t len, const char *rel)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		out[0] = 0;
		return;
	}
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	snprintf(out, len, "%s/%s", exe, rel);
}

/* --keep-trace DIR: the run's trace files (<rv_dir>/trace.<job>.<rank>.jsonl),
 * copied into DIR (made if missing) before the run's directory goes, for
 * sumcastctl profile (tests/ops/test_profile.py). 0 or -1 with errno. */
static const char *keep_trace;

static int copy_traces(const char *dir)
{
	DIR *d;
	struct dirent *e;
	char from[PATH_MAX + 300], to[PATH_MAX + 300], buf[65536];
	int rc = 0;

	if (mkdir(dir, 0755) && errno != EEXIST)
		return -1;
	d = opendir(rv_dir);
	if (!d)
		return -1;
	while (!rc && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (strncmp(e->d_name, "trace.", 6) || n < 6 || strcmp(e->d_name + n - 6, ".jsonl"))
			continue;
		snprintf(from, sizeof(from), "%s/%s", rv_dir, e->d_name);
		snprintf(to, sizeof(to), "%s/%s", dir, e->d_name);
		FILE *in = fopen(from, "r"), *out = in ? fopen(to, "w") : NULL;
		size_t k;
		while (out && (k = fread(buf, 1, sizeof(buf), in)) > 0)
			if (fwrite(buf, 1, k, out) != k)
				break;
		rc = !in || !out || ferror(in) || ferror(out) ? -1 : 0;
		if (out && fclose(out))
			rc = -1;
		if (in)
			fclose(in);
	}
	closedir(d);
	return rc;
}

int harness_main(int argc, char **argv, const char *forced_mode)
{
	static const struct option lo[] = {
		{ "nranks", 1, 0, 'n' }, { "naggs", 1, 0, 'm' }, { "split", 1, 0, 's' },
		{ "version", 1, 0, 'v' }, { "plugin", 1, 0, 'p' }, { "daemon", 1, 0, 'd' },
		{ "min-bytes", 1, 0, 'b' }, { "max-bytes", 1, 0, 'e' }, { "type", 1, 0, 't' },
		{ "json", 0, 0, 'j' }, { "verbose", 0, 0, 'V' }, { "aggs", 1, 0, 'a' },
		{ "timeout", 1, 0, 'T' }, { "key", 1, 0, 'k' },
		{ "expect", 1, 0, 'x' }, { "rounds", 1, 0, 'R' }, { "time-per-size", 1, 0, 'S' },
		{ "factor", 1, 0, 'f' }, { "variant", 1, 0, 'W' }, { "splits", 1, 0, 'L' },
		{ "deterministic", 0, 0, 'D' }, { "trace", 0, 0, 'r' }, { "close-inflight", 0, 0, 'I' },
		{ "fault", 1, 0, 'F' }, { "fault-agg", 1, 0, 'G' }, { "ops", 1, 0, 'O' },
		{ "fault-at", 1, 0, 'A' }, { "expect-copies", 0, 0, 'C' }, { "kinds", 1, 0, 'K' },
		{ "before", 1, 0, 'B' }, { "after", 1, 0, 'Z' }, { "retention-bytes", 1, 0, 'Y' },
		{ "coll", 1, 0, 'X' }, { "no-rtt", 0, 0, 'Q' },
		{ "readmit", 0, 0, 0x10c }, { "flaps", 1, 0, 0x10d },
		{ "small-rs", 0, 0, 0x101 }, { "expect-kept", 0, 0, 0x102 }, { "multicast", 1, 0, 0x103 },
		{ "timeline", 0, 0, 0x104 }, { "expect-adaptive", 0, 0, 0x105 },
		{ "heads", 1, 0, 0x106 }, { "iters", 1, 0, 0x107 }, { "max-connect", 1, 0, 0x108 },
		{ "max-idle-cpu", 1, 0, 0x109 },
		{ "fan-in", 1, 0, 0x10a }, { "cut-node", 1, 0, 0x10b }, { "agg-http", 1, 0, 0x10e },
		{ "keep-trace", 1, 0, 0x10f }, { "sweep", 1, 0, 0x112 }, { "groups", 1, 0, 0x113 }, { "stall", 1, 0, 0x114 },
		{ "profile-events", 0, 0, 0x110 }, { "profiler", 1, 0, 0x111 },
		{ 0, 0, 0, 0 }
	};
	static char plugin_buf[PATH_MAX + 64], daemon_buf[PATH_MAX + 64], aggs[1024];
	bool timeout_given = false, max_given = false;
	int c;

	opt.mode = forced_mode;
	if (!forced_mode) {
		if (argc < 2)
			usage();
		opt.mode = argv[1];
		argv++;
		argc--;
	}
	opt.plugin = harness_plugin_default;
	opt.mc = -1;
	opt.stall_rank = -1;
	fopt.cut_node = -1;
	opt.daemon = harness_daemon_default;
	while ((c = getopt_long(argc, argv, "n:m:s:v:p:d:b:e:t:jVa:T:k:x:R:S:f:W:L:DrIF:G:O:A:CK:B:Z:Y:X:Q", lo, NULL)) != -1) {
		switch (c) {
		case 'n': opt.nranks = atoi(optarg); break;
		case 'm': opt.naggs = atoi(optarg); break;
		case 's': opt.split = optarg; break;
		case 'v': opt.version = atoi(optarg); break;
		case 'p': opt.plugin = optarg; break;
		case 'd': opt.daemon = optarg; break;
		case 'b': opt.min_bytes = parse_size(optarg); break;
		case 'e': opt.max_bytes = parse_size(optarg); max_given = true; break;
		case 't': opt.type = optarg; break;
		case 'j': opt.json = true; break;
		case 'V': opt.verbose = true; break;
		case 'a': opt.aggs = optarg; break;
		case 0x10e: opt.agg_http = optarg; break;
		case 'T': opt.timeout_s = atoi(optarg); timeout_given = true; break;
		case 'R': case 'S': case 'f': case 'W': case 'L': case 'X': case 'Q': case 0x104:
			if (bench_option(c, optarg))
				usage();
			break;
		case 'x':
			opt.expect = optarg;
			if (strcmp(optarg, "agg") && strcmp(optarg, "joined") && strcmp(optarg, "ring"))
				usage();
			opt.trace = true; /* the bytes each path carried */
			break;
		case 'D': opt.deterministic = true; break;
		case 0x105: opt.expect_adaptive = true; break;
		case 0x10a: opt.fan_in = atoi(optarg); break;
		case 0x10b: fopt.cut_node = atoi(optarg); break;
		case 'r': opt.trace = true; break;
		case 0x10f: keep_trace = optarg; opt.trace = true; break;
		case 'I': opt.close_inflight = true; break;
		case 0x110: opt.profile_events = true; break;
		case 0x111: opt.profiler = optarg; opt.profile_events = true; break;
		case 'k':
			opt.key = !strcmp(optarg, "same") ? 1 : !strcmp(optarg, "other") ? 2 : -1;
			if (opt.key < 0)
				usage();
			break;
		case 'F':
			if (fault_option(optarg))
				usage();
			break;
		case 'G': fopt.agg = atoi(optarg); break;
		case 'O': fopt.ops = strtoull(optarg, NULL, 10); break;
		case 'A': fopt.at = strtoull(optarg, NULL, 10); break;
		case 'C': fopt.copies = true; break;
		case 0x101: fopt.small_rs = true; break;
		case 0x102: fopt.kept = true; break;
		case 0x10c: fopt.readmit = true; break;
		case 0x10d: fopt.flaps = atoi(optarg); break;
		case 0x103: opt.mc = atoi(optarg); break;
		case 0x106: opt.heads = atoi(optarg); break;
		case 0x107: opt.iters = atoi(optarg); break;
		case 0x113:
			opt.groups = atoi(optarg);
			if (opt.groups < 1 || opt.groups > 8)
				usage();
			break;
		case 0x114:
			opt.stall_rank = atoi(optarg);
			if (opt.stall_rank < 0)
				usage();
			break;
		case 0x112: {
			char *end;
			opt.sweep = strtoull(optarg, &end, 10);
			opt.sweep_w = *end == ',' ? strtoull(end + 1, &end, 10) : opt.sweep;
			if (*end || !opt.sweep || !opt.sweep_w)
				usage();
			break;
		}
		case 0x108: opt.max_connect_s = atof(optarg); break;
		case 0x109: opt.max_idle_cpu = atof(optarg); break;
		case 'K': case 'B': case 'Z': case 'Y':
			if (faultbench_option(c, optarg))
				usage();
			break;
		default: usage();
		}
	}
	if (opt.nranks < 1 || opt.nranks > MAX_RANKS || opt.naggs < 0 || opt.naggs > MAX_AGGS ||
	    (opt.version < 8 || opt.version > 12) || opt.min_bytes < 1 || opt.min_bytes > opt.max_bytes ||
	    !bench_options_ok() || opt.heads < 1 || opt.nranks * opt.heads > SC_RANKS_MAX ||
	    opt.iters < 1 || opt.iters > 10000)
		usage();
	/* several communicators per node: the scale mode only */
	if (opt.heads > 1 && strcmp(opt.mode, "scale"))
		usage();
	if (opt.groups && strcmp(opt.mode, "coll"))
		usage();
	/* scale: the daemons' counters of each job, no trace (H files per rank) */
	if (!strcmp(opt.mode, "scale"))
		opt.trace = false;
	/* v9 / v10 tables: the collnet tests only (the others call v12, v11 or v8),
	 * and p2p's v10 with the profiler callback. */
	if ((opt.version == 9 || opt.version == 10) && strcmp(opt.mode, "coll") && strcmp(opt.mode, "rsag") &&
	    !(opt.version == 10 && opt.profile_events && !strcmp(opt.mode, "p2p")))
		usage();
	/* NCCL's profiler callback: ncclNet v10 and later; the p2p and collnet tests */
	if (opt.profile_events &&
	    (opt.version < 10 || (strcmp(opt.mode, "p2p") && strcmp(opt.mode, "coll"))))
		usage();
	if (!*opt.plugin) {
		self_relative(plugin_buf, sizeof(plugin_buf), "../plugin/libnccl-net-sumcast.so");
		opt.plugin = plugin_buf;
	}
	if (!*opt.daemon) {
		self_relative(daemon_buf, sizeof(daemon_buf), "../daemon/sumcastd");
		opt.daemon = daemon_buf;
	}
	if (access(opt.plugin, R_OK)) {
		fprintf(stderr, "SKIP: plugin %s: %s\n", opt.plugin, strerror(errno));
		return SKIP;
	}
	snprintf(rv_dir, sizeof(rv_dir), "/tmp/sumcast-harness-XXXXXX");
	REQUIRE(mkdtemp(rv_dir), "mkdtemp");
	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	setenv("SUMCAST_PROVIDER", "tcp", 0);
	setenv("SUMCAST_IFACE", "127.0.0.1", 0);
	/* scale: up to 256 processes and the daemons on this host's few
	 * cores; the plugin's own connect limit, not the tests' 10 s (every
	 * other setting, the PING deadline included, its default) */
	if (!strcmp(opt.mode, "scale"))
		setenv("SUMCAST_CONNECT_TIMEOUT", "15s", 0);
	setenv("SUMCAST_CONNECT_TIMEOUT", "10s", 0);
	if (!strcmp(opt.mode, "fault")) {
		/* The trace holds what the fault test checks; drained daemons
		 * abort soon; a dead node is an error within 15 s. */
		if (!fopt.k1 || (opt.naggs < 1 && !opt.aggs) || !fault_options_ok() ||
		    (opt.agg_http && !opt.aggs))
			usage();
		const char *why = fault_skip_why();
		if (why) {
			fprintf(stderr, "SKIP: %s\n", why);
			rm_dir();
			return SKIP;
		}
		opt.trace = true;
		if (!fopt.ops && getenv("HARNESS_FAULT_OPS")) /* the ASan stage of test.sh: fewer */
			fopt.ops = strtoull(getenv("HARNESS_FAULT_OPS"), NULL, 10);
		if (!fopt.ops)
			fopt.ops = 300;
		/* a drain ends once the nodes have moved off (milliseconds); the
		 * timeout only bounds one that does not, on a loaded host */
		setenv("HARNESS_DAEMON_CONF", "[control]\\ndrain-timeout = 10s", 0);
		setenv("SUMCAST_AGG_TIMEOUT", "15s", 0);
		if (!timeout_given)
			opt.timeout_s = 540; /* under ctest's 600 s: the harness says why */
	}
	if (opt.split)
		setenv("SUMCAST_SPLIT", opt.split, 1);
	if (opt.fan_in) {
		char v[16];
		if (opt.fan_in < 2)
			usage();
		snprintf(v, sizeof(v), "%d", opt.fan_in);
		setenv("SUMCAST_FAN_IN", v, 1);
	}
	if (opt.trace) {
		char tp[PATH_MAX + 16];
		snprintf(tp, sizeof(tp), "%s/trace", rv_dir);
		setenv("SUMCAST_TRACE", tp, 1);
	}
	if (opt.deterministic) {
		/* The rank-order check holds for the aggregators' part only. */
		REQUIRE(opt.split && !strcmp(opt.split, "1") && opt.naggs > 0,
		      "--deterministic wants --split 1 and --naggs M");
		setenv("SUMCAST_DETERMINISTIC", "1", 1);
	}
	if (!strcmp(opt.mode, "faults")) {
		if (opt.naggs < 1)
			usage();
		if (max_given)
			faultbench_bytes(opt.max_bytes);
		setenv("HARNESS_DAEMON_CONF", "[control]\\ndrain-timeout = 10s", 0);
		if (!timeout_given)
			opt.timeout_s = 900;
	}
	if (!strcmp(opt.mode, "bench") && !timeout_given)
		opt.timeout_s = 3600; /* every size is bounded by --time-per-size */
	if (opt.verbose)
		setenv("SUMCAST_LOG_LEVEL", "info", 0);

	if (opt.key) {
		/* Daemons read daemon.key, ranks rank.key: the same bytes, or
		 * (--key other) a different key, which every daemon must refuse
		 * and every node must answer by falling back to the ring. The
		 * rank's copy ends in a newline, as `echo` writes it. */
		char path[PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/daemon.key", rv_dir);
		FILE *kf = fopen(path, "w");
		REQUIRE(kf && fputs("harness-shared-key-0123456789", kf) >= 0, "%s", path);
		fclose(kf);
		snprintf(path, sizeof(path), "%s/rank.key", rv_dir);
		kf = fopen(path, "w");
		REQUIRE(kf && fputs(opt.key == 1 ? "harness-shared-key-0123456789\n" : "another-key-9876543210\n",
				  kf) >= 0, "%s", path);
		fclose(kf);
		setenv("SUMCAST_KEY_FILE", path, 1);
	}
	if (opt.mc >= 0) {
		/* Results by IP multicast: a network namespace of our own whose
		 * loopback carries it; every node drops opt.mc per mille. */
		if (unshare(CLONE_NEWNET) || system("ip link set lo up && ip link set lo multicast on && "
						    "ip route add 239.0.0.0/8 dev lo") ||
		    (harness_mc_ib() && system("ip link add scib0 type veth peer name scib1 && ip link set scib1 up && ip addr add " HARNESS_MC_IB_ADDR
					      "/24 dev scib0 && ip link set scib0 up multicast on"))) {
			fprintf(stderr, "SKIP: --multicast needs a network namespace of its own (root)\n");
			rm_dir();
			return SKIP;
		}
		char v[16];
		snprintf(v, sizeof(v), "%d", opt.mc);
		setenv("SUMCAST_TEST_MC_DROP", v, 1);
	}
	int rc = 0;
	if (opt.aggs) {
		/* Given addresses: no daemons started, but the tables, the JSON
		 * rows and the auto-split column count them. */
		opt.naggs = 1;
		for (const char *p = opt.aggs; *p; p++)
			opt.naggs += *p == ',';
		setenv("SUMCAST_AGGREGATORS", opt.aggs, 1);
	} else if (opt.naggs > 0) {
		rc = daemons_start(aggs, sizeof(aggs));
		if (rc)
			goto out;
		setenv("SUMCAST_AGGREGATORS", aggs, 1);
	} else {
		unsetenv("SUMCAST_AGGREGATORS");
	}
	if (!strcmp(opt.mode, "p2p")) {
		rc = run_ranks(run_p2p);
	} else if (!strcmp(opt.mode, "coll")) {
		rc = run_ranks(run_coll);
	} else if (!strcmp(opt.mode, "rsag")) {
		rc = run_ranks(run_rsag);
	} else if (!strcmp(opt.mode, "fault")) {
		rc = run_ranks(run_fault);
	} else if (!strcmp(opt.mode, "scale")) {
		rc = run_ranks(run_scale);
		if (!rc)
			rc = scale_report();
	} else if (!strcmp(opt.mode, "faults")) {
		rc = run_ranks(run_faultbench);
	} else if (!strcmp(opt.mode, "bench")) {
		rc = bench_prepare();
		if (!rc)
			rc = run_ranks(run_bench);
	} else {
		usage();
	}
	if (!rc && opt.mc >= 0 && opt.naggs > 0 && !opt.aggs && !fault_replaces_daemons()) {
		/* the results went to groups, and the drops were NACKed (a
		 * rolling upgrade's rank 0 checks its successors itself) */
		uint64_t res, nacks;
		if (daemons_mc(&res, &nacks)) {
			fprintf(stderr, "FAIL: no daemon's /metrics answered\n");
			rc = 1;
		} else {
			printf("multicast: the aggregators alive at the end sent %" PRIu64 " results to groups, "
			       "took %" PRIu64 " NACKs\n", res, nacks);
			if (!res || (opt.mc > 0 && !nacks)) {
				fprintf(stderr, "FAIL: multicast %s\n", !res ? "carried no result" : "saw no NACK");
				rc = 1;
			}
			/* HARNESS_MC_VIA=ib: every daemon sent by the InfiniBand transport */
			int ib = harness_mc_ib() && !opt.verbose ? daemons_log_count("InfiniBand/RoCE UD") : -1;
			if (ib >= 0 && ib != opt.naggs) {
				fprintf(stderr, "FAIL: %d of %d daemons multicast by InfiniBand/RoCE UD (is the verbs "
					"double preloaded?)\n", ib, opt.naggs);
				rc = 1;
			} else if (ib >= 0) {
				printf("multicast: every daemon sent by InfiniBand/RoCE UD (the verbs double)\n");
			}
		}
	}
out:
	daemons_stop();
	if (keep_trace && opt.trace && copy_traces(keep_trace)) {
		fprintf(stderr, "FAIL: --keep-trace %s: %s\n", keep_trace, strerror(errno));
		rc = rc ? rc : 1;
	}
	rm_dir();
	return rc;
}
