/* GPU element-wise kernels: unary math and activations, the predicates
 * IsNan, IsInf and IsFinite, binary math with
 * NumPy broadcasting, the activation gradients, AddN, BiasAdd, Cast, Fill,
 * ZerosLike and OnesLike. Shapes are checked here, on the host, with the
 * CPU kernels' rules and messages; the CUDA code (cwise.cu) only
 * computes. */
#include <string.h>

#include "common/graph.h"
#include "executor/devices/cuda/gpu_internal.h"
#include "executor/kernels/broadcast.h"
#include "executor/kernels/kernels_util.h"

static bool s_float_type(zf_dtype_t t)
{
    return t == ZF_HALF || t == ZF_FLOAT || t == ZF_DOUBLE;
}

static zf_status_t s_check_float(const zf_kernel_ctx_t *ctx, int i)
{
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[i]);
    if (s_float_type(t)) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s inputs",
                           zf_kernels_dtype_name((int)t));
}

/* ---- unary ------------------------------------------------------------------ */

/* LeakyRelu's and LeakyReluGrad's alpha (attr, default 0.2), kept in the
 * state pointer's bits. */
static zf_status_t s_alpha_create(const Tensorflow__NodeDef *node, void **state)
{
    float alpha = 0.2f;
    ZF_TRY(zf_node_attr_float_or(node, "alpha", 0.2f, &alpha));
    uint32_t bits = 0;
    memcpy(&bits, &alpha, sizeof bits);
    *state = (void *)(uintptr_t)bits;
    return ZF_STATUS_OK;
}

static double s_alpha(const zf_kernel_ctx_t *ctx)
{
    uint32_t bits = (uint32_t)(uintptr_t)ctx->state;
    float alpha = 0;
    memcpy(&alpha, &bits, sizeof alpha);
    return alpha;
}

static zf_status_t s_unary_p(zf_kernel_ctx_t *ctx, zf__gpu_unary_t op, double param)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    ZF_TRY(s_check_float(ctx, 0));
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(in), zf_tensor_shape(in), &out));
    return zf__gpu_kernel_launched(
        ctx, zf__gpu_launch_unary(g->stream, op, zf_tensor_dtype(in), zf_tensor_data(in),
                                  zf_tensor_data(out), zf_tensor_num_elements(in), param));
}

#define S_UNARY(name, op)                                                                          \
    static zf_status_t name(zf_kernel_ctx_t *ctx)                                                  \
    {                                                                                              \
        return s_unary_p(ctx, op, 0.0);                                                            \
    }

S_UNARY(s_neg, ZF__GPU_NEG)
S_UNARY(s_abs, ZF__GPU_ABS)
S_UNARY(s_square, ZF__GPU_SQUARE)
S_UNARY(s_sqrt, ZF__GPU_SQRT)
S_UNARY(s_rsqrt, ZF__GPU_RSQRT)
S_UNARY(s_exp, ZF__GPU_EXP)
S_UNARY(s_log, ZF__GPU_LOG)
S_UNARY(s_reciprocal, ZF__GPU_RECIPROCAL)
S_UNARY(s_relu, ZF__GPU_RELU)
S_UNARY(s_relu6, ZF__GPU_RELU6)
S_UNARY(s_sigmoid, ZF__GPU_SIGMOID)
S_UNARY(s_tanh, ZF__GPU_TANH)
S_UNARY(s_elu, ZF__GPU_ELU)
S_UNARY(s_selu, ZF__GPU_SELU)
S_UNARY(s_softplus, ZF__GPU_SOFTPLUS)
S_UNARY(s_softsign, ZF__GPU_SOFTSIGN)
S_UNARY(s_erf, ZF__GPU_ERF)
S_UNARY(s_erfc, ZF__GPU_ERFC)
S_UNARY(s_floor, ZF__GPU_FLOOR)
S_UNARY(s_ceil, ZF__GPU_CEIL)
S_UNARY(s_round, ZF__GPU_ROUND)
S_UNARY(s_sign, ZF__GPU_SIGN)

