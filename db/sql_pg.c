/* The PostgreSQL backend: one libpq connection per handle, statements prepared on the server once
 * per connection, parameters and results as text (doubles round-trip exactly: %.17g out,
 * PostgreSQL's shortest exact form back), BLOBs as binary BYTEA parameters. */
#include "db_int.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PARAMS TT__SQL_MAX_PARAMS
/* 'TVTT', as SQLite's application_id: the advisory lock migrators take */
#define MIGRATION_LOCK 0x54565454

typedef struct {
    char *sql; /* as the caller wrote it */
    char name[24];
    int nparams;
} prepared;

typedef struct {
    PGconn *c;
    prepared *prep;
    size_t nprep;
    int next_name;
} pg_conn;

typedef struct {
    tt__stmt base;
    size_t prep; /* index in the connection's cache, which moves as it grows */
    char *values[MAX_PARAMS];
    int lengths[MAX_PARAMS], formats[MAX_PARAMS];
    PGresult *res;
    int row, nrows;
    int64_t changes;
    unsigned char *blob; /* the unescaped BYTEA of the last column_blob */
} pg_stmt;

#define PG(db) ((pg_conn *)(db)->conn)

static void no_notices(void *arg, const char *message)
{
    (void)arg, (void)message; /* "relation exists, skipping" and the like are not for users */
}

/* The server's reason on one line: libpq's messages end in a newline and may span several. */
static void set_cause(tt_db *db, tt_status s, const char *what, const char *msg)
{
    char line[sizeof(db->cause_msg)];
    size_t n = 0;
    for (const char *p = msg; *p && n + 1 < sizeof(line); p++) {
        bool space = *p == '\n' || *p == '\t' || *p == ' ';
        if (!space)
            line[n++] = *p;
        else if (n > 0 && line[n - 1] != ' ')
            line[n++] = ' ';
    }
    while (n > 0 && line[n - 1] == ' ')
        n--;
    line[n] = 0;
    tt__db_set_cause(db, s, "%s%s", what, line);
}

/* Keeps the reason of a failed result, with the status it means. */
static void result_cause(tt_db *db, const PGresult *res)
{
    PGconn *c = PG(db)->c;
    if (PQstatus(c) == CONNECTION_BAD) {
        set_cause(db, TT_ERR_IO, "lost the connection to the database server: ", PQerrorMessage(c));
        return;
    }
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(c);
    if (!state)
        state = "";
    /* deadlock_detected, serialization_failure: the transaction can simply run again */
    db->conflict = !strcmp(state, "40P01") || !strcmp(state, "40001");
    if (!strcmp(state, "25006"))
        set_cause(db, TT_ERR_IO, "the database is read-only: ", msg);
    else if (!strcmp(state, "42501"))
        set_cause(db, TT_ERR_IO,
                  "permission denied (a read-only role can query, not write): ", msg);
    else if (!strcmp(state, "53100"))
        set_cause(db, TT_ERR_IO,
                  "the server's disk is full; nothing of this operation was stored: ", msg);
    else if (!strncmp(state, "23", 2))
        set_cause(db, TT_ERR_INVALID_ARG, "", msg);
    else if (!strcmp(state, "53200"))
        set_cause(db, TT_ERR_NOMEM, "the server is out of memory: ", msg);
    else
        set_cause(db, TT_ERR_IO, "", msg);
}

static tt_status pg_exec(tt_db *db, const char *sql)
{
    PGresult *res = PQexec(PG(db)->c, sql);
    ExecStatusType st = PQresultStatus(res);
    tt_status s = TT_OK;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        result_cause(db, res);
        s = TT_ERR_IO;
    }
    PQclear(res);
    return s;
}

/* What every session sets: quiet notices, and read-only sessions for read-only handles (a
 * build's queries never write, whatever the role could do). */
static tt_status session_setup(tt_db *db)
{
    PQsetNoticeProcessor(PG(db)->c, no_notices, NULL);
    return pg_exec(db, db->readonly ? "SET default_transaction_read_only = on" : "SELECT 1");
}

