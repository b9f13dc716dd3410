/* Multicast results: datagram header, assembly, loss detection, NACKs.
 * See mcast.h. */
#include "mcast.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

void sc_mc_hdr_encode(const struct sc_mc_hdr *h, uint8_t out[SC_MC_HDR])
{
	put16(out, SC_MC_MAGIC);
	out[2] = SC_MC_VERSION;
	out[3] = 0;
	put32(out + 4, h->job);
	put64(out + 8, h->key);
	put64(out + 16, h->chunk);
	put32(out + 24, h->imm);
	put32(out + 28, h->len);
	put32(out + 32, h->off);
	put16(out + 36, h->plen);
	put16(out + 38, 0);
}

int sc_mc_hdr_decode(const uint8_t *buf, size_t n, struct sc_mc_hdr *out)
{
	struct sc_mc_hdr h;

	if (n < SC_MC_HDR || get16(buf) != SC_MC_MAGIC || buf[2] != SC_MC_VERSION || buf[3] ||
	    get16(buf + 38))
		return -EBADMSG;
	h.job = get32(buf + 4);
	h.key = get64(buf + 8);
	h.chunk = get64(buf + 16);
	h.imm = get32(buf + 24);
	h.len = get32(buf + 28);
	h.off = get32(buf + 32);
	h.plen = get16(buf + 36);
	if ((size_t)h.plen != n - SC_MC_HDR || (uint64_t)h.off + h.plen > h.len ||
	    (h.len && !h.plen))
		return -EBADMSG;
	*out = h;
	return 0;
}

size_t sc_mc_pack(uint8_t *out, const struct sc_mc_hdr *r, const uint8_t *src, uint32_t off,
		  size_t payload)
{
	struct sc_mc_hdr h = *r;
	uint32_t pl = h.len - off < payload ? h.len - off : (uint32_t)payload;

	h.off = off;
	h.plen = (uint16_t)pl;
	sc_mc_hdr_encode(&h, out);
	if (pl)
		memcpy(out + SC_MC_HDR, src + off, pl);
	return SC_MC_HDR + pl;
}

/* ---- assembly ---- */

int sc_mc_rx_init(struct sc_mc_rx *rx, uint32_t job, uint64_t key, uint32_t window, size_t payload,
		  size_t max_len)
{
	memset(rx, 0, sizeof(*rx));
	if (!window || !payload || payload > UINT16_MAX || !max_len || max_len > UINT32_MAX)
		return -EINVAL;
	rx->job = job;
	rx->key = key;
	rx->window = window;
	rx->payload = payload;
	rx->max_len = max_len;
	rx->seed = 0x2545F4914F6CDD1Dull;
	rx->words = (sc_mc_npackets((uint32_t)max_len, payload) + 63) / 64;
	rx->slots = calloc(window, sizeof(*rx->slots));
	rx->bits_mem = calloc((size_t)window * rx->words, sizeof(uint64_t));
	if (!rx->slots || !rx->bits_mem) {
		sc_mc_rx_fini(rx);
		return -ENOMEM;
	}
	for (uint32_t s = 0; s < window; s++)
		rx->slots[s].bits = rx->bits_mem + (size_t)s * rx->words;
	return 0;
}

void sc_mc_rx_fini(struct sc_mc_rx *rx)
{
	free(rx->slots);
	free(rx->bits_mem);
	rx->slots = NULL;
	rx->bits_mem = NULL;
}

int sc_mc_rx_expect(struct sc_mc_rx *rx, uint64_t chunk, uint32_t len, uint32_t imm, void *dst)
{
	struct sc_mc_slot *s = &rx->slots[chunk % rx->window];

	if (len > rx->max_len || (len && !dst))
		return -EINVAL;
	if (s->active)
		return -EBUSY;
	s->chunk = chunk;
	s->imm = imm;
	s->len = len;
	s->dst = dst;
	s->npk = sc_mc_npackets(len, rx->payload);
	s->ngot = 0;
	s->hi = 0;
	s->first_tick = s->last_tick = 0;
	memset(s->bits, 0, rx->words * sizeof(uint64_t));
	s->active = true;
	return 0;
}

void sc_mc_rx_drop(struct sc_mc_rx *rx, uint64_t chunk)
{
	struct sc_mc_slot *s = &rx->slots[chunk % rx->window];

	if (s->active && s->chunk == chunk)
		s->active = false;
}

/* Datagram k of slot s is in; 1 when that completed the result. */
static int slot_mark(struct sc_mc_slot *s, uint32_t k)
{
	s->bits[k / 64] |= 1ull << (k % 64);
	if (++s->ngot < s->npk)
		return 0;
	s->active = false;
	return 1;
}

static bool slot_has(const struct sc_mc_slot *s, uint32_t k)
{
	return s->bits[k / 64] >> (k % 64) & 1;
}

void sc_mc_rx_take(struct sc_mc_rx *rx, const uint8_t *pkt, size_t n,
		   void (*done)(void *arg, uint64_t chunk), void *arg)
{
	uint64_t chunk;

	if (rx->drop_permille) {
		rx->seed ^= rx->seed << 13;
		rx->seed ^= rx->seed >> 7;
		rx->seed ^= rx->seed << 17;
		if (rx->seed % 1000 < rx->drop_permille) {
			rx->n.dropped++;
			return;
		}
	}
	if (sc_mc_rx_packet(rx, pkt, n, &chunk) == 1 && done)
		done(arg, chunk);
}

