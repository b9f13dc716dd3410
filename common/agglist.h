/* SUMCAST_AGGREGATORS resolved: the list of aggregator addresses a node
 * joins, from literals, DNS names, SRV records and files, and its compact
 * binary form, which rank 0's collnet handle carries to every node
 * (plugin/collnet_listen.c, docs/client.md "Aggregators by name").
 *
 * Entries (commas or spaces between them, as hostport.h):
 *   host:port, [v6]:port  an IP literal: that address; a name: each of its
 *                         IPv4 addresses (A), or where it has none each
 *                         IPv6 one (AAAA), with that port. A dual-stack
 *                         daemon is one daemon, not two.
 *   host                  the same with the default port (the plugin's:
 *                         AGGLIST_PORT_DEFAULT, 7800, the daemon's
 *                         [control] port).
 *   srv:NAME              the SRV records of _sumcast._tcp.NAME (of NAME
 *                         itself when it starts with '_'): each target's
 *                         addresses as for a name, with the record's port,
 *                         records in priority order (lowest first), then
 *                         weight (highest first), target and port.
 *   @PATH, file:PATH      the entries of a file: one or more a line, '#'
 *                         starts a comment; no files within files.
 * A name's addresses are sorted (family, bytes) so that one node's order
 * does not depend on its resolver's rotation; an address listed twice is
 * kept once, at its first place. Resolution is glibc's: getaddrinfo (so
 * /etc/hosts and nsswitch apply) and res_nquery for SRV. */
#ifndef SUMCAST_AGGLIST_H
#define SUMCAST_AGGLIST_H

#include <stddef.h>
#include <stdint.h>

#define AGGLIST_PORT_DEFAULT 7800
#define AGGLIST_TEXT_MAX 48 /* "[ffff:...:ffff]:65535" and its NUL */

struct agg_addr {
	uint8_t family; /* 4 or 6 */
	uint8_t addr[16]; /* network byte order; IPv4 in the first 4 */
	uint16_t port;
};

/* spec into out[0..max), port the default port: 0 with *n entries (0 for an empty spec),
 * -EINVAL (an entry does not parse, a file cannot be read), -ENOENT (a
 * name or SRV record does not resolve) or -E2BIG (more than max), each with
 * a sentence in why that names the entry. out and *n are written only on
 * success. */
int agglist_resolve(const char *spec, uint16_t port, struct agg_addr *out, size_t max, size_t *n,
		    char *why, size_t whylen);

/* "10.0.0.5:7800" or "[fd00::5]:7800" into buf (AGGLIST_TEXT_MAX). */
const char *agglist_text(const struct agg_addr *a, char *buf, size_t len);

/* a[0..n) as "a:p,b:p" into buf; the end is cut with "..." if it does not fit. */
const char *agglist_join(const struct agg_addr *a, size_t n, char *buf, size_t len);

/* FNV-1a (32 bits) of the list in order: equal lists, equal digests. Never
 * 0 (0 means "no list"). */
uint32_t agglist_digest(const struct agg_addr *a, size_t n);

/* One canonical order (family, bytes, port): what nodes fall back to when
 * rank 0's list does not fit in its handle. */
void agglist_sort(struct agg_addr *a, size_t n);

/* Whether every entry is a loopback address (n > 0). */
int agglist_all_loopback(const struct agg_addr *a, size_t n);

/* The compact form: *fmt says how the entries are written (AGGLIST_F_*):
 * with AGGLIST_F_ONE_PORT one u16 port first, then each entry as its tag
 * byte (4 or 6, left out with AGGLIST_F_ALL_V4), its 4 or 16 address bytes
 * and (without AGGLIST_F_ONE_PORT) its u16 port, little-endian. Twelve IPv4
 * aggregators of one port take 50 bytes. */
#define AGGLIST_F_ONE_PORT 0x1
#define AGGLIST_F_ALL_V4 0x2
#define AGGLIST_F_MASK 0x3

/* Bytes written, or -E2BIG when the list needs more than cap. */
int agglist_pack(const struct agg_addr *a, size_t n, uint8_t *buf, size_t cap, uint8_t *fmt);
/* n entries from buf[0..len) in format fmt: 0, or -EBADMSG (too short,
 * trailing bytes, a bad tag or port 0). */
int agglist_unpack(const uint8_t *buf, size_t len, uint8_t fmt, size_t n, struct agg_addr *out);

#endif
