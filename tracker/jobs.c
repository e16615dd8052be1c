#include "jobs.h"

#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../db/db.h"
#include "../db/plot.h"
#include "../rpc/measure_proto.h"
#include "../schedule/target.h"
#include "../schedule/workload.h"
#include "../tuner/tune.h"

#define MAX_WORKERS 16

typedef struct tt_jobs tt_jobs_;

typedef struct {
    tt_jobs_ *j;
    int64_t id; /* 0: idle */
    volatile sig_atomic_t stop;
    bool cancelled;
} worker_slot;

struct tt_jobs {
    char *db_path;
    char name[300]; /* whose jobs these are in the database */
    char host[256];
    int port;
    const tt_auth_keyring *auth;
    const tt_logger *log;
    tt_db *db; /* the event loop's and the workers' state changes, under mu */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    TT_VEC(int64_t) queue;
    worker_slot slot[MAX_WORKERS];
    pthread_t th[MAX_WORKERS];
    int nworkers;
    bool closing;
    int max_per_peer;     /* queued or running jobs per submitting address, 0 = no limit */
    int64_t db_max_bytes; /* the jobs' cap on the database file, 0 = none */
};

/* ---- parameters ---- */

static tt_status bad(tt_errbuf *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tt_status bad(tt_errbuf *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_verr(err, TT_ERR_INVALID_ARG, fmt, ap);
    va_end(ap);
    return TT_ERR_INVALID_ARG;
}

static tt_status number_field(const json_t *o, const char *k, double lo, double hi, double dflt,
                              double *out, tt_errbuf *err)
{
    const json_t *v = json_object_get(o, k);
    *out = dflt;
    if (!v || json_is_null(v))
        return TT_OK;
    if (!json_is_number(v))
        return bad(err, "\"%s\" must be a number", k);
    *out = json_number_value(v);
    if (*out < lo || *out > hi)
        return bad(err, "\"%s\" is %g; it must be from %g to %g", k, *out, lo, hi);
    return TT_OK;
}

tt_status tt_jobs_check_params(const json_t *p, json_t **normalised, tt_errbuf *err)
{
    *normalised = NULL;
    if (!json_is_object(p))
        return bad(err, "job parameters must be a JSON object");
    const json_t *ws = json_object_get(p, "workloads");
    if (!json_is_array(ws) || json_array_size(ws) == 0 || json_array_size(ws) > TT_TUNE_MAX_TASKS)
        return bad(err, "\"workloads\" must be a list of 1 to %d workload texts",
                   TT_TUNE_MAX_TASKS);
    json_t *out = json_object();
    json_t *wl = json_array(), *weights = json_array();
    json_object_set_new(out, "workloads", wl);
    json_object_set_new(out, "weights", weights);
    tt_status s = TT_OK;
    const json_t *wv = json_object_get(p, "weights");
    if (wv && !(json_is_array(wv) && json_array_size(wv) == json_array_size(ws)))
        s = bad(err, "\"weights\" must be a list as long as \"workloads\"");
    for (size_t i = 0; !s && i < json_array_size(ws); i++) {
        const char *text = json_string_value(json_array_get(ws, i));
        tt_workload *w = NULL;
        tt_errbuf werr = {{0}};
        if (!text)
            s = bad(err, "workload %zu is not a string", i + 1);
        else if (tt_workload_parse(text, &w, &werr))
            s = bad(err, "workload %zu (%s): %s", i + 1, text, werr.msg);
        tt_workload_free(w);
        double weight = wv ? json_number_value(json_array_get(wv, i)) : 1;
        if (!s && !(weight > 0))
            s = bad(err, "weight %zu must be a positive number", i + 1);
        if (!s) {
            json_array_append_new(wl, json_string(text));
            json_array_append_new(weights, json_real(weight));
        }
    }
    const char *target = json_string_value(json_object_get(p, "target"));
    tt_target t;
    tt_errbuf terr = {{0}};
    if (!s && json_object_get(p, "target") && !target)
        s = bad(err, "\"target\" must be a string");
    if (!s && tt_target_parse_user(target ? target : "llvm", &t, &terr))
        s = bad(err, "target: %s", terr.msg);
    if (!s && strcmp(t.kind, "llvm") && strcmp(t.kind, "c") && strcmp(t.kind, "opencl"))
        s = bad(err, "target kind '%s' cannot be measured on the farm (llvm or opencl)", t.kind);
    const char *key = json_string_value(json_object_get(p, "key"));
    if (!s && (!key || !key[0] || strchr(key, ':') || strlen(key) > 100))
        s = bad(err, "\"key\" must name the device key (no ':', at most 100 characters)");
    const char *strategy = json_string_value(json_object_get(p, "strategy"));
    tt_strategy parsed;
    if (!s && strategy && !tt_strategy_parse(strategy, &parsed))
        s = bad(err, "\"strategy\" is random, grid, ga, xgb, evo or sketch-random");
    double trials, seed, priority, parallel, wait;
    if (!s)
        s = number_field(p, "trials", 1, 1e7, 64, &trials, err);
    if (!s)
        s = number_field(p, "seed", 0, 9007199254740992.0, 1, &seed, err);
    if (!s)
        s = number_field(p, "priority", -1e9, 1e9, 0, &priority, err);
    if (!s)
        s = number_field(p, "parallel", 0, 16, 0, &parallel, err);
    if (!s)
        s = number_field(p, "device_wait", 1, 1e6, 600, &wait, err);
    const json_t *m = json_object_get(p, "measure");
    if (!s && m && !json_is_object(m))
        s = bad(err, "\"measure\" must be an object");
    double number, repeat, min_ms, budget_ms, cool_ms, timeout;
    /* what the job leaves out is what tvm-tune run would use on its target */
    tt_measure_options d = {
        .number = -1, .repeat = -1, .min_repeat_ms = -1, .repeat_budget_ms = -1, .timeout_s = -1};
    tt_tune_measure_defaults(target ? target : "llvm", &d);
    if (!s)
        s = number_field(m, "number", 1, 1e6, d.number, &number, err);
    if (!s)
        s = number_field(m, "repeat", 1, TT_MEASURE_MAX_REPEAT, d.repeat, &repeat, err);
    if (!s)
        s = number_field(m, "min_repeat_ms", 0, 1e6, d.min_repeat_ms, &min_ms, err);
    if (!s)
        s = number_field(m, "repeat_budget_ms", 0, 1e6, d.repeat_budget_ms, &budget_ms, err);
    if (!s)
        s = number_field(m, "cooldown_ms", 0, 1e6, 0, &cool_ms, err);
    if (!s)
        s = number_field(m, "timeout_s", 0.1, 1e5, 10, &timeout, err);
    if (s) {
        json_decref(out);
        return s;
    }
    const json_t *search = json_object_get(p, "search");
    double population, diversity;
    if (!s && search && !json_is_object(search))
        s = bad(err, "\"search\" must be an object");
    if (!s)
        s = number_field(search, "population", 0, 1e6, 0, &population, err);
    if (!s)
        s = number_field(search, "diversity", 0, 64, 0, &diversity, err);
    const char *features = json_string_value(json_object_get(search, "features"));
    const char *scheduler = json_string_value(json_object_get(search, "scheduler"));
    if (!s && features && strcmp(features, "knob") && strcmp(features, "itervar"))
        s = bad(err, "\"search\".\"features\" is knob or itervar");
    if (!s && scheduler && strcmp(scheduler, "gradient") && strcmp(scheduler, "round-robin"))
        s = bad(err, "\"search\".\"scheduler\" is gradient or round-robin");
    if (s) {
        json_decref(out);
        return s;
    }
    json_object_set_new(out, "search",
                        json_pack("{s:i, s:f, s:s, s:s, s:b}", "population", (int)population,
                                  "diversity", diversity, "features", features ? features : "knob",
                                  "scheduler", scheduler ? scheduler : "gradient", "overlap_search",
                                  json_is_true(json_object_get(search, "overlap_search"))));
    tt_cache_flush flush = TT_CACHE_FLUSH_OFF;
    const json_t *flush_j = json_object_get(m, "cache_flush");
    if (flush_j && !tt_cache_flush_from_json(flush_j, &flush)) {
        json_decref(out);
        return bad(err, "\"measure\".\"cache_flush\" is false, true (inputs), \"off\", "
                        "\"inputs\", \"constants\" or \"network\"");
    }
    /* TVM's flush of every input goes with one call per sample */
    bool per_sample = flush == TT_CACHE_FLUSH_INPUTS;
    double network_bytes = 0;
    s = number_field(m, "network_bytes", 0, 9e15, 0, &network_bytes, err);
    if (s) {
        json_decref(out);
        return s;
    }
    json_object_set_new(out, "target", json_string(target ? target : "llvm"));
    json_object_set_new(out, "key", json_string(key));
    json_object_set_new(out, "strategy", json_string(strategy ? strategy : "xgb"));
    json_object_set_new(out, "trials", json_integer((json_int_t)trials));
    json_object_set_new(out, "seed", json_integer((json_int_t)seed));
    json_object_set_new(out, "priority", json_integer((json_int_t)priority));
    json_object_set_new(out, "parallel", json_integer((json_int_t)parallel));
    json_object_set_new(out, "device_wait", json_real(wait));
    json_object_set_new(out, "measure",
                        json_pack("{s:i, s:i, s:f, s:f, s:f, s:o, s:I, s:f}", "number",
                                  per_sample ? 1 : (int)number, "repeat", (int)repeat,
                                  "min_repeat_ms", per_sample ? 0.0 : min_ms, "repeat_budget_ms",
                                  budget_ms, "cooldown_ms", cool_ms, "cache_flush",
                                  tt_cache_flush_json(flush), "network_bytes",
                                  (json_int_t)network_bytes, "timeout_s", timeout));
    *normalised = out;
    return TT_OK;
}

/* ---- running a job ---- */

static void say(tt_jobs *j, tt_log_level level, int64_t id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void say(tt_jobs *j, tt_log_level level, int64_t id, const char *fmt, ...)
{
    char context[32];
    snprintf(context, sizeof(context), "job %lld", (long long)id);
    va_list ap;
    va_start(ap, fmt);
    tt_logger_vlog(j->log, level, context, fmt, ap);
    va_end(ap);
}

/* The job's stored parameters (malloc'ed JSON text), or NULL. */
static char *job_params(tt_jobs *j, int64_t id, char *state, size_t n)
{
    tt_db_job *jobs;
    size_t count;
    char *params = NULL;
    if (tt_db_jobs_list(j->db, &jobs, &count))
        return NULL;
    for (size_t i = 0; i < count; i++)
        if (jobs[i].id == id) {
            params = strdup(jobs[i].params);
            if (state)
                snprintf(state, n, "%s", jobs[i].state);
        }
    tt_db_jobs_free(jobs, count);
    return params;
}

static void run_job(tt_jobs *j, worker_slot *slot)
{
    int64_t id = slot->id;
    pthread_mutex_lock(&j->mu);
    char *text = job_params(j, id, NULL, 0);
    tt_db_job_update(j->db, id, "running", 0, 0);
    tt_db_job_set_message(j->db, id, "");
    pthread_mutex_unlock(&j->mu);
    json_t *p = NULL;
    tt_errbuf err = {{0}};
    tt_status s = text
                      ? tt_json_parse(text, strlen(text), &p, &err)
                      : tt_err(&err, TT_ERR_NOT_FOUND, "job %lld has no parameters", (long long)id);
    free(text);
    const json_t *ws = json_object_get(p, "workloads"), *wv = json_object_get(p, "weights");
    const json_t *m = json_object_get(p, "measure");
    int nw = (int)json_array_size(ws);
    const char *workloads[TT_TUNE_MAX_TASKS];
    double weights[TT_TUNE_MAX_TASKS];
    for (int i = 0; i < nw && i < TT_TUNE_MAX_TASKS; i++) {
        workloads[i] = json_string_value(json_array_get(ws, i));
        weights[i] = json_number_value(json_array_get(wv, i));
    }
    tt_remote_options remote = {0};
    remote.tracker_host = j->host;
    remote.tracker_port = j->port;
    remote.auth = j->auth;
    remote.key = json_string_value(json_object_get(p, "key"));
    remote.priority = (int)json_integer_value(json_object_get(p, "priority"));
    remote.parallel = (int)json_integer_value(json_object_get(p, "parallel"));
    remote.request_timeout_s = json_number_value(json_object_get(p, "device_wait"));
    remote.stop = &slot->stop;
    tt_tune_options o;
    memset(&o, 0, sizeof(o));
    o.workloads = workloads;
    o.weights = weights;
    o.nworkloads = nw;
    o.target = json_string_value(json_object_get(p, "target"));
    o.trials = json_integer_value(json_object_get(p, "trials"));
    o.seed = (uint64_t)json_integer_value(json_object_get(p, "seed"));
    const char *strategy = json_string_value(json_object_get(p, "strategy"));
    tt_strategy_parse(strategy, &o.strategy);
    const json_t *search = json_object_get(p, "search");
    o.population = (int)json_integer_value(json_object_get(search, "population"));
    o.diversity = json_number_value(json_object_get(search, "diversity"));
    const char *features = json_string_value(json_object_get(search, "features"));
    o.features = features && !strcmp(features, "itervar") ? TT_FEATURES_ITERVAR : TT_FEATURES_KNOB;
    const char *policy = json_string_value(json_object_get(search, "scheduler"));
    o.policy = policy && !strcmp(policy, "round-robin") ? TT_SCHED_ROUND_ROBIN : TT_SCHED_GRADIENT;
    o.overlap_search = json_is_true(json_object_get(search, "overlap_search"));
    o.db_path = j->db_path;
    o.db_max_bytes = j->db_max_bytes;
    o.stop = &slot->stop;
    o.remote = &remote;
    o.job = id;
    o.threads = 0;
    o.measure.number = (int)json_integer_value(json_object_get(m, "number"));
    o.measure.repeat = (int)json_integer_value(json_object_get(m, "repeat"));
    o.measure.min_repeat_ms = json_number_value(json_object_get(m, "min_repeat_ms"));
    o.measure.repeat_budget_ms = json_number_value(json_object_get(m, "repeat_budget_ms"));
    o.measure.cooldown_ms = json_number_value(json_object_get(m, "cooldown_ms"));
    tt_cache_flush_from_json(json_object_get(m, "cache_flush"), &o.measure.cache_flush);
    o.measure.network_bytes = (int64_t)json_integer_value(json_object_get(m, "network_bytes"));
    o.measure.timeout_s = json_number_value(json_object_get(m, "timeout_s"));
    o.measure.rtol = 1e-4;
    o.measure.atol = 1e-5;
    if (!s && (nw < 1 || nw > 64 || !remote.key))
        s = tt_err(&err, TT_ERR_PARSE, "job %lld has malformed parameters", (long long)id);
    tt_tune_summary *sums = s ? NULL : calloc((size_t)nw, sizeof(tt_tune_summary));
    if (!s && !sums)
        s = tt_err(&err, TT_ERR_NOMEM, "out of memory");
    if (!s) {
        say(j, TT_LOG_INFO, id, "started (%d workload%s on key '%s')", nw, nw > 1 ? "s" : "",
            remote.key);
        char context[32];
        snprintf(context, sizeof(context), "job %lld", (long long)id);
        FILE *tuner_log = tt_logger_stream(j->log, TT_LOG_INFO, context);
        s = tt_tune_run(&o, sums, tuner_log, &err);
        if (tuner_log)
            fclose(tuner_log);
    }
    free(sums);
    json_decref(p);
    pthread_mutex_lock(&j->mu);
    tt_db_stats st = {0};
    tt_db_stats_get(j->db, id, &st);
    const char *state = slot->cancelled ? "cancelled"
                        : j->closing    ? "running" /* the daemon stops: resume at next start */
                        : s             ? "failed"
                                        : "done";
    tt_db_job_update(j->db, id, state, st.records, st.best_s);
    if (s && !slot->cancelled && !j->closing)
        tt_db_job_set_message(j->db, id, err.msg);
    else if (slot->cancelled)
        tt_db_job_set_message(j->db, id, "cancelled by request");
    pthread_mutex_unlock(&j->mu);
    say(j, !strcmp(state, "failed") ? TT_LOG_ERROR : TT_LOG_INFO, id,
        "%s after %lld measurements%s%s",
        !strcmp(state, "running") ? "interrupted (resumes at the next start)" : state,
        (long long)st.records, s && !slot->cancelled ? ": " : "",
        s && !slot->cancelled ? err.msg : "");
}

static void *worker(void *arg)
{
    worker_slot *slot = arg;
    tt_jobs *j = slot->j;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        while (!j->closing && j->queue.len == 0)
            pthread_cond_wait(&j->wake, &j->mu);
        if (j->closing) {
            pthread_mutex_unlock(&j->mu);
            return NULL;
        }
        slot->id = j->queue.data[0];
        memmove(j->queue.data, j->queue.data + 1, sizeof(int64_t) * --j->queue.len);
        slot->stop = 0;
        slot->cancelled = false;
        pthread_mutex_unlock(&j->mu);
        run_job(j, slot);
        pthread_mutex_lock(&j->mu);
        slot->id = 0;
        pthread_mutex_unlock(&j->mu);
    }
}

/* ---- the service ---- */

tt_status tt_jobs_open(const tt_jobs_config *cfg, tt_jobs **out, tt_errbuf *err)
{
    *out = NULL;
    const char *db_path = cfg->db_path, *tracker_host = cfg->tracker_host;
    tt_jobs *j = calloc(1, sizeof(*j));
    if (!j || !(j->db_path = strdup(db_path))) {
        free(j);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    snprintf(j->host, sizeof(j->host), "%s",
             !strcmp(tracker_host, "0.0.0.0") ? "127.0.0.1"
             : !strcmp(tracker_host, "::")    ? "::1"
                                              : tracker_host);
    snprintf(j->name, sizeof(j->name), "%s", cfg->name ? cfg->name : "");
    j->port = cfg->tracker_port;
    j->auth = cfg->auth;
    j->log = cfg->log;
    j->max_per_peer = cfg->max_per_peer > 0 ? cfg->max_per_peer : 0;
    j->db_max_bytes = cfg->db_max_bytes;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->wake, NULL);
    tt_status s = tt_db_open(db_path, 0, &j->db, err);
    if (s) {
        free(j->db_path);
        free(j);
        return s;
    }
    /* This handle answers the event loop (submit, status, the dashboard): while a database
     * server is away it must not hold the tracker's devices and clients for minutes, so it
     * gives up after a few seconds and the request gets the reason.  The jobs' own tuning runs
     * open handles of their own, which wait the full patience with their records kept. */
    tt_db_set_patience(j->db, 5);
    /* Jobs an earlier start of this tracker left queued or running go first, in submission
     * order; other trackers' jobs in a shared database are theirs, and one of an older version
     * (no owner) is claimed by the first tracker that starts. */
    tt_db_job *jobs;
    size_t n;
    if (!tt_db_jobs_list(j->db, &jobs, &n)) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(jobs[i].state, "queued") && strcmp(jobs[i].state, "running"))
                continue;
            bool mine = !strcmp(jobs[i].owner, j->name);
            if (!mine && !jobs[i].owner[0] && tt_db_job_claim(j->db, jobs[i].id, j->name, &mine))
                mine = false;
            if (mine) {
                TT_VEC_PUSH(&j->queue, jobs[i].id);
                say(j, TT_LOG_INFO, jobs[i].id, "resumes (%s when the daemon stopped)",
                    jobs[i].state);
            }
        }
        tt_db_jobs_free(jobs, n);
    }
    int workers = cfg->workers;
    j->nworkers = workers < 1 ? 1 : workers > MAX_WORKERS ? MAX_WORKERS : workers;
    for (int k = 0; k < j->nworkers; k++) {
        j->slot[k].j = j;
        if (pthread_create(&j->th[k], NULL, worker, &j->slot[k])) {
            j->nworkers = k;
            break;
        }
    }
    if (j->nworkers == 0) {
        tt_jobs_close(j);
        return tt_err(err, TT_ERR_NOMEM, "cannot start job workers");
    }
    *out = j;
    return TT_OK;
}

