/* A blocking client of a TVM-compatible tracker (ours or TVM's): connect (magic sent alone, the
 * echo awaited), one request, one reply.  Used by tvm-tune and, later, the device server.
 * Depends on base only; one connection per thread. */
#ifndef TT_RPC_TRACKER_CLIENT_H
#define TT_RPC_TRACKER_CLIENT_H

#include "auth.h"
#include "tracker_proto.h"

typedef struct tt_tracker_conn {
    int fd;
    tt_frame_reader reader;
} tt_tracker_conn;

/* Connects to host:port and exchanges the magic; `timeout_s` bounds every later wait too.
 * With a key ring (`auth` non-NULL with keys) the tracker and this client then prove the farm's
 * key to each other (code 105, docs/security.md).  TT_ERR_IO says what failed (refused, timed
 * out, not a tracker); TT_ERR_AUTH: a wrong key on either side, or a tracker without one. */
tt_status tt_tracker_connect(const char *host, int port, double timeout_s,
                             const tt_auth_keyring *auth, tt_tracker_conn *c, tt_errbuf *err);
void tt_tracker_close(tt_tracker_conn *c);
/* Sends one JSON message. */
tt_status tt_tracker_send(tt_tracker_conn *c, const char *json, tt_errbuf *err);
/* Receives one reply (malloc'ed) in *reply.  TT_ERR_LIMIT when the receive deadline passed with
 * the connection intact (call again to keep waiting), TT_ERR_IO when it is lost. */
tt_status tt_tracker_recv(tt_tracker_conn *c, char **reply, tt_errbuf *err);
/* Sends one JSON message and returns the reply text (malloc'ed) in *reply; TT_ERR_IO when no
 * reply came within the deadline. */
tt_status tt_tracker_call(tt_tracker_conn *c, const char *json, char **reply, tt_errbuf *err);

/* A table of every server in a SUMMARY reply, one line each: key, address, implementation
 * (tvm-rpc-server or a TVM server), architecture, cores, and what the tracker says of it
 * (silent for N s, stale, quarantined and why); keys that mix TVM servers with ours are flagged,
 * since TVM servers cannot measure for tvm-tune.  Caller frees. */
tt_status tt_tracker_format_devices(const char *summary_json, char **out, tt_errbuf *err);

/* One extension message (codes >= 100, our tracker's jobs) on a new connection: *result gets the
 * reply's value ([0, value]).  A reply [-1, "why"] is TT_ERR_INVALID_ARG with that text; a
 * tracker that closes the connection instead (TVM's, or tvm-tracker --no-jobs) is
 * TT_ERR_UNSUPPORTED. */
tt_status tt_tracker_ext_call(const char *host, int port, const tt_auth_keyring *auth,
                              const char *json, json_t **result, tt_errbuf *err);

/* Splits "host:port" (a bare host gets `default_port`; "[::1]:9190" for IPv6). */
tt_status tt_tracker_parse_address(const char *text, int default_port, char *host, size_t n,
                                   int *port, tt_errbuf *err);

/* The text `python -m tvm.exec.query_rpc_tracker` prints for a SUMMARY reply (tracker-protocol.md
 * §7.2), byte for byte; `legacy` selects the TVM <= v0.23 layout (right-aligned addresses).
 * Caller frees.  TT_ERR_PARSE for a reply that is not a SUMMARY. */
tt_status tt_tracker_format_summary(const char *summary_json, const char *host, int port,
                                    bool legacy, char **out, tt_errbuf *err);

#endif
