/* CPU activation kernels beyond kernels_nn.c's: LeakyRelu (attr alpha),
 * Selu, Softplus and Softsign, and the gradients ReluGrad, Relu6Grad,
 * LeakyReluGrad, EluGrad, SeluGrad, SigmoidGrad, TanhGrad, SoftplusGrad,
 * SoftsignGrad, SqrtGrad, RsqrtGrad and ReciprocalGrad.
 *
 * Every kernel here maps one or two inputs of one shape element by element
 * (gradients take no broadcasting, as in TensorFlow). ReluGrad and
 * Relu6Grad also take int32 and int64; the rest FLOAT and DOUBLE.
 *
 * The formulas are TensorFlow's: the Elu and Selu gradients read the
 * forward outputs (EluGrad: g * (y + 1) where y < 0, else g); Sigmoid,
 * Tanh, Sqrt, Rsqrt and Reciprocal gradients take (y, dy) with y the
 * forward output; the others take (gradients, features). Softplus returns
 * x above -log(eps) - 2 and exp(x) below log(eps) + 2, where log1p(exp(x))
 * would round to those anyway. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

/* Selu's constants: scale, and scale * alpha. */
#define S_SELU_SCALE       1.0507009873554804934193349852946
#define S_SELU_SCALE_ALPHA 1.7580993408473768599402175208123

/* out[i] = f(in0[i] [, in1[i]]) with a parameter p (LeakyRelu's alpha). */
typedef void (*s_map_fn)(const void *const *in, void *out, int64_t n, double p);

/* One function per dtype (float, double, int32, int64); NULL = not taken. */
typedef struct {
    s_map_fn f32, f64, i32, i64;
} s_map_fns_t;

/* x is input 0; for two-input maps g is input 0 and x input 1; T is the
 * element type. */
#define S_MAP1(name, TYPE, EXPR)                                                                   \
    static void name(const void *const *vin, void *vout, int64_t n, double p)                      \
    {                                                                                              \
        typedef TYPE T;                                                                            \
        const T *in = vin[0];                                                                      \
        T *out = vout;                                                                             \
        (void)p;                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = in[i];                                                                           \
            out[i] = (T)(EXPR);                                                                    \
        }                                                                                          \
    }

#define S_MAP2(name, TYPE, EXPR)                                                                   \
    static void name(const void *const *vin, void *vout, int64_t n, double p)                      \
    {                                                                                              \
        typedef TYPE T;                                                                            \
        const T *a = vin[0], *b = vin[1];                                                          \
        T *out = vout;                                                                             \
        (void)p;                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T g = a[i], x = b[i];                                                                  \
            out[i] = (T)(EXPR);                                                                    \
        }                                                                                          \
    }

