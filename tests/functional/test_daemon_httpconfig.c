/* GET /config: one JSON entry per settings_table row (as many as
 * `sumcastd --dump-config` prints), with value, default, source (default,
 * file, env), env name, reloadable and help. After a SIGHUP the reloadable
 * values and their sources are the new ones; a value that needs a restart
 * keeps its running value and shows the file's as "pending"; a reload that
 * fails changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "test_daemon_harness.h"

static struct sd d;
static char body[1 << 17];

/* The entry of section.key as the daemon writes it (fixed field order). */
static const char *entry(const char *text, const char *section, const char *key)
{
	char pat[160];
	snprintf(pat, sizeof(pat), "{\"section\":\"%s\",\"key\":\"%s\",", section, key);
	return strstr(text, pat);
}

/* Whether the entry has "field":"want" (or "field":want for non-strings). */
static bool has(const char *text, const char *section, const char *key, const char *field,
		const char *want)
{
	const char *e = entry(text, section, key), *end;
	char pat[512];

	if (!e || !(end = strchr(e, '}')))
		return false;
	snprintf(pat, sizeof(pat), "\"%s\":%s", field, want);
	const char *f = strstr(e, pat);
	return f && f < end;
}

static int count(const char *text, const char *s)
{
	int n = 0;
	for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
		n++;
	return n;
}

static int dump_rows(void)
{
	char cmd[600], line[1024];
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s' --dump-config", sd_binary());
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		n += line[0] >= 'a' && line[0] <= 'z' && strstr(line, " = ") != NULL;
	pclose(p);
	return n;
}

static int get(void)
{
	char ctype[128];
	int st = sd_http_ctype(&d, "/config", ctype, sizeof(ctype), body, sizeof(body));
	CHECK(st == 200, "/config status %d", st);
	CHECK(!strcmp(ctype, "application/json"), "/config Content-Type \"%s\"", ctype);
	CHECK(th_json_ok(body), "/config is not JSON: %s", body);
	return st;
}

struct value_wait {
	const char *section, *key, *want;
};

static bool value_there(void *arg)
{
	struct value_wait *w = arg;

	return sd_http(&d, "/config", body, sizeof(body)) == 200 &&
	       has(body, w->section, w->key, "value", w->want);
}

static bool wait_value(const char *section, const char *key, const char *want, unsigned ms)
{
	struct value_wait w = { section, key, want };

	return th_wait_until(value_there, &w, ms, 20);
}

