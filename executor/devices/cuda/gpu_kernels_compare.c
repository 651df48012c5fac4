/* GPU kernels for comparisons (Less, LessEqual, Greater, GreaterEqual,
 * Equal, NotEqual), logic (LogicalAnd, LogicalOr, LogicalNot) and
 * selection (Select, SelectV2) on tensors in GPU memory. Shapes are
 * checked here, on the host, with the CPU kernels' rules and messages;
 * compare.cu only computes. INT32 variants run on the host
 * (gpu_kernels_host.c). */
#include <string.h>

#include "common/graph.h"
#include "executor/devices/cuda/gpu_compare.h"
#include "executor/devices/cuda/gpu_internal.h"
#include "executor/kernels/kernels_util.h"

#define S_TYPES_EQUALITY (ZF_TYPES_GPU_ORDERED | ZF_TYPE_BIT(ZF_BOOL))

/* ---- comparisons and logic ------------------------------------------------------ */

static zf_status_t s_compare(zf_kernel_ctx_t *ctx, zf__gpu_compare_t op, uint64_t types)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    bool shape_error = true, incompatible;
    if (op == ZF__GPU_EQUAL || op == ZF__GPU_NOT_EQUAL)
        ZF_TRY(zf_node_attr_bool_or(ctx->node, "incompatible_shape_error", true, &shape_error));
    zf_shape_t shape;
    ZF_TRY(zf_kernels_binary_shape(ctx, !shape_error, &shape, &incompatible));
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    zf_dtype_t t = zf_tensor_dtype(a);
    if (!(types & ZF_TYPE_BIT(t)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, ZF_BOOL, &shape, &out));
    if (incompatible) /* as TensorFlow: shapes that cannot be equal give one answer */
        return zf__gpu_kernel_launched(
            ctx, cudaMemsetAsync(zf_tensor_data(out), op == ZF__GPU_NOT_EQUAL, 1, g->stream));
    int64_t n = zf_tensor_num_elements(out);
    if (n == 0) return ZF_STATUS_OK;
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    ZF_TRY(zf__gpu_check_device_input(ctx, 1));
    zf__gpu_bcast_t bc;
    zf_broadcast_plan(zf_tensor_shape(a), zf_tensor_shape(b), &shape, &bc);
    return zf__gpu_kernel_launched(ctx, zf__gpu_launch_compare(g->stream, op, t, zf_tensor_data(a),
                                                               zf_tensor_data(b),
                                                               zf_tensor_data(out), n, &bc));
}

#define S_COMPARE(name, op, types)                                                                 \
    static zf_status_t name(zf_kernel_ctx_t *ctx)                                                  \
    {                                                                                              \
        return s_compare(ctx, op, types);                                                          \
    }

S_COMPARE(s_less, ZF__GPU_LESS, ZF_TYPES_GPU_ORDERED)
S_COMPARE(s_less_equal, ZF__GPU_LESS_EQUAL, ZF_TYPES_GPU_ORDERED)
S_COMPARE(s_greater, ZF__GPU_GREATER, ZF_TYPES_GPU_ORDERED)
S_COMPARE(s_greater_equal, ZF__GPU_GREATER_EQUAL, ZF_TYPES_GPU_ORDERED)
S_COMPARE(s_equal, ZF__GPU_EQUAL, S_TYPES_EQUALITY)
S_COMPARE(s_not_equal, ZF__GPU_NOT_EQUAL, S_TYPES_EQUALITY)
S_COMPARE(s_logical_and, ZF__GPU_LOGICAL_AND, ZF_TYPE_BIT(ZF_BOOL))
S_COMPARE(s_logical_or, ZF__GPU_LOGICAL_OR, ZF_TYPE_BIT(ZF_BOOL))

static zf_status_t s_logical_not(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    ZF_TRY(zf_kernels_check_dtype(ctx, 0, ZF_BOOL));
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, ZF_BOOL, zf_tensor_shape(in), &out));
    return zf__gpu_kernel_launched(ctx, zf__gpu_launch_logical_not(g->stream, zf_tensor_data(in),
                                                                   zf_tensor_data(out),
                                                                   zf_tensor_num_elements(in)));
}

/* ---- Select and SelectV2 ---------------------------------------------------------- */

static zf_status_t s_select(zf_kernel_ctx_t *ctx, bool broadcast)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    zf_shape_t cond, shape;
    ZF_TRY(zf_kernels_select_shapes(ctx, broadcast, &cond, &shape));
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[1]);
    if (!(ZF_TYPES_GPU_DEVICE & ZF_TYPE_BIT(t)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, t, &shape, &out));
    int64_t n = zf_tensor_num_elements(out);
    if (n == 0) return ZF_STATUS_OK;
    for (int i = 0; i < 3; i++) ZF_TRY(zf__gpu_check_device_input(ctx, i));
    const zf_shape_t *shapes[3] = {&cond, zf_tensor_shape(ctx->inputs[1]),
                                   zf_tensor_shape(ctx->inputs[2])};
    zf__gpu_bcast3_t bc;
    zf_broadcast_plan_n(shapes, 3, &shape, &bc);
    return zf__gpu_kernel_launched(
        ctx, zf__gpu_launch_select(g->stream, zf_dtype_size(t), zf_tensor_data(ctx->inputs[0]),
                                   zf_tensor_data(ctx->inputs[1]), zf_tensor_data(ctx->inputs[2]),
                                   zf_tensor_data(out), n, &bc));
}

static zf_status_t s_select_legacy(zf_kernel_ctx_t *ctx)
{
    return s_select(ctx, false);
}

static zf_status_t s_select_v2(zf_kernel_ctx_t *ctx)
{
    return s_select(ctx, true);
}

/* ---- registration ------------------------------------------------------------------ */

static const zf_kernel_t s_defs[] = {
    ZF__GPU_KERNEL("Less", ZF_TYPES_GPU_ORDERED, s_less),
    ZF__GPU_KERNEL("LessEqual", ZF_TYPES_GPU_ORDERED, s_less_equal),
    ZF__GPU_KERNEL("Greater", ZF_TYPES_GPU_ORDERED, s_greater),
    ZF__GPU_KERNEL("GreaterEqual", ZF_TYPES_GPU_ORDERED, s_greater_equal),
    ZF__GPU_KERNEL("Equal", S_TYPES_EQUALITY, s_equal),
    ZF__GPU_KERNEL("NotEqual", S_TYPES_EQUALITY, s_not_equal),
    ZF__GPU_KERNEL("LogicalAnd", 0, s_logical_and),
    ZF__GPU_KERNEL("LogicalOr", 0, s_logical_or),
    ZF__GPU_KERNEL("LogicalNot", 0, s_logical_not),
    ZF__GPU_KERNEL("Select", ZF_TYPES_GPU_DEVICE, s_select_legacy),
    ZF__GPU_KERNEL("SelectV2", ZF_TYPES_GPU_DEVICE, s_select_v2),
};

zf_status_t zf__gpu_register_compare(void)
{
    return zf__gpu_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
