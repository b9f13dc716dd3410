/* The rank processes: the parent forks one per node and waits for them
 * (bounded); each enters its network namespace on the emulated cluster.
 * Files in a temp dir stand in for NCCL's bootstrap (rendezvous). */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "ranks.h"
#include "sumcastd_proc.h"

#include "clock.h"

int my_rank = -1, my_head, my_proc = -1;
char rv_dir[PATH_MAX];
static int run_gen; /* names of one set of ranks never meet the next set's */

/* ---------------- rendezvous (stands in for NCCL's bootstrap) ---------------- */

void rv_path(char *out, size_t len, const char *name, int head, int rank)
{
	snprintf(out, len, "%s/%d.%d.%s.%d", rv_dir, run_gen, head, name, rank);
}

void rv_put(const char *name, int rank, const void *buf, size_t len)
{
	char p[PATH_MAX + 64], t[PATH_MAX + 80];
	rv_path(p, sizeof(p), name, my_head, rank);
	snprintf(t, sizeof(t), "%s.tmp", p);
	FILE *f = fopen(t, "wb");
	REQUIRE(f && fwrite(buf, 1, len, f) == len, "rv_put %s: %s", t, strerror(errno));
	fclose(f);
	REQUIRE(rename(t, p) == 0, "rename %s", p);
}

/* Waits for a rendezvous file: polls from 100 us up to every 20 ms (up to
 * 256 processes wait at once on 2 cores: a fixed 1 ms poll each would
 * take the cores from the ones they wait for). */
static void rv_get_path(const char *p, void *buf, size_t len)
{
	double end = sc_now_s() + (opt.timeout_s > 60 ? opt.timeout_s : 60);
	useconds_t nap = 100;
	for (;;) {
		FILE *f = fopen(p, "rb");
		if (f) {
			size_t n = fread(buf, 1, len, f);
			fclose(f);
			REQUIRE(n == len, "rv_get %s: %zu of %zu bytes", p, n, len);
			return;
		}
		REQUIRE(sc_now_s() < end, "rendezvous: %s did not appear in time", p);
		usleep(nap);
		nap = nap < 10000 ? nap * 2 : 20000;
	}
}

void rv_get(const char *name, int rank, void *buf, size_t len)
{
	char p[PATH_MAX + 64];
	rv_path(p, sizeof(p), name, my_head, rank);
	rv_get_path(p, buf, len);
}

void rv_barrier_all(const char *name, double hold_s)
{
	char p[PATH_MAX + 64], b = 1;
	int nproc = opt.nranks * opt.heads, head = my_head;

	my_head = -1; /* names of every process */
	rv_put(name, my_proc, &b, 1);
	if (my_proc == 0) {
		for (int q = 0; q < nproc; q++) {
			rv_path(p, sizeof(p), name, -1, q);
			rv_get_path(p, &b, 1);
		}
		if (hold_s > 0)
			usleep((useconds_t)(hold_s * 1e6));
		char go[64];
		snprintf(go, sizeof(go), "%s.go", name);
		rv_put(go, 0, &b, 1);
	} else {
		char go[64];
		snprintf(go, sizeof(go), "%s.go", name);
		rv_path(p, sizeof(p), go, -1, 0);
		rv_get_path(p, &b, 1);
	}
	my_head = head;
}

void rv_all_sum(const char *name, uint64_t *v, size_t n)
{
	uint64_t o[16];

	REQUIRE(n <= 16, "rv_all_sum %s: %zu values, at most 16", name, n);
	rv_put(name, my_rank, v, n * sizeof(*v));
	memset(v, 0, n * sizeof(*v));
	for (int r = 0; r < opt.nranks; r++) {
		rv_get(name, r, o, n * sizeof(*v));
		for (size_t i = 0; i < n; i++)
			v[i] += o[i];
	}
}

int rv_first_differing(const char *name, uint64_t v)
{
	rv_put(name, my_rank, &v, sizeof(v));
	for (int r = 0; r < opt.nranks; r++) {
		uint64_t o;
		rv_get(name, r, &o, sizeof(o));
		if (o != v)
			return r;
	}
	return -1;
}

void rv_barrier(const char *name)
{
	char b = 1;
	rv_put(name, my_rank, &b, 1);
	for (int r = 0; r < opt.nranks; r++)
		rv_get(name, r, &b, 1);
}

/* ---------------- emulated cluster: one network namespace per rank ---------------- */

/* The n-th entry of a comma list, or -1. */
static int list_nth(const char *list, int n, char *out, size_t len)
{
	for (int i = 0; list && *list; i++) {
		size_t l = strcspn(list, ",");
		if (i == n) {
			if (!l || l >= len)
				return -1;
			memcpy(out, list, l);
			out[l] = 0;
			return 0;
		}
		list += l;
		if (*list == ',')
			list++;
	}
	return -1;
}

/* Rank r, just forked (one thread, nothing of the plugin or libfabric open
 * yet): enters namespace r of SUMCAST_HARNESS_NETNS and binds to address r
 * of SUMCAST_HARNESS_IFACES. The rendezvous files stay reachable: namespaces
 * share the filesystem (the harness uses no Unix sockets, whose abstract
 * names would be per namespace). */
