#include "random_schedule.h"

#include <string.h>

const char *const tt_test_workloads[] = {
    "matmul:M=12,N=10,K=8",
    "batch_matmul:B=2,M=6,N=5,K=4",
    "conv1d_nlc:N=1,L=12,CI=4,CO=6,K=3,S=2,P=1",
    "conv2d_nhwc:N=1,H=7,W=7,CI=4,CO=6,K=3,S=1,P=1",
    "conv2d_nhwc:N=1,H=8,W=8,CI=4,CO=8,K=3,S=2,P=1,G=2",
    "conv2d_nhwc:N=1,H=9,W=9,CI=3,CO=4,K=3,S=1,P=2,DIL=2",
    "conv2d_nchw:N=1,CI=3,H=7,W=7,CO=4,K=3,S=2,P=1",
    "conv2d_nchwc:N=1,CI=4,H=6,W=6,CO=8,K=3,S=1,P=1,IC=2,OC=4",
    "conv2d_nchwc:N=1,CI=4,H=7,W=7,CO=4,K=3,S=2,P=1,IC=4,OC=2",
    "layout_nchwc:N=1,C=8,H=3,W=5,CB=4",
    "conv3d_ndhwc:N=1,D=4,H=5,W=5,CI=2,CO=3,K=3,S=1,P=1",
    "depthwise_conv2d_nhwc:N=1,H=8,W=8,C=4,K=3,S=2,P=1",
    "conv2d_transpose_nhwc:N=1,H=4,W=4,CI=4,CO=3,K=4,S=2,P=1",
    "conv2d_capsule_nhwijc:N=1,H=6,W=6,CI=2,CO=2,K=3,S=2,P=1,CAP=2",
    "norm_bmn:B=2,M=6,N=5",
    "softmax:M=6,N=10",
    "conv2d_bn_relu:N=1,H=6,W=6,CI=3,CO=4,K=3,S=1,P=1",
    "transpose_batch_matmul:B=1,SEQ=6,HEADS=2,DIM=4",
    "transpose_batch_matmul_softmax:B=1,SEQ=6,HEADS=2,DIM=4",
    "add:M=9,N=7",
    "relu:M=9,N=7",
    "sigmoid:M=5,N=6",
    "matmul:M=8,N=8,K=8,dtype=int32",
    "matmul:M=8,N=8,K=8,dtype=float64",
    "te:C[i,j] += A[i,k] * B[k,j]; D[i,j] = max(C[i,j] + E[j], 0); A:float32[10,6]; "
    "B:float32[6,12]; E:float32[12]",
    "te:B[i,j] = tanh(A[i,j]) + abs(A[i,j]) + sqrt(abs(A[i,j])) + log(abs(A[i,j]) + 1); "
    "A:float32[6,16]",
};
const size_t tt_test_nworkloads = sizeof(tt_test_workloads) / sizeof(tt_test_workloads[0]);

static int random_compute_stage(const tt_state *st, tt_rng *rng)
{
    int cand[TT_MAX_STAGES], n = 0;
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_stage *sg = &st->stages.data[i];
        if (!st->dag.ops.data[sg->op].is_placeholder && sg->at != TT_AT_INLINE)
            cand[n++] = (int)i;
    }
    return n ? cand[tt_rng_below(rng, (uint64_t)n)] : -1;
}

static int64_t random_factor(tt_rng *rng, int64_t extent)
{
    /* Mostly divisors (the common case), sometimes anything (non-divisible splits). */
    if (tt_rng_below(rng, 4) == 0)
        return 1 + (int64_t)tt_rng_below(rng, (uint64_t)(extent < 8 ? extent + 1 : 8));
    int64_t divs[64], n = 0;
    for (int64_t d = 1; d <= extent && n < 64; d++)
        if (extent % d == 0)
            divs[n++] = d;
    return divs[tt_rng_below(rng, (uint64_t)n)];
}

