/* db/: the tuning-log database, on one of two backends chosen by the --db value: a SQLite file
 * (a path, or sqlite:PATH) in WAL mode, one writer (the daemon or a tuning run) and any number of
 * readers (builds) at once; or a PostgreSQL server (a postgresql:// URI) that several trackers,
 * tuning runs and builds share.  Either way a reader never sees half a batch, committed records
 * survive a kill -9 of the writer, and a record is stored once however often it is inserted.
 * The schema is versioned and migrated on open; see docs/database.md.
 *
 * A tt_db handle belongs to one thread at a time, and to the process that opened it: in a forked
 * child every operation fails with TT_ERR_INVALID_ARG and tt_db_close releases the child's copy
 * without a byte to the server or a change to the file (the connection is the parent's).  Every
 * function returns a tt_status; the detailed text of the last error is kept on the handle
 * (tt_db_errmsg). */
#ifndef TT_DB_DB_H
#define TT_DB_DB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/base.h"

#define TT_DB_SCHEMA_VERSION 5

typedef struct tt_db tt_db;

enum {
    TT_DB_READONLY = 1, /* open an existing database for queries only */
    /* A server that does not answer yet is waited for, as a lost one is (tt_db_set_patience):
     * for a tracker's job, whose tracker reached the server, which may be restarting. */
    TT_DB_WAIT_FOR_SERVER = 2,
};

/* Opens (creating when absent, unless READONLY) and migrates the database `path` names: a file,
 * sqlite:FILE, or postgresql://[user@]host[:port]/dbname[?...] (the password from ~/.pgpass,
 * PGPASSFILE or PGPASSWORD; a URI with one is refused).  Any number of processes may open an
 * empty or older database at once, read-only ones too: the schema is migrated once, under a lock,
 * and the others wait for it (a read-only handle migrates when it is first, as far as the file's
 * or the role's rights allow).  A server that answered and then lost the session during the open
 * is waited for as tt_db_set_patience says.  Fails with a clear message for a file that is not a
 * database, is corrupt, belongs to another application, a server that cannot be reached, or a
 * schema written by a newer version of tvm-tune.  On failure *out is NULL and err says why. */
tt_status tt_db_open(const char *path, int flags, tt_db **out, tt_errbuf *err);
void tt_db_close(tt_db *db);
/* Deletes a (closed) database file with its WAL and shared-memory files.  Missing files are not
 * an error. */
void tt_db_remove(const char *path);
/* How long an operation waits for a PostgreSQL server it lost (reconnecting with backoff) before
 * failing; default 300 s, or $TVM_TUNE_DB_PATIENCE (seconds).  The batch that was being written
 * is kept meanwhile and written once, when the server is back. */
void tt_db_set_patience(tt_db *db, double seconds);
/* "sqlite" or "postgresql": what the --db value chose. */
const char *tt_db_backend(const tt_db *db);
/* Text of the last error on this handle ("" if none).  Owned by the handle. */
const char *tt_db_errmsg(const tt_db *db);
/* Schema version stored in the file. */
int tt_db_user_version(tt_db *db);

/* ---- records ---- */

typedef enum {
    TT_CONFIG_STEPS,   /* an Ansor step array (our configs, auto_scheduler records) */
    TT_CONFIG_AUTOTVM, /* an AutoTVM config object {"index": .., "code_hash": .., "entity": [..]} */
} tt_config_kind;

/* TVM's measurement error codes (measurement.md §5). */
#define TT_MEASURE_ERROR_LIST(X)                                                                   \
    X(NO_ERROR)                                                                                    \
    X(INSTANTIATION_ERROR)                                                                         \
    X(COMPILE_HOST)                                                                                \
    X(COMPILE_DEVICE)                                                                              \
    X(RUNTIME_DEVICE)                                                                              \
    X(WRONG_ANSWER)                                                                                \
    X(BUILD_TIMEOUT)                                                                               \
    X(RUN_TIMEOUT)                                                                                 \
    X(UNKNOWN_ERROR)

