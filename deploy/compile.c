/* tvm-compile's library builder: records -> schedules -> code -> OUT.{a,so,h,pc}. */
#define _GNU_SOURCE
#include "compile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fmt.h"
#include "../base/strbuf.h"
#include "../codegen/codegen.h"
#include "../db/db.h"
#include "../tuner/similar.h"
#include "../tuner/sketch.h"
#include "../tuner/space.h"
#include "compile_int.h"

const char *tt_compile_source_name(tt_compile_source s)
{
    switch (s) {
    case TT_COMPILE_EXACT: return "exact";
    case TT_COMPILE_OTHER_DEVICE: return "other device";
    case TT_COMPILE_FAMILY: return "target family";
    case TT_COMPILE_SIMILAR: return "similar workload";
    default: return "default schedule";
    }
}

bool tt_compile_source_tuned(tt_compile_source s)
{
    return s == TT_COMPILE_EXACT || s == TT_COMPILE_OTHER_DEVICE || s == TT_COMPILE_FAMILY;
}

/* ---- default schedules ---- */

/* The CPU tiling space of `dag` for `target` as tvm-tune builds it on this machine, for *cores
 * cores. */
static tt_status template_space(const tt_dag *dag, const tt_target *target, tt_space *sp,
                                tt_vector_isa *isa, int *cores, tt_errbuf *err)
{
    tt_codegen_vector_isa(target, isa);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    *cores = n > 1 ? (int)n : 2;
    return tt_space_init(sp, dag, *cores, isa, err);
}

tt_status tt__compile_default_schedule(const tt_dag *dag, const tt_target *target, bool gpu,
                                       tt_state **out, tt_errbuf *err)
{
    if (gpu)
        return tt_sketch_gpu_build_default(dag, target, out, NULL, 0, err);
    /* What the tuner measures first besides the template's default (tt__tune_load_seeds): the
     * window config for window operators (depthwise convolutions, pools), else the cache-blocked
     * one for this machine's caches (typical ones for a cross target) with the window's column
     * taps inside the register tile.  Untuned ResNet-18 ran in 44-49 ms with it against 86-90 ms
     * with the plain default (docs/models.md, "Against ONNX Runtime"). */
    return tt_space_untuned_schedule(dag, target, out, NULL, 0, err);
}

/* ---- one kernel ---- */

typedef struct {
    const tt_compile_options *o;
    tt__picker pk;
} builder;

/* "'a', 'b'": the targets that have records for a workload (why nothing applies). */
typedef struct {
    tt_strbuf *sb;
    int n;
    char seen[8][256];
} target_list;

static int list_target(void *ctx, const tt_db_row *row)
{
    target_list *l = ctx;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->seen[i], row->target))
            return 0;
    if (l->n == 8)
        return 1;
    snprintf(l->seen[l->n++], sizeof(l->seen[0]), "%s", row->target);
    tt_strbuf_printf(l->sb, "%s'%s'", l->n > 1 ? ", " : "", row->target);
    return 0;
}

static tt_status record_state(const tt_workload *w, const tt_db_row *row, tt_state **st,
                              tt_errbuf *err)
{
    if (row->config_kind != TT_CONFIG_STEPS)
        return tt_err(err, TT_ERR_PARSE,
                      "record %lld of %s is an AutoTVM config, which only TVM's templates build",
                      (long long)row->id, w->key);
    if (tt_state_from_json(&w->dag, row->config, st, err))
        return tt_err_prefix(err, TT_ERR_PARSE,
                             "record %lld of %s (target '%s') is corrupt: its config does not "
                             "replay",
                             (long long)row->id, w->key, row->target);
    return TT_OK;
}

static int count_row(void *ctx, const tt_db_row *row)
{
    (void)row;
    ++*(int *)ctx;
    return 1;
}

