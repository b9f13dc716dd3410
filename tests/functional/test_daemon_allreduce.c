/* Allreduce by hand through sumcastd: N ranks in this process, each with
 * its own fabric endpoint, speak JOIN over TCP and DATA/RESULT over
 * libfabric, pipelined with window credits (so slots are reused and chunks
 * c + window can arrive while slot c still sends). Sums are checked for f32
 * and bf16, normal and deterministic mode; a foreign endpoint sending DATA
 * with a joined rank's tag does not take the rank's receive (it is
 * dropped as unexpected and counted); a clean LEAVE by every
 * rank ends the job without ABORT; /metrics and /stats are parsed. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_daemon_harness.h"

#define MAXR 4
#define CHUNK (64u << 10)
#define WINDOW 4u

static struct sd d;

static bool deterministic;
static void tweak_det(struct wire_join *j)
{
	if (deterministic)
		j->flags |= WIRE_JOIN_F_DETERMINISTIC;
}

/* Runs nchunks chunks of len bytes; returns the number of wrong elements,
 * or -1 if the run did not complete. */
static long run(struct trank *rk, uint32_t n, enum sc_dtype t, uint32_t nchunks, size_t len)
{
	struct trun p = { .t = t, .window = WINDOW, .stride = CHUNK, .len = len, .count = nchunks,
			  .timeout_ms = 30000 };

	return tranks_allreduce(rk, n, &p);
}

static int count_str(const char *text, const char *s)
{
	int n = 0;
	for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
		n++;
	return n;
}

static void leave_all(struct trank *rk, uint32_t n)
{
	struct wire_msg m;
	for (uint32_t r = 0; r < n; r++) {
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = rk[r].handle;
		CHECK(ctl_send(rk[r].fd, &l) == 0, "LEAVE rank %u", r);
		int rc = ctl_recv(rk[r].fd, &m, 2000);
		CHECK(rc == -EPIPE, "rank %u after clean LEAVE: rc %d %s %s", r, rc,
		      rc ? "" : wire_type_name(m.type), !rc && m.type == WIRE_ABORT ? m.u.abort.text : "");
	}
}

static void one_job(uint64_t id, uint32_t n, enum sc_dtype t, uint32_t nchunks, size_t len,
		    bool det, struct trank *foreign)
{
	struct trank rk[MAXR];
	int ok = 1;

	deterministic = det;
	for (uint32_t r = 0; r < n; r++) {
		ok &= trank_open(&rk[r], 2 * WINDOW * CHUNK) == 0;
		ok &= ok && trank_join(&rk[r], &d, id, r, n, tweak_det) == 0;
	}
	CHECK(ok, "job 0x%llx: open/join failed", (unsigned long long)id);
	if (!ok)
		return;
	for (uint32_t r = 0; r < n; r++)
		CHECK(trank_ready(&rk[r], 5000) == 0, "rank %u: no READY", r);
	if (foreign) {
		/* An endpoint that never joined sends rank 0's first chunk, after
		 * the daemon posted rank 0's receive for it: the receive takes
		 * only rank 0's messages, so this one stays unexpected until the
		 * sweep drops it (a rendezvous send, which never completes). */
		struct top op;
		fi_addr_t da;
		const char *un = "sumcast_errors_total{kind=\"unexpected\"}";
		double u0 = sd_metric(&d, un), u = u0;
		CHECK(fabric_av_insert(foreign->f, rk[0].ok.addr, rk[0].ok.addr_len, &da) == 0, "av");
		foreign->daemon = da;
		foreign->handle = rk[0].handle;
		foreign->rank = 0;
		memset(foreign->buf, 0x7f, CHUNK);
		CHECK(trank_send_chunk(foreign, 0, 0, t, SC_OP_SUM, 0, len, &op) == 0, "foreign send");
		u = tranks_wait_metric(&foreign, 1, &d, un, TH_GE, u0 + 1, 5000);
		CHECK(u == u0 + 1, "the foreign chunk was not dropped as unexpected: %g -> %g", u0, u);
	}
	long wrong = run(rk, n, t, nchunks, len);
	CHECK(wrong == 0, "job 0x%llx %s %u ranks %u chunks of %zu%s: %ld wrong elements",
	      (unsigned long long)id, sc_dtype_name(t), n, nchunks, len, det ? " (deterministic)" : "",
	      wrong);
	printf("  job 0x%llx: %u ranks, %s, %u chunks of %zu bytes%s: %s\n", (unsigned long long)id, n,
	       sc_dtype_name(t), nchunks, len, det ? ", deterministic" : "",
	       wrong == 0 ? "sums correct" : "WRONG");
	/* /stats per rank: last_count and the counter last_wait_seconds_total. */
	static char st[1 << 16];
	CHECK(sd_http(&d, "/stats", st, sizeof(st)) == 200 && th_json_ok(st), "/stats");
	CHECK(count_str(st, "\"last_wait_seconds_total\":") == (int)n &&
		      !strstr(st, "\"last_wait_seconds\":"),
	      "/stats ranks without last_wait_seconds_total: %.400s", st);
	leave_all(rk, n);
	for (uint32_t r = 0; r < n; r++)
		trank_close(&rk[r]);
}

