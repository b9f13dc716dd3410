/* The drain (daemon/ctl_main.c): a daemon that is stopped asks the jobs
 * that speak wire version 5 to move off (DRAIN) and serves them until their
 * ranks have left cleanly; jobs with an older rank take the old path
 * (ABORT(shutdown) once nothing is half reduced). Modes (none: all):
 *
 *   http    POST /drain from loopback drains, GET /drain is 405, a
 *           non-loopback peer gets 403; by hand-driven ranks: two v5 jobs
 *           get DRAIN with the drain-timeout, are served on, counted
 *           drained as their ranks LEAVE (sumcast_jobs_drained_total, the
 *           INFO line); a v4 job and a job with one v4 rank get
 *           ABORT(shutdown) and no DRAIN; /stats and /metrics show the drain.
 *   client  three client-library ranks (failover on) over two daemons,
 *           allreduces in flight, SIGTERM to daemon 0: every rank sees the
 *           DRAIN bit, the ranks stop giving daemon 0 new requests at one
 *           request they agree on (here: the test holds them until all have
 *           the bit), retire it once idle; daemon 0 exits 0 with the drained
 *           line and no WARN; no aggregator failed; every result exact.
 *   ctl     the same, drained by `sumcastctl drain --wait` instead of
 *           SIGTERM: it says every job moved off (1 drained) and exits 0;
 *           `sumcastctl status` shows the job left, moving off; and against
 *           a job that stays and one of version 4 ranks it says 0 moved
 *           off, 2 did not, exit 1.
 *   shm     a daemon on shm SIGKILLed with a job running, restarted on the
 *           same port with the same pid (a fresh pid namespace, as in a
 *           container: root), serves a new job (common/fabric.h,
 *           fabric_shm_sweep). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/wait.h>
#include <signal.h>
#include <ifaddrs.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "client.h"
#include "sumcastd_proc.h"
#include "test_daemon_harness.h"

#define CHUNK (64u << 10)
#define WINDOW 4u

/* ---- helpers ---- */

static int post(uint16_t port, const char *host, const char *method, const char *path, char *body,
		size_t cap)
{
	return sc_http_request_at(host, port, method, path, NULL, 0, body, cap, 5000);
}

/* The job's object in /stats has "draining":want. */
static bool stats_job_draining(const struct sd *d, uint64_t id, bool want)
{
	static char body[1 << 16];
	char key[48];

	if (sd_http(d, "/stats", body, sizeof(body)) != 200)
		return false;
	snprintf(key, sizeof(key), "\"id\":\"0x%llx\"", (unsigned long long)id);
	char *p = strstr(body, key);
	if (!p)
		return false;
	char *next = strstr(p + 1, "\"id\":\"");
	char *f = strstr(p, want ? "\"draining\":true" : "\"draining\":false");
	return f && (!next || f < next);
}

/* Lines after the first one holding `from` that hold `what`. */
static int log_count_after(const char *log, const char *from, const char *what)
{
	FILE *f = fopen(log, "r");
	char line[2048];
	bool on = false;
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!on && strstr(line, from))
			on = true;
		else if (on && strstr(line, what))
			n++;
	}
	fclose(f);
	return n;
}

/* A non-loopback IPv4 address of this host into buf; false if none. */
static bool own_address(char *buf, size_t cap)
{
	struct ifaddrs *ifs, *i;
	bool found = false;

	if (getifaddrs(&ifs))
		return false;
	for (i = ifs; i && !found; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)i->ifa_addr;
			if ((ntohl(in->sin_addr.s_addr) >> 24) != 127)
				found = inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)cap) != NULL;
		}
	freeifaddrs(ifs);
	return found;
}

static int join_ver(struct trank *r, const struct sd *d, uint64_t job, uint32_t rank, uint16_t ver)
{
	if (trank_open(r, 2 * WINDOW * CHUNK))
		return -1;
	r->ver = ver;
	return trank_join(r, d, job, rank, 2, NULL);
}

static int leave(struct trank *r)
{
	struct wire_msg m = { .type = WIRE_LEAVE, .u.leave.job_handle = r->handle };
	return ctl_send(r->fd, &m);
}

/* ---- http: POST /drain, the versions, the counters ---- */