/* Float and double from one expression (T names the type inside it). */
#define S_FLOAT1(op, EXPR)                                                                         \
    S_MAP1(s_##op##_f32, float, EXPR)                                                              \
    S_MAP1(s_##op##_f64, double, EXPR)
#define S_FLOAT2(op, EXPR)                                                                         \
    S_MAP2(s_##op##_f32, float, EXPR)                                                              \
    S_MAP2(s_##op##_f64, double, EXPR)

/* The Softplus thresholds, log(eps) + 2 of float (eps 2^-23) and double
 * (eps 2^-52). */
#define S_LN2             0.69314718055994530942
#define S_SOFTPLUS_TH_F32 ((float)(2.0 - 23.0 * S_LN2))
#define S_SOFTPLUS_TH_F64 (2.0 - 52.0 * S_LN2)

/* ---- forward ---------------------------------------------------------------------------- */

S_FLOAT1(leaky_relu, x > 0 ? x : x * (T)p)
S_FLOAT1(selu, x < 0 ? (T)S_SELU_SCALE_ALPHA * (T)expm1(x) : (T)S_SELU_SCALE * x)
S_MAP1(s_softplus_f32, float,
       x > -S_SOFTPLUS_TH_F32  ? x
       : x < S_SOFTPLUS_TH_F32 ? expf(x)
                               : log1pf(expf(x)))
S_MAP1(s_softplus_f64, double,
       x > -S_SOFTPLUS_TH_F64  ? x
       : x < S_SOFTPLUS_TH_F64 ? exp(x)
                               : log1p(exp(x)))
S_FLOAT1(softsign, x / (1 + (x < 0 ? -x : x)))

/* ---- gradients: (gradients, features) ---------------------------------------------------- */

#define S_RELU_GRAD  x > 0 ? g : 0
#define S_RELU6_GRAD x > 0 && x < 6 ? g : 0
S_FLOAT2(relu_grad, S_RELU_GRAD)
S_MAP2(s_relu_grad_i32, int32_t, S_RELU_GRAD)
S_MAP2(s_relu_grad_i64, int64_t, S_RELU_GRAD)
S_FLOAT2(relu6_grad, S_RELU6_GRAD)
S_MAP2(s_relu6_grad_i32, int32_t, S_RELU6_GRAD)
S_MAP2(s_relu6_grad_i64, int64_t, S_RELU6_GRAD)
S_FLOAT2(leaky_relu_grad, x > 0 ? g : g * (T)p)
S_FLOAT2(softplus_grad, g / (1 + (T)exp(-x)))
S_FLOAT2(softsign_grad, g / ((1 + (x < 0 ? -x : x)) * (1 + (x < 0 ? -x : x))))

/* ---- gradients from the forward output: (gradients, outputs) ------------------------------- */

S_FLOAT2(elu_grad, x < 0 ? g * (x + 1) : g)
S_FLOAT2(selu_grad, x < 0 ? g * (x + (T)S_SELU_SCALE_ALPHA) : g * (T)S_SELU_SCALE)

/* ---- gradients from the forward output: (y, dy) -------------------------------------------- */

/* Here g is y and x is dy. */
S_FLOAT2(sigmoid_grad, x *g *(1 - g))
S_FLOAT2(tanh_grad, x *(1 - g * g))
S_FLOAT2(sqrt_grad, x *(T)0.5 / g)
S_FLOAT2(rsqrt_grad, x *(T)-0.5 * g * g * g)
S_FLOAT2(reciprocal_grad, -x *g *g)

/* ---- the driver ------------------------------------------------------------------------------ */

typedef struct {
    double alpha;
} s_state_t;

/* LeakyRelu and LeakyReluGrad: attr alpha (default 0.2). */
static zf_status_t s_alpha_create(const Tensorflow__NodeDef *node, void **state)
{
    float alpha = 0.2f;
    ZF_TRY(zf_node_attr_float_or(node, "alpha", 0.2f, &alpha));
    s_state_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory("LeakyRelu kernel");
    st->alpha = alpha;
    *state = st;
    return ZF_STATUS_OK;
}

typedef struct {
    s_map_fn fn;
    const char *in[2];
    int nin;
    char *out;
    size_t elem;
    double p;
} s_job_t;

static void s_chunk(void *arg, int64_t begin, int64_t end)
{
    const s_job_t *j = arg;
    const void *in[2] = {NULL, NULL};
    for (int k = 0; k < j->nin; k++) in[k] = j->in[k] + (size_t)begin * j->elem;
    j->fn(in, j->out + (size_t)begin * j->elem, end - begin, j->p);
}

static s_map_fn s_pick(const s_map_fns_t *fns, zf_dtype_t t)
{
    switch (t) {
    case ZF_FLOAT: return fns->f32;
    case ZF_DOUBLE: return fns->f64;
    case ZF_INT32: return fns->i32;
    case ZF_INT64: return fns->i64;
    default: return NULL;
    }
}

/* The names TensorFlow gives a gradient's two inputs, for its errors. */
static void s_input_names(const char *op, const char **a, const char **b)
{
    bool from_y = !strcmp(op, "SigmoidGrad") || !strcmp(op, "TanhGrad") ||
                  !strcmp(op, "SqrtGrad") || !strcmp(op, "RsqrtGrad") ||
                  !strcmp(op, "ReciprocalGrad");
    bool from_outputs = !strcmp(op, "EluGrad") || !strcmp(op, "SeluGrad");
    *a = from_y ? "y" : "gradients";
    *b = from_y ? "dy" : from_outputs ? "outputs" : "features";
}

/* Checks nin inputs of one dtype and shape and maps them into output 0. */
static zf_status_t s_map(zf_kernel_ctx_t *ctx, int nin, const s_map_fns_t *fns)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, nin));
    const zf_tensor_t *x = ctx->inputs[0];
    zf_dtype_t t = zf_tensor_dtype(x);
    s_map_fn fn = s_pick(fns, t);
    if (!fn)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    if (nin == 2) {
        const zf_tensor_t *y = ctx->inputs[1];
        ZF_TRY(zf_kernels_check_dtype(ctx, 1, t));
        if (!zf_shape_equal(zf_tensor_shape(x), zf_tensor_shape(y))) {
            char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
            const char *na = NULL, *nb = NULL;
            s_input_names(ctx->node->op, &na, &nb);
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "%s and %s must have the same shape: %s vs. %s", na, nb,
                                   zf_kernels_shape_str(x, sa), zf_kernels_shape_str(y, sb));
        }
    }
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, t, zf_tensor_shape(x), &out));
    const s_state_t *st = ctx->state;
    s_job_t job = {.fn = fn,
                   .in = {zf_tensor_data(x), nin == 2 ? zf_tensor_data(ctx->inputs[1]) : NULL},
                   .nin = nin,
                   .out = zf_tensor_data(out),
                   .elem = zf_dtype_size(t),
                   .p = st ? st->alpha : 0.0};
    zf_kernels_parallel_for(ctx, zf_tensor_num_elements(x), ZF_KERNELS_PARALLEL_MIN, s_chunk, &job);
    return ZF_STATUS_OK;
}

