/* Database benchmark: insert throughput in batches, best-config query latency and the
 * leaderboard's with 1,000,000 records, on SQLite and, given a server, on PostgreSQL side by side
 * in one run.  Anchors measured in the same run: one-record-per-transaction inserts (what a naive
 * logger does), a full scan of the records (what a query without the index costs), and SQLite for
 * PostgreSQL.
 *
 * usage: bench_db [RECORDS] [BATCH] [DIR] [--postgresql URI]   (defaults 1000000, 1000, /tmp)
 * URI names an empty database, e.g. the one tests/db/pg_server.sh starts:
 *     TT_PG_FSYNC=on bash tests/db/pg_server.sh start /tmp/pg.state
 *     build/bench/bench_db --postgresql $(sed -n 2p /tmp/pg.state)
 *     bash tests/db/pg_server.sh stop /tmp/pg.state */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdbool.h>
#include <unistd.h>

#include "db/db.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define NWORKLOADS 100
#define NTARGETS   10

static char workloads[NWORKLOADS][64], targets[NTARGETS][64];

static void make_record(tt_db_record *r, char *cfg, double *costs, long i)
{
    snprintf(cfg, 64, "[[\"SP\", 2, 0, 512, [%ld, %ld], 1]]", 1 + i % 64, 1 + (i / 64) % 8);
    for (int k = 0; k < 3; k++)
        costs[k] = 1e-4 * (1 + (double)((i * 7919 + k * 104729) % 1000) / 100.0);
    memset(r, 0, sizeof(*r));
    r->workload = workloads[i % NWORKLOADS];
    r->target = targets[(i / NWORKLOADS) % NTARGETS];
    r->config = cfg;
    r->config_kind = TT_CONFIG_STEPS;
    r->costs = costs;
    r->ncosts = 3;
    r->error_no = i % 13 == 0 ? 4 : 0; /* some runtime errors, never the best */
    r->timestamp = 1.7e9 + (double)i;
}

typedef struct {
    double batched, single; /* inserts per second */
    double round_ms;        /* storing 64 records, a tuning round's batch */
    double median_us, p99_us, queries_per_s;
    double leaderboard_ms; /* the tracker's dashboard: every pair's best, the 50 fastest */
    double scan_ms;
    long long records;
} result;

static int fail(tt_db *db, const char *what)
{
    fprintf(stderr, "bench_db: %s: %s\n", what, tt_db_errmsg(db));
    return 1;
}

/* Everything measured on the (empty) database `where`. */
static int run(const char *where, long total, long batch, result *out)
{
    tt_db *db;
    tt_errbuf err;
    if (tt_db_open(where, 0, &db, &err)) {
        fprintf(stderr, "bench_db: %s\n", err.msg);
        return 1;
    }
    tt_db_stats st;
    if (tt_db_stats_get(db, 0, &st))
        return fail(db, "stats");
    if (st.records) {
        fprintf(stderr, "bench_db: %s already holds %lld records; give an empty database\n", where,
                (long long)st.records);
        return 1;
    }
    tt_db_record *recs = calloc((size_t)batch, sizeof(*recs));
    char(*cfg)[64] = calloc((size_t)batch, 64);
    double(*costs)[3] = calloc((size_t)batch, sizeof(double[3]));
    if (!recs || !cfg || !costs)
        return 1;
    /* Anchor: one record per transaction, 2,000 records (timestamps of their own, so that the
     * batches below are new measurements). */
    long anchor_n = 2000;
    double t0 = tt_clock_monotonic();
    for (long i = 0; i < anchor_n; i++) {
        make_record(&recs[0], cfg[0], costs[0], i);
        recs[0].timestamp += 1e8;
        if (tt_db_insert(db, recs, 1, NULL))
            return fail(db, "insert");
    }
    out->single = (double)anchor_n / (tt_clock_monotonic() - t0);
    t0 = tt_clock_monotonic();
    for (long b = 0; b < total / batch; b++) {
        for (long i = 0; i < batch; i++)
            make_record(&recs[i], cfg[i], costs[i], b * batch + i);
        if (tt_db_insert(db, recs, (size_t)batch, NULL))
            return fail(db, "insert");
    }
    double insert_s = tt_clock_monotonic() - t0;
    out->batched = (double)(total / batch * batch) / insert_s;
    /* A tuning round's 64 records into the full database, 20 times. */
    double round = 0;
    for (int r = 0; r < 20; r++) {
        for (long i = 0; i < 64 && i < batch; i++) {
            make_record(&recs[i], cfg[i], costs[i], total + r * 64 + i);
            recs[i].timestamp += 2e8;
        }
        double r0 = tt_clock_monotonic();
        if (tt_db_insert(db, recs, batch < 64 ? (size_t)batch : 64, NULL))
            return fail(db, "insert");
        round += tt_clock_monotonic() - r0;
    }
    out->round_ms = round / 20 * 1e3;

    /* Best-config queries: random (workload, target) pairs. */
    enum { QUERIES = 2000 };
    static double lat[QUERIES];
    unsigned seed = 12345;
    double q_all = tt_clock_monotonic();
    for (int q = 0; q < QUERIES; q++) {
        seed = seed * 1103515245u + 12345u;
        const char *w = workloads[(seed >> 8) % NWORKLOADS], *t = targets[(seed >> 20) % NTARGETS];
        tt_db_row *rows;
        size_t n;
        double q0 = tt_clock_monotonic();
        if (tt_db_best(db, w, t, NULL, 1, true, &rows, &n) || n != 1)
            return fail(db, "best query");
        lat[q] = tt_clock_monotonic() - q0;
        tt_db_rows_free(rows, n);
    }
    out->queries_per_s = QUERIES / (tt_clock_monotonic() - q_all);
    qsort(lat, QUERIES, sizeof(double), cmp_double);
    out->median_us = lat[QUERIES / 2] * 1e6;
    out->p99_us = lat[QUERIES * 99 / 100] * 1e6;
    /* The leaderboard (every (workload, target) pair's best), median of 21 calls. */
    double board[21];
    for (int q = 0; q < 21; q++) {
        tt_db_best_entry *e;
        size_t n;
        double q0 = tt_clock_monotonic();
        if (tt_db_leaderboard(db, 50, &e, &n) || n != 50)
            return fail(db, "leaderboard");
        board[q] = tt_clock_monotonic() - q0;
        tt_db_leaderboard_free(e, n);
    }
    qsort(board, 21, sizeof(double), cmp_double);
    out->leaderboard_ms = board[10] * 1e3;
    /* Anchor: a full scan of every record (statistics), what an unindexed query costs, and what
     * the leaderboard cost before schema 5 (it grouped every record). */
    t0 = tt_clock_monotonic();
    if (tt_db_stats_get(db, 0, &st))
        return fail(db, "stats");
    out->scan_ms = (tt_clock_monotonic() - t0) * 1e3;
    out->records = st.records;
    tt_db_close(db);
    free(recs);
    free(cfg);
    free(costs);
    return 0;
}

