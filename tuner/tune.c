#include "tune.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <jansson.h>

#include "../codegen/codegen.h"
#include "../costmodel/costmodel.h"
#include "../costmodel/features.h"
#include "../rpc/device_info.h"
#include "../db/db.h"

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

static const char *const strategy_names[] = {"random", "grid", "ga", "xgb", "evo"};

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

double tt_tune_deadline(const tt_measure_options *m, double best_s)
{
    double limit = m->timeout_s > 0 ? m->timeout_s : 10;
    if (best_s <= 0)
        return limit;
    int reps = m->repeat > 0 ? m->repeat : 3, number = m->number > 0 ? m->number : 1;
    /* A sample lasts at least min_repeat_ms whatever the kernel's speed. */
    double sample = fmax(50 * best_s * number, m->min_repeat_ms / 1000.0 * 1.618);
    double d = 50 * best_s + reps * sample + 1.0;
    return d < 1.0 ? 1.0 : d > limit ? limit : d;
}

static tt_elem elem_of(tt_dtype t)
{
    switch (t) {
    case TT_DT_FLOAT32: return TT_ELEM_F32;
    case TT_DT_FLOAT64: return TT_ELEM_F64;
    case TT_DT_INT32: return TT_ELEM_I32;
    case TT_DT_INT64: return TT_ELEM_I64;
    default: return TT_ELEM_U8;
    }
}

/* ---- the farm: devices of a tracker's key, one session per batch ---- */

#define FARM_MAX_DEVICES 16

typedef struct {
    const tt_remote_options *o;
    int ndevices;                         /* sessions measured in parallel */
    tt_remote *session[FARM_MAX_DEVICES]; /* one per measuring thread, per batch */
    char device[512];     /* the fingerprint of the first device (resume and records) */
    tt_cl_device_info cl; /* OpenCL targets: the first device's OpenCL device */
    char key[128];
    int64_t losses, quarantined;
    double wait_s;
    pthread_mutex_t mu; /* losses, quarantined, wait_s, the log, the canaries */
    FILE *log;
    volatile sig_atomic_t *stop;
    double started; /* wall clock: a sick device's records of this run are marked suspect */
} farm;

/* Opens session `k` when it is not open.  An unreachable tracker or device is retried (the
 * tracker may be restarting, the device may have died after the hand-out) until the device wait
 * runs out: TT_ERR_LIMIT, and the run stops with everything measured kept. */
static tt_status farm_session(farm *f, int k, tt_errbuf *err)
{
    if (f->session[k])
        return TT_OK;
    double limit = f->o->request_timeout_s > 0 ? f->o->request_timeout_s : 600;
    double t0 = tt_clock_monotonic(), pause = 0.5;
    for (;;) {
        double wait = 0;
        tt_status s = tt_remote_open(f->o, &f->session[k], &wait, err);
        pthread_mutex_lock(&f->mu);
        f->wait_s += wait;
        pthread_mutex_unlock(&f->mu);
        if (s != TT_ERR_IO)
            return s;
        if (f->stop && *f->stop)
            return tt_err(err, TT_ERR_LIMIT, "stopped while waiting for a device");
        double spent = tt_clock_monotonic() - t0;
        if (spent + pause > limit)
            return tt_err_prefix(err, TT_ERR_LIMIT, "no device for %.0f s", spent);
        pthread_mutex_lock(&f->mu);
        if (f->log)
            fprintf(f->log, "farm: %s; trying again in %.1f s\n", err->msg, pause);
        f->wait_s += pause;
        pthread_mutex_unlock(&f->mu);
        struct timespec ts = {(time_t)pause, (long)((pause - (double)(time_t)pause) * 1e9)};
        nanosleep(&ts, NULL);
        pause = pause * 2 > 8 ? 8 : pause * 2;
    }
}

static void farm_release(farm *f, int k)
{
    tt_remote_close(f->session[k]);
    f->session[k] = NULL;
}

/* ---- one workload's task ---- */

typedef struct {
    const tt_tune_options *o;
    tt_workload *w;
    tt_space space;
    char space_sig[40]; /* identity of the template space, kept with each record's index */
    tt_target target;
    tt_vector_isa isa; /* CPU targets: what bounds the template's register tiles */
    /* How candidates are compiled: measured here on x86-64, as unlinked objects the measuring
     * child loads in memory (no linker per candidate); on the farm, as shared objects. */
    tt_codegen_options codegen;
    const char *target_text;
    bool gpu;          /* an OpenCL target: kernels are OpenCL artifacts */
    tt_gpu_limits lim; /* what the device allows one kernel (gpu) */
    char device[512];
    char dir[256];
    farm *farm;       /* NULL: measure on this machine */
    char canary[512]; /* farm: the naive schedule, compiled, that tells a sick device ("" none) */
    tt_db *db;
    FILE *log;
    /* inputs and reference outputs, in parameter order */
    int nparams, ninputs;
    void *data[64];
    tt_measure_buffer bufs[64];
    /* configs measured so far (hashes of their step text), sorted */
    uint64_t *seen;
    size_t nseen, capseen;
    int64_t total, measured, errors;
    double build_s; /* compile time of this run's candidates */
    double best_s, naive_s;
    char *best_config;
    uint64_t grid_next;
    /* template strategies (xgb, ga): starting points measured first (the template's default and
     * the best configs of similar workloads, mapped to this space) */
    uint64_t seeds[16];
    int nseeds, seed_next;
    tt_rng rng;
    /* this run's measurements in index form, for the model and the genetic algorithm */
    uint64_t *run_idx;
    double *run_score; /* throughput, 0 for errors */
    int nrun, caprun;
    tt_costmodel *model;
    /* genetic algorithm: the generation waiting to be measured */
    uint64_t *gen;
    int ngen, gen_next;
    uint64_t elites[3];
    double elite_score[3];
    int nelites;
    double t_start;
    int64_t t_start_total;
    /* evolutionary search: sketches, measured programs, the current round's plan */
    tt_sketch_space sketch;
    bool have_sketch;
    tt_evo_history hist;
    char **plan;
    int nplan, plan_next;
    int evo_fd, evo_want; /* a search round in flight: its pipe (-1: none) */
    pid_t evo_pid;
    int evo_programs; /* measured programs the round in flight trains on */
    void *preload;    /* a saved model trained on exactly the resumed history */
    size_t preload_len;
    /* measuring */
    struct candidate *cands;
    int batch;
    bool exhausted;
    double *sched_hist; /* best latency after each scheduler round */
    int sched_cap;
} task;

/* Candidate index meaning "the config is a step list" (sketch-based strategies). */
#define STEPS_INDEX (UINT64_MAX - 1)

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool seen_has(const task *t, uint64_t h)
{
    return t->nseen && bsearch(&h, t->seen, t->nseen, sizeof(uint64_t), cmp_u64) != NULL;
}

static void seen_add(task *t, uint64_t h)
{
    if (seen_has(t, h))
        return;
    if (t->nseen == t->capseen) {
        size_t cap = t->capseen ? t->capseen * 2 : 256;
        uint64_t *g = realloc(t->seen, cap * sizeof(uint64_t));
        if (!g)
            return;
        t->seen = g;
        t->capseen = cap;
    }
    size_t i = t->nseen;
    while (i > 0 && t->seen[i - 1] > h) {
        t->seen[i] = t->seen[i - 1];
        i--;
    }
    t->seen[i] = h;
    t->nseen++;
}

static void note_result(task *t, const char *config, double median, int error_no)
{
    if (!strcmp(config, "[]") && error_no == 0)
        t->naive_s = median;
    if (error_no == 0 && (t->best_s == 0 || median < t->best_s)) {
        t->best_s = median;
        free(t->best_config);
        t->best_config = strdup(config);
    }
}

/* Remembers a measured template config for the model and the genetic algorithm. */
static void run_add(task *t, uint64_t index, double thr)
{
    if (t->nrun >= 1 << 20)
        return;
    if (t->nrun == t->caprun) {
        int cap = t->caprun ? 2 * t->caprun : 256;
        uint64_t *gi = realloc(t->run_idx, (size_t)cap * sizeof(uint64_t));
        if (gi)
            t->run_idx = gi;
        double *gs = realloc(t->run_score, (size_t)cap * sizeof(double));
        if (gs)
            t->run_score = gs;
        if (!gi || !gs)
            return;
        t->caprun = cap;
    }
    t->run_idx[t->nrun] = index;
    t->run_score[t->nrun++] = thr;
}

/* The identity of a template space (its knobs and their choices), kept with each record's index
 * so that a later run decodes the index only under the same space. */
static void space_signature(const tt_space *sp, char *out, size_t n)
{
    uint64_t sig = tt_hash64_str(sp->gpu ? "gpu-template-1" : "tiling-space-2");
    for (int k = 0; k < sp->nknobs; k++) {
        sig = tt_hash64_update(sig, sp->knobs[k].name, strlen(sp->knobs[k].name));
        sig = tt_hash64_update(sig, sp->knobs[k].choice, sizeof(int64_t) * (size_t)sp->knobs[k].n);
    }
    snprintf(out, n, "%s:%016llx", sp->gpu ? "gpu" : "tiling", (unsigned long long)sig);
}

/* The template index a record carries in its extra JSON, when it is of this task's space. */
static bool record_index(const task *t, const char *extra, uint64_t *index)
{
    if (!extra)
        return false;
    json_t *j = json_loads(extra, 0, NULL);
    const char *sig = json_string_value(json_object_get(j, "space"));
    json_t *ix = json_object_get(j, "index");
    bool ok = sig && !strcmp(sig, t->space_sig) && json_is_integer(ix) &&
              json_integer_value(ix) >= 0 && (uint64_t)json_integer_value(ix) < t->space.size;
    if (ok)
        *index = (uint64_t)json_integer_value(ix);
    json_decref(j);
    return ok;
}

