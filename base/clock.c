#include "clock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double tt_clock_monotonic(void)
{
    return seconds(CLOCK_MONOTONIC);
}

double tt_clock_wall(void)
{
    return seconds(CLOCK_REALTIME);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double tt_fastest(const double *v, int n)
{
    double fastest = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > 0 && (fastest == 0 || v[i] < fastest))
            fastest = v[i];
    return fastest;
}

double tt_median(const double *v, int n)
{
    if (n <= 0)
        return 0;
    double small[64], *s = n <= 64 ? small : malloc(sizeof(double) * (size_t)n);
    if (!s) {
        /* Out of memory: the mean is the best answer without a copy. */
        double sum = 0;
        for (int i = 0; i < n; i++)
            sum += v[i];
        return sum / n;
    }
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    if (s != small)
        free(s);
    return m;
}
