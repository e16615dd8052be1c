/* tvm-compile's library builder: the functions of a compiled library compute what the definition
 * computes; the header is clean C and C++; records, fallbacks, the default schedule and --strict
 * behave as documented; bad input (unknown workload, no records, a target with records only for
 * another, a corrupt record, an unknown device) gives a clear error. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "db/db.h"
#include "deploy/compile.h"
#include "codegen/codegen.h"
#include "schedule/schedule.h"
#include "tuner/sketch.h"
#include "tuner/similar.h"
#include "tuner/space.h"

static char dir[256], db_path[300];

/* Inserts one record of `workload` with `config` and every sample `seconds`. */
static long long add_record(const char *workload, const char *target, const char *device,
                            const char *config, double seconds)
{
    tt_db *db;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_db_open(db_path, 0, &db, &err), TT_OK);
    double costs[3] = {seconds, seconds, seconds};
    tt_db_record r = {0};
    r.workload = workload;
    r.target = target;
    r.device = device;
    r.config = config;
    r.config_kind = TT_CONFIG_STEPS;
    r.costs = costs;
    r.ncosts = 3;
    static double stamp = 1.7e9;
    r.timestamp = stamp += 1;
    assert_int_equal(tt_db_insert(db, &r, 1, NULL), TT_OK);
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(db, workload, target, device, 1, false, &rows, &n), TT_OK);
    long long id = n ? rows[0].id : 0;
    tt_db_rows_free(rows, n);
    tt_db_close(db);
    return id;
}

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/tt-compile-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(db_path, sizeof(db_path), "%s/tuning.db", dir);
    return 0;
}

static int teardown(void **state)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static tt_status compile(const char *target, const tt_compile_kernel *k, int n, bool strict,
                         bool no_fallback, const char *device, const char *name,
                         tt_compile_report *rep, char *warnings, size_t wn, tt_errbuf *err)
{
    char out[400];
    snprintf(out, sizeof(out), "%s/out/%s", dir, name);
    FILE *w = tmpfile();
    tt_compile_options o = {db_path, target, device, out, k, n, strict, no_fallback, NULL, w};
    tt_status s = tt_compile(&o, rep, err);
    rewind(w);
    size_t len = fread(warnings, 1, wn - 1, w);
    warnings[len] = 0;
    fclose(w);
    return s;
}

typedef int (*fn3)(void *, void *, void *);
typedef int (*fn2)(const void *, void *);

static char *read_text(const char *path);

/* The replacement text of `#define NAME ...` in the header, into out[n]; false when it has none. */
static bool macro_value(const char *header, const char *name, char *out, size_t n)
{
    char def[240];
    snprintf(def, sizeof(def), "#define %s ", name);
    const char *at = strstr(header, def);
    if (!at)
        return false;
    at += strlen(def);
    size_t k = 0;
    while (at[k] && at[k] != '\n' && at[k] != ' ' && k + 1 < n) {
        out[k] = at[k];
        k++;
    }
    out[k] = 0;
    return k > 0;
}

/* Runs f on args and compares the outputs with want. */
static void expect_outputs(const tt_workload *w, fn3 f, void *const *args, void *const *got,
                           void *const *want, const char *what)
{
    tt_errbuf err = {{0}};
    assert_int_equal(f(args[0], args[1], args[2]), 0);
    if (tt_verify_outputs(&w->dag, (void **)got, (void **)want, 1e-4, 1e-5, NULL, &err))
        fail_msg("%s (%s): %s", what, w->key, err.msg);
}

/* Calls `sym` of the compiled library on random row-major inputs and compares with the
 * definition.  When the header declares a packed form (its record reads inputs packed), each
 * input it names goes through SYM_pack_NAME into the size the header gives, SYM_packed gets
 * them and is checked too; *packed counts those inputs.  The packed form's functions are found
 * by the tagged symbols the header's macros name, and must all be there or all absent. */
static void check_function_packed(void *lib, const char *header, const char *sym,
                                  const char *workload, int *packed)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse(workload, &w, &err), TT_OK);
    int params[64], nin;
    int np = tt_dag_params(&w->dag, params, 64, &nin);
    assert_int_equal(np, 3); /* the functions tested here take three buffers */
    void *want[3], *got[3];
    for (int i = 0; i < np; i++) {
        const tt_op *op = &w->dag.ops.data[params[i]];
        size_t bytes = (size_t)tt_op_numel(op) * (size_t)tt_dtype_bytes(op->dtype);
        want[i] = malloc(bytes);
        got[i] = i < nin ? want[i] : malloc(bytes);
        if (i < nin)
            tt_fill_random(want[i], op->dtype, tt_op_numel(op), 7 + (uint64_t)i);
        else
            memset(got[i], 0xff, bytes);
    }
    assert_int_equal(tt_dag_eval(&w->dag, want, &err), TT_OK);
    fn3 f = (fn3)dlsym(lib, sym);
    assert_non_null(f);
    /* SYM: every input row-major, whatever the record */
    expect_outputs(w, f, got, got, want, sym);
    char name[200], real[200];
    snprintf(name, sizeof(name), "%s_packed", sym);
    bool has_packed = macro_value(header, name, real, sizeof(real));
    /* never the untagged name: code built against another library must not link */
    assert_null(dlsym(lib, name));
    void *args[3] = {got[0], got[1], got[2]};
    *packed = 0;
    for (int i = 0; i < nin; i++) {
        const char *pname = w->dag.ops.data[params[i]].name;
        char psym[200], preal[200], macro[200];
        snprintf(psym, sizeof(psym), "%s_pack_%s", sym, pname);
        bool declared = macro_value(header, psym, preal, sizeof(preal));
        assert_true(!declared || has_packed);
        assert_null(dlsym(lib, psym));
        if (!declared)
            continue;
        fn2 pack = (fn2)dlsym(lib, preal);
        assert_non_null(pack);
        snprintf(macro, sizeof(macro), "_%s_PACKED_ELEMENTS ", pname);
        for (char *c = macro; *c; c++)
            *c = (char)toupper((unsigned char)*c);
        const char *def = strstr(header, macro);
        assert_non_null(def);
        long long elems = atoll(def + strlen(macro));
        assert_true(elems >= tt_op_numel(&w->dag.ops.data[params[i]]));
        args[i] = malloc((size_t)elems * sizeof(float));
        assert_int_equal(pack(got[i], args[i]), 0);
        ++*packed;
    }
    if (has_packed) {
        assert_true(*packed > 0);
        fn3 fp = (fn3)dlsym(lib, real);
        assert_non_null(fp);
        memset(got[2], 0xff,
               (size_t)tt_op_numel(&w->dag.ops.data[params[2]]) *
                   (size_t)tt_dtype_bytes(w->dag.ops.data[params[2]].dtype));
        expect_outputs(w, fp, args, got, want, real);
    }
    for (int i = 0; i < nin; i++)
        if (args[i] != got[i])
            free(args[i]);
    for (int i = 0; i < np; i++) {
        if (got[i] != want[i])
            free(got[i]);
        free(want[i]);
    }
    tt_workload_free(w);
}

