#define _GNU_SOURCE /* fopencookie */
#include "log.h"

#include <jansson.h>

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

void tt_logger_vlog(const tt_logger *lg, tt_log_level level, const char *context, const char *fmt,
                    va_list ap)
{
    if (!lg || !lg->out || level > lg->level)
        return;
    char msg[4096], ts[40];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);
    const char *prog = lg->program ? lg->program : "tvm-tune";
    if (lg->json) {
        json_t *o =
            json_pack("{s:s, s:s, s:s}", "ts", ts, "level", level_names[level], "program", prog);
        if (context && *context)
            json_object_set_new(o, "context", json_string(context));
        /* a message cut in the middle of a UTF-8 sequence is made valid by jansson's check */
        json_t *m = json_string(msg);
        json_object_set_new(o, "msg", m ? m : json_string("(a message that is not UTF-8)"));
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (text) {
            flockfile(lg->out);
            fputs(text, lg->out);
            fputc('\n', lg->out);
            funlockfile(lg->out);
            free(text);
        }
    } else {
        flockfile(lg->out);
        fprintf(lg->out, "%s %-5s %s: %s%s%s%s\n", ts, level_names[level], prog,
                context && *context ? "[" : "", context && *context ? context : "",
                context && *context ? "] " : "", msg);
        funlockfile(lg->out);
    }
    fflush(lg->out);
}

void tt_logger_log(const tt_logger *lg, tt_log_level level, const char *context, const char *fmt,
                   ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_logger_vlog(lg, level, context, fmt, ap);
    va_end(ap);
}

bool tt_logger_set_level(tt_logger *lg, const char *value)
{
    int l = tt_log_level_parse(value);
    if (l < 0 || l > TT_LOG_DEBUG) {
        fprintf(stderr, "%s: --log-level takes error, warn, info or debug, not '%s'\n",
                lg->program ? lg->program : "tvm-tune", value);
        return false;
    }
    lg->level = (tt_log_level)l;
    return true;
}

bool tt_logger_set_format(tt_logger *lg, const char *value)
{
    if (strcmp(value, "text") && strcmp(value, "json")) {
        fprintf(stderr, "%s: --log-format takes text or json, not '%s'\n",
                lg->program ? lg->program : "tvm-tune", value);
        return false;
    }
    lg->json = !strcmp(value, "json");
    return true;
}

typedef struct {
    const tt_logger *lg;
    tt_log_level level;
    char context[128];
    char line[4096];
    size_t len;
} log_stream;

static void stream_emit(log_stream *ls)
{
    while (ls->len && (ls->line[ls->len - 1] == '\r' || ls->line[ls->len - 1] == ' '))
        ls->len--;
    ls->line[ls->len] = 0;
    if (ls->len)
        tt_logger_log(ls->lg, ls->level, ls->context, "%s", ls->line);
    ls->len = 0;
}

static ssize_t stream_write(void *cookie, const char *buf, size_t n)
{
    log_stream *ls = cookie;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || ls->len == sizeof(ls->line) - 1)
            stream_emit(ls);
        if (buf[i] != '\n')
            ls->line[ls->len++] = buf[i];
    }
    return (ssize_t)n;
}

static int stream_close(void *cookie)
{
    stream_emit(cookie);
    free(cookie);
    return 0;
}

FILE *tt_logger_stream(const tt_logger *lg, tt_log_level level, const char *context)
{
    if (!lg || !lg->out)
        return NULL;
    log_stream *ls = calloc(1, sizeof(*ls));
    if (!ls)
        return NULL;
    ls->lg = lg;
    ls->level = level;
    snprintf(ls->context, sizeof(ls->context), "%s", context ? context : "");
    cookie_io_functions_t io = {NULL, stream_write, NULL, stream_close};
    FILE *f = fopencookie(ls, "w", io);
    if (!f)
        free(ls);
    else
        setvbuf(f, NULL, _IOLBF, 0);
    return f;
}
