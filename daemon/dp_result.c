/* Result delivery: one tagged send per rank (unicast), and for jobs with a
 * multicast group (fabric.multicast) one send of the whole result to the
 * group instead of one per rank that takes it.
 *
 * Multicast (docs/daemon.md, "Multicast results"). A result goes to the
 * group when at least two ranks take it (mode all or take: a rule the ranks
 * apply too, client/client_mcast.c, so they know whether to post a receive); every
 * other rank gets its unicast RESULT as before (a give rank's empty one; a
 * rank that sent a NACK, the whole result). Datagrams may be lost, so the slot keeps the result until every
 * rank has it: a rank sends chunk seq + window only once it has seq's result
 * (the credit rule), so the slot stays SENDING, its accumulator intact,
 * until all nranks contributions of seq + window wait as pending. That is
 * also the flow control: the group never runs more than a window ahead of
 * its slowest rank. A NACK for seq while the slot holds it (slot_nack,
 * dp_slot.c) makes the rank's unicast due again (result_repair).
 *
 * Spread ([data] result-spread, wire.h version 8). In a job of several
 * lanes a result of at most j->spread payload bytes goes to rank r from
 * lane (s + r) % lanes (wire_result_lane), so the N sends of a small
 * result, which one thread would make one after the other, are shared by
 * the job's threads. The lane that reduced slot s keeps its own ranks' sends
 * and hands every other lane one spread_item: a copy of the result (sealed
 * as sent) and the ranks it is for. The item names the job by id and handle
 * (a job that ends and joins again under its id gets another handle) and
 * the lane by index, not by pointer: the receiving thread finds its lane on
 * its own list (dp_spread_run) and drops an item whose lane has gone. So the
 * handing thread reads of the other lanes only what never changes after
 * creation (their chain and threads), and the receiving one only its own.
 * The slot is done with those ranks at the handover (each is injected: the
 * limit is below every lane's inject size), and a rank sends chunk seq +
 * window only once it has seq's result, so a slot never has two items for
 * one lane out at once. A send the provider refuses (-FI_EAGAIN) waits in
 * its item for the thread's next pass while the items after it go on; one
 * refused for the job's timeout fails the job (timeout), as a result send
 * of the slot's own lane that never completes does (dp_job.c). Not for
 * multicast jobs (one lane). */
#include "dp_result.h"

#include <arpa/inet.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "dp.h"
#include "log.h"
#include "mcast_link.h"
#include "seal.h"

static int result_init(struct dthread *t, struct job *j)
{
	for (uint32_t s = 0; s < j->window; s++)
		for (uint32_t r = 0; r < j->nranks; r++) {
			struct rslot *rs = job_rslot(j, s, r);
			rs->rop = (struct dop){ .job = j, .slot = s, .rank = (uint16_t)r, .kind = DOP_RECV };
			rs->sop = (struct dop){ .job = j, .slot = s, .rank = (uint16_t)r, .kind = DOP_SEND };
			rs->nop = (struct dop){ .job = j, .slot = s, .rank = (uint16_t)r, .kind = DOP_NACK };
		}
	if (!j->mc)
		return 0;
	struct sockaddr_in g = { .sin_family = AF_INET, .sin_port = htons(j->mc_port),
				 .sin_addr.s_addr = htonl(j->mc_group) };
	char why[256];
	j->mc_tx = malloc(sizeof(*j->mc_tx));
	if (!j->mc_tx)
		return -FI_ENOMEM;
	int rc = sc_mc_sender_open(j->mc_tx, j->mc_via, t->mc_iface, &g, j->mc_payload, why, sizeof(why));
	if (rc) {
		SC_ERR("job 0x%llx: %s", (unsigned long long)j->id, why);
		free(j->mc_tx);
		j->mc_tx = NULL;
		return rc;
	}
	return 0;
}

/* Every send of the result completed and nothing keeps it: the slot may
 * take its next chunk. */
static bool result_done(const struct job *j, const struct slot *s)
{
	return s->sends_left == 0 && s->send_next == j->nranks && (!s->mc || s->npending == j->nranks);
}

