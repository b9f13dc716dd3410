/* Several jobs at once through the real sumcastd, driven by hand (JOIN over
 * TCP, DATA/RESULT over libfabric, pipelined with window credits), every
 * element of every result checked:
 *
 *   threads  [data] threads = 2 and cpus = "<b>,<a>": four jobs joined
 *            together are each spread over both data threads (/stats
 *            "lanes" 2), their lane 0 two on each (/stats "thread"), all
 *            sums right, and each data thread (/proc/<pid>/task/<tid>/comm =
 *            sumcastd-dataN) has Cpus_allowed_list = its CPU.
 *   lanes    [data] threads = 2: a job of window 3 over 2 lanes (uneven),
 *            one whose ranks join in protocol 6 (one lane: they cannot
 *            address more), all sums right; a protocol 6 rank joining a
 *            job of 2 lanes is refused (version); then job-threads = 1:
 *            two jobs, one lane each, one on each thread; reloaded
 *            (SIGHUP) to job-threads = 0, the next job has 2 lanes;
 *            tcp: a job of 64 receives where a thread's queue has 36
 *            free is taken over 2 lanes (FI_OFI_RXM_RX_SIZE=48).
 *   eagain   the daemon's rxm tx queue shrunk to 8 entries
 *            (FI_OFI_RXM_TX_SIZE=8 in its environment) under a job of 8
 *            ranks x window 8: result sends are refused with -FI_EAGAIN for
 *            real, go through the retry list
 *            (sumcast_fabric_eagain_total{op="send"} > 0), and every sum is
 *            still right.
 *
 *   burst    two jobs on one data thread: A (window 8, 1,500 chunks) floods
 *            while B (window 2, 100 chunks) runs. Each holds the credit it
 *            was given (/stats "window": 8 and 2, B's slots its own), so
 *            A's burst cannot take B's window: B completes, every sum right,
 *            while A has done at most 2/3 of its chunks (measured: 190-400,
 *            A served 2-4 chunks per chunk of B; a daemon serving A's
 *            backlog first would finish A first). Counts, not clocks.
 *   weights  the same with weights ([job] max-weight = 2): A asks weight 3
 *            and is granted 2 (JOIN_OK and /stats "weight"), its window 2
 *            x 2 = 4; B weight 1, window 2. A's share is about twice B's:
 *            B's 100 chunks complete when A has done 150-210 (check: at
 *            least 130, and B not starved: at most 2/3 of A's 1,500).
 *   pacelink weights with equal windows (A asks window 1 and weight 2, B
 *            window 2 and weight 1: both granted 2), so only the pacer
 *            (daemon/pacer.h) can give A twice B's share, on a shaped link
 *            (alone, root; ctest functional/test_daemon_pace_link): a
 *            network namespace whose loopback is tc tbf 400 Mbit/s, 16 KiB
 *            chunks, 3,000 and 750. While B does its chunks 250..750, A
 *            does about 1,000 with the pacer (its run about as long as the
 *            other: no throughput lost), about 500 without (check: at
 *            least 750, and the daemon logged "pacing 2 jobs" only with
 *            it on).
 *   overcredit  A's rank 1 sends chunks 2..7 at once, past its credit (window
 *            2; each with its true values), then goes on as it should, while B
 *            runs beside it. The credit holds: what is past it is discarded as
 *            unexpected (counted; A runs on) or fails A (ABORT data: "rank 1
 *            sent chunk seq 4 into slot 0, expected seq 2"); never taken as
 *            another chunk: every result A got is right. B completes, every
 *            sum right, not held up (it completed with A at about its count).
 *            On shm (unexpected messages kept, no sweep) A fails or stops:
 *            a result to rank 1 that finds no receive stalls the endpoint
 *            it was sent on, A's own (on a shared endpoint B stopped after
 *            4 of its 100 chunks on a loaded host: dp_thread.c).
 *
 *   tenants  the jobs count in the PONG (the adaptive split's hint; [job]
 *            tenant-idle = 1s): A's rank asks while B and C are joined but
 *            have sent nothing (1), after both ran (3), after B left (2) and
 *            when C has been idle past tenant-idle (1).
 *
 * Usage: test_daemon_multi [threads|lanes|eagain|burst|weights|overcredit|tenants|pacelink]...
 * (none: all but pacelink). */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_daemon_harness.h"

#define MAXR 8
#define MAXW 8
#define CHUNK (64u << 10)

struct tjob {
	uint64_t id;
	uint32_t n, nchunks, window;
	size_t len;
	struct trank rk[MAXR];
	struct top sops[MAXR][MAXW], rops[MAXR][MAXW];
	uint32_t next[MAXR], got[MAXR];
	long wrong;
	bool failed;
	uint32_t rogue;   /* rank 1 sends this many chunks past its credit at once
			   * (window + rogue <= MAXW): no result of the job wrong */
	struct top rogue_ops[MAXW];
	uint64_t done_at; /* chunks of every job's rank 0 with results when this job completed */
	uint32_t mark;    /* and when its rank 0 had this many (0: not kept) */
	uint64_t mark_at;
};

static struct sd d;
static uint32_t want_window = 4;
static uint16_t want_weight; /* 0: none sent */

static float val(uint64_t job, uint32_t r, uint32_t c, size_t i)
{
	return (float)((r + 1 + (job & 3)) * ((i + c) % 13)); /* exact sums */
}

static void tweak_window(struct wire_join *j)
{
	j->window = want_window;
	j->weight = want_weight;
}

