/* The generated sources of a network library: NAME.c (weights, arena, run functions) and NAME.h
 * (compile_int.h; docs/models.md shows both). */
#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/strbuf.h"
#include "../graph/net.h"
#include "compile_int.h"

/* ---- names ---- */

static bool is_keyword(const char *s)
{
    static const char *const kw[] = {
        "auto",     "break",    "case",     "char",   "const",    "continue", "default",
        "do",       "double",   "else",     "enum",   "extern",   "float",    "for",
        "goto",     "if",       "inline",   "int",    "long",     "register", "restrict",
        "return",   "short",    "signed",   "sizeof", "static",   "struct",   "switch",
        "typedef",  "union",    "unsigned", "void",   "volatile", "while",    "bool",
        "class",    "new",      "delete",   "this",   "private",  "public",   "template",
        "operator", "workspace"};
    for (size_t i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
        if (!strcmp(s, kw[i]))
            return true;
    return false;
}

/* A tensor's name as a C identifier: other characters become '_', a leading digit gets 't'. */
static void c_name(const char *name, char out[64])
{
    size_t k = 0;
    if (!isalpha((unsigned char)name[0]) && name[0] != '_')
        out[k++] = 't';
    for (const char *c = name; *c && k + 1 < 64; c++)
        out[k++] = isalnum((unsigned char)*c) ? *c : '_';
    out[k] = 0;
    if (!k || is_keyword(out))
        snprintf(out + k, 64 - k, "_");
}

tt_status tt__net_param_names(const tt_net *net, char (**in)[64], char (**out)[64], tt_errbuf *err)
{
    const tt_graph *g = net->g;
    size_t ni = g->inputs.len, no = g->outputs.len;
    char(*all)[64] = calloc(ni + no + 1, 64);
    if (!all)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ni + no; i++) {
        int t = i < ni ? g->inputs.data[i] : g->outputs.data[i - ni];
        char base[64];
        c_name(g->tensors.data[t].name, base);
        snprintf(all[i], 64, "%s", base);
        /* unique among the parameters: a numbered suffix */
        for (size_t j = 0, k = 1; j < i; j++)
            if (!strcmp(all[i], all[j])) {
                snprintf(all[i], 64, "%.40s_%zu", base, k++);
                j = (size_t)-1; /* compare with all again */
            }
    }
    *in = all;
    *out = all + ni;
    return TT_OK;
}

/* ---- the metadata: NAME_info() ---- */

static json_t *tensor_json(const tt_gtensor *t, const char *cname)
{
    json_t *shape = json_array();
    for (int d = 0; d < t->rank; d++)
        json_array_append_new(shape, json_integer(t->dims[d]));
    return json_pack("{s:s, s:s, s:s, s:o}", "name", t->name, "c_name", cname, "dtype",
                     tt_dtype_name(t->dtype), "shape", shape);
}

