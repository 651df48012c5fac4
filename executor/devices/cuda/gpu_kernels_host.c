/* GPU registrations of INT32 kernels that run on the host. TensorFlow keeps
 * INT32 tensors in host memory on GPUs (they are mostly shapes and
 * indices), so these declare every input and output host-memory and run
 * the op's CPU kernel; the placer can then keep shape arithmetic next to
 * the GPU work it feeds. */
#include <stdlib.h>

#include "common/kernel_def.h"
#include "executor/devices/cuda/gpu_internal.h"

typedef zf__gpu_cpu_kernel_t s_host_t;

zf_status_t zf__gpu_cpu_kernel_create(const Tensorflow__NodeDef *node, void **state)
{
    const zf_kernel_t *cpu = NULL;
    const zf_kernel_def_t *def = NULL;
    ZF_TRY(zf_kernel_find("CPU", node, &cpu));
    ZF_TRY(zf_kernel_def_find("GPU", node, &def, NULL));
    if (!cpu->compute)
        return zf_unimplemented("%s (%s): its CPU kernel is asynchronous and cannot stand in for "
                                "a GPU kernel",
                                node->name, node->op);
    s_host_t *h = calloc(1, sizeof *h);
    if (!h) return zf_out_of_memory("host kernel state");
    h->cpu = cpu;
    h->host_inputs = def->host_memory_inputs;
    if (cpu->create) {
        zf_status_t s = cpu->create(node, &h->state);
        if (!zf_ok(s)) {
            free(h);
            return s;
        }
    }
    *state = h;
    return ZF_STATUS_OK;
}

void zf__gpu_cpu_kernel_destroy(void *state)
{
    s_host_t *h = state;
    if (!h) return;
    if (h->cpu->destroy) h->cpu->destroy(h->state);
    free(h);
}

/* The CPU kernel sees no device, so it allocates host tensors and loops on
 * the calling thread. */
static zf_status_t s_host_compute(zf_kernel_ctx_t *ctx)
{
    s_host_t *h = ctx->state;
    for (int i = 0; i < ctx->num_inputs; i++)
        if (ctx->inputs[i] && zf_tensor_memory_kind(ctx->inputs[i]) == ZF_MEMORY_DEVICE)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "input %d is in GPU memory, but this kernel runs on the host",
                                   i);
    zf_kernel_ctx_t sub = *ctx;
    sub.device = NULL;
    sub.state = h->state;
    return h->cpu->compute(&sub);
}

#define S_HOST_FLAGS(op_, flags_)                                                                  \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = ZF_TYPE_BIT(ZF_INT32),                 \
        .flags = (flags_), .create = zf__gpu_cpu_kernel_create,                                    \
        .destroy = zf__gpu_cpu_kernel_destroy,                                                     \
        .compute = s_host_compute                                                                  \
    }
#define S_HOST(op_) S_HOST_FLAGS(op_, 0)
#define S_HOST_TYPES(op_, types_, flags_)                                                          \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = (types_), .flags = (flags_),           \
        .create = zf__gpu_cpu_kernel_create, .destroy = zf__gpu_cpu_kernel_destroy,                \
        .compute = s_host_compute                                                                  \
    }

static const zf_kernel_t s_defs[] = {
    S_HOST("Add"),       S_HOST("AddV2"),
    S_HOST("Sub"),       S_HOST("Mul"),
    S_HOST("Maximum"),   S_HOST("Minimum"),
    S_HOST("Neg"),       S_HOST("Abs"),
    S_HOST("Square"),    S_HOST("SquaredDifference"),
    S_HOST("Sum"),       S_HOST("Max"),
    S_HOST("Mean"),      S_HOST("Min"),
    S_HOST("Prod"),      S_HOST_FLAGS("Fill", ZF_KERNEL_SIZED_BY_VALUE),
    S_HOST("ZerosLike"), S_HOST("OnesLike"),
    S_HOST("Pack"),      S_HOST("ConcatV2"),
    S_HOST("Slice"),     S_HOST("StridedSlice"),
    S_HOST("Unpack"),    S_HOST("AddN"),
};

/* Comparisons, integer division, selection and Range (every type:
 * TensorFlow keeps Range's inputs and output in host memory on GPUs). */
static const zf_kernel_t s_compare_defs[] = {
    S_HOST("Less"),
    S_HOST("LessEqual"),
    S_HOST("Greater"),
    S_HOST("GreaterEqual"),
    S_HOST("Equal"),
    S_HOST("NotEqual"),
    S_HOST("FloorDiv"),
    S_HOST("FloorMod"),
    S_HOST("Select"),
    S_HOST("SelectV2"),
    S_HOST_TYPES("Range", ZF_TYPES_REAL, ZF_KERNEL_SIZED_BY_VALUE),
};

/* Only ops whose CPU kernel exists (kernels_builtin.c registers the CPU
 * families first), so no GPU kernel is advertised that cannot run. */
static zf_status_t s_register(const zf_kernel_t *defs, size_t n)
{
    zf_status_t first = ZF_STATUS_OK;
    for (size_t i = 0; i < n; i++) {
        if (!zf_kernel_exists(defs[i].op, "CPU")) continue;
        zf_status_t s = zf_kernel_register(&defs[i]);
        if (zf_ok(first))
            first = s;
        else
            zf_status_clear(&s);
    }
    return first;
}

zf_status_t zf__gpu_register_host(void)
{
    zf_status_t first = s_register(s_defs, sizeof s_defs / sizeof s_defs[0]);
    zf_status_t s = s_register(s_compare_defs, sizeof s_compare_defs / sizeof s_compare_defs[0]);
    if (zf_ok(first)) return s;
    zf_status_clear(&s);
    return first;
}
