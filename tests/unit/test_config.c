/* Unit tests for the table-driven configuration module. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "log.h"

struct demo {
	bool flag;
	int64_t threads;
	uint64_t budget;
	double ratio;
	char provider[CFG_STR_MAX];
	int64_t timeout_ms;
};

static const struct cfg_entry demo_table[] = {
	{ "net", "provider", CFG_STRING, "tcp;ofi_rxm", "libfabric provider", offsetof(struct demo, provider), 0, 0, false },
	{ "data", "threads", CFG_INT, "2", "data threads", offsetof(struct demo, threads), 1, 64, false },
	{ "data", "flag", CFG_BOOL, "off", "a flag", offsetof(struct demo, flag), 0, 0, true },
	{ "job", "memory-budget", CFG_SIZE, "1G", "bytes for all jobs", offsetof(struct demo, budget), 0, 0, true },
	{ "job", "ratio", CFG_DOUBLE, "0.5", "a ratio", offsetof(struct demo, ratio), 0, 1, false },
	{ "job", "timeout", CFG_DURATION_MS, "30s", "rank silence limit", offsetof(struct demo, timeout_ms), 1, 3600000, true },
	CFG_ENTRY_END
};

static void test_defaults(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	assert_int_equal(cfg_set_defaults(demo_table, &d, &err), 0);
	assert_string_equal(d.provider, "tcp;ofi_rxm");
	assert_int_equal(d.threads, 2);
	assert_false(d.flag);
	assert_int_equal(d.budget, 1ull << 30);
	assert_int_equal(d.timeout_ms, 30000);
	assert_true(d.ratio == 0.5);
}

static void test_file_values(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	enum cfg_source src[8] = { 0 };
	assert_int_equal(cfg_set_defaults(demo_table, &d, &err), 0);
	const char *ini = "; comment\n[net]\nprovider = shm\n\n[data]\nthreads=4\nflag = yes\n"
			  "[job]\nmemory-budget = 512M\ntimeout = 2500ms\nratio = 0.25\n";
	assert_int_equal(cfg_parse_string(demo_table, &d, ini, "t.ini", src, &err), 0);
	assert_string_equal(d.provider, "shm");
	assert_int_equal(d.threads, 4);
	assert_true(d.flag);
	assert_int_equal(d.budget, 512ull << 20);
	assert_int_equal(d.timeout_ms, 2500);
	assert_int_equal(src[0], CFG_SRC_FILE);
}

static void test_unknown_key_has_line(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	cfg_set_defaults(demo_table, &d, &err);
	const char *ini = "[net]\nprovider = shm\n\n[data]\nthraeds = 4\n";
	assert_int_equal(cfg_parse_string(demo_table, &d, ini, "t.ini", NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "t.ini:5:"));
	assert_non_null(strstr(err.msg, "thraeds"));
	/* Unknown section. */
	assert_int_equal(cfg_parse_string(demo_table, &d, "[nett]\nprovider=x\n", "u.ini", NULL, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "u.ini:2:"));
}

static void test_bad_values(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	cfg_set_defaults(demo_table, &d, &err);
	assert_int_equal(cfg_parse_string(demo_table, &d, "[data]\nthreads = 0\n", "a", NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "out of range"));
	assert_int_equal(cfg_parse_string(demo_table, &d, "[data]\nthreads = 2x\n", "a", NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "a:2:"));
	assert_int_equal(cfg_parse_string(demo_table, &d, "[data]\nflag = maybe\n", "a", NULL, &err), -EINVAL);
	assert_int_equal(cfg_parse_string(demo_table, &d, "[job]\nmemory-budget = 5Q\n", "a", NULL, &err), -EINVAL);
	assert_int_equal(cfg_parse_string(demo_table, &d, "[job]\nmemory-budget = -1\n", "a", NULL, &err), -EINVAL);
	assert_int_equal(cfg_parse_string(demo_table, &d, "[job]\nratio = 1.5\n", "a", NULL, &err), -EINVAL);
	assert_int_equal(cfg_parse_string(demo_table, &d, "garbage line\n", "a", NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "a:1"));
	/* Nothing half-applied changed the good values. */
	assert_int_equal(d.threads, 2);
}

static void test_env_override(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	enum cfg_source src[8] = { 0 };
	setenv("TESTCFG_JOB_MEMORY_BUDGET", "2G", 1);
	setenv("TESTCFG_DATA_THREADS", "8", 1);
	assert_int_equal(cfg_load(demo_table, &d, NULL, "TESTCFG_", src, &err), 0);
	assert_int_equal(d.budget, 2ull << 30);
	assert_int_equal(d.threads, 8);
	assert_int_equal(src[3], CFG_SRC_ENV);
	setenv("TESTCFG_DATA_THREADZ", "8", 1);
	assert_int_equal(cfg_load(demo_table, &d, NULL, "TESTCFG_", src, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "TESTCFG_DATA_THREADZ"));
	unsetenv("TESTCFG_DATA_THREADZ");
	setenv("TESTCFG_DATA_THREADS", "999", 1);
	assert_int_equal(cfg_load(demo_table, &d, NULL, "TESTCFG_", src, &err), -EINVAL);
	unsetenv("TESTCFG_DATA_THREADS");
	unsetenv("TESTCFG_JOB_MEMORY_BUDGET");
}

