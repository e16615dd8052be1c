/* db/: schema and migrations, bad files, batches, concurrency, crashes, full disk, queries.
 *
 * `test_store` runs them on SQLite files in a temporary directory; `test_store --postgresql STATE
 * SCRIPT` on databases of the private server tests/db/pg_server.sh (SCRIPT) started and described
 * in STATE, plus what only a server has: roles, passwords, concurrent writers, restarts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sqlite3.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "db/db.h"
#include "db/pg_state.h"

static char dir[256];
/* PostgreSQL: the server's URI up to the database name, the state file and the script */
static char pg_base[512];
static const char *pg_state, *pg_script;
static bool on_pg;

static int make_dir(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/tt-test-db-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs SQL on a PostgreSQL database of the test server, as its superuser. */
static void pg_sql(const char *database, const char *sql)
{
    tt_test_pg_sql(pg_base, database, sql);
}

/* The server's database for the test's `name`: "best.db" -> t_best_db. */
static void pg_database(const char *name, char db[64])
{
    size_t n = 0;
    db[n++] = 't';
    db[n++] = '_';
    for (size_t i = 0; name[i] && n < 63; i++)
        db[n++] = (char)(isalnum((unsigned char)name[i]) ? name[i] : '_');
    db[n] = 0;
}

/* The database a test calls `name`: a file, or a database of the server made fresh on first
 * use in this process ("best.db" -> t_best_db). */
static const char *path_of(const char *name)
{
    static char p[640];
    if (!on_pg) {
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        return p;
    }
    static char made[64][64];
    static int nmade;
    char db[64];
    pg_database(name, db);
    bool fresh = true;
    for (int i = 0; i < nmade; i++)
        fresh &= strcmp(made[i], db) != 0;
    if (fresh && nmade < 64) {
        char sql[200];
        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
        pg_sql("tuning", sql);
        snprintf(sql, sizeof(sql), "CREATE DATABASE %s", db);
        pg_sql("tuning", sql);
        snprintf(made[nmade++], sizeof(made[0]), "%s", db);
    }
    snprintf(p, sizeof(p), "%s%s", pg_base, db);
    return p;
}

static tt_db *open_or_fail(const char *name)
{
    tt_db *db;
    tt_errbuf err = {{0}};
    if (tt_db_open(path_of(name), 0, &db, &err))
        fail_msg("open %s: %s", name, err.msg);
    return db;
}

static const double one_cost[1] = {1e-3};

static tt_db_record rec(const char *wl, const char *target, const char *device, const char *config,
                        const double *costs, int n, double ts)
{
    tt_db_record r = {0};
    r.workload = wl;
    r.target = target;
    r.device = device;
    r.config = config;
    r.config_kind = TT_CONFIG_STEPS;
    r.costs = costs;
    r.ncosts = n;
    r.timestamp = ts;
    return r;
}

/* SQL behind the library's back: `sql` on a SQLite file, `pg` on the server's database. */
static void raw_sql2(const char *name, const char *sql, const char *pg)
{
    if (on_pg) {
        path_of(name);
        char db[64];
        pg_database(name, db);
        pg_sql(db, pg);
        return;
    }
    sqlite3 *s;
    assert_int_equal(sqlite3_open(path_of(name), &s), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(s, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    sqlite3_close(s);
}

static void raw_sql(const char *name, const char *sql)
{
    raw_sql2(name, sql, sql);
}

static void new_database_gets_the_current_schema(void **state)
{
    tt_db *db = open_or_fail("new.db");
    assert_int_equal(tt_db_user_version(db), TT_DB_SCHEMA_VERSION);
    assert_int_equal(tt_db_check(db), TT_OK);
    tt_db_close(db);
    /* Reopening is a no-op. */
    db = open_or_fail("new.db");
    assert_int_equal(tt_db_user_version(db), TT_DB_SCHEMA_VERSION);
    tt_db_close(db);
}

static void older_database_is_migrated(void **state)
{
    /* Version 0: our application id, no tables yet (a file created by an interrupted first open).
     */
    raw_sql2("old.db", "PRAGMA application_id = 1414943828; PRAGMA user_version = 0;",
             "CREATE TABLE tt_meta (application TEXT NOT NULL, schema_version INTEGER NOT NULL);"
             "INSERT INTO tt_meta VALUES ('tvm-tune', 0)");
    tt_db *db = open_or_fail("old.db");
    assert_int_equal(tt_db_user_version(db), TT_DB_SCHEMA_VERSION);
    tt_db_record r = rec("matmul:M=4,N=4,K=4", "llvm", NULL, "[]", one_cost, 1, 1.0);
    assert_int_equal(tt_db_insert(db, &r, 1, NULL), TT_OK);
    tt_db_close(db);
}

static void expect_open_error(const char *name, tt_status want, const char *fragment)
{
    tt_db *db = (tt_db *)1;
    tt_errbuf err = {{0}};
    tt_status s = tt_db_open(path_of(name), 0, &db, &err);
    if (s != want)
        fail_msg("%s: expected %s, got %s (%s)", name, tt_status_name(want), tt_status_name(s),
                 err.msg);
    assert_null(db);
    if (!strstr(err.msg, fragment))
        fail_msg("%s: '%s' lacks '%s'", name, err.msg, fragment);
}

static void newer_database_is_refused(void **state)
{
    tt_db *db = open_or_fail("newer.db");
    tt_db_close(db);
    raw_sql2("newer.db", "PRAGMA user_version = 99;", "UPDATE tt_meta SET schema_version = 99");
    expect_open_error("newer.db", TT_ERR_UNSUPPORTED, "newer than this tvm-tune understands");
}

static void foreign_schema_is_refused(void **state)
{
    raw_sql("foreign.db", "CREATE TABLE customers(id INTEGER, name TEXT);");
    expect_open_error("foreign.db", TT_ERR_IO, "another application's tables");
}

static void garbage_file_is_not_a_database(void **state)
{
    FILE *f = fopen(path_of("garbage.db"), "w");
    for (int i = 0; i < 1000; i++)
        fputs("this is not a database ", f);
    fclose(f);
    expect_open_error("garbage.db", TT_ERR_IO, "not a valid tvm-tune database");
}

static void truncated_database_gives_a_clear_error(void **state)
{
    tt_db *db = open_or_fail("trunc.db");
    static double costs[1000];
    tt_db_record r[200];
    char cfg[200][32];
    for (int i = 0; i < 200; i++) {
        snprintf(cfg[i], sizeof(cfg[i]), "[[\"CI\", %d]]", i);
        costs[i] = 1e-3 * (i + 1);
        r[i] = rec("matmul:M=64,N=64,K=64", "llvm", NULL, cfg[i], &costs[i], 1, 1.0 + i);
    }
    assert_int_equal(tt_db_insert(db, r, 200, NULL), TT_OK);
    assert_int_equal(tt_db_vacuum(db), TT_OK);
    tt_db_close(db);
    FILE *f = fopen(path_of("trunc.db"), "r+");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    assert_int_equal(ftruncate(fileno(f), size / 2), 0);
    fclose(f);
    tt_errbuf err = {{0}};
    tt_status s = tt_db_open(path_of("trunc.db"), TT_DB_READONLY, &db, &err);
    if (s == TT_OK) {
        /* The header survived: queries must report the damage, not crash. */
        assert_int_equal(tt_db_check(db), TT_ERR_IO);
        assert_non_null(strstr(tt_db_errmsg(db), "damaged"));
        tt_db_close(db);
    } else {
        assert_int_equal(s, TT_ERR_IO);
    }
}

static void batch_is_all_or_nothing(void **state)
{
    tt_db *db = open_or_fail("batch.db");
    tt_db_record good[2] = {
        rec("matmul:M=4,N=4,K=4", "llvm", NULL, "[[\"CI\", 0]]", one_cost, 1, 1),
        rec("matmul:M=4,N=4,K=4", "llvm", NULL, "[[\"CI\", 1]]", one_cost, 1, 2)};
    assert_int_equal(tt_db_insert(db, good, 2, NULL), TT_OK);
    tt_db_record mixed[3] = {
        rec("matmul:M=4,N=4,K=4", "llvm", NULL, "[[\"CI\", 2]]", one_cost, 1, 3),
        rec("matmul:M=4,N=4,K=4", "llvm", NULL, "[[\"CI\", 3]]", one_cost, 1, 4),
        rec("matmul:M=4,N=4,K=4", "llvm", NULL, "[[\"CI\", 4]]", one_cost, 1, 5)};
    mixed[2].error_no = 9;
    assert_int_equal(tt_db_insert(db, mixed, 3, NULL), TT_ERR_INVALID_ARG);
    assert_non_null(strstr(tt_db_errmsg(db), "record 2: error_no 9"));
    mixed[2].error_no = 0;
    mixed[1].workload = "matmul:M=4,N=4";
    assert_int_equal(tt_db_insert(db, mixed, 3, NULL), TT_ERR_BAD_WORKLOAD);
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(db, 0, &st), TT_OK);
    assert_int_equal(st.records, 2);
    tt_db_close(db);
}

static void duplicate_inserts_are_skipped(void **state)
{
    tt_db *db = open_or_fail("dup.db");
    tt_db_record r = rec("matmul:M=4,N=4,K=4", "llvm", "dev-a", "[]", one_cost, 1, 7);
    size_t ins;
    assert_int_equal(tt_db_insert(db, &r, 1, &ins), TT_OK);
    assert_int_equal(ins, 1);
    assert_int_equal(tt_db_insert(db, &r, 1, &ins), TT_OK);
    assert_int_equal(ins, 0);
    r.timestamp = 8; /* a new measurement of the same config is a new record */
    assert_int_equal(tt_db_insert(db, &r, 1, &ins), TT_OK);
    assert_int_equal(ins, 1);
    tt_db_close(db);
}

#define BATCH   50
#define BATCHES 40

static void writer_child(const char *name, int notify_fd, int batches, bool forever)
{
    tt_db *db;
    if (tt_db_open(path_of(name), 0, &db, NULL))
        _exit(3);
    static double costs[BATCH];
    static char cfg[BATCH][48];
    tt_db_record r[BATCH];
    for (int b = 0; forever || b < batches; b++) {
        for (int i = 0; i < BATCH; i++) {
            snprintf(cfg[i], sizeof(cfg[i]), "[[\"CI\", %d]]", b * BATCH + i);
            costs[i] = 1e-4 * (i + 1);
            r[i] = rec("matmul:M=8,N=8,K=8", "llvm", NULL, cfg[i], &costs[i], 1, b);
        }
        if (tt_db_insert(db, r, BATCH, NULL))
            _exit(4);
        if (notify_fd >= 0 && b == 0) {
            char c = 1;
            if (write(notify_fd, &c, 1) != 1)
                _exit(5);
        }
    }
    tt_db_close(db);
    _exit(0);
}

/* A writer child on a new database `name`, returned once its first batch is committed. */
static pid_t writer_under_way(const char *name, int batches, bool forever)
{
    tt_db *db = open_or_fail(name);
    tt_db_close(db);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        writer_child(name, fds[1], batches, forever);
    }
    close(fds[1]);
    char c;
    assert_int_equal(read(fds[0], &c, 1), 1);
    close(fds[0]);
    return pid;
}

static void readers_never_see_half_a_batch(void **state)
{
    tt_db *db = open_or_fail("conc.db");
    tt_db_close(db);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        writer_child("conc.db", -1, BATCHES, false);
    tt_db *reader;
    tt_errbuf err;
    assert_int_equal(tt_db_open(path_of("conc.db"), TT_DB_READONLY, &reader, &err), TT_OK);
    int status, polls = 0;
    for (;;) {
        tt_db_stats st;
        assert_int_equal(tt_db_stats_get(reader, 0, &st), TT_OK);
        assert_int_equal(st.records % BATCH, 0);
        polls++;
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
    }
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(reader, 0, &st), TT_OK);
    assert_int_equal(st.records, BATCH * BATCHES);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(polls > 0);
    tt_db_close(reader);
}

