/* The measurement sandbox: planted crashing, aborting, hanging, memory-hogging and wrong kernels
 * become results with TVM's error codes; a good kernel is timed. */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/tensor_mem.h"
#include "base/workdir.h"
#include "rpc/measure.h"
#include "rpc/measure_int.h"
#include "rpc/measure_proto.h"
#include "net/proc.h"

#define N 1024
static float in[N], expect[N];

static tt_measure_result measure_const(const char *entry, const tt_measure_options *o,
                                       bool constant)
{
    tt_measure_buffer bufs[2] = {{TT_ELEM_F32, N, in, NULL, false, constant},
                                 {TT_ELEM_F32, N, NULL, expect, false, false}};
    tt_measure_result r;
    tt_errbuf err;
    assert_int_equal(tt_measure_run(PLANTED_SO, entry, bufs, 2, 1, o, &r, &err), TT_OK);
    return r;
}

static tt_measure_result measure(const char *entry, const tt_measure_options *o)
{
    return measure_const(entry, o, false);
}

static void setup_data(void)
{
    for (int i = 0; i < N; i++) {
        in[i] = (float)i * 0.5f;
        expect[i] = in[i] * 2.0f;
    }
}

static void a_good_kernel_is_timed(void **state)
{
    setup_data();
    tt_measure_options o = {.number = 2, .repeat = 5, .min_repeat_ms = 1};
    tt_measure_result r = measure("good", &o);
    assert_int_equal(r.error_no, 0);
    assert_int_equal(r.ncosts, 5);
    for (int i = 0; i < 5; i++)
        assert_true(r.costs[i] > 0);
    /* number grew until a sample lasted at least 1 ms. */
    assert_true(r.number > 2);
}

/* repeat_budget_ms stops the samples once they add up to it, after at least
 * TT_MEASURE_MIN_SAMPLES.  Samples of at least 2 ms (min_repeat_ms) make the counts exact
 * whatever the machine's speed. */
static void the_sample_budget_bounds_a_measurement(void **state)
{
    setup_data();
    tt_measure_options o = {.number = 1, .repeat = 64, .min_repeat_ms = 2, .repeat_budget_ms = 30};
    tt_measure_result r = measure("good", &o);
    assert_int_equal(r.error_no, 0);
    /* 30 ms of samples of at least 2 ms: at most 15, then one that crosses the budget */
    assert_true(r.ncosts >= TT_MEASURE_MIN_SAMPLES && r.ncosts <= 16);
    /* a budget the first sample exceeds still gets the minimum */
    o.repeat_budget_ms = 0.5;
    r = measure("good", &o);
    assert_int_equal(r.ncosts, TT_MEASURE_MIN_SAMPLES);
    /* ... and never more than repeat */
    o.repeat = 3;
    r = measure("good", &o);
    assert_int_equal(r.ncosts, 3);
    /* no budget: every sample repeat asks for */
    o.repeat = 20;
    o.repeat_budget_ms = 0;
    r = measure("good", &o);
    assert_int_equal(r.ncosts, 20);
    for (int i = 0; i < r.ncosts; i++)
        assert_true(r.costs[i] > 0);
}

static void every_flush_mode_times_a_checked_kernel(void **state)
{
    setup_data();
    for (int f = TT_CACHE_FLUSH_OFF; f <= TT_CACHE_FLUSH_NETWORK; f++) {
        tt_measure_options o = {.number = 1, .repeat = 3, .min_repeat_ms = 1, .cache_flush = f};
        tt_measure_result r = measure_const("good", &o, true);
        assert_int_equal(r.error_no, 0);
        assert_int_equal(r.ncosts, 3);
        for (int i = 0; i < 3; i++)
            assert_true(r.costs[i] > 0);
        /* Per-call flushing still grows number to min_repeat_ms of kernel time. */
        assert_true(r.number > 1);
    }
    /* A wrong answer is caught whatever is flushed. */
    tt_measure_options o = {.cache_flush = TT_CACHE_FLUSH_CONSTANTS};
    assert_int_equal(measure_const("wrong", &o, true).error_no, 5);
}

/* --cache-flush=network: before every call each activation is written again (unchanged) by the
 * kernel's threads, each its share, as the layer before leaves it; the weights are not written,
 * and in the other modes nothing is.  The planted kernels watch their input's pages. */
