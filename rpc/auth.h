/* The farm's shared-key authentication (docs/security.md): tracker, device servers and tvm-tune
 * prove to each other that they hold the farm's key before anything runs, and every measurement
 * message then carries a MAC, so only the farm can send a device native code.
 *
 * A key file holds one to TT_AUTH_MAX_KEYS keys, one per line as 64 hex digits ('#' comments and
 * blank lines allowed).  The first key proves; every key verifies, which is what lets an operator
 * rotate the key without stopping the farm (docs/operations.md).  The file must not be readable
 * by group or others.
 *
 * The exchange, the same on both links (the tracker's extension code 105, the measurement
 * protocol's hello): each side sends a fresh 32-byte nonce, and proves the key with
 * HMAC-SHA-512/256(key, label, role, client nonce, server nonce); roles differ, so a proof cannot
 * be reflected, and nonces are fresh, so none can be replayed.  The session key that MACs the
 * messages afterwards is BLAKE2b keyed with the client's proving key over the server's proving
 * key and both nonces.  Depends on base and libsodium. */
#ifndef TT_RPC_AUTH_H
#define TT_RPC_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/base.h"

#define TT_AUTH_KEY_BYTES   32
#define TT_AUTH_NONCE_BYTES 32
#define TT_AUTH_TAG_BYTES   32
#define TT_AUTH_MAX_KEYS    4
#define TT_AUTH_HEX         (2 * TT_AUTH_KEY_BYTES + 1) /* hex text of a key, nonce or tag */

typedef struct tt_auth_keyring {
    int nkeys; /* 0: no key, no authentication */
    uint8_t key[TT_AUTH_MAX_KEYS][TT_AUTH_KEY_BYTES];
} tt_auth_keyring;

/* Who proves: the two links use distinct roles, so a proof is good for one purpose only. */
typedef enum tt_auth_role {
    TT_AUTH_TRACKER_CLIENT,
    TT_AUTH_TRACKER_SERVER,
    TT_AUTH_MEASURE_CLIENT,
    TT_AUTH_MEASURE_SERVER,
} tt_auth_role;

/* Reads a key file.  Errors name the file and line: missing, readable by others, a line that is
 * not 64 hex digits, no key, too many keys. */
tt_status tt_auth_load(const char *path, tt_auth_keyring *ring, tt_errbuf *err);
/* Writes a new key file (mode 0600) holding one random key; refuses to overwrite a file. */
tt_status tt_auth_keygen(const char *path, tt_errbuf *err);
/* The key file named by $TVM_TUNE_AUTH_KEY_FILE, when set and `path` is NULL.  ring->nkeys stays
 * 0 when neither names a file. */
tt_status tt_auth_load_default(const char *path, tt_auth_keyring *ring, tt_errbuf *err);

/* A fresh random nonce. */
void tt_auth_nonce(uint8_t out[TT_AUTH_NONCE_BYTES]);
/* The proof of `role` over both nonces, with the ring's first key. */
void tt_auth_prove(const tt_auth_keyring *ring, tt_auth_role role,
                   const uint8_t cnonce[TT_AUTH_NONCE_BYTES],
                   const uint8_t snonce[TT_AUTH_NONCE_BYTES], uint8_t tag[TT_AUTH_TAG_BYTES]);
/* Checks a peer's proof against every key of the ring (in constant time per key); the index of
 * the key that made it, or -1. */
int tt_auth_verify(const tt_auth_keyring *ring, tt_auth_role role,
                   const uint8_t cnonce[TT_AUTH_NONCE_BYTES],
                   const uint8_t snonce[TT_AUTH_NONCE_BYTES], const uint8_t tag[TT_AUTH_TAG_BYTES]);
/* The session key from the client's and the server's proving keys and both nonces. */
void tt_auth_session_key(const uint8_t client_key[TT_AUTH_KEY_BYTES],
                         const uint8_t server_key[TT_AUTH_KEY_BYTES],
                         const uint8_t cnonce[TT_AUTH_NONCE_BYTES],
                         const uint8_t snonce[TT_AUTH_NONCE_BYTES], uint8_t out[TT_AUTH_KEY_BYTES]);

/* A MAC computed over several pieces (a message's header, JSON and blob as they stream). */
typedef struct tt_auth_mac {
    _Alignas(64) uint8_t state[512]; /* crypto_auth_hmacsha512256_state, kept opaque */
} tt_auth_mac;
void tt_auth_mac_init(tt_auth_mac *m, const uint8_t key[TT_AUTH_KEY_BYTES]);
void tt_auth_mac_update(tt_auth_mac *m, const void *data, size_t n);
void tt_auth_mac_final(tt_auth_mac *m, uint8_t tag[TT_AUTH_TAG_BYTES]);
/* Constant-time equality of two tags. */
bool tt_auth_tag_equal(const uint8_t a[TT_AUTH_TAG_BYTES], const uint8_t b[TT_AUTH_TAG_BYTES]);

/* 32 bytes as 64 lowercase hex digits, and back (false unless exactly 64 hex digits). */
void tt_auth_hex(const uint8_t in[32], char out[TT_AUTH_HEX]);
bool tt_auth_unhex(const char *text, uint8_t out[32]);

/* True for an address only this machine can reach (127.0.0.0/8, ::1, "localhost"): where a
 * daemon without a key may listen. */
bool tt_auth_is_loopback(const char *host);
/* Whether a daemon may listen on `host`: with a key anywhere, without one on loopback only unless
 * `insecure`.  TT_ERR_INVALID_ARG says what anyone reaching it could do (`risk`, e.g. "run native
 * code here") and how to proceed. */
tt_status tt_auth_check_listen(const tt_auth_keyring *ring, const char *host, bool insecure,
                               const char *risk, tt_errbuf *err);

#endif
