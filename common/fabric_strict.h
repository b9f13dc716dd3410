/* RDMA's rules enforced where RDMA is absent: a strict mode of the fabric
 * layer (fabric.c) for tests. On verbs and efa a local buffer must be
 * registered and its descriptor passed (FI_MR_LOCAL), a registration must
 * be of allocated memory (FI_MR_ALLOCATED), a context must have the room
 * the provider asks (FI_CONTEXT2), an inject must stay within inject_size;
 * tcp and shm enforce none of it, so such bugs would first show on a
 * user's cluster. With SUMCAST_FABRIC_STRICT set, every data operation is
 * checked against those rules before it is posted:
 *
 *   rdma   the descriptor of a send or receive of one byte or more belongs
 *          to a live registration on the endpoint's domain that covers the
 *          whole buffer; a message stays within the endpoint's
 *          max_msg_size and an inject within its inject_size; the context
 *          (struct fabric_op, an fi_context2) is not posted twice, nor
 *          completed when it was not posted; no registration is closed
 *          while an operation posted on its domain still covers it; a
 *          registration is of mapped memory. Endpoints report mr_local, as
 *          verbs and efa do, so callers take the descriptor paths.
 *   efa    the same with efa's RDM limits as libfabric 2.6's source gives
 *          them (prov/efa/src/efa_prov_info.c: inject of at most
 *          min(MTU - header, SHM_MAX_INJECT_SIZE) = 4096 bytes; FI_CONTEXT2
 *          for efa-direct): f->inject_size is cut to 4096, so callers that
 *          choose inject by it take sends above that.
 *
 * A violation is logged with what broke which rule and ends the process
 * (abort), so a test fails where the bug is. Not for production: the
 * bookkeeping takes a lock per operation. */
#ifndef SUMCAST_FABRIC_STRICT_H
#define SUMCAST_FABRIC_STRICT_H

#include <stddef.h>

#include "fabric.h"

enum fabric_strict_level { FABRIC_STRICT_OFF = 0, FABRIC_STRICT_RDMA, FABRIC_STRICT_EFA };

#define FABRIC_STRICT_EFA_INJECT 4096u /* efa RDM with shm transfer: SHM_MAX_INJECT_SIZE */

/* SUMCAST_FABRIC_STRICT (off, rdma, efa; 1 is rdma), read once. */
enum fabric_strict_level fabric_strict_level(void);
/* What a violation does: by default log it and abort(); a unit test
 * counts them instead. */
extern void (*fabric_strict_fail)(const char *msg);

/* The hooks fabric.c calls (nothing when the mode is off). */
void fabric_strict_opened(struct fabric *f);
void fabric_strict_closed(const struct fabric *f);
void fabric_strict_mr_reg(const struct fabric *f, const void *buf, size_t len, const struct fabric_mr *mr);
void fabric_strict_mr_dereg(const struct fabric_mr *mr);
/* Before posting op (a send, a receive, a discard: buf NULL): the rules;
 * op is in flight on f over [buf, + len) from here (a completion may be
 * read on another thread before the post returns). */
void fabric_strict_post(const struct fabric *f, const char *what, const void *buf, size_t len, const void *desc,
			const struct fabric_op *op);
/* The post failed: op is not in flight. */
void fabric_strict_unpost(const struct fabric_op *op);
void fabric_strict_inject(const struct fabric *f, const void *buf, size_t len);
/* A completion of op on f. */
void fabric_strict_done(const struct fabric *f, const struct fabric_op *op);

#endif
