/* CPU kernels that reshape or rearrange tensors: Reshape, Shape, Size,
 * Rank, ExpandDims, Squeeze (sharing the input's buffer), Transpose,
 * ConcatV2 and Pack (copying bytes of any fixed-size dtype), and the
 * tensor makers Fill, ZerosLike and OnesLike. */
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/remap.h"

/* ---- helpers ------------------------------------------------------------------ */

/* Output 0 as a view of input 0's buffer with another shape. */
static zf_status_t s_output_view(zf_kernel_ctx_t *ctx, const zf_shape_t *shape)
{
    zf_tensor_t *out = NULL;
    zf_status_t s = zf_tensor_reshape(ctx->inputs[0], shape, &out);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    zf_kernel_set_output(ctx, 0, out);
    zf_tensor_unref(&out);
    return ZF_STATUS_OK;
}

/* Output 0 as an INT32 or INT64 vector (or scalar when rank is 0). */
static zf_status_t s_output_ints(zf_kernel_ctx_t *ctx, zf_dtype_t dtype, int rank,
                                 const int64_t *vals, int n)
{
    zf_shape_t shape = {.rank = rank, .dims = {n}};
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, dtype, &shape, &out));
    for (int i = 0; i < n; i++) {
        if (dtype == ZF_INT64) {
            ((int64_t *)zf_tensor_data(out))[i] = vals[i];
        } else if (vals[i] > INT32_MAX) {
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "value %lld does not fit in int32; use out_type int64",
                                   (long long)vals[i]);
        } else {
            ((int32_t *)zf_tensor_data(out))[i] = (int32_t)vals[i];
        }
    }
    return ZF_STATUS_OK;
}

/* State of Shape and Size: the out_type attr. */
static zf_status_t s_out_type_create(const Tensorflow__NodeDef *node, void **state)
{
    zf_dtype_t t = ZF_INT32;
    ZF_TRY(zf_node_attr_type_or(node, "out_type", ZF_INT32, &t));
    if (t != ZF_INT32 && t != ZF_INT64)
        return zf_invalid_argument("%s (%s): out_type must be int32 or int64, got %s", node->name,
                                   node->op, zf_kernels_dtype_name((int)t));
    *state = (void *)(uintptr_t)t; /* the dtype itself (never 0) is the state */
    return ZF_STATUS_OK;
}

static zf_dtype_t s_out_type(const zf_kernel_ctx_t *ctx)
{
    return ctx->state ? (zf_dtype_t)(uintptr_t)ctx->state : ZF_INT32;
}

/* ---- Shape, Size, Rank ------------------------------------------------------------- */

static zf_status_t s_shape_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_shape_t *s = zf_tensor_shape(ctx->inputs[0]);
    return s_output_ints(ctx, s_out_type(ctx), 1, s->dims, s->rank);
}

static zf_status_t s_size_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    int64_t n = zf_tensor_num_elements(ctx->inputs[0]);
    return s_output_ints(ctx, s_out_type(ctx), 0, &n, 1);
}

static zf_status_t s_rank_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    int64_t r = zf_tensor_shape(ctx->inputs[0])->rank;
    return s_output_ints(ctx, ZF_INT32, 0, &r, 1);
}

/* ---- Reshape --------------------------------------------------------------------------- */

/* Checks the requested dims: one -1 at most (its index in *unknown, else
 * -1), the rest non-negative; *known is the product of the rest. */
static zf_status_t s_reshape_dims(const zf_kernel_ctx_t *ctx, const int64_t *dims, int rank,
                                  int *unknown, int64_t *known)
{
    *unknown = -1;
    *known = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == -1) {
            if (*unknown >= 0)
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "Only one input size may be -1, not both %d and %d",
                                       *unknown, i);
            *unknown = i;
        } else if (dims[i] < 0) {
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Size %d must be non-negative, not %lld", i, (long long)dims[i]);
        } else if (__builtin_mul_overflow(*known, dims[i], known)) {
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "requested shape is too large");
        }
    }
    return ZF_STATUS_OK;
}

