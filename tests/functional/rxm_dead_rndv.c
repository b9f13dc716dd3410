/* What libfabric's rxm does with a message of a peer that died before the
 * receive for it was posted, over tcp;ofi_rxm on 127.0.0.1.
 *
 * A receiver opens an endpoint; a sender process sends it one tagged
 * message, sees the send complete, and is killed (SIGKILL). The receiver
 * drives its progress (rxm takes the connection's shutdown and frees it),
 * then posts the matching receive:
 *
 *   - eager (1 KiB, under the eager limit): the bytes are in the receiver's
 *     buffers already; the receive must complete with them intact.
 *   - rendezvous (1 MiB): only the request to send is there; rxm 1.17 and
 *     2.6 look for the sender's connection to fetch the data, find it gone,
 *     and the receiver segfaults inside fi_trecv (a NULL read), with or
 *     without FI_SOURCE.
 *
 * Each case runs in a process of its own. The second is libfabric's
 * defect, which Sumcast cannot catch: a node that dies mid-collective can
 * crash the ring neighbour that posts the next receive (docs/plugin.md, "A
 * node that dies"), so the harness's node fault kills its victim at rest.
 * This test fails when the library in use no longer behaves so, as that
 * page and the harness then say something false. Exit 77: no tcp;ofi_rxm. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "fabric.h"

#define TAG 0x5ca1ab1eull

static const struct fabric_params params = { .provider = "tcp;ofi_rxm", .node = "127.0.0.1" };

static int poll_until(struct fabric *f, struct fabric_cqe *c, uint64_t ms)
{
	uint64_t end = sc_now_ns() + ms * 1000000ull;

	while (sc_now_ns() < end) {
		int n = fabric_cq_poll(f, c, 1);
		if (n)
			return n;
	}
	return 0;
}

static void fill(uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)(i * 131 + 7);
}

/* The sender: one message to addr, then SIGKILL once it completed. */
static void sender(const uint8_t *addr, size_t addrlen, size_t len, int ready)
{
	struct fabric *f;
	fi_addr_t to;
	struct fabric_buf b = { 0 };
	struct fabric_op op = { 0 };
	struct fabric_cqe c;
	int rc = -1;

	if (fabric_open(&params, &f) || fabric_av_insert(f, addr, addrlen, &to) || fabric_buf_alloc(f, len, &b))
		_exit(3);
	fill(b.buf, len);
	for (int i = 0; i < 1000000; i++) {
		rc = fabric_tsend(f, b.buf, len, b.mr.desc, to, TAG, 0, &op);
		if (rc != -FI_EAGAIN)
			break;
		fabric_cq_poll(f, &c, 1);
	}
	/* a rendezvous send completes once the receiver fetched the data,
	 * which it does not before the receive: wait for the request only */
	if (rc || (len <= 4096 && (poll_until(f, &c, 5000) != 1 || c.err)))
		_exit(4);
	poll_until(f, &c, 300); /* the request leaves */
	if (write(ready, "k", 1) != 1)
		_exit(5);
	raise(SIGKILL);
	_exit(6);
}

/* How far the receiver came, in memory its parent shares. */
enum stage { S_START, S_POSTING, S_POSTED, S_INTACT };
static volatile int *stage;

/* The receiver: 0 when the message arrived intact, 1 when it did not. */
static int receiver(size_t len)
{
	struct fabric *f;
	struct fabric_buf b = { 0 };
	struct fabric_op op = { 0 };
	struct fabric_cqe c;
	int p[2];
	char k;

	if (fabric_open(&params, &f) || fabric_buf_alloc(f, len, &b) || pipe(p))
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		sender(f->addr, f->addrlen, len, p[1]);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	/* progress while the message arrives unexpected, then the death */
	for (uint64_t end = sc_now_ns() + 5000000000ull; sc_now_ns() < end;) {
		fabric_cq_poll(f, &c, 1);
		if (read(p[0], &k, 1) == 1)
			break;
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
		fprintf(stderr, "the sender did not end as planned (status 0x%x)\n", st);
		return 1;
	}
	poll_until(f, &c, 500); /* rxm takes the shutdown */
	*stage = S_POSTING;
	if (fabric_trecv(f, b.buf, len, b.mr.desc, FI_ADDR_UNSPEC, TAG, 0, &op))
		return 1;
	*stage = S_POSTED;
	if (poll_until(f, &c, 3000) != 1 || c.err || c.len != len) {
		fprintf(stderr, "no intact completion (err %d, %zu bytes)\n", c.err, c.len);
		return 1;
	}
	uint8_t *want = malloc(len);
	fill(want, len);
	int bad = memcmp(want, b.buf, len) != 0;
	free(want);
	if (!bad)
		*stage = S_INTACT;
	return bad;
}

/* The receiver, in a process of its own: how far it came. A process that
 * ends while posting died inside fi_trecv: by SIGSEGV, or by the handler
 * libpsm2 (loaded by libfabric 1.17's psm providers) installs for it,
 * which prints a backtrace and exits 1. */
static enum stage run(size_t len)
{
	*stage = S_START;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		_exit(receiver(len));
	int st;
	for (int i = 0; i < 300; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return (enum stage)*stage;
		usleep(50 * 1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return S_START;
}

int main(void)
{
	char v[64];
	struct fabric *probe;

	if (fabric_open(&params, &probe)) {
		printf("SKIP: no tcp;ofi_rxm here\n");
		return 77;
	}
	fabric_close(probe);
	fabric_lib_version(v, sizeof(v));
	stage = mmap(NULL, sizeof(*stage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stage == MAP_FAILED)
		return 1;
	enum stage eager = run(1024), rndv = run(1 << 20);
	static const char *const said[] = { "the receiver failed before posting",
					    "the receive crashed inside fi_trecv",
					    "the receive was posted, no intact message", "received intact" };
	printf("%s: eager message of a dead peer: %s; rendezvous message: %s\n", v, said[eager],
	       said[rndv]);
	if (eager != S_INTACT) {
		printf("FAIL: an eager message of a dead peer was lost\n");
		return 1;
	}
	if (rndv != S_POSTING) {
		printf("FAIL: %s no longer crashes on a dead peer's rendezvous message: "
		       "docs/plugin.md (\"A node that dies\") and the harness's node fault "
		       "(tests/plugin/harness_fault.c) say it does\n", v);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
