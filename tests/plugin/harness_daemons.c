/* The aggregators of a run: sumcastd on 127.0.0.1 with free ports
 * (tests/support/sumcastd_proc.h), stopped when the run ends. */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hostport.h"
#include "proc.h"
#include "sumcastd_proc.h"

static struct sc_daemon daemons[MAX_AGGS];
static int ndaemons;
static char *daemons_extra; /* the config text every daemon got, for restarts */

void daemons_stop(void)
{
	sc_daemons_stop(daemons, (size_t)ndaemons, SIGTERM, 3000);
	ndaemons = 0;
	free(daemons_extra);
	daemons_extra = NULL;
}

static struct sc_daemon_opts daemon_opts(const char *name, const char *extra, uint16_t port)
{
	return (struct sc_daemon_opts){
		.binary = opt.daemon,
		/* the ranks' provider (harness_main sets tcp unless told) */
		.provider = getenv("SUMCAST_PROVIDER") && *getenv("SUMCAST_PROVIDER")
				    ? getenv("SUMCAST_PROVIDER") : "tcp",
		.node = "127.0.0.1",
		.extra = extra,
		.dir = rv_dir,
		.name = name,
		.log = !opt.verbose,
		.timeout_ms = 15000,
		.control_port = port,
		.pdeathsig = true,
	};
}

int daemon_signal(int i, int sig)
{
	if (i < 0 || i >= ndaemons || daemons[i].pid <= 0)
		return -1;
	return kill(daemons[i].pid, sig);
}

uint16_t daemon_port(int i)
{
	return i >= 0 && i < ndaemons ? daemons[i].ctl : 0;
}

/* A new sumcastd on aggregator i's control port (the old one is gone). In
 * the calling process: it dies with it. */
bool daemon_port_free(int i)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(daemon_port(i)) };

	if (fd < 0)
		return false;
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return rc != 0;
}

int daemon_restart(int i)
{
	char name[32];
	struct sc_daemon d;

	if (i < 0 || i >= ndaemons)
		return -1;
	snprintf(name, sizeof(name), "agg%d-restarted", i);
	struct sc_daemon_opts o = daemon_opts(name, daemons_extra, daemons[i].ctl);
	if (sc_daemon_start(&d, &o))
		return -1;
	daemons[i] = d;
	return 0;
}


/* Starts M sumcastd on 127.0.0.1 with free ports; returns "host:port,...". */
int daemons_start(char *aggs, size_t len)
{
	if (!opt.daemon || !*opt.daemon || access(opt.daemon, X_OK)) {
		fprintf(stderr, "SKIP: sumcastd not built (%s)\n", opt.daemon && *opt.daemon ? opt.daemon : "no path");
		return SKIP;
	}
	/* HARNESS_DAEMON_CONF: extra lines for the daemons, e.g.
	 * "[data]\nidle-spin = 1000" (\n as two characters) */
	const char *env = getenv("HARNESS_DAEMON_CONF");
	size_t cap = PATH_MAX + 64 + (env ? strlen(env) + 2 : 0), n = 0;
	char *extra = malloc(cap);
	REQUIRE(extra, "malloc");
	if (opt.key)
		n += (size_t)snprintf(extra, cap, "[auth]\nkey-file = %s/daemon.key\n", rv_dir);
	if (opt.mc >= 0 && harness_mc_ib()) /* the InfiniBand transport on the verbs double */
		n += (size_t)snprintf(extra + n, cap - n, "[fabric]\nmulticast = ib\nmulticast-iface = %s\n"
				      "[control]\nlisten = %s\n[auth]\nallow-anonymous = true\n", harness_mc_ib(),
				      harness_mc_ib());
	else if (opt.mc >= 0) /* every daemon on the same group range: isolation by job key */
		n += (size_t)snprintf(extra + n, cap - n, "[fabric]\nmulticast = ip\n");
	for (const char *e = env; e && *e && n < cap - 2; e++) {
		if (e[0] == '\\' && e[1] == 'n') {
			extra[n++] = '\n';
			e++;
		} else {
			extra[n++] = *e;
		}
	}
	if (env)
		extra[n++] = '\n';
	extra[n] = 0;
	/* HARNESS_DAEMON0_CONF: lines for aggregator 0 only, after those
	 * (e.g. "[job]\nmax-inflight = 1M": two aggregators that grant the job
	 * different windows and chunks) */
	const char *env0 = getenv("HARNESS_DAEMON0_CONF");
	char *extra0 = NULL;
	if (env0 && *env0) {
		size_t cap0 = n + strlen(env0) + 2, n0 = n;
		extra0 = malloc(cap0);
		REQUIRE(extra0, "malloc");
		memcpy(extra0, extra, n);
		for (const char *e = env0; *e && n0 < cap0 - 2; e++) {
			if (e[0] == '\\' && e[1] == 'n') {
				extra0[n0++] = '\n';
				e++;
			} else {
				extra0[n0++] = *e;
			}
		}
		extra0[n0++] = '\n';
		extra0[n0] = 0;
	}
	aggs[0] = 0;
	for (int i = 0; i < opt.naggs; i++) {
		char name[32];
		snprintf(name, sizeof(name), "agg%d", i);
		struct sc_daemon_opts o = daemon_opts(name, i == 0 && extra0 ? extra0 : extra, 0);
		o.pdeathsig = false;
		struct sc_daemon *d = &daemons[ndaemons++];
		int rc = sc_daemon_start(d, &o);
		if (rc == SC_DAEMON_EXITED && *d->log) {
			char cmd[PATH_MAX + 64];
			snprintf(cmd, sizeof(cmd), "cat %s >&2", d->log);
			(void)!system(cmd);
		}
		if (rc) {
			free(extra);
			free(extra0);
			return 1;
		}
		snprintf(aggs + strlen(aggs), len - strlen(aggs), "%s%s:%u", i ? "," : "",
			 opt.mc >= 0 && harness_mc_ib() ? harness_mc_ib() : "127.0.0.1", d->ctl);
	}
	free(extra0); /* a restarted aggregator 0 gets the common lines */
	daemons_extra = extra;
	return 0;
}

