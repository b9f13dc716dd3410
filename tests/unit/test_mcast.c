/* Multicast results' shared protocol logic (common/mcast.c): results cut
 * into datagrams, delivered shuffled with 0, 1 and 10 % loss, duplicates,
 * other jobs' and forged datagrams mixed in; what is lost is found by
 * sc_mc_rx_missing and repaired (sc_mc_rx_fill, as a unicast repair would),
 * and every result must equal what was sent, bit for bit, with nothing
 * written outside it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mcast.h"
#include "mcast_ib.h"

#define PAYLOAD 1432 /* a 1500-byte MTU less IP, UDP and our header */
#define WINDOW 4
#define MAXLEN (256u << 10)
#define GUARD 64

static uint64_t rs = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (uint32_t)(rs >> 11);
}

struct dgram {
	uint8_t b[SC_MC_HDR + PAYLOAD];
	size_t n;
};

/* The sender's side: every datagram of a result. */
static size_t cut(uint32_t job, uint64_t key, uint64_t chunk, uint32_t imm, const uint8_t *res,
		  uint32_t len, struct dgram *out)
{
	uint32_t np = sc_mc_npackets(len, PAYLOAD);
	const struct sc_mc_hdr r = { .job = job, .key = key, .chunk = chunk, .imm = imm, .len = len };

	for (uint32_t k = 0; k < np; k++) {
		out[k].n = sc_mc_pack(out[k].b, &r, res, k * PAYLOAD, PAYLOAD);
		assert_int_equal(out[k].n, SC_MC_HDR + (len - k * PAYLOAD < PAYLOAD ? len - k * PAYLOAD : PAYLOAD));
	}
	return np;
}

static void shuffle(struct dgram *d, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = rnd() % i;
		struct dgram t = d[i - 1];
		d[i - 1] = d[j];
		d[j] = t;
	}
}

static void test_hdr(void **state)
{
	struct sc_mc_hdr h = { 7, 0x1122334455667788ull, 1ull << 40, 0xABCD, 5000, 1432, 1432 }, o;
	uint8_t b[SC_MC_HDR + PAYLOAD] = { 0 };

	(void)state;
	sc_mc_hdr_encode(&h, b);
	assert_int_equal(sc_mc_hdr_decode(b, SC_MC_HDR + 1432, &o), 0);
	assert_memory_equal(&o, &h, sizeof(h));
	/* length that disagrees with plen, payload past the result, bad magic,
	 * version, reserved bits, a short datagram */
	assert_int_equal(sc_mc_hdr_decode(b, SC_MC_HDR + 1431, &o), -EBADMSG);
	h.off = 4000;
	sc_mc_hdr_encode(&h, b);
	assert_int_equal(sc_mc_hdr_decode(b, SC_MC_HDR + 1432, &o), -EBADMSG);
	h.off = 0;
	sc_mc_hdr_encode(&h, b);
	b[0] ^= 1;
	assert_int_equal(sc_mc_hdr_decode(b, SC_MC_HDR + 1432, &o), -EBADMSG);
	b[0] ^= 1;
	b[2] = 9;
	assert_int_equal(sc_mc_hdr_decode(b, SC_MC_HDR + 1432, &o), -EBADMSG);
	b[2] = SC_MC_VERSION;
	b[39] = 1;
	assert_int_equal(sc_mc_hdr_decode(b, SC_MC_HDR + 1432, &o), -EBADMSG);
	assert_int_equal(sc_mc_hdr_decode(b, SC_MC_HDR - 1, &o), -EBADMSG);
}

/* 200 results of random lengths (empty, one datagram, up to 256 KiB)
 * through a window of 4, at a loss rate; returns the datagrams lost. */