/* Adds a measured program to the evolutionary search's training data. */
static void history_add(task *t, const char *config, const float *rows, int nrows, double thr,
                        int group)
{
    if (tt_evo_history_add(&t->hist, config, rows, nrows, thr, group) && t->log)
        fprintf(t->log, "note: out of memory for the cost model's training data\n");
}

static int load_history(void *ctx, const tt_db_row *row)
{
    task *t = ctx;
    seen_add(t, tt_hash64_str(row->config));
    t->total++;
    if (row->error_no)
        t->errors++;
    note_result(t, row->config, row->median_s, row->error_no);
    /* Template strategies: the model and the GA continue from what was measured. */
    uint64_t index;
    if (record_index(t, row->extra, &index))
        run_add(t, index,
                row->error_no == 0 && row->median_s > 0 ? t->w->flops / row->median_s : 0);
    /* The model retrains on everything measured before (search.md C11). */
    tt_step *steps;
    size_t n;
    tt_state *st;
    if (t->have_sketch && strcmp(row->config, "[]") &&
        !tt_steps_from_json(row->config, &steps, &n, NULL)) {
        if (!tt_state_replay(&t->w->dag, steps, n, &st, NULL)) {
            float *rows;
            int nr = tt_evo_features(st, &rows);
            double thr = row->error_no == 0 && row->median_s > 0 ? t->w->flops / row->median_s : 0;
            history_add(t, row->config, rows, nr > 0 ? nr : 0, thr, 0);
            free(rows);
            tt_state_free(st);
        }
        free(steps);
    }
    return 0;
}

/* Random inputs; reference outputs from the definition (small workloads) or from the naive
 * schedule compiled, spot-checked against the definition (large ones). */
static tt_status make_reference(task *t, tt_errbuf *err)
{
    const tt_dag *d = &t->w->dag;
    int params[64];
    t->nparams = tt_dag_params(d, params, 64, &t->ninputs);
    if (t->nparams > 64)
        return tt_err(err, TT_ERR_LIMIT, "more than 64 parameters");
    for (int i = 0; i < t->nparams; i++) {
        const tt_op *op = &d->ops.data[params[i]];
        size_t bytes = (size_t)tt_op_numel(op) * (size_t)tt_dtype_bytes(op->dtype);
        if (posix_memalign(&t->data[i], 64, bytes ? bytes : 64))
            return tt_err(err, TT_ERR_NOMEM, "out of memory for '%s'", op->name);
        if (i < t->ninputs)
            tt_fill_random(t->data[i], op->dtype, tt_op_numel(op), t->o->seed + (uint64_t)i * 7919);
        else
            memset(t->data[i], 0, bytes);
        t->bufs[i].elem = elem_of(op->dtype);
        t->bufs[i].count = tt_op_numel(op);
        t->bufs[i].data = i < t->ninputs ? t->data[i] : NULL;
        t->bufs[i].expect = i < t->ninputs ? NULL : t->data[i];
    }
    if (t->w->flops <= 2e7)
        return tt_dag_eval(d, t->data, err);
    /* The naive schedule, compiled and run here. */
    tt_state *st;
    tt_program *prog;
    tt_status s = tt_state_create(d, &st, err);
    if (s)
        return s;
    s = tt_lower(st, &prog, err);
    tt_state_free(st);
    if (s)
        return s;
    char so[512];
    snprintf(so, sizeof(so), "%s/reference.so", t->dir);
    tt_kernel *k = NULL;
    tt_target host; /* the reference runs here, whatever the target */
    tt_target_parse("llvm", &host, NULL);
    s = tt_codegen_llvm(prog, t->gpu ? &host : &t->target, "reference", so, NULL, NULL, err);
    tt_program_free(prog);
    if (!s)
        s = tt_kernel_load(so, "reference", &k, err);
    if (s)
        return s;
    tt_kernel_function(k)(t->data);
    tt_kernel_unload(k);
    unlink(so);
    /* Spot checks against the definition. */
    tt_rng r;
    tt_rng_seed(&r, t->o->seed ^ 0x5eed);
    for (int i = t->ninputs; i < t->nparams; i++) {
        const tt_op *op = &d->ops.data[params[i]];
        for (int c = 0; c < 16; c++) {
            int64_t idx[TT_MAX_DIMS], flat = 0;
            for (int k2 = 0; k2 < op->ndim; k2++) {
                idx[k2] = (int64_t)tt_rng_below(&r, (uint64_t)op->shape[k2]);
                flat = flat * op->shape[k2] + idx[k2];
            }
            tt_value want, got = tt_buffer_get(t->data[i], op->dtype, flat);
            if ((s = tt_dag_eval_element(d, params[i], idx, t->data, &want, err)))
                return s;
            double x = tt_dtype_is_float(op->dtype) ? got.f : (double)got.i;
            double y = tt_dtype_is_float(op->dtype) ? want.f : (double)want.i;
            if (!(fabs(x - y) <= 1e-5 + 1e-4 * fabs(y)))
                return tt_err(err, TT_ERR_RUNTIME,
                              "the naive compiled reference of %s disagrees with the definition at "
                              "element %lld of '%s' (%.9g vs %.9g): a code generator bug",
                              t->w->key, (long long)flat, op->name, x, y);
        }
    }
    return TT_OK;
}

/* ---- one round: pick, compile in parallel, measure, record ---- */

typedef struct candidate {
    task *t;
    uint64_t index;
    char *config;
    char so[512];
    int error_no;
    char error_text[512];
    double build_s;
    tt_measure_result res;
    char device[512]; /* farm: the fingerprint of the device that measured it */
    char host[300];   /* farm: its address ("ip:port"), in the record's extra */
    bool compiled, measured, stored;
    int requeued; /* farm: times moved off a device found sick */
    float *rows;  /* per-store features (evolutionary search) */
    int nrows;
} candidate;

#define FARM_TRIES 3

/* Measures one candidate on the device of session `k`.  A broken session is the device's
 * failure, not the candidate's: the candidate is measured again in a new session (another device
 * when the tracker has one), and only a candidate that breaks FARM_TRIES sessions in a row is
 * recorded as a runtime error.  Returns an error only when no device can be had (the run stops). */
static tt_status farm_measure(task *t, int k, candidate *c, const tt_measure_options *mo,
                              tt_errbuf *err)
{
    farm *f = t->farm;
    for (int attempt = 1;; attempt++) {
        tt_errbuf e = {{0}};
        tt_status s = farm_session(f, k, &e);
        if (s)
            return tt_err(err, s, "%s", e.msg);
        s = tt_remote_measure(f->session[k], c->so, "kernel", t->bufs, t->nparams, t->ninputs, mo,
                              &c->res, &e);
        if (!s) {
            snprintf(c->device, sizeof(c->device), "%s",
                     tt_remote_device(f->session[k])->fingerprint);
            snprintf(c->host, sizeof(c->host), "%s", tt_remote_peer(f->session[k]));
            return TT_OK;
        }
        pthread_mutex_lock(&f->mu);
        f->losses++;
        if (t->log)
            fprintf(t->log, "%s: device session lost (%s); measuring the candidate again\n",
                    t->w->key, e.msg);
        pthread_mutex_unlock(&f->mu);
        farm_release(f, k);
        if (attempt >= FARM_TRIES) {
            memset(&c->res, 0, sizeof(c->res));
            c->res.error_no = 4;
            snprintf(c->res.error_text, sizeof(c->res.error_text),
                     "the device session broke %d times in a row while measuring this candidate "
                     "(last: %.400s)",
                     FARM_TRIES, e.msg);
            return TT_OK;
        }
    }
}

/* A batch in flight: compile threads take candidates in order; with a farm, one measuring
 * thread per device takes them in the same order as soon as they are compiled (builds pipelined
 * with measurements). */
typedef struct {
    candidate *c;
    int n;
    int next, measure_next;
    pthread_mutex_t mu;
    pthread_cond_t compiled;
    tt_measure_options mo; /* with this batch's deadline */
    tt_status failure;     /* no device: stop measuring, keep what was measured */
    tt_errbuf err;
    int retry[256]; /* farm: candidates taken off a sick device, measured first */
    int nretry;
} compile_queue;

/* OpenCL source for the device's driver; a kernel outside the device's limits, or with bindings
 * a GPU cannot run, is an INSTANTIATION_ERROR before anything is sent. */
static void compile_opencl(task *t, candidate *c, const tt_program *prog, tt_errbuf *err)
{
    char *text = NULL;
    size_t len = 0;
    tt_status s = tt_codegen_opencl(prog, "kernel", &t->lim, &text, &len, NULL, err);
    if (s) {
        c->error_no = s == TT_ERR_LIMIT || s == TT_ERR_ILLEGAL_STEP ? 1 : 2;
        return;
    }
    FILE *f = fopen(c->so, "wb");
    if (!f || fwrite(text, 1, len, f) != len) {
        tt_err(err, TT_ERR_IO, "cannot write %s: %s", c->so, strerror(errno));
        c->error_no = 2;
    }
    if (f)
        fclose(f);
    free(text);
}

