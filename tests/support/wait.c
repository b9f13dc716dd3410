/* Bounded waits for events (wait.h). */
#include "wait.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

unsigned th_slow_factor(void)
{
	return getenv("SC_TEST_DAEMON_WRAPPER") ? 10 : 1;
}

void th_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

void th_nap(unsigned *nap, bool moved)
{
	if (moved) {
		*nap = 0;
		return;
	}
	*nap = *nap ? (*nap < 500 ? *nap * 2 : 1000) : 16;
	struct timespec ts = { 0, (long)*nap * 1000 };
	nanosleep(&ts, NULL);
}

bool th_wait_until(bool (*done)(void *arg), void *arg, unsigned timeout_ms, unsigned poll_ms)
{
	uint64_t end = sc_now_ms() + (uint64_t)timeout_ms * th_slow_factor();

	for (;;) {
		if (done(arg))
			return true;
		if (sc_now_ms() >= end)
			return false;
		th_sleep_ms(poll_ms);
	}
}
