/* A process's /proc/PID/status fields, for the tests' and benches' memory
 * and thread figures: one reader instead of one per test. */
#ifndef SC_TEST_PROC_H
#define SC_TEST_PROC_H

#include <sys/types.h>

/* The number after "field:" in /proc/PID/status (pid 0: this process),
 * e.g. "VmRSS" and "VmHWM" in kB, "Threads"; -1 when unreadable. */
long long sc_proc_status(pid_t pid, const char *field);

#endif