static void mode_http(void)
{
	struct sd d;
	struct trank b[2], c[2], o[2], x[2];
	struct wire_msg m;
	char body[4096], host[64];

	/* 30 s: long enough that nothing here is aborted by the timeout */
	setenv("SUMCASTD_CONTROL_DRAIN_TIMEOUT", "30s", 1);
	int rc = sd_start(&d, "[http]\nlisten = 0.0.0.0\n");
	unsetenv("SUMCASTD_CONTROL_DRAIN_TIMEOUT");
	if (rc)
		th_skip("sumcastd did not start (see above)");
	CHECK(sd_metric(&d, "sumcast_draining") == 0, "sumcast_draining before: %g",
	      sd_metric(&d, "sumcast_draining"));

	/* B, C: the newest version (5 or later); O: version 4; X: rank 0 in the
	 * newest, rank 1 in 4 */
	for (uint32_t r = 0; r < 2; r++) {
		REQUIRE(join_ver(&b[r], &d, 0xb1, r, 0) == 0, "job B rank %u", r);
		REQUIRE(join_ver(&c[r], &d, 0xc1, r, 0) == 0, "job C rank %u", r);
		REQUIRE(join_ver(&o[r], &d, 0x0d, r, 4) == 0, "job O rank %u", r);
		REQUIRE(join_ver(&x[r], &d, 0xe1, r, r ? 4 : 0) == 0, "job X rank %u", r);
	}
	for (uint32_t r = 0; r < 2; r++)
		REQUIRE(trank_ready(&b[r], 3000) == 0 && trank_ready(&c[r], 3000) == 0 &&
				trank_ready(&o[r], 3000) == 0 && trank_ready(&x[r], 3000) == 0,
			"READY rank %u", r);

	/* the methods, and who may drain */
	CHECK(post(d.http, "127.0.0.1", "GET", "/drain", body, sizeof(body)) == 405, "GET /drain not 405");
	CHECK(post(d.http, "127.0.0.1", "POST", "/metrics", body, sizeof(body)) == 405,
	      "POST /metrics not 405");
	if (own_address(host, sizeof(host))) {
		int st = post(d.http, host, "POST", "/drain", body, sizeof(body));
		CHECK(st == 403 && strstr(body, "loopback"), "POST /drain from %s: %d %s", host, st, body);
	} else
		printf("  (no non-loopback address: the 403 is not tried)\n");
	CHECK(sd_metric(&d, "sumcast_draining") == 0, "a refused POST started the drain");

	int st = post(d.http, "127.0.0.1", "POST", "/drain", body, sizeof(body));
	CHECK(st == 200 && strstr(body, "{\"draining\":true,\"jobs\":2}"), "POST /drain: %d %s", st, body);
	printf("  POST /drain: %d %s", st, body);

	/* B and C: DRAIN in version 5 with the drain-timeout */
	struct trank *v5[4] = { &b[0], &b[1], &c[0], &c[1] };
	for (int i = 0; i < 4; i++) {
		rc = ctl_recv(v5[i]->fd, &m, 5000);
		CHECK(rc == 0 && m.type == WIRE_DRAIN && m.version == WIRE_VERSION && m.u.drain.deadline_ms == 30000,
		      "v5 rank %d: rc %d %s version %u deadline %u", i, rc, rc ? "" : wire_type_name(m.type),
		      m.version, m.u.drain.deadline_ms);
	}
	/* O and X: the old path, ABORT(shutdown) and no DRAIN first */
	struct trank *old[4] = { &o[0], &o[1], &x[0], &x[1] };
	for (int i = 0; i < 4; i++) {
		rc = ctl_recv(old[i]->fd, &m, 5000);
		CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_SHUTDOWN,
		      "old-path rank %d: rc %d %s", i, rc, rc ? "" : wire_type_name(m.type));
	}
	CHECK(stats_job_draining(&d, 0xb1, true) && stats_job_draining(&d, 0xc1, true),
	      "/stats: jobs B and C not draining");
	/* O and X are the stop's aborts, counted apart from the aborts and
	 * errors a dashboard or an alert sums: a restart is not an error. */
	CHECK(sd_metric(&d, "sumcast_shutdown_jobs_aborted_total") == 2, "stop's aborts: %g",
	      sd_metric(&d, "sumcast_shutdown_jobs_aborted_total"));
	static const char *const not_counted[] = {
		"sumcast_jobs_aborted_total{reason=\"timeout\"}", "sumcast_jobs_aborted_total{reason=\"rank_left\"}",
		"sumcast_jobs_aborted_total{reason=\"internal\"}", "sumcast_errors_total{kind=\"rank_left\"}",
	};
	for (size_t i = 0; i < sizeof(not_counted) / sizeof(*not_counted); i++)
		CHECK(sd_metric(&d, not_counted[i]) == 0, "%s: %g", not_counted[i], sd_metric(&d, not_counted[i]));
	CHECK(isnan(sd_metric(&d, "sumcast_errors_total{kind=\"shutdown\"}")) &&
		      isnan(sd_metric(&d, "sumcast_jobs_aborted_total{reason=\"shutdown\"}")),
	      "the stop shows among the errors or the aborts");
	CHECK(sd_metric(&d, "sumcast_joins_total") == 8 && sd_metric(&d, "sumcast_jobs_started_total") == 4,
	      "joins %g, jobs started %g", sd_metric(&d, "sumcast_joins_total"),
	      sd_metric(&d, "sumcast_jobs_started_total"));
	CHECK(sd_metric(&d, "sumcast_drain_timeout_seconds") == 30 &&
		      sd_metric(&d, "sumcast_drain_start_time_seconds") > sd_metric(&d, "sumcast_start_time_seconds"),
	      "drain gauges: timeout %g, start %g", sd_metric(&d, "sumcast_drain_timeout_seconds"),
	      sd_metric(&d, "sumcast_drain_start_time_seconds"));
	CHECK(sd_metric(&d, "sumcast_draining") == 1 && sd_metric(&d, "sumcast_jobs_drained_total") == 0,
	      "metrics while draining: %g %g", sd_metric(&d, "sumcast_draining"),
	      sd_metric(&d, "sumcast_jobs_drained_total"));
	char hz[64];
	CHECK(sd_http(&d, "/healthz", hz, sizeof(hz)) == 503, "healthz while draining");

	/* still served: 6 chunks through C after its DRAIN */
	struct trun p = { .window = WINDOW, .stride = CHUNK, .len = CHUNK, .count = 6, .timeout_ms = 20000 };
	CHECK(tranks_allreduce(c, 2, &p) == 0, "job C after DRAIN: wrong or not served");

	/* B leaves: drained, counted, C goes on */
	for (int r = 0; r < 2; r++)
		CHECK(leave(&b[r]) == 0, "B rank %d LEAVE", r);
	CHECK(sd_wait_metric(&d, "sumcast_jobs_drained_total", TH_EQ, 1, 5000) == 1,
	      "B's LEAVEs not counted drained");
	CHECK(sd_metric(&d, "sumcast_jobs_finished_total") == 0, "a drained job counted finished");
	CHECK(sd_wait_log(&d, "job 0xb1 drained: its 2 ranks moved off after 0 chunks", 0, NULL, 0, 3000),
	      "no drained line for B");
	st = post(d.http, "127.0.0.1", "POST", "/drain", body, sizeof(body));
	CHECK(st == 200 && strstr(body, "{\"draining\":true,\"jobs\":1}"), "second POST /drain: %d %s", st,
	      body);
	CHECK(stats_job_draining(&d, 0xc1, true), "/stats: C not draining any more");

	/* C leaves: the last job, the daemon exits 0 */
	for (int r = 0; r < 2; r++)
		CHECK(leave(&c[r]) == 0, "C rank %d LEAVE", r);
	int ex = sd_stop(&d, 0, 10000);
	CHECK(ex == 0, "exit status %d after the drain", ex);
	CHECK(sd_log_has(&d, "job 0xc1 drained: its 2 ranks moved off after 6 chunks"), "no drained line for C");
	CHECK(sd_log_has(&d, "drain: 2 job(s) moved off, 2 aborted"), "no summary line (O and X aborted)");
	CHECK(!sd_log_has(&d, "did not move off"), "a job timed out");
	CHECK(!sd_log_has(&d, "DRAIN sent to 1 rank"), "a job with a version 4 rank was sent DRAIN");
	for (int r = 0; r < 2; r++) {
		trank_close(&b[r]);
		trank_close(&c[r]);
		trank_close(&o[r]);
		trank_close(&x[r]);
	}
	sd_cleanup(&d);
}

