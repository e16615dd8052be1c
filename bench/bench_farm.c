/* The farm's costs, with anchors measured in the same run:
 *
 *  1. tracker throughput: PING, SUMMARY and REQUEST round trips per second from 16 connections
 *     with 1,000 registered slots, against raw TCP round trips on loopback (an echo thread);
 *  2. per-measurement overhead of the farm path (tracker, handshake, artifacts, protocol) against
 *     the local sandbox on the same kernels (naive matmul 64 and 256);
 *  3. device utilisation of a job on two servers (fraction of the job's wall time its devices
 *     spend measuring), against the same search measured locally.
 *
 * usage: bench_farm [BIN_DIR]   (default: ../bin beside this executable's folder) */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "db/db.h"
#include "base/io.h"
#include "net/proc.h"
#include "rpc/auth.h"
#include "rpc/remote.h"
#include "schedule/schedule.h"

#define CONNS 16

static char bin[512], work[64];

/* ---- 1. tracker throughput ---- */

typedef struct {
    int port;
    const char *msg;
    double seconds;
    long done;
    bool raw; /* the anchor: 4-byte pings to the echo thread */
} loop_arg;

static void *client_loop(void *p)
{
    loop_arg *a = p;
    int fd = a->raw ? tt_net_connect(a->port) : tt_net_tracker(a->port);
    if (fd < 0)
        return NULL;
    char *reply = malloc(1 << 20);
    double end = tt_clock_monotonic() + a->seconds;
    while (reply && tt_clock_monotonic() < end) {
        bool ok = a->raw ? tt_write_all(fd, "ping", 4) && tt_read_all(fd, reply, 4)
                         : tt_net_send_frame(fd, a->msg) && tt_net_recv_frame(fd, reply, 1 << 20);
        if (!ok)
            break;
        a->done++;
    }
    free(reply);
    close(fd);
    return NULL;
}

static double rate(int port, const char *msg, bool raw, double seconds)
{
    pthread_t th[CONNS];
    loop_arg args[CONNS];
    for (int i = 0; i < CONNS; i++) {
        args[i] = (loop_arg){port, msg, seconds, 0, raw};
        pthread_create(&th[i], NULL, client_loop, &args[i]);
    }
    long total = 0;
    for (int i = 0; i < CONNS; i++) {
        pthread_join(th[i], NULL);
        total += args[i].done;
    }
    return (double)total / seconds;
}

static void *echo_conn(void *p)
{
    int fd = (int)(intptr_t)p;
    char b[4];
    while (tt_read_all(fd, b, 4) && tt_write_all(fd, b, 4)) {
    }
    close(fd);
    return NULL;
}

static void *echo_server(void *p)
{
    int ls = (int)(intptr_t)p;
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            return NULL;
        pthread_t t;
        pthread_create(&t, NULL, echo_conn, (void *)(intptr_t)fd);
        pthread_detach(t);
    }
}

static int start_echo(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 64) ||
        getsockname(ls, (struct sockaddr *)&a, &len))
        return -1;
    pthread_t t;
    pthread_create(&t, NULL, echo_server, (void *)(intptr_t)ls);
    pthread_detach(t);
    return ntohs(a.sin_port);
}

static bool start(tt_proc *p, char **argv, const char *marker, int *port)
{
    char rest[128];
    if (!tt_proc_start(p, argv) || !tt_proc_wait_line(p, marker, rest, sizeof(rest), 20))
        return false;
    *port = atoi(rest);
    return *port > 0;
}

