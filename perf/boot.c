/* The acceptance run's bootstrap (boot.h). */
#include "boot.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef SUMCAST_PERF_MPI
#include <mpi.h>
#endif

#include "clock.h"
#include "hostport.h"

#define BOOT_MAGIC 0x53435042u /* "SCPB" */


/* The first of the variables that is set, as a number >= 0; -1: none. */
static long env_num(const char *const *names, const char **which)
{
	for (; *names; names++) {
		const char *v = getenv(*names);
		char *end;
		if (!v || !*v)
			continue;
		long n = strtol(v, &end, 10);
		if (*end || n < 0)
			continue;
		*which = *names;
		return n;
	}
	return -1;
}

static const char *const rank_vars[] = { "SUMCAST_PERF_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
					 "SLURM_PROCID", NULL };
static const char *const size_vars[] = { "SUMCAST_PERF_NRANKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
					 "SLURM_NTASKS", NULL };

/* Reads or writes exactly n bytes before the deadline. 0 or -1. */
static int io_all(int fd, void *buf, size_t n, bool wr, uint64_t deadline_ms)
{
	uint8_t *p = buf;

	while (n) {
		uint64_t now = sc_now_ms();
		if (now >= deadline_ms) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct pollfd q = { fd, wr ? POLLOUT : POLLIN, 0 };
		int rc = poll(&q, 1, (int)(deadline_ms - now));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0) {
			errno = rc ? errno : ETIMEDOUT;
			return -1;
		}
		ssize_t k = wr ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0) {
			errno = k ? errno : ECONNRESET;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static uint64_t deadline(const struct boot *b)
{
	return sc_now_ms() + (uint64_t)(b->timeout_s * 1000);
}

/* The rendezvous address: SUMCAST_PERF_RDV, else MASTER_ADDR:MASTER_PORT. */
static int rdv_addr(struct hostport *hp, char *err, size_t len)
{
	char buf[HOSTPORT_TEXT_MAX + 16], why[200];
	const char *v = getenv("SUMCAST_PERF_RDV");

	if (!v || !*v) {
		const char *a = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
		if (!a || !*a || !p || !*p) {
			say(err, len, "the launcher gave a rank and a size but no rendezvous address: set "
				      "SUMCAST_PERF_RDV=host:port (rank 0's host, a free port), or MASTER_ADDR "
				      "and MASTER_PORT, or use a build with MPI (docs/first-run.md)");
			return -1;
		}
		snprintf(buf, sizeof(buf), strchr(a, ':') ? "[%s]:%s" : "%s:%s", a, p);
		v = buf;
	}
	if (hostport_parse(v, hp, why, sizeof(why))) {
		say(err, len, "rendezvous address: %s", why);
		return -1;
	}
	return 0;
}

static int tcp_root(struct boot *b, const struct hostport *hp, char *err, size_t len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *ai = NULL;
	char port[8];
	int one = 1, lfd = -1, rc;

	snprintf(port, sizeof(port), "%u", hp->port);
	/* every address of the port: the others reach rank 0 by whatever name
	 * they were given for its host */
	rc = getaddrinfo(hostport_family(hp->host) == AF_INET6 ? "::" : NULL, port, &hints, &ai);
	if (rc) {
		say(err, len, "rendezvous: port %s: %s", port, gai_strerror(rc));
		return -1;
	}
	lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, 1024)) {
		say(err, len, "rendezvous: rank 0 cannot listen on port %s: %s", port, strerror(errno));
		freeaddrinfo(ai);
		if (lfd >= 0)
			close(lfd);
		return -1;
	}
	freeaddrinfo(ai);
	b->fds = calloc((size_t)b->size, sizeof(*b->fds));
	if (!b->fds) {
		close(lfd);
		say(err, len, "out of memory");
		return -1;
	}
	for (int r = 0; r < b->size; r++)
		b->fds[r] = -1;
	uint64_t end = deadline(b);
	for (int got = 1; got < b->size;) {
		struct pollfd q = { lfd, POLLIN, 0 };
		uint64_t now = sc_now_ms();
		if (now >= end || poll(&q, 1, (int)(end - now)) <= 0) {
			int missing = -1;
			for (int r = 1; r < b->size && missing < 0; r++)
				if (b->fds[r] < 0)
					missing = r;
			say(err, len, "rendezvous: %d of %d ranks arrived at port %s within %.0f s; rank %d "
				      "(and maybe others) never did", got, b->size, port, b->timeout_s, missing);
			close(lfd);
			return -1;
		}
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		uint32_t hello[3];
		if (io_all(fd, hello, sizeof(hello), false, sc_now_ms() + 10000) || hello[0] != BOOT_MAGIC) {
			close(fd); /* not one of ours */
			continue;
		}
		if (hello[2] != (uint32_t)b->size || hello[1] == 0 || hello[1] >= (uint32_t)b->size ||
		    b->fds[hello[1]] >= 0) {
			say(err, len, "rendezvous: a process says it is rank %u of %u; rank 0 is of %d%s", hello[1],
			    hello[2], b->size, hello[1] < (uint32_t)b->size && hello[1] && b->fds[hello[1]] >= 0
						       ? " and that rank is here already" : "");
			close(fd);
			close(lfd);
			return -1;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		b->fds[hello[1]] = fd;
		got++;
	}
	close(lfd);
	return 0;
}