/* The requested shape with its -1 (if any) resolved against n elements. */
static zf_status_t s_reshape_target(const zf_kernel_ctx_t *ctx, int64_t n, zf_shape_t *out)
{
    int64_t dims[ZF_MAX_RANK], known = 1;
    int rank = 0, unknown = -1;
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(ctx->inputs[1])->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "shape must be a vector, got %s",
                               zf_kernels_shape_str(ctx->inputs[1], sbuf));
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "shape", dims, ZF_MAX_RANK, &rank));
    ZF_TRY(s_reshape_dims(ctx, dims, rank, &unknown, &known));
    if (unknown >= 0 && known == 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Reshape cannot infer the missing input size for an empty tensor "
                               "unless all specified input sizes are non-zero");
    if (unknown >= 0 && n % known != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input to reshape is a tensor with %lld values, but the requested "
                               "shape requires a multiple of %lld",
                               (long long)n, (long long)known);
    if (unknown >= 0) {
        dims[unknown] = n / known;
        known = n;
    }
    if (known != n)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input to reshape is a tensor with %lld values, but the requested "
                               "shape has %lld",
                               (long long)n, (long long)known);
    return zf_shape_make(rank, dims, out);
}

static zf_status_t s_reshape_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    zf_shape_t shape;
    ZF_TRY(s_reshape_target(ctx, zf_tensor_num_elements(ctx->inputs[0]), &shape));
    return s_output_view(ctx, &shape);
}

/* ---- ExpandDims, Squeeze --------------------------------------------------------------------- */

static zf_status_t s_expand_dims_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    int64_t dim = 0;
    ZF_TRY(zf_kernels_input_int(ctx, 1, "dim", &dim));
    int axis = 0;
    if (!zf_kernels_axis(dim, in->rank + 1, &axis))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Tried to expand dim index %lld for tensor with %d dimensions.",
                               (long long)dim, in->rank);
    if (in->rank == ZF_MAX_RANK)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "rank would exceed %d", ZF_MAX_RANK);
    zf_shape_t out = {.rank = in->rank + 1};
    for (int i = 0, j = 0; i < out.rank; i++) out.dims[i] = i == axis ? 1 : in->dims[j++];
    return s_output_view(ctx, &out);
}

typedef struct {
    int n;
    int64_t dims[ZF_MAX_RANK];
} s_squeeze_t;

static zf_status_t s_squeeze_create(const Tensorflow__NodeDef *node, void **state)
{
    const int64_t *vals = NULL;
    size_t n = 0;
    const char *key = zf_node_attr(node, "squeeze_dims") ? "squeeze_dims" : "axis";
    if (zf_node_attr(node, key)) ZF_TRY(zf_node_attr_list_int(node, key, &vals, &n));
    if (n > ZF_MAX_RANK)
        return zf_invalid_argument("%s (%s): %zu squeeze dims; at most %d", node->name, node->op, n,
                                   ZF_MAX_RANK);
    s_squeeze_t *st = calloc(1, sizeof *st);
    if (!st) return zf_out_of_memory("Squeeze kernel");
    st->n = (int)n;
    if (n) memcpy(st->dims, vals, n * sizeof *vals);
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_squeeze_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const s_squeeze_t *st = ctx->state;
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    bool drop[ZF_MAX_RANK] = {false};
    for (int i = 0; i < st->n; i++) {
        int axis = 0;
        if (!zf_kernels_axis(st->dims[i], in->rank, &axis))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Tried to squeeze dim index %lld for tensor with %d dimensions.",
                                   (long long)st->dims[i], in->rank);
        if (in->dims[axis] != 1)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Can not squeeze dim[%d], expected a dimension of 1, got %lld",
                                   axis, (long long)in->dims[axis]);
        drop[axis] = true;
    }
    zf_shape_t out = {.rank = 0};
    for (int i = 0; i < in->rank; i++)
        if (!(st->n ? drop[i] : in->dims[i] == 1)) out.dims[out.rank++] = in->dims[i];
    return s_output_view(ctx, &out);
}

/* ---- Transpose ---------------------------------------------------------------------------------
 */