#define S_KERNEL_FLOAT(op, nin)                                                                    \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        static const s_map_fns_t fns = {s_##op##_f32, s_##op##_f64, NULL, NULL};                   \
        return s_map(ctx, nin, &fns);                                                              \
    }
#define S_KERNEL_REAL(op, nin)                                                                     \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        static const s_map_fns_t fns = {s_##op##_f32, s_##op##_f64, s_##op##_i32, s_##op##_i64};   \
        return s_map(ctx, nin, &fns);                                                              \
    }

S_KERNEL_FLOAT(leaky_relu, 1)
S_KERNEL_FLOAT(selu, 1)
S_KERNEL_FLOAT(softplus, 1)
S_KERNEL_FLOAT(softsign, 1)
S_KERNEL_REAL(relu_grad, 2)
S_KERNEL_REAL(relu6_grad, 2)
S_KERNEL_FLOAT(leaky_relu_grad, 2)
S_KERNEL_FLOAT(elu_grad, 2)
S_KERNEL_FLOAT(selu_grad, 2)
S_KERNEL_FLOAT(sigmoid_grad, 2)
S_KERNEL_FLOAT(tanh_grad, 2)
S_KERNEL_FLOAT(softplus_grad, 2)
S_KERNEL_FLOAT(softsign_grad, 2)
S_KERNEL_FLOAT(sqrt_grad, 2)
S_KERNEL_FLOAT(rsqrt_grad, 2)
S_KERNEL_FLOAT(reciprocal_grad, 2)

/* ---- registration ------------------------------------------------------------------------ */

#define S_ALPHA_KERNEL(op_, compute_)                                                              \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = ZF_TYPES_FLOAT,                        \
        .create = s_alpha_create, .destroy = free, .compute = (compute_)                           \
    }

static const zf_kernel_t s_defs[] = {
    S_ALPHA_KERNEL("LeakyRelu", s_leaky_relu_compute),
    ZF_CPU_KERNEL("Selu", ZF_TYPES_FLOAT, s_selu_compute),
    ZF_CPU_KERNEL("Softplus", ZF_TYPES_FLOAT, s_softplus_compute),
    ZF_CPU_KERNEL("Softsign", ZF_TYPES_FLOAT, s_softsign_compute),
    ZF_CPU_KERNEL("ReluGrad", ZF_TYPES_REAL, s_relu_grad_compute),
    ZF_CPU_KERNEL("Relu6Grad", ZF_TYPES_REAL, s_relu6_grad_compute),
    S_ALPHA_KERNEL("LeakyReluGrad", s_leaky_relu_grad_compute),
    ZF_CPU_KERNEL("EluGrad", ZF_TYPES_FLOAT, s_elu_grad_compute),
    ZF_CPU_KERNEL("SeluGrad", ZF_TYPES_FLOAT, s_selu_grad_compute),
    ZF_CPU_KERNEL("SigmoidGrad", ZF_TYPES_FLOAT, s_sigmoid_grad_compute),
    ZF_CPU_KERNEL("TanhGrad", ZF_TYPES_FLOAT, s_tanh_grad_compute),
    ZF_CPU_KERNEL("SoftplusGrad", ZF_TYPES_FLOAT, s_softplus_grad_compute),
    ZF_CPU_KERNEL("SoftsignGrad", ZF_TYPES_FLOAT, s_softsign_grad_compute),
    ZF_CPU_KERNEL("SqrtGrad", ZF_TYPES_FLOAT, s_sqrt_grad_compute),
    ZF_CPU_KERNEL("RsqrtGrad", ZF_TYPES_FLOAT, s_rsqrt_grad_compute),
    ZF_CPU_KERNEL("ReciprocalGrad", ZF_TYPES_FLOAT, s_reciprocal_grad_compute),
};

zf_status_t zf__kernels_register_activation(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
