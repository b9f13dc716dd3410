/* HTTP: /healthz, /metrics (Prometheus text), /stats and /config (JSON). Counters are
 * summed from the per-thread sets at scrape time. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <sys/resource.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ctl_api.h"
#include "daemon.h"
#include "hostport.h"
#include "http.h"
#include "job.h"
#include "log.h"
#include "proc_self.h"
#include "reduce.h"

/* A route answers the methods in `allowed` (EVHTTP_REQ_*); anything else
 * is answered 405 with an Allow header. True when the method is allowed. */
static bool method_ok(struct evhttp_request *req, int allowed, const char *allow)
{
	if (evhttp_request_get_command(req) & allowed)
		return true;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
	evhttp_send_error(req, 405, "Method Not Allowed");
	return false;
}

#define GET_ONLY(req)                                                            \
	do {                                                                     \
		if (!method_ok(req, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD, "GET, HEAD")) \
			return;                                                  \
	} while (0)

static void healthz_cb(struct evhttp_request *req, void *arg)
{
	GET_ONLY(req);
	struct daemon *d = arg;
	struct evbuffer *b = evbuffer_new();
	int ok = d->ready && !d->draining;

	evbuffer_add_printf(b, ok ? "ok\n" : d->draining ? "draining\n" : "starting\n");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
	evhttp_send_reply(req, ok ? 200 : 503, ok ? "OK" : "Service Unavailable", b);
	evbuffer_free(b);
}

static void stats_sum(const struct daemon *d, struct stats *s)
{
	memset(s, 0, sizeof(*s));
	stats_accumulate(s, &d->stats);
	for (unsigned i = 0; i < d->nthreads; i++)
		stats_accumulate(s, &d->threads[i].stats);
}

static void hist_print(struct evbuffer *b, const char *name, const char *help,
		       const struct hist *h, const double *le)
{
	uint64_t cum = 0;

	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (int i = 0; i < HIST_BUCKETS; i++) {
		cum += ctr_get(&h->bucket[i]);
		if (isinf(le[i]))
			evbuffer_add_printf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, cum);
		else
			evbuffer_add_printf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, le[i], cum);
	}
	evbuffer_add_printf(b, "%s_sum %.9f\n%s_count %" PRIu64 "\n", name,
			    (double)ctr_get(&h->sum_ns) * 1e-9, name, ctr_get(&h->count));
}

/* The reasons sumcast_joins_refused_total and sumcast_jobs_aborted_total
 * always show (at 0 until one happens): the codes the daemon refuses and
 * aborts with (conn_refuse, job_abort), the normal stop's apart. */
static bool refused_reason(unsigned code)
{
	return code != WIRE_E_TIMEOUT && code != WIRE_E_RANK_LEFT && code != WIRE_E_SHUTDOWN &&
	       code != WIRE_E_DATA && code != WIRE_E_INTERNAL;
}

static bool aborted_reason(unsigned code)
{
	return code == WIRE_E_TIMEOUT || code == WIRE_E_RANK_LEFT || code == WIRE_E_DATA ||
	       code == WIRE_E_INTERNAL;
}

#define METRIC(b, name, type, help, fmt, ...)                                             \
	evbuffer_add_printf(b, "# HELP " name " " help "\n# TYPE " name " " type "\n" name \
			    " " fmt "\n", __VA_ARGS__)

