/* Unexpected messages of a peer that has gone (tcp;ofi_rxm).
 *
 * libfabric 1.17's rxm keeps an unexpected rendezvous message (one above
 * the eager limit: only its header has arrived) after its sender's
 * connection is shut down: rxm_close_conn() closes the connection's msg
 * endpoint and sets conn->msg_ep to NULL (rxm_process_shutdown then frees
 * the connection) but leaves the message in the unexpected queue. A receive
 * that matches it then reads the payload over conn->msg_ep
 * (rxm_rndv_read -> rxm_rndv_xfer -> fi_readv on NULL): SIGSEGV. The
 * daemon's sweep (dp_sweep.c) matches any message, so one foreign or late
 * sender that sent a large message and closed its endpoint before the
 * sweep took it killed the daemon: seen once in the plugin harness's
 * fault_stop_tree_n8_f4_sealed_mcast (an aggregator stopped past its
 * deadline; its ranks fenced it and went on while their chunks waited in
 * its sockets; on SIGCONT it read them and the shutdowns together).
 *
 * Here: a 2-rank job runs (for the daemon's data address, and to show it
 * still serves after); a separate endpoint connects (one eager message),
 * the daemon is stopped, the endpoint sends DEPARTED_N rendezvous messages
 * of DEPARTED_LEN bytes under a tag no job has and closes, the daemon is
 * continued. It must live, count the messages as unexpected and run the
 * job on with exact sums. Repeated DEPARTED_ROUNDS times (the shutdown
 * and the sweep race). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_daemon_harness.h"

/* The departed sender closes its endpoint with its rendezvous sends never
 * completed, which is the point; rxm then leaks their state (112 bytes a
 * send) in this process, not in the daemon. LeakSanitizer is told to
 * ignore what the sender allocates; the daemon's own leaks still count. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define SENDER_LEAKS_BEGIN() __lsan_disable()
#define SENDER_LEAKS_END() __lsan_enable()
#else
#define SENDER_LEAKS_BEGIN() ((void)0)
#define SENDER_LEAKS_END() ((void)0)
#endif

#define CHUNK (64u << 10)
#define DEPARTED_N 16u
#define DEPARTED_LEN (256u << 10)
#define DEPARTED_ROUNDS 5u

static struct sd d;

static long run(struct trank *rk, uint32_t first, uint32_t n)
{
	struct trun p = { .window = 4, .stride = CHUNK, .len = CHUNK, .first = first, .count = n,
			  .timeout_ms = 30000 };

	return tranks_allreduce(rk, 2, &p);
}

static bool daemon_alive(void)
{
	int status;

	if (d.pid <= 0)
		return false;
	if (waitpid(d.pid, &status, WNOHANG) == d.pid) {
		printf("  sumcastd exited: %s %d\n", WIFSIGNALED(status) ? "signal" : "status",
		       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		d.pid = 0;
		return false;
	}
	return true;
}

/* One departed sender; returns false if a step of its own failed. */
static bool depart(const uint8_t *addr, size_t alen, uint32_t round)
{
	struct fabric_params p = { .provider = th_provider(), .node = "127.0.0.1" };
	struct fabric *f = NULL;
	struct fabric_mr mr;
	struct fabric_op hello, big[DEPARTED_N];
	fi_addr_t dst;
	uint8_t *buf = aligned_alloc(4096, DEPARTED_LEN);
	bool ok = false, connected = false;

	SENDER_LEAKS_BEGIN();
	if (!buf || fabric_open(&p, &f) || fabric_mr_reg(f, buf, DEPARTED_LEN, &mr) ||
	    fabric_av_insert(f, addr, alen, &dst)) {
		printf("  round %u: no endpoint\n", round);
		goto out;
	}
	memset(buf, 0x5a, DEPARTED_LEN);
	/* Connect first (an eager message; the sweep discards it): a stopped
	 * daemon accepts no connection. */
	int rc = -FI_EAGAIN;
	for (uint64_t end = sc_now_ms() + 10000; !connected && sc_now_ms() < end;) {
		struct fabric_cqe e[4];
		if (rc == -FI_EAGAIN)
			rc = fabric_tsend(f, buf, 64, mr.desc, dst, wire_tag_make(WIRE_TAG_DATA, 0xFFFFF, 2, round),
					  0, &hello);
		if (rc && rc != -FI_EAGAIN)
			break;
		int n = fabric_cq_poll(f, e, 4);
		for (int i = 0; i < n; i++)
			connected = connected || e[i].op == &hello;
		if (!n)
			th_sleep_ms(1);
	}
	if (!connected) {
		printf("  round %u: the first message did not complete\n", round);
		goto out;
	}
	kill(d.pid, SIGSTOP);
	for (uint32_t i = 0; i < DEPARTED_N; i++)
		if (fabric_tsend(f, buf, DEPARTED_LEN, mr.desc, dst,
				 wire_tag_make(WIRE_TAG_DATA, 0xFFFFF, 3, round * DEPARTED_N + i), 0, &big[i])) {
			printf("  round %u: send %u refused\n", round, i);
			goto cont;
		}
	/* Let the provider write the headers out, then go. */
	for (uint32_t i = 0; i < 20; i++) {
		struct fabric_cqe e[4];
		fabric_cq_poll(f, e, 4);
		th_sleep_ms(1);
	}
	ok = true;
cont:
	fabric_close(f);
	f = NULL;
	th_sleep_ms(50);
	kill(d.pid, SIGCONT);
out:
	if (f)
		fabric_close(f);
	SENDER_LEAKS_END();
	free(buf);
	return ok;
}

