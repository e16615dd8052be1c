/* The client side of the farm: a session with one device, obtained from a tracker (REQUEST, then
 * TVM's handshake) or directly from a standalone tvm-rpc-server, speaking the tvm-tune
 * measurement protocol (docs/rpc-protocol.md).  Kernel libraries and argument data are sent once
 * per device (content-named; the device caches them across sessions).
 *
 * Failures are told apart, because the daemon and the tuner treat them differently
 * (measurement.md §5): a candidate's own failure is a result (TT_OK with res->error_no set); a
 * broken session (device died, network) is TT_ERR_IO and the candidate is re-queued on another
 * device; an unreachable tracker or device when opening is TT_ERR_IO too (try again later); no
 * device within the request deadline is TT_ERR_LIMIT; a peer that is not a tvm-rpc-server is
 * TT_ERR_PARSE (a session closed before the hello is TT_ERR_IO when the device's port is gone,
 * TT_ERR_PARSE when it is still open).  One thread per session. */
#ifndef TT_RPC_REMOTE_H
#define TT_RPC_REMOTE_H

#include <signal.h>

#include "../base/base.h"
#include "auth.h"
#include "device_info.h"
#include "measure.h"

typedef struct tt_remote_options {
    const char *tracker_host; /* NULL: connect to host:port directly (standalone server) */
    int tracker_port;
    const char *host; /* the standalone server */
    int port;
    const char *key;             /* device key to request */
    int priority;                /* REQUEST priority (larger first), default 0 */
    double request_timeout_s;    /* longest wait for a free device, default 600 */
    double session_timeout_s;    /* the server ends a session silent this long, default 60 */
    int parallel;                /* tuner: devices measuring at once; 0 = every device of the key */
    volatile sig_atomic_t *stop; /* when set, a wait for a device ends (TT_ERR_LIMIT) */
    /* The farm's key: proved to the tracker and the device, and every measurement message is
     * MAC'ed (docs/security.md).  NULL or empty: none (loopback farms). */
    const tt_auth_keyring *auth;
} tt_remote_options;

typedef struct tt_remote tt_remote;

/* Requests a device and opens a session.  *wait_s (may be NULL) is the time spent waiting for
 * the device: queue wait, never run time. */
tt_status tt_remote_open(const tt_remote_options *o, tt_remote **out, double *wait_s,
                         tt_errbuf *err);
/* How many servers of the key the tracker knows (SUMMARY's server_info); 1 without a tracker. */
tt_status tt_remote_count_devices(const tt_remote_options *o, int *n, tt_errbuf *err);
/* The device's report (hello): fingerprint, architecture, ...; valid while the session is. */
const tt_device_info *tt_remote_device(const tt_remote *r);
/* "host:port" of the device. */
const char *tt_remote_peer(const tt_remote *r);
/* Measures the kernel `entry` of the library `so_path` on the device, like tt_measure_run. */
tt_status tt_remote_measure(tt_remote *r, const char *so_path, const char *entry,
                            const tt_measure_buffer *bufs, int nbufs, int ninputs,
                            const tt_measure_options *opt, tt_measure_result *res, tt_errbuf *err);
/* Tells the tracker that the device of this session is sick (its slots are then not handed out
 * until it restarts or ten minutes pass) or healthy again.  TT_ERR_UNSUPPORTED without a
 * tracker, or from a tracker that does not know the report (TVM's). */
tt_status tt_remote_report(const tt_remote_options *o, const tt_remote *r, bool sick,
                           const char *reason, tt_errbuf *err);
/* Ends the session (the device goes back to the tracker's queue). */
void tt_remote_close(tt_remote *r);

#endif
