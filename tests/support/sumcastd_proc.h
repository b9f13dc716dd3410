/* One way to run the real sumcastd from tests and benchmarks: writes a
 * config with ephemeral ports and a port file, forks + execs the daemon
 * (optionally through a shell wrapper, with its output in a log file, dying
 * with its parent), waits (bounded) for the port file "control=<port>
 * http=<port>" and stops it with a signal and a bounded wait. */
#ifndef SUMCASTD_PROC_H
#define SUMCASTD_PROC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sc_daemon;

struct sc_daemon_opts {
	const char *binary;   /* the sumcastd to run (see sc_daemon_binary) */
	const char *provider; /* [fabric] provider; NULL: "tcp" */
	const char *node;     /* [fabric] node; NULL: not written */
	const char *listen;   /* [control] and [http] listen; NULL: not written */
	const char *control;  /* extra lines inside [control]; may be NULL */
	uint16_t control_port; /* 0: a free one (the port file says which) */
	const char *extra;    /* INI text appended (may hold sections); may be NULL */
	const char *dir;      /* folder for the files; NULL: a new /tmp/sumcastd-test.XXXXXX */
	const char *name;     /* file stem in dir: <name>.conf, .ports, .log; NULL: "sumcastd" */
	bool log;             /* stdout+stderr into <dir>/<name>.log; false: inherited */
	const char *wrapper;  /* run "exec WRAPPER BINARY -c CONF" through /bin/sh; may be NULL */
	bool pdeathsig;       /* SIGKILL the daemon when the starting thread dies */
	unsigned timeout_ms;  /* how long to wait for readiness; 0: 10 s */
	/* Readiness beyond a control port in the port file (e.g. /healthz
	 * answering); called with ctl/http filled in. NULL: the port is enough. */
	bool (*ready)(const struct sc_daemon *d, void *arg);
	void *ready_arg;
};

struct sc_daemon {
	pid_t pid;      /* 0 once it has been reaped */
	int status;     /* wait status once reaped */
	uint16_t ctl, http;
	bool own_dir;   /* dir was made by sc_daemon_start */
	char dir[PATH_MAX];
	char conf[PATH_MAX], ports[PATH_MAX], log[PATH_MAX]; /* log: "" when inherited */
};

#define SC_DAEMON_EXITED (-2)   /* sc_daemon_start: it exited before it was ready */
#define SC_DAEMON_TIMEOUT (-3)  /* sc_daemon_start: not ready in time, still running */

/* $SUMCASTD if set and non-empty, else fallback. */
const char *sc_daemon_binary(const char *fallback);
/* (Re)writes d->conf from o (the config sc_daemon_start writes). 0 or -1. */
int sc_daemon_write_conf(const struct sc_daemon *d, const struct sc_daemon_opts *o);
/* Fills d, writes the config, starts the daemon and waits until it is ready.
 * 0; -1 (setup failed), SC_DAEMON_EXITED (d->status, d->pid = 0) or
 * SC_DAEMON_TIMEOUT (d->pid still running), each after a line on stderr. */
int sc_daemon_start(struct sc_daemon *d, const struct sc_daemon_opts *o);
/* Sends sig (0: none, just waits) and waits up to timeout_ms; returns the exit
 * status, 128 + signal if killed by one, or -1 on timeout (then SIGKILL and
 * reaped) or when it is not running. */
int sc_daemon_stop(struct sc_daemon *d, int sig, unsigned timeout_ms);
/* The same for n daemons at once (signals all, then one deadline); says on
 * stderr which ones needed SIGKILL. */
void sc_daemons_stop(struct sc_daemon *ds, size_t n, int sig, unsigned timeout_ms);
/* SIGKILLs it if still running; unless keep, removes the files it wrote
 * (and the folder with all in it when it made the folder). */
void sc_daemon_cleanup(struct sc_daemon *d, bool keep);
/* Removes what libfabric's shm provider left in /dev/shm for a process that
 * is gone (its endpoints' regions, "<pid>:..."; 16 MiB each): one killed or
 * _exit()ed never unlinks them (fabric_shm_sweep, common/fabric.h; a process
 * removes its own pid's itself before its first shm endpoint, this frees
 * the space at once). Call only for a reaped child. */
void sc_shm_sweep(pid_t pid);

/* GET path from 127.0.0.1:port (HTTP/1.0), the whole exchange bounded by
 * timeout_ms. Returns the status, or -1 when nothing usable came back. body
 * gets the body (NUL-terminated, cut at cap), ctype the Content-Type value;
 * either may be NULL. */
int sc_http_get(uint16_t port, const char *path, char *ctype, size_t ccap, char *body, size_t cap,
		unsigned timeout_ms);
/* The same from host (an IPv4 literal). */
int sc_http_get_at(const char *host, uint16_t port, const char *path, char *ctype, size_t ccap,
		   char *body, size_t cap, unsigned timeout_ms);
/* The same with another method (a body-less POST carries Content-Length: 0). */
int sc_http_request_at(const char *host, uint16_t port, const char *method, const char *path,
		       char *ctype, size_t ccap, char *body, size_t cap, unsigned timeout_ms);
/* The value of the line "name value" of a Prometheus text (name may carry
 * {labels}); NAN when there is none. */
double sc_metric_value(const char *text, const char *name);

#endif
