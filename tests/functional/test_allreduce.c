/* Allreduce end to end: M real sumcastd daemons on 127.0.0.1 (ephemeral
 * ports, port-file), N forked client processes (one rank each) driving the
 * client library, every type x op, sizes from 1 element up (64 MiB f32 sum
 * with --big), results checked against a locally computed reference and
 * across ranks (each rank sends a hash of everything it received to the
 * parent, which compares them).
 *
 *   test_allreduce [--daemons M] [--ranks N] [--jobs J] [--provider P]
 *                  [--big] [--kill|--stop] [--unreachable] [--chunk B] [--window W]
 *
 * --jobs J runs J independent jobs at once on the same daemons.
 * --kill SIGKILLs the last rank mid-job: every other rank of its job must
 *   see client_test() fail within the job timeout, never hang. With --jobs
 *   J the last job's last rank is killed; the other jobs must run on,
 *   every sum right, for BYSTANDER_MS past the kill (on shm a result the
 *   killed rank never took stalled every later send of the daemon's
 *   endpoint, until each job got one of its own).
 * --stop SIGSTOPs it instead (its sockets stay open: only the job timeout,
 *   1 s here, can find it). The ranks ask for the same 1 s, and must still
 *   see the daemon's reason (its ABORT naming the rank), not their own
 *   silence timer's.
 * --auth gives the daemons and the ranks a shared key (HMAC on JOIN) and
 *   checks that a client with another key is refused with "auth".
 * --unreachable adds a closed port to the aggregator list: client_connect_poll
 *   must fail fast with "<addr> unreachable: Connection refused".
 * --multicast PERMILLE: results by IP multicast (fabric.multicast = ip), in a
 *   network namespace of the test's own whose loopback carries multicast
 *   (root; skipped otherwise), each daemon on its own group range; every
 *   rank drops PERMILLE of the datagrams it reads (the client's test hook)
 *   and repairs by NACK. Every rank must take results from the group, NACK
 *   when it drops, and the daemons must count results sent to groups.
 * --mc-out R: rank R does not join the group (it asks for each result by
 *   unicast); the others still take theirs from the group.
 * --mc-inflight B: the daemons' [job] multicast-inflight (bytes, 0: no cap;
 *   without it the default, GRANT_MC_INFLIGHT_DEFAULT). Every multicast rank must
 *   be granted by every aggregator the window the cap leaves, max(2,
 *   min(asked, B / chunk)), at the chunk asked (B must be 0 or at least
 *   2 chunks: the test does not follow the chunk's halving), and take it.
 * --weight W: the ranks ask weight W (SUMCAST_WEIGHT), the daemons cap it
 *   at 2 ([job] max-weight = 2): every rank must be granted min(W, 2) and
 *   a window of the one asked x that by every aggregator (protocol 4).
 * Values are chosen so that every result is exact whatever order the daemon
 * reduces in (small integers for sums, powers of two for products, exactly
 * representable values for f16/bf16). Everything is bounded in time; exit
 * code 77 (skipped) when the provider is not available here. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "client.h"
#include "clock.h"
#include "grant.h"
#include "log.h"
#include "ranks.h"
#include "sumcastd_proc.h"
#include "wire.h"

#ifndef SUMCASTD_PATH
#define SUMCASTD_PATH "sumcastd"
#endif

#define MAX_DAEMONS 8
#define MAX_PROCS SC_RANKS_MAX
#define SMALL_MAX_BYTES (65537 * 8 + 64) /* + room for a guard byte */
#define BIG_COUNT ((16u << 20) - 3) /* 64 MiB of f32 less 3 elements: an odd tail */
#define SUITE_DEADLINE_MS 150000
#define BYSTANDER_MS 5000 /* --kill --jobs J: the other jobs run on this long past the kill */
#define BYSTANDER_TAIL 20  /* ... and then this many batches, the same for each rank */
#define TEST_KEY "sumcast-functional-test-key-0123456789"

static struct {
	int ndaemons, nranks, njobs;
	const char *provider;
	bool big, kill, stop, unreachable, auth;
	uint32_t chunk, window, weight;
	int mc_drop;  /* --multicast: per mille dropped; -1: no multicast */
	int mc_out;   /* --mc-out: the rank that stays out of the group; -1: none */
	long long mc_inflight; /* --mc-inflight: bytes, 0: no cap; -1: the daemons' default */
	char dir[256];
	/* --kill --jobs J, shared with the ranks: when the parent killed (ms),
	 * per job the batch its ranks first saw the kill at and the one they
	 * stop after (the same for each rank of the job: batches are lockstep) */
	struct kill_seen {
		uint64_t kill_ms;
		int at[MAX_PROCS], stop[MAX_PROCS];
	} *kill_seen;
	struct sc_daemon daemons[MAX_DAEMONS];
	char agg_str[MAX_DAEMONS + 1][64];
	const char *aggs[MAX_DAEMONS + 1];
	size_t naggs;
} g = { .ndaemons = 1, .nranks = 2, .njobs = 1, .provider = "tcp", .mc_drop = -1, .mc_out = -1,
      .mc_inflight = -1 };