typedef struct {
    int rank;                    /* output rank, after merging dims that stay adjacent */
    int64_t dims[ZF_MAX_RANK];   /* output dims */
    int64_t stride[ZF_MAX_RANK]; /* input element stride of each output dim */
    const char *in;
    char *out;
    size_t elem;
} s_transpose_t;

/* Copies n elements of size elem from in (stride sin elements) to out. */
static void s_strided_copy(char *out, const char *in, int64_t sin, int64_t n, size_t elem)
{
    switch (elem) {
    case 1:
        for (int64_t i = 0; i < n; i++) out[i] = in[i * sin];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++) memcpy(out + 2 * i, in + 2 * i * sin, 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++) memcpy(out + 4 * i, in + 4 * i * sin, 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++) memcpy(out + 8 * i, in + 8 * i * sin, 8);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(out + elem * (size_t)i, in + elem * (size_t)(i * sin), elem);
    }
}

static void s_transpose_rows(void *arg, int64_t begin, int64_t end)
{
    const s_transpose_t *t = arg;
    int last = t->rank - 1;
    int64_t inner = t->dims[last], idx[ZF_MAX_RANK] = {0}, off = 0, row = begin;
    for (int k = last - 1; k >= 0; k--) {
        idx[k] = row % t->dims[k];
        row /= t->dims[k];
        off += idx[k] * t->stride[k];
    }
    for (int64_t r = begin; r < end; r++) {
        s_strided_copy(t->out + (size_t)(r * inner) * t->elem, t->in + (size_t)off * t->elem,
                       t->stride[last], inner, t->elem);
        for (int k = last - 1; k >= 0; k--) {
            off += t->stride[k];
            if (++idx[k] < t->dims[k]) break;
            off -= t->stride[k] * t->dims[k];
            idx[k] = 0;
        }
    }
}

static zf_status_t s_read_perm(const zf_kernel_ctx_t *ctx, int rank, int64_t *perm)
{
    int n = 0;
    char sbuf[ZF_SHAPE_STRING_MAX];
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "perm", perm, ZF_MAX_RANK, &n));
    if (n != rank || zf_tensor_shape(ctx->inputs[1])->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "transpose expects a vector of size %d. But input(1) is a vector "
                               "of shape %s",
                               rank, zf_kernels_shape_str(ctx->inputs[1], sbuf));
    bool seen[ZF_MAX_RANK] = {false};
    for (int i = 0; i < rank; i++) {
        if (perm[i] < 0 || perm[i] >= rank)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "perm[%d] = %lld is out of range [0, %d)", i, (long long)perm[i],
                                   rank);
        if (seen[perm[i]])
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "perm[%d] = %lld is duplicated", i,
                                   (long long)perm[i]);
        seen[perm[i]] = true;
    }
    return ZF_STATUS_OK;
}

/* Output dims and input strides, merging output dims whose input dims are
 * adjacent and in order (fewer, longer inner loops). */
static void s_transpose_plan(const zf_shape_t *in, const int64_t *perm, s_transpose_t *t)
{
    int64_t in_stride[ZF_MAX_RANK], s = 1;
    for (int k = in->rank - 1; k >= 0; k--) {
        in_stride[k] = s;
        s *= in->dims[k];
    }
    t->rank = 0;
    for (int i = 0; i < in->rank; i++) {
        int64_t d = in->dims[perm[i]];
        if (d == 1) continue;
        int r = t->rank;
        if (r > 0 && t->stride[r - 1] == in_stride[perm[i]] * d) {
            t->dims[r - 1] *= d;
            t->stride[r - 1] = in_stride[perm[i]];
            continue;
        }
        t->dims[r] = d;
        t->stride[r] = in_stride[perm[i]];
        t->rank++;
    }
    if (t->rank == 0) { /* all dims 1: one element */
        t->rank = 1;
        t->dims[0] = 1;
        t->stride[0] = 1;
    }
}