static void check_function(void *lib, const char *header, const char *sym, const char *workload)
{
    int packed;
    check_function_packed(lib, header, sym, workload, &packed);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

#define MM   "matmul:M=64,N=48,K=32"
#define CONV "conv2d_nhwc:N=1,H=10,W=10,CI=8,CO=16,K=3,S=1,P=1"
#define TILED                                                                                      \
    "[[\"SP\", 2, 0, 64, [8], 1], [\"SP\", 2, 2, 48, [16], 1], [\"RE\", 2, [0, 2, 1, 4, 3]], "     \
    "[\"AN\", 2, 0, 3], [\"AN\", 2, 4, 2]]"

/* The best record of a workload becomes its function; a workload without records gets the
 * default schedule with a warning; both compute the definition. */
static void library_functions_match_the_definition(void **state)
{
    add_record(MM, "llvm", "dev-a", "[]", 5e-3); /* slower: not chosen */
    long long best = add_record(MM, "llvm", "dev-a", TILED, 1e-4);
    tt_compile_kernel k[2] = {{MM, "mm"}, {CONV, "conv"}};
    tt_compile_report rep[2];
    char warn[4096];
    tt_errbuf err = {{0}};
    if (compile("llvm", k, 2, false, false, NULL, "libkern", rep, warn, sizeof(warn), &err))
        fail_msg("%s", err.msg);
    assert_int_equal(rep[0].source, TT_COMPILE_EXACT);
    assert_int_equal(rep[0].record, best);
    assert_true(rep[0].parallel);
    assert_int_equal(rep[1].source, TT_COMPILE_DEFAULT);
    assert_non_null(strstr(warn, "warning: no record of " CONV));
    assert_non_null(strstr(warn, "using the default schedule"));
    char path[400];
    snprintf(path, sizeof(path), "%s/out/libkern.so", dir);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        fail_msg("%s", dlerror());
    /* The header says where each function came from. */
    snprintf(path, sizeof(path), "%s/out/libkern.h", dir);
    char *h = read_text(path);
    check_function(lib, h, "mm", MM);
    check_function(lib, h, "conv", CONV);
    dlclose(lib);
    char line[200];
    snprintf(line, sizeof(line), "record %lld (exact match), fastest 0.0001 s", best);
    assert_non_null(strstr(h, line));
    assert_non_null(strstr(h, "int mm(const float *A, const float *B, float *C);"));
    assert_non_null(strstr(h, "the DEFAULT schedule"));
    snprintf(line, sizeof(line), "#define MM_TVM_RECORD %lldLL", best);
    assert_non_null(strstr(h, line));
    assert_non_null(strstr(h, "#define CONV_TVM_RECORD 0LL"));
    snprintf(path, sizeof(path), "%s/out/libkern.pc", dir);
    /* The archive carries the kernels' thread pool: no libgomp. */
    assert_non_null(strstr(read_text(path), "libkern.a -lm -lpthread"));
    assert_null(strstr(read_text(path), "gomp"));
}

/* A record that reads the weights packed (LR): SYM still takes them row-major; the packed form
 * beside it (SYM_pack_NAME with the packed size, SYM_packed) has symbols tagged with the
 * layout, and packing then calling it computes the definition too. */
static void packed_weights_come_with_their_packing_function(void **state)
{
    long long id = add_record(MM, "llvm", "dev-a",
                              "[[\"SP\", 2, 0, 64, [8], 1], [\"SP\", 2, 2, 48, [16], 1], "
                              "[\"SP\", 2, 4, 32, [4], 1], [\"RE\", 2, [0, 2, 4, 1, 5, 3]], "
                              "[\"AN\", 2, 0, 3], [\"AN\", 2, 5, 2], [\"LR\", 1]]",
                              5e-5);
    tt_compile_kernel k[1] = {{MM, "dense"}};
    tt_compile_report rep[1];
    char warn[4096];
    tt_errbuf err = {{0}};
    if (compile("llvm", k, 1, true, false, NULL, "libpacked", rep, warn, sizeof(warn), &err))
        fail_msg("%s", err.msg);
    assert_int_equal(rep[0].record, id);
    char path[400];
    snprintf(path, sizeof(path), "%s/out/libpacked.h", dir);
    char *h = read_text(path);
    assert_non_null(strstr(h, "int dense(const float *A, const float *B, float *C);"));
    assert_non_null(strstr(h, "int dense_pack_B(const float *B, float *B_packed);"));
    assert_non_null(
        strstr(h, "int dense_packed(const float *A, const float *B_packed, float *C);"));
    assert_non_null(strstr(h, "#define DENSE_B_PACKED_ELEMENTS 1536LL"));
    char tag[32];
    assert_true(macro_value(h, "dense_packed", tag, sizeof(tag)));
    assert_true(!strncmp(tag, "dense_packed_L", 14) && strlen(tag) == 14 + 8);
    assert_true(macro_value(h, "dense_pack_B", tag, sizeof(tag)));
    assert_true(!strncmp(tag, "dense_pack_B_L", 14));
    snprintf(path, sizeof(path), "%s/out/libpacked.so", dir);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        fail_msg("%s", dlerror());
    int packed;
    check_function_packed(lib, h, "dense", MM, &packed);
    assert_int_equal(packed, 1);
    dlclose(lib);
    /* another function may not take a name of the packed form */
    tt_compile_kernel clash[2] = {{MM, "dense"}, {CONV, "dense_packed"}};
    tt_compile_report rep2[2];
    assert_int_equal(
        compile("llvm", clash, 2, false, false, NULL, "libclash", rep2, warn, sizeof(warn), &err),
        TT_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "'dense_packed' is a name of the packed form of 'dense'"));
}

