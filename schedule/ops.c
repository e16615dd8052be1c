/* The operator library: each operator is written in the tensor-expression language, so the
 * library is readable as math and exercises the same parser users write custom operators in.
 * Shapes and layouts follow TVM's te_workload.py (the Ansor single-operator suite). */
#include "workload.h"

#include <string.h>

/* "oh*2+rh*2", "oh+rh", ... : the input index of a sliding window. */
static const char *win(char buf[64], size_t n, const char *o, int64_t s, const char *r, int64_t d)
{
    char a[24], b[24];
    if (s == 1)
        snprintf(a, sizeof(a), "%s", o);
    else
        snprintf(a, sizeof(a), "%s*%lld", o, (long long)s);
    if (d == 1)
        snprintf(b, sizeof(b), "%s", r);
    else
        snprintf(b, sizeof(b), "%s*%lld", r, (long long)d);
    snprintf(buf, n, "%s+%s", a, b);
    return buf;
}

static int64_t out_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil)
{
    return (in + 2 * p - dil * (k - 1) - 1) / s + 1;
}

static tt_status need_float(const char *op, const char *dtype, tt_errbuf *err)
{
    if (strcmp(dtype, "float32") && strcmp(dtype, "float64"))
        return tt_err(err, TT_ERR_BAD_WORKLOAD, "%s needs a float dtype, not %s", op, dtype);
    return TT_OK;
}

/* Padding statement over `nsp` spatial dims of an input with layout [N, spatial..., rest...].
 * dims: full input shape (rank `rank`); spatial dims are 1..nsp. */
static void emit_pad(tt_strbuf *sb, const char *dtype, int rank, const int64_t *dims, int nsp,
                     int64_t p)
{
    static const char *const v[] = {"n", "d0", "d1", "d2", "c0", "c1", "c2", "c3"};
    tt_strbuf_append(sb, "pad[");
    for (int i = 0; i < rank; i++)
        tt_strbuf_printf(sb, "%s%s", i ? "," : "", v[i]);
    tt_strbuf_append(sb, "] = select(");
    for (int i = 1; i <= nsp; i++)
        tt_strbuf_printf(sb, "%s%s >= %lld && %s < %lld", i > 1 ? " && " : "", v[i], (long long)p,
                         v[i], (long long)(dims[i] + p));
    tt_strbuf_append(sb, ", data[");
    for (int i = 0; i < rank; i++) {
        if (i >= 1 && i <= nsp)
            tt_strbuf_printf(sb, "%s%s-%lld", i ? "," : "", v[i], (long long)p);
        else
            tt_strbuf_printf(sb, "%s%s", i ? "," : "", v[i]);
    }
    tt_strbuf_printf(sb, "], 0); pad:%s[", dtype);
    for (int i = 0; i < rank; i++)
        tt_strbuf_printf(sb, "%s%lld", i ? "," : "",
                         (long long)(dims[i] + (i >= 1 && i <= nsp ? 2 * p : 0)));
    tt_strbuf_append(sb, "]; ");
}

/* "; name:dtype[d0,...]"; weights are declared constant (their layout may be rewritten). */
static void emit_decl(tt_strbuf *sb, const char *name, const char *dtype, int rank,
                      const int64_t *dims)
{
    tt_strbuf_printf(sb, "; %s:%s%s[", name, strcmp(name, "weight") ? "" : "const ", dtype);
    for (int i = 0; i < rank; i++)
        tt_strbuf_printf(sb, "%s%lld", i ? "," : "", (long long)dims[i]);
    tt_strbuf_append(sb, "]");
}

/* Generic grouped, dilated, strided convolution with channels-last layout over `nsp` spatial
 * dims: data[N, S1..Sn, CI], weight[K.., CI/G, CO], out[N, O1..On, CO]. */
