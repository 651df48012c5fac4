/* CPU kernels for conditions, loop counters and masks: comparisons (Less,
 * LessEqual, Greater, GreaterEqual, Equal, NotEqual) and logic (LogicalAnd,
 * LogicalOr, LogicalNot) with NumPy broadcasting and bool results; Select
 * (TensorFlow's legacy rules: a scalar condition, a condition of the same
 * shape, or a vector condition picking rows) and SelectV2 (three-way
 * broadcasting); Range; and integer division with TensorFlow's rounding
 * (FloorDiv, FloorMod, TruncateDiv, Div on integers).
 *
 * Broadcasting handles up to three inputs with the shared plan of
 * broadcast.h; rows of the plan's innermost dim run through one loop per
 * (op, dtype). Integer division by zero is an error, as in
 * TensorFlow ("Integer division by zero"); the most negative value divided
 * by -1 wraps around instead of trapping. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/broadcast.h"
#include "executor/kernels/kernels_util.h"

/* ---- dtype sets ------------------------------------------------------------ */

#define S_TYPES_EQUALITY (ZF_TYPES_ORDERED | ZF_TYPE_BIT(ZF_BOOL) | ZF_TYPE_BIT(ZF_STRING))
#define S_TYPES_SELECT   (ZF_TYPES_POD | ZF_TYPE_BIT(ZF_STRING))
#define S_TYPES_FLOOR    (ZF_TYPES_INTEGER | ZF_TYPES_FLOAT)

/* ---- broadcasting over up to three inputs ----------------------------------- */

#define S_MAX_IN ZF_BROADCAST_MAX_INPUTS

/* One row: out[0..n) from in[k][j * st[k]] (st[k] is 0 or 1). */
typedef void (*s_row_fn)(const void *const *in, const int64_t *st, void *out, int64_t n);

typedef struct {
    s_row_fn fn;
    int nin;
    zf_broadcast_n_t p; /* rank >= 1 */
    const char *in[S_MAX_IN];
    size_t in_elem[S_MAX_IN];
    char *out;
    size_t out_elem;
} s_bcast_t;

static void s_plan(s_bcast_t *bc, const zf_tensor_t *const *ins, const zf_shape_t *out)
{
    const zf_shape_t *shapes[S_MAX_IN];
    for (int i = 0; i < bc->nin; i++) {
        shapes[i] = zf_tensor_shape(ins[i]);
        bc->in[i] = zf_tensor_data(ins[i]);
        bc->in_elem[i] = zf_dtype_size(zf_tensor_dtype(ins[i]));
    }
    zf_broadcast_plan_n(shapes, bc->nin, out, &bc->p);
    if (bc->p.rank == 0) { /* one element: a row of one */
        bc->p.rank = 1;
        bc->p.dims[0] = 1;
    }
}

/* Each input's element offset for the output's flat index. */
static void s_offsets(const s_bcast_t *bc, int64_t flat, int64_t *off)
{
    for (int i = 0; i < bc->nin; i++) off[i] = 0;
    for (int k = bc->p.rank - 1; k >= 0; k--) {
        int64_t idx = flat % bc->p.dims[k];
        flat /= bc->p.dims[k];
        for (int i = 0; i < bc->nin; i++) off[i] += idx * bc->p.st[i][k];
    }
}

/* Rank 1: chunks of elements. */
static void s_flat(void *arg, int64_t begin, int64_t end)
{
    const s_bcast_t *bc = arg;
    const void *in[S_MAX_IN];
    int64_t st[S_MAX_IN];
    for (int i = 0; i < bc->nin; i++) {
        st[i] = bc->p.st[i][0];
        in[i] = bc->in[i] + (size_t)(begin * st[i]) * bc->in_elem[i];
    }
    bc->fn(in, st, bc->out + (size_t)begin * bc->out_elem, end - begin);
}

/* Higher ranks: rows of the innermost dim, the outer dims as an odometer. */
static void s_rows(void *arg, int64_t begin, int64_t end)
{
    const s_bcast_t *bc = arg;
    int outer = bc->p.rank - 1;
    int64_t inner = bc->p.dims[outer], idx[ZF_MAX_RANK], off[S_MAX_IN], st[S_MAX_IN];
    for (int i = 0; i < bc->nin; i++) {
        off[i] = 0;
        st[i] = bc->p.st[i][outer];
    }
    int64_t row = begin;
    for (int k = outer - 1; k >= 0; k--) {
        idx[k] = row % bc->p.dims[k];
        row /= bc->p.dims[k];
        for (int i = 0; i < bc->nin; i++) off[i] += idx[k] * bc->p.st[i][k];
    }
    for (int64_t r = begin; r < end; r++) {
        const void *in[S_MAX_IN];
        for (int i = 0; i < bc->nin; i++) in[i] = bc->in[i] + (size_t)off[i] * bc->in_elem[i];
        bc->fn(in, st, bc->out + (size_t)(r * inner) * bc->out_elem, inner);
        for (int k = outer - 1; k >= 0; k--) {
            for (int i = 0; i < bc->nin; i++) off[i] += bc->p.st[i][k];
            if (++idx[k] < bc->p.dims[k]) break;
            for (int i = 0; i < bc->nin; i++) off[i] -= bc->p.st[i][k] * bc->p.dims[k];
            idx[k] = 0;
        }
    }
}