static char *info_json(const tt__net_build *b)
{
    const tt_net *net = b->net;
    const tt_graph *g = net->g;
    json_t *ins = json_array(), *outs = json_array(), *tasks = json_array(), *calls = json_array();
    for (size_t i = 0; i < g->inputs.len; i++)
        json_array_append_new(ins,
                              tensor_json(&g->tensors.data[g->inputs.data[i]], b->in_names[i]));
    for (size_t i = 0; i < g->outputs.len; i++)
        json_array_append_new(outs,
                              tensor_json(&g->tensors.data[g->outputs.data[i]], b->out_names[i]));
    for (size_t t = 0; t < net->tasks.len; t++) {
        const tt_net_task *task = &net->tasks.data[t];
        const tt_compile_report *r = &b->reps[t];
        json_array_append_new(
            tasks, json_pack("{s:s, s:s, s:i, s:f, s:s, s:I, s:f, s:f}", "label", task->label,
                             "workload", task->workload, "weight", task->weight, "flops",
                             task->flops, "source", tt_compile_source_name(r->source), "record",
                             (json_int_t)r->record, "fastest_s", r->fastest_s, "median_s",
                             r->median_s > 0 ? r->median_s : r->fastest_s));
    }
    /* the task of each kernel call, in order (what tvm-net profile attributes times by) */
    for (size_t c = 0; c < net->calls.len; c++)
        json_array_append_new(calls, json_integer(net->calls.data[c].task));
    char now[64];
    tt__utc((double)time(NULL), now, sizeof(now));
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:I, s:I, s:f}", "name", b->name, "model",
                  b->model ? b->model : "", "target", b->target, "built", now, "inputs", ins,
                  "outputs", outs, "tasks", tasks, "workspace_bytes", (json_int_t)net->arena_bytes,
                  "weight_bytes", (json_int_t)b->weights->bytes, "flops", net->flops);
    if (!o)
        return NULL;
    json_object_set_new(o, "calls", calls);
    json_object_set_new(o, "estimate_s",
                        b->estimate_s > 0 ? json_real(b->estimate_s) : json_null());
    json_object_set_new(o, "estimate_fastest_s",
                        b->estimate_s > 0 ? json_real(b->estimate_fastest_s) : json_null());
    char *text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    return text;
}

/* A C string literal of s, split into lines. */
static void c_string(tt_strbuf *sb, const char *s)
{
    tt_strbuf_append(sb, "    \"");
    int col = 0;
    for (; *s; s++, col++) {
        if (col >= 90) {
            tt_strbuf_append(sb, "\"\n    \"");
            col = 0;
        }
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            tt_strbuf_printf(sb, "\\%c", c);
        else if (c < 32 || c > 126)
            tt_strbuf_printf(sb, "\\%03o", c);
        else
            tt_strbuf_appendn(sb, s, 1);
    }
    tt_strbuf_append(sb, "\"");
}

/* ---- NAME.c ---- */

void tt__net_params(tt_strbuf *sb, const tt__net_build *b)
{
    const tt_graph *g = b->net->g;
    for (size_t i = 0; i < g->inputs.len; i++)
        tt_strbuf_printf(sb, "%sconst %s *%s", i ? ", " : "",
                         tt__c_type(g->tensors.data[g->inputs.data[i]].dtype), b->in_names[i]);
    for (size_t i = 0; i < g->outputs.len; i++)
        tt_strbuf_printf(sb, "%s%s *%s", g->inputs.len + i ? ", " : "",
                         tt__c_type(g->tensors.data[g->outputs.data[i]].dtype), b->out_names[i]);
}

static void args(tt_strbuf *sb, const tt__net_build *b)
{
    const tt_graph *g = b->net->g;
    for (size_t i = 0; i < g->inputs.len; i++)
        tt_strbuf_printf(sb, "%s%s", i ? ", " : "", b->in_names[i]);
    for (size_t i = 0; i < g->outputs.len; i++)
        tt_strbuf_printf(sb, "%s%s", g->inputs.len + i ? ", " : "", b->out_names[i]);
}

/* The C expression of tensor t's address in call c (k: its argument; -1: a copy's source). */
static void address(tt_strbuf *sb, const tt__net_build *b, int t, int64_t weight_offset)
{
    const tt_net_storage *st = &b->net->storage[t];
    if (weight_offset >= 0) {
        tt_strbuf_printf(sb, "(void *)(tvm__w + %lld)", (long long)weight_offset);
        return;
    }
    switch (st->place) {
    case TT_NET_INPUT: tt_strbuf_printf(sb, "(void *)tvm__in[%d]", st->index); break;
    case TT_NET_OUTPUT: tt_strbuf_printf(sb, "tvm__out[%d]", st->index); break;
    case TT_NET_ARENA:
        tt_strbuf_printf(sb, "(void *)(tvm__ws + %lld)", (long long)st->offset);
        break;
    default: tt_strbuf_append(sb, "(void *)0"); break;
    }
}

