/* The OpenCL worker: one long-lived tvm-measure-cl per measuring thread, which keeps the device's
 * context and queue from one candidate to the next.
 *
 * A fresh process per candidate cost NVIDIA's driver 1.8-4.2 s (a context, then the build); the
 * kernels themselves take milliseconds.  The worker makes the context once, and the binary cache
 * (cl_cache_int.h), filled by the tuner's parallel builders, takes the build off the path.  Safety
 * is the one-shot child's: the worker is a sandbox (sandbox_int.h) in its own process group, every
 * candidate has its deadline, and a candidate that hangs or crashes kills the worker; the next
 * candidate starts a fresh one.  After a device error the worker exits by itself (its context may
 * be broken).
 *
 * The worker dies with the thread that started it (PR_SET_PDEATHSIG), so a worker belongs to one
 * thread: another thread's measurement starts its own.  Measurements run one at a time (kernels
 * must not share the device), so one worker per process is kept; a second thread measuring at
 * the same time falls back to the one-shot child.  TT_CL_WORKER=0 turns the worker off.
 *
 * Builders: the driver's builds (build_only jobs) of a thread that said it lives long
 * (tt_measure_keep_builder: the tuner's compile threads, which last the whole run) go to a worker
 * of that thread, likewise kept from one build to the next.  On the H200 a one-shot build cost 3.0
 * s a candidate even when its binary was cached (a process, the driver's start and a context),
 * while the measuring worker loaded the same binary and ran it in 205 ms.  Other threads' builds
 * take the one-shot child, as before: their worker would die with them unreaped. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/io.h"
#include "measure_int.h"
#include "sandbox_int.h"

/* One long-lived tvm-measure-cl --serve process and the thread it belongs to. */
typedef struct {
    pid_t pid; /* 0: none */
    int sock;
    pthread_t owner;
    char device[64];
} cl_worker;

/* The measuring worker: one a process (measurements run one at a time). */
static struct {
    pthread_mutex_t lock;
    cl_worker w;
} W = {PTHREAD_MUTEX_INITIALIZER, {0, -1, 0, ""}};

/* This thread's builder (build_only jobs), kept between tt_measure_keep_builder and
 * tt_measure_release_builder. */
static __thread cl_worker B = {0, -1, 0, ""};
static __thread bool B_kept;

/* Kills and reaps the worker (if any); returns its wait status. */
static int worker_stop(cl_worker *w)
{
    if (!w->pid)
        return 0;
    int status = tt__sandbox_finish(w->pid, w->sock, true);
    w->pid = 0;
    w->sock = -1;
    return status;
}

/* Whether the worker is still running; an exited one is left for worker_stop to reap. */
static bool worker_alive(const cl_worker *w)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    return waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

static bool worker_start(cl_worker *w, const char *device)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return false;
    int pipe_fd;
    tt_errbuf err;
    pid_t pid = tt__sandbox_start(&pipe_fd, sv[1], &err);
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return false;
    }
    if (pid == 0) {
        close(pipe_fd); /* results go on the socket */
        int fd = sv[1];
        fcntl(fd, F_SETFD, 0);
        char fd_text[16];
        snprintf(fd_text, sizeof(fd_text), "%d", fd);
        char *argv[] = {"tvm-measure-cl", "--serve", fd_text, NULL};
        tt__cl_exec_helper(argv);
        _exit(127); /* the caller falls back to the one-shot child, which says why */
    }
    close(pipe_fd);
    close(sv[1]);
    w->pid = pid;
    w->sock = sv[0];
    w->owner = pthread_self();
    snprintf(w->device, sizeof(w->device), "%s", device);
    return true;
}

/* Sends one frame, bounded by the deadline (a worker that stopped reading is a dead one). */
static bool send_job(cl_worker *w, const char *path, const tt_measure_buffer *bufs, int nbufs,
                     int ninputs, const tt_measure_options *o, double deadline)
{
    double left = deadline - tt_clock_monotonic();
    tt_socket_deadlines(w->sock, left > 0.001 ? left : 0.001);
    size_t path_len = strlen(path);
    tt__cl_frame f = {TT__CL_FRAME_MAGIC, (uint32_t)path_len, tt__cl_job_size(bufs, nbufs, o)};
    return tt_write_all(w->sock, &f, sizeof(f)) && tt_write_all(w->sock, path, path_len) &&
           tt__cl_job_write(w->sock, bufs, nbufs, ninputs, o);
}

/* One job in the worker `w` of this thread, started (or replaced) as needed; false when no worker
 * could take it, and the caller's one-shot child does. */
static bool worker_job(cl_worker *w, const char *path, const tt_measure_buffer *bufs, int nbufs,
                       int ninputs, const tt_measure_options *o, tt_measure_result *res)
{
    const char *device = o->opencl_device ? o->opencl_device : "";
    double t0 = tt_clock_monotonic(), deadline = t0 + o->timeout_s;
    if (w->pid &&
        (strcmp(w->device, device) || !pthread_equal(w->owner, pthread_self()) || !worker_alive(w)))
        worker_stop(w);
    bool sent = false, fresh = false;
    /* A worker that died since its last job (its thread's end, a driver's exit) is replaced
     * once; one that cannot even take a job leaves it to the one-shot child. */
    for (int attempt = 0; attempt < 2 && !sent; attempt++) {
        fresh = !w->pid;
        if (fresh && !worker_start(w, device))
            break;
        sent = send_job(w, path, bufs, nbufs, ninputs, o, deadline);
        if (!sent) {
            worker_stop(w);
            if (fresh)
                break;
        }
    }
    if (!sent)
        return false;
    tt__child_msg m;
    bool timed_out;
    size_t got = tt__sandbox_read(w->sock, &m, sizeof(m), deadline, &timed_out);
    int status = 0;
    if (timed_out || got < sizeof(m)) {
        status = worker_stop(w);
        if (fresh && got == 0 && !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 127)
            return false; /* no tvm-measure-cl: the one-shot child says so */
    }
    tt__measure_result_from(res, &m, got, timed_out, status, o->timeout_s);
    if (res->error_no == TT__E_RUNTIME_DEVICE && w->pid)
        worker_stop(w); /* it exits after a device error: reap it now */
    return true;
}

static bool workers_off(const char *path)
{
    const char *off = getenv("TT_CL_WORKER");
    return (off && !strcmp(off, "0")) || strlen(path) >= 4096;
}

bool tt__cl_worker_measure(const char *path, const tt_measure_buffer *bufs, int nbufs, int ninputs,
                           const tt_measure_options *o, tt_measure_result *res)
{
    if (workers_off(path) || pthread_mutex_trylock(&W.lock))
        return false;
    bool done = worker_job(&W.w, path, bufs, nbufs, ninputs, o, res);
    pthread_mutex_unlock(&W.lock);
    return done;
}

bool tt__cl_builder_build(const char *path, const tt_measure_options *o, tt_measure_result *res)
{
    return B_kept && !workers_off(path) && worker_job(&B, path, NULL, 0, 0, o, res);
}

void tt_measure_keep_builder(void)
{
    B_kept = true;
}

void tt_measure_release_builder(void)
{
    worker_stop(&B);
    B_kept = false;
}
