/* /proc/PID/status fields (proc.h). */
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long long sc_proc_status(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t fl = strlen(field);
	long long v = -1;
	FILE *f;

	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':') {
			v = strtoll(line + fl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}
