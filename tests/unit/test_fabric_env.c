/* rxm's settings from the environment (fabric_env.h): what
 * fabric_env_defaults sets, what it leaves to an operator's own value, and
 * what a rank's endpoint costs in address space once they are in force
 * (libfabric reads them at its first use in the process, so the endpoint
 * test comes after the defaults). */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	unsetenv("FI_OFI_RXM_SAR_LIMIT");
}

static const char *const rxm_vars[] = { "FI_OFI_RXM_USE_SRX", "FI_OFI_RXM_MSG_RX_SIZE",
					 "FI_OFI_RXM_BUFFER_SIZE", "FI_OFI_RXM_EAGER_LIMIT",
					 "FI_OFI_RXM_SAR_LIMIT" };

static void rxm_vars_unset(void)
{
	for (size_t i = 0; i < sizeof(rxm_vars) / sizeof(rxm_vars[0]); i++)
		unsetenv(rxm_vars[i]);
}

/* rxm refuses a peer whose eager limit differs from its own: whatever the
 * provider, the buffer size asked for and the libfabric loaded, the
 * settings make rxm come to the rule's eager limit, and a process that
 * sets nothing comes to the same one. */
static void test_eager_rule(void **state)
{
	(void)state;
	static const char *const provs[] = { "tcp", "tcp;ofi_rxm", "verbs", "verbs;ofi_rxm", "auto", NULL };
	static const size_t sizes[] = { 0, 256, 1024, 16384, 65536 };
	static const char *const eagers[] = { NULL, "65536", "4096" };
	bool old = fi_version() < FI_VERSION(1, 20);
	char line[384];

	rxm_vars_unset();
	unsetenv("FI_OFI_RXM_ENABLE_DYN_RBUF");
	unsetenv("FI_OFI_RXM_ENABLE_DIRECT_SEND");
	assert_int_equal(fabric_rxm_eager_rule(), FABRIC_RXM_EAGER_DEFAULT);
	for (size_t p = 0; p < sizeof(provs) / sizeof(provs[0]); p++)
		assert_int_equal(fabric_rxm_eager_in_force(provs[p]), FABRIC_RXM_EAGER_DEFAULT);
	/* buffers apart from the eager limit: only rxm before 1.20 over tcp */
	assert_int_equal(fabric_rxm_eager_apart("tcp"), old);
	assert_int_equal(fabric_rxm_eager_apart("tcp;ofi_rxm"), old);
	assert_false(fabric_rxm_eager_apart("verbs"));
	/* "auto": as tcp where no RDMA device can make it verbs */
	struct stat st;
	bool rdma = !stat("/sys/class/infiniband", &st) && S_ISDIR(st.st_mode);
	if (!rdma || fabric_rxm_eager_apart("auto")) /* an empty folder: no device */
		assert_int_equal(fabric_rxm_eager_apart("auto"), old);
	assert_int_equal(fabric_rxm_eager_apart(NULL), fabric_rxm_eager_apart("auto"));
	setenv("FI_OFI_RXM_ENABLE_DYN_RBUF", "0", 1);
	assert_false(fabric_rxm_eager_apart("tcp"));
	unsetenv("FI_OFI_RXM_ENABLE_DYN_RBUF");

	for (size_t k = 0; k < sizeof(eagers) / sizeof(eagers[0]); k++)
		for (size_t p = 0; p < sizeof(provs) / sizeof(provs[0]); p++)
			for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
				struct fabric_env e = { .provider = provs[p], .rx_buffers = 256,
							.rx_buffer_size = sizes[s] };
				rxm_vars_unset();
				if (eagers[k])
					setenv("FI_OFI_RXM_EAGER_LIMIT", eagers[k], 1);
				size_t want = eagers[k] ? (size_t)atoi(eagers[k]) : FABRIC_RXM_EAGER_DEFAULT;
				assert_int_equal(fabric_rxm_eager_rule(), want);
				fabric_env_defaults(&e, line, sizeof(line));
				if (fabric_rxm_eager_in_force(provs[p]) != want)
					fail_msg("provider %s, buffers of %zu, FI_OFI_RXM_EAGER_LIMIT %s: "
						 "eager limit %zu, want %zu (%s)", provs[p] ? provs[p] : "NULL",
						 sizes[s], eagers[k] ? eagers[k] : "unset",
						 fabric_rxm_eager_in_force(provs[p]), want, line);
				const char *bs = getenv("FI_OFI_RXM_BUFFER_SIZE");
				size_t buf = bs ? (size_t)atol(bs) : 0;
				bool apart = fabric_rxm_eager_apart(provs[p]);
				/* the settings' buffers where rxm keeps them apart (at
				 * most the eager limit), else the eager limit's size;
				 * none of the caller's own: rxm's where that does */
				if (!sizes[s] && (apart ? want >= FABRIC_RXM_BUFFER_DEFAULT
							: want == FABRIC_RXM_BUFFER_DEFAULT))
					assert_null(bs);
				else if (apart && sizes[s])
					assert_int_equal(buf, sizes[s] < want ? sizes[s] : want);
				else
					assert_int_equal(buf, want);
				/* no segmentation: rendezvous above the eager limit */
				assert_int_equal(atol(getenv("FI_OFI_RXM_SAR_LIMIT")), want);
				assert_non_null(strstr(line, "eager limit"));
			}
	rxm_vars_unset();
}

/* With the rank's defaults a tcp endpoint's address space stays small:
 * rxm sizes its message CQ by FI_UNIVERSE_SIZE (12.6 MB an endpoint at
 * libfabric's default of 1,024, touched as completions go round it; the
 * endpoint's other pools are ~3 MB). Where rxm's buffers are of the eager
 * limit's size (libfabric 1.20 and later: fabric_env.h), its receive pool
 * adds 1,024 of them at once (rxm_ep_create_pools(): 16.5 MB at 16 KiB;
 * 21 MB an endpoint measured on 2.6, 33 MB at the default universe). */
static void test_rank_endpoint_size(void **state)
{
	(void)state;
	struct fabric_env e = { .provider = "tcp", .rx_buffers = FABRIC_ENV_RX_BUFFERS,
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
	long long pool_kb = fabric_rxm_eager_apart(p.provider)
				    ? 0 : 1024 * (long long)(fabric_rxm_eager_in_force(p.provider) + 64) / 1024;
	assert_true(per_ep < 8 * 1024 + pool_kb);
	for (int i = 0; i < 4; i++)
		fabric_close(sib[i]);
	fabric_close(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_operator_value),
		cmocka_unit_test(test_eager_rule),
		cmocka_unit_test(test_rank_endpoint_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
