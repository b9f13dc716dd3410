/* systemd notify beyond READY (tests/ops/test_notify.py covers READY,
 * RELOADING, STOPPING): the test plays systemd on a NOTIFY_SOCKET datagram
 * socket with WATCHDOG_USEC set, and checks
 *   - WATCHDOG=1 pings at about half the interval;
 *   - STATUS= follows jobs and ranks ("1 job, 2 ranks") on join, clean
 *     leave and abort (a rank that disconnects before READY);
 *   - a SIGHUP whose file does not parse gives READY=1 with a STATUS saying
 *     the previous configuration was kept (not "configuration reloaded"),
 *     and a good one after it says "configuration reloaded" again. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "test_daemon_harness.h"

#define CHUNK (64u << 10)
#define WATCHDOG_MS 600

static struct sd d;
static int nfd = -1;
static unsigned watchdogs;
static uint64_t first_ping_ms, last_ping_ms;

/* Next datagram into buf within ms; counts WATCHDOG=1 pings. 0 or -1. */
static int next_msg(char *buf, size_t cap, unsigned ms)
{
	uint64_t end = sc_now_ms() + ms;

	for (;;) {
		int64_t left = (int64_t)(end - sc_now_ms());
		struct pollfd p = { nfd, POLLIN, 0 };
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		ssize_t n = recv(nfd, buf, cap - 1, 0);
		if (n < 0)
			continue;
		buf[n] = 0;
		if (strstr(buf, "WATCHDOG=1")) {
			watchdogs++;
			last_ping_ms = sc_now_ms();
			if (!first_ping_ms)
				first_ping_ms = last_ping_ms;
		}
		return 0;
	}
}

/* Waits for a message containing every one of a, b (b may be NULL). */
static bool wait_for(const char *a, const char *b, char *buf, size_t cap, unsigned ms)
{
	uint64_t end = sc_now_ms() + ms;

	while (sc_now_ms() < end) {
		if (next_msg(buf, cap, (unsigned)(end - sc_now_ms())))
			return false;
		if (strstr(buf, a) && (!b || strstr(buf, b)))
			return true;
	}
	return false;
}