static void metrics_cb(struct evhttp_request *req, void *arg)
{
	GET_ONLY(req);
	struct daemon *d = arg;
	struct evbuffer *b = evbuffer_new();
	struct stats s;
	uint32_t jobs = 0, ending = 0, groups = 0;

	stats_sum(d, &s);
	for (const struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link)) {
		jobs += j->state != JOB_ENDING;
		ending += j->state == JOB_ENDING;
		groups += j->state != JOB_ENDING && j->mc;
	}
	evbuffer_add_printf(b,
			    "# HELP sumcast_build_info Build of this daemon.\n# TYPE sumcast_build_info gauge\n"
			    "sumcast_build_info{version=\"%s\",provider=\"%s\",isa=\"%s\"} 1\n",
			    SUMCAST_VERSION, d->provider, sc_isa_name(sc_reduce_isa()));
	METRIC(b, "sumcast_start_time_seconds", "gauge", "Start time of the daemon since the Unix epoch.",
	       "%.3f", d->start_unix);
	struct rusage ru;
	if (!getrusage(RUSAGE_SELF, &ru))
		METRIC(b, "process_cpu_seconds_total", "counter",
		       "CPU time of the daemon, all threads (user + system).", "%.6f",
		       (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
			       ru.ru_stime.tv_usec * 1e-6);
	struct proc_self ps;
	if (!proc_self_read(&ps)) {
		METRIC(b, "process_resident_memory_bytes", "gauge", "Resident memory of the daemon.",
		       "%" PRIu64, ps.resident_bytes);
		METRIC(b, "process_virtual_memory_bytes", "gauge", "Virtual memory of the daemon.",
		       "%" PRIu64, ps.virtual_bytes);
		METRIC(b, "process_open_fds", "gauge", "Open file descriptors of the daemon.", "%" PRIu64,
		       ps.open_fds);
		METRIC(b, "process_max_fds", "gauge", "The daemon's limit of open file descriptors (RLIMIT_NOFILE).",
		       "%.0f", ps.max_fds == UINT64_MAX ? INFINITY : (double)ps.max_fds);
		METRIC(b, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch.",
		       "%.2f", ps.start_time_seconds);
	}
	METRIC(b, "sumcast_received_bytes_total", "counter", "Bytes of DATA received from ranks.",
	       "%" PRIu64, ctr_get(&s.rx_bytes));
	METRIC(b, "sumcast_sent_bytes_total", "counter", "Bytes of RESULT sent to ranks.", "%" PRIu64,
	       ctr_get(&s.tx_bytes));
	METRIC(b, "sumcast_chunks_reduced_total", "counter", "Chunks reduced over all ranks.",
	       "%" PRIu64, ctr_get(&s.chunks));
	METRIC(b, "sumcast_result_sends_held_total", "counter",
	       "Result sends held until the rank's previous result send completed ([data] result-one-per-rank).",
	       "%" PRIu64, ctr_get(&s.result_holds));
	METRIC(b, "sumcast_result_sends_spread_total", "counter",
	       "Result messages a data thread sent for a slot of another of the job's lanes ([data] result-spread).",
	       "%" PRIu64, ctr_get(&s.results_spread));
	METRIC(b, "sumcast_multicast_groups", "gauge", "Jobs whose results go to a multicast group.",
	       "%u", groups);
	METRIC(b, "sumcast_multicast_results_total", "counter", "Results sent once to a job's group.",
	       "%" PRIu64, ctr_get(&s.mc_results));
	METRIC(b, "sumcast_multicast_datagrams_total", "counter", "Datagrams sent to multicast groups.",
	       "%" PRIu64, ctr_get(&s.mc_datagrams));
	METRIC(b, "sumcast_multicast_sent_bytes_total", "counter",
	       "Bytes of RESULT sent to multicast groups (counted once per send).", "%" PRIu64,
	       ctr_get(&s.mc_tx_bytes));
	METRIC(b, "sumcast_multicast_nacks_total", "counter",
	       "NACKs from ranks that missed a multicast result or are not in the group.", "%" PRIu64,
	       ctr_get(&s.mc_nacks));
	METRIC(b, "sumcast_multicast_repairs_total", "counter",
	       "Results sent again by unicast to answer a NACK.", "%" PRIu64, ctr_get(&s.mc_repairs));
	METRIC(b, "sumcast_multicast_late_nacks_total", "counter",
	       "NACKs for results that had gone by unicast anyway (ignored).", "%" PRIu64,
	       ctr_get(&s.mc_nack_late));
	hist_print(b, "sumcast_reduce_duration_seconds", "CPU time spent reducing one chunk.",
		   &s.reduce, hist_reduce_le);
	hist_print(b, "sumcast_straggler_wait_seconds",
		   "Time from the first to the last contribution of a chunk.", &s.straggler,
		   hist_straggler_le);
	METRIC(b, "sumcast_jobs", "gauge", "Jobs being served.", "%u", jobs);
	METRIC(b, "sumcast_draining", "gauge",
	       "1 while the daemon drains (SIGTERM, POST /drain): joins refused, jobs asked to move off.",
	       "%d", d->draining ? 1 : 0);
	METRIC(b, "sumcast_drain_start_time_seconds", "gauge",
	       "When the drain began since the Unix epoch; 0 when not draining.", "%.3f",
	       d->draining ? d->drain_began_unix : 0.0);
	METRIC(b, "sumcast_drain_timeout_seconds", "gauge",
	       "[control] drain-timeout: how long a drain waits for jobs to move off.", "%.3f",
	       (double)d->cfg.drain_timeout_ms / 1000.0);
	METRIC(b, "sumcast_jobs_drained_total", "counter",
	       "Jobs whose ranks all moved off during a drain (no abort).", "%" PRIu64,
	       ctr_get(&s.jobs_drained));
	METRIC(b, "sumcast_jobs_rejoined_total", "counter",
	       "Jobs of a running communicator whose ranks joined again (after a fault or a drain): re-admissions.",
	       "%" PRIu64, ctr_get(&s.jobs_rejoined));
	METRIC(b, "sumcast_joins_total", "counter", "Ranks admitted: JOINs answered JOIN_OK.", "%" PRIu64,
	       ctr_get(&s.joins));
	METRIC(b, "sumcast_jobs_started_total", "counter", "Jobs all of whose ranks joined (READY).",
	       "%" PRIu64, ctr_get(&s.jobs_started));
	METRIC(b, "sumcast_jobs_finished_total", "counter",
	       "Jobs whose ranks all left cleanly, unasked (drained jobs are not counted here).", "%" PRIu64,
	       ctr_get(&s.jobs_finished));
	evbuffer_add_printf(b, "# HELP sumcast_joins_refused_total REFUSE answers by reason (joins refused; the normal stop's are sumcast_shutdown_joins_refused_total).\n"
			       "# TYPE sumcast_joins_refused_total counter\n");
	for (unsigned k = 1; k <= WIRE_CODE_MAX; k++)
		if (refused_reason(k))
			evbuffer_add_printf(b, "sumcast_joins_refused_total{reason=\"%s\"} %" PRIu64 "\n",
					    wire_code_name((enum wire_code)k), ctr_get(&s.refused[k]));
	evbuffer_add_printf(b, "# HELP sumcast_jobs_aborted_total Jobs aborted by reason (the normal stop's are sumcast_shutdown_jobs_aborted_total).\n"
			       "# TYPE sumcast_jobs_aborted_total counter\n");
	for (unsigned k = 1; k <= WIRE_CODE_MAX; k++)
		if (k != WIRE_E_SHUTDOWN && (aborted_reason(k) || ctr_get(&s.aborted[k])))
			evbuffer_add_printf(b, "sumcast_jobs_aborted_total{reason=\"%s\"} %" PRIu64 "\n",
					    wire_code_name((enum wire_code)k), ctr_get(&s.aborted[k]));
	METRIC(b, "sumcast_shutdown_joins_refused_total", "counter",
	       "JOINs refused because the daemon was draining (a normal stop).", "%" PRIu64,
	       ctr_get(&s.refused[WIRE_E_SHUTDOWN]));
	METRIC(b, "sumcast_shutdown_jobs_aborted_total", "counter",
	       "Jobs aborted by a stop: ranks that cannot move off (protocol below 5), jobs left at drain-timeout.",
	       "%" PRIu64, ctr_get(&s.aborted[WIRE_E_SHUTDOWN]));
	METRIC(b, "sumcast_jobs_ending", "gauge",
	       "Jobs that ended but still hold memory (operations outstanding).", "%u", ending);
	METRIC(b, "sumcast_ranks", "gauge", "Ranks joined, over all jobs.", "%u", control_ranks(d));
	evbuffer_add_printf(b, "# HELP sumcast_errors_total Errors by kind (refusals, jobs a data thread failed, dropped messages); the normal stop is not one.\n"
			       "# TYPE sumcast_errors_total counter\n");
	for (unsigned k = 1; k < ERR_KIND_COUNT; k++)
		if (k != WIRE_E_SHUTDOWN)
			evbuffer_add_printf(b, "sumcast_errors_total{kind=\"%s\"} %" PRIu64 "\n", err_kind_name(k),
				    ctr_get(&s.errors[k]));
	evbuffer_add_printf(b, "# HELP sumcast_fabric_eagain_total Operations the fabric provider refused with -FI_EAGAIN (queue full); each is retried.\n"
			       "# TYPE sumcast_fabric_eagain_total counter\n"
			       "sumcast_fabric_eagain_total{op=\"send\"} %" PRIu64 "\n"
			       "sumcast_fabric_eagain_total{op=\"recv\"} %" PRIu64 "\n",
			    ctr_get(&s.eagain[EAGAIN_SEND]), ctr_get(&s.eagain[EAGAIN_RECV]));
	METRIC(b, "sumcast_memory_used_bytes", "gauge", "Job memory in use (buffers and accumulators).",
	       "%" PRIu64, d->mem_used);
	METRIC(b, "sumcast_memory_budget_bytes", "gauge", "Configured job memory budget.", "%" PRIu64,
	       (uint64_t)d->cfg.memory_budget);
	METRIC(b, "sumcast_data_threads", "gauge", "Data-plane threads.", "%u", d->nthreads);
	METRIC(b, "sumcast_connections", "gauge", "Open control connections.", "%u", d->nconns);
	METRIC(b, "sumcast_http_connections", "gauge", "Open HTTP connections (this one included).",
	       "%u", d->http_conns);
	evbuffer_add_printf(b, "# HELP sumcast_data_thread_busy_seconds_total Time data threads spent handling completions.\n"
			       "# TYPE sumcast_data_thread_busy_seconds_total counter\n");
	for (unsigned i = 0; i < d->nthreads; i++)
		evbuffer_add_printf(b, "sumcast_data_thread_busy_seconds_total{thread=\"%u\"} %.6f\n", i,
				    (double)ctr_get(&d->threads[i].busy_ns) * 1e-9);
	evbuffer_add_printf(b, "# HELP sumcast_posted_receives Receives the jobs of each data thread keep posted (window x nranks per job, twice that with multicast).\n"
			       "# TYPE sumcast_posted_receives gauge\n");
	for (unsigned i = 0; i < d->nthreads; i++)
		evbuffer_add_printf(b, "sumcast_posted_receives{thread=\"%u\"} %" PRIu64 "\n", i,
				    d->threads[i].rx_reserved);
	evbuffer_add_printf(b, "# HELP sumcast_receive_queue Receives each data thread's jobs may post: the provider's receive queue less the sweep's.\n"
			       "# TYPE sumcast_receive_queue gauge\n");
	for (unsigned i = 0; i < d->nthreads; i++)
		evbuffer_add_printf(b, "sumcast_receive_queue{thread=\"%u\"} %" PRIu64 "\n", i,
				    d->threads[i].rx_queue == UINT64_MAX ? 0 : d->threads[i].rx_queue);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static const char *job_state_name(int s)
{
	return s == JOB_JOINING ? "joining" : s == JOB_READY ? "ready" : "ending";
}

static const char *rank_state_name(int s)
{
	static const char *const n[] = { "none", "joining", "joined", "left", "gone" };
	return s >= 0 && s <= RANK_GONE ? n[s] : "?";
}

/* A job label as a JSON string's contents: printable ASCII (the wire
 * decoder's rule), so only '"' and '\\' need escaping. */
static const char *label_json(const char *label, char *out, size_t len)
{
	size_t k = 0;

	for (const char *p = label; *p && k + 3 < len; p++) {
		if (*p == '"' || *p == '\\')
			out[k++] = '\\';
		out[k++] = *p;
	}
	out[k] = '\0';
	return out;
}

static void stats_cb(struct evhttp_request *req, void *arg)
{
	GET_ONLY(req);
	struct daemon *d = arg;
	struct evbuffer *b = evbuffer_new();
	struct stats s;

	stats_sum(d, &s);
	evbuffer_add_printf(b,
			    "{\"version\":\"%s\",\"provider\":\"%s\",\"isa\":\"%s\",\"threads\":%u,"
			    "\"control_port\":%u,\"http_port\":%u,"
			    "\"uptime_seconds\":%.3f,\"draining\":%s,\"drain_seconds\":%.3f,"
			    "\"drain_timeout_ms\":%lld,\"memory_used\":%" PRIu64
			    ",\"memory_budget\":%" PRIu64 ",\"timeout_ms\":%lld,\"received_bytes\":%" PRIu64
			    ",\"sent_bytes\":%" PRIu64 ",\"chunks\":%" PRIu64 ",\"jobs_drained\":%" PRIu64
			    ",\"jobs_rejoined\":%" PRIu64 ",\"jobs\":[",
			    SUMCAST_VERSION, d->provider, sc_isa_name(sc_reduce_isa()), d->nthreads,
			    d->control_port, d->http_port, (double)(sc_now_ms() - d->start_ms) / 1000.0, d->draining ? "true" : "false",
			    d->draining ? (double)(sc_now_ms() - d->drain_start_ms) / 1000.0 : 0.0,
			    (long long)d->cfg.drain_timeout_ms,
			    d->mem_used, (uint64_t)d->cfg.memory_budget, (long long)d->cfg.timeout_ms,
			    ctr_get(&s.rx_bytes), ctr_get(&s.tx_bytes), ctr_get(&s.chunks),
			    ctr_get(&s.jobs_drained), ctr_get(&s.jobs_rejoined));
	bool first = true;
	for (const struct job *j = SLIST_FIRST(&d->jobs); j; j = SLIST_NEXT(j, link)) {
		char lab[2 * WIRE_LABEL_MAX + 1];
		size_t mem = 0, region = 0;
		uint64_t recvs = 0;
		JOB_FOR_LANES((struct job *)j, l) { /* a job over several threads: its lanes (job.h) */
			mem += l->mem_bytes;
			region += l->region_bytes;
			recvs += job_lane_recvs(l);
		}
		evbuffer_add_printf(b,
				    "%s{\"id\":\"0x%" PRIx64 "\",\"label\":\"%s\",\"handle\":%u,\"nranks\":%u,\"joined\":%u,"
				    "\"window\":%u,\"weight\":%u,\"chunk\":%u,\"types\":\"0x%x\",\"timeout_ms\":%u,"
				    "\"memory\":%zu,\"buffer_bytes\":%zu,\"bookkeeping_bytes\":%zu,\"thread\":%u,\"lanes\":%u,\"state\":\"%s\",\"draining\":%s,\"rejoined\":%s,\"bytes_in\":%" PRIu64
				    ",\"bytes_out\":%" PRIu64 ",\"chunks\":%" PRIu64 ",\"ops_outstanding\":%u,"
				    "\"rate_mbps\":%.1f,\"pace_mbps\":%.1f,\"posted_receives\":%" PRIu64 ",\"ranks\":[",
				    first ? "" : ",", j->id, label_json(j->label, lab, sizeof(lab)),
				    j->handle, j->nranks, j->acked, j->window,
				    j->weight, j->chunk, j->dtype_mask, j->timeout_ms, mem, region,
				    mem - region, j->thread->index, j->lanes,
				    job_state_name(j->state), j->draining ? "true" : "false",
				    j->flags & WIRE_JOIN_F_REJOIN ? "true" : "false",
				    job_sum_bytes_in(j), job_sum_bytes_out(j), job_sum_chunks(j),
				    job_sum_ops_seen(j),
				    j->pace_rate * 8 / 1e6, j->pace_cap * 8 / 1e6, recvs);
		first = false;
		for (uint32_t r = 0; r < j->nranks; r++) {
			uint64_t rb = 0, rc = 0, rw = 0;
			JOB_FOR_LANES((struct job *)j, l) {
				rb += ctr_get(&l->ranks[r].bytes_in);
				rc += ctr_get(&l->ranks[r].last_count);
				rw += ctr_get(&l->ranks[r].last_wait_ns);
			}
			evbuffer_add_printf(b,
					    "%s{\"rank\":%u,\"state\":\"%s\",\"bytes\":%" PRIu64
					    ",\"last_count\":%" PRIu64 ",\"last_wait_seconds_total\":%.6f}",
					    r ? "," : "", r, rank_state_name(j->ranks[r].state), rb, rc,
					    (double)rw * 1e-9);
		}
		evbuffer_add_printf(b, "]}");
	}
	evbuffer_add_printf(b, "]}\n");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* A JSON string literal (quotes included). */
static void json_str(struct evbuffer *b, const char *s)
{
	evbuffer_add(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			evbuffer_add_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			evbuffer_add_printf(b, "\\u%04x", c);
		else
			evbuffer_add(b, s, 1);
	}
	evbuffer_add(b, "\"", 1);
}

/* The running configuration, one entry per settings_table row. "source" is
 * where the running value came from (default, file, env; "cli" for a
 * --log-level); "pending" appears when the file/env read last holds another
 * value that needs a restart. */
static void config_cb(struct evhttp_request *req, void *arg)
{
	GET_ONLY(req);
	struct daemon *d = arg;
	struct evbuffer *b = evbuffer_new();
	char val[CFG_STR_MAX + 32], env[256];

	evbuffer_add_printf(b, "{\"config_file\":");
	if (d->config_path) {
		char abs[PATH_MAX];
		json_str(b, realpath(d->config_path, abs) ? abs : d->config_path);
	} else
		evbuffer_add_printf(b, "null");
	evbuffer_add_printf(b, ",\"settings\":[");
	for (const struct cfg_entry *e = settings_table; e->key; e++) {
		size_t i = (size_t)(e - settings_table);
		const char *src = cfg_source_name(d->cfg_src[i]);
		if (e->offset == offsetof(struct settings, log_level) && *d->cli_log_level)
			src = "cli";
		evbuffer_add_printf(b, "%s{\"section\":", i ? "," : "");
		json_str(b, e->section);
		evbuffer_add_printf(b, ",\"key\":");
		json_str(b, e->key);
		cfg_format(e, &d->cfg, val, sizeof(val));
		evbuffer_add_printf(b, ",\"value\":");
		json_str(b, val);
		evbuffer_add_printf(b, ",\"default\":");
		json_str(b, e->def);
		evbuffer_add_printf(b, ",\"source\":\"%s\",\"env\":", src);
		cfg_env_name(e, SETTINGS_ENV_PREFIX, env, sizeof(env));
		json_str(b, env);
		evbuffer_add_printf(b, ",\"reloadable\":%s,\"help\":", e->reloadable ? "true" : "false");
		json_str(b, e->help);
		/* the ports actually bound (port = 0 picks one) */
		if (e->offset == offsetof(struct settings, control_port))
			evbuffer_add_printf(b, ",\"bound\":\"%u\"", d->control_port);
		else if (e->offset == offsetof(struct settings, http_port))
			evbuffer_add_printf(b, ",\"bound\":\"%u\"", d->http_port);
		char pend[CFG_STR_MAX + 32];
		cfg_format(e, &d->loaded, pend, sizeof(pend));
		if (strcmp(val, pend)) {
			evbuffer_add_printf(b, ",\"pending\":");
			json_str(b, pend);
		}
		evbuffer_add_printf(b, "}");
	}
	evbuffer_add_printf(b, "]}\n");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* POST /drain: the drain SIGTERM starts (ctl_main.c), asked over HTTP, from
 * a loopback peer only (anyone who reaches a non-loopback HTTP listener
 * could otherwise stop the daemon). Answers what is draining now; a second
 * POST changes nothing. */
static void drain_http_cb(struct evhttp_request *req, void *arg)
{
	if (!method_ok(req, EVHTTP_REQ_POST, "POST"))
		return;
	struct daemon *d = arg;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	char *peer = NULL;
	ev_uint16_t port = 0;
	struct evbuffer *b = evbuffer_new();

	if (evcon)
		evhttp_connection_get_peer(evcon, &peer, &port);
	if (!peer || !hostport_is_loopback(peer)) {
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "HTTP: POST /drain from %s refused: only a loopback peer may drain",
				 peer ? peer : "?");
		evbuffer_add_printf(b, "POST /drain is accepted only from a loopback address "
				       "(127.0.0.0/8, ::1); run it on the daemon's host\n");
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
		evhttp_send_reply(req, 403, "Forbidden", b);
		evbuffer_free(b);
		return;
	}
	if (!d->draining)
		SC_INFO("HTTP: POST /drain from %s", peer);
	control_drain(d);
	uint32_t jobs = control_draining_jobs(d);
	evbuffer_add_printf(b, "{\"draining\":true,\"jobs\":%u}\n", jobs);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* ---- connections: the cap (http.max-connections) ----
 *
 * libevent 2.1 has no connection limit for evhttp and no callback when it
 * accepts one, but it asks us for each connection's bufferevent
 * (evhttp_set_bevcb) right when it accepts it, and lets us set a close
 * callback on the connection (evhttp_connection_set_closecb). The
 * connection does not exist yet when the bufferevent is made, so it is
 * looked up (the bufferevent's callback argument) from an event activated
 * there, which runs before any I/O of that connection can; a reference
 * keeps the bufferevent valid in between. At the cap the listener is
 * turned off: new connections wait in the kernel's queue until one closes. */

struct http_pending {
	struct bufferevent *bev;
	SLIST_ENTRY(http_pending) link;
};

static bool http_may_accept(void *arg)
{
	const struct daemon *d = arg;

	return d->http_conns < (uint64_t)d->cfg.http_max_connections;
}

static void http_listener_update(struct daemon *d)
{
	if (!d->http_listener)
		return;
	bool want = http_may_accept(d);
	if (!want && !d->http_capped) {
		d->http_capped = true;
		evconnlistener_disable(d->http_listener);
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "HTTP: %u connections open, http.max-connections is %lld: not accepting until one closes",
				 d->http_conns, (long long)d->cfg.http_max_connections);
	} else if (want && d->http_capped) {
		d->http_capped = false;
		if (!accept_backoff_paused(&d->http_backoff))
			evconnlistener_enable(d->http_listener);
	}
}

static void http_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct daemon *d = arg;

	(void)evcon;
	d->http_conns--;
	http_listener_update(d);
}

static struct bufferevent *http_bev_cb(struct event_base *base, void *arg)
{
	struct daemon *d = arg;
	struct http_pending *p = malloc(sizeof(*p));
	struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);

	accept_backoff_reset(&d->http_backoff);
	d->http_conns++;
	if (!p || !bev) {
		/* evhttp makes its own bufferevent; this one is not counted
		 * past now (its close is not seen). */
		free(p);
		if (bev)
			bufferevent_free(bev);
		d->http_conns--;
		return NULL;
	}
	bufferevent_incref(bev);
	p->bev = bev;
	SLIST_INSERT_HEAD(&d->http_pending, p, link);
	event_active(d->ev_http_pending, EV_TIMEOUT, 0);
	http_listener_update(d);
	return bev;
}

/* The connections accepted since the last run: the close callback on each
 * still open, or counted closed at once. */
static void http_pending_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct http_pending *p = SLIST_FIRST(&d->http_pending), *next;

	(void)fd;
	(void)what;
	SLIST_INIT(&d->http_pending);
	for (; p; p = next) {
		next = SLIST_NEXT(p, link);
		bufferevent_event_cb eventcb = NULL;
		void *cbarg = NULL;
		bufferevent_getcb(p->bev, NULL, NULL, &eventcb, &cbarg);
		if (eventcb && cbarg)
			evhttp_connection_set_closecb(cbarg, http_conn_closed, d);
		else
			http_conn_closed(NULL, d); /* evhttp already freed it */
		bufferevent_decref(p->bev);
		free(p);
	}
}

