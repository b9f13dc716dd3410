/* SUMCAST_AGGREGATORS resolved, and its compact form (agglist.h). */
#include "agglist.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "hostport.h"

#define SEPS ", \t\r\n"
#define FILE_MAX (64u << 10)
#define SRV_MAX 64
#define NAME_ADDRS_MAX 64 /* addresses one name contributes */

struct acc {
	uint16_t port; /* for entries without one */
	struct agg_addr *out;
	size_t max, n;
	char *why;
	size_t whylen;
};

__attribute__((format(printf, 3, 4))) static int say(struct acc *a, int err, const char *fmt, ...)
{
	va_list ap;

	if (a->why && a->whylen) {
		va_start(ap, fmt);
		vsnprintf(a->why, a->whylen, fmt, ap);
		va_end(ap);
	}
	return err;
}

static int addr_cmp(const void *x, const void *y)
{
	const struct agg_addr *a = x, *b = y;
	int c;

	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	c = memcmp(a->addr, b->addr, a->family == 4 ? 4 : 16);
	if (c)
		return c;
	return a->port < b->port ? -1 : a->port > b->port;
}

static int add(struct acc *a, const struct agg_addr *e, const char *entry)
{
	for (size_t i = 0; i < a->n; i++)
		if (!addr_cmp(&a->out[i], e))
			return 0; /* listed already: kept at its first place */
	if (a->n == a->max)
		return say(a, -E2BIG, "\"%s\": more than %zu aggregators", entry, a->max);
	a->out[a->n++] = *e;
	return 0;
}

/* host's addresses with port: an IP literal as it is; a name's IPv4
 * addresses, or its IPv6 ones where it has no IPv4 one, sorted. */
static int add_host(struct acc *a, const char *host, uint16_t port, const char *entry)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *r;
	struct agg_addr got[NAME_ADDRS_MAX], e;
	size_t ng = 0;
	bool v4 = false;
	int rc;

	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc)
		return say(a, -ENOENT, "\"%s\": %s does not resolve: %s", entry, host,
			   rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
	for (r = res; r; r = r->ai_next)
		v4 |= r->ai_family == AF_INET;
	for (r = res; r && ng < sizeof(got) / sizeof(got[0]); r = r->ai_next) {
		memset(&e, 0, sizeof(e));
		e.port = port;
		if (r->ai_family == AF_INET) {
			e.family = 4;
			memcpy(e.addr, &((struct sockaddr_in *)(void *)r->ai_addr)->sin_addr, 4);
		} else if (r->ai_family == AF_INET6 && !v4) {
			e.family = 6;
			memcpy(e.addr, &((struct sockaddr_in6 *)(void *)r->ai_addr)->sin6_addr, 16);
		} else {
			continue;
		}
		got[ng++] = e;
	}
	freeaddrinfo(res);
	if (!ng)
		return say(a, -ENOENT, "\"%s\": %s has no IPv4 or IPv6 address", entry, host);
	qsort(got, ng, sizeof(got[0]), addr_cmp);
	for (size_t i = 0; i < ng; i++)
		if ((rc = add(a, &got[i], entry)))
			return rc;
	return 0;
}

struct srv {
	uint16_t prio, weight, port;
	char target[NS_MAXDNAME];
};

static int srv_cmp(const void *x, const void *y)
{
	const struct srv *a = x, *b = y;
	int c;

	if (a->prio != b->prio)
		return a->prio < b->prio ? -1 : 1;
	if (a->weight != b->weight)
		return a->weight > b->weight ? -1 : 1;
	c = strcmp(a->target, b->target);
	if (c)
		return c;
	return a->port < b->port ? -1 : a->port > b->port;
}