/* Once per result: to the group or not, and who gets a unicast. */
static int result_plan(struct dthread *t, struct job *j, struct slot *s)
{
	size_t full = s->len + (j->sealed ? SC_SEAL_TAG : 0);
	uint32_t takers = 0;

	for (uint32_t r = 0; r < j->nranks && j->mc; r++)
		takers += job_rslot(j, s->index, r)->wants;
	s->mc = takers >= 2;
	for (uint32_t r = 0; r < j->nranks; r++) {
		struct rslot *rs = job_rslot(j, s->index, r);
		rs->uni = !(s->mc && rs->wants && !rs->nack);
	}
	if (!s->mc)
		return 0;
	const struct sc_mc_hdr r = { .job = j->handle, .key = j->mc_key, .chunk = s->chunk, .imm = s->imm,
				     .len = (uint32_t)full };
	uint64_t dg = sc_mc_sender_datagrams(j->mc_tx);
	if (sc_mc_sender_send(j->mc_tx, &r, s->acc))
		return -FI_EIO;
	ctr_add(&t->stats.mc_results, 1);
	ctr_add(&t->stats.mc_datagrams, sc_mc_sender_datagrams(j->mc_tx) - dg);
	ctr_add(&t->stats.mc_tx_bytes, s->len);
	ctr_add(&t->stats.tx_bytes, s->len);
	ctr_add(&j->bytes_out, s->len);
	return 0;
}

/* Held to the job's pace (pacer.h): a token bucket of result bytes,
 * refilled at pace_bps up to 50 ms of it; a result may go while the bucket
 * is not in debt, and charges what it carries. A held slot waits on the
 * retry list. True: hold it. */
static bool result_paced(struct job *j)
{
	uint64_t bps = atomic_load_explicit(&j->pace_bps, memory_order_relaxed);
	uint64_t now;

	if (!bps) {
		j->pace_ns = 0;
		return false;
	}
	now = sc_now_ns();
	if (!j->pace_ns) {
		j->pace_ns = now;
		j->pace_tokens = 0;
	}
	double add = (double)(now - j->pace_ns) * (double)bps / 1e9, depth = (double)bps / 20;
	double tokens = (double)j->pace_tokens + add;
	j->pace_tokens = (int64_t)(tokens < depth ? tokens : depth);
	j->pace_ns = now;
	return j->pace_tokens < 0;
}

/* What a planned result will carry, counted as bytes_out counts it. */
static uint64_t result_bytes(struct job *j, const struct slot *s)
{
	uint64_t n = s->mc ? s->len : 0;

	for (uint32_t r = 0; r < j->nranks; r++) {
		const struct rslot *rs = job_rslot(j, s->index, r);
		n += rs->uni && rs->wants ? s->len : 0;
	}
	return n;
}

/* What rank r gets of a result (acc, full bytes, chunk and imm its
 * seal's): the result where it takes it (wants); else, a rank in mode GIVE,
 * an empty result, its credit, in a sealed job an empty message sealed for
 * that rank alone (its own IV: the result's is the whole job's) in tagbuf.
 * 0 or -FI_EIO. */
static int result_msg(struct job *j, uint32_t r, bool wants, const void *acc, size_t full,
		      uint64_t chunk, uint32_t imm, uint8_t tagbuf[SC_SEAL_TAG], const void **buf,
		      size_t *len)
{
	*buf = acc;
	*len = wants ? full : 0;
	if (wants || !j->sealed)
		return 0;
	*buf = tagbuf;
	*len = SC_SEAL_TAG;
	return sc_seal(&j->seal, SC_SEAL_RESULT, (uint16_t)r, chunk, imm, NULL, 0, tagbuf) ? -FI_EIO : 0;
}

/* ---- spread (above) ---- */

#define SPREAD_WANTS 0x80000000u /* ranks[]: the rank takes the result, not an empty one */