static zf_status_t s_leaky_relu(zf_kernel_ctx_t *ctx)
{
    return s_unary_p(ctx, ZF__GPU_LEAKY_RELU, s_alpha(ctx));
}

/* ---- predicates --------------------------------------------------------------- */

static zf_status_t s_predicate(zf_kernel_ctx_t *ctx, zf__gpu_predicate_t op)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(s_check_float(ctx, 0));
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, ZF_BOOL, zf_tensor_shape(in), &out));
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    return zf__gpu_kernel_launched(
        ctx, zf__gpu_launch_predicate(g->stream, op, zf_tensor_dtype(in), zf_tensor_data(in),
                                      zf_tensor_data(out), zf_tensor_num_elements(in)));
}

static zf_status_t s_is_nan(zf_kernel_ctx_t *ctx)
{
    return s_predicate(ctx, ZF__GPU_IS_NAN);
}

static zf_status_t s_is_inf(zf_kernel_ctx_t *ctx)
{
    return s_predicate(ctx, ZF__GPU_IS_INF);
}

static zf_status_t s_is_finite(zf_kernel_ctx_t *ctx)
{
    return s_predicate(ctx, ZF__GPU_IS_FINITE);
}

/* ---- binary ----------------------------------------------------------------- */

static zf_status_t s_binary(zf_kernel_ctx_t *ctx, zf__gpu_binary_t op)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    zf_dtype_t da = zf_tensor_dtype(a), db = zf_tensor_dtype(b);
    if (da != db)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "both inputs must have the same dtype, got %s and %s",
                               zf_kernels_dtype_name((int)da), zf_kernels_dtype_name((int)db));
    ZF_TRY(s_check_float(ctx, 0));
    zf_shape_t shape;
    char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    if (!zf_kernels_broadcast_shape(zf_tensor_shape(a), zf_tensor_shape(b), &shape))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
                               zf_kernels_shape_str(a, sa), zf_kernels_shape_str(b, sb));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, da, &shape, &out));
    int64_t n = zf_tensor_num_elements(out);
    if (n == 0) return ZF_STATUS_OK;
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    ZF_TRY(zf__gpu_check_device_input(ctx, 1));
    zf_broadcast_t bc;
    zf_broadcast_plan(zf_tensor_shape(a), zf_tensor_shape(b), &shape, &bc);
    return zf__gpu_kernel_launched(ctx, zf__gpu_launch_binary(g->stream, op, da, zf_tensor_data(a),
                                                              zf_tensor_data(b),
                                                              zf_tensor_data(out), n, &bc,
                                                              0.0));
}

#define S_BINARY(name, op)                                                                         \
    static zf_status_t name(zf_kernel_ctx_t *ctx)                                                  \
    {                                                                                              \
        return s_binary(ctx, op);                                                                  \
    }

S_BINARY(s_add, ZF__GPU_ADD)
S_BINARY(s_sub, ZF__GPU_SUB)
S_BINARY(s_mul, ZF__GPU_MUL)
S_BINARY(s_div, ZF__GPU_DIV)
S_BINARY(s_maximum, ZF__GPU_MAXIMUM)
S_BINARY(s_minimum, ZF__GPU_MINIMUM)
S_BINARY(s_sqdiff, ZF__GPU_SQUARED_DIFFERENCE)
S_BINARY(s_pow, ZF__GPU_POW)

/* ---- activation gradients ------------------------------------------------------ */

/* Two inputs of one dtype and one shape (no broadcasting, as in
 * TensorFlow), named na and nb in errors as the CPU kernels name them. */
