/* Helpers of the process-level tests: start a daemon (tvm-tracker, tvm-rpc-server) as a child,
 * read the address it announces, talk raw bytes to it over loopback, stop it.  Every wait is
 * bounded so a broken daemon fails the test instead of hanging it. */
#ifndef TT_TESTS_NET_PROC_H
#define TT_TESTS_NET_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct tt_proc {
    pid_t pid;
    int out; /* read end of the child's stdout */
} tt_proc;

/* Starts argv[0] with stdout on a pipe (stderr inherited).  Returns false when it cannot. */
bool tt_proc_start(tt_proc *p, char *const argv[]);
/* Reads stdout lines until one contains `marker`, within `timeout_s`; the rest of that line
 * after the marker is copied to `rest`.  False on timeout or end of output. */
bool tt_proc_wait_line(tt_proc *p, const char *marker, char *rest, size_t n, double timeout_s);
/* Waits up to timeout_s for the child to exit; returns its exit status, or -1 when it had to be
 * killed (SIGKILL) or died of a signal. */
int tt_proc_wait(tt_proc *p, double timeout_s);
/* Waits up to timeout_s for child `pid` (started here, or adopted as a subreaper) to end: true
 * with its wait status in *status when it did, false when it had to be killed with SIGKILL (its
 * whole process group when `group`) or could not be waited for. */
bool tt_proc_reap(pid_t pid, bool group, double timeout_s, int *status);
/* SIGTERM, then tt_proc_wait; closes the pipe. */
int tt_proc_stop(tt_proc *p);
/* SIGKILL without waiting for anything else (the test of a dying device). */
void tt_proc_kill(tt_proc *p);

/* Runs a shell command, its stdout (up to n - 1 bytes) in out; returns its exit status, or -1
 * when it could not run or died of a signal. */
int tt_proc_output(const char *cmd, char *out, size_t n);

/* A TCP connection to 127.0.0.1:port with 5 s send/receive deadlines; -1 on failure.  Whole
 * buffers go with base/io.h's tt_write_all and tt_read_all. */
int tt_net_connect(int port);
/* True when the peer closed the connection (reads until EOF within 5 s, discarding bytes). */
bool tt_net_closed(int fd);
/* Sends one tracker frame (length prefix + json). */
bool tt_net_send_frame(int fd, const char *json);
/* Receives one tracker frame into buf (NUL-terminated); false on error or overflow. */
bool tt_net_recv_frame(int fd, char *buf, size_t n);
/* Connects to a tracker and exchanges the magic; -1 on failure. */
int tt_net_tracker(int port);
/* TVM's RPC handshake with an rpc server at 127.0.0.1:port: magic and `key` out, the 4-byte
 * answer (SUCCESS or MISMATCH) in `code`; the connection, or -1 when it broke. */
int tt_net_rpc_handshake(int port, const char *key, uint8_t code[4]);

#endif