static bool try_step(tt_state *st, tt_rng *rng)
{
    tt_errbuf err;
    int s = random_compute_stage(st, rng);
    if (s < 0)
        return false;
    const tt_stage *sg = &st->stages.data[s];
    int ni = sg->niters;
    if (ni == 0)
        return false;
    tt_step step;
    memset(&step, 0, sizeof(step));
    step.stage = s;
    switch (tt_rng_below(rng, 12)) {
    case 0:
    case 1:
    case 2: { /* split, the most common step */
        step.kind = TT_STEP_SPLIT;
        step.iter = (int)tt_rng_below(rng, (uint64_t)ni);
        step.extent = sg->iters[step.iter].extent;
        step.nlen = 1 + (int)tt_rng_below(rng, 3);
        int64_t rest = step.extent;
        for (int k = step.nlen - 1; k >= 0; k--) {
            step.lengths[k] = random_factor(rng, rest > 0 ? rest : 1);
            rest = (rest + step.lengths[k] - 1) / step.lengths[k];
        }
        step.inner_to_outer = tt_rng_below(rng, 5) != 0;
        break;
    }
    case 3: { /* fuse a random consecutive run */
        step.kind = TT_STEP_FUSE;
        int a = (int)tt_rng_below(rng, (uint64_t)ni);
        int len = 1 + (int)tt_rng_below(rng, (uint64_t)(ni - a < 3 ? ni - a : 3));
        step.nids = len;
        for (int k = 0; k < len; k++)
            step.ids[k] = a + k;
        break;
    }
    case 4: { /* reorder: random permutation */
        step.kind = TT_STEP_REORDER;
        step.nids = ni;
        for (int k = 0; k < ni; k++)
            step.ids[k] = k;
        for (int k = ni - 1; k > 0; k--) {
            int j = (int)tt_rng_below(rng, (uint64_t)(k + 1));
            int t = step.ids[k];
            step.ids[k] = step.ids[j];
            step.ids[j] = t;
        }
        break;
    }
    case 5: { /* annotate */
        static const tt_ann anns[] = {TT_ANN_PARALLEL, TT_ANN_VECTORIZE, TT_ANN_UNROLL,
                                      TT_ANN_BLOCK_X,  TT_ANN_THREAD_X,  TT_ANN_VTHREAD};
        step.kind = TT_STEP_ANNOTATE;
        step.ann = anns[tt_rng_below(rng, TT_ARRAY_LEN(anns))];
        step.iter = step.ann == TT_ANN_VECTORIZE ? ni - 1 : (int)tt_rng_below(rng, (uint64_t)ni);
        break;
    }
    case 6: { /* compute_at a consumer's iterator */
        step.kind = TT_STEP_COMPUTE_AT;
        int t = random_compute_stage(st, rng);
        if (t < 0 || t == s)
            return false;
        step.target_stage = t;
        step.target_iter = (int)tt_rng_below(rng, (uint64_t)st->stages.data[t].niters);
        break;
    }
    case 7: step.kind = TT_STEP_COMPUTE_INLINE; break;
    case 8: {
        /* Follow an earlier split (as Ansor tiles a consumer like its producer). */
        int sp[64], nsp = 0;
        for (size_t i = 0; i < st->steps.len && nsp < 64; i++)
            if (st->steps.data[i].kind == TT_STEP_SPLIT)
                sp[nsp++] = (int)i;
        if (nsp && tt_rng_below(rng, 2)) {
            int src = sp[tt_rng_below(rng, (uint64_t)nsp)];
            step.iter = (int)tt_rng_below(rng, (uint64_t)ni);
            if (tt_rng_below(rng, 2)) {
                step.kind = TT_STEP_FOLLOW_SPLIT;
                step.src_step = src;
                step.n_split = 1 + (int)tt_rng_below(rng, (uint64_t)st->steps.data[src].nlen + 1);
            } else {
                step.kind = TT_STEP_FOLLOW_FUSED_SPLIT;
                step.nsrc = 1;
                step.srcs[0] = src;
                step.level = (int)tt_rng_below(rng, (uint64_t)st->steps.data[src].nlen);
                step.factor_or_nparts = (int)tt_rng_below(rng, 2);
            }
            break;
        }
        step.kind = tt_rng_below(rng, 2) ? TT_STEP_COMPUTE_ROOT : TT_STEP_PRAGMA;
        step.iter = 0;
        snprintf(step.pragma, sizeof(step.pragma), "auto_unroll_max_step$%d",
                 (int)tt_rng_below(rng, 3) * 16);
        break;
    }
    case 9: { /* cache_read of something the stage reads */
        step.kind = TT_STEP_CACHE_READ;
        int src = (int)tt_rng_below(rng, (uint64_t)st->stages.len);
        step.stage = src;
        strcpy(step.scope, tt_rng_below(rng, 2) ? "shared" : "local");
        step.nids = 1;
        step.ids[0] = s;
        break;
    }
    case 10: {
        /* now and then a constant input passed in its reader's layout */
        int lr = -1;
        for (size_t i = 0; i < st->stages.len; i++) {
            const tt_op *op = &st->dag.ops.data[st->stages.data[i].op];
            if (op->is_placeholder && (op->attrs & TT_OP_ATTR_CONSTANT) &&
                !st->stages.data[i].layout_rewrite)
                lr = (int)i;
        }
        if (lr >= 0 && tt_rng_below(rng, 3) == 0) {
            step.kind = TT_STEP_LAYOUT_REWRITE;
            step.stage = lr;
        } else {
            step.kind = TT_STEP_CACHE_WRITE;
            strcpy(step.scope, "local");
        }
        break;
    }
    default: {
        int r[TT_MAX_ITERS], nr = 0;
        for (int k = 0; k < ni; k++)
            if (sg->iters[k].kind == TT_ITER_REDUCE)
                r[nr++] = k;
        if (nr && tt_rng_below(rng, 2)) {
            step.kind = TT_STEP_RFACTOR;
            step.iter = r[tt_rng_below(rng, (uint64_t)nr)];
            step.factor_iter = (int)tt_rng_below(rng, (uint64_t)st->dag.ops.data[sg->op].ndim + 1);
        } else {
            step.kind = TT_STEP_STORAGE_ALIGN;
            step.iter = 0;
            step.factor = 1 + (int)tt_rng_below(rng, 8);
            step.offset = (int)tt_rng_below(rng, (uint64_t)step.factor);
        }
        break;
    }
    }
    return tt_state_apply(st, &step, &err) == TT_OK;
}

int tt_test_random_steps(tt_state *st, tt_rng *rng, int nsteps)
{
    int applied = 0;
    for (int i = 0; i < nsteps * 4 && applied < nsteps; i++)
        applied += try_step(st, rng);
    return applied;
}