static void the_network_mode_rewrites_activations_by_share(void **state)
{
    setup_data();
    tt_measure_options o = {.number = 1, .repeat = 5, .cache_flush = TT_CACHE_FLUSH_NETWORK};
    tt_measure_result r = measure("input_rewritten_by_team", &o);
    assert_int_equal(r.error_no, 0);
    assert_int_equal(r.ncosts, 5);
    /* The planted kernel itself fails when nothing wrote its input: the test can fail. */
    o.cache_flush = TT_CACHE_FLUSH_CONSTANTS;
    r = measure("input_rewritten_by_team", &o);
    assert_int_equal(r.error_no, 4);
    assert_non_null(strstr(r.error_text, "returned 11"));
    /* Weights are evicted, never written; other modes write nothing. */
    o.cache_flush = TT_CACHE_FLUSH_NETWORK;
    assert_int_equal(measure_const("input_untouched", &o, true).error_no, 0);
    r = measure("input_untouched", &o);
    assert_int_equal(r.error_no, 4);
    assert_non_null(strstr(r.error_text, "returned 12"));
    for (int f = TT_CACHE_FLUSH_OFF; f <= TT_CACHE_FLUSH_CONSTANTS; f++) {
        o.cache_flush = f;
        o.number = f == TT_CACHE_FLUSH_INPUTS ? 1 : 3;
        assert_int_equal(measure("input_untouched", &o).error_no, 0);
    }
}

/* The network mode's weights wait where a whole network run leaves them: in the last-level
 * cache for the share of a buffer of the network's size (network_bytes) that stays there from
 * one read to the next, in memory for the rest; the result says which share, and either way the
 * activations are written by share and the weights never. */
static void the_network_mode_keeps_a_share_of_the_network_in_the_llc(void **state)
{
    setup_data();
    int64_t llc = tt_measure_llc_bytes();
    assert_true(tt_measure_network_llc_share(0) == 0);
    assert_true(tt_measure_network_llc_share(INT64_MAX / 2) == 0);
    assert_true(tt_measure_network_llc_share(llc + 1) == 0);
    /* probed: a quarter's multiple (which one is the machine's, and a busy one's, to say: the
     * arithmetic is checked below) */
    const int64_t probed[] = {1 << 20, llc / 2};
    for (int i = 0; i < 2 && llc > 0; i++) {
        double share = tt_measure_network_llc_share(probed[i]);
        assert_true(share == 0 || share == 0.25 || share == 0.5 || share == 0.75 || share == 1);
    }
    /* what a process keeps of the LLC, said rather than probed: a size, or a share */
    if (llc >= 8 << 20) {
        setenv("TVM_TUNE_LLC_MIB", "2", 1);
        assert_true(tt_measure_network_llc_share(2 << 20) == 1);
        assert_true(tt_measure_network_llc_share((2 << 20) + 1) == 0);
        setenv("TVM_TUNE_LLC_MIB", "0", 1);
        assert_true(tt_measure_network_llc_share(1 << 20) == 0);
        unsetenv("TVM_TUNE_LLC_MIB");
    }
    setenv("TVM_TUNE_LLC_SHARE", "0.45", 1);
    assert_true(tt_measure_network_llc_share(INT64_MAX / 2) == 0.5);
    assert_true(tt_measure_network_llc_share(0) == 0);
    unsetenv("TVM_TUNE_LLC_SHARE");
    /* The share from the read times: the network's second read between memory's and the
     * cache's (the AMD EPYC Zen 4 of docs/models.md at 20 MiB: 37.8, 52.3 and 100 GB/s). */
    assert_true(tt__llc_share_from_times(1 / 37.8, 1 / 52.3, 1 / 100.0) == 0.5);
    assert_true(tt__llc_share_from_times(1 / 36.9, 1 / 38.8, 1 / 100.0) == 0);
    assert_true(tt__llc_share_from_times(1 / 39.0, 1 / 80.5, 1 / 100.0) == 0.75);
    assert_true(tt__llc_share_from_times(1 / 40.0, 1 / 30.0, 1 / 100.0) == 0); /* slower again */
    assert_true(tt__llc_share_from_times(1 / 40.0, 1 / 120.0, 1 / 100.0) == 1);
    assert_true(tt__llc_share_from_times(1 / 95.0, 1 / 98.0, 1 / 100.0) == -1); /* no flush */
    assert_true(tt__llc_share_from_times(0, 1, 1) == -1);
    assert_string_equal(tt_measure_network_flush_name(0), "network");
    assert_string_equal(tt_measure_network_flush_name(0.5), "network-llc-50");
    assert_string_equal(tt_measure_network_flush_name(0.75), "network-llc-75");
    assert_string_equal(tt_measure_network_flush_name(1), "network-llc");
    /* Measured with each share: all of it, none, and a part (said, so that the test takes the
     * partial flush whatever this machine's cache does). */
    const int64_t sizes[] = {1 << 20, INT64_MAX / 2, 0, -1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        if (sizes[i] < 0)
            setenv("TVM_TUNE_LLC_SHARE", "0.25", 1);
        int64_t bytes = sizes[i] < 0 ? 1 << 20 : sizes[i];
        tt_measure_options o = {.number = 1,
                                .repeat = 5,
                                .cache_flush = TT_CACHE_FLUSH_NETWORK,
                                .network_bytes = bytes};
        double share = tt_measure_network_llc_share(bytes);
        tt_measure_result r = measure("input_rewritten_by_team", &o);
        assert_int_equal(r.error_no, 0);
        assert_int_equal(r.ncosts, 5);
        assert_true(r.llc_share == share);
        r = measure_const("input_untouched", &o, true);
        assert_int_equal(r.error_no, 0);
        assert_true(r.llc_share == share);
        r = measure_const("good", &o, true);
        assert_int_equal(r.error_no, 0);
        /* only the network mode says so */
        o.cache_flush = TT_CACHE_FLUSH_CONSTANTS;
        assert_true(measure_const("good", &o, true).llc_share == 0);
        if (sizes[i] < 0) {
            assert_true(share == 0.25);
            unsetenv("TVM_TUNE_LLC_SHARE");
        }
    }
    /* The option and the answer travel to and from a device; a device from before the shares
     * said weights_in_llc, all or nothing. */
    tt_measure_options o = {.cache_flush = TT_CACHE_FLUSH_NETWORK, .network_bytes = 123456789},
                       back = {0};
    json_t *j = tt_measure_options_json(&o);
    tt_measure_options_from_json(j, &back);
    json_decref(j);
    assert_int_equal(back.network_bytes, 123456789);
    tt_measure_result r = {.ncosts = 1, .costs = {1e-3}, .number = 1, .llc_share = 0.75}, rb;
    tt_errbuf err;
    j = tt_measure_result_json(&r);
    assert_int_equal(tt_measure_result_from_json(j, &rb, &err), TT_OK);
    assert_true(rb.llc_share == 0.75);
    json_object_del(j, "llc_share");
    json_object_set_new(j, "weights_in_llc", json_true());
    assert_int_equal(tt_measure_result_from_json(j, &rb, &err), TT_OK);
    assert_true(rb.llc_share == 1);
    json_object_set_new(j, "llc_share", json_real(1.5));
    assert_int_equal(tt_measure_result_from_json(j, &rb, &err), TT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "llc_share"));
    json_decref(j);
    r.llc_share = 0;
    j = tt_measure_result_json(&r);
    assert_int_equal(tt_measure_result_from_json(j, &rb, &err), TT_OK);
    json_decref(j);
    assert_true(rb.llc_share == 0);
}

