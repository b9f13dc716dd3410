/* rxm's buffer settings, set once before the first endpoint (fabric_env.h). */
#include "fabric_env.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "fabric.h"

void fabric_env_defaults(const struct fabric_env *e, char *line, size_t cap)
{
	static const char *const names[] = { "FI_OFI_RXM_USE_SRX", "FI_OFI_RXM_MSG_RX_SIZE",
					     "FI_OFI_RXM_BUFFER_SIZE", "FI_OFI_RXM_EAGER_LIMIT" };
	char vals[4][32];
	size_t n = 0;

	snprintf(vals[0], sizeof(vals[0]), "1");
	snprintf(vals[1], sizeof(vals[1]), "%zu", e->rx_buffers);
	snprintf(vals[2], sizeof(vals[2]), "%zu", e->rx_buffer_size);
	snprintf(vals[3], sizeof(vals[3]), "%u", FABRIC_RXM_EAGER_DEFAULT);
	if (cap)
		line[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		bool mine = !getenv(names[i]);
		if (mine)
			setenv(names[i], vals[i], 1);
		if (n < cap)
			n += (size_t)snprintf(line + n, cap - n, "%s%s=%s%s", n ? " " : "", names[i],
					      getenv(names[i]), mine ? "" : " (environment)");
	}
}