void tt_jobs_close(tt_jobs *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    j->closing = true;
    for (int k = 0; k < j->nworkers; k++)
        j->slot[k].stop = 1;
    pthread_cond_broadcast(&j->wake);
    pthread_mutex_unlock(&j->mu);
    for (int k = 0; k < j->nworkers; k++)
        pthread_join(j->th[k], NULL);
    tt_db_close(j->db);
    TT_VEC_FREE(&j->queue);
    pthread_cond_destroy(&j->wake);
    pthread_mutex_destroy(&j->mu);
    free(j->db_path);
    free(j);
}

/* ---- the extension messages ---- */

static char *reply_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *reply_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *r = json_pack("[i, s]", -1, msg);
    char *text = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    return text;
}

static char *reply_ok(json_t *v)
{
    json_t *r = json_pack("[i, o]", 0, v);
    char *text = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    return text;
}

/* A job as status replies show it (under j->mu). */
static json_t *job_json(tt_jobs *j, const tt_db_job *g)
{
    json_t *params = NULL;
    tt_errbuf err;
    if (tt_json_parse(g->params, strlen(g->params), &params, &err))
        params = json_null();
    tt_db_stats st = {0};
    tt_db_stats_get(j->db, g->id, &st);
    bool running = false;
    for (int k = 0; k < j->nworkers; k++)
        running |= j->slot[k].id == g->id;
    const char *state = g->state;
    if (!strcmp(state, "running") && !running)
        state = "queued"; /* resumed after a restart, waiting for a worker */
    return json_pack("{s:I, s:s, s:s, s:o, s:I, s:I, s:I, s:f, s:f, s:f}", "id", (json_int_t)g->id,
                     "state", state, "message", g->message ? g->message : "", "params", params,
                     "measured", (json_int_t)st.records, "errors",
                     (json_int_t)(st.records - st.errors[0]), "trials_total",
                     (json_int_t)g->trials_total, "best_s", st.best_s, "created", g->created,
                     "updated", g->updated);
}

