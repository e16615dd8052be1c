/* Fuzz target: the tracker's dashboard as a browser or a scanner reaches it (tracker/http.c,
 * dashboard.c): a request head parsed in place, then routed to the dashboard's handler over a
 * registry with a registered device and a waiting request.  Nothing may crash, leak or answer
 * without a status; paths outside the dashboard's get 404. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "tracker/dashboard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drop(void *ctx, tt_conn_id conn, const char *json, size_t len)
{
    (void)ctx;
    (void)conn;
    (void)json;
    (void)len;
}

static tt_registry *fixture(void)
{
    static tt_registry *r;
    if (r)
        return r;
    r = tt_registry_new(NULL, drop, NULL);
    static const char *const msgs[] = {
        "[5, {\"key\": \"server:cpu\", \"impl\": \"tvm-rpc-server/0.1.0\", \"device\": "
        "{\"arch\": \"x86_64\", \"cores\": 2}}]",
        "[3, \"cpu\", [9090, \"cpu:1\"], null]", "[7]"};
    tt_registry_open(r, 1, "127.0.0.1", 0);
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++)
        tt_registry_handle(r, 1, msgs[i], strlen(msgs[i]), 0, NULL, &(tt_errbuf){{0}});
    tt_registry_open(r, 2, "10.0.0.7", 0);
    const char *req = "[4, \"gpu\", \"\", 0]";
    tt_registry_handle(r, 2, req, strlen(req), 0, NULL, &(tt_errbuf){{0}});
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16 * 1024)
        return 0;
    char *head = malloc(size + 1);
    if (!head)
        return 0;
    memcpy(head, data, size);
    head[size] = 0;
    char *path = NULL, *query = NULL;
    bool head_only = false;
    const char *why = NULL;
    int status = tt_http_parse_head(head, &path, &query, &head_only, &why);
    if (status) {
        if ((status != 400 && status != 405) || !why)
            abort();
    } else {
        if (!path || path[0] != '/' || !query)
            abort();
        tt_dashboard d;
        memset(&d, 0, sizeof(d));
        d.reg = fixture();
        d.started = tt_clock_monotonic();
        snprintf(d.tracker, sizeof(d.tracker), "127.0.0.1:9190");
        tt_http_response res = {0};
        tt_dashboard_handle(&d, path, query, &res);
        if (!res.status || (res.status == 200 && !res.body))
            abort();
        free(res.body);
    }
    free(head);
    return 0;
}
