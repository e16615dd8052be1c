/* tvm-net: runs a network library built by tvm-compile --model, with .npy inputs and outputs,
 * and times it end to end beside the database's estimate (docs/models.md). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/clock.h"
#include "../base/rng.h"
#include "npy.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tvm-net info LIB.so [--name NAME] [--json]\n"
            "       tvm-net run  LIB.so [--name NAME] -i [INPUT=]FILE.npy ... [-o "
            "[OUTPUT=]FILE.npy ...]\n"
            "       tvm-net time LIB.so [--name NAME] [-i [INPUT=]FILE.npy ...] [--warmup N]\n"
            "                    [--repeat N] [--json]\n"
            "       tvm-net profile LIB.so [same options as time]\n"
            "       tvm-net compare A.so B.so [-i ...] [--warmup N] [--repeat N] [--block K]\n"
            "                    [--json]\n"
            "\n"
            "Loads a network built by tvm-compile --model -o OUTDIR/NAME (OUTDIR/NAME.so).\n"
            "  info      its inputs, outputs and tasks, and where each schedule came from\n"
            "  run       runs it once: every input from a .npy file (in order, or by name), each\n"
            "            output to a .npy file (default: OUTPUT.npy in the current directory)\n"
            "  time      runs it --warmup times (default 10), then --repeat times (default 50),\n"
            "            and prints the median latency beside the database's estimate; inputs\n"
            "            not given are uniform in [-1, 1) (floats) or 0 (integers)\n"
            "  profile   as time, and each kernel call timed in the network (NAME_run_profiled;\n"
            "            on an OpenCL device each call's device time from profiling events):\n"
            "            per task its calls' median time, its share, the database's estimate\n"
            "            (median x calls) and in-network / estimate, to see where time goes and\n"
            "            which kernels run slower in the network than alone (cold weights)\n"
            "  compare   two builds of one network (before and after tuning, two databases,\n"
            "            two versions) in this process: blocks of --block runs (default 10),\n"
            "            A B B A ..., 2 ms apart, --repeat runs each (default 200, rounded up to\n"
            "            whole blocks), so that a\n"
            "            shared machine's slow and fast phases fall on both alike; prints each\n"
            "            build's median, B / A, in how many block pairs B was faster, and how\n"
            "            far their outputs differ\n"
            "Libraries built with --target opencl run on the device TVM_TUNE_OPENCL_DEVICE=P:D\n"
            "names (else the first GPU, else the first OpenCL device); inputs and outputs go\n"
            "through pinned host buffers unless TVM_TUNE_OPENCL_PINNED=0.\n"
            "  --name NAME   the functions' prefix, when the file was renamed (default: the\n"
            "                file's name without .so)\n"
            "Exit status: 0 done, 1 failed (the reason on stderr), 2 bad arguments.\n");
}

typedef int (*run_fn)(void *, const void *const *, void *const *);
typedef int (*profiled_fn)(void *, const void *const *, void *const *, void (*)(void *, int),
                           void *);

typedef int (*cl_profile_fn)(const void *const *, void *const *, double *);

typedef struct {
    char name[256];
    void *dl;
    run_fn run;
    profiled_fn run_profiled; /* NULL in libraries built before it existed */
    /* OpenCL libraries: each call's device time from profiling events, and the last failure */
    cl_profile_fn cl_profile;
    const char *(*error)(void);
    json_t *info;
    json_t *ins, *outs;
    size_t nin, nout;
} network;

typedef struct {
    const char *dtype;
    int rank;
    int64_t dims[TT_NPY_MAX_RANK];
    int64_t numel;
    tt_dtype dt;
} tensor_info;

static int tensor_of(json_t *t, tensor_info *out)
{
    const char *dt = json_string_value(json_object_get(t, "dtype"));
    json_t *shape = json_object_get(t, "shape");
    int d = dt ? tt_dtype_parse(dt, strlen(dt)) : -1;
    if (d < 0 || !json_is_array(shape) || json_array_size(shape) > TT_NPY_MAX_RANK)
        return -1;
    out->dtype = dt;
    out->dt = (tt_dtype)d;
    out->rank = (int)json_array_size(shape);
    out->numel = 1;
    for (int i = 0; i < out->rank; i++) {
        out->dims[i] = json_integer_value(json_array_get(shape, (size_t)i));
        out->numel *= out->dims[i];
    }
    return 0;
}

