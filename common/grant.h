/* The in-flight grant: the window and chunk an aggregator gives a job of
 * nranks ranks so that window x chunk x nranks stays within a cap. One rule,
 * used by the daemon's admission (daemon/ctl_admit.c, [job] max-inflight),
 * by the plugin's tree to ask for its inner jobs' share of a default
 * daemon's cap (plugin/collnet_tree.c), and by the sizing model
 * (tools/plan_model.c).
 *
 * The window comes down first, to floor(cap / (chunk x nranks)) but not
 * under 2 (nor above what was asked); while 2 x chunk x nranks is still
 * above the cap the chunk halves (a multiple of 8), not under min_chunk
 * and staying above chunk_floor (a sealed job's 2 x seal room, else 0); a
 * job that asked for less than min_chunk keeps its chunk. Pure arithmetic
 * (tests/unit/test_admit.c). */
#ifndef SUMCAST_GRANT_H
#define SUMCAST_GRANT_H

#include <stdint.h>

#define GRANT_INFLIGHT_DEFAULT (64ull << 20) /* [job] max-inflight's default */
#define GRANT_MIN_CHUNK_DEFAULT (16ull << 10) /* [job] min-chunk's default */
/* [job] multicast-inflight's default: a multicast job's window x chunk (one
 * receiver, the group) at most this; at the plugin's 256 KiB chunk a window
 * of 2 (docs/daemon.md, "Multicast results") */
#define GRANT_MC_INFLIGHT_DEFAULT (512ull << 10)

struct grant {
	uint32_t window, chunk;
};
struct grant grant_inflight(uint32_t window, uint32_t chunk, uint32_t nranks, uint64_t cap,
			    uint64_t min_chunk, uint64_t chunk_floor);

#endif
