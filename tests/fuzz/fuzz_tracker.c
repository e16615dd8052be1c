/* Fuzz target: the tracker's wire side.  The input is the byte stream of three connections
 * interleaved (the first byte of each chunk says which connection and how long the chunk is):
 * frames are reassembled like the daemon does and handled by the registry, which must answer or
 * refuse every message and keep its queues consistent (SUMMARY stays valid JSON).  Malformed
 * frames close the connection; nothing may crash, leak or hang. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "rpc/tracker_proto.h"
#include "tracker/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_send(void *ctx, tt_conn_id c, const char *json, size_t len)
{
    (void)ctx, (void)c;
    /* Every reply is JSON (TVM's bare codes, such as 0, included). */
    json_error_t e;
    json_t *j = json_loadb(json, len, JSON_DECODE_ANY, &e);
    if (!j)
        abort();
    json_decref(j);
}

static char *on_ext(void *ctx, const char *peer, const json_t *msg)
{
    (void)ctx, (void)peer, (void)msg;
    return strdup("[-1, \"no jobs here\"]");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    tt_registry *r = tt_registry_new("tracker:0.5", on_send, NULL);
    if (!r)
        return 0;
    tt_registry_set_extension(r, on_ext, NULL);
    enum { NCONN = 3 };
    tt_frame_reader rd[NCONN];
    bool open[NCONN];
    for (int c = 0; c < NCONN; c++) {
        tt_frame_reader_init(&rd[c], true);
        open[c] = tt_registry_open(r, (tt_conn_id)c + 1, c ? "10.0.0.2" : "127.0.0.1", 0) == TT_OK;
    }
    size_t pos = 0;
    double now = 0;
    while (pos < size) {
        int c = data[pos] % NCONN;
        size_t len = (size_t)(data[pos] / NCONN) + 1;
        pos++;
        if (len > size - pos)
            len = size - pos;
        now += 0.5;
        if (open[c] && tt_frame_reader_feed(&rd[c], data + pos, len) != TT_OK)
            break;
        pos += len;
        for (;;) {
            const char *payload;
            size_t plen;
            tt_errbuf err;
            if (!open[c])
                break;
            tt_frame_event ev = tt_frame_reader_next(&rd[c], &payload, &plen, &err);
            if (ev == TT_FRAME_NEED_MORE || ev == TT_FRAME_MAGIC) {
                if (ev == TT_FRAME_NEED_MORE)
                    break;
                continue;
            }
            bool stop = false;
            if (ev == TT_FRAME_ERROR ||
                tt_registry_handle(r, (tt_conn_id)c + 1, payload, plen, now, &stop, &err)) {
                tt_registry_close(r, (tt_conn_id)c + 1);
                open[c] = false;
            }
        }
    }
    char *summary = tt_registry_summary(r);
    json_t *j = NULL;
    if (!summary || tt_json_parse(summary, strlen(summary), &j, NULL) != TT_OK)
        abort();
    json_decref(j);
    free(summary);
    for (int c = 0; c < NCONN; c++) {
        if (open[c])
            tt_registry_close(r, (tt_conn_id)c + 1);
        tt_frame_reader_free(&rd[c]);
    }
    tt_registry_free(r);
    return 0;
}
