/* The tuning loop (tvm-tune run): tasks opened, rounds scheduled among them, summaries.  The
 * parts live beside it: tune_task.c (a workload's task: history, reference, resume), tune_round.c
 * (one round: pick, compile, measure, record), tune_template.c (the template strategies xgb and
 * ga, and their starting points), tune_evo.c (Ansor's evolutionary search and transfer),
 * tune_farm.c (measuring on a farm's devices). */
#include "tune_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void tt_host_fingerprint(char *out, size_t n)
{
    char model[256] = "unknown-cpu";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[1024];
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "model name", 10) || !strncmp(line, "Model", 5)) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(model, sizeof(model), "%s", c + 2);
                model[strcspn(model, "\n")] = 0;
                break;
            }
        }
    if (f)
        fclose(f);
    const char *triple, *cpu, *features;
    tt_codegen_host(&triple, &cpu, &features);
    char hex[17];
    tt_hash64_hex(tt_hash64_str(features), hex);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double gib = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / (1 << 30);
    snprintf(out, n, "%s|%ldc|%.0fG|%s|%.8s", model, cores, gib, cpu, hex);
}

static const char *const strategy_names[] = {"random", "grid", "ga", "xgb", "evo", "sketch-random"};

const char *tt_strategy_name(tt_strategy s)
{
    return (unsigned)s < TT_ARRAY_LEN(strategy_names) ? strategy_names[s] : "unknown";
}

bool tt_strategy_parse(const char *name, tt_strategy *out)
{
    for (size_t i = 0; name && i < TT_ARRAY_LEN(strategy_names); i++)
        if (!strcmp(name, strategy_names[i])) {
            *out = (tt_strategy)i;
            return true;
        }
    return false;
}

bool tt_strategy_uses_sketches(tt_strategy s)
{
    return s == TT_STRATEGY_EVO || s == TT_STRATEGY_SKETCH_RANDOM;
}

void tt_tune_measure_defaults(const char *target, tt_measure_options *m)
{
    bool gpu = target && !strncmp(target, "opencl", 6);
    if (m->number < 0)
        m->number = 1;
    if (m->repeat < 0)
        m->repeat = gpu ? 5 : TT_MEASURE_MAX_REPEAT;
    if (m->min_repeat_ms < 0)
        m->min_repeat_ms = gpu ? 20 : 0.01;
    if (m->repeat_budget_ms < 0)
        m->repeat_budget_ms = gpu ? 0 : 100;
    if (m->timeout_s < 0)
        m->timeout_s = 10;
}

double tt_tune_deadline(const tt_measure_options *m, double best_s)
{
    double limit = m->timeout_s > 0 ? m->timeout_s : 10;
    if (best_s <= 0)
        return limit;
    int reps = m->repeat > 0 ? m->repeat : 3, number = m->number > 0 ? m->number : 1;
    /* A sample lasts at least min_repeat_ms whatever the kernel's speed. */
    double sample = fmax(50 * best_s * number, m->min_repeat_ms / 1000.0 * 1.618);
    double sampling = reps * sample;
    /* A budget stops the samples once they pass it, after TT_MEASURE_MIN_SAMPLES. */
    if (m->repeat_budget_ms > 0)
        sampling = fmin(
            sampling, fmax(TT_MEASURE_MIN_SAMPLES * sample, m->repeat_budget_ms / 1000.0 + sample));
    double d = 50 * best_s + sampling + 1.0;
    return d < 1.0 ? 1.0 : d > limit ? limit : d;
}

/* Measures up to `n` more configs; t->exhausted when the search has nothing new to offer. */
static tt_status task_measure(task *t, int64_t n, tt_errbuf *err)
{
    const tt_tune_options *o = t->o;
    int64_t goal = t->total + n;
    candidate *c = t->cands;
    while (t->total < goal && !(o->stop && *o->stop)) {
        int64_t left = goal - t->total;
        int k = tt__tune_pick(t, c, left < t->batch ? (int)left : t->batch);
        if (k == 0) {
            t->exhausted = true;
            if (t->log && tt_strategy_uses_sketches(o->strategy))
                fprintf(t->log, "%s%s: the search found no unmeasured program\n",
                        o->progress ? "\n" : "", t->w->key);
            else if (t->log)
                fprintf(t->log, "%s%s: the search space is exhausted (%llu configs)\n",
                        o->progress ? "\n" : "", t->w->key, (unsigned long long)t->space.size);
            break;
        }
        tt_status s = tt__tune_round_trip(t, c, k, err);
        for (int i = 0; i < k; i++) {
            free(c[i].config);
            free(c[i].rows);
            free(c[i].layouts);
            memset(&c[i], 0, sizeof(c[i]));
        }
        if (s)
            return s;
    }
    return TT_OK;
}

/* Ansor's table: per task its best latency, speed, weight and trials; the estimated latency of
 * the network is the sum of weight x best latency (incomplete while a task has none). */
