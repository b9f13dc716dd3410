/* sumcastctl's reading of the Prometheus text at /metrics: samples,
 * sums over label sets, histogram quantiles. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sumcastctl.h"

void metrics_parse(const char *text, struct metrics *m)
{
	const char *p = text;

	m->s = NULL;
	m->n = 0;
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char line[1024];

		if (len && len < sizeof(line) && *p != '#') {
			struct sample s = { 0 };
			char *q, *val;
			memcpy(line, p, len);
			line[len] = '\0';
			q = line + strcspn(line, "{ ");
			if (*q == '{') {
				char *end = strchr(q, '}');
				if (end) {
					*q = '\0';
					*end = '\0';
					snprintf(s.labels, sizeof(s.labels), "%s", q + 1);
					val = end + 1;
				} else {
					val = NULL;
				}
			} else {
				*q = '\0';
				val = q + 1;
			}
			snprintf(s.name, sizeof(s.name), "%.127s", line);
			if (val) {
				char *endv;
				while (*val == ' ')
					val++;
				s.v = strtod(val, &endv);
				if (endv != val) {
					struct sample *ns = realloc(m->s, (m->n + 1) * sizeof(*ns));
					if (!ns)
						die(EXIT_BAD_ANSWER, "out of memory");
					m->s = ns;
					m->s[m->n++] = s;
				}
			}
		}
		p += len + (eol ? 1 : 0);
	}
}

void metrics_fetch(struct metrics *m)
{
	struct body b = { 0 };
	long st = http_get("/metrics", &b, NULL, 0);

	if (st != 200)
		die(EXIT_BAD_ANSWER, "GET /metrics: HTTP %ld", st);
	metrics_parse(b.p, m);
	free(b.p);
}

/* Sum of every sample called name (all label sets); NAN if none. */
double metric_sum(const struct metrics *m, const char *name)
{
	double v = 0;
	bool found = false;

	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->s[i].name, name)) {
			v += m->s[i].v;
			found = true;
		}
	return found ? v : NAN;
}

/* Quantile q of histogram name, interpolated inside the bucket as
 * Prometheus' histogram_quantile() does. NAN if it has no observations. */
double hist_quantile(const struct metrics *m, const char *name, double q)
{
	char bname[160];
	double le[64], cum[64], prev_le = 0, prev_c = 0, rank;
	size_t n = 0;

	snprintf(bname, sizeof(bname), "%s_bucket", name);
	for (size_t i = 0; i < m->n && n < 64; i++) {
		const char *l;
		if (strcmp(m->s[i].name, bname) || !(l = strstr(m->s[i].labels, "le=\"")))
			continue;
		le[n] = strncmp(l + 4, "+Inf", 4) ? strtod(l + 4, NULL) : INFINITY;
		cum[n++] = m->s[i].v;
	}
	if (!n || cum[n - 1] <= 0)
		return NAN;
	rank = q * cum[n - 1];
	for (size_t i = 0; i < n; i++) {
		if (cum[i] >= rank) {
			if (isinf(le[i]))
				return prev_le; /* highest finite bound, as Prometheus does */
			if (cum[i] == prev_c)
				return le[i];
			return prev_le + (le[i] - prev_le) * (rank - prev_c) / (cum[i] - prev_c);
		}
		prev_le = le[i];
		prev_c = cum[i];
	}
	return NAN;
}
