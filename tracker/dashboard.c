#include "dashboard.h"

#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/strbuf.h"

/* The page is static; dashboard.js fills it from /api/state every two seconds.  Everything that
 * came from the network (device names, workloads, messages) is set as text, never as markup. */
static const char page_html[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<title>tvm-tracker</title>\n"
    "<link rel=\"stylesheet\" href=\"/dashboard.css\">\n"
    "<script src=\"/dashboard.js\" defer></script>\n"
    "</head><body>\n"
    "<header><h1>tvm-tracker <span id=\"address\"></span></h1>\n"
    "<p id=\"status\">loading&hellip;</p></header>\n"
    "<section><h2>Devices</h2><table id=\"devices\"><thead><tr><th>key</th><th>address</th>"
    "<th>implementation</th><th>device</th><th>health</th><th>current work</th></tr></thead>"
    "<tbody></tbody></table></section>\n"
    "<section><h2>Queues</h2><table id=\"queues\"><thead><tr><th>key</th><th>free</th>"
    "<th>waiting requests</th></tr></thead><tbody></tbody></table></section>\n"
    "<section><h2>Jobs</h2><table id=\"jobs\"><thead><tr><th>job</th><th>state</th>"
    "<th>workloads</th><th>key</th><th>strategy</th><th>progress</th><th>best</th>"
    "<th>errors</th></tr></thead><tbody></tbody></table><div id=\"curves\"></div></section>\n"
    "<section><h2>Best per workload</h2><table id=\"best\"><thead><tr><th>workload</th>"
    "<th>target</th><th>best time</th><th>GFLOPS</th><th>records</th></tr></thead><tbody>"
    "</tbody></table></section>\n"
    "<footer>JSON: <a href=\"/api/state\">/api/state</a> &middot; Prometheus: "
    "<a href=\"/metrics\">/metrics</a></footer>\n"
    "</body></html>\n";

static const char page_css[] =
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}\n"
    "h1{font-size:1.4em;margin:0}h1 span{font-weight:normal;color:#666}\n"
    "h2{font-size:1.1em;margin:1.4em 0 .4em}\n"
    "table{border-collapse:collapse;background:#fff;min-width:40em}\n"
    "th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;font-size:.9em}\n"
    "th{background:#eee}td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".ok{color:#17702a}.warn{color:#a06000}.bad{color:#b00020;font-weight:bold}\n"
    ".bar{display:inline-block;width:10em;height:.8em;background:#e4e4e4;vertical-align:middle}\n"
    ".bar span{display:block;height:100%;background:#3a7bd5}\n"
    "#curves img{border:1px solid #ddd;background:#fff;margin:.6em .6em 0 0;width:560px}\n"
    "footer{margin-top:2em;color:#666;font-size:.85em}\n";

static const char page_js[] =
    "'use strict';\n"
    "function cell(tr, text, cls) {\n"
    "  const td = document.createElement('td');\n"
    "  td.textContent = text === undefined || text === null ? '' : String(text);\n"
    "  if (cls) td.className = cls;\n"
    "  tr.appendChild(td);\n"
    "  return td;\n"
    "}\n"
    "function rows(id, list, fill) {\n"
    "  const body = document.querySelector('#' + id + ' tbody');\n"
    "  body.replaceChildren();\n"
    "  for (const x of list) { const tr = document.createElement('tr'); fill(tr, x);"
    " body.appendChild(tr); }\n"
    "  if (!list.length) { const tr = document.createElement('tr');"
    " const td = cell(tr, 'none'); td.colSpan = 8; body.appendChild(tr); }\n"
    "}\n"
    "function count(n, what) { return n + ' ' + what + (n === 1 ? '' : 's'); }\n"
    "function time(s) {\n"
    "  if (!s) return '-';\n"
    "  return s < 1e-3 ? (s * 1e6).toFixed(1) + ' us' : s < 1 ? (s * 1e3).toFixed(3) + ' ms'"
    " : s.toFixed(2) + ' s';\n"
    "}\n"
    "function describe(d) {\n"
    "  if (!d) return '';\n"
    "  let t = (d.arch || '') + (d.cores ? ', ' + d.cores + ' cores' : '');\n"
    "  if (d.model) t += ', ' + d.model;\n"
    "  if (d.opencl && d.opencl.length) t += ', OpenCL: ' + d.opencl.map(c => c.name).join('; ');\n"
    "  return t;\n"
    "}\n"
    "function render(st) {\n"
    "  document.getElementById('address').textContent = st.tracker.address;\n"
    "  const c = st.tracker;\n"
    "  document.getElementById('status').textContent = 'up ' + Math.round(c.uptime_s) + ' s, ' +\n"
    "    count(c.connections, 'connection') + ', ' + count(st.servers.length, 'device') + ', ' +\n"
    "    count(c.counters.handouts, 'hand-out') + (c.authenticated ? ', farm key on' :"
    " ', no farm key (loopback only)');\n"
    "  rows('devices', st.servers, (tr, s) => {\n"
    "    cell(tr, s.key); cell(tr, s.address); cell(tr, s.impl); cell(tr, describe(s.device));\n"
    "    let h = 'ok', cls = 'ok';\n"
    "    if (s.quarantined) { h = 'quarantined: ' + (s.quarantine_reason || ''); cls = 'bad'; }\n"
    "    else if (s.stale) { h = 'silent for ' + Math.round(s.silent_s) + ' s'; cls = 'warn'; }\n"
    "    if (!s.authenticated) { h += ' (unauthenticated TVM peer)'; cls = 'warn'; }\n"
    "    cell(tr, h, cls);\n"
    "    cell(tr, s.in_use_by ? 'measuring for ' + s.in_use_by + ' (' + Math.round(s.in_use_s) +"
    " ' s)' : s.free ? 'idle' : '-');\n"
    "  });\n"
    "  rows('queues', st.queues, (tr, q) => { cell(tr, q.key); cell(tr, q.free, 'num');"
    " cell(tr, q.pending, 'num'); });\n"
    "  const curves = document.getElementById('curves');\n"
    "  const keep = new Set();\n"
    "  rows('jobs', st.jobs, (tr, j) => {\n"
    "    const p = j.params || {};\n"
    "    cell(tr, j.id, 'num');\n"
    "    cell(tr, j.state + (j.message ? ': ' + j.message : ''), j.state === 'failed' ? 'bad' :"
    " j.state === 'running' ? 'ok' : '');\n"
    "    cell(tr, (p.workloads || []).join(', ')); cell(tr, p.key); cell(tr, p.strategy);\n"
    "    const td = cell(tr, ' ' + j.measured + ' / ' + j.trials_total);\n"
    "    const bar = document.createElement('span'); bar.className = 'bar';\n"
    "    const fill = document.createElement('span');\n"
    "    fill.style.width = Math.min(100, 100 * j.measured / Math.max(1, j.trials_total)) + '%';\n"
    "    bar.appendChild(fill); td.prepend(bar);\n"
    "    cell(tr, time(j.best_s), 'num'); cell(tr, j.errors, 'num');\n"
    "    if (j.measured > 0 && keep.size < 6) {\n"
    "      const id = 'curve-' + j.id; keep.add(id);\n"
    "      let img = document.getElementById(id);\n"
    "      if (!img) { img = document.createElement('img'); img.id = id;"
    " img.alt = 'tuning curve of job ' + j.id; curves.appendChild(img); }\n"
    "      const src = '/api/jobs/' + j.id + '/curve.svg?n=' + j.measured;\n"
    "      if (img.getAttribute('src') !== src) img.setAttribute('src', src);\n"
    "    }\n"
    "  });\n"
    "  for (const img of Array.from(curves.children)) if (!keep.has(img.id)) img.remove();\n"
    "  rows('best', st.best, (tr, b) => { cell(tr, b.workload); cell(tr, b.target);"
    " cell(tr, time(b.best_s), 'num'); cell(tr, b.gflops ? b.gflops.toFixed(1) : '-', 'num');"
    " cell(tr, b.records, 'num'); });\n"
    "  document.body.dataset.loaded = 'yes';\n"
    "}\n"
    "async function refresh() {\n"
    "  try {\n"
    "    const r = await fetch('/api/state', {cache: 'no-store'});\n"
    "    render(await r.json());\n"
    "  } catch (e) {\n"
    "    document.getElementById('status').textContent = 'tracker unreachable: ' + e;\n"
    "  }\n"
    "  setTimeout(refresh, 2000);\n"
    "}\n"
    "refresh();\n";

static json_t *state_json(const tt_dashboard *d)
{
    double now = tt_clock_monotonic();
    json_t *st = tt_registry_status(d->reg, now);
    const tt_registry_counters *c = tt_registry_get_counters(d->reg);
    json_t *counters = json_pack(
        "{s:I, s:I, s:I, s:I, s:I}", "messages", (json_int_t)c->messages, "requests",
        (json_int_t)c->requests, "handouts", (json_int_t)c->handouts, "auth_failures",
        (json_int_t)c->auth_failures, "http_requests", (json_int_t)tt_http_requests(d->http));
    json_object_set_new(st, "tracker",
                        json_pack("{s:s, s:f, s:O, s:b, s:o}", "address", d->tracker, "uptime_s",
                                  now - d->started, "connections",
                                  json_object_get(st, "connections"), "authenticated",
                                  d->authenticated, "counters", counters));
    json_object_del(st, "connections");
    json_t *ov = d->jobs ? tt_jobs_overview(d->jobs, 50) : NULL;
    json_object_set_new(st, "jobs", ov ? json_incref(json_object_get(ov, "jobs")) : json_array());
    json_object_set_new(st, "best", ov ? json_incref(json_object_get(ov, "best")) : json_array());
    json_decref(ov);
    return st;
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label(tt_strbuf *sb, const char *v)
{
    for (; v && *v; v++) {
        if (*v == '\\' || *v == '"')
            tt_strbuf_printf(sb, "\\%c", *v);
        else if (*v == '\n')
            tt_strbuf_append(sb, "\\n");
        else
            tt_strbuf_appendn(sb, v, 1);
    }
}

static void metric_head(tt_strbuf *sb, const char *name, const char *type, const char *help)
{
    tt_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static char *metrics_text(const tt_dashboard *d)
{
    json_t *st = state_json(d);
    const json_t *tr = json_object_get(st, "tracker"), *cn = json_object_get(tr, "counters");
    tt_strbuf sb = {0};
    metric_head(&sb, "tvm_tracker_uptime_seconds", "gauge", "Seconds since the tracker started.");
    tt_strbuf_printf(&sb, "tvm_tracker_uptime_seconds %.3f\n",
                     json_real_value(json_object_get(tr, "uptime_s")));
    metric_head(&sb, "tvm_tracker_connections", "gauge", "Open tracker-protocol connections.");
    tt_strbuf_printf(&sb, "tvm_tracker_connections %lld\n",
                     (long long)json_integer_value(json_object_get(tr, "connections")));
    static const char *const counters[][2] = {
        {"messages", "Tracker-protocol messages handled."},
        {"requests", "REQUESTs for a device queued."},
        {"handouts", "Devices handed to a requester."},
        {"auth_failures", "Connections refused for want of the farm key."},
        {"http_requests", "Dashboard and metrics requests answered."},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "tvm_tracker_%s_total", counters[i][0]);
        metric_head(&sb, name, "counter", counters[i][1]);
        tt_strbuf_printf(&sb, "%s %lld\n", name,
                         (long long)json_integer_value(json_object_get(cn, counters[i][0])));
    }
    /* devices by key and health */
    const json_t *servers = json_object_get(st, "servers"), *queues = json_object_get(st, "queues");
    metric_head(&sb, "tvm_tracker_devices", "gauge",
                "Registered devices by key and health (ok, stale, quarantined).");
    const json_t *q;
    size_t i;
    json_array_foreach(queues, i, q)
    {
        const char *key = json_string_value(json_object_get(q, "key"));
        int n[3] = {0, 0, 0};
        const json_t *s;
        size_t k;
        json_array_foreach(servers, k, s)
        {
            if (strcmp(json_string_value(json_object_get(s, "key")), key))
                continue;
            n[json_is_true(json_object_get(s, "quarantined")) ? 2
              : json_is_true(json_object_get(s, "stale"))     ? 1
                                                              : 0]++;
        }
        static const char *const health[] = {"ok", "stale", "quarantined"};
        for (int h = 0; h < 3; h++) {
            tt_strbuf_append(&sb, "tvm_tracker_devices{key=\"");
            label(&sb, key);
            tt_strbuf_printf(&sb, "\",health=\"%s\"} %d\n", health[h], n[h]);
        }
    }
    static const char *const qm[][3] = {
        {"tvm_tracker_free_slots", "free", "Devices of a key free to hand out."},
        {"tvm_tracker_pending_requests", "pending", "REQUESTs waiting for a device of a key."},
    };
    for (int m = 0; m < 2; m++) {
        metric_head(&sb, qm[m][0], "gauge", qm[m][2]);
        json_array_foreach(queues, i, q)
        {
            tt_strbuf_printf(&sb, "%s{key=\"", qm[m][0]);
            label(&sb, json_string_value(json_object_get(q, "key")));
            tt_strbuf_printf(&sb, "\"} %lld\n",
                             (long long)json_integer_value(json_object_get(q, qm[m][1])));
        }
    }
    /* jobs */
    const json_t *jobs = json_object_get(st, "jobs"), *j;
    static const char *const states[] = {"queued", "running", "done", "failed", "cancelled"};
    metric_head(&sb, "tvm_tracker_jobs", "gauge", "Tuning jobs by state.");
    for (int s = 0; s < 5; s++) {
        int n = 0;
        json_array_foreach(jobs, i, j) n +=
            !strcmp(json_string_value(json_object_get(j, "state")), states[s]);
        tt_strbuf_printf(&sb, "tvm_tracker_jobs{state=\"%s\"} %d\n", states[s], n);
    }
    static const char *const jm[][3] = {
        {"tvm_tracker_job_measured", "measured", "Records measured for a job."},
        {"tvm_tracker_job_trials", "trials_total", "Trials a job asked for."},
        {"tvm_tracker_job_best_seconds", "best_s",
         "Best error-free time (fastest sample) of a job."},
    };
    for (int m = 0; m < 3; m++) {
        metric_head(&sb, jm[m][0], "gauge", jm[m][2]);
        json_array_foreach(jobs, i, j)
        {
            if (strcmp(json_string_value(json_object_get(j, "state")), "running") &&
                strcmp(json_string_value(json_object_get(j, "state")), "queued"))
                continue; /* finished jobs stay in the database, not in the metrics */
            tt_strbuf_printf(&sb, "%s{job=\"%lld\"} %.9g\n", jm[m][0],
                             (long long)json_integer_value(json_object_get(j, "id")),
                             json_number_value(json_object_get(j, jm[m][1])));
        }
    }
    metric_head(&sb, "tvm_tune_best_gflops", "gauge",
                "Best error-free GFLOPS of a workload on a target in the farm database.");
    const json_t *best = json_object_get(st, "best"), *b;
    json_array_foreach(best, i, b)
    {
        tt_strbuf_append(&sb, "tvm_tune_best_gflops{workload=\"");
        label(&sb, json_string_value(json_object_get(b, "workload")));
        tt_strbuf_append(&sb, "\",target=\"");
        label(&sb, json_string_value(json_object_get(b, "target")));
        tt_strbuf_printf(&sb, "\"} %.6g\n", json_real_value(json_object_get(b, "gflops")));
    }
    json_decref(st);
    if (sb.oom) {
        tt_strbuf_free(&sb);
        return NULL;
    }
    return tt_strbuf_take(&sb);
}

/* "/api/jobs/<id>/curve.svg" -> id, or 0. */
static long long curve_job(const char *path)
{
    const char *prefix = "/api/jobs/";
    if (strncmp(path, prefix, strlen(prefix)))
        return 0;
    char *end;
    long long id = strtoll(path + strlen(prefix), &end, 10);
    return id > 0 && !strcmp(end, "/curve.svg") ? id : 0;
}

void tt_dashboard_handle(void *ctx, const char *path, const char *query, tt_http_response *res)
{
    (void)query;
    const tt_dashboard *d = ctx;
    long long job;
    if (!strcmp(path, "/") || !strcmp(path, "/index.html")) {
        tt_http_text(res, 200, "text/html; charset=utf-8", page_html);
    } else if (!strcmp(path, "/dashboard.js")) {
        tt_http_text(res, 200, "text/javascript; charset=utf-8", page_js);
    } else if (!strcmp(path, "/dashboard.css")) {
        tt_http_text(res, 200, "text/css; charset=utf-8", page_css);
    } else if (!strcmp(path, "/api/state")) {
        json_t *st = state_json(d);
        char *text = st ? json_dumps(st, JSON_COMPACT) : NULL;
        json_decref(st);
        if (text)
            tt_http_take(res, 200, "application/json", text, strlen(text));
    } else if (!strcmp(path, "/metrics")) {
        char *text = metrics_text(d);
        if (text)
            tt_http_take(res, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
    } else if ((job = curve_job(path)) > 0) {
        char *svg = d->jobs ? tt_jobs_curve_svg(d->jobs, job) : NULL;
        if (svg)
            tt_http_take(res, 200, "image/svg+xml", svg, strlen(svg));
        else
            tt_http_text(res, 404, NULL, "404 Not Found: no records of that job (yet)\n");
    } else {
        tt_http_text(res, 404, NULL,
                     "404 Not Found: this tracker serves /, /api/state, /metrics and "
                     "/api/jobs/ID/curve.svg\n");
    }
}
