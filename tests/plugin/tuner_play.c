/* NCCL's tuner calls, played as NCCL makes them (src/plugin/tuner.cc and
 * src/enqueue.cc's getAlgoInfo / topoGetAlgoInfo, tags v2.22.3-1 to
 * v2.30.7-1): dlopen the plugin library, dlsym each ncclTunerPlugin_v*
 * this library exports (v3..v6), init with
 * nRanks / nNodes / a log function (v5, v6: &ctx, commId, NVLink domains,
 * NCCL's constants), then for each size a cost table as NCCL fills it
 * (every entry -1, then a time for each usable algorithm and protocol:
 * CollNet Simple only, NCCL's own SHARP-minded figures that make CollNet
 * the cheapest at every size), getCollInfo, and NCCL's choice (the
 * smallest entry >= 0); then destroy / finalize.
 *
 * The figures come from the settings (no communicator connects here):
 * SUMCAST_AGGREGATORS lists 4, links of 100 Gb/s, 4 nodes of 8 ranks.
 * Checked (exit 1 on the first failure):
 *  - 8 B AllReduce: not CollNet (NCCL's tree or ring);
 *  - 64 MiB AllReduce: CollNet;
 *  - on both sides of the crossover the library logs (CollNet Chain from
 *    X B, for one rank per node): X / 2 not CollNet, X CollNet;
 *  - ReduceScatter and AllGather at 8 B and 64 MiB: the ring (half an
 *    AllReduce beats CollNet at 4 nodes), only CollNet Direct's row moved;
 *  - NCCL 2.22's table of 6 algorithms and 2.24's of 7.
 * Then v1 and v2 as NCCL 2.19-2.21 call them (src/misc/tuner.cc,
 * enqueue.cc's getAlgoInfo / getTunerInfo at v2.19.3-1 and v2.21.5-1):
 * algorithm and protocol undefined, getCollInfo, NCCL's own choice where
 * the tuner left them so. Checked: it chooses CollNet Chain on Simple at
 * 64 MiB and at the crossover, nothing at 8 B, half the crossover,
 * without CollNet support, for ReduceScatter, or with NCCL_ALGO set; never
 * one of the two alone, never nChannels; v1 (no context) chooses nothing
 * while a communicator of another shape is live beside the first, until
 * both are destroyed.
 * With --off (run with SUMCAST_TUNER=0) every table stays as NCCL filled
 * it, byte for byte, v1 and v2 choose nothing, and the library says
 * nothing of crossovers.
 * Usage: tuner_play [--off] [PLUGIN.so] */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugin/nccl_tuner.h"

#define NA_MAX 7
#define NP 3

static int failures;
static uint64_t crossover_chain; /* from the library's log line */
static int crossover_lines;

#define CHECK(cond, ...)                                                 \
	do {                                                             \
		if (!(cond)) {                                           \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                    \
			fputc('\n', stderr);                              \
			failures++;                                      \
		}                                                        \
	} while (0)

static void play_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		     const char *fmt, ...)
{
	char msg[1024];
	const char *p;
	va_list ap;

	(void)flags;
	(void)file;
	(void)line;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level <= NCCL_LOG_INFO)
		printf("NCCL %s\n", msg);
	if ((p = strstr(msg, "CollNet Chain from "))) {
		crossover_lines++;
		crossover_chain = strtoull(p + strlen("CollNet Chain from "), NULL, 10);
	}
}

/* As NCCL's updateCollCostTable leaves it for an inter-node AllReduce with
 * CollNet supported: tree and ring on all three protocols, CollNet Direct
 * and Chain on Simple only, NVLS and PAT not usable; for a ReduceScatter or
 * AllGather the ring and CollNet Direct only (ncclTopoTuneModel). The times
 * (us) are a latency and a bandwidth each, CollNet's the best of them all,
 * as NCCL's model for a SHARP switch says. */
static void nccl_fill(float *t, int na, size_t bytes, ncclFunc_t f)
{
	static const double lat[2][NP] = { { 10, 12, 25 }, { 8, 10, 30 } };     /* tree, ring */
	static const double bw[2][NP] = { { 3e3, 9e3, 10e3 }, { 4e3, 11e3, 12e3 } }; /* bytes/us */

	for (int i = 0; i < na * NP; i++)
		t[i] = (float)NCCL_ALGO_PROTO_IGNORE;
	for (int a = 0; a < 2; a++)
		for (int p = 0; p < NP; p++)
			t[a * NP + p] = (float)(lat[a][p] + bytes / bw[a][p]);
	t[NCCL_ALGO_COLLNET_DIRECT * NP + NCCL_PROTO_SIMPLE] = (float)(5 + bytes / 40e3);
	t[NCCL_ALGO_COLLNET_CHAIN * NP + NCCL_PROTO_SIMPLE] = (float)(6 + bytes / 40e3);
	if (f != ncclFuncAllReduce)
		for (int p = 0; p < NP; p++)
			t[NCCL_ALGO_TREE * NP + p] = t[NCCL_ALGO_COLLNET_CHAIN * NP + p] =
				(float)NCCL_ALGO_PROTO_IGNORE;
}

