#include "templates.h"

#include <string.h>

tt_status tt_template_dense_pack_x86(tt_config_space *cs, int64_t M, int64_t N, int64_t K,
                                     tt_errbuf *err)
{
    tt_status s;
    tt_cs_init(cs);
    if ((s = tt_cs_define_split(cs, "tile_y", M, TT_SPLIT_FACTORS, 3, 0, NULL, 0, 0, err)) ||
        (s = tt_cs_define_split(cs, "tile_x", N, TT_SPLIT_FACTORS, 3, 0, NULL, 0, 0, err)) ||
        (s = tt_cs_define_split(cs, "tile_k", K, TT_SPLIT_FACTORS, 2, 0, NULL, 0, 0, err)) ||
        (s = tt_cs_define_split(cs, "tile_inner", M, TT_SPLIT_FACTORS, 2, 0, NULL, 0, 16, err)))
        tt_cs_free(cs);
    return s;
}

tt_status tt_template_dense_pack_apply(const tt_config_space *cs, uint64_t index, const tt_dag *dag,
                                       tt_state **out, tt_errbuf *err)
{
    int ky = tt_cs_find(cs, "tile_y"), kx = tt_cs_find(cs, "tile_x"), kk = tt_cs_find(cs, "tile_k"),
        ki = tt_cs_find(cs, "tile_inner");
    if (ky < 0 || kx < 0 || kk < 0 || ki < 0)
        return tt_err(err, TT_ERR_INVALID_ARG, "not a dense_pack.x86 space");
    /* Our matmul: placeholders A, B, then C with axes i, j and one reduce axis. */
    if (dag->ops.len != 3 || dag->ops.data[2].ndim != 2 || dag->ops.data[2].nreduce != 1)
        return tt_err(err, TT_ERR_INVALID_ARG, "dense_pack.x86 applies to matmul workloads");
    const int64_t *y = tt_cs_entity(cs, ky, index), *x = tt_cs_entity(cs, kx, index),
                  *k = tt_cs_entity(cs, kk, index), *in = tt_cs_entity(cs, ki, index);
    tt_state *st;
    tt_status s = tt_state_create(dag, &st, err);
    if (s)
        return s;
    const int C = 3, CL = 2;
    int order[6] = {3, 0, 1, 4, 2, 5}; /* xt, yt, yo, xo, yi, xi */
    int f01[2] = {0, 1}, f12[2] = {1, 2};
    int corder[5] = {3, 0, 4, 1, 2}; /* ko, yo, ki, yi, x */
    if ((s = tt_sched_cache_write(st, 2, "local", err)) ||
        (s = tt_sched_split(st, C, 0, y + 1, 2, true, err)) ||
        (s = tt_sched_split(st, C, 3, x + 1, 2, true, err)) ||
        (s = tt_sched_reorder(st, C, order, 6, err)) || (s = tt_sched_fuse(st, C, f01, 2, err)) ||
        (s = tt_sched_fuse(st, C, f12, 2, err)) ||
        (s = tt_sched_annotate(st, C, 0, TT_ANN_PARALLEL, err)) ||
        (s = tt_sched_annotate(st, C, 2, TT_ANN_UNROLL, err)) ||
        (s = tt_sched_annotate(st, C, 3, TT_ANN_VECTORIZE, err)) ||
        (s = tt_sched_compute_at(st, CL, C, 1, err)) ||
        (s = tt_sched_split(st, CL, 2, k + 1, 1, true, err)) ||
        (s = tt_sched_split(st, CL, 0, in + 1, 1, true, err)) ||
        (s = tt_sched_reorder(st, CL, corder, 5, err)) ||
        (s = tt_sched_annotate(st, CL, 3, TT_ANN_UNROLL, err)) ||
        (s = tt_sched_annotate(st, CL, 4, TT_ANN_VECTORIZE, err))) {
        tt_state_free(st);
        return s;
    }
    *out = st;
    return TT_OK;
}

tt_status tt_template_conv2d_nchwc_x86(tt_config_space *cs, int64_t in_channel, int64_t num_filter,
                                       int64_t out_height, int64_t out_width, int64_t kh,
                                       int64_t kw, tt_errbuf *err)
{
    tt_status s;
    tt_cs_init(cs);
    if ((s = tt_cs_define_split(cs, "tile_ic", in_channel, TT_SPLIT_FACTORS, 2, 0, NULL, 0, 0,
                                err)) ||
        (s = tt_cs_define_split(cs, "tile_oc", num_filter, TT_SPLIT_FACTORS, 2, 0, NULL, 0, 0,
                                err)) ||
        (s = tt_cs_define_split(cs, "tile_ow", out_width, TT_SPLIT_VERBOSE, 2, 0, NULL, 0, 64,
                                err)))
        goto out;
    if (kh == 1 && kw == 1) {
        const int64_t oh[2] = {1, 2};
        s = tt_cs_define_knob(cs, "tile_oh", oh, out_height > 1 ? 2 : 1, err);
    } else {
        const int64_t unroll[2] = {1, 0};
        s = tt_cs_define_knob(cs, "unroll_kw", unroll, 2, err);
    }
out:
    if (s)
        tt_cs_free(cs);
    return s;
}

tt_status tt_template_conv2d_nchw_cuda(tt_config_space *cs, int64_t co, int64_t oh, int64_t ow,
                                       int64_t ci, int64_t kh, int64_t kw, bool nvptx,
                                       bool tophub_order, tt_errbuf *err)
{
    static const int64_t unroll[3] = {0, 512, 1500}, explicit_all[2] = {0, 1}, explicit_1[1] = {1};
    tt_status s;
    tt_cs_init(cs);
    if ((s = tt_cs_define_split(cs, "tile_f", co, TT_SPLIT_FACTORS, 4, 0, NULL, 0, 0, err)) ||
        (s = tt_cs_define_split(cs, "tile_y", oh, TT_SPLIT_FACTORS, 4, 0, NULL, 0, 0, err)) ||
        (s = tt_cs_define_split(cs, "tile_x", ow, TT_SPLIT_FACTORS, 4, 0, NULL, 0, 0, err)) ||
        (s = tt_cs_define_split(cs, "tile_rc", ci, TT_SPLIT_FACTORS, 2, 0, NULL, 0, 0, err)))
        goto out;
    const char *first = tophub_order ? "tile_rx" : "tile_ry";
    const char *second = tophub_order ? "tile_ry" : "tile_rx";
    if ((s = tt_cs_define_split(cs, first, tophub_order ? kw : kh, TT_SPLIT_FACTORS, 2, 0, NULL, 0,
                                0, err)) ||
        (s = tt_cs_define_split(cs, second, tophub_order ? kh : kw, TT_SPLIT_FACTORS, 2, 0, NULL, 0,
                                0, err)) ||
        (s = tt_cs_define_knob(cs, "auto_unroll_max_step", unroll, 3, err)) ||
        (s = tt_cs_define_knob(cs, "unroll_explicit", nvptx ? explicit_1 : explicit_all,
                               nvptx ? 1 : 2, err)))
        goto out;
out:
    if (s)
        tt_cs_free(cs);
    return s;
}
