/* Kernels that misbehave on purpose, for the measurement sandbox tests.  Each follows the kernel
 * ABI: int32_t f(void *const *args); args = {float a[n], float out[n]} with n = 1024. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N 1024

int32_t good(void *const *args);
int32_t wrong(void *const *args);
int32_t crash(void *const *args);
int32_t aborts(void *const *args);
int32_t hangs(void *const *args);
int32_t hogs(void *const *args);
int32_t fails(void *const *args);

int32_t good(void *const *args)
{
    const float *a = args[0];
    float *out = args[1];
    for (int i = 0; i < N; i++)
        out[i] = a[i] * 2.0f;
    return 0;
}

int32_t wrong(void *const *args)
{
    good(args);
    ((float *)args[1])[N - 1] += 1.0f;
    return 0;
}

int32_t crash(void *const *args)
{
    volatile int *p = (volatile int *)(uintptr_t)16;
    *p = 1;
    return 0;
}

int32_t aborts(void *const *args)
{
    abort();
}

int32_t hangs(void *const *args)
{
    for (volatile unsigned long i = 0;; i++)
        ;
    return 0;
}

int32_t hogs(void *const *args)
{
    /* Allocates without end; a memory limit turns this into a failed allocation, then a crash. */
    for (;;) {
        char *p = malloc(64 << 20);
        if (!p)
            raise(SIGSEGV);
        memset(p, 1, 64 << 20);
    }
    return 0;
}

int32_t fails(void *const *args)
{
    return 7;
}
