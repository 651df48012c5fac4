/* CPU kernels that cut tensors into pieces: StridedSlice and
 * StridedSliceGrad (TensorFlow's sparse-to-dense canonicalization of
 * begin, end, strides and the five masks), Slice, Split, SplitV and
 * Unpack. They copy bytes of any fixed-size dtype. */
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/remap.h"

/* Slice specs hold at most this many entries (the masks are 32-bit). */
#define S_MAX_SPARSE 32

/* ---- StridedSlice canonicalization ------------------------------------------------------- */

typedef struct {
    int64_t begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask;
} s_masks_t;

static zf_status_t s_masks_create(const Tensorflow__NodeDef *node, void **state)
{
    s_masks_t *m = calloc(1, sizeof *m);
    if (!m) return zf_out_of_memory(node->op);
    const char *keys[] = {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                          "shrink_axis_mask"};
    int64_t *vals[] = {&m->begin_mask, &m->end_mask, &m->ellipsis_mask, &m->new_axis_mask,
                       &m->shrink_axis_mask};
    for (int i = 0; i < 5; i++) {
        zf_status_t s = zf_node_attr_int_or(node, keys[i], 0, vals[i]);
        if (!zf_ok(s)) {
            free(m);
            return s;
        }
    }
    *state = m;
    return ZF_STATUS_OK;
}

/* A strided slice over the dense dims of the input: where each dim starts,
 * its step and how many elements it takes; and the output's shape (dims
 * shrunk away, new axes of 1 added). */
typedef struct {
    int rank;
    int64_t begin[ZF_MAX_RANK], stride[ZF_MAX_RANK], size[ZF_MAX_RANK];
    zf_shape_t final;
} s_slice_plan_t;

/* The sparse spec as read from the inputs. */
typedef struct {
    int n;
    int64_t begin[S_MAX_SPARSE + 1], end[S_MAX_SPARSE + 1], stride[S_MAX_SPARSE + 1];
} s_sparse_t;

static zf_status_t s_read_sparse(const zf_kernel_ctx_t *ctx, int first, s_sparse_t *sp)
{
    const zf_tensor_t *b = ctx->inputs[first], *e = ctx->inputs[first + 1],
                      *st = ctx->inputs[first + 2];
    char bb[ZF_SHAPE_STRING_MAX], eb[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    int64_t n = zf_tensor_num_elements(b);
    if (zf_tensor_shape(b)->rank != 1 || zf_tensor_shape(e)->rank != 1 ||
        zf_tensor_shape(st)->rank != 1 || zf_tensor_num_elements(e) != n ||
        zf_tensor_num_elements(st) != n)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Expected begin, end, and strides to be 1D equal size tensors, but "
                               "got shapes %s, %s, and %s instead.",
                               zf_kernels_shape_str(b, bb), zf_kernels_shape_str(e, eb),
                               zf_kernels_shape_str(st, sb));
    int nb = 0, ne = 0, ns = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, first, "begin", sp->begin, S_MAX_SPARSE, &nb));
    ZF_TRY(zf_kernels_input_ints(ctx, first + 1, "end", sp->end, S_MAX_SPARSE, &ne));
    ZF_TRY(zf_kernels_input_ints(ctx, first + 2, "strides", sp->stride, S_MAX_SPARSE, &ns));
    sp->n = nb;
    for (int i = 0; i < nb; i++)
        if (sp->stride[i] == 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "strides[%d] must be non-zero", i);
    return ZF_STATUS_OK;
}

/* Where each dense dim's begin and end come from. */
typedef struct {
    int64_t begin[ZF_MAX_RANK], end[ZF_MAX_RANK], stride[ZF_MAX_RANK];
    uint32_t begin_mask, end_mask, shrink_mask;
    int gather[S_MAX_SPARSE + ZF_MAX_RANK]; /* final dims: a dense dim, S_NEW_AXIS or S_SHRUNK */
    int n_gather;
} s_dense_t;

enum { S_NEW_AXIS = -1, S_SHRUNK = -2 };

/* Expands the sparse spec (with its ellipsis, or one implied at its end)
 * over the input's rank dims. */
