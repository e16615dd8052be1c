/* TVM log import and export: byte-exact round trips of real TVM records, malformed lines, mapping
 * onto our operators.  `test_tvmlog --postgresql STATE` runs them on a database of the test
 * server (tests/db/pg_server.sh) instead of a SQLite file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "db/db.h"
#include "db/pg_state.h"
#include "schedule/schedule.h"

#ifndef TT_TESTDATA
#define TT_TESTDATA "../shared/testdata/tvm-logs"
#endif

/* The real lines quoted in log-formats.md §1.4 and §2.6. */
static const char *const reference_lines[] = {
    "{\"input\": [\"llvm -keys=cpu -link-params=0 -mcpu=skylake-avx512\", \"conv2d_NCHWc.x86\", "
    "[[\"TENSOR\", [1, 3, 224, 224], \"float32\"], [\"TENSOR\", [64, 3, 7, 7], \"float32\"], [2, "
    "2], [3, 3, 3, 3], [1, 1], \"NCHW\", \"NCHW\", \"float32\"], {}], \"config\": {\"index\": 95, "
    "\"code_hash\": null, \"entity\": [[\"tile_ic\", \"sp\", [-1, 3]], [\"tile_oc\", \"sp\", [-1, "
    "32]], [\"tile_ow\", \"sp\", [-1, 8]], [\"unroll_kw\", \"ot\", true]]}, \"result\": "
    "[[9.6817e-05, 9.7265e-05, 9.7672e-05, 0.000104449, 0.000169088, 0.000172999, 0.000195078, "
    "0.000196547], 0, 0.5024964809417725, 1608475557.793732], \"version\": 0.2, \"tvm_version\": "
    "\"0.8.dev0\"}",
    "{\"input\": [\"opencl -keys=adreno,opencl,gpu -device=adreno -max_num_threads=256\", "
    "\"conv2d_nchw_winograd.image2d\", [[\"TENSOR\", [1, 512, 28, 28], \"float32\"], [\"TENSOR\", "
    "[512, 512, 3, 3], \"float32\"], [1, 1], [1, 1, 1, 1], [1, 1], \"float32\"], {}], \"config\": "
    "{\"index\": 1591, \"code_hash\": null, \"entity\": [[\"auto_unroll_max_step\", \"ot\", 4], "
    "[\"tile_y\", \"sp\", [-1, 1, 32]], [\"tile_x\", \"sp\", [-1, 4, 2]], [\"tile_rc\", \"sp\", "
    "[-1, 8]]]}, \"result\": [[0.0037244], 0, 7.06374192237854, 1653898629.7427933], \"version\": "
    "0.2, \"tvm_version\": \"0.8.dev0\"}",
    "{\"i\": [[\"[\\\"conv2d_layer\\\", 1, 7, 7, 512, 512, 3, 3, [1, 1], [1, 1]]\", \"llvm "
    "-keys=cpu -mcpu=broadwell -num-cores=2\", [8, 64, 64, 0, 0, 0, 0, 0], \"\", 1, []], [[], "
    "[[\"CI\", 5], [\"SP\", 3, 0, 1, [1, 1, 1], 1], [\"SP\", 3, 4, 512, [1, 32, 16], 1], [\"SP\", "
    "3, 8, 7, [7, 1, 1], 1], [\"SP\", 3, 12, 7, [1, 1, 1], 1], [\"SP\", 3, 16, 512, [1], 1], "
    "[\"SP\", 3, 18, 3, [1], 1], [\"SP\", 3, 20, 3, [3], 1], [\"RE\", 3, [0, 4, 8, 12, 1, 5, 9, "
    "13, 16, 18, 20, 2, 6, 10, 14, 17, 19, 21, 3, 7, 11, 15]], [\"FSP\", 6, 0, 1, 2], [\"FSP\", 6, "
    "3, 2, 2], [\"FSP\", 6, 6, 3, 2], [\"FSP\", 6, 9, 4, 2], [\"RE\", 6, [0, 3, 6, 9, 1, 4, 7, 10, "
    "2, 5, 8, 11]], [\"CA\", 3, 6, 7], [\"CA\", 1, 6, 5], [\"FU\", 6, [0, 1, 2, 3, 4, 5]], "
    "[\"AN\", 6, 0, 3], [\"PR\", 3, 0, \"auto_unroll_max_step$512\"], [\"AN\", 1, 3, 2], [\"AN\", "
    "3, 21, 2], [\"AN\", 6, 6, 2]]]], \"r\": [[0.0331129], 0, 0.900362, 1647464342], \"v\": "
    "\"v0.6\"}",
    "{\"i\": [[\"[\\\"matmul_add\\\", 1024, 1024, 1024, \\\"float32\\\"]\", \"llvm -keys=cpu\", "
    "[18, 64, 64, 0, 0, 0, 0, 0]], [[], [[\"SP\", 2, 0, 1024, [2, 1, 4], 1], [\"SP\", 2, 4, 1024, "
    "[1, 1, 8], 1], [\"SP\", 2, 8, 1024, [4], 1], [\"RE\", 2, [0, 4, 1, 5, 8, 2, 6, 9, 3, 7]], "
    "[\"FSP\", 4, 0, 0, 2], [\"FSP\", 4, 3, 1, 2], [\"RE\", 4, [0, 3, 1, 4, 2, 5]], [\"CA\", 2, 4, "
    "3], [\"FU\", 4, [0, 1]], [\"AN\", 4, 0, 3], [\"PR\", 2, 0, \"auto_unroll_max_step$8\"], "
    "[\"AN\", 2, 9, 2], [\"AN\", 4, 4, 2]]]], \"r\": [[0.0044742], 0, 0.335558, 1607112214], "
    "\"v\": \"v0.3\"}",
};

