#define _GNU_SOURCE
#include "base/child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

/* Lists /proc/self/fd with getdents64 into a stack buffer (opendir allocates); without /proc,
 * tries the first 4096 descriptors. */
void tt_child_close_sockets(int keep)
{
    struct stat st;
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        for (int fd = 3; fd < 4096; fd++)
            if (fd != keep && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
                close(fd);
        return;
    }
    char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof(reclen));
            const char *name = buf + off + 19;
            int fd = 0;
            bool number = name[0] != 0;
            for (const char *c = name; *c; c++) {
                if (*c < '0' || *c > '9') {
                    number = false;
                    break;
                }
                fd = fd * 10 + (*c - '0');
            }
            if (number && fd > 2 && fd != dir && fd != keep && fstat(fd, &st) == 0 &&
                S_ISSOCK(st.st_mode))
                close(fd);
            off += reclen;
        }
    }
    close(dir);
}