static void flush_modes_travel_as_json(void **state)
{
    static const struct {
        const char *json;
        bool ok;
        tt_cache_flush want;
    } cases[] = {
        {"false", true, TT_CACHE_FLUSH_OFF},
        {"true", true, TT_CACHE_FLUSH_INPUTS},
        {"\"off\"", true, TT_CACHE_FLUSH_OFF},
        {"\"inputs\"", true, TT_CACHE_FLUSH_INPUTS},
        {"\"constants\"", true, TT_CACHE_FLUSH_CONSTANTS},
        {"\"network\"", true, TT_CACHE_FLUSH_NETWORK},
        {"\"weights\"", false, 0},
        {"1", false, 0},
        {"null", false, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        tt_cache_flush f = (tt_cache_flush)99;
        assert_int_equal(tt_cache_flush_from_json(j, &f), cases[i].ok);
        assert_int_equal(f, cases[i].ok ? cases[i].want : (tt_cache_flush)99);
        json_decref(j);
    }
    /* Round trips through the options object; off and inputs stay booleans for older peers. */
    for (int f = TT_CACHE_FLUSH_OFF; f <= TT_CACHE_FLUSH_NETWORK; f++) {
        tt_measure_options o = {.number = 3,
                                .repeat_budget_ms = 100,
                                .cache_flush = f,
                                .kernel_timeout_s = 1.5},
                           back = {0};
        json_t *j = tt_measure_options_json(&o);
        assert_int_equal(json_is_boolean(json_object_get(j, "cache_flush")),
                         f < TT_CACHE_FLUSH_CONSTANTS);
        tt_measure_options_from_json(j, &back);
        assert_int_equal(back.cache_flush, f);
        assert_int_equal(back.number, 3);
        assert_true(back.repeat_budget_ms == 100);
        assert_true(back.kernel_timeout_s == 1.5);
        json_decref(j);
        tt_cache_flush parsed;
        assert_true(tt_cache_flush_parse(tt_cache_flush_name(f), &parsed));
        assert_int_equal(parsed, f);
    }
}

/* Every buffer starts where a deployment's allocator puts a large tensor, 64 bytes into a page,
 * whatever the measuring process allocated before (base/tensor_mem.h): a kernel's speed can
 * depend on it.  The planted kernel writes its buffers' page offsets as its output. */
static void buffers_are_placed_as_deployments_place_them(void **state)
{
    (void)state;
    setup_data();
    memset(expect, 0, sizeof(expect));
    expect[0] = expect[1] = (float)TT_TENSOR_PAGE_OFFSET;
    void *noise[64];
    for (int i = 0; i < 64; i++) /* a heap with a history: posix_memalign would fall anywhere */
        noise[i] = malloc((size_t)(i * 97 + 13));
    tt_measure_options o = {.number = 1, .repeat = 1};
    tt_measure_result r = measure("placement", &o);
    assert_int_equal(r.error_no, 0);
    for (int i = 0; i < 64; i++)
        free(noise[i]);
}

static void kernel_threads_are_pinned_before_timing(void **state)
{
    setup_data();
    /* `spreads` aborts in any timed call whose threads share a core or may move. */
    tt_measure_result r = measure("spreads", NULL);
    assert_int_equal(r.error_no, 0);
    assert_int_equal(r.ncosts, 3);
}

static void a_wrong_answer_is_wrong_answer(void **state)
{
    setup_data();
    tt_measure_result r = measure("wrong", NULL);
    assert_int_equal(r.error_no, 5);
    assert_non_null(strstr(r.error_text, "element 1023"));
}

static void a_crash_is_a_runtime_device_error(void **state)
{
    setup_data();
    tt_measure_result r = measure("crash", NULL);
    assert_int_equal(r.error_no, 4);
    assert_non_null(strstr(r.error_text, "signal 11"));
    r = measure("aborts", NULL);
    assert_int_equal(r.error_no, 4);
    assert_non_null(strstr(r.error_text, "signal 6"));
    r = measure("fails", NULL);
    assert_int_equal(r.error_no, 4);
    assert_non_null(strstr(r.error_text, "returned 7"));
}

static void a_hang_is_killed_as_run_timeout(void **state)
{
    setup_data();
    tt_measure_options o = {.timeout_s = 0.5};
    tt_measure_result r = measure("hangs", &o);
    assert_int_equal(r.error_no, 7);
    assert_true(r.run_s < 5);
}

/* The tuner's deadline for a candidate counts the kernel's calls only: the child sends the
 * timeout itself, long before the whole child's timeout, and a kernel within it is timed. */
static void the_kernel_deadline_counts_from_the_first_call(void **state)
{
    setup_data();
    tt_measure_options o = {.timeout_s = 60, .kernel_timeout_s = 0.3};
    tt_measure_result r = measure("hangs", &o);
    assert_int_equal(r.error_no, 7);
    assert_non_null(strstr(r.error_text, "0.3 s of kernel calls"));
    assert_true(r.run_s < 30);
    o = (tt_measure_options){.repeat = 3, .timeout_s = 60, .kernel_timeout_s = 5};
    r = measure("good", &o);
    assert_int_equal(r.error_no, 0);
    assert_int_equal(r.ncosts, 3);
}

static void runaway_allocation_hits_the_memory_limit(void **state)
{
    setup_data();
    tt_measure_options o = {.memory_limit = 512ll << 20, .timeout_s = 20};
    tt_measure_result r = measure("hogs", &o);
    assert_int_equal(r.error_no, 4);
}

static void a_missing_library_or_symbol_is_reported(void **state)
{
    setup_data();
    tt_measure_buffer bufs[2] = {{TT_ELEM_F32, N, in, NULL, false, false},
                                 {TT_ELEM_F32, N, NULL, expect, false, false}};
    tt_measure_result r;
    tt_errbuf err;
    assert_int_equal(tt_measure_run("/nonexistent/k.so", "good", bufs, 2, 1, NULL, &r, &err),
                     TT_OK);
    assert_int_equal(r.error_no, 4);
    assert_non_null(strstr(r.error_text, "/nonexistent/k.so"));
    r = measure("no_such_entry", NULL);
    assert_int_equal(r.error_no, 4);
    assert_non_null(strstr(r.error_text, "no function 'no_such_entry'"));
}

/* Points TMPDIR at `dir` and returns what it was (malloc'ed, or NULL when unset), for
 * restore_tmpdir. */
static char *use_tmpdir(const char *dir)
{
    char *saved = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    setenv("TMPDIR", dir, 1);
    return saved;
}

static void restore_tmpdir(char *saved)
{
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
}

/* The measuring child drops what a kernel does not need (the server's sockets among it: here a
 * connected pair and a listening socket on loopback), and its private directory goes away with
 * it. */
static void the_child_is_sandboxed(void **state)
{
    setup_data();
    int pair[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(listener >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(listener, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(listener, 1), 0);
    char dir[] = "/tmp/tt-measure-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *saved = use_tmpdir(dir);
    tt_measure_options o = {.repeat = 1};
    tt_measure_result r = measure("sandboxed", &o);
    restore_tmpdir(saved);
    if (r.error_no)
        fail_msg("%d: %s", r.error_no, r.error_text);
    assert_int_equal(rmdir(dir), 0); /* empty: the child's directory was removed */
    /* The parent's sockets are its own still. */
    assert_int_equal(write(pair[0], "x", 1), 1);
    char c = 0;
    assert_int_equal(read(pair[1], &c, 1), 1);
    close(pair[0]);
    close(pair[1]);
    close(listener);
}

/* The PID in the name of the one sandbox directory in `dir`, 0 while there is none. */
static pid_t sandboxed_child(const char *dir)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "tvm-tune-sandbox-%u-", (unsigned)getuid());
    DIR *d = opendir(dir);
    pid_t pid = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            pid = (pid_t)atoi(e->d_name + strlen(prefix));
    if (d)
        closedir(d);
    return pid;
}

/* A server killed with SIGKILL while its child runs a hung kernel takes the child with it (the
 * child leads its own process group, so nothing else would end it), and the directory the child
 * leaves is swept as a dead process's.  This test adopts the orphaned child (a subreaper) to see
 * it die. */
static void a_killed_server_takes_its_hung_kernel_with_it(void **state)
{
    setup_data();
    char dir[] = "/tmp/tt-orphan-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *saved = use_tmpdir(dir);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    pid_t server = fork();
    assert_true(server >= 0);
    if (server == 0) {
        tt_measure_options o = {.timeout_s = 60};
        measure("hangs", &o);
        _exit(0);
    }
    pid_t child = 0;
    for (int i = 0; i < 1000 && !(child = sandboxed_child(dir)); i++)
        usleep(10000);
    assert_true(child > 0);
    kill(server, SIGKILL);
    assert_int_equal(waitpid(server, NULL, 0), server);
    int status = 0;
    bool died = tt_proc_reap(child, true, 5, &status); /* its group killed if not: the defect */
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    assert_true(died);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* Its directory outlived it, and is a dead process's to sweep. */
    assert_int_equal(sandboxed_child(dir), child);
    char name[64];
    snprintf(name, sizeof(name), "tvm-tune-sandbox-%u", (unsigned)getuid());
    assert_int_equal(tt_workdir_sweep(name, 0), 1);
    assert_int_equal(sandboxed_child(dir), 0);
    restore_tmpdir(saved);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_good_kernel_is_timed),
        cmocka_unit_test(the_sample_budget_bounds_a_measurement),
        cmocka_unit_test(every_flush_mode_times_a_checked_kernel),
        cmocka_unit_test(the_network_mode_rewrites_activations_by_share),
        cmocka_unit_test(the_network_mode_keeps_a_share_of_the_network_in_the_llc),
        cmocka_unit_test(flush_modes_travel_as_json),
        cmocka_unit_test(buffers_are_placed_as_deployments_place_them),
        cmocka_unit_test(kernel_threads_are_pinned_before_timing),
        cmocka_unit_test(a_wrong_answer_is_wrong_answer),
        cmocka_unit_test(a_crash_is_a_runtime_device_error),
        cmocka_unit_test(a_hang_is_killed_as_run_timeout),
        cmocka_unit_test(the_kernel_deadline_counts_from_the_first_call),
        cmocka_unit_test(runaway_allocation_hits_the_memory_limit),
        cmocka_unit_test(a_missing_library_or_symbol_is_reported),
        cmocka_unit_test(the_child_is_sandboxed),
        cmocka_unit_test(a_killed_server_takes_its_hung_kernel_with_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