/* A path inside an assembler string. */
static void asm_path(tt_strbuf *sb, const char *p)
{
    for (; *p; p++) {
        if (*p == '"' || *p == '\\')
            tt_strbuf_append(sb, "\\\\");
        tt_strbuf_appendn(sb, p, 1);
    }
}

void tt__net_buffer_arrays(tt_strbuf *sb, const tt__net_build *b)
{
    const tt_graph *g = b->net->g;
    tt_strbuf_append(sb, "    const void *tvm__in[] = {");
    for (size_t i = 0; i < g->inputs.len; i++)
        tt_strbuf_printf(sb, "%s%s", i ? ", " : "", b->in_names[i]);
    if (!g->inputs.len)
        tt_strbuf_append(sb, "0");
    tt_strbuf_append(sb, "};\n    void *tvm__out[] = {");
    for (size_t i = 0; i < g->outputs.len; i++)
        tt_strbuf_printf(sb, "%s%s", i ? ", " : "", b->out_names[i]);
    tt_strbuf_append(sb, "};\n");
}

void tt__write_net_weights_asm(tt_strbuf *sb, const char *n, const char *params_path)
{
    /* The weights: read-only data of the library, paged in by the OS as the kernels touch them
     * and shared by every process that maps the library.  On x86-64 in .lrodata, the large
     * model's read-only section, which GNU ld's scripts place (by name: clang 14's assembler
     * does not know SHF_X86_64_LARGE's flag) after every other section: the code's 32-bit
     * PC-relative references to its own data and GOT must not have to cross gigabytes of
     * weights (a 2.4 GB blob in .rodata overflowed them). */
    tt_strbuf_printf(sb,
                     "\n#if defined(__x86_64__)\n"
                     "#define %s__WEIGHTS_SECTION \".section .lrodata.%s__weights,\\\"a\\\"\\n\"\n"
                     "#else\n"
                     "#define %s__WEIGHTS_SECTION \".section .rodata.%s__weights,\\\"a\\\"\\n\"\n"
                     "#endif\n",
                     n, n, n, n);
    tt_strbuf_printf(sb,
                     "__asm__(%s__WEIGHTS_SECTION\n"
                     "        \".balign 64\\n\"\n"
                     "        \".globl %s__weights\\n\"\n"
                     "        \".hidden %s__weights\\n\"\n"
                     "        \".type %s__weights, STT_OBJECT\\n\"\n"
                     "        \"%s__weights:\\n\"\n"
                     "        \".incbin \\\"",
                     n, n, n, n, n);
    asm_path(sb, params_path);
    tt_strbuf_printf(sb,
                     "\\\"\\n\"\n"
                     "        \".size %s__weights, . - %s__weights\\n\"\n"
                     "        \".previous\\n\");\n"
                     "extern const unsigned char %s__weights[] "
                     "__attribute__((visibility(\"hidden\")));\n\n",
                     n, n, n);
}

/* NAME__weights_in_memory(): the weights copied once into the process's own memory (on 2 MiB
 * huge pages where they take that much), else where the library maps them.  Mapped, they are
 * the file's pages in the page cache: on a virtual machine (Firecracker, measured 2026-12-07)
 * ViT-B/16's 330 MB read from them ran 226-311 ms a run with spreads of 3x, and 108-113 ms from
 * a copy (docs/models.md, "Where the weights live").  ONNX Runtime and TVM's runtimes keep
 * theirs in their own memory too.  TVM_TUNE_WEIGHTS=mapped keeps the mapped ones (processes that
 * share one library's pages).  The first caller copies; a concurrent one meanwhile uses the
 * mapped weights, which hold the same values, so no caller waits.  Freestanding like the rest
 * of NAME.c (a cross build may have no C headers): the three C library calls are declared
 * here, on Linux targets whose constants are the generic ones. */
