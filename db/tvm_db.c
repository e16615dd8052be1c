/* tvm-db: questions and answers about the tuning-log database. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db.h"
#include "plot.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: tvm-db COMMAND --db PATH [options]\n"
        "\n"
        "  best     --workload W --target T [--device D] [-k N] [--no-fallback] [--json]\n"
        "           the best error-free config (a record's time is its fastest sample), with\n"
        "           its fastest and median times and GFLOPS;\n"
        "           without records for the device/target, falls back to the same target on\n"
        "           another device, then the same target family, and says so\n"
        "  history  [--workload W] [--target T] [--device D] [--job J] [--limit N] [--json]\n"
        "           every measurement, oldest first\n"
        "  stats    [--job J] [--json]        counts, errors by code, best time\n"
        "  jobs     [--json]                  tuning jobs and their progress\n"
        "  import   FILE... [--json]          AutoTVM v0.2 / auto_scheduler JSON lines\n"
        "  export   [--format auto|autotvm|ansor] [--workload W] [--target T] [-o FILE]\n"
        "           JSON lines that TVM reads (records keep the format they came in; ours\n"
        "           import back as they were, except those whose LR or double_buffer TVM\n"
        "           cannot read, which come back as ansor: records)\n"
        "  plot     --workload W [--target T] [--device D] [--job J] [-o FILE.svg]\n"
        "           the tuning curve (best GFLOPS against trials) as SVG, one line per job\n"
        "           (labelled with its strategy) or per target and device\n"
        "  check                              integrity check (SQLite's; PostgreSQL: references),\n"
        "                                     and each workload's best against its records\n"
        "  vacuum                             each workload's best computed again, an integrity\n"
        "                                     check, then the file rebuilt compactly\n"
        "  copy     --from DB --to DB [--json]  everything (devices, jobs, records, cost\n"
        "           models) into another database, SQLite or PostgreSQL, then checked there;\n"
        "           the way to move records between our databases without losing any step\n"
        "\n"
        "--db is a SQLite file (or sqlite:PATH) or a PostgreSQL URI,\n"
        "postgresql://[user@]host[:port]/dbname, the password from ~/.pgpass, PGPASSFILE or\n"
        "PGPASSWORD, never in the URI.\n"
        "Workloads are written as in tvm-tune (matmul:M=512,N=512,K=512, te:...); imported\n"
        "TVM records that do not map onto our operators are named autotvm:TASK:ARGS or\n"
        "ansor:KEY.  See docs/database.md.\n");
}

typedef struct {
    const char *db, *from, *to, *workload, *target, *device, *format, *output;
    long long job, limit;
    int k;
    bool json, no_fallback;
    int nfiles;
    char **files;
} options;

static int parse_options(int argc, char **argv, options *o)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'D'},     {"workload", required_argument, 0, 'w'},
        {"target", required_argument, 0, 't'}, {"device", required_argument, 0, 'd'},
        {"job", required_argument, 0, 'j'},    {"limit", required_argument, 0, 'l'},
        {"format", required_argument, 0, 'f'}, {"output", required_argument, 0, 'o'},
        {"json", no_argument, 0, 'J'},         {"no-fallback", no_argument, 0, 'F'},
        {"from", required_argument, 0, 'A'},   {"to", required_argument, 0, 'B'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    memset(o, 0, sizeof(*o));
    o->k = 1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "D:w:t:d:j:l:f:o:k:A:B:JFh", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'D': o->db = optarg; break;
        case 'A': o->from = optarg; break;
        case 'B': o->to = optarg; break;
        case 'w': o->workload = optarg; break;
        case 't': o->target = optarg; break;
        case 'd': o->device = optarg; break;
        case 'f': o->format = optarg; break;
        case 'o': o->output = optarg; break;
        case 'J': o->json = true; break;
        case 'F': o->no_fallback = true; break;
        case 'j':
        case 'l':
        case 'k': {
            errno = 0;
            long long v = strtoll(optarg, &end, 10);
            if (*end || errno || v < 1) {
                fprintf(stderr, "tvm-db: -%c needs a positive integer, got '%s'\n", c, optarg);
                return 2;
            }
            if (c == 'j')
                o->job = v;
            else if (c == 'l')
                o->limit = v;
            else
                o->k = v > 1000 ? 1000 : (int)v;
            break;
        }
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    o->files = argv + optind;
    o->nfiles = argc - optind;
    if (!o->db && !(o->from && o->to)) {
        fprintf(stderr, "tvm-db: --db PATH is required (copy: --from A --to B)\n");
        return 2;
    }
    return 0;
}

static json_t *row_json(const tt_db_row *r)
{
    json_t *costs = json_array();
    for (int i = 0; i < r->ncosts; i++)
        json_array_append_new(costs, json_real(r->costs[i]));
    json_t *o = json_object();
    json_object_set_new(o, "record_id", json_integer(r->id));
    json_object_set_new(o, "workload", json_string(r->workload));
    json_object_set_new(o, "target", json_string(r->target));
    json_object_set_new(o, "device", r->device ? json_string(r->device) : json_null());
    json_object_set_new(o, "config", json_string(r->config));
    json_object_set_new(o, "config_kind",
                        json_string(r->config_kind == TT_CONFIG_AUTOTVM ? "autotvm" : "steps"));
    json_object_set_new(o, "fastest_s", json_real(r->fastest_s));
    json_object_set_new(o, "median_s", json_real(r->median_s));
    json_object_set_new(o, "mean_s", json_real(r->mean_s));
    json_object_set_new(o, "gflops", json_real(r->gflops));
    json_object_set_new(o, "error_no", json_integer(r->error_no));
    json_object_set_new(o, "error_name", json_string(tt_measure_error_name(r->error_no)));
    if (r->error_text)
        json_object_set_new(o, "error_text", json_string(r->error_text));
    json_object_set_new(o, "costs", costs);
    json_object_set_new(o, "build_s", json_real(r->build_s));
    json_object_set_new(o, "run_s", json_real(r->run_s));
    json_object_set_new(o, "total_s", json_real(r->total_s));
    json_object_set_new(o, "timestamp", json_real(r->timestamp));
    json_object_set_new(o, "job", r->job ? json_integer(r->job) : json_null());
    /* what the record keeps besides (a template index, a farm device's host, a GPU start's
     * tiling: docs/database.md) */
    json_t *extra = r->extra ? json_loads(r->extra, 0, NULL) : NULL;
    if (json_is_object(extra))
        json_object_set_new(o, "extra", extra);
    else
        json_decref(extra);
    return o;
}