static tt_status conv_nd(tt_strbuf *sb, const char *opname, int nsp, int64_t N, const int64_t *sp,
                         int64_t CI, int64_t CO, int64_t K, int64_t S, int64_t P, int64_t DIL,
                         int64_t G, const char *dtype, tt_errbuf *err)
{
    static const char *const o[] = {"o0", "o1", "o2"}, *const r[] = {"r0", "r1", "r2"};
    if (CI % G || CO % G)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "%s: CI=%lld and CO=%lld must be divisible by G=%lld", opname, (long long)CI,
                      (long long)CO, (long long)G);
    int64_t osp[3], dims[5];
    for (int i = 0; i < nsp; i++) {
        osp[i] = out_extent(sp[i], K, S, P, DIL);
        if (osp[i] < 1)
            return tt_err(
                err, TT_ERR_BAD_WORKLOAD,
                "%s: the kernel (K=%lld, DIL=%lld) does not fit the padded input (%lld + 2*%lld)",
                opname, (long long)K, (long long)DIL, (long long)sp[i], (long long)P);
    }
    if (P >= K * DIL)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "%s: padding P=%lld must be smaller than the dilated kernel (%lld)", opname,
                      (long long)P, (long long)(K * DIL));
    dims[0] = N;
    for (int i = 0; i < nsp; i++)
        dims[1 + i] = sp[i];
    dims[1 + nsp] = CI;
    const char *src = "data";
    if (P > 0) {
        emit_pad(sb, dtype, nsp + 2, dims, nsp, P);
        src = "pad";
    }
    tt_strbuf_append(sb, "out[n");
    for (int i = 0; i < nsp; i++)
        tt_strbuf_printf(sb, ",%s", o[i]);
    tt_strbuf_printf(sb, ",co] += %s[n", src);
    char buf[64];
    for (int i = 0; i < nsp; i++)
        tt_strbuf_printf(sb, ",%s", win(buf, sizeof(buf), o[i], S, r[i], DIL));
    if (G == 1)
        tt_strbuf_append(sb, ",rc] * weight[");
    else
        tt_strbuf_printf(sb, ",co/%lld*%lld+rc] * weight[", (long long)(CO / G),
                         (long long)(CI / G));
    for (int i = 0; i < nsp; i++)
        tt_strbuf_printf(sb, "%s,", r[i]);
    tt_strbuf_append(sb, "rc,co]");
    emit_decl(sb, "data", dtype, nsp + 2, dims);
    int64_t w[5];
    for (int i = 0; i < nsp; i++)
        w[i] = K;
    w[nsp] = CI / G;
    w[nsp + 1] = CO;
    emit_decl(sb, "weight", dtype, nsp + 2, w);
    int64_t od[5];
    od[0] = N;
    for (int i = 0; i < nsp; i++)
        od[1 + i] = osp[i];
    od[1 + nsp] = CO;
    emit_decl(sb, "out", dtype, nsp + 2, od);
    return TT_OK;
}

static tt_status te_conv1d(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    return conv_nd(sb, "conv1d_nlc", 1, p[0], &p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], dt,
                   err);
}

static tt_status te_conv2d(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    return conv_nd(sb, "conv2d_nhwc", 2, p[0], &p[1], p[3], p[4], p[5], p[6], p[7], p[8], p[9], dt,
                   err);
}

static tt_status te_conv3d(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    return conv_nd(sb, "conv3d_ndhwc", 3, p[0], &p[1], p[4], p[5], p[6], p[7], p[8], p[9], p[10],
                   dt, err);
}