static zf_status_t s_transpose_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    int64_t perm[ZF_MAX_RANK];
    ZF_TRY(s_read_perm(ctx, in->rank, perm));
    zf_shape_t shape = {.rank = in->rank};
    for (int i = 0; i < in->rank; i++) shape.dims[i] = in->dims[perm[i]];
    zf_tensor_t *out = NULL; /* every element is written below */
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, zf_tensor_dtype(x), &shape, &out));
    int64_t n = zf_tensor_num_elements(out);
    if (n == 0) return ZF_STATUS_OK;
    s_transpose_t t = {.in = zf_tensor_data(x),
                       .out = zf_tensor_data(out),
                       .elem = zf_dtype_size(zf_tensor_dtype(x))};
    s_transpose_plan(in, perm, &t);
    if (zf_remap_on_device(ctx)) /* the device moves the elements */
        return zf_remap_strided_gather(ctx, t.rank, t.dims, t.stride, t.in, t.out, t.elem);
    int64_t inner = t.dims[t.rank - 1];
    zf_kernels_parallel_for(ctx, n / inner, ZF_KERNELS_PARALLEL_MIN / inner + 1, s_transpose_rows,
                            &t);
    return ZF_STATUS_OK;
}

/* ---- ConcatV2 and Pack
 * ---------------------------------------------------------------------------- */

/* Copies each input's slab per outer index: the output is the inputs'
 * [outer, slab_i] views laid side by side. */
typedef struct {
    int n;
    zf_tensor_t *const *inputs;
    const size_t *slab; /* bytes per outer index, per input */
    size_t row;         /* output bytes per outer index */
    char *out;
} s_join_t;

static void s_join_rows(void *arg, int64_t begin, int64_t end)
{
    const s_join_t *j = arg;
    for (int64_t o = begin; o < end; o++) {
        char *dst = j->out + (size_t)o * j->row;
        for (int i = 0; i < j->n; i++) {
            if (!j->slab[i]) continue;
            memcpy(dst, (const char *)zf_tensor_data(j->inputs[i]) + (size_t)o * j->slab[i],
                   j->slab[i]);
            dst += j->slab[i];
        }
    }
}

/* Allocates output 0 of shape and joins the n inputs along outer rows. */
static zf_status_t s_join(zf_kernel_ctx_t *ctx, int n, const zf_shape_t *shape, int64_t outer,
                          const size_t *slab)
{
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(ctx->inputs[0]), shape, &out));
    size_t row = 0;
    for (int i = 0; i < n; i++) row += slab[i];
    if (row == 0 || outer == 0) return ZF_STATUS_OK;
    s_join_t j = {n, ctx->inputs, slab, row, zf_tensor_data(out)};
    zf_kernels_parallel_for(ctx, outer, (int64_t)(ZF_KERNELS_PARALLEL_MIN * 4 / row) + 1,
                            s_join_rows, &j);
    return ZF_STATUS_OK;
}

static zf_status_t s_check_same_dtype(const zf_kernel_ctx_t *ctx, int n)
{
    for (int i = 1; i < n; i++)
        ZF_TRY(zf_kernels_check_dtype(ctx, i, zf_tensor_dtype(ctx->inputs[0])));
    return ZF_STATUS_OK;
}

static int64_t s_prod(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int k = from; k < to; k++) p *= dims[k];
    return p;
}

