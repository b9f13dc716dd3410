/* Client library against fake aggregators that speak protocol v1 from a
 * thread of this process (no sumcastd needed): sharding, parameter checks,
 * every join error path (closed port, REFUSE, garbage, silence, bad auth),
 * messages dribbled one byte at a time, and a one-rank echo aggregator on a
 * real libfabric endpoint that checks the data path (tags, slots, seq,
 * window) and can misbehave (wrong seq, ABORT, close) so the client must
 * fail the request instead of reporting success. Every wait is bounded. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/fi_errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "client.h"
#include "wire.h"
#include "clock.h"
#include "wait.h"

enum fake_mode {
	FAKE_ECHO,    /* HELLO, JOIN_OK, READY, then echo every chunk back */
	FAKE_DRIBBLE, /* ECHO, with every control message sent one byte at a time */
	FAKE_REFUSE,  /* HELLO, read JOIN, REFUSE nranks */
	FAKE_GARBAGE, /* 16 bytes that are no header */
	FAKE_SILENT,  /* accept, say nothing */
	FAKE_BADSEQ,  /* ECHO, but the 3rd result carries seq + 1 */
	FAKE_BADLEN,  /* ECHO, but the 2nd result is 8 bytes short */
	FAKE_ABORT,   /* READY, then ABORT when the first chunk arrives */
	FAKE_CLOSE,   /* READY, then close the control connection when the first chunk
		       * arrives (the client is ready then: no race with its join) */
	FAKE_DRAIN,   /* ECHO, and DRAIN (version 5) when the first chunk arrives */
	FAKE_DRAIN_V4, /* HELLO offering 2..4, then FAKE_DRAIN: a DRAIN the client
			* did not negotiate */
	FAKE_DRAIN_EARLY, /* DRAIN between JOIN_OK and READY */
	FAKE_MUTE,    /* READY, then take every chunk and answer none (control open) */
};

#define FAKE_WINDOW 4
#define FAKE_CHUNK 8192

struct fake {
	enum fake_mode mode;
	int lfd;
	uint16_t port;
	pthread_t th;
	volatile int stop;
	const uint8_t *key;
	size_t key_len;
	/* results */
	int join_verified; /* 1 ok, -1 bad tag */
	uint32_t join_window, join_chunk;
	int chunks;
	int got_leave;
	int max_seq_gap_ok; /* every chunk had the slot seq % window */
	/* sizes of the data messages received, in completion order */
	size_t lens[256];
	int nlens;
	/* the echo's endpoint, closed by fake_stop: shm maps a peer of the
	 * same process into it, so it must outlive the client's endpoints */
	struct fabric *fab;
	void *slots;
	struct fabric_mr slots_mr; /* slots registered on fab (FI_MR_LOCAL) */
	size_t slots_mr_len;
	int halted;
};

static const char *provider(void)
{
	const char *p = getenv("SUMCAST_TEST_PROVIDER");
	return p && *p ? p : "tcp";
}

/* A TCP socket on a free loopback port (*port), listening or only bound:
 * a port bound and never listened on refuses connections, and no other
 * process can take it while the socket is open (no SO_REUSEADDR then). */
static int tcp_bound(uint16_t *port, bool listening)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(sa);
	assert_true(fd >= 0);
	if (listening)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (listening)
		assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &l), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}


