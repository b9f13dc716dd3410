/* NCCL's side of the plugin in an acceptance run (host.h). */
#include "host.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"

#define HOST_PIECE (2u << 20) /* NCCL's proxy: requests of at most this */
#define HOST_INFLIGHT 8       /* NCCL_STEPS */
#define HOST_MODES 3


/* ---- NCCL's logger, one per instance ---- */

static struct host *hosts[HOST_MODES];

/* dst = src, cut to HOST_LINE (a log line kept for the verdict). */
static void keep(char dst[HOST_LINE], const char *src)
{
	size_t n = strlen(src);

	if (n >= HOST_LINE)
		n = HOST_LINE - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

static void note(struct host *h, ncclDebugLogLevel level, const char *line)
{
	const char *p;

	if (h->verbose || level <= NCCL_LOG_WARN)
		fprintf(stderr, "[%s] %s %s\n", h->mode, level <= NCCL_LOG_WARN ? "WARN" : "INFO", line);
	if (level <= NCCL_LOG_WARN) {
		if (!h->warns++)
			keep(h->first_warn, line);
		if (strstr(line, " failed (") && strstr(line, "aggregator"))
			h->faults++;
	}
	if ((p = strstr(line, "collnet job 0x")) && strstr(p, ": rank ") && strstr(p, " of ") &&
	    !strstr(p, "closed") && !h->connect_line[0]) {
		keep(h->connect_line, p);
		const char *q = strstr(p, " aggregators (");
		if (q && strstr(p, "+ ring")) {
			while (q > p && q[-1] >= '0' && q[-1] <= '9')
				q--;
			h->naggs = atoi(q);
			h->agg_path = 1;
		}
	}
	/* the close summaries: allreduces, then the windows */
	double x, y, z, w;
	if ((p = strstr(line, " closed: ")) && (p = strstr(p, "(aggregators ")) &&
	    sscanf(p, "(aggregators %lf GB at %*f GB/s, ring %lf GB", &x, &y) == 2) {
		keep(h->closed, line);
		h->agg_gb += x;
		h->ring_gb += y;
	}
	if ((p = strstr(line, " reduce-scatters (")) &&
	    sscanf(p, " reduce-scatters (%lf GB of windows at %*f GB/s, %lf GB through the aggregators)", &x,
		   &y) == 2 &&
	    (p = strstr(p, " allgathers (")) &&
	    sscanf(p, " allgathers (%lf GB at %*f GB/s, %lf GB through the aggregators)", &z, &w) == 2) {
		h->agg_gb += y + w;
		h->ring_gb += x - y + z - w;
	}
}

static void logv(int i, ncclDebugLogLevel level, const char *fmt, va_list ap)
{
	char line[2048];

	vsnprintf(line, sizeof(line), fmt, ap);
	if (hosts[i])
		note(hosts[i], level, line);
}

#define LOGGER(i)                                                                             \
	static void host_log##i(ncclDebugLogLevel level, unsigned long flags, const char *file, int l,     \
			   const char *fmt, ...)                                                  \
	{                                                                                     \
		va_list ap;                                                                   \
		(void)flags, (void)file, (void)l;                                             \
		va_start(ap, fmt);                                                            \
		logv(i, level, fmt, ap);                                                      \
		va_end(ap);                                                                   \
	}
LOGGER(0)
LOGGER(1)
LOGGER(2)
static const ncclDebugLogger_t loggers[HOST_MODES] = { host_log0, host_log1, host_log2 };

/* ---- loading ---- */

int host_find(const char *path, char *out, size_t len, char *err, size_t errlen)
{
	char name[PATH_MAX];
	const char *env = getenv("NCCL_NET_PLUGIN");

	if (path && *path)
		snprintf(name, sizeof(name), "%s", path);
	else if (env && strchr(env, '/'))
		snprintf(name, sizeof(name), "%s", env);
	else
		snprintf(name, sizeof(name), "libnccl-net-%s.so", env && *env ? env : "sumcast");
	/* where the dynamic loader finds it, as NCCL's dlopen would */
	void *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	struct link_map *lm = NULL;
	if (!dl) {
		say(err, errlen, "cannot load the plugin %s: %s (install the sumcast package, or give --plugin "
				 "PATH or NCCL_NET_PLUGIN)", name, dlerror());
		return -1;
	}
	if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name || !*lm->l_name ||
	    !realpath(lm->l_name, out)) {
		say(err, errlen, "the plugin %s: cannot tell which file it is", name);
		dlclose(dl);
		return -1;
	}
	(void)len;
	dlclose(dl);
	return 0;
}

static int copy_file(const char *from, const char *to)
{
	char buf[1 << 16];
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
	if (out < 0)
		goto done;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			goto done;
	rc = n == 0 ? 0 : -1;
done:
	if (out >= 0 && close(out))
		rc = -1;
	close(in);
	return rc;
}

