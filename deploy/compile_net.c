/* tvm-compile --model: a network's tasks -> kernels, its weights -> read-only data, its calls ->
 * NAME_run; archived and linked as tvm-compile's kernel libraries are (compile.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/fmt.h"
#include "../codegen/codegen.h"
#include "../db/db.h"
#include "../graph/net.h"
#include "compile.h"
#include "compile_int.h"

typedef struct {
    const tt_compile_net_options *o;
    tt_net *net;
    tt__picker pk;
    const char *name;
    char tmp[4200];
    char **objs;
    int nobjs;
    tt_layout **layouts; /* per task */
    tt_compile_report *reps;
    double *timestamps;
    bool gomp;
    tt_cl_artifact *arts; /* OpenCL: per task, its kernels' metadata */
    char **texts;         /* ... and the artifact itself */
} net_builder;

tt_status tt__net_task_error(const tt_net *net, int task, tt_status s, tt_errbuf *err)
{
    char where[200] = "";
    for (size_t c = 0; c < net->calls.len && !where[0]; c++)
        if (net->calls.data[c].task == task)
            tt_gnode_describe(net->g, net->calls.data[c].first_node, where, sizeof(where));
    return tt_err_prefix(err, s, "task %d (%s, from %s)", task, net->tasks.data[task].label, where);
}

tt_status tt__net_task_lower(const tt__picker *pk, const tt_net *net, int t, tt__net_task_code *out,
                             tt_layout **layouts, tt_compile_report *rep, double *timestamp,
                             tt_errbuf *err)
{
    memset(out, 0, sizeof(*out));
    tt_status s = tt_workload_parse(net->tasks.data[t].workload, &out->w, err);
    if (!s)
        s = tt__compile_pick(pk, out->w, &out->st, rep, timestamp, err);
    if (!s)
        s = tt_lower(out->st, &out->prog, err);
    if (!s)
        s = tt__program_layouts(out->prog, layouts, err);
    return s;
}

void tt__net_task_free(tt__net_task_code *c)
{
    tt_program_free(c->prog);
    tt_state_free(c->st);
    tt_workload_free(c->w);
}

/* Task t's kernel, exported as NAME__task<t>(void **args), into the work directory. */
static tt_status build_task(net_builder *b, int t, tt_errbuf *err)
{
    const tt_net_task *task = &b->net->tasks.data[t];
    tt__net_task_code code;
    tt_status s = tt__net_task_lower(&b->pk, b->net, t, &code, &b->layouts[t], &b->reps[t],
                                     &b->timestamps[t], err);
    char entry[300], obj[4400];
    tt_codegen_stats stats = {0};
    snprintf(entry, sizeof(entry), "%s__task%d", b->name, t);
    snprintf(obj, sizeof(obj), "%s/task%d.o", b->tmp, t);
    if (!s && b->pk.gpu) {
        /* kernels t<task>_<k>, unique in the network's one program; the device's own limits are
         * checked when the library is initialised on it */
        if (b->layouts[t])
            s = tt_err(err, TT_ERR_UNSUPPORTED,
                       "the record reads a weight packed (LR), which OpenCL builds do not support");
        snprintf(entry, sizeof(entry), "t%d", t);
        if (!s)
            s = tt__compile_opencl(&b->pk.target, code.prog, entry, &b->texts[t], &b->arts[t], err);
    } else if (!s) {
        tt_codegen_options co = {3, 64, 64, NULL, false};
        s = tt_codegen_llvm_object(code.prog, &b->pk.target, entry, obj, &co, &stats, err);
        b->gomp |= stats.parallel_loops > 0;
        b->reps[t].parallel = stats.parallel_loops > 0;
    }
    if (!s && !b->pk.gpu && !(b->objs[b->nobjs++] = strdup(obj)))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (s)
        tt__net_task_error(b->net, t, s, err);
    const tt_compile_report *r = &b->reps[t];
    if (!s && b->o->log && (stats.scalar_fallbacks || stats.gathered_loads))
        /* code that runs slowly whatever the schedule's tiles: worth a look (docs/codegen.md) */
        fprintf(b->o->log,
                "task %2d %-28s vector code: %d loop(s) left scalar, %d load(s) "
                "gathered lane by lane\n",
                t, task->label, stats.scalar_fallbacks, stats.gathered_loads);
    if (!s && b->o->log) {
        if (r->source == TT_COMPILE_DEFAULT)
            fprintf(b->o->log, "task %2d %-28s x%-3d default schedule\n", t, task->label,
                    task->weight);
        else if (r->source == TT_COMPILE_SIMILAR)
            fprintf(b->o->log, "task %2d %-28s x%-3d not tuned: record %lld of %s, mapped\n", t,
                    task->label, task->weight, r->record, r->similar);
        else
            fprintf(b->o->log, "task %2d %-28s x%-3d record %lld (%s), fastest %.4g ms\n", t,
                    task->label, task->weight, r->record, tt_compile_source_name(r->source),
                    r->fastest_s * 1e3);
    }
    tt__net_task_free(&code);
    return s;
}

