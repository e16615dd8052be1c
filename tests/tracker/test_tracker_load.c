/* Load on one tracker over loopback (issue #9): 1,000 simulated devices, each its own connection
 * with a ticket on offer, and 50 clients, each its own connection, requesting devices for a
 * bounded time.  A client that gets a device "uses" it and the device offers a fresh ticket, as
 * tvm-rpc-server does after a session.  Asserted: no ticket is handed out twice, every request
 * is answered, every device is free again at the end (nothing lost or duplicated).  Reported:
 * hand-outs per second and the median and p99 request latency (not asserted: speed is the
 * benchmarks' business). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/base.h"
#include "net/proc.h"

#define DEVICES 1000
#define CLIENTS 50

typedef struct {
    int fd;
    pthread_mutex_t mu; /* the client that got it offers its next ticket */
    atomic_int gen;     /* the ticket on offer */
    atomic_int out;     /* 1 while handed out */
} device;

static device dev[DEVICES];
static int port;
static double deadline;
static atomic_long handouts, duplicates, lost, bad_replies;

typedef struct {
    int fd;
    double *lat;
    size_t nlat, cap;
} client;

static bool offer(int d, int gen)
{
    char msg[160], reply[64];
    snprintf(msg, sizeof(msg), "[3, \"load\", [9000, \"d%dg%d\"], null]", d, gen);
    return tt_net_send_frame(dev[d].fd, msg) &&
           tt_net_recv_frame(dev[d].fd, reply, sizeof(reply)) && !strcmp(reply, "0");
}

static void *run_client(void *arg)
{
    client *c = arg;
    char reply[256];
    while (tt_clock_monotonic() < deadline) {
        double t0 = tt_clock_monotonic();
        if (!tt_net_send_frame(c->fd, "[4, \"load\", \"\", 0]") ||
            !tt_net_recv_frame(c->fd, reply, sizeof(reply))) {
            atomic_fetch_add(&lost, 1);
            break;
        }
        double dt = tt_clock_monotonic() - t0;
        int d = -1, g = -1;
        const char *m = strstr(reply, "\"d");
        if (!m || sscanf(m, "\"d%dg%d\"", &d, &g) != 2 || d < 0 || d >= DEVICES) {
            atomic_fetch_add(&bad_replies, 1);
            continue;
        }
        if (c->nlat == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 4096;
            c->lat = realloc(c->lat, c->cap * sizeof(double));
        }
        c->lat[c->nlat++] = dt;
        atomic_fetch_add(&handouts, 1);
        int expect_out = 0;
        if (g != atomic_load(&dev[d].gen) ||
            !atomic_compare_exchange_strong(&dev[d].out, &expect_out, 1)) {
            atomic_fetch_add(&duplicates, 1);
            continue;
        }
        /* the session ends: a fresh ticket */
        pthread_mutex_lock(&dev[d].mu);
        atomic_store(&dev[d].gen, g + 1);
        atomic_store(&dev[d].out, 0);
        if (!offer(d, g + 1))
            atomic_fetch_add(&lost, 1);
        pthread_mutex_unlock(&dev[d].mu);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void thousand_devices_fifty_clients(void **state)
{
    (void)state;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_max < DEVICES + CLIENTS + 100)
        skip(); /* the machine does not allow this many sockets */
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl); /* the tracker inherits it */
    char *argv[] = {TT_BIN "/tvm-tracker",  "--port", "0",       "--no-jobs",
                    "--max-conns-per-peer", "4000",   "--quiet", NULL};
    tt_proc tracker;
    char rest[128];
    assert_true(tt_proc_start(&tracker, argv));
    assert_true(tt_proc_wait_line(&tracker, "listening on 127.0.0.1:", rest, sizeof(rest), 10));
    port = atoi(rest);
    double t_reg = tt_clock_monotonic();
    for (int d = 0; d < DEVICES; d++) {
        dev[d].fd = tt_net_tracker(port);
        assert_true(dev[d].fd >= 0);
        pthread_mutex_init(&dev[d].mu, NULL);
        char info[128], reply[64];
        snprintf(info, sizeof(info), "[5, {\"key\": \"server:load\", \"addr\": [null, 9000]}]");
        assert_true(tt_net_send_frame(dev[d].fd, info));
        assert_true(tt_net_recv_frame(dev[d].fd, reply, sizeof(reply)));
        assert_true(offer(d, 0));
    }
    t_reg = tt_clock_monotonic() - t_reg;
    const char *secs = getenv("TT_LOAD_SECONDS");
    double duration = secs ? atof(secs) : 3.0;
    static client cl[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        cl[i].fd = tt_net_tracker(port);
        assert_true(cl[i].fd >= 0);
    }
    double t0 = tt_clock_monotonic();
    deadline = t0 + duration;
    for (int i = 0; i < CLIENTS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, run_client, &cl[i]), 0);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    double elapsed = tt_clock_monotonic() - t0;
    /* nothing lost or duplicated, every device free again */
    assert_int_equal(atomic_load(&duplicates), 0);
    assert_int_equal(atomic_load(&lost), 0);
    assert_int_equal(atomic_load(&bad_replies), 0);
    long total = atomic_load(&handouts), gens = 0;
    for (int d = 0; d < DEVICES; d++)
        gens += atomic_load(&dev[d].gen);
    assert_int_equal(gens, total); /* each hand-out was followed by exactly one fresh ticket */
    assert_true(total > CLIENTS);
    char summary[1 << 17];
    int fd = tt_net_tracker(port);
    assert_true(fd >= 0);
    assert_true(tt_net_send_frame(fd, "[6]"));
    assert_true(tt_net_recv_frame(fd, summary, sizeof(summary)));
    close(fd);
    char want[64];
    snprintf(want, sizeof(want), "\"load\": {\"free\": %d, \"pending\": 0}", DEVICES);
    if (!strstr(summary, want))
        fail_msg("after the run the queue is not whole: %.300s", strstr(summary, "\"load\""));
    size_t n = 0;
    for (int i = 0; i < CLIENTS; i++)
        n += cl[i].nlat;
    double *all = malloc(n * sizeof(double));
    size_t k = 0;
    for (int i = 0; i < CLIENTS; i++) {
        memcpy(all + k, cl[i].lat, cl[i].nlat * sizeof(double));
        k += cl[i].nlat;
        free(cl[i].lat);
        close(cl[i].fd);
    }
    qsort(all, n, sizeof(double), cmp_double);
    printf("load: %d devices registered in %.2f s; %d clients, %.1f s: %ld hand-outs (%.0f/s), "
           "latency median %.3f ms, p99 %.3f ms; 0 lost, 0 duplicated\n",
           DEVICES, t_reg, CLIENTS, elapsed, total, total / elapsed, all[n / 2] * 1e3,
           all[(size_t)(n * 0.99)] * 1e3);
    free(all);
    for (int d = 0; d < DEVICES; d++)
        close(dev[d].fd);
    assert_int_equal(tt_proc_stop(&tracker), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(thousand_devices_fifty_clients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
