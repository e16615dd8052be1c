#include "registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rpc/auth.h"
#include "../rpc/tracker_proto.h"

typedef struct {
    tt_conn_id id;
    char peer[64];
    json_t *info;           /* UPDATE_INFO dict, merged; NULL until one arrives */
    TT_VEC(char *) pending; /* matchkeys PUT and not handed out */
    double last_seen;       /* time of its last message */
    bool heartbeats;        /* it has sent GET_PENDING_MATCHKEYS (TVM's heartbeat) */
    char *quarantine;       /* why a client found this device sick; NULL: healthy */
    double quarantined_at;
    char lent_to[64]; /* the address its last slot was handed to, "" when it has one free */
    double lent_at;
    bool authed;       /* proved the farm's key (always true without a key) */
    bool auth_started; /* sent its nonce; ours and our proof went back */
    uint8_t cnonce[TT_AUTH_NONCE_BYTES], snonce[TT_AUTH_NONCE_BYTES];
} conn;

typedef struct {
    tt_conn_id owner;
    char *host;
    int64_t port;
    char *matchkey;
} slot;

typedef struct {
    tt_conn_id conn;
    int64_t priority;
    uint64_t seq;
} waiter;

typedef struct {
    char *key;
    TT_VEC(slot) slots;     /* FIFO */
    TT_VEC(waiter) waiting; /* served by (-priority, seq) */
} queue;

struct tt_registry {
    char *stop_key;
    tt_registry_send_fn send;
    void *ctx;
    TT_VEC(conn) conns;
    TT_VEC(queue) queues; /* in creation order, as SUMMARY lists them */
    uint64_t seq;
    tt_registry_ext_fn ext;
    void *ext_ctx;
    double now;      /* of the message being handled */
    int max_pending; /* waiting REQUESTs per connection, 0 = no limit */
    tt_registry_counters counters;
    const tt_auth_keyring *auth; /* NULL: no key, every connection is trusted */
    bool allow_tvm;              /* without the key: TVM's own codes (1-7) only */
};

/* A server that heartbeats and has been silent for more than three ping periods is wedged (its
 * socket may stay open for hours): its free slots are not handed out until it speaks again.
 * Connections that never heartbeat (TVM's proxy, scripts) are never judged. */
#define TT_STALE_AFTER_S 6.0

/* A device reported sick is not handed out for this long (then it gets another chance; a
 * restarted server is a new connection and starts healthy). */
#define TT_QUARANTINE_S 600.0

static bool stale(const conn *c, double now)
{
    return c && c->heartbeats && now - c->last_seen > TT_STALE_AFTER_S;
}

static bool quarantined(conn *c, double now)
{
    if (c && c->quarantine && now - c->quarantined_at > TT_QUARANTINE_S) {
        free(c->quarantine);
        c->quarantine = NULL;
    }
    return c && c->quarantine;
}

void tt_registry_set_extension(tt_registry *r, tt_registry_ext_fn fn, void *ctx)
{
    r->ext = fn;
    r->ext_ctx = ctx;
}

tt_registry *tt_registry_new(const char *stop_key, tt_registry_send_fn send, void *ctx)
{
    tt_registry *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->send = send;
    r->ctx = ctx;
    r->max_pending = 64;
    if (stop_key && !(r->stop_key = strdup(stop_key))) {
        free(r);
        return NULL;
    }
    return r;
}

static void slot_free(slot *s)
{
    free(s->host);
    free(s->matchkey);
}

static void conn_free(conn *c)
{
    json_decref(c->info);
    free(c->quarantine);
    for (size_t i = 0; i < c->pending.len; i++)
        free(c->pending.data[i]);
    TT_VEC_FREE(&c->pending);
}

void tt_registry_free(tt_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->conns.len; i++)
        conn_free(&r->conns.data[i]);
    TT_VEC_FREE(&r->conns);
    for (size_t q = 0; q < r->queues.len; q++) {
        queue *qu = &r->queues.data[q];
        for (size_t i = 0; i < qu->slots.len; i++)
            slot_free(&qu->slots.data[i]);
        TT_VEC_FREE(&qu->slots);
        TT_VEC_FREE(&qu->waiting);
        free(qu->key);
    }
    TT_VEC_FREE(&r->queues);
    free(r->stop_key);
    free(r);
}

