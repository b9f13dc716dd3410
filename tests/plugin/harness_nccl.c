/* NCCL's side of the plugin: dlopen, one version of its ABI (v12 .. v8),
 * the logger NCCL hands it, connect on a proxy thread, and NCCL's proxy
 * loop over collnet requests. */
#include "harness.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "wait.h"
#include "../../plugin/prof_events.h"

int log_prefix_ok; /* lines that came through NCCL's logger with our prefix */
/* Which path collnet connect announced (from its log lines). */
int saw_agg_path, saw_fallback;
int saw_parked, saw_unparked; /* p2p comms parked at close, freed later */
int saw_fault, saw_naggs = -1;
int saw_tuner_aggs = -1, saw_tuner_live = -1;
int saw_stall, saw_stall_peer;
volatile bool stall_now;
double stall_quiet_s;
int saw_back, saw_nholds, saw_drain;
double saw_back_t; /* when this node logged its latest return */
double saw_holds[16];
int saw_warn;
unsigned long long saw_job_id;
uint64_t saw_copied, saw_kept, saw_passed;
double fb_t_first, fb_t_decided;
uint64_t saw_fault_last_ns;

void hlog(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		 const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	(void)flags;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!strncmp(buf, "NET/Sumcast", 11))
		__atomic_fetch_add(&log_prefix_ok, 1, __ATOMIC_RELAXED);
	if (level <= NCCL_LOG_WARN)
		__atomic_fetch_add(&saw_warn, 1, __ATOMIC_RELAXED);
	const char *jl = strstr(buf, "collnet job 0x");
	unsigned long long jid;
	if (jl && sscanf(jl, "collnet job 0x%llx: rank", &jid) == 1)
		__atomic_store_n(&saw_job_id, jid, __ATOMIC_RELAXED);
	if (strstr(buf, " has waited "))
		__atomic_fetch_add(&saw_stall, 1, __ATOMIC_RELAXED);
	if (strstr(buf, ": receive from rank ") && strstr(buf, "(tag 0x"))
		__atomic_fetch_add(&saw_stall_peer, 1, __ATOMIC_RELAXED);
	if (strstr(buf, "parked until they complete"))
		__atomic_fetch_add(&saw_parked, 1, __ATOMIC_RELAXED);
	else if (strstr(buf, "completed after close; freed"))
		__atomic_fetch_add(&saw_unparked, 1, __ATOMIC_RELAXED);
	const char *tl = strstr(buf, "tuner: comm 0x");
	if (tl) {
		unsigned nodes, ranks, aggs;
		if (sscanf(strchr(tl, ',') + 1, " %u nodes x %u ranks, %u aggregators", &nodes, &ranks, &aggs) == 3)
			__atomic_store_n(&saw_tuner_aggs, (int)aggs, __ATOMIC_RELAXED);
		__atomic_store_n(&saw_tuner_live, strstr(tl, "(live)") ? 1 : 0, __ATOMIC_RELAXED);
	}
	if (strstr(buf, "aggregators unusable"))
		__atomic_store_n(&saw_fallback, 1, __ATOMIC_RELAXED);
	else if (strstr(buf, " aggregators (") && strstr(buf, "+ ring")) {
		const char *q = strstr(buf, " aggregators (");
		while (q > buf && q[-1] >= '0' && q[-1] <= '9')
			q--;
		__atomic_store_n(&saw_naggs, atoi(q), __ATOMIC_RELAXED);
		__atomic_store_n(&saw_agg_path, 1, __ATOMIC_RELAXED);
	}
	if (strstr(buf, ": aggregator ") && strstr(buf, " failed (") && strstr(buf, "; epoch ")) {
		unsigned long long chunks = 0, bytes = 0;
		const char *h = strstr(buf, "; here ");
		if (h && sscanf(h, "; here %llu chunk(s) (%llu bytes) are copied", &chunks, &bytes) == 2)
			__atomic_fetch_add(&saw_copied, bytes, __ATOMIC_RELAXED);
		unsigned long long kept = 0, passed = 0;
		const char *w = strstr(buf, "; window chunks: ");
		if (w && sscanf(w, "; window chunks: %llu redone from what this node kept after its request "
				"completed, %llu copies", &kept, &passed) == 2) {
			__atomic_fetch_add(&saw_kept, kept, __ATOMIC_RELAXED);
			__atomic_fetch_add(&saw_passed, passed, __ATOMIC_RELAXED);
		}
		const char *a = strstr(buf, "; agreed ");
		double ms = 0;
		if (a && sscanf(a, "; agreed %lf ms", &ms) == 1 && !fb_t_first) {
			fb_t_decided = sc_now_s();
			fb_t_first = fb_t_decided - ms / 1e3;
		}
		const char *t = strstr(buf, "; tried again in ");
		double hold = 0;
		if (t && sscanf(t, "; tried again in %lf s", &hold) == 1 && saw_nholds < 16)
			saw_holds[saw_nholds++] = hold;
		__atomic_store_n(&saw_fault_last_ns, sc_now_ns(), __ATOMIC_RELAXED);
		__atomic_fetch_add(&saw_fault, 1, __ATOMIC_RELAXED);
	}
	if (strstr(buf, ": aggregator ") && strstr(buf, " drains (it asked the nodes to move off)"))
		__atomic_fetch_add(&saw_drain, 1, __ATOMIC_RELAXED);
	if (strstr(buf, ": aggregator ") && strstr(buf, " is back (READY again on every node")) {
		saw_back_t = sc_now_s();
		__atomic_fetch_add(&saw_back, 1, __ATOMIC_RELAXED);
	}
	/* The plugin sends debug lines only when SUMCAST_LOG_LEVEL asks. */
	if (level <= NCCL_LOG_WARN || (opt.verbose && level == NCCL_LOG_INFO) || level == NCCL_LOG_TRACE)
		fprintf(stderr, "[rank %d] %s %s:%d %s\n", my_rank,
			level <= NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "DEBUG", file,
			line, buf);
}

