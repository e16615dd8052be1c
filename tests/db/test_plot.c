/* Tuning curves: the SVG has one step line per series, a legend with each series' best, escaped
 * text, and axes that cover the data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "db/plot.h"

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void curves_are_step_lines_with_a_legend(void **state)
{
    double a[4] = {0, 10, 10, 42.5}, b[2] = {5, 7};
    tt_plot_series s[2] = {{"job 1 (evo)", a, 4}, {"llvm <x86> & friends", b, 2}};
    char *svg = tt_plot_svg(s, 2, "matmul:M=1,N=1,K=1 <\"title\">");
    assert_non_null(svg);
    assert_int_equal(strncmp(svg, "<?xml", 5), 0);
    assert_int_equal(count(svg, "<polyline"), 2);
    assert_non_null(strstr(svg, "job 1 (evo) (42.5)"));
    assert_non_null(strstr(svg, "llvm &lt;x86&gt; &amp; friends (7)"));
    assert_non_null(strstr(svg, "&lt;&quot;title&quot;&gt;"));
    assert_null(strstr(svg, "<x86>"));
    /* y axis up to a round number above the best (42.5 -> 50), x axis over 4 trials */
    assert_non_null(strstr(svg, ">50</text>"));
    assert_non_null(strstr(svg, ">4</text>"));
    /* a step line: 4 points plus a horizontal step before each of the last 3 */
    const char *pl = strstr(svg, "points=\"");
    const char *end = strchr(pl + 8, '"');
    int pts = 0;
    for (const char *c = pl + 8; c < end; c++)
        pts += *c == ',';
    assert_int_equal(pts, 7);
    assert_int_equal(strcmp(svg + strlen(svg) - 7, "</svg>\n"), 0);
    free(svg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curves_are_step_lines_with_a_legend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
