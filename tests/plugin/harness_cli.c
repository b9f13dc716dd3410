/* plugin_harness: the harness with the plugin and the daemon of this build
 * as defaults (bench/allreduce finds them next to itself instead). */
#include "harness.h"

#ifndef HARNESS_PLUGIN_PATH
#define HARNESS_PLUGIN_PATH ""
#endif
#ifndef HARNESS_DAEMON_PATH
#define HARNESS_DAEMON_PATH ""
#endif

int main(int argc, char **argv)
{
	harness_plugin_default = HARNESS_PLUGIN_PATH;
	harness_daemon_default = HARNESS_DAEMON_PATH;
	return harness_main(argc, argv, NULL);
}
