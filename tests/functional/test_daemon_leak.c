/* The daemon's RSS is flat over hundreds of jobs of every shape.
 *
 * It once seemed to grow ~58 kB per job for good. What grew was rxm's
 * message completion queue, a ring of (rx-buffers + 128 x 256) entries of
 * ~380 bytes (12.5 MB) calloc'd at start, whose pages are touched for the
 * first time as completions go round it: RSS rose with every message
 * (~100 bytes each) until some 150,000 had gone through, ~15 MB in all,
 * then held. Here the daemon runs with FI_UNIVERSE_SIZE=16, which makes
 * the ring 16 times smaller, and a warm-up job runs WARM_ALLREDUCES
 * allreduces; then RSS is read after WARM_JOBS jobs of the mix and again
 * after the rest, and may not grow by more than SLACK_KIB in between
 * (58 kB a job would be ~17 MB here).
 *
 * The mix: chunks of 4 KiB (eager), 64 KiB and 256 KiB (rendezvous),
 * windows 2, 4 and 8, deterministic or not, full and short chunks; each
 * job 2 ranks with endpoints of their own, then gone. Unsealed jobs by hand
 * (f32 and bf16, tranks); then, on a daemon with a key, sealed jobs through
 * the client library (f32, bf16, f16, i32, f64, allreduces cut into eager
 * chunks or not). Multicast jobs need a network namespace and run in
 * test_allreduce's mcast_* configurations. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "fabric_env.h"
#include "test_daemon_harness.h"

#define WARM_ALLREDUCES 1500
#define WARM_JOBS 20
#define JOBS 320
#define SEALED_JOBS 100
#define SLACK_KIB 1024

static struct sd d;
static const uint8_t key[] = "0123456789abcdef-leak-test-key";

/* Job k's shape. */
static void shape(uint32_t k, struct client_params *p, size_t *count, enum sc_dtype *t)
{
	static const uint32_t chunks[] = { 4u << 10, 64u << 10, 256u << 10 };
	static const uint32_t windows[] = { 2, 4, 8 };
	static const enum sc_dtype types[] = { SC_F32, SC_BF16, SC_F16, SC_I32, SC_F64 };

	p->chunk_bytes = chunks[k % 3];
	p->window = windows[(k / 3) % 3];
	p->join_flags = (k / 9) % 2 ? WIRE_JOIN_F_DETERMINISTIC : 0;
	p->eager_bytes = (k / 18) % 2 ? client_eager_default(p->provider) : 0;
	*t = types[k % 5];
	/* two or three chunks of the job's size, and a tail */
	*count = (2 * (size_t)p->chunk_bytes + 100) / sc_dtype_size(*t);
}

static struct client_params mix_p; /* job k's shape, for the trank JOIN */

static void mix_tweak(struct wire_join *j)
{
	j->chunk_bytes = mix_p.chunk_bytes;
	j->window = mix_p.window;
	j->flags = mix_p.join_flags;
}

/* One job of shape k by hand (tranks: f32 and bf16 only). 0 or -1. */
static int job_by_hand(uint32_t k, uint64_t id)
{
	struct trank rk[2];
	size_t count;
	enum sc_dtype t;
	bool ok = true;

	mix_p = (struct client_params){ .provider = th_provider() };
	shape(k, &mix_p, &count, &t);
	t = k % 2 ? SC_BF16 : SC_F32;
	for (uint32_t r = 0; r < 2; r++)
		ok = trank_open(&rk[r], 2 * mix_p.window * mix_p.chunk_bytes) == 0 &&
		     trank_join(&rk[r], &d, id, r, 2, mix_tweak) == 0 && ok;
	for (uint32_t r = 0; ok && r < 2; r++)
		ok = trank_ready(&rk[r], 5000) == 0;
	struct trun p = { .t = t, .window = mix_p.window, .stride = mix_p.chunk_bytes,
			  .len = mix_p.chunk_bytes - 100 * (k % 2), .count = 3 * mix_p.window, .timeout_ms = 20000 };
	ok = ok && tranks_allreduce(rk, 2, &p) == 0;
	for (uint32_t r = 0; r < 2; r++) {
		struct wire_msg l = { .type = WIRE_LEAVE };
		l.u.leave.job_handle = rk[r].handle;
		if (rk[r].fd >= 0)
			ctl_send(rk[r].fd, &l);
		trank_close(&rk[r]);
	}
	return ok ? 0 : -1;
}

