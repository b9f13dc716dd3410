/* process_* figures from /proc/self (proc_self.h). Read at scrape time on
 * the control thread; nothing here is on the data path. */
#include "proc_self.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int proc_stat_parse(const char *text, uint64_t *rss_pages, uint64_t *vsize, uint64_t *start_ticks)
{
	const char *p = strrchr(text, ')');
	unsigned long long v[24];
	int field;

	if (!p)
		return -EINVAL;
	p++;
	/* Field 3 is the state (a letter), 4 .. 24 (rss) are numbers. */
	while (*p == ' ')
		p++;
	if (!*p)
		return -EINVAL;
	p++;
	for (field = 4; field <= 24; field++) {
		char *end;
		while (*p == ' ')
			p++;
		if (!*p)
			return -EINVAL;
		errno = 0;
		v[field - 4] = strtoull(p, &end, 10);
		if (end == p || errno)
			return -EINVAL;
		p = end;
	}
	*start_ticks = v[22 - 4];
	*vsize = v[23 - 4];
	*rss_pages = v[24 - 4];
	return 0;
}

static int read_text(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	return n ? 0 : -EIO;
}

static int boot_time(uint64_t *btime)
{
	char buf[16384];
	const char *p;
	int rc = read_text("/proc/stat", buf, sizeof(buf));

	if (rc)
		return rc;
	p = strstr(buf, "\nbtime ");
	if (!p)
		return -EINVAL;
	*btime = strtoull(p + 7, NULL, 10);
	return 0;
}

static int open_fds(uint64_t *n)
{
	DIR *dir = opendir("/proc/self/fd");
	const struct dirent *e;
	uint64_t count = 0;

	if (!dir)
		return -errno;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			count++;
	closedir(dir);
	/* The directory's own descriptor is not one of the daemon's. */
	*n = count ? count - 1 : 0;
	return 0;
}

int proc_self_read(struct proc_self *out)
{
	char buf[1024];
	uint64_t rss = 0, vsize = 0, ticks = 0, btime = 0, fds = 0;
	long page = sysconf(_SC_PAGESIZE), hz = sysconf(_SC_CLK_TCK);
	struct rlimit rl;
	int rc;

	if (page <= 0 || hz <= 0)
		return -EINVAL;
	if ((rc = read_text("/proc/self/stat", buf, sizeof(buf))) ||
	    (rc = proc_stat_parse(buf, &rss, &vsize, &ticks)) || (rc = boot_time(&btime)) ||
	    (rc = open_fds(&fds)))
		return rc;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	out->resident_bytes = rss * (uint64_t)page;
	out->virtual_bytes = vsize;
	out->open_fds = fds;
	out->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
	out->start_time_seconds = (double)btime + (double)ticks / (double)hz;
	return 0;
}