static void compile_one(candidate *c)
{
    task *t = c->t;
    tt_errbuf err = {{0}};
    double t0 = tt_clock_monotonic();
    tt_program *prog = NULL;
    tt_state *st = NULL;
    if (c->index == UINT64_MAX) { /* the naive schedule (on GPU: bound to blocks and threads) */
        if (t->gpu ? tt_sketch_gpu_default(&t->w->dag, 32, &st, &err)
                   : tt_state_create(&t->w->dag, &st, &err))
            c->error_no = 1;
    } else if (c->index == STEPS_INDEX) {
        tt_step *steps;
        size_t n;
        if (tt_steps_from_json(c->config, &steps, &n, &err)) {
            c->error_no = 1;
        } else {
            if (tt_state_replay(&t->w->dag, steps, n, &st, &err))
                c->error_no = 1;
            free(steps);
        }
    } else if (tt_space_apply(&t->space, c->index, &st, &err)) {
        c->error_no = 1; /* INSTANTIATION_ERROR */
    }
    if (!c->error_no && tt_lower(st, &prog, &err))
        c->error_no = 1;
    if (!c->error_no && t->have_sketch) {
        int n = tt_features_per_store(prog, NULL, 0);
        if (n > 0 && (c->rows = malloc(sizeof(float) * TT_STORE_FEATURES * (size_t)n)))
            c->nrows = tt_features_per_store(prog, c->rows, n);
    }
    if (!c->error_no && !t->o->objective && t->gpu)
        compile_opencl(t, c, prog, &err);
    else if (!c->error_no && !t->o->objective &&
             tt_codegen_llvm(prog, &t->target, "kernel", c->so, &t->codegen, NULL, &err))
        c->error_no = 2; /* COMPILE_HOST */
    if (c->error_no)
        snprintf(c->error_text, sizeof(c->error_text), "%s", err.msg);
    c->build_s = tt_clock_monotonic() - t0;
    tt_program_free(prog);
    tt_state_free(st);
}

static void *compile_worker(void *arg)
{
    compile_queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        int i = q->next < q->n ? q->next++ : -1;
        pthread_mutex_unlock(&q->mu);
        if (i < 0)
            return NULL;
        compile_one(&q->c[i]);
        pthread_mutex_lock(&q->mu);
        q->c[i].compiled = true;
        pthread_cond_broadcast(&q->compiled);
        pthread_mutex_unlock(&q->mu);
    }
}

typedef struct {
    compile_queue *q;
    int slot;
} farm_worker_arg;

/* The canary: the naive schedule, compiled once per task, whose answer is known to be right. */
static bool farm_canary(task *t)
{
    farm *f = t->farm;
    pthread_mutex_lock(&f->mu);
    if (!t->canary[0]) {
        candidate k;
        memset(&k, 0, sizeof(k));
        k.t = t;
        k.index = UINT64_MAX;
        snprintf(k.so, sizeof(k.so), "%s/canary.so", t->dir);
        compile_one(&k);
        free(k.rows);
        if (!k.error_no)
            snprintf(t->canary, sizeof(t->canary), "%s", k.so);
    }
    bool ok = t->canary[0] != 0;
    pthread_mutex_unlock(&f->mu);
    return ok;
}

/* A candidate crashed on the device of session k (RUNTIME_DEVICE) or computed a wrong answer
 * there (WRONG_ANSWER): a bad config, or a sick device (measurement.md §8 rule 5)?  The canary runs
 * on the same device: when it fails too the device is sick, is reported to the tracker (which stops
 * handing it out) and left, and the candidate goes back to be measured elsewhere.  Returns true
 * when the candidate must be measured again; *fatal when no other device can be had (a standalone
 * server). */
static bool farm_suspect(task *t, int k, candidate *c, const tt_measure_options *mo,
                         tt_status *fatal, tt_errbuf *err)
{
    farm *f = t->farm;
    *fatal = TT_OK;
    if (c->requeued >= FARM_TRIES || !farm_canary(t))
        return false; /* the config fails everywhere we tried: a bad config */
    tt_measure_result res;
    tt_errbuf e = {{0}};
    tt_status s = tt_remote_measure(f->session[k], t->canary, "kernel", t->bufs, t->nparams,
                                    t->ninputs, mo, &res, &e);
    if (!s && res.error_no == 0)
        return false; /* the device is well: the config is bad */
    char why[600];
    snprintf(why, sizeof(why), "the canary (naive schedule) fails there too: %.400s",
             s ? e.msg : res.error_text);
    /* What it measured before in this run is not to be trusted either: marked, and left out of
     * the best (the database's writes are serialised by the farm's lock, as in store_now). */
    int64_t marked = 0;
    char mark[700];
    snprintf(mark, sizeof(mark), "device %s was found sick: %s", tt_remote_peer(f->session[k]),
             why);
    pthread_mutex_lock(&f->mu);
    f->quarantined++;
    tt_db_mark_suspect(t->db, tt_remote_peer(f->session[k]), f->started, mark, &marked);
    if (t->log)
        fprintf(t->log,
                "%s: device %s is sick (%s); it is reported and left, and its %lld earlier "
                "records of this run are marked suspect\n",
                t->w->key, tt_remote_peer(f->session[k]), why, (long long)marked);
    pthread_mutex_unlock(&f->mu);
    tt_errbuf rerr = {{0}};
    if (!s && tt_remote_report(f->o, f->session[k], true, why, &rerr)) {
        *fatal = TT_ERR_RUNTIME;
        tt_err(err, TT_ERR_RUNTIME, "device %s is sick (%s) and no other can be had: %s",
               tt_remote_peer(f->session[k]), why, rerr.msg);
    }
    farm_release(f, k);
    c->requeued++;
    return true;
}

/* After a measurement: TVM's error fields of the candidate (idempotent). */
static void finish_result(task *t, candidate *c, const tt_measure_options *mo)
{
    if (c->error_no || t->o->objective)
        return;
    if (c->res.error_no == 7 && mo->timeout_s < t->o->measure.timeout_s)
        snprintf(c->res.error_text, sizeof(c->res.error_text),
                 "killed after %.3g s: more than 50x slower than the best so far (%.3g s)",
                 mo->timeout_s, t->best_s);
    c->error_no = c->res.error_no;
    if (c->error_no)
        snprintf(c->error_text, sizeof(c->error_text), "%s", c->res.error_text);
}

#define EXTRA_MAX 400

/* The record of a finished candidate; its strings point into t and c, extra and costs are the
 * caller's (EXTRA_MAX bytes, TT_MEASURE_MAX_REPEAT). */
static void fill_record(task *t, const candidate *c, tt_db_record *r, char *extra, double *costs)
{
    memset(r, 0, sizeof(*r));
    r->workload = t->w->key;
    r->target = t->target_text;
    r->device = c->device[0] ? c->device : t->device;
    r->config = c->config;
    r->config_kind = TT_CONFIG_STEPS;
    r->job = t->o->job;
    /* the template index (resume), and on a farm the measuring device's address (marking) */
    bool indexed = c->index != UINT64_MAX && c->index != STEPS_INDEX;
    if (indexed || c->host[0]) {
        json_t *x = json_object();
        if (indexed) {
            json_object_set_new(x, "space", json_string(t->space_sig));
            json_object_set_new(x, "index", json_integer((json_int_t)c->index));
        }
        if (c->host[0])
            json_object_set_new(x, "host", json_string(c->host));
        char *text = json_dumps(x, 0); /* {"space": ..., "index": ...}, as stored before */
        json_decref(x);
        if (text && strlen(text) < EXTRA_MAX) {
            strcpy(extra, text);
            r->extra = extra;
        }
        free(text);
    }
    if (c->error_no) {
        costs[0] = 1e9; /* TVM's cost of a failed measurement */
        r->ncosts = 1;
        r->error_text = c->error_text;
    } else {
        r->ncosts = c->res.ncosts;
        memcpy(costs, c->res.costs, sizeof(double) * (size_t)r->ncosts);
    }
    r->costs = costs;
    r->error_no = c->error_no;
    r->build_s = c->build_s;
    r->run_s = c->res.run_s;
    r->total_s = c->build_s + c->res.run_s;
    r->timestamp = tt_clock_wall();
}

/* Farm measurements are stored as they arrive (a daemon that dies mid-batch keeps them); the
 * batch's bookkeeping still happens at its end. */
static void store_now(task *t, candidate *c)
{
    tt_db_record r;
    char extra[EXTRA_MAX];
    double costs[TT_MEASURE_MAX_REPEAT];
    fill_record(t, c, &r, extra, costs);
    pthread_mutex_lock(&t->farm->mu);
    c->stored = !tt_db_insert(t->db, &r, 1, NULL);
    pthread_mutex_unlock(&t->farm->mu);
}

static void *farm_worker(void *arg)
{
    farm_worker_arg *a = arg;
    compile_queue *q = a->q;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        int i = -1;
        if (!q->failure && q->nretry > 0)
            i = q->retry[--q->nretry];
        else if (!q->failure && q->measure_next < q->n)
            i = q->measure_next++;
        while (i >= 0 && !q->c[i].compiled)
            pthread_cond_wait(&q->compiled, &q->mu);
        pthread_mutex_unlock(&q->mu);
        if (i < 0)
            break;
        candidate *c = &q->c[i];
        task *t = c->t;
        if (c->error_no || (t->o->stop && *t->o->stop))
            continue;
        tt_errbuf e = {{0}};
        tt_status s = farm_measure(t, a->slot, c, &q->mo, &e), fatal = TT_OK;
        /* c->device is empty when no session survived it: nothing to ask the device then */
        bool again = !s && (c->res.error_no == 4 || c->res.error_no == 5) && c->device[0] &&
                     farm_suspect(t, a->slot, c, &q->mo, &fatal, &e);
        pthread_mutex_lock(&q->mu);
        if ((s || fatal) && !q->failure) {
            q->failure = s ? s : fatal;
            q->err = e;
        }
        if (again && !fatal)
            q->retry[q->nretry++] = i;
        else if (!s && !fatal)
            c->measured = true;
        pthread_mutex_unlock(&q->mu);
        if (c->measured) {
            finish_result(t, c, &q->mo);
            store_now(t, c);
        }
    }
    farm_release(a->q->c[0].t->farm, a->slot); /* between batches the device serves others */
    return NULL;
}

