/* JOINs whose fabric address is not one of the daemon's kind, while a job
 * runs: each is refused (malformed, naming what is wrong) before anything
 * reaches the data thread's address vector, and the daemon keeps taking
 * good ranks.
 *
 * libfabric 1.17's util AV (tcp;ofi_rxm) sets its entry length from each
 * inserted address's family: a single JOIN whose 16-byte address was all
 * 0xff made every later insert fail ("Invalid argument"), so every new
 * rank of every job was refused until the daemon restarted, and SIGHUP did
 * not help. Here: the bad JOINs, then 50 more chunks of the running job,
 * then a new job of two ranks that joins and sums, then SIGHUP and one more.
 *
 * Both providers: IP socket addresses on tcp;ofi_rxm, shm names on shm. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_daemon_harness.h"

#define CHUNK (16u << 10)
#define WINDOW 4u

static struct sd d;

struct bad {
	const char *what;
	uint8_t addr[WIRE_ADDR_MAX];
	uint16_t len;
};

static void bad_ip4(struct bad *b, const char *what, uint16_t fam, const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = fam, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	b->what = what;
	b->len = sizeof(a);
	memcpy(b->addr, &a, sizeof(a));
}

static void bad_str(struct bad *b, const char *what, const char *s, uint16_t len)
{
	b->what = what;
	b->len = len;
	memcpy(b->addr, s, len);
}

/* The bad addresses for this provider; returns how many. */
static size_t bads_make(struct bad *b, const struct fabric *f)
{
	size_t n = 0;

	if (!strcmp(th_provider(), "shm")) {
		bad_str(&b[n++], "no NUL", "fi_shm://abcdefgh", 17);
		bad_str(&b[n++], "other scheme", "fi_sockets://1.2.3.4", 21);
		bad_str(&b[n++], "path in the name", "fi_shm://../../x", 17);
		bad_str(&b[n++], "scheme only", "fi_shm://", 10);
		bad_str(&b[n++], "empty name", "", 1);
	} else {
		struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(5000) };
		b[n].what = "all 0xff";
		b[n].len = (uint16_t)f->addrlen;
		memset(b[n++].addr, 0xff, f->addrlen);
		b[n].what = "IPv6 on IPv4";
		b[n].len = sizeof(a6);
		a6.sin6_addr = in6addr_loopback;
		memcpy(b[n++].addr, &a6, sizeof(a6));
		bad_ip4(&b[n++], "AF_UNIX family", AF_UNIX, "127.0.0.1", 5000);
		bad_ip4(&b[n++], "port 0", AF_INET, "127.0.0.1", 0);
		bad_ip4(&b[n++], "0.0.0.0", AF_INET, "0.0.0.0", 5000);
		bad_ip4(&b[n++], "multicast", AF_INET, "239.1.2.3", 5000);
		bad_ip4(&b[n++], "broadcast", AF_INET, "255.255.255.255", 5000);
		bad_ip4(&b[n], "17 bytes", AF_INET, "127.0.0.1", 5000);
		b[n++].len = 17;
		bad_ip4(&b[n], "8 bytes", AF_INET, "127.0.0.1", 5000);
		b[n++].len = 8;
	}
	return n;
}

static void tweak(struct wire_join *j)
{
	j->chunk_bytes = CHUNK;
	j->window = WINDOW;
}

/* A new 2-rank job joins, sums 20 chunks and leaves. */
static void fresh_job(uint64_t id, const char *what)
{
	struct trank rk[2];
	struct trun p = { .window = WINDOW, .stride = CHUNK, .len = CHUNK, .count = 20, .timeout_ms = 20000 };
	bool ok = true;

	for (uint32_t r = 0; r < 2; r++) {
		int rc = trank_open(&rk[r], 2 * WINDOW * CHUNK);
		rc = rc ? rc : trank_join(&rk[r], &d, id, r, 2, tweak);
		CHECK(rc == 0, "%s: rank %u did not join (%d)", what, r, rc);
		ok = ok && rc == 0;
	}
	for (uint32_t r = 0; ok && r < 2; r++)
		CHECK(trank_ready(&rk[r], 5000) == 0, "%s: rank %u: no READY", what, r);
	if (ok)
		CHECK(tranks_allreduce(rk, 2, &p) == 0, "%s: wrong or incomplete sums", what);
	for (uint32_t r = 0; r < 2; r++)
		trank_close(&rk[r]);
}

int main(void)
{
	struct trank rk[2];
	struct bad bads[16];
	struct trun p = { .window = WINDOW, .stride = CHUNK, .len = CHUNK, .count = 50, .timeout_ms = 20000 };

	if (sd_start(&d, NULL))
		th_skip("sumcastd did not start (see above)");
	for (uint32_t r = 0; r < 2; r++) {
		CHECK(trank_open(&rk[r], 2 * WINDOW * CHUNK) == 0, "rank %u: endpoint", r);
		CHECK(trank_join(&rk[r], &d, 0x5a0, r, 2, tweak) == 0, "rank %u: join", r);
	}
	for (uint32_t r = 0; r < 2; r++)
		CHECK(trank_ready(&rk[r], 5000) == 0, "rank %u: no READY", r);
	CHECK(tranks_allreduce(rk, 2, &p) == 0, "the running job before the bad JOINs");

	size_t n = bads_make(bads, rk[0].f);
	for (size_t i = 0; i < n; i++) {
		struct wire_join j;
		struct wire_msg m;
		join_init(&j, 0x5b0 + i, 0, 2, NULL);
		j.addr_len = bads[i].len;
		memcpy(j.addr, bads[i].addr, bads[i].len);
		int fd = ctl_join(&d, &j, NULL, 0, &m);
		CHECK(fd >= 0 && m.type == WIRE_REFUSE && m.u.refuse.code == WIRE_E_MALFORMED &&
			      strstr(m.u.refuse.text, "fabric address"),
		      "%s: %s %s", bads[i].what, fd < 0 ? "no reply" : wire_type_name(m.type),
		      fd >= 0 && m.type == WIRE_REFUSE ? m.u.refuse.text : "");
		if (fd >= 0 && m.type == WIRE_REFUSE)
			printf("  %-16s -> REFUSE %s: %s\n", bads[i].what, wire_code_name(m.u.refuse.code),
			       m.u.refuse.text);
		if (fd >= 0)
			close(fd);
	}
	/* Nothing was created for them, and the daemon still takes ranks. */
	char body[4096];
	CHECK(sd_http(&d, "/stats", body, sizeof(body)) == 200 && !strstr(body, "0x5b"),
	      "a refused JOIN left a job behind: %s", body);
	p.first = 50;
	CHECK(tranks_allreduce(rk, 2, &p) == 0, "the running job after the bad JOINs");
	fresh_job(0x5c0, "a new job after the bad JOINs");
	CHECK(kill(d.pid, SIGHUP) == 0, "SIGHUP");
	fresh_job(0x5c1, "a new job after SIGHUP");
	for (uint32_t r = 0; r < 2; r++)
		trank_close(&rk[r]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	return th_summary("test_daemon_attack_addr");
}