struct spread_item {
	STAILQ_ENTRY(spread_item) link;
	uint64_t job;   /* the job's id */
	uint64_t chunk; /* of the result (a give rank's empty result is sealed for it) */
	uint64_t refused_ns; /* its next send refused since (0: not refused) */
	uint32_t handle; /* the job's */
	uint32_t lane, slot, imm, len, full; /* full: len + the seal's tag */
	uint32_t nranks, next; /* ranks listed; the first not sent yet */
	uint8_t *data;  /* full bytes, after ranks[] */
	uint32_t ranks[]; /* rank | SPREAD_WANTS */
};

static void spread_push(struct dthread *o, struct spread_item *it)
{
	pthread_mutex_lock(&o->spread_lock);
	STAILQ_INSERT_TAIL(&o->spread_in, it, link);
	atomic_store(&o->spread_pending, 1);
	pthread_mutex_unlock(&o->spread_lock);
	/* seq_cst against idle_wait's store of waiting and load of pending:
	 * either it sees the item or this sees it waiting */
	if (atomic_load(&o->waiting)) {
		uint64_t one = 1;
		(void)!write(o->wake_fd, &one, sizeof(one));
	}
}

/* Slot s's result, planned: the sends that are other lanes' go to their
 * threads (rslot uni cleared, counted there), this lane keeps its own. */
static int result_spread(struct job *j, struct slot *s)
{
	size_t full = s->len + (j->sealed ? SC_SEAL_TAG : 0);
	uint32_t count[WIRE_LANES_MAX] = { 0 };
	struct spread_item *it[WIRE_LANES_MAX] = { 0 };

	for (uint32_t r = 0; r < j->nranks; r++)
		if (job_rslot(j, s->index, r)->uni)
			count[wire_result_lane(s->index, r, j->lanes, j->spread, s->len)]++;
	count[j->lane] = 0;
	for (uint32_t k = 0; k < j->lanes; k++) {
		if (!count[k])
			continue;
		it[k] = malloc(sizeof(*it[k]) + count[k] * sizeof(uint32_t) + full);
		if (!it[k]) {
			while (k--)
				free(it[k]);
			return -FI_ENOMEM;
		}
		*it[k] = (struct spread_item){ .job = j->id, .handle = j->handle, .chunk = s->chunk, .lane = k,
					       .slot = s->index, .imm = s->imm, .len = s->len,
					       .full = (uint32_t)full };
		it[k]->data = (uint8_t *)&it[k]->ranks[count[k]];
		memcpy(it[k]->data, s->acc, full);
	}
	for (uint32_t r = 0; r < j->nranks; r++) {
		struct rslot *rs = job_rslot(j, s->index, r);
		uint32_t k = wire_result_lane(s->index, r, j->lanes, j->spread, s->len);
		if (!it[k] || !rs->uni)
			continue;
		it[k]->ranks[it[k]->nranks++] = r | (rs->wants ? SPREAD_WANTS : 0);
		rs->uni = false;
	}
	JOB_FOR_LANES(j->lead, l)
		if (it[l->lane])
			spread_push(l->thread, it[l->lane]);
	return 0;
}

/* The lane of this thread an item is for: NULL when it has gone (reaped)
 * or ends (dead, removing). */
static struct job *spread_lane(struct dthread *t, const struct spread_item *it)
{
	struct job *j;

	SLIST_FOREACH(j, &t->jobs, dlink)
		if (j->id == it->job && j->handle == it->handle && j->lane == it->lane)
			return j->dead || j->removing || !j->fab ? NULL : j;
	return NULL;
}

/* An item's sends from lane j, in rank order; -FI_EAGAIN: the rest wait
 * for the next pass. */
