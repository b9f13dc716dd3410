/* What an aggregator fault costs a job: per fault kind (SIGKILL, SIGSTOP
 * past the PING deadline, SIGTERM's drain and ABORT, SIGKILL + restart on
 * the same port) the time to detect it, to agree and to recover, request
 * latency around it, throughput before and after it against a fresh
 * communicator over the surviving aggregators, and the fault-free cost of
 * being able to survive faults (SUMCAST_FAILOVER on vs off). A table, or a
 * JSON line per row with --json. Starts its own sumcastd on 127.0.0.1;
 * the plugin and the daemon are found next to this binary.
 *
 *   faults --nranks 4 --naggs 2 [--kinds kill,stop,term,restart] [-e 2M]
 *          [--before 2] [--after 3] [--retention-bytes 64M] [--type f32] [--json]
 *
 * It is the plugin harness's "faults" mode (tests/plugin/harness_faultbench.c).
 * Benchmarks report; they do not pass or fail on time. */
#include "../tests/plugin/harness.h"

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "faults");
}
