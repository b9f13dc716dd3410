/* sumcastctl's HTTP/JSON plumbing: one GET with libcurl, every request
 * bounded by a connect and a total timeout; the JSON answers and their
 * fields. */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sumcastctl.h"

#define BODY_MAX (16u << 20) /* a /stats with thousands of ranks fits */

static CURL *curl;
static const struct opts *d; /* the daemon asked, as the command has it now */

int http_init(const struct opts *daemon)
{
	d = daemon;
	if (curl_global_init(CURL_GLOBAL_NOTHING) || !(curl = curl_easy_init()))
		return -1;
	return 0;
}

void http_target(const struct opts *daemon)
{
	d = daemon;
}

void http_fini(void)
{
	curl_easy_cleanup(curl);
	curl_global_cleanup();
}

static size_t body_write(char *data, size_t sz, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = sz * n;

	if (b->len + add + 1 > BODY_MAX)
		return 0; /* makes curl fail with CURLE_WRITE_ERROR */
	if (b->len + add + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 8192;
		while (cap < b->len + add + 1)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np)
			return 0;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, add);
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

long http_get(const char *path, struct body *b, char *ctype, size_t ctype_len)
{
	char why[CURL_ERROR_SIZE + 256];
	long st = http_try("GET", path, b, ctype, ctype_len, why, sizeof(why));

	if (st < 0)
		die(EXIT_UNREACHABLE, "%s", why);
	return st;
}

long http_try(const char *method, const char *path, struct body *b, char *ctype, size_t ctype_len,
	      char *why, size_t why_len)
{
	char url[512];
	char err[CURL_ERROR_SIZE] = "";
	long status = 0;
	CURLcode rc;

	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
	snprintf(url, sizeof(url), "http://%s%s%s:%u%s", strchr(d->host, ':') ? "[" : "", d->host,
		 strchr(d->host, ':') ? "]" : "", d->port, path);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	if (!strcmp(method, "POST")) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
	} else
		curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, body_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, err);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, d->timeout_ms);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, d->timeout_ms);
	curl_easy_setopt(curl, CURLOPT_NOPROXY, "*"); /* the stats port is never behind a proxy */
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "sumcastctl/" SUMCAST_VERSION);
	rc = curl_easy_perform(curl);
	if (rc != CURLE_OK) {
		snprintf(why, why_len, "cannot %s %s: %s (is sumcastd running with [http] enabled on %s port %u?)",
			 strcmp(method, "GET") ? method : "read", url, *err ? err : curl_easy_strerror(rc),
			 d->host, d->port);
		return -1;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (ctype) {
		char *ct = NULL;
		curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
		snprintf(ctype, ctype_len, "%s", ct ? ct : "");
	}
	if (!b->p)
		body_write((char *)"", 0, 0, b);
	return status;
}

json_t *get_json(const char *path)
{
	struct body b = { 0 };
	json_error_t je;
	long st = http_get(path, &b, NULL, 0);
	json_t *j;

	if (st != 200)
		die(EXIT_BAD_ANSWER, "GET %s: HTTP %ld", path, st);
	j = json_loadb(b.p, b.len, 0, &je);
	free(b.p);
	if (!j || !json_is_object(j))
		die(EXIT_BAD_ANSWER, "GET %s: not a JSON object: %s (line %d)", path, je.text, je.line);
	return j;
}

double jnum(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

const char *jstr(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : "?";
}
