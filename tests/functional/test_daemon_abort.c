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

/* Both ranks must get ABORT(code). */
static void expect_abort(struct trank *rk, uint32_t n, uint16_t code, const char *want,
			 const char *what)
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
}

static void close_pair(struct trank *rk)
{
	for (int r = 0; r < 2; r++)
		trank_close(&rk[r]);
}

static void wait_memory_free(const char *what)
{
	double m = sd_wait_metric(&d, "sumcast_memory_used_bytes", TH_EQ, 0, 5000);

	CHECK(m == 0, "%s: memory not returned (%g)", what, m);
}

/* No rank of an aborted job got a result, proven without a pause: the
 * daemon counts a result's bytes (sumcast_sent_bytes_total) when its send
 * is done, and gives a job's memory back only once every send is; so with
 * the memory back and the count where it was before the job (tx0), no
 * result left the daemon, and one CQ pass shows none arrived. */
static void expect_no_result(struct trank *rk, struct top *rops, double tx0, const char *what)
{
	struct trank *all[2] = { &rk[0], &rk[1] };

	wait_memory_free(what);
	CHECK(sd_metric(&d, "sumcast_sent_bytes_total") == tx0, "%s: the daemon sent %g result bytes",
	      what, sd_metric(&d, "sumcast_sent_bytes_total") - tx0);
	tranks_poll(all, 2, 0);
	for (uint32_t r = 0; r < 2; r++)
		CHECK(!rops[r].done || rops[r].err, "%s: rank %u received a result", what, r);
}

/* Waits until the daemon has taken rank 0's chunk (its received bytes
 * reach rx0 + len), polling rank 0's endpoint so that its provider sends
 * it: what comes next then finds the chunk there, however loaded the
 * host. */
static void wait_chunk_in(struct trank *rk, double rx0, size_t len, const char *what)
{
	struct trank *p0 = &rk[0];
	double rx = tranks_wait_metric(&p0, 1, &d, "sumcast_received_bytes_total", TH_GE, rx0 + (double)len,
				       5000);

	CHECK(rx >= rx0 + (double)len, "%s: rank 0's chunk not taken by the daemon (%g bytes)", what,
	      rx - rx0);
}

