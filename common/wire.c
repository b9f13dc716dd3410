/* The wire protocol (wire.h): control messages encoded and decoded, JOIN signatures, keys. */
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WIRE_DTYPE_BITS 10 /* SC_DTYPE_COUNT, kept here so wire.c needs no reduce.h */

static const char *const code_names[] = {
	"ok", "version", "auth", "job_full", "rank_taken", "nranks", "memory", "unknown_job",
	"params", "malformed", "provider", "timeout", "rank_left", "shutdown", "data",
	"internal", "too_many_jobs",
};

const char *wire_code_name(enum wire_code c)
{
	return (unsigned)c <= WIRE_CODE_MAX ? code_names[c] : "unknown";
}

const char *wire_type_name(enum wire_type t)
{
	static const char *const names[] = { "?", "HELLO", "JOIN", "JOIN_OK", "REFUSE",
					     "READY", "LEAVE", "ABORT", "PING", "PONG", "DRAIN" };
	return (unsigned)t <= WIRE_TYPE_MAX ? names[t] : "?";
}

/* Little-endian cursor. Writers check space once per message (sizes are
 * computed up front); readers check every field. */
struct rd {
	const uint8_t *p, *end;
};

static int rd_u8s(struct rd *r, void *dst, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return -EBADMSG;
	memcpy(dst, r->p, n);
	r->p += n;
	return 0;
}

static int rd_u16(struct rd *r, uint16_t *v)
{
	uint8_t b[2];
	if (rd_u8s(r, b, 2))
		return -EBADMSG;
	*v = (uint16_t)(b[0] | b[1] << 8);
	return 0;
}

static int rd_u32(struct rd *r, uint32_t *v)
{
	uint8_t b[4];
	if (rd_u8s(r, b, 4))
		return -EBADMSG;
	*v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	return 0;
}

static int rd_u64(struct rd *r, uint64_t *v)
{
	uint32_t lo, hi;
	if (rd_u32(r, &lo) || rd_u32(r, &hi))
		return -EBADMSG;
	*v = (uint64_t)hi << 32 | lo;
	return 0;
}

static uint8_t *wr_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	return p + 2;
}

static uint8_t *wr_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 4;
}

static uint8_t *wr_u64(uint8_t *p, uint64_t v)
{
	p = wr_u32(p, (uint32_t)v);
	return wr_u32(p, (uint32_t)(v >> 32));
}

static uint8_t *wr_bytes(uint8_t *p, const void *src, size_t n)
{
	memcpy(p, src, n);
	return p + n;
}

int wire_hdr_decode(const uint8_t *buf, size_t len, struct wire_hdr *out)
{
	struct rd r = { buf, buf + len };
	uint32_t magic, blen, zero;
	uint16_t version, type;

	if (len < WIRE_HDR_LEN || rd_u32(&r, &magic) || rd_u16(&r, &version) ||
	    rd_u16(&r, &type) || rd_u32(&r, &blen) || rd_u32(&r, &zero))
		return -EBADMSG;
	if (magic != WIRE_MAGIC || zero != 0 || blen > WIRE_BODY_MAX)
		return -EBADMSG;
	if (version < WIRE_VERSION_MIN || version > WIRE_VERSION) {
		out->version = version;
		out->type = type;
		out->len = blen;
		return -EPROTO;
	}
	if (type < 1 || type > WIRE_TYPE_MAX || (type == WIRE_DRAIN && version < WIRE_DRAIN_VERSION))
		return -EBADMSG;
	out->version = version;
	out->type = type;
	out->len = blen;
	return 0;
}

static bool printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

static bool join_valid(const struct wire_join *j)
{
	size_t plen = strnlen(j->provider, WIRE_PROV_MAX);
	return j->nranks >= 1 && j->nranks <= WIRE_RANKS_MAX && j->rank < j->nranks &&
	       j->chunk_bytes > 0 && j->chunk_bytes % 8 == 0 && j->chunk_bytes <= (64u << 20) &&
	       j->window >= 1 && j->window <= WIRE_SLOTS_MAX && j->dtype_mask != 0 &&
	       !(j->dtype_mask >> WIRE_DTYPE_BITS) && !(j->flags & ~WIRE_JOIN_F_ALL) &&
	       j->addr_len >= 1 && j->addr_len <= WIRE_ADDR_MAX && plen >= 1 && plen < WIRE_PROV_MAX &&
	       printable(j->provider, plen) && j->weight <= WIRE_WEIGHT_MAX &&
	       strnlen(j->label, sizeof(j->label)) <= WIRE_LABEL_MAX &&
	       printable(j->label, strnlen(j->label, sizeof(j->label)));
}

