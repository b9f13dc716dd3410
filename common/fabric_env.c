/* rxm's buffer settings, set once before the first endpoint (fabric_env.h). */
#include "fabric_env.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "fabric.h"

void fabric_env_defaults(const struct fabric_env *e, char *line, size_t cap)
{
	static const char *const all[] = { "FI_OFI_RXM_USE_SRX", "FI_OFI_RXM_MSG_RX_SIZE",
					   "FI_OFI_RXM_BUFFER_SIZE", "FI_OFI_RXM_EAGER_LIMIT",
					   "FI_OFI_RXM_RX_SIZE", "FI_SHM_RX_SIZE", "FI_UNIVERSE_SIZE" };
	const size_t v[] = { 1, e->rx_buffers, e->rx_buffer_size, FABRIC_RXM_EAGER_DEFAULT,
			     e->rx_size, e->rx_size, e->universe };
	const char *names[7];
	char vals[7][32];
	size_t n = 0, count = 0;

	/* the first four always; the others where e has a value (0: the provider's) */
	for (size_t i = 0; i < 7; i++) {
		if (i >= 4 && !v[i])
			continue;
		names[count] = all[i];
		snprintf(vals[count++], sizeof(vals[0]), "%zu", v[i]);
	}
	if (cap)
		line[0] = '\0';
	for (size_t i = 0; i < count; i++) {
		bool mine = !getenv(names[i]);
		if (mine)
			setenv(names[i], vals[i], 1);
		if (n < cap)
			n += (size_t)snprintf(line + n, cap - n, "%s%s=%s%s", n ? " " : "", names[i],
					      getenv(names[i]), mine ? "" : " (environment)");
	}
}