static char *config_of(task *t, uint64_t index)
{
    if (index == UINT64_MAX)
        return strdup("[]");
    tt_state *st;
    if (tt_space_apply(&t->space, index, &st, NULL))
        return NULL;
    char *j = tt_steps_to_json(st->steps.data, st->steps.len);
    tt_state_free(st);
    return j;
}

/* ---- strategies ---- */

/* Knob features of a config: log2(1 + value) per knob (AutoTVM's "knob" features). */
static void knob_features(const tt_space *sp, uint64_t index, float *row)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(sp, index, pos);
    for (int k = 0; k < sp->nknobs; k++)
        row[k] = (float)tt_space_knob_feature(sp, k, pos[k]);
}

/* Itervar features of a config's lowered program, zero-padded or cut to `width`; an all-zero
 * row when it does not lower (AutoTVM's failed extraction). */
static void itervar_features(const task *t, uint64_t index, float *row, int width)
{
    memset(row, 0, sizeof(float) * (size_t)width);
    tt_state *st;
    tt_program *prog;
    if (tt_space_apply(&t->space, index, &st, NULL))
        return;
    if (!tt_lower(st, &prog, NULL)) {
        tt_features_itervar(prog, false, row, width);
        tt_program_free(prog);
    }
    tt_state_free(st);
}

/* The model's row of a config: knob features, or (--features itervar) the loop-variable features
 * followed by the knob values, as AutoTVM appends its define_knob values. */
static void features(const task *t, uint64_t index, float *row, int ncols)
{
    int nk = t->space.nknobs;
    if (ncols > nk)
        itervar_features(t, index, row, ncols - nk);
    knob_features(&t->space, index, row + (ncols - nk));
}

/* Columns of the model's rows: the knobs, plus the longest itervar vector of the measured
 * configs (at most 4096) with --features itervar. */
static int feature_columns(const task *t)
{
    int nk = t->space.nknobs;
    if (t->o->features != TT_FEATURES_ITERVAR)
        return nk;
    int longest = 0;
    for (int i = 0; i < t->nrun; i++) {
        tt_state *st;
        tt_program *prog;
        if (tt_space_apply(&t->space, t->run_idx[i], &st, NULL))
            continue;
        if (!tt_lower(st, &prog, NULL)) {
            int n = tt_features_itervar(prog, false, NULL, 0);
            longest = n > longest ? n : longest;
            tt_program_free(prog);
        }
        tt_state_free(st);
    }
    return nk + (longest < 4096 ? longest : 4096);
}

static uint64_t neighbour(task *t, uint64_t index)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(&t->space, index, pos);
    for (int tries = 0; tries < 16; tries++) {
        int k = (int)tt_rng_below(&t->rng, (uint64_t)t->space.nknobs);
        if (t->space.knobs[k].n < 2)
            continue;
        int v = (int)tt_rng_below(&t->rng, (uint64_t)t->space.knobs[k].n);
        if (v == pos[k])
            continue;
        pos[k] = v;
        break;
    }
    uint64_t out = 0, mul = 1;
    for (int k = 0; k < t->space.nknobs; k++) {
        out += (uint64_t)pos[k] * mul;
        mul *= (uint64_t)t->space.knobs[k].n;
    }
    return out;
}

static int cmp_desc(const void *a, const void *b)
{
    float x = ((const float *)a)[0], y = ((const float *)b)[0];
    return x < y ? 1 : x > y ? -1 : 0;
}

/* XGBoost + simulated annealing (search.md B4, with fixed boosting rounds): trains on this run's
 * measurements and returns the most promising indices, best first, in out (n of them). */
static int model_plan_here(task *t, uint64_t *out, int n);

/* Runs child(t, fd, arg) in a forked process with a fresh RNG stream; returns the read end of
 * its pipe (or -1) and its pid.  The child must _exit. */
