/* Tuning curves as SVG (tvm-db plot): best GFLOPS so far against the trials measured, one line
 * per series (a job, or a target and device of a workload).  Pure: the caller gathers the
 * points. */
#ifndef TT_DB_PLOT_H
#define TT_DB_PLOT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tt_plot_series {
    char label[160];
    double *best; /* best GFLOPS after trial i + 1 (0: nothing error-free yet) */
    size_t n;
} tt_plot_series;

/* Appends one measured trial (gflops 0: an error) as the best so far; false when out of memory.
 * tt_plot_series_clear frees the points. */
bool tt_plot_series_push(tt_plot_series *s, double gflops);
void tt_plot_series_clear(tt_plot_series *s);
/* A self-contained SVG document (800 x 480) with axes, ticks, a legend and `title`.  Caller
 * frees; NULL when out of memory. */
char *tt_plot_svg(const tt_plot_series *s, int n, const char *title);

#endif