tt_status tt__picker_open(tt__picker *p, const char *db_path, const char *target,
                          const char *device, bool strict, bool no_fallback, FILE *warnings,
                          tt_errbuf *err)
{
    memset(p, 0, sizeof(*p));
    p->db_path = db_path;
    p->device = device;
    p->strict = strict;
    p->no_fallback = no_fallback;
    p->warnings = warnings;
    p->target_text = target && target[0] ? target : "llvm";
    tt_status s = tt_target_parse_user(p->target_text, &p->target, err);
    if (s)
        return s;
    p->gpu = !strcmp(p->target.kind, "opencl");
    if (db_path && (s = tt_db_open(db_path, TT_DB_READONLY, &p->db, err)))
        return s;
    if (device) {
        tt_db_filter f = {NULL, NULL, device, 0, 1};
        int found = 0;
        tt_db_history(p->db, &f, count_row, &found);
        if (!found)
            return tt_err(err, TT_ERR_NOT_FOUND,
                          "no records of device '%s' in %s (tvm-db history lists the devices)",
                          device, db_path ? db_path : "no database");
    }
    return TT_OK;
}

void tt__picker_close(tt__picker *p)
{
    if (p->db)
        tt_db_close(p->db);
    p->db = NULL;
}

/* The tuned template config of the nearest other shape of w's operator on this target, mapped to
 * w's template space (tt_similar_config), as the search would start from it. */
static tt_status similar_config(const tt__picker *p, const tt_workload *w, tt_state **st,
                                tt_compile_report *rep)
{
    tt_vector_isa isa;
    tt_space sp;
    tt_similar sim;
    int cores;
    tt_status s = template_space(&w->dag, &p->target, &sp, &isa, &cores, NULL);
    if (!s)
        s = tt_similar_config(p->db, p->target_text, p->device, w, &sp, cores, &isa, &sim, NULL);
    if (!s)
        s = tt_space_apply(&sp, sim.index, st, NULL);
    if (s)
        return s;
    rep->source = TT_COMPILE_SIMILAR;
    rep->record = sim.record;
    rep->fastest_s = sim.fastest_s;
    snprintf(rep->similar, sizeof(rep->similar), "%s", sim.workload);
    return TT_OK;
}

/* Whether `st` fits the GPU target's limits (-max_num_threads, -max_shared_memory_per_block);
 * false with the reason in `why`. */
static bool fits_gpu_target(const tt__picker *p, const tt_state *st, tt_errbuf *why)
{
    tt_program *prog;
    if (tt_lower(st, &prog, why))
        return false;
    char *text = NULL;
    tt_cl_artifact art;
    memset(&art, 0, sizeof(art));
    tt_status s = tt__compile_opencl(&p->target, prog, "k", &text, &art, why);
    free(text);
    tt_program_free(prog);
    return s == TT_OK;
}

/* The default schedule of `w` for the picker's target, reported as such. */
static tt_status default_schedule(const tt__picker *p, const tt_workload *w, tt_state **st,
                                  tt_compile_report *rep, tt_errbuf *err)
{
    rep->source = TT_COMPILE_DEFAULT;
    snprintf(rep->target, sizeof(rep->target), "%s", p->target_text);
    return tt__compile_default_schedule(&w->dag, &p->target, p->gpu, st, err);
}

