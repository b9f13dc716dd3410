/* The IP multicast transport (common/mcast_udp.c) with the shared protocol
 * logic (common/mcast.c), over real sockets: the test moves into a network
 * namespace of its own (root; exit 77 otherwise) whose loopback carries
 * multicast, opens a sender and two receivers joined to the group (one of
 * them in a forked process), and sends 120 results of 0 B to 1 MiB, a
 * window of 4 at a time, with UDP GSO (and once more with GSO off, the
 * sendmmsg path). Each receiver drops a share of datagrams as they are
 * read (the receive path's test hook: 0, 1 and 10 %), asks for what is
 * missing (sc_mc_rx_missing, encoded and decoded as a NACK) and has it
 * repaired by "unicast" (a copy and sc_mc_rx_fill); every result must be
 * bit for bit what was sent. A third socket joined to another job's group
 * on the same port gets nothing of this job. */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h" /* REQUIRE: a failed step ends the test (the other rank, forked, too) */
#include "clock.h"
#include "mcast_udp.h"

#define PAYLOAD 1432
#define WINDOW 4
#define MAXLEN (1u << 20)
#define RESULTS 120

/* Result k's bytes: the same on both sides without sending them twice. */
static uint32_t result_len(uint64_t k)
{
	uint32_t r = (uint32_t)(k * 2654435761u) % 10;
	return r == 0 ? 0 : r < 3 ? 1 + (uint32_t)(k * 7919) % PAYLOAD : 1 + (uint32_t)(k * 104729) % MAXLEN;
}

static void result_fill(uint64_t k, uint8_t *b, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)((i + k * 31) * 0x9E3779B1u >> 24);
}

static const uint32_t JOB = 5;
static const uint64_t KEY = 0xA11CE5EEDull;

struct done_arg {
	bool done[RESULTS];
};

static void on_done(void *arg, uint64_t chunk)
{
	struct done_arg *d = arg;
	if (chunk < RESULTS)
		d->done[chunk] = true;
}

/* Every result of the window starting at c0 is complete. */
static bool window_done(const struct done_arg *d, uint64_t c0)
{
	for (uint64_t c = c0; c < c0 + WINDOW && c < RESULTS; c++)
		if (!d->done[c])
			return false;
	return true;
}

/* Whether to read on: until the window's results are all in. Without drops
 * they all come (bounded: a loss then shows as a repair, which the test
 * refuses); with drops some never do, and a window quiet for `quiet_s`
 * ends the reading, as a NACK timer would, before the repairs. */
static bool read_on(const struct done_arg *d, uint64_t c0, unsigned drop_permille, double last,
		    double start, double quiet_s)
{
	double now = sc_now_s();

	if (window_done(d, c0))
		return false;
	return drop_permille ? now - last < quiet_s : now - start < 10;
}

/* A receiver: results 0..RESULTS-1 in windows, each window's datagrams
 * read until its results are in (or, dropping, quiet for 100 ms), then
 * what is missing repaired. */
