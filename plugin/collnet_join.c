/* Joining the aggregators: connect's second step (collnet_connect.c), after
 * the ring neighbours and before the nodes agree on the set. Reads
 * SUMCAST_AGGREGATORS and SUMCAST_KEY_FILE, creates the client (client.h)
 * with the settings rank 0's handle brought, and waits, bounded by
 * SUMCAST_CONNECT_TIMEOUT, until every aggregator answered or failed. */
#include "collnet.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agglist.h"
#include "log.h"
#include "wire.h"

/* Whether two lists are the same, in the same order. */
static bool aggs_same(const struct agg_addr *a, size_t na, const struct agg_addr *b, size_t nb)
{
	return na == nb && (!na || agglist_digest(a, na) == agglist_digest(b, nb));
}

/* "SUMCAST_AGGREGATORS differs from rank 0's", once per process: every
 * communicator of a job would say the same. */
__attribute__((format(printf, 1, 2))) static void aggs_warn_once(const char *fmt, ...)
{
	static int said;
	char msg[1024];
	va_list ap;

	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	SC_WARN("%s", msg);
}

void coll_handle_aggs_fill(struct coll_handle *h, bool *shared_host)
{
	struct agg_addr *a = calloc(CLIENT_AGGS_MAX, sizeof(*a));
	char why[320];
	size_t n = 0;
	uint8_t fmt;
	int len;

	*shared_host = false;
	if (!a)
		return; /* COLL_AGGS_SENT clear: each node its own list */
	if (agglist_resolve(plugin_cfg.aggregators, AGGLIST_PORT_DEFAULT, a, CLIENT_AGGS_MAX, &n, why, sizeof(why))) {
		SC_WARN("SUMCAST_AGGREGATORS: %s; this node's handle lists no aggregators (where it is "
			"rank 0, the job has none)", why);
		n = 0;
	}
	*shared_host = agglist_all_loopback(a, n);
	h->aggs_fmt = COLL_AGGS_SENT;
	h->aggs_n = (uint8_t)n;
	len = agglist_pack(a, n, h->addr + h->addrlen, FABRIC_ADDR_MAX - h->addrlen, &fmt);
	if (len >= 0) {
		h->aggs_fmt |= (uint8_t)(COLL_AGGS_INLINE | fmt);
		h->aggs_len = (uint16_t)len;
	} else {
		agglist_sort(a, n);
		SC_INFO("SUMCAST_AGGREGATORS: %zu aggregators do not fit in NCCL's handle (%d bytes free "
			"after this provider's %u-byte address): as rank 0 this node sends their digest; "
			"every node then uses its own list in sorted order (docs/client.md)",
			n, FABRIC_ADDR_MAX - h->addrlen, h->addrlen);
	}
	h->aggs_digest = agglist_digest(a, n);
	free(a);
}

/* SUMCAST_AGGREGATORS resolved (agglist.h) into cc->aggs (pointers into
 * cc->aggs_buf, "addr:port" each). The list is rank 0's, from its handle,
 * whatever this node resolves; a node whose own list differs says so once.
 * Where rank 0's list did not fit in the handle, this node's own in sorted
 * order, checked against rank 0's digest; where rank 0 sent none (a plugin
 * before the list travelled), this node's own as given. A list that does
 * not resolve gives no aggregators (the ring alone, said once). */
void coll_aggs_parse(struct coll_comm *cc, const struct coll_handle *h0)
{
	struct agg_addr *own = calloc(2 * CLIENT_AGGS_MAX, sizeof(*own)), *root = own + CLIENT_AGGS_MAX;
	const struct agg_addr *use = own;
	size_t nown = 0, nuse = 0, used = 0;
	char why[320], list_own[512], list_root[512];
	int rc;

	cc->naggs = 0;
	if (!own) {
		SC_WARN("SUMCAST_AGGREGATORS: out of memory; no aggregators, the ring alone");
		return;
	}
	rc = agglist_resolve(plugin_cfg.aggregators, AGGLIST_PORT_DEFAULT, own, CLIENT_AGGS_MAX, &nown, why, sizeof(why));
	if (rc)
		nown = 0;
	if (!(h0->aggs_fmt & COLL_AGGS_SENT)) {
		if (rc)
			SC_WARN("SUMCAST_AGGREGATORS: %s; no aggregators, the ring alone", why);
		nuse = nown;
	} else if (h0->aggs_fmt & COLL_AGGS_INLINE) {
		nuse = h0->aggs_n;
		if ((size_t)h0->addrlen + h0->aggs_len > FABRIC_ADDR_MAX ||
		    agglist_unpack(h0->addr + h0->addrlen, h0->aggs_len, h0->aggs_fmt & AGGLIST_F_MASK,
				   nuse, root) ||
		    agglist_digest(root, nuse) != h0->aggs_digest) {
			SC_WARN("collnet job 0x%016llx: rank 0's aggregator list in the handle does not decode; "
				"no aggregators, the ring alone", (unsigned long long)cc->job_id);
			nuse = 0;
		}
		use = root;
		if (!aggs_same(own, nown, root, nuse))
			aggs_warn_once("SUMCAST_AGGREGATORS on this node (%s: %s) differs from rank 0's (%s): "
				       "using rank 0's, as every node does",
				       plugin_cfg.aggregators,
				       rc ? why : agglist_join(own, nown, list_own, sizeof(list_own)),
				       nuse ? agglist_join(root, nuse, list_root, sizeof(list_root)) : "none");
	} else {
		/* rank 0's list did not fit: everyone's own, in one order */
		agglist_sort(own, nown);
		nuse = nown;
		if (nown != h0->aggs_n || agglist_digest(own, nown) != h0->aggs_digest)
			aggs_warn_once("SUMCAST_AGGREGATORS on this node (%s: %s) differs from rank 0's "
				       "(%u aggregators, too many for NCCL's handle): using this node's; "
				       "the aggregators not joined by every node are dropped at connect",
				       plugin_cfg.aggregators,
				       rc ? why : agglist_join(own, nown, list_own, sizeof(list_own)),
				       h0->aggs_n);
	}
	for (size_t i = 0; i < nuse; i++) {
		char t[AGGLIST_TEXT_MAX];
		size_t len = strlen(agglist_text(&use[i], t, sizeof(t))) + 1;
		memcpy(cc->aggs_buf + used, t, len);
		cc->aggs[cc->naggs++] = cc->aggs_buf + used;
		used += len;
	}
	free(own);
}