static conn *find_conn(tt_registry *r, tt_conn_id id)
{
    for (size_t i = 0; i < r->conns.len; i++)
        if (r->conns.data[i].id == id)
            return &r->conns.data[i];
    return NULL;
}

void tt_registry_set_auth(tt_registry *r, const tt_auth_keyring *ring, bool allow_tvm)
{
    r->auth = ring && ring->nkeys ? ring : NULL;
    r->allow_tvm = allow_tvm;
}

tt_status tt_registry_open(tt_registry *r, tt_conn_id c, const char *peer, double now)
{
    conn n;
    memset(&n, 0, sizeof(n));
    n.id = c;
    snprintf(n.peer, sizeof(n.peer), "%s", peer ? peer : "");
    n.last_seen = now;
    return TT_VEC_PUSH(&r->conns, n) ? TT_ERR_NOMEM : TT_OK;
}

static queue *find_queue(tt_registry *r, const char *key, bool create)
{
    for (size_t i = 0; i < r->queues.len; i++)
        if (!strcmp(r->queues.data[i].key, key))
            return &r->queues.data[i];
    if (!create)
        return NULL;
    queue q;
    memset(&q, 0, sizeof(q));
    if (!(q.key = strdup(key)) || TT_VEC_PUSH(&r->queues, q)) {
        free(q.key);
        return NULL;
    }
    return &r->queues.data[r->queues.len - 1];
}

static void reply_text(tt_registry *r, tt_conn_id c, const char *text)
{
    r->send(r->ctx, c, text, strlen(text));
}

static void reply_json(tt_registry *r, tt_conn_id c, const json_t *v)
{
    tt_strbuf sb = {0};
    tt_json_write_py(&sb, v);
    if (!sb.oom)
        r->send(r->ctx, c, tt_strbuf_cstr(&sb), sb.len);
    tt_strbuf_free(&sb);
}

/* Hands free slots to waiting requests: the first slot of a live owner to the top request, while
 * both exist. */
static void match(tt_registry *r, queue *q)
{
    while (q->waiting.len > 0) {
        size_t use = q->slots.len;
        for (size_t i = 0; i < q->slots.len && use == q->slots.len; i++) {
            conn *owner = find_conn(r, q->slots.data[i].owner);
            if (!stale(owner, r->now) && !quarantined(owner, r->now))
                use = i;
        }
        if (use == q->slots.len)
            return;
        size_t top = 0;
        for (size_t i = 1; i < q->waiting.len; i++) {
            const waiter *a = &q->waiting.data[i], *b = &q->waiting.data[top];
            if (a->priority > b->priority || (a->priority == b->priority && a->seq < b->seq))
                top = i;
        }
        waiter w = q->waiting.data[top];
        memmove(&q->waiting.data[top], &q->waiting.data[top + 1],
                (q->waiting.len - top - 1) * sizeof(waiter));
        q->waiting.len--;
        slot s = q->slots.data[use];
        memmove(&q->slots.data[use], &q->slots.data[use + 1],
                (q->slots.len - use - 1) * sizeof(slot));
        q->slots.len--;
        conn *owner = find_conn(r, s.owner), *to = find_conn(r, w.conn);
        r->counters.handouts++;
        if (owner) {
            snprintf(owner->lent_to, sizeof(owner->lent_to), "%s", to ? to->peer : "?");
            owner->lent_at = r->now;
        }
        if (owner)
            for (size_t i = 0; i < owner->pending.len; i++)
                if (!strcmp(owner->pending.data[i], s.matchkey)) {
                    free(owner->pending.data[i]);
                    owner->pending.data[i] = owner->pending.data[--owner->pending.len];
                    break;
                }
        json_t *v = json_pack("[i, [s, I, s]]", 0, s.host, (json_int_t)s.port, s.matchkey);
        if (v)
            reply_json(r, w.conn, v);
        json_decref(v);
        slot_free(&s);
    }
}