static zf_status_t s_dense_spec(const zf_kernel_ctx_t *ctx, const s_masks_t *m, s_sparse_t *sp,
                                int rank, s_dense_t *d)
{
    uint64_t ellipsis = (uint32_t)m->ellipsis_mask, new_axis = (uint32_t)m->new_axis_mask;
    if (ellipsis & (ellipsis - 1))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Multiple ellipses in slice spec not allowed");
    int n = sp->n, after_ellipsis = 0;
    bool seen = false;
    for (int i = 0; i < n; i++) {
        if (seen && (new_axis >> i & 1u)) after_ellipsis++;
        if (ellipsis >> i & 1u) seen = true;
    }
    if (!seen) ellipsis |= (uint64_t)1 << n++; /* an ellipsis implied at the end */
    memset(d, 0, sizeof *d);
    int full = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bit = (uint64_t)1 << i;
        if (ellipsis & bit) {
            int next = rank - (n - i) + 1 + after_ellipsis;
            if (next > rank) next = rank;
            for (; full < next; full++) {
                d->stride[full] = 1;
                d->begin_mask |= 1u << full;
                d->end_mask |= 1u << full;
                d->gather[d->n_gather++] = full;
            }
        } else if (new_axis & bit) {
            d->gather[d->n_gather++] = S_NEW_AXIS;
        } else {
            if (full >= rank)
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "Index out of range using input dim %d; input has only %d "
                                       "dims",
                                       full, rank);
            d->begin[full] = sp->begin[i];
            d->end[full] = sp->end[i];
            d->stride[full] = sp->stride[i];
            if ((uint64_t)(uint32_t)m->begin_mask & bit) d->begin_mask |= 1u << full;
            if ((uint64_t)(uint32_t)m->end_mask & bit) d->end_mask |= 1u << full;
            if ((uint64_t)(uint32_t)m->shrink_axis_mask & bit) {
                d->shrink_mask |= 1u << full;
                d->gather[d->n_gather++] = S_SHRUNK;
            } else {
                d->gather[d->n_gather++] = full;
            }
            full++;
        }
    }
    return ZF_STATUS_OK;
}

/* begin or end (which 0 or 1) of a dim of size dim, clamped as Python does. */
static int64_t s_canonical(int64_t x, int which, bool masked, int64_t stride, int64_t dim)
{
    int64_t lo = stride > 0 ? 0 : -1, hi = stride > 0 ? dim : dim - 1;
    if (masked) return (stride > 0) == (which == 0) ? lo : hi;
    int64_t fwd = x < 0 ? dim + x : x;
    return fwd < lo ? lo : fwd > hi ? hi : fwd;
}

static zf_status_t s_slice_plan(const zf_kernel_ctx_t *ctx, const s_masks_t *m, int first,
                                const zf_shape_t *in, s_slice_plan_t *p)
{
    s_sparse_t sp;
    s_dense_t d;
    ZF_TRY(s_read_sparse(ctx, first, &sp));
    ZF_TRY(s_dense_spec(ctx, m, &sp, in->rank, &d));
    p->rank = in->rank;
    for (int i = 0; i < in->rank; i++) {
        int64_t dim = in->dims[i], stride = d.stride[i], b = d.begin[i], e = d.end[i];
        bool shrink = d.shrink_mask >> i & 1u;
        if (shrink && stride <= 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "only stride 1 allowed on non-range indexing.");
        if (shrink) {
            int64_t fwd = b < 0 ? dim + b : b;
            if (fwd < 0 || fwd >= dim)
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "slice index %lld of dimension %d out of bounds.",
                                       (long long)b, i);
            p->begin[i] = fwd;
            p->stride[i] = 1;
            p->size[i] = 1;
            continue;
        }
        b = s_canonical(b, 0, d.begin_mask >> i & 1u, stride, dim);
        e = s_canonical(e, 1, d.end_mask >> i & 1u, stride, dim);
        int64_t len = e - b; /* both in [-1, dim]: no overflow */
        int64_t size = 0;
        if (len != 0 && (len < 0) == (stride < 0)) size = len / stride + (len % stride != 0);
        p->begin[i] = b;
        p->stride[i] = stride;
        p->size[i] = size;
    }
    p->final.rank = 0;
    for (int g = 0; g < d.n_gather; g++) {
        if (d.gather[g] == S_SHRUNK) continue;
        if (p->final.rank == ZF_MAX_RANK)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "the slice's rank would exceed %d",
                                   ZF_MAX_RANK);
        p->final.dims[p->final.rank++] = d.gather[g] == S_NEW_AXIS ? 1 : p->size[d.gather[g]];
    }
    return ZF_STATUS_OK;
}

