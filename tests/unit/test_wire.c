/* Wire protocol: round trips, strict validation, authentication tags. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "wire.h"

static struct wire_msg sample_join(void)
{
	struct wire_msg m = { .type = WIRE_JOIN };
	struct wire_join *j = &m.u.join;
	j->job_id = 0x1122334455667788ull;
	j->rank = 3;
	j->nranks = 4;
	j->chunk_bytes = 256 * 1024;
	j->window = 8;
	j->dtype_mask = 0x7;
	j->timeout_ms = 5000;
	j->result_key = 2;
	j->addr_len = 16;
	for (int i = 0; i < 16; i++)
		j->addr[i] = (uint8_t)(0xa0 + i);
	strcpy(j->provider, "tcp;ofi_rxm");
	return m;
}

static int roundtrip(const struct wire_msg *m, struct wire_msg *out)
{
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_hdr h;
	int n = wire_msg_encode(m, buf, sizeof(buf));
	if (n < 0)
		return n;
	int rc = wire_hdr_decode(buf, (size_t)n, &h);
	if (rc)
		return rc;
	if (h.len + WIRE_HDR_LEN != (unsigned)n || h.type != m->type)
		return -1;
	return wire_msg_decode(h.type, buf + WIRE_HDR_LEN, h.len, out);
}

/* Version 3: the PONG's load; version 2 still read and written, and a
 * PONG without the load valid in both (wire.h, "Versions"). */
static void test_versions(void **state)
{
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_hdr h;
	struct wire_msg out;
	(void)state;

	struct wire_msg pong = { .type = WIRE_PONG };
	pong.u.ping.token = 0x1122334455667788ull;
	pong.u.ping.has_load = true;
	pong.u.ping.load_pm = 873;
	pong.u.ping.jobs = 2;
	assert_int_equal(roundtrip(&pong, &out), 0);
	assert_true(out.u.ping.has_load);
	assert_int_equal(out.u.ping.token, pong.u.ping.token);
	assert_int_equal(out.u.ping.load_pm, 873);
	assert_int_equal(out.u.ping.jobs, 2);
	int n = wire_msg_encode(&pong, buf, sizeof(buf));
	assert_int_equal(n, WIRE_HDR_LEN + 12);
	assert_int_equal(wire_hdr_decode(buf, (size_t)n, &h), 0);
	assert_int_equal(h.version, WIRE_VERSION);
	/* a load above 1000 per mille, or in a PING: refused */
	pong.u.ping.load_pm = 1001;
	assert_int_equal(wire_msg_encode(&pong, buf, sizeof(buf)), -EINVAL);
	pong.u.ping.load_pm = 5;
	pong.type = WIRE_PING;
	assert_int_equal(wire_msg_encode(&pong, buf, sizeof(buf)), -EINVAL);
	/* a PING with 4 more bytes is malformed, a PONG with 2 more too */
	pong.type = WIRE_PONG;
	n = wire_msg_encode(&pong, buf, sizeof(buf));
	assert_int_equal(wire_msg_decode(WIRE_PING, buf + WIRE_HDR_LEN, 12, &out), -EBADMSG);
	assert_int_equal(wire_msg_decode(WIRE_PONG, buf + WIRE_HDR_LEN, 10, &out), -EBADMSG);
	/* a version 2 PONG: the token alone, read by a version 3 decoder */
	struct wire_msg old = { .version = 2, .type = WIRE_PONG };
	old.u.ping.token = 7;
	n = wire_msg_encode(&old, buf, sizeof(buf));
	assert_int_equal(n, WIRE_HDR_LEN + 8);
	assert_int_equal(wire_hdr_decode(buf, (size_t)n, &h), 0);
	assert_int_equal(h.version, 2);
	assert_int_equal(wire_msg_decode(WIRE_PONG, buf + WIRE_HDR_LEN, h.len, &out), 0);
	assert_false(out.u.ping.has_load);
	/* versions outside 2..WIRE_VERSION: neither written nor read */
	old.version = 1;
	assert_int_equal(wire_msg_encode(&old, buf, sizeof(buf)), -EINVAL);
	old.version = 2;
	n = wire_msg_encode(&old, buf, sizeof(buf));
	buf[4] = 1;
	assert_int_equal(wire_hdr_decode(buf, (size_t)n, &h), -EPROTO);
	assert_int_equal(h.version, 1);
}

