/* The measurement protocol of tvm-tune and tvm-rpc-server (docs/rpc-protocol.md), spoken after
 * TVM's RPC handshake (tracker-protocol.md §9.4) in place of TVM's session protocol.
 *
 * Every message, in both directions, is a 16-byte header, a JSON object and an optional binary
 * blob:
 *
 *     "TTM1"  uint32 LE json_len  uint64 LE blob_len  json_len bytes of JSON  blob_len bytes
 *
 * The magic on every message lets either side tell a TVM peer (or garbage) from ours at the first
 * bytes.  Artifacts (kernel libraries, argument data, reference outputs) travel as blobs and are
 * named by content: "<FNV-1a 64 hex>-<bytes>", so a device keeps them across sessions and a client
 * sends each once.  Blocking I/O on a socket whose deadlines the caller sets (SO_RCVTIMEO).
 * Depends on base and auth. */
#ifndef TT_RPC_MEASURE_PROTO_H
#define TT_RPC_MEASURE_PROTO_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/base.h"
#include "auth.h"
#include "measure.h"

#define TT_MPROTO_VERSION  1
#define TT_MPROTO_TOKEN    "-proto=tvm-tune/1" /* in the handshake key, after the matchkey */
#define TT_MPROTO_MAGIC    "TTM1"
#define TT_MPROTO_HEADER   16
#define TT_MPROTO_MAX_JSON (1u << 20)
#define TT_ARTIFACT_ID_MAX 40 /* 16 hex + '-' + up to 20 digits + NUL */
#define TT_RPC_IMPL        "tvm-rpc-server/0.1.0"

/* One side of a measurement connection.  After authentication (docs/security.md) the channel
 * is sealed: a 32-byte HMAC-SHA-512/256 under the session key follows every message's JSON and
 * every blob, over the direction, the message's number and its bytes, and the receiver checks it
 * before it uses anything (TT_ERR_AUTH when it fails, and the session ends). */
typedef struct tt_mchan {
    int fd;
    bool is_server; /* which direction this side sends */
    bool sealed;    /* every message carries a MAC */
    uint8_t key[TT_AUTH_KEY_BYTES];
    uint64_t sent, received, blob_seq; /* message numbers, in the MACs */
} tt_mchan;

void tt_mchan_init(tt_mchan *ch, int fd, bool is_server);
/* From now on every message both ways is MAC'ed with `key` (the session key). */
void tt_mchan_seal(tt_mchan *ch, const uint8_t key[TT_AUTH_KEY_BYTES]);

/* Sends one message; `blob` may be NULL when blob_len is 0. */
tt_status tt_mproto_send(tt_mchan *ch, const char *json, const void *blob, uint64_t blob_len,
                         tt_errbuf *err);
/* Sends one message whose blob is the whole file at `path`. */
tt_status tt_mproto_send_file(tt_mchan *ch, const char *json, const char *path, tt_errbuf *err);
/* Receives one message's header and JSON (an object); the blob (*blob_len bytes) is left on the
 * socket for tt_mproto_recv_blob.  TT_ERR_IO: closed or timed out; TT_ERR_PARSE: not our protocol
 * (bad magic) or malformed JSON; TT_ERR_LIMIT: JSON over TT_MPROTO_MAX_JSON; TT_ERR_AUTH: a sealed
 * channel's MAC did not match. */
tt_status tt_mproto_recv(tt_mchan *ch, json_t **msg, uint64_t *blob_len, tt_errbuf *err);
/* Reads a blob of `len` bytes into `out_fd` (or discards it when out_fd < 0), hashing it.  On a
 * sealed channel TT_ERR_AUTH means the bytes written to out_fd must not be used. */
tt_status tt_mproto_recv_blob(tt_mchan *ch, uint64_t len, int out_fd, uint64_t *hash,
                              tt_errbuf *err);

/* The content name of `len` bytes whose FNV-1a hash is `hash`. */
void tt_artifact_id(uint64_t hash, uint64_t len, char out[TT_ARTIFACT_ID_MAX]);
/* Parses an artifact id; false when `id` is not one (never a path: only hex, '-' and digits). */
bool tt_artifact_id_parse(const char *id, uint64_t *hash, uint64_t *len);

/* Element types by the names TVM uses ("float32", ...). */
const char *tt_elem_name(tt_elem e);
bool tt_elem_parse(const char *name, tt_elem *out);

/* The cache flush modes by name: "off", "inputs", "constants"; parse is false for any other. */
const char *tt_cache_flush_name(tt_cache_flush f);
/* What a record timed in mode f with that share of the network in the LLC says it was flushed
 * with: tt_measure_network_flush_name's in the network mode, else the mode's name. */
const char *tt_measure_flush_name(tt_cache_flush f, double llc_share);
bool tt_cache_flush_parse(const char *s, tt_cache_flush *out);
/* As options carry it: false, true (inputs) or "constants"; from_json is false for anything
 * else and leaves *out alone. */
json_t *tt_cache_flush_json(tt_cache_flush f);
bool tt_cache_flush_from_json(const json_t *j, tt_cache_flush *out);
/* Measurement options to and from their JSON object (absent members keep the defaults). */
json_t *tt_measure_options_json(const tt_measure_options *o);
void tt_measure_options_from_json(const json_t *j, tt_measure_options *o);
/* A result to and from its {"op": "result", ...} message. */
json_t *tt_measure_result_json(const tt_measure_result *r);
tt_status tt_measure_result_from_json(const json_t *j, tt_measure_result *r, tt_errbuf *err);

#endif