typedef enum {
#define TT_ME_ENUM(n) TT_MEASURE_##n,
    TT_MEASURE_ERROR_LIST(TT_ME_ENUM)
#undef TT_ME_ENUM
        TT_MEASURE_ERROR_COUNT
} tt_measure_error;

const char *tt_measure_error_name(int code);

/* One measurement, as inserted.  Strings are borrowed for the call. */
typedef struct tt_db_record {
    const char
        *workload;      /* canonical workload key, or a foreign key ("autotvm:...", "ansor:...") */
    const char *target; /* target string */
    const char *device; /* device fingerprint; NULL = unknown (imported records) */
    const char *config; /* step array or AutoTVM config, as text */
    tt_config_kind config_kind;
    const double *costs; /* seconds per call, one per repeat */
    int ncosts;
    int error_no;           /* 0..8 */
    const char *error_text; /* NULL when none */
    double build_s, run_s;  /* seconds spent building / running this candidate (0 = unknown) */
    double total_s;         /* all cost (TVM's ALL_COST) */
    int64_t job;            /* job id, 0 = none */
    double timestamp;       /* Unix time at the end of the measurement */
    const char *extra;      /* JSON object with fields kept for export, or NULL */
} tt_db_record;

/* Inserts `n` records in one transaction: all or nothing.  A record identical to a stored one
 * (same workload, target, device, config, costs, error and timestamp) is skipped, which makes
 * imports idempotent; *inserted (optional) gets the number actually added.  Returns TT_ERR_IO
 * on a full disk or another storage failure (nothing of the batch is stored, nothing already
 * stored is lost), TT_ERR_BAD_WORKLOAD for a workload key that does not parse. */
tt_status tt_db_insert(tt_db *db, const tt_db_record *recs, size_t n, size_t *inserted);

/* How a best record was found. */
typedef enum {
    TT_DB_MATCH_EXACT,        /* this workload, target and device (or any device when none asked) */
    TT_DB_MATCH_OTHER_DEVICE, /* this target string measured on another device */
    TT_DB_MATCH_FAMILY, /* another target of the same family (llvm:aarch64, opencl:mali, ...) */
} tt_db_match;

const char *tt_db_match_name(tt_db_match m);

/* A stored record as queries return it.  Strings are owned by the row (tt_db_rows_free). */
typedef struct tt_db_row {
    int64_t id;
    char *workload, *target, *device, *config, *error_text, *extra;
    tt_config_kind config_kind;
    double *costs;
    int ncosts;
    double median_s, mean_s;
    double fastest_s; /* the fastest sample: the record's time, what queries rank by */
    double flops;     /* of the workload, 0 if unknown */
    double gflops;    /* flops / fastest / 1e9, 0 if unknown or errored */
    int error_no;
    double build_s, run_s, total_s, timestamp;
    int64_t job;
    tt_db_match match;
} tt_db_row;

void tt_db_rows_free(tt_db_row *rows, size_t n);

/* A record's time is its fastest sample (decision 56): a busy device only ever adds time, so of
 * a measurement's samples the fastest is the one its delays touched least, and of single-call
 * samples the most repeatable.  The median and mean are kept for display and export.
 *
 * The best `k` error-free records (fastest; the earlier record wins a tie) for a workload
 * on a target, and on a device when `device` is not NULL.  With `fallback`, when there is none:
 * the same target on other devices, then other targets of the same family; each row says which
 * (row.match).  *rows is malloc'ed (NULL when nothing matched, *n = 0). */
tt_status tt_db_best(tt_db *db, const char *workload, const char *target, const char *device, int k,
                     bool fallback, tt_db_row **rows, size_t *n);

/* Query for history: every field optional (NULL / 0 = any).  Rows in insertion order. */
typedef struct tt_db_filter {
    const char *workload, *target, *device;
    int64_t job;
    int64_t limit; /* 0 = all */
} tt_db_filter;

/* Calls fn for every matching record (history for resuming a job, export).  fn returns 0 to
 * continue, non-zero to stop.  The row is valid during the call only. */