static int send_chunk(struct tjob *j, uint32_t r, uint32_t c)
{
	struct trank *rk = &j->rk[r];
	uint32_t s = c % j->window;
	float *sb = (float *)(rk->buf + (size_t)s * CHUNK);

	for (size_t i = 0; i < j->len / 4; i++)
		sb[i] = val(j->id, r, c, i);
	int rc = trank_post_result(rk, s, (size_t)s * CHUNK, CHUNK, &j->rops[r][s]);
	if (rc) {
		fprintf(stderr, "job 0x%llx rank %u chunk %u: posting the result receive: %s\n",
			(unsigned long long)j->id, r, c, fi_strerror(-rc));
		return -1;
	}
	rc = trank_send_chunk(rk, s, c & WIRE_SEQ_MASK, SC_F32, SC_OP_SUM, (size_t)s * CHUNK, j->len,
			      &j->sops[r][s]);
	if (rc) {
		fprintf(stderr, "job 0x%llx rank %u chunk %u: sending: %s\n", (unsigned long long)j->id,
			r, c, fi_strerror(-rc));
		return -1;
	}
	j->next[r] = c + 1;
	return 0;
}

static uint16_t want_ver; /* the ranks' JOIN version, 0: WIRE_VERSION */

static int job_join(struct tjob *j, uint64_t id, uint32_t n, uint32_t nchunks, size_t len)
{
	memset(j, 0, sizeof(*j));
	j->id = id;
	j->n = n;
	j->nchunks = nchunks;
	j->len = len;
	for (uint32_t r = 0; r < n; r++) {
		if (trank_open(&j->rk[r], 2 * MAXW * CHUNK))
			return -1;
		j->rk[r].ver = want_ver;
		if (trank_join(&j->rk[r], &d, id, r, n, tweak_window))
			return -1;
	}
	for (uint32_t r = 0; r < n; r++)
		if (trank_ready(&j->rk[r], 5000))
			return -1;
	j->window = j->rk[0].ok.window;
	return j->window >= 1 && j->window <= MAXW ? 0 : -1;
}

/* Rank r's next result if it is in: checked (every element), the next
 * chunk sent in its slot. false: none in (or the job failed). */
static bool take_result(struct tjob *j, uint32_t r)
{
	if (j->got[r] >= j->nchunks || j->failed)
		return false;
	uint32_t c = j->got[r], s = c % j->window;
	struct top *ro = &j->rops[r][s];
	if (!ro->done || !j->sops[r][s].done)
		return false;
	if (ro->err || ro->len != j->len || wire_imm_seq(ro->data) != (c & WIRE_SEQ_MASK)) {
		fprintf(stderr, "job 0x%llx rank %u chunk %u: err %d len %zu seq %u\n", (unsigned long long)j->id,
			r, c, ro->err, ro->len, wire_imm_seq(ro->data));
		j->failed = true;
		return false;
	}
	if (!trank_result_from_lane(&j->rk[r], s, j->len, ro)) {
		j->failed = true;
		return false;
	}
	const float *rb = (const float *)(j->rk[r].buf + j->rk[r].cap / 2 + (size_t)s * CHUNK);
	for (size_t i = 0; i < j->len / 4; i++) {
		float want = 0;
		for (uint32_t q = 0; q < j->n; q++)
			want += val(j->id, q, c, i);
		j->wrong += rb[i] != want;
	}
	j->got[r]++;
	if (j->next[r] < j->nchunks && send_chunk(j, r, j->next[r]))
		j->failed = true;
	return true;
}

/* Drives every job to the end together. 0, or -1 if one did not complete. */
static int jobs_run(struct tjob *js, size_t nj)
{
	struct trank *all[4 * MAXR];
	size_t na = 0;
	uint64_t deadline = sc_now_ms() + 60000;

	for (size_t k = 0; k < nj; k++)
		for (uint32_t r = 0; r < js[k].n; r++) {
			all[na++] = &js[k].rk[r];
			for (uint32_t c = 0; c < js[k].window && c < js[k].nchunks; c++)
				if (send_chunk(&js[k], r, c))
					return -1;
			/* past the credit: chunks window + i, each from a buffer of
			 * its own (the send half's unused slots) holding its true
			 * values: taken as the chunk (a rank may be a window
			 * ahead), it sums right and the rank's own send of that
			 * chunk later is the duplicate */
			for (uint32_t i = 0; r == 1 && i < js[k].rogue; i++) {
				uint32_t c = js[k].window + i, b = js[k].window + i;
				float *sb = (float *)(js[k].rk[r].buf + (size_t)b * CHUNK);
				for (size_t e = 0; e < js[k].len / 4; e++)
					sb[e] = val(js[k].id, r, c, e);
				if (trank_send_chunk(&js[k].rk[r], c % js[k].window, c & WIRE_SEQ_MASK, SC_F32,
						     SC_OP_SUM, (size_t)b * CHUNK, js[k].len, &js[k].rogue_ops[i]))
					return -1;
			}
		}
	while (sc_now_ms() < deadline) {
		bool done = true;
		tranks_poll(all, na, 0);
		for (size_t k = 0; k < nj; k++) {
			struct tjob *j = &js[k];
			for (uint32_t r = 0; r < j->n && !j->failed; r++) {
				if (j->got[r] < j->nchunks && !j->rogue)
					done = false;
				/* every result in, so that a job with more credit
				 * (window) is served more per pass */
				while (take_result(j, r))
					;
			}
		}
		uint64_t all_got = 0;
		for (size_t k = 0; k < nj; k++)
			all_got += js[k].got[0];
		for (size_t k = 0; k < nj; k++) {
			if (js[k].mark && !js[k].mark_at && js[k].got[0] >= js[k].mark)
				js[k].mark_at = all_got;
			bool end = !js[k].done_at;
			for (uint32_t r = 0; r < js[k].n; r++)
				end &= js[k].got[r] >= js[k].nchunks;
			if (end)
				js[k].done_at = all_got;
		}
		if (done)
			break;
	}
	int rc = 0;
	for (size_t k = 0; k < nj; k++) {
		struct tjob *j = &js[k];
		bool complete = !j->failed;
		for (uint32_t r = 0; r < j->n; r++)
			complete &= j->got[r] == j->nchunks;
		CHECK(complete == !j->rogue && j->wrong == 0, "job 0x%llx: %s, %ld wrong elements",
		      (unsigned long long)j->id, complete ? "complete" : "INCOMPLETE", j->wrong);
		printf("  job 0x%llx: %u ranks, window %u, %u chunks of %zu bytes: %s\n",
		       (unsigned long long)j->id, j->n, j->window, j->nchunks, j->len,
		       !complete ? "incomplete" : j->wrong ? "WRONG" : "sums correct");
		if (!complete && !j->rogue)
			rc = -1;
	}
	return rc;
}

