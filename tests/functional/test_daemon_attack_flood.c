/* A flood of tagged messages that match no receive, from an endpoint that
 * never joined (no authentication needed: it only has to reach the data
 * port), while a legitimate job runs:
 *
 *   60,000 x 16,000 bytes (eager) and 32 x 256 KiB (rendezvous) with tags
 *   no job uses. libfabric's rxm kept each in its unexpected queue for the
 *   daemon's lifetime (RSS 77 MB -> 1,068 MB, never given back, no metric)
 *   and later jobs ran 7x slower. Now they are discarded as they come
 *   (dp_sweep.c) and counted (errors{kind="unexpected"}), the daemon's RSS
 *   stays within 128 MiB of where it started (about +36 MiB here: rxm's
 *   buffer pool grows by 16 MiB at a time), and the job running during
 *   the flood and one after it get every sum right.
 *
 * The same with the daemon's rxm receive queue at 8 entries
 * (FI_OFI_RXM_RX_SIZE=8): a job posting 16 receives (2 ranks, window 8)
 * is refused (memory): past the queue its receives were refused with
 * -FI_EAGAIN, their ranks' chunks waited in the unexpected queue, and the
 * reposts lost every free entry to the other rank's, so the job deadlocked
 * until its timeout. A job posting 8 (window 4) fills the queue exactly,
 * runs through the flood without a receive ever refused, and nothing of
 * it is discarded.
 *
 * The flood comes from a child process with its own endpoint, so it runs
 * while this process drives the job. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_daemon_harness.h"

#define CHUNK (64u << 10)
#define WMAX 8u
#define FLOOD_N 60000u
#define FLOOD_LEN 16000u
#define FLOOD_BIG_N 32u
#define FLOOD_BIG_LEN (256u << 10)
#define FLOOD_INFLIGHT 64u

static struct sd d;
static uint32_t window = 4;

/* Chunks [first, first + n) of the 2-rank job; the number of wrong
 * elements, or -1 if it did not complete. */
static long run(struct trank *rk, uint32_t first, uint32_t n)
{
	struct trun p = { .window = window, .stride = CHUNK, .len = CHUNK, .first = first, .count = n,
			  .timeout_ms = 60000 };

	return tranks_allreduce(rk, 2, &p);
}

/* The child: its own endpoint, the daemon's data address, and tags of a
 * job handle no job has (0xFFFFF). Exits 0 once every eager send completed
 * (rendezvous sends never do: nothing ever reads them). */
static int flood(const uint8_t *addr, size_t addrlen, uint32_t nmsg)
{
	struct fabric_params p = { .provider = th_provider(), .node = "127.0.0.1" };
	struct fabric *f;
	struct fabric_mr mr;
	fi_addr_t dst;
	uint8_t *buf = aligned_alloc(4096, FLOOD_BIG_LEN);
	struct fabric_op ops[FLOOD_INFLIGHT], big[FLOOD_BIG_N];
	uint32_t free_ops[FLOOD_INFLIGHT], nfree = FLOOD_INFLIGHT, sent = 0, done = 0;
	uint64_t deadline = sc_now_ms() + 90000;

	if (!buf || fabric_open(&p, &f) || fabric_mr_reg(f, buf, FLOOD_BIG_LEN, &mr) ||
	    fabric_av_insert(f, addr, addrlen, &dst))
		return 2;
	memset(buf, 0x5a, FLOOD_BIG_LEN);
	for (uint32_t i = 0; i < FLOOD_INFLIGHT; i++)
		free_ops[i] = i;
	for (uint32_t i = 0; i < FLOOD_BIG_N; i++)
		while (fabric_tsend(f, buf, FLOOD_BIG_LEN, mr.desc, dst,
				    wire_tag_make(WIRE_TAG_DATA, 0xFFFFF, 1, 1000 + i), 0, &big[i]) == -FI_EAGAIN) {
			struct fabric_cqe e[16];
			fabric_cq_poll(f, e, 16);
		}
	while (done < nmsg && sc_now_ms() < deadline) {
		while (nfree && sent < nmsg) {
			uint32_t k = free_ops[nfree - 1];
			int rc = fabric_tsend(f, buf, FLOOD_LEN, mr.desc, dst,
					      wire_tag_make(WIRE_TAG_DATA, 0xFFFFF, sent & 0xFFFF, sent), sent,
					      &ops[k]);
			if (rc == -FI_EAGAIN)
				break;
			if (rc)
				return 3;
			nfree--;
			sent++;
		}
		struct fabric_cqe e[32];
		int n = fabric_cq_poll(f, e, 32);
		for (int i = 0; i < n; i++) {
			if (e[i].op < &ops[0] || e[i].op >= &ops[FLOOD_INFLIGHT])
				continue; /* a rendezvous send (never completes) */
			free_ops[nfree++] = (uint32_t)(e[i].op - ops);
			done++;
		}
	}
	return done == nmsg ? 0 : 4;
}

