/* Logging for daemon, plugin and tools (log.h): sinks, levels, rate limits. */
#include "log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"

int sc_log_level_cur = SC_LOG_INFO;
static sc_log_sink_fn sc_log_sink;
static const char *sc_log_ident = "sumcast";

static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };

void sc_log_set_level(enum sc_log_level level)
{
	sc_log_level_cur = (int)level;
}

const char *sc_log_level_name(enum sc_log_level level)
{
	if ((unsigned)level > SC_LOG_TRACE)
		return "?";
	return level_names[level];
}

int sc_log_level_parse(const char *s, enum sc_log_level *out)
{
	if (!s)
		return -EINVAL;
	for (unsigned i = 0; i <= SC_LOG_TRACE; i++) {
		if (!strcasecmp(s, level_names[i]) ||
		    (s[0] == (char)('0' + i) && s[1] == '\0')) {
			*out = (enum sc_log_level)i;
			return 0;
		}
	}
	if (!strcasecmp(s, "warning")) {
		*out = SC_LOG_WARN;
		return 0;
	}
	return -EINVAL;
}

void sc_log_set_sink(sc_log_sink_fn sink)
{
	sc_log_sink = sink;
}

void sc_log_set_ident(const char *ident)
{
	sc_log_ident = ident ? ident : "sumcast";
}

void sc_log_write(enum sc_log_level level, const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (sc_log_sink) {
		sc_log_sink(level, file, line, msg);
		return;
	}
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	/* One fprintf per line: stdio locks the stream, so lines from
	 * different threads do not interleave. */
	if (level >= SC_LOG_DEBUG)
		fprintf(stderr, "%s: %s: %s:%d: %s\n", sc_log_ident, sc_log_level_name(level),
			base, line, msg);
	else
		fprintf(stderr, "%s: %s: %s\n", sc_log_ident, sc_log_level_name(level), msg);
}

int sc_log_ratelimit_ok(uint64_t *last_ns, unsigned interval_ms)
{
	uint64_t now = sc_now_ns();
	uint64_t prev = __atomic_load_n(last_ns, __ATOMIC_RELAXED);
	if (prev && now - prev < (uint64_t)interval_ms * 1000000ull)
		return 0;
	return __atomic_compare_exchange_n(last_ns, &prev, now, 0, __ATOMIC_RELAXED,
					   __ATOMIC_RELAXED);
}
