#include "tracker_client.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* The client's half of code 105: our nonce out, the tracker's nonce and proof back, checked,
 * then our proof. */
static tt_status authenticate(tt_tracker_conn *c, const char *host, int port,
                              const tt_auth_keyring *auth, tt_errbuf *err)
{
    uint8_t cn[TT_AUTH_NONCE_BYTES], sn[TT_AUTH_NONCE_BYTES], proof[TT_AUTH_TAG_BYTES];
    char hex[TT_AUTH_HEX], msg[2 * TT_AUTH_HEX];
    tt_auth_nonce(cn);
    tt_auth_hex(cn, hex);
    snprintf(msg, sizeof(msg), "[%d, \"hello\", \"%s\"]", TT_TRACKER_AUTH, hex);
    char *reply = NULL;
    tt_errbuf e2 = {{0}};
    if (tt_tracker_call(c, msg, &reply, &e2))
        return tt_err(err, TT_ERR_AUTH,
                      "the tracker at %s:%d closed the connection when asked to authenticate "
                      "(a TVM tracker, or an older tvm-tracker): %s",
                      host, port, e2.msg);
    json_t *r = NULL;
    tt_status s = tt_json_parse(reply, strlen(reply), &r, err);
    free(reply);
    if (s)
        return s;
    const char *why = json_string_value(json_array_get(r, 1));
    if (json_integer_value(json_array_get(r, 0)) != 0) {
        s = tt_err(err, TT_ERR_AUTH, "the tracker at %s:%d: %s", host, port,
                   why ? why : "authentication refused");
    } else if (!tt_auth_unhex(why, sn) ||
               !tt_auth_unhex(json_string_value(json_array_get(r, 2)), proof) ||
               tt_auth_verify(auth, TT_AUTH_TRACKER_SERVER, cn, sn, proof) < 0) {
        s = tt_err(err, TT_ERR_AUTH,
                   "the tracker at %s:%d did not prove the farm's key (a different key, or not "
                   "this farm's tracker)",
                   host, port);
    }
    json_decref(r);
    if (s)
        return s;
    tt_auth_prove(auth, TT_AUTH_TRACKER_CLIENT, cn, sn, proof);
    tt_auth_hex(proof, hex);
    snprintf(msg, sizeof(msg), "[%d, \"proof\", \"%s\"]", TT_TRACKER_AUTH, hex);
    if (tt_tracker_call(c, msg, &reply, &e2))
        return tt_err(err, TT_ERR_AUTH, "the tracker at %s:%d: authentication lost: %s", host, port,
                      e2.msg);
    bool ok = !strcmp(reply, "0");
    s = ok ? TT_OK
           : tt_err(err, TT_ERR_AUTH,
                    "the tracker at %s:%d refused this key (%s): it holds a different one", host,
                    port, reply);
    free(reply);
    return s;
}

tt_status tt_tracker_connect(const char *host, int port, double timeout_s,
                             const tt_auth_keyring *auth, tt_tracker_conn *c, tt_errbuf *err)
{
    memset(c, 0, sizeof(*c));
    /* keepalive (tt_socket_dial): a device notices a cut link and registers again */
    char why[160];
    c->fd = tt_socket_dial(host, port, timeout_s, why, sizeof(why));
    if (c->fd < 0)
        return tt_err(err, TT_ERR_IO, "cannot connect to the tracker at %s:%d: %s", host, port,
                      why);
    /* The magic goes alone, and nothing more until the echo: TVM's tracker needs that. */
    uint8_t m[4], echo[4];
    tt_put_le32(m, TT_TRACKER_MAGIC);
    if (!tt_write_all(c->fd, m, 4) || !tt_read_all(c->fd, echo, 4) ||
        tt_get_le32(echo) != TT_TRACKER_MAGIC) {
        close(c->fd);
        c->fd = -1;
        return tt_err(err, TT_ERR_IO, "%s:%d is not a TVM tracker (no magic echo)", host, port);
    }
    tt_frame_reader_init(&c->reader, false);
    if (auth && auth->nkeys) {
        tt_status s = authenticate(c, host, port, auth, err);
        if (s) {
            tt_tracker_close(c);
            return s;
        }
    }
    return TT_OK;
}