/* conv2d_nchw: N, CI, H, W, CO, K, S, P, DIL, G (the layout of TVM's ResNet-18 tests). */
static tt_status te_conv2d_nchw(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    int64_t N = p[0], CI = p[1], H = p[2], W = p[3], CO = p[4], K = p[5], S = p[6], P = p[7],
            DIL = p[8], G = p[9];
    if (CI % G || CO % G)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "conv2d_nchw: CI and CO must be divisible by G=%lld", (long long)G);
    int64_t OH = out_extent(H, K, S, P, DIL), OW = out_extent(W, K, S, P, DIL);
    if (OH < 1 || OW < 1 || P >= K * DIL)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "conv2d_nchw: kernel, padding and input size do not fit");
    const char *src = "data";
    if (P > 0) {
        tt_strbuf_printf(sb,
                         "pad[n,c,h,w] = select(h >= %lld && h < %lld && w >= %lld && w < %lld, "
                         "data[n,c,h-%lld,w-%lld], 0); pad:%s[%lld,%lld,%lld,%lld]; ",
                         (long long)P, (long long)(H + P), (long long)P, (long long)(W + P),
                         (long long)P, (long long)P, dt, (long long)N, (long long)CI,
                         (long long)(H + 2 * P), (long long)(W + 2 * P));
        src = "pad";
    }
    char bh[64], bw[64];
    win(bh, sizeof(bh), "oh", S, "rh", DIL);
    win(bw, sizeof(bw), "ow", S, "rw", DIL);
    if (G == 1)
        tt_strbuf_printf(sb, "out[n,co,oh,ow] += %s[n,rc,%s,%s] * weight[co,rc,rh,rw]", src, bh,
                         bw);
    else
        tt_strbuf_printf(sb, "out[n,co,oh,ow] += %s[n,co/%lld*%lld+rc,%s,%s] * weight[co,rc,rh,rw]",
                         src, (long long)(CO / G), (long long)(CI / G), bh, bw);
    tt_strbuf_printf(sb,
                     "; data:%s[%lld,%lld,%lld,%lld]; weight:const %s[%lld,%lld,%lld,%lld]; "
                     "out:%s[%lld,%lld,%lld,%lld]",
                     dt, (long long)N, (long long)CI, (long long)H, (long long)W, dt, (long long)CO,
                     (long long)(CI / G), (long long)K, (long long)K, dt, (long long)N,
                     (long long)CO, (long long)OH, (long long)OW);
    return TT_OK;
}

/* conv2d_nchwc: N, CI, H, W, CO, K, S, P, IC, OC.  Channels blocked by IC (input) and OC
 * (output), the layout of TVM's x86 convolutions (NCHW[x]c): data[N, CI/IC, H, W, IC],
 * weight[CO/OC, CI/IC, K, K, IC, OC], out[N, CO/OC, OH, OW, OC].  A block of OC output channels
 * is one vector, and consecutive layers keep the layout (layout_nchwc converts at the edges). */
static tt_status te_conv2d_nchwc(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    int64_t N = p[0], CI = p[1], H = p[2], W = p[3], CO = p[4], K = p[5], S = p[6], P = p[7],
            IC = p[8], OC = p[9];
    if (CI % IC || CO % OC)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "conv2d_nchwc: CI=%lld must be a multiple of IC=%lld and CO=%lld of OC=%lld",
                      (long long)CI, (long long)IC, (long long)CO, (long long)OC);
    int64_t OH = out_extent(H, K, S, P, 1), OW = out_extent(W, K, S, P, 1);
    if (OH < 1 || OW < 1 || P >= K)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "conv2d_nchwc: kernel, padding and input size do not fit");
    const char *src = "data";
    if (P > 0) {
        tt_strbuf_printf(
            sb,
            "pad[n,c,h,w,ci] = select(h >= %lld && h < %lld && w >= %lld && "
            "w < %lld, data[n,c,h-%lld,w-%lld,ci], 0); pad:%s[%lld,%lld,%lld,%lld,%lld]; ",
            (long long)P, (long long)(H + P), (long long)P, (long long)(W + P), (long long)P,
            (long long)P, dt, (long long)N, (long long)(CI / IC), (long long)(H + 2 * P),
            (long long)(W + 2 * P), (long long)IC);
        src = "pad";
    }
    char bh[64], bw[64];
    tt_strbuf_printf(sb, "out[n,co,oh,ow,oc] += %s[n,rc,%s,%s,ri] * weight[co,rc,rh,rw,ri,oc]", src,
                     win(bh, sizeof(bh), "oh", S, "rh", 1), win(bw, sizeof(bw), "ow", S, "rw", 1));
    int64_t d[5] = {N, CI / IC, H, W, IC}, w[6] = {CO / OC, CI / IC, K, K, IC, OC},
            o[5] = {N, CO / OC, OH, OW, OC};
    emit_decl(sb, "data", dt, 5, d);
    emit_decl(sb, "weight", dt, 6, w);
    emit_decl(sb, "out", dt, 5, o);
    return TT_OK;
}