static void committed_records_survive_kill_9(void **state)
{
    pid_t pid = writer_under_way("kill.db", 0, true);
    usleep(20000); /* let it be in the middle of later batches */
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFSIGNALED(status));
    tt_db *db = open_or_fail("kill.db");
    assert_int_equal(tt_db_check(db), TT_OK);
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(db, 0, &st), TT_OK);
    assert_true(st.records >= BATCH);
    assert_int_equal(st.records % BATCH, 0);
    tt_db_close(db);
}

static void full_disk_loses_nothing_already_stored(void **state)
{
    tt_db *db = open_or_fail("full.db");
    assert_int_equal(tt_db_limit_size(db, 256 * 1024), TT_OK);
    static double costs[100];
    static char cfg[100][600];
    tt_db_record r[100];
    int64_t stored = 0;
    tt_status s = TT_OK;
    for (int b = 0; b < 1000 && !s; b++) {
        for (int i = 0; i < 100; i++) {
            memset(cfg[i], 'x', 500);
            snprintf(cfg[i] + 500, 100, "%d", b * 100 + i);
            costs[i] = 1e-3;
            r[i] = rec("matmul:M=8,N=8,K=8", "llvm", NULL, cfg[i], &costs[i], 1, b);
        }
        s = tt_db_insert(db, r, 100, NULL);
        if (!s)
            stored += 100;
    }
    assert_int_equal(s, TT_ERR_IO);
    assert_non_null(strstr(tt_db_errmsg(db), "disk full"));
    assert_true(stored > 0);
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(db, 0, &st), TT_OK);
    assert_int_equal(st.records, stored);
    assert_int_equal(tt_db_check(db), TT_OK);
    tt_db_close(db);
}

