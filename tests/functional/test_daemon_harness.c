#include "test_daemon_harness.h"

#include "proc.h"
#include "sumcastd_proc.h"
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SUMCASTD_PATH
#define SUMCASTD_PATH "sumcastd"
#endif

const char *th_provider(void)
{
	const char *p = getenv("SUMCAST_TEST_PROVIDER");
	if (!p || !*p || !strcmp(p, "tcp"))
		return "tcp;ofi_rxm";
	return p;
}

/* The daemon's options for this test (extra: the caller's INI text). */
static struct sc_daemon_opts sd_opts(const struct sd *d, const char *extra)
{
	return (struct sc_daemon_opts){
		.binary = sd_binary(),
		.provider = d->provider,
		.control = "handshake-timeout = 3s\ndrain-timeout = 2s\n",
		.extra = extra,
		.log = true,
		.wrapper = getenv("SC_TEST_DAEMON_WRAPPER"),
		.timeout_ms = 15000 * th_slow_factor(),
	};
}

/* The base config's [log] section goes before the caller's text. */
static char *sd_extra(const char *extra)
{
	char *s = NULL;
	if (asprintf(&s, "[log]\nlevel = debug\n%s", extra ? extra : "") < 0)
		return NULL;
	return s;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

/* struct sd <-> the support module's struct (same daemon). */
static void sd_proc(const struct sd *d, struct sc_daemon *p)
{
	memset(p, 0, sizeof(*p));
	p->pid = d->pid;
	p->own_dir = true;
	copy_str(p->dir, sizeof(p->dir), d->dir);
	copy_str(p->conf, sizeof(p->conf), d->conf);
	copy_str(p->ports, sizeof(p->ports), d->ports);
	copy_str(p->log, sizeof(p->log), d->log);
}

int sd_write_conf(struct sd *d, const char *extra)
{
	struct sc_daemon p;
	char *e = sd_extra(extra);
	struct sc_daemon_opts o = sd_opts(d, e);
	int rc;

	if (!e)
		return -1;
	sd_proc(d, &p);
	rc = sc_daemon_write_conf(&p, &o);
	free(e);
	return rc;
}

/* The log lines that contain s, counted until `stop` of them (0: all);
 * the first `print` of them printed, indented. */
static int log_scan(const struct sd *d, const char *s, int stop, int print)
{
	FILE *f = fopen(d->log, "r");
	char line[2048];
	int n = 0;

	if (!f)
		return 0;
	while ((!stop || n < stop) && fgets(line, sizeof(line), f))
		if (strstr(line, s) && n++ < print)
			printf("    | %s%s", line, strchr(line, '\n') ? "" : "\n");
	if (n > print && print)
		printf("    | (%d more)\n", n - print);
	fclose(f);
	return n;
}

bool sd_log_has(const struct sd *d, const char *s)
{
	return log_scan(d, s, 1, 0) > 0;
}

void sd_log_print(const struct sd *d, const char *s, int max)
{
	log_scan(d, s, 0, max);
}

int sd_log_count(const struct sd *d, const char *s)
{
	return log_scan(d, s, 0, 0);
}

struct log_wait {
	const struct sd *d;
	const char *s;
	int before;
	char *line;
	size_t cap;
};

static bool log_has_more(void *arg)
{
	struct log_wait *w = arg;
	FILE *f = fopen(w->d->log, "r");
	char l[2048];
	int n = 0;

	if (f) {
		while (fgets(l, sizeof(l), f))
			if (strstr(l, w->s) && ++n > w->before && w->line && w->cap)
				snprintf(w->line, w->cap, "%s", l);
		fclose(f);
	}
	return n > w->before;
}

bool sd_wait_log(const struct sd *d, const char *s, int before, char *line, size_t cap,
		 unsigned timeout_ms)
{
	struct log_wait w = { d, s, before, line, cap };

	return th_wait_until(log_has_more, &w, timeout_ms, 20);
}

long sd_rss_kib(const struct sd *d)
{
	return (long)sc_proc_status(d->pid, "VmRSS");
}

struct rss_wait {
	const struct sd *d;
	long lo, hi, kib;
};

static bool rss_within(void *arg)
{
	struct rss_wait *w = arg;

	w->kib = sd_rss_kib(w->d);
	return w->kib >= w->lo && w->kib <= w->hi;
}

long sd_wait_rss(const struct sd *d, long lo, long hi, unsigned timeout_ms)
{
	struct rss_wait w = { d, lo, hi, -1 };

	th_wait_until(rss_within, &w, timeout_ms, 20);
	return w.kib;
}

long sd_rss_settled(const struct sd *d, unsigned timeout_ms)
{
	uint64_t end = sc_now_ms() + timeout_ms * th_slow_factor();
	long kib = sd_rss_kib(d), ref = kib;
	int still = 0;

	while (still < 10 && sc_now_ms() < end) {
		th_sleep_ms(20);
		kib = sd_rss_kib(d);
		if (labs(kib - ref) <= 256) {
			still++;
		} else {
			ref = kib;
			still = 0;
		}
	}
	return kib;
}

const char *sd_binary(void)
{
	return getenv("SUMCASTD") ? getenv("SUMCASTD") : SUMCASTD_PATH;
}

bool th_json_ok(const char *text)
{
	FILE *p;

	if (system("command -v python3 >/dev/null 2>&1"))
		return true;
	p = popen("python3 -c 'import json,sys; json.load(sys.stdin)' 2>/dev/null", "w");
	if (!p)
		return false;
	fputs(text, p);
	return pclose(p) == 0;
}

/* Ready once both ports are known and /healthz answers 200. */
static bool sd_healthy(const struct sc_daemon *p, void *arg)
{
	struct sd *d = arg;
	char body[64];

	if (!p->http)
		return false;
	d->ctl = p->ctl;
	d->http = p->http;
	return sd_http(d, "/healthz", body, sizeof(body)) == 200;
}

int sd_start(struct sd *d, const char *extra)
{
	struct sc_daemon p;
	char *e;
	int rc;

	memset(d, 0, sizeof(*d));
	d->provider = th_provider();
	if (!(e = sd_extra(extra)))
		return -1;
	struct sc_daemon_opts o = sd_opts(d, e);
	o.ready = sd_healthy;
	o.ready_arg = d;
	rc = sc_daemon_start(&p, &o);
	free(e);
	if (*p.dir && (strlen(p.dir) >= sizeof(d->dir) || strlen(p.conf) >= sizeof(d->conf) ||
		       strlen(p.ports) >= sizeof(d->ports) || strlen(p.log) >= sizeof(d->log))) {
		fprintf(stderr, "sumcastd test paths too long (%s)\n", p.dir);
		sc_daemon_cleanup(&p, false);
		return -1;
	}
	d->pid = p.pid;
	copy_str(d->dir, sizeof(d->dir), p.dir);
	copy_str(d->conf, sizeof(d->conf), p.conf);
	copy_str(d->ports, sizeof(d->ports), p.ports);
	copy_str(d->log, sizeof(d->log), p.log);
	d->ctl = p.ctl;
	d->http = p.http;
	return rc ? -1 : 0;
}

int sd_stop(struct sd *d, int sig, unsigned timeout_ms)
{
	struct sc_daemon p;
	int rc;

	sd_proc(d, &p);
	rc = sc_daemon_stop(&p, sig, timeout_ms * th_slow_factor());
	d->pid = p.pid;
	return rc;
}

void sd_cleanup(struct sd *d)
{
	struct sc_daemon p;
	bool keep = th_failed || getenv("SC_TEST_KEEP");

	if (d->pid > 0)
		sd_stop(d, SIGKILL, 2000);
	sd_proc(d, &p);
	if (keep && *d->dir)
		fprintf(stderr, "daemon log kept in %s\n", d->log);
	sc_daemon_cleanup(&p, keep);
	d->pid = p.pid;
}

static int tcp_connect(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int read_full(int fd, void *buf, size_t len, uint64_t deadline)
{
	size_t got = 0;

	while (got < len) {
		int64_t left = (int64_t)(deadline - sc_now_ms());
		struct pollfd p = { fd, POLLIN, 0 };
		/* past the deadline: what is there already, without waiting */
		int n = poll(&p, 1, left > 0 ? (int)left : 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -ETIMEDOUT;
		ssize_t r = read(fd, (char *)buf + got, len - got);
		if (r == 0)
			return -EPIPE;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -EPIPE;
		}
		got += (size_t)r;
	}
	return 0;
}

int sd_http(const struct sd *d, const char *path, char *body, size_t cap)
{
	return sd_http_ctype(d, path, NULL, 0, body, cap);
}

int sd_http_ctype(const struct sd *d, const char *path, char *ctype, size_t ccap, char *body,
		  size_t cap)
{
	return sc_http_get(d->http, path, ctype, ccap, body, cap, 5000);
}

double th_metric(const char *text, const char *name)
{
	return sc_metric_value(text, name);
}

double sd_metric(const struct sd *d, const char *name)
{
	static _Thread_local char body[1 << 16]; /* a test's sampling thread reads metrics too */
	if (sd_http(d, "/metrics", body, sizeof(body)) != 200)
		return NAN;
	return th_metric(body, name);
}

struct metric_wait {
	const struct sd *d;
	const char *name;
	enum th_cmp cmp;
	double want, got;
	struct trank **rs; /* polled between reads */
	size_t n;
};

static bool metric_there(void *arg)
{
	struct metric_wait *w = arg;

	if (w->n) /* their providers move messages only while polled */
		tranks_poll(w->rs, w->n, 10);
	w->got = sd_metric(w->d, w->name);
	return w->cmp == TH_EQ ? w->got == w->want : w->cmp == TH_GE ? w->got >= w->want
								     : w->got <= w->want;
}

double sd_wait_metric(const struct sd *d, const char *name, enum th_cmp cmp, double want,
		      unsigned timeout_ms)
{
	struct metric_wait w = { d, name, cmp, want, NAN, NULL, 0 };

	th_wait_until(metric_there, &w, timeout_ms, 20);
	return w.got;
}

double tranks_wait_metric(struct trank **rs, size_t n, const struct sd *d, const char *name,
			  enum th_cmp cmp, double want, unsigned timeout_ms)
{
	struct metric_wait w = { d, name, cmp, want, NAN, rs, n };

	th_wait_until(metric_there, &w, timeout_ms, 0); /* it polls the ranks 10 ms a read */
	return w.got;
}

static bool idle(void *arg)
{
	const struct sd *d = arg;

	return sd_metric(d, "sumcast_jobs") == 0 && sd_metric(d, "sumcast_memory_used_bytes") == 0;
}

void sd_wait_idle(const struct sd *d, const char *what)
{
	th_wait_until(idle, (void *)d, 5000, 20);
	CHECK(sd_metric(d, "sumcast_jobs") == 0, "%s: %g jobs left", what, sd_metric(d, "sumcast_jobs"));
	CHECK(sd_metric(d, "sumcast_memory_used_bytes") == 0, "%s: memory not returned: %g bytes", what,
	      sd_metric(d, "sumcast_memory_used_bytes"));
}

int ctl_send_raw(int fd, const void *buf, size_t len)
{
	return send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -EPIPE;
}

int ctl_send(int fd, const struct wire_msg *m)
{
	uint8_t buf[WIRE_MSG_MAX];
	int n = wire_msg_encode(m, buf, sizeof(buf));
	if (n < 0)
		return n;
	return ctl_send_raw(fd, buf, (size_t)n);
}

int ctl_recv(int fd, struct wire_msg *m, unsigned timeout_ms)
{
	uint64_t deadline = sc_now_ms() + timeout_ms * th_slow_factor();
	uint8_t hdr[WIRE_HDR_LEN], body[WIRE_BODY_MAX];
	struct wire_hdr h;
	int rc = read_full(fd, hdr, sizeof(hdr), deadline);

	if (rc)
		return rc;
	if (wire_hdr_decode(hdr, sizeof(hdr), &h))
		return -EBADMSG;
	if ((rc = read_full(fd, body, h.len, deadline)))
		return rc;
	if (wire_msg_decode(h.type, body, h.len, m))
		return -EBADMSG;
	m->version = h.version;
	return 0;
}

int ctl_wait_closed(int fd, unsigned timeout_ms)
{
	uint64_t deadline = sc_now_ms() + timeout_ms * th_slow_factor();
	uint8_t b[256];

	for (;;) {
		int rc = read_full(fd, b, 1, deadline);
		if (rc == -EPIPE)
			return 0;
		if (rc == -ETIMEDOUT)
			return rc;
	}
}

int ctl_connect_hello(const struct sd *d, struct wire_msg *hello)
{
	int fd = tcp_connect(d->ctl);

	if (fd < 0)
		return -1;
	if (ctl_recv(fd, hello, 5000) || hello->type != WIRE_HELLO) {
		close(fd);
		return -1;
	}
	return fd;
}

int ctl_connect(const struct sd *d, uint64_t *nonce)
{
	struct wire_msg m;
	int fd = ctl_connect_hello(d, &m);

	if (fd >= 0 && nonce)
		*nonce = m.u.hello.nonce;
	return fd;
}

void join_init(struct wire_join *j, uint64_t id, uint32_t rank, uint32_t nranks,
	       const struct fabric *f)
{
	memset(j, 0, sizeof(*j));
	j->job_id = id;
	j->rank = rank;
	j->nranks = nranks;
	j->chunk_bytes = 64 << 10;
	j->window = 4;
	j->dtype_mask = (1u << SC_F32) | (1u << SC_BF16);
	j->result_key = (uint16_t)(0x100 + rank);
	if (f) {
		j->addr_len = (uint16_t)f->addrlen;
		memcpy(j->addr, f->addr, f->addrlen);
	} else if (!strcmp(th_provider(), "shm")) {
		/* a name no endpoint has */
		j->addr_len = (uint16_t)(snprintf((char *)j->addr, sizeof(j->addr), "fi_shm://sc-none-%u", rank) + 1);
	} else {
		/* 127.0.0.1, port 1: where no endpoint listens */
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(1),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		j->addr_len = sizeof(a);
		memcpy(j->addr, &a, sizeof(a));
	}
	snprintf(j->provider, sizeof(j->provider), "%s", th_provider());
}

int ctl_join(const struct sd *d, struct wire_join *j, const uint8_t *key, size_t key_len,
	     struct wire_msg *reply)
{
	return ctl_join_ver(d, j, key, key_len, 0, reply);
}

int ctl_join_ver(const struct sd *d, struct wire_join *j, const uint8_t *key, size_t key_len,
		 uint16_t version, struct wire_msg *reply)
{
	uint64_t nonce;
	struct wire_msg m = { .version = version, .type = WIRE_JOIN };
	int fd = ctl_connect(d, &nonce);

	if (fd < 0)
		return -1;
	if (wire_join_sign(key, key_len, nonce, j)) {
		close(fd);
		return -1;
	}
	m.u.join = *j;
	if (ctl_send(fd, &m) || ctl_recv(fd, reply, 5000)) {
		close(fd);
		return -1;
	}
	return fd;
}

int trank_open(struct trank *r, size_t cap)
{
	struct fabric_params p = { .provider = th_provider() };

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	if (strcmp(p.provider, "shm"))
		p.node = "127.0.0.1";
	if (fabric_open(&p, &r->f))
		return -1;
	r->cap = cap;
	r->buf = aligned_alloc(4096, cap);
	if (!r->buf || fabric_mr_reg(r->f, r->buf, cap, &r->mr))
		return -1;
	memset(r->buf, 0, cap);
	return 0;
}

void trank_close(struct trank *r)
{
	if (r->fd >= 0)
		close(r->fd);
	if (r->f) {
		fabric_close_ep(r->f); /* what is posted ends before its memory's registration */
		fabric_mr_dereg(&r->mr);
		fabric_close(r->f);
	}
	free(r->buf);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

int trank_join(struct trank *r, const struct sd *d, uint64_t job, uint32_t rank, uint32_t nranks,
	       void (*tweak)(struct wire_join *))
{
	struct wire_msg m;

	join_init(&r->join, job, rank, nranks, r->f);
	if (tweak)
		tweak(&r->join);
	r->fd = ctl_join_ver(d, &r->join, NULL, 0, r->ver, &m);
	if (r->fd < 0)
		return -EIO;
	if (m.type == WIRE_REFUSE) {
		fprintf(stderr, "join refused: %s: %s\n", wire_code_name(m.u.refuse.code), m.u.refuse.text);
		return m.u.refuse.code;
	}
	if (m.type != WIRE_JOIN_OK)
		return -EPROTO;
	r->ok = m.u.join_ok;
	r->rank = rank;
	r->handle = m.u.join_ok.job_handle;
	r->result_key = r->join.result_key;
	if (fabric_av_insert(r->f, m.u.join_ok.addr, m.u.join_ok.addr_len, &r->daemon))
		return -EIO;
	r->lanes = m.u.join_ok.lanes > 1 ? m.u.join_ok.lanes : 1;
	r->lane[0] = r->daemon;
	for (uint32_t k = 1; k < r->lanes; k++)
		if (fabric_av_insert(r->f, m.u.join_ok.lane_addr[k], m.u.join_ok.lane_len[k], &r->lane[k]))
			return -EIO;
	return 0;
}

int trank_ready(struct trank *r, unsigned timeout_ms)
{
	struct wire_msg m;
	int rc = ctl_recv(r->fd, &m, timeout_ms);

	if (rc)
		return rc;
	return m.type == WIRE_READY && m.u.ready.job_handle == r->handle ? 0 : -EPROTO;
}

int trank_post_result(struct trank *r, uint32_t slot, size_t roff, size_t len, struct top *op)
{
	memset(op, 0, sizeof(*op));
	return fabric_trecv(r->f, r->buf + r->cap / 2 + roff, len, r->mr.desc, FI_ADDR_UNSPEC,
			    wire_tag_make(WIRE_TAG_RESULT, r->result_key, r->rank, slot), 0, &op->op);
}

bool trank_result_from_lane(const struct trank *r, uint32_t slot, size_t len, const struct top *ro)
{
	uint32_t k = wire_result_lane(slot, r->rank, r->lanes, r->ok.spread, len);

	if (!r->f->has_source || ro->src == r->lane[k])
		return true;
	fprintf(stderr, "rank %u slot %u: a %zu-byte result not from lane %u of %u (spread %u)\n", r->rank,
		slot, len, k, r->lanes, r->ok.spread);
	return false;
}

int trank_send_chunk(struct trank *r, uint32_t slot, uint32_t seq, enum sc_dtype t, enum sc_op o,
		     size_t soff, size_t len, struct top *op)
{
	/* The send queue stays full while the daemon does not read (a loaded
	 * host can keep it off the CPU for a while): bounded in time. */
	uint64_t end = sc_now_ms() + 10000 * th_slow_factor();

	memset(op, 0, sizeof(*op));
	do {
		int rc = fabric_tsend(r->f, r->buf + soff, len, r->mr.desc,
				      r->lanes > 1 ? r->lane[slot % r->lanes] : r->daemon,
				      wire_tag_make(WIRE_TAG_DATA, r->handle, r->rank, slot),
				      wire_imm_make(t, o, seq), &op->op);
		if (rc != -FI_EAGAIN)
			return rc;
		tranks_poll(&r, 1, 1);
	} while (sc_now_ms() < end);
	return -FI_EAGAIN;
}

/* Polls r's completion queue once: the completions it found. */
static int poll_one(struct trank *r)
{
	struct fabric_cqe e[16];
	int n = fabric_cq_poll(r->f, e, 16);

	for (int i = 0; i < n; i++) {
		struct top *op = container_of(e[i].op, struct top, op);
		op->done = 1;
		op->err = e[i].err;
		op->len = e[i].len;
		op->data = e[i].data;
		op->tag = e[i].tag;
		op->src = e[i].src;
	}
	return n > 0 ? n : 0;
}

/* One pass over the ranks: whether any completed something. */
static bool poll_all(struct trank **rs, size_t n)
{
	bool moved = false;

	for (size_t i = 0; i < n; i++)
		moved |= poll_one(rs[i]) > 0;
	return moved;
}

void tranks_poll(struct trank **rs, size_t n, unsigned ms)
{
	uint64_t end = sc_now_ms() + ms;
	unsigned nap = 0;

	for (;;) {
		bool moved = poll_all(rs, n);
		if (sc_now_ms() >= end)
			return;
		th_nap(&nap, moved);
	}
}

int tranks_wait(struct trank **rs, size_t n, struct top **ops, size_t nops, unsigned timeout_ms)
{
	uint64_t deadline = sc_now_ms() + timeout_ms * th_slow_factor();
	unsigned nap = 0;

	while (sc_now_ms() < deadline) {
		bool moved = poll_all(rs, n);
		size_t done = 0;
		for (size_t i = 0; i < nops; i++)
			done += ops[i]->done != 0;
		if (done == nops)
			return 0;
		th_nap(&nap, moved);
	}
	return -ETIMEDOUT;
}

float tranks_val(uint32_t r, uint32_t c, size_t i, enum sc_dtype t)
{
	/* Small integers: exact in f32 and bf16, and so are their sums. */
	unsigned m = t == SC_BF16 ? 5 : 13;
	return (float)((r + 1) * ((i + c) % m));
}

static void run_fill(struct trank *rk, uint32_t r, uint32_t c, const struct trun *p)
{
	uint8_t *sb = rk->buf + (size_t)(c % p->window) * p->stride;
	size_t ne = p->len / sc_dtype_size(p->t);

	for (size_t i = 0; i < ne; i++) {
		float v = tranks_val(r, c, i, p->t);
		if (p->t == SC_BF16)
			((uint16_t *)sb)[i] = sc_f32_to_bf16(v);
		else
			((float *)sb)[i] = v;
	}
}

static int run_post(struct trank *rk, uint32_t c, const struct trun *p, struct top *rop, struct top *sop)
{
	uint32_t s = c % p->window;

	return trank_post_result(rk, s, (size_t)s * p->stride, p->stride, rop) ||
	       trank_send_chunk(rk, s, c & WIRE_SEQ_MASK, p->t, SC_OP_SUM, (size_t)s * p->stride, p->len, sop);
}

long tranks_allreduce(struct trank *rk, uint32_t n, const struct trun *p)
{
	uint32_t end = p->first + p->count, w = p->window;
	size_t ne = p->len / sc_dtype_size(p->t);
	struct top *sops = calloc((size_t)n * w, sizeof(*sops)), *rops = calloc((size_t)n * w, sizeof(*rops));
	uint32_t *next = calloc(n, sizeof(*next)), *got = calloc(n, sizeof(*got));
	struct trank **all = calloc(n, sizeof(*all));
	uint64_t deadline = sc_now_ms() + (uint64_t)p->timeout_ms * th_slow_factor();
	long wrong = -1;

	if (!sops || !rops || !next || !got || !all || w == 0)
		goto out;
	for (uint32_t r = 0; r < n; r++) {
		all[r] = &rk[r];
		next[r] = got[r] = p->first;
		for (uint32_t c = p->first; c < p->first + w && c < end; c++) {
			run_fill(&rk[r], r, c, p);
			if (run_post(&rk[r], c, p, &rops[r * w + c % w], &sops[r * w + c % w]))
				goto out;
			next[r] = c + 1;
		}
	}
	wrong = 0;
	while (sc_now_ms() < deadline) {
		bool done = true;
		tranks_poll(all, n, 0);
		for (uint32_t r = 0; r < n; r++) {
			if (got[r] >= end)
				continue;
			done = false;
			uint32_t c = got[r], s = c % w;
			struct top *ro = &rops[r * w + s];
			if (!ro->done || !sops[r * w + s].done)
				continue;
			if (ro->err || ro->len != p->len || wire_imm_seq(ro->data) != (c & WIRE_SEQ_MASK)) {
				fprintf(stderr, "rank %u chunk %u: err %d len %zu seq %u\n", r, c, ro->err, ro->len,
					wire_imm_seq(ro->data));
				wrong = -1;
				goto out;
			}
			if (!trank_result_from_lane(&rk[r], s, p->len, ro)) {
				wrong = -1;
				goto out;
			}
			const uint8_t *rb = rk[r].buf + rk[r].cap / 2 + (size_t)s * p->stride;
			for (size_t i = 0; i < ne; i++) {
				float want = 0;
				for (uint32_t q = 0; q < n; q++)
					want += tranks_val(q, c, i, p->t);
				float have = p->t == SC_BF16 ? sc_bf16_to_f32(((const uint16_t *)rb)[i])
							     : ((const float *)rb)[i];
				wrong += have != want;
			}
			got[r]++;
			/* Credit: result c is here, chunk c + window goes into the slot. */
			if (next[r] < end) {
				run_fill(&rk[r], r, next[r], p);
				if (run_post(&rk[r], next[r], p, ro, &sops[r * w + s])) {
					wrong = -1;
					goto out;
				}
				next[r]++;
			}
		}
		if (done)
			goto out;
	}
	fprintf(stderr, "allreduce timed out: rank 0 has %u of chunks [%u, %u)\n", got[0], p->first, end);
	wrong = -1;
out:
	free(sops);
	free(rops);
	free(next);
	free(got);
	free(all);
	return wrong;
}

int tpair_up(struct tpair *p, const struct sd *d, const struct client_params *base)
{
	char agg[64];
	const char *aggs[] = { agg };
	int rc[2] = { -EAGAIN, -EAGAIN };

	memset(p, 0, sizeof(*p));
	snprintf(agg, sizeof(agg), "127.0.0.1:%u", d->ctl);
	for (uint32_t r = 0; r < 2; r++) {
		struct client_params cp = *base;
		cp.rank = r;
		cp.nranks = 2;
		cp.naggs = 1;
		cp.aggs = aggs;
		if (client_create(&cp, &p->c[r])) {
			fprintf(stderr, "tpair: client %u not created\n", r);
			return -1;
		}
	}
	for (uint64_t end = sc_now_ms() + 10000 * th_slow_factor();
	     (rc[0] == -EAGAIN || rc[1] == -EAGAIN) && sc_now_ms() < end;)
		for (int r = 0; r < 2; r++)
			if (rc[r] == -EAGAIN)
				rc[r] = client_connect_poll(p->c[r]);
	if (rc[0] || rc[1]) {
		fprintf(stderr, "tpair: connect %d %d: %s\n", rc[0], rc[1], client_error(p->c[rc[0] ? 0 : 1]));
		return -1;
	}
	return 0;
}

long tpair_allreduce(struct tpair *p, size_t count, enum sc_dtype t)
{
	size_t esz = sc_dtype_size(t);
	uint8_t *buf = calloc(4, count * esz);
	uint8_t *in[2] = { buf, buf + count * esz }, *out[2] = { buf + 2 * count * esz, buf + 3 * count * esz };
	struct client_req *q[2];
	struct fabric_mr mr[2] = { { 0 }, { 0 } };
	int done[2] = { 0 }, err[2] = { 0 };
	long bad = -1;

	if (!buf)
		return -1;
	for (size_t i = 0; i < count; i++)
		for (int r = 0; r < 2; r++)
			th_put(t, in[r], i, (int)r + 1);
	/* each rank's own registration of the buffers (FI_MR_LOCAL) */
	for (int r = 0; r < 2; r++)
		if (client_mr_reg(p->c[r], buf, 4 * count * esz, &mr[r]) ||
		    client_allreduce(p->c[r], in[r], out[r], count, t, SC_OP_SUM, mr[r].desc, mr[r].desc, &q[r]))
			goto out;
	for (uint64_t end = sc_now_ms() + 10000 * th_slow_factor(); (!done[0] || !done[1]) && sc_now_ms() < end;)
		for (int r = 0; r < 2; r++)
			if (!done[r])
				err[r] = client_test(p->c[r], q[r], &done[r]);
	if (!done[0] || !done[1] || err[0] || err[1])
		goto out;
	bad = 0;
	for (size_t i = 0; i < count; i++)
		for (int r = 0; r < 2; r++)
			bad += th_get(t, out[r], i) != 3.0;
out:
	for (int r = 0; r < 2; r++)
		fabric_mr_dereg(&mr[r]);
	free(buf);
	return bad;
}

void tpair_down(struct tpair *p)
{
	for (int r = 0; r < 2; r++)
		if (p->c[r])
			client_destroy(p->c[r]);
	memset(p, 0, sizeof(*p));
}

void th_put(enum sc_dtype t, void *p, size_t i, int v)
{
	switch (t) {
	case SC_F32: ((float *)p)[i] = (float)v; break;
	case SC_F16: ((uint16_t *)p)[i] = sc_f32_to_f16((float)v); break;
	case SC_BF16: ((uint16_t *)p)[i] = sc_f32_to_bf16((float)v); break;
	case SC_F64: ((double *)p)[i] = v; break;
	case SC_I32: ((int32_t *)p)[i] = v; break;
	case SC_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case SC_I64: ((int64_t *)p)[i] = v; break;
	case SC_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	case SC_I8: ((int8_t *)p)[i] = (int8_t)v; break;
	case SC_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	default: break;
	}
}

double th_get(enum sc_dtype t, const void *p, size_t i)
{
	switch (t) {
	case SC_F32: return ((const float *)p)[i];
	case SC_F16: return sc_f16_to_f32(((const uint16_t *)p)[i]);
	case SC_BF16: return sc_bf16_to_f32(((const uint16_t *)p)[i]);
	case SC_F64: return ((const double *)p)[i];
	case SC_I32: return ((const int32_t *)p)[i];
	case SC_U32: return ((const uint32_t *)p)[i];
	case SC_I64: return (double)((const int64_t *)p)[i];
	case SC_U64: return (double)((const uint64_t *)p)[i];
	case SC_I8: return ((const int8_t *)p)[i];
	case SC_U8: return ((const uint8_t *)p)[i];
	default: return NAN;
	}
}

bool th_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	return true;
#else
	return false;
#endif
#else
	return false;
#endif
}
