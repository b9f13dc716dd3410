/* Data-plane authenticity (seal.h): with a key configured, a process that is
 * not a joined rank cannot get data reduced into a job, even when it knows
 * the daemon's data address, the job handle and the rank's tags (the worst
 * case: on tcp;ofi_rxm a process on a rank's host can even pose as the
 * rank's address). Two real ranks (the client library, which seals because
 * the daemon says so in JOIN_OK) allreduce while an attacker's endpoint
 * sends forged chunks under their tags first; every forged chunk must be
 * dropped and counted (errors{kind="unsealed"}), the sums must stay exact,
 * the daemon healthy. The daemon runs with [fabric] source-check = false,
 * so the seal alone has to stop them (an attacker on its own address is
 * also caught by the source check where the provider has one). tcp and shm
 * (ctest functional/test_daemon_seal_shm). Before sealing, the forged chunks
 * were summed in (rank 0's element read 1002 instead of 3). */
#include <errno.h>
#include <math.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "test_daemon_harness.h"

static struct sd d;
static const uint8_t key[] = "0123456789abcdef-seal-test-key";
#define KEYLEN (sizeof(key) - 1)
#define COUNT 1024

/* Sends a forged f32 chunk of `val` (4 KiB) under rank's DATA tag of a
 * slot, as chunk seq. */
static int forge_at(struct fabric *f, fi_addr_t daemon, uint32_t handle, uint32_t rank, uint32_t slot,
		    uint32_t seq, float val)
{
	static float buf[COUNT];
	struct fabric_op op;
	struct fabric_cqe e;
	int rc;

	struct fabric_mr mr;
	for (int i = 0; i < COUNT; i++)
		buf[i] = val;
	/* an attacker on RDMA registers what it sends too (FI_MR_LOCAL) */
	if ((rc = fabric_mr_reg(f, buf, sizeof(buf), &mr)))
		return rc;
	uint64_t end = sc_now_ms() + 5000;
	while ((rc = fabric_tsend(f, buf, sizeof(buf), mr.desc, daemon, wire_tag_make(WIRE_TAG_DATA, handle, rank, slot),
				  wire_imm_make(SC_F32, SC_OP_SUM, seq), &op)) == -FI_EAGAIN &&
	       sc_now_ms() < end)
		fabric_cq_poll(f, &e, 1);
	if (rc) {
		fabric_mr_dereg(&mr);
		return rc;
	}
	rc = -ETIMEDOUT;
	while (sc_now_ms() < end) /* completed: it reached the daemon */
		if (fabric_cq_poll(f, &e, 1) == 1 && e.op == &op) {
			rc = e.err;
			break;
		}
	if (rc != -ETIMEDOUT)
		fabric_mr_dereg(&mr); /* else still posted: it stays registered */
	return rc;
}

static int forge(struct fabric *f, fi_addr_t daemon, uint32_t handle, uint32_t rank, float val)
{
	return forge_at(f, daemon, handle, rank, 0, 0, val);
}

/* Two sealed ranks on a daemon with a key; an attacker (who holds the key
 * and joined a decoy job, so it has the data address). Returns false if
 * any of it failed (and says why). */
struct sealed {
	struct client *c[2];
	struct fabric *atk;
	fi_addr_t daemon;
	uint32_t handle, window;
	int decoy_fd;
};

static bool sealed_up(struct sealed *x, const struct fabric_params *fp, uint64_t job, uint64_t decoy)
{
	char agg[64];
	const char *aggs[] = { agg };

	memset(x, 0, sizeof(*x));
	x->decoy_fd = -1;
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", d.ctl);
	for (uint32_t r = 0; r < 2; r++) {
		struct client_params p = { .provider = fp->provider, .node = fp->node, .job_id = job,
					   .rank = r, .nranks = 2, .chunk_bytes = 64 << 10, .window = 4,
					   .key = key, .key_len = KEYLEN, .naggs = 1, .aggs = aggs };
		if (client_create(&p, &x->c[r]))
			return false;
	}
	int rc[2] = { -EAGAIN, -EAGAIN };
	for (uint64_t end = sc_now_ms() + 10000; (rc[0] == -EAGAIN || rc[1] == -EAGAIN) && sc_now_ms() < end;)
		for (int r = 0; r < 2; r++)
			if (rc[r] == -EAGAIN)
				rc[r] = client_connect_poll(x->c[r]);
	uint32_t chunk;
	if (rc[0] || rc[1] || client_agg_info(x->c[0], 0, &x->handle, &x->window, &chunk) ||
	    fabric_open(fp, &x->atk))
		return false;
	struct wire_join j;
	struct wire_msg ok;
	join_init(&j, decoy, 0, 2, x->atk);
	x->decoy_fd = ctl_join(&d, &j, key, KEYLEN, &ok);
	return x->decoy_fd >= 0 && ok.type == WIRE_JOIN_OK &&
	       fabric_av_insert(x->atk, ok.u.join_ok.addr, ok.u.join_ok.addr_len, &x->daemon) == 0;
}

