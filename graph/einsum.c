/* Einsum's equation (ONNX opset 12, numpy's notation): each operand's subscripts and the
 * output's, with the ellipsis expanded into labels of its own, so that shape inference and the
 * tensor-expression writer read one resolved form. */
#include <stdio.h>
#include <string.h>

#include "graph_int.h"

/* Labels: letters stand for themselves; the k-th dimension of the ellipsis (counted from the
 * left of the widest one) is the byte 1 + k. */
static bool is_letter(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* One term ("ij", "...j", "b...") into labels, given the operand's rank (-1 for the output,
 * whose ellipsis is the widest operand's).  *has_ellipsis says whether it had one. */
static bool parse_term(const char *t, size_t n, int rank, int ell, char *labels, int *nlabels,
                       bool *has_ellipsis, char *why, size_t whylen)
{
    int letters = 0;
    *has_ellipsis = false;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == ' ')
            continue;
        if (t[i] == '.') {
            if (*has_ellipsis || i + 2 >= n || t[i + 1] != '.' || t[i + 2] != '.') {
                snprintf(why, whylen, "'%.*s' has a stray '.' or two ellipses", (int)n, t);
                return false;
            }
            *has_ellipsis = true;
            i += 2;
            continue;
        }
        if (!is_letter(t[i])) {
            snprintf(why, whylen, "'%c' in '%.*s' is not a letter", t[i], (int)n, t);
            return false;
        }
        letters++;
    }
    int width = rank < 0 ? ell : rank - letters; /* dimensions the ellipsis covers */
    if (rank >= 0 && (width < 0 || (!*has_ellipsis && width != 0))) {
        snprintf(why, whylen, "'%.*s' names %d dimensions of an operand of rank %d", (int)n, t,
                 letters, rank);
        return false;
    }
    if (!*has_ellipsis)
        width = 0;
    if (letters + width > TT_GRAPH_MAX_RANK) {
        snprintf(why, whylen, "'%.*s' has more than %d dimensions", (int)n, t, TT_GRAPH_MAX_RANK);
        return false;
    }
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == ' ')
            continue;
        if (t[i] == '.') {
            /* right-aligned in the widest ellipsis, as numpy broadcasts */
            for (int e = 0; e < width; e++)
                labels[k++] = (char)(1 + ell - width + e);
            i += 2;
            continue;
        }
        labels[k++] = t[i];
    }
    *nlabels = k;
    return true;
}

bool tt__einsum_parse(const char *eq, int ninputs, const int *ranks, tt__einsum *e, char *why,
                      size_t whylen)
{
    memset(e, 0, sizeof(*e));
    if (ninputs < 1 || ninputs > TT__EINSUM_MAX_INPUTS) {
        snprintf(why, whylen, "%d operands (1 to %d are supported)", ninputs,
                 TT__EINSUM_MAX_INPUTS);
        return false;
    }
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    /* the widest ellipsis first: an operand's is its rank less its letters */
    const char *t = eq;
    int terms = 0, ell = 0;
    for (;;) {
        const char *end = memchr(t, ',', lhs_len - (size_t)(t - eq));
        size_t n = end ? (size_t)(end - t) : lhs_len - (size_t)(t - eq);
        if (terms < ninputs) {
            int letters = 0;
            bool dots = false;
            for (size_t i = 0; i < n; i++)
                letters += is_letter(t[i]), dots |= t[i] == '.';
            if (dots && ranks[terms] - letters > ell)
                ell = ranks[terms] - letters;
        }
        terms++;
        if (!end)
            break;
        t = end + 1;
    }
    if (terms != ninputs) {
        snprintf(why, whylen, "the equation has %d operand terms for %d inputs", terms, ninputs);
        return false;
    }
    e->ninputs = ninputs;
    e->ellipsis = ell;
    t = eq;
    bool any_ellipsis = false;
    for (int k = 0; k < ninputs; k++) {
        const char *end = memchr(t, ',', lhs_len - (size_t)(t - eq));
        size_t n = end ? (size_t)(end - t) : lhs_len - (size_t)(t - eq);
        bool dots;
        if (!parse_term(t, n, ranks[k], ell, e->in[k], &e->in_rank[k], &dots, why, whylen))
            return false;
        any_ellipsis |= dots;
        t = end ? end + 1 : t + n;
    }
    if (arrow) {
        bool dots;
        const char *o = arrow + 2;
        if (!parse_term(o, strlen(o), -1, ell, e->out, &e->out_rank, &dots, why, whylen))
            return false;
        if (ell > 0 && !dots) {
            snprintf(why, whylen, "the output '%s' leaves out the operands' ellipsis", o);
            return false;
        }
        for (int i = 0; i < e->out_rank; i++) {
            bool found = false;
            for (int k = 0; k < ninputs && !found; k++)
                found = memchr(e->in[k], e->out[i], (size_t)e->in_rank[k]) != NULL;
            if (!found) {
                snprintf(why, whylen, "output subscript '%c' is in no operand", e->out[i]);
                return false;
            }
            if (memchr(e->out, e->out[i], (size_t)i)) {
                snprintf(why, whylen, "output subscript '%c' appears twice", e->out[i]);
                return false;
            }
        }
    } else {
        /* implicit: the ellipsis, then the letters that appear once, in alphabetical order */
        int n = 0;
        for (int d = 0; any_ellipsis && d < ell; d++)
            e->out[n++] = (char)(1 + d);
        for (int ch = 'A'; ch <= 'z'; ch++) {
            if (!is_letter((char)ch))
                continue;
            int count = 0;
            for (int k = 0; k < ninputs; k++)
                for (int d = 0; d < e->in_rank[k]; d++)
                    count += e->in[k][d] == ch;
            if (count == 1) {
                if (n == TT_GRAPH_MAX_RANK) {
                    snprintf(why, whylen, "the output has more than %d dimensions",
                             TT_GRAPH_MAX_RANK);
                    return false;
                }
                e->out[n++] = (char)ch;
            }
        }
        e->out_rank = n;
    }
    /* the summed labels: every label of an operand that the output does not keep */
    for (int k = 0; k < ninputs; k++)
        for (int d = 0; d < e->in_rank[k]; d++) {
            char l = e->in[k][d];
            if (memchr(e->out, l, (size_t)e->out_rank) || memchr(e->sum, l, (size_t)e->nsum))
                continue;
            if (e->nsum == TT__EINSUM_MAX_SUMMED) {
                snprintf(why, whylen, "more than %d summed subscripts", TT__EINSUM_MAX_SUMMED);
                return false;
            }
            e->sum[e->nsum++] = l;
        }
    return true;
}

bool tt__einsum_extent(const tt__einsum *e, const tt_gtensor *const *inputs, char label,
                       int64_t *extent, char *why, size_t whylen)
{
    int64_t n = 1;
    for (int k = 0; k < e->ninputs; k++)
        for (int d = 0; d < e->in_rank[k]; d++) {
            if (e->in[k][d] != label)
                continue;
            int64_t x = inputs[k]->dims[d];
            if (x != 1 && n != 1 && x != n) {
                if (label > 0 && label <= TT_GRAPH_MAX_RANK)
                    snprintf(why, whylen,
                             "the ellipsis' dimension %d is %lld in one operand and "
                             "%lld in another",
                             label - 1, (long long)n, (long long)x);
                else
                    snprintf(why, whylen,
                             "subscript '%c' is %lld in one place and %lld in "
                             "another",
                             label, (long long)n, (long long)x);
                return false;
            }
            if (x != 1)
                n = x;
        }
    *extent = n;
    return true;
}
