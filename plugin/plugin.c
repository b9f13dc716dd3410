/* Process-wide plugin state: NCCL's logger as our log sink, the SUMCAST_*
 * settings table, error mapping, device properties, type mapping. */
#include "plugin.h"

#include "fabric_env.h"
#include "split.h"

#include <errno.h>
#include <pthread.h>
#include <rdma/fi_errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "wire.h"

struct plugin_settings plugin_cfg;

#define S(field) offsetof(struct plugin_settings, field)
static const struct cfg_entry plugin_table[] = {
	{ "", "provider", CFG_STRING, "auto", "libfabric provider (tcp, shm, efa, verbs); auto: best available",
	  S(provider), 0, 0, false },
	{ "", "iface", CFG_STRING, "", "local address the endpoints bind to; empty: provider's choice",
	  S(iface), 0, 0, false },
	{ "", "aggregators", CFG_STRING, "", "sumcastd control endpoints host:port,...; empty: ring only",
	  S(aggregators), 0, 0, false },
	{ "", "split", CFG_STRING, "auto", "fraction of each allreduce sent to the aggregators, or auto (windows: all above 0)",
	  S(split), 0, 0, false },
	{ "", "link_gbps", CFG_DOUBLE, "0", "node link bandwidth in Gb/s for the split model; 0: from provider",
	  S(link_gbps), 0, 1e6, false },
	{ "", "agg_gbps", CFG_DOUBLE, "0", "one aggregator's link bandwidth in Gb/s; 0: same as link_gbps",
	  S(agg_gbps), 0, 1e6, false },
	{ "", "agg_efficiency", CFG_DOUBLE, SPLIT_AGG_EFF_DEFAULT,
	  "share of its link the aggregator path reaches while the ring shares the node links (split model)",
	  S(agg_eff), 0.1, 1, false },
	{ "", "key_file", CFG_STRING, "", "file with the shared key that signs job joins; empty: none",
	  S(key_file), 0, 0, false },
	{ "", "chunk_bytes", CFG_SIZE, "256K", "aggregator chunk size",
	  S(chunk_bytes), 4096, 64 << 20, false },
	{ "", "window", CFG_INT, "8", "aggregator chunks in flight per aggregator",
	  S(window), 1, 1024, false },
	{ "", "weight", CFG_INT, "1",
	  "this job's share of the aggregators against other jobs': its window times this, capped by each daemon's [job] max-weight (protocol 4)",
	  S(weight), 1, 64, false },
	{ "", "ring_chunk_bytes", CFG_SIZE, "512K", "fallback ring chunk size",
	  S(ring_chunk_bytes), 4096, 64 << 20, false },
	{ "", "ring_window", CFG_INT, "4", "fallback ring chunks in flight per request",
	  S(ring_window), 1, 16, false },
	{ "", "small_bytes", CFG_SIZE, "64K", "below this size the path with fewer hops takes all (split=auto)",
	  S(small_bytes), 0, 1ull << 40, false },
	{ "", "connect_timeout", CFG_DURATION_MS, "15s", "collnet connect: limit for joins and ring setup",
	  S(connect_timeout_ms), 100, 3600000, false },
	{ "", "agg_timeout", CFG_DURATION_MS, "30s", "job timeout asked of the aggregators; recovering from an aggregator fault must end within it (else a node is dead: error)",
	  S(agg_timeout_ms), 100, 3600000, false },
	{ "", "agg_deadline", CFG_DURATION_MS, "2s",
	  "an aggregator that answers no PING this long has failed (its work moves to the others and the ring); 0: no PING",
	  S(agg_deadline_ms), 0, 3600000, false },
	{ "", "failover", CFG_BOOL, "true",
	  "survive aggregator faults: the nodes agree, repair over the ring and go on without it; false: a fault fails the requests (rank 0's setting)",
	  S(failover), 0, 0, false },
	{ "", "retain_hold", CFG_DURATION_MS, "100ms",
	  "failover: a request whose results are all in is reported up to this much later, while results already on their way show every node holds it, so that it needs no retention copy; 0: reported at once, copied",
	  S(retain_hold_ms), 0, 10000, false },
	{ "", "readmit", CFG_DURATION_MS, "1s",
	  "how often this node tries to join an aggregator that failed or drained again; once every node has, the communicator uses it again (failover on); 0: never",
	  S(readmit_ms), 0, 3600000, false },
	{ "", "readmit_max", CFG_DURATION_MS, "60s",
	  "the longest an aggregator that fails again soon after it came back is kept out (the wait doubles from readmit each time)",
	  S(readmit_max_ms), 0, 86400000, false },
	{ "", "multicast", CFG_BOOL, "true",
	  "take results from an aggregator's multicast group when it offers one (sumcastd fabric.multicast); false: this job's results by unicast (every node must say the same)",
	  S(multicast), 0, 0, false },
	{ "", "mc_nack_us", CFG_INT, "2000",
	  "microseconds a multicast result may stay incomplete while its group is quiet before this node asks for it by unicast",
	  S(mc_nack_us), 100, 10000000, false },
	{ "", "test_mc_drop", CFG_INT, "0",
	  "test hook: drop this many of every 1000 multicast datagrams read, as a lossy network would; 0 in use",
	  S(test_mc_drop), 0, 1000, false },
	{ "", "max_recvs", CFG_INT, "8", "grouped receives announced to NCCL (1..8)",
	  S(max_recvs), 1, PLUGIN_MAX_RECVS, false },
	{ "", "eager_bytes", CFG_SIZE_AUTO, "auto",
	  "largest message the provider sends eagerly; auto: 16K for tcp/verbs (ofi_rxm), 0 (off) otherwise",
	  S(eager_bytes), 0, 64 << 20, false },
	{ "", "deterministic", CFG_BOOL, "false",
	  "aggregators reduce every chunk in rank order: bitwise the same sums run after run (rank 0's setting)",
	  S(deterministic), 0, 0, false },
	{ "", "trace", CFG_STRING, "",
	  "file prefix for a JSON line per allreduce (<prefix>.<job>.<rank>.jsonl); empty: off",
	  S(trace), 0, 0, false },
	{ "", "fan_in", CFG_INT, "64",
	  "most nodes one aggregator job takes in: a collnet of more nodes is a two-level tree of jobs of at most max(ceil(N/G), G) nodes, G = ceil(N/fan_in) groups (rank 0's setting)",
	  S(fan_in), 2, 2048, false },
	{ "", "job_label", CFG_STRING, "",
	  "the job's name in the aggregators' /stats and sumcastctl jobs (at most 64 printable ASCII bytes); empty: SLURM_JOB_ID, else POD_NAME (Kubernetes downward API), else none",
	  S(job_label), 0, 0, false },
	{ "", "tuner", CFG_BOOL, "true",
	  "NCCL's tuner (this library's ncclTunerPlugin_v1..v6): CollNet's AllReduce, ReduceScatter and AllGather costs from the sizing model, CollNet ruled out where NCCL's ring or tree is faster (v1, v2: CollNet Chain chosen for an AllReduce where it wins); false: NCCL's own costs stand",
	  S(tuner), 0, 0, false },
	{ "", "log_level", CFG_STRING, "info", "error|warn|info|debug|trace (NCCL_DEBUG filters too)",
	  S(log_level), 0, 0, false },
	CFG_ENTRY_END
};
#undef S