int sc_mc_rx_packet(struct sc_mc_rx *rx, const uint8_t *pkt, size_t n, uint64_t *done)
{
	struct sc_mc_hdr h;

	if (sc_mc_hdr_decode(pkt, n, &h)) {
		rx->n.malformed++;
		return 0;
	}
	if (h.job != rx->job || h.key != rx->key) {
		rx->n.foreign++;
		return 0;
	}
	struct sc_mc_slot *s = &rx->slots[h.chunk % rx->window];
	/* The datagram must be one the sender cuts: at a multiple of the
	 * payload, full but for the result's last. */
	uint32_t k = (uint32_t)(h.off / rx->payload);
	uint32_t want = h.len - h.off < rx->payload ? h.len - h.off : (uint32_t)rx->payload;
	if (!s->active || s->chunk != h.chunk || s->len != h.len || s->imm != h.imm ||
	    h.off % rx->payload || h.plen != want) {
		rx->n.stale++;
		return 0;
	}
	if (slot_has(s, k)) {
		rx->n.dups++;
		return 0;
	}
	if (h.plen)
		memcpy(s->dst + h.off, pkt + SC_MC_HDR, h.plen);
	rx->n.packets++;
	rx->tick++;
	if (!s->ngot) {
		s->first_tick = rx->tick;
		rx->last_start = rx->tick;
	}
	s->last_tick = rx->tick;
	if (k + 1 > s->hi)
		s->hi = k + 1;
	if (!slot_mark(s, k))
		return 0;
	*done = h.chunk;
	return 1;
}

bool sc_mc_rx_gap(const struct sc_mc_rx *rx, uint64_t chunk)
{
	const struct sc_mc_slot *s = &rx->slots[chunk % rx->window];

	if (!s->active || s->chunk != chunk || !s->ngot)
		return false;
	return s->ngot < s->hi || rx->last_start > s->last_tick;
}

size_t sc_mc_rx_missing(const struct sc_mc_rx *rx, uint64_t chunk, struct sc_mc_range *out,
			size_t max)
{
	const struct sc_mc_slot *s = &rx->slots[chunk % rx->window];
	size_t n = 0;

	if (!s->active || s->chunk != chunk)
		return 0;
	for (uint32_t k = 0; k < s->npk && n < max;) {
		if (slot_has(s, k)) {
			k++;
			continue;
		}
		uint32_t k0 = k;
		while (k < s->npk && !slot_has(s, k))
			k++;
		uint32_t off = (uint32_t)(k0 * rx->payload);
		uint64_t end = (uint64_t)k * rx->payload;
		out[n].off = off;
		out[n].len = (uint32_t)((end < s->len ? end : s->len) - off);
		n++;
	}
	return n;
}

int sc_mc_rx_fill(struct sc_mc_rx *rx, uint64_t chunk, uint32_t off, uint32_t len)
{
	struct sc_mc_slot *s = &rx->slots[chunk % rx->window];

	if (!s->active || s->chunk != chunk || (uint64_t)off + len > s->len || (!len && s->len))
		return -EINVAL;
	rx->n.repaired++;
	if (!s->len)
		return slot_mark(s, 0);
	/* datagrams wholly inside [off, off + len) */
	uint32_t k0 = (uint32_t)((off + rx->payload - 1) / rx->payload);
	for (uint32_t k = k0; k < s->npk; k++) {
		uint64_t a = (uint64_t)k * rx->payload, b = a + rx->payload < s->len ? a + rx->payload : s->len;
		if (b > (uint64_t)off + len)
			break;
		if (!slot_has(s, k) && slot_mark(s, k))
			return 1;
	}
	return 0;
}

/* ---- NACK ---- */

int sc_mc_nack_encode(const struct sc_mc_nack *m, uint8_t *out, size_t cap)
{
	size_t n = 24 + 8 * (size_t)m->nranges;

	if (!m->nranges || m->nranges > SC_MC_NACK_RANGES || cap < n)
		return -EINVAL;
	for (unsigned i = 0; i < m->nranges; i++)
		if ((uint64_t)m->r[i].off + m->r[i].len > UINT32_MAX)
			return -EINVAL;
	put16(out, SC_MC_NACK_MAGIC);
	out[2] = SC_MC_VERSION;
	out[3] = m->nranges;
	put32(out + 4, m->job);
	put32(out + 8, m->rank);
	put32(out + 12, 0);
	put64(out + 16, m->chunk);
	for (unsigned i = 0; i < m->nranges; i++) {
		put32(out + 24 + 8 * i, m->r[i].off);
		put32(out + 28 + 8 * i, m->r[i].len);
	}
	return (int)n;
}

int sc_mc_nack_decode(const uint8_t *buf, size_t n, struct sc_mc_nack *out)
{
	struct sc_mc_nack m;

	if (n < 24 || get16(buf) != SC_MC_NACK_MAGIC || buf[2] != SC_MC_VERSION || get32(buf + 12))
		return -EBADMSG;
	m.nranges = buf[3];
	if (!m.nranges || m.nranges > SC_MC_NACK_RANGES || n != 24 + 8 * (size_t)m.nranges)
		return -EBADMSG;
	m.job = get32(buf + 4);
	m.rank = get32(buf + 8);
	m.chunk = get64(buf + 16);
	for (unsigned i = 0; i < m.nranges; i++) {
		m.r[i].off = get32(buf + 24 + 8 * i);
		m.r[i].len = get32(buf + 28 + 8 * i);
		if ((uint64_t)m.r[i].off + m.r[i].len > UINT32_MAX)
			return -EBADMSG;
	}
	*out = m;
	return 0;
}
