/* Every refusal code sumcastd can answer a JOIN/LEAVE with, garbage on the
 * control port and the handshake timeout, checked through REFUSE codes, the
 * connection being closed, and /metrics counters. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_daemon_harness.h"

static struct sd d;
static struct fabric *fab;
static const uint8_t key[] = "0123456789abcdef-test-key";
#define KEYLEN (sizeof(key) - 1)

/* JOIN and expect REFUSE(code) whose text contains want (may be NULL), then
 * the connection closed. */
static void expect_refuse(struct wire_join *j, const uint8_t *k, size_t kl, uint16_t code,
			  const char *want, const char *what)
{
	struct wire_msg m;
	int fd = ctl_join(&d, j, k, kl, &m);

	CHECK(fd >= 0, "%s: no reply", what);
	if (fd < 0)
		return;
	CHECK(m.type == WIRE_REFUSE, "%s: got %s, want REFUSE", what, wire_type_name(m.type));
	if (m.type == WIRE_REFUSE) {
		CHECK(m.u.refuse.code == code, "%s: code %s, want %s (%s)", what,
		      wire_code_name(m.u.refuse.code), wire_code_name(code), m.u.refuse.text);
		CHECK(!want || strstr(m.u.refuse.text, want), "%s: text \"%s\" lacks \"%s\"", what,
		      m.u.refuse.text, want);
		printf("  %-14s -> REFUSE %s: %s\n", what, wire_code_name(m.u.refuse.code),
		       m.u.refuse.text);
	}
	CHECK(ctl_wait_closed(fd, 3000) == 0, "%s: connection not closed after REFUSE", what);
	close(fd);
}

static int join_ok(struct wire_join *j, struct wire_msg *m)
{
	int fd = ctl_join(&d, j, key, KEYLEN, m);
	CHECK(fd >= 0 && m->type == WIRE_JOIN_OK, "join of job 0x%llx rank %u: %s %s",
	      (unsigned long long)j->job_id, j->rank, fd < 0 ? "no reply" : wire_type_name(m->type),
	      m->type == WIRE_REFUSE ? m->u.refuse.text : "");
	return fd;
}

