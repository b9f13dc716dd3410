/* Private to common/fabric*.c: fabric.c's calls into fabric_shm.c. */
#ifndef SUMCAST_FABRIC_SHM_H
#define SUMCAST_FABRIC_SHM_H

#include <stddef.h>

#include "fabric.h"

/* Before this process's shm endpoint: the regions named after its own pid
 * swept (fabric_shm_sweep), and on libfabric 1.x the region lock's hazard
 * said once (fabric_shm_lock_hazard). */
void fabric_shm_opened(void);
/* An shm peer address about to be inserted: said once when it is an
 * endpoint of this process on libfabric 2.5 or later (fabric_av_insert). */
void fabric_shm_peer_warn(const struct fabric *f, const void *addr, size_t len);

#endif