static void job_leave(struct tjob *j)
{
	for (uint32_t r = 0; r < j->n; r++) {
		struct wire_msg l = { .type = WIRE_LEAVE }, m;
		l.u.leave.job_handle = j->rk[r].handle;
		CHECK(ctl_send(j->rk[r].fd, &l) == 0, "LEAVE");
		int rc = ctl_recv(j->rk[r].fd, &m, 3000);
		CHECK(rc == -EPIPE, "job 0x%llx rank %u after LEAVE: rc %d", (unsigned long long)j->id,
		      r, rc);
		trank_close(&j->rk[r]);
	}
}

/* "thread":N of the job with this handle in /stats, -1 if absent. */
/* The job's number of "lanes" in /stats, -1: not found. */
static int stats_lanes(const char *st, uint32_t handle)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"handle\":%u,", handle);
	const char *p = strstr(st, pat);
	if (!p || !(p = strstr(p, "\"lanes\":")))
		return -1;
	return atoi(p + strlen("\"lanes\":"));
}

static int stats_thread(const char *st, uint32_t handle)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"handle\":%u,", handle);
	const char *p = strstr(st, pat);
	if (!p || !(p = strstr(p, "\"thread\":")))
		return -1;
	return atoi(p + strlen("\"thread\":"));
}

/* Cpus_allowed_list of the daemon thread named comm ("" if none); comm
 * NULL: the main thread. */
static void task_cpus(pid_t pid, const char *comm, char *out, size_t cap)
{
	char path[320], line[256];
	DIR *dir;
	struct dirent *e;

	*out = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(dir = opendir(path)))
		return;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		if (!comm && atoi(e->d_name) != (int)pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		bool match = !comm || (fgets(line, sizeof(line), f) && !strncmp(line, comm, strlen(comm)) &&
				       (line[strlen(comm)] == '\n' || !line[strlen(comm)]));
		fclose(f);
		if (!match)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "Cpus_allowed_list:", 18)) {
				char *v = line + 18;
				while (*v == ' ' || *v == '\t')
					v++;
				size_t n = strcspn(v, "\n");
				if (n >= cap)
					n = cap - 1;
				memcpy(out, v, n);
				out[n] = 0;
			}
		fclose(f);
	}
	closedir(dir);
}

struct cpus_wait {
	const char *comm;
	char *got;
	size_t cap;
};

/* The thread named comm runs, and its CPU list is in got. */
static bool cpus_known(void *arg)
{
	struct cpus_wait *w = arg;

	task_cpus(d.pid, w->comm, w->got, w->cap);
	return *w->got != 0;
}

/* Starts d with conf and an rxm setting var=val in its environment (set
 * for the start alone; tcp;ofi_rxm only). 0: started; -1: skipped or did
 * not start (said which). */
static int sd_start_rxm(const char *what, const char *var, const char *val, const char *conf)
{
	if (strcmp(th_provider(), "tcp;ofi_rxm")) {
		printf("  %s: skipped, %s is for tcp;ofi_rxm\n", what, var);
		return -1;
	}
	setenv(var, val, 1);
	int rc = sd_start(&d, conf);
	unsetenv(var);
	if (rc)
		CHECK(0, "sumcastd with %s=%s did not start", var, val);
	return rc ? -1 : 0;
}

/* Rank 1 of job `job` (2 ranks) joins in protocol `ver` once its rank 0
 * (this build's protocol) has: the daemon's answer in *m. false: rank 1
 * got no answer. Both leave. */
static bool join_late(uint64_t job, uint16_t ver, struct wire_msg *m)
{
	struct trank late, first;

	memset(&first, 0, sizeof(first));
	CHECK(trank_open(&late, 2 * MAXW * CHUNK) == 0, "a rank's endpoint");
	CHECK(trank_open(&first, 2 * MAXW * CHUNK) == 0 &&
		      trank_join(&first, &d, job, 0, 2, tweak_window) == 0,
	      "rank 0 of job 0x%llx joins", (unsigned long long)job);
	late.ver = ver;
	join_init(&late.join, job, 1, 2, late.f);
	tweak_window(&late.join);
	late.fd = ctl_join_ver(&d, &late.join, NULL, 0, ver, m);
	bool answered = late.fd >= 0;
	trank_close(&late);
	trank_close(&first);
	return answered;
}

