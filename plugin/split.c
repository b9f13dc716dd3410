#include "split.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int split_parse(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s || !strcasecmp(s, "auto")) {
		*out = -1;
		return 0;
	}
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= 0 && v <= 1))
		return -EINVAL;
	*out = v;
	return 0;
}

/* Share of its link the aggregator path reaches while the ring runs too. */
static double agg_eff(const struct split_model *m)
{
	return m->agg_eff > 0 && m->agg_eff <= 1 ? m->agg_eff : 1;
}

double split_model_fraction(const struct split_model *m)
{
	double n = m->nranks, r, k, ke, a;

	if (m->naggs == 0)
		return 0;
	if (m->nranks < 2)
		return 1;
	r = 2 * (n - 1) / n;
	/* k: aggregator time per byte of a, in units of node-link time. */
	k = n * m->link_gbps / (m->naggs * m->agg_gbps);
	if (k <= 1)
		return 1; /* at a = 1 the node link is still the slower one */
	/* a + (1 - a) r = a k/e  ->  a = r / (k/e + r - 1) */
	ke = k / agg_eff(m);
	a = r / (ke + r - 1);
	/* a = 1 costs k node-link times (one pipeline, no e); the split a + (1-a) r. */
	return k <= a + (1 - a) * r ? 1 : a;
}

double split_fraction(const struct split_model *m, size_t bytes)
{
	double n = m->nranks, b = (double)bytes, r, lk, ag, fa, ta, tr, ts, ca, cs;

	if (m->naggs == 0)
		return 0;
	if (m->fixed >= 0)
		return m->fixed;
	if (m->nranks < 2)
		return 1;
	if (bytes <= m->small_bytes)
		return 2 < 2 * (n - 1) ? 1 : 0;
	r = 2 * (n - 1) / n;
	lk = 8 / m->link_gbps;                  /* ns per byte on a node link */
	ag = 8 / m->agg_gbps * n / m->naggs;    /* ns per byte of a on an aggregator */
	fa = split_model_fraction(m);
	ca = lk > ag ? lk : ag;
	ta = 2 * m->lat_us * 1e3 + b * ca;
	tr = 2 * (n - 1) * m->lat_us * 1e3 + b * r * lk;
	cs = (fa + (1 - fa) * r) * lk;
	if (fa * ag / agg_eff(m) > cs)
		cs = fa * ag / agg_eff(m);
	ts = 2 * n * m->lat_us * 1e3 + b * cs;
	if (!m->shared_host && fa > 0 && fa < 1 && ts < ta && ts < tr)
		return fa;
	return ta < tr ? 1 : 0;
}

bool split_window_agg(const struct split_model *m, size_t bytes, bool gather)
{
	double n = m->nranks, b = (double)bytes, lk, ag, ta, tr;

	if (m->naggs == 0 || bytes == 0 || bytes > SPLIT_WINDOW_AGG_MAX)
		return false;
	if (m->fixed >= 0)
		return m->fixed > 0;
	/* ns per window byte on the busiest direction of a node link and of
	 * an aggregator link (owner-only: reduce-scatter sends the whole
	 * window up, N/M windows into each aggregator; allgather brings
	 * (N-1)/N of it down, (N-1)/M windows out of each aggregator) */
	lk = 8 / m->link_gbps * (gather ? (n - 1) / n : 1);
	ag = 8 / m->agg_gbps * (gather ? n - 1 : n) / m->naggs;
	ta = 2 * m->lat_us * 1e3 + b * (lk > ag ? lk : ag);
	tr = (n - 1) * m->lat_us * 1e3 + b * (n - 1) / n * 8 / m->link_gbps;
	return ta < tr;
}

bool split_hosts_local(const char *aggs)
{
	const char *p = aggs;
	int n = 0;

	if (!p)
		return false;
	while (*p) {
		size_t len = strcspn(p, ", ");
		if (len) {
			char host[256];
			const char *colon;
			if (len >= sizeof(host))
				return false;
			memcpy(host, p, len);
			host[len] = 0;
			if (host[0] == '[') { /* [::1]:port */
				char *e = strchr(host, ']');
				if (!e)
					return false;
				*e = 0;
				memmove(host, host + 1, strlen(host + 1) + 1);
			} else if ((colon = strrchr(host, ':')) && strchr(host, ':') == colon) {
				host[colon - host] = 0;
			}
			if (strncmp(host, "127.", 4) && strcmp(host, "::1") && strcasecmp(host, "localhost"))
				return false;
			n++;
		}
		p += len;
		p += strspn(p, ", ");
	}
	return n > 0;
}

size_t split_count(double frac, size_t count, size_t elem_size)
{
	size_t per = 64 / elem_size, a;

	if (frac <= 0)
		return 0;
	if (frac >= 1)
		return count;
	a = (size_t)floor((double)count * frac);
	a -= a % per;
	return a > count ? count : a;
}
