/* Counters and histograms, one writer per set (stats.h). */
#include "stats.h"

#include <math.h>

const double hist_reduce_le[HIST_BUCKETS] = { 1e-6, 2.5e-6, 5e-6,  1e-5, 2.5e-5, 5e-5, 1e-4,
					      2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 1e-1, INFINITY };
const double hist_straggler_le[HIST_BUCKETS] = { 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2,
						 5e-2, 0.1,  0.5,  1,    5,    30,   INFINITY };

const char *err_kind_name(unsigned kind)
{
	static const char *const names[] = { "foreign_source", "truncated", "bad_header",
					     "recv_error", "send_error", "no_immediate", "cq",
					     "handshake_timeout", "connection_limit",
					     "accept", "unexpected", "unsealed" };
	if (kind >= 1 && kind <= WIRE_CODE_MAX)
		return wire_code_name((enum wire_code)kind);
	if (kind > WIRE_CODE_MAX && kind < ERR_KIND_COUNT)
		return names[kind - WIRE_CODE_MAX - 1];
	return "unknown";
}

static void hist_acc(struct hist *s, const struct hist *o)
{
	for (int i = 0; i < HIST_BUCKETS; i++)
		ctr_add(&s->bucket[i], ctr_get(&o->bucket[i]));
	ctr_add(&s->count, ctr_get(&o->count));
	ctr_add(&s->sum_ns, ctr_get(&o->sum_ns));
}

void stats_accumulate(struct stats *sum, const struct stats *one)
{
	ctr_add(&sum->rx_bytes, ctr_get(&one->rx_bytes));
	ctr_add(&sum->tx_bytes, ctr_get(&one->tx_bytes));
	ctr_add(&sum->chunks, ctr_get(&one->chunks));
	ctr_add(&sum->result_holds, ctr_get(&one->result_holds));
	ctr_add(&sum->results_spread, ctr_get(&one->results_spread));
	ctr_add(&sum->mc_results, ctr_get(&one->mc_results));
	ctr_add(&sum->mc_datagrams, ctr_get(&one->mc_datagrams));
	ctr_add(&sum->mc_tx_bytes, ctr_get(&one->mc_tx_bytes));
	ctr_add(&sum->mc_nacks, ctr_get(&one->mc_nacks));
	ctr_add(&sum->mc_repairs, ctr_get(&one->mc_repairs));
	ctr_add(&sum->mc_nack_late, ctr_get(&one->mc_nack_late));
	ctr_add(&sum->jobs_drained, ctr_get(&one->jobs_drained));
	ctr_add(&sum->jobs_rejoined, ctr_get(&one->jobs_rejoined));
	ctr_add(&sum->joins, ctr_get(&one->joins));
	ctr_add(&sum->jobs_started, ctr_get(&one->jobs_started));
	ctr_add(&sum->jobs_finished, ctr_get(&one->jobs_finished));
	for (int i = 0; i <= WIRE_CODE_MAX; i++) {
		ctr_add(&sum->refused[i], ctr_get(&one->refused[i]));
		ctr_add(&sum->aborted[i], ctr_get(&one->aborted[i]));
	}
	for (int i = 0; i < EAGAIN_OPS; i++)
		ctr_add(&sum->eagain[i], ctr_get(&one->eagain[i]));
	for (int i = 0; i < ERR_KIND_COUNT; i++)
		ctr_add(&sum->errors[i], ctr_get(&one->errors[i]));
	hist_acc(&sum->reduce, &one->reduce);
	hist_acc(&sum->straggler, &one->straggler);
}
