/* Attacks on a running sumcastd by a client allowed to reach its control
 * port (authentication off, the default): each must be refused without
 * harming the daemon or a legitimate job running beside it.
 *
 *  - a second JOIN on a connection that already joined a job;
 *  - a LEAVE naming another job's handle on a joined connection.
 *    Both once freed the connection while the job's rank still pointed at
 *    it (heap-use-after-free in conn_send when READY or an ABORT went out).
 *  - one JOIN asking for window 2^20 and 64 MB chunks: capped to
 *    max-window x max-chunk it still took 768 MiB of the 1 GiB budget,
 *    prefaulted for the join timeout, and could be repeated; now refused
 *    (memory) above [job] max-memory-share of the budget.
 *  - JOINs that differ from a job in ranks or parameters, or come when it
 *    is full: the refusal named the job's ranks and exact parameters to
 *    anyone; now only the reason (the log has the values). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_daemon_harness.h"

static struct sd d;
static struct fabric *fab;

static bool healthy(void)
{
	char body[64];

	return sd_http(&d, "/healthz", body, sizeof(body)) == 200 && !strcmp(body, "ok\n");
}

static int join_ok(struct wire_join *j, struct wire_msg *m)
{
	int fd = ctl_join(&d, j, NULL, 0, m);

	CHECK(fd >= 0 && m->type == WIRE_JOIN_OK, "join of job 0x%llx rank %u: %s %s",
	      (unsigned long long)j->job_id, j->rank, fd < 0 ? "no reply" : wire_type_name(m->type),
	      fd >= 0 && m->type == WIRE_REFUSE ? m->u.refuse.text : "");
	return fd;
}

/* The attacker's connection gets REFUSE(code) and is closed. */
static void expect_refused_closed(int fd, uint16_t code, const char *what)
{
	struct wire_msg m;
	int rc = ctl_recv(fd, &m, 3000);

	CHECK(rc == 0 && m.type == WIRE_REFUSE && m.u.refuse.code == code,
	      "%s: rc %d %s, want REFUSE(%s)", what, rc, rc ? "-" : wire_type_name(m.type),
	      wire_code_name(code));
	if (rc == 0 && m.type == WIRE_REFUSE)
		printf("  %-22s -> REFUSE %s: %s\n", what, wire_code_name(m.u.refuse.code),
		       m.u.refuse.text);
	CHECK(ctl_wait_closed(fd, 3000) == 0, "%s: connection not closed", what);
}

/* A rank of a job whose other rank misbehaved: it is told (ABORT naming the
 * rank) or, if the job had not formed yet, ABORT too; never silence. */
static void expect_abort(int fd, const char *what)
{
	struct wire_msg m;
	int rc = ctl_recv(fd, &m, 5000);

	CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_RANK_LEFT,
	      "%s: rc %d %s, want ABORT(rank_left)", what, rc, rc ? "-" : wire_type_name(m.type));
	if (rc == 0 && m.type == WIRE_ABORT)
		printf("  %-22s -> ABORT %s: %s\n", what, wire_code_name(m.u.abort.code), m.u.abort.text);
}

/* A legitimate 2-rank job joins, becomes READY and leaves cleanly: the
 * daemon still serves after the attack. */
static void legit_job(uint64_t id, const char *what)
{
	struct wire_join j;
	struct wire_msg m;
	int fd[2];

	for (uint32_t r = 0; r < 2; r++) {
		join_init(&j, id, r, 2, fab);
		fd[r] = join_ok(&j, &m);
	}
	for (int r = 0; r < 2; r++) {
		int rc = fd[r] >= 0 ? ctl_recv(fd[r], &m, 3000) : -1;
		CHECK(rc == 0 && m.type == WIRE_READY, "%s: rank %d got no READY (rc %d)", what, r, rc);
	}
	for (int r = 0; r < 2; r++) {
		if (fd[r] < 0)
			continue;
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = m.u.ready.job_handle;
		ctl_send(fd[r], &l);
		close(fd[r]);
	}
}

