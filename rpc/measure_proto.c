#include "measure_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void tt_mchan_init(tt_mchan *ch, int fd, bool is_server)
{
    memset(ch, 0, sizeof(*ch));
    ch->fd = fd;
    ch->is_server = is_server;
}

void tt_mchan_seal(tt_mchan *ch, const uint8_t key[TT_AUTH_KEY_BYTES])
{
    memcpy(ch->key, key, TT_AUTH_KEY_BYTES);
    ch->sealed = true;
    ch->sent = ch->received = 0;
}

/* Starts the MAC of one part ('M': header and JSON, 'B': blob) of message `seq`, sent by the
 * server or the client: a message cannot be replayed, reordered or reflected. */
static void mac_start(const tt_mchan *ch, tt_auth_mac *m, bool from_server, uint64_t seq, char part)
{
    uint8_t h[10];
    h[0] = from_server ? 'S' : 'C';
    h[1] = (uint8_t)part;
    put_le(h + 2, seq, 8);
    tt_auth_mac_init(m, ch->key);
    tt_auth_mac_update(m, h, sizeof(h));
}

static tt_status send_header(tt_mchan *ch, const char *json, uint64_t blob_len, tt_errbuf *err)
{
    size_t jl = strlen(json);
    if (jl > TT_MPROTO_MAX_JSON)
        return tt_err(err, TT_ERR_LIMIT, "message of %zu bytes exceeds the %u-byte limit", jl,
                      TT_MPROTO_MAX_JSON);
    uint8_t h[TT_MPROTO_HEADER];
    memcpy(h, TT_MPROTO_MAGIC, 4);
    put_le(h + 4, jl, 4);
    put_le(h + 8, blob_len, 8);
    /* One write for header, JSON and MAC: no Nagle stall between them. */
    size_t tl = ch->sealed ? TT_AUTH_TAG_BYTES : 0;
    uint8_t *buf = malloc(sizeof(h) + jl + tl);
    if (!buf)
        return tt_err(err, TT_ERR_NOMEM, "out of memory sending a message");
    memcpy(buf, h, sizeof(h));
    memcpy(buf + sizeof(h), json, jl);
    if (ch->sealed) {
        tt_auth_mac m;
        mac_start(ch, &m, ch->is_server, ch->sent, 'M');
        tt_auth_mac_update(&m, buf, sizeof(h) + jl);
        tt_auth_mac_final(&m, buf + sizeof(h) + jl);
    }
    bool ok = tt_write_all(ch->fd, buf, sizeof(h) + jl + tl);
    free(buf);
    return ok ? TT_OK
              : tt_err(err, TT_ERR_IO, "connection lost while sending: %s", strerror(errno));
}

/* Sends the blob's MAC (sealed channels) and counts the message. */
static tt_status end_message(tt_mchan *ch, tt_auth_mac *m, uint64_t blob_len, tt_errbuf *err)
{
    if (ch->sealed && blob_len) {
        uint8_t tag[TT_AUTH_TAG_BYTES];
        tt_auth_mac_final(m, tag);
        if (!tt_write_all(ch->fd, tag, sizeof(tag)))
            return tt_err(err, TT_ERR_IO, "connection lost while sending: %s", strerror(errno));
    }
    ch->sent++;
    return TT_OK;
}

tt_status tt_mproto_send(tt_mchan *ch, const char *json, const void *blob, uint64_t blob_len,
                         tt_errbuf *err)
{
    tt_status s = send_header(ch, json, blob_len, err);
    if (s)
        return s;
    if (blob_len && !tt_write_all(ch->fd, blob, (size_t)blob_len))
        return tt_err(err, TT_ERR_IO, "connection lost while sending %" PRIu64 " bytes: %s",
                      blob_len, strerror(errno));
    tt_auth_mac m;
    if (ch->sealed && blob_len) {
        mac_start(ch, &m, ch->is_server, ch->sent, 'B');
        tt_auth_mac_update(&m, blob, (size_t)blob_len);
    }
    return end_message(ch, &m, blob_len, err);
}

