/* Records, devices, jobs and cost models. */
#include "db_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../schedule/target.h"
#include "../schedule/workload.h"

static const char *const measure_errors[] = {
#define TT_ME_NAME(n) #n,
    TT_MEASURE_ERROR_LIST(TT_ME_NAME)
#undef TT_ME_NAME
};
_Static_assert(TT_ARRAY_LEN(measure_errors) == TT_MEASURE_ERROR_COUNT, "measure error names");

const char *tt_measure_error_name(int code)
{
    return code >= 0 && code < TT_MEASURE_ERROR_COUNT ? measure_errors[code] : "?";
}

const char *tt_db_match_name(tt_db_match m)
{
    switch (m) {
    case TT_DB_MATCH_EXACT: return "exact";
    case TT_DB_MATCH_OTHER_DEVICE: return "same target, other device";
    case TT_DB_MATCH_FAMILY: return "same target family";
    default: return "?";
    }
}

void tt__db_costs_summary(const double *c, int n, double *median, double *mean, double *fastest)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += c[i];
    *fastest = tt_fastest(c, n);
    *mean = n > 0 ? sum / n : 0;
    *median = tt_median(c, n);
}

static void costs_json(tt_strbuf *sb, const double *c, int n)
{
    tt_strbuf_append(sb, "[");
    for (int i = 0; i < n; i++) {
        char b[40];
        tt_fmt_pyfloat(b, sizeof(b), c[i]);
        tt_strbuf_printf(sb, "%s%s", i ? ", " : "", b);
    }
    tt_strbuf_append(sb, "]");
}

/* ---- id lookups (inside the caller's transaction) ---- */

static tt_status lookup_id(tt_db *db, const char *sql, const char *key, int64_t *id)
{
    tt__stmt *st;
    tt_status s = tt__db_prepare(db, sql, &st);
    if (s)
        return s;
    tt__stmt_bind_text(st, 1, key);
    s = tt__stmt_run(st, "looking up", id);
    tt__stmt_finalize(st);
    return s;
}

/* Runs a bound "INSERT ... ON CONFLICT DO NOTHING RETURNING id" and finalizes it; when another
 * writer stored the same key first (no row comes back), its id is looked up. */
static tt_status insert_or_lookup(tt_db *db, tt__stmt *ins, const char *what, const char *lookup,
                                  const char *key, int64_t *id)
{
    tt_status s = tt__stmt_run(ins, what, id);
    tt__stmt_finalize(ins);
    if (!s && !*id)
        s = lookup_id(db, lookup, key, id);
    return s;
}

/* Canonical key and metadata of a workload key: ours are parsed, foreign ones kept verbatim. */
typedef struct {
    char *key;
    const char *op;
    char *params;
    double flops;
    const char *origin;
    char opbuf[128];
} workload_info;

static tt_status describe_workload(tt_db *db, const char *key, workload_info *wi)
{
    memset(wi, 0, sizeof(*wi));
    if (!strncmp(key, "autotvm:", 8) || !strncmp(key, "ansor:", 6)) {
        bool autotvm = key[1] == 'u';
        const char *rest = key + (autotvm ? 8 : 6);
        wi->origin = autotvm ? "autotvm" : "ansor";
        wi->key = strdup(key);
        if (autotvm) {
            const char *colon = strchr(rest, ':');
            size_t n = colon ? (size_t)(colon - rest) : strlen(rest);
            snprintf(wi->opbuf, sizeof(wi->opbuf), "%.*s", (int)n, rest);
            wi->params = strdup(colon ? colon + 1 : "[]");
        } else {
            /* ["name", args...] inside the key: the name is the op. */
            const char *q = strchr(rest, '"');
            const char *e = q ? strchr(q + 1, '"') : NULL;
            snprintf(wi->opbuf, sizeof(wi->opbuf), "%.*s", e ? (int)(e - q - 1) : 0,
                     e ? q + 1 : "");
            wi->params = strdup(rest);
        }
        wi->op = wi->opbuf;
        return wi->key && wi->params ? TT_OK : tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
    }
    tt_workload *w;
    tt_errbuf err;
    if (tt_workload_parse(key, &w, &err))
        return tt__db_fail(db, TT_ERR_BAD_WORKLOAD, "workload '%.200s': %s", key, err.msg);
    wi->origin = "ours";
    wi->key = strdup(w->key);
    wi->flops = w->flops;
    snprintf(wi->opbuf, sizeof(wi->opbuf), "%s", w->def ? w->def->name : "te");
    wi->op = wi->opbuf;
    tt_strbuf p = {0};
    tt_strbuf_append(&p, "{");
    for (int i = 0; w->def && i < w->def->nparams; i++)
        tt_strbuf_printf(&p, "%s\"%s\": %lld", i ? ", " : "", w->def->params[i].name,
                         (long long)w->params[i]);
    tt_strbuf_printf(&p, "%s\"dtype\": \"%s\"}", w->def ? ", " : "", tt_dtype_name(w->dtype));
    wi->params = tt_strbuf_take(&p);
    tt_workload_free(w);
    return wi->key && wi->params ? TT_OK : tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
}

static tt_status workload_id(tt_db *db, const char *key, bool create, int64_t *id)
{
    if ((*id = tt__db_cache_get(&db->workloads, key)))
        return TT_OK;
    workload_info wi;
    tt_status s = describe_workload(db, key, &wi);
    if (s)
        return s;
    s = lookup_id(db, "SELECT id FROM workloads WHERE key = ?", wi.key, id);
    if (!s && !*id && create) {
        tt__stmt *st;
        char hex[17];
        tt_hash64_hex(tt_hash64_str(wi.key), hex);
        if (!(s = tt__db_prepare(db,
                                 "INSERT INTO workloads(key, hash, op, params, flops, origin) "
                                 "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING "
                                 "RETURNING id",
                                 &st))) {
            tt__stmt_bind_text(st, 1, wi.key);
            tt__stmt_bind_text(st, 2, hex);
            tt__stmt_bind_text(st, 3, wi.op);
            tt__stmt_bind_text(st, 4, wi.params);
            tt__stmt_bind_double(st, 5, wi.flops);
            tt__stmt_bind_text(st, 6, wi.origin);
            s = insert_or_lookup(db, st, "storing a workload",
                                 "SELECT id FROM workloads WHERE key = ?", wi.key, id);
        }
    }
    if (!s && *id)
        tt__db_cache_put(&db->workloads, key, *id);
    free(wi.key);
    free(wi.params);
    return s;
}

