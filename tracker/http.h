/* A small HTTP/1.1 server on the tracker's libuv loop, for the dashboard and /metrics: GET and
 * HEAD only, one request per connection (Connection: close), every response built whole by a
 * handler.  Hostile clients cost little: a request head is at most 16 KiB and must arrive within
 * 10 s, and at most 64 connections are open at once (more are closed at accept).  Errors get a
 * status line that says what was wrong (400, 404, 405, 408, 431, 503).  One thread: the loop's. */
#ifndef TT_TRACKER_HTTP_H
#define TT_TRACKER_HTTP_H

#include <uv.h>

#include "../base/base.h"

typedef struct tt_http_response {
    int status;               /* 200, 404, ... */
    const char *content_type; /* static text */
    char *body;               /* malloc'ed; the server frees it */
    size_t len;
} tt_http_response;

/* Fills *res for GET `path` (without the query) and `query` (after '?', "" when none). */
typedef void (*tt_http_handler)(void *ctx, const char *path, const char *query,
                                tt_http_response *res);

typedef struct tt_http tt_http;

/* Listens on host:port (port 0: any; *bound gets the port). */
tt_status tt_http_start(uv_loop_t *loop, const char *host, int port, tt_http_handler fn, void *ctx,
                        tt_http **out, int *bound, tt_errbuf *err);
/* Requests answered so far (any status). */
uint64_t tt_http_requests(const tt_http *h);
/* Closes the listener and every connection; the memory goes when the loop runs the closes. */
void tt_http_stop(tt_http *h);

/* Parses a request head (NUL-terminated) in place: *path and *query (after '?', "" when none)
 * point into it.  0 for a GET or HEAD (*head_only) of a path; else the status to answer (400,
 * 405) and *why. */
int tt_http_parse_head(char *head, char **path, char **query, bool *head_only, const char **why);

/* The response helpers of handlers: a copy of `text`, or printf-formatted text. */
void tt_http_text(tt_http_response *res, int status, const char *type, const char *text);
void tt_http_take(tt_http_response *res, int status, const char *type, char *body, size_t len);

#endif
