#include "fmt.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tt_fmt_pyfloat(char *out, size_t n, double x)
{
    if (isnan(x))
        return snprintf(out, n, "NaN");
    if (isinf(x))
        return snprintf(out, n, x < 0 ? "-Infinity" : "Infinity");
    if (x == 0)
        return snprintf(out, n, signbit(x) ? "-0.0" : "0.0");
    /* Shortest round-tripping digits.  If p digits read back exactly, so do more, so the
     * smallest such p is found by bisection over 1..17 (17 always works). */
    char sci[40];
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        snprintf(sci, sizeof(sci), "%.*e", mid - 1, x);
        if (strtod(sci, NULL) == x)
            hi = mid;
        else
            lo = mid + 1;
    }
    snprintf(sci, sizeof(sci), "%.*e", lo - 1, x);
    /* sci is "[-]d[.ddd]e[+-]XX": split into sign, digits and exponent. */
    const char *s = sci;
    bool neg = *s == '-';
    if (neg)
        s++;
    char digits[24];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.')
            digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int exp = atoi(s + 1);
    char buf[64];
    int len = 0;
    if (neg)
        buf[len++] = '-';
    if (exp < -4 || exp >= 16) {
        buf[len++] = digits[0];
        if (nd > 1) {
            buf[len++] = '.';
            memcpy(buf + len, digits + 1, (size_t)nd - 1);
            len += nd - 1;
        }
        len += snprintf(buf + len, sizeof(buf) - (size_t)len, "e%c%02d", exp < 0 ? '-' : '+',
                        exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        buf[len++] = '0';
        buf[len++] = '.';
        for (int i = 0; i < -exp - 1; i++)
            buf[len++] = '0';
        memcpy(buf + len, digits, (size_t)nd);
        len += nd;
    } else {
        for (int i = 0; i <= exp; i++)
            buf[len++] = i < nd ? digits[i] : '0';
        buf[len++] = '.';
        if (nd > exp + 1) {
            memcpy(buf + len, digits + exp + 1, (size_t)(nd - exp - 1));
            len += nd - exp - 1;
        } else {
            buf[len++] = '0';
        }
    }
    buf[len] = 0;
    return snprintf(out, n, "%s", buf);
}

int tt_fmt_g6(char *out, size_t n, double x)
{
    if (isnan(x))
        return snprintf(out, n, "nan");
    if (isinf(x))
        return snprintf(out, n, x < 0 ? "-inf" : "inf");
    return snprintf(out, n, "%g", x);
}

bool tt_is_identifier(const char *s)
{
    if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    return true;
}
