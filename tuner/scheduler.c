#include "scheduler.h"

#include <math.h>

#define NO_COST 1e10 /* Ansor's cost of a task with nothing valid yet */

static double best_of(const tt_sched_task *t)
{
    return t->best_s > 0 ? t->best_s : NO_COST;
}

double tt_sched_gradient(const tt_sched_task *tasks, int n, int i, double alpha, double beta)
{
    const tt_sched_task *t = &tasks[i];
    if (t->dead)
        return 0;
    double best = best_of(t);
    /* d(sum_j w_j best_j) / d best_i */
    double chain = t->weight;
    double backward = 0;
    if (t->rounds - 4 >= 0) {
        double a = t->hist[t->rounds - 1] > 0 ? t->hist[t->rounds - 1] : NO_COST;
        double b = t->hist[t->rounds - 4] > 0 ? t->hist[t->rounds - 4] : NO_COST;
        backward = (a - b) / 3;
    }
    double g1 = t->rounds > 0 ? best - best / t->rounds : 0;
    double g2 = beta * 1e30;
    if (t->group >= 0) {
        int members = 0;
        double max_speed = 0;
        for (int j = 0; j < n; j++) {
            if (tasks[j].group != t->group)
                continue;
            members++;
            double speed = tasks[j].flops / best_of(&tasks[j]);
            max_speed = speed > max_speed ? speed : max_speed;
        }
        if (members > 1 && max_speed > 0)
            g2 = beta * t->flops / max_speed;
    }
    double forward = (g1 < g2 ? g1 : g2) - best;
    return chain * (alpha * backward + (1 - alpha) * forward);
}

int tt_sched_pick(const tt_sched_task *tasks, int n, tt_sched_policy policy, int last, tt_rng *rng)
{
    if (policy == TT_SCHED_ROUND_ROBIN) {
        for (int k = 1; k <= n; k++) {
            int i = ((last < 0 ? -1 : last) + k) % n;
            if (!tasks[i].dead)
                return i;
        }
        return -1;
    }
    double g[1024];
    int live = 0;
    for (int i = 0; i < n && i < 1024; i++) {
        g[i] = tt_sched_gradient(tasks, n, i, TT_SCHED_ALPHA, TT_SCHED_BETA);
        live += !tasks[i].dead;
    }
    if (!live)
        return -1;
    int best = -1;
    bool all_equal = true;
    for (int i = 0; i < n && i < 1024; i++) {
        if (tasks[i].dead)
            continue;
        if (best >= 0 && g[i] != g[best])
            all_equal = false;
        if (best < 0 || g[i] < g[best])
            best = i;
    }
    if (all_equal && live > 1) {
        int k = (int)tt_rng_below(rng, (uint64_t)live);
        for (int i = 0; i < n; i++)
            if (!tasks[i].dead && k-- == 0)
                return i;
    }
    return best;
}

int tt_sched_similarity_bucket(double flops)
{
    return (int)(log(flops + 1) / log(1.618));
}

void tt_sched_update_groups(tt_sched_task *tasks, int n, int i, double beta)
{
    tt_sched_task *t = &tasks[i];
    if (t->group < 0)
        return;
    double best_speed = 0;
    int max_rounds = 0, members = 0;
    for (int j = 0; j < n; j++) {
        if (tasks[j].group != t->group)
            continue;
        members++;
        double speed = tasks[j].flops / best_of(&tasks[j]);
        best_speed = speed > best_speed ? speed : best_speed;
        if (j != i && tasks[j].rounds > max_rounds)
            max_rounds = tasks[j].rounds;
    }
    double speed = t->flops / best_of(t);
    if (members > 1 && speed < best_speed / beta && t->rounds > 5 + max_rounds)
        t->group = -1;
}
