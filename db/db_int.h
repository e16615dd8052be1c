/* Private to db/: the handle and helpers shared by its files. */
#ifndef TT_DB_DB_INT_H
#define TT_DB_DB_INT_H

#include <sys/types.h>

#include "db.h"
#include "sql.h"

/* Recently used key -> row id (direct-mapped by hash), so that a batch does not parse the same
 * workload key and look up the same target a thousand times.  A rolled-back batch clears it. */
#define TT__DB_CACHE 1024
typedef struct {
    char *key[TT__DB_CACHE];
    int64_t id[TT__DB_CACHE];
} tt__db_cache;

struct tt_db {
    const tt__sql_backend *be;
    void *conn;        /* the backend's connection */
    char *path;        /* what --db said */
    const char *where; /* the file or URI inside path, for messages (a URI with a password is
                          refused, so it never holds one) */
    bool readonly;
    char errmsg[512];
    /* the backend's last failure, for tt__db_failed */
    tt_status cause;
    char cause_msg[400];
    /* the server aborted the transaction for another writer's (deadlock, serialization): run
     * it again */
    bool conflict;
    double patience_s; /* how long to wait for a lost server (tt_db_set_patience) */
    /* the server answered once (PostgreSQL): a connection lost from then on is waited for, while
     * a server that never answered is an error at once */
    bool reached;
    /* the process that opened the handle: a forked child never uses its connection */
    pid_t owner;
    tt__db_cache workloads, targets, devices;
};

/* TT_OK in the process that opened the handle; in a forked child, TT_ERR_INVALID_ARG with the
 * handle's error saying so (every statement and transaction checks it first). */
tt_status tt__db_owned(tt_db *db);

int64_t tt__db_cache_get(const tt__db_cache *c, const char *key);
void tt__db_cache_put(tt__db_cache *c, const char *key, int64_t id);
void tt__db_cache_clear(tt__db_cache *c);

/* Records the error on the handle and returns `s`. */
tt_status tt__db_fail(tt_db *db, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Rolls back the open transaction (forgetting cached ids) and records "what: <last error>". */
tt_status tt__db_abort(tt_db *db, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* After a failed operation: true when it is worth running again, i.e. the server aborted it for
 * a conflicting writer, or the connection was lost and is back (reconnecting with backoff, up
 * to the handle's patience since `started`).  The handle's error still says why it failed. */
bool tt__db_retry(tt_db *db, int attempt, double started);
/* Median, mean and fastest of costs. */
void tt__db_costs_summary(const double *c, int n, double *median, double *mean, double *fastest);
/* Fills a row from a "SELECT <TT__DB_ROW_COLUMNS> ..." statement. */
tt_status tt__db_row_read(tt__stmt *st, tt_db_row *row);
void tt__db_row_clear(tt_db_row *row);

#define TT__DB_ROW_COLUMNS                                                                         \
    "r.id, w.key, t.target, d.fingerprint, r.config, r.config_kind, r.costs, r.median_s, "         \
    "r.mean_s, w.flops, r.error_no, r.error_text, r.build_s, r.run_s, r.total_s, r.timestamp, "    \
    "r.job_id, r.extra, r.fastest_s"
#define TT__DB_ROW_FROM                                                                            \
    " FROM records r JOIN workloads w ON w.id = r.workload_id JOIN targets t ON t.id = "           \
    "r.target_id LEFT JOIN devices d ON d.id = r.device_id"

/* Records measured on a device later found sick carry why in `suspect` (tt_db_mark_suspect):
 * queries for the best leave them out. */
#define TT__DB_TRUSTED " AND r.suspect IS NULL"
/* A record that measured no time (every sample 0, fastest_s 0) is never a best. */
#define TT__DB_TIMED " AND r.fastest_s > 0"
/* The `bests` rows (schema 5) computed from the records they summarise, the trusted error-free
 * ones with a time: TT__DB_BESTS_SELECT [" AND condition on r"] TT__DB_BESTS_GROUP, stored by
 * TT__DB_BESTS_FILL ... in its place. */
#define TT__DB_BESTS_SELECT                                                                        \
    "SELECT r.workload_id, r.target_id, min(r.fastest_s), count(*) FROM records r "                \
    "WHERE r.error_no = 0" TT__DB_TRUSTED TT__DB_TIMED
#define TT__DB_BESTS_FILL                                                                          \
    "INSERT INTO bests(workload_id, target_id, fastest_s, records) " TT__DB_BESTS_SELECT
#define TT__DB_BESTS_GROUP " GROUP BY r.workload_id, r.target_id"

#endif
