#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strbuf.h"

enum { W = 800, H = 480, LEFT = 70, RIGHT = 200, TOP = 40, BOTTOM = 50 };

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                     "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static void text_escaped(tt_strbuf *sb, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': tt_strbuf_append(sb, "&lt;"); break;
        case '>': tt_strbuf_append(sb, "&gt;"); break;
        case '&': tt_strbuf_append(sb, "&amp;"); break;
        case '"': tt_strbuf_append(sb, "&quot;"); break;
        default:
            if ((unsigned char)*s >= 0x20)
                tt_strbuf_appendn(sb, s, 1);
        }
    }
}

/* A round step for about `ticks` ticks over [0, max]. */
static double nice_step(double max, int ticks)
{
    double raw = max / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

char *tt_plot_svg(const tt_plot_series *s, int n, const char *title)
{
    double ymax = 0;
    size_t xmax = 1;
    for (int i = 0; i < n; i++) {
        if (s[i].n > xmax)
            xmax = s[i].n;
        for (size_t k = 0; k < s[i].n; k++)
            if (s[i].best[k] > ymax)
                ymax = s[i].best[k];
    }
    if (ymax <= 0)
        ymax = 1;
    double ystep = nice_step(ymax, 5), xstep = nice_step((double)xmax, 8);
    if (xstep < 1)
        xstep = 1;
    ymax = ceil(ymax / ystep) * ystep;
    double xtop = ceil((double)xmax / xstep) * xstep;
    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    tt_strbuf sb = {0};
    tt_strbuf_printf(&sb,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                     "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                     "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
                     W, H, W, H, W, H);
    tt_strbuf_printf(&sb, "<text x=\"%d\" y=\"24\" font-size=\"14\">", LEFT);
    text_escaped(&sb, title ? title : "");
    tt_strbuf_append(&sb, "</text>\n");
    /* axes, grid and ticks */
    for (double y = 0; y <= ymax + ystep / 2; y += ystep) {
        double py = TOP + ph - y / ymax * ph;
        tt_strbuf_printf(&sb,
                         "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                         "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                         LEFT, py, LEFT + pw, py, LEFT - 6, py + 4, y);
    }
    for (double x = 0; x <= xtop + xstep / 2; x += xstep) {
        double px = LEFT + x / xtop * pw;
        tt_strbuf_printf(&sb,
                         "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                         px, TOP, px, TOP + ph, px, TOP + ph + 16, x);
    }
    tt_strbuf_printf(&sb,
                     "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
                     "stroke=\"black\"/>\n"
                     "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">trials</text>\n"
                     "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 16 %.1f)\">best GFLOPS</text>\n",
                     LEFT, TOP, pw, ph, LEFT + pw / 2, H - 12, TOP + ph / 2, TOP + ph / 2);
    /* the curves (a step line: the best holds until a better trial) and the legend */
    for (int i = 0; i < n; i++) {
        const char *color = colors[i % (int)(sizeof(colors) / sizeof(colors[0]))];
        tt_strbuf_printf(&sb, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                         color);
        double prev = -1;
        for (size_t k = 0; k < s[i].n; k++) {
            double px = LEFT + (double)(k + 1) / xtop * pw;
            double py = TOP + ph - s[i].best[k] / ymax * ph;
            if (prev >= 0)
                tt_strbuf_printf(&sb, "%.1f,%.1f ", px, prev);
            tt_strbuf_printf(&sb, "%.1f,%.1f ", px, py);
            prev = py;
        }
        tt_strbuf_append(&sb, "\"/>\n");
        double ly = TOP + 10 + 20.0 * i;
        tt_strbuf_printf(&sb,
                         "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                         "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\">",
                         LEFT + pw + 12, ly, LEFT + pw + 32, ly, color, LEFT + pw + 38, ly + 4);
        text_escaped(&sb, s[i].label);
        double last = s[i].n ? s[i].best[s[i].n - 1] : 0;
        tt_strbuf_printf(&sb, " (%.3g)</text>\n", last);
    }
    tt_strbuf_append(&sb, "</svg>\n");
    return tt_strbuf_take(&sb);
}

bool tt_plot_series_push(tt_plot_series *s, double gflops)
{
    double *nb = realloc(s->best, sizeof(double) * (s->n + 1));
    if (!nb)
        return false;
    s->best = nb;
    double prev = s->n ? s->best[s->n - 1] : 0;
    s->best[s->n++] = gflops > prev ? gflops : prev;
    return true;
}

void tt_plot_series_clear(tt_plot_series *s)
{
    free(s->best);
    s->best = NULL;
    s->n = 0;
}
