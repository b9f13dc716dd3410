/* Logging for daemon, plugin and tools.
 *
 * Macros test the level before formatting anything and keep errno. The
 * daemon logs to stderr (journald adds timestamps, and takes each line's
 * priority from its "<N>" prefix there: sc_log_stderr_probe); the plugin installs a
 * sink that forwards to NCCL's logger. ONCE and RATELIMIT variants exist for
 * the data path; SC_TRACE compiles out unless SUMCAST_TRACE is defined. */
#ifndef SUMCAST_LOG_H
#define SUMCAST_LOG_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>

enum sc_log_level {
	SC_LOG_ERROR = 0,
	SC_LOG_WARN = 1,
	SC_LOG_INFO = 2,
	SC_LOG_DEBUG = 3,
	SC_LOG_TRACE = 4,
};

/* A sink receives one formatted line without trailing newline. */
typedef void (*sc_log_sink_fn)(enum sc_log_level level, const char *file, int line,
			       const char *msg);

extern int sc_log_level_cur;

void sc_log_set_level(enum sc_log_level level);
/* Parses "error|warn|info|debug|trace" or a digit; returns 0 or -EINVAL. */
int sc_log_level_parse(const char *s, enum sc_log_level *out);
const char *sc_log_level_name(enum sc_log_level level);
/* NULL restores the default stderr sink. */
void sc_log_set_sink(sc_log_sink_fn sink);
/* Prefix for the stderr sink, e.g. "sumcastd". */
void sc_log_set_ident(const char *ident);
/* Whether stderr is journald's stream (JOURNAL_STREAM names its device and
 * inode): then the stderr sink starts each line with its syslog priority,
 * "<3>" error, "<4>" warn, "<6>" info, "<7>" debug and trace, which
 * journald takes off and keeps as PRIORITY=. Probed at the first line;
 * call again after stderr is replaced (dup2). Returns 1 or 0. */
int sc_log_stderr_probe(void);

void sc_log_write(enum sc_log_level level, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Returns 1 if a rate-limited message may be printed now (at most one per
 * interval_ms per call site), 0 otherwise. Lock-free. */
int sc_log_ratelimit_ok(uint64_t *last_ns, unsigned interval_ms);

#define SC_LOG_AT(lvl, ...)                                                    \
	do {                                                                   \
		if ((int)(lvl) <= sc_log_level_cur) {                          \
			int sc_saved_errno_ = errno;                           \
			sc_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__);  \
			errno = sc_saved_errno_;                               \
		}                                                              \
	} while (0)

#define SC_ERR(...) SC_LOG_AT(SC_LOG_ERROR, __VA_ARGS__)
#define SC_WARN(...) SC_LOG_AT(SC_LOG_WARN, __VA_ARGS__)
#define SC_INFO(...) SC_LOG_AT(SC_LOG_INFO, __VA_ARGS__)
#define SC_DBG(...) SC_LOG_AT(SC_LOG_DEBUG, __VA_ARGS__)
#ifdef SUMCAST_TRACE
#define SC_TRACE(...) SC_LOG_AT(SC_LOG_TRACE, __VA_ARGS__)
#else
#define SC_TRACE(...) do { } while (0)
#endif

/* Once per process per call site. */
#define SC_LOG_ONCE(lvl, ...)                                                  \
	do {                                                                   \
		static int sc_once_;                                           \
		if ((int)(lvl) <= sc_log_level_cur &&                          \
		    !__atomic_exchange_n(&sc_once_, 1, __ATOMIC_RELAXED))      \
			SC_LOG_AT(lvl, __VA_ARGS__);                           \
	} while (0)

/* At most once per interval_ms per call site. */
#define SC_LOG_RATELIMIT(lvl, interval_ms, ...)                                \
	do {                                                                   \
		static uint64_t sc_rl_last_;                                   \
		if ((int)(lvl) <= sc_log_level_cur &&                          \
		    sc_log_ratelimit_ok(&sc_rl_last_, (interval_ms)))          \
			SC_LOG_AT(lvl, __VA_ARGS__);                           \
	} while (0)

#endif