int main(void)
{
	setenv("SUMCASTD_JOB_MAX_JOBS", "5", 1);
	if (sd_start(&d, "[job]\nmemory-budget = 32M\n"))
		th_skip("sumcastd did not start (see above)");
	unsetenv("SUMCASTD_JOB_MAX_JOBS");

	get();
	int rows = dump_rows();
	CHECK(rows > 20 && count(body, "{\"section\":") == rows, "/config has %d entries, dump %d rows",
	      count(body, "{\"section\":"), rows);
	char want[200];
	snprintf(want, sizeof(want), "\"config_file\":\"%s\"", d.conf);
	CHECK(strstr(body, want) != NULL, "config_file: want %s in %.200s", want, body);
	CHECK(has(body, "job", "memory-budget", "value", "\"32M\"") &&
		      has(body, "job", "memory-budget", "default", "\"1G\"") &&
		      has(body, "job", "memory-budget", "source", "\"file\"") &&
		      has(body, "job", "memory-budget", "env", "\"SUMCASTD_JOB_MEMORY_BUDGET\"") &&
		      has(body, "job", "memory-budget", "reloadable", "true"),
	      "job.memory-budget: %.300s", entry(body, "job", "memory-budget"));
	CHECK(has(body, "job", "max-jobs", "value", "\"5\"") &&
		      has(body, "job", "max-jobs", "source", "\"env\""),
	      "job.max-jobs: %.300s", entry(body, "job", "max-jobs"));
	CHECK(has(body, "data", "threads", "value", "\"1\"") &&
		      has(body, "data", "threads", "source", "\"default\"") &&
		      has(body, "data", "threads", "reloadable", "false"),
	      "data.threads: %.300s", entry(body, "data", "threads"));
	CHECK(has(body, "control", "port-file", "help",
		  "\"If set, \\\"control=<port> http=<port>\\\" is written here (atomically) once everything is up\""),
	      "help with quotes not escaped: %.300s", entry(body, "control", "port-file"));
	CHECK(!strstr(body, "\"pending\""), "pending before any reload");

	/* SIGHUP: budget 16M and a timeout from the file; threads needs a restart. */
	CHECK(sd_write_conf(&d, "[job]\nmemory-budget = 16M\ntimeout = 7s\n[data]\nthreads = 2\n") == 0,
	      "rewrite");
	kill(d.pid, SIGHUP);
	CHECK(wait_value("job", "memory-budget", "\"16M\"", 3000), "budget after reload: %.300s",
	      entry(body, "job", "memory-budget"));
	get();
	CHECK(has(body, "job", "timeout", "value", "\"7s\"") &&
		      has(body, "job", "timeout", "source", "\"file\""),
	      "job.timeout after reload: %.300s", entry(body, "job", "timeout"));
	CHECK(has(body, "job", "max-jobs", "value", "\"5\"") &&
		      has(body, "job", "max-jobs", "source", "\"env\""),
	      "job.max-jobs after reload: %.300s", entry(body, "job", "max-jobs"));
	CHECK(has(body, "data", "threads", "value", "\"1\"") &&
		      has(body, "data", "threads", "source", "\"default\"") &&
		      has(body, "data", "threads", "pending", "\"2\""),
	      "data.threads after reload: %.300s", entry(body, "data", "threads"));
	CHECK(sd_metric(&d, "sumcast_memory_budget_bytes") == 16 << 20, "metric budget %g",
	      sd_metric(&d, "sumcast_memory_budget_bytes"));

	/* Back to the default timeout: its source is default again. */
	CHECK(sd_write_conf(&d, "[job]\nmemory-budget = 16M\n") == 0, "rewrite");
	kill(d.pid, SIGHUP);
	CHECK(wait_value("job", "timeout", "\"30s\"", 3000), "timeout back to default: %.300s",
	      entry(body, "job", "timeout"));
	get();
	CHECK(has(body, "job", "timeout", "source", "\"default\""), "timeout source: %.300s",
	      entry(body, "job", "timeout"));
	CHECK(!strstr(body, "\"pending\""), "pending left after threads went back: %.300s",
	      entry(body, "data", "threads"));

	/* A reload that fails changes nothing, not even the valid line before
	 * the bad one: wait until the daemon has read the file and said it
	 * keeps the running configuration, then look. */
	int kept = sd_log_count(&d, "keeping the running configuration");
	char line[2048] = "";
	CHECK(sd_write_conf(&d, "[job]\nmemory-budget = 8M\nmax-chunk = 12\n") == 0, "rewrite");
	kill(d.pid, SIGHUP);
	CHECK(sd_wait_log(&d, "keeping the running configuration", kept, line, sizeof(line), 5000),
	      "failed reload: no \"keeping the running configuration\" in the log");
	CHECK(strstr(line, "max-chunk") != NULL, "failed reload: the log line does not name max-chunk: %s",
	      line);
	get();
	CHECK(has(body, "job", "memory-budget", "value", "\"16M\"") &&
		      has(body, "job", "memory-budget", "source", "\"file\""),
	      "failed reload applied: %.300s", entry(body, "job", "memory-budget"));
	CHECK(has(body, "job", "max-chunk", "source", "\"default\""), "failed reload applied: %.300s",
	      entry(body, "job", "max-chunk"));
	CHECK(sd_metric(&d, "sumcast_memory_budget_bytes") == 16 << 20, "failed reload applied: budget %g",
	      sd_metric(&d, "sumcast_memory_budget_bytes"));

	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	return th_summary("test_daemon_httpconfig");
}