tt_status tt_mproto_send_file(tt_mchan *ch, const char *json, const char *path, tt_errbuf *err)
{
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return tt_err(err, TT_ERR_IO, "%s: %s", path, strerror(errno));
    off_t size = lseek(in, 0, SEEK_END);
    lseek(in, 0, SEEK_SET);
    tt_status s = size < 0 ? tt_err(err, TT_ERR_IO, "%s: %s", path, strerror(errno))
                           : send_header(ch, json, (uint64_t)size, err);
    tt_auth_mac m;
    if (ch->sealed)
        mac_start(ch, &m, ch->is_server, ch->sent, 'B');
    char buf[65536];
    uint64_t left = size < 0 ? 0 : (uint64_t)size;
    while (!s && left) {
        ssize_t r = read(in, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            s = tt_err(err, TT_ERR_IO, "%s: shorter than announced", path);
        else if (!tt_write_all(ch->fd, buf, (size_t)r))
            s = tt_err(err, TT_ERR_IO, "connection lost while sending %s: %s", path,
                       strerror(errno));
        else
            left -= (uint64_t)r;
        if (!s && ch->sealed)
            tt_auth_mac_update(&m, buf, (size_t)r);
    }
    close(in);
    if (ch->sealed && (s || !size))
        tt_auth_mac_final(&m, (uint8_t[TT_AUTH_TAG_BYTES]){0}); /* wipes the state */
    return s ? s : end_message(ch, &m, (uint64_t)size, err);
}

static tt_status check_tag(tt_mchan *ch, tt_auth_mac *m, const char *what, tt_errbuf *err)
{
    uint8_t want[TT_AUTH_TAG_BYTES], got[TT_AUTH_TAG_BYTES];
    tt_auth_mac_final(m, want);
    if (!tt_read_all(ch->fd, got, sizeof(got)))
        return tt_err(err, TT_ERR_IO, "connection closed or timed out before a %s's MAC", what);
    if (!tt_auth_tag_equal(want, got))
        return tt_err(err, TT_ERR_AUTH,
                      "a %s failed its authentication check (altered, replayed or sent without "
                      "the farm's key)",
                      what);
    return TT_OK;
}

tt_status tt_mproto_recv(tt_mchan *ch, json_t **msg, uint64_t *blob_len, tt_errbuf *err)
{
    *msg = NULL;
    *blob_len = 0;
    uint8_t h[TT_MPROTO_HEADER];
    if (!tt_read_all(ch->fd, h, 4))
        return tt_err(err, TT_ERR_IO, "connection closed or timed out");
    if (memcmp(h, TT_MPROTO_MAGIC, 4))
        return tt_err(err, TT_ERR_PARSE,
                      "peer does not speak the tvm-tune measurement protocol (first bytes "
                      "%02x %02x %02x %02x)",
                      h[0], h[1], h[2], h[3]);
    if (!tt_read_all(ch->fd, h + 4, sizeof(h) - 4))
        return tt_err(err, TT_ERR_IO, "connection closed or timed out inside a message header");
    uint64_t jl = get_le(h + 4, 4);
    *blob_len = get_le(h + 8, 8);
    if (jl > TT_MPROTO_MAX_JSON)
        return tt_err(err, TT_ERR_LIMIT, "message of %" PRIu64 " bytes exceeds the %u-byte limit",
                      jl, TT_MPROTO_MAX_JSON);
    char *text = malloc(jl + 1);
    if (!text)
        return tt_err(err, TT_ERR_NOMEM, "out of memory receiving a message");
    if (!tt_read_all(ch->fd, text, jl)) {
        free(text);
        return tt_err(err, TT_ERR_IO, "connection closed or timed out inside a message");
    }
    tt_status s = TT_OK;
    if (ch->sealed) { /* nothing of an unauthenticated message is looked at */
        tt_auth_mac m;
        ch->blob_seq = ch->received;
        mac_start(ch, &m, !ch->is_server, ch->received++, 'M');
        tt_auth_mac_update(&m, h, sizeof(h));
        tt_auth_mac_update(&m, text, (size_t)jl);
        s = check_tag(ch, &m, "message", err);
    }
    json_t *j = NULL;
    if (!s)
        s = tt_json_parse(text, jl, &j, err);
    free(text);
    if (s)
        return s;
    if (!json_is_object(j) || !json_is_string(json_object_get(j, "op"))) {
        json_decref(j);
        return tt_err(err, TT_ERR_PARSE, "message is not an object with a string \"op\"");
    }
    *msg = j;
    return TT_OK;
}

tt_status tt_mproto_recv_blob(tt_mchan *ch, uint64_t len, int out_fd, uint64_t *hash,
                              tt_errbuf *err)
{
    uint64_t h = TT_FNV64_OFFSET;
    char buf[65536];
    tt_auth_mac m;
    bool sealed = ch->sealed && len;
    if (sealed)
        mac_start(ch, &m, !ch->is_server, ch->blob_seq, 'B');
    tt_status s = TT_OK;
    while (len) {
        size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
        if (!tt_read_all(ch->fd, buf, n)) {
            s = tt_err(err, TT_ERR_IO, "connection closed or timed out inside a blob");
            break;
        }
        h = tt_hash64_update(h, buf, n);
        if (sealed)
            tt_auth_mac_update(&m, buf, n);
        if (out_fd >= 0 && !tt_write_all(out_fd, buf, n)) {
            s = tt_err(err, TT_ERR_IO, "cannot store a blob: %s", strerror(errno));
            break;
        }
        len -= n;
    }
    if (sealed && s)
        tt_auth_mac_final(&m, (uint8_t[TT_AUTH_TAG_BYTES]){0});
    else if (sealed)
        s = check_tag(ch, &m, "blob", err);
    if (!s && hash)
        *hash = h;
    return s;
}

void tt_artifact_id(uint64_t hash, uint64_t len, char out[TT_ARTIFACT_ID_MAX])
{
    snprintf(out, TT_ARTIFACT_ID_MAX, "%016" PRIx64 "-%" PRIu64, hash, len);
}

bool tt_artifact_id_parse(const char *id, uint64_t *hash, uint64_t *len)
{
    if (!id || strlen(id) < 18 || strlen(id) >= TT_ARTIFACT_ID_MAX || id[16] != '-')
        return false;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", id[i]))
            return false;
    for (const char *p = id + 17; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    char *end;
    errno = 0;
    *hash = strtoull(id, &end, 16);
    *len = strtoull(id + 17, &end, 10);
    return errno == 0;
}

static const char *const elem_names[] = {"float32", "float64", "int32", "int64", "uint8"};

const char *tt_elem_name(tt_elem e)
{
    return (unsigned)e < TT_ARRAY_LEN(elem_names) ? elem_names[e] : "unknown";
}

bool tt_elem_parse(const char *name, tt_elem *out)
{
    for (size_t i = 0; name && i < TT_ARRAY_LEN(elem_names); i++)
        if (!strcmp(name, elem_names[i])) {
            *out = (tt_elem)i;
            return true;
        }
    return false;
}

static const char *const cache_flush_names[] = {"off", "inputs", "constants", "network"};
#define NFLUSH (int)(sizeof(cache_flush_names) / sizeof(cache_flush_names[0]))

const char *tt_cache_flush_name(tt_cache_flush f)
{
    return (int)f >= 0 && (int)f < NFLUSH ? cache_flush_names[f] : "off";
}

const char *tt_measure_flush_name(tt_cache_flush f, double llc_share)
{
    return f == TT_CACHE_FLUSH_NETWORK ? tt_measure_network_flush_name(llc_share)
                                       : tt_cache_flush_name(f);
}

bool tt_cache_flush_parse(const char *s, tt_cache_flush *out)
{
    for (int i = 0; s && i < NFLUSH; i++)
        if (!strcmp(s, cache_flush_names[i])) {
            *out = (tt_cache_flush)i;
            return true;
        }
    return false;
}

/* The flush as JSON: false and true for off and inputs (what peers before the constants mode
 * read), a name otherwise. */
json_t *tt_cache_flush_json(tt_cache_flush f)
{
    return f >= TT_CACHE_FLUSH_CONSTANTS ? json_string(tt_cache_flush_name(f))
                                         : json_boolean(f == TT_CACHE_FLUSH_INPUTS);
}

bool tt_cache_flush_from_json(const json_t *j, tt_cache_flush *out)
{
    if (json_is_boolean(j)) {
        *out = json_is_true(j) ? TT_CACHE_FLUSH_INPUTS : TT_CACHE_FLUSH_OFF;
        return true;
    }
    return tt_cache_flush_parse(json_string_value(j), out);
}

json_t *tt_measure_options_json(const tt_measure_options *o)
{
    return json_pack("{s:i, s:i, s:f, s:f, s:f, s:o, s:I, s:f, s:f, s:I, s:f, s:f}", "number",
                     o->number, "repeat", o->repeat, "min_repeat_ms", o->min_repeat_ms,
                     "repeat_budget_ms", o->repeat_budget_ms, "cooldown_ms", o->cooldown_ms,
                     "cache_flush", tt_cache_flush_json(o->cache_flush), "network_bytes",
                     (json_int_t)o->network_bytes, "timeout_s", o->timeout_s, "kernel_timeout_s",
                     o->kernel_timeout_s, "memory_limit", (json_int_t)o->memory_limit, "rtol",
                     o->rtol, "atol", o->atol);
}

static double num_or(const json_t *j, const char *k, double dflt)
{
    const json_t *v = json_object_get(j, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

void tt_measure_options_from_json(const json_t *j, tt_measure_options *o)
{
    o->number = (int)num_or(j, "number", o->number);
    o->repeat = (int)num_or(j, "repeat", o->repeat);
    o->min_repeat_ms = num_or(j, "min_repeat_ms", o->min_repeat_ms);
    o->repeat_budget_ms = num_or(j, "repeat_budget_ms", o->repeat_budget_ms);
    o->cooldown_ms = num_or(j, "cooldown_ms", o->cooldown_ms);
    tt_cache_flush_from_json(json_object_get(j, "cache_flush"), &o->cache_flush);
    o->network_bytes = (int64_t)num_or(j, "network_bytes", (double)o->network_bytes);
    if (o->network_bytes < 0)
        o->network_bytes = 0;
    o->timeout_s = num_or(j, "timeout_s", o->timeout_s);
    o->kernel_timeout_s = num_or(j, "kernel_timeout_s", o->kernel_timeout_s);
    o->memory_limit = (int64_t)num_or(j, "memory_limit", (double)o->memory_limit);
    o->rtol = num_or(j, "rtol", o->rtol);
    o->atol = num_or(j, "atol", o->atol);
}

json_t *tt_measure_result_json(const tt_measure_result *r)
{
    json_t *costs = json_array();
    for (int i = 0; i < r->ncosts && i < TT_MEASURE_MAX_REPEAT; i++)
        json_array_append_new(costs, json_real(r->costs[i]));
    /* weights_in_llc: what a device before the shares said (all of it or none) */
    return json_pack("{s:s, s:i, s:s, s:o, s:i, s:f, s:f, s:b}", "op", "result", "error_no",
                     r->error_no, "error_text", r->error_text, "costs", costs, "number", r->number,
                     "run_s", r->run_s, "llc_share", r->llc_share, "weights_in_llc",
                     r->llc_share >= 1);
}

tt_status tt_measure_result_from_json(const json_t *j, tt_measure_result *r, tt_errbuf *err)
{
    memset(r, 0, sizeof(*r));
    const json_t *costs = json_object_get(j, "costs"), *eno = json_object_get(j, "error_no");
    if (!json_is_array(costs) || !json_is_integer(eno) ||
        json_array_size(costs) > TT_MEASURE_MAX_REPEAT)
        return tt_err(err, TT_ERR_PARSE, "result message without error_no or costs");
    r->error_no = (int)json_integer_value(eno);
    if (r->error_no < 0 || r->error_no > 8)
        return tt_err(err, TT_ERR_PARSE, "result error_no %d is not a MeasureErrorNo", r->error_no);
    const json_t *text = json_object_get(j, "error_text");
    snprintf(r->error_text, sizeof(r->error_text), "%s",
             json_is_string(text) ? json_string_value(text) : "");
    for (size_t i = 0; i < json_array_size(costs); i++) {
        const json_t *c = json_array_get(costs, i);
        if (!json_is_number(c))
            return tt_err(err, TT_ERR_PARSE, "result cost %zu is not a number", i);
        r->costs[r->ncosts++] = json_number_value(c);
    }
    r->number = (int)num_or(j, "number", 1);
    r->run_s = num_or(j, "run_s", 0);
    const json_t *share = json_object_get(j, "llc_share");
    if (share &&
        (!json_is_number(share) || json_number_value(share) < 0 || json_number_value(share) > 1))
        return tt_err(err, TT_ERR_PARSE, "result llc_share is not a number from 0 to 1");
    r->llc_share = share                                                ? json_number_value(share)
                   : json_is_true(json_object_get(j, "weights_in_llc")) ? 1
                                                                        : 0;
    return TT_OK;
}
