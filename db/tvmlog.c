/* TVM's tuning-log formats: AutoTVM v0.2 and auto_scheduler v0.1-v0.6 JSON lines
 * (../shared/reference/log-formats.md).  Lines TVM wrote come back byte for byte: each format
 * has its own writer (Python json.dumps for AutoTVM, TVM's C++ writer for auto_scheduler), and
 * what a record says beyond our columns is kept in its `extra` JSON. */
#include "db_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../schedule/state.h"
#include "../schedule/target.h"
#include "../schedule/workload.h"

/* ---- parsing ---- */

typedef struct {
    tt_arena *arena;
    tt_errbuf *err;
} line_ctx;

static tt_status bad(line_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tt_status bad(line_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_verr(c->err, TT_ERR_PARSE, fmt, ap);
    va_end(ap);
    return TT_ERR_PARSE;
}

static char *arena_text(line_ctx *c, tt_strbuf *sb)
{
    char *s = tt_arena_strdup(c->arena, tt_strbuf_cstr(sb));
    tt_strbuf_free(sb);
    return s;
}

/* Costs, error, all-cost and timestamp: the result part shared by both formats. */
static tt_status parse_result(line_ctx *c, const json_t *r, const char *where, tt_db_record *rec)
{
    if (!json_is_array(r) || json_array_size(r) != 4)
        return bad(c, "%s must be [costs, error_no, all_cost, timestamp]", where);
    const json_t *costs = json_array_get(r, 0);
    if (!json_is_array(costs) || json_array_size(costs) == 0 || json_array_size(costs) > 100000)
        return bad(c, "%s[0] (costs) must be a non-empty array of numbers", where);
    double *v = tt_arena_alloc(c->arena, json_array_size(costs) * sizeof(double));
    if (!v)
        return TT_ERR_NOMEM;
    for (size_t i = 0; i < json_array_size(costs); i++) {
        const json_t *x = json_array_get(costs, i);
        if (!json_is_number(x) || !isfinite(json_number_value(x)) || json_number_value(x) < 0)
            return bad(c, "%s[0][%zu] (a cost) must be a non-negative number", where, i);
        v[i] = json_number_value(x);
    }
    rec->costs = v;
    rec->ncosts = (int)json_array_size(costs);
    const json_t *e = json_array_get(r, 1);
    if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > 8)
        return bad(c, "%s[1] (error_no) must be an integer 0..8", where);
    rec->error_no = (int)json_integer_value(e);
    const json_t *all = json_array_get(r, 2), *ts = json_array_get(r, 3);
    if (!json_is_number(all) || !isfinite(json_number_value(all)))
        return bad(c, "%s[2] (all_cost) must be a number", where);
    if (!json_is_number(ts) || !isfinite(json_number_value(ts)))
        return bad(c, "%s[3] (timestamp) must be a number", where);
    rec->total_s = json_number_value(all);
    rec->timestamp = json_number_value(ts);
    return TT_OK;
}