/* The header compiles warning-free as C and C++, pedantic. */
static void header_is_clean_c_and_cxx(void **state)
{
    /* a library of plain functions, and one with a packed form */
    static const char *const libs[] = {"libkern", "libpacked"};
    for (int i = 0; i < 2; i++) {
        char cmd[1200];
        snprintf(cmd, sizeof(cmd),
                 "cc -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c %s/out/%s.h && "
                 "c++ -std=c++11 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c++ "
                 "%s/out/%s.h",
                 dir, libs[i], dir, libs[i]);
        assert_int_equal(system(cmd), 0);
    }
}

/* --strict, --no-fallback, family and device fallbacks, as documented. */
static void strict_and_fallbacks(void **state)
{
    tt_compile_kernel k[1] = {{CONV, "conv"}};
    tt_compile_report rep[1];
    char warn[4096];
    tt_errbuf err = {{0}};
    assert_int_equal(
        compile("llvm", k, 1, true, false, NULL, "strict", rep, warn, sizeof(warn), &err),
        TT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no record of " CONV));
    assert_non_null(strstr(err.msg, "(--strict)"));
    /* Records of the same family (another -mcpu of this machine's llvm) serve, and say so. */
    const char *fam = "llvm -mcpu=generic";
    long long id = add_record(MM, fam, "dev-b", TILED, 2e-4);
    k[0].workload = MM;
    k[0].symbol = "mm";
    assert_int_equal(
        compile(fam, k, 1, false, false, "dev-a", "devfallback", rep, warn, sizeof(warn), &err),
        TT_OK);
    assert_int_equal(rep[0].source, TT_COMPILE_OTHER_DEVICE);
    assert_int_equal(rep[0].record, id);
    assert_non_null(strstr(warn, "not of this device"));
    assert_int_equal(
        compile(fam, k, 1, true, true, "dev-a", "nofallback", rep, warn, sizeof(warn), &err),
        TT_ERR_NOT_FOUND);
    /* A device the database never saw. */
    assert_int_equal(
        compile("llvm", k, 1, false, false, "dev-z", "nodev", rep, warn, sizeof(warn), &err),
        TT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no records of device 'dev-z'"));
}

/* Bad input: each a clear error naming what and where. */
static void errors_are_clear(void **state)
{
    tt_compile_report rep[2];
    char warn[4096];
    tt_errbuf err = {{0}};
    tt_compile_kernel unknown[1] = {{"winograd:N=4", "w"}};
    assert_int_equal(
        compile("llvm", unknown, 1, false, false, NULL, "e1", rep, warn, sizeof(warn), &err),
        TT_ERR_UNKNOWN_OP);
    assert_non_null(strstr(err.msg, "workload 'winograd:N=4'"));
    /* Records only for another architecture: the default, and the warning names them. */
    const char *softmax = "softmax:M=16,N=32";
    add_record(softmax, "llvm -mtriple=aarch64-linux-gnu", "board", "[]", 1e-3);
    tt_compile_kernel sm[1] = {{softmax, "sm"}};
    assert_int_equal(
        compile("llvm", sm, 1, false, false, NULL, "e2", rep, warn, sizeof(warn), &err), TT_OK);
    assert_int_equal(rep[0].source, TT_COMPILE_DEFAULT);
    assert_non_null(strstr(warn, "records exist for 'llvm -mtriple=aarch64-linux-gnu'"));
    assert_int_equal(compile("llvm", sm, 1, true, false, NULL, "e3", rep, warn, sizeof(warn), &err),
                     TT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "records exist for 'llvm -mtriple=aarch64-linux-gnu'"));
    /* A corrupt record (its config names a stage the workload does not have). */
    const char *add = "add:M=16,N=16";
    long long bad = add_record(add, "llvm", "dev-a", "[[\"SP\", 9, 0, 16, [4], 1]]", 1e-6);
    tt_compile_kernel ad[1] = {{add, "addk"}};
    assert_int_equal(
        compile("llvm", ad, 1, false, false, NULL, "e4", rep, warn, sizeof(warn), &err),
        TT_ERR_PARSE);
    char want[100];
    snprintf(want, sizeof(want), "record %lld of %s (target 'llvm') is corrupt", bad, add);
    if (!strstr(err.msg, want))
        fail_msg("%s", err.msg);
    /* Symbols must be C identifiers, once each; targets must be buildable. */
    tt_compile_kernel two[2] = {{MM, "f"}, {CONV, "f"}};
    assert_int_equal(
        compile("llvm", two, 2, false, false, NULL, "e5", rep, warn, sizeof(warn), &err),
        TT_ERR_INVALID_ARG);
    two[0].symbol = "9lives";
    assert_int_equal(
        compile("llvm", two, 2, false, false, NULL, "e6", rep, warn, sizeof(warn), &err),
        TT_ERR_INVALID_ARG);
    assert_int_equal(
        compile("cuda", sm, 1, false, false, NULL, "e7", rep, warn, sizeof(warn), &err),
        TT_ERR_UNSUPPORTED);
    /* A file that is not a database. */
    char saved[300];
    snprintf(saved, sizeof(saved), "%s", db_path);
    snprintf(db_path, sizeof(db_path), "%s/out/libkern.h", dir);
    assert_int_not_equal(
        compile("llvm", sm, 1, false, false, NULL, "e8", rep, warn, sizeof(warn), &err), TT_OK);
    snprintf(db_path, sizeof(db_path), "%s", saved);
}

/* A board's library: aarch64 objects in the archive and the shared object. */
static void cross_target_library(void **state)
{
    tt_compile_kernel k[1] = {{MM, "mm"}};
    tt_compile_report rep[1];
    char warn[4096];
    tt_errbuf err = {{0}};
    if (compile("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", k, 1, false, false, NULL,
                "libboard", rep, warn, sizeof(warn), &err))
        fail_msg("%s", err.msg);
    char path[400];
    snprintf(path, sizeof(path), "%s/out/libboard.so", dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char h[20];
    assert_int_equal(fread(h, 1, 20, f), 20);
    fclose(f);
    assert_int_equal(h[18] | h[19] << 8, 183); /* EM_AARCH64 */
}

/* OpenCL records build as they were measured: the tuner's baseline [] is the naive GPU binding
 * (not one work-item running the whole nest), and a record of a GPU with 1024 work-items a group
 * builds (the device's own limits apply when it runs, not the code generator's defaults). */
static void opencl_records_build_as_measured(void **state)
{
    (void)state;
    static const char *const w_naive = "matmul:M=32,N=32,K=16", *const w_wide =
                                                                    "matmul:M=64,N=64,K=8";
    add_record(w_naive, "opencl", NULL, "[]", 1e-5);
    tt_workload *w;
    tt_errbuf err = {{0}};
    tt_state *st;
    assert_int_equal(tt_workload_parse(w_wide, &w, &err), TT_OK);
    assert_int_equal(tt_sketch_gpu_default(&w->dag, 512, &st, &err), TT_OK);
    char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
    add_record(w_wide, "opencl", NULL, steps, 1e-5);
    tt_compile_kernel k[2] = {{w_naive, "naive"}, {w_wide, "wide"}};
    tt_compile_report rep[2];
    char warn[4096];
    if (compile("opencl", k, 2, true, false, NULL, "libgpu", rep, warn, sizeof(warn), &err))
        fail_msg("%s", err.msg);
    assert_int_equal(rep[0].source, TT_COMPILE_EXACT);
    assert_int_equal(rep[1].source, TT_COMPILE_EXACT);
    char path[400];
    snprintf(path, sizeof(path), "%s/out/libgpu.so", dir);
    char *lib = NULL;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    lib = malloc((size_t)len + 1);
    assert_int_equal(fread(lib, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    lib[len] = 0;
    /* the kernels' sources, as the library embeds them */
    const char *naive = NULL, *wide = NULL;
    for (long i = 0; i + 16 < len; i++) {
        if (!naive && !memcmp(lib + i, "void naive_0(", 13))
            naive = lib + i;
        if (!wide && !memcmp(lib + i, "void wide_0(", 12))
            wide = lib + i;
    }
    assert_non_null(naive);
    assert_non_null(wide);
    assert_non_null(strstr(naive, "get_local_id(0)")); /* bound, not one work-item */
    assert_non_null(strstr(wide - 60, "reqd_work_group_size(512, 1, 1)"));
    free(lib);
    free(steps);
    tt_state_free(st);
    tt_workload_free(w);
}

/* A record beyond the target's -max_num_threads (tuned on a device that allows more) is refused
 * with the option and the kernel named, and nothing is written; the same target without the
 * option builds it. */
static void opencl_record_beyond_max_num_threads_is_refused(void **state)
{
    (void)state;
    static const char *const wl = "matmul:M=64,N=64,K=12";
    static const char *const narrow = "opencl -max_num_threads=64";
    tt_workload *w;
    tt_errbuf err = {{0}};
    tt_state *st;
    assert_int_equal(tt_workload_parse(wl, &w, &err), TT_OK);
    assert_int_equal(tt_sketch_gpu_default(&w->dag, 128, &st, &err), TT_OK);
    char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
    add_record(wl, narrow, NULL, steps, 1e-5);
    add_record(wl, "opencl", NULL, steps, 1e-5);
    tt_compile_kernel k = {wl, "narrow"};
    tt_compile_report rep;
    char warn[4096], path[400];
    assert_int_equal(
        compile(narrow, &k, 1, true, false, NULL, "libnarrow", &rep, warn, sizeof(warn), &err),
        TT_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "beyond the target's -max_num_threads=64"));
    assert_non_null(strstr(err.msg, "threadIdx.x has extent 128, more than the 64 allowed"));
    assert_non_null(strstr(err.msg, wl));
    static const char *const outputs[] = {"libnarrow.so", "libnarrow.a", "libnarrow.h",
                                          "libnarrow.pc"};
    for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++) {
        snprintf(path, sizeof(path), "%s/out/%s", dir, outputs[i]);
        assert_int_equal(access(path, F_OK), -1);
    }
    if (compile("opencl", &k, 1, true, false, NULL, "libnarrow", &rep, warn, sizeof(warn), &err))
        fail_msg("%s", err.msg);
    snprintf(path, sizeof(path), "%s/out/libnarrow.so", dir);
    assert_int_equal(access(path, F_OK), 0);
    free(steps);
    tt_state_free(st);
    tt_workload_free(w);
}

/* TVM's GPU target options: -max_shared_memory_per_block refuses a record of the target whose
 * tiles take more local memory (naming the option), skips such a record of another target of
 * the family (a warning, then the default), and the build's own default keeps under it;
 * -thread_warp_size is the warp the bindings split by (the threads where fewer); an option that
 * is neither ours nor TVM's is refused, where it used to be ignored. */
static void opencl_target_options_bound_the_build(void **state)
{
    (void)state;
    static const char *const wl = "matmul:M=1024,N=1024,K=64";
    static const char *const small = "opencl -max_shared_memory_per_block=4096";
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse(wl, &w, &err), TT_OK);
    tt_sketch_params p;
    tt_sketch_params_gpu(&p, 256, 32);
    tt_state *st;
    assert_int_equal(tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_LARGE, &st, &err), TT_OK);
    char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
    add_record(wl, small, NULL, steps, 1e-5); /* 16 KiB of tiles (128x16 and 16x128) */
    tt_compile_kernel k = {wl, "small"};
    tt_compile_report rep;
    char warn[4096];
    assert_int_equal(
        compile(small, &k, 1, true, false, NULL, "libsmall", &rep, warn, sizeof(warn), &err),
        TT_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "beyond the target's -max_shared_memory_per_block=4096"));
    assert_non_null(strstr(err.msg, "more than the 4096 allowed"));
    /* another target of the family finds the record by fallback: it does not fit, so the
     * default, which keeps under the limit */
    static const char *const fresh = "opencl -max_shared_memory_per_block=4096 -libs=cblas";
    if (compile(fresh, &k, 1, false, false, NULL, "libsmall", &rep, warn, sizeof(warn), &err))
        fail_msg("%s", err.msg);
    assert_int_equal(rep.source, TT_COMPILE_DEFAULT);
    if (!strstr(warn, "does not fit target 'opencl -max_shared_memory_per_block=4096 -libs=cblas' "
                      "(beyond the target's -max_shared_memory_per_block=4096"))
        fail_msg("%s", warn);
    tt_target t;
    assert_int_equal(tt_target_parse_user(fresh, &t, &err), TT_OK);
    tt_state *def;
    assert_int_equal(tt_sketch_gpu_build_default(&w->dag, &t, &def, NULL, 0, &err), TT_OK);
    tt_program *prog;
    assert_int_equal(tt_lower(def, &prog, &err), TT_OK);
    tt_opencl_stats stats;
    char *text = NULL;
    assert_int_equal(tt_codegen_opencl(prog, "k", NULL, &text, NULL, &stats, &err), TT_OK);
    assert_true(stats.shared_bytes > 0 && stats.shared_bytes <= 4096);
    free(text);
    tt_program_free(prog);
    tt_state_free(def);
    /* the warp */
    int threads, warp;
    assert_int_equal(tt_target_parse_user("opencl -thread_warp_size=64", &t, &err), TT_OK);
    tt_sketch_gpu_build_threads(&t, &threads, &warp);
    assert_int_equal(warp, 64);
    assert_int_equal(
        tt_target_parse_user("opencl -thread_warp_size=64 -max_num_threads=16", &t, &err), TT_OK);
    tt_sketch_gpu_build_threads(&t, &threads, &warp);
    assert_int_equal(threads, 16);
    assert_int_equal(warp, 16);
    /* a misspelt option: refused by name for a user's target, ignored in a stored one */
    assert_int_equal(compile("opencl -max_num_thread=64", &k, 1, false, false, NULL, "libsmall",
                             &rep, warn, sizeof(warn), &err),
                     TT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "column 8: unknown option '-max_num_thread'"));
    assert_int_equal(tt_target_parse("opencl -max_num_thread=64", &t, &err), TT_OK);
    free(steps);
    tt_state_free(st);
    tt_workload_free(w);
}

