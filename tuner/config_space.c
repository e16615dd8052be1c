#include "config_space.h"

#include <stdlib.h>
#include <string.h>

void tt_cs_init(tt_config_space *cs)
{
    memset(cs, 0, sizeof(*cs));
}

void tt_cs_free(tt_config_space *cs)
{
    for (int k = 0; k < cs->nknobs; k++)
        free(cs->knobs[k].ent);
    memset(cs, 0, sizeof(*cs));
}

typedef struct {
    int64_t *v;
    int n, cap, width;
} ent_list;

static bool ent_push(ent_list *l, const int64_t *e)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        int64_t *g = realloc(l->v, sizeof(int64_t) * (size_t)cap * (size_t)l->width);
        if (!g)
            return false;
        l->v = g;
        l->cap = cap;
    }
    memcpy(l->v + (size_t)l->n * (size_t)l->width, e, sizeof(int64_t) * (size_t)l->width);
    l->n++;
    return true;
}

static tt_status add_knob(tt_config_space *cs, const char *name, tt_knob_kind kind, ent_list *l,
                          tt_errbuf *err)
{
    if (cs->nknobs == TT_CS_MAX_KNOBS) {
        free(l->v);
        return tt_err(err, TT_ERR_LIMIT, "more than %d knobs", TT_CS_MAX_KNOBS);
    }
    if (l->n == 0) {
        free(l->v);
        return tt_err(err, TT_ERR_INVALID_ARG, "knob '%s' has no entity", name);
    }
    tt_cknob *k = &cs->knobs[cs->nknobs++];
    snprintf(k->name, sizeof(k->name), "%s", name);
    k->kind = kind;
    k->width = l->width;
    k->count = l->n;
    k->ent = l->v;
    return TT_OK;
}

/* ---- split ---- */

/* CPython's set table (Objects/setobject.c): small ints hash to themselves; linear probing of 9
 * slots, then perturbation; the table grows to the smallest power of two above 4x the entries
 * when it is 60% full.  Iterating the table gives TVM's "verbose" order. */
typedef struct {
    int64_t *slot; /* 0 = empty (keys are positive) */
    size_t mask, fill;
} pyset;

static void pyset_insert_clean(int64_t *table, size_t mask, int64_t key)
{
    size_t perturb = (size_t)key, i = (size_t)key & mask;
    for (;;) {
        if (!table[i]) {
            table[i] = key;
            return;
        }
        if (i + 9 <= mask)
            for (size_t j = 1; j <= 9; j++)
                if (!table[i + j]) {
                    table[i + j] = key;
                    return;
                }
        perturb >>= 5;
        i = (i * 5 + 1 + perturb) & mask;
    }
}

static bool pyset_add(pyset *s, int64_t key)
{
    size_t perturb = (size_t)key, i = (size_t)key & s->mask;
    for (;;) {
        size_t probes = i + 9 <= s->mask ? 9 : 0;
        for (size_t j = 0; j <= probes; j++) {
            int64_t e = s->slot[i + j];
            if (e == key)
                return true;
            if (!e) {
                s->slot[i + j] = key;
                s->fill++;
                goto added;
            }
        }
        perturb >>= 5;
        i = (i * 5 + 1 + perturb) & s->mask;
    }
added:
    if (s->fill * 5 < s->mask * 3)
        return true;
    size_t size = 8;
    while (size <= s->fill * 4)
        size <<= 1;
    int64_t *t = calloc(size, sizeof(int64_t));
    if (!t)
        return false;
    for (size_t k = 0; k <= s->mask; k++)
        if (s->slot[k])
            pyset_insert_clean(t, size - 1, s->slot[k]);
    free(s->slot);
    s->slot = t;
    s->mask = size - 1;
    return true;
}

int tt_cs_verbose_factors(int64_t len, int64_t *out, int max)
{
    pyset s = {calloc(8, sizeof(int64_t)), 7, 0};
    int n = 0;
    if (!s.slot)
        return 0;
    for (int64_t d = 1; d <= len; d++)
        if (len % d == 0 && !pyset_add(&s, d))
            goto out;
    for (int64_t p = 1; p <= len; p *= 2)
        if (!pyset_add(&s, p))
            goto out;
    for (size_t k = 0; k <= s.mask; k++)
        if (s.slot[k] && n < max)
            out[n++] = s.slot[k];
out:
    free(s.slot);
    return n;
}

static int factor_list(int64_t len, tt_split_policy policy, int64_t max_factor, int64_t *out,
                       int max)
{
    int n = 0;
    if (policy == TT_SPLIT_FACTORS) {
        for (int64_t d = 1; d <= len && n < max; d++)
            if (len % d == 0 && d <= max_factor)
                out[n++] = d;
    } else if (policy == TT_SPLIT_POWER2) {
        for (int64_t p = 1; p <= len && n < max; p *= 2)
            if (p <= max_factor)
                out[n++] = p;
    } else {
        int64_t all[4096];
        int k = tt_cs_verbose_factors(len, all, 4096);
        for (int i = 0; i < k && n < max; i++)
            if (all[i] <= max_factor)
                out[n++] = all[i];
    }
    return n;
}