static int spread_send(struct dthread *t, struct job *j, struct spread_item *it)
{
	for (; it->next < it->nranks; it->next++) {
		uint32_t r = it->ranks[it->next] & ~SPREAD_WANTS;
		bool wants = it->ranks[it->next] & SPREAD_WANTS;
		if (r >= j->nranks || !j->ranks[r].added)
			continue; /* not the lane's rank: never sent */
		struct job_rank *jr = &j->ranks[r];
		uint8_t tagbuf[SC_SEAL_TAG];
		const void *buf;
		size_t len;
		int rc = result_msg(j, r, wants, it->data, it->full, it->chunk, it->imm, tagbuf, &buf, &len);
		if (rc)
			return rc;
		rc = fabric_tinject(j->fab, buf, len, jr->fi_addr,
				    wire_tag_make(WIRE_TAG_RESULT, jr->result_key, r, it->slot), it->imm);
		if (rc == -FI_EAGAIN)
			ctr_add(&t->stats.eagain[EAGAIN_SEND], 1);
		if (rc)
			return rc;
		ctr_add(&t->stats.results_spread, 1);
		if (wants) {
			ctr_add(&t->stats.tx_bytes, it->len);
			ctr_add(&j->bytes_out, it->len);
		}
	}
	return 0;
}

int dp_spread_run(struct dthread *t)
{
	struct spread_list wait;
	struct spread_item *it;
	uint64_t now = 0;
	int n = 0;

	if (atomic_load_explicit(&t->spread_pending, memory_order_acquire)) {
		pthread_mutex_lock(&t->spread_lock);
		STAILQ_CONCAT(&t->spread_q, &t->spread_in);
		atomic_store_explicit(&t->spread_pending, 0, memory_order_relaxed);
		pthread_mutex_unlock(&t->spread_lock);
	}
	STAILQ_INIT(&wait);
	while ((it = STAILQ_FIRST(&t->spread_q))) {
		STAILQ_REMOVE_HEAD(&t->spread_q, link);
		struct job *j = spread_lane(t, it);
		uint32_t from = it->next;
		int rc = j ? spread_send(t, j, it) : 0;
		n += (int)(it->next - from);
		if (rc == -FI_EAGAIN) {
			if (!now)
				now = sc_now_ns();
			if (!it->refused_ns || it->next > from)
				it->refused_ns = now;
			uint64_t ms = (now - it->refused_ns) / 1000000ull;
			if (ms < j->timeout_ms) {
				STAILQ_INSERT_TAIL(&wait, it, link);
				continue;
			}
			dp_job_fail(t, j, WIRE_E_TIMEOUT, "rank %u took no result for %llu ms (chunk seq %u)",
				    it->ranks[it->next] & ~SPREAD_WANTS, (unsigned long long)ms,
				    wire_imm_seq(it->imm));
		} else if (rc) {
			dp_job_fail(t, j, WIRE_E_INTERNAL, "result send of slot %u (lane %u's) failed: %s",
				    it->slot, it->slot % j->lanes, fi_strerror(-rc));
		}
		free(it);
	}
	STAILQ_CONCAT(&t->spread_q, &wait);
	return n;
}

void dp_spread_fini(struct dthread *t)
{
	struct spread_item *it;

	STAILQ_CONCAT(&t->spread_q, &t->spread_in);
	while ((it = STAILQ_FIRST(&t->spread_q))) {
		STAILQ_REMOVE_HEAD(&t->spread_q, link);
		free(it);
	}
}

/* A result the provider can inject (small ones: latency-bound collectives)
 * goes with fabric_tinject: copied at once, no send completion to reap, so
 * the data thread handles one message per rank instead of two. */