/* topoGetAlgoInfo: the smallest entry >= 0, first in table order on a tie. */
static int nccl_pick(const float *t, int na)
{
	float best = 3600000000.0f;
	int algo = -1;

	for (int a = 0; a < na; a++)
		for (int p = 0; p < NP; p++)
			if (t[a * NP + p] >= 0 && t[a * NP + p] < best) {
				best = t[a * NP + p];
				algo = a;
			}
	return algo;
}

static bool is_collnet(int a)
{
	return a == NCCL_ALGO_COLLNET_DIRECT || a == NCCL_ALGO_COLLNET_CHAIN;
}

struct tuner {
	int version;
	void *ctx;
	ncclResult_t (*coll)(void *ctx, ncclFunc_t f, size_t n, int pipe, float **t, int na, int np,
			     int reg, int *nch);
	ncclResult_t (*coll_v3)(void *ctx, ncclFunc_t f, size_t n, int pipe, float **t, int na, int np,
				int *nch);
	ncclResult_t (*fini)(void *ctx);
};

static ncclResult_t tuner_call(const struct tuner *tu, ncclFunc_t f, size_t n, float *t, int na)
{
	int nch = 0;

	if (tu->coll_v3)
		return tu->coll_v3(tu->ctx, f, n, 1, (float **)t, na, NP, &nch);
	return tu->coll(tu->ctx, f, n, 1, (float **)t, na, NP, 0, &nch);
}

/* One size: NCCL's table, the tuner, NCCL's choice. Returns the algorithm. */
static int play(const struct tuner *tu, ncclFunc_t f, size_t bytes, int na, bool off)
{
	float t[NA_MAX * NP], before[NA_MAX * NP];
	ncclResult_t r;
	int algo;

	nccl_fill(t, na, bytes, f);
	memcpy(before, t, sizeof(t));
	r = tuner_call(tu, f, bytes, t, na);
	CHECK(r == ncclSuccess, "v%d getCollInfo(%zu B) returned %d", tu->version, bytes, r);
	algo = nccl_pick(t, na);
	for (int a = 0; a < na; a++)
		for (int p = 0; p < NP; p++) {
			bool same = t[a * NP + p] == before[a * NP + p];
			/* only CollNet's rows move, only when on: AllReduce's
			 * both, the others' Direct */
			CHECK(same || (!off && (f == ncclFuncAllReduce ? is_collnet(a)
									 : a == NCCL_ALGO_COLLNET_DIRECT)),
			      "v%d %zu B: entry [%d][%d] %.1f -> %.1f", tu->version, bytes, a, p,
			      before[a * NP + p], t[a * NP + p]);
			/* NCCL's ignored entries stay ignored */
			CHECK(before[a * NP + p] >= 0 || same, "v%d %zu B: ignored [%d][%d] set to %.1f",
			      tu->version, bytes, a, p, t[a * NP + p]);
		}
	printf("v%d %s %10zu B (%d algorithms): %s (CollNet Chain %.1f, Direct %.1f; tree %.1f, ring %.1f)\n",
	       tu->version, f == ncclFuncAllReduce ? "AllReduce" : f == ncclFuncAllGather ? "AllGather"
			: "ReduceScatter", bytes, na,
	       algo == NCCL_ALGO_TREE ? "tree" : algo == NCCL_ALGO_RING ? "ring"
		       : algo == NCCL_ALGO_COLLNET_DIRECT ? "CollNet Direct"
		       : algo == NCCL_ALGO_COLLNET_CHAIN ? "CollNet Chain" : "other",
	       t[NCCL_ALGO_COLLNET_CHAIN * NP + NCCL_PROTO_SIMPLE],
	       t[NCCL_ALGO_COLLNET_DIRECT * NP + NCCL_PROTO_SIMPLE], t[NCCL_PROTO_SIMPLE],
	       t[NCCL_ALGO_RING * NP + NCCL_PROTO_SIMPLE]);
	return algo;
}

