#include "base/child.h"

#include <errno.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

pid_t tt_child_fork(int *fd, int orphan_exit)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        errno = saved;
        return -1;
    }
    if (pid == 0) {
        /* The check closes the race with a parent that died before the prctl. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(orphan_exit);
        close(fds[0]);
        *fd = fds[1];
        return 0;
    }
    close(fds[1]);
    *fd = fds[0];
    return pid;
}