/* The plan's index map over its dense (unshrunk) dims. */
static zf_status_t s_slice_remap(const s_slice_plan_t *p, zf_remap_t *r)
{
    zf_shape_t dense = {.rank = p->rank};
    memcpy(dense.dims, p->size, (size_t)p->rank * sizeof *p->size);
    ZF_TRY(zf_remap_init(r, &dense));
    for (int k = 0; k < p->rank; k++)
        for (int64_t j = 0; j < p->size[k]; j++) r->idx[k][j] = p->begin[k] + j * p->stride[k];
    return ZF_STATUS_OK;
}

/* Output 0 of shape, gathered from input 0 through the plan. */
static zf_status_t s_gather_slice(zf_kernel_ctx_t *ctx, const s_slice_plan_t *p,
                                  const zf_shape_t *shape)
{
    const zf_tensor_t *x = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(x), shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    zf_remap_t r;
    ZF_TRY(s_slice_remap(p, &r));
    zf_status_t s = zf_remap_gather(ctx, &r, zf_tensor_shape(x)->dims, zf_tensor_data(x),
                                    zf_tensor_data(out), zf_dtype_size(zf_tensor_dtype(x)), NULL);
    zf_remap_free(&r);
    return s;
}

static zf_status_t s_strided_slice_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 4));
    s_slice_plan_t p;
    ZF_TRY(s_slice_plan(ctx, ctx->state, 1, zf_tensor_shape(ctx->inputs[0]), &p));
    return s_gather_slice(ctx, &p, &p.final);
}

static zf_status_t s_strided_slice_grad_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 5));
    const zf_tensor_t *dy = ctx->inputs[4];
    char sbuf[ZF_SHAPE_STRING_MAX], dbuf[ZF_SHAPE_STRING_MAX];
    zf_shape_t shape;
    ZF_TRY(zf_remap_input_shape(ctx, 0, "shape", &shape));
    s_slice_plan_t p;
    ZF_TRY(s_slice_plan(ctx, ctx->state, 1, &shape, &p));
    if (!zf_shape_equal(&p.final, zf_tensor_shape(dy)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "shape of dy was %s instead of %s",
                               zf_kernels_shape_str(dy, dbuf),
                               zf_shape_to_string(&p.final, sbuf, sizeof sbuf));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(dy), &shape, &out));
    if (zf_tensor_num_elements(dy) == 0) return ZF_STATUS_OK;
    zf_remap_t r;
    ZF_TRY(s_slice_remap(&p, &r));
    zf_remap_scatter(ctx, &r, shape.dims, zf_tensor_data(dy), zf_tensor_data(out),
                     zf_dtype_size(zf_tensor_dtype(dy)));
    zf_remap_free(&r);
    return ZF_STATUS_OK;
}

/* ---- Slice ------------------------------------------------------------------------------- */

static zf_status_t s_slice_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    const zf_tensor_t *bt = ctx->inputs[1], *st = ctx->inputs[2];
    char bb[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(bt)->rank != 1 || zf_tensor_shape(st)->rank != 1 ||
        zf_tensor_num_elements(bt) != in->rank || zf_tensor_num_elements(st) != in->rank)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Expected begin and size arguments to be 1-D tensors of size %d, "
                               "but got shapes %s and %s instead.",
                               in->rank, zf_kernels_shape_str(bt, bb),
                               zf_kernels_shape_str(st, sb));
    int64_t begin[ZF_MAX_RANK], size[ZF_MAX_RANK];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "begin", begin, ZF_MAX_RANK, &n));
    ZF_TRY(zf_kernels_input_ints(ctx, 2, "size", size, ZF_MAX_RANK, &n));
    s_slice_plan_t p = {.rank = in->rank, .final = {.rank = in->rank}};
    for (int i = 0; i < in->rank; i++) {
        int64_t d = in->dims[i], b = begin[i];
        if (b < 0 || b > d)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Expected begin[%d] in [0, %lld], but got %lld", i, (long long)d,
                                   (long long)b);
        int64_t s = size[i] == -1 ? d - b : size[i];
        if (s < 0 || s > d - b)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Expected size[%d] in [0, %lld], but got %lld", i,
                                   (long long)(d - b), (long long)size[i]);
        p.begin[i] = b;
        p.stride[i] = 1;
        p.size[i] = s;
        p.final.dims[i] = s;
    }
    return s_gather_slice(ctx, &p, &p.final);
}

