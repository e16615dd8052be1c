/* tvm-rpc-server's body: a device that registers with a TVM-compatible tracker (or stands alone),
 * accepts TVM's RPC handshake and then speaks the tvm-tune measurement protocol
 * (docs/rpc-protocol.md): it stores artifacts by content in a bounded cache and measures kernels
 * in sacrificial child processes (measure.h).  The server process never loads candidate code.
 *
 * Registration follows TVM's servers (tracker-protocol.md §8): UPDATE_INFO once per tracker
 * connection, PUT of a fresh matchkey, GET_PENDING_MATCHKEYS every ping period as the heartbeat,
 * a regenerated matchkey after four missed checks (a client took the ticket and never came),
 * reconnection with capped backoff when the tracker goes away.  A TVM client gets an error packet
 * that says what this server is, never a hang.
 *
 * Depends on base, rpc (and codegen's loader through measure.c); one thread. */
#ifndef TT_RPC_RPC_SERVER_H
#define TT_RPC_RPC_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/base.h"
#include "../base/log.h"

typedef struct tt_rpc_server_options {
    const char *host;         /* listen address: default 0.0.0.0 with a key, else 127.0.0.1 */
    int port, port_end;       /* first free port of [port, port_end); port 0: any */
    const char *custom_addr;  /* the address the tracker hands to clients; NULL: our IP as seen */
    const char *tracker_host; /* NULL: standalone */
    int tracker_port;
    const char *key;        /* the device key (rpc_key), no ':' */
    const char *cache_dir;  /* artifact cache; created when missing */
    int64_t cache_bytes;    /* evict least recently used artifacts above this */
    int64_t artifact_bytes; /* largest artifact accepted */
    /* address space of a measuring child (RLIMIT_AS; CPU kernels only: OpenCL drivers reserve
     * large ranges); a client asking for more, or for none, gets this.  0: none. */
    int64_t child_memory_bytes;
    double ping_period_s;   /* heartbeat and accept timeout, default 2 (TVM's) */
    double idle_timeout_s;  /* a session with no message for this long ends, default 60 */
    int tvm_error_encoding; /* 20 (TVM <= v0.20, default) or 21: the error packet for TVM clients */
    const tt_logger *log;   /* one line per event; NULL: quiet */
    /* Tests of the farm's health checks: every kernel "crashes" (1) or gives a wrong answer
     * (2); 0: measure honestly. */
    int inject_faults;
    int inject_after;          /* ... after measuring this many honestly */
    const char *opencl_device; /* which OpenCL device measures (opencl.h's tt_cl_select); NULL:
                                  the first GPU, else the first device */
    bool no_opencl;            /* do not probe OpenCL */
    /* The farm's key (auth.h; NULL or empty: none): proved to the tracker, required of every
     * client, and every measurement message MAC'ed.  Without one the server listens on loopback
     * addresses only, unless `insecure`. */
    const struct tt_auth_keyring *auth;
    bool insecure;
    /* called once the socket is bound, with the port; may be NULL */
    void (*on_listen)(void *ctx, const char *host, int port);
    void *ctx;
    volatile sig_atomic_t *stop; /* set (by a signal handler) to end the server */
} tt_rpc_server_options;

/* Serves until *o->stop.  TT_ERR_IO when no port can be bound or the cache cannot be created. */
tt_status tt_rpc_server_run(const tt_rpc_server_options *o, tt_errbuf *err);

#endif
