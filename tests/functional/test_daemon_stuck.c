/* A result send that does not complete: rank 1 keeps its endpoint open but
 * never posts the receive for its result (a hung process), so the daemon's
 * send of a 1 MiB result to it stays outstanding (tcp;ofi_rxm: a rendezvous
 * send; shm: a CMA send the rank never reads). Rank 0 then disconnects:
 * the job is aborted, yet its memory cannot be returned while the provider
 * may still read the buffer.
 *
 * Checked: while that send is outstanding another job runs 24 chunks on
 * the same data thread, every sum right (on shm, where an endpoint
 * completes its sends in order, it stalled after its window before each
 * job got an endpoint of its own). The first job is reported as ending
 * with a send outstanding (/stats "state":"ending","ops_outstanding":1,
 * sumcast_jobs_ending 1) and stays charged; once [job] stuck-grace (1 s
 * here) is over the daemon logs it and
 *   tcp;ofi_rxm: drops the job's AV addresses, deregisters and frees
 *     (MADV_DONTNEED) the buffers: sumcast_memory_used_bytes falls to the
 *     bookkeeping and VmRSS by the region, while the job struct (the
 *     operation contexts) stays;
 *   shm: closes the job's own endpoint, the send with it, and frees the
 *     whole job: memory 0, no job ending, VmRSS down by the region.
 * Then the daemon still serves a new job and stops cleanly. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric_strict.h"
#include "test_daemon_harness.h"

#define CHUNK (1u << 20)
#define WINDOW 8u

static struct sd d;

static void tweak(struct wire_join *j)
{
	j->chunk_bytes = CHUNK;
	j->window = WINDOW;
	j->dtype_mask = 1u << SC_F32;
}

static bool wait_metric(const char *name, double want, unsigned ms)
{
	return sd_wait_metric(&d, name, TH_EQ, want, ms) == want;
}

/* /stats (into arg) shows the job ending with one operation outstanding
 * (the send to rank 1). */
static bool stats_ending(void *arg)
{
	char *st = arg;

	return sd_http(&d, "/stats", st, 1 << 16) == 200 && strstr(st, "\"state\":\"ending\"") &&
	       strstr(st, "\"ops_outstanding\":1,");
}

/* A job of two ranks runs 3 x WINDOW chunks, every sum checked, and
 * leaves. 0, or -1 (it stalled or a sum was wrong). */
static int bystander(uint64_t id)
{
	struct trank b[2] = { { .fd = -1 }, { .fd = -1 } };
	struct top rop[2], sop[2];
	int rc = -1;
	bool ok = true;

	for (int i = 0; i < 2; i++)
		ok &= trank_open(&b[i], 2 * CHUNK) == 0 && trank_join(&b[i], &d, id, (uint32_t)i, 2, tweak) == 0;
	if (!ok || trank_ready(&b[0], 3000) || trank_ready(&b[1], 3000))
		goto out;
	struct trank *all[2] = { &b[0], &b[1] };
	struct top *ops[4] = { &rop[0], &rop[1], &sop[0], &sop[1] };
	uint32_t c;
	for (c = 0; c < 3 * WINDOW; c++) {
		for (int i = 0; i < 2; i++) {
			for (size_t k = 0; k < CHUNK / 4; k++)
				((float *)b[i].buf)[k] = (float)(c + (uint32_t)i * (k % 5));
			uint32_t slot = c % b[i].ok.window;
			if (trank_post_result(&b[i], slot, 0, CHUNK, &rop[i]) ||
			    trank_send_chunk(&b[i], slot, c, SC_F32, SC_OP_SUM, 0, CHUNK, &sop[i]))
				goto out;
		}
		if (tranks_wait(all, 2, ops, 4, 5000))
			break;
		bool right = true;
		for (int i = 0; i < 2; i++)
			for (size_t k = 0; k < CHUNK / 4; k++)
				right &= ((float *)(b[i].buf + b[i].cap / 2))[k] == (float)(2 * c + k % 5);
		if (!right)
			break;
	}
	printf("  another job beside it: %u of %u chunks, every sum right\n", c, 3 * WINDOW);
	rc = c == 3 * WINDOW ? 0 : -1;
out:
	for (int i = 0; i < 2; i++)
		trank_close(&b[i]);
	return rc;
}