static char *status(tt_jobs *j, int64_t id, bool all)
{
    tt_db_job *jobs;
    size_t n;
    if (tt_db_jobs_list(j->db, &jobs, &n))
        return reply_error("cannot read the jobs: %s", tt_db_errmsg(j->db));
    json_t *list = json_array(), *one = NULL;
    char other[300] = "";
    for (size_t i = 0; i < n; i++) {
        bool mine = !strcmp(jobs[i].owner, j->name);
        if (all && mine)
            json_array_append_new(list, job_json(j, &jobs[i]));
        else if (!all && jobs[i].id == id && mine)
            one = job_json(j, &jobs[i]);
        else if (!all && jobs[i].id == id)
            snprintf(other, sizeof(other), "%s", jobs[i].owner);
    }
    tt_db_jobs_free(jobs, n);
    if (all)
        return reply_ok(list);
    json_decref(list);
    if (other[0])
        return reply_error("job %lld belongs to the tracker %s (ask it)", (long long)id, other);
    return one ? reply_ok(one) : reply_error("there is no job %lld", (long long)id);
}

json_t *tt_jobs_overview(tt_jobs *j, int best_limit)
{
    pthread_mutex_lock(&j->mu);
    json_t *list = json_array(), *best = json_array();
    tt_db_job *jobs;
    size_t n;
    if (!tt_db_jobs_list(j->db, &jobs, &n)) {
        for (size_t i = n; i-- > 0;) /* newest first */
            if (!strcmp(jobs[i].owner, j->name))
                json_array_append_new(list, job_json(j, &jobs[i]));
        tt_db_jobs_free(jobs, n);
    }
    tt_db_best_entry *e;
    if (!tt_db_leaderboard(j->db, best_limit, &e, &n)) {
        for (size_t i = 0; i < n; i++)
            json_array_append_new(best,
                                  json_pack("{s:s, s:s, s:f, s:f, s:I}", "workload", e[i].workload,
                                            "target", e[i].target, "best_s", e[i].best_s, "gflops",
                                            e[i].gflops, "records", (json_int_t)e[i].records));
        tt_db_leaderboard_free(e, n);
    }
    pthread_mutex_unlock(&j->mu);
    return json_pack("{s:o, s:o}", "jobs", list, "best", best);
}