/* ---------------- the plugin, through one version of its ABI ---------------- */

struct plug P;

/* The v11 and v12 properties of device 0 are the same device: the same
 * values, whatever the layout. Filled over a pattern (0x5a) so that a
 * field the plugin left unwritten, or wrote at another offset (a vProps
 * of the wrong size moves everything after it), shows. */
static void check_props_v11(const ncclNetProperties_v11_t *p, const char *what)
{
	REQUIRE(p->name && p->ptrSupport == NCCL_PTR_HOST && p->speed > 0 && p->maxRecvs >= 1 &&
		      p->maxRecvs <= 8 && p->netDeviceType == NCCL_NET_DEVICE_HOST &&
		      p->maxP2pBytes >= (64u << 20) && p->maxCollBytes > 0 && p->regIsGlobal == 0 &&
		      p->maxMultiRequestSize == 1 && p->vProps.ndevs == 1 && p->vProps.devs[0] == 0,
	      "%s properties: name %s ptr %d speed %d maxRecvs %d maxP2pBytes %zu maxMultiRequestSize %d "
	      "vProps %d:%d",
	      what, p->name, p->ptrSupport, p->speed, p->maxRecvs, p->maxP2pBytes, p->maxMultiRequestSize,
	      p->vProps.ndevs, p->vProps.devs[0]);
}