static const char *const fastest_wl = "matmul:M=64,N=64,K=64";

/* Two records: one steady (every sample 1 ms), one whose median a busy moment inflated (4 ms)
 * and whose fastest sample (0.5 ms) beats the steady one's. */
static void insert_steady_and_interrupted(tt_db *db)
{
    double steady[3] = {1e-3, 1e-3, 1e-3}, interrupted[3] = {4e-3, 5e-4, 4e-3};
    /* and two whose samples say 0 s: no time, which only a corrupt record claims */
    double zero_first[3] = {0, 2e-3, 3e-3}, untimed[2] = {0, 0};
    tt_db_record r[4] = {rec(fastest_wl, "llvm", NULL, "[[\"CI\", 1]]", steady, 3, 1),
                         rec(fastest_wl, "llvm", NULL, "[[\"CI\", 2]]", interrupted, 3, 2),
                         rec(fastest_wl, "llvm", NULL, "[[\"CI\", 3]]", zero_first, 3, 3),
                         rec(fastest_wl, "llvm", NULL, "[[\"CI\", 4]]", untimed, 2, 4)};
    assert_int_equal(tt_db_insert(db, r, 4, NULL), TT_OK);
}

/* A sample of 0 is no time: the fastest is the smallest positive sample, and a record with none
 * is never a best. */
static void only_timed_samples_rank(tt_db *db)
{
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(db, fastest_wl, "llvm", NULL, 10, false, &rows, &n), TT_OK);
    assert_int_equal(n, 3);
    assert_string_equal(rows[2].config, "[[\"CI\", 3]]");
    assert_true(rows[2].fastest_s == 2e-3);
    tt_db_rows_free(rows, n);
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(db, 0, &st), TT_OK);
    assert_true(st.best_s == 5e-4);
    /* the leaderboard's pair counts the three records with a time */
    tt_db_best_entry *e;
    assert_int_equal(tt_db_leaderboard(db, 0, &e, &n), TT_OK);
    assert_int_equal(n, 1);
    assert_true(e[0].best_s == 5e-4);
    assert_int_equal(e[0].records, 3);
    tt_db_leaderboard_free(e, n);
}

/* Both best records of insert_steady_and_interrupted, the interrupted one first. */
static tt_db_row *best_two_fastest_first(tt_db *db)
{
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(db, fastest_wl, "llvm", NULL, 2, false, &rows, &n), TT_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].config, "[[\"CI\", 2]]");
    assert_true(rows[0].fastest_s == 5e-4);
    assert_true(rows[1].fastest_s == 1e-3);
    return rows;
}

/* A record's time is its fastest sample: a record whose median a busy moment inflated, and
 * whose fastest sample beats every other record's, is the best; GFLOPS, the statistics and the
 * leaderboard say the same. */
static void best_ranks_records_by_their_fastest_sample(void **state)
{
    tt_db *db = open_or_fail("fastest.db");
    insert_steady_and_interrupted(db);
    tt_db_row *rows = best_two_fastest_first(db);
    assert_true(rows[0].median_s == 4e-3);
    assert_true(rows[0].gflops == 2.0 * 64 * 64 * 64 / 5e-4 / 1e9);
    tt_db_rows_free(rows, 2);
    only_timed_samples_rank(db); /* the statistics and the leaderboard */
    tt_db_close(db);
}

/* A database of schema 3 ranked by the median: migrating fills each record's fastest sample from
 * its stored samples, and the best is then the record with the fastest; the leaderboard's table
 * (schema 5) is filled from them. */
static void migration_fills_the_fastest_sample_from_the_costs(void **state)
{
    tt_db *db = open_or_fail("v3.db");
    insert_steady_and_interrupted(db);
    tt_db_close(db);
    /* back to schema 3: no fastest_s, the best index on the median */
    raw_sql2("v3.db",
             "DROP TABLE bests; DROP INDEX records_best; ALTER TABLE records DROP COLUMN fastest_s;"
             "CREATE INDEX records_best ON records(workload_id, target_id, error_no, median_s, id);"
             "PRAGMA user_version = 3;",
             "DROP TABLE bests; DROP INDEX records_best; ALTER TABLE records DROP COLUMN fastest_s;"
             "CREATE INDEX records_best ON records(workload_id, target_id, error_no, median_s, id);"
             "UPDATE tt_meta SET schema_version = 3;");
    db = open_or_fail("v3.db");
    assert_int_equal(tt_db_user_version(db), TT_DB_SCHEMA_VERSION);
    tt_db_rows_free(best_two_fastest_first(db), 2);
    only_timed_samples_rank(db);
    tt_db_close(db);
}

/* The leaderboard's table changed behind the library's back: check says so, vacuum computes it
 * again from the records. */
static void a_leaderboard_out_of_step_is_found_and_rebuilt(void **state)
{
    tt_db *db = open_or_fail("bests.db");
    insert_steady_and_interrupted(db);
    assert_int_equal(tt_db_check(db), TT_OK);
    tt_db_close(db);
    raw_sql("bests.db", "UPDATE bests SET records = 99");
    db = open_or_fail("bests.db");
    assert_int_equal(tt_db_check(db), TT_ERR_IO);
    assert_non_null(strstr(tt_db_errmsg(db), "the best of 1 (workload, target) pairs"));
    assert_non_null(strstr(tt_db_errmsg(db), "tvm-db vacuum"));
    assert_int_equal(tt_db_vacuum(db), TT_OK);
    assert_int_equal(tt_db_check(db), TT_OK);
    only_timed_samples_rank(db); /* the right count again */
    tt_db_close(db);
}

