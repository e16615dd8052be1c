/* Opening, schema creation and migration. */
#include "db_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* 'TVTT' marks our files, so a database of another application is recognised as such. */
#define TT_DB_APPLICATION_ID 0x54565454

/* Migration i takes a database from user_version i to i+1. */
static const char *const migrations[] = {
    /* 0 -> 1: the first schema. */
    "CREATE TABLE workloads ("
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
    /* 1 -> 2: why a job failed or stopped, for tvm-tune status */
    "ALTER TABLE jobs ADD COLUMN message TEXT NOT NULL DEFAULT '';",
};
_Static_assert(TT_ARRAY_LEN(migrations) == TT_DB_SCHEMA_VERSION, "one migration per version");

tt_status tt__db_fail(tt_db *db, tt_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->errmsg, sizeof(db->errmsg), fmt, ap);
    va_end(ap);
    return s;
}

tt_status tt__db_sqlite(tt_db *db, int rc, const char *what)
{
    int base = rc & 0xff;
    const char *detail = db->sql ? sqlite3_errmsg(db->sql) : sqlite3_errstr(rc);
    switch (base) {
    case SQLITE_FULL:
        return tt__db_fail(db, TT_ERR_IO,
                           "%s: disk full (%s); nothing of this operation was stored", what,
                           detail);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return tt__db_fail(db, TT_ERR_IO,
                           "%s: %s is not a valid tvm-tune database or is damaged (%s)", what,
                           db->path ? db->path : "the file", detail);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return tt__db_fail(db, TT_ERR_IO, "%s: the database is locked by another writer (%s)", what,
                           detail);
    case SQLITE_READONLY:
        return tt__db_fail(db, TT_ERR_IO, "%s: the database is read-only (%s)", what, detail);
    case SQLITE_NOMEM: return tt__db_fail(db, TT_ERR_NOMEM, "%s: out of memory", what);
    case SQLITE_CONSTRAINT: return tt__db_fail(db, TT_ERR_INVALID_ARG, "%s: %s", what, detail);
    default: return tt__db_fail(db, TT_ERR_IO, "%s: %s", what, detail);
    }
}

tt_status tt__db_prepare(tt_db *db, const char *sql, sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v2(db->sql, sql, -1, st, NULL);
    return rc == SQLITE_OK ? TT_OK : tt__db_sqlite(db, rc, "preparing a query");
}

tt_status tt__db_exec(tt_db *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db->sql, sql, NULL, NULL, &msg);
    sqlite3_free(msg);
    return rc == SQLITE_OK ? TT_OK : tt__db_sqlite(db, rc, "executing");
}

static int pragma_int(tt_db *db, const char *sql, int *out)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db->sql, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

int tt_db_user_version(tt_db *db)
{
    int v = -1;
    pragma_int(db, "PRAGMA user_version", &v);
    return v;
}

static tt_status migrate(tt_db *db)
{
    int version = 0, app = 0, tables = 0, rc;
    if ((rc = pragma_int(db, "PRAGMA user_version", &version)) ||
        (rc = pragma_int(db, "PRAGMA application_id", &app)) ||
        (rc = pragma_int(db, "SELECT count(*) FROM sqlite_master", &tables)))
        return tt__db_sqlite(db, rc, "reading the schema");
    if (app != TT_DB_APPLICATION_ID && tables > 0)
        return tt__db_fail(
            db, TT_ERR_IO,
            "%s holds another application's tables (application_id %d); refusing to touch it",
            db->path, app);
    if (version > TT_DB_SCHEMA_VERSION)
        return tt__db_fail(
            db, TT_ERR_UNSUPPORTED,
            "%s has schema version %d, newer than this tvm-tune understands (%d): upgrade tvm-tune",
            db->path, version, TT_DB_SCHEMA_VERSION);
    if (version == TT_DB_SCHEMA_VERSION)
        return TT_OK;
    if (db->readonly)
        return tt__db_fail(
            db, TT_ERR_IO,
            "%s has schema version %d and needs migrating to %d; open it read-write once", db->path,
            version, TT_DB_SCHEMA_VERSION);
    /* Each migration and its version bump commit together. */
    for (int v = version; v < TT_DB_SCHEMA_VERSION; v++) {
        char bump[96];
        snprintf(bump, sizeof(bump), "PRAGMA user_version = %d; PRAGMA application_id = %d;", v + 1,
                 TT_DB_APPLICATION_ID);
        tt_status s = tt__db_exec(db, "BEGIN IMMEDIATE");
        if (!s)
            s = tt__db_exec(db, migrations[v]);
        if (!s)
            s = tt__db_exec(db, bump);
        if (!s)
            s = tt__db_exec(db, "COMMIT");
        if (s)
            return tt__db_abort(db, s, "migrating %s from schema %d to %d", db->path, v, v + 1);
    }
    return TT_OK;
}

