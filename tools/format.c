/* sumcastctl's output: error exit, numbers for people (binary sizes, SI
 * rates, durations, uptime), and JSON for scripts. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sumcastctl.h"

void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("sumcastctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* Bytes in binary units (memory, sizes). */
const char *fmt_bytes(double v, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;

	while (fabs(v) >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i && v != floor(v) ? "%.1f %s" : "%.0f %s", v, u[i]);
	return buf;
}

/* Traffic in decimal units, as link speeds are quoted (GB/s = 10^9 B/s). */
const char *fmt_si(double v, const char *unit, char *buf, size_t len)
{
	static const char *const p[] = { "", "k", "M", "G", "T", "P" };
	int i = 0;

	while (fabs(v) >= 1000 && i < 5) {
		v /= 1000;
		i++;
	}
	snprintf(buf, len, i ? "%.2f %s%s" : "%.0f %s%s", v, p[i], unit);
	return buf;
}

const char *fmt_secs(double s, char *buf, size_t len)
{
	if (isnan(s))
		snprintf(buf, len, "-");
	else if (s < 1e-3)
		snprintf(buf, len, "%.1f us", s * 1e6);
	else if (s < 1)
		snprintf(buf, len, "%.2f ms", s * 1e3);
	else
		snprintf(buf, len, "%.2f s", s);
	return buf;
}

const char *fmt_uptime(double s, char *buf, size_t len)
{
	uint64_t t = (uint64_t)s;

	if (t >= 86400)
		snprintf(buf, len, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", t / 86400,
			 t % 86400 / 3600, t % 3600 / 60);
	else if (t >= 3600)
		snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", t / 3600,
			 t % 3600 / 60, t % 60);
	else
		snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", t / 60, t % 60);
	return buf;
}

/* Integral values as JSON integers (counts, bytes), others as reals. */
json_t *jval(double v)
{
	if (isnan(v) || isinf(v))
		return json_null();
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		return json_integer((json_int_t)v);
	return json_real(v);
}

void json_print(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
}

void json_print_line(json_t *j)
{
	json_dumpf(j, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
}

const char *fmt_clock(char *buf, size_t len)
{
	time_t now = time(NULL);

	strftime(buf, len, "%H:%M:%S", localtime(&now));
	return buf;
}
