/* What fabric.c does for libfabric's shm provider alone (fabric.h): the
 * regions a killed process left, and the two warnings its defects call for. */
#include "fabric_shm.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

int fabric_shm_sweep(pid_t pid)
{
	char prefix[32];
	size_t n = (size_t)snprintf(prefix, sizeof(prefix), "%d:", (int)pid);
	DIR *dir = pid > 0 ? opendir("/dev/shm") : NULL;
	struct dirent *e;
	int removed = 0;

	if (!dir)
		return 0;
	while ((e = readdir(dir)))
		if (!strncmp(e->d_name, prefix, n) && !unlinkat(dirfd(dir), e->d_name, 0))
			removed++;
	closedir(dir);
	return removed;
}

/* Before this process's first shm endpoint: no live process can own a
 * region named after our own pid (fabric.h), so those are a dead one's. A
 * thread that opens an endpoint while another sweeps waits for the sweep
 * (it would otherwise remove the new region); a forked child, another
 * pid, sweeps again. */
static void shm_sweep_own(void)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static pid_t swept;
	pid_t me = getpid();

	pthread_mutex_lock(&mu);
	if (swept != me) {
		int n = fabric_shm_sweep(me);
		if (n)
			SC_INFO("shm: removed %d region(s) /dev/shm/%d:* that a killed process with "
				"this pid left (a restart in the same pid namespace)", n, (int)me);
		swept = me;
	}
	pthread_mutex_unlock(&mu);
}

bool fabric_shm_lock_hazard(void)
{
	return FI_MAJOR(fi_version()) < 2;
}

static void shm_lock_warn(void)
{
	static int warned;
	unsigned v = fi_version();

	if (!fabric_shm_lock_hazard() || __atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return;
	SC_WARN("libfabric %u.%u's shm: a peer killed (SIGKILL, the OOM killer, a crash) while its "
		"progress holds its region's spin lock leaves the lock held, and every later send to "
		"it spins inside libfabric: a dead aggregator can hang its ranks, a dead rank its "
		"aggregator. Where processes may die so, use tcp, or libfabric 2.x (docs/client.md, "
		"\"libfabric versions\")",
		FI_MAJOR(v), FI_MINOR(v));
}

void fabric_shm_opened(void)
{
	shm_sweep_own();
	shm_lock_warn();
}

/* An shm peer in this process on libfabric 2.5 or later (fabric.h): said
 * once, as the segfault it leads to names no cause. */
void fabric_shm_peer_warn(const struct fabric *f, const void *addr, size_t len)
{
	static int warned;
	const char *s = addr, *p;
	char *end;

	if (strcmp(f->prov_name, "shm") || fi_version() < FI_VERSION(2, 5) ||
	    (len == f->addrlen && !memcmp(addr, f->addr, len)) || !memchr(addr, '\0', len))
		return;
	p = strstr(s, "://");
	p = p ? p + 3 : s;
	long pid = strtol(p, &end, 10);
	if (end == p || *end != ':' || pid != (long)getpid() || __atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return;
	unsigned v = fi_version();
	SC_WARN("shm peer %s is an endpoint of this process: libfabric %u.%u's shm cannot carry "
		"messages above its inject size (4 KiB) between two endpoints of one process "
		"(the receiver's progress segfaults); aggregators and ranks must be processes of their own",
		s, FI_MAJOR(v), FI_MINOR(v));
}