static int send_msg(int fd, const struct wire_msg *m, bool dribble)
{
	uint8_t buf[WIRE_MSG_MAX];
	int n = wire_msg_encode(m, buf, sizeof(buf));
	if (n < 0)
		return n;
	if (!dribble)
		return send(fd, buf, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
	for (int i = 0; i < n; i++) {
		if (send(fd, buf + i, 1, MSG_NOSIGNAL) != 1)
			return -1;
		usleep(200);
	}
	return 0;
}

/* Reads exactly n bytes with a deadline; 0 or -1. */
static int read_full(struct fake *f, int fd, uint8_t *p, size_t n, unsigned ms)
{
	uint64_t until = sc_now_ms() + ms;
	while (n && !f->stop && sc_now_ms() < until) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		if (poll(&pfd, 1, 20) <= 0)
			continue;
		ssize_t r = recv(fd, p, n, 0);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return n ? -1 : 0;
}

static int read_msg(struct fake *f, int fd, struct wire_msg *m, unsigned ms)
{
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_hdr h;
	if (read_full(f, fd, buf, WIRE_HDR_LEN, ms) || wire_hdr_decode(buf, WIRE_HDR_LEN, &h) ||
	    read_full(f, fd, buf + WIRE_HDR_LEN, h.len, ms))
		return -1;
	return wire_msg_decode(h.type, buf + WIRE_HDR_LEN, h.len, m);
}

struct echo_slot {
	struct fabric_op rop, sop;
	uint8_t buf[FAKE_CHUNK];
	int state; /* 0 idle, 1 recv posted, 2 send to post, 3 send posted */
	int corrupt; /* BADSEQ/BADLEN: this result is the bad one */
	size_t len;
	uint32_t imm;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	struct pollfd pfd = { f->lfd, POLLIN, 0 };
	uint64_t until = sc_now_ms() + 60000; /* the fake's own bound */
	int fd = -1;

	while (!f->stop && sc_now_ms() < until && poll(&pfd, 1, 20) <= 0)
		;
	if (f->stop || sc_now_ms() >= until)
		return NULL;
	fd = accept(f->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	if (f->mode == FAKE_SILENT) {
		while (!f->stop && sc_now_ms() < until)
			usleep(10000);
		close(fd);
		return NULL;
	}
	if (f->mode == FAKE_GARBAGE) {
		(void)!write(fd, "GET / HTTP/1.0\r\n\r\n", 18);
		while (!f->stop && sc_now_ms() < until)
			usleep(10000);
		close(fd);
		return NULL;
	}
	bool dribble = f->mode == FAKE_DRIBBLE;
	uint64_t nonce = 0x1234567890abcdefull ^ (uint64_t)f->port;
	struct wire_msg m = { .type = WIRE_HELLO, .u.hello = { WIRE_VERSION, WIRE_VERSION, nonce } };
	if (f->mode == FAKE_DRAIN_V4)
		m.u.hello.version_min = 2, m.u.hello.version_max = 4;
	send_msg(fd, &m, dribble);
	struct wire_msg j;
	if (read_msg(f, fd, &j, 5000) || j.type != WIRE_JOIN) {
		close(fd);
		return NULL;
	}
	f->join_verified = wire_join_verify(f->key, f->key_len, nonce, &j.u.join) ? -1 : 1;
	f->join_window = j.u.join.window;
	f->join_chunk = j.u.join.chunk_bytes;
	if (f->join_verified < 0) {
		struct wire_msg r = { .type = WIRE_REFUSE };
		r.u.refuse.code = WIRE_E_AUTH;
		strcpy(r.u.refuse.text, "JOIN tag does not match the shared key");
		send_msg(fd, &r, false);
		close(fd);
		return NULL;
	}
	if (f->mode == FAKE_REFUSE) {
		struct wire_msg r = { .type = WIRE_REFUSE };
		r.u.refuse.code = WIRE_E_NRANKS;
		snprintf(r.u.refuse.text, sizeof(r.u.refuse.text),
			 "job 0x%llx has 8 ranks, request says %u",
			 (unsigned long long)j.u.join.job_id, j.u.join.nranks);
		send_msg(fd, &r, false);
		close(fd);
		return NULL;
	}
	struct fabric_params fp = { .provider = j.u.join.provider, .node = "127.0.0.1" };
	struct fabric *fab;
	if (fabric_open(&fp, &fab)) {
		close(fd);
		return NULL;
	}
	fi_addr_t peer;
	fabric_av_insert(fab, j.u.join.addr, j.u.join.addr_len, &peer);
	uint32_t window = j.u.join.window < FAKE_WINDOW ? j.u.join.window : FAKE_WINDOW;
	uint32_t chunk = j.u.join.chunk_bytes < FAKE_CHUNK ? j.u.join.chunk_bytes : FAKE_CHUNK;
	const uint32_t handle = 77;
	struct wire_msg ok = { .type = WIRE_JOIN_OK };
	ok.u.join_ok.job_handle = handle;
	ok.u.join_ok.window = window;
	ok.u.join_ok.chunk_bytes = chunk;
	ok.u.join_ok.timeout_ms = 5000;
	ok.u.join_ok.addr_len = (uint16_t)fab->addrlen;
	memcpy(ok.u.join_ok.addr, fab->addr, fab->addrlen);
	send_msg(fd, &ok, dribble);
	struct wire_msg dr = { .type = WIRE_DRAIN, .u.drain = { 1500 } }; /* version 5 header */
	if (f->mode == FAKE_DRAIN_EARLY)
		send_msg(fd, &dr, false);
	struct wire_msg rd = { .type = WIRE_READY, .u.ready = { handle, j.u.join.nranks } };
	send_msg(fd, &rd, dribble);

	struct echo_slot *slots = calloc(window, sizeof(*slots));
	struct fabric_mr smr = { 0 };
	if (!slots || fabric_mr_reg(fab, slots, window * sizeof(*slots), &smr)) {
		free(slots);
		fabric_close(fab);
		close(fd);
		return NULL;
	}
	uint32_t expect_c = 0;
	f->max_seq_gap_ok = 1;
	uint8_t cbuf[WIRE_MSG_MAX];
	size_t clen = 0;
	while (!f->stop && sc_now_ms() < until && fd >= 0) {
		if (f->got_leave) {
			/* The client is closing its endpoints: ours stays still
			 * (see struct fake); only the control socket, until EOF. */
			struct pollfd lp = { fd, POLLIN, 0 };
			char b[256];
			if (poll(&lp, 1, 5) > 0 && recv(fd, b, sizeof(b), 0) <= 0)
				break;
			continue;
		}
		for (uint32_t s = 0; s < window; s++) {
			struct echo_slot *e = &slots[s];
			if (e->state == 0 &&
			    !fabric_trecv(fab, e->buf, chunk, smr.desc, FI_ADDR_UNSPEC,
					  wire_tag_make(WIRE_TAG_DATA, handle, j.u.join.rank, s), 0, &e->rop))
				e->state = 1;
			if (e->state == 2) {
				uint32_t imm = e->imm;
				size_t len = e->len;
				if (e->corrupt && f->mode == FAKE_BADSEQ)
					imm = wire_imm_make(wire_imm_dtype(imm), wire_imm_op(imm),
							    wire_imm_seq(imm) + 1);
				if (e->corrupt && f->mode == FAKE_BADLEN)
					len -= 8;
				int rc = fabric_tsend(fab, e->buf, len, smr.desc, peer,
						      wire_tag_make(WIRE_TAG_RESULT, j.u.join.result_key,
								    j.u.join.rank, s), imm, &e->sop);
				if (!rc)
					e->state = 3;
			}
		}
		struct fabric_cqe ev[16];
		int n = fabric_cq_poll(fab, ev, 16);
		for (int i = 0; i < n; i++) {
			struct echo_slot *e = NULL;
			for (uint32_t s = 0; s < window; s++)
				if (ev[i].op == &slots[s].rop || ev[i].op == &slots[s].sop)
					e = &slots[s];
			if (!e)
				continue;
			if (ev[i].op == &e->sop) {
				e->state = 0;
				continue;
			}
			if (ev[i].err) {
				e->state = 0;
				continue;
			}
			f->chunks++;
			if (f->nlens < 256) {
				f->lens[f->nlens] = ev[i].len;
				__atomic_store_n(&f->nlens, f->nlens + 1, __ATOMIC_RELEASE);
			}
			e->corrupt = f->chunks == 3;
			uint32_t slot = (uint32_t)(e - slots);
			/* window is a power of two here: seq c mod 2^26 keeps c % window. Completions
			 * of different slots may be reported out of order (rxm), so only the
			 * slot <-> seq relation and the count are checked. */
			if (wire_imm_seq(ev[i].data) % window != slot)
				f->max_seq_gap_ok = 0;
			expect_c++;
			e->len = ev[i].len;
			e->imm = ev[i].data;
			e->state = 2;
			if (f->mode == FAKE_MUTE) {
				e->state = 4; /* taken, never answered */
				continue;
			}
			if (f->mode == FAKE_CLOSE) {
				close(fd); /* the loop ends with it; nothing is answered */
				fd = -1;
				break;
			}
			if ((f->mode == FAKE_DRAIN || f->mode == FAKE_DRAIN_V4) && f->chunks == 1)
				send_msg(fd, &dr, false);
			if (f->mode == FAKE_ABORT) {
				struct wire_msg a = { .type = WIRE_ABORT };
				a.u.abort.job_handle = handle;
				a.u.abort.code = WIRE_E_TIMEOUT;
				strcpy(a.u.abort.text, "rank 1 was silent for 100 ms");
				send_msg(fd, &a, false);
				e->state = 4; /* never answered */
			}
		}
		/* control: LEAVE or EOF ends the job */
		struct pollfd cp = { fd, POLLIN, 0 };
		if (poll(&cp, 1, 0) > 0) {
			ssize_t r = recv(fd, cbuf + clen, sizeof(cbuf) - clen, 0);
			if (r <= 0)
				break;
			clen += (size_t)r;
			struct wire_hdr h;
			if (clen >= WIRE_HDR_LEN && !wire_hdr_decode(cbuf, clen, &h) &&
			    h.type == WIRE_LEAVE)
				f->got_leave = 1;
		}
	}
	/* The endpoint stays open and unpolled until fake_stop, after the
	 * client is gone (see struct fake). */
	f->fab = fab;
	f->slots = slots;
	f->slots_mr = smr;
	f->slots_mr_len = window * sizeof(*slots);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* f[0] and f[1] both got the client's LEAVE. */
static bool both_left(void *arg)
{
	const struct fake *f = arg;

	return f[0].got_leave && f[1].got_leave;
}

static void fake_start(struct fake *f, enum fake_mode mode, const uint8_t *key)
{
	memset(f, 0, sizeof(*f));
	f->mode = mode;
	f->key = key;
	f->key_len = key ? strlen((const char *)key) : 0;
	f->lfd = tcp_bound(&f->port, true);
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

/* Stops the fake's thread (no more polling of its endpoint): before the
 * client closes its endpoints, so that an in-process shm peer never touches
 * a region the client has just unmapped. */
static void fake_halt(struct fake *f)
{
	if (f->halted)
		return;
	f->stop = 1;
	pthread_join(f->th, NULL);
	f->halted = 1;
}

static void fake_stop(struct fake *f)
{
	fake_halt(f);
	if (f->fab && f->slots_mr.mr) {
		/* RDMA's order: what is posted into the slots ends (cancelled,
		 * its completion read) before their registration closes */
		struct echo_slot *sl = f->slots;
		size_t n = f->slots_mr_len / sizeof(*sl), posted = 0;
		struct fabric_cqe ev[16];
		for (size_t i = 0; i < n; i++)
			if (sl[i].state == 1 && !fabric_cancel(f->fab, &sl[i].rop))
				posted++;
		for (uint64_t until = sc_now_ms() + 2000; posted && sc_now_ms() < until;) {
			int k = fabric_cq_poll(f->fab, ev, 16);
			for (int i = 0; i < k; i++)
				posted -= ev[i].err == -FI_ECANCELED;
		}
	}
	fabric_mr_dereg(&f->slots_mr);
	if (f->fab)
		fabric_close(f->fab);
	free(f->slots);
	close(f->lfd);
}

static struct client_params params(const char *const *aggs, size_t naggs)
{
	struct client_params p = {
		.provider = provider(),
		.node = "127.0.0.1",
		.job_id = 0x2a,
		.rank = 0,
		.nranks = 1,
		.chunk_bytes = 4096,
		.window = 8,
		.timeout_ms = 5000,
		.naggs = naggs,
		.aggs = aggs,
	};
	return p;
}

/* Polls until connect_poll leaves -EAGAIN; returns its result. */
static int connect_wait(struct client *c, unsigned ms)
{
	uint64_t until = sc_now_ms() + ms;
	int rc;
	while ((rc = client_connect_poll(c)) == -EAGAIN && sc_now_ms() < until)
		usleep(200);
	return rc;
}

static int wait_req(struct client *c, struct client_req *r, unsigned ms)
{
	uint64_t until = sc_now_ms() + ms;
	int done = 0, rc;
	do {
		rc = client_test(c, r, &done);
		if (done)
			return rc;
	} while (sc_now_ms() < until);
	return -ETIME; /* the test failed: the request hung */
}

static void test_shard(void **state)
{
	(void)state;
	static const size_t esz[] = { 1, 2, 4, 8 };
	for (size_t e = 0; e < 4; e++)
		for (size_t naggs = 1; naggs <= 9; naggs++)
			for (size_t count = 0; count < 3000; count += 1 + count / 3) {
				size_t next = 0;
				for (size_t a = 0; a < naggs; a++) {
					size_t first, n;
					client_shard(count, esz[e], naggs, a, &first, &n);
					assert_int_equal(first, next);
					if (first != count)
						assert_int_equal(first * esz[e] % 64, 0);
					next = first + n;
				}
				assert_int_equal(next, count);
			}
	/* Balanced for big counts: no shard more than 64 bytes above the mean. */
	for (size_t a = 0; a < 4; a++) {
		size_t first, n;
		client_shard(1000003, 4, 4, a, &first, &n);
		assert_true(n <= 1000003 / 4 + 16);
	}
	size_t first, n;
	client_shard(5, 4, 4, 3, &first, &n); /* tiny: all in the first shard */
	assert_int_equal(n, 0);
	client_shard(5, 4, 4, 0, &first, &n);
	assert_int_equal(n, 5);
}

static void test_params(void **state)
{
	(void)state;
	const char *aggs[] = { "127.0.0.1:1" };
	struct client *c = NULL;
	struct client_params p = params(aggs, 1);

	p.naggs = 0;
	assert_int_equal(client_create(&p, &c), -EINVAL);
	p.naggs = CLIENT_AGGS_MAX + 1;
	assert_int_equal(client_create(&p, &c), -EINVAL);
	p = params(aggs, 1);
	p.rank = 1;
	assert_int_equal(client_create(&p, &c), -EINVAL);
	p = params(aggs, 1);
	p.nranks = 0;
	assert_int_equal(client_create(&p, &c), -EINVAL);
	p = params(aggs, 1);
	p.chunk_bytes = 1001;
	assert_int_equal(client_create(&p, &c), -EINVAL);
	p = params(aggs, 1);
	p.dtype_mask = 1u << SC_DTYPE_COUNT;
	assert_int_equal(client_create(&p, &c), -EINVAL);
	static const char *bad[] = { "127.0.0.1", "127.0.0.1:", ":80", "127.0.0.1:99999",
				     "127.0.0.1:8x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = params(&bad[i], 1);
		assert_int_equal(client_create(&p, &c), -EINVAL);
	}
	assert_null(c);
}

static void test_unreachable(void **state)
{
	(void)state;
	/* A port bound and kept, never listened on (a port closed here was,
	 * once, taken by another test's listener under ctest -j: the
	 * connection then waited for a HELLO that never came). */
	uint16_t port;
	int fd = tcp_bound(&port, false);
	char agg[64], want[128];
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", port);
	const char *aggs[] = { agg };
	struct client_params p = params(aggs, 1);
	struct client *c;
	assert_int_equal(client_create(&p, &c), 0);
	uint64_t t0 = sc_now_ms();
	int rc = connect_wait(c, 8000);
	assert_int_equal(rc, -ECONNREFUSED);
	/* at once, not after the join timeout (5 s); a margin for loaded hosts */
	assert_true(sc_now_ms() - t0 < 4000);
	snprintf(want, sizeof(want), "%s unreachable: Connection refused", agg);
	assert_string_equal(client_error(c), want);
	assert_false(client_agg_alive(c, 0));
	struct client_req *r;
	int x;
	assert_int_equal(client_allreduce(c, &x, &x, 1, SC_I32, SC_OP_SUM, NULL, NULL, &r), -EPIPE);
	client_destroy(c);
	close(fd);
}

/* want: what the error must contain after "<host:port>". */
static void expect_join_error(enum fake_mode mode, unsigned timeout_ms, int want_rc,
			      const char *want_tail, const uint8_t *fake_key)
{
	struct fake f;
	fake_start(&f, mode, fake_key);
	char agg[64], want[256];
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", f.port);
	const char *aggs[] = { agg };
	struct client_params p = params(aggs, 1);
	p.nranks = 4;
	p.rank = 3;
	p.timeout_ms = timeout_ms;
	static const uint8_t key[] = "0123456789abcdef-client";
	p.key = key;
	p.key_len = sizeof(key) - 1;
	struct client *c;
	assert_int_equal(client_create(&p, &c), 0);
	uint64_t t0 = sc_now_ms();
	int rc = connect_wait(c, timeout_ms + 6000);
	assert_int_equal(rc, want_rc);
	/* within the timeout, with a margin for loaded hosts */
	assert_true(sc_now_ms() - t0 < timeout_ms + 3000);
	snprintf(want, sizeof(want), "%s%s", agg, want_tail);
	if (!strstr(client_error(c), want))
		fail_msg("error \"%s\" lacks \"%s\"", client_error(c), want);
	fake_halt(&f);
	client_destroy(c);
	fake_stop(&f);
}

static void test_refuse(void **state)
{
	(void)state;
	expect_join_error(FAKE_REFUSE, 5000, -EINVAL,
			  " refused join: nranks: job 0x2a has 8 ranks, request says 4",
			  (const uint8_t *)"0123456789abcdef-client");
}

static void test_bad_key(void **state)
{
	(void)state;
	expect_join_error(FAKE_ECHO, 5000, -EACCES, " refused join: auth: ",
			  (const uint8_t *)"another-key-of-the-daemon");
}

static void test_garbage(void **state)
{
	(void)state;
	expect_join_error(FAKE_GARBAGE, 5000, -EPROTO, ": protocol error: invalid message header",
			  NULL);
}

static void test_silent(void **state)
{
	(void)state;
	expect_join_error(FAKE_SILENT, 300, -ETIMEDOUT,
			  ": timed out after 300 ms waiting for HELLO", NULL);
}

/* Two echo aggregators (one dribbling its control messages byte by byte),
 * nranks 1: the result is the data. Many chunks, small window, several
 * requests outstanding, every type. */
static void test_echo(void **state)
{
	(void)state;
	struct fake f[2];
	static const uint8_t key[] = "0123456789abcdef-client";
	fake_start(&f[0], FAKE_ECHO, key);
	fake_start(&f[1], FAKE_DRIBBLE, key);
	char a0[64], a1[64];
	snprintf(a0, sizeof(a0), "127.0.0.1:%u", f[0].port);
	snprintf(a1, sizeof(a1), "127.0.0.1:%u", f[1].port);
	const char *aggs[] = { a0, a1 };
	struct client_params p = params(aggs, 2);
	p.key = key;
	p.key_len = sizeof(key) - 1;
	p.chunk_bytes = 4096;
	p.max_requests = 4;
	struct client *c;
	assert_int_equal(client_create(&p, &c), 0);
	assert_int_equal(connect_wait(c, 10000), 0);
	assert_int_equal(f[0].join_verified, 1);
	assert_int_equal(f[1].join_verified, 1);
	uint32_t h, w, ch;
	assert_int_equal(client_agg_info(c, 1, &h, &w, &ch), 0);
	assert_int_equal(h, 77);
	assert_int_equal(w, FAKE_WINDOW);
	assert_int_equal(ch, 4096);

	const size_t max = 1 << 20;
	uint8_t *sb = malloc(max * 4), *rb = malloc(max * 4);
	struct fabric_mr smr = { 0 }, rmr = { 0 };
	assert_int_equal(client_mr_reg(c, sb, max * 4, &smr), 0);
	assert_int_equal(client_mr_reg(c, rb, max * 4, &rmr), 0);
	for (size_t i = 0; i < max * 4; i++)
		sb[i] = (uint8_t)(i * 131 + 7);
	static const size_t counts[] = { 0, 1, 3, 7, 1000, 4097, 65537 };
	for (int t = 0; t < SC_DTYPE_COUNT; t++)
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
			size_t n = counts[k] * sc_dtype_size(t) <= max * 4 ? counts[k] : max * 4 / sc_dtype_size(t);
			memset(rb, 0xee, max * 4);
			struct client_req *r;
			assert_int_equal(client_allreduce(c, sb, rb, n, t, SC_OP_MAX, smr.desc,
							  rmr.desc, &r), 0);
			assert_int_equal(wait_req(c, r, 10000), 0);
			assert_memory_equal(rb, sb, n * sc_dtype_size(t));
			if (n * sc_dtype_size(t) < max * 4)
				assert_int_equal(rb[n * sc_dtype_size(t)], 0xee);
		}
	/* Four requests at once (the pool), a fifth gets -EAGAIN. */
	struct client_req *rs[4], *extra;
	size_t part = max;
	for (int i = 0; i < 4; i++)
		assert_int_equal(client_allreduce(c, sb + i * part, rb + i * part, part / 4, SC_F32,
						  SC_OP_SUM, smr.desc, rmr.desc, &rs[i]), 0);
	assert_int_equal(client_allreduce(c, sb, rb, 1, SC_F32, SC_OP_SUM, smr.desc, rmr.desc, &extra),
			 -EAGAIN);
	for (int i = 0; i < 4; i++)
		assert_int_equal(wait_req(c, rs[i], 10000), 0);
	assert_memory_equal(rb, sb, 4 * part);
	/* In place. */
	memcpy(rb, sb, max);
	struct client_req *r;
	assert_int_equal(client_allreduce(c, rb, rb, max / 8, SC_U64, SC_OP_MIN, rmr.desc, rmr.desc,
					  &r), 0);
	assert_int_equal(wait_req(c, r, 10000), 0);
	assert_memory_equal(rb, sb, max);
	/* Not in the mask / bad op. */
	assert_int_equal(client_allreduce(c, sb, rb, 1, SC_DTYPE_COUNT, SC_OP_SUM, NULL, NULL, &r),
			 -EINVAL);
	assert_int_equal(client_allreduce(c, sb, rb, 1, SC_F32, SC_OP_COUNT, NULL, NULL, &r),
			 -EINVAL);
	assert_true(f[0].max_seq_gap_ok && f[1].max_seq_gap_ok);
	assert_true(f[0].chunks > 100);
	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
	client_destroy(c);
	/* The LEAVE reached both. */
	th_wait_until(both_left, f, 1000, 5);
	fake_stop(&f[0]);
	fake_stop(&f[1]);
	assert_true(f[0].got_leave);
	assert_true(f[1].got_leave);
	free(sb);
	free(rb);
}

static void test_chunk_for(void **state)
{
	(void)state;
	/* off, no gain, shard within one eager message */
	assert_int_equal(client_chunk_for(40000, 4, 262144, 8, 0), 262144);
	assert_int_equal(client_chunk_for(40000, 4, 8192, 8, 16384), 8192);
	assert_int_equal(client_chunk_for(16384, 4, 262144, 8, 16384), 262144);
	/* up to 4 eager chunks (fewer when the window is smaller) */
	assert_int_equal(client_chunk_for(16388, 4, 262144, 8, 16384), 16384);
	assert_int_equal(client_chunk_for(65536, 4, 262144, 8, 16384), 16384);
	assert_int_equal(client_chunk_for(65600, 4, 262144, 8, 16384), 262144);
	assert_int_equal(client_chunk_for(32768, 4, 262144, 2, 16384), 16384);
	assert_int_equal(client_chunk_for(32832, 4, 262144, 2, 16384), 262144);
	/* whole elements */
	assert_int_equal(client_chunk_for(3000, 8, 8192, 4, 1020), 1016);
	assert_int_equal(client_chunk_for(3000, 2, 8191, 4, 16384), 8190);
	/* the provider's figure */
	assert_int_equal(client_eager_default("shm"), 0);
	assert_int_equal(client_eager_default(NULL), 0);
	if (!getenv("FI_OFI_RXM_EAGER_LIMIT"))
		assert_int_equal(client_eager_default("tcp;ofi_rxm"), 16384);
}

/* eager_bytes: a request whose shard fits in 4 eager messages goes as
 * eager-sized chunks, a larger one as granted chunks; the echo comes back
 * bitwise equal either way, in place too. Two aggregators, so each sees
 * its own shard.
 *
 * The client runs in a child process, the fakes here (as every real
 * aggregator is a process of its own): libfabric's shm from 2.5 on cannot
 * carry a message above its inject size (4 KiB: these cases send 4160 and
 * 8192 bytes) between two endpoints of one process. Its in-process shortcut
 * (smr_map_to_region() finding the peer among the process's own endpoints)
 * leaves the peer's mapping unset for the endpoint that opened the
 * connection, so the first out-of-line command it is handed points nowhere
 * and its progress segfaults (docs/client.md, "libfabric versions"). */
static const struct {
	enum sc_dtype t;
	size_t count;       /* elements */
	size_t want[2][8];  /* per aggregator: message sizes, largest first */
} eager_cases[] = {
	/* shard 3008 / 2992 bytes: eager chunks of 1024 */
	{ SC_F32, 1500, { { 1024, 1024, 960 }, { 1024, 1024, 944 } } },
	/* shard 4096 each: exactly 4 eager chunks */
	{ SC_F64, 1024, { { 1024, 1024, 1024, 1024 }, { 1024, 1024, 1024, 1024 } } },
	/* shard 4160 / 4096: the first no longer fits 4 eager chunks */
	{ SC_F32, 2064, { { 4160 }, { 1024, 1024, 1024, 1024 } } },
	/* big: granted chunks */
	{ SC_F32, 8197, { { 8192, 8192, 64 }, { 8192, 8148 } } },
	/* shard within one eager message: one message either way */
	{ SC_U8, 1000, { { 512 }, { 488 } } },
	/* f16, shard 3008 / 2994 bytes */
	{ SC_F16, 3001, { { 1024, 1024, 960 }, { 1024, 1024, 946 } } },
};
#define EAGER_NCASES (sizeof(eager_cases) / sizeof(eager_cases[0]))

/* The child's part: every case, in place and not, each request waited for
 * before the next (so each fake sees a case's messages before the next
 * case's). 0, or the line of the first check that failed. */
static int eager_cut_client(const char *const *aggs)
{
#define EC_CHECK(x)                                                                           \
	do {                                                                                  \
		if (!(x)) {                                                                   \
			fprintf(stderr, "eager_cut child: %s:%d: %s\n", __FILE__, __LINE__, #x); \
			return __LINE__;                                                      \
		}                                                                             \
	} while (0)
	struct client_params p = params(aggs, 2);
	p.chunk_bytes = FAKE_CHUNK; /* granted: 8192, window 4 */
	p.eager_bytes = 1024;
	struct client *c;
	EC_CHECK(client_create(&p, &c) == 0);
	EC_CHECK(connect_wait(c, 10000) == 0);

	const size_t max = 64 << 10;
	uint8_t *sb = malloc(max), *rb = malloc(max);
	struct fabric_mr smr = { 0 }, rmr = { 0 };
	EC_CHECK(sb && rb);
	EC_CHECK(client_mr_reg(c, sb, max, &smr) == 0);
	EC_CHECK(client_mr_reg(c, rb, max, &rmr) == 0);
	for (size_t i = 0; i < max; i++)
		sb[i] = (uint8_t)(i * 197 + 11);
	for (size_t k = 0; k < EAGER_NCASES; k++)
		for (int inplace = 0; inplace < 2; inplace++) {
			size_t bytes = eager_cases[k].count * sc_dtype_size(eager_cases[k].t);
			memset(rb, 0xee, max);
			if (inplace)
				memcpy(rb, sb, bytes);
			struct client_req *r;
			EC_CHECK(client_allreduce(c, inplace ? rb : sb, rb, eager_cases[k].count,
						  eager_cases[k].t, SC_OP_SUM, inplace ? rmr.desc : smr.desc,
						  rmr.desc, &r) == 0);
			EC_CHECK(wait_req(c, r, 10000) == 0);
			EC_CHECK(!memcmp(rb, sb, bytes));
			EC_CHECK(rb[bytes] == 0xee);
		}
	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
	client_destroy(c);
	free(sb);
	free(rb);
	return 0;
#undef EC_CHECK
}

static void test_eager_cut(void **state)
{
	(void)state;
	struct fake f[2];
	fake_start(&f[0], FAKE_ECHO, NULL);
	fake_start(&f[1], FAKE_ECHO, NULL);
	char a0[64], a1[64];
	snprintf(a0, sizeof(a0), "127.0.0.1:%u", f[0].port);
	snprintf(a1, sizeof(a1), "127.0.0.1:%u", f[1].port);
	const char *aggs[] = { a0, a1 };

	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(eager_cut_client(aggs) ? 1 : 0);
	int st = 0;
	pid_t w = 0;
	/* the child's own waits are bounded (10 s each); this bounds them all */
	for (uint64_t until = sc_now_ms() + 90000; (w = waitpid(pid, &st, WNOHANG)) == 0 &&
						    sc_now_ms() < until;)
		usleep(10000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		fail_msg("the client's process did not finish within 90 s");
	}
	assert_int_equal(w, pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail_msg("the client's process failed (%s %d)", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));

	/* What each fake received, case by case in order. */
	for (int a = 0; a < 2; a++) {
		int from = 0, nlens = __atomic_load_n(&f[a].nlens, __ATOMIC_ACQUIRE), want_total = 0;
		for (size_t k = 0; k < EAGER_NCASES; k++)
			for (int inplace = 0; inplace < 2; inplace++) {
				int want_n = 0;
				while (want_n < 8 && eager_cases[k].want[a][want_n])
					want_n++;
				want_total += want_n;
				if (from + want_n > nlens)
					fail_msg("case %zu aggregator %d: %d messages in all, want at least %d",
						 k, a, nlens, from + want_n);
				size_t got[8];
				for (int i = 0; i < want_n; i++)
					got[i] = f[a].lens[from + i];
				from += want_n;
				for (int i = 1; i < want_n; i++) /* largest first */
					for (int j = i; j > 0 && got[j] > got[j - 1]; j--) {
						size_t t = got[j];
						got[j] = got[j - 1];
						got[j - 1] = t;
					}
				for (int i = 0; i < want_n; i++)
					if (got[i] != eager_cases[k].want[a][i])
						fail_msg("case %zu aggregator %d: message %d of %zu bytes, want "
							 "%zu", k, a, i, got[i], eager_cases[k].want[a][i]);
			}
		if (nlens != want_total)
			fail_msg("aggregator %d: %d messages, want %d", a, nlens, want_total);
	}
	/* The client's LEAVE reached both before its process ended. */
	th_wait_until(both_left, f, 1000, 5);
	assert_true(f[0].got_leave);
	assert_true(f[1].got_leave);
	fake_stop(&f[0]);
	fake_stop(&f[1]);
}

/* The aggregator misbehaves mid-request: the request must fail (never
 * report success) within a bounded time and say why. */
static void expect_data_error(enum fake_mode mode, int want_rc, const char *want)
{
	struct fake f;
	fake_start(&f, mode, NULL);
	char agg[64];
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", f.port);
	const char *aggs[] = { agg };
	struct client_params p = params(aggs, 1);
	p.timeout_ms = 2000;
	struct client *c;
	assert_int_equal(client_create(&p, &c), 0);
	assert_int_equal(connect_wait(c, 10000), 0);
	size_t n = 64 * 1024;
	float *sb = calloc(n, sizeof(float)), *rb = calloc(n, sizeof(float));
	struct fabric_mr smr = { 0 }, rmr = { 0 };
	assert_int_equal(client_mr_reg(c, sb, n * 4, &smr), 0);
	assert_int_equal(client_mr_reg(c, rb, n * 4, &rmr), 0);
	int rc = 0;
	uint64_t t0 = sc_now_ms();
	for (int it = 0; it < 20 && rc == 0; it++) {
		struct client_req *r;
		rc = client_allreduce(c, sb, rb, n, SC_F32, SC_OP_SUM, smr.desc, rmr.desc, &r);
		if (rc)
			break;
		rc = wait_req(c, r, 8000);
	}
	assert_int_equal(rc, want_rc);
	/* failed, not hung: the silence limit is the timeout (2 s) + 2 s; a
	 * margin for loaded hosts */
	assert_true(sc_now_ms() - t0 < 12000);
	if (!strstr(client_error(c), want))
		fail_msg("error \"%s\" lacks \"%s\"", client_error(c), want);
	assert_false(client_agg_alive(c, 0));
	struct client_req *r;
	assert_int_equal(client_allreduce(c, sb, rb, n, SC_F32, SC_OP_SUM, smr.desc, rmr.desc, &r),
			 -EPIPE);
	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
	fake_halt(&f);
	client_destroy(c);
	fake_stop(&f);
	free(sb);
	free(rb);
}

static void test_bad_seq(void **state)
{
	(void)state;
	expect_data_error(FAKE_BADSEQ, -EPROTO, "sent a bad result in slot");
}

static void test_bad_len(void **state)
{
	(void)state;
	expect_data_error(FAKE_BADLEN, -EPROTO, "sent a bad result in slot");
}

static void test_abort(void **state)
{
	(void)state;
	expect_data_error(FAKE_ABORT, -ETIMEDOUT,
			  "aborted the job: timeout: rank 1 was silent for 100 ms");
}

static void test_close(void **state)
{
	(void)state;
	expect_data_error(FAKE_CLOSE, -ECONNRESET, "closed the connection");
}

/* An aggregator that takes the chunks and sends no result: after the
 * silence limit the client says which chunk waits and that its send
 * completed, so a lost result can be told from an unreachable host. */
static void test_mute(void **state)
{
	(void)state;
	expect_data_error(FAKE_MUTE, -ETIMEDOUT, "): its send completed, its result not come");
}

/* DRAIN where it was not negotiated (version 4) or before READY: a
 * protocol error, as any message out of place. */
static void test_drain_v4(void **state)
{
	(void)state;
	expect_data_error(FAKE_DRAIN_V4, -EPROTO, "protocol error: unexpected DRAIN while ready");
}

static void test_drain_early(void **state)
{
	(void)state;
	expect_join_error(FAKE_DRAIN_EARLY, 5000, -EPROTO,
			  ": protocol error: unexpected DRAIN while waiting for READY",
			  (const uint8_t *)"0123456789abcdef-client");
}

/* DRAIN in version 5 while a request runs: the bit shows, the request
 * completes, retire is -EBUSY while a request uses the aggregator, then
 * leaves it cleanly (the fake reads the LEAVE): not failed, not alive, no
 * error, and no request may use it any more. */
static void test_drain(void **state)
{
	(void)state;
	struct fake f;
	fake_start(&f, FAKE_DRAIN, NULL);
	char agg[64];
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", f.port);
	const char *aggs[] = { agg };
	struct client_params p = params(aggs, 1);
	struct client *c;
	assert_int_equal(client_create(&p, &c), 0);
	assert_int_equal(connect_wait(c, 10000), 0);
	size_t n = 16 * 1024;
	float *sb = calloc(n, sizeof(float)), *rb = calloc(n, sizeof(float));
	struct fabric_mr smr = { 0 }, rmr = { 0 };
	assert_int_equal(client_mr_reg(c, sb, n * 4, &smr), 0);
	assert_int_equal(client_mr_reg(c, rb, n * 4, &rmr), 0);
	for (size_t i = 0; i < n; i++)
		sb[i] = (float)i;
	assert_int_equal(client_draining(c), 0);
	assert_int_equal(client_agg_retire(c, 1), -EINVAL);
	struct client_req *r;
	assert_int_equal(client_allreduce(c, sb, rb, n, SC_F32, SC_OP_SUM, smr.desc, rmr.desc, &r), 0);
	assert_int_equal(client_agg_retire(c, 0), -EBUSY);
	assert_int_equal(wait_req(c, r, 8000), 0);
	for (size_t i = 0; i < n; i++)
		assert_true(rb[i] == (float)i);
	for (uint64_t end = sc_now_ms() + 5000; !client_draining(c) && sc_now_ms() < end;)
		client_progress(c);
	assert_int_equal(client_draining(c), 1);
	assert_true(client_agg_alive(c, 0));
	assert_int_equal(client_agg_retire(c, 0), 0);
	assert_int_equal(client_agg_retire(c, 0), 0); /* left already */
	assert_int_equal(client_draining(c), 0);
	assert_false(client_agg_alive(c, 0));
	assert_int_equal(client_failed(c), 0);
	assert_string_equal(client_error(c), "no error");
	assert_int_equal(client_allreduce(c, sb, rb, n, SC_F32, SC_OP_SUM, smr.desc, rmr.desc, &r), -EINVAL);
	assert_int_equal(client_progress(c), 0);
	for (uint64_t end = sc_now_ms() + 5000; !f.got_leave && sc_now_ms() < end;)
		usleep(1000);
	assert_int_equal(f.got_leave, 1);
	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
	fake_halt(&f);
	client_destroy(c);
	fake_stop(&f);
	free(sb);
	free(rb);
}

/* A shared root endpoint: the client opens its aggregator endpoints on the
 * given fabric's domain (memory registered there serves them) and never
 * polls or posts on the owner's endpoint: the owner's completions stay on
 * the owner's queue, and the endpoint stays usable after client_destroy. */
static void test_shared_fabric(void **state)
{
	(void)state;
	struct fake f;
	fake_start(&f, FAKE_ECHO, NULL);
	struct fabric_params fp = { .provider = provider(), .node = "127.0.0.1" };
	struct fabric *fab;
	assert_int_equal(fabric_open(&fp, &fab), 0);
	char agg[64];
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", f.port);
	const char *aggs[] = { agg };
	struct client_params p = params(aggs, 1);
	p.fabric = fab;
	struct client *c;
	assert_int_equal(client_create(&p, &c), 0);
	assert_ptr_equal(client_fabric(c), fab);
	assert_int_equal(connect_wait(c, 10000), 0);
	fi_addr_t self;
	assert_int_equal(fabric_av_insert(fab, fab->addr, fab->addrlen, &self), 0);
	static uint64_t msg = 0x1122334455667788ull, got = 0;
	struct fabric_op sop, rop;
	struct fabric_mr mmr, gmr;
	assert_int_equal(fabric_mr_reg(fab, &msg, sizeof(msg), &mmr), 0);
	assert_int_equal(fabric_mr_reg(fab, &got, sizeof(got), &gmr), 0);
	assert_int_equal(fabric_trecv(fab, &got, 8, gmr.desc, FI_ADDR_UNSPEC, 0x5, 0, &rop), 0);
	int rc, seen = 0;
	struct fabric_cqe ev[8];
	uint64_t until = sc_now_ms() + 5000;
	while ((rc = fabric_tsend(fab, &msg, 8, mmr.desc, self, 0x5, 0, &sop)) == -FI_EAGAIN &&
	       sc_now_ms() < until) {
		client_progress(c);
		int n = fabric_cq_poll(fab, ev, 8); /* the owner progresses its own endpoint */
		for (int k = 0; k < n; k++)
			seen += ev[k].op == &sop || ev[k].op == &rop;
	}
	assert_int_equal(rc, 0);
	/* Memory registered on the shared domain carries the client's chunks. */
	static float sb[40000], rb[40000];
	struct fabric_mr smr, rmr;
	assert_int_equal(fabric_mr_reg(fab, sb, sizeof(sb), &smr), 0);
	assert_int_equal(fabric_mr_reg(fab, rb, sizeof(rb), &rmr), 0);
	for (int i = 0; i < 40000; i++)
		sb[i] = (float)i;
	struct client_req *r;
	assert_int_equal(client_allreduce(c, sb, rb, 40000, SC_F32, SC_OP_SUM, smr.desc, rmr.desc, &r), 0);
	assert_int_equal(wait_req(c, r, 10000), 0);
	assert_memory_equal(sb, rb, sizeof(sb));
	/* The owner's two operations complete on the owner's queue. */
	for (until = sc_now_ms() + 5000; seen < 2 && sc_now_ms() < until;) {
		int n = fabric_cq_poll(fab, ev, 8);
		for (int k = 0; k < n; k++)
			seen += ev[k].op == &sop || ev[k].op == &rop;
	}
	assert_int_equal(seen, 2);
	assert_true(got == msg);
	/* Destroy with a request in flight: no hang, nothing left on the
	 * owner's queue. */
	assert_int_equal(client_allreduce(c, sb, rb, 40000, SC_F32, SC_OP_SUM, smr.desc, rmr.desc, &r), 0);
	uint64_t t0 = sc_now_ms();
	client_destroy(c);
	assert_true(sc_now_ms() - t0 < 5000); /* no hang: its own bound is 1 s */
	for (int k = 0; k < 10; k++)
		assert_true(fabric_cq_poll(fab, ev, 8) <= 0);
	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
	fabric_mr_dereg(&mmr);
	fabric_mr_dereg(&gmr);
	fabric_close(fab);
	fake_stop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shard),    cmocka_unit_test(test_params),
		cmocka_unit_test(test_unreachable), cmocka_unit_test(test_refuse),
		cmocka_unit_test(test_bad_key),  cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_silent),   cmocka_unit_test(test_echo),
		cmocka_unit_test(test_bad_seq),  cmocka_unit_test(test_bad_len),
		cmocka_unit_test(test_abort),    cmocka_unit_test(test_close),    cmocka_unit_test(test_mute),
		cmocka_unit_test(test_shared_fabric),
		cmocka_unit_test(test_drain),    cmocka_unit_test(test_drain_v4),
		cmocka_unit_test(test_drain_early),
		cmocka_unit_test(test_chunk_for), cmocka_unit_test(test_eager_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
