/* libfabric's rxm provider (tcp;ofi_rxm, verbs;ofi_rxm) takes its buffer
 * settings from the environment, read once, when libfabric first looks at
 * its providers (the first fi_getinfo). Its defaults give every endpoint
 * 4,096 receive buffers of 16 KiB, touched at once: 67 MB and ~100 ms per
 * endpoint, whatever the load. A rank opens several endpoints (one per
 * aggregator, the ncclNet one, the ring's), a daemon one per data thread.
 * Both set smaller ones before their first endpoint. */
#ifndef SUMCAST_FABRIC_ENV_H
#define SUMCAST_FABRIC_ENV_H

#include <stddef.h>

struct fabric_env {
	size_t rx_buffers;     /* receive buffers of an endpoint, shared by its connections */
	size_t rx_buffer_size; /* bytes each; a larger message that matches no receive
				  gets memory of its own size while it waits */
	size_t rx_size;        /* receives that may be posted at once on an endpoint
				  (FI_OFI_RXM_RX_SIZE, FI_SHM_RX_SIZE); 0: the
				  provider's default (rxm 2048, shm 1024) */
	size_t universe;       /* FI_UNIVERSE_SIZE: the peers an endpoint expects;
				  rxm sizes each endpoint's message CQ by it
				  (below); 0: libfabric's default */
};

/* The defaults of both: 256 buffers of 1 KiB (as strings for settings
 * tables too). */
#define FABRIC_ENV_RX_BUFFERS 256
#define FABRIC_ENV_RX_BUFFER_SIZE 1024
/* A rank's endpoints each talk to one aggregator, or to a few nodes (the
 * ring's, the ncclNet one's peers). rxm 1.17 gives every endpoint a
 * message CQ of rx + 128 x FI_UNIVERSE_SIZE entries of ~96 bytes (12.6 MB
 * at libfabric's default of 1,024), whose pages are touched as completions
 * go round it: ~12 MB of a rank's RSS per endpoint, 8 of them per
 * communicator at 8 aggregators. 16 peers: 0.2 MB. A CQ that fills (more
 * peers with every send in flight at once) keeps its completions in a list
 * of their own (libfabric's CQ overflow), so the size bounds memory, not
 * correctness. */
#define FABRIC_ENV_RANK_UNIVERSE 16
/* The daemon's receive queue: each data thread keeps window x nranks
 * receives posted per job (docs/journal/2026-11-26-aggregator-receives.md). */
#define FABRIC_ENV_DAEMON_RX_SIZE 8192
#define FABRIC_ENV_STR_(x) #x
#define FABRIC_ENV_STR(x) FABRIC_ENV_STR_(x)

/* Sets FI_OFI_RXM_USE_SRX=1 (one pool per endpoint, shared by all its
 * connections), FI_OFI_RXM_MSG_RX_SIZE and FI_OFI_RXM_BUFFER_SIZE from e,
 * and FI_OFI_RXM_EAGER_LIMIT to rxm's default eager limit (it follows the
 * buffer size otherwise), each only where the environment has no value of
 * its own; with e->rx_size, FI_OFI_RXM_RX_SIZE and FI_SHM_RX_SIZE the
 * same way, and with e->universe FI_UNIVERSE_SIZE. Writes what is in force
 * ("FI_OFI_RXM_USE_SRX=1 ...", an operator's value marked "(environment)")
 * into line for the log. Call
 * before the first fabric_open; later it changes nothing libfabric sees. */
void fabric_env_defaults(const struct fabric_env *e, char *line, size_t cap);

#endif
