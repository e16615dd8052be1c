#include "http.h"

#include <stdlib.h>
#include <string.h>

#define MAX_HEAD    (16 * 1024)
#define MAX_CONNS   64
#define HEAD_WAIT_S 10

typedef struct hconn {
    uv_tcp_t tcp; /* first: the handle points back here */
    uv_timer_t timer;
    struct tt_http *h;
    char head[MAX_HEAD + 1];
    size_t len;
    int open_handles; /* tcp and timer: freed when both are closed */
    bool closing, answered;
} hconn;

struct tt_http {
    uv_tcp_t listener;
    tt_http_handler fn;
    void *ctx;
    TT_VEC(hconn *) conns;
    uint64_t requests;
    bool stopping;
};

void tt_http_take(tt_http_response *res, int status, const char *type, char *body, size_t len)
{
    free(res->body);
    res->status = status;
    res->content_type = type;
    res->body = body;
    res->len = body ? len : 0;
}

void tt_http_text(tt_http_response *res, int status, const char *type, const char *text)
{
    char *copy = strdup(text);
    tt_http_take(res, status, type, copy, copy ? strlen(copy) : 0);
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

static void on_handle_closed(uv_handle_t *hd)
{
    hconn *c = hd->data;
    if (--c->open_handles == 0)
        free(c);
}

static void close_conn(hconn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    tt_http *h = c->h;
    for (size_t i = 0; i < h->conns.len; i++)
        if (h->conns.data[i] == c) {
            h->conns.data[i] = h->conns.data[--h->conns.len];
            break;
        }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

typedef struct {
    uv_write_t req;
    hconn *c;
    char *data;
} hwrite;

static void on_timeout(uv_timer_t *t);

/* The response is out and our side shut: the connection closes when the client closes its side
 * (reading and dropping whatever it still sends, so an unread request cannot turn our close into
 * a reset that destroys the response) or after 2 s. */
static void on_shutdown(uv_shutdown_t *req, int status)
{
    hconn *c = req->data;
    free(req);
    if (status)
        close_conn(c);
    else if (!c->closing)
        uv_timer_start(&c->timer, on_timeout, 2000, 0);
}

static void on_written(uv_write_t *req, int status)
{
    hwrite *w = (hwrite *)req;
    hconn *c = w->c;
    free(w->data);
    free(w);
    uv_shutdown_t *sd = status ? NULL : malloc(sizeof(*sd));
    if (sd) {
        sd->data = c;
        if (!uv_shutdown(sd, (uv_stream_t *)&c->tcp, on_shutdown))
            return;
        free(sd);
    }
    close_conn(c);
}

/* Sends the response and closes after it; the body is freed here. */
static void respond(hconn *c, const tt_http_response *res, bool head_only)
{
    c->answered = true;
    c->h->requests++;
    uv_timer_stop(&c->timer);
    tt_strbuf sb = {0};
    tt_strbuf_printf(&sb,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                     "Content-Security-Policy: default-src 'self'\r\nConnection: close\r\n\r\n",
                     res->status, reason(res->status),
                     res->content_type ? res->content_type : "text/plain; charset=utf-8", res->len);
    if (!head_only && res->len)
        tt_strbuf_appendn(&sb, res->body, res->len);
    free(res->body);
    hwrite *w = malloc(sizeof(*w));
    if (sb.oom || !w) {
        free(w);
        tt_strbuf_free(&sb);
        close_conn(c);
        return;
    }
    w->c = c;
    size_t total = sb.len; /* the body may hold NULs */
    w->data = tt_strbuf_take(&sb);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)total);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written)) {
        free(w->data);
        free(w);
        close_conn(c);
    }
}

static void fail(hconn *c, int status, const char *why)
{
    tt_http_response res = {0};
    char text[256];
    snprintf(text, sizeof(text), "%d %s: %s\n", status, reason(status), why);
    tt_http_text(&res, status, "text/plain; charset=utf-8", text);
    respond(c, &res, false);
}

int tt_http_parse_head(char *head, char **path, char **query, bool *head_only, const char **why)
{
    char *eol = strstr(head, "\r\n");
    if (eol)
        *eol = 0;
    char *sp1 = strchr(head, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!eol || !sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7)) {
        *why = "the request line is not 'METHOD /path HTTP/1.x'";
        return 400;
    }
    *sp1 = *sp2 = 0;
    *head_only = !strcmp(head, "HEAD");
    if (strcmp(head, "GET") && !*head_only) {
        *why = "the dashboard answers GET and HEAD only";
        return 405;
    }
    *path = sp1 + 1;
    if ((*path)[0] != '/') {
        *why = "the path must start with '/'";
        return 400;
    }
    *query = strchr(*path, '?');
    if (*query)
        *(*query)++ = 0;
    else
        *query = sp2; /* "" */
    return 0;
}