static char path[640];

static int setup(void **state)
{
    snprintf(path, sizeof(path), "/tmp/tt-test-log-%d.db", (int)getpid());
    return 0;
}

static int teardown(void **state)
{
    tt_db_remove(path); /* a file; nothing for a server's database */
    return 0;
}

/* PostgreSQL: the server's URI up to the database name; "" for SQLite. */
static char pg_base[512];

/* A new empty database t_tvmlog on the server. */
static void pg_fresh(void)
{
    tt_test_pg_sql(pg_base, "tuning", "DROP DATABASE IF EXISTS t_tvmlog WITH (FORCE)");
    tt_test_pg_sql(pg_base, "tuning", "CREATE DATABASE t_tvmlog");
    snprintf(path, sizeof(path), "%st_tvmlog", pg_base);
}

static tt_db *fresh_db(void)
{
    if (pg_base[0])
        pg_fresh();
    else
        teardown(NULL);
    tt_db *db;
    tt_errbuf err;
    if (tt_db_open(path, 0, &db, &err))
        fail_msg("%s", err.msg);
    return db;
}

/* Imports `text` and returns everything exported, one line each. */
static char *import_export(tt_db *db, const char *text, tt_db_import_report *rep)
{
    FILE *in = fmemopen((void *)text, strlen(text), "r");
    tt_errbuf err = {{0}};
    if (tt_db_import_stream(db, in, "test", rep, &err))
        fail_msg("%s", err.msg);
    fclose(in);
    char *buf = NULL;
    size_t len = 0, n;
    FILE *out = open_memstream(&buf, &len);
    assert_int_equal(tt_db_export(db, NULL, TT_LOG_AUTO, out, &n, &err), TT_OK);
    fclose(out);
    return buf;
}

