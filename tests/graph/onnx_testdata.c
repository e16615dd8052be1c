#include "onnx_testdata.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

bool tt_test_have_onnx_testdata(void)
{
    struct stat st;
    if (!stat(NODE_TESTS, &st))
        return true;
    if (getenv("CI"))
        fail_msg("%s is missing (libonnx-testdata)", NODE_TESTS);
    return false;
}

int tt_test_bind_int_inputs(const char *dir, tt_gtensor *bind, int max)
{
    int n = 0;
    for (int i = 0; n < max; i++) {
        char path[1200];
        snprintf(path, sizeof(path), "%s/test_data_set_0/input_%d.pb", dir, i);
        struct stat st;
        tt_errbuf err = {{0}};
        if (stat(path, &st))
            break;
        if (tt_graph_read_tensor(path, &bind[n], &err))
            continue;
        bool resize_param = bind[n].dtype == TT_DT_FLOAT32 &&
                            (!strcmp(bind[n].name, "scales") || !strcmp(bind[n].name, "roi"));
        if ((bind[n].dtype == TT_DT_INT64 || resize_param) && bind[n].name[0])
            n++;
        else
            tt_test_free_tensors(&bind[n], 1);
    }
    return n;
}

void tt_test_free_tensors(tt_gtensor *t, int n)
{
    for (int i = 0; i < n; i++) {
        free(t[i].name);
        free(t[i].data);
    }
}
