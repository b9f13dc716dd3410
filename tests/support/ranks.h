/* Rank processes, one way for every test and benchmark that runs a job's
 * ranks (tests/functional/test_allreduce.c, tests/ops/sc_jobgen.c, the
 * plugin harness's tests/plugin/harness_ranks.c, bench/ingest.c): one
 * forked child per rank, optionally killed with its parent; reaped with
 * the files libfabric's shm provider leaves in /dev/shm swept; waited for
 * with a bound; the ones left killed. */
#ifndef SC_TEST_RANKS_H
#define SC_TEST_RANKS_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#define SC_RANKS_MAX 256

struct sc_ranks {
	int n;
	pid_t pid[SC_RANKS_MAX]; /* 0 once reaped */
	int status[SC_RANKS_MAX]; /* its wait status, once reaped */
};

/* Forks n ranks (stdout flushed first, so nothing buffered is written
 * twice). Rank r runs fn(r, arg) and exits with what it returns, stdout
 * flushed. With pdeathsig a rank is SIGKILLed when the parent dies (ctest
 * killing a test on its timeout leaves no rank behind). 0, or -errno with
 * the ranks already started killed. */
int sc_ranks_start(struct sc_ranks *rs, int n, int (*fn)(int rank, void *arg), void *arg,
		   bool pdeathsig);

/* Waits for the ranks to exit, calling on_exit (may be NULL) for each as
 * it is reaped. It stops when all have exited (0), when one exited other
 * than 0 and stop_on_fail (1), after timeout_ms (0: no bound; -ETIMEDOUT)
 * or once *stop is set (may be NULL; -EINTR). Ranks still running stay so:
 * sc_ranks_kill ends them. */
int sc_ranks_wait(struct sc_ranks *rs, unsigned timeout_ms, bool stop_on_fail,
		  volatile sig_atomic_t *stop, void (*on_exit)(int rank, int status, void *arg),
		  void *arg);

/* SIGKILLs the ranks still running and reaps them. */
void sc_ranks_kill(struct sc_ranks *rs);

/* Ranks still running. */
int sc_ranks_left(const struct sc_ranks *rs);

#endif
