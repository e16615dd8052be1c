/* The SQLite backend: a file in WAL mode, one writer and any number of readers. */
#include "db_int.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* 'TVTT' marks our files, so a database of another application is recognised as such. */
#define APPLICATION_ID 0x54565454

typedef struct {
    tt__stmt base;
    sqlite3_stmt *s;
    int64_t changes;
} lite_stmt;

#define CONN(db) ((sqlite3 *)(db)->conn)

/* Keeps SQLite's reason for tt__db_failed, with the status it means. */
static int cause(tt_db *db, int rc)
{
    const char *detail = db->conn ? sqlite3_errmsg(CONN(db)) : sqlite3_errstr(rc);
    switch (rc & 0xff) {
    case SQLITE_FULL:
        tt__db_set_cause(db, TT_ERR_IO, "disk full (%s); nothing of this operation was stored",
                         detail);
        break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        tt__db_set_cause(db, TT_ERR_IO, "%s is not a valid tvm-tune database or is damaged (%s)",
                         db->where, detail);
        break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        tt__db_set_cause(db, TT_ERR_IO, "the database is locked by another writer (%s)", detail);
        break;
    case SQLITE_READONLY:
        tt__db_set_cause(db, TT_ERR_IO, "the database is read-only (%s)", detail);
        break;
    case SQLITE_NOMEM: tt__db_set_cause(db, TT_ERR_NOMEM, "out of memory"); break;
    case SQLITE_CONSTRAINT: tt__db_set_cause(db, TT_ERR_INVALID_ARG, "%s", detail); break;
    default: tt__db_set_cause(db, TT_ERR_IO, "%s", detail);
    }
    return rc;
}

static tt_status lite_exec(tt_db *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(CONN(db), sql, NULL, NULL, &msg);
    sqlite3_free(msg);
    return rc == SQLITE_OK ? TT_OK : (cause(db, rc), TT_ERR_IO);
}

/* Puts the file in WAL mode.  Switching a new file takes its exclusive lock, and SQLite answers
 * BUSY at once, without its busy handler, when another connection switches it or reads it at
 * that moment: processes creating one database together (two tuning runs started at once) wait
 * here for each other, up to the busy timeout. */
static tt_status wal_mode(tt_db *db)
{
    for (int waited_ms = 0;; waited_ms += 20) {
        char *msg = NULL;
        int rc = sqlite3_exec(CONN(db), "PRAGMA journal_mode = WAL", NULL, NULL, &msg);
        sqlite3_free(msg);
        if (rc == SQLITE_OK)
            return TT_OK;
        int base = rc & 0xff;
        if ((base != SQLITE_BUSY && base != SQLITE_LOCKED) || waited_ms >= 10000)
            return cause(db, rc), TT_ERR_IO;
        sqlite3_sleep(20);
    }
}

static tt_status lite_open(tt_db *db)
{
    struct stat sb;
    if (db->readonly && stat(db->where, &sb) != 0) {
        tt__db_set_cause(db, TT_ERR_NOT_FOUND, "%s: no such database", db->where);
        return TT_ERR_NOT_FOUND;
    }
    /* A reader opens read-write (never creating) and is then made query-only: SQLite deletes a
     * WAL database's -wal and -shm files when its last connection closes, which a connection
     * opened SQLITE_OPEN_READONLY cannot do, so every `tvm-db` query or build left them beside the
     * database.  A file the OS write-protects is still opened read-only by SQLite. */
    int flags = db->readonly ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    sqlite3 *conn = NULL;
    int rc = sqlite3_open_v2(db->where, &conn, flags | SQLITE_OPEN_NOMUTEX, NULL);
    db->conn = conn;
    if (rc != SQLITE_OK)
        return cause(db, rc), TT_ERR_IO;
    sqlite3_extended_result_codes(conn, 1);
    /* Readers wait for a writer's commit instead of failing at once. */
    sqlite3_busy_timeout(conn, 10000);
    tt_status s = TT_OK;
    /* WAL: readers never block the writer nor see a partial batch.  synchronous=FULL makes every
     * commit durable (also against power loss, not only kill -9).  A 64 MiB page cache keeps the
     * indexes of a million-record database in memory. */
    if (!db->readonly) {
        s = wal_mode(db);
        if (!s)
            s = lite_exec(db, "PRAGMA synchronous = FULL; PRAGMA cache_size = -65536");
    } else
        s = lite_exec(db, "PRAGMA query_only = ON");
    if (!s)
        s = lite_exec(db, "PRAGMA foreign_keys = ON");
    return s;
}