static void test_roundtrip_all(void **state)
{
	(void)state;
	struct wire_msg out, m = sample_join();
	assert_int_equal(roundtrip(&m, &out), 0);
	assert_memory_equal(&out.u.join, &m.u.join, sizeof(m.u.join));

	struct wire_msg h = { .type = WIRE_HELLO, .u.hello = { 1, 1, 0xfeedfacecafebeefull } };
	assert_int_equal(roundtrip(&h, &out), 0);
	assert_true(out.u.hello.nonce == 0xfeedfacecafebeefull);

	struct wire_msg ok = { .type = WIRE_JOIN_OK };
	ok.u.join_ok.job_handle = 17;
	ok.u.join_ok.window = 8;
	ok.u.join_ok.chunk_bytes = 65536;
	ok.u.join_ok.timeout_ms = 100;
	ok.u.join_ok.addr_len = 3;
	memcpy(ok.u.join_ok.addr, "abc", 3);
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.job_handle, 17);
	assert_memory_equal(out.u.join_ok.addr, "abc", 3);
	assert_int_equal(out.u.join_ok.mc_group, 0);

	/* a multicast job: the group, port, payload and key follow */
	ok.u.join_ok.flags = WIRE_OK_F_MCAST;
	ok.u.join_ok.mc_group = 0xEFC20005u; /* 239.194.0.5 */
	ok.u.join_ok.mc_port = 9931;
	ok.u.join_ok.mc_payload = 1432;
	ok.u.join_ok.mc_key = 0x0123456789abcdefull;
	uint8_t buf[WIRE_MSG_MAX];
	int n = wire_msg_encode(&ok, buf, sizeof(buf));
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.mc_group, 0xEFC20005u);
	assert_int_equal(out.u.join_ok.mc_port, 9931);
	assert_int_equal(out.u.join_ok.mc_payload, 1432);
	assert_true(out.u.join_ok.mc_key == 0x0123456789abcdefull);
	/* cut short, or a group outside 224/4: refused */
	assert_int_equal(wire_msg_decode(WIRE_JOIN_OK, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN - 8,
					 &out), -EBADMSG);
	ok.u.join_ok.mc_group = 0x0A000001u;
	assert_int_equal(wire_msg_encode(&ok, buf, sizeof(buf)), -EINVAL);
	ok.u.join_ok.mc_group = 0xEFC20005u;
	ok.u.join_ok.mc_payload = 10;
	assert_int_equal(wire_msg_encode(&ok, buf, sizeof(buf)), -EINVAL);
	ok.u.join_ok.mc_payload = 4056;
	/* over InfiniBand/RoCE: the same fields; the flag alone is refused */
	ok.u.join_ok.flags = WIRE_OK_F_MCAST | WIRE_OK_F_MCAST_IB;
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.flags, WIRE_OK_F_MCAST | WIRE_OK_F_MCAST_IB);
	assert_int_equal(out.u.join_ok.mc_payload, 4056);
	ok.u.join_ok.flags = WIRE_OK_F_MCAST_IB;
	assert_int_equal(wire_msg_encode(&ok, buf, sizeof(buf)), -EINVAL);

	struct wire_msg rf = { .type = WIRE_REFUSE };
	rf.u.refuse.code = WIRE_E_NRANKS;
	strcpy(rf.u.refuse.text, "job 0x3f2a has 8 ranks, request says 4");
	assert_int_equal(roundtrip(&rf, &out), 0);
	assert_string_equal(out.u.refuse.text, rf.u.refuse.text);
	assert_string_equal(wire_code_name(out.u.refuse.code), "nranks");

	struct wire_msg ab = { .type = WIRE_ABORT, .u.abort = { 5, WIRE_E_TIMEOUT, "rank 2 silent" } };
	assert_int_equal(roundtrip(&ab, &out), 0);
	assert_int_equal(out.u.abort.job_handle, 5);

	struct wire_msg rd = { .type = WIRE_READY, .u.ready = { 5, 4 } };
	assert_int_equal(roundtrip(&rd, &out), 0);
	struct wire_msg lv = { .type = WIRE_LEAVE, .u.leave = { 5 } };
	assert_int_equal(roundtrip(&lv, &out), 0);
}

