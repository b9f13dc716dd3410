/* Table-driven configuration (config.h): INI, environment, ranges, --dump-config. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

extern char **environ;

#define FIELD(obj, e, type) ((type *)((char *)(obj) + (e)->offset))
#define CFIELD(obj, e, type) ((const type *)((const char *)(obj) + (e)->offset))

static void err_set(struct cfg_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void err_set(struct cfg_error *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

size_t cfg_count(const struct cfg_entry *table)
{
	size_t n = 0;

	while (table[n].key)
		n++;
	return n;
}

const struct cfg_entry *cfg_find(const struct cfg_entry *table, const char *section,
				 const char *key)
{
	for (const struct cfg_entry *e = table; e->key; e++)
		if (!strcasecmp(e->section, section) && !strcasecmp(e->key, key))
			return e;
	return NULL;
}

const char *cfg_source_name(enum cfg_source s)
{
	switch (s) {
	case CFG_SRC_FILE:
		return "file";
	case CFG_SRC_ENV:
		return "env";
	default:
		return "default";
	}
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(v, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* Parses a number with an optional unit suffix from units[] (NULL-terminated
 * pairs of name, multiplier). Whole input must be consumed. */
struct unit {
	const char *name;
	double mult;
};

static int parse_scaled(const char *v, const struct unit *units, double *out)
{
	char *end;

	errno = 0;
	double d = strtod(v, &end);
	if (end == v || errno || !isfinite(d))
		return -EINVAL;
	while (isspace((unsigned char)*end))
		end++;
	if (*end) {
		const struct unit *u;
		for (u = units; u && u->name; u++)
			if (!strcasecmp(end, u->name))
				break;
		if (!u || !u->name)
			return -EINVAL;
		d *= u->mult;
	}
	*out = d;
	return 0;
}

static const struct unit size_units[] = {
	{ "K", 1024.0 }, { "KiB", 1024.0 }, { "M", 1048576.0 }, { "MiB", 1048576.0 },
	{ "G", 1073741824.0 }, { "GiB", 1073741824.0 }, { "T", 1099511627776.0 },
	{ "TiB", 1099511627776.0 }, { "B", 1.0 }, { NULL, 0 }
};
static const struct unit ms_units[] = {
	{ "ms", 1.0 }, { "s", 1000.0 }, { "m", 60000.0 }, { "min", 60000.0 }, { NULL, 0 }
};

/* Bytes, with an optional suffix of size_units: CFG_SIZE and CFG_SIZE_AUTO
 * take the same spellings ("16384", "16K", "16k", "16KiB", "1.5M"). */
static int parse_size(const char *v, double *out)
{
	double d;

	if (parse_scaled(v, size_units, &d) || d < 0 || d != floor(d) || d > 1.8e19)
		return -EINVAL;
	*out = d;
	return 0;
}

int cfg_parse_size(const char *v, uint64_t *out)
{
	double d;

	if (parse_size(v, &d))
		return -EINVAL;
	*out = (uint64_t)d;
	return 0;
}

static int check_range(const struct cfg_entry *e, double d, const char *v, struct cfg_error *err)
{
	if ((e->min != 0 || e->max != 0) && (d < e->min || d > e->max)) {
		err_set(err, "%s%s%s = %s is out of range [%g, %g]", e->section,
			*e->section ? "." : "", e->key, v, e->min, e->max);
		return -EINVAL;
	}
	return 0;
}

