/* Numbers, sizes, lists and addresses on sumcastctl's command line, each
 * parsed one way for every command, and refused with a sentence in the
 * user's terms ("--nodes 16.5: not a whole number", "--bytes must be at
 * least 1 byte") and exit 64. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "hostport.h"
#include "sumcastctl.h"

static void usage_die(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void usage_die(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sumcastctl%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_USAGE);
}

const char *arg_fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	if (v == 1) {
		snprintf(buf, len, "1 byte");
		return buf;
	}
	while (u < 4 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%" PRIu64 " %s", v, unit[u]);
	return buf;
}

uint64_t arg_count(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		v = 0, end = (char *)s;
	else
		v = strtoull(s, &end, 10);
	if (end == s || *end) {
		char *e2;
		double d = strtod(s, &e2);
		if (e2 != s && !*e2 && isfinite(d))
			usage_die(cmd, "%s %s: not a whole number", opt, s);
		usage_die(cmd, "%s %s: not a number", opt, s);
	}
	if (errno == ERANGE || v > max)
		usage_die(cmd, "%s %s: at most %" PRIu64, opt, s, max);
	if (v < min)
		usage_die(cmd, "%s must be at least %" PRIu64 " (got %s)", opt, min, s);
	return v;
}

double arg_real(const char *cmd, const char *opt, const char *s, double min, bool min_open, double max,
		const char *unit)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !isfinite(v))
		usage_die(cmd, "%s %s: not a number", opt, s);
	if (min_open ? !(v > min) : !(v >= min))
		usage_die(cmd, "%s must be %s %.15g%s%s (got %s)", opt, min_open ? "above" : "at least", min,
			  unit ? " " : "", unit ? unit : "", s);
	if (v > max)
		usage_die(cmd, "%s %s: at most %.15g%s%s", opt, s, max, unit ? " " : "", unit ? unit : "");
	return v;
}

uint64_t arg_size(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max)
{
	struct holder {
		uint64_t v;
	} h;
	static const struct cfg_entry e = { "", "size", CFG_SIZE, "0", "", offsetof(struct holder, v), 0, 0,
					    false };
	struct cfg_error err;
	char a[48];

	if (cfg_set(&e, &h, s, &err))
		usage_die(cmd, "%s %s: not a size (a whole number of bytes, or with K, M, G or T: 64K, 2M)",
			  opt, s);
	if (h.v < min)
		usage_die(cmd, "%s must be at least %s (got %s)", opt, arg_fmt_size(min, a, sizeof(a)), s);
	if (h.v > max)
		usage_die(cmd, "%s %s: at most %s", opt, s, arg_fmt_size(max, a, sizeof(a)));
	return h.v;
}

int arg_list(const char *cmd, const char *opt, const char *arg, char **items, int max, char *buf, size_t len)
{
	int n = 0;
	char *p;

	if (strlen(arg) >= len)
		usage_die(cmd, "%s: list too long", opt);
	strcpy(buf, arg);
	p = buf;
	for (;;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = 0;
		if (!*p)
			usage_die(cmd, "%s %s: an empty item in the list (values are separated by single commas)",
				  opt, arg);
		if (n == max)
			usage_die(cmd, "%s: at most %d values", opt, max);
		items[n++] = p;
		if (!comma)
			break;
		p = comma + 1;
	}
	return n;
}

void arg_daemon(struct opts *o, const char *cmd, const char *url)
{
	static char host[HOSTPORT_HOST_MAX];
	char buf[HOSTPORT_TEXT_MAX], why[512];
	struct hostport hp;
	const char *s = url;

	if (!strncmp(s, "http://", 7))
		s += 7;
	snprintf(buf, sizeof(buf), "%s", s);
	size_t n = strlen(buf);
	if (n && buf[n - 1] == '/')
		buf[n - 1] = 0;
	if (hostport_parse(buf, &hp, why, sizeof(why)))
		usage_die(cmd, "--daemon %s: %s", url, why);
	if (!hp.port)
		usage_die(cmd, "--daemon %s: port 0 is not a daemon's port", url);
	snprintf(host, sizeof(host), "%s", hp.host);
	o->host = host;
	o->port = hp.port;
}
