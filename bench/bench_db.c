/* Database benchmark: insert throughput in batches and best-config query latency with 1,000,000
 * records.  Anchors measured in the same run: one-record-per-transaction inserts (what a naive
 * logger does) and a full scan of the records (what a query without the index costs).
 *
 * usage: bench_db [RECORDS] [BATCH] [DIR]      (defaults 1000000, 1000, /tmp) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

int main(int argc, char **argv)
{
    long total = argc > 1 ? atol(argv[1]) : 1000000;
    long batch = argc > 2 ? atol(argv[2]) : 1000;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    if (total < batch || batch < 1) {
        fprintf(stderr, "usage: bench_db [RECORDS] [BATCH] [DIR]\n");
        return 2;
    }
    for (int w = 0; w < NWORKLOADS; w++)
        snprintf(workloads[w], sizeof(workloads[w]), "matmul:M=%d,N=512,K=512", 16 * (w + 1));
    for (int t = 0; t < NTARGETS; t++)
        snprintf(targets[t], sizeof(targets[t]), "llvm -mcpu=cpu%d -num-cores=%d", t, 4 + t);
    char path[512], anchor_path[512];
    snprintf(path, sizeof(path), "%s/tt-bench-%d.db", dir, (int)getpid());
    snprintf(anchor_path, sizeof(anchor_path), "%s/tt-bench-anchor-%d.db", dir, (int)getpid());
    tt_db_remove(path);
    tt_db_remove(anchor_path);
    tt_db *db;
    tt_errbuf err;
    if (tt_db_open(path, 0, &db, &err)) {
        fprintf(stderr, "bench_db: %s\n", err.msg);
        return 1;
    }
    tt_db_record *recs = calloc((size_t)batch, sizeof(*recs));
    char(*cfg)[64] = calloc((size_t)batch, 64);
    double(*costs)[3] = calloc((size_t)batch, sizeof(double[3]));
    if (!recs || !cfg || !costs)
        return 1;

    /* Anchor: one record per transaction, 2,000 records. */
    tt_db *anchor;
    if (tt_db_open(anchor_path, 0, &anchor, &err)) {
        fprintf(stderr, "bench_db: %s\n", err.msg);
        return 1;
    }
    long anchor_n = 2000;
    double t0 = tt_clock_monotonic();
    for (long i = 0; i < anchor_n; i++) {
        make_record(&recs[0], cfg[0], costs[0], i);
        if (tt_db_insert(anchor, recs, 1, NULL)) {
            fprintf(stderr, "bench_db: %s\n", tt_db_errmsg(anchor));
            return 1;
        }
    }
    double anchor_rate = (double)anchor_n / (tt_clock_monotonic() - t0);
    tt_db_close(anchor);
    tt_db_remove(anchor_path);

    t0 = tt_clock_monotonic();
    for (long b = 0; b < total / batch; b++) {
        for (long i = 0; i < batch; i++)
            make_record(&recs[i], cfg[i], costs[i], b * batch + i);
        if (tt_db_insert(db, recs, (size_t)batch, NULL)) {
            fprintf(stderr, "bench_db: %s\n", tt_db_errmsg(db));
            return 1;
        }
    }
    double insert_s = tt_clock_monotonic() - t0;
    double rate = (double)(total / batch * batch) / insert_s;

    /* Best-config queries: random (workload, target) pairs. */
    enum { QUERIES = 2000 };
    static double lat[QUERIES];
    unsigned seed = 12345;
    for (int q = 0; q < QUERIES; q++) {
        seed = seed * 1103515245u + 12345u;
        const char *w = workloads[(seed >> 8) % NWORKLOADS], *t = targets[(seed >> 20) % NTARGETS];
        tt_db_row *rows;
        size_t n;
        double q0 = tt_clock_monotonic();
        if (tt_db_best(db, w, t, NULL, 1, true, &rows, &n) || n != 1) {
            fprintf(stderr, "bench_db: best query failed: %s\n", tt_db_errmsg(db));
            return 1;
        }
        lat[q] = tt_clock_monotonic() - q0;
        tt_db_rows_free(rows, n);
    }
    qsort(lat, QUERIES, sizeof(double), cmp_double);
    /* Anchor: a full scan of every record (statistics), what an unindexed query costs. */
    tt_db_stats st;
    t0 = tt_clock_monotonic();
    tt_db_stats_get(db, 0, &st);
    double scan_s = tt_clock_monotonic() - t0;

    printf("records stored            %lld (%d workloads x %d targets)\n", (long long)st.records,
           NWORKLOADS, NTARGETS);
    printf("insert, batches of %-6ld %.0f records/s (%.2f s)\n", batch, rate, insert_s);
    printf("insert, one per commit    %.0f records/s (anchor, %ld records)\n", anchor_rate,
           anchor_n);
    printf("  ratio batched / anchor  %.1fx\n", rate / anchor_rate);
    printf("best-config query         median %.1f us, p99 %.1f us (%d queries)\n",
           lat[QUERIES / 2] * 1e6, lat[QUERIES * 99 / 100] * 1e6, QUERIES);
    printf("full scan of all records  %.1f ms (anchor)\n", scan_s * 1e3);
    printf("  ratio scan / median query %.0fx\n", scan_s / lat[QUERIES / 2]);
    tt_db_close(db);
    tt_db_remove(path);
    free(recs);
    free(cfg);
    free(costs);
    return 0;
}
