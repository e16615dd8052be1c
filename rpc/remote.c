#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "measure_proto.h"
#include "tracker_client.h"

#define MAX_DATA_IDS 32

struct tt_remote {
    int fd;
    tt_mchan ch; /* the measurement protocol on fd, sealed once authenticated */
    char peer[300];
    char host[256];
    int port;
    tt_device_info dev;
    /* ids the device is known to hold (asked or sent in this session) */
    TT_VEC(char *) known;
    /* content ids of argument buffers, by address (the tuner's buffers live for the task) */
    struct {
        const void *p;
        int64_t bytes;
        char id[TT_ARTIFACT_ID_MAX];
    } data_ids[MAX_DATA_IDS];
    int ndata_ids;
};

/* A device whose link is cut silently sends nothing, not even a reset: with keepalive
 * (tt_socket_dial) the session ends in about 15 s instead of waiting out the measurement timeout
 * and its slack. */
static int dial(const char *host, int port, double timeout_s, tt_errbuf *err)
{
    char why[160];
    int fd = tt_socket_dial(host, port, timeout_s, why, sizeof(why));
    if (fd < 0)
        tt_err(err, TT_ERR_IO, "cannot connect to the device at %s:%d: %s", host, port, why);
    return fd;
}

/* REQUEST on the tracker: the device's address and ticket.  The wait is cut in one-second
 * slices so that a stop request ends it promptly. */
static tt_status request(const tt_remote_options *o, char *host, size_t hn, int *port,
                         char *matchkey, size_t mn, tt_errbuf *err)
{
    double wait = o->request_timeout_s > 0 ? o->request_timeout_s : 600;
    tt_tracker_conn c;
    tt_status st = tt_tracker_connect(o->tracker_host, o->tracker_port, 10, o->auth, &c, err);
    if (st)
        return st;
    json_t *m = json_pack("[i, s, s, i]", 4, o->key, "", o->priority);
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    char *reply = NULL;
    st = text ? tt_tracker_send(&c, text, err) : tt_err(err, TT_ERR_NOMEM, "out of memory");
    free(text);
    tt_socket_deadlines(c.fd, 1); /* the REQUEST is sent: only the receive deadline matters */
    double t0 = tt_clock_monotonic();
    while (!st) {
        st = tt_tracker_recv(&c, &reply, err);
        if (st != TT_ERR_LIMIT)
            break;
        if (o->stop && *o->stop) {
            st =
                tt_err(err, TT_ERR_LIMIT, "stopped while waiting for a device of key '%s'", o->key);
            break;
        }
        if (tt_clock_monotonic() - t0 >= wait) {
            st = tt_err(err, TT_ERR_LIMIT, "no device of key '%s' became free within %.0f s",
                        o->key, wait);
            break;
        }
        st = TT_OK;
    }
    tt_tracker_close(&c);
    if (st == TT_ERR_IO)
        return tt_err_prefix(err, TT_ERR_IO, "waiting for a device of key '%s'", o->key);
    if (st)
        return st;
    json_t *r = NULL;
    st = tt_json_parse(reply, strlen(reply), &r, err);
    json_t *addr = json_array_get(r, 1);
    json_t *h = json_array_get(addr, 0), *p = json_array_get(addr, 1), *k = json_array_get(addr, 2);
    if (!st && (json_integer_value(json_array_get(r, 0)) != 0 || !json_is_string(h) ||
                !json_is_integer(p) || !json_is_string(k)))
        st = tt_err(err, TT_ERR_PARSE, "the tracker answered REQUEST with %s", reply);
    if (!st) {
        snprintf(host, hn, "%s", json_string_value(h));
        *port = (int)json_integer_value(p);
        snprintf(matchkey, mn, "%s", json_string_value(k));
    }
    json_decref(r);
    free(reply);
    return st;
}

/* The client's half of the measurement protocol's authentication: the device's hello carried
 * its nonce and proof; check them, send ours, and seal the channel. */