/* A database tuned before the Winograd rewrite (2026-11-29) has records of the direct 3x3
 * convolutions but none of the ConvWinograd tasks that replace them, and each such task's warning
 * names only its workload: say once what to do about it. */
static void note_untuned_winograd(const net_builder *b, FILE *f)
{
    int n = 0;
    for (size_t t = 0; t < b->net->tasks.len; t++)
        n += !strncmp(b->net->tasks.data[t].label, "ConvWinograd", 12) &&
             (b->reps[t].source == TT_COMPILE_DEFAULT || b->reps[t].source == TT_COMPILE_SIMILAR);
    if (n)
        fprintf(f,
                "tvm-compile: note: %d Winograd convolution task%s (ConvWinograd...) ha%s no "
                "records of %s own in %s: tune %s (tvm-tune run --model ... --db ...), or build "
                "with --winograd off, which computes 3x3 convolutions directly, as databases "
                "tuned before 2026-11-29 recorded them\n",
                n, n == 1 ? "" : "s", n == 1 ? "s" : "ve", n == 1 ? "its" : "their", b->o->db_path,
                n == 1 ? "it" : "them");
}

static tt_status write_file(const char *path, const void *data, size_t n, tt_errbuf *err)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && (n == 0 || fwrite(data, 1, n, f) == n);
    if (f && fclose(f))
        ok = false;
    return ok ? TT_OK : tt_err(err, TT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
}

/* The glue (NAME.c with the weights) compiled for the target, then the library's files, written
 * in the work directory (moved into place when all four are). */
