/* GPU kernels: the helpers every GPU kernel file uses, and
 * zf_gpu_register_kernels(), which registers each GPU kernel family once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "executor/devices/cuda/gpu_internal.h"
#include "executor/kernels/kernels_util.h"

zf_status_t zf__gpu_kernel_gpu(const zf_kernel_ctx_t *ctx, zf__gpu_t **out)
{
    *out = NULL;
    zf__gpu_t *g = ctx->device ? zf__gpu_of(ctx->device) : NULL;
    if (!g)
        return zf_kernel_error(ctx, ZF_INTERNAL, "a GPU kernel needs a GPU device, not %s",
                               ctx->device ? ctx->device->name_str : "none");
    zf_status_t s = zf__gpu_use(g);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    *out = g;
    return ZF_STATUS_OK;
}

zf_status_t zf__gpu_kernel_launched(const zf_kernel_ctx_t *ctx, cudaError_t err)
{
    if (err == cudaSuccess) return ZF_STATUS_OK;
    return zf_status_prefix(zf__gpu_error(err, "launching the CUDA kernel"), "%s (%s)",
                            ctx->node->name, ctx->node->op);
}

zf_status_t zf__gpu_check_device_input(const zf_kernel_ctx_t *ctx, int i)
{
    const zf_tensor_t *t = ctx->inputs[i];
    if (zf_tensor_num_elements(t) == 0) return ZF_STATUS_OK; /* no bytes to read */
    if (zf_tensor_memory_kind(t) != ZF_MEMORY_DEVICE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "input %d is in host memory, but this GPU kernel reads it in GPU "
                               "memory",
                               i);
    const zf__gpu_t *g = zf__gpu_of(ctx->device);
    int id = zf_buffer_device_id(zf_tensor_buffer(t));
    if (g && id != g->ordinal)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "input %d is in the memory of GPU %d, not of this kernel's GPU %d",
                               i, id, g->ordinal);
    return ZF_STATUS_OK;
}

zf_status_t zf__gpu_kernel_scratch(const zf_kernel_ctx_t *ctx, zf__gpu_t *g, size_t nbytes,
                                   zf_buffer_t **out)
{
    *out = NULL;
    if (nbytes == 0) return ZF_STATUS_OK;
    zf_status_t s = zf__gpu_alloc_buffer(g->alloc, nbytes, out);
    return zf_status_prefix(s, "%s (%s): scratch memory", ctx->node->name, ctx->node->op);
}

/* ---- registration ---------------------------------------------------------- */

zf_status_t zf__gpu_register_defs(const zf_kernel_t *defs, int n)
{
    zf_status_t first = ZF_STATUS_OK;
    for (int i = 0; i < n; i++) {
        zf_status_t s = zf_kernel_register(&defs[i]);
        if (zf_ok(first))
            first = s;
        else
            zf_status_clear(&s);
    }
    return first;
}

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static zf_code_t s_code = ZF_OK;
static char s_msg[512];

/* Every family is tried even when one fails, so one bad registration
 * costs only its own kernels; the first error is what is reported. */
static void s_register_all(void)
{
    static zf_status_t (*const families[])(void) = {
        zf__gpu_register_cwise, zf__gpu_register_nn,       zf__gpu_register_data,
        zf__gpu_register_host,  zf__gpu_register_sendrecv, zf__gpu_register_compare,
        zf__gpu_register_remap,
    };
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        zf_status_t s = families[i]();
        if (!zf_ok(s) && s_code == ZF_OK) {
            s_code = s.code;
            snprintf(s_msg, sizeof s_msg, "registering GPU kernels: %s", zf_status_msg(&s));
        }
        zf_status_clear(&s);
    }
}

zf_status_t zf_gpu_register_kernels(void)
{
    pthread_once(&s_once, s_register_all);
    return s_code == ZF_OK ? ZF_STATUS_OK : zf_status_new(s_code, "%s", s_msg);
}
