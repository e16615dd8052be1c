/* One workload's task: what earlier runs measured (resume), the inputs and reference outputs,
 * the task's opening and closing summary. */
#include "tune_int.h"

#include "../base/workdir.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

tt_elem tt_tune_measure_elem(tt_dtype t)
{
    switch (t) {
    case TT_DT_FLOAT32: return TT_ELEM_F32;
    case TT_DT_FLOAT64: return TT_ELEM_F64;
    case TT_DT_INT32: return TT_ELEM_I32;
    case TT_DT_INT64: return TT_ELEM_I64;
    default: return TT_ELEM_U8;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

bool tt__tune_seen_has(const task *t, uint64_t h)
{
    return t->nseen && bsearch(&h, t->seen, t->nseen, sizeof(uint64_t), cmp_u64) != NULL;
}

void tt__tune_seen_add(task *t, uint64_t h)
{
    if (tt__tune_seen_has(t, h))
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

void tt__tune_note_result(task *t, const char *config, double fastest, int error_no)
{
    if (error_no || fastest <= 0)
        return; /* no time to compare */
    if (!strcmp(config, "[]"))
        t->naive_s = fastest;
    if (t->best_s == 0 || fastest < t->best_s) {
        t->best_s = fastest;
        free(t->best_config);
        t->best_config = strdup(config);
    }
}

/* Remembers a measured template config for the model and the genetic algorithm. */
void tt__tune_run_add(task *t, uint64_t index, double thr)
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

double tt_tune_label(double flops, const double *costs, int ncosts, double median_s, int error_no)
{
    double fastest = tt_fastest(costs, ncosts);
    if (fastest <= 0)
        fastest = median_s;
    return error_no == 0 && fastest > 0 ? flops / fastest : 0;
}

/* Adds a measured program to the evolutionary search's training data. */
void tt__tune_history_add(task *t, const char *config, const float *rows, int nrows, double thr,
                          int group, uint64_t program)
{
    if (tt_evo_history_add(&t->hist, config, rows, nrows, thr, group, program) && t->log)
        fprintf(t->log, "note: out of memory for the cost model's training data\n");
}

/* Where a network-mode record's flush name says the weights waited, for a warning. */
static const char *where_weights(const char *flush_name, char *buf, size_t size)
{
    if (!strcmp(flush_name, "network"))
        return "memory";
    if (strncmp(flush_name, "network-llc-", 12))
        return "the last-level cache";
    snprintf(buf, size, "the last-level cache for %s%% of their lines", flush_name + 12);
    return buf;
}

/* Counts a resumed record timed with another cache flush mode than this run's. */
static void note_flush(task *t, const char *extra)
{
    json_t *j = extra ? json_loads(extra, 0, NULL) : NULL;
    const char *mode = json_string_value(json_object_get(j, "flush"));
    /* Records from before records said: not the network mode, which came later. */
    if (!mode && t->o->measure.cache_flush == TT_CACHE_FLUSH_NETWORK)
        mode = "unrecorded";
    /* On a farm the devices decide between the two network forms: either compares. */
    bool same =
        mode && (t->flush_name[0] ? !strcmp(mode, t->flush_name) : !strncmp(mode, "network", 7));
    if (mode && !same) {
        if (!t->other_flush++)
            snprintf(t->other_flush_name, sizeof(t->other_flush_name), "%s", mode);
    }
    json_decref(j);
}

static int load_history(void *ctx, const tt_db_row *row)
{
    task *t = ctx;
    tt__tune_seen_add(t, tt_hash64_str(row->config));
    t->total++;
    if (row->error_no)
        t->errors++;
    tt__tune_note_result(t, row->config, row->fastest_s, row->error_no);
    double thr = tt_tune_label(t->w->flops, row->costs, row->ncosts, row->median_s, row->error_no);
    /* Template strategies: the model and the GA continue from what was measured. */
    uint64_t index;
    if (record_index(t, row->extra, &index))
        tt__tune_run_add(t, index, thr);
    if (!t->gpu && !t->o->objective && !row->error_no)
        note_flush(t, row->extra);
    /* The model retrains on everything measured before (search.md C11). */
    tt_state *st;
    if (t->have_sketch && strcmp(row->config, "[]") &&
        !tt_state_from_json(&t->w->dag, row->config, &st, NULL)) {
        float *rows;
        uint64_t program;
        int nr = tt_evo_features(st, NULL, &rows, &program);
        tt__tune_history_add(t, row->config, rows, nr > 0 ? nr : 0, thr, 0, program);
        free(rows);
        tt_state_free(st);
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
            tt_fill_input(d, params[i], t->data[i], t->o->seed + (uint64_t)i * 7919);
        else
            memset(t->data[i], 0, bytes);
        t->bufs[i].elem = tt_tune_measure_elem(op->dtype);
        t->bufs[i].count = tt_op_numel(op);
        t->bufs[i].data = i < t->ninputs ? t->data[i] : NULL;
        t->bufs[i].expect = i < t->ninputs ? NULL : t->data[i];
        t->bufs[i].constant = i < t->ninputs && (op->attrs & TT_OP_ATTR_CONSTANT);
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

/* What an OpenCL device allows one kernel, from what it reported. */
static int64_t tighter(int64_t device, int64_t asked)
{
    return asked > 0 && (device <= 0 || asked < device) ? asked : device;
}

/* The device's limits, tightened by the options' own (tt_tune_options.gpu_limits). */
static void limits_of(const tt_cl_device_info *c, const tt_gpu_limits *asked, tt_gpu_limits *lim)
{
    tt_gpu_limits_default(lim);
    if (c->max_work_group > 0)
        lim->max_threads = c->max_work_group < 1024 ? c->max_work_group : 1024;
    for (int d = 0; d < 3; d++)
        if (c->max_item[d] > 0)
            lim->max_block[d] = c->max_item[d];
    if (c->local_mem > 0)
        lim->max_shared_bytes = c->local_mem;
    if (!asked)
        return;
    lim->max_threads = tighter(lim->max_threads, asked->max_threads);
    for (int d = 0; d < 3; d++)
        lim->max_block[d] = tighter(lim->max_block[d], asked->max_block[d]);
    lim->max_shared_bytes = tighter(lim->max_shared_bytes, asked->max_shared_bytes);
    lim->max_private_bytes = tighter(lim->max_private_bytes, asked->max_private_bytes);
    lim->max_vthread = tighter(lim->max_vthread, asked->max_vthread);
}

/* Sets up one workload's task: its space, what was measured before (resume), the reference.
 * `cl` is the OpenCL device of an OpenCL target (NULL otherwise). */
tt_status tt__tune_task_open(const tt_tune_options *o, const char *wtext, tt_db *db, farm *fm,
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
    if ((s = tt_workdir_create("tvm-tune", t->dir, sizeof(t->dir), err)))
        return s;
    if ((s = tt_workload_parse(wtext, &t->w, err)) ||
        (s = tt_target_parse(t->target_text, &t->target, err)))
        return s;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    t->gpu = cl != NULL;
    if (t->gpu) {
        limits_of(cl, o->gpu_limits, &t->lim);
        t->lim.max_threads = tighter(t->lim.max_threads, t->target.max_num_threads);
        t->lim.max_shared_bytes =
            tighter(t->lim.max_shared_bytes, t->target.max_shared_memory_per_block);
        /* the target's -thread_warp_size, else what the device's vendor reports (AMD: 64) */
        t->warp = tt_sketch_gpu_warp(t->lim.max_threads, t->target.thread_warp_size > 0
                                                             ? t->target.thread_warp_size
                                                             : cl->warp);
    } else
        tt_codegen_vector_isa(&t->target, &t->isa);
    t->overlap_builds = t->gpu && (o->overlap_builds > 0 ||
                                   (o->overlap_builds == 0 && strcmp(cl->type, "cpu") != 0));
    if ((s = t->gpu ? tt_space_init_gpu(&t->space, &t->w->dag, t->lim.max_threads,
                                        (int)t->lim.max_vthread,
                                        tt_target_fast_local_memory(&t->target), err)
                    : tt_space_init(&t->space, &t->w->dag,
                                    t->target.num_cores ? t->target.num_cores : (int)cores, &t->isa,
                                    err)))
        return s;
    tt_space_signature(&t->space, t->space_sig, sizeof(t->space_sig));
    if (tt_strategy_uses_sketches(o->strategy)) {
        tt_sketch_params sp;
        if (t->gpu) {
            tt_sketch_params_gpu(&sp, (int)t->lim.max_threads, t->warp);
            sp.shared_memory = tt_target_fast_local_memory(&t->target);
            sp.max_vthread = (int)t->lim.max_vthread;
            /* the fixed tilings keep under the target's local memory, as a build's default */
            sp.max_shared_bytes = t->target.max_shared_memory_per_block;
            sp.device_shared_bytes = t->lim.max_shared_bytes;
        } else {
            tt_sketch_params_cpu(&sp, t->target.num_cores ? t->target.num_cores : (int)cores);
            /* Register tiles of the target's vectors; vectors of up to 4 registers. */
            if (t->isa.vector_bytes >= 16) {
                sp.vector_lanes = t->isa.vector_bytes / 4;
                sp.vector_regs = t->isa.vector_regs;
                if (sp.max_vectorize < 4 * sp.vector_lanes)
                    sp.max_vectorize = 4 * sp.vector_lanes;
            }
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
    double llc_share = t->o->measure.cache_flush == TT_CACHE_FLUSH_NETWORK
                           ? tt_measure_network_llc_share(t->o->measure.network_bytes)
                           : 0;
    if (!t->o->remote || t->o->measure.cache_flush != TT_CACHE_FLUSH_NETWORK)
        snprintf(t->flush_name, sizeof(t->flush_name), "%s",
                 tt_measure_flush_name(t->o->measure.cache_flush, llc_share));
    if ((s = tt_db_history(db, &f, load_history, t)))
        return tt_err(err, s, "%s", tt_db_errmsg(db));
    if (log && t->total > 0)
        fprintf(log, "%s: resuming after %lld measured configs\n", t->w->key, (long long)t->total);
    if (log && t->other_flush > 0 && !strncmp(t->other_flush_name, "network", 7) &&
        !strncmp(t->flush_name, "network", 7)) {
        char then[64], now[64];
        fprintf(log,
                "%s: warning: %lld earlier records were timed with the weights in %s, this run "
                "keeps them in %s (the network's %.0f MB against this machine's last-level cache "
                "of %.0f MB): their times do not compare (tune into a new database)\n",
                t->w->key, (long long)t->other_flush,
                where_weights(t->other_flush_name, then, sizeof(then)),
                where_weights(t->flush_name, now, sizeof(now)),
                (double)t->o->measure.network_bytes / 1e6, (double)tt_measure_llc_bytes() / 1e6);
    } else if (log && t->other_flush > 0)
        fprintf(log,
                "%s: warning: %lld earlier records were timed with cache flush '%s', this run "
                "times with '%s': their times do not compare (resume with --cache-flush=%s, or "
                "tune into a new database)\n",
                t->w->key, (long long)t->other_flush, t->other_flush_name,
                t->flush_name[0] ? t->flush_name : tt_cache_flush_name(t->o->measure.cache_flush),
                !strcmp(t->other_flush_name, "unrecorded")    ? "constants"
                : !strncmp(t->other_flush_name, "network", 7) ? "network"
                                                              : t->other_flush_name);
    if (o->strategy == TT_STRATEGY_EVO) { /* a model's history and saved model */
        tt__tune_load_transfer(t);
        tt__tune_evo_preload(t);
    }
    /* Starting points for the searches that learn (random, grid and sketch-random stay
     * unbiased anchors). */
    if (o->strategy == TT_STRATEGY_XGB || o->strategy == TT_STRATEGY_GA ||
        o->strategy == TT_STRATEGY_EVO)
        tt__tune_load_seeds(t, t->target.num_cores ? t->target.num_cores : (int)cores);
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

void tt__tune_task_close(task *t, const char *wtext, tt_tune_summary *sum)
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
    sum->measure_s = t->measured ? t->measure_s / (double)t->measured : 0;
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
        tt__tune_reap_search(t->evo_fd, t->evo_pid);
    }
    free(t->preload);
    for (int i = t->plan_next; i < t->nplan; i++)
        free(t->plan[i]);
    free(t->plan);
    free(t->sched_hist);
    tt_workload_free(t->w);
    /* with whatever a stopped round, a failed link or the farm's canary left in it */
    tt_workdir_remove(t->dir);
    free(t);
}
