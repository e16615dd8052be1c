/* tt_db_copy: everything of one database into another, whatever their backends. */
#include "db_int.h"

#include <stdlib.h>
#include <string.h>

#define COPY_BATCH 1000

static uint64_t hash_str(uint64_t h, const char *s)
{
    s = s ? s : "";
    return tt_hash64_update(h, s, strlen(s) + 1);
}

/* A record's content without its ids (which the target gives anew), for the check. */
static uint64_t row_digest(const tt_db_row *r)
{
    uint64_t h = TT_FNV64_OFFSET;
    h = hash_str(h, r->workload);
    h = hash_str(h, r->target);
    h = hash_str(h, r->device);
    h = hash_str(h, r->config);
    h = hash_str(h, r->error_text);
    h = hash_str(h, r->extra);
    h = tt_hash64_update(h, r->costs, sizeof(double) * (size_t)r->ncosts);
    h = tt_hash64_update(h, &r->error_no, sizeof(r->error_no));
    h = tt_hash64_update(h, &r->timestamp, sizeof(r->timestamp));
    return h;
}

typedef struct {
    int64_t from, to;
} id_pair;

typedef struct {
    tt_db *to;
    tt_arena arena; /* the batch's strings and costs */
    tt_db_record batch[COPY_BATCH];
    size_t n;
    TT_VEC(id_pair) jobs;
    tt_db_copy_report *rep;
    tt_status status;
} copier;

static int64_t mapped_job(const copier *c, int64_t job)
{
    for (size_t i = 0; job && i < c->jobs.len; i++)
        if (c->jobs.data[i].from == job)
            return c->jobs.data[i].to;
    return 0;
}

static tt_status flush_batch(copier *c)
{
    size_t inserted = 0;
    tt_status s = c->n ? tt_db_insert(c->to, c->batch, c->n, &inserted) : TT_OK;
    if (!s) {
        c->rep->inserted += (int64_t)inserted;
        c->rep->present += (int64_t)(c->n - inserted);
    }
    c->n = 0;
    tt_arena_free(&c->arena);
    tt_arena_init(&c->arena, 1 << 20);
    return s;
}

static int copy_row(void *ctx, const tt_db_row *row)
{
    copier *c = ctx;
    tt_arena *a = &c->arena;
    tt_db_record *r = &c->batch[c->n++];
    memset(r, 0, sizeof(*r));
    r->workload = tt_arena_strdup(a, row->workload);
    r->target = tt_arena_strdup(a, row->target);
    r->device = row->device ? tt_arena_strdup(a, row->device) : NULL;
    r->config = tt_arena_strdup(a, row->config);
    r->config_kind = row->config_kind;
    double *costs = tt_arena_alloc(a, sizeof(double) * (size_t)(row->ncosts + 1));
    if (costs)
        memcpy(costs, row->costs, sizeof(double) * (size_t)row->ncosts);
    r->costs = costs;
    r->ncosts = row->ncosts;
    r->error_no = row->error_no;
    r->error_text = row->error_text ? tt_arena_strdup(a, row->error_text) : NULL;
    r->build_s = row->build_s;
    r->run_s = row->run_s;
    r->total_s = row->total_s;
    r->job = mapped_job(c, row->job);
    r->timestamp = row->timestamp;
    r->extra = row->extra ? tt_arena_strdup(a, row->extra) : NULL;
    c->rep->records++;
    c->rep->digest += row_digest(row);
    if (!r->workload || !r->target || !r->config || !costs) {
        c->status = TT_ERR_NOMEM;
        return 1;
    }
    if (c->n == COPY_BATCH && (c->status = flush_batch(c)))
        return 1;
    return 0;
}

static int digest_row(void *ctx, const tt_db_row *row)
{
    *(uint64_t *)ctx += row_digest(row);
    return 0;
}

