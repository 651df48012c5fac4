/* GPU kernels that move or describe data without computing: Const (its
 * value copied to the GPU on first use), Identity, IdentityN, StopGradient,
 * NoOp, Reshape, ExpandDims, Squeeze (views sharing the input's memory),
 * and Shape, Size, Rank (outputs in host memory). INT32 variants keep
 * everything in host memory, as TensorFlow does on GPUs. */
#include <pthread.h>
#include <stdlib.h>

#include "common/graph.h"
#include "common/tensor_proto.h"
#include "executor/devices/cuda/gpu_internal.h"
#include "executor/kernels/kernels_util.h"

/* ---- Const --------------------------------------------------------------------- */

typedef struct {
    zf_tensor_t *host;
    pthread_mutex_t lock;
    zf_tensor_t *gpu; /* the copy on gpu_id, made on first use */
    int gpu_id;
} s_const_t;

static void s_const_destroy(void *state)
{
    s_const_t *c = state;
    if (!c) return;
    zf_tensor_unref(&c->host);
    zf_tensor_unref(&c->gpu);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static zf_status_t s_const_value(const Tensorflow__NodeDef *node, zf_tensor_t **out)
{
    const Tensorflow__TensorProto *proto = NULL;
    zf_dtype_t dtype = ZF_INVALID;
    ZF_TRY(zf_node_attr_tensor(node, "value", &proto));
    ZF_TRY(zf_node_attr_type(node, "dtype", &dtype));
    zf_status_t s = zf_tensor_from_proto(proto, out);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (Const): attr 'value'", node->name);
    if (zf_tensor_dtype(*out) == zf_dtype_base((int)dtype)) return ZF_STATUS_OK;
    s = zf_invalid_argument("%s (Const): Type mismatch between value (%s) and dtype (%s)",
                            node->name, zf_kernels_dtype_name((int)zf_tensor_dtype(*out)),
                            zf_kernels_dtype_name((int)dtype));
    zf_tensor_unref(out);
    return s;
}

static zf_status_t s_const_create(const Tensorflow__NodeDef *node, void **state)
{
    s_const_t *c = calloc(1, sizeof *c);
    if (!c) return zf_out_of_memory("Const state");
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return zf_internal("%s (Const): cannot create a mutex", node->name);
    }
    zf_status_t s = s_const_value(node, &c->host);
    if (!zf_ok(s)) {
        s_const_destroy(c);
        return s;
    }
    c->gpu_id = -1;
    *state = c;
    return ZF_STATUS_OK;
}

/* The value in the kernel's GPU memory: copied once, then shared (readers
 * never write their inputs, so one copy serves every step). */
static zf_status_t s_const_compute(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    s_const_t *c = ctx->state;
    zf_status_t s = ZF_STATUS_OK;
    pthread_mutex_lock(&c->lock);
    if (!c->gpu || c->gpu_id != g->ordinal) {
        zf_tensor_unref(&c->gpu);
        s = zf_gpu_tensor_to_device(ctx->device, c->host, &c->gpu);
        c->gpu_id = g->ordinal;
    }
    if (zf_ok(s)) zf_kernel_set_output(ctx, 0, c->gpu);
    pthread_mutex_unlock(&c->lock);
    return zf_ok(s) ? s : zf_status_prefix(s, "%s (Const)", ctx->node->name);
}

/* INT32 constants stay in host memory. */
static zf_status_t s_const_host_compute(zf_kernel_ctx_t *ctx)
{
    s_const_t *c = ctx->state;
    zf_kernel_set_output(ctx, 0, c->host);
    return ZF_STATUS_OK;
}

/* ---- forwarding ------------------------------------------------------------------ */

static zf_status_t s_identity(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    zf_kernel_set_output(ctx, 0, ctx->inputs[0]);
    return ZF_STATUS_OK;
}

static zf_status_t s_identity_n(zf_kernel_ctx_t *ctx)
{
    if (ctx->num_outputs != ctx->num_inputs)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%d inputs but %d outputs",
                               ctx->num_inputs, ctx->num_outputs);
    for (int i = 0; i < ctx->num_inputs; i++) zf_kernel_set_output(ctx, i, ctx->inputs[i]);
    return ZF_STATUS_OK;
}