/* Fills out (already allocated with the broadcast shape) with fn. */
static void s_run(const zf_kernel_ctx_t *ctx, s_row_fn fn, const zf_tensor_t *const *ins, int nin,
                  zf_tensor_t *out)
{
    int64_t n = zf_tensor_num_elements(out);
    if (n == 0) return;
    s_bcast_t bc = {.fn = fn,
                    .nin = nin,
                    .out = zf_tensor_data(out),
                    .out_elem = zf_dtype_size(zf_tensor_dtype(out))};
    s_plan(&bc, ins, zf_tensor_shape(out));
    if (bc.p.rank == 1) {
        zf_kernels_parallel_for(ctx, n, ZF_KERNELS_PARALLEL_MIN, s_flat, &bc);
    } else {
        int64_t inner = bc.p.dims[bc.p.rank - 1];
        zf_kernels_parallel_for(ctx, n / inner, ZF_KERNELS_PARALLEL_MIN / inner + 1, s_rows, &bc);
    }
}

/* ---- loads ------------------------------------------------------------------- */

#define S_LOAD(v)      (v)
#define S_LOAD_HALF(v) zf_half_to_float(v)
#define S_LOAD_BF16(v) zf_bfloat16_to_float(v)

/* Calls X(op, suffix, C type, its unsigned type, load) for every integer
 * type, and with the floating types for every type a comparison orders. */
#define S_INT_TYPES(X, op)                                                                         \
    X(op, i8, int8_t, uint8_t, S_LOAD)                                                             \
    X(op, i16, int16_t, uint16_t, S_LOAD)                                                          \
    X(op, i32, int32_t, uint32_t, S_LOAD)                                                          \
    X(op, i64, int64_t, uint64_t, S_LOAD)                                                          \
    X(op, u8, uint8_t, uint8_t, S_LOAD)                                                            \
    X(op, u16, uint16_t, uint16_t, S_LOAD)                                                         \
    X(op, u32, uint32_t, uint32_t, S_LOAD)                                                         \
    X(op, u64, uint64_t, uint64_t, S_LOAD)
#define S_ORDERED_TYPES(X, op)                                                                     \
    X(op, f32, float, float, S_LOAD)                                                               \
    X(op, f64, double, double, S_LOAD)                                                             \
    X(op, f16, uint16_t, uint16_t, S_LOAD_HALF)                                                    \
    X(op, bf16, uint16_t, uint16_t, S_LOAD_BF16)                                                   \
    S_INT_TYPES(X, op)

/* Designated initialisers of a table by dtype. */
#define S_INT_TABLE(op)                                                                            \
    [ZF_INT8] = s_##op##_i8, [ZF_INT16] = s_##op##_i16, [ZF_INT32] = s_##op##_i32,                 \
    [ZF_INT64] = s_##op##_i64, [ZF_UINT8] = s_##op##_u8, [ZF_UINT16] = s_##op##_u16,               \
    [ZF_UINT32] = s_##op##_u32, [ZF_UINT64] = s_##op##_u64
#define S_ORDERED_TABLE(op)                                                                        \
    [ZF_FLOAT] = s_##op##_f32, [ZF_DOUBLE] = s_##op##_f64, [ZF_HALF] = s_##op##_f16,               \
    [ZF_BFLOAT16] = s_##op##_bf16, S_INT_TABLE(op)

/* A row of a binary op: o[j] = EXPR(x, y), specialised on which input
 * broadcasts so that the loops vectorise. x and y are loaded values (V). */
#define S_ROW_LOOP(LOADS, EXPR)                                                                    \
    for (int64_t j = 0; j < n; j++) {                                                              \
        LOADS;                                                                                     \
        o[j] = (OT)(EXPR);                                                                         \
    }
