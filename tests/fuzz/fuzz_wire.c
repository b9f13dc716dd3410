/* libFuzzer target: the control-plane decoder. Input = one framed message
 * (header + body). Whatever decodes must re-encode to the same bytes. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_hdr h;
	struct wire_msg m;
	uint8_t out[WIRE_MSG_MAX];

	if (wire_hdr_decode(data, size, &h))
		return 0;
	if (size < WIRE_HDR_LEN + (size_t)h.len)
		return 0;
	if (wire_msg_decode(h.type, data + WIRE_HDR_LEN, h.len, &m))
		return 0;
	m.version = h.version; /* re-encoded in the version it came in */
	int n = wire_msg_encode(&m, out, sizeof(out));
	assert(n == (int)(WIRE_HDR_LEN + h.len));
	assert(!memcmp(out, data, (size_t)n));
	if (m.type == WIRE_JOIN) {
		static const uint8_t key[] = "fuzz-key-0123456789";
		(void)wire_join_verify(key, sizeof(key) - 1, 1, &m.u.join);
	}
	return 0;
}