/* The tiling space of `workload` for this machine, as tvm-tune and tvm-compile build it; returns
 * the cores it was built for. */
static int host_space(const char *workload, tt_workload **w, tt_space *sp, tt_vector_isa *isa)
{
    assert_int_equal(tt_workload_parse(workload, w, NULL), TT_OK);
    tt_target t;
    assert_int_equal(tt_target_parse("llvm", &t, NULL), TT_OK);
    tt_codegen_vector_isa(&t, isa);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    int cores = n > 1 ? (int)n : 2;
    assert_int_equal(tt_space_init(sp, &(*w)->dag, cores, isa, NULL), TT_OK);
    return cores;
}

/* Template picks: the default config or a cache-blocked one, with the weights read row-major or
 * packed (the layout_rewrite knob, LR). */
enum { PICK_DEFAULT = 0, PICK_BLOCKED = 1, PICK_ROW_MAJOR = 2, PICK_PACKED = 4 };

/* index with its layout_rewrite knob set to `on` */
static uint64_t with_layout_rewrite(const tt_space *sp, uint64_t index, bool on)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(sp, index, pos);
    for (int k = 0; k < sp->nknobs; k++)
        if (!strcmp(sp->knobs[k].name, "layout_rewrite")) {
            assert_int_equal(sp->knobs[k].n, 2);
            pos[k] = sp->knobs[k].choice[1] == on ? 1 : 0;
        }
    return tt_space_encode(sp, pos);
}

