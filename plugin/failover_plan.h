/* Failover's decisions as pure functions: what the nodes agreed on, and
 * what this node knows of its chunks, in; what is to happen to each chunk
 * and request, out. No fabric, no client, no clock: failover.c gathers the
 * inputs (the client library, client.h) and runs the agreement rounds over
 * the ring; failover_repair.c carries out what these decide. Tested alone
 * by tests/plugin/test_failover_plan.c.
 *
 * Where they sit in the flow of a fault (failover.c has the whole story):
 *   round 1  every node reports its failed set, its low mark per failed
 *            aggregator and its next request index (fo_plan_round1_*): the
 *            same set everywhere goes on to round 2, else every node fences
 *            the union and round 1 runs again;
 *   round 2  per chunk of the window from the agreed low mark, the lowest
 *            rank holding its result and the lowest lacking it
 *            (fo_plan_round2_*): each chunk's fate (fo_plan_fate);
 *   decide   this node's part in the repair of every chunk and request
 *            (fo_plan_decide, fo_plan_req), and the counts the fault's WARN
 *            line gives;
 *   after    requests from the agreed index on use the surviving set
 *            (fo_plan_epoch_next, fo_plan_live_for). */
#ifndef SUMCAST_PLUGIN_FAILOVER_PLAN_H
#define SUMCAST_PLUGIN_FAILOVER_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"

/* No rank, no chunk: what a min-allreduce leaves where no node reported. */
#define FO_NONE INT64_MAX

/* ---- epochs: which aggregators a request uses ---- */

/* From request `from` on, the aggregator part is sharded over `live`. */
struct fo_epoch {
	uint64_t from;
	uint64_t live;
};

/* The aggregator set of request idx among epochs e[0 .. n) (n >= 1, e[0]
 * the connect-time set), and its epoch (the index in e). */
uint64_t fo_plan_live_for(const struct fo_epoch *e, size_t n, uint64_t idx, uint32_t *epoch);
/* The epoch after `set` failed or drained and `back` came back: from
 * request `from` (round 1's next index) on, prev's aggregators less `set`,
 * with `back` (none left: the ring alone). */
struct fo_epoch fo_plan_epoch_next(const struct fo_epoch *prev, uint64_t set, uint64_t back,
				   uint64_t from);

/* ---- round 1 ---- */

/* int64 values of round 1 for naggs aggregators. */
size_t fo_plan_round1_len(size_t naggs);
/* What one node reports in round 1 besides its failed set. */
struct fo_round1_in {
	uint64_t fenced;   /* the aggregators it saw fail and not yet agreed on */
	const uint64_t *lo;/* lo[a] for each of them: the lowest chunk whose result it
			    * lacks (client_agg_lo; not read for the others) */
	uint64_t next;     /* the requests it issued */
	uint64_t tried;    /* aggregators it joined again (or tried to) since the last agreement */
	uint64_t joined;   /* of those, READY here */
	uint64_t drain;    /* aggregators that asked it to move off (DRAIN) */
	uint64_t left;     /* drained aggregators it has left (LEAVE) */
};
/* This node's values. */
void fo_plan_round1_fill(size_t naggs, const struct fo_round1_in *in, int64_t *v);
struct fo_round1 {
	uint64_t any;  /* failed on some node */
	uint64_t all;  /* failed on every node */
	uint64_t lo[CLIENT_AGGS_MAX]; /* the lowest low mark any node reported (FO_NONE: none) */
	uint64_t next; /* S: every request any node issued has an index below it */
	uint64_t next_min; /* every node issued every request below it */
	uint64_t tried;    /* joined again (or tried) on some node */
	uint64_t joined;   /* READY again on every node */
	uint64_t drain;    /* asked some node to move off */
	uint64_t left;     /* drained and left by every node: its old membership is over */
};
/* The agreed (element-wise minimum over the nodes) values. */
void fo_plan_round1_read(size_t naggs, const int64_t *v, struct fo_round1 *out);
/* true: every node reported the same set, round 2 decides on it. false:
 * they did not; every node fences r->any and round 1 runs again. */
bool fo_plan_round1_agreed(const struct fo_round1 *r);
/* Of the aggregators out of use (`out`: failed and decided, or drained and
 * left), those taken back from request r->next on: READY again on every
 * node, not failing again now, and every node past out_from[a] (the first
 * request that stopped using it: a request below it that a node has yet to
 * issue would be sharded over the old membership). The rest of r->tried
 * is left out again (each node fences its new membership). */
