/* sumcastctl config: the daemon's effective configuration (/config), or
 * what /stats knows from a daemon without it. Where /config gives a
 * setting's "bound" value (the control and HTTP ports: port = 0 picks a
 * free one), that is what is printed, the configured value beside it. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sumcastctl.h"

int cmd_config(const struct opts *o)
{
	struct body b = { 0 };
	char ctype[128];
	long st = http_get("/config", &b, ctype, sizeof(ctype));

	if (st == 200) {
		if (strstr(ctype, "json")) {
			json_error_t je;
			json_t *j = json_loadb(b.p, b.len, 0, &je);
			if (!j)
				die(EXIT_BAD_ANSWER, "GET /config: bad JSON: %s", je.text);
			if (o->json) {
				json_print(j);
			} else {
				/* {"settings":[{"section","key","value","default","source"}...]} */
				json_t *e, *arr = json_object_get(j, "settings");
				size_t i;
				const char *sec = "";
				json_array_foreach(arr, i, e) {
					if (strcmp(sec, jstr(e, "section")))
						printf("%s[%s]\n", i ? "\n" : "", sec = jstr(e, "section"));
					/* a port of 0 is the one the daemon bound */
					const char *bound = json_string_value(json_object_get(e, "bound"));
					bool other = bound && strcmp(bound, jstr(e, "value"));
					printf("%s = %s", jstr(e, "key"), other ? bound : jstr(e, "value"));
					if (other)
						printf("    # bound; configured %s", jstr(e, "value"));
					else if (json_object_get(e, "source") && strcmp(jstr(e, "source"), "default"))
						printf("    # from %s, default %s", jstr(e, "source"),
						       jstr(e, "default"));
					printf("\n");
				}
			}
			json_decref(j);
		} else if (o->json) {
			json_t *j = json_pack("{s:s, s:s}", "format", "ini", "text", b.p);
			json_print(j);
			json_decref(j);
		} else {
			fputs(b.p, stdout);
		}
		free(b.p);
		return 0;
	}
	free(b.p);
	if (st != 404)
		die(EXIT_BAD_ANSWER, "GET /config: HTTP %ld", st);
	/* Older daemon without /config: what /stats knows. */
	json_t *s = get_json("/stats");
	if (o->json) {
		json_t *j = json_pack("{s:s, s:s, s:o, s:o, s:o}", "source", "/stats (daemon has no /config)",
				      "fabric.provider", jstr(s, "provider"), "data.threads",
				      jval(jnum(s, "threads")), "job.memory-budget", jval(jnum(s, "memory_budget")),
				      "job.timeout_ms", jval(jnum(s, "timeout_ms")));
		json_print(j);
		json_decref(j);
	} else {
		char a[32];
		fprintf(stderr, "sumcastctl: this sumcastd has no /config endpoint; showing what /stats reports\n");
		printf("[fabric]\nprovider = %s\n\n[data]\nthreads = %.0f\n\n[job]\nmemory-budget = %s\n"
		       "timeout = %.0fms\n",
		       jstr(s, "provider"), jnum(s, "threads"),
		       fmt_bytes(jnum(s, "memory_budget"), a, sizeof(a)), jnum(s, "timeout_ms"));
	}
	json_decref(s);
	return 0;
}
