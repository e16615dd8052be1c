/* A child process tied to the thread that forks it, with a pipe back.
 *
 * Both kinds of helper process (rpc/'s sandbox around a measured kernel, the tuner's search
 * round that trains a model away from libgomp's threads) must die when the process that started
 * them is killed with SIGKILL, which no handler sees: an orphaned kernel may hang for ever, an
 * orphaned search round may train for minutes.  Linux's PR_SET_PDEATHSIG ties the child to the
 * *thread* that forked it, so that thread must be the one that reaps it. */
#ifndef TT_BASE_CHILD_H
#define TT_BASE_CHILD_H

#include <sys/types.h>

/* Makes a pipe, flushes stdio (nothing buffered is written twice) and forks.  In the child:
 * asks for SIGKILL when the forking thread ends, exits with `orphan_exit` at once if the parent
 * died before that took effect, closes the read end, puts the write end in *fd and returns 0.
 * In the parent: closes the write end, puts the read end in *fd and returns the child's pid.
 * Returns -1 with errno set (and nothing left open) when the pipe or the fork failed. */
pid_t tt_child_fork(int *fd, int orphan_exit);

/* In a child: closes every socket it inherited except `keep` (-1: none), listening ones and
 * connections alike.  A child must not hold its parent's port or connections: a parent killed
 * and started again at once would find its port still taken by a child that is still dying
 * (its SIGKILL is delivered, not yet acted on), and a peer would not see the connection close.
 * Other descriptors (the pipe back, files, a GPU driver's) stay.  Allocates nothing, so it is
 * safe in the child of a threaded process. */
void tt_child_close_sockets(int keep);

#endif
