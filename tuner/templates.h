/* AutoTVM templates (search.md A8): TVM's knob definitions, in TVM's order, so the config indices
 * of AutoTVM logs decode to the same knob values; and, for the CPU dense template, the mapping of
 * a config to our step list. */
#ifndef TT_TUNER_TEMPLATES_H
#define TT_TUNER_TEMPLATES_H

#include "../schedule/schedule.h"
#include "config_space.h"

/* dense_pack.x86 for data M x K and weights N x K: tile_y (M, 3 parts), tile_x (N, 3), tile_k
 * (K, 2), tile_inner (M, 2, last <= 16). */
tt_status tt_template_dense_pack_x86(tt_config_space *cs, int64_t M, int64_t N, int64_t K,
                                     tt_errbuf *err);
/* The step list of a dense_pack.x86 config on our matmul workload (C[M,N] = A[M,K] x B[K,N]):
 * the output tiled (xt, yt, yo, xo, yi, xi), xt*yt parallel, yi unrolled, xi vectorised; a local
 * accumulator computed at yo*xo, its k split by tile_k and its rows by tile_inner.  TVM also packs
 * the weights; our B is already K x N, which is the packed layout's inner order. */
tt_status tt_template_dense_pack_apply(const tt_config_space *cs, uint64_t index, const tt_dag *dag,
                                       tt_state **out, tt_errbuf *err);

/* conv2d_NCHWc.x86: tile_ic, tile_oc, tile_ow (verbose, last <= 64), then tile_oh ([1, 2], or [1]
 * when out_height is 1) for 1x1 kernels or unroll_kw ([1, 0] = True, False) otherwise. */
tt_status tt_template_conv2d_nchwc_x86(tt_config_space *cs, int64_t in_channel, int64_t num_filter,
                                       int64_t out_height, int64_t out_width, int64_t kh,
                                       int64_t kw, tt_errbuf *err);

/* conv2d_nchw.cuda (direct): tile_f, tile_y, tile_x (4 parts), tile_rc, tile_ry, tile_rx (2 parts),
 * auto_unroll_max_step [0, 512, 1500], unroll_explicit [0, 1] ([1] on nvptx/rocm).  `tophub_order`
 * defines tile_rx before tile_ry, as the TopHub v0.10 logs do. */
tt_status tt_template_conv2d_nchw_cuda(tt_config_space *cs, int64_t co, int64_t oh, int64_t ow,
                                       int64_t ci, int64_t kh, int64_t kw, bool nvptx,
                                       bool tophub_order, tt_errbuf *err);

#endif
