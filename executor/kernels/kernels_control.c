/* CPU kernels of TensorFlow's dataflow control flow. The engine moves
 * values between frames and iterations and decides when a Merge is ready
 * (executor/engine/engine.c); the kernels only forward values: Enter,
 * Exit, NextIteration and LoopCond pass their input on; Switch and _SwitchN
 * pass it to one output and mark the others dead; Merge passes on its one
 * live input and its index; ControlTrigger does nothing. The Ref forms
 * behave the same on values. */
#include "executor/kernels/kernels_util.h"

static zf_status_t s_forward_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    zf_kernel_set_output(ctx, 0, ctx->inputs[0]);
    return ZF_STATUS_OK;
}

/* Every output but keep is dead. */
static zf_status_t s_only_output(zf_kernel_ctx_t *ctx, int keep)
{
    if (!ctx->is_dead_outputs)
        return zf_kernel_error(ctx, ZF_INTERNAL, "the engine gives no dead-output flags");
    for (int k = 0; k < ctx->num_outputs; k++) ctx->is_dead_outputs[k] = k != keep;
    zf_kernel_set_output(ctx, keep, ctx->inputs[0]);
    return ZF_STATUS_OK;
}

/* The scalar second input (Switch's pred, _SwitchN's output_index). */
static zf_status_t s_check_scalar(zf_kernel_ctx_t *ctx, zf_dtype_t dtype)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, dtype));
    const zf_tensor_t *t = ctx->inputs[1];
    if (zf_tensor_shape(t)->rank != 0) {
        char buf[ZF_SHAPE_STRING_MAX];
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "The second input must be a scalar, but it has shape %s",
                               zf_kernels_shape_str(t, buf));
    }
    return ZF_STATUS_OK;
}

/* Switch: output 1 (true) when pred holds, else output 0 (false). */
static zf_status_t s_switch_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(s_check_scalar(ctx, ZF_BOOL));
    bool pred = *(const bool *)zf_tensor_data(ctx->inputs[1]);
    return s_only_output(ctx, pred ? 1 : 0);
}

/* _SwitchN: output output_index; an index out of range takes the last. */
static zf_status_t s_switch_n_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(s_check_scalar(ctx, ZF_INT32));
    int32_t index = *(const int32_t *)zf_tensor_data(ctx->inputs[1]);
    if (ctx->num_outputs < 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "num_outs must be at least 1");
    if (index < 0 || index >= ctx->num_outputs) index = ctx->num_outputs - 1;
    return s_only_output(ctx, index);
}

/* Merge: the engine runs it with exactly one live input, the others NULL. */
static zf_status_t s_merge_compute(zf_kernel_ctx_t *ctx)
{
    for (int k = 0; k < ctx->num_inputs; k++) {
        if (!ctx->inputs[k]) continue;
        zf_tensor_t *index = NULL;
        ZF_TRY(zf_tensor_new_scalar_int32(k, &index));
        zf_kernel_set_output(ctx, 0, ctx->inputs[k]);
        zf_kernel_set_output(ctx, 1, index);
        zf_tensor_unref(&index);
        return ZF_STATUS_OK;
    }
    return zf_kernel_error(ctx, ZF_INTERNAL, "ran without a live input");
}

static zf_status_t s_nothing_compute(zf_kernel_ctx_t *ctx)
{
    (void)ctx;
    return ZF_STATUS_OK;
}

static const zf_kernel_t s_defs[] = {
    ZF_CPU_KERNEL("Enter", 0, s_forward_compute),
    ZF_CPU_KERNEL("RefEnter", 0, s_forward_compute),
    ZF_CPU_KERNEL("Exit", 0, s_forward_compute),
    ZF_CPU_KERNEL("RefExit", 0, s_forward_compute),
    ZF_CPU_KERNEL("NextIteration", 0, s_forward_compute),
    ZF_CPU_KERNEL("RefNextIteration", 0, s_forward_compute),
    ZF_CPU_KERNEL("LoopCond", 0, s_forward_compute),
    ZF_CPU_KERNEL("Switch", 0, s_switch_compute),
    ZF_CPU_KERNEL("RefSwitch", 0, s_switch_compute),
    ZF_CPU_KERNEL("_SwitchN", 0, s_switch_n_compute),
    ZF_CPU_KERNEL("Merge", 0, s_merge_compute),
    ZF_CPU_KERNEL("RefMerge", 0, s_merge_compute),
    ZF_CPU_KERNEL("ControlTrigger", 0, s_nothing_compute),
};

zf_status_t zf__kernels_register_control(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