static void test_dump_roundtrip(void **state)
{
	(void)state;
	struct demo d, d2;
	struct cfg_error err;
	cfg_set_defaults(demo_table, &d, &err);
	assert_int_equal(cfg_parse_string(demo_table, &d, "[data]\nthreads=7\n[job]\nmemory-budget=3M\n"
					  "timeout=1500ms\n", "x", NULL, &err), 0);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cfg_dump(demo_table, &d, "SUMCASTD_", NULL, f);
	fclose(f);
	assert_non_null(strstr(buf, "[job]"));
	assert_non_null(strstr(buf, "memory-budget = 3M"));
	assert_non_null(strstr(buf, "SUMCASTD_JOB_MEMORY_BUDGET"));
	assert_non_null(strstr(buf, "# bytes for all jobs"));
	/* The dump parses back to the same values. */
	cfg_set_defaults(demo_table, &d2, &err);
	assert_int_equal(cfg_parse_string(demo_table, &d2, buf, "dump", NULL, &err), 0);
	assert_int_equal(d2.threads, 7);
	assert_int_equal(d2.budget, 3ull << 20);
	assert_int_equal(d2.timeout_ms, 1500);
	free(buf);
}

/* CFG_SIZE and CFG_SIZE_AUTO take the same spellings of a size; the
 * latter also "auto" (any case, or empty), which prints back as "auto". */
struct sizes {
	uint64_t chunk, eager;
};

static const struct cfg_entry size_table[] = {
	{ "", "chunk", CFG_SIZE, "256K", "a size", offsetof(struct sizes, chunk), 4096, 64 << 20, false },
	{ "", "eager", CFG_SIZE_AUTO, "auto", "a size or auto", offsetof(struct sizes, eager), 0, 64 << 20,
	  false },
	CFG_ENTRY_END
};

static void test_size_spellings(void **state)
{
	(void)state;
	static const char *const same[] = { "16384", "16K", "16k", "16KiB", "16kib", "16 K", "0.015625M",
					    "16384B" };
	static const char *const bad[] = { "16KB", "16Q", "-1", "1.5", "K", "16K1", "nan" };
	struct sizes z;
	struct cfg_error err;
	char buf[64];

	assert_int_equal(cfg_set_defaults(size_table, &z, &err), 0);
	assert_int_equal(z.chunk, 256 << 10);
	assert_true(z.eager == CFG_SIZE_AUTO_VALUE);
	cfg_format(&size_table[1], &z, buf, sizeof(buf));
	assert_string_equal(buf, "auto");
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		z.chunk = z.eager = 0;
		assert_int_equal(cfg_set(&size_table[0], &z, same[i], &err), 0);
		assert_int_equal(cfg_set(&size_table[1], &z, same[i], &err), 0);
		assert_int_equal(z.chunk, 16384);
		assert_int_equal(z.eager, 16384);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(cfg_set(&size_table[0], &z, bad[i], &err), -EINVAL);
		assert_int_equal(cfg_set(&size_table[1], &z, bad[i], &err), -EINVAL);
		assert_non_null(strstr(err.msg, "auto or a size"));
	}
	/* auto: only where the type says so */
	assert_int_equal(cfg_set(&size_table[0], &z, "auto", &err), -EINVAL);
	static const char *const autos[] = { "auto", "AUTO", "Auto", "" };
	for (size_t i = 0; i < sizeof(autos) / sizeof(autos[0]); i++) {
		z.eager = 0;
		assert_int_equal(cfg_set(&size_table[1], &z, autos[i], &err), 0);
		assert_true(z.eager == CFG_SIZE_AUTO_VALUE);
	}
	/* the range holds for sizes, 0 is one */
	assert_int_equal(cfg_set(&size_table[1], &z, "0", &err), 0);
	assert_int_equal(z.eager, 0);
	assert_int_equal(cfg_set(&size_table[1], &z, "65M", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "out of range"));
	assert_int_equal(cfg_set(&size_table[0], &z, "1K", &err), -EINVAL);
	/* printed as the file takes it, and read back */
	assert_int_equal(cfg_set(&size_table[1], &z, "16KiB", &err), 0);
	cfg_format(&size_table[1], &z, buf, sizeof(buf));
	assert_string_equal(buf, "16K");
	assert_int_equal(cfg_set(&size_table[1], &z, "1000", &err), 0);
	cfg_format(&size_table[1], &z, buf, sizeof(buf));
	assert_string_equal(buf, "1000");
	/* and from the environment */
	setenv("TESTSZ_EAGER", "8KiB", 1);
	setenv("TESTSZ_CHUNK", "8k", 1);
	assert_int_equal(cfg_load(size_table, &z, NULL, "TESTSZ_", NULL, &err), 0);
	assert_int_equal(z.eager, 8192);
	assert_int_equal(z.chunk, 8192);
	setenv("TESTSZ_EAGER", "auto", 1);
	assert_int_equal(cfg_load(size_table, &z, NULL, "TESTSZ_", NULL, &err), 0);
	assert_true(z.eager == CFG_SIZE_AUTO_VALUE);
	unsetenv("TESTSZ_EAGER");
	unsetenv("TESTSZ_CHUNK");
}

