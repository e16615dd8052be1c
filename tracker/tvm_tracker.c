/* tvm-tracker: Apache TVM's RPC tracker, wire-compatible (docs/tracker.md). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rpc/auth.h"
#include "../rpc/tracker_proto.h"
#include "server.h"

static void usage(FILE *f)
{
    fprintf(
        f, "usage: tvm-tracker [--host H] [--port P] [--port-end E] [--db PATH] [--no-jobs]\n"
           "                   [--job-workers N] [--stop-key K] [--max-conns-per-peer N]\n"
           "                   [--max-pending N] [--max-jobs-per-peer N]\n"
           "                   [--auth-key-file F [--allow-tvm] | --insecure]\n"
           "                   [--http-port P [--http-host H]] [--quiet]\n"
           "\n"
           "Apache TVM's RPC tracker, wire-compatible: TVM's servers, clients and\n"
           "query_rpc_tracker work against it unchanged (docs/tracker.md).  It also runs\n"
           "tuning jobs (tvm-tune submit): the search runs here, candidates are measured on\n"
           "the farm's devices of the job's key, every measurement is stored in the database\n"
           "as it arrives, and unfinished jobs resume when the tracker starts again.\n"
           "  --host H       address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)\n"
           "  --port P       first port to try (default 9190; 0 lets the system choose)\n"
           "  --port-end E   ports P up to E-1 are tried in turn (default 9199)\n"
           "  --db PATH      the farm database: jobs and their measurements (default\n"
           "                 ./farm.db; tvm-db reads it), or postgresql://[user@]host/db to\n"
           "                 share one PostgreSQL database with other trackers (docs/database.md)\n"
           "  --name N       this tracker's jobs in a shared database (default HOSTNAME:PORT):\n"
           "                 it resumes only the jobs of its name after a restart\n"
           "  --no-jobs      only the tracker protocol: no database, no jobs\n"
           "  --job-workers N  jobs run at once (default 2); more wait in the queue\n"
           "  --max-conns-per-peer N  connections one address may hold (default 1024);\n"
           "                 more are closed at once, with a log line\n"
           "  --max-pending N waiting REQUESTs per connection (default 64); one more is\n"
           "                 answered [-1, \"too many pending requests ...\"]\n"
           "  --max-jobs-per-peer N  jobs one address may have queued or running (default\n"
           "                 16); one more submission is refused with the reason\n"
           "  --stop-key K   the secret a STOP message must carry; without it STOP is refused\n"
           "                 and SIGINT or SIGTERM stops the tracker\n"
           "  --auth-key-file F  the farm's key (tvm-tune keygen F makes one; default\n"
           "                 $TVM_TUNE_AUTH_KEY_FILE): every peer must prove it before\n"
           "                 anything else (docs/security.md).  Without a key the tracker\n"
           "                 listens on loopback only\n"
           "  --allow-tvm    with a key: TVM's own servers, clients and query_rpc_tracker\n"
           "                 may still register, request and read the summary without it\n"
           "                 (never submit jobs or report devices)\n"
           "  --insecure     without a key, listen on any address anyway\n"
           "  --http-port P  serve the dashboard (devices, queues, jobs with their tuning\n"
           "                 curves, best results) on http://HOST:P/ and Prometheus metrics\n"
           "                 on /metrics (0 lets the system choose; default: none)\n"
           "  --http-host H  address of the dashboard (default 127.0.0.1; it is read-only\n"
           "                 but shows the farm: expose it through a proxy you control)\n"
           "  --quiet        no log lines on stderr\n"
           "The bound address is printed on stdout as 'tvm-tracker listening on HOST:PORT', the\n"
           "dashboard's as 'tvm-tracker dashboard on http://HOST:PORT/'.\n");
}

static void on_listen(void *ctx, const char *host, int port)
{
    (void)ctx;
    printf("tvm-tracker listening on %s:%d\n", host, port);
    fflush(stdout);
}

static void on_http(void *ctx, const char *host, int port)
{
    (void)ctx;
    printf("tvm-tracker dashboard on http://%s:%d/\n", host, port);
    fflush(stdout);
}

static int parse_port(const char *what, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < 0 || v > 65535) {
        fprintf(stderr, "tvm-tracker: %s needs a port number (0 to 65535), got '%s'\n", what, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"host", required_argument, 0, 'H'},
                                         {"port", required_argument, 0, 'p'},
                                         {"port-end", required_argument, 0, 'e'},
                                         {"stop-key", required_argument, 0, 'k'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"db", required_argument, 0, 'd'},
                                         {"no-jobs", no_argument, 0, 'J'},
                                         {"name", required_argument, 0, 'N'},
                                         {"job-workers", required_argument, 0, 'w'},
                                         {"max-conns-per-peer", required_argument, 0, 'C'},
                                         {"max-pending", required_argument, 0, 'P'},
                                         {"max-jobs-per-peer", required_argument, 0, 'M'},
                                         {"auth-key-file", required_argument, 0, 'K'},
                                         {"allow-tvm", no_argument, 0, 'T'},
                                         {"insecure", no_argument, 0, 'I'},
                                         {"http-port", required_argument, 0, 'W'},
                                         {"db-max-mb", required_argument, 0, 'B'},
                                         {"http-host", required_argument, 0, 'X'},
                                         {"log-level", required_argument, 0, 'L'},
                                         {"log-format", required_argument, 0, 'F'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    tt_tracker_options o;
    memset(&o, 0, sizeof(o));
    o.host = "127.0.0.1";
    o.port = TT_TRACKER_PORT;
    o.port_end = -1;
    tt_logger log = {stderr, TT_LOG_INFO, false, "tvm-tracker"};
    o.log = &log;
    o.db_path = "farm.db";
    o.job_workers = 2;
    o.on_listen = on_listen;
    o.on_http = on_http;
    o.http_port = -1;
    int c;
    const char *key_file = NULL;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'H': o.host = optarg; break;
        case 'p':
            if (parse_port("--port", optarg, &o.port))
                return 2;
            break;
        case 'e':
            if (parse_port("--port-end", optarg, &o.port_end))
                return 2;
            break;
        case 'k': o.stop_key = optarg; break;
        case 'q': log.out = NULL; break;
        case 'L':
            if (!tt_logger_set_level(&log, optarg))
                return 2;
            break;
        case 'F':
            if (!tt_logger_set_format(&log, optarg))
                return 2;
            break;
        case 'd': o.db_path = optarg; break;
        case 'J': o.db_path = NULL; break;
        case 'N': o.name = optarg; break;
        case 'w': {
            int v;
            if (parse_port("--job-workers", optarg, &v) || v < 1 || v > 16) {
                fprintf(stderr, "tvm-tracker: --job-workers takes 1 to 16\n");
                return 2;
            }
            o.job_workers = v;
            break;
        }
        case 'C':
        case 'P':
        case 'M': {
            const char *name = c == 'C'   ? "--max-conns-per-peer"
                               : c == 'P' ? "--max-pending"
                                          : "--max-jobs-per-peer";
            int v;
            if (parse_port(name, optarg, &v) || v < 1) {
                fprintf(stderr, "tvm-tracker: %s takes a positive number\n", name);
                return 2;
            }
            *(c == 'C'   ? &o.max_conns_per_peer
              : c == 'P' ? &o.max_pending
                         : &o.max_jobs_per_peer) = v;
            break;
        }
        case 'K': key_file = optarg; break;
        case 'T': o.allow_tvm = true; break;
        case 'W':
            if (parse_port("--http-port", optarg, &o.http_port))
                return 2;
            break;
        case 'X': o.http_host = optarg; break;
        case 'B': {
            char *end;
            double mb = strtod(optarg, &end);
            if (*end || !(mb > 0) || mb > 1e9) {
                fprintf(stderr, "tvm-tracker: --db-max-mb takes a positive number of MiB\n");
                return 2;
            }
            o.db_max_bytes = (int64_t)(mb * (1 << 20));
            break;
        }
        case 'I': o.insecure = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tvm-tracker: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (o.port_end < 0)
        o.port_end =
            o.port == 0 ? 1 : (o.port < TT_TRACKER_PORT_END ? TT_TRACKER_PORT_END : o.port + 1);
    tt_errbuf err = {{0}};
    tt_auth_keyring ring;
    if (tt_auth_load_default(key_file, &ring, &err)) {
        fprintf(stderr, "tvm-tracker: %s\n", err.msg);
        return 2;
    }
    if (o.allow_tvm && !ring.nkeys) {
        fprintf(stderr, "tvm-tracker: --allow-tvm needs --auth-key-file (without a key every "
                        "peer is allowed anyway)\n");
        return 2;
    }
    o.auth = &ring;
    if (tt_tracker_run(&o, &err)) {
        fprintf(stderr, "tvm-tracker: %s\n", err.msg);
        return 1;
    }
    return 0;
}