/* layout_nchwc: N, C, H, W, CB.  NCHW activations to NCHW[CB]c, what a network running NCHWc
 * convolutions pays once at its input (and in reverse at its output). */
static tt_status te_layout_nchwc(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    int64_t N = p[0], C = p[1], H = p[2], W = p[3], CB = p[4];
    if (C % CB)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "layout_nchwc: C=%lld must be a multiple of CB=%lld", (long long)C,
                      (long long)CB);
    tt_strbuf_printf(sb, "out[n,c,h,w,cb] = data[n,c*%lld+cb,h,w]", (long long)CB);
    int64_t d[4] = {N, C, H, W}, o[5] = {N, C / CB, H, W, CB};
    emit_decl(sb, "data", dt, 4, d);
    emit_decl(sb, "out", dt, 5, o);
    return TT_OK;
}

static tt_status te_depthwise(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    int64_t N = p[0], H = p[1], W = p[2], C = p[3], K = p[4], S = p[5], P = p[6], DIL = p[7];
    int64_t OH = out_extent(H, K, S, P, DIL), OW = out_extent(W, K, S, P, DIL);
    if (OH < 1 || OW < 1 || P >= K * DIL)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "depthwise_conv2d_nhwc: kernel, padding and input size do not fit");
    int64_t dims[4] = {N, H, W, C};
    const char *src = "data";
    if (P > 0) {
        emit_pad(sb, dt, 4, dims, 2, P);
        src = "pad";
    }
    char bh[64], bw[64];
    tt_strbuf_printf(sb, "out[n,oh,ow,c] += %s[n,%s,%s,c] * weight[rh,rw,c]", src,
                     win(bh, sizeof(bh), "oh", S, "rh", DIL),
                     win(bw, sizeof(bw), "ow", S, "rw", DIL));
    emit_decl(sb, "data", dt, 4, dims);
    int64_t w[3] = {K, K, C}, o[4] = {N, OH, OW, C};
    emit_decl(sb, "weight", dt, 3, w);
    emit_decl(sb, "out", dt, 4, o);
    return TT_OK;
}

static tt_status te_conv2d_transpose(tt_strbuf *sb, const int64_t *p, const char *dt,
                                     tt_errbuf *err)
{
    int64_t N = p[0], H = p[1], W = p[2], CI = p[3], CO = p[4], K = p[5], S = p[6], P = p[7];
    if (P > K - 1)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "conv2d_transpose_nhwc: padding P=%lld must be at most K-1=%lld",
                      (long long)P, (long long)(K - 1));
    int64_t bp = K - 1 - P, PH = (H - 1) * S + 1 + 2 * bp, PW = (W - 1) * S + 1 + 2 * bp;
    int64_t OH = PH - K + 1, OW = PW - K + 1;
    if (OH < 1 || OW < 1)
        return tt_err(err, TT_ERR_BAD_WORKLOAD, "conv2d_transpose_nhwc: empty output");
    /* Dilate the input by the stride and pad it by K-1-P; then a stride-1 convolution with the
     * flipped kernel. */
    tt_strbuf_printf(sb, "pad[n,h,w,c] = select(h >= %lld && h < %lld && w >= %lld && w < %lld",
                     (long long)bp, (long long)(bp + (H - 1) * S + 1), (long long)bp,
                     (long long)(bp + (W - 1) * S + 1));
    if (S > 1)
        tt_strbuf_printf(sb, " && (h - %lld) %% %lld == 0 && (w - %lld) %% %lld == 0",
                         (long long)bp, (long long)S, (long long)bp, (long long)S);
    tt_strbuf_printf(
        sb, ", data[n,(h - %lld) / %lld,(w - %lld) / %lld,c], 0); pad:%s[%lld,%lld,%lld,%lld]; ",
        (long long)bp, (long long)S, (long long)bp, (long long)S, dt, (long long)N, (long long)PH,
        (long long)PW, (long long)CI);
    tt_strbuf_printf(sb, "out[n,oh,ow,co] += pad[n,oh+rh,ow+rw,rc] * weight[%lld-rh,%lld-rw,rc,co]",
                     (long long)(K - 1), (long long)(K - 1));
    int64_t d[4] = {N, H, W, CI}, w[4] = {K, K, CI, CO}, o[4] = {N, OH, OW, CO};
    emit_decl(sb, "data", dt, 4, d);
    emit_decl(sb, "weight", dt, 4, w);
    emit_decl(sb, "out", dt, 4, o);
    tt_strbuf_printf(sb, "; rh:%lld; rw:%lld", (long long)K, (long long)K);
    return TT_OK;
}