void tt_registry_close(tt_registry *r, tt_conn_id c)
{
    /* Every slot it offered and every request it made leave at once (TVM keeps them). */
    for (size_t q = 0; q < r->queues.len; q++) {
        queue *qu = &r->queues.data[q];
        size_t k = 0;
        for (size_t i = 0; i < qu->slots.len; i++) {
            if (qu->slots.data[i].owner == c)
                slot_free(&qu->slots.data[i]);
            else
                qu->slots.data[k++] = qu->slots.data[i];
        }
        qu->slots.len = k;
        k = 0;
        for (size_t i = 0; i < qu->waiting.len; i++)
            if (qu->waiting.data[i].conn != c)
                qu->waiting.data[k++] = qu->waiting.data[i];
        qu->waiting.len = k;
    }
    for (size_t i = 0; i < r->conns.len; i++)
        if (r->conns.data[i].id == c) {
            conn_free(&r->conns.data[i]);
            r->conns.data[i] = r->conns.data[--r->conns.len];
            break;
        }
}

static bool valid_key(const char *key)
{
    return key && *key && !strchr(key, ':');
}

static tt_status handle_put(tt_registry *r, conn *c, const json_t *msg, tt_errbuf *err)
{
    const char *key = json_string_value(json_array_get(msg, 1));
    const json_t *pm = json_array_get(msg, 2), *addr = json_array_get(msg, 3);
    const json_t *jp = json_array_get(pm, 0);
    const char *mk = json_string_value(json_array_get(pm, 1));
    int64_t port = -1;
    if (json_is_integer(jp))
        port = json_integer_value(jp);
    else if (json_is_string(jp)) /* tolerate "9090" */
        port = strtoll(json_string_value(jp), NULL, 10);
    if (!key || !json_is_array(pm) || !mk || port < 0 || port > 65535 ||
        (addr && !json_is_null(addr) && !json_is_string(addr)))
        return tt_err(err, TT_ERR_PARSE, "PUT: expected [3, key, [port, matchkey], addr]");
    if (!valid_key(key)) {
        reply_text(r, c->id, "-1");
        return TT_OK;
    }
    queue *q = find_queue(r, key, true);
    slot s = {c->id, strdup(json_is_string(addr) ? json_string_value(addr) : c->peer), port,
              strdup(mk)};
    char *pend = strdup(mk);
    if (!q || !s.host || !s.matchkey || !pend || TT_VEC_PUSH(&q->slots, s)) {
        slot_free(&s);
        free(pend);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    c->lent_to[0] = 0; /* a fresh ticket: the device is free again */
    if (TT_VEC_PUSH(&c->pending, pend))
        free(pend);
    reply_text(r, c->id, "0");
    match(r, q);
    return TT_OK;
}

void tt_registry_set_max_pending(tt_registry *r, int max_pending)
{
    r->max_pending = max_pending > 0 ? max_pending : 0;
}

static int pending_of(const tt_registry *r, tt_conn_id c)
{
    int n = 0;
    for (size_t q = 0; q < r->queues.len; q++)
        for (size_t w = 0; w < r->queues.data[q].waiting.len; w++)
            n += r->queues.data[q].waiting.data[w].conn == c;
    return n;
}

static tt_status handle_request(tt_registry *r, conn *c, const json_t *msg, tt_errbuf *err)
{
    const char *key = json_string_value(json_array_get(msg, 1));
    const json_t *pr = json_array_get(msg, 3);
    if (!key || (pr && !json_is_integer(pr)))
        return tt_err(err, TT_ERR_PARSE, "REQUEST: expected [4, key, user, priority]");
    if (!valid_key(key)) {
        reply_text(r, c->id, "[-1, \"an rpc key must not be empty or contain ':'\"]");
        return TT_OK;
    }
    if (r->max_pending && pending_of(r, c->id) >= r->max_pending) {
        char reply[160];
        snprintf(reply, sizeof(reply),
                 "[-1, \"too many pending requests (%d) on this connection: wait for a device or "
                 "close it\"]",
                 r->max_pending);
        reply_text(r, c->id, reply);
        return TT_OK;
    }
    r->counters.requests++;
    queue *q = find_queue(r, key, true);
    waiter w = {c->id, pr ? json_integer_value(pr) : 0, r->seq++};
    if (!q || TT_VEC_PUSH(&q->waiting, w))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    match(r, q);
    return TT_OK;
}

static tt_status handle_update_info(tt_registry *r, conn *c, const json_t *msg, tt_errbuf *err)
{
    json_t *info = json_array_get(msg, 1);
    json_t *addr = json_object_get(info, "addr");
    if (!json_is_object(info) || !json_is_array(addr)) {
        /* TVM closes here; a -1 keeps a confused peer diagnosable. */
        reply_text(r, c->id, "-1");
        return TT_OK;
    }
    if (!c->info && !(c->info = json_object()))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    json_object_update(c->info, info);
    json_t *a = json_object_get(c->info, "addr");
    if (json_is_array(a) && json_is_null(json_array_get(a, 0)))
        json_array_set_new(a, 0, json_string(c->peer));
    reply_text(r, c->id, "0");
    return TT_OK;
}

/* The port of an UPDATE_INFO addr, int or string (TVM's C++ and Java servers send "9090"). */
static int64_t addr_port(const json_t *addr)
{
    const json_t *p = json_array_get(addr, 1);
    return json_is_integer(p)  ? json_integer_value(p)
           : json_is_string(p) ? strtoll(json_string_value(p), NULL, 10)
                               : -1;
}

static tt_status handle_report(tt_registry *r, conn *from, const json_t *msg, tt_errbuf *err)
{
    const json_t *rep = json_array_get(msg, 1);
    const char *host = json_string_value(json_object_get(rep, "host"));
    const char *state = json_string_value(json_object_get(rep, "state"));
    const char *reason = json_string_value(json_object_get(rep, "reason"));
    const json_t *port = json_object_get(rep, "port");
    if (!host || !json_is_integer(port) || !state ||
        (strcmp(state, "quarantine") && strcmp(state, "healthy"))) {
        reply_text(r, from->id,
                   "[-1, \"a device report is {host, port, state: quarantine or healthy, "
                   "reason}\"]");
        return TT_OK;
    }
    int matched = 0;
    for (size_t i = 0; i < r->conns.len; i++) {
        conn *c = &r->conns.data[i];
        const json_t *addr = json_object_get(c->info, "addr");
        const char *h = json_string_value(json_array_get(addr, 0));
        if (!h || strcmp(h, host) || addr_port(addr) != json_integer_value(port))
            continue;
        free(c->quarantine);
        c->quarantine = NULL;
        if (!strcmp(state, "quarantine")) {
            c->quarantine = strdup(reason && *reason ? reason : "reported sick");
            c->quarantined_at = r->now;
            if (!c->quarantine)
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
        }
        matched++;
    }
    char text[32];
    snprintf(text, sizeof(text), "[0, %d]", matched);
    reply_text(r, from->id, text);
    if (!strcmp(state, "healthy"))
        for (size_t i = 0; i < r->queues.len; i++)
            match(r, &r->queues.data[i]);
    return TT_OK;
}

const tt_registry_counters *tt_registry_get_counters(const tt_registry *r)
{
    return &r->counters;
}

json_t *tt_registry_status(const tt_registry *r, double now)
{
    json_t *servers = json_array(), *queues = json_array();
    size_t conns = 0;
    for (size_t i = 0; i < r->conns.len; i++) {
        const conn *c = &r->conns.data[i];
        conns++;
        const char *key = json_string_value(json_object_get(c->info, "key"));
        if (!key || strncmp(key, "server:", 7))
            continue;
        const json_t *dev = json_object_get(c->info, "device");
        bool sick = c->quarantine && now - c->quarantined_at <= TT_QUARANTINE_S;
        json_t *e = json_pack("{s:s, s:s, s:s, s:O, s:f, s:b, s:b, s:b, s:i}", "key", key + 7,
                              "address", c->peer, "impl",
                              json_is_string(json_object_get(c->info, "impl"))
                                  ? json_string_value(json_object_get(c->info, "impl"))
                                  : "TVM server",
                              "device", dev ? (json_t *)dev : json_null(), "silent_s",
                              now - c->last_seen, "stale", stale(c, now), "quarantined", sick,
                              "authenticated", !r->auth || c->authed, "free", (int)c->pending.len);
        if (sick)
            json_object_set_new(e, "quarantine_reason", json_string(c->quarantine));
        if (c->lent_to[0] && !c->pending.len) {
            json_object_set_new(e, "in_use_by", json_string(c->lent_to));
            json_object_set_new(e, "in_use_s", json_real(now - c->lent_at));
        }
        json_array_append_new(servers, e);
    }
    for (size_t i = 0; i < r->queues.len; i++) {
        const queue *q = &r->queues.data[i];
        json_array_append_new(queues, json_pack("{s:s, s:I, s:I}", "key", q->key, "free",
                                                (json_int_t)q->slots.len, "pending",
                                                (json_int_t)q->waiting.len));
    }
    return json_pack("{s:o, s:o, s:I}", "servers", servers, "queues", queues, "connections",
                     (json_int_t)conns);
}

char *tt_registry_summary(const tt_registry *r)
{
    json_t *qi = json_object(), *si = json_array();
    for (size_t i = 0; i < r->queues.len; i++) {
        const queue *q = &r->queues.data[i];
        json_object_set_new(qi, q->key,
                            json_pack("{s:I, s:I}", "free", (json_int_t)q->slots.len, "pending",
                                      (json_int_t)q->waiting.len));
    }
    for (size_t i = 0; i < r->conns.len; i++) {
        const conn *c = &r->conns.data[i];
        const char *key = json_string_value(json_object_get(c->info, "key"));
        bool unauthenticated = r->auth && !c->authed;
        if (key && !strncmp(key, "server", 6) && !c->heartbeats && !c->quarantine &&
            !unauthenticated) {
            json_array_append(si, c->info);
        } else if (key && !strncmp(key, "server", 6)) {
            /* Extra fields pass through TVM's consumers (tracker-protocol.md §12). */
            json_t *e = json_deep_copy(c->info), *t = json_object();
            if (c->heartbeats) {
                json_object_set_new(t, "silent_s", json_real(r->now - c->last_seen));
                json_object_set_new(t, "stale", json_boolean(stale(c, r->now)));
            }
            if (c->quarantine)
                json_object_set_new(t, "quarantined", json_string(c->quarantine));
            if (unauthenticated)
                json_object_set_new(t, "authenticated", json_false());
            json_object_set_new(e, "tracker", t);
            json_array_append_new(si, e);
        }
    }
    json_t *v = json_pack("[i, {s:o, s:o}]", 0, "queue_info", qi, "server_info", si);
    tt_strbuf sb = {0};
    if (v)
        tt_json_write_py(&sb, v);
    json_decref(v);
    return tt_strbuf_take(&sb);
}

static tt_status handle_pending(tt_registry *r, conn *c, tt_errbuf *err)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < c->pending.len; i++)
        json_array_append_new(list, json_string(c->pending.data[i]));
    if (!list)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    reply_json(r, c->id, list);
    json_decref(list);
    return TT_OK;
}

