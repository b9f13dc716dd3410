/* How much of an allreduce goes to the aggregators.
 *
 * Bandwidth model (docs/plugin.md, DESIGN.md): with a the aggregator share,
 * a node's link carries a + (1-a)*2(N-1)/N of the data, an aggregator
 * carries a*N/M. Time is the slower of the two; the best a makes them equal,
 * or is 1 when the aggregators are not the bottleneck even at a = 1.
 * Latency rule: below small_bytes the whole message takes the path with
 * fewer hops (aggregators: 2, ring: 2(N-1)). */
#ifndef SUMCAST_PLUGIN_SPLIT_H
#define SUMCAST_PLUGIN_SPLIT_H

#include <stddef.h>
#include <stdint.h>

struct split_model {
	double fixed;       /* < 0: auto; else the fraction in [0, 1] */
	double link_gbps;   /* node link */
	double agg_gbps;    /* one aggregator's link */
	uint32_t nranks, naggs;
	uint64_t small_bytes;
};

/* "auto" -> -1, "0.25" -> 0.25. 0 or -EINVAL. */
int split_parse(const char *s, double *out);
/* Bandwidth-optimal fraction (no latency rule). */
double split_model_fraction(const struct split_model *m);
/* Fraction for one message of `bytes` (latency rule included). */
double split_fraction(const struct split_model *m, size_t bytes);
/* Elements for the aggregators: count * frac, rounded down to 64 bytes
 * (count itself when frac >= 1). */
size_t split_count(double frac, size_t count, size_t elem_size);

#endif