int main(void)
{
	struct fabric_params fp = { .provider = th_provider() };
	struct wire_join j;
	struct wire_msg m;

	if (strcmp(fp.provider, "shm"))
		fp.node = "127.0.0.1";
	if (fabric_open(&fp, &fab))
		th_skip("no libfabric provider for the test endpoint");
	/* The default budget (1 GiB) and share (0.5). */
	/* [job] max-inflight off (1T): the budget checks below see the joins
	 * as asked (the cap's grants: test_daemon_inflight) */
	if (sd_start(&d, "[job]\nmax-inflight = 1T\n"))
		th_skip("sumcastd did not start (see above)");

	/* 1. A second JOIN on a connection that joined (job still forming):
	 * the connection is refused, the job (whose rank 0 is now gone) is
	 * aborted, and when rank 1 arrives it must not be sent READY through
	 * a freed connection. */
	{
		join_init(&j, 0xa1, 0, 2, fab);
		int fd0 = join_ok(&j, &m);
		join_init(&j, 0xa1, 0, 2, fab);
		struct wire_msg again = { .type = WIRE_JOIN };
		again.u.join = j;
		CHECK(fd0 >= 0 && ctl_send(fd0, &again) == 0, "second JOIN not sent");
		if (fd0 >= 0) {
			expect_refused_closed(fd0, WIRE_E_MALFORMED, "second JOIN (forming)");
			close(fd0);
		}
		/* The job was aborted: rank 1 starts a new one and is alone. */
		join_init(&j, 0xa1, 1, 2, fab);
		int fd1 = ctl_join(&d, &j, NULL, 0, &m);
		CHECK(fd1 >= 0, "rank 1 after the attack: no reply");
		if (fd1 >= 0)
			close(fd1);
		CHECK(healthy(), "daemon not healthy after a second JOIN on a forming job");
	}
	/* 2. A second JOIN on a connection whose job is READY: the rank is
	 * gone, so the job aborts and the other rank is told. */
	{
		join_init(&j, 0xa2, 0, 2, fab);
		int fd0 = join_ok(&j, &m);
		join_init(&j, 0xa2, 1, 2, fab);
		int fd1 = join_ok(&j, &m);
		CHECK(fd0 >= 0 && ctl_recv(fd0, &m, 3000) == 0 && m.type == WIRE_READY, "0xa2 rank 0 READY");
		CHECK(fd1 >= 0 && ctl_recv(fd1, &m, 3000) == 0 && m.type == WIRE_READY, "0xa2 rank 1 READY");
		struct wire_msg again = { .type = WIRE_JOIN };
		join_init(&again.u.join, 0xa3, 0, 2, fab);
		if (fd0 >= 0 && fd1 >= 0) {
			ctl_send(fd0, &again);
			expect_refused_closed(fd0, WIRE_E_MALFORMED, "second JOIN (ready)");
			expect_abort(fd1, "the other rank");
		}
		if (fd0 >= 0)
			close(fd0);
		if (fd1 >= 0)
			close(fd1);
		CHECK(healthy(), "daemon not healthy after a second JOIN on a ready job");
	}
	/* 3. LEAVE naming another job's handle, on a joined connection, while
	 * the job is forming and while it is READY. */
	for (int ready = 0; ready < 2; ready++) {
		uint64_t id = 0xb0 + (uint64_t)ready;
		join_init(&j, id, 0, 2, fab);
		int fd0 = join_ok(&j, &m);
		uint32_t handle = m.u.join_ok.job_handle;
		int fd1 = -1;
		if (ready) {
			join_init(&j, id, 1, 2, fab);
			fd1 = join_ok(&j, &m);
			CHECK(fd0 >= 0 && ctl_recv(fd0, &m, 3000) == 0 && m.type == WIRE_READY, "rank 0 READY");
			CHECK(fd1 >= 0 && ctl_recv(fd1, &m, 3000) == 0 && m.type == WIRE_READY, "rank 1 READY");
		}
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = handle + 1000;
		if (fd0 >= 0) {
			ctl_send(fd0, &l);
			expect_refused_closed(fd0, WIRE_E_UNKNOWN_JOB,
					      ready ? "LEAVE other (ready)" : "LEAVE other (forming)");
			close(fd0);
		}
		if (ready && fd1 >= 0) {
			expect_abort(fd1, "the other rank");
			close(fd1);
		} else if (!ready) {
			/* rank 1 of the forming job arrives after the attack */
			join_init(&j, id, 1, 2, fab);
			fd1 = ctl_join(&d, &j, NULL, 0, &m);
			CHECK(fd1 >= 0, "rank 1 after LEAVE-other: no reply");
			if (fd1 >= 0)
				close(fd1);
		}
		CHECK(healthy(), "daemon not healthy after LEAVE of another handle");
	}
	/* 4. A JOIN that would take most of the budget: 64 x 4 MiB x (2 + 1)
	 * = 768 MiB after the caps, over half of 1 GiB. */
	{
		long rss0 = sd_rss_settled(&d, 2000);
		join_init(&j, 0xd0, 0, 2, fab);
		j.window = 1u << 20;
		j.chunk_bytes = 64u << 20;
		j.dtype_mask = 1u << SC_F32;
		int fd = ctl_join(&d, &j, NULL, 0, &m);
		CHECK(fd >= 0 && m.type == WIRE_REFUSE && m.u.refuse.code == WIRE_E_MEMORY,
		      "window 2^20 x 64 MB JOIN: %s, want REFUSE(memory)",
		      fd < 0 ? "no reply" : m.type == WIRE_REFUSE ? wire_code_name(m.u.refuse.code)
								 : wire_type_name(m.type));
		if (fd >= 0 && m.type == WIRE_REFUSE)
			printf("  %-22s -> REFUSE %s: %s\n", "huge JOIN", wire_code_name(m.u.refuse.code),
			       m.u.refuse.text);
		CHECK(fd >= 0 && m.type == WIRE_REFUSE && strstr(m.u.refuse.text, "max-memory-share"),
		      "refusal does not name max-memory-share");
		long rss1 = sd_rss_kib(&d);
		CHECK(rss1 < rss0 + 64 * 1024, "RSS %ld KiB -> %ld KiB after a refused JOIN", rss0, rss1);
		CHECK(sd_metric(&d, "sumcast_memory_used_bytes") == 0, "memory charged for a refused JOIN: %g",
		      sd_metric(&d, "sumcast_memory_used_bytes"));
		if (fd >= 0)
			close(fd);
	}
	/* 5. Without a key, a refusal names no value of another job: a JOIN
	 * that differs from a forming job in ranks, in parameters, or comes
	 * when it is full, is told only the reason; the log has the values. */
	{
		join_init(&j, 0xe0, 0, 2, fab);
		int fd0 = join_ok(&j, &m);
		const struct {
			const char *what, *reason, *logged;
			uint16_t code;
			uint32_t nranks, chunk;
		} asks[] = {
			{ "other ranks", "the job has another number of ranks", "has 2 ranks, request says 3",
			  WIRE_E_NRANKS, 3, 64u << 10 },
			{ "other params", "the job was joined with other parameters", "was joined with chunk 65536",
			  WIRE_E_PARAMS, 2, 32u << 10 },
		};
		for (size_t i = 0; i < 2; i++) {
			join_init(&j, 0xe0, 1, asks[i].nranks, fab);
			j.chunk_bytes = asks[i].chunk;
			int fd = ctl_join(&d, &j, NULL, 0, &m);
			CHECK(fd >= 0 && m.type == WIRE_REFUSE && m.u.refuse.code == asks[i].code &&
				      !strcmp(m.u.refuse.text, asks[i].reason),
			      "%s: %s \"%s\", want only \"%s\"", asks[i].what, fd < 0 ? "no reply" : wire_type_name(m.type),
			      fd >= 0 && m.type == WIRE_REFUSE ? m.u.refuse.text : "", asks[i].reason);
			CHECK(sd_log_has(&d, asks[i].logged), "%s: the log lacks \"%s\"", asks[i].what, asks[i].logged);
			if (fd >= 0 && m.type == WIRE_REFUSE)
				printf("  %-22s -> REFUSE %s: %s\n", asks[i].what, wire_code_name(m.u.refuse.code),
				       m.u.refuse.text);
			if (fd >= 0)
				close(fd);
		}
		join_init(&j, 0xe0, 1, 2, fab);
		int fd1 = join_ok(&j, &m);
		join_init(&j, 0xe0, 1, 2, fab);
		int fd = ctl_join(&d, &j, NULL, 0, &m);
		CHECK(fd >= 0 && m.type == WIRE_REFUSE && m.u.refuse.code == WIRE_E_JOB_FULL &&
			      !strcmp(m.u.refuse.text, "the job has all its ranks"),
		      "full job: %s", fd >= 0 && m.type == WIRE_REFUSE ? m.u.refuse.text : "no REFUSE");
		CHECK(sd_log_has(&d, "already has all 2 ranks"), "full job: not in the log");
		for (int *f = (int[]){ fd, fd0, fd1 }, k = 0; k < 3; k++)
			if (f[k] >= 0)
				close(f[k]);
	}
	/* The daemon still serves a legitimate job, and every attacked job's
	 * memory came back. */
	sd_wait_idle(&d, "after the attacks");
	legit_job(0xc0, "legitimate job after the attacks");
	sd_wait_idle(&d, "after the legitimate job");

	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	fabric_close(fab);
	return th_summary("test_daemon_attack");
}