static void test_join_validation(void **state)
{
	(void)state;
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_msg m;
#define BAD(field_stmt)                                                       \
	do {                                                                  \
		m = sample_join();                                            \
		field_stmt;                                                   \
		assert_int_equal(wire_msg_encode(&m, buf, sizeof(buf)), -EINVAL); \
	} while (0)
	BAD(m.u.join.rank = 4);            /* rank >= nranks */
	BAD(m.u.join.nranks = 0);
	BAD(m.u.join.nranks = 70000);
	BAD(m.u.join.chunk_bytes = 0);
	BAD(m.u.join.chunk_bytes = 1001);  /* not a multiple of 8 */
	BAD(m.u.join.window = 0);
	BAD(m.u.join.dtype_mask = 0);
	BAD(m.u.join.dtype_mask = 1u << 12); /* unknown type bit */
	BAD(m.u.join.addr_len = 0);
	BAD(m.u.join.addr_len = 65);
	BAD(m.u.join.flags = 0x80);
	BAD(m.u.join.provider[0] = 0);
	BAD(m.u.join.provider[1] = '\n');
#undef BAD
}

static void test_decode_rejects(void **state)
{
	(void)state;
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_msg m = sample_join(), out;
	struct wire_hdr h;
	int n = wire_msg_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	/* Every truncation of the body fails. */
	for (int cut = 0; cut < n - WIRE_HDR_LEN; cut++)
		assert_int_equal(wire_msg_decode(WIRE_JOIN, buf + WIRE_HDR_LEN, (size_t)cut, &out), -EBADMSG);
	/* Trailing garbage fails. */
	uint8_t big[WIRE_MSG_MAX + 1];
	memcpy(big, buf, (size_t)n);
	big[n] = 0;
	assert_int_equal(wire_msg_decode(WIRE_JOIN, big + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN + 1, &out), -EBADMSG);
	/* rank >= nranks on the wire: byte 8 of the body is rank. */
	memcpy(big, buf, (size_t)n);
	big[WIRE_HDR_LEN + 8] = 9;
	assert_int_equal(wire_msg_decode(WIRE_JOIN, big + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN, &out), -EBADMSG);
	/* Header: bad magic, reserved, oversize, unknown type, other version. */
	memcpy(big, buf, WIRE_HDR_LEN);
	big[0] ^= 1;
	assert_int_equal(wire_hdr_decode(big, WIRE_HDR_LEN, &h), -EBADMSG);
	memcpy(big, buf, WIRE_HDR_LEN);
	big[12] = 1;
	assert_int_equal(wire_hdr_decode(big, WIRE_HDR_LEN, &h), -EBADMSG);
	memcpy(big, buf, WIRE_HDR_LEN);
	big[9] = 0x10; /* body length 4096+ */
	assert_int_equal(wire_hdr_decode(big, WIRE_HDR_LEN, &h), -EBADMSG);
	memcpy(big, buf, WIRE_HDR_LEN);
	big[6] = 99;
	assert_int_equal(wire_hdr_decode(big, WIRE_HDR_LEN, &h), -EBADMSG);
	memcpy(big, buf, WIRE_HDR_LEN);
	big[4] = WIRE_VERSION + 1;
	assert_int_equal(wire_hdr_decode(big, WIRE_HDR_LEN, &h), -EPROTO);
	assert_int_equal(h.version, WIRE_VERSION + 1);
	assert_int_equal(wire_hdr_decode(buf, WIRE_HDR_LEN - 1, &h), -EBADMSG);
	/* REFUSE with control characters or an unknown code. */
	uint8_t body[16] = { 0, 0, 0, 0, 99, 0, 2, 0, 'h', 'i' };
	assert_int_equal(wire_msg_decode(WIRE_REFUSE, body, 10, &out), -EBADMSG);
	body[4] = 1;
	body[9] = 7;
	assert_int_equal(wire_msg_decode(WIRE_REFUSE, body, 10, &out), -EBADMSG);
	body[9] = 'i';
	assert_int_equal(wire_msg_decode(WIRE_REFUSE, body, 10, &out), 0);
	/* Unknown type. */
	assert_int_equal(wire_msg_decode(42, body, 10, &out), -EBADMSG);
}

