/* CPU neural-network kernels (FLOAT and DOUBLE): BiasAdd (NHWC and NCHW),
 * the activations Relu, Relu6 (also INT32 and INT64), Elu, Sigmoid and
 * Tanh, and Softmax and LogSoftmax over the last dim. Convolution and pooling are in
 * kernels_conv.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

/* ---- activations ----------------------------------------------------------------- */

#define S_ACTIVATION(name, T, EXPR)                                                                \
    static void name(const void *vin, void *vout, int64_t n)                                       \
    {                                                                                              \
        const T *in = vin;                                                                         \
        T *out = vout;                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = in[i];                                                                           \
            out[i] = (EXPR);                                                                       \
        }                                                                                          \
    }

S_ACTIVATION(s_relu_f32, float, x > 0.0f ? x : 0.0f)
S_ACTIVATION(s_relu_f64, double, x > 0.0 ? x : 0.0)
S_ACTIVATION(s_relu6_f32, float, x > 0.0f ? (x < 6.0f ? x : 6.0f) : 0.0f)
S_ACTIVATION(s_relu6_f64, double, x > 0.0 ? (x < 6.0 ? x : 6.0) : 0.0)
S_ACTIVATION(s_relu_i32, int32_t, x > 0 ? x : 0)
S_ACTIVATION(s_relu_i64, int64_t, x > 0 ? x : 0)
S_ACTIVATION(s_relu6_i32, int32_t, x > 0 ? (x < 6 ? x : 6) : 0)
S_ACTIVATION(s_relu6_i64, int64_t, x > 0 ? (x < 6 ? x : 6) : 0)
S_ACTIVATION(s_elu_f32, float, x > 0.0f ? x : expm1f(x))
S_ACTIVATION(s_elu_f64, double, x > 0.0 ? x : expm1(x))
S_ACTIVATION(s_sigmoid_f32, float, 1.0f / (1.0f + expf(-x)))
S_ACTIVATION(s_sigmoid_f64, double, 1.0 / (1.0 + exp(-x)))
S_ACTIVATION(s_tanh_f32, float, tanhf(x))
S_ACTIVATION(s_tanh_f64, double, tanh(x))

/* i32 and i64 may be NULL (floating types only). */
static zf_status_t s_activation(zf_kernel_ctx_t *ctx, zf_kernels_unary_fn f32,
                                zf_kernels_unary_fn f64, zf_kernels_unary_fn i32,
                                zf_kernels_unary_fn i64)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    zf_kernels_unary_fn fn = t == ZF_FLOAT    ? f32
                             : t == ZF_DOUBLE ? f64
                             : t == ZF_INT32  ? i32
                             : t == ZF_INT64  ? i64
                                              : NULL;
    if (!fn)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    return zf_kernels_run_unary(ctx, fn);
}

#define S_ACTIVATION_KERNEL(op)                                                                    \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        return s_activation(ctx, s_##op##_f32, s_##op##_f64, NULL, NULL);                          \
    }
#define S_ACTIVATION_KERNEL_REAL(op)                                                               \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        return s_activation(ctx, s_##op##_f32, s_##op##_f64, s_##op##_i32, s_##op##_i64);          \
    }

S_ACTIVATION_KERNEL_REAL(relu)
S_ACTIVATION_KERNEL_REAL(relu6)
S_ACTIVATION_KERNEL(elu)
S_ACTIVATION_KERNEL(sigmoid)
S_ACTIVATION_KERNEL(tanh)

/* ---- BiasAdd ------------------------------------------------------------------------- */

zf_status_t zf__kernels_bias_create(const Tensorflow__NodeDef *node, void **state)
{
    const uint8_t *fmt = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string_or(node, "data_format", "NHWC", &fmt, &len));
    bool nchw = len == 4 && memcmp(fmt, "NCHW", 4) == 0;
    if (!nchw && !(len == 4 && memcmp(fmt, "NHWC", 4) == 0))
        return zf_invalid_argument("%s (%s): data_format must be NHWC or NCHW, got '%.*s'",
                                   node->name, node->op, (int)(len > 16 ? 16 : len),
                                   (const char *)fmt);
    zf__kernels_bias_state_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory(node->op);
    st->nchw = nchw;
    *state = st;
    return ZF_STATUS_OK;
}

/* out[r, c, i] = v[r, c, i] + bias[c] for r in rows, c < channels, i < inner. */
typedef struct {
    zf_dtype_t dtype;
    const void *v, *bias;
    void *out;
    int64_t channels, inner;
} s_bias_job_t;

#define S_BIAS_ROWS(T)                                                                             \
    do {                                                                                           \
        const T *v = j->v, *b = j->bias;                                                           \
        T *o = j->out;                                                                             \
        for (int64_t r = begin; r < end; r++)                                                      \
            for (int64_t c = 0; c < j->channels; c++) {                                            \
                int64_t base = (r * j->channels + c) * j->inner;                                   \
                for (int64_t i = 0; i < j->inner; i++) o[base + i] = v[base + i] + b[c];           \
            }                                                                                      \
    } while (0)

static void s_bias_rows(void *arg, int64_t begin, int64_t end)
{
    const s_bias_job_t *j = arg;
    if (j->dtype == ZF_FLOAT)
        S_BIAS_ROWS(float);
    else
        S_BIAS_ROWS(double);
}

