/* tvm-tracker as a process on loopback (tracker-protocol.md §13, tracker side): magic and framing
 * with coalesced and split bytes, odd input closing only the offending connection, a REQUEST
 * served over sockets, STOP, and `tvm-tune summary` against the golden output of TVM's
 * query_rpc_tracker in both layouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/io.h"
#include "net/proc.h"

static tt_proc tracker;
static int tracker_port;

static int start_tracker(void **state)
{
    (void)state;
    char *argv[] = {TT_BIN "/tvm-tracker",  "--port", "0",       "--stop-key", "s3cret",
                    "--max-conns-per-peer", "6",      "--quiet", NULL};
    char rest[128];
    if (!tt_proc_start(&tracker, argv) ||
        !tt_proc_wait_line(&tracker, "listening on 127.0.0.1:", rest, sizeof(rest), 10))
        return -1;
    tracker_port = atoi(rest);
    return tracker_port > 0 ? 0 : -1;
}

static int stop_tracker(void **state)
{
    (void)state;
    if (tracker.pid > 0)
        tt_proc_stop(&tracker);
    return 0;
}

static void ping_ok(int fd)
{
    char reply[64];
    assert_true(tt_net_send_frame(fd, "[1]"));
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_string_equal(reply, "0");
}

static void framing(void **state)
{
    (void)state;
    /* magic and the first frame in one write: echo, then the reply */
    int fd = tt_net_connect(tracker_port);
    assert_true(fd >= 0);
    uint8_t both[11] = {0x71, 0xf2, 0x02, 0x00, 3, 0, 0, 0, '[', '1', ']'};
    assert_true(tt_write_all(fd, both, sizeof(both)));
    uint8_t echo[4];
    char reply[64];
    assert_true(tt_read_all(fd, echo, 4));
    assert_memory_equal(echo, both, 4);
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_string_equal(reply, "0");
    /* a frame one byte at a time */
    for (size_t i = 4; i < sizeof(both); i++) {
        assert_true(tt_write_all(fd, both + i, 1));
        usleep(2000);
    }
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_string_equal(reply, "0");
    close(fd);

    /* every kind of bad input closes that connection and nothing else */
    int keep = tt_net_tracker(tracker_port);
    assert_true(keep >= 0);
    static const uint8_t oversize[] = {0, 0, 0x20, 0}; /* 2 MiB > the 1 MiB cap */
    static const uint8_t zero[] = {0, 0, 0, 0};
    static const uint8_t negative[] = {0xff, 0xff, 0xff, 0xff};
    struct {
        const void *bytes;
        size_t n;
        const char *frame;
    } bad[] = {{oversize, 4, NULL},     {zero, 4, NULL}, {negative, 4, NULL}, {NULL, 0, "[42]"},
               {NULL, 0, "{\"a\": 1}"}, {NULL, 0, "[1"}, {NULL, 0, "[]"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fd = tt_net_tracker(tracker_port);
        assert_true(fd >= 0);
        assert_true(bad[i].frame ? tt_net_send_frame(fd, bad[i].frame)
                                 : tt_write_all(fd, bad[i].bytes, bad[i].n));
        assert_true(tt_net_closed(fd));
        close(fd);
    }
    /* a wrong magic: closed without an echo */
    fd = tt_net_connect(tracker_port);
    assert_true(fd >= 0);
    static const uint8_t rpc_magic[4] = {0x71, 0xf2, 0x0f, 0x00};
    assert_true(tt_write_all(fd, rpc_magic, 4));
    assert_true(tt_net_closed(fd));
    close(fd);
    ping_ok(keep);
    close(keep);
}

static void request_served(void **state)
{
    (void)state;
    int srv = tt_net_tracker(tracker_port), cli = tt_net_tracker(tracker_port);
    assert_true(srv >= 0 && cli >= 0);
    char reply[256];
    assert_true(tt_net_send_frame(srv, "[3, \"pi\", [\"9090\", \"pi:0.77\"], null]"));
    assert_true(tt_net_recv_frame(srv, reply, sizeof(reply)));
    assert_string_equal(reply, "0");
    assert_true(tt_net_send_frame(cli, "[4, \"pi\", \"\", 1]"));
    assert_true(tt_net_recv_frame(cli, reply, sizeof(reply)));
    /* the port comes back an integer even though it was PUT as a string */
    assert_string_equal(reply, "[0, [\"127.0.0.1\", 9090, \"pi:0.77\"]]");
    /* a requester that hangs up leaves no ghost in `pending` */
    assert_true(tt_net_send_frame(cli, "[4, \"pi\", \"\", 1]"));
    close(cli);
    usleep(100000);
    assert_true(tt_net_send_frame(srv, "[6]"));
    assert_true(tt_net_recv_frame(srv, reply, sizeof(reply)));
    assert_non_null(strstr(reply, "\"pi\": {\"free\": 0, \"pending\": 0}"));
    close(srv);
}