/* Devices with their first and last sightings; one already in the target stays as it is. */
static tt_status copy_devices(tt_db *from, tt_db *to, tt_db_copy_report *rep)
{
    tt__stmt *sel, *ins;
    tt_status s = tt__db_prepare(from,
                                 "SELECT fingerprint, key, cpu_model, cpu_features, cores, "
                                 "memory_bytes, opencl_device, opencl_driver, first_seen, "
                                 "last_seen FROM devices ORDER BY id",
                                 &sel);
    if (s)
        return s;
    if ((s = tt__db_prepare(to,
                            "INSERT INTO devices(fingerprint, key, cpu_model, cpu_features, cores, "
                            "memory_bytes, opencl_device, opencl_driver, first_seen, last_seen) "
                            "VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(fingerprint) DO NOTHING",
                            &ins))) {
        tt__stmt_finalize(sel);
        return s;
    }
    int rc;
    while (!s && (rc = tt__stmt_step(sel)) == TT__STEP_ROW) {
        tt__stmt_reset(ins);
        for (int i = 0; i < 10; i++) {
            if (tt__stmt_null(sel, i))
                tt__stmt_bind_null(ins, i + 1);
            else if (i == 4 || i == 5)
                tt__stmt_bind_int64(ins, i + 1, tt__stmt_int64(sel, i));
            else if (i >= 8)
                tt__stmt_bind_double(ins, i + 1, tt__stmt_double(sel, i));
            else
                tt__stmt_bind_text(ins, i + 1, tt__stmt_text(sel, i));
        }
        if (!(s = tt__stmt_run(ins, "copying a device", NULL)))
            rep->devices += tt__stmt_changes(ins);
    }
    if (!s && rc != TT__STEP_DONE)
        s = tt__db_failed(from, "reading devices");
    tt__stmt_finalize(sel);
    tt__stmt_finalize(ins);
    return s;
}

/* Jobs get the target's ids; one copied before (same creation time and parameters) is reused. */
static tt_status copy_jobs(tt_db *from, copier *c)
{
    tt_db_job *jobs;
    size_t n;
    tt_status s = tt_db_jobs_list(from, &jobs, &n);
    if (s)
        return s;
    tt__stmt *find = NULL, *ins = NULL;
    s = tt__db_prepare(c->to, "SELECT id FROM jobs WHERE created = ? AND params = ?", &find);
    if (!s)
        s = tt__db_prepare(c->to,
                           "INSERT INTO jobs(state, params, trials_done, trials_total, best_s, "
                           "created, updated, message, owner) VALUES (?,?,?,?,?,?,?,?,?) "
                           "RETURNING id",
                           &ins);
    for (size_t i = 0; !s && i < n; i++) {
        const tt_db_job *j = &jobs[i];
        int64_t id = 0;
        tt__stmt_reset(find);
        tt__stmt_bind_double(find, 1, j->created);
        tt__stmt_bind_text(find, 2, j->params);
        s = tt__stmt_run(find, "looking up a job", &id);
        if (!s && !id) {
            tt__stmt_reset(ins);
            tt__stmt_bind_text(ins, 1, j->state);
            tt__stmt_bind_text(ins, 2, j->params);
            tt__stmt_bind_int64(ins, 3, j->trials_done);
            tt__stmt_bind_int64(ins, 4, j->trials_total);
            tt__stmt_bind_double(ins, 5, j->best_s);
            tt__stmt_bind_double(ins, 6, j->created);
            tt__stmt_bind_double(ins, 7, j->updated);
            tt__stmt_bind_text(ins, 8, j->message ? j->message : "");
            tt__stmt_bind_text(ins, 9, j->owner ? j->owner : "");
            if (!(s = tt__stmt_run(ins, "copying a job", &id)))
                c->rep->jobs++;
        }
        if (!s && TT_VEC_PUSH(&c->jobs, ((id_pair){j->id, id})))
            s = tt__db_fail(c->to, TT_ERR_NOMEM, "out of memory");
    }
    tt__stmt_finalize(find);
    tt__stmt_finalize(ins);
    tt_db_jobs_free(jobs, n);
    return s;
}