static zf_status_t s_grad(zf_kernel_ctx_t *ctx, zf__gpu_binary_t op, const char *na,
                          const char *nb, double param)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(s_check_float(ctx, 0));
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    zf_dtype_t t = zf_tensor_dtype(a);
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, t));
    const zf_shape_t *shape = zf_tensor_shape(a);
    if (!zf_shape_equal(shape, zf_tensor_shape(b))) {
        char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "%s and %s must have the same shape: %s vs. %s", na, nb,
                               zf_kernels_shape_str(a, sa), zf_kernels_shape_str(b, sb));
    }
    zf__gpu_t *g = NULL; /* after the checks, which need no GPU */
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, t, shape, &out));
    int64_t n = zf_tensor_num_elements(out);
    if (n == 0) return ZF_STATUS_OK;
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    ZF_TRY(zf__gpu_check_device_input(ctx, 1));
    zf_broadcast_t bc;
    zf_broadcast_plan(shape, shape, shape, &bc);
    return zf__gpu_kernel_launched(ctx, zf__gpu_launch_binary(g->stream, op, t, zf_tensor_data(a),
                                                              zf_tensor_data(b),
                                                              zf_tensor_data(out), n, &bc, param));
}

#define S_GRAD(name, op, na, nb)                                                                   \
    static zf_status_t name(zf_kernel_ctx_t *ctx)                                                  \
    {                                                                                              \
        return s_grad(ctx, op, na, nb, 0.0);                                                       \
    }

S_GRAD(s_relu_grad, ZF__GPU_RELU_GRAD, "gradients", "features")
S_GRAD(s_relu6_grad, ZF__GPU_RELU6_GRAD, "gradients", "features")
S_GRAD(s_softplus_grad, ZF__GPU_SOFTPLUS_GRAD, "gradients", "features")
S_GRAD(s_softsign_grad, ZF__GPU_SOFTSIGN_GRAD, "gradients", "features")
S_GRAD(s_elu_grad, ZF__GPU_ELU_GRAD, "gradients", "outputs")
S_GRAD(s_selu_grad, ZF__GPU_SELU_GRAD, "gradients", "outputs")
S_GRAD(s_sigmoid_grad, ZF__GPU_SIGMOID_GRAD, "y", "dy")
S_GRAD(s_tanh_grad, ZF__GPU_TANH_GRAD, "y", "dy")
S_GRAD(s_sqrt_grad, ZF__GPU_SQRT_GRAD, "y", "dy")
S_GRAD(s_rsqrt_grad, ZF__GPU_RSQRT_GRAD, "y", "dy")
S_GRAD(s_reciprocal_grad, ZF__GPU_RECIPROCAL_GRAD, "y", "dy")

static zf_status_t s_leaky_relu_grad(zf_kernel_ctx_t *ctx)
{
    return s_grad(ctx, ZF__GPU_LEAKY_RELU_GRAD, "gradients", "features", s_alpha(ctx));
}

/* ---- AddN ---------------------------------------------------------------------- */

/* The inputs in launches of up to ZF__GPU_ADD_N_MAX, the first writing
 * the output and the others adding to it, in input order. */
static zf_status_t s_add_n(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(s_check_float(ctx, 0));
    ZF_TRY(zf__kernels_addn_check(ctx));
    zf__gpu_t *g = NULL; /* after the checks, which need no GPU */
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *x = ctx->inputs[0];
    zf_dtype_t t = zf_tensor_dtype(x);
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, t, zf_tensor_shape(x), &out));
    int64_t n = zf_tensor_num_elements(out);
    if (n == 0) return ZF_STATUS_OK;
    for (int i = 0; i < ctx->num_inputs; i++) ZF_TRY(zf__gpu_check_device_input(ctx, i));
    for (int first = 0; first < ctx->num_inputs; first += ZF__GPU_ADD_N_MAX) {
        const void *in[ZF__GPU_ADD_N_MAX];
        int k = 0;
        for (; k < ZF__GPU_ADD_N_MAX && first + k < ctx->num_inputs; k++)
            in[k] = zf_tensor_data(ctx->inputs[first + k]);
        ZF_TRY(zf__gpu_kernel_launched(ctx, zf__gpu_launch_add_n(g->stream, t, in, k, first > 0,
                                                                 zf_tensor_data(out), n)));
    }
    return ZF_STATUS_OK;
}

/* ---- BiasAdd ------------------------------------------------------------------ */

/* The channel dim: the last one, or dim 1 for NCHW; and the elements
 * after it (one channel's run). */
