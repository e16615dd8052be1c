/* Private to rpc/: a child process in its own process group with a pipe back to the parent, the
 * plumbing under every sandbox (measure.c's measuring child, opencl.c's device probe). */
#ifndef TT_RPC_SANDBOX_INT_H
#define TT_RPC_SANDBOX_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../base/base.h"

/* Forks.  In the child returns 0 with the pipe's write end in *fd; in the parent returns the pid
 * with the read end in *fd; -1 with the reason in err when the pipe or fork failed.
 *
 * The child ignores SIGINT and dies of a fault (default handlers), and drops what a kernel does
 * not need: it leads a new process group (killing the group
 * ends everything it started), keeps none of the parent's sockets, cannot gain privileges
 * (PR_SET_NO_NEW_PRIVS, so a setuid program it runs stays unprivileged), writes no core dumps,
 * opens at most 256 files and writes no file over 1 GiB, and works in a private temporary directory
 * (its cwd and TMPDIR), which tt__sandbox_finish removes with whatever the kernel left there.
 *
 * The child dies with the thread that started it (PR_SET_PDEATHSIG): a server killed with SIGKILL
 * takes its hung kernel with it.  Its directory (tvm-tune-sandbox-UID-PID) then stays; the first
 * tt__sandbox_start of every process sweeps those of dead children (base/workdir.h).
 *
 * `keep_socket` (-1: none) is the one socket the child keeps: the OpenCL worker's. */
pid_t tt__sandbox_start(int *fd, int keep_socket, tt_errbuf *err);
/* Reads up to n bytes from the child until it closes the pipe or the monotonic clock passes
 * `deadline` (*timed_out).  Returns the bytes read. */
size_t tt__sandbox_read(int fd, void *buf, size_t n, double deadline, bool *timed_out);
/* Closes the read end, kills the child's process group when `kill_group`, reaps the child and
 * returns its wait status. */
int tt__sandbox_finish(pid_t pid, int fd, bool kill_group);

#endif
