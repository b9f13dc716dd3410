/* The fault test: many allreduces of mixed sizes, types and ops (in place
 * too), with every fifth a ReduceScatter and every fifth an AllGather of
 * CollNet Direct windows (NCCL's pointer rule), several in flight at once, while an aggregator dies, stalls, is
 * drained or restarted, or every aggregator goes, or a node dies. Every
 * result is checked against the reference and bitwise across nodes.
 *
 *   harness fault --nranks N --naggs M --fault KIND[,KIND] [--fault-agg I] [--ops K]
 *
 * K collectives (300; $HARNESS_FAULT_OPS where --ops is not given), the
 * fault as collective K / 3 starts (--fault-at), a second at 2 K / 3.
 *
 *   kill     SIGKILL aggregator I while requests are in flight
 *   idle     SIGKILL aggregator I while no request is in flight (all nodes
 *            wait at a barrier around it)
 *   stop     SIGSTOP aggregator I in flight; SIGCONT it once this node has
 *            recovered (its late results must land nowhere)
 *   term     SIGTERM aggregator I: it drains (DRAIN); the nodes agree on a
 *            request from which it is out of use and leave it: no node may
 *            log a fault, repair or copy anything
 *   restart  SIGKILL aggregator I and start a new one on the same port; the
 *            next communicator uses it again (and, with --readmit, this one)
 *   blip     SIGSTOP aggregator I for SUMCAST_AGG_DEADLINE + 300 ms while data
 *            flows, then SIGCONT (HARNESS_BLIP_MS sets the pause): a slow
 *            aggregator, not a dead one. Some nodes may miss its PONG by a
 *            hair and some not: the nodes either all go on with it, or all
 *            agree it failed and take it back (re-admission); either way
 *            no hang and every result exact
 *   flap     restart, and again each time every node has it back, --flaps
 *            times (3): it comes back later each time, results stay exact
 *   rolling  a rolling upgrade: SIGTERM aggregator 0 (it drains and exits),
 *            a new daemon on its port once the port is free, and when every
 *            node has it back the next one, to the last: no node may log a
 *            fault, repair or copy anything
 *   all      SIGKILL every aggregator: the ring alone goes on
 *   connect  SIGKILL aggregator I while the nodes connect
 *   node     the last node dies: every other node must get an error (no
 *            hang) within SUMCAST_AGG_TIMEOUT
 *   drain    rank 0 runs $HARNESS_FAULT_CMD, which must ask aggregator I to
 *            drain and return at once (`systemctl stop --no-block
 *            sumcastd` in tests/ops/test_systemd.sh: the daemon under
 *            systemd, started elsewhere, --aggs); checked as term
 *   cmd      rank 0 runs $HARNESS_FAULT_CMD (tests/cluster/partition.sh cuts
 *            one node's route to an aggregator, or the aggregator's route to
 *            one node, in the emulated cluster's namespaces); --cut-node R
 *            names that node (a tree needs it: see fault_lines_want); with
 *            --readmit rank 0 runs $HARNESS_FAULT_CMD2 (the cut healed) at
 *            the first count of returns at which every node has logged the
 *            fault, and the aggregator must come back as below
 * With --expect-copies, some node must have copied a result from another
 * (a result that reached only some nodes). With --readmit the aggregator
 * must come back into the running communicator: every 50 collectives
 * (nothing in flight anywhere) the nodes count who logged it back, the run
 * goes on until all have and 200 collectives more (bounded), and the
 * daemon on its port must then hold the communicator's job with chunks
 * reduced (for restart: a process that never saw the job before; daemons
 * started elsewhere, --aggs, are asked through --agg-http, or not at all).
 * A second kind after a comma is a second fault later on (aggregator I + 1).
 *
 * It can fail: before the fault the aggregators must have carried data
 * (trace), after it every node must have logged the fault (once per
 * communicator that had it: fault_lines_want) and the repair must have run
 * where requests were in flight (trace redone_bytes summed over the nodes),
 * the epoch must have moved on, after a kill or a cut the requests this
 * node started once it had agreed must still send bytes to the aggregators
 * left, results must equal the reference on every node and bitwise across
 * nodes. */
#include "harness.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

#include "clock.h"
#include "fabric.h"
#include "../../plugin/tree_plan.h"

#define Q 4                  /* allreduces in flight at once */
#define MAX_BYTES (8u << 20) /* largest allreduce */
#define PIECE (2u << 20)     /* NCCL's proxy cuts requests at this size */
/* A piece of this many bytes per aggregator or more sends its aggregator
 * parts by rendezvous (above rxm's 16 KiB eager limit at any split the
 * fault tests use) */
#define INJECT_MIN_BYTES (256u << 10)

enum fkind { F_NONE, F_KILL, F_IDLE, F_STOP, F_TERM, F_RESTART, F_ALL, F_CONNECT, F_NODE,
	     F_CMD, F_FLAP, F_ROLLING, F_BLIP, F_DRAIN };

struct fault_opts fopt;

static enum fkind kind_of(const char *s, size_t n)
{
	static const char *const names[] = { "", "kill", "idle", "stop", "term", "restart", "all",
					     "connect", "node", "cmd", "flap", "rolling", "blip", "drain" };
	for (int k = 1; k < (int)(sizeof(names) / sizeof(names[0])); k++)
		if (strlen(names[k]) == n && !strncmp(s, names[k], n))
			return (enum fkind)k;
	return F_NONE;
}

int fault_option(const char *kinds)
{
	const char *comma = strchr(kinds, ',');
	size_t n1 = comma ? (size_t)(comma - kinds) : strlen(kinds);

	fopt.k1 = kind_of(kinds, n1);
	fopt.k2 = comma ? kind_of(comma + 1, strlen(comma + 1)) : F_NONE;
	if (fopt.k1 == F_NONE || (comma && fopt.k2 == F_NONE))
		return -1;
	return 0;
}

bool fault_options_ok(void)
{
	bool cmd = fopt.k1 == F_CMD || fopt.k2 == F_CMD;

	if (fopt.cut_node < -1 || fopt.cut_node >= opt.nranks || (fopt.cut_node >= 0 && !cmd))
		return false;
	return !(cmd && tree_on() && fopt.cut_node < 0);
}

/* A fault that kills or stops an aggregator on libfabric 1.x's shm can
 * leave the aggregator's region lock held, and the ranks' next sends spin
 * inside libfabric for good (common/fabric.h, fabric_shm_lock_hazard):
 * that is libfabric's, not a path of Sumcast's to test. NULL where the
 * run can go on. */
