/* Loading kernel libraries (the small part that devices link): shared objects through dlopen(),
 * relocatable objects in memory (object_loader.c). */
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_int.h"
#include "pool.h"

struct tt_kernel {
    void *handle;            /* dlopen()ed, or NULL */
    tt__object_image object; /* loaded in memory, or empty */
    tt_kernel_fn fn;
    char release_name[300]; /* <entry>.ws.release */
};

bool tt__is_relocatable_object(const char *path)
{
    unsigned char h[18];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(h, 1, sizeof(h), f) : 0;
    if (f)
        fclose(f);
    return n == sizeof(h) && !memcmp(h, ELFMAG, SELFMAG) && h[EI_DATA] == ELFDATA2LSB &&
           h[16] == ET_REL && h[17] == 0;
}

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
    if (tt__is_relocatable_object(so_path)) {
        tt_status s = tt__kernel_load_object(so_path, entry, &k->object, err);
        if (s) {
            free(k);
            return s;
        }
        *(void **)&k->fn = k->object.fn;
        *out = k;
        return TT_OK;
    }
    snprintf(k->release_name, sizeof(k->release_name), "%s%s", entry, TT_WS_RELEASE_SUFFIX);
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

/* The pool's entry points as `scope` resolves them; false when it does not. */
static bool pool_in(void *scope, tt_kernel_pool *p)
{
    *(void **)&p->parallel = dlsym(scope, "tt_rt1_parallel");
    *(void **)&p->thread_num = dlsym(scope, "tt_rt1_thread_num");
    *(void **)&p->num_threads = dlsym(scope, "tt_rt1_num_threads");
    return p->parallel && p->thread_num && p->num_threads;
}

tt_kernel_pool tt_kernel_pool_of(const tt_kernel *k)
{
    /* As the dynamic loader bound the kernel's calls: a definition in the global scope (this
     * process exports its own, CMakeLists.txt) before the library's. */
    tt_kernel_pool p;
    if (k->handle && (pool_in(RTLD_DEFAULT, &p) || pool_in(k->handle, &p)))
        return p;
    return (tt_kernel_pool){tt_rt1_parallel, tt_rt1_thread_num, tt_rt1_num_threads};
}

void tt_kernel_unload(tt_kernel *k)
{
    if (!k)
        return;
    if (k->handle) {
        void (*release)(void);
        *(void **)&release = dlsym(k->handle, k->release_name);
        if (release)
            release();
        dlclose(k->handle);
    }
    tt__kernel_unload_object(&k->object);
    free(k);
}