static void lite_close(tt_db *db)
{
    if (db->conn)
        sqlite3_close_v2(CONN(db));
    db->conn = NULL;
}

static void lite_abandon(tt_db *db)
{
    /* Closing would let SQLite, which sees none of the parent's POSIX locks in a child, take
     * itself for the last connection and checkpoint or delete the parent's WAL: the connection is
     * left to the child's exit. */
    db->conn = NULL;
}

static tt_status lite_prepare(tt_db *db, const char *sql, tt__stmt **out)
{
    lite_stmt *st = calloc(1, sizeof(*st));
    if (!st) {
        tt__db_set_cause(db, TT_ERR_NOMEM, "out of memory");
        return TT_ERR_NOMEM;
    }
    st->base.db = db;
    int rc = sqlite3_prepare_v2(CONN(db), sql, -1, &st->s, NULL);
    if (rc != SQLITE_OK) {
        cause(db, rc);
        free(st);
        return TT_ERR_IO;
    }
    *out = &st->base;
    return TT_OK;
}

static void lite_finalize(tt__stmt *st)
{
    sqlite3_finalize(((lite_stmt *)st)->s);
    free(st);
}

static void lite_reset(tt__stmt *st)
{
    sqlite3_reset(((lite_stmt *)st)->s);
    sqlite3_clear_bindings(((lite_stmt *)st)->s);
}

static void lite_bind_null(tt__stmt *st, int i)
{
    sqlite3_bind_null(((lite_stmt *)st)->s, i);
}

static void lite_bind_int64(tt__stmt *st, int i, int64_t v)
{
    sqlite3_bind_int64(((lite_stmt *)st)->s, i, v);
}

static void lite_bind_double(tt__stmt *st, int i, double v)
{
    sqlite3_bind_double(((lite_stmt *)st)->s, i, v);
}

static void lite_bind_text(tt__stmt *st, int i, const char *v)
{
    sqlite3_bind_text(((lite_stmt *)st)->s, i, v, -1, SQLITE_TRANSIENT);
}

static void lite_bind_blob(tt__stmt *st, int i, const void *p, size_t n)
{
    sqlite3_bind_blob64(((lite_stmt *)st)->s, i, p, n, SQLITE_TRANSIENT);
}

static int lite_step(tt__stmt *vst)
{
    lite_stmt *st = (lite_stmt *)vst;
    int rc = sqlite3_step(st->s);
    if (rc == SQLITE_ROW)
        return TT__STEP_ROW;
    if (rc == SQLITE_DONE) {
        st->changes = sqlite3_changes(CONN(vst->db));
        return TT__STEP_DONE;
    }
    cause(vst->db, rc);
    return TT__STEP_ERROR;
}

static bool lite_null(tt__stmt *st, int col)
{
    return sqlite3_column_type(((lite_stmt *)st)->s, col) == SQLITE_NULL;
}

static int64_t lite_int64(tt__stmt *st, int col)
{
    return sqlite3_column_int64(((lite_stmt *)st)->s, col);
}

static double lite_double(tt__stmt *st, int col)
{
    return sqlite3_column_double(((lite_stmt *)st)->s, col);
}

static const char *lite_text(tt__stmt *st, int col)
{
    return (const char *)sqlite3_column_text(((lite_stmt *)st)->s, col);
}

static const void *lite_blob(tt__stmt *st, int col, size_t *len)
{
    const void *p = sqlite3_column_blob(((lite_stmt *)st)->s, col);
    *len = (size_t)sqlite3_column_bytes(((lite_stmt *)st)->s, col);
    return p;
}

static int64_t lite_changes(tt__stmt *st)
{
    return ((lite_stmt *)st)->changes;
}

static tt_status lite_begin(tt_db *db)
{
    return lite_exec(db, "BEGIN IMMEDIATE");
}

static int pragma_int(tt_db *db, const char *sql, int *out)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(CONN(db), sql, -1, &st, NULL);
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