typedef struct {
    int64_t len, max_last;
    int n;
    bool no_tail;
    const int64_t *f;
    int nf;
    int64_t s[16];
    ent_list *out;
    bool oom;
} split_ctx;

static void split_dfs(split_ctx *c, int depth, int64_t prod)
{
    if (c->oom)
        return;
    if (depth == c->n - 1) {
        if (prod > c->len || !(c->len % prod == 0 || (!c->no_tail && prod < c->len)))
            return;
        int64_t e[16];
        e[0] = -1;
        for (int i = 1; i < c->n; i++)
            e[i] = c->s[c->n - 1 - i];
        if (c->max_last > 0 && e[c->n - 1] > c->max_last)
            return;
        c->oom |= !ent_push(c->out, e);
        return;
    }
    for (int i = 0; i < c->nf; i++) {
        if (c->f[i] > c->len / prod) /* the product would exceed the length: never accepted */
            continue;
        c->s[depth] = c->f[i];
        split_dfs(c, depth + 1, prod * c->f[i]);
    }
}

tt_status tt_cs_define_split(tt_config_space *cs, const char *name, int64_t len,
                             tt_split_policy policy, int n, int64_t max_factor,
                             const int64_t *candidates, int ncandidates, int64_t max_last,
                             tt_errbuf *err)
{
    if (len < 1 || n < 1 || n > 15)
        return tt_err(err, TT_ERR_INVALID_ARG, "split '%s': length %lld into %d parts", name,
                      (long long)len, n);
    ent_list l = {NULL, 0, 0, n};
    if (policy == TT_SPLIT_CANDIDATE) {
        for (int i = 0; i < ncandidates; i++) {
            const int64_t *e = candidates + (size_t)i * (size_t)n;
            if ((max_last <= 0 || e[n - 1] <= max_last) && !ent_push(&l, e)) {
                free(l.v);
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
            }
        }
        return add_knob(cs, name, TT_KNOB_SPLIT, &l, err);
    }
    int64_t f[4096];
    int nf = factor_list(len, policy, max_factor > 0 ? max_factor : INT64_MAX, f, 4096);
    split_ctx c = {len, max_last, n, policy == TT_SPLIT_FACTORS, f, nf, {0}, &l, false};
    split_dfs(&c, 0, 1);
    if (c.oom) {
        free(l.v);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    return add_knob(cs, name, TT_KNOB_SPLIT, &l, err);
}

/* ---- reorder, annotate, other ---- */

static bool next_permutation(int64_t *a, int n)
{
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1])
        i--;
    if (i < 0)
        return false;
    int j = n - 1;
    while (a[j] <= a[i])
        j--;
    int64_t t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l];
        a[l] = a[r];
        a[r] = t;
    }
    return true;
}

tt_status tt_cs_define_reorder(tt_config_space *cs, const char *name, int naxes, bool all,
                               tt_errbuf *err)
{
    if (naxes < 1 || naxes > 9)
        return tt_err(err, TT_ERR_INVALID_ARG, "reorder '%s': %d axes (1 to 9)", name, naxes);
    ent_list l = {NULL, 0, 0, naxes};
    int64_t p[16];
    for (int i = 0; i < naxes; i++)
        p[i] = i;
    do {
        if (!ent_push(&l, p)) {
            free(l.v);
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        }
    } while (all && next_permutation(p, naxes));
    return add_knob(cs, name, TT_KNOB_REORDER, &l, err);
}

static void annotate_dfs(const int64_t *choice, int nchoice, int naxes, int depth, int nvec,
                         int64_t *cur, ent_list *l, bool *oom)
{
    if (*oom)
        return;
    if (depth == naxes) {
        *oom |= !ent_push(l, cur);
        return;
    }
    for (int i = 0; i < nchoice; i++) {
        int v = nvec + (choice[i] == TT_AN_VEC);
        if (v > 1)
            continue;
        cur[depth] = choice[i];
        annotate_dfs(choice, nchoice, naxes, depth + 1, v, cur, l, oom);
    }
}