/* One line, floats in their shortest exact form. */
static void print_json(json_t *v)
{
    tt_strbuf sb = {0};
    tt_json_write_py(&sb, v);
    puts(tt_strbuf_cstr(&sb));
    tt_strbuf_free(&sb);
    json_decref(v);
}

static void print_time(double t, char *buf, size_t n)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

static int cmd_best(tt_db *db, const options *o)
{
    if (!o->workload || !o->target) {
        fprintf(stderr, "tvm-db best: --workload and --target are required\n");
        return 2;
    }
    tt_db_row *rows;
    size_t n;
    tt_status s =
        tt_db_best(db, o->workload, o->target, o->device, o->k, !o->no_fallback, &rows, &n);
    if (s && s != TT_ERR_NOT_FOUND) {
        fprintf(stderr, "tvm-db best: %s\n", tt_db_errmsg(db));
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "tvm-db best: no error-free record for %s on %s%s%s%s\n", o->workload,
                o->target, o->device ? " (device " : "", o->device ? o->device : "",
                o->device ? ")" : "");
        if (o->json)
            print_json(json_array());
        return 1;
    }
    if (o->json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *r = row_json(&rows[i]);
            json_object_set_new(r, "match", json_string(tt_db_match_name(rows[i].match)));
            json_array_append_new(arr, r);
        }
        print_json(o->k == 1 ? json_incref(json_array_get(arr, 0)) : json_incref(arr));
        json_decref(arr);
    } else {
        for (size_t i = 0; i < n; i++) {
            const tt_db_row *r = &rows[i];
            char when[64];
            print_time(r->timestamp, when, sizeof(when));
            if (r->match != TT_DB_MATCH_EXACT)
                printf("note: fallback (%s): measured for %s on %s\n", tt_db_match_name(r->match),
                       r->target, r->device ? r->device : "an unknown device");
            printf("#%zu fastest %.6g s (median %.6g s)", i + 1, r->fastest_s, r->median_s);
            if (r->gflops > 0)
                printf(", %.2f GFLOPS", r->gflops);
            printf(" (record %lld, %d runs, %s, device %s)\n", (long long)r->id, r->ncosts, when,
                   r->device ? r->device : "unknown");
            printf("config %s\n", r->config);
        }
    }
    tt_db_rows_free(rows, n);
    return 0;
}

typedef struct {
    bool json;
    json_t *arr;
} hist_ctx;

