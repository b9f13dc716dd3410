/* The thin libfabric wrapper (fabric.h): endpoints, registration, tagged I/O, completions. */
#include "fabric.h"
#include "fabric_strict.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <poll.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric_env.h"
#include "fabric_shm.h"
#include "log.h"

#define FABRIC_API FI_VERSION(1, 11)

const char *fabric_provider_canonical(const char *p)
{
	if (!p || !*p || !strcmp(p, "auto"))
		return NULL;
	if (!strcmp(p, "tcp"))
		return "tcp;ofi_rxm";
	if (!strcmp(p, "verbs"))
		return "verbs;ofi_rxm";
	return p;
}

bool fabric_provider_same(const char *a, const char *b)
{
	const char *ca = fabric_provider_canonical(a), *cb = fabric_provider_canonical(b);

	if (!ca || !cb || strcmp(ca, cb))
		return false;
	/* an endpoint's bare "tcp" is tcp's own RDM protocol, not rxm's */
	return !strcmp(a, "tcp") == !strcmp(b, "tcp");
}

struct fi_info *fabric_hints_make(const struct fabric_params *p, uint64_t caps)
{
	struct fi_info *h = fi_allocinfo();
	const char *prov = fabric_provider_canonical(p->provider);

	if (!h)
		return NULL;
	h->caps = caps;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->threading = p->thread_safe ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	if (prov) {
		h->fabric_attr->prov_name = strdup(prov);
		if (!h->fabric_attr->prov_name) {
			fi_freeinfo(h);
			return NULL;
		}
	}
	return h;
}

/* Returns the first info from the provider that can carry 4 bytes of
 * immediate data. Tries with FI_SOURCE first (lets the daemon check who sent
 * a message), then without. */
static int info_get(const struct fabric_params *p, struct fi_info **out, bool *has_source)
{
	static const uint64_t base = FI_TAGGED | FI_MSG;
	const uint64_t tries[] = { base | FI_SOURCE | FI_DIRECTED_RECV, base };
	int rc = -FI_ENODATA;

	for (size_t t = p->no_source ? 1 : 0; t < 2; t++) {
		struct fi_info *h = fabric_hints_make(p, tries[t]), *list = NULL;
		if (!h)
			return -FI_ENOMEM;
		if (p->node && !(h->fabric_attr->prov_name && !strcmp(h->fabric_attr->prov_name, "shm")))
			rc = fi_getinfo(FABRIC_API, p->node, NULL, FI_SOURCE, h, &list);
		else
			rc = fi_getinfo(FABRIC_API, NULL, NULL, 0, h, &list);
		fi_freeinfo(h);
		if (rc)
			continue;
		for (struct fi_info *i = list; i; i = i->next) {
			if (i->domain_attr->cq_data_size < 4)
				continue;
			/* "auto": libfabric 1.18 and later offer tcp's own RDM
			 * endpoint ("tcp") before tcp;ofi_rxm, another wire
			 * protocol than the aggregators' tcp;ofi_rxm, which
			 * Sumcast's "tcp" means (fabric_provider_same). */
			if (!fabric_provider_canonical(p->provider) && !strcmp(i->fabric_attr->prov_name, "tcp"))
				continue;
			*out = fi_dupinfo(i);
			*has_source = t == 0;
			fi_freeinfo(list);
			return *out ? 0 : -FI_ENOMEM;
		}
		fi_freeinfo(list);
		rc = -FI_ENODATA;
	}
	return rc;
}

