/* sumcastctl profile's input: the plugin's SUMCAST_TRACE rows, read and
 * grouped by job (profile_read.c); the profile itself is cmd_profile.c. */
#ifndef SUMCAST_TOOLS_PROFILE_H
#define SUMCAST_TOOLS_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROF_MAX_FILES 65536
#define PROF_MAX_ROWS (64u << 20) /* 64 Mi rows: about 5 GiB held; more is refused */
#define PROF_LINE_MAX (1 << 16)
#define PROF_BUCKETS 40   /* intervals of the run in the time series */
#define PROF_NCLASS 24    /* size classes [4^k, 4^(k+1)) */
#define PROF_SHOW_CHANGES 12
#define PROF_SHOW_RANKS 32
#define PROF_MAX_RANKS (1u << 20) /* a row naming more is not a trace row */
#define PROF_MAX_US 1e13           /* 115 days: a longer time is not a trace row */

enum { C_ALLREDUCE, C_REDUCESCATTER, C_ALLGATHER, C_TREE, C_N };
extern const char *const coll_name[C_N];

struct row {
	uint64_t start_ns, bytes, agg_bytes, redone;
	double time_us, agg_us, ring_us, split; /* agg_us / ring_us NAN: the path had nothing */
	uint32_t rank, seq, epoch;
	uint8_t coll;
	bool ok, adaptive;
};

struct job {
	char id[32];
	unsigned nranks, nranks_min; /* rows that disagree: a mix of communicators */
	struct row *r;
	size_t n, cap;
};

struct prof_traces {
	struct job *j;
	size_t n;
	size_t rows, skipped, files;
	char first_skip[256];
};
extern struct prof_traces P; /* every row read */

/* Reads the rows of the trace files PATHs name (directories, files,
 * prefixes; a file named twice once) into their jobs, lines that are not
 * rows skipped and counted; dies on a path with no file or unreadable. */
void prof_read_paths(char *const *paths, size_t n);

#endif
