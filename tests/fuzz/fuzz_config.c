/* libFuzzer target: the INI config parser with a table of every type. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
	bool b;
	int64_t i, d;
	uint64_t s;
	double f;
	char str[CFG_STR_MAX];
};

static const struct cfg_entry fz_table[] = {
	{ "a", "b", CFG_BOOL, "no", "b", offsetof(struct fz, b), 0, 0, false },
	{ "a", "i", CFG_INT, "1", "i", offsetof(struct fz, i), 0, 100, false },
	{ "a", "s", CFG_SIZE, "1M", "s", offsetof(struct fz, s), 0, 0, false },
	{ "b", "f", CFG_DOUBLE, "0.5", "f", offsetof(struct fz, f), 0, 1, false },
	{ "b", "str", CFG_STRING, "x", "s", offsetof(struct fz, str), 0, 0, false },
	{ "b", "d", CFG_DURATION_MS, "1s", "d", offsetof(struct fz, d), 0, 0, false },
	CFG_ENTRY_END
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct fz obj;
	struct cfg_error err;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	cfg_set_defaults(fz_table, &obj, &err);
	if (cfg_parse_string(fz_table, &obj, text, "fuzz", NULL, &err) == 0) {
		/* Whatever parsed must stay in range. */
		if (obj.i < 0 || obj.i > 100 || obj.f < 0 || obj.f > 1)
			abort();
	}
	free(text);
	return 0;
}
