/* SIGHUP re-reads the config file and applies what is reloadable (seen in
 * /metrics and in refusals), says what needs a restart; SIGTERM drains:
 * /healthz turns 503, JOINs are refused with WIRE_E_SHUTDOWN; the job's
 * ranks joined in wire version 4 (no DRAIN), so it takes the old path: a
 * chunk in flight gets drain-timeout to finish, then the ranks get
 * ABORT(WIRE_E_SHUTDOWN) and the daemon exits 0 (a job that speaks 5 is
 * asked to move off instead: test_daemon_drain.c). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_daemon_harness.h"

#define CHUNK (64u << 10)

static struct sd d;

static bool wait_metric(const char *name, double want, unsigned ms)
{
	return sd_wait_metric(&d, name, TH_EQ, want, ms) == want;
}

int main(void)
{
	struct trank a[2], b;
	struct wire_msg m;
	struct top rop, sop;

	if (sd_start(&d, "[job]\nmemory-budget = 64M\nmax-jobs = 8\n"))
		th_skip("sumcastd did not start (see above)");
	CHECK(sd_metric(&d, "sumcast_memory_budget_bytes") == 64 << 20, "budget before reload");

	/* SIGHUP: new budget and max-jobs apply; threads needs a restart. */
	CHECK(sd_write_conf(&d, "[job]\nmemory-budget = 32M\nmax-jobs = 1\n[data]\nthreads = 2\n") == 0,
	      "rewrite config");
	kill(d.pid, SIGHUP);
	CHECK(wait_metric("sumcast_memory_budget_bytes", 32 << 20, 3000), "budget after reload: %g",
	      sd_metric(&d, "sumcast_memory_budget_bytes"));
	CHECK(sd_metric(&d, "sumcast_data_threads") == 1, "threads changed without restart");
	CHECK(sd_wait_log(&d, "data.threads: 1 -> 2 needs a restart", 0, NULL, 0, 3000),
	      "restart-needed not logged");
	CHECK(sd_log_has(&d, "job.max-jobs: 8 -> 1"), "change not logged");

	/* max-jobs = 1: a second job is refused. */
	CHECK(trank_open(&a[0], 4 * CHUNK) == 0, "job A rank 0 endpoint");
	a[0].ver = 4; /* before DRAIN: the drain below takes the old path */
	CHECK(trank_join(&a[0], &d, 0x301, 0, 2, NULL) == 0, "job A rank 0");
	CHECK(trank_open(&b, 4 * CHUNK) == 0 && trank_join(&b, &d, 0x302, 0, 2, NULL) ==
						      WIRE_E_TOO_MANY_JOBS,
	      "job B not refused with too_many_jobs");
	trank_close(&b);
	/* A bad file on SIGHUP keeps the running configuration: wait until the
	 * daemon has read it and said so, then nothing may have changed. */
	int kept = sd_log_count(&d, "keeping the running configuration");
	char line[2048] = "";
	CHECK(sd_write_conf(&d, "[job]\nmemory-budget = lots\n") == 0, "rewrite config");
	kill(d.pid, SIGHUP);
	CHECK(sd_wait_log(&d, "keeping the running configuration", kept, line, sizeof(line), 5000),
	      "bad reload: no \"keeping the running configuration\" in the log");
	CHECK(strstr(line, "reload: ") && strstr(line, "memory-budget"),
	      "bad reload: the log line does not name the setting: %s", line);
	CHECK(sd_metric(&d, "sumcast_memory_budget_bytes") == 32 << 20, "bad reload applied: %g",
	      sd_metric(&d, "sumcast_memory_budget_bytes"));
	CHECK(trank_open(&b, 4 * CHUNK) == 0 && trank_join(&b, &d, 0x303, 0, 2, NULL) ==
						      WIRE_E_TOO_MANY_JOBS,
	      "bad reload: max-jobs 1 no longer holds");
	trank_close(&b);
	char body[256];
	CHECK(sd_http(&d, "/healthz", body, sizeof(body)) == 200, "unhealthy after a bad reload");

	/* Drain: job A READY with chunk 0 from rank 0 only (in flight). */
	CHECK(trank_open(&a[1], 4 * CHUNK) == 0, "job A rank 1 endpoint");
	a[1].ver = 4;
	CHECK(trank_join(&a[1], &d, 0x301, 1, 2, NULL) == 0, "job A rank 1");
	CHECK(trank_ready(&a[0], 3000) == 0 && trank_ready(&a[1], 3000) == 0, "job A READY");
	trank_post_result(&a[0], 0, 0, CHUNK, &rop);
	trank_send_chunk(&a[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sop);
	struct trank *p0 = &a[0];
	struct top *sops[1] = { &sop };
	CHECK(tranks_wait(&p0, 1, sops, 1, 3000) == 0 && !sop.err, "rank 0's chunk not sent");
	/* and received: the slot is partially filled */
	tranks_wait_metric(&p0, 1, &d, "sumcast_received_bytes_total", TH_GE, CHUNK, 3000);
	uint64_t t0 = sc_now_ms();
	kill(d.pid, SIGTERM);
	int hz = 0;
	uint64_t end = sc_now_ms() + 1500;
	while ((hz = sd_http(&d, "/healthz", body, sizeof(body))) != 503 && sc_now_ms() < end)
		tranks_poll(&p0, 1, 20);
	CHECK(hz == 503, "healthz while draining: %d %s", hz, body);
	/* the control listener is closed: a new connection fails or is closed */
	uint64_t nonce;
	int fd = ctl_connect(&d, &nonce);
	CHECK(fd < 0, "control port still accepts while draining");
	if (fd >= 0)
		close(fd);
	/* drain-timeout is 2 s in the harness config: not before, and (loaded
	 * hosts) within a few seconds after */
	int rc0 = ctl_recv(a[0].fd, &m, 10000);
	uint64_t dt = sc_now_ms() - t0;
	CHECK(rc0 == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_SHUTDOWN && m.version == 4,
	      "rank 0: rc %d %s (version %u)", rc0, rc0 ? "" : wire_type_name(m.type), m.version);
	CHECK(dt >= 1800 && dt < 10000, "ABORT(shutdown) after %llu ms, drain-timeout 2000",
	      (unsigned long long)dt);
	printf("  drain: ABORT %s after %llu ms: %s\n", rc0 ? "-" : wire_code_name(m.u.abort.code),
	       (unsigned long long)dt, rc0 ? "" : m.u.abort.text);
	int rc1 = ctl_recv(a[1].fd, &m, 2000);
	CHECK(rc1 == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_SHUTDOWN, "rank 1: rc %d",
	      rc1);
	int st = sd_stop(&d, 0, 5000); /* signal 0: just wait */
	CHECK(st == 0, "exit status %d after SIGTERM", st);
	CHECK(!sd_log_has(&d, "DRAIN sent"), "a job of version 4 ranks was sent DRAIN");
	CHECK(sd_log_has(&d, "did not move off within") &&
		      sd_log_has(&d, "0x301 (no DRAIN: older ranks)"),
	      "the drain-timeout WARN does not name job 0x301");
	CHECK(sd_log_has(&d, "stopped"), "no clean stop logged");
	for (int i = 0; i < 2; i++)
		trank_close(&a[i]);
	sd_cleanup(&d); /* its folder (kept when a check failed) before the next daemon */

	/* SIGTERM with nothing in flight exits at once, status 0: with a
	 * drain-timeout of 60 s, "at once" is anything well below it. */
	setenv("SUMCASTD_CONTROL_DRAIN_TIMEOUT", "60s", 1);
	int started = sd_start(&d, NULL);
	unsetenv("SUMCASTD_CONTROL_DRAIN_TIMEOUT");
	if (started == 0) {
		char body2[1 << 16];
		CHECK(sd_http(&d, "/config", body2, sizeof(body2)) == 200 &&
			      strstr(body2, "\"key\":\"drain-timeout\",\"value\":\"60s\""),
		      "drain-timeout 60s not in /config");
		uint64_t t = sc_now_ms();
		CHECK(sd_stop(&d, SIGTERM, 40000) == 0, "idle SIGTERM exit status");
		CHECK(sc_now_ms() - t < 30000, "idle SIGTERM took %llu ms (drain-timeout 60 s)",
		      (unsigned long long)(sc_now_ms() - t));
		sd_cleanup(&d);
	}
	return th_summary("test_daemon_signals");
}
