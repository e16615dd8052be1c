/* The farm as real processes on loopback: tvm-tracker, three tvm-rpc-servers under two keys, and
 * clients (tracker-protocol.md §13, server side; issue #6's integration tests).  Registration
 * and SUMMARY, TVM's handshake (MISMATCH, a TVM client refused with an error packet), matchkey
 * regeneration after an abandoned ticket, the measurement protocol with sick kernels and hostile
 * bytes, and a tuning run that loses a device mid-measurement and still records every trial. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/io.h"
#include "net/proc.h"
#include "rpc/measure_proto.h"
#include "rpc/remote.h"
#include "rpc/tracker_proto.h"

#define N 1024

/* Every "device" of these tests shares this machine's cores: kernels without parallel loops keep
 * two devices measuring at once from starving each other's OpenMP threads (which would turn
 * into genuine RUN_TIMEOUT records). */
#define ONE_CORE "--target 'llvm -num-cores=1'"
static float in[N], expect[N];

static tt_proc tracker, servers[3];
static tt_proc well, sick; /* the devices of sick_device_quarantined */
static int tracker_port, server_port[3];
static const char *server_key[3] = {"cpu", "cpu", "solo"};
static char workdir[256];

static bool start_server(int i)
{
    char port[16], cache[300], log[300];
    snprintf(port, sizeof(port), "127.0.0.1:%d", tracker_port);
    snprintf(cache, sizeof(cache), "%s/cache%d", workdir, i);
    snprintf(log, sizeof(log), "%s/server%d.log", workdir, i);
    /* stderr to a file the tests read: the server says what it does */
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int saved = dup(2);
    dup2(fd, 2);
    char *argv[] = {TT_BIN "/tvm-rpc-server",
                    "--tracker",
                    port,
                    "--key",
                    (char *)server_key[i],
                    "--port",
                    "0",
                    "--cache",
                    cache,
                    "--idle-timeout",
                    "20",
                    i == 2 ? "--child-memory-mb" : NULL, /* the device's own cap */
                    "256",
                    NULL};
    bool ok = tt_proc_start(&servers[i], argv);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char rest[64];
    if (!ok || !tt_proc_wait_line(&servers[i], "listening on 127.0.0.1:", rest, sizeof(rest), 10))
        return false;
    server_port[i] = atoi(rest);
    return true;
}

static char *server_log(int i)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/server%d.log", workdir, i);
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

static int occurrences(int server, const char *needle)
{
    char *log = server_log(server);
    int n = 0;
    for (char *p = strstr(log, needle); p; p = strstr(p + 1, needle))
        n++;
    free(log);
    return n;
}

/* Raw SUMMARY text from the tracker. */
static void summary(char *out, size_t n)
{
    int fd = tt_net_tracker(tracker_port);
    assert_true(fd >= 0);
    assert_true(tt_net_send_frame(fd, "[6]"));
    assert_true(tt_net_recv_frame(fd, out, n));
    close(fd);
}

/* Waits (bounded) until SUMMARY shows `want` free slots for `key`. */
static bool wait_free(const char *key, int want, double timeout_s)
{
    char pattern[128], text[1 << 14];
    snprintf(pattern, sizeof(pattern), "\"%s\": {\"free\": %d,", key, want);
    for (int i = 0; i < (int)(timeout_s * 20); i++) {
        summary(text, sizeof(text));
        if (strstr(text, pattern))
            return true;
        usleep(50000);
    }
    return false;
}

static bool start_tracker(int port)
{
    char p[16], end[16], rest[128];
    snprintf(p, sizeof(p), "%d", port);
    snprintf(end, sizeof(end), "%d", port ? port + 1 : 1);
    char db[300];
    snprintf(db, sizeof(db), "%s/farm.db", workdir);
    char *argv[] = {
        TT_BIN "/tvm-tracker", "--port", p, "--port-end", end, "--db", db, "--quiet", NULL};
    if (!tt_proc_start(&tracker, argv) ||
        !tt_proc_wait_line(&tracker, "listening on 127.0.0.1:", rest, sizeof(rest), 10))
        return false;
    tracker_port = atoi(rest);
    return true;
}

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) {
        in[i] = (float)i * 0.5f;
        expect[i] = in[i] * 2.0f;
    }
    snprintf(workdir, sizeof(workdir), "/tmp/tt-farm-XXXXXX");
    if (!mkdtemp(workdir))
        return -1;
    if (!start_tracker(0))
        return -1;
    for (int i = 0; i < 3; i++)
        if (!start_server(i))
            return -1;
    return wait_free("cpu", 2, 10) && wait_free("solo", 1, 10) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        if (servers[i].pid > 0)
            tt_proc_stop(&servers[i]);
    if (well.pid > 0)
        tt_proc_stop(&well);
    if (sick.pid > 0)
        tt_proc_stop(&sick);
    tt_proc_stop(&tracker);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", workdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs a tvm-tune command line; its exit code, and its stdout in out. */
static int tvm_tune(const char *args, char *out, size_t n)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune %s", TT_BIN, args);
    return tt_proc_output(cmd, out, n);
}

