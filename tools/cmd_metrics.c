/* sumcastctl metrics [PREFIX]: the Prometheus text, or the families
 * starting with PREFIX; with --json one object per sample. A PREFIX that
 * matches nothing is an error (exit 1, a sentence on stderr): a typo must
 * not read as "no such samples". */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sumcastctl.h"

int cmd_metrics(const struct opts *o, const char *prefix)
{
	struct body b = { 0 };
	long st = http_get("/metrics", &b, NULL, 0);
	size_t matched = 0;

	if (st != 200)
		die(EXIT_BAD_ANSWER, "GET /metrics: HTTP %ld", st);
	if (o->json) {
		struct metrics m;
		json_t *arr = json_array();
		metrics_parse(b.p, &m);
		for (size_t i = 0; i < m.n; i++) {
			if (prefix && strncmp(m.s[i].name, prefix, strlen(prefix)))
				continue;
			matched++;
			json_t *labels = json_object();
			const char *p = m.s[i].labels;
			while (*p) { /* name="value",... (our values never hold quotes) */
				const char *eq = strchr(p, '='), *q1, *q2;
				if (!eq || eq[1] != '"' || !(q2 = strchr((q1 = eq + 2), '"')))
					break;
				char k[64], v[128];
				snprintf(k, sizeof(k), "%.*s", (int)(eq - p), p);
				snprintf(v, sizeof(v), "%.*s", (int)(q2 - q1), q1);
				json_object_set_new(labels, k, json_string(v));
				p = q2 + 1;
				if (*p == ',')
					p++;
			}
			json_array_append_new(arr, json_pack("{s:s, s:o, s:f}", "name", m.s[i].name,
							     "labels", labels, "value", m.s[i].v));
		}
		if (!prefix || matched)
			json_print(arr);
		json_decref(arr);
		free(m.s);
	} else if (prefix) {
		char *save, *line;
		for (line = strtok_r(b.p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			const char *name = line;
			if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7))
				name = line + 7;
			if (!strncmp(name, prefix, strlen(prefix))) {
				puts(line);
				matched++;
			}
		}
	} else {
		fputs(b.p, stdout);
	}
	free(b.p);
	if (prefix && !matched) {
		fprintf(stderr, "sumcastctl metrics: no metric starts with \"%s\" (sumcastctl metrics lists "
				"them all)\n", prefix);
		return EXIT_BAD_ANSWER;
	}
	return 0;
}