/* A template record of `workload` on llvm: config `pick` of its space (PICK_DEFAULT or
 * PICK_BLOCKED, and PICK_ROW_MAJOR or PICK_PACKED to set its layout_rewrite knob), with the
 * space's signature and the index in its extra JSON, as the tuner stores them.  *steps
 * (optional) gets the config. */
static long long add_template_record(const char *workload, int pick, double seconds, char **steps)
{
    tt_workload *w;
    tt_space sp;
    tt_vector_isa isa;
    host_space(workload, &w, &sp, &isa);
    tt_cpu_caches caches;
    tt_cpu_caches_typical(&caches);
    uint64_t index = pick & PICK_BLOCKED
                         ? tt_space_blocked_index(&sp, &isa, &caches, 2, false, false)
                         : tt_space_default_index(&sp, &isa);
    if (pick & (PICK_ROW_MAJOR | PICK_PACKED))
        index = with_layout_rewrite(&sp, index, pick & PICK_PACKED);
    tt_state *st;
    assert_int_equal(tt_space_apply(&sp, index, &st, NULL), TT_OK);
    char *config = tt_steps_to_json(st->steps.data, st->steps.len);
    char sig[64], extra[200];
    tt_space_signature(&sp, sig, sizeof(sig));
    snprintf(extra, sizeof(extra), "{\"space\": \"%s\", \"index\": %llu}", sig,
             (unsigned long long)index);
    tt_db *db;
    assert_int_equal(tt_db_open(db_path, 0, &db, NULL), TT_OK);
    double costs[3] = {seconds, seconds, seconds};
    static double stamp = 1.8e9;
    tt_db_record r = {.workload = workload,
                      .target = "llvm",
                      .device = "dev-a",
                      .config = config,
                      .config_kind = TT_CONFIG_STEPS,
                      .costs = costs,
                      .ncosts = 3,
                      .timestamp = stamp += 1,
                      .extra = extra};
    assert_int_equal(tt_db_insert(db, &r, 1, NULL), TT_OK);
    tt_db_row *rows;
    size_t n;
    assert_int_equal(tt_db_best(db, workload, "llvm", NULL, 8, false, &rows, &n), TT_OK);
    long long id = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].config, config))
            id = rows[i].id;
    tt_db_rows_free(rows, n);
    tt_db_close(db);
    if (steps)
        *steps = config;
    else
        free(config);
    tt_state_free(st);
    tt_workload_free(w);
    return id;
}

