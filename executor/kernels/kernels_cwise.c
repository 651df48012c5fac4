/* CPU element-wise math kernels: unary (Neg, Abs, Square, Sqrt, Rsqrt,
 * Exp, Log, Reciprocal, Floor, Ceil, Round, Sign, Erf, Erfc), the
 * predicates IsNan, IsInf and IsFinite, binary with NumPy broadcasting
 * (Add, AddV2, Sub, Mul, RealDiv, Div on floats, Maximum, Minimum,
 * SquaredDifference, Pow, Mod) and AddN. Integer arithmetic wraps around,
 * as TensorFlow's does; Round rounds halves to even; integer Mod by zero
 * and integer Pow to a negative power are errors, with TensorFlow's texts. */
#include <math.h>
#include <string.h>

#include "executor/kernels/broadcast.h"
#include "executor/kernels/kernels_util.h"

/* Loop bodies are generated per (op, dtype) so the compiler can vectorise
 * them; integer ops compute in the unsigned type to wrap without UB. */

/* ---- unary ------------------------------------------------------------------
 */

static double s_round_half_even(double x)
{
    double r = floor(x), d = x - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
    return r;
}

static float s_round_half_even_f(float x)
{
    return (float)s_round_half_even((double)x);
}

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
S_UNARY_FLOAT(floor, floorf(x), floor(x))
S_UNARY_FLOAT(ceil, ceilf(x), ceil(x))
S_UNARY_FLOAT(erf, erff(x), erf(x))
S_UNARY_FLOAT(erfc, erfcf(x), erfc(x))
/* NaN stays NaN; integers compare in their own type. */
S_UNARY_ALL(sign, x > 0 ? 1 : x < 0 ? -1 : x)
/* Halves to even, whatever the rounding mode; integers are already round. */
S_UNARY_FLOAT(round, s_round_half_even_f(x), s_round_half_even(x))
S_UNARY(s_round_i32, int32_t, uint32_t, x)
S_UNARY(s_round_i64, int64_t, uint64_t, x)

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
S_UNARY_KERNEL(floor)
S_UNARY_KERNEL(ceil)
S_UNARY_KERNEL(erf)
S_UNARY_KERNEL(erfc)
S_UNARY_KERNEL_ALL(sign)
S_UNARY_KERNEL_ALL(round)

/* ---- IsNan, IsInf, IsFinite ------------------------------------------------------ */

typedef void (*s_pred_fn)(const void *in, bool *out, int64_t n);

#define S_PRED(name, T, EXPR)                                                                      \
    static void name(const void *vin, bool *out, int64_t n)                                        \
    {                                                                                              \
        const T *in = vin;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = in[i];                                                                           \
            out[i] = (EXPR);                                                                       \
        }                                                                                          \
    }
#define S_PRED_FLOAT(op, EXPR)                                                                     \
    S_PRED(s_##op##_f32, float, EXPR)                                                              \
    S_PRED(s_##op##_f64, double, EXPR)

S_PRED_FLOAT(is_nan, isnan(x))
S_PRED_FLOAT(is_inf, isinf(x))
S_PRED_FLOAT(is_finite, isfinite(x))

typedef struct {
    s_pred_fn fn;
    const char *in;
    bool *out;
    size_t elem;
} s_pred_job_t;

static void s_pred_chunk(void *arg, int64_t begin, int64_t end)
{
    const s_pred_job_t *j = arg;
    j->fn(j->in + (size_t)begin * j->elem, j->out + begin, end - begin);
}

/* A bool output of input 0's shape. */
static zf_status_t s_predicate(zf_kernel_ctx_t *ctx, s_pred_fn f32, s_pred_fn f64)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *x = ctx->inputs[0];
    zf_dtype_t t = zf_tensor_dtype(x);
    if (t != ZF_FLOAT && t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, ZF_BOOL, zf_tensor_shape(x), &out));
    s_pred_job_t job = {t == ZF_FLOAT ? f32 : f64, zf_tensor_data(x), zf_tensor_data(out),
                        zf_dtype_size(t)};
    zf_kernels_parallel_for(ctx, zf_tensor_num_elements(x), ZF_KERNELS_PARALLEL_MIN, s_pred_chunk,
                            &job);
    return ZF_STATUS_OK;
}

#define S_PRED_KERNEL(op)                                                                          \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        return s_predicate(ctx, s_##op##_f32, s_##op##_f64);                                       \
    }

S_PRED_KERNEL(is_nan)
S_PRED_KERNEL(is_inf)
S_PRED_KERNEL(is_finite)

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

/* x to the power y >= 0 by squaring, wrapping around (y < 0 is refused
 * before the loop runs). */
static uint64_t s_ipow(uint64_t x, int64_t y)
{
    uint64_t r = 1;
    while (y > 0) {
        if (y & 1) r *= x;
        x *= x;
        y >>= 1;
    }
    return r;
}

S_BINARY(s_pow_f32, float, float, powf(x, y))
S_BINARY(s_pow_f64, double, double, pow(x, y))
S_BINARY(s_pow_i32, int32_t, uint32_t, (U)s_ipow((U)x, y))
S_BINARY(s_pow_i64, int64_t, uint64_t, s_ipow((U)x, y))
/* Truncated remainder, the sign of x; y = 0 is refused before the loop
 * runs, and the most negative value mod -1 is 0 instead of a trap. */