static bool stuck_logged_rdma(void *arg)
{
	const struct sd *daemon = arg;
	return sd_log_has(daemon, "job 0xc01 (handle 1): 1 result send(s) outstanding") &&
	       sd_log_has(daemon, "stay registered until those sends end (RDMA)");
}

int main(void)
{
	struct trank r[2];
	struct top rop, sop[2];
	struct wire_msg m;
	static char st[1 << 16];

	if (sd_start(&d, "[job]\nmemory-budget = 256M\nstuck-grace = 1s\n"))
		th_skip("sumcastd did not start (see above)");
	/* shm: each job has an endpoint of its own (dp_thread.c) */
	bool own = sd_log_has(&d, "each job gets an endpoint of its own");
	bool ok = true;
	for (int i = 0; i < 2; i++)
		ok &= trank_open(&r[i], 4 * CHUNK) == 0 &&
		      trank_join(&r[i], &d, 0xc01, (uint32_t)i, 2, tweak) == 0;
	CHECK(ok, "join");
	CHECK(trank_ready(&r[0], 3000) == 0 && trank_ready(&r[1], 3000) == 0, "READY");
	struct trank *all[2] = { &r[0], &r[1] };
	for (int i = 0; i < 2; i++)
		for (size_t k = 0; k < CHUNK / 4; k++)
			((float *)r[i].buf)[k] = 1.0f;
	/* rank 0 waits for its result; rank 1 never posts a receive for it */
	CHECK(trank_post_result(&r[0], 0, 0, CHUNK, &rop) == 0, "post");
	CHECK(trank_send_chunk(&r[0], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sop[0]) == 0 &&
		      trank_send_chunk(&r[1], 0, 0, SC_F32, SC_OP_SUM, 0, CHUNK, &sop[1]) == 0,
	      "send");
	struct top *ops[3] = { &rop, &sop[0], &sop[1] };
	CHECK(tranks_wait(all, 2, ops, 3, 5000) == 0 && !rop.err && rop.len == CHUNK, "rank 0 result");
	CHECK(((float *)(r[0].buf + r[0].cap / 2))[7] == 2.0f, "sum");
	/* The result send to rank 0 is done (the daemon counts its bytes at
	 * completion); the one to rank 1 stays outstanding (no receive). */
	CHECK(tranks_wait_metric(all, 2, &d, "sumcast_sent_bytes_total", TH_GE, CHUNK, 3000) == CHUNK,
	      "sent bytes %g, want %u: rank 0's result only", sd_metric(&d, "sumcast_sent_bytes_total"),
	      CHUNK);
	uint64_t used0 = (uint64_t)sd_metric(&d, "sumcast_memory_used_bytes");
	CHECK(bystander(0xc03) == 0, "another job beside the stuck send");
	CHECK(wait_metric("sumcast_memory_used_bytes", (double)used0, 3000), "the other job's memory not back: %g, "
	      "want %llu", sd_metric(&d, "sumcast_memory_used_bytes"), (unsigned long long)used0);

	long rss0 = sd_rss_kib(&d);
	/* rank 0's control connection drops: the job is aborted (rank_left) */
	close(r[0].fd);
	r[0].fd = -1;
	int rc = ctl_recv(r[1].fd, &m, 3000);
	CHECK(rc == 0 && m.type == WIRE_ABORT && m.u.abort.code == WIRE_E_RANK_LEFT,
	      "rank 1: rc %d %s", rc, rc ? "" : wire_type_name(m.type));
	trank_close(&r[0]);
	CHECK(wait_metric("sumcast_jobs", 0, 3000), "job still counted");
	CHECK(wait_metric("sumcast_jobs_ending", 1, 3000), "sumcast_jobs_ending %g",
	      sd_metric(&d, "sumcast_jobs_ending"));
	/* receives are cancelled at once; the send to rank 1 stays */
	CHECK(th_wait_until(stats_ending, st, 3000, 20), "/stats: %.600s", st);
	CHECK(sd_metric(&d, "sumcast_memory_used_bytes") == (double)used0 && used0 > 0,
	      "memory while the send is outstanding: %g, was %llu",
	      sd_metric(&d, "sumcast_memory_used_bytes"), (unsigned long long)used0);
	uint64_t region = (uint64_t)WINDOW * CHUNK * 3;
	if (own) {
		/* stuck-grace (1 s): its endpoint closed, the whole job freed */
		CHECK(wait_metric("sumcast_memory_used_bytes", 0, 5000) &&
			      wait_metric("sumcast_jobs_ending", 0, 3000),
		      "after stuck-grace: memory %g, jobs ending %g", sd_metric(&d, "sumcast_memory_used_bytes"),
		      sd_metric(&d, "sumcast_jobs_ending"));
		CHECK(sd_log_has(&d, "job 0xc01 (handle 1): 1 operation(s) outstanding") &&
			      sd_log_has(&d, "closed its endpoint"),
		      "stuck job not logged after stuck-grace");
	} else if (fabric_strict_level()) {
		/* the strict mode plays RDMA: memory under a posted send stays
		 * registered (and charged) until the send ends */
		CHECK(th_wait_until(stuck_logged_rdma, &d, 5000, 20), "stuck job not logged after stuck-grace (RDMA)");
		CHECK(sd_metric(&d, "sumcast_memory_used_bytes") == (double)used0,
		      "memory after stuck-grace: %g, want %llu (still registered)",
		      sd_metric(&d, "sumcast_memory_used_bytes"), (unsigned long long)used0);
	} else {
		/* stuck-grace (1 s): addresses dropped, buffers deregistered
		 * and freed, only the bookkeeping stays charged */
		CHECK(wait_metric("sumcast_memory_used_bytes", (double)(used0 - region), 5000),
		      "memory after stuck-grace: %g, want %llu", sd_metric(&d, "sumcast_memory_used_bytes"),
		      (unsigned long long)(used0 - region));
		CHECK(sd_log_has(&d, "job 0xc01 (handle 1): 1 result send(s) outstanding") &&
			      sd_log_has(&d, "removed 2 rank address(es) from the AV (0 shared with other jobs kept), released"),
		      "stuck job not logged after stuck-grace");
	}
	/* the pages go back to the kernel with the buffers: wait (bounded) */
	bool kept = !own && fabric_strict_level();
	long rss1 = kept ? sd_rss_kib(&d) : sd_wait_rss(&d, 0, rss0 - (long)(region / 1024 * 9 / 10), 5000);
	printf("  job ended with a result send outstanding: %llu bytes charged, after stuck-grace %.0f; VmRSS %ld -> %ld KiB\n",
	       (unsigned long long)used0, sd_metric(&d, "sumcast_memory_used_bytes"), rss0, rss1);
	CHECK(kept || rss0 - rss1 >= (long)(region / 1024 * 9 / 10), "VmRSS fell %ld KiB, region %llu KiB",
	      rss0 - rss1, (unsigned long long)(region / 1024));
	if (!own)
		CHECK(sd_metric(&d, "sumcast_jobs_ending") == 1, "the job struct stays (contexts): %g",
		      sd_metric(&d, "sumcast_jobs_ending"));
	trank_close(&r[1]);

	/* and the daemon still serves */
	ok = true;
	for (int i = 0; i < 2; i++)
		ok &= trank_open(&r[i], 4 * CHUNK) == 0 &&
		      trank_join(&r[i], &d, 0xc02, (uint32_t)i, 2, tweak) == 0;
	CHECK(ok && trank_ready(&r[0], 3000) == 0 && trank_ready(&r[1], 3000) == 0, "new job");
	for (int i = 0; i < 2; i++)
		trank_close(&r[i]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	return th_summary("test_daemon_stuck");
}