/* ---- Split, SplitV, Unpack --------------------------------------------------------------- */

/* Output i (of n) takes sizes[i] positions of the axis, in order; shape
 * is the input's with that dim replaced (dropped when drop_axis). On a
 * device with its own gathers each output is one strided gather. */
static zf_status_t s_split_outputs(zf_kernel_ctx_t *ctx, const zf_tensor_t *x, int axis,
                                   const int64_t *sizes, int n, bool drop_axis)
{
    const zf_shape_t *in = zf_tensor_shape(x);
    size_t elem = zf_dtype_size(zf_tensor_dtype(x));
    bool empty = zf_tensor_num_elements(x) == 0;
    int64_t outer = zf_remap_prod(in->dims, 0, axis), dim = in->dims[axis], off = 0;
    int64_t inner = zf_remap_prod(in->dims, axis + 1, in->rank);
    const char *src = zf_tensor_data(x);
    for (int i = 0; i < n; i++) {
        zf_shape_t shape = *in;
        shape.dims[axis] = sizes[i];
        if (drop_axis) {
            memmove(&shape.dims[axis], &shape.dims[axis + 1],
                    (size_t)(in->rank - axis - 1) * sizeof shape.dims[0]);
            shape.dims[--shape.rank] = 0;
        }
        zf_tensor_t *out = NULL; /* every element is written below */
        ZF_TRY(zf_kernel_alloc_output_uninit(ctx, i, zf_tensor_dtype(x), &shape, &out));
        off += sizes[i];
        if (empty || sizes[i] == 0) continue;
        size_t run = (size_t)(sizes[i] * inner) * elem; /* the input holds it */
        char *dst = zf_tensor_data(out);
        const char *first = src + (size_t)((off - sizes[i]) * inner) * elem;
        if (zf_remap_on_device(ctx)) { /* [outer, sizes[i] * inner] rows of the input */
            int64_t dims[2] = {outer, sizes[i] * inner}, strides[2] = {dim * inner, 1};
            ZF_TRY(zf_remap_strided_gather(ctx, 2, dims, strides, first, dst, elem));
            continue;
        }
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)o * run, first + (size_t)(o * dim * inner) * elem, run);
    }
    return ZF_STATUS_OK;
}

/* SplitV's sizes: n of them, one -1 at most, resolved to fill dim. */
static zf_status_t s_splitv_sizes(const zf_kernel_ctx_t *ctx, int64_t dim, int64_t *sizes, int n)
{
    const zf_tensor_t *t = ctx->inputs[1];
    ZF_TRY(zf_remap_check_index_dtype(ctx, 1, "size_splits"));
    if (zf_tensor_shape(t)->rank != 1 || zf_tensor_num_elements(t) != n)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "size of the split_tensor must be 1-D and have the same elements as "
                               "outputs got %d -D and %lld elements",
                               zf_tensor_shape(t)->rank, (long long)zf_tensor_num_elements(t));
    int unknown = -1;
    int64_t known = 0;
    for (int i = 0; i < n; i++) {
        sizes[i] = zf_remap_index_at(t, i);
        if (sizes[i] == -1) {
            if (unknown >= 0)
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "There can only be one -1 in the input.");
            unknown = i;
        } else if (sizes[i] < 0) {
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Split size at index %d must be >= 0. Got: %lld", i,
                                   (long long)sizes[i]);
        } else if (__builtin_add_overflow(known, sizes[i], &known) || known > dim) {
            known = dim + 1;
        }
    }
    if ((unknown < 0 && known != dim) || (unknown >= 0 && known > dim))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Determined shape must either match input shape along split_dim "
                               "exactly if fully specified, or be less than the size of the input "
                               "along split_dim if not fully specified.  Got: %lld",
                               (long long)known);
    if (unknown >= 0) sizes[unknown] = dim - known;
    return ZF_STATUS_OK;
}

