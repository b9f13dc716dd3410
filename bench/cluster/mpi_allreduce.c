/* mpi_allreduce: the outside peer of the emulated-cluster benchmark.
 *
 * MPI_Allreduce (f32, sum) over a range of sizes, nccl-tests style output:
 *   size  count  type  redop  time_us  algbw  busbw  #wrong
 * algbw = bytes / time (GB/s, 1e9), busbw = algbw * 2(n-1)/n (the nccl-tests convention,
 * so busbw equals the per-link rate a ring needs).
 *
 * Every loop is bounded in count and in time: at most --warmup + --iters calls per size,
 * and no new call starts once --max-seconds (per size) has passed; rank 0 decides and
 * broadcasts how many calls to time, so all ranks make the same number of calls.
 *
 * --netdev DEV: each rank reads /sys/class/net/DEV/statistics/{tx,rx}_bytes around the
 * timed loop (inside its namespace, DEV is its own link), so a row also says what rate
 * the links really carried (link_tx_mbit/link_rx_mbit: mean over ranks, and the max).
 *
 * --json: one JSON object per row on stdout instead of the table.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h" /* common/: the project's one clock */

struct opts {
  uint64_t min_bytes, max_bytes;
  unsigned step;
  int warmup, iters;
  double max_seconds;
  int json, check;
  int workers, aggs;
  double link_mbit;
  const char *netdev;
  const char *mode;
};

static uint64_t parse_size(const char *s) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) {
    fprintf(stderr, "mpi_allreduce: bad size '%s'\n", s);
    exit(2);
  }
  switch (*end) {
  case 'k': case 'K': v *= 1024.0; break;
  case 'm': case 'M': v *= 1024.0 * 1024.0; break;
  case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
  case '\0': break;
  default:
    fprintf(stderr, "mpi_allreduce: bad size suffix in '%s'\n", s);
    exit(2);
  }
  return (uint64_t)v;
}

static int read_counter(const char *dev, const char *name, uint64_t *out) {
  char path[256];
  snprintf(path, sizeof path, "/sys/class/net/%s/statistics/%s", dev, name);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  unsigned long long v = 0;
  int ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  if (!ok)
    return -1;
  *out = v;
  return 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: mpi_allreduce [--min-bytes B] [--max-bytes B] [--step 2|4] [--warmup N]\n"
          "         [--iters N] [--max-seconds S] [--json] [--no-check] [--netdev DEV]\n"
          "         [--workers W] [--aggs A] [--link-mbit R] [--mode NAME]  (labels for JSON rows)\n");
}

