/* libnccl-profiler-sumcast-rec.so: a minimal NCCL profiler plugin that
 * records the network-plugin events NCCL hands it, for tests/gpu/run.sh
 * (real NCCL, GPU machine) and its checker tests/gpu/prof_check.py.
 *
 *   NCCL_PROFILER_PLUGIN=/path/libnccl-profiler-sumcast-rec.so
 *   SUMCAST_PROF_RECORD=/out/prof     (each process writes /out/prof.<pid>.jsonl)
 *
 * Exports ncclProfiler_v5 (what NCCL 2.28 looks up first) and
 * ncclProfiler_v6 (2.29 and later): both tables have the same calls, and
 * v6's descriptor differs from v5's only by union members this plugin
 * never reads (netPlugin sits at the same offset in both). It asks for
 * ncclProfileNetPlugin events (NCCL then also starts the ProxyOp and
 * ProxyStep events that parent them) and writes one JSON line per net
 * event start and one per stop (buffered, 1 MiB: flushed by finalize and
 * by the process's exit; a killed process loses its last lines), after a
 * {"ev":"load","pid":P} line each time the library is loaded (NCCL
 * unloads it with its last communicator; seq counts from 1 per load):
 *   {"ev":"start","seq":S,"id":PLUGINID,"parent":P,"parent_ok":0|1,"rank":R,
 *    [Sumcast's descriptor: "kind","sub","nsubs","deferred","comm","tag","bytes"]}
 *   {"ev":"stop","seq":S,"updates":U,"parent_open":0|1,
 *    [Sumcast's last update: "status","done_bytes","done_kind"]}
 * parent_ok: the parent is a ProxyStep event of this plugin, open at the
 * start; parent_open: still open at the stop (a net event must close
 * before its step). finalize writes a summary line with every event
 * type's starts and stops, the stops of handles this plugin never gave
 * out, and the net events still open:
 *   {"ev":"summary","starts":{...},"stops":{...},"bad_stops":N,"net_open":N,"lines_dropped":N}
 * At most 1,000,000 lines per process; later ones are counted
 * (lines_dropped), not written.
 *
 * NCCL's layouts: plugin/nccl_profiler.h. Sumcast's own data:
 * plugin/prof_events.h. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../plugin/nccl_profiler.h"
#include "../../plugin/prof_events.h"

#define EV_MAGIC 0x53435052u /* "SCPR" */
struct ev {
	uint32_t magic;
	int type_bit;  /* index of the type's bit */
	bool open;
	bool sumcast;  /* a net event with Sumcast's plugin id */
	int children;  /* ProxyStep: net events open under it */
	struct ev *parent;
	uint64_t seq;
	int updates;
	sc_prof_done_v1_t done;
	bool has_done;
	struct ev *next_free;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ev *free_list; /* events are recycled, never freed: a stale handle stays readable */
static uint64_t starts[NCCL_PROFILE_NTYPES], stops[NCCL_PROFILE_NTYPES], bad_stops, net_open, seq, lines,
	lines_dropped;
static FILE *out;
static bool out_tried;
#define MAX_LINES 1000000

static int type_bit(uint64_t t)
{
	for (int i = 0; i < NCCL_PROFILE_NTYPES; i++)
		if (t == (1ull << i))
			return i;
	return -1;
}

static const char *const type_names[NCCL_PROFILE_NTYPES] = {
	"Group",  "Coll",	"P2p",	    "ProxyOp", "ProxyStep", "ProxyCtrl", "KernelCh", "NetPlugin",
	"GroupApi", "CollApi", "P2pApi", "KernelLaunch", "CeColl", "CeSync", "CeBatch",
};

/* lock held */
static FILE *out_file(void)
{
	if (!out_tried) {
		out_tried = true;
		const char *p = getenv("SUMCAST_PROF_RECORD");
		if (p && *p) {
			char path[4096];
			snprintf(path, sizeof(path), "%s.%d.jsonl", p, (int)getpid());
			out = fopen(path, "a");
			if (!out)
				fprintf(stderr, "prof_record: cannot open %s\n", path);
			else
				setvbuf(out, NULL, _IOFBF, 1 << 20); /* a line costs no write(2) */
			/* NCCL closes the library with its last communicator and may
			 * load it again: each load numbers its events from 1 */
			if (out)
				fprintf(out, "{\"ev\":\"load\",\"pid\":%d}\n", (int)getpid());
		}
	}
	return out;
}

/* lock held; printf-like, one line */
static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
	FILE *f = out_file();
	va_list ap;

