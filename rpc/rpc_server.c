#define _GNU_SOURCE /* accept4 */
#include "rpc_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>
#include <arpa/inet.h>

#include "device_info.h"
#include "measure.h"
#include "measure_proto.h"
#include "tracker_client.h"

#define MAX_KEY_BYTES    4096 /* handshake key cap (tracker-protocol.md §9.2) */
#define HANDSHAKE_S      5.0
#define MISSES_TO_REGEN  4 /* TVM: misses * 2 > 4 + 2 */
#define BACKOFF_MAX_S    30.0
#define MAX_ARGS         64
#define TVM_FIRST_PACKET (1u << 20)

typedef struct server {
    const tt_rpc_server_options *o;
    int listen_fd, port;
    const char *host; /* where it listens: o->host, or the default for keyed or not */
    tt_device_info dev;
    char cl_spec[32]; /* "P:D" of the OpenCL device that measures, "" = none */
    /* tracker registration */
    tt_tracker_conn tracker;
    bool registered;
    char matchkey[160];
    int misses;
    double retry_at, backoff;
    uint64_t serial;
    tt_rng rng;
    /* statistics for the log */
    uint64_t sessions, measured, received, tvm_clients, auth_failures;
} server;

static void say(server *s, tt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(server *s, tt_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_logger_vlog(s->o->log, level, NULL, fmt, ap);
    va_end(ap);
}

static bool stopping(const server *s)
{
    return s->o->stop && *s->o->stop;
}

/* ---- listening ---- */

static tt_status listen_on(server *s, tt_errbuf *err)
{
    const char *host = s->host;
    tt_status st =
        tt_auth_check_listen(s->o->auth, host, s->o->insecure, "run native code here", err);
    if (st)
        return st;
    int first = s->o->port, last = s->o->port_end > first ? s->o->port_end : first + 1;
    for (int port = first; port < last; port++) {
        char service[16];
        snprintf(service, sizeof(service), "%d", port);
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        int rc = getaddrinfo(host, service, &hints, &res);
        if (rc)
            return tt_err(err, TT_ERR_IO, "cannot listen on %s: %s", host, gai_strerror(rc));
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0)
                continue;
            int one = 1;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0) {
                struct sockaddr_storage ss;
                socklen_t sl = sizeof(ss);
                getsockname(fd, (struct sockaddr *)&ss, &sl);
                s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                         : ((struct sockaddr_in *)&ss)->sin_port);
                s->listen_fd = fd;
                freeaddrinfo(res);
                return TT_OK;
            }
            close(fd);
        }
        freeaddrinfo(res);
    }
    return tt_err(err, TT_ERR_IO, "no free port in %d..%d on %s", first, last - 1, host);
}

/* ---- artifact cache ---- */

static void cache_path(const server *s, const char *id, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", s->o->cache_dir, id);
}

/* True when the artifact is cached; touches it (least recently used eviction). */
static bool cache_has(const server *s, const char *id)
{
    char path[4096];
    cache_path(s, id, path, sizeof(path));
    struct stat st;
    uint64_t h, len;
    if (!tt_artifact_id_parse(id, &h, &len) || stat(path, &st) || (uint64_t)st.st_size != len)
        return false;
    utime(path, NULL);
    return true;
}

typedef struct {
    char name[TT_ARTIFACT_ID_MAX];
    time_t mtime;
    int64_t size;
} cache_entry;

static int cmp_mtime(const void *a, const void *b)
{
    const cache_entry *x = a, *y = b;
    return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* Removes the least recently used artifacts until the cache fits its budget; `keep` survives. */
static void cache_evict(server *s, const char *keep)
{
    DIR *d = opendir(s->o->cache_dir);
    if (!d)
        return;
    TT_VEC(cache_entry) all = {0};
    int64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t h, len;
        if (!tt_artifact_id_parse(e->d_name, &h, &len))
            continue;
        char path[4096];
        cache_path(s, e->d_name, path, sizeof(path));
        struct stat st;
        if (stat(path, &st))
            continue;
        cache_entry ce = {{0}, st.st_mtime, (int64_t)st.st_size};
        memcpy(ce.name, e->d_name, strlen(e->d_name) + 1); /* parsed: shorter than the id max */
        TT_VEC_PUSH(&all, ce);
        total += ce.size;
    }
    closedir(d);
    if (total > s->o->cache_bytes && all.len) {
        qsort(all.data, all.len, sizeof(cache_entry), cmp_mtime);
        for (size_t i = 0; i < all.len && total > s->o->cache_bytes; i++) {
            if (keep && !strcmp(all.data[i].name, keep))
                continue;
            char path[4096];
            cache_path(s, all.data[i].name, path, sizeof(path));
            if (!unlink(path))
                total -= all.data[i].size;
        }
    }
    TT_VEC_FREE(&all);
}

