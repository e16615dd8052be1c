/* What an operator sees of a running tracker over HTTP (docs/operations.md): a dashboard page
 * (devices with their health and current work, queues, jobs with progress and tuning curves,
 * the best result per workload), its JSON (/api/state), each job's curve as SVG
 * (/api/jobs/ID/curve.svg) and Prometheus metrics (/metrics).  Read-only; served by http.c on
 * the tracker's loop. */
#ifndef TT_TRACKER_DASHBOARD_H
#define TT_TRACKER_DASHBOARD_H

#include "http.h"
#include "jobs.h"
#include "registry.h"

typedef struct tt_dashboard {
    const tt_registry *reg;
    tt_jobs *jobs;       /* NULL: the tracker runs no jobs (--no-jobs) */
    const tt_http *http; /* for its request count */
    double started;      /* tt_clock_monotonic() at start */
    char tracker[96];    /* "host:port" of the tracker protocol */
    bool authenticated;  /* the tracker has a farm key */
} tt_dashboard;

/* The tt_http_handler of the dashboard; ctx is a tt_dashboard. */
void tt_dashboard_handle(void *ctx, const char *path, const char *query, tt_http_response *res);

#endif