static void best_prefers_exact_then_other_device_then_family(void **state)
{
    tt_db *db = open_or_fail("best.db");
    const char *wl = "matmul:M=64,N=64,K=64";
    const char *skx = "llvm -mcpu=skylake-avx512", *znver = "llvm -mcpu=znver3";
    const char *arm = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
    double c1[3] = {3e-3, 1e-3, 2e-3}, c2[1] = {5e-4}, c3[1] = {4e-4}, c4[1] = {1e-4},
           c5[1] = {1e-4};
    tt_db_record r[6] = {
        rec(wl, skx, "dev-a", "[[\"CI\", 1]]", c1, 3, 1), /* median 2e-3 */
        rec(wl, skx, "dev-a", "[[\"CI\", 2]]", c2, 1, 2),
        rec(wl, skx, "dev-b", "[[\"CI\", 3]]", c3, 1, 3),
        rec(wl, arm, "dev-c", "[[\"CI\", 4]]", c4, 1, 4), /* fastest but another family */
        rec(wl, skx, "dev-a", "[[\"CI\", 5]]", c5, 1, 5),
        rec(wl, znver, "dev-d", "[[\"CI\", 6]]", c4, 1, 6),
    };
    r[4].error_no = 4; /* an error is never best, however fast */
    assert_int_equal(tt_db_insert(db, r, 6, NULL), TT_OK);
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(db, wl, skx, "dev-a", 2, true, &rows, &n), TT_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].config, "[[\"CI\", 2]]");
    assert_int_equal(rows[0].match, TT_DB_MATCH_EXACT);
    assert_true(rows[1].median_s == 2e-3);
    assert_true(rows[1].fastest_s == 1e-3);
    assert_true(rows[0].gflops > 0);
    assert_true(rows[0].gflops == 2.0 * 64 * 64 * 64 / 5e-4 / 1e9);
    tt_db_rows_free(rows, n);
    /* An unknown device: the same target on the devices we have. */
    assert_int_equal(tt_db_best(db, wl, skx, "dev-z", 1, true, &rows, &n), TT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].match, TT_DB_MATCH_OTHER_DEVICE);
    assert_string_equal(rows[0].config, "[[\"CI\", 3]]");
    tt_db_rows_free(rows, n);
    /* An unseen target of the host family: the family (not the aarch64 record). */
    assert_int_equal(tt_db_best(db, wl, "llvm -mcpu=icelake-server", NULL, 1, true, &rows, &n),
                     TT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].match, TT_DB_MATCH_FAMILY);
    assert_string_equal(rows[0].target, znver);
    tt_db_rows_free(rows, n);
    /* Without fallback nothing is made up. */
    assert_int_equal(tt_db_best(db, wl, "llvm -mcpu=icelake-server", NULL, 1, false, &rows, &n),
                     TT_OK);
    assert_int_equal(n, 0);
    /* The key need not be canonical. */
    assert_int_equal(tt_db_best(db, "matmul:K=64,N=64,M=64", arm, NULL, 1, true, &rows, &n), TT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].device, "dev-c");
    tt_db_rows_free(rows, n);
    assert_int_equal(tt_db_best(db, "matmul:M=1,N=1,K=1", skx, NULL, 1, true, &rows, &n),
                     TT_ERR_NOT_FOUND);
    assert_int_equal(tt_db_best(db, "matmul:M=1", skx, NULL, 1, true, &rows, &n),
                     TT_ERR_BAD_WORKLOAD);
    tt_db_close(db);
}

static int count_suspect(void *ctx, const tt_db_row *row)
{
    if (row->extra && strstr(row->extra, "\"suspect\":\"device 10.0.0.7:9090 lied\"") &&
        strstr(row->extra, "\"index\":1"))
        (*(int *)ctx)++;
    return 0;
}

static void ties_go_to_the_earlier_record(void **state)
{
    tt_db *db = open_or_fail("tie.db");
    double c[1] = {1e-3};
    tt_db_record r[2] = {rec("relu:M=4,N=4", "llvm", NULL, "[[\"AN\", 1, 0, 3]]", c, 1, 1),
                         rec("relu:M=4,N=4", "llvm", NULL, "[[\"AN\", 1, 0, 1]]", c, 1, 2)};
    assert_int_equal(tt_db_insert(db, r, 2, NULL), TT_OK);
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(db, "relu:M=4,N=4", "llvm", NULL, 1, true, &rows, &n), TT_OK);
    assert_string_equal(rows[0].config, "[[\"AN\", 1, 0, 3]]");
    tt_db_rows_free(rows, n);
    tt_db_close(db);
}

/* Records of a device later found sick: marked by address and time, kept, and left out of the
 * best, the leaderboard and the stats' best; other devices' and older records are untouched. */
static void suspect_records_are_marked_and_skipped(void **state)
{
    tt_db *db = open_or_fail("suspect.db");
    double fast[1] = {1e-4}, slow[1] = {1e-3}, slower[1] = {2e-3};
    tt_db_record r[5] = {rec("relu:M=4,N=4", "llvm", "dev", "[[\"AN\", 1, 0, 1]]", fast, 1, 100),
                         rec("relu:M=4,N=4", "llvm", "dev", "[[\"AN\", 1, 0, 2]]", slow, 1, 101),
                         rec("relu:M=4,N=4", "llvm", "dev", "[[\"AN\", 1, 0, 3]]", slower, 1, 50),
                         rec("relu:M=4,N=4", "llvm", "dev", "[[\"AN\", 1, 0, 4]]", fast, 1, 102),
                         rec("relu:M=8,N=8", "llvm", "dev", "[[\"AN\", 1, 0, 5]]", fast, 1, 103)};
    r[0].extra = "{\"host\":\"10.0.0.7:9090\",\"index\":1}"; /* the liar, this run */
    r[1].extra = "{\"host\":\"10.0.0.8:9090\"}";             /* an honest device */
    r[2].extra = "{\"host\":\"10.0.0.7:9090\"}";             /* the liar, long before */
    r[3].extra = "not json at all";                          /* an imported oddity */
    r[4].extra = r[0].extra; /* the liar's only record of another workload */
    assert_int_equal(tt_db_insert(db, r, 5, NULL), TT_OK);
    tt_db_best_entry *e;
    size_t n;
    assert_int_equal(tt_db_leaderboard(db, 0, &e, &n), TT_OK);
    assert_int_equal(n, 2);
    tt_db_leaderboard_free(e, n);
    int64_t marked = -1;
    assert_int_equal(
        tt_db_mark_suspect(db, "10.0.0.7:9090", 90, "device 10.0.0.7:9090 lied", &marked), TT_OK);
    assert_int_equal(marked, 2);
    tt_db_row *rows;
    assert_int_equal(tt_db_best(db, "relu:M=4,N=4", "llvm", NULL, 4, true, &rows, &n), TT_OK);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        assert_null(strstr(rows[i].extra ? rows[i].extra : "", "suspect"));
    assert_string_equal(rows[0].config, "[[\"AN\", 1, 0, 4]]"); /* the fast one left */
    tt_db_rows_free(rows, n);
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(db, 0, &st), TT_OK);
    assert_int_equal(st.records, 5);
    assert_int_equal(st.suspect, 2);
    assert_true(st.best_s == 1e-4);
    /* the marked records keep what they had, and say why */
    int found = 0;
    tt_db_filter f = {0};
    assert_int_equal(tt_db_history(db, &f, count_suspect, &found), TT_OK);
    assert_int_equal(found, 2);
    /* the pair whose one record was the liar's left the leaderboard */
    assert_int_equal(tt_db_leaderboard(db, 0, &e, &n), TT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(e[0].workload, "relu:M=4,N=4");
    assert_true(e[0].best_s == 1e-4);
    assert_int_equal(e[0].records, 3);
    tt_db_leaderboard_free(e, n);
    tt_db_close(db);
}

