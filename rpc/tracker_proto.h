/* Apache TVM's tracker protocol on the wire (tracker-protocol.md §1-4): constants, frames
 * (`[int32 LE length][JSON]` after a 4-byte magic) and a streaming reader that accepts any split
 * or coalescing of the bytes.  Shared by the tracker, the device server and the clients, so it
 * depends on base only.  No I/O; not thread-safe (one reader per connection). */
#ifndef TT_RPC_TRACKER_PROTO_H
#define TT_RPC_TRACKER_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

#define TT_TRACKER_MAGIC     0x2F271
#define TT_RPC_MAGIC         0xFF271
#define TT_RPC_SUCCESS       0xFF271
#define TT_RPC_DUPLICATE     0xFF272
#define TT_RPC_MISMATCH      0xFF273
#define TT_TRACKER_MAX_FRAME (1 << 20) /* TVM >= v0.25 closes on larger frames */
#define TT_TRACKER_PORT      9190
#define TT_TRACKER_PORT_END  9199

/* Message codes (TrackerCode). */
enum {
    TT_TRACKER_FAIL = -1,
    TT_TRACKER_SUCCESS = 0,
    TT_TRACKER_PING = 1,
    TT_TRACKER_STOP = 2,
    TT_TRACKER_PUT = 3,
    TT_TRACKER_REQUEST = 4,
    TT_TRACKER_UPDATE_INFO = 5,
    TT_TRACKER_SUMMARY = 6,
    TT_TRACKER_GET_PENDING_MATCHKEYS = 7,
};

/* Our extensions (tracker-protocol.md §12; docs/tracker.md): tuning jobs.  Sent only to a
 * tvm-tracker (TVM's closes the connection on them); replies are [0, value] or [-1, "why"]. */
enum {
    TT_TRACKER_JOB_SUBMIT = 100, /* [100, {params}]  -> [0, id] */
    TT_TRACKER_JOB_STATUS = 101, /* [101, id]        -> [0, {job}] */
    TT_TRACKER_JOB_LIST = 102,   /* [102]            -> [0, [{job}, ...]] */
    TT_TRACKER_JOB_CANCEL = 103, /* [103, id]        -> [0, {job}] */
    /* [104, {"host": H, "port": P, "state": "quarantine"|"healthy", "reason": R}] -> [0, n]:
     * a client found the device at H:P sick (or well again); n servers matched. */
    TT_TRACKER_DEVICE_REPORT = 104,
    /* [105, "hello", client nonce] -> [0, server nonce, proof]; [105, "proof", proof] -> [0]:
     * the farm's key (rpc/auth.h, docs/security.md); -1 with the reason otherwise. */
    TT_TRACKER_AUTH = 105,
};

/* Little-endian int32 to and from 4 bytes. */
void tt_put_le32(uint8_t *p, int32_t v);
int32_t tt_get_le32(const uint8_t *p);

typedef enum {
    TT_FRAME_NEED_MORE, /* nothing complete yet */
    TT_FRAME_MAGIC,     /* the 4-byte magic arrived and was right (echo it) */
    TT_FRAME_OK,        /* a frame: *payload, *len */
    TT_FRAME_ERROR,     /* bad magic or length: close the connection (err says why) */
} tt_frame_event;

/* Reassembles frames from the byte stream of one connection. */
typedef struct tt_frame_reader {
    bool need_magic; /* the tracker side starts by expecting the magic */
    uint8_t *buf;
    size_t len, cap, pos; /* bytes held, capacity, bytes consumed */
} tt_frame_reader;

void tt_frame_reader_init(tt_frame_reader *r, bool expect_magic);
void tt_frame_reader_free(tt_frame_reader *r);
/* Appends received bytes.  TT_ERR_NOMEM when they cannot be held. */
tt_status tt_frame_reader_feed(tt_frame_reader *r, const void *data, size_t n);
/* The next event.  For TT_FRAME_OK, *payload (not NUL-terminated, valid until the next feed or
 * next call) holds *len bytes. */
tt_frame_event tt_frame_reader_next(tt_frame_reader *r, const char **payload, size_t *len,
                                    tt_errbuf *err);

/* One frame for `json` (its 4-byte length prefix and the text) appended to sb. */
void tt_frame_append(tt_strbuf *sb, const char *json, size_t len);

#endif