static void forget_prepared(pg_conn *p)
{
    for (size_t i = 0; i < p->nprep; i++)
        free(p->prep[i].sql);
    free(p->prep);
    p->prep = NULL;
    p->nprep = 0;
}

/* A new session on a new connection (PG(db)->c, replacing nothing): the one way both the first
 * connection and every reconnection are made, so no state of a lost session (its socket, its SSL
 * state, its prepared statements) is carried into the next. */
static tt_status connect_server(tt_db *db, const char *failing)
{
    pg_conn *p = PG(db);
    static const char *const keys[] = {"dbname", "fallback_application_name", "connect_timeout",
                                       NULL};
    const char *values[] = {db->where, "tvm-tune", "10", NULL};
    p->c = PQconnectdbParams(keys, values, 1);
    if (!p->c) {
        tt__db_set_cause(db, TT_ERR_NOMEM, "out of memory");
        return TT_ERR_NOMEM;
    }
    if (PQstatus(p->c) != CONNECTION_OK) {
        set_cause(db, TT_ERR_IO, failing, PQerrorMessage(p->c));
        return TT_ERR_IO;
    }
    db->reached = true;
    return session_setup(db);
}

static tt_status pg_open(tt_db *db)
{
    /* A password in the URI would end up in argv, shell histories and logs. */
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(db->where, &perr);
    if (!opts) {
        tt__db_set_cause(db, TT_ERR_INVALID_ARG, "not a PostgreSQL connection URI: %s",
                         perr ? perr : "out of memory");
        PQfreemem(perr);
        return TT_ERR_INVALID_ARG;
    }
    bool password = false;
    for (PQconninfoOption *o = opts; o->keyword; o++)
        password |= !strcmp(o->keyword, "password") && o->val && o->val[0];
    PQconninfoFree(opts);
    if (password) {
        tt__db_set_cause(db, TT_ERR_INVALID_ARG,
                         "the --db URI carries a password; give it in ~/.pgpass, PGPASSFILE or "
                         "PGPASSWORD instead (docs/database.md)");
        return TT_ERR_INVALID_ARG;
    }
    pg_conn *p = calloc(1, sizeof(*p));
    if (!p) {
        tt__db_set_cause(db, TT_ERR_NOMEM, "out of memory");
        return TT_ERR_NOMEM;
    }
    db->conn = p;
    return connect_server(db, "cannot connect to the database server: ");
}

static void pg_close(tt_db *db)
{
    pg_conn *p = PG(db);
    if (!p)
        return;
    forget_prepared(p);
    PQfinish(p->c);
    free(p);
    db->conn = NULL;
}

static void pg_abandon(tt_db *db)
{
    pg_conn *p = PG(db);
    if (!p)
        return;
    /* PQfinish sends a Terminate message, which would end the parent's session: the socket is
     * closed first (this child's copy of it), so the message goes nowhere. */
    if (PQsocket(p->c) >= 0)
        close(PQsocket(p->c));
    pg_close(db);
}

static bool pg_lost(tt_db *db)
{
    return PG(db) && PQstatus(PG(db)->c) == CONNECTION_BAD;
}

static tt_status pg_reconnect(tt_db *db)
{
    pg_conn *p = PG(db);
    forget_prepared(p); /* they lived in the old session */
    PQfinish(p->c);
    p->c = NULL;
    return connect_server(db, "cannot reconnect to the database server: ");
}