static const char *tensor_name(json_t *t)
{
    const char *n = json_string_value(json_object_get(t, "name"));
    return n ? n : "?";
}

static void shape_str(const tensor_info *ti, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%s[", ti->dtype);
    for (int d = 0; d < ti->rank && k < (int)n; d++)
        k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? ", " : "", (long long)ti->dims[d]);
    if (k < (int)n)
        snprintf(buf + k, n - (size_t)k, "]");
}

static int load(const char *path, const char *name, network *net)
{
    memset(net, 0, sizeof(*net));
    if (name)
        snprintf(net->name, sizeof(net->name), "%s", name);
    else {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        snprintf(net->name, sizeof(net->name), "%s", base);
        char *dot = strstr(net->name, ".so");
        if (dot)
            *dot = 0;
    }
    /* a path without a slash would be searched for on the library path */
    char full[4200];
    snprintf(full, sizeof(full), "%s%s", strchr(path, '/') ? "" : "./", path);
    /* never unloaded: the thread pool the library brings keeps its workers in its code */
    if (!(net->dl = dlopen(full, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))) {
        fprintf(stderr, "tvm-net: cannot load %s: %s\n", path, dlerror());
        return -1;
    }
    char sym[300];
    snprintf(sym, sizeof(sym), "%s_info", net->name);
    const char *(*info)(void) = (const char *(*)(void))dlsym(net->dl, sym);
    snprintf(sym, sizeof(sym), "%s_run_buffers", net->name);
    net->run = (run_fn)dlsym(net->dl, sym);
    snprintf(sym, sizeof(sym), "%s_run_profiled", net->name);
    net->run_profiled = (profiled_fn)dlsym(net->dl, sym);
    snprintf(sym, sizeof(sym), "%s_profile", net->name);
    net->cl_profile = (cl_profile_fn)dlsym(net->dl, sym);
    snprintf(sym, sizeof(sym), "%s_error", net->name);
    net->error = (const char *(*)(void))dlsym(net->dl, sym);
    if (!info || !net->run) {
        fprintf(stderr,
                "tvm-net: %s has no %s_info or %s_run_buffers: not a network built by "
                "tvm-compile --model (give --name NAME if the file was renamed)\n",
                path, net->name, net->name);
        return -1;
    }
    json_error_t je;
    net->info = json_loads(info(), 0, &je);
    net->ins = json_object_get(net->info, "inputs");
    net->outs = json_object_get(net->info, "outputs");
    if (!net->info || !json_is_array(net->ins) || !json_is_array(net->outs)) {
        fprintf(stderr, "tvm-net: %s: %s_info() is not the JSON tvm-compile writes\n", path,
                net->name);
        return -1;
    }
    net->nin = json_array_size(net->ins);
    net->nout = json_array_size(net->outs);
    for (size_t i = 0; i < net->nin + net->nout; i++) {
        tensor_info ti;
        if (tensor_of(json_array_get(i < net->nin ? net->ins : net->outs,
                                     i < net->nin ? i : i - net->nin),
                      &ti)) {
            fprintf(stderr, "tvm-net: %s: a tensor of %s_info() has no dtype or shape\n", path,
                    net->name);
            return -1;
        }
    }
    return 0;
}

static void unload(network *net)
{
    json_decref(net->info);
}

/* "NAME=FILE" against the tensors' names (and C names), or a plain FILE: the next unnamed slot. */
static int assign(const char *arg, json_t *tensors, size_t n, const char **files, const char *what)
{
    const char *eq = strchr(arg, '=');
    if (eq) {
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(tensors, i);
            const char *cn = json_string_value(json_object_get(t, "c_name"));
            size_t len = (size_t)(eq - arg);
            if ((strlen(tensor_name(t)) == len && !strncmp(tensor_name(t), arg, len)) ||
                (cn && strlen(cn) == len && !strncmp(cn, arg, len))) {
                files[i] = eq + 1;
                return 0;
            }
        }
        /* a file name with '=' in it, not a name */
    }
    for (size_t i = 0; i < n; i++)
        if (!files[i]) {
            files[i] = arg;
            return 0;
        }
    fprintf(stderr, "tvm-net: %s '%s': the network has %zu %ss", what, arg, n, what);
    if (eq)
        fprintf(stderr, " and none is named '%.*s'", (int)(eq - arg), arg);
    fprintf(stderr, "\n");
    return -1;
}