static int tcp_leaf(struct boot *b, const struct hostport *hp, char *err, size_t len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	char port[8];
	uint64_t end = deadline(b);
	int one = 1, last = 0;

	snprintf(port, sizeof(port), "%u", hp->port);
	while (sc_now_ms() < end) {
		struct addrinfo *ai = NULL;
		int rc = getaddrinfo(hp->host, port, &hints, &ai);
		for (struct addrinfo *a = rc ? NULL : ai; a; a = a->ai_next) {
			int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd < 0)
				continue;
			if (!connect(fd, a->ai_addr, a->ai_addrlen)) {
				uint32_t hello[3] = { BOOT_MAGIC, (uint32_t)b->rank, (uint32_t)b->size };
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				if (!io_all(fd, hello, sizeof(hello), true, end)) {
					freeaddrinfo(ai);
					b->fd = fd;
					return 0;
				}
			}
			last = errno;
			close(fd);
		}
		if (ai)
			freeaddrinfo(ai);
		usleep(100000); /* rank 0 may not listen yet */
	}
	say(err, len, "rendezvous: rank %d could not reach rank 0 at %s within %.0f s (%s)", b->rank, hp->text,
	    b->timeout_s, last ? strerror(last) : "no address");
	return -1;
}

int boot_init(struct boot *b, int *argc, char ***argv, char *err, size_t errlen)
{
	const char *rv = NULL, *sv = NULL, *t = getenv("SUMCAST_PERF_BOOT_TIMEOUT");

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	b->timeout_s = t && atof(t) > 0 ? atof(t) : 120;
	long rank = env_num(rank_vars, &rv), size = env_num(size_vars, &sv);
#ifdef SUMCAST_PERF_MPI
	/* The launcher's own way when it gave us more than one process (a
	 * lone MPI process with the environment saying otherwise: srun
	 * without its MPI plugin; then the rendezvous, below). */
	int inited = 0;
	MPI_Initialized(&inited);
	if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS) {
		say(err, errlen, "MPI_Init failed");
		return -1;
	}
	b->mpi = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &b->size);
	if (b->size > 1 || size <= 1) {
		snprintf(b->how, sizeof(b->how), "MPI (%d rank%s)", b->size, b->size == 1 ? "" : "s");
		return 0;
	}
#else
	(void)argc;
	(void)argv;
