/* What results must be: reference inputs and reductions (exact in every
 * order), the rank-order sums of SUMCAST_DETERMINISTIC, and the check of a
 * rank's SUMCAST_TRACE file. */
#include "harness.h"

#include <dirent.h>
#include <math.h>
#include <string.h>

#include "reduce.h"

size_t type_size(ncclDataType_t t)
{
	static const size_t s[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2 };
	return s[t];
}

const char *type_name(ncclDataType_t t)
{
	static const char *const n[] = { "i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16" };
	return (unsigned)t < 10 ? n[t] : "?";
}

const char *op_name(ncclRedOp_t op)
{
	static const char *const n[] = { "sum", "prod", "max", "min" };
	return (unsigned)op < 4 ? n[op] : "?";
}

static bool is_float(ncclDataType_t t)
{
	return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}
static bool is_unsigned(ncclDataType_t t)
{
	return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

/* Inputs are small integers (powers of two for prod) so every order of
 * reduction gives the same exact result: references compare bitwise. */
int64_t in_val(ncclDataType_t t, ncclRedOp_t op, int rank, size_t i)
{
	if (op == ncclProd) {
		int m = (int)((i + (size_t)rank) % 3);
		return m == 0 ? 2 : m == 1 || is_unsigned(t) ? 1 : -1;
	}
	int64_t v = (int64_t)((i * 7 + (size_t)rank * 3 + 1) % 9);
	return is_unsigned(t) ? v : v - 4;
}

void put(ncclDataType_t t, void *buf, size_t i, int64_t v)
{
	switch (t) {
	case ncclInt8: case ncclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case ncclInt32: case ncclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case ncclInt64: case ncclUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case ncclFloat16: ((uint16_t *)buf)[i] = sc_f32_to_f16((float)v); break;
	case ncclBfloat16: ((uint16_t *)buf)[i] = sc_f32_to_bf16((float)v); break;
	case ncclFloat32: ((float *)buf)[i] = (float)v; break;
	case ncclFloat64: ((double *)buf)[i] = (double)v; break;
	default: break;
	}
}

int64_t ref_val(ncclDataType_t t, ncclRedOp_t op, size_t i)
{
	int64_t acc = in_val(t, op, 0, i);
	for (int r = 1; r < opt.nranks; r++) {
		int64_t v = in_val(t, op, r, i);
		switch (op) {
		case ncclSum: acc += v; break;
		case ncclProd: acc *= v; break;
		case ncclMax: acc = v > acc ? v : acc; break;
		default: acc = v < acc ? v : acc; break;
		}
	}
	(void)is_float;
	return acc;
}

/* FNV-1a's step over 8-byte words (then bytes for the tail), each step
 * mixed down by a shift: every step is a bijection of h, so buffers that
 * differ in one word never hash alike. A word at a time: the checks of a
 * fault test hash every result, and a byte at a time (instrumented, in the
 * ASan stage) was a tenth of the harness's CPU. */
uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 31;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* An f32 input whose sum rounds differently in different orders: mantissas
 * and exponents spread over 2^-20..2^20, sign by rank and index. */
static float order_val(int rank, size_t i)
{
	uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(rank + 1) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	float m = 1.0f + (float)(h % 8388608) / 8388608.0f;
	int e = (int)((h >> 23) % 41) - 20;
	return ((h >> 40) & 1 ? -1.0f : 1.0f) * ldexpf(m, e);
}

/* SUMCAST_DETERMINISTIC (--deterministic, split 1): every element must be the
 * rank-order sum ((x0 + x1) + x2) + ... in f32, and bf16 the f32 rank-order
 * sum rounded once, however the copies arrived. The f32 case also checks the
 * inputs are order-sensitive at all: the reverse order must differ somewhere,
 * or the check would prove nothing. */
uint64_t check_rank_order(void *cc, uint8_t *send, uint8_t *recv, size_t half, void *mh,
			  uint64_t hash)
{
	size_t count = half / sizeof(float), differ = 0;
	float *s = (float *)send, *r = (float *)recv;

	for (int pass = 0; pass < 3; pass++) {
		size_t shift = (size_t)pass * 7; /* other inputs each pass */
		for (size_t i = 0; i < count; i++)
			s[i] = order_val(my_rank, i + shift);
		allreduce_chunked(cc, send, recv, count, ncclFloat32, ncclSum, mh);
		for (size_t i = 0; i < count; i++) {
			size_t x = i + shift;
			float fwd = order_val(0, x), rev = order_val(opt.nranks - 1, x);
			for (int k = 1; k < opt.nranks; k++) {
				fwd += order_val(k, x);
				rev += order_val(opt.nranks - 1 - k, x);
			}
			REQUIRE(memcmp(&r[i], &fwd, sizeof(fwd)) == 0,
			      "deterministic f32 sum, pass %d: element %zu is %a, rank order gives %a", pass, i,
			      (double)r[i], (double)fwd);
			differ += memcmp(&fwd, &rev, sizeof(fwd)) != 0;
		}
		hash = fnv(hash, recv, count * sizeof(float));
	}
	REQUIRE(differ > 0, "deterministic check: no element's sum depends on the order (inputs useless)");
	count = half / 2;
	uint16_t *s16 = (uint16_t *)send, *r16 = (uint16_t *)recv;
	for (size_t i = 0; i < count; i++)
		s16[i] = sc_f32_to_bf16(order_val(my_rank, i));
	allreduce_chunked(cc, send, recv, count, ncclBfloat16, ncclSum, mh);
	for (size_t i = 0; i < count; i++) {
		float acc = sc_bf16_to_f32(sc_f32_to_bf16(order_val(0, i)));
		for (int k = 1; k < opt.nranks; k++)
			acc += sc_bf16_to_f32(sc_f32_to_bf16(order_val(k, i)));
		uint16_t want = sc_f32_to_bf16(acc);
		REQUIRE(r16[i] == want, "deterministic bf16 sum: element %zu is 0x%04x, rank order gives 0x%04x",
		      i, r16[i], want);
	}
	if (my_rank == 0)
		fprintf(stderr, "deterministic: %zu f32 elements x 3 and %zu bf16 equal to the rank-order sum "
			"(%zu f32 sums differ in reverse order)\n", half / sizeof(float), count, differ);
	return fnv(hash, recv, count * 2);
}

static uint64_t adapt_rows;
static double adapt_splits[2];
static int adapt_nsplits;

void adapt_note(const char *line)
{
	const char *p = strstr(line, "\"split\":");
	double f;

	if (!strstr(line, "\"adaptive\":true"))
		return;
	REQUIRE(p && sscanf(p, "\"split\":%lf", &f) == 1 && f >= 0 && f <= 1,
	      "trace: an adaptive request without its split: %s", line);
	adapt_rows++;
	if (adapt_nsplits < 2 && (!adapt_nsplits || adapt_splits[0] != f))
		adapt_splits[adapt_nsplits++] = f;
}

void adapt_check(void)
{
	if (!opt.expect_adaptive)
		return;
	REQUIRE(adapt_rows >= 24 && adapt_nsplits == 2,
	      "trace: %llu adaptive requests at %d split(s); want 24 or more at two or more",
	      (unsigned long long)adapt_rows, adapt_nsplits);
	if (my_rank == 0)
		fprintf(stderr, "trace: %llu adaptive requests; the split moved (%.3f, %.3f, ...)\n",
			(unsigned long long)adapt_rows, adapt_splits[0], adapt_splits[1]);
}

/* --trace: this rank's file <rv_dir>/trace.<job>.<rank>.jsonl (closed by
 * closeColl) lists every request it issued, in order of completion: one
 * well-formed line each, status ok, bytes adding up, seqs all different. */
uint64_t trace_win_agg, trace_rs_agg, trace_rs_got, trace_ag_agg, trace_ag_sent;

uint64_t check_trace(void)
{
	char suffix[32], path[PATH_MAX + 300] = "", line[1024];
	DIR *d = opendir(rv_dir);
	struct dirent *e;
	int files = 0;

	REQUIRE(d, "opendir %s", rv_dir);
	snprintf(suffix, sizeof(suffix), ".%d.jsonl", my_rank);
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name), k = strlen(suffix);
		if (!strncmp(e->d_name, "trace.", 6) && n > k && !strcmp(e->d_name + n - k, suffix)) {
			snprintf(path, sizeof(path), "%s/%s", rv_dir, e->d_name);
			files++;
		}
	}
	closedir(d);
	REQUIRE(files == 1, "trace: %d files for rank %d, want 1", files, my_rank);
	FILE *f = fopen(path, "r");
	REQUIRE(f, "trace: open %s", path);
	uint64_t lines = 0, bytes = 0, agg = 0;
	static uint8_t seen[1 << 17]; /* seq bits: at most 2^20 */
	memset(seen, 0, sizeof(seen));
	while (fgets(line, sizeof(line), f)) {
		unsigned rank = 0, nranks = 0, seq = 0;
		unsigned long long job = 0;
		size_t count = 0, b = 0, ab = 0;
		char type[8] = "", op[8] = "";
		int n = sscanf(line, "{\"job\":\"0x%llx\",\"rank\":%u,\"nranks\":%u,\"seq\":%u,"
			       "\"type\":\"%7[a-z0-9]\",\"op\":\"%7[a-z]\",\"count\":%zu,\"bytes\":%zu,"
			       "\"agg_bytes\":%zu,", &job, &rank, &nranks, &seq, type, op, &count, &b, &ab);
		REQUIRE(n == 9, "trace line %llu does not parse (%d fields): %s", (unsigned long long)lines + 1, n, line);
		REQUIRE(rank == (unsigned)my_rank && nranks == (unsigned)opt.nranks && ab <= b && b > 0,
		      "trace line %llu: %s", (unsigned long long)lines + 1, line);
		REQUIRE(strstr(line, "\"status\":\"ok\"}") && strstr(line, "\"time_us\":"),
		      "trace line %llu: %s", (unsigned long long)lines + 1, line);
		REQUIRE(!(seen[seq >> 3] & (1u << (seq & 7))), "trace: seq %u twice", seq);
		seen[seq >> 3] |= (uint8_t)(1u << (seq & 7));
		size_t sent = 0, got = 0;
		const char *ps = strstr(line, "\"agg_sent\":"), *pg = strstr(line, "\"agg_got\":");
		/* a tree's allreduce sends its bytes at three levels: about
		 * (1 + 2/F') of them, each level through the aggregators or not */
		bool tree = strstr(line, "\"coll\":\"tree\"") != NULL;
		size_t cap = tree ? 3 * ab : ab;
		REQUIRE(tree == tree_on(), "trace line %llu: a tree's row iff the collnet is a tree: %s",
		      (unsigned long long)lines + 1, line);
		REQUIRE(ps && pg && sscanf(ps, "\"agg_sent\":%zu", &sent) == 1 &&
		      sscanf(pg, "\"agg_got\":%zu", &got) == 1 && sent <= cap && got <= cap,
		      "trace line %llu: agg_sent / agg_got: %s", (unsigned long long)lines + 1, line);
		adapt_note(line);
		lines++;
		bytes += b;
		agg += sent; /* what this rank sent: what the daemons count */
		if (!strstr(line, "\"coll\":\"allreduce\""))
			trace_win_agg += ab;
		if (strstr(line, "\"coll\":\"reducescatter\"")) {
			trace_rs_agg += ab;
			trace_rs_got += got;
		} else if (strstr(line, "\"coll\":\"allgather\"")) {
			trace_ag_agg += ab;
			trace_ag_sent += sent;
		} else if (!tree) {
			REQUIRE(sent == ab && got == ab, "trace line %llu: an allreduce sends and gets all it "
			      "carries: %s", (unsigned long long)lines + 1, line);
		}
	}
	fclose(f);
	adapt_check();
	REQUIRE(lines == issued_reqs && bytes == issued_bytes,
	      "trace: %llu lines / %llu bytes, issued %llu requests / %llu bytes",
	      (unsigned long long)lines, (unsigned long long)bytes, (unsigned long long)issued_reqs,
	      (unsigned long long)issued_bytes);
	if (my_rank == 0)
		fprintf(stderr, "trace: %llu requests, %llu bytes, one line each\n",
			(unsigned long long)lines, (unsigned long long)bytes);
	return agg;
}