/* ---- client: three client-library ranks over two daemons ---- */

#define NR 3
#define DEPTH 2
#define COUNT (40 * 1024) /* floats: 160 KiB, 3 chunks per daemon */
#define TOTAL 60u
#define TERM_AT 20u

struct crank {
	struct client *c;
	float *in[DEPTH], *out[DEPTH];
	struct fabric_mr imr[DEPTH], omr[DEPTH]; /* their registrations (FI_MR_LOCAL) */
	struct client_req *q[DEPTH];
	uint32_t n[DEPTH]; /* the request number in each place */
	bool retired;
};

static float cval(uint32_t r, uint32_t n, size_t i)
{
	return (float)((r + 1) * ((n + i) % 13 + 1));
}

/* sumcastctl (tools/cmd_drain.c) -t 5 ARGS..., its output into out;
 * the pid, or -1. */
static const char *sumcastctl_path = ""; /* --sumcastctl PATH; "": not built */

static pid_t ctl_spawn(const char *out, const char *const *args)
{
	const char *argv[16] = { sumcastctl_path, "-t", "5" };
	size_t n = 3;

	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static int ctl_wait(pid_t pid, unsigned ms)
{
	int st;

	for (uint64_t end = sc_now_ms() + ms; sc_now_ms() < end; th_sleep_ms(10))
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static bool file_has(const char *path, const char *what)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = 0;
	return strstr(buf, what) != NULL;
}

static void run_client(bool via_ctl)
{
	struct sd d[2];
	struct crank rk[NR];
	char a0[64], a1[64];
	const char *aggs[] = { a0, a1 };
	long bad = 0;
	int failed = 0;

	setenv("SUMCASTD_CONTROL_DRAIN_TIMEOUT", "30s", 1);
	int rc = sd_start(&d[0], NULL);
	if (!rc && sd_start(&d[1], NULL))
		rc = -1;
	unsetenv("SUMCASTD_CONTROL_DRAIN_TIMEOUT");
	if (rc)
		th_skip("sumcastd did not start (see above)");
	char url[64], port[16], ctl_out[PATH_MAX], st_out[PATH_MAX];
	pid_t ctl = -1;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", d[0].http);
	snprintf(port, sizeof(port), "%u", d[0].http);
	snprintf(ctl_out, sizeof(ctl_out), "%s/sumcastctl-drain.out", d[0].dir);
	snprintf(st_out, sizeof(st_out), "%s/sumcastctl-status.out", d[0].dir);
	snprintf(a0, sizeof(a0), "127.0.0.1:%u", d[0].ctl);
	snprintf(a1, sizeof(a1), "127.0.0.1:%u", d[1].ctl);
	memset(rk, 0, sizeof(rk));
	int crc[NR];
	/* each client polled from its creation on (a daemon closes a
	 * connection that sends no JOIN within its handshake timeout) */
	for (uint32_t r = 0; r < NR; r++) {
		struct client_params cp = {
			.provider = th_provider(), .job_id = 0xd7a1, .rank = r, .nranks = NR,
			.chunk_bytes = CHUNK, .window = WINDOW, .naggs = 2, .aggs = aggs,
			.failover = true, .deadline_ms = 3000,
		};
		REQUIRE(client_create(&cp, &rk[r].c) == 0, "client %u not created", r);
		for (int k = 0; k < DEPTH; k++) {
			rk[r].in[k] = calloc(COUNT, sizeof(float));
			rk[r].out[k] = calloc(COUNT, sizeof(float));
			REQUIRE(rk[r].in[k] && rk[r].out[k], "memory");
			REQUIRE(client_mr_reg(rk[r].c, rk[r].in[k], COUNT * sizeof(float), &rk[r].imr[k]) == 0 &&
					client_mr_reg(rk[r].c, rk[r].out[k], COUNT * sizeof(float), &rk[r].omr[k]) == 0,
				"registering rank %u's buffers", r);
		}
		crc[r] = -EAGAIN;
		for (uint32_t q = 0; q <= r; q++)
			if (crc[q] == -EAGAIN)
				crc[q] = client_connect_poll(rk[q].c);
	}
	for (uint64_t end = sc_now_ms() + 15000 * th_slow_factor(); sc_now_ms() < end;) {
		bool waiting = false;
		for (uint32_t r = 0; r < NR; r++)
			if (crc[r] == -EAGAIN) {
				crc[r] = client_connect_poll(rk[r].c);
				waiting |= crc[r] == -EAGAIN;
			}
		if (!waiting)
			break;
	}
	for (uint32_t r = 0; r < NR; r++)
		REQUIRE(crc[r] == 0, "rank %u connect: %d %s", r, crc[r], client_error(rk[r].c));

	/* Requests 0.. on both daemons, DEPTH in flight on every rank, issued
	 * in the same order everywhere. After TERM_AT issued, SIGTERM to
	 * daemon 0 with requests in flight; no new request until every rank
	 * has its DRAIN bit (the agreement the plugin makes); from then on
	 * (request s) daemon 1 alone, and each rank retires daemon 0 once the
	 * requests that used it are done. */
	uint32_t next = 0, done = 0, s = UINT32_MAX;
	bool termed = false;
	uint64_t t_term = 0, end = sc_now_ms() + 60000 * th_slow_factor();
	int retired = 0;
	bool stats_seen = false;
	while (done < TOTAL * NR && sc_now_ms() < end) {
		for (uint32_t r = 0; r < NR; r++) {
			struct crank *k = &rk[r];
			client_progress(k->c);
			for (int j = 0; j < DEPTH; j++) {
				int fin = 0;
				if (!k->q[j])
					continue;
				int e = client_req_check(k->c, k->q[j], &fin);
				if (!fin)
					continue;
				k->q[j] = NULL;
				done++;
				if (e) {
					failed++;
					continue;
				}
				for (size_t i = 0; i < COUNT; i++) {
					float want = 0;
					for (uint32_t q = 0; q < NR; q++)
						want += cval(q, k->n[j], i);
					bad += k->out[j][i] != want;
				}
			}
			if (s != UINT32_MAX && !k->retired) {
				/* the last rank retires only once /stats has shown the
				 * job draining (the daemon exits when it leaves) */
				if (retired == NR - 1 && !stats_seen)
					continue;
				int e = client_agg_retire(k->c, 0);
				CHECK(e == 0 || e == -EBUSY, "rank %u retire: %d", r, e);
				if (e == 0) {
					k->retired = true;
					retired++;
				}
			}
		}
		if (retired == NR - 1 && !stats_seen) {
			stats_seen = true;
			CHECK(stats_job_draining(&d[0], 0xd7a1, true), "/stats: the job not draining");
			CHECK(sd_metric(&d[0], "sumcast_draining") == 1, "sumcast_draining not 1");
			if (via_ctl) {
				const char *st_args[] = { "-p", port, "-i", "0", "status", NULL };
				pid_t sp = ctl_spawn(st_out, st_args);
				CHECK(sp > 0 && ctl_wait(sp, 10000) == 0 &&
					      file_has(st_out, "1 job(s) left, 1 of them moving off"),
				      "sumcastctl status while draining (%s)", st_out);
			}
		}
		if (!termed && next == TERM_AT) {
			termed = true;
			t_term = sc_now_ms();
			if (via_ctl) {
				const char *args[] = { "drain", "--daemon", url, "--wait", "60", NULL };
				ctl = ctl_spawn(ctl_out, args);
				REQUIRE(ctl > 0, "sumcastctl drain not started");
			} else
				kill(d[0].pid, SIGTERM);
		}
		if (termed && s == UINT32_MAX) {
			bool all = true;
			for (uint32_t r = 0; r < NR; r++)
				all &= (client_draining(rk[r].c) & 1) != 0;
			if (!all)
				continue;
			s = next;
			printf("  every rank has the DRAIN bit %llu ms after the drain began; request %u on goes to daemon 1\n",
			       (unsigned long long)(sc_now_ms() - t_term), s);
		}
		if (next >= TOTAL)
			continue;
		bool room = true;
		for (uint32_t r = 0; r < NR; r++)
			room &= rk[r].q[next % DEPTH] == NULL;
		if (!room)
			continue;
		for (uint32_t r = 0; r < NR; r++) {
			struct crank *k = &rk[r];
			int j = (int)(next % DEPTH);
			for (size_t i = 0; i < COUNT; i++)
				k->in[j][i] = cval(r, next, i);
			memset(k->out[j], 0xff, COUNT * sizeof(float));
			k->n[j] = next;
			int e = client_allreduce_on(k->c, k->in[j], k->out[j], COUNT, SC_F32, SC_OP_SUM,
						    k->imr[j].desc, k->omr[j].desc, next >= s ? 2 : 3, &k->q[j]);
			REQUIRE(e == 0, "rank %u request %u: %d", r, next, e);
		}
		next++;
	}
	CHECK(done == TOTAL * NR, "%u of %u requests completed", done, TOTAL * NR);
	CHECK(s != UINT32_MAX && s >= TERM_AT && s < TOTAL, "not every rank saw DRAIN (s %u)", s);
	CHECK(failed == 0 && bad == 0, "%d requests failed, %ld elements wrong", failed, bad);
	CHECK(retired == NR, "%d of %d ranks retired daemon 0", retired, NR);
	for (uint32_t r = 0; r < NR; r++) {
		CHECK(client_failed(rk[r].c) == 0, "rank %u: aggregators failed 0x%llx: %s", r,
		      (unsigned long long)client_failed(rk[r].c), client_agg_why(rk[r].c, 0));
		CHECK(!client_agg_alive(rk[r].c, 0) && client_agg_alive(rk[r].c, 1) &&
			      client_draining(rk[r].c) == 0,
		      "rank %u: alive %d %d, draining 0x%llx", r, client_agg_alive(rk[r].c, 0),
		      client_agg_alive(rk[r].c, 1), (unsigned long long)client_draining(rk[r].c));
		/* a retired aggregator is no longer a request's */
		struct client_req *q;
		CHECK(client_allreduce_on(rk[r].c, rk[r].in[0], rk[r].out[0], 16, SC_F32, SC_OP_SUM,
					  rk[r].imr[0].desc, rk[r].omr[0].desc, 1, &q) == -EINVAL,
		      "rank %u: a request on the retired daemon was taken", r);
	}
	int ex = sd_stop(&d[0], 0, 10000);
	CHECK(ex == 0, "daemon 0 exit status %d", ex);
	CHECK(sd_log_has(&d[0], "job 0xd7a1 drained: its 3 ranks moved off after"), "no drained line");
	CHECK(sd_log_has(&d[0], "drain: 1 job(s) moved off, 0 aborted"), "the exit line does not count 1");
	CHECK(log_count_after(d[0].log, "draining:", ": warn: ") == 0 &&
		      log_count_after(d[0].log, "draining:", "aborted (") == 0,
	      "daemon 0 logged a WARN or an abort during the drain (%s)", d[0].log);
	CHECK(sd_metric(&d[1], "sumcast_jobs") == 1, "daemon 1 lost the job");
	if (via_ctl) {
		int cx = ctl_wait(ctl, 10000 * th_slow_factor());
		CHECK(cx == 0 && file_has(ctl_out, "draining: 1 job(s) asked to move off") &&
			      file_has(ctl_out, "every job moved off (1 drained)"),
		      "sumcastctl drain --wait: exit %d (%s)", cx, ctl_out);
		char line[512] = "";
		FILE *f = fopen(ctl_out, "r");
		while (f && fgets(line, sizeof(line), f))
			printf("  sumcastctl: %s", line);
		if (f)
			fclose(f);
	}
	for (uint32_t r = 0; r < NR; r++) {
		for (int k = 0; k < DEPTH; k++) {
			fabric_mr_dereg(&rk[r].imr[k]);
			fabric_mr_dereg(&rk[r].omr[k]);
		}
		client_destroy(rk[r].c);
		for (int k = 0; k < DEPTH; k++) {
			free(rk[r].in[k]);
			free(rk[r].out[k]);
		}
	}
	sd_cleanup(&d[0]);
	sd_stop(&d[1], SIGTERM, 10000);
	sd_cleanup(&d[1]);
}

static void mode_client(void)
{
	run_client(false);
}

/* sumcastctl drain --wait against jobs that do not move off: a version 5
 * job whose ranks never leave (aborted at the drain-timeout, 1 s) and a
 * version 4 one (aborted at once): it says 0 moved off, 2 did not, exit 1. */
static void ctl_late(void)
{
	struct sd d;
	struct trank v5[2], v4[2];
	char url[64], out[PATH_MAX];

	setenv("SUMCASTD_CONTROL_DRAIN_TIMEOUT", "1s", 1);
	int rc = sd_start(&d, NULL);
	unsetenv("SUMCASTD_CONTROL_DRAIN_TIMEOUT");
	REQUIRE(rc == 0, "sumcastd did not start (see above)");
	for (uint32_t r = 0; r < 2; r++) {
		REQUIRE(join_ver(&v5[r], &d, 0x5a, r, 0) == 0 && join_ver(&v4[r], &d, 0x4a, r, 4) == 0,
			"joins rank %u", r);
	}
	for (uint32_t r = 0; r < 2; r++)
		REQUIRE(trank_ready(&v5[r], 3000) == 0 && trank_ready(&v4[r], 3000) == 0, "READY %u", r);
	snprintf(url, sizeof(url), "127.0.0.1:%u", d.http);
	snprintf(out, sizeof(out), "%s/sumcastctl-late.out", d.dir);
	const char *args[] = { "drain", "--daemon", url, "--wait", "20", NULL };
	pid_t p = ctl_spawn(out, args);
	int cx = p > 0 ? ctl_wait(p, 30000 * th_slow_factor()) : -1;
	CHECK(cx == 1 && file_has(out, "draining: 1 job(s) asked to move off") &&
		      file_has(out, "0 job(s) moved off, 2 did not"),
	      "sumcastctl drain --wait, jobs that stay: exit %d (%s)", cx, out);
	CHECK(sd_stop(&d, 0, 10000) == 0, "exit status");
	CHECK(sd_log_has(&d, "drain: 1 job(s) did not move off within") &&
		      sd_log_has(&d, "aborting them: 0x5a"),
	      "no WARN naming the job that stayed (the version 4 one went at once)");
	CHECK(sd_log_has(&d, "drain: 0 job(s) moved off, 2 aborted"), "exit line");
	for (uint32_t r = 0; r < 2; r++) {
		trank_close(&v5[r]);
		trank_close(&v4[r]);
	}
	sd_cleanup(&d);
}

static void mode_ctl(void)
{
	if (!*sumcastctl_path)
		th_skip("sumcastctl was not built (libcurl, jansson)");
	run_client(true);
	ctl_late();
}

/* ---- shm: SIGKILL, restart with the same pid and port ---- */

#define PIDNS "unshare --pid --fork --kill-child=SIGKILL"

/* /dev/shm names that start with prefix, into out (space-separated). */
static int shm_names(const char *prefix, char *out, size_t cap)
{
	DIR *dir = opendir("/dev/shm");
	struct dirent *e;
	size_t len = 0;
	int n = 0;

	*out = 0;
	if (!dir)
		return 0;
	while ((e = readdir(dir)))
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			n++;
			if (len + strlen(e->d_name) + 2 < cap)
				len += (size_t)snprintf(out + len, cap - len, "%s ", e->d_name);
		}
	closedir(dir);
	return n;
}

