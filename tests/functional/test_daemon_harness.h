/* Harness for the protocol-level sumcastd tests: starts the real daemon
 * binary with a temporary config (ports 0 + port-file), waits for /healthz,
 * talks the control protocol over raw TCP (wire.h) and the data plane with
 * fabric.h. Independent of client/client.c on purpose. Every wait is bounded
 * in time. */
#ifndef TEST_DAEMON_HARNESS_H
#define TEST_DAEMON_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <sys/types.h>

#include "check.h" /* CHECK, REQUIRE, th_summary, th_skip */
#include "clock.h"
#include "fabric.h"
#include "reduce.h"
#include "wait.h" /* th_wait_until, th_slow_factor */
#include "wire.h"

/* Whether this build (and so the daemon's) runs under AddressSanitizer. */
bool th_sanitized(void);

struct sd {
	pid_t pid;
	char dir[64];
	char conf[128];
	char ports[128];
	char log[128];
	uint16_t ctl, http;
	const char *provider;
};

/* Test's provider: $SUMCAST_TEST_PROVIDER or "tcp;ofi_rxm". */
const char *th_provider(void);
/* Starts sumcastd with extra INI text appended to [job]-less base config
 * (extra may contain sections). Returns 0, or -1 after printing why. */
int sd_start(struct sd *d, const char *extra);
/* Rewrites the config file (for SIGHUP tests). */
int sd_write_conf(struct sd *d, const char *extra);
/* Sends sig, waits up to timeout_ms; returns the exit status, 128+signal if
 * killed by one, or -1 on timeout (then SIGKILL). */
int sd_stop(struct sd *d, int sig, unsigned timeout_ms);
/* Kills if still running, removes the temp dir. */
void sd_cleanup(struct sd *d);
/* Whether the log contains s. */
bool sd_log_has(const struct sd *d, const char *s);
/* How many log lines contain s. */
int sd_log_count(const struct sd *d, const char *s);
/* Prints the log lines that contain s (the first max of them), indented. */
void sd_log_print(const struct sd *d, const char *s, int max);
/* The waits below are bounded, their bounds scaled by th_slow_factor()
 * (wait.h). */
/* Waits until more than `before` log lines contain s; the last such line
 * into line (may be NULL). true once there are. */
bool sd_wait_log(const struct sd *d, const char *s, int before, char *line, size_t cap,
		 unsigned timeout_ms);
/* The daemon's VmRSS in KiB, -1 if unknown. */
long sd_rss_kib(const struct sd *d);
/* Waits until VmRSS is within [lo, hi] KiB; returns the last reading. */
long sd_wait_rss(const struct sd *d, long lo, long hi, unsigned timeout_ms);
/* Waits until VmRSS holds still (within 256 KiB over 200 ms); returns the
 * last reading. */
long sd_rss_settled(const struct sd *d, unsigned timeout_ms);

/* GET path; returns the HTTP status and the body (NUL-terminated). */
int sd_http(const struct sd *d, const char *path, char *body, size_t cap);
/* Same, and the Content-Type header's value into ctype (may be NULL). */
int sd_http_ctype(const struct sd *d, const char *path, char *ctype, size_t ccap, char *body,
		  size_t cap);
/* Path of the sumcastd binary under test. */
const char *sd_binary(void);
/* Whether the JSON text parses (python3's json module; true without python3). */
bool th_json_ok(const char *text);
/* Value of a metric line "name value" (name may include {labels}); NAN if absent. */
double th_metric(const char *text, const char *name);
double sd_metric(const struct sd *d, const char *name);
/* How sd_wait_metric compares: equal to, at least, at most. */
enum th_cmp { TH_EQ, TH_GE, TH_LE };
/* Waits until the metric compares to want as cmp says; returns its last
 * value (NAN when absent). */
double sd_wait_metric(const struct sd *d, const char *name, enum th_cmp cmp, double want,
		      unsigned timeout_ms);
/* Waits (5 s) until the daemon serves no job and holds no job
 * memory (a data thread returns a job's memory after its last operation
 * completed, so a job whose ranks closed may still be there a moment),
 * then CHECKs both, naming `what`. */
void sd_wait_idle(const struct sd *d, const char *what);

/* Control connection: connect, read HELLO. Returns the fd or -1. */
int ctl_connect(const struct sd *d, uint64_t *nonce);
/* The same, handing back the HELLO (its header version in hello->version). */
int ctl_connect_hello(const struct sd *d, struct wire_msg *hello);
int ctl_send(int fd, const struct wire_msg *m);
int ctl_send_raw(int fd, const void *buf, size_t len);
/* 0, -ETIMEDOUT, -EPIPE (peer closed), -EBADMSG. timeout_ms 0: only a
 * message that is there already. */
int ctl_recv(int fd, struct wire_msg *m, unsigned timeout_ms); /* m->version: the header's */
/* 0 once the peer closed the connection (EOF/reset) within timeout. */
int ctl_wait_closed(int fd, unsigned timeout_ms);

/* A JOIN with test defaults: chunk 64 KiB, window 4, f32|bf16, provider. */
void join_init(struct wire_join *j, uint64_t id, uint32_t rank, uint32_t nranks,
	       const struct fabric *f);