static void registration(void **state)
{
    (void)state;
    char text[1 << 14];
    summary(text, sizeof(text));
    /* every server's UPDATE_INFO, with what it is */
    assert_non_null(strstr(text, "\"key\": \"server:solo\""));
    char *first = strstr(text, "\"key\": \"server:cpu\"");
    assert_non_null(first);
    assert_non_null(strstr(first + 1, "\"key\": \"server:cpu\""));
    assert_non_null(strstr(text, "\"impl\": \"" TT_RPC_IMPL "\""));
    assert_non_null(strstr(text, "\"fingerprint\""));
    /* a TVM server under one of our keys is flagged in the device list */
    int tvm = tt_net_tracker(tracker_port);
    char reply[64], out[8192], args[128];
    assert_true(
        tt_net_send_frame(tvm, "[5, {\"key\": \"server:cpu\", \"addr\": [null, \"9091\"]}]"));
    assert_true(tt_net_recv_frame(tvm, reply, sizeof(reply)));
    snprintf(args, sizeof(args), "summary --devices --tracker 127.0.0.1:%d", tracker_port);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "127.0.0.1:9091         TVM server"));
    assert_non_null(strstr(out, "warning: key 'cpu' mixes 1 TVM server with 2 tvm-rpc-servers"));
    assert_non_null(strstr(out, "solo"));
    close(tvm);
}

/* REQUEST a ticket for `key` on a tracker connection of ours. */
static void request(int fd, const char *key, char *host, int *port, char *matchkey)
{
    char msg[128], reply[512];
    snprintf(msg, sizeof(msg), "[4, \"%s\", \"\", 0]", key);
    assert_true(tt_net_send_frame(fd, msg));
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_int_equal(sscanf(reply, "[0, [\"%63[^\"]\", %d, \"%255[^\"]\"]]", host, port, matchkey),
                     3);
}

static int handshake(int port, const char *key, uint8_t code[4])
{
    int fd = tt_net_rpc_handshake(port, key, code);
    assert_true(fd >= 0);
    return fd;
}

static void tvm_handshake(void **state)
{
    (void)state;
    int tfd = tt_net_tracker(tracker_port);
    char host[64], matchkey[256], key[512];
    int port;
    request(tfd, "solo", host, &port, matchkey);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, server_port[2]);
    /* a wrong matchkey: MISMATCH, and the ticket stays good */
    uint8_t code[4];
    int fd = handshake(port, "client:solo:forged -timeout=10", code);
    assert_int_equal(tt_get_le32(code), TT_RPC_MISMATCH);
    assert_true(tt_net_closed(fd));
    close(fd);
    /* the right one, from a TVM client (no protocol token): SUCCESS, then an error packet */
    snprintf(key, sizeof(key), "client:%s -timeout=10", matchkey);
    fd = handshake(port, key, code);
    assert_int_equal(tt_get_le32(code), TT_RPC_SUCCESS);
    uint8_t lb[4];
    char skey[64] = "";
    assert_true(tt_read_all(fd, lb, 4));
    assert_int_equal(tt_get_le32(lb), 11);
    assert_true(tt_read_all(fd, skey, 11));
    assert_memory_equal(skey, "server:solo", 11);
    /* TVM's init-server packet: 29 bytes */
    static const uint8_t init[29] = {21, 0, 0, 0, 0, 0,   0,   0,   2,   0,   0, 0, 5, 0, 0,
                                     0,  0, 0, 0, 0, '0', '.', '8', '.', '0', 0, 0, 0, 0};
    assert_true(tt_write_all(fd, init, sizeof(init)));
    uint8_t pkt[28];
    assert_true(tt_read_all(fd, pkt, 28));
    int32_t len = tt_get_le32(pkt + 20);
    assert_int_equal(tt_get_le32(pkt), 20 + len);
    assert_int_equal(tt_get_le32(pkt + 8), 5);   /* exception */
    assert_int_equal(tt_get_le32(pkt + 12), 1);  /* one argument */
    assert_int_equal(tt_get_le32(pkt + 16), 11); /* a string, TVM <= v0.20 */
    char text[512] = "";
    assert_true(len > 0 && len < (int32_t)sizeof(text));
    assert_true(tt_read_all(fd, text, (size_t)len));
    assert_non_null(strstr(text, "cannot run TVM RPC sessions"));
    assert_true(tt_net_closed(fd));
    close(fd);
    close(tfd);
    /* the used ticket is replaced: the device is free again */
    assert_true(wait_free("solo", 1, 5));
}

/* Opens and ends a session with the ticket: the server then PUTs a fresh one. */
static void use_ticket(int port, const char *matchkey)
{
    char key[512];
    uint8_t code[4];
    snprintf(key, sizeof(key), "client:%s %s", matchkey, TT_MPROTO_TOKEN);
    int fd = handshake(port, key, code);
    assert_int_equal(tt_get_le32(code), TT_RPC_SUCCESS);
    close(fd);
}

/* Requests waiting for one busy device are served by priority, FIFO among equals (TVM's rule):
 * priorities 1, 5, 3, 5 are served B, D, C, A, each as the previous session ends. */
