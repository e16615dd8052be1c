/* tvm-tune submit, status, watch, cancel and jobs: the client of tvm-tracker's tuning jobs
 * (tracker/jobs.h; docs/farm.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpc/measure_proto.h"
#include "rpc/tracker_client.h"
#include "rpc/tracker_proto.h"
#include "tuner/tvm_tune_cli.h"

/* The job's parameters, as tracker/jobs.c reads them. */
static json_t *job_params(const tune_args *a)
{
    const tt_tune_options *o = &a->o;
    json_t *ws = json_array(), *weights = json_array();
    for (int i = 0; i < a->nw; i++) {
        json_array_append_new(ws, json_string(a->workloads[i]));
        json_array_append_new(weights, json_real(a->weights[i]));
    }
    json_t *p = json_pack(
        "{s:o, s:o, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:f, s:{s:i, s:i, s:f, s:f, s:f, s:o, s:I, "
        "s:f}}",
        "workloads", ws, "weights", weights, "target", o->target ? o->target : "llvm", "key",
        a->remote.key, "strategy", tt_strategy_name(o->strategy), "trials", (json_int_t)o->trials,
        "seed", (json_int_t)o->seed, "priority", a->remote.priority, "parallel", a->remote.parallel,
        "device_wait", a->remote.request_timeout_s > 0 ? a->remote.request_timeout_s : 600.0,
        "measure", "number", o->measure.number > 0 ? o->measure.number : 1, "repeat",
        o->measure.repeat, "min_repeat_ms", o->measure.min_repeat_ms, "repeat_budget_ms",
        o->measure.repeat_budget_ms, "cooldown_ms", o->measure.cooldown_ms, "cache_flush",
        tt_cache_flush_json(o->measure.cache_flush), "network_bytes",
        (json_int_t)o->measure.network_bytes, "timeout_s", o->measure.timeout_s);
    json_t *search =
        json_pack("{s:i, s:f, s:s, s:s, s:b}", "population", o->population, "diversity",
                  o->diversity, "features", o->features == TT_FEATURES_ITERVAR ? "itervar" : "knob",
                  "scheduler", o->policy == TT_SCHED_ROUND_ROBIN ? "round-robin" : "gradient",
                  "overlap_search", o->overlap_search);
    json_object_set_new(p, "search", search);
    return p;
}