static zf_status_t s_concat_check(const zf_kernel_ctx_t *ctx, int n, int *axis)
{
    const zf_shape_t *s0 = zf_tensor_shape(ctx->inputs[0]);
    int64_t a = 0;
    ZF_TRY(zf_kernels_input_int(ctx, n, "axis", &a));
    if (s0->rank == 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "ConcatOp : Can't concatenate scalars (use tf.stack instead)");
    if (!zf_kernels_axis(a, s0->rank, axis))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "ConcatOp : Expected concatenating dimensions in the range [%d, "
                               "%d), but got %lld",
                               -s0->rank, s0->rank, (long long)a);
    char b0[ZF_SHAPE_STRING_MAX], bi[ZF_SHAPE_STRING_MAX];
    for (int i = 1; i < n; i++) {
        const zf_shape_t *si = zf_tensor_shape(ctx->inputs[i]);
        bool ok = si->rank == s0->rank;
        for (int k = 0; ok && k < s0->rank; k++) ok = k == *axis || si->dims[k] == s0->dims[k];
        if (!ok)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "ConcatOp : Dimensions of inputs should match: shape[0] = %s "
                                   "vs. shape[%d] = %s",
                                   zf_kernels_shape_str(ctx->inputs[0], b0), i,
                                   zf_kernels_shape_str(ctx->inputs[i], bi));
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_concat_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    int n = ctx->num_inputs - 1, axis = 0;
    if (n < 1) return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "ConcatV2 needs at least 2 inputs");
    ZF_TRY(s_check_same_dtype(ctx, n));
    ZF_TRY(s_concat_check(ctx, n, &axis));
    zf_shape_t shape = *zf_tensor_shape(ctx->inputs[0]);
    size_t elem = zf_dtype_size(zf_tensor_dtype(ctx->inputs[0]));
    int64_t inner = s_prod(shape.dims, axis + 1, shape.rank);
    size_t *slab = malloc((size_t)n * sizeof *slab);
    if (!slab) return zf_out_of_memory("ConcatV2");
    shape.dims[axis] = 0;
    for (int i = 0; i < n; i++) {
        int64_t d = zf_tensor_shape(ctx->inputs[i])->dims[axis];
        shape.dims[axis] += d;
        slab[i] = (size_t)(d * inner) * elem;
    }
    zf_status_t s = s_join(ctx, n, &shape, s_prod(shape.dims, 0, axis), slab);
    free(slab);
    return s;
}

typedef struct {
    int64_t axis;
} s_pack_t;

static zf_status_t s_pack_create(const Tensorflow__NodeDef *node, void **state)
{
    s_pack_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory("Pack kernel");
    zf_status_t s = zf_node_attr_int_or(node, "axis", 0, &st->axis);
    if (!zf_ok(s)) {
        free(st);
        return s;
    }
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_pack_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const s_pack_t *st = ctx->state;
    int n = ctx->num_inputs, axis = 0;
    if (n < 1) return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Pack needs at least 1 input");
    ZF_TRY(s_check_same_dtype(ctx, n));
    const zf_shape_t *s0 = zf_tensor_shape(ctx->inputs[0]);
    if (!zf_kernels_axis(st->axis, s0->rank + 1, &axis) || s0->rank == ZF_MAX_RANK)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "axis = %lld not in [%d, %d)",
                               (long long)st->axis, -(s0->rank + 1), s0->rank + 1);
    char b0[ZF_SHAPE_STRING_MAX], bi[ZF_SHAPE_STRING_MAX];
    for (int i = 1; i < n; i++)
        if (!zf_shape_equal(zf_tensor_shape(ctx->inputs[i]), s0))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Shapes of all inputs must match: values[0].shape = %s != "
                                   "values[%d].shape = %s",
                                   zf_kernels_shape_str(ctx->inputs[0], b0), i,
                                   zf_kernels_shape_str(ctx->inputs[i], bi));
    zf_shape_t shape = {.rank = s0->rank + 1};
    for (int i = 0, j = 0; i < shape.rank; i++) shape.dims[i] = i == axis ? n : s0->dims[j++];
    size_t slab1 =
        (size_t)s_prod(s0->dims, axis, s0->rank) * zf_dtype_size(zf_tensor_dtype(ctx->inputs[0]));
    size_t *slab = malloc((size_t)n * sizeof *slab);
    if (!slab) return zf_out_of_memory("Pack");
    for (int i = 0; i < n; i++) slab[i] = slab1;
    zf_status_t s = s_join(ctx, n, &shape, s_prod(s0->dims, 0, axis), slab);
    free(slab);
    return s;
}

/* ---- Fill, ZerosLike, OnesLike
 * --------------------------------------------------------------------- */

/* Fills n elements of size elem at out with the element at value,
 * doubling the copied span each round. */
static void s_fill_bytes(char *out, const void *value, size_t elem, int64_t n)
{
    if (n <= 0) return;
    size_t total = (size_t)n * elem, done = elem;
    memcpy(out, value, elem);
    while (done < total) {
        size_t chunk = done < total - done ? done : total - done;
        memcpy(out + done, out, chunk);
        done += chunk;
    }
}

