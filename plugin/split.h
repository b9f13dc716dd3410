/* How much of an allreduce goes to the aggregators.
 *
 * Bandwidth model (docs/plugin.md, docs/design.md): with a the aggregator share,
 * a node's link carries a + (1-a)*2(N-1)/N of the data, an aggregator
 * carries a*N/M. Time is the slower of the two.
 *  - a = 1 (aggregators only): one pipeline, node and aggregator links
 *    carry the same flows; time max(1, k), k = N link / (M agg).
 *  - 0 < a < 1: both paths share each node's link. Measured (emulated
 *    cluster, docs/benchmarks.md): the aggregator path then reaches only a
 *    share e (agg_eff) of its links when they are as loaded as the nodes',
 *    because the ring's short-RTT flows take more than their share of
 *    the node uplinks and the aggregator's tail runs alone. So the
 *    interior split balances a*k/e = a + (1-a) r: a_e = r / (k/e + r - 1).
 *  The best a is the faster of those two.
 *
 * split=auto for one message of b bytes (split_fraction):
 *  - b <= small_bytes: the path with fewer hops takes all (aggregators: 2,
 *    ring: 2(N-1); a tie goes to the ring).
 *  - else the cheapest of three estimates, each hop latency + bytes / link:
 *      aggregators only  2 lat        + b * max(1/link, (N/M)/agg)
 *      ring only         2(N-1) lat   + b * (2(N-1)/N)/link
 *      split at a*       2N lat       + b * (a* + (1-a*) 2(N-1)/N)/link
 *    The split pays both paths' fixed latencies (they share the node's
 *    cores and queues, so they are added, not overlapped); it is taken
 *    only when its bandwidth saving outweighs them, i.e. above a size that
 *    grows with lat * link.
 *  - shared_host (every aggregator on this host, e.g. 127.0.0.1): the
 *    "links" are the same few cores copying through the kernel, not
 *    independent wires, so running both paths never beats the cheaper one
 *    (the work is a weighted sum of both); auto picks ring or aggregators,
 *    never a split. */
#ifndef SUMCAST_PLUGIN_SPLIT_H
#define SUMCAST_PLUGIN_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* agg_eff's default: measured on the emulated cluster (tcp, W=4, one
 * aggregator, docs/benchmarks.md): the best fixed split sat at
 * e = 0.83-0.9 of the e = 1 model's. */
#define SPLIT_AGG_EFF_DEFAULT "0.85"

struct split_model {
	double fixed;       /* < 0: auto; else the fraction in [0, 1] */
	double link_gbps;   /* node link */
	double agg_gbps;    /* one aggregator's link */
	double agg_eff;     /* (0, 1]: aggregator path's share of its link in a split; 0: 1 */
	uint32_t nranks, naggs;
	uint64_t small_bytes;
	double lat_us;      /* one hop (provider's figure); 0: bandwidth only */
	bool shared_host;   /* all aggregators on this host: never split */
};

/* "auto" -> SPLIT_AUTO (adaptive), "model" -> SPLIT_MODEL (the model's
 * split, fixed for the communicator's life), "0.25" -> 0.25. 0 or -EINVAL. */
#define SPLIT_AUTO (-1.0)
#define SPLIT_MODEL (-2.0)
int split_parse(const char *s, double *out);
/* Bandwidth-optimal fraction (no latency rule). */
double split_model_fraction(const struct split_model *m);
/* Fraction for one message of `bytes` (the rules above). */
double split_fraction(const struct split_model *m, size_t bytes);
/* Elements for the aggregators: count * frac, rounded down to 64 bytes
 * (count itself when frac >= 1). */
size_t split_count(double frac, size_t count, size_t elem_size);
/* Whether a ReduceScatter (gather false) / AllGather (gather true) window
 * of `bytes` goes to the aggregators (all of it: these two are never
 * split). They carry it owner-only (client.h v1.6): reduce-scatter, every
 * node sends the window, each result returns to its owner; allgather, each
 * part goes up once from its owner and down to the N-1 others. The busiest
 * direction costs per window byte: reduce-scatter 1/link up from a node
 * and (N/M)/agg into an aggregator; allgather (N-1)/N/link down to a node
 * and ((N-1)/M)/agg out of an aggregator; the ring (N-1)/N/link. So the
 * aggregators never win on bandwidth (the ring is already optimal per node
 * link for these two), only on hops (2 against N-1):
 *  - fixed split: 0 -> the ring, anything above 0 -> the aggregators;
 *  - auto: the cheaper of (the ring on a tie, so N <= 3 stays on the ring)
 *      aggregators  2 lat     + b * max(node link, aggregator link)
 *      ring         (N-1) lat + b * ((N-1)/N)/link
 *    i.e. the aggregators up to (N-3) lat / (max(...) - ((N-1)/N)/link)
 *    bytes, from N = 4 on (no small_bytes rule: measured on loopback,
 *    docs/plugin.md)
 *  - never for a window above SPLIT_WINDOW_AGG_MAX (staging memory), nor
 *    without aggregators. docs/plugin.md, "ReduceScatter and AllGather". */