/* Reads a cached artifact into memory (malloc'ed). */
static void *cache_read(const server *s, const char *id, uint64_t *len)
{
    char path[4096];
    uint64_t h;
    if (!tt_artifact_id_parse(id, &h, len) || !cache_has(s, id))
        return NULL;
    cache_path(s, id, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *buf = malloc(*len ? (size_t)*len : 1);
    if (buf && !tt_read_all(fd, buf, (size_t)*len)) {
        free(buf);
        buf = NULL;
    }
    close(fd);
    return buf;
}

/* ---- the session (our protocol) ---- */

static tt_status reply_json(tt_mchan *ch, json_t *j, tt_errbuf *err)
{
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!text)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_status st = tt_mproto_send(ch, text, NULL, 0, err);
    free(text);
    return st;
}

static tt_status reply_error(tt_mchan *ch, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static tt_status reply_error(tt_mchan *ch, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tt_errbuf err;
    return reply_json(ch, json_pack("{s:s, s:s}", "op", "error", "message", msg), &err);
}

static tt_status op_have(server *s, tt_mchan *ch, const json_t *msg, tt_errbuf *err)
{
    const json_t *ids = json_object_get(msg, "ids");
    if (!json_is_array(ids))
        return reply_error(ch, "have: \"ids\" must be a list of artifact ids");
    json_t *missing = json_array();
    size_t i;
    const json_t *id;
    json_array_foreach(ids, i, id)
    {
        if (!json_is_string(id) || !cache_has(s, json_string_value(id)))
            json_array_append(missing, (json_t *)id);
    }
    return reply_json(ch, json_pack("{s:s, s:o}", "op", "have", "missing", missing), err);
}

static tt_status op_put(server *s, tt_mchan *ch, const json_t *msg, uint64_t blob_len,
                        tt_errbuf *err)
{
    const char *id = json_string_value(json_object_get(msg, "id"));
    uint64_t want_hash, want_len;
    if (!tt_artifact_id_parse(id, &want_hash, &want_len) || want_len != blob_len ||
        (int64_t)blob_len > s->o->artifact_bytes) {
        /* The blob follows anyway: skip it to stay in step, unless it is too large to wait for. */
        if ((int64_t)blob_len > s->o->artifact_bytes) {
            reply_error(
                ch, "put: artifact of %" PRIu64 " bytes exceeds this device's limit of %" PRId64,
                blob_len, s->o->artifact_bytes);
            return tt_err(err, TT_ERR_LIMIT, "artifact of %" PRIu64 " bytes refused", blob_len);
        }
        tt_status st = tt_mproto_recv_blob(ch, blob_len, -1, NULL, err);
        return st ? st
                  : reply_error(ch,
                                "put: \"id\" %s%s%s is not the artifact id of %" PRIu64 " bytes",
                                id ? "'" : "", id ? id : "missing", id ? "'" : "", blob_len);
    }
    char path[4096], part[4200];
    cache_path(s, id, path, sizeof(path));
    snprintf(part, sizeof(part), "%s.part", path);
    int out = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    uint64_t hash = 0;
    tt_status st = tt_mproto_recv_blob(ch, blob_len, out, &hash, err);
    if (out >= 0)
        close(out);
    if (st) {
        unlink(part);
        return st;
    }
    if (out < 0)
        return reply_error(ch, "put: cannot store %s in %s: %s", id, s->o->cache_dir,
                           strerror(errno));
    if (hash != want_hash) {
        unlink(part);
        return reply_error(ch, "put: the bytes received do not hash to %s (corrupted in transit?)",
                           id);
    }
    if (rename(part, path)) {
        unlink(part);
        return reply_error(ch, "put: cannot store %s: %s", id, strerror(errno));
    }
    cache_evict(s, id);
    s->received++;
    return reply_json(ch, json_pack("{s:s, s:s}", "op", "ok", "id", id), err);
}

static tt_status op_measure(server *s, tt_mchan *ch, const json_t *msg, tt_errbuf *err)
{
    const char *lib = json_string_value(json_object_get(msg, "lib"));
    const char *entry = json_string_value(json_object_get(msg, "entry"));
    const json_t *args = json_object_get(msg, "args");
    const json_t *ninputs_j = json_object_get(msg, "ninputs");
    if (!lib || !entry || !json_is_array(args) || !json_is_integer(ninputs_j))
        return reply_error(ch, "measure: needs \"lib\", \"entry\", \"args\" and \"ninputs\"");
    size_t nargs = json_array_size(args);
    int64_t ninputs = json_integer_value(ninputs_j);
    if (nargs == 0 || nargs > MAX_ARGS || ninputs < 0 || ninputs > (int64_t)nargs)
        return reply_error(ch, "measure: %zu arguments with %" PRId64 " inputs is not a kernel",
                           nargs, ninputs);
    if (!cache_has(s, lib))
        return reply_error(ch, "measure: library %s is not on this device (send it first)", lib);
    tt_measure_buffer bufs[MAX_ARGS];
    void *owned[2 * MAX_ARGS];
    int nowned = 0;
    memset(bufs, 0, sizeof(bufs));
    int64_t budget = 4 * s->o->artifact_bytes;
    tt_status st = TT_OK;
    bool bad = false;
    char why[512] = "";
    for (size_t i = 0; i < nargs && !bad; i++) {
        const json_t *a = json_array_get(args, i);
        const json_t *count = json_object_get(a, "count");
        if (!tt_elem_parse(json_string_value(json_object_get(a, "dtype")), &bufs[i].elem) ||
            !json_is_integer(count) || json_integer_value(count) < 0) {
            snprintf(why, sizeof(why), "argument %zu needs a known \"dtype\" and a \"count\"", i);
            bad = true;
            break;
        }
        bufs[i].count = json_integer_value(count);
        bufs[i].constant = json_is_true(json_object_get(a, "constant"));
        int64_t bytes = bufs[i].count * (int64_t)tt_elem_bytes(bufs[i].elem);
        const char *fields[2] = {"data", "expect"};
        for (int f = 0; f < 2 && !bad; f++) {
            const char *id = json_string_value(json_object_get(a, fields[f]));
            if (!id)
                continue;
            uint64_t len = 0;
            void *p = cache_read(s, id, &len);
            if (!p || (int64_t)len != bytes || (budget -= (int64_t)len) < 0) {
                free(p);
                snprintf(why, sizeof(why),
                         !p ? "argument %zu: %s %s is not on this device"
                            : "argument %zu: %s %s does not hold %" PRId64 " bytes (or the "
                              "arguments exceed the device's budget)",
                         i, fields[f], id, bytes);
                bad = true;
                break;
            }
            owned[nowned++] = p;
            if (f == 0)
                bufs[i].data = p;
            else
                bufs[i].expect = p;
        }
    }
    if (bad) {
        st = reply_error(ch, "measure: %s", why);
    } else {
        tt_measure_options mo = {0};
        mo.repeat = 3;
        mo.number = 1;
        mo.timeout_s = 10;
        mo.rtol = 1e-4;
        mo.atol = 1e-5;
        tt_measure_options_from_json(json_object_get(msg, "options"), &mo);
        mo.opencl_device = s->cl_spec[0] ? s->cl_spec : NULL;
        if (mo.repeat > TT_MEASURE_MAX_REPEAT)
            mo.repeat = TT_MEASURE_MAX_REPEAT;
        int64_t cap = s->o->child_memory_bytes;
        if (cap > 0 && (mo.memory_limit <= 0 || mo.memory_limit > cap))
            mo.memory_limit = cap; /* the device's limit, whatever the client asks */
        char path[4096];
        cache_path(s, lib, path, sizeof(path));
        tt_measure_result res;
        tt_errbuf merr = {{0}};
        if (s->o->inject_faults && s->measured >= (uint64_t)s->o->inject_after) {
            memset(&res, 0, sizeof(res));
            res.error_no = s->o->inject_faults == 2 ? 5 : 4;
            snprintf(res.error_text, sizeof(res.error_text), "injected %s (--inject-faults)",
                     s->o->inject_faults == 2 ? "wrong answer" : "fault");
            s->measured++;
            st = reply_json(ch, tt_measure_result_json(&res), err);
        } else if (tt_measure_run(path, entry, bufs, (int)nargs, (int)ninputs, &mo, &res, &merr)) {
            st = reply_error(ch, "measure: the device could not run the measurement: %s", merr.msg);
        } else {
            s->measured++;
            st = reply_json(ch, tt_measure_result_json(&res), err);
        }
    }
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    return st;
}

/* The hello: the server's half of the authentication when this device has a key (the client's
 * nonce in, ours and our proof out).  False: the session is refused (the reply says why). */
static bool op_hello(server *s, tt_mchan *ch, const json_t *msg, const char *peer,
                     uint8_t cnonce[TT_AUTH_NONCE_BYTES], uint8_t snonce[TT_AUTH_NONCE_BYTES],
                     tt_errbuf *err)
{
    const json_t *proto = json_object_get(msg, "proto");
    if (json_integer_value(proto) != TT_MPROTO_VERSION) {
        reply_error(ch, "this server speaks tvm-tune protocol %d, not %lld", TT_MPROTO_VERSION,
                    (long long)json_integer_value(proto));
        say(s, TT_LOG_WARN, "session with %s refused: protocol %lld", peer,
            (long long)json_integer_value(proto));
        return false;
    }
    json_t *auth = NULL;
    if (s->o->auth && s->o->auth->nkeys) {
        const char *cn = json_string_value(json_object_get(msg, "nonce"));
        if (!tt_auth_unhex(cn, cnonce)) {
            reply_error(ch, "this device requires the farm's key: give tvm-tune "
                            "--auth-key-file (or TVM_TUNE_AUTH_KEY_FILE)");
            say(s, TT_LOG_WARN, "session with %s refused: no authentication offered", peer);
            return false;
        }
        uint8_t proof[TT_AUTH_TAG_BYTES];
        char sn_hex[TT_AUTH_HEX], proof_hex[TT_AUTH_HEX];
        tt_auth_nonce(snonce);
        tt_auth_prove(s->o->auth, TT_AUTH_MEASURE_SERVER, cnonce, snonce, proof);
        tt_auth_hex(snonce, sn_hex);
        tt_auth_hex(proof, proof_hex);
        auth = json_pack("{s:s, s:s}", "nonce", sn_hex, "proof", proof_hex);
    }
    json_t *reply = json_pack("{s:s, s:i, s:s, s:s, s:o}", "op", "hello", "proto",
                              TT_MPROTO_VERSION, "impl", TT_RPC_IMPL, "key",
                              s->o->key ? s->o->key : "", "device", tt_device_info_json(&s->dev));
    if (auth)
        json_object_set_new(reply, "auth", auth);
    return !reply_json(ch, reply, err);
}

/* The client's proof: the channel is sealed from the reply on.  False: refused. */
static bool op_auth(server *s, tt_mchan *ch, const json_t *msg, const char *peer,
                    const uint8_t cnonce[TT_AUTH_NONCE_BYTES],
                    const uint8_t snonce[TT_AUTH_NONCE_BYTES], tt_errbuf *err)
{
    uint8_t proof[TT_AUTH_TAG_BYTES];
    int k = tt_auth_unhex(json_string_value(json_object_get(msg, "proof")), proof)
                ? tt_auth_verify(s->o->auth, TT_AUTH_MEASURE_CLIENT, cnonce, snonce, proof)
                : -1;
    if (k < 0) {
        s->auth_failures++;
        reply_error(ch, "authentication failed: the client does not hold this farm's key");
        say(s, TT_LOG_WARN, "session with %s refused: authentication failed (wrong key)", peer);
        return false;
    }
    uint8_t session[TT_AUTH_KEY_BYTES];
    tt_auth_session_key(s->o->auth->key[k], s->o->auth->key[0], cnonce, snonce, session);
    tt_mchan_seal(ch, session);
    return !reply_json(ch, json_pack("{s:s}", "op", "auth"), err);
}

static void serve_session(server *s, int fd, const char *peer, double idle_s)
{
    tt_socket_deadlines(fd, idle_s);
    s->sessions++;
    uint64_t measured0 = s->measured, received0 = s->received;
    tt_errbuf err = {{0}};
    tt_mchan ch;
    tt_mchan_init(&ch, fd, true);
    bool keyed = s->o->auth && s->o->auth->nkeys;
    bool hello = false, open = false; /* open: hello done, and authenticated when keyed */
    uint8_t cnonce[TT_AUTH_NONCE_BYTES], snonce[TT_AUTH_NONCE_BYTES];
    for (;;) {
        json_t *msg = NULL;
        uint64_t blob = 0;
        tt_status st = tt_mproto_recv(&ch, &msg, &blob, &err);
        if (st) {
            if (st != TT_ERR_IO || hello)
                say(s, TT_LOG_WARN, "session with %s ended: %s", peer, err.msg);
            if (st == TT_ERR_AUTH)
                s->auth_failures++;
            break;
        }
        const char *op = json_string_value(json_object_get(msg, "op"));
        if ((strcmp(op, "put") || !open) && blob) {
            /* Only put carries a blob; skip any other to stay in step. */
            st = tt_mproto_recv_blob(&ch, blob, -1, NULL, &err);
        }
        bool refused = false;
        if (st) {
            /* the skipped blob was lost: the session ends below */
        } else if (!strcmp(op, "hello") && !hello) {
            hello = true;
            refused = !op_hello(s, &ch, msg, peer, cnonce, snonce, &err);
            open = !keyed && !refused;
        } else if (!strcmp(op, "auth") && hello && keyed && !open) {
            refused = !op_auth(s, &ch, msg, peer, cnonce, snonce, &err);
            open = !refused;
        } else if (!hello) {
            st = reply_error(&ch, "the session must start with hello");
        } else if (!open) {
            reply_error(&ch, "this device requires the farm's key: authenticate (auth) first");
            say(s, TT_LOG_WARN, "session with %s refused: '%s' before authentication", peer, op);
            refused = true;
        } else if (!strcmp(op, "have")) {
            st = op_have(s, &ch, msg, &err);
        } else if (!strcmp(op, "put")) {
            st = op_put(s, &ch, msg, blob, &err);
        } else if (!strcmp(op, "measure")) {
            st = op_measure(s, &ch, msg, &err);
        } else if (!strcmp(op, "bye")) {
            json_decref(msg);
            break;
        } else {
            st = reply_error(&ch, "unknown op '%s' (this server speaks tvm-tune protocol %d)", op,
                             TT_MPROTO_VERSION);
        }
        json_decref(msg);
        if (refused)
            break;
        if (st) {
            say(s, TT_LOG_WARN, "session with %s ended: %s", peer, err.msg);
            if (st == TT_ERR_AUTH)
                s->auth_failures++;
            break;
        }
    }
    say(s, TT_LOG_INFO, "session with %s: %" PRIu64 " measurements, %" PRIu64 " artifacts received",
        peer, s->measured - measured0, s->received - received0);
}

/* ---- TVM's handshake ---- */

static double now_s(void)
{
    return tt_clock_monotonic();
}

/* Reads n bytes before `deadline` (monotonic seconds); false on close, error or lateness. */
static bool read_by(int fd, void *buf, size_t n, double deadline)
{
    char *p = buf;
    while (n) {
        double left = deadline - now_s();
        if (left <= 0)
            return false;
        struct pollfd pfd = {fd, POLLIN, 0};
        int rc = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return false;
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* A TVM client: read its first packet, answer with an exception packet saying what this server
 * is (tracker-protocol.md §9.4), close. */
static void refuse_tvm_client(server *s, int fd, const char *peer)
{
    s->tvm_clients++;
    say(s, TT_LOG_WARN, "%s is a TVM RPC client (no %s in its key): sent it an error and closed",
        peer, TT_MPROTO_TOKEN);
    double deadline = now_s() + HANDSHAKE_S;
    uint8_t h[8];
    if (read_by(fd, h, 8, deadline)) {
        uint64_t nbytes = 0;
        for (int i = 0; i < 8; i++)
            nbytes |= (uint64_t)h[i] << (8 * i);
        char skip[4096];
        while (nbytes && nbytes < TVM_FIRST_PACKET) {
            size_t n = nbytes < sizeof(skip) ? (size_t)nbytes : sizeof(skip);
            if (!read_by(fd, skip, n, deadline))
                break;
            nbytes -= n;
        }
    }
    char text[512];
    int len = snprintf(text, sizeof(text),
                       "this is %s, which measures kernels for tvm-tune and cannot run TVM RPC "
                       "sessions; use tvm-tune to measure on this device",
                       TT_RPC_IMPL);
    uint8_t pkt[8 + 20 + sizeof(text)];
    tt_put_le32(pkt, 20 + len);
    tt_put_le32(pkt + 4, 0);
    tt_put_le32(pkt + 8, 5);                                        /* exception */
    tt_put_le32(pkt + 12, 1);                                       /* one argument */
    tt_put_le32(pkt + 16, s->o->tvm_error_encoding == 21 ? 8 : 11); /* string */
    tt_put_le32(pkt + 20, len);
    tt_put_le32(pkt + 24, 0);
    memcpy(pkt + 28, text, (size_t)len);
    tt_write_all(fd, pkt, 28 + (size_t)len);
}

/* Returns true when a session was served (the ticket is used up). */
static bool handle_connection(server *s, int fd, const char *peer)
{
    double deadline = now_s() + HANDSHAKE_S;
    uint8_t h[8];
    if (!read_by(fd, h, 8, deadline) || tt_get_le32(h) != TT_RPC_MAGIC) {
        say(s, TT_LOG_WARN, "%s: not a TVM RPC handshake, closed", peer);
        return false;
    }
    int32_t keylen = tt_get_le32(h + 4);
    if (keylen <= 0 || keylen > MAX_KEY_BYTES) {
        say(s, TT_LOG_WARN, "%s: handshake key of %d bytes refused", peer, keylen);
        return false;
    }
    char key[MAX_KEY_BYTES + 1];
    if (!read_by(fd, key, (size_t)keylen, deadline)) {
        say(s, TT_LOG_WARN, "%s: handshake key not received within %.0f s", peer, HANDSHAKE_S);
        return false;
    }
    key[keylen] = 0;
    /* First token: client:<matchkey>; the others: -timeout=N, -proto=... */
    char *save = NULL, *tok = strtok_r(key, " \t\n", &save);
    bool ok = tok && !strncmp(tok, "client:", 7) &&
              (!s->o->tracker_host || !strcmp(tok + 7, s->matchkey));
    if (!ok) {
        uint8_t m[4];
        tt_put_le32(m, TT_RPC_MISMATCH);
        tt_write_all(fd, m, 4);
        say(s, TT_LOG_WARN, "%s: wrong matchkey '%s', sent MISMATCH", peer, tok ? tok : "");
        return false;
    }
    double idle = s->o->idle_timeout_s > 0 ? s->o->idle_timeout_s : 60;
    bool ours = false;
    while ((tok = strtok_r(NULL, " \t\n", &save))) {
        if (!strncmp(tok, "-timeout=", 9)) {
            double t = strtod(tok + 9, NULL);
            if (t > 0)
                idle = t;
        } else if (!strcmp(tok, TT_MPROTO_TOKEN)) {
            ours = true;
        }
    }
    uint8_t reply[8 + 300];
    const char *k = s->o->key ? s->o->key : "";
    int n = snprintf((char *)reply + 8, sizeof(reply) - 8, "server:%s", k);
    tt_put_le32(reply, TT_RPC_SUCCESS);
    tt_put_le32(reply + 4, n);
    if (!tt_write_all(fd, reply, 8 + (size_t)n))
        return false;
    if (!ours) {
        refuse_tvm_client(s, fd, peer);
        return true;
    }
    say(s, TT_LOG_INFO, "session with %s", peer);
    serve_session(s, fd, peer, idle);
    return true;
}

/* ---- registration with the tracker ---- */

static void new_matchkey(server *s)
{
    s->serial++;
    snprintf(s->matchkey, sizeof(s->matchkey), "%s:%016llx%llu", s->o->key,
             (unsigned long long)tt_rng_next(&s->rng), (unsigned long long)s->serial);
    s->misses = 0;
}

static void drop_tracker(server *s, const char *why)
{
    if (s->registered)
        say(s, TT_LOG_WARN, "lost the tracker %s:%d: %s", s->o->tracker_host, s->o->tracker_port,
            why);
    tt_tracker_close(&s->tracker);
    s->registered = false;
    s->retry_at = now_s() + s->backoff;
    s->backoff = s->backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : s->backoff * 2;
}

/* Sends one message and expects the bare `0` reply. */
static bool tracker_ok(server *s, const char *json, tt_errbuf *err)
{
    char *reply = NULL;
    if (tt_tracker_call(&s->tracker, json, &reply, err))
        return false;
    bool ok = !strcmp(reply, "0");
    if (!ok)
        tt_err(err, TT_ERR_IO, "the tracker answered %s to %s", reply, json);
    free(reply);
    return ok;
}

static bool put_ticket(server *s, tt_errbuf *err)
{
    new_matchkey(s);
    json_t *m =
        json_pack("[i, s, [i, s], s?]", 3, s->o->key, s->port, s->matchkey, s->o->custom_addr);
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    bool ok = text && tracker_ok(s, text, err);
    free(text);
    return ok;
}

static void register_with_tracker(server *s)
{
    tt_errbuf err = {{0}};
    if (tt_tracker_connect(s->o->tracker_host, s->o->tracker_port, 10, s->o->auth, &s->tracker,
                           &err)) {
        say(s, TT_LOG_WARN, "%s (retrying in %.0f s)", err.msg, s->backoff);
        s->retry_at = now_s() + s->backoff;
        s->backoff = s->backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : s->backoff * 2;
        return;
    }
    char server_key[320];
    snprintf(server_key, sizeof(server_key), "server:%s", s->o->key);
    json_t *info = json_pack("{s:s, s:[s?, i], s:s, s:s, s:o}", "key", server_key, "addr",
                             s->o->custom_addr, s->port, "impl", TT_RPC_IMPL, "proto",
                             TT_MPROTO_TOKEN + 7, "device", tt_device_info_json(&s->dev));
    json_t *m = json_pack("[i, o]", 5, info);
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    bool ok = text && tracker_ok(s, text, &err) && put_ticket(s, &err);
    free(text);
    if (!ok) {
        tt_tracker_close(&s->tracker);
        say(s, TT_LOG_WARN, "registering with the tracker failed: %s (retrying in %.0f s)", err.msg,
            s->backoff);
        s->retry_at = now_s() + s->backoff;
        s->backoff = s->backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : s->backoff * 2;
        return;
    }
    s->registered = true;
    s->backoff = 1;
    say(s, TT_LOG_INFO, "registered with the tracker %s:%d as key '%s' on port %d",
        s->o->tracker_host, s->o->tracker_port, s->o->key, s->port);
}

/* The heartbeat: is our ticket still pending?  Four misses in a row: a client took it and never
 * came; put a fresh one. */
static void heartbeat(server *s)
{
    tt_errbuf err = {{0}};
    char *reply = NULL;
    if (tt_tracker_call(&s->tracker, "[7]", &reply, &err)) {
        drop_tracker(s, err.msg);
        return;
    }
    json_t *list = NULL;
    bool pending = false;
    if (!tt_json_parse(reply, strlen(reply), &list, &err) && json_is_array(list)) {
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v)
        {
            if (json_is_string(v) && !strcmp(json_string_value(v), s->matchkey))
                pending = true;
        }
    }
    json_decref(list);
    free(reply);
    s->misses = pending ? 0 : s->misses + 1;
    if (s->misses >= MISSES_TO_REGEN) {
        say(s, TT_LOG_WARN, "no incoming connection for the ticket handed out, regenerate key");
        if (!put_ticket(s, &err))
            drop_tracker(s, err.msg);
    }
}

static void peer_text(const struct sockaddr_storage *ss, char *out, size_t n)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
    }
    snprintf(out, n, "%s:%d", ip, port);
}