static int count_rows(void *ctx, const tt_db_row *row)
{
    (*(int *)ctx)++;
    return 0;
}

static void jobs_history_and_stats(void **state)
{
    tt_db *db = open_or_fail("jobs.db");
    int64_t job;
    assert_int_equal(tt_db_job_create(db, NULL, "{\"workload\": \"relu:M=4,N=4\"}", 10, &job),
                     TT_OK);
    assert_int_equal(tt_db_job_update(db, job, "running", 3, 1e-3), TT_OK);
    assert_int_equal(tt_db_job_update(db, job, "sleeping", 3, 1e-3), TT_ERR_INVALID_ARG);
    assert_int_equal(tt_db_job_update(db, 999, "done", 3, 1e-3), TT_ERR_NOT_FOUND);
    double c[2] = {1e-3, 3e-3};
    tt_db_record r[3] = {rec("relu:M=4,N=4", "llvm", NULL, "[]", c, 2, 1),
                         rec("relu:M=4,N=4", "llvm", NULL, "[[\"CI\", 1]]", c, 1, 2),
                         rec("add:M=4,N=4", "llvm", NULL, "[]", c, 1, 3)};
    r[0].job = r[1].job = job;
    r[1].error_no = TT_MEASURE_RUN_TIMEOUT;
    assert_int_equal(tt_db_insert(db, r, 3, NULL), TT_OK);
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(db, job, &st), TT_OK);
    assert_int_equal(st.records, 2);
    assert_int_equal(st.errors[TT_MEASURE_RUN_TIMEOUT], 1);
    assert_true(st.best_s == 1e-3); /* the fastest sample (the median is 2e-3) */
    int n = 0;
    tt_db_filter f = {.job = job};
    assert_int_equal(tt_db_history(db, &f, count_rows, &n), TT_OK);
    assert_int_equal(n, 2);
    n = 0;
    tt_db_filter fw = {.workload = "add:N=4,M=4"};
    assert_int_equal(tt_db_history(db, &fw, count_rows, &n), TT_OK);
    assert_int_equal(n, 1);
    tt_db_job *jobs;
    size_t nj;
    assert_int_equal(tt_db_jobs_list(db, &jobs, &nj), TT_OK);
    assert_int_equal(nj, 1);
    assert_string_equal(jobs[0].state, "running");
    assert_int_equal(jobs[0].trials_done, 3);
    tt_db_jobs_free(jobs, nj);
    tt_db_close(db);
}