/* --expect agg: connect announced the aggregators on every node, this
 * node's trace lists bytes sent through them, and every daemon holds the
 * job (all ranks joined) and counted DATA from this rank, as many bytes in
 * all as the trace lists. joined: the same with no byte through them (split
 * 0). ring: connect fell back, nothing went to the aggregators and no
 * daemon holds the job. A join that fails and falls back to the ring fails
 * agg and joined; a path that does not carry what the plugin claims fails
 * the byte count. */
void coll_finish(void *cc, void *mh)
{
	struct agg_view view = { 0 };
	struct tree_view tv = { 0 };
	bool tree = opt.expect && tree_on();

	if (opt.expect && !tree)
		REQUIRE(daemons_view(my_rank, &view) == 0, "the daemons' /stats: no answer or no parse");
	if (tree) {
		/* every node's requests done (so every byte counted), the inner
		 * jobs seen before any node closes them */
		rv_barrier("tree-done");
		REQUIRE(daemons_tree_view(&tv) == 0, "the daemons' /stats: no answer or no parse");
		rv_barrier("tree-viewed");
	}
	NCHECK(CN_CALL(deregMr, cc, mh));
	NCHECK(CN_CALL(closeColl, cc));
	uint64_t trace_agg = opt.trace ? check_trace() : 0;
	plugin_finalize(true);
	if (tree)
		check_tree(&tv, trace_agg);
	else if (opt.expect)
		check_expect(&view, trace_agg);
}

