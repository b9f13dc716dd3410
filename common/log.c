/* Logging for daemon, plugin and tools (log.h): sinks, levels, rate limits. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "clock.h"

int sc_log_level_cur = SC_LOG_INFO;
static sc_log_sink_fn sc_log_sink;
static const char *sc_log_ident = "sumcast";

static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };
/* The syslog priority of each level: the "<N>" prefix journald reads off a
 * stream line (sd-daemon.h's SD_ERR, SD_WARNING, SD_INFO, SD_DEBUG). */
static const int level_prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG, LOG_DEBUG };
/* -1: not probed yet; 0: stderr is a terminal, a file or a pipe; 1: it is
 * journald's stream (sc_log_stderr_probe). */
static int sc_log_journal = -1;

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

/* systemd sets JOURNAL_STREAM=<dev>:<inode> to the stream it connected
 * stdout and stderr to (systemd.exec(5)); stderr is the journal only if it
 * is still that stream (not redirected by a shell or a test in between). */
int sc_log_stderr_probe(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int on = 0;

	if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && !fstat(STDERR_FILENO, &st))
		on = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
	__atomic_store_n(&sc_log_journal, on, __ATOMIC_RELAXED);
	return on;
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
	int journal = __atomic_load_n(&sc_log_journal, __ATOMIC_RELAXED);
	if (journal < 0)
		journal = sc_log_stderr_probe();
	/* Into the journal: "<4>" first, so that the line gets its priority
	 * (journalctl -p warning); plain text anywhere else. */
	char prio[8] = "";
	if (journal)
		snprintf(prio, sizeof(prio), "<%d>", level_prio[(unsigned)level <= SC_LOG_TRACE ? level : 0]);
	/* One fprintf per line: stdio locks the stream, so lines from
	 * different threads do not interleave. */
	if (level >= SC_LOG_DEBUG)
		fprintf(stderr, "%s%s: %s: %s:%d: %s\n", prio, sc_log_ident, sc_log_level_name(level),
			base, line, msg);
	else
		fprintf(stderr, "%s%s: %s: %s\n", prio, sc_log_ident, sc_log_level_name(level), msg);
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
