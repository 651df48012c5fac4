/* CPU FusedBatchNorm, FusedBatchNormV2, FusedBatchNormV3 and their
 * gradients FusedBatchNormGrad, V2 and V3 (float; U float) on oneDNN (kernels_dnnl.c, one
 * primitive cache per node), with TensorFlow's outputs:
 *
 * - is_training: y from the batch's mean and (biased) variance, which go to
 *   reserve_space_1 and reserve_space_2; batch_mean and batch_variance
 *   are the running statistics: the batch's mean and its Bessel-corrected
 *   variance (n / (n - 1), n the elements per channel), blended into the
 *   mean and variance inputs as (1 - f) * old + f * new when
 *   exponential_avg_factor f is not 1 (with f = 1 the inputs may be
 *   empty).
 * - otherwise y from the given mean and variance, which batch_mean,
 *   batch_variance and both reserve spaces repeat.
 * - An empty x gives NaN batch statistics.
 * - reserve_space_3 (V3) is a scalar 0; the gradient's reserve_space_4/5
 *   (reserve_space_3/4 of the older gradients) are empty, as TensorFlow's
 *   CPU kernels give them.
 * - The gradients take the forward op's reserve spaces: with
 *   is_training the batch's mean and biased variance (x_backprop through
 *   the batch statistics), else the population ones (held constant).
 *
 * x is NHWC/NDHWC or NCHW/NCDHW (data_format), 4-D or 5-D. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_conv.h"
#include "executor/kernels/kernels_util.h"

typedef struct {
    float epsilon, factor; /* exponential_avg_factor */
    bool nchw, training;
    zf__dnnl_cache_t *dnnl;
} s_bn_t;

static void s_bn_destroy(void *state)
{
    s_bn_t *st = state;
    if (!st) return;
    zf__dnnl_cache_destroy(&st->dnnl);
    free(st);
}

static zf_status_t s_bn_create(const Tensorflow__NodeDef *node, void **state)
{
    s_bn_t st = {.epsilon = 0.0001f, .factor = 1.0f, .training = true};
    ZF_TRY(zf_node_attr_float_or(node, "epsilon", 0.0001f, &st.epsilon));
    ZF_TRY(zf_node_attr_float_or(node, "exponential_avg_factor", 1.0f, &st.factor));
    ZF_TRY(zf_node_attr_bool_or(node, "is_training", true, &st.training));
    const uint8_t *fmt = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string_or(node, "data_format", "NHWC", &fmt, &len));
    static const char *const formats[] = {"NHWC", "NDHWC", "NCHW", "NCDHW"};
    int f = 0;
    while (f < 4 && (strlen(formats[f]) != len || memcmp(formats[f], fmt, len) != 0)) f++;
    if (f == 4)
        return zf_invalid_argument("%s (%s): Invalid data format '%.*s'", node->name, node->op,
                                   (int)(len > 16 ? 16 : len), (const char *)fmt);
    st.nchw = f >= 2;
    if (zf_node_attr(node, "U")) {
        zf_dtype_t u;
        ZF_TRY(zf_node_attr_type(node, "U", &u));
        if (u != ZF_FLOAT)
            return zf_unimplemented("%s (%s): U must be float on CPU, got %s", node->name, node->op,
                                    zf_kernels_dtype_name((int)u));
    }
    if (!(st.epsilon >= 0) || !isfinite(st.factor))
        return zf_invalid_argument("%s (%s): epsilon must be at least 0 and "
                                   "exponential_avg_factor finite, got %g and %g",
                                   node->name, node->op, st.epsilon, st.factor);
    s_bn_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("batch norm kernel");
    *p = st;
    zf_status_t s = zf__dnnl_cache_new(&p->dnnl);
    if (!zf_ok(s)) {
        free(p);
        return s;
    }
    *state = p;
    return ZF_STATUS_OK;
}

/* x's geometry for oneDNN: n, c and the spatial size as h (w = 1). */
static zf_status_t s_geometry(const zf_kernel_ctx_t *ctx, const s_bn_t *st, const zf_tensor_t *x,
                              zf__win_kind_t kind, zf__win_geom_t *g)
{
    const zf_shape_t *s = zf_tensor_shape(x);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (s->rank != 4 && s->rank != 5)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "input must be 4 or 5-dimensional%s",
                               zf_kernels_shape_str(x, sbuf));
    int c = st->nchw ? 1 : s->rank - 1;
    *g = (zf__win_geom_t){.kind = kind,
                          .nchw = st->nchw,
                          .n = s->dims[0],
                          .h = 1,
                          .w = 1,
                          .c = s->dims[c],
                          .epsilon = st->epsilon};
    for (int i = 1; i < s->rank; i++)
        if (i != c) g->h *= s->dims[i];
    g->kh = g->kw = g->sh = g->sw = g->dh = g->dw = 1;
    g->oh = g->h;
    g->ow = 1;
    g->oc = g->c;
    return ZF_STATUS_OK;
}

