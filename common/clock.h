/* The one monotonic clock of the project (daemon, client library, plugin,
 * tools, tests, benches). CLOCK_MONOTONIC: never jumps with the wall clock. */
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

#endif
