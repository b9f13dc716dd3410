/* --profile-events [--profiler LIB]: NCCL's profiler side of the plugin
 * (plugin/prof_events.h, docs/plugin.md "Profiler events").
 *
 * NCCL hands ncclNet v10+ init its ncclProfilerCallback and every isend /
 * irecv a pHandle per message: a struct ncclProxyEventHandle
 * { stepEventHandle, subArgPtr } inside the proxy's sub-args, valid while
 * that proxy step lives. The harness does the same: a ProxyStep event
 * (startEvent of the profiler) before each message, its handle in a
 * pHandle of the same two leading members, the step stopped once test()
 * says the message is done (or, for a message never tested, at the end).
 * hp_callback is NCCL's ncclProfilerCallback (src/plugin/profiler.cc of
 * v2.28.9-1 .. v2.30): a start dereferences pHandle and its subArgPtr,
 * checks the activation mask and calls the profiler's startEvent with a
 * ncclProfileNetPlugin descriptor parented under the step; a stop calls
 * stopEvent(*eHandle); an update recordEventState(*eHandle,
 * ncclProfilerNetPluginUpdate); update-and-stop both. On top it checks
 * what only the harness knows: a start names a pHandle the harness gave
 * out for a message still in flight, with Sumcast's plugin id and the
 * message's kind, size, tag and sub; one start per message.
 *
 * The profiler is the harness's own recorder (the checks of nesting and
 * closing, below) or, with --profiler LIB, a profiler plugin loaded as
 * NCCL loads one (ncclProfiler_v6, else _v5: tests/gpu/prof_record.c, whose
 * files tests/gpu/prof_check.py checks afterwards). prof_finish, at the
 * end of the p2p and collnet tests: every message the plugin accepted had
 * exactly one start, every start the profiler took one stop; the collnet
 * (no pHandle in any of its calls) made no call at all. */
#include "harness.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "../../plugin/nccl_profiler.h"
#include "../../plugin/prof_events.h"
#include "clock.h"

/* NCCL's ncclProxySubArgs: the members its callback reads */
struct hp_sub {
	int eActivationMask;
	int rank;
	void *profilerContext;
};

#define PH_MAGIC 0x50485348u
/* NCCL's struct ncclProxyEventHandle (its two members first), then the
 * harness's record of the message it parents. */
struct hp_phandle {
	void *stepEventHandle;
	struct hp_sub *subArgPtr;
	uint32_t magic;
	bool live;      /* the step is open: the message is in flight */
	int kind;       /* SC_PROF_SEND / SC_PROF_RECV */
	int sub, nsubs;
	uint32_t tag;
	uint64_t bytes;
	int starts;     /* callback starts naming this pHandle */
};

static const ncclProfiler_t *prof;
static void *prof_ctx, *op_handle;
static struct hp_sub sub;
static uint64_t cb_calls, cb_starts, cb_taken, cb_stops, cb_updates, msgs;
static uint64_t cb_ns; /* time inside the callback: NCCL's side, the checks, the profiler */
static int step_no;

/* ---------------- the harness's own recorder ---------------- */

#define REC_MAGIC 0x52454331u
struct rec {
	uint32_t magic;
	uint64_t type;
	bool open;
	struct rec *parent;
	int children, updates, kind;
	uint64_t bytes;
	struct rec *next_free;
};
static struct rec *rec_free;
static uint64_t rec_net_open, rec_plain_stops, rec_done_stops;

static struct rec *rec_of(void *h, const char *what)
{
	struct rec *r = h;
	REQUIRE(r && r->magic == REC_MAGIC, "profiler: %s of a handle the profiler never gave out", what);
	return r;
}

static ncclResult_t rec_init(void **ctx, uint64_t comm, int *mask, const char *name, int nnodes,
			     int nranks, int rank, ncclDebugLogger_t log)
{
	(void)comm, (void)name, (void)nnodes, (void)nranks, (void)rank, (void)log;
	/* HARNESS_PROF_MASK: the events asked for; without ncclProfileNetPlugin NCCL
	 * starts none for the plugin, and the plugin owes no update or stop */
	const char *m = getenv("HARNESS_PROF_MASK");
	*mask = m ? atoi(m) : ncclProfileNetPlugin | ncclProfileProxyStep | ncclProfileProxyOp;
	*ctx = &rec_free;
	return ncclSuccess;
}