static void print_task_table(const tt_tune_options *o, task **tasks, int n, FILE *log)
{
    double total = 0;
    int64_t trials = 0;
    bool complete = true;
    fprintf(log, "%s|  ID | %-28s | Latency (ms) | Speed (GFLOPS) | Weight | Trials |\n",
            o->progress ? "\n" : "", "Task");
    for (int i = 0; i < n; i++) {
        const task *t = tasks[i];
        double w = o->weights ? o->weights[i] : 1.0;
        char lat[32] = "-", speed[32] = "-";
        if (t->best_s > 0) {
            snprintf(lat, sizeof(lat), "%.4f", t->best_s * 1e3);
            snprintf(speed, sizeof(speed), "%.2f", t->w->flops / t->best_s / 1e9);
            total += w * t->best_s;
        } else
            complete = false;
        trials += t->total;
        fprintf(log, "| %3d | %-28.28s | %12s | %14s | %6g | %6lld |\n", i, o->labels[i], lat,
                speed, w, (long long)t->total);
    }
    fprintf(log, "Estimated total latency: %s%.3f ms  Trials: %lld\n",
            complete ? "" : ">= ", total * 1e3, (long long)trials);
    fflush(log);
}

/* Tunes every task under one budget of o->trials per task on average: one warm-up round each,
 * then rounds of min(64, budget / tasks) measurements to the task the scheduler picks. */
static tt_status schedule_tasks(const tt_tune_options *o, task **tasks, int n, FILE *log,
                                tt_errbuf *err)
{
    int64_t budget = o->trials * n, spent = 0;
    for (int i = 0; i < n; i++)
        spent += tasks[i]->total;
    int64_t per_round = budget / n < 64 ? budget / n : 64;
    if (per_round < 1)
        per_round = 1;
    tt_sched_task st[TT_TUNE_MAX_TASKS];
    tt_rng rng;
    tt_rng_seed(&rng, o->seed ^ 0x7a5c);
    for (int i = 0; i < n; i++) {
        task *t = tasks[i];
        st[i] = (tt_sched_task){o->weights ? o->weights[i] : 1.0,
                                t->w->flops,
                                t->best_s,
                                (int)((t->total + per_round - 1) / per_round),
                                NULL,
                                -1,
                                false};
        /* Resumed rounds: the best so far stands for each of them. */
        t->sched_hist = calloc((size_t)st[i].rounds + 1024, sizeof(double));
        if (!t->sched_hist)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        t->sched_cap = st[i].rounds + 1024;
        for (int r = 0; r < st[i].rounds; r++)
            t->sched_hist[r] = t->best_s;
        st[i].hist = t->sched_hist;
        for (int j = 0; j < i; j++) {
            const char *a = strchr(tasks[j]->w->key, ':'), *b = strchr(t->w->key, ':');
            size_t la = a ? (size_t)(a - tasks[j]->w->key) : strlen(tasks[j]->w->key);
            size_t lb = b ? (size_t)(b - t->w->key) : strlen(t->w->key);
            if (la == lb && !strncmp(tasks[j]->w->key, t->w->key, la) &&
                tt_sched_similarity_bucket(tasks[j]->w->flops) ==
                    tt_sched_similarity_bucket(t->w->flops))
                st[i].group = st[j].group >= 0 ? st[j].group : (st[j].group = j);
        }
    }
    int last = -1;
    for (int round = 0; spent < budget && !(o->stop && *o->stop); round++) {
        int i;
        if (round < n) {
            i = round; /* warm-up: every task once */
            if (st[i].dead)
                continue;
        } else {
            i = tt_sched_pick(st, n, o->policy, last, &rng);
            if (i < 0)
                break;
        }
        task *t = tasks[i];
        int64_t want = budget - spent < per_round ? budget - spent : per_round;
        int64_t before = t->total;
        if (log && n > 1 && o->progress)
            fprintf(log, "\r%-78s\r", "");
        tt_status s = task_measure(t, want, err);
        if (s)
            return s;
        spent += t->total - before;
        last = i;
        st[i].best_s = t->best_s;
        if (st[i].rounds < t->sched_cap)
            t->sched_hist[st[i].rounds++] = t->best_s;
        if (t->exhausted || t->total == before)
            st[i].dead = true;
        if (n > 1 && st[i].best_s <= 0 && st[i].rounds >= 1)
            st[i].dead = true; /* nothing valid after its warm-up */
        tt_sched_update_groups(st, n, i, TT_SCHED_BETA);
        if (log && o->labels && n > 1 && round >= n - 1)
            print_task_table(o, tasks, n, log);
    }
    for (int i = 0; i < n; i++)
        tt__tune_progress(tasks[i], true);
    return TT_OK;
}