/* The endpoint part of a fabric: CQ, AV, EP bound and enabled, address. */
static int ep_open(struct fabric *f, size_t cq_size, bool wait)
{
	struct fi_cq_attr cq_attr = {
		.size = cq_size ? cq_size : 1024,
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = wait ? FI_WAIT_FD : FI_WAIT_NONE,
	};
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);

	f->wait_fd = -1;
	if (rc && wait) { /* no wait object here: the caller polls */
		SC_INFO("%s: completion queue without a wait object (%s): idle threads poll",
			f->prov_name, fi_strerror(-rc));
		cq_attr.wait_obj = FI_WAIT_NONE;
		wait = false;
		rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
	}
	if (!rc && wait && fi_control(&f->cq->fid, FI_GETWAIT, &f->wait_fd)) {
		f->wait_fd = -1; /* opened with one, but it cannot be had: poll */
		SC_INFO("%s: the completion queue's wait fd is not available: idle threads poll",
			f->prov_name);
	}
	if (rc) {
		SC_ERR("fi_cq_open(%s): %s", f->prov_name, fi_strerror(-rc));
		return rc;
	}
	rc = fi_av_open(f->domain, &av_attr, &f->av, NULL);
	if (rc) {
		SC_ERR("fi_av_open(%s): %s", f->prov_name, fi_strerror(-rc));
		goto err_cq;
	}
	rc = fi_endpoint(f->domain, f->info, &f->ep, NULL);
	if (rc) {
		SC_ERR("fi_endpoint(%s): %s", f->prov_name, fi_strerror(-rc));
		goto err_av;
	}
	if ((rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (rc = fi_ep_bind(f->ep, &f->av->fid, 0)) || (rc = fi_enable(f->ep))) {
		SC_ERR("endpoint setup (%s): %s", f->prov_name, fi_strerror(-rc));
		goto err_ep;
	}
	f->addrlen = sizeof(f->addr);
	rc = fi_getname(&f->ep->fid, f->addr, &f->addrlen);
	if (rc) {
		SC_ERR("fi_getname(%s): %s (address needs %zu bytes)", f->prov_name, fi_strerror(-rc),
		       f->addrlen);
		goto err_ep;
	}
	return 0;

err_ep:
	fi_close(&f->ep->fid);
err_av:
	fi_close(&f->av->fid);
err_cq:
	fi_close(&f->cq->fid);
	return rc;
}

static void ep_close(struct fabric *f)
{
	if (!f->ep)
		return;
	fi_close(&f->ep->fid);
	fi_close(&f->av->fid);
	fi_close(&f->cq->fid);
	f->ep = NULL;
	f->av = NULL;
	f->cq = NULL;
	fabric_strict_closed(f);
}

void fabric_close_ep(struct fabric *f)
{
	if (f)
		ep_close(f);
}

/* rxm's eager limit by the rule (fabric_env.h) in a process that did not
 * call fabric_env_defaults before its first endpoint (a test or a bench
 * using the client library): only the settings it decides (the eager and
 * segmentation limits, and the buffer size where rxm's own does not come
 * to the limit), each where the environment has none. The process's
 * children inherit them; they are what the daemon and the plugin set for
 * themselves. Once set (by fabric_env_defaults, an operator or an earlier
 * call) this only reads the environment. */
static void rxm_eager_env(const char *provider)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

	pthread_mutex_lock(&mu);
	if (!getenv("FI_OFI_RXM_EAGER_LIMIT") || !getenv("FI_OFI_RXM_SAR_LIMIT"))
		fabric_env_defaults(&(struct fabric_env){ .provider = provider }, NULL, 0);
	pthread_mutex_unlock(&mu);
}

int fabric_open(const struct fabric_params *p, struct fabric **out)
{
	struct fabric *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return -FI_ENOMEM;
	rxm_eager_env(p->provider);
	rc = info_get(p, &f->info, &f->has_source);
	if (rc) {
		SC_ERR("no libfabric provider \"%s\" with tagged RDM endpoints%s%s: %s",
		       p->provider && *p->provider ? p->provider : "(any)", p->node ? " on " : "",
		       p->node ? p->node : "", fi_strerror(-rc));
		goto err_free;
	}
	snprintf(f->prov_name, sizeof(f->prov_name), "%s", f->info->fabric_attr->prov_name);
	f->mr_local = f->info->domain_attr->mr_mode & FI_MR_LOCAL;
	f->inject_size = f->info->tx_attr ? f->info->tx_attr->inject_size : 0;

	rc = fi_fabric(f->info->fabric_attr, &f->fabric, NULL);
	if (rc) {
		SC_ERR("fi_fabric(%s): %s", f->prov_name, fi_strerror(-rc));
		goto err_info;
	}
	rc = fi_domain(f->fabric, f->info, &f->domain, NULL);
	if (rc) {
		SC_ERR("fi_domain(%s): %s", f->prov_name, fi_strerror(-rc));
		goto err_fabric;
	}
	if (!strcmp(f->prov_name, "shm")) {
		fabric_shm_opened();
	}
	rc = ep_open(f, p->cq_size, p->wait);
	if (rc)
		goto err_domain;
	fabric_strict_opened(f);
	*out = f;
	return 0;

err_domain:
	fi_close(&f->domain->fid);
err_fabric:
	fi_close(&f->fabric->fid);
err_info:
	fi_freeinfo(f->info);
err_free:
	free(f);
	return rc;
}