static int open_tuner(void *lib, int version, size_t nranks, size_t nnodes, struct tuner *tu)
{
	char name[32];
	void *sym;
	ncclResult_t r;

	snprintf(name, sizeof(name), "ncclTunerPlugin_v%d", version);
	sym = dlsym(lib, name);
	if (!sym)
		return -1;
	memset(tu, 0, sizeof(*tu));
	tu->version = version;
	if (version >= 5) {
		/* v6's first five members are v5's */
		const ncclTuner_v5_t *t = sym;
		ncclNvlDomainInfo_v5_t nvl = { 1, (int)(nranks / nnodes), (int)(nranks / nnodes) };
		ncclTunerConstants_v5_t constants, before;
		memset(&constants, 0x5a, sizeof(constants));
		before = constants;
		CHECK(t->name && !strcmp(t->name, "Sumcast"), "%s name %s", name, t->name ? t->name : "NULL");
		r = t->init(&tu->ctx, 0x1234abcdull, nranks, nnodes, play_log, &nvl, &constants);
		CHECK(!memcmp(&constants, &before, sizeof(constants)), "%s init changed NCCL's constants", name);
		tu->coll = t->getCollInfo;
		tu->fini = t->finalize;
		if (version == 6)
			CHECK(((const ncclTuner_v6_t *)sym)->getChunkSize == NULL,
			      "v6 getChunkSize set: NCCL would call it");
	} else if (version == 4) {
		const ncclTuner_v4_t *t = sym;
		r = t->init(nranks, nnodes, play_log, &tu->ctx);
		tu->coll = t->getCollInfo;
		tu->fini = t->destroy;
	} else {
		const ncclTuner_v3_t *t = sym;
		r = t->init(nranks, nnodes, play_log, &tu->ctx);
		tu->coll_v3 = t->getCollInfo;
		tu->fini = t->destroy;
	}
	CHECK(r == ncclSuccess, "%s init returned %d", name, r);
	return r == ncclSuccess ? 0 : -1;
}

/* NCCL 2.19-2.21's getAlgoInfo for one collective: algorithm and protocol
 * undefined, the v1 or v2 tuner, then NCCL's own choice (topoGetAlgoInfo)
 * where it left them undefined. true: the tuner chose (then it must be
 * CollNet Chain on Simple, for an AllReduce CollNet supports). */
static bool play_choose(int version, const void *sym, void *ctx, ncclFunc_t f, size_t bytes,
			int collnet)
{
	int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF, nch = 0;
	ncclResult_t r = version == 1
		? ((const ncclTuner_v1_t *)sym)->getCollInfo(f, bytes, collnet, 0, 1, &algo, &proto, &nch)
		: ((const ncclTuner_v2_t *)sym)->getCollInfo(ctx, f, bytes, collnet, 0, 1, &algo, &proto,
							     &nch);
	bool chose = algo != NCCL_ALGO_UNDEF && proto != NCCL_PROTO_UNDEF;

	CHECK(r == ncclSuccess, "v%d getCollInfo(%zu B) returned %d", version, bytes, r);
	CHECK((algo == NCCL_ALGO_UNDEF) == (proto == NCCL_PROTO_UNDEF),
	      "v%d %zu B: algorithm %d, protocol %d: one set alone", version, bytes, algo, proto);
	CHECK(nch == 0, "v%d %zu B: nChannels set to %d", version, bytes, nch);
	if (chose)
		CHECK(algo == NCCL_ALGO_COLLNET_CHAIN && proto == NCCL_PROTO_SIMPLE && collnet == 1 &&
			      f == ncclFuncAllReduce,
		      "v%d %zu B: chose algorithm %d protocol %d (CollNet support %d, collective %d)",
		      version, bytes, algo, proto, collnet, f);
	printf("v%d %s %10zu B, CollNet %s: %s\n", version,
	       f == ncclFuncAllReduce ? "AllReduce" : "ReduceScatter", bytes,
	       collnet ? "supported" : "not supported", chose ? "CollNet Chain, Simple" : "NCCL's choice");
	return chose;
}

