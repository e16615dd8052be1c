/* Fuzz target: ONNX import (protobuf parse, graph building, shape inference) and, for what
 * imports, the partition into kernels (folding, fusion, te: programs that must parse, the memory
 * plan) on arbitrary bytes must return a status, never crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>

#include "graph/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tt_graph *g = NULL;
    tt_errbuf err = {{0}};
    tt_graph_options o = {NULL, 0, 1 << 20, NULL, 0};
    if (tt_graph_import_onnx_bytes(data, size, "fuzz.onnx", &o, &g, &err) == TT_OK) {
        tt_net *net = NULL;
        if (tt_net_build(g, NULL, &net, &err) == TT_OK)
            tt_net_free(net);
        tt_graph_free(g);
    }
    return 0;
}