static void priorities(void **state)
{
    (void)state;
    int holder = tt_net_tracker(tracker_port);
    char host[64], matchkey[256];
    int port;
    request(holder, "solo", host, &port, matchkey);
    int fds[4];
    static const int prio[4] = {1, 5, 3, 5};
    for (int i = 0; i < 4; i++) {
        fds[i] = tt_net_tracker(tracker_port);
        char msg[64];
        snprintf(msg, sizeof(msg), "[4, \"solo\", \"\", %d]", prio[i]);
        assert_true(tt_net_send_frame(fds[i], msg));
    }
    /* their REQUESTs are in before the device comes back */
    char text[1 << 14];
    for (int i = 0; i < 100; i++) {
        summary(text, sizeof(text));
        if (strstr(text, "\"solo\": {\"free\": 0, \"pending\": 4}"))
            break;
        usleep(20000);
    }
    assert_non_null(strstr(text, "\"solo\": {\"free\": 0, \"pending\": 4}"));
    static const int order[4] = {1, 3, 2, 0}; /* B, D, C, A */
    for (int k = 0; k < 4; k++) {
        use_ticket(port, matchkey);
        char reply[512];
        assert_true(tt_net_recv_frame(fds[order[k]], reply, sizeof(reply)));
        assert_int_equal(
            sscanf(reply, "[0, [\"%63[^\"]\", %d, \"%255[^\"]\"]]", host, &port, matchkey), 3);
    }
    use_ticket(port, matchkey);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    close(holder);
    assert_true(wait_free("solo", 1, 5));
}

static void abandoned_ticket_regenerated(void **state)
{
    (void)state;
    int tfd = tt_net_tracker(tracker_port);
    char host[64], matchkey[256];
    int port;
    request(tfd, "solo", host, &port, matchkey);
    close(tfd);
    assert_true(wait_free("solo", 0, 1));
    /* TVM's servers put a fresh ticket ~8 s after a hand-out nobody used (§8 step 5) */
    assert_true(wait_free("solo", 1, 15));
    assert_true(occurrences(2, "regenerate key") >= 1);
    /* the old ticket is dead */
    char key[512];
    uint8_t code[4];
    snprintf(key, sizeof(key), "client:%s %s", matchkey, TT_MPROTO_TOKEN);
    int fd = handshake(port, key, code);
    assert_int_equal(tt_get_le32(code), TT_RPC_MISMATCH);
    close(fd);
}

static tt_measure_result remote_measure(tt_remote *r, const char *entry, double timeout_s)
{
    tt_measure_buffer bufs[2] = {{TT_ELEM_F32, N, in, NULL, false, false},
                                 {TT_ELEM_F32, N, NULL, expect, false, false}};
    tt_measure_options o = {.number = 1, .repeat = 3, .timeout_s = timeout_s, .rtol = 1e-5};
    tt_measure_result res;
    tt_errbuf err = {{0}};
    tt_status st = tt_remote_measure(r, PLANTED_SO, entry, bufs, 2, 1, &o, &res, &err);
    if (st)
        fail_msg("%s: %s", entry, err.msg);
    return res;
}

static void measurement_protocol(void **state)
{
    (void)state;
    tt_remote_options o = {.tracker_host = "127.0.0.1",
                           .tracker_port = tracker_port,
                           .key = "solo",
                           .request_timeout_s = 20};
    tt_remote *r;
    tt_errbuf err = {{0}};
    double wait = -1;
    assert_int_equal(tt_remote_open(&o, &r, &wait, &err), TT_OK);
    assert_true(wait >= 0);
    assert_true(tt_remote_device(r)->fingerprint[0] != 0);
    assert_true(tt_remote_device(r)->cores >= 1);
    tt_measure_result res = remote_measure(r, "good", 10);
    assert_int_equal(res.error_no, 0);
    assert_int_equal(res.ncosts, 3);
    assert_true(res.costs[0] > 0);
    /* sick kernels are results, and the session goes on */
    assert_int_equal(remote_measure(r, "wrong", 10).error_no, 5);
    assert_int_equal(remote_measure(r, "crash", 10).error_no, 4);
    assert_int_equal(remote_measure(r, "hangs", 1).error_no, 7);
    /* the client asks for no memory limit; the device's --child-memory-mb applies anyway */
    assert_int_equal(remote_measure(r, "hogs", 30).error_no, 4);
    assert_int_equal(remote_measure(r, "good", 10).error_no, 0);
    /* A transient input (a weight packed for one candidate) is known by its contents, not its
     * address: the same buffer refilled is sent again (else the device would measure the old
     * contents against the new reference). */
    static float tin[N], texpect[2][N];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            tin[i] = (float)(i % 7) * (round ? -0.5f : 0.25f);
            texpect[round][i] = tin[i] * 2.0f;
        }
        tt_measure_buffer tb[2] = {{TT_ELEM_F32, N, tin, NULL, true, false},
                                   {TT_ELEM_F32, N, NULL, texpect[round], false, false}};
        tt_measure_options mo = {.number = 1, .repeat = 1, .timeout_s = 10, .rtol = 1e-5};
        assert_int_equal(tt_remote_measure(r, PLANTED_SO, "good", tb, 2, 1, &mo, &res, &err),
                         TT_OK);
        assert_int_equal(res.error_no, 0);
    }
    tt_remote_close(r);
    /* the server logs the session when it ends (after our bye) */
    for (int i = 0; i < 100 && occurrences(2, ": 8 measurements") == 0; i++)
        usleep(50000);
    /* eight kernels of one library, one input and one reference, then two transient inputs
     * with their references: seven artifacts */
    assert_int_equal(occurrences(2, ": 8 measurements, 7 artifacts received"), 1);

    /* hostile bytes after a good handshake: the server drops the session and stays up */
    int tfd = tt_net_tracker(tracker_port);
    char host[64], matchkey[256], key[512];
    int port;
    request(tfd, "solo", host, &port, matchkey);
    close(tfd);
    snprintf(key, sizeof(key), "client:%s %s", matchkey, TT_MPROTO_TOKEN);
    uint8_t code[4], skip[15];
    int fd = handshake(port, key, code);
    assert_int_equal(tt_get_le32(code), TT_RPC_SUCCESS);
    assert_true(tt_read_all(fd, skip, 4 + 11));
    static const uint8_t huge[16] = {'T', 'T', 'M', '1', 0xff, 0xff, 0xff, 0x7f};
    assert_true(tt_write_all(fd, huge, sizeof(huge)));
    assert_true(tt_net_closed(fd));
    close(fd);
    assert_true(wait_free("solo", 1, 5));
    assert_int_equal(tt_remote_open(&o, &r, NULL, &err), TT_OK);
    assert_int_equal(remote_measure(r, "good", 10).error_no, 0);
    tt_remote_close(r);
    /* the device kept the artifacts (content-named): nothing was sent again */
    for (int i = 0; i < 100 && occurrences(2, ": 1 measurements, 0 artifacts received") == 0; i++)
        usleep(50000);
    assert_int_equal(occurrences(2, ": 1 measurements, 0 artifacts received"), 1);
}