const char *fault_skip_why(void)
{
	const char *prov = getenv("SUMCAST_PROVIDER");
	bool graceful = (fopt.k1 == F_TERM || fopt.k1 == F_ROLLING || fopt.k1 == F_CMD ||
			 fopt.k1 == F_DRAIN) &&
			(fopt.k2 == F_NONE || fopt.k2 == F_TERM || fopt.k2 == F_ROLLING || fopt.k2 == F_CMD ||
			 fopt.k2 == F_DRAIN);

	if (!prov || strcmp(prov, "shm") || graceful || !fabric_shm_lock_hazard())
		return NULL;
	return "a killed or stopped aggregator on libfabric 1.x's shm can leave its region's spin lock "
	       "held (common/fabric.h, fabric_shm_lock_hazard); the libfabric 2.6 stage runs this test";
}

/* The fault lines this node must log for `faults` faults. A flat collnet:
 * one each (every node agrees on it). A tree: every inner communicator with
 * a job on the aggregator notices, agrees and repairs on its own and logs
 * its own line (docs/plugin.md, "A tree where fan-in ends"), so a killed
 * aggregator gives one per inner communicator of this node, and a cut
 * route (cmd) one per inner communicator this node shares with the node
 * cut off (--cut-node): all of its own for that node, the group's two for
 * the others of its group, the cross one of a shard it owns for that
 * shard's owner in another group, none for the rest. Other kinds (and two
 * faults) keep one each: a stopped aggregator resumes once rank 0 has
 * recovered, and a communicator that had not noticed by then never does. */
static int fault_lines_want(int faults)
{
	struct tree_shape s;
	struct tree_place me, cut;

	if (!tree_on() || (fopt.k1 != F_KILL && fopt.k1 != F_CMD) || fopt.k2 != F_NONE)
		return faults;
	tree_shape_of((uint32_t)opt.nranks, (uint32_t)opt.fan_in, &s);
	tree_place_of(&s, (uint32_t)my_rank, &me);
	if (fopt.k1 == F_KILL || fopt.cut_node == my_rank)
		return faults * (int)me.ninner;
	tree_place_of(&s, (uint32_t)fopt.cut_node, &cut);
	if (cut.group == me.group)
		return faults * (TREE_X0 - TREE_RS); /* its reduce-scatter and allgather ones */
	int shared = 0;
	for (uint32_t i = TREE_X0; i < me.ninner; i++)
		for (uint32_t k = TREE_X0; k < cut.ninner; k++)
			shared += me.shard[i] == cut.shard[k];
	return faults * shared;
}

bool fault_replaces_daemons(void)
{
	return fopt.k1 == F_ROLLING;
}

/* ---- what one allreduce is: the same on every node ---- */

enum { J_ALLREDUCE, J_RS, J_AG };

struct job {
	uint64_t n; /* which allreduce of the run */
	int coll;   /* J_*: reduce-scatter / allgather of nranks blocks of count x es */
	int t, op;
	size_t count, es;
	uint8_t *gbuf, *obuf; /* windows: the global buffer, this node's block */
	uint64_t salt;
	bool inplace;
	uint8_t *send, *recv;
	size_t pieces, issued, done;
	void *reqs[MAX_BYTES / PIECE + 1];
	bool active;
};

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* Bytes the requests cover: the allreduce, or the windows' global buffer. */
static size_t job_bytes(const struct job *j)
{
	return j->count * j->es * (j->coll == J_ALLREDUCE ? 1 : (size_t)opt.nranks);
}

static void job_pick(struct job *j, uint64_t n)
{
	static const int types[] = { ncclFloat32, ncclBfloat16, ncclFloat64, ncclInt32, ncclUint8,
				     ncclInt64, ncclFloat16 };
	uint64_t s = 0x5eed0000ull + n * 7919;
	(void)lcg(&s);
	j->t = types[lcg(&s) % (sizeof(types) / sizeof(types[0]))];
	j->op = (int)(lcg(&s) % 4);
	j->es = type_size(j->t);
	uint64_t r = lcg(&s) % 100;
	size_t max_elems = MAX_BYTES / j->es;
	j->count = r < 55 ? 1 + lcg(&s) % 4096 : r < 90 ? 1 + lcg(&s) % (256u << 10)
						   : 1 + lcg(&s) % max_elems;
	if (n % 50 == 0)
		j->count = 1; /* one element now and then */
	j->salt = lcg(&s);
	j->inplace = lcg(&s) % 4 == 0;
	j->coll = n % 5 == 2 ? J_RS : n % 5 == 4 ? J_AG : J_ALLREDUCE;
	if (fopt.small_rs) { /* one window: blocks of 32-48 KiB, eager chunks of one owner */
		j->coll = J_RS;
		j->count = ((32u << 10) + lcg(&s) % (16u << 10)) / j->es;
	}
	if (j->coll == J_AG) {
		j->t = ncclUint8;
		j->es = 1;
	}
	if (j->coll != J_ALLREDUCE) /* nranks blocks in MAX_BYTES */
		j->count = 1 + (j->count - 1) % (MAX_BYTES / j->es / (size_t)opt.nranks);
	j->pieces = (job_bytes(j) + PIECE - 1) / PIECE;
	j->issued = j->done = 0;
}

/* Inputs and references repeat every 9 elements (harness_check.c's in_val:
 * (i * 7 + ...) % 9 and (i + rank) % 3): one period is computed, the rest
 * tiled, so checking megabytes on 8 ranks costs memcmp, not 8 x in_val. */
#define PERIOD 9

/* A per-allreduce shift of every input (not for prod): a result of another
 * allreduce of the same type and op lands elsewhere with odds of 1 in 72,
 * not 1 in 9. Sums of 8 ranks stay exact in every type (i8 and bf16 too). */
static int64_t job_shift(const struct job *j)
{
	return j->op == ncclProd ? 0 : (int64_t)((j->salt >> 8) % 8);
}

static void tile(uint8_t *dst, const uint8_t *period, size_t es, size_t count)
{
	size_t pb = PERIOD * es, bytes = count * es;

	for (size_t off = 0; off < bytes; off += pb)
		memcpy(dst + off, period, bytes - off < pb ? bytes - off : pb);
}

/* The first of count elements of buf that is not the period's (element i
 * against the period's i % PERIOD), or count. Compared TILES periods at a
 * time: a memcmp per period (36 bytes of f32) went through ASan's
 * interceptor more often than it compared. */