static tt_status write_library(net_builder *b, const char *dir, tt_compile_net_summary *sum,
                               tt_errbuf *err)
{
    tt_net *net = b->net;
    tt__net_weights weights;
    tt__net_build nb = {.name = b->name,
                        .model = b->o->model,
                        .target = b->pk.target_text,
                        .net = net,
                        .weights = &weights,
                        .reps = b->reps,
                        .timestamps = b->timestamps,
                        .opencl = b->pk.gpu};
    tt_status s = tt__net_weights_build(net, b->layouts, &weights, err);
    if (s)
        return s;
    /* The network is timed by its median run, so its estimate adds the records' medians: their
     * fastest samples (what the search ranks by) are 3-15% below on a shared machine, and the
     * sum of those flattered every network by about 8% (docs/models.md). */
    double estimate = 0, fastest = 0;
    int tuned = 0;
    for (size_t t = 0; t < net->tasks.len; t++) {
        const tt_compile_report *r = &b->reps[t];
        estimate += net->tasks.data[t].weight * (r->median_s > 0 ? r->median_s : r->fastest_s);
        fastest += net->tasks.data[t].weight * r->fastest_s;
        tuned += tt_compile_source_tuned(r->source);
    }
    nb.estimate_s = tuned == (int)net->tasks.len ? estimate : 0;
    nb.estimate_fastest_s = tuned == (int)net->tasks.len ? fastest : 0;
    char params[4400], src[4400], obj[4400], path[4400];
    snprintf(params, sizeof(params), "%s/%s.params", b->tmp, b->name);
    snprintf(src, sizeof(src), "%s/%s.c", b->tmp, b->name);
    snprintf(obj, sizeof(obj), "%s/%s_net.o", b->tmp, b->name);
    s = tt__net_param_names(net, &nb.in_names, &nb.out_names, err);
    if (!s)
        s = write_file(params, weights.data, (size_t)weights.bytes, err);
    if (!s && b->pk.gpu)
        s = tt__write_cl_net_glue(src, &nb, params, b->arts, b->texts, err);
    else if (!s)
        s = tt__write_net_glue(src, &nb, params, err);
    if (!s)
        s = tt__compile_c(
            src, obj, b->pk.target.triple,
            b->pk.gpu ? "the network's OpenCL runtime and calls" : "the network's calls", err);
    remove(params);
    remove(src);
    if (!s && !(b->objs[b->nobjs++] = strdup(obj)))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    /* Host kernels with parallel loops carry the thread pool; cross ones need the device's
     * libgomp. */
    const char *host, *cpu, *features;
    tt_codegen_host(&host, &cpu, &features);
    bool on_host = !b->pk.target.triple[0] || !strcmp(b->pk.target.triple, host);
    if (!s) {
        snprintf(path, sizeof(path), "%s/%s.a", b->tmp, b->name);
        s = tt_codegen_archive((const char *const *)b->objs, b->nobjs, path, on_host && b->gomp,
                               err);
    }
    if (!s) {
        /* The weights' .lrodata after every other section (net_source.c), as GNU ld's own
         * scripts place it: a script that lld adds to its default one. */
        char script[4400];
        snprintf(script, sizeof(script), "%s/%s.ld", b->tmp, b->name);
        static const char insert[] =
            "SECTIONS { .lrodata : { *(.lrodata .lrodata.*) } } INSERT AFTER .bss;\n";
        s = write_file(script, insert, sizeof(insert) - 1, err);
        const char *extra[] = {script};
        snprintf(path, sizeof(path), "%s/%s.so", b->tmp, b->name);
        if (!s)
            s = tt_codegen_link_shared((const char *const *)b->objs, b->nobjs, path,
                                       on_host && b->gomp, extra, 1, err);
        remove(script);
    }
    if (!s) {
        char guard[300];
        tt__header_guard(b->name, guard, sizeof(guard));
        snprintf(path, sizeof(path), "%s/%s.h", b->tmp, b->name);
        s = tt__write_net_header(path, guard, &nb, err);
    }
    if (!s) {
        char absdir[4096];
        if (!realpath(dir, absdir))
            snprintf(absdir, sizeof(absdir), "%s", dir);
        snprintf(path, sizeof(path), "%s/%s.pc", b->tmp, b->name);
        s = tt__write_pc(path, b->name, absdir, b->gomp && !on_host, b->gomp && on_host, b->pk.gpu,
                         err);
    }
    if (!s && sum) {
        sum->tasks = (int)net->tasks.len;
        sum->tuned = tuned;
        sum->estimate_s = nb.estimate_s;
        sum->estimate_fastest_s = nb.estimate_fastest_s;
        sum->weight_bytes = weights.bytes;
        sum->packed_bytes = weights.packed_bytes;
        sum->workspace_bytes = net->arena_bytes;
    }
    free(nb.in_names);
    tt__net_weights_free(&weights);
    return s;
}

/* Moves the four files from the work directory to dir (or, on failure, removes them). */
static tt_status place_files(const net_builder *b, const char *dir, bool keep, tt_errbuf *err)
{
    static const char *const ext[] = {"a", "so", "h", "pc"};
    tt_status s = TT_OK;
    for (int i = 0; i < 4; i++) {
        char from[4400], to[4400];
        snprintf(from, sizeof(from), "%s/%s.%s", b->tmp, b->name, ext[i]);
        snprintf(to, sizeof(to), "%s/%s.%s", dir, b->name, ext[i]);
        if (keep && !s && rename(from, to))
            s = tt_err(err, TT_ERR_IO, "cannot move %s to %s: %s", from, to, strerror(errno));
        remove(from);
    }
    return s;
}