#endif
	if (rank < 0 && size < 0) {
		b->rank = 0;
		b->size = 1;
		snprintf(b->how, sizeof(b->how), "one process (no launcher's rank in the environment)");
		return 0;
	}
	if (rank < 0 || size < 1 || rank >= size) {
		say(err, errlen, "the environment gives rank %ld (%s) of %ld (%s): not a rank of that many", rank,
		    rv ? rv : "no rank variable", size, sv ? sv : "no size variable");
		return -1;
	}
	b->rank = (int)rank;
	b->size = (int)size;
	if (b->size == 1) {
		snprintf(b->how, sizeof(b->how), "one process (%s = 1)", sv);
		return 0;
	}
	struct hostport hp;
	if (rdv_addr(&hp, err, errlen))
		return -1;
	snprintf(b->how, sizeof(b->how), "tcp rendezvous at %s (rank from %s, size from %s)", hp.text, rv, sv);
	return b->rank == 0 ? tcp_root(b, &hp, err, errlen) : tcp_leaf(b, &hp, err, errlen);
}

int boot_allgather(struct boot *b, const void *mine, size_t len, void *all)
{
	uint8_t *out = all;

	if (b->size == 1) {
		memmove(out, mine, len);
		return 0;
	}
#ifdef SUMCAST_PERF_MPI
	if (b->mpi && !b->fds && b->fd < 0)
		return MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, MPI_COMM_WORLD) ==
				       MPI_SUCCESS ? 0 : -1;
#endif
	uint64_t end = deadline(b);
	if (b->rank) {
		if (io_all(b->fd, (void *)mine, len, true, end) || io_all(b->fd, all, len * (size_t)b->size, false, end)) {
			fprintf(stderr, "sumcast-perf: rank %d: the rendezvous with rank 0 failed: %s\n", b->rank,
				strerror(errno));
			return -1;
		}
		return 0;
	}
	memmove(out, mine, len);
	for (int r = 1; r < b->size; r++)
		if (io_all(b->fds[r], out + (size_t)r * len, len, false, end)) {
			fprintf(stderr, "sumcast-perf: rank 0: rank %d did not answer the rendezvous: %s\n", r,
				strerror(errno));
			return -1;
		}
	for (int r = 1; r < b->size; r++)
		if (io_all(b->fds[r], out, len * (size_t)b->size, true, end)) {
			fprintf(stderr, "sumcast-perf: rank 0: sending to rank %d failed: %s\n", r, strerror(errno));
			return -1;
		}
	return 0;
}

int boot_barrier(struct boot *b)
{
	uint8_t one = 1, *all = malloc((size_t)b->size);
	int rc = all ? boot_allgather(b, &one, 1, all) : -1;

	free(all);
	return rc;
}

static int reduce(struct boot *b, double *v, size_t n, bool max)
{
	double *all = n <= 64 ? malloc(sizeof(double) * n * (size_t)b->size) : NULL;

	if (!all || boot_allgather(b, v, sizeof(double) * n, all)) {
		free(all);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		double x = all[i];
		for (int r = 1; r < b->size; r++) {
			double y = all[(size_t)r * n + i];
			x = max ? (y > x ? y : x) : x + y;
		}
		v[i] = x;
	}
	free(all);
	return 0;
}

int boot_max(struct boot *b, double *v, size_t n)
{
	return reduce(b, v, n, true);
}

int boot_sum(struct boot *b, double *v, size_t n)
{
	return reduce(b, v, n, false);
}

void boot_fini(struct boot *b)
{
	if (b->fd >= 0)
		close(b->fd);
	for (int r = 1; b->fds && r < b->size; r++)
		if (b->fds[r] >= 0)
			close(b->fds[r]);
	free(b->fds);
	b->fds = NULL;
	b->fd = -1;
#ifdef SUMCAST_PERF_MPI
	if (b->mpi) {
		int fin = 0;
		MPI_Finalized(&fin);
		if (!fin)
			MPI_Finalize();
	}
#endif
}
