/* libfabric's rxm provider (tcp;ofi_rxm, verbs;ofi_rxm) takes its buffer
 * settings from the environment, read once, when libfabric first looks at
 * its providers (the first fi_getinfo). Its defaults give every endpoint
 * 4,096 receive buffers of 16 KiB, touched at once: 67 MB and ~100 ms per
 * endpoint, whatever the load. A rank opens several endpoints (one per
 * aggregator, the ncclNet one, the ring's), a daemon one per data thread.
 * Both set smaller ones before their first endpoint.
 *
 * The eager limit. rxm puts its endpoint's eager limit (the largest
 * message it sends without a rendezvous) into every connection request
 * and refuses a peer whose limit is not its own (rxm_verify_connreq(),
 * "eager_limit mismatch", in every version): every process of a
 * deployment must come to the same one. How rxm comes to it depends on the
 * version loaded and on the core provider:
 *   libfabric < 1.20 over tcp   max(FI_OFI_RXM_EAGER_LIMIT, FI_OFI_RXM_BUFFER_SIZE)
 *                               (tcp's dynamic receive buffers with direct
 *                               send place eager messages in the posted
 *                               buffer, so rxm's own buffers can be smaller);
 *   everywhere else             FI_OFI_RXM_BUFFER_SIZE: 1.20 removed the
 *                               dynamic buffers and FI_OFI_RXM_EAGER_LIMIT
 *                               with them (2.x has neither), and over verbs
 *                               1.x never used them.
 * The one rule (fabric_rxm_eager_rule): the eager limit is
 * FI_OFI_RXM_EAGER_LIMIT where the environment has it, else
 * FABRIC_RXM_EAGER_DEFAULT, rxm's own default buffer size, so that a
 * process that sets nothing comes to the same figure on every version.
 * fabric_env_defaults then sets FI_OFI_RXM_BUFFER_SIZE to what makes the
 * loaded rxm arrive at it: the settings' own buffer size (at most the
 * eager limit) where the two are apart, the eager limit elsewhere; and
 * fabric_open applies the same rule in a process that did not call it.
 *
 * Above the eager limit. rxm before 1.20 over tcp sends every larger
 * message by rendezvous (its segmentation limit is the eager limit there);
 * 1.20 and later, and 1.x over verbs, segment messages of up to 8 times
 * the eager limit through their buffers (SAR: FI_OFI_RXM_SAR_LIMIT) and
 * use rendezvous above. fabric_env_defaults sets FI_OFI_RXM_SAR_LIMIT to
 * the eager limit, which turns segmentation off: one protocol on every
 * version (a chunk is placed in the posted receive, not copied through 16
 * KiB buffers), and none of 2.6's rxm_discard(), which frees the first
 * buffer of an unexpected segmented message twice when the daemon's sweep
 * drops it (FI_PEEK | FI_DISCARD: an ofi_buf_free() assertion in a debug
 * build, heap corruption and a crash otherwise). */
#ifndef SUMCAST_FABRIC_ENV_H
#define SUMCAST_FABRIC_ENV_H

#include <stdbool.h>
#include <stddef.h>

/* rxm's default buffer size (FI_OFI_RXM_BUFFER_SIZE), and so its default
 * eager limit (larger messages go by rendezvous) in every version; the
 * eager limit Sumcast's processes agree on unless FI_OFI_RXM_EAGER_LIMIT
 * says otherwise (above). */
#define FABRIC_RXM_BUFFER_DEFAULT 16384
#define FABRIC_RXM_EAGER_DEFAULT FABRIC_RXM_BUFFER_DEFAULT

struct fabric_env {
	const char *provider;  /* as fabric_params.provider ("tcp", "verbs;ofi_rxm",
				  "auto", NULL): whether rxm's buffers may be
				  smaller than its eager limit (above) */
	size_t rx_buffers;     /* receive buffers of an endpoint, shared by its connections
				  (FI_OFI_RXM_USE_SRX=1, FI_OFI_RXM_MSG_RX_SIZE); 0: rxm's own */
	size_t rx_buffer_size; /* bytes each where rxm keeps them apart from the eager
				  limit (at most that); a larger message that matches no
				  receive gets memory of its own size while it waits.
				  Elsewhere they are of the eager limit's size. 0:
				  rxm's own (FABRIC_RXM_BUFFER_DEFAULT) where that
				  comes to the eager limit, else the limit */
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

/* The eager limit every rxm endpoint of the deployment must have (above):
 * FI_OFI_RXM_EAGER_LIMIT from the environment (a number of bytes, 1 to
 * 2^31 - 1), else FABRIC_RXM_EAGER_DEFAULT. */
size_t fabric_rxm_eager_rule(void);
/* Whether the loaded libfabric's rxm over provider takes its eager limit
 * apart from its buffer size: before 1.20, over tcp, with its dynamic
 * receive buffers and direct send (FI_OFI_RXM_ENABLE_DYN_RBUF,
 * FI_OFI_RXM_ENABLE_DIRECT_SEND) not turned off. "auto" (or NULL) counts
 * as tcp where the host has no RDMA device (/sys/class/infiniband), as
 * not elsewhere (it may end on verbs): a wrong guess for tcp costs memory
 * (16 KiB buffers), never the agreement. */
bool fabric_rxm_eager_apart(const char *provider);
/* The eager limit the loaded rxm over provider comes to from the settings
 * in this process's environment, the way it derives it (above). */
size_t fabric_rxm_eager_in_force(const char *provider);

/* Sets FI_OFI_RXM_USE_SRX=1 (one pool per endpoint, shared by all its
 * connections) and FI_OFI_RXM_MSG_RX_SIZE from e->rx_buffers,
 * FI_OFI_RXM_EAGER_LIMIT and FI_OFI_RXM_SAR_LIMIT to the rule's eager
 * limit and FI_OFI_RXM_BUFFER_SIZE to what makes rxm arrive at it (above),
 * each only
 * where the environment has no value of its own; with e->rx_size,
 * FI_OFI_RXM_RX_SIZE and FI_SHM_RX_SIZE the same way, and with
 * e->universe FI_UNIVERSE_SIZE. Writes what is in force
 * ("FI_OFI_RXM_USE_SRX=1 ...", an operator's value marked "(environment)",
 * then "eager limit N on libfabric X.Y") into line for the log (cap 0:
 * nothing written); with a line, warns when an operator's value makes rxm
 * come to another eager limit than the rule's. Call before the first
 * fabric_open; later it changes nothing libfabric sees. */
void fabric_env_defaults(const struct fabric_env *e, char *line, size_t cap);

#endif
