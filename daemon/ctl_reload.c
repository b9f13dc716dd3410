/* SIGHUP: re-read the file and the environment, apply what is reloadable,
 * log what needs a restart; a file that does not parse or a key file that
 * cannot be used changes nothing. Also the key file's loading. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl_api.h"
#include "ctl.h"
#include "log.h"

int ctl_key_load(const char *path, uint8_t *key, size_t *len)
{
	const char *why = NULL;
	int rc;

	if (!*path) {
		*len = 0;
		return 0;
	}
	rc = wire_key_load(path, key, len, &why);
	if (rc)
		SC_ERR("auth.key-file %s: %s", path, why ? why : strerror(-rc));
	else
		control_key_mode_check(path);
	return rc;
}

void control_key_mode_check(const char *path)
{
	struct stat st;

	/* The key lets whoever holds it join jobs and (with data-plane
	 * authenticity) send data as a rank: other users must not read it. */
	if (stat(path, &st) == 0 && (st.st_mode & (S_IROTH | S_IWOTH)))
		SC_WARN("auth.key-file %s is %s by every user (mode %04o): chmod 600 it (0640 with the daemon's group)",
			path, st.st_mode & S_IWOTH ? "writable" : "readable",
			(unsigned)(st.st_mode & 07777));
}

int control_reload(struct daemon *d, char *why, size_t why_len)
{
	struct settings n;
	enum cfg_source nsrc[SETTINGS_MAX];
	struct cfg_error err = { { 0 } };
	enum sc_log_level lvl;
	uint8_t key[256];
	size_t key_len = 0;
	int changed = 0, restart = 0;

	if (settings_load(&n, d->config_path, nsrc, &err)) {
		SC_ERR("reload: %s; keeping the running configuration", err.msg);
		snprintf(why, why_len, "%s", err.msg);
		return -EINVAL;
	}
	if (*d->cli_log_level)
		settings_strcpy(n.log_level, sizeof(n.log_level), d->cli_log_level);
	if (ctl_key_load(n.key_file, key, &key_len)) {
		SC_ERR("reload: keeping the running configuration");
		snprintf(why, why_len, "auth.key-file %s is not usable", n.key_file);
		return -EINVAL;
	}
	for (const struct cfg_entry *e = settings_table; e->key; e++) {
		char a[CFG_STR_MAX + 32], b[CFG_STR_MAX + 32];
		cfg_format(e, &d->cfg, a, sizeof(a));
		cfg_format(e, &n, b, sizeof(b));
		if (!strcmp(a, b) && !(e->offset == offsetof(struct settings, key_file) && *b))
			continue;
		if (!strcmp(a, b)) {
			SC_INFO("reload: %s.%s = %s re-read", e->section, e->key, b);
			changed++;
			continue;
		}
		if (e->reloadable) {
			SC_INFO("reload: %s.%s: %s -> %s", e->section, e->key, a, b);
			changed++;
		} else {
			SC_WARN("reload: %s.%s: %s -> %s needs a restart; keeping %s", e->section, e->key, a,
				b, a);
			restart++;
		}
	}
	/* Apply the reloadable ones; a source follows its value. */
	for (const struct cfg_entry *e = settings_table; e->key; e++) {
		char a[CFG_STR_MAX + 32], b[CFG_STR_MAX + 32];
		size_t i = (size_t)(e - settings_table);
		cfg_format(e, &d->cfg, a, sizeof(a));
		cfg_format(e, &n, b, sizeof(b));
		if (e->reloadable || !strcmp(a, b))
			d->cfg_src[i] = nsrc[i];
		if (!e->reloadable)
			continue;
		cfg_set(e, &d->cfg, b, NULL);
	}
	d->loaded = n;
	memcpy(d->key, key, key_len);
	d->key_len = key_len;
	if (!sc_log_level_parse(d->cfg.log_level, &lvl))
		sc_log_set_level(lvl);
	if (!d->key_len)
		SC_WARN("authentication is off (auth.key-file is empty): anyone who reaches the control port can join jobs");
	SC_INFO("reload: %d setting(s) applied, %d need a restart", changed, restart);
	return 0;
}
