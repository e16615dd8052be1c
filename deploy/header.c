/* OUT.h and OUT.pc of a tvm-compile'd library. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../base/strbuf.h"
#include "compile_int.h"

const char *tt__c_type(tt_dtype t)
{
    switch (t) {
    case TT_DT_FLOAT32: return "float";
    case TT_DT_FLOAT64: return "double";
    case TT_DT_INT32: return "int32_t";
    case TT_DT_INT64: return "int64_t";
    default: return "uint8_t";
    }
}

void tt__header_guard(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s_H", name);
    for (char *c = out; *c; c++)
        if (*c >= 'a' && *c <= 'z')
            *c = (char)(*c - 'a' + 'A');
        else if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            *c = '_';
}

void tt__param_name(const tt_workload *w, int op, char *out, size_t n)
{
    const char *name = w->dag.ops.data[op].name;
    size_t k = 0;
    if (!isalpha((unsigned char)name[0]) && name[0] != '_' && k + 1 < n)
        out[k++] = 'p';
    for (const char *c = name; *c && k + 1 < n; c++)
        out[k++] = isalnum((unsigned char)*c) ? *c : '_';
    out[k] = 0;
}

/* The declaration of `symbol` over k's parameters; with `packed`, the inputs the record reads
 * packed are named NAME_packed. */
static void declare(tt_strbuf *sb, const tt__kernel *k, const char *symbol, bool packed)
{
    tt_strbuf_printf(sb, "int %s(", symbol);
    for (int p = 0; p < k->nparams; p++) {
        const tt_op *op = &k->w->dag.ops.data[k->params[p]];
        char name[96];
        tt__param_name(k->w, k->params[p], name, sizeof(name));
        tt_strbuf_printf(sb, "%s%s%s *%s%s", p ? ", " : "", p < k->ninputs ? "const " : "",
                         tt__c_type(op->dtype), name,
                         packed && k->layouts && k->layouts[p].nparts ? "_packed" : "");
    }
    tt_strbuf_append(sb, ")");
}

void tt__signature(tt_strbuf *sb, const tt__kernel *k)
{
    declare(sb, k, k->symbol, false);
}

static void upper_case(const char *s, char *out, size_t n)
{
    size_t m = 0;
    for (; *s && m + 1 < n; s++)
        out[m++] = (char)toupper((unsigned char)*s);
    out[m] = 0;
}

/* The packed form of k (its record reads inputs packed): the macros that name its tagged symbols,
 * the packing functions, the packed elements of each, and SYM_packed. */
static void write_packed_form(tt_strbuf *sb, const tt__kernel *k)
{
    const tt_workload *w = k->w;
    char upper[160];
    upper_case(k->symbol, upper, sizeof(upper));
    tt_strbuf_printf(sb,
                     "/* The packed form of %s, for inputs packed once (a weight, when it is "
                     "loaded).\n * Its record reads",
                     k->symbol);
    for (int p = 0, first = 1; p < k->ninputs; p++) {
        if (!k->layouts[p].nparts)
            continue;
        char name[96], lay[512];
        tt__param_name(w, k->params[p], name, sizeof(name));
        tt_strbuf_printf(sb, "%s %s in the layout %s", first ? "" : ",", name,
                         tt_layout_print(&k->layouts[p], lay, sizeof(lay)));
        first = 0;
    }
    tt_strbuf_append(sb, ".\n");
    tt_strbuf decls = {0}; /* after the comment: each packing function and its size */
    for (int p = 0; p < k->ninputs; p++) {
        if (!k->layouts[p].nparts)
            continue;
        const char *type = tt__c_type(w->dag.ops.data[k->params[p]].dtype);
        char name[96], uname[96];
        tt__param_name(w, k->params[p], name, sizeof(name));
        upper_case(name, uname, sizeof(uname));
        tt_strbuf_printf(sb,
                         " * %s_pack_%s writes %s from the row-major tensor into "
                         "%s_%s_PACKED_ELEMENTS\n * elements, and %s_packed takes them in %s's "
                         "place.\n",
                         k->symbol, name, name, upper, uname, k->symbol, name);
        tt_strbuf_printf(&decls,
                         "#define %s_pack_%s %s_pack_%s_%s\n"
                         "#define %s_%s_PACKED_ELEMENTS %lldLL\n"
                         "int %s_pack_%s(const %s *%s, %s *%s_packed);\n",
                         k->symbol, name, k->symbol, name, k->tag, upper, uname,
                         (long long)k->layouts[p].size, k->symbol, name, type, name, type, name);
    }
    tt_strbuf_printf(sb,
                     " * %s computes the same from row-major inputs, packing on every call.\n"
                     " * These names exist only while the chosen record packs, and their "
                     "symbols carry the\n"
                     " * layout's tag (%s): code that calls them does not build against a "
                     "library without\n"
                     " * them, nor link against one that packs otherwise. */\n",
                     k->symbol, k->tag);
    if (decls.oom)
        sb->oom = 1;
    else if (decls.len)
        tt_strbuf_appendn(sb, decls.data, decls.len);
    tt_strbuf_free(&decls);
    char packed[200];
    snprintf(packed, sizeof(packed), "%s_packed", k->symbol);
    tt_strbuf_printf(sb, "#define %s %s_%s\n", packed, packed, k->tag);
    declare(sb, k, packed, true);
    tt_strbuf_append(sb, ";\n");
}

