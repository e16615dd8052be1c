/* The tracker's tuning jobs (docs/tracker.md, "Jobs"): submitted with extension messages, kept in
 * the farm database, run by worker threads that search here and measure on the farm's devices
 * through this very tracker (REQUEST like any client, so queues, priorities and dead devices work
 * the same for jobs and for people), and resumed when the daemon starts again.
 *
 * The extension messages (codes >= 100, never sent to a TVM tracker) are answered by
 * tt_jobs_handle; every reply is [0, result] or [-1, "what was wrong"].  Thread-safe: the event
 * loop calls in while workers run. */
#ifndef TT_TRACKER_JOBS_H
#define TT_TRACKER_JOBS_H

#include <stdio.h>

#include "../base/base.h"
#include "../base/log.h"
#include "../rpc/auth.h"
#include "../rpc/tracker_proto.h"

typedef struct tt_jobs tt_jobs;

typedef struct tt_jobs_config {
    const char *db_path;      /* the farm database */
    const char *name;         /* whose jobs these are in a shared database (never NULL) */
    const char *tracker_host; /* this daemon, through which measurements go */
    int tracker_port;
    const tt_auth_keyring *auth; /* the farm's key (NULL: none); must outlive the jobs */
    int workers;                 /* jobs run at once (1 to 16) */
    const tt_logger *log;        /* NULL: quiet */
    int max_per_peer;            /* jobs queued or running per submitting address (0: none) */
    int64_t db_max_bytes;        /* cap of the database file (0: none): a job that reaches it
                                    fails with the reason, everything stored before kept */
} tt_jobs_config;

/* Opens the farm database and starts the workers; jobs left queued or running by an earlier
 * daemon start again. */
tt_status tt_jobs_open(const tt_jobs_config *cfg, tt_jobs **out, tt_errbuf *err);
/* Stops the running jobs (they stay "running" in the database and resume at the next start)
 * and joins the workers. */
void tt_jobs_close(tt_jobs *j);
/* The dashboard's view: {"jobs": [{job}, ... newest first], "best": [{workload, target,
 * best_s (the fastest sample), gflops, records}, ... at most best_limit]}.  Caller decrefs. */
json_t *tt_jobs_overview(tt_jobs *j, int best_limit);
/* Job `id`'s tuning curve (best GFLOPS against trials, a line per workload) as SVG; NULL when the
 * job has no records yet.  Caller frees. */
char *tt_jobs_curve_svg(tt_jobs *j, int64_t id);
/* The reply text to one extension message (malloc'ed). */
char *tt_jobs_handle(tt_jobs *j, const char *peer, const json_t *msg);

/* Parses and checks job parameters (workloads, target, key, strategy, ...): what a submission
 * would store, with defaults filled in.  TT_ERR_INVALID_ARG says which field was wrong. */
tt_status tt_jobs_check_params(const json_t *params, json_t **normalised, tt_errbuf *err);

#endif
