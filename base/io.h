/* Whole-buffer reads and writes on a file descriptor (pipe or socket), retrying after EINTR and
 * short transfers.  Writes to a socket never raise SIGPIPE (a peer that hung up is an error
 * return, not a dead process).  A receive deadline set on the socket (SO_RCVTIMEO) ends a read
 * with false like a closed peer. */
#ifndef TT_BASE_IO_H
#define TT_BASE_IO_H

#include <stdbool.h>
#include <stddef.h>

/* True when all n bytes were written. */
bool tt_write_all(int fd, const void *buf, size_t n);
/* True when exactly n bytes were read; false on end of file, error or timeout. */
bool tt_read_all(int fd, void *buf, size_t n);
/* Deadlines of every later receive and send on socket fd (SO_RCVTIMEO, SO_SNDTIMEO), seconds. */
void tt_socket_deadlines(int fd, double seconds);
/* A peer whose link is cut silently (no FIN, no RST) is declared dead within about 15 s:
 * keepalive probes after 5 s of quiet, every 2 s, 3 unanswered, and at most 15 s for sent data
 * to be acknowledged.  Reads and writes then fail with ETIMEDOUT. */
void tt_socket_keepalive(int fd);
/* True when connected socket fd is connected to itself.  Linux lets a connect() to a port in
 * the ephemeral range on which nothing listens pick that very port as its own ("simultaneous
 * open"): the socket then echoes what it writes, so it passes a magic-number handshake, and it
 * holds the port that its server wants to listen on again.  Callers treat it as refused. */
bool tt_socket_is_self_connected(int fd);
/* A TCP connection to host:port (any of its addresses), close-on-exec, with `timeout_s` deadlines
 * on the connect and on every later receive and send, TCP_NODELAY (frames are small) and
 * keepalive (tt_socket_keepalive: a peer whose link is cut silently is noticed in about 15 s); a
 * connection to itself counts as refused.  Returns the descriptor, or -1 with the reason (the
 * resolver's or the connect's) in why. */
int tt_socket_dial(const char *host, int port, double timeout_s, char *why, size_t whylen);

#endif