static void test_auth(void **state)
{
	(void)state;
	const uint8_t key[] = "0123456789abcdef-secret";
	struct wire_msg m = sample_join();
	assert_int_equal(wire_join_sign(key, sizeof(key) - 1, 42, &m.u.join), 0);
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &m.u.join), 0);
	/* Other nonce (replay), other key, tampered field: all refused. */
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 43, &m.u.join), -EACCES);
	assert_int_equal(wire_join_verify(key, sizeof(key) - 2, 42, &m.u.join), -EACCES);
	struct wire_join t = m.u.join;
	t.rank = 2;
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &t), -EACCES);
	/* The tag survives the wire. */
	struct wire_msg out;
	assert_int_equal(roundtrip(&m, &out), 0);
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &out.u.join), 0);
}

/* Version 6: the JOIN's label after the weight (a weight of 1 written when
 * none was asked), signed with the body; at most WIRE_LABEL_MAX printable
 * bytes, refused otherwise both ways. */
static void test_label(void **state)
{
	(void)state;
	const uint8_t key[] = "0123456789abcdef-secret";
	uint8_t buf[WIRE_MSG_MAX];
	char why[128];
	struct wire_msg out, m = sample_join();
	int n0 = wire_msg_encode(&m, buf, sizeof(buf));

	snprintf(m.u.join.label, sizeof(m.u.join.label), "slurm-4242");
	assert_int_equal(wire_join_sign(key, sizeof(key) - 1, 42, &m.u.join), 0);
	int n = wire_msg_encode(&m, buf, sizeof(buf));
	assert_int_equal(n, n0 + 2 + 1 + 10);
	assert_int_equal(roundtrip(&m, &out), 0);
	assert_string_equal(out.u.join.label, "slurm-4242");
	assert_int_equal(out.u.join.weight, 1);
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &out.u.join), 0);
	/* signed: another label, or none, breaks the tag */
	out.u.join.label[0] = 'S';
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &out.u.join), -EACCES);
	out.u.join.label[0] = '\0';
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &out.u.join), -EACCES);
	/* a length of 0, a length past the body, a control byte: malformed */
	buf[n - 11] = 0;
	assert_int_equal(wire_msg_decode(WIRE_JOIN, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN, &out), -EBADMSG);
	buf[n - 11] = 11;
	assert_int_equal(wire_msg_decode(WIRE_JOIN, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN, &out), -EBADMSG);
	buf[n - 11] = 10;
	buf[n - 1] = '\n';
	assert_int_equal(wire_msg_decode(WIRE_JOIN, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN, &out), -EBADMSG);
	/* the longest label travels; one byte more is refused by the encoder */
	memset(m.u.join.label, 'x', WIRE_LABEL_MAX);
	m.u.join.label[WIRE_LABEL_MAX] = '\0';
	assert_int_equal(roundtrip(&m, &out), 0);
	assert_int_equal(strlen(out.u.join.label), WIRE_LABEL_MAX);
	m.u.join.label[3] = '\t';
	assert_int_equal(wire_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	/* the settings' check: length and printable, with the reason */
	assert_int_equal(wire_label_check("", why, sizeof(why)), 0);
	assert_int_equal(wire_label_check("job-12_3+0 \"q\"", why, sizeof(why)), 0);
	assert_int_equal(wire_label_check("a\x7f", why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "byte 1 (0x7f)"));
	char long_label[WIRE_LABEL_MAX + 2];
	memset(long_label, 'y', sizeof(long_label) - 1);
	long_label[sizeof(long_label) - 1] = '\0';
	assert_int_equal(wire_label_check(long_label, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "65 bytes: at most 64"));
}

/* Version 4: the JOIN's weight (after the tag, signed) and the JOIN_OK's
 * grant; without them both messages are as in version 3. */
