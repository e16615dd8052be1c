/* tvm-rpc-server: a measuring device of the farm (docs/farm.md). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc_server.h"
#include "tracker_client.h"
#include "tracker_proto.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void usage(FILE *f)
{
    fprintf(
        f, "usage: tvm-rpc-server [--tracker HOST:PORT --key KEY] [--host H] [--port P]\n"
           "                      [--port-end E] [--custom-addr A] [--cache DIR] [--cache-mb N]\n"
           "                      [--max-artifact-mb N] [--idle-timeout S]\n"
           "                      [--opencl-device SPEC | --no-opencl] [--auth-key-file F]\n"
           "                      [--insecure] [--log-level L] [--log-format text|json] [--quiet]\n"
           "\n"
           "A measuring device of the farm.  It registers with a TVM-compatible tracker the way\n"
           "TVM's servers do (or stands alone without --tracker), accepts TVM's RPC handshake and\n"
           "then measures the kernels tvm-tune sends it, each in a sacrificial child process: a\n"
           "crashing or hanging kernel is a result, not a dead server (docs/farm.md).\n"
           "  --tracker HOST:PORT  the tracker to register with (default port 9190)\n"
           "  --key KEY            the device key clients request (required with --tracker)\n"
           "  --host H             address to listen on (default 0.0.0.0 with a key, else\n"
           "                       127.0.0.1)\n"
           "  --port P             first port to try (default 9090; 0 lets the system choose)\n"
           "  --port-end E         ports P up to E-1 are tried in turn (default 9199)\n"
           "  --custom-addr A      the address the tracker gives clients (default: this\n"
           "                       machine's address as the tracker sees it)\n"
           "  --cache DIR          artifact cache (default /tmp/tvm-rpc-server-UID)\n"
           "  --cache-mb N         cache budget, least recently used evicted (default 2048)\n"
           "  --max-artifact-mb N  largest kernel or argument accepted (default 512)\n"
           "  --child-memory-mb N  address space of each measuring child (CPU kernels; default\n"
           "                       three quarters of this machine's memory; 0: none): a kernel\n"
           "                       that needs more fails (RUNTIME_DEVICE) instead of swapping\n"
           "                       the device to death\n"
           "  --idle-timeout S     end a session silent for S seconds (default 60; a client's\n"
           "                       -timeout=N in the handshake overrides it)\n"
           "  --tvm-error v20|v21  encoding of the error sent to TVM clients (default v20)\n"
           "  --opencl-device SPEC the OpenCL device that measures OpenCL kernels: P:D (platform\n"
           "                       and device index), an index, or part of its name (default:\n"
           "                       the first GPU, else the first device); all are listed in the\n"
           "                       capabilities sent to the tracker\n"
           "  --no-opencl          do not look for OpenCL devices (CPU kernels only)\n"
           "  --auth-key-file F    the farm's key (tvm-tune keygen F makes one; default\n"
           "                       $TVM_TUNE_AUTH_KEY_FILE): the tracker and every client must\n"
           "                       prove it, and every measurement message is MAC'ed\n"
           "                       (docs/security.md).  Without a key the server listens on\n"
           "                       loopback only\n"
           "  --insecure           without a key, listen on any address anyway\n"
           "  --inject-faults[=crash|wrong][@N]  for testing the farm's health checks: every\n"
           "                       kernel crashes (or gives a wrong answer), after the first N\n"
           "                       measurements (default 0)\n"
           "  --log-level L        error, warn, info (default) or debug\n"
           "  --log-format F       text (default) or json: one object per line (ts, level,\n"
           "                       program, msg)\n"
           "  --quiet              no log lines on stderr\n"
           "The bound port is printed on stdout as 'tvm-rpc-server listening on HOST:PORT'.\n");
}

static void on_listen(void *ctx, const char *host, int port)
{
    (void)ctx;
    printf("tvm-rpc-server listening on %s:%d\n", host, port);
    fflush(stdout);
}

static int parse_num(const char *what, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || v < lo || v > hi) {
        fprintf(stderr, "tvm-rpc-server: %s needs a number from %g to %g, got '%s'\n", what, lo, hi,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"tracker", required_argument, 0, 't'},
                                         {"key", required_argument, 0, 'k'},
                                         {"host", required_argument, 0, 'H'},
                                         {"port", required_argument, 0, 'p'},
                                         {"port-end", required_argument, 0, 'e'},
                                         {"custom-addr", required_argument, 0, 'a'},
                                         {"cache", required_argument, 0, 'c'},
                                         {"cache-mb", required_argument, 0, 'C'},
                                         {"max-artifact-mb", required_argument, 0, 'M'},
                                         {"child-memory-mb", required_argument, 0, 'R'},
                                         {"idle-timeout", required_argument, 0, 'i'},
                                         {"tvm-error", required_argument, 0, 'v'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"inject-faults", optional_argument, 0, 'F'},
                                         {"opencl-device", required_argument, 0, 'o'},
                                         {"no-opencl", no_argument, 0, 'N'},
                                         {"auth-key-file", required_argument, 0, 'K'},
                                         {"insecure", no_argument, 0, 'I'},
                                         {"log-level", required_argument, 0, 'L'},
                                         {"log-format", required_argument, 0, 'O'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    tt_rpc_server_options o;
    memset(&o, 0, sizeof(o));
    o.port = 9090;
    o.port_end = -1;
    o.cache_bytes = 2048ll << 20;
    o.artifact_bytes = 512ll << 20;
    o.idle_timeout_s = 60;
    o.tvm_error_encoding = 20;
    tt_logger log = {stderr, TT_LOG_INFO, false, "tvm-rpc-server"};
    o.log = &log;
    o.on_listen = on_listen;
    o.stop = &stop_flag;
    char tracker_host[256], cache[256];
    snprintf(cache, sizeof(cache), "/tmp/tvm-rpc-server-%u", (unsigned)getuid());
    o.cache_dir = cache;
    double v;
    int c;
    const char *key_file = NULL;
    double child_mb = -1; /* default: 3/4 of the memory */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        tt_errbuf err = {{0}};
        switch (c) {
        case 't':
            if (tt_tracker_parse_address(optarg, TT_TRACKER_PORT, tracker_host,
                                         sizeof(tracker_host), &o.tracker_port, &err)) {
                fprintf(stderr, "tvm-rpc-server: --tracker: %s\n", err.msg);
                return 2;
            }
            o.tracker_host = tracker_host;
            break;
        case 'k': o.key = optarg; break;
        case 'H': o.host = optarg; break;
        case 'p':
            if (parse_num("--port", optarg, 0, 65535, &v))
                return 2;
            o.port = (int)v;
            break;
        case 'e':
            if (parse_num("--port-end", optarg, 0, 65536, &v))
                return 2;
            o.port_end = (int)v;
            break;
        case 'a': o.custom_addr = optarg; break;
        case 'c': o.cache_dir = optarg; break;
        case 'C':
            if (parse_num("--cache-mb", optarg, 1, 1e7, &v))
                return 2;
            o.cache_bytes = (int64_t)(v * (1 << 20));
            break;
        case 'R':
            if (parse_num("--child-memory-mb", optarg, 0, 1e9, &v))
                return 2;
            child_mb = v;
            break;
        case 'M':
            if (parse_num("--max-artifact-mb", optarg, 1, 1e6, &v))
                return 2;
            o.artifact_bytes = (int64_t)(v * (1 << 20));
            break;
        case 'i':
            if (parse_num("--idle-timeout", optarg, 0.1, 86400, &v))
                return 2;
            o.idle_timeout_s = v;
            break;
        case 'v':
            if (strcmp(optarg, "v20") && strcmp(optarg, "v21")) {
                fprintf(stderr, "tvm-rpc-server: --tvm-error takes v20 or v21, got '%s'\n", optarg);
                return 2;
            }
            o.tvm_error_encoding = optarg[2] == '1' ? 21 : 20;
            break;
        case 'q': log.out = NULL; break;
        case 'L':
            if (!tt_logger_set_level(&log, optarg))
                return 2;
            break;
        case 'O':
            if (!tt_logger_set_format(&log, optarg))
                return 2;
            break;
        case 'F': { /* crash | wrong, optionally @N: honest for the first N measurements */
            char mode[16] = "crash";
            long after = 0;
            bool ok = true;
            if (optarg) {
                const char *at = strchr(optarg, '@');
                size_t n = at ? (size_t)(at - optarg) : strlen(optarg);
                ok = n < sizeof(mode);
                if (ok) {
                    memcpy(mode, optarg, n);
                    mode[n] = 0;
                }
                if (ok && at) {
                    char *end;
                    after = strtol(at + 1, &end, 10);
                    ok = at[1] && !*end && after >= 0 && after <= 1000000;
                }
            }
            o.inject_faults = !strcmp(mode, "crash") ? 1 : !strcmp(mode, "wrong") ? 2 : 0;
            if (!ok || !o.inject_faults) {
                fprintf(stderr, "tvm-rpc-server: --inject-faults takes crash or wrong, optionally "
                                "@N (honest for the first N measurements)\n");
                return 2;
            }
            o.inject_after = (int)after;
            break;
        }
        case 'o': o.opencl_device = optarg; break;
        case 'N': o.no_opencl = true; break;
        case 'K': key_file = optarg; break;
        case 'I': o.insecure = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tvm-rpc-server: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (o.tracker_host && !o.key) {
        fprintf(stderr, "tvm-rpc-server: --tracker needs --key (the device key clients ask for)\n");
        return 2;
    }
    if (o.port_end < 0)
        o.port_end = o.port == 0 ? 1 : (o.port < 9199 ? 9199 : o.port + 1);
    if (child_mb < 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        o.child_memory_bytes = pages > 0 && page > 0 ? (int64_t)pages * page / 4 * 3 : 0;
    } else {
        o.child_memory_bytes = (int64_t)(child_mb * (1 << 20));
    }
    tt_auth_keyring ring;
    tt_errbuf kerr = {{0}};
    if (tt_auth_load_default(key_file, &ring, &kerr)) {
        fprintf(stderr, "tvm-rpc-server: %s\n", kerr.msg);
        return 2;
    }
    o.auth = &ring;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns and the loop sees the flag */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    tt_errbuf err = {{0}};
    if (tt_rpc_server_run(&o, &err)) {
        fprintf(stderr, "tvm-rpc-server: %s\n", err.msg);
        return 1;
    }
    return 0;
}