tt_status tt__compile_pick(const tt__picker *p, const tt_workload *w, tt_state **st,
                           tt_compile_report *rep, double *timestamp, tt_errbuf *err)
{
    tt_db_row *rows = NULL;
    size_t n = 0;
    tt_status s = TT_OK;
    *timestamp = 0;
    if (p->db) {
        s = tt_db_best(p->db, w->key, p->target_text, p->device, 1, !p->no_fallback, &rows, &n);
        if (s == TT_ERR_NOT_FOUND) { /* nothing for it: handled below */
            s = TT_OK;
            n = 0;
        }
        if (s)
            return tt_err(err, s, "%s", tt_db_errmsg(p->db));
    }
    if (n > 0) {
        s = record_state(w, &rows[0], st, err);
        if (!s && p->gpu && (*st)->steps.len == 0) {
            /* The tuner records the naive GPU schedule as [] (its baseline, as on CPUs); what it
             * measured was bound to blocks and threads.  Replayed as it stands, [] is one
             * work-item running the whole loop nest: on the H200 a BERT layer's 12 us batched
             * matmul took 96 ms. */
            int threads, warp;
            tt_sketch_gpu_build_threads(&p->target, &threads, &warp);
            tt_state_free(*st);
            *st = NULL;
            s = tt_sketch_gpu_default(&w->dag, warp, st, err);
        }
        tt_errbuf why = {{0}};
        if (!s && p->gpu && rows[0].match != TT_DB_MATCH_EXACT && !fits_gpu_target(p, *st, &why)) {
            /* tuned for another target of the family, with limits this one does not have (a
             * record of this very target that does not fit is an error, at its build) */
            if (p->warnings)
                fprintf(p->warnings,
                        "tvm-compile: warning: %s: record %lld of %s does not fit target '%s' "
                        "(%s): using the default schedule\n",
                        w->key, (long long)rows[0].id, rows[0].target, p->target_text, why.msg);
            tt_state_free(*st);
            *st = NULL;
            tt_db_rows_free(rows, n);
            return default_schedule(p, w, st, rep, err);
        }
        if (!s) {
            rep->source = rows[0].match == TT_DB_MATCH_EXACT          ? TT_COMPILE_EXACT
                          : rows[0].match == TT_DB_MATCH_OTHER_DEVICE ? TT_COMPILE_OTHER_DEVICE
                                                                      : TT_COMPILE_FAMILY;
            rep->record = rows[0].id;
            rep->fastest_s = rows[0].fastest_s;
            rep->median_s = rows[0].median_s;
            snprintf(rep->device, sizeof(rep->device), "%s", rows[0].device ? rows[0].device : "");
            snprintf(rep->target, sizeof(rep->target), "%s", rows[0].target);
            *timestamp = rows[0].timestamp;
            if (rep->source != TT_COMPILE_EXACT && p->warnings)
                fprintf(p->warnings,
                        "tvm-compile: note: %s: using record %lld of %s (%s), not of this %s\n",
                        w->key, rep->record,
                        rep->source == TT_COMPILE_FAMILY ? rep->target : rep->device,
                        tt_compile_source_name(rep->source),
                        rep->source == TT_COMPILE_FAMILY ? "target" : "device");
        }
        tt_db_rows_free(rows, n);
        return s;
    }
    /* Nothing applies: say why, loudly, then the default (or stop, under --strict). */
    char reason[1400];
    if (p->db) {
        tt_strbuf why = {0};
        target_list tl = {&why, 0, {{0}}};
        tt_db_filter f = {w->key, NULL, NULL, 0, 0};
        tt_db_history(p->db, &f, list_target, &tl);
        if (tl.n)
            snprintf(reason, sizeof(reason),
                     "no record of %s for target '%s'%s%s: records exist for %s", w->key,
                     p->target_text, p->device ? " on device " : "", p->device ? p->device : "",
                     why.data);
        else
            snprintf(reason, sizeof(reason), "no record of %s in %s (tune it with tvm-tune)",
                     w->key, p->db_path);
        tt_strbuf_free(&why);
    } else
        snprintf(reason, sizeof(reason), "no database for %s", w->key);
    if (p->strict)
        return tt_err(err, TT_ERR_NOT_FOUND, "%s (--strict)", reason);
    snprintf(rep->target, sizeof(rep->target), "%s", p->target_text);
    if (p->db && !p->no_fallback && !p->gpu && similar_config(p, w, st, rep) == TT_OK) {
        if (p->warnings)
            fprintf(p->warnings,
                    "tvm-compile: warning: %s: using the tuned config of the nearest shape, %s "
                    "(record %lld), mapped to this one\n",
                    reason, rep->similar, rep->record);
        return TT_OK;
    }
    if (p->warnings && p->db)
        fprintf(p->warnings, "tvm-compile: warning: %s: using the default schedule\n", reason);
    return default_schedule(p, w, st, rep, err);
}

/* Compiles `prog` into object `obj` with the typed entry `sym`; *parallel gets whether it uses
 * libgomp. */