/* Input i from its file, or random (floats) / zeros (integers) when none. */
static int read_input(network *net, size_t i, const char *file, tt_rng *rng, void **out)
{
    json_t *t = json_array_get(net->ins, i);
    tensor_info ti;
    tensor_of(t, &ti);
    char want[300];
    shape_str(&ti, want, sizeof(want));
    size_t bytes = (size_t)ti.numel * (size_t)tt_dtype_bytes(ti.dt);
    if (!file) {
        if (!(*out = calloc(1, bytes + 1)))
            return -1;
        for (int64_t k = 0; k < ti.numel; k++) {
            if (ti.dt == TT_DT_FLOAT32)
                ((float *)*out)[k] = (float)(tt_rng_uniform(rng) * 2 - 1);
            else if (ti.dt == TT_DT_FLOAT64)
                ((double *)*out)[k] = tt_rng_uniform(rng) * 2 - 1;
        }
        return 0;
    }
    tt_npy a;
    tt_errbuf err = {{0}};
    if (tt_npy_read(file, 0, &a, &err)) {
        fprintf(stderr, "tvm-net: %s\n", err.msg);
        return -1;
    }
    bool same = a.dtype == ti.dt && a.rank == ti.rank;
    for (int d = 0; same && d < a.rank; d++)
        same = a.dims[d] == ti.dims[d];
    if (!same) {
        tensor_info got = {tt_dtype_name(a.dtype), a.rank, {0}, 0, a.dtype};
        memcpy(got.dims, a.dims, sizeof(got.dims));
        char have[300];
        shape_str(&got, have, sizeof(have));
        fprintf(stderr, "tvm-net: %s is %s; input %zu '%s' is %s\n", file, have, i, tensor_name(t),
                want);
        tt_npy_free(&a);
        return -1;
    }
    *out = a.data;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A run that returned rc: the library's own message when it has one (OpenCL: the call, its code
 * and the device), else what the code means. */
static void report_failure(network *net, const char *fn, int rc)
{
    const char *why = net->error ? net->error() : NULL;
    if (why && why[0])
        fprintf(stderr, "tvm-net: %s%s returned %d: %s\n", net->name, fn, rc, why);
    else
        fprintf(stderr, "tvm-net: %s%s returned %d (%s)\n", net->name, fn, rc,
                rc < 0 ? "a NULL buffer" : "a kernel call failed");
}

static int run_network(network *net, void *const *ins, void *const *outs)
{
    int rc = net->run(NULL, (const void *const *)ins, outs);
    if (rc) {
        report_failure(net, "_run_buffers", rc);
        return -1;
    }
    return 0;
}

/* The clock at each kernel call of one run (NAME_run_profiled's hook). */
typedef struct {
    double *at; /* ncalls + 1 */
    int ncalls;
} stamps;

static void stamp(void *ctx, int call)
{
    stamps *s = ctx;
    if (call >= 0 && call <= s->ncalls)
        s->at[call] = tt_clock_monotonic();
}

/* A task's record time in a library's metadata, as the estimate counts it: its median sample
 * ("median_s"; libraries of one day in November 2026 have only "fastest_s"). */
static double task_time(json_t *task)
{
    json_t *v = json_object_get(task, "median_s");
    return json_number_value(v ? v : json_object_get(task, "fastest_s"));
}

/* tvm-net profile: the median time of every kernel call in the running network, summed per
 * task beside the database's estimate for it. */