/* ---- daemons ---- */

static void daemons_stop(void)
{
	sc_daemons_stop(g.daemons, (size_t)g.ndaemons, SIGTERM, 5000);
}

static void daemon_start(int i, const char *job_timeout)
{
	char name[16], extra[512];
	int n = snprintf(extra, sizeof(extra), "[job]\ntimeout = %s\nmax-jobs = 16\n%s", job_timeout,
			 g.weight ? "max-weight = 2\n" : "");
	if (g.mc_inflight >= 0)
		n += snprintf(extra + n, sizeof(extra) - (size_t)n, "multicast-inflight = %lld\n", g.mc_inflight);
	if (g.auth)
		n += snprintf(extra + n, sizeof(extra) - (size_t)n, "[auth]\nkey-file = %s/key\n", g.dir);
	if (g.mc_drop >= 0)
		snprintf(extra + n, sizeof(extra) - (size_t)n,
			 "[fabric]\nmulticast = ip\nmulticast-groups = 239.194.%d.0/24\n", i);
	snprintf(name, sizeof(name), "d%d", i);
	struct sc_daemon_opts o = {
		.binary = sc_daemon_binary(SUMCASTD_PATH),
		.provider = g.provider,
		.node = "127.0.0.1",
		.listen = "127.0.0.1",
		.extra = extra,
		.dir = g.dir,
		.name = name,
		.pdeathsig = true, /* dies with the driver, even when ctest kills it on a timeout */
		.timeout_ms = 10000,
	};
	bool up = sc_daemon_start(&g.daemons[i], &o) == 0;
	if (!up)
		daemons_stop();
	REQUIRE(up, "sumcastd %d did not start", i);
	snprintf(g.agg_str[i], sizeof(g.agg_str[i]), "127.0.0.1:%u", g.daemons[i].ctl);
	g.aggs[i] = g.agg_str[i];
}

/* ---- data ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static bool is_float(enum sc_dtype t)
{
	return t == SC_F32 || t == SC_F16 || t == SC_BF16 || t == SC_F64;
}

/* Float value of element i of rank r in call k: exact under any order. */
static double fval(enum sc_op op, uint64_t h)
{
	static const double prod[8] = { 1, -1, 2, -2, 0.5, -0.5, 1, 1 };
	switch (op) {
	case SC_OP_SUM:
		return (double)(int)(h % 17) - 8;
	case SC_OP_PROD:
		return prod[h % 8];
	default:
		return ((double)(int)(h % 255) - 127) / 4;
	}
}

static uint64_t hval(uint32_t rank, uint32_t call, size_t i)
{
	return mix(((uint64_t)rank << 48) ^ ((uint64_t)call << 32) ^ i);
}

static void store(enum sc_dtype t, void *buf, size_t i, double d, uint64_t u)
{
	switch (t) {
	case SC_F32: ((float *)buf)[i] = (float)d; break;
	case SC_F64: ((double *)buf)[i] = d; break;
	case SC_F16: ((uint16_t *)buf)[i] = sc_f32_to_f16((float)d); break;
	case SC_BF16: ((uint16_t *)buf)[i] = sc_f32_to_bf16((float)d); break;
	case SC_I8: case SC_U8: ((uint8_t *)buf)[i] = (uint8_t)u; break;
	case SC_I32: case SC_U32: ((uint32_t *)buf)[i] = (uint32_t)u; break;
	default: ((uint64_t *)buf)[i] = u; break;
	}
}

static void fill(enum sc_dtype t, enum sc_op op, uint32_t rank, uint32_t call, void *buf,
		 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t h = hval(rank, call, i);
		store(t, buf, i, is_float(t) ? fval(op, h) : 0, h);
	}
}

static int64_t sext(enum sc_dtype t, uint64_t u)
{
	switch (t) {
	case SC_I8: return (int8_t)u;
	case SC_I32: return (int32_t)u;
	case SC_I64: return (int64_t)u;
	default: return 0;
	}
}

static uint64_t trunc_u(enum sc_dtype t, uint64_t u)
{
	size_t s = sc_dtype_size(t);
	return s == 8 ? u : u & ((1ull << (8 * s)) - 1);
}