/* [105, "hello", client nonce] -> [0, server nonce, server proof]; then
 * [105, "proof", client proof] -> [0].  A tracker without a key says so and stays usable (it
 * listens on loopback only); a wrong proof closes the connection. */
static tt_status handle_auth(tt_registry *r, conn *c, const json_t *msg, tt_errbuf *err)
{
    const char *step = json_string_value(json_array_get(msg, 1));
    const char *hex = json_string_value(json_array_get(msg, 2));
    if (!r->auth) {
        reply_text(r, c->id,
                   "[-1, \"this tracker has no key (started without --auth-key-file): it "
                   "listens on loopback only and authenticates no one\"]");
        return TT_OK;
    }
    if (step && !strcmp(step, "hello") && !c->auth_started && !c->authed &&
        tt_auth_unhex(hex, c->cnonce)) {
        uint8_t proof[TT_AUTH_TAG_BYTES];
        char sn[TT_AUTH_HEX], pr[TT_AUTH_HEX], reply[2 * TT_AUTH_HEX + 16];
        tt_auth_nonce(c->snonce);
        tt_auth_prove(r->auth, TT_AUTH_TRACKER_SERVER, c->cnonce, c->snonce, proof);
        tt_auth_hex(c->snonce, sn);
        tt_auth_hex(proof, pr);
        snprintf(reply, sizeof(reply), "[0, \"%s\", \"%s\"]", sn, pr);
        reply_text(r, c->id, reply);
        c->auth_started = true;
        return TT_OK;
    }
    uint8_t proof[TT_AUTH_TAG_BYTES];
    if (step && !strcmp(step, "proof") && c->auth_started && !c->authed &&
        tt_auth_unhex(hex, proof) &&
        tt_auth_verify(r->auth, TT_AUTH_TRACKER_CLIENT, c->cnonce, c->snonce, proof) >= 0) {
        c->authed = true;
        reply_text(r, c->id, "0");
        return TT_OK;
    }
    r->counters.auth_failures++;
    reply_text(r, c->id, "[-1, \"authentication failed: the peer does not hold this farm's key\"]");
    return tt_err(err, TT_ERR_AUTH, "authentication failed (%s)",
                  !step                    ? "not [105, step, hex]"
                  : !strcmp(step, "proof") ? "wrong key"
                  : !strcmp(step, "hello") ? "a second or malformed hello"
                                           : "unknown step");
}

