/* rxm's buffer settings and its eager limit, set once before the first
 * endpoint (fabric_env.h). */
#include "fabric_env.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fabric.h"
#include "log.h"

/* A size in the environment as libfabric reads one (strtol, base 0), where
 * it is a whole number of 1 to INT32_MAX (rxm's cap); 0 otherwise. */
static size_t env_size(const char *name)
{
	const char *s = getenv(name);
	char *end;

	if (!s || !*s)
		return 0;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || !v || v > INT32_MAX)
		return 0;
	return (size_t)v;
}

/* A boolean libfabric parameter that is on unless the environment turns
 * it off (fi_parse_bool's spellings). */
static bool env_on(const char *name)
{
	const char *s = getenv(name);

	return !s || !(!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") ||
		       !strcasecmp(s, "off"));
}

size_t fabric_rxm_eager_rule(void)
{
	size_t v = env_size("FI_OFI_RXM_EAGER_LIMIT");

	return v ? v : FABRIC_RXM_EAGER_DEFAULT;
}

/* Whether the host has an RDMA device (verbs, efa): rdma-core's devices
 * are the entries of /sys/class/infiniband (soft RoCE and iWARP too). */
static bool rdma_device_present(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool any = false;

	if (!d)
		return false;
	while (!any && (e = readdir(d)))
		any = e->d_name[0] != '.';
	closedir(d);
	return any;
}

bool fabric_rxm_eager_apart(const char *provider)
{
	const char *p = fabric_provider_canonical(provider);

	if (fi_version() >= FI_VERSION(1, 20) || !env_on("FI_OFI_RXM_ENABLE_DYN_RBUF") ||
	    !env_on("FI_OFI_RXM_ENABLE_DIRECT_SEND"))
		return false;
	/* "auto" can end on verbs;ofi_rxm only where there is an RDMA device;
	 * without one rxm can only sit on tcp */
	return p ? !strcmp(p, "tcp;ofi_rxm") : !rdma_device_present();
}

size_t fabric_rxm_eager_in_force(const char *provider)
{
	size_t buf = env_size("FI_OFI_RXM_BUFFER_SIZE"), eager;

	if (!buf)
		buf = FABRIC_RXM_BUFFER_DEFAULT;
	if (!fabric_rxm_eager_apart(provider))
		return buf;
	eager = env_size("FI_OFI_RXM_EAGER_LIMIT");
	return eager > buf ? eager : buf;
}

void fabric_env_defaults(const struct fabric_env *e, char *line, size_t cap)
{
	const size_t eager = fabric_rxm_eager_rule();
	const bool apart = fabric_rxm_eager_apart(e->provider);
	size_t buf = eager;

	if (apart && e->rx_buffer_size && e->rx_buffer_size < eager)
		buf = e->rx_buffer_size;
	/* No buffer size of the caller's own: rxm's default where it comes to
	 * the eager limit anyway (nothing set, so nothing passed on to child
	 * processes, such as the daemons a test starts, which set their own) */
	if (!e->rx_buffer_size &&
	    (apart ? eager >= FABRIC_RXM_BUFFER_DEFAULT : eager == FABRIC_RXM_BUFFER_DEFAULT))
		buf = 0;
	/* 0: left to the provider (not set) */
	const struct {
		const char *name;
		size_t v;
	} set[] = {
		{ "FI_OFI_RXM_USE_SRX", e->rx_buffers ? 1 : 0 },
		{ "FI_OFI_RXM_MSG_RX_SIZE", e->rx_buffers },
		{ "FI_OFI_RXM_BUFFER_SIZE", buf },
		{ "FI_OFI_RXM_EAGER_LIMIT", eager },
		/* no segmentation between the two: above the eager limit,
		 * rendezvous (fabric_env.h) */
		{ "FI_OFI_RXM_SAR_LIMIT", eager },
		{ "FI_OFI_RXM_RX_SIZE", e->rx_size },
		{ "FI_SHM_RX_SIZE", e->rx_size },
		{ "FI_UNIVERSE_SIZE", e->universe },
	};
	size_t n = 0;

	if (cap)
		line[0] = '\0';
	for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
		if (!set[i].v)
			continue;
		bool mine = !getenv(set[i].name);
		if (mine) {
			char val[32];
			snprintf(val, sizeof(val), "%zu", set[i].v);
			setenv(set[i].name, val, 1);
		}
		if (n < cap)
			n += (size_t)snprintf(line + n, cap - n, "%s%s=%s%s", n ? " " : "", set[i].name,
					      getenv(set[i].name), mine ? "" : " (environment)");
	}
	if (!cap)
		return;
	unsigned v = fi_version();
	size_t in_force = fabric_rxm_eager_in_force(e->provider);
	if (n < cap)
		snprintf(line + n, cap - n, "; eager limit %zu on libfabric %u.%u (%s)", in_force,
			 FI_MAJOR(v), FI_MINOR(v),
			 apart ? "buffers apart from it" : "rxm's buffer size");
	if (in_force != eager)
		SC_WARN("rxm's eager limit comes to %zu here, not %zu (FI_OFI_RXM_EAGER_LIMIT or its "
			"default): an operator's FI_OFI_RXM_BUFFER_SIZE=%s decides it on libfabric %u.%u; "
			"rxm refuses connections between processes whose limits differ, so every "
			"process of the deployment needs the same settings",
			in_force, eager, getenv("FI_OFI_RXM_BUFFER_SIZE"), FI_MAJOR(v), FI_MINOR(v));
}
