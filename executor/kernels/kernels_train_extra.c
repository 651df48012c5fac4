/* CPU training kernels that complete the gradient set (FLOAT and DOUBLE):
 *
 *   BiasAddGrad  the gradient of BiasAdd's bias: out_backprop summed over
 *                every dim but the channel one (the last for NHWC, dim 1
 *                for NCHW), as TensorFlow's; the sums are taken in double
 *                and rounded once.
 *
 * One pass over the input, on the calling thread. */
#include <stdlib.h>

#include "executor/kernels/kernels_util.h"

/* ---- BiasAddGrad ------------------------------------------------------------------------- */

/* sum[c] += g[(r * channels + c) * inner + i] over r < rows, i < inner. */
#define S_BIAS_GRAD_SUM(T)                                                                         \
    do {                                                                                           \
        const T *g = zf_tensor_data(in);                                                           \
        for (int64_t r = 0; r < rows; r++)                                                         \
            for (int64_t c = 0; c < channels; c++) {                                               \
                const T *p = g + (r * channels + c) * inner;                                       \
                double acc = 0;                                                                    \
                for (int64_t i = 0; i < inner; i++) acc += p[i];                                   \
                sum[c] += acc;                                                                     \
            }                                                                                      \
        T *o = zf_tensor_data(out);                                                                \
        for (int64_t c = 0; c < channels; c++) o[c] = (T)sum[c];                                   \
    } while (0)

zf_status_t zf__kernels_bias_grad_channel_dim(const zf_kernel_ctx_t *ctx, int *channel_dim)
{
    const zf__kernels_bias_state_t *st = ctx->state;
    const zf_tensor_t *in = ctx->inputs[0];
    int rank = zf_tensor_shape(in)->rank;
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (rank < 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Input tensor must be at least 2D: %s",
                               zf_kernels_shape_str(in, sbuf));
    *channel_dim = st->nchw ? 1 : rank - 1;
    return ZF_STATUS_OK;
}

static zf_status_t s_bias_grad_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *in = ctx->inputs[0];
    const zf_shape_t *s = zf_tensor_shape(in);
    zf_dtype_t t = zf_tensor_dtype(in);
    if (t != ZF_FLOAT && t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    int cdim = 0;
    ZF_TRY(zf__kernels_bias_grad_channel_dim(ctx, &cdim));
    int64_t channels = s->dims[cdim], inner = 1;
    for (int k = cdim + 1; k < s->rank; k++) inner *= s->dims[k];
    zf_shape_t os = ZF_SHAPE(channels);
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, t, &os, &out));
    if (channels == 0) return ZF_STATUS_OK;
    double *sum = calloc((size_t)channels, sizeof *sum);
    if (!sum) return zf_out_of_memory("BiasAddGrad");
    int64_t n = zf_tensor_num_elements(in);
    int64_t rows = inner == 0 ? 0 : n / (channels * inner);
    if (t == ZF_FLOAT)
        S_BIAS_GRAD_SUM(float);
    else
        S_BIAS_GRAD_SUM(double);
    free(sum);
    return ZF_STATUS_OK;
}

/* ---- registration ------------------------------------------------------------------------ */

static const zf_kernel_t s_defs[] = {
    {.op = "BiasAddGrad",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_FLOAT,
     .create = zf__kernels_bias_create,
     .destroy = free,
     .compute = s_bias_grad_compute},
};

zf_status_t zf__kernels_register_train_extra(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