/* v1 and v2 (NCCL 2.19-2.21): they choose outright, no cost table. */
static void play_v1_v2(void *lib, size_t nranks, size_t nnodes, bool off)
{
	for (int v = 2; v >= 1; v--) {
		char name[32];
		const void *sym;
		void *ctx = NULL;
		ncclResult_t r;

		snprintf(name, sizeof(name), "ncclTunerPlugin_v%d", v);
		sym = dlsym(lib, name);
		if (!sym) {
			CHECK(0, "%s missing", name);
			continue;
		}
		crossover_chain = 0;
		crossover_lines = 0;
		if (v == 1) {
			const ncclTuner_v1_t *t = sym;
			CHECK(t->name && !strcmp(t->name, "Sumcast"), "%s name", name);
			r = t->init(nranks, nnodes, play_log);
		} else {
			const ncclTuner_v2_t *t = sym;
			CHECK(t->name && !strcmp(t->name, "Sumcast"), "%s name", name);
			r = t->init(nranks, nnodes, play_log, &ctx);
		}
		CHECK(r == ncclSuccess, "%s init returned %d", name, r);
		bool small = play_choose(v, sym, ctx, ncclFuncAllReduce, 8, 1);
		bool large = play_choose(v, sym, ctx, ncclFuncAllReduce, 64u << 20, 1);
		bool unsupported = play_choose(v, sym, ctx, ncclFuncAllReduce, 64u << 20, 0);
		bool rs = play_choose(v, sym, ctx, ncclFuncReduceScatter, 64u << 20, 1);
		setenv("NCCL_ALGO", "Ring,Tree,CollNetChain", 1);
		bool algo_env = play_choose(v, sym, ctx, ncclFuncAllReduce, 64u << 20, 1);
		unsetenv("NCCL_ALGO");
		CHECK(!small && !unsupported && !rs && !algo_env,
		      "v%d chose where it must leave NCCL's choice (8 B %d, no CollNet %d, ReduceScatter "
		      "%d, NCCL_ALGO set %d)", v, small, unsupported, rs, algo_env);
		if (off) {
			CHECK(!large, "v%d off: chose at 64 MiB", v);
			CHECK(crossover_lines == 0, "v%d off: the tuner logged a crossover", v);
		} else {
			CHECK(large, "v%d 64 MiB AllReduce: not CollNet Chain", v);
			CHECK(crossover_lines == 1 && crossover_chain > 8, "v%d: no crossover logged at init", v);
			if (crossover_chain > 8) {
				CHECK(!play_choose(v, sym, ctx, ncclFuncAllReduce, crossover_chain / 2, 1),
				      "v%d %" PRIu64 " B (below the crossover): CollNet", v, crossover_chain / 2);
				CHECK(play_choose(v, sym, ctx, ncclFuncAllReduce, crossover_chain, 1),
				      "v%d %" PRIu64 " B (the crossover): not CollNet", v, crossover_chain);
			}
		}
		if (v == 2) {
			CHECK(((const ncclTuner_v2_t *)sym)->destroy(ctx) == ncclSuccess, "v2 destroy failed");
			continue;
		}
		/* v1 has no context: a second communicator of the same shape
		 * changes nothing, one of another shape leaves every choice to
		 * NCCL until both are gone */
		const ncclTuner_v1_t *t = sym;
		CHECK(t->init(nranks, nnodes, play_log) == ncclSuccess, "v1 second init");
		CHECK(play_choose(1, sym, NULL, ncclFuncAllReduce, 64u << 20, 1) == large,
		      "v1: a second communicator of the same shape changed the choice");
		CHECK(t->init(8, 2, play_log) == ncclSuccess, "v1 third init (2 nodes)");
		CHECK(!play_choose(1, sym, NULL, ncclFuncAllReduce, 64u << 20, 1),
		      "v1: chose with communicators of two shapes live");
		CHECK(t->destroy() == ncclSuccess && t->destroy() == ncclSuccess, "v1 destroy");
		CHECK(!play_choose(1, sym, NULL, ncclFuncAllReduce, 64u << 20, 1),
		      "v1: chose with one of two shapes left (which one is unknown)");
		CHECK(t->destroy() == ncclSuccess, "v1 last destroy");
		CHECK(!play_choose(1, sym, NULL, ncclFuncAllReduce, 64u << 20, 1), "v1: chose after destroy");
		CHECK(t->destroy() == ncclSuccess, "v1 destroy without init");
		CHECK(t->init(nranks, nnodes, play_log) == ncclSuccess, "v1 init again");
		CHECK(play_choose(1, sym, NULL, ncclFuncAllReduce, 64u << 20, 1) == large,
		      "v1: initialized again, another choice");
		CHECK(t->destroy() == ncclSuccess, "v1 destroy");
	}
}