static void reference_lines_come_back_byte_for_byte(void **state)
{
    for (size_t i = 0; i < sizeof(reference_lines) / sizeof(reference_lines[0]); i++) {
        tt_db *db = fresh_db();
        tt_db_import_report rep;
        char text[8192];
        snprintf(text, sizeof(text), "%s\n", reference_lines[i]);
        char *out = import_export(db, text, &rep);
        assert_int_equal(rep.inserted, 1);
        assert_string_equal(out, text);
        free(out);
        tt_db_close(db);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Splits into sorted unique non-comment lines. */
static size_t lines_of(char *text, char **lines, size_t max)
{
    size_t n = 0;
    for (char *save, *l = strtok_r(text, "\n", &save); l && n < max;
         l = strtok_r(NULL, "\n", &save))
        if (l[0] == '{')
            lines[n++] = l;
    qsort(lines, n, sizeof(char *), cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || strcmp(lines[u - 1], lines[i]))
            lines[u++] = lines[i];
    return u;
}

static char *slurp(const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f)
        fail_msg("cannot open %s", file);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int c;
    while ((c = fgetc(f)) != EOF)
        fputc(c, m);
    fclose(m);
    fclose(f);
    return buf;
}

static void public_tvm_logs_round_trip(void **state)
{
    static const char *const files[] = {"autotvm-resnet_50-B1-platinum-8124m.log",
                                        "autoscheduler-matmul.json", "autoscheduler-conv2d.json",
                                        "autoscheduler-resnet-50-NHWC-B1-llvm.json"};
    for (size_t f = 0; f < 4; f++) {
        char file[512];
        snprintf(file, sizeof(file), "%s/%s", TT_TESTDATA, files[f]);
        char *text = slurp(file);
        tt_db *db = fresh_db();
        tt_db_import_report rep;
        char *out = import_export(db, text, &rep);
        assert_int_equal(rep.malformed, 0);
        assert_true(rep.records > 0);
        static char *a[4096], *b[4096];
        size_t na = lines_of(text, a, 4096), nb = lines_of(out, b, 4096);
        assert_int_equal(na, nb);
        for (size_t i = 0; i < na; i++)
            assert_string_equal(a[i], b[i]);
        /* Importing the same file again adds nothing. */
        tt_db_import_report again;
        tt_errbuf err;
        assert_int_equal(tt_db_import_file(db, file, &again, &err), TT_OK);
        assert_int_equal(again.inserted, 0);
        assert_int_equal(again.duplicates, rep.records);
        free(text);
        free(out);
        tt_db_close(db);
    }
}

static void malformed_lines_are_reported_and_the_rest_imported(void **state)
{
    char text[16384];
    snprintf(
        text, sizeof(text),
        "# a comment\n"
        "\n"
        "%s\n"
        "{\"input\": [\"llvm\", \"t\", [], {}], \"config\": {\"index\": 0}}\n" /* line 4 */
        "not json at all\n"
        "{\"i\": [[\"k\", \"llvm\"], [[], []]], \"r\": [[1e-3], 11, 0.1, 5], \"v\": \"v0.6\"}\n"
        "{\"i\": [[\"k\", \"llvm\"], [[], []]], \"r\": [[1e-3], 0, 0.1, 5], \"v\": \"v0.6\", "
        "\"x\": 1}\n"
        "{\"i\": [[\"a\", 1, \"llvm\"], {\"t\": 1}], \"r\": [[1], 0, 0, 0], \"v\": 0.1}\n"
        "%s\n",
        reference_lines[0], reference_lines[3]);
    tt_db *db = fresh_db();
    FILE *in = fmemopen(text, strlen(text), "r");
    tt_db_import_report rep;
    tt_errbuf err;
    assert_int_equal(tt_db_import_stream(db, in, "mixed.log", &rep, &err), TT_OK);
    fclose(in);
    assert_int_equal(rep.lines, 9);
    assert_int_equal(rep.comments, 2);
    assert_int_equal(rep.malformed, 5);
    assert_int_equal(rep.inserted, 2);
    if (!strstr(rep.first_error, "mixed.log:4: \"config\" must be"))
        fail_msg("first error: %s", rep.first_error);
    tt_db_close(db);
    /* Each kind of bad line says what is wrong. */
    static const struct {
        const char *line, *fragment;
    } bad[] = {
        {"not json", "not JSON"},
        {"[1, 2]", "a record is a JSON object"},
        {"{\"i\": [[\"k\", \"llvm\"], [[], []]], \"r\": [[1e-3], 11, 0.1, 5], \"v\": \"v0.6\"}",
         "error_no"},
        {"{\"i\": [[\"k\", \"llvm\"], [[], []]], \"r\": [[-1], 0, 0.1, 5], \"v\": \"v0.6\"}",
         "non-negative"},
        {"{\"i\": [[\"k\", \"llvm\"], [[], []]], \"r\": [[1e-3], 0, 0.1, 5], \"v\": \"v0.6\", "
         "\"x\": 1}",
         "unexpected key"},
        {"{\"i\": [[\"k\"], [[], []]], \"r\": [[1e-3], 0, 0.1, 5], \"v\": \"v0.6\"}",
         "2 to 6 fields"},
        {"{\"i\": [[\"k\", \"llvm\"], [[], [[1]]]], \"r\": [[1e-3], 0, 0.1, 5], \"v\": \"v0.6\"}",
         "step 0"},
        {"{\"v\": 0.1, \"i\": [], \"r\": []}", "v0.1 records are not supported"},
        {"{\"input\": [\"llvm\", \"t\", [], {}], \"config\": {\"index\": 0, \"entity\": []}, "
         "\"result\": [[1e-3], 0, 1, 2], \"version\": 0.1}",
         "\"version\" must be 0.2"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tt_arena arena;
        tt_arena_init(&arena, 4096);
        tt_db_record r;
        tt_errbuf e = {{0}};
        assert_int_equal(tt_log_parse_line(bad[i].line, &arena, &r, &e), TT_ERR_PARSE);
        if (!strstr(e.msg, bad[i].fragment))
            fail_msg("'%s': message '%s' lacks '%s'", bad[i].line, e.msg, bad[i].fragment);
        tt_arena_free(&arena);
    }
}

static void known_auto_scheduler_workloads_map_onto_our_operators(void **state)
{
    tt_db *db = fresh_db();
    tt_db_import_report rep;
    char text[8192];
    snprintf(text, sizeof(text), "%s\n", reference_lines[3]);
    char *out = import_export(db, text, &rep);
    free(out);
    assert_int_equal(rep.mapped, 1);
    /* The mapped record answers a best-config query for the same computation written in TE. */
    const char *te = "te:matmul[i,j] += A[i,k] * B[k,j]; out[i,j] = matmul[i,j] + C[i,j]; "
                     "A:float32[1024,1024]; B:float32[1024,1024]; C:float32[1024,1024]";
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(db, te, "llvm -keys=cpu", NULL, 1, true, &rows, &n), TT_OK);
    assert_int_equal(n, 1);
    assert_true(rows[0].gflops > 0);
    /* Its config replays and lowers. */
    tt_workload *w;
    tt_state *st;
    tt_program *prog;
    tt_errbuf err;
    assert_int_equal(tt_workload_parse(te, &w, &err), TT_OK);
    assert_int_equal(tt_state_from_json(&w->dag, rows[0].config, &st, &err), TT_OK);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
    tt_db_rows_free(rows, n);
    tt_db_close(db);
}

static void our_records_export_as_auto_scheduler_lines(void **state)
{
    tt_db *db = fresh_db();
    double c[2] = {1.5e-3, 1.25e-3};
    tt_db_record r = {.workload = "matmul:M=64,N=64,K=64",
                      .target = "llvm -num-cores=4",
                      .config = "[[\"SP\", 2, 0, 64, [8], 1]]",
                      .config_kind = TT_CONFIG_STEPS,
                      .costs = c,
                      .ncosts = 2,
                      .total_s = 0.5,
                      .timestamp = 1700000000.7};
    assert_int_equal(tt_db_insert(db, &r, 1, NULL), TT_OK);
    char *buf = NULL;
    size_t len = 0, n;
    tt_errbuf err;
    FILE *out = open_memstream(&buf, &len);
    assert_int_equal(tt_db_export(db, NULL, TT_LOG_ANSOR, out, &n, &err), TT_OK);
    fclose(out);
    assert_string_equal(
        buf, "{\"i\": [[\"[\\\"matmul:M=64,N=64,K=64\\\"]\", \"llvm -num-cores=4\", "
             "[4, 64, 64, 0, 0, 0, 0, 0], \"\", 0, []], [[], [[\"SP\", 2, 0, 64, [8], 1]]]], "
             "\"r\": [[0.0015, 0.00125], 0, 0.5, 1700000000], \"v\": \"v0.6\"}\n");
    free(buf);
    /* Only AutoTVM records export as AutoTVM lines. */
    buf = NULL;
    out = open_memstream(&buf, &len);
    assert_int_equal(tt_db_export(db, NULL, TT_LOG_AUTOTVM, out, &n, &err), TT_OK);
    fclose(out);
    assert_int_equal(n, 0);
    free(buf);
    /* Packed weights (LR) and double buffering are ours: TVM would not parse the step nor know
     * the pragma, and lays out weights itself. */
    tt_db_record lr = r;
    lr.config = "[[\"SP\", 2, 0, 64, [8], 1], [\"LR\", 1], [\"PR\", 1, 0, \"double_buffer\"]]";
    lr.timestamp = 1700000001;
    assert_int_equal(tt_db_insert(db, &lr, 1, NULL), TT_OK);
    buf = NULL;
    out = open_memstream(&buf, &len);
    assert_int_equal(tt_db_export(db, NULL, TT_LOG_ANSOR, out, &n, &err), TT_OK);
    fclose(out);
    assert_int_equal(n, 2);
    assert_null(strstr(buf, "LR"));
    assert_null(strstr(buf, "double_buffer"));
    const char *second = strchr(buf, '\n') + 1;
    assert_non_null(strstr(second, "[[], [[\"SP\", 2, 0, 64, [8], 1]]]]"));
    /* ... and its key says so, so that it does not come back as a config of ours */
    assert_non_null(strstr(second,
                           "[\"[\\\"matmul:M=64,N=64,K=64\\\", \\\"tvm-tune: steps TVM cannot read "
                           "left out\\\"]\""));
    /* Imported into another database, the whole record comes back as ours (the best config of
     * its workload); the one that lost steps is kept as a foreign record. */
    tt_db_close(db);
    db = fresh_db();
    FILE *in = fmemopen(buf, strlen(buf), "r");
    tt_db_import_report rep;
    assert_int_equal(tt_db_import_stream(db, in, "exported", &rep, &err), TT_OK);
    fclose(in);
    assert_int_equal(rep.records, 2);
    assert_int_equal(rep.mapped, 1);
    tt_db_row *rows;
    assert_int_equal(
        tt_db_best(db, "matmul:M=64,N=64,K=64", "llvm -num-cores=4", NULL, 2, false, &rows, &n),
        TT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].config, "[[\"SP\", 2, 0, 64, [8], 1]]");
    assert_true(rows[0].fastest_s == 1.25e-3);
    tt_db_rows_free(rows, n);
    free(buf);
    tt_db_close(db);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_lines_come_back_byte_for_byte),
        cmocka_unit_test(public_tvm_logs_round_trip),
        cmocka_unit_test(malformed_lines_are_reported_and_the_rest_imported),
        cmocka_unit_test(known_auto_scheduler_workloads_map_onto_our_operators),
        cmocka_unit_test(our_records_export_as_auto_scheduler_lines),
    };
    if (argc == 3 && !strcmp(argv[1], "--postgresql")) {
        int missing = tt_test_pg_base("test_tvmlog", argv[2], pg_base);
        if (missing)
            return missing;
        return cmocka_run_group_tests_name("postgresql", tests, NULL, NULL);
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