static void devices_and_cost_models(void **state)
{
    tt_db *db = open_or_fail("models.db");
    tt_db_device d = {.key = "rpi4", .fingerprint = "cortex-a72/4c/8G", .cores = 4};
    assert_int_equal(tt_db_device_upsert(db, &d), TT_OK);
    assert_int_equal(tt_db_device_upsert(db, &d), TT_OK);
    tt_db_device none = {0};
    assert_int_equal(tt_db_device_upsert(db, &none), TT_ERR_INVALID_ARG);
    const char blob[] = "\x01\x02\x00model";
    assert_int_equal(tt_db_model_save(db, "xgb", 1, blob, sizeof(blob), "{}"), TT_OK);
    assert_int_equal(tt_db_model_save(db, "xgb", 1, "v2", 2, NULL), TT_OK);
    void *out;
    size_t len;
    char *meta;
    assert_int_equal(tt_db_model_load(db, "xgb", 1, &out, &len, &meta), TT_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(out, "v2", 2);
    assert_null(meta); /* the newest version saved none */
    free(out);
    assert_int_equal(tt_db_model_save(db, "xgb", 1, "v3", 2, "{\"programs\": 7}"), TT_OK);
    assert_int_equal(tt_db_model_load(db, "xgb", 1, &out, &len, &meta), TT_OK);
    assert_string_equal(meta, "{\"programs\": 7}");
    free(meta);
    free(out);
    assert_int_equal(tt_db_model_load(db, "xgb", 2, &out, &len, NULL), TT_ERR_NOT_FOUND);
    tt_db_close(db);
}

static void readonly_handle_refuses_writes(void **state)
{
    tt_db *db = open_or_fail("ro.db");
    tt_db_close(db);
    tt_errbuf err;
    assert_int_equal(tt_db_open(path_of("ro.db"), TT_DB_READONLY, &db, &err), TT_OK);
    tt_db_record r = rec("relu:M=4,N=4", "llvm", NULL, "[]", one_cost, 1, 1);
    assert_int_equal(tt_db_insert(db, &r, 1, NULL), TT_ERR_IO);
    /* writes that do not check the handle's mode are refused by the connection itself */
    assert_int_not_equal(tt_db_model_save(db, "xgb", 1, "m", 1, NULL), TT_OK);
    tt_db_close(db);
    if (!on_pg) {
        /* a reader leaves nothing beside the database (SQLite keeps -wal and -shm files after
         * a connection opened SQLITE_OPEN_READONLY closes) */
        struct stat sb;
        assert_int_not_equal(stat(path_of("ro.db-wal"), &sb), 0);
        assert_int_not_equal(stat(path_of("ro.db-shm"), &sb), 0);
        assert_int_equal(tt_db_open(path_of("missing.db"), TT_DB_READONLY, &db, &err),
                         TT_ERR_NOT_FOUND);
        return;
    }
    char uri[1200];
    snprintf(uri, sizeof(uri), "%sno_such_database", pg_base);
    assert_int_equal(tt_db_open(uri, TT_DB_READONLY, &db, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot connect to the database server"));
    assert_non_null(strstr(err.msg, "no_such_database"));
}

/* Processes that open an empty or an older database at the same moment, read-only ones among
 * them (a build beside a tracker's first start), twenty times: every open succeeds, the schema
 * is migrated once (a second migration would fail on tables that exist), every record is
 * stored.  tests/db/test_pg_concurrency.sh does the same with the programs themselves. */
static void processes_starting_together_all_succeed(void **state)
{
    enum { PROCS = 8, REPS = 20 };
    for (int rep = 0; rep < REPS; rep++) {
        char name[32];
        snprintf(name, sizeof(name), "together%d.db", rep);
        bool older = rep % 2;
        if (older) {
            /* schema 4, before the bests table */
            tt_db *db = open_or_fail(name);
            tt_db_close(db);
            raw_sql2(name, "DROP TABLE bests; PRAGMA user_version = 4;",
                     "DROP TABLE bests; UPDATE tt_meta SET schema_version = 4");
        } else if (!on_pg) {
            /* an empty file, as `touch` leaves it: a database of no schema yet */
            FILE *f = fopen(path_of(name), "w");
            assert_non_null(f);
            fclose(f);
        } else {
            path_of(name); /* a new, empty database on the server */
        }
        int go[2];
        assert_int_equal(pipe(go), 0);
        pid_t pids[PROCS];
        for (int k = 0; k < PROCS; k++) {
            pids[k] = fork();
            assert_true(pids[k] >= 0);
            if (pids[k])
                continue;
            close(go[1]);
            char c;
            if (read(go[0], &c, 1) != 0) /* all released at once, when the parent closes it */
                _exit(2);
            bool reader = k % 4 == 3;
            tt_db *db;
            tt_errbuf err = {{0}};
            if (tt_db_open(path_of(name), reader ? TT_DB_READONLY : 0, &db, &err)) {
                fprintf(stderr, "process %d (%s): %s\n", k, reader ? "read-only" : "writer",
                        err.msg);
                _exit(3);
            }
            tt_status st;
            if (reader) {
                tt_db_stats stats;
                st = tt_db_stats_get(db, 0, &stats);
            } else {
                char cfg[32];
                snprintf(cfg, sizeof(cfg), "[[\"CI\", %d]]", k);
                tt_db_record r = rec("relu:M=8,N=8", "llvm", "dev", cfg, one_cost, 1, k);
                st = tt_db_insert(db, &r, 1, NULL);
            }
            if (st)
                fprintf(stderr, "process %d: %s\n", k, tt_db_errmsg(db));
            tt_db_close(db);
            _exit(st ? 4 : 0);
        }
        close(go[0]);
        close(go[1]);
        for (int k = 0; k < PROCS; k++) {
            int status;
            assert_int_equal(waitpid(pids[k], &status, 0), pids[k]);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("rep %d (%s database): process %d ended with status %d", rep,
                         older ? "schema 4" : "empty", k, status);
        }
        tt_db *db = open_or_fail(name);
        assert_int_equal(tt_db_user_version(db), TT_DB_SCHEMA_VERSION);
        tt_db_stats stats;
        assert_int_equal(tt_db_stats_get(db, 0, &stats), TT_OK);
        assert_int_equal(stats.records, PROCS - PROCS / 4);
        assert_int_equal(tt_db_check(db), TT_OK);
        tt_db_close(db);
    }
}

/* A forked child that inherits a handle (the tuner's search round, a measurement's sandbox)
 * cannot use it, and closing it there leaves the parent's session alone: with no patience to
 * reconnect, the parent's next write still succeeds on the same connection.  (libpq's PQfinish
 * in a child sends the server a Terminate on the shared socket, which ended the parent's
 * session: "server closed the connection unexpectedly".) */
static void a_forked_child_never_touches_the_connection(void **state)
{
    tt_db *db = open_or_fail("forked.db");
    tt_db_set_patience(db, 0);
    tt_db_record r = rec("relu:M=8,N=8", "llvm", NULL, "[[\"CI\", 1]]", one_cost, 1, 1);
    assert_int_equal(tt_db_insert(db, &r, 1, NULL), TT_OK);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tt_db_record r2 = rec("relu:M=8,N=8", "llvm", NULL, "[[\"CI\", 2]]", one_cost, 1, 2);
        tt_db_stats stats;
        int bad = 0;
        bad |= tt_db_insert(db, &r2, 1, NULL) != TT_ERR_INVALID_ARG;
        bad |= !strstr(tt_db_errmsg(db), "a fork of it");
        bad |= tt_db_stats_get(db, 0, &stats) != TT_ERR_INVALID_ARG;
        bad |= tt_db_check(db) != TT_ERR_INVALID_ARG;
        bad |= tt_db_user_version(db) != -1;
        tt_db_close(db);
        _exit(bad ? 1 : 0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    r = rec("relu:M=8,N=8", "llvm", NULL, "[[\"CI\", 3]]", one_cost, 1, 3);
    if (tt_db_insert(db, &r, 1, NULL))
        fail_msg("the parent's handle after the child closed its copy: %s", tt_db_errmsg(db));
    tt_db_stats stats;
    assert_int_equal(tt_db_stats_get(db, 0, &stats), TT_OK);
    assert_int_equal(stats.records, 2);
    tt_db_close(db);
}

/* tvm-db copy's library call: everything moves, the target is checked, a second copy adds
 * nothing; on the PostgreSQL run the copy goes from a SQLite file to the server and back. */
static void copy_moves_everything_once(void **state)
{
    char src[512], back[512];
    snprintf(src, sizeof(src), "%s/copy-src.sqlite", dir);
    snprintf(back, sizeof(back), "%s/copy-back.sqlite", dir);
    tt_db *a, *b;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_db_open(src, 0, &a, &err), TT_OK);
    int64_t job;
    assert_int_equal(tt_db_job_create(a, "tracker-a", "{\"trials\": 2}", 2, &job), TT_OK);
    tt_db_device d = {.key = "cpu", .fingerprint = "dev-a", .cores = 2};
    assert_int_equal(tt_db_device_upsert(a, &d), TT_OK);
    double c1[2] = {2e-3, 1e-3}, c2[1] = {5e-4}, c3[1] = {1.0 / 3};
    tt_db_record r[3] = {rec("matmul:M=4,N=4,K=4", "llvm", "dev-a", "[[\"CI\", 1]]", c1, 2, 1),
                         rec("matmul:M=4,N=4,K=4", "llvm", "dev-a", "[[\"CI\", 2]]", c2, 1, 2),
                         rec("relu:M=4,N=4", "llvm -mcpu=znver3", NULL, "[]", c3, 1, 3.25)};
    r[0].job = r[1].job = job;
    r[1].extra = "{\"host\":\"10.0.0.7:9090\"}";
    r[2].error_no = 5;
    r[2].error_text = "element 3: 1 != 2";
    assert_int_equal(tt_db_insert(a, r, 3, NULL), TT_OK);
    int64_t marked;
    assert_int_equal(tt_db_mark_suspect(a, "10.0.0.7:9090", 0, "lied", &marked), TT_OK);
    assert_int_equal(tt_db_model_save(a, "xgb", 1, "\x00\x01blob", 6, "{}"), TT_OK);
    b = open_or_fail("copy.db");
    tt_db_copy_report rep;
    assert_int_equal(tt_db_copy(a, b, &rep, &err), TT_OK);
    assert_true(rep.verified);
    assert_int_equal(rep.records, 3);
    assert_int_equal(rep.inserted, 3);
    assert_int_equal(rep.devices, 1);
    assert_int_equal(rep.jobs, 1);
    assert_int_equal(rep.cost_models, 1);
    uint64_t digest = rep.digest;
    /* again: nothing new */
    assert_int_equal(tt_db_copy(a, b, &rep, &err), TT_OK);
    assert_int_equal(rep.inserted, 0);
    assert_int_equal(rep.present, 3);
    assert_int_equal(rep.jobs + rep.devices + rep.cost_models, 0);
    /* the target answers as the source did: the suspect left out, the job's records its own */
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(b, "matmul:M=4,N=4,K=4", "llvm", NULL, 5, false, &rows, &n), TT_OK);
    assert_int_equal(n, 1);
    assert_true(rows[0].median_s == 1.5e-3);
    tt_db_best_entry *e;
    size_t ne;
    assert_int_equal(tt_db_leaderboard(b, 0, &e, &ne), TT_OK);
    assert_int_equal(ne, 1); /* the suspect record counts neither here nor there */
    assert_int_equal(e[0].records, 1);
    assert_true(e[0].best_s == 1e-3);
    tt_db_leaderboard_free(e, ne);
    tt_db_job *jobs;
    size_t nj;
    assert_int_equal(tt_db_jobs_list(b, &jobs, &nj), TT_OK);
    assert_int_equal(nj, 1);
    int count = 0;
    assert_string_equal(jobs[0].owner, "tracker-a");
    tt_db_filter f = {.job = jobs[0].id};
    assert_int_equal(tt_db_history(b, &f, count_rows, &count), TT_OK);
    assert_int_equal(count, 2);
    tt_db_jobs_free(jobs, nj);
    tt_db_rows_free(rows, n);
    void *blob;
    size_t len;
    assert_int_equal(tt_db_model_load(b, "xgb", 1, &blob, &len, NULL), TT_OK);
    assert_int_equal(len, 6);
    assert_memory_equal(blob, "\x00\x01blob", 6);
    free(blob);
    tt_db_close(a);
    /* and back into a new file: the same content, bit for bit (times included) */
    assert_int_equal(tt_db_open(back, 0, &a, &err), TT_OK);
    assert_int_equal(tt_db_copy(b, a, &rep, &err), TT_OK);
    assert_true(rep.verified);
    assert_int_equal(rep.digest, digest);
    tt_db_close(a);
    tt_db_close(b);
}

/* ---- only a server ---- */

static void a_password_in_the_uri_is_refused(void **state)
{
    char uri[1200];
    /* postgresql://tvmtune@host:port/ -> postgresql://tvmtune:hunter2@host:port/ */
    const char *at = strchr(pg_base, '@');
    snprintf(uri, sizeof(uri), "%.*s:hunter2%stuning", (int)(at - pg_base), pg_base, at);
    tt_db *db;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_db_open(uri, 0, &db, &err), TT_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "~/.pgpass"));
    assert_null(strstr(err.msg, "hunter2"));
    snprintf(uri, sizeof(uri), "%stuning?password=hunter2", pg_base);
    assert_int_equal(tt_db_open(uri, 0, &db, &err), TT_ERR_INVALID_ARG);
    assert_null(strstr(err.msg, "hunter2"));
}

