/* libnccl-profiler-sumcast-rec.so (prof_record.c) loaded and driven as
 * NCCL drives a profiler: dlopen, the v5 and v6 tables (the names NCCL
 * 2.28 and 2.29+ look up), init asks for net-plugin events, a ProxyStep
 * with a Sumcast event under it (start, update and stop), a foreign net
 * event, a stop of a handle never given out; the lines written to
 * SUMCAST_PROF_RECORD's file say what happened.
 *   test_prof_record LIB.so ncclProfiler_v5|ncclProfiler_v6 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../plugin/nccl_profiler.h"
#include "../../plugin/prof_events.h"

static const char *lib_path;

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 16];
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return buf;
}

static void drive(const char *sym)
{
	char prefix[128], path[160];
	snprintf(prefix, sizeof(prefix), "/tmp/test_prof_record.%d.%s", (int)getpid(), sym);
	snprintf(path, sizeof(path), "%s.%d.jsonl", prefix, (int)getpid());
	unlink(path);
	setenv("SUMCAST_PROF_RECORD", prefix, 1);

	void *dl = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(dl);
	const ncclProfiler_t *t = dlsym(dl, sym);
	assert_non_null(t);
	assert_string_equal(t->name, "sumcast-rec");

	void *ctx = NULL;
	int mask = 0;
	assert_int_equal(t->init(&ctx, 1, &mask, "c", 2, 2, 0, NULL), 0);
	assert_non_null(ctx);
	assert_true(mask & ncclProfileNetPlugin);

	void *step = NULL, *net = NULL, *other = NULL;
	ncclProfilerEventDescr_t d = { .type = ncclProfileProxyStep, .rank = 0 };
	d.proxyStep.step = 3;
	assert_int_equal(t->startEvent(ctx, &step, &d), 0);
	assert_non_null(step);

	sc_prof_descr_v1_t sd = { .kind = SC_PROF_RECV, .sub = 1, .nsubs = 2, .comm = 9, .tag = 7,
				  .bytes = 4096 };
	ncclProfilerEventDescr_t n = { .type = ncclProfileNetPlugin, .parentObj = step, .rank = 0 };
	n.netPlugin.id = SC_PROF_PLUGIN_ID;
	n.netPlugin.data = &sd;
	assert_int_equal(t->startEvent(ctx, &net, &n), 0);
	assert_non_null(net);
	sc_prof_done_v1_t done = { .kind = SC_PROF_RECV, .status = 0, .bytes = 1000 };
	ncclProfilerEventStateArgs_t args = { .netPlugin.data = &done };
	assert_int_equal(t->recordEventState(net, ncclProfilerNetPluginUpdate, &args), 0);
	assert_int_equal(t->stopEvent(net), 0);

	/* NCCL's socket transport's id (2 << 16 | 1): counted, not decoded */
	n.netPlugin.id = (2 << 16) | 1;
	n.netPlugin.data = NULL;
	assert_int_equal(t->startEvent(ctx, &other, &n), 0);
	assert_int_equal(t->stopEvent(step), 0);
	assert_int_equal(t->stopEvent(other), 0); /* after its step: parent_open 0 */
	assert_int_equal(t->stopEvent(NULL), 0);  /* NCCL's stop of a start nobody took */
	assert_int_equal(t->stopEvent(net), 0);   /* stopped twice: a bad stop */
	assert_int_equal(t->finalize(ctx), 0);

	const char *s = slurp(path);
	char load[64];
	snprintf(load, sizeof(load), "{\"ev\":\"load\",\"pid\":%d}\n", (int)getpid());
	assert_true(!strncmp(s, load, strlen(load))); /* the first line */
	assert_non_null(strstr(s, "\"ev\":\"start\",\"seq\":2,\"id\":1396899841,\"parent_ok\":1,"
				  "\"rank\":0,\"kind\":2,\"sub\":1,\"nsubs\":2,\"deferred\":0,\"comm\":9,"
				  "\"tag\":7,\"bytes\":4096}"));
	assert_non_null(strstr(s, "{\"ev\":\"stop\",\"seq\":2,\"updates\":1,\"parent_open\":1,"
				  "\"status\":0,\"done_bytes\":1000,\"done_kind\":2}"));
	assert_non_null(strstr(s, "{\"ev\":\"start\",\"seq\":3,\"id\":131073,\"parent_ok\":1,\"rank\":0}"));
	assert_non_null(strstr(s, "{\"ev\":\"stop\",\"seq\":3,\"updates\":0,\"parent_open\":0}"));
	assert_non_null(strstr(s, "\"starts\":{\"ProxyStep\":1,\"NetPlugin\":2},\"stops\":{\"ProxyStep\":1,"
				  "\"NetPlugin\":2},\"bad_stops\":1,\"net_open\":0"));
	/* not closed: the library keeps its events for reuse (LeakSanitizer
	 * would see them lost with the library) */
	unlink(path);
}

static const char *sym_name;

static void test_table(void **state)
{
	(void)state;
	drive(sym_name);
}

/* One table per process: the library's state (its counters, its file)
 * is the process's. */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
	};
	if (argc < 3) {
		fprintf(stderr, "usage: %s libnccl-profiler-sumcast-rec.so ncclProfiler_v5|ncclProfiler_v6\n",
			argv[0]);
		return 2;
	}
	lib_path = argv[1];
	sym_name = argv[2];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