static void test_weight(void **state)
{
	(void)state;
	const uint8_t key[] = "0123456789abcdef-secret";
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_msg out, m = sample_join();
	int n0 = wire_msg_encode(&m, buf, sizeof(buf));
	m.u.join.weight = 3;
	assert_int_equal(wire_join_sign(key, sizeof(key) - 1, 42, &m.u.join), 0);
	assert_int_equal(wire_msg_encode(&m, buf, sizeof(buf)), n0 + 2);
	assert_int_equal(roundtrip(&m, &out), 0);
	assert_int_equal(out.u.join.weight, 3);
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &out.u.join), 0);
	/* the weight is signed: changed, or stripped, the tag no longer holds */
	out.u.join.weight = 9;
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &out.u.join), -EACCES);
	out.u.join.weight = 0;
	assert_int_equal(wire_join_verify(key, sizeof(key) - 1, 42, &out.u.join), -EACCES);
	/* 0 on the wire, or above WIRE_WEIGHT_MAX: refused both ways */
	int n = wire_msg_encode(&m, buf, sizeof(buf));
	buf[n - 2] = 0;
	buf[n - 1] = 0;
	assert_int_equal(wire_msg_decode(WIRE_JOIN, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN, &out), -EBADMSG);
	m.u.join.weight = WIRE_WEIGHT_MAX + 1;
	assert_int_equal(wire_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	/* one byte more than a weight: trailing garbage */
	m.u.join.weight = 2;
	n = wire_msg_encode(&m, buf, sizeof(buf));
	assert_int_equal(wire_msg_decode(WIRE_JOIN, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN - 1, &out), -EBADMSG);

	struct wire_msg ok = { .type = WIRE_JOIN_OK };
	ok.u.join_ok = (struct wire_join_ok){ .job_handle = 5, .window = 16, .chunk_bytes = 4096,
					      .addr_len = 4, .weight = 2 };
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.weight, 2);
	assert_int_equal(out.u.join_ok.window, 16);
	ok.u.join_ok.weight = 0;
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.weight, 0);
}

/* A JOIN_OK (weight 1) naming `lanes` lanes, lane k's address `len`
 * bytes of 'a' + k. */
static void join_ok_lanes(struct wire_msg *ok, unsigned lanes, uint16_t len)
{
	memset(ok, 0, sizeof(*ok));
	ok->type = WIRE_JOIN_OK;
	ok->u.join_ok.job_handle = 5;
	ok->u.join_ok.window = 8;
	ok->u.join_ok.chunk_bytes = 65536;
	ok->u.join_ok.addr_len = 3;
	memcpy(ok->u.join_ok.addr, "abc", 3);
	ok->u.join_ok.weight = 1;
	ok->u.join_ok.lanes = (uint8_t)lanes;
	for (unsigned k = 1; k < lanes; k++) {
		ok->u.join_ok.lane_len[k] = len;
		memset(ok->u.join_ok.lane_addr[k], 'a' + (int)k, len);
	}
}

/* Version 7: a JOIN_OK naming lanes, after the weight: the count and the
 * addresses of lanes 1.. (wire.h). */
static void test_lanes(void **state)
{
	(void)state;
	struct wire_msg out, ok;
	uint8_t buf[WIRE_MSG_MAX];

	join_ok_lanes(&ok, WIRE_LANES_MAX, WIRE_ADDR_MAX); /* the largest fits the body */
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.lanes, WIRE_LANES_MAX);
	assert_int_equal(out.u.join_ok.weight, 1);
	for (unsigned k = 1; k < WIRE_LANES_MAX; k++) {
		assert_int_equal(out.u.join_ok.lane_len[k], WIRE_ADDR_MAX);
		assert_memory_equal(out.u.join_ok.lane_addr[k], ok.u.join_ok.lane_addr[k], WIRE_ADDR_MAX);
	}
	/* two lanes; cut short: refused */
	ok.u.join_ok.lanes = 2;
	int n = wire_msg_encode(&ok, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(wire_msg_decode(WIRE_JOIN_OK, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN - 1, &out),
			 -EBADMSG);
	/* a count of 1 or above the most on the wire: refused */
	buf[n - 2 - WIRE_ADDR_MAX - 1] = 1;
	assert_int_equal(wire_msg_decode(WIRE_JOIN_OK, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN, &out),
			 -EBADMSG);
	buf[n - 2 - WIRE_ADDR_MAX - 1] = WIRE_LANES_MAX + 1;
	assert_int_equal(wire_msg_decode(WIRE_JOIN_OK, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN, &out),
			 -EBADMSG);
	/* lanes need the weight before them; an empty lane address is invalid */
	ok.u.join_ok.weight = 0;
	assert_int_equal(wire_msg_encode(&ok, buf, sizeof(buf)), -EINVAL);
	ok.u.join_ok.weight = 1;
	ok.u.join_ok.lane_len[1] = 0;
	assert_int_equal(wire_msg_encode(&ok, buf, sizeof(buf)), -EINVAL);
	ok.u.join_ok.lanes = WIRE_LANES_MAX + 1;
	assert_int_equal(wire_msg_encode(&ok, buf, sizeof(buf)), -EINVAL);
	/* one lane: nothing sent, as before version 7 */
	ok.u.join_ok.lanes = 1;
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.lanes, 0);
}