/* A workload nobody tuned gets the tuned template config of the nearest other shape of its
 * operator, mapped to its own shape (not the fastest record of any shape, nor one that is not a
 * template config), and says so; --no-fallback and --strict keep the default and the error. */
static void an_untuned_shape_gets_its_nearest_shapes_config(void **state)
{
    const char *want = "conv2d_nhwc:N=1,H=14,W=14,CI=16,CO=32,K=3,S=1,P=1";
    const char *near = "conv2d_nhwc:N=1,H=12,W=12,CI=16,CO=32,K=3,S=1,P=1";
    const char *far = "conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1";
    assert_true(tt_workload_distance(want, near) > 0);
    assert_true(tt_workload_distance(want, near) < tt_workload_distance(want, far));
    assert_true(tt_workload_distance(want, want) == 0);
    assert_true(tt_workload_distance(want, MM) < 0); /* another operator */
    assert_true(tt_workload_distance("te:x", "te:x") < 0);
    assert_true(tt_workload_distance("matmul:M=8,N=8,K=8", "matmul:M=8,N=8,K=8,dtype=float16") >=
                8);
    add_template_record(near, 0, 9e-4, NULL); /* the near shape's slower config */
    long long id = add_template_record(near, 1, 3e-4, NULL);
    add_template_record(far, 1, 1e-5, NULL);       /* faster, but of a farther shape */
    add_record(near, "llvm", "dev-a", "[]", 1e-6); /* its fastest, not a template config */
    tt_compile_kernel k[1] = {{want, "conv14"}};
    tt_compile_report rep[1];
    char warn[4096];
    tt_errbuf err = {{0}};
    if (compile("llvm", k, 1, false, false, NULL, "libsimilar", rep, warn, sizeof(warn), &err))
        fail_msg("%s", err.msg);
    assert_int_equal(rep[0].source, TT_COMPILE_SIMILAR);
    assert_int_equal(rep[0].record, id);
    assert_string_equal(rep[0].similar, near);
    assert_false(tt_compile_source_tuned(rep[0].source));
    assert_non_null(strstr(warn, "warning: no record of conv2d_nhwc:N=1,H=14"));
    assert_non_null(strstr(warn, "using the tuned config of the nearest shape, "
                                 "conv2d_nhwc:N=1,H=12"));
    /* Built from the near shape's blocked config, mapped to this shape knob by knob. */
    tt_workload *w;
    tt_space sp;
    tt_vector_isa isa;
    int cores = host_space(want, &w, &sp, &isa);
    tt_similar sim;
    tt_db *db;
    assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, NULL), TT_OK);
    assert_int_equal(tt_similar_config(db, "llvm", NULL, w, &sp, cores, &isa, &sim, &err), TT_OK);
    assert_int_equal(sim.record, id);
    /* The shapes of this operator with records, nearest first (what transfer learning reads). */
    char *keys[4];
    int nkeys;
    assert_int_equal(tt_similar_workloads(db, "llvm", want, keys, 4, &nkeys, &err), TT_OK);
    assert_int_equal(nkeys, 2);
    assert_string_equal(keys[0], near);
    assert_string_equal(keys[1], far);
    free(keys[0]);
    free(keys[1]);
    assert_int_equal(tt_similar_workloads(db, "llvm", want, keys, 1, &nkeys, &err), TT_OK);
    assert_int_equal(nkeys, 1);
    assert_string_equal(keys[0], near);
    free(keys[0]);
    tt_db_close(db);
    tt_state *st;
    assert_int_equal(tt_space_apply(&sp, sim.index, &st, NULL), TT_OK);
    char *config = tt_steps_to_json(st->steps.data, st->steps.len);
    char path[400];
    snprintf(path, sizeof(path), "%s/out/libsimilar.h", dir);
    char *h = read_text(path);
    assert_non_null(strstr(h, config));
    assert_non_null(strstr(h, "NOT TUNED for this shape"));
    assert_non_null(strstr(h, "#define CONV14_TVM_RECORD 0LL"));
    free(config);
    tt_state_free(st);
    tt_workload_free(w);
    snprintf(path, sizeof(path), "%s/out/libsimilar.so", dir);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        fail_msg("%s", dlerror());
    check_function(lib, h, "conv14", want);
    dlclose(lib);
    /* Only this workload's records count under --no-fallback; none is an error under --strict. */
    assert_int_equal(
        compile("llvm", k, 1, false, true, NULL, "libnosimilar", rep, warn, sizeof(warn), &err),
        TT_OK);
    assert_int_equal(rep[0].source, TT_COMPILE_DEFAULT);
    assert_int_equal(
        compile("llvm", k, 1, true, false, NULL, "libstrict2", rep, warn, sizeof(warn), &err),
        TT_ERR_NOT_FOUND);
}