void tt_tracker_close(tt_tracker_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    tt_frame_reader_free(&c->reader);
    c->fd = -1;
}

tt_status tt_tracker_send(tt_tracker_conn *c, const char *json, tt_errbuf *err)
{
    tt_strbuf sb = {0};
    tt_frame_append(&sb, json, strlen(json));
    bool ok = !sb.oom && tt_write_all(c->fd, sb.data, sb.len);
    tt_strbuf_free(&sb);
    return ok ? TT_OK : tt_err(err, TT_ERR_IO, "sending to the tracker: %s", strerror(errno));
}

tt_status tt_tracker_recv(tt_tracker_conn *c, char **reply, tt_errbuf *err)
{
    *reply = NULL;
    for (;;) {
        const char *payload;
        size_t len;
        tt_frame_event ev = tt_frame_reader_next(&c->reader, &payload, &len, err);
        if (ev == TT_FRAME_ERROR)
            return TT_ERR_IO;
        if (ev == TT_FRAME_OK) {
            if (!(*reply = malloc(len + 1)))
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
            memcpy(*reply, payload, len);
            (*reply)[len] = 0;
            return TT_OK;
        }
        char buf[65536];
        ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return tt_err(err, TT_ERR_LIMIT, "the tracker did not answer in time");
        if (r <= 0)
            return tt_err(err, TT_ERR_IO, "the tracker %s",
                          r == 0 ? "closed the connection" : strerror(errno));
        if (tt_frame_reader_feed(&c->reader, buf, (size_t)r))
            return tt_err(err, TT_ERR_IO, "the tracker's reply is too large");
    }
}

tt_status tt_tracker_call(tt_tracker_conn *c, const char *json, char **reply, tt_errbuf *err)
{
    *reply = NULL;
    tt_status s = tt_tracker_send(c, json, err);
    if (!s)
        s = tt_tracker_recv(c, reply, err);
    return s == TT_ERR_LIMIT ? TT_ERR_IO : s;
}

typedef struct {
    const char *key;
    const json_t *info;
} device_row;

static int cmp_device_row(const void *a, const void *b)
{
    const device_row *x = a, *y = b;
    return strcmp(x->key, y->key);
}