static zf_status_t s_noop(zf_kernel_ctx_t *ctx)
{
    (void)ctx;
    return ZF_STATUS_OK;
}

/* Output 0 is input 0's memory seen with shape. */
static zf_status_t s_set_view(zf_kernel_ctx_t *ctx, const zf_shape_t *shape)
{
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_tensor_reshape(ctx->inputs[0], shape, &t);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    zf_kernel_set_output(ctx, 0, t);
    zf_tensor_unref(&t);
    return ZF_STATUS_OK;
}

/* ---- Reshape ------------------------------------------------------------------------ */

static zf_status_t s_host_input(const zf_kernel_ctx_t *ctx, int i, const char *what)
{
    if (zf_tensor_memory_kind(ctx->inputs[i]) != ZF_MEMORY_DEVICE) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be in host memory", what);
}

/* Resolves the one -1 in dims (n of them) against elements. */
static zf_status_t s_reshape_infer(const zf_kernel_ctx_t *ctx, int64_t *dims, int n,
                                   int64_t elements)
{
    int unknown = -1;
    int64_t product = 1;
    for (int k = 0; k < n; k++) {
        if (dims[k] == -1) {
            if (unknown >= 0)
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "Only one input size may be -1, not both %d and %d", unknown,
                                       k);
            unknown = k;
        } else if (dims[k] < 0) {
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Size %d must be non-negative, not %lld", k, (long long)dims[k]);
        } else if (__builtin_mul_overflow(product, dims[k], &product)) {
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "the requested shape is too large");
        }
    }
    if (unknown < 0) {
        if (product != elements)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Input to reshape is a tensor with %lld values, but the "
                                   "requested shape has %lld",
                                   (long long)elements, (long long)product);
        return ZF_STATUS_OK;
    }
    if (product == 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Reshape cannot infer the missing input size for an empty tensor "
                               "unless all specified input sizes are non-zero");
    if (elements % product != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input to reshape is a tensor with %lld values, but the requested "
                               "shape requires a multiple of %lld",
                               (long long)elements, (long long)product);
    dims[unknown] = elements / product;
    return ZF_STATUS_OK;
}

static zf_status_t s_reshape(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(s_host_input(ctx, 1, "shape"));
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(ctx->inputs[1])->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "shape must be a vector, got %s",
                               zf_kernels_shape_str(ctx->inputs[1], sbuf));
    int64_t dims[ZF_MAX_RANK];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "shape", dims, ZF_MAX_RANK, &n));
    ZF_TRY(s_reshape_infer(ctx, dims, n, zf_tensor_num_elements(ctx->inputs[0])));
    zf_shape_t shape;
    ZF_TRY(zf_shape_make(n, dims, &shape));
    return s_set_view(ctx, &shape);
}

/* ---- ExpandDims and Squeeze ----------------------------------------------------------- */

static zf_status_t s_expand_dims(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(s_host_input(ctx, 1, "dim"));
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    int64_t dim = 0;
    ZF_TRY(zf_kernels_input_int(ctx, 1, "dim", &dim));
    if (dim < -(int64_t)in->rank - 1 || dim > in->rank)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Tried to expand dim index %lld for tensor with %d dimensions.",
                               (long long)dim, in->rank);
    if (in->rank >= ZF_MAX_RANK)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "rank would exceed %d", ZF_MAX_RANK);
    int at = (int)(dim < 0 ? dim + in->rank + 1 : dim);
    zf_shape_t shape = {.rank = in->rank + 1};
    for (int k = 0, j = 0; k < shape.rank; k++) shape.dims[k] = k == at ? 1 : in->dims[j++];
    return s_set_view(ctx, &shape);
}

