/* Kernels registered against their definitions (common/kernel_def.h),
 * which hold the registry, plus the small helpers kernels share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/op_registry.h"
#include "executor/kernels/kernel.h"

zf_status_t zf_kernel_register(const zf_kernel_t *k)
{
    if (!k->op || !k->device_type || (!k->compute && !k->compute_async))
        return zf_invalid_argument("a kernel needs an op, a device type and a compute function");
    const zf_kernel_def_t *def = zf_kernel_def_lookup(k->op, k->device_type, k->allowed_types);
    if (!def)
        return zf_not_found("the kernel for op '%s' on %s (allowed types %#llx) has no definition "
                            "with the same types (common/kernel_defs.c)",
                            k->op, k->device_type, (unsigned long long)k->allowed_types);
    return zf_kernel_def_attach(def, k);
}

zf_status_t zf_kernel_register_with_def(const zf_kernel_def_t *def, const zf_kernel_t *k)
{
    if (!def->op || !k->op || strcmp(def->op, k->op) != 0 || !def->device_type || !k->device_type ||
        strcmp(def->device_type, k->device_type) != 0 || def->allowed_types != k->allowed_types)
        return zf_invalid_argument("a kernel must have its definition's op, device type and "
                                   "allowed types");
    ZF_TRY(zf_kernel_def_register(def));
    return zf_kernel_register(k);
}

zf_status_t zf_kernel_find(const char *device_type, const Tensorflow__NodeDef *node,
                           const zf_kernel_t **out)
{
    *out = NULL;
    const zf_kernel_def_t *def = NULL;
    const void *impl = NULL;
    ZF_TRY(zf_kernel_def_find(device_type, node, &def, &impl));
    if (!impl)
        return zf_status_new(ZF_NOT_FOUND,
                             "No OpKernel was registered to support Op '%s' used by node %s on "
                             "%s: its definition exists, but this build has no implementation",
                             node->op, node->name, device_type);
    *out = impl;
    return ZF_STATUS_OK;
}

typedef struct {
    const char *op, *device_type;
    bool found;
} s_exists_t;

static void s_exists(const zf_kernel_def_t *def, const void *impl, void *arg)
{
    s_exists_t *e = arg;
    if (impl && strcmp(def->op, e->op) == 0 && strcmp(def->device_type, e->device_type) == 0)
        e->found = true;
}

bool zf_kernel_exists(const char *op, const char *device_type)
{
    s_exists_t e = {op, device_type, false};
    zf_kernel_def_foreach(s_exists, &e);
    return e.found;
}

/* ---- helpers for kernel implementations -------------------------------- */

static zf_status_t s_alloc_output(zf_kernel_ctx_t *ctx, int i, zf_dtype_t dtype,
                                  const zf_shape_t *shape, bool zeroed, zf_tensor_t **out)
{
    *out = NULL;
    if (i < 0 || i >= ctx->num_outputs)
        return zf_internal("%s: output %d out of range (%d outputs)", ctx->node->name, i,
                           ctx->num_outputs);
    zf_tensor_t *t = NULL;
    zf_status_t s;
    if (ctx->device)
        s = zeroed ? zf_device_alloc_tensor(ctx->device, dtype, shape, &t)
                   : zf_device_alloc_tensor_uninit(ctx->device, dtype, shape, &t);
    else
        s = zeroed ? zf_tensor_new(dtype, shape, &t) : zf_tensor_new_uninit(dtype, shape, &t);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    zf_tensor_unref(&ctx->outputs[i]);
    ctx->outputs[i] = t;
    *out = t;
    return ZF_STATUS_OK;
}

zf_status_t zf_kernel_alloc_output(zf_kernel_ctx_t *ctx, int i, zf_dtype_t dtype,
                                   const zf_shape_t *shape, zf_tensor_t **out)
{
    return s_alloc_output(ctx, i, dtype, shape, true, out);
}

zf_status_t zf_kernel_alloc_output_uninit(zf_kernel_ctx_t *ctx, int i, zf_dtype_t dtype,
                                          const zf_shape_t *shape, zf_tensor_t **out)
{
    return s_alloc_output(ctx, i, dtype, shape, false, out);
}

void zf_kernel_set_output(zf_kernel_ctx_t *ctx, int i, zf_tensor_t *t)
{
    if (i < 0 || i >= ctx->num_outputs) return;
    zf_tensor_unref(&ctx->outputs[i]);
    ctx->outputs[i] = t ? zf_tensor_ref(t) : NULL;
}

zf_status_t zf_kernel_error(const zf_kernel_ctx_t *ctx, zf_code_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zf_status_t s = zf_status_vnew(code, fmt, ap);
    va_end(ap);
    return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
}