static tt_status parse_autotvm(line_ctx *c, const json_t *root, tt_db_record *rec)
{
    const json_t *in = json_object_get(root, "input"), *cfg = json_object_get(root, "config");
    const json_t *res = json_object_get(root, "result"), *ver = json_object_get(root, "version");
    const json_t *tv = json_object_get(root, "tvm_version");
    if (!json_is_array(in) || json_array_size(in) != 4)
        return bad(c, "\"input\" must be [target, task_name, args, kwargs]");
    const json_t *target = json_array_get(in, 0), *task = json_array_get(in, 1);
    const json_t *args = json_array_get(in, 2), *kwargs = json_array_get(in, 3);
    if (!json_is_string(target) || !json_is_string(task) || !json_is_array(args) ||
        !json_is_object(kwargs))
        return bad(c, "\"input\" must be [target (string), task_name (string), args (array), "
                      "kwargs (object)]");
    if (!json_is_object(cfg) || !json_is_integer(json_object_get(cfg, "index")) ||
        !json_is_array(json_object_get(cfg, "entity")))
        return bad(c, "\"config\" must be {\"index\": int, \"code_hash\": ..., \"entity\": [...]}");
    const json_t *ent = json_object_get(cfg, "entity");
    for (size_t i = 0; i < json_array_size(ent); i++) {
        const json_t *k = json_array_get(ent, i);
        if (!json_is_array(k) || json_array_size(k) != 3 || !json_is_string(json_array_get(k, 0)) ||
            !json_is_string(json_array_get(k, 1)))
            return bad(c, "\"config.entity\"[%zu] must be [name, tag, value]", i);
    }
    if (!json_is_number(ver) || json_number_value(ver) != 0.2)
        return bad(c, "\"version\" must be 0.2");
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)root, k, x)
    {
        if (strcmp(k, "input") && strcmp(k, "config") && strcmp(k, "result") &&
            strcmp(k, "version") && strcmp(k, "tvm_version"))
            return bad(c, "unexpected key \"%.40s\" in an AutoTVM record", k);
    }
    tt_status s = parse_result(c, json_object_get(root, "result"), "\"result\"", rec);
    if (s)
        return s;
    (void)res;
    tt_strbuf sb = {0};
    tt_strbuf_printf(&sb, "autotvm:%s:", json_string_value(task));
    tt_json_write_py(&sb, args);
    rec->workload = arena_text(c, &sb);
    rec->target = tt_arena_strdup(c->arena, json_string_value(target));
    tt_json_write_py(&sb, cfg);
    rec->config = arena_text(c, &sb);
    rec->config_kind = TT_CONFIG_AUTOTVM;
    /* What else the line says, for a faithful export. */
    json_t *extra = json_object();
    json_object_set_new(extra, "format", json_string("autotvm"));
    json_object_set(extra, "kwargs", (json_t *)kwargs);
    if (tv)
        json_object_set(extra, "tvm_version", (json_t *)tv);
    tt_json_write_py(&sb, extra);
    json_decref(extra);
    rec->extra = arena_text(c, &sb);
    return rec->workload && rec->target && rec->config && rec->extra ? TT_OK : TT_ERR_NOMEM;
}

/* Known registered auto_scheduler workloads, written as our TE programs in TVM's op order, so
 * their records replay on our DAGs.  Returns a malloc'ed TE workload text or NULL. */
/* The second element of an exported key whose record lost steps TVM cannot read. */
#define LOSSY_MARK "tvm-tune: steps TVM cannot read left out"