uint64_t fo_plan_back(size_t naggs, const struct fo_round1 *r, uint64_t out, const uint64_t *out_from);
/* The aggregators that move off at r->next without a repair: asked to by a
 * DRAIN on some node, in use (live), not failed. */
uint64_t fo_plan_drain(const struct fo_round1 *r, uint64_t live);

/* ---- round 2 ---- */

/* What every node agreed on for one failed aggregator: every node had the
 * result of every chunk below lo; of the `w` chunks from lo on, holder[k]
 * is the lowest rank that has chunk lo + k (FO_NONE: none) and lacker[k]
 * the lowest rank that does not (FO_NONE: none). */
struct fo_dead {
	bool agreed;
	uint32_t epoch;
	uint64_t lo;
	uint32_t w;
	int64_t *holder, *lacker;
	char why[160];
};

/* int64 values of round 2: 2 w[a] for each aggregator a of set, in index
 * order (at least 1: an agreement is never empty). */
size_t fo_plan_round2_len(size_t naggs, uint64_t set, const uint32_t *w);
/* This node's values for chunk lo + j of one aggregator whose part of the
 * values is v (window w): held (client_chunk_held), lacks
 * (client_chunk_lacks). A window op's chunk may be neither: a
 * reduce-scatter non-owner wants no result; an allgather's source holds it
 * once its empty result came. */
void fo_plan_round2_fill(int64_t *v, uint32_t w, uint32_t j, uint32_t rank, bool held, bool lacks);
/* The agreed values of that aggregator into d (holder and lacker
 * allocated here, freed by the caller): 0 or -ENOMEM. */
int fo_plan_round2_read(const int64_t *v, uint64_t lo, uint32_t w, struct fo_dead *d);

/* What happens to chunk c of a failed aggregator, the same on every node. */
enum fo_fate {
	FO_HELD = 0, /* every node that wants it has it: nothing moves */
	FO_COPY,     /* some hold it, some lack it: copied from its lowest holder along the ring */
	FO_REDO,     /* no node holds it: recomputed over the ring */
};
enum fo_fate fo_plan_fate(const struct fo_dead *d, uint64_t c);

/* ---- decide: this node's part ---- */

/* What this node knows of one chunk of a failed aggregator (client.h). */
struct fo_chunk {
	bool held;     /* client_chunk_held */
	bool lacks;    /* client_chunk_lacks */
	bool retained; /* held, and its data is still here (client_chunk_data) */
	bool in_recv;  /* held, its data lies in its request's receive buffer */
	bool in_send;  /* held, its data is its request's send data (an allgather source) */
	bool known;    /* client_chunk_info found it */
	bool got;      /* known: its result (or empty result) arrived here */
	bool issued;   /* known: in flight in a client request here */
	bool gives;    /* known: this node has its contribution (send data or retention) */
	enum client_role role; /* known: its role here */
	size_t len;    /* known: its bytes */
	int slot;      /* the collnet request in flight here it belongs to, -1: none */
	size_t range_len; /* slot >= 0: its bytes in that request */
};

/* A decision, handed to the caller in the order the plan takes them. */
enum fo_act_kind {
	FO_ACT_COPY,       /* copy chunk c along the ring */
	FO_ACT_END,        /* held everywhere that wants it: end chunk c in its request here */
	FO_ACT_REDO_RUN,   /* recompute an allreduce's chunks [c, c + n) over the ring */
	FO_ACT_REDO_CHUNK, /* recompute a window op's chunk c alone over the ring */
};

/* This node's part in a copy. */
enum fo_copy_here {
	FO_COPY_SENDS,  /* holds it: sends its own copy on (receives into a sink) */
	FO_COPY_TAKES,  /* lacks it: receives it into its request */
	FO_COPY_PASSES, /* wants none of it: receives it into a buffer and sends it on */
};

