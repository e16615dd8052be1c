/* base/: status tables, arena, vectors, strings, hashing, RNG, JSON helpers. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/base.h"

static void every_status_has_a_name_and_a_message(void **state)
{
    for (int s = 0; s < TT_STATUS_COUNT; s++) {
        assert_non_null(tt_strerror((tt_status)s));
        assert_true(strncmp(tt_status_name((tt_status)s), "TT_", 3) == 0);
    }
    assert_string_equal(tt_status_name(TT_ERR_ILLEGAL_STEP), "TT_ERR_ILLEGAL_STEP");
    assert_string_equal(tt_strerror(TT_OK), "success");
    assert_string_equal(tt_status_name((tt_status)999), "TT_UNKNOWN_STATUS");
}

static void errbuf_formats_and_prefixes(void **state)
{
    tt_errbuf e;
    assert_int_equal(tt_err(&e, TT_ERR_PARSE, "column %d", 7), TT_ERR_PARSE);
    assert_string_equal(e.msg, "column 7");
    assert_int_equal(tt_err_prefix(&e, TT_ERR_PARSE, "steps"), TT_ERR_PARSE);
    assert_string_equal(e.msg, "steps: column 7");
    assert_int_equal(tt_err(NULL, TT_ERR_IO, "ignored"), TT_ERR_IO);
    char long_prefix[600];
    memset(long_prefix, 'x', sizeof(long_prefix) - 1);
    long_prefix[sizeof(long_prefix) - 1] = 0;
    tt_err_prefix(&e, TT_ERR_PARSE, "%s", long_prefix);
    assert_true(strlen(e.msg) < sizeof(e.msg));
}

static void arena_allocations_are_aligned_and_zeroed(void **state)
{
    tt_arena a;
    tt_arena_init(&a, 64);
    for (int i = 1; i < 200; i++) {
        unsigned char *p = tt_arena_alloc(&a, (size_t)i);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        for (int k = 0; k < i; k++)
            assert_int_equal(p[k], 0);
        memset(p, 0xff, (size_t)i);
    }
    assert_string_equal(tt_arena_printf(&a, "%s-%d", "x", 42), "x-42");
    assert_string_equal(tt_arena_strndup(&a, "hello", 3), "hel");
    tt_arena_free(&a);
    assert_null(a.head);
}

static void vectors_grow_and_keep_their_elements(void **state)
{
    TT_VEC(int) v = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(TT_VEC_PUSH(&v, i * 3), 0);
    assert_int_equal(v.len, 1000);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(v.data[i], i * 3);
    assert_int_equal(TT_VEC_POP(&v), 999 * 3);
    TT_VEC_FREE(&v);
    assert_null(v.data);
}

static void strbuf_builds_text(void **state)
{
    tt_strbuf sb = {0};
    assert_string_equal(tt_strbuf_cstr(&sb), "");
    tt_strbuf_append(&sb, "for ");
    tt_strbuf_printf(&sb, "%s in 0..%d", "i", 16);
    tt_strbuf_indent(&sb, 2);
    assert_string_equal(tt_strbuf_cstr(&sb), "for i in 0..16    ");
    char *s = tt_strbuf_take(&sb);
    assert_string_equal(s, "for i in 0..16    ");
    free(s);
    assert_null(sb.data);
}

static void hashes_are_stable_fnv1a(void **state)
{
    /* Published FNV-1a 64 test vectors: the hashes are part of the database format. */
    assert_true(tt_hash64_str("") == 0xcbf29ce484222325ull);
    assert_true(tt_hash64_str("a") == 0xaf63dc4c8601ec8cull);
    assert_true(tt_hash64_str("foobar") == 0x85944171f73967e8ull);
    assert_true(tt_hash64_update(tt_hash64_str("foo"), "bar", 3) == tt_hash64_str("foobar"));
    char hex[17];
    tt_hash64_hex(0xaf63dc4c8601ec8cull, hex);
    assert_string_equal(hex, "af63dc4c8601ec8c");
}

static void rng_is_reproducible_and_in_range(void **state)
{
    tt_rng a, b;
    tt_rng_seed(&a, 42);
    tt_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        assert_true(tt_rng_next(&a) == tt_rng_next(&b));
    int hist[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t x = tt_rng_below(&a, 7);
        assert_true(x < 7);
        hist[x]++;
        double u = tt_rng_uniform(&a);
        assert_true(u >= 0 && u < 1);
    }
    for (int i = 0; i < 7; i++)
        assert_true(hist[i] > 800 && hist[i] < 1200);
}

