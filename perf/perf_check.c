/* sumcast-perf's inputs and references: values that reduce exactly in
 * every order (small integers; powers of two for prod), repeating every 9
 * elements, so that a result is checked without the other ranks' data. */
#include "perf_check.h"

#include <stdbool.h>
#include <string.h>

#include "reduce.h"

size_t perf_type_size(ncclDataType_t t)
{
	static const size_t s[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2 };
	return s[t];
}

static int64_t in_val(const struct perf_data *d, int rank, size_t i)
{
	bool uns = d->t == ncclUint8 || d->t == ncclUint32 || d->t == ncclUint64;

	if (d->op == ncclProd) {
		int m = (int)((i + (size_t)rank) % 3);
		return m == 0 ? 2 : m == 1 || uns ? 1 : -1;
	}
	int64_t v = (int64_t)((i * 7 + (size_t)rank * 3 + 1) % 9);
	return uns ? v : v - 4;
}

static void put(ncclDataType_t t, void *buf, size_t i, int64_t v)
{
	switch (t) {
	case ncclInt8: case ncclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case ncclInt32: case ncclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case ncclInt64: case ncclUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case ncclFloat16: ((uint16_t *)buf)[i] = sc_f32_to_f16((float)v); break;
	case ncclBfloat16: ((uint16_t *)buf)[i] = sc_f32_to_bf16((float)v); break;
	case ncclFloat32: ((float *)buf)[i] = (float)v; break;
	case ncclFloat64: ((double *)buf)[i] = (double)v; break;
	default: break;
	}
}

void perf_data_init(struct perf_data *d)
{
	for (size_t k = 0; k < 9; k++) {
		int64_t acc = in_val(d, 0, k);
		for (int r = 1; r < d->nodes; r++) {
			int64_t v = in_val(d, r, k);
			acc = d->op == ncclSum	  ? acc + v
			      : d->op == ncclProd ? acc * v
			      : d->op == ncclMax  ? (v > acc ? v : acc)
						  : (v < acc ? v : acc);
		}
		put(d->t, d->in9[k], 0, in_val(d, d->node, k));
		put(d->t, d->ref9[k], 0, acc);
	}
}

static void fill(const struct perf_data *d, uint8_t *dst, size_t first, size_t n)
{
	size_t es = perf_type_size(d->t);
	for (size_t i = 0; i < n; i++)
		memcpy(dst + i * es, d->in9[(first + i) % 9], es);
}

static uint64_t wrong(const struct perf_data *d, const uint8_t *res, size_t first, size_t n)
{
	size_t es = perf_type_size(d->t);
	uint64_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += memcmp(res + i * es, d->ref9[(first + i) % 9], es) != 0;
	return bad;
}

static uint8_t ag_byte(int rank, size_t j)
{
	return (uint8_t)(rank * 31 + (int)(j % 251) * 7 + 1);
}

/* ---- one checked collective ---- */

void perf_prepare(const struct perf_data *d, int coll, size_t bytes)
{
	size_t es = perf_type_size(d->t);
	if (coll == C_AR) {
		fill(d, d->send, 0, bytes / es);
		memset(d->recv, 0xA5, bytes + 64);
	} else if (coll == C_RS) {
		size_t bpr = bytes / es / (size_t)d->nodes;
		fill(d, d->send, 0, bpr * (size_t)d->nodes);
		memset(d->recv, 0xA5, bpr * es + 64);
	} else {
		size_t bpr = bytes / (size_t)d->nodes;
		for (size_t j = 0; j < bpr; j++)
			d->send[j] = ag_byte(d->node, j);
		memset(d->recv, 0xA5, bpr * (size_t)d->nodes + 64);
	}
}

uint64_t perf_count_wrong(const struct perf_data *d, int coll, size_t bytes)
{
	size_t es = perf_type_size(d->t);
	uint64_t bad = 0;
	if (coll == C_AR) {
		bad = wrong(d, d->recv, 0, bytes / es);
		bad += d->recv[bytes / es * es] != 0xA5; /* written past the end */
	} else if (coll == C_RS) {
		size_t bpr = bytes / es / (size_t)d->nodes;
		bad = wrong(d, d->recv, (size_t)d->node * bpr, bpr);
		bad += d->recv[bpr * es] != 0xA5;
	} else {
		size_t bpr = bytes / (size_t)d->nodes;
		for (int k = 0; k < d->nodes; k++)
			for (size_t j = 0; j < bpr; j++)
				bad += d->recv[(size_t)k * bpr + j] != ag_byte(k, j);
		bad += d->recv[bpr * (size_t)d->nodes] != 0xA5;
	}
	return bad;
}