int main(void)
{
	struct fabric_params fp = { .provider = th_provider() };
	struct wire_join j;
	struct wire_msg m;
	char extra[512], keyfile[160];
	FILE *f;

	if (strcmp(fp.provider, "shm"))
		fp.node = "127.0.0.1";
	if (fabric_open(&fp, &fab))
		th_skip("no libfabric provider for the test endpoint");

	/* Daemon with authentication on. */
	snprintf(keyfile, sizeof(keyfile), "/tmp/sumcastd-test-key.%d", (int)getpid());
	f = fopen(keyfile, "w");
	fprintf(f, "%s\n", key);
	fclose(f);
	/* max-inflight off (1T): the memory refusal below sees the join as
	 * asked (the cap's grants: test_daemon_inflight) */
	snprintf(extra, sizeof(extra), "[auth]\nkey-file = %s\n[job]\nmemory-budget = 1G\nmax-inflight = 1T\n",
		 keyfile);
	if (sd_start(&d, extra)) {
		unlink(keyfile);
		th_skip("sumcastd did not start (see above)");
	}
	double bad0 = sd_metric(&d, "sumcast_errors_total{kind=\"bad_header\"}");
	CHECK(bad0 == 0, "bad_header starts at %g", bad0);

	/* version: a header with a version this daemon does not speak */
	{
		uint64_t nonce;
		int fd = ctl_connect(&d, &nonce);
		uint8_t hdr[WIRE_HDR_LEN] = { 'S', 'C', 'S', 'T', WIRE_VERSION + 1, 0, WIRE_JOIN, 0,
					      0, 0, 0, 0, 0, 0, 0, 0 };
		CHECK(fd >= 0, "connect");
		ctl_send_raw(fd, hdr, sizeof(hdr));
		CHECK(ctl_recv(fd, &m, 3000) == 0 && m.type == WIRE_REFUSE &&
			      m.u.refuse.code == WIRE_E_VERSION,
		      "version %d header: no REFUSE(version)", WIRE_VERSION + 1);
		printf("  %-14s -> REFUSE %s: %s\n", "version + 1", wire_code_name(m.u.refuse.code),
		       m.u.refuse.text);
		CHECK(ctl_wait_closed(fd, 3000) == 0, "closed after version refusal");
		close(fd);
	}
	/* versions (wire.h, "Versions"): the HELLO comes in version 2 offering
	 * 2..5; a rank that joins in 3, 4 or 5 is answered in it and its PONGs
	 * carry the daemon's load (jobs: its own at least); one that joins in 2
	 * (an older plugin) is answered in 2, PONGs without the load. From 4
	 * the JOIN asks weight 3 and the JOIN_OK grants 1 (this daemon's
	 * max-weight is the default, 1): the window stays the one asked. */
	for (uint16_t v = 2; v <= WIRE_VERSION; v++) {
		struct wire_msg hello, jm = { .version = v, .type = WIRE_JOIN }, r;
		int fd = ctl_connect_hello(&d, &hello);
		CHECK(fd >= 0 && hello.version == 2 && hello.u.hello.version_min == 2 &&
			      hello.u.hello.version_max == WIRE_VERSION,
		      "HELLO in version %u offering %u..%u", hello.version, hello.u.hello.version_min,
		      hello.u.hello.version_max);
		join_init(&jm.u.join, 0x7700 + v, 0, 1, fab);
		if (v >= 4)
			jm.u.join.weight = 3;
		CHECK(wire_join_sign(key, KEYLEN, hello.u.hello.nonce, &jm.u.join) == 0, "sign");
		CHECK(ctl_send(fd, &jm) == 0 && ctl_recv(fd, &r, 5000) == 0 && r.type == WIRE_JOIN_OK &&
			      r.version == v,
		      "JOIN in version %u: %s in version %u", v, wire_type_name(r.type), r.version);
		CHECK(r.type == WIRE_JOIN_OK && r.u.join_ok.weight == (v >= 4 ? 1 : 0) &&
			      r.u.join_ok.window == jm.u.join.window,
		      "JOIN_OK in version %u: weight %u window %u (asked weight %u window %u)", v,
		      r.u.join_ok.weight, r.u.join_ok.window, jm.u.join.weight, jm.u.join.window);
		struct wire_msg ping = { .version = v, .type = WIRE_PING, .u.ping.token = 99 };
		CHECK(ctl_send(fd, &ping) == 0, "PING");
		bool got = false;
		for (int k = 0; k < 4 && !got; k++) {
			if (ctl_recv(fd, &r, 5000))
				break;
			if (r.type != WIRE_PONG)
				continue; /* READY */
			got = true;
			CHECK(r.version == v && r.u.ping.token == 99 && r.u.ping.has_load == (v >= 3) &&
				      (v == 2 || (r.u.ping.jobs >= 1 && r.u.ping.load_pm <= 1000)),
			      "version %u PONG: version %u, load %s (%u per mille, %u jobs)", v, r.version,
			      r.u.ping.has_load ? "yes" : "no", r.u.ping.load_pm, r.u.ping.jobs);
			printf("  join in %u      -> PONG in %u, %s\n", v, r.version,
			       r.u.ping.has_load ? "with the load" : "without the load");
		}
		CHECK(got, "no PONG in version %u", v);
		close(fd);
	}
	/* their jobs ended with the connections: gone before the memory
	 * figure below is read (under ASan one could still be there) */
	sd_wait_idle(&d, "after the version joins");
	/* auth: signed with another key, and unsigned */
	join_init(&j, 0x2a, 0, 3, fab);
	expect_refuse(&j, (const uint8_t *)"another-key-0123456789", 22, WIRE_E_AUTH, "authentication",
		      "bad hmac");
	join_init(&j, 0x2a, 0, 3, fab);
	expect_refuse(&j, NULL, 0, WIRE_E_AUTH, NULL, "no hmac");

	/* provider */
	join_init(&j, 0x2a, 0, 3, fab);
	snprintf(j.provider, sizeof(j.provider), "%s", strcmp(th_provider(), "efa") ? "efa" : "shm");
	expect_refuse(&j, key, KEYLEN, WIRE_E_PROVIDER, "request says", "provider");

	/* memory: 64 x 4 MiB x (8 + 1) > 1 GiB */
	join_init(&j, 0x77, 0, 8, fab);
	j.window = 64;
	j.chunk_bytes = 4 << 20;
	j.dtype_mask = 1u << SC_F32;
	expect_refuse(&j, key, KEYLEN, WIRE_E_MEMORY,
		      "(window 64 x chunk 4194304 x (8 ranks + 1) + ", "memory");

	/* job 0x2a, 3 ranks: rank 0 joins */
	join_init(&j, 0x2a, 0, 3, fab);
	int fd0 = join_ok(&j, &m);
	uint32_t handle = m.u.join_ok.job_handle;
	/* a daemon with a key seals: 64 bytes of each chunk hold the seal */
	CHECK(m.u.join_ok.window == 4 && m.u.join_ok.chunk_bytes == 65536 - 64 &&
		      (m.u.join_ok.flags & WIRE_OK_F_SEALED) && m.u.join_ok.data_nonce,
	      "granted window %u chunk %u flags 0x%x nonce %llx", m.u.join_ok.window,
	      m.u.join_ok.chunk_bytes, m.u.join_ok.flags, (unsigned long long)m.u.join_ok.data_nonce);
	/* buffers 4 x 64 KiB x (3 + 2) plus bookkeeping (~180 B per rank per slot) */
	double used = sd_metric(&d, "sumcast_memory_used_bytes");
	CHECK(used > 4.0 * 65536 * 5 && used < 4.0 * 65536 * 5 + 4096 + 4 * 3 * 512,
	      "memory_used %g, want %g + bookkeeping", used, 4.0 * 65536 * 5);

	/* rank taken */
	join_init(&j, 0x2a, 0, 3, fab);
	expect_refuse(&j, key, KEYLEN, WIRE_E_RANK_TAKEN, "rank 0 of job 0x2a", "rank taken");
	/* nranks differ */
	join_init(&j, 0x2a, 1, 4, fab);
	expect_refuse(&j, key, KEYLEN, WIRE_E_NRANKS, "job 0x2a has 3 ranks, request says 4", "nranks");
	/* params differ */
	join_init(&j, 0x2a, 1, 3, fab);
	j.chunk_bytes = 128 << 10;
	expect_refuse(&j, key, KEYLEN, WIRE_E_PARAMS, "request says chunk 131072", "params");
	join_init(&j, 0x2a, 1, 3, fab);
	j.dtype_mask = 1u << SC_F64;
	expect_refuse(&j, key, KEYLEN, WIRE_E_PARAMS, "types", "params types");
	join_init(&j, 0x2a, 1, 3, fab);
	j.weight = 2; /* rank 0 asked none (1) */
	expect_refuse(&j, key, KEYLEN, WIRE_E_PARAMS, "weight 1, request says", "params weight");

	/* job full: ranks 1 and 2 join, the job is READY, a 4th JOIN is refused */
	join_init(&j, 0x2a, 1, 3, fab);
	int fd1 = join_ok(&j, &m);
	join_init(&j, 0x2a, 2, 3, fab);
	int fd2 = join_ok(&j, &m);
	CHECK(ctl_recv(fd0, &m, 3000) == 0 && m.type == WIRE_READY && m.u.ready.job_handle == handle &&
		      m.u.ready.nranks == 3,
	      "rank 0 got no READY");
	CHECK(ctl_recv(fd1, &m, 3000) == 0 && m.type == WIRE_READY, "rank 1 got no READY");
	CHECK(ctl_recv(fd2, &m, 3000) == 0 && m.type == WIRE_READY, "rank 2 got no READY");
	join_init(&j, 0x2a, 1, 3, fab);
	expect_refuse(&j, key, KEYLEN, WIRE_E_JOB_FULL, "already has all 3 ranks", "job full");

	/* unknown job: LEAVE of a handle this connection never joined */
	{
		int fd = ctl_connect(&d, NULL);
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = 999;
		ctl_send(fd, &l);
		CHECK(ctl_recv(fd, &m, 3000) == 0 && m.type == WIRE_REFUSE &&
			      m.u.refuse.code == WIRE_E_UNKNOWN_JOB,
		      "LEAVE of handle 999: no REFUSE(unknown_job)");
		printf("  %-14s -> REFUSE %s: %s\n", "leave 999", wire_code_name(m.u.refuse.code),
		       m.u.refuse.text);
		CHECK(ctl_wait_closed(fd, 3000) == 0, "closed after unknown_job");
		close(fd);
	}
	/* malformed: a JOIN header with a body that fails validation */
	{
		int fd = ctl_connect(&d, NULL);
		uint8_t msg[WIRE_HDR_LEN + 12] = { 'S', 'C', 'S', 'T', WIRE_VERSION, 0, WIRE_JOIN, 0,
						   12, 0, 0, 0, 0, 0, 0, 0 };
		memset(msg + WIRE_HDR_LEN, 0xEE, 12);
		ctl_send_raw(fd, msg, sizeof(msg));
		CHECK(ctl_recv(fd, &m, 3000) == 0 && m.type == WIRE_REFUSE &&
			      m.u.refuse.code == WIRE_E_MALFORMED,
		      "garbage JOIN body: no REFUSE(malformed)");
		printf("  %-14s -> REFUSE %s: %s\n", "bad body", wire_code_name(m.u.refuse.code),
		       m.u.refuse.text);
		CHECK(ctl_wait_closed(fd, 3000) == 0, "closed after malformed");
		close(fd);
	}
	/* a daemon-to-rank message type from a rank is malformed too */
	{
		int fd = ctl_connect(&d, NULL);
		struct wire_msg r = { .type = WIRE_READY };
		r.u.ready.job_handle = 1;
		r.u.ready.nranks = 1;
		ctl_send(fd, &r);
		CHECK(ctl_recv(fd, &m, 3000) == 0 && m.type == WIRE_REFUSE &&
			      m.u.refuse.code == WIRE_E_MALFORMED,
		      "READY from a rank: no REFUSE(malformed)");
		close(fd);
	}
	/* garbage bytes: dropped without an answer, daemon still healthy */
	{
		int fd = ctl_connect(&d, NULL);
		const char junk[] = "GET / HTTP/1.0\r\n\r\n";
		ctl_send_raw(fd, junk, sizeof(junk) - 1);
		CHECK(ctl_wait_closed(fd, 3000) == 0, "garbage: connection not dropped");
		close(fd);
		char body[64];
		CHECK(sd_http(&d, "/healthz", body, sizeof(body)) == 200 && !strcmp(body, "ok\n"),
		      "not healthy after garbage");
		CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"bad_header\"}") == bad0 + 1,
		      "bad_header count %g", sd_metric(&d, "sumcast_errors_total{kind=\"bad_header\"}"));
	}
	/* handshake timeout (3 s in the harness config) */
	{
		int fd = ctl_connect(&d, NULL);
		uint64_t t0 = sc_now_ms();
		CHECK(ctl_wait_closed(fd, 12000) == 0, "silent connection not closed");
		uint64_t dt = sc_now_ms() - t0;
		/* not before the handshake timeout; after it within a margin for
		 * loaded hosts */
		CHECK(dt >= 2500 && dt < 3000 + 7000, "silent connection closed after %llu ms, want ~3000",
		      (unsigned long long)dt);
		close(fd);
		CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"handshake_timeout\"}") == 1,
		      "handshake_timeout not counted");
	}
	/* refusals are counted by kind */
	CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"auth\"}") == 2, "auth count %g",
	      sd_metric(&d, "sumcast_errors_total{kind=\"auth\"}"));
	CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"params\"}") == 3, "params count");
	CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"version\"}") == 1, "version count");
	CHECK(sd_metric(&d, "sumcast_errors_total{kind=\"malformed\"}") == 2, "malformed count");
	/* and again by reason, apart from the aborts and from a stop */
	static const struct {
		const char *name;
		double want;
	} refused[] = {
		{ "sumcast_joins_refused_total{reason=\"auth\"}", 2 },
		{ "sumcast_joins_refused_total{reason=\"params\"}", 3 },
		{ "sumcast_joins_refused_total{reason=\"version\"}", 1 },
		{ "sumcast_joins_refused_total{reason=\"malformed\"}", 2 },
		{ "sumcast_shutdown_joins_refused_total", 0 },
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++)
		CHECK(sd_metric(&d, refused[i].name) == refused[i].want, "%s: %g, want %g", refused[i].name,
		      sd_metric(&d, refused[i].name), refused[i].want);
	CHECK(sd_metric(&d, "sumcast_jobs") == 1 && sd_metric(&d, "sumcast_ranks") == 3,
	      "jobs %g ranks %g", sd_metric(&d, "sumcast_jobs"), sd_metric(&d, "sumcast_ranks"));

	/* clean end: every rank LEAVEs, memory returns */
	int fds[3] = { fd0, fd1, fd2 };
	for (int i = 0; i < 3; i++) {
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = handle;
		CHECK(ctl_send(fds[i], &l) == 0, "LEAVE rank %d", i);
		int rc = ctl_recv(fds[i], &m, 2000);
		CHECK(rc == -EPIPE, "rank %d after LEAVE: rc %d type %s (want close, no ABORT)", i, rc,
		      rc ? "-" : wire_type_name(m.type));
		close(fds[i]);
	}
	CHECK(sd_wait_metric(&d, "sumcast_memory_used_bytes", TH_EQ, 0, 3000) == 0, "memory not returned");
	CHECK(sd_metric(&d, "sumcast_jobs") == 0, "job still listed");

	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	unlink(keyfile);
	fabric_close(fab);
	return th_summary("test_daemon_refuse");
}