static void json_errors_say_line_and_column(void **state)
{
    json_t *v;
    tt_errbuf e;
    const char *bad = "[1,\n 2,,]";
    assert_int_equal(tt_json_parse(bad, strlen(bad), &v, &e), TT_ERR_PARSE);
    assert_non_null(strstr(e.msg, "line 2"));
    const char *good = "{\"a\": 3, \"s\": \"x\", \"l\": [5]}";
    assert_int_equal(tt_json_parse(good, strlen(good), &v, &e), TT_OK);
    int64_t n;
    const char *s;
    assert_int_equal(tt_json_object_int(v, "a", &n, &e), TT_OK);
    assert_int_equal(n, 3);
    assert_int_equal(tt_json_object_str(v, "s", &s, &e), TT_OK);
    assert_string_equal(s, "x");
    assert_int_equal(tt_json_object_int(v, "s", &n, &e), TT_ERR_PARSE);
    assert_non_null(strstr(e.msg, "\"s\""));
    assert_int_equal(tt_json_array_int(json_object_get(v, "l"), 0, "l", &n, &e), TT_OK);
    assert_int_equal(n, 5);
    assert_int_equal(tt_json_array_int(json_object_get(v, "l"), 1, "l", &n, &e), TT_ERR_PARSE);
    char *text = tt_json_dump_compact(json_object_get(v, "l"));
    assert_string_equal(text, "[5]");
    free(text);
    json_decref(v);
}

static void median_and_clocks(void **state)
{
    double odd[5] = {5, 1, 4, 2, 3}, even[4] = {4, 1, 3, 2};
    assert_true(tt_median(odd, 5) == 3);
    assert_true(tt_median(even, 4) == 2.5);
    assert_true(odd[0] == 5 && even[0] == 4); /* inputs untouched */
    assert_true(tt_median(odd, 0) == 0);
    double big[100];
    for (int i = 0; i < 100; i++)
        big[i] = 99 - i;
    assert_true(tt_median(big, 100) == 49.5);
    /* the fastest sample: the smallest positive one; a sample of 0 is no time */
    double samples[4] = {3e-3, 0, 2e-3, 4e-3}, none[2] = {0, 0};
    assert_true(tt_fastest(samples, 4) == 2e-3);
    assert_true(tt_fastest(big, 100) == 1);
    assert_true(tt_fastest(none, 2) == 0);
    assert_true(tt_fastest(NULL, 0) == 0);
    double a = tt_clock_monotonic(), b = tt_clock_monotonic();
    assert_true(b >= a);
    assert_true(tt_clock_wall() > 1.6e9);
}

static void log_levels_parse(void **state)
{
    assert_int_equal(tt_log_level_parse("debug"), TT_LOG_DEBUG);
    assert_int_equal(tt_log_level_parse("loud"), -1);
    tt_log_set_level(TT_LOG_ERROR);
    assert_int_equal(tt_log_get_level(), TT_LOG_ERROR);
    TT_INFO("not printed at level error");
}

/* Reads what a logger wrote to `f` (from the start), one line per array element. */
static char *drain(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    rewind(f);
    char *text = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    rewind(f);
    assert_int_equal(ftruncate(fileno(f), 0), 0);
    return text;
}

/* A socket bound to a port and connected to that same port talks to itself (as a connect() to
 * a dead server's ephemeral port may, by chance): that is what the check must see; a real
 * connection is not. */
