/* listen: the first step of a collnet communicator. Opens the collnet's own
 * endpoint and fills the handle NCCL passes to every node: its address, a
 * random job id, and the settings every node must share (split,
 * bandwidths, hop latency, small-message threshold, eager cut, fan-in, and
 * as flags "aggregators on this host", deterministic, failover). connect
 * (collnet_connect.c) uses rank 0's copy of those, so every node decides
 * alike. */
#include "collnet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"

int collnet_listen(int dev, void *handle, void **listen_comm)
{
	struct coll_handle *h = handle;
	struct coll_listen *lc;
	double split;
	int rc;

	if (dev != 0)
		return -EINVAL;
	if (split_parse(plugin_cfg.split, &split)) {
		SC_WARN("SUMCAST_SPLIT=%s: want auto, model or a fraction in [0, 1]", plugin_cfg.split);
		return -EINVAL;
	}
	lc = calloc(1, sizeof(*lc));
	if (!lc)
		return -ENOMEM;
	rc = plugin_fabric_open(false, &lc->f);
	if (rc) {
		free(lc);
		return rc;
	}
	if (getrandom(&lc->job_id, sizeof(lc->job_id), 0) != sizeof(lc->job_id))
		lc->job_id = sc_now_ns() ^ ((uint64_t)getpid() << 32);
	memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
	h->magic = COLL_MAGIC;
	h->addrlen = (uint16_t)lc->f->addrlen;
	memcpy(h->addr, lc->f->addr, lc->f->addrlen);
	h->job_id = lc->job_id;
	h->split_ppm = split == SPLIT_MODEL ? -2 : split < 0 ? -1 : (int32_t)(split * 1e6 + 0.5);
	struct plugin_props pp;
	h->link_mbps = plugin_props_get(lc->f, 0, &pp) ? 25000 : (uint32_t)pp.speed_mbps;
	h->agg_mbps = plugin_cfg.agg_gbps > 0 ? (uint32_t)(plugin_cfg.agg_gbps * 1000) : h->link_mbps;
	h->agg_eff_ppm = (uint32_t)(plugin_cfg.agg_eff * 1e6 + 0.5);
	h->small_bytes = plugin_cfg.small_bytes;
	/* SUMCAST_EAGER_BYTES (up to 64M, plugin.c's table): auto is the
	 * provider's figure (client_eager_default) */
	h->eager_bytes = plugin_cfg.eager_bytes == CFG_SIZE_AUTO_VALUE
				 ? client_eager_default(fabric_provider(lc->f))
				 : (uint32_t)plugin_cfg.eager_bytes;
	h->lat_ns = plugin_props_get(lc->f, 0, &pp) ? 10000 : (uint32_t)(pp.latency_us * 1000);
	bool shared_host;
	coll_handle_aggs_fill(h, &shared_host);
	if (shared_host)
		h->flags |= COLL_F_SHARED_HOST;
	if (plugin_cfg.deterministic)
		h->flags |= COLL_F_DETERMINISTIC;
	h->fan_in = (uint32_t)plugin_cfg.fan_in;
	if (!plugin_cfg.failover)
		h->flags |= COLL_F_NO_FAILOVER;
	*listen_comm = lc;
	return 0;
}

int collnet_close_listen(void *listen_comm)
{
	struct coll_listen *lc = listen_comm;

	if (lc) {
		fabric_close(lc->f); /* NULL once a collComm owns it */
		free(lc);
	}
	return 0;
}
