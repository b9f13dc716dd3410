/* sc_jobgen: a training job in miniature, for the operations tests and the
 * docs' evidence. Forks N ranks; each joins the given sumcastd aggregators
 * with the client library and loops f32 sum allreduces until --seconds have
 * passed. Ranks agree on when to stop through the allreduce itself: element
 * 0 carries "my clock is past the deadline", so every rank sees the same sum
 * and stops after the same call. Every result is checked (element i of rank
 * r is r + 1, so each sum is N(N+1)/2). --slow-rank R makes rank R sleep
 * before each call, so it is the straggler the daemon should name.
 *
 * Usage: sc_jobgen --aggs host:port[,host:port] [--provider P] [--ranks N]
 *        [--seconds S] [--count ELEMS] [--chunk BYTES] [--window W]
 *        [--slow-rank R --slow-us US] [--job-id ID]
 * Exit: 0 every rank finished with correct sums; 1 otherwise; 77 when the
 * fabric provider is not available here. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "client.h"
#include "clock.h"
#include "hostport.h"
#include "ranks.h"

#define MAX_RANKS SC_RANKS_MAX

static struct {
	const char *provider;
	const char *aggs[CLIENT_AGGS_MAX];
	size_t naggs;
	unsigned nranks;
	double seconds;
	size_t count;
	unsigned chunk, window;
	int slow_rank;
	unsigned slow_us;
	uint64_t job_id;
} g = { "tcp;ofi_rxm", { 0 }, 0, 2, 5, 1u << 20, 0, 0, -1, 0, 0x0b5 };

static int rank_main(int k, void *arg)
{
	unsigned rank = (unsigned)k;

	struct client_params p = {
		.provider = g.provider,
		.node = "127.0.0.1",
		.job_id = g.job_id,
		.rank = rank,
		.nranks = g.nranks,
		.chunk_bytes = g.chunk,
		.window = g.window,
		.timeout_ms = 20000,
		.naggs = g.naggs,
		.aggs = g.aggs,
	};
	struct fabric_mr smr = { 0 }, rmr = { 0 };
	struct client *c;

	(void)arg;
	uint64_t t0 = sc_now_ms(), deadline = t0 + (uint64_t)(g.seconds * 1000);
	float *sb = NULL, *rb = NULL;
	const float want = (float)g.nranks * (float)(g.nranks + 1) / 2;
	unsigned long ops = 0;
	int rc = client_create(&p, &c);

	if (rc) {
		fprintf(stderr, "rank %u: client_create: %s\n", rank, strerror(-rc));
		return 1;
	}
	while ((rc = client_connect_poll(c)) == -EAGAIN && sc_now_ms() - t0 < 30000)
		usleep(100);
	if (rc) {
		fprintf(stderr, "rank %u: connect: %s\n", rank, client_error(c));
		goto out;
	}
	sb = malloc(g.count * sizeof(float));
	rb = malloc(g.count * sizeof(float));
	if (!sb || !rb || client_mr_reg(c, sb, g.count * sizeof(float), &smr) ||
	    client_mr_reg(c, rb, g.count * sizeof(float), &rmr)) {
		fprintf(stderr, "rank %u: buffers failed\n", rank);
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < g.count; i++)
		sb[i] = (float)(rank + 1);
	for (;;) {
		struct client_req *r;
		int done = 0;
		if ((int)rank == g.slow_rank && g.slow_us)
			usleep(g.slow_us);
		sb[0] = sc_now_ms() >= deadline ? 1.0f : 0.0f;
		while ((rc = client_allreduce(c, sb, rb, g.count, SC_F32, SC_OP_SUM, smr.desc, rmr.desc,
					      &r)) == -EAGAIN)
			client_progress(c);
		if (rc) {
			fprintf(stderr, "rank %u: allreduce: %s (%s)\n", rank, strerror(-rc), client_error(c));
			goto out;
		}
		while (!done && !(rc = client_test(c, r, &done)))
			;
		if (rc) {
			fprintf(stderr, "rank %u: allreduce %lu failed: %s (%s)\n", rank, ops,
				strerror(-rc), client_error(c));
			goto out;
		}
		ops++;
		if (rb[1 % g.count] != want || rb[g.count - 1] != want) {
			fprintf(stderr, "rank %u: allreduce %lu: sum %g, want %g\n", rank, ops,
				(double)rb[g.count - 1], (double)want);
			rc = -EBADMSG;
			goto out;
		}
		if (rb[0] > 0)
			break;
		if (sc_now_ms() - t0 > (uint64_t)(g.seconds * 1000) + 60000) {
			fprintf(stderr, "rank %u: ranks never agreed to stop\n", rank);
			rc = -ETIME;
			goto out;
		}
	}
	if (rank == 0)
		printf("sc_jobgen: %u ranks, %lu allreduces of %zu f32 in %.1f s\n", g.nranks, ops,
		       g.count, (double)(sc_now_ms() - t0) / 1000);
out:
	fabric_mr_dereg(&smr);
	fabric_mr_dereg(&rmr);
	client_destroy(c);
	free(sb);
	free(rb);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "aggs", required_argument, NULL, 'a' },   { "provider", required_argument, NULL, 'P' },
		{ "ranks", required_argument, NULL, 'n' },  { "seconds", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'c' },  { "chunk", required_argument, NULL, 'C' },
		{ "window", required_argument, NULL, 'w' }, { "slow-rank", required_argument, NULL, 'r' },
		{ "slow-us", required_argument, NULL, 'u' }, { "job-id", required_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	static struct hostport agg_list[CLIENT_AGGS_MAX];
	struct sc_ranks ranks;
	char why[300];
	const char *aggs = NULL;
	int opt, skip = 0;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'a':
			aggs = optarg;
			break;
		case 'P':
			g.provider = optarg;
			break;
		case 'n':
			g.nranks = (unsigned)atoi(optarg);
			break;
		case 's':
			g.seconds = atof(optarg);
			break;
		case 'c':
			g.count = strtoull(optarg, NULL, 0);
			break;
		case 'C':
			g.chunk = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'w':
			g.window = (unsigned)atoi(optarg);
			break;
		case 'r':
			g.slow_rank = atoi(optarg);
			break;
		case 'u':
			g.slow_us = (unsigned)atoi(optarg);
			break;
		case 'j':
			g.job_id = strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: see the comment at the top of sc_jobgen.c\n");
			return 2;
		}
	}
	if (hostport_list_parse(aggs, agg_list, CLIENT_AGGS_MAX, &g.naggs, why, sizeof(why))) {
		fprintf(stderr, "sc_jobgen: --aggs: %s\n", why);
		return 2;
	}
	for (size_t i = 0; i < g.naggs; i++)
		g.aggs[i] = agg_list[i].text;
	if (!g.naggs || g.nranks < 1 || g.nranks > MAX_RANKS || g.count < 2 || g.seconds < 0) {
		fprintf(stderr, "sc_jobgen: need --aggs, 1..%d ranks, --count >= 2\n", MAX_RANKS);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rc = sc_ranks_start(&ranks, (int)g.nranks, rank_main, NULL, false);
	if (rc) {
		fprintf(stderr, "fork: %s\n", strerror(-rc));
		return 1;
	}
	sc_ranks_wait(&ranks, 0, false, NULL, NULL, NULL); /* each rank bounds its own time */
	for (unsigned r = 0; r < g.nranks; r++) {
		int st = ranks.status[r];
		CHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 77),
		      "rank %u ended with status 0x%x", r, st);
		skip += WIFEXITED(st) && WEXITSTATUS(st) == 77;
	}
	if (th_failed)
		fprintf(stderr, "sc_jobgen: %d of %u ranks failed\n", th_failed, g.nranks);
	return th_failed ? 1 : skip ? 77 : 0;
}