static tt_status pg_prepare(tt_db *db, const char *sql, tt__stmt **out)
{
    pg_conn *p = PG(db);
    const prepared *found = NULL;
    for (size_t i = 0; i < p->nprep && !found; i++)
        if (!strcmp(p->prep[i].sql, sql))
            found = &p->prep[i];
    if (!found) {
        char *numbered = tt__sql_numbered_params(sql);
        prepared *grown = realloc(p->prep, (p->nprep + 1) * sizeof(prepared));
        if (!numbered || !grown) {
            free(numbered);
            if (grown)
                p->prep = grown;
            tt__db_set_cause(db, TT_ERR_NOMEM, "out of memory");
            return TT_ERR_NOMEM;
        }
        p->prep = grown;
        prepared *np = &p->prep[p->nprep];
        memset(np, 0, sizeof(*np));
        snprintf(np->name, sizeof(np->name), "tt%d", p->next_name++);
        for (const char *d = strchr(numbered, '$'); d; d = strchr(d + 1, '$'))
            if (atoi(d + 1) > np->nparams)
                np->nparams = atoi(d + 1);
        PGresult *res = PQprepare(p->c, np->name, numbered, 0, NULL);
        free(numbered);
        bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        if (!ok)
            result_cause(db, res);
        PQclear(res);
        if (!ok)
            return TT_ERR_IO;
        if (np->nparams > MAX_PARAMS || !(np->sql = strdup(sql))) {
            tt__db_set_cause(db, TT_ERR_INTERNAL, "a query with %d parameters", np->nparams);
            return TT_ERR_INTERNAL;
        }
        found = &p->prep[p->nprep++];
    }
    pg_stmt *st = calloc(1, sizeof(*st));
    if (!st) {
        tt__db_set_cause(db, TT_ERR_NOMEM, "out of memory");
        return TT_ERR_NOMEM;
    }
    st->base.db = db;
    st->prep = (size_t)(found - p->prep);
    *out = &st->base;
    return TT_OK;
}

static void clear_params(pg_stmt *st)
{
    for (int i = 0; i < MAX_PARAMS; i++) {
        free(st->values[i]);
        st->values[i] = NULL;
        st->lengths[i] = st->formats[i] = 0;
    }
}

static void pg_reset(tt__stmt *vst)
{
    pg_stmt *st = (pg_stmt *)vst;
    PQclear(st->res);
    st->res = NULL;
    PQfreemem(st->blob);
    st->blob = NULL;
    st->row = st->nrows = 0;
    clear_params(st);
}

static void pg_finalize(tt__stmt *vst)
{
    pg_reset(vst);
    free(vst);
}

static void set_param(tt__stmt *vst, int i, char *value, int len, int format)
{
    pg_stmt *st = (pg_stmt *)vst;
    if (i < 1 || i > MAX_PARAMS) {
        free(value);
        return;
    }
    free(st->values[i - 1]);
    st->values[i - 1] = value;
    st->lengths[i - 1] = len;
    st->formats[i - 1] = format;
}

static void pg_bind_null(tt__stmt *st, int i)
{
    set_param(st, i, NULL, 0, 0);
}

static void pg_bind_int64(tt__stmt *st, int i, int64_t v)
{
    char b[32];
    snprintf(b, sizeof(b), "%lld", (long long)v);
    set_param(st, i, strdup(b), 0, 0);
}

static void pg_bind_double(tt__stmt *st, int i, double v)
{
    char b[40];
    snprintf(b, sizeof(b), "%.17g", v);
    set_param(st, i, strdup(b), 0, 0);
}

static void pg_bind_text(tt__stmt *st, int i, const char *v)
{
    set_param(st, i, strdup(v), 0, 0);
}

static void pg_bind_blob(tt__stmt *st, int i, const void *p, size_t n)
{
    char *copy = malloc(n ? n : 1);
    if (copy && n)
        memcpy(copy, p, n);
    set_param(st, i, copy, (int)n, 1);
}

static int pg_step(tt__stmt *vst)
{
    pg_stmt *st = (pg_stmt *)vst;
    tt_db *db = vst->db;
    if (!st->res) {
        if (st->prep >= PG(db)->nprep) {
            tt__db_set_cause(db, TT_ERR_INTERNAL, "a statement prepared before a reconnection");
            return TT__STEP_ERROR;
        }
        const prepared *p = &PG(db)->prep[st->prep];
        st->res = PQexecPrepared(PG(db)->c, p->name, p->nparams, (const char *const *)st->values,
                                 st->lengths, st->formats, 0);
        ExecStatusType es = PQresultStatus(st->res);
        if (es != PGRES_TUPLES_OK && es != PGRES_COMMAND_OK) {
            result_cause(db, st->res);
            PQclear(st->res);
            st->res = NULL;
            return TT__STEP_ERROR;
        }
        const char *n = PQcmdTuples(st->res);
        st->changes = n && *n ? strtoll(n, NULL, 10) : 0;
        st->nrows = es == PGRES_TUPLES_OK ? PQntuples(st->res) : 0;
        st->row = -1;
    }
    PQfreemem(st->blob);
    st->blob = NULL;
    return ++st->row < st->nrows ? TT__STEP_ROW : TT__STEP_DONE;
}