static int spawn_search(task *t, void (*child)(task *, int, void *), void *arg, pid_t *pid)
{
    uint64_t seed = tt_rng_next(&t->rng);
    int fds[2];
    if (pipe(fds))
        return -1;
    fflush(NULL);
    *pid = fork();
    if (*pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (*pid == 0) {
        close(fds[0]);
        tt_rng_seed(&t->rng, seed);
        child(t, fds[1], arg);
        _exit(1);
    }
    close(fds[1]);
    return fds[0];
}

static void reap_search(int fd, pid_t pid)
{
    close(fd);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* XGBoost runs OpenMP threads, and libgomp does not survive fork(): a measurement child forked
 * after the model trained in this process would hang in its first parallel loop.  So the model
 * lives in a child of its own, which sends the plan back through a pipe. */
typedef struct {
    uint64_t *out;
    int n;
} plan_arg;

static void model_plan_child(task *t, int fd, void *arg)
{
    plan_arg *p = arg;
    int found = model_plan_here(t, p->out, p->n);
    bool ok = tt_write_all(fd, &found, sizeof(found)) &&
              (found <= 0 || tt_write_all(fd, p->out, sizeof(uint64_t) * (size_t)found));
    _exit(ok ? 0 : 1);
}

static int model_plan(task *t, uint64_t *out, int n)
{
    plan_arg arg = {out, n};
    pid_t pid;
    int fd = spawn_search(t, model_plan_child, &arg, &pid);
    if (fd < 0)
        return 0;
    int found = 0;
    if (!tt_read_all(fd, &found, sizeof(found)) || found < 0 || found > n ||
        (found > 0 && !tt_read_all(fd, out, sizeof(uint64_t) * (size_t)found)))
        found = 0;
    reap_search(fd, pid);
    return found;
}

/* AutoTVM's diversity filter (search.md B4): of the best 64 x ratio candidates keep 64, picked
 * greedily, each scoring one point per knob whose value the picked set does not have yet. */
static int diversity_filter(task *t, uint64_t *cand, int n, double ratio)
{
    enum { PLAN = 64 };
    int pool = (int)(PLAN * ratio);
    if (pool > n)
        pool = n;
    if (pool <= PLAN)
        return n;
    int nk = t->space.nknobs;
    int(*pos)[TT_SPACE_MAX_KNOBS] = malloc(sizeof(*pos) * (size_t)pool);
    bool *used = calloc((size_t)pool, sizeof(bool));
    bool(*have)[TT_SPACE_MAX_CHOICES] = calloc(TT_SPACE_MAX_KNOBS, sizeof(*have));
    uint64_t picked[PLAN];
    int np = 0;
    if (!pos || !used || !have)
        goto out;
    for (int i = 0; i < pool; i++)
        tt_space_decode(&t->space, cand[i], pos[i]);
    while (np < PLAN) {
        int best = -1, best_score = -1;
        for (int i = 0; i < pool; i++) {
            if (used[i])
                continue;
            int score = 0;
            for (int k = 0; k < nk; k++)
                score += !have[k][pos[i][k]];
            if (score > best_score) {
                best = i;
                best_score = score;
            }
        }
        if (best < 0)
            break;
        used[best] = true;
        for (int k = 0; k < nk; k++)
            have[k][pos[best][k]] = true;
        picked[np++] = cand[best];
    }
    memcpy(cand, picked, sizeof(uint64_t) * (size_t)np);
    n = np;
out:
    free(pos);
    free(used);
    free(have);
    return n;
}

static int model_plan_here(task *t, uint64_t *out, int n)
{
    int nk = feature_columns(t), m = t->nrun;
    enum { WALKERS = 64, ITERS = 80, KEEP = 256 };
    float *x = malloc(sizeof(float) * (size_t)m * (size_t)nk),
          *y = malloc(sizeof(float) * (size_t)m),
          *row = malloc(sizeof(float) * WALKERS * (size_t)nk);
    double best = 1e-12;
    int found = 0;
    if (!x || !y || !row)
        goto out;
    for (int i = 0; i < m; i++)
        best = t->run_score[i] > best ? t->run_score[i] : best;
    for (int i = 0; i < m; i++) {
        features(t, t->run_idx[i], x + (size_t)i * (size_t)nk, nk);
        y[i] = (float)(t->run_score[i] / best);
    }
    tt_errbuf err;
    if (!t->model && tt_costmodel_create(TT_COSTMODEL_REG, 0, t->o->seed, &t->model, &err))
        goto out;
    /* AutoTVM's fit: boost until the training a-recall@64 stalls for 20 rounds. */
    if (tt_costmodel_train_recall(t->model, x, m, nk, y, 8000, 64, 20, NULL, &err))
        goto out;
    /* Simulated annealing over the index space (walkers kept per call). */
    uint64_t walk[WALKERS], prop[WALKERS];
    float cur[WALKERS], next[WALKERS];
    float heap[KEEP][3]; /* score, index (as two floats is lossy): keep indices aside */
    uint64_t heap_idx[KEEP];
    int nheap = 0;
    int nw = t->space.size < WALKERS ? (int)t->space.size : WALKERS;
    for (int w = 0; w < nw; w++) {
        walk[w] = tt_rng_below(&t->rng, t->space.size);
        features(t, walk[w], row + (size_t)w * (size_t)nk, nk);
    }
    if (tt_costmodel_predict(t->model, row, nw, nk, cur, &err))
        goto out;
    for (int it = 0; it < ITERS; it++) {
        double temp = 1.0 - (double)it / ITERS;
        for (int w = 0; w < nw; w++) {
            prop[w] = neighbour(t, walk[w]);
            features(t, prop[w], row + (size_t)w * (size_t)nk, nk);
        }
        if (tt_costmodel_predict(t->model, row, nw, nk, next, &err))
            goto out;
        for (int w = 0; w < nw; w++) {
            /* Remember every proposal worth keeping (duplicates filtered later). */
            if (nheap < KEEP) {
                heap[nheap][0] = next[w];
                heap_idx[nheap++] = prop[w];
            } else {
                int lo = 0;
                for (int h = 1; h < KEEP; h++)
                    if (heap[h][0] < heap[lo][0])
                        lo = h;
                if (next[w] > heap[lo][0]) {
                    heap[lo][0] = next[w];
                    heap_idx[lo] = prop[w];
                }
            }
            double p = exp(fmin((next[w] - cur[w]) / (temp + 1e-5), 1.0));
            if (next[w] >= cur[w] || tt_rng_uniform(&t->rng) < p) {
                walk[w] = prop[w];
                cur[w] = next[w];
            }
        }
    }
    /* Best first. */
    for (int h = 0; h < nheap; h++)
        heap[h][1] = (float)h;
    qsort(heap, (size_t)nheap, sizeof(heap[0]), cmp_desc);
    for (int h = 0; h < nheap && found < n; h++) {
        uint64_t idx = heap_idx[(int)heap[h][1]];
        bool dup = false;
        for (int j = 0; j < found && !dup; j++)
            dup = out[j] == idx;
        if (!dup)
            out[found++] = idx;
    }
    if (t->o->diversity > 1)
        found = diversity_filter(t, out, found, t->o->diversity);
out:
    free(x);
    free(y);
    free(row);
    return found;
}

/* ---- evolutionary search (search.md C6), in a child process like the XGB plan ---- */

static bool evo_seen(void *ctx, const char *config)
{
    return seen_has(ctx, tt_hash64_str(config));
}

/* Child side: runs the round and writes [int32 n][n strings, each uint32 length + bytes]
 * [uint64 model length][model], or [int32 -1][uint32 length][message]. */
static void evo_child(task *t, int fd, void *arg)
{
    int want = *(int *)arg;
    tt_evo_params p;
    tt_evo_params_default(&p);
    p.warmup = 64; /* what Ansor's task scheduler sets for one task of 64 measures per round */
    if (t->o->population > 0)
        p.population = t->o->population;
    char *plan[256];
    void *model = NULL;
    size_t mlen = 0;
    tt_errbuf err = {{0}};
    if (t->o->overlap_search) /* yield the CPU to the measurement going on meanwhile */
        setpriority(PRIO_PROCESS, 0, 10);
    int32_t n = tt_evo_search_round(&t->sketch, &p, &t->hist, t->preload, t->preload_len, evo_seen,
                                    t, &t->rng, plan, want, &model, &mlen, &err);
    bool ok = tt_write_all(fd, &n, sizeof(n));
    if (n < 0) {
        uint32_t len = (uint32_t)strlen(err.msg);
        ok = ok && tt_write_all(fd, &len, sizeof(len)) && tt_write_all(fd, err.msg, len);
        _exit(ok ? 0 : 1);
    }
    for (int i = 0; i < n && ok; i++) {
        uint32_t len = (uint32_t)strlen(plan[i]);
        ok = tt_write_all(fd, &len, sizeof(len)) && tt_write_all(fd, plan[i], len);
    }
    uint64_t ml = mlen;
    ok = ok && tt_write_all(fd, &ml, sizeof(ml)) && (!mlen || tt_write_all(fd, model, mlen));
    _exit(ok ? 0 : 1);
}

static char *read_string(int fd, uint32_t max)
{
    uint32_t len;
    if (!tt_read_all(fd, &len, sizeof(len)) || len > max)
        return NULL;
    char *s = malloc(len + 1);
    if (s && !tt_read_all(fd, s, len)) {
        free(s);
        return NULL;
    }
    if (s)
        s[len] = 0;
    return s;
}

/* Starts a search round in a child process (when none is in flight). */
static void evo_start(task *t, int want)
{
    if (t->evo_fd >= 0)
        return;
    t->evo_want = want > 256 ? 256 : want;
    t->evo_programs = t->hist.nprog;
    t->evo_fd = spawn_search(t, evo_child, &t->evo_want, &t->evo_pid);
    /* A preloaded model serves one round only: later rounds have more data. */
    free(t->preload);
    t->preload = NULL;
    t->preload_len = 0;
}

/* Waits for the round in flight and makes its configs the plan. */
static void evo_finish(task *t)
{
    for (int i = t->plan_next; i < t->nplan; i++)
        free(t->plan[i]);
    t->nplan = t->plan_next = 0;
    if (t->evo_fd < 0)
        return;
    int fd = t->evo_fd, want = t->evo_want;
    t->evo_fd = -1;
    if (!t->plan && !(t->plan = calloc(256, sizeof(char *)))) {
        reap_search(fd, t->evo_pid);
        return;
    }
    int32_t n = 0;
    if (tt_read_all(fd, &n, sizeof(n))) {
        if (n < 0) {
            char *msg = read_string(fd, 1 << 16);
            if (t->log)
                fprintf(t->log, "%s%s: search round failed: %s\n", t->o->progress ? "\n" : "",
                        t->w->key, msg ? msg : "(no message)");
            free(msg);
        }
        for (int i = 0; i < n && i < want; i++) {
            char *cfg = read_string(fd, 1 << 24);
            if (!cfg)
                break;
            t->plan[t->nplan++] = cfg;
        }
        uint64_t mlen = 0;
        if (t->nplan == n && tt_read_all(fd, &mlen, sizeof(mlen)) && mlen > 0 &&
            mlen < (1ull << 31)) {
            void *model = malloc(mlen);
            if (model && tt_read_all(fd, model, mlen)) {
                /* Saved with the size of its training set, so a resumed run with nothing new
                 * reloads it instead of training again. */
                char name[1200], meta[64];
                snprintf(name, sizeof(name), "ansor-pack-sum:%s:%s", t->target_text, t->w->key);
                snprintf(meta, sizeof(meta), "{\"programs\": %d}", t->evo_programs);
                tt_db_model_save(t->db, name, TT_FEATURES_VERSION, model, mlen, meta);
            }
            free(model);
        }
    }
    reap_search(fd, t->evo_pid);
}

/* The saved model of this workload for the first round of a resumed run, when the records added
 * since it was trained are under 20% of its training set (Ansor's adaptive training rule). */
static void evo_preload(task *t)
{
    char name[1200], *meta = NULL;
    snprintf(name, sizeof(name), "ansor-pack-sum:%s:%s", t->target_text, t->w->key);
    void *blob;
    size_t len;
    if (tt_db_model_load(t->db, name, TT_FEATURES_VERSION, &blob, &len, &meta))
        return;
    json_t *j = meta ? json_loads(meta, 0, NULL) : NULL;
    json_t *n = json_object_get(j, "programs");
    json_int_t trained = json_is_integer(n) ? json_integer_value(n) : -1;
    if (trained > 0 && trained <= t->hist.nprog && t->hist.nprog - trained < trained / 5) {
        t->preload = blob;
        t->preload_len = len;
        if (t->log)
            fprintf(t->log, "%s: reusing the saved cost model (trained on %lld of %d records)\n",
                    t->w->key, (long long)trained, t->hist.nprog);
    } else {
        free(blob);
    }
    json_decref(j);
    free(meta);
}

/* Genetic algorithm (search.md B3): when the previous generation is measured, breed the next from
 * it and the elites, by throughput-weighted selection, one-point crossover and mutation. */
static void ga_breed(task *t, int pop)
{
    int m = t->nrun, nk = t->space.nknobs;
    /* The generation just measured: the random first one, then the last bred. */
    int last_gen = t->ngen > 0 ? t->ngen : pop;
    int first = m - last_gen > 0 ? m - last_gen : 0;
    /* Pool: the last generation plus the elites. */
    int npool = 0;
    uint64_t pool[512];
    double score[512];
    for (int i = first; i < m && npool < 509; i++) {
        pool[npool] = t->run_idx[i];
        score[npool++] = t->run_score[i];
    }
    for (int e = 0; e < t->nelites && npool < 512; e++) {
        pool[npool] = t->elites[e];
        score[npool++] = t->elite_score[e];
    }
    /* New elites: the best three of the pool. */
    t->nelites = 0;
    for (int e = 0; e < 3 && e < npool; e++) {
        int b = -1;
        for (int i = 0; i < npool; i++) {
            bool taken = false;
            for (int j = 0; j < t->nelites; j++)
                taken |= t->elites[j] == pool[i];
            if (!taken && (b < 0 || score[i] > score[b]))
                b = i;
        }
        if (b < 0)
            break;
        t->elites[t->nelites] = pool[b];
        t->elite_score[t->nelites++] = score[b];
    }
    double maxs = 1e-8, sum = 0;
    for (int i = 0; i < npool; i++)
        maxs = score[i] + 1e-8 > maxs ? score[i] + 1e-8 : maxs;
    for (int i = 0; i < npool; i++)
        sum += (score[i] + 1e-8) / maxs;
    t->ngen = 0;
    t->gen_next = 0;
    for (int tries = 0; t->ngen < pop && tries < pop * 20 && npool > 0; tries++) {
        int parent[2];
        for (int p = 0; p < 2; p++) {
            double r = tt_rng_uniform(&t->rng) * sum;
            parent[p] = npool - 1;
            for (int i = 0; i < npool; i++) {
                r -= (score[i] + 1e-8) / maxs;
                if (r <= 0) {
                    parent[p] = i;
                    break;
                }
            }
        }
        int a[TT_SPACE_MAX_KNOBS], b[TT_SPACE_MAX_KNOBS];
        tt_space_decode(&t->space, pool[parent[0]], a);
        tt_space_decode(&t->space, pool[parent[1]], b);
        int cut = (int)tt_rng_below(&t->rng, (uint64_t)nk);
        uint64_t child = 0, mul = 1;
        for (int k = 0; k < nk; k++) {
            int v = k < cut ? a[k] : b[k];
            if (tt_rng_uniform(&t->rng) < 0.1)
                v = (int)tt_rng_below(&t->rng, (uint64_t)t->space.knobs[k].n);
            child += (uint64_t)v * mul;
            mul *= (uint64_t)t->space.knobs[k].n;
        }
        t->gen[t->ngen++] = child;
    }
}

/* Picks up to `want` unmeasured configs. */
static int pick(task *t, candidate *c, int want)
{
    int n = 0;
    bool baseline = t->naive_s == 0 && !seen_has(t, tt_hash64_str("[]"));
    if (baseline && want > 0) {
        c[n].index = UINT64_MAX;
        c[n].config = strdup("[]");
        n++;
    }
    /* The model proposes once it has something to learn from; 5% of picks stay random. */
    uint64_t plan[256];
    int nplan = 0, plan_next = 0;
    if (t->o->strategy == TT_STRATEGY_XGB && t->nrun >= 2 * want && t->nrun >= 16)
        nplan = model_plan(t, plan, 256);
    int pop = t->space.size < 64 ? (int)t->space.size : 64;
    if (t->o->strategy == TT_STRATEGY_GA && !t->gen)
        t->gen = calloc((size_t)pop, sizeof(uint64_t));
    int64_t tries = 0;
    int rounds = 0;
    while (n < want && tries < 64 * (int64_t)want + 1000) {
        tries++;
        uint64_t idx;
        char *planned = NULL;
        if (t->o->strategy == TT_STRATEGY_EVO) {
            /* A search round plans 64 measurements (Ansor's measures per round). */
            if (t->plan_next >= t->nplan) {
                if (rounds++ == 2)
                    break;
                int64_t left = t->o->trials - t->total;
                evo_start(t, left < 64 ? (int)(left > want ? left : want) : 64);
                evo_finish(t);
                if (t->nplan == 0)
                    break;
            }
            planned = t->plan[t->plan_next];
            t->plan[t->plan_next++] = NULL;
            idx = STEPS_INDEX;
            /* Overlapped: plan the next round while the second half of this one is measured. */
            int64_t after = t->o->trials - t->total - n - (t->nplan - t->plan_next);
            if (t->o->overlap_search && t->plan_next * 2 >= t->nplan && after > 0)
                evo_start(t, after < 64 ? (int)after : 64);
        } else if (t->o->strategy == TT_STRATEGY_GRID) {
            if (t->grid_next >= t->space.size)
                break;
            idx = t->grid_next++;
        } else if (t->seed_next < t->nseeds) {
            idx = t->seeds[t->seed_next++]; /* starting points first (xgb, ga) */
        } else if (t->o->strategy == TT_STRATEGY_XGB && plan_next < nplan &&
                   tt_rng_uniform(&t->rng) >= 0.05) {
            idx = plan[plan_next++];
        } else if (t->o->strategy == TT_STRATEGY_GA && t->gen && t->nrun >= pop) {
            /* The first generation is random; later ones are bred from measured ones. */
            if (t->gen_next >= t->ngen)
                ga_breed(t, pop);
            idx = t->gen_next < t->ngen ? t->gen[t->gen_next++]
                                        : tt_rng_below(&t->rng, t->space.size);
        } else {
            idx = tt_rng_below(&t->rng, t->space.size);
        }
        char *cfg = planned ? planned : config_of(t, idx);
        if (!cfg)
            continue;
        uint64_t h = tt_hash64_str(cfg);
        bool dup = seen_has(t, h);
        for (int k = 0; k < n && !dup; k++)
            dup = !strcmp(c[k].config, cfg);
        if (dup) {
            free(cfg);
            continue;
        }
        c[n].index = idx;
        c[n].config = cfg;
        n++;
    }
    return n;
}

static void progress(task *t, bool final)
{
    if (!t->o->progress || !t->log)
        return;
    double el = tt_clock_monotonic() - t->t_start;
    int64_t done_here = t->total - t->t_start_total;
    int64_t left = t->o->trials - t->total;
    double eta = done_here > 0 && left > 0 ? el / (double)done_here * (double)left : 0;
    double gflops = t->best_s > 0 ? t->w->flops / t->best_s / 1e9 : 0;
    fprintf(t->log, "\r%-40.40s %5lld/%lld trials  best %8.2f GFLOPS  %6.1fs  ETA %6.1fs%s",
            t->w->key, (long long)t->total, (long long)t->o->trials, gflops, el, eta,
            final ? "\n" : "");
    fflush(t->log);
}

static tt_status round_trip(task *t, candidate *c, int n, tt_errbuf *err)
{
    for (int i = 0; i < n; i++) {
        c[i].t = t;
        c[i].device[0] = 0;
        c[i].compiled = c[i].measured = c[i].stored = false;
        snprintf(c[i].so, sizeof(c[i].so), "%s/c%d.so", t->dir, i);
    }
    compile_queue q;
    memset(&q, 0, sizeof(q));
    q.c = c;
    q.n = n;
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.compiled, NULL);
    q.mo = t->o->measure;
    q.mo.timeout_s = tt_tune_deadline(&q.mo, t->best_s);
    if (t->gpu)
        q.mo.timeout_s += TT_TUNE_GPU_BUILD_S; /* the driver builds the source in the child */
    int nth = t->o->threads > 0 ? t->o->threads : 1;
    if (nth > n)
        nth = n;
    int ndev = t->farm && !t->o->objective ? t->farm->ndevices : 0;
    pthread_t th[64 + FARM_MAX_DEVICES];
    farm_worker_arg fa[FARM_MAX_DEVICES];
    int started = 0, measuring = 0;
    for (int i = 0; i < nth && i < 64; i++)
        if (!pthread_create(&th[started], NULL, compile_worker, &q))
            started++;
    if (started == 0)
        compile_worker(&q);
    for (int k = 0; k < ndev; k++) {
        fa[k] = (farm_worker_arg){&q, k};
        if (!pthread_create(&th[started + measuring], NULL, farm_worker, &fa[k]))
            measuring++;
    }
    if (ndev && measuring == 0) {
        fa[0] = (farm_worker_arg){&q, 0};
        farm_worker(&fa[0]);
    }
    for (int i = 0; i < started + measuring; i++)
        pthread_join(th[i], NULL);
    pthread_cond_destroy(&q.compiled);
    pthread_mutex_destroy(&q.mu);
    tt_status failure = q.failure;
    if (failure)
        tt_err(err, failure, "%s", q.err.msg);
    tt_db_record recs[256];
    char extras[256][EXTRA_MAX];
    double costs[256][TT_MEASURE_MAX_REPEAT];
    int nrec = 0, rec_of[256]; /* the candidate of each record */
    for (int i = 0; i < n; i++) {
        if (ndev) {
            /* measured on the farm above; what was not (stop, no device) is not recorded */
            if (!c[i].error_no && !c[i].measured) {
                unlink(c[i].so);
                continue;
            }
        } else if (t->o->stop && *t->o->stop) {
            break;
        }
        /* Locally one at a time: kernels must not share the machine. */
        if (!ndev && !c[i].error_no && t->o->objective) {
            double cost = t->o->objective(t->o->objective_ctx, c[i].config);
            memset(&c[i].res, 0, sizeof(c[i].res));
            c[i].res.ncosts = 1;
            c[i].res.costs[0] = cost > 0 ? cost : 1e9;
            if (cost <= 0) {
                c[i].error_no = 4;
                snprintf(c[i].error_text, sizeof(c[i].error_text), "objective: error");
            }
        } else if (!ndev && !c[i].error_no) {
            tt_measure_run(c[i].so, "kernel", t->bufs, t->nparams, t->ninputs, &q.mo, &c[i].res,
                           err);
        }
        finish_result(t, &c[i], &q.mo);
        unlink(c[i].so);
        fill_record(t, &c[i], &recs[nrec], extras[nrec], costs[nrec]);
        t->build_s += c[i].build_s;
        rec_of[nrec++] = i;
    }
    for (int i = 0; i < n; i++)
        unlink(c[i].so);
    /* Record before anything else can go wrong: the batch is what we measured (less what the
     * farm stored as it arrived). */
    tt_db_record unstored[256];
    int nun = 0;
    for (int i = 0; i < nrec; i++)
        if (!c[rec_of[i]].stored)
            unstored[nun++] = recs[i];
    if (nun && tt_db_insert(t->db, unstored, (size_t)nun, NULL))
        return tt_err(err, TT_ERR_IO, "storing measurements: %s", tt_db_errmsg(t->db));
    for (int r = 0; r < nrec; r++) {
        int i = rec_of[r];
        seen_add(t, tt_hash64_str(recs[r].config));
        t->total++;
        t->measured++;
        double thr = 0;
        if (recs[r].error_no) {
            t->errors++;
        } else {
            double med = tt_median(recs[r].costs, recs[r].ncosts);
            note_result(t, recs[r].config, med, 0);
            thr = med > 0 ? t->w->flops / med : 0;
        }
        if (c[i].index == STEPS_INDEX)
            history_add(t, recs[r].config, c[i].rows, c[i].nrows, thr, 0);
        if (c[i].index != UINT64_MAX && c[i].index != STEPS_INDEX)
            run_add(t, c[i].index, thr);
        progress(t, false);
    }
    return failure;
}

/* ---- transfer: records of similar workloads train the model of a new one ---- */

#define TRANSFER_MAX 2000

typedef struct {
    task *t;
    char *keys[32];
    tt_workload *w[32];
    int nkeys;
    int added;
} transfer_ctx;

/* The operator name of a workload key ("matmul" of "matmul:M=..."); 0 for te: workloads. */
static size_t op_prefix(const char *key)
{
    const char *c = strchr(key, ':');
    if (!c || !strncmp(key, "te:", 3))
        return 0;
    return (size_t)(c - key);
}

static int transfer_row(void *ctx, const tt_db_row *row)
{
    transfer_ctx *x = ctx;
    task *t = x->t;
    size_t n = op_prefix(t->w->key);
    if (x->added >= TRANSFER_MAX || !strcmp(row->workload, t->w->key) ||
        op_prefix(row->workload) != n || strncmp(row->workload, t->w->key, n) ||
        row->config_kind != TT_CONFIG_STEPS || !strcmp(row->config, "[]"))
        return 0;
    int g = 0;
    while (g < x->nkeys && strcmp(x->keys[g], row->workload))
        g++;
    if (g == x->nkeys) {
        if (g == 32 || tt_workload_parse(row->workload, &x->w[g], NULL))
            return 0;
        x->keys[g] = strdup(row->workload);
        x->nkeys++;
    }
    tt_step *steps;
    size_t ns;
    tt_state *st;
    if (tt_steps_from_json(row->config, &steps, &ns, NULL))
        return 0;
    if (!tt_state_replay(&x->w[g]->dag, steps, ns, &st, NULL)) {
        float *rows;
        int nr = tt_evo_features(st, &rows);
        double thr = row->error_no == 0 && row->median_s > 0 ? x->w[g]->flops / row->median_s : 0;
        if (nr > 0) {
            history_add(t, row->config, rows, nr, thr, g + 1);
            x->added++;
        }
        free(rows);
        tt_state_free(st);
    }
    free(steps);
    return 0;
}

static void load_transfer(task *t)
{
    if (!op_prefix(t->w->key))
        return;
    transfer_ctx x;
    memset(&x, 0, sizeof(x));
    x.t = t;
    tt_db_filter f = {NULL, t->target_text, t->device, 0, 0};
    tt_db_history(t->db, &f, transfer_row, &x);
    if (x.added && t->log)
        fprintf(t->log, "%s: the cost model starts from %d records of %d similar workload%s\n",
                t->w->key, x.added, x.nkeys, x.nkeys == 1 ? "" : "s");
    for (int i = 0; i < x.nkeys; i++) {
        free(x.keys[i]);
        tt_workload_free(x.w[i]);
    }
}

/* ---- starting points of the template strategies ---- */

#define SEED_WORKLOADS    8 /* similar workloads consulted */
#define SEED_PER_WORKLOAD 2

typedef struct {
    task *t;
    int n;
    struct {
        char *workload, *space;
        uint64_t index;
        double median;
    } rows[512];
} seed_ctx;

/* Collects the error-free template records of other workloads of the same operator. */
static int seed_row(void *ctx, const tt_db_row *row)
{
    seed_ctx *x = ctx;
    task *t = x->t;
    size_t n = op_prefix(t->w->key);
    if (x->n >= (int)TT_ARRAY_LEN(x->rows) || row->error_no || row->median_s <= 0 || !row->extra ||
        !strcmp(row->workload, t->w->key) || op_prefix(row->workload) != n ||
        strncmp(row->workload, t->w->key, n))
        return 0;
    json_t *j = json_loads(row->extra, 0, NULL);
    const char *sig = json_string_value(json_object_get(j, "space"));
    json_t *ix = json_object_get(j, "index");
    if (sig && json_is_integer(ix) && json_integer_value(ix) >= 0 &&
        !strncmp(sig, t->space_sig, strcspn(t->space_sig, ":") + 1)) {
        x->rows[x->n].workload = strdup(row->workload);
        x->rows[x->n].space = strdup(sig);
        x->rows[x->n].index = (uint64_t)json_integer_value(ix);
        x->rows[x->n].median = row->median_s;
        if (x->rows[x->n].workload && x->rows[x->n].space)
            x->n++;
    }
    json_decref(j);
    return 0;
}

static void seed_add(task *t, uint64_t index)
{
    for (int i = 0; i < t->nseeds; i++)
        if (t->seeds[i] == index)
            return;
    if (t->nseeds < (int)TT_ARRAY_LEN(t->seeds))
        t->seeds[t->nseeds++] = index;
}

/* The template's default config, then the best configs of up to SEED_WORKLOADS similar workloads
 * measured on this target and device, each mapped to this workload's space knob by knob
 * (tt_space_nearest_index): good tiles and register tiles carry over between shapes of one
 * operator, so the first round already measures strong candidates. */
static void load_seeds(task *t, int cores)
{
    if (!t->gpu)
        seed_add(t, tt_space_default_index(&t->space, &t->isa));
    if (!op_prefix(t->w->key))
        return;
    seed_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return;
    x->t = t;
    tt_db_filter f = {NULL, t->target_text, t->device, 0, 0};
    tt_db_history(t->db, &f, seed_row, x);
    int used = 0, mapped = 0;
    for (int i = 0; i < x->n && used < SEED_WORKLOADS; i++) {
        if (!x->rows[i].workload)
            continue;
        /* This workload's rows: the best SEED_PER_WORKLOAD of its space. */
        const char *key = x->rows[i].workload;
        tt_workload *w = NULL;
        tt_space sp;
        char sig[40];
        bool ok = !tt_workload_parse(key, &w, NULL) &&
                  !(t->gpu ? tt_space_init_gpu(&sp, &w->dag, t->lim.max_threads,
                                               (int)t->lim.max_vthread, NULL)
                           : tt_space_init(&sp, &w->dag, cores, &t->isa, NULL));
        if (ok)
            space_signature(&sp, sig, sizeof(sig));
        for (int pick = 0; ok && pick < SEED_PER_WORKLOAD; pick++) {
            int best = -1;
            for (int k = i; k < x->n; k++)
                if (x->rows[k].workload && !strcmp(x->rows[k].workload, key) &&
                    !strcmp(x->rows[k].space, sig) && x->rows[k].median < INFINITY &&
                    (best < 0 || x->rows[k].median < x->rows[best].median))
                    best = k;
            if (best < 0)
                break;
            seed_add(t, tt_space_nearest_index(&t->space, &sp, x->rows[best].index));
            mapped++;
            x->rows[best].median = INFINITY; /* taken */
        }
        for (int k = x->n - 1; k >= i; k--) /* done with this workload */
            if (k == i || (x->rows[k].workload && !strcmp(x->rows[k].workload, key))) {
                if (k != i)
                    free(x->rows[k].workload);
                free(x->rows[k].space);
                x->rows[k].workload = x->rows[k].space = NULL;
            }
        free(x->rows[i].workload);
        x->rows[i].workload = NULL;
        tt_workload_free(w);
        used += ok;
    }
    for (int i = 0; i < x->n; i++) {
        free(x->rows[i].workload);
        free(x->rows[i].space);
    }
    free(x);
    if (mapped && t->log)
        fprintf(t->log,
                "%s: starting from the template's default and %d configs of %d similar "
                "workload%s\n",
                t->w->key, mapped, used, used == 1 ? "" : "s");
}

/* What an OpenCL device allows one kernel, from what it reported. */
static void limits_of(const tt_cl_device_info *c, tt_gpu_limits *lim)
{
    tt_gpu_limits_default(lim);
    if (c->max_work_group > 0)
        lim->max_threads = c->max_work_group < 1024 ? c->max_work_group : 1024;
    for (int d = 0; d < 3; d++)
        if (c->max_item[d] > 0)
            lim->max_block[d] = c->max_item[d];
    if (c->local_mem > 0)
        lim->max_shared_bytes = c->local_mem;
}

/* Sets up one workload's task: its space, what was measured before (resume), the reference.
 * `cl` is the OpenCL device of an OpenCL target (NULL otherwise). */
static tt_status task_open(const tt_tune_options *o, const char *wtext, tt_db *db, farm *fm,
                           const tt_cl_device_info *cl, FILE *log, task **out, tt_errbuf *err)
{
    task *t = calloc(1, sizeof(*t));
    tt_status s;
    if (!t)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    *out = t;
    t->evo_fd = -1;
    t->o = o;
    t->db = db;
    t->log = log;
    t->target_text = o->target ? o->target : "llvm";
    tt_rng_seed(&t->rng, o->seed);
    snprintf(t->dir, sizeof(t->dir), "/tmp/tvm-tune-XXXXXX");
    if (!mkdtemp(t->dir)) {
        t->dir[0] = 0;
        return tt_err(err, TT_ERR_IO, "cannot create a work directory: %s", strerror(errno));
    }
    if ((s = tt_workload_parse(wtext, &t->w, err)) ||
        (s = tt_target_parse(t->target_text, &t->target, err)))
        return s;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    t->gpu = cl != NULL;
    if (t->gpu)
        limits_of(cl, &t->lim);
    else
        tt_codegen_vector_isa(&t->target, &t->isa);
    if ((s = t->gpu ? tt_space_init_gpu(&t->space, &t->w->dag, t->lim.max_threads,
                                        (int)t->lim.max_vthread, err)
                    : tt_space_init(&t->space, &t->w->dag,
                                    t->target.num_cores ? t->target.num_cores : (int)cores, &t->isa,
                                    err)))
        return s;
    space_signature(&t->space, t->space_sig, sizeof(t->space_sig));
    if (o->strategy == TT_STRATEGY_EVO) {
        tt_sketch_params sp;
        if (t->gpu) {
            tt_sketch_params_gpu(&sp, (int)t->lim.max_threads, 32);
            sp.max_vthread = (int)t->lim.max_vthread;
        } else {
            tt_sketch_params_cpu(&sp, t->target.num_cores ? t->target.num_cores : (int)cores);
        }
        if ((s = tt_sketch_space_init(&t->sketch, &t->w->dag, &sp, err)))
            return s;
        t->have_sketch = true;
    }
    t->farm = fm;
    t->codegen = (tt_codegen_options){3, 64, 64, NULL, false};
#if defined(__x86_64__)
    t->codegen.object_only = !fm && !t->gpu && !t->target.triple[0];
#endif
    if (fm)
        snprintf(t->device, sizeof(t->device), "%s", fm->device);
    else if (cl)
        tt_cl_fingerprint(cl, t->device, sizeof(t->device));
    else
        tt_host_fingerprint(t->device, sizeof(t->device));
    tt_db_device dev = {
        .key = fm ? fm->key : "local", .fingerprint = t->device, .cores = (int)cores};
    if ((s = tt_db_device_upsert(db, &dev)))
        return tt_err(err, s, "%s", tt_db_errmsg(db));
    /* Resume: what this device already measured for this workload and target. */
    tt_db_filter f = {t->w->key, t->target_text, t->device, 0, 0};
    if ((s = tt_db_history(db, &f, load_history, t)))
        return tt_err(err, s, "%s", tt_db_errmsg(db));
    if (log && t->total > 0)
        fprintf(log, "%s: resuming after %lld measured configs\n", t->w->key, (long long)t->total);
    if (t->have_sketch) {
        load_transfer(t);
        evo_preload(t);
    } else if (o->strategy == TT_STRATEGY_XGB || o->strategy == TT_STRATEGY_GA) {
        load_seeds(t, t->target.num_cores ? t->target.num_cores : (int)cores);
    }
    if (!o->objective && (s = make_reference(t, err)))
        return s;
    t->batch = o->batch > 0 ? o->batch : 2 * (int)cores;
    if (t->batch > 256)
        t->batch = 256;
    if (!(t->cands = calloc((size_t)t->batch, sizeof(candidate))))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    t->t_start = tt_clock_monotonic();
    t->t_start_total = t->total;
    return TT_OK;
}

/* Measures up to `n` more configs; t->exhausted when the search has nothing new to offer. */
static tt_status task_measure(task *t, int64_t n, tt_errbuf *err)
{
    const tt_tune_options *o = t->o;
    int64_t goal = t->total + n;
    candidate *c = t->cands;
    while (t->total < goal && !(o->stop && *o->stop)) {
        int64_t left = goal - t->total;
        int k = pick(t, c, left < t->batch ? (int)left : t->batch);
        if (k == 0) {
            t->exhausted = true;
            if (t->log && o->strategy == TT_STRATEGY_EVO)
                fprintf(t->log, "%s%s: the search found no unmeasured program\n",
                        o->progress ? "\n" : "", t->w->key);
            else if (t->log)
                fprintf(t->log, "%s%s: the search space is exhausted (%llu configs)\n",
                        o->progress ? "\n" : "", t->w->key, (unsigned long long)t->space.size);
            break;
        }
        tt_status s = round_trip(t, c, k, err);
        for (int i = 0; i < k; i++) {
            free(c[i].config);
            free(c[i].rows);
            memset(&c[i], 0, sizeof(c[i]));
        }
        if (s)
            return s;
    }
    return TT_OK;
}

static void task_close(task *t, const char *wtext, tt_tune_summary *sum)
{
    const tt_tune_options *o = t->o;
    memset(sum, 0, sizeof(*sum));
    snprintf(sum->workload, sizeof(sum->workload), "%s", t->w ? t->w->key : wtext);
    sum->measured = t->measured;
    sum->total = t->total;
    sum->errors = t->errors;
    sum->best_s = t->best_s;
    sum->naive_s = t->naive_s;
    sum->flops = t->w ? t->w->flops : 0;
    sum->compile_s = t->measured ? t->build_s / (double)t->measured : 0;
    sum->interrupted = o->stop && *o->stop;
    if (t->best_config)
        snprintf(sum->best_config, sizeof(sum->best_config), "%s", t->best_config);
    free(t->cands);
    for (int i = 0; i < t->nparams; i++)
        free(t->data[i]);
    free(t->seen);
    free(t->best_config);
    free(t->run_idx);
    free(t->run_score);
    free(t->gen);
    tt_costmodel_free(t->model);
    if (t->have_sketch)
        tt_sketch_space_free(&t->sketch);
    tt_evo_history_free(&t->hist);
    if (t->evo_fd >= 0) { /* a round nobody will use */
        kill(t->evo_pid, SIGKILL);
        reap_search(t->evo_fd, t->evo_pid);
    }
    free(t->preload);
    for (int i = t->plan_next; i < t->nplan; i++)
        free(t->plan[i]);
    free(t->plan);
    free(t->sched_hist);
    tt_workload_free(t->w);
    if (t->dir[0])
        rmdir(t->dir);
    free(t);
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
    tt_sched_task st[64];
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
    }
    for (int i = 0; i < n; i++)
        progress(tasks[i], true);
    return TT_OK;
}