static ncclResult_t rec_start(void *ctx, void **eh, ncclProfilerEventDescr_t *d)
{
	struct rec *r = rec_free;

	REQUIRE(ctx == &rec_free, "profiler: startEvent with context %p, not init's", ctx);
	if (r)
		rec_free = r->next_free;
	else
		r = malloc(sizeof(*r));
	REQUIRE(r, "malloc");
	memset(r, 0, sizeof(*r));
	r->magic = REC_MAGIC;
	r->type = d->type;
	r->open = true;
	if (d->type == ncclProfileNetPlugin) {
		struct rec *p = rec_of(d->parentObj, "a net event's parent");
		REQUIRE(p->type == ncclProfileProxyStep && p->open,
		      "net event parented under an event of type %llu, %s (want an open ProxyStep)",
		      (unsigned long long)p->type, p->open ? "open" : "stopped");
		REQUIRE(d->netPlugin.id == SC_PROF_PLUGIN_ID && d->netPlugin.data,
		      "net event: plugin id 0x%llx, data %p", (unsigned long long)d->netPlugin.id,
		      d->netPlugin.data);
		const sc_prof_descr_v1_t *s = d->netPlugin.data;
		r->kind = s->kind;
		r->bytes = s->bytes;
		r->parent = p;
		p->children++;
		rec_net_open++;
	}
	*eh = r;
	return ncclSuccess;
}

static ncclResult_t rec_stop(void *eh)
{
	struct rec *r = rec_of(eh, "stopEvent");

	REQUIRE(r->open, "profiler: event of type %llu stopped twice", (unsigned long long)r->type);
	r->open = false;
	if (r->type == ncclProfileNetPlugin) {
		REQUIRE(r->parent->open, "a net event (kind %d, %llu B) stopped after its proxy step",
		      r->kind, (unsigned long long)r->bytes);
		r->parent->children--;
		rec_net_open--;
		if (r->updates)
			rec_done_stops++;
		else
			rec_plain_stops++;
	} else if (r->type == ncclProfileProxyStep) {
		REQUIRE(r->children == 0, "a proxy step stopped with %d net event(s) open under it",
		      r->children);
	}
	r->next_free = rec_free;
	rec_free = r;
	return ncclSuccess;
}

static ncclResult_t rec_state(void *eh, int state, ncclProfilerEventStateArgs_t *args)
{
	struct rec *r = rec_of(eh, "recordEventState");
	const sc_prof_done_v1_t *d = args ? args->netPlugin.data : NULL;

	REQUIRE(r->open && r->type == ncclProfileNetPlugin && state == ncclProfilerNetPluginUpdate && d,
	      "recordEventState(%d) of an event of type %llu (%s), data %p", state,
	      (unsigned long long)r->type, r->open ? "open" : "stopped", (const void *)d);
	REQUIRE(++r->updates == 1, "a net event updated %d times (the plugin sends one, at the end)",
	      r->updates);
	REQUIRE(d->kind == r->kind && d->status == 0 && d->bytes <= r->bytes &&
		      (r->kind != SC_PROF_SEND || d->bytes == r->bytes),
	      "net event's end: kind %d status %d bytes %llu, its start kind %d bytes %llu", d->kind,
	      d->status, (unsigned long long)d->bytes, r->kind, (unsigned long long)r->bytes);
	return ncclSuccess;
}

static ncclResult_t rec_finalize(void *ctx)
{
	(void)ctx;
	return ncclSuccess;
}

static const ncclProfiler_t rec_table = {
	"harness", rec_init, rec_start, rec_stop, rec_state, rec_finalize,
};

/* ---------------- NCCL's side ---------------- */

