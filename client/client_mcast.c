/* Client library: results by multicast (docs/daemon.md, "Multicast
 * results"): joining the group, taking results from its datagrams, and
 * asking for lost ones by NACK.
 *
 * In a job whose aggregator multicasts (WIRE_OK_F_MCAST), the result of a
 * chunk that two or more ranks take (chunk_takers: the aggregator counts
 * the same from the modes) goes to the group; every other result, and one
 * a rank asked for by NACK, comes by unicast RESULT as before. A rank in
 * the group assembles such a result from the datagrams into the place its
 * receive would have used (sc_mc_rx) and posts no receive for it; when it
 * misses datagrams it posts the receive, then sends a NACK (a tagged
 * message of its own, tag NACK, the chunk's slot), and exactly one unicast
 * RESULT answers (the datagrams may still complete it first: the unicast
 * then brings the same bytes, and the slot waits for it). A rank out of
 * the group NACKs each such chunk once its data is posted. A rank in it
 * NACKs a chunk mc_nack_ns after the first evidence of a loss
 * (sc_mc_rx_gap, a later chunk completed, or no datagram from the group
 * yet at all), or 100 x mc_nack_ns after it was expected in any case. */
#include "client_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"

/* A new chunk of r (bytes [off, off + len)) in slot s, its result landing
 * at dst: true when its result comes from the group there (assembly set
 * up), false when a unicast receive must be posted (not a multicast
 * result, or this rank is not in the group: then a NACK asks for it). */
bool client_mc_expect(struct client *c, struct client_agg *a, struct client_slot *s,
		      const struct client_req *r, size_t off, size_t len, uint8_t *dst)
{
	s->mc_exp = s->mc_done = s->mc_got = s->nack_due = s->nacked = 0;
	s->mc_ev = 0;
	if (!a->mc || !client_slot_result_len(s) || client_chunk_takers(c, r, off, len) < 2)
		return false;
	s->mc_exp = 1;
	s->mc_t0 = sc_now_ns();
	uint32_t full = (uint32_t)(client_slot_result_len(s) + (a->sealed ? SC_SEAL_TAG : 0));
	if (a->mc_in && !sc_mc_rx_expect(&a->mc_rx, s->chunk, full, wire_imm_plain(s->imm), dst))
		return true;
	s->nack_due = 1;
	return false;
}

/* Sends slot si's NACK: its unicast receive is posted (the answer lands
 * where the datagrams would). */
int client_mc_nack(struct client *c, struct client_agg *a, uint32_t si)
{
	struct client_slot *s = &a->slots[si];
	struct sc_mc_nack m = { .job = a->job_handle, .rank = c->rank, .chunk = s->chunk };
	uint8_t buf[SC_MC_NACK_MAX + SC_SEAL_TAG];
	uint32_t full = (uint32_t)(client_slot_result_len(s) + (a->sealed ? SC_SEAL_TAG : 0));

	m.nranges = a->mc_in ? (uint8_t)sc_mc_rx_missing(&a->mc_rx, s->chunk, m.r, a->mc_nack_ranges) : 0;
	if (!m.nranges) { /* not in the group, or nothing of it assembled */
		m.nranges = 1;
		m.r[0] = (struct sc_mc_range){ 0, full };
	}
	SC_DBG("%s: NACK chunk %llu after %.1f ms (evidence %.1f ms ago, %s); tick %llu, hi %llu, %u ranges",
		 a->name, (unsigned long long)s->chunk, (sc_now_ns() - s->mc_t0) / 1e6,
		 s->mc_ev ? (sc_now_ns() - s->mc_ev) / 1e6 : -1.0, a->mc_in ? "in" : "out",
		 (unsigned long long)a->mc_rx.tick, (unsigned long long)a->mc_hi, m.nranges);
	int n = sc_mc_nack_encode(&m, buf, sizeof(buf));
	uint32_t imm = wire_imm_with_mode(s->imm, WIRE_MODE_NACK);
	if (n > 0 && a->sealed) {
		if (sc_seal(&a->seal, SC_SEAL_NACK, (uint16_t)c->rank, s->chunk, imm, buf, (size_t)n, buf)) {
			client_agg_down(c, a, -EIO, "%s: sealing a NACK failed (OpenSSL)", a->name);
			return -EIO;
		}
		n += SC_SEAL_TAG;
	}
	if (n < 0)
		return 0; /* cannot happen: the ranges fit (mc_nack_ranges) */
	int rc = fabric_tinject(a->ep, buf, (size_t)n, client_agg_addr(a, si),
				wire_tag_make(WIRE_TAG_NACK, a->job_handle, c->rank, si), imm);
	if (rc == -FI_EAGAIN) {
		s->nack_due = 1;
		return rc;
	}
	if (rc) {
		client_agg_down(c, a, -EIO, "%s: sending a NACK for chunk seq %u: %s", a->name, s->seq,
				fi_strerror(-rc));
		return rc;
	}
	s->nack_due = 0;
	s->nacked = 1;
	a->mc_nacks++;
	return 0;
}

