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

double split_model_fraction(const struct split_model *m)
{
	double n = m->nranks, r, k;

	if (m->naggs == 0)
		return 0;
	if (m->nranks < 2)
		return 1;
	r = 2 * (n - 1) / n;
	/* k: aggregator time per byte of a, in units of node-link time. */
	k = n * m->link_gbps / (m->naggs * m->agg_gbps);
	if (k <= 1)
		return 1; /* at a = 1 the node link is still the slower one */
	/* a + (1 - a) r = a k  ->  a = r / (k + r - 1) */
	return r / (k + r - 1);
}

double split_fraction(const struct split_model *m, size_t bytes)
{
	if (m->naggs == 0)
		return 0;
	if (m->fixed >= 0)
		return m->fixed;
	if (bytes <= m->small_bytes)
		return 2 < 2 * ((double)m->nranks - 1) ? 1 : 0;
	return split_model_fraction(m);
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