static void parse(int argc, char **argv, struct opts *o) {
  static const struct option lo[] = {
      {"min-bytes", required_argument, 0, 'b'}, {"max-bytes", required_argument, 0, 'e'},
      {"step", required_argument, 0, 'f'},      {"warmup", required_argument, 0, 'w'},
      {"iters", required_argument, 0, 'n'},     {"max-seconds", required_argument, 0, 't'},
      {"json", no_argument, 0, 'j'},            {"no-check", no_argument, 0, 'C'},
      {"netdev", required_argument, 0, 'd'},    {"workers", required_argument, 0, 'W'},
      {"aggs", required_argument, 0, 'A'},      {"link-mbit", required_argument, 0, 'R'},
      {"mode", required_argument, 0, 'M'},      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  *o = (struct opts){.min_bytes = 1 << 20, .max_bytes = 64u << 20, .step = 2, .warmup = 2,
                     .iters = 20, .max_seconds = 10.0, .check = 1, .link_mbit = 0,
                     .mode = "mpi"};
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:w:n:t:jCd:W:A:R:M:h", lo, NULL)) != -1) {
    switch (c) {
    case 'b': o->min_bytes = parse_size(optarg); break;
    case 'e': o->max_bytes = parse_size(optarg); break;
    case 'f': o->step = (unsigned)atoi(optarg); break;
    case 'w': o->warmup = atoi(optarg); break;
    case 'n': o->iters = atoi(optarg); break;
    case 't': o->max_seconds = atof(optarg); break;
    case 'j': o->json = 1; break;
    case 'C': o->check = 0; break;
    case 'd': o->netdev = optarg; break;
    case 'W': o->workers = atoi(optarg); break;
    case 'A': o->aggs = atoi(optarg); break;
    case 'R': o->link_mbit = atof(optarg); break;
    case 'M': o->mode = optarg; break;
    default: usage(); exit(c == 'h' ? 0 : 2);
    }
  }
  if (o->step < 2) o->step = 2;
  if (o->warmup < 0) o->warmup = 0;
  if (o->iters < 1) o->iters = 1;
  if (o->iters > 100000) o->iters = 100000;
  if (o->max_seconds <= 0) o->max_seconds = 1;
  if (o->min_bytes < 4) o->min_bytes = 4;
  if (o->max_bytes < o->min_bytes) o->max_bytes = o->min_bytes;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  struct opts o;
  parse(argc, argv, &o);
  if (o.workers <= 0) o.workers = n;

  size_t max_count = (size_t)(o.max_bytes / sizeof(float));
  float *send = malloc(max_count * sizeof(float));
  float *recv = malloc(max_count * sizeof(float));
  if (!send || !recv) {
    fprintf(stderr, "mpi_allreduce: rank %d: cannot allocate 2 x %" PRIu64 " bytes\n", rank,
            o.max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* Small integers: every partial sum is exact in f32, so the check is exact too. */
  for (size_t i = 0; i < max_count; i++)
    send[i] = (float)((rank + 1) + (int)(i % 7));

  int have_dev = 0;
  if (o.netdev) {
    uint64_t t;
    have_dev = read_counter(o.netdev, "tx_bytes", &t) == 0;
    if (!have_dev && rank == 0)
      fprintf(stderr, "mpi_allreduce: cannot read counters of '%s'; no link columns\n", o.netdev);
    int all = 0;
    MPI_Allreduce(&have_dev, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    have_dev = all;
  }

  if (rank == 0 && !o.json) {
    printf("# mpi_allreduce: nranks %d, f32 sum, sizes %" PRIu64 "..%" PRIu64
           " step x%u, warmup %d, iters <= %d, <= %.1f s per size\n",
           n, o.min_bytes, o.max_bytes, o.step, o.warmup, o.iters, o.max_seconds);
    printf("# %12s %12s %6s %6s %12s %9s %9s %7s %5s%s\n", "size", "count", "type", "redop",
           "time_us", "algbw", "busbw", "#wrong", "reps",
           have_dev ? "  link_tx_mbit link_rx_mbit max_mbit" : "");
    printf("# %12s %12s %6s %6s %12s %9s %9s %7s %5s\n", "(B)", "(elements)", "", "", "(us)",
           "(GB/s)", "(GB/s)", "", "");
    fflush(stdout);
  }

  double busfactor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  int rc = 0;
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step) {
    size_t count = (size_t)(bytes / sizeof(float));
    if (count == 0) count = 1;
    double size_t0 = sc_now_s();

    /* Warmup (also the correctness check), bounded by count and time. */
    long wrong = 0;
    int wdone = 0;
    for (int i = 0; i < o.warmup || (i == 0 && o.check); i++) {
      int go = 1;
      if (rank == 0) go = (i == 0) || (sc_now_s() - size_t0 < o.max_seconds / 4);
      MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
      if (!go) break;
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      wdone++;
      if (i == 0 && o.check) {
        double base = (double)n * (n + 1) / 2.0;
        for (size_t k = 0; k < count; k++)
          if (recv[k] != (float)(base + (double)n * (int)(k % 7))) wrong++;
      }
    }
    long wrong_all = 0;
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrong_all) rc = 1;

    /* One timed call tells rank 0 how many fit in the time left; everyone learns it. */
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t tx0 = 0, rx0 = 0, tx1 = 0, rx1 = 0;
    if (have_dev) {
      read_counter(o.netdev, "tx_bytes", &tx0);
      read_counter(o.netdev, "rx_bytes", &rx0);
    }
    double wall0 = sc_wall_s();
    double t0 = sc_now_s();
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double first = sc_now_s() - t0;
    int reps = 1;
    if (rank == 0) {
      double left = o.max_seconds - (sc_now_s() - size_t0);
      double fit = first > 0 ? left / first : o.iters;
      reps = fit < 1 ? 1 : (fit > o.iters ? o.iters : (int)fit);
      if (reps < 1) reps = 1;
    }
    MPI_Bcast(&reps, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 1; i < reps; i++)
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = sc_now_s() - t0;
    double wall1 = sc_wall_s();
    if (have_dev) {
      read_counter(o.netdev, "tx_bytes", &tx1);
      read_counter(o.netdev, "rx_bytes", &rx1);
    }
    double elapsed = 0;
    MPI_Allreduce(&mine, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    double rates[2] = {0, 0}, sums[2] = {0, 0}, maxs[2] = {0, 0};
    if (have_dev && elapsed > 0) {
      rates[0] = (double)(tx1 - tx0) * 8.0 / elapsed / 1e6;
      rates[1] = (double)(rx1 - rx0) * 8.0 / elapsed / 1e6;
    }
    MPI_Reduce(rates, sums, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(rates, maxs, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    if (rank == 0) {
      double t_us = elapsed / reps * 1e6;
      double algbw = (double)count * sizeof(float) / (t_us * 1e-6) / 1e9;
      double busbw = algbw * busfactor;
      uint64_t nbytes = (uint64_t)count * sizeof(float);
      double txm = sums[0] / n, rxm = sums[1] / n;
      double mx = maxs[0] > maxs[1] ? maxs[0] : maxs[1];
      if (o.json) {
        printf("{\"bench\":\"allreduce\",\"mode\":\"%s\",\"workers\":%d,\"aggs\":%d,"
               "\"link_mbit\":%g,\"nranks\":%d,\"naggs\":0,\"provider\":\"mpi-tcp\","
               "\"type\":\"f32\",\"op\":\"sum\",\"bytes\":%" PRIu64 ",\"time_us\":%.2f,"
               "\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,\"reps\":%d,\"wrong\":%ld,"
               "\"t_start\":%.3f,\"t_end\":%.3f",
               o.mode, o.workers, o.aggs, o.link_mbit, n, nbytes, t_us, algbw, busbw, reps, wrong_all,
               wall0, wall1);
        if (have_dev)
          printf(",\"link_tx_mbit\":%.1f,\"link_rx_mbit\":%.1f,\"link_max_mbit\":%.1f", txm,
                 rxm, mx);
        printf("}\n");
      } else {
        printf("  %12" PRIu64 " %12zu %6s %6s %12.1f %9.4f %9.4f %7ld %5d", nbytes, count,
               "float", "sum", t_us, algbw, busbw, wrong_all, reps);
        if (have_dev) printf("  %12.1f %12.1f %8.1f", txm, rxm, mx);
        printf("\n");
      }
      fflush(stdout);
    }
    (void)wdone;
    if (bytes > UINT64_MAX / o.step) break;
  }

  free(send);
  free(recv);
  MPI_Finalize();
  return rc;
}
