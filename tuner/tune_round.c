/* One round of a task: pick candidates from the strategy, compile them in parallel, measure
 * them here or on the farm, store every result as it arrives. */
#include "tune_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Builds the artifact with this machine's driver in a helper, in the compile phase, so the
 * drivers' compilers run in parallel and the measurements that follow one at a time find the
 * program in the driver's cache (pocl: 1-2 s a candidate cold, 0.15-0.2 s warm).  A build the
 * driver refuses is COMPILE_DEVICE now; one over TT_TUNE_GPU_BUILD_S is BUILD_TIMEOUT. */
static void prebuild_opencl(task *t, candidate *c, tt_errbuf *err)
{
    tt_measure_options mo = {.timeout_s = TT_TUNE_GPU_BUILD_S,
                             .opencl_device = t->o->measure.opencl_device,
                             .build_only = true};
    tt_measure_result res;
    tt_errbuf ignored = {{0}};
    if (tt_measure_run(c->so, "kernel", NULL, 0, 0, &mo, &res, &ignored))
        return;              /* no helper ran: the measurement builds it */
    if (res.error_no == 7) { /* RUN_TIMEOUT of the helper: the driver's build */
        c->error_no = 6;     /* BUILD_TIMEOUT */
        tt_err(err, TT_ERR_LIMIT, "the OpenCL driver's build took longer than %.0f s",
               TT_TUNE_GPU_BUILD_S);
    } else if (res.error_no) {
        c->error_no = res.error_no;
        tt_err(err, TT_ERR_RUNTIME, "%s", res.error_text);
    }
}

/* OpenCL source for the device's driver; a kernel outside the device's limits, or with bindings
 * a GPU cannot run, is an INSTANTIATION_ERROR before anything is sent.  Measured here, the driver
 * builds it now (prebuild_opencl); a farm's devices build their own. */
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
    if (!c->error_no && (!t->farm || t->farm->ndevices == 0))
        prebuild_opencl(t, c, err);
}

void tt__tune_compile_one(candidate *c)
{
    task *t = c->t;
    tt_errbuf err = {{0}};
    double t0 = tt_clock_monotonic();
    tt_program *prog = NULL;
    tt_state *st = NULL;
    if (c->index == UINT64_MAX) { /* the naive schedule (on GPU: bound to blocks and threads) */
        if (t->gpu ? tt_sketch_gpu_default(&t->w->dag, t->warp, &st, &err)
                   : tt_state_create(&t->w->dag, &st, &err))
            c->error_no = 1;
    } else if (c->index == STEPS_INDEX) {
        if (tt_state_from_json(&t->w->dag, c->config, &st, &err))
            c->error_no = 1;
    } else if (tt_space_apply(&t->space, c->index, &st, &err)) {
        c->error_no = 1; /* INSTANTIATION_ERROR */
    }
    if (!c->error_no && tt_lower(st, &prog, &err))
        c->error_no = 1;
    for (int i = 0; !c->error_no && i < prog->nparams; i++) {
        const tt_buffer *b = tt_program_param(prog, i);
        if (!b || !b->layout.nparts)
            continue;
        if (!c->layouts && !(c->layouts = calloc((size_t)prog->nparams, sizeof(tt_layout)))) {
            c->error_no = 1;
            tt_err(&err, TT_ERR_NOMEM, "out of memory");
            break;
        }
        c->layouts[i] = b->layout;
    }
    if (!c->error_no && t->have_sketch) {
        int n = tt_features_per_store(prog, NULL, 0);
        if (n > 0 && (c->rows = malloc(sizeof(float) * TT_STORE_FEATURES * (size_t)n)))
            c->nrows = tt_features_per_store(prog, c->rows, n);
        c->program = tt_evo_program_hash(prog);
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

const tt_measure_buffer *tt__tune_candidate_bufs(task *t, const candidate *c,
                                                 tt_measure_buffer *bufs, void **scratch)
{
    *scratch = NULL;
    if (!c->layouts)
        return t->bufs;
    int params[64];
    tt_dag_params(&t->w->dag, params, 64, NULL);
    size_t total = 0;
    for (int i = 0; i < t->ninputs; i++)
        if (c->layouts[i].nparts)
            total += (size_t)c->layouts[i].size * tt_elem_bytes(t->bufs[i].elem) + 64;
    char *block = NULL;
    if (posix_memalign((void **)&block, 64, total ? total : 64))
        return t->bufs; /* out of memory: measured unpacked, the check reports it */
    memcpy(bufs, t->bufs, sizeof(tt_measure_buffer) * (size_t)t->nparams);
    size_t off = 0;
    for (int i = 0; i < t->ninputs; i++) {
        const tt_layout *l = &c->layouts[i];
        if (!l->nparts)
            continue;
        const tt_op *op = &t->w->dag.ops.data[params[i]];
        size_t esize = tt_elem_bytes(t->bufs[i].elem);
        tt_layout_pack(l, op->ndim, op->shape, esize, t->data[i], block + off);
        bufs[i].data = block + off;
        bufs[i].count = l->size;
        bufs[i].transient = true;
        off += ((size_t)l->size * esize + 63) / 64 * 64;
    }
    *scratch = block;
    return bufs;
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
        tt__tune_compile_one(&q->c[i]);
        pthread_mutex_lock(&q->mu);
        q->c[i].compiled = true;
        pthread_cond_broadcast(&q->compiled);
        pthread_mutex_unlock(&q->mu);
    }
}

/* ---- the run's compile threads (OpenCL measured here) ---- */

static void *pool_thread(void *arg)
{
    compile_pool *p = arg;
    tt_measure_keep_builder();
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->gen == seen)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        compile_queue *q = p->q;
        pthread_mutex_unlock(&p->mu);
        compile_worker(q);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    tt_measure_release_builder();
    return NULL;
}