static void write_weights_in_memory(tt_strbuf *sb, const char *n, long long bytes)
{
    tt_strbuf_printf(sb,
                     "#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__) || "
                     "defined(__i386__) || \\\n"
                     "                           defined(__arm__) || defined(__riscv))\n"
                     "extern int posix_memalign(void **, __SIZE_TYPE__, __SIZE_TYPE__);\n"
                     "extern int madvise(void *, __SIZE_TYPE__, int);\n"
                     "extern char *getenv(const char *);\n"
                     "#define %s__COPY_WEIGHTS 1\n"
                     "#endif\n"
                     "static const unsigned char *%s__weights_copy;\n"
                     "static int %s__weights_state;\n\n"
                     "static const unsigned char *%s__weights_in_memory(void)\n{\n"
                     "    const unsigned char *w = __atomic_load_n(&%s__weights_copy, "
                     "__ATOMIC_ACQUIRE);\n"
                     "    int idle = 0;\n"
                     "    if (w)\n        return w;\n"
                     "    if (!__atomic_compare_exchange_n(&%s__weights_state, &idle, 1, 0, "
                     "__ATOMIC_ACQ_REL,\n"
                     "                                     __ATOMIC_ACQUIRE))\n"
                     "        return %s__weights; /* another thread is copying them */\n"
                     "    w = %s__weights;\n"
                     "#ifdef %s__COPY_WEIGHTS\n"
                     "    {\n"
                     "        const char *e = getenv(\"TVM_TUNE_WEIGHTS\");\n"
                     "        __SIZE_TYPE__ bytes = %lldULL, huge = (__SIZE_TYPE__)2 << 20;\n"
                     "        __SIZE_TYPE__ align = bytes >= huge ? huge : 64;\n"
                     "        __SIZE_TYPE__ size = (bytes + align - 1) / align * align;\n"
                     "        void *p = 0;\n"
                     "        if (bytes && !(e && !__builtin_strcmp(e, \"mapped\")) &&\n"
                     "            !posix_memalign(&p, align, size)) {\n"
                     "            if (align == huge)\n"
                     "                madvise(p, size, 14); /* MADV_HUGEPAGE */\n"
                     "            __builtin_memcpy(p, %s__weights, bytes);\n"
                     "            w = (const unsigned char *)p;\n"
                     "        }\n"
                     "    }\n"
                     "#endif\n"
                     "    __atomic_store_n(&%s__weights_copy, w, __ATOMIC_RELEASE);\n"
                     "    return w;\n}\n\n",
                     n, n, n, n, n, n, n, n, n, bytes, n, n);
}

void tt__write_net_info(tt_strbuf *sb, const tt__net_build *b)
{
    char *info = info_json(b);
    tt_strbuf_printf(sb, "const char *%s_info(void)\n{\n    return\n", b->name);
    c_string(sb, info ? info : "{}");
    tt_strbuf_append(sb, ";\n}\n");
    if (!info)
        sb->oom = 1;
    free(info);
}

