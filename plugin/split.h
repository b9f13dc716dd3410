/* How much of an allreduce goes to the aggregators.
 *
 * Bandwidth model (docs/plugin.md, DESIGN.md): with a the aggregator share,
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

/* "auto" -> -1, "0.25" -> 0.25. 0 or -EINVAL. */
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
 * (127.x, ::1, localhost); false for an empty list. */
bool split_hosts_local(const char *aggs);

#endif