tt_status tt_db_history(tt_db *db, const tt_db_filter *f,
                        int (*fn)(void *ctx, const tt_db_row *row), void *ctx);

typedef struct tt_db_stats {
    int64_t records;
    int64_t errors[TT_MEASURE_ERROR_COUNT]; /* count per error code */
    int64_t workloads, targets;
    double best_s; /* fastest sample of any error-free record, 0 if none (suspect ones left out) */
    double first_timestamp, last_timestamp;
    int64_t suspect; /* records of devices later found sick (tt_db_mark_suspect) */
} tt_db_stats;

/* Statistics of one job (job > 0) or of the whole database (job = 0). */
tt_status tt_db_stats_get(tt_db *db, int64_t job, tt_db_stats *out);

/* Marks the records measured on the device at `host` ("ip:port", their extra JSON's "host") since
 * `since` (wall-clock seconds) as suspect, with the reason: the device was later found sick
 * (its canary failed), so its earlier times are not to be trusted.  Best-record queries
 * (tt_db_best, tt_db_leaderboard) leave suspect records out; stats count them.  *marked gets
 * the number of records marked. */
tt_status tt_db_mark_suspect(tt_db *db, const char *host, double since, const char *why,
                             int64_t *marked);

/* The best error-free record of every workload on every target: what the farm has achieved
 * (the tracker's dashboard and /metrics).  Best GFLOPS first; at most `limit` (0 = all). */
typedef struct tt_db_best_entry {
    char *workload, *target;
    double best_s, gflops; /* the fastest sample; gflops 0 when the workload's flops are unknown */
    int64_t records;       /* error-free records of this workload and target */
} tt_db_best_entry;
tt_status tt_db_leaderboard(tt_db *db, int64_t limit, tt_db_best_entry **out, size_t *n);
void tt_db_leaderboard_free(tt_db_best_entry *e, size_t n);

/* ---- devices ---- */

typedef struct tt_db_device {
    const char *key;         /* tracker key, e.g. "rpi4" */
    const char *fingerprint; /* identity: CPU model + features + cores + memory + OpenCL device */
    const char *cpu_model, *cpu_features, *opencl_device, *opencl_driver;
    int cores;
    int64_t memory_bytes;
} tt_db_device;

/* Inserts or refreshes a device (by fingerprint). */
tt_status tt_db_device_upsert(tt_db *db, const tt_db_device *d);

/* ---- jobs ---- */

typedef struct tt_db_job {
    int64_t id;
    char *state;  /* "queued", "running", "done", "failed", "cancelled" */
    char *params; /* JSON */
    int64_t trials_done, trials_total;
    double best_s; /* 0 = none yet */
    double created, updated;
    char *message; /* why it failed or stopped; "" when nothing to say */
    char *owner;   /* the tracker that runs it (its --name); "" for jobs of older versions */
} tt_db_job;

/* A new queued job of tracker `owner` (NULL: none).  Ids are the database's: trackers sharing a
 * PostgreSQL database never get the same one. */
tt_status tt_db_job_create(tt_db *db, const char *owner, const char *params_json,
                           int64_t trials_total, int64_t *id);
tt_status tt_db_job_update(tt_db *db, int64_t id, const char *state, int64_t trials_done,
                           double best_s);
/* Makes `owner` the job's tracker if it has none yet (a job of an older version); *claimed says
 * whether it now is (false when another tracker claimed it first). */
tt_status tt_db_job_claim(tt_db *db, int64_t id, const char *owner, bool *claimed);
/* Sets the job's message (why it failed, what it is waiting for). */
tt_status tt_db_job_set_message(tt_db *db, int64_t id, const char *message);
tt_status tt_db_jobs_list(tt_db *db, tt_db_job **jobs, size_t *n);
void tt_db_jobs_free(tt_db_job *jobs, size_t n);

/* ---- cost models ---- */

/* Saves a model blob under `name` (a new version each time) with its feature-schema version. */
tt_status tt_db_model_save(tt_db *db, const char *name, int feature_schema, const void *blob,
                           size_t len, const char *meta_json);