/* --expect agg on a tree (--fan-in below --nranks): every daemon holds the
 * tree's inner jobs and nothing else: 2 per group (reduce-scatter and
 * allgather, of the group's size) and one per shard (of G ranks), every
 * rank joined, every one counted data, none larger than max(F', G); and
 * what they counted is what the nodes' traces say they sent, to the byte. */
void check_tree(const struct tree_view *v, uint64_t trace_sent)
{
	int N = opt.nranks, F = opt.fan_in, G = (N + F - 1) / F, Fp = (N + G - 1) / G, nd = v->ndaemons;
	uint32_t fan = (uint32_t)(Fp > G ? Fp : G);
	uint64_t sent = trace_sent;

	REQUIRE(!strcmp(opt.expect, "agg"), "--fan-in below --nranks checks --expect agg only");
	REQUIRE(saw_agg_path && !saw_fallback,
	      "expected the aggregators at every level: connect logged aggregators=%d fallback=%d",
	      saw_agg_path, saw_fallback);
	REQUIRE(v->jobs == nd * (2 * G + Fp) && v->joined_all == v->jobs,
	      "expected %d inner jobs on each of %d daemons, every rank joined: %d jobs, %d joined",
	      2 * G + Fp, nd, v->jobs, v->joined_all);
	REQUIRE(v->max_nranks == fan && v->sum_nranks == (uint64_t)nd * (uint64_t)(2 * N + Fp * G),
	      "inner jobs: largest %u ranks (want %u), %llu ranks in all (want %d)", v->max_nranks,
	      fan, (unsigned long long)v->sum_nranks, nd * (2 * N + Fp * G));
	REQUIRE(v->idle == 0, "%d of %d inner jobs counted no byte", v->idle, v->jobs);
	rv_all_sum("tree-sent", &sent, 1);
	REQUIRE(sent == v->bytes, "the daemons counted %llu bytes in the inner jobs, the nodes' traces "
	      "list %llu", (unsigned long long)v->bytes, (unsigned long long)sent);
	if (my_rank == 0)
		fprintf(stderr, "path: tree of %d groups, %d shards: %d inner jobs on each of %d daemons, "
			"fan-in %u, %llu bytes counted, as the traces say\n", G, Fp, 2 * G + Fp, nd, fan,
			(unsigned long long)v->bytes);
}

