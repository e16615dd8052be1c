/* The SQL interface: dispatch to the handle's backend, and the two spellings PostgreSQL needs. */
#include "db_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const tt__sql_backend *tt__sql_backend_for(const char *spec, const char **where)
{
    if (!strncmp(spec, "postgresql://", 13) || !strncmp(spec, "postgres://", 11)) {
        *where = spec;
        return &tt__sql_postgresql;
    }
    *where = !strncmp(spec, "sqlite:", 7) ? spec + 7 : spec;
    return &tt__sql_sqlite;
}

tt_status tt__db_owned(tt_db *db)
{
    /* A forked child shares the parent's socket (or file locks it does not hold): one byte of it
     * on the parent's connection, a libpq Terminate from its exit, or a SQLite checkpoint from
     * its close corrupts or ends the parent's session under it. */
    pid_t self = getpid();
    if (self == db->owner)
        return TT_OK;
    return tt__db_fail(db, TT_ERR_INVALID_ARG,
                       "the database handle of %s was opened by process %ld and is used in "
                       "process %ld, a fork of it: a child process opens a handle of its own",
                       db->where, (long)db->owner, (long)self);
}

tt_status tt__db_prepare(tt_db *db, const char *sql, tt__stmt **st)
{
    *st = NULL;
    tt_status s = tt__db_owned(db);
    if (s)
        return s;
    return db->be->prepare(db, sql, st) ? tt__db_failed(db, "preparing a query") : TT_OK;
}

void tt__stmt_finalize(tt__stmt *st)
{
    if (st)
        st->db->be->finalize(st);
}

void tt__stmt_reset(tt__stmt *st)
{
    st->db->be->reset(st);
}

void tt__stmt_bind_null(tt__stmt *st, int i)
{
    st->db->be->bind_null(st, i);
}

void tt__stmt_bind_int64(tt__stmt *st, int i, int64_t v)
{
    st->db->be->bind_int64(st, i, v);
}

void tt__stmt_bind_double(tt__stmt *st, int i, double v)
{
    st->db->be->bind_double(st, i, v);
}

void tt__stmt_bind_text(tt__stmt *st, int i, const char *v)
{
    if (v)
        st->db->be->bind_text(st, i, v);
    else
        st->db->be->bind_null(st, i);
}

void tt__stmt_bind_blob(tt__stmt *st, int i, const void *p, size_t n)
{
    st->db->be->bind_blob(st, i, p, n);
}

int tt__stmt_step(tt__stmt *st)
{
    return st->db->be->step(st);
}

bool tt__stmt_null(tt__stmt *st, int col)
{
    return st->db->be->column_null(st, col);
}

int64_t tt__stmt_int64(tt__stmt *st, int col)
{
    return st->db->be->column_int64(st, col);
}

double tt__stmt_double(tt__stmt *st, int col)
{
    return st->db->be->column_double(st, col);
}

const char *tt__stmt_text(tt__stmt *st, int col)
{
    return st->db->be->column_text(st, col);
}

char *tt__stmt_text_dup(tt__stmt *st, int col)
{
    const char *t = st->db->be->column_text(st, col);
    return t ? strdup(t) : NULL;
}

const void *tt__stmt_blob(tt__stmt *st, int col, size_t *len)
{
    return st->db->be->column_blob(st, col, len);
}

int64_t tt__stmt_changes(tt__stmt *st)
{
    return st->db->be->changes(st);
}

tt_status tt__stmt_run(tt__stmt *st, const char *what, int64_t *out)
{
    int rc = tt__stmt_step(st);
    if (out)
        *out = rc == TT__STEP_ROW ? tt__stmt_int64(st, 0) : 0;
    return rc == TT__STEP_ERROR ? tt__db_failed(st->db, what) : TT_OK;
}

tt_status tt__db_exec(tt_db *db, const char *sql)
{
    tt_status s = tt__db_owned(db);
    if (s)
        return s;
    return db->be->exec(db, sql) ? tt__db_failed(db, "executing") : TT_OK;
}

tt_status tt__db_begin(tt_db *db)
{
    tt_status s = tt__db_owned(db);
    if (s)
        return s;
    return db->be->begin(db) ? tt__db_failed(db, "starting a transaction") : TT_OK;
}

tt_status tt__db_commit(tt_db *db)
{
    tt_status s = tt__db_owned(db);
    if (s)
        return s;
    return db->be->exec(db, "COMMIT") ? tt__db_failed(db, "committing") : TT_OK;
}

