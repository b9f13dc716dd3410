/* The process collector's figures of this process, from /proc/self, named
 * as every Prometheus client library exports them (process_*): resident
 * and virtual memory, open and allowed descriptors, start time. */
#ifndef SUMCASTD_PROC_SELF_H
#define SUMCASTD_PROC_SELF_H

#include <stdint.h>

struct proc_self {
	uint64_t resident_bytes;   /* rss pages x page size (/proc/self/stat) */
	uint64_t virtual_bytes;    /* vsize (/proc/self/stat) */
	uint64_t open_fds;         /* entries of /proc/self/fd */
	uint64_t max_fds;          /* RLIMIT_NOFILE, soft */
	double start_time_seconds; /* Unix time: btime (/proc/stat) + starttime ticks */
};

/* Parses the text of /proc/PID/stat into rss pages, vsize bytes and
 * starttime clock ticks since boot. 0 or -EINVAL. The command name
 * (field 2) may hold spaces and parentheses: fields are counted from the
 * last ')'. */
int proc_stat_parse(const char *text, uint64_t *rss_pages, uint64_t *vsize, uint64_t *start_ticks);

/* Reads the lot; 0 or a negative errno (out is written only on success). */
int proc_self_read(struct proc_self *out);

#endif
