/* Allreduce through libnccl-net-sumcast.so, nccl-tests style: ring-only,
 * aggregator-only and auto split, one row per size with the three modes side
 * by side (time, busbw; busbw = algbw * 2(N-1)/N; the auto split used and
 * auto / min(ring, agg)), or one JSON line per (size, mode) with --json.
 * The three modes run interleaved in the same processes (one copy of the
 * plugin each) and the time is the median of per-round samples, so the load
 * of other processes on the machine hits all three alike. Starts sumcastd
 * daemons on 127.0.0.1 itself unless --aggs gives addresses. It is the
 * harness's bench mode (the harness plays NCCL's proxy: chunks of at most
 * 2 MiB, 8 outstanding); the plugin and the daemon are found next to this
 * binary (../plugin, ../daemon).
 *
 *   allreduce --nranks 4 --naggs 2 -b 8 -e 256M [-f 2] [--type f32] [--json]
 *             [--time-per-size S] [--rounds R] [--variant NAME=SPLIT[@SO][%VAR=VAL...]]...
 *             [--coll allreduce|reducescatter|allgather] [--no-rtt]
 *
 * --coll reducescatter|allgather times CollNet Direct's window calls as
 * NCCL's proxy issues them (size = the whole buffer of N blocks, busbw =
 * algbw * (N-1)/N, the ring column only unless --variant asks). Every run
 * also measures fabric_rtt: an 8-byte ping-pong between ranks 0 and 1 over
 * the same provider, interleaved with the first size's rounds (a JSON row,
 * a comment line in the table; --no-rtt: none), the floor of the
 * aggregator path's one round trip.
 *
 * Benchmarks report; they do not pass or fail on time. */
#include "../tests/plugin/harness.h"

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "bench");
}