/* Writes text to DIR/name. */
static void write_file(const char *name, const char *text)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The text of DIR/name (read_text's buffer). */
static char *read_in_dir(const char *name)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return read_text(path);
}

/* Runs a shell command in DIR; its exit status. */
static int run_in_dir(const char *fmt, ...)
{
    char cmd[3000];
    int n = snprintf(cmd, sizeof(cmd), "cd %s && ", dir);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 255;
}

/* 64 columns: on AVX-512 two vectors of 16 are 32 columns, so B's panels are not B itself
 * (with 32 the packed layout was the row-major one, and no packed form was declared) */
#define RELINK     "matmul:M=48,N=64,K=40"
#define RELINK_SIM "matmul:M=44,N=64,K=40" /* never tuned: the nearest shape's config */

/* An application that calls SYM with row-major buffers: each of rl and sim against a naive
 * matmul, exit status 0 when both agree.  It uses no packed form. */
static const char plain_app[] =
    "#include <math.h>\n#include <stdio.h>\n#include \"relink.h\"\n"
    "static int check(int (*f)(const float *, const float *, float *), int M, int N, int K) {\n"
    "    static float a[48 * 40], b[40 * 64], c[48 * 64];\n"
    "    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 7) - 3;\n"
    "    for (int i = 0; i < K * N; i++) b[i] = (float)(i % 5) - 2;\n"
    "    if (f(a, b, c)) return 1;\n"
    "    for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) {\n"
    "        float s = 0;\n"
    "        for (int k = 0; k < K; k++) s += a[i * K + k] * b[k * N + j];\n"
    "        if (fabsf(s - c[i * N + j]) > 1e-3f) { printf(\"wrong at %d,%d\\n\", i, j); return 1; "
    "}\n"
    "    }\n"
    "    return 0;\n"
    "}\n"
    "int main(void) {\n"
    "    int bad = check(rl, 48, 64, 40) | check(sim, 44, 64, 40);\n"
    "    puts(bad ? \"WRONG\" : \"OK\");\n"
    "    return bad;\n"
    "}\n";

/* An application of the packed form: packs B once with rl_pack_B and calls rl_packed. */
static const char packed_app[] =
    "#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include \"relink.h\"\n"
    "int main(void) {\n"
    "    static float a[48 * 40], b[40 * 64], c[48 * 64];\n"
    "    for (int i = 0; i < 48 * 40; i++) a[i] = (float)(i % 7) - 3;\n"
    "    for (int i = 0; i < 40 * 64; i++) b[i] = (float)(i % 5) - 2;\n"
    "    float *bp = malloc(sizeof(float) * RL_B_PACKED_ELEMENTS);\n"
    "    if (!bp || rl_pack_B(b, bp) || rl_packed(a, bp, c)) return 1;\n"
    "    for (int i = 0; i < 48; i++) for (int j = 0; j < 64; j++) {\n"
    "        float s = 0;\n"
    "        for (int k = 0; k < 40; k++) s += a[i * 40 + k] * b[k * 64 + j];\n"
    "        if (fabsf(s - c[i * 64 + j]) > 1e-3f) { puts(\"WRONG\"); return 1; }\n"
    "    }\n"
    "    puts(\"OK\");\n"
    "    return 0;\n"
    "}\n";

