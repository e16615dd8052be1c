/* Training labels from measured throughputs (costmodel.h tt_costmodel_labels). */
#include <stdlib.h>

#include "costmodel.h"

typedef struct {
    double thr;
    int group, i;
} entry;

static int by_group_then_throughput(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    if (x->thr != y->thr)
        return x->thr < y->thr ? -1 : 1;
    return x->i - y->i;
}

tt_status tt_costmodel_labels(tt_costmodel_labels_kind kind, const double *throughput,
                              const int *group, int n, float *y, tt_errbuf *err)
{
    if (n <= 0)
        return TT_OK;
    entry *e = malloc(sizeof(entry) * (size_t)n);
    if (!e)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        e[i] = (entry){throughput[i] > 0 ? throughput[i] : 0, group[i], i};
    qsort(e, (size_t)n, sizeof(entry), by_group_then_throughput);
    for (int lo = 0; lo < n;) {
        int hi = lo;
        while (hi < n && e[hi].group == e[lo].group)
            hi++;
        /* [lo, hi): one group, slowest first; failures (0) sort first */
        int first = lo;
        while (first < hi && e[first].thr <= 0)
            y[e[first++].i] = 0;
        int count = hi - first;
        double best = count ? e[hi - 1].thr : 0;
        for (int k = first; k < hi;) {
            int tie = k;
            while (tie < hi && e[tie].thr == e[k].thr)
                tie++;
            /* equal throughputs share their mean rank */
            double rank = (double)(k - first + tie - 1 - first) / 2.0;
            float v =
                kind == TT_LABELS_RANK ? (float)((rank + 1.0) / count) : (float)(e[k].thr / best);
            for (int j = k; j < tie; j++)
                y[e[j].i] = v;
            k = tie;
        }
        lo = hi;
    }
    free(e);
    return TT_OK;
}
