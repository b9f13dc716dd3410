/* The assertions of the process tests (tests/functional, tests/plugin,
 * tests/ops): real daemons and ranks in processes, where a failed check
 * prints one line, "FAIL file:line: condition: what", and either the
 * process goes on (CHECK: the test reports every failure, th_summary turns
 * the count into the exit code) or it ends at once with exit code 1
 * (REQUIRE: a rank, or a step later ones depend on, cannot go on). Unit
 * tests use cmocka instead (tests/unit, tests/functional/client_proto.c,
 * tests/plugin/test_*.c). */
#ifndef SC_TEST_CHECK_H
#define SC_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

/* checks passed (a REQUIRE in a polling loop counts each pass), and failed */
extern unsigned long long th_passed;
extern int th_failed;
/* Put before every FAIL line, e.g. "[rank 2] "; empty unless set. */
extern char th_who[32];

/* Counts the failure and prints its line. */
void th_fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (cond)                                                    \
			th_passed++;                                         \
		else                                                         \
			th_fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__); \
	} while (0)

#define REQUIRE(cond, ...)                                                   \
	do {                                                                 \
		if (cond) {                                                  \
			th_passed++;                                         \
		} else {                                                     \
			th_fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__); \
			exit(1);                                             \
		}                                                            \
	} while (0)

/* Prints "NAME: N passed, N failed" and returns the exit code (0 or 1). */
int th_summary(const char *name);
/* Prints "SKIP: why" and exits 77, ctest's skipped. */
void th_skip(const char *why) __attribute__((noreturn));

#endif
