/* The control plane's frame: start and stop (key, control listener, the
 * data threads' event queue), the events from the data threads handed to
 * admission and the job lifecycle, and the drain on SIGTERM. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "ctl_api.h"
#include "ctl.h"
#include "mcast_link.h"
#include "log.h"
#include "notify.h"

/* ---- events from the data threads ---- */

static void queue_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct dcmd_list evs;
	struct dcmd *ev, *next;

	(void)fd;
	(void)what;
	evq_take(&d->evq, &evs);
	for (ev = STAILQ_FIRST(&evs); ev; ev = next) {
		next = STAILQ_NEXT(ev, link);
		struct job *j = ev->job; /* a lane: its job is the lead (job.h) */
		switch (ev->type) {
		case DCMD_ADD_JOB:
			if (ev->rc && j->lead->state != JOB_ENDING)
				job_abort(d, j->lead, WIRE_E_INTERNAL,
					  "setting up job 0x%" PRIx64 " (its endpoint, registering %zu bytes on data thread %u) failed: %s",
					  j->id, j->region_bytes, j->thread->index, fi_strerror(-ev->rc));
			break;
		case DCMD_ADD_RANK:
			admit_rank_added(d, ev);
			break;
		case DEV_ABORT:
			job_abort(d, j->lead, (enum wire_code)j->abort_code, "%s", j->abort_text);
			break;
		case DEV_RELEASED:
			/* Stuck sends: the buffers are back, the bookkeeping stays
			 * charged until the job is freed. */
			job_region_released(d, j);
			break;
		case DCMD_REMOVE_JOB:
			SC_DBG("job 0x%" PRIx64 " (handle %u) lane %u: %zu bytes back in the pool", j->id,
			       j->handle, j->lane, j->mem_bytes);
			if (++j->lead->lanes_removed == j->lead->lanes)
				job_free(d, j->lead);
			break;
		}
	}
}

/* ---- drain ----
 *
 * SIGTERM, SIGINT or POST /drain. Joins are refused from then on and jobs
 * still joining are aborted. A READY job whose attached ranks all speak
 * DRAIN (wire version 5) is asked to move off: DRAIN to each rank, and the
 * job keeps being served until its ranks have left by the clean LEAVE path
 * (job_rank_gone), which counts it drained. A job with an older rank keeps
 * the old path: once no chunk of it is half reduced it gets ABORT(shutdown)
 * (its ranks take that as a fault). At drain-timeout whatever is left is
 * aborted, with a WARN naming it; the loop exits once no job remains. */

/* Every rank still attached speaks DRAIN (ranks that left need nothing). */
static bool job_speaks_drain(const struct job *j)
{
	for (uint32_t r = 0; r < j->nranks; r++) {
		const struct conn *c = j->ranks[r].conn;
		if (c && c->ver < WIRE_DRAIN_VERSION)
			return false;
	}
	return true;
}

static void job_drain_send(struct daemon *d, struct job *j)
{
	struct wire_msg m = { .type = WIRE_DRAIN };
	uint32_t told = 0;

	m.u.drain.deadline_ms = (uint32_t)d->cfg.drain_timeout_ms;
	j->draining = true;
	j->drain_ms = sc_now_ms();
	j->drain_chunks = job_sum_chunks(j);
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->ranks[r].conn && !conn_send(j->ranks[r].conn, &m))
			told++;
	SC_INFO("job 0x%" PRIx64 " (handle %u): DRAIN sent to %u rank(s), served for up to %lld ms "
		"while they move off", j->id, j->handle, told, (long long)d->cfg.drain_timeout_ms);
}

static bool job_half_reduced(const struct job *j)
{
	return job_sum_partial(j) != 0;
}

static void drain_abort(struct daemon *d, struct job *j)
{
	if (j->state == JOB_ENDING)
		return;
	d->drain_aborted++;
	job_abort(d, j, WIRE_E_SHUTDOWN, "daemon is shutting down");
}

/* Time is up (or a second signal): WARN naming the jobs that did not move
 * off, ABORT(shutdown) to every job left. */
