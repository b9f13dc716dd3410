/* Rank processes (ranks.h). */
#include "ranks.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "sumcastd_proc.h"
#include "wait.h"

int sc_ranks_start(struct sc_ranks *rs, int n, int (*fn)(int rank, void *arg), void *arg,
		   bool pdeathsig)
{
	if (n < 0 || n > SC_RANKS_MAX)
		return -EINVAL;
	memset(rs, 0, sizeof(*rs));
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		pid_t p = fork();
		if (p < 0) {
			int err = -errno;
			sc_ranks_kill(rs);
			return err;
		}
		if (p == 0) {
			if (pdeathsig)
				prctl(PR_SET_PDEATHSIG, SIGKILL);
			int rc = fn(r, arg);
			fflush(stdout);
			_exit(rc);
		}
		rs->pid[r] = p;
		rs->n = r + 1;
	}
	return 0;
}

static void reaped(struct sc_ranks *rs, int r, int st)
{
	sc_shm_sweep(rs->pid[r]);
	rs->pid[r] = 0;
	rs->status[r] = st;
}

int sc_ranks_left(const struct sc_ranks *rs)
{
	int left = 0;

	for (int r = 0; r < rs->n; r++)
		left += rs->pid[r] > 0;
	return left;
}

int sc_ranks_wait(struct sc_ranks *rs, unsigned timeout_ms, bool stop_on_fail,
		  volatile sig_atomic_t *stop, void (*on_exit)(int rank, int status, void *arg),
		  void *arg)
{
	uint64_t end = sc_now_ms() + timeout_ms;
	bool failed = false;

	while (sc_ranks_left(rs)) {
		/* Nothing exited (a peek that reaps nothing): no scan of every
		 * pid, a nap (up to 256 ranks: a waitpid each every 2 ms would
		 * be a busy parent). */
		siginfo_t si = { 0 };
		if (!failed && waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0) {
			if (timeout_ms && sc_now_ms() > end)
				return -ETIMEDOUT;
			if (stop && *stop)
				return -EINTR;
			th_sleep_ms(5);
			continue;
		}
		/* Each rank's own pid: the caller's other children (daemons)
		 * are its to reap. */
		bool any = false;
		for (int r = 0; r < rs->n; r++) {
			int st;
			if (rs->pid[r] <= 0 || waitpid(rs->pid[r], &st, WNOHANG) != rs->pid[r])
				continue;
			reaped(rs, r, st);
			failed |= !WIFEXITED(st) || WEXITSTATUS(st);
			any = true;
			if (on_exit)
				on_exit(r, st, arg);
		}
		if (any)
			continue; /* all that exited, before deciding */
		if (timeout_ms && sc_now_ms() > end)
			return -ETIMEDOUT;
		if (failed && stop_on_fail)
			return 1; /* the others may wait for it forever */
		if (stop && *stop)
			return -EINTR;
		th_sleep_ms(2);
	}
	return failed ? 1 : 0;
}

void sc_ranks_kill(struct sc_ranks *rs)
{
	for (int r = 0; r < rs->n; r++)
		if (rs->pid[r] > 0)
			kill(rs->pid[r], SIGKILL);
	for (int r = 0; r < rs->n; r++)
		if (rs->pid[r] > 0) {
			int st = 0;
			waitpid(rs->pid[r], &st, 0);
			reaped(rs, r, st);
		}
}