static zf_status_t s_fill_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    int64_t dims[ZF_MAX_RANK];
    int rank = 0;
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(ctx->inputs[0])->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "dims must be a vector, got shape %s",
                               zf_kernels_shape_str(ctx->inputs[0], sbuf));
    ZF_TRY(zf_kernels_input_ints(ctx, 0, "dims", dims, ZF_MAX_RANK, &rank));
    const zf_tensor_t *value = ctx->inputs[1];
    if (zf_tensor_shape(value)->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "value must be a scalar, got shape %s",
                               zf_kernels_shape_str(value, sbuf));
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "dims[%d] = %lld must be non-negative",
                                   i, (long long)dims[i]);
    zf_shape_t shape;
    ZF_TRY(zf_shape_make(rank, dims, &shape));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(value), &shape, &out));
    s_fill_bytes(zf_tensor_data(out), zf_tensor_data(value), zf_dtype_size(zf_tensor_dtype(value)),
                 zf_tensor_num_elements(out));
    return ZF_STATUS_OK;
}

static zf_status_t s_zeros_like_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *x = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(x), zf_tensor_shape(x), &out));
    if (zf_tensor_nbytes(out)) memset(zf_tensor_data(out), 0, zf_tensor_nbytes(out));
    return ZF_STATUS_OK;
}

static zf_status_t s_ones_like_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *x = ctx->inputs[0];
    union {
        float f;
        double d;
        int32_t i32;
        int64_t i64;
        bool b;
        uint16_t h;
    } one;
    memset(&one, 0, sizeof one);
    switch (zf_tensor_dtype(x)) {
    case ZF_FLOAT: one.f = 1.0f; break;
    case ZF_DOUBLE: one.d = 1.0; break;
    case ZF_INT32: one.i32 = 1; break;
    case ZF_INT64: one.i64 = 1; break;
    case ZF_BOOL: one.b = true; break;
    case ZF_HALF: one.h = zf_float_to_half(1.0f); break;
    case ZF_BFLOAT16: one.h = zf_float_to_bfloat16(1.0f); break;
    default:
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)zf_tensor_dtype(x)));
    }
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(x), zf_tensor_shape(x), &out));
    s_fill_bytes(zf_tensor_data(out), &one, zf_dtype_size(zf_tensor_dtype(x)),
                 zf_tensor_num_elements(out));
    return ZF_STATUS_OK;
}

/* ---- registration
 * ------------------------------------------------------------------------------------- */

static const zf_kernel_t s_defs[] = {
    ZF_CPU_KERNEL("Reshape", 0, s_reshape_compute),
    {.op = "Shape", .device_type = "CPU", .create = s_out_type_create, .compute = s_shape_compute},
    {.op = "Size", .device_type = "CPU", .create = s_out_type_create, .compute = s_size_compute},
    {.op = "Rank", .device_type = "CPU", .compute = s_rank_compute},
    ZF_CPU_KERNEL("ExpandDims", 0, s_expand_dims_compute),
    {.op = "Squeeze",
     .device_type = "CPU",
     .create = s_squeeze_create,
     .destroy = free,
     .compute = s_squeeze_compute},
    ZF_CPU_KERNEL("Transpose", ZF_TYPES_POD, s_transpose_compute),
    ZF_CPU_KERNEL("ConcatV2", ZF_TYPES_POD, s_concat_compute),
    {.op = "Pack",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_POD,
     .create = s_pack_create,
     .destroy = free,
     .compute = s_pack_compute},
    {.op = "Fill",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_POD,
     .flags = ZF_KERNEL_SIZED_BY_VALUE,
     .compute = s_fill_compute},
    ZF_CPU_KERNEL("ZerosLike", ZF_TYPES_POD, s_zeros_like_compute),
    ZF_CPU_KERNEL("OnesLike",
                  ZF_TYPES_REAL | ZF_TYPE_BIT(ZF_BOOL) | ZF_TYPE_BIT(ZF_HALF) |
                      ZF_TYPE_BIT(ZF_BFLOAT16),
                  s_ones_like_compute),
};

zf_status_t zf__kernels_register_shape(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
