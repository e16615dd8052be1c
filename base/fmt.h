/* Number formatting that other programs' readers and writers agree with byte for byte. */
#ifndef TT_BASE_FMT_H
#define TT_BASE_FMT_H

#include <stdbool.h>
#include <stddef.h>

/* Python's repr(float) as json.dumps writes it: the shortest digits that read back to the same
 * double; scientific notation iff the decimal exponent is < -4 or >= 16 ("9.6817e-05", "1e-05",
 * "1e+16"), otherwise fixed with at least one decimal ("1000000000.0", "0.5").  Infinity and NaN
 * as json.dumps writes them.  `out` needs 32 bytes; returns the length. */
int tt_fmt_pyfloat(char *out, size_t n, double x);

/* C++ ostream default formatting (printf "%g", 6 significant digits): "0.335558", "8.75e-06",
 * "1e+10".  Returns the length. */
int tt_fmt_g6(char *out, size_t n, double x);

/* True if `s` is a C identifier ([A-Za-z_][A-Za-z0-9_]*): symbols and kernel names. */
bool tt_is_identifier(const char *s);

#endif