tt_status tt_tracker_format_devices(const char *summary_json, char **out, tt_errbuf *err)
{
    *out = NULL;
    json_t *v;
    tt_status s = tt_json_parse(summary_json, strlen(summary_json), &v, err);
    if (s)
        return s;
    const json_t *servers = json_object_get(json_array_get(v, 1), "server_info");
    if (json_integer_value(json_array_get(v, 0)) != 0 || !json_is_array(servers)) {
        json_decref(v);
        return tt_err(err, TT_ERR_PARSE, "not a SUMMARY reply");
    }
    size_t n = json_array_size(servers);
    device_row *rows = calloc(n ? n : 1, sizeof(device_row));
    if (!rows) {
        json_decref(v);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        rows[i].info = json_array_get(servers, i);
        const char *k = json_string_value(json_object_get(rows[i].info, "key"));
        rows[i].key = k && strchr(k, ':') ? strchr(k, ':') + 1 : (k ? k : "?");
    }
    qsort(rows, n, sizeof(device_row), cmp_device_row);
    tt_strbuf sb = {0};
    tt_strbuf_printf(&sb, "%-12s %-22s %-22s %-8s %5s  %s\n", "key", "address", "server", "arch",
                     "cores", "state");
    for (size_t i = 0; i < n; i++) {
        const json_t *info = rows[i].info, *addr = json_object_get(info, "addr");
        const json_t *dev = json_object_get(info, "device"), *t = json_object_get(info, "tracker");
        char address[128] = "?";
        const json_t *h = json_array_get(addr, 0), *p = json_array_get(addr, 1);
        if (json_is_string(h) && json_is_string(p))
            snprintf(address, sizeof(address), "%s:%s", json_string_value(h), json_string_value(p));
        else if (json_is_string(h))
            snprintf(address, sizeof(address), "%s:%lld", json_string_value(h),
                     (long long)json_integer_value(p));
        const char *impl = json_string_value(json_object_get(info, "impl"));
        const char *arch = json_string_value(json_object_get(dev, "arch"));
        char cores[16] = "?";
        if (json_is_integer(json_object_get(dev, "cores")))
            snprintf(cores, sizeof(cores), "%lld",
                     (long long)json_integer_value(json_object_get(dev, "cores")));
        char state[600] = "";
        const char *q = json_string_value(json_object_get(t, "quarantined"));
        if (q)
            snprintf(state, sizeof(state), "quarantined: %s", q);
        else if (json_is_true(json_object_get(t, "stale")))
            snprintf(state, sizeof(state), "stale: silent %.0f s (not handed out)",
                     json_number_value(json_object_get(t, "silent_s")));
        else if (json_is_number(json_object_get(t, "silent_s")))
            snprintf(state, sizeof(state), "ok (heard %.0f s ago)",
                     json_number_value(json_object_get(t, "silent_s")));
        else
            snprintf(state, sizeof(state), "ok");
        tt_strbuf_printf(&sb, "%-12s %-22s %-22s %-8s %5s  %s\n", rows[i].key, address,
                         impl ? impl : "TVM server", arch ? arch : "?", cores, state);
        /* Its OpenCL devices, the measuring one marked. */
        const json_t *cl = json_object_get(dev, "opencl");
        for (size_t k = 0; json_is_array(cl) && k < json_array_size(cl); k++) {
            const json_t *c = json_array_get(cl, k);
            const char *name = json_string_value(json_object_get(c, "name"));
            const char *type = json_string_value(json_object_get(c, "type"));
            long long warp = (long long)json_integer_value(json_object_get(c, "warp"));
            tt_strbuf_printf(&sb, "%-12s   opencl %lld:%lld %s%s (%s, %lld units, local %lld KiB",
                             "", (long long)json_integer_value(json_object_get(c, "platform")),
                             (long long)json_integer_value(json_object_get(c, "device")),
                             json_is_true(json_object_get(c, "selected")) ? "* " : "",
                             name ? name : "?", type ? type : "?",
                             (long long)json_integer_value(json_object_get(c, "compute_units")),
                             (long long)json_integer_value(json_object_get(c, "local_mem")) / 1024);
            if (warp > 0)
                tt_strbuf_printf(&sb, ", warps of %lld", warp);
            tt_strbuf_append(&sb, ")\n");
        }
    }
    for (size_t i = 0; i < n; i++) {
        bool first = i == 0 || strcmp(rows[i].key, rows[i - 1].key);
        if (!first)
            continue;
        int ours = 0, theirs = 0;
        for (size_t j = i; j < n && !strcmp(rows[j].key, rows[i].key); j++) {
            if (json_object_get(rows[j].info, "impl"))
                ours++;
            else
                theirs++;
        }
        if (ours && theirs)
            tt_strbuf_printf(&sb,
                             "warning: key '%s' mixes %d TVM server%s with %d tvm-rpc-server%s: "
                             "tvm-tune cannot measure on TVM servers\n",
                             rows[i].key, theirs, theirs > 1 ? "s" : "", ours, ours > 1 ? "s" : "");
    }
    if (n == 0)
        tt_strbuf_append(&sb, "(no servers)\n");
    free(rows);
    json_decref(v);
    if (sb.oom) {
        tt_strbuf_free(&sb);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    *out = tt_strbuf_take(&sb);
    return TT_OK;
}

tt_status tt_tracker_ext_call(const char *host, int port, const tt_auth_keyring *auth,
                              const char *json, json_t **result, tt_errbuf *err)
{
    *result = NULL;
    tt_tracker_conn c;
    tt_status s = tt_tracker_connect(host, port, 30, auth, &c, err);
    if (s)
        return s;
    char *reply = NULL;
    s = tt_tracker_call(&c, json, &reply, err);
    tt_tracker_close(&c);
    if (s == TT_ERR_IO && strstr(err->msg, "closed"))
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "the tracker at %s:%d does not run tuning jobs (a TVM tracker, or "
                      "tvm-tracker --no-jobs)",
                      host, port);
    if (s)
        return s;
    json_t *r = NULL;
    s = tt_json_parse(reply, strlen(reply), &r, err);
    free(reply);
    if (s)
        return s;
    json_t *code = json_array_get(r, 0), *value = json_array_get(r, 1);
    if (!json_is_integer(code) || !value) {
        s = tt_err(err, TT_ERR_PARSE, "the tracker's reply is not [code, value]");
    } else if (json_integer_value(code) != 0) {
        s = tt_err(err, TT_ERR_INVALID_ARG, "%s",
                   json_is_string(value) ? json_string_value(value) : "the tracker refused");
    } else {
        *result = json_incref(value);
    }
    json_decref(r);
    return s;
}