static int add_srv(struct acc *a, const char *name, const char *entry)
{
	struct __res_state rs;
	unsigned char ans[8192];
	char qname[NS_MAXDNAME];
	struct srv *recs;
	size_t nrec = 0;
	ns_msg msg;
	int len, rc = 0;

	if (!*name)
		return say(a, -EINVAL, "\"%s\": no name after srv:", entry);
	snprintf(qname, sizeof(qname), name[0] == '_' ? "%s" : "_sumcast._tcp.%s", name);
	memset(&rs, 0, sizeof(rs));
	if (res_ninit(&rs))
		return say(a, -ENOENT, "\"%s\": the resolver does not start (res_ninit)", entry);
	len = res_nquery(&rs, qname, ns_c_in, ns_t_srv, ans, sizeof(ans));
	if (len < 0) {
		rc = say(a, -ENOENT, "\"%s\": no SRV record %s: %s", entry, qname, hstrerror(rs.res_h_errno));
		goto out_res;
	}
	if (ns_initparse(ans, len, &msg)) {
		rc = say(a, -ENOENT, "\"%s\": the answer for %s does not parse", entry, qname);
		goto out_res;
	}
	recs = calloc(SRV_MAX, sizeof(*recs));
	if (!recs) {
		rc = say(a, -ENOMEM, "\"%s\": out of memory", entry);
		goto out_res;
	}
	for (int i = 0; i < ns_msg_count(msg, ns_s_an) && nrec < SRV_MAX; i++) {
		ns_rr rr;
		const unsigned char *d;
		if (ns_parserr(&msg, ns_s_an, i, &rr) || ns_rr_type(rr) != ns_t_srv || ns_rr_rdlen(rr) < 7)
			continue;
		d = ns_rr_rdata(rr);
		recs[nrec].prio = ns_get16(d);
		recs[nrec].weight = ns_get16(d + 2);
		recs[nrec].port = ns_get16(d + 4);
		if (dn_expand(ns_msg_base(msg), ns_msg_end(msg), d + 6, recs[nrec].target,
			      sizeof(recs[nrec].target)) < 0 ||
		    !recs[nrec].port || !recs[nrec].target[0] || !strcmp(recs[nrec].target, "."))
			continue; /* "." : the service is decidedly not here */
		nrec++;
	}
	if (!nrec)
		rc = say(a, -ENOENT, "\"%s\": %s has no usable SRV record", entry, qname);
	qsort(recs, nrec, sizeof(*recs), srv_cmp);
	for (size_t i = 0; i < nrec && !rc; i++)
		rc = add_host(a, recs[i].target, recs[i].port, entry);
	free(recs);
out_res:
	res_nclose(&rs);
	return rc;
}

static int add_entry(struct acc *a, const char *entry, bool in_file);

static int add_file(struct acc *a, const char *path, const char *entry)
{
	FILE *f = fopen(path, "re");
	char *text, *line, *save = NULL;
	size_t len;
	int rc = 0;

	if (!f)
		return say(a, -EINVAL, "\"%s\": cannot read %s: %s", entry, path, strerror(errno));
	text = malloc(FILE_MAX + 1);
	if (!text) {
		fclose(f);
		return say(a, -ENOMEM, "\"%s\": out of memory", entry);
	}
	len = fread(text, 1, FILE_MAX + 1, f);
	fclose(f);
	if (len > FILE_MAX) {
		free(text);
		return say(a, -EINVAL, "\"%s\": %s is larger than %u bytes", entry, path, FILE_MAX);
	}
	text[len] = '\0';
	for (line = strtok_r(text, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
		char *hash = strchr(line, '#'), *tok, *s2 = NULL;
		if (hash)
			*hash = '\0';
		for (tok = strtok_r(line, SEPS, &s2); tok && !rc; tok = strtok_r(NULL, SEPS, &s2))
			rc = add_entry(a, tok, true);
	}
	free(text);
	return rc;
}

static int add_entry(struct acc *a, const char *entry, bool in_file)
{
	struct hostport hp;
	char why[192];

	if (entry[0] == '@' || !strncmp(entry, "file:", 5)) {
		if (in_file)
			return say(a, -EINVAL, "\"%s\": a file within a file", entry);
		return add_file(a, entry + (entry[0] == '@' ? 1 : 5), entry);
	}
	if (!strncmp(entry, "srv:", 4))
		return add_srv(a, entry + 4, entry);
	if (!strchr(entry, ':') && !strchr(entry, '[')) {
		if (strlen(entry) >= HOSTPORT_HOST_MAX)
			return say(a, -EINVAL, "\"%.40s...\": the host is too long", entry);
		return add_host(a, entry, a->port, entry);
	}
	if (hostport_parse(entry, &hp, why, sizeof(why)))
		return say(a, -EINVAL, "%s", why);
	return add_host(a, hp.host, hp.port, entry);
}

int agglist_resolve(const char *spec, uint16_t port, struct agg_addr *out, size_t max, size_t *n,
		    char *why, size_t whylen)
{
	struct acc a = { .port = port, .max = max, .why = why, .whylen = whylen };
	char *copy, *tok, *save = NULL;
	int rc = 0;

	if (!spec || !*spec) {
		*n = 0;
		return 0;
	}
	a.out = calloc(max ? max : 1, sizeof(*a.out));
	copy = strdup(spec);
	if (!a.out || !copy) {
		free(a.out);
		free(copy);
		return say(&a, -ENOMEM, "out of memory");
	}
	for (tok = strtok_r(copy, SEPS, &save); tok && !rc; tok = strtok_r(NULL, SEPS, &save))
		rc = add_entry(&a, tok, false);
	if (!rc) {
		memcpy(out, a.out, a.n * sizeof(*out));
		*n = a.n;
	}
	free(copy);
	free(a.out);
	return rc;
}

const char *agglist_text(const struct agg_addr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->addr, ip, sizeof(ip));
	snprintf(buf, len, a->family == 4 ? "%s:%u" : "[%s]:%u", ip, a->port);
	return buf;
}

