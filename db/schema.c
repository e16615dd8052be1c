/* Opening, schema creation and migration, the same on every backend. */
#include "db_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Migration i takes a database from schema version i to i+1.  The DDL is written once, in
 * SQLite's words; PostgreSQL gets it through tt__sql_ddl_postgresql.  The backfills, one in each
 * backend's own words (JSON functions differ), fill new columns from the data already stored;
 * NULL where a backend has nothing to move (migration 2's data predates PostgreSQL support). */
static const struct {
    const char *ddl, *sqlite_backfill, *postgresql_backfill;
} migrations[] = {
    /* 0 -> 1: the first schema. */
    {"CREATE TABLE workloads ("
     "  id INTEGER PRIMARY KEY,"
     "  key TEXT NOT NULL UNIQUE," /* canonical text */
     "  hash TEXT NOT NULL,"       /* FNV-1a 64 of key, hex */
     "  op TEXT NOT NULL,"         /* operator, 'te', or the foreign task name */
     "  params TEXT NOT NULL,"     /* JSON */
     "  flops REAL NOT NULL DEFAULT 0,"
     "  origin TEXT NOT NULL DEFAULT 'ours'" /* 'ours', 'autotvm', 'ansor' */
     ");"
     "CREATE TABLE targets ("
     "  id INTEGER PRIMARY KEY,"
     "  target TEXT NOT NULL UNIQUE,"
     "  kind TEXT NOT NULL, triple TEXT, cpu TEXT, attrs TEXT, keys TEXT, model TEXT,"
     "  device TEXT, num_cores INTEGER, family TEXT NOT NULL"
     ");"
     "CREATE INDEX targets_family ON targets(family);"
     "CREATE TABLE devices ("
     "  id INTEGER PRIMARY KEY,"
     "  fingerprint TEXT NOT NULL UNIQUE,"
     "  key TEXT, cpu_model TEXT, cpu_features TEXT, cores INTEGER, memory_bytes INTEGER,"
     "  opencl_device TEXT, opencl_driver TEXT,"
     "  first_seen REAL NOT NULL, last_seen REAL NOT NULL"
     ");"
     "CREATE TABLE jobs ("
     "  id INTEGER PRIMARY KEY,"
     "  state TEXT NOT NULL,"
     "  params TEXT NOT NULL,"
     "  trials_done INTEGER NOT NULL DEFAULT 0,"
     "  trials_total INTEGER NOT NULL DEFAULT 0,"
     "  best_s REAL NOT NULL DEFAULT 0,"
     "  created REAL NOT NULL, updated REAL NOT NULL"
     ");"
     "CREATE TABLE records ("
     "  id INTEGER PRIMARY KEY,"
     "  workload_id INTEGER NOT NULL REFERENCES workloads(id),"
     "  target_id INTEGER NOT NULL REFERENCES targets(id),"
     "  device_id INTEGER REFERENCES devices(id),"
     "  config TEXT NOT NULL,"
     "  config_kind INTEGER NOT NULL," /* tt_config_kind */
     "  costs TEXT NOT NULL,"          /* JSON array of seconds */
     "  median_s REAL NOT NULL,"
     "  mean_s REAL NOT NULL,"
     "  error_no INTEGER NOT NULL CHECK (error_no BETWEEN 0 AND 8),"
     "  error_text TEXT,"
     "  build_s REAL NOT NULL DEFAULT 0, run_s REAL NOT NULL DEFAULT 0,"
     "  total_s REAL NOT NULL DEFAULT 0,"
     "  job_id INTEGER REFERENCES jobs(id),"
     "  timestamp REAL NOT NULL,"
     "  extra TEXT,"                /* JSON kept for export */
     "  dedup TEXT NOT NULL UNIQUE" /* identity of the measurement: re-imports are no-ops */
     ");"
     "CREATE INDEX records_best ON records(workload_id, target_id, error_no, median_s);"
     "CREATE INDEX records_job ON records(job_id);"
     "CREATE TABLE cost_models ("
     "  id INTEGER PRIMARY KEY,"
     "  name TEXT NOT NULL,"
     "  feature_schema INTEGER NOT NULL,"
     "  created REAL NOT NULL,"
     "  meta TEXT,"
     "  model BLOB NOT NULL"
     ");"
     "CREATE INDEX cost_models_name ON cost_models(name, feature_schema);",
     NULL, NULL},
    /* 1 -> 2: why a job failed or stopped, for tvm-tune status */
    {"ALTER TABLE jobs ADD COLUMN message TEXT NOT NULL DEFAULT '';", NULL, NULL},
    /* 2 -> 3: the measuring device's address and the suspect mark as columns (they were only in
     * the extra JSON, which a query had to parse on every row and PostgreSQL cannot test for
     * validity) */
    {"ALTER TABLE records ADD COLUMN host TEXT;"
     "ALTER TABLE records ADD COLUMN suspect TEXT;"
     "CREATE INDEX records_host ON records(host, timestamp);"
     /* the best query orders by (median, id): SQLite's indexes end in the rowid, PostgreSQL's
      * must say so, or it sorts every record of the workload to find the first */
     "DROP INDEX records_best;"
     "CREATE INDEX records_best ON records(workload_id, target_id, error_no, median_s, id);"
     /* and which tracker runs a job: trackers sharing a database resume only their own */
     "ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';",
     "UPDATE records SET host = json_extract(extra, '$.host'), "
     "suspect = json_extract(extra, '$.suspect') WHERE json_valid(extra);",
     NULL},
    /* 3 -> 4: a record's time is its fastest sample (decision 56): a busy device only ever adds
     * time, and of many single-call samples the fastest is the most repeatable statistic, so
     * the best-record queries rank by it instead of the median */
    {"ALTER TABLE records ADD COLUMN fastest_s REAL NOT NULL DEFAULT 0;"
     "UPDATE records SET fastest_s = median_s;"
     "DROP INDEX records_best;"
     "CREATE INDEX records_best ON records(workload_id, target_id, error_no, fastest_s, id);",
     "UPDATE records SET fastest_s = coalesce((SELECT min(CAST(value AS REAL)) "
     "FROM json_each(costs) WHERE CAST(value AS REAL) > 0), 0) "
     "WHERE json_valid(costs) AND json_array_length(costs) > 0;",
     "UPDATE records SET fastest_s = coalesce((SELECT min(CAST(v AS DOUBLE PRECISION)) "
     "FROM json_array_elements_text(CAST(costs AS json)) AS v "
     "WHERE CAST(v AS DOUBLE PRECISION) > 0), 0) "
     "WHERE costs LIKE '[%]' AND costs <> '[]';"},
    /* 4 -> 5: the best time and record count of every (workload, target), kept as records are
     * stored and marked suspect, so that the leaderboard (the tracker's dashboard, every 2 s) and
     * the search for similar workloads read one row per pair instead of every record.  No foreign
     * keys: the ids come from records, which have them, and on PostgreSQL each key check of an
     * upsert locks the workload's and target's rows, which made the best-config query 2.4 times
     * slower (bench_db) */
    {"CREATE TABLE bests ("
     "  workload_id INTEGER NOT NULL,"
     "  target_id INTEGER NOT NULL,"
     "  fastest_s REAL NOT NULL,"  /* the fastest of the pair's trusted error-free records */
     "  records INTEGER NOT NULL," /* how many such records, with a time */
     "  PRIMARY KEY (workload_id, target_id)"
     ");",
     TT__DB_BESTS_FILL TT__DB_BESTS_GROUP ";", TT__DB_BESTS_FILL TT__DB_BESTS_GROUP ";"},
};
_Static_assert(TT_ARRAY_LEN(migrations) == TT_DB_SCHEMA_VERSION, "one migration per version");

/* The DDL of migration v for this handle's backend (malloc'ed). */
static char *migration_ddl(tt_db *db, int v)
{
    return db->be->dialect == TT__SQL_POSTGRESQL ? tt__sql_ddl_postgresql(migrations[v].ddl)
                                                 : strdup(migrations[v].ddl);
}

tt_status tt__db_fail(tt_db *db, tt_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->errmsg, sizeof(db->errmsg), fmt, ap);
    va_end(ap);
    return s;
}

