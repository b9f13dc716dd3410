/* SUMCAST_AGGREGATORS resolved (common/agglist.c) without a DNS server:
 * literals, the default port, files, duplicates, errors; the compact form
 * rank 0's handle carries, in each of its formats, and its limits. Names
 * and SRV records against a real DNS server: tests/plugin/dns_aggs.sh. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agglist.h"

static const char *joined(const char *spec, uint16_t port)
{
	static char buf[1024], why[256];
	struct agg_addr a[16];
	size_t n = 99;

	if (agglist_resolve(spec, port, a, 16, &n, why, sizeof(why)))
		return why;
	return agglist_join(a, n, buf, sizeof(buf));
}

static void test_literals(void **state)
{
	(void)state;
	assert_string_equal(joined("10.0.0.2:7900, [fd00::1]:80 10.0.0.1", 7800),
			    "10.0.0.2:7900,[fd00::1]:80,10.0.0.1:7800");
	/* the default port is the caller's */
	assert_string_equal(joined("10.0.0.1", 7801), "10.0.0.1:7801");
	/* listed twice: kept once, at its first place */
	assert_string_equal(joined("10.0.0.2:1,10.0.0.1:1,10.0.0.2:1", 7800), "10.0.0.2:1,10.0.0.1:1");
	/* a name from /etc/hosts: localhost is IPv4 here, its ::1 not added */
	assert_string_equal(joined("localhost:7", 7800), "127.0.0.1:7");
	assert_string_equal(joined("", 7800), "");
	/* errors say which entry */
	assert_non_null(strstr(joined("10.0.0.1:0", 7800), "bad port"));
	assert_non_null(strstr(joined("no-such-host.invalid:1", 7800), "no-such-host.invalid"));
	assert_non_null(strstr(joined("srv:", 7800), "no name after srv:"));
	assert_non_null(strstr(joined("@/nonexistent/aggs", 7800), "cannot read /nonexistent/aggs"));
	struct agg_addr a[2];
	size_t n;
	char why[128];
	assert_int_equal(agglist_resolve("1.1.1.1:1,1.1.1.2:1,1.1.1.3:1", 7800, a, 2, &n, why, sizeof(why)),
			 -E2BIG);
}

static void test_file(void **state)
{
	(void)state;
	char path[] = "/tmp/sumcast-agglist-XXXXXX", spec[64], inner[64];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char text[] = "# the aggregators of rack 3\n10.0.3.1:7800 10.0.3.2\n\n10.0.3.3:7811, # spare\n";
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	snprintf(spec, sizeof(spec), "@%s", path);
	assert_string_equal(joined(spec, 7800), "10.0.3.1:7800,10.0.3.2:7800,10.0.3.3:7811");
	snprintf(spec, sizeof(spec), "10.0.0.9:1,file:%s", path);
	assert_string_equal(joined(spec, 7800), "10.0.0.9:1,10.0.3.1:7800,10.0.3.2:7800,10.0.3.3:7811");
	/* no file within a file */
	fd = open(path, O_WRONLY | O_TRUNC);
	snprintf(inner, sizeof(inner), "10.0.0.1:1 @%s\n", path);
	assert_int_equal(write(fd, inner, strlen(inner)), (ssize_t)strlen(inner));
	close(fd);
	snprintf(spec, sizeof(spec), "@%s", path);
	assert_non_null(strstr(joined(spec, 7800), "a file within a file"));
	unlink(path);
}

static void pack_back(const char *spec, size_t cap, int want_len, uint8_t want_fmt)
{
	struct agg_addr a[64], b[64];
	uint8_t buf[256], fmt = 0xff;
	char why[128];
	size_t n;

	assert_int_equal(agglist_resolve(spec, 7800, a, 64, &n, why, sizeof(why)), 0);
	int len = agglist_pack(a, n, buf, cap, &fmt);
	assert_int_equal(len, want_len);
	if (len < 0)
		return;
	assert_int_equal(fmt, want_fmt);
	assert_int_equal(agglist_unpack(buf, (size_t)len, fmt, n, b), 0);
	assert_int_equal(agglist_digest(a, n), agglist_digest(b, n));
	for (size_t i = 0; i < n; i++)
		assert_memory_equal(&a[i], &b[i], sizeof(a[i]));
	/* one byte short, or one more, or a format bit flipped: refused */
	if (len > 0) {
		assert_int_equal(agglist_unpack(buf, (size_t)len - 1, fmt, n, b), -EBADMSG);
		assert_int_equal(agglist_unpack(buf, (size_t)len + 1, fmt, n, b), -EBADMSG);
	}
	assert_int_equal(agglist_unpack(buf, (size_t)len, fmt | 0x10, n, b), -EBADMSG);
}

static void test_pack(void **state)
{
	(void)state;
	/* one port, IPv4: 2 + 4 per entry; eleven in the 48 bytes a tcp
	 * handle leaves after its 16-byte address */
	pack_back("10.0.0.1:7800,10.0.0.2:7800", 48, 10, AGGLIST_F_ONE_PORT | AGGLIST_F_ALL_V4);
	pack_back("10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5,10.0.0.6,10.0.0.7,10.0.0.8,"
		  "10.0.0.9,10.0.0.10,10.0.0.11", 48, 46, AGGLIST_F_ONE_PORT | AGGLIST_F_ALL_V4);
	pack_back("10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5,10.0.0.6,10.0.0.7,10.0.0.8,"
		  "10.0.0.9,10.0.0.10,10.0.0.11,10.0.0.12,10.0.0.13", 48, -E2BIG, 0);
	/* ports differ: 6 per entry */
	pack_back("10.0.0.1:7800,10.0.0.2:7801", 48, 12, AGGLIST_F_ALL_V4);
	/* IPv6 among them: a tag byte each */
	pack_back("[fd00::1]:7800,10.0.0.2:7800", 48, 2 + 17 + 5, AGGLIST_F_ONE_PORT);
	pack_back("[fd00::1]:7800,10.0.0.2:7801", 48, 19 + 7, 0);
	pack_back("", 48, 0, AGGLIST_F_ONE_PORT | AGGLIST_F_ALL_V4);
}

static void test_order(void **state)
{
	(void)state;
	struct agg_addr a[4], b[4];
	char why[128];
	size_t n, m;

	assert_int_equal(agglist_resolve("10.0.0.2:1,10.0.0.1:1,[::2]:1", 7800, a, 4, &n, why, sizeof(why)), 0);
	assert_int_equal(agglist_resolve("[::2]:1,10.0.0.1:1,10.0.0.2:1", 7800, b, 4, &m, why, sizeof(why)), 0);
	/* another order, another digest; sorted, the same */
	assert_int_not_equal(agglist_digest(a, n), agglist_digest(b, m));
	agglist_sort(a, n);
	agglist_sort(b, m);
	assert_int_equal(agglist_digest(a, n), agglist_digest(b, m));
	assert_int_not_equal(agglist_digest(a, 0), 0);
	assert_true(agglist_all_loopback(a, 0) == 0);
	assert_int_equal(agglist_resolve("127.0.0.2:1,[::1]:2", 7800, a, 4, &n, why, sizeof(why)), 0);
	assert_true(agglist_all_loopback(a, n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_literals),
		cmocka_unit_test(test_file),
		cmocka_unit_test(test_pack),
		cmocka_unit_test(test_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
