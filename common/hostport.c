/* "host:port" parsing and the loopback rule (hostport.h). */
#include "hostport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What separates a list's entries: the plugin's reading of
 * SUMCAST_AGGREGATORS (collnet.c) splits on the same two. */
#define HOSTPORT_SEPS ", "

__attribute__((format(printf, 4, 5))) static int say(char *why, size_t whylen, int err,
						     const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* 1..65535 in decimal digits, nothing else (no sign, no spaces). */
static int port_parse(const char *s, uint16_t *out)
{
	unsigned long v = 0;

	if (!*s || strlen(s) > 5 || s[strspn(s, "0123456789")])
		return -EINVAL;
	for (; *s; s++)
		v = v * 10 + (unsigned long)(*s - '0');
	if (v < 1 || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

int hostport_parse(const char *s, struct hostport *out, char *why, size_t whylen)
{
	size_t len = strlen(s), hlen;
	const char *host, *colon;
	uint16_t port;

	if (len >= HOSTPORT_TEXT_MAX)
		return say(why, whylen, -EINVAL, "\"%.40s...\" is too long (at most %d characters)", s,
			   HOSTPORT_TEXT_MAX - 1);
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close)
			return say(why, whylen, -EINVAL, "\"%s\": no ']' closes the IPv6 address", s);
		if (close[1] != ':')
			return say(why, whylen, -EINVAL, "\"%s\" is not [host]:port", s);
		host = s + 1;
		hlen = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return say(why, whylen, -EINVAL, "\"%s\" is not host:port", s);
		host = s;
		hlen = (size_t)(colon - s);
		/* "::1:7800": is 7800 the port or the address's last group? */
		if (memchr(s, ':', hlen))
			return say(why, whylen, -EINVAL,
				   "\"%s\": an IPv6 address goes in brackets, as in [%.*s]:%s", s, (int)hlen,
				   s, colon + 1);
	}
	if (!hlen)
		return say(why, whylen, -EINVAL, "\"%s\" has no host (host:port)", s);
	if (hlen >= HOSTPORT_HOST_MAX)
		return say(why, whylen, -EINVAL, "\"%.40s...\": the host is too long (at most %d characters)",
			   s, HOSTPORT_HOST_MAX - 1);
	if (!colon[1])
		return say(why, whylen, -EINVAL, "\"%s\" has no port (host:port)", s);
	if (port_parse(colon + 1, &port))
		return say(why, whylen, -EINVAL, "\"%s\": bad port \"%s\" (1 to 65535)", s, colon + 1);
	memcpy(out->text, s, len + 1);
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	out->port = port;
	return 0;
}

int hostport_list_next(const char **cursor, struct hostport *out, char *why, size_t whylen)
{
	char entry[HOSTPORT_TEXT_MAX];
	const char *p = *cursor;
	size_t len;

	if (!p)
		return 0;
	p += strspn(p, HOSTPORT_SEPS);
	len = strcspn(p, HOSTPORT_SEPS);
	*cursor = p + len;
	if (!len)
		return 0;
	if (len >= sizeof(entry))
		return say(why, whylen, -EINVAL, "\"%.40s...\" is too long (at most %d characters)", p,
			   HOSTPORT_TEXT_MAX - 1);
	memcpy(entry, p, len);
	entry[len] = '\0';
	int rc = hostport_parse(entry, out, why, whylen);
	return rc ? rc : 1;
}

int hostport_list_parse(const char *list, struct hostport *out, size_t max, size_t *n, char *why,
			size_t whylen)
{
	const char *p = list;
	struct hostport hp;
	size_t k = 0;
	int rc;

	while ((rc = hostport_list_next(&p, &hp, why, whylen)) > 0) {
		if (k == max)
			return say(why, whylen, -E2BIG, "\"%s\": more than %zu entries", list, max);
		out[k++] = hp;
	}
	if (rc)
		return rc;
	*n = k;
	return 0;
}

int hostport_family(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (inet_pton(AF_INET, host, &a4) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return AF_INET6;
	return 0;
}

bool hostport_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (!host)
		return false;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	/* the one name every resolver maps to loopback; others are not resolved */
	return !strcasecmp(host, "localhost");
}
