/* libFuzzer target: sumcastd's HTTP listener as it runs (daemon/http.c):
 * the real evhttp with the daemon's limits, the connection cap and its
 * close callbacks, and the four routes over a daemon state with a job.
 * Input = the bytes one client sends on a loopback connection, then it
 * shuts its side. Whatever comes back must be an HTTP status line, and
 * every connection must be counted closed again (sumcast_http_connections
 * back to 0: a missed close callback would shut the listener for good at
 * the cap). */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "http.h"
#include "job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct daemon d;

static void setup(void)
{
	struct cfg_error err;

	if (settings_load(&d.cfg, NULL, d.cfg_src, &err))
		abort();
	d.cfg.http_port = 0;
	d.cfg.http_max_connections = 4;
	/* An input that is a loopback POST /drain starts the drain (ctl_main.c):
	 * the one job here (no connections) then waits for ranks that never
	 * leave, longer than any run, and the later inputs see a draining
	 * daemon, which is fine. */
	d.cfg.drain_timeout_ms = 600000;
	d.loaded = d.cfg;
	d.base = event_base_new();
	d.ready = true;
	/* One data thread (not running) and one job with two ranks, so that
	 * /stats and /metrics print a job. */
	d.threads = calloc(1, sizeof(*d.threads));
	struct job *j = calloc(1, sizeof(*j) + 2 * sizeof(struct job_rank));
	if (!d.base || !d.threads || !j)
		abort();
	d.nthreads = 1;
	j->id = 0x42;
	j->handle = 1;
	j->nranks = 2;
	j->window = 4;
	j->chunk = 65536;
	j->state = JOB_READY;
	j->thread = &d.threads[0];
	j->ranks[0].state = RANK_JOINED;
	j->ranks[1].state = RANK_LEFT;
	SLIST_INSERT_HEAD(&d.jobs, j, link);
	if (http_start(&d))
		abort();
}

static int client_open(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(d.http_port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		abort();
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* Runs the loop until fd reads EOF (the server closed) or 5 s. Returns
 * the first bytes of the answer in head. */
static size_t exchange(int fd, const uint8_t *data, size_t size, char *head, size_t cap)
{
	size_t sent = 0, got = 0;
	bool shut = false, eof = false;
	uint64_t end = sc_now_ms() + 5000;

	while (!eof && sc_now_ms() < end) {
		if (sent < size) {
			ssize_t w = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN)
				sent = size; /* the server closed on us */
		}
		if (sent == size && !shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
		event_base_loop(d.base, EVLOOP_NONBLOCK);
		char b[4096];
		ssize_t r;
		while ((r = read(fd, b, sizeof(b))) > 0) {
			size_t n = (size_t)r;
			if (got < cap) {
				size_t k = n < cap - got ? n : cap - got;
				memcpy(head + got, b, k);
			}
			got += n;
		}
		if (r == 0 || (r < 0 && errno != EAGAIN))
			eof = true;
		else {
			struct pollfd p = { fd, POLLIN, 0 };
			poll(&p, 1, 1);
		}
	}
	assert(eof); /* evhttp must end every connection once the client has */
	return got;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	char head[32];

	if (!ready) {
		setup();
		ready = true;
	}
	int fd = client_open();
	size_t got = exchange(fd, data, size, head, sizeof(head));
	close(fd);
	/* Whatever came back starts with a status line ("HTTP/x.y NNN";
	 * evhttp answers in the version the request named). */
	if (got) {
		char line[sizeof(head) + 1];
		int major, minor, status = 0;
		size_t n = got < sizeof(head) ? got : sizeof(head);
		memcpy(line, head, n);
		line[n] = 0;
		if (sscanf(line, "HTTP/%d.%d %3d", &major, &minor, &status) != 3 || status < 100 ||
		    status > 599) {
			fprintf(stderr, "answer of %zu bytes starts \"%s\"\n", got, line);
			abort();
		}
	}
	/* The close is seen: nothing is left open. */
	uint64_t end = sc_now_ms() + 2000;
	while (d.http_conns && sc_now_ms() < end)
		event_base_loop(d.base, EVLOOP_NONBLOCK);
	assert(d.http_conns == 0);
	assert(!d.http_capped);
	return 0;
}