int tt_db_user_version(tt_db *db)
{
    int v = -1;
    bool foreign;
    return tt__db_owned(db) || db->be->schema_read(db, &v, &foreign) ? -1 : v;
}

/* What a schema version and owner mean for this program: TT_OK with *current set, or the error
 * (another application's tables, a newer tvm-tune's schema). */
static tt_status schema_verdict(tt_db *db, int version, bool foreign, bool *current)
{
    *current = version == TT_DB_SCHEMA_VERSION && !foreign;
    if (foreign)
        return tt__db_fail(db, TT_ERR_IO,
                           "%s holds another application's tables (%s); refusing to touch it",
                           db->where, db->cause_msg);
    if (version > TT_DB_SCHEMA_VERSION)
        return tt__db_fail(
            db, TT_ERR_UNSUPPORTED,
            "%s has schema version %d, newer than this tvm-tune understands (%d): upgrade tvm-tune",
            db->where, version, TT_DB_SCHEMA_VERSION);
    return TT_OK;
}

/* Brings the schema to TT_DB_SCHEMA_VERSION.  Any number of processes may start together on an
 * empty or older database, read-only ones too (a build beside a tracker's first start): each
 * takes the migrators' lock, reads the version again in a transaction that begins after the
 * wait, and the first migrates while the others find nothing left to do. */