#define TILES 256
static size_t tile_diff(const uint8_t *buf, const uint8_t *period, size_t es, size_t count)
{
	uint8_t ref[TILES * PERIOD * 8];
	size_t periods = count / PERIOD + 1 < TILES ? count / PERIOD + 1 : TILES;
	size_t rb = periods * PERIOD * es, bytes = count * es, off = 0;

	tile(ref, period, es, periods * PERIOD);
	while (off < bytes && !memcmp(buf + off, ref, bytes - off < rb ? bytes - off : rb))
		off += rb;
	if (off >= bytes)
		return count;
	size_t i = off / es;
	while (!memcmp(buf + i * es, period + (i % PERIOD) * es, es))
		i++;
	return i;
}

/* The reference of job j's allreduce or reduce-scatter result from global
 * element first on, one period of it (element first + q at q): every
 * node's inputs reduced, shifted as job_fill shifted them. */
static void ref_period(const struct job *j, size_t first, uint8_t *period)
{
	int64_t k = job_shift(j);

	for (size_t q = 0; q < PERIOD; q++)
		put(j->t, period, q, ref_val(j->t, j->op, (first + q) % PERIOD + j->salt) +
					     (j->op == ncclSum ? opt.nranks * k : k));
}

/* The allgather's byte at global offset g of job j: a byte from the wrong
 * place or node shows. */
static uint8_t ag_byte(const struct job *j, size_t g)
{
	return (uint8_t)(((g + j->salt) * 0x9E3779B97F4A7C15ull) >> 56);
}

static void window_fill(struct job *j)
{
	size_t bpr = j->count * j->es, total = bpr * (size_t)opt.nranks;
	uint8_t period[PERIOD * 8];

	/* in place: this node's block inside the global buffer (NCCL's layout) */
	j->gbuf = j->coll == J_RS || j->inplace ? j->send : j->recv;
	j->obuf = j->inplace ? j->gbuf + (size_t)my_rank * bpr : j->coll == J_RS ? j->recv : j->send;
	if (j->coll == J_AG) {
		memset(j->gbuf, 0xA5, total + 64);
		for (size_t k = 0; k < bpr; k++)
			j->obuf[k] = ag_byte(j, (size_t)my_rank * bpr + k);
		return;
	}
	for (size_t i = 0; i < PERIOD; i++)
		put(j->t, period, i, in_val(j->t, j->op, my_rank, i + j->salt) + job_shift(j));
	tile(j->gbuf, period, j->es, j->count * (size_t)opt.nranks);
	if (!j->inplace)
		memset(j->obuf, 0xA5, bpr + 64);
}

static void job_fill(struct job *j)
{
	uint8_t period[PERIOD * 8];

	if (j->coll != J_ALLREDUCE) {
		window_fill(j);
		return;
	}

	for (size_t i = 0; i < PERIOD; i++)
		put(j->t, period, i, in_val(j->t, j->op, my_rank, i + j->salt) + job_shift(j));
	tile(j->send, period, j->es, j->count);
	if (!j->inplace)
		memset(j->recv, 0xA5, j->count * j->es + 64);
}

static size_t piece_elems(const struct job *j)
{
	return PIECE / j->es;
}

/* A window job's result: this node's block (reduce-scatter, its global
 * elements' reference) or the whole buffer (allgather), nothing written
 * past it. */
static bool window_check(const struct job *j, uint64_t n, uint64_t *hash)
{
	size_t bpr = j->count * j->es, total = bpr * (size_t)opt.nranks;
	const char *what = j->coll == J_RS ? "reduce-scatter" : "allgather";

	if (j->coll == J_AG) {
		for (size_t g = 0; g < total; g++)
			if (j->gbuf[g] != ag_byte(j, g)) {
				fprintf(stderr, "[rank %d] %s %" PRIu64 " (%zu bytes per node%s): byte %zu "
					"(block %zu) is 0x%02x, want 0x%02x\n", my_rank, what, n, bpr,
					j->inplace ? ", in place" : "", g, g / bpr, j->gbuf[g], ag_byte(j, g));
				return false;
			}
		*hash += fnv(0xcbf29ce484222325ull ^ (n * 0x9E3779B97F4A7C15ull), j->gbuf, total);
	} else {
		/* this node's element i is global element my_rank * count + i */
		uint8_t period[PERIOD * 8];
		ref_period(j, (size_t)my_rank * j->count, period);
		size_t i = tile_diff(j->obuf, period, j->es, j->count);
		if (i < j->count) {
			fprintf(stderr, "[rank %d] %s %" PRIu64 " (%s %s x %zu per node%s): element %zu "
				"of this node's block differs from the reference\n", my_rank, what, n,
				type_name(j->t), op_name(j->op), j->count, j->inplace ? ", in place" : "", i);
			return false;
		}
	}
	const uint8_t *end = j->coll == J_AG ? j->gbuf + total : j->obuf + bpr;
	if (!j->inplace && *end != 0xA5) {
		fprintf(stderr, "[rank %d] %s %" PRIu64 ": wrote past the end\n", my_rank, what, n);
		return false;
	}
	return true;
}

static bool job_check(const struct job *j, uint64_t n, uint64_t *hash)
{
	uint8_t period[PERIOD * 8];
	size_t bytes = j->count * j->es;

	if (j->coll != J_ALLREDUCE)
		return window_check(j, n, hash);

	ref_period(j, 0, period);
	size_t i = tile_diff(j->recv, period, j->es, j->count);
	if (i < j->count) {
		size_t last = i, bad = 0;
		/* Where it is wrong says which repair or shard it was. */
		for (size_t e = i; e < j->count; e++)
			if (memcmp(j->recv + e * j->es, period + (e % PERIOD) * j->es, j->es)) {
				last = e;
				bad++;
			}
		fprintf(stderr, "[rank %d] allreduce %" PRIu64 " (%s %s x %zu%s): element %zu differs from the reference; "
			"%zu element(s) differ, bytes %zu .. %zu (piece %zu, %zu bytes into it)\n",
			my_rank, n, type_name(j->t), op_name(j->op), j->count,
			j->inplace ? ", in place" : "", i, bad, i * j->es, (last + 1) * j->es,
			i * j->es / PIECE, i * j->es % PIECE);
		return false;
	}
	if (!j->inplace && j->recv[bytes] != 0xA5) {
		fprintf(stderr, "[rank %d] allreduce %" PRIu64 ": wrote past the end\n", my_rank, n);
		return false;
	}
	/* Allreduces may complete in another order on another node: a sum of
	 * per-allreduce hashes does not care. */
	*hash += fnv(0xcbf29ce484222325ull ^ (n * 0x9E3779B97F4A7C15ull), j->recv, bytes);
	return true;
}