/* A count from `tvm-db stats --json` ("records", or "NO_ERROR" of the error table), of job `job`
 * (0: all records). */
static int db_count_of(const char *db, long long job, const char *what)
{
    char cmd[600], text[4096];
    snprintf(cmd, sizeof(cmd), "%s/tvm-db stats --db %s --job %lld --json", TT_BIN, db, job);
    if (!job)
        snprintf(cmd, sizeof(cmd), "%s/tvm-db stats --db %s --json", TT_BIN, db);
    assert_int_equal(tt_proc_output(cmd, text, sizeof(text)), 0);
    char pattern[64];
    snprintf(pattern, sizeof(pattern), "\"%s\": ", what);
    char *at = strstr(text, pattern);
    return at ? atoi(at + strlen(pattern)) : -1;
}

static int db_count(const char *db, const char *what)
{
    return db_count_of(db, 0, what);
}

/* Server s's log shows a session that has started and not ended. */
static bool in_session(int s)
{
    char *log = server_log(s);
    char *last = strstr(log, "session with");
    while (last && strstr(last + 1, "session with"))
        last = strstr(last + 1, "session with");
    bool open = last && !strstr(last, "measurements");
    free(log);
    return open;
}

static void device_dies_mid_run(void **state)
{
    (void)state;
    char db[300], tr[64];
    snprintf(db, sizeof(db), "%s/run.db", workdir);
    snprintf(tr, sizeof(tr), "127.0.0.1:%d", tracker_port);
    /* slow measurements (min-repeat-ms) so the kill lands inside a session */
    char *argv[] = {TT_BIN "/tvm-tune",
                    "run",
                    "--workload",
                    "matmul:M=32,N=32,K=32",
                    "--trials",
                    "16",
                    "--strategy",
                    "random",
                    "--target",
                    "llvm -num-cores=1",
                    "--tracker",
                    tr,
                    "--key",
                    "cpu",
                    "--min-repeat-ms",
                    "150",
                    "--repeat",
                    "3",
                    "--db",
                    db,
                    NULL};
    tt_proc run;
    assert_true(tt_proc_start(&run, argv));
    /* the first device to start a session dies in it: still in it 200 ms after the server
     * logged its start, so that the kill lands among the measurements (each takes 450 ms and
     * more) and not in the hello exchange, which the farm retries as a device that went away
     * during the handshake rather than counting a lost session (a race seen under ASan) */
    int victim = -1;
    for (int i = 0; i < 400 && victim < 0; i++) {
        int pending = -1;
        for (int s = 0; s < 2 && pending < 0; s++)
            if (in_session(s))
                pending = s;
        if (pending >= 0) {
            usleep(200000);
            if (in_session(pending))
                victim = pending;
        } else {
            usleep(25000);
        }
    }
    assert_true(victim >= 0);
    tt_proc_kill(&servers[victim]);
    char rest[256];
    assert_true(tt_proc_wait_line(&run, "farm: ", rest, sizeof(rest), 240));
    assert_int_equal(tt_proc_wait(&run, 30), 0);
    close(run.out);
    /* every trial recorded, none an error, the lost session measured again */
    int lost = -1;
    assert_int_equal(sscanf(rest, "%*f s waiting for devices, %d lost", &lost), 1);
    assert_true(lost >= 1);
    assert_int_equal(db_count(db, "records"), 16);
    assert_int_equal(db_count(db, "NO_ERROR"), 16);
    /* the tracker forgot the dead device */
    char text[1 << 14];
    summary(text, sizeof(text));
    char *first = strstr(text, "\"key\": \"server:cpu\"");
    assert_non_null(first);
    assert_null(strstr(first + 1, "\"key\": \"server:cpu\""));
}