/* Loads the newest model named `name` with this feature-schema version; TT_ERR_NOT_FOUND if
 * none.  *blob is malloc'ed; *meta_json (when meta_json is not NULL) gets the saved meta text,
 * malloc'ed, or NULL when none was saved. */
tt_status tt_db_model_load(tt_db *db, const char *name, int feature_schema, void **blob,
                           size_t *len, char **meta_json);

/* ---- maintenance ---- */

/* Caps the database file at about `max_bytes` (0 = no cap): an insert that would grow it beyond
 * fails like a full disk, with nothing of its batch stored.  For operators who share a disk. */
tt_status tt_db_limit_size(tt_db *db, int64_t max_bytes);

/* Runs SQLite's integrity check; TT_ERR_IO with its first complaint when the file is damaged. */
tt_status tt_db_check(tt_db *db);
/* Rebuilds the file compactly (VACUUM) after checking it. */
tt_status tt_db_vacuum(tt_db *db);

/* ---- copying (copy.c) ---- */

typedef struct tt_db_copy_report {
    int64_t records;                    /* records read from the source */
    int64_t inserted;                   /* stored in the target */
    int64_t present;                    /* already there (the same measurement) */
    int64_t devices, jobs, cost_models; /* new in the target */
    uint64_t digest;                    /* sum of the source records' content digests */
    bool verified; /* the target holds them: same content (target was empty), or counts */
} tt_db_copy_report;

/* Copies every device, job, record and cost model of `from` into `to` (any two databases,
 * SQLite or PostgreSQL), then checks the target: into an empty one, every record's content
 * (workload, target, device, config, times, error, timestamp, extra) equal to the source's;
 * otherwise the record counts.  Idempotent: copying again adds nothing.  Job ids are the
 * target's own (records follow their job); an error says which side failed. */
tt_status tt_db_copy(tt_db *from, tt_db *to, tt_db_copy_report *rep, tt_errbuf *err);

/* ---- TVM log formats (tvmlog.c) ---- */

typedef struct tt_db_import_report {
    size_t lines;          /* lines read */
    size_t records;        /* records parsed */
    size_t inserted;       /* new records stored */
    size_t duplicates;     /* already stored */
    size_t comments;       /* comment and blank lines */
    size_t malformed;      /* lines rejected */
    size_t mapped;         /* records whose workload maps onto our operators */
    char first_error[700]; /* "file:line: reason" of the first malformed line */
} tt_db_import_report;

/* Imports a file of AutoTVM v0.2 and/or auto_scheduler (v0.1-v0.6) JSON lines.  Malformed lines
 * are counted and reported (line numbers), the rest imported.  Idempotent. */
tt_status tt_db_import_file(tt_db *db, const char *path, tt_db_import_report *rep, tt_errbuf *err);
tt_status tt_db_import_stream(tt_db *db, FILE *in, const char *name, tt_db_import_report *rep,
                              tt_errbuf *err);

typedef enum {
    TT_LOG_AUTO,    /* each record in the format it came in (ours as auto_scheduler v0.6) */
    TT_LOG_AUTOTVM, /* only AutoTVM records */
    TT_LOG_ANSOR,   /* only step-list records */
} tt_log_format;

/* Writes matching records as JSON lines, byte-compatible with TVM's writers; *n gets the count. */
tt_status tt_db_export(tt_db *db, const tt_db_filter *f, tt_log_format fmt, FILE *out, size_t *n,
                       tt_errbuf *err);

/* Converts one log line into a record (and back), without a database: used by import/export and
 * by tests.  The record's strings live in `arena`. */
tt_status tt_log_parse_line(const char *line, tt_arena *arena, tt_db_record *rec, tt_errbuf *err);
/* Writes `row` as a log line (no newline) into sb.  TT_ERR_UNSUPPORTED when the row cannot be
 * written in the requested format. */
tt_status tt_log_format_row(const tt_db_row *row, tt_log_format fmt, tt_strbuf *sb);

#endif
