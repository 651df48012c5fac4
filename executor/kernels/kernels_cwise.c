/* CPU element-wise math kernels: unary (Neg, Abs, Square, Sqrt, Rsqrt,
 * Exp, Log, Reciprocal) and binary with NumPy broadcasting (Add, AddV2,
 * Sub, Mul, RealDiv, Div on floats, Maximum, Minimum, SquaredDifference).
 * Integer arithmetic wraps around, as TensorFlow's does. */
#include <math.h>
#include <string.h>

#include "executor/kernels/broadcast.h"
#include "executor/kernels/kernels_util.h"

/* Loop bodies are generated per (op, dtype) so the compiler can vectorise
 * them; integer ops compute in the unsigned type to wrap without UB. */

/* ---- unary ------------------------------------------------------------------
 */

#define S_UNARY(name, T, UT, EXPR)                                                                 \
    static void name(const void *vin, void *vout, int64_t n)                                       \
    {                                                                                              \
        typedef UT U;                                                                              \
        (void)sizeof(U);                                                                           \
        const T *in = vin;                                                                         \
        T *out = vout;                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = in[i];                                                                           \
            out[i] = (T)(EXPR);                                                                    \
        }                                                                                          \
    }

#define S_UNARY_FLOAT(op, EXPR_F, EXPR_D)                                                          \
    S_UNARY(s_##op##_f32, float, float, EXPR_F)                                                    \
    S_UNARY(s_##op##_f64, double, double, EXPR_D)

#define S_UNARY_INT(op, EXPR)                                                                      \
    S_UNARY(s_##op##_i32, int32_t, uint32_t, EXPR)                                                 \
    S_UNARY(s_##op##_i64, int64_t, uint64_t, EXPR)

#define S_UNARY_ALL(op, EXPR) S_UNARY_FLOAT(op, EXPR, EXPR) S_UNARY_INT(op, EXPR)

/* Floats flip or clear the sign bit, as TensorFlow's -x and abs do, so
 * Neg(0.0) is -0.0 and Abs(-0.0) is 0.0. */
S_UNARY_FLOAT(neg, -x, -x)
S_UNARY_INT(neg, (U)0 - (U)x)
S_UNARY_ALL(square, (U)x *(U)x)
S_UNARY_FLOAT(abs, fabsf(x), fabs(x))
S_UNARY_INT(abs, x < 0 ? (U)0 - (U)x : (U)x)
S_UNARY_FLOAT(sqrt, sqrtf(x), sqrt(x))
S_UNARY_FLOAT(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
S_UNARY_FLOAT(exp, expf(x), exp(x))
S_UNARY_FLOAT(log, logf(x), log(x))
S_UNARY_FLOAT(reciprocal, 1.0f / x, 1.0 / x)

/* One function per dtype: float, double, int32, int64. */
typedef struct {
    zf_kernels_unary_fn f32, f64, i32, i64;
} s_unary_fns_t;

static zf_kernels_unary_fn s_pick_unary(const s_unary_fns_t *fns, zf_dtype_t dtype)
{
    switch (dtype) {
    case ZF_FLOAT: return fns->f32;
    case ZF_DOUBLE: return fns->f64;
    case ZF_INT32: return fns->i32;
    case ZF_INT64: return fns->i64;
    default: return NULL;
    }
}

static zf_status_t s_unary(zf_kernel_ctx_t *ctx, const s_unary_fns_t *fns)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    zf_dtype_t dtype = zf_tensor_dtype(ctx->inputs[0]);
    zf_kernels_unary_fn fn = s_pick_unary(fns, dtype);
    if (!fn)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    return zf_kernels_run_unary(ctx, fn);
}

#define S_UNARY_KERNEL(op)                                                                         \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        static const s_unary_fns_t fns = {s_##op##_f32, s_##op##_f64, NULL, NULL};                 \
        return s_unary(ctx, &fns);                                                                 \
    }

#define S_UNARY_KERNEL_ALL(op)                                                                     \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        static const s_unary_fns_t fns = {s_##op##_f32, s_##op##_f64, s_##op##_i32, s_##op##_i64}; \
        return s_unary(ctx, &fns);                                                                 \
    }

S_UNARY_KERNEL_ALL(neg)
S_UNARY_KERNEL_ALL(square)
S_UNARY_KERNEL_ALL(abs)
S_UNARY_KERNEL(sqrt)
S_UNARY_KERNEL(rsqrt)
S_UNARY_KERNEL(exp)
S_UNARY_KERNEL(log)
S_UNARY_KERNEL(reciprocal)

/* ---- binary loops
 * ------------------------------------------------------------- */

/* out[i] = f(a[i * sa], b[i * sb]) for i in [0, n), strides 0 or 1. */
typedef void (*s_binary_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *out,
                            int64_t n);

#define S_BINARY(name, T, UT, EXPR)                                                                \
    static void name(const void *va, int64_t sa, const void *vb, int64_t sb, void *vo, int64_t n)  \
    {                                                                                              \
        typedef UT U;                                                                              \
        (void)sizeof(U);                                                                           \
        const T *a = va, *b = vb;                                                                  \
        T *o = vo;                                                                                 \
        if (sa && sb) {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T x = a[i], y = b[i];                                                              \
                o[i] = (T)(EXPR);                                                                  \
            }                                                                                      \
        } else if (sa) {                                                                           \
            T y = b[0];                                                                            \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T x = a[i];                                                                        \
                o[i] = (T)(EXPR);                                                                  \
            }                                                                                      \
        } else if (sb) {                                                                           \
            T x = a[0];                                                                            \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T y = b[i];                                                                        \
                o[i] = (T)(EXPR);                                                                  \
            }                                                                                      \
        } else {                                                                                   \
            T x = a[0], y = b[0];                                                                  \
            T v = (T)(EXPR);                                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
        }                                                                                          \
    }

