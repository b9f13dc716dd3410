/* The process tests' assertions (check.h). */
#include "check.h"

#include <stdarg.h>

unsigned long long th_passed;
int th_failed;
char th_who[32];

void th_fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	th_failed++;
	fprintf(stderr, "%sFAIL %s:%d: %s: ", th_who, file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int th_summary(const char *name)
{
	printf("%s: %llu passed, %d failed\n", name, th_passed, th_failed);
	return th_failed ? 1 : 0;
}

void th_skip(const char *why)
{
	printf("SKIP: %s\n", why);
	exit(77);
}