tt_status tt_registry_handle(tt_registry *r, tt_conn_id id, const char *text, size_t len,
                             double now, bool *stop, tt_errbuf *err)
{
    conn *c = find_conn(r, id);
    if (!c)
        return tt_err(err, TT_ERR_INVALID_ARG, "unknown connection");
    bool was_stale = stale(c, now);
    c->last_seen = now;
    r->now = now;
    json_t *msg;
    tt_status s = tt_json_parse(text, len, &msg, err);
    if (s)
        return s;
    if (!json_is_array(msg) || !json_is_integer(json_array_get(msg, 0))) {
        json_decref(msg);
        return tt_err(err, TT_ERR_PARSE, "a message must be a JSON array starting with its code");
    }
    json_int_t code = json_integer_value(json_array_get(msg, 0));
    r->counters.messages++;
    if (r->auth && !c->authed && code != TT_TRACKER_AUTH &&
        !(r->allow_tvm && code >= TT_TRACKER_PING && code <= TT_TRACKER_GET_PENDING_MATCHKEYS)) {
        json_decref(msg);
        reply_text(r, id,
                   "[-1, \"this tracker requires the farm's key: give --auth-key-file (TVM's own "
                   "tools need the tracker's --allow-tvm)\"]");
        r->counters.auth_failures++;
        return tt_err(err, TT_ERR_AUTH, "code %lld before authentication", (long long)code);
    }
    switch (code) {
    case TT_TRACKER_PING: reply_text(r, id, "0"); break;
    case TT_TRACKER_AUTH: s = handle_auth(r, c, msg, err); break;
    case TT_TRACKER_STOP: {
        const char *key = json_string_value(json_array_get(msg, 1));
        bool ok = r->stop_key && key && !strcmp(key, r->stop_key);
        reply_text(r, id, ok ? "0" : "-1");
        if (ok && stop)
            *stop = true;
        break;
    }
    case TT_TRACKER_PUT: s = handle_put(r, c, msg, err); break;
    case TT_TRACKER_REQUEST: s = handle_request(r, c, msg, err); break;
    case TT_TRACKER_UPDATE_INFO: s = handle_update_info(r, c, msg, err); break;
    case TT_TRACKER_SUMMARY: {
        char *sum = tt_registry_summary(r);
        if (!sum)
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        else
            reply_text(r, id, sum);
        free(sum);
        break;
    }
    case TT_TRACKER_DEVICE_REPORT: s = handle_report(r, c, msg, err); break;
    case TT_TRACKER_GET_PENDING_MATCHKEYS:
        c->heartbeats = true;
        s = handle_pending(r, c, err);
        break;
    default:
        if (code >= 100 && r->ext) {
            char *reply = r->ext(r->ext_ctx, c->peer, msg);
            if (reply)
                reply_text(r, id, reply);
            else
                s = tt_err(err, TT_ERR_NOMEM, "out of memory");
            free(reply);
            break;
        }
        s = tt_err(err, TT_ERR_PARSE, "unknown tracker code %lld", (long long)code);
    }
    json_decref(msg);
    /* A wedged server that speaks again: its slots serve the requests that waited. */
    if (was_stale && !s)
        for (size_t i = 0; i < r->queues.len; i++)
            match(r, &r->queues.data[i]);
    return s;
}
