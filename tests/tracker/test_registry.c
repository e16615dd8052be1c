/* The tracker's protocol state without sockets (tracker-protocol.md §3-7, §12, §13): replies,
 * priorities, disconnect clean-up, SUMMARY, the C++/Java variants, and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tracker/registry.h"

/* Replies captured per connection (the last one kept, and a log of all). */
typedef struct {
    char last[16][1024];
    char log[8192];
} capture;

static void on_send(void *ctx, tt_conn_id c, const char *json, size_t len)
{
    capture *cap = ctx;
    snprintf(cap->last[c], sizeof(cap->last[c]), "%.*s", (int)len, json);
    size_t n = strlen(cap->log);
    snprintf(cap->log + n, sizeof(cap->log) - n, "%llu:%.*s\n", (unsigned long long)c, (int)len,
             json);
}

static tt_status msg(tt_registry *r, tt_conn_id c, const char *json)
{
    tt_errbuf err = {{0}};
    bool stop = false;
    return tt_registry_handle(r, c, json, strlen(json), 0, &stop, &err);
}

static void basic_replies(void **state)
{
    (void)state;
    static capture cap;
    memset(&cap, 0, sizeof(cap));
    tt_registry *r = tt_registry_new("tracker:0.5", on_send, &cap);
    assert_int_equal(tt_registry_open(r, 1, "10.0.0.1", 0), TT_OK);
    assert_int_equal(msg(r, 1, "[1]"), TT_OK);
    assert_string_equal(cap.last[1], "0");
    char *sum = tt_registry_summary(r);
    assert_string_equal(sum, "[0, {\"queue_info\": {}, \"server_info\": []}]");
    free(sum);
    /* STOP: wrong key -1, right key 0 and a stop */
    tt_errbuf err = {{0}};
    bool stop = false;
    assert_int_equal(tt_registry_handle(r, 1, "[2, \"nope\"]", 11, 0, &stop, &err), TT_OK);
    assert_string_equal(cap.last[1], "-1");
    assert_false(stop);
    assert_int_equal(tt_registry_handle(r, 1, "[2, \"tracker:0.5\"]", 18, 0, &stop, &err), TT_OK);
    assert_string_equal(cap.last[1], "0");
    assert_true(stop);
    /* bad input closes the connection (an error), never a crash */
    assert_int_equal(msg(r, 1, "[1"), TT_ERR_PARSE);
    assert_int_equal(msg(r, 1, "{\"a\": 1}"), TT_ERR_PARSE);
    assert_int_equal(msg(r, 1, "[\"1\"]"), TT_ERR_PARSE);
    assert_int_equal(msg(r, 1, "[99]"), TT_ERR_PARSE);
    assert_int_equal(msg(r, 1, "[3, \"k\"]"), TT_ERR_PARSE);
    tt_registry_free(r);
}