static void mode_lanes(void)
{
	static struct tjob js[2];
	static char st[1 << 16];

	if (sd_start(&d, "[data]\nthreads = 2\n[job]\nmemory-budget = 256M\n")) {
		CHECK(0, "sumcastd with 2 data threads did not start");
		return;
	}
	bool ok = true;
	want_window = 3; /* lane 0 has slots 0 and 2, lane 1 slot 1 */
	ok &= job_join(&js[0], 0xb01, 3, 40, CHUNK - 400) == 0;
	want_ver = 6;
	want_window = 4;
	ok &= job_join(&js[1], 0xb02, 2, 30, 4096) == 0;
	want_ver = 0;
	CHECK(ok, "joining two jobs failed");
	if (!ok)
		return;
	CHECK(sd_http(&d, "/stats", st, sizeof(st)) == 200, "/stats");
	CHECK(stats_lanes(st, js[0].rk[0].handle) == 2 && js[0].rk[0].lanes == 2,
	      "window 3 job: lanes %d in /stats, %u in JOIN_OK", stats_lanes(st, js[0].rk[0].handle),
	      js[0].rk[0].lanes);
	CHECK(stats_lanes(st, js[1].rk[0].handle) == 1 && js[1].rk[0].lanes == 1,
	      "protocol 6 job: lanes %d in /stats, %u in JOIN_OK", stats_lanes(st, js[1].rk[0].handle),
	      js[1].rk[0].lanes);
	/* a protocol 6 rank cannot address a job of 2 lanes: refused */
	struct wire_msg m;
	bool answered = join_late(0xb03, 6, &m);
	CHECK(answered && m.type == WIRE_REFUSE && m.u.refuse.code == WIRE_E_VERSION &&
		      strstr(m.u.refuse.text, "2 data threads"),
	      "protocol 6 rank of a 2-lane job: type %u code %u \"%s\"", m.type,
	      m.type == WIRE_REFUSE ? m.u.refuse.code : 0, m.type == WIRE_REFUSE ? m.u.refuse.text : "");
	printf("  protocol 6 rank joining a job of 2 lanes: %s\n",
	       m.type == WIRE_REFUSE ? m.u.refuse.text : "not refused");
	jobs_run(js, 2);
	double chunks = sd_metric(&d, "sumcast_chunks_reduced_total");
	CHECK(chunks == 40 + 30, "chunks reduced %g", chunks);
	CHECK(sd_metric(&d, "sumcast_result_sends_spread_total") == 0,
	      "results of %u bytes spread", js[0].rk[0].ok.spread);
	for (int k = 0; k < 2; k++)
		job_leave(&js[k]);

	/* Results spread over the lanes (protocol 8): 8-byte results of 3
	 * ranks over 2 lanes, rank 1's from the other lane than its slot's
	 * (every result's sender checked where the provider names it); a
	 * protocol 7 job of 2 lanes sends each from its slot's lane, and a
	 * protocol 7 rank cannot join a job that spreads. Not on shm (a data
	 * thread there sleeps between polls: no spread, every result from its
	 * slot's lane, a protocol 7 rank welcome). */
	bool spreads = strcmp(th_provider(), "shm") != 0;
	want_window = 4;
	ok = job_join(&js[0], 0xb04, 3, 60, 8) == 0;
	want_ver = 7;
	ok &= job_join(&js[1], 0xb05, 3, 50, 8) == 0;
	want_ver = 0;
	CHECK(ok, "joining the jobs of 8-byte results failed");
	if (!ok)
		return;
	CHECK(js[0].rk[0].lanes == 2 &&
		      (spreads ? js[0].rk[0].ok.spread >= 8 && js[0].rk[0].ok.spread <= 4096
			       : js[0].rk[0].ok.spread == 0) &&
		      js[1].rk[0].lanes == 2 && js[1].rk[0].ok.spread == 0,
	      "JOIN_OK: lanes %u spread %u (protocol 8), lanes %u spread %u (protocol 7)",
	      js[0].rk[0].lanes, js[0].rk[0].ok.spread, js[1].rk[0].lanes, js[1].rk[0].ok.spread);
	answered = join_late(0xb06, 7, &m);
	CHECK(answered &&
		      (spreads ? m.type == WIRE_REFUSE && m.u.refuse.code == WIRE_E_VERSION &&
					 strstr(m.u.refuse.text, "spreads its results")
			       : m.type == WIRE_JOIN_OK),
	      "protocol 7 rank of a job that %s: type %u code %u \"%s\"", spreads ? "spreads" : "does not", m.type,
	      m.type == WIRE_REFUSE ? m.u.refuse.code : 0, m.type == WIRE_REFUSE ? m.u.refuse.text : "");
	jobs_run(js, 2);
	double spread = sd_metric(&d, "sumcast_result_sends_spread_total");
	CHECK(spread == (spreads ? 60 : 0), "result sends spread: %g, want %d (rank 1's of 0xb04)", spread,
	      spreads ? 60 : 0);
	printf("  8-byte results over 2 lanes (spread up to %u bytes): %g of %d sends from the other "
	       "lane; protocol 7: none\n", js[0].rk[0].ok.spread, spread, 3 * 60);
	for (int k = 0; k < 2; k++)
		job_leave(&js[k]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);

	/* job-threads = 1: a job on one thread, as before lanes */
	if (sd_start(&d, "[data]\nthreads = 2\njob-threads = 1\n[job]\nmemory-budget = 256M\n")) {
		CHECK(0, "sumcastd with job-threads = 1 did not start");
		return;
	}
	want_window = 4;
	ok = job_join(&js[0], 0xb04, 2, 30, CHUNK) == 0 && job_join(&js[1], 0xb05, 2, 30, CHUNK) == 0;
	CHECK(ok, "joining two jobs failed");
	if (!ok)
		return;
	CHECK(sd_http(&d, "/stats", st, sizeof(st)) == 200, "/stats");
	int t0 = stats_thread(st, js[0].rk[0].handle), t1 = stats_thread(st, js[1].rk[0].handle);
	CHECK(stats_lanes(st, js[0].rk[0].handle) == 1 && stats_lanes(st, js[1].rk[0].handle) == 1 &&
		      js[0].rk[0].lanes == 1,
	      "job-threads = 1: lanes %d and %d", stats_lanes(st, js[0].rk[0].handle),
	      stats_lanes(st, js[1].rk[0].handle));
	CHECK(t0 + t1 == 1, "job-threads = 1: jobs on threads %d and %d", t0, t1);
	printf("  job-threads = 1: jobs on threads %d and %d, one lane each\n", t0, t1);
	jobs_run(js, 2);
	for (int k = 0; k < 2; k++)
		job_leave(&js[k]);
	/* job-threads is reloadable: back to 0 (every thread), a new job has 2 lanes */
	CHECK(sd_write_conf(&d, "[data]\nthreads = 2\n[job]\nmemory-budget = 256M\n") == 0,
	      "rewrite config");
	kill(d.pid, SIGHUP);
	CHECK(sd_wait_log(&d, "data.job-threads: 1 -> 0", 0, NULL, 0, 5000),
	      "job-threads 1 -> 0 not applied on SIGHUP");
	CHECK(!sd_log_has(&d, "job-threads: 1 -> 0 needs a restart"), "job-threads needed a restart");
	want_window = 4;
	CHECK(job_join(&js[0], 0xb06, 2, 30, CHUNK) == 0, "joining a job after the reload failed");
	CHECK(sd_http(&d, "/stats", st, sizeof(st)) == 200, "/stats");
	CHECK(stats_lanes(st, js[0].rk[0].handle) == 2 && js[0].rk[0].lanes == 2,
	      "after the reload to job-threads = 0: lanes %d in /stats, %u in JOIN_OK",
	      stats_lanes(st, js[0].rk[0].handle), js[0].rk[0].lanes);
	printf("  job-threads 1 -> 0 on SIGHUP: the next job has %d lanes\n",
	       stats_lanes(st, js[0].rk[0].handle));
	jobs_run(js, 1);
	job_leave(&js[0]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);

	/* A job no thread's receive queue holds whole, taken over two lanes:
	 * rxm's queue at 48 (the sweep keeps 12: 36 for jobs), 8 ranks x
	 * window 8 = 64 receives, 32 a lane. */
	if (sd_start_rxm("lanes by receive room", "FI_OFI_RXM_RX_SIZE", "48",
			 "[data]\nthreads = 2\n[job]\nmemory-budget = 256M\n"))
		return;
	want_window = 8;
	if (job_join(&js[0], 0xb07, 8, 40, 4096)) {
		CHECK(0, "a job of 64 receives over two lanes of 36 was not taken");
		sd_stop(&d, SIGTERM, 10000);
		sd_cleanup(&d);
		return;
	}
	CHECK(sd_http(&d, "/stats", st, sizeof(st)) == 200, "/stats");
	CHECK(stats_lanes(st, js[0].rk[0].handle) == 2, "lanes %d", stats_lanes(st, js[0].rk[0].handle));
	printf("  a job of 64 receives, 36 free a thread: taken over %d lanes\n",
	       stats_lanes(st, js[0].rk[0].handle));
	jobs_run(js, 1);
	CHECK(sd_metric(&d, "sumcast_chunks_reduced_total") == 40, "chunks %g",
	      sd_metric(&d, "sumcast_chunks_reduced_total"));
	job_leave(&js[0]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
}

static void mode_threads(void)
{
	static struct tjob js[4];
	static char st[1 << 17];
	cpu_set_t set;
	int cpus[2], nc = 0;
	char conf[256];

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int c = 0; c < CPU_SETSIZE && nc < 2; c++)
			if (CPU_ISSET(c, &set))
				cpus[nc++] = c;
	if (nc == 2) /* reversed, so thread 0 does not just get CPU 0 */
		snprintf(conf, sizeof(conf), "[data]\nthreads = 2\ncpus = %d,%d\n[job]\nmemory-budget = 256M\n",
			 cpus[1], cpus[0]);
	else
		snprintf(conf, sizeof(conf), "[data]\nthreads = 2\n[job]\nmemory-budget = 256M\n");
	if (sd_start(&d, conf)) {
		CHECK(0, "sumcastd with 2 data threads did not start");
		return;
	}
	CHECK(sd_metric(&d, "sumcast_data_threads") == 2, "data threads %g",
	      sd_metric(&d, "sumcast_data_threads"));
	if (nc == 2) {
		char got[64], want[16];
		for (int t = 0; t < 2; t++) {
			char comm[32];
			snprintf(comm, sizeof(comm), "sumcastd-data%d", t);
			snprintf(want, sizeof(want), "%d", cpus[1 - t]);
			/* the thread names itself when it starts running */
			struct cpus_wait w = { comm, got, sizeof(got) };
			th_wait_until(cpus_known, &w, 3000, 10);
			CHECK(!strcmp(got, want), "%s: Cpus_allowed_list \"%s\", want \"%s\"", comm, got,
			      want);
			printf("  %s: Cpus_allowed_list %s\n", comm, got);
		}
		task_cpus(d.pid, NULL, got, sizeof(got));
		CHECK(*got && strcmp(got, want), "main thread pinned too: \"%s\"", got);
	} else {
		printf("  pinning check skipped: this process may run on %d CPU(s) only\n", nc);
	}

	/* Four jobs joined together: each on both threads (lanes), lane 0
	 * 2 + 2. */
	bool ok = true;
	want_window = 4;
	ok &= job_join(&js[0], 0xa01, 2, 40, CHUNK) == 0;
	ok &= job_join(&js[1], 0xa02, 3, 30, CHUNK - 400) == 0;
	ok &= job_join(&js[2], 0xa03, 2, 50, 4096) == 0;
	ok &= job_join(&js[3], 0xa04, 4, 20, CHUNK) == 0;
	CHECK(ok, "joining four jobs failed");
	if (!ok)
		return;
	CHECK(sd_http(&d, "/stats", st, sizeof(st)) == 200, "/stats");
	int on[2] = { 0, 0 };
	for (int k = 0; k < 4; k++) {
		int t = stats_thread(st, js[k].rk[0].handle);
		CHECK(t == 0 || t == 1, "job 0x%llx thread %d", (unsigned long long)js[k].id, t);
		int l = stats_lanes(st, js[k].rk[0].handle);
		CHECK(l == 2 && js[k].rk[0].lanes == 2, "job 0x%llx lanes %d in /stats, %u in JOIN_OK",
		      (unsigned long long)js[k].id, l, js[k].rk[0].lanes);
		if (t == 0 || t == 1)
			on[t]++;
	}
	CHECK(on[0] == 2 && on[1] == 2, "jobs per data thread: %d + %d", on[0], on[1]);
	printf("  jobs per data thread: %d + %d\n", on[0], on[1]);
	jobs_run(js, 4);
	double chunks = sd_metric(&d, "sumcast_chunks_reduced_total");
	CHECK(chunks == 40 + 30 + 50 + 20, "chunks reduced %g", chunks);
	double busy0 = sd_metric(&d, "sumcast_data_thread_busy_seconds_total{thread=\"0\"}");
	double busy1 = sd_metric(&d, "sumcast_data_thread_busy_seconds_total{thread=\"1\"}");
	CHECK(busy0 > 0 && busy1 > 0, "both data threads busy: %g %g", busy0, busy1);
	for (int k = 0; k < 4; k++)
		job_leave(&js[k]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
}

static void mode_eagain(void)
{
	static struct tjob j;

	if (sd_start_rxm("eagain", "FI_OFI_RXM_TX_SIZE", "8", "[job]\nmemory-budget = 256M\n"))
		return;
	want_window = 8;
	if (job_join(&j, 0xb01, 8, 64, CHUNK)) {
		CHECK(0, "join 8 ranks");
		return;
	}
	double e0 = sd_metric(&d, "sumcast_fabric_eagain_total{op=\"send\"}");
	CHECK(e0 == 0, "eagain before the job: %g", e0);
	jobs_run(&j, 1);
	double e1 = sd_metric(&d, "sumcast_fabric_eagain_total{op=\"send\"}");
	printf("  result sends refused with -FI_EAGAIN and retried: %g\n", e1);
	CHECK(e1 > 0, "the -FI_EAGAIN path of result sends was not taken");
	CHECK(sd_metric(&d, "sumcast_chunks_reduced_total") == 64, "chunks %g",
	      sd_metric(&d, "sumcast_chunks_reduced_total"));
	/* The daemon counts a send when its completion arrives, which may
	 * trail the rank's receive completion a little. */
	double sent = sd_wait_metric(&d, "sumcast_sent_bytes_total", TH_GE, 64.0 * 8 * CHUNK, 3000);
	CHECK(sent == 64.0 * 8 * CHUNK, "sent bytes %g", sent);
	CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"send_error\"}") == 0, "send errors");
	job_leave(&j);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
}