#define S_BINARY_ROW(name, T, TO, LOAD, EXPR)                                                      \
    static void name(const void *const *in, const int64_t *st, void *vo, int64_t n)                \
    {                                                                                              \
        typedef TO OT;                                                                             \
        const T *a = in[0], *b = in[1];                                                            \
        typedef __typeof__(LOAD(a[0])) V;                                                          \
        OT *o = vo;                                                                                \
        if (st[0] && st[1]) {                                                                      \
            S_ROW_LOOP(const V x = LOAD(a[j]); const V y = LOAD(b[j]), EXPR)                       \
        } else if (st[0]) {                                                                        \
            const V y = LOAD(b[0]);                                                                \
            S_ROW_LOOP(const V x = LOAD(a[j]), EXPR)                                               \
        } else if (st[1]) {                                                                        \
            const V x = LOAD(a[0]);                                                                \
            S_ROW_LOOP(const V y = LOAD(b[j]), EXPR)                                               \
        } else {                                                                                   \
            const V x = LOAD(a[0]), y = LOAD(b[0]);                                                \
            const OT v = (OT)(EXPR);                                                               \
            for (int64_t j = 0; j < n; j++) o[j] = v;                                              \
        }                                                                                          \
    }

/* ---- comparisons --------------------------------------------------------------- */

#define S_CMP_ROW(op, sfx, T, U, LOAD) S_BINARY_ROW(s_##op##_##sfx, T, bool, LOAD, S_EXPR_##op)
#define S_EXPR_less                    x < y
#define S_EXPR_less_equal              x <= y
#define S_EXPR_greater                 x > y
#define S_EXPR_greater_equal           x >= y
#define S_EXPR_equal                   x == y
#define S_EXPR_not_equal               x != y

S_ORDERED_TYPES(S_CMP_ROW, less)
S_ORDERED_TYPES(S_CMP_ROW, less_equal)
S_ORDERED_TYPES(S_CMP_ROW, greater)
S_ORDERED_TYPES(S_CMP_ROW, greater_equal)
S_ORDERED_TYPES(S_CMP_ROW, equal)
S_ORDERED_TYPES(S_CMP_ROW, not_equal)
S_BINARY_ROW(s_equal_b, bool, bool, S_LOAD, x == y)
S_BINARY_ROW(s_not_equal_b, bool, bool, S_LOAD, x != y)
S_BINARY_ROW(s_logical_and, bool, bool, S_LOAD, x &&y)
S_BINARY_ROW(s_logical_or, bool, bool, S_LOAD, x || y)

static bool s_tstring_equal(const zf_tstring_t *a, const zf_tstring_t *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* Strings compare element by element (no vectorising to gain). */
#define S_STRING_ROW(name, EQ)                                                                     \
    static void name(const void *const *in, const int64_t *st, void *vo, int64_t n)                \
    {                                                                                              \
        const zf_tstring_t *a = in[0], *b = in[1];                                                 \
        bool *o = vo;                                                                              \
        for (int64_t j = 0; j < n; j++)                                                            \
            o[j] = s_tstring_equal(&a[j * st[0]], &b[j * st[1]]) == EQ;                            \
    }
S_STRING_ROW(s_equal_str, true)
S_STRING_ROW(s_not_equal_str, false)

typedef struct {
    s_row_fn fns[ZF_UINT64 + 1]; /* by dtype; NULL = not supported */
    bool is_equality;            /* Equal/NotEqual: incompatible_shape_error */
    bool not_equal;              /* the answer for incompatible shapes */
} s_cmp_t;

static const s_cmp_t s_less = {.fns = {S_ORDERED_TABLE(less)}};
static const s_cmp_t s_less_equal = {.fns = {S_ORDERED_TABLE(less_equal)}};
static const s_cmp_t s_greater = {.fns = {S_ORDERED_TABLE(greater)}};
static const s_cmp_t s_greater_equal = {.fns = {S_ORDERED_TABLE(greater_equal)}};
static const s_cmp_t s_equal = {
    .fns = {S_ORDERED_TABLE(equal), [ZF_BOOL] = s_equal_b, [ZF_STRING] = s_equal_str},
    .is_equality = true};
static const s_cmp_t s_not_equal = {
    .fns = {S_ORDERED_TABLE(not_equal), [ZF_BOOL] = s_not_equal_b, [ZF_STRING] = s_not_equal_str},
    .is_equality = true,
    .not_equal = true};
static const s_cmp_t s_logical_and_ops = {.fns = {[ZF_BOOL] = s_logical_and}};
static const s_cmp_t s_logical_or_ops = {.fns = {[ZF_BOOL] = s_logical_or}};

static s_row_fn s_pick(const s_row_fn *fns, zf_dtype_t t)
{
    return (int)t >= 0 && (int)t <= ZF_UINT64 ? fns[t] : NULL;
}

/* Equal and NotEqual keep incompatible_shape_error (default true) as their
 * state: a pointer to one of these. */
static const bool s_shape_error_on = true, s_shape_error_off = false;

static zf_status_t s_equality_create(const Tensorflow__NodeDef *node, void **state)
{
    bool on = true;
    ZF_TRY(zf_node_attr_bool_or(node, "incompatible_shape_error", true, &on));
    *state = (void *)(on ? &s_shape_error_on : &s_shape_error_off);
    return ZF_STATUS_OK;
}

zf_status_t zf_kernels_binary_shape(const zf_kernel_ctx_t *ctx, bool allow_incompatible,
                                    zf_shape_t *out, bool *incompatible)
{
    *incompatible = false;
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    zf_dtype_t da = zf_tensor_dtype(a), db = zf_tensor_dtype(b);
    if (da != db)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "both inputs must have the same dtype, got %s and %s",
                               zf_kernels_dtype_name((int)da), zf_kernels_dtype_name((int)db));
    if (zf_kernels_broadcast_shape(zf_tensor_shape(a), zf_tensor_shape(b), out))
        return ZF_STATUS_OK;
    char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    if (!allow_incompatible)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
                               zf_kernels_shape_str(a, sa), zf_kernels_shape_str(b, sb));
    *incompatible = true;
    *out = zf_shape_scalar();
    return ZF_STATUS_OK;
}