static tt_status compile_entry(const builder *b, const tt_program *prog, const char *sym,
                               const char *obj, bool *parallel, tt_errbuf *err)
{
    char entry[300];
    snprintf(entry, sizeof(entry), "%s__tvm_kernel", sym);
    tt_codegen_options co = {3, 64, 64, sym, false};
    tt_codegen_stats stats;
    tt_status s = tt_codegen_llvm_object(prog, &b->pk.target, entry, obj, &co, &stats, err);
    if (!s)
        *parallel |= stats.parallel_loops > 0;
    return s;
}

/* The tag of a packed form: FNV-1a 32 of the layouts its inputs are read in, in parameter
 * order.  Its symbols carry it, so code built against one layout cannot link against another. */
static void packed_tag(const tt__kernel *k, char *out, size_t n)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < k->ninputs; i++) {
        char text[512];
        int len = snprintf(text, sizeof(text), "%d:", i);
        if (k->layouts[i].nparts)
            tt_layout_print(&k->layouts[i], text + len, sizeof(text) - (size_t)len);
        for (const char *c = text; *c; c++)
            h = (h ^ (unsigned char)*c) * 16777619u;
    }
    snprintf(out, n, "L%08x", h);
}

/* When the record reads inputs packed (LR): the packed form beside SYM, each compiled into an
 * object of its own (appended to objs): SYM_pack_NAME for each packed input and SYM_packed, the
 * record's kernel itself, their symbols tagged with the layouts.  k->layouts and k->tag say
 * what was built; a record without packed inputs builds nothing. */
static tt_status build_packed_form(builder *b, tt__kernel *k, const tt_program *prog,
                                   const char *obj, char **objs, int *nobjs, tt_errbuf *err)
{
    for (int i = 0; i < prog->ninputs; i++) {
        const tt_buffer *buf = tt_program_param(prog, i);
        if (!buf || !buf->layout.nparts)
            continue;
        if (b->pk.gpu)
            return tt_err(err, TT_ERR_UNSUPPORTED,
                          "the record passes '%s' packed (LR), which OpenCL builds do not support",
                          buf->name);
        if (!k->layouts && !(k->layouts = calloc((size_t)k->nparams, sizeof(tt_layout))))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        k->layouts[i] = buf->layout;
    }
    if (!k->layouts)
        return TT_OK;
    packed_tag(k, k->tag, sizeof(k->tag));
    char sym[300], path[4500];
    for (int i = 0; i < prog->ninputs; i++) {
        if (!k->layouts[i].nparts)
            continue;
        tt_program *pack;
        tt_status s = tt_pack_program(prog, i, &pack, err);
        if (s)
            return s;
        char pname[96];
        tt__param_name(k->w, k->params[i], pname, sizeof(pname));
        snprintf(sym, sizeof(sym), "%s_pack_%s_%s", k->symbol, pname, k->tag);
        snprintf(path, sizeof(path), "%s.pack%d.o", obj, i);
        bool unused = false;
        s = compile_entry(b, pack, sym, path, &unused, err);
        tt_program_free(pack);
        if (s)
            return s;
        if (!(objs[(*nobjs)++] = strdup(path)))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    snprintf(sym, sizeof(sym), "%s_packed_%s", k->symbol, k->tag);
    snprintf(path, sizeof(path), "%s.packed.o", obj);
    tt_status s = compile_entry(b, prog, sym, path, &k->rep.parallel, err);
    if (!s && !(objs[(*nobjs)++] = strdup(path)))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    return s;
}

static tt_status build_kernel(builder *b, tt__kernel *k, const char *obj, char **objs, int *nobjs,
                              tt_errbuf *err)
{
    tt_state *st = NULL;
    tt_program *prog = NULL, *row_major = NULL;
    tt_status s = tt__compile_pick(&b->pk, k->w, &st, &k->rep, &k->timestamp, err);
    if (!s && !(k->config = tt_steps_to_json(st->steps.data, st->steps.len)))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (!s)
        s = tt_lower(st, &prog, err);
    if (!s)
        s = build_packed_form(b, k, prog, obj, objs, nobjs, err);
    if (!s && b->pk.gpu) {
        /* the device's own limits apply when it runs; a record tuned on a GPU with 1024
         * work-items a group must build */
        s = tt__compile_opencl(&b->pk.target, prog, k->symbol, &k->cl_text, &k->cl, err);
    } else if (!s) {
        /* SYM takes every input row-major whatever the record (decision 63): a record that
         * reads some packed gets its pack stages inside SYM, run on each call.  Serial: with
         * the packing's outer loop parallel, matmul 256's SYM took 288-300 us against 248-287
         * on two cores (one more fork and join of the threads for 14 us of copying). */
        const tt_program *plain = prog;
        if (k->layouts) {
            s = tt_program_insert_pack_stages(prog, false, &row_major, err);
            plain = row_major;
        }
        if (!s)
            s = compile_entry(b, plain, k->symbol, obj, &k->rep.parallel, err);
    }
    if (s)
        tt_err_prefix(err, s, "%s (%s)", k->symbol, k->w->key);
    tt_program_free(row_major);
    tt_program_free(prog);
    tt_state_free(st);
    return s;
}

/* ---- the library ---- */

tt_status tt__make_dirs(const char *dir, tt_errbuf *err)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(path, 0755) && errno != EEXIST)
            return tt_err(err, TT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0755) && errno != EEXIST)
        return tt_err(err, TT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    return TT_OK;
}

