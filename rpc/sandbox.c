#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox_int.h"

pid_t tt__sandbox_start(int *fd, tt_errbuf *err)
{
    int fds[2];
    if (pipe(fds)) {
        tt_err(err, TT_ERR_IO, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        tt_err(err, TT_ERR_IO, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        close(fds[0]);
        *fd = fds[1];
        return 0;
    }
    setpgid(pid, pid); /* also here: no race with the child's own call */
    close(fds[1]);
    *fd = fds[0];
    return pid;
}

size_t tt__sandbox_read(int fd, void *buf, size_t n, double deadline, bool *timed_out)
{
    size_t got = 0;
    *timed_out = false;
    while (got < n) {
        double left = deadline - tt_clock_monotonic();
        if (left <= 0) {
            *timed_out = true;
            break;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        int r = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (r <= 0)
            continue; /* EINTR or not yet: the deadline decides */
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break; /* the child is gone */
        got += (size_t)k;
    }
    return got;
}

int tt__sandbox_finish(pid_t pid, int fd, bool kill_group)
{
    close(fd);
    if (kill_group)
        kill(-pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}
