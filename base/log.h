/* Levelled logging to stderr.  The level comes from tt_log_set_level() or, at first use, from the
 * environment variable TT_LOG (error|warn|info|debug|trace).  Thread-safe: each message is one
 * write. */
#ifndef TT_BASE_LOG_H
#define TT_BASE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum {
    TT_LOG_ERROR,
    TT_LOG_WARN,
    TT_LOG_INFO,
    TT_LOG_DEBUG,
    TT_LOG_TRACE,
    TT_LOG_LEVEL_COUNT
} tt_log_level;

void tt_log_set_level(tt_log_level level);
tt_log_level tt_log_get_level(void);
/* Parses "warn", "info", ...; returns -1 for an unknown name. */
int tt_log_level_parse(const char *name);
void tt_log(tt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The daemons' log (tvm-tracker, tvm-rpc-server): one line per event, with a UTC timestamp, a
 * level and the program, optionally a context (a peer, "job 3"); as text,
 *     2026-11-22T21:42:40.123Z warn  tvm-tracker: [10.0.0.7] closing: frame of ... bytes
 * or as JSON lines for log collectors,
 *     {"ts":"2026-11-22T21:42:40.123Z","level":"warn","program":"tvm-tracker",
 *      "context":"10.0.0.7","msg":"closing: frame of ... bytes"}
 * Lines above `level` are dropped.  Thread-safe: each line is one locked write. */
typedef struct tt_logger {
    FILE *out; /* NULL: silent */
    tt_log_level level;
    bool json;
    const char *program;
} tt_logger;

void tt_logger_log(const tt_logger *lg, tt_log_level level, const char *context, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
void tt_logger_vlog(const tt_logger *lg, tt_log_level level, const char *context, const char *fmt,
                    va_list ap) __attribute__((format(printf, 4, 0)));
/* The daemons' --log-level (error|warn|info|debug) and --log-format (text|json) options: false,
 * with the complaint on stderr, for a value they do not take. */
bool tt_logger_set_level(tt_logger *lg, const char *value);
bool tt_logger_set_format(tt_logger *lg, const char *value);
/* A stream whose every line becomes one log line at `level` with `context` (for code that
 * writes to a FILE, e.g. the tuner inside a tracker job); NULL when the logger is silent or out
 * of memory.  fclose it (after the last line; a last partial line is logged then). */
FILE *tt_logger_stream(const tt_logger *lg, tt_log_level level, const char *context);

#define TT_ERROR(...) tt_log(TT_LOG_ERROR, __VA_ARGS__)
#define TT_WARN(...)  tt_log(TT_LOG_WARN, __VA_ARGS__)
#define TT_INFO(...)  tt_log(TT_LOG_INFO, __VA_ARGS__)
#define TT_DEBUG(...)                                                                              \
    do {                                                                                           \
        if (tt_log_get_level() >= TT_LOG_DEBUG)                                                    \
            tt_log(TT_LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)

#endif