/* One job of shape k through the client library. 0 or -1. */
static int job_by_client(const struct client_params *base, uint32_t k, uint64_t id)
{
	struct client_params p = *base;
	struct tpair tp;
	size_t count;
	enum sc_dtype t;

	shape(k, &p, &count, &t);
	p.job_id = id;
	bool ok = tpair_up(&tp, &d, &p) == 0;
	for (int i = 0; ok && i < 3; i++)
		ok = tpair_allreduce(&tp, count, t) == 0;
	tpair_down(&tp);
	return ok ? 0 : -1;
}

/* Jobs [first, first + n) of the mix; returns how many failed. */
static int jobs_run(const struct client_params *base, uint64_t id0, uint32_t first, uint32_t n)
{
	int failed = 0;

	for (uint32_t k = first; k < first + n; k++) {
		int rc = base->key ? job_by_client(base, k, id0 + k) : job_by_hand(k, id0 + k);
		if (rc && failed++ < 3)
			fprintf(stderr, "job %u of the mix failed\n", k);
	}
	return failed;
}

/* WARM_ALLREDUCES allreduces of 8 chunks of 4 KiB: every ring of the
 * provider touched. */
static void warm_up(const struct client_params *base)
{
	struct client_params p = *base;
	struct tpair tp;
	long bad = 0;

	p.job_id = 0x3a3a;
	p.chunk_bytes = 4096;
	p.window = 8;
	bool ok = tpair_up(&tp, &d, &p) == 0;
	for (int i = 0; ok && i < WARM_ALLREDUCES && bad == 0; i++)
		bad = tpair_allreduce(&tp, 8 * 1024, SC_F32);
	CHECK(ok && bad == 0, "warm-up job: %ld", bad);
	tpair_down(&tp);
	sd_wait_idle(&d, "after the warm-up");
}

static void run(const char *what, const char *extra, const struct client_params *base, uint32_t jobs)
{
	/* the daemon's rings 16 times smaller (see above); not this process's */
	setenv("FI_UNIVERSE_SIZE", "16", 1);
	int rc = sd_start(&d, extra);
	unsetenv("FI_UNIVERSE_SIZE");
	if (rc) {
		CHECK(0, "%s: sumcastd did not start", what);
		return;
	}
	long r0 = sd_rss_settled(&d, 3000);
	warm_up(base);
	int failed = jobs_run(base, 0x100000, 0, WARM_JOBS);
	sd_wait_idle(&d, what);
	long r1 = sd_rss_settled(&d, 3000);
	uint64_t t0 = sc_now_ms();
	failed += jobs_run(base, 0x200000, WARM_JOBS, jobs - WARM_JOBS);
	sd_wait_idle(&d, what);
	long r2 = sd_rss_settled(&d, 3000);
	CHECK(failed == 0, "%s: %d of %u jobs failed", what, failed, jobs);
	CHECK(r2 - r1 <= SLACK_KIB, "%s: RSS grew %ld KiB over %u jobs (%ld -> %ld KiB)", what, r2 - r1,
	      jobs - WARM_JOBS, r1, r2);
	printf("  %s: RSS %ld KiB at start, %ld after the warm-up and %u jobs, %ld after %u more (%+ld KiB, "
	       "%.1f jobs/s)\n",
	       what, r0, r1, WARM_JOBS, r2, jobs - WARM_JOBS, r2 - r1,
	       (jobs - WARM_JOBS) * 1000.0 / (double)(sc_now_ms() - t0 + 1));
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "%s: exit status after SIGTERM", what);
	sd_cleanup(&d);
}

int main(void)
{
	struct client_params p = { .provider = th_provider() };
	char keyfile[64], extra[160];

	if (strcmp(p.provider, "shm"))
		p.node = "127.0.0.1";
	/* This process's endpoints as the plugin's: a new one each job. */
	struct fabric_env fe = { .provider = p.provider, .rx_buffers = FABRIC_ENV_RX_BUFFERS,
				 .rx_buffer_size = FABRIC_ENV_RX_BUFFER_SIZE };
	char line[256];
	fabric_env_defaults(&fe, line, sizeof(line));
	run("unsealed", NULL, &p, JOBS);

	snprintf(keyfile, sizeof(keyfile), "/tmp/sumcastd-leak-key.%d", (int)getpid());
	FILE *f = fopen(keyfile, "w");
	if (!f || fprintf(f, "%s\n", key) < 0 || fclose(f))
		th_skip("cannot write a key file");
	snprintf(extra, sizeof(extra), "[auth]\nkey-file = %s\n", keyfile);
	p.key = key;
	p.key_len = sizeof(key) - 1;
	run("sealed", extra, &p, WARM_JOBS + SEALED_JOBS);
	unlink(keyfile);
	return th_summary("test_daemon_leak");
}