static void sealed_down(struct sealed *x)
{
	if (x->decoy_fd >= 0)
		close(x->decoy_fd);
	if (x->atk)
		fabric_close(x->atk);
	for (int r = 0; r < 2; r++)
		if (x->c[r])
			client_destroy(x->c[r]);
}

/* Rank 0's s0 and r0 on its client (m[0], m[2]), rank 1's s1 and r1 on
 * its (m[1], m[3]): FI_MR_LOCAL's descriptors. 0 or -1. */
static int reg4(struct client *const *c, float *s0, float *s1, float *r0, float *r1, struct fabric_mr *m)
{
	memset(m, 0, 4 * sizeof(*m));
	return client_mr_reg(c[0], s0, COUNT * sizeof(float), &m[0]) ||
	       client_mr_reg(c[1], s1, COUNT * sizeof(float), &m[1]) ||
	       client_mr_reg(c[0], r0, COUNT * sizeof(float), &m[2]) ||
	       client_mr_reg(c[1], r1, COUNT * sizeof(float), &m[3]) ? -1 : 0;
}

static void dereg4(struct fabric_mr *m)
{
	for (int i = 0; i < 4; i++)
		fabric_mr_dereg(&m[i]);
}

/* One allreduce of COUNT f32 (1 + 2): the number of wrong elements, or -1. */
static int sealed_allreduce(struct sealed *x)
{
	static float s0[COUNT], s1[COUNT], r0[COUNT], r1[COUNT];
	struct client_req *q0, *q1;
	int d0 = 0, d1 = 0, e0 = 0, e1 = 0, bad = 0;

	for (int i = 0; i < COUNT; i++) {
		s0[i] = 1.0f;
		s1[i] = 2.0f;
	}
	struct fabric_mr m[4];
	if (reg4(x->c, s0, s1, r0, r1, m))
		return -1;
	if (client_allreduce(x->c[0], s0, r0, COUNT, SC_F32, SC_OP_SUM, m[0].desc, m[2].desc, &q0) ||
	    client_allreduce(x->c[1], s1, r1, COUNT, SC_F32, SC_OP_SUM, m[1].desc, m[3].desc, &q1)) {
		dereg4(m);
		return -1;
	}
	for (uint64_t end = sc_now_ms() + 10000; (!d0 || !d1) && sc_now_ms() < end;) {
		if (!d0)
			e0 = client_test(x->c[0], q0, &d0);
		if (!d1)
			e1 = client_test(x->c[1], q1, &d1);
	}
	if (!d0 || !d1 || e0 || e1)
		return -1; /* still in flight: its memory stays registered */
	dereg4(m);
	for (int i = 0; i < COUNT; i++)
		bad += r0[i] != 3.0f || r1[i] != 3.0f;
	return bad;
}

/* A sealed job under a flood on its own tags, the source check on (the
 * default): 500 forged 4 KiB chunks, 25 before each of 20 allreduces, under
 * both ranks' DATA tags of every slot and the next sequence numbers. They
 * used to take the ranks' receives (dropped: foreign source), the real
 * chunks then waited unexpected and were swept, and the job stalled until
 * its timeout; now the receives take only their rank's messages and the
 * forged ones are discarded as unexpected. tcp only: shm reports a joined
 * rank as the source of a foreign endpoint (docs/daemon.md). */
/* Both forged chunks dropped and counted, by the seal or the source check. */
struct drops_wait {
	const char *a, *b;
	double want;
};

static bool both_dropped(void *arg)
{
	struct drops_wait *w = arg;

	return sd_metric(&d, w->a) + sd_metric(&d, w->b) >= w->want;
}