/* NCCL's ncclProfilerCallback, and the harness's checks of the starts. */
static ncclResult_t hp_callback_in(void **eHandle, int type, void *pHandle, int64_t pluginId,
				   void *extData)
{
	REQUIRE(eHandle, "profiler callback with eHandle NULL");
	if (type == SC_PROF_CB_START) {
		/* NCCL reads p->subArgPtr->eActivationMask: NULL crashes it */
		REQUIRE(pHandle, "profiler callback: a start with pHandle NULL (NCCL dereferences it)");
		struct hp_phandle *p = pHandle;
		REQUIRE(p->magic == PH_MAGIC && p->subArgPtr == &sub,
		      "profiler callback: a start whose pHandle the harness did not give out");
		REQUIRE(p->live, "profiler callback: a start under a proxy step that has ended");
		REQUIRE(pluginId == SC_PROF_PLUGIN_ID && extData,
		      "profiler callback: plugin id 0x%llx (want 0x%llx), data %p",
		      (unsigned long long)pluginId, (unsigned long long)SC_PROF_PLUGIN_ID, extData);
		const sc_prof_descr_v1_t *d = extData;
		REQUIRE(d->kind == p->kind && d->sub == p->sub && d->nsubs == p->nsubs &&
			      d->tag == p->tag && d->bytes == p->bytes,
		      "profiler callback: start kind %d sub %d/%d tag %u bytes %llu, the message is kind %d "
		      "sub %d/%d tag %u bytes %llu",
		      d->kind, d->sub, d->nsubs, d->tag, (unsigned long long)d->bytes, p->kind, p->sub,
		      p->nsubs, p->tag, (unsigned long long)p->bytes);
		REQUIRE(++p->starts == 1, "profiler callback: %d starts for one message", p->starts);
		cb_starts++;
		if (p->subArgPtr->eActivationMask & ncclProfileNetPlugin) {
			ncclProfilerEventDescr_t e = { .type = ncclProfileNetPlugin, .parentObj = p->stepEventHandle,
					      .rank = p->subArgPtr->rank };
			e.netPlugin.id = pluginId;
			e.netPlugin.data = extData;
			prof->startEvent(p->subArgPtr->profilerContext, eHandle, &e);
		}
		if (*eHandle)
			cb_taken++; /* else the plugin owes no stop (the profiler took no event) */
	} else if (type == SC_PROF_CB_STOP) {
		cb_stops++;
		prof->stopEvent(*eHandle);
	} else if (type == SC_PROF_CB_UPDATE || type == SC_PROF_CB_UPDATE_STOP) {
		ncclProfilerEventStateArgs_t args = { .netPlugin.data = extData };
		cb_updates++;
		prof->recordEventState(*eHandle, ncclProfilerNetPluginUpdate, &args);
		if (type == SC_PROF_CB_UPDATE_STOP) {
			cb_stops++;
			prof->stopEvent(*eHandle);
		}
	} else {
		REQUIRE(0, "profiler callback: type %d (NCCL's are 0..3)", type);
	}
	return ncclSuccess;
}

static ncclResult_t hp_callback(void **eHandle, int type, void *pHandle, int64_t pluginId,
				void *extData)
{
	uint64_t t0 = sc_now_ns();
	ncclResult_t r = hp_callback_in(eHandle, type, pHandle, pluginId, extData);

	cb_ns += sc_now_ns() - t0;
	cb_calls++;
	return r;
}

ncclProfilerCallback_t prof_setup(void)
{
	if (!opt.profile_events)
		return NULL;
	prof = &rec_table;
	if (opt.profiler) {
		void *dl = dlopen(opt.profiler, RTLD_NOW | RTLD_LOCAL);
		REQUIRE(dl, "dlopen %s: %s", opt.profiler, dlerror());
		prof = dlsym(dl, "ncclProfiler_v6"); /* NCCL 2.30 looks up v6 first, 2.28 v5 */
		if (!prof)
			prof = dlsym(dl, "ncclProfiler_v5");
		REQUIRE(prof, "%s has neither ncclProfiler_v6 nor ncclProfiler_v5", opt.profiler);
	}
	int mask = 0;
	NCHECK(prof->init(&prof_ctx, 0x1234, &mask, "harness", opt.nranks, opt.nranks, my_rank, NULL));
	sub = (struct hp_sub){ .eActivationMask = mask, .rank = my_rank, .profilerContext = prof_ctx };
	if (mask & (ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin)) {
		ncclProfilerEventDescr_t d = { .type = ncclProfileProxyOp, .rank = my_rank };
		d.proxyOp.pid = getpid();
		d.proxyOp.peer = (my_rank + 1) % opt.nranks;
		prof->startEvent(prof_ctx, &op_handle, &d);
	}
	return hp_callback;
}

/* A proxy step for sub i of n of a message about to be posted. */
static struct hp_phandle *step_begin(int kind, int i, int n, uint32_t tag, uint64_t bytes)
{
	struct hp_phandle *p = calloc(1, sizeof(*p));

	REQUIRE(p, "calloc");
	*p = (struct hp_phandle){ .subArgPtr = &sub, .magic = PH_MAGIC, .live = true, .kind = kind,
				  .sub = i, .nsubs = n, .tag = tag, .bytes = bytes };
	if (sub.eActivationMask & (ncclProfileProxyStep | ncclProfileNetPlugin)) {
		ncclProfilerEventDescr_t d = { .type = ncclProfileProxyStep, .parentObj = op_handle, .rank = my_rank };
		d.proxyStep.step = step_no++;
		prof->startEvent(prof_ctx, &p->stepEventHandle, &d);
	}
	return p;
}