static void drain_abort_rest(struct daemon *d, uint64_t waited)
{
	char ids[200] = "";
	size_t len = 0;
	uint32_t n = 0;

	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link)) {
		if (j->state == JOB_ENDING)
			continue;
		if (n++ < 8 && len < sizeof(ids)) {
			int w = snprintf(ids + len, sizeof(ids) - len, "%s0x%" PRIx64 "%s", n > 1 ? ", " : "",
					 j->id, j->draining ? "" : " (no DRAIN: older ranks)");
			len += w > 0 ? (size_t)w : 0;
		}
	}
	if (!n)
		return;
	SC_WARN("drain: %u job(s) did not move off within %llu ms (drain-timeout %lld ms), aborting "
		"them: %s%s", n, (unsigned long long)waited, (long long)d->cfg.drain_timeout_ms, ids,
		n > 8 ? ", ..." : "");
	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link))
		drain_abort(d, j);
}

static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	uint64_t waited = sc_now_ms() - d->drain_start_ms;

	(void)fd;
	(void)what;
	if (!d->stopping) {
		bool late = waited >= (uint64_t)d->cfg.drain_timeout_ms;
		uint32_t moving = 0, busy = 0;
		for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link)) {
			if (j->state == JOB_ENDING)
				continue;
			if (j->draining)
				moving++;
			else if (job_half_reduced(j))
				busy++;
			else if (!late) /* the old path: between chunks, told to go */
				drain_abort(d, j);
		}
		notify_draining(d, moving, busy);
		if ((moving || busy) && !late)
			return;
		d->stopping = true;
		drain_abort_rest(d, waited);
		d->drain_start_ms = sc_now_ms();
		SC_INFO("drain: %" PRIu64 " job(s) moved off, %u aborted after %llu ms",
			ctr_get(&d->stats.jobs_drained), d->drain_aborted, (unsigned long long)waited);
		daemon_notify("STATUS=Stopping: waiting for ABORTs to be written");
	}
	/* Wait (bounded) for ABORTs to be written and jobs to release memory. */
	bool busy = false;
	for (struct conn *c = LIST_FIRST(&d->conns); c; c = LIST_NEXT(c, link))
		if (c->state == CONN_CLOSING)
			busy = true;
	if (!SLIST_EMPTY(&d->jobs))
		busy = true;
	if (!busy || sc_now_ms() - d->drain_start_ms > 2000)
		event_base_loopexit(d->base, NULL);
}

int control_drain(struct daemon *d)
{
	struct timeval tv = { 0, 50000 };
	uint32_t asked = 0;

	if (d->draining)
		return 0;
	d->draining = true;
	d->drain_start_ms = sc_now_ms();
	d->drain_began_unix = sc_wall_s();
	daemon_notify("STOPPING=1\nSTATUS=Draining: refusing joins, asking jobs to move off");
	SC_INFO("draining: refusing joins, asking jobs to move off; waiting up to %lld ms",
		(long long)d->cfg.drain_timeout_ms);
	if (d->listener)
		evconnlistener_disable(d->listener);
	for (struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link)) {
		if (j->state == JOB_JOINING)
			drain_abort(d, j);
		else if (j->state == JOB_READY && job_speaks_drain(j)) {
			job_drain_send(d, j);
			asked++;
		}
	}
	d->ev_drain = event_new(d->base, -1, EV_PERSIST, drain_cb, d);
	if (!d->ev_drain) {
		event_base_loopexit(d->base, NULL);
		return (int)asked;
	}
	/* First look in 50 ms, not now: a POST /drain's answer is written
	 * before a drain with nothing to wait for ends the loop. */
	event_add(d->ev_drain, &tv);
	return (int)asked;
}

void control_drain_now(struct daemon *d)
{
	if (!d->draining) {
		control_drain(d);
		return;
	}
	SC_WARN("second stop signal: aborting jobs now");
	d->cfg.drain_timeout_ms = 0;
}

uint32_t control_draining_jobs(const struct daemon *d)
{
	uint32_t n = 0;

	for (const struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link))
		n += j->state != JOB_ENDING && j->draining;
	return n;
}

/* ---- queries ---- */