static int call(const char *host, int port, json_t *msg, json_t **result, const char *cmd)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    tt_errbuf err = {{0}};
    tt_status s = text ? tt_tracker_ext_call(host, port, cli_auth(), text, result, &err)
                       : tt_err(&err, TT_ERR_NOMEM, "out of memory");
    free(text);
    if (s) {
        fprintf(stderr, "tvm-tune %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static long long num(const json_t *o, const char *k)
{
    return (long long)json_number_value(json_object_get(o, k));
}

static void print_job(const json_t *j)
{
    const json_t *p = json_object_get(j, "params");
    const json_t *ws = json_object_get(p, "workloads");
    double best = json_number_value(json_object_get(j, "best_s"));
    printf("job %lld  %-9s  %lld/%lld measured (%lld errors)", num(j, "id"), str(j, "state"),
           num(j, "measured"), num(j, "trials_total"), num(j, "errors"));
    if (best > 0)
        printf("  best %.6g s", best);
    printf("\n  key %s  target %s  strategy %s\n", str(p, "key"), str(p, "target"),
           str(p, "strategy"));
    for (size_t i = 0; i < json_array_size(ws); i++)
        printf("  workload %s\n", json_string_value(json_array_get(ws, i)));
    if (str(j, "message")[0])
        printf("  %s\n", str(j, "message"));
}

/* A progress bar with the rate-based ETA, redrawn in place (a terminal only). */
static void draw_bar(int64_t id, const char *state, long long m, long long total, double best,
                     double rate)
{
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    int filled = total > 0 ? (int)(WIDTH * (m < total ? m : total) / total) : 0;
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < filled ? '#' : '-';
    bar[WIDTH] = 0;
    printf("\rjob %lld %-9s [%s] %lld/%lld", (long long)id, state, bar, m, total);
    if (best > 0)
        printf("  best %.4g s", best);
    if (rate > 0 && total > m) {
        double eta = (double)(total - m) / rate;
        printf("  ETA %dm%02ds", (int)(eta / 60), (int)eta % 60);
    }
    printf("\033[K");
    fflush(stdout);
}

static int watch(const char *host, int port, int64_t id, double interval)
{
    long long last = -1, first = -1;
    char last_state[32] = "";
    bool tty = isatty(STDOUT_FILENO);
    double t_first = 0;
    for (;;) {
        json_t *j;
        if (call(host, port, json_pack("[i, I]", TT_TRACKER_JOB_STATUS, (json_int_t)id), &j,
                 "watch"))
            return 1;
        const char *state = str(j, "state");
        double best = json_number_value(json_object_get(j, "best_s"));
        long long measured = num(j, "measured");
        int rc = !strcmp(state, "done")        ? 0
                 : !strcmp(state, "failed")    ? 1
                 : !strcmp(state, "cancelled") ? 3
                                               : -1;
        if (first < 0) {
            first = measured;
            t_first = tt_clock_monotonic();
        }
        if (tty) {
            double el = tt_clock_monotonic() - t_first;
            draw_bar(id, state, measured, num(j, "trials_total"), best,
                     el > 0 ? (double)(measured - first) / el : 0);
            if (rc >= 0)
                printf("\n");
        } else if (measured != last || strcmp(state, last_state)) {
            /* a log: one line per change */
            time_t now = time(NULL);
            char ts[16];
            strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&now));
            printf("%s job %lld %s: %lld/%lld measured", ts, (long long)id, state, measured,
                   num(j, "trials_total"));
            if (best > 0)
                printf(", best %.6g s", best);
            printf("\n");
            fflush(stdout);
        }
        last = measured;
        snprintf(last_state, sizeof(last_state), "%s", state);
        if (rc >= 0 && str(j, "message")[0])
            printf("  %s\n", str(j, "message"));
        json_decref(j);
        if (rc >= 0)
            return rc;
        struct timespec ts = {(time_t)interval,
                              (long)((interval - (double)(time_t)interval) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

int cmd_submit(int argc, char **argv)
{
    static tune_args a;
    int rc = parse_tune_args("submit", argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (!a.remote.tracker_host || a.remote.host) {
        fprintf(stderr, "tvm-tune submit: give --tracker HOST:PORT and --key K (jobs run on a "
                        "tvm-tracker's farm)\n");
        return 2;
    }
    json_t *id;
    if (call(a.remote.tracker_host, a.remote.tracker_port,
             json_pack("[i, o]", TT_TRACKER_JOB_SUBMIT, job_params(&a)), &id, "submit"))
        return 1;
    long long job = (long long)json_integer_value(id);
    json_decref(id);
    printf("job %lld submitted to %s:%d (key %s)\n", job, a.remote.tracker_host,
           a.remote.tracker_port, a.remote.key);
    fflush(stdout);
    return a.watch ? watch(a.remote.tracker_host, a.remote.tracker_port, job, 2) : 0;
}

int cmd_job(const char *cmd, int argc, char **argv)
{
    static const struct option opts[] = {
        {"tracker", required_argument, 0, 't'},  {"json", no_argument, 0, 'j'},
        {"interval", required_argument, 0, 'i'}, {"auth-key-file", required_argument, 0, '!'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    const char *key_file = NULL;
    char host[256] = "127.0.0.1";
    int port = 9190;
    bool as_json = false;
    double interval = 2;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        tt_errbuf err = {{0}};
        char *end;
        switch (c) {
        case 't':
            if (tt_tracker_parse_address(optarg, 9190, host, sizeof(host), &port, &err)) {
                fprintf(stderr, "tvm-tune %s: --tracker: %s\n", cmd, err.msg);
                return 2;
            }
            break;
        case 'j': as_json = true; break;
        case '!': key_file = optarg; break;
        case 'i':
            interval = strtod(optarg, &end);
            if (*end || interval < 0.1 || interval > 3600) {
                fprintf(stderr, "tvm-tune %s: --interval takes 0.1 to 3600 seconds\n", cmd);
                return 2;
            }
            break;
        case 'h':
            printf("usage: tvm-tune %s --tracker HOST:PORT [--auth-key-file F]%s\n", cmd,
                   !strcmp(cmd, "jobs")     ? " [--json]"
                   : !strcmp(cmd, "watch")  ? " JOB [--interval S]"
                   : !strcmp(cmd, "status") ? " JOB [--json]"
                                            : " JOB");
            return 0;
        default: return 2;
        }
    }
    if (!cli_load_auth(cmd, key_file))
        return 2;
    bool list = !strcmp(cmd, "jobs");
    char *end = NULL;
    long long id = optind < argc ? strtoll(argv[optind], &end, 10) : 0;
    if (!list && (optind + 1 != argc || *end || id <= 0)) {
        fprintf(stderr, "tvm-tune %s: give one job id (tvm-tune jobs lists them)\n", cmd);
        return 2;
    }
    if (!strcmp(cmd, "watch"))
        return watch(host, port, id, interval);
    json_t *msg = list                     ? json_pack("[i]", TT_TRACKER_JOB_LIST)
                  : !strcmp(cmd, "cancel") ? json_pack("[i, I]", TT_TRACKER_JOB_CANCEL, id)
                                           : json_pack("[i, I]", TT_TRACKER_JOB_STATUS, id);
    json_t *r;
    if (call(host, port, msg, &r, cmd))
        return 1;
    if (as_json) {
        char *text = json_dumps(r, JSON_INDENT(2));
        printf("%s\n", text ? text : "null");
        free(text);
    } else if (list) {
        if (json_array_size(r) == 0)
            printf("no jobs on %s:%d\n", host, port);
        for (size_t i = 0; i < json_array_size(r); i++)
            print_job(json_array_get(r, i));
    } else {
        print_job(r);
    }
    json_decref(r);
    return 0;
}
