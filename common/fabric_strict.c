/* The fabric layer's strict mode (fabric_strict.h). */
#include "fabric_strict.h"

#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

_Static_assert(offsetof(struct fabric_op, fi) == 0 && sizeof(struct fabric_op) >= sizeof(struct fi_context2),
	       "every posted context has the room FI_CONTEXT2 asks, at its start");

static void fail_default(const char *msg)
{
	void *frames[32];
	int n = backtrace(frames, 32);

	SC_ERR("fabric strict mode: %s", msg);
	fprintf(stderr, "fabric strict mode: %s; where:\n", msg);
	backtrace_symbols_fd(frames, n, 2);
	abort();
}

void (*fabric_strict_fail)(const char *msg) = fail_default;

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fabric_strict_fail(msg);
}

enum fabric_strict_level fabric_strict_level(void)
{
	static int level = -1;

	if (level < 0) {
		const char *v = getenv("SUMCAST_FABRIC_STRICT");
		level = !v || !*v || !strcmp(v, "0") || !strcmp(v, "off") ? FABRIC_STRICT_OFF
			: !strcmp(v, "efa")				     ? FABRIC_STRICT_EFA
									     : FABRIC_STRICT_RDMA;
	}
	return (enum fabric_strict_level)level;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- live registrations ---- */

struct reg {
	const void *domain;
	uintptr_t lo, hi;
	const void *desc;
	const void *fid; /* the registration (struct fabric_mr is copied by value) */
};
static struct reg *regs;
static size_t nregs, capregs;

/* ---- operations in flight: an open-addressing table keyed by context ---- */

struct flight {
	const struct fabric_op *op; /* NULL: empty */
	const struct fabric *f;
	const void *domain;
	uintptr_t lo, hi;
};
static struct flight *fl;
static size_t capfl, nfl;

static size_t slot_of(const struct fabric_op *op, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)op * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 20) & (cap - 1);
}

static struct flight *fl_find(const struct fabric_op *op)
{
	if (!capfl)
		return NULL;
	for (size_t i = slot_of(op, capfl);; i = (i + 1) & (capfl - 1)) {
		if (!fl[i].op)
			return NULL;
		if (fl[i].op == op)
			return &fl[i];
	}
}

static void fl_put(const struct flight *x);

static void fl_grow(void)
{
	struct flight *old = fl;
	size_t oldcap = capfl;

	capfl = capfl ? 2 * capfl : 1024;
	fl = calloc(capfl, sizeof(*fl));
	if (!fl) {
		fail_default("out of memory for the table of operations in flight");
		return;
	}
	nfl = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].op)
			fl_put(&old[i]);
	free(old);
}

static void fl_put(const struct flight *x)
{
	if (2 * (nfl + 1) > capfl)
		fl_grow();
	size_t i = slot_of(x->op, capfl);
	while (fl[i].op)
		i = (i + 1) & (capfl - 1);
	fl[i] = *x;
	nfl++;
}

/* Removes the entry at e (backward shift: no tombstones). */
static void fl_del(struct flight *e)
{
	size_t i = (size_t)(e - fl), j = i;

	fl[i].op = NULL;
	nfl--;
	for (;;) {
		j = (j + 1) & (capfl - 1);
		if (!fl[j].op)
			return;
		size_t k = slot_of(fl[j].op, capfl);
		/* fl[j] may move to i when its home k is not in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			fl[i] = fl[j];
			fl[j].op = NULL;
			i = j;
		}
	}
}

/* ---- hooks ---- */

void fabric_strict_opened(struct fabric *f)
{
	if (!fabric_strict_level())
		return;
	/* the descriptor paths, as on verbs and efa */
	f->mr_local = true;
	if (fabric_strict_level() == FABRIC_STRICT_EFA && f->inject_size > FABRIC_STRICT_EFA_INJECT)
		f->inject_size = FABRIC_STRICT_EFA_INJECT;
	SC_INFO("fabric strict mode (%s) on %s: descriptors, registrations, contexts, inject %zu and "
		"message sizes checked", fabric_strict_level() == FABRIC_STRICT_EFA ? "efa's limits" : "rdma",
		f->prov_name, f->inject_size);
}

void fabric_strict_closed(const struct fabric *f)
{
	if (!fabric_strict_level())
		return;
	pthread_mutex_lock(&mu);
	/* closing an endpoint ends what was posted on it: no completion comes */
	for (size_t i = 0; i < capfl;) {
		if (fl[i].op && fl[i].f == f) {
			fl_del(&fl[i]); /* what shifted into i is looked at again */
			continue;
		}
		i++;
	}
	pthread_mutex_unlock(&mu);
}

void fabric_strict_mr_reg(const struct fabric *f, const void *buf, size_t len, const struct fabric_mr *mr)
{
	if (!fabric_strict_level())
		return;
	/* FI_MR_ALLOCATED: only memory that is mapped */
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)buf & ~(uintptr_t)(page - 1), hi = (uintptr_t)buf + len;
	if (!buf || msync((void *)lo, hi - lo, MS_ASYNC))
		violation("registration of %zu bytes at %p on %s: not allocated memory (%s; FI_MR_ALLOCATED)", len,
			  buf, f->prov_name, buf ? strerror(errno) : "NULL");
	pthread_mutex_lock(&mu);
	if (nregs == capregs) {
		capregs = capregs ? 2 * capregs : 64;
		regs = realloc(regs, capregs * sizeof(*regs));
		if (!regs)
			fail_default("out of memory for the table of registrations");
	}
	regs[nregs++] = (struct reg){ f->domain, (uintptr_t)buf, (uintptr_t)buf + len, mr->desc, mr->mr };
	pthread_mutex_unlock(&mu);
}

void fabric_strict_mr_dereg(const struct fabric_mr *mr)
{
	if (!fabric_strict_level())
		return;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < nregs; i++) {
		if (regs[i].fid != mr->mr)
			continue;
		struct reg r = regs[i];
		regs[i] = regs[--nregs];
		/* the memory of an operation in flight must stay registered */
		for (size_t k = 0; k < capfl; k++)
			if (fl[k].op && fl[k].domain == r.domain && fl[k].lo < fl[k].hi && fl[k].lo < r.hi &&
			    r.lo < fl[k].hi) {
				const struct flight x = fl[k];
				pthread_mutex_unlock(&mu);
				violation("registration [%p, +%zu) closed while an operation posted on %s still covers "
					  "[%p, +%zu)", (void *)r.lo, (size_t)(r.hi - r.lo), x.f->prov_name, (void *)x.lo,
					  (size_t)(x.hi - x.lo));
				return;
			}
		break;
	}
	pthread_mutex_unlock(&mu);
}