static tt_status lite_schema_read(tt_db *db, int *version, bool *foreign)
{
    int app = 0, tables = 0, rc;
    *version = 0;
    /* One statement, one read transaction: three, and a migration committing between them
     * showed its tables under the application id of a file nobody had claimed yet. */
    sqlite3_stmt *st;
    rc = sqlite3_prepare_v2(CONN(db),
                            "SELECT u.user_version, a.application_id, "
                            "(SELECT count(*) FROM sqlite_master) "
                            "FROM pragma_user_version() u, pragma_application_id() a",
                            -1, &st, NULL);
    if (rc != SQLITE_OK)
        return cause(db, rc), TT_ERR_IO;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *version = sqlite3_column_int(st, 0);
        app = sqlite3_column_int(st, 1);
        tables = sqlite3_column_int(st, 2);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return cause(db, rc), TT_ERR_IO;
    *foreign = app != APPLICATION_ID && tables > 0;
    if (*foreign)
        tt__db_set_cause(db, TT_ERR_IO, "application_id %d", app);
    return TT_OK;
}

static tt_status lite_schema_lock(tt_db *db)
{
    /* BEGIN IMMEDIATE holds the only write lock, and reads the file afresh.  A read-only handle
     * migrates too (tt__sql_backend.schema_lock): query_only is lifted for the migration. */
    return db->readonly ? lite_exec(db, "PRAGMA query_only = OFF") : TT_OK;
}

static void lite_schema_unlock(tt_db *db)
{
    if (db->readonly)
        lite_exec(db, "PRAGMA query_only = ON");
}

static tt_status lite_schema_write(tt_db *db, int version)
{
    char sql[96];
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; PRAGMA application_id = %d;", version,
             APPLICATION_ID);
    return lite_exec(db, sql);
}

static tt_status lite_check(tt_db *db)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(CONN(db), "PRAGMA integrity_check", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return cause(db, rc), TT_ERR_IO;
    tt_status s = TT_OK;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(st, 0);
        if (!r || strcmp(r, "ok") != 0) {
            tt__db_set_cause(db, TT_ERR_IO, "%s is damaged: %s", db->where, r ? r : "?");
            s = TT_ERR_IO;
        }
    } else {
        cause(db, rc);
        s = TT_ERR_IO;
    }
    sqlite3_finalize(st);
    return s;
}

static tt_status lite_vacuum(tt_db *db)
{
    tt_status s = lite_check(db);
    if (!s)
        s = lite_exec(db, "VACUUM");
    if (!s)
        s = lite_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    return s;
}

static tt_status lite_limit_size(tt_db *db, int64_t max_bytes)
{
    int page = 4096;
    int rc = pragma_int(db, "PRAGMA page_size", &page);
    if (rc)
        return cause(db, rc), TT_ERR_IO;
    char sql[96];
    /* 0 restores SQLite's own maximum. */
    snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld",
             max_bytes > 0 ? (long long)(max_bytes / page > 1 ? max_bytes / page : 1)
                           : 4294967294LL);
    sqlite3_stmt *st;
    if ((rc = sqlite3_prepare_v2(CONN(db), sql, -1, &st, NULL)) != SQLITE_OK)
        return cause(db, rc), TT_ERR_IO;
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? TT_OK : (cause(db, rc), TT_ERR_IO);
}

const tt__sql_backend tt__sql_sqlite = {
    .name = "sqlite",
    .dialect = TT__SQL_SQLITE,
    .open = lite_open,
    .close = lite_close,
    .abandon = lite_abandon,
    .prepare = lite_prepare,
    .finalize = lite_finalize,
    .reset = lite_reset,
    .bind_null = lite_bind_null,
    .bind_int64 = lite_bind_int64,
    .bind_double = lite_bind_double,
    .bind_text = lite_bind_text,
    .bind_blob = lite_bind_blob,
    .step = lite_step,
    .column_null = lite_null,
    .column_int64 = lite_int64,
    .column_double = lite_double,
    .column_text = lite_text,
    .column_blob = lite_blob,
    .changes = lite_changes,
    .exec = lite_exec,
    .begin = lite_begin,
    .schema_read = lite_schema_read,
    .schema_lock = lite_schema_lock,
    .schema_unlock = lite_schema_unlock,
    .schema_write = lite_schema_write,
    .check = lite_check,
    .vacuum = lite_vacuum,
    .limit_size = lite_limit_size,
};
