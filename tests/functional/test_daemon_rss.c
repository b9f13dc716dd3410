/* Memory accounting against reality: 4 jobs of 4 ranks, window 8, chunk
 * 1 MiB, f32 only, are joined; the daemon's VmRSS must grow by the formula
 * window x chunk x (nranks + 1) per job (job memory is prefaulted), and
 * shrink back when the jobs end. Prints the numbers. The budget is charged
 * the buffers plus the bookkeeping (/stats buffer_bytes +
 * bookkeeping_bytes): a budget of exactly the buffers refuses the job. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_daemon_harness.h"

#define JOBS 4
#define RANKS 4
#define WINDOW 8
#define CHUNKB (1u << 20)

static struct sd d;

static void tweak(struct wire_join *j)
{
	j->window = WINDOW;
	j->chunk_bytes = CHUNKB;
	j->dtype_mask = 1u << SC_F32;
}

int main(void)
{
	struct fabric *ep[RANKS];
	struct fabric_params fp = { .provider = th_provider() };
	int fds[JOBS][RANKS];
	struct wire_msg m;

	if (strcmp(fp.provider, "shm"))
		fp.node = "127.0.0.1";
	for (int r = 0; r < RANKS; r++)
		if (fabric_open(&fp, &ep[r]))
			th_skip("no libfabric provider for the test endpoints");
	if (sd_start(&d, "[job]\nmemory-budget = 1G\n"))
		th_skip("sumcastd did not start (see above)");
	/* idle: once its start-up allocations are done */
	long base = sd_rss_settled(&d, 3000);

	uint64_t formula = (uint64_t)WINDOW * CHUNKB * (RANKS + 1);
	/* what the jobs may add: at least 95% of the formula (prefaulted), at
	 * most the formula + 16 MiB */
	long grow_lo = (long)(JOBS * formula * 95 / 100 / 1024);
	long grow_hi = (long)((JOBS * formula + (16u << 20)) / 1024);
	for (int j = 0; j < JOBS; j++)
		for (int r = 0; r < RANKS; r++) {
			struct wire_join w;
			join_init(&w, 0x400 + (uint64_t)j, (uint32_t)r, RANKS, ep[r]);
			tweak(&w);
			fds[j][r] = ctl_join(&d, &w, NULL, 0, &m);
			CHECK(fds[j][r] >= 0 && m.type == WIRE_JOIN_OK, "job %d rank %d join", j, r);
		}
	for (int j = 0; j < JOBS; j++)
		for (int r = 0; r < RANKS; r++)
			CHECK(ctl_recv(fds[j][r], &m, 5000) == 0 && m.type == WIRE_READY,
			      "job %d rank %d READY", j, r);
	/* the memory is prefaulted by the time the daemon is done with the
	 * joins; wait (bounded) for VmRSS to show it */
	long joined = sd_wait_rss(&d, base + grow_lo, base + grow_hi, 5000);
	double used = sd_metric(&d, "sumcast_memory_used_bytes");
	long grew = joined - base;
	printf("  formula: %d jobs x window %d x chunk %u x (%d ranks + 1) = %d x %llu = %llu KiB\n", JOBS,
	       WINDOW, CHUNKB, RANKS, JOBS, (unsigned long long)formula,
	       (unsigned long long)(JOBS * formula / 1024));
	printf("  VmRSS idle %ld KiB, with %d jobs joined %ld KiB: +%ld KiB (%.3f x formula); "
	       "sumcast_memory_used_bytes %.0f\n",
	       base, JOBS, joined, grew, (double)grew * 1024 / (double)(JOBS * formula), used);
	static char st[1 << 16];
	CHECK(sd_http(&d, "/stats", st, sizeof(st)) == 200, "/stats");
	double sum = 0;
	int seen = 0;
	for (const char *p = strstr(st, "\"memory\":"); p; p = strstr(p + 1, "\"memory\":")) {
		unsigned long long mem = 0, buf = 0, book = 0;
		if (sscanf(p, "\"memory\":%llu,\"buffer_bytes\":%llu,\"bookkeeping_bytes\":%llu", &mem,
			   &buf, &book) != 3)
			break;
		seen++;
		sum += (double)mem;
		CHECK(buf == formula && mem == buf + book && book > (unsigned long long)WINDOW * RANKS * 64 &&
			      book < (unsigned long long)WINDOW * RANKS * 512 + 4096,
		      "job memory %llu = buffers %llu + bookkeeping %llu (formula %llu)", mem, buf, book,
		      (unsigned long long)formula);
		if (seen == 1)
			printf("  per job: buffers %llu + bookkeeping %llu = %llu bytes charged\n", buf, book,
			       mem);
	}
	CHECK(seen == JOBS && used == sum, "memory_used %g, sum of /stats jobs %g (%d jobs)", used, sum,
	      seen);
	CHECK(grew >= grow_lo && grew <= grow_hi,
	      "RSS grew %ld KiB for %llu KiB of jobs", grew,
	      (unsigned long long)(JOBS * formula / 1024));

	for (int j = 0; j < JOBS; j++)
		for (int r = 0; r < RANKS; r++)
			close(fds[j][r]); /* ends the jobs (the other ranks get ABORT) */
	double used_after = sd_wait_metric(&d, "sumcast_memory_used_bytes", TH_EQ, 0, 5000);
	/* the pages go back to the kernel when the buffers are freed; wait
	 * (bounded) for VmRSS to come down */
	long after = sd_wait_rss(&d, 0, base + 8 * 1024 - 1, 5000);
	printf("  after the jobs ended: VmRSS %ld KiB (%+ld KiB vs idle)\n", after, after - base);
	CHECK(used_after == 0, "memory not returned: %g", used_after);
	CHECK(after - base < 8 * 1024, "RSS did not shrink: %ld KiB over idle", after - base);

	/* Budget = the buffers of one job exactly: its bookkeeping does not fit. */
	char conf[128];
	snprintf(conf, sizeof(conf), "[job]\nmemory-budget = %llu\n", (unsigned long long)formula);
	CHECK(sd_write_conf(&d, conf) == 0, "rewrite");
	kill(d.pid, SIGHUP);
	sd_wait_metric(&d, "sumcast_memory_budget_bytes", TH_EQ, (double)formula, 3000);
	struct wire_join w;
	join_init(&w, 0x4ff, 0, RANKS, ep[0]);
	tweak(&w);
	int fd = ctl_join(&d, &w, NULL, 0, &m);
	CHECK(fd >= 0 && m.type == WIRE_REFUSE && m.u.refuse.code == WIRE_E_MEMORY &&
		      strstr(m.u.refuse.text, "bookkeeping"),
	      "budget = buffers exactly: %s %s", fd >= 0 ? wire_type_name(m.type) : "no reply",
	      fd >= 0 && m.type == WIRE_REFUSE ? m.u.refuse.text : "");
	if (fd >= 0 && m.type == WIRE_REFUSE)
		printf("  budget %llu: %s\n", (unsigned long long)formula, m.u.refuse.text);
	if (fd >= 0)
		close(fd);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status");
	sd_cleanup(&d);
	for (int r = 0; r < RANKS; r++)
		fabric_close(ep[r]);
	return th_summary("test_daemon_rss");
}
