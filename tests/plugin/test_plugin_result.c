/* plugin_result(): the one place negative errnos and FI_E* become
 * ncclResult_t. What NCCL gets for each failure the plugin can report, as
 * the README's troubleshooting table says: an aggregator's or a peer's doing
 * is ncclRemoteError (NCCL names the remote side), a bad argument
 * ncclInvalidArgument, memory ncclSystemError, anything else internal. */
#include <errno.h>
#include <rdma/fi_errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "plugin.h"

static void test_mapping(void **state)
{
	(void)state;
	assert_int_equal(plugin_result(0), ncclSuccess);
	assert_int_equal(plugin_result(3), ncclSuccess);
	assert_int_equal(plugin_result(-EINVAL), ncclInvalidArgument);
	assert_int_equal(plugin_result(-ENOTSUP), ncclInvalidArgument);
	assert_int_equal(plugin_result(-ENOMEM), ncclSystemError);
	/* the remote side: peers, aggregators (ABORT rank_left / shutdown,
	 * refused or wrong data), connections, timeouts */
	static const int remote[] = { EPIPE, ECONNRESET, ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH,
				      ECONNABORTED, ESHUTDOWN, EPROTO };
	for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
		assert_int_equal(plugin_result(-remote[i]), ncclRemoteError);
	/* libfabric's own codes (a failed completion) */
	assert_int_equal(plugin_result(-FI_ETRUNC), ncclRemoteError);
	assert_int_equal(plugin_result(-FI_EOTHER), ncclRemoteError);
	/* the rest */
	assert_int_equal(plugin_result(-EBADF), ncclInternalError);
	assert_int_equal(plugin_result(-EIO), ncclInternalError);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_mapping) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
