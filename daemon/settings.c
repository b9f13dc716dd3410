/* sumcastd's settings table and its checks (settings.h). */
#include "settings.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "fabric_env.h"
#include "hostport.h"
#include "log.h"

#define S(f) offsetof(struct settings, f)

const struct cfg_entry settings_table[] = {
	{ "control", "listen", CFG_STRING, "127.0.0.1",
	  "Address the control (job join) TCP listener binds to", S(control_listen), 0, 0, false },
	{ "control", "port", CFG_INT, "7800", "Control TCP port; 0 picks a free port (see port-file)",
	  S(control_port), 0, 65535, false },
	{ "control", "port-file", CFG_STRING, "",
	  "If set, \"control=<port> http=<port>\" is written here (atomically) once everything is up",
	  S(port_file), 0, 0, false },
	{ "control", "handshake-timeout", CFG_DURATION_MS, "10s",
	  "A connection that has not sent a valid JOIN within this time is closed",
	  S(handshake_timeout_ms), 100, 3600000, true },
	{ "control", "drain-timeout", CFG_DURATION_MS, "20s",
	  "On SIGTERM or POST /drain: how long jobs get to move off (older ranks: to finish chunks in flight) before what is left is aborted",
	  S(drain_timeout_ms), 0, 600000, true },
	{ "control", "max-connections", CFG_INT, "4096",
	  "Control connections open at once; more are closed at accept", S(max_connections), 1,
	  1000000, true },
	{ "http", "listen", CFG_STRING, "127.0.0.1",
	  "Address of the HTTP listener (/healthz, /metrics, /stats)", S(http_listen), 0, 0, false },
	{ "http", "port", CFG_INT, "7801", "HTTP port; 0 picks a free port (see port-file)",
	  S(http_port), 0, 65535, false },
	{ "http", "enabled", CFG_BOOL, "true", "Serve /healthz, /metrics and /stats", S(http_enabled),
	  0, 0, false },
	{ "http", "max-connections", CFG_INT, "64",
	  "HTTP connections open at once; at the limit new ones wait in the kernel's queue until one closes",
	  S(http_max_connections), 1, 100000, true },
	{ "http", "max-header-size", CFG_SIZE, "8K",
	  "Longest request line plus headers; a longer request is refused (400) and closed",
	  S(http_max_header_size), 256, 1048576, false },
	{ "http", "max-body-size", CFG_SIZE, "1K",
	  "Longest request body (requests are GET/HEAD and need none); a longer one is answered 413",
	  S(http_max_body_size), 0, 1048576, false },
	{ "fabric", "provider", CFG_STRING, FABRIC_PROV_DEFAULT,
	  "libfabric provider of the data endpoints (tcp;ofi_rxm, verbs;ofi_rxm, efa, shm, auto). shm under libfabric 1.x: a rank killed inside its progress can hang this daemon's sends to it (docs/client.md, \"libfabric versions\")",
	  S(provider), 0, 0, false },
	{ "fabric", "node", CFG_STRING, "127.0.0.1",
	  "Local address the data endpoints bind to (an interface's IP)", S(node), 0, 0, false },
	{ "fabric", "cq-size", CFG_INT, "4096", "Completion queue entries per data endpoint",
	  S(cq_size), 64, 1048576, false },
	{ "fabric", "rx-buffers", CFG_INT, FABRIC_ENV_STR(FABRIC_ENV_RX_BUFFERS),
	  "Receive buffers of an rxm data endpoint (tcp;ofi_rxm, verbs;ofi_rxm), shared by all its "
	  "connections (FI_OFI_RXM_USE_SRX=1, FI_OFI_RXM_MSG_RX_SIZE; values set in the environment win): "
	  "with the discard of unexpected messages they bound what any sender can make the daemon hold",
	  S(rx_buffers), 16, 65536, false },
	{ "fabric", "rx-buffer-size", CFG_SIZE, FABRIC_ENV_STR(FABRIC_ENV_RX_BUFFER_SIZE),
	  "Bytes of each of those buffers (FI_OFI_RXM_BUFFER_SIZE) where rxm keeps them apart from its "
	  "eager limit (libfabric before 1.20 over tcp), at most that limit (16K, FI_OFI_RXM_EAGER_LIMIT: "
	  "the same in every process, or rxm refuses the connection); elsewhere they are of the eager "
	  "limit's size. A larger message that matches no receive is held in memory of its own size "
	  "until it is discarded",
	  S(rx_buffer_size), 256, 16777216, false },
	{ "fabric", "source-check", CFG_BOOL, "true",
	  "Ask the provider who sent each message (FI_SOURCE) and drop DATA not from the rank's address; "
	  "providers without it, or false, rely on the seal alone (keyed jobs) to reject foreign data",
	  S(source_check), 0, 0, false },
	{ "fabric", "multicast", CFG_STRING, "off",
	  "Results by multicast to a group per job (docs/daemon.md): off; ip (UDP); ib (InfiniBand/RoCE "
	  "UD, librdmacm); auto (ib on an RDMA device, else ip, else off). Needs a restart",
	  S(multicast), 0, 0, false },
	{ "fabric", "multicast-groups", CFG_STRING, "239.194.0.0/16",
	  "IPv4 multicast prefix the jobs' groups are taken from (one group per job)",
	  S(multicast_groups), 0, 0, false },
	{ "fabric", "multicast-port", CFG_INT, "9931", "UDP port of every job's group",
	  S(multicast_port), 1, 65535, false },
	{ "fabric", "multicast-iface", CFG_STRING, "",
	  "Address of the interface results are multicast from; empty: fabric.node",
	  S(multicast_iface), 0, 0, false },
	{ "fabric", "multicast-mtu", CFG_INT, "1500",
	  "IP MTU of the multicast path: each datagram carries MTU - 68 bytes of result (ip; ib "
	  "takes the port's active MTU, less 40)",
	  S(multicast_mtu), 576, 65535, false },
	{ "data", "threads", CFG_INT, "1",
	  "Data-plane threads; each owns one fabric endpoint and the jobs assigned to it",
	  S(threads), 1, 256, false },
	{ "data", "job-threads", CFG_INT, "0",
	  "Data threads one job is spread over (its lanes: slot s on lane s % lanes, each lane's "
	  "endpoint named in JOIN_OK, protocol 7); 0: every data thread, at most 8. A multicast job, "
	  "or one whose first rank speaks protocol 6 or older, stays on one. A reload applies to jobs "
	  "created after it",
	  S(job_threads), 0, 256, true },
	{ "data", "cpus", CFG_STRING, "",
	  "CPUs to pin data threads to, e.g. \"2,3\" or \"4-7\" (thread i gets the i-th, round robin); empty: no pinning",
	  S(cpus), 0, 0, false },
	{ "data", "idle-spin", CFG_INT, "50",
	  "Microseconds an idle data thread keeps busy-polling before it blocks or sleeps",
	  S(idle_spin_us), 0, 1000000, false },
	{ "data", "idle-wait", CFG_BOOL, "true",
	  "Then block on the completion queue's wait object until the fabric or a command wakes it; "
	  "false, or a provider without one: sleep idle-sleep between polls",
	  S(idle_wait), 0, 0, false },
	{ "data", "idle-sleep", CFG_INT, "100",
	  "Microseconds an idle data thread sleeps between completion-queue polls (no idle-wait)",
	  S(idle_sleep_us), 1, 10000, false },
	{ "data", "result-one-per-rank", CFG_BOOL, "true",
	  "shm: at most one result send in flight to each rank, the next waits for the last one's "
	  "completion (an shm send spins on the receiving rank's lock while that rank copies the last "
	  "result in). Not while the data thread serves jobs of different windows (their windows set "
	  "their shares), nor on other providers; false sends each result to every rank as soon as "
	  "it is reduced (docs/daemon.md)",
	  S(result_one_per_rank), 0, 0, false },
	{ "data", "result-spread", CFG_SIZE, "4K",
	  "A job over several data threads (job-threads) whose ranks speak protocol 8: a result of at "
	  "most this many bytes goes to rank r from the thread of lane (slot + r) % lanes, so that the "
	  "threads share a small result's sends, each injected (at most the provider's inject size); "
	  "0: every result from its slot's thread. A reload applies to jobs created after it",
	  S(result_spread), 0, 65536, true },
	{ "data", "sweep", CFG_BOOL, "true",
	  "Discard tagged messages no receive matches (rxm providers: dp_sweep.c); false leaves them "
	  "to the provider, which holds each in memory until a receive matches it: anyone who reaches "
	  "the data port can then grow the daemon without limit. Only to measure what the sweep costs",
	  S(sweep), 0, 0, false },
	{ "job", "memory-budget", CFG_SIZE, "1G",
	  "Memory all jobs together may use: window x chunk x (nranks + 1, or + 2 with f16/bf16) each, plus ~180 bytes per rank per slot of bookkeeping",
	  S(memory_budget), 0, 0, true },
	{ "job", "max-jobs", CFG_INT, "64", "Jobs served at once", S(max_jobs), 1, 1048575, true },
	{ "job", "timeout", CFG_DURATION_MS, "30s",
	  "Longest silence of a rank while a chunk waits for it (a JOIN may ask for less)",
	  S(timeout_ms), 100, 86400000, true },
	{ "job", "join-timeout", CFG_DURATION_MS, "60s",
	  "A job whose ranks have not all joined within this time is aborted",
	  S(join_timeout_ms), 100, 86400000, true },
	{ "job", "stuck-grace", CFG_DURATION_MS, "30s",
	  "After a job ends, how long its result sends may stay outstanding before the daemon logs them and drops its own references to those ranks' addresses (the memory returns when the sends complete)",
	  S(stuck_grace_ms), 100, 86400000, true },
	{ "job", "tenant-idle", CFG_DURATION_MS, "60s",
	  "A job that moved no chunk for this long no longer counts in the jobs each PONG reports (the adaptive split's hint of other tenants); a job counts from its first chunk",
	  S(tenant_idle_ms), 100, 86400000, true },
	{ "job", "max-window", CFG_INT, "64", "Largest window (chunks in flight per job) granted, per unit of weight",
	  S(max_window), 1, 1048576, false },
	{ "job", "max-weight", CFG_INT, "1",
	  "Largest weight granted to a job (SUMCAST_WEIGHT on its nodes: its window, hence its share of this daemon against other jobs', times the weight); 1: every job the same",
	  S(max_weight), 1, 64, false },
	{ "job", "pace", CFG_BOOL, "true",
	  "While jobs of different weights move data at once, hold each job's result sends to its weighted share of the most this daemon carried (on a TCP link the kernel shares per connection, whatever the weights); jobs of one weight are never held",
	  S(pace), 0, 0, true },
	{ "job", "max-chunk", CFG_SIZE, "4M", "Largest chunk size granted (bytes, multiple of 8)",
	  S(max_chunk), 8, 67108864, false },
	{ "job", "max-inflight", CFG_SIZE, "64M",
	  "Bytes a job may have in flight on this daemon, window x chunk x nranks: a larger job gets a smaller window (not under 2), then a smaller chunk (halved down to min-chunk); what is left above it is charged to memory-budget as any job (docs/daemon.md, \"Admission\")",
	  S(max_inflight), 4096, 1099511627776.0, true },
	{ "job", "multicast-inflight", CFG_SIZE, "512K",
	  "Bytes of results a multicast job may have in flight from this daemon, window x chunk: its window comes down to it (not under 2), then its chunk, as with max-inflight. Datagrams have no congestion control, and a node's switch port takes the results of every aggregator of the job at once: up to this times the aggregators (docs/daemon.md, \"Multicast results\"); 0: no cap",
	  S(mc_inflight), 0, 1099511627776.0, true },
	{ "job", "min-chunk", CFG_SIZE, "16K",
	  "Smallest chunk max-inflight may cut a job's chunk to (bytes, multiple of 8); a job that asks for less keeps its own",
	  S(min_chunk), 8, 67108864, true },
	{ "job", "max-memory-share", CFG_DOUBLE, "0.5",
	  "Largest share of memory-budget one job may take (after the window and chunk are capped); a JOIN needing more is refused (memory)",
	  S(max_memory_share), 0.01, 1, true },
	{ "auth", "key-file", CFG_STRING, "",
	  "Shared key (16..256 bytes) for HMAC-signed JOINs; empty: no authentication",
	  S(key_file), 0, 0, true },
	{ "auth", "allow-anonymous", CFG_BOOL, "false",
	  "Serve jobs without a key while control.listen is not a loopback address (anyone who reaches the port can then join jobs and send data); without it such a daemon refuses to start",
	  S(allow_anonymous), 0, 0, true },
	{ "log", "level", CFG_STRING, "info", "error, warn, info, debug or trace", S(log_level), 0, 0,
	  true },
	CFG_ENTRY_END,
};

