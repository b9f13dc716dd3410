/* sumcastd settings: one table (settings.c) drives the INI file, the
 * SUMCASTD_<SECTION>_<KEY> environment overrides, --dump-config and the
 * SIGHUP reload. */
#ifndef SUMCASTD_SETTINGS_H
#define SUMCASTD_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"

#define SETTINGS_ENV_PREFIX "SUMCASTD_"
#define SETTINGS_CPUS_MAX 256
/* Upper bound on the rows of settings_table (checked in settings_load). */
#define SETTINGS_MAX 64

struct settings {
	/* [control] */
	char control_listen[CFG_STR_MAX];
	int64_t control_port;
	char port_file[CFG_STR_MAX];
	int64_t handshake_timeout_ms;
	int64_t drain_timeout_ms;
	int64_t max_connections;
	/* [http] */
	char http_listen[CFG_STR_MAX];
	int64_t http_port;
	bool http_enabled;
	int64_t http_max_connections;
	uint64_t http_max_header_size;
	uint64_t http_max_body_size;
	/* [fabric] */
	char provider[CFG_STR_MAX];
	char node[CFG_STR_MAX];
	int64_t cq_size;
	int64_t rx_buffers;
	uint64_t rx_buffer_size;
	bool source_check;
	char multicast[CFG_STR_MAX];        /* off | ip | auto | ib */
	char multicast_groups[CFG_STR_MAX]; /* IPv4 prefix, e.g. 239.194.0.0/16 */
	int64_t multicast_port;
	char multicast_iface[CFG_STR_MAX];  /* "" : fabric.node */
	int64_t multicast_mtu;
	/* [data] */
	int64_t threads;
	int64_t job_threads; /* [data] job-threads: 0 = all */
	char cpus[CFG_STR_MAX];
	int64_t idle_spin_us;
	int64_t idle_sleep_us;
	bool idle_wait;
	bool sweep;
	bool result_one_per_rank;
	uint64_t result_spread; /* [data] result-spread: bytes, 0 = off */
	/* [job] */
	uint64_t memory_budget;
	int64_t max_jobs;
	int64_t timeout_ms;
	int64_t join_timeout_ms;
	int64_t stuck_grace_ms;
	int64_t tenant_idle_ms;
	int64_t max_window;
	int64_t max_weight;
	bool pace;
	uint64_t max_chunk;
	uint64_t max_inflight;
	uint64_t mc_inflight; /* [job] multicast-inflight; 0: no cap */
	uint64_t min_chunk;
	double max_memory_share;
	/* [auth] */
	char key_file[CFG_STR_MAX];
	bool allow_anonymous;
	/* [log] */
	char log_level[CFG_STR_MAX];
};

extern const struct cfg_entry settings_table[];

/* defaults + file (if path) + environment, then settings_check(). src (may
 * be NULL) gets one entry per table row: where its value came from. */
int settings_load(struct settings *s, const char *path, enum cfg_source *src,
		  struct cfg_error *err);
/* Cross-field checks the table cannot express: log level, cpu list,
 * listen addresses (IP literals), a key or auth.allow-anonymous when
 * control.listen is not loopback. */
int settings_check(const struct settings *s, struct cfg_error *err);
/* What a listen address is: SETTINGS_ADDR_LOOPBACK (the loopback rule of
 * common/hostport.h: 127.0.0.0/8, ::1, ::ffff:127.x.y.z), SETTINGS_ADDR_OTHER
 * (any other IP literal, 0.0.0.0 and :: included), SETTINGS_ADDR_INVALID
 * (not an IP literal: localhost too). */
enum { SETTINGS_ADDR_INVALID = -1, SETTINGS_ADDR_OTHER = 0, SETTINGS_ADDR_LOOPBACK = 1 };
int settings_addr_kind(const char *s);
/* Parses "a.b.c.d/n" (inside 224.0.0.0/4, n 4..32) into its first group
 * and the number of groups (host byte order). 0 or -EINVAL. */
int settings_parse_groups(const char *s, uint32_t *first, uint32_t *count);
/* The interface address multicast leaves from: multicast-iface, else node. */
const char *settings_mc_iface(const struct settings *s);
/* Parses "0,2-3" into cpus[]; returns the count or -EINVAL. "" gives 0. */
int settings_parse_cpus(const char *s, int *cpus, int max);
/* Bounded copy that always terminates. */
void settings_strcpy(char *dst, size_t cap, const char *src);
/* Writes the whole table with values and help, as conf/sumcastd.conf. */
void settings_dump(const struct settings *s, FILE *out);

#endif