tt_status tt_tracker_parse_address(const char *text, int default_port, char *host, size_t n,
                                   int *port, tt_errbuf *err)
{
    const char *colon;
    *port = default_port;
    if (text[0] == '[') { /* [v6]:port */
        const char *close_br = strchr(text, ']');
        if (!close_br)
            return tt_err(err, TT_ERR_INVALID_ARG, "bad address '%s'", text);
        snprintf(host, n, "%.*s", (int)(close_br - text - 1), text + 1);
        colon = close_br[1] == ':' ? close_br + 1 : NULL;
    } else {
        colon = strrchr(text, ':');
        if (colon && strchr(text, ':') != colon) /* a bare IPv6 address */
            colon = NULL;
        snprintf(host, n, "%.*s", colon ? (int)(colon - text) : (int)strlen(text), text);
    }
    if (colon) {
        char *end;
        long p = strtol(colon + 1, &end, 10);
        if (*end || p <= 0 || p > 65535)
            return tt_err(err, TT_ERR_INVALID_ARG, "bad port in '%s'", text);
        *port = (int)p;
    }
    if (!host[0])
        return tt_err(err, TT_ERR_INVALID_ARG, "no host in '%s'", text);
    return TT_OK;
}

/* ---- query_rpc_tracker's text ---- */

static void dashes(tt_strbuf *sb, int n)
{
    for (int i = 0; i < n; i++)
        tt_strbuf_append(sb, "-");
    tt_strbuf_append(sb, "\n");
}

static void scalar_text(tt_strbuf *sb, const json_t *v)
{
    if (json_is_string(v))
        tt_strbuf_append(sb, json_string_value(v));
    else if (json_is_integer(v))
        tt_strbuf_printf(sb, "%lld", (long long)json_integer_value(v));
    else if (json_is_null(v))
        tt_strbuf_append(sb, "None");
    else
        tt_json_write_py(sb, v);
}

/* The rpc key of a "server:<key>" entry (Python's key.split(":")[1]). */
static void server_key(const char *k, char *out, size_t n)
{
    const char *c = k ? strchr(k, ':') : NULL;
    const char *e = c ? strchr(c + 1, ':') : NULL;
    if (!c) {
        out[0] = 0;
        return;
    }
    snprintf(out, n, "%.*s", e ? (int)(e - c - 1) : (int)strlen(c + 1), c + 1);
}

typedef struct {
    json_t *v;
    size_t i;
} entry;