void fabric_strict_post(const struct fabric *f, const char *what, const void *buf, size_t len, const void *desc,
			const struct fabric_op *op)
{
	if (!fabric_strict_level())
		return;
	if (!op) {
		violation("%s of %zu bytes on %s without a context", what, len, f->prov_name);
		return;
	}
	size_t max = f->info && f->info->ep_attr ? f->info->ep_attr->max_msg_size : 0;
	if (max && len > max)
		violation("%s of %zu bytes on %s: above max_msg_size %zu", what, len, f->prov_name, max);
	pthread_mutex_lock(&mu);
	if (fl_find(op)) {
		pthread_mutex_unlock(&mu);
		violation("%s on %s: its context %p is still posted (a context reused before its completion)", what,
			  f->prov_name, (const void *)op);
		return;
	}
	/* in flight from now: another thread may read its completion before
	 * the post returns (fabric_strict_unpost when it fails) */
	struct flight x = { op, f, f->domain, (uintptr_t)buf, (uintptr_t)buf + (buf ? len : 0) };
	fl_put(&x);
	if (buf && len) {
		const struct reg *hit = NULL;
		bool other = false;
		for (size_t i = 0; i < nregs && !hit; i++) {
			if (regs[i].domain != f->domain || regs[i].lo > (uintptr_t)buf ||
			    (uintptr_t)buf + len > regs[i].hi)
				continue;
			if (regs[i].desc == desc)
				hit = &regs[i];
			else
				other = true;
		}
		pthread_mutex_unlock(&mu);
		if (!hit)
			violation("%s of %zu bytes at %p on %s: %s", what, len, buf, f->prov_name,
				  !desc ? "no descriptor (FI_MR_LOCAL: a registered buffer's descriptor)"
				  : other ? "its descriptor is not the registration's that covers it"
					  : "no live registration on this domain covers it with that descriptor");
		return;
	}
	pthread_mutex_unlock(&mu);
}

/* op is no longer in flight; whether it was. */
static bool forget(const struct fabric_op *op)
{
	pthread_mutex_lock(&mu);
	struct flight *e = fl_find(op);
	if (e)
		fl_del(e);
	pthread_mutex_unlock(&mu);
	return e != NULL;
}

void fabric_strict_unpost(const struct fabric_op *op)
{
	if (fabric_strict_level())
		forget(op);
}

void fabric_strict_inject(const struct fabric *f, const void *buf, size_t len)
{
	if (!fabric_strict_level())
		return;
	if (len > f->inject_size)
		violation("inject of %zu bytes on %s: above inject_size %zu", len, f->prov_name, f->inject_size);
	if (len && !buf)
		violation("inject of %zu bytes on %s from NULL", len, f->prov_name);
}

void fabric_strict_done(const struct fabric *f, const struct fabric_op *op)
{
	if (!fabric_strict_level() || !op)
		return;
	if (!forget(op))
		violation("a completion on %s for context %p, which was not posted (or completed twice)", f->prov_name,
			  (const void *)op);
}
