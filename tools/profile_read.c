/* sumcastctl profile: reading the trace files (profile.h). A line is a
 * row when it has every field a row has, within bounds (a job id of hex
 * digits, ranks below PROF_MAX_RANKS, times below PROF_MAX_US); anything
 * else is skipped and counted, the first one named. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sumcastctl.h"
#include "profile.h"

const char *const coll_name[C_N] = { "allreduce", "reducescatter", "allgather", "tree" };
struct prof_traces P;

static bool jget_u64(json_t *obj, const char *k, uint64_t *v)
{
	json_t *x = json_object_get(obj, k);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return false;
	*v = (uint64_t)json_integer_value(x);
	return true;
}

static bool jget_num(json_t *obj, const char *k, double *v, bool null_ok)
{
	json_t *x = json_object_get(obj, k);
	if (null_ok && json_is_null(x)) {
		*v = NAN;
		return true;
	}
	if (!json_is_number(x))
		return false;
	*v = json_number_value(x);
	return isfinite(*v) && *v >= 0;
}

static void skip(const char *file, size_t line, const char *why)
{
	if (!P.skipped++)
		snprintf(P.first_skip, sizeof(P.first_skip), "%s:%zu: %s", file, line, why);
}

static struct job *job_of(const char *id)
{
	for (size_t i = 0; i < P.n; i++)
		if (!strcmp(P.j[i].id, id))
			return &P.j[i];
	P.j = realloc(P.j, (P.n + 1) * sizeof(*P.j));
	if (!P.j)
		die(EXIT_BAD_ANSWER, "out of memory");
	memset(&P.j[P.n], 0, sizeof(*P.j));
	snprintf(P.j[P.n].id, sizeof(P.j[P.n].id), "%s", id);
	return &P.j[P.n++];
}

/* One line into a row of its job; false with why when it is not a row. */
static bool parse_row(const char *line, const char **why)
{
	json_error_t err;
	json_t *obj = json_loads(line, JSON_REJECT_DUPLICATES, &err), *x;
	struct row r = { 0 };
	uint64_t v, rank, nranks, seq, epoch;
	const char *job, *coll, *status;
	bool ok = false;

	*why = "not a JSON object";
	if (!json_is_object(obj))
		goto out;
	*why = "a field is missing or of the wrong type";
	job = json_string_value(json_object_get(obj, "job"));
	status = json_string_value(json_object_get(obj, "status"));
	coll = json_string_value(json_object_get(obj, "coll"));
	x = json_object_get(obj, "adaptive");
	if (!job || !*job || strlen(job) >= sizeof(P.j->id) || !status || !jget_u64(obj, "rank", &rank) ||
	    !jget_u64(obj, "nranks", &nranks) || !jget_u64(obj, "seq", &seq) ||
	    !jget_u64(obj, "bytes", &r.bytes) || !jget_u64(obj, "agg_bytes", &r.agg_bytes) ||
	    !jget_u64(obj, "start_ns", &r.start_ns) || !jget_u64(obj, "epoch", &epoch) ||
	    !jget_u64(obj, "redone_bytes", &r.redone) || !jget_num(obj, "time_us", &r.time_us, false) ||
	    !jget_num(obj, "agg_us", &r.agg_us, true) || !jget_num(obj, "ring_us", &r.ring_us, true) ||
	    !jget_num(obj, "split", &r.split, false) || (x && !json_is_boolean(x)))
		goto out;
	*why = "values out of range (rank >= nranks, agg_bytes > bytes, split > 1, times)";
	if (!nranks || rank >= nranks || nranks > PROF_MAX_RANKS || seq > UINT32_MAX || epoch > UINT32_MAX ||
	    r.agg_bytes > r.bytes || r.split > 1 || r.time_us > PROF_MAX_US || r.agg_us > PROF_MAX_US ||
	    r.ring_us > PROF_MAX_US || r.start_ns > UINT64_MAX / 2)
		goto out;
	/* the job id as the plugin writes it (0x and hex digits): it names
	 * the job in the output and in the gnuplot script */
	*why = "\"job\" is not 0x and hex digits";
	if (strncmp(job, "0x", 2) || !job[2] || strspn(job + 2, "0123456789abcdefABCDEF") != strlen(job + 2))
		goto out;
	r.coll = C_ALLREDUCE; /* rows written before "coll" existed: allreduces */
	if (coll) {
		*why = "unknown \"coll\"";
		for (v = 0; v < C_N && strcmp(coll, coll_name[v]); v++)
			;
		if (v == C_N)
			goto out;
		r.coll = (uint8_t)v;
	}
	r.rank = (uint32_t)rank;
	r.seq = (uint32_t)seq;
	r.epoch = (uint32_t)epoch;
	r.ok = !strcmp(status, "ok");
	r.adaptive = json_is_true(x);
	*why = "too many rows";
	if (P.rows >= PROF_MAX_ROWS)
		goto out;
	struct job *j = job_of(job);
	if (j->n == j->cap) {
		j->cap = j->cap ? 2 * j->cap : 1024;
		j->r = realloc(j->r, j->cap * sizeof(*j->r));
		if (!j->r)
			die(EXIT_BAD_ANSWER, "out of memory at %zu rows", P.rows);
	}
	if (nranks > j->nranks)
		j->nranks = (unsigned)nranks;
	if (!j->nranks_min || nranks < j->nranks_min)
		j->nranks_min = (unsigned)nranks;
	j->r[j->n++] = r;
	P.rows++;
	ok = true;
out:
	json_decref(obj);
	return ok;
}

