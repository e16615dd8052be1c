/* Loading kernel libraries (the small part that devices link). */
#include <dlfcn.h>
#include <stdlib.h>

#include "loader.h"

struct tt_kernel {
    void *handle;
    tt_kernel_fn fn;
};

tt_status tt_kernel_load(const char *so_path, const char *entry, tt_kernel **out, tt_errbuf *err)
{
    *out = NULL;
    tt_kernel *k = calloc(1, sizeof(*k));
    if (!k)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    /* Cross-compiled kernels do not name their runtime (the build machine cannot link the
     * device's libraries): what they call comes from the device's libm and libgomp, made global
     * here.  A kernel that needs one the device lacks fails to load, with dlerror's reason. */
    static const char *const runtime[] = {"libm.so.6", "libgomp.so.1"};
    for (size_t i = 0; i < sizeof(runtime) / sizeof(runtime[0]); i++)
        dlopen(runtime[i], RTLD_NOW | RTLD_GLOBAL);
    k->handle = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!k->handle) {
        const char *m = dlerror();
        free(k);
        return tt_err(err, TT_ERR_IO, "loading %s: %s", so_path, m ? m : "?");
    }
    *(void **)&k->fn = dlsym(k->handle, entry);
    if (!k->fn) {
        dlclose(k->handle);
        free(k);
        return tt_err(err, TT_ERR_IO, "%s has no function '%s'", so_path, entry);
    }
    *out = k;
    return TT_OK;
}

tt_kernel_fn tt_kernel_function(const tt_kernel *k)
{
    return k->fn;
}

void tt_kernel_unload(tt_kernel *k)
{
    if (!k)
        return;
    dlclose(k->handle);
    free(k);
}