tt_status tt_db_open(const char *path, int flags, tt_db **out, tt_errbuf *err)
{
    *out = NULL;
    tt_db *db = calloc(1, sizeof(*db));
    if (!db || !(db->path = strdup(path))) {
        free(db);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    db->readonly = flags & TT_DB_READONLY;
    struct stat sb;
    if (db->readonly && stat(path, &sb) != 0) {
        tt_status s = tt_err(err, TT_ERR_NOT_FOUND, "%s: no such database", path);
        tt_db_close(db);
        return s;
    }
    int oflags = db->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(path, &db->sql, oflags | SQLITE_OPEN_NOMUTEX, NULL);
    tt_status s = TT_OK;
    if (rc != SQLITE_OK) {
        s = tt__db_sqlite(db, rc, "opening");
        goto fail;
    }
    sqlite3_extended_result_codes(db->sql, 1);
    /* Readers wait for a writer's commit instead of failing at once. */
    sqlite3_busy_timeout(db->sql, 10000);
    if (!db->readonly) {
        /* WAL: readers never block the writer nor see a partial batch.  synchronous=FULL makes
         * every commit durable (also against power loss, not only kill -9). */
        if ((s = tt__db_exec(db, "PRAGMA journal_mode = WAL")) ||
            (s = tt__db_exec(db, "PRAGMA synchronous = FULL")))
            goto fail;
        /* A 64 MiB page cache keeps the indexes of a million-record database in memory. */
        if ((s = tt__db_exec(db, "PRAGMA cache_size = -65536")))
            goto fail;
    }
    if ((s = tt__db_exec(db, "PRAGMA foreign_keys = ON")) || (s = migrate(db)))
        goto fail;
    *out = db;
    return TT_OK;
fail:
    tt_err(err, s, "%s", db->errmsg);
    tt_db_close(db);
    return s;
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
    if (db->sql)
        sqlite3_close_v2(db->sql);
    free(db->path);
    free(db);
}

void tt_db_remove(const char *path)
{
    char p[4096];
    unlink(path);
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
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
    sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
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

tt_status tt_db_check(tt_db *db)
{
    sqlite3_stmt *st;
    tt_status s = tt__db_prepare(db, "PRAGMA integrity_check", &st);
    if (s)
        return s;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(st, 0);
        if (!r || strcmp(r, "ok") != 0)
            s = tt__db_fail(db, TT_ERR_IO, "%s is damaged: %s", db->path, r ? r : "?");
    } else {
        s = tt__db_sqlite(db, rc, "checking integrity");
    }
    sqlite3_finalize(st);
    return s;
}

tt_status tt_db_vacuum(tt_db *db)
{
    tt_status s = tt_db_check(db);
    if (!s)
        s = tt__db_exec(db, "VACUUM");
    if (!s)
        s = tt__db_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    return s;
}

tt_status tt_db_limit_size(tt_db *db, int64_t max_bytes)
{
    int page = 4096;
    int rc = pragma_int(db, "PRAGMA page_size", &page);
    if (rc)
        return tt__db_sqlite(db, rc, "reading the page size");
    char sql[96];
    /* 0 restores SQLite's own maximum. */
    snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld",
             max_bytes > 0 ? (long long)(max_bytes / page > 1 ? max_bytes / page : 1)
                           : 4294967294LL);
    sqlite3_stmt *st;
    tt_status s = tt__db_prepare(db, sql, &st);
    if (s)
        return s;
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? TT_OK
                                                 : tt__db_sqlite(db, rc, "limiting the size");
}