static tt_status te_capsule(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    int64_t N = p[0], H = p[1], W = p[2], CI = p[3], CO = p[4], K = p[5], S = p[6], P = p[7],
            CAP = p[8];
    int64_t OH = out_extent(H, K, S, P, 1), OW = out_extent(W, K, S, P, 1);
    if (OH < 1 || OW < 1 || P >= K)
        return tt_err(err, TT_ERR_BAD_WORKLOAD,
                      "conv2d_capsule_nhwijc: kernel, padding and input size do not fit");
    int64_t dims[6] = {N, H, W, CAP, CAP, CI};
    const char *src = "data";
    if (P > 0) {
        emit_pad(sb, dt, 6, dims, 2, P);
        src = "pad";
    }
    char bh[64], bw[64];
    tt_strbuf_printf(sb,
                     "out[n,oh,ow,cap_i,cap_j,co] += %s[n,%s,%s,cap_i,cap_k,rc] * "
                     "weight[rh,rw,cap_k,cap_j,rc,co]",
                     src, win(bh, sizeof(bh), "oh", S, "rh", 1),
                     win(bw, sizeof(bw), "ow", S, "rw", 1));
    int64_t w[6] = {K, K, CAP, CAP, CI, CO}, o[6] = {N, OH, OW, CAP, CAP, CO};
    emit_decl(sb, "data", dt, 6, dims);
    emit_decl(sb, "weight", dt, 6, w);
    emit_decl(sb, "out", dt, 6, o);
    return TT_OK;
}

static tt_status te_matmul(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    /* B is the weight of a layer (a dense layer's, a BERT projection's): constant. */
    tt_strbuf_printf(sb, "C[i,j] += A[i,k] * B[k,j]; A:%s[%lld,%lld]; B:const %s[%lld,%lld]", dt,
                     (long long)p[0], (long long)p[2], dt, (long long)p[2], (long long)p[1]);
    return TT_OK;
}

static tt_status te_batch_matmul(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    tt_strbuf_printf(sb,
                     "C[b,i,j] += A[b,i,k] * B[b,k,j]; A:%s[%lld,%lld,%lld]; B:%s[%lld,%lld,%lld]",
                     dt, (long long)p[0], (long long)p[1], (long long)p[3], dt, (long long)p[0],
                     (long long)p[3], (long long)p[2]);
    return TT_OK;
}

static tt_status te_norm(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    tt_status s = need_float("norm_bmn", dt, err);
    if (s)
        return s;
    tt_strbuf_printf(sb, "sq[b] += A[b,i,j] * A[b,i,j]; out[b] = sqrt(sq[b]); A:%s[%lld,%lld,%lld]",
                     dt, (long long)p[0], (long long)p[1], (long long)p[2]);
    return TT_OK;
}

static void emit_softmax(tt_strbuf *sb, const char *in, const char *idx, const char *red,
                         const char *last)
{
    /* idx: leading indices ("b,h,i"); red: name of the reduced index. */
    tt_strbuf_printf(sb, "maxelem[%s] max= %s[%s,%s]; ", idx, in, idx, red);
    tt_strbuf_printf(sb, "e[%s,%s] = exp(%s[%s,%s] - maxelem[%s]); ", idx, last, in, idx, last,
                     idx);
    tt_strbuf_printf(sb, "expsum[%s] += e[%s,%s]; ", idx, idx, red);
    tt_strbuf_printf(sb, "out[%s,%s] = e[%s,%s] / expsum[%s]", idx, last, idx, last, idx);
}