/* The group's datagrams completed chunk: the slot layer takes it in. */
static void mc_done(void *arg, uint64_t chunk)
{
	struct client_agg *a = arg;
	struct client_slot *s = &a->slots[chunk % a->window];

	if (s->req < 0 || s->chunk != chunk || !s->mc_exp || s->mc_done)
		return; /* cannot happen: only expected chunks complete */
	s->mc_got = 1;
}

void client_mc_recv(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];

	if (!a->mc_in)
		return;
	int n = sc_mc_receiver_poll(&a->mc_sock, &a->mc_rx, 8192, mc_done, a); /* what is there */
	if (n < 0) {
		snprintf(a->mc_why, sizeof(a->mc_why), "reading the group failed: %s", strerror(-n));
		SC_WARN("%s: %s; results by unicast from now on", a->name, a->mc_why);
		client_mc_leave(a);
	}
}

void client_mc_due(struct client *c, size_t ai)
{
	struct client_agg *a = &c->aggs[ai];
	uint64_t now = sc_now_ns();

	if (!a->inflight || a->st == AGG_DEAD)
		return;
	for (uint32_t si = 0; si < a->window; si++) {
		struct client_slot *s = &a->slots[si];
		if (s->req < 0 || !s->mc_exp || s->mc_done || s->nacked || s->send_pending)
			continue;
		bool due = s->nack_due || !a->mc_in;
		if (!due) {
			/* Evidence of loss (a gap, or a later result began or
			 * completed) held for mc_nack_ns: reordering is over by
			 * then. Without evidence, only a long silence: the result
			 * may still queue behind the other aggregators' on this
			 * node's link, or wait for a slow rank. */
			/* (nothing from the group yet at all: the switch may not
			 * have learnt the join, so no evidence would ever come) */
			bool lost = sc_mc_rx_gap(&a->mc_rx, s->chunk) || a->mc_hi > s->chunk + 1 ||
				    !a->mc_rx.tick;
			if (!lost)
				s->mc_ev = 0;
			else if (!s->mc_ev)
				s->mc_ev = now;
			due = (lost && now - s->mc_ev > c->mc_nack_ns) || now - s->mc_t0 > 100 * c->mc_nack_ns;
		}
		if (due)
			s->nack_due = 1;
	}
}

void client_mc_leave(struct client_agg *a)
{
	if (!a->mc_in)
		return;
	sc_mc_receiver_close(&a->mc_sock);
	a->mc_in = false;
}

void client_mc_join(struct client *c, size_t ai, const struct wire_join_ok *o)
{
	struct client_agg *a = &c->aggs[ai];
	size_t tag = a->sealed ? SC_SEAL_TAG : 0;
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	char ifa[INET_ADDRSTRLEN] = "";
	struct sockaddr_in g = { .sin_family = AF_INET, .sin_port = htons(o->mc_port),
				 .sin_addr.s_addr = htonl(o->mc_group) };
	enum sc_mc_via via = o->flags & WIRE_OK_F_MCAST_IB ? SC_MC_VIA_IB : SC_MC_VIA_IP;

	a->mc = true;
	if (a->ep->inject_size < 24 + 8 + tag) {
		client_agg_down(c, a, -EPROTO, "%s multicasts results, and a NACK (%zu bytes) is more than "
				"%s injects (%zu)", a->name, 24 + 8 + tag, fabric_provider(a->ep),
				a->ep->inject_size);
		return;
	}
	size_t nr = (a->ep->inject_size - 24 - tag) / 8;
	a->mc_nack_ranges = nr < SC_MC_NACK_RANGES ? (uint32_t)nr : SC_MC_NACK_RANGES;
	if (c->multicast == CLIENT_MC_NOJOIN) {
		snprintf(a->mc_why, sizeof(a->mc_why), "told not to join (CLIENT_MC_NOJOIN)");
		return;
	}
	/* the interface this rank reaches the aggregator from */
	if (getsockname(a->fd, (struct sockaddr *)&me, &ml) || me.ss_family != AF_INET ||
	    !inet_ntop(AF_INET, &((struct sockaddr_in *)&me)->sin_addr, ifa, sizeof(ifa))) {
		snprintf(a->mc_why, sizeof(a->mc_why), "the control connection is not IPv4");
	} else if (sc_mc_rx_init(&a->mc_rx, o->job_handle, o->mc_key, o->window, o->mc_payload,
				 o->chunk_bytes + tag)) {
		snprintf(a->mc_why, sizeof(a->mc_why), "out of memory for the group's assembly");
	} else if (sc_mc_receiver_open(&a->mc_sock, via, &g, ifa, o->mc_payload, a->mc_why,
				       sizeof(a->mc_why)) == 0) {
		a->mc_rx.drop_permille = c->mc_drop_permille;
		a->mc_rx.seed ^= 0x9e3779b97f4a7c15ull * (c->rank + 1); /* ranks drop apart */
		a->mc_in = true;
		a->mc_why[0] = '\0';
		return;
	} else {
		sc_mc_rx_fini(&a->mc_rx);
	}
	SC_WARN("%s: cannot take results from multicast group (%s); this rank asks for each by unicast",
		a->name, a->mc_why);
}
