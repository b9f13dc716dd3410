/* Unicast result delivery: one tagged send per rank. */
#include "result.h"

#include <rdma/fi_errno.h>

#include "dp.h"
#include "seal.h"

static int unicast_init(struct dthread *t, struct job *j)
{
	(void)t;
	for (uint32_t s = 0; s < j->window; s++)
		for (uint32_t r = 0; r < j->nranks; r++) {
			struct rslot *rs = job_rslot(j, s, r);
			rs->rop = (struct dop){ .job = j, .slot = s, .rank = (uint16_t)r, .kind = DOP_RECV };
			rs->sop = (struct dop){ .job = j, .slot = s, .rank = (uint16_t)r, .kind = DOP_SEND };
		}
	return 0;
}

/* A result the provider can inject (small ones: latency-bound collectives)
 * goes with fabric_tinject: copied at once, no send completion to reap, so
 * the data thread handles one message per rank instead of two. */
static int unicast_send(struct dthread *t, struct job *j, struct slot *s)
{
	size_t full = s->len + (j->sealed ? SC_SEAL_TAG : 0);

	while (s->send_next < j->nranks) {
		uint32_t r = s->send_next;
		struct job_rank *jr = &j->ranks[r];
		/* A rank in mode GIVE gets an empty result, its credit; in a
		 * sealed job an empty message sealed for that rank alone (its
		 * own IV: the result's is the whole job's), injected from here. */
		bool wants = job_rslot(j, s->index, r)->wants;
		uint8_t tagbuf[SC_SEAL_TAG];
		const void *buf = s->acc;
		size_t len = wants ? full : 0, data = wants ? s->len : 0;
		if (!wants && j->sealed) {
			if (sc_seal(&j->seal, SC_SEAL_RESULT, (uint16_t)r, s->chunk, s->imm, NULL, 0, tagbuf))
				return -FI_EIO;
			buf = tagbuf;
			len = SC_SEAL_TAG;
		}
		bool inject = len <= t->fabric->inject_size;
		if (buf == tagbuf && !inject)
			return -FI_EMSGSIZE; /* every provider injects more than a tag */
		uint64_t tag = wire_tag_make(WIRE_TAG_RESULT, jr->result_key, r, s->index);
		int rc = inject ? fabric_tinject(t->fabric, buf, len, jr->fi_addr, tag, s->imm)
				: fabric_tsend(t->fabric, s->acc, len, j->mr.desc, jr->fi_addr, tag, s->imm,
					       &job_rslot(j, s->index, r)->sop.op);
		if (rc == -FI_EAGAIN) {
			ctr_add(&t->stats.eagain[EAGAIN_SEND], 1);
			dthread_retry_add(t, s);
			return 0;
		}
		if (rc)
			return rc;
		s->send_next++;
		if (inject) {
			ctr_add(&t->stats.tx_bytes, data);
			ctr_add(&j->bytes_out, data);
		} else {
			j->ops_out++;
			s->sends_left++;
		}
	}
	return s->sends_left == 0;
}

static bool unicast_done(struct dthread *t, struct job *j, struct slot *s, uint32_t rank, int err)
{
	(void)t;
	(void)rank;
	(void)err; /* a rank we cannot reach is the control plane's business */
	s->sends_left--;
	return s->sends_left == 0 && s->send_next == j->nranks;
}

static void unicast_fini(struct dthread *t, struct job *j)
{
	(void)t;
	(void)j;
}

const struct result_ops result_unicast_ops = {
	.name = "unicast",
	.init = unicast_init,
	.send_result = unicast_send,
	.on_send_complete = unicast_done,
	.fini = unicast_fini,
};