static tt_status target_id(tt_db *db, const char *text, bool create, int64_t *id)
{
    if ((*id = tt__db_cache_get(&db->targets, text)))
        return TT_OK;
    tt_status s = lookup_id(db, "SELECT id FROM targets WHERE target = ?", text, id);
    if (!s && *id)
        tt__db_cache_put(&db->targets, text, *id);
    if (s || *id || !create)
        return s;
    /* Imported records keep their target even when it is not one we can parse. */
    tt_target t;
    char family[96];
    if (tt_target_parse(text, &t, NULL)) {
        memset(&t, 0, sizeof(t));
        snprintf(t.kind, sizeof(t.kind), "%.*s", (int)strcspn(text, " "), text);
        snprintf(family, sizeof(family), "%s:?", t.kind);
    } else {
        tt_target_family(&t, family, sizeof(family));
    }
    tt__stmt *st;
    if ((s = tt__db_prepare(db,
                            "INSERT INTO targets(target, kind, triple, cpu, attrs, keys, model, "
                            "device, num_cores, family) VALUES (?,?,?,?,?,?,?,?,?,?) "
                            "ON CONFLICT(target) DO NOTHING RETURNING id",
                            &st)))
        return s;
    const char *f[] = {text, t.kind, t.triple, t.cpu, t.attrs, t.keys, t.model, t.device};
    for (int i = 0; i < 8; i++)
        tt__stmt_bind_text(st, i + 1, f[i]);
    tt__stmt_bind_int64(st, 9, t.num_cores);
    tt__stmt_bind_text(st, 10, family);
    s = insert_or_lookup(db, st, "storing a target", "SELECT id FROM targets WHERE target = ?",
                         text, id);
    if (!s)
        tt__db_cache_put(&db->targets, text, *id);
    return s;
}

static tt_status device_upsert_once(tt_db *db, const tt_db_device *d);

static tt_status device_id(tt_db *db, const char *fingerprint, bool create, int64_t *id)
{
    if ((*id = tt__db_cache_get(&db->devices, fingerprint)))
        return TT_OK;
    tt_status s = lookup_id(db, "SELECT id FROM devices WHERE fingerprint = ?", fingerprint, id);
    if (!s && !*id && create) {
        tt_db_device d = {.fingerprint = fingerprint};
        if (!(s = device_upsert_once(db, &d)))
            s = lookup_id(db, "SELECT id FROM devices WHERE fingerprint = ?", fingerprint, id);
    }
    if (!s && *id)
        tt__db_cache_put(&db->devices, fingerprint, *id);
    return s;
}

static tt_status device_upsert_once(tt_db *db, const tt_db_device *d)
{
    if (!d->fingerprint || !*d->fingerprint)
        return tt__db_fail(db, TT_ERR_INVALID_ARG, "a device needs a fingerprint");
    tt__stmt *st;
    tt_status s = tt__db_prepare(
        db,
        "INSERT INTO devices(fingerprint, key, cpu_model, cpu_features, cores, memory_bytes, "
        "opencl_device, opencl_driver, first_seen, last_seen) VALUES (?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT(fingerprint) DO UPDATE SET key = coalesce(excluded.key, devices.key), "
        "cpu_model = coalesce(excluded.cpu_model, devices.cpu_model), "
        "cpu_features = coalesce(excluded.cpu_features, devices.cpu_features), "
        "cores = coalesce(excluded.cores, devices.cores), "
        "memory_bytes = coalesce(excluded.memory_bytes, devices.memory_bytes), "
        "opencl_device = coalesce(excluded.opencl_device, devices.opencl_device), "
        "opencl_driver = coalesce(excluded.opencl_driver, devices.opencl_driver), "
        "last_seen = excluded.last_seen",
        &st);
    if (s)
        return s;
    double now = tt_clock_wall();
    tt__stmt_bind_text(st, 1, d->fingerprint);
    const char *txt[] = {d->key, d->cpu_model, d->cpu_features};
    for (int i = 0; i < 3; i++)
        if (txt[i])
            tt__stmt_bind_text(st, 2 + i, txt[i]);
    if (d->cores)
        tt__stmt_bind_int64(st, 5, d->cores);
    if (d->memory_bytes)
        tt__stmt_bind_int64(st, 6, d->memory_bytes);
    if (d->opencl_device)
        tt__stmt_bind_text(st, 7, d->opencl_device);
    if (d->opencl_driver)
        tt__stmt_bind_text(st, 8, d->opencl_driver);
    tt__stmt_bind_double(st, 9, now);
    tt__stmt_bind_double(st, 10, now);
    int rc = tt__stmt_step(st);
    if (rc != TT__STEP_DONE)
        s = tt__db_failed(db, "storing a device");
    tt__stmt_finalize(st);
    return s;
}

/* ---- insert ---- */

/* What a batch adds to the `bests` row of one (workload, target): the stored records that can be
 * a best, gathered per batch so that a tuning round's records update their pair once (a
 * statement is a round trip to a PostgreSQL server). */
typedef struct {
    int64_t wid, tid;
    double fastest_s;
    int64_t records;
} batch_best;

typedef TT_VEC(batch_best) batch_bests;

static int note_best(batch_bests *v, int64_t wid, int64_t tid, double fastest)
{
    for (size_t i = v->len; i-- > 0;) {
        batch_best *b = &v->data[i];
        if (b->wid == wid && b->tid == tid) {
            b->records++;
            b->fastest_s = fastest < b->fastest_s ? fastest : b->fastest_s;
            return 0;
        }
    }
    batch_best b = {wid, tid, fastest, 1};
    return TT_VEC_PUSH(v, b);
}