const struct cfg_entry *plugin_settings_table(void)
{
	return plugin_table;
}

ncclProfilerCallback_t plugin_prof_cb;

void plugin_prof_set(ncclProfilerCallback_t cb)
{
	if (cb)
		__atomic_store_n(&plugin_prof_cb, cb, __ATOMIC_RELEASE);
}

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static ncclDebugLogger_t plugin_logger;
static bool plugin_ready;
static int plugin_init_rc;

static void plugin_log_sink(enum sc_log_level level, const char *file, int line, const char *msg)
{
	ncclDebugLogger_t lf = __atomic_load_n(&plugin_logger, __ATOMIC_ACQUIRE);
	ncclDebugLogLevel nl = level <= SC_LOG_WARN ? NCCL_LOG_WARN
			       : level == SC_LOG_INFO ? NCCL_LOG_INFO
						      : NCCL_LOG_TRACE;

	if (lf)
		lf(nl, NCCL_NET | NCCL_INIT, file, line, "NET/" PLUGIN_NAME " : %s", msg);
	else if (level <= SC_LOG_WARN)
		fprintf(stderr, "NET/" PLUGIN_NAME " : %s\n", msg);
}

/* SUMCAST_JOB_LABEL, or where it is empty the scheduler's name for the job:
 * Slurm's SLURM_JOB_ID, else POD_NAME (a Kubernetes pod spec sets it from
 * the downward API, metadata.name; HOSTNAME is not the pod's name under
 * hostNetwork or a set hostname). A label set that does not pass
 * wire_label_check fails init; one taken from the scheduler that does not
 * is left out, said once. */
