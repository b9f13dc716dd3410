/* sumcast-perf's data: what each rank sends, and the check of what comes
 * back (perf_check.c). */
#ifndef SUMCAST_PERF_CHECK_H
#define SUMCAST_PERF_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "host.h"

enum { C_AR, C_RS, C_AG }; /* allreduce, ReduceScatter, AllGather */

struct perf_data {
	ncclDataType_t t;
	ncclRedOp_t op;
	int nodes, node;
	uint8_t *send, *recv;
	uint8_t in9[9][8], ref9[9][8]; /* this rank's inputs, the results (perf_data_init) */
};

size_t perf_type_size(ncclDataType_t t);
/* The input and reference tables for d's type, op, nodes and node. */
void perf_data_init(struct perf_data *d);
/* The inputs of a checked collective of `bytes` (coll: C_AR, C_RS, C_AG)
 * in d->send, and d->recv poisoned past its end. */
void perf_prepare(const struct perf_data *d, int coll, size_t bytes);
/* Its wrong elements after it (and a byte written past the end). */
uint64_t perf_count_wrong(const struct perf_data *d, int coll, size_t bytes);

#endif