#define SPLIT_WINDOW_AGG_MAX (4u << 20)
bool split_window_agg(const struct split_model *m, size_t bytes, bool gather);
/* true when every host of "host:port,host:port" is a loopback address
 * (hostport_is_loopback); false for an empty list. */
bool split_hosts_local(const char *aggs);


/* ---- the adaptive split (SUMCAST_SPLIT=auto; docs/plugin.md, "Adaptive
 * split") ----
 *
 * Requests of at least 1 << SPLIT_ADAPT_MIN_SHIFT bytes adapt, each size
 * class (a power of two, the last open-ended) on its own, starting from
 * the model's split. They are measured in windows of SPLIT_ADAPT_WINDOW
 * such requests; every node measures each window, the nodes agree on the
 * minimum of every figure (the slowest node bounds each path) and each
 * runs split_adapt_decide on the agreed figures, so all hold the same
 * state: the decision on window n takes effect from window n + 2.
 *
 * Per window and class (split_meas_window): X, the class's bytes over the
 * time any of its requests was in flight; C_agg and C_ring, each path's
 * bytes over the time a part of it was in flight on that path.
 *  - When one path is held up on its own (an aggregator's link or CPU, a
 *    slow ring neighbour), its parts queue and the other's finish early:
 *    C_agg / (C_agg + C_ring), the split at which both would finish
 *    together, differs from the split, and the split steps towards it (at
 *    most SPLIT_ADAPT_MAX_STEP a window, nothing below SPLIT_ADAPT_HYST);
 *    the climb below then goes on that way only (the other way is where
 *    the held-up path was). A window that ran at an earlier split counts
 *    only when its balance lies past the split in use, the way from its
 *    split to this one (a change within the window that made the last
 *    step left that step short).
 *  - When the node links bound both (the paths share them), both paths
 *    are busy all the time and that balance is the split itself: it says
 *    nothing. Then X decides: once steady, the split tries a neighbour
 *    (SPLIT_ADAPT_TRY_STEP away, or the endpoint when that is nearer than
 *    half a step) and keeps it if it measures SPLIT_ADAPT_MARGIN faster,
 *    going on that way at once while that wins, trying the other way when the
 *    first loses (after a kept trial too, unless that one won by twice the
 *    margin: one kept by noise is undone); when both lose it stays (a hill climb on the measured
 *    throughput, which also finds an endpoint that beats every split:
 *    the aggregators alone at A = W). Climbs start at the job's start,
 *    after a balance step of SPLIT_ADAPT_TRY_STEP or more (smaller ones only
 *    follow the balance), and when X moves by SPLIT_ADAPT_MOVED from
 *    where the last climb ended, two windows in a row the same way (the
 *    conditions changed; one window off is a pipeline refilling), and
 *    when the aggregators' tenants change (split_adapt_rearm, up first when
 *    fewer jobs share them, down first when more: another job
 *    came or left, which the daemons report; a job that shares the node
 *    links' limit may see no change of X at its split when one leaves); a steady job
 *    does not try anything, and nothing oscillates. A trial is judged on
 *    the better of two windows that ran at the tried split after a whole
 *    window at it, against the better of the last two at the split it
 *    left (one window can be a pipeline draining and refilling).
 *  - Every aggregator on this host (shared_host): the split is never
 *    interior (see above); the climb tries the other endpoint. */
#define SPLIT_ADAPT_MIN_SHIFT 18u /* 256 KiB */
#define SPLIT_ADAPT_CLASSES 8u
#define SPLIT_ADAPT_WINDOW 8u
#define SPLIT_ADAPT_MIN_N 4u      /* requests of a class in a window to decide on */
#define SPLIT_ADAPT_MAX_STEP 0.25
#define SPLIT_ADAPT_HYST 0.01
#define SPLIT_ADAPT_TRY_STEP 0.1
#define SPLIT_ADAPT_MARGIN 0.02
#define SPLIT_ADAPT_MOVED 0.08
#define SPLIT_ADAPT_STABLE 3u
#define SPLIT_PPM 1000000