struct fo_act {
	enum fo_act_kind kind;
	size_t agg;
	uint64_t c, n;   /* chunks [c, c + n) */
	int slot;        /* the request in flight here it works for, -1: none */
	uint32_t run;    /* REDO_RUN: its number among its request's runs on agg (tag) */
	/* COPY */
	uint32_t k;      /* c - lo */
	int64_t root;    /* the holder the copy starts from */
	enum fo_copy_here here;
	bool rx, tx;     /* receives from the previous node, sends to the next */
	bool tx_after_rx;/* sends what it received */
	bool keep_req;   /* the request stays this copy's until it is done */
	bool from_recv;  /* FO_COPY_SENDS: its copy lies in the request's receive buffer */
	bool from_send;  /* FO_COPY_SENDS: its copy is the request's send data (a source) */
	/* COPY, REDO_CHUNK: the chunk ends in its request here when done */
	bool settle;
	/* REDO_CHUNK */
	bool take;       /* the sum goes to the request here; false: dropped */
	bool zero;       /* no contribution here (a TAKE): zeros */
};

/* The counts the fault's WARN line gives. */
struct fo_counts {
	uint64_t lacking;     /* chunks this node lacks, copied from another node */
	size_t copy_bytes;
	uint64_t redo_chunks; /* chunks recomputed over the ring */
	size_t redo_bytes;
	uint64_t kept;        /* of those, window chunks whose request completed here */
	uint64_t passed;      /* copies this node passes on for others */
};

/* This node, as the plan reads it (failover_repair.c: the client's state;
 * the unit test: a model of several nodes). */
struct fo_view {
	void *ctx;
	uint32_t rank, nranks;
	size_t naggs;
	uint32_t nslots; /* request slots */
	/* Chunk c of aggregator agg here. */
	void (*chunk)(void *ctx, size_t agg, uint64_t c, struct fo_chunk *out);
	/* Whether slot holds a request in flight with a part on agg; then
	 * whether it is a window op, and its chunks [*c0, *c0 + *n) there. */
	bool (*req)(void *ctx, uint32_t slot, size_t agg, bool *window, uint64_t *c0, uint64_t *n);
	/* The bytes of slot's request that its chunks [c0, c0 + n) on agg cover. */
	size_t (*span)(void *ctx, uint32_t slot, size_t agg, uint64_t c0, uint64_t n);
	/* Carries a decision out: 0, or an error that ends the plan. */
	int (*act)(void *ctx, const struct fo_act *a);
	/* A chunk the plan cannot repair here ("chunk c of aggregator agg"
	 * + what); the plan then returns -EPROTO. */
	void (*refuse)(void *ctx, size_t agg, uint64_t c, const char *what);
};

/* Round 2 decided `set` (deads[a] for each a in it): this node's part, per
 * aggregator: first the window's chunks in order (a copy where some node
 * holds it and some lacks it; where it is held everywhere that wants it, a
 * node that wants none of it ends it in its request), then every request
 * in flight here with a part there (an allreduce recomputes each run of
 * consecutive chunks no node holds as one ring allreduce; a window op each
 * such chunk alone), then the window chunks no node holds whose request
 * completed here (recomputed from what this node kept). Counts into *n.
 * 0 or the first error. */
int fo_plan_decide(const struct fo_view *v, const struct fo_dead *deads, uint64_t set,
		   struct fo_counts *n);
/* The request in slot, issued after the decision with an index below its
 * epoch's start (another node issued it first), has a part on aggregators
 * of `dead`: it redoes that part, as fo_plan_decide does for a request in
 * flight. 0 or the first error. */
int fo_plan_req(const struct fo_view *v, const struct fo_dead *deads, uint64_t dead, uint32_t slot,
		struct fo_counts *n);

/* The pieces fo_plan_decide is made of, for the caller and the tests: */
/* this node's part in the copy of window chunk lo + k (fate FO_COPY):
 * 0, or -EPROTO with *what (it holds it but kept no data, or lacks it
 * outside any request) */
int fo_plan_copy(const struct fo_dead *d, uint32_t k, uint32_t rank, uint32_t nranks,
		 const struct fo_chunk *ch, struct fo_act *out, const char **what);
/* a window op's chunk no node holds, recomputed alone: 0, or -EPROTO with
 * *what (this node cannot take part) */
int fo_plan_redo_chunk(const struct fo_chunk *ch, struct fo_act *out, const char **what);
/* the next run of consecutive FO_REDO chunks in [c0, c0 + n) from *from
 * on: true and [*rc0, *rc0 + *rn), *from moved past it; false: none left */
bool fo_plan_redo_run(const struct fo_dead *d, uint64_t c0, uint64_t n, uint64_t *from,
		      uint64_t *rc0, uint64_t *rn);

#endif