static void tracker_throughput(void)
{
    char exe[600];
    snprintf(exe, sizeof(exe), "%s/tvm-tracker", bin);
    char *argv[] = {exe, "--port", "0", "--no-jobs", "--quiet", NULL};
    tt_proc tr;
    int port;
    if (!start(&tr, argv, "listening on 127.0.0.1:", &port)) {
        fprintf(stderr, "bench_farm: cannot start %s\n", exe);
        exit(1);
    }
    /* 1,000 free slots on 50 server connections, 10 keys */
    int servers[50];
    char msg[256], reply[256];
    for (int s = 0; s < 50; s++) {
        servers[s] = tt_net_tracker(port);
        snprintf(msg, sizeof(msg), "[5, {\"key\": \"server:k%d\", \"addr\": [null, %d]}]", s % 10,
                 9000 + s);
        tt_net_send_frame(servers[s], msg);
        tt_net_recv_frame(servers[s], reply, sizeof(reply));
        for (int k = 0; k < 20; k++) {
            snprintf(msg, sizeof(msg), "[3, \"k%d\", [%d, \"k%d:%d.%d\"], null]", s % 10, 9000 + s,
                     s % 10, s, k);
            tt_net_send_frame(servers[s], msg);
            tt_net_recv_frame(servers[s], reply, sizeof(reply));
        }
    }
    int eport = start_echo();
    double raw = rate(eport, NULL, true, 2);
    double ping = rate(port, "[1]", false, 2);
    double summary = rate(port, "[6]", false, 2);
    /* REQUEST: 1,000 hand-outs from one connection, timed */
    int c = tt_net_tracker(port);
    double t0 = tt_clock_monotonic();
    int served = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(msg, sizeof(msg), "[4, \"k%d\", \"\", 0]", i % 10);
        if (tt_net_send_frame(c, msg) && tt_net_recv_frame(c, reply, sizeof(reply)))
            served++;
    }
    double req = served / (tt_clock_monotonic() - t0);
    close(c);
    printf("1. tracker throughput, %d connections, 1000 registered slots (2 cores)\n", CONNS);
    printf("   raw TCP round trips (anchor)   %10.0f /s\n", raw);
    printf("   PING                           %10.0f /s   %.2fx the anchor\n", ping, ping / raw);
    printf("   SUMMARY (50 servers, 10 keys)  %10.0f /s   %.2fx\n", summary, summary / raw);
    printf("   REQUEST served (1 connection)  %10.0f /s   (%d of 1000 hand-outs)\n", req, served);
    for (int s = 0; s < 50; s++)
        close(servers[s]);
    tt_proc_stop(&tr);
}

/* ---- 2. per-measurement overhead ---- */

typedef struct {
    int nbufs, ninputs;
    void *data[8];
    tt_measure_buffer bufs[8];
    char so[256];
} kernel;

static bool build_kernel(const char *wtext, kernel *k)
{
    tt_errbuf err = {{0}};
    tt_workload *w;
    tt_state *st;
    tt_program *prog;
    tt_target t;
    if (tt_workload_parse(wtext, &w, &err) || tt_target_parse("llvm", &t, &err) ||
        tt_state_create(&w->dag, &st, &err) || tt_lower(st, &prog, &err)) {
        fprintf(stderr, "bench_farm: %s\n", err.msg);
        return false;
    }
    snprintf(k->so, sizeof(k->so), "%s/%s.so", work, strchr(wtext, '=') + 1);
    bool ok = !tt_codegen_llvm(prog, &t, "kernel", k->so, NULL, NULL, &err);
    int params[8];
    k->nbufs = tt_dag_params(&w->dag, params, 8, &k->ninputs);
    for (int i = 0; i < k->nbufs; i++) {
        const tt_op *op = &w->dag.ops.data[params[i]];
        k->data[i] = calloc((size_t)tt_op_numel(op), 4);
        k->bufs[i] = (tt_measure_buffer){
            TT_ELEM_F32, tt_op_numel(op), i < k->ninputs ? k->data[i] : NULL, NULL, false, false};
    }
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
    return ok;
}

/* Per-measurement time of the farm path for the two kernels, with the farm key (key_file) or
 * without (NULL); printed against the local sandbox when `print`. */