static void flood_sealed(const struct fabric_params *fp, const char *keyfile)
{
	char extra[256];
	struct sealed x;

	snprintf(extra, sizeof(extra), "[auth]\nkey-file = %s\n", keyfile);
	if (sd_start(&d, extra)) {
		CHECK(0, "sumcastd with a key did not start");
		return;
	}
	bool up = sealed_up(&x, fp, 0x5ea2, 0xdec1);
	CHECK(up, "sealed job and attacker: %s", x.c[0] ? client_error(x.c[0]) : "no client");
	const char *un = "sumcast_errors_total{kind=\"unexpected\"}";
	double u0 = sd_metric(&d, un);
	int wrong = 0, failed = 0, sent = 0;
	for (uint32_t k = 0; up && k < 20; k++) {
		for (uint32_t i = 0; i < 25; i++, sent++)
			if (forge_at(x.atk, x.daemon, x.handle, i % 2, (i / 2) % x.window, k + (i / 2) / x.window,
				     1000.0f))
				failed++;
		int w = sealed_allreduce(&x);
		wrong += w < 0 ? COUNT : w;
	}
	CHECK(up && wrong == 0 && failed == 0, "sealed job under a flood on its tags: %d wrong, %d sends failed",
	      wrong, failed);
	double u = sd_wait_metric(&d, un, TH_GE, u0 + sent, 5000);
	CHECK(u == u0 + sent, "forged chunks discarded as unexpected: %g of %d", u - u0, sent);
	printf("  sealed job, source check on: %d forged chunks on its tags over 20 allreduces: %g discarded, sums exact\n",
	       sent, u - u0);
	sealed_down(&x);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM (flood)");
	sd_cleanup(&d);
}