static char *map_ansor_key(const json_t *key)
{
    if (!json_is_array(key) || !json_is_string(json_array_get(key, 0)))
        return NULL;
    const char *name = json_string_value(json_array_get(key, 0));
    /* Ours, as export writes it: ["<our workload key>"] (a record exported without steps TVM
     * cannot read carries a second element, and stays foreign: its steps are not the ones that
     * were measured). */
    if (json_array_size(key) == 1 && strchr(name, ':')) {
        tt_workload *w;
        if (tt_workload_parse(name, &w, NULL))
            return NULL;
        tt_workload_free(w);
        return strdup(name);
    }
    int64_t a[8] = {0};
    tt_strbuf sb = {0};
    if (!strcmp(name, "matmul_add") && json_array_size(key) == 5 &&
        json_is_string(json_array_get(key, 4))) {
        for (int i = 0; i < 3; i++) {
            if (!json_is_integer(json_array_get(key, (size_t)i + 1)))
                return NULL;
            a[i] = json_integer_value(json_array_get(key, (size_t)i + 1));
        }
        const char *dt = json_string_value(json_array_get(key, 4));
        tt_strbuf_printf(&sb,
                         "te:matmul[i,j] += A[i,k] * B[k,j]; out[i,j] = matmul[i,j] + C[i,j]; "
                         "A:%s[%lld,%lld]; B:%s[%lld,%lld]; C:%s[%lld,%lld]",
                         dt, (long long)a[0], (long long)a[1], dt, (long long)a[1], (long long)a[2],
                         dt, (long long)a[0], (long long)a[2]);
        return tt_strbuf_take(&sb);
    }
    if (!strcmp(name, "conv2d_layer") && json_array_size(key) == 10) {
        /* N, H, W, CO, CI, KH, KW, [stride], [padding]: TVM's topi conv2d_nchw + bias + relu. */
        for (int i = 0; i < 7; i++) {
            if (!json_is_integer(json_array_get(key, (size_t)i + 1)))
                return NULL;
            a[i] = json_integer_value(json_array_get(key, (size_t)i + 1));
        }
        const json_t *st = json_array_get(key, 8), *pd = json_array_get(key, 9);
        if (json_array_size(st) != 2 || json_array_size(pd) != 2)
            return NULL;
        int64_t sh = json_integer_value(json_array_get(st, 0)),
                sw = json_integer_value(json_array_get(st, 1));
        int64_t ph = json_integer_value(json_array_get(pd, 0)),
                pw = json_integer_value(json_array_get(pd, 1));
        int64_t N = a[0], H = a[1], W = a[2], CO = a[3], CI = a[4], KH = a[5], KW = a[6];
        if (sh < 1 || sw < 1 || ph < 0 || pw < 0)
            return NULL;
        int64_t OH = (H + 2 * ph - KH) / sh + 1, OW = (W + 2 * pw - KW) / sw + 1;
        tt_strbuf_printf(
            &sb,
            "te:pad[n,c,h,w] = select(h >= %lld && h < %lld && w >= %lld && w < %lld, "
            "data[n,c,h-%lld,w-%lld], 0); "
            "conv[n,co,oh,ow] += pad[n,rc,oh%s%.0lld+rh,ow%s%.0lld+rw] * kernel[co,rc,rh,rw]; "
            "T_add[n,c,h,w] = conv[n,c,h,w] + bias[0,c,0,0]; "
            "relu[n,c,h,w] = max(T_add[n,c,h,w], 0); "
            "pad:float32[%lld,%lld,%lld,%lld]; conv:float32[%lld,%lld,%lld,%lld]; "
            "data:float32[%lld,%lld,%lld,%lld]; kernel:float32[%lld,%lld,%lld,%lld]; "
            "bias:float32[1,%lld,1,1]",
            (long long)ph, (long long)(H + ph), (long long)pw, (long long)(W + pw), (long long)ph,
            (long long)pw, sh > 1 ? "*" : "", sh > 1 ? (long long)sh : 0LL, sw > 1 ? "*" : "",
            sw > 1 ? (long long)sw : 0LL, (long long)N, (long long)CI, (long long)(H + 2 * ph),
            (long long)(W + 2 * pw), (long long)N, (long long)CO, (long long)OH, (long long)OW,
            (long long)N, (long long)CI, (long long)H, (long long)W, (long long)CO, (long long)CI,
            (long long)KH, (long long)KW, (long long)CO);
        return tt_strbuf_take(&sb);
    }
    return NULL;
}

/* True if `steps` replay on the workload `key`: only then is the mapping usable. */
static bool replays_on(const char *key, const char *steps)
{
    tt_workload *w;
    tt_step *s;
    size_t n;
    tt_state *st;
    bool ok = false;
    if (tt_workload_parse(key, &w, NULL))
        return false;
    if (!tt_steps_from_json(steps, &s, &n, NULL)) {
        if (!tt_state_replay(&w->dag, s, n, &st, NULL)) {
            ok = true;
            tt_state_free(st);
        }
        free(s);
    }
    tt_workload_free(w);
    return ok;
}

