/* The tracker's network side (libuv): listens, moves frames between sockets and the registry,
 * closes a connection (and logs why) on anything malformed.  One event loop, one thread. */
#ifndef TT_TRACKER_SERVER_H
#define TT_TRACKER_SERVER_H

#include <stdio.h>

#include "../base/base.h"
#include "../base/log.h"

typedef struct tt_tracker_options {
    const char *host;     /* default 127.0.0.1 */
    int port, port_end;   /* the first free port in [port, port_end) is bound; port 0: any */
    const char *stop_key; /* the secret of STOP; NULL: STOP is refused (stop with a signal) */
    const tt_logger *log; /* connection errors and life-cycle lines; NULL: quiet */
    const char *db_path;  /* the farm database of tuning jobs; NULL: no jobs */
    /* this tracker's name in a shared database: it runs and resumes the jobs of that name;
     * NULL: HOSTNAME:PORT */
    const char *name;
    int job_workers;        /* jobs run at once, default 2 */
    int max_conns_per_peer; /* connections one address may hold, default 1024; more are closed */
    int max_pending;        /* waiting REQUESTs per connection, default 64 */
    int max_jobs_per_peer;  /* jobs queued or running per submitting address, default 16 */
    int64_t db_max_bytes;   /* the jobs' cap on the database file (0: none) */
    /* The farm's key (rpc/auth.h; NULL or empty: none).  Without one the tracker listens on
     * loopback addresses only, unless `insecure`. */
    const struct tt_auth_keyring *auth;
    bool allow_tvm; /* with a key: TVM's peers may still register and request (codes 1-7) */
    bool insecure;  /* without a key: listen on any address anyway */
    /* The dashboard and /metrics (dashboard.h): port -1 = none (the default of a zeroed
     * struct is port 0, any: set -1 to have none); host default 127.0.0.1. */
    int http_port;
    const char *http_host;
    void (*on_http)(void *ctx, const char *host, int port); /* once it listens; may be NULL */
    /* called once the socket is bound, with the port (for printing); may be NULL */
    void (*on_listen)(void *ctx, const char *host, int port);
    void *ctx;
} tt_tracker_options;

/* Runs the tracker until STOP with the right key, SIGINT or SIGTERM.  TT_ERR_IO when no port of
 * the range can be bound. */
tt_status tt_tracker_run(const tt_tracker_options *o, tt_errbuf *err);

#endif
