/* Without libFuzzer (gcc builds), each fuzz target is linked with this
 * driver: it runs every file of the seed corpus, then a bounded number of
 * deterministic pseudo-random mutations of them. The real coverage-guided
 * run is the SUMCAST_FUZZ build (clang), see scripts/fuzz.sh. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	static uint8_t seeds[64][2048];
	static size_t seed_len[64];
	size_t nseeds = 0;
	long iters = argc > 2 ? atol(argv[2]) : 200000;

	if (argc > 1) {
		DIR *d = opendir(argv[1]);
		struct dirent *e;
		while (d && (e = readdir(d)) && nseeds < 64) {
			char p[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", argv[1], e->d_name);
			FILE *f = fopen(p, "rb");
			if (!f)
				continue;
			seed_len[nseeds] = fread(seeds[nseeds], 1, sizeof(seeds[0]), f);
			fclose(f);
			LLVMFuzzerTestOneInput(seeds[nseeds], seed_len[nseeds]);
			nseeds++;
		}
		if (d)
			closedir(d);
	}
	uint8_t buf[2048];
	for (long i = 0; i < iters; i++) {
		size_t len;
		if (nseeds) {
			size_t s = next() % nseeds;
			len = seed_len[s];
			memcpy(buf, seeds[s], len);
			int flips = 1 + (int)(next() % 4);
			for (int k = 0; k < flips && len; k++)
				buf[next() % len] ^= (uint8_t)(1u << (next() % 8));
			if (next() % 8 == 0)
				len = next() % (len + 1);
		} else {
			len = next() % 256;
			for (size_t k = 0; k < len; k++)
				buf[k] = (uint8_t)next();
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("replay: %zu seeds, %ld mutations, no crash\n", nseeds, iters);
	return 0;
}