tt_status tt__write_net_glue(const char *path, const tt__net_build *b, const char *params_path,
                             tt_errbuf *err)
{
    const tt_net *net = b->net;
    const tt_graph *g = net->g;
    const char *n = b->name;
    tt_strbuf sb = {0};
    tt_strbuf_printf(&sb,
                     "/* %s: the network's calls, generated by tvm-compile.  Freestanding: no "
                     "headers. */\n\n"
                     "typedef __INT32_TYPE__ int32_t;\ntypedef __INT64_TYPE__ int64_t;\n"
                     "typedef __UINT8_TYPE__ uint8_t;\n\n",
                     n);
    for (size_t t = 0; t < net->tasks.len; t++)
        tt_strbuf_printf(&sb, "extern int %s__task%zu(void **args); /* %s */\n", n, t,
                         net->tasks.data[t].label);
    tt__write_net_weights_asm(&sb, n, params_path);
    tt_strbuf_printf(&sb, "static unsigned char %s__arena[%lld] __attribute__((aligned(64)));\n\n",
                     n, (long long)(net->arena_bytes > 0 ? net->arena_bytes : 64));
    write_weights_in_memory(&sb, n, (long long)b->weights->bytes);
    /* One body for every entry point: buffers in arrays, and a hook before each call and after
     * the last (NAME_run_profiled: per-call times without a clock in the library). */
    tt_strbuf_printf(&sb,
                     "static int %s__run(void *workspace, const void *const *tvm__in, "
                     "void *const *tvm__out,\n"
                     "                   void (*tvm__hook)(void *, int), void *tvm__ctx)\n{\n",
                     n);
    tt_strbuf_printf(&sb, "    const unsigned char *tvm__w = %s__weights_in_memory();\n", n);
    tt_strbuf_append(&sb, "    unsigned char *tvm__ws = (unsigned char *)workspace;\n");
    int max_args = 1;
    for (size_t c = 0; c < net->calls.len; c++)
        if (net->calls.data[c].nargs > max_args)
            max_args = net->calls.data[c].nargs;
    tt_strbuf_printf(&sb, "    void *tvm__a[%d];\n    (void)tvm__w;\n", max_args);
    tt_strbuf_append(&sb, "    if (!tvm__ws || !tvm__in || !tvm__out)\n        return -1;\n");
    for (size_t i = 0; i < g->inputs.len; i++)
        tt_strbuf_printf(&sb, "    if (!tvm__in[%zu])\n        return -1;\n", i);
    for (size_t i = 0; i < g->outputs.len; i++)
        tt_strbuf_printf(&sb, "    if (!tvm__out[%zu])\n        return -1;\n", i);
    for (size_t c = 0; c < net->calls.len; c++) {
        const tt_net_call *call = &net->calls.data[c];
        char at[200];
        tt_gnode_describe(g, call->first_node, at, sizeof(at));
        tt_strbuf_printf(&sb, "    /* call %zu: task %d, %s, from ", c, call->task,
                         net->tasks.data[call->task].label);
        tt__comment_text(&sb, at);
        tt_strbuf_append(&sb, " */\n");
        tt_strbuf_printf(&sb, "    if (tvm__hook)\n        tvm__hook(tvm__ctx, %zu);\n", c);
        for (int k = 0; k < call->nargs; k++) {
            tt_strbuf_printf(&sb, "    tvm__a[%d] = ", k);
            address(&sb, b, call->args[k], b->weights->offset[c][k]);
            tt_strbuf_append(&sb, ";\n");
        }
        tt_strbuf_printf(&sb, "    if (%s__task%d(tvm__a))\n        return %zu;\n", n, call->task,
                         c + 1);
    }
    tt_strbuf_printf(&sb, "    if (tvm__hook)\n        tvm__hook(tvm__ctx, %zu);\n",
                     net->calls.len);
    for (size_t i = 0; i < net->copies.len; i++) {
        const tt_net_copy *cp = &net->copies.data[i];
        const tt_gtensor *o = &g->tensors.data[g->outputs.data[cp->output]];
        tt_strbuf_printf(&sb, "    __builtin_memmove(tvm__out[%d], ", cp->output);
        address(&sb, b, cp->from, b->weights->copy_offset[i]);
        tt_strbuf_printf(&sb, ", %lldu);\n",
                         (long long)(tt_gtensor_numel(o) * tt_dtype_bytes(o->dtype)));
    }
    tt_strbuf_append(&sb, "    return 0;\n}\n\n");
    /* The typed entry points. */
    tt_strbuf_printf(
        &sb, "int %s_init(void)\n{\n    (void)%s__weights_in_memory();\n    return 0;\n}\n\n", n,
        n);
    tt_strbuf_printf(&sb, "int %s_run_workspace(void *workspace, ", n);
    tt__net_params(&sb, b);
    tt_strbuf_append(&sb, ")\n{\n");
    tt__net_buffer_arrays(&sb, b);
    tt_strbuf_printf(&sb,
                     "    return %s__run(workspace, tvm__in, tvm__out, (void (*)(void *, "
                     "int))0, (void *)0);\n}\n\n",
                     n);
    tt_strbuf_printf(&sb, "int %s_run(", n);
    tt__net_params(&sb, b);
    tt_strbuf_printf(&sb, ")\n{\n    return %s_run_workspace(%s__arena, ", n, n);
    args(&sb, b);
    tt_strbuf_append(&sb, ");\n}\n\n");
    /* The same for callers that hold the buffers in arrays (tvm-net, FFI). */
    tt_strbuf_printf(&sb,
                     "int %s_run_buffers(void *workspace, const void *const *inputs, void *const "
                     "*outputs)\n{\n"
                     "    return %s__run(workspace ? workspace : %s__arena, inputs, outputs,\n"
                     "                   (void (*)(void *, int))0, (void *)0);\n}\n\n",
                     n, n, n);
    tt_strbuf_printf(&sb,
                     "int %s_run_profiled(void *workspace, const void *const *inputs,\n"
                     "                    void *const *outputs, void (*hook)(void *ctx, int call), "
                     "void *ctx)\n{\n"
                     "    return %s__run(workspace ? workspace : %s__arena, inputs, outputs, hook, "
                     "ctx);\n}\n\n",
                     n, n, n);
    tt__write_net_info(&sb, b);
    return tt__write_text(path, &sb, err);
}