#define S_BINARY_FLOAT(op, EXPR)                                                                   \
    S_BINARY(s_##op##_f32, float, float, EXPR)                                                     \
    S_BINARY(s_##op##_f64, double, double, EXPR)

#define S_BINARY_ALL(op, EXPR)                                                                     \
    S_BINARY_FLOAT(op, EXPR)                                                                       \
    S_BINARY(s_##op##_i32, int32_t, uint32_t, EXPR)                                                \
    S_BINARY(s_##op##_i64, int64_t, uint64_t, EXPR)

S_BINARY_ALL(add, (U)x + (U)y)
S_BINARY_ALL(sub, (U)x - (U)y)
S_BINARY_ALL(mul, (U)x *(U)y)
S_BINARY_ALL(maximum, x > y ? x : y)
S_BINARY_ALL(minimum, x < y ? x : y)
S_BINARY_ALL(sqdiff, ((U)x - (U)y) * ((U)x - (U)y))
S_BINARY_FLOAT(div, x / y)

typedef struct {
    s_binary_fn f32, f64, i32, i64;
} s_binary_fns_t;

/* ---- broadcasting driver
 * ---------------------------------------------------------- */

/* A binary op over a broadcast plan. */
typedef struct {
    s_binary_fn fn;
    zf_broadcast_t p;
    const char *a, *b;
    char *out;
    size_t elem;
} s_bcast_t;

/* Flat ranges (rank <= 1): chunks of elements. */
static void s_bcast_flat(void *arg, int64_t begin, int64_t end)
{
    const s_bcast_t *bc = arg;
    int64_t sa = bc->p.rank ? bc->p.sa[0] : 0, sb = bc->p.rank ? bc->p.sb[0] : 0;
    bc->fn(bc->a + (size_t)(begin * sa) * bc->elem, sa, bc->b + (size_t)(begin * sb) * bc->elem, sb,
           bc->out + (size_t)begin * bc->elem, end - begin);
}

/* Rows of the innermost dim, walking the outer dims like an odometer. */
static void s_bcast_rows(void *arg, int64_t begin, int64_t end)
{
    const s_bcast_t *bc = arg;
    int outer = bc->p.rank - 1;
    int64_t inner = bc->p.dims[outer], idx[ZF_MAX_RANK], oa = 0, ob = 0;
    int64_t row = begin;
    for (int k = outer - 1; k >= 0; k--) {
        idx[k] = row % bc->p.dims[k];
        row /= bc->p.dims[k];
        oa += idx[k] * bc->p.sa[k];
        ob += idx[k] * bc->p.sb[k];
    }
    for (int64_t r = begin; r < end; r++) {
        bc->fn(bc->a + (size_t)oa * bc->elem, bc->p.sa[outer], bc->b + (size_t)ob * bc->elem,
               bc->p.sb[outer], bc->out + (size_t)(r * inner) * bc->elem, inner);
        for (int k = outer - 1; k >= 0; k--) {
            oa += bc->p.sa[k];
            ob += bc->p.sb[k];
            if (++idx[k] < bc->p.dims[k]) break;
            oa -= bc->p.sa[k] * bc->p.dims[k];
            ob -= bc->p.sb[k] * bc->p.dims[k];
            idx[k] = 0;
        }
    }
}

static s_binary_fn s_pick_binary(const s_binary_fns_t *fns, zf_dtype_t dtype)
{
    switch (dtype) {
    case ZF_FLOAT: return fns->f32;
    case ZF_DOUBLE: return fns->f64;
    case ZF_INT32: return fns->i32;
    case ZF_INT64: return fns->i64;
    default: return NULL;
    }
}

static zf_status_t s_check_binary(const zf_kernel_ctx_t *ctx, const s_binary_fns_t *fns,
                                  zf_shape_t *out_shape, s_binary_fn *fn)
{
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    zf_dtype_t da = zf_tensor_dtype(a), db = zf_tensor_dtype(b);
    if (da != db)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "both inputs must have the same dtype, got %s and %s",
                               zf_kernels_dtype_name((int)da), zf_kernels_dtype_name((int)db));
    *fn = s_pick_binary(fns, da);
    if (!*fn)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)da));
    char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    if (!zf_kernels_broadcast_shape(zf_tensor_shape(a), zf_tensor_shape(b), out_shape))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
                               zf_kernels_shape_str(a, sa), zf_kernels_shape_str(b, sb));
    return ZF_STATUS_OK;
}