/* Piece j->issued of job j as NCCL's proxy issues it: allreduce pieces of
 * PIECE bytes, or windows of PIECE bytes of the global buffer whose
 * node-block pointer is advanced only when the window starts in this
 * node's block. */
/* The bytes of the piece job_issue issues next. */
static size_t piece_bytes(const struct job *j)
{
	if (j->coll == J_ALLREDUCE) {
		size_t pe = piece_elems(j), off = j->issued * pe;
		return (j->count - off < pe ? j->count - off : pe) * j->es;
	}
	size_t wo = j->issued * PIECE, total = job_bytes(j);
	return total - wo < PIECE ? total - wo : PIECE;
}

static ncclResult_t job_issue(void *cc, void *mh, struct job *j, void **r)
{
	if (j->coll == J_ALLREDUCE) {
		size_t off = j->issued * piece_elems(j), n = piece_bytes(j) / j->es;
		return c_iallreduce_rc(cc, j->send + off * j->es, j->recv + off * j->es, n, j->t, j->op, mh,
				       r);
	}
	size_t bpr = j->count * j->es, wo = j->issued * PIECE, wb = piece_bytes(j);
	uint8_t *own = j->obuf + (wo / bpr == (size_t)my_rank ? wo % bpr : 0);
	if (j->coll == J_RS)
		return c_ireducescatter_rc(cc, j->gbuf + wo, own, bpr, wo, wb, j->t, j->op, mh, mh, r);
	return c_iallgather_rc(cc, own, j->gbuf + wo, bpr, wo, wb, mh, mh, r);
}

/* ---- the faults ---- */

static int fault_agg(int which)
{
	return (fopt.agg + which) % (opt.naggs ? opt.naggs : 1);
}

static void wait_port_free(int a)
{
	uint64_t end = sc_now_ms() + 10000;

	while (sc_now_ms() < end) {
		if (daemon_port_free(a))
			return;
		usleep(20000);
	}
	REQUIRE(false, "port %u still answers 10 s after SIGKILL", daemon_port(a));
}

static void inject(enum fkind k, int which)
{
	int a = fault_agg(which);

	switch (k) {
	case F_KILL:
	case F_IDLE:
	case F_CONNECT:
		REQUIRE(daemon_signal(a, SIGKILL) == 0, "SIGKILL aggregator %d", a);
		break;
	case F_STOP:
		REQUIRE(daemon_signal(a, SIGSTOP) == 0, "SIGSTOP aggregator %d", a);
		break;
	case F_TERM:
		REQUIRE(daemon_signal(a, SIGTERM) == 0, "SIGTERM aggregator %d", a);
		break;
	case F_ROLLING:
		REQUIRE(daemon_signal(0, SIGTERM) == 0, "SIGTERM aggregator 0");
		break;
	case F_RESTART:
	case F_FLAP:
		REQUIRE(daemon_signal(a, SIGKILL) == 0, "SIGKILL aggregator %d", a);
		wait_port_free(a);
		REQUIRE(daemon_restart(a) == 0, "restarting aggregator %d on port %u", a, daemon_port(a));
		break;
	case F_BLIP: {
		/* the pause ends by itself, whatever the nodes made of it */
		const char *e = getenv("HARNESS_BLIP_MS"), *d = getenv("SUMCAST_AGG_DEADLINE");
		long ms = e && atol(e) > 0 ? atol(e) : (d && atol(d) > 0 ? atol(d) : 2000) + 300;
		pid_t p = fork();
		REQUIRE(p >= 0, "fork");
		if (p == 0) {
			int rc = daemon_signal(a, SIGSTOP);
			usleep((useconds_t)ms * 1000);
			rc |= daemon_signal(a, SIGCONT);
			_exit(rc ? 1 : 0);
		}
		fprintf(stderr, "[rank %d] aggregator %d paused for %ld ms\n", my_rank, a, ms);
		break;
	}
	case F_ALL:
		for (int i = 0; i < opt.naggs; i++)
			REQUIRE(daemon_signal(i, SIGKILL) == 0, "SIGKILL aggregator %d", i);
		break;
	default:
		break;
	}
	fprintf(stderr, "[rank %d] fault %d injected on aggregator %d at %.3f s\n", my_rank, (int)k, a,
		sc_now_s());
}

/* Rank 0's deferred fault (1 + which) injected now; returns 0. */
static int inject_now(int due, bool *roll_waiting)
{
	enum fkind k = due == 2 ? fopt.k2 : fopt.k1;

	inject(k, due - 1);
	*roll_waiting = k == F_ROLLING;
	return 0;
}

/* $HARNESS_FAULT_CMD (or the heal, $HARNESS_FAULT_CMD2), from the rank's
 * network namespace. */
static void run_cmd(const char *var)
{
	const char *cmd = getenv(var);

	REQUIRE(cmd && *cmd, "--fault cmd without %s", var);
	REQUIRE(system(cmd) == 0, "%s failed: %s", var, cmd);
	fprintf(stderr, "[rank %d] ran \"%s\" at %.3f s\n", my_rank, cmd, sc_now_s());
}

/* The sums over all nodes of a few counters, by rendezvous. */
/* Trace rows: agg_bytes before the first fault, redone_bytes, max epoch,
 * rows with an error status. */
struct trace_sum {
	uint64_t rows, agg_before, redone, epoch_max, errors;
	uint64_t win_agg, win_redone; /* reduce-scatter / allgather rows */
	/* rows started after this node's last fault line in a later epoch
	 * (a node behind the others may still start requests of the old one,
	 * which failover repairs), their agg_bytes */
	uint64_t rows_after, agg_after;
};