static zf_status_t s_compare(zf_kernel_ctx_t *ctx, const s_cmp_t *op, zf_dtype_t out_dtype)
{
    zf_shape_t shape;
    bool allow = op->is_equality && ctx->state && !*(const bool *)ctx->state, incompatible;
    ZF_TRY(zf_kernels_binary_shape(ctx, allow, &shape, &incompatible));
    const zf_tensor_t *ins[2] = {ctx->inputs[0], ctx->inputs[1]};
    zf_dtype_t t = zf_tensor_dtype(ins[0]);
    s_row_fn fn = s_pick(op->fns, t);
    if (!fn)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, out_dtype, &shape, &out));
    if (incompatible) /* TensorFlow: shapes that cannot be equal give one answer */
        *(bool *)zf_tensor_data(out) = op->not_equal;
    else
        s_run(ctx, fn, ins, 2, out);
    return ZF_STATUS_OK;
}

#define S_CMP_KERNEL(name, table)                                                                  \
    static zf_status_t name(zf_kernel_ctx_t *ctx)                                                  \
    {                                                                                              \
        return s_compare(ctx, &table, ZF_BOOL);                                                    \
    }
S_CMP_KERNEL(s_less_compute, s_less)
S_CMP_KERNEL(s_less_equal_compute, s_less_equal)
S_CMP_KERNEL(s_greater_compute, s_greater)
S_CMP_KERNEL(s_greater_equal_compute, s_greater_equal)
S_CMP_KERNEL(s_equal_compute, s_equal)
S_CMP_KERNEL(s_not_equal_compute, s_not_equal)
S_CMP_KERNEL(s_logical_and_compute, s_logical_and_ops)
S_CMP_KERNEL(s_logical_or_compute, s_logical_or_ops)

static void s_logical_not_fn(const void *vin, void *vout, int64_t n)
{
    const bool *in = vin;
    bool *out = vout;
    for (int64_t i = 0; i < n; i++) out[i] = !in[i];
}

static zf_status_t s_logical_not_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(zf_kernels_check_dtype(ctx, 0, ZF_BOOL));
    return zf_kernels_run_unary(ctx, s_logical_not_fn);
}

/* ---- integer division ---------------------------------------------------------- */

/* In the unsigned type, the most negative value over -1 wraps to itself
 * (and leaves no remainder) instead of trapping. */
#define S_IS_MINUS_ONE(y) ((y) < 0 && (y) == -1)

/* Truncating quotient and remainder (y != 0). */
#define S_TDIV(T, U, x, y) (S_IS_MINUS_ONE(y) ? (T)((U)0 - (U)(x)) : (T)((x) / (y)))
#define S_TMOD(T, x, y)    (S_IS_MINUS_ONE(y) ? (T)0 : (T)((x) % (y)))

/* Rounded towards negative infinity: one less when the remainder is not 0
 * and the operands' signs differ. */
#define S_FDIV(T, U, x, y)                                                                         \
    (T)(S_TDIV(T, U, x, y) - (T)(S_TMOD(T, x, y) != 0 && (((x) < 0) != ((y) < 0))))
#define S_FMOD(T, x, y)                                                                            \
    (T)(S_TMOD(T, x, y) != 0 && ((S_TMOD(T, x, y) < 0) != ((y) < 0)) ? S_TMOD(T, x, y) + (y)       \
                                                                     : S_TMOD(T, x, y))