static bool pg_column_null(tt__stmt *vst, int col)
{
    pg_stmt *st = (pg_stmt *)vst;
    return PQgetisnull(st->res, st->row, col);
}

static const char *pg_column_text(tt__stmt *vst, int col)
{
    pg_stmt *st = (pg_stmt *)vst;
    return PQgetisnull(st->res, st->row, col) ? NULL : PQgetvalue(st->res, st->row, col);
}

static int64_t pg_column_int64(tt__stmt *st, int col)
{
    const char *t = pg_column_text(st, col);
    return t ? strtoll(t, NULL, 10) : 0;
}

static double pg_column_double(tt__stmt *st, int col)
{
    const char *t = pg_column_text(st, col);
    return t ? strtod(t, NULL) : 0;
}

static const void *pg_column_blob(tt__stmt *vst, int col, size_t *len)
{
    pg_stmt *st = (pg_stmt *)vst;
    const char *t = pg_column_text(vst, col);
    *len = 0;
    if (!t)
        return NULL;
    PQfreemem(st->blob);
    st->blob = PQunescapeBytea((const unsigned char *)t, len);
    return st->blob;
}

static int64_t pg_changes(tt__stmt *st)
{
    return ((pg_stmt *)st)->changes;
}

static tt_status pg_begin(tt_db *db)
{
    return pg_exec(db, "BEGIN");
}

/* One integer from a query without parameters. */
static tt_status query_int(tt_db *db, const char *sql, int64_t *out)
{
    PGresult *res = PQexec(PG(db)->c, sql);
    tt_status s = TT_OK;
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
        result_cause(db, res);
        s = TT_ERR_IO;
    } else {
        *out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    }
    PQclear(res);
    return s;
}

/* Tables of the current schema, from pg_class under the statement's snapshot.  (to_regclass
 * looks a name up in the backend's catalog cache, which keeps "no such table" until the backend
 * next reads the invalidations that another session's commit sent: after waiting for a
 * migrator's lock it still said tt_meta was missing, and the schema was created twice.) */
static tt_status pg_schema_read(tt_db *db, int *version, bool *foreign)
{
    int64_t meta = 0, tables = 0, v = 0;
    *version = 0;
    *foreign = false;
    /* One statement, one snapshot: asked in two, a migration committing between them showed its
     * tables without its tt_meta, another application's database. */
    PGresult *res =
        PQexec(PG(db)->c, "SELECT count(*) FILTER (WHERE c.relname = 'tt_meta'), count(*) FROM "
                          "pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = "
                          "c.relnamespace WHERE n.nspname = current_schema() AND c.relkind IN "
                          "('r', 'p', 'v', 'm', 'f')");
    tt_status s = TT_OK;
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
        result_cause(db, res);
        s = TT_ERR_IO;
    } else {
        meta = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        tables = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    }
    PQclear(res);
    if (!s && !meta) {
        *foreign = tables > 0;
        if (*foreign)
            tt__db_set_cause(db, TT_ERR_IO, "%lld tables and no tt_meta", (long long)tables);
        return s;
    }
    if (!s)
        s = query_int(db,
                      "SELECT coalesce(max(CASE WHEN application = 'tvm-tune' THEN schema_version "
                      "ELSE -1 END), 0) FROM tt_meta",
                      &v);
    if (!s && v < 0) {
        *foreign = true;
        tt__db_set_cause(db, TT_ERR_IO, "tt_meta names another application");
    }
    *version = (int)v;
    return s;
}