static void trace_sum(uint64_t fault_seq, struct trace_sum *s)
{
	char path[PATH_MAX + 64];
	FILE *f;
	char line[1024];

	memset(s, 0, sizeof(*s));
	fflush(NULL);
	snprintf(path, sizeof(path), "%s/trace", rv_dir);
	/* <prefix>.<job>.<rank>.jsonl: the one of this rank */
	char cmd[PATH_MAX + 128];
	snprintf(cmd, sizeof(cmd), "cat %s.*.%d.jsonl 2>/dev/null", path, my_rank);
	f = popen(cmd, "r");
	REQUIRE(f, "popen");
	while (fgets(line, sizeof(line), f)) {
		unsigned long long seq = 0, ab = 0, ep = 0, rb = 0, t0 = 0;
		const char *p;
		s->rows++;
		adapt_note(line);
		if ((p = strstr(line, "\"seq\":")))
			seq = strtoull(p + 6, NULL, 10);
		if ((p = strstr(line, "\"agg_bytes\":")))
			ab = strtoull(p + 12, NULL, 10);
		if ((p = strstr(line, "\"epoch\":")))
			ep = strtoull(p + 8, NULL, 10);
		if ((p = strstr(line, "\"redone_bytes\":")))
			rb = strtoull(p + 15, NULL, 10);
		if ((p = strstr(line, "\"start_ns\":")))
			t0 = strtoull(p + 11, NULL, 10);
		if (seq < fault_seq)
			s->agg_before += ab;
		if (saw_fault_last_ns && t0 > saw_fault_last_ns && ep >= 1) {
			s->rows_after++;
			s->agg_after += ab;
		}
		if (!strstr(line, "\"coll\":\"allreduce\"") && !strstr(line, "\"coll\":\"tree\"")) {
			s->win_agg += ab;
			s->win_redone += rb;
		}
		s->redone += rb;
		if (ep > s->epoch_max)
			s->epoch_max = ep;
		if (!strstr(line, "\"status\":\"ok\""))
			s->errors++;
	}
	pclose(f);
}

/* ---- the run ---- */

