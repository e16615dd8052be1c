#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};
_Static_assert(sizeof(level_names) / sizeof(level_names[0]) == TT_LOG_LEVEL_COUNT, "log levels");

static int current_level = -1;

int tt_log_level_parse(const char *name)
{
    for (int i = 0; i < TT_LOG_LEVEL_COUNT; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

tt_log_level tt_log_get_level(void)
{
    if (current_level < 0) {
        const char *env = getenv("TT_LOG");
        int l = env ? tt_log_level_parse(env) : -1;
        current_level = l >= 0 ? l : TT_LOG_WARN;
    }
    return (tt_log_level)current_level;
}

void tt_log_set_level(tt_log_level level)
{
    current_level = (int)level;
}

void tt_log(tt_log_level level, const char *fmt, ...)
{
    if (level > tt_log_get_level())
        return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    line[len++] = '\n';
    /* One write keeps lines from different threads whole. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