/* A device that answers TVM's handshake and then closes the session before our hello: one that
 * died in that instant (its port refuses connections, or resets them as its listening socket
 * closes a moment after the session's) is a lost device, tried again elsewhere (TT_ERR_IO); one
 * that is alive is not a tvm-rpc-server, and no retry mends it (TT_ERR_PARSE).  A kill between
 * the server's "session with" and its hello once stopped device_dies_mid_run, twice: the second
 * time the killed server's session socket closed before its listening one. */
typedef enum { DEVICE_ALIVE, DEVICE_DEAD, DEVICE_DYING } closing_device;

static tt_status open_closing_device(closing_device how, tt_errbuf *err)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = accept(lfd, NULL, NULL);
        uint8_t h[8], key[512];
        uint32_t kl = 0;
        if (fd < 0 || !tt_read_all(fd, h, 8) || (kl = tt_get_le32(h + 4)) > sizeof(key) ||
            !tt_read_all(fd, key, kl))
            _exit(1);
        uint8_t reply[8 + 10];
        tt_put_le32(reply, TT_RPC_SUCCESS);
        tt_put_le32(reply + 4, 10);
        memcpy(reply + 8, "server:cpu", 10);
        tt_write_all(fd, reply, sizeof(reply));
        if (how == DEVICE_DEAD)
            close(lfd);
        close(fd);
        if (how == DEVICE_DYING) {
            usleep(100000); /* the client probes in between */
            close(lfd);
        }
        pause(); /* killed by the test */
        _exit(0);
    }
    close(lfd);
    tt_remote_options o = {.host = "127.0.0.1", .port = ntohs(a.sin_port), .key = "cpu"};
    tt_remote *r = NULL;
    tt_status st = tt_remote_open(&o, &r, NULL, err);
    assert_null(r);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return st;
}

static void device_gone_during_handshake(void **state)
{
    (void)state;
    tt_errbuf err;
    assert_int_equal(open_closing_device(DEVICE_DEAD, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "went away during the handshake"));
    assert_int_equal(open_closing_device(DEVICE_DYING, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "went away during the handshake"));
    assert_int_equal(open_closing_device(DEVICE_ALIVE, &err), TT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "(key server:cpu) is not a tvm-rpc-server"));
}

static void tracker_restarted_mid_run(void **state)
{
    (void)state;
    int alive = servers[0].pid > 0 ? 0 : 1;
    char db[300], tr[64];
    snprintf(db, sizeof(db), "%s/restart.db", workdir);
    snprintf(tr, sizeof(tr), "127.0.0.1:%d", tracker_port);
    char *argv[] = {TT_BIN "/tvm-tune",
                    "run",
                    "--workload",
                    "matmul:M=16,N=16,K=16",
                    "--target",
                    "llvm -num-cores=1",
                    "--trials",
                    "12",
                    "--strategy",
                    "random",
                    "--tracker",
                    tr,
                    "--key",
                    "cpu",
                    "--min-repeat-ms",
                    "100",
                    "--repeat",
                    "3",
                    "--db",
                    db,
                    NULL};
    int before = occurrences(alive, ": 4 measurements, ");
    tt_proc run;
    assert_true(tt_proc_start(&run, argv));
    char rest[256];
    for (int i = 0; i < 1200 && occurrences(alive, ": 4 measurements, ") < before + 1; i++)
        usleep(50000);
    assert_true(occurrences(alive, ": 4 measurements, ") >= before + 1);
    /* the tracker dies while the run measures, and comes back on the same port */
    tt_proc_kill(&tracker);
    close(tracker.out);
    usleep(1500000);
    assert_true(start_tracker(tracker_port));
    /* the servers register again by themselves, and the run finishes */
    assert_true(tt_proc_wait_line(&run, "farm: ", rest, sizeof(rest), 120));
    assert_int_equal(tt_proc_wait(&run, 30), 0);
    close(run.out);
    assert_int_equal(db_count(db, "records"), 12);
    assert_int_equal(db_count(db, "NO_ERROR"), 12);
    char *log = server_log(alive);
    assert_non_null(strstr(log, "lost the tracker"));
    free(log);
    assert_true(wait_free("solo", 1, 40));
}

static long long job_measured(long long id)
{
    char args[256], out[8192];
    snprintf(args, sizeof(args), "status --tracker 127.0.0.1:%d %lld --json", tracker_port, id);
    if (tvm_tune(args, out, sizeof(out)) != 0)
        return -1;
    char *at = strstr(out, "\"measured\": ");
    return at ? atoll(at + 12) : -1;
}

/* Submits a random-search job of `trials` on key cpu and waits until `started` are measured. */
static long long submit_running(const char *workload, int trials, int min_repeat_ms, int started)
{
    char args[1024], out[8192];
    snprintf(args, sizeof(args),
             "submit --tracker 127.0.0.1:%d --key cpu --workload %s --trials %d --strategy random "
             "--min-repeat-ms %d --repeat 2 " ONE_CORE,
             tracker_port, workload, trials, min_repeat_ms);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    long long id = 0;
    assert_int_equal(sscanf(out, "job %lld submitted", &id), 1);
    for (int i = 0; i < 600 && job_measured(id) < started; i++)
        usleep(50000);
    assert_true(job_measured(id) >= started);
    return id;
}