	if (!f)
		return;
	if (lines >= MAX_LINES) {
		lines_dropped++;
		return;
	}
	lines++;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

static struct ev *ev_get(void)
{
	struct ev *e = free_list;
	if (e)
		free_list = e->next_free;
	else
		e = malloc(sizeof(*e));
	if (e)
		memset(e, 0, sizeof(*e));
	return e;
}

static ncclResult_t rec_init(void **context, uint64_t commId, int *eActivationMask,
			     const char *commName, int nNodes, int nranks, int rank,
			     ncclDebugLogger_t logfn)
{
	(void)commId, (void)commName, (void)nNodes, (void)nranks, (void)rank, (void)logfn;
	*eActivationMask = ncclProfileNetPlugin | ncclProfileProxyStep | ncclProfileProxyOp;
	*context = &lock; /* any non-NULL: NCCL finalizes only a context it got */
	pthread_mutex_lock(&lock);
	out_file();
	pthread_mutex_unlock(&lock);
	return 0;
}

static ncclResult_t rec_start(void *context, void **eHandle, ncclProfilerEventDescr_t *d)
{
	(void)context;
	*eHandle = NULL;
	int b = type_bit(d->type);
	if (b < 0)
		return 0;
	pthread_mutex_lock(&lock);
	struct ev *e = ev_get();
	if (!e) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	e->magic = EV_MAGIC;
	e->type_bit = b;
	e->open = true;
	e->seq = ++seq;
	starts[b]++;
	if (d->type == ncclProfileNetPlugin) {
		struct ev *p = d->parentObj;
		bool pok = p && p->magic == EV_MAGIC && p->open && p->type_bit == type_bit(ncclProfileProxyStep);
		if (pok) {
			e->parent = p;
			p->children++;
		}
		net_open++;
		int64_t id = d->netPlugin.id;
		e->sumcast = SC_PROF_TYPE_OF(id) == SC_PROF_NET_TYPE_SUMCAST;
		if (e->sumcast && SC_PROF_VER_OF(id) == 1 && d->netPlugin.data) {
			const sc_prof_descr_v1_t *s = d->netPlugin.data;
			emit("{\"ev\":\"start\",\"seq\":%" PRIu64 ",\"id\":%" PRId64
			     ",\"parent_ok\":%d,\"rank\":%d,\"kind\":%u,\"sub\":%u,\"nsubs\":%u,"
			     "\"deferred\":%u,\"comm\":%u,\"tag\":%u,\"bytes\":%" PRIu64 "}",
			     e->seq, id, pok, d->rank, s->kind, s->sub, s->nsubs, s->deferred, s->comm,
			     s->tag, s->bytes);
		} else {
			emit("{\"ev\":\"start\",\"seq\":%" PRIu64 ",\"id\":%" PRId64
			     ",\"parent_ok\":%d,\"rank\":%d}",
			     e->seq, id, pok, d->rank);
		}
	}
	pthread_mutex_unlock(&lock);
	*eHandle = e;
	return 0;
}

static ncclResult_t rec_stop(void *eHandle)
{
	struct ev *e = eHandle;

	if (!e)
		return 0; /* NCCL's stop of a start this plugin did not take */
	pthread_mutex_lock(&lock);
	if (e->magic != EV_MAGIC || !e->open) {
		bad_stops++;
		pthread_mutex_unlock(&lock);
		return 0;
	}
	e->open = false;
	stops[e->type_bit]++;
	if (e->type_bit == type_bit(ncclProfileNetPlugin)) {
		net_open--;
		struct ev *p = e->parent;
		bool popen = p && p->open;
		if (p && --p->children == 0 && !p->open) {
			p->next_free = free_list; /* its step stopped first: kept until now */
			free_list = p;
		}
		if (e->has_done)
			emit("{\"ev\":\"stop\",\"seq\":%" PRIu64 ",\"updates\":%d,\"parent_open\":%d,"
			     "\"status\":%d,\"done_bytes\":%" PRIu64 ",\"done_kind\":%u}",
			     e->seq, e->updates, popen, e->done.status, e->done.bytes, e->done.kind);
		else
			emit("{\"ev\":\"stop\",\"seq\":%" PRIu64 ",\"updates\":%d,\"parent_open\":%d}",
			     e->seq, e->updates, popen);
	}
	/* A ProxyStep that stops with net events open under it (each of those
	 * then stops with parent_open 0) is recycled by the last of them. */
	if (!e->children) {
		e->next_free = free_list;
		free_list = e;
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

static ncclResult_t rec_state(void *eHandle, int eState, ncclProfilerEventStateArgs_t *a)
{
	struct ev *e = eHandle;

	if (!e)
		return 0;
	pthread_mutex_lock(&lock);
	if (e->magic == EV_MAGIC && e->open && eState == ncclProfilerNetPluginUpdate) {
		e->updates++;
		if (e->sumcast && a && a->netPlugin.data) {
			e->done = *(const sc_prof_done_v1_t *)a->netPlugin.data;
			e->has_done = true;
		}
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

static ncclResult_t rec_finalize(void *context)
{
	char s[1024], t[1024];
	size_t ns = 0, nt = 0;

	(void)context;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < NCCL_PROFILE_NTYPES; i++) {
		if (starts[i])
			ns += (size_t)snprintf(s + ns, sizeof(s) - ns, "%s\"%s\":%" PRIu64, ns ? "," : "",
					       type_names[i], starts[i]);
		if (stops[i])
			nt += (size_t)snprintf(t + nt, sizeof(t) - nt, "%s\"%s\":%" PRIu64, nt ? "," : "",
					       type_names[i], stops[i]);
	}
	s[ns] = t[nt] = 0;
	uint64_t dropped = lines_dropped;
	lines_dropped = 0;
	lines = lines < MAX_LINES ? lines : MAX_LINES - 1; /* room for this summary */
	emit("{\"ev\":\"summary\",\"starts\":{%s},\"stops\":{%s},\"bad_stops\":%" PRIu64
	     ",\"net_open\":%" PRIu64 ",\"lines_dropped\":%" PRIu64 "}",
	     s, t, bad_stops, net_open, dropped);
	if (out)
		fflush(out);
	pthread_mutex_unlock(&lock);
	return 0;
}

/* ncclProfiler_v5_t and ncclProfiler_v6_t: the same calls. */
__attribute__((visibility("default"))) const ncclProfiler_t ncclProfiler_v5 = {
	"sumcast-rec", rec_init, rec_start, rec_stop, rec_state, rec_finalize,
};
__attribute__((visibility("default"))) const ncclProfiler_t ncclProfiler_v6 = {
	"sumcast-rec", rec_init, rec_start, rec_stop, rec_state, rec_finalize,
};