/* The JOIN's tail after the tag: the weight (version 4), then the label
 * (version 6), which needs the weight before it. */
static uint8_t *join_tail(const struct wire_join *j, uint8_t *p)
{
	size_t llen = strnlen(j->label, WIRE_LABEL_MAX);

	if (j->weight || llen)
		p = wr_u16(p, j->weight ? j->weight : 1);
	if (llen) {
		*p++ = (uint8_t)llen;
		p = wr_bytes(p, j->label, llen);
	}
	return p;
}

static bool join_ok_valid(const struct wire_join_ok *o)
{
	return o->job_handle >= 1 && o->job_handle <= WIRE_JOB_HANDLE_MAX && o->window >= 1 &&
	       o->window <= WIRE_SLOTS_MAX && o->chunk_bytes > 0 && o->chunk_bytes % 8 == 0 &&
	       o->chunk_bytes <= (64u << 20) && o->addr_len >= 1 && o->addr_len <= WIRE_ADDR_MAX &&
	       !(o->flags & ~WIRE_OK_F_ALL) && o->weight <= WIRE_WEIGHT_MAX &&
	       o->lanes <= WIRE_LANES_MAX && (o->lanes <= 1 || o->weight) &&
	       o->spread <= WIRE_SPREAD_MAX && (!o->spread || o->lanes > 1) &&
	       (!(o->flags & WIRE_OK_F_MCAST_IB) || (o->flags & WIRE_OK_F_MCAST)) &&
	       (!(o->flags & WIRE_OK_F_MCAST) ||
		((o->mc_group >> 28) == 0xE && o->mc_port && o->mc_payload >= 64 &&
		 o->mc_payload <= 65507 - 40));
}

static bool text_valid(const struct wire_text *t)
{
	size_t n = strnlen(t->text, WIRE_TEXT_MAX);
	return t->code >= 1 && t->code <= WIRE_CODE_MAX && n < WIRE_TEXT_MAX &&
	       printable(t->text, n) && t->job_handle <= WIRE_JOB_HANDLE_MAX;
}

size_t wire_join_signed_len(const struct wire_join *j)
{
	return 40 + j->addr_len + strnlen(j->provider, WIRE_PROV_MAX);
}

int wire_label_check(const char *label, char *why, size_t whylen)
{
	size_t n = strlen(label);

	if (n > WIRE_LABEL_MAX) {
		snprintf(why, whylen, "\"%.20s...\" is %zu bytes: at most %d", label, n, WIRE_LABEL_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)label[i] < 0x20 || (unsigned char)label[i] > 0x7e) {
			snprintf(why, whylen, "byte %zu (0x%02x) is not printable ASCII", i,
				 (unsigned char)label[i]);
			return -EINVAL;
		}
	return 0;
}

/* Writes the JOIN body without the tag; returns the end. */
static uint8_t *join_body(const struct wire_join *j, uint8_t *p)
{
	uint16_t plen = (uint16_t)strnlen(j->provider, WIRE_PROV_MAX);
	p = wr_u64(p, j->job_id);
	p = wr_u32(p, j->rank);
	p = wr_u32(p, j->nranks);
	p = wr_u32(p, j->chunk_bytes);
	p = wr_u32(p, j->window);
	p = wr_u32(p, j->dtype_mask);
	p = wr_u32(p, j->timeout_ms);
	p = wr_u16(p, j->result_key);
	p = wr_u16(p, j->flags);
	p = wr_u16(p, j->addr_len);
	p = wr_u16(p, plen);
	p = wr_bytes(p, j->addr, j->addr_len);
	return wr_bytes(p, j->provider, plen);
}

