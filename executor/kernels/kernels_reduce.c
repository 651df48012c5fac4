/* CPU reductions: Sum, Mean, Max, Min, Prod (float, double and every
 * integer type) and All, Any (bool) over the axes given by the second input
 * (keep_dims attr), and ArgMax/ArgMin over one axis.
 *
 * The input is viewed with its dims collapsed into alternating kept and
 * reduced runs; a walk over its rows then either folds a whole row into one
 * output (innermost run reduced) or folds it element-wise into an output
 * row (innermost run kept). Floating sums of rows accumulate in double. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

typedef enum { S_SUM, S_MEAN, S_MAX, S_MIN, S_PROD, S_ALL, S_ANY } s_reduce_op_t;

typedef struct {
    s_reduce_op_t op;
    bool keep_dims;
} s_reduce_state_t;

/* ---- typed folds ---------------------------------------------------------------- */

/* fold_row: *acc = fold(*acc, in[0..n)); fold_cols: out[j] = fold(out[j], in[j]). */
typedef void (*s_fold_row_fn)(const void *in, int64_t n, void *acc);
typedef void (*s_fold_cols_fn)(const void *in, int64_t n, void *out);

#define S_FOLDS(name, T, ACC, STEP)                                                                \
    static void s_row_##name(const void *vin, int64_t n, void *vacc)                               \
    {                                                                                              \
        const T *in = vin;                                                                         \
        ACC a = (ACC)(*(T *)vacc);                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                          \
            ACC x = (ACC)in[i];                                                                    \
            a = (STEP);                                                                            \
        }                                                                                          \
        *(T *)vacc = (T)a;                                                                         \
    }                                                                                              \
    static void s_cols_##name(const void *vin, int64_t n, void *vout)                              \
    {                                                                                              \
        const T *in = vin;                                                                         \
        T *out = vout;                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = out[i], x = in[i];                                                               \
            out[i] = (T)(STEP);                                                                    \
        }                                                                                          \
    }

/* Integer sums and products wrap (computed in the unsigned type). */
#define S_ADD(U) (U)((U)a + (U)x)
#define S_MUL(U) (U)((U)a * (U)x)

S_FOLDS(sum_f32, float, double, a + x)
S_FOLDS(sum_f64, double, double, a + x)
S_FOLDS(sum_i32, int32_t, uint32_t, S_ADD(uint32_t))
S_FOLDS(sum_i64, int64_t, uint64_t, S_ADD(uint64_t))
S_FOLDS(prod_f32, float, double, a *x)
S_FOLDS(prod_f64, double, double, a *x)
S_FOLDS(prod_i32, int32_t, uint32_t, S_MUL(uint32_t))
S_FOLDS(prod_i64, int64_t, uint64_t, S_MUL(uint64_t))
S_FOLDS(max_f32, float, float, x > a ? x : a)
S_FOLDS(max_f64, double, double, x > a ? x : a)
S_FOLDS(max_i32, int32_t, int32_t, x > a ? x : a)
S_FOLDS(max_i64, int64_t, int64_t, x > a ? x : a)
S_FOLDS(min_f32, float, float, x < a ? x : a)
S_FOLDS(min_f64, double, double, x < a ? x : a)
S_FOLDS(min_i32, int32_t, int32_t, x < a ? x : a)
S_FOLDS(min_i64, int64_t, int64_t, x < a ? x : a)
S_FOLDS(all_b, bool, bool, a &&x)
S_FOLDS(any_b, bool, bool, a || x)

/* The other integer types: X(suffix, type, its unsigned type, min, max).
 * Their sums and products go through uint64_t, which no promotion to int
 * can overflow. */
#define S_OTHER_INTS(X)                                                                            \
    X(i8, int8_t, uint8_t, INT8_MIN, INT8_MAX)                                                     \
    X(i16, int16_t, uint16_t, INT16_MIN, INT16_MAX)                                                \
    X(u8, uint8_t, uint8_t, 0, UINT8_MAX)                                                          \
    X(u16, uint16_t, uint16_t, 0, UINT16_MAX)                                                      \
    X(u32, uint32_t, uint32_t, 0, UINT32_MAX)                                                      \
    X(u64, uint64_t, uint64_t, 0, UINT64_MAX)
