#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sumcastd_proc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fabric.h"
#include "wait.h"

const char *sc_daemon_binary(const char *fallback)
{
	const char *e = getenv("SUMCASTD");
	return e && *e ? e : fallback;
}

int sc_daemon_write_conf(const struct sc_daemon *d, const struct sc_daemon_opts *o)
{
	FILE *f = fopen(d->conf, "w");

	if (!f)
		return -1;
	fprintf(f, "[control]\n");
	if (o->listen)
		fprintf(f, "listen = %s\n", o->listen);
	fprintf(f, "port = %u\nport-file = %s\n%s", o->control_port, d->ports, o->control ? o->control : "");
	fprintf(f, "[http]\n");
	if (o->listen)
		fprintf(f, "listen = %s\n", o->listen);
	fprintf(f, "port = 0\n[fabric]\nprovider = %s\n", o->provider ? o->provider : "tcp");
	if (o->node)
		fprintf(f, "node = %s\n", o->node);
	fprintf(f, "%s\n", o->extra ? o->extra : "");
	return fclose(f);
}

/* 0 once the port file names a control port. */
static int read_ports(struct sc_daemon *d)
{
	FILE *f = fopen(d->ports, "r");
	unsigned c = 0, h = 0;
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "control=%u http=%u", &c, &h);
	fclose(f);
	if (n < 1 || !c)
		return -1;
	d->ctl = (uint16_t)c;
	d->http = n == 2 ? (uint16_t)h : 0;
	return 0;
}

static int path_in(char *out, size_t cap, const char *dir, const char *name, const char *ext)
{
	int n = snprintf(out, cap, "%s/%s.%s", dir, name, ext);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int sc_daemon_start(struct sc_daemon *d, const struct sc_daemon_opts *o)
{
	const char *name = o->name ? o->name : "sumcastd";
	uint64_t deadline;

	memset(d, 0, sizeof(*d));
	if (o->dir) {
		if (strlen(o->dir) >= sizeof(d->dir)) {
			fprintf(stderr, "sumcastd: folder name too long: %s\n", o->dir);
			return -1;
		}
		memcpy(d->dir, o->dir, strlen(o->dir) + 1);
	} else {
		snprintf(d->dir, sizeof(d->dir), "/tmp/sumcastd-test.XXXXXX");
		if (!mkdtemp(d->dir)) {
			perror("mkdtemp");
			d->dir[0] = 0;
			return -1;
		}
		d->own_dir = true;
	}
	if (path_in(d->conf, sizeof(d->conf), d->dir, name, "conf") ||
	    path_in(d->ports, sizeof(d->ports), d->dir, name, "ports") ||
	    (o->log && path_in(d->log, sizeof(d->log), d->dir, name, "log"))) {
		fprintf(stderr, "sumcastd: paths under %s too long\n", d->dir);
		return -1;
	}
	unlink(d->ports);
	if (sc_daemon_write_conf(d, o)) {
		fprintf(stderr, "sumcastd config %s: %s\n", d->conf, strerror(errno));
		return -1;
	}
	fflush(NULL);
	d->pid = fork();
	if (d->pid < 0) {
		perror("fork");
		d->pid = 0;
		return -1;
	}
	if (d->pid == 0) {
		if (o->pdeathsig)
			prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (*d->log) {
			int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd >= 0) {
				dup2(fd, 1);
				dup2(fd, 2);
				close(fd);
			}
		}
		if (o->wrapper && *o->wrapper) {
			char cmd[3 * PATH_MAX];
			snprintf(cmd, sizeof(cmd), "exec %s %s -c %s", o->wrapper, o->binary, d->conf);
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		} else {
			execl(o->binary, "sumcastd", "-c", d->conf, (char *)NULL);
		}
		fprintf(stderr, "exec %s: %s\n", o->binary, strerror(errno));
		_exit(127);
	}
	deadline = sc_now_ms() + (o->timeout_ms ? o->timeout_ms : 10000);
	for (;;) {
		if (!read_ports(d) && (!o->ready || o->ready(d, o->ready_arg)))
			return 0;
		if (waitpid(d->pid, &d->status, WNOHANG) == d->pid) {
			fprintf(stderr, "sumcastd (%s) exited before it was ready (status 0x%x)%s%s\n",
				o->binary, d->status, *d->log ? "; log " : "", d->log);
			sc_shm_sweep(d->pid);
			d->pid = 0;
			return SC_DAEMON_EXITED;
		}
		if (sc_now_ms() > deadline) {
			fprintf(stderr, "sumcastd (%s) was not ready within %u ms (port file %s)%s%s\n",
				o->binary, o->timeout_ms ? o->timeout_ms : 10000, d->ports,
				*d->log ? "; log " : "", d->log);
			return SC_DAEMON_TIMEOUT;
		}
		th_sleep_ms(5);
	}
}