static uint64_t run_loss(unsigned loss_pct)
{
	enum { N = 200 };
	const uint32_t job = 42;
	const uint64_t key = 0xFEEDFACECAFEBEEFull;
	static struct dgram d[WINDOW * (MAXLEN / PAYLOAD + 2 + 4)];
	static uint8_t sent[WINDOW][MAXLEN], got[WINDOW][MAXLEN + 2 * GUARD];
	struct sc_mc_rx rx;
	uint64_t lost = 0, next = 0, completed = 0;

	assert_int_equal(sc_mc_rx_init(&rx, job, key, WINDOW, PAYLOAD, MAXLEN), 0);
	while (completed < N) {
		/* expect a window of chunks, send them all interleaved */
		size_t nd = 0;
		uint64_t c0 = next;
		uint32_t lens[WINDOW];
		for (uint32_t w = 0; w < WINDOW && next < N; w++, next++) {
			uint32_t r = rnd() % 10, s = next % WINDOW;
			uint32_t len = r == 0 ? 0 : r < 3 ? 1 + rnd() % PAYLOAD : 1 + rnd() % MAXLEN;
			lens[s] = len;
			for (uint32_t i = 0; i < len; i++)
				sent[s][i] = (uint8_t)rnd();
			memset(got[s], 0xA5, sizeof(got[s]));
			assert_int_equal(sc_mc_rx_expect(&rx, next, len, (uint32_t)next * 3, got[s] + GUARD), 0);
			/* the slot is busy until this chunk completes */
			assert_int_equal(sc_mc_rx_expect(&rx, next + WINDOW, 1, 0, got[s]), -EBUSY);
			nd += cut(job, key, next, (uint32_t)next * 3, sent[s], len, d + nd);
			/* a duplicate, a foreign job's, a forged key's and a stale one */
			assert_true(nd + 4 < sizeof(d) / sizeof(d[0]));
			d[nd] = d[nd - 1];
			nd++;
			cut(job + 1, key, next, 0, sent[s], len < 100 ? len : 100, d + nd++);
			cut(job, key ^ 1, next, 0, sent[s], len < 100 ? len : 100, d + nd++);
			cut(job, key, next + 2 * WINDOW, 0, sent[s], len < 100 ? len : 100, d + nd++);
		}
		shuffle(d, nd);
		uint64_t done;
		for (size_t i = 0; i < nd; i++) {
			if (rnd() % 100 < loss_pct) {
				lost++;
				continue;
			}
			if (sc_mc_rx_packet(&rx, d[i].b, d[i].n, &done) == 1)
				completed++;
		}
		/* what is missing: NACKed and repaired as the aggregator would,
		 * by unicast into place */
		for (uint64_t c = c0; c < next; c++) {
			uint32_t s = c % WINDOW;
			struct sc_mc_range r[SC_MC_NACK_RANGES];
			size_t nr;
			int rc = 0;
			while ((nr = sc_mc_rx_missing(&rx, c, r, SC_MC_NACK_RANGES)) > 0) {
				struct sc_mc_nack m = { job, 3, c, (uint8_t)nr, { { 0, 0 } } }, back;
				uint8_t wire[SC_MC_NACK_MAX];
				memcpy(m.r, r, nr * sizeof(r[0]));
				int n = sc_mc_nack_encode(&m, wire, sizeof(wire));
				assert_true(n > 0);
				assert_int_equal(sc_mc_nack_decode(wire, (size_t)n, &back), 0);
				assert_int_equal(back.chunk, c);
				for (unsigned i = 0; i < back.nranges; i++) {
					assert_true(back.r[i].len > 0 || !lens[s]);
					memcpy(got[s] + GUARD + back.r[i].off, sent[s] + back.r[i].off, back.r[i].len);
					rc = sc_mc_rx_fill(&rx, c, back.r[i].off, back.r[i].len);
					assert_true(rc >= 0);
				}
				if (rc == 1)
					completed++;
			}
			assert_memory_equal(got[s] + GUARD, sent[s], lens[s]);
			for (int g = 0; g < GUARD; g++) {
				assert_int_equal(got[s][g], 0xA5);
				assert_int_equal(got[s][GUARD + lens[s] + g], 0xA5);
			}
			assert_false(rx.slots[s].active);
		}
	}
	assert_int_equal(completed, N);
	assert_true(rx.n.foreign > 0 && rx.n.stale > 0);
	if (!loss_pct) {
		assert_int_equal(rx.n.repaired, 0);
		assert_int_equal(rx.n.foreign, 2 * N);
		/* a duplicate after its result completed is stale */
		assert_true(rx.n.dups > 0);
		assert_int_equal(rx.n.dups + rx.n.stale, 2 * N);
	}
	print_message("loss %u%%: %llu datagrams lost, %llu taken, %llu ranges repaired, %llu dups, "
		      "%llu foreign, %llu stale dropped\n", loss_pct, (unsigned long long)lost,
		      (unsigned long long)rx.n.packets, (unsigned long long)rx.n.repaired,
		      (unsigned long long)rx.n.dups, (unsigned long long)rx.n.foreign,
		      (unsigned long long)rx.n.stale);
	sc_mc_rx_fini(&rx);
	return lost;
}

static void test_loss_0(void **state) { (void)state; assert_int_equal(run_loss(0), 0); }
static void test_loss_1(void **state) { (void)state; assert_true(run_loss(1) > 0); }
static void test_loss_10(void **state) { (void)state; assert_true(run_loss(10) > 0); }

/* What the InfiniBand/RoCE receive path does with a completion, without
 * the HCA: each receive buffer is the 40-byte GRH and then the packet
 * (sc_mc_ib_unwrap), which goes through the drop hook (sc_mc_rx_take) into
 * the assembly; packets of a 4096-byte MTU. */
struct took {
	int n;
	uint64_t last;
};