static tt_status migrate(tt_db *db)
{
    int version = 0;
    bool foreign = false, current;
    tt_status s = tt__db_owned(db);
    if (!s && db->be->schema_read(db, &version, &foreign))
        s = tt__db_failed(db, "reading the schema");
    if (!s)
        s = schema_verdict(db, version, foreign, &current);
    if (s || current)
        return s;
    if (db->be->schema_lock(db)) {
        s = tt__db_failed(db, "waiting for another process's migration");
        db->be->schema_unlock(db);
        return s;
    }
    /* Each migration and its version bump commit together, all of them in one transaction. */
    s = tt__db_begin(db);
    if (!s && db->be->schema_read(db, &version, &foreign))
        s = tt__db_failed(db, "reading the schema");
    bool refused = false;
    if (!s)
        refused = (s = schema_verdict(db, version, foreign, &current)) != TT_OK;
    int v = version;
    for (; !s && v < TT_DB_SCHEMA_VERSION; v++) {
        char *ddl = migration_ddl(db, v);
        if (!ddl)
            s = tt__db_fail(db, TT_ERR_NOMEM, "out of memory");
        if (!s)
            s = tt__db_exec(db, ddl);
        free(ddl);
        const char *backfill = db->be->dialect == TT__SQL_SQLITE
                                   ? migrations[v].sqlite_backfill
                                   : migrations[v].postgresql_backfill;
        if (!s && backfill)
            s = tt__db_exec(db, backfill);
        if (!s && db->be->schema_write(db, v + 1))
            s = tt__db_failed(db, "recording the schema version");
    }
    if (!s)
        s = tt__db_commit(db);
    if (refused) { /* what another process wrote meanwhile: said as it is */
        char why[sizeof(db->errmsg)];
        memcpy(why, db->errmsg, sizeof(why));
        tt__db_abort(db, s, "migrating");
        memcpy(db->errmsg, why, sizeof(why));
    } else if (s) {
        s = tt__db_abort(db, s, "migrating %s from schema %d to %d", db->where, version,
                         TT_DB_SCHEMA_VERSION);
    }
    db->be->schema_unlock(db);
    return s;
}

