/* common/seal.c: AES-128-GCM sealing of data-plane messages. Round trips
 * (in place too, empty too), and every change an attacker could make is
 * caught: a flipped bit of the text or the tag, another chunk number, rank,
 * direction or immediate, another job key. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "seal.h"

static const uint8_t shared[] = "a-shared-key-of-the-cluster-0123";

static void keyed(struct sc_seal *s, uint64_t job, uint64_t nonce)
{
	uint8_t k[SC_SEAL_KEY];

	assert_int_equal(sc_seal_derive(shared, sizeof(shared) - 1, job, nonce, k), 0);
	assert_int_equal(sc_seal_init(s, k), 0);
}

static void test_derive(void **state)
{
	uint8_t a[SC_SEAL_KEY], b[SC_SEAL_KEY], c[SC_SEAL_KEY], d[SC_SEAL_KEY];

	(void)state;
	assert_int_equal(sc_seal_derive(shared, sizeof(shared) - 1, 7, 99, a), 0);
	assert_int_equal(sc_seal_derive(shared, sizeof(shared) - 1, 7, 99, b), 0);
	assert_memory_equal(a, b, SC_SEAL_KEY);
	assert_int_equal(sc_seal_derive(shared, sizeof(shared) - 1, 7, 100, c), 0);
	assert_memory_not_equal(a, c, SC_SEAL_KEY);
	assert_int_equal(sc_seal_derive(shared, sizeof(shared) - 2, 7, 99, d), 0);
	assert_memory_not_equal(a, d, SC_SEAL_KEY);
	assert_int_equal(sc_seal_derive(NULL, 0, 7, 99, d), -EINVAL);
}

static void test_round_trip(void **state)
{
	struct sc_seal s;
	size_t lens[] = { 0, 1, 15, 16, 17, 4096, 262144 + 3 };

	(void)state;
	keyed(&s, 0x1234, 0xabcd);
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		size_t n = lens[k];
		uint8_t *in = malloc(n + 1), *box = malloc(n + SC_SEAL_TAG), *out = malloc(n + 1);
		for (size_t i = 0; i < n; i++)
			in[i] = (uint8_t)(i * 31 + 7);
		assert_int_equal(sc_seal(&s, SC_SEAL_DATA, 3, 1000 + k, 0x5a5a, in, n, box), 0);
		if (n >= 16)
			assert_memory_not_equal(in, box, 16); /* encrypted */
		assert_int_equal(sc_unseal(&s, SC_SEAL_DATA, 3, 1000 + k, 0x5a5a, box, n, out), 0);
		assert_memory_equal(in, out, n);
		/* in place both ways */
		memcpy(box, in, n);
		assert_int_equal(sc_seal(&s, SC_SEAL_RESULT, SC_SEAL_ANY_RANK, 5, 1, box, n, box), 0);
		assert_int_equal(sc_unseal(&s, SC_SEAL_RESULT, SC_SEAL_ANY_RANK, 5, 1, box, n, box), 0);
		assert_memory_equal(in, box, n);
		free(in);
		free(box);
		free(out);
	}
	sc_seal_fini(&s);
}

static void test_forgeries(void **state)
{
	struct sc_seal s, other;
	uint8_t in[1000], box[1000 + SC_SEAL_TAG], bad[sizeof(box)], out[1000];

	(void)state;
	keyed(&s, 1, 2);
	keyed(&other, 1, 3); /* another job nonce: another key */
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;
	assert_int_equal(sc_seal(&s, SC_SEAL_DATA, 4, 77, 0x11, in, sizeof(in), box), 0);
	/* every single-bit flip of the text and of the tag */
	for (size_t i = 0; i < sizeof(box); i += 37) {
		memcpy(bad, box, sizeof(box));
		bad[i] ^= 0x01;
		assert_int_equal(sc_unseal(&s, SC_SEAL_DATA, 4, 77, 0x11, bad, sizeof(in), out), -EBADMSG);
	}
	memcpy(bad, box, sizeof(box));
	bad[sizeof(box) - 1] ^= 0x80;
	assert_int_equal(sc_unseal(&s, SC_SEAL_DATA, 4, 77, 0x11, bad, sizeof(in), out), -EBADMSG);
	/* replayed at another chunk, from another rank, as a result, with another imm */
	assert_int_equal(sc_unseal(&s, SC_SEAL_DATA, 4, 78, 0x11, box, sizeof(in), out), -EBADMSG);
	assert_int_equal(sc_unseal(&s, SC_SEAL_DATA, 5, 77, 0x11, box, sizeof(in), out), -EBADMSG);
	assert_int_equal(sc_unseal(&s, SC_SEAL_RESULT, 4, 77, 0x11, box, sizeof(in), out), -EBADMSG);
	assert_int_equal(sc_unseal(&s, SC_SEAL_DATA, 4, 77, 0x12, box, sizeof(in), out), -EBADMSG);
	/* shorter: the tag is read from elsewhere */
	assert_int_equal(sc_unseal(&s, SC_SEAL_DATA, 4, 77, 0x11, box, sizeof(in) - 1, out), -EBADMSG);
	/* another job key */
	assert_int_equal(sc_unseal(&other, SC_SEAL_DATA, 4, 77, 0x11, box, sizeof(in), out), -EBADMSG);
	/* and the genuine one still opens */
	assert_int_equal(sc_unseal(&s, SC_SEAL_DATA, 4, 77, 0x11, box, sizeof(in), out), 0);
	assert_memory_equal(in, out, sizeof(in));
	sc_seal_fini(&s);
	sc_seal_fini(&other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_derive),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_forgeries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