static int receive_all(const struct sockaddr_in *group, unsigned drop_permille, int ready_fd,
		       uint64_t *lost, uint64_t *repaired)
{
	static uint8_t got[WINDOW][MAXLEN], want[MAXLEN];
	struct sc_mc_udp_rx r;
	struct sc_mc_rx rx;
	struct done_arg d = { { false } };
	char why[256];

	REQUIRE(sc_mc_udp_rx_open(&r, group, "127.0.0.1", PAYLOAD, why, sizeof(why)) == 0, "%s", why);
	REQUIRE(sc_mc_rx_init(&rx, JOB, KEY, WINDOW, PAYLOAD, MAXLEN) == 0, "rx init");
	rx.drop_permille = drop_permille;
	rx.seed = 0xD1B54A32D192ED03ull; /* other datagrams than the first rank's */
	for (uint64_t c0 = 0; c0 < RESULTS; c0 += WINDOW) {
		for (uint64_t c = c0; c < c0 + WINDOW && c < RESULTS; c++)
			REQUIRE(sc_mc_rx_expect(&rx, c, result_len(c), (uint32_t)c, got[c % WINDOW]) == 0,
			      "expect %llu", (unsigned long long)c);
		if (ready_fd >= 0)
			(void)!write(ready_fd, "r", 1); /* the sender may send this window */
		double quiet = sc_now_s(), start = quiet;
		while (read_on(&d, c0, drop_permille, quiet, start, 0.1)) {
			int n = sc_mc_udp_poll(&r, &rx, 256, on_done, &d);
			REQUIRE(n >= 0, "poll: %s", strerror(-n));
			if (n > 0)
				quiet = sc_now_s();
			else
				usleep(200); /* a pause between polls */
		}
		for (uint64_t c = c0; c < c0 + WINDOW && c < RESULTS; c++) {
			struct sc_mc_range mr[SC_MC_NACK_RANGES];
			size_t nr;
			uint32_t len = result_len(c);
			result_fill(c, want, len);
			while (!d.done[c] && (nr = sc_mc_rx_missing(&rx, c, mr, SC_MC_NACK_RANGES)) > 0) {
				struct sc_mc_nack m = { JOB, 1, c, (uint8_t)nr, { { 0, 0 } } }, back;
				uint8_t w[SC_MC_NACK_MAX];
				memcpy(m.r, mr, nr * sizeof(mr[0]));
				int n = sc_mc_nack_encode(&m, w, sizeof(w));
				REQUIRE(n > 0 && sc_mc_nack_decode(w, (size_t)n, &back) == 0, "nack");
				for (unsigned i = 0; i < back.nranges; i++) {
					memcpy(got[c % WINDOW] + back.r[i].off, want + back.r[i].off, back.r[i].len);
					int rc = sc_mc_rx_fill(&rx, c, back.r[i].off, back.r[i].len);
					REQUIRE(rc >= 0, "fill");
					if (rc == 1)
						d.done[c] = true;
				}
			}
			REQUIRE(d.done[c], "result %llu never completed", (unsigned long long)c);
			REQUIRE(!memcmp(got[c % WINDOW], want, len), "result %llu (%u bytes) differs",
			      (unsigned long long)c, len);
		}
	}
	*lost = rx.n.dropped;
	*repaired = rx.n.repaired;
	REQUIRE(rx.n.foreign == 0 && rx.n.malformed == 0, "foreign %llu malformed %llu",
	      (unsigned long long)rx.n.foreign, (unsigned long long)rx.n.malformed);
	sc_mc_rx_fini(&rx);
	sc_mc_udp_rx_close(&r);
	return 0;
}