static int result_send(struct dthread *t, struct job *j, struct slot *s)
{
	size_t full = s->len + (j->sealed ? SC_SEAL_TAG : 0);

	if (!s->planned) {
		if (result_paced(j)) {
			dthread_retry_add(t, s);
			return 0;
		}
		int rc = result_plan(t, j, s);
		if (rc)
			return rc;
		s->planned = true;
		if (j->pace_ns)
			j->pace_tokens -= (int64_t)result_bytes(j, s);
		if (wire_result_spread(j->spread, s->len) && !s->mc) {
			rc = result_spread(j, s);
			if (rc)
				return rc;
		}
	}
	bool held = false; /* a due send waits for its rank's last one */
	for (uint32_t r = s->send_next; r < j->nranks; r++) {
		struct job_rank *jr = &j->ranks[r];
		struct rslot *rs = job_rslot(j, s->index, r);
		if (!rs->uni) {
			if (!held)
				s->send_next = r + 1;
			continue;
		}
		bool wants = rs->wants;
		uint8_t tagbuf[SC_SEAL_TAG];
		const void *buf;
		size_t len, data = wants ? s->len : 0;
		int rc = result_msg(j, r, wants, s->acc, full, s->chunk, s->imm, tagbuf, &buf, &len);
		if (rc)
			return rc;
		bool inject = len <= j->fab->inject_size;
		if (buf == tagbuf && !inject)
			return -FI_EMSGSIZE; /* every provider injects more than a tag */
		if (!inject && t->res_hold && jr->res_out) {
			jr->res_wait = true;
			held = true;
			if (!rs->held)
				ctr_add(&t->stats.result_holds, 1);
			rs->held = true;
			continue;
		}
		uint64_t tag = wire_tag_make(WIRE_TAG_RESULT, jr->result_key, r, s->index);
		rc = inject ? fabric_tinject(j->fab, buf, len, jr->fi_addr, tag, s->imm)
			    : fabric_tsend(j->fab, s->acc, len, j->mr.desc, jr->fi_addr, tag, s->imm,
					   &rs->sop.op);
		if (rc == -FI_EAGAIN) {
			ctr_add(&t->stats.eagain[EAGAIN_SEND], 1);
			dthread_retry_add(t, s);
			return 0;
		}
		if (rc)
			return rc;
		rs->uni = rs->held = false;
		if (!held)
			s->send_next = r + 1;
		if (s->mc && wants)
			ctr_add(&t->stats.mc_repairs, 1);
		if (inject) {
			ctr_add(&t->stats.tx_bytes, data);
			ctr_add(&j->bytes_out, data);
		} else {
			j->ops_out++;
			s->sends_left++;
			jr->res_out++;
			rs->out = true;
		}
	}
	return result_done(j, s);
}

/* Rank r's last result send completed and a slot's send to it was held
 * (t->res_hold): the oldest such slot tries again (the retry list, after
 * this batch of completions); if another waits too, the rank stays marked. */
static void result_unhold(struct dthread *t, struct job *j, uint32_t r)
{
	struct job_rank *jr = &j->ranks[r];
	struct slot *oldest = NULL;
	uint32_t waiting = 0;

	if (!jr->res_wait || jr->res_out)
		return;
	for (uint32_t w = 0; w < j->window; w++) {
		struct slot *s = &j->slots[w];
		if (s->state != SLOT_SENDING || !s->planned || s->send_next > r ||
		    !job_rslot(j, w, r)->uni)
			continue;
		waiting++;
		if (!oldest || s->chunk < oldest->chunk)
			oldest = s;
	}
	jr->res_wait = waiting > 1;
	if (oldest)
		dthread_retry_add(t, oldest);
}

static bool result_sent(struct dthread *t, struct job *j, struct slot *s, uint32_t rank, int err)
{
	(void)err; /* a rank we cannot reach is the control plane's business */
	s->sends_left--;
	j->ranks[rank].res_out--;
	job_rslot(j, s->index, rank)->out = false;
	result_unhold(t, j, rank);
	return result_done(j, s);
}

static int result_repair(struct dthread *t, struct job *j, struct slot *s, uint32_t rank)
{
	job_rslot(j, s->index, rank)->uni = true;
	if (rank < s->send_next)
		s->send_next = rank;
	return result_send(t, j, s);
}

static bool result_kept(struct dthread *t, struct job *j, struct slot *s)
{
	(void)t;
	return result_done(j, s);
}

static void result_fini(struct dthread *t, struct job *j)
{
	(void)t;
	if (j->mc_tx) {
		sc_mc_sender_close(j->mc_tx);
		free(j->mc_tx);
		j->mc_tx = NULL;
	}
}

const struct result_ops result_default_ops = {
	.name = "unicast+multicast",
	.init = result_init,
	.send_result = result_send,
	.on_send_complete = result_sent,
	.repair = result_repair,
	.released = result_kept,
	.fini = result_fini,
};