/* The first "key":<unsigned> in [p, end); false when absent. */
static bool json_u64(const char *p, const char *end, const char *key, unsigned long long *v)
{
	size_t kl = strlen(key);

	for (const char *q = p; (q = strstr(q, key)) && q < end; q += kl)
		if (q[kl] == ':')
			return sscanf(q + kl + 1, "%llu", v) == 1;
	return false;
}

/* Daemon d's /stats, fetched into body (cap bytes): each job's object
 * [p, end) handed to each(), which returns false when the job lacks a
 * field it reads. 0, or -1 when the daemon did not answer or a job was
 * short of a field. */
static int stats_jobs_at(const char *host, uint16_t port, char *body, size_t cap,
			 bool (*each)(const char *p, const char *end, void *arg), void *arg)
{
	if (sc_http_get_at(host, port, "/stats", NULL, 0, body, cap, 10000) != 200)
		return -1;
	const char *p = strstr(body, "\"jobs\":[");
	if (!p)
		return -1;
	while ((p = strstr(p, "{\"id\":\"0x"))) {
		const char *next = strstr(p + 1, "{\"id\":\"0x"), *end = next ? next : p + strlen(p);
		if (!each(p, end, arg))
			return -1;
		p = end;
	}
	return 0;
}

static int stats_jobs(const struct sc_daemon *d, char *body, size_t cap,
		      bool (*each)(const char *p, const char *end, void *arg), void *arg)
{
	return stats_jobs_at("127.0.0.1", d->http, body, cap, each, arg);
}

/* One daemon's view for daemons_view: the jobs of opt.nranks ranks,
 * whether every rank has joined, and the DATA bytes it counted from rank. */
struct view_one {
	int rank, jobs, joined;
	uint64_t bytes;
};

static bool view_one_job(const char *p, const char *end, void *arg)
{
	struct view_one *o = arg;
	unsigned long long nranks = 0, acked = 0, b = 0;

	if (!json_u64(p, end, "\"nranks\"", &nranks) || !json_u64(p, end, "\"joined\"", &acked))
		return false;
	if (nranks != (unsigned long long)opt.nranks)
		return true;
	char key[32];
	const char *r = strstr(p, "\"ranks\":[");
	snprintf(key, sizeof(key), "{\"rank\":%d,", o->rank);
	r = r && r < end ? strstr(r, key) : NULL;
	if (!r || r >= end || !json_u64(r, end, "\"bytes\"", &b))
		return false;
	o->jobs++;
	o->joined += acked == nranks;
	o->bytes += b;
	return true;
}

static bool tree_view_job(const char *p, const char *end, void *arg)
{
	struct tree_view *v = arg;
	unsigned long long nranks = 0, acked = 0, b = 0;

	if (!json_u64(p, end, "\"nranks\"", &nranks) || !json_u64(p, end, "\"joined\"", &acked) ||
	    !json_u64(p, end, "\"bytes_in\"", &b))
		return false;
	v->jobs++;
	v->joined_all += acked == nranks;
	v->idle += b == 0;
	v->max_nranks = nranks > v->max_nranks ? (uint32_t)nranks : v->max_nranks;
	v->sum_nranks += nranks;
	v->bytes += b;
	return true;
}

int daemons_tree_view(struct tree_view *v)
{
	static char body[1 << 18];

	memset(v, 0, sizeof(*v));
	v->ndaemons = ndaemons;
	for (int i = 0; i < ndaemons; i++)
		if (stats_jobs(&daemons[i], body, sizeof(body), tree_view_job, v))
			return -1;
	return 0;
}

