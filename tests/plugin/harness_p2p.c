/* The p2p test: ncclNet between ranks in a ring (each sends to the next,
 * receives from the previous): sizes, tags and order, grouped receives,
 * streams. */
#include "harness.h"

#include <pthread.h>
#include <string.h>

#include "clock.h"

struct conn_arg {
	void *handle;
	void *comm;
};

static void *connect_thread(void *a)
{
	struct conn_arg *c = a;
	double end = sc_now_s() + 60;
	int tries = 0;
	while (!c->comm) {
		NCHECK(net_connect(c->handle, &c->comm));
		tries++;
		REQUIRE(sc_now_s() < end, "connect: no sendComm after 60 s (%d tries)", tries);
	}
	return NULL;
}

static uint8_t pat(int rank, size_t i, unsigned salt)
{
	return (uint8_t)(rank * 131 + i * 7 + (i >> 8) * 13 + salt * 29);
}

/* --close-inflight: NCCL closes a send comm whose last send the peer has
 * not received yet. The message is rendezvous-sized (8 MiB: the send
 * cannot complete before the receive is posted), so closeSend's bounded
 * wait for it runs out; the peer posts the receive afterwards and the send
 * completes late. The plugin must keep the comm alive for that completion
 * (it logs that it parks it) and free it once the completion is read (it
 * logs that too); a comm freed at close is written by the late completion
 * (heap-use-after-free under ASan). The receive must deliver the bytes. */
static void close_inflight(void *sc, void *rc, void *lc, uint8_t *sbuf, void *smh, uint8_t *rbuf,
			   void *rmh)
{
	const size_t len = 8u << 20;
	int prev = (my_rank + opt.nranks - 1) % opt.nranks, s[8];
	void *sr = NULL, *rr = NULL;
	double end = sc_now_s() + 30;

	memset(sbuf, 0x60 + my_rank, len);
	while (!(sr = net_isend(sc, sbuf, len, 77, smh)))
		REQUIRE(sc_now_s() < end, "close-inflight: isend refused for 30 s");
	REQUIRE(!net_test(sr, s), "close-inflight: an 8 MiB send completed before its receive was posted");
	int parked0 = __atomic_load_n(&saw_parked, __ATOMIC_RELAXED);
	NCHECK(NET_CALL(closeSend, sc));
	REQUIRE(__atomic_load_n(&saw_parked, __ATOMIC_RELAXED) == parked0 + 1,
	      "close-inflight: closeSend with a send in flight did not park the comm "
	      "(no \"parked until they complete\" line)");
	rv_barrier("closed-inflight");
	void *rp[1] = { rbuf };
	size_t rl[1] = { len };
	int tg[1] = { 77 };
	while (!(rr = net_irecv(rc, 1, rp, rl, tg, &rmh)))
		REQUIRE(sc_now_s() < end, "close-inflight: irecv refused for 30 s");
	net_wait(rr, s, "close-inflight irecv");
	REQUIRE(s[0] == (int)len && rbuf[0] == (uint8_t)(0x60 + prev) &&
		      rbuf[len - 1] == (uint8_t)(0x60 + prev),
	      "close-inflight: received %d bytes, byte 0x%x", s[0], rbuf[0]);
	/* The send's completion comes back after the peer's receive; any
	 * progress call reads it (accept here, with nothing to accept). */
	end = sc_now_s() + 30;
	while (!__atomic_load_n(&saw_unparked, __ATOMIC_RELAXED)) {
		void *none = NULL;
		NCHECK(net_accept(lc, &none));
		REQUIRE(!none, "close-inflight: accept returned a comm");
		REQUIRE(sc_now_s() < end,
		      "close-inflight: the parked comm was not freed within 30 s of its send completing");
	}
	if (my_rank == 0)
		fprintf(stderr, "close-inflight: the comm closed with its send in flight was parked, "
			"then freed after the late completion\n");
}

