#include "proc.h"

#include "base/io.h"
#include "rpc/tracker_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool tt_proc_start(tt_proc *p, char *const argv[])
{
    int fds[2];
    if (pipe(fds))
        return false;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    p->pid = pid;
    p->out = fds[0];
    return true;
}

bool tt_proc_wait_line(tt_proc *p, const char *marker, char *rest, size_t n, double timeout_s)
{
    char line[1024];
    size_t len = 0;
    double end = now_s() + timeout_s;
    for (;;) {
        double left = end - now_s();
        if (left <= 0)
            return false;
        struct pollfd pfd = {p->out, POLLIN, 0};
        int rc = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return false;
        char ch;
        ssize_t r = read(p->out, &ch, 1);
        if (r <= 0)
            return false;
        if (ch != '\n') {
            if (len + 1 < sizeof(line))
                line[len++] = ch;
            continue;
        }
        line[len] = 0;
        len = 0;
        const char *at = strstr(line, marker);
        if (at) {
            snprintf(rest, n, "%s", at + strlen(marker));
            return true;
        }
    }
}

bool tt_proc_reap(pid_t pid, bool group, double timeout_s, int *status)
{
    double end = now_s() + timeout_s;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return true;
        if (r < 0 && errno != EINTR)
            return false;
        if (now_s() > end) {
            kill(group ? -pid : pid, SIGKILL);
            waitpid(pid, status, 0);
            return false;
        }
        usleep(10000);
    }
}

int tt_proc_wait(tt_proc *p, double timeout_s)
{
    if (p->pid <= 0)
        return -1;
    int status = 0;
    bool ended = tt_proc_reap(p->pid, false, timeout_s, &status);
    p->pid = 0;
    return ended && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int tt_proc_stop(tt_proc *p)
{
    if (p->pid > 0)
        kill(p->pid, SIGTERM);
    int rc = tt_proc_wait(p, 10);
    if (p->out >= 0)
        close(p->out);
    p->out = -1;
    return rc;
}

void tt_proc_kill(tt_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = 0;
    }
}

int tt_net_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    tt_socket_deadlines(fd, 5);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        close(fd);
        return -1;
    }
    return fd;
}

bool tt_net_closed(int fd)
{
    char buf[256];
    for (int i = 0; i < 1000; i++) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r == 0)
            return true;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == ECONNRESET;
    }
    return false;
}

bool tt_net_send_frame(int fd, const char *json)
{
    size_t n = strlen(json);
    uint8_t *b = malloc(n + 4);
    if (!b)
        return false;
    tt_put_le32(b, (int32_t)n);
    memcpy(b + 4, json, n);
    bool ok = tt_write_all(fd, b, n + 4);
    free(b);
    return ok;
}

bool tt_net_recv_frame(int fd, char *buf, size_t n)
{
    uint8_t h[4];
    if (!tt_read_all(fd, h, 4))
        return false;
    uint32_t len =
        (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    if (len >= n)
        return false;
    if (!tt_read_all(fd, buf, len))
        return false;
    buf[len] = 0;
    return true;
}

int tt_net_tracker(int port)
{
    int fd = tt_net_connect(port);
    if (fd < 0)
        return -1;
    uint8_t m[4], echo[4];
    tt_put_le32(m, TT_TRACKER_MAGIC);
    if (!tt_write_all(fd, m, 4) || !tt_read_all(fd, echo, 4) || memcmp(m, echo, 4)) {
        close(fd);
        return -1;
    }
    return fd;
}

int tt_proc_output(const char *cmd, char *out, size_t n)
{
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t len = fread(out, 1, n - 1, p);
    out[len] = 0;
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int tt_net_rpc_handshake(int port, const char *key, uint8_t code[4])
{
    int fd = tt_net_connect(port);
    if (fd < 0)
        return -1;
    uint8_t h[8];
    tt_put_le32(h, TT_RPC_MAGIC);
    tt_put_le32(h + 4, (int32_t)strlen(key));
    if (!tt_write_all(fd, h, 8) || !tt_write_all(fd, key, strlen(key)) ||
        !tt_read_all(fd, code, 4)) {
        close(fd);
        return -1;
    }
    return fd;
}