static void an_unreachable_server_is_a_clear_error(void **state)
{
    tt_db *db;
    tt_errbuf err = {{0}};
    /* port 1 on loopback: nothing listens there */
    assert_int_equal(tt_db_open("postgresql://tvmtune@127.0.0.1:1/tuning", 0, &db, &err),
                     TT_ERR_IO);
    assert_null(db);
    assert_non_null(strstr(err.msg, "cannot connect to the database server"));
    assert_null(strstr(err.msg, "gave up"));
    /* a tracker's job waits for it as for a lost one, as long as its patience says */
    setenv("TVM_TUNE_DB_PATIENCE", "0.3", 1);
    assert_int_equal(
        tt_db_open("postgresql://tvmtune@127.0.0.1:1/tuning", TT_DB_WAIT_FOR_SERVER, &db, &err),
        TT_ERR_IO);
    unsetenv("TVM_TUNE_DB_PATIENCE");
    assert_null(db);
    assert_non_null(strstr(err.msg, "cannot connect to the database server"));
    assert_non_null(strstr(err.msg, "gave up reconnecting after 0 s"));
}

/* Builds query with a role that may only read: enough for best records, refused writes. */
static void a_read_only_role_queries_and_cannot_write(void **state)
{
    tt_db *db = open_or_fail("roles.db");
    tt_db_record r = rec("relu:M=4,N=4", "llvm", NULL, "[]", one_cost, 1, 1);
    assert_int_equal(tt_db_insert(db, &r, 1, NULL), TT_OK);
    tt_db_close(db);
    raw_sql("roles.db", "DROP ROLE IF EXISTS builder; CREATE ROLE builder LOGIN;"
                        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO builder");
    char uri[1200];
    const char *at = strchr(pg_base, '@');
    snprintf(uri, sizeof(uri), "postgresql://builder%st_roles_db", at);
    tt_errbuf err = {{0}};
    assert_int_equal(tt_db_open(uri, TT_DB_READONLY, &db, &err), TT_OK);
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(db, "relu:M=4,N=4", "llvm", NULL, 1, false, &rows, &n), TT_OK);
    assert_int_equal(n, 1);
    tt_db_rows_free(rows, n);
    tt_db_close(db);
    /* opened for writing, the role's limits speak */
    assert_int_equal(tt_db_open(uri, 0, &db, &err), TT_OK);
    r.timestamp = 2;
    assert_int_equal(tt_db_insert(db, &r, 1, NULL), TT_ERR_IO);
    assert_non_null(strstr(tt_db_errmsg(db), "permission denied"));
    tt_db_close(db);
}