int daemons_log_count(const char *s)
{
	int n = 0;
	char line[1024];

	for (int i = 0; i < ndaemons; i++) {
		FILE *f = *daemons[i].log ? fopen(daemons[i].log, "r") : NULL;
		bool has = false;
		while (f && !has && fgets(line, sizeof(line), f))
			has = strstr(line, s) != NULL;
		if (f)
			fclose(f);
		n += has;
	}
	return n;
}

int daemons_mc(uint64_t *results, uint64_t *nacks)
{
	static char body[1 << 16];

	int answered = 0;

	*results = *nacks = 0;
	for (int i = 0; i < ndaemons; i++) {
		/* a killed or stopped one does not answer */
		if (!daemons[i].pid ||
		    sc_http_get(daemons[i].http, "/metrics", NULL, 0, body, sizeof(body), 2000) != 200)
			continue;
		answered++;
		double r = sc_metric_value(body, "sumcast_multicast_results_total");
		double k = sc_metric_value(body, "sumcast_multicast_nacks_total");
		*results += r > 0 ? (uint64_t)r : 0;
		*nacks += k > 0 ? (uint64_t)k : 0;
	}
	return answered ? 0 : -1;
}

int daemons_view(int rank, struct agg_view *v)
{
	memset(v, 0, sizeof(*v));
	v->ndaemons = ndaemons;
	for (int i = 0; i < ndaemons; i++) {
		static char body[1 << 18];
		struct view_one o = { .rank = rank };
		if (stats_jobs(&daemons[i], body, sizeof(body), view_one_job, &o))
			return -1;
		v->bytes[i] = o.bytes;
		v->jobs += o.jobs;
		v->holding += o.jobs == 1 && o.joined == 1;
	}
	return 0;
}

int daemons_count(void)
{
	return ndaemons;
}

struct jobs_of {
	const unsigned long long *ids;
	int n;
	struct agg_jobs *out;
};

static bool jobs_of_job(const char *p, const char *end, void *arg)
{
	struct jobs_of *j = arg;
	struct agg_jobs *out = j->out;
	unsigned long long id = 0, nranks = 0, acked = 0, window = 0, chunks = 0, in = 0, mem = 0;

	if (sscanf(p, "{\"id\":\"0x%llx\"", &id) != 1 || !json_u64(p, end, "\"nranks\"", &nranks) ||
	    !json_u64(p, end, "\"joined\"", &acked) || !json_u64(p, end, "\"window\"", &window) ||
	    !json_u64(p, end, "\"chunks\"", &chunks) || !json_u64(p, end, "\"bytes_in\"", &in) ||
	    !json_u64(p, end, "\"memory\"", &mem))
		return false;
	out->posted_recvs += window * nranks; /* one receive per (slot, rank) */
	out->memory += mem;
	const char *st = strstr(p, "\"state\":\"ready\"");
	bool ready = st && st < end; /* not one that ended and still holds memory */
	const char *rj = strstr(p, "\"rejoined\":true");
	for (int k = 0; k < j->n; k++)
		if (j->ids[k] == id && acked == nranks && ready) {
			out->held++;
			out->rejoined += rj && rj < end;
			out->bytes_in += in;
			if (chunks < out->min_chunks)
				out->min_chunks = chunks;
		}
	return true;
}

int daemon_jobs(int i, const unsigned long long *ids, int n, struct agg_jobs *out)
{
	static char body[1 << 20];
	struct jobs_of j = { ids, n, out };

	memset(out, 0, sizeof(*out));
	out->min_chunks = UINT64_MAX;
	if (opt.aggs) {
		/* daemons someone else started (--aggs): through the HTTP
		 * addresses --agg-http gives, in the same order; no RSS */
		struct hostport hp[MAX_AGGS];
		size_t n_hp = 0;
		char why[160];
		if (!opt.agg_http ||
		    hostport_list_parse(opt.agg_http, hp, MAX_AGGS, &n_hp, why, sizeof(why)) ||
		    i < 0 || (size_t)i >= n_hp)
			return -1;
		if (stats_jobs_at(hp[i].host, hp[i].port, body, sizeof(body), jobs_of_job, &j))
			return -1;
	} else {
		if (i < 0 || i >= ndaemons || daemons[i].pid <= 0)
			return -1;
		if (stats_jobs(&daemons[i], body, sizeof(body), jobs_of_job, &j))
			return -1;
		long long rss = sc_proc_status(daemons[i].pid, "VmRSS");
		out->rss_kb = rss > 0 ? (uint64_t)rss : 0;
	}
	if (!out->held)
		out->min_chunks = 0;
	return 0;
}
