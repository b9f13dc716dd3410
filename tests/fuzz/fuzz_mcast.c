/* libFuzzer target: multicast datagrams and NACKs as they come off the
 * network (common/mcast.c). Input: records of u16 length (little-endian)
 * + bytes. The first record is a NACK: whatever decodes re-encodes to the
 * same bytes. The rest are datagrams for a receiver (job 7, key 0x5eed,
 * window 4, 64-byte payloads) that expects chunks 0..3 of lengths 0, 1,
 * 200 and 256 into guarded buffers: nothing may be written outside them, a
 * datagram is counted exactly once (taken or dropped for a reason), and
 * the missing ranges of an incomplete chunk lie inside it. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define GUARD 32
static const uint32_t lens[4] = { 0, 1, 200, 256 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[4][256 + 2 * GUARD];
	struct sc_mc_rx rx;
	size_t off = 0, n = 0;

	/* the NACK */
	if (size >= 2) {
		size_t len = (size_t)data[0] | (size_t)data[1] << 8;
		if (len > size - 2)
			len = size - 2;
		struct sc_mc_nack m;
		uint8_t out[SC_MC_NACK_MAX];
		if (sc_mc_nack_decode(data + 2, len, &m) == 0) {
			int k = sc_mc_nack_encode(&m, out, sizeof(out));
			assert(k == (int)len && !memcmp(out, data + 2, len));
		}
		off = 2 + len;
	}
	if (sc_mc_rx_init(&rx, 7, 0x5eed, 4, 64, 256))
		return 0;
	for (int c = 0; c < 4; c++) {
		memset(buf[c], 0xA5, sizeof(buf[c]));
		int rc = sc_mc_rx_expect(&rx, (uint64_t)c, lens[c], (uint32_t)c, buf[c] + GUARD);
		assert(rc == 0);
	}
	while (off + 2 <= size) {
		size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;
		off += 2;
		if (len > size - off)
			len = size - off;
		struct sc_mc_hdr h;
		uint8_t re[SC_MC_HDR];
		if (sc_mc_hdr_decode(data + off, len, &h) == 0) {
			sc_mc_hdr_encode(&h, re);
			assert(!memcmp(re, data + off, SC_MC_HDR));
		}
		uint64_t done;
		(void)sc_mc_rx_packet(&rx, data + off, len, &done);
		n++;
		off += len;
	}
	const struct sc_mc_counts *k = &rx.n;
	assert(k->packets + k->dups + k->foreign + k->malformed + k->stale == n);
	for (int c = 0; c < 4; c++) {
		for (int g = 0; g < GUARD; g++) {
			assert(buf[c][g] == 0xA5);
			assert(buf[c][GUARD + lens[c] + g] == 0xA5);
		}
		struct sc_mc_range r[SC_MC_NACK_RANGES];
		size_t nr = sc_mc_rx_missing(&rx, (uint64_t)c, r, SC_MC_NACK_RANGES);
		for (size_t i = 0; i < nr; i++)
			assert((uint64_t)r[i].off + r[i].len <= lens[c]);
	}
	sc_mc_rx_fini(&rx);
	return 0;
}