/* Input i (named what) is a vector of c floats; with allow_empty, or empty. */
static zf_status_t s_check_vector(const zf_kernel_ctx_t *ctx, int i, const char *what, int64_t c,
                                  const char *when)
{
    const zf_tensor_t *t = ctx->inputs[i];
    char sbuf[ZF_SHAPE_STRING_MAX];
    ZF_TRY(zf_kernels_check_dtype(ctx, i, ZF_FLOAT));
    if (zf_tensor_shape(t)->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be 1-dimensional%s", what,
                               zf_kernels_shape_str(t, sbuf));
    if (!when || zf_tensor_num_elements(t) == c) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                           "%s%s must have the same number of elements as the channels of x, got "
                           "%lld and %lld",
                           when, what, (long long)zf_tensor_num_elements(t), (long long)c);
}

static float *s_floats(zf_tensor_t *t)
{
    return zf_tensor_data(t);
}

static void s_fill(zf_tensor_t *t, float v)
{
    float *p = s_floats(t);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) p[i] = v;
}

/* Allocates outputs first .. first + count - 1 as [c] vectors, and the
 * rest up to num_outputs (at most cap) as scalar zeros (scalar) or empty
 * vectors. */
static zf_status_t s_alloc_vectors(zf_kernel_ctx_t *ctx, int first, int count, int64_t c,
                                   bool scalar, zf_tensor_t **out, int cap)
{
    zf_shape_t vec = {.rank = 1, .dims = {c}}, empty = {.rank = 1, .dims = {0}};
    zf_shape_t rest = scalar ? zf_shape_scalar() : empty;
    for (int i = first; i < ctx->num_outputs && i < cap; i++) {
        ZF_TRY(zf_kernel_alloc_output(ctx, i, ZF_FLOAT, i < first + count ? &vec : &rest, &out[i]));
        if (i >= first + count && scalar) s_floats(out[i])[0] = 0;
    }
    return ZF_STATUS_OK;
}

/* ---- forward --------------------------------------------------------------------------- */

/* INVALID_ARGUMENT unless the node has at least n outputs. */
static zf_status_t s_check_outputs(const zf_kernel_ctx_t *ctx, int n)
{
    if (ctx->num_outputs >= n) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "expects %d outputs, got %d", n,
                           ctx->num_outputs);
}

static zf_status_t s_bn_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 5));
    ZF_TRY(s_check_outputs(ctx, 5));
    const s_bn_t *st = ctx->state;
    const zf_tensor_t *x = ctx->inputs[0];
    ZF_TRY(zf_kernels_check_dtype(ctx, 0, ZF_FLOAT));
    zf__win_geom_t g;
    ZF_TRY(s_geometry(ctx, st, x, st->training ? ZF__WIN_BN_TRAIN : ZF__WIN_BN_INFER, &g));
    bool running = !st->training || st->factor != 1.0f; /* mean and variance are read */
    const char *when =
        !st->training ? "When is_training=false, " : "When exponential_avg_factor != 1, ";
    ZF_TRY(s_check_vector(ctx, 1, "scale", g.c, ""));
    ZF_TRY(s_check_vector(ctx, 2, "offset", g.c, ""));
    ZF_TRY(s_check_vector(ctx, 3, "mean", g.c, running ? when : NULL));
    ZF_TRY(s_check_vector(ctx, 4, "variance", g.c, running ? when : NULL));
    zf_tensor_t *out[6] = {NULL};
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, ZF_FLOAT, zf_tensor_shape(x), &out[0]));
    ZF_TRY(s_alloc_vectors(ctx, 1, 4, g.c, true, out, 6));
    float *bmean = s_floats(out[1]), *bvar = s_floats(out[2]);
    float *smean = s_floats(out[3]), *svar = s_floats(out[4]);
    const float *mean = s_floats(ctx->inputs[3]), *var = s_floats(ctx->inputs[4]);
    if (zf_tensor_num_elements(x) == 0) {
        s_fill(out[1], NAN);
        s_fill(out[2], NAN);
        s_fill(out[3], 0);
        s_fill(out[4], 0);
        return ZF_STATUS_OK;
    }
    if (!st->training) {
        memcpy(smean, mean, (size_t)g.c * sizeof(float));
        memcpy(svar, var, (size_t)g.c * sizeof(float));
    }
    zf__dnnl_args_t a = {.src = x,
                         .out = out[0],
                         .scale = s_floats(ctx->inputs[1]),
                         .shift = s_floats(ctx->inputs[2]),
                         .mean = smean,
                         .variance = svar};
    ZF_TRY(zf__dnnl_exec(ctx, st->dnnl, &g, &a));
    int64_t n = g.n * g.h;
    float adjust = n > 1 ? (float)n / (float)(n - 1) : 1.0f, f = st->factor;
    for (int64_t c = 0; c < g.c; c++) {
        if (!st->training) {
            bmean[c] = mean[c];
            bvar[c] = var[c];
        } else if (f == 1.0f) {
            bmean[c] = smean[c];
            bvar[c] = svar[c] * adjust;
        } else {
            bmean[c] = (1.0f - f) * mean[c] + f * smean[c];
            bvar[c] = (1.0f - f) * var[c] + f * svar[c] * adjust;
        }
    }
    return ZF_STATUS_OK;
}

