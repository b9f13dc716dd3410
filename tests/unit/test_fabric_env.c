/* rxm's settings from the environment (fabric_env.h): what
 * fabric_env_defaults sets, what it leaves to an operator's own value, and
 * what a rank's endpoint costs in address space once they are in force
 * (libfabric reads them at its first use in the process, so the endpoint
 * test comes after the defaults). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fabric.h"
#include "fabric_env.h"
#include "proc.h"

/* An operator's value stays (and is marked so); a zero field is left to
 * the provider; the others are set. */
static void test_operator_value(void **state)
{
	(void)state;
	struct fabric_env e = { .rx_buffers = 256, .rx_buffer_size = 1024, .universe = 16 };
	char line[384];

	setenv("FI_UNIVERSE_SIZE", "64", 1);
	unsetenv("FI_OFI_RXM_RX_SIZE");
	fabric_env_defaults(&e, line, sizeof(line));
	assert_string_equal(getenv("FI_UNIVERSE_SIZE"), "64");
	assert_non_null(strstr(line, "FI_UNIVERSE_SIZE=64 (environment)"));
	assert_null(getenv("FI_OFI_RXM_RX_SIZE"));
	assert_null(strstr(line, "FI_OFI_RXM_RX_SIZE"));
	assert_string_equal(getenv("FI_OFI_RXM_MSG_RX_SIZE"), "256");
	assert_non_null(strstr(line, "FI_OFI_RXM_USE_SRX=1 FI_OFI_RXM_MSG_RX_SIZE=256"));
	/* as the plugin runs: nothing of its own in the environment */
	unsetenv("FI_UNIVERSE_SIZE");
	unsetenv("FI_OFI_RXM_USE_SRX");
	unsetenv("FI_OFI_RXM_MSG_RX_SIZE");
	unsetenv("FI_OFI_RXM_BUFFER_SIZE");
	unsetenv("FI_OFI_RXM_EAGER_LIMIT");
}

/* With the rank's defaults a tcp endpoint's address space stays small:
 * rxm sizes its message CQ by FI_UNIVERSE_SIZE (12.6 MB an endpoint at
 * libfabric's default of 1,024, touched as completions go round it; the
 * endpoint's other pools are ~3 MB). */
static void test_rank_endpoint_size(void **state)
{
	(void)state;
	struct fabric_env e = { .rx_buffers = FABRIC_ENV_RX_BUFFERS,
				.rx_buffer_size = FABRIC_ENV_RX_BUFFER_SIZE,
				.universe = FABRIC_ENV_RANK_UNIVERSE };
	char line[384];
	struct fabric_params p = { .provider = "tcp", .node = "127.0.0.1" };
	struct fabric *root, *sib[4];

	fabric_env_defaults(&e, line, sizeof(line));
	assert_string_equal(getenv("FI_UNIVERSE_SIZE"), FABRIC_ENV_STR(FABRIC_ENV_RANK_UNIVERSE));
	if (fabric_open(&p, &root))
		fail_msg("fabric_open(tcp) failed");
	long long before = sc_proc_status(0, "VmSize");
	for (int i = 0; i < 4; i++)
		assert_int_equal(fabric_open_sibling(root, 0, &sib[i]), 0);
	long long per_ep = (sc_proc_status(0, "VmSize") - before) / 4;
	print_message("address space per endpoint: %lld kB (%s)\n", per_ep, line);
	assert_true(before > 0);
	assert_true(per_ep < 8 * 1024);
	for (int i = 0; i < 4; i++)
		fabric_close(sib[i]);
	fabric_close(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_operator_value),
		cmocka_unit_test(test_rank_endpoint_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
