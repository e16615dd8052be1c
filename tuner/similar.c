/* Tuned configs of similar workloads (similar.h). */
#include "similar.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARAMS   32
#define CANDIDATES   8  /* nearest workloads consulted */
#define PER_WORKLOAD 16 /* best records read to find a shape's best template configs */

typedef struct {
    char name[32], value[64];
} param;

size_t tt_workload_op_length(const char *key)
{
    const char *c = strchr(key, ':');
    return c && strncmp(key, "te:", 3) ? (size_t)(c - key) : 0;
}

static int parse_params(const char *key, param *out)
{
    int n = 0;
    for (const char *p = strchr(key, ':') + 1; *p && n < MAX_PARAMS;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        if (eq) {
            snprintf(out[n].name, sizeof(out[n].name), "%.*s", (int)(eq - p), p);
            snprintf(out[n].value, sizeof(out[n].value), "%.*s", (int)(p + len - eq - 1), eq + 1);
            n++;
        }
        p += len + (p[len] == ',');
    }
    return n;
}

static bool number(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end;
}

/* The distance from a's parameters to b's, counting a's side only. */
static double one_way(const param *a, int na, const param *b, int nb)
{
    double d = 0;
    for (int i = 0; i < na; i++) {
        int j = 0;
        while (j < nb && strcmp(a[i].name, b[j].name))
            j++;
        double x, y;
        if (j == nb)
            d += 8;
        else if (number(a[i].value, &x) && number(b[j].value, &y) && x > -1 && y > -1)
            d += fabs(log((x + 1) / (y + 1)));
        else if (strcmp(a[i].value, b[j].value))
            d += 8;
    }
    return d;
}

double tt_workload_distance(const char *a, const char *b)
{
    size_t n = tt_workload_op_length(a);
    if (!n || tt_workload_op_length(b) != n || strncmp(a, b, n))
        return -1;
    param pa[MAX_PARAMS], pb[MAX_PARAMS];
    int na = parse_params(a, pa), nb = parse_params(b, pb);
    /* a's parameters against b's, then those only b has */
    double d = one_way(pa, na, pb, nb);
    for (int j = 0; j < nb; j++) {
        int i = 0;
        while (i < na && strcmp(pa[i].name, pb[j].name))
            i++;
        d += i == na ? 8 : 0;
    }
    return d;
}

/* The template index of record `row` when it is of the space with signature `sig` (size
 * `size`). */
static bool record_index(const tt_db_row *row, const char *sig, uint64_t size, uint64_t *index)
{
    if (!row->extra)
        return false;
    json_t *j = json_loads(row->extra, 0, NULL);
    const char *s = json_string_value(json_object_get(j, "space"));
    json_t *ix = json_object_get(j, "index");
    bool ok = s && !strcmp(s, sig) && json_is_integer(ix) && json_integer_value(ix) >= 0 &&
              (uint64_t)json_integer_value(ix) < size;
    if (ok)
        *index = (uint64_t)json_integer_value(ix);
    json_decref(j);
    return ok;
}

int tt_similar_best_of(tt_db *db, const char *key, const char *target, const char *device,
                       const tt_space *sp, tt_similar *out, int max)
{
    char sig[64];
    tt_space_signature(sp, sig, sizeof(sig));
    tt_db_row *rows = NULL;
    size_t n = 0;
    int found = 0;
    if (tt_db_best(db, key, target, device, PER_WORKLOAD, false, &rows, &n))
        return 0;
    for (size_t i = 0; i < n && found < max; i++) {
        uint64_t index;
        if (rows[i].config_kind != TT_CONFIG_STEPS ||
            !record_index(&rows[i], sig, sp->size, &index))
            continue; /* not of its template space */
        int k = 0;
        while (k < found && out[k].index != index)
            k++;
        if (k < found)
            continue; /* the config measured again */
        tt_similar *o = &out[found++];
        snprintf(o->workload, sizeof(o->workload), "%s", key);
        o->record = rows[i].id;
        o->fastest_s = rows[i].fastest_s;
        o->distance = 0;
        o->index = index;
    }
    tt_db_rows_free(rows, n);
    return found;
}

/* The best record of workload `key` that is a template config of its current space, mapped into
 * `space`; false when it has none. */
static bool mapped_best(tt_db *db, const char *key, const char *target, const char *device,
                        const tt_space *space, int cores, const tt_vector_isa *isa, tt_similar *out)
{
    tt_workload *w;
    if (tt_workload_parse(key, &w, NULL))
        return false;
    tt_space sp;
    bool found = !tt_space_init(&sp, &w->dag, cores, isa, NULL) &&
                 tt_similar_best_of(db, key, target, device, &sp, out, 1) == 1;
    if (found)
        out->index = tt_space_nearest_index(space, &sp, out->index);
    tt_workload_free(w);
    return found;
}

tt_status tt_similar_workloads(tt_db *db, const char *target, const char *key, char **out, int max,
                               int *count, tt_errbuf *err)
{
    *count = 0;
    tt_db_best_entry *e;
    size_t n;
    tt_status s = tt_db_leaderboard(db, 0, &e, &n);
    if (s)
        return tt_err(err, s, "%s", tt_db_errmsg(db));
    double *dist = malloc(sizeof(double) * (size_t)(max > 0 ? max : 1));
    if (!dist) {
        tt_db_leaderboard_free(e, n);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    int kept = 0;
    for (size_t i = 0; i < n && max > 0; i++) {
        double d = strcmp(e[i].target, target) ? -1 : tt_workload_distance(key, e[i].workload);
        if (d <= 0 || (kept == max && dist[max - 1] <= d))
            continue; /* another operator or target, this workload itself, or farther */
        char *copy = strdup(e[i].workload);
        if (!copy)
            break;
        if (kept == max) /* the farthest kept makes room */
            free(out[--kept]);
        int at = kept++;
        while (at > 0 && dist[at - 1] > d) {
            out[at] = out[at - 1];
            dist[at] = dist[at - 1];
            at--;
        }
        out[at] = copy;
        dist[at] = d;
        *count = kept;
    }
    free(dist);
    tt_db_leaderboard_free(e, n);
    return TT_OK;
}

tt_status tt_similar_config(tt_db *db, const char *target, const char *device, const tt_workload *w,
                            const tt_space *space, int cores, const tt_vector_isa *isa,
                            tt_similar *out, tt_errbuf *err)
{
    memset(out, 0, sizeof(*out));
    if (!tt_workload_op_length(w->key) || space->gpu)
        return tt_err(err, TT_ERR_NOT_FOUND, "no similar workload of %s", w->key);
    char *near[CANDIDATES];
    int nnear;
    tt_status s = tt_similar_workloads(db, target, w->key, near, CANDIDATES, &nnear, err);
    if (s)
        return s;
    bool found = false;
    for (int k = 0; k < nnear; k++) {
        if (!found && mapped_best(db, near[k], target, device, space, cores, isa, out)) {
            out->distance = tt_workload_distance(w->key, near[k]);
            found = true;
        }
        free(near[k]);
    }
    return found ? TT_OK
                 : tt_err(err, TT_ERR_NOT_FOUND, "no tuned template config of a workload like %s",
                          w->key);
}