/* connect + sign + JOIN + first reply. Returns the fd (caller closes) or -1. */
int ctl_join(const struct sd *d, struct wire_join *j, const uint8_t *key, size_t key_len,
	     struct wire_msg *reply);

/* The same in wire version `version` (0: WIRE_VERSION): the daemon answers
 * a rank in the version of its JOIN. */
int ctl_join_ver(const struct sd *d, struct wire_join *j, const uint8_t *key, size_t key_len,
		 uint16_t version, struct wire_msg *reply);

/* One rank with its own endpoint. */
struct trank {
	struct fabric *f;
	fi_addr_t daemon;
	/* the job's lanes (JOIN_OK, protocol 7): slot s goes to lane[s % lanes];
	 * lane[0] is daemon */
	uint32_t lanes;
	fi_addr_t lane[WIRE_LANES_MAX];
	struct fabric_mr mr;
	uint8_t *buf; /* [0, cap/2): send area, [cap/2, cap): receive area */
	size_t cap;
	int fd;
	uint32_t rank, handle;
	uint16_t result_key;
	uint16_t ver; /* the JOIN's wire version (set before trank_join); 0: WIRE_VERSION */
	struct wire_join join;
	struct wire_join_ok ok;
};

int trank_open(struct trank *r, size_t cap);
void trank_close(struct trank *r);
/* JOIN (+ wait JOIN_OK). Returns 0 or the refusal code / -errno. */
int trank_join(struct trank *r, const struct sd *d, uint64_t job, uint32_t rank, uint32_t nranks,
	       void (*tweak)(struct wire_join *));
/* Waits for READY. */
int trank_ready(struct trank *r, unsigned timeout_ms);

/* Posts the receive of one result into recv area offset roff, sends len
 * bytes from send area offset soff as chunk seq (slot = seq % window). */
struct top {
	struct fabric_op op;
	int done, err;
	size_t len;
	uint32_t data;
	uint64_t tag;
	fi_addr_t src; /* the sender, where the rank's provider names it */
};
int trank_post_result(struct trank *r, uint32_t slot, size_t roff, size_t len, struct top *op);
/* Whether result ro of slot `slot`, len payload bytes, came from the lane
 * the rule names (wire_result_lane: the slot's, or with the job's results
 * spread, lane (slot + rank) % lanes). True where the provider does not
 * name senders; false with a line on stderr. */
bool trank_result_from_lane(const struct trank *r, uint32_t slot, size_t len, const struct top *ro);
int trank_send_chunk(struct trank *r, uint32_t slot, uint32_t seq, enum sc_dtype t, enum sc_op o,
		     size_t soff, size_t len, struct top *op);
/* Polls every rank's CQ until all ops are done or timeout, napping after a
 * pass that completed nothing (th_nap). 0 or -ETIMEDOUT. */
int tranks_wait(struct trank **rs, size_t n, struct top **ops, size_t nops, unsigned timeout_ms);
/* Polls CQs for a while (lets the provider progress), napping as
 * tranks_wait does; 0: one pass. */
void tranks_poll(struct trank **rs, size_t n, unsigned ms);
/* sd_wait_metric while the ranks' CQs are polled: for what the daemon
 * counts only once a rank's provider has moved its message. */
double tranks_wait_metric(struct trank **rs, size_t n, const struct sd *d, const char *name,
			  enum th_cmp cmp, double want, unsigned timeout_ms);

/* Chunks [first, first + count) of an allreduce (sum, f32 or bf16) by n
 * ranks, pipelined as the client does: rank r sends chunk c into slot
 * c % window once the result of c - window is in. Slot s sends from
 * buf + s * stride and takes its result at buf + cap/2 + s * stride; rank
 * r contributes tranks_val(r, c, i, t) to element i of chunk c. Returns
 * the number of wrong elements, or -1 (why on stderr) if the run did not
 * complete within timeout_ms (scaled like every harness wait). */
struct trun {
	enum sc_dtype t; /* SC_F32 (0) or SC_BF16 */
	uint32_t window;
	size_t stride, len;
	uint32_t first, count;
	unsigned timeout_ms;
};
float tranks_val(uint32_t r, uint32_t c, size_t i, enum sc_dtype t);
long tranks_allreduce(struct trank *rk, uint32_t n, const struct trun *p);

/* Element i of an array of t: written from a small integer, read as a double. */
void th_put(enum sc_dtype t, void *p, size_t i, int v);
double th_get(enum sc_dtype t, const void *p, size_t i);

/* Two ranks of one job through the client library (client/client.h), as
 * the plugin drives it: sealing where the daemon has a key, multicast
 * where it offers it. */
struct client;
struct client_params;
struct tpair {
	struct client *c[2];
};
/* Both ranks joined to d (base: everything but rank, nranks and the
 * aggregator list). 0, or -1 after printing why. */
int tpair_up(struct tpair *p, const struct sd *d, const struct client_params *base);
/* One allreduce of count elements of t (rank 0 gives 1, rank 1 gives 2):
 * the number of elements that are not 3, or -1 if it failed. */
long tpair_allreduce(struct tpair *p, size_t count, enum sc_dtype t);
void tpair_down(struct tpair *p);

#endif