static tt_status authenticate(tt_remote *r, const tt_auth_keyring *auth, const json_t *hello,
                              const uint8_t cn[TT_AUTH_NONCE_BYTES], tt_errbuf *err)
{
    const json_t *a = json_object_get(hello, "auth");
    uint8_t sn[TT_AUTH_NONCE_BYTES], proof[TT_AUTH_TAG_BYTES];
    if (!a)
        return tt_err(err, TT_ERR_AUTH,
                      "device %s has no key (started without --auth-key-file), so it cannot prove "
                      "it belongs to this farm",
                      r->peer);
    /* The device proved with its first key, which is one of ours (k); we prove with our first,
     * which is one of its: the session key takes both, and each side knows both. */
    int k = tt_auth_unhex(json_string_value(json_object_get(a, "nonce")), sn) &&
                    tt_auth_unhex(json_string_value(json_object_get(a, "proof")), proof)
                ? tt_auth_verify(auth, TT_AUTH_MEASURE_SERVER, cn, sn, proof)
                : -1;
    if (k < 0)
        return tt_err(err, TT_ERR_AUTH,
                      "device %s did not prove the farm's key (it holds a different one)", r->peer);
    tt_auth_prove(auth, TT_AUTH_MEASURE_CLIENT, cn, sn, proof);
    char hex[TT_AUTH_HEX], text[TT_AUTH_HEX + 32];
    tt_auth_hex(proof, hex);
    snprintf(text, sizeof(text), "{\"op\":\"auth\",\"proof\":\"%s\"}", hex);
    tt_status st = tt_mproto_send(&r->ch, text, NULL, 0, err);
    if (st)
        return st;
    uint8_t session[TT_AUTH_KEY_BYTES];
    tt_auth_session_key(auth->key[0], auth->key[k], cn, sn, session);
    tt_mchan_seal(&r->ch, session);
    json_t *msg = NULL;
    uint64_t blob = 0;
    st = tt_mproto_recv(&r->ch, &msg, &blob, err);
    if (st) /* the refusal is an unsealed error and a close */
        return tt_err_prefix(err, TT_ERR_AUTH,
                             "device %s did not accept this key (it holds a different one)",
                             r->peer);
    if (!st && (strcmp(json_string_value(json_object_get(msg, "op")), "auth") || blob))
        st = tt_err(err, TT_ERR_AUTH, "device %s answered the authentication with '%s'", r->peer,
                    json_string_value(json_object_get(msg, "op")));
    json_decref(msg);
    return st;
}

/* Whether the device of a session that closed before its hello is gone (killed or crashed after
 * the handshake: a lost device the farm works around) rather than alive and silent to our hello
 * (a TVM RPC server registered under our key, which no retry mends).  A dead device's port
 * refuses the probe.  A dying one may still accept it: the kernel closes a killed process's
 * sockets in descriptor order, and the session's can come before the listening one.  Closing
 * that listening socket then resets the probe within moments, whereas a live server holds it
 * open, waiting for a handshake, far longer than the grace given here. */
#define GONE_GRACE_MS 500

static bool device_gone(const tt_remote *r)
{
    int fd = dial(r->host, r->port, 2, NULL);
    if (fd < 0)
        return true;
    struct pollfd p = {fd, POLLIN, 0};
    int ready;
    while ((ready = poll(&p, 1, GONE_GRACE_MS)) < 0 && errno == EINTR)
        ;
    char c;
    bool reset = ready > 0 && recv(fd, &c, 1, MSG_PEEK) <= 0;
    close(fd);
    return reset;
}