tt_status tt_cs_define_annotate(tt_config_space *cs, const char *name, int naxes,
                                const char *policy, tt_errbuf *err)
{
    if (naxes < 1 || naxes > 12)
        return tt_err(err, TT_ERR_INVALID_ARG, "annotate '%s': %d axes (1 to 12)", name, naxes);
    int64_t choice[8];
    int nchoice = 0;
    for (const char *p = policy; *p && nchoice < 8;) {
        size_t w = strcspn(p, "_");
        if (w == 3 && !strncmp(p, "try", 3))
            choice[nchoice++] = TT_AN_NONE;
        else if (w == 4 && !strncmp(p, "none", 4))
            choice[nchoice++] = TT_AN_NONE;
        else if (w == 6 && !strncmp(p, "unroll", 6))
            choice[nchoice++] = TT_AN_UNROLL;
        else if (w == 3 && !strncmp(p, "vec", 3))
            choice[nchoice++] = TT_AN_VEC;
        else
            return tt_err(err, TT_ERR_INVALID_ARG,
                          "annotate '%s': unknown policy word '%.*s' (none, try, unroll, vec)",
                          name, (int)w, p);
        p += w;
        if (*p == '_')
            p++;
    }
    ent_list l = {NULL, 0, 0, naxes};
    int64_t cur[16];
    bool oom = false;
    annotate_dfs(choice, nchoice, naxes, 0, 0, cur, &l, &oom);
    if (oom) {
        free(l.v);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    return add_knob(cs, name, TT_KNOB_ANNOTATE, &l, err);
}

tt_status tt_cs_define_knob(tt_config_space *cs, const char *name, const int64_t *values, int n,
                            tt_errbuf *err)
{
    ent_list l = {NULL, 0, 0, 1};
    for (int i = 0; i < n; i++)
        if (!ent_push(&l, &values[i])) {
            free(l.v);
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        }
    return add_knob(cs, name, TT_KNOB_OTHER, &l, err);
}

/* ---- indices ---- */

uint64_t tt_cs_size(const tt_config_space *cs)
{
    uint64_t size = 1;
    for (int k = 0; k < cs->nknobs; k++) {
        uint64_t c = (uint64_t)cs->knobs[k].count;
        if (size > UINT64_MAX / c)
            return UINT64_MAX;
        size *= c;
    }
    return size;
}

void tt_cs_decode(const tt_config_space *cs, uint64_t index, int *pos)
{
    for (int k = 0; k < cs->nknobs; k++) {
        uint64_t c = (uint64_t)cs->knobs[k].count;
        pos[k] = (int)(index % c);
        index /= c;
    }
}

uint64_t tt_cs_encode(const tt_config_space *cs, const int *pos)
{
    uint64_t index = 0, mul = 1;
    for (int k = 0; k < cs->nknobs; k++) {
        index += (uint64_t)pos[k] * mul;
        mul *= (uint64_t)cs->knobs[k].count;
    }
    return index;
}

const int64_t *tt_cs_entity(const tt_config_space *cs, int k, uint64_t index)
{
    int pos[TT_CS_MAX_KNOBS];
    tt_cs_decode(cs, index, pos);
    const tt_cknob *kn = &cs->knobs[k];
    return kn->ent + (size_t)pos[k] * (size_t)kn->width;
}

int tt_cs_find(const tt_config_space *cs, const char *name)
{
    for (int k = 0; k < cs->nknobs; k++)
        if (!strcmp(cs->knobs[k].name, name))
            return k;
    return -1;
}

char *tt_cs_entity_json(const tt_config_space *cs, uint64_t index)
{
    static const char *const an_names[] = {
        "none",        "vec",         "unroll",      "blockIdx.x", "blockIdx.y", "blockIdx.z",
        "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread",    "fuse"};
    static const char *const tags[] = {"sp", "re", "an", "ot"};
    tt_strbuf sb = {0};
    tt_strbuf_append(&sb, "[");
    for (int k = 0; k < cs->nknobs; k++) {
        const tt_cknob *kn = &cs->knobs[k];
        const int64_t *e = tt_cs_entity(cs, k, index);
        tt_strbuf_printf(&sb, "%s[\"%s\", \"%s\", ", k ? ", " : "", kn->name, tags[kn->kind]);
        if (kn->kind == TT_KNOB_OTHER) {
            tt_strbuf_printf(&sb, "%lld]", (long long)e[0]);
            continue;
        }
        tt_strbuf_append(&sb, "[");
        for (int i = 0; i < kn->width; i++) {
            if (kn->kind == TT_KNOB_ANNOTATE)
                tt_strbuf_printf(&sb, "%s\"%s\"", i ? ", " : "",
                                 e[i] >= 0 && e[i] <= 10 ? an_names[e[i]] : "none");
            else
                tt_strbuf_printf(&sb, "%s%lld", i ? ", " : "", (long long)e[i]);
        }
        tt_strbuf_append(&sb, "]]");
    }
    tt_strbuf_append(&sb, "]");
    return tt_strbuf_take(&sb);
}

void tt_cs_fallback_split(int64_t len, const int64_t *limits, int n, int64_t *out)
{
    int64_t rest = len;
    for (int i = n - 1; i >= 1; i--) {
        int64_t lim = limits[i] < 0 ? rest : limits[i], best = 1;
        for (int64_t d = 1; d <= rest && d <= lim; d++)
            if (rest % d == 0)
                best = d;
        out[i] = best;
        rest /= best;
    }
    out[0] = rest;
}
