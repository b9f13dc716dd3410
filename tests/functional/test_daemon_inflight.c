/* [job] max-inflight (common/grant.c, applied by daemon/ctl_admit.c) end to end: three
 * real daemons with different caps grant one job three different windows
 * and chunks, and the client library honours each aggregator's own grant.
 *
 * Four ranks (client instances driven from this process) ask for window 8
 * and chunk 64 KiB on three aggregators:
 *   agg 0, max-inflight 256K: 2 x 64K x 4 = 512K > 256K, so the chunk
 *          halves to 32K; window 256K / (32K x 4) = 2;
 *   agg 1, max-inflight 1M: window 1M / (64K x 4) = 4, chunk 64K;
 *   agg 2, the default 64M: what was asked, window 8, chunk 64K.
 * Checked: what each client says each aggregator granted, the daemons'
 * /stats (window, chunk, posted receives = window x 4) and log line, and
 * allreduces of many sizes (up to hundreds of chunks per aggregator, several
 * windows' worth) with every element exact. A client that cut its shard
 * with the chunk it asked for would overrun the daemon's 32K receives (a
 * truncation, the job aborted), and one that kept 8 chunks in flight where
 * 2 were granted would be refused as over credit: either fails the sums. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "test_daemon_harness.h"

#define NR 4
#define NA 3

static const struct {
	const char *conf;
	uint32_t window, chunk;
} aggs_want[NA] = {
	{ "[job]\nmax-inflight = 256K\nmin-chunk = 16K\n", 2, 32768 },
	{ "[job]\nmax-inflight = 1M\n", 4, 65536 },
	{ "", 8, 65536 },
};

static bool json_has(const char *body, const char *s)
{
	return strstr(body, s) != NULL;
}

int main(void)
{
	struct sd d[NA];
	char names[NA][64];
	const char *aggs[NA];
	struct client *c[NR] = { 0 };
	float *sb[NR], *rb[NR];
	struct fabric_mr smr[NR], rmr[NR];
	const size_t max = 400000;
	static char body[1 << 16];

	memset(d, 0, sizeof(d));
	memset(smr, 0, sizeof(smr));
	memset(rmr, 0, sizeof(rmr));
	for (int a = 0; a < NA; a++) {
		if (sd_start(&d[a], aggs_want[a].conf)) {
			for (int b = 0; b < a; b++)
				sd_cleanup(&d[b]);
			return 1;
		}
		snprintf(names[a], sizeof(names[a]), "127.0.0.1:%u", d[a].ctl);
		aggs[a] = names[a];
	}
	int rc[NR];
	/* each client polled from its creation on, as a rank's own thread
	 * would (a daemon closes a connection that sends no JOIN within its
	 * 10 s handshake timeout) */
	for (int r = 0; r < NR; r++) {
		struct client_params p = { .provider = th_provider(), .node = "127.0.0.1",
					   .job_id = 0x1f11, .rank = (uint32_t)r, .nranks = NR,
					   .chunk_bytes = 64 << 10, .window = 8, .timeout_ms = 20000,
					   .naggs = NA, .aggs = aggs };
		REQUIRE(client_create(&p, &c[r]) == 0, "client_create rank %d", r);
		rc[r] = -EAGAIN;
		for (int q = 0; q <= r; q++)
			if (rc[q] == -EAGAIN)
				rc[q] = client_connect_poll(c[q]);
	}
	for (uint64_t end = sc_now_ms() + 20000 * th_slow_factor(); sc_now_ms() < end;) {
		bool wait = false;
		for (int r = 0; r < NR; r++)
			if (rc[r] == -EAGAIN)
				rc[r] = client_connect_poll(c[r]), wait = true;
		if (!wait)
			break;
	}
	for (int r = 0; r < NR; r++)
		REQUIRE(rc[r] == 0, "rank %d joined: %s", r, client_error(c[r]));

	/* the grants, as each client sees them */
	for (int r = 0; r < NR; r++)
		for (int a = 0; a < NA; a++) {
			uint32_t h, w, ch;
			CHECK(client_agg_info(c[r], (size_t)a, &h, &w, &ch) == 0, "agg info");
			CHECK(w == aggs_want[a].window && ch == aggs_want[a].chunk,
			      "rank %d agg %d granted window %u chunk %u, want %u and %u", r, a, w, ch,
			      aggs_want[a].window, aggs_want[a].chunk);
		}
	/* and as the daemons report them */
	for (int a = 0; a < NA; a++) {
		char want[160];
		CHECK(sd_http(&d[a], "/stats", body, sizeof(body)) == 200, "/stats");
		snprintf(want, sizeof(want), "\"window\":%u,\"weight\":1,\"chunk\":%u,", aggs_want[a].window,
			 aggs_want[a].chunk);
		CHECK(json_has(body, want), "agg %d /stats has %s: %.400s", a, want, body);
		snprintf(want, sizeof(want), "\"posted_receives\":%u,", aggs_want[a].window * NR);
		CHECK(json_has(body, want), "agg %d /stats has %s", a, want);
		CHECK(sd_metric(&d[a], "sumcast_posted_receives{thread=\"0\"}") == aggs_want[a].window * NR,
		      "agg %d sumcast_posted_receives", a);
		CHECK(sd_metric(&d[a], "sumcast_receive_queue{thread=\"0\"}") > 0,
		      "agg %d sumcast_receive_queue", a);
		CHECK(sd_log_has(&d[a], "max-inflight: window 8 and chunk 65536 asked") == (a < 2),
		      "agg %d logs the cap %s", a, a < 2 ? "it applied" : "only when it applies");
	}

	for (int r = 0; r < NR; r++) {
		sb[r] = malloc(max * sizeof(float));
		rb[r] = malloc(max * sizeof(float));
		REQUIRE(sb[r] && rb[r], "malloc");
		REQUIRE(client_mr_reg(c[r], sb[r], max * sizeof(float), &smr[r]) == 0 &&
				client_mr_reg(c[r], rb[r], max * sizeof(float), &rmr[r]) == 0,
			"mr_reg");
		for (size_t i = 0; i < max; i++)
			sb[r][i] = (float)((r + 1) * (int)(1 + i % 1021));
	}
	/* 1 element; a few chunks; several windows on every aggregator (400000
	 * f32 = 1.6 MB: ~16 chunks of 32K on agg 0 against a window of 2) */
	static const size_t counts[] = { 1, 1000, 24577, 131071, 400000 };
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		size_t n = counts[k];
		struct client_req *q[NR] = { 0 };
		int done[NR] = { 0 }, left = NR;
		for (int r = 0; r < NR; r++) {
			memset(rb[r], 0xee, max * sizeof(float));
			int e;
			for (uint64_t end = sc_now_ms() + 5000;
			     (e = client_allreduce(c[r], sb[r], rb[r], n, SC_F32, SC_OP_SUM, smr[r].desc,
						   rmr[r].desc, &q[r])) == -EAGAIN && sc_now_ms() < end;)
				client_progress(c[r]);
			REQUIRE(e == 0, "rank %d allreduce of %zu: %s", r, n, client_error(c[r]));
		}
		for (uint64_t end = sc_now_ms() + 30000 * th_slow_factor(); left && sc_now_ms() < end;)
			for (int r = 0; r < NR; r++) {
				if (done[r])
					continue;
				int e = client_test(c[r], q[r], &done[r]);
				REQUIRE(e == 0, "rank %d allreduce of %zu failed: %s", r, n, client_error(c[r]));
				left -= done[r];
			}
		REQUIRE(left == 0, "%d ranks did not finish the allreduce of %zu", left, n);
		size_t bad = 0;
		for (int r = 0; r < NR; r++)
			for (size_t i = 0; i < n; i++)
				bad += rb[r][i] != (float)(10 * (int)(1 + i % 1021)); /* (1+2+3+4) x */
		CHECK(bad == 0, "allreduce of %zu f32: %zu elements wrong", n, bad);
		if (n < max) {
			uint32_t u;
			memcpy(&u, &rb[0][n], sizeof(u));
			CHECK(u == 0xeeeeeeeeu, "allreduce of %zu wrote past its end", n);
		}
	}
	for (int r = 0; r < NR; r++) {
		fabric_mr_dereg(&smr[r]);
		fabric_mr_dereg(&rmr[r]);
		client_destroy(c[r]);
		free(sb[r]);
		free(rb[r]);
	}
	for (int a = 0; a < NA; a++) {
		CHECK(sd_stop(&d[a], SIGTERM, 5000) == 0, "agg %d stops cleanly", a);
		sd_cleanup(&d[a]);
	}
	return th_summary("test_daemon_inflight");
}