/* Reference of element i: op over all ranks, exact. */
static void reference(enum sc_dtype t, enum sc_op op, uint32_t nranks, uint32_t call, void *buf,
		      size_t n)
{
	bool sgn = t == SC_I8 || t == SC_I32 || t == SC_I64;
	for (size_t i = 0; i < n; i++) {
		double d = 0;
		uint64_t u = 0;
		for (uint32_t r = 0; r < nranks; r++) {
			uint64_t h = hval(r, call, i);
			if (is_float(t)) {
				double v = fval(op, h);
				if (r == 0)
					d = v;
				else if (op == SC_OP_SUM)
					d += v;
				else if (op == SC_OP_PROD)
					d *= v;
				else if (op == SC_OP_MIN)
					d = v < d ? v : d;
				else
					d = v > d ? v : d;
				continue;
			}
			uint64_t v = trunc_u(t, h);
			if (r == 0)
				u = v;
			else if (op == SC_OP_SUM)
				u += v;
			else if (op == SC_OP_PROD)
				u *= v;
			else {
				bool less = sgn ? sext(t, v) < sext(t, u) : v < u;
				if ((op == SC_OP_MIN) == less)
					u = v;
			}
			u = trunc_u(t, u);
		}
		store(t, buf, i, d, u);
	}
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* ---- one rank ---- */

struct rank_ctx {
	struct client *c;
	uint32_t rank, job;
	uint8_t *sb, *rb, *ref;
	void *sdesc, *rdesc;
	uint64_t hash;
	uint32_t call;
	char msg[600];
};

static int wait_req(struct rank_ctx *x, struct client_req *r, unsigned ms)
{
	uint64_t until = sc_now_ms() + ms;
	int done = 0, rc;
	do {
		rc = client_test(x->c, r, &done);
		if (done)
			return rc;
		sched_yield(); /* more processes than cores: let the daemons run */
	} while (sc_now_ms() < until);
	return -ETIME;
}

/* Four allreduces at once (one per op) of n elements of type t. */
static int run_batch(struct rank_ctx *x, enum sc_dtype t, size_t n, uint32_t nranks)
{
	size_t es = sc_dtype_size(t), region = SMALL_MAX_BYTES;
	struct client_req *r[SC_OP_COUNT];
	uint32_t call0 = x->call;
	for (int op = 0; op < SC_OP_COUNT; op++) {
		fill(t, op, x->rank, x->call++, x->sb + op * region, n);
		memset(x->rb + op * region, 0xa5, n * es + 1);
	}
	for (int op = 0; op < SC_OP_COUNT; op++) {
		int rc;
		uint64_t until = sc_now_ms() + 10000;
		while ((rc = client_allreduce(x->c, x->sb + op * region, x->rb + op * region, n, t,
					      op, x->sdesc, x->rdesc, &r[op])) == -EAGAIN &&
		       sc_now_ms() < until)
			client_progress(x->c);
		if (rc) {
			snprintf(x->msg, sizeof(x->msg), "allreduce %s %s n=%zu: %s (%s)",
				 sc_dtype_name(t), sc_op_name(op), n, strerror(-rc), client_error(x->c));
			return rc;
		}
	}
	int err = 0;
	for (int op = 0; op < SC_OP_COUNT; op++) {
		int rc = wait_req(x, r[op], 30000);
		if (rc && !err) {
			snprintf(x->msg, sizeof(x->msg), "allreduce %s %s n=%zu failed: %s (%s)",
				 sc_dtype_name(t), sc_op_name(op), n, strerror(-rc), client_error(x->c));
			err = rc;
		}
	}
	if (err)
		return err;
	for (int op = 0; op < SC_OP_COUNT; op++) {
		uint8_t *got = x->rb + op * region;
		reference(t, op, nranks, call0 + op, x->ref, n);
		if (memcmp(got, x->ref, n * es)) {
			size_t i = 0;
			while (!memcmp(got + i * es, x->ref + i * es, es))
				i++;
			snprintf(x->msg, sizeof(x->msg),
				 "allreduce %s %s n=%zu: wrong result at element %zu", sc_dtype_name(t),
				 sc_op_name(op), n, i);
			return -EBADMSG;
		}
		if (got[n * es] != 0xa5) {
			snprintf(x->msg, sizeof(x->msg), "allreduce %s %s n=%zu wrote past the end",
				 sc_dtype_name(t), sc_op_name(op), n);
			return -EBADMSG;
		}
		x->hash = fnv(x->hash, got, n * es);
	}
	return 0;
}

static int run_big(struct rank_ctx *x, uint32_t nranks)
{
	struct client_req *r;
	uint32_t call = x->call++;
	fill(SC_F32, SC_OP_SUM, x->rank, call, x->sb, BIG_COUNT);
	int rc = client_allreduce(x->c, x->sb, x->rb, BIG_COUNT, SC_F32, SC_OP_SUM, x->sdesc,
				  x->rdesc, &r);
	if (!rc)
		rc = wait_req(x, r, 60000);
	if (rc) {
		snprintf(x->msg, sizeof(x->msg), "64 MiB f32 sum: %s (%s)", strerror(-rc),
			 client_error(x->c));
		return rc;
	}
	reference(SC_F32, SC_OP_SUM, nranks, call, x->ref, BIG_COUNT);
	if (memcmp(x->rb, x->ref, (size_t)BIG_COUNT * 4)) {
		snprintf(x->msg, sizeof(x->msg), "64 MiB f32 sum: wrong result");
		return -EBADMSG;
	}
	x->hash = fnv(x->hash, x->rb, (size_t)BIG_COUNT * 4);
	return 0;
}

/* A bystander (a rank of a job the kill is not in) after batch it: true
 * once its job has run BYSTANDER_MS past the kill and then BYSTANDER_TAIL
 * batches. The first rank of the job past that time sets the batch all of
 * them stop after. */
static bool bystander_done(uint32_t job, int it, uint64_t t0)
{
	struct kill_seen *k = g.kill_seen;
	uint64_t killed = __atomic_load_n(&k->kill_ms, __ATOMIC_ACQUIRE);
	int none = 0;

	if (sc_now_ms() - t0 > 120000)
		return true; /* never killed: the parent reports it */
	if (!killed)
		return false;
	__atomic_compare_exchange_n(&k->at[job], &none, it + 1, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
	none = 0;
	if (sc_now_ms() - killed >= BYSTANDER_MS)
		__atomic_compare_exchange_n(&k->stop[job], &none, it + 1 + BYSTANDER_TAIL, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	int stop = __atomic_load_n(&k->stop[job], __ATOMIC_ACQUIRE);
	return stop && it + 1 >= stop;
}

/* Child: one rank of one job. Reports "job rank rc hash ms msg" on fd. */
static int rank_main(uint32_t job, uint32_t rank, int fd, int ready_fd)
{
	struct rank_ctx x = { .rank = rank, .job = job, .hash = 0xcbf29ce484222325ull };
	struct client_params p = {
		.provider = g.provider,
		.node = "127.0.0.1",
		.job_id = 0x5c00 + job,
		.rank = rank,
		.nranks = (uint32_t)g.nranks,
		.chunk_bytes = g.chunk,
		.window = g.window,
		.weight = g.weight,
		.timeout_ms = g.stop ? 1000 : g.kill ? 8000 : 20000,
		.naggs = g.naggs,
		.aggs = g.aggs,
		.multicast = (int)rank == g.mc_out ? CLIENT_MC_NOJOIN : 0,
		.mc_drop_permille = g.mc_drop > 0 ? (uint32_t)g.mc_drop : 0,
	};
	if (g.auth) {
		p.key = (const uint8_t *)TEST_KEY;
		p.key_len = strlen(TEST_KEY);
	}
	uint64_t t0 = sc_now_ms();
	int rc = client_create(&p, &x.c);
	if (rc) {
		snprintf(x.msg, sizeof(x.msg), "client_create: %s", strerror(-rc));
		goto out;
	}
	while ((rc = client_connect_poll(x.c)) == -EAGAIN)
		usleep(100);
	if (rc) {
		snprintf(x.msg, sizeof(x.msg), "connect: %s", client_error(x.c));
		goto out_client;
	}
	for (size_t a = 0; g.weight && a < g.naggs; a++) {
		uint32_t want = g.weight < 2 ? g.weight : 2, base = g.window ? g.window : 8;
		if (client_agg_weight(x.c, a) != want || client_agg_window(x.c, a) != base * want) {
			snprintf(x.msg, sizeof(x.msg), "aggregator %zu granted weight %u window %u, want %u and %u",
				 a, client_agg_weight(x.c, a), client_agg_window(x.c, a), want, base * want);
			rc = -EPROTO;
			goto out_client;
		}
	}
	/* a multicast job's grant: its window within multicast-inflight */
	for (size_t a = 0; g.mc_drop >= 0 && a < g.naggs; a++) {
		uint32_t h, w, ch, asked = g.window ? g.window : 8, chunk = g.chunk ? g.chunk : 256u << 10;
		uint64_t cap = g.mc_inflight >= 0 ? (uint64_t)g.mc_inflight : GRANT_MC_INFLIGHT_DEFAULT;
		uint32_t want = asked;
		if (cap && cap / chunk < want)
			want = cap / chunk < 2 ? 2 : (uint32_t)(cap / chunk);
		/* a sealed job's chunk as the client reports it: less the seal's
		 * room (JOB_SEAL_ROOM, daemon/job.h) */
		uint32_t payload = chunk - (g.auth ? 64 : 0);
		if (client_agg_info(x.c, a, &h, &w, &ch) || w != want || ch != payload) {
			snprintf(x.msg, sizeof(x.msg), "aggregator %zu granted window %u chunk %u, want %u and %u "
				 "(multicast-inflight %llu)", a, w, ch, want, payload, (unsigned long long)cap);
			rc = -EPROTO;
			goto out_client;
		}
	}
	size_t bytes = g.big ? (size_t)BIG_COUNT * 4 : SC_OP_COUNT * SMALL_MAX_BYTES;
	if (bytes < SC_OP_COUNT * SMALL_MAX_BYTES)
		bytes = SC_OP_COUNT * SMALL_MAX_BYTES;
	x.sb = malloc(bytes);
	x.rb = malloc(bytes + 64);
	x.ref = malloc(bytes);
	struct fabric_mr smr = { 0 }, rmr = { 0 };
	if (!x.sb || !x.rb || !x.ref || client_mr_reg(x.c, x.sb, bytes, &smr) ||
	    client_mr_reg(x.c, x.rb, bytes + 64, &rmr)) {
		snprintf(x.msg, sizeof(x.msg), "buffers: out of memory or registration failed");
		rc = -ENOMEM;
		goto out_client;
	}
	x.sdesc = smr.desc;
	x.rdesc = rmr.desc;

	if (g.kill) {
		/* Every rank loops on f32 sums; the parent kills the last rank after
		 * everyone reported progress. Survivors must see an error; ranks of
		 * the other jobs (bystanders) must not: they run on, every sum
		 * checked, until BYSTANDER_MS after their start. */
		bool told = false, bystander = job != (uint32_t)g.njobs - 1;
		for (int it = 0; it < 100000; it++) {
			rc = run_batch(&x, SC_F32, 65537, (uint32_t)g.nranks);
			if (rc)
				break;
			if (it >= 3 && !told) {
				(void)!write(ready_fd, "r", 1);
				told = true;
			}
			if (bystander && bystander_done(job, it, t0)) {
				snprintf(x.msg, sizeof(x.msg), "%d batches, %d after the kill", it + 1,
					 it + 1 - __atomic_load_n(&g.kill_seen->at[job], __ATOMIC_ACQUIRE));
				break;
			}
			if (sc_now_ms() - t0 > 60000) {
				snprintf(x.msg, sizeof(x.msg), "no error 60 s into the kill test");
				rc = -ETIME;
				break;
			}
		}
		goto out_mr;
	}
	static const size_t sizes[] = { 1, 3, 7, 1000, 65537 };
	for (int t = 0; t < SC_DTYPE_COUNT && !rc; t++)
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && !rc; k++)
			rc = run_batch(&x, t, sizes[k], (uint32_t)g.nranks);
	if (!rc && g.big)
		rc = run_big(&x, (uint32_t)g.nranks);
	if (!rc && g.mc_drop >= 0) {
		/* what came from the group, summed over the aggregators */
		struct client_mc_info mi, sum = { .in_group = true };
		for (size_t ai = 0; ai < g.naggs; ai++) {
			client_mc_info(x.c, ai, &mi);
			sum.offered = mi.offered;
			sum.in_group &= mi.in_group;
			sum.by_group += mi.by_group;
			sum.by_unicast += mi.by_unicast;
			sum.nacks += mi.nacks;
			sum.dropped += mi.dropped;
			sum.foreign += mi.foreign;
		}
		snprintf(x.msg, sizeof(x.msg), "mc offered=%d in=%d group=%llu unicast=%llu nacks=%llu "
			 "dropped=%llu foreign=%llu", sum.offered, sum.in_group,
			 (unsigned long long)sum.by_group, (unsigned long long)sum.by_unicast,
			 (unsigned long long)sum.nacks, (unsigned long long)sum.dropped,
			 (unsigned long long)sum.foreign);
	}
out_mr:
	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
out_client:
	client_destroy(x.c);
out:;
	char line[800];
	int n = snprintf(line, sizeof(line), "%u %u %d %016llx %llu %s\n", job, rank, rc,
			 (unsigned long long)x.hash, (unsigned long long)(sc_now_ms() - t0),
			 x.msg[0] ? x.msg : "ok");
	if (n > 0 && (size_t)n < PIPE_BUF)
		(void)!write(fd, line, (size_t)n);
	free(x.sb);
	free(x.rb);
	free(x.ref);
	return rc ? 1 : 0;
}

/* A forked rank: fds are the report and readiness pipes (read, write
 * each); the parent keeps the read ends. */
static int rank_proc(int k, void *arg)
{
	const int *fds = arg;

	close(fds[0]);
	close(fds[2]);
	return rank_main((uint32_t)(k / g.nranks), (uint32_t)(k % g.nranks), fds[1], fds[3]);
}

/* ---- multicast ---- */

/* A rank's "mc ..." report: in the group and results from it (with NACKs
 * when it drops datagrams), or, the rank kept out, none from it. */
static bool mc_report_ok(int rank, const char *msg)
{
	int offered, in;
	unsigned long long grp, uni, nacks, dropped, foreign;
	if (sscanf(msg, "mc offered=%d in=%d group=%llu unicast=%llu nacks=%llu dropped=%llu foreign=%llu",
		   &offered, &in, &grp, &uni, &nacks, &dropped, &foreign) != 7 || !offered)
		return false;
	if (rank == g.mc_out)
		return !in && grp == 0 && uni > 0 && nacks > 0;
	return in && grp > 0 && (g.mc_drop == 0 || (dropped > 0 && nacks > 0));
}

/* A network namespace of our own whose loopback carries multicast. */
static int mc_netns(void)
{
	if (unshare(CLONE_NEWNET)) {
		printf("SKIP: unshare(CLONE_NEWNET): %s (multicast tests need root)\n", strerror(errno));
		return 77;
	}
	if (system("ip link set lo up && ip link set lo multicast on && "
		   "ip route add 239.0.0.0/8 dev lo")) {
		printf("SKIP: cannot set up multicast on the namespace's loopback (ip)\n");
		return 77;
	}
	return 0;
}

/* The daemons' multicast counters: every daemon sent results to its group. */
static void mc_daemon_check(void)
{
	static char body[1 << 16];
	for (int i = 0; i < g.ndaemons; i++) {
		int st = sc_http_get(g.daemons[i].http, "/metrics", NULL, 0, body, sizeof(body), 5000);
		CHECK(st == 200, "daemon %d: /metrics did not answer (%d)", i, st);
		if (st != 200)
			continue;
		double res = sc_metric_value(body, "sumcast_multicast_results_total");
		double dg = sc_metric_value(body, "sumcast_multicast_datagrams_total");
		double nk = sc_metric_value(body, "sumcast_multicast_nacks_total");
		double rp = sc_metric_value(body, "sumcast_multicast_repairs_total");
		printf("daemon %d: %.0f results in %.0f datagrams to its group, %.0f NACKs, %.0f repairs\n",
		       i, res, dg, nk, rp);
		CHECK(res > 0 && dg >= res && (g.mc_drop == 0 || nk > 0),
		      "daemon %d: no results to its group, or no NACKs while ranks dropped", i);
	}
}

/* ---- driver ---- */

static void test_unreachable(void)
{
	/* A port nobody listens on: bind, read the number, close. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(sa);
	REQUIRE(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
			!getsockname(fd, (struct sockaddr *)&sa, &l),
		"socket: %s", strerror(errno));
	close(fd);
	snprintf(g.agg_str[g.naggs], sizeof(g.agg_str[0]), "127.0.0.1:%u", ntohs(sa.sin_port));
	g.aggs[g.naggs] = g.agg_str[g.naggs];
	g.naggs++;
	struct client_params p = {
		.provider = g.provider, .node = "127.0.0.1", .job_id = 0x77, .rank = 0, .nranks = 2,
		.timeout_ms = 5000, .naggs = g.naggs, .aggs = g.aggs,
	};
	struct client *c;
	int rc = client_create(&p, &c);
	REQUIRE(rc == 0, "client_create: %s", strerror(-rc));
	uint64_t t0 = sc_now_ms();
	while ((rc = client_connect_poll(c)) == -EAGAIN && sc_now_ms() - t0 < 10000)
		usleep(100);
	uint64_t dt = sc_now_ms() - t0;
	char want[128];
	snprintf(want, sizeof(want), "%s unreachable: Connection refused", g.aggs[g.naggs - 1]);
	/* refused: at once, not after the join timeout (5 s) */
	printf("unreachable aggregator: rc %d after %llu ms: \"%s\"\n", rc, (unsigned long long)dt,
	       client_error(c));
	CHECK(rc == -ECONNREFUSED && dt < 4000 && !strcmp(client_error(c), want),
	      "an unreachable aggregator fails at once with \"%s\"", want);
	client_destroy(c);
}

/* A rank with another key must be refused, with the daemon's reason. */
static void test_wrong_key(void)
{
	static const char bad[] = "not-the-key-of-these-daemons";
	struct client_params p = {
		.provider = g.provider, .node = "127.0.0.1", .job_id = 0x99, .rank = 0, .nranks = 2,
		.timeout_ms = 5000, .naggs = g.naggs, .aggs = g.aggs,
		.key = (const uint8_t *)bad, .key_len = sizeof(bad) - 1,
	};
	struct client *c;
	int rc = client_create(&p, &c);
	REQUIRE(rc == 0, "client_create: %s", strerror(-rc));
	uint64_t t0 = sc_now_ms();
	while ((rc = client_connect_poll(c)) == -EAGAIN && sc_now_ms() - t0 < 10000)
		usleep(100);
	printf("wrong key: rc %d: \"%s\"\n", rc, client_error(c));
	CHECK(rc == -EACCES && strstr(client_error(c), "refused join: auth"),
	      "a rank with another key is refused with auth");
	client_destroy(c);
}

static void usage(void)
{
	fprintf(stderr, "usage: test_allreduce [--daemons M] [--ranks N] [--jobs J] [--provider P] "
			"[--big] [--kill] [--stop] [--auth] [--unreachable] [--chunk B] [--window W] "
			"[--multicast PERMILLE] [--mc-out R] [--mc-inflight B] [--weight W]\n");
	exit(2);
}

/* The daemons and everything the run wrote under g.dir (configs, the key). */
static void run_cleanup(void)
{
	char kp[300];

	daemons_stop();
	for (int i = 0; i < g.ndaemons; i++)
		sc_daemon_cleanup(&g.daemons[i], false);
	snprintf(kp, sizeof(kp), "%s/key", g.dir);
	unlink(kp);
	rmdir(g.dir);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "daemons", required_argument, NULL, 'm' }, { "ranks", required_argument, NULL, 'n' },
		{ "jobs", required_argument, NULL, 'j' },    { "provider", required_argument, NULL, 'p' },
		{ "big", no_argument, NULL, 'b' },           { "kill", no_argument, NULL, 'k' },
		{ "stop", no_argument, NULL, 's' },          { "auth", no_argument, NULL, 'a' },
		{ "unreachable", no_argument, NULL, 'u' },   { "chunk", required_argument, NULL, 'c' },
		{ "window", required_argument, NULL, 'w' },  { "weight", required_argument, NULL, 'W' },  { "multicast", required_argument, NULL, 'M' },
		{ "mc-out", required_argument, NULL, 'O' },  { "mc-inflight", required_argument, NULL, 'I' },
		{ NULL, 0, NULL, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'm': g.ndaemons = atoi(optarg); break;
		case 'n': g.nranks = atoi(optarg); break;
		case 'j': g.njobs = atoi(optarg); break;
		case 'p': g.provider = optarg; break;
		case 'b': g.big = true; break;
		case 'k': g.kill = true; break;
		case 's': g.kill = g.stop = true; break;
		case 'u': g.unreachable = true; break;
		case 'a': g.auth = true; break;
		case 'c': g.chunk = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'w': g.window = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'W': g.weight = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'M': g.mc_drop = atoi(optarg); break;
		case 'O': g.mc_out = atoi(optarg); break;
		case 'I': g.mc_inflight = strtoll(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (g.ndaemons < 1 || g.ndaemons > MAX_DAEMONS || g.nranks < 1 || g.njobs < 1 ||
	    g.nranks * g.njobs > MAX_PROCS)
		usage();
	uint64_t chunk = g.chunk ? g.chunk : 256u << 10;
	if (g.mc_inflight > 0 && (uint64_t)g.mc_inflight < 2 * chunk)
		usage(); /* the grant would halve the chunk: not what the check above follows */
	if (getenv("SUMCAST_LOG_LEVEL")) {
		enum sc_log_level lv;
		if (!sc_log_level_parse(getenv("SUMCAST_LOG_LEVEL"), &lv))
			sc_log_set_level(lv);
	}
	if (g.mc_drop >= 0) {
		int rc = mc_netns();
		if (rc)
			return rc;
	}
	/* Skip (77) if the provider is missing on this host. */
	struct fabric_params fp = { .provider = g.provider, .node = "127.0.0.1" };
	struct fabric *probe;
	if (fabric_open(&fp, &probe)) {
		printf("SKIP: libfabric provider %s is not available here\n", g.provider);
		return 77;
	}
	fabric_close(probe);
	if ((g.kill || g.stop) && !strcmp(g.provider, "shm") && fabric_shm_lock_hazard()) {
		/* the daemon's next result send to a rank killed or stopped
		 * inside its progress can spin in libfabric for good */
		printf("SKIP: a killed or stopped rank on libfabric 1.x's shm can leave its region's "
		       "spin lock held (common/fabric.h, fabric_shm_lock_hazard); the libfabric 2.6 "
		       "stage runs this test\n");
		return 77;
	}
	const char *bin = sc_daemon_binary(SUMCASTD_PATH);
	if (access(bin, X_OK)) {
		printf("SKIP: no sumcastd at %s\n", bin);
		return 77;
	}
	snprintf(g.dir, sizeof(g.dir), "/tmp/sumcast-ar-XXXXXX");
	REQUIRE(mkdtemp(g.dir), "mkdtemp: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	if (g.auth) {
		char kp[300];
		snprintf(kp, sizeof(kp), "%s/key", g.dir);
		int kfd = open(kp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		REQUIRE(kfd >= 0 && write(kfd, TEST_KEY "\n", strlen(TEST_KEY) + 1) >= 0, "%s: %s", kp,
			strerror(errno));
		close(kfd);
	}
	for (int i = 0; i < g.ndaemons; i++)
		daemon_start(i, g.kill ? "1s" : "20s");
	g.naggs = (size_t)g.ndaemons;
	printf("%d daemon(s) (%s) on ports", g.ndaemons, g.provider);
	for (int i = 0; i < g.ndaemons; i++)
		printf(" %u", g.daemons[i].ctl);
	printf("; %d job(s) x %d ranks%s%s\n", g.njobs, g.nranks, g.big ? ", 64 MiB f32" : "",
	       g.kill ? ", killing the last rank" : "");
	fflush(stdout);

	if (g.auth)
		test_wrong_key();
	if (g.unreachable)
		test_unreachable();
	if (th_failed || g.unreachable) {
		run_cleanup();
		return th_summary("test_allreduce");
	}

	int fds[4]; /* reports: read, write; readiness: read, write */
	REQUIRE(!pipe(fds) && !pipe(fds + 2), "pipe: %s", strerror(errno));
	struct sc_ranks ranks;
	int nk = g.njobs * g.nranks;
	g.kill_seen = mmap(NULL, sizeof(*g.kill_seen), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	REQUIRE(g.kill_seen != MAP_FAILED, "mmap: %s", strerror(errno));
	int started = sc_ranks_start(&ranks, nk, rank_proc, fds, true);
	REQUIRE(started == 0, "fork: %s", strerror(-started));
	int pfd[2] = { fds[0], fds[1] }, rfd[2] = { fds[2], fds[3] };
	close(pfd[1]);
	close(rfd[1]);

	/* Collect one line per rank, bounded. */
	uint64_t deadline = sc_now_ms() + SUITE_DEADLINE_MS;
	char buf[16384];
	size_t len = 0;
	int lines = 0, expected = nk - (g.kill ? 1 : 0);
	int readies = 0;
	bool killed = false;
	uint64_t kill_ms = 0;
	while (lines < expected && sc_now_ms() < deadline) {
		struct pollfd pf[2] = { { pfd[0], POLLIN, 0 }, { rfd[0], POLLIN, 0 } };
		if (poll(pf, 2, 100) <= 0)
			continue;
		if (pf[1].revents & POLLIN) {
			char r[64];
			ssize_t n = read(rfd[0], r, sizeof(r));
			if (n > 0)
				readies += (int)n;
			if (g.kill && !killed && readies >= nk) {
				kill(ranks.pid[nk - 1], g.stop ? SIGSTOP : SIGKILL);
				killed = true;
				kill_ms = sc_now_ms();
				__atomic_store_n(&g.kill_seen->kill_ms, kill_ms, __ATOMIC_RELEASE);
				printf("%s rank %d (pid %d)\n", g.stop ? "stopped" : "killed", nk - 1,
				       (int)ranks.pid[nk - 1]);
				fflush(stdout);
			}
		}
		if (!(pf[0].revents & (POLLIN | POLLHUP)))
			continue;
		ssize_t n = read(pfd[0], buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
		char *nl;
		while ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			unsigned job, rank;
			int rc;
			unsigned long long hash, ms;
			char msg[700] = "";
			REQUIRE(sscanf(buf, "%u %u %d %llx %llu %699[^\n]", &job, &rank, &rc, &hash, &ms,
				       msg) >= 5,
				"bad report \"%s\"", buf);
			lines++;
			if (g.kill && job != (unsigned)g.njobs - 1) {
				/* Bystanders: every batch right, on past the kill. */
				uint64_t after = killed ? sc_now_ms() - kill_ms : 0;
				bool ok = killed && rc == 0;
				printf("job %u rank %u: %s, %llu ms after the kill: %s\n", job, rank,
				       ok ? "ran on as it must" : "WRONG", (unsigned long long)after, msg);
				CHECK(ok, "job %u rank %u, beside the killed job, did not run on", job, rank);
			} else if (g.kill) {
				/* Survivors must fail, soon after the kill. */
				uint64_t after = killed ? sc_now_ms() - kill_ms : 0;
				bool ok = killed && rc != 0 && after < 15000 &&
					  (!g.stop || strstr(msg, "aborted the job"));
				printf("job %u rank %u: %s after %llu ms from the kill: %s\n", job, rank,
				       ok ? "failed as it must" : "WRONG", (unsigned long long)after, msg);
				CHECK(ok, "job %u rank %u did not fail soon after the kill%s", job, rank,
				      g.stop ? " with the daemon's ABORT" : "");
			} else {
				static unsigned long long hashes[MAX_PROCS];
				static bool seen[MAX_PROCS];
				printf("job %u rank %u: rc %d hash %016llx %llu ms %s\n", job, rank, rc,
				       hash, ms, msg);
				CHECK(rc == 0, "job %u rank %u failed: %s", job, rank, msg);
				CHECK(rc || g.mc_drop < 0 || mc_report_ok((int)rank, msg),
				      "job %u rank %u: multicast was not used as it must be", job, rank);
				if (!seen[job]) {
					seen[job] = true;
					hashes[job] = hash;
				} else {
					CHECK(rc || hashes[job] == hash,
					      "job %u rank %u: result hash differs from another rank's", job, rank);
				}
			}
			size_t rest = len - (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, rest + 1);
			len = rest;
		}
	}
	fflush(stdout);
	CHECK(lines >= expected, "%d of %d ranks reported within %d s; killing the rest", lines, expected,
	      SUITE_DEADLINE_MS / 1000);
	sc_ranks_kill(&ranks);
	if (g.mc_drop >= 0 && !th_failed)
		mc_daemon_check();
	run_cleanup();
	return th_summary("test_allreduce");
}