static int run(unsigned drop_permille, bool gso)
{
	struct sockaddr_in group = { .sin_family = AF_INET, .sin_port = htons(7979) };
	struct sockaddr_in other = group;
	int ready[2], res[2];
	char why[256];

	inet_pton(AF_INET, "239.77.0.5", &group.sin_addr);
	inet_pton(AF_INET, "239.77.0.6", &other.sin_addr);
	REQUIRE(pipe(ready) == 0 && pipe(res) == 0, "pipe");
	pid_t kid = fork();
	if (kid == 0) { /* a second rank in another process */
		uint64_t lost = 0, rep = 0;
		close(ready[0]);
		int rc = receive_all(&group, drop_permille, ready[1], &lost, &rep);
		uint64_t v[3] = { (uint64_t)rc, lost, rep };
		(void)!write(res[1], v, sizeof(v));
		_exit(rc ? 1 : 0);
	}
	close(ready[1]);
	/* another job's group, same port: must see none of this */
	struct sc_mc_udp_rx foreign;
	REQUIRE(sc_mc_udp_rx_open(&foreign, &other, "127.0.0.1", PAYLOAD, why, sizeof(why)) == 0, "%s", why);
	struct sc_mc_udp_tx t;
	REQUIRE(sc_mc_udp_tx_open(&t, "127.0.0.1", &group, PAYLOAD, 1, why, sizeof(why)) == 0, "%s", why);
	t.gso = gso;
	static uint8_t buf[MAXLEN];
	/* this process receives too, between the sender's windows */
	struct sc_mc_udp_rx r;
	struct sc_mc_rx rx;
	struct done_arg d = { { false } };
	static uint8_t got[WINDOW][MAXLEN];
	REQUIRE(sc_mc_udp_rx_open(&r, &group, "127.0.0.1", PAYLOAD, why, sizeof(why)) == 0, "%s", why);
	REQUIRE(sc_mc_rx_init(&rx, JOB, KEY, WINDOW, PAYLOAD, MAXLEN) == 0, "rx init");
	rx.drop_permille = drop_permille;
	uint64_t repaired = 0;
	for (uint64_t c0 = 0; c0 < RESULTS; c0 += WINDOW) {
		char ch;
		REQUIRE(read(ready[0], &ch, 1) == 1, "the other rank is gone");
		for (uint64_t c = c0; c < c0 + WINDOW && c < RESULTS; c++) {
			uint32_t len = result_len(c);
			REQUIRE(sc_mc_rx_expect(&rx, c, len, (uint32_t)c, got[c % WINDOW]) == 0, "expect");
			result_fill(c, buf, len);
			REQUIRE(sc_mc_udp_send(&t, JOB, KEY, c, (uint32_t)c, buf, len) == 0, "send: %s",
			      strerror(errno));
			int n = sc_mc_udp_poll(&r, &rx, 1 << 20, on_done, &d);
			REQUIRE(n >= 0, "poll");
		}
		double quiet = sc_now_s(), start = quiet;
		while (read_on(&d, c0, drop_permille, quiet, start, 0.05)) {
			int n = sc_mc_udp_poll(&r, &rx, 1 << 20, on_done, &d);
			REQUIRE(n >= 0, "poll");
			if (n > 0)
				quiet = sc_now_s();
		}
		for (uint64_t c = c0; c < c0 + WINDOW && c < RESULTS; c++) {
			struct sc_mc_range mr[SC_MC_NACK_RANGES];
			size_t nr;
			uint32_t len = result_len(c);
			result_fill(c, buf, len);
			while (!d.done[c] && (nr = sc_mc_rx_missing(&rx, c, mr, SC_MC_NACK_RANGES)) > 0)
				for (size_t i = 0; i < nr; i++) {
					memcpy(got[c % WINDOW] + mr[i].off, buf + mr[i].off, mr[i].len);
					if (sc_mc_rx_fill(&rx, c, mr[i].off, mr[i].len) == 1)
						d.done[c] = true;
				}
			REQUIRE(d.done[c] && !memcmp(got[c % WINDOW], buf, len), "result %llu here",
			      (unsigned long long)c);
		}
	}
	repaired = rx.n.repaired;
	uint64_t v[3] = { 1, 0, 0 };
	REQUIRE(read(res[0], v, sizeof(v)) == sizeof(v), "the other rank's counts");
	int st = 0;
	waitpid(kid, &st, 0);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0 && v[0] == 0, "the other rank failed");
	struct sc_mc_rx frx;
	REQUIRE(sc_mc_rx_init(&frx, 99, 1, 1, PAYLOAD, MAXLEN) == 0, "rx init");
	int nf = sc_mc_udp_poll(&foreign, &frx, 1 << 20, NULL, NULL);
	REQUIRE(nf == 0, "another job's group got %d datagrams of this one", nf);
	printf("  drop %4.1f %%, %-8s: %d results right on 2 ranks; %llu datagrams sent in %llu sends "
	       "(GSO refused %llu); rank 0 dropped %llu and repaired %llu ranges, rank 1 dropped %llu "
	       "and repaired %llu\n", drop_permille / 10.0, gso ? "gso" : "sendmmsg", RESULTS,
	       (unsigned long long)t.datagrams, (unsigned long long)t.sends,
	       (unsigned long long)t.gso_refused, (unsigned long long)rx.n.dropped,
	       (unsigned long long)repaired, (unsigned long long)v[1], (unsigned long long)v[2]);
	REQUIRE(!drop_permille || (rx.n.dropped > 0 && repaired > 0 && v[1] > 0 && v[2] > 0),
	      "drops were asked for but none happened or none was repaired");
	REQUIRE(drop_permille || (repaired == 0 && v[2] == 0), "repairs without loss (the sender lost "
	      "datagrams on loopback?)");
	REQUIRE(!gso || t.sends < t.datagrams, "GSO on but one send per datagram");
	sc_mc_rx_fini(&frx);
	sc_mc_rx_fini(&rx);
	sc_mc_udp_rx_close(&r);
	sc_mc_udp_rx_close(&foreign);
	sc_mc_udp_tx_close(&t);
	close(ready[0]);
	close(res[0]);
	close(res[1]);
	return 0;
}

int main(void)
{
	if (unshare(CLONE_NEWNET)) {
		printf("SKIP: unshare(CLONE_NEWNET): %s (needs root)\n", strerror(errno));
		return 77;
	}
	if (system("ip link set lo up && ip link set lo mtu 1500 && ip link set lo multicast on && "
		   "ip route add 239.0.0.0/8 dev lo")) {
		printf("SKIP: cannot set up multicast on the namespace's loopback (ip)\n");
		return 77;
	}
	run(0, true);
	run(10, true);
	run(100, true);
	run(10, false);
	return th_summary("mcast_udp");
}