static zf_status_t s_bias_layout(zf_kernel_ctx_t *ctx, int64_t *channels, int64_t *inner)
{
    const zf_tensor_t *x = ctx->inputs[0], *bias = ctx->inputs[1];
    const zf_shape_t *xs = zf_tensor_shape(x), *bs = zf_tensor_shape(bias);
    char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
    if (xs->rank < 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Input tensor must be at least 2D: %s",
                               zf_kernels_shape_str(x, a));
    if (bs->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Biases must be 1D: %s",
                               zf_kernels_shape_str(bias, b));
    const uint8_t *fmt = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string_or(ctx->node, "data_format", "NHWC", &fmt, &len));
    bool nchw = len == 4 && memcmp(fmt, "NCHW", 4) == 0;
    if (!nchw && !(len == 4 && memcmp(fmt, "NHWC", 4) == 0))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "data_format must be NHWC or NCHW, got '%.*s'",
                               (int)(len > 16 ? 16 : len), (const char *)fmt);
    int c = nchw ? 1 : xs->rank - 1;
    if (bs->dims[0] != xs->dims[c])
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Must provide as many biases as the %s dimension of the input "
                               "tensor: %s vs. %s",
                               nchw ? "channel" : "last", zf_kernels_shape_str(bias, b),
                               zf_kernels_shape_str(x, a));
    *channels = xs->dims[c];
    *inner = 1;
    for (int k = c + 1; k < xs->rank; k++) *inner *= xs->dims[k];
    return ZF_STATUS_OK;
}

static zf_status_t s_bias_add(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *x = ctx->inputs[0], *bias = ctx->inputs[1];
    ZF_TRY(s_check_float(ctx, 0));
    if (zf_tensor_dtype(bias) != zf_tensor_dtype(x))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "bias must be %s like the input, got %s",
                               zf_kernels_dtype_name((int)zf_tensor_dtype(x)),
                               zf_kernels_dtype_name((int)zf_tensor_dtype(bias)));
    int64_t channels = 0, inner = 1;
    ZF_TRY(s_bias_layout(ctx, &channels, &inner));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(x), zf_tensor_shape(x), &out));
    int64_t n = zf_tensor_num_elements(x);
    if (n == 0) return ZF_STATUS_OK;
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    ZF_TRY(zf__gpu_check_device_input(ctx, 1));
    return zf__gpu_kernel_launched(
        ctx,
        zf__gpu_launch_bias_add(g->stream, zf_tensor_dtype(x), zf_tensor_data(x),
                                zf_tensor_data(bias), zf_tensor_data(out), n, channels, inner));
}

/* ---- Cast -------------------------------------------------------------------- */

/* The destination type is checked when the partition is built, so a cast
 * the GPU cannot do fails before anything runs. */
static zf_status_t s_cast_create(const Tensorflow__NodeDef *node, void **state)
{
    zf_dtype_t src = ZF_INVALID, dst = ZF_INVALID;
    ZF_TRY(zf_node_attr_type(node, "SrcT", &src));
    ZF_TRY(zf_node_attr_type(node, "DstT", &dst));
    if (!zf__gpu_cast_supported(src, dst))
        return zf_unimplemented("%s (Cast): no GPU kernel casts %s to %s", node->name,
                                zf_kernels_dtype_name((int)src), zf_kernels_dtype_name((int)dst));
    *state = (void *)(uintptr_t)dst;
    return ZF_STATUS_OK;
}

static zf_status_t s_cast(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_dtype_t src = zf_tensor_dtype(in), dst = (zf_dtype_t)(uintptr_t)ctx->state;
    if (!zf__gpu_cast_supported(src, dst))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel casts %s to %s",
                               zf_kernels_dtype_name((int)src), zf_kernels_dtype_name((int)dst));
    if (src == dst) {
        zf_kernel_set_output(ctx, 0, ctx->inputs[0]);
        return ZF_STATUS_OK;
    }
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, dst, zf_tensor_shape(in), &out));
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    return zf__gpu_kernel_launched(ctx, zf__gpu_launch_cast(g->stream, src, zf_tensor_data(in), dst,
                                                            zf_tensor_data(out),
                                                            zf_tensor_num_elements(in)));
}

/* ---- Fill, ZerosLike, OnesLike ------------------------------------------------ */