static zf_status_t s_bias_check(const zf_kernel_ctx_t *ctx, int channel_dim, bool nchw)
{
    const zf_tensor_t *v = ctx->inputs[0], *b = ctx->inputs[1];
    const zf_shape_t *vs = zf_tensor_shape(v), *bs = zf_tensor_shape(b);
    char s1[ZF_SHAPE_STRING_MAX], s2[ZF_SHAPE_STRING_MAX];
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, zf_tensor_dtype(v)));
    if (vs->rank < 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Input tensor must be at least 2D: %s",
                               zf_kernels_shape_str(v, s1));
    if (bs->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Biases must be 1D: %s",
                               zf_kernels_shape_str(b, s1));
    if (bs->dims[0] != vs->dims[channel_dim])
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Must provide as many biases as the %s dimension of the input "
                               "tensor: %s vs. %s",
                               nchw ? "channel" : "last", zf_kernels_shape_str(b, s1),
                               zf_kernels_shape_str(v, s2));
    return ZF_STATUS_OK;
}

static zf_status_t s_bias_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf__kernels_bias_state_t *st = ctx->state;
    const zf_tensor_t *v = ctx->inputs[0];
    const zf_shape_t *vs = zf_tensor_shape(v);
    zf_dtype_t t = zf_tensor_dtype(v);
    if (t != ZF_FLOAT && t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    int cdim = st->nchw ? 1 : vs->rank - 1;
    ZF_TRY(s_bias_check(ctx, vs->rank >= 2 ? cdim : 0, st->nchw));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, t, vs, &out));
    int64_t n = zf_tensor_num_elements(v);
    if (n == 0) return ZF_STATUS_OK;
    s_bias_job_t job = {
        t, zf_tensor_data(v), zf_tensor_data(ctx->inputs[1]), zf_tensor_data(out), vs->dims[cdim],
        1};
    for (int k = cdim + 1; k < vs->rank; k++) job.inner *= vs->dims[k];
    int64_t rows = n / (job.channels * job.inner);
    zf_kernels_parallel_for(ctx, rows, ZF_KERNELS_PARALLEL_MIN / (job.channels * job.inner) + 1,
                            s_bias_rows, &job);
    return ZF_STATUS_OK;
}

/* ---- Softmax, LogSoftmax ------------------------------------------------------------------- */

typedef struct {
    bool log;
    zf_dtype_t dtype;
    const void *in;
    void *out;
    int64_t cols;
} s_softmax_job_t;

/* Subtracting the row max keeps exp() from overflowing. */
#define S_SOFTMAX_ROWS(T, EXP, LOG)                                                                \
    do {                                                                                           \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *x = (const T *)j->in + r * j->cols;                                           \
            T *y = (T *)j->out + r * j->cols;                                                      \
            T mx = x[0];                                                                           \
            for (int64_t c = 1; c < j->cols; c++) mx = x[c] > mx ? x[c] : mx;                      \
            double sum = 0;                                                                        \
            for (int64_t c = 0; c < j->cols; c++) {                                                \
                T e = EXP(x[c] - mx);                                                              \
                if (!j->log) y[c] = e;                                                             \
                sum += e;                                                                          \
            }                                                                                      \
            if (j->log) {                                                                          \
                T ls = (T)LOG(sum);                                                                \
                for (int64_t c = 0; c < j->cols; c++) y[c] = x[c] - mx - ls;                       \
            } else {                                                                               \
                T inv = (T)(1.0 / sum);                                                            \
                for (int64_t c = 0; c < j->cols; c++) y[c] *= inv;                                 \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void s_softmax_rows(void *arg, int64_t begin, int64_t end)
{
    const s_softmax_job_t *j = arg;
    if (j->dtype == ZF_FLOAT)
        S_SOFTMAX_ROWS(float, expf, log);
    else
        S_SOFTMAX_ROWS(double, exp, log);
}

static zf_status_t s_softmax(zf_kernel_ctx_t *ctx, bool log)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *s = zf_tensor_shape(x);
    zf_dtype_t t = zf_tensor_dtype(x);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (t != ZF_FLOAT && t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    if (s->rank < 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "logits must have >= 1 dimension, got %s",
                               zf_kernels_shape_str(x, sbuf));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, t, s, &out));
    int64_t n = zf_tensor_num_elements(x), cols = s->dims[s->rank - 1];
    if (n == 0) return ZF_STATUS_OK;
    s_softmax_job_t job = {log, t, zf_tensor_data(x), zf_tensor_data(out), cols};
    zf_kernels_parallel_for(ctx, n / cols, ZF_KERNELS_PARALLEL_MIN / cols + 1, s_softmax_rows,
                            &job);
    return ZF_STATUS_OK;
}

static zf_status_t s_softmax_compute(zf_kernel_ctx_t *ctx)
{
    return s_softmax(ctx, false);
}

static zf_status_t s_log_softmax_compute(zf_kernel_ctx_t *ctx)
{
    return s_softmax(ctx, true);
}

/* ---- registration ------------------------------------------------------------------------------
 */

static const zf_kernel_t s_defs[] = {
    ZF_CPU_KERNEL("Relu", ZF_TYPES_REAL, s_relu_compute),
    ZF_CPU_KERNEL("Relu6", ZF_TYPES_REAL, s_relu6_compute),
    ZF_CPU_KERNEL("Elu", ZF_TYPES_FLOAT, s_elu_compute),
    ZF_CPU_KERNEL("Sigmoid", ZF_TYPES_FLOAT, s_sigmoid_compute),
    ZF_CPU_KERNEL("Tanh", ZF_TYPES_FLOAT, s_tanh_compute),
    ZF_CPU_KERNEL("Softmax", ZF_TYPES_FLOAT, s_softmax_compute),
    ZF_CPU_KERNEL("LogSoftmax", ZF_TYPES_FLOAT, s_log_softmax_compute),
    {.op = "BiasAdd",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_FLOAT,
     .create = zf__kernels_bias_create,
     .destroy = free,
     .compute = s_bias_compute},
};

zf_status_t zf__kernels_register_nn(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
