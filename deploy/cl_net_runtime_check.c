/* Compiles the OpenCL network runtime (cl_net_runtime.c) with the project's warnings, as a
 * generated library uses it: tvm-compile embeds its text, never this object. */
#include "cl_net_runtime.c"

int tt__cl_net_runtime_check(tt_clnet *n, const void *const *in, void *const *out, double *s);
int tt__cl_net_runtime_check(tt_clnet *n, const void *const *in, void *const *out, double *s)
{
    int rc = tt_clnet_init(n);
    if (!rc)
        rc = tt_clnet_run(n, in, out, s);
    tt_clnet_release(n);
    return rc;
}