static void priorities_and_matching(void **state)
{
    (void)state;
    static capture cap;
    memset(&cap, 0, sizeof(cap));
    tt_registry *r = tt_registry_new(NULL, on_send, &cap);
    for (tt_conn_id c = 1; c <= 5; c++)
        assert_int_equal(tt_registry_open(r, c, "127.0.0.1", 0), TT_OK);
    /* A, B, C, D request with priorities 1, 5, 3, 5 */
    assert_int_equal(msg(r, 1, "[4, \"pi\", \"\", 1]"), TT_OK);
    assert_int_equal(msg(r, 2, "[4, \"pi\", \"\", 5]"), TT_OK);
    assert_int_equal(msg(r, 3, "[4, \"pi\", \"\", 3]"), TT_OK);
    assert_int_equal(msg(r, 4, "[4, \"pi\", \"\", 5]"), TT_OK);
    assert_string_equal(cap.log, ""); /* deferred */
    char *sum = tt_registry_summary(r);
    assert_string_equal(sum, "[0, {\"queue_info\": {\"pi\": {\"free\": 0, \"pending\": 4}}, "
                             "\"server_info\": []}]");
    free(sum);
    /* four slots from the server (connection 5): served B, D, C, A */
    const char *puts[4] = {"[3, \"pi\", [9090, \"pi:0.1\"], null]",
                           "[3, \"pi\", [9091, \"pi:0.2\"]]",
                           "[3, \"pi\", [\"9092\", \"pi:0.3\"], \"10.9.9.9\"]",
                           "[3, \"pi\", [9093, \"pi:0.4\"], null]"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(msg(r, 5, puts[i]), TT_OK);
    assert_string_equal(cap.log, "5:0\n2:[0, [\"127.0.0.1\", 9090, \"pi:0.1\"]]\n"
                                 "5:0\n4:[0, [\"127.0.0.1\", 9091, \"pi:0.2\"]]\n"
                                 "5:0\n3:[0, [\"10.9.9.9\", 9092, \"pi:0.3\"]]\n"
                                 "5:0\n1:[0, [\"127.0.0.1\", 9093, \"pi:0.4\"]]\n");
    /* handed-out matchkeys are no longer pending */
    assert_int_equal(msg(r, 5, "[7]"), TT_OK);
    assert_string_equal(cap.last[5], "[]");
    /* keys with ':' are refused */
    assert_int_equal(msg(r, 5, "[3, \"a:b\", [1, \"a:b:0.1\"], null]"), TT_OK);
    assert_string_equal(cap.last[5], "-1");
    tt_registry_free(r);
}

static void disconnects_clean_up(void **state)
{
    (void)state;
    static capture cap;
    memset(&cap, 0, sizeof(cap));
    tt_registry *r = tt_registry_new(NULL, on_send, &cap);
    for (tt_conn_id c = 1; c <= 4; c++)
        assert_int_equal(tt_registry_open(r, c, "127.0.0.1", 0), TT_OK);
    /* a server that never sent UPDATE_INFO puts a slot and dies: the slot goes (TVM keeps it) */
    assert_int_equal(msg(r, 1, "[3, \"x\", [9000, \"x:0.1\"]]"), TT_OK);
    tt_registry_close(r, 1);
    /* a requester that dies no longer counts as pending */
    assert_int_equal(msg(r, 2, "[4, \"x\", \"\", 1]"), TT_OK);
    tt_registry_close(r, 2);
    char *sum = tt_registry_summary(r);
    assert_string_equal(sum, "[0, {\"queue_info\": {\"x\": {\"free\": 0, \"pending\": 0}}, "
                             "\"server_info\": []}]");
    free(sum);
    /* a live server's pending matchkeys are its own */
    assert_int_equal(msg(r, 3, "[3, \"x\", [9001, \"x:0.2\"], null]"), TT_OK);
    assert_int_equal(msg(r, 3, "[7]"), TT_OK);
    assert_string_equal(cap.last[3], "[\"x:0.2\"]");
    assert_int_equal(msg(r, 4, "[7]"), TT_OK);
    assert_string_equal(cap.last[4], "[]");
    tt_registry_free(r);
}

static void update_info_variants(void **state)
{
    (void)state;
    static capture cap;
    memset(&cap, 0, sizeof(cap));
    tt_registry *r = tt_registry_new(NULL, on_send, &cap);
    for (tt_conn_id c = 1; c <= 4; c++)
        assert_int_equal(tt_registry_open(r, c, c == 2 ? "10.0.0.2" : "10.0.0.1", 0), TT_OK);
    /* Python: int port; null host becomes the peer; extra fields pass through */
    assert_int_equal(
        msg(r, 1, "[5, {\"key\": \"server:rk\", \"addr\": [null, 9090], \"impl\": \"x/1\"}]"),
        TT_OK);
    assert_string_equal(cap.last[1], "0");
    /* C++ / Java: port as a string, a space before the colon */
    assert_int_equal(msg(r, 2, "[5, {\"key\" : \"server:pi\", \"addr\" : [null, \"9090\"]}]"),
                     TT_OK);
    /* no addr: refused, connection kept */
    assert_int_equal(msg(r, 3, "[5, {\"key\": \"server:q\"}]"), TT_OK);
    assert_string_equal(cap.last[3], "-1");
    /* a merge keeps earlier fields */
    assert_int_equal(msg(r, 1, "[5, {\"addr\": [\"1.2.3.4\", 9091]}]"), TT_OK);
    /* clients never appear in server_info */
    assert_int_equal(msg(r, 4, "[5, {\"key\": \"client:x\", \"addr\": [null, 0]}]"), TT_OK);
    char *sum = tt_registry_summary(r);
    assert_string_equal(sum, "[0, {\"queue_info\": {}, \"server_info\": [{\"key\": \"server:rk\", "
                             "\"addr\": [\"1.2.3.4\", 9091], \"impl\": \"x/1\"}, {\"key\": "
                             "\"server:pi\", \"addr\": [\"10.0.0.2\", \"9090\"]}]}]");
    free(sum);
    tt_registry_free(r);
}

static tt_status msg_at(tt_registry *r, tt_conn_id c, const char *json, double now)
{
    tt_errbuf err = {{0}};
    bool stop = false;
    return tt_registry_handle(r, c, json, strlen(json), now, &stop, &err);
}

/* A server that heartbeats and then falls silent (wedged, socket still open) is not handed out;
 * when it speaks again the waiting request gets it.  One that never heartbeats is never judged. */
static void wedged_servers(void **state)
{
    (void)state;
    static capture cap;
    memset(&cap, 0, sizeof(cap));
    tt_registry *r = tt_registry_new(NULL, on_send, &cap);
    for (tt_conn_id c = 1; c <= 3; c++)
        assert_int_equal(tt_registry_open(r, c, "10.0.0.1", 0), TT_OK);
    assert_int_equal(msg_at(r, 1, "[5, {\"key\": \"server:pi\", \"addr\": [null, 9090]}]", 0),
                     TT_OK);
    assert_int_equal(msg_at(r, 1, "[3, \"pi\", [9090, \"pi:1\"], null]", 0), TT_OK);
    assert_int_equal(msg_at(r, 1, "[7]", 1), TT_OK);
    assert_string_equal(cap.last[1], "[\"pi:1\"]");
    /* silent for 9 s: the request waits */
    cap.last[2][0] = 0;
    assert_int_equal(msg_at(r, 2, "[4, \"pi\", \"\", 0]", 10), TT_OK);
    assert_string_equal(cap.last[2], "");
    assert_int_equal(msg_at(r, 3, "[6]", 10), TT_OK);
    assert_non_null(strstr(cap.last[3], "\"tracker\": {\"silent_s\": 9.0, \"stale\": true}"));
    assert_non_null(strstr(cap.last[3], "\"pi\": {\"free\": 1, \"pending\": 1}"));
    /* its heartbeat comes back: the waiting request is served */
    assert_int_equal(msg_at(r, 1, "[7]", 11), TT_OK);
    assert_string_equal(cap.last[2], "[0, [\"10.0.0.1\", 9090, \"pi:1\"]]");
    /* a server that never heartbeats is served however long it was silent */
    assert_int_equal(msg_at(r, 3, "[3, \"pi\", [9091, \"pi:2\"], null]", 11), TT_OK);
    assert_int_equal(msg_at(r, 2, "[4, \"pi\", \"\", 0]", 500), TT_OK);
    assert_string_equal(cap.last[2], "[0, [\"10.0.0.1\", 9091, \"pi:2\"]]");
    tt_registry_free(r);
}

/* A client reports a device sick (code 104): its slots are not handed out, SUMMARY says why,
 * and a report that it is healthy again serves the waiting request. */
static void quarantine_reports(void **state)
{
    (void)state;
    static capture cap;
    memset(&cap, 0, sizeof(cap));
    tt_registry *r = tt_registry_new(NULL, on_send, &cap);
    for (tt_conn_id c = 1; c <= 3; c++)
        assert_int_equal(tt_registry_open(r, c, "10.0.0.1", 0), TT_OK);
    assert_int_equal(msg(r, 1, "[5, {\"key\": \"server:pi\", \"addr\": [null, \"9090\"]}]"), TT_OK);
    assert_int_equal(msg(r, 1, "[3, \"pi\", [9090, \"pi:1\"], null]"), TT_OK);
    assert_int_equal(msg(r, 3,
                         "[104, {\"host\": \"10.0.0.1\", \"port\": 9090, \"state\": "
                         "\"quarantine\", \"reason\": \"canary crashed\"}]"),
                     TT_OK);
    assert_string_equal(cap.last[3], "[0, 1]");
    cap.last[2][0] = 0;
    assert_int_equal(msg(r, 2, "[4, \"pi\", \"\", 0]"), TT_OK);
    assert_string_equal(cap.last[2], "");
    assert_int_equal(msg(r, 3, "[6]"), TT_OK);
    assert_non_null(strstr(cap.last[3], "\"tracker\": {\"quarantined\": \"canary crashed\"}"));
    /* malformed reports get an error, not a closed connection */
    assert_int_equal(msg(r, 3, "[104, {\"host\": \"10.0.0.1\"}]"), TT_OK);
    assert_non_null(strstr(cap.last[3], "[-1, "));
    assert_int_equal(msg(r, 3,
                         "[104, {\"host\": \"10.0.0.1\", \"port\": 9090, \"state\": "
                         "\"healthy\"}]"),
                     TT_OK);
    assert_string_equal(cap.last[2], "[0, [\"10.0.0.1\", 9090, \"pi:1\"]]");
    tt_registry_free(r);
}

/* A connection may wait for at most max_pending devices at once; one more is refused with the
 * reason and not queued (the others are served normally). */
static void pending_requests_are_limited(void **state)
{
    (void)state;
    static capture cap;
    memset(&cap, 0, sizeof(cap));
    tt_registry *r = tt_registry_new(NULL, on_send, &cap);
    tt_registry_set_max_pending(r, 2);
    for (tt_conn_id c = 1; c <= 2; c++)
        assert_int_equal(tt_registry_open(r, c, "10.0.0.1", 0), TT_OK);
    assert_int_equal(msg(r, 1, "[4, \"gpu\", \"\", 0]"), TT_OK);
    assert_int_equal(msg(r, 1, "[4, \"gpu\", \"\", 0]"), TT_OK);
    assert_int_equal(msg(r, 1, "[4, \"gpu\", \"\", 0]"), TT_OK);
    assert_non_null(strstr(cap.last[1], "too many pending requests (2)"));
    char *sum = tt_registry_summary(r);
    assert_non_null(strstr(sum, "\"gpu\": {\"free\": 0, \"pending\": 2}"));
    free(sum);
    /* another connection has its own allowance; a device serves the first two in order */
    assert_int_equal(msg(r, 2, "[4, \"gpu\", \"\", 0]"), TT_OK);
    assert_int_equal(msg(r, 2, "[3, \"gpu\", [9090, \"gpu:1\"], \"gpu:1\"]"), TT_OK);
    assert_non_null(strstr(cap.last[1], "gpu:1"));
    tt_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(basic_replies),
        cmocka_unit_test(priorities_and_matching),
        cmocka_unit_test(disconnects_clean_up),
        cmocka_unit_test(update_info_variants),
        cmocka_unit_test(wedged_servers),
        cmocka_unit_test(quarantine_reports),
        cmocka_unit_test(pending_requests_are_limited),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