/* The batch's pairs into `bests`, as many rows per statement as its parameters allow (the pairs
 * are distinct: one statement may update a row only once). */
#define BESTS_PER_STATEMENT (TT__SQL_MAX_PARAMS / 4)

static tt_status store_bests(tt_db *db, const batch_bests *v)
{
    tt_status s = TT_OK;
    for (size_t at = 0; at < v->len && !s; at += BESTS_PER_STATEMENT) {
        size_t n = v->len - at < BESTS_PER_STATEMENT ? v->len - at : BESTS_PER_STATEMENT;
        tt_strbuf sql = {0};
        tt_strbuf_append(&sql, "INSERT INTO bests(workload_id, target_id, fastest_s, records) "
                               "VALUES ");
        for (size_t i = 0; i < n; i++)
            tt_strbuf_printf(&sql, "%s(?%zu, ?%zu, ?%zu, ?%zu)", i ? ", " : "", 4 * i + 1,
                             4 * i + 2, 4 * i + 3, 4 * i + 4);
        tt_strbuf_append(&sql, " ON CONFLICT (workload_id, target_id) DO UPDATE SET "
                               "records = bests.records + excluded.records, "
                               "fastest_s = CASE WHEN excluded.fastest_s < bests.fastest_s "
                               "THEN excluded.fastest_s ELSE bests.fastest_s END");
        tt__stmt *st = NULL;
        s = sql.oom ? tt__db_fail(db, TT_ERR_NOMEM, "out of memory")
                    : tt__db_prepare(db, tt_strbuf_cstr(&sql), &st);
        tt_strbuf_free(&sql);
        for (size_t i = 0; i < n && !s; i++) {
            const batch_best *b = &v->data[at + i];
            tt__stmt_bind_int64(st, (int)(4 * i + 1), b->wid);
            tt__stmt_bind_int64(st, (int)(4 * i + 2), b->tid);
            tt__stmt_bind_double(st, (int)(4 * i + 3), b->fastest_s);
            tt__stmt_bind_int64(st, (int)(4 * i + 4), b->records);
        }
        if (!s)
            s = tt__stmt_run(st, "keeping the best of a workload", NULL);
        tt__stmt_finalize(st);
    }
    return s;
}

static tt_status insert_one(tt_db *db, tt__stmt *ins, batch_bests *bests, const tt_db_record *r,
                            size_t index, size_t *inserted)
{
    int64_t wid, tid, did = 0;
    tt_status s;
    if (!r->workload || !r->target || !r->config)
        return tt__db_fail(db, TT_ERR_INVALID_ARG,
                           "record %zu: workload, target and config are required", index);
    if (r->error_no < 0 || r->error_no >= TT_MEASURE_ERROR_COUNT)
        return tt__db_fail(db, TT_ERR_INVALID_ARG, "record %zu: error_no %d is not in 0..8", index,
                           r->error_no);
    if (r->ncosts < 1 || !r->costs)
        return tt__db_fail(db, TT_ERR_INVALID_ARG, "record %zu: no costs", index);
    for (int i = 0; i < r->ncosts; i++)
        if (!isfinite(r->costs[i]) || r->costs[i] < 0)
            return tt__db_fail(db, TT_ERR_INVALID_ARG, "record %zu: cost %d is not a finite time",
                               index, i);
    if ((s = workload_id(db, r->workload, true, &wid)) ||
        (s = target_id(db, r->target, true, &tid)))
        return s;
    if (r->device && *r->device && (s = device_id(db, r->device, true, &did)))
        return s;
    double median, mean, fastest;
    tt__db_costs_summary(r->costs, r->ncosts, &median, &mean, &fastest);
    tt_strbuf costs = {0};
    costs_json(&costs, r->costs, r->ncosts);
    /* The identity of a measurement, for idempotent imports. */
    char ts[40];
    tt_fmt_pyfloat(ts, sizeof(ts), r->timestamp);
    uint64_t h = TT_FNV64_OFFSET;
    const char *parts[] = {r->workload,
                           "\x1f",
                           r->target,
                           "\x1f",
                           r->device ? r->device : "",
                           "\x1f",
                           r->config,
                           "\x1f",
                           tt_strbuf_cstr(&costs),
                           "\x1f",
                           ts};
    for (size_t i = 0; i < TT_ARRAY_LEN(parts); i++)
        h = tt_hash64_update(h, parts[i], strlen(parts[i]));
    h = tt_hash64_update(h, &r->error_no, sizeof(r->error_no));
    tt__stmt_reset(ins);
    tt__stmt_bind_int64(ins, 1, wid);
    tt__stmt_bind_int64(ins, 2, tid);
    if (did)
        tt__stmt_bind_int64(ins, 3, did);
    tt__stmt_bind_text(ins, 4, r->config);
    tt__stmt_bind_int64(ins, 5, (int)r->config_kind);
    tt__stmt_bind_text(ins, 6, tt_strbuf_cstr(&costs));
    tt__stmt_bind_double(ins, 7, median);
    tt__stmt_bind_double(ins, 8, mean);
    tt__stmt_bind_int64(ins, 9, r->error_no);
    if (r->error_text)
        tt__stmt_bind_text(ins, 10, r->error_text);
    tt__stmt_bind_double(ins, 11, r->build_s);
    tt__stmt_bind_double(ins, 12, r->run_s);
    tt__stmt_bind_double(ins, 13, r->total_s);
    if (r->job)
        tt__stmt_bind_int64(ins, 14, r->job);
    tt__stmt_bind_double(ins, 15, r->timestamp);
    if (r->extra)
        tt__stmt_bind_text(ins, 16, r->extra);
    tt__stmt_bind_int64(ins, 17, (int64_t)h);
    /* The device's address and a suspect mark are columns, so queries need not parse JSON. */
    json_t *extra = NULL;
    bool suspect = false;
    if (r->extra && !tt_json_parse(r->extra, strlen(r->extra), &extra, NULL) &&
        json_is_object(extra)) {
        const char *why = json_string_value(json_object_get(extra, "suspect"));
        tt__stmt_bind_text(ins, 18, json_string_value(json_object_get(extra, "host")));
        tt__stmt_bind_text(ins, 19, why);
        suspect = why != NULL;
    }
    json_decref(extra);
    tt__stmt_bind_double(ins, 20, fastest);
    int rc = tt__stmt_step(ins);
    tt_strbuf_free(&costs);
    if (rc != TT__STEP_DONE)
        return tt__db_failed(db, "storing a record");
    int64_t stored = tt__stmt_changes(ins);
    *inserted += (size_t)stored;
    if (stored && r->error_no == 0 && !suspect && fastest > 0 &&
        note_best(bests, wid, tid, fastest))
        return tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
    return TT_OK;
}