int main(int argc, char **argv)
{
	bool off = argc > 1 && !strcmp(argv[1], "--off");
	const char *path = argc > 1 + off ? argv[1 + off] : HARNESS_PLUGIN_PATH;
	const size_t nnodes = 4, nranks = 32;
	void *lib;

	/* what the settings give the tuner before any communicator connects */
	setenv("SUMCAST_AGGREGATORS", "127.0.0.1:7801,127.0.0.1:7802,127.0.0.1:7803,127.0.0.1:7804", 1);
	setenv("SUMCAST_LINK_GBPS", "100", 1);
	setenv("SUMCAST_AGG_GBPS", "100", 1);
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "FAIL: dlopen %s: %s\n", path, dlerror());
		return 1;
	}
	/* newest first, as NCCL looks them up; each on its own, as a
	 * different NCCL would use it */
	for (int v = 6; v >= 3; v--) {
		struct tuner tu;
		int na = v == 3 ? 6 : 7; /* NCCL 2.22: no PAT row */
		crossover_chain = 0;
		crossover_lines = 0;
		if (open_tuner(lib, v, nranks, nnodes, &tu)) {
			CHECK(0, "ncclTunerPlugin_v%d missing or its init failed", v);
			continue;
		}
		int small = play(&tu, ncclFuncAllReduce, 8, na, off);
		int large = play(&tu, ncclFuncAllReduce, 64u << 20, na, off);
		/* asked again (the tuner keeps its last answers by size): the same */
		CHECK(play(&tu, ncclFuncAllReduce, 8, na, off) == small &&
		      play(&tu, ncclFuncAllReduce, 64u << 20, na, off) == large,
		      "v%d: a size asked again got another answer", v);
		/* at 4 nodes the ring's half an AllReduce beats CollNet at
		 * every size: ReduceScatter and AllGather on the ring */
		int rs[2] = { play(&tu, ncclFuncReduceScatter, 8, na, off),
			      play(&tu, ncclFuncReduceScatter, 64u << 20, na, off) };
		int ag[2] = { play(&tu, ncclFuncAllGather, 8, na, off),
			      play(&tu, ncclFuncAllGather, 64u << 20, na, off) };
		for (int i = 0; i < 2; i++)
			CHECK(off ? rs[i] == NCCL_ALGO_COLLNET_DIRECT && ag[i] == NCCL_ALGO_COLLNET_DIRECT
				  : rs[i] == NCCL_ALGO_RING && ag[i] == NCCL_ALGO_RING,
			      "v%d %s ReduceScatter / AllGather: algorithms %d / %d", v, i ? "64 MiB" : "8 B",
			      rs[i], ag[i]);
		if (off) {
			/* NCCL's figures: CollNet everywhere */
			CHECK(is_collnet(small) && is_collnet(large), "v%d off: NCCL's choice changed", v);
			CHECK(crossover_lines == 0, "v%d off: the tuner logged a crossover", v);
		} else {
			CHECK(!is_collnet(small), "v%d 8 B AllReduce: CollNet (algorithm %d)", v, small);
			CHECK(is_collnet(large), "v%d 64 MiB AllReduce: not CollNet (algorithm %d)", v, large);
			CHECK(crossover_lines == 1 && crossover_chain > 8 && crossover_chain <= (64u << 20),
			      "v%d: no crossover logged at init (%d lines, %" PRIu64 " B)", v,
			      crossover_lines, crossover_chain);
			if (crossover_chain > 8) {
				/* Chain decides where Direct loses; NCCL picks Chain's
				 * entry once only it is left among CollNet's */
				int below = play(&tu, ncclFuncAllReduce, crossover_chain / 2, na, off);
				int at = play(&tu, ncclFuncAllReduce, crossover_chain, na, off);
				CHECK(!is_collnet(below), "v%d %" PRIu64 " B (below the crossover): CollNet", v,
				      crossover_chain / 2);
				CHECK(at == NCCL_ALGO_COLLNET_CHAIN || at == NCCL_ALGO_COLLNET_DIRECT,
				      "v%d %" PRIu64 " B (the crossover): not CollNet", v, crossover_chain);
			}
		}
		CHECK(tu.fini(tu.ctx) == ncclSuccess, "v%d destroy failed", v);
	}
	play_v1_v2(lib, nranks, nnodes, off);
	/* The library stays loaded, as NCCL keeps its net plugin (and so the
	 * tuner in it) until the process ends: what the plugin's settings and
	 * libfabric keep in its statics would read as leaked under LSan once
	 * unmapped (the ASan stage of scripts/test.sh). */
	(void)lib;
	if (failures) {
		fprintf(stderr, "tuner_play: %d failure(s)\n", failures);
		return 1;
	}
	printf("tuner_play: ok (%s)\n", off ? "SUMCAST_TUNER=0: every table as NCCL filled it"
					    : "CollNet by the model on both sides of the crossover");
	return 0;
}