static void tweak_window(struct wire_join *j)
{
	j->window = window;
}

/* One daemon, one 2-rank job, a flood of nmsg eager (+ the rendezvous)
 * messages during the job's first 400 chunks, 400 more after it. rx_size:
 * the daemon's FI_OFI_RXM_RX_SIZE, or NULL. */
static void scenario(const char *what, const char *rx_size, uint32_t win, uint32_t nmsg)
{
	struct trank rk[2];

	printf("%s:\n", what);
	window = win;
	if (rx_size)
		setenv("FI_OFI_RXM_RX_SIZE", rx_size, 1);
	int rc = sd_start(&d, NULL);
	unsetenv("FI_OFI_RXM_RX_SIZE");
	if (rc) {
		CHECK(0, "%s: sumcastd did not start", what);
		sd_cleanup(&d);
		return;
	}
	/* The flooder is forked before any endpoint exists here, and waits
	 * for the daemon's data address. */
	int go[2];
	CHECK(pipe(go) == 0, "pipe");
	pid_t child = fork();
	if (child == 0) {
		uint8_t addr[FABRIC_ADDR_MAX];
		uint16_t alen = 0;
		close(go[1]);
		if (read(go[0], &alen, sizeof(alen)) != sizeof(alen) || alen > sizeof(addr) ||
		    read(go[0], addr, alen) != (ssize_t)alen)
			_exit(5);
		_exit(flood(addr, alen, nmsg));
	}
	CHECK(child > 0, "fork");
	close(go[0]);
	if (rx_size) {
		/* Twice the queue: refused at its first JOIN. */
		struct wire_join j;
		struct wire_msg m;
		join_init(&j, 0x500, 0, 2, NULL);
		j.window = 2 * win;
		int fd = ctl_join(&d, &j, NULL, 0, &m);
		CHECK(fd >= 0 && m.type == WIRE_REFUSE && m.u.refuse.code == WIRE_E_MEMORY &&
			      strstr(m.u.refuse.text, "receive queue"),
		      "%s: a job posting %u receives into a queue of %s: %s %s", what, 4 * win, rx_size,
		      fd < 0 ? "no reply" : wire_type_name(m.type), fd >= 0 && m.type == WIRE_REFUSE ? m.u.refuse.text : "");
		if (fd >= 0 && m.type == WIRE_REFUSE)
			printf("  window %u x 2 ranks -> REFUSE %s: %s\n", 2 * win, wire_code_name(m.u.refuse.code),
			       m.u.refuse.text);
		if (fd >= 0)
			close(fd);
	}
	for (uint32_t r = 0; r < 2; r++)
		CHECK(trank_open(&rk[r], 2 * WMAX * CHUNK) == 0 &&
			      trank_join(&rk[r], &d, 0x501, r, 2, tweak_window) == 0,
		      "rank %u: setup", r);
	for (uint32_t r = 0; r < 2; r++)
		CHECK(trank_ready(&rk[r], 5000) == 0, "rank %u: no READY", r);
	long rss0 = sd_rss_settled(&d, 3000);
	double un0 = sd_metric(&d, "sumcast_errors_total{kind=\"unexpected\"}");

	/* Told the daemon's address (JOIN_OK) through the pipe, the child
	 * floods (it was forked before this process opened any endpoint). */
	uint16_t alen = rk[0].ok.addr_len;
	CHECK(write(go[1], &alen, sizeof(alen)) == sizeof(alen) &&
		      write(go[1], rk[0].ok.addr, alen) == (ssize_t)alen,
	      "%s: the address not passed to the flooder", what);
	close(go[1]);

	/* The job goes on during the flood. */
	uint64_t t0 = sc_now_ms();
	long wrong = run(rk, 0, 400);
	CHECK(wrong == 0, "%s: job during the flood: %ld (-1: did not complete) wrong elements", what, wrong);
	printf("  400 chunks during the flood in %llu ms\n", (unsigned long long)(sc_now_ms() - t0));

	/* Until the child is done: the daemon's peak RSS. */
	long peak = rss0;
	int status = -1;
	uint64_t end = sc_now_ms() + 120000;
	while (child > 0 && sc_now_ms() < end) {
		long k = sd_rss_kib(&d);
		if (k > peak)
			peak = k;
		pid_t w = waitpid(child, &status, WNOHANG);
		if (w == child)
			break;
		th_sleep_ms(20);
	}
	if (child > 0 && sc_now_ms() >= end) {
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "%s: flooder: status 0x%x (2: setup, 3: send, 4: not all sent, 5: no address)", what, status);

	/* Every message is counted once it is discarded. */
	double want = un0 + nmsg + FLOOD_BIG_N, un = NAN;
	end = sc_now_ms() + 20000;
	while (!((un = sd_metric(&d, "sumcast_errors_total{kind=\"unexpected\"}")) >= want) &&
	       sc_now_ms() < end) {
		long k = sd_rss_kib(&d);
		if (k > peak)
			peak = k;
		th_sleep_ms(20);
	}
	CHECK(un == want, "%s: errors{kind=\"unexpected\"} = %g, want %g", what, un, want);
	long rss1 = sd_rss_kib(&d);
	if (rss1 > peak)
		peak = rss1;
	CHECK(peak - rss0 < 128 * 1024, "%s: RSS %ld KiB before the flood, peak %ld KiB (+%ld MiB)", what,
		      rss0, peak, (peak - rss0) / 1024);
	printf("  flood: %u x %u + %u x %u bytes; discarded %g; RSS %ld -> peak %ld KiB (+%ld MiB)\n", nmsg,
	       FLOOD_LEN, FLOOD_BIG_N, FLOOD_BIG_LEN, un - un0, rss0, peak, (peak - rss0) / 1024);
	CHECK(sd_log_has(&d, "unexpected message(s) that matched no receive"), "%s: discards not logged", what);

	/* And after it. */
	t0 = sc_now_ms();
	wrong = run(rk, 400, 400);
	CHECK(wrong == 0, "%s: job after the flood: %ld (-1: did not complete) wrong elements", what, wrong);
	printf("  400 chunks after the flood in %llu ms\n", (unsigned long long)(sc_now_ms() - t0));
	double eg = sd_metric(&d, "sumcast_fabric_eagain_total{op=\"recv\"}");
	CHECK(eg == 0, "%s: %g receives refused -FI_EAGAIN", what, eg);
	for (uint32_t r = 0; r < 2; r++) {
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = rk[r].handle;
		ctl_send(rk[r].fd, &l);
		trank_close(&rk[r]);
	}
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "%s: exit status after SIGTERM", what);
	sd_cleanup(&d);
}

int main(void)
{
	if (strcmp(th_provider(), "tcp;ofi_rxm"))
		th_skip("the flood is a tcp;ofi_rxm test (other providers keep unexpected messages their own way)");
	scenario("flood", NULL, 4, FLOOD_N);
	scenario("flood, receive queue of 8", "8", 4, FLOOD_N / 4);
	return th_summary("test_daemon_attack_flood");
}