static tt_status parse_ansor(line_ctx *c, const json_t *root, tt_db_record *rec)
{
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)root, k, x)
    {
        if (strcmp(k, "i") && strcmp(k, "r") && strcmp(k, "v"))
            return bad(c, "unexpected key \"%.40s\" in an auto_scheduler record", k);
    }
    const json_t *i = json_object_get(root, "i"), *v = json_object_get(root, "v");
    if (!json_is_string(v) || strncmp(json_string_value(v), "v0.", 3))
        return bad(c, "\"v\" must be a version string like \"v0.6\"");
    if (!json_is_array(i) || json_array_size(i) != 2)
        return bad(c, "\"i\" must be [task, state]");
    const json_t *task = json_array_get(i, 0), *state = json_array_get(i, 1);
    size_t nt = json_array_size(task);
    if (!json_is_array(task) || nt < 2 || nt > 6 || !json_is_string(json_array_get(task, 0)) ||
        !json_is_string(json_array_get(task, 1)))
        return bad(c, "\"i\"[0] (task) must be [workload_key, target, ...] with 2 to 6 fields");
    if (!json_is_array(state) || json_array_size(state) != 2 ||
        !json_is_array(json_array_get(state, 1)))
        return bad(c, "\"i\"[1] (state) must be [[], [steps...]]");
    const json_t *steps = json_array_get(state, 1);
    for (size_t s = 0; s < json_array_size(steps); s++) {
        const json_t *st = json_array_get(steps, s);
        if (!json_is_array(st) || json_array_size(st) < 1 || !json_is_string(json_array_get(st, 0)))
            return bad(c, "step %zu must be [\"CODE\", ...]", s);
    }
    tt_status s = parse_result(c, json_object_get(root, "r"), "\"r\"", rec);
    if (s)
        return s;
    tt_strbuf sb = {0};
    tt_json_write_cxx(&sb, steps);
    rec->config = arena_text(c, &sb);
    rec->config_kind = TT_CONFIG_STEPS;
    rec->target = tt_arena_strdup(c->arena, json_string_value(json_array_get(task, 1)));
    const char *key = json_string_value(json_array_get(task, 0));
    /* The workload: ours when the registered function is one we know and the steps replay. */
    json_t *kj = NULL;
    char *mapped = NULL;
    if (!tt_json_parse(key, strlen(key), &kj, NULL))
        mapped = map_ansor_key(kj);
    json_decref(kj);
    if (mapped && rec->config && replays_on(mapped, rec->config)) {
        tt_workload *w;
        if (!tt_workload_parse(mapped, &w, NULL)) {
            rec->workload = tt_arena_strdup(c->arena, w->key);
            tt_workload_free(w);
        }
    }
    free(mapped);
    if (!rec->workload) {
        tt_strbuf_printf(&sb, "ansor:%s", key);
        rec->workload = arena_text(c, &sb);
    }
    json_t *extra = json_object();
    json_object_set_new(extra, "format", json_string("ansor"));
    json_object_set(extra, "v", (json_t *)v);
    json_object_set_new(extra, "task", json_deep_copy(task));
    json_object_set_new(extra, "state0", json_deep_copy(json_array_get(state, 0)));
    json_object_set_new(
        extra, "timestamp_int",
        json_boolean(json_is_integer(json_array_get(json_object_get(root, "r"), 3))));
    tt_json_write_py(&sb, extra);
    json_decref(extra);
    rec->extra = arena_text(c, &sb);
    return rec->workload && rec->target && rec->config && rec->extra ? TT_OK : TT_ERR_NOMEM;
}

