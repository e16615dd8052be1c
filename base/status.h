/* Status codes shared by every module.
 *
 * One X-macro is the single source of the enum, its names and its messages, so the three can never
 * disagree.  Dependency errors (SQLite rc, errno, LLVM, XGBoost, OpenCL) are mapped to these codes
 * at the module edge; the detailed text stays on the handle or in a tt_errbuf. */
#ifndef TT_BASE_STATUS_H
#define TT_BASE_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#define TT_STATUS_LIST(X)                                                                          \
    X(OK, "success")                                                                               \
    X(ERR_NOMEM, "out of memory")                                                                  \
    X(ERR_INVALID_ARG, "invalid argument")                                                         \
    X(ERR_PARSE, "malformed input")                                                                \
    X(ERR_UNKNOWN_OP, "unknown operator")                                                          \
    X(ERR_BAD_WORKLOAD, "invalid workload parameters")                                             \
    X(ERR_ILLEGAL_STEP, "illegal schedule step")                                                   \
    X(ERR_LOWER, "cannot lower schedule")                                                          \
    X(ERR_RUNTIME, "runtime error")                                                                \
    X(ERR_IO, "input/output error")                                                                \
    X(ERR_NOT_FOUND, "not found")                                                                  \
    X(ERR_LIMIT, "limit exceeded")                                                                 \
    X(ERR_UNSUPPORTED, "unsupported")                                                              \
    X(ERR_INTERNAL, "internal error")                                                              \
    X(ERR_AUTH, "authentication failed")

typedef enum {
#define TT_STATUS_ENUM(name, msg) TT_##name,
    TT_STATUS_LIST(TT_STATUS_ENUM)
#undef TT_STATUS_ENUM
        TT_STATUS_COUNT
} tt_status;

/* Short human message for a status ("illegal schedule step"). Never NULL. Thread-safe. */
const char *tt_strerror(tt_status s);
/* Symbolic name ("TT_ERR_ILLEGAL_STEP"). Never NULL. Thread-safe. */
const char *tt_status_name(tt_status s);

/* A caller-owned buffer for the detailed text of an error: what was wrong and where. Functions
 * that take a `tt_errbuf *err` accept NULL when the caller does not want the text. */
typedef struct tt_errbuf {
    char msg[512];
} tt_errbuf;

/* Formats the message into `err` (if not NULL) and returns `s`, so callers can write
 * `return tt_err(err, TT_ERR_PARSE, "at column %d: ...", col);`. */
tt_status tt_err(tt_errbuf *err, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
tt_status tt_verr(tt_errbuf *err, tt_status s, const char *fmt, va_list ap);

/* Prepends "prefix: " to the message already in `err` (no-op if err is NULL). Returns s. */
tt_status tt_err_prefix(tt_errbuf *err, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