/* Version 8: a JOIN_OK with lanes may carry the spread limit after them,
 * 1..WIRE_SPREAD_MAX; the lane each result comes from (wire_result_lane). */
static void test_spread(void **state)
{
	(void)state;
	struct wire_msg out, ok;
	uint8_t buf[WIRE_MSG_MAX];

	join_ok_lanes(&ok, 3, 4);
	ok.u.join_ok.spread = 64;
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.lanes, 3);
	assert_int_equal(out.u.join_ok.spread, 64);
	/* cut inside the limit, or a limit of 0 on the wire: refused */
	int n = wire_msg_encode(&ok, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(wire_msg_decode(WIRE_JOIN_OK, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN - 1, &out),
			 -EBADMSG);
	memset(buf + n - 4, 0, 4);
	assert_int_equal(wire_msg_decode(WIRE_JOIN_OK, buf + WIRE_HDR_LEN, (size_t)n - WIRE_HDR_LEN, &out),
			 -EBADMSG);
	/* above the most, or without lanes: invalid */
	ok.u.join_ok.spread = WIRE_SPREAD_MAX + 1;
	assert_int_equal(wire_msg_encode(&ok, buf, sizeof(buf)), -EINVAL);
	ok.u.join_ok.spread = 64;
	ok.u.join_ok.lanes = 1;
	assert_int_equal(wire_msg_encode(&ok, buf, sizeof(buf)), -EINVAL);
	/* none: the JOIN_OK of version 7 */
	ok.u.join_ok.lanes = 3;
	ok.u.join_ok.spread = 0;
	assert_int_equal(roundtrip(&ok, &out), 0);
	assert_int_equal(out.u.join_ok.spread, 0);

	/* the rule: slot s's lane, or (s + rank) % lanes for a result of at
	 * most the limit */
	assert_int_equal(wire_result_lane(5, 1, 1, 64, 8), 0);
	assert_int_equal(wire_result_lane(5, 1, 3, 0, 8), 2);
	assert_int_equal(wire_result_lane(5, 1, 3, 64, 65), 2);
	assert_int_equal(wire_result_lane(5, 1, 3, 64, 64), 0);
	assert_int_equal(wire_result_lane(5, 0, 3, 64, 8), 2);
	assert_int_equal(wire_result_lane(5, 2, 3, 64, 0), 1);
	assert_int_equal(wire_result_lane(UINT32_MAX, 1, 2, 64, 8), 0);
}

