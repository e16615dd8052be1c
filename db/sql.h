/* Private to db/: the one SQL interface store.c and schema.c speak, and the two backends behind
 * it (sql_sqlite.c, sql_pg.c).
 *
 * Queries are written once, in the SQL both engines accept (docs/database.md, "Portable SQL"):
 * parameters as `?` or `?N`, `INSERT ... ON CONFLICT ... DO NOTHING` (or `DO UPDATE SET`, with
 * `excluded.` and the table's name qualifying its columns), `RETURNING id`, `IS
 * DISTINCT FROM`, explicit CASTs where a parameter's type would be ambiguous.  What differs
 * (placeholders, column types in DDL, transactions, the schema-version store, maintenance) is
 * in the backend's file and nowhere else.
 *
 * Statements are prepared once per connection and cached by their text, so preparing the same
 * query in a loop costs a lookup.  Text results are copied by neither backend: a column's text
 * is valid until the next step, reset or finalize. */
#ifndef TT_DB_SQL_H
#define TT_DB_SQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

/* The most parameters a statement may bind (PostgreSQL's backend keeps them in fixed arrays). */
#define TT__SQL_MAX_PARAMS 32

typedef struct tt_db tt_db;

/* A prepared statement; each backend's begins with this. */
typedef struct tt__stmt {
    tt_db *db;
} tt__stmt;

typedef enum { TT__SQL_SQLITE, TT__SQL_POSTGRESQL } tt__sql_dialect;

/* What tt__stmt_step found. */
enum { TT__STEP_ERROR = -1, TT__STEP_DONE = 0, TT__STEP_ROW = 1 };

typedef struct tt__sql_backend {
    const char *name; /* "sqlite", "postgresql" */
    tt__sql_dialect dialect;
    /* Connects to db->path (a file, or a libpq URI) and sets db->conn. */
    tt_status (*open)(tt_db *db);
    void (*close)(tt_db *db);
    /* In a forked child that inherited the handle: frees what can be freed without sending a
     * byte to the server or touching the file (the connection is the parent's). */
    void (*abandon)(tt_db *db);
    /* Lost the server (PostgreSQL): true when the connection is gone, and reconnect() tries once
     * to make it again.  NULL for SQLite, which cannot lose a file. */
    bool (*lost)(tt_db *db);
    tt_status (*reconnect)(tt_db *db);
    tt_status (*prepare)(tt_db *db, const char *sql, tt__stmt **st);
    void (*finalize)(tt__stmt *st);
    void (*reset)(tt__stmt *st);
    void (*bind_null)(tt__stmt *st, int i);
    void (*bind_int64)(tt__stmt *st, int i, int64_t v);
    void (*bind_double)(tt__stmt *st, int i, double v);
    void (*bind_text)(tt__stmt *st, int i, const char *v);
    void (*bind_blob)(tt__stmt *st, int i, const void *p, size_t n);
    int (*step)(tt__stmt *st);
    bool (*column_null)(tt__stmt *st, int col);
    int64_t (*column_int64)(tt__stmt *st, int col);
    double (*column_double)(tt__stmt *st, int col);
    const char *(*column_text)(tt__stmt *st, int col);
    const void *(*column_blob)(tt__stmt *st, int col, size_t *len);
    int64_t (*changes)(tt__stmt *st);
    /* Statements without parameters or results, several separated by ';'. */
    tt_status (*exec)(tt_db *db, const char *sql);
    /* Starts a write transaction (SQLite takes the write lock at once, as a batch must). */
    tt_status (*begin)(tt_db *db);
    /* Schema version and owner: *version 0 and *foreign false for an empty database; *foreign
     * when it holds tables of another application. */
    tt_status (*schema_read)(tt_db *db, int *version, bool *foreign);
    /* Before a migration's transaction, outside any: waits for and takes the migrators' lock,
     * so that processes starting together migrate once (PostgreSQL: a session advisory lock,
     * taken in a statement of its own so that the transaction after it reads the catalogs
     * afresh), and lets a read-only handle write the schema.  schema_unlock undoes both; it is
     * called whatever the migration's outcome (a lost connection has released the lock). */
    tt_status (*schema_lock)(tt_db *db);
    void (*schema_unlock)(tt_db *db);
    /* Inside the migration's transaction: records the new version. */
    tt_status (*schema_write)(tt_db *db, int version);
    /* Maintenance (tvm-db check / vacuum, --db-max-mb). */
    tt_status (*check)(tt_db *db);
    tt_status (*vacuum)(tt_db *db);
    tt_status (*limit_size)(tt_db *db, int64_t max_bytes);
} tt__sql_backend;

