/* The p2p engine (net_comm.c, net_req.c): ncclNet's comms over the
 * process's one libfabric endpoint, in negative errnos; net_nccl.c adapts
 * it to NCCL's versions, and the collnet shares its init and devices. */
#ifndef SUMCAST_PLUGIN_NET_COMM_H
#define SUMCAST_PLUGIN_NET_COMM_H

#include <stddef.h>

#include "plugin.h"

int netc_init(void);
void netc_fini(void);
int netc_devices(int *ndev);
struct fabric *netc_fabric(void);
int netc_listen(int dev, void *handle, void **listen_comm);
int netc_connect(int dev, void *handle, void **send_comm);
int netc_accept(void *listen_comm, void **recv_comm);
int netc_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
int netc_dereg_mr(void *comm, void *mhandle);
/* phandle(s): NCCL's profiler parents (v10 and later; NULL: none, and
 * no event for that message): docs/plugin.md, "Profiler events". */
int netc_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
	       void **request);
int netc_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
	       void **mhandles, void **phandles, void **request);
/* sizes: n ints (NCCL's test wants int). */
int netc_test(void *request, int *done, int *sizes);
int netc_close_send(void *send_comm);
int netc_close_recv(void *recv_comm);
int netc_close_listen(void *listen_comm);

#endif