static tt_status insert_once(tt_db *db, const tt_db_record *recs, size_t n, size_t *inserted)
{
    size_t count = 0;
    if (inserted)
        *inserted = 0;
    if (db->readonly)
        return tt__db_fail(db, TT_ERR_IO, "the database is open read-only");
    tt_status s = tt__db_begin(db);
    if (s)
        return s;
    tt__stmt *ins = NULL;
    batch_bests bests = {0};
    s = tt__db_prepare(
        db,
        "INSERT INTO records(workload_id, target_id, device_id, config, "
        "config_kind, costs, median_s, mean_s, error_no, error_text, build_s, run_s, "
        "total_s, job_id, timestamp, extra, dedup, host, suspect, fastest_s) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(dedup) DO NOTHING",
        &ins);
    for (size_t i = 0; i < n && !s; i++)
        s = insert_one(db, ins, &bests, &recs[i], i, &count);
    tt__stmt_finalize(ins);
    if (!s)
        s = store_bests(db, &bests);
    TT_VEC_FREE(&bests);
    if (!s)
        s = tt__db_commit(db);
    /* All or nothing: the batch disappears, what was committed before stays. */
    if (s)
        return tt__db_abort(db, s, "batch of %zu records not stored", n);
    if (inserted)
        *inserted = count;
    return TT_OK;
}

/* ---- rows ---- */

void tt__db_row_clear(tt_db_row *row)
{
    free(row->workload);
    free(row->target);
    free(row->device);
    free(row->config);
    free(row->error_text);
    free(row->extra);
    free(row->costs);
    memset(row, 0, sizeof(*row));
}

tt_status tt__db_row_read(tt__stmt *st, tt_db_row *row)
{
    memset(row, 0, sizeof(*row));
    row->id = tt__stmt_int64(st, 0);
    row->workload = tt__stmt_text_dup(st, 1);
    row->target = tt__stmt_text_dup(st, 2);
    row->device = tt__stmt_text_dup(st, 3);
    row->config = tt__stmt_text_dup(st, 4);
    row->config_kind = (tt_config_kind)tt__stmt_int64(st, 5);
    const char *costs = tt__stmt_text(st, 6);
    row->median_s = tt__stmt_double(st, 7);
    row->mean_s = tt__stmt_double(st, 8);
    row->flops = tt__stmt_double(st, 9);
    row->error_no = tt__stmt_int64(st, 10);
    row->error_text = tt__stmt_text_dup(st, 11);
    row->build_s = tt__stmt_double(st, 12);
    row->run_s = tt__stmt_double(st, 13);
    row->total_s = tt__stmt_double(st, 14);
    row->timestamp = tt__stmt_double(st, 15);
    row->job = tt__stmt_int64(st, 16);
    row->extra = tt__stmt_text_dup(st, 17);
    row->fastest_s = tt__stmt_double(st, 18);
    json_t *arr = NULL;
    if (costs && !tt_json_parse(costs, strlen(costs), &arr, NULL) && json_is_array(arr)) {
        row->ncosts = (int)json_array_size(arr);
        row->costs = calloc((size_t)row->ncosts + 1, sizeof(double));
        for (int i = 0; row->costs && i < row->ncosts; i++)
            row->costs[i] = json_number_value(json_array_get(arr, (size_t)i));
    }
    json_decref(arr);
    if (row->error_no == 0 && row->fastest_s > 0 && row->flops > 0)
        row->gflops = row->flops / row->fastest_s / 1e9;
    if (!row->workload || !row->target || !row->config || (row->ncosts && !row->costs)) {
        tt__db_row_clear(row);
        return TT_ERR_NOMEM;
    }
    return TT_OK;
}

void tt_db_rows_free(tt_db_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++)
        tt__db_row_clear(&rows[i]);
    free(rows);
}

/* ---- best ---- */

static tt_status collect(tt_db *db, tt__stmt *st, tt_db_match match, int k, tt_db_row **rows,
                         size_t *n)
{
    int rc = TT__STEP_DONE; /* nothing stepped when *n already reaches k */
    tt_status s = TT_OK;
    while ((int)*n < k && (rc = tt__stmt_step(st)) == TT__STEP_ROW) {
        tt_db_row *grown = realloc(*rows, (*n + 1) * sizeof(tt_db_row));
        if (!grown)
            return tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
        *rows = grown;
        if ((s = tt__db_row_read(st, &(*rows)[*n])))
            return tt__db_fail(db, s, "out of memory");
        (*rows)[(*n)++].match = match;
    }
    if ((int)*n < k && rc != TT__STEP_DONE)
        s = tt__db_failed(db, "querying the best records");
    return s;
}