/* Rebuilds out/relink.{a,so,h} from the database: rl (RELINK) and sim (RELINK_SIM, untuned);
 * whether each header declares a packed form. */
static void build_relink(bool rl_packed, bool sim_packed)
{
    tt_compile_kernel k[2] = {{RELINK, "rl"}, {RELINK_SIM, "sim"}};
    tt_compile_report rep[2];
    char warn[4096], path[400];
    tt_errbuf err = {{0}};
    if (compile("llvm", k, 2, false, false, NULL, "relink", rep, warn, sizeof(warn), &err))
        fail_msg("%s", err.msg);
    assert_int_equal(rep[0].source, TT_COMPILE_EXACT);
    assert_int_equal(rep[1].source, TT_COMPILE_SIMILAR);
    snprintf(path, sizeof(path), "%s/out/relink.h", dir);
    const char *h = read_text(path);
    assert_int_equal(strstr(h, "#define rl_packed ") != NULL, rl_packed);
    assert_int_equal(strstr(h, "#define sim_packed ") != NULL, sim_packed);
    /* SYM's declaration is the same whatever the record */
    assert_non_null(strstr(h, "int rl(const float *A, const float *B, float *C);"));
}

/* The contract of a built library (issue #53): an application built against SYM's plain,
 * row-major contract and relinked, statically and dynamically, against libraries rebuilt from
 * records without and with LR (the exact record, and a similar shape's config) computes the
 * same; one built against the packed form of one layout cannot link against a library without
 * it, nor start against one. */
static void a_rebuilt_library_keeps_its_functions_contract(void **state)
{
    const char *libs = "-lm -lpthread"; /* the thread pool is in the library */
    /* 1. the best record reads B row-major */
    add_template_record(RELINK, PICK_BLOCKED | PICK_ROW_MAJOR, 3e-4, NULL);
    build_relink(false, false);
    write_file("plain_app.c", plain_app);
    assert_int_equal(run_in_dir("cc -O1 -c -I out plain_app.c -o plain_app.o && "
                                "cc plain_app.o out/relink.a %s -o app_static1 && "
                                "cc plain_app.o \"$PWD/out/relink.so\" -Wl,-rpath,\"$PWD/out\" %s "
                                "-o app_dynamic",
                                libs, libs),
                     0);
    assert_int_equal(run_in_dir("./app_static1 > run1.log && ./app_dynamic >> run1.log"), 0);
    /* 2. a faster record reads B packed: the same application, relinked and unchanged */
    add_template_record(RELINK, PICK_BLOCKED | PICK_PACKED, 1e-4, NULL);
    build_relink(true, true);
    assert_int_equal(run_in_dir("cc plain_app.o out/relink.a %s -o app_static2 && "
                                "./app_static2 > run2.log && ./app_dynamic >> run2.log",
                                libs),
                     0);
    /* ... and the packed form, for an application that packs its weights once */
    write_file("packed_app.c", packed_app);
    assert_int_equal(run_in_dir("cc -O1 -c -I out packed_app.c -o packed_app.o && "
                                "cc packed_app.o out/relink.a %s -o packed_static && "
                                "cc packed_app.o \"$PWD/out/relink.so\" -Wl,-rpath,\"$PWD/out\" "
                                "%s -o packed_dynamic && ./packed_static > run3.log && "
                                "./packed_dynamic >> run3.log",
                                libs, libs),
                     0);
    /* 3. a faster record again without LR: the plain application still agrees; the packed one
     * does not link, and its binary does not start, instead of computing garbage */
    add_template_record(RELINK, PICK_DEFAULT | PICK_ROW_MAJOR, 5e-5, NULL);
    build_relink(false, false);
    assert_int_equal(run_in_dir("cc plain_app.o out/relink.a %s -o app_static3 && "
                                "./app_static3 > run4.log && ./app_dynamic >> run4.log",
                                libs),
                     0);
    assert_int_not_equal(run_in_dir("cc packed_app.o out/relink.a %s -o packed_static3 "
                                    "> link.log 2>&1",
                                    libs),
                         0);
    assert_non_null(strstr(read_in_dir("link.log"), "undefined reference to `rl_packed_L"));
    assert_int_not_equal(run_in_dir("./packed_dynamic > run5.log 2>&1"), 0);
    assert_null(strstr(read_in_dir("run5.log"), "OK"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(library_functions_match_the_definition),
        cmocka_unit_test(packed_weights_come_with_their_packing_function),
        cmocka_unit_test(header_is_clean_c_and_cxx),
        cmocka_unit_test(strict_and_fallbacks),
        cmocka_unit_test(errors_are_clear),
        cmocka_unit_test(cross_target_library),
        cmocka_unit_test(opencl_records_build_as_measured),
        cmocka_unit_test(opencl_record_beyond_max_num_threads_is_refused),
        cmocka_unit_test(opencl_target_options_bound_the_build),
        cmocka_unit_test(an_untuned_shape_gets_its_nearest_shapes_config),
        cmocka_unit_test(a_rebuilt_library_keeps_its_functions_contract),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