int cfg_set(const struct cfg_entry *e, void *obj, const char *value, struct cfg_error *err)
{
	const char *what = NULL;
	double d;
	bool b;
	int rc;

	switch (e->type) {
	case CFG_BOOL:
		if (parse_bool(value, &b)) {
			what = "a boolean (true/false/yes/no/on/off/1/0)";
			break;
		}
		*FIELD(obj, e, bool) = b;
		return 0;
	case CFG_INT:
		if (parse_scaled(value, NULL, &d) || d != floor(d) || fabs(d) > 9.0e18) {
			what = "an integer";
			break;
		}
		if ((rc = check_range(e, d, value, err)))
			return rc;
		*FIELD(obj, e, int64_t) = (int64_t)d;
		return 0;
	case CFG_SIZE_AUTO:
		if (!*value || !strcasecmp(value, "auto")) {
			*FIELD(obj, e, uint64_t) = CFG_SIZE_AUTO_VALUE;
			return 0;
		}
		__attribute__((fallthrough)); /* else a size, as CFG_SIZE */
	case CFG_SIZE:
		if (parse_size(value, &d)) {
			what = e->type == CFG_SIZE_AUTO ? "auto or a size in bytes (suffix K, M, G or T allowed)"
							: "a size in bytes (suffix K, M, G or T allowed)";
			break;
		}
		if ((rc = check_range(e, d, value, err)))
			return rc;
		*FIELD(obj, e, uint64_t) = (uint64_t)d;
		return 0;
	case CFG_DURATION_MS:
		if (parse_scaled(value, ms_units, &d) || d < 0 || d > 9.0e18) {
			what = "a duration (suffix ms, s or m; bare number = ms)";
			break;
		}
		if ((rc = check_range(e, d, value, err)))
			return rc;
		*FIELD(obj, e, int64_t) = (int64_t)d;
		return 0;
	case CFG_DOUBLE:
		if (parse_scaled(value, NULL, &d)) {
			what = "a number";
			break;
		}
		if ((rc = check_range(e, d, value, err)))
			return rc;
		*FIELD(obj, e, double) = d;
		return 0;
	case CFG_STRING:
		if (strlen(value) >= CFG_STR_MAX) {
			what = "a string shorter than 256 bytes";
			break;
		}
		strcpy(FIELD(obj, e, char), value);
		return 0;
	}
	err_set(err, "%s%s%s = \"%s\": expected %s", e->section, *e->section ? "." : "", e->key,
		value, what ? what : "a known type");
	return -EINVAL;
}

