/* Levelled logging to stderr.  The level comes from tt_log_set_level() or, at first use, from the
 * environment variable TT_LOG (error|warn|info|debug|trace).  Thread-safe: each message is one
 * write. */
#ifndef TT_BASE_LOG_H
#define TT_BASE_LOG_H

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

#define TT_ERROR(...) tt_log(TT_LOG_ERROR, __VA_ARGS__)
#define TT_WARN(...)  tt_log(TT_LOG_WARN, __VA_ARGS__)
#define TT_INFO(...)  tt_log(TT_LOG_INFO, __VA_ARGS__)
#define TT_DEBUG(...)                                                                              \
    do {                                                                                           \
        if (tt_log_get_level() >= TT_LOG_DEBUG)                                                    \
            tt_log(TT_LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)

#endif