tt_status tt_log_parse_line(const char *line, tt_arena *arena, tt_db_record *rec, tt_errbuf *err)
{
    memset(rec, 0, sizeof(*rec));
    line_ctx c = {arena, err};
    json_t *root;
    size_t len = strlen(line);
    if (len > (16u << 20))
        return bad(&c, "line longer than 16 MiB");
    tt_errbuf jerr;
    if (tt_json_parse(line, len, &root, &jerr))
        return bad(&c, "not JSON (%s)", jerr.msg);
    tt_status s;
    if (!json_is_object(root))
        s = bad(&c, "a record is a JSON object");
    else if (json_object_get(root, "input"))
        s = parse_autotvm(&c, root, rec);
    else if (json_is_number(json_object_get(root, "v")))
        s = bad(&c, "AutoTVM v0.1 records are not supported (TVM itself no longer reads them)");
    else if (json_object_get(root, "i") && json_object_get(root, "r"))
        s = parse_ansor(&c, root, rec);
    else
        s = bad(
            &c,
            "neither an AutoTVM (\"input\") nor an auto_scheduler (\"i\", \"r\", \"v\") record");
    json_decref(root);
    return s;
}

/* ---- formatting rows ---- */

static tt_status format_autotvm(const tt_db_row *row, const json_t *extra, tt_strbuf *sb)
{
    /* workload "autotvm:<task>:<args>" */
    const char *task = row->workload + 8, *colon = strchr(task, ':');
    json_t *cfg = NULL, *args = NULL;
    if (!colon || tt_json_parse(colon + 1, strlen(colon + 1), &args, NULL) ||
        tt_json_parse(row->config, strlen(row->config), &cfg, NULL)) {
        json_decref(args);
        return TT_ERR_PARSE;
    }
    char task_name[256];
    snprintf(task_name, sizeof(task_name), "%.*s", (int)(colon - task), task);
    tt_strbuf_append(sb, "{\"input\": [");
    tt_json_write_py_string(sb, row->target);
    tt_strbuf_append(sb, ", ");
    tt_json_write_py_string(sb, task_name);
    tt_strbuf_append(sb, ", ");
    tt_json_write_py(sb, args);
    tt_strbuf_append(sb, ", ");
    const json_t *kw = json_object_get(extra, "kwargs");
    if (kw)
        tt_json_write_py(sb, kw);
    else
        tt_strbuf_append(sb, "{}");
    tt_strbuf_append(sb, "], \"config\": ");
    tt_json_write_py(sb, cfg);
    tt_strbuf_append(sb, ", \"result\": [[");
    char b[40];
    for (int i = 0; i < row->ncosts; i++) {
        tt_fmt_pyfloat(b, sizeof(b), row->costs[i]);
        tt_strbuf_printf(sb, "%s%s", i ? ", " : "", b);
    }
    tt_fmt_pyfloat(b, sizeof(b), row->total_s);
    tt_strbuf_printf(sb, "], %d, %s, ", row->error_no, b);
    tt_fmt_pyfloat(b, sizeof(b), row->timestamp);
    tt_strbuf_printf(sb, "%s], \"version\": 0.2, \"tvm_version\": ", b);
    const json_t *tv = json_object_get(extra, "tvm_version");
    if (tv)
        tt_json_write_py(sb, tv);
    else
        tt_json_write_py_string(sb, "0.8.dev0");
    tt_strbuf_append(sb, "}");
    json_decref(args);
    json_decref(cfg);
    return TT_OK;
}