tt_status tt__write_text(const char *path, tt_strbuf *sb, tt_errbuf *err)
{
    if (sb->oom) {
        tt_strbuf_free(sb);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    FILE *f = fopen(path, "w");
    bool ok = f && fwrite(sb->data, 1, sb->len, f) == sb->len;
    if (f && fclose(f))
        ok = false;
    tt_strbuf_free(sb);
    return ok ? TT_OK : tt_err(err, TT_ERR_IO, "cannot write %s", path);
}

void tt__comment_text(tt_strbuf *sb, const char *s)
{
    for (; *s; s++) {
        tt_strbuf_appendn(sb, s, 1);
        if (s[0] == '*' && s[1] == '/')
            tt_strbuf_append(sb, " ");
    }
}

void tt__utc(double t, char *out, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(out, n, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(out, n, "unknown");
}

tt_status tt__write_header(const char *path, const char *guard, const tt__kernel *k, int n,
                           const char *target, tt_errbuf *err)
{
    tt_strbuf sb = {0};
    char now[64];
    tt__utc((double)time(NULL), now, sizeof(now));
    tt_strbuf_printf(&sb, "/* Generated by tvm-compile on %s for target '", now);
    tt__comment_text(&sb, target);
    tt_strbuf_append(
        &sb, "'.\n"
             " * Buffers are dense row-major arrays of the element type, inputs first, outputs "
             "last,\n"
             " * for every function SYM, whatever record it was built from; a record that reads "
             "an\n"
             " * input packed adds a packed form, SYM_packed, beside it.  An output must not "
             "overlap\n"
             " * an input or another output (as in BLAS): kernels keep outputs in registers "
             "across\n"
             " * the loops that read inputs.\n"
             " * Each function returns 0 on success (OpenCL builds: -1 no OpenCL device, -2 the\n"
             " * driver could not build the kernels, -3 the device failed to run them).  Do not "
             "edit. */\n");
    tt_strbuf_printf(&sb, "#ifndef %s\n#define %s\n\n#include <stdint.h>\n\n", guard, guard);
    tt_strbuf_append(&sb, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n");
    for (int i = 0; i < n; i++) {
        const tt__kernel *kk = &k[i];
        const tt_workload *w = kk->w;
        tt_strbuf_append(&sb, "\n/* ");
        tt__comment_text(&sb, w->key);
        if (w->flops > 0)
            tt_strbuf_printf(&sb, " (%.4g flops)", w->flops);
        tt_strbuf_append(&sb, "\n");
        for (int p = 0; p < kk->nparams; p++) {
            const tt_op *op = &w->dag.ops.data[kk->params[p]];
            char name[96];
            tt__param_name(w, kk->params[p], name, sizeof(name));
            tt_strbuf_printf(&sb, " *   %-10s %s[", name, tt_dtype_name(op->dtype));
            for (int d = 0; d < op->ndim; d++)
                tt_strbuf_printf(&sb, "%s%lld", d ? ", " : "", (long long)op->shape[d]);
            tt_strbuf_printf(&sb, "]  %s\n", p < kk->ninputs ? "input" : "output");
        }
        const tt_compile_report *r = &kk->rep;
        if (r->source == TT_COMPILE_DEFAULT) {
            tt_strbuf_append(&sb, " * schedule: the DEFAULT schedule (no tuned record applied)\n");
        } else if (r->source == TT_COMPILE_SIMILAR) {
            tt_strbuf_printf(&sb,
                             " * schedule: NOT TUNED for this shape: the tuned config of record "
                             "%lld (fastest %.6g s) of\n *   ",
                             r->record, r->fastest_s);
            tt__comment_text(&sb, r->similar);
            tt_strbuf_append(&sb, ", mapped to this shape\n");
        } else {
            char when[64];
            tt__utc(kk->timestamp, when, sizeof(when));
            tt_strbuf_printf(&sb,
                             " * schedule: record %lld (%s match), fastest %.6g s, measured %s\n",
                             r->record, tt_compile_source_name(r->source), r->fastest_s, when);
            tt_strbuf_append(&sb, " *   target ");
            tt__comment_text(&sb, r->target);
            tt_strbuf_append(&sb, "\n *   device ");
            tt__comment_text(&sb, r->device[0] ? r->device : "unknown");
            tt_strbuf_append(&sb, "\n");
        }
        tt_strbuf_append(&sb, " *   config ");
        tt__comment_text(&sb, kk->config ? kk->config : "[]");
        tt_strbuf_append(&sb, " */\n");
        tt__signature(&sb, kk);
        tt_strbuf_append(&sb, ";\n");
        char upper[160];
        upper_case(kk->symbol, upper, sizeof(upper));
        tt_strbuf_printf(&sb,
                         "#define %s_TVM_RECORD %lldLL /* 0: no record of this workload (the "
                         "default schedule, or a similar workload's config) */\n",
                         upper, tt_compile_source_tuned(r->source) ? r->record : 0);
        if (kk->tag[0])
            write_packed_form(&sb, kk);
    }
    tt_strbuf_printf(&sb, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* %s */\n", guard);
    return tt__write_text(path, &sb, err);
}

tt_status tt__write_pc(const char *path, const char *name, const char *dir, bool gomp, bool pool,
                       bool cl, tt_errbuf *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return tt_err(err, TT_ERR_IO, "cannot write %s", path);
    fprintf(f,
            "# Generated by tvm-compile: pkg-config --cflags --libs %s (with PKG_CONFIG_PATH=%s)\n"
            "libdir=%s\n"
            "includedir=%s\n\n"
            "Name: %s\n"
            "Description: tensor kernels built by tvm-compile from tuned schedules\n"
            "Version: 0.1.0\n"
            "Cflags: -I${includedir}\n"
            "Libs: ${libdir}/%s.a%s -lm%s%s\n",
            name, dir, dir, dir, name, name, gomp ? " -lgomp" : "", cl ? " -ldl" : "",
            cl || pool ? " -lpthread" : "");
    if (fclose(f))
        return tt_err(err, TT_ERR_IO, "cannot write %s", path);
    return TT_OK;
}