/* Rank 0 sends (t0, op0, len0, seq0) into slot s0, rank 1 (t1, op1, len1, seq1). */
static void mismatch(uint64_t id, const char *what, enum sc_op op1, size_t len1, uint32_t seq1,
		     const char *want)
{
	struct trank rk[2];
	struct top rops[2], sops[2];

	CHECK(pair(rk, id, 0) == 0, "%s: setup", what);
	double rx0 = sd_metric(&d, "sumcast_received_bytes_total"),
	       tx0 = sd_metric(&d, "sumcast_sent_bytes_total");
	for (uint32_t r = 0; r < 2; r++) {
		float *f = (float *)rk[r].buf;
		for (size_t i = 0; i < CHUNK / 4; i++)
			f[i] = 1.0f;
		trank_post_result(&rk[r], 0, 0, CHUNK, &rops[r]);
	}
	/* rank 0's chunk first: the slot takes its type, op, length and seq */
	trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops[0]);
	wait_chunk_in(rk, rx0, CHUNK, what);
	trank_send_chunk(&rk[1], seq1 % 4, seq1, SC_F32, op1, 0, len1, &sops[1]);
	expect_abort(rk, 2, WIRE_E_DATA, want, what); /* it polls both ranks meanwhile */
	expect_no_result(rk, rops, tx0, what);
	close_pair(rk);
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
		CHECK(tranks_wait_metric(all, 2, &d, "sumcast_errors_total{kind=\"truncated\"}", TH_GE, t0 + 1,
					 5000) == t0 + 1,
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
		expect_abort(rk, 2, WIRE_E_TIMEOUT, "1 oversize messages were dropped", "oversize-timeout");
		close_pair(rk);
		wait_memory_free("oversize-timeout");
	}
	CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"data\"}") == 3, "data aborts counted: %g",
	      sd_metric(&d, "sumcast_errors_total{kind=\"data\"}"));
	CHECK(sd_metric(&d, "sumcast_jobs_aborted_total{reason=\"data\"}") == 3, "data aborts by reason: %g",
	      sd_metric(&d, "sumcast_jobs_aborted_total{reason=\"data\"}"));
	/* Only the oversize case's real chunk was ever completed. */
	CHECK(sd_metric(&d, "sumcast_chunks_reduced_total") == 1, "chunks completed: %g",
	      sd_metric(&d, "sumcast_chunks_reduced_total"));

	/* An idle READY job with a 500 ms timeout is never timed out; a job
	 * whose rank 1 stays silent with chunk 0 half in is, after 500 ms.
	 * The second is the witness of the first, not a pause: the scan that
	 * times it out (every 20 ms, over every job of the one data thread)
	 * found the idle job, READY before the other's chunk, idle for longer
	 * than its timeout in that scan or an earlier one, so a wrong timeout
	 * of the idle job would be counted by then. */
	{
		struct wire_msg m;
		struct trank idle[2];
		const char *timeouts = "sumcast_errors_total{kind=\"timeout\"}";
		CHECK(pair(idle, 0x205, 500) == 0, "idle: setup");
		CHECK(idle[0].ok.timeout_ms == 500, "granted timeout %u, asked 500", idle[0].ok.timeout_ms);
		double to0 = sd_metric(&d, timeouts);
		CHECK(pair(rk, 0x20a, 500) == 0, "silent rank: setup");
		double rx0 = sd_metric(&d, "sumcast_received_bytes_total"),
		       tx0 = sd_metric(&d, "sumcast_sent_bytes_total");
		trank_post_result(&rk[0], 0, 0, CHUNK, &rops[0]);
		trank_post_result(&rk[1], 0, 0, CHUNK, &rops[1]);
		uint64_t t0 = sc_now_ms();
		trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops[0]);
		wait_chunk_in(rk, rx0, CHUNK, "silent rank");
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
		CHECK(sd_metric(&d, timeouts) == to0 + 1, "%g jobs timed out, want 1 (the idle READY job too?)",
		      sd_metric(&d, timeouts) - to0);
		for (uint32_t r = 0; r < 2; r++)
			CHECK(ctl_recv(idle[r].fd, &m, 0) == -ETIMEDOUT, "idle READY job: rank %u got %s", r,
			      wire_type_name(m.type));
		close_pair(idle); /* its memory back too, for expect_no_result */
		expect_no_result(rk, rops, tx0, "timeout");
		close_pair(rk);
	}
	/* Five ranks, chunk 0 sent by ranks 0 and 2 only: the timeout names
	 * every rank the slot waits for, as ranges, and how many of how many. */
	{
		struct wire_msg m;
		struct trank g[5];
		struct top gops[5];
		struct trank *all[5];
		join_timeout_ms = 500;
		for (uint32_t r = 0; r < 5; r++) {
			all[r] = &g[r];
			CHECK(trank_open(&g[r], 4 * CHUNK) == 0 &&
				      trank_join(&g[r], &d, 0x20c, r, 5, tweak_timeout) == 0,
			      "five ranks: rank %u joins", r);
		}
		for (uint32_t r = 0; r < 5; r++)
			CHECK(trank_ready(&g[r], 5000) == 0, "five ranks: rank %u READY", r);
		double rx0 = sd_metric(&d, "sumcast_received_bytes_total");
		trank_send_chunk(&g[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &gops[0]);
		trank_send_chunk(&g[2], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &gops[2]);
		uint64_t end = sc_now_ms() + 10000;
		while (sd_metric(&d, "sumcast_received_bytes_total") < rx0 + 2 * CHUNK && sc_now_ms() < end)
			tranks_poll(all, 5, 10);
		int rc = ctl_recv(g[1].fd, &m, 5000);
		CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_TIMEOUT &&
			      strstr(m.u.abort.text, "ranks 1, 3-4 (3 of 5) sent nothing for") &&
			      strstr(m.u.abort.text, "(chunk seq 0)"),
		      "five ranks: the timeout names ranks 1, 3-4: %s", rc ? "no ABORT" : m.u.abort.text);
		if (rc == 0)
			printf("  %-12s -> ABORT %s: %s\n", "five ranks", wire_code_name(m.u.abort.code),
			       m.u.abort.text);
		for (uint32_t r = 0; r < 5; r++)
			trank_close(&g[r]);
		wait_memory_free("five ranks");
	}
	/* TCP close mid-job: rank 0 sent a chunk, rank 1's connection dies. */
	{
		struct wire_msg m;
		CHECK(pair(rk, 0x206, 0) == 0, "rank left: setup");
		double rx0 = sd_metric(&d, "sumcast_received_bytes_total");
		trank_post_result(&rk[0], 0, 0, CHUNK, &rops[0]);
		trank_send_chunk(&rk[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sops[0]);
		wait_chunk_in(rk, rx0, CHUNK, "rank left");
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
		/* No ABORT for a clean LEAVE between collectives: the LEAVE is
		 * taken (its log line above), so an ABORT for it would already
		 * be the first message on rank 1's connection, before the one
		 * its chunk causes below (which names chunk seq 0). */
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