static tt_status handshake(tt_remote *r, const char *matchkey, double session_s,
                           const tt_auth_keyring *auth, tt_errbuf *err)
{
    char key[512];
    int kl = snprintf(key, sizeof(key), "client:%s -timeout=%d %s", matchkey,
                      (int)(session_s + 0.5), TT_MPROTO_TOKEN);
    uint8_t h[8];
    tt_put_le32(h, TT_RPC_MAGIC);
    tt_put_le32(h + 4, kl);
    if (!tt_write_all(r->fd, h, 8) || !tt_write_all(r->fd, key, (size_t)kl))
        return tt_err(err, TT_ERR_IO, "device %s: connection lost during the handshake", r->peer);
    uint8_t code[4];
    if (!tt_read_all(r->fd, code, 4))
        return tt_err(err, TT_ERR_IO, "device %s closed the connection during the handshake",
                      r->peer);
    int32_t c = tt_get_le32(code);
    if (c == TT_RPC_MISMATCH)
        return tt_err(err, TT_ERR_IO, "device %s did not accept the ticket (it was regenerated)",
                      r->peer);
    if (c != TT_RPC_SUCCESS)
        return tt_err(err, TT_ERR_IO, "%s is not a TVM RPC server (handshake code 0x%x)", r->peer,
                      (unsigned)c);
    uint8_t lb[4];
    char skey[4097];
    int32_t len = tt_read_all(r->fd, lb, 4) ? tt_get_le32(lb) : -1;
    if (len < 0 || len > 4096 || !tt_read_all(r->fd, skey, (size_t)len))
        return tt_err(err, TT_ERR_IO, "device %s: malformed handshake reply", r->peer);
    /* Our protocol: hello both ways.  A TVM server answers with its own bytes (or nothing). */
    json_t *hello = json_pack("{s:s, s:i, s:s}", "op", "hello", "proto", TT_MPROTO_VERSION,
                              "client", "tvm-tune");
    bool keyed = auth && auth->nkeys;
    uint8_t cn[TT_AUTH_NONCE_BYTES];
    if (keyed) {
        char hex[TT_AUTH_HEX];
        tt_auth_nonce(cn);
        tt_auth_hex(cn, hex);
        json_object_set_new(hello, "nonce", json_string(hex));
    }
    char *text = json_dumps(hello, JSON_COMPACT);
    json_decref(hello);
    tt_status st = tt_mproto_send(&r->ch, text, NULL, 0, err);
    free(text);
    if (st)
        return st;
    json_t *msg = NULL;
    uint64_t blob = 0;
    st = tt_mproto_recv(&r->ch, &msg, &blob, err);
    if (st == TT_ERR_IO && device_gone(r))
        return tt_err(err, TT_ERR_IO, "device %s went away during the handshake", r->peer);
    if (st == TT_ERR_PARSE || st == TT_ERR_IO)
        return tt_err_prefix(err, TT_ERR_PARSE, "%s (key %.*s) is not a tvm-rpc-server", r->peer,
                             len, skey);
    if (st)
        return st;
    const char *op = json_string_value(json_object_get(msg, "op"));
    const json_t *dev = json_object_get(msg, "device");
    if (strcmp(op, "hello") || !json_is_object(dev) || blob) {
        const char *m = json_string_value(json_object_get(msg, "message"));
        st = tt_err(err, m && strstr(m, "farm's key") ? TT_ERR_AUTH : TT_ERR_PARSE,
                    "device %s refused the session: %s", r->peer, m ? m : "no hello");
    } else if (!keyed && json_object_get(msg, "auth")) {
        st = tt_err(err, TT_ERR_AUTH,
                    "device %s requires the farm's key: give --auth-key-file (or "
                    "TVM_TUNE_AUTH_KEY_FILE)",
                    r->peer);
    } else {
        tt_device_info_from_json(dev, &r->dev);
        if (keyed)
            st = authenticate(r, auth, msg, cn, err);
    }
    json_decref(msg);
    return st;
}

tt_status tt_remote_open(const tt_remote_options *o, tt_remote **out, double *wait_s,
                         tt_errbuf *err)
{
    *out = NULL;
    if (wait_s)
        *wait_s = 0;
    char host[256], matchkey[256] = "";
    int port = o->port;
    double t0 = tt_clock_monotonic();
    tt_status st;
    if (o->tracker_host) {
        st = request(o, host, sizeof(host), &port, matchkey, sizeof(matchkey), err);
        if (wait_s)
            *wait_s = tt_clock_monotonic() - t0;
        if (st)
            return st;
    } else {
        snprintf(host, sizeof(host), "%s", o->host ? o->host : "127.0.0.1");
        snprintf(matchkey, sizeof(matchkey), "%s", o->key ? o->key : "");
    }
    tt_remote *r = calloc(1, sizeof(*r));
    if (!r)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    snprintf(r->peer, sizeof(r->peer), "%s:%d", host, port);
    snprintf(r->host, sizeof(r->host), "%s", host);
    r->port = port;
    double session = o->session_timeout_s > 0 ? o->session_timeout_s : 60;
    r->fd = dial(host, port, 30, err);
    tt_mchan_init(&r->ch, r->fd, false);
    st = r->fd < 0 ? TT_ERR_IO : handshake(r, matchkey, session, o->auth, err);
    if (st) {
        tt_remote_close(r);
        return st;
    }
    *out = r;
    return TT_OK;
}