const char *agglist_join(const struct agg_addr *a, size_t n, char *buf, size_t len)
{
	size_t k = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < n && k < len; i++) {
		char t[AGGLIST_TEXT_MAX];
		int w = snprintf(buf + k, len - k, "%s%s", i ? "," : "", agglist_text(&a[i], t, sizeof(t)));
		if (w < 0 || (size_t)w >= len - k) {
			if (len > 4)
				memcpy(buf + len - 4, "...", 4);
			break;
		}
		k += (size_t)w;
	}
	return buf;
}

uint32_t agglist_digest(const struct agg_addr *a, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++) {
		uint8_t b[19];
		size_t bl = 0;
		b[bl++] = a[i].family;
		memcpy(b + bl, a[i].addr, a[i].family == 4 ? 4 : 16);
		bl += a[i].family == 4 ? 4 : 16;
		b[bl++] = (uint8_t)(a[i].port >> 8);
		b[bl++] = (uint8_t)a[i].port;
		for (size_t k = 0; k < bl; k++)
			h = (h ^ b[k]) * 16777619u;
	}
	return h ? h : 1;
}

void agglist_sort(struct agg_addr *a, size_t n)
{
	qsort(a, n, sizeof(*a), addr_cmp);
}

int agglist_all_loopback(const struct agg_addr *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char t[AGGLIST_TEXT_MAX];
		struct hostport hp;
		if (hostport_parse(agglist_text(&a[i], t, sizeof(t)), &hp, NULL, 0) ||
		    !hostport_is_loopback(hp.host))
			return 0;
	}
	return n > 0;
}

int agglist_pack(const struct agg_addr *a, size_t n, uint8_t *buf, size_t cap, uint8_t *fmt)
{
	uint8_t f = AGGLIST_F_ONE_PORT | AGGLIST_F_ALL_V4;
	size_t need = 0, k = 0;

	for (size_t i = 0; i < n; i++) {
		if (a[i].family != 4)
			f &= (uint8_t)~AGGLIST_F_ALL_V4;
		if (a[i].port != a[0].port)
			f &= (uint8_t)~AGGLIST_F_ONE_PORT;
	}
	if (f & AGGLIST_F_ONE_PORT)
		need += 2;
	for (size_t i = 0; i < n; i++)
		need += (f & AGGLIST_F_ALL_V4 ? 0 : 1) + (a[i].family == 4 ? 4 : 16) +
			(f & AGGLIST_F_ONE_PORT ? 0 : 2);
	if (need > cap)
		return -E2BIG;
	if (f & AGGLIST_F_ONE_PORT && n) {
		buf[k++] = (uint8_t)a[0].port;
		buf[k++] = (uint8_t)(a[0].port >> 8);
	}
	for (size_t i = 0; i < n; i++) {
		size_t al = a[i].family == 4 ? 4 : 16;
		if (!(f & AGGLIST_F_ALL_V4))
			buf[k++] = a[i].family;
		memcpy(buf + k, a[i].addr, al);
		k += al;
		if (!(f & AGGLIST_F_ONE_PORT)) {
			buf[k++] = (uint8_t)a[i].port;
			buf[k++] = (uint8_t)(a[i].port >> 8);
		}
	}
	*fmt = f;
	return (int)k;
}

int agglist_unpack(const uint8_t *buf, size_t len, uint8_t fmt, size_t n, struct agg_addr *out)
{
	uint16_t port = 0;
	size_t k = 0;

	if (fmt & ~AGGLIST_F_MASK)
		return -EBADMSG;
	if (fmt & AGGLIST_F_ONE_PORT && n) {
		if (len < 2)
			return -EBADMSG;
		port = (uint16_t)(buf[0] | buf[1] << 8);
		k = 2;
	}
	for (size_t i = 0; i < n; i++) {
		struct agg_addr e = { .family = 4 };
		size_t al;
		if (!(fmt & AGGLIST_F_ALL_V4)) {
			if (k >= len || (buf[k] != 4 && buf[k] != 6))
				return -EBADMSG;
			e.family = buf[k++];
		}
		al = e.family == 4 ? 4 : 16;
		if (k + al > len)
			return -EBADMSG;
		memcpy(e.addr, buf + k, al);
		k += al;
		if (fmt & AGGLIST_F_ONE_PORT) {
			e.port = port;
		} else {
			if (k + 2 > len)
				return -EBADMSG;
			e.port = (uint16_t)(buf[k] | buf[k + 1] << 8);
			k += 2;
		}
		if (!e.port)
			return -EBADMSG;
		out[i] = e;
	}
	return k == len ? 0 : -EBADMSG;
}