void check_expect(const struct agg_view *v, uint64_t trace_agg)
{
	uint64_t counted = 0;
	int idle = 0;

	for (int i = 0; i < v->ndaemons; i++) {
		counted += v->bytes[i];
		idle += v->bytes[i] == 0;
	}
	if (!strcmp(opt.expect, "ring")) {
		REQUIRE(saw_fallback && !saw_agg_path,
		      "expected the ring: connect logged aggregators=%d fallback=%d", saw_agg_path,
		      saw_fallback);
		REQUIRE(trace_agg == 0 && v->jobs == 0 && counted == 0,
		      "expected the ring: the trace lists %llu bytes through the aggregators, %d daemons "
		      "hold %d jobs, %llu bytes counted from this rank", (unsigned long long)trace_agg,
		      v->ndaemons, v->jobs, (unsigned long long)counted);
		if (my_rank == 0)
			fprintf(stderr, "path: ring on every node, no byte through the aggregators "
				"(%d daemons hold no job)\n", v->ndaemons);
		return;
	}
	bool agg = !strcmp(opt.expect, "agg");
	REQUIRE(saw_agg_path && !saw_fallback,
	      "expected the aggregators (%s): connect logged aggregators=%d fallback=%d", opt.expect,
	      saw_agg_path, saw_fallback);
	REQUIRE(v->holding == v->ndaemons && v->jobs == v->ndaemons,
	      "expected the aggregators (%s): %d of %d daemons hold the job with every rank joined "
	      "(%d jobs)", opt.expect, v->holding, v->ndaemons, v->jobs);
	REQUIRE(agg ? trace_agg > 0 : trace_agg == 0,
	      "expected the aggregators to carry %s: the trace lists %llu bytes through them",
	      agg ? "data" : "nothing (joined only)", (unsigned long long)trace_agg);
	REQUIRE(v->ndaemons == 0 || counted == trace_agg,
	      "the daemons counted %llu bytes from this rank, its trace lists %llu",
	      (unsigned long long)counted, (unsigned long long)trace_agg);
	REQUIRE(!agg || idle == 0, "%d of %d daemons counted no byte from this rank", idle,
	      v->ndaemons);
	if (my_rank == 0)
		fprintf(stderr, "path: %s, %llu bytes through %d aggregators (counted by the daemons: "
			"%llu)\n", opt.expect, (unsigned long long)trace_agg, v->ndaemons,
			(unsigned long long)counted);
}