/* Records of job `id` in the farm's database (the tracker may be down). */
static int job_records(long long id)
{
    char db[300];
    snprintf(db, sizeof(db), "%s/farm.db", workdir);
    return db_count_of(db, id, "records");
}

static void jobs(void **state)
{
    (void)state;
    char args[1024], out[8192];
    /* a job with a bad parameter is refused with the reason */
    snprintf(args, sizeof(args),
             "submit --tracker 127.0.0.1:%d --key 'a:b' --workload matmul:M=8,N=8,K=8 2>&1",
             tracker_port);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "\"key\" must name the device key"));

    /* a job runs to the end on the farm, every measurement recorded with its id */
    snprintf(args, sizeof(args),
             "submit --tracker 127.0.0.1:%d --key cpu --workload matmul:M=16,N=16,K=16 "
             "--workload matmul:M=8,N=8,K=8 --trials 8 --strategy random --repeat 2 "
             "--cache-flush=network --watch " ONE_CORE,
             tracker_port);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    long long id = 0;
    assert_int_equal(sscanf(out, "job %lld submitted", &id), 1);
    assert_non_null(strstr(out, "done: 16/16 measured"));
    assert_int_equal(job_measured(id), 16);
    /* the flush mode is part of the job (devices evict matmul's B and the product before each
     * call and write A again) */
    snprintf(args, sizeof(args), "status --tracker 127.0.0.1:%d %lld --json", tracker_port, id);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"cache_flush\": \"network\""));
    snprintf(args, sizeof(args),
             "submit --tracker 127.0.0.1:%d --key cpu --workload matmul:M=8,N=8,K=8 "
             "--cache-flush=weights 2>&1",
             tracker_port);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 2);
    assert_non_null(
        strstr(out, "--cache-flush takes inputs, constants, network or off, got 'weights'"));
    /* on a terminal, watch draws a bar in place (script gives it a pseudo-terminal) */
    if (system("command -v script > /dev/null") == 0) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd),
                 "script -qec '%s/tvm-tune watch --tracker 127.0.0.1:%d %lld' /dev/null", TT_BIN,
                 tracker_port, id);
        tt_proc_output(cmd, out, sizeof(out));
        assert_non_null(strstr(out, "\rjob "));
        assert_non_null(strstr(out, "[##############################] 16/16"));
    }

    /* a long job: cancelled while it runs */
    long long long_id = submit_running("matmul:M=24,N=24,K=24", 500, 50, 1);
    snprintf(args, sizeof(args), "cancel --tracker 127.0.0.1:%d %lld", tracker_port, long_id);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    snprintf(args, sizeof(args), "watch --tracker 127.0.0.1:%d %lld --interval 0.2", tracker_port,
             long_id);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 3);
    assert_non_null(strstr(out, "cancelled"));
    long long kept = job_measured(long_id);
    assert_true(kept >= 1 && kept < 500);

    /* a job survives the daemon: killed mid-job, started again, it resumes and finishes
     * without measuring anything twice */
    long long resumed = submit_running("matmul:M=20,N=20,K=20", 24, 40, 4);
    long long before = job_measured(resumed);
    assert_true(before >= 4 && before < 24);
    tt_proc_kill(&tracker);
    close(tracker.out);
    assert_true(start_tracker(tracker_port));
    snprintf(args, sizeof(args), "watch --tracker 127.0.0.1:%d %lld --interval 0.2", tracker_port,
             resumed);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    assert_int_equal(job_measured(resumed), 24);
    /* SIGTERM drains: the daemon stops promptly with status 0, the job's measurements are all
     * kept, and after a restart it finishes with exactly its trials (nothing measured twice) */
    long long drained = submit_running("matmul:M=28,N=28,K=28", 24, 40, 4);
    double t0 = tt_clock_monotonic();
    assert_int_equal(tt_proc_stop(&tracker), 0);
    assert_true(tt_clock_monotonic() - t0 < 30);
    int at_stop = job_records(drained);
    assert_true(at_stop >= 4 && at_stop < 24);
    assert_true(start_tracker(tracker_port));
    snprintf(args, sizeof(args), "watch --tracker 127.0.0.1:%d %lld --interval 0.2", tracker_port,
             drained);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    assert_int_equal(job_measured(drained), 24);
    assert_int_equal(job_records(drained), 24);
    char db[300];
    snprintf(db, sizeof(db), "%s/farm.db", workdir);
    assert_int_equal(db_count(db, "NO_ERROR"), db_count(db, "records"));
    assert_true(wait_free("cpu", 2, 40));
}

/* Two devices of a new key, one well and one sick (`flag`: every kernel "crashes", or every
 * answer is wrong): a run finds the sick one by the canary, reports and leaves it, and every
 * candidate is measured error-free on the well one. */
