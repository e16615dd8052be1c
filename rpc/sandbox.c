#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/child.h"
#include "base/workdir.h"
#include "sandbox_int.h"

/* The private directories of children: $TMPDIR (or /tmp)/tvm-tune-sandbox-UID-PID, PID the
 * child's. */
static const char *dir_name(void)
{
    static __thread char name[64];
    snprintf(name, sizeof(name), "tvm-tune-sandbox-%u", (unsigned)getuid());
    return name;
}

static const char *pid_dir(pid_t pid)
{
    static __thread char dir[512];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/%s-%d", base && base[0] ? base : "/tmp", dir_name(), (int)pid);
    return dir;
}

/* A child outlives its directory's removal only when the process that started it was killed
 * (the child then dies too, below): the first sandbox of each process sweeps such directories. */
static void sweep_orphans(void)
{
    tt_workdir_sweep(dir_name(), TT_WORKDIR_STALE_S);
}

static void harden(const char *dir)
{
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    struct rlimit none = {0, 0}, files = {256, 256}, fsize = {1ll << 30, 1ll << 30};
    setrlimit(RLIMIT_CORE, &none);
    struct rlimit cur;
    if (getrlimit(RLIMIT_NOFILE, &cur) == 0 && cur.rlim_max > 256)
        setrlimit(RLIMIT_NOFILE, &files);
    setrlimit(RLIMIT_FSIZE, &fsize);
    if (mkdir(dir, 0700) == 0 && chdir(dir) == 0)
        setenv("TMPDIR", dir, 1);
}

pid_t tt__sandbox_start(int *fd, int keep_socket, tt_errbuf *err)
{
    static pthread_once_t swept = PTHREAD_ONCE_INIT;
    pthread_once(&swept, sweep_orphans);
    /* A hung kernel must not outlive a server killed with SIGKILL (its own process group keeps
     * it from the server's group's signals): it dies with the thread that started it, which
     * waits for it in tt__sandbox_finish. */
    pid_t pid = tt_child_fork(fd, 127);
    if (pid < 0) {
        tt_err(err, TT_ERR_IO, "starting the sandbox: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        /* The terminal's ^C is the parent's to handle; and whatever handlers the parent
         * installed, a faulting kernel must kill the child. */
        signal(SIGINT, SIG_IGN);
        static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
        for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
            signal(fatal[i], SIG_DFL);
        /* a kernel must not write frames on the server's connections, nor hold them open
         * once the server has closed them */
        tt_child_close_sockets(keep_socket);
        harden(pid_dir(getpid()));
        return 0;
    }
    setpgid(pid, pid); /* also here: no race with the child's own call */
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
    /* Whatever the kernel left in its directory goes with it. */
    tt_workdir_remove(pid_dir(pid));
    return status;
}