tt_status tt_tune_run(const tt_tune_options *o, tt_tune_summary *summaries, FILE *log,
                      tt_errbuf *err)
{
    for (int i = 0; i < o->nworkloads; i++) {
        memset(&summaries[i], 0, sizeof(summaries[i]));
        snprintf(summaries[i].workload, sizeof(summaries[i].workload), "%s", o->workloads[i]);
    }
    tt_target t;
    tt_status s = tt_target_parse_user(o->target ? o->target : "llvm", &t, err);
    if (s)
        return s;
    bool opencl = !strcmp(t.kind, "opencl");
    if (strcmp(t.kind, "llvm") && strcmp(t.kind, "c") && !opencl)
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "target kind '%s' is not supported (use llvm for CPUs, opencl for GPUs)",
                      t.kind);
    farm fm = {0};
    pthread_mutex_init(&fm.mu, NULL);
    if (o->remote) {
        fm.o = o->remote;
        fm.log = log;
        fm.started = tt_clock_wall();
        fm.stop = o->stop;
        snprintf(fm.key, sizeof(fm.key), "%s", o->remote->key ? o->remote->key : "");
        if ((s = tt__tune_farm_check(&fm, &t, err))) {
            tt__tune_farm_release(&fm, 0);
            return s;
        }
    } else if (opencl) {
        tt_device_info here;
        tt_device_probe(&here);
        if ((s = tt_device_probe_opencl(&here, o->measure.opencl_device, err)))
            return tt_err_prefix(err, s, "OpenCL");
        char hint[1024];
        tt_cl_driver_hint(here.opencl_selected < 0 ? NULL : &here.opencl[here.opencl_selected],
                          NULL, hint, sizeof(hint));
        if (here.opencl_selected < 0)
            return tt_err(err, TT_ERR_NOT_FOUND,
                          "the target is OpenCL but this machine has no OpenCL device (%s)",
                          hint[0] ? hint
                                  : "install the GPU's OpenCL driver, or pocl-opencl-icd for the "
                                    "CPU");
        fm.cl = here.opencl[here.opencl_selected];
        if (log)
            fprintf(log, "measuring on OpenCL device %d:%d, %s (%s)\n", fm.cl.platform,
                    fm.cl.device, fm.cl.name, fm.cl.version);
        if (log && hint[0])
            fprintf(log, "note: %s\n", hint);
    } else if (t.triple[0]) {
        const char *host, *cpu, *features;
        tt_codegen_host(&host, &cpu, &features);
        if (strcmp(t.triple, host))
            return tt_err(
                err, TT_ERR_UNSUPPORTED,
                "target triple %s is not this machine (%s): measure it on a device of the farm",
                t.triple, host);
    }
    tt_db *db;
    /* A tracker's job: its tracker reached the server, which may be restarting right now. */
    s = tt_db_open(o->db_path ? o->db_path : "tuning.db", o->job ? TT_DB_WAIT_FOR_SERVER : 0, &db,
                   err);
    if (s)
        return s;
    if (o->db_max_bytes > 0 && (s = tt_db_limit_size(db, o->db_max_bytes))) {
        tt_err(err, s, "%s", tt_db_errmsg(db));
        tt_db_close(db);
        return s;
    }
    task *tasks[TT_TUNE_MAX_TASKS] = {0};
    int n = o->nworkloads < TT_TUNE_MAX_TASKS ? o->nworkloads : TT_TUNE_MAX_TASKS;
    if (o->nworkloads > TT_TUNE_MAX_TASKS)
        s = tt_err(err, TT_ERR_LIMIT, "at most %d workloads in one run", TT_TUNE_MAX_TASKS);
    /* OpenCL measured here: compile threads for the whole run, each keeping a builder with the
     * device's context (its driver's start and context cost seconds a build otherwise) */
    compile_pool pool;
    bool pooled = opencl && !o->remote && !o->objective;
    if (pooled)
        tt__compile_pool_start(&pool, o->threads > 0 ? o->threads : 1);
    for (int i = 0; i < n && !s; i++) {
        s = tt__tune_task_open(o, o->workloads[i], db, o->remote ? &fm : NULL,
                               opencl ? &fm.cl : NULL, log, &tasks[i], err);
        if (tasks[i] && pooled)
            tasks[i]->pool = &pool;
    }
    if (!s)
        s = schedule_tasks(o, tasks, n, log, err);
    if (pooled)
        tt__compile_pool_stop(&pool);
    for (int k = 0; k < FARM_MAX_DEVICES; k++)
        tt__tune_farm_release(&fm, k);
    pthread_mutex_destroy(&fm.mu);
    for (int i = 0; i < n; i++)
        if (tasks[i]) {
            tt__tune_task_close(tasks[i], o->workloads[i], &summaries[i]);
            summaries[i].device_losses = fm.losses;
            summaries[i].devices_quarantined = fm.quarantined;
            summaries[i].queue_wait_s = fm.wait_s;
        }
    tt_db_close(db);
    return s;
}