void tt__db_set_cause(tt_db *db, tt_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->cause_msg, sizeof(db->cause_msg), fmt, ap);
    va_end(ap);
    db->cause = s;
}

tt_status tt__db_failed(tt_db *db, const char *what)
{
    tt_status s = db->cause ? db->cause : TT_ERR_IO;
    return tt__db_fail(db, s, "%s: %s", what, db->cause_msg[0] ? db->cause_msg : "failed");
}

bool tt__db_retry(tt_db *db, int attempt, double started)
{
    if (db->conflict) {
        db->conflict = false;
        return attempt < 10;
    }
    if (!db->be->lost || !db->be->lost(db) || db->owner != getpid())
        return false;
    /* 0.1 s, doubling to 5 s between tries, until the patience is spent.  Each failed try says
     * why (the server refusing, authentication, too many clients), not only the first loss. */
    tt_log(TT_LOG_WARN, "database %s: %s", db->where, db->errmsg);
    bool tried = false;
    for (double wait = 0.1; tt_clock_monotonic() - started < db->patience_s; wait *= 2) {
        if (wait > 5)
            wait = 5;
        tt_log(TT_LOG_WARN, "database %s: reconnecting in %.1f s", db->where, wait);
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
        if (!db->be->reconnect(db)) {
            tt_log(TT_LOG_WARN, "database %s: reconnected", db->where);
            return true;
        }
        tt_log(TT_LOG_WARN, "database %s: %s", db->where, db->cause_msg);
        tried = true;
    }
    if (tried) {
        char first[sizeof(db->errmsg)];
        memcpy(first, db->errmsg, sizeof(first));
        tt__db_fail(db, TT_ERR_IO, "%.200s; gave up reconnecting after %.0f s: %.200s", first,
                    db->patience_s, db->cause_msg);
    }
    return false;
}

/* ---- PostgreSQL's spellings ---- */

char *tt__sql_numbered_params(const char *sql)
{
    tt_strbuf sb = {0};
    int next = 1;
    for (const char *p = sql; *p; p++) {
        if (*p == '\'') {
            /* A literal, '' inside it included, copied as it is. */
            const char *e = p + 1;
            while (*e && !(*e == '\'' && e[1] != '\''))
                e += *e == '\'' ? 2 : 1;
            tt_strbuf_appendn(&sb, p, (size_t)(e - p + (*e ? 1 : 0)));
            if (!*e)
                break;
            p = e;
        } else if (*p == '?') {
            if (isdigit((unsigned char)p[1])) {
                char *end;
                long n = strtol(p + 1, &end, 10);
                tt_strbuf_printf(&sb, "$%ld", n);
                if (n >= next)
                    next = (int)n + 1;
                p = end - 1;
            } else {
                tt_strbuf_printf(&sb, "$%d", next++);
            }
        } else {
            tt_strbuf_appendn(&sb, p, 1);
        }
    }
    return tt_strbuf_take(&sb);
}

/* Whole-word, case-sensitive match of `word` at p. */
static bool word_at(const char *start, const char *p, const char *word)
{
    size_t n = strlen(word);
    return strncmp(p, word, n) == 0 &&
           (p == start || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
           !(isalnum((unsigned char)p[n]) || p[n] == '_');
}

char *tt__sql_ddl_postgresql(const char *ddl)
{
    static const struct {
        const char *from, *to;
    } words[] = {
        {"INTEGER PRIMARY KEY", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"},
        {"INTEGER", "BIGINT"},
        {"REAL", "DOUBLE PRECISION"},
        {"BLOB", "BYTEA"},
    };
    tt_strbuf sb = {0};
    for (const char *p = ddl; *p;) {
        if (*p == '\'') {
            const char *e = strchr(p + 1, '\'');
            size_t n = e ? (size_t)(e - p + 1) : strlen(p);
            tt_strbuf_appendn(&sb, p, n);
            p += n;
            continue;
        }
        size_t w = 0;
        for (; w < TT_ARRAY_LEN(words); w++)
            if (word_at(ddl, p, words[w].from))
                break;
        if (w < TT_ARRAY_LEN(words)) {
            tt_strbuf_append(&sb, words[w].to);
            p += strlen(words[w].from);
        } else {
            tt_strbuf_appendn(&sb, p++, 1);
        }
    }
    return tt_strbuf_take(&sb);
}