static zf_status_t s_fill_shape(zf_kernel_ctx_t *ctx, zf_shape_t *shape)
{
    const zf_tensor_t *t = ctx->inputs[0];
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_memory_kind(t) == ZF_MEMORY_DEVICE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "dims must be in host memory");
    if (zf_tensor_shape(t)->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "dims must be a vector, got shape %s",
                               zf_kernels_shape_str(t, sbuf));
    int64_t dims[ZF_MAX_RANK];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 0, "dims", dims, ZF_MAX_RANK, &n));
    for (int k = 0; k < n; k++)
        if (dims[k] < 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "dims[%d] = %lld must be non-negative",
                                   k, (long long)dims[k]);
    ZF_TRY(zf_shape_make(n, dims, shape));
    int64_t count = 0;
    zf_status_t s = zf_shape_num_elements(shape, &count);
    return zf_ok(s) ? s : zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
}

static zf_status_t s_fill(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *value = ctx->inputs[1];
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(value)->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "value must be a scalar, got shape %s",
                               zf_kernels_shape_str(value, sbuf));
    ZF_TRY(s_check_float(ctx, 1));
    zf_shape_t shape;
    ZF_TRY(s_fill_shape(ctx, &shape));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(value), &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    ZF_TRY(zf__gpu_check_device_input(ctx, 1));
    return zf__gpu_kernel_launched(
        ctx, zf__gpu_launch_fill(g->stream, zf_tensor_dtype(value), zf_tensor_data(value),
                                 zf_tensor_data(out), zf_tensor_num_elements(out)));
}

static zf_status_t s_zeros_like(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(in), zf_tensor_shape(in), &out));
    if (zf_tensor_nbytes(out) == 0) return ZF_STATUS_OK;
    if (zf_tensor_memory_kind(out) != ZF_MEMORY_DEVICE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s tensors",
                               zf_kernels_dtype_name((int)zf_tensor_dtype(in)));
    return zf__gpu_kernel_launched(
        ctx, cudaMemsetAsync(zf_tensor_data(out), 0, zf_tensor_nbytes(out), g->stream));
}

static zf_status_t s_ones_like(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    ZF_TRY(s_check_float(ctx, 0));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(in), zf_tensor_shape(in), &out));
    return zf__gpu_kernel_launched(ctx, zf__gpu_launch_fill_scalar(g->stream, zf_tensor_dtype(in),
                                                                   1.0, zf_tensor_data(out),
                                                                   zf_tensor_num_elements(out)));
}

/* ---- registration ----------------------------------------------------------------- */

#define S_FLOAT ZF_TYPES_GPU_FLOAT

#define S_ALPHA_KERNEL(op_, compute_)                                                              \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = S_FLOAT, .create = s_alpha_create,     \
        .compute = (compute_)                                                                      \
    }