typedef struct {
    tt_plot_series s[8];
    char workload[8][300];
    int n;
} curve_ctx;

static int curve_row(void *vctx, const tt_db_row *row)
{
    curve_ctx *c = vctx;
    int k = 0;
    while (k < c->n && strcmp(c->workload[k], row->workload))
        k++;
    if (k == c->n) {
        if (c->n == 8)
            return 0; /* eight lines are as many as the dashboard's plot can show */
        memset(&c->s[k], 0, sizeof(c->s[k]));
        snprintf(c->workload[k], sizeof(c->workload[k]), "%s", row->workload);
        snprintf(c->s[k].label, sizeof(c->s[k].label), "%.60s", row->workload);
        c->n++;
    }
    return tt_plot_series_push(&c->s[k], row->error_no == 0 ? row->gflops : 0) ? 0 : 1;
}

char *tt_jobs_curve_svg(tt_jobs *j, int64_t id)
{
    curve_ctx c;
    memset(&c, 0, sizeof(c));
    tt_db_filter f = {NULL, NULL, NULL, id, 0};
    pthread_mutex_lock(&j->mu);
    tt_status s = tt_db_history(j->db, &f, curve_row, &c);
    pthread_mutex_unlock(&j->mu);
    char title[64];
    snprintf(title, sizeof(title), "job %lld", (long long)id);
    char *svg = s || !c.n ? NULL : tt_plot_svg(c.s, c.n, title);
    for (int i = 0; i < c.n; i++)
        tt_plot_series_clear(&c.s[i]);
    return svg;
}