tt_status tt_remote_count_devices(const tt_remote_options *o, int *n, tt_errbuf *err)
{
    *n = 1;
    if (!o->tracker_host)
        return TT_OK;
    tt_tracker_conn c;
    tt_status st = tt_tracker_connect(o->tracker_host, o->tracker_port, 10, o->auth, &c, err);
    char *reply = NULL;
    if (!st)
        st = tt_tracker_call(&c, "[6]", &reply, err);
    tt_tracker_close(&c);
    json_t *r = NULL;
    if (!st)
        st = tt_json_parse(reply, strlen(reply), &r, err);
    free(reply);
    if (st)
        return st;
    const json_t *servers = json_object_get(json_array_get(r, 1), "server_info");
    char want[300];
    snprintf(want, sizeof(want), "server:%s", o->key ? o->key : "");
    int count = 0;
    size_t i;
    const json_t *info;
    json_array_foreach(servers, i, info)
    {
        const char *k = json_string_value(json_object_get(info, "key"));
        if (k && !strcmp(k, want))
            count++;
    }
    json_decref(r);
    *n = count > 0 ? count : 1;
    return TT_OK;
}

const tt_device_info *tt_remote_device(const tt_remote *r)
{
    return &r->dev;
}

const char *tt_remote_peer(const tt_remote *r)
{
    return r->peer;
}

static bool known(const tt_remote *r, const char *id)
{
    for (size_t i = 0; i < r->known.len; i++)
        if (!strcmp(r->known.data[i], id))
            return true;
    return false;
}

static void remember(tt_remote *r, const char *id)
{
    char *c = strdup(id);
    if (c)
        TT_VEC_PUSH(&r->known, c);
}

/* One request, one reply; an "error" reply becomes TT_ERR_RUNTIME with its message. */
static tt_status call(tt_remote *r, json_t *m, const void *blob, uint64_t blob_len,
                      const char *blob_path, json_t **reply, tt_errbuf *err)
{
    *reply = NULL;
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    if (!text)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_status st = blob_path ? tt_mproto_send_file(&r->ch, text, blob_path, err)
                             : tt_mproto_send(&r->ch, text, blob, blob_len, err);
    free(text);
    uint64_t rb = 0;
    if (!st)
        st = tt_mproto_recv(&r->ch, reply, &rb, err);
    if (!st && rb)
        st = tt_mproto_recv_blob(&r->ch, rb, -1, NULL, err);
    if (st == TT_ERR_IO)
        return tt_err_prefix(err, TT_ERR_IO, "device %s", r->peer);
    if (!st && !strcmp(json_string_value(json_object_get(*reply, "op")), "error")) {
        st = tt_err(err, TT_ERR_RUNTIME, "device %s: %s", r->peer,
                    json_string_value(json_object_get(*reply, "message")));
        json_decref(*reply);
        *reply = NULL;
    }
    return st;
}

/* Makes sure the device holds the artifact (a file or a buffer), asking first. */
static tt_status ensure(tt_remote *r, const char *id, const char *path, const void *data,
                        uint64_t len, tt_errbuf *err)
{
    if (known(r, id))
        return TT_OK;
    json_t *reply;
    tt_status st =
        call(r, json_pack("{s:s, s:[s]}", "op", "have", "ids", id), NULL, 0, NULL, &reply, err);
    if (st)
        return st;
    bool missing = json_array_size(json_object_get(reply, "missing")) > 0;
    json_decref(reply);
    if (missing) {
        st = call(r, json_pack("{s:s, s:s}", "op", "put", "id", id), data, len, path, &reply, err);
        json_decref(reply);
        if (st)
            return st;
    }
    remember(r, id);
    return TT_OK;
}

static tt_status file_id(const char *path, char id[TT_ARTIFACT_ID_MAX], tt_errbuf *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tt_err(err, TT_ERR_IO, "%s: %s", path, strerror(errno));
    uint64_t h = TT_FNV64_OFFSET, len = 0;
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        h = tt_hash64_update(h, buf, (size_t)n);
        len += (uint64_t)n;
    }
    close(fd);
    if (n < 0)
        return tt_err(err, TT_ERR_IO, "%s: %s", path, strerror(errno));
    tt_artifact_id(h, len, id);
    return TT_OK;
}

/* The artifact id of a buffer's bytes, remembered by address for the task's own buffers (they
 * never change); a transient copy is hashed every time into `own`. */