static int job_label_settle(void)
{
	static const char *const from[] = { "SLURM_JOB_ID", "POD_NAME" };
	char why[128];

	if (plugin_cfg.job_label[0]) {
		if (wire_label_check(plugin_cfg.job_label, why, sizeof(why))) {
			SC_WARN("bad setting: SUMCAST_JOB_LABEL: %s", why);
			return -EINVAL;
		}
		return 0;
	}
	for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
		const char *v = getenv(from[i]);
		if (!v || !*v)
			continue;
		if (wire_label_check(v, why, sizeof(why))) {
			SC_WARN("SUMCAST_JOB_LABEL from %s: %s; the job goes without a label", from[i], why);
			return 0;
		}
		snprintf(plugin_cfg.job_label, sizeof(plugin_cfg.job_label), "%s", v);
		SC_INFO("SUMCAST_JOB_LABEL=%s (from %s)", v, from[i]);
		return 0;
	}
	return 0;
}

static void plugin_settings_log(const enum cfg_source *src)
{
	size_t n = cfg_count(plugin_table);

	for (size_t i = 0; i < n; i++) {
		char name[128], val[CFG_STR_MAX + 32];
		cfg_env_name(&plugin_table[i], "SUMCAST_", name, sizeof(name));
		cfg_format(&plugin_table[i], &plugin_cfg, val, sizeof(val));
		SC_INFO("%s=%s (%s)", name, val, cfg_source_name(src[i]));
	}
}

int plugin_init(ncclDebugLogger_t logger)
{
	enum cfg_source src[64] = { 0 };
	struct cfg_error err;
	int rc;

	pthread_mutex_lock(&plugin_lock);
	if (logger)
		__atomic_store_n(&plugin_logger, logger, __ATOMIC_RELEASE);
	if (plugin_ready) {
		rc = plugin_init_rc;
		goto out;
	}
	plugin_ready = true;
	sc_log_set_ident("NET/" PLUGIN_NAME);
	sc_log_set_sink(plugin_log_sink);
	rc = cfg_set_defaults(plugin_table, &plugin_cfg, &err);
	if (!rc)
		rc = cfg_apply_env(plugin_table, &plugin_cfg, "SUMCAST_", true, src, &err);
	if (rc) {
		SC_WARN("bad setting: %s", err.msg);
		plugin_init_rc = rc;
		goto out;
	}
	enum sc_log_level lvl;
	if (sc_log_level_parse(plugin_cfg.log_level, &lvl) == 0)
		sc_log_set_level(lvl);
	else
		SC_WARN("SUMCAST_LOG_LEVEL=%s: not a level, using info", plugin_cfg.log_level);
	SC_INFO("sumcast %s, settings:", SUMCAST_VERSION);
	plugin_settings_log(src);
	rc = job_label_settle();
	if (rc) {
		plugin_init_rc = rc;
		goto out;
	}
	{
		/* Before the first endpoint (fabric_env.h): the rank opens one per
		 * aggregator of every communicator, and rxm's defaults held 67 MB
		 * and ~100 ms of set-up each, and its message CQ ~12 MB more. */
		struct fabric_env e = { .provider = plugin_cfg.provider,
					.rx_buffers = FABRIC_ENV_RX_BUFFERS,
					.rx_buffer_size = FABRIC_ENV_RX_BUFFER_SIZE,
					.universe = FABRIC_ENV_RANK_UNIVERSE };
		char line[384];
		fabric_env_defaults(&e, line, sizeof(line));
		char fv[64];
		SC_INFO("%s; rxm buffers and queues: %s", fabric_lib_version(fv, sizeof(fv)), line);
	}
	rc = sc_reduce_init();
	if (rc) {
		SC_WARN("reduce kernels: SUMCAST_ISA=%s is %s", getenv("SUMCAST_ISA"),
			rc == -ENOTSUP ? "not supported by this CPU" : "unknown");
		plugin_init_rc = rc;
		goto out;
	}
	SC_INFO("reduce kernels: %s", sc_isa_name(sc_reduce_isa()));
	plugin_init_rc = 0;
out:
	pthread_mutex_unlock(&plugin_lock);
	return rc;
}

int plugin_fabric_open(bool thread_safe, struct fabric **out)
{
	struct fabric_params p = {
		.provider = plugin_cfg.provider,
		.node = plugin_cfg.iface[0] ? plugin_cfg.iface : NULL,
		.cq_size = 4096,
		.thread_safe = thread_safe,
	};
	return fabric_open(&p, out);
}