/* "<key>":N of the job with this handle in /stats, -1 if absent. */
static int stats_job_field(const char *st, uint32_t handle, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"handle\":%u,", handle);
	const char *p = strstr(st, pat);
	if (!p)
		return -1;
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	if (!(p = strstr(p, pat)))
		return -1;
	return atoi(p + strlen(pat));
}

static bool pace_logged; /* the daemon of the last pair_run logged pacing */
static size_t pair_len = CHUNK; /* bytes of each chunk pair_run_n's jobs send */
static uint32_t pair_mark;      /* B's chunks at which pair_run_n notes A's in a_at_mark */
static long a_at_mark;

/* Two jobs of 2 ranks on one data thread under conf: A (nchunks[0] chunks,
 * window win[0] and weight wt[0] asked; 0: none sent) and B (nchunks[1],
 * win[1], wt[1]). Checks what each was granted (JOIN_OK, /stats: window
 * gw[k], weight gwt[k]), runs both to the end (every sum checked) and
 * returns how many chunks A had done when B completed; -1: B did not. */
static long pair_run_n(const char *conf, uint64_t id, const uint32_t nchunks[2], const uint32_t win[2],
		       const uint16_t wt[2], const uint32_t gw[2], const uint16_t gwt[2])
{
	static struct tjob js[2];
	static char st[1 << 16];
	bool ok = true;

	if (sd_start(&d, conf)) {
		CHECK(0, "sumcastd did not start");
		return -1;
	}
	for (int k = 0; k < 2; k++) {
		want_window = win[k];
		want_weight = wt[k];
		ok &= job_join(&js[k], id + (uint64_t)k, 2, nchunks[k], pair_len) == 0;
	}
	want_weight = 0;
	js[1].mark = pair_mark;
	CHECK(ok, "joining the two jobs failed");
	if (!ok)
		return -1;
	CHECK(sd_metric(&d, "sumcast_data_threads") == 1, "data threads %g",
	      sd_metric(&d, "sumcast_data_threads"));
	CHECK(sd_http(&d, "/stats", st, sizeof(st)) == 200, "/stats");
	for (int k = 0; k < 2; k++) {
		const struct wire_join_ok *o = &js[k].rk[0].ok;
		int sw = stats_job_field(st, o->job_handle, "window"), swt = stats_job_field(st, o->job_handle, "weight");
		CHECK(o->window == gw[k] && o->weight == gwt[k] && sw == (int)gw[k] && swt == (int)gwt[k],
		      "job %c granted window %u weight %u (/stats %d, %d), want %u and %u", 'A' + k, o->window,
		      o->weight, sw, swt, gw[k], gwt[k]);
	}
	uint64_t t0 = sc_now_ms();
	jobs_run(js, 2);
	printf("  ran in %llu ms\n", (unsigned long long)(sc_now_ms() - t0));
	CHECK(sd_metric(&d, "sumcast_chunks_reduced_total") == nchunks[0] + nchunks[1], "chunks reduced %g",
	      sd_metric(&d, "sumcast_chunks_reduced_total"));
	long a_at_b = js[1].done_at >= nchunks[1] ? (long)(js[1].done_at - nchunks[1]) : -1;
	a_at_mark = js[1].mark_at >= js[1].mark ? (long)(js[1].mark_at - js[1].mark) : -1;
	for (int k = 0; k < 2; k++)
		job_leave(&js[k]);
	pace_logged = sd_log_has(&d, "pacing 2 jobs of different weights");
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	return a_at_b;
}