int cfg_set_defaults(const struct cfg_entry *table, void *obj, struct cfg_error *err)
{
	for (const struct cfg_entry *e = table; e->key; e++) {
		int rc = cfg_set(e, obj, e->def, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* A size as the file takes it: the largest suffix that divides it. */
static void format_size(uint64_t v, char *buf, size_t len)
{
	static const char sfx[] = "TGMK";

	for (int i = 0; i < 4; i++) {
		uint64_t m = 1ull << (10 * (4 - i));
		if (v && v % m == 0) {
			snprintf(buf, len, "%llu%c", (unsigned long long)(v / m), sfx[i]);
			return;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)v);
}

void cfg_format(const struct cfg_entry *e, const void *obj, char *buf, size_t len)
{
	switch (e->type) {
	case CFG_BOOL:
		snprintf(buf, len, "%s", *CFIELD(obj, e, bool) ? "true" : "false");
		break;
	case CFG_INT:
		snprintf(buf, len, "%lld", (long long)*CFIELD(obj, e, int64_t));
		break;
	case CFG_SIZE:
		format_size(*CFIELD(obj, e, uint64_t), buf, len);
		break;
	case CFG_SIZE_AUTO:
		if (*CFIELD(obj, e, uint64_t) == CFG_SIZE_AUTO_VALUE)
			snprintf(buf, len, "auto");
		else
			format_size(*CFIELD(obj, e, uint64_t), buf, len);
		break;
	case CFG_DURATION_MS: {
		int64_t v = *CFIELD(obj, e, int64_t);
		if (v && v % 1000 == 0)
			snprintf(buf, len, "%llds", (long long)(v / 1000));
		else
			snprintf(buf, len, "%lldms", (long long)v);
		break;
	}
	case CFG_DOUBLE:
		snprintf(buf, len, "%g", *CFIELD(obj, e, double));
		break;
	case CFG_STRING:
		snprintf(buf, len, "%s", CFIELD(obj, e, char));
		break;
	}
}

struct ini_ctx {
	const struct cfg_entry *table;
	void *obj;
	const char *name;
	enum cfg_source *src;
	struct cfg_error *err;
	int lineno;
	int failed;    /* line of the first error the handler found, 0: none */
	int *set_line; /* per table row: the line that set it (0: not set) */
	int read_errno; /* the file could not be read (e.g. EISDIR) */
	bool indented;  /* the line just read starts with blanks */
};

/* Debian's libinih is built without INI_HANDLER_LINENO, so lines are counted
 * by our reader: inih calls the handler right after reading the line. */
struct line_reader {
	FILE *f;          /* file, or */
	const char *text; /* string */
	int *lineno;
	int *read_errno;  /* file: set when fgets fails with an error */
	bool *indented;   /* the line read starts with a blank */
};

static char *reader_next(char *buf, int size, void *stream)
{
	struct line_reader *r = stream;

	if (r->f) {
		if (!fgets(buf, size, r->f)) {
			if (ferror(r->f))
				*r->read_errno = errno ? errno : EIO;
			return NULL;
		}
	} else {
		if (!*r->text)
			return NULL;
		const char *nl = strchr(r->text, '\n');
		size_t n = nl ? (size_t)(nl - r->text) + 1 : strlen(r->text);
		if (n > (size_t)size - 1)
			n = (size_t)size - 1;
		memcpy(buf, r->text, n);
		buf[n] = '\0';
		r->text += n;
	}
	(*r->lineno)++;
	*r->indented = buf[0] == ' ' || buf[0] == '\t';
	return buf;
}

static int cfg_ini_handler(void *user, const char *section, const char *key, const char *value)
{
	struct ini_ctx *c = user;
	int line = c->lineno;

	if (c->failed)
		return 0;
	const struct cfg_entry *e = cfg_find(c->table, section, key);
	if (!e) {
		err_set(c->err, "%s:%d: unknown setting [%s] %s", c->name, line, section, key);
		c->failed = line;
		return 0;
	}
	size_t row = (size_t)(e - c->table);
	if (c->set_line && c->set_line[row]) {
		/* A second value would silently win: say where both are.
		 * inih hands an indented line to the handler as the
		 * continuation of the setting above it. */
		if (c->indented)
			err_set(c->err, "%s:%d: indented line continues [%s] %s of line %d; a value is one line",
				c->name, line, e->section, e->key, c->set_line[row]);
		else
			err_set(c->err, "%s:%d: [%s] %s is set again (first set on line %d)", c->name, line,
				e->section, e->key, c->set_line[row]);
		c->failed = line;
		return 0;
	}
	struct cfg_error sub;
	if (cfg_set(e, c->obj, value, &sub)) {
		err_set(c->err, "%s:%d: %s", c->name, line, sub.msg);
		c->failed = line;
		return 0;
	}
	if (c->set_line)
		c->set_line[row] = line;
	if (c->src)
		c->src[e - c->table] = CFG_SRC_FILE;
	return 1;
}

/* rc is ini_parse_stream's: 0, -1 (could not read or allocate) or the
 * first line with an error: a syntax error, or a line the handler refused
 * (c->failed). inih carries on after a syntax error, so a key below a
 * broken section header reaches the handler (under the previous section):
 * the earlier line is the one to report. */
static int ini_result(struct ini_ctx *c, int rc)
{
	free(c->set_line);
	c->set_line = NULL;
	if (c->read_errno) {
		err_set(c->err, "%s: cannot read: %s", c->name, strerror(c->read_errno));
		return -c->read_errno;
	}
	if (rc > 0 && (!c->failed || rc < c->failed)) {
		err_set(c->err, "%s:%d: syntax error (a section header is [name], a setting is key = value)",
			c->name, rc);
		return -EINVAL;
	}
	if (c->failed)
		return -EINVAL;
	if (rc < 0) {
		err_set(c->err, "%s: cannot read: %s", c->name, strerror(errno ? errno : EIO));
		return -EIO;
	}
	return 0;
}

static void ini_ctx_init(struct ini_ctx *c, const struct cfg_entry *table, void *obj,
			 const char *name, enum cfg_source *src, struct cfg_error *err)
{
	memset(c, 0, sizeof(*c));
	c->table = table;
	c->obj = obj;
	c->name = name;
	c->src = src;
	c->err = err;
	/* Without it duplicates go undetected; nothing else depends on it. */
	c->set_line = calloc(cfg_count(table) + 1, sizeof(*c->set_line));
}

int cfg_parse_file(const struct cfg_entry *table, void *obj, const char *path,
		   enum cfg_source *src, struct cfg_error *err)
{
	struct ini_ctx c;
	struct stat st;
	FILE *f = fopen(path, "r");

	if (!f) {
		int e = errno;
		err_set(err, "%s: cannot open: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		/* fopen() opens a directory and reads nothing from it: that
		 * would start with the defaults. */
		fclose(f);
		err_set(err, "%s: cannot read: %s", path, strerror(EISDIR));
		return -EISDIR;
	}
	ini_ctx_init(&c, table, obj, path, src, err);
	struct line_reader r = { f, NULL, &c.lineno, &c.read_errno, &c.indented };
	int rc = ini_parse_stream(reader_next, &r, cfg_ini_handler, &c);
	fclose(f);
	return ini_result(&c, rc);
}

int cfg_parse_string(const struct cfg_entry *table, void *obj, const char *text,
		     const char *name, enum cfg_source *src, struct cfg_error *err)
{
	struct ini_ctx c;

	ini_ctx_init(&c, table, obj, name, src, err);
	struct line_reader r = { NULL, text, &c.lineno, &c.read_errno, &c.indented };

	return ini_result(&c, ini_parse_stream(reader_next, &r, cfg_ini_handler, &c));
}

void cfg_env_name(const struct cfg_entry *e, const char *prefix, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s", prefix, e->section, *e->section ? "_" : "", e->key);
	for (char *p = buf + strlen(prefix); *p; p++)
		*p = (*p == '-' || *p == '.') ? '_' : (char)toupper((unsigned char)*p);
}

int cfg_apply_env(const struct cfg_entry *table, void *obj, const char *prefix,
		  bool allow_unknown, enum cfg_source *src, struct cfg_error *err)
{
	size_t plen = strlen(prefix);
	char name[256];

	for (char **env = environ; env && *env; env++) {
		const char *kv = *env;
		const char *eq = strchr(kv, '=');
		if (!eq || strncmp(kv, prefix, plen) || (size_t)(eq - kv) >= sizeof(name))
			continue;
		const struct cfg_entry *e;
		for (e = table; e->key; e++) {
			cfg_env_name(e, prefix, name, sizeof(name));
			if (strlen(name) == (size_t)(eq - kv) && !strncmp(name, kv, (size_t)(eq - kv)))
				break;
		}
		if (!e->key) {
			if (allow_unknown)
				continue;
			err_set(err, "unknown environment setting %.*s", (int)(eq - kv), kv);
			return -EINVAL;
		}
		struct cfg_error sub;
		if (cfg_set(e, obj, eq + 1, &sub)) {
			err_set(err, "environment %.*s: %s", (int)(eq - kv), kv, sub.msg);
			return -EINVAL;
		}
		if (src)
			src[e - table] = CFG_SRC_ENV;
	}
	return 0;
}

int cfg_load(const struct cfg_entry *table, void *obj, const char *path, const char *prefix,
	     enum cfg_source *src, struct cfg_error *err)
{
	int rc = cfg_set_defaults(table, obj, err);

	if (src)
		memset(src, 0, cfg_count(table) * sizeof(*src));
	if (!rc && path)
		rc = cfg_parse_file(table, obj, path, src, err);
	if (!rc && prefix)
		rc = cfg_apply_env(table, obj, prefix, false, src, err);
	return rc;
}

/* A comment wrapped at word boundaries to lines of at most 78 characters:
 * inih reads lines of up to 200 bytes, and the rest of a longer one as a
 * line of its own (a syntax error in the file the dump is meant to be). */
static void dump_comment(FILE *out, const char *text)
{
	const size_t width = 76;

	while (*text) {
		size_t n = strlen(text);
		if (n > width) {
			size_t cut = width;
			while (cut && text[cut] != ' ')
				cut--;
			if (!cut) /* one word wider than the line: whole */
				cut = strcspn(text, " ");
			n = cut;
		}
		fprintf(out, "# %.*s\n", (int)n, text);
		text += n;
		while (*text == ' ')
			text++;
	}
}

void cfg_dump(const struct cfg_entry *table, const void *obj, const char *prefix,
	      const enum cfg_source *src, FILE *out)
{
	const char *section = NULL;
	char val[CFG_STR_MAX + 32], env[256];

	for (const struct cfg_entry *e = table; e->key; e++) {
		if (!section || strcmp(section, e->section)) {
			section = e->section;
			if (*section)
				fprintf(out, "%s[%s]\n", e == table ? "" : "\n", section);
		}
		cfg_format(e, obj, val, sizeof(val));
		dump_comment(out, e->help);
		if (prefix) {
			cfg_env_name(e, prefix, env, sizeof(env));
			fprintf(out, "# default: %s; env: %s%s%s\n", e->def, env,
				e->reloadable ? "; reloadable on SIGHUP" : "",
				src && src[e - table] ? (src[e - table] == CFG_SRC_FILE ? "; set in file"
											 : "; set by env")
						      : "");
		}
		fprintf(out, "%s = %s\n", e->key, val);
	}
}