static int print_row(void *vctx, const tt_db_row *r)
{
    hist_ctx *c = vctx;
    if (c->json) {
        json_array_append_new(c->arr, row_json(r));
        return 0;
    }
    char when[64];
    print_time(r->timestamp, when, sizeof(when));
    printf("%lld  %s  %-14s fastest %.6g s  median %.6g s  %s  %s  %s\n", (long long)r->id, when,
           tt_measure_error_name(r->error_no), r->fastest_s, r->median_s, r->workload, r->target,
           r->config);
    return 0;
}

static int cmd_history(tt_db *db, const options *o)
{
    tt_db_filter f = {o->workload, o->target, o->device, o->job, o->limit};
    hist_ctx c = {o->json, o->json ? json_array() : NULL};
    if (tt_db_history(db, &f, print_row, &c)) {
        fprintf(stderr, "tvm-db history: %s\n", tt_db_errmsg(db));
        json_decref(c.arr);
        return 1;
    }
    if (o->json)
        print_json(c.arr);
    return 0;
}

static int cmd_stats(tt_db *db, const options *o)
{
    tt_db_stats st;
    if (tt_db_stats_get(db, o->job, &st)) {
        fprintf(stderr, "tvm-db stats: %s\n", tt_db_errmsg(db));
        return 1;
    }
    if (o->json) {
        json_t *e = json_object();
        for (int i = 0; i < TT_MEASURE_ERROR_COUNT; i++)
            json_object_set_new(e, tt_measure_error_name(i), json_integer(st.errors[i]));
        print_json(json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:I, s:o}", "records",
                             (json_int_t)st.records, "workloads", (json_int_t)st.workloads,
                             "targets", (json_int_t)st.targets, "best_s", st.best_s,
                             "first_timestamp", st.first_timestamp, "last_timestamp",
                             st.last_timestamp, "suspect", (json_int_t)st.suspect, "errors", e));
        return 0;
    }
    printf("%lld records, %lld workloads, %lld targets%s\n", (long long)st.records,
           (long long)st.workloads, (long long)st.targets, o->job ? " (this job)" : "");
    for (int i = 0; i < TT_MEASURE_ERROR_COUNT; i++)
        if (st.errors[i])
            printf("  %-20s %lld\n", tt_measure_error_name(i), (long long)st.errors[i]);
    if (st.suspect)
        printf("  %-20s %lld (measured on devices later found sick; left out of best)\n", "suspect",
               (long long)st.suspect);
    if (st.best_s > 0)
        printf("best %.6g s (fastest sample)\n", st.best_s);
    return 0;
}

/* ---- plot ---- */

typedef struct {
    tt_plot_series s[16];
    int n;
    int64_t job[16];
    char key[16][300]; /* target @ device of records outside jobs */
    tt_db_job *jobs;
    size_t njobs;
} plot_ctx;

static int plot_row(void *vctx, const tt_db_row *row)
{
    plot_ctx *c = vctx;
    char key[300] = "";
    if (!row->job)
        snprintf(key, sizeof(key), "%.140s @ %.140s", row->target, row->device ? row->device : "?");
    int k = 0;
    while (k < c->n && (c->job[k] != row->job || (!row->job && strcmp(c->key[k], key))))
        k++;
    if (k == c->n) {
        if (c->n == 16)
            return 0; /* sixteen lines are as many as a plot can show */
        tt_plot_series *s = &c->s[c->n++];
        memset(s, 0, sizeof(*s));
        c->job[k] = row->job;
        snprintf(c->key[k], sizeof(c->key[k]), "%s", key);
        const char *strategy = NULL;
        json_t *params = NULL;
        for (size_t j = 0; row->job && j < c->njobs; j++)
            if (c->jobs[j].id == row->job && c->jobs[j].params)
                params = json_loads(c->jobs[j].params, 0, NULL);
        strategy = json_string_value(json_object_get(params, "strategy"));
        if (row->job)
            snprintf(s->label, sizeof(s->label), "job %lld%s%s%s", (long long)row->job,
                     strategy ? " (" : "", strategy ? strategy : "", strategy ? ")" : "");
        else
            snprintf(s->label, sizeof(s->label), "%.30s", key);
        json_decref(params);
    }
    return tt_plot_series_push(&c->s[k], row->error_no == 0 ? row->gflops : 0) ? 0 : 1;
}