/* The request head is complete. */
static void handle_head(hconn *c)
{
    char *path, *query;
    bool head_only = false;
    const char *why = NULL;
    int status = tt_http_parse_head(c->head, &path, &query, &head_only, &why);
    if (status) {
        fail(c, status, why);
        return;
    }
    tt_http_response res = {0};
    c->h->fn(c->h->ctx, path, query, &res);
    if (!res.status)
        tt_http_text(&res, 500, NULL, "500 Internal Server Error: out of memory\n");
    respond(c, &res, head_only);
}

static void on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    hconn *c = hd->data;
    if (c->answered) { /* what a client sends after the response is dropped */
        buf->base = c->head;
        buf->len = MAX_HEAD;
        return;
    }
    buf->base = c->head + c->len;
    buf->len = MAX_HEAD - c->len;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    hconn *c = s->data;
    if (c->closing)
        return;
    if (nread < 0) {
        close_conn(c);
        return;
    }
    if (c->answered)
        return;
    c->len += (size_t)nread;
    c->head[c->len] = 0;
    if (memchr(c->head, 0, c->len)) {
        fail(c, 400, "a NUL byte in the request head");
    } else if (strstr(c->head, "\r\n\r\n")) {
        handle_head(c);
    } else if (c->len == MAX_HEAD) {
        fail(c, 431, "the request head exceeds 16 KiB");
    }
}

static void on_timeout(uv_timer_t *t)
{
    hconn *c = t->data;
    if (!c->answered)
        fail(c, 408, "the request head did not arrive within 10 s");
    else
        close_conn(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    tt_http *h = server->data;
    if (status < 0 || h->stopping)
        return;
    hconn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->h = h;
    c->tcp.data = c->timer.data = c;
    uv_tcp_init(server->loop, &c->tcp);
    uv_timer_init(server->loop, &c->timer);
    c->open_handles = 2;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) || TT_VEC_PUSH(&h->conns, c)) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->timer, on_handle_closed);
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
        return;
    }
    if (h->conns.len > MAX_CONNS) {
        fail(c, 503, "too many dashboard connections at once");
        return;
    }
    uv_timer_start(&c->timer, on_timeout, HEAD_WAIT_S * 1000, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_listener_closed(uv_handle_t *hd);

tt_status tt_http_start(uv_loop_t *loop, const char *host, int port, tt_http_handler fn, void *ctx,
                        tt_http **out, int *bound, tt_errbuf *err)
{
    *out = NULL;
    tt_http *h = calloc(1, sizeof(*h));
    if (!h)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    h->fn = fn;
    h->ctx = ctx;
    struct sockaddr_storage addr;
    int rc = strchr(host, ':') ? uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr)
                               : uv_ip4_addr(host, port, (struct sockaddr_in *)&addr);
    uv_tcp_init(loop, &h->listener);
    h->listener.data = h;
    if (!rc)
        rc = uv_tcp_bind(&h->listener, (const struct sockaddr *)&addr, 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&h->listener, 64, on_connection);
    if (rc) {
        uv_close((uv_handle_t *)&h->listener, on_listener_closed); /* frees h */
        return tt_err(err, TT_ERR_IO, "the dashboard cannot listen on %s:%d: %s", host, port,
                      uv_strerror(rc));
    }
    int len = sizeof(addr);
    uv_tcp_getsockname(&h->listener, (struct sockaddr *)&addr, &len);
    *bound = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                              : ((struct sockaddr_in *)&addr)->sin_port);
    *out = h;
    return TT_OK;
}

uint64_t tt_http_requests(const tt_http *h)
{
    return h ? h->requests : 0;
}

static void on_listener_closed(uv_handle_t *hd)
{
    tt_http *h = hd->data;
    TT_VEC_FREE(&h->conns);
    free(h);
}

void tt_http_stop(tt_http *h)
{
    if (!h || h->stopping)
        return;
    h->stopping = true;
    while (h->conns.len)
        close_conn(h->conns.data[h->conns.len - 1]);
    uv_close((uv_handle_t *)&h->listener, on_listener_closed);
}
