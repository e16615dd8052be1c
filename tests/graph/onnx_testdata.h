/* Debian's libonnx-testdata for the tests: where it is, and the values of a node test's integer
 * inputs (shapes, axes, pads), which a deployment fixes and import binds as constants. */
#ifndef TT_TESTS_ONNX_TESTDATA_H
#define TT_TESTS_ONNX_TESTDATA_H

#include <stdbool.h>

#include "graph/graph.h"

#define NODE_TESTS "/usr/include/onnx/backend/test/data/node"

/* True when the test data is installed; under CI its absence fails the test (install-deps
 * installs it, and CI must not pass by skipping). */
bool tt_test_have_onnx_testdata(void);

/* The int64 inputs of data set 0 of node test directory `dir` and Resize's float "scales" and
 * "roi", up to `max`, as a deployment fixes them; returns the count.
 * Free them with tt_test_free_tensors. */
int tt_test_bind_int_inputs(const char *dir, tt_gtensor *bind, int max);
void tt_test_free_tensors(tt_gtensor *t, int n);

#endif
