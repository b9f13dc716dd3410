/* rxm's buffer settings, set once before the first endpoint (fabric_env.h). */
#include "fabric_env.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "fabric.h"

void fabric_env_defaults(const struct fabric_env *e, char *line, size_t cap)
{
	static const char *const names[] = { "FI_OFI_RXM_USE_SRX", "FI_OFI_RXM_MSG_RX_SIZE",
					     "FI_OFI_RXM_BUFFER_SIZE", "FI_OFI_RXM_EAGER_LIMIT",
					     "FI_OFI_RXM_RX_SIZE", "FI_SHM_RX_SIZE", "FI_UNIVERSE_SIZE" };
	const size_t v[] = { 1, e->rx_buffers, e->rx_buffer_size, FABRIC_RXM_EAGER_DEFAULT,
			     e->rx_size, e->rx_size, e->universe };
	_Static_assert(sizeof(v) / sizeof(v[0]) == sizeof(names) / sizeof(names[0]),
		       "a value for every name");
	size_t n = 0;

	if (cap)
		line[0] = '\0';
	/* the first four always; the others where e has a value (0: the provider's) */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (i >= 4 && !v[i])
			continue;
		bool mine = !getenv(names[i]);
		if (mine) {
			char val[32];
			snprintf(val, sizeof(val), "%zu", v[i]);
			setenv(names[i], val, 1);
		}
		if (n < cap)
			n += (size_t)snprintf(line + n, cap - n, "%s%s=%s%s", n ? " " : "", names[i],
					      getenv(names[i]), mine ? "" : " (environment)");
	}
}