int wire_msg_encode(const struct wire_msg *m, uint8_t *buf, size_t cap)
{
	uint8_t body[WIRE_BODY_MAX], *p = body;

	switch (m->type) {
	case WIRE_HELLO:
		if (m->u.hello.version_min > m->u.hello.version_max)
			return -EINVAL;
		p = wr_u16(p, m->u.hello.version_min);
		p = wr_u16(p, m->u.hello.version_max);
		p = wr_u32(p, 0);
		p = wr_u64(p, m->u.hello.nonce);
		break;
	case WIRE_JOIN:
		if (!join_valid(&m->u.join))
			return -EINVAL;
		p = join_body(&m->u.join, p);
		p = wr_bytes(p, m->u.join.tag, WIRE_TAG_LEN);
		p = join_tail(&m->u.join, p); /* versions 4 and 6 */
		break;
	case WIRE_JOIN_OK:
		if (!join_ok_valid(&m->u.join_ok))
			return -EINVAL;
		p = wr_u32(p, m->u.join_ok.job_handle);
		p = wr_u32(p, m->u.join_ok.window);
		p = wr_u32(p, m->u.join_ok.chunk_bytes);
		p = wr_u32(p, m->u.join_ok.timeout_ms);
		p = wr_u16(p, m->u.join_ok.addr_len);
		p = wr_u16(p, m->u.join_ok.flags);
		p = wr_bytes(p, m->u.join_ok.addr, m->u.join_ok.addr_len);
		p = wr_u64(p, m->u.join_ok.data_nonce);
		if (m->u.join_ok.flags & WIRE_OK_F_MCAST) {
			p = wr_u32(p, m->u.join_ok.mc_group);
			p = wr_u16(p, m->u.join_ok.mc_port);
			p = wr_u16(p, m->u.join_ok.mc_payload);
			p = wr_u64(p, m->u.join_ok.mc_key);
		}
		if (m->u.join_ok.weight) /* version 4 */
			p = wr_u16(p, m->u.join_ok.weight);
		if (m->u.join_ok.lanes > 1) { /* version 7 */
			*p++ = m->u.join_ok.lanes;
			for (unsigned k = 1; k < m->u.join_ok.lanes; k++) {
				uint16_t n = m->u.join_ok.lane_len[k];
				if (n < 1 || n > WIRE_ADDR_MAX)
					return -EINVAL;
				p = wr_u16(p, n);
				p = wr_bytes(p, m->u.join_ok.lane_addr[k], n);
			}
			if (m->u.join_ok.spread) /* version 8 */
				p = wr_u32(p, m->u.join_ok.spread);
		}
		break;
	case WIRE_REFUSE:
	case WIRE_ABORT: {
		const struct wire_text *t = m->type == WIRE_REFUSE ? &m->u.refuse : &m->u.abort;
		if (!text_valid(t))
			return -EINVAL;
		uint16_t n = (uint16_t)strnlen(t->text, WIRE_TEXT_MAX);
		p = wr_u32(p, t->job_handle);
		p = wr_u16(p, t->code);
		p = wr_u16(p, n);
		p = wr_bytes(p, t->text, n);
		break;
	}
	case WIRE_READY:
		if (!m->u.ready.job_handle || m->u.ready.job_handle > WIRE_JOB_HANDLE_MAX ||
		    !m->u.ready.nranks || m->u.ready.nranks > WIRE_RANKS_MAX)
			return -EINVAL;
		p = wr_u32(p, m->u.ready.job_handle);
		p = wr_u32(p, m->u.ready.nranks);
		break;
	case WIRE_LEAVE:
		if (!m->u.leave.job_handle || m->u.leave.job_handle > WIRE_JOB_HANDLE_MAX)
			return -EINVAL;
		p = wr_u32(p, m->u.leave.job_handle);
		break;
	case WIRE_PING:
	case WIRE_PONG:
		p = wr_u64(p, m->u.ping.token);
		if (m->u.ping.has_load) {
			if (m->type != WIRE_PONG || m->u.ping.load_pm > 1000)
				return -EINVAL;
			p = wr_u16(p, m->u.ping.load_pm);
			p = wr_u16(p, m->u.ping.jobs);
		}
		break;
	case WIRE_DRAIN:
		if (m->version && m->version < WIRE_DRAIN_VERSION)
			return -EINVAL; /* older ranks do not know it */
		p = wr_u32(p, m->u.drain.deadline_ms);
		break;
	default:
		return -EINVAL;
	}
	if (m->version && (m->version < WIRE_VERSION_MIN || m->version > WIRE_VERSION))
		return -EINVAL;
	size_t blen = (size_t)(p - body);
	if (cap < WIRE_HDR_LEN + blen)
		return -ENOSPC;
	uint8_t *h = buf;
	h = wr_u32(h, WIRE_MAGIC);
	h = wr_u16(h, m->version ? m->version : WIRE_VERSION);
	h = wr_u16(h, m->type);
	h = wr_u32(h, (uint32_t)blen);
	h = wr_u32(h, 0);
	memcpy(h, body, blen);
	return (int)(WIRE_HDR_LEN + blen);
}

