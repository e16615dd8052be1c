#include "server.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "../base/io.h"
#include "../rpc/auth.h"
#include "../rpc/tracker_proto.h"
#include "dashboard.h"
#include "http.h"
#include "jobs.h"
#include "registry.h"

typedef struct client {
    uv_tcp_t tcp; /* first: handles point back here */
    struct tracker *t;
    tt_conn_id id;
    char peer[64];
    tt_frame_reader reader;
    bool registered, closing;
} client;

typedef struct tracker {
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_signal_t sigint, sigterm;
    tt_registry *reg;
    tt_jobs *jobs;
    tt_http *http; /* the dashboard; NULL without --http-port */
    tt_dashboard dash;
    const tt_tracker_options *o;
    TT_VEC(client *) clients;
    tt_conn_id next_id;
    bool stopping;
    uint64_t auth_failures;
} tracker;

static double now_s(void)
{
    return tt_clock_monotonic();
}

static void on_closed(uv_handle_t *h)
{
    client *c = (client *)h;
    tracker *t = c->t;
    if (c->registered)
        tt_registry_close(t->reg, c->id);
    for (size_t i = 0; i < t->clients.len; i++)
        if (t->clients.data[i] == c) {
            t->clients.data[i] = t->clients.data[--t->clients.len];
            break;
        }
    tt_frame_reader_free(&c->reader);
    free(c);
}

static void close_client(client *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = true;
    if (why)
        tt_logger_log(c->t->o->log, TT_LOG_WARN, c->peer, "closing: %s", why);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    client *c = req->data;
    free(req);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* Closes after the replies already queued have left (a refusal the peer should read). */
static void close_client_after_writes(client *c, const char *why)
{
    if (c->closing)
        return;
    uv_shutdown_t *req = malloc(sizeof(*req));
    if (!req || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown)) {
        free(req);
        close_client(c, why);
        return;
    }
    req->data = c;
    c->closing = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (why)
        tt_logger_log(c->t->o->log, TT_LOG_WARN, c->peer, "closing: %s", why);
}

typedef struct {
    uv_write_t req;
    char data[];
} write_req;

static void on_written(uv_write_t *req, int status)
{
    (void)status;
    free(req);
}

/* One write per frame: the length prefix and the payload leave together. */
static void send_bytes(client *c, const void *prefix, size_t np, const void *data, size_t n)
{
    if (c->closing)
        return;
    write_req *w = malloc(sizeof(write_req) + np + n);
    if (!w) {
        close_client(c, "out of memory");
        return;
    }
    memcpy(w->data, prefix, np);
    if (n)
        memcpy(w->data + np, data, n);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)(np + n));
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written)) {
        free(w);
        close_client(c, "write failed");
    }
}

static void registry_send(void *ctx, tt_conn_id id, const char *json, size_t len)
{
    tracker *t = ctx;
    for (size_t i = 0; i < t->clients.len; i++)
        if (t->clients.data[i]->id == id) {
            uint8_t p[4];
            tt_put_le32(p, (int32_t)len);
            send_bytes(t->clients.data[i], p, 4, json, len);
            return;
        }
}

static void stop_all(tracker *t);

static char *jobs_extension(void *ctx, const char *peer, const json_t *msg)
{
    return tt_jobs_handle(ctx, peer, msg);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    size_t n = suggested < 65536 ? suggested : 65536;
    buf->base = malloc(n);
    buf->len = buf->base ? n : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    client *c = (client *)s;
    tracker *t = c->t;
    if (nread < 0) {
        free(buf->base);
        close_client(c, nread == UV_EOF ? NULL : uv_strerror((int)nread));
        return;
    }
    tt_status st = tt_frame_reader_feed(&c->reader, buf->base, (size_t)nread);
    free(buf->base);
    if (st) {
        close_client(c, "more unread data than one maximal frame");
        return;
    }
    for (;;) {
        const char *payload;
        size_t len;
        tt_errbuf err = {{0}};
        tt_frame_event ev = tt_frame_reader_next(&c->reader, &payload, &len, &err);
        if (ev == TT_FRAME_NEED_MORE || c->closing)
            return;
        if (ev == TT_FRAME_ERROR) {
            close_client(c, err.msg);
            return;
        }
        if (ev == TT_FRAME_MAGIC) {
            uint8_t m[4];
            tt_put_le32(m, TT_TRACKER_MAGIC);
            send_bytes(c, m, 4, NULL, 0);
            if (tt_registry_open(t->reg, c->id, c->peer, now_s())) {
                close_client(c, "out of memory");
                return;
            }
            c->registered = true;
            continue;
        }
        bool stop = false;
        tt_status hs = tt_registry_handle(t->reg, c->id, payload, len, now_s(), &stop, &err);
        if (hs == TT_ERR_AUTH) {
            t->auth_failures++;
            close_client_after_writes(c, err.msg);
            return;
        }
        if (hs) {
            close_client(c, err.msg);
            return;
        }
        if (stop) {
            tt_logger_log(t->o->log, TT_LOG_INFO, c->peer, "STOP: stopping");
            stop_all(t);
            return;
        }
    }
}