static void overhead(const char *key_file, bool print, double farm_s[2])
{
    char tr_exe[600], srv_exe[600], tport[32], cache[128];
    snprintf(tr_exe, sizeof(tr_exe), "%s/tvm-tracker", bin);
    snprintf(srv_exe, sizeof(srv_exe), "%s/tvm-rpc-server", bin);
    tt_auth_keyring ring = {0};
    tt_errbuf kerr = {{0}};
    if (key_file && tt_auth_load(key_file, &ring, &kerr)) {
        fprintf(stderr, "bench_farm: %s\n", kerr.msg);
        exit(1);
    }
    char *kf = (char *)(key_file ? key_file : "");
    char *targv[] = {tr_exe, "--port", "0", "--no-jobs", "--quiet", "--auth-key-file", kf, NULL};
    if (!key_file)
        targv[5] = NULL;
    tt_proc tr, sv;
    int port, sport;
    if (!start(&tr, targv, "listening on 127.0.0.1:", &port))
        exit(1);
    snprintf(tport, sizeof(tport), "127.0.0.1:%d", port);
    snprintf(cache, sizeof(cache), "%s/cache", work);
    snprintf(cache, sizeof(cache), "%s/cache%s", work, key_file ? "-key" : "");
    char *sargv[] = {srv_exe,     "--tracker",       tport, "--key",   "bench",       "--port",
                     "0",         "--cache",         cache, "--quiet", "--no-opencl", "--host",
                     "127.0.0.1", "--auth-key-file", kf,    NULL};
    if (!key_file)
        sargv[13] = NULL;
    if (!start(&sv, sargv, "listening on 127.0.0.1:", &sport))
        exit(1);
    usleep(500000); /* registered */
    if (print)
        printf("\n2. per-measurement overhead, farm path vs the local sandbox (20 measurements "
               "each,\n   repeat 3, number 1; one session per batch of 4 as tvm-tune run --tracker "
               "does)\n");
    const char *ws[] = {"matmul:M=64,N=64,K=64", "matmul:M=256,N=256,K=256"};
    for (int w = 0; w < 2; w++) {
        kernel k;
        memset(&k, 0, sizeof(k));
        if (!build_kernel(ws[w], &k))
            exit(1);
        tt_measure_options mo = {.number = 1, .repeat = 3, .timeout_s = 30};
        tt_measure_result res;
        tt_errbuf err = {{0}};
        double t0 = tt_clock_monotonic(), kernel_s = 0;
        for (int i = 0; i < 20; i++) {
            tt_measure_run(k.so, "kernel", k.bufs, k.nbufs, k.ninputs, &mo, &res, &err);
            kernel_s = res.costs[0];
        }
        double local = (tt_clock_monotonic() - t0) / 20;
        tt_remote_options ro = {.tracker_host = "127.0.0.1",
                                .tracker_port = port,
                                .key = "bench",
                                .request_timeout_s = 30,
                                .auth = key_file ? &ring : NULL};
        t0 = tt_clock_monotonic();
        double open_s = 0;
        for (int b = 0; b < 5; b++) {
            double o0 = tt_clock_monotonic();
            tt_remote *r;
            if (tt_remote_open(&ro, &r, NULL, &err)) {
                fprintf(stderr, "bench_farm: %s\n", err.msg);
                exit(1);
            }
            open_s += tt_clock_monotonic() - o0;
            for (int i = 0; i < 4; i++)
                if (tt_remote_measure(r, k.so, "kernel", k.bufs, k.nbufs, k.ninputs, &mo, &res,
                                      &err))
                    fprintf(stderr, "bench_farm: %s\n", err.msg);
            tt_remote_close(r);
        }
        double farm = (tt_clock_monotonic() - t0) / 20;
        farm_s[w] = farm;
        if (print)
            printf("   %-26s kernel %8.3f ms  local %7.2f ms  farm %7.2f ms  overhead %+6.2f ms "
                   "(%.2fx; session open %.2f ms)\n",
                   ws[w], kernel_s * 1e3, local * 1e3, farm * 1e3, (farm - local) * 1e3,
                   farm / local, open_s / 5 * 1e3);
        unlink(k.so);
        for (int i = 0; i < k.nbufs; i++)
            free(k.data[i]);
    }
    tt_proc_stop(&sv);
    tt_proc_stop(&tr);
}

/* The farm key's cost: the same farm path with every peer proving the key and every
 * measurement message MAC'ed, against the unauthenticated run above. */
static void auth_cost(const double plain[2], double keyed[2])
{
    char key[128], cmd[700], out[256];
    snprintf(key, sizeof(key), "%s/farm.key", work);
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune keygen %s", bin, key);
    if (tt_proc_output(cmd, out, sizeof(out))) {
        fprintf(stderr, "bench_farm: %s failed\n", cmd);
        exit(1);
    }
    overhead(key, false, keyed);
    printf("\n   with the farm key (proofs at connect, a MAC on every message), against the same "
           "path without:\n");
    const char *ws[] = {"matmul:M=64,N=64,K=64", "matmul:M=256,N=256,K=256"};
    for (int w = 0; w < 2; w++)
        printf("   %-26s farm %7.2f ms  with the key %7.2f ms  (%+.2f ms, %.3fx)\n", ws[w],
               plain[w] * 1e3, keyed[w] * 1e3, (keyed[w] - plain[w]) * 1e3, keyed[w] / plain[w]);
}