int wire_msg_decode(uint16_t type, const uint8_t *body, size_t len, struct wire_msg *out)
{
	struct rd r = { body, body + len };
	struct wire_msg m;
	uint32_t zero32;
	uint16_t n;

	memset(&m, 0, sizeof(m));
	m.type = type;
	switch (type) {
	case WIRE_HELLO:
		if (rd_u16(&r, &m.u.hello.version_min) || rd_u16(&r, &m.u.hello.version_max) ||
		    rd_u32(&r, &zero32) || rd_u64(&r, &m.u.hello.nonce) || zero32 ||
		    m.u.hello.version_min > m.u.hello.version_max)
			return -EBADMSG;
		break;
	case WIRE_JOIN: {
		struct wire_join *j = &m.u.join;
		if (rd_u64(&r, &j->job_id) || rd_u32(&r, &j->rank) || rd_u32(&r, &j->nranks) ||
		    rd_u32(&r, &j->chunk_bytes) || rd_u32(&r, &j->window) ||
		    rd_u32(&r, &j->dtype_mask) || rd_u32(&r, &j->timeout_ms) ||
		    rd_u16(&r, &j->result_key) || rd_u16(&r, &j->flags) || rd_u16(&r, &j->addr_len) ||
		    rd_u16(&r, &n))
			return -EBADMSG;
		if (j->addr_len < 1 || j->addr_len > WIRE_ADDR_MAX || n < 1 || n >= WIRE_PROV_MAX ||
		    rd_u8s(&r, j->addr, j->addr_len) || rd_u8s(&r, j->provider, n) ||
		    rd_u8s(&r, j->tag, WIRE_TAG_LEN))
			return -EBADMSG;
		if (r.end - r.p >= 2 && (rd_u16(&r, &j->weight) || !j->weight)) /* version 4 */
			return -EBADMSG;
		if (r.end - r.p >= 1) { /* version 6: the label */
			uint8_t llen = *r.p++;
			if (llen < 1 || llen > WIRE_LABEL_MAX || rd_u8s(&r, j->label, llen) ||
			    memchr(j->label, '\0', llen))
				return -EBADMSG;
		}
		if (memchr(j->provider, '\0', n) || !join_valid(j))
			return -EBADMSG;
		break;
	}
	case WIRE_JOIN_OK: {
		struct wire_join_ok *o = &m.u.join_ok;
		if (rd_u32(&r, &o->job_handle) || rd_u32(&r, &o->window) ||
		    rd_u32(&r, &o->chunk_bytes) || rd_u32(&r, &o->timeout_ms) ||
		    rd_u16(&r, &o->addr_len) || rd_u16(&r, &o->flags) ||
		    o->addr_len < 1 || o->addr_len > WIRE_ADDR_MAX || rd_u8s(&r, o->addr, o->addr_len) ||
		    rd_u64(&r, &o->data_nonce))
			return -EBADMSG;
		if ((o->flags & WIRE_OK_F_MCAST) &&
		    (rd_u32(&r, &o->mc_group) || rd_u16(&r, &o->mc_port) || rd_u16(&r, &o->mc_payload) ||
		     rd_u64(&r, &o->mc_key)))
			return -EBADMSG;
		if (r.end - r.p >= 2 && (rd_u16(&r, &o->weight) || !o->weight)) /* version 4 */
			return -EBADMSG;
		if (r.end > r.p) { /* version 7: the lanes */
			uint8_t n8;
			if (rd_u8s(&r, &n8, 1) || n8 < 2 || n8 > WIRE_LANES_MAX)
				return -EBADMSG;
			o->lanes = n8;
			for (unsigned k = 1; k < n8; k++)
				if (rd_u16(&r, &o->lane_len[k]) || o->lane_len[k] < 1 ||
				    o->lane_len[k] > WIRE_ADDR_MAX || rd_u8s(&r, o->lane_addr[k], o->lane_len[k]))
					return -EBADMSG;
			if (r.end > r.p && (rd_u32(&r, &o->spread) || !o->spread)) /* version 8 */
				return -EBADMSG;
		}
		if (!join_ok_valid(o))
			return -EBADMSG;
		break;
	}
	case WIRE_REFUSE:
	case WIRE_ABORT: {
		struct wire_text *t = type == WIRE_REFUSE ? &m.u.refuse : &m.u.abort;
		if (rd_u32(&r, &t->job_handle) || rd_u16(&r, &t->code) || rd_u16(&r, &n) ||
		    n >= WIRE_TEXT_MAX || rd_u8s(&r, t->text, n) || memchr(t->text, '\0', n) ||
		    !text_valid(t))
			return -EBADMSG;
		break;
	}
	case WIRE_READY:
		if (rd_u32(&r, &m.u.ready.job_handle) || rd_u32(&r, &m.u.ready.nranks) ||
		    !m.u.ready.job_handle || m.u.ready.job_handle > WIRE_JOB_HANDLE_MAX ||
		    !m.u.ready.nranks || m.u.ready.nranks > WIRE_RANKS_MAX)
			return -EBADMSG;
		break;
	case WIRE_LEAVE:
		if (rd_u32(&r, &m.u.leave.job_handle) || !m.u.leave.job_handle ||
		    m.u.leave.job_handle > WIRE_JOB_HANDLE_MAX)
			return -EBADMSG;
		break;
	case WIRE_PING:
	case WIRE_PONG:
		if (rd_u64(&r, &m.u.ping.token))
			return -EBADMSG;
		if (type == WIRE_PONG && r.end - r.p == 4) { /* version 3: the load */
			m.u.ping.has_load = true;
			if (rd_u16(&r, &m.u.ping.load_pm) || rd_u16(&r, &m.u.ping.jobs) ||
			    m.u.ping.load_pm > 1000)
				return -EBADMSG;
		}
		break;
	case WIRE_DRAIN:
		if (rd_u32(&r, &m.u.drain.deadline_ms))
			return -EBADMSG;
		break;
	default:
		return -EBADMSG;
	}
	if (r.p != r.end) /* trailing bytes */
		return -EBADMSG;
	*out = m;
	return 0;
}

