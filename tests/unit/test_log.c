/* common/log.c's stderr sink: with stderr connected to journald's stream
 * (JOURNAL_STREAM names stderr's device and inode) every line starts with
 * its syslog priority, "<4>" for a warning, so that `journalctl -p warning`
 * selects it; with any other stderr (a terminal, a file, JOURNAL_STREAM of
 * a stream stderr no longer is, or none) lines stay plain.
 * tests/ops/test_systemd.sh checks the same in a real journal. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "log.h"

static char path[64];
static int saved_stderr = -1;

/* stderr into a fresh file; returns its "dev:ino" */
static void stderr_to_file(char *devino, size_t len)
{
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/tmp/sumcast-test-log.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	if (saved_stderr < 0)
		saved_stderr = dup(STDERR_FILENO);
	assert_true(dup2(fd, STDERR_FILENO) == STDERR_FILENO);
	close(fd);
	assert_int_equal(fstat(STDERR_FILENO, &st), 0);
	snprintf(devino, len, "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
}

/* stderr back; the file's text into buf */
static void stderr_restore(char *buf, size_t len)
{
	FILE *f;
	size_t n;

	fflush(stderr);
	assert_true(dup2(saved_stderr, STDERR_FILENO) == STDERR_FILENO);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	sc_log_stderr_probe();
}

static void log_all_levels(void)
{
	sc_log_set_level(SC_LOG_DEBUG);
	SC_ERR("e %d", 1);
	SC_WARN("w %d", 2);
	SC_INFO("i %d", 3);
	SC_DBG("d %d", 4);
	sc_log_set_level(SC_LOG_INFO);
}

static void journal_lines_carry_priority(void **state)
{
	char devino[64], buf[1024];

	(void)state;
	stderr_to_file(devino, sizeof(devino));
	setenv("JOURNAL_STREAM", devino, 1);
	assert_int_equal(sc_log_stderr_probe(), 1);
	log_all_levels();
	errno = EAGAIN;
	SC_WARN("keeps errno");
	assert_int_equal(errno, EAGAIN);
	stderr_restore(buf, sizeof(buf));
	unsetenv("JOURNAL_STREAM");
	if (!strstr(buf, "<3>t: error: e 1\n") || !strstr(buf, "<4>t: warn: w 2\n") ||
	    !strstr(buf, "<6>t: info: i 3\n") || !strstr(buf, "<7>t: debug: test_log.c:") ||
	    !strstr(buf, "<4>t: warn: keeps errno\n"))
		fail_msg("journal lines without their priority prefix:\n%s", buf);
}

static void plain_unless_journal(void **state)
{
	char devino[64], buf[1024];
	unsigned long long dev, ino;

	(void)state;
	/* no JOURNAL_STREAM: a terminal or a file */
	unsetenv("JOURNAL_STREAM");
	stderr_to_file(devino, sizeof(devino));
	assert_int_equal(sc_log_stderr_probe(), 0);
	log_all_levels();
	stderr_restore(buf, sizeof(buf));
	if (strchr(buf, '<') || !strstr(buf, "t: warn: w 2\n") || !strstr(buf, "t: info: i 3\n"))
		fail_msg("no JOURNAL_STREAM, lines should be plain:\n%s", buf);

	/* JOURNAL_STREAM inherited, but stderr redirected elsewhere (a shell
	 * started by the unit, `2>file`): another inode */
	stderr_to_file(devino, sizeof(devino));
	assert_int_equal(sscanf(devino, "%llu:%llu", &dev, &ino), 2);
	snprintf(devino, sizeof(devino), "%llu:%llu", dev, ino + 1);
	setenv("JOURNAL_STREAM", devino, 1);
	assert_int_equal(sc_log_stderr_probe(), 0);
	log_all_levels();
	stderr_restore(buf, sizeof(buf));
	if (strchr(buf, '<') || !strstr(buf, "t: error: e 1\n"))
		fail_msg("JOURNAL_STREAM of another file, lines should be plain:\n%s", buf);

	/* garbage */
	stderr_to_file(devino, sizeof(devino));
	setenv("JOURNAL_STREAM", "journal", 1);
	assert_int_equal(sc_log_stderr_probe(), 0);
	SC_WARN("w");
	stderr_restore(buf, sizeof(buf));
	unsetenv("JOURNAL_STREAM");
	assert_string_equal(buf, "t: warn: w\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(journal_lines_carry_priority),
		cmocka_unit_test(plain_unless_journal),
	};

	sc_log_set_ident("t");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