static tt_status format_ansor(const tt_db_row *row, const json_t *extra, tt_strbuf *sb)
{
    /* LR (packed weights) and the double_buffer pragma are ours: TVM has no LR step and decides
     * layout rewrites itself when it builds, and auto_scheduler's PR knows no double buffering,
     * so an exported record leaves them out (docs/database.md), and says so in its workload
     * key, so that importing it back does not pair its time with steps that were not measured. */
    json_t *steps = NULL, *kept = NULL;
    if ((strstr(row->config, "\"LR\"") || strstr(row->config, "\"double_buffer\"")) &&
        !tt_json_parse(row->config, strlen(row->config), &steps, NULL) && json_is_array(steps)) {
        kept = json_array();
        for (size_t i = 0; kept && i < json_array_size(steps); i++) {
            json_t *st = json_array_get(steps, i);
            const char *code = json_string_value(json_array_get(st, 0));
            const char *pragma = json_string_value(json_array_get(st, 3));
            bool ours = code && (!strcmp(code, "LR") || (!strcmp(code, "PR") && pragma &&
                                                         !strcmp(pragma, "double_buffer")));
            if (!ours)
                json_array_append(kept, st);
        }
    }
    json_decref(steps);
    const json_t *task = json_object_get(extra, "task");
    tt_strbuf_append(sb, "{\"i\": [");
    if (task) {
        tt_json_write_cxx(sb, task);
    } else {
        /* Our own record: the workload key wrapped as a one-element JSON list (two when steps
         * were left out). */
        tt_strbuf key = {0};
        json_t *k =
            kept ? json_pack("[ss]", row->workload, LOSSY_MARK) : json_pack("[s]", row->workload);
        tt_json_write_cxx(&key, k);
        json_decref(k);
        tt_strbuf_append(sb, "[");
        tt_json_write_cxx_string(sb, tt_strbuf_cstr(&key));
        tt_strbuf_free(&key);
        tt_strbuf_append(sb, ", ");
        tt_json_write_cxx_string(sb, row->target);
        tt_target t;
        int cores = !tt_target_parse(row->target, &t, NULL) && t.num_cores ? t.num_cores : 1;
        tt_strbuf_printf(sb, ", [%d, 64, 64, 0, 0, 0, 0, 0], \"\", 0, []]", cores);
    }
    tt_strbuf_append(sb, ", [");
    const json_t *s0 = json_object_get(extra, "state0");
    if (s0)
        tt_json_write_cxx(sb, s0);
    else
        tt_strbuf_append(sb, "[]");
    if (kept) {
        tt_strbuf_append(sb, ", ");
        tt_json_write_cxx(sb, kept);
        tt_strbuf_append(sb, "]], \"r\": [[");
        json_decref(kept);
    } else {
        tt_strbuf_printf(sb, ", %s]], \"r\": [[", row->config);
    }
    char b[40];
    for (int i = 0; i < row->ncosts; i++) {
        tt_fmt_g6(b, sizeof(b), row->costs[i]);
        tt_strbuf_printf(sb, "%s%s", i ? ", " : "", b);
    }
    tt_fmt_g6(b, sizeof(b), row->total_s);
    tt_strbuf_printf(sb, "], %d, %s, ", row->error_no, b);
    const json_t *ti = json_object_get(extra, "timestamp_int");
    if (!ti || json_is_true(ti))
        tt_strbuf_printf(sb, "%lld", (long long)row->timestamp);
    else {
        tt_fmt_g6(b, sizeof(b), row->timestamp);
        tt_strbuf_append(sb, b);
    }
    tt_strbuf_append(sb, "], \"v\": ");
    const json_t *v = json_object_get(extra, "v");
    tt_json_write_cxx_string(sb, v && json_is_string(v) ? json_string_value(v) : "v0.6");
    tt_strbuf_append(sb, "}");
    return TT_OK;
}

tt_status tt_log_format_row(const tt_db_row *row, tt_log_format fmt, tt_strbuf *sb)
{
    json_t *extra = NULL;
    if (row->extra && tt_json_parse(row->extra, strlen(row->extra), &extra, NULL))
        extra = NULL;
    tt_status s;
    bool autotvm = row->config_kind == TT_CONFIG_AUTOTVM;
    if ((fmt == TT_LOG_AUTOTVM && !autotvm) || (fmt == TT_LOG_ANSOR && autotvm))
        s = TT_ERR_UNSUPPORTED;
    else if (autotvm)
        s = strncmp(row->workload, "autotvm:", 8) ? TT_ERR_UNSUPPORTED
                                                  : format_autotvm(row, extra, sb);
    else
        s = format_ansor(row, extra, sb);
    json_decref(extra);
    return s;
}