void tt__compile_pool_start(compile_pool *p, int nthreads)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    for (int i = 0; i < nthreads && i < 64; i++)
        if (!pthread_create(&p->th[p->nthreads], NULL, pool_thread, p))
            p->nthreads++;
}

void tt__compile_pool_stop(compile_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
}

/* Hands the batch to every thread of the pool; each drains its queue. */
static void pool_post(compile_pool *p, compile_queue *q)
{
    pthread_mutex_lock(&p->mu);
    p->q = q;
    p->busy = p->nthreads;
    p->gen++;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

/* Waits until every thread is done with the batch (the queue may then go). */
static void pool_wait(compile_pool *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->idle, &p->mu);
    p->q = NULL;
    pthread_mutex_unlock(&p->mu);
}

/* After a measurement: TVM's error fields of the candidate (idempotent). */
void tt__tune_finish_result(task *t, candidate *c, const tt_measure_options *mo)
{
    if (c->error_no || t->o->objective)
        return;
    double deadline = t->gpu ? mo->timeout_s : mo->kernel_timeout_s;
    if (c->res.error_no == 7 && deadline > 0 && deadline < t->o->measure.timeout_s)
        snprintf(c->res.error_text, sizeof(c->res.error_text),
                 "killed after %.3g s: more than 50x slower than the best so far (%.3g s)",
                 deadline, t->best_s);
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
    /* the template index (resume), on a farm the measuring device's address (marking), on a
     * CPU how the caches were flushed (times of two modes do not compare), and on a GPU which
     * fixed tiling a start is (what the bench's tables and a user's history call it) */
    bool indexed = c->index != UINT64_MAX && c->index != STEPS_INDEX;
    bool flushed = !t->gpu && !t->o->objective;
    if (indexed || c->host[0] || flushed || c->start) {
        json_t *x = json_object();
        if (indexed) {
            json_object_set_new(x, "space", json_string(t->space_sig));
            json_object_set_new(x, "index", json_integer((json_int_t)c->index));
        }
        if (c->host[0])
            json_object_set_new(x, "host", json_string(c->host));
        if (c->start)
            json_object_set_new(x, "start", json_string(c->start));
        if (flushed)
            json_object_set_new(
                x, "flush",
                json_string(tt_measure_flush_name(t->o->measure.cache_flush, c->res.llc_share)));
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
void tt__tune_store_now(task *t, candidate *c)
{
    tt_db_record r;
    char extra[EXTRA_MAX];
    double costs[TT_MEASURE_MAX_REPEAT];
    fill_record(t, c, &r, extra, costs);
    pthread_mutex_lock(&t->farm->mu);
    c->stored = !tt_db_insert(t->db, &r, 1, NULL);
    pthread_mutex_unlock(&t->farm->mu);
}

/* The steps of a template config; NULL when it does not apply or (GPU) when its kernel exceeds
 * the device's limits, which the template's knobs cannot see (local memory grows with the tiles):
 * such a config is never offered, as the evolutionary search never offers one. */
static char *config_of(task *t, uint64_t index)
{
    if (index == UINT64_MAX)
        return strdup("[]");
    tt_state *st;
    if (tt_space_apply(&t->space, index, &st, NULL))
        return NULL;
    tt_program *prog;
    if (t->gpu && !tt_lower(st, &prog, NULL)) {
        tt_status s = tt_codegen_opencl_check(prog, &t->lim, NULL);
        tt_program_free(prog);
        if (s == TT_ERR_LIMIT || s == TT_ERR_ILLEGAL_STEP) {
            tt_state_free(st);
            return NULL;
        }
    }
    char *j = tt_steps_to_json(st->steps.data, st->steps.len);
    tt_state_free(st);
    return j;
}

/* GPU sketch search: the fixed tilings of tt_sketch_gpu_tiled (the one a build takes without
 * records, and the large one with scalar and 4-float fetches, double-buffered, and with A's rows
 * in registers) are measured
 * right after the baseline, so that a tuned record is never slower than the untuned build, and the
 * search breeds from them as from any measured program.  Before, 24 trials of a ResNet task could
 * end slower than the build's default. */
static int pick_gpu_starts(task *t, candidate *c, int n, int want)
{
    static const tt_gpu_tile sizes[] = {TT_GPU_TILE_DEFAULT, TT_GPU_TILE_LARGE,
                                        TT_GPU_TILE_LARGE_FLOAT4, TT_GPU_TILE_LARGE_DOUBLE_BUFFER,
                                        TT_GPU_TILE_LARGE_REGISTERS};
    static const char *const names[] = {"default", "large", "large-float4", "large-double-buffer",
                                        "large-registers"};
    if (!t->gpu || !t->have_sketch)
        return n;
    /* a batch smaller than the starts leaves the rest to the next one */
    while (t->gpu_starts_picked < (int)(sizeof(sizes) / sizeof(sizes[0])) && n < want) {
        tt_state *st;
        if (tt_sketch_gpu_tiled(&t->w->dag, &t->sketch.params, sizes[t->gpu_starts_picked++], &st,
                                NULL))
            continue;
        char *cfg = tt_steps_to_json(st->steps.data, st->steps.len);
        tt_state_free(st);
        bool dup = !cfg || tt__tune_seen_has(t, tt_hash64_str(cfg));
        for (int i = 0; i < n && !dup; i++)
            dup = !strcmp(c[i].config, cfg);
        if (dup) {
            free(cfg);
            continue;
        }
        c[n].index = STEPS_INDEX;
        c[n].config = cfg;
        c[n].start = names[t->gpu_starts_picked - 1];
        n++;
    }
    return n;
}

/* Picks up to `want` unmeasured configs. */
int tt__tune_pick(task *t, candidate *c, int want)
{
    int n = 0;
    bool baseline = t->naive_s == 0 && !tt__tune_seen_has(t, tt_hash64_str("[]"));
    if (baseline && want > 0) {
        c[n].index = UINT64_MAX;
        c[n].config = strdup("[]");
        n++;
    }
    n = pick_gpu_starts(t, c, n, want);
    /* The model proposes once it has something to learn from; 5% of picks stay random. */
    uint64_t plan[256];
    int nplan = 0, plan_next = 0;
    if (t->o->strategy == TT_STRATEGY_XGB && t->nrun >= 2 * want && t->nrun >= 16)
        nplan = tt__tune_model_plan(t, plan, 256);
    int pop = t->space.size < 64 ? (int)t->space.size : 64;
    if (t->o->strategy == TT_STRATEGY_GA && !t->gen)
        t->gen = calloc((size_t)pop, sizeof(uint64_t));
    int64_t tries = 0;
    int rounds = 0;
    while (n < want && tries < 64 * (int64_t)want + 1000) {
        tries++;
        uint64_t idx;
        char *planned = NULL;
        if (t->seed_next < t->nseeds) {
            /* Starting points first (xgb, ga, evo: template configs; the evolutionary search
             * then breeds from them as from any measured program). */
            idx = t->seeds[t->seed_next++];
        } else if (tt_strategy_uses_sketches(t->o->strategy)) {
            /* A search round plans 64 measurements (Ansor's measures per round). */
            if (t->plan_next >= t->nplan) {
                if (rounds++ == 2)
                    break;
                int64_t left = t->o->trials - t->total;
                tt__tune_evo_start(t, left < 64 ? (int)(left > want ? left : want) : 64);
                tt__tune_evo_finish(t);
                if (t->nplan == 0)
                    break;
            }
            planned = t->plan[t->plan_next];
            t->plan[t->plan_next++] = NULL;
            idx = STEPS_INDEX;
            /* Overlapped: plan the next round while the second half of this one is measured. */
            int64_t after = t->o->trials - t->total - n - (t->nplan - t->plan_next);
            if (t->o->overlap_search && t->plan_next * 2 >= t->nplan && after > 0)
                tt__tune_evo_start(t, after < 64 ? (int)after : 64);
        } else if (t->o->strategy == TT_STRATEGY_GRID) {
            if (t->grid_next >= t->space.size)
                break;
            idx = t->grid_next++;
        } else if (t->o->strategy == TT_STRATEGY_XGB && plan_next < nplan &&
                   tt_rng_uniform(&t->rng) >= 0.05) {
            idx = plan[plan_next++];
        } else if (t->o->strategy == TT_STRATEGY_GA && t->gen && t->nrun >= pop) {
            /* The first generation is random; later ones are bred from measured ones. */
            if (t->gen_next >= t->ngen)
                tt__tune_ga_breed(t, pop);
            idx = t->gen_next < t->ngen ? t->gen[t->gen_next++]
                                        : tt_rng_below(&t->rng, t->space.size);
        } else {
            idx = tt_rng_below(&t->rng, t->space.size);
        }
        char *cfg = planned ? planned : config_of(t, idx);
        if (!cfg)
            continue;
        uint64_t h = tt_hash64_str(cfg);
        bool dup = tt__tune_seen_has(t, h);
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

void tt__tune_progress(task *t, bool final)
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

tt_status tt__tune_round_trip(task *t, candidate *c, int n, tt_errbuf *err)
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
    /* A CPU child times its kernel's calls from the first one, so that a slow start on a loaded
     * machine is not taken for a slow kernel; an OpenCL measurement is bounded as a whole, the
     * driver's build of the source included. */
    if (t->gpu)
        q.mo.timeout_s = tt_tune_deadline(&q.mo, t->best_s) + TT_TUNE_GPU_BUILD_S;
    else
        q.mo.kernel_timeout_s = tt_tune_deadline(&q.mo, t->best_s);
    int nth = t->o->threads > 0 ? t->o->threads : 1;
    if (nth > n)
        nth = n;
    int ndev = t->farm && !t->o->objective ? t->farm->ndevices : 0;
    pthread_t th[64 + FARM_MAX_DEVICES];
    farm_worker_arg fa[FARM_MAX_DEVICES];
    int started = 0, measuring = 0;
    bool pooled = t->pool && t->pool->nthreads > 0 && !ndev;
    if (pooled)
        pool_post(t->pool, &q);
    for (int i = 0; i < nth && i < 64 && !pooled; i++)
        if (!pthread_create(&th[started], NULL, compile_worker, &q))
            started++;
    if (started == 0 && !pooled)
        compile_worker(&q);
    for (int k = 0; k < ndev; k++) {
        fa[k] = (farm_worker_arg){&q, k};
        if (!pthread_create(&th[started + measuring], NULL, tt__tune_farm_worker, &fa[k]))
            measuring++;
    }
    if (ndev && measuring == 0) {
        fa[0] = (farm_worker_arg){&q, 0};
        tt__tune_farm_worker(&fa[0]);
    }
    /* A GPU measured here (t->overlap_builds): each candidate as soon as the driver has built it
     * (the compile workers take them in order), while the later ones build; otherwise after the
     * whole batch, so that no build shares the machine with a measurement. */
    bool overlap = !ndev && !t->o->objective && t->overlap_builds && (pooled || started > 0);
    if (!overlap) {
        if (pooled)
            pool_wait(t->pool);
        for (int i = 0; i < started + measuring; i++)
            pthread_join(th[i], NULL);
    }
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
        if (overlap) {
            pthread_mutex_lock(&q.mu);
            while (!c[i].compiled)
                pthread_cond_wait(&q.compiled, &q.mu);
            pthread_mutex_unlock(&q.mu);
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
            tt_measure_buffer packed[64];
            void *scratch;
            const tt_measure_buffer *bufs = tt__tune_candidate_bufs(t, &c[i], packed, &scratch);
            tt_measure_run(c[i].so, "kernel", bufs, t->nparams, t->ninputs, &q.mo, &c[i].res, err);
            free(scratch);
        }
        tt__tune_finish_result(t, &c[i], &q.mo);
        unlink(c[i].so);
        fill_record(t, &c[i], &recs[nrec], extras[nrec], costs[nrec]);
        t->build_s += c[i].build_s;
        t->measure_s += c[i].res.run_s;
        rec_of[nrec++] = i;
    }
    if (overlap && pooled) /* the rest of the batch, after a stop */
        pool_wait(t->pool);
    else if (overlap)
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
    pthread_cond_destroy(&q.compiled);
    pthread_mutex_destroy(&q.mu);
    tt_status failure = q.failure;
    if (failure)
        tt_err(err, failure, "%s", q.err.msg);
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
        tt__tune_seen_add(t, tt_hash64_str(recs[r].config));
        t->total++;
        t->measured++;
        double thr = 0;
        if (recs[r].error_no) {
            t->errors++;
        } else {
            double fastest = tt_fastest(recs[r].costs, recs[r].ncosts);
            tt__tune_note_result(t, recs[r].config, fastest, 0);
            thr = tt_tune_label(t->w->flops, recs[r].costs, recs[r].ncosts, fastest, 0);
        }
        if (c[i].index == STEPS_INDEX)
            tt__tune_history_add(t, recs[r].config, c[i].rows, c[i].nrows, thr, 0, c[i].program);
        if (c[i].index != UINT64_MAX && c[i].index != STEPS_INDEX)
            tt__tune_run_add(t, c[i].index, thr);
        tt__tune_progress(t, false);
    }
    return failure;
}