/* Sets name to value (NULL: unsets it) and keeps what it was in *old. */
static void env_swap(const char *name, const char *value, char **old)
{
	const char *v = getenv(name);

	*old = v ? strdup(v) : NULL;
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

static void env_restore(const char *name, char *old)
{
	if (old)
		setenv(name, old, 1);
	else
		unsetenv(name);
	free(old);
}

int host_open(struct host *h, const char *lib, const char *dir, const char *mode, bool aggregators,
	      const char *split, bool verbose, char *err, size_t errlen)
{
	char copy[PATH_MAX + 64];
	int i;

	for (i = 0; i < HOST_MODES && hosts[i]; i++)
		;
	if (i == HOST_MODES) {
		say(err, errlen, "at most %d modes", HOST_MODES);
		return -1;
	}
	memset(h, 0, sizeof(*h));
	h->mode = mode;
	h->verbose = verbose;
	snprintf(copy, sizeof(copy), "%s/libnccl-net-sumcast-%s.so", dir, mode);
	if (copy_file(lib, copy)) {
		say(err, errlen, "copying %s to %s: %s", lib, copy, strerror(errno));
		unlink(copy); /* what was written of it */
		return -1;
	}
	h->dl = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
	/* loaded (or not): the copy is not needed again, and a process killed
	 * from here on (a launcher ending the job) leaves nothing in dir */
	unlink(copy);
	if (!h->dl) {
		say(err, errlen, "dlopen %s: %s", copy, dlerror());
		return -1;
	}
	h->net = dlsym(h->dl, "ncclNetPlugin_v11");
	h->coll = dlsym(h->dl, "ncclCollNetPlugin_v11");
	if (!h->net || !h->coll) {
		say(err, errlen, "%s exports no ncclNetPlugin_v11 / ncclCollNetPlugin_v11: not a plugin NCCL 2.28 "
				 "loads", lib);
		return -1;
	}
	hosts[i] = h;
	char *old_aggs, *old_split;
	env_swap("SUMCAST_AGGREGATORS", aggregators ? getenv("SUMCAST_AGGREGATORS") : NULL, &old_aggs);
	env_swap("SUMCAST_SPLIT", split ? split : getenv("SUMCAST_SPLIT"), &old_split);
	ncclNetCommConfig_t cfg = { -1 };
	ncclResult_t rc = h->net->init(&h->nctx, 0x5c5c, &cfg, loggers[i], NULL);
	if (rc == ncclSuccess)
		rc = h->coll->init(&h->cctx, 0x5c5c, loggers[i]);
	env_restore("SUMCAST_AGGREGATORS", old_aggs);
	env_restore("SUMCAST_SPLIT", old_split);
	if (rc != ncclSuccess) {
		say(err, errlen, "the plugin's init (%s) returned %d: %s", mode, (int)rc,
		    h->first_warn[0] ? h->first_warn : "see its log above");
		return -1;
	}
	int ndev = 0;
	ncclNetProperties_v11_t p;
	if (h->coll->devices(&ndev) != ncclSuccess || ndev < 1 || h->coll->getProperties(0, &p) != ncclSuccess) {
		say(err, errlen, "the plugin's collnet has no device (%s)", h->first_warn[0] ? h->first_warn : "");
		return -1;
	}
	h->speed_mbps = p.speed;
	snprintf(h->dev, sizeof(h->dev), "%s", p.name ? p.name : "?");
	return 0;
}

int host_connect(struct host *h, struct boot *b, int heads, void *region, size_t region_len, char *err,
		 size_t errlen)
{
	uint8_t mine[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL;
	int nodes = b->size / heads, node = b->rank / heads, head = b->rank % heads;

	memset(mine, 0, sizeof(mine));
	if (h->coll->listen(h->cctx, 0, mine, &lc) != ncclSuccess) {
		say(err, errlen, "collnet listen (%s): %s", h->mode, h->first_warn);
		return -1;
	}
	uint8_t *all = malloc((size_t)b->size * sizeof(mine));
	void **handles = malloc(sizeof(void *) * (size_t)nodes);
	if (!all || !handles || boot_allgather(b, mine, sizeof(mine), all)) {
		free(all);
		free(handles);
		say(err, errlen, "exchanging the collnet handles failed");
		return -1;
	}
	/* the communicator of this head: the same head of every node */
	for (int n = 0; n < nodes; n++)
		handles[n] = all + (size_t)(n * heads + head) * sizeof(mine);
	ncclResult_t rc = h->coll->connect(handles, nodes, node, lc, &h->cc);
	free(handles);
	free(all);
	h->coll->closeListen(lc);
	if (rc != ncclSuccess || !h->cc) {
		say(err, errlen, "collnet connect (%s) returned %d: %s", h->mode, (int)rc,
		    h->first_warn[0] ? h->first_warn : "see the plugin's log");
		return -1;
	}
	if (h->coll->regMr(h->cc, region, region_len, NCCL_PTR_HOST, &h->mh) != ncclSuccess) {
		say(err, errlen, "collnet regMr of %zu bytes (%s): %s", region_len, h->mode, h->first_warn);
		return -1;
	}
	return 0;
}

static size_t type_bytes(ncclDataType_t t)
{
	static const size_t s[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2 };
	return (unsigned)t < 10 ? s[t] : 1;
}

/* Issues requests [0, n) of a collective in order, up to HOST_INFLIGHT in
 * flight, the oldest tested; issue(k, &req) makes request k. */
static int run_requests(struct host *h, size_t n, int (*issue)(struct host *, size_t, void *, void **),
			void *arg, double timeout_s, char *err, size_t errlen)
{
	void *reqs[HOST_INFLIGHT];
	size_t issued = 0, done = 0;
	uint64_t last = sc_now_ns();

	while (done < n) {
		bool moved = false;
		if (issued < n && issued - done < HOST_INFLIGHT) {
			void *r = NULL;
			if (issue(h, issued, arg, &r)) {
				say(err, errlen, "request %zu of %zu (%s): the plugin returned an error: %s", issued, n,
				    h->mode, h->first_warn);
				return -1;
			}
			if (r) {
				reqs[issued++ % HOST_INFLIGHT] = r;
				moved = true;
			}
		}
		if (done < issued) {
			int d = 0, size = 0;
			if (h->coll->test(reqs[done % HOST_INFLIGHT], &d, &size) != ncclSuccess) {
				say(err, errlen, "request %zu of %zu (%s) failed: %s", done, n, h->mode,
				    h->first_warn[0] ? h->first_warn : "see the plugin's log");
				return -1;
			}
			if (d) {
				done++;
				moved = true;
			}
		}
		uint64_t now = sc_now_ns();
		if (moved) {
			last = now;
		} else if ((double)(now - last) / 1e9 > timeout_s) {
			say(err, errlen, "no request of this collective completed for %.0f s (%s; %zu of %zu done): "
				"the plugin's stall report above says what it waits for", timeout_s, h->mode, done, n);
			return -1;
		} else {
			sched_yield(); /* NCCL's proxy yields when it finds nothing to do */
		}
	}
	return 0;
}

struct ar_arg {
	char *send, *recv;
	size_t count, per, es;
	ncclDataType_t t;
	ncclRedOp_t op;
};

static int ar_issue(struct host *h, size_t k, void *a, void **req)
{
	struct ar_arg *x = a;
	size_t off = k * x->per, n = x->count - off < x->per ? x->count - off : x->per;

	return h->coll->iallreduce(h->cc, x->send + off * x->es, x->recv + off * x->es, n, x->t, x->op, h->mh, h->mh,
				   req) != ncclSuccess;
}

int host_allreduce(struct host *h, void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
		   double timeout_s, char *err, size_t errlen)
{
	size_t es = type_bytes(t);
	struct ar_arg a = { send, recv, count, HOST_PIECE / es, es, t, op };

	if (!count)
		return 0;
	return run_requests(h, (count + a.per - 1) / a.per, ar_issue, &a, timeout_s, err, errlen);
}

struct win_arg {
	int kind, rank;
	char *send, *recv;
	size_t bpr, total, w;
	ncclDataType_t t;
	ncclRedOp_t op;
};

static int win_issue(struct host *h, size_t k, void *a, void **req)
{
	struct win_arg *x = a;
	size_t wo = k * x->w, wb = x->total - wo < x->w ? x->total - wo : x->w;
	/* NCCL's pointer rule: this rank's block pointer moves by the offset
	 * only when the window starts in its block */
	size_t adv = wo / x->bpr == (size_t)x->rank ? wo % x->bpr : 0;

	if (x->kind == 2) {
		ncclNetSGE_t p = { h->mh, x->recv + wo, wb };
		return h->coll->iallgather(h->cc, x->send + adv, 1, &p, x->bpr, wo, wb, h->mh, req) != ncclSuccess;
	}
	ncclNetSGE_t p = { h->mh, x->send + wo, wb };
	return h->coll->ireducescatter(h->cc, 1, &p, x->recv + adv, x->bpr, wo, wb, x->t, x->op, h->mh, req) !=
	       ncclSuccess;
}

int host_window(struct host *h, int kind, void *send, void *recv, size_t bpr, int nranks, int rank,
		ncclDataType_t t, ncclRedOp_t op, double timeout_s, char *err, size_t errlen)
{
	size_t es = kind == 2 ? 1 : type_bytes(t);
	struct win_arg a = { kind, rank, send, recv, bpr, bpr * (size_t)nranks, HOST_PIECE / es * es, t, op };

	if (!a.total)
		return 0;
	return run_requests(h, (a.total + a.w - 1) / a.w, win_issue, &a, timeout_s, err, errlen);
}

void host_close(struct host *h)
{
	if (h->cc) {
		if (h->mh)
			h->coll->deregMr(h->cc, h->mh);
		h->coll->closeColl(h->cc);
		h->cc = NULL;
	}
	if (h->cctx)
		h->coll->finalize(h->cctx);
	if (h->nctx)
		h->net->finalize(h->nctx);
	h->cctx = h->nctx = NULL;
	/* the library stays loaded: its threads may outlive finalize by a
	 * moment, and the process ends soon */
}