/* The first session of a farm run: the device's fingerprint names the records, and a target for
 * another architecture than the devices' is refused before anything is compiled. */
static tt_status farm_check(farm *f, const tt_target *t, tt_errbuf *err)
{
    tt_status s = farm_session(f, 0, err);
    if (s)
        return s;
    const tt_device_info *d = tt_remote_device(f->session[0]);
    snprintf(f->device, sizeof(f->device), "%s", d->fingerprint);
    const char *host, *cpu, *features;
    tt_codegen_host(&host, &cpu, &features);
    char want[32];
    tt_triple_arch(t->triple[0] ? t->triple : host, want, sizeof(want));
    if (!strcmp(t->kind, "opencl")) {
        if (d->opencl_selected < 0 || d->opencl_selected >= d->nopencl)
            return tt_err(err, TT_ERR_INVALID_ARG,
                          "the target is OpenCL but device %s ('%s') has no OpenCL device (start "
                          "its tvm-rpc-server where an OpenCL driver is installed)",
                          tt_remote_peer(f->session[0]), f->key);
        f->cl = d->opencl[d->opencl_selected];
        snprintf(f->device, sizeof(f->device), "%s", d->opencl_fingerprint);
    } else if (strcmp(want, d->arch))
        return tt_err(err, TT_ERR_INVALID_ARG,
                      "the target compiles for %s but device %s ('%s') is %s: give a target such "
                      "as \"llvm -mtriple=%s\"",
                      want, tt_remote_peer(f->session[0]), f->key, d->arch, d->triple);
    int n = f->o->parallel;
    if (n <= 0 && tt_remote_count_devices(f->o, &n, err))
        n = 1;
    f->ndevices = n < 1 ? 1 : n > FARM_MAX_DEVICES ? FARM_MAX_DEVICES : n;
    if (f->log)
        fprintf(f->log, "measuring on the farm: %d device%s of key '%s', first %s (%s)\n",
                f->ndevices, f->ndevices > 1 ? "s" : "", f->key, tt_remote_peer(f->session[0]),
                f->device);
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
    tt_status s = tt_target_parse(o->target ? o->target : "llvm", &t, err);
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
        if ((s = farm_check(&fm, &t, err))) {
            farm_release(&fm, 0);
            return s;
        }
    } else if (opencl) {
        tt_device_info here;
        tt_device_probe(&here);
        if ((s = tt_device_probe_opencl(&here, o->measure.opencl_device, err)))
            return tt_err_prefix(err, s, "OpenCL");
        if (here.opencl_selected < 0)
            return tt_err(err, TT_ERR_NOT_FOUND,
                          "the target is OpenCL but this machine has no OpenCL device (install "
                          "the GPU's OpenCL driver, or pocl-opencl-icd for the CPU)");
        fm.cl = here.opencl[here.opencl_selected];
        if (log)
            fprintf(log, "measuring on OpenCL device %d:%d, %s (%s)\n", fm.cl.platform,
                    fm.cl.device, fm.cl.name, fm.cl.version);
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
    s = tt_db_open(o->db_path ? o->db_path : "tuning.db", 0, &db, err);
    if (s)
        return s;
    if (o->db_max_bytes > 0 && (s = tt_db_limit_size(db, o->db_max_bytes))) {
        tt_err(err, s, "%s", tt_db_errmsg(db));
        tt_db_close(db);
        return s;
    }
    task *tasks[64] = {0};
    int n = o->nworkloads < 64 ? o->nworkloads : 64;
    if (o->nworkloads > 64)
        s = tt_err(err, TT_ERR_LIMIT, "at most 64 workloads in one run");
    for (int i = 0; i < n && !s; i++)
        s = task_open(o, o->workloads[i], db, o->remote ? &fm : NULL, opencl ? &fm.cl : NULL, log,
                      &tasks[i], err);
    if (!s)
        s = schedule_tasks(o, tasks, n, log, err);
    for (int k = 0; k < FARM_MAX_DEVICES; k++)
        farm_release(&fm, k);
    pthread_mutex_destroy(&fm.mu);
    for (int i = 0; i < n; i++)
        if (tasks[i]) {
            task_close(tasks[i], o->workloads[i], &summaries[i]);
            summaries[i].device_losses = fm.losses;
            summaries[i].devices_quarantined = fm.quarantined;
            summaries[i].queue_wait_s = fm.wait_s;
        }
    tt_db_close(db);
    return s;
}