static int profile(network *net, void *const *ins, void *const *outs, int warmup, int repeat,
                   bool json)
{
    json_t *calls = json_object_get(net->info, "calls"),
           *tasks = json_object_get(net->info, "tasks");
    if ((!net->run_profiled && !net->cl_profile) || !json_is_array(calls)) {
        fprintf(stderr,
                "tvm-net profile: %s has no %s_run_profiled: built by an older tvm-compile; "
                "build it again\n",
                net->name, net->name);
        return -1;
    }
    int nc = (int)json_array_size(calls), nt = (int)json_array_size(tasks);
    stamps st = {calloc((size_t)nc + 1, sizeof(double)), nc};
    double *per = calloc((size_t)(nc + 1) * (size_t)repeat, sizeof(double)); /* [call][run] */
    double *task_s = calloc((size_t)nt + 1, sizeof(double));
    int rc = st.at && per && task_s ? 0 : -1;
    if (rc)
        fprintf(stderr, "tvm-net: out of memory\n");
    double *device_s = calloc((size_t)nc + 1, sizeof(double));
    if (!device_s)
        rc = -1;
    for (int r = -warmup; !rc && r < repeat; r++) {
        /* on a CPU the clock between calls; on an OpenCL device each call's events */
        double t0 = tt_clock_monotonic();
        int e = net->cl_profile
                    ? net->cl_profile((const void *const *)ins, outs, device_s)
                    : net->run_profiled(NULL, (const void *const *)ins, outs, stamp, &st);
        double t1 = tt_clock_monotonic();
        if (e) {
            report_failure(net, net->cl_profile ? "_profile" : "_run_profiled", e);
            rc = -1;
        }
        for (int c = 0; !rc && r >= 0 && c < nc; c++)
            per[(size_t)c * repeat + r] = net->cl_profile ? device_s[c] : st.at[c + 1] - st.at[c];
        if (!rc && r >= 0)
            per[(size_t)nc * repeat + r] = net->cl_profile ? t1 - t0 : st.at[nc] - st.at[0];
    }
    free(device_s);
    double sum = 0, est_sum = 0, whole = rc ? 0 : tt_median(per + (size_t)nc * repeat, repeat);
    for (int c = 0; !rc && c < nc; c++) {
        double med = tt_median(per + (size_t)c * repeat, repeat);
        int t = (int)json_integer_value(json_array_get(calls, (size_t)c));
        if (t >= 0 && t < nt)
            task_s[t] += med;
        sum += med;
    }
    json_t *rows = json_array();
    if (!rc && !json)
        printf("%s: %d kernel calls of %d tasks, medians of %d runs after %d warm-up\n"
               "| task | kernel                       | calls | network (ms) | share  | estimate "
               "(ms) | network/estimate |\n"
               "|---|---|---|---|---|---|---|\n",
               net->name, nc, nt, repeat, warmup);
    for (int t = 0; !rc && t < nt; t++) {
        json_t *task = json_array_get(tasks, (size_t)t);
        double w = (double)json_integer_value(json_object_get(task, "weight"));
        double rec_s = task_time(task);
        double est = rec_s > 0 ? rec_s * w : 0;
        est_sum += est;
        const char *label = json_string_value(json_object_get(task, "label"));
        json_array_append_new(rows, json_pack("{s:i, s:s, s:i, s:f, s:f}", "task", t, "label",
                                              label ? label : "?", "calls", (int)w, "network_s",
                                              task_s[t], "estimate_s", est));
        if (json)
            continue;
        printf("| %4d | %-28s | %5d | %12.4f | %5.1f%% |", t, label ? label : "?", (int)w,
               task_s[t] * 1e3, sum > 0 ? 100 * task_s[t] / sum : 0);
        if (est > 0)
            printf(" %13.4f | %16.3f |\n", est * 1e3, task_s[t] / est);
        else
            printf(" %13s | %16s |\n", "default", "-");
    }
    if (!rc && json) {
        json_t *o = json_pack("{s:s, s:o, s:f, s:f, s:f, s:i, s:i}", "name", net->name, "tasks",
                              rows, "calls_s", sum, "run_s", whole, "estimate_s", est_sum, "repeat",
                              repeat, "warmup", warmup);
        char *text = json_dumps(o, JSON_COMPACT);
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(o);
    } else {
        json_decref(rows);
        if (!rc)
            printf("calls %.4g ms (the sum of their medians), run %.4g ms, estimate %.4g ms: "
                   "network / estimate = %.3f\n",
                   sum * 1e3, whole * 1e3, est_sum * 1e3, est_sum > 0 ? sum / est_sum : 0);
    }
    free(st.at);
    free(per);
    free(task_s);
    return rc;
}

