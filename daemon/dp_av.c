/* The data thread's fabric address cache: one AV entry per distinct rank
 * address, reference counted, because several ranks and jobs may share one
 * client endpoint. A few entries per job: a linear scan, on the control
 * path only (ADD_RANK, the end of a job). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"

int dp_av_get(struct dthread *t, const uint8_t *addr, size_t len, fi_addr_t *out)
{
	for (size_t i = 0; i < t->naddrs; i++)
		if (t->addrs[i].len == len && !memcmp(t->addrs[i].addr, addr, len)) {
			t->addrs[i].refs++;
			*out = t->addrs[i].fa;
			return 0;
		}
	if (t->naddrs == t->addrs_cap) {
		size_t cap = t->addrs_cap ? 2 * t->addrs_cap : 16;
		struct addr_ref *n = realloc(t->addrs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		t->addrs = n;
		t->addrs_cap = cap;
	}
	struct addr_ref *a = &t->addrs[t->naddrs];
	int rc = fabric_av_insert(t->fabric, addr, len, &a->fa);
	if (rc)
		return rc;
	memcpy(a->addr, addr, len);
	a->len = len;
	a->refs = 1;
	t->naddrs++;
	*out = a->fa;
	return 0;
}

void dp_av_put(struct dthread *t, fi_addr_t fa)
{
	for (size_t i = 0; i < t->naddrs; i++)
		if (t->addrs[i].fa == fa) {
			if (--t->addrs[i].refs == 0) {
				fabric_av_remove(t->fabric, fa);
				t->addrs[i] = t->addrs[--t->naddrs];
			}
			return;
		}
}

uint32_t dp_av_refs(struct dthread *t, fi_addr_t fa)
{
	for (size_t i = 0; i < t->naddrs; i++)
		if (t->addrs[i].fa == fa)
			return t->addrs[i].refs;
	return 0;
}

void dp_av_fini(struct dthread *t)
{
	free(t->addrs);
	t->addrs = NULL;
}