/* Split (value input 1, split_dim input 0, equal pieces) and SplitV
 * (value input 0, size_splits input 1, split_dim input 2). */
static zf_status_t s_split(zf_kernel_ctx_t *ctx, bool v)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, v ? 3 : 2));
    const zf_tensor_t *x = ctx->inputs[v ? 0 : 1];
    const zf_shape_t *in = zf_tensor_shape(x);
    int n = ctx->num_outputs, axis = 0;
    int64_t dim = 0;
    ZF_TRY(zf_kernels_input_int(ctx, v ? 2 : 0, "split_dim", &dim));
    if (!zf_kernels_axis(dim, in->rank, &axis))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "-input rank(-%d) <= split_dim < input rank (%d), but got %lld",
                               in->rank, in->rank, (long long)dim);
    if (n <= 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Number of ways to split should be > 0, but got %d", n);
    if (!v && in->dims[axis] % n != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Number of ways to split should evenly divide the split dimension, "
                               "but got split_dim %d (size = %lld) and num_split %d",
                               axis, (long long)in->dims[axis], n);
    int64_t *sizes = malloc((size_t)n * sizeof *sizes);
    if (!sizes) return zf_out_of_memory(ctx->node->op);
    zf_status_t s = ZF_STATUS_OK;
    if (v)
        s = s_splitv_sizes(ctx, in->dims[axis], sizes, n);
    else
        for (int i = 0; i < n; i++) sizes[i] = in->dims[axis] / n;
    if (zf_ok(s)) s = s_split_outputs(ctx, x, axis, sizes, n, false);
    free(sizes);
    return s;
}

static zf_status_t s_split_compute(zf_kernel_ctx_t *ctx)
{
    return s_split(ctx, false);
}

static zf_status_t s_splitv_compute(zf_kernel_ctx_t *ctx)
{
    return s_split(ctx, true);
}

static zf_status_t s_unpack_create(const Tensorflow__NodeDef *node, void **state)
{
    return zf_remap_int_attr_state(node, "axis", 0, state);
}

static zf_status_t s_unpack_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    int64_t axis_attr = *(const int64_t *)ctx->state;
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    int n = ctx->num_outputs, axis = 0;
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (!zf_kernels_axis(axis_attr, in->rank, &axis))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "axis = %lld not in [%d, %d)",
                               (long long)axis_attr, -in->rank, in->rank);
    if (in->dims[axis] != n)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input shape axis %d must equal %d, got shape %s", axis, n,
                               zf_kernels_shape_str(x, sbuf));
    int64_t *sizes = malloc((size_t)(n > 0 ? n : 1) * sizeof *sizes);
    if (!sizes) return zf_out_of_memory("Unpack");
    for (int i = 0; i < n; i++) sizes[i] = 1;
    zf_status_t s = s_split_outputs(ctx, x, axis, sizes, n, true);
    free(sizes);
    return s;
}

/* ---- registration ------------------------------------------------------------------------ */

#define S_MASKED(op_, compute_, flags_)                                                            \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = ZF_TYPES_POD, .flags = (flags_),       \
        .create = s_masks_create, .destroy = free, .compute = (compute_)                           \
    }

static const zf_kernel_t s_defs[] = {
    S_MASKED("StridedSlice", s_strided_slice_compute, 0),
    S_MASKED("StridedSliceGrad", s_strided_slice_grad_compute, ZF_KERNEL_SIZED_BY_VALUE),
    ZF_CPU_KERNEL("Slice", ZF_TYPES_POD, s_slice_compute),
    ZF_CPU_KERNEL("Split", ZF_TYPES_POD, s_split_compute),
    ZF_CPU_KERNEL("SplitV", ZF_TYPES_POD, s_splitv_compute),
    {.op = "Unpack",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_POD,
     .create = s_unpack_create,
     .destroy = free,
     .compute = s_unpack_compute},
};

zf_status_t zf__kernels_register_slice(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