tt_status tt__compile_c(const char *src, const char *obj, const char *triple, const char *what,
                        tt_errbuf *err)
{
    static const char *const clang[] = {"clang-14", "clang"};
    const char *cc = getenv("CC");
    char prog[4096], target[128] = "";
    bool cross = triple && triple[0];
    if (cc && cc[0]) /* the user's (cross) compiler, as it is */
        snprintf(prog, sizeof(prog), "%s", cc);
    else if (tt_codegen_find_tool(clang, 2, prog, sizeof(prog))) {
        if (cross)
            snprintf(target, sizeof(target), " --target=%s", triple);
    } else if (cross)
        return tt_err(err, TT_ERR_IO,
                      "no C compiler for %s (%s): install clang-14 (scripts/install-deps.sh) or "
                      "set CC to a cross compiler",
                      what, triple);
    else
        snprintf(prog, sizeof(prog), "cc");
    char cmd[9400];
    snprintf(cmd, sizeof(cmd), "%s%s -O2 -fPIC -c -o '%s' '%s' 2>&1", prog, target, obj, src);
    FILE *p = popen(cmd, "r");
    if (!p)
        return tt_err(err, TT_ERR_IO, "cannot run the C compiler: %s", strerror(errno));
    char out[400] = "";
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    if (rc != 0)
        return tt_err(err, TT_ERR_IO, "compiling %s failed (%s; set CC to a C compiler): %s", what,
                      prog, out);
    return TT_OK;
}