static int cmd_plot(tt_db *db, const options *o)
{
    if (!o->workload) {
        fprintf(stderr, "tvm-db plot: --workload W is required (one workload per plot)\n");
        return 2;
    }
    plot_ctx c;
    memset(&c, 0, sizeof(c));
    tt_db_jobs_list(db, &c.jobs, &c.njobs);
    tt_db_filter f = {o->workload, o->target, o->device, o->job, 0};
    int rc = 0;
    if (tt_db_history(db, &f, plot_row, &c)) {
        fprintf(stderr, "tvm-db plot: %s\n", tt_db_errmsg(db));
        rc = 1;
    } else if (c.n == 0) {
        fprintf(stderr, "tvm-db plot: no records of %s%s%s\n", o->workload,
                o->target ? " for target " : "", o->target ? o->target : "");
        rc = 1;
    } else {
        char *svg = tt_plot_svg(c.s, c.n, o->workload);
        FILE *out = o->output ? fopen(o->output, "w") : stdout;
        if (!svg || !out || fputs(svg, out) < 0 || (o->output && fclose(out))) {
            fprintf(stderr, "tvm-db plot: cannot write %s\n", o->output ? o->output : "stdout");
            rc = 1;
        } else if (o->output) {
            printf("%s: %d line%s\n", o->output, c.n, c.n > 1 ? "s" : "");
        }
        free(svg);
    }
    for (int i = 0; i < c.n; i++)
        tt_plot_series_clear(&c.s[i]);
    tt_db_jobs_free(c.jobs, c.njobs);
    return rc;
}

static int cmd_jobs(tt_db *db, const options *o)
{
    tt_db_job *jobs;
    size_t n;
    if (tt_db_jobs_list(db, &jobs, &n)) {
        fprintf(stderr, "tvm-db jobs: %s\n", tt_db_errmsg(db));
        return 1;
    }
    json_t *arr = o->json ? json_array() : NULL;
    for (size_t i = 0; i < n; i++) {
        tt_db_job *j = &jobs[i];
        if (arr) {
            json_array_append_new(arr, json_pack("{s:I, s:s, s:s, s:I, s:I, s:f, s:f, s:f}", "id",
                                                 (json_int_t)j->id, "state", j->state, "params",
                                                 j->params, "trials_done",
                                                 (json_int_t)j->trials_done, "trials_total",
                                                 (json_int_t)j->trials_total, "best_s", j->best_s,
                                                 "created", j->created, "updated", j->updated));
        } else {
            printf("job %lld  %-9s %lld/%lld trials  best %.6g s  %s\n", (long long)j->id, j->state,
                   (long long)j->trials_done, (long long)j->trials_total, j->best_s, j->params);
        }
    }
    if (arr)
        print_json(arr);
    else if (n == 0)
        printf("no jobs\n");
    tt_db_jobs_free(jobs, n);
    return 0;
}

static int cmd_import(tt_db *db, const options *o)
{
    if (o->nfiles == 0) {
        fprintf(stderr, "tvm-db import: name the log files to import\n");
        return 2;
    }
    int rc = 0;
    json_t *arr = o->json ? json_array() : NULL;
    for (int i = 0; i < o->nfiles; i++) {
        tt_db_import_report rep;
        tt_errbuf err = {{0}};
        tt_status s = tt_db_import_file(db, o->files[i], &rep, &err);
        if (arr) {
            json_t *r =
                json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "file", o->files[i], "lines",
                          (json_int_t)rep.lines, "records", (json_int_t)rep.records, "inserted",
                          (json_int_t)rep.inserted, "duplicates", (json_int_t)rep.duplicates,
                          "malformed", (json_int_t)rep.malformed, "mapped", (json_int_t)rep.mapped);
            if (rep.malformed)
                json_object_set_new(r, "first_error", json_string(rep.first_error));
            if (s)
                json_object_set_new(r, "error", json_string(err.msg));
            json_array_append_new(arr, r);
        } else {
            printf("%s: %zu records: %zu new, %zu already stored, %zu malformed lines; %zu map "
                   "onto our operators\n",
                   o->files[i], rep.records, rep.inserted, rep.duplicates, rep.malformed,
                   rep.mapped);
            if (rep.malformed)
                fprintf(stderr, "  first malformed line: %s\n", rep.first_error);
            if (s)
                fprintf(stderr, "tvm-db import: %s\n", err.msg);
        }
        if (s || rep.malformed)
            rc = 1;
    }
    if (arr)
        print_json(arr);
    return rc;
}