static void http_pending_free(struct daemon *d)
{
	while (!SLIST_EMPTY(&d->http_pending)) {
		struct http_pending *p = SLIST_FIRST(&d->http_pending);
		SLIST_REMOVE_HEAD(&d->http_pending, link);
		bufferevent_decref(p->bev);
		free(p);
	}
}

int http_start(struct daemon *d)
{
	struct evhttp_bound_socket *h;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int rc;

	if (!d->cfg.http_enabled)
		return 0;
	d->http = evhttp_new(d->base);
	d->ev_http_pending = event_new(d->base, -1, 0, http_pending_cb, d);
	if (!d->http || !d->ev_http_pending)
		return -ENOMEM;
	/* Others get 501 from evhttp; each route answers 405 to the methods
	 * it does not take (method_ok). */
	evhttp_set_allowed_methods(d->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST);
	evhttp_set_timeout(d->http, 10);
	/* Without them a request line or header of any length was buffered
	 * (and rescanned on every read: 300 MB lines froze the loop), and a
	 * body of any length read. */
	evhttp_set_max_headers_size(d->http, (ev_ssize_t)d->cfg.http_max_header_size);
	evhttp_set_max_body_size(d->http, (ev_ssize_t)d->cfg.http_max_body_size);
	evhttp_set_bevcb(d->http, http_bev_cb, d);
	evhttp_set_cb(d->http, "/healthz", healthz_cb, d);
	evhttp_set_cb(d->http, "/metrics", metrics_cb, d);
	evhttp_set_cb(d->http, "/stats", stats_cb, d);
	evhttp_set_cb(d->http, "/config", config_cb, d);
	evhttp_set_cb(d->http, "/drain", drain_http_cb, d);
	h = evhttp_bind_socket_with_handle(d->http, d->cfg.http_listen, (uint16_t)d->cfg.http_port);
	if (!h) {
		SC_ERR("HTTP listener on %s port %lld: %s", d->cfg.http_listen,
		       (long long)d->cfg.http_port, strerror(errno));
		return -EADDRINUSE;
	}
	d->http_listener = evhttp_bound_socket_get_listener(h);
	rc = accept_backoff_init(&d->http_backoff, d->base, d->http_listener, "HTTP",
				 &d->stats.errors[ERR_ACCEPT], http_may_accept, d);
	if (rc)
		return rc;
	getsockname(evhttp_bound_socket_get_fd(h), (struct sockaddr *)&ss, &len);
	d->http_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	SC_INFO("HTTP on %s port %u (/healthz /metrics /stats /config, POST /drain), at most %lld connections",
		d->cfg.http_listen, d->http_port, (long long)d->cfg.http_max_connections);
	return 0;
}

/* SIGHUP changed http.max-connections. */
void http_reloaded(struct daemon *d)
{
	http_listener_update(d);
}

void http_stop(struct daemon *d)
{
	accept_backoff_fini(&d->http_backoff);
	http_pending_free(d);
	/* evhttp_free frees the listener, then the connections (their close
	 * callbacks run): nothing may touch the listener then. */
	d->http_listener = NULL;
	if (d->http)
		evhttp_free(d->http);
	d->http = NULL;
	if (d->ev_http_pending)
		event_free(d->ev_http_pending);
	d->ev_http_pending = NULL;
}