#define S_INT_ROW(op, sfx, T, U, LOAD) S_BINARY_ROW(s_##op##_##sfx, T, T, LOAD, S_IEXPR_##op(T, U))
#define S_IEXPR_truncate_div(T, U)     S_TDIV(T, U, x, y)
#define S_IEXPR_floor_div(T, U)        S_FDIV(T, U, x, y)
#define S_IEXPR_floor_mod(T, U)        (T)((U)S_FMOD(T, x, y))

#if defined(__GNUC__)
/* The templates compare unsigned values with 0; that is intended. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
S_INT_TYPES(S_INT_ROW, truncate_div)
S_INT_TYPES(S_INT_ROW, floor_div)
S_INT_TYPES(S_INT_ROW, floor_mod)
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* Floats: floor(x / y), and fmod adjusted to the divisor's sign. */
static double s_floor_mod_d(double x, double y)
{
    double m = fmod(x, y);
    return m != 0 && ((y < 0) != (m < 0)) ? m + y : m;
}

static float s_floor_mod_f(float x, float y)
{
    float m = fmodf(x, y);
    return m != 0 && ((y < 0) != (m < 0)) ? m + y : m;
}

S_BINARY_ROW(s_floor_div_f32, float, float, S_LOAD, floorf(x / y))
S_BINARY_ROW(s_floor_div_f64, double, double, S_LOAD, floor(x / y))
S_BINARY_ROW(s_floor_mod_f32, float, float, S_LOAD, s_floor_mod_f(x, y))
S_BINARY_ROW(s_floor_mod_f64, double, double, S_LOAD, s_floor_mod_d(x, y))

static const s_row_fn s_truncate_div_fns[ZF_UINT64 + 1] = {S_INT_TABLE(truncate_div)};
static const s_row_fn s_floor_div_fns[ZF_UINT64 + 1] = {
    S_INT_TABLE(floor_div), [ZF_FLOAT] = s_floor_div_f32, [ZF_DOUBLE] = s_floor_div_f64};
static const s_row_fn s_floor_mod_fns[ZF_UINT64 + 1] = {
    S_INT_TABLE(floor_mod), [ZF_FLOAT] = s_floor_mod_f32, [ZF_DOUBLE] = s_floor_mod_f64};

static bool s_has_zero(const zf_tensor_t *t)
{
    const unsigned char *p = zf_tensor_data(t);
    size_t elem = zf_dtype_size(zf_tensor_dtype(t));
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++, p += elem) {
        bool zero = true;
        for (size_t k = 0; k < elem && zero; k++) zero = p[k] == 0;
        if (zero) return true;
    }
    return false;
}

static zf_status_t s_divide(zf_kernel_ctx_t *ctx, const s_row_fn *fns)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    bool integer = (ZF_TYPES_INTEGER & ZF_TYPE_BIT(t)) != 0;
    if (integer && zf_tensor_dtype(ctx->inputs[1]) == t && s_has_zero(ctx->inputs[1])) {
        /* checked first: the loops may then divide freely */
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Integer division by zero");
    }
    s_cmp_t op = {.is_equality = false};
    memcpy(op.fns, fns, sizeof op.fns);
    return s_compare(ctx, &op, t);
}