void run_fault(void)
{
	uint8_t *region = aligned_alloc(4096, (size_t)Q * 2 * (MAX_BYTES + 4096));
	void *mh = NULL;
	uint64_t hash = 0xcbf29ce484222325ull;
	struct job jobs[Q];
	uint64_t ops = fopt.ops, at1 = fopt.at ? fopt.at : ops / 3, at2 = 2 * ops / 3;
	bool victim = fopt.k1 == F_NODE && my_rank == opt.nranks - 1;
	uint64_t t_fault = 0, fault_seq = UINT64_MAX;
	bool stopped = false, got_error = false;
	/* --readmit: the next count of who has it back, how many returns each
	 * node must have logged, the collective they all had, the last count */
	uint64_t ckpt = 0, want_back = 1, all_back_at = 0, backs = 0;
	int flaps = fopt.flaps ? fopt.flaps : 3, flapped = 0;
	int rolled = 0;            /* rolling: aggregators upgraded so far */
	bool roll_waiting = false; /* rank 0: SIGTERM sent, the old one not gone yet */
	/* cmd with --readmit: $HARNESS_FAULT_CMD2 undoes the cut (a partition
	 * that heals), run by rank 0 at the first count at which every node
	 * has logged the fault lines it must; healed: when (0: not yet) */
	bool heal = (fopt.k1 == F_CMD || fopt.k2 == F_CMD) && fopt.readmit;
	uint64_t healed_ns = 0;
	if (fopt.k1 == F_FLAP || fopt.k1 == F_ROLLING || fopt.k1 == F_BLIP)
		fopt.readmit = true;
	/* blip: a node that took the aggregator for failed has it back (or
	 * none did), counted from the second count after the pause */
	bool blip = fopt.k1 == F_BLIP;

	REQUIRE(region, "malloc");
	REQUIRE(!heal || (getenv("HARNESS_FAULT_CMD2") && *getenv("HARNESS_FAULT_CMD2")),
		"--fault cmd --readmit without HARNESS_FAULT_CMD2 (the command that heals the cut)");
	plugin_open(true);
	if (fopt.k1 == F_CONNECT && my_rank == 0)
		inject(F_CONNECT, 0); /* while the others may be joining */
	void *cc = coll_setup(region, (size_t)Q * 2 * (MAX_BYTES + 4096), &mh);
	for (int q = 0; q < Q; q++) {
		jobs[q].send = region + (size_t)q * 2 * (MAX_BYTES + 4096);
		jobs[q].recv = jobs[q].send + MAX_BYTES + 4096;
		jobs[q].active = false;
	}
	uint64_t next = 0, completed = 0, issued_pieces = 0;
	double end = sc_now_s() + opt.timeout_s, last_done = sc_now_s();
	uint64_t completed_seen = 0;
	unsigned nap = 0;
	int inject_due = 0; /* rank 0: fault 1 or 2 waits for a big piece (1 + which) */
	while (completed < ops && !got_error) {
		bool moved = false;
		double now = sc_now_s();
		REQUIRE(now < end, "%" PRIu64 " of %" PRIu64 " allreduces after %d s", completed, ops,
		      opt.timeout_s);
		/* A request that never completes is a hang, said here (with the
		 * plugin's stall warning above it), not by ctest's timeout. */
		if (completed != completed_seen) {
			completed_seen = completed;
			last_done = now;
		}
		REQUIRE(now - last_done < 120, "no allreduce completed for 120 s (%" PRIu64 " of %" PRIu64
		      " done): a request hangs", completed, ops);
		/* faults, from rank 0 (the node fault from its victim) */
		for (int f = 0; f < 2; f++) {
			enum fkind k = f ? fopt.k2 : fopt.k1;
			uint64_t at = f ? at2 : at1;
			if (k == F_NONE || k == F_CONNECT || next < at || (f ? fopt.done2 : fopt.done1))
				continue;
			if (k == F_IDLE || k == F_NODE) {
				/* nothing in flight anywhere: drain, barrier, fault, barrier */
				bool busy = false;
				for (int q = 0; q < Q; q++)
					busy |= jobs[q].active;
				if (busy)
					goto progress;
				rv_barrier(f ? "idle2a" : "idle1a");
				if (k == F_NODE) {
					/* At rest, as libfabric's rxm (1.17 and 2.6) segfaults
					 * a receive that matches a rendezvous message of a
					 * peer whose connection has closed (docs/plugin.md,
					 * "A node that dies"; functional/rxm_dead_rndv). */
					if (victim) {
						fprintf(stderr, "[rank %d] dying at allreduce %" PRIu64 "\n", my_rank,
							next);
						_exit(0); /* no goodbye: sockets close under the others */
					}
				} else {
					if (my_rank == 0)
						inject(k, f);
					rv_barrier(f ? "idle2b" : "idle1b");
				}
			} else if (k == F_CMD || k == F_DRAIN) {
				if (my_rank == 0)
					run_cmd("HARNESS_FAULT_CMD");
			} else if (my_rank == 0) {
				/* Right after rank 0 issues a piece whose aggregator
				 * parts go by rendezvous (below, "progress"): no
				 * aggregator can have reduced it, as its data moves only
				 * when rank 0 next polls, so the fault meets requests to
				 * repair; 50 collectives on without such a piece, then.
				 * The count every node keeps (t_fault, ckpt) starts
				 * here, alike on all. */
				inject_due = f + 1;
			}
			if (f)
				fopt.done2 = true;
			else
				fopt.done1 = true;
			if (!t_fault) {
				t_fault = sc_now_ns();
				fault_seq = issued_pieces; /* trace seqs below this are before it */
				ckpt = next + 50;
			}
		}
		if (inject_due && next >= (inject_due == 1 ? at1 : at2) + 50)
			inject_due = inject_now(inject_due, &roll_waiting);
		/* --readmit: every 50 collectives after the fault, with nothing
		 * in flight anywhere, count the nodes that have it back; go on
		 * until all have, then 200 more (and for flap, kill it again) */
		if (fopt.readmit && t_fault && next >= ckpt && next < ops) {
			bool busy = false;
			for (int q = 0; q < Q; q++)
				busy |= jobs[q].active;
			if (busy)
				goto progress;
			char name[48];
			uint64_t v[2] = { blip ? next >= at1 + 100 && saw_back >= (saw_fault > 0)
					       : (uint64_t)saw_back >= want_back,
					  (uint64_t)(saw_fault >= fault_lines_want(1)) };
			snprintf(name, sizeof(name), "back%" PRIu64, next);
			rv_all_sum(name, v, 2);
			backs = v[0];
			ckpt = next + 50;
			if (heal && !healed_ns && v[1] == (uint64_t)opt.nranks) {
				/* every node has seen the cut and gone on without
				 * the aggregator: heal it (a return before this
				 * would be no return) */
				healed_ns = sc_now_ns();
				if (my_rank == 0) {
					run_cmd("HARNESS_FAULT_CMD2");
					fprintf(stderr, "[rank 0] healed at collective %" PRIu64 ", %.1f s after "
						"the cut\n", next, (healed_ns - t_fault) / 1e9);
				}
			}
			if (backs == (uint64_t)opt.nranks) {
				if (fopt.k1 == F_FLAP && flapped + 1 < flaps) {
					flapped++;
					want_back++;
					if (my_rank == 0)
						inject(F_FLAP, 0);
				} else if (fopt.k1 == F_ROLLING && rolled + 1 < opt.naggs) {
					rolled++;
					want_back++;
					if (my_rank == 0) {
						REQUIRE(daemon_signal(rolled, SIGTERM) == 0, "SIGTERM aggregator %d", rolled);
						fprintf(stderr, "[rank 0] upgrading aggregator %d at %.3f s\n", rolled,
							sc_now_s());
						roll_waiting = true;
					}
				} else if (!all_back_at) {
					all_back_at = next;
					fprintf(stderr, "[rank %d] every node has aggregator %d back at collective %"
						PRIu64 " (%.1f s after the first fault)\n", my_rank, fault_agg(0), next,
						(sc_now_ns() - t_fault) / 1e9);
				}
			}
			if (!all_back_at && next + 50 >= ops && ops < 20 * fopt.ops)
				ops += 50;
			else if (all_back_at && ops < all_back_at + 200)
				ops = all_back_at + 200;
		}
		/* rolling: the drained daemon has exited: its successor */
		if (roll_waiting && daemon_port_free(rolled)) {
			REQUIRE(daemon_restart(rolled) == 0, "restarting aggregator %d", rolled);
			fprintf(stderr, "[rank 0] aggregator %d restarted at %.3f s\n", rolled, sc_now_s());
			roll_waiting = false;
		}
		/* SIGSTOP's end: once this node recovered, and a while later */
		if ((fopt.k1 == F_STOP || fopt.k2 == F_STOP) && my_rank == 0 && !stopped && saw_fault &&
		    next > at1 + 40) {
			int a = fault_agg(fopt.k1 == F_STOP ? 0 : 1);
			REQUIRE(daemon_signal(a, SIGCONT) == 0, "SIGCONT aggregator %d", a);
			fprintf(stderr, "[rank 0] aggregator %d resumed\n", a);
			stopped = true;
		}
		/* start a new allreduce where there is room */
		for (int q = 0; q < Q && next < ops; q++) {
			if (jobs[q].active)
				continue;
			job_pick(&jobs[q], next);
			if (jobs[q].inplace)
				jobs[q].send = jobs[q].recv;
			else
				jobs[q].send = jobs[q].recv - (MAX_BYTES + 4096);
			job_fill(&jobs[q]);
			jobs[q].active = true;
			jobs[q].n = next++;
			break; /* one per pass: faults land between issues */
		}
progress:
		/* Issue in one order on every node (NCCL's guarantee): all pieces
		 * of allreduce n before any of n + 1, at most 8 outstanding. */
		{
			struct job *first = NULL;
			size_t outstanding = 0;
			for (int q = 0; q < Q; q++) {
				struct job *j = &jobs[q];
				if (!j->active)
					continue;
				outstanding += j->issued - j->done;
				if (j->issued < j->pieces && (!first || j->n < first->n))
					first = j;
			}
			if (first && outstanding < 8) {
				struct job *j = first;
				void *r = NULL;
				size_t pb = piece_bytes(j);
				ncclResult_t rc = job_issue(cc, mh, j, &r);
				if (rc != ncclSuccess) {
					got_error = true;
					fprintf(stderr, "[rank %d] issuing piece %zu of job %" PRIu64 " (kind %d) "
						"returned %d\n", my_rank, j->issued, j->n, j->coll, (int)rc);
				} else if (r) {
					j->reqs[j->issued++] = r;
					issued_pieces++;
					moved = true;
					if (inject_due && pb >= INJECT_MIN_BYTES * (size_t)opt.naggs)
						inject_due = inject_now(inject_due, &roll_waiting);
				}
			}
		}
		for (int q = 0; q < Q && !got_error; q++) {
			struct job *j = &jobs[q];
			if (!j->active)
				continue;
			while (j->done < j->issued) {
				int size = -1, done = 0;
				ncclResult_t rc = c_test_rc(j->reqs[j->done], &done, &size);
				if (rc != ncclSuccess) {
					got_error = true;
					fprintf(stderr, "[rank %d] test returned %d after %.1f s\n", my_rank, (int)rc,
						t_fault ? (sc_now_ns() - t_fault) / 1e9 : 0.0);
					break;
				}
				if (!done)
					break;
				j->done++;
				moved = true;
			}
			if (got_error)
				break;
			if (j->done == j->pieces) {
				REQUIRE(job_check(j, j->n, &hash), "allreduce %" PRIu64 " is wrong", j->n);
				j->active = false;
				completed++;
			}
		}
		harness_idle(&nap, moved);
	}
	if (fopt.k1 == F_NODE) {
		/* The survivors must have been told, not left waiting. */
		REQUIRE(got_error, "a node died and this node's requests did not fail");
		double waited = (sc_now_ns() - t_fault) / 1e9;
		fprintf(stderr, "[rank %d] error %.1f s after the node died\n", my_rank, waited);
		NCHECK(CN_CALL(closeColl, cc));
		free(region);
		return;
	}
	REQUIRE(!got_error, "an aggregator fault reached NCCL as an error");
	if (fopt.k1 == F_KILL && fopt.k2 == F_NONE && !fopt.readmit && !tree_on()) {
		/* the failover's new epoch told the tuner: one aggregator fewer */
		int aggs = tuner_live_aggs();
		REQUIRE(aggs == opt.naggs - 1, "after aggregator %d was killed the tuner costs CollNet "
			"with %d aggregators, want %d", fault_agg(0), aggs, opt.naggs - 1);
		if (my_rank == 0)
			printf("fault: the tuner costs CollNet with the aggregators left: %d\n", aggs);
	}
	if (fopt.readmit) {
		REQUIRE(!heal || healed_ns, "the cut was never healed: at no count had every node logged "
			"the fault (this node logged %d, wants %d)", saw_fault, fault_lines_want(1));
		REQUIRE(all_back_at, "not every node took aggregator %d back within %" PRIu64 " collectives "
			"(%d nodes had it back %" PRIu64 " time(s) at the last count; this node logged %d)",
			fault_agg(0), ops, (int)backs, want_back, saw_back);
		if (heal) {
			/* cut off, it cannot have come back before the heal
			 * (healed_ns: the count at which rank 0 ran it, before
			 * the command) */
			double after = saw_back_t - healed_ns / 1e9;
			REQUIRE(healed_ns && after >= 0, "aggregator %d was back %.3f s before the cut was "
				"healed", fault_agg(0), -after);
			fprintf(stderr, "[rank %d] took aggregator %d back %.2f s after the heal\n", my_rank,
				fault_agg(0), after);
		}
		/* The daemon on its port serves this communicator's job again
		 * (rolling: every one of them). */
		if (my_rank == 0 && !tree_on() && opt.aggs && !opt.agg_http)
			fprintf(stderr, "[rank 0] not checked that the daemon holds the job again: its "
				"daemons were started elsewhere (--aggs) and --agg-http is not given\n");
		for (int i = 0; my_rank == 0 && !tree_on() && !(opt.aggs && !opt.agg_http) &&
				i < opt.naggs; i++) {
			int a = fopt.k1 == F_ROLLING ? i : fault_agg(0);
			struct agg_jobs aj;
			unsigned long long id = saw_job_id;
			REQUIRE(daemon_jobs(a, &id, 1, &aj) == 0, "aggregator %d's /stats", a);
			/* the job the nodes joined again (a fresh one, chunks
			 * from 0: daemon.md, JOIN flag rejoin), not the one of
			 * before the fault still held by a daemon that lived on */
			REQUIRE(aj.held == 1 && aj.rejoined == (blip ? saw_fault > 0 : 1) && aj.min_chunks > 0,
				"aggregator %d holds %d job(s) 0x%llx with every rank joined (%d joined again), "
				"%" PRIu64 " chunks reduced: it did not serve the running communicator after it "
				"came back", a, aj.held, id, aj.rejoined, aj.min_chunks);
			fprintf(stderr, "[rank 0] aggregator %d came back into job 0x%llx: %" PRIu64 " chunks "
				"reduced for it since\n", a, id, aj.min_chunks);
			if (fopt.k1 != F_ROLLING)
				break;
		}
		if (my_rank == 0 && fopt.k1 == F_ROLLING && opt.mc >= 0) {
			/* every daemon is a successor: the results went to their
			 * groups too */
			uint64_t res = 0, nacks = 0;
			REQUIRE(daemons_mc(&res, &nacks) == 0 && res > 0, "the upgraded aggregators sent %"
				PRIu64 " results to multicast groups", res);
			fprintf(stderr, "[rank 0] multicast: the upgraded aggregators sent %" PRIu64 " results "
				"to groups, took %" PRIu64 " NACKs\n", res, nacks);
		}
		if (fopt.k1 == F_FLAP) {
			/* it failed again soon after each return: each wait at least
			 * the one before, the last one longer than the first */
			REQUIRE(saw_nholds >= flaps, "%d fault lines named a wait, want %d", saw_nholds, flaps);
			for (int i = 1; i < saw_nholds; i++)
				REQUIRE(saw_holds[i] >= saw_holds[i - 1], "wait %d (%.1f s) is shorter than the one "
					"before (%.1f s)", i, saw_holds[i], saw_holds[i - 1]);
			REQUIRE(saw_holds[saw_nholds - 1] >= 2 * saw_holds[0], "the last wait %.1f s is not "
				"twice the first %.1f s: a flapping aggregator is not kept out longer",
				saw_holds[saw_nholds - 1], saw_holds[0]);
		}
	}
	/* Close at once, as NCCL's teardown does: a node done before another
	 * may still be needed by it (agreement, copies), which the plugin's
	 * close must serve, not this harness's rendezvous. */
	NCHECK(CN_CALL(deregMr, cc, mh));
	NCHECK(CN_CALL(closeColl, cc));
	/* Bitwise equal on every node. */
	int other = rv_first_differing("hash", hash);
	REQUIRE(other < 0, "results of rank %d differ bitwise from ours", other);

	/* The fault was seen, agreed and repaired: counters, not only sums. */
	int faults = (fopt.k1 != F_NONE) + (fopt.k2 != F_NONE);
	if (fopt.k1 == F_FLAP)
		faults = flaps;
	bool drains = fopt.k1 == F_ROLLING || fopt.k1 == F_TERM || fopt.k1 == F_DRAIN;
	if (drains || blip)
		faults = 0; /* no fault: a drain (a blip: one or none, below) */
	if (fopt.k1 == F_ALL)
		faults = opt.naggs;
	int want = fault_lines_want(faults);
	struct trace_sum ts;
	trace_sum(fault_seq, &ts);
	uint64_t v[9] = { (uint64_t)saw_fault, ts.agg_before, ts.redone, ts.epoch_max, ts.errors,
			  saw_copied, ts.win_redone, saw_kept, saw_passed };
	fprintf(stderr, "[rank %d] trace: %" PRIu64 " rows, %" PRIu64 " bytes through the aggregators before the fault, "
		"%" PRIu64 " bytes repaired (%" PRIu64 " of windows), epoch %" PRIu64 "; %d fault lines "
		"(want %d); %" PRIu64 " window bytes through the aggregators; after the last fault line "
		"%" PRIu64 " rows of a later epoch, %" PRIu64 " bytes through the aggregators\n", my_rank, ts.rows,
		ts.agg_before, ts.redone, ts.win_redone, ts.epoch_max, saw_fault, want, ts.win_agg,
		ts.rows_after, ts.agg_after);
	REQUIRE(ts.errors == 0, "the trace lists %" PRIu64 " failed requests", ts.errors);
	adapt_check();
	bool fixed = opt.split && strcmp(opt.split, "auto") && atof(opt.split) > 0; /* and above 0 */
	/* A fixed split sends every window to the aggregators (split_window_agg);
	 * a tree's communicator sends its own windows over its ring. */
	if (fixed && !tree_on())
		REQUIRE(ts.win_agg > 0, "no reduce-scatter or allgather window went through the aggregators");
	if (fopt.k1 != F_CONNECT) {
		/* At least the injected ones; on a loaded host an aggregator may
		 * also abort the job by its own rank timeout (a rank starved past
		 * SUMCAST_AGG_TIMEOUT), which is one more fault, survived too. */
		REQUIRE(saw_fault >= want, "this node logged %d aggregator faults, want %d", saw_fault, want);
		REQUIRE(ts.agg_before > 0, "the aggregators carried nothing before the fault");
		/* (a fault among the last Q collectives may leave none for it;
		 * a tree's node that shares no communicator with a cut node
		 * stays in epoch 0) */
		if (at1 + Q < ops && (want > 0 || drains))
			REQUIRE(ts.epoch_max >= 1, "no request ran in a later epoch");
		/* After a kill or a cut at a fixed split, the requests this node
		 * started in a later epoch once its last communicator had agreed
		 * still reach the aggregators: the ones left, the only ones a
		 * later epoch has (on a tree, a communicator without the fault
		 * keeps both). */
		bool left = opt.naggs > faults && fopt.k1 != F_ALL && fixed;
		if ((fopt.k1 == F_KILL || fopt.k1 == F_CMD) && left && at1 + Q < ops && want > 0)
			REQUIRE(ts.agg_after > 0, "%" PRIu64 " requests of a later epoch started after this "
				"node's last fault line, none sent a byte to the aggregators left", ts.rows_after);
	}
	rv_all_sum("counters", v, 9);
	/* Requests are in flight at the aggregators when the fault comes,
	 * except that the adaptive split may have moved every byte to the ring
	 * by then (on a loaded host it does: the aggregators are slow), which
	 * leaves nothing to repair. */
	bool adaptive = opt.split && !strcmp(opt.split, "auto");
	if (fopt.k1 != F_IDLE && fopt.k1 != F_CONNECT && !drains && !blip && !adaptive)
		REQUIRE(v[2] > 0, "no node repaired anything although requests were in flight");
	/* a blip: every node agreed on one view (all logged it, or none) */
	if (blip) {
		uint64_t logged = saw_fault > 0;
		rv_all_sum("blip", &logged, 1);
		REQUIRE(logged == 0 || logged == (uint64_t)opt.nranks, "%" PRIu64 " of %d nodes logged the "
			"paused aggregator as failed", logged, opt.nranks);
		if (my_rank == 0)
			fprintf(stderr, "[rank 0] blip: %s\n", logged ? "every node took it for failed and back"
									: "no node took it for failed");
	}
	if (drains) {
		/* a planned drain costs capacity only */
		REQUIRE(saw_drain >= (fopt.k1 == F_ROLLING ? opt.naggs : 1), "this node logged %d drain(s), "
			"want %d", saw_drain, fopt.k1 == F_ROLLING ? opt.naggs : 1);
		REQUIRE(v[0] == 0, "%" PRIu64 " fault lines over the nodes during a drain, want 0", v[0]);
		REQUIRE(v[2] == 0 && v[5] == 0, "a drain repaired %" PRIu64 " bytes (%" PRIu64
			" copied from a node), want 0", v[2], v[5]);
	}
	if (fopt.copies)
		REQUIRE(v[5] > 0, "no node copied a result from another");
	/* A reduce-scatter chunk its owner lacks after the others' requests
	 * completed: recomputed from what they kept. */
	if (fopt.kept)
		REQUIRE(v[7] > 0, "no node redid a window chunk from what it kept after its request completed");
	if (my_rank == 0)
		printf("fault: %d nodes, %d aggregators, %" PRIu64 " collectives (%s) right on every node; "
		       "%" PRIu64 " bytes repaired over all nodes, "
		       "%" PRIu64 " of them copied from a node, %" PRIu64 " of windows; window chunks: %"
		       PRIu64 " redone from kept contributions, %" PRIu64 " copies passed on\n",
		       opt.nranks, opt.naggs, completed,
		       fopt.small_rs ? "reduce-scatter windows" : "2 in 5 reduce-scatter / allgather windows",
		       v[2], v[5], v[6], v[7], v[8]);

	if (fopt.k1 == F_RESTART) {
		/* The next communicator uses every aggregator again. */
		coll_rv_name = "coll2";
		saw_naggs = -1;
		cc = coll_setup(region, (size_t)Q * 2 * (MAX_BYTES + 4096), &mh);
		REQUIRE(saw_naggs == opt.naggs, "the next communicator connected %d aggregators, want %d",
		      saw_naggs, opt.naggs);
		struct job *j = &jobs[0];
		job_pick(j, 7);
		j->coll = J_ALLREDUCE;
		j->count = 100000;
		j->t = ncclFloat32;
		j->es = 4;
		j->op = ncclSum;
		j->inplace = false;
		j->send = j->recv - (MAX_BYTES + 4096);
		job_fill(j);
		allreduce_chunked(cc, j->send, j->recv, j->count, j->t, j->op, mh);
		REQUIRE(job_check(j, 0, &hash), "the next communicator's allreduce is wrong");
		NCHECK(CN_CALL(deregMr, cc, mh));
		NCHECK(CN_CALL(closeColl, cc));
	}
	plugin_finalize(true);
	free(region);
}
