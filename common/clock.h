/* The one clock of the project (daemon, client library, plugin, tools,
 * tests, benches): CLOCK_MONOTONIC for every interval and deadline (it
 * never jumps with the wall clock), in ns, ms or seconds; and the wall
 * clock, only for timestamps that something outside reads (a Prometheus
 * start time, a benchmark's sample times), never to measure. */
#ifndef SUMCAST_CLOCK_H
#define SUMCAST_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t sc_now_ms(void)
{
	return sc_now_ns() / 1000000ull;
}

static inline double sc_now_s(void)
{
	return (double)sc_now_ns() / 1e9;
}

/* Seconds since the Unix epoch (CLOCK_REALTIME). */
static inline double sc_wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