int main(int argc, char **argv)
{
    const char *pg = NULL;
    long pos[2] = {1000000, 1000};
    const char *dir = "/tmp";
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--postgresql") && i + 1 < argc)
            pg = argv[++i];
        else if (npos < 2)
            pos[npos++] = atol(argv[i]);
        else
            dir = argv[i];
    }
    long total = pos[0], batch = pos[1];
    if (total < batch || batch < 1) {
        fprintf(stderr, "usage: bench_db [RECORDS] [BATCH] [DIR] [--postgresql URI]\n");
        return 2;
    }
    for (int w = 0; w < NWORKLOADS; w++)
        snprintf(workloads[w], sizeof(workloads[w]), "matmul:M=%d,N=512,K=512", 16 * (w + 1));
    for (int t = 0; t < NTARGETS; t++)
        snprintf(targets[t], sizeof(targets[t]), "llvm -mcpu=cpu%d -num-cores=%d", t, 4 + t);
    char path[512];
    snprintf(path, sizeof(path), "%s/tt-bench-%d.db", dir, (int)getpid());
    tt_db_remove(path);
    result r[2] = {{0}};
    int rc = run(path, total, batch, &r[0]);
    tt_db_remove(path);
    if (!rc && pg)
        rc = run(pg, total, batch, &r[1]);
    if (rc)
        return rc;
    printf("bench_db: %ld records in batches of %ld (%d workloads x %d targets, 1 in 13 an "
           "error), plus 2,000 single inserts and 20 rounds of 64\n",
           total, batch, NWORKLOADS, NTARGETS);
    printf("SQLite: %s (WAL, synchronous=FULL)%s%s\n", dir, pg ? "; PostgreSQL: " : "",
           pg ? pg : "");
    printf("\n| measure | SQLite |%s\n|---|---|%s\n",
           pg ? " PostgreSQL | PostgreSQL / SQLite |" : "", pg ? "---|---|" : "");
    const struct {
        const char *name, *fmt;
        double a, b;
    } rows[] = {
        {"insert, batches (records/s)", "%.0f", r[0].batched, r[1].batched},
        {"insert, one per commit (records/s; anchor)", "%.0f", r[0].single, r[1].single},
        {"a round's 64 records stored (ms)", "%.2f", r[0].round_ms, r[1].round_ms},
        {"best-config query, median (us)", "%.1f", r[0].median_us, r[1].median_us},
        {"best-config query, p99 (us)", "%.1f", r[0].p99_us, r[1].p99_us},
        {"best-config queries per second", "%.0f", r[0].queries_per_s, r[1].queries_per_s},
        {"leaderboard, 50 of 1,000 pairs, median (ms)", "%.3f", r[0].leaderboard_ms,
         r[1].leaderboard_ms},
        {"full scan of all records (ms; anchor)", "%.1f", r[0].scan_ms, r[1].scan_ms},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        printf("| %s | ", rows[i].name);
        printf(rows[i].fmt, rows[i].a);
        if (pg) {
            printf(" | ");
            printf(rows[i].fmt, rows[i].b);
            printf(" | %.2f", rows[i].a > 0 ? rows[i].b / rows[i].a : 0);
        }
        printf(" |\n");
    }
    printf("\nrecords stored: %lld", r[0].records);
    if (pg)
        printf(" and %lld", r[1].records);
    printf("\n");
    printf("ratio batched / one per commit: %.1fx", r[0].batched / r[0].single);
    if (pg)
        printf(" (SQLite), %.1fx (PostgreSQL)", r[1].batched / r[1].single);
    printf("\nratio full scan / median best query: %.0fx", r[0].scan_ms * 1e3 / r[0].median_us);
    if (pg)
        printf(" (SQLite), %.0fx (PostgreSQL)", r[1].scan_ms * 1e3 / r[1].median_us);
    printf("\n");
    return 0;
}