void sc_shm_sweep(pid_t pid)
{
	fabric_shm_sweep(pid);
}

static int exit_code(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int sc_daemon_stop(struct sc_daemon *d, int sig, unsigned timeout_ms)
{
	uint64_t deadline = sc_now_ms() + timeout_ms;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, sig);
	while (sc_now_ms() < deadline) {
		if (waitpid(d->pid, &d->status, WNOHANG) == d->pid) {
			sc_shm_sweep(d->pid);
			d->pid = 0;
			return exit_code(d->status);
		}
		th_sleep_ms(10);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &d->status, 0);
	sc_shm_sweep(d->pid);
	d->pid = 0;
	return -1;
}

void sc_daemons_stop(struct sc_daemon *ds, size_t n, int sig, unsigned timeout_ms)
{
	uint64_t deadline = sc_now_ms() + timeout_ms;

	for (size_t i = 0; i < n; i++)
		if (ds[i].pid > 0)
			kill(ds[i].pid, sig);
	for (size_t i = 0; i < n; i++) {
		while (ds[i].pid > 0) {
			if (waitpid(ds[i].pid, &ds[i].status, WNOHANG) == ds[i].pid) {
				sc_shm_sweep(ds[i].pid);
				ds[i].pid = 0;
			} else if (sc_now_ms() > deadline) {
				fprintf(stderr, "sumcastd %zu (pid %d) did not stop on signal %d, killing\n", i,
					(int)ds[i].pid, sig);
				kill(ds[i].pid, SIGKILL);
				waitpid(ds[i].pid, &ds[i].status, 0);
				sc_shm_sweep(ds[i].pid);
				ds[i].pid = 0;
			} else {
				th_sleep_ms(10);
			}
		}
	}
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) ? -1 : 0;
}

void sc_daemon_cleanup(struct sc_daemon *d, bool keep)
{
	if (d->pid > 0)
		sc_daemon_stop(d, SIGKILL, 2000);
	if (keep || !*d->dir)
		return;
	if (d->own_dir) {
		if (nftw(d->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS))
			fprintf(stderr, "could not remove %s\n", d->dir);
	} else {
		unlink(d->conf);
		unlink(d->ports);
		if (*d->log)
			unlink(d->log);
	}
	d->dir[0] = 0;
}

int sc_http_get(uint16_t port, const char *path, char *ctype, size_t ccap, char *body, size_t cap,
		unsigned timeout_ms)
{
	return sc_http_get_at("127.0.0.1", port, path, ctype, ccap, body, cap, timeout_ms);
}

int sc_http_get_at(const char *host, uint16_t port, const char *path, char *ctype, size_t ccap,
		   char *body, size_t cap, unsigned timeout_ms)
{
	return sc_http_request_at(host, port, "GET", path, ctype, ccap, body, cap, timeout_ms);
}

int sc_http_request_at(const char *host, uint16_t port, const char *method, const char *path,
		       char *ctype, size_t ccap, char *body, size_t cap, unsigned timeout_ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	uint64_t deadline = sc_now_ms() + timeout_ms;
	size_t len = 0, bcap = 1 << 20;
	char req[512], *buf = NULL;
	int fd, status = -1, n;

	if (ctype && ccap)
		*ctype = 0;
	if (body && cap)
		*body = 0;
	n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: %s\r\n%s\r\n", method, path, host,
		     strcmp(method, "GET") && strcmp(method, "HEAD") ? "Content-Length: 0\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(req) || inet_pton(AF_INET, host, &a.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    write(fd, req, (size_t)n) != (ssize_t)n || !(buf = malloc(bcap)))
		goto out;
	/* HTTP/1.0: the answer ends where the server closes. */
	while (len < bcap - 1) {
		int64_t left = (int64_t)(deadline - sc_now_ms());
		struct pollfd p = { fd, POLLIN, 0 };
		if (left <= 0)
			break;
		int k = poll(&p, 1, (int)left);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		ssize_t r = read(fd, buf + len, bcap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = 0;
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		status = -1;
	char *b = strstr(buf, "\r\n\r\n");
	if (ctype && ccap) {
		char *h = strcasestr(buf, "\r\nContent-Type:");
		if (h && (!b || h < b)) {
			h += strlen("\r\nContent-Type:");
			h += strspn(h, " ");
			snprintf(ctype, ccap, "%.*s", (int)strcspn(h, "\r\n"), h);
		}
	}
	if (body && cap)
		snprintf(body, cap, "%s", b ? b + 4 : "");
out:
	free(buf);
	close(fd);
	return status;
}

double sc_metric_value(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return NAN;
}