static char *slurp(FILE *f)
{
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (len + 1 == cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                return NULL;
            }
            s = t;
        }
    }
    if (s)
        s[len] = 0;
    return s;
}

/* The query text for this tracker, with its port replaced by the golden file's 19620. */
static char *query(bool legacy)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune summary --tracker 127.0.0.1:%d%s", TT_BIN, tracker_port,
             legacy ? " --legacy" : "");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *text = slurp(p);
    assert_int_equal(pclose(p), 0);
    assert_non_null(text);
    char port[16];
    int plen = snprintf(port, sizeof(port), ":%d\n", tracker_port);
    char *at = strstr(text, port);
    assert_non_null(at);
    char *out = malloc(strlen(text) + 16);
    snprintf(out, strlen(text) + 16, "%.*s:19620\n%s", (int)(at - text), text, at + plen);
    free(text);
    return out;
}

static char *golden(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", TT_TESTDATA, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *s = slurp(f);
    fclose(f);
    return s;
}

static void summary_golden(void **state)
{
    (void)state;
    char reply[256];
    int rasp4 = tt_net_tracker(tracker_port), rk = tt_net_tracker(tracker_port),
        jetson = tt_net_tracker(tracker_port);
    assert_true(rasp4 >= 0 && rk >= 0 && jetson >= 0);
    assert_true(tt_net_send_frame(
        rasp4, "[5, {\"key\": \"server:rasp4\", \"addr\": [\"10.1.2.3\", 9091]}]"));
    assert_true(tt_net_recv_frame(rasp4, reply, sizeof(reply)));
    assert_true(
        tt_net_send_frame(rk, "[5, {\"key\" : \"server:rk3399\", \"addr\": [null, 9090]}]"));
    assert_true(tt_net_recv_frame(rk, reply, sizeof(reply)));
    assert_true(tt_net_send_frame(rk, "[3, \"rk3399\", [9090, \"rk3399:0.5\"], null]"));
    assert_true(tt_net_recv_frame(rk, reply, sizeof(reply)));
    assert_true(tt_net_send_frame(jetson, "[4, \"jetson\", \"\", 0]"));
    ping_ok(jetson); /* the REQUEST before it has been handled */

    char *got = query(false), *want = golden("query-v024.txt");
    assert_string_equal(got, want);
    free(got);
    free(want);
    got = query(true);
    want = golden("query-v023.txt");
    assert_string_equal(got, want);
    free(got);
    free(want);
    close(rasp4);
    close(rk);
    close(jetson);
}

static void stop_key(void **state)
{
    (void)state;
    int fd = tt_net_tracker(tracker_port);
    assert_true(fd >= 0);
    char reply[64];
    assert_true(tt_net_send_frame(fd, "[2, \"guess\"]"));
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_string_equal(reply, "-1");
    assert_true(tt_net_send_frame(fd, "[2, \"s3cret\"]"));
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_string_equal(reply, "0");
    close(fd);
    assert_int_equal(tt_proc_wait(&tracker, 10), 0);
}

/* Connects again (the tracker frees a closed connection's place when it notices) and pings. */
static void reconnect_and_ping(void)
{
    int fd = -1;
    for (int tries = 0; tries < 50 && fd < 0; tries++) {
        usleep(20000);
        fd = tt_net_tracker(tracker_port);
    }
    assert_true(fd >= 0);
    ping_ok(fd);
    close(fd);
}

/* One address may hold --max-conns-per-peer connections: one more is closed at once, the others
 * keep working. */