int main(void)
{
	if (strcmp(th_provider(), "tcp;ofi_rxm"))
		th_skip("rxm's unexpected queue: a tcp;ofi_rxm test");
	struct trank rk[2];
	const char *un_metric = "sumcast_errors_total{kind=\"unexpected\"}";

	REQUIRE(sd_start(&d, NULL) == 0, "sumcastd did not start");
	bool ok = true;
	for (uint32_t r = 0; r < 2; r++) {
		bool up = trank_open(&rk[r], 2 * 8 * CHUNK) == 0 && trank_join(&rk[r], &d, 0x601, r, 2, NULL) == 0;
		CHECK(up, "rank %u did not join", r);
		ok = ok && up;
	}
	for (uint32_t r = 0; ok && r < 2; r++) {
		ok = trank_ready(&rk[r], 5000) == 0;
		CHECK(ok, "rank %u: no READY", r);
	}
	double un0 = ok ? sd_metric(&d, un_metric) : 0;
	uint32_t rounds = 0;
	for (uint32_t i = 0; ok && i < DEPARTED_ROUNDS; i++) {
		CHECK(depart(rk[0].ok.addr, rk[0].ok.addr_len, i), "round %u: the departing sender failed", i);
		th_sleep_ms(300);
		ok = daemon_alive();
		CHECK(ok, "round %u: sumcastd died after a sender left %u rendezvous messages behind", i,
		      DEPARTED_N);
		if (!ok)
			break;
		long wrong = run(rk, i * 50, 50);
		CHECK(wrong == 0, "round %u: job after the sender left: %ld (-1: did not complete) wrong elements",
		      i, wrong);
		rounds++;
	}
	if (ok) {
		/* The eager hellos and the big ones are all taken off the queue. */
		double want = un0 + rounds * (DEPARTED_N + 1);
		double un = sd_wait_metric(&d, un_metric, TH_EQ, want, 10000);
		CHECK(un == want, "errors{kind=\"unexpected\"} = %g, want %g", un, want);
		printf("  %u rounds of %u x %u bytes left behind: daemon alive, %g discarded\n", rounds,
		       DEPARTED_N, DEPARTED_LEN, un - un0);
	}
	for (uint32_t r = 0; r < 2; r++)
		trank_close(&rk[r]);
	if (d.pid > 0)
		CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	return th_summary("test_daemon_departed");
}