S_BINARY(s_mod_f32, float, float, fmodf(x, y))
S_BINARY(s_mod_f64, double, double, fmod(x, y))
S_BINARY(s_mod_i32, int32_t, uint32_t, y == -1 ? 0 : x % y)
S_BINARY(s_mod_i64, int64_t, uint64_t, y == -1 ? 0 : x % y)

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
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, zf_tensor_dtype(a), &shape, &out));
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

/* True if some element of an INT32 or INT64 tensor is below 0 (negative)
 * or equal to 0 (!negative). */
static bool s_any_int(const zf_tensor_t *t, bool negative)
{
    int64_t n = zf_tensor_num_elements(t);
    const void *d = zf_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t v =
            zf_tensor_dtype(t) == ZF_INT32 ? ((const int32_t *)d)[i] : ((const int64_t *)d)[i];
        if (negative ? v < 0 : v == 0) return true;
    }
    return false;
}

/* Both inputs of one integer dtype (other cases fail in s_binary). */
static bool s_both_int(const zf_kernel_ctx_t *ctx)
{
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    return (t == ZF_INT32 || t == ZF_INT64) && zf_tensor_dtype(ctx->inputs[1]) == t;
}

static zf_status_t s_pow_compute(zf_kernel_ctx_t *ctx)
{
    static const s_binary_fns_t fns = S_ALL(pow);
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    if (s_both_int(ctx) && s_any_int(ctx->inputs[1], true))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Integers to negative integer powers are not allowed");
    return s_binary(ctx, &fns);
}

static zf_status_t s_mod_compute(zf_kernel_ctx_t *ctx)
{
    static const s_binary_fns_t fns = S_ALL(mod);
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    if (s_both_int(ctx) && s_any_int(ctx->inputs[1], false))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Integer division by zero");
    return s_binary(ctx, &fns);
}

/* ---- AddN ------------------------------------------------------------------------- */

typedef struct {
    s_binary_fn add;
    zf_tensor_t *const *in;
    int n;
    char *out;
    size_t elem;
} s_addn_job_t;

static void s_addn_chunk(void *arg, int64_t begin, int64_t end)
{
    const s_addn_job_t *j = arg;
    size_t off = (size_t)begin * j->elem;
    char *o = j->out + off;
    memcpy(o, (const char *)zf_tensor_data(j->in[0]) + off, (size_t)(end - begin) * j->elem);
    for (int k = 1; k < j->n; k++)
        j->add(o, 1, (const char *)zf_tensor_data(j->in[k]) + off, 1, o, end - begin);
}

zf_status_t zf__kernels_addn_check(const zf_kernel_ctx_t *ctx)
{
    const zf_tensor_t *x = ctx->inputs[0];
    for (int k = 1; k < ctx->num_inputs; k++) {
        ZF_TRY(zf_kernels_check_dtype(ctx, k, zf_tensor_dtype(x)));
        const zf_tensor_t *y = ctx->inputs[k];
        char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
        if (!zf_shape_equal(zf_tensor_shape(x), zf_tensor_shape(y)))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Inputs to operation %s of type AddN must have the same size "
                                   "and shape.  Input 0: %s != input %d: %s",
                                   ctx->node->name, zf_kernels_shape_str(x, sa), k,
                                   zf_kernels_shape_str(y, sb));
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_addn_compute(zf_kernel_ctx_t *ctx)
{
    static const s_binary_fns_t fns = S_ALL(add);
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *x = ctx->inputs[0];
    zf_dtype_t t = zf_tensor_dtype(x);
    s_binary_fn add = s_pick_binary(&fns, t);
    if (!add)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    ZF_TRY(zf__kernels_addn_check(ctx));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, t, zf_tensor_shape(x), &out));
    s_addn_job_t job = {add, ctx->inputs, ctx->num_inputs, zf_tensor_data(out), zf_dtype_size(t)};
    zf_kernels_parallel_for(ctx, zf_tensor_num_elements(x), ZF_KERNELS_PARALLEL_MIN, s_addn_chunk,
                            &job);
    return ZF_STATUS_OK;
}

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
    ZF_CPU_KERNEL("Floor", ZF_TYPES_FLOAT, s_floor_compute),
    ZF_CPU_KERNEL("Ceil", ZF_TYPES_FLOAT, s_ceil_compute),
    ZF_CPU_KERNEL("Round", ZF_TYPES_REAL, s_round_compute),
    ZF_CPU_KERNEL("Sign", ZF_TYPES_REAL, s_sign_compute),
    ZF_CPU_KERNEL("Erf", ZF_TYPES_FLOAT, s_erf_compute),
    ZF_CPU_KERNEL("Erfc", ZF_TYPES_FLOAT, s_erfc_compute),
    ZF_CPU_KERNEL("IsNan", ZF_TYPES_FLOAT, s_is_nan_compute),
    ZF_CPU_KERNEL("IsInf", ZF_TYPES_FLOAT, s_is_inf_compute),
    ZF_CPU_KERNEL("IsFinite", ZF_TYPES_FLOAT, s_is_finite_compute),
    ZF_CPU_KERNEL("Pow", ZF_TYPES_REAL, s_pow_compute),
    ZF_CPU_KERNEL("Mod", ZF_TYPES_REAL, s_mod_compute),
    ZF_CPU_KERNEL("AddN", ZF_TYPES_REAL, s_addn_compute),
};

zf_status_t zf__kernels_register_cwise(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
