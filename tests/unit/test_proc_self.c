/* The process_* figures (daemon/proc_self.c): /proc/PID/stat parsed with a
 * command name that holds spaces and parentheses, malformed lines refused,
 * and this process's own figures move as it opens descriptors. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "proc_self.h"

/* A real line of a process named "a) (b" (fields 22..24: 4242, 123456789, 77). */
static const char LINE[] =
	"1234 (a) (b) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 3 0 4242 123456789 77 "
	"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

static void test_parse(void **state)
{
	uint64_t rss = 0, vsize = 0, ticks = 0;

	(void)state;
	assert_int_equal(proc_stat_parse(LINE, &rss, &vsize, &ticks), 0);
	assert_int_equal(ticks, 4242);
	assert_int_equal(vsize, 123456789);
	assert_int_equal(rss, 77);
}

static void test_malformed(void **state)
{
	uint64_t rss = 1, vsize = 2, ticks = 3;

	(void)state;
	assert_int_not_equal(proc_stat_parse("", &rss, &vsize, &ticks), 0);
	assert_int_not_equal(proc_stat_parse("1 (x S 1 2 3", &rss, &vsize, &ticks), 0);
	assert_int_not_equal(proc_stat_parse("1 (x) S 1 2 3 4 5", &rss, &vsize, &ticks), 0);
	assert_int_not_equal(proc_stat_parse("1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 20 21",
					     &rss, &vsize, &ticks), 0);
	assert_int_equal(rss, 1); /* out-parameters untouched on failure */
	assert_int_equal(vsize, 2);
	assert_int_equal(ticks, 3);
}

static void test_self(void **state)
{
	struct proc_self a, b;
	int fd[3];

	(void)state;
	assert_int_equal(proc_self_read(&a), 0);
	for (int i = 0; i < 3; i++)
		assert_true((fd[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
	assert_int_equal(proc_self_read(&b), 0);
	for (int i = 0; i < 3; i++)
		close(fd[i]);
	assert_int_equal(b.open_fds, a.open_fds + 3);
	assert_true(a.open_fds >= 3); /* stdin, stdout, stderr at least */
	assert_true(a.max_fds >= a.open_fds);
	assert_true(a.resident_bytes > 0 && a.resident_bytes < a.virtual_bytes);
	/* Started within the last hour (a test), not in the future. */
	double now = (double)time(NULL);
	assert_true(a.start_time_seconds <= now + 1 && a.start_time_seconds > now - 3600);
	assert_true(b.start_time_seconds == a.start_time_seconds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_self),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
