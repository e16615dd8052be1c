/* Clocks and small statistics shared by the runner, the tuner, the database and the benchmarks. */
#ifndef TT_BASE_CLOCK_H
#define TT_BASE_CLOCK_H

/* Seconds on a monotonic clock (for durations). Thread-safe. */
double tt_clock_monotonic(void);
/* Unix time in seconds (for timestamps). Thread-safe. */
double tt_clock_wall(void);
/* Median of n values (mean of the middle two when n is even); 0 when n <= 0.  The input is not
 * modified.  Thread-safe. */
double tt_median(const double *v, int n);
/* The smallest positive of n values: a measurement's fastest sample (decision 56), where a
 * sample of 0 is no time at all; 0 when there is none.  Thread-safe. */
double tt_fastest(const double *v, int n);

#endif
