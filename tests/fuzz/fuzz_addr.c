/* libFuzzer target: a fabric address as a JOIN carries it
 * (fabric_addr_check), against real address vectors: tcp;ofi_rxm on
 * 127.0.0.1 and shm. Input: one byte choosing the endpoint (bit 0: shm),
 * then the address. Whatever the bytes: the check reads only them and
 * gives a reason when it refuses; an address it accepts goes into the AV
 * (on tcp it must be taken); and the AV still takes a good address
 * afterwards. libfabric 1.17's util AV was left refusing every insert by
 * one address of an unknown family, which the daemon inserted unchecked. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fabric *ep_open(const char *prov)
{
	struct fabric_params p = { .provider = prov, .node = strcmp(prov, "shm") ? "127.0.0.1" : NULL };
	struct fabric *f = NULL;

	if (fabric_open(&p, &f))
		abort();
	return f;
}

/* per provider: the endpoint whose AV takes the input, and a peer whose
 * (good) address must go in after it */
static struct fabric *eps[2][2];

/* At exit (libFuzzer's end of -max_total_time, the replay's end): the
 * endpoints closed, so that shm's regions (/dev/shm/<pid>:*) go with them
 * instead of staying behind a process that is gone. */
static void eps_close(void)
{
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 2; i++)
			if (eps[k][i])
				fabric_close(eps[k][i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;
	fi_addr_t a;

	if (size < 1)
		return 0;
	unsigned k = data[0] & 1;
	if (!eps[k][0]) {
		if (!eps[!k][0])
			atexit(eps_close);
		eps[k][0] = ep_open(k ? "shm" : "tcp;ofi_rxm");
		eps[k][1] = ep_open(k ? "shm" : "tcp;ofi_rxm");
	}
	struct fabric *f = eps[k][0], *good = eps[k][1];
	/* a copy of exactly the input's length: a read past it is caught */
	size_t len = size - 1;
	uint8_t *addr = malloc(len ? len : 1);
	assert(addr);
	memcpy(addr, data + 1, len);
	if (fabric_addr_check(f, addr, len, &why) == 0) {
		int rc = fabric_av_insert(f, addr, len, &a);
		assert(k || rc == 0);
		if (rc == 0)
			fabric_av_remove(f, a);
	} else {
		assert(why && *why);
	}
	free(addr);
	assert(fabric_av_insert(f, good->addr, good->addrlen, &a) == 0);
	fabric_av_remove(f, a);
	return 0;
}
