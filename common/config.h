/* Table-driven configuration.
 *
 * One table of struct cfg_entry describes every setting: section, key, type,
 * default, help, and where the value lives in the caller's struct. The same
 * table parses an INI file (libinih), applies environment overrides, checks
 * ranges, and prints every setting with its value and help (--dump-config).
 *
 * Environment names: <prefix><SECTION>_<KEY> upper-cased, with '-' and '.'
 * turned into '_' (prefix "SUMCASTD_": [net] provider -> SUMCASTD_NET_PROVIDER).
 * Entries with an empty section use <prefix><KEY> (the plugin's SUMCAST_*). */
#ifndef SUMCAST_CONFIG_H
#define SUMCAST_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cfg_type {
	CFG_BOOL,   /* bool: true/false/yes/no/on/off/1/0 */
	CFG_INT,    /* int64_t, range [min, max] */
	CFG_SIZE,   /* uint64_t bytes with optional K/M/G/T suffix (powers of 1024) */
	CFG_DOUBLE, /* double, range [min, max] */
	CFG_STRING, /* char[CFG_STR_MAX] */
	CFG_DURATION_MS, /* int64_t milliseconds; suffix ms/s/m, bare number = ms */
	CFG_SIZE_AUTO, /* uint64_t: a size as CFG_SIZE, or "auto" (also empty): CFG_SIZE_AUTO_VALUE */
};

/* What a CFG_SIZE_AUTO field holds for "auto": the caller picks the size
 * (no size parses to it: sizes stop at 1.8e19). */
#define CFG_SIZE_AUTO_VALUE UINT64_MAX

#define CFG_STR_MAX 256

struct cfg_entry {
	const char *section; /* "" for env-only tables */
	const char *key;
	enum cfg_type type;
	const char *def;  /* default, in the same syntax as the file */
	const char *help; /* one line */
	size_t offset;    /* offsetof(struct yours, field) */
	double min, max;  /* for INT/SIZE/SIZE_AUTO/DOUBLE/DURATION (not "auto");
			   * min == max == 0: no check */
	bool reloadable;  /* may change on SIGHUP */
};

#define CFG_ENTRY_END { NULL, NULL, 0, NULL, NULL, 0, 0, 0, false }

/* Where a value came from, for --dump-config and the plugin's log lines. */
enum cfg_source { CFG_SRC_DEFAULT = 0, CFG_SRC_FILE, CFG_SRC_ENV };

struct cfg_error {
	char msg[512];
};

/* Sets every field to its default. Returns 0 or -EINVAL (a bad default is a
 * programming error; msg says which). */
int cfg_set_defaults(const struct cfg_entry *table, void *obj, struct cfg_error *err);

/* Parses one INI file into obj. Unknown sections/keys and bad values are
 * errors naming the file and line. Does not apply defaults first. */
int cfg_parse_file(const struct cfg_entry *table, void *obj, const char *path,
		   enum cfg_source *src, struct cfg_error *err);

/* Same, from a string (tests, fuzzers). name is used in messages. */
int cfg_parse_string(const struct cfg_entry *table, void *obj, const char *text,
		     const char *name, enum cfg_source *src, struct cfg_error *err);

/* Applies <prefix>... environment variables. Unknown variables with the prefix
 * are errors (a misspelt override must not be silently ignored) unless
 * allow_unknown. src (may be NULL) is an array with one slot per entry. */
int cfg_apply_env(const struct cfg_entry *table, void *obj, const char *prefix,
		  bool allow_unknown, enum cfg_source *src, struct cfg_error *err);

/* defaults + file (if path) + env (if prefix). */
int cfg_load(const struct cfg_entry *table, void *obj, const char *path, const char *prefix,
	     enum cfg_source *src, struct cfg_error *err);

/* Sets one value from text. Returns 0 or -EINVAL with err->msg. */
int cfg_set(const struct cfg_entry *e, void *obj, const char *value, struct cfg_error *err);

/* Formats the value of e in obj as file syntax. */
void cfg_format(const struct cfg_entry *e, const void *obj, char *buf, size_t len);

/* Prints an INI file with every setting: help as comment, then key = value. */
void cfg_dump(const struct cfg_entry *table, const void *obj, const char *prefix,
	      const enum cfg_source *src, FILE *out);

/* Lookup; NULL if unknown. */
const struct cfg_entry *cfg_find(const struct cfg_entry *table, const char *section,
				 const char *key);
size_t cfg_count(const struct cfg_entry *table);

/* A size as settings spell it ("65536", "64K", "64KiB", "1.5M"), for
 * command lines that take sizes: 0 or -EINVAL. */
int cfg_parse_size(const char *v, uint64_t *out);
/* Env name of an entry into buf. */
void cfg_env_name(const struct cfg_entry *e, const char *prefix, char *buf, size_t len);
const char *cfg_source_name(enum cfg_source s);

#endif