tt_status tt_compile(const tt_compile_options *o, tt_compile_report *reports, tt_errbuf *err)
{
    if (!o->out_prefix || !o->out_prefix[0])
        return tt_err(err, TT_ERR_INVALID_ARG, "an output (-o OUTDIR/NAME) is needed");
    if (o->nkernels < 1 || o->nkernels > 256)
        return tt_err(err, TT_ERR_INVALID_ARG, "1 to 256 workloads, each with --symbol");
    for (int i = 0; i < o->nkernels; i++) {
        if (!tt_is_identifier(o->kernels[i].symbol))
            return tt_err(err, TT_ERR_INVALID_ARG, "symbol '%s' (for %s) is not a C identifier",
                          o->kernels[i].symbol ? o->kernels[i].symbol : "", o->kernels[i].workload);
        for (int j = 0; j < i; j++)
            if (!strcmp(o->kernels[i].symbol, o->kernels[j].symbol))
                return tt_err(err, TT_ERR_INVALID_ARG, "symbol '%s' is given twice",
                              o->kernels[i].symbol);
    }
    builder b;
    memset(&b, 0, sizeof(b));
    b.o = o;
    tt_status s = tt__picker_open(&b.pk, o->db_path, o->target, o->device, o->strict,
                                  o->no_fallback, o->warnings, err);
    if (!s && !b.pk.gpu && strcmp(b.pk.target.kind, "llvm") && strcmp(b.pk.target.kind, "c"))
        s = tt_err(err, TT_ERR_UNSUPPORTED,
                   "target kind '%s' cannot be built (llvm for CPUs, opencl for GPUs)",
                   b.pk.target.kind);
    if (s) {
        tt__picker_close(&b.pk);
        return s;
    }
    /* OUTDIR/NAME */
    char dir[4096], name[256], tmp[4200];
    const char *slash = strrchr(o->out_prefix, '/');
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - o->out_prefix) : 1,
             slash ? o->out_prefix : ".");
    snprintf(name, sizeof(name), "%s", slash ? slash + 1 : o->out_prefix);
    if (!name[0]) {
        tt__picker_close(&b.pk);
        return tt_err(err, TT_ERR_INVALID_ARG, "the output name is empty");
    }
    tt__kernel *ks = calloc((size_t)o->nkernels, sizeof(tt__kernel));
    /* a kernel, its packed form (a packing function per input at most, and the packed
     * kernel) and the OpenCL host */
    char **objs = calloc((size_t)o->nkernels * 66 + 1, sizeof(char *));
    int nobjs = 0;
    tmp[0] = 0;
    if (!ks || !objs)
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (!s && dir[0])
        s = tt__make_dirs(dir, err);
    if (!s) {
        snprintf(tmp, sizeof(tmp), "%s/.tvm-compile-XXXXXX", dir);
        if (!mkdtemp(tmp)) {
            s = tt_err(err, TT_ERR_IO, "cannot create a work directory in %s: %s", dir,
                       strerror(errno));
            tmp[0] = 0;
        }
    }
    for (int i = 0; i < o->nkernels && !s; i++) {
        tt__kernel *k = &ks[i];
        k->symbol = o->kernels[i].symbol;
        if ((s = tt_workload_parse(o->kernels[i].workload, &k->w, err))) {
            tt_err_prefix(err, s, "workload '%s'", o->kernels[i].workload);
            break;
        }
        k->nparams = tt_dag_params(&k->w->dag, k->params, 64, &k->ninputs);
        char obj[4400];
        snprintf(obj, sizeof(obj), "%s/k%d.o", tmp, i);
        if (!(s = build_kernel(&b, k, obj, objs, &nobjs, err)) && !b.pk.gpu)
            objs[nobjs++] = strdup(obj);
        if (!s && reports)
            reports[i] = k->rep;
        if (!s && o->log && tt_compile_source_tuned(k->rep.source))
            fprintf(o->log, "%s = %s: record %lld (%s), fastest %.6g s%s%s%s\n", k->symbol,
                    k->w->key, k->rep.record, tt_compile_source_name(k->rep.source),
                    k->rep.fastest_s, k->tag[0] ? "; packed form " : "", k->tag[0] ? k->symbol : "",
                    k->tag[0] ? "_packed" : "");
        else if (!s && o->log && k->rep.source == TT_COMPILE_SIMILAR)
            fprintf(o->log, "%s = %s: not tuned; the config of record %lld of %s, mapped\n",
                    k->symbol, k->w->key, k->rep.record, k->rep.similar);
        else if (!s && o->log)
            fprintf(o->log, "%s = %s: default schedule\n", k->symbol, k->w->key);
    }
    /* The packed form's names are macros of the header: another function may not be one. */
    for (int i = 0; i < o->nkernels && !s; i++) {
        size_t len = strlen(ks[i].symbol);
        for (int j = 0; j < o->nkernels && ks[i].tag[0] && !s; j++) {
            const char *other = ks[j].symbol;
            if (!strncmp(other, ks[i].symbol, len) &&
                (!strcmp(other + len, "_packed") || !strncmp(other + len, "_pack_", 6)))
                s = tt_err(err, TT_ERR_INVALID_ARG,
                           "symbol '%s' is a name of the packed form of '%s' (its record reads "
                           "inputs packed): choose another",
                           other, ks[i].symbol);
        }
    }
    char path[4400];
    bool gomp = false;
    for (int i = 0; i < o->nkernels && !s; i++)
        gomp |= ks[i].rep.parallel;
    if (!s && b.pk.gpu) {
        char src[4400];
        snprintf(src, sizeof(src), "%s/cl_host.c", tmp);
        snprintf(path, sizeof(path), "%s/cl_host.o", tmp);
        if (!(s = tt__write_cl_host(src, ks, o->nkernels, err)) &&
            !(s = tt__compile_c(src, path, NULL, "the OpenCL host runtime", err)))
            objs[nobjs++] = strdup(path);
    }
    /* Host kernels with parallel loops carry the thread pool; cross ones need the device's
     * libgomp. */
    const char *host, *cpu, *features;
    tt_codegen_host(&host, &cpu, &features);
    bool on_host = b.pk.gpu || !b.pk.target.triple[0] || !strcmp(b.pk.target.triple, host);
    if (!s) {
        snprintf(path, sizeof(path), "%s/%s.a", dir, name);
        s = tt_codegen_archive((const char *const *)objs, nobjs, path, on_host && gomp, err);
    }
    if (!s) {
        snprintf(path, sizeof(path), "%s/%s.so", dir, name);
        s = tt_codegen_link_shared((const char *const *)objs, nobjs, path, on_host && gomp, NULL, 0,
                                   err);
    }
    if (!s) {
        char guard[300];
        tt__header_guard(name, guard, sizeof(guard));
        snprintf(path, sizeof(path), "%s/%s.h", dir, name);
        s = tt__write_header(path, guard, ks, o->nkernels, b.pk.target_text, err);
    }
    if (!s) {
        snprintf(path, sizeof(path), "%s/%s.pc", dir, name);
        char absdir[4096];
        if (!realpath(dir, absdir))
            snprintf(absdir, sizeof(absdir), "%s", dir);
        s = tt__write_pc(path, name, absdir, gomp && !on_host, gomp && on_host, b.pk.gpu, err);
    }
    for (int i = 0; i < nobjs; i++) {
        remove(objs[i]);
        free(objs[i]);
    }
    if (tmp[0]) {
        char src[4400];
        snprintf(src, sizeof(src), "%s/cl_host.c", tmp);
        remove(src);
        rmdir(tmp);
    }
    free(objs);
    for (int i = 0; ks && i < o->nkernels; i++) {
        tt_workload_free(ks[i].w);
        free(ks[i].config);
        free(ks[i].cl_text);
        free(ks[i].layouts);
    }
    free(ks);
    tt__picker_close(&b.pk);
    return s;
}

