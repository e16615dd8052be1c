#include "status.h"

#include <stdio.h>
#include <string.h>

static const char *const messages[] = {
#define TT_STATUS_MSG(name, msg) msg,
    TT_STATUS_LIST(TT_STATUS_MSG)
#undef TT_STATUS_MSG
};

static const char *const names[] = {
#define TT_STATUS_NAME(name, msg) "TT_" #name,
    TT_STATUS_LIST(TT_STATUS_NAME)
#undef TT_STATUS_NAME
};

_Static_assert(sizeof(messages) / sizeof(messages[0]) == TT_STATUS_COUNT, "status messages");
_Static_assert(sizeof(names) / sizeof(names[0]) == TT_STATUS_COUNT, "status names");

const char *tt_strerror(tt_status s)
{
    if ((unsigned)s >= TT_STATUS_COUNT)
        return "unknown status";
    return messages[s];
}

const char *tt_status_name(tt_status s)
{
    if ((unsigned)s >= TT_STATUS_COUNT)
        return "TT_UNKNOWN_STATUS";
    return names[s];
}

tt_status tt_verr(tt_errbuf *err, tt_status s, const char *fmt, va_list ap)
{
    if (err)
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    return s;
}

tt_status tt_err(tt_errbuf *err, tt_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_verr(err, s, fmt, ap);
    va_end(ap);
    return s;
}

tt_status tt_err_prefix(tt_errbuf *err, tt_status s, const char *fmt, ...)
{
    if (!err)
        return s;
    char prefix[256], old[sizeof(err->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    /* Truncation is fine: the message is for people. */
    size_t n = strlen(prefix);
    if (n > sizeof(err->msg) - 3)
        n = sizeof(err->msg) - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof(err->msg) - n - 3;
    size_t m = strnlen(old, room);
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = 0;
    return s;
}
