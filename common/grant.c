/* The in-flight grant (grant.h). */
#include "grant.h"

struct grant grant_inflight(uint32_t window, uint32_t chunk, uint32_t nranks, uint64_t cap,
			    uint64_t min_chunk, uint64_t chunk_floor)
{
	struct grant g = { window, chunk };
	uint64_t n = nranks ? nranks : 1;

	if (!chunk) /* refused by the wire checks; nothing to divide by */
		return g;
	/* the chunk first halves while even a window of 2 is above the cap */
	while (2 * (uint64_t)g.chunk * n > cap) {
		uint64_t c = ((uint64_t)g.chunk / 2) & ~(uint64_t)7;
		if (c < min_chunk)
			c = min_chunk & ~(uint64_t)7;
		if (c >= g.chunk || c <= chunk_floor || !c)
			break;
		g.chunk = (uint32_t)c;
	}
	uint64_t w = cap / ((uint64_t)g.chunk * n);
	if (w < 2)
		w = 2;
	if (w < g.window)
		g.window = (uint32_t)w;
	return g;
}