static int join_mac(const uint8_t *key, size_t key_len, uint64_t nonce, const struct wire_join *j,
		    uint8_t mac[WIRE_TAG_LEN])
{
	static const char label[] = "sumcast-join-v1";
	uint8_t msg[sizeof(label) - 1 + 8 + WIRE_BODY_MAX], *p = msg;
	unsigned int mlen = 0;

	if (!key_len) {
		memset(mac, 0, WIRE_TAG_LEN);
		return 0;
	}
	p = wr_bytes(p, label, sizeof(label) - 1);
	p = wr_u64(p, nonce);
	p = join_body(j, p);
	p = join_tail(j, p); /* versions 4 and 6: the weight and the label are signed too */
	if (!HMAC(EVP_sha256(), key, (int)key_len, msg, (size_t)(p - msg), mac, &mlen) ||
	    mlen != WIRE_TAG_LEN)
		return -EIO;
	return 0;
}

int wire_join_sign(const uint8_t *key, size_t key_len, uint64_t nonce, struct wire_join *j)
{
	return join_mac(key, key_len, nonce, j, j->tag);
}

int wire_join_verify(const uint8_t *key, size_t key_len, uint64_t nonce, const struct wire_join *j)
{
	uint8_t mac[WIRE_TAG_LEN];

	if (join_mac(key, key_len, nonce, j, mac))
		return -EIO;
	return CRYPTO_memcmp(mac, j->tag, WIRE_TAG_LEN) ? -EACCES : 0;
}

int wire_key_load(const char *path, uint8_t *key, size_t *key_len, const char **why)
{
	uint8_t buf[257];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0) {
		int e = errno;
		*why = strerror(e);
		return -e;
	}
	n = read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n < 0) {
		*why = strerror(e);
		return -e;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
			 buf[n - 1] == '\t'))
		n--;
	if (n > 256) {
		*why = "key file is longer than 256 bytes";
		return -EINVAL;
	}
	if (n < 16) {
		*why = "key file holds fewer than 16 bytes";
		return -EINVAL;
	}
	memcpy(key, buf, (size_t)n);
	*key_len = (size_t)n;
	OPENSSL_cleanse(buf, sizeof(buf));
	*why = NULL;
	return 0;
}