#define S_DIV_KERNEL(op)                                                                           \
    static zf_status_t s_##op##_compute(zf_kernel_ctx_t *ctx)                                      \
    {                                                                                              \
        return s_divide(ctx, s_##op##_fns);                                                        \
    }
S_DIV_KERNEL(truncate_div)
S_DIV_KERNEL(floor_div)
S_DIV_KERNEL(floor_mod)

/* ---- Select and SelectV2 ------------------------------------------------------- */

/* A row of o[j] = c[j] ? t[j] : e[j], by element size. */
#define S_SELECT_ROW(name, T)                                                                      \
    static void name(const void *const *in, const int64_t *st, void *vo, int64_t n)                \
    {                                                                                              \
        const bool *c = in[0];                                                                     \
        const T *t = in[1], *e = in[2];                                                            \
        T *o = vo;                                                                                 \
        if (st[0] && st[1] && st[2]) {                                                             \
            for (int64_t j = 0; j < n; j++) o[j] = c[j] ? t[j] : e[j];                             \
        } else {                                                                                   \
            for (int64_t j = 0; j < n; j++) o[j] = c[j * st[0]] ? t[j * st[1]] : e[j * st[2]];     \
        }                                                                                          \
    }

typedef struct {
    uint64_t w[2];
} s_bytes16_t;

S_SELECT_ROW(s_select_1, uint8_t)
S_SELECT_ROW(s_select_2, uint16_t)
S_SELECT_ROW(s_select_4, uint32_t)
S_SELECT_ROW(s_select_8, uint64_t)
S_SELECT_ROW(s_select_16, s_bytes16_t)

static s_row_fn s_select_fn(size_t elem)
{
    switch (elem) {
    case 1: return s_select_1;
    case 2: return s_select_2;
    case 4: return s_select_4;
    case 8: return s_select_8;
    case 16: return s_select_16;
    default: return NULL;
    }
}

/* Strings, element by element (each output element owns a copy). */
static zf_status_t s_select_strings(const zf_tensor_t *const *ins, zf_tensor_t *out)
{
    s_bcast_t bc = {.nin = 3};
    s_plan(&bc, ins, zf_tensor_shape(out));
    for (int64_t i = 0; i < zf_tensor_num_elements(out); i++) {
        int64_t off[S_MAX_IN];
        s_offsets(&bc, i, off);
        bool c = ((const bool *)bc.in[0])[off[0]];
        const zf_tstring_t *s =
            c ? zf_tensor_string(ins[1], off[1]) : zf_tensor_string(ins[2], off[2]);
        ZF_TRY(zf_tensor_set_string(out, i, s->data, s->len));
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_same_then_else(const zf_kernel_ctx_t *ctx, const zf_tensor_t *const *ins)
{
    if (zf_shape_equal(zf_tensor_shape(ins[1]), zf_tensor_shape(ins[2]))) return ZF_STATUS_OK;
    char st[ZF_SHAPE_STRING_MAX], se[ZF_SHAPE_STRING_MAX];
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                           "'then' and 'else' must have the same size.  but received: %s vs. %s",
                           zf_kernels_shape_str(ins[1], st), zf_kernels_shape_str(ins[2], se));
}

/* Select's three cases: a scalar condition, one of the same shape, or a
 * vector picking rows (which broadcasts as [n, 1, ..., 1]). */
static zf_status_t s_select_legacy_shapes(const zf_kernel_ctx_t *ctx, const zf_tensor_t *const *ins,
                                          zf_shape_t *cond, zf_shape_t *out)
{
    const zf_shape_t *c = zf_tensor_shape(ins[0]), *t = zf_tensor_shape(ins[1]);
    char sc[ZF_SHAPE_STRING_MAX], st[ZF_SHAPE_STRING_MAX];
    *cond = *c;
    *out = *t;
    if (c->rank == 0) return s_same_then_else(ctx, ins);
    if (c->rank == 1 && t->rank != 1) {
        if (t->rank == 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "'then' must be at least a vector, but saw shape: %s",
                                   zf_kernels_shape_str(ins[1], st));
        if (t->dims[0] != c->dims[0])
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Number of batches of 'then' must match size of 'cond', but "
                                   "saw: %lld vs. %lld",
                                   (long long)t->dims[0], (long long)c->dims[0]);
        ZF_TRY(s_same_then_else(ctx, ins));
        *cond = *t;
        for (int k = 1; k < cond->rank; k++) cond->dims[k] = 1;
        return ZF_STATUS_OK;
    }
    for (int i = 1; i < 3; i++)
        if (!zf_shape_equal(c, zf_tensor_shape(ins[i])))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Inputs to operation %s of type %s must have the same size and "
                                   "shape.  Input 0: %s != input %d: %s",
                                   ctx->node->name, ctx->node->op, zf_kernels_shape_str(ins[0], sc),
                                   i, zf_kernels_shape_str(ins[i], st));
    return ZF_STATUS_OK;
}