static void on_took(void *arg, uint64_t chunk)
{
	struct took *t = arg;
	t->n++;
	t->last = chunk;
}

static void test_ib_receive(void **state)
{
	enum { IBPAY = 4096 - SC_MC_HDR, LEN = 3 * IBPAY + 100 };
	static uint8_t res[LEN], got[LEN], wc[4][SC_MC_IB_GRH + SC_MC_HDR + IBPAY];
	struct sc_mc_hdr r = { .job = 9, .key = 0xfeedull, .chunk = 5, .imm = 77, .len = LEN };
	struct sc_mc_rx rx;
	struct took t = { 0, 0 };
	size_t n[4];
	const uint8_t *pkt = NULL;

	(void)state;
	assert_int_equal(sc_mc_ib_mtu_bytes(5), 4096);
	assert_int_equal(sc_mc_ib_mtu_bytes(1), 256);
	assert_int_equal(sc_mc_ib_mtu_bytes(0), 0);
	for (size_t i = 0; i < LEN; i++)
		res[i] = (uint8_t)rnd();
	assert_int_equal(sc_mc_npackets(LEN, IBPAY), 4);
	for (uint32_t k = 0; k < 4; k++) {
		memset(wc[k], 0x6b, SC_MC_IB_GRH); /* the GRH: not ours to read */
		n[k] = SC_MC_IB_GRH + sc_mc_pack(wc[k] + SC_MC_IB_GRH, &r, res, k * IBPAY, IBPAY);
	}
	assert_int_equal(n[3], SC_MC_IB_GRH + SC_MC_HDR + 100);
	assert_int_equal(sc_mc_rx_init(&rx, 9, 0xfeedull, 4, IBPAY, LEN), 0);
	assert_int_equal(sc_mc_rx_expect(&rx, 5, LEN, 77, got), 0);
	/* a receive no longer than the GRH carries no packet */
	assert_int_equal(sc_mc_ib_unwrap(wc[0], SC_MC_IB_GRH, &pkt), 0);
	for (int k = 3; k >= 0; k--) {
		size_t pl = sc_mc_ib_unwrap(wc[k], n[k], &pkt);
		assert_int_equal(pl, n[k] - SC_MC_IB_GRH);
		sc_mc_rx_take(&rx, pkt, pl, on_took, &t);
	}
	assert_int_equal(t.n, 1);
	assert_int_equal(t.last, 5);
	assert_memory_equal(got, res, LEN);
	/* the drop hook: everything dropped at 1000 per mille, and counted */
	rx.drop_permille = 1000;
	assert_int_equal(sc_mc_rx_expect(&rx, 6, LEN, 77, got), 0);
	r.chunk = 6;
	for (uint32_t k = 0; k < 4; k++) {
		size_t b = sc_mc_pack(wc[k], &r, res, k * IBPAY, IBPAY);
		sc_mc_rx_take(&rx, wc[k], b, on_took, &t);
	}
	assert_int_equal(t.n, 1);
	assert_int_equal(rx.n.dropped, 4);
	assert_int_equal(sc_mc_rx_missing(&rx, 6, (struct sc_mc_range[SC_MC_NACK_RANGES]){ { 0, 0 } },
					  SC_MC_NACK_RANGES), 1);
	sc_mc_rx_fini(&rx);
}

static void test_nack_rejects(void **state)
{
	struct sc_mc_nack m = { 1, 2, 3, 1, { { 10, 20 } } }, o;
	uint8_t b[SC_MC_NACK_MAX];

	(void)state;
	int n = sc_mc_nack_encode(&m, b, sizeof(b));
	assert_int_equal(n, 32);
	assert_int_equal(sc_mc_nack_decode(b, 32, &o), 0);
	assert_int_equal(sc_mc_nack_decode(b, 31, &o), -EBADMSG); /* length */
	b[3] = 2;
	assert_int_equal(sc_mc_nack_decode(b, 32, &o), -EBADMSG); /* count */
	b[3] = 1;
	memset(b + 24, 0xFF, 8); /* a range that wraps */
	assert_int_equal(sc_mc_nack_decode(b, 32, &o), -EBADMSG);
	b[12] = 1; /* reserved */
	assert_int_equal(sc_mc_nack_decode(b, 32, &o), -EBADMSG);
	m.nranges = 0;
	assert_int_equal(sc_mc_nack_encode(&m, b, sizeof(b)), -EINVAL);
	m.nranges = 1;
	m.r[0].off = UINT32_MAX;
	assert_int_equal(sc_mc_nack_encode(&m, b, sizeof(b)), -EINVAL); /* wraps */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hdr),
		cmocka_unit_test(test_loss_0),
		cmocka_unit_test(test_loss_1),
		cmocka_unit_test(test_loss_10),
		cmocka_unit_test(test_ib_receive),
		cmocka_unit_test(test_nack_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