/* Writers at once: the same measurements stored once, every job id distinct. */
static void concurrent_writers_store_each_record_once(void **state)
{
    tt_db *db = open_or_fail("many.db");
    tt_db_close(db);
    enum { WRITERS = 3, SHARED = 40, OWN = 40, JOBS = 5 };
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        assert_true(pids[w] >= 0);
        if (pids[w])
            continue;
        if (tt_db_open(path_of("many.db"), 0, &db, NULL))
            _exit(3);
        static char cfg[SHARED + OWN][48];
        static double costs[SHARED + OWN];
        tt_db_record r[SHARED + OWN];
        for (int i = 0; i < SHARED + OWN; i++) {
            /* shared: the same measurement from every writer (a retry, an import twice) */
            snprintf(cfg[i], sizeof(cfg[i]), "[[\"CI\", %d]]", i < SHARED ? i : 1000 * (w + 1) + i);
            costs[i] = 1e-4 * (i + 1);
            /* each writer its own new workload too, all created at once */
            r[i] = rec(i % 2 ? "matmul:M=8,N=8,K=8" : "relu:M=64,N=64", "llvm", "dev", cfg[i],
                       &costs[i], 1, 5);
        }
        for (int i = 0; i < SHARED + OWN; i += 10)
            if (tt_db_insert(db, r + i, 10, NULL))
                _exit(4);
        for (int j = 0; j < JOBS; j++) {
            int64_t id;
            if (tt_db_job_create(db, NULL, "{}", 1, &id))
                _exit(5);
        }
        tt_db_close(db);
        _exit(0);
    }
    for (int w = 0; w < WRITERS; w++) {
        int status;
        waitpid(pids[w], &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    db = open_or_fail("many.db");
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(db, 0, &st), TT_OK);
    assert_int_equal(st.records, SHARED + WRITERS * OWN);
    assert_int_equal(st.workloads, 2);
    tt_db_job *jobs;
    size_t n;
    assert_int_equal(tt_db_jobs_list(db, &jobs, &n), TT_OK);
    assert_int_equal(n, WRITERS * JOBS);
    for (size_t i = 1; i < n; i++)
        assert_true(jobs[i].id > jobs[i - 1].id);
    tt_db_jobs_free(jobs, n);
    tt_db_close(db);
}

/* The server restarts under a writer: it waits, reconnects and goes on; nothing lost, nothing
 * stored twice. */
static void a_restarted_server_loses_nothing(void **state)
{
    pid_t pid = writer_under_way("restart.db", BATCHES, false);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "bash %s restart %s", pg_script, pg_state);
    assert_int_equal(system(cmd), 0);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    tt_db *db = open_or_fail("restart.db");
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(db, 0, &st), TT_OK);
    assert_int_equal(st.records, BATCH * BATCHES);
    tt_db_close(db);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest common[] = {
        cmocka_unit_test(new_database_gets_the_current_schema),
        cmocka_unit_test(older_database_is_migrated),
        cmocka_unit_test(newer_database_is_refused),
        cmocka_unit_test(foreign_schema_is_refused),
        cmocka_unit_test(batch_is_all_or_nothing),
        cmocka_unit_test(duplicate_inserts_are_skipped),
        cmocka_unit_test(readers_never_see_half_a_batch),
        cmocka_unit_test(committed_records_survive_kill_9),
        cmocka_unit_test(best_prefers_exact_then_other_device_then_family),
        cmocka_unit_test(best_ranks_records_by_their_fastest_sample),
        cmocka_unit_test(migration_fills_the_fastest_sample_from_the_costs),
        cmocka_unit_test(a_leaderboard_out_of_step_is_found_and_rebuilt),
        cmocka_unit_test(ties_go_to_the_earlier_record),
        cmocka_unit_test(suspect_records_are_marked_and_skipped),
        cmocka_unit_test(jobs_history_and_stats),
        cmocka_unit_test(devices_and_cost_models),
        cmocka_unit_test(readonly_handle_refuses_writes),
        cmocka_unit_test(copy_moves_everything_once),
        cmocka_unit_test(processes_starting_together_all_succeed),
        cmocka_unit_test(a_forked_child_never_touches_the_connection),
    };
    const struct CMUnitTest files[] = {
        cmocka_unit_test(garbage_file_is_not_a_database),
        cmocka_unit_test(truncated_database_gives_a_clear_error),
        cmocka_unit_test(full_disk_loses_nothing_already_stored),
    };
    const struct CMUnitTest server[] = {
        cmocka_unit_test(a_password_in_the_uri_is_refused),
        cmocka_unit_test(an_unreachable_server_is_a_clear_error),
        cmocka_unit_test(a_read_only_role_queries_and_cannot_write),
        cmocka_unit_test(concurrent_writers_store_each_record_once),
        cmocka_unit_test(a_restarted_server_loses_nothing),
    };
    if (argc == 4 && !strcmp(argv[1], "--postgresql")) {
        pg_state = argv[2];
        pg_script = argv[3];
        int missing = tt_test_pg_base("test_store", pg_state, pg_base);
        if (missing)
            return missing;
        on_pg = true;
        /* a restart must not outlast the writer's patience */
        setenv("TVM_TUNE_DB_PATIENCE", "60", 1);
        int failed = cmocka_run_group_tests_name("postgresql", common, make_dir, remove_dir);
        return failed + cmocka_run_group_tests_name("postgresql server", server, NULL, NULL);
    }
    return cmocka_run_group_tests_name("sqlite", common, make_dir, remove_dir) +
           cmocka_run_group_tests_name("sqlite files", files, make_dir, remove_dir);
}