int main(void)
{
	char extra[512], keyfile[160], agg[64];
	struct fabric_params fp = { .provider = th_provider() };
	struct client *c[2] = { 0 };
	FILE *f;

	if (strcmp(fp.provider, "shm"))
		fp.node = "127.0.0.1";
	snprintf(keyfile, sizeof(keyfile), "/tmp/sumcastd-seal-key.%d", (int)getpid());
	f = fopen(keyfile, "w");
	fprintf(f, "%s\n", key);
	fclose(f);
	/* The source check off: as with a provider that cannot tell senders
	 * apart, or an attacker posing as the rank's address (tcp;ofi_rxm lets
	 * a process on the rank's host announce the rank's port): the seal
	 * alone must stop the forged chunks. */
	snprintf(extra, sizeof(extra), "[auth]\nkey-file = %s\n[fabric]\nsource-check = false\n", keyfile);
	if (sd_start(&d, extra)) {
		unlink(keyfile);
		th_skip("sumcastd did not start (see above)");
	}
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", d.ctl);
	const char *aggs[] = { agg };
	for (uint32_t r = 0; r < 2; r++) {
		struct client_params p = { .provider = fp.provider, .node = fp.node, .job_id = 0x5ea1,
					   .rank = r, .nranks = 2, .chunk_bytes = 64 << 10, .window = 4,
					   .key = key, .key_len = KEYLEN, .naggs = 1, .aggs = aggs };
		CHECK(client_create(&p, &c[r]) == 0, "client %u", r);
	}
	int rc0 = -EAGAIN, rc1 = -EAGAIN;
	for (uint64_t end = sc_now_ms() + 10000; (rc0 == -EAGAIN || rc1 == -EAGAIN) && sc_now_ms() < end;) {
		if (rc0 == -EAGAIN)
			rc0 = client_connect_poll(c[0]);
		if (rc1 == -EAGAIN)
			rc1 = client_connect_poll(c[1]);
	}
	CHECK(rc0 == 0 && rc1 == 0, "ranks joined: %d %d (%s)", rc0, rc1, client_error(c[0]));
	uint32_t handle = 0, w, chunk;
	CHECK(client_agg_info(c[0], 0, &handle, &w, &chunk) == 0, "job handle");

	/* The attacker: the daemon's data address from a decoy job it joins
	 * (it holds the key here: the worst case for the data plane is an
	 * insider of the control plane who is not a rank of this job); then
	 * forged chunks for both ranks of the victim job, before they send. */
	struct fabric *atk;
	struct wire_join j;
	struct wire_msg ok;
	fi_addr_t daemon;
	CHECK(fabric_open(&fp, &atk) == 0, "attacker endpoint");
	join_init(&j, 0xdec0, 0, 2, atk);
	int fd = ctl_join(&d, &j, key, KEYLEN, &ok);
	CHECK(fd >= 0 && ok.type == WIRE_JOIN_OK, "decoy join");
	/* On shm each job has an endpoint of its own, the decoy's is not the
	 * victim's; but shm names endpoints "fi_shm://<pid>:<uid>:<index>",
	 * the index counting up in the daemon: the victim's (joined just
	 * before) is the decoy's less one. */
	char addr[WIRE_ADDR_MAX + 16];
	size_t alen = ok.u.join_ok.addr_len;
	memcpy(addr, ok.u.join_ok.addr, alen);
	if (!strcmp(fp.provider, "shm")) {
		addr[alen < WIRE_ADDR_MAX ? alen : WIRE_ADDR_MAX - 1] = 0;
		char *idx = strrchr(addr, ':');
		CHECK(idx && atoi(idx + 1) > 0, "shm address %s", addr);
		if (idx && atoi(idx + 1) > 0) {
			int n = atoi(idx + 1) - 1;
			snprintf(idx + 1, sizeof(addr) - (size_t)(idx + 1 - addr), "%d", n);
			alen = strlen(addr) + 1;
		}
	}
	CHECK(fabric_av_insert(atk, addr, alen, &daemon) == 0, "daemon address");
	const char *unsealed = "sumcast_errors_total{kind=\"unsealed\"}",
		   *foreign = "sumcast_errors_total{kind=\"foreign_source\"}";
	double u0 = sd_metric(&d, unsealed), f0 = sd_metric(&d, foreign);
	CHECK(forge(atk, daemon, handle, 0, 1000.0f) == 0, "forged chunk for rank 0 not sent");
	CHECK(forge(atk, daemon, handle, 1, 1000.0f) == 0, "forged chunk for rank 1 not sent");
	struct drops_wait dw = { unsealed, foreign, u0 + f0 + 2 };
	th_wait_until(both_dropped, &dw, 5000, 10);
	double by_seal = sd_metric(&d, unsealed) - u0, by_source = sd_metric(&d, foreign) - f0;
	double dropped = by_seal + by_source;
	CHECK(dropped == 2, "forged chunks dropped and counted: %g (seal %g, source %g), want 2", dropped,
	      by_seal, by_source);
	CHECK(by_seal == 2, "the seal must drop them (the source check is off): %g", by_seal);

	/* The real allreduce: 1 + 2 everywhere. */
	static float s0[COUNT], s1[COUNT], r0[COUNT], r1[COUNT];
	for (int i = 0; i < COUNT; i++) {
		s0[i] = 1.0f;
		s1[i] = 2.0f;
	}
	struct client_req *q0, *q1;
	struct fabric_mr m[4];
	CHECK(reg4(c, s0, s1, r0, r1, m) == 0, "registering the buffers");
	CHECK(client_allreduce(c[0], s0, r0, COUNT, SC_F32, SC_OP_SUM, m[0].desc, m[2].desc, &q0) == 0, "allreduce 0");
	CHECK(client_allreduce(c[1], s1, r1, COUNT, SC_F32, SC_OP_SUM, m[1].desc, m[3].desc, &q1) == 0, "allreduce 1");
	int d0 = 0, d1 = 0, e0 = 0, e1 = 0;
	for (uint64_t end = sc_now_ms() + 10000; (!d0 || !d1) && sc_now_ms() < end;) {
		if (!d0)
			e0 = client_test(c[0], q0, &d0);
		if (!d1)
			e1 = client_test(c[1], q1, &d1);
	}
	CHECK(d0 && d1 && !e0 && !e1, "allreduce done %d %d, errors %d %d", d0, d1, e0, e1);
	int bad = 0;
	for (int i = 0; i < COUNT; i++)
		bad += r0[i] != 3.0f || r1[i] != 3.0f;
	CHECK(bad == 0, "%d elements wrong: rank 0 element 0 is %g, rank 1 %g (want 3)", bad, r0[0], r1[0]);
	printf("  %s: forged chunks dropped: %g by the seal, %g by the source check; sums exact (%g)\n",
	       fp.provider, by_seal, by_source, r0[0]);
	if (d0 && d1)
		dereg4(m);
	char body[64];
	CHECK(sd_http(&d, "/healthz", body, sizeof(body)) == 200, "daemon not healthy");

	close(fd);
	fabric_close(atk);
	client_destroy(c[0]);
	client_destroy(c[1]);
	CHECK(sd_stop(&d, SIGTERM, 10000) == 0, "exit status after SIGTERM");
	sd_cleanup(&d);
	if (strcmp(fp.provider, "shm"))
		flood_sealed(&fp, keyfile);
	unlink(keyfile);
	return th_summary("test_daemon_seal");
}
