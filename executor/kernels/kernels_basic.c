/* CPU kernels that produce or forward tensors without computing: Const,
 * Placeholder, PlaceholderWithDefault, Identity, IdentityN, StopGradient,
 * Snapshot and NoOp. */
#include <stdlib.h>

#include "common/graph.h"
#include "common/tensor_proto.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/resource.h"

/* ---- Const ----------------------------------------------------------------- */

/* The value is decoded once; every step hands out a new reference to it. */
static zf_status_t s_const_create(const Tensorflow__NodeDef *node, void **state)
{
    const Tensorflow__TensorProto *proto = NULL;
    zf_dtype_t dtype = ZF_INVALID;
    ZF_TRY(zf_node_attr_tensor(node, "value", &proto));
    ZF_TRY(zf_node_attr_type(node, "dtype", &dtype));
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_tensor_from_proto(proto, &t);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (Const): attr 'value'", node->name);
    if (zf_tensor_dtype(t) != zf_dtype_base((int)dtype)) {
        s = zf_invalid_argument("%s (Const): Type mismatch between value (%s) and dtype (%s)",
                                node->name, zf_kernels_dtype_name((int)zf_tensor_dtype(t)),
                                zf_kernels_dtype_name((int)dtype));
        zf_tensor_unref(&t);
        return s;
    }
    *state = t;
    return ZF_STATUS_OK;
}

static void s_const_destroy(void *state)
{
    zf_tensor_t *t = state;
    zf_tensor_unref(&t);
}

static zf_status_t s_const_compute(zf_kernel_ctx_t *ctx)
{
    zf_kernel_set_output(ctx, 0, ctx->state);
    return ZF_STATUS_OK;
}

/* ---- Placeholder ----------------------------------------------------------- */

/* Reaching a Placeholder's kernel means nobody fed it: the executor
 * replaces fed placeholders. The message is TensorFlow's. */
static zf_status_t s_placeholder_compute(zf_kernel_ctx_t *ctx)
{
    const Tensorflow__NodeDef *node = ctx->node;
    zf_dtype_t dtype = ZF_INVALID;
    zf_status_t s = zf_node_attr_type(node, "dtype", &dtype);
    zf_status_clear(&s);
    const Tensorflow__TensorShapeProto *proto = NULL;
    zf_shape_t shape = zf_shape_unknown();
    s = zf_node_attr_shape(node, "shape", &proto);
    if (zf_ok(s)) s = zf_shape_from_proto(proto, &shape);
    if (!zf_ok(s)) shape = zf_shape_unknown();
    zf_status_clear(&s);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (shape.rank < 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "You must feed a value for placeholder tensor '%s' with dtype %s",
                               node->name, zf_kernels_dtype_name((int)dtype));
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                           "You must feed a value for placeholder tensor '%s' with dtype %s and "
                           "shape %s",
                           node->name, zf_kernels_dtype_name((int)dtype),
                           zf_shape_to_string(&shape, sbuf, sizeof sbuf));
}

/* ---- identities --------------------------------------------------------------- */

/* Forwards input i as output i. An unassigned reference variable's marker
 * is refused here, where TensorFlow dereferences the ref. */
static zf_status_t s_forward(zf_kernel_ctx_t *ctx, int i)
{
    zf_status_t s = zf_resource_check_ref(ctx->resources, ctx->inputs[i]);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    zf_kernel_set_output(ctx, i, ctx->inputs[i]);
    return ZF_STATUS_OK;
}

static zf_status_t s_identity_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    return s_forward(ctx, 0);
}

static zf_status_t s_identity_n_compute(zf_kernel_ctx_t *ctx)
{
    if (ctx->num_outputs != ctx->num_inputs)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%d inputs but %d outputs",
                               ctx->num_inputs, ctx->num_outputs);
    for (int i = 0; i < ctx->num_inputs; i++) ZF_TRY(s_forward(ctx, i));
    return ZF_STATUS_OK;
}

/* Snapshot: a copy that later in-place updates of the input cannot reach. */
static zf_status_t s_snapshot_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    zf_tensor_t *copy = NULL;
    zf_status_t s = zf_resource_check_ref(ctx->resources, ctx->inputs[0]);
    if (zf_ok(s)) s = zf_tensor_copy(ctx->inputs[0], &copy);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    zf_kernel_set_output(ctx, 0, copy);
    zf_tensor_unref(&copy);
    return ZF_STATUS_OK;
}

static zf_status_t s_noop_compute(zf_kernel_ctx_t *ctx)
{
    (void)ctx;
    return ZF_STATUS_OK;
}

/* ---- registration ------------------------------------------------------------ */

static const zf_kernel_t s_defs[] = {
    {.op = "Const",
     .device_type = "CPU",
     .create = s_const_create,
     .destroy = s_const_destroy,
     .compute = s_const_compute},
    {.op = "Placeholder", .device_type = "CPU", .compute = s_placeholder_compute},
    {.op = "PlaceholderWithDefault", .device_type = "CPU", .compute = s_identity_compute},
    ZF_CPU_KERNEL("Identity", 0, s_identity_compute),
    {.op = "IdentityN", .device_type = "CPU", .compute = s_identity_n_compute},
    ZF_CPU_KERNEL("StopGradient", 0, s_identity_compute),
    ZF_CPU_KERNEL("PreventGradient", 0, s_identity_compute),
    ZF_CPU_KERNEL("Snapshot", 0, s_snapshot_compute),
    {.op = "NoOp", .device_type = "CPU", .compute = s_noop_compute},
};

zf_status_t zf__kernels_register_basic(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
