/* Private to db/: the handle and helpers shared by its files. */
#ifndef TT_DB_DB_INT_H
#define TT_DB_DB_INT_H

#include <sqlite3.h>

#include "db.h"

/* Recently used key -> row id (direct-mapped by hash), so that a batch does not parse the same
 * workload key and look up the same target a thousand times.  A rolled-back batch clears it. */
#define TT__DB_CACHE 1024
typedef struct {
    char *key[TT__DB_CACHE];
    int64_t id[TT__DB_CACHE];
} tt__db_cache;

struct tt_db {
    sqlite3 *sql;
    char *path;
    bool readonly;
    char errmsg[512];
    tt__db_cache workloads, targets, devices;
};

int64_t tt__db_cache_get(const tt__db_cache *c, const char *key);
void tt__db_cache_put(tt__db_cache *c, const char *key, int64_t id);
void tt__db_cache_clear(tt__db_cache *c);

/* Records the error on the handle and returns `s`. */
tt_status tt__db_fail(tt_db *db, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Rolls back the open transaction (forgetting cached ids) and records "what: <last error>". */
tt_status tt__db_abort(tt_db *db, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Maps an SQLite result code to a status with a message naming `what`. */
tt_status tt__db_sqlite(tt_db *db, int rc, const char *what);
/* Prepares `sql`; on error records it. */
tt_status tt__db_prepare(tt_db *db, const char *sql, sqlite3_stmt **st);
/* Executes a statement without results. */
tt_status tt__db_exec(tt_db *db, const char *sql);
/* Median and mean of costs. */
void tt__db_costs_summary(const double *c, int n, double *median, double *mean);
/* Fills a row from a "SELECT <TT__DB_ROW_COLUMNS> ..." statement. */
tt_status tt__db_row_read(sqlite3_stmt *st, tt_db_row *row);
void tt__db_row_clear(tt_db_row *row);

#define TT__DB_ROW_COLUMNS                                                                         \
    "r.id, w.key, t.target, d.fingerprint, r.config, r.config_kind, r.costs, r.median_s, "         \
    "r.mean_s, w.flops, r.error_no, r.error_text, r.build_s, r.run_s, r.total_s, r.timestamp, "    \
    "r.job_id, r.extra"
#define TT__DB_ROW_FROM                                                                            \
    " FROM records r JOIN workloads w ON w.id = r.workload_id JOIN targets t ON t.id = "           \
    "r.target_id LEFT JOIN devices d ON d.id = r.device_id"

/* Records measured on a device later found sick carry "suspect" in their extra JSON
 * (tt_db_mark_suspect): queries for the best leave them out. */
#define TT__DB_SUSPECT(col)                                                                        \
    "(CASE WHEN json_valid(" col ") THEN json_extract(" col ", '$.suspect') END IS NOT NULL)"
#define TT__DB_TRUSTED " AND NOT " TT__DB_SUSPECT("r.extra")

#endif