static void step_end(struct hp_phandle *p)
{
	if (p->stepEventHandle)
		prof->stopEvent(p->stepEventHandle);
	p->live = false;
	p->magic = 0;
	free(p);
}

/* The messages in flight: request -> its steps. */
#define PH_REQS 64
static struct {
	void *req;
	int n;
	struct hp_phandle *ph[8];
} inflight[PH_REQS];

void prof_post(int kind, int n, const int *tags, const size_t *sizes, void **phandles)
{
	for (int i = 0; i < n; i++)
		phandles[i] = step_begin(kind, i, n, (uint32_t)tags[i], sizes[i]);
}

void prof_posted(void *req, int n, void **phandles)
{
	if (!req) { /* refused (try again): NCCL's step would not have started the message */
		for (int i = 0; i < n; i++) {
			struct hp_phandle *p = phandles[i];
			REQUIRE(p->starts == 0, "profiler: an event started for a message the plugin refused");
			step_end(p);
		}
		return;
	}
	for (int k = 0; k < PH_REQS; k++)
		if (!inflight[k].req) {
			inflight[k].req = req;
			inflight[k].n = n;
			for (int i = 0; i < n; i++)
				inflight[k].ph[i] = phandles[i];
			msgs += (uint64_t)n;
			return;
		}
	REQUIRE(0, "more than %d requests in flight", PH_REQS);
}

void prof_done(void *req)
{
	for (int k = 0; k < PH_REQS; k++)
		if (inflight[k].req == req) {
			for (int i = 0; i < inflight[k].n; i++)
				step_end(inflight[k].ph[i]);
			inflight[k].req = NULL;
			return;
		}
}

void prof_finish(void)
{
	if (!opt.profile_events)
		return;
	/* messages never tested (a send comm closed under one): their steps end now */
	for (int k = 0; k < PH_REQS; k++)
		if (inflight[k].req)
			prof_done(inflight[k].req);
	if (op_handle)
		prof->stopEvent(op_handle);
	NCHECK(prof->finalize(prof_ctx));
	REQUIRE(cb_starts == msgs, "profiler: %llu event(s) started for %llu message(s) the plugin took",
	      (unsigned long long)cb_starts, (unsigned long long)msgs);
	REQUIRE(cb_stops == cb_taken, "profiler: %llu event(s) started (%llu taken by the profiler), "
	      "%llu stopped", (unsigned long long)cb_starts, (unsigned long long)cb_taken,
	      (unsigned long long)cb_stops);
	if (!strcmp(opt.mode, "p2p"))
		REQUIRE(cb_starts > 0, "profiler: no event from %llu p2p messages", (unsigned long long)msgs);
	else
		REQUIRE(cb_calls == 0,
		      "profiler: the collnet called NCCL's callback %llu time(s); its calls carry no pHandle",
		      (unsigned long long)cb_calls);
	REQUIRE(cb_updates <= cb_stops, "profiler: %llu update(s) for %llu stop(s) (the plugin sends "
	      "its one update with the stop)", (unsigned long long)cb_updates, (unsigned long long)cb_stops);
	if (prof == &rec_table) {
		/* every end but the closes' carried the result */
		uint64_t closed = opt.close_inflight && cb_taken ? 1 : 0;
		REQUIRE(rec_net_open == 0 && rec_plain_stops == closed && rec_done_stops + closed == cb_taken,
		      "profiler: %llu net event(s) open, %llu stopped by a close (want %llu), %llu with "
		      "their result",
		      (unsigned long long)rec_net_open, (unsigned long long)rec_plain_stops,
		      (unsigned long long)closed, (unsigned long long)rec_done_stops);
	}
	if (my_rank == 0)
		fprintf(stderr, "profile events: %llu message(s), %llu event(s) started, %llu taken by the "
			"profiler and stopped (%llu with their result), profiler %s; %.0f ns per callback "
			"call (NCCL's side, the harness's checks, the profiler)\n",
			(unsigned long long)msgs, (unsigned long long)cb_starts,
			(unsigned long long)cb_taken, (unsigned long long)cb_updates, prof->name,
			cb_calls ? (double)cb_ns / (double)cb_calls : 0.0);
}