static void check_sick_device(const char *key, const char *flag, const char *why, int min_suspect,
                              int max_suspect)
{
    char tr[64], cache[2][300], rest[64], db[300], out[8192];
    snprintf(tr, sizeof(tr), "127.0.0.1:%d", tracker_port);
    for (int i = 0; i < 2; i++)
        snprintf(cache[i], sizeof(cache[i]), "%s/%s%d", workdir, key, i);
    char *wargv[] = {TT_BIN "/tvm-rpc-server",
                     "--tracker",
                     tr,
                     "--key",
                     (char *)key,
                     "--port",
                     "0",
                     "--cache",
                     cache[0],
                     "--quiet",
                     NULL};
    char *sargv[] = {TT_BIN "/tvm-rpc-server",
                     "--tracker",
                     tr,
                     "--key",
                     (char *)key,
                     "--port",
                     "0",
                     "--cache",
                     cache[1],
                     "--quiet",
                     (char *)flag,
                     NULL};
    assert_true(tt_proc_start(&sick, sargv));
    assert_true(tt_proc_wait_line(&sick, "listening on", rest, sizeof(rest), 10));
    assert_true(wait_free(key, 1, 10));
    assert_true(tt_proc_start(&well, wargv));
    assert_true(tt_proc_wait_line(&well, "listening on", rest, sizeof(rest), 10));
    assert_true(wait_free(key, 2, 10));
    snprintf(db, sizeof(db), "%s/%s.db", workdir, key);
    char args[1024], devices[8192], text[1 << 14], want[200];
    snprintf(args, sizeof(args),
             "run --tracker %s --key %s --workload matmul:M=12,N=12,K=12 --trials 12 "
             "--strategy random --repeat 2 --db %s " ONE_CORE " 2>&1",
             tr, key, db);
    /* everything is gathered before the devices stop, and checked after: a failed check must
     * not leave them running */
    int rc = tvm_tune(args, out, sizeof(out));
    summary(text, sizeof(text));
    snprintf(args, sizeof(args), "summary --devices --tracker %s", tr);
    int drc = tvm_tune(args, devices, sizeof(devices));
    tt_proc_stop(&well);
    tt_proc_stop(&sick);
    assert_int_equal(rc, 0);
    /* the sick device was found and left; its candidates were measured on the well one */
    assert_non_null(strstr(out, "1 sick devices left"));
    assert_int_equal(db_count(db, "records"), 12);
    assert_int_equal(db_count(db, "NO_ERROR"), 12);
    /* what it measured before it was found out is marked, and left out of the best */
    int suspect = db_count(db, "suspect");
    assert_in_range(suspect, min_suspect, max_suspect);
    snprintf(want, sizeof(want), "its %d earlier records of this run are marked suspect", suspect);
    assert_non_null(strstr(out, want));
    snprintf(want, sizeof(want),
             "\"quarantined\": \"the canary (naive schedule) fails there too: %s", why);
    assert_non_null(strstr(text, want));
    assert_int_equal(drc, 0);
    assert_non_null(strstr(devices, "quarantined: the canary (naive schedule) fails"));
    assert_non_null(strstr(devices, TT_RPC_IMPL));
}

/* A tracker whose database reaches its cap (--db-max-mb, as a full disk would): the job fails
 * and says why, every record stored before is intact, and the tracker goes on serving. */
static void tracker_database_full(void **state)
{
    (void)state;
    char db[300], cache[300], tr[64], rest[128], args[1024], out[8192], status[8192];
    snprintf(db, sizeof(db), "%s/capped.db", workdir);
    snprintf(cache, sizeof(cache), "%s/capped-cache", workdir);
    tt_proc capped, dev;
    char *targv[] = {TT_BIN "/tvm-tracker", "--port", "0",       "--db", db,
                     "--db-max-mb",         "0.08",   "--quiet", NULL};
    assert_true(tt_proc_start(&capped, targv));
    bool up = tt_proc_wait_line(&capped, "listening on 127.0.0.1:", rest, sizeof(rest), 10);
    snprintf(tr, sizeof(tr), "127.0.0.1:%d", atoi(rest));
    char *sargv[] = {TT_BIN "/tvm-rpc-server",
                     "--tracker",
                     tr,
                     "--key",
                     "capped",
                     "--port",
                     "0",
                     "--cache",
                     cache,
                     "--quiet",
                     "--no-opencl",
                     NULL};
    up = up && tt_proc_start(&dev, sargv) &&
         tt_proc_wait_line(&dev, "listening on", rest, sizeof(rest), 10);
    int watch_rc = -2, status_rc = -2, summary_rc = -2;
    long long id = 0;
    if (up) {
        snprintf(args, sizeof(args),
                 "submit --tracker %s --key capped --workload matmul:M=32,N=32,K=32 --trials 200 "
                 "--strategy random --repeat 1 --min-repeat-ms 1 " ONE_CORE,
                 tr);
        if (tvm_tune(args, out, sizeof(out)) == 0 && sscanf(out, "job %lld", &id) == 1) {
            snprintf(args, sizeof(args), "watch --tracker %s %lld --interval 0.2", tr, id);
            watch_rc = tvm_tune(args, out, sizeof(out));
            snprintf(args, sizeof(args), "status --tracker %s %lld --json", tr, id);
            status_rc = tvm_tune(args, status, sizeof(status));
            snprintf(args, sizeof(args), "summary --tracker %s", tr);
            summary_rc = tvm_tune(args, out, sizeof(out));
        }
    }
    tt_proc_stop(&dev);
    tt_proc_stop(&capped);
    assert_true(up);
    assert_true(id > 0);
    assert_int_equal(watch_rc, 1); /* failed */
    assert_int_equal(status_rc, 0);
    assert_non_null(strstr(status, "\"state\": \"failed\""));
    assert_non_null(strstr(status, "full"));
    assert_int_equal(summary_rc, 0); /* still serving after the job failed */
    int kept = db_count_of(db, id, "records");
    assert_in_range(kept, 1, 199);
    char cmd[600], text[512];
    snprintf(cmd, sizeof(cmd), "%s/tvm-db check --db %s", TT_BIN, db);
    assert_int_equal(tt_proc_output(cmd, text, sizeof(text)), 0);
    assert_non_null(strstr(text, ": ok"));
}