/* The daemon under the wrapper: unshare's one child (pid 1 inside). */
static pid_t ns_child(pid_t wrapper)
{
	char path[64];
	int child = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)wrapper, (int)wrapper);
	for (uint64_t end = sc_now_ms() + 3000; sc_now_ms() < end && !child; th_sleep_ms(10)) {
		FILE *f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%d", &child) != 1)
				child = 0;
			fclose(f);
		}
	}
	return child;
}

static bool gone(pid_t pid, unsigned ms)
{
	for (uint64_t end = sc_now_ms() + ms; sc_now_ms() < end; th_sleep_ms(10))
		if (kill(pid, 0) && errno == ESRCH)
			return true;
	return false;
}

static int shm_start(struct sc_daemon *p, uint16_t port, const char *dir, const char *name)
{
	struct sc_daemon_opts o = {
		.binary = sd_binary(), .provider = "shm", .control_port = port, .dir = dir, .name = name,
		.log = true, .wrapper = PIDNS, .pdeathsig = true, .timeout_ms = 15000 * th_slow_factor(),
	};
	return sc_daemon_start(p, &o);
}

static void mode_shm(void)
{
	struct sc_daemon p1, p2;
	struct sd d;
	struct tpair tp;
	char names[1024], dir[] = "/tmp/sumcastd-drain.XXXXXX";
	struct client_params base = { .provider = "shm", .job_id = 0x5f1, .chunk_bytes = CHUNK,
				      .window = WINDOW };

	if (geteuid() != 0 || system(PIDNS " true 2>/dev/null") != 0)
		th_skip("no pid namespace here (unshare --pid needs root)");
	if (shm_names("1:", names, sizeof(names)))
		th_skip("/dev/shm already holds regions of a pid 1 (another namespace's): not ours to remove");
	REQUIRE(mkdtemp(dir), "mkdtemp");
	REQUIRE(shm_start(&p1, 0, dir, "first") == 0, "first daemon on shm did not start (%s)", p1.log);
	memset(&d, 0, sizeof(d));
	d.ctl = p1.ctl;
	REQUIRE(tpair_up(&tp, &d, &base) == 0, "job 1 did not join");
	CHECK(tpair_allreduce(&tp, 100000, SC_F32) == 0, "job 1 allreduce");
	/* SIGKILL to the daemon (pid 1 of its namespace), then its wrapper */
	pid_t dpid = ns_child(p1.pid);
	REQUIRE(dpid > 0, "no daemon under the wrapper %d", (int)p1.pid);
	kill(dpid, SIGKILL);
	CHECK(gone(dpid, 5000 * th_slow_factor()), "the SIGKILLed daemon %d is still there", (int)dpid);
	sc_daemon_stop(&p1, 0, 5000 * th_slow_factor());
	int left = shm_names("1:", names, sizeof(names));
	printf("  SIGKILLed on shm with a job: /dev/shm keeps %d region(s) of pid 1: %s\n", left, names);
	CHECK(left > 0, "the killed daemon left nothing in /dev/shm: the restart below proves nothing");
	tpair_down(&tp);

	/* the same port, the same pid: it starts and serves a new job */
	int rc = shm_start(&p2, p1.ctl, dir, "second");
	CHECK(rc == 0 && p2.ctl == p1.ctl, "restart on shm, port %u: rc %d, port %u (log %s)", p1.ctl, rc,
	      p2.ctl, p2.log);
	if (rc == 0) {
		d.ctl = p2.ctl;
		base.job_id = 0x5f2;
		CHECK(tpair_up(&tp, &d, &base) == 0, "job 2 did not join the restarted daemon");
		CHECK(tpair_allreduce(&tp, 100000, SC_F32) == 0, "job 2 allreduce on the restarted daemon");
		tpair_down(&tp);
		FILE *f = fopen(p2.log, "r");
		char line[1024];
		bool said = false;
		while (f && fgets(line, sizeof(line), f))
			said |= strstr(line, "shm: removed") != NULL;
		if (f)
			fclose(f);
		CHECK(said, "the restarted daemon did not say it removed the stale regions");
		dpid = ns_child(p2.pid);
		CHECK(dpid > 0 && !kill(dpid, SIGTERM), "no daemon under the wrapper %d", (int)p2.pid);
		CHECK(sc_daemon_stop(&p2, 0, 10000 * th_slow_factor()) == 0, "restarted daemon's exit");
	}
	sc_daemon_cleanup(&p1, false);
	sc_daemon_cleanup(&p2, false);
	/* a clean stop removes its own */
	int stale = shm_names("1:", names, sizeof(names));
	CHECK(stale == 0, "pid 1's regions left after a clean stop: %s", names);
	fabric_shm_sweep(1); /* ours (there were none before), whatever failed */
	rmdir(dir);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(void);
	} modes[] = { { "http", mode_http }, { "client", mode_client }, { "ctl", mode_ctl },
		      { "shm", mode_shm } };
	const size_t nm = sizeof(modes) / sizeof(modes[0]);

	/* the test's command names sumcastctl (so that a build of only the
	 * tests' targets builds it too: scripts/test.sh's ASan stage) */
	if (argc >= 3 && !strcmp(argv[1], "--sumcastctl")) {
		sumcastctl_path = argv[2];
		argv[2] = argv[0];
		argv += 2;
		argc -= 2;
	}
	for (int i = 1; i < argc; i++) {
		size_t k = 0;
		while (k < nm && strcmp(argv[i], modes[k].name))
			k++;
		if (k == nm) {
			fprintf(stderr, "usage: %s [--sumcastctl PATH] [http|client|ctl|shm]... (none: all)\n",
				argv[0]);
			return 64;
		}
	}
	for (size_t k = 0; k < nm; k++)
		for (int i = argc < 2 ? 0 : 1; i < (argc < 2 ? 1 : argc); i++)
			if (argc < 2 || !strcmp(argv[i], modes[k].name)) {
				printf("%s\n", modes[k].name);
				modes[k].run();
			}
	return th_summary("test_daemon_drain");
}