static void enter_netns(int r)
{
	const char *ns = getenv("SUMCAST_HARNESS_NETNS"), *ifs = getenv("SUMCAST_HARNESS_IFACES");
	char name[256], path[PATH_MAX];

	if (ns && *ns) {
		REQUIRE(list_nth(ns, r, name, sizeof(name)) == 0,
		      "SUMCAST_HARNESS_NETNS=%s has no entry for rank %d", ns, r);
		snprintf(path, sizeof(path), strchr(name, '/') ? "%s" : "/run/netns/%s", name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		REQUIRE(fd >= 0, "open %s: %s", path, strerror(errno));
		REQUIRE(setns(fd, CLONE_NEWNET) == 0, "setns %s: %s", path, strerror(errno));
		close(fd);
	}
	if (ifs && *ifs) {
		REQUIRE(list_nth(ifs, r, name, sizeof(name)) == 0,
		      "SUMCAST_HARNESS_IFACES=%s has no entry for rank %d", ifs, r);
		setenv("SUMCAST_IFACE", name, 1);
	}
}

/* Rank r, just forked: SUMCAST_HARNESS_AGGREGATORS="LIST0|LIST1|..." gives
 * node r its own SUMCAST_AGGREGATORS (entry r; an empty or missing entry
 * leaves the run's), so nodes can list their aggregators differently (other
 * orders, other spellings, other sets) as misconfigured nodes would, and
 * the test can check they all use rank 0's (tests/plugin/dns_aggs.sh). */
static void node_aggregators(int r)
{
	const char *l = getenv("SUMCAST_HARNESS_AGGREGATORS");
	char v[1024];

	for (int i = 0; l && *l; i++) {
		size_t n = strcspn(l, "|");
		if (i == r) {
			if (n && n < sizeof(v)) {
				memcpy(v, l, n);
				v[n] = 0;
				setenv("SUMCAST_AGGREGATORS", v, 1);
			}
			return;
		}
		l += n;
		if (*l == '|')
			l++;
	}
}

/* tx/rx byte counters of SUMCAST_HARNESS_NETDEV in this process's namespace
 * (/proc/self/net/dev follows setns; /sys/class/net would show the namespace
 * sysfs was mounted in). False when unset or not found. */
bool netdev_bytes(uint64_t *tx, uint64_t *rx)
{
	static int fd = -2;
	const char *dev = getenv("SUMCAST_HARNESS_NETDEV");
	char buf[8192];

	if (!dev || !*dev)
		return false;
	if (fd == -2)
		fd = open("/proc/self/net/dev", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	size_t dl = strlen(dev);
	for (char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		while (*l == ' ')
			l++;
		if (!strncmp(l, dev, dl) && l[dl] == ':') {
			unsigned long long v[9];
			if (sscanf(l + dl + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
				   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) != 9)
				return false;
			*rx = v[0];
			*tx = v[8];
			return true;
		}
	}
	return false;
}

/* ---------------- the rank processes ---------------- */

void rm_dir(void)
{
	DIR *d = opendir(rv_dir);
	struct dirent *e;
	char p[PATH_MAX + 300];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", rv_dir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(rv_dir);
}


/* SIGTERM/SIGINT in the parent: stop the ranks and daemons, remove the
 * rendezvous dir, exit 128 + signal (bench/cluster/run stops us so). */
volatile sig_atomic_t stop_sig;
void on_stop(int sig)
{
	stop_sig = sig;
}

/* Rank r, just forked: its name in FAIL lines, default signals, its
 * namespace, then the mode. */
static int rank_run(int p, void *arg)
{
	void (*fn)(void) = *(void (**)(void))arg;

	my_proc = p;
	my_rank = p % opt.nranks;
	my_head = p / opt.nranks;
	if (opt.heads > 1)
		snprintf(th_who, sizeof(th_who), "[head %d rank %d] ", my_head, my_rank);
	else
		snprintf(th_who, sizeof(th_who), "[rank %d] ", my_rank);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	enter_netns(my_rank); /* one namespace per node, its heads share it */
	node_aggregators(my_rank);
	fn();
	return 0;
}

static void rank_exited(int r, int st, void *arg)
{
	int *rc = arg;

	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		if (opt.heads > 1)
			fprintf(stderr, "head %d rank %d failed (status 0x%x)\n", r / opt.nranks,
				r % opt.nranks, st);
		else
			fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
		*rc = *rc ? *rc : WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
}

int run_ranks(void (*fn)(void))
{
	struct sc_ranks rs;
	int rc = 0, w;

	run_gen++;
	if (sc_ranks_start(&rs, opt.nranks * opt.heads, rank_run, &fn, false)) {
		fprintf(stderr, "fork: %s\n", strerror(errno));
		return 1;
	}
	/* the first failure ends the run: the others may wait for it forever */
	w = sc_ranks_wait(&rs, (unsigned)opt.timeout_s * 1000u, true, &stop_sig, rank_exited, &rc);
	if (w == -ETIMEDOUT) {
		fprintf(stderr, "timeout after %d s: killing %d ranks\n", opt.timeout_s, sc_ranks_left(&rs));
		rc = 1;
	} else if (w == -EINTR) {
		fprintf(stderr, "signal %d: stopping %d ranks\n", (int)stop_sig, sc_ranks_left(&rs));
		rc = 128 + stop_sig;
	}
	sc_ranks_kill(&rs);
	return rc;
}