static tt_status pg_schema_lock(tt_db *db)
{
    /* A session lock, in a statement of its own: the migration's transaction then begins after
     * the wait, and a new transaction reads what the last migrator committed.  (A transaction
     * lock was taken inside the migration's transaction, whose catalog lookups could predate
     * the wait.)  A tvm-tune before this change took pg_advisory_xact_lock on the same key,
     * which conflicts with this one. */
    char sql[80];
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%d)", MIGRATION_LOCK);
    tt_status s = pg_exec(db, sql);
    /* A read-only handle migrates too: the schema is the program's, the records stay as they
     * are, and processes of both kinds start together against a new database. */
    if (!s && db->readonly)
        s = pg_exec(db, "SET default_transaction_read_only = off");
    return s;
}

static void pg_schema_unlock(tt_db *db)
{
    if (pg_lost(db))
        return; /* the server released the lock with the session */
    char sql[80];
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%d)", MIGRATION_LOCK);
    pg_exec(db, sql);
    if (db->readonly)
        pg_exec(db, "SET default_transaction_read_only = on");
}

static tt_status pg_schema_write(tt_db *db, int version)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS tt_meta (application TEXT NOT NULL, "
             "schema_version INTEGER NOT NULL); DELETE FROM tt_meta; "
             "INSERT INTO tt_meta VALUES ('tvm-tune', %d)",
             version);
    return pg_exec(db, sql);
}

static tt_status pg_check(tt_db *db)
{
    /* The server keeps its pages whole (WAL, checksums); what can be wrong from here are the
     * references between our tables. */
    int64_t orphans = 0;
    tt_status s = query_int(db,
                            "SELECT (SELECT count(*) FROM records r LEFT JOIN workloads w ON "
                            "w.id = r.workload_id WHERE w.id IS NULL) + (SELECT count(*) FROM "
                            "records r LEFT JOIN targets t ON t.id = r.target_id WHERE t.id IS "
                            "NULL)",
                            &orphans);
    if (!s && orphans) {
        tt__db_set_cause(db, TT_ERR_IO, "%lld records refer to missing workloads or targets",
                         (long long)orphans);
        s = TT_ERR_IO;
    }
    return s;
}

static tt_status pg_vacuum(tt_db *db)
{
    tt_status s = pg_check(db);
    return s ? s : pg_exec(db, "VACUUM ANALYZE");
}

static tt_status pg_limit_size(tt_db *db, int64_t max_bytes)
{
    if (max_bytes <= 0)
        return TT_OK;
    tt__db_set_cause(db, TT_ERR_UNSUPPORTED,
                     "a size cap is for SQLite files; a PostgreSQL database's room is the "
                     "server's (its disk, or a quota the operator sets)");
    return TT_ERR_UNSUPPORTED;
}

const tt__sql_backend tt__sql_postgresql = {
    .name = "postgresql",
    .dialect = TT__SQL_POSTGRESQL,
    .open = pg_open,
    .close = pg_close,
    .abandon = pg_abandon,
    .lost = pg_lost,
    .reconnect = pg_reconnect,
    .prepare = pg_prepare,
    .finalize = pg_finalize,
    .reset = pg_reset,
    .bind_null = pg_bind_null,
    .bind_int64 = pg_bind_int64,
    .bind_double = pg_bind_double,
    .bind_text = pg_bind_text,
    .bind_blob = pg_bind_blob,
    .step = pg_step,
    .column_null = pg_column_null,
    .column_int64 = pg_column_int64,
    .column_double = pg_column_double,
    .column_text = pg_column_text,
    .column_blob = pg_column_blob,
    .changes = pg_changes,
    .exec = pg_exec,
    .begin = pg_begin,
    .schema_read = pg_schema_read,
    .schema_lock = pg_schema_lock,
    .schema_unlock = pg_schema_unlock,
    .schema_write = pg_schema_write,
    .check = pg_check,
    .vacuum = pg_vacuum,
    .limit_size = pg_limit_size,
};
