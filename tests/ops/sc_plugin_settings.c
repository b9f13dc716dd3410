/* sc_plugin_settings: loads libnccl-net-sumcast.so as NCCL does (dlopen,
 * ncclNetPlugin_v8.init with a logger) and prints the name of every SUMCAST_*
 * setting the plugin logs at init ("SUMCAST_X=value (source)"), one per line.
 * With --log it prints every log line instead, as NCCL_DEBUG=INFO would,
 * then "init returned N" (ncclResult_t).
 * The settings table is the truth; conf/client.env must list all of them.
 *
 * Usage: sc_plugin_settings PLUGIN.so [--log]
 * Exit: 0, or 1 if the plugin did not load or logged no settings. */
#include <ctype.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../../plugin/nccl_net.h"

static int nsettings, print_log;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	char msg[2048];
	const char *p;
	va_list ap;

	(void)flags;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (print_log) {
		printf("NCCL %s %s:%d %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", file, line, msg);
		return;
	}
	/* "NET/Sumcast : SUMCAST_CHUNK_BYTES=256K (default)" */
	p = strstr(msg, " : SUMCAST_");
	if (!p)
		return;
	p += 3;
	size_t n = 0;
	while (isupper((unsigned char)p[n]) || isdigit((unsigned char)p[n]) || p[n] == '_')
		n++;
	if (p[n] == '=') {
		printf("%.*s\n", (int)n, p);
		nsettings++;
	}
}

int main(int argc, char **argv)
{
	void *h;
	const ncclNet_v8_t *net;

	if (argc < 2) {
		fprintf(stderr, "usage: sc_plugin_settings PLUGIN.so [--log]\n");
		return 1;
	}
	print_log = argc > 2 && !strcmp(argv[2], "--log");
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	net = (const ncclNet_v8_t *)dlsym(h, "ncclNetPlugin_v8");
	if (!net) {
		fprintf(stderr, "%s has no ncclNetPlugin_v8\n", argv[1]);
		return 1;
	}
	/* init may fail later (no fabric here); the settings are logged first. */
	ncclResult_t rc = net->init(logger);
	if (print_log)
		printf("init returned %d\n", (int)rc);
	fflush(stdout);
	if (!print_log && !nsettings) {
		fprintf(stderr, "the plugin logged no SUMCAST_* settings at init\n");
		return 1;
	}
	return 0;
}