tt_status tt__compile_opencl(const tt_target *target, const tt_program *prog, const char *entry,
                             char **text, tt_cl_artifact *art, tt_errbuf *err)
{
    int64_t threads = target->max_num_threads > 0 ? target->max_num_threads : 1024;
    tt_gpu_limits lim;
    tt_gpu_limits_default(&lim);
    lim.max_threads = threads;
    lim.max_block[0] = lim.max_block[1] = lim.max_block[2] = threads;
    lim.max_shared_bytes = target->max_shared_memory_per_block; /* 0: checked on the device */
    size_t len = 0;
    tt_opencl_stats st = {0};
    tt_status s = tt_codegen_opencl(prog, entry, &lim, text, &len, &st, err);
    /* name the target option whose limit it broke */
    if (s == TT_ERR_LIMIT && st.broke == TT_GPU_LIMIT_SHARED &&
        target->max_shared_memory_per_block > 0)
        return tt_err_prefix(err, s, "beyond the target's -max_shared_memory_per_block=%d",
                             target->max_shared_memory_per_block);
    if (s == TT_ERR_LIMIT && st.broke == TT_GPU_LIMIT_THREADS && target->max_num_threads > 0)
        return tt_err_prefix(err, s, "beyond the target's -max_num_threads=%d",
                             target->max_num_threads);
    return s ? s : tt_cl_artifact_parse(*text, len, art, err);
}