static tt_status te_softmax(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    tt_status s = need_float("softmax", dt, err);
    if (s)
        return s;
    emit_softmax(sb, "A", "i", "k", "j");
    tt_strbuf_printf(sb, "; A:%s[%lld,%lld]", dt, (long long)p[0], (long long)p[1]);
    return TT_OK;
}

static void emit_tbg(tt_strbuf *sb, const int64_t *p, const char *dt, const char *out)
{
    int64_t B = p[0], SEQ = p[1], HEADS = p[2], DIM = p[3];
    tt_strbuf_printf(sb,
                     "query_T[b,h,s,d] = query[b,s,h,d]; value_T[b,h,d,s] = value[b,s,h,d]; "
                     "%s[b,h,i,j] += query_T[b,h,i,k] * value_T[b,h,k,j]",
                     out);
    (void)B, (void)SEQ, (void)HEADS, (void)DIM, (void)dt;
}

static void emit_tbg_decls(tt_strbuf *sb, const int64_t *p, const char *dt)
{
    tt_strbuf_printf(sb, "; query:%s[%lld,%lld,%lld,%lld]; value:%s[%lld,%lld,%lld,%lld]", dt,
                     (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3], dt,
                     (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
}

static tt_status te_tbg(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    emit_tbg(sb, p, dt, "out");
    emit_tbg_decls(sb, p, dt);
    return TT_OK;
}

static tt_status te_tbs(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    tt_status s = need_float("transpose_batch_matmul_softmax", dt, err);
    if (s)
        return s;
    emit_tbg(sb, p, dt, "score");
    tt_strbuf_append(sb, "; ");
    emit_softmax(sb, "score", "b,h,i", "k", "j");
    emit_tbg_decls(sb, p, dt);
    return TT_OK;
}

static tt_status te_cbr(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    int64_t q[10] = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], 1, 1};
    tt_strbuf tmp = {0};
    tt_status s = conv_nd(&tmp, "conv2d_bn_relu", 2, q[0], &q[1], q[3], q[4], q[5], q[6], q[7], 1,
                          1, dt, err);
    if (s) {
        tt_strbuf_free(&tmp);
        return s;
    }
    /* Rename the convolution's output to "conv" and append bias, batch-norm and ReLU. */
    const char *text = tt_strbuf_cstr(&tmp);
    const char *decl = strstr(text, "; data:");
    const char *outp = strstr(text, "out[n,");
    tt_strbuf_appendn(sb, text, (size_t)(outp - text));
    tt_strbuf_append(sb, "conv");
    tt_strbuf_appendn(sb, outp + 3, (size_t)(decl - outp - 3));
    tt_strbuf_append(sb, "; bias_add[n,h,w,c] = conv[n,h,w,c] + bias[c]"
                         "; bn_mul[n,h,w,c] = bias_add[n,h,w,c] * bn_scale[c]"
                         "; bn_add[n,h,w,c] = bn_mul[n,h,w,c] + bn_offset[c]"
                         "; out[n,h,w,c] = max(bn_add[n,h,w,c], 0)");
    const char *outdecl = strstr(decl, "; out:");
    tt_strbuf_appendn(sb, decl, (size_t)(outdecl - decl));
    int64_t CO = p[4];
    tt_strbuf_printf(sb, "; bias:%s[%lld]; bn_scale:%s[%lld]; bn_offset:%s[%lld]", dt,
                     (long long)CO, dt, (long long)CO, dt, (long long)CO);
    tt_strbuf_append(sb, "; conv:");
    tt_strbuf_append(sb, outdecl + strlen("; out:"));
    tt_strbuf_free(&tmp);
    return TT_OK;
}

static tt_status te_add(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    tt_strbuf_printf(sb, "C[i,j] = A[i,j] + B[i,j]; A:%s[%lld,%lld]; B:%s[%lld,%lld]", dt,
                     (long long)p[0], (long long)p[1], dt, (long long)p[0], (long long)p[1]);
    return TT_OK;
}

static tt_status te_relu(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    tt_strbuf_printf(sb, "B[i,j] = max(A[i,j], 0); A:%s[%lld,%lld]", dt, (long long)p[0],
                     (long long)p[1]);
    return TT_OK;
}

