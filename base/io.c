#include "io.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

bool tt_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    bool sock = true;
    while (n > 0) {
        ssize_t w = sock ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
        if (w < 0 && sock && errno == ENOTSOCK) {
            sock = false;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool tt_read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

void tt_socket_deadlines(int fd, double seconds)
{
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void tt_socket_keepalive(int fd)
{
    int one = 1, idle = 5, intvl = 2, cnt = 3;
    unsigned user_timeout_ms = 15000;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

bool tt_socket_is_self_connected(int fd)
{
    struct sockaddr_storage self, peer;
    socklen_t ls = sizeof(self), lp = sizeof(peer);
    memset(&self, 0, sizeof(self));
    memset(&peer, 0, sizeof(peer));
    return getsockname(fd, (struct sockaddr *)&self, &ls) == 0 &&
           getpeername(fd, (struct sockaddr *)&peer, &lp) == 0 && ls == lp &&
           memcmp(&self, &peer, ls) == 0;
}

int tt_socket_dial(const char *host, int port, double timeout_s, char *why, size_t whylen)
{
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc) {
        snprintf(why, whylen, "%s", gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = ECONNREFUSED;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        tt_socket_deadlines(fd, timeout_s);
        if (connect(fd, a->ai_addr, a->ai_addrlen)) {
            saved = errno;
            close(fd);
            fd = -1;
        } else if (tt_socket_is_self_connected(fd)) {
            saved = ECONNREFUSED; /* nothing listens there */
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(why, whylen, "%s", strerror(saved));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    tt_socket_keepalive(fd);
    return fd;
}