/* ---- NAME.h ---- */

static void shape_text(tt_strbuf *sb, const tt_gtensor *t)
{
    tt_strbuf_printf(sb, "%s[", tt_dtype_name(t->dtype));
    for (int d = 0; d < t->rank; d++)
        tt_strbuf_printf(sb, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    tt_strbuf_append(sb, "]");
}

static void upper(char *dst, const char *src, size_t n)
{
    size_t k = 0;
    for (; *src && k + 1 < n; src++)
        dst[k++] = (char)toupper((unsigned char)*src);
    dst[k] = 0;
}

static void tensor_macros(tt_strbuf *sb, const char *un, const char *what, size_t i,
                          const tt_gtensor *t, const char *cname)
{
    tt_strbuf_printf(sb, "/* %s %zu, %s: '", what, i, cname);
    tt__comment_text(sb, t->name);
    tt_strbuf_append(sb, "' ");
    shape_text(sb, t);
    tt_strbuf_append(sb, " */\n");
    char uw[16];
    upper(uw, what, sizeof(uw));
    tt_strbuf_printf(sb, "#define %s_%s%zu_RANK %d\n", un, uw, i, t->rank);
    tt_strbuf_printf(sb, "#define %s_%s%zu_SHAPE {", un, uw, i);
    for (int d = 0; d < t->rank; d++)
        tt_strbuf_printf(sb, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    tt_strbuf_printf(sb, "}\n#define %s_%s%zu_ELEMENTS %lldLL\n", un, uw, i,
                     (long long)tt_gtensor_numel(t));
}

tt_status tt__write_net_header(const char *path, const char *guard, const tt__net_build *b,
                               tt_errbuf *err)
{
    const tt_net *net = b->net;
    const tt_graph *g = net->g;
    const char *n = b->name;
    char un[160];
    upper(un, n, sizeof(un));
    tt_strbuf sb = {0};
    char now[64];
    tt__utc((double)time(NULL), now, sizeof(now));
    tt_strbuf_printf(&sb, "/* Generated by tvm-compile on %s from ", now);
    tt__comment_text(&sb, b->model ? b->model : "a network");
    tt_strbuf_append(&sb, " for target '");
    tt__comment_text(&sb, b->target);
    int tuned = 0;
    for (size_t t = 0; t < net->tasks.len; t++)
        tuned += tt_compile_source_tuned(b->reps[t].source);
    tt_strbuf_printf(&sb,
                     "'.  Do not edit.\n"
                     " *\n"
                     " * %zu kernel calls of %zu tasks (%d tuned, %zu not: the DEFAULT schedule or "
                     "a similar shape's), "
                     "%.4g GFLOP per run.\n"
                     " * Weights: %.2f MiB embedded in the library (%.2f MiB packed for the "
                     "kernels).\n",
                     net->calls.len, net->tasks.len, tuned, net->tasks.len - (size_t)tuned,
                     net->flops / 1e9, (double)b->weights->bytes / 1048576.0,
                     (double)b->weights->packed_bytes / 1048576.0);
    if (b->estimate_s > 0)
        tt_strbuf_printf(
            &sb,
            " * Estimated latency: %.4g ms (the records' median samples times the calls, %.4g ms "
            "from their fastest; tvm-net time measures it).\n",
            b->estimate_s * 1e3, b->estimate_fastest_s * 1e3);
    if (b->opencl)
        tt_strbuf_printf(
            &sb,
            " *\n"
            " * Runs on an OpenCL device (docs/opencl.md).  %s_init, or the first run, opens "
            "the ICD loader,\n"
            " * picks the device (TVM_TUNE_OPENCL_DEVICE=P:D, else the first GPU, else the "
            "first device),\n"
            " * checks that the network fits it, builds the kernels and uploads the weights "
            "once;\n"
            " * inputs and outputs travel through pinned host buffers "
            "(TVM_TUNE_OPENCL_PINNED=0: not);\n"
            " * %s_release gives it all back.  Inputs and outputs are dense row-major arrays "
            "in host\n"
            " * memory; activations stay on the device.  The functions return 0 or a "
            "TVM_TUNE_* code\n"
            " * below, and %s_error() says what failed: the OpenCL call, its code and the "
            "device.\n"
            " * Calls are serialised (one device queue).\n *\n * Tasks:\n",
            n, n, n);
    else {
        tt_strbuf_append(
            &sb, " *\n"
                 " * Buffers are dense row-major arrays of the element type.  Both functions "
                 "return 0 on success,\n"
                 " * -1 for a NULL buffer, and N > 0 when kernel call N failed.  ");
        tt_strbuf_printf(&sb,
                         "%s_run uses a static\n"
                         " * workspace: one call at a time per process; %s_run_workspace takes "
                         "the caller's, of\n"
                         " * %s_WORKSPACE_BYTES aligned to 64 bytes, so threads may run the "
                         "network at once.\n *\n * Tasks:\n",
                         n, n, un);
    }
    for (size_t t = 0; t < net->tasks.len; t++) {
        const tt_compile_report *r = &b->reps[t];
        tt_strbuf_printf(&sb, " *   %2zu %-24s x%-3d ", t, net->tasks.data[t].label,
                         net->tasks.data[t].weight);
        if (r->source == TT_COMPILE_DEFAULT)
            tt_strbuf_append(&sb, "DEFAULT schedule (no tuned record)\n");
        else if (r->source == TT_COMPILE_SIMILAR) {
            tt_strbuf_printf(&sb, "NOT TUNED: record %lld of ", r->record);
            tt__comment_text(&sb, r->similar);
            tt_strbuf_append(&sb, ", mapped\n");
        } else {
            char when[64];
            tt__utc(b->timestamps[t], when, sizeof(when));
            tt_strbuf_printf(&sb, "record %lld (%s), fastest %.4g s, %s\n", r->record,
                             tt_compile_source_name(r->source), r->fastest_s, when);
        }
    }
    tt_strbuf_printf(&sb,
                     " * %s_info() returns all of this as JSON, with each task's workload. "
                     "*/\n#ifndef %s\n#define %s\n\n#include <stdint.h>\n\n"
                     "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
                     n, guard, guard);
    tt_strbuf_printf(&sb, "#define %s_NUM_INPUTS %zu\n#define %s_NUM_OUTPUTS %zu\n", un,
                     g->inputs.len, un, g->outputs.len);
    if (b->opencl)
        tt_strbuf_printf(&sb, "#define %s_NUM_CALLS %zu\n", un, net->calls.len);
    else
        tt_strbuf_printf(&sb, "#define %s_WORKSPACE_BYTES %lldLL\n", un,
                         (long long)(net->arena_bytes > 0 ? net->arena_bytes : 64));
    for (size_t i = 0; i < g->inputs.len; i++)
        tensor_macros(&sb, un, "input", i, &g->tensors.data[g->inputs.data[i]], b->in_names[i]);
    for (size_t i = 0; i < g->outputs.len; i++)
        tensor_macros(&sb, un, "output", i, &g->tensors.data[g->outputs.data[i]], b->out_names[i]);
    if (b->opencl) {
        tt_strbuf_append(
            &sb, "\n#ifndef TVM_TUNE_OK /* as <tvm-tune/tvm_tune_abi.h> */\n"
                 "#define TVM_TUNE_OK 0\n"
                 "#define TVM_TUNE_NO_DEVICE    (-1) /* no ICD loader, platform or device */\n"
                 "#define TVM_TUNE_BUILD_FAILED (-2) /* the driver could not build the "
                 "kernels */\n"
                 "#define TVM_TUNE_RUN_FAILED   (-3) /* the device could not run them */\n"
                 "#endif\n"
                 "#ifndef TVM_TUNE_DEVICE_LIMIT\n"
                 "#define TVM_TUNE_DEVICE_LIMIT (-4) /* beyond the device's memory, "
                 "work-group size or local memory */\n"
                 "#define TVM_TUNE_BAD_ARGUMENT (-5) /* a NULL buffer, a malformed "
                 "setting */\n"
                 "#endif\n");
        tt_strbuf_printf(&sb, "\nint %s_init(void);\nint %s_run(", n, n);
        tt__net_params(&sb, b);
        tt_strbuf_printf(
            &sb,
            ");\n/* The buffers in arrays, in the order above (workspace: unused, NULL). */\n"
            "int %s_run_buffers(void *workspace, const void *const *inputs, void *const "
            "*outputs);\n"
            "/* As %s_run_buffers, with each kernel call's device time (seconds, from OpenCL's\n"
            " * profiling events) in call_seconds[0 .. %s_NUM_CALLS). */\n"
            "int %s_profile(const void *const *inputs, void *const *outputs, double "
            "*call_seconds);\n"
            "/* What the last failure was, or \"\". */\n"
            "const char *%s_error(void);\n"
            "void %s_release(void);\n"
            "const char *%s_info(void);\n",
            n, n, un, n, n, n, n);
        tt_strbuf_printf(&sb, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* %s */\n", guard);
        return tt__write_text(path, &sb, err);
    }
    tt_strbuf_printf(&sb,
                     "\n/* Optional: the first run does it.  Copies the weights into the "
                     "process's memory\n"
                     " * (TVM_TUNE_WEIGHTS=mapped: reads them where the library is mapped); "
                     "returns 0. */\n"
                     "int %s_init(void);\nint %s_run(",
                     n, n);
    tt__net_params(&sb, b);
    tt_strbuf_printf(&sb, ");\nint %s_run_workspace(void *workspace, ", n);
    tt__net_params(&sb, b);
    tt_strbuf_printf(
        &sb,
        ");\n/* The buffers in arrays, in the order above (NULL workspace: the static "
        "one). */\n"
        "int %s_run_buffers(void *workspace, const void *const *inputs, void *const "
        "*outputs);\n"
        "/* As %s_run_buffers, calling hook(ctx, i) before kernel call i and hook(ctx, "
        "calls)\n"
        " * after the last, so the caller can time each call (tvm-net profile). */\n"
        "int %s_run_profiled(void *workspace, const void *const *inputs, void *const "
        "*outputs,\n"
        "                    void (*hook)(void *ctx, int call), void *ctx);\n"
        "const char *%s_info(void);\n",
        n, n, n, n);
    tt_strbuf_printf(&sb, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* %s */\n", guard);
    return tt__write_text(path, &sb, err);
}