static void check_props_v12(ncclResult_t (*get12)(int, ncclNetProperties_v12_t *),
			    ncclResult_t (*get11)(int, ncclNetProperties_v11_t *), const char *what)
{
	ncclNetProperties_v12_t p;
	ncclNetProperties_v11_t q;

	memset(&p, 0x5a, sizeof(p));
	memset(&q, 0x5a, sizeof(q));
	NCHECK(get12(0, &p));
	NCHECK(get11(0, &q));
	check_props_v11(&q, what);
	/* v12's own: the railId / planeId the plugin documents (it does not
	 * know them), and the 8 device slots of vProps, the unused ones zero */
	REQUIRE(p.railId == NCCL_NET_ID_UNDEF && p.planeId == NCCL_NET_ID_UNDEF,
	      "%s v12 properties: railId %d planeId %d, want both NCCL_NET_ID_UNDEF", what, p.railId,
	      p.planeId);
	REQUIRE(p.vProps.ndevs == 1 && p.vProps.devs[0] == 0, "%s v12 vProps %d:%d", what,
	      p.vProps.ndevs, p.vProps.devs[0]);
	for (int i = 1; i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
		REQUIRE(p.vProps.devs[i] == 0, "%s v12 vProps.devs[%d] = %d (unused slots are 0)", what,
		      i, p.vProps.devs[i]);
	REQUIRE(p.name && !strcmp(p.name, q.name) && p.guid == q.guid && p.ptrSupport == q.ptrSupport &&
		      p.regIsGlobal == q.regIsGlobal && p.forceFlush == q.forceFlush &&
		      p.speed == q.speed && p.port == q.port && p.latency == q.latency &&
		      p.maxComms == q.maxComms && p.maxRecvs == q.maxRecvs &&
		      p.netDeviceType == q.netDeviceType && p.netDeviceVersion == q.netDeviceVersion &&
		      p.maxP2pBytes == q.maxP2pBytes && p.maxCollBytes == q.maxCollBytes &&
		      p.maxMultiRequestSize == q.maxMultiRequestSize,
	      "%s v12 properties differ from v11's: maxP2pBytes %zu / %zu, maxCollBytes %zu / %zu, "
	      "maxMultiRequestSize %d / %d, maxComms %d / %d",
	      what, p.maxP2pBytes, q.maxP2pBytes, p.maxCollBytes, q.maxCollBytes, p.maxMultiRequestSize,
	      q.maxMultiRequestSize, p.maxComms, q.maxComms);
}

void plugin_open(bool coll)
{
	P.dl = dlopen(opt.plugin, RTLD_NOW | RTLD_LOCAL);
	REQUIRE(P.dl, "dlopen %s: %s", opt.plugin, dlerror());
	if (HARNESS_CTX_ABI) {
		/* NCCL 2.30 looks up v12 first, 2.28 v11; the same calls. */
		if (opt.version == 12) {
			P.n12 = dlsym(P.dl, "ncclNetPlugin_v12");
			P.c12 = dlsym(P.dl, "ncclCollNetPlugin_v12");
			REQUIRE(P.n12 && P.c12, "v12 symbols missing");
			/* The v11 tables too: the same device through both layouts. */
		}
		P.n11 = dlsym(P.dl, "ncclNetPlugin_v11");
		P.c11 = dlsym(P.dl, "ncclCollNetPlugin_v11");
		REQUIRE(P.n11 && P.c11, "v11 symbols missing");
		const char *nn = opt.version == 12 ? P.n12->name : P.n11->name;
		const char *cn = opt.version == 12 ? P.c12->name : P.c11->name;
		REQUIRE(!strcmp(nn, "Sumcast") && !strcmp(cn, "Sumcast"), "net name %s, collnet name %s",
		      nn, cn);
		ncclNetCommConfig_t cfg = { -1 };
		NCHECK(NET_CTX_CALL(init, &P.nctx, 0x1234, &cfg, hlog, prof_setup()));
		if (coll)
			NCHECK(CN_CTX_CALL(init, &P.cctx, 0x1234, hlog));
	} else if (opt.version == 8) {
		P.n8 = dlsym(P.dl, "ncclNetPlugin_v8");
		P.c8 = dlsym(P.dl, "ncclCollNetPlugin_v8");
		REQUIRE(P.n8 && P.c8, "v8 symbols missing");
		NCHECK(P.n8->init(hlog));
		if (coll)
			NCHECK(P.c8->init(hlog));
	} else {
		/* v9 / v10: the collnet table of that version (one layout); the
		 * net side through v8's (the plugin's init is shared). */
		char sym[32];
		snprintf(sym, sizeof(sym), "ncclCollNetPlugin_v%d", opt.version);
		P.n8 = dlsym(P.dl, "ncclNetPlugin_v8");
		P.c9 = dlsym(P.dl, sym);
		REQUIRE(P.n8 && P.c9, "%s or ncclNetPlugin_v8 missing", sym);
		REQUIRE(!strcmp(P.c9->name, "Sumcast"), "collnet name %s", P.c9->name);
		if (opt.version == 10) {
			/* v10's net init takes NCCL's profiler callback */
			P.n10 = dlsym(P.dl, "ncclNetPlugin_v10");
			REQUIRE(P.n10 && !strcmp(P.n10->name, "Sumcast"), "ncclNetPlugin_v10 missing");
			NCHECK(P.n10->init(hlog, prof_setup()));
		} else {
			NCHECK(P.n8->init(hlog));
		}
		if (coll) {
			NCHECK(P.c9->init(hlog));
			ncclNetProperties_v9_t p;
			NCHECK(P.c9->getProperties(0, &p));
			REQUIRE(p.ptrSupport == NCCL_PTR_HOST && p.maxCollBytes > 0, "%s properties", sym);
		}
	}
	int ndev = 0;
	NCHECK(NET_CALL(devices, &ndev));
	REQUIRE(ndev == 1, "devices: %d", ndev);
	if (opt.version == 12) {
		/* No virtual NICs: NCCL then uses the physical devices (one), so a
		 * vProps of either size never reaches the plugin. */
		REQUIRE(!P.n12->makeVDevice && !P.c12->makeVDevice && !P.n11->makeVDevice &&
			      !P.c11->makeVDevice,
		      "makeVDevice is not NULL: docs/plugin.md says NCCL gets no virtual NICs");
		check_props_v12(P.n12->getProperties, P.n11->getProperties, "net");
		if (coll) {
			ndev = 0;
			NCHECK(P.c12->devices(&ndev));
			REQUIRE(ndev == 1, "collnet devices: %d", ndev);
			check_props_v12(P.c12->getProperties, P.c11->getProperties, "collnet");
		}
	} else if (opt.version == 11) {
		ncclNetProperties_v11_t p;
		memset(&p, 0x5a, sizeof(p));
		NCHECK(P.n11->getProperties(0, &p));
		check_props_v11(&p, "v11 net");
	} else {
		ncclNetProperties_v8_t p;
		NCHECK(P.n8->getProperties(0, &p));
		REQUIRE(p.name && p.ptrSupport == NCCL_PTR_HOST && p.speed > 0 && p.maxRecvs >= 1,
		      "v8 properties");
	}
}

void plugin_finalize(bool coll)
{
	if (!HARNESS_CTX_ABI)
		return;
	if (coll)
		NCHECK(CN_CTX_CALL(finalize, P.cctx));
	NCHECK(NET_CTX_CALL(finalize, P.nctx));
}

void net_props(int *speed, double *latency_us, int *max_recvs_out)
{
	int sp, mr;
	double lat;

	if (opt.version == 12) {
		ncclNetProperties_v12_t p;
		NCHECK(P.n12->getProperties(0, &p));
		sp = p.speed, lat = p.latency, mr = p.maxRecvs;
	} else if (opt.version == 11) {
		ncclNetProperties_v11_t p;
		NCHECK(P.n11->getProperties(0, &p));
		sp = p.speed, lat = p.latency, mr = p.maxRecvs;
	} else {
		ncclNetProperties_v8_t p;
		NCHECK(P.n8->getProperties(0, &p));
		sp = p.speed, lat = p.latency, mr = p.maxRecvs;
	}
	if (speed)
		*speed = sp;
	if (latency_us)
		*latency_us = lat;
	if (max_recvs_out)
		*max_recvs_out = mr;
}

int max_recvs(void)
{
	int n = 0;
	net_props(NULL, NULL, &n);
	return n;
}

void net_listen(void *h, void **lc)
{
	NCHECK(HARNESS_CTX_ABI ? NET_CTX_CALL(listen, P.nctx, 0, h, lc) : P.n8->listen(0, h, lc));
}
ncclResult_t net_connect(void *h, void **sc)
{
	ncclNetDeviceHandle_t *dh = NULL;
	ncclNetCommConfig_t cfg = { -1 };
	return HARNESS_CTX_ABI ? NET_CTX_CALL(connect, P.nctx, 0, h, sc, &dh)
	       : P.n10	       ? P.n10->connect(0, &cfg, h, sc, &dh)
			       : P.n8->connect(0, h, sc, &dh);
}
ncclResult_t net_accept(void *lc, void **rc)
{
	ncclNetDeviceHandle_t *dh = NULL;
	return NET_CALL(accept, lc, rc, &dh);
}
void *net_reg(void *comm, void *p, size_t len)
{
	void *mh = NULL;
	NCHECK(NET_CALL(regMr, comm, p, len, NCCL_PTR_HOST, &mh));
	return mh;
}
void net_dereg(void *comm, void *mh)
{
	NCHECK(NET_CALL(deregMr, comm, mh));
}
/* v10 and later pass NCCL's pHandles (NULL without --profile-events:
 * the plugin then reports nothing). */
void *net_isend(void *sc, void *p, size_t len, int tag, void *mh)
{
	void *req = NULL, *ph[1] = { NULL };
	if (opt.profile_events)
		prof_post(SC_PROF_SEND, 1, &tag, &len, ph);
	NCHECK(HARNESS_CTX_ABI ? NET_CTX_CALL(isend, sc, p, len, tag, mh, ph[0], &req)
	       : P.n10	       ? P.n10->isend(sc, p, len, tag, mh, ph[0], &req)
			       : P.n8->isend(sc, p, (int)len, tag, mh, &req));
	if (opt.profile_events)
		prof_posted(req, 1, ph);
	return req;
}
void *net_irecv(void *rc, int n, void **p, size_t *len, int *tags, void **mh)
{
	void *req = (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION; /* NCCL's hint; not a request */
	if (HARNESS_CTX_ABI || P.n10) {
		void *ph[8] = { 0 };
		if (opt.profile_events)
			prof_post(SC_PROF_RECV, n, tags, len, ph);
		NCHECK(HARNESS_CTX_ABI ? NET_CTX_CALL(irecv, rc, n, p, len, tags, mh, ph, &req)
				       : P.n10->irecv(rc, n, p, len, tags, mh, ph, &req));
		if (opt.profile_events)
			prof_posted(req, n, ph);
	} else {
		int l[8];
		for (int i = 0; i < n; i++)
			l[i] = (int)len[i];
		req = NULL;
		NCHECK(P.n8->irecv(rc, n, p, l, tags, mh, &req));
	}
	return req;
}
int net_test(void *req, int *sizes)
{
	int done = 0;
	NCHECK(NET_CALL(test, req, &done, sizes));
	if (done && opt.profile_events)
		prof_done(req);
	return done;
}

/* Tests until done, bounded. */
void net_wait(void *req, int *sizes, const char *what)
{
	double end = sc_now_s() + 60;
	while (!net_test(req, sizes))
		REQUIRE(sc_now_s() < end, "%s: not complete after 60 s", what);
}

/* ---------------- collnet: connect on NCCL's proxy thread, requests from its progress loop ---------------- */

static void *coll_listen(void *h)
{
	void *lc = NULL;
	NCHECK(HARNESS_CTX_ABI ? CN_CTX_CALL(listen, P.cctx, 0, h, &lc)
	       : opt.version == 8 ? P.c8->listen(0, h, &lc) : P.c9->listen(0, h, &lc));
	return lc;
}

const char *coll_rv_name = "coll"; /* one name per collnet set up */

struct cconn_arg {
	void **handles;
	void *lc, *cc;
	uint8_t *region;
	size_t region_len;
	void *mh;
	ncclResult_t ret;
};

/* NCCL calls the collnet connect (a blocking collective) and regMr from
 * its proxy service thread; the requests come later from the progress
 * thread. */
static void *coll_connect_thread(void *a)
{
	struct cconn_arg *c = a;
	c->ret = CN_CALL(connect, c->handles, opt.nranks, my_rank, c->lc, &c->cc);
	if (c->ret != ncclSuccess || !c->cc)
		return NULL;
	NCHECK(CN_CALL(closeListen, c->lc));
	NCHECK(CN_CALL(regMr, c->cc, c->region, c->region_len, NCCL_PTR_HOST, &c->mh));
	return NULL;
}

void *coll_setup(uint8_t *region, size_t region_len, void **mh)
{
	uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
	static uint8_t all[MAX_RANKS][NCCL_NET_HANDLE_MAXSIZE];
	void *handles[MAX_RANKS];

	struct cconn_arg ca = { handles, coll_listen(h), NULL, region, region_len, NULL, 0 };
	rv_put(coll_rv_name, my_rank, h, sizeof(h));
	for (int r = 0; r < opt.nranks; r++) {
		rv_get(coll_rv_name, r, all[r], sizeof(all[r]));
		handles[r] = all[r];
	}
	pthread_t th;
	pthread_create(&th, NULL, coll_connect_thread, &ca);
	pthread_join(th, NULL);
	REQUIRE(ca.ret == ncclSuccess && ca.cc, "collnet connect returned %d", (int)ca.ret);
	*mh = ca.mh;
	return ca.cc;
}

/* Requests this rank issued (and their bytes): what its trace must list. */
uint64_t issued_reqs, issued_bytes;

void *c_iallreduce(void *cc, void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
		   void *mh)
{
	void *req = NULL;
	NCHECK(HARNESS_CTX_ABI ? CN_CTX_CALL(iallreduce, cc, s, r, count, t, op, mh, mh, &req)
	       : opt.version == 8 ? P.c8->iallreduce(cc, s, r, (int)count, t, op, mh, mh, &req)
				  : P.c9->iallreduce(cc, s, r, count, t, op, mh, mh, &req));
	if (req) {
		issued_reqs++;
		issued_bytes += count * type_size(t);
	}
	return req;
}

ncclResult_t c_iallreduce_rc(void *cc, void *s, void *r, size_t count, ncclDataType_t t,
			     ncclRedOp_t op, void *mh, void **req)
{
	*req = NULL;
	ncclResult_t rc = HARNESS_CTX_ABI ? CN_CTX_CALL(iallreduce, cc, s, r, count, t, op, mh, mh, req)
			  : opt.version == 8 ? P.c8->iallreduce(cc, s, r, (int)count, t, op, mh, mh, req)
					     : P.c9->iallreduce(cc, s, r, count, t, op, mh, mh, req);
	if (rc == ncclSuccess && *req) {
		issued_reqs++;
		issued_bytes += count * type_size(t);
	}
	return rc;
}

ncclResult_t c_test_rc(void *req, int *done, int *size)
{
	*done = 0;
	return CN_CALL(test, req, done, size);
}

int c_test(void *req, int *size)
{
	int done = 0;
	NCHECK(CN_CALL(test, req, &done, size));
	return done;
}

/* The window calls as NCCL's version layers make them: one part; v8's part
 * has a 32-bit size (NCCL's net_v8.cc refuses a larger window). */
ncclResult_t c_iallgather_rc(void *cc, void *send, void *recv, size_t bpr, size_t wo, size_t wb,
			     void *smh, void *rmh, void **req)
{
	ncclResult_t rc;

	*req = NULL;
	if (opt.version == 8) {
		ncclNetSGE_v8_t p = { rmh, recv, (uint32_t)wb };
		rc = P.c8->iallgather(cc, send, 1, &p, bpr, wo, wb, smh, req);
	} else {
		ncclNetSGE_t p = { rmh, recv, wb };
		rc = HARNESS_CTX_ABI ? CN_CTX_CALL(iallgather, cc, send, 1, &p, bpr, wo, wb, smh, req)
				       : P.c9->iallgather(cc, send, 1, &p, bpr, wo, wb, smh, req);
	}
	if (rc == ncclSuccess && *req) {
		issued_reqs++;
		issued_bytes += wb;
	}
	return rc;
}

ncclResult_t c_ireducescatter_rc(void *cc, void *send, void *recv, size_t bpr, size_t wo,
				 size_t wb, ncclDataType_t t, ncclRedOp_t op, void *smh, void *rmh,
				 void **req)
{
	ncclResult_t rc;

	*req = NULL;
	if (opt.version == 8) {
		ncclNetSGE_v8_t p = { smh, send, (uint32_t)wb };
		rc = P.c8->ireducescatter(cc, 1, &p, recv, bpr, wo, wb, t, op, rmh, req);
	} else {
		ncclNetSGE_t p = { smh, send, wb };
		rc = HARNESS_CTX_ABI
			     ? CN_CTX_CALL(ireducescatter, cc, 1, &p, recv, bpr, wo, wb, t, op, rmh, req)
			     : P.c9->ireducescatter(cc, 1, &p, recv, bpr, wo, wb, t, op, rmh, req);
	}
	if (rc == ncclSuccess && *req) {
		issued_reqs++;
		issued_bytes += wb;
	}
	return rc;
}

/* CPUs online (asked once). */
static long ncpus(void)
{
	static long n;
	if (!n)
		n = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
	return n;
}

/* SUMCAST_HARNESS_POLL_US: sleep this long after a test() that found
 * nothing done ("yield": never, as NCCL's proxy thread, which yields when
 * it finds nothing to do; "spin": never, not even yielding; default 0: spin, yielding when there are more ranks than 2;
 * "nap" or -2 by default when there are more than 8 processes per CPU, --heads runs of up to
 * 256: a nap doubling from 16 us to 1 ms while nothing completes, as their
 * spinning, or short naps by the hundred, would take the cores from the
 * daemons and the processes that have work). On the emulated cluster W ranks and A daemons
 * share 2 cores with the kernel's veth/tbf/TCP work; spinning ranks would
 * starve it. */
static long poll_us(void)
{
	static long v = LONG_MIN; /* not decided yet (nap and spin are negative) */
	if (v == LONG_MIN) {
		const char *e = getenv("SUMCAST_HARNESS_POLL_US");
		v = e && !strcmp(e, "yield") ? 0
		    : e && !strcmp(e, "spin") ? -3
		    : e && !strcmp(e, "nap")  ? -2
		    : e && atol(e) > 0	     ? atol(e)
		    : opt.nranks * opt.heads > 8 * ncpus() ? -2 : 0;
	}
	return v;
}

/* More spinning processes (ranks, and the daemons' data threads) than
 * CPUs: a rank that finds nothing done yields, or the daemon it waits for
 * may not run for a time slice (at N = 2 with one daemon on 2 CPUs an
 * 8-byte allreduce took 5-7 ms instead of tens of us). */
bool harness_oversubscribed(void)
{
	return poll_us() != -3 && opt.nranks * opt.heads + opt.naggs > ncpus();
}

void harness_idle(unsigned *nap, bool moved)
{
	if (moved) {
		*nap = 0;
	} else if (poll_us() == -2) {
		th_nap(nap, false);
	} else if (poll_us() > 0) {
		usleep((useconds_t)poll_us());
	} else if (harness_oversubscribed()) {
		sched_yield(); /* more spinners than cores here: let the peers run */
	}
}

/* NCCL's proxy: chunks of at most 2 MiB, up to 8 outstanding, tested in order. */
void allreduce_chunked(void *cc, uint8_t *send, uint8_t *recv, size_t count, ncclDataType_t t,
		       ncclRedOp_t op, void *mh)
{
	size_t es = type_size(t), per = (2u << 20) / es, nchunks = (count + per - 1) / per;
	void *reqs[8];
	size_t issued = 0, done = 0;
	unsigned nap = 0;
	double end = sc_now_s() + 120;

	if (count == 0)
		return;
	while (done < nchunks) {
		REQUIRE(sc_now_s() < end, "allreduce of %zu x %s %s: %zu/%zu chunks after 120 s", count,
		      type_name(t), op_name(op), done, nchunks);
		if (issued < nchunks && issued - done < 8) {
			size_t off = issued * per, n = count - off < per ? count - off : per;
			void *r = c_iallreduce(cc, send + off * es, recv + off * es, n, t, op, mh);
			if (r)
				reqs[issued++ % 8] = r;
		}
		if (stall_now && issued && my_rank == opt.stall_rank) {
			/* a slow peer: nothing of this rank moves for a while */
			stall_now = false;
			usleep((useconds_t)(stall_quiet_s * 1e6));
			end += stall_quiet_s;
		}
		int size = -1;
		if (done < issued && !c_test(reqs[done % 8], &size)) {
			harness_idle(&nap, false);
		} else if (done < issued) {
			nap = 0;
			size_t off = done * per, n = count - off < per ? count - off : per;
			REQUIRE((size_t)size == n * es, "test size %d, want %zu", size, n * es);
			done++;
		}
	}
}

/* NCCL's collnet send proxy for an allreduce over ngroups x 8 channels
 * (src/transport/coll_net.cc, sendProxyProgress): the subs form groups of
 * COLLNET_GROUP_NSUBS (8), each group issues one request per step for its
 * subs' span, the groups post in (step, group) order, each keeps up to
 * NCCL_STEPS (8) outstanding and tests its oldest. What allreduce_chunked
 * does not do: in a pass in which a group posts, or gets a NULL request
 * ("continue"), it tests nothing; so a group that keeps getting NULL
 * never tests its own requests while it retries. Requests are pieces of
 * piece_bytes, piece p going to group p % ngroups, step p / ngroups. */
void allreduce_grouped(void *cc, uint8_t *send, uint8_t *recv, size_t count, ncclDataType_t t,
		       ncclRedOp_t op, void *mh, int ngroups, size_t piece_bytes)
{
	enum { GMAX = 8, STEPS = 8 };
	size_t es = type_size(t), per = piece_bytes / es, npieces = (count + per - 1) / per;
	void *reqs[GMAX][STEPS];
	size_t posted[GMAX] = { 0 }, done[GMAX] = { 0 }, nsteps[GMAX] = { 0 }, total = 0;
	unsigned nap = 0;
	double end = sc_now_s() + 120;

	REQUIRE(ngroups >= 1 && ngroups <= GMAX && per, "allreduce_grouped: %d groups of %zu-byte pieces",
	      ngroups, piece_bytes);
	for (size_t p = 0; p < npieces; p++)
		nsteps[p % (size_t)ngroups]++;
	while (total < npieces) {
		REQUIRE(sc_now_s() < end, "allreduce of %zu x %s %s in %d groups: %zu of %zu requests done "
		      "after 120 s", count, type_name(t), op_name(op), ngroups, total, npieces);
		bool moved = false;
		for (int g = 0; g < ngroups; g++) {
			/* group 0 starts step k once the last group posted step
			 * k - 1; group g > 0 once group g - 1 posted step k */
			bool ordered = g == 0 ? posted[ngroups - 1] == posted[0] : posted[g] < posted[g - 1];
			if (ordered && posted[g] < nsteps[g] && posted[g] - done[g] < STEPS) {
				size_t off = (posted[g] * (size_t)ngroups + (size_t)g) * per;
				size_t n = count - off < per ? count - off : per;
				void *r = c_iallreduce(cc, send + off * es, recv + off * es, n, t, op, mh);
				if (!r)
					continue; /* NCCL: this group tests nothing this pass */
				reqs[g][posted[g]++ % STEPS] = r;
				moved = true;
				continue;
			}
			if (done[g] < posted[g]) {
				size_t off = (done[g] * (size_t)ngroups + (size_t)g) * per;
				size_t n = count - off < per ? count - off : per;
				int size = -1;
				if (c_test(reqs[g][done[g] % STEPS], &size)) {
					REQUIRE((size_t)size == n * es, "test size %d, want %zu", size, n * es);
					done[g]++;
					total++;
					moved = true;
				}
			}
		}
		harness_idle(&nap, moved);
	}
}