static void peer_name(uv_tcp_t *tcp, char *out, size_t n)
{
    struct sockaddr_storage sa;
    int len = sizeof(sa);
    snprintf(out, n, "?");
    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&sa, &len))
        return;
    char ip[64] = "?";
    int port = 0;
    if (sa.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&sa;
        uv_ip4_name(a, ip, sizeof(ip));
        port = ntohs(a->sin_port);
    } else if (sa.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&sa;
        uv_ip6_name(a, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
        /* IPv4-mapped addresses print as dotted IPv4 */
        if (!strncmp(ip, "::ffff:", 7) && strchr(ip + 7, '.'))
            memmove(ip, ip + 7, strlen(ip + 7) + 1);
    }
    (void)port;
    snprintf(out, n, "%s", ip);
}

static void free_handle(uv_handle_t *h)
{
    client *c = (client *)h;
    tt_frame_reader_free(&c->reader);
    free(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    tracker *t = server->data;
    if (status < 0 || t->stopping)
        return;
    client *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->t = t;
    c->id = ++t->next_id;
    tt_frame_reader_init(&c->reader, true);
    uv_tcp_init(&t->loop, &c->tcp);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) || TT_VEC_PUSH(&t->clients, c)) {
        uv_close((uv_handle_t *)&c->tcp, free_handle);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    /* A device whose link is cut silently leaves the registry in about 15 s (its slots and
     * requests with it) instead of staying listed until TCP gives up hours later. */
    uv_os_fd_t fd;
    if (!uv_fileno((uv_handle_t *)&c->tcp, &fd))
        tt_socket_keepalive(fd);
    peer_name(&c->tcp, c->peer, sizeof(c->peer));
    int limit = t->o->max_conns_per_peer > 0 ? t->o->max_conns_per_peer : 1024, same = 0;
    for (size_t i = 0; i < t->clients.len; i++)
        same += !strcmp(t->clients.data[i]->peer, c->peer);
    if (same > limit) { /* this one is counted too */
        char why[128];
        snprintf(why, sizeof(why), "%d connections from one address (--max-conns-per-peer)", limit);
        close_client(c, why);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void stop_all(tracker *t)
{
    if (t->stopping)
        return;
    t->stopping = true;
    for (size_t i = 0; i < t->clients.len; i++)
        close_client(t->clients.data[i], NULL);
    uv_close((uv_handle_t *)&t->listener, NULL);
    tt_http_stop(t->http);
    uv_close((uv_handle_t *)&t->sigint, NULL);
    uv_close((uv_handle_t *)&t->sigterm, NULL);
}

static void on_signal(uv_signal_t *s, int signum)
{
    tracker *t = s->data;
    tt_logger_log(t->o->log, TT_LOG_INFO, NULL, "stopping on signal %d", signum);
    stop_all(t);
}

/* Undoes a start that failed before the loop ran; returns s. */
static tt_status abandon(tracker *t, tt_status s)
{
    uv_close((uv_handle_t *)&t->listener, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    uv_loop_close(&t->loop);
    tt_registry_free(t->reg);
    free(t);
    return s;
}

tt_status tt_tracker_run(const tt_tracker_options *o, tt_errbuf *err)
{
    tracker *t = calloc(1, sizeof(*t));
    if (!t)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    t->o = o;
    const char *host = o->host ? o->host : "127.0.0.1";
    bool keyed = o->auth && o->auth->nkeys;
    tt_status ls =
        tt_auth_check_listen(o->auth, host, o->insecure, "send code to the farm's devices", err);
    if (ls) { /* before the loop exists: nothing to undo */
        free(t);
        return ls;
    }
    if (uv_loop_init(&t->loop)) {
        free(t);
        return tt_err(err, TT_ERR_IO, "cannot start an event loop");
    }
    t->reg = tt_registry_new(o->stop_key, registry_send, t);
    if (t->reg) {
        tt_registry_set_max_pending(t->reg, o->max_pending > 0 ? o->max_pending : 64);
        tt_registry_set_auth(t->reg, o->auth, o->allow_tvm);
    }
    int first = o->port, last = o->port_end > o->port ? o->port_end : o->port + 1;
    int bound = -1, rc = 0;
    struct sockaddr_storage addr;
    uv_tcp_init(&t->loop, &t->listener);
    t->listener.data = t;
    for (int p = first; p < last && bound < 0; p++) {
        if (strchr(host, ':'))
            rc = uv_ip6_addr(host, p, (struct sockaddr_in6 *)&addr);
        else
            rc = uv_ip4_addr(host, p, (struct sockaddr_in *)&addr);
        if (rc)
            break;
        if (!uv_tcp_bind(&t->listener, (const struct sockaddr *)&addr, 0) &&
            !(rc = uv_listen((uv_stream_t *)&t->listener, 128, on_connection)))
            bound = p;
    }
    tt_status s = TT_OK;
    if (!t->reg) {
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    } else if (bound < 0) {
        s = tt_err(err, TT_ERR_IO, "cannot listen on %s, ports %d..%d: %s", host, first, last - 1,
                   rc ? uv_strerror(rc) : "address in use");
    }
    if (s)
        return abandon(t, s);
    if (bound == 0) { /* the port the system chose */
        int len = sizeof(addr);
        uv_tcp_getsockname(&t->listener, (struct sockaddr *)&addr, &len);
        bound = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                                 : ((struct sockaddr_in *)&addr)->sin_port);
    }
    if (o->db_path) {
        char name[300];
        if (o->name) {
            snprintf(name, sizeof(name), "%s", o->name);
        } else {
            char hostname[256] = "localhost";
            gethostname(hostname, sizeof(hostname) - 1);
            snprintf(name, sizeof(name), "%s:%d", hostname, bound);
        }
        tt_jobs_config jc = {o->db_path,
                             name,
                             host,
                             bound,
                             keyed ? o->auth : NULL,
                             o->job_workers > 0 ? o->job_workers : 2,
                             o->log,
                             o->max_jobs_per_peer > 0 ? o->max_jobs_per_peer : 16,
                             o->db_max_bytes};
        s = tt_jobs_open(&jc, &t->jobs, err);
        if (s) {
            return abandon(t, s);
        }
        tt_registry_set_extension(t->reg, jobs_extension, t->jobs);
    }
    if (o->http_port >= 0) {
        const char *hh = o->http_host ? o->http_host : "127.0.0.1";
        int hport = 0;
        t->dash.reg = t->reg;
        t->dash.jobs = t->jobs;
        t->dash.started = now_s();
        t->dash.authenticated = keyed;
        snprintf(t->dash.tracker, sizeof(t->dash.tracker), "%s:%d", host, bound);
        s = tt_http_start(&t->loop, hh, o->http_port, tt_dashboard_handle, &t->dash, &t->http,
                          &hport, err);
        if (s) {
            tt_jobs_close(t->jobs);
            return abandon(t, s);
        }
        t->dash.http = t->http;
        tt_logger_log(o->log, TT_LOG_INFO, NULL, "dashboard on http://%s:%d/ (metrics at /metrics)",
                      hh, hport);
        if (o->on_http)
            o->on_http(o->ctx, hh, hport);
    }
    uv_signal_init(&t->loop, &t->sigint);
    uv_signal_init(&t->loop, &t->sigterm);
    t->sigint.data = t->sigterm.data = t;
    uv_signal_start(&t->sigint, on_signal, SIGINT);
    uv_signal_start(&t->sigterm, on_signal, SIGTERM);
    tt_logger_log(o->log, TT_LOG_INFO, NULL, "listening on %s:%d", host, bound);
    if (keyed)
        tt_logger_log(
            o->log, TT_LOG_INFO, NULL, "authentication on: every peer must prove the farm's key%s",
            o->allow_tvm ? "; TVM's servers and clients may use TVM's own messages without it "
                           "(--allow-tvm)"
                         : "");
    else
        tt_logger_log(o->log, tt_auth_is_loopback(host) ? TT_LOG_INFO : TT_LOG_WARN, NULL,
                      "no key (--auth-key-file): %s",
                      tt_auth_is_loopback(host)
                          ? "listening on loopback only; no one is authenticated"
                          : "--insecure: ANYONE who reaches this address can "
                            "send code to the farm's devices");
    if (o->on_listen)
        o->on_listen(o->ctx, host, bound);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    /* Every connection is closed now: the jobs' waits for devices end at once. */
    tt_jobs_close(t->jobs);
    uv_loop_close(&t->loop);
    TT_VEC_FREE(&t->clients);
    tt_registry_free(t->reg);
    free(t);
    return TT_OK;
}
