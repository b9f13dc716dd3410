/* plugin_props_as_v8 / _v11 / _v12 (plugin/plugin.c): one v9 getter, each
 * NCCL layout filled from it. Every field the layouts share must arrive
 * with its value (distinct values, so that a field copied into its
 * neighbour shows), the devices of vProps one by one with the unused slots
 * zero (v12 has 8, v11 4), maxMultiRequestSize 1, railId / planeId
 * NCCL_NET_ID_UNDEF (docs/plugin.md, "Table versions"), and a getter's
 * error must come back unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "plugin.h"

static char name[] = "sumcast-test", pci[] = "/sys/devices/x";

static ncclResult_t fill_v9(int dev, ncclNetProperties_v9_t *p)
{
	if (dev != 0)
		return ncclInvalidArgument;
	p->name = name;
	p->pciPath = pci;
	p->guid = 0x1122334455667788ull;
	p->ptrSupport = NCCL_PTR_HOST;
	p->regIsGlobal = 3;
	p->forceFlush = 4;
	p->speed = 25000;
	p->port = 6;
	p->latency = 7.5f;
	p->maxComms = 65536;
	p->maxRecvs = 8;
	p->netDeviceType = NCCL_NET_DEVICE_HOST;
	p->netDeviceVersion = 11;
	p->vProps.ndevs = 3;
	p->vProps.devs[0] = 12;
	p->vProps.devs[1] = 13;
	p->vProps.devs[2] = 14;
	p->maxP2pBytes = 1ull << 30;
	p->maxCollBytes = 512ull << 20;
	return ncclSuccess;
}

/* The fields v9, v11 and v12 share, as fill_v9 set them. */
#define CHECK_COMMON(p)                                                       \
	do {                                                                  \
		assert_ptr_equal((p)->name, name);                            \
		assert_ptr_equal((p)->pciPath, pci);                          \
		assert_true((p)->guid == 0x1122334455667788ull);              \
		assert_int_equal((p)->ptrSupport, NCCL_PTR_HOST);             \
		assert_int_equal((p)->regIsGlobal, 3);                        \
		assert_int_equal((p)->forceFlush, 4);                         \
		assert_int_equal((p)->speed, 25000);                          \
		assert_int_equal((p)->port, 6);                               \
		assert_true((p)->latency == 7.5f);                            \
		assert_int_equal((p)->maxComms, 65536);                       \
		assert_int_equal((p)->maxRecvs, 8);                           \
		assert_int_equal((p)->netDeviceType, NCCL_NET_DEVICE_HOST);   \
		assert_int_equal((p)->netDeviceVersion, 11);                  \
		assert_int_equal((p)->vProps.ndevs, 3);                       \
		assert_int_equal((p)->vProps.devs[0], 12);                    \
		assert_int_equal((p)->vProps.devs[1], 13);                    \
		assert_int_equal((p)->vProps.devs[2], 14);                    \
		assert_true((p)->maxP2pBytes == 1ull << 30);                  \
		assert_true((p)->maxCollBytes == 512ull << 20);               \
		assert_int_equal((p)->maxMultiRequestSize, 1);                \
	} while (0)

static void test_v12(void **state)
{
	ncclNetProperties_v12_t p;

	(void)state;
	memset(&p, 0x5a, sizeof(p));
	assert_int_equal(plugin_props_as_v12(fill_v9, 0, &p), ncclSuccess);
	CHECK_COMMON(&p);
	for (int i = 3; i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
		assert_int_equal(p.vProps.devs[i], 0);
	assert_int_equal(p.railId, NCCL_NET_ID_UNDEF);
	assert_int_equal(p.planeId, NCCL_NET_ID_UNDEF);
}

static void test_v11(void **state)
{
	ncclNetProperties_v11_t p;

	(void)state;
	memset(&p, 0x5a, sizeof(p));
	assert_int_equal(plugin_props_as_v11(fill_v9, 0, &p), ncclSuccess);
	CHECK_COMMON(&p);
	assert_int_equal(p.vProps.devs[3], 0);
}

static void test_v8(void **state)
{
	ncclNetProperties_v8_t p;

	(void)state;
	memset(&p, 0x5a, sizeof(p));
	assert_int_equal(plugin_props_as_v8(fill_v9, 0, &p), ncclSuccess);
	assert_ptr_equal(p.name, name);
	assert_ptr_equal(p.pciPath, pci);
	assert_true(p.guid == 0x1122334455667788ull);
	assert_int_equal(p.regIsGlobal, 3);
	assert_int_equal(p.speed, 25000);
	assert_int_equal(p.port, 6);
	assert_true(p.latency == 7.5f);
	assert_int_equal(p.maxComms, 65536);
	assert_int_equal(p.maxRecvs, 8);
	assert_int_equal(p.netDeviceVersion, 11);
}

/* A getter's error is the caller's answer, whatever the layout. */
static void test_error(void **state)
{
	ncclNetProperties_v12_t p12;
	ncclNetProperties_v11_t p11;
	ncclNetProperties_v8_t p8;

	(void)state;
	assert_int_equal(plugin_props_as_v12(fill_v9, 1, &p12), ncclInvalidArgument);
	assert_int_equal(plugin_props_as_v11(fill_v9, 1, &p11), ncclInvalidArgument);
	assert_int_equal(plugin_props_as_v8(fill_v9, 1, &p8), ncclInvalidArgument);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v12),
		cmocka_unit_test(test_v11),
		cmocka_unit_test(test_v8),
		cmocka_unit_test(test_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