static int cmp_key(const void *a, const void *b)
{
    const entry *p = a, *q = b;
    const char *x = json_string_value(json_object_get(p->v, "key"));
    const char *y = json_string_value(json_object_get(q->v, "key"));
    int r = strcmp(x ? x : "", y ? y : "");
    /* stable, as Python's sort: equal keys keep their order */
    return r ? r : (p->i < q->i ? -1 : p->i > q->i);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

tt_status tt_tracker_format_summary(const char *summary_json, const char *host, int port,
                                    bool legacy, char **out, tt_errbuf *err)
{
    *out = NULL;
    json_t *v;
    tt_status s = tt_json_parse(summary_json, strlen(summary_json), &v, err);
    if (s)
        return s;
    json_t *d = json_array_get(v, 1);
    json_t *qi = json_object_get(d, "queue_info"), *si = json_object_get(d, "server_info");
    if (!json_is_integer(json_array_get(v, 0)) || json_integer_value(json_array_get(v, 0)) != 0 ||
        !json_is_object(qi) || !json_is_array(si)) {
        json_decref(v);
        return tt_err(err, TT_ERR_PARSE, "not a SUMMARY reply");
    }
    tt_strbuf sb = {0};
    tt_strbuf_printf(&sb, "Tracker address %s:%d\n\n", host, port);
    tt_strbuf_append(&sb, "Server List\n");
    dashes(&sb, 30);
    tt_strbuf_append(&sb, "server-address           key\n");
    dashes(&sb, 30);
    size_t ns = json_array_size(si);
    entry *servers = calloc(ns ? ns : 1, sizeof(entry));
    for (size_t i = 0; servers && i < ns; i++)
        servers[i] = (entry){json_array_get(si, i), i};
    if (servers)
        qsort(servers, ns, sizeof(entry), cmp_key);
    for (size_t i = 0; servers && i < ns; i++) {
        tt_strbuf addr = {0};
        const json_t *a = json_object_get(servers[i].v, "addr");
        for (size_t k = 0; k < json_array_size(a); k++) {
            if (k)
                tt_strbuf_append(&addr, ":");
            scalar_text(&addr, json_array_get(a, k));
        }
        const char *key = json_string_value(json_object_get(servers[i].v, "key"));
        tt_strbuf_printf(&sb, legacy ? "%21s    %s\n" : "%-21s    %s\n", tt_strbuf_cstr(&addr),
                         key ? key : "");
        tt_strbuf_free(&addr);
    }
    dashes(&sb, 30);
    tt_strbuf_append(&sb, "\nQueue Status\n");
    size_t nk = json_object_size(qi);
    const char **keys = calloc(nk ? nk : 1, sizeof(char *));
    size_t nkeys = 0, longest = 0;
    const char *k;
    json_t *val;
    json_object_foreach(qi, k, val)
    {
        if (keys)
            keys[nkeys++] = k;
        longest = strlen(k) > longest ? strlen(k) : longest;
    }
    if (keys)
        qsort(keys, nkeys, sizeof(char *), cmp_str);
    int L = (int)(longest > 3 ? longest : 3), W = L + 23;
    dashes(&sb, W + 1);
    tt_strbuf_printf(&sb, "%-*s   total  free  pending\n", L, "key");
    dashes(&sb, W + 1);
    for (size_t i = 0; keys && i < nkeys; i++) {
        json_t *q = json_object_get(qi, keys[i]);
        long long free_ = json_integer_value(json_object_get(q, "free"));
        long long pending = json_integer_value(json_object_get(q, "pending"));
        long long total = 0;
        for (size_t j = 0; j < ns; j++) {
            char sk[256];
            server_key(json_string_value(json_object_get(json_array_get(si, j), "key")), sk,
                       sizeof(sk));
            total += !strcmp(sk, keys[i]);
        }
        if (total == 0 && pending == 0)
            continue;
        char t[32], f[32], p[32];
        snprintf(t, sizeof(t), "%lld", total);
        snprintf(f, sizeof(f), "%lld", free_);
        snprintf(p, sizeof(p), "%lld", pending);
        tt_strbuf_printf(&sb, "%-*s   %-5s  %-4s  %-7s\n", L, keys[i], t, f, p);
    }
    dashes(&sb, W + 1);
    tt_strbuf_append(&sb, "\n");
    free(keys);
    free(servers);
    json_decref(v);
    if (sb.oom) {
        tt_strbuf_free(&sb);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    *out = tt_strbuf_take(&sb);
    return TT_OK;
}