static int print_info(network *net, bool json)
{
    if (json) {
        char *s = json_dumps(net->info, JSON_INDENT(2));
        printf("%s\n", s ? s : "{}");
        free(s);
        return 0;
    }
    json_t *i = net->info;
    printf("%s: built %s from %s for target '%s'\n", net->name,
           json_string_value(json_object_get(i, "built")),
           json_string_value(json_object_get(i, "model")),
           json_string_value(json_object_get(i, "target")));
    for (size_t k = 0; k < net->nin + net->nout; k++) {
        json_t *t =
            json_array_get(k < net->nin ? net->ins : net->outs, k < net->nin ? k : k - net->nin);
        tensor_info ti;
        tensor_of(t, &ti);
        char sh[300];
        shape_str(&ti, sh, sizeof(sh));
        printf("  %-6s %-24s %s\n", k < net->nin ? "input" : "output", tensor_name(t), sh);
    }
    json_t *tasks = json_object_get(i, "tasks");
    printf("%zu tasks, %.4g GFLOP per run, %.2f MiB of weights, %.2f MiB workspace\n",
           json_array_size(tasks), json_number_value(json_object_get(i, "flops")) / 1e9,
           (double)json_integer_value(json_object_get(i, "weight_bytes")) / 1048576.0,
           (double)json_integer_value(json_object_get(i, "workspace_bytes")) / 1048576.0);
    for (size_t k = 0; k < json_array_size(tasks); k++) {
        json_t *t = json_array_get(tasks, k);
        const char *src = json_string_value(json_object_get(t, "source"));
        printf("  %3zu %-28s x%-3lld %s", k, json_string_value(json_object_get(t, "label")),
               (long long)json_integer_value(json_object_get(t, "weight")), src);
        if (json_integer_value(json_object_get(t, "record")))
            printf(" (record %lld, %.4g ms)",
                   (long long)json_integer_value(json_object_get(t, "record")), task_time(t) * 1e3);
        printf("\n");
    }
    json_t *e = json_object_get(i, "estimate_s");
    if (json_is_number(e))
        printf("estimated latency %.4g ms\n", json_number_value(e) * 1e3);
    return 0;
}

/* Whether b takes and gives the same tensors as a (dtype and shape, in order). */
static bool same_signature(network *a, network *b)
{
    if (a->nin != b->nin || a->nout != b->nout)
        return false;
    for (size_t k = 0; k < a->nin + a->nout; k++) {
        json_t *ta = json_array_get(k < a->nin ? a->ins : a->outs, k < a->nin ? k : k - a->nin),
               *tb = json_array_get(k < b->nin ? b->ins : b->outs, k < b->nin ? k : k - b->nin);
        tensor_info x, y;
        tensor_of(ta, &x);
        tensor_of(tb, &y);
        if (x.dt != y.dt || x.rank != y.rank || memcmp(x.dims, y.dims, sizeof(x.dims[0]) * x.rank))
            return false;
    }
    return true;
}

/* The largest difference between the two builds' float outputs over the largest value of A's. */
static double output_difference(network *a, void *const *outs_a, void *const *outs_b)
{
    double diff = 0, big = 0;
    for (size_t k = 0; k < a->nout; k++) {
        tensor_info ti;
        tensor_of(json_array_get(a->outs, k), &ti);
        for (int64_t e = 0; e < ti.numel; e++) {
            double x, y;
            if (ti.dt == TT_DT_FLOAT32) {
                x = ((const float *)outs_a[k])[e];
                y = ((const float *)outs_b[k])[e];
            } else if (ti.dt == TT_DT_FLOAT64) {
                x = ((const double *)outs_a[k])[e];
                y = ((const double *)outs_b[k])[e];
            } else
                break;
            diff = fabs(x - y) > diff ? fabs(x - y) : diff;
            big = fabs(x) > big ? fabs(x) : big;
        }
    }
    return big > 0 ? diff / big : diff;
}

/* A pause longer than the idle workers of the other library's pool spin (each library brings
 * its own pool; pool.h, TT_POOL_SPIN_US), so that they sleep before the next block runs. */