static char *submit(tt_jobs *j, const char *peer, const json_t *params)
{
    json_t *norm;
    tt_errbuf err = {{0}};
    if (tt_jobs_check_params(params, &norm, &err))
        return reply_error("%s", err.msg);
    json_object_set_new(norm, "submitter", json_string(peer)); /* for --max-jobs-per-peer */
    char *text = json_dumps(norm, JSON_COMPACT);
    int64_t total = json_integer_value(json_object_get(norm, "trials")) *
                    (int64_t)json_array_size(json_object_get(norm, "workloads"));
    json_decref(norm);
    if (!text)
        return reply_error("out of memory");
    int64_t id = 0;
    tt_status s = tt_db_job_create(j->db, j->name, text, total, &id);
    free(text);
    if (s)
        return reply_error("cannot store the job: %s", tt_db_errmsg(j->db));
    TT_VEC_PUSH(&j->queue, id);
    pthread_cond_signal(&j->wake);
    say(j, TT_LOG_INFO, id, "submitted by %s", peer);
    return reply_ok(json_integer((json_int_t)id));
}

static char *cancel(tt_jobs *j, int64_t id)
{
    char state[32] = "";
    char *params = job_params(j, id, state, sizeof(state));
    if (!params)
        return reply_error("there is no job %lld", (long long)id);
    free(params);
    for (size_t i = 0; i < j->queue.len; i++)
        if (j->queue.data[i] == id) {
            memmove(j->queue.data + i, j->queue.data + i + 1,
                    sizeof(int64_t) * (j->queue.len - i - 1));
            j->queue.len--;
            tt_db_job_update(j->db, id, "cancelled", 0, 0);
            tt_db_job_set_message(j->db, id, "cancelled by request before it started");
            return status(j, id, false);
        }
    for (int k = 0; k < j->nworkers; k++)
        if (j->slot[k].id == id) {
            j->slot[k].cancelled = true;
            j->slot[k].stop = 1; /* stops after the candidates in flight */
            tt_db_job_set_message(j->db, id, "cancelling: stops after the candidates in flight");
            return status(j, id, false);
        }
    /* Queued or running, but neither queued nor running here: another tracker's job, and the
     * status says whose. */
    if (!strcmp(state, "queued") || !strcmp(state, "running"))
        return status(j, id, false);
    return reply_error("job %lld is %s, not queued or running", (long long)id, state);
}

