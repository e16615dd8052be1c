/* Ansor's evolutionary search (search.md C6), planned in a child process like the xgb plan, and
 * transfer: records of similar workloads train the model of a new one. */
#include "tune_int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "similar.h"

/* ---- evolutionary search (search.md C6), in a child process like the XGB plan ---- */

/* Measured, or on its way: a round planned while the one before is measured (--overlap-search)
 * must not propose what that round still holds, its picked candidates or the rest of its plan.
 * Such proposals were dropped as duplicates, and a small space could run out of new ones: two
 * rounds of nothing new end the task (evolutionary_search_resumes_with_its_model, 199 of 200). */
static bool evo_seen(void *ctx, const char *config)
{
    const task *t = ctx;
    if (tt__tune_seen_has(t, tt_hash64_str(config)))
        return true;
    for (int i = t->plan_next; i < t->nplan; i++)
        if (t->plan[i] && !strcmp(t->plan[i], config))
            return true;
    for (int i = 0; t->cands && i < t->batch; i++)
        if (t->cands[i].config && !strcmp(t->cands[i].config, config))
            return true;
    return false;
}

/* The database name of a task's saved model: "<objective>:<target>:<workload>", so that a model
 * of another objective (an older database's pack-sum) is never loaded as this one. */
static void model_name(const task *t, char *name, size_t size)
{
    tt_evo_params p;
    tt_evo_params_default(&p);
    snprintf(name, size, "%s:%s:%s", tt_costmodel_objective_name(p.objective), t->target_text,
             t->w->key);
}

/* Child side: runs the round and writes [int32 n][n strings, each uint32 length + bytes]
 * [uint64 model length][model], or [int32 -1][uint32 length][message]. */
static void evo_child(task *t, int fd, void *arg)
{
    int want = *(int *)arg;
    tt_evo_params p;
    tt_evo_params_default(&p);
    p.warmup = 64; /* what Ansor's task scheduler sets for one task of 64 measures per round */
    if (t->o->strategy == TT_STRATEGY_SKETCH_RANDOM) {
        /* No model, no measured parents, no generations: a round picks among fresh samples. */
        p.warmup = INT_MAX;
        p.measured_ratio = 0;
        p.iterations = 0;
        p.eps_greedy = 0;
        p.population = 4 * want > 256 ? 4 * want : 256; /* samples to pick `want` from */
    }
    if (t->o->population > 0)
        p.population = t->o->population;
    if (t->gpu)
        p.gpu_limits = &t->lim;
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
void tt__tune_evo_start(task *t, int want)
{
    if (t->evo_fd >= 0)
        return;
    t->evo_want = want > 256 ? 256 : want;
    t->evo_programs = t->hist.nprog;
    t->evo_fd = tt__tune_spawn_search(t, evo_child, &t->evo_want, &t->evo_pid);
    /* A preloaded model serves one round only: later rounds have more data. */
    free(t->preload);
    t->preload = NULL;
    t->preload_len = 0;
}

/* Waits for the round in flight and makes its configs the plan. */
void tt__tune_evo_finish(task *t)
{
    for (int i = t->plan_next; i < t->nplan; i++)
        free(t->plan[i]);
    t->nplan = t->plan_next = 0;
    if (t->evo_fd < 0)
        return;
    int fd = t->evo_fd, want = t->evo_want;
    t->evo_fd = -1;
    if (!t->plan && !(t->plan = calloc(256, sizeof(char *)))) {
        tt__tune_reap_search(fd, t->evo_pid);
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
                model_name(t, name, sizeof(name));
                snprintf(meta, sizeof(meta), "{\"programs\": %d}", t->evo_programs);
                tt_db_model_save(t->db, name, TT_FEATURES_VERSION, model, mlen, meta);
            }
            free(model);
        }
    }
    tt__tune_reap_search(fd, t->evo_pid);
}

/* The saved model of this workload for the first round of a resumed run, when the records added
 * since it was trained are under 20% of its training set (Ansor's adaptive training rule). */
void tt__tune_evo_preload(task *t)
{
    char name[1200], *meta = NULL;
    model_name(t, name, sizeof(name));
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

/* ---- transfer: records of similar workloads train the model of a new one ---- */

#define TRANSFER_MAX 2000

typedef struct {
    task *t;
    char *keys[32];
    tt_workload *w[32];
    int nkeys;
    int added;
} transfer_ctx;

static int transfer_row(void *ctx, const tt_db_row *row)
{
    transfer_ctx *x = ctx;
    task *t = x->t;
    /* rows of the workloads tt_similar_workloads named: the same operator, not this shape */
    if (x->added >= TRANSFER_MAX || row->config_kind != TT_CONFIG_STEPS ||
        !strcmp(row->config, "[]"))
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
    tt_state *st;
    if (!tt_state_from_json(&x->w[g]->dag, row->config, &st, NULL)) {
        float *rows;
        int nr = tt_evo_features(st, NULL, &rows, NULL);
        double thr =
            tt_tune_label(x->w[g]->flops, row->costs, row->ncosts, row->median_s, row->error_no);
        if (nr > 0) {
            tt__tune_history_add(t, row->config, rows, nr, thr, g + 1, 0);
            x->added++;
        }
        free(rows);
        tt_state_free(st);
    }
    return 0;
}

/* Records of the nearest shapes first (tt_similar_workloads), up to TRANSFER_MAX: in a large
 * database the first records in time may all be of one far shape. */
void tt__tune_load_transfer(task *t)
{
    if (!tt_workload_op_length(t->w->key))
        return;
    transfer_ctx x;
    memset(&x, 0, sizeof(x));
    x.t = t;
    char *near[32];
    int nnear = 0;
    if (tt_similar_workloads(t->db, t->target_text, t->w->key, near, 32, &nnear, NULL))
        nnear = 0;
    for (int k = 0; k < nnear; k++) {
        tt_db_filter f = {near[k], t->target_text, t->device, 0, 0};
        if (x.added < TRANSFER_MAX)
            tt_db_history(t->db, &f, transfer_row, &x);
        free(near[k]);
    }
    if (x.added && t->log)
        fprintf(t->log, "%s: the cost model starts from %d records of %d similar workload%s\n",
                t->w->key, x.added, x.nkeys, x.nkeys == 1 ? "" : "s");
    for (int i = 0; i < x.nkeys; i++) {
        free(x.keys[i]);
        tt_workload_free(x.w[i]);
    }
}