static bool json_ok(const char *text)
{
	FILE *p;
	char cmd[] = "python3 -c 'import json,sys; d=json.load(sys.stdin); "
		     "assert d[\"version\"] and isinstance(d[\"jobs\"], list)' 2>/dev/null";

	if (system("command -v python3 >/dev/null 2>&1"))
		return strchr(text, '{') && strstr(text, "\"jobs\":[");
	p = popen(cmd, "w");
	if (!p)
		return false;
	fputs(text, p);
	return pclose(p) == 0;
}

int main(void)
{
	static char body[1 << 16];
	struct trank foreign;
	char ctype[128];
	double w0 = floor(sc_wall_s());
	if (sd_start(&d, "[job]\nmemory-budget = 256M\n"))
		th_skip("sumcastd did not start (see above)");
	double w1 = floor(sc_wall_s());
	CHECK(sd_http_ctype(&d, "/metrics", ctype, sizeof(ctype), body, sizeof(body)) == 200 &&
		      !strcmp(ctype, "text/plain; version=0.0.4; charset=utf-8"),
	      "/metrics Content-Type \"%s\"", ctype);
	double st0 = th_metric(body, "sumcast_start_time_seconds");
	CHECK(st0 >= w0 && st0 <= w1 + 1, "sumcast_start_time_seconds %.3f not in [%.0f, %.0f]", st0, w0,
	      w1 + 1);
	CHECK(strstr(body, "# TYPE sumcast_start_time_seconds gauge\n") != NULL, "start time TYPE");

	one_job(0x101, 2, SC_F32, 23, CHUNK, false, NULL);
	one_job(0x102, 2, SC_BF16, 11, CHUNK, false, NULL);
	one_job(0x103, 3, SC_F32, 9, CHUNK - 4 * 100, false, NULL); /* short chunks */
	one_job(0x104, 4, SC_BF16, 9, 2000, true, NULL);

	double rx = sd_metric(&d, "sumcast_received_bytes_total");
	double want_rx = 2.0 * 23 * CHUNK + 2.0 * 11 * CHUNK + 3.0 * 9 * (CHUNK - 400) + 4.0 * 9 * 2000;
	CHECK(rx == want_rx, "received_bytes %g, want %g", rx, want_rx);
	CHECK(sd_metric(&d, "sumcast_sent_bytes_total") == want_rx, "sent_bytes %g",
	      sd_metric(&d, "sumcast_sent_bytes_total"));
	CHECK(sd_metric(&d, "sumcast_chunks_reduced_total") == 23 + 11 + 9 + 9, "chunks %g",
	      sd_metric(&d, "sumcast_chunks_reduced_total"));
	CHECK(sd_metric(&d, "sumcast_reduce_duration_seconds_count") == 52, "reduce histogram count");
	CHECK(sd_metric(&d, "sumcast_straggler_wait_seconds_bucket{le=\"+Inf\"}") == 52,
	      "straggler histogram +Inf bucket");

	/* Foreign endpoint using rank 0's tag. */
	if (trank_open(&foreign, 2 * CHUNK))
		th_skip("cannot open a test endpoint");
	if (!strcmp(th_provider(), "shm")) {
		/* libfabric 1.17 shm reports a joined rank's fi_addr as the source
		 * of an endpoint the daemon never inserted (docs/daemon.md, known
		 * gaps): the check would fail, and a job would be aborted. */
		printf("  foreign-source check skipped: shm does not report foreign sources\n");
	} else if (foreign.f->has_source) {
		/* It never reaches a receive, so it is not even a foreign source. */
		double f0 = sd_metric(&d, "sumcast_errors_total{kind=\"foreign_source\"}");
		one_job(0x105, 2, SC_F32, 6, CHUNK, false, &foreign);
		double f1 = sd_metric(&d, "sumcast_errors_total{kind=\"foreign_source\"}");
		CHECK(f1 == f0, "foreign_source %g -> %g: the foreign chunk took a rank's receive", f0, f1);
	} else {
		printf("  foreign-source check skipped: provider %s reports no sources\n", th_provider());
	}
	trank_close(&foreign);

	/* /metrics: every line is a comment or "name[{labels}] number". */
	CHECK(sd_http(&d, "/metrics", body, sizeof(body)) == 200, "/metrics status");
	int bad = 0, lines = 0;
	for (char *l = strtok(body, "\n"); l; l = strtok(NULL, "\n")) {
		lines++;
		if (*l == '#')
			continue;
		char *sp = strrchr(l, ' ');
		char *end;
		if (!sp || (strtod(sp + 1, &end), *end != '\0'))
			bad++;
	}
	CHECK(bad == 0 && lines > 40, "/metrics: %d of %d lines unparsable", bad, lines);
	CHECK(sd_http(&d, "/stats", body, sizeof(body)) == 200 && json_ok(body), "/stats JSON: %s",
	      body);
	CHECK(sd_metric(&d, "sumcast_start_time_seconds") == st0, "start time moved: %.3f -> %.3f", st0,
	      sd_metric(&d, "sumcast_start_time_seconds"));
	CHECK(sd_metric(&d, "sumcast_jobs") == 0 && sd_metric(&d, "sumcast_memory_used_bytes") == 0,
	      "jobs left over: %g, memory %g", sd_metric(&d, "sumcast_jobs"),
	      sd_metric(&d, "sumcast_memory_used_bytes"));
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	return th_summary("test_daemon_allreduce");
}
