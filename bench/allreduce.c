/* Allreduce through libnccl-net-sumcast.so, nccl-tests style: ring-only,
 * aggregator-only and auto split, one row per size (size, count, type,
 * redop, time, algbw, busbw; busbw = algbw * 2(N-1)/N), or one JSON line
 * per row with --json. Starts sumcastd daemons on 127.0.0.1 itself unless
 * --aggs gives addresses. It is the harness's bench mode (the harness plays
 * NCCL's proxy: chunks of at most 2 MiB, 8 outstanding); the plugin and the
 * daemon are found next to this binary (../plugin, ../daemon).
 *
 *   allreduce --nranks 4 --naggs 2 -b 8 -e 256M [--type f32] [--json]
 *
 * Benchmarks report; they do not pass or fail on time. */
#define HARNESS_NO_MAIN 1
#include "../tests/plugin/harness.c"

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "bench");
}