static void sick_device_quarantined(void **state)
{
    (void)state;
    check_sick_device("flaky", "--inject-faults", "injected fault", 0, 0);
}

/* A device that computes wrong answers is found the same way (its wrong results are measured
 * again elsewhere, so none is stored). */
static void lying_device_quarantined(void **state)
{
    (void)state;
    check_sick_device("liar", "--inject-faults=wrong", "injected wrong answer", 0, 0);
}

/* A device that measures honestly for a while and then lies: found at its first lie, and the
 * records it measured before are marked suspect (the database keeps them, best queries skip
 * them). */
static void device_turning_liar_marks_its_records(void **state)
{
    (void)state;
    check_sick_device("turncoat", "--inject-faults=wrong@3", "injected wrong answer", 1, 3);
}

/* GPUs on the farm: a server reports its OpenCL devices, and an OpenCL tuning run searches here,
 * sends OpenCL artifacts, and the server's driver builds and measures them; a key whose server
 * has no OpenCL device is refused before anything is compiled. */
static void opencl_tuning_on_the_farm(void **state)
{
    (void)state;
    char tr[64], cache[2][300], rest[64], db[300], out[8192];
    snprintf(tr, sizeof(tr), "127.0.0.1:%d", tracker_port);
    for (int i = 0; i < 2; i++)
        snprintf(cache[i], sizeof(cache[i]), "%s/cl%d", workdir, i);
    char *gargv[] = {TT_BIN "/tvm-rpc-server",
                     "--tracker",
                     tr,
                     "--key",
                     "gpu",
                     "--port",
                     "0",
                     "--cache",
                     cache[0],
                     "--quiet",
                     NULL};
    char *nargv[] = {TT_BIN "/tvm-rpc-server",
                     "--tracker",
                     tr,
                     "--key",
                     "nocl",
                     "--port",
                     "0",
                     "--cache",
                     cache[1],
                     "--quiet",
                     "--no-opencl",
                     NULL};
    assert_true(tt_proc_start(&well, gargv));
    assert_true(tt_proc_wait_line(&well, "listening on", rest, sizeof(rest), 20));
    assert_true(tt_proc_start(&sick, nargv));
    assert_true(tt_proc_wait_line(&sick, "listening on", rest, sizeof(rest), 20));
    assert_true(wait_free("gpu", 1, 10) && wait_free("nocl", 1, 10));
    char text[1 << 14];
    summary(text, sizeof(text));
    bool have_cl = strstr(text, "\"opencl\": [") != NULL;
    if (!have_cl) {
        tt_proc_stop(&well);
        tt_proc_stop(&sick);
        skip(); /* no OpenCL driver on this machine */
    }
    assert_non_null(strstr(text, "\"opencl_fingerprint\""));
    snprintf(db, sizeof(db), "%s/cl.db", workdir);
    char args[1024];
    snprintf(args, sizeof(args),
             "run --tracker %s --key nocl --target opencl --workload matmul:M=32,N=32,K=32 "
             "--trials 4 --db %s 2>&1",
             tr, db);
    assert_int_not_equal(tvm_tune(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "has no OpenCL device"));
    snprintf(args, sizeof(args),
             "run --tracker %s --key gpu --target opencl --workload matmul:M=32,N=32,K=32 "
             "--trials 8 --strategy evo --population 64 --repeat 2 --db %s",
             tr, db);
    assert_int_equal(tvm_tune(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "x the naive schedule"));
    assert_int_equal(db_count(db, "records"), 8);
    assert_int_equal(db_count(db, "NO_ERROR"), 8);
    tt_proc_stop(&well);
    tt_proc_stop(&sick);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registration),
        cmocka_unit_test(jobs),
        cmocka_unit_test(tvm_handshake),
        cmocka_unit_test(priorities),
        cmocka_unit_test(abandoned_ticket_regenerated),
        cmocka_unit_test(measurement_protocol),
        cmocka_unit_test(device_dies_mid_run),
        cmocka_unit_test(device_gone_during_handshake),
        cmocka_unit_test(tracker_restarted_mid_run),
        cmocka_unit_test(sick_device_quarantined),
        cmocka_unit_test(lying_device_quarantined),
        cmocka_unit_test(device_turning_liar_marks_its_records),
        cmocka_unit_test(tracker_database_full),
        cmocka_unit_test(opencl_tuning_on_the_farm),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
