#include "tracker_proto.h"

#include <stdlib.h>
#include <string.h>

void tt_put_le32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    p[2] = (uint8_t)(u >> 16);
    p[3] = (uint8_t)(u >> 24);
}

int32_t tt_get_le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

void tt_frame_reader_init(tt_frame_reader *r, bool expect_magic)
{
    memset(r, 0, sizeof(*r));
    r->need_magic = expect_magic;
}

void tt_frame_reader_free(tt_frame_reader *r)
{
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

tt_status tt_frame_reader_feed(tt_frame_reader *r, const void *data, size_t n)
{
    if (n == 0)
        return TT_OK; /* nothing to hold (and memcpy must not see a NULL buffer) */
    if (r->pos > 0 && r->pos == r->len) {
        r->pos = r->len = 0;
    } else if (r->pos > 4096 && r->pos * 2 > r->len) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap *= 2;
        /* at most one maximal frame, its prefix and some slack */
        if (cap > 2 * (size_t)TT_TRACKER_MAX_FRAME + 64 && r->len + n > cap / 2)
            return TT_ERR_LIMIT;
        uint8_t *g = realloc(r->buf, cap);
        if (!g)
            return TT_ERR_NOMEM;
        r->buf = g;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, n);
    r->len += n;
    return TT_OK;
}

tt_frame_event tt_frame_reader_next(tt_frame_reader *r, const char **payload, size_t *len,
                                    tt_errbuf *err)
{
    size_t avail = r->len - r->pos;
    if (avail < 4)
        return TT_FRAME_NEED_MORE;
    int32_t v = tt_get_le32(r->buf + r->pos);
    if (r->need_magic) {
        if (v != TT_TRACKER_MAGIC) {
            tt_err(err, TT_ERR_PARSE, "bad magic 0x%x (want 0x%x)", (unsigned)v,
                   (unsigned)TT_TRACKER_MAGIC);
            return TT_FRAME_ERROR;
        }
        r->need_magic = false;
        r->pos += 4;
        return TT_FRAME_MAGIC;
    }
    if (v <= 0 || v > TT_TRACKER_MAX_FRAME) {
        tt_err(err, TT_ERR_PARSE, "frame length %d outside 1..%d", (int)v, TT_TRACKER_MAX_FRAME);
        return TT_FRAME_ERROR;
    }
    if (avail < 4 + (size_t)v)
        return TT_FRAME_NEED_MORE;
    *payload = (const char *)r->buf + r->pos + 4;
    *len = (size_t)v;
    r->pos += 4 + (size_t)v;
    return TT_FRAME_OK;
}

void tt_frame_append(tt_strbuf *sb, const char *json, size_t len)
{
    uint8_t p[4];
    tt_put_le32(p, (int32_t)len);
    tt_strbuf_appendn(sb, (const char *)p, 4);
    tt_strbuf_appendn(sb, json, len);
}