static tt_status best_once(tt_db *db, const char *workload, const char *target, const char *device,
                           int k, bool fallback, tt_db_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    if (k < 1)
        k = 1;
    int64_t wid, tid, did = 0;
    tt_status s;
    if ((s = workload_id(db, workload, false, &wid)) || (s = target_id(db, target, false, &tid)))
        return s;
    if (!wid)
        return tt__db_fail(db, TT_ERR_NOT_FOUND, "no records for workload %.300s", workload);
    if (device && (s = device_id(db, device, false, &did)))
        return s;
    static const char *const q_exact =
        "SELECT " TT__DB_ROW_COLUMNS TT__DB_ROW_FROM
        " WHERE r.workload_id = ?1 AND r.target_id = ?2 AND r.error_no = 0"
        " AND (CAST(?3 AS BIGINT) = 0 OR r.device_id = ?3)" TT__DB_TRUSTED TT__DB_TIMED
        " ORDER BY r.fastest_s, r.id LIMIT ?4";
    static const char *const q_other =
        "SELECT " TT__DB_ROW_COLUMNS TT__DB_ROW_FROM
        " WHERE r.workload_id = ?1 AND r.target_id = ?2 AND r.error_no = 0"
        " AND r.device_id IS DISTINCT FROM ?3" TT__DB_TRUSTED TT__DB_TIMED
        " ORDER BY r.fastest_s, r.id LIMIT ?4";
    static const char *const q_family =
        "SELECT " TT__DB_ROW_COLUMNS TT__DB_ROW_FROM
        " WHERE r.workload_id = ?1 AND r.error_no = 0 AND r.target_id != ?2"
        " AND t.family = ?3" TT__DB_TRUSTED TT__DB_TIMED " ORDER BY r.fastest_s, r.id LIMIT ?4";
    /* An unknown device or target has no exact records, but may have fallbacks. */
    bool exact_possible = tid && (!device || did);
    for (int stage = 0; stage < 3 && *n == 0 && !s; stage++) {
        if (stage > 0 && !fallback)
            break;
        if (stage < 2 && !exact_possible && !(stage == 1 && tid))
            continue;
        if (stage == 1 && !device)
            continue;
        tt__stmt *st;
        if ((s = tt__db_prepare(db, stage == 0 ? q_exact : stage == 1 ? q_other : q_family, &st)))
            break;
        tt__stmt_bind_int64(st, 1, wid);
        tt__stmt_bind_int64(st, 2, tid);
        if (stage == 2) {
            tt_target t;
            char family[96];
            if (tt_target_parse(target, &t, NULL)) {
                tt__stmt_finalize(st);
                break;
            }
            tt_target_family(&t, family, sizeof(family));
            tt__stmt_bind_text(st, 3, family);
        } else {
            tt__stmt_bind_int64(st, 3, did);
        }
        tt__stmt_bind_int64(st, 4, k);
        s = collect(db, st, (tt_db_match)stage, k, rows, n);
        tt__stmt_finalize(st);
    }
    if (s) {
        tt_db_rows_free(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    return s;
}

/* ---- history and stats ---- */

tt_status tt_db_history(tt_db *db, const tt_db_filter *f,
                        int (*fn)(void *ctx, const tt_db_row *row), void *ctx)
{
    /* Fixed SQL; every filter is a bound parameter that may be NULL ("any"). */
    static const char *const q = "SELECT " TT__DB_ROW_COLUMNS TT__DB_ROW_FROM
                                 " WHERE (CAST(?1 AS TEXT) IS NULL OR w.key = ?1)"
                                 " AND (CAST(?2 AS TEXT) IS NULL OR t.target = ?2)"
                                 " AND (CAST(?3 AS TEXT) IS NULL OR d.fingerprint = ?3)"
                                 " AND (CAST(?4 AS BIGINT) = 0 OR r.job_id = ?4)"
                                 " ORDER BY r.id LIMIT ?5";
    char *canon = NULL;
    if (f && f->workload) {
        workload_info wi;
        tt_status s = describe_workload(db, f->workload, &wi);
        if (s)
            return s;
        canon = wi.key;
        free(wi.params);
    }
    tt__stmt *st;
    tt_status s = tt__db_prepare(db, q, &st);
    if (s) {
        free(canon);
        return s;
    }
    if (canon)
        tt__stmt_bind_text(st, 1, canon);
    if (f && f->target)
        tt__stmt_bind_text(st, 2, f->target);
    if (f && f->device)
        tt__stmt_bind_text(st, 3, f->device);
    tt__stmt_bind_int64(st, 4, f ? f->job : 0);
    tt__stmt_bind_int64(st, 5, f && f->limit > 0 ? f->limit : INT64_MAX);
    int rc;
    while ((rc = tt__stmt_step(st)) == TT__STEP_ROW) {
        tt_db_row row;
        if ((s = tt__db_row_read(st, &row))) {
            s = tt__db_fail(db, s, "out of memory");
            break;
        }
        int stop = fn(ctx, &row);
        tt__db_row_clear(&row);
        if (stop)
            break;
    }
    if (!s && rc != TT__STEP_ROW && rc != TT__STEP_DONE)
        s = tt__db_failed(db, "reading history");
    tt__stmt_finalize(st);
    free(canon);
    return s;
}

static tt_status stats_get_once(tt_db *db, int64_t job, tt_db_stats *out)
{
    memset(out, 0, sizeof(*out));
    tt__stmt *st;
    tt_status s =
        tt__db_prepare(db,
                       "SELECT count(*), count(DISTINCT workload_id), count(DISTINCT target_id), "
                       "coalesce(min(CASE WHEN error_no = 0 AND suspect IS NULL AND fastest_s > 0 "
                       "THEN fastest_s END), 0), "
                       "coalesce(min(timestamp), 0), coalesce(max(timestamp), 0), count(suspect) "
                       "FROM records WHERE CAST(?1 AS BIGINT) = 0 OR job_id = ?1",
                       &st);
    if (s)
        return s;
    tt__stmt_bind_int64(st, 1, job);
    int rc = tt__stmt_step(st);
    if (rc == TT__STEP_ROW) {
        out->records = tt__stmt_int64(st, 0);
        out->workloads = tt__stmt_int64(st, 1);
        out->targets = tt__stmt_int64(st, 2);
        out->best_s = tt__stmt_double(st, 3);
        out->first_timestamp = tt__stmt_double(st, 4);
        out->last_timestamp = tt__stmt_double(st, 5);
        out->suspect = tt__stmt_int64(st, 6);
    } else {
        s = tt__db_failed(db, "computing statistics");
    }
    tt__stmt_finalize(st);
    if (s || (s = tt__db_prepare(db,
                                 "SELECT error_no, count(*) FROM records "
                                 "WHERE CAST(?1 AS BIGINT) = 0 OR job_id = ?1 "
                                 "GROUP BY error_no",
                                 &st)))
        return s;
    tt__stmt_bind_int64(st, 1, job);
    while ((rc = tt__stmt_step(st)) == TT__STEP_ROW) {
        int e = tt__stmt_int64(st, 0);
        if (e >= 0 && e < TT_MEASURE_ERROR_COUNT)
            out->errors[e] = tt__stmt_int64(st, 1);
    }
    if (rc != TT__STEP_DONE)
        s = tt__db_failed(db, "computing statistics");
    tt__stmt_finalize(st);
    return s;
}

/* The extra JSON with "suspect": why, so that an export or a copy keeps the mark. */
static char *extra_with_suspect(const char *extra, const char *why)
{
    json_t *o = NULL;
    if (!extra || tt_json_parse(extra, strlen(extra), &o, NULL) || !json_is_object(o)) {
        json_decref(o);
        o = json_object();
    }
    json_object_set_new(o, "suspect", json_string(why));
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return text;
}

static tt_status mark_suspect_rows(tt_db *db, const char *host, double since, const char *why,
                                   int64_t *marked)
{
    tt__stmt *sel, *upd;
    tt_status s = tt__db_prepare(
        db, "SELECT id, extra FROM records WHERE host = ?1 AND timestamp >= ?2 ORDER BY id", &sel);
    if (s)
        return s;
    if ((s = tt__db_prepare(db, "UPDATE records SET suspect = ?1, extra = ?2 WHERE id = ?3",
                            &upd))) {
        tt__stmt_finalize(sel);
        return s;
    }
    tt__stmt_bind_text(sel, 1, host);
    tt__stmt_bind_double(sel, 2, since);
    /* Ids and new texts first: SQLite cannot update the rows a statement is still reading. */
    TT_VEC(int64_t) ids = {0};
    TT_VEC(char *) extras = {0};
    int rc;
    while (!s && (rc = tt__stmt_step(sel)) == TT__STEP_ROW) {
        char *e = extra_with_suspect(tt__stmt_text(sel, 1), why);
        if (!e || TT_VEC_PUSH(&ids, tt__stmt_int64(sel, 0)) || TT_VEC_PUSH(&extras, e)) {
            free(e);
            s = tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
        }
    }
    if (!s && rc != TT__STEP_DONE)
        s = tt__db_failed(db, "finding a sick device's records");
    for (size_t i = 0; !s && i < ids.len; i++) {
        tt__stmt_reset(upd);
        tt__stmt_bind_text(upd, 1, why);
        tt__stmt_bind_text(upd, 2, extras.data[i]);
        tt__stmt_bind_int64(upd, 3, ids.data[i]);
        s = tt__stmt_run(upd, "marking a sick device's records", NULL);
    }
    if (!s)
        *marked = (int64_t)ids.len;
    for (size_t i = 0; i < extras.len; i++)
        free(extras.data[i]);
    TT_VEC_FREE(&extras);
    TT_VEC_FREE(&ids);
    tt__stmt_finalize(sel);
    tt__stmt_finalize(upd);
    return s;
}

/* The `bests` rows of every pair that has records of `host` since `since`, computed again from
 * the records (a pair whose every record is now suspect loses its row). */
static tt_status recompute_bests(tt_db *db, const char *host, double since)
{
#define MARKED_PAIRS                                                                               \
    " (SELECT m.workload_id, m.target_id FROM records m WHERE m.host = ?1 AND m.timestamp >= ?2)"
    static const char *const sql[2] = {
        "DELETE FROM bests WHERE (workload_id, target_id) IN" MARKED_PAIRS,
        TT__DB_BESTS_FILL " AND (r.workload_id, r.target_id) IN" MARKED_PAIRS TT__DB_BESTS_GROUP};
#undef MARKED_PAIRS
    tt_status s = TT_OK;
    for (int i = 0; i < 2 && !s; i++) {
        tt__stmt *st;
        if ((s = tt__db_prepare(db, sql[i], &st)))
            break;
        tt__stmt_bind_text(st, 1, host);
        tt__stmt_bind_double(st, 2, since);
        s = tt__stmt_run(st, "keeping the best of a workload", NULL);
        tt__stmt_finalize(st);
    }
    return s;
}

static tt_status mark_suspect_once(tt_db *db, const char *host, double since, const char *why,
                                   int64_t *marked)
{
    int64_t count = 0;
    if (marked)
        *marked = 0;
    tt_status s = tt__db_begin(db);
    if (!s)
        s = mark_suspect_rows(db, host, since, why, &count);
    if (!s && count)
        s = recompute_bests(db, host, since);
    if (!s)
        s = tt__db_commit(db);
    if (s)
        return tt__db_abort(db, s, "marking %s's records suspect", host);
    if (marked)
        *marked = count;
    return TT_OK;
}

static tt_status leaderboard_once(tt_db *db, int64_t limit, tt_db_best_entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    tt__stmt *st;
    tt_status s = tt__db_prepare(
        db,
        "SELECT w.key, t.target, b.fastest_s, w.flops, b.records FROM bests b "
        "JOIN workloads w ON w.id = b.workload_id JOIN targets t ON t.id = b.target_id "
        "ORDER BY w.flops / b.fastest_s DESC, w.key, t.target LIMIT ?1",
        &st);
    if (s)
        return s;
    tt__stmt_bind_int64(st, 1, limit > 0 ? limit : INT64_MAX);
    TT_VEC(tt_db_best_entry) v = {0};
    int rc = TT__STEP_DONE;
    while (!s && (rc = tt__stmt_step(st)) == TT__STEP_ROW) {
        tt_db_best_entry e;
        e.workload = tt__stmt_text_dup(st, 0);
        e.target = tt__stmt_text_dup(st, 1);
        e.best_s = tt__stmt_double(st, 2);
        double flops = tt__stmt_double(st, 3);
        e.gflops = flops > 0 ? flops / e.best_s / 1e9 : 0;
        e.records = tt__stmt_int64(st, 4);
        if (!e.workload || !e.target || TT_VEC_PUSH(&v, e)) {
            free(e.workload);
            free(e.target);
            s = tt__db_fail(db, TT_ERR_NOMEM, "listing the best records: out of memory");
        }
    }
    if (!s && rc != TT__STEP_DONE)
        s = tt__db_failed(db, "listing the best records");
    tt__stmt_finalize(st);
    if (s) {
        tt_db_leaderboard_free(v.data, v.len);
        return s;
    }
    *out = v.data;
    *n = v.len;
    return TT_OK;
}

void tt_db_leaderboard_free(tt_db_best_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(e[i].workload);
        free(e[i].target);
    }
    free(e);
}

/* ---- jobs ---- */

static tt_status job_create_once(tt_db *db, const char *owner, const char *params_json,
                                 int64_t trials_total, int64_t *id)
{
    tt__stmt *st;
    tt_status s = tt__db_prepare(db,
                                 "INSERT INTO jobs(state, params, trials_total, created, updated, "
                                 "owner) VALUES ('queued', ?, ?, ?, ?, ?) RETURNING id",
                                 &st);
    if (s)
        return s;
    double now = tt_clock_wall();
    tt__stmt_bind_text(st, 1, params_json ? params_json : "{}");
    tt__stmt_bind_int64(st, 2, trials_total);
    tt__stmt_bind_double(st, 3, now);
    tt__stmt_bind_double(st, 4, now);
    tt__stmt_bind_text(st, 5, owner ? owner : "");
    s = tt__stmt_run(st, "creating a job", id);
    tt__stmt_finalize(st);
    return s;
}

static tt_status job_update_once(tt_db *db, int64_t id, const char *state, int64_t trials_done,
                                 double best_s)
{
    static const char *const states[] = {"queued", "running", "done", "failed", "cancelled"};
    bool known = false;
    for (size_t i = 0; i < TT_ARRAY_LEN(states); i++)
        known |= state && !strcmp(state, states[i]);
    if (!known)
        return tt__db_fail(db, TT_ERR_INVALID_ARG,
                           "job state '%s' (queued, running, done, failed, cancelled)",
                           state ? state : "(null)");
    tt__stmt *st;
    tt_status s = tt__db_prepare(
        db, "UPDATE jobs SET state = ?, trials_done = ?, best_s = ?, updated = ? WHERE id = ?",
        &st);
    if (s)
        return s;
    tt__stmt_bind_text(st, 1, state);
    tt__stmt_bind_int64(st, 2, trials_done);
    tt__stmt_bind_double(st, 3, best_s);
    tt__stmt_bind_double(st, 4, tt_clock_wall());
    tt__stmt_bind_int64(st, 5, id);
    int rc = tt__stmt_step(st);
    if (rc != TT__STEP_DONE)
        s = tt__db_failed(db, "updating a job");
    else if (tt__stmt_changes(st) == 0)
        s = tt__db_fail(db, TT_ERR_NOT_FOUND, "no job %lld", (long long)id);
    tt__stmt_finalize(st);
    return s;
}

static tt_status job_claim_once(tt_db *db, int64_t id, const char *owner, bool *claimed)
{
    tt__stmt *st;
    tt_status s = tt__db_prepare(db, "UPDATE jobs SET owner = ? WHERE id = ? AND owner = ''", &st);
    if (s)
        return s;
    tt__stmt_bind_text(st, 1, owner);
    tt__stmt_bind_int64(st, 2, id);
    s = tt__stmt_run(st, "claiming a job", NULL);
    *claimed = !s && tt__stmt_changes(st) == 1;
    tt__stmt_finalize(st);
    return s;
}

static tt_status job_set_message_once(tt_db *db, int64_t id, const char *message)
{
    tt__stmt *st;
    tt_status s = tt__db_prepare(db, "UPDATE jobs SET message = ?, updated = ? WHERE id = ?", &st);
    if (s)
        return s;
    tt__stmt_bind_text(st, 1, message ? message : "");
    tt__stmt_bind_double(st, 2, tt_clock_wall());
    tt__stmt_bind_int64(st, 3, id);
    int rc = tt__stmt_step(st);
    if (rc != TT__STEP_DONE)
        s = tt__db_failed(db, "updating a job");
    tt__stmt_finalize(st);
    return s;
}

static tt_status jobs_list_once(tt_db *db, tt_db_job **jobs, size_t *n)
{
    *jobs = NULL;
    *n = 0;
    tt__stmt *st;
    tt_status s = tt__db_prepare(db,
                                 "SELECT id, state, params, trials_done, trials_total, best_s, "
                                 "created, updated, message, owner FROM jobs ORDER BY id",
                                 &st);
    if (s)
        return s;
    int rc;
    while ((rc = tt__stmt_step(st)) == TT__STEP_ROW) {
        tt_db_job *g = realloc(*jobs, (*n + 1) * sizeof(tt_db_job));
        if (!g) {
            s = tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
            break;
        }
        *jobs = g;
        tt_db_job *j = &g[(*n)++];
        j->id = tt__stmt_int64(st, 0);
        j->state = tt__stmt_text_dup(st, 1);
        j->params = tt__stmt_text_dup(st, 2);
        j->trials_done = tt__stmt_int64(st, 3);
        j->trials_total = tt__stmt_int64(st, 4);
        j->best_s = tt__stmt_double(st, 5);
        j->created = tt__stmt_double(st, 6);
        j->updated = tt__stmt_double(st, 7);
        j->message = tt__stmt_text_dup(st, 8);
        j->owner = tt__stmt_text_dup(st, 9);
    }
    if (!s && rc != TT__STEP_DONE)
        s = tt__db_failed(db, "listing jobs");
    tt__stmt_finalize(st);
    if (s) {
        tt_db_jobs_free(*jobs, *n);
        *jobs = NULL;
        *n = 0;
    }
    return s;
}

void tt_db_jobs_free(tt_db_job *jobs, size_t n)
{
    for (size_t i = 0; jobs && i < n; i++) {
        free(jobs[i].state);
        free(jobs[i].params);
        free(jobs[i].message);
        free(jobs[i].owner);
    }
    free(jobs);
}

/* ---- cost models ---- */

static tt_status model_save_once(tt_db *db, const char *name, int feature_schema, const void *blob,
                                 size_t len, const char *meta_json)
{
    tt__stmt *st;
    tt_status s =
        tt__db_prepare(db,
                       "INSERT INTO cost_models(name, feature_schema, created, meta, model) "
                       "VALUES (?, ?, ?, ?, ?)",
                       &st);
    if (s)
        return s;
    tt__stmt_bind_text(st, 1, name);
    tt__stmt_bind_int64(st, 2, feature_schema);
    tt__stmt_bind_double(st, 3, tt_clock_wall());
    if (meta_json)
        tt__stmt_bind_text(st, 4, meta_json);
    tt__stmt_bind_blob(st, 5, blob, len);
    int rc = tt__stmt_step(st);
    if (rc != TT__STEP_DONE)
        s = tt__db_failed(db, "saving a cost model");
    tt__stmt_finalize(st);
    return s;
}

static tt_status model_load_once(tt_db *db, const char *name, int feature_schema, void **blob,
                                 size_t *len, char **meta_json)
{
    *blob = NULL;
    *len = 0;
    if (meta_json)
        *meta_json = NULL;
    tt__stmt *st;
    tt_status s =
        tt__db_prepare(db,
                       "SELECT model, meta FROM cost_models WHERE name = ? AND feature_schema = ? "
                       "ORDER BY id DESC LIMIT 1",
                       &st);
    if (s)
        return s;
    tt__stmt_bind_text(st, 1, name);
    tt__stmt_bind_int64(st, 2, feature_schema);
    int rc = tt__stmt_step(st);
    if (rc == TT__STEP_ROW) {
        const void *data = tt__stmt_blob(st, 0, len);
        *blob = malloc(*len ? *len : 1);
        if (!*blob)
            s = tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
        else if (*len)
            memcpy(*blob, data, *len);
        const char *meta = tt__stmt_text(st, 1);
        if (!s && meta && meta_json && !(*meta_json = strdup((const char *)meta))) {
            free(*blob);
            *blob = NULL;
            s = tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
        }
    } else if (rc == TT__STEP_DONE) {
        s = tt__db_fail(db, TT_ERR_NOT_FOUND, "no cost model '%s' with feature schema %d", name,
                        feature_schema);
    } else {
        s = tt__db_failed(db, "loading a cost model");
    }
    tt__stmt_finalize(st);
    return s;
}

/* ---- every operation, run again when the server lost it (tt__db_retry) ---- */

#define RETRYING(call)                                                                             \
    do {                                                                                           \
        double started_ = tt_clock_monotonic();                                                    \
        for (int attempt_ = 0;; attempt_++) {                                                      \
            tt_status s_ = (call);                                                                 \
            if (!s_ || !tt__db_retry(db, attempt_, started_))                                      \
                return s_;                                                                         \
        }                                                                                          \
    } while (0)

tt_status tt_db_device_upsert(tt_db *db, const tt_db_device *d)
{
    RETRYING(device_upsert_once(db, d));
}

tt_status tt_db_insert(tt_db *db, const tt_db_record *recs, size_t n, size_t *inserted)
{
    RETRYING(insert_once(db, recs, n, inserted));
}

tt_status tt_db_best(tt_db *db, const char *workload, const char *target, const char *device, int k,
                     bool fallback, tt_db_row **rows, size_t *n)
{
    RETRYING(best_once(db, workload, target, device, k, fallback, rows, n));
}

tt_status tt_db_stats_get(tt_db *db, int64_t job, tt_db_stats *out)
{
    RETRYING(stats_get_once(db, job, out));
}

tt_status tt_db_mark_suspect(tt_db *db, const char *host, double since, const char *why,
                             int64_t *marked)
{
    RETRYING(mark_suspect_once(db, host, since, why, marked));
}

tt_status tt_db_leaderboard(tt_db *db, int64_t limit, tt_db_best_entry **out, size_t *n)
{
    RETRYING(leaderboard_once(db, limit, out, n));
}

tt_status tt_db_job_create(tt_db *db, const char *owner, const char *params_json,
                           int64_t trials_total, int64_t *id)
{
    RETRYING(job_create_once(db, owner, params_json, trials_total, id));
}

tt_status tt_db_job_update(tt_db *db, int64_t id, const char *state, int64_t trials_done,
                           double best_s)
{
    RETRYING(job_update_once(db, id, state, trials_done, best_s));
}

tt_status tt_db_job_claim(tt_db *db, int64_t id, const char *owner, bool *claimed)
{
    RETRYING(job_claim_once(db, id, owner, claimed));
}

tt_status tt_db_job_set_message(tt_db *db, int64_t id, const char *message)
{
    RETRYING(job_set_message_once(db, id, message));
}

tt_status tt_db_jobs_list(tt_db *db, tt_db_job **jobs, size_t *n)
{
    RETRYING(jobs_list_once(db, jobs, n));
}

tt_status tt_db_model_save(tt_db *db, const char *name, int feature_schema, const void *blob,
                           size_t len, const char *meta_json)
{
    RETRYING(model_save_once(db, name, feature_schema, blob, len, meta_json));
}

tt_status tt_db_model_load(tt_db *db, const char *name, int feature_schema, void **blob,
                           size_t *len, char **meta_json)
{
    RETRYING(model_load_once(db, name, feature_schema, blob, len, meta_json));
}
