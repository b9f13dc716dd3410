/* Jobs that must die, and how fast: contributions that disagree (length,
 * op, sequence) abort with WIRE_E_DATA and no result is ever delivered; an
 * oversize message (sender unknown) is dropped and the job goes on; a rank silent mid-chunk aborts with WIRE_E_TIMEOUT within the
 * job timeout plus a margin; a rank whose TCP connection closes mid-job
 * aborts the others with WIRE_E_RANK_LEFT at once; an idle READY job is
 * never timed out. Every dead job's memory returns to the pool. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_daemon_harness.h"

#define CHUNK (64u << 10)

static struct sd d;
static uint32_t join_timeout_ms;

static void tweak_timeout(struct wire_join *j)
{
	j->timeout_ms = join_timeout_ms;
}

static int pair(struct trank *rk, uint64_t id, uint32_t timeout_ms)
{
	join_timeout_ms = timeout_ms;
	for (uint32_t r = 0; r < 2; r++)
		if (trank_open(&rk[r], 4 * CHUNK) || trank_join(&rk[r], &d, id, r, 2, tweak_timeout))
			return -1;
	for (uint32_t r = 0; r < 2; r++)
		if (trank_ready(&rk[r], 5000))
			return -1;
	return 0;
}

/* Waits (bounded) until a control message is there for rank r, polling
 * every rank's endpoint meanwhile: a chunk above the eager size reaches the
 * daemon by a read the sender's provider must serve, so the ABORT it causes
 * comes only while the ranks are polled. Then reads it. */
static int recv_polling(struct trank *rk, uint32_t n, uint32_t r, struct wire_msg *m,
			unsigned timeout_ms)
{
	struct trank *all[2] = { &rk[0], &rk[1] };
	uint64_t end = sc_now_ms() + timeout_ms;

	while (sc_now_ms() < end) {
		struct pollfd p = { rk[r].fd, POLLIN, 0 };
		if (poll(&p, 1, 0) > 0)
			break;
		tranks_poll(all, n, 5);
	}
	return ctl_recv(rk[r].fd, m, 1000);
}

/* Both ranks must get ABORT(code) and no result. */
static void expect_abort(struct trank *rk, uint32_t n, uint16_t code, const char *want,
			 struct top *rops, const char *what)
{
	for (uint32_t r = 0; r < n; r++) {
		struct wire_msg m;
		int rc = recv_polling(rk, n, r, &m, 5000);
		CHECK(rc == 0 && m.type == WIRE_ABORT, "%s: rank %u got rc %d %s", what, r, rc,
		      rc ? "" : wire_type_name(m.type));
		if (rc || m.type != WIRE_ABORT)
			continue;
		CHECK(m.u.abort.code == code && m.u.abort.job_handle == rk[r].handle,
		      "%s: rank %u ABORT %s (%s), want %s", what, r, wire_code_name(m.u.abort.code),
		      m.u.abort.text, wire_code_name(code));
		CHECK(!want || strstr(m.u.abort.text, want), "%s: \"%s\" lacks \"%s\"", what,
		      m.u.abort.text, want);
		if (r == 0)
			printf("  %-12s -> ABORT %s: %s\n", what, wire_code_name(m.u.abort.code),
			       m.u.abort.text);
		CHECK(ctl_wait_closed(rk[r].fd, 3000) == 0, "%s: rank %u still connected", what, r);
	}
	if (rops) {
		struct trank *all[2] = { &rk[0], &rk[1] };
		tranks_poll(all, 2, 300);
		for (uint32_t r = 0; r < n; r++)
			CHECK(!rops[r].done || rops[r].err, "%s: rank %u received a result", what, r);
	}
}

static void close_pair(struct trank *rk)
{
	for (int r = 0; r < 2; r++)
		trank_close(&rk[r]);
}

static void wait_memory_free(const char *what)
{
	uint64_t end = sc_now_ms() + 5000;
	while (sd_metric(&d, "sumcast_memory_used_bytes") != 0 && sc_now_ms() < end)
		th_sleep_ms(20);
	CHECK(sd_metric(&d, "sumcast_memory_used_bytes") == 0, "%s: memory not returned (%g)", what,
	      sd_metric(&d, "sumcast_memory_used_bytes"));
}