/* The same reader as the daemon's (wire_key_load), so a key file means the
 * same bytes on both sides. */
static int key_load(struct coll_comm *cc)
{
	const char *why;
	int rc;

	if (!plugin_cfg.key_file[0])
		return 0;
	rc = wire_key_load(plugin_cfg.key_file, cc->key, &cc->key_len, &why);
	if (rc)
		SC_WARN("SUMCAST_KEY_FILE=%s: %s", plugin_cfg.key_file, why);
	return rc;
}

/* Tries to join every aggregator; 0 when each is READY or failed and at
 * least one is READY (client_agg_alive tells which). */
int coll_join(struct coll_comm *cc, uint64_t deadline)
{
	/* The key must be loaded before the params copy its length. */
	if (key_load(cc))
		return -EACCES;
	struct client_params p = {
		.provider = plugin_cfg.provider,
		.node = plugin_cfg.iface[0] ? plugin_cfg.iface : NULL,
		.job_id = cc->job_id,
		.rank = cc->rank,
		.nranks = cc->nranks,
		.chunk_bytes = cc->ask_chunk ? cc->ask_chunk : (uint32_t)plugin_cfg.chunk_bytes,
		.window = cc->ask_window ? cc->ask_window : (uint32_t)plugin_cfg.window,
		.weight = (uint32_t)plugin_cfg.weight,
		.label = plugin_cfg.job_label,
		.timeout_ms = (uint32_t)plugin_cfg.agg_timeout_ms,
		.key = cc->key_len ? cc->key : NULL,
		.key_len = cc->key_len,
		.naggs = cc->naggs,
		.aggs = cc->aggs,
		.eager_bytes = cc->eager_bytes,
		.join_flags = cc->deterministic ? WIRE_JOIN_F_DETERMINISTIC : 0,
		.failover = cc->failover,
		.deadline_ms = (uint32_t)plugin_cfg.agg_deadline_ms,
		.retain_hold_ms = (uint32_t)plugin_cfg.retain_hold_ms,
		.multicast = plugin_cfg.multicast ? 0 : CLIENT_MC_OFF,
		.mc_nack_us = (uint32_t)plugin_cfg.mc_nack_us,
		.mc_drop_permille = (uint32_t)plugin_cfg.test_mc_drop,
	};
	int rc = client_create(&p, &cc->client);
	if (rc) {
		SC_WARN("aggregators %s: client setup failed: %s", plugin_cfg.aggregators,
			strerror(-rc));
		cc->client = NULL;
		return rc;
	}
	/* READY comes once every rank has joined: nap between polls, doubling
	 * from 200 us to 2 ms (hundreds of nodes' processes may wait here on
	 * a host; the control socket's answer is not latency-bound). */
	long nap_ns = 200000;
	do {
		rc = client_connect_poll(cc->client);
		if (rc != -EAGAIN)
			break;
		struct timespec ts = { 0, nap_ns };
		nanosleep(&ts, NULL);
		nap_ns = nap_ns < 1000000 ? nap_ns * 2 : 2000000;
	} while (sc_now_ns() < deadline);
	if (rc == -EAGAIN) {
		SC_WARN("aggregators %s: not ready within SUMCAST_CONNECT_TIMEOUT (%s)",
			plugin_cfg.aggregators, client_error(cc->client));
		rc = -ETIMEDOUT;
	} else if (rc) {
		SC_WARN("aggregators %s: %s", plugin_cfg.aggregators, client_error(cc->client));
	}
	return rc;
}