/* One class's figures for one window (on one node; then agreed). */
struct split_meas {
	int64_t n;         /* requests */
	int64_t ppm;       /* the split they ran at */
	int64_t x_bps;     /* bytes/s of the class */
	int64_t agg_bps;   /* aggregator path: bytes over its busy time; 0: unused */
	int64_t ring_bps;  /* ring path, likewise */
};
#define SPLIT_MEAS_VALS 5u

struct split_class {
	int32_t ppm;       /* the split in use */
	int32_t ref_ppm;   /* a trial: where it came from */
	int64_t ref_x;     /* a trial: the throughput it must beat */
	int64_t last_meas_ppm;
	int64_t prev_x;    /* the last settled window's X at this split; 0: none */
	int64_t trial_x;   /* a trial: its first settled window's X; 0: none yet */
	int64_t steady_x;  /* the throughput when the last climb step ended, or of the
			    * first settled window after a balance step; 0: none yet */
	uint32_t stable;   /* settled windows since the last change */
	uint8_t trial;     /* a trial is running: 1 a step, 2 a hinted rearm's two steps,
			    * 3 one step after two lost (the step beyond is lost if it wins) */
	bool armed;        /* climbing */
	int8_t dir;        /* the way the last kept trial went: -1, +1; 0 none */
	int8_t first;      /* a rearm's hint: the way a climb tries first when dir is 0
			    * (+1 up, -1 down; 0: none, down first), judged without a
			    * margin until it loses */
	bool hinted;       /* that hint's first trial not tried yet: it goes at the class's
			    * first window after the hint, two SPLIT_ADAPT_TRY_STEPs */
	bool fine;         /* the hinted jump was kept: this climb goes on in half steps */
	uint8_t lost;      /* bit 0: the way down lost, bit 1: up */
	uint8_t moved;     /* settled windows in a row off steady_x the same way */
	int8_t moved_sign;
};

struct split_adapt {
	struct split_class c[SPLIT_ADAPT_CLASSES];
	bool ends_only; /* shared_host: never a split, the climb goes 0 <-> 1 */
};

/* The class of a request of `bytes`, or -1 (too small: the model decides). */
int split_adapt_class(size_t bytes);
/* Every class at the model's split for its size (m: auto). */
void split_adapt_init(struct split_adapt *sa, const struct split_model *m);
/* Every class climbs again (the aggregators' tenants changed: what the
 * last climb found may no longer hold), trying `first` first: +1 (fewer
 * tenants: more of the aggregators for this job) up, -1 (more) down, 0
 * down (the ring's way, as at the start). Called before the
 * split_adapt_decide of the window that brought the news. With a way (+1,
 * -1) the first trial goes at the class's first window from then, settled
 * or not (a step just made would hold it off two windows more: the
 * tenant's first 64 MiB sample then ran at the old split whole), without
 * waiting to be steady, its reference that window's throughput, two
 * SPLIT_ADAPT_TRY_STEPs that way (a tenant more or less moves the
 * best split further than a step; a balance step of a trial's size or
 * more goes first), and one step that way at once should two lose; once
 * the two steps are kept the climb goes on in half steps (the optimum is
 * about there: a whole step past it cost ~10 % for a trial's five
 * windows, a 64 MiB sample below 0.95 of the best). A trial that way is
 * kept when it is no slower (the change says the
 * optimum moved that way); once that way loses, trials need
 * SPLIT_ADAPT_MARGIN as usual. */
void split_adapt_rearm(struct split_adapt *sa, int first);
/* One window's agreed figures, meas[class]. Returns the classes whose
 * split changed (or whose trial ended) as a bit mask; why[class] says why
 * (for the log). Each class is a state machine (split.c: STEADY, CLIMBING,
 * HINTED, TRIAL; the events and transitions are listed there). */
unsigned split_adapt_decide(struct split_adapt *sa, const struct split_meas *meas,
			    char why[][96]);

/* A request's times for split_meas_window (ns; t_agg / t_ring 0 when the
 * request has no such part). */
struct split_rec {
	uint64_t t0, t_agg, t_ring, t_end;
	uint64_t bytes, agg_bytes;
	int32_t ppm;
	int8_t cls;
};
/* The latest completion, overall and on each path, of a class's requests
 * measured so far. */
struct split_ends {
	uint64_t end, agg, ring;
};
/* The figures of one class from a window's requests in issue order. Time
 * counts from the previous window's last completion on (ends, updated):
 * with requests issued as others complete (NCCL's sliding window of 8),
 * a window's first requests were issued during the previous window, whose
 * completions are not this window's work. Gaps with nothing in flight
 * do not count. */
void split_meas_window(const struct split_rec *rec, size_t n, int cls, struct split_ends *ends,
		       struct split_meas *out);

#endif