ncclResult_t plugin_result(int rc)
{
	if (rc >= 0)
		return ncclSuccess;
	switch (-rc) {
	case EINVAL:
	case ENOTSUP:
		return ncclInvalidArgument;
	case ENOMEM:
		return ncclSystemError;
	case EPIPE:
	case ECONNRESET:
	case ECONNREFUSED:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	/* An aggregator's ABORT (rank_left, shutdown: -ECONNABORTED and
	 * -ESHUTDOWN from the client) and data it refused or sent wrong
	 * (-EPROTO) are the remote side's doing, as the README says. */
	case ECONNABORTED:
	case ESHUTDOWN:
	case EPROTO:
		return ncclRemoteError;
	default:
		return rc <= -FI_ERRNO_OFFSET ? ncclRemoteError : ncclInternalError;
	}
}

void plugin_props_v9(const struct plugin_props *p, int dev, int max_comms, int max_recvs,
		     ncclNetProperties_v9_t *out)
{
	memset(out, 0, sizeof(*out));
	out->name = (char *)p->name;
	out->pciPath = NULL;
	out->guid = (uint64_t)dev;
	out->ptrSupport = NCCL_PTR_HOST;
	out->speed = p->speed_mbps;
	out->latency = p->latency_us;
	out->maxComms = max_comms;
	out->maxRecvs = max_recvs;
	out->netDeviceType = NCCL_NET_DEVICE_HOST;
	out->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
	out->vProps.ndevs = 1;
	out->vProps.devs[0] = dev;
	out->maxP2pBytes = p->max_p2p_bytes;
	out->maxCollBytes = p->max_coll_bytes;
}

static void props_v9_to_v8(const ncclNetProperties_v9_t *in, ncclNetProperties_v8_t *out)
{
	memset(out, 0, sizeof(*out));
	out->name = in->name;
	out->pciPath = in->pciPath;
	out->guid = in->guid;
	out->ptrSupport = in->ptrSupport;
	out->regIsGlobal = in->regIsGlobal;
	out->speed = in->speed;
	out->port = in->port;
	out->latency = in->latency;
	out->maxComms = in->maxComms;
	out->maxRecvs = in->maxRecvs;
	out->netDeviceType = in->netDeviceType;
	out->netDeviceVersion = in->netDeviceVersion;
}

/* v11 and v12 are v9's fields, then maxMultiRequestSize (one request per
 * call: no multi-requests); v12 adds railId / planeId. Their vProps hold 4
 * and 8 devices, so the devices are copied one by one, never more than the
 * v9 layout has. */
#define PROPS_FROM_V9(out, in)                                                           \
	do {                                                                             \
		memset((out), 0, sizeof(*(out)));                                        \
		(out)->name = (in)->name;                                                \
		(out)->pciPath = (in)->pciPath;                                          \
		(out)->guid = (in)->guid;                                                \
		(out)->ptrSupport = (in)->ptrSupport;                                    \
		(out)->regIsGlobal = (in)->regIsGlobal;                                  \
		(out)->forceFlush = (in)->forceFlush;                                    \
		(out)->speed = (in)->speed;                                              \
		(out)->port = (in)->port;                                                \
		(out)->latency = (in)->latency;                                          \
		(out)->maxComms = (in)->maxComms;                                        \
		(out)->maxRecvs = (in)->maxRecvs;                                        \
		(out)->netDeviceType = (in)->netDeviceType;                              \
		(out)->netDeviceVersion = (in)->netDeviceVersion;                        \
		(out)->vProps.ndevs = (in)->vProps.ndevs;                                \
		for (int d_ = 0; d_ < (in)->vProps.ndevs && d_ < NCCL_NET_MAX_DEVS_PER_NIC; d_++) \
			(out)->vProps.devs[d_] = (in)->vProps.devs[d_];                  \
		(out)->maxP2pBytes = (in)->maxP2pBytes;                                  \
		(out)->maxCollBytes = (in)->maxCollBytes;                                \
		(out)->maxMultiRequestSize = 1;                                          \
	} while (0)

static void props_v9_to_v11(const ncclNetProperties_v9_t *in, ncclNetProperties_v11_t *out)
{
	PROPS_FROM_V9(out, in);
}

static void props_v9_to_v12(const ncclNetProperties_v9_t *in, ncclNetProperties_v12_t *out)
{
	PROPS_FROM_V9(out, in);
	/* The device is a libfabric endpoint on whatever interface the
	 * provider picked: which rail or plane of the fabric it sits on is
	 * not something the plugin knows. */
	out->railId = NCCL_NET_ID_UNDEF;
	out->planeId = NCCL_NET_ID_UNDEF;
}