/* Marks the dims squeeze_dims names (all dims of 1 when it is empty). */
static zf_status_t s_squeeze_dims(zf_kernel_ctx_t *ctx, const zf_shape_t *in, bool *drop)
{
    const int64_t *axes = NULL;
    size_t n = 0;
    if (zf_node_attr(ctx->node, "squeeze_dims"))
        ZF_TRY(zf_node_attr_list_int(ctx->node, "squeeze_dims", &axes, &n));
    for (int k = 0; k < in->rank; k++) drop[k] = n == 0 && in->dims[k] == 1;
    for (size_t i = 0; i < n; i++) {
        int k = 0;
        if (!zf_kernels_axis(axes[i], in->rank, &k))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Tried to squeeze dim index %lld for tensor with %d dimensions.",
                                   (long long)axes[i], in->rank);
        if (in->dims[k] != 1)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Can not squeeze dim[%d], expected a dimension of 1, got %lld",
                                   k, (long long)in->dims[k]);
        drop[k] = true;
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_squeeze(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    bool drop[ZF_MAX_RANK];
    ZF_TRY(s_squeeze_dims(ctx, in, drop));
    zf_shape_t shape = {.rank = 0};
    for (int k = 0; k < in->rank; k++)
        if (!drop[k]) shape.dims[shape.rank++] = in->dims[k];
    return s_set_view(ctx, &shape);
}

/* ---- Shape, Size, Rank (host-memory outputs) ----------------------------------------- */

/* A host tensor of out_type (INT32 or INT64) holding vals. */
static zf_status_t s_host_ints(zf_kernel_ctx_t *ctx, const int64_t *vals, int n, bool vector)
{
    zf_dtype_t type = ZF_INT32;
    ZF_TRY(zf_node_attr_type_or(ctx->node, "out_type", ZF_INT32, &type));
    if (type != ZF_INT32 && type != ZF_INT64)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "out_type must be int32 or int64, got %s",
                               zf_kernels_dtype_name((int)type));
    zf_shape_t shape = vector ? ZF_SHAPE(n) : zf_shape_scalar();
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_tensor_new(type, &shape, &t);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    for (int k = 0; k < n && zf_ok(s); k++) {
        if (type == ZF_INT64) {
            ((int64_t *)zf_tensor_data(t))[k] = vals[k];
        } else if (vals[k] > INT32_MAX) {
            s = zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                "value %lld does not fit in int32; use out_type int64",
                                (long long)vals[k]);
        } else {
            ((int32_t *)zf_tensor_data(t))[k] = (int32_t)vals[k];
        }
    }
    if (zf_ok(s)) zf_kernel_set_output(ctx, 0, t);
    zf_tensor_unref(&t);
    return s;
}

static zf_status_t s_shape(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    return s_host_ints(ctx, in->dims, in->rank, true);
}

static zf_status_t s_size(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    int64_t n = zf_tensor_num_elements(ctx->inputs[0]);
    return s_host_ints(ctx, &n, 1, false);
}

static zf_status_t s_rank(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    int64_t r = zf_tensor_shape(ctx->inputs[0])->rank;
    return s_host_ints(ctx, &r, 1, false);
}

/* ---- registration ---------------------------------------------------------------------- */

#define S_DEV  ZF_TYPES_GPU_DEVICE
#define S_HOST ZF_TYPES_GPU_HOST

/* One kernel for types in GPU memory, one for types that stay on the host. */
#define S_FORWARD(op_, compute_)                                                                   \
    {.op = (op_), .device_type = "GPU", .allowed_types = S_DEV, .compute = (compute_)},            \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = S_HOST, .compute = (compute_)          \
    }

static const zf_kernel_t s_defs[] = {
    {.op = "Const",
     .device_type = "GPU",
     .allowed_types = S_DEV,
     .create = s_const_create,
     .destroy = s_const_destroy,
     .compute = s_const_compute},
    {.op = "Const",
     .device_type = "GPU",
     .allowed_types = S_HOST,
     .create = s_const_create,
     .destroy = s_const_destroy,
     .compute = s_const_host_compute},
    S_FORWARD("Identity", s_identity),
    S_FORWARD("StopGradient", s_identity),
    S_FORWARD("Reshape", s_reshape),
    S_FORWARD("ExpandDims", s_expand_dims),
    S_FORWARD("Squeeze", s_squeeze),
    /* IdentityN's types are a list: each tensor passes through wherever it is. */
    {.op = "IdentityN", .device_type = "GPU", .compute = s_identity_n},
    {.op = "NoOp", .device_type = "GPU", .compute = s_noop},
    {.op = "Shape", .device_type = "GPU", .compute = s_shape},
    {.op = "Size", .device_type = "GPU", .compute = s_size},
    {.op = "Rank", .device_type = "GPU", .compute = s_rank},
};

zf_status_t zf__gpu_register_data(void)
{
    return zf__gpu_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