extern const tt__sql_backend tt__sql_sqlite;
extern const tt__sql_backend tt__sql_postgresql;

/* The backend a --db value names: postgresql:// or postgres:// URIs, else a SQLite path
 * (optionally "sqlite:PATH"); *where gets the path or URI. */
const tt__sql_backend *tt__sql_backend_for(const char *spec, const char **where);

/* ---- statements, through the handle's backend ---- */

tt_status tt__db_prepare(tt_db *db, const char *sql, tt__stmt **st);
void tt__stmt_finalize(tt__stmt *st);
/* Ready to run again with new bindings (all cleared). */
void tt__stmt_reset(tt__stmt *st);
/* Parameters from 1; a NULL text binds NULL. */
void tt__stmt_bind_null(tt__stmt *st, int i);
void tt__stmt_bind_int64(tt__stmt *st, int i, int64_t v);
void tt__stmt_bind_double(tt__stmt *st, int i, double v);
void tt__stmt_bind_text(tt__stmt *st, int i, const char *v);
void tt__stmt_bind_blob(tt__stmt *st, int i, const void *p, size_t n);
/* Runs the statement (first call) or moves to the next row: TT__STEP_ROW, TT__STEP_DONE, or
 * TT__STEP_ERROR with the backend's reason kept for tt__db_failed. */
int tt__stmt_step(tt__stmt *st);
/* Columns from 0. */
bool tt__stmt_null(tt__stmt *st, int col);
int64_t tt__stmt_int64(tt__stmt *st, int col);
double tt__stmt_double(tt__stmt *st, int col);
const char *tt__stmt_text(tt__stmt *st, int col); /* NULL for NULL */
char *tt__stmt_text_dup(tt__stmt *st, int col);   /* malloc'ed copy, NULL for NULL */
const void *tt__stmt_blob(tt__stmt *st, int col, size_t *len);
/* Rows inserted, updated or deleted by the statement's last run. */
int64_t tt__stmt_changes(tt__stmt *st);
/* Steps a statement that returns nothing, or one row whose first column is an integer
 * (*out, optional; 0 when there is no row). */
tt_status tt__stmt_run(tt__stmt *st, const char *what, int64_t *out);

tt_status tt__db_exec(tt_db *db, const char *sql);
tt_status tt__db_begin(tt_db *db);
tt_status tt__db_commit(tt_db *db);

/* The backend's last failure as the handle's error, "what: reason", with its status (disk
 * full, locked, read-only, lost connection, constraint, ...). */
tt_status tt__db_failed(tt_db *db, const char *what);
/* For backends: records the reason of a failure for tt__db_failed. */
void tt__db_set_cause(tt_db *db, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* PostgreSQL's spelling of a query written with `?`/`?N`: `$N` (quoted text left alone). */
char *tt__sql_numbered_params(const char *sql);
/* PostgreSQL's spelling of the schema's DDL: 64-bit identity keys and integers, DOUBLE PRECISION
 * for REAL (PostgreSQL's REAL is 4 bytes), BYTEA for BLOB. */
char *tt__sql_ddl_postgresql(const char *ddl);

#endif