static long pair_run(const char *conf, uint64_t id, const uint32_t win[2], const uint16_t wt[2],
		     const uint32_t gw[2], const uint16_t gwt[2])
{
	const uint32_t nchunks[2] = { 1500, 100 };

	return pair_run_n(conf, id, nchunks, win, wt, gw, gwt);
}

static void mode_burst(void)
{
	const uint32_t win[2] = { 8, 2 }, gw[2] = { 8, 2 };
	const uint16_t wt[2] = { 0, 0 }, gwt[2] = { 1, 1 };
	long a = pair_run("[job]\nmemory-budget = 256M\n", 0xc01, win, wt, gw, gwt);

	printf("  B (window 2) completed its 100 chunks when A (window 8) had %ld of its 1500\n", a);
	CHECK(a >= 0 && a <= 1500 * 2 / 3, "B (window 2) completed when A (window 8) had %ld of 1500 "
	      "chunks: starved", a);
}

static void mode_weights(void)
{
	const uint32_t win[2] = { 2, 2 }, gw[2] = { 4, 2 };
	const uint16_t wt[2] = { 3, 0 }, gwt[2] = { 2, 1 };
	long a = pair_run("[job]\nmemory-budget = 256M\nmax-weight = 2\n", 0xd01, win, wt, gw, gwt);

	printf("  B (weight 1) completed its 100 chunks when A (weight 2) had %ld\n", a);
	CHECK(a >= 100 * 13 / 10 && a <= 1500 * 2 / 3,
	      "B completed when A had %ld of 1500 chunks: want about twice B's 100", a);
}