static const zf_kernel_t s_defs[] = {
    ZF__GPU_KERNEL("Neg", S_FLOAT, s_neg),
    ZF__GPU_KERNEL("Abs", S_FLOAT, s_abs),
    ZF__GPU_KERNEL("Square", S_FLOAT, s_square),
    ZF__GPU_KERNEL("Sqrt", S_FLOAT, s_sqrt),
    ZF__GPU_KERNEL("Rsqrt", S_FLOAT, s_rsqrt),
    ZF__GPU_KERNEL("Exp", S_FLOAT, s_exp),
    ZF__GPU_KERNEL("Log", S_FLOAT, s_log),
    ZF__GPU_KERNEL("Reciprocal", S_FLOAT, s_reciprocal),
    ZF__GPU_KERNEL("Relu", S_FLOAT, s_relu),
    ZF__GPU_KERNEL("Relu6", S_FLOAT, s_relu6),
    ZF__GPU_KERNEL("Sigmoid", S_FLOAT, s_sigmoid),
    ZF__GPU_KERNEL("Tanh", S_FLOAT, s_tanh),
    ZF__GPU_KERNEL("Elu", S_FLOAT, s_elu),
    ZF__GPU_KERNEL("Selu", S_FLOAT, s_selu),
    ZF__GPU_KERNEL("Softplus", S_FLOAT, s_softplus),
    ZF__GPU_KERNEL("Softsign", S_FLOAT, s_softsign),
    S_ALPHA_KERNEL("LeakyRelu", s_leaky_relu),
    ZF__GPU_KERNEL("Erf", S_FLOAT, s_erf),
    ZF__GPU_KERNEL("Erfc", S_FLOAT, s_erfc),
    ZF__GPU_KERNEL("Floor", S_FLOAT, s_floor),
    ZF__GPU_KERNEL("Ceil", S_FLOAT, s_ceil),
    ZF__GPU_KERNEL("Round", S_FLOAT, s_round),
    ZF__GPU_KERNEL("Sign", S_FLOAT, s_sign),
    ZF__GPU_KERNEL("IsNan", S_FLOAT, s_is_nan),
    ZF__GPU_KERNEL("IsInf", S_FLOAT, s_is_inf),
    ZF__GPU_KERNEL("IsFinite", S_FLOAT, s_is_finite),
    ZF__GPU_KERNEL("Add", S_FLOAT, s_add),
    ZF__GPU_KERNEL("AddV2", S_FLOAT, s_add),
    ZF__GPU_KERNEL("Sub", S_FLOAT, s_sub),
    ZF__GPU_KERNEL("Mul", S_FLOAT, s_mul),
    ZF__GPU_KERNEL("RealDiv", S_FLOAT, s_div),
    ZF__GPU_KERNEL("Div", S_FLOAT, s_div),
    ZF__GPU_KERNEL("Maximum", S_FLOAT, s_maximum),
    ZF__GPU_KERNEL("Minimum", S_FLOAT, s_minimum),
    ZF__GPU_KERNEL("SquaredDifference", S_FLOAT, s_sqdiff),
    ZF__GPU_KERNEL("Pow", S_FLOAT, s_pow),
    ZF__GPU_KERNEL("ReluGrad", S_FLOAT, s_relu_grad),
    ZF__GPU_KERNEL("Relu6Grad", S_FLOAT, s_relu6_grad),
    S_ALPHA_KERNEL("LeakyReluGrad", s_leaky_relu_grad),
    ZF__GPU_KERNEL("EluGrad", S_FLOAT, s_elu_grad),
    ZF__GPU_KERNEL("SeluGrad", S_FLOAT, s_selu_grad),
    ZF__GPU_KERNEL("SigmoidGrad", S_FLOAT, s_sigmoid_grad),
    ZF__GPU_KERNEL("TanhGrad", S_FLOAT, s_tanh_grad),
    ZF__GPU_KERNEL("SoftplusGrad", S_FLOAT, s_softplus_grad),
    ZF__GPU_KERNEL("SoftsignGrad", S_FLOAT, s_softsign_grad),
    ZF__GPU_KERNEL("SqrtGrad", S_FLOAT, s_sqrt_grad),
    ZF__GPU_KERNEL("RsqrtGrad", S_FLOAT, s_rsqrt_grad),
    ZF__GPU_KERNEL("ReciprocalGrad", S_FLOAT, s_reciprocal_grad),
    ZF__GPU_KERNEL("AddN", S_FLOAT, s_add_n),
    ZF__GPU_KERNEL("BiasAdd", S_FLOAT, s_bias_add),
    {.op = "Cast",
     .device_type = "GPU",
     .allowed_types = S_FLOAT | ZF_TYPE_BIT(ZF_INT64) | ZF_TYPE_BIT(ZF_BOOL),
     .create = s_cast_create,
     .compute = s_cast},
    {.op = "Fill",
     .device_type = "GPU",
     .allowed_types = S_FLOAT,
     .flags = ZF_KERNEL_SIZED_BY_VALUE,
     .compute = s_fill},
    ZF__GPU_KERNEL("ZerosLike", ZF_TYPES_GPU_DEVICE, s_zeros_like),
    ZF__GPU_KERNEL("OnesLike", S_FLOAT, s_ones_like),
};

zf_status_t zf__gpu_register_cwise(void)
{
    return zf__gpu_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