zf_status_t zf_kernels_select_shapes(const zf_kernel_ctx_t *ctx, bool broadcast, zf_shape_t *cond,
                                     zf_shape_t *out)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    ZF_TRY(zf_kernels_check_dtype(ctx, 0, ZF_BOOL));
    const zf_tensor_t *const ins[3] = {ctx->inputs[0], ctx->inputs[1], ctx->inputs[2]};
    zf_dtype_t t = zf_tensor_dtype(ins[1]), e = zf_tensor_dtype(ins[2]);
    if (t != e)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "'then' and 'else' must have the same dtype, got %s and %s",
                               zf_kernels_dtype_name((int)t), zf_kernels_dtype_name((int)e));
    if (!broadcast) return s_select_legacy_shapes(ctx, ins, cond, out);
    zf_shape_t te;
    *cond = *zf_tensor_shape(ins[0]);
    if (!zf_kernels_broadcast_shape(zf_tensor_shape(ins[1]), zf_tensor_shape(ins[2]), &te) ||
        !zf_kernels_broadcast_shape(cond, &te, out)) {
        char sc[ZF_SHAPE_STRING_MAX], st[ZF_SHAPE_STRING_MAX], se[ZF_SHAPE_STRING_MAX];
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "condition %s, then %s, and else %s must be broadcastable",
                               zf_kernels_shape_str(ins[0], sc), zf_kernels_shape_str(ins[1], st),
                               zf_kernels_shape_str(ins[2], se));
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_select(zf_kernel_ctx_t *ctx, bool broadcast)
{
    zf_shape_t cs, shape;
    ZF_TRY(zf_kernels_select_shapes(ctx, broadcast, &cs, &shape));
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[1]);
    if (t != ZF_STRING && !s_select_fn(zf_dtype_size(t)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    const zf_tensor_t *cond = ctx->inputs[0];
    if (!broadcast && cs.rank == 0) {
        /* a scalar condition picks a whole input */
        zf_kernel_set_output(ctx, 0, ctx->inputs[*(const bool *)zf_tensor_data(cond) ? 1 : 2]);
        return ZF_STATUS_OK;
    }
    zf_tensor_t *reshaped = NULL;
    if (!zf_shape_equal(&cs, zf_tensor_shape(cond))) {
        ZF_TRY(zf_tensor_reshape(cond, &cs, &reshaped));
        cond = reshaped;
    }
    const zf_tensor_t *ins[3] = {cond, ctx->inputs[1], ctx->inputs[2]};
    zf_tensor_t *out = NULL;
    zf_status_t s = zf_kernel_alloc_output(ctx, 0, t, &shape, &out);
    if (zf_ok(s) && t == ZF_STRING)
        s = s_select_strings(ins, out);
    else if (zf_ok(s))
        s_run(ctx, s_select_fn(zf_dtype_size(t)), ins, 3, out);
    zf_tensor_unref(&reshaped);
    return s;
}

static zf_status_t s_select_compute(zf_kernel_ctx_t *ctx)
{
    return s_select(ctx, false);
}

static zf_status_t s_select_v2_compute(zf_kernel_ctx_t *ctx)
{
    return s_select(ctx, true);
}

/* ---- Range --------------------------------------------------------------------- */

/* A number as TensorFlow's messages print it: integers in full, floats in
 * the fewest digits that read back the same. */
static const char *s_num_str(zf_dtype_t t, const void *p, char *buf, size_t cap)
{
    switch (t) {
    case ZF_INT32: snprintf(buf, cap, "%d", *(const int32_t *)p); break;
    case ZF_INT64: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)p); break;
    case ZF_FLOAT: {
        float v = *(const float *)p;
        snprintf(buf, cap, "%.*g", FLT_DIG, (double)v);
        if (strtof(buf, NULL) != v) snprintf(buf, cap, "%.*g", FLT_DIG + 3, (double)v);
        break;
    }
    default: {
        double v = *(const double *)p;
        snprintf(buf, cap, "%.*g", DBL_DIG, v);
        if (strtod(buf, NULL) != v) snprintf(buf, cap, "%.*g", DBL_DIG + 2, v);
        break;
    }
    }
    return buf;
}