/* Queued or running jobs that `peer` submitted. */
static int active_of(tt_jobs *j, const char *peer)
{
    tt_db_job *jobs;
    size_t n;
    if (tt_db_jobs_list(j->db, &jobs, &n))
        return 0;
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        if ((strcmp(jobs[i].state, "queued") && strcmp(jobs[i].state, "running")) ||
            strcmp(jobs[i].owner, j->name))
            continue;
        json_t *p = json_loads(jobs[i].params ? jobs[i].params : "{}", 0, NULL);
        const char *who = json_string_value(json_object_get(p, "submitter"));
        count += who && !strcmp(who, peer);
        json_decref(p);
    }
    tt_db_jobs_free(jobs, n);
    return count;
}

char *tt_jobs_handle(tt_jobs *j, const char *peer, const json_t *msg)
{
    json_int_t code = json_integer_value(json_array_get(msg, 0));
    const json_t *arg = json_array_get(msg, 1);
    pthread_mutex_lock(&j->mu);
    char *reply;
    int active;
    if (code == TT_TRACKER_JOB_SUBMIT && j->max_per_peer &&
        (active = active_of(j, peer)) >= j->max_per_peer)
        reply = reply_error("%s already has %d jobs queued or running (the tracker's "
                            "--max-jobs-per-peer); wait for one to end or cancel one",
                            peer, active);
    else if (code == TT_TRACKER_JOB_SUBMIT)
        reply = submit(j, peer, arg);
    else if (code == TT_TRACKER_JOB_LIST)
        reply = status(j, 0, true);
    else if ((code == TT_TRACKER_JOB_STATUS || code == TT_TRACKER_JOB_CANCEL) &&
             !json_is_integer(arg))
        reply = reply_error("message %lld needs a job id", (long long)code);
    else if (code == TT_TRACKER_JOB_STATUS)
        reply = status(j, json_integer_value(arg), false);
    else if (code == TT_TRACKER_JOB_CANCEL)
        reply = cancel(j, json_integer_value(arg));
    else
        reply = reply_error("unknown extension code %lld (this tracker knows 100 to 103)",
                            (long long)code);
    pthread_mutex_unlock(&j->mu);
    return reply;
}