/* ---- FusedBatchNormGrad, V2, V3 ------------------------------------------------------------ */

static zf_status_t s_bn_grad_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 5));
    ZF_TRY(s_check_outputs(ctx, 3));
    const s_bn_t *st = ctx->state;
    const zf_tensor_t *dy = ctx->inputs[0], *x = ctx->inputs[1];
    ZF_TRY(zf_kernels_check_dtype(ctx, 0, ZF_FLOAT));
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, ZF_FLOAT));
    zf__win_geom_t g;
    ZF_TRY(s_geometry(ctx, st, x, st->training ? ZF__WIN_BN_BWD : ZF__WIN_BN_BWD_FROZEN, &g));
    char a1[ZF_SHAPE_STRING_MAX], a2[ZF_SHAPE_STRING_MAX];
    if (!zf_shape_equal(zf_tensor_shape(dy), zf_tensor_shape(x)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "x and y_backprop must have same shape, but x has shape %s and "
                               "y_backprop has shape %s",
                               zf_kernels_shape_str(x, a1), zf_kernels_shape_str(dy, a2));
    ZF_TRY(s_check_vector(ctx, 2, "scale", g.c, ""));
    ZF_TRY(s_check_vector(ctx, 3, "reserve_space_1", g.c, ""));
    ZF_TRY(s_check_vector(ctx, 4, "reserve_space_2", g.c, ""));
    zf_tensor_t *out[5] = {NULL};
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, ZF_FLOAT, zf_tensor_shape(x), &out[0]));
    ZF_TRY(s_alloc_vectors(ctx, 1, 2, g.c, false, out, 5));
    if (zf_tensor_num_elements(x) == 0) {
        s_fill(out[1], 0);
        s_fill(out[2], 0);
        return ZF_STATUS_OK;
    }
    zf__dnnl_args_t a = {.src = x,
                         .diff_dst = dy,
                         .out = out[0],
                         .scale = s_floats(ctx->inputs[2]),
                         .mean = s_floats(ctx->inputs[3]),
                         .variance = s_floats(ctx->inputs[4]),
                         .diff_scale = s_floats(out[1]),
                         .diff_shift = s_floats(out[2])};
    return zf__dnnl_exec(ctx, st->dnnl, &g, &a);
}

/* ---- registration ------------------------------------------------------------------------ */

#define S_KERNEL(op_, compute_)                                                                    \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = ZF_TYPE_BIT(ZF_FLOAT),                 \
        .flags = ZF_KERNEL_EXPENSIVE, .create = s_bn_create, .destroy = s_bn_destroy,              \
        .compute = (compute_)                                                                      \
    }

static const zf_kernel_t s_defs[] = {
    S_KERNEL("FusedBatchNorm", s_bn_compute),
    S_KERNEL("FusedBatchNormV2", s_bn_compute),
    S_KERNEL("FusedBatchNormV3", s_bn_compute),
    S_KERNEL("FusedBatchNormGrad", s_bn_grad_compute),
    S_KERNEL("FusedBatchNormGradV2", s_bn_grad_compute),
    S_KERNEL("FusedBatchNormGradV3", s_bn_grad_compute),
};

zf_status_t zf__kernels_register_batchnorm(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
