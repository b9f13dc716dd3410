/* Data-plane protection: with a shared key configured, every chunk a rank
 * sends to an aggregator and every result it sends back is sealed with
 * AES-128-GCM under a per-job key that only holders of the shared key can
 * derive:
 *
 *   job key = HMAC-SHA256(shared key, "sumcast-data-v1" || job id || nonce)[0..16)
 *
 * where the nonce is the daemon's fresh random number for the job, sent in
 * JOIN_OK. Each message's 96-bit IV is (direction, rank, chunk number):
 * unique per message under one job key (a rank's chunk c, or the result of
 * chunk c, which the aggregator seals once and sends to every rank under
 * SC_SEAL_ANY_RANK, or chunk c's empty result for one rank in mode give,
 * under that rank: wire.h), and a message replayed at another chunk fails
 * to open. The immediate data (type,
 * op, seq) is authenticated with it. A sealed message is the ciphertext
 * followed by SC_SEAL_TAG bytes of GCM tag.
 *
 * So a process that is not a joined rank (it lacks the shared key) can
 * neither get data reduced into a job (its messages fail to open and are
 * dropped and counted) nor read a job's results (they are encrypted),
 * whatever the provider and wherever it runs, even where the provider lets
 * it pose as a rank's address (tcp;ofi_rxm). docs/daemon.md, "Threat model".
 *
 * One struct seal per thread of use (the contexts are not shared). No
 * allocation after sc_seal_init. */
#ifndef SUMCAST_SEAL_H
#define SUMCAST_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SC_SEAL_TAG 16
#define SC_SEAL_KEY 16

/* NACK: a rank's request for a unicast result (wire.h, mode NACK), IV
 * (NACK, rank, chunk): one per rank and chunk. */
enum sc_seal_dir { SC_SEAL_DATA = 'D', SC_SEAL_RESULT = 'R', SC_SEAL_NACK = 'N' };
#define SC_SEAL_ANY_RANK 0xFFFFu /* the rank field of a result's IV */

struct sc_seal {
	void *enc, *dec; /* EVP_CIPHER_CTX, keyed */
	uint8_t key[SC_SEAL_KEY];
};

/* The job key from the shared key (key_len 1..256), the job id and the
 * daemon's nonce. 0, or -EIO (OpenSSL failed). */
int sc_seal_derive(const uint8_t *shared, size_t shared_len, uint64_t job_id, uint64_t nonce,
		   uint8_t out[SC_SEAL_KEY]);
/* Contexts keyed with key. 0, -ENOMEM or -EIO. */
int sc_seal_init(struct sc_seal *s, const uint8_t key[SC_SEAL_KEY]);
void sc_seal_fini(struct sc_seal *s);

/* out (len + SC_SEAL_TAG bytes) = seal(in[0..len)); in and out may be the
 * same buffer. 0 or -EIO. */
int sc_seal(struct sc_seal *s, enum sc_seal_dir dir, uint16_t rank, uint64_t chunk, uint32_t imm,
	    const void *in, size_t len, void *out);
/* out (len bytes) = open(in[0..len + SC_SEAL_TAG)); in and out may be the
 * same buffer. 0, or -EBADMSG when the message was not sealed by a holder
 * of the job key for this (direction, rank, chunk, imm) — out is then
 * garbage and must not be used. */
int sc_unseal(struct sc_seal *s, enum sc_seal_dir dir, uint16_t rank, uint64_t chunk, uint32_t imm,
	      const void *in, size_t len, void *out);

#endif