/* Version 5: DRAIN (daemon -> rank), u32 deadline_ms; not in versions 2..4. */
static void test_drain(void **state)
{
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_hdr h;
	struct wire_msg out;
	(void)state;

	assert_string_equal(wire_type_name(WIRE_DRAIN), "DRAIN");
	struct wire_msg m = { .type = WIRE_DRAIN, .u.drain = { 0xA1B2C3D4u } };
	assert_int_equal(roundtrip(&m, &out), 0);
	assert_int_equal(out.type, WIRE_DRAIN);
	assert_int_equal(out.u.drain.deadline_ms, 0xA1B2C3D4u);
	int n = wire_msg_encode(&m, buf, sizeof(buf));
	assert_int_equal(n, WIRE_HDR_LEN + 4);
	assert_int_equal(wire_hdr_decode(buf, (size_t)n, &h), 0);
	assert_int_equal(h.version, WIRE_VERSION);
	assert_int_equal(h.type, WIRE_DRAIN);
	/* little-endian on the wire */
	assert_int_equal(buf[WIRE_HDR_LEN], 0xD4);
	assert_int_equal(buf[WIRE_HDR_LEN + 3], 0xA1);
	/* short or long bodies are malformed */
	for (size_t len = 0; len < 4; len++)
		assert_int_equal(wire_msg_decode(WIRE_DRAIN, buf + WIRE_HDR_LEN, len, &out), -EBADMSG);
	uint8_t five[5] = { 1, 2, 3, 4, 0 };
	assert_int_equal(wire_msg_decode(WIRE_DRAIN, five, 5, &out), -EBADMSG);
	/* neither written nor read in a version that has no DRAIN */
	for (uint16_t v = WIRE_VERSION_MIN; v < 5; v++) {
		m.version = v;
		assert_int_equal(wire_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	}
	m.version = 5;
	n = wire_msg_encode(&m, buf, sizeof(buf));
	assert_int_equal(n, WIRE_HDR_LEN + 4);
	buf[4] = 4; /* the same message in a version 4 header */
	assert_int_equal(wire_hdr_decode(buf, (size_t)n, &h), -EBADMSG);
	/* type 11 is still unknown */
	buf[4] = 5;
	buf[6] = WIRE_DRAIN + 1;
	assert_int_equal(wire_hdr_decode(buf, (size_t)n, &h), -EBADMSG);
	assert_string_equal(wire_type_name(WIRE_DRAIN + 1), "?");
}

static void test_key_file(void **state)
{
	(void)state;
	char path[] = "/tmp/sumcast-key-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	uint8_t key[256];
	size_t len;
	const char *why;
	assert_int_equal(write(fd, "short\n", 6), 6);
	assert_int_equal(wire_key_load(path, key, &len, &why), -EINVAL);
	assert_non_null(why);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(pwrite(fd, "0123456789abcdefXYZ \n", 21, 0), 21);
	assert_int_equal(wire_key_load(path, key, &len, &why), 0);
	assert_int_equal(len, 19);
	close(fd);
	unlink(path);
	assert_int_equal(wire_key_load(path, key, &len, &why), -ENOENT);
}

static void test_tags(void **state)
{
	(void)state;
	uint64_t t = wire_tag_make(WIRE_TAG_DATA, 0xABCDE, 0x1234, 0x56789A);
	assert_int_equal(wire_tag_kind(t), WIRE_TAG_DATA);
	assert_int_equal(wire_tag_job(t), 0xABCDE);
	assert_int_equal(wire_tag_rank(t), 0x1234);
	assert_int_equal(wire_tag_slot(t), 0x56789A);
	uint32_t d = wire_imm_make(9, 3, 0xFFFFFF);
	assert_int_equal(wire_imm_dtype(d), 9);
	assert_int_equal(wire_imm_op(d), 3);
	assert_int_equal(wire_imm_mode(d), WIRE_MODE_ALL);
	assert_int_equal(wire_imm_seq(d), 0xFFFFFF);
	/* The mode sits between op and seq and leaves both alone. */
	uint32_t g = wire_imm_with_mode(d, WIRE_MODE_TAKE);
	assert_int_equal(wire_imm_mode(g), WIRE_MODE_TAKE);
	assert_int_equal(wire_imm_dtype(g), 9);
	assert_int_equal(wire_imm_op(g), 3);
	assert_int_equal(wire_imm_seq(g), 0xFFFFFF);
	assert_int_equal(wire_imm_plain(g), d);
	/* Sequence numbers wrap inside their field. */
	assert_int_equal(wire_imm_seq(wire_imm_make(0, 0, WIRE_SEQ_MASK + 5)), 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_all), cmocka_unit_test(test_join_validation),
		cmocka_unit_test(test_decode_rejects), cmocka_unit_test(test_auth),
		cmocka_unit_test(test_key_file),       cmocka_unit_test(test_tags),
		cmocka_unit_test(test_versions),       cmocka_unit_test(test_weight),
		cmocka_unit_test(test_label),
		cmocka_unit_test(test_drain),          cmocka_unit_test(test_lanes), cmocka_unit_test(test_spread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