tt_status tt_db_open(const char *path, int flags, tt_db **out, tt_errbuf *err)
{
    *out = NULL;
    tt_db *db = calloc(1, sizeof(*db));
    if (!db || !(db->path = strdup(path))) {
        free(db);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    db->be = tt__sql_backend_for(db->path, &db->where);
    db->owner = getpid();
    const char *patience = getenv("TVM_TUNE_DB_PATIENCE");
    db->patience_s = patience && atof(patience) >= 0 ? atof(patience) : 300;
    db->readonly = flags & TT_DB_READONLY;
    /* A server that never answered is an error at once (a wrong URI, nothing listening); one
     * that answered and then lost the session, in its setup or in the migration, is waited for
     * and the migration run again, as every other operation is (tt__db_retry). */
    double started = tt_clock_monotonic();
    tt_status s = db->be->open(db) ? tt__db_failed(db, "opening") : TT_OK;
    if (s && (flags & TT_DB_WAIT_FOR_SERVER) && tt__db_retry(db, 0, started))
        s = TT_OK; /* connected once the server was back */
    for (int attempt = 0;; attempt++) {
        if (!s)
            s = migrate(db);
        if (!s || !db->reached || !tt__db_retry(db, attempt, started))
            break;
        s = TT_OK;
    }
    if (s) {
        tt_err(err, s, "%s", db->errmsg);
        tt_db_close(db);
        return s;
    }
    *out = db;
    return TT_OK;
}

void tt_db_set_patience(tt_db *db, double seconds)
{
    db->patience_s = seconds > 0 ? seconds : 0;
}

const char *tt_db_backend(const tt_db *db)
{
    return db->be->name;
}

int64_t tt__db_cache_get(const tt__db_cache *c, const char *key)
{
    size_t slot = tt_hash64_str(key) % TT__DB_CACHE;
    return c->key[slot] && !strcmp(c->key[slot], key) ? c->id[slot] : 0;
}

void tt__db_cache_put(tt__db_cache *c, const char *key, int64_t id)
{
    size_t slot = tt_hash64_str(key) % TT__DB_CACHE;
    char *k = strdup(key);
    if (!k)
        return;
    free(c->key[slot]);
    c->key[slot] = k;
    c->id[slot] = id;
}

void tt__db_cache_clear(tt__db_cache *c)
{
    for (int i = 0; i < TT__DB_CACHE; i++) {
        free(c->key[i]);
        c->key[i] = NULL;
    }
}

void tt_db_close(tt_db *db)
{
    if (!db)
        return;
    tt__db_cache_clear(&db->workloads);
    tt__db_cache_clear(&db->targets);
    tt__db_cache_clear(&db->devices);
    if (db->conn && db->owner != getpid())
        db->be->abandon(db); /* a forked child's copy: the connection is the parent's */
    else if (db->conn)
        db->be->close(db);
    free(db->path);
    free(db);
}

void tt_db_remove(const char *path)
{
    const char *file;
    if (tt__sql_backend_for(path, &file) != &tt__sql_sqlite)
        return;
    char p[4096];
    unlink(file);
    snprintf(p, sizeof(p), "%s-wal", file);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", file);
    unlink(p);
}

tt_status tt__db_abort(tt_db *db, tt_status s, const char *fmt, ...)
{
    char what[256], msg[sizeof(db->errmsg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    memcpy(msg, db->errmsg, sizeof(msg));
    if (db->owner == getpid() && (!db->be->lost || !db->be->lost(db)))
        db->be->exec(db, "ROLLBACK");
    /* Ids of rows created in the rolled-back transaction are gone. */
    tt__db_cache_clear(&db->workloads);
    tt__db_cache_clear(&db->targets);
    tt__db_cache_clear(&db->devices);
    return tt__db_fail(db, s, "%s: %s", what, msg);
}

const char *tt_db_errmsg(const tt_db *db)
{
    return db ? db->errmsg : "";
}

/* How many (workload, target) pairs `bests` has otherwise than the records say (a wrong row, a
 * missing one, one too many). */
static tt_status bests_disagreeing(tt_db *db, int64_t *pairs)
{
#define STORED   "SELECT workload_id, target_id, fastest_s, records FROM bests"
#define COMPUTED TT__DB_BESTS_SELECT TT__DB_BESTS_GROUP
    tt__stmt *st;
    tt_status s = tt__db_prepare(db,
                                 "SELECT count(*) FROM (SELECT a.workload_id, a.target_id FROM "
                                 "(" STORED " EXCEPT " COMPUTED ") a UNION "
                                 "SELECT b.workload_id, b.target_id FROM "
                                 "(" COMPUTED " EXCEPT " STORED ") b) d",
                                 &st);
#undef STORED
#undef COMPUTED
    if (s)
        return s;
    if (tt__stmt_step(st) == TT__STEP_ROW)
        *pairs = tt__stmt_int64(st, 0);
    else
        s = tt__db_failed(db, "comparing the best of each workload with the records");
    tt__stmt_finalize(st);
    return s;
}

tt_status tt_db_check(tt_db *db)
{
    if (tt__db_owned(db))
        return TT_ERR_INVALID_ARG;
    if (db->be->check(db))
        return tt__db_failed(db, "checking integrity");
    int64_t pairs = 0;
    tt_status s = bests_disagreeing(db, &pairs);
    if (!s && pairs)
        s = tt__db_fail(db, TT_ERR_IO,
                        "%s: the best of %lld (workload, target) pairs in table bests disagrees "
                        "with their records; `tvm-db vacuum` computes it again",
                        db->where, (long long)pairs);
    return s;
}

tt_status tt_db_vacuum(tt_db *db)
{
    /* the leaderboard's table computed again from the records, then the backend's own */
    tt_status s = tt__db_begin(db);
    if (!s)
        s = tt__db_exec(db, "DELETE FROM bests");
    if (!s)
        s = tt__db_exec(db, TT__DB_BESTS_FILL TT__DB_BESTS_GROUP);
    if (!s)
        s = tt__db_commit(db);
    if (s)
        return tt__db_abort(db, s, "computing the best of each workload again");
    return db->be->vacuum(db) ? tt__db_failed(db, "vacuuming") : TT_OK;
}

tt_status tt_db_limit_size(tt_db *db, int64_t max_bytes)
{
    if (tt__db_owned(db))
        return TT_ERR_INVALID_ARG;
    return db->be->limit_size(db, max_bytes) ? tt__db_failed(db, "limiting the size") : TT_OK;
}