#define S_INT_FOLDS(sfx, T, U, LO, HI)                                                             \
    S_FOLDS(sum_##sfx, T, U, (U)((uint64_t)a + (uint64_t)x))                                       \
    S_FOLDS(prod_##sfx, T, U, (U)((uint64_t)a * (uint64_t)x))                                      \
    S_FOLDS(max_##sfx, T, T, x > a ? x : a)                                                        \
    S_FOLDS(min_##sfx, T, T, x < a ? x : a)
S_OTHER_INTS(S_INT_FOLDS)

typedef struct {
    s_fold_row_fn row;
    s_fold_cols_fn cols;
} s_fold_t;

#define S_FOLD(name)                                                                               \
    {                                                                                              \
        s_row_##name, s_cols_##name                                                                \
    }

/* [op][dtype]: dtype order float, double, int32, int64, bool, then
 * S_OTHER_INTS' order; Mean folds as Sum; only All and Any take bool, and
 * only bool. */
#define S_BOOL_INDEX 4
#define S_NUM_TYPES  11
#define S_OTHER_FOLDS(op)                                                                          \
    [5] = S_FOLD(op##_i8), [6] = S_FOLD(op##_i16), [7] = S_FOLD(op##_u8), [8] = S_FOLD(op##_u16),  \
    [9] = S_FOLD(op##_u32), [10] = S_FOLD(op##_u64)
#define S_NUMERIC_FOLDS(op)                                                                        \
    {                                                                                              \
        S_FOLD(op##_f32), S_FOLD(op##_f64), S_FOLD(op##_i32), S_FOLD(op##_i64), S_OTHER_FOLDS(op)  \
    }
static const s_fold_t s_folds[7][S_NUM_TYPES] = {
    [S_SUM] = S_NUMERIC_FOLDS(sum),
    [S_MEAN] = S_NUMERIC_FOLDS(sum),
    [S_MAX] = S_NUMERIC_FOLDS(max),
    [S_MIN] = S_NUMERIC_FOLDS(min),
    [S_PROD] = S_NUMERIC_FOLDS(prod),
    [S_ALL] = {[S_BOOL_INDEX] = S_FOLD(all_b)},
    [S_ANY] = {[S_BOOL_INDEX] = S_FOLD(any_b)},
};

static int s_dtype_index(zf_dtype_t t)
{
    switch (t) {
    case ZF_FLOAT: return 0;
    case ZF_DOUBLE: return 1;
    case ZF_INT32: return 2;
    case ZF_INT64: return 3;
    case ZF_BOOL: return S_BOOL_INDEX;
    case ZF_INT8: return 5;
    case ZF_INT16: return 6;
    case ZF_UINT8: return 7;
    case ZF_UINT16: return 8;
    case ZF_UINT32: return 9;
    case ZF_UINT64: return 10;
    default: return -1;
    }
}

/* Cases of a switch on the dtype for the integer types but int32, int64:
 * X(C type, min, max). */
#define S_OTHER_INT_CASES(X)                                                                       \
    case ZF_INT8: X(int8_t, INT8_MIN, INT8_MAX); break;                                            \
    case ZF_INT16: X(int16_t, INT16_MIN, INT16_MAX); break;                                        \
    case ZF_UINT8: X(uint8_t, 0, UINT8_MAX); break;                                                \
    case ZF_UINT16: X(uint16_t, 0, UINT16_MAX); break;                                             \
    case ZF_UINT32: X(uint32_t, 0, UINT32_MAX); break;                                             \
    case ZF_UINT64: X(uint64_t, 0, UINT64_MAX); break;

/* Fills n outputs with the op's identity (what an empty reduction gives). */
static void s_fill_identity(s_reduce_op_t op, zf_dtype_t t, void *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        bool one = op == S_PROD, hi = op == S_MIN, lo = op == S_MAX;
        switch (t) {
        case ZF_BOOL: ((bool *)out)[i] = op == S_ALL; break;
        case ZF_FLOAT:
            ((float *)out)[i] = one ? 1.0f : hi ? INFINITY : lo ? -INFINITY : 0.0f;
            break;
        case ZF_DOUBLE:
            ((double *)out)[i] = one ? 1.0 : hi ? INFINITY : lo ? -INFINITY : 0.0;
            break;
#define S_INT_IDENTITY(T, LO, HI) ((T *)out)[i] = (T)(one ? 1 : hi ? (HI) : lo ? (LO) : 0)
        case ZF_INT32:
            S_INT_IDENTITY(int32_t, INT32_MIN, INT32_MAX);
            break;
            S_OTHER_INT_CASES(S_INT_IDENTITY)
        default: S_INT_IDENTITY(int64_t, INT64_MIN, INT64_MAX);
#undef S_INT_IDENTITY
        }
    }
}

/* ---- axes and shapes ------------------------------------------------------------------ */

/* Marks the reduced axes of a rank-dim input. */
static zf_status_t s_read_axes(const zf_kernel_ctx_t *ctx, int rank, bool *reduced)
{
    int64_t axes[4 * ZF_MAX_RANK];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "reduction_indices", axes, 4 * ZF_MAX_RANK, &n));
    for (int k = 0; k < rank; k++) reduced[k] = false;
    for (int i = 0; i < n; i++) {
        int a = 0;
        if (!zf_kernels_axis(axes[i], rank, &a))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Invalid reduction dimension (%lld for input with %d "
                                   "dimension(s)",
                                   (long long)axes[i], rank);
        if (reduced[a])
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Invalid reduction arguments: Axes contains duplicate "
                                   "dimension: %d",
                                   a);
        reduced[a] = true;
    }
    return ZF_STATUS_OK;
}

/* The input collapsed into runs; out_stride is 0 for reduced runs. */
typedef struct {
    int rank;
    int64_t dims[ZF_MAX_RANK];
    bool reduced[ZF_MAX_RANK];
    int64_t out_stride[ZF_MAX_RANK];
    s_fold_t fold;
    const char *in;
    char *out;
    size_t elem;
} s_plan_t;

static void s_plan(const zf_shape_t *in, const bool *reduced, s_plan_t *p)
{
    p->rank = 0;
    for (int k = 0; k < in->rank; k++) {
        if (in->dims[k] == 1) continue;
        int r = p->rank;
        if (r > 0 && p->reduced[r - 1] == reduced[k]) {
            p->dims[r - 1] *= in->dims[k];
            continue;
        }
        p->dims[r] = in->dims[k];
        p->reduced[r] = reduced[k];
        p->rank++;
    }
    if (p->rank == 0) { /* one element: a kept run of 1 */
        p->rank = 1;
        p->dims[0] = 1;
        p->reduced[0] = false;
    }
    int64_t s = 1;
    for (int k = p->rank - 1; k >= 0; k--) {
        p->out_stride[k] = p->reduced[k] ? 0 : s;
        if (!p->reduced[k]) s *= p->dims[k];
    }
}

/* Rows [begin, end) of the collapsed input (rows = all dims but the last). */
static void s_reduce_rows(const s_plan_t *p, int64_t begin, int64_t end)
{
    int last = p->rank - 1;
    int64_t inner = p->dims[last], idx[ZF_MAX_RANK] = {0}, off = 0, row = begin;
    for (int k = last - 1; k >= 0; k--) {
        idx[k] = row % p->dims[k];
        row /= p->dims[k];
        off += idx[k] * p->out_stride[k];
    }
    for (int64_t r = begin; r < end; r++) {
        const char *in = p->in + (size_t)(r * inner) * p->elem;
        char *out = p->out + (size_t)off * p->elem;
        if (p->reduced[last])
            p->fold.row(in, inner, out);
        else
            p->fold.cols(in, inner, out);
        for (int k = last - 1; k >= 0; k--) {
            off += p->out_stride[k];
            if (++idx[k] < p->dims[k]) break;
            off -= p->out_stride[k] * p->dims[k];
            idx[k] = 0;
        }
    }
}

/* Parallel over the outermost run when it is kept: chunks then write
 * disjoint outputs. */
static void s_reduce_outer(void *arg, int64_t begin, int64_t end)
{
    const s_plan_t *p = arg;
    int64_t rows_per = 1;
    for (int k = 1; k < p->rank - 1; k++) rows_per *= p->dims[k];
    s_reduce_rows(p, begin * rows_per, end * rows_per);
}

/* ---- Sum, Mean, Max, Min, Prod -------------------------------------------------------------- */

static zf_status_t s_reduce_create(const Tensorflow__NodeDef *node, void **state)
{
    s_reduce_state_t st = {S_SUM, false};
    ZF_TRY(zf_node_attr_bool_or(node, "keep_dims", false, &st.keep_dims));
    const char *op = node->op;
    st.op = !strcmp(op, "Mean")   ? S_MEAN
            : !strcmp(op, "Max")  ? S_MAX
            : !strcmp(op, "Min")  ? S_MIN
            : !strcmp(op, "Prod") ? S_PROD
            : !strcmp(op, "All")  ? S_ALL
            : !strcmp(op, "Any")  ? S_ANY
                                  : S_SUM;
    s_reduce_state_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("reduction kernel");
    *p = st;
    *state = p;
    return ZF_STATUS_OK;
}

/* Mean: the sums divided by the number of reduced elements. */
static void s_divide(zf_dtype_t t, void *out, int64_t n, int64_t count)
{
    if (count == 0 && t != ZF_FLOAT && t != ZF_DOUBLE) return; /* empty: stays 0 */
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case ZF_FLOAT:
            ((float *)out)[i] = (float)((double)((float *)out)[i] / (double)count);
            break;
        case ZF_DOUBLE: ((double *)out)[i] /= (double)count; break;
#define S_INT_DIVIDE(T, LO, HI) ((T *)out)[i] = (T)(((T *)out)[i] / count)
        case ZF_INT32:
            S_INT_DIVIDE(int32_t, 0, 0);
            break;
            S_OTHER_INT_CASES(S_INT_DIVIDE)
        default: ((int64_t *)out)[i] /= count;
#undef S_INT_DIVIDE
        }
    }
}

/* Folds x into out (already filled with the op's identity). */
static void s_reduce_into(zf_kernel_ctx_t *ctx, s_fold_t fold, const zf_tensor_t *x,
                          const bool *reduced, zf_tensor_t *out)
{
    int64_t n = zf_tensor_num_elements(x);
    if (n == 0) return;
    s_plan_t p = {.fold = fold,
                  .in = zf_tensor_data(x),
                  .out = zf_tensor_data(out),
                  .elem = zf_dtype_size(zf_tensor_dtype(x))};
    s_plan(zf_tensor_shape(x), reduced, &p);
    if (p.rank > 1 && !p.reduced[0])
        zf_kernels_parallel_for(ctx, p.dims[0], ZF_KERNELS_PARALLEL_MIN * p.dims[0] / n + 1,
                                s_reduce_outer, &p);
    else
        s_reduce_rows(&p, 0, n / p.dims[p.rank - 1]);
}

static zf_status_t s_reduce_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const s_reduce_state_t *st = ctx->state;
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    zf_dtype_t t = zf_tensor_dtype(x);
    int ti = s_dtype_index(t);
    if (ti < 0 || !s_folds[st->op][ti].row)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    bool reduced[ZF_MAX_RANK];
    ZF_TRY(s_read_axes(ctx, in->rank, reduced));
    zf_shape_t shape = {.rank = 0};
    int64_t count = 1; /* elements folded into each output */
    for (int k = 0; k < in->rank; k++) {
        if (reduced[k]) count *= in->dims[k];
        if (!reduced[k] || st->keep_dims) shape.dims[shape.rank++] = reduced[k] ? 1 : in->dims[k];
    }
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, t, &shape, &out));
    int64_t n_out = zf_tensor_num_elements(out);
    s_fill_identity(st->op, t, zf_tensor_data(out), n_out);
    s_reduce_into(ctx, s_folds[st->op][ti], x, reduced, out);
    if (st->op == S_MEAN) s_divide(t, zf_tensor_data(out), n_out, count);
    return ZF_STATUS_OK;
}