static int cmd_export(tt_db *db, const options *o)
{
    tt_log_format fmt = TT_LOG_AUTO;
    if (o->format && !strcmp(o->format, "autotvm"))
        fmt = TT_LOG_AUTOTVM;
    else if (o->format && !strcmp(o->format, "ansor"))
        fmt = TT_LOG_ANSOR;
    else if (o->format && strcmp(o->format, "auto")) {
        fprintf(stderr, "tvm-db export: --format is auto, autotvm or ansor\n");
        return 2;
    }
    FILE *out = o->output ? fopen(o->output, "w") : stdout;
    if (!out) {
        fprintf(stderr, "tvm-db export: %s: %s\n", o->output, strerror(errno));
        return 1;
    }
    tt_db_filter f = {o->workload, o->target, o->device, o->job, o->limit};
    size_t n;
    tt_errbuf err = {{0}};
    tt_status s = tt_db_export(db, &f, fmt, out, &n, &err);
    if (out != stdout && fclose(out) && !s)
        s = tt_err(&err, TT_ERR_IO, "%s: %s", o->output, strerror(errno));
    if (s) {
        fprintf(stderr, "tvm-db export: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "tvm-db export: %zu records\n", n);
    return 0;
}

static int cmd_copy(const options *o)
{
    tt_db *from, *to;
    tt_errbuf err = {{0}};
    /* Read-write first, so that an older source is migrated; a read-only role reads as it is. */
    if (tt_db_open(o->from, 0, &from, &err) && tt_db_open(o->from, TT_DB_READONLY, &from, &err)) {
        fprintf(stderr, "tvm-db copy: %s\n", err.msg);
        return 1;
    }
    if (tt_db_open(o->to, 0, &to, &err)) {
        fprintf(stderr, "tvm-db copy: %s\n", err.msg);
        tt_db_close(from);
        return 1;
    }
    tt_db_copy_report r;
    tt_status s = tt_db_copy(from, to, &r, &err);
    tt_db_close(from);
    tt_db_close(to);
    if (s) {
        fprintf(stderr, "tvm-db copy: %s\n", err.msg);
        return 1;
    }
    if (o->json)
        printf("{\"records\": %lld, \"inserted\": %lld, \"present\": %lld, \"devices\": %lld, "
               "\"jobs\": %lld, \"cost_models\": %lld, \"verified\": true}\n",
               (long long)r.records, (long long)r.inserted, (long long)r.present,
               (long long)r.devices, (long long)r.jobs, (long long)r.cost_models);
    else
        printf("%s -> %s: %lld records (%lld new, %lld already there), %lld devices, %lld jobs, "
               "%lld cost models new; checked\n",
               o->from, o->to, (long long)r.records, (long long)r.inserted, (long long)r.present,
               (long long)r.devices, (long long)r.jobs, (long long)r.cost_models);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    static const char *const cmds[] = {"best",   "history", "stats", "jobs",   "plot",
                                       "import", "export",  "check", "vacuum", "copy"};
    bool known = false;
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        known |= !strcmp(cmd, cmds[i]);
    if (!known) {
        fprintf(stderr, "tvm-db: unknown command '%s'\n\n", cmd);
        usage(stderr);
        return 2;
    }
    options o;
    int rc = parse_options(argc - 1, argv + 1, &o);
    if (rc)
        return rc;
    if (!strcmp(cmd, "copy")) {
        if (!o.from || !o.to) {
            fprintf(stderr, "tvm-db copy: --from A and --to B are required\n");
            return 2;
        }
        return cmd_copy(&o);
    }
    bool writes = !strcmp(cmd, "import") || !strcmp(cmd, "vacuum");
    tt_db *db;
    tt_errbuf err = {{0}};
    if (tt_db_open(o.db, writes ? 0 : TT_DB_READONLY, &db, &err)) {
        fprintf(stderr, "tvm-db: %s\n", err.msg);
        return 1;
    }
    if (!strcmp(cmd, "best"))
        rc = cmd_best(db, &o);
    else if (!strcmp(cmd, "history"))
        rc = cmd_history(db, &o);
    else if (!strcmp(cmd, "stats"))
        rc = cmd_stats(db, &o);
    else if (!strcmp(cmd, "jobs"))
        rc = cmd_jobs(db, &o);
    else if (!strcmp(cmd, "plot"))
        rc = cmd_plot(db, &o);
    else if (!strcmp(cmd, "import"))
        rc = cmd_import(db, &o);
    else if (!strcmp(cmd, "export"))
        rc = cmd_export(db, &o);
    else {
        tt_status s = !strcmp(cmd, "check") ? tt_db_check(db) : tt_db_vacuum(db);
        if (s) {
            fprintf(stderr, "tvm-db %s: %s\n", cmd, tt_db_errmsg(db));
            rc = 1;
        } else {
            printf("%s: ok\n", o.db);
        }
    }
    tt_db_close(db);
    return rc;
}