int settings_parse_cpus(const char *s, int *cpus, int max)
{
	int n = 0;
	const char *p = s;

	while (*p) {
		char *end;
		long a = strtol(p, &end, 10), b;
		if (end == p || a < 0 || a > 65535)
			return -EINVAL;
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			b = strtol(p, &end, 10);
			if (end == p || b < a || b > 65535)
				return -EINVAL;
			p = end;
		}
		for (long c = a; c <= b; c++) {
			if (n >= max)
				return -EINVAL;
			cpus[n++] = (int)c;
		}
		while (*p == ' ')
			p++;
		if (*p == ',')
			p++;
		else if (*p)
			return -EINVAL;
		while (*p == ' ')
			p++;
	}
	return n;
}

int settings_addr_kind(const char *s)
{
	/* IP literals only: the listeners bind what is written (no resolver) */
	if (!hostport_family(s))
		return SETTINGS_ADDR_INVALID;
	return hostport_is_loopback(s) ? SETTINGS_ADDR_LOOPBACK : SETTINGS_ADDR_OTHER;
}

int settings_parse_groups(const char *s, uint32_t *first, uint32_t *count)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	struct in_addr a;
	char *end;

	if (!slash || (size_t)(slash - s) >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, s, (size_t)(slash - s));
	ip[slash - s] = '\0';
	long n = strtol(slash + 1, &end, 10);
	if (*end || end == slash + 1 || n < 4 || n > 32 || inet_pton(AF_INET, ip, &a) != 1)
		return -EINVAL;
	uint32_t base = ntohl(a.s_addr), mask = n == 32 ? 0xFFFFFFFFu : ~(0xFFFFFFFFu >> n);
	if ((base >> 28) != 0xE || (base & ~mask))
		return -EINVAL;
	*first = base;
	*count = n == 32 ? 1 : (uint32_t)(~mask + 1u);
	return 0;
}