/* ---- ArgMax, ArgMin ---------------------------------------------------------------------------
 */

typedef struct {
    bool is_min;
    zf_dtype_t out_type;
} s_arg_state_t;

static zf_status_t s_arg_create(const Tensorflow__NodeDef *node, void **state)
{
    s_arg_state_t st = {strcmp(node->op, "ArgMin") == 0, ZF_INT64};
    ZF_TRY(zf_node_attr_type_or(node, "output_type", ZF_INT64, &st.out_type));
    if (st.out_type != ZF_INT32 && st.out_type != ZF_INT64)
        return zf_invalid_argument("%s (%s): output_type must be int32 or int64, got %s",
                                   node->name, node->op, zf_kernels_dtype_name((int)st.out_type));
    s_arg_state_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("ArgMax kernel");
    *p = st;
    *state = p;
    return ZF_STATUS_OK;
}

/* The first index of the extreme value along the axis (stride inner). */
#define S_ARG_SCAN(T)                                                                              \
    do {                                                                                           \
        const T *v = (const T *)data + o * axis_n * inner + j;                                     \
        T best = v[0];                                                                             \
        for (int64_t a = 1; a < axis_n; a++) {                                                     \
            T x = v[a * inner];                                                                    \
            if (is_min ? x < best : x > best) {                                                    \
                best = x;                                                                          \
                bi = a;                                                                            \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static int64_t s_arg_index(zf_dtype_t t, const void *data, int64_t o, int64_t j, int64_t axis_n,
                           int64_t inner, bool is_min)
{
    int64_t bi = 0;
    switch (t) {
    case ZF_FLOAT: S_ARG_SCAN(float); break;
    case ZF_DOUBLE: S_ARG_SCAN(double); break;
    case ZF_INT32: S_ARG_SCAN(int32_t); break;
#define S_ARG_CASE(T, LO, HI) S_ARG_SCAN(T)
        S_OTHER_INT_CASES(S_ARG_CASE)
#undef S_ARG_CASE
    default: S_ARG_SCAN(int64_t);
    }
    return bi;
}

zf_status_t zf_kernels_arg_axis(const zf_kernel_ctx_t *ctx, int *axis, zf_shape_t *shape,
                                int64_t *outer, int64_t *inner)
{
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    char sbuf[ZF_SHAPE_STRING_MAX];
    int64_t dim = 0;
    ZF_TRY(zf_kernels_input_int(ctx, 1, "dimension", &dim));
    if (!zf_kernels_axis(dim, in->rank, axis))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Expected dimension in the range [%d, %d), but got %lld", -in->rank,
                               in->rank, (long long)dim);
    if (in->dims[*axis] == 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Reduction axis %d is empty in shape %s",
                               *axis, zf_kernels_shape_str(x, sbuf));
    shape->rank = 0;
    *outer = *inner = 1;
    for (int k = 0; k < in->rank; k++) {
        if (k != *axis) shape->dims[shape->rank++] = in->dims[k];
        if (k < *axis) *outer *= in->dims[k];
        if (k > *axis) *inner *= in->dims[k];
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_arg_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const s_arg_state_t *st = ctx->state;
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    zf_dtype_t t = zf_tensor_dtype(x);
    if (s_dtype_index(t) < 0 || t == ZF_BOOL)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    int axis = 0;
    zf_shape_t shape;
    int64_t outer = 1, inner = 1;
    ZF_TRY(zf_kernels_arg_axis(ctx, &axis, &shape, &outer, &inner));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, st->out_type, &shape, &out));
    void *o = zf_tensor_data(out);
    for (int64_t i = 0; i < outer * inner; i++) {
        int64_t bi = s_arg_index(t, zf_tensor_data(x), i / inner, i % inner, in->dims[axis], inner,
                                 st->is_min);
        if (st->out_type == ZF_INT64)
            ((int64_t *)o)[i] = bi;
        else
            ((int32_t *)o)[i] = (int32_t)bi;
    }
    return ZF_STATUS_OK;
}

/* ---- registration
 * ----------------------------------------------------------------------------------- */

#define S_KERNEL_TYPES(op_, types_, create_, compute_)                                             \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = (types_),                              \
        .flags = ZF_KERNEL_EXPENSIVE, .create = (create_), .destroy = free, .compute = (compute_)  \
    }
#define S_KERNEL(op_, create_, compute_)                                                           \
    S_KERNEL_TYPES(op_, ZF_TYPES_FLOAT | ZF_TYPES_INTEGER, create_, compute_)

static const zf_kernel_t s_defs[] = {
    S_KERNEL("Sum", s_reduce_create, s_reduce_compute),
    S_KERNEL("Mean", s_reduce_create, s_reduce_compute),
    S_KERNEL("Max", s_reduce_create, s_reduce_compute),
    S_KERNEL("Min", s_reduce_create, s_reduce_compute),
    S_KERNEL("Prod", s_reduce_create, s_reduce_compute),
    S_KERNEL_TYPES("All", 0, s_reduce_create, s_reduce_compute),
    S_KERNEL_TYPES("Any", 0, s_reduce_create, s_reduce_compute),
    S_KERNEL("ArgMax", s_arg_create, s_arg_compute),
    S_KERNEL("ArgMin", s_arg_create, s_arg_compute),
};

zf_status_t zf__kernels_register_reduce(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
