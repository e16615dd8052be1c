/* The tracker's state (tracker-protocol.md §3-7, §12): connections, per-key queues of free slots
 * and waiting requests, and the handling of every message.  No I/O: replies leave through a
 * callback, so the whole protocol is testable without sockets and the libuv layer only moves
 * bytes.  Not thread-safe: the event loop owns it. */
#ifndef TT_TRACKER_REGISTRY_H
#define TT_TRACKER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

typedef struct tt_registry tt_registry;
typedef uint64_t tt_conn_id;

/* Sends one JSON reply (without its length prefix) to connection `conn`. */
typedef void (*tt_registry_send_fn)(void *ctx, tt_conn_id conn, const char *json, size_t len);

/* `stop_key` is the secret of STOP (copied); NULL: STOP always fails. */
tt_registry *tt_registry_new(const char *stop_key, tt_registry_send_fn send, void *ctx);
void tt_registry_free(tt_registry *r);

/* Messages with codes >= 100 (our extensions, tracker-protocol.md §12) go to `fn` with the
 * sender's address, which returns the reply text (malloc'ed; NULL: out of memory, the connection
 * closes).  Without a handler such codes close the connection, as TVM's tracker does. */
typedef char *(*tt_registry_ext_fn)(void *ctx, const char *peer, const json_t *msg);
void tt_registry_set_extension(tt_registry *r, tt_registry_ext_fn fn, void *ctx);

/* Waiting REQUESTs one connection may have at once (default 64; 0 = no limit).  One more is
 * answered [-1, "too many pending requests ..."] and not queued. */
void tt_registry_set_max_pending(tt_registry *r, int max_pending);

/* With a key ring (nkeys > 0), a connection must prove the farm's key (code 105, rpc/auth.h)
 * before anything else; any other code is answered [-1, "...requires the farm's key..."] and
 * closes it (TT_ERR_AUTH).  `allow_tvm` lets unauthenticated connections use TVM's own codes
 * (1-7: TVM's servers, clients and query_rpc_tracker); SUMMARY marks such servers
 * "authenticated": false.  The ring must outlive the registry. */
struct tt_auth_keyring;
void tt_registry_set_auth(tt_registry *r, const struct tt_auth_keyring *ring, bool allow_tvm);
/* A connection finished the magic exchange; `peer` is its IP as text. */
tt_status tt_registry_open(tt_registry *r, tt_conn_id c, const char *peer, double now);
/* A connection closed: its free slots and waiting requests leave the queues at once. */
void tt_registry_close(tt_registry *r, tt_conn_id c);

/* Handles one frame of connection `c`.  TT_OK: handled (replies sent).  An error means the
 * connection must be closed; err says why (malformed JSON, not an array, unknown code, ...).
 * *stop becomes true after a STOP with the right key. */
tt_status tt_registry_handle(tt_registry *r, tt_conn_id c, const char *json, size_t len, double now,
                             bool *stop, tt_errbuf *err);

/* What the tracker has done since it started (the dashboard's /metrics). */
typedef struct tt_registry_counters {
    uint64_t messages;      /* frames handled */
    uint64_t requests;      /* REQUESTs queued */
    uint64_t handouts;      /* devices handed to a requester */
    uint64_t auth_failures; /* connections refused for want of the farm's key */
} tt_registry_counters;
const tt_registry_counters *tt_registry_get_counters(const tt_registry *r);
/* The state for the dashboard: {"servers": [{key, address, impl, device, silent_s, stale,
 * quarantined, quarantine_reason?, authenticated, free, in_use_by?, in_use_s?}], "queues":
 * [{key, free, pending}], "connections": n}.  Caller decrefs. */
json_t *tt_registry_status(const tt_registry *r, double now);
/* The SUMMARY reply text (as sent to clients); caller frees. */
char *tt_registry_summary(const tt_registry *r);

#endif