tt_status tt_rpc_server_run(const tt_rpc_server_options *o, tt_errbuf *err)
{
    server s;
    memset(&s, 0, sizeof(s));
    s.o = o;
    s.listen_fd = -1;
    s.tracker.fd = -1;
    s.backoff = 1;
    tt_rng_seed(&s.rng, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
    if (o->tracker_host && (!o->key || !o->key[0] || strchr(o->key, ':')))
        return tt_err(err, TT_ERR_INVALID_ARG, "a device key without ':' is needed (got '%s')",
                      o->key ? o->key : "");
    if (mkdir(o->cache_dir, 0700) && errno != EEXIST)
        return tt_err(err, TT_ERR_IO, "cannot create the artifact cache %s: %s", o->cache_dir,
                      strerror(errno));
    tt_device_probe(&s.dev);
    if (!o->no_opencl) {
        tt_status cs = tt_device_probe_opencl(&s.dev, o->opencl_device, err);
        if (cs && o->opencl_device)
            return tt_err_prefix(err, cs, "--opencl-device %s", o->opencl_device);
        if (cs)
            say(&s, TT_LOG_INFO, "no OpenCL devices: %s", err->msg);
        char hint[1024];
        tt_cl_driver_hint(s.dev.opencl_selected >= 0 ? &s.dev.opencl[s.dev.opencl_selected] : NULL,
                          NULL, hint, sizeof(hint));
        if (hint[0])
            say(&s, TT_LOG_WARN, "%s", hint);
        if (s.dev.opencl_selected >= 0) {
            const tt_cl_device_info *c = &s.dev.opencl[s.dev.opencl_selected];
            snprintf(s.cl_spec, sizeof(s.cl_spec), "%d:%d", c->platform, c->device);
            if (c->warp > 0)
                say(&s, TT_LOG_INFO, "OpenCL device %s: %s (%s, %d compute units, warps of %d)",
                    s.cl_spec, c->name, c->version, c->compute_units, c->warp);
            else
                say(&s, TT_LOG_INFO, "OpenCL device %s: %s (%s, %d compute units)", s.cl_spec,
                    c->name, c->version, c->compute_units);
        }
    }
    bool keyed = o->auth && o->auth->nkeys;
    const char *host = s.host = o->host ? o->host : keyed ? "0.0.0.0" : "127.0.0.1";
    tt_status st = listen_on(&s, err);
    if (st)
        return st;
    if (o->on_listen)
        o->on_listen(o->ctx, host, s.port);
    say(&s, TT_LOG_INFO, "%s on %s port %d, device %s, cache %s", TT_RPC_IMPL, host, s.port,
        s.dev.fingerprint, o->cache_dir);
    if (keyed)
        say(&s, TT_LOG_INFO,
            "authentication on: clients and the tracker must prove the farm's key; every "
            "measurement message is MAC'ed");
    else
        say(&s, tt_auth_is_loopback(host) ? TT_LOG_INFO : TT_LOG_WARN,
            "no key (--auth-key-file): %s",
            tt_auth_is_loopback(host) ? "listening on loopback only"
                                      : "--insecure: ANYONE who reaches this address can run "
                                        "native code on this machine");
    double period = o->ping_period_s > 0 ? o->ping_period_s : 2;
    double next_ping = now_s() + period;
    while (!stopping(&s)) {
        double now = now_s();
        if (o->tracker_host && !s.registered && now >= s.retry_at) {
            register_with_tracker(&s);
            next_ping = now_s() + period;
        }
        double wake = o->tracker_host && s.registered ? next_ping : now + period;
        if (o->tracker_host && !s.registered && s.retry_at < wake)
            wake = s.retry_at;
        int ms = (int)((wake - now_s()) * 1000);
        struct pollfd pfd = {s.listen_fd, POLLIN, 0};
        int rc = poll(&pfd, 1, ms < 0 ? 0 : ms);
        if (rc < 0 && errno != EINTR)
            break;
        if (stopping(&s))
            break;
        if (rc > 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof(ss);
            int fd = accept4(s.listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            char peer[80];
            peer_text(&ss, peer, sizeof(peer));
            bool used = handle_connection(&s, fd, peer);
            close(fd);
            tt_errbuf perr = {{0}};
            if (used && s.registered && !put_ticket(&s, &perr))
                drop_tracker(&s, perr.msg);
            next_ping = now_s() + period;
        } else if (o->tracker_host && s.registered && now_s() >= next_ping) {
            heartbeat(&s);
            next_ping = now_s() + period;
        }
    }
    say(&s, TT_LOG_INFO,
        "stopping after %" PRIu64 " sessions, %" PRIu64 " measurements, %" PRIu64
        " TVM clients refused, %" PRIu64 " authentication failures",
        s.sessions, s.measured, s.tvm_clients, s.auth_failures);
    tt_tracker_close(&s.tracker);
    close(s.listen_fd);
    return TT_OK;
}
