/* "host:port" and lists of them: the one parser of aggregator addresses
 * (SUMCAST_AGGREGATORS, client_params.aggs, the tests' and benches' --aggs)
 * and the one rule for what is a loopback address (the plugin's "are the
 * aggregators on this host", the daemon's "does a listener need a key", the
 * InfiniBand transport's "is this on an RDMA device"). So every place
 * accepts the same spellings and decides loopback the same way.
 *
 * Spellings: "host:port", where host is a name or an IPv4 literal, and an
 * IPv6 literal goes in brackets, "[::1]:7800" (without them the last colon
 * would be ambiguous). port is 1..65535 in decimal. A list separates its
 * entries with commas or spaces, as many as one likes: "a:1,b:2",
 * "a:1, b:2". Nothing is resolved here. */
#ifndef SUMCAST_HOSTPORT_H
#define SUMCAST_HOSTPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOSTPORT_TEXT_MAX 280 /* an entry as written, its NUL included */
#define HOSTPORT_HOST_MAX 256

struct hostport {
	char text[HOSTPORT_TEXT_MAX]; /* the entry as written: "[::1]:7800" */
	char host[HOSTPORT_HOST_MAX]; /* without brackets: "::1" */
	uint16_t port;
};

/* Parses one entry. 0, or -EINVAL with a sentence that quotes the
 * offending text in why (may be NULL): "\"10.0.0.5:78x\": bad port \"78x\"
 * (1 to 65535)". out is written only on success. */
int hostport_parse(const char *s, struct hostport *out, char *why, size_t whylen);

/* The next entry of the list at *cursor, which it moves past it: 1 with
 * out filled, 0 at the end of the list (or for a NULL list), -EINVAL with
 * why as hostport_parse. */
int hostport_list_next(const char **cursor, struct hostport *out, char *why, size_t whylen);

/* The whole list into out[0..max): 0 with *n entries (0 for an empty list),
 * -EINVAL (an entry does not parse) or -E2BIG (more than max), with why. */
int hostport_list_parse(const char *list, struct hostport *out, size_t max, size_t *n, char *why,
			size_t whylen);

/* AF_INET or AF_INET6 when host is an IP literal (inet_pton), else 0. */
int hostport_family(const char *host);

/* Whether host (without brackets) is a loopback address: an IP literal in
 * 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104, or the name localhost (any
 * case). Other names are not resolved, so they are not loopback. */
bool hostport_is_loopback(const char *host);

#endif
