/* Client library: one rank's membership of one job on every aggregator.
 * See client.h for the contract and docs/client.md for the design notes.
 * This file holds the lifecycle (parameters, create, connect, the progress
 * loop, test, destroy) and the accessors: the top of the layers that
 * client_int.h lists. The loop calls down into slots (completions, then
 * issue) and membership (control sockets, liveness, the stall watch) and
 * settles after each what they found failed.
 *
 * Memory: everything is allocated in client_create (aggregator table, one
 * slot per (aggregator, window position), the request pool with one cursor
 * per (request, aggregator), with failover the retention and bounce
 * regions). client_allreduce/progress/test never allocate. */
#include "client_int.h"

#include <errno.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "fabric_env.h"
#include "log.h"

uint32_t client_eager_default(const char *provider)
{
	if (!provider || !strstr(provider, "ofi_rxm"))
		return 0;
	size_t e = fabric_rxm_eager_in_force(provider);
	return e < (64u << 20) ? (uint32_t)e : 64u << 20;
}

/* ---- creation ---- */

static int params_check(const struct client_params *p, char *why, size_t len)
{
	char lwhy[96];

	if (!p->naggs || p->naggs > CLIENT_AGGS_MAX || !p->aggs)
		snprintf(why, len, "naggs %zu: need 1..%d aggregators", p->naggs, CLIENT_AGGS_MAX);
	else if (!p->nranks || p->nranks > WIRE_RANKS_MAX)
		snprintf(why, len, "nranks %u: need 1..%u", p->nranks, WIRE_RANKS_MAX);
	else if (p->rank >= p->nranks)
		snprintf(why, len, "rank %u is not below nranks %u", p->rank, p->nranks);
	else if (p->chunk_bytes && (p->chunk_bytes % 8 || p->chunk_bytes > (64u << 20)))
		snprintf(why, len, "chunk_bytes %u: need a multiple of 8 up to 64 MiB",
			 p->chunk_bytes);
	else if (p->window > 65536)
		snprintf(why, len, "window %u: at most 65536 chunks in flight", p->window);
	else if (p->weight > WIRE_WEIGHT_MAX)
		snprintf(why, len, "weight %u: at most %u", p->weight, WIRE_WEIGHT_MAX);
	else if ((uint64_t)(p->window ? p->window : CLIENT_WINDOW_DEFAULT) * (p->weight ? p->weight : 1) > 65536)
		snprintf(why, len, "window %u x weight %u: at most 65536 chunks in flight",
			 p->window ? p->window : CLIENT_WINDOW_DEFAULT, p->weight);
	else if (p->dtype_mask >> SC_DTYPE_COUNT)
		snprintf(why, len, "dtype_mask 0x%x has bits beyond the %d types", p->dtype_mask,
			 SC_DTYPE_COUNT);
	else if (p->key_len > 256 || (p->key_len && !p->key))
		snprintf(why, len, "key of %zu bytes: at most 256", p->key_len);
	else if (p->label && wire_label_check(p->label, lwhy, sizeof(lwhy)))
		snprintf(why, len, "label: %s", lwhy);
	else if (p->max_requests > 65536)
		snprintf(why, len, "max_requests %u: at most 65536", p->max_requests);
	else if (p->join_flags & ~(uint32_t)WIRE_JOIN_F_DETERMINISTIC)
		snprintf(why, len, "join_flags 0x%x: unknown bits 0x%x", p->join_flags,
			 p->join_flags & ~(uint32_t)WIRE_JOIN_F_DETERMINISTIC);
	else if (p->multicast > 0 || p->multicast < CLIENT_MC_NOJOIN || p->mc_drop_permille > 1000)
		snprintf(why, len, "multicast %d / mc_drop_permille %u: 0, CLIENT_MC_OFF or CLIENT_MC_NOJOIN; "
			 "at most 1000", p->multicast, p->mc_drop_permille);
	else
		return 0;
	return -EINVAL;
}

static void client_free(struct client *c)
{
	for (size_t ai = 0; c->aggs && ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		client_close_fd(a);
		if (a->ep)
			fabric_close(a->ep);
		client_mc_leave(a);
		if (a->mc_rx.slots)
			sc_mc_rx_fini(&a->mc_rx);
		free(a->ret);
		if (a->sealed)
			sc_seal_fini(&a->seal);
	}
	if (c->seal_reg)
		fabric_mr_dereg(&c->seal_mr);
	if (c->seal_mem)
		munmap(c->seal_mem, c->seal_bytes);
	if (c->bounce_reg)
		fabric_mr_dereg(&c->bounce_mr);
	if (c->own_fabric)
		fabric_close(c->fab);
	if (c->retention)
		munmap(c->retention, c->region_bytes);
	if (c->bounce)
		munmap(c->bounce, c->region_bytes);
	free(c->free_reqs);
	free(c->ra_mem);
	free(c->reqs);
	free(c->slot_mem);
	free(c->ops);
	free(c->aggs);
	explicit_bzero(c->key, sizeof(c->key));
	free(c);
}

