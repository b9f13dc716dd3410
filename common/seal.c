/* AES-128-GCM sealing of data-plane messages (seal.h), on OpenSSL's EVP. */
#include "seal.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

static void le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int sc_seal_derive(const uint8_t *shared, size_t shared_len, uint64_t job_id, uint64_t nonce,
		   uint8_t out[SC_SEAL_KEY])
{
	static const char label[] = "sumcast-data-v1";
	uint8_t msg[sizeof(label) - 1 + 16], mac[EVP_MAX_MD_SIZE];
	unsigned int mlen = 0;

	if (!shared || !shared_len || shared_len > INT_MAX)
		return -EINVAL;
	memcpy(msg, label, sizeof(label) - 1);
	le64(msg + sizeof(label) - 1, job_id);
	le64(msg + sizeof(label) - 1 + 8, nonce);
	if (!HMAC(EVP_sha256(), shared, (int)shared_len, msg, sizeof(msg), mac, &mlen) || mlen < SC_SEAL_KEY)
		return -EIO;
	memcpy(out, mac, SC_SEAL_KEY);
	OPENSSL_cleanse(mac, sizeof(mac));
	return 0;
}

int sc_seal_init(struct sc_seal *s, const uint8_t key[SC_SEAL_KEY])
{
	memset(s, 0, sizeof(*s));
	s->enc = EVP_CIPHER_CTX_new();
	s->dec = EVP_CIPHER_CTX_new();
	if (!s->enc || !s->dec) {
		sc_seal_fini(s);
		return -ENOMEM;
	}
	memcpy(s->key, key, SC_SEAL_KEY);
	/* Key once; each message sets only its IV. */
	if (EVP_EncryptInit_ex(s->enc, EVP_aes_128_gcm(), NULL, key, NULL) != 1 ||
	    EVP_DecryptInit_ex(s->dec, EVP_aes_128_gcm(), NULL, key, NULL) != 1) {
		sc_seal_fini(s);
		return -EIO;
	}
	return 0;
}

void sc_seal_fini(struct sc_seal *s)
{
	EVP_CIPHER_CTX_free(s->enc);
	EVP_CIPHER_CTX_free(s->dec);
	OPENSSL_cleanse(s->key, sizeof(s->key));
	s->enc = s->dec = NULL;
}

static void iv_make(uint8_t iv[12], enum sc_seal_dir dir, uint16_t rank, uint64_t chunk)
{
	iv[0] = (uint8_t)dir;
	iv[1] = (uint8_t)rank;
	iv[2] = (uint8_t)(rank >> 8);
	iv[3] = 0;
	le64(iv + 4, chunk);
}

/* GCM takes int lengths: messages are chunks (at most 64 MiB). */
int sc_seal(struct sc_seal *s, enum sc_seal_dir dir, uint16_t rank, uint64_t chunk, uint32_t imm,
	    const void *in, size_t len, void *out)
{
	EVP_CIPHER_CTX *c = s->enc;
	uint8_t iv[12], aad[4] = { (uint8_t)imm, (uint8_t)(imm >> 8), (uint8_t)(imm >> 16), (uint8_t)(imm >> 24) };
	int n = 0;

	if (len > INT_MAX - 64)
		return -EINVAL;
	iv_make(iv, dir, rank, chunk);
	if (EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv) != 1 ||
	    EVP_EncryptUpdate(c, NULL, &n, aad, sizeof(aad)) != 1 ||
	    (len && EVP_EncryptUpdate(c, out, &n, in, (int)len) != 1) ||
	    EVP_EncryptFinal_ex(c, (uint8_t *)out + len, &n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SC_SEAL_TAG, (uint8_t *)out + len) != 1)
		return -EIO;
	return 0;
}

int sc_unseal(struct sc_seal *s, enum sc_seal_dir dir, uint16_t rank, uint64_t chunk, uint32_t imm,
	      const void *in, size_t len, void *out)
{
	EVP_CIPHER_CTX *c = s->dec;
	uint8_t iv[12], tag[SC_SEAL_TAG];
	uint8_t aad[4] = { (uint8_t)imm, (uint8_t)(imm >> 8), (uint8_t)(imm >> 16), (uint8_t)(imm >> 24) };
	int n = 0;

	if (len > INT_MAX - 64)
		return -EINVAL;
	/* The tag first: in and out may overlap, and out[len..] is not ours. */
	memcpy(tag, (const uint8_t *)in + len, SC_SEAL_TAG);
	iv_make(iv, dir, rank, chunk);
	if (EVP_DecryptInit_ex(c, NULL, NULL, NULL, iv) != 1 ||
	    EVP_DecryptUpdate(c, NULL, &n, aad, sizeof(aad)) != 1 ||
	    (len && EVP_DecryptUpdate(c, out, &n, in, (int)len) != 1) ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SC_SEAL_TAG, tag) != 1)
		return -EIO;
	return EVP_DecryptFinal_ex(c, (uint8_t *)out + len, &n) == 1 ? 0 : -EBADMSG;
}