/* ---- import and export ---- */

#define IMPORT_BATCH 1000

tt_status tt_db_import_stream(tt_db *db, FILE *in, const char *name, tt_db_import_report *rep,
                              tt_errbuf *err)
{
    memset(rep, 0, sizeof(*rep));
    tt_arena arena;
    tt_arena_init(&arena, 1 << 16);
    tt_db_record *batch = calloc(IMPORT_BATCH, sizeof(tt_db_record));
    char *line = NULL;
    size_t cap = 0, nb = 0;
    ssize_t len;
    tt_status s = TT_OK;
    if (!batch) {
        tt_arena_free(&arena);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    for (;;) {
        len = getline(&line, &cap, in);
        if (len >= 0) {
            rep->lines++;
            while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
                line[--len] = 0;
            size_t lead = strspn(line, " \t");
            if (line[lead] == 0 || line[lead] == '#' || (lead > 0 && line[lead] != '{')) {
                rep->comments++;
                continue;
            }
            tt_errbuf lerr;
            if (tt_log_parse_line(line + lead, &arena, &batch[nb], &lerr)) {
                if (rep->malformed++ == 0)
                    snprintf(rep->first_error, sizeof(rep->first_error), "%.150s:%zu: %.500s", name,
                             rep->lines, lerr.msg);
                continue;
            }
            rep->records++;
            if (strncmp(batch[nb].workload, "autotvm:", 8) &&
                strncmp(batch[nb].workload, "ansor:", 6))
                rep->mapped++;
            nb++;
        }
        if (nb == IMPORT_BATCH || (len < 0 && nb > 0)) {
            size_t ins = 0;
            if ((s = tt_db_insert(db, batch, nb, &ins))) {
                tt_err(err, s, "%s: importing the records before line %zu: %s", name, rep->lines,
                       tt_db_errmsg(db));
                break;
            }
            rep->inserted += ins;
            rep->duplicates += nb - ins;
            nb = 0;
            tt_arena_free(&arena);
        }
        if (len < 0)
            break;
    }
    if (!s && ferror(in))
        s = tt_err(err, TT_ERR_IO, "%s: read error: %s", name, strerror(errno));
    free(line);
    free(batch);
    tt_arena_free(&arena);
    return s;
}

tt_status tt_db_import_file(tt_db *db, const char *path, tt_db_import_report *rep, tt_errbuf *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        memset(rep, 0, sizeof(*rep));
        return tt_err(err, TT_ERR_IO, "%s: %s", path, strerror(errno));
    }
    tt_status s = tt_db_import_stream(db, f, path, rep, err);
    fclose(f);
    return s;
}

typedef struct {
    FILE *out;
    tt_log_format fmt;
    size_t n;
    tt_status st;
} export_ctx;

static int export_row(void *vctx, const tt_db_row *row)
{
    export_ctx *c = vctx;
    tt_strbuf sb = {0};
    tt_status s = tt_log_format_row(row, c->fmt, &sb);
    if (s == TT_OK) {
        fputs(tt_strbuf_cstr(&sb), c->out);
        fputc('\n', c->out);
        c->n++;
    }
    tt_strbuf_free(&sb);
    if (ferror(c->out)) {
        c->st = TT_ERR_IO;
        return 1;
    }
    return 0;
}

tt_status tt_db_export(tt_db *db, const tt_db_filter *f, tt_log_format fmt, FILE *out, size_t *n,
                       tt_errbuf *err)
{
    export_ctx c = {out, fmt, 0, TT_OK};
    tt_status s = tt_db_history(db, f, export_row, &c);
    if (n)
        *n = c.n;
    if (s)
        return tt_err(err, s, "%s", tt_db_errmsg(db));
    if (c.st)
        return tt_err(err, c.st, "write error: %s", strerror(errno));
    return TT_OK;
}
