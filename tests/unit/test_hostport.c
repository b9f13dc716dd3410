/* common/hostport.c: the one "host:port" parser and loopback rule. Every
 * spelling that parses gives the host without brackets and the port; every
 * one that does not is -EINVAL with a sentence that quotes it; lists take
 * commas and spaces; loopback is decided on the address, not its text. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "hostport.h"

static void parses(const char *s, const char *host, unsigned port)
{
	struct hostport hp;
	char why[256] = "";

	assert_int_equal(hostport_parse(s, &hp, why, sizeof(why)), 0);
	assert_string_equal(hp.text, s);
	assert_string_equal(hp.host, host);
	assert_int_equal(hp.port, port);
}

/* Refused, with a sentence that names the text and says what is wrong. */
static void refuses(const char *s, const char *what)
{
	struct hostport hp = { .port = 4242 };
	char why[512] = "", quoted[300];

	assert_int_equal(hostport_parse(s, &hp, why, sizeof(why)), -EINVAL);
	snprintf(quoted, sizeof(quoted), "\"%s\"", s);
	if (!strstr(why, quoted) || !strstr(why, what))
		fail_msg("\"%s\": the sentence \"%s\" should quote it and say \"%s\"", s, why, what);
	assert_int_equal(hp.port, 4242); /* out untouched */
}

static void test_parse(void **state)
{
	(void)state;
	parses("127.0.0.1:7800", "127.0.0.1", 7800);
	parses("agg1.example.com:1", "agg1.example.com", 1);
	parses("a:65535", "a", 65535);
	parses("[::1]:7800", "::1", 7800);
	parses("[fd00::5]:9", "fd00::5", 9);
	refuses("127.0.0.1", "is not host:port");
	refuses("127.0.0.1:", "has no port");
	refuses(":80", "has no host");
	refuses("[]:80", "has no host");
	refuses("127.0.0.1:0", "bad port");
	refuses("127.0.0.1:65536", "bad port");
	refuses("127.0.0.1:99999", "bad port");
	refuses("127.0.0.1:8x", "bad port");
	refuses("127.0.0.1:+80", "bad port");
	refuses("127.0.0.1:-1", "bad port");
	refuses("::1:7800", "in brackets");
	refuses("[::1:7800", "no ']'");
	refuses("[::1]7800", "is not [host]:port");
}

static void test_parse_long(void **state)
{
	char s[HOSTPORT_TEXT_MAX + 8], why[256];
	struct hostport hp;

	(void)state;
	memset(s, 'a', sizeof(s));
	strcpy(s + HOSTPORT_TEXT_MAX - 5, ":7800"); /* one character over */
	assert_int_equal(hostport_parse(s, &hp, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "too long"));
	s[0] = 'b';
	strcpy(s + HOSTPORT_TEXT_MAX - 6, ":7800"); /* the longest text, its host too long */
	assert_int_equal(hostport_parse(s, &hp, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "host is too long"));
	strcpy(s + HOSTPORT_HOST_MAX - 1, ":7800"); /* the longest host */
	assert_int_equal(hostport_parse(s, &hp, why, sizeof(why)), 0);
	assert_int_equal(strlen(hp.host), HOSTPORT_HOST_MAX - 1);
	assert_int_equal(hostport_parse(s, &hp, NULL, 0), 0); /* why may be NULL */
	assert_int_equal(hostport_parse("x", &hp, NULL, 0), -EINVAL);
}

static void test_list(void **state)
{
	struct hostport hp[4];
	char why[256];
	size_t n = 99;

	(void)state;
	assert_int_equal(hostport_list_parse(" a:1 ,, [::1]:2,b:3 ", hp, 4, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(hp[0].text, "a:1");
	assert_string_equal(hp[1].host, "::1");
	assert_int_equal(hp[1].port, 2);
	assert_string_equal(hp[2].text, "b:3");
	assert_int_equal(hostport_list_parse("a:1 b:2", hp, 4, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 2);
	assert_int_equal(hostport_list_parse(" , ", hp, 4, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 0);
	assert_int_equal(hostport_list_parse("", hp, 4, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 0);
	n = 99;
	assert_int_equal(hostport_list_parse("a:1,b,c:3", hp, 4, &n, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "\"b\" is not host:port");
	assert_int_equal(n, 99);
	assert_int_equal(hostport_list_parse("a:1,b:2,c:3", hp, 2, &n, why, sizeof(why)), -E2BIG);
	assert_non_null(strstr(why, "more than 2 entries"));

	const char *p = "x:1, y:2", *q = NULL;
	assert_int_equal(hostport_list_next(&p, &hp[0], why, sizeof(why)), 1);
	assert_int_equal(hostport_list_next(&p, &hp[0], why, sizeof(why)), 1);
	assert_string_equal(hp[0].host, "y");
	assert_int_equal(hostport_list_next(&p, &hp[0], why, sizeof(why)), 0);
	assert_int_equal(hostport_list_next(&q, &hp[0], why, sizeof(why)), 0); /* NULL list */
}

static void test_loopback(void **state)
{
	static const char *const yes[] = { "127.0.0.1", "127.255.255.254", "127.0.0.2", "::1",
					   "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost",
					   "LocalHost" };
	static const char *const no[] = { "128.0.0.1", "126.255.255.255", "10.0.0.1", "0.0.0.0",
					  "::", "::2", "::ffff:10.0.0.1", "fe80::1",
					  "127.example.com", "127.0.0.1.nip.io", "localhost.example",
					  "[::1]", "", "agg1" };

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!hostport_is_loopback(yes[i]))
			fail_msg("%s should be loopback", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (hostport_is_loopback(no[i]))
			fail_msg("%s should not be loopback", no[i]);
	assert_false(hostport_is_loopback(NULL));
}

static void test_family(void **state)
{
	(void)state;
	assert_int_equal(hostport_family("10.0.0.1"), AF_INET);
	assert_int_equal(hostport_family("::"), AF_INET6);
	assert_int_equal(hostport_family("::ffff:127.0.0.1"), AF_INET6);
	assert_int_equal(hostport_family("localhost"), 0);
	assert_int_equal(hostport_family("[::1]"), 0);
	assert_int_equal(hostport_family("10.0.0"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_long),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_loopback),
		cmocka_unit_test(test_family),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
