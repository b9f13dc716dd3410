/* Joining the aggregators: connect's second step (collnet_connect.c), after
 * the ring neighbours and before the nodes agree on the set. Reads
 * SUMCAST_AGGREGATORS and SUMCAST_KEY_FILE, creates the client (client.h)
 * with the settings rank 0's handle brought, and waits, bounded by
 * SUMCAST_CONNECT_TIMEOUT, until every aggregator answered or failed. */
#include "collnet.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "hostport.h"
#include "log.h"
#include "wire.h"

/* SUMCAST_AGGREGATORS, "host:port,host:port", into cc->aggs (pointers into
 * cc->aggs_buf), in the order given: every node must list the same. The
 * one list parser (hostport.h): a list with an entry that does not parse
 * gives no aggregators (the ring alone, said once); past CLIENT_AGGS_MAX
 * entries the rest are left out, said too. */
void coll_aggs_parse(struct coll_comm *cc)
{
	const char *cur = plugin_cfg.aggregators;
	struct hostport hp;
	char why[160];
	size_t used = 0;
	int rc;

	cc->naggs = 0;
	while ((rc = hostport_list_next(&cur, &hp, why, sizeof(why))) == 1) {
		size_t len = strlen(hp.text) + 1;
		if (cc->naggs == CLIENT_AGGS_MAX || used + len > sizeof(cc->aggs_buf)) {
			SC_WARN("SUMCAST_AGGREGATORS: more than %zu aggregators, the rest are left out", cc->naggs);
			return;
		}
		memcpy(cc->aggs_buf + used, hp.text, len);
		cc->aggs[cc->naggs++] = cc->aggs_buf + used;
		used += len;
	}
	if (rc < 0) {
		SC_WARN("SUMCAST_AGGREGATORS: %s; no aggregators, the ring alone", why);
		cc->naggs = 0;
	}
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