/* ---- 3. utilisation ---- */

typedef struct {
    double run_s, first, last;
    long n;
} busy;

static int add_busy(void *ctx, const tt_db_row *row)
{
    busy *b = ctx;
    b->run_s += row->run_s;
    if (!b->n || row->timestamp < b->first)
        b->first = row->timestamp;
    if (row->timestamp > b->last)
        b->last = row->timestamp;
    b->n++;
    return 0;
}

static double system_wall(const char *cmd)
{
    double t0 = tt_clock_monotonic();
    if (system(cmd) != 0)
        fprintf(stderr, "bench_farm: failed: %s\n", cmd);
    return tt_clock_monotonic() - t0;
}

static busy db_busy(const char *path)
{
    busy b = {0};
    tt_db *db;
    tt_errbuf err;
    if (!tt_db_open(path, 0, &db, &err)) {
        tt_db_filter f = {0};
        tt_db_history(db, &f, add_busy, &b);
        tt_db_close(db);
    }
    return b;
}

static void utilisation(void)
{
    const char *search = "--workload matmul:M=128,N=128,K=128 --trials 48 --strategy random "
                         "--target 'llvm -num-cores=1' --repeat 3 --min-repeat-ms 30";
    char cmd[2048], db[128];
    snprintf(db, sizeof(db), "%s/local.db", work);
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune run %s --db %s > /dev/null 2>&1", bin, search, db);
    double local_wall = system_wall(cmd);
    busy lb = db_busy(db);

    char tr_exe[600], srv_exe[600], tport[32], fdb[128], cache[2][128];
    snprintf(tr_exe, sizeof(tr_exe), "%s/tvm-tracker", bin);
    snprintf(srv_exe, sizeof(srv_exe), "%s/tvm-rpc-server", bin);
    snprintf(fdb, sizeof(fdb), "%s/farm.db", work);
    char *targv[] = {tr_exe, "--port", "0", "--db", fdb, "--quiet", NULL};
    tt_proc tr, sv[2];
    int port, sport;
    if (!start(&tr, targv, "listening on 127.0.0.1:", &port))
        exit(1);
    snprintf(tport, sizeof(tport), "127.0.0.1:%d", port);
    for (int i = 0; i < 2; i++) {
        snprintf(cache[i], sizeof(cache[i]), "%s/c%d", work, i);
        char *sargv[] = {srv_exe, "--tracker", tport,    "--key",   "util", "--port",
                         "0",     "--cache",   cache[i], "--quiet", NULL};
        if (!start(&sv[i], sargv, "listening on 127.0.0.1:", &sport))
            exit(1);
    }
    usleep(500000);
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune submit --tracker %s --key util %s --watch > /dev/null",
             bin, tport, search);
    double job_wall = system_wall(cmd);
    busy fb = db_busy(fdb);
    printf("\n3. device utilisation: 48 one-core matmul 128 candidates, random search\n");
    printf("   local run (anchor): %5.1f s, sandbox busy %5.1f s = %3.0f%% of the run\n",
           local_wall, lb.run_s, 100 * lb.run_s / local_wall);
    printf("   job on 2 servers:   %5.1f s, devices busy %5.1f s = %3.0f%% of 2 x the job "
           "(%.2fx the local run's wall time)\n",
           job_wall, fb.run_s, 100 * fb.run_s / (2 * job_wall), job_wall / local_wall);
    for (int i = 0; i < 2; i++)
        tt_proc_stop(&sv[i]);
    tt_proc_stop(&tr);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        snprintf(bin, sizeof(bin), "%s", argv[1]);
    } else {
        char self[512];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        self[n > 0 ? n : 0] = 0;
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = 0;
        snprintf(bin, sizeof(bin), "%.400s/../bin", self);
    }
    snprintf(work, sizeof(work), "/tmp/bench-farm-XXXXXX");
    if (!mkdtemp(work))
        return 1;
    tracker_throughput();
    double plain[2], keyed[2];
    overhead(NULL, true, plain);
    auth_cost(plain, keyed);
    utilisation();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", work);
    return system(cmd) == 0 ? 0 : 1;
}