/* Cost models in the order they were saved; one with the same name, schema and time is there. */
static tt_status copy_models(tt_db *from, tt_db *to, tt_db_copy_report *rep)
{
    tt__stmt *sel, *find = NULL, *ins = NULL;
    tt_status s = tt__db_prepare(
        from, "SELECT name, feature_schema, created, meta, model FROM cost_models ORDER BY id",
        &sel);
    if (s)
        return s;
    s = tt__db_prepare(
        to, "SELECT id FROM cost_models WHERE name = ? AND feature_schema = ? AND created = ?",
        &find);
    if (!s)
        s = tt__db_prepare(to,
                           "INSERT INTO cost_models(name, feature_schema, created, meta, model) "
                           "VALUES (?,?,?,?,?)",
                           &ins);
    int rc = TT__STEP_DONE;
    while (!s && (rc = tt__stmt_step(sel)) == TT__STEP_ROW) {
        int64_t id = 0;
        tt__stmt_reset(find);
        tt__stmt_bind_text(find, 1, tt__stmt_text(sel, 0));
        tt__stmt_bind_int64(find, 2, tt__stmt_int64(sel, 1));
        tt__stmt_bind_double(find, 3, tt__stmt_double(sel, 2));
        if ((s = tt__stmt_run(find, "looking up a cost model", &id)) || id)
            continue;
        size_t len;
        const void *blob = tt__stmt_blob(sel, 4, &len);
        tt__stmt_reset(ins);
        tt__stmt_bind_text(ins, 1, tt__stmt_text(sel, 0));
        tt__stmt_bind_int64(ins, 2, tt__stmt_int64(sel, 1));
        tt__stmt_bind_double(ins, 3, tt__stmt_double(sel, 2));
        tt__stmt_bind_text(ins, 4, tt__stmt_text(sel, 3));
        tt__stmt_bind_blob(ins, 5, blob ? blob : "", len);
        if (!(s = tt__stmt_run(ins, "copying a cost model", NULL)))
            rep->cost_models++;
    }
    if (!s && rc != TT__STEP_DONE)
        s = tt__db_failed(from, "reading cost models");
    tt__stmt_finalize(sel);
    tt__stmt_finalize(find);
    tt__stmt_finalize(ins);
    return s;
}

tt_status tt_db_copy(tt_db *from, tt_db *to, tt_db_copy_report *rep, tt_errbuf *err)
{
    memset(rep, 0, sizeof(*rep));
    if (to->readonly)
        return tt_err(err, TT_ERR_IO, "%s is open read-only", to->where);
    tt_db_stats before;
    tt_status s = tt_db_stats_get(to, 0, &before);
    if (s)
        return tt_err(err, s, "%s: %s", to->where, tt_db_errmsg(to));
    copier c = {.to = to, .rep = rep};
    tt_arena_init(&c.arena, 1 << 20);
    tt_db *failed = to;
    if ((s = copy_devices(from, to, rep)) || (s = copy_jobs(from, &c)))
        failed = tt_db_errmsg(from)[0] ? from : to;
    if (!s) {
        s = tt_db_history(from, NULL, copy_row, &c);
        if (s)
            failed = from;
        else if (c.status)
            s = c.status;
        if (!s)
            s = flush_batch(&c);
    }
    if (!s && (s = copy_models(from, to, rep)))
        failed = tt_db_errmsg(from)[0] ? from : to;
    tt_arena_free(&c.arena);
    TT_VEC_FREE(&c.jobs);
    if (s)
        return tt_err(err, s, "%s: %s", failed->where,
                      s == TT_ERR_NOMEM ? "out of memory" : tt_db_errmsg(failed));
    /* The check: into an empty database, the same records, field by field (a sum of per-record
     * digests); into one that had records, the counts add up. */
    tt_db_stats after;
    if ((s = tt_db_stats_get(to, 0, &after)))
        return tt_err(err, s, "%s: %s", to->where, tt_db_errmsg(to));
    rep->verified = after.records == before.records + rep->inserted;
    if (rep->verified && before.records == 0) {
        uint64_t digest = 0;
        if ((s = tt_db_history(to, NULL, digest_row, &digest)))
            return tt_err(err, s, "%s: %s", to->where, tt_db_errmsg(to));
        rep->verified = digest == rep->digest;
    }
    if (!rep->verified)
        return tt_err(err, TT_ERR_INTERNAL,
                      "%s does not hold what was copied (%lld records before, %lld inserted, "
                      "%lld now)",
                      to->where, (long long)before.records, (long long)rep->inserted,
                      (long long)after.records);
    return TT_OK;
}
