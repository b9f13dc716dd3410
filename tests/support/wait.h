/* Waiting in tests: for an event, never for a fixed time. Every bound is
 * scaled by th_slow_factor(), so the same test runs under a slow wrapper
 * (SC_TEST_DAEMON_WRAPPER: valgrind, rr...) without failing on time. A
 * test that must show that something did not happen waits for a later
 * event that proves the earlier one would have shown by then, not for a
 * pause. The daemon-specific waits (a metric, a log line, VmRSS) are
 * built on th_wait_until (tests/functional/test_daemon_harness.h). */
#ifndef SC_TEST_WAIT_H
#define SC_TEST_WAIT_H

#include <stdbool.h>

/* 10 under SC_TEST_DAEMON_WRAPPER, else 1. */
unsigned th_slow_factor(void);
/* Polls done(arg) every poll_ms until it is true (true) or timeout_ms x
 * th_slow_factor() have passed (false, after one last poll). */
bool th_wait_until(bool (*done)(void *arg), void *arg, unsigned timeout_ms, unsigned poll_ms);
/* A pause between polls or samples; never as synchronisation. */
void th_sleep_ms(unsigned ms);
/* A polling loop's idle step: after a pass that moved something, *nap = 0
 * and no pause; after one that did not, a nap of 16 us doubling to 1 ms
 * while nothing moves. Processes that poll (ranks, clients) then leave
 * the host's cores to the daemons and to each other: spinning ones share
 * them with the work they wait for. */
void th_nap(unsigned *nap, bool moved);

#endif