/* Failover's regions: address space only until touched (an in-place
 * request's results, a completed request's last results). */
static int failover_alloc(struct client *c)
{
	c->region_bytes = c->naggs * (size_t)c->window * c->chunk_bytes;
	void *ret = mmap(NULL, c->region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *bnc = mmap(NULL, c->region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	c->retention = ret == MAP_FAILED ? NULL : ret;
	c->bounce = bnc == MAP_FAILED ? NULL : bnc;
	if (!c->retention || !c->bounce)
		return -ENOMEM;
	int rc = fabric_mr_reg(c->fab, c->bounce, c->region_bytes, &c->bounce_mr);
	if (rc)
		return rc < 0 ? rc : -rc;
	c->bounce_reg = true;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		a->ret = calloc(c->window, sizeof(*a->ret));
		if (!a->ret)
			return -ENOMEM;
		for (uint32_t k = 0; k < c->window; k++)
			a->ret[k].chunk = CLIENT_NO_CHUNK;
	}
	return 0;
}

int client_create(const struct client_params *p, struct client **out)
{
	char why[CLIENT_ERR_MAX];
	struct client *c;
	int rc;

	if (!p || !out)
		return -EINVAL;
	rc = params_check(p, why, sizeof(why));
	if (rc) {
		SC_ERR("client: %s", why);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->job_id = p->job_id;
	c->rank = p->rank;
	c->nranks = p->nranks;
	c->chunk_bytes = p->chunk_bytes ? p->chunk_bytes : CLIENT_CHUNK_DEFAULT;
	c->weight = p->weight ? p->weight : 1;
	snprintf(c->label, sizeof(c->label), "%s", p->label ? p->label : "");
	c->base_window = p->window ? p->window : CLIENT_WINDOW_DEFAULT;
	c->window = c->base_window * c->weight; /* the most any aggregator grants */
	c->dtype_mask = p->dtype_mask ? p->dtype_mask : (1u << SC_DTYPE_COUNT) - 1;
	c->timeout_ms = p->timeout_ms ? p->timeout_ms : CLIENT_TIMEOUT_DEFAULT;
	c->max_requests = p->max_requests ? p->max_requests : CLIENT_REQS_DEFAULT;
	c->eager_bytes = p->eager_bytes;
	c->join_flags = p->join_flags | (p->multicast == CLIENT_MC_OFF ? WIRE_JOIN_F_UNICAST : 0);
	c->failover = p->failover;
	c->retain_hold_ms = p->retain_hold_ms;
	c->deadline_ms = p->failover ? p->deadline_ms : 0;
	c->multicast = p->multicast;
	c->mc_nack_ns = (uint64_t)(p->mc_nack_us ? p->mc_nack_us : 2000) * 1000ull;
	c->mc_drop_permille = p->mc_drop_permille;
	if (p->key_len)
		memcpy(c->key, p->key, p->key_len);
	c->key_len = p->key_len;
	c->naggs = p->naggs;

	c->aggs = calloc(c->naggs, sizeof(*c->aggs));
	c->nops = c->naggs * c->window * 2;
	c->ops = calloc(c->nops, sizeof(*c->ops));
	c->slot_mem = calloc(c->naggs * c->window, sizeof(*c->slot_mem));
	c->reqs = calloc(c->max_requests, sizeof(*c->reqs));
	c->ra_mem = calloc((size_t)c->max_requests * c->naggs, sizeof(*c->ra_mem));
	c->free_reqs = calloc(c->max_requests, sizeof(*c->free_reqs));
	if (!c->aggs || !c->ops || !c->slot_mem || !c->reqs || !c->ra_mem || !c->free_reqs) {
		rc = -ENOMEM;
		goto err;
	}
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		a->fd = -1;
		a->st = AGG_CONNECTING;
		STAILQ_INIT(&a->queue);
		defer_queue_init(&a->deferred);
		a->slots = &c->slot_mem[ai * c->window];
		for (uint32_t si = 0; si < c->window; si++) {
			a->slots[si].c = c;
			a->slots[si].ai = (uint32_t)ai;
			a->slots[si].si = si;
			a->slots[si].req = -1;
			a->slots[si].chunk = CLIENT_NO_CHUNK;
			for (int k = 0; k < 2; k++) {
				struct client_op *o = client_op_of(c, ai, si, k);
				o->agg = (uint32_t)ai;
				o->slot = si;
				o->is_recv = (uint32_t)k;
			}
		}
		if (!p->aggs[ai]) {
			snprintf(why, sizeof(why), "aggregator %zu is NULL", ai);
			rc = -EINVAL;
		} else {
			rc = client_parse_endpoint(p->aggs[ai], a, why, sizeof(why));
		}
		if (rc) {
			SC_ERR("client: %s", why);
			goto err;
		}
	}
	for (uint32_t i = 0; i < c->max_requests; i++) {
		c->reqs[i].idx = i;
		c->reqs[i].ra = &c->ra_mem[(size_t)i * c->naggs];
		for (size_t ai = 0; ai < c->naggs; ai++)
			c->reqs[i].ra[ai].req = &c->reqs[i];
		c->free_reqs[i] = c->max_requests - 1 - i;
	}
	c->nfree = c->max_requests;

	if (p->fabric) {
		c->fab = p->fabric;
	} else {
		struct fabric_params fp = { .provider = p->provider, .node = p->node };
		rc = fabric_open(&fp, &c->fab);
		if (rc) {
			rc = rc < 0 ? rc : -rc;
			goto err;
		}
		c->own_fabric = true;
	}
	if (c->fab->addrlen > WIRE_ADDR_MAX || strlen(fabric_provider(c->fab)) >= WIRE_PROV_MAX) {
		SC_ERR("client: fabric address of %zu bytes or provider name \"%s\" does not fit "
		       "the JOIN message", c->fab->addrlen, fabric_provider(c->fab));
		rc = -EINVAL;
		goto err;
	}
	/* One endpoint per aggregator: a failed one can be cut off alone. */
	for (size_t ai = 0; ai < c->naggs; ai++) {
		rc = fabric_open_sibling(c->fab, 0, &c->aggs[ai].ep);
		if (rc) {
			rc = rc < 0 ? rc : -rc;
			goto err;
		}
	}
	if (c->key_len) {
		/* sealed messages are staged: a send is sealed into its buffer, a
		 * result opened out of it (address space until used) */
		c->seal_bytes = c->naggs * (size_t)c->window * 2 * client_seal_unit(c);
		void *m = mmap(NULL, c->seal_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		c->seal_mem = m == MAP_FAILED ? NULL : m;
		rc = c->seal_mem ? fabric_mr_reg(c->fab, c->seal_mem, c->seal_bytes, &c->seal_mr) : -ENOMEM;
		if (rc) {
			rc = rc < 0 ? rc : -rc;
			SC_ERR("client: sealing buffers (%zu bytes): %s", c->seal_bytes, strerror(-rc));
			goto err;
		}
		c->seal_reg = true;
	}
	if (c->failover && (rc = failover_alloc(c))) {
		SC_ERR("client: failover buffers (2 x %zu bytes): %s", c->region_bytes, strerror(-rc));
		goto err;
	}
	c->deadline_ns = sc_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	for (size_t ai = 0; ai < c->naggs; ai++)
		client_ctl_connect(c, &c->aggs[ai]);
	*out = c;
	return 0;

err:
	client_free(c);
	return rc;
}

int client_connect_poll(struct client *c)
{
	if (c->all_ready)
		return c->err;
	if (!c->err)
		client_ctl_poll(c);
	client_agg_settle(c);
	if (c->err)
		return c->err;

	size_t ready = 0, settled = 0;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		ready += c->aggs[ai].st == AGG_READY;
		settled += c->aggs[ai].st == AGG_READY || c->aggs[ai].st == AGG_DEAD;
	}
	if (settled == c->naggs && (ready || !c->failover)) {
		c->all_ready = true;
		c->last_ctl_ns = sc_now_ns();
		return 0;
	}
	if (settled == c->naggs) {
		/* failover, none ready: the first failure says why */
		for (size_t ai = 0; ai < c->naggs; ai++)
			if (c->aggs[ai].st == AGG_DEAD) {
				c->err = c->aggs[ai].err ? c->aggs[ai].err : -EIO;
				snprintf(c->errmsg, sizeof(c->errmsg), "%s", c->aggs[ai].why);
				break;
			}
		return c->err;
	}
	if (sc_now_ns() < c->deadline_ns)
		return -EAGAIN;
	/* Name the aggregator that got least far. */
	struct client_agg *slow = NULL;
	for (size_t ai = 0; ai < c->naggs; ai++)
		if (c->aggs[ai].st != AGG_READY && c->aggs[ai].st != AGG_DEAD &&
		    (!slow || c->aggs[ai].st < slow->st))
			slow = &c->aggs[ai];
	if (slow->st == AGG_WAIT_READY)
		client_agg_fail(c, slow, -ETIMEDOUT,
				"%s: timed out after %u ms waiting for READY (joined job 0x%llx as rank %u "
				"of %u; %zu of %zu aggregators ready; other ranks have not all joined)",
				slow->name, c->timeout_ms, (unsigned long long)c->job_id, c->rank,
				c->nranks, ready, c->naggs);
	else
		client_agg_fail(c, slow, -ETIMEDOUT, "%s: timed out after %u ms %s (%zu of %zu aggregators "
				"ready)", slow->name, c->timeout_ms, client_agg_state_what[slow->st], ready,
				c->naggs);
	return c->failover ? client_connect_poll(c) : c->err;
}

int client_mr_reg(struct client *c, void *buf, size_t len, struct fabric_mr *out)
{
	return fabric_mr_reg(c->fab, buf, len, out);
}

int client_progress(struct client *c)
{
	bool cq_failed = false;

	/* Only endpoints with chunks in flight have completions to reap (a
	 * CQ read costs a poll() of the endpoint's sockets on tcp). */
	for (size_t ai = 0; ai < c->naggs; ai++)
		if (c->aggs[ai].ep && (c->aggs[ai].inflight || !defer_empty(&c->aggs[ai].deferred)))
			cq_failed |= client_slot_poll(c, ai) != 0;
	client_agg_settle(c);
	if (cq_failed && !c->failover)
		return c->err;
	if (!c->broken)
		for (size_t ai = 0; ai < c->naggs; ai++)
			if (!STAILQ_EMPTY(&c->aggs[ai].queue) || !defer_empty(&c->aggs[ai].deferred))
				client_slot_issue(c, ai);
	client_agg_settle(c);

	uint64_t t = sc_now_ns();
	if (t - c->last_ctl_ns >= CLIENT_CTL_INTERVAL_NS) {
		c->last_ctl_ns = t;
		if (!c->all_ready) {
			if (!c->broken)
				client_ctl_poll(c);
			client_agg_settle(c);
			return c->err;
		}
		client_ctl_poll(c);
		client_ctl_liveness(c, t);
		client_agg_watch(c, t);
		client_agg_settle(c);
	}
	return c->err;
}

int client_test(struct client *c, struct client_req *r, int *done)
{
	client_progress(c);
	return client_req_check(c, r, done);
}

bool client_req_all_in(struct client_req *r, uint64_t now)
{
	if (!r->in_use || r->err || r->chunks_left || r->inflight)
		return false;
	if (!r->complete_ns)
		r->complete_ns = now;
	return true;
}

int client_req_check(struct client *c, struct client_req *r, int *done)
{
	*done = 0;
	if (!r->in_use)
		return -EINVAL;
	if (r->err) {
		if (r->inflight && sc_now_ns() - r->fail_ns < CLIENT_DRAIN_MS * 1000000ull)
			return 0; /* cancelled receives still draining */
		if (r->inflight) {
			/* the caller may reuse the request's memory once it is told:
			 * the endpoints the rest is posted on are closed first, so
			 * that nothing lands there later (RDMA: nothing posted into
			 * memory it deregisters) */
			SC_WARN("request failed with %zu chunks still posted after %u ms; closing the "
				"endpoints they are posted on", r->inflight, CLIENT_DRAIN_MS);
			for (size_t ai = 0; ai < c->naggs; ai++)
				for (uint32_t si = 0; si < c->window; si++)
					if (c->aggs[ai].slots[si].req == (int32_t)r->idx) {
						client_slot_fence(c, ai);
						break;
					}
		}
		int err = r->err;
		client_req_free(c, r);
		*done = 1;
		return err;
	}
	uint64_t now = sc_now_ns();
	if (!client_req_all_in(r, now))
		return 0;
	if (client_retain_hold(c, r, now))
		return 0;
	client_retain_req(c, r);
	client_req_free(c, r);
	*done = 1;
	return 0;
}

const char *client_error(const struct client *c)
{
	return c->errmsg[0] ? c->errmsg : "no error";
}

size_t client_naggs(const struct client *c)
{
	return c->naggs;
}

bool client_agg_alive(const struct client *c, size_t agg)
{
	return agg < c->naggs && c->aggs[agg].st == AGG_READY;
}

int client_agg_load(const struct client *c, size_t agg, unsigned *load_pm, unsigned *jobs)
{
	if (!client_agg_alive(c, agg) || !c->aggs[agg].has_load)
		return -ENODATA;
	*load_pm = c->aggs[agg].load_pm;
	*jobs = c->aggs[agg].jobs;
	return 0;
}

uint64_t client_failed(const struct client *c)
{
	return c->failed;
}

const char *client_agg_why(const struct client *c, size_t agg)
{
	return agg < c->naggs ? c->aggs[agg].why : "";
}

uint32_t client_agg_window(const struct client *c, size_t agg)
{
	return agg < c->naggs ? c->aggs[agg].window : 0;
}

uint32_t client_agg_weight(const struct client *c, size_t agg)
{
	return agg < c->naggs ? c->aggs[agg].weight : 0;
}

int client_mc_info(const struct client *c, size_t agg, struct client_mc_info *out)
{
	if (agg >= c->naggs)
		return -EINVAL;
	const struct client_agg *a = &c->aggs[agg];
	memset(out, 0, sizeof(*out));
	out->offered = a->mc;
	out->in_group = a->mc_in;
	out->by_group = a->mc_by_group;
	out->by_unicast = a->mc_by_unicast;
	out->nacks = a->mc_nacks;
	out->datagrams = a->mc_rx.n.packets;
	out->dropped = a->mc_rx.n.dropped;
	out->foreign = a->mc_rx.n.foreign;
	out->stale = a->mc_rx.n.stale;
	out->dups = a->mc_rx.n.dups;
	out->malformed = a->mc_rx.n.malformed;
	snprintf(out->why, sizeof(out->why), "%s", a->mc_why);
	return 0;
}

struct fabric *client_fabric(const struct client *c)
{
	return c->fab;
}

int client_agg_info(const struct client *c, size_t agg, uint32_t *job_handle, uint32_t *window,
		    uint32_t *chunk_bytes)
{
	if (agg >= c->naggs || c->aggs[agg].st != AGG_READY)
		return -ENOTCONN;
	*job_handle = c->aggs[agg].job_handle;
	*window = c->aggs[agg].window;
	*chunk_bytes = c->aggs[agg].chunk_bytes;
	return 0;
}

void client_quiesce(struct client *c)
{
	if (!c || c->quiesced)
		return;
	c->quiesced = true;
	for (size_t ai = 0; ai < c->naggs; ai++)
		client_ctl_leave(c, &c->aggs[ai]);
	/* Cancel posted receives and wait (bounded) for their completions;
	 * closing the endpoints then ends whatever is left. */
	bool posted = false;
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		for (uint32_t si = 0; si < c->window && a->ep; si++) {
			struct client_slot *s = &a->slots[si];
			s->send_pending = 0;
			if (s->recv_posted) {
				fabric_cancel(a->ep, &client_op_of(c, ai, si, 1)->fop);
				posted = true;
			}
			posted |= s->send_posted;
		}
	}
	c->broken = true;
	uint64_t until = sc_now_ns() + 1000ull * 1000000ull;
	while (posted && sc_now_ns() < until) {
		posted = false;
		for (size_t ai = 0; ai < c->naggs; ai++) {
			struct client_agg *a = &c->aggs[ai];
			if (!a->ep)
				continue;
			client_slot_poll(c, ai);
			client_agg_settle(c);
			if (!a->ep)
				continue;
			for (uint32_t si = 0; si < c->window && !posted; si++)
				posted = a->slots[si].recv_posted || a->slots[si].send_posted;
		}
	}
	if (posted)
		SC_WARN("client: operations still posted after 1 s at close; closing their endpoints");
	/* closing ends whatever is still posted: the memory of the caller's
	 * requests may be deregistered next (RDMA's order) */
	for (size_t ai = 0; ai < c->naggs; ai++) {
		struct client_agg *a = &c->aggs[ai];
		if (a->ep) {
			fabric_close(a->ep);
			a->ep = NULL;
			a->av_inserted = false;
		}
	}
}

void client_destroy(struct client *c)
{
	if (!c)
		return;
	client_quiesce(c);
	client_free(c);
}