static zf_status_t s_binary(zf_kernel_ctx_t *ctx, const s_binary_fns_t *fns)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    zf_shape_t shape;
    s_binary_fn fn = NULL;
    ZF_TRY(s_check_binary(ctx, fns, &shape, &fn));
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(a), &shape, &out));
    int64_t n = zf_tensor_num_elements(out);
    if (n == 0) return ZF_STATUS_OK;
    s_bcast_t bc = {.fn = fn,
                    .a = zf_tensor_data(a),
                    .b = zf_tensor_data(b),
                    .out = zf_tensor_data(out),
                    .elem = zf_dtype_size(zf_tensor_dtype(a))};
    zf_broadcast_plan(zf_tensor_shape(a), zf_tensor_shape(b), &shape, &bc.p);
    if (bc.p.rank <= 1) {
        zf_kernels_parallel_for(ctx, n, ZF_KERNELS_PARALLEL_MIN, s_bcast_flat, &bc);
    } else {
        int64_t inner = bc.p.dims[bc.p.rank - 1];
        int64_t min_rows = ZF_KERNELS_PARALLEL_MIN / inner + 1;
        zf_kernels_parallel_for(ctx, n / inner, min_rows, s_bcast_rows, &bc);
    }
    return ZF_STATUS_OK;
}

#define S_BINARY_KERNEL(op, fns_init)                                                              \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        static const s_binary_fns_t fns = fns_init;                                                \
        return s_binary(ctx, &fns);                                                                \
    }

#define S_ALL(op)                                                                                  \
    {                                                                                              \
        s_##op##_f32, s_##op##_f64, s_##op##_i32, s_##op##_i64                                     \
    }
#define S_FLOAT(op)                                                                                \
    {                                                                                              \
        s_##op##_f32, s_##op##_f64, NULL, NULL                                                     \
    }

S_BINARY_KERNEL(add, S_ALL(add))
S_BINARY_KERNEL(sub, S_ALL(sub))
S_BINARY_KERNEL(mul, S_ALL(mul))
S_BINARY_KERNEL(maximum, S_ALL(maximum))
S_BINARY_KERNEL(minimum, S_ALL(minimum))
S_BINARY_KERNEL(sqdiff, S_ALL(sqdiff))
S_BINARY_KERNEL(div, S_FLOAT(div))

/* ---- registration
 * ----------------------------------------------------------------- */

static const zf_kernel_t s_defs[] = {
    ZF_CPU_KERNEL("Neg", ZF_TYPES_REAL, s_neg_compute),
    ZF_CPU_KERNEL("Abs", ZF_TYPES_REAL, s_abs_compute),
    ZF_CPU_KERNEL("Square", ZF_TYPES_REAL, s_square_compute),
    ZF_CPU_KERNEL("Sqrt", ZF_TYPES_FLOAT, s_sqrt_compute),
    ZF_CPU_KERNEL("Rsqrt", ZF_TYPES_FLOAT, s_rsqrt_compute),
    ZF_CPU_KERNEL("Exp", ZF_TYPES_FLOAT, s_exp_compute),
    ZF_CPU_KERNEL("Log", ZF_TYPES_FLOAT, s_log_compute),
    ZF_CPU_KERNEL("Reciprocal", ZF_TYPES_FLOAT, s_reciprocal_compute),
    ZF_CPU_KERNEL("Add", ZF_TYPES_REAL, s_add_compute),
    ZF_CPU_KERNEL("AddV2", ZF_TYPES_REAL, s_add_compute),
    ZF_CPU_KERNEL("Sub", ZF_TYPES_REAL, s_sub_compute),
    ZF_CPU_KERNEL("Mul", ZF_TYPES_REAL, s_mul_compute),
    ZF_CPU_KERNEL("RealDiv", ZF_TYPES_FLOAT, s_div_compute),
    ZF_CPU_KERNEL("Div", ZF_TYPES_FLOAT, s_div_compute),
    ZF_CPU_KERNEL("Maximum", ZF_TYPES_REAL, s_maximum_compute),
    ZF_CPU_KERNEL("Minimum", ZF_TYPES_REAL, s_minimum_compute),
    ZF_CPU_KERNEL("SquaredDifference", ZF_TYPES_REAL, s_sqdiff_compute),
};

zf_status_t zf__kernels_register_cwise(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