static void pause_for_pools(void)
{
    const char *v = getenv("TT_POOL_SPIN_US");
    long us = v ? atol(v) : 1000;
    us = (us < 0 ? 0 : us > 100000 ? 100000 : us) + 1000;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* One build's line of tvm-net compare, from its run times `t` (sorted). */
static void print_side(const char *which, network *net, const char *path, const double *t, int n)
{
    printf("%s %s (%s): median %.4g ms over %d runs (p10 %.4g, p90 %.4g, min %.4g ms)\n", which,
           net->name, path, tt_median(t, n) * 1e3, n, t[n / 10] * 1e3, t[(n * 9) / 10] * 1e3,
           t[0] * 1e3);
}

/* tvm-net compare: builds a and b alternately in blocks of `block` runs (A B, then B A), each
 * block's runs timed; per block pair the ratio of B's median to A's. */
static int compare(network *a, network *b, const char *path_a, const char *path_b, void *const *ins,
                   void *const *outs_a, void *const *outs_b, int warmup, int repeat, int block,
                   bool json)
{
    int blocks = (repeat + block - 1) / block, n = blocks * block, pairs = 0, b_faster = 0;
    double *t = calloc((size_t)n * 2 + (size_t)blocks + (size_t)block, sizeof(double));
    if (!t) {
        fprintf(stderr, "tvm-net: out of memory\n");
        return -1;
    }
    double *ta = t, *tb = t + n, *ratio = t + 2 * n, *sorted = ratio + blocks;
    for (int k = 0; k < (warmup ? warmup : 1); k++) /* at least one run: the outputs */
        if (run_network(a, ins, outs_a) || run_network(b, ins, outs_b))
            goto fail;
    double diff = output_difference(a, outs_a, outs_b);
    for (int k = 0; k < blocks; k++) {
        double med[2];
        for (int side = 0; side < 2; side++) {
            bool is_b = (side == 1) != (k % 2 == 1); /* A B, B A, A B, ... */
            network *net = is_b ? b : a;
            double *into = (is_b ? tb : ta) + (size_t)k * block;
            pause_for_pools();
            if (run_network(net, ins, is_b ? outs_b : outs_a))
                goto fail;
            for (int r = 0; r < block; r++) {
                double t0 = tt_clock_monotonic();
                if (run_network(net, ins, is_b ? outs_b : outs_a))
                    goto fail;
                into[r] = tt_clock_monotonic() - t0;
            }
            memcpy(sorted, into, sizeof(double) * (size_t)block);
            qsort(sorted, (size_t)block, sizeof(double), cmp_double);
            med[is_b] = tt_median(sorted, block);
        }
        ratio[pairs++] = med[1] / med[0];
        b_faster += med[1] < med[0];
    }
    qsort(ta, (size_t)n, sizeof(double), cmp_double);
    qsort(tb, (size_t)n, sizeof(double), cmp_double);
    qsort(ratio, (size_t)pairs, sizeof(double), cmp_double);
    double ma = tt_median(ta, n), mb = tt_median(tb, n);
    if (json)
        printf("{\"a\": {\"name\": \"%s\", \"median_s\": %.9g, \"p10_s\": %.9g, \"p90_s\": %.9g}, "
               "\"b\": {\"name\": \"%s\", \"median_s\": %.9g, \"p10_s\": %.9g, \"p90_s\": %.9g}, "
               "\"b_over_a\": %.6g, \"block_pairs\": %d, \"b_faster_pairs\": %d, "
               "\"pair_ratio_p10\": %.6g, \"pair_ratio_p90\": %.6g, \"runs\": %d, \"block\": %d, "
               "\"output_difference\": %.3g}\n",
               a->name, ma, ta[n / 10], ta[(n * 9) / 10], b->name, mb, tb[n / 10], tb[(n * 9) / 10],
               mb / ma, pairs, b_faster, ratio[pairs / 10], ratio[(pairs * 9) / 10], n, block,
               diff);
    else {
        print_side("A", a, path_a, ta, n);
        print_side("B", b, path_b, tb, n);
        printf("B / A = %.3f (B %s); B faster in %d of %d block pairs (their ratios p10 %.3f, "
               "p90 %.3f); %d blocks of %d runs each, alternated\n",
               mb / ma,
               mb < ma   ? "faster"
               : mb > ma ? "slower"
                         : "level",
               b_faster, pairs, ratio[pairs / 10], ratio[(pairs * 9) / 10], blocks * 2, block);
        printf("outputs: B differs from A by %.3g (the largest difference over A's largest "
               "value)\n",
               diff);
    }
    free(t);
    return 0;
fail:
    free(t);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") && strcmp(cmd, "run") && strcmp(cmd, "time") &&
        strcmp(cmd, "profile") && strcmp(cmd, "compare")) {
        fprintf(stderr, "tvm-net: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    static const struct option opts[] = {{"name", required_argument, 0, 'n'},
                                         {"input", required_argument, 0, 'i'},
                                         {"output", required_argument, 0, 'o'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"repeat", required_argument, 0, 'r'},
                                         {"json", no_argument, 0, 'j'},
                                         {"block", required_argument, 0, 'b'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *name = NULL, *in_args[64], *out_args[64];
    bool comparing = !strcmp(cmd, "compare");
    int nin_args = 0, nout_args = 0, warmup = 10, repeat = comparing ? 200 : 50, block = 10;
    bool json = false;
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "i:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': name = optarg; break;
        case 'i':
            if (nin_args == 64)
                return fprintf(stderr, "tvm-net: at most 64 inputs\n"), 2;
            in_args[nin_args++] = optarg;
            break;
        case 'o':
            if (nout_args == 64)
                return fprintf(stderr, "tvm-net: at most 64 outputs\n"), 2;
            out_args[nout_args++] = optarg;
            break;
        case 'w': warmup = atoi(optarg); break;
        case 'r': repeat = atoi(optarg); break;
        case 'b': block = atoi(optarg); break;
        case 'j': json = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int libs = comparing ? 2 : 1;
    if (optind + libs != argc || warmup < 0 || repeat < 1 || repeat > 100000 || block < 1 ||
        block > 10000 || (comparing && nout_args)) {
        if (optind + libs != argc)
            fprintf(stderr,
                    comparing ? "tvm-net compare: two libraries, A.so B.so, are needed\n"
                              : "tvm-net %s: one LIB.so is needed\n",
                    cmd);
        else if (nout_args)
            fprintf(stderr, "tvm-net compare: writes no outputs (-o): tvm-net run does\n");
        else
            fprintf(stderr, "tvm-net %s: --warmup >= 0, --repeat 1..100000, --block 1..10000\n",
                    cmd);
        return 2;
    }
    network net, other;
    memset(&other, 0, sizeof(other));
    if (load(argv[optind], name, &net) || (comparing && load(argv[optind + 1], name, &other))) {
        unload(&net);
        unload(&other);
        return 1;
    }
    if (comparing && !same_signature(&net, &other)) {
        fprintf(stderr,
                "tvm-net compare: %s and %s take or give different tensors (tvm-net info shows "
                "them): not two builds of one network\n",
                argv[optind], argv[optind + 1]);
        unload(&net);
        unload(&other);
        return 1;
    }
    if (!strcmp(cmd, "info")) {
        int rc = print_info(&net, json);
        unload(&net);
        return rc;
    }
    const char *in_files[64] = {0}, *out_files[64] = {0};
    int rc = 0;
    if (net.nin > 64 || net.nout > 64) {
        fprintf(stderr, "tvm-net: at most 64 inputs and 64 outputs\n");
        rc = 1;
    }
    for (int k = 0; !rc && k < nin_args; k++)
        if (assign(in_args[k], net.ins, net.nin, in_files, "input"))
            rc = 2;
    for (int k = 0; !rc && k < nout_args; k++)
        if (assign(out_args[k], net.outs, net.nout, out_files, "output"))
            rc = 2;
    if (!rc && !strcmp(cmd, "run"))
        for (size_t k = 0; k < net.nin; k++)
            if (!in_files[k]) {
                fprintf(stderr, "tvm-net run: input %zu '%s' has no file (-i %s=FILE.npy)\n", k,
                        tensor_name(json_array_get(net.ins, k)),
                        tensor_name(json_array_get(net.ins, k)));
                rc = 2;
            }
    void *ins[64] = {0}, *outs[64] = {0}, *outs_b[64] = {0};
    tt_rng rng;
    tt_rng_seed(&rng, 1);
    for (size_t k = 0; !rc && k < net.nin; k++)
        if (read_input(&net, k, in_files[k], &rng, &ins[k]))
            rc = 1;
    for (size_t k = 0; !rc && k < net.nout; k++) {
        tensor_info ti;
        tensor_of(json_array_get(net.outs, k), &ti);
        size_t bytes = (size_t)ti.numel * (size_t)tt_dtype_bytes(ti.dt) + 1;
        if (!(outs[k] = calloc(1, bytes)) || (comparing && !(outs_b[k] = calloc(1, bytes)))) {
            fprintf(stderr, "tvm-net: out of memory\n");
            rc = 1;
        }
    }
    if (!rc && !strcmp(cmd, "run")) {
        if (run_network(&net, ins, outs))
            rc = 1;
        for (size_t k = 0; !rc && k < net.nout; k++) {
            json_t *t = json_array_get(net.outs, k);
            tensor_info ti;
            tensor_of(t, &ti);
            char def[300];
            snprintf(def, sizeof(def), "%s.npy", json_string_value(json_object_get(t, "c_name")));
            const char *file = out_files[k] ? out_files[k] : def;
            tt_errbuf err = {{0}};
            if (tt_npy_write(file, ti.dt, ti.rank, ti.dims, outs[k], &err)) {
                fprintf(stderr, "tvm-net: %s\n", err.msg);
                rc = 1;
            } else {
                char sh[300];
                shape_str(&ti, sh, sizeof(sh));
                printf("output %zu '%s' %s -> %s\n", k, tensor_name(t), sh, file);
            }
        }
    } else if (!rc && comparing) {
        if (compare(&net, &other, argv[optind], argv[optind + 1], ins, outs, outs_b, warmup, repeat,
                    block, json))
            rc = 1;
    } else if (!rc && !strcmp(cmd, "profile")) {
        if (profile(&net, ins, outs, warmup, repeat, json))
            rc = 1;
    } else if (!rc) { /* time */
        double *t = calloc((size_t)repeat, sizeof(double));
        for (int k = 0; !rc && k < warmup; k++)
            if (run_network(&net, ins, outs))
                rc = 1;
        for (int k = 0; !rc && t && k < repeat; k++) {
            double t0 = tt_clock_monotonic();
            if (run_network(&net, ins, outs))
                rc = 1;
            t[k] = tt_clock_monotonic() - t0;
        }
        if (!t)
            rc = 1;
        if (!rc) {
            qsort(t, (size_t)repeat, sizeof(double), cmp_double);
            double med = tt_median(t, repeat);
            double p10 = t[repeat / 10],
                   p90 = t[(repeat * 9) / 10 < repeat ? (repeat * 9) / 10 : repeat - 1];
            json_t *e = json_object_get(net.info, "estimate_s");
            double est = json_is_number(e) ? json_number_value(e) : 0;
            double flops = json_number_value(json_object_get(net.info, "flops"));
            if (json)
                printf("{\"name\": \"%s\", \"median_s\": %.9g, \"p10_s\": %.9g, \"p90_s\": %.9g, "
                       "\"min_s\": %.9g, \"repeat\": %d, \"warmup\": %d, \"estimate_s\": %.9g}\n",
                       net.name, med, p10, p90, t[0], repeat, warmup, est);
            else {
                printf("%s: median %.4g ms over %d runs (p10 %.4g, p90 %.4g, min %.4g ms) after "
                       "%d warm-up, %.2f GFLOPS\n",
                       net.name, med * 1e3, repeat, p10 * 1e3, p90 * 1e3, t[0] * 1e3, warmup,
                       flops / med / 1e9);
                if (est > 0)
                    printf("estimate %.4g ms (the records' median samples): measured / estimate = "
                           "%.3f\n",
                           est * 1e3, med / est);
                else
                    printf("no estimate: some tasks run the default schedule (tvm-net info)\n");
            }
        }
        free(t);
    }
    for (size_t k = 0; k < 64; k++) {
        free(ins[k]);
        free(outs[k]);
        free(outs_b[k]);
    }
    unload(&net);
    unload(&other);
    return rc;
}