static void connections_per_peer_are_limited(void **state)
{
    (void)state;
    int fd[7];
    for (int i = 0; i < 6; i++) {
        fd[i] = tt_net_tracker(tracker_port);
        assert_true(fd[i] >= 0);
        ping_ok(fd[i]);
    }
    fd[6] = tt_net_tracker(tracker_port); /* the magic exchange fails: closed */
    assert_true(fd[6] < 0);
    for (int i = 0; i < 6; i++) {
        ping_ok(fd[i]);
        close(fd[i]);
    }
    /* closing frees the places again */
    reconnect_and_ping();
}

/* Slow and stuck clients (slowloris): connections that stop halfway through the magic or a frame
 * hold no one up; a well-behaved client beside them is served, a frame dribbled a byte at a time
 * is still a frame, and the stuck ones are cleaned up when they go. */
static void slow_clients_hold_no_one_up(void **state)
{
    (void)state;
    enum { STUCK = 5 }; /* the tracker of these tests allows 6 connections per address */
    int fd[STUCK];
    for (int i = 0; i < STUCK; i++) {
        fd[i] = tt_net_connect(tracker_port);
        assert_true(fd[i] >= 0);
        /* half the magic, or the magic and half a length prefix */
        const uint8_t bytes[6] = {0x71, 0xf2, 0x02, 0x00, 0x40, 0x00};
        assert_true(tt_write_all(fd[i], bytes, i % 2 ? 2 : 6));
    }
    int good = tt_net_tracker(tracker_port);
    assert_true(good >= 0);
    for (int i = 0; i < 20; i++)
        ping_ok(good);
    const uint8_t frame[7] = {3, 0, 0, 0, '[', '1', ']'};
    for (int i = 0; i < 7; i++) {
        assert_true(tt_write_all(good, frame + i, 1));
        usleep(10000);
    }
    char reply[16];
    assert_true(tt_net_recv_frame(good, reply, sizeof(reply)));
    assert_string_equal(reply, "0");
    close(good);
    for (int i = 0; i < STUCK; i++)
        close(fd[i]);
    /* their places are free again */
    reconnect_and_ping();
}

/* Runs tvm-tune with `args`; its exit status, its output (stdout and stderr) in out. */
static int tvm_tune(const char *args, char *out, size_t n)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune %s 2>&1", TT_BIN, args);
    return tt_proc_output(cmd, out, n);
}

/* One address may have --max-jobs-per-peer jobs queued or running: one more submission is
 * refused with the reason; when one ends, the next is accepted. */
static void jobs_per_peer_are_limited(void **state)
{
    (void)state;
    char dir[] = "/tmp/tt-jobs-XXXXXX", db[64], rest[128], args[512], out[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(db, sizeof(db), "%s/farm.db", dir);
    char *argv[] = {TT_BIN "/tvm-tracker", "--port", "0",       "--db", db,
                    "--max-jobs-per-peer", "1",      "--quiet", NULL};
    tt_proc t2;
    assert_true(tt_proc_start(&t2, argv));
    assert_true(tt_proc_wait_line(&t2, "listening on 127.0.0.1:", rest, sizeof(rest), 10));
    int port = atoi(rest);
    /* no device has this key: the job waits for one */
    const char *job = "--key nodevice --workload matmul:M=8,N=8,K=8 --trials 4 --device-wait 60";
    snprintf(args, sizeof(args), "submit --tracker 127.0.0.1:%d %s", port, job);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    long long first = 0;
    assert_int_equal(sscanf(out, "job %lld submitted", &first), 1);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "127.0.0.1 already has 1 jobs queued or running"));
    snprintf(args, sizeof(args), "cancel --tracker 127.0.0.1:%d %lld", port, first);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    snprintf(args, sizeof(args), "watch --tracker 127.0.0.1:%d %lld --interval 0.2", port, first);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 3); /* cancelled */
    snprintf(args, sizeof(args), "submit --tracker 127.0.0.1:%d %s", port, job);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    assert_int_equal(tt_proc_stop(&t2), 0);
    snprintf(args, sizeof(args), "rm -rf %s", dir);
    assert_int_equal(system(args), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(framing),
        cmocka_unit_test(request_served),
        cmocka_unit_test(summary_golden),
        cmocka_unit_test(connections_per_peer_are_limited),
        cmocka_unit_test(jobs_per_peer_are_limited),
        cmocka_unit_test(slow_clients_hold_no_one_up),
        cmocka_unit_test(stop_key),
    };
    return cmocka_run_group_tests(tests, start_tracker, stop_tracker);
}
