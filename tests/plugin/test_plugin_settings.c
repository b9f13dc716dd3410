/* The SUMCAST_* settings table (plugin/plugin.c): every size setting takes
 * the same spellings, through the config module's typed parsers ("16384",
 * "16K", "16k", "16KiB"), and the one that can be "auto"
 * (SUMCAST_EAGER_BYTES) takes that too; the environment sets them as NCCL's
 * process would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugin.h"

static bool is_size(const struct cfg_entry *e)
{
	return e->type == CFG_SIZE || e->type == CFG_SIZE_AUTO;
}

/* A key that names bytes is a size, typed as one: no size is parsed by
 * hand elsewhere. */
static void sizes_are_typed(void **state)
{
	(void)state;
	size_t n = 0;
	for (const struct cfg_entry *e = plugin_settings_table(); e->key; e++) {
		size_t len = strlen(e->key);
		if (len > 6 && !strcmp(e->key + len - 6, "_bytes")) {
			assert_true(is_size(e));
			n++;
		}
	}
	assert_int_equal(n, 4); /* chunk, ring_chunk, small, eager */
}

static void sizes_spelled_alike(void **state)
{
	(void)state;
	static const char *const same[] = { "16384", "16K", "16k", "16KiB", "16kib", "16 K",
					    "0.015625M" };
	static const char *const bad[] = { "16KB", "16Q", "-1", "1.5", "K" };
	struct plugin_settings s;
	struct cfg_error err;
	for (const struct cfg_entry *e = plugin_settings_table(); e->key; e++) {
		if (!is_size(e))
			continue;
		for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
			uint64_t *v = (uint64_t *)((char *)&s + e->offset);
			*v = 0;
			assert_int_equal(cfg_set(e, &s, same[i], &err), 0);
			assert_int_equal(*v, 16384);
		}
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			assert_int_equal(cfg_set(e, &s, bad[i], &err), -EINVAL);
		/* auto where it applies, and only there */
		int want = e->type == CFG_SIZE_AUTO ? 0 : -EINVAL;
		assert_int_equal(cfg_set(e, &s, "auto", &err), want);
		assert_int_equal(cfg_set(e, &s, "AUTO", &err), want);
	}
}

/* From the environment, as plugin_init reads it (once per process). */
static void environment(void **state)
{
	(void)state;
	setenv("SUMCAST_EAGER_BYTES", "8KiB", 1);
	setenv("SUMCAST_CHUNK_BYTES", "64k", 1);
	setenv("SUMCAST_RING_CHUNK_BYTES", "128KiB", 1);
	setenv("SUMCAST_SMALL_BYTES", "32768", 1);
	setenv("SUMCAST_TUNER", "0", 1);
	assert_int_equal(plugin_init(NULL), 0);
	assert_int_equal(plugin_cfg.eager_bytes, 8192);
	assert_int_equal(plugin_cfg.chunk_bytes, 65536);
	assert_int_equal(plugin_cfg.ring_chunk_bytes, 131072);
	assert_int_equal(plugin_cfg.small_bytes, 32768);
	/* the default of the eager cut: auto (the provider's figure) */
	struct plugin_settings d;
	struct cfg_error err;
	assert_int_equal(cfg_set_defaults(plugin_settings_table(), &d, &err), 0);
	assert_true(d.eager_bytes == CFG_SIZE_AUTO_VALUE);
	/* the tuner is on unless SUMCAST_TUNER says otherwise (set 0 above) */
	assert_true(d.tuner);
	assert_false(plugin_cfg.tuner);
	assert_int_equal(d.chunk_bytes, 256 << 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sizes_are_typed),
		cmocka_unit_test(sizes_spelled_alike),
		cmocka_unit_test(environment),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