static tt_status te_sigmoid(tt_strbuf *sb, const int64_t *p, const char *dt, tt_errbuf *err)
{
    tt_status s = need_float("sigmoid", dt, err);
    if (s)
        return s;
    tt_strbuf_printf(sb, "B[i,j] = sigmoid(A[i,j]); A:%s[%lld,%lld]", dt, (long long)p[0],
                     (long long)p[1]);
    return TT_OK;
}

#define REQ(n, d)                                                                                  \
    {                                                                                              \
        n, 0, false, 1, d                                                                          \
    }
#define OPT(n, def, mn, d)                                                                         \
    {                                                                                              \
        n, def, true, mn, d                                                                        \
    }
#define PAD                                                                                        \
    {                                                                                              \
        "P", 0, false, 0, "padding"                                                                \
    }

static const tt_op_def library[] = {
    {"matmul",
     "GMM",
     "C[M,N] = A[M,K] x B[K,N]",
     {REQ("M", "rows of A and C"), REQ("N", "columns of B and C"), REQ("K", "reduction length")},
     3,
     te_matmul},
    {"batch_matmul",
     "GMM",
     "C[B,M,N] = A[B,M,K] x B[B,K,N]",
     {REQ("B", "batch"), REQ("M", "rows"), REQ("N", "columns"), REQ("K", "reduction length")},
     4,
     te_batch_matmul},
    {"conv1d_nlc",
     "C1D",
     "1-D convolution, data[N,L,CI], weight[K,CI/G,CO]",
     {REQ("N", "batch"), REQ("L", "length"), REQ("CI", "input channels"),
      REQ("CO", "output channels"), REQ("K", "kernel size"), REQ("S", "stride"), PAD,
      OPT("DIL", 1, 1, "dilation"), OPT("G", 1, 1, "groups")},
     9,
     te_conv1d},
    {"conv2d_nhwc",
     "C2D",
     "2-D convolution (GRP with G>1, DIL with DIL>1), data[N,H,W,CI], weight[K,K,CI/G,CO]",
     {REQ("N", "batch"), REQ("H", "height"), REQ("W", "width"), REQ("CI", "input channels"),
      REQ("CO", "output channels"), REQ("K", "kernel size"), REQ("S", "stride"), PAD,
      OPT("DIL", 1, 1, "dilation"), OPT("G", 1, 1, "groups")},
     10,
     te_conv2d},
    {"conv2d_nchw",
     "C2D",
     "2-D convolution in NCHW, data[N,CI,H,W], weight[CO,CI/G,K,K]",
     {REQ("N", "batch"), REQ("CI", "input channels"), REQ("H", "height"), REQ("W", "width"),
      REQ("CO", "output channels"), REQ("K", "kernel size"), REQ("S", "stride"), PAD,
      OPT("DIL", 1, 1, "dilation"), OPT("G", 1, 1, "groups")},
     10,
     te_conv2d_nchw},
    {"conv2d_nchwc",
     "C2D",
     "2-D convolution in NCHW[x]c, data[N,CI/IC,H,W,IC], weight[CO/OC,CI/IC,K,K,IC,OC]",
     {REQ("N", "batch"), REQ("CI", "input channels"), REQ("H", "height"), REQ("W", "width"),
      REQ("CO", "output channels"), REQ("K", "kernel size"), REQ("S", "stride"), PAD,
      OPT("IC", 16, 1, "input channel block"), OPT("OC", 16, 1, "output channel block")},
     10,
     te_conv2d_nchwc},
    {"layout_nchwc",
     "ELEM",
     "activations NCHW -> NCHW[CB]c, out[N,C/CB,H,W,CB]",
     {REQ("N", "batch"), REQ("C", "channels"), REQ("H", "height"), REQ("W", "width"),
      OPT("CB", 16, 1, "channel block")},
     5,
     te_layout_nchwc},
    {"conv3d_ndhwc",
     "C3D",
     "3-D convolution, data[N,D,H,W,CI], weight[K,K,K,CI/G,CO]",
     {REQ("N", "batch"), REQ("D", "depth"), REQ("H", "height"), REQ("W", "width"),
      REQ("CI", "input channels"), REQ("CO", "output channels"), REQ("K", "kernel size"),
      REQ("S", "stride"), PAD, OPT("DIL", 1, 1, "dilation"), OPT("G", 1, 1, "groups")},
     11,
     te_conv3d},
    {"depthwise_conv2d_nhwc",
     "DEP",
     "depthwise convolution, data[N,H,W,C], weight[K,K,C]",
     {REQ("N", "batch"), REQ("H", "height"), REQ("W", "width"), REQ("C", "channels"),
      REQ("K", "kernel size"), REQ("S", "stride"), PAD, OPT("DIL", 1, 1, "dilation")},
     8,
     te_depthwise},
    {"conv2d_transpose_nhwc",
     "T2D",
     "transposed convolution, data[N,H,W,CI], weight[K,K,CI,CO]",
     {REQ("N", "batch"), REQ("H", "height"), REQ("W", "width"), REQ("CI", "input channels"),
      REQ("CO", "output channels"), REQ("K", "kernel size"), REQ("S", "stride"), PAD},
     8,
     te_conv2d_transpose},
    {"conv2d_capsule_nhwijc",
     "CAP",
     "capsule convolution, data[N,H,W,CAP,CAP,CI], weight[K,K,CAP,CAP,CI,CO]",
     {REQ("N", "batch"), REQ("H", "height"), REQ("W", "width"), REQ("CI", "input channels"),
      REQ("CO", "output channels"), REQ("K", "kernel size"), REQ("S", "stride"), PAD,
      OPT("CAP", 4, 1, "capsule size")},
     9,
     te_capsule},
    {"norm_bmn",
     "NRM",
     "matrix norm: out[B] = sqrt(sum of A[B,M,N]^2)",
     {REQ("B", "batch"), REQ("M", "rows"), REQ("N", "columns")},
     3,
     te_norm},
    {"softmax",
     "SFM",
     "row softmax of A[M,N]",
     {REQ("M", "rows"), REQ("N", "columns")},
     2,
     te_softmax},
    {"conv2d_bn_relu",
     "CBR",
     "conv2d_nhwc + bias + batch-norm (scale, offset) + ReLU",
     {REQ("N", "batch"), REQ("H", "height"), REQ("W", "width"), REQ("CI", "input channels"),
      REQ("CO", "output channels"), REQ("K", "kernel size"), REQ("S", "stride"), PAD},
     8,
     te_cbr},
    {"transpose_batch_matmul",
     "TBG",
     "attention scores: transpose(query) x transpose(value)",
     {REQ("B", "batch"), REQ("SEQ", "sequence length"), REQ("HEADS", "heads"),
      REQ("DIM", "hidden size per head")},
     4,
     te_tbg},
    {"transpose_batch_matmul_softmax",
     "TBS",
     "attention: transpose + batch_matmul + softmax",
     {REQ("B", "batch"), REQ("SEQ", "sequence length"), REQ("HEADS", "heads"),
      REQ("DIM", "hidden size per head")},
     4,
     te_tbs},
    {"add", "ELEM", "C[M,N] = A + B", {REQ("M", "rows"), REQ("N", "columns")}, 2, te_add},
    {"relu", "ELEM", "B[M,N] = max(A, 0)", {REQ("M", "rows"), REQ("N", "columns")}, 2, te_relu},
    {"sigmoid",
     "ELEM",
     "B[M,N] = sigmoid(A)",
     {REQ("M", "rows"), REQ("N", "columns")},
     2,
     te_sigmoid},
};

int tt_op_library_count(void)
{
    return (int)TT_ARRAY_LEN(library);
}

const tt_op_def *tt_op_library_get(int i)
{
    return i >= 0 && i < tt_op_library_count() ? &library[i] : NULL;
}

const tt_op_def *tt_op_library_find(const char *name, size_t len)
{
    for (int i = 0; i < tt_op_library_count(); i++)
        if (strlen(library[i].name) == len && memcmp(library[i].name, name, len) == 0)
            return &library[i];
    return NULL;
}
