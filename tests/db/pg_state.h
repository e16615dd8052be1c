/* The db tests' PostgreSQL server (tests/db/pg_server.sh): where its state file says it is, and
 * SQL run on it behind the library's back.  Include after cmocka.h. */
#ifndef TT_TESTS_DB_PG_STATE_H
#define TT_TESTS_DB_PG_STATE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>

/* The server's URI up to its database name ("postgresql://tvmtune@127.0.0.1:PORT/"), from line 2
 * of the state file, into base[512].  When there is none, says so and returns the test's exit
 * status: 77 (skipped) locally, 1 under CI=true; 0 when base was filled. */
static inline int tt_test_pg_base(const char *prog, const char *state, char base[512])
{
    FILE *f = fopen(state, "r");
    char line[500];
    bool ok = f && fgets(line, sizeof(line), f) && fgets(line, sizeof(line), f);
    if (f)
        fclose(f);
    char *slash = ok ? strrchr(line, '/') : NULL;
    if (!slash) {
        fprintf(stderr, "%s: no PostgreSQL server described in %s\n", prog, state);
        return getenv("CI") && !strcmp(getenv("CI"), "true") ? 1 : 77;
    }
    snprintf(base, 512, "%.*s", (int)(slash - line + 1), line);
    return 0;
}

static inline void tt_test_pg_quiet(void *arg, const char *message)
{
    (void)arg, (void)message; /* "database ... does not exist, skipping" */
}

/* Runs `sql` (one statement: DROP/CREATE DATABASE cannot share a transaction) on `database` of
 * the server whose URI up to the database name is `base`, as its superuser; fails the test on
 * error. */
static inline void tt_test_pg_sql(const char *base, const char *database, const char *sql)
{
    char uri[1200];
    snprintf(uri, sizeof(uri), "%s%s", base, database);
    PGconn *c = PQconnectdb(uri);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("%s: %s", uri, PQerrorMessage(c));
    PQsetNoticeProcessor(c, tt_test_pg_quiet, NULL);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
}

#endif