int fabric_open_sibling(struct fabric *root, size_t cq_size, struct fabric **out)
{
	struct fabric *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return -FI_ENOMEM;
	while (root->parent)
		root = root->parent;
	f->parent = root;
	f->info = root->info;
	f->fabric = root->fabric;
	f->domain = root->domain;
	f->mr_local = root->mr_local;
	f->has_source = root->has_source;
	f->inject_size = root->inject_size;
	memcpy(f->prov_name, root->prov_name, sizeof(f->prov_name));
	rc = ep_open(f, cq_size, false);
	if (rc) {
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

int fabric_wait(struct fabric *f, int other_fd, int timeout_ms)
{
	struct fid *cq = &f->cq->fid;
	struct pollfd p[2] = { { .fd = f->wait_fd, .events = POLLIN }, { .fd = other_fd, .events = POLLIN } };

	if (f->wait_fd < 0)
		return -FI_ENOSYS;
	/* Only when the provider says nothing is pending (and it has made its
	 * progress) is it safe to sleep on the fd. */
	int rc = fi_trywait(f->fabric, &cq, 1);
	if (rc == -FI_EAGAIN)
		return 0;
	if (rc)
		return rc;
	rc = poll(p, other_fd >= 0 ? 2 : 1, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -FI_EIO;
	return rc;
}

void fabric_close(struct fabric *f)
{
	if (!f)
		return;
	ep_close(f);
	if (f->parent) {
		free(f);
		return;
	}
	fi_close(&f->domain->fid);
	fi_close(&f->fabric->fid);
	fi_freeinfo(f->info);
	free(f);
}

const char *fabric_lib_version(char *buf, size_t len)
{
	unsigned v = fi_version();

	snprintf(buf, len, "libfabric %u.%u (built against %d.%d)", FI_MAJOR(v), FI_MINOR(v),
		 FI_MAJOR_VERSION, FI_MINOR_VERSION);
	return buf;
}

const char *fabric_provider(const struct fabric *f)
{
	return f->prov_name;
}

double fabric_link_gbps(const struct fabric *f)
{
	const struct fid_nic *nic = f->info->nic;

	if (!nic || !nic->link_attr || !nic->link_attr->speed)
		return 0;
	return (double)nic->link_attr->speed / 1e9; /* bits per second */
}

/* An IPv4 or IPv6 socket address of family fam, len bytes (sizes
 * checked by the caller). */
static int addr_check_ip(const void *addr, size_t len, int fam, const char **why)
{
	struct sockaddr_storage ss;

	memcpy(&ss, addr, len);
	if (ss.ss_family != fam) {
		*why = fam == AF_INET ? "not an IPv4 socket address (AF_INET)" : "not an IPv6 socket address (AF_INET6)";
		return -EINVAL;
	}
	if (fam == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		uint32_t ip = ntohl(a->sin_addr.s_addr);
		if (!a->sin_port) {
			*why = "port 0";
			return -EINVAL;
		}
		if (ip == INADDR_ANY || ip == INADDR_BROADCAST || IN_MULTICAST(ip)) {
			*why = "a wildcard, broadcast or multicast IPv4 address";
			return -EINVAL;
		}
		for (size_t i = 0; i < sizeof(a->sin_zero); i++)
			if (a->sin_zero[i]) {
				*why = "padding (sin_zero) not zero";
				return -EINVAL;
			}
		return 0;
	}
	const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
	if (!a->sin6_port) {
		*why = "port 0";
		return -EINVAL;
	}
	if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr) || IN6_IS_ADDR_MULTICAST(&a->sin6_addr)) {
		*why = "a wildcard or multicast IPv6 address";
		return -EINVAL;
	}
	return 0;
}

/* A printable name with own's scheme ("fi_shm://..."). */
static int addr_check_str(const char *own, size_t own_len, const char *addr, size_t len, const char **why)
{
	const char *nul = memchr(addr, '\0', len), *sep;
	size_t scheme;

	if (!nul || nul == addr) {
		*why = "not a NUL-terminated name";
		return -EINVAL;
	}
	sep = memchr(own, '\0', own_len) ? strstr(own, "://") : NULL;
	scheme = sep ? (size_t)(sep - own) + 3 : 0;
	if (scheme && ((size_t)(nul - addr) <= scheme || memcmp(addr, own, scheme))) {
		*why = "a name of another scheme than this endpoint's";
		return -EINVAL;
	}
	for (const char *p = addr + scheme; p < nul; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '_' || *p == '-' || *p == ':')) {
			*why = "a name with characters outside [A-Za-z0-9._:-]";
			return -EINVAL;
		}
	return 0;
}