/* Weights where the windows are equal: A asks window 1 with weight 2, B
 * window 2 with weight 1, both granted window 2, so only the pacer
 * (daemon/pacer.h) can give A twice B's share of the link. With [job]
 * pace = false the same pair shares about equally. */
static void pace_pair(uint32_t heavy, uint32_t light)
{
	const uint32_t n[2] = { heavy, light }, win[2] = { 1, 2 }, gw[2] = { 2, 2 };
	const uint16_t wt[2] = { 2, 1 }, gwt[2] = { 2, 1 };
	long a[2], m[2];

	/* A's chunks from B's first third to B's end: the pacer's first
	 * ticks (100 ms each) left out */
	pair_len = 16u << 10;
	pair_mark = light / 3;
	for (int on = 0; on < 2; on++) {
		a[on] = pair_run_n(on ? "[job]\nmemory-budget = 256M\nmax-weight = 2\n"
				      : "[job]\nmemory-budget = 256M\nmax-weight = 2\npace = false\n",
				   0x1101 + 2 * (uint64_t)on, n, win, wt, gw, gwt);
		m[on] = a_at_mark;
		CHECK(pace_logged == (on == 1), "daemon log: pacing %s with pace %s",
		      pace_logged ? "logged" : "not logged", on ? "on" : "false");
	}
	pair_len = CHUNK;
	pair_mark = 0;
	long span = light - light / 3, don = a[1] - m[1], doff = a[0] - m[0];
	printf("  while B (weight 1) did its chunks %ld..%u of %zu bytes, A (weight 2, same window) did %ld "
	       "(pace = false: %ld)\n", light / 3 + 0L, light, (size_t)16u << 10, don, doff);
	CHECK(m[1] >= 0 && a[1] >= 0 && don >= span * 3 / 2 && a[1] < (long)heavy,
	      "A did %ld chunks while B did %ld: want at least %ld (weighted shares 2:1)", don, span,
	      span * 3 / 2);
}

/* A network namespace of our own whose loopback is shaped to 400 Mbit/s
 * (tc tbf), so the link is what the two jobs share (the kernel, per
 * connection: about equally without the pacer), 3,000 and 750 chunks
 * (5 s a run: 50 of the pacer's ticks).
 * Leaves the process in that namespace: run it alone. */
static void mode_pacelink(void)
{
	if (unshare(CLONE_NEWNET))
		th_skip("unshare(CLONE_NEWNET) failed (needs root)");
	if (system("ip link set lo up && tc qdisc add dev lo root tbf rate 400mbit burst 256kb latency 20ms"))
		th_skip("cannot shape the namespace's loopback (ip, tc tbf)");
	pace_pair(3000, 750);
}

/* A's rank 1 sends chunks 2..7 at once, past its credit (window 2), then
 * goes on as it should, while B runs on the same data thread. */