static const char *data_id(tt_remote *r, const void *p, int64_t bytes, bool transient,
                           char own[TT_ARTIFACT_ID_MAX])
{
    if (transient) {
        tt_artifact_id(tt_hash64(p, (size_t)bytes), (uint64_t)bytes, own);
        return own;
    }
    for (int i = 0; i < r->ndata_ids; i++)
        if (r->data_ids[i].p == p && r->data_ids[i].bytes == bytes)
            return r->data_ids[i].id;
    int slot = r->ndata_ids < MAX_DATA_IDS ? r->ndata_ids++
                                           : (int)(tt_hash64(&p, sizeof(p)) % MAX_DATA_IDS);
    r->data_ids[slot].p = p;
    r->data_ids[slot].bytes = bytes;
    tt_artifact_id(tt_hash64(p, (size_t)bytes), (uint64_t)bytes, r->data_ids[slot].id);
    return r->data_ids[slot].id;
}

tt_status tt_remote_measure(tt_remote *r, const char *so_path, const char *entry,
                            const tt_measure_buffer *bufs, int nbufs, int ninputs,
                            const tt_measure_options *opt, tt_measure_result *res, tt_errbuf *err)
{
    memset(res, 0, sizeof(*res));
    char lib[TT_ARTIFACT_ID_MAX];
    tt_status st = file_id(so_path, lib, err);
    if (!st)
        st = ensure(r, lib, so_path, NULL, 0, err);
    json_t *args = json_array();
    for (int i = 0; !st && i < nbufs; i++) {
        int64_t bytes = bufs[i].count * (int64_t)tt_elem_bytes(bufs[i].elem);
        json_t *a = json_pack("{s:s, s:I}", "dtype", tt_elem_name(bufs[i].elem), "count",
                              (json_int_t)bufs[i].count);
        if (bufs[i].constant)
            json_object_set_new(a, "constant", json_true());
        const void *blobs[2] = {i < ninputs ? bufs[i].data : NULL,
                                i >= ninputs ? bufs[i].expect : NULL};
        const char *names[2] = {"data", "expect"};
        for (int f = 0; f < 2 && !st; f++) {
            if (!blobs[f])
                continue;
            char own[TT_ARTIFACT_ID_MAX];
            const char *id = data_id(r, blobs[f], bytes, f == 0 && bufs[i].transient, own);
            st = ensure(r, id, NULL, blobs[f], (uint64_t)bytes, err);
            json_object_set_new(a, names[f], json_string(id));
        }
        json_array_append_new(args, a);
    }
    if (st) {
        json_decref(args);
        return st;
    }
    /* The reply comes after the whole measurement: wait for the run's deadline and some. */
    tt_socket_deadlines(r->fd, (opt->timeout_s > 0 ? opt->timeout_s : 10) + 30);
    json_t *reply;
    st = call(r,
              json_pack("{s:s, s:s, s:s, s:o, s:i, s:o}", "op", "measure", "lib", lib, "entry",
                        entry, "args", args, "ninputs", ninputs, "options",
                        tt_measure_options_json(opt)),
              NULL, 0, NULL, &reply, err);
    if (st)
        return st;
    st = tt_measure_result_from_json(reply, res, err);
    json_decref(reply);
    return st;
}

tt_status tt_remote_report(const tt_remote_options *o, const tt_remote *r, bool sick,
                           const char *reason, tt_errbuf *err)
{
    if (!o->tracker_host)
        return tt_err(err, TT_ERR_UNSUPPORTED, "no tracker to tell");
    json_t *m = json_pack("[i, {s:s, s:i, s:s, s:s}]", TT_TRACKER_DEVICE_REPORT, "host", r->host,
                          "port", r->port, "state", sick ? "quarantine" : "healthy", "reason",
                          reason ? reason : "");
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    json_t *result = NULL;
    tt_status s =
        text ? tt_tracker_ext_call(o->tracker_host, o->tracker_port, o->auth, text, &result, err)
             : tt_err(err, TT_ERR_NOMEM, "out of memory");
    free(text);
    json_decref(result);
    return s;
}

void tt_remote_close(tt_remote *r)
{
    if (!r)
        return;
    if (r->fd >= 0) {
        static const char bye[] = "{\"op\":\"bye\"}";
        tt_errbuf err;
        tt_socket_deadlines(r->fd, 2);
        tt_mproto_send(&r->ch, bye, NULL, 0, &err);
        close(r->fd);
    }
    for (size_t i = 0; i < r->known.len; i++)
        free(r->known.data[i]);
    TT_VEC_FREE(&r->known);
    free(r);
}