int fabric_addr_check_fmt(uint32_t fmt, const void *own, size_t own_len, const void *addr, size_t len,
			  const char **why)
{
	const char *w = NULL;
	int rc = 0;

	if (!len || len > FABRIC_ADDR_MAX) {
		w = "empty or longer than any fabric address";
		rc = -EINVAL;
	} else if (fmt == FI_ADDR_STR) {
		rc = addr_check_str(own, own_len, addr, len, &w);
	} else if (len != own_len) {
		w = "not the length of this endpoint's addresses";
		rc = -EINVAL;
	} else if (fmt == FI_SOCKADDR_IN || fmt == FI_SOCKADDR_IN6 || fmt == FI_SOCKADDR) {
		struct sockaddr_storage o = { 0 };
		memcpy(&o, own, own_len);
		if ((o.ss_family == AF_INET && len == sizeof(struct sockaddr_in)) ||
		    (o.ss_family == AF_INET6 && len == sizeof(struct sockaddr_in6))) {
			rc = addr_check_ip(addr, len, o.ss_family, &w);
		} else {
			w = "not an IP socket address of this endpoint's family";
			rc = -EINVAL;
		}
	}
	if (rc && why)
		*why = w;
	return rc;
}

int fabric_addr_check(const struct fabric *f, const void *addr, size_t len, const char **why)
{
	return fabric_addr_check_fmt(f->info->addr_format, f->addr, f->addrlen, addr, len, why);
}

int fabric_av_insert(struct fabric *f, const void *addr, size_t len, fi_addr_t *out)
{
	fi_addr_t a = FI_ADDR_UNSPEC;

	if (len == 0 || len > FABRIC_ADDR_MAX)
		return -FI_EINVAL;
	fabric_shm_peer_warn(f, addr, len);
	int n = fi_av_insert(f->av, addr, 1, &a, 0, NULL);
	if (n != 1)
		return n < 0 ? n : -FI_EADDRNOTAVAIL;
	*out = a;
	return 0;
}

int fabric_av_remove(struct fabric *f, fi_addr_t a)
{
	return fi_av_remove(f->av, &a, 1, 0);
}

void fabric_addr_str(const struct fabric *f, const void *addr, size_t len, char *buf, size_t buflen)
{
	size_t l = buflen;

	(void)len;
	if (!fi_av_straddr(f->av, addr, buf, &l))
		snprintf(buf, buflen, "?");
}

int fabric_mr_reg(struct fabric *f, void *buf, size_t len, struct fabric_mr *out)
{
	/* Providers that do not pick keys themselves (tcp;ofi_rxm and shm here:
	 * mr_mode without FI_MR_PROV_KEY) need a key unique in the domain, or
	 * the second registration fails with -FI_ENOKEY. */
	static uint64_t next_key = 1;
	uint64_t key = f->info->domain_attr->mr_mode & FI_MR_PROV_KEY
			       ? 0 : __atomic_fetch_add(&next_key, 1, __ATOMIC_RELAXED);
	struct fid_mr *mr;
	int rc = fi_mr_reg(f->domain, buf, len, FI_SEND | FI_RECV | FI_READ | FI_WRITE |
				     FI_REMOTE_READ | FI_REMOTE_WRITE, 0, key, 0, &mr, NULL);

	if (rc) {
		SC_ERR("fi_mr_reg(%p, %zu) on %s: %s", buf, len, f->prov_name, fi_strerror(-rc));
		return rc;
	}
	out->mr = mr;
	out->desc = fi_mr_desc(mr);
	out->key = fi_mr_key(mr);
	fabric_strict_mr_reg(f, buf, len, out);
	return 0;
}

void fabric_mr_dereg(struct fabric_mr *mr)
{
	if (mr && mr->mr) {
		fabric_strict_mr_dereg(mr);
		fi_close(&mr->mr->fid);
		mr->mr = NULL;
		mr->desc = NULL;
	}
}

int fabric_buf_alloc(struct fabric *f, size_t len, struct fabric_buf *out)
{
	struct fabric_buf b = { .len = len ? len : 1 };
	int rc;

	if (posix_memalign(&b.buf, 4096, b.len))
		return -ENOMEM;
	if (f) {
		rc = fabric_mr_reg(f, b.buf, b.len, &b.mr);
		if (rc) {
			free(b.buf);
			return rc;
		}
	}
	*out = b;
	return 0;
}

void fabric_buf_dereg(struct fabric_buf *b)
{
	fabric_mr_dereg(&b->mr);
}

void fabric_buf_free(struct fabric_buf *b)
{
	fabric_mr_dereg(&b->mr);
	free(b->buf);
	*b = (struct fabric_buf){ 0 };
}