uint32_t control_ranks(const struct daemon *d)
{
	uint32_t n = 0;

	for (const struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link))
		if (j->state != JOB_ENDING)
			for (uint32_t r = 0; r < j->nranks; r++)
				n += j->ranks[r].state == RANK_JOINED;
	return n;
}

/* ---- start, stop ---- */

/* fabric.multicast: ib needs an RDMA device on the interface (its port's
 * MTU sizes the packets), ip a UDP sender that opens on it; auto takes ib
 * where there is a device (kernel bypass), else ip, else unicast with a
 * line saying why. */
static int mc_resolve(struct daemon *d)
{
	const struct settings *s = &d->cfg;
	const char *ifa = settings_mc_iface(s);
	bool ib = !strcmp(s->multicast, "ib"), autom = !strcmp(s->multicast, "auto");
	struct sc_mc_sender tx;
	struct sockaddr_in g = { .sin_family = AF_INET };
	char why[256], why_ib[256] = "";
	size_t mtu;
	int rc;

	d->mc = false;
	if (!strcmp(s->multicast, "off"))
		return 0;
	if (settings_parse_groups(s->multicast_groups, &d->mc_first, &d->mc_count))
		return -EINVAL; /* settings_check said so already */
	if (ib || autom) {
		rc = sc_mc_ib_probe(ifa, &mtu, why_ib, sizeof(why_ib));
		if (!rc && mtu > SC_MC_HDR + 64) {
			d->mc = true;
			d->mc_via = SC_MC_VIA_IB;
			d->mc_payload = (uint16_t)(mtu - SC_MC_HDR);
			SC_INFO("multicast results: InfiniBand/RoCE UD, a group of %s per job, from %s, "
				"port MTU %zu", s->multicast_groups, ifa, mtu);
			return 0;
		}
		if (!rc)
			snprintf(why_ib, sizeof(why_ib), "the port's MTU of %zu is too small", mtu);
		if (ib) {
			SC_ERR("fabric.multicast = ib: %s", why_ib);
			return rc ? rc : -EMSGSIZE;
		}
	}
	g.sin_addr.s_addr = htonl(d->mc_first);
	g.sin_port = htons((uint16_t)s->multicast_port);
	d->mc_via = SC_MC_VIA_IP;
	d->mc_payload = (uint16_t)(s->multicast_mtu - 28 - SC_MC_HDR);
	rc = sc_mc_sender_open(&tx, SC_MC_VIA_IP, ifa, &g, d->mc_payload, why, sizeof(why));
	if (rc) {
		if (!autom) {
			SC_ERR("fabric.multicast = ip: %s", why);
			return rc;
		}
		SC_WARN("fabric.multicast = auto: results go by unicast (ib: %s; ip: %s)", why_ib, why);
		return 0;
	}
	sc_mc_sender_close(&tx);
	d->mc = true;
	if (autom)
		SC_INFO("fabric.multicast = auto: IP multicast (ib: %s)", why_ib);
	SC_INFO("multicast results: a group of %s per job, UDP port %lld, from %s, MTU %lld",
		s->multicast_groups, (long long)s->multicast_port, ifa, (long long)s->multicast_mtu);
	return 0;
}

int control_start(struct daemon *d)
{
	if (ctl_key_load(d->cfg.key_file, d->key, &d->key_len))
		return -EINVAL;
	if (mc_resolve(d))
		return -EINVAL;
	if (!d->key_len)
		SC_WARN("authentication is off (auth.key-file is empty): anyone who reaches the control port can join jobs");
	d->next_handle = 1;
	d->ev_queue = event_new(d->base, d->evq.efd, EV_READ | EV_PERSIST, queue_cb, d);
	if (!d->ev_queue || event_add(d->ev_queue, NULL) || pacer_start(d))
		return -ENOMEM;
	return conn_listen_start(d);
}

void control_stop(struct daemon *d)
{
	conn_free_all(d);
	while (!SLIST_EMPTY(&d->jobs))
		job_free(d, SLIST_FIRST(&d->jobs));
	conn_listen_stop(d);
	pacer_stop(d);
	if (d->ev_queue)
		event_free(d->ev_queue);
	if (d->ev_drain)
		event_free(d->ev_drain);
	d->ev_queue = d->ev_drain = NULL;
}