static double s_num(zf_dtype_t t, const void *p)
{
    switch (t) {
    case ZF_INT32: return *(const int32_t *)p;
    case ZF_INT64: return (double)*(const int64_t *)p;
    case ZF_FLOAT: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static zf_status_t s_range_compute(zf_kernel_ctx_t *ctx)
{
    static const char *const names[3] = {"start", "limit", "delta"};
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    if (!(ZF_TYPES_REAL & ZF_TYPE_BIT(t)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    const void *v[3];
    for (int i = 0; i < 3; i++) {
        const zf_tensor_t *in = ctx->inputs[i];
        ZF_TRY(zf_kernels_check_dtype(ctx, i, t));
        const zf_shape_t *s = zf_tensor_shape(in);
        char sb[ZF_SHAPE_STRING_MAX];
        if (!(s->rank == 0 || (s->rank == 1 && s->dims[0] == 1)))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be a scalar, not shape %s",
                                   names[i], zf_kernels_shape_str(in, sb));
        v[i] = zf_tensor_data(in);
    }
    char b0[40], b1[40];
    double start = s_num(t, v[0]), limit = s_num(t, v[1]), delta = s_num(t, v[2]);
    if (delta == 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Requires delta != 0: %s",
                               s_num_str(t, v[2], b0, sizeof b0));
    /* compared in the input type: int64 values beyond 2^53 stay exact */
    bool up = delta > 0, ordered;
    if (t == ZF_INT64) {
        int64_t a = *(const int64_t *)v[0], b = *(const int64_t *)v[1];
        ordered = up ? a <= b : a >= b;
    } else {
        ordered = up ? start <= limit : start >= limit;
    }
    if (!ordered)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Requires start %s limit when delta %s 0: %s/%s",
                               up ? "<=" : ">=", up ? ">" : "<", s_num_str(t, v[0], b0, sizeof b0),
                               s_num_str(t, v[1], b1, sizeof b1));
    int64_t size;
    if (t == ZF_INT32 || t == ZF_INT64) {
        int64_t a = t == ZF_INT32 ? *(const int32_t *)v[0] : *(const int64_t *)v[0];
        int64_t b = t == ZF_INT32 ? *(const int32_t *)v[1] : *(const int64_t *)v[1];
        int64_t d = t == ZF_INT32 ? *(const int32_t *)v[2] : *(const int64_t *)v[2];
        /* |limit - start| and |delta| as unsigned: no overflow */
        uint64_t span = up ? (uint64_t)b - (uint64_t)a : (uint64_t)a - (uint64_t)b;
        uint64_t step = d > 0 ? (uint64_t)d : (uint64_t)0 - (uint64_t)d;
        uint64_t n = span / step + (span % step != 0);
        if (n > (uint64_t)INT64_MAX)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Requires ((limit - start) / delta) "
                                   "<= 9223372036854775807");
        size = (int64_t)n;
    } else {
        double n = ceil(fabs((limit - start) / delta));
        if (!(n <= 9.2e18))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Requires ((limit - start) / delta) "
                                   "<= 9223372036854775807");
        size = (int64_t)n;
    }
    zf_shape_t shape = zf_shape_of(1, &size);
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, t, &shape, &out));
    void *o = zf_tensor_data(out);
    switch (t) {
    case ZF_INT32: {
        uint32_t x = (uint32_t) * (const int32_t *)v[0], d = (uint32_t) * (const int32_t *)v[2];
        for (int64_t i = 0; i < size; i++, x += d) ((int32_t *)o)[i] = (int32_t)x;
        break;
    }
    case ZF_INT64: {
        uint64_t x = (uint64_t) * (const int64_t *)v[0], d = (uint64_t) * (const int64_t *)v[2];
        for (int64_t i = 0; i < size; i++, x += d) ((int64_t *)o)[i] = (int64_t)x;
        break;
    }
    case ZF_FLOAT: {
        float x = *(const float *)v[0], d = *(const float *)v[2];
        for (int64_t i = 0; i < size; i++, x += d) ((float *)o)[i] = x;
        break;
    }
    default: {
        double x = *(const double *)v[0], d = *(const double *)v[2];
        for (int64_t i = 0; i < size; i++, x += d) ((double *)o)[i] = x;
        break;
    }
    }
    return ZF_STATUS_OK;
}

/* ---- registration -------------------------------------------------------------- */

#define S_EQUALITY_KERNEL(op_, compute_)                                                           \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = S_TYPES_EQUALITY,                      \
        .create = s_equality_create, .compute = (compute_)                                         \
    }

static const zf_kernel_t s_defs[] = {
    ZF_CPU_KERNEL("Less", ZF_TYPES_ORDERED, s_less_compute),
    ZF_CPU_KERNEL("LessEqual", ZF_TYPES_ORDERED, s_less_equal_compute),
    ZF_CPU_KERNEL("Greater", ZF_TYPES_ORDERED, s_greater_compute),
    ZF_CPU_KERNEL("GreaterEqual", ZF_TYPES_ORDERED, s_greater_equal_compute),
    S_EQUALITY_KERNEL("Equal", s_equal_compute),
    S_EQUALITY_KERNEL("NotEqual", s_not_equal_compute),
    ZF_CPU_KERNEL("LogicalAnd", 0, s_logical_and_compute),
    ZF_CPU_KERNEL("LogicalOr", 0, s_logical_or_compute),
    ZF_CPU_KERNEL("LogicalNot", 0, s_logical_not_compute),
    ZF_CPU_KERNEL("Select", S_TYPES_SELECT, s_select_compute),
    ZF_CPU_KERNEL("SelectV2", S_TYPES_SELECT, s_select_v2_compute),
    {.op = "Range",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_REAL,
     .flags = ZF_KERNEL_SIZED_BY_VALUE,
     .compute = s_range_compute},
    ZF_CPU_KERNEL("FloorDiv", S_TYPES_FLOOR, s_floor_div_compute),
    ZF_CPU_KERNEL("FloorMod", S_TYPES_FLOOR, s_floor_mod_compute),
    ZF_CPU_KERNEL("TruncateDiv", ZF_TYPES_INTEGER, s_truncate_div_compute),
    ZF_CPU_KERNEL("Div", ZF_TYPES_INTEGER, s_truncate_div_compute),
};

zf_status_t zf__kernels_register_compare(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
