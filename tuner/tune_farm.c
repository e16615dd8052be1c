/* Measuring on a farm: one session per device and batch, devices lost mid-batch, the canary
 * that tells a sick device, and the check that the farm can run the target at all. */
#include "tune_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

void tt__tune_farm_release(farm *f, int k)
{
    tt_remote_close(f->session[k]);
    f->session[k] = NULL;
}

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
        tt_measure_buffer packed[64];
        void *scratch;
        const tt_measure_buffer *bufs = tt__tune_candidate_bufs(t, c, packed, &scratch);
        s = tt_remote_measure(f->session[k], c->so, "kernel", bufs, t->nparams, t->ninputs, mo,
                              &c->res, &e);
        free(scratch);
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
        tt__tune_farm_release(f, k);
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
        tt__tune_compile_one(&k);
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
    tt__tune_farm_release(f, k);
    c->requeued++;
    return true;
}

void *tt__tune_farm_worker(void *arg)
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
            tt__tune_finish_result(t, c, &q->mo);
            tt__tune_store_now(t, c);
        }
    }
    tt__tune_farm_release(a->q->c[0].t->farm,
                          a->slot); /* between batches the device serves others */
    return NULL;
}

/* The first session of a farm run: the device's fingerprint names the records, and a target for
 * another architecture than the devices' is refused before anything is compiled. */
tt_status tt__tune_farm_check(farm *f, const tt_target *t, tt_errbuf *err)
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
