/* libFuzzer target: sumcastd's control plane as it runs: the control
 * listener, connections (framing, dispatch, refusals, closes), admission,
 * the job lifecycle and a real data thread (tcp;ofi_rxm on loopback) that
 * adds the ranks' addresses and posts their receives, all in this process.
 *
 * Input = records for up to four client connections:
 *   [u8 c][u16 len, little endian][len bytes]
 * c & 3 names the connection (opened on first use; what the daemon sends,
 * HELLO included, is read and dropped), the bytes are written to it, and
 * with c & 0x80 the connection is closed afterwards. After each record the
 * event loop runs until the daemon is quiet. So one input is a sequence of
 * messages on each connection, interleaved over several: JOINs of one job
 * from several ranks, READY, LEAVE, PING, and whatever the bytes say.
 *
 * At the end every connection is closed and the daemon must come back to
 * nothing: no connection, no job, no memory charged. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "ctl_api.h"
#include "daemon.h"
#include "dp_api.h"
#include "job.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NCONN 4

static struct daemon d;
static int cfd[NCONN];

static void setup(void)
{
	struct cfg_error err;

	/* FUZZ_CONTROL_LOG=1: the daemon's log at debug level (to look at
	 * what a seed reaches). */
	sc_log_set_level(getenv("FUZZ_CONTROL_LOG") ? SC_LOG_DEBUG : SC_LOG_ERROR);
	if (settings_load(&d.cfg, NULL, d.cfg_src, &err))
		abort();
	snprintf(d.cfg.provider, sizeof(d.cfg.provider), "tcp;ofi_rxm");
	d.cfg.control_port = 0;
	d.cfg.http_enabled = false;
	/* Small jobs: an input may create a few. */
	d.cfg.memory_budget = 8u << 20;
	d.cfg.max_memory_share = 1;
	d.cfg.max_window = 4;
	d.cfg.max_chunk = 64u << 10;
	d.cfg.max_inflight = 64u << 20;
	d.cfg.min_chunk = 16u << 10;
	d.cfg.max_jobs = 4;
	/* The data thread answers at once (the commands come one after another). */
	d.cfg.idle_spin_us = 2000;
	d.cfg.idle_sleep_us = 20;
	d.loaded = d.cfg;
	d.base = event_base_new();
	d.threads = calloc(1, sizeof(*d.threads));
	if (!d.base || !d.threads || evq_init(&d.evq))
		abort();
	if (dthread_start(&d.threads[0], 0, -1, &d.cfg, &d.evq))
		abort();
	d.nthreads = 1;
	snprintf(d.provider, sizeof(d.provider), "%s", fabric_provider(d.threads[0].fabric));
	if (control_start(&d))
		abort();
	d.ready = true;
	for (int i = 0; i < NCONN; i++)
		cfd[i] = -1;
}

static int client_open(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(d.control_port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		abort();
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* Waiting on the data thread: a rank being added, a job being removed. */
static bool data_thread_busy(void)
{
	for (const struct job *j = SLIST_FIRST(&d.jobs); j; j = SLIST_NEXT(j, link)) {
		if (j->state == JOB_ENDING)
			return true;
		for (uint32_t r = 0; r < j->nranks; r++)
			if (j->ranks[r].state == RANK_ADDING)
				return true;
	}
	return false;
}

/* Runs the loop and drains the clients until a few passes move nothing
 * and the data thread owes no answer (bounded). Loopback delivers what a
 * client writes before send() returns, so quiet passes mean quiet. */
static void settle(unsigned ms)
{
	uint64_t end = sc_now_ms() + ms;
	int quiet = 0;

	while (sc_now_ms() < end) {
		bool moved = false;
		event_base_loop(d.base, EVLOOP_NONBLOCK);
		for (int i = 0; i < NCONN; i++) {
			char b[4096];
			while (cfd[i] >= 0 && read(cfd[i], b, sizeof(b)) > 0)
				moved = true;
		}
		if (data_thread_busy()) {
			struct pollfd p = { d.evq.efd, POLLIN, 0 };
			poll(&p, 1, 1);
			quiet = 0;
		} else if (moved) {
			quiet = 0;
		} else if (++quiet >= 3) {
			return;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	size_t off = 0;

	if (!ready) {
		setup();
		ready = true;
	}
	/* The daemon is empty (checked at the end of every input): handles
	 * start at 1 again, so a seed's LEAVE names the job it joined. */
	d.next_handle = 1;
	while (off + 3 <= size) {
		unsigned c = data[off];
		size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
		off += 3;
		if (len > size - off)
			len = size - off;
		int i = (int)(c & (NCONN - 1));
		if (cfd[i] < 0) {
			cfd[i] = client_open();
			settle(200); /* accepted, HELLO read */
		}
		size_t sent = 0;
		uint64_t end = sc_now_ms() + 2000;
		while (sent < len && sc_now_ms() < end) {
			ssize_t w = send(cfd[i], data + off + sent, len - sent, MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN)
				break; /* closed by the daemon */
			event_base_loop(d.base, EVLOOP_NONBLOCK);
		}
		off += len;
		if (c & 0x80) {
			close(cfd[i]);
			cfd[i] = -1;
		}
		settle(500);
	}
	for (int i = 0; i < NCONN; i++)
		if (cfd[i] >= 0) {
			close(cfd[i]);
			cfd[i] = -1;
		}
	/* Back to nothing. */
	uint64_t end = sc_now_ms() + 5000;
	while ((d.nconns || !SLIST_EMPTY(&d.jobs)) && sc_now_ms() < end)
		settle(50);
	if (d.nconns || !SLIST_EMPTY(&d.jobs) || d.mem_used || d.njobs_live) {
		fprintf(stderr, "left over: %u connections, jobs %p (%u live), %llu bytes charged\n", d.nconns,
			(void *)SLIST_FIRST(&d.jobs), d.njobs_live, (unsigned long long)d.mem_used);
		abort();
	}
	return 0;
}