const char *settings_mc_iface(const struct settings *s)
{
	return *s->multicast_iface ? s->multicast_iface : s->node;
}

int settings_check(const struct settings *s, struct cfg_error *err)
{
	uint32_t g0, gn;
	struct in_addr ifa;
	enum sc_log_level lvl;
	int cpus[SETTINGS_CPUS_MAX];

	if (sc_log_level_parse(s->log_level, &lvl)) {
		snprintf(err->msg, sizeof(err->msg),
			 "log.level = \"%s\": expected error, warn, info, debug or trace", s->log_level);
		return -EINVAL;
	}
	if (settings_parse_cpus(s->cpus, cpus, SETTINGS_CPUS_MAX) < 0) {
		snprintf(err->msg, sizeof(err->msg),
			 "data.cpus = \"%s\": expected a list like \"0,2-3\"", s->cpus);
		return -EINVAL;
	}
	if (s->max_chunk % 8) {
		snprintf(err->msg, sizeof(err->msg), "job.max-chunk = %llu: must be a multiple of 8",
			 (unsigned long long)s->max_chunk);
		return -EINVAL;
	}
	if (s->min_chunk % 8) {
		snprintf(err->msg, sizeof(err->msg), "job.min-chunk = %llu: must be a multiple of 8",
			 (unsigned long long)s->min_chunk);
		return -EINVAL;
	}
	if (strcmp(s->multicast, "off") && strcmp(s->multicast, "ip") && strcmp(s->multicast, "auto") &&
	    strcmp(s->multicast, "ib")) {
		snprintf(err->msg, sizeof(err->msg),
			 "fabric.multicast = \"%s\": expected off, ip, auto or ib", s->multicast);
		return -EINVAL;
	}
	if (settings_parse_groups(s->multicast_groups, &g0, &gn)) {
		snprintf(err->msg, sizeof(err->msg),
			 "fabric.multicast-groups = \"%s\": expected an IPv4 multicast prefix such as "
			 "239.194.0.0/16 (inside 224.0.0.0/4, no host bits set)", s->multicast_groups);
		return -EINVAL;
	}
	if (strcmp(s->multicast, "off") && inet_pton(AF_INET, settings_mc_iface(s), &ifa) != 1) {
		snprintf(err->msg, sizeof(err->msg),
			 "fabric.multicast-iface = \"%s\" (empty: fabric.node): multicast needs an "
			 "interface's IPv4 address", settings_mc_iface(s));
		return -EINVAL;
	}
	if (!*s->control_listen || (s->http_enabled && !*s->http_listen)) {
		snprintf(err->msg, sizeof(err->msg), "control.listen and http.listen must be set");
		return -EINVAL;
	}
	/* The listeners bind IP addresses as written: a host name passed
	 * --check-config and then failed at start. */
	int ctl = settings_addr_kind(s->control_listen);
	if (ctl == SETTINGS_ADDR_INVALID ||
	    (s->http_enabled && settings_addr_kind(s->http_listen) == SETTINGS_ADDR_INVALID)) {
		snprintf(err->msg, sizeof(err->msg),
			 "%s.listen = \"%s\": not an IP address (host names are not resolved; e.g. 127.0.0.1, ::1, 0.0.0.0, or an interface's address)",
			 ctl == SETTINGS_ADDR_INVALID ? "control" : "http",
			 ctl == SETTINGS_ADDR_INVALID ? s->control_listen : s->http_listen);
		return -EINVAL;
	}
	if (ctl != SETTINGS_ADDR_LOOPBACK && !*s->key_file && !s->allow_anonymous) {
		snprintf(err->msg, sizeof(err->msg),
			 "control.listen = %s is not a loopback address and auth.key-file is empty: anyone who reaches the port could join jobs, take job memory and send data; set auth.key-file, or auth.allow-anonymous = true to serve without a key",
			 s->control_listen);
		return -EINVAL;
	}
	return 0;
}

int settings_load(struct settings *s, const char *path, enum cfg_source *src,
		  struct cfg_error *err)
{
	int rc;

	if (cfg_count(settings_table) > SETTINGS_MAX) {
		snprintf(err->msg, sizeof(err->msg), "settings table has %zu rows, SETTINGS_MAX is %d",
			 cfg_count(settings_table), SETTINGS_MAX);
		return -EINVAL;
	}
	rc = cfg_load(settings_table, s, path, SETTINGS_ENV_PREFIX, src, err);
	return rc ? rc : settings_check(s, err);
}

void settings_dump(const struct settings *s, FILE *out)
{
	fprintf(out, "# sumcastd configuration. Every setting, its default and its help.\n"
		     "# Generated by `sumcastd --dump-config`; each value can be overridden by\n"
		     "# the environment variable named below. Sizes take K/M/G/T (powers of\n"
		     "# 1024), durations ms/s/m.\n\n");
	cfg_dump(settings_table, s, SETTINGS_ENV_PREFIX, NULL, out);
}

void settings_strcpy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}
