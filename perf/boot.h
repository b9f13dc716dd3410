/* How the processes of an acceptance run (sumcast-perf) find each other:
 * the part of NCCL's bootstrap the collnet needs, an allgather of the
 * listen handles and a barrier. Three ways, tried in this order:
 *
 *   MPI      built with MPI (SUMCAST_PERF_MPI) and started by its launcher:
 *            MPI_Allgather and MPI_Barrier on MPI_COMM_WORLD;
 *   tcp      a rank and a size from the launcher's environment (ours:
 *            SUMCAST_PERF_RANK / SUMCAST_PERF_NRANKS; OpenMPI's
 *            OMPI_COMM_WORLD_RANK / _SIZE; MPICH and Intel MPI's PMI_RANK /
 *            PMI_SIZE; Slurm's SLURM_PROCID / SLURM_NTASKS) and a rendezvous
 *            address, SUMCAST_PERF_RDV=host:port (else PyTorch's
 *            MASTER_ADDR and MASTER_PORT): rank 0 listens there, every other
 *            rank connects, and rank 0 relays (a star: a few handles of
 *            128 bytes per communicator);
 *   alone    neither: one process, rank 0 of 1.
 *
 * Every wait is bounded (SUMCAST_PERF_BOOT_TIMEOUT seconds, 120 by
 * default): a rank that never comes is an error naming it, never a hang. */
#ifndef SUMCAST_PERF_BOOT_H
#define SUMCAST_PERF_BOOT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* err = the sentence (the perf files' one way of saying why). */
static inline void say(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void say(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

struct boot {
	int rank, size;
	char how[400];   /* said in the header: "MPI (4 ranks)", "tcp rendezvous at ..." */
	/* tcp */
	int fd;          /* ranks > 0: their connection to rank 0 */
	int *fds;        /* rank 0: one per other rank, by rank */
	double timeout_s;
	int mpi;         /* MPI_Init was called */
};

/* Finds the ranks. 0, or -1 with a sentence in err. */
int boot_init(struct boot *b, int *argc, char ***argv, char *err, size_t errlen);
/* all[r * len ..] = rank r's mine, on every rank. 0 or -1 (err said on stderr). */
int boot_allgather(struct boot *b, const void *mine, size_t len, void *all);
int boot_barrier(struct boot *b);
/* The largest of every rank's v[0..n), in place (n <= 64). */
int boot_max(struct boot *b, double *v, size_t n);
/* The sum of every rank's v[0..n), in place (n <= 64). */
int boot_sum(struct boot *b, double *v, size_t n);
void boot_fini(struct boot *b);

#endif