/* The vtable's v9 getter into a zeroed struct (gcc -O3 cannot see that an
 * error means unfilled). */
static ncclResult_t props_v9_of(plugin_props_v9_fn v9, int dev, ncclNetProperties_v9_t *p)
{
	memset(p, 0, sizeof(*p));
	return v9(dev, p);
}

ncclResult_t plugin_props_as_v8(plugin_props_v9_fn v9, int dev, ncclNetProperties_v8_t *out)
{
	ncclNetProperties_v9_t p;
	ncclResult_t r = props_v9_of(v9, dev, &p);

	if (!r)
		props_v9_to_v8(&p, out);
	return r;
}

ncclResult_t plugin_props_as_v11(plugin_props_v9_fn v9, int dev, ncclNetProperties_v11_t *out)
{
	ncclNetProperties_v9_t p;
	ncclResult_t r = props_v9_of(v9, dev, &p);

	if (!r)
		props_v9_to_v11(&p, out);
	return r;
}

ncclResult_t plugin_props_as_v12(plugin_props_v9_fn v9, int dev, ncclNetProperties_v12_t *out)
{
	ncclNetProperties_v9_t p;
	ncclResult_t r = props_v9_of(v9, dev, &p);

	if (!r)
		props_v9_to_v12(&p, out);
	return r;
}

/* What the host and the provider can do with GPU memory, said once, at
 * the first properties (NCCL asks for them from the thread that holds its
 * CUDA context). The data path takes host pointers either way: it sums,
 * seals and keeps copies with the CPU (docs/plugin.md "GPU memory"). */
static void gpu_memory_say(const struct fabric *f)
{
	static bool said;
	char line[400];

	pthread_mutex_lock(&plugin_lock);
	if (!said) {
		said = true;
		fabric_hmem_cuda_probe(fabric_provider(f), line, sizeof(line));
		SC_INFO("GPU memory: %s; buffers: host pointers (NCCL_PTR_HOST)", line);
	}
	pthread_mutex_unlock(&plugin_lock);
}

int plugin_props_get(const struct fabric *f, int dev, struct plugin_props *out)
{
	double gbps = plugin_cfg.link_gbps;

	if (dev != 0 || !f)
		return -EINVAL;
	gpu_memory_say(f);
	if (gbps <= 0)
		gbps = fabric_link_gbps(f);
	if (gbps <= 0)
		gbps = 25; /* tcp/shm report nothing: a common Ethernet NIC */
	static char name[96];
	snprintf(name, sizeof(name), "sumcast-%s", fabric_provider(f));
	out->name = name;
	out->speed_mbps = (int)(gbps * 1000);
	/* NCCL's own IB/socket transports report 0 here; an honest figure
	 * for tcp;ofi_rxm on a LAN is ~10 us, for shm ~1 us. */
	out->latency_us = strstr(fabric_provider(f), "shm") ? 1.0f : 10.0f;
	out->max_recvs = (int)plugin_cfg.max_recvs;
	out->max_p2p_bytes = 1ull << 30;
	out->max_coll_bytes = 512ull << 20;
	return 0;
}

int plugin_dtype(ncclDataType_t t, enum sc_dtype *out)
{
	static const int map[] = {
		[ncclInt8] = SC_I8,       [ncclUint8] = SC_U8,     [ncclInt32] = SC_I32,
		[ncclUint32] = SC_U32,    [ncclInt64] = SC_I64,    [ncclUint64] = SC_U64,
		[ncclFloat16] = SC_F16,   [ncclFloat32] = SC_F32,  [ncclFloat64] = SC_F64,
		[ncclBfloat16] = SC_BF16,
	};

	if ((unsigned)t > ncclBfloat16)
		return -ENOTSUP; /* fp8: no kernels yet */
	*out = (enum sc_dtype)map[t];
	return 0;
}

int plugin_op(ncclRedOp_t op, enum sc_op *out)
{
	switch (op) {
	case ncclSum:
		*out = SC_OP_SUM;
		return 0;
	case ncclProd:
		*out = SC_OP_PROD;
		return 0;
	case ncclMax:
		*out = SC_OP_MAX;
		return 0;
	case ncclMin:
		*out = SC_OP_MIN;
		return 0;
	default:
		/* Avg reaches the network as Sum; PreMulSum and user ops are
		 * not ours to compute. */
		return -ENOTSUP;
	}
}