int main(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char path[96], buf[1024], env[32];
	struct trank r[3];

	snprintf(path, sizeof(path), "/tmp/sumcastd-notify.%d", (int)getpid());
	unlink(path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (nfd < 0 || bind(nfd, (struct sockaddr *)&a, sizeof(a)))
		th_skip("cannot bind a unix datagram socket");
	setenv("NOTIFY_SOCKET", path, 1);
	snprintf(env, sizeof(env), "%u", WATCHDOG_MS * 1000);
	setenv("WATCHDOG_USEC", env, 1);
	int rc = sd_start(&d, "[job]\nmemory-budget = 64M\n");
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	if (rc) {
		unlink(path);
		th_skip("sumcastd did not start (see above)");
	}

	CHECK(wait_for("READY=1", "STATUS=Serving: 0 jobs, 0 ranks", buf, sizeof(buf), 5000),
	      "READY with STATUS: last message \"%s\"", buf);

	/* Watchdog: WatchdogSec 600 ms, pings every ~300 ms. */
	uint64_t t0 = sc_now_ms();
	unsigned w0 = watchdogs;
	while (sc_now_ms() - t0 < 2000)
		next_msg(buf, sizeof(buf), 100);
	unsigned pings = watchdogs - w0;
	printf("  watchdog: %u pings in 2 s (WatchdogSec %u ms)\n", pings, WATCHDOG_MS);
	/* ~7 at half the interval; a loaded host delays some (fewer), never
	 * more than one per 200 ms */
	CHECK(pings >= 2 && pings <= 10, "%u WATCHDOG=1 in 2 s, want ~7", pings);
	CHECK(sd_log_has(&d, "systemd watchdog: WatchdogSec 600 ms, WATCHDOG=1 every 300 ms"),
	      "watchdog start not logged");

	/* A job of 2 ranks joins, then both leave cleanly. */
	bool ok = true;
	for (int i = 0; i < 2; i++)
		ok &= trank_open(&r[i], 4 * CHUNK) == 0 && trank_join(&r[i], &d, 0x901, (uint32_t)i, 2, NULL) == 0;
	CHECK(ok, "job 0x901 join");
	CHECK(trank_ready(&r[0], 3000) == 0 && trank_ready(&r[1], 3000) == 0, "job 0x901 READY");
	CHECK(wait_for("STATUS=Serving: 1 job, 2 ranks", NULL, buf, sizeof(buf), 3000),
	      "no STATUS for 1 job, 2 ranks; last \"%s\"", buf);
	for (int i = 0; i < 2; i++) {
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = r[i].handle;
		CHECK(ctl_send(r[i].fd, &l) == 0, "LEAVE");
	}
	CHECK(wait_for("STATUS=Serving: 0 jobs, 0 ranks", NULL, buf, sizeof(buf), 3000),
	      "no STATUS for 0 jobs after LEAVE; last \"%s\"", buf);
	for (int i = 0; i < 2; i++)
		trank_close(&r[i]);

	/* Abort: rank 0 of 2 joins, then disconnects before READY. */
	CHECK(trank_open(&r[2], 4 * CHUNK) == 0 && trank_join(&r[2], &d, 0x902, 0, 2, NULL) == 0,
	      "job 0x902 join");
	CHECK(wait_for("STATUS=Serving: 1 job, 1 rank;", NULL, buf, sizeof(buf), 3000),
	      "no STATUS for 1 job, 1 rank; last \"%s\"", buf);
	trank_close(&r[2]);
	CHECK(wait_for("STATUS=Serving: 0 jobs, 0 ranks", NULL, buf, sizeof(buf), 3000),
	      "no STATUS for 0 jobs after the abort; last \"%s\"", buf);

	/* SIGHUP with a file that does not parse. */
	CHECK(sd_write_conf(&d, "[job]\nmemory-budget = lots\n") == 0, "rewrite");
	kill(d.pid, SIGHUP);
	CHECK(wait_for("RELOADING=1", NULL, buf, sizeof(buf), 3000), "no RELOADING=1");
	CHECK(wait_for("READY=1", NULL, buf, sizeof(buf), 3000), "no READY=1 after a failed reload");
	CHECK(strstr(buf, "previous configuration kept") && strstr(buf, "memory-budget") &&
		      !strstr(buf, "configuration reloaded"),
	      "failed reload: \"%s\"", buf);
	printf("  failed reload: %s\n", buf);
	/* The note stays on later STATUS lines until a reload succeeds. */
	CHECK(trank_open(&r[2], 4 * CHUNK) == 0 && trank_join(&r[2], &d, 0x903, 0, 2, NULL) == 0,
	      "job 0x903 join");
	CHECK(wait_for("STATUS=Serving: 1 job, 1 rank;", NULL, buf, sizeof(buf), 3000) &&
		      strstr(buf, "previous configuration kept"),
	      "STATUS after a failed reload: \"%s\"", buf);
	trank_close(&r[2]);
	CHECK(sd_write_conf(&d, "[job]\nmemory-budget = 32M\n") == 0, "rewrite");
	kill(d.pid, SIGHUP);
	CHECK(wait_for("READY=1", NULL, buf, sizeof(buf), 3000), "no READY=1 after a good reload");
	CHECK(strstr(buf, "configuration reloaded") && !strstr(buf, "kept"), "good reload: \"%s\"",
	      buf);
	printf("  good reload: %s\n", buf);

	/* Pings keep coming. */
	unsigned w1 = watchdogs;
	uint64_t pend = sc_now_ms() + 5000;
	while (watchdogs == w1 && sc_now_ms() < pend)
		next_msg(buf, sizeof(buf), 100);
	CHECK(watchdogs > w1, "no WATCHDOG=1 within 5 s after the reloads (last one %llu ms ago)",
	      (unsigned long long)(sc_now_ms() - last_ping_ms));
	/* The drain: a job of 2 ranks (version 5) is asked to move off; the
	 * STATUS line counts it until both have left. */
	ok = true;
	for (int i = 0; i < 2; i++)
		ok &= trank_open(&r[i], 4 * CHUNK) == 0 && trank_join(&r[i], &d, 0x904, (uint32_t)i, 2, NULL) == 0;
	CHECK(ok && trank_ready(&r[0], 3000) == 0 && trank_ready(&r[1], 3000) == 0, "job 0x904 READY");
	kill(d.pid, SIGTERM);
	CHECK(wait_for("STOPPING=1", NULL, buf, sizeof(buf), 3000), "no STOPPING=1; last \"%s\"", buf);
	CHECK(wait_for("STATUS=Draining: 1 job still moving off, 0 finishing chunks in flight", NULL, buf,
		       sizeof(buf), 3000),
	      "no STATUS with the job moving off; last \"%s\"", buf);
	printf("  draining: %s\n", buf);
	for (int i = 0; i < 2; i++) {
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = r[i].handle;
		CHECK(ctl_send(r[i].fd, &l) == 0, "LEAVE");
	}
	CHECK(wait_for("STATUS=Draining: 0 jobs still moving off", NULL, buf, sizeof(buf), 3000),
	      "no STATUS once the job moved off; last \"%s\"", buf);
	CHECK(sd_stop(&d, 0, 10000) == 0, "exit status after SIGTERM");
	for (int i = 0; i < 2; i++)
		trank_close(&r[i]);
	sd_cleanup(&d);
	close(nfd);
	unlink(path);
	return th_summary("test_daemon_notify");
}