int fabric_tsend(struct fabric *f, const void *buf, size_t len, void *desc, fi_addr_t dest,
		 uint64_t tag, uint32_t data, struct fabric_op *op)
{
	fabric_strict_post(f, "send", buf, len, desc, op);
	ssize_t rc = fi_tsenddata(f->ep, buf, len, desc, data, dest, tag, &op->fi);
	if (rc)
		fabric_strict_unpost(op);
	return (int)rc;
}

int fabric_tinject(struct fabric *f, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
		   uint32_t data)
{
	fabric_strict_inject(f, buf, len);
	return (int)fi_tinjectdata(f->ep, buf, len, data, dest, tag);
}

int fabric_trecv(struct fabric *f, void *buf, size_t len, void *desc, fi_addr_t src,
		 uint64_t tag, uint64_t ignore, struct fabric_op *op)
{
	fabric_strict_post(f, "receive", buf, len, desc, op);
	ssize_t rc = fi_trecv(f->ep, buf, len, desc, src, tag, ignore, &op->fi);
	if (rc)
		fabric_strict_unpost(op);
	return (int)rc;
}

int fabric_tdiscard(struct fabric *f, fi_addr_t src, uint64_t tag, uint64_t ignore, struct fabric_op *op)
{
	struct fi_msg_tagged m = { .addr = src, .tag = tag, .ignore = ignore, .context = &op->fi };

	fabric_strict_post(f, "discard", NULL, 0, NULL, op);
	int rc = (int)fi_trecvmsg(f->ep, &m, FI_PEEK | FI_DISCARD | FI_COMPLETION);
	if (rc)
		fabric_strict_unpost(op);
	return rc;
}

int fabric_cancel(struct fabric *f, struct fabric_op *op)
{
	return (int)fi_cancel(&f->ep->fid, &op->fi);
}

/* Error completions at the head of the CQ, into out (at most n). Read
 * back to back with fi_cq_readerr, which does not progress the endpoint
 * (a fi_cq_read does, and on rxm takes in up to 32 more messages: one per
 * error entry let a flood of unexpected messages outrun their discards).
 * The number read, or a negative FI_E*. */
static int cq_read_errors(struct fabric *f, struct fabric_cqe *out, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct fi_cq_err_entry e = { 0 };
		ssize_t rc = fi_cq_readerr(f->cq, &e, 0);
		if (rc == -FI_EAGAIN)
			break;
		if (rc < 0)
			return got ? (int)got : (int)rc;
		struct fabric_cqe *c = &out[got++];
		c->op = e.op_context;
		c->flags = e.flags;
		c->len = e.len;
		c->tag = e.tag;
		c->data = (uint32_t)e.data;
		c->src = FI_ADDR_NOTAVAIL;
		/* Providers disagree on the sign of err (shm: negative). */
		c->err = e.err ? -abs(e.err) : -FI_EOTHER;
		c->olen = e.olen;
		fabric_strict_done(f, c->op);
	}
	return (int)got;
}

int fabric_cq_poll(struct fabric *f, struct fabric_cqe *out, size_t n)
{
	struct fi_cq_tagged_entry ent[FABRIC_CQ_READ_MAX];
	fi_addr_t src[FABRIC_CQ_READ_MAX];
	size_t got = 0;

	while (got < n) {
		size_t want = n - got < FABRIC_CQ_READ_MAX ? n - got : FABRIC_CQ_READ_MAX;
		ssize_t rc = f->has_source ? fi_cq_readfrom(f->cq, ent, want, src)
					   : fi_cq_read(f->cq, ent, want);
		if (rc == -FI_EAGAIN)
			break;
		if (rc == -FI_EAVAIL) {
			int k = cq_read_errors(f, out + got, n - got);
			if (k < 0)
				return k;
			if (k == 0)
				break;
			got += (size_t)k;
			continue;
		}
		if (rc < 0)
			return (int)rc;
		for (ssize_t i = 0; i < rc; i++) {
			struct fabric_cqe *c = &out[got++];
			c->op = ent[i].op_context;
			c->flags = ent[i].flags;
			c->len = ent[i].len;
			c->tag = ent[i].tag;
			c->data = (uint32_t)ent[i].data;
			c->src = f->has_source ? src[i] : FI_ADDR_NOTAVAIL;
			c->err = 0;
			c->olen = 0;
			fabric_strict_done(f, c->op);
		}
		if ((size_t)rc < want)
			break;
	}
	return (int)got;
}