tt_status tt_compile_net(const tt_compile_net_options *o, tt_net *net, tt_compile_report *reports,
                         tt_compile_net_summary *summary, tt_errbuf *err)
{
    if (!o->out_prefix || !o->out_prefix[0])
        return tt_err(err, TT_ERR_INVALID_ARG, "an output (-o OUTDIR/NAME) is needed");
    char dir[4096], name[256];
    const char *slash = strrchr(o->out_prefix, '/');
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - o->out_prefix) : 1,
             slash ? o->out_prefix : ".");
    if (!dir[0])
        snprintf(dir, sizeof(dir), "/");
    snprintf(name, sizeof(name), "%s", slash ? slash + 1 : o->out_prefix);
    if (!tt_is_identifier(name) || strlen(name) > 64)
        return tt_err(err, TT_ERR_INVALID_ARG,
                      "the output name '%s' is not a C identifier of at most 64 characters (the "
                      "functions are NAME_run and NAME_info)",
                      name);
    net_builder b;
    memset(&b, 0, sizeof(b));
    b.o = o;
    b.net = net;
    b.name = name;
    tt_status s = tt__picker_open(&b.pk, o->db_path, o->target, o->device, o->strict,
                                  o->no_fallback, o->warnings, err);
    if (!s && !b.pk.gpu && strcmp(b.pk.target.kind, "llvm"))
        s = tt_err(err, TT_ERR_UNSUPPORTED,
                   "networks build for CPU (llvm) and GPU (opencl) targets, not '%s'",
                   b.pk.target.kind);
    if (s) {
        tt__picker_close(&b.pk);
        return s;
    }
    size_t nt = net->tasks.len;
    b.objs = calloc(nt + 2, sizeof(char *));
    b.layouts = calloc(nt + 1, sizeof(tt_layout *));
    b.reps = calloc(nt + 1, sizeof(tt_compile_report));
    b.timestamps = calloc(nt + 1, sizeof(double));
    b.arts = calloc(nt + 1, sizeof(tt_cl_artifact));
    b.texts = calloc(nt + 1, sizeof(char *));
    if (!b.objs || !b.layouts || !b.reps || !b.timestamps || !b.arts || !b.texts)
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (!s)
        s = tt__make_dirs(dir, err);
    if (!s) {
        snprintf(b.tmp, sizeof(b.tmp), "%s/.tvm-compile-XXXXXX", dir);
        if (!mkdtemp(b.tmp)) {
            s = tt_err(err, TT_ERR_IO, "cannot create a work directory in %s: %s", dir,
                       strerror(errno));
            b.tmp[0] = 0;
        }
    }
    for (size_t t = 0; !s && t < nt; t++)
        s = build_task(&b, (int)t, err);
    if (!s && o->warnings && o->db_path)
        note_untuned_winograd(&b, o->warnings);
    if (!s)
        s = write_library(&b, dir, summary, err);
    if (b.tmp[0]) {
        tt_status ps = place_files(&b, dir, !s, err);
        s = s ? s : ps;
    }
    if (!s && reports)
        memcpy(reports, b.reps, nt * sizeof(*reports));
    for (int i = 0; i < b.nobjs; i++) {
        remove(b.objs[i]);
        free(b.objs[i]);
    }
    if (b.tmp[0])
        rmdir(b.tmp);
    for (size_t t = 0; b.layouts && t < nt; t++)
        free(b.layouts[t]);
    for (size_t t = 0; b.texts && t < nt; t++)
        free(b.texts[t]);
    free(b.arts);
    free(b.texts);
    free(b.objs);
    free(b.layouts);
    free(b.reps);
    free(b.timestamps);
    tt__picker_close(&b.pk);
    return s;
}