static void mode_overcredit(void)
{
	static struct tjob js[2];
	const uint32_t rogue = MAXW - 2;
	struct wire_msg m;
	bool shm = !strcmp(th_provider(), "shm");

	if (sd_start(&d, "[job]\nmemory-budget = 256M\n")) {
		CHECK(0, "sumcastd did not start");
		return;
	}
	want_window = 2;
	bool ok = job_join(&js[0], 0xe01, 2, 1500, CHUNK) == 0 && job_join(&js[1], 0xe02, 2, 100, CHUNK) == 0;
	CHECK(ok, "joining the two jobs failed");
	if (!ok)
		return;
	js[0].rogue = rogue;
	jobs_run(js, 2);
	/* A failed at once (ABORT, data) or its extra chunks were dropped and
	 * it ran on, every result right (jobs_run checked each one) */
	int rc = ctl_recv(js[0].rk[0].fd, &m, 300);
	bool aborted = rc == 0 && m.type == WIRE_ABORT;
	double dropped = sd_metric(&d, "sumcast_errors_total{kind=\"unexpected\"}");
	long a_at_b = js[1].done_at >= 100 ? (long)(js[1].done_at - 100) : -1;
	printf("  A (rank 1 %u chunks past its credit): %s, %u results; %g messages dropped; B completed "
	       "its 100 when A had %ld\n", rogue,
	       aborted ? wire_code_name(m.u.abort.code) : js[0].got[0] < 50 ? "stopped" : "ran on",
	       js[0].got[0], dropped, a_at_b);
	CHECK(rc == -ETIMEDOUT || (aborted && m.u.abort.code == WIRE_E_DATA), "A rank 0: rc %d %s", rc,
	      rc ? "" : wire_type_name(m.type));
	/* tcp;ofi_rxm: at most one chunk a slot is a rank a window ahead,
	 * which the daemon takes: the rest are dropped or fail the job. shm
	 * keeps them (no sweep) and matches them in order as the slots come
	 * round, so the rank's own sends fall a window behind: a seq
	 * mismatch fails A, or a result for rank 1 finds no receive and
	 * stalls A's endpoint, its own (dp_thread.c): A stops, B runs on */
	CHECK(aborted || shm || (dropped >= rogue - js[0].window && js[0].got[0] >= 50),
	      "A ran on with %g of %u extra chunks dropped and %u results", dropped, rogue, js[0].got[0]);
	CHECK(a_at_b >= 0 && a_at_b <= 1500 * 2 / 3, "B completed when A had %ld of 1500", a_at_b);
	for (uint32_t r = 0; r < 2; r++) /* A, still running or not, goes away */
		trank_close(&js[0].rk[r]);
	job_leave(&js[1]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
}

/* The jobs count in a PONG to rank 0 of j (wire version 3 and up), -1 if
 * none came. */
static int pong_jobs(struct tjob *j)
{
	struct wire_msg ping = { .type = WIRE_PING, .u.ping.token = 7 }, r;

	if (ctl_send(j->rk[0].fd, &ping))
		return -1;
	for (int k = 0; k < 4; k++) {
		if (ctl_recv(j->rk[0].fd, &r, 3000))
			return -1;
		if (r.type == WIRE_PONG && r.u.ping.token == 7)
			return r.u.ping.has_load ? r.u.ping.jobs : -1;
	}
	return -1;
}

static bool pong_says_alone(void *arg)
{
	return pong_jobs(arg) == 1;
}

/* The tenants a PONG counts ([job] tenant-idle = 1s here): A's rank asks
 * while B and C are joined but have sent nothing (1: A alone), after both
 * ran (3), after B left (2: C ran within the last second) and until C is
 * idle past tenant-idle (1: it stops counting; the wait is for that PONG,
 * bounded). A itself counts whether it sends or not. */
static void mode_tenants(void)
{
	static struct tjob js[3];

	if (sd_start(&d, "[job]\nmemory-budget = 256M\ntenant-idle = 1s\n")) {
		CHECK(0, "sumcastd did not start");
		return;
	}
	want_window = 2;
	bool ok = job_join(&js[0], 0xf01, 1, 1, CHUNK) == 0 && job_join(&js[1], 0xf02, 2, 50, CHUNK) == 0 &&
		  job_join(&js[2], 0xf03, 2, 50, CHUNK) == 0;
	CHECK(ok, "joining the three jobs failed");
	if (!ok)
		return;
	int n[4];
	n[0] = pong_jobs(&js[0]);
	CHECK(jobs_run(&js[1], 2) == 0, "B's and C's 50 chunks");
	n[1] = pong_jobs(&js[0]);
	job_leave(&js[1]);
	n[2] = pong_jobs(&js[0]);
	uint64_t t_left = sc_now_ms();
	n[3] = th_wait_until(pong_says_alone, &js[0], 5000, 50) ? 1 : pong_jobs(&js[0]);
	printf("  PONG to A: %d job(s) with B and C joined and idle, %d after they ran, %d after B left, %d "
	       "%.1f s later (C idle past tenant-idle)\n", n[0], n[1], n[2], n[3],
	       (double)(sc_now_ms() - t_left) / 1000);
	CHECK(n[0] == 1 && n[1] == 3 && n[2] == 2 && n[3] == 1, "jobs counted %d, %d, %d, %d; want 1, 3, 2, 1",
	      n[0], n[1], n[2], n[3]);
	job_leave(&js[2]);
	job_leave(&js[0]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(void);
	} modes[] = { { "threads", mode_threads }, { "lanes", mode_lanes }, { "eagain", mode_eagain },
		      { "burst", mode_burst }, { "weights", mode_weights },
		      { "overcredit", mode_overcredit },
		      { "tenants", mode_tenants }, { "pacelink", mode_pacelink } };
	const size_t nm = sizeof(modes) / sizeof(modes[0]);

	for (int i = 1; i < argc; i++) {
		size_t k = 0;
		while (k < nm && strcmp(argv[i], modes[k].name))
			k++;
		if (k == nm) {
			fprintf(stderr, "usage: %s [threads|eagain|burst|weights|overcredit|tenants|pacelink]... (none: all)\n", argv[0]);
			return 2;
		}
	}
	/* in this order, each as often as it is named (none named: each once,
	 * but pacelink, which leaves the process in a namespace of its own) */
	for (size_t k = 0; k < nm; k++)
		for (int i = argc < 2 ? 0 : 1; i < (argc < 2 ? 1 : argc); i++)
			if (argc < 2 ? modes[k].run != mode_pacelink : !strcmp(argv[i], modes[k].name)) {
				printf("%s:\n", modes[k].name);
				modes[k].run();
			}
	return th_summary("test_daemon_multi");
}