void run_p2p(void)
{
	int N = opt.nranks, next = (my_rank + 1) % N, prev = (my_rank + N - 1) % N;
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE], hn[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL;

	plugin_open(false);
	net_listen(h, &lc);
	rv_put("p2p", my_rank, h, sizeof(h));
	rv_get("p2p", next, hn, sizeof(hn));

	/* Connect on one thread while this one accepts: as NCCL's proxy. */
	struct conn_arg ca = { hn, NULL };
	pthread_t th;
	pthread_create(&th, NULL, connect_thread, &ca);
	void *rc = NULL;
	double end = sc_now_s() + 60;
	while (!rc) {
		NCHECK(net_accept(lc, &rc));
		REQUIRE(sc_now_s() < end, "accept: no recvComm after 60 s");
	}
	pthread_join(th, NULL);
	void *sc = ca.comm;

	/* Registering a CUDA pointer must fail: we announced host only. */
	void *bad = NULL;
	ncclResult_t br = NET_CALL(regMr, sc, h, 64, NCCL_PTR_CUDA, &bad);
	REQUIRE(br != ncclSuccess, "regMr of NCCL_PTR_CUDA succeeded");

	const size_t big = (64u << 20) + 64;
	uint8_t *sbuf = malloc(big), *rbuf[8];
	REQUIRE(sbuf, "malloc");
	void *smh = net_reg(sc, sbuf, big), *rmh[8];
	for (int i = 0; i < 8; i++) {
		rbuf[i] = malloc(big);
		REQUIRE(rbuf[i], "malloc");
		rmh[i] = net_reg(rc, rbuf[i], big);
	}
	unsigned salt = 0;

	/* 1. Sizes 0 .. 64 MiB, each receive buffer 64 bytes larger than the message. */
	static const size_t sizes[] = { 0, 1, 7, 64, 4096, 16385, 24576, 1 << 20, (4 << 20) + 3,
					 16 << 20, 64 << 20 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++, salt++) {
		size_t len = sizes[k];
		if (opt.version == 8 && len > INT_MAX - 64)
			continue;
		for (size_t i = 0; i < len; i++)
			sbuf[i] = pat(my_rank, i, salt);
		memset(rbuf[0], 0xEE, len + 64);
		void *rp[1] = { rbuf[0] };
		size_t rl[1] = { len + 64 };
		int tg[1] = { 7 };
		void *rr = NULL, *sr = NULL;
		double e2 = sc_now_s() + 30;
		while (!(rr = net_irecv(rc, 1, rp, rl, tg, &rmh[0])))
			REQUIRE(sc_now_s() < e2, "irecv refused for 30 s");
		while (!(sr = net_isend(sc, sbuf, len, 7, smh)))
			REQUIRE(sc_now_s() < e2, "isend refused for 30 s");
		int ss[8] = { -1 }, rs[8] = { -1 };
		net_wait(sr, ss, "isend");
		net_wait(rr, rs, "irecv");
		REQUIRE((size_t)rs[0] == len, "size %zu: receive reported %d bytes", len, rs[0]);
		for (size_t i = 0; i < len; i++)
			REQUIRE(rbuf[0][i] == pat(prev, i, salt), "size %zu: byte %zu is %u, want %u", len,
			      i, rbuf[0][i], pat(prev, i, salt));
		REQUIRE(rbuf[0][len] == 0xEE, "size %zu: wrote past the message", len);
	}

	/* 2. Order per tag and tag matching: 8 sends over 3 tags, all outstanding. */
	for (int round = 0; round < 20; round++) {
		void *sr[8], *rr[8];
		uint32_t *sv = (uint32_t *)sbuf;
		for (int i = 0; i < 8; i++) {
			int tag = i % 3;
			void *rp[1] = { rbuf[i] };
			size_t rl[1] = { 4096 };
			double e2 = sc_now_s() + 30;
			while (!(rr[i] = net_irecv(rc, 1, rp, rl, &tag, &rmh[i])))
				REQUIRE(sc_now_s() < e2, "irecv refused");
		}
		for (int i = 0; i < 8; i++) {
			sv[i * 1024] = (uint32_t)(my_rank << 16 | round << 8 | i);
			double e2 = sc_now_s() + 30;
			while (!(sr[i] = net_isend(sc, &sv[i * 1024], 16 + (size_t)i * 100, i % 3, smh)))
				REQUIRE(sc_now_s() < e2, "isend refused");
		}
		for (int i = 0; i < 8; i++) {
			int s1[8], s2[8];
			net_wait(sr[i], s1, "isend");
			net_wait(rr[i], s2, "irecv");
			uint32_t want = (uint32_t)(prev << 16 | round << 8 | i);
			REQUIRE(*(uint32_t *)rbuf[i] == want && s2[0] == 16 + i * 100,
			      "round %d recv %d: got 0x%x (%d bytes), want 0x%x (%d bytes)", round, i,
			      *(uint32_t *)rbuf[i], s2[0], want, 16 + i * 100);
		}
	}

	/* 3. Grouped receive: n = maxRecvs subs with distinct tags, sent in reverse. */
	int n = max_recvs();
	if (n > 1) {
		void *rp[8];
		size_t rl[8];
		int tags[8];
		for (int i = 0; i < n; i++) {
			rp[i] = rbuf[i];
			rl[i] = 1 << 20;
			tags[i] = 100 + i;
		}
		void *rr = NULL, *sr[8];
		double e2 = sc_now_s() + 30;
		while (!(rr = net_irecv(rc, n, rp, rl, tags, rmh)))
			REQUIRE(sc_now_s() < e2, "grouped irecv refused");
		for (int i = n - 1; i >= 0; i--) {
			memset(sbuf + (size_t)i * (1 << 20), 0x40 + i + my_rank, 1000 + (size_t)i);
			while (!(sr[i] = net_isend(sc, sbuf + (size_t)i * (1 << 20), 1000 + (size_t)i,
						   100 + i, smh)))
				REQUIRE(sc_now_s() < e2, "isend refused");
		}
		int rs[8] = { 0 }, s1[8];
		net_wait(rr, rs, "grouped irecv");
		for (int i = 0; i < n; i++) {
			net_wait(sr[i], s1, "isend");
			REQUIRE(rs[i] == 1000 + i && rbuf[i][999 + i] == (uint8_t)(0x40 + i + prev),
			      "grouped sub %d: %d bytes, byte 0x%x", i, rs[i], rbuf[i][999 + i]);
		}
	}

	/* 4. Streams: 200 messages of 256 KiB, up to 8 outstanding each way. */
	{
		const int total = 200, win = 8;
		const size_t len = 256 << 10;
		void *sr[8] = { 0 }, *rr[8] = { 0 };
		int sent = 0, recvd = 0, sdone = 0, rdone = 0;
		double e2 = sc_now_s() + 60;
		while (sdone < total || rdone < total) {
			REQUIRE(sc_now_s() < e2, "stream: %d/%d sent, %d/%d received after 60 s", sdone,
			      total, rdone, total);
			if (recvd < total && recvd - rdone < win) {
				void *rp[1] = { rbuf[recvd % win] };
				size_t rl[1] = { len };
				int tg[1] = { 3 };
				void *r = net_irecv(rc, 1, rp, rl, tg, &rmh[recvd % win]);
				if (r)
					rr[recvd++ % win] = r;
			}
			if (sent < total && sent - sdone < win) {
				uint8_t *p = sbuf + (size_t)(sent % win) * len;
				memset(p, (uint8_t)(sent + my_rank), len);
				void *r = net_isend(sc, p, len, 3, smh);
				if (r)
					sr[sent++ % win] = r;
			}
			int s[8];
			if (sdone < sent && net_test(sr[sdone % win], s))
				sdone++;
			if (rdone < recvd && net_test(rr[rdone % win], s)) {
				uint8_t *p = rbuf[rdone % win];
				REQUIRE(s[0] == (int)len && p[0] == (uint8_t)(rdone + prev) &&
					      p[len - 1] == (uint8_t)(rdone + prev),
				      "stream message %d: %d bytes, byte 0x%x", rdone, s[0], p[0]);
				rdone++;
			}
		}
	}
	if (opt.close_inflight) {
		close_inflight(sc, rc, lc, sbuf, smh, rbuf[0], rmh[0]);
		sc = NULL;
	}
	rv_barrier("p2p-done");
	net_dereg(rc, smh); /* this plugin's registrations are not tied to a comm */
	for (int i = 0; i < 8; i++) {
		net_dereg(rc, rmh[i]);
		free(rbuf[i]);
	}
	free(sbuf);
	if (sc)
		NCHECK(NET_CALL(closeSend, sc));
	NCHECK(NET_CALL(closeRecv, rc));
	NCHECK(NET_CALL(closeListen, lc));
	prof_finish();
	plugin_finalize(false);
	REQUIRE(log_prefix_ok > 0, "no log line came through NCCL's logger with the NET/Sumcast prefix");
}