static void self_connected_sockets_are_told_apart(void **state)
{
    (void)state;
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int server = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(bind(server, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(server, 1), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(server, (struct sockaddr *)&a, &len), 0);
    int client = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(client, (struct sockaddr *)&a, sizeof(a)), 0);
    int accepted = accept(server, NULL, NULL);
    assert_true(accepted >= 0);
    assert_false(tt_socket_is_self_connected(client));
    assert_false(tt_socket_is_self_connected(accepted));
    close(client);
    close(accepted);
    close(server);
    int self = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(self, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    a.sin_port = 0;
    assert_int_equal(bind(self, (struct sockaddr *)&a, sizeof(a)), 0);
    len = sizeof(a);
    assert_int_equal(getsockname(self, (struct sockaddr *)&a, &len), 0);
    assert_int_equal(connect(self, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_true(tt_socket_is_self_connected(self));
    close(self);
    int unconnected = socket(AF_INET, SOCK_STREAM, 0);
    assert_false(tt_socket_is_self_connected(unconnected)); /* no peer */
    close(unconnected);
}

static void daemon_logs_are_structured(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    tt_logger lg = {f, TT_LOG_INFO, true, "tvm-test"};
    tt_logger_log(&lg, TT_LOG_WARN, "10.0.0.7", "closing: a \"quoted\" reason\nand a newline");
    tt_logger_log(&lg, TT_LOG_DEBUG, NULL, "dropped at level info");
    tt_logger_log(&lg, TT_LOG_INFO, NULL, "no context");
    char *text = drain(f);
    char *second = strchr(text, '\n');
    assert_non_null(second);
    *second++ = 0;
    json_t *j = NULL;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_json_parse(text, strlen(text), &j, &err), TT_OK);
    assert_string_equal(json_string_value(json_object_get(j, "level")), "warn");
    assert_string_equal(json_string_value(json_object_get(j, "program")), "tvm-test");
    assert_string_equal(json_string_value(json_object_get(j, "context")), "10.0.0.7");
    assert_string_equal(json_string_value(json_object_get(j, "msg")),
                        "closing: a \"quoted\" reason\nand a newline");
    const char *ts = json_string_value(json_object_get(j, "ts"));
    assert_int_equal(strlen(ts), 24); /* 2026-11-22T21:48:45.392Z */
    assert_int_equal(ts[10], 'T');
    assert_int_equal(ts[23], 'Z');
    json_decref(j);
    assert_int_equal(tt_json_parse(second, strlen(second), &j, &err), TT_OK);
    assert_null(json_object_get(j, "context"));
    json_decref(j);
    assert_null(strstr(second, "dropped"));
    free(text);

    /* text lines, and a stream that turns lines into log lines */
    lg.json = false;
    FILE *s = tt_logger_stream(&lg, TT_LOG_INFO, "job 3");
    assert_non_null(s);
    fprintf(s, "first line\nsecond ");
    fprintf(s, "line, in two writes\n");
    fprintf(s, "last, unterminated");
    fclose(s);
    text = drain(f);
    assert_non_null(strstr(text, " info  tvm-test: [job 3] first line\n"));
    assert_non_null(strstr(text, " info  tvm-test: [job 3] second line, in two writes\n"));
    assert_non_null(strstr(text, " info  tvm-test: [job 3] last, unterminated\n"));
    free(text);
    /* a silent logger makes no stream and prints nothing */
    lg.out = NULL;
    assert_null(tt_logger_stream(&lg, TT_LOG_INFO, NULL));
    tt_logger_log(&lg, TT_LOG_ERROR, NULL, "nowhere");
    fclose(f);
}

static void tensor_memory_starts_at_the_page_offset(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 4096 - TT_TENSOR_PAGE_OFFSET, 4096, 3 << 20};
    for (size_t k = 0; k < TT_ARRAY_LEN(sizes); k++) {
        unsigned char *p = tt_tensor_alloc(sizes[k]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 4096, TT_TENSOR_PAGE_OFFSET);
        if (sizes[k]) { /* every byte is there to use */
            memset(p, 0xab, sizes[k]);
            assert_int_equal(p[sizes[k] - 1], 0xab);
        }
        tt_tensor_free(p, sizes[k]);
    }
    tt_tensor_free(NULL, 16);
}

/* A directory of `base`, with a file inside and its time set `age` seconds back. */
static void make_dir(const char *base, const char *name, double age, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", base, name);
    assert_int_equal(mkdir(path, 0700), 0);
    char file[600];
    snprintf(file, sizeof(file), "%s/c0.so", path);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
    struct timeval tv[2];
    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= (time_t)age;
    tv[1] = tv[0];
    assert_int_equal(utimes(path, tv), 0);
}

static bool exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* A killed process's work directory goes at the next creation; a live process's, a fresh one,
 * other names and links stay. */
static void work_directories_of_dead_processes_are_swept(void **state)
{
    (void)state;
    char base[] = "/tmp/tt-workdir-XXXXXX";
    assert_non_null(mkdtemp(base));
    const char *saved = getenv("TMPDIR");
    char *old = saved ? strdup(saved) : NULL;
    setenv("TMPDIR", base, 1);
    /* A PID above pid_max names no process, now or later: a reaped child's PID can be taken
     * by another process (tests fork thousands) before the sweep looks. */
    long pid_max = 32768;
    FILE *pm = fopen("/proc/sys/kernel/pid_max", "r");
    if (pm) {
        if (fscanf(pm, "%ld", &pid_max) != 1)
            pid_max = 32768;
        fclose(pm);
    }
    pid_t dead = (pid_t)(pid_max + 1);
    assert_int_equal(kill(dead, 0), -1);
    assert_int_equal(errno, ESRCH);
    char name[128], stale[512], fresh[512], alive[512], sandbox[512], other[512], target[512],
        link[512];
    snprintf(name, sizeof(name), "tvm-tune-%d-aaaaaa", (int)dead);
    make_dir(base, name, 3600, stale, sizeof(stale));
    snprintf(name, sizeof(name), "tvm-tune-%d-bbbbbb", (int)dead);
    make_dir(base, name, 0, fresh, sizeof(fresh));
    snprintf(name, sizeof(name), "tvm-tune-%d-cccccc", (int)getppid());
    make_dir(base, name, 3600, alive, sizeof(alive));
    snprintf(name, sizeof(name), "tvm-tune-sandbox-0-%d", (int)dead);
    make_dir(base, name, 3600, sandbox, sizeof(sandbox));
    snprintf(name, sizeof(name), "tvm-net-%d-dddddd", (int)dead);
    make_dir(base, name, 3600, other, sizeof(other));
    make_dir(base, "elsewhere", 3600, target, sizeof(target));
    snprintf(link, sizeof(link), "%s/tvm-tune-%d-eeeeee", base, (int)dead);
    assert_int_equal(symlink(target, link), 0);

    char dir[512];
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workdir_create("tvm-tune", dir, sizeof(dir), &err), TT_OK);
    char prefix[600];
    snprintf(prefix, sizeof(prefix), "%s/tvm-tune-%d-", base, (int)getpid());
    assert_int_equal(strncmp(dir, prefix, strlen(prefix)), 0);
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_false(exists(stale));
    assert_true(exists(fresh));
    assert_true(exists(alive));
    assert_true(exists(sandbox));
    assert_true(exists(other));
    assert_true(exists(link));
    char kept[600];
    snprintf(kept, sizeof(kept), "%s/c0.so", target);
    assert_true(exists(kept)); /* the link was not followed */

    /* with no age required, the dead process's fresh directory goes too; ours stays */
    assert_int_equal(tt_workdir_sweep("tvm-tune", 0), 1);
    assert_false(exists(fresh));
    assert_true(exists(dir));
    assert_true(exists(alive));

    /* removing one takes what is left in it */
    char file[600];
    snprintf(file, sizeof(file), "%s/c3.so.o", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    tt_workdir_remove(dir);
    assert_false(exists(dir));

    /* a base that cannot hold one says where */
    setenv("TMPDIR", "/nonexistent-tt-base", 1);
    assert_int_equal(tt_workdir_create("tvm-tune", dir, sizeof(dir), &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent-tt-base"));
    assert_string_equal(dir, "");

    if (old) {
        setenv("TMPDIR", old, 1);
        free(old);
    } else {
        unsetenv("TMPDIR");
    }
    tt_workdir_remove(base);
    assert_false(exists(base));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_status_has_a_name_and_a_message),
        cmocka_unit_test(errbuf_formats_and_prefixes),
        cmocka_unit_test(arena_allocations_are_aligned_and_zeroed),
        cmocka_unit_test(tensor_memory_starts_at_the_page_offset),
        cmocka_unit_test(work_directories_of_dead_processes_are_swept),
        cmocka_unit_test(vectors_grow_and_keep_their_elements),
        cmocka_unit_test(strbuf_builds_text),
        cmocka_unit_test(hashes_are_stable_fnv1a),
        cmocka_unit_test(rng_is_reproducible_and_in_range),
        cmocka_unit_test(json_errors_say_line_and_column),
        cmocka_unit_test(median_and_clocks),
        cmocka_unit_test(log_levels_parse),
        cmocka_unit_test(daemon_logs_are_structured),
        cmocka_unit_test(self_connected_sockets_are_told_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