static void test_missing_file(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	assert_int_equal(cfg_load(demo_table, &d, "/nonexistent/sumcast.conf", NULL, NULL, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "/nonexistent/sumcast.conf"));
}

/* A directory opens with fopen() and reads as nothing: it must be an
 * error, not a start with the defaults. */
static void test_directory_is_error(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	char dir[] = "/tmp/sc-test-config-XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_int_equal(cfg_load(demo_table, &d, dir, NULL, NULL, &err), -EISDIR);
	assert_non_null(strstr(err.msg, dir));
	assert_non_null(strstr(err.msg, "directory"));
	rmdir(dir);
}

/* The same key twice in a file: an error naming both lines, in the same
 * section or in a second [section] of the same name. */
static void test_duplicate_key(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	cfg_set_defaults(demo_table, &d, &err);
	assert_int_equal(cfg_parse_string(demo_table, &d, "[data]\nthreads = 4\nflag = on\nthreads = 8\n",
					  "dup.ini", NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "dup.ini:4:"));
	assert_non_null(strstr(err.msg, "line 2"));
	assert_non_null(strstr(err.msg, "threads"));
	assert_int_equal(cfg_parse_string(demo_table, &d, "[data]\nthreads = 4\n[job]\nratio = 0.1\n[DATA]\nTHREADS=5\n",
					  "dup2.ini", NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "dup2.ini:6:"));
	assert_non_null(strstr(err.msg, "line 2"));
	/* An indented line continues the value above it (inih): refused too. */
	assert_int_equal(cfg_parse_string(demo_table, &d, "[net]\nprovider = tcp\n  shm\n", "ml.ini",
					  NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "ml.ini:3:"));
	assert_non_null(strstr(err.msg, "line 2"));
	/* Each parse starts afresh: the same text twice is fine. */
	assert_int_equal(cfg_parse_string(demo_table, &d, "[data]\nthreads = 3\n", "a", NULL, &err), 0);
	assert_int_equal(cfg_parse_string(demo_table, &d, "[data]\nthreads = 3\n", "a", NULL, &err), 0);
}

/* A section header without its ']' is reported on its own line, not on
 * the next key (which inih hands over under the previous section). */
static void test_broken_section_line(void **state)
{
	(void)state;
	struct demo d;
	struct cfg_error err;
	cfg_set_defaults(demo_table, &d, &err);
	assert_int_equal(cfg_parse_string(demo_table, &d, "; c\n[data\nthreads = 4\n", "s.ini", NULL, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "s.ini:2:"));
	assert_non_null(strstr(err.msg, "syntax error"));
	assert_int_equal(cfg_parse_string(demo_table, &d, "[job]\nratio = 0.2\n[net\nthreads = 4\n", "t.ini",
					  NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "t.ini:3:"));
	/* A key error before a syntax error is the one reported. */
	assert_int_equal(cfg_parse_string(demo_table, &d, "[job]\nbogus = 1\n[net\n", "u.ini", NULL, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "u.ini:2:"));
}

static int captured_level = -1;
static char captured[256];
static void capture_sink(enum sc_log_level level, const char *file, int line, const char *msg)
{
	(void)file;
	(void)line;
	captured_level = (int)level;
	snprintf(captured, sizeof(captured), "%s", msg);
}

static void test_log(void **state)
{
	(void)state;
	enum sc_log_level l;
	assert_int_equal(sc_log_level_parse("debug", &l), 0);
	assert_int_equal(l, SC_LOG_DEBUG);
	assert_int_equal(sc_log_level_parse("loud", &l), -EINVAL);
	sc_log_set_sink(capture_sink);
	sc_log_set_level(SC_LOG_WARN);
	captured_level = -1;
	SC_INFO("hidden %d", 1);
	assert_int_equal(captured_level, -1);
	errno = EAGAIN;
	SC_WARN("shown %d", 2);
	assert_int_equal(errno, EAGAIN);
	assert_string_equal(captured, "shown 2");
	int n = 0;
	for (int i = 0; i < 3; i++) {
		captured_level = -1;
		SC_LOG_ONCE(SC_LOG_ERROR, "once");
		n += captured_level >= 0;
	}
	assert_int_equal(n, 1);
	n = 0;
	for (int i = 0; i < 5; i++) {
		captured_level = -1;
		SC_LOG_RATELIMIT(SC_LOG_ERROR, 60000, "rl");
		n += captured_level >= 0;
	}
	assert_int_equal(n, 1);
	sc_log_set_sink(NULL);
	sc_log_set_level(SC_LOG_INFO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),      cmocka_unit_test(test_file_values),
		cmocka_unit_test(test_unknown_key_has_line), cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_env_override),  cmocka_unit_test(test_dump_roundtrip),
		cmocka_unit_test(test_missing_file),  cmocka_unit_test(test_log),
		cmocka_unit_test(test_directory_is_error), cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_broken_section_line), cmocka_unit_test(test_size_spellings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