static void read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0, no = 0;
	ssize_t len;
	const char *why;

	if (!f)
		die(EXIT_BAD_ANSWER, "profile: %s: %s", path, strerror(errno));
	P.files++;
	while ((len = getline(&line, &cap, f)) > 0) {
		no++;
		if (len > PROF_LINE_MAX) {
			skip(path, no, "line too long");
			continue;
		}
		if (len == 1 && line[0] == '\n')
			continue;
		if (!parse_row(line, &why))
			skip(path, no, why);
	}
	if (ferror(f))
		die(EXIT_BAD_ANSWER, "profile: reading %s: %s", path, strerror(errno));
	free(line);
	fclose(f);
}

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);
	return n >= k && !strcmp(s + n - k, suf);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files of one PATH argument (a directory, a file, a prefix), sorted. */
static void collect(const char *arg, char ***files, size_t *nf)
{
	struct stat st;
	char dir[4096], base[1024];
	const char *slash;
	size_t before = *nf;
	DIR *d;
	struct dirent *e;
	bool is_dir = !stat(arg, &st) && S_ISDIR(st.st_mode);

	if (!is_dir && !stat(arg, &st)) {
		*files = realloc(*files, (*nf + 1) * sizeof(**files));
		if (!*files || !((*files)[(*nf)++] = strdup(arg)))
			die(EXIT_BAD_ANSWER, "out of memory");
		return;
	}
	if (is_dir) {
		snprintf(dir, sizeof(dir), "%s", arg);
		base[0] = 0;
	} else {
		slash = strrchr(arg, '/');
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - arg) : 1, slash ? arg : ".");
		if (slash && slash == arg)
			snprintf(dir, sizeof(dir), "/");
		snprintf(base, sizeof(base), "%s.", slash ? slash + 1 : arg);
	}
	d = opendir(dir);
	if (!d)
		die(EXIT_BAD_ANSWER, "profile: %s: %s", is_dir ? arg : dir, strerror(errno));
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !ends_with(e->d_name, ".jsonl") ||
		    strncmp(e->d_name, base, strlen(base)))
			continue;
		if (*nf >= PROF_MAX_FILES)
			die(EXIT_BAD_ANSWER, "profile: more than %d trace files", PROF_MAX_FILES);
		*files = realloc(*files, (*nf + 1) * sizeof(**files));
		if (!*files || asprintf(&(*files)[*nf], "%s/%s", dir, e->d_name) < 0)
			die(EXIT_BAD_ANSWER, "out of memory");
		/* only plain files: a FIFO or a directory so named is not read */
		if (stat((*files)[*nf], &st) || !S_ISREG(st.st_mode)) {
			free((*files)[*nf]);
			continue;
		}
		(*nf)++;
	}
	closedir(d);
	if (*nf == before)
		die(EXIT_BAD_ANSWER, is_dir ? "profile: no trace files (*.jsonl) in %s"
					    : "profile: %s: no such file, and no trace files %s*.jsonl",
		    arg, arg);
	qsort(*files + before, *nf - before, sizeof(**files), cmp_str);
}

void prof_read_paths(char *const *paths, size_t n)
{
	char **files = NULL;
	size_t nf = 0;

	for (size_t i = 0; i < n; i++)
		collect(paths[i], &files, &nf);
	/* a file named twice (a directory and one of its files) is read once */
	qsort(files, nf, sizeof(*files), cmp_str);
	for (size_t i = 0; i < nf; i++)
		if (!i || strcmp(files[i], files[i - 1]))
			read_file(files[i]);
	for (size_t i = 0; i < nf; i++)
		free(files[i]);
	free(files);
}
