/* Fuzz target: the OpenCL artifact's metadata (codegen/cl_artifact.h), as tvm-measure-cl reads
 * it from whatever a client sent: every field checked, limits enforced, and what parses writes
 * back to a header that parses to the same metadata. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cl_artifact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    static tt_cl_artifact a, b;
    tt_errbuf err;
    if (tt_cl_artifact_parse((const char *)data, size, &a, &err) != TT_OK)
        return 0;
    if (a.nkernels < 1 || a.nkernels > TT_CL_MAX_KERNELS || a.nparams > TT_CL_MAX_BUFFERS)
        abort();
    char *h = tt_cl_artifact_header(&a);
    if (!h)
        return 0;
    if (tt_cl_artifact_parse(h, strlen(h), &b, &err) != TT_OK || b.nkernels != a.nkernels ||
        b.nparams != a.nparams || b.nworkspace != a.nworkspace)
        abort();
    for (int k = 0; k < a.nkernels; k++)
        if (strcmp(a.kernels[k].name, b.kernels[k].name) ||
            memcmp(a.kernels[k].grid, b.kernels[k].grid, sizeof(a.kernels[k].grid)) ||
            memcmp(a.kernels[k].block, b.kernels[k].block, sizeof(a.kernels[k].block)))
            abort();
    free(h);
    return 0;
}