/* Rank 0 sends (t0, op0, len0, seq0) into slot s0, rank 1 (t1, op1, len1, seq1). */
static void mismatch(uint64_t id, const char *what, enum sc_op op1, size_t len1, uint32_t seq1,
		     const char *want)
{
	struct trank rk[2];
	struct top rops[2], sops[2];

	CHECK(pair(rk, id, 0) == 0, "%s: setup", what);
	for (uint32_t r = 0; r < 2; r++) {
		float *f = (float *)rk[r].buf;
		for (size_t i = 0; i < CHUNK / 4; i++)
			f[i] = 1.0f;
		trank_post_result(&rk[r], 0, 0, CHUNK, &rops[r]);
	}
	trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops[0]);
	struct trank *p0 = &rk[0];
	tranks_poll(&p0, 1, 100);
	trank_send_chunk(&rk[1], seq1 % 4, seq1, SC_F32, op1, 0, len1, &sops[1]);
	struct trank *all[2] = { &rk[0], &rk[1] };
	tranks_poll(all, 2, 100);
	expect_abort(rk, 2, WIRE_E_DATA, want, rops, what);
	close_pair(rk);
	wait_memory_free(what);
}

int main(void)
{
	struct trank rk[2];
	struct top rops[2], sops[2];

	/* join-timeout: long enough for two ranks to open and join on a
	 * loaded 2-core host, short enough for the join-timeout case. */
	if (sd_start(&d, "[job]\nmemory-budget = 64M\ntimeout = 10s\njoin-timeout = 3s\n"))
		th_skip("sumcastd did not start (see above)");

	/* Contributions that disagree. */
	mismatch(0x201, "length", SC_OP_SUM, CHUNK / 2, 0, "32768 bytes");
	mismatch(0x202, "op", SC_OP_MAX, CHUNK, 0, "max");
	mismatch(0x203, "sequence", SC_OP_SUM, CHUNK, 4, "seq 4");
	{
		/* Oversize: 2 chunks into a 1-chunk buffer. Error completions
		 * carry no source, so the daemon cannot tell the rank from a
		 * stranger who guessed its tag: it drops the message and the
		 * job goes on; the rank's real chunk then completes the sum. */
		struct top sops2[2];
		CHECK(pair(rk, 0x204, 0) == 0, "oversize: setup");
		double t0 = sd_metric(&d, "sumcast_errors_total{kind=\"truncated\"}");
		for (uint32_t r = 0; r < 2; r++) {
			float *f = (float *)rk[r].buf;
			for (size_t i = 0; i < CHUNK / 4; i++)
				f[i] = 1.0f + (float)r;
			trank_post_result(&rk[r], 0, 0, CHUNK, &rops[r]);
		}
		trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, 2 * CHUNK, &sops[0]);
		struct trank *all[2] = { &rk[0], &rk[1] };
		uint64_t end = sc_now_ms() + 5000;
		while (sd_metric(&d, "sumcast_errors_total{kind=\"truncated\"}") < t0 + 1 &&
		       sc_now_ms() < end)
			tranks_poll(all, 2, 20);
		CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"truncated\"}") == t0 + 1,
		      "truncated not counted");
		trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops2[0]);
		trank_send_chunk(&rk[1], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops2[1]);
		struct top *res[2] = { &rops[0], &rops[1] };
		CHECK(tranks_wait(all, 2, res, 2, 5000) == 0, "oversize: no result after the real chunks");
		for (uint32_t r = 0; r < 2; r++) {
			CHECK(rops[r].err == 0 && rops[r].len == CHUNK, "oversize: rank %u result err %d len %zu",
			      r, rops[r].err, rops[r].len);
			const float *f = (const float *)(rk[r].buf + rk[r].cap / 2);
			size_t bad = 0;
			for (size_t i = 0; i < CHUNK / 4; i++)
				bad += f[i] != 3.0f;
			CHECK(bad == 0, "oversize: rank %u has %zu wrong sums", r, bad);
		}
		close_pair(rk);
		wait_memory_free("oversize");

		/* The same drop when the rank never resends: the job timeout
		 * names the rank and mentions the dropped message. */
		CHECK(pair(rk, 0x206, 1000) == 0, "oversize-timeout: setup");
		trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, 2 * CHUNK, &sops[0]);
		trank_send_chunk(&rk[1], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops[1]);
		tranks_poll(all, 2, 100);
		expect_abort(rk, 2, WIRE_E_TIMEOUT, "1 oversize messages were dropped", NULL,
			     "oversize-timeout");
		close_pair(rk);
		wait_memory_free("oversize-timeout");
	}
	CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"data\"}") == 3, "data aborts counted: %g",
	      sd_metric(&d, "sumcast_errors_total{kind=\"data\"}"));
	/* Only the oversize case's real chunk was ever completed. */
	CHECK(sd_metric(&d, "sumcast_chunks_reduced_total") == 1, "chunks completed: %g",
	      sd_metric(&d, "sumcast_chunks_reduced_total"));

	/* Idle READY job with a 500 ms timeout: never timed out. */
	{
		struct wire_msg m;
		CHECK(pair(rk, 0x205, 500) == 0, "idle: setup");
		CHECK(rk[0].ok.timeout_ms == 500, "granted timeout %u, asked 500", rk[0].ok.timeout_ms);
		CHECK(ctl_recv(rk[0].fd, &m, 1500) == -ETIMEDOUT, "idle READY job got %s",
		      wire_type_name(m.type));
		/* Now rank 0 sends chunk 0 and rank 1 stays silent. */
		trank_post_result(&rk[0], 0, 0, CHUNK, &rops[0]);
		trank_post_result(&rk[1], 0, 0, CHUNK, &rops[1]);
		uint64_t t0 = sc_now_ms();
		trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops[0]);
		struct trank *all[2] = { &rk[0], &rk[1] };
		tranks_poll(all, 2, 50);
		int rc = ctl_recv(rk[1].fd, &m, 5000);
		uint64_t dt = sc_now_ms() - t0;
		CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_TIMEOUT,
		      "silent rank: rank 1 got rc %d %s %s", rc, rc ? "" : wire_type_name(m.type),
		      rc ? "" : m.u.abort.text);
		/* not before the timeout; after it within a margin for loaded hosts
		 * (the text below names the cause) */
		CHECK(dt >= 450 && dt < 500 + 4000, "timeout ABORT after %llu ms, timeout 500 ms",
		      (unsigned long long)dt);
		CHECK(rc == 0 && strstr(m.u.abort.text, "rank 1 sent nothing for") &&
			      strstr(m.u.abort.text, "(chunk seq 0)"),
		      "timeout text: %s", rc ? "" : m.u.abort.text);
		printf("  %-12s -> ABORT %s after %llu ms: %s\n", "silent rank",
		       wire_code_name(m.u.abort.code), (unsigned long long)dt, m.u.abort.text);
		CHECK(ctl_recv(rk[0].fd, &m, 1000) == 0 && m.type == WIRE_ABORT &&
			      m.u.abort.code == WIRE_E_TIMEOUT,
		      "rank 0 got no ABORT(timeout)");
		tranks_poll(all, 2, 100);
		CHECK(!rops[0].done || rops[0].err, "timed out job delivered a result");
		close_pair(rk);
		wait_memory_free("timeout");
	}
	/* TCP close mid-job: rank 0 sent a chunk, rank 1's connection dies. */
	{
		struct wire_msg m;
		CHECK(pair(rk, 0x206, 0) == 0, "rank left: setup");
		trank_post_result(&rk[0], 0, 0, CHUNK, &rops[0]);
		trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops[0]);
		struct trank *p0 = &rk[0];
		tranks_poll(&p0, 1, 100);
		uint64_t t0 = sc_now_ms();
		close(rk[1].fd);
		rk[1].fd = -1;
		int rc = ctl_recv(rk[0].fd, &m, 3000);
		uint64_t dt = sc_now_ms() - t0;
		CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_RANK_LEFT,
		      "rank 0 got rc %d %s", rc, rc ? "" : wire_type_name(m.type));
		/* the close, not a timeout (the job's is 30 s), ended it */
		CHECK(dt < 3000, "rank_left ABORT took %llu ms", (unsigned long long)dt);
		printf("  %-12s -> ABORT %s after %llu ms: %s\n", "tcp close",
		       wire_code_name(m.u.abort.code), (unsigned long long)dt, rc ? "" : m.u.abort.text);
		close_pair(rk);
		wait_memory_free("rank left");
	}
	/* A clean LEAVE between collectives, then the other rank sends a
	 * chunk: the job fails at once (rank_left), not after its 10 s
	 * timeout, and the rank that left is not told. */
	{
		struct wire_msg m;
		CHECK(pair(rk, 0x209, 0) == 0, "left: setup");
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = rk[0].handle;
		CHECK(ctl_send(rk[0].fd, &l) == 0, "left: LEAVE not sent");
		CHECK(ctl_wait_closed(rk[0].fd, 3000) == 0, "left: connection not closed after LEAVE");
		CHECK(sd_wait_log(&d, "job 0x209 rank 0 left", 0, NULL, 0, 3000), "left: LEAVE not seen");
		/* No ABORT for a clean LEAVE between collectives. */
		CHECK(ctl_recv(rk[1].fd, &m, 300) == -ETIMEDOUT, "left: rank 1 told %s right after the LEAVE",
		      wire_type_name(m.type));
		trank_post_result(&rk[1], 0, 0, CHUNK, &rops[1]);
		uint64_t t0 = sc_now_ms();
		trank_send_chunk(&rk[1], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops[1]);
		int rc = recv_polling(rk, 2, 1, &m, 5000);
		uint64_t dt = sc_now_ms() - t0;
		CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_RANK_LEFT,
		      "left: rank 1 got rc %d %s %s after %llu ms, want ABORT(rank_left) at once", rc,
		      rc ? "" : wire_type_name(m.type), rc ? "" : m.u.abort.text, (unsigned long long)dt);
		CHECK(rc == 0 && strstr(m.u.abort.text, "rank 0 left") && strstr(m.u.abort.text, "chunk seq 0"),
		      "left: text: %s", rc ? "" : m.u.abort.text);
		CHECK(dt < 3000, "left: ABORT after %llu ms (the job timeout is 10 s)", (unsigned long long)dt);
		printf("  %-12s -> ABORT %s after %llu ms: %s\n", "left, then",
		       rc ? "-" : wire_code_name(m.u.abort.code), (unsigned long long)dt, rc ? "" : m.u.abort.text);
		close_pair(rk);
		wait_memory_free("left");
	}
	/* TCP close of a READY job between chunks: the others are told too. */
	{
		struct wire_msg m;
		CHECK(pair(rk, 0x207, 0) == 0, "disconnect: setup");
		close(rk[0].fd);
		rk[0].fd = -1;
		int rc = ctl_recv(rk[1].fd, &m, 3000);
		CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_RANK_LEFT,
		      "idle disconnect: rank 1 got rc %d", rc);
		close_pair(rk);
		wait_memory_free("disconnect");
	}
	/* A job whose ranks never all join dies after join-timeout. */
	{
		struct wire_msg m;
		struct trank r0;
		CHECK(trank_open(&r0, 4 * CHUNK) == 0 && trank_join(&r0, &d, 0x208, 0, 2, NULL) == 0,
		      "join timeout: setup");
		uint64_t t0 = sc_now_ms();
		int rc = ctl_recv(r0.fd, &m, 8000);
		CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_TIMEOUT,
		      "join timeout: rc %d", rc);
		printf("  %-12s -> ABORT %s after %llu ms: %s\n", "join timeout",
		       rc ? "-" : wire_code_name(m.u.abort.code), (unsigned long long)(sc_now_ms() - t0),
		       rc ? "" : m.u.abort.text);
		trank_close(&r0);
		wait_memory_free("join timeout");
	}
	char body[64];
	CHECK(sd_http(&d, "/healthz", body, sizeof(body)) == 200, "daemon unhealthy at the end");
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	return th_summary("test_daemon_abort");
}
