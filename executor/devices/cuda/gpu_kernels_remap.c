/* GPU kernels that move elements without computing on them: Slice,
 * StridedSlice, Tile, Pad, PadV2, MirrorPad, ReverseV2, BroadcastTo,
 * Transpose, GatherV2, Gather, Split, SplitV and Unpack. Each runs the
 * op's CPU kernel on the GPU device: the CPU kernel checks the inputs and
 * plans on the host (its begin, size, multiples, paddings, shape, perm,
 * indices, axis, split_dim and size_splits inputs are in host memory),
 * allocates its output on the GPU and hands the moving of the elements to
 * the device's gathers below, which launch remap.cu's kernel. So the GPU
 * kernels have the CPU kernels' semantics and error texts. */
#include <string.h>

#include "executor/devices/cuda/gpu_internal.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/remap.h"

/* ---- the device's gathers -------------------------------------------------------- */

/* Launches plan over n outputs with idx_host (total entries, may be 0)
 * copied to the device first. */
static zf_status_t s_launch(zf__gpu_t *g, size_t elem, const zf__gpu_remap_plan_t *plan,
                            const int64_t *idx_host, int64_t total, const void *src, void *dst,
                            int64_t n, const void *fill)
{
    ZF_TRY(zf__gpu_use(g));
    zf_buffer_t *idx = NULL;
    if (total > 0) {
        size_t bytes = (size_t)total * sizeof *idx_host;
        ZF_TRY(zf__gpu_alloc_buffer(g->alloc, bytes, &idx));
        /* From pageable memory the copy takes the values before it
         * returns, so the caller may free them at once. */
        cudaError_t err = cudaMemcpyAsync(zf_buffer_data(idx), idx_host, bytes,
                                          cudaMemcpyHostToDevice, g->stream);
        if (err != cudaSuccess) {
            zf_buffer_unref(&idx);
            return zf__gpu_error(err, "copying an index map to the GPU");
        }
    }
    cudaError_t err = zf__gpu_launch_remap(g->stream, elem, plan,
                                           idx ? zf_buffer_data(idx) : NULL, src, dst, n, fill);
    /* The block may be reused at once: its next user queues behind this
     * kernel on the same stream. */
    zf_buffer_unref(&idx);
    return err == cudaSuccess ? ZF_STATUS_OK : zf__gpu_error(err, "launching the CUDA kernel");
}

static zf_status_t s_check_rank(int rank)
{
    if (rank < 1 || rank > ZF__GPU_MAX_RANK)
        return zf_internal("a GPU gather of rank %d (1 to %d)", rank, ZF__GPU_MAX_RANK);
    return ZF_STATUS_OK;
}

void zf__gpu_remap_plan(const struct zf_remap *r, const int64_t *src_dims,
                        zf__gpu_remap_plan_t *plan, int64_t *n, int64_t *total)
{
    memset(plan, 0, sizeof *plan);
    plan->rank = r->rank;
    int64_t stride = 1;
    *n = 1;
    *total = 0;
    for (int k = r->rank - 1; k >= 0; k--) {
        plan->dims[k] = r->dims[k];
        plan->strides[k] = stride;
        plan->offs[k] = r->idx[k] - r->block;
        stride *= src_dims[k];
        *n *= r->dims[k];
        *total += r->dims[k];
    }
}

void zf__gpu_strided_plan(int rank, const int64_t *dims, const int64_t *strides,
                          zf__gpu_remap_plan_t *plan, int64_t *n)
{
    memset(plan, 0, sizeof *plan);
    plan->rank = rank;
    *n = 1;
    for (int k = 0; k < rank; k++) {
        plan->dims[k] = dims[k];
        plan->strides[k] = strides[k];
        *n *= dims[k];
    }
}

zf_status_t zf__gpu_remap_gather(zf_device_t *dev, const struct zf_remap *r,
                                 const int64_t *src_dims, const void *src, void *dst, size_t elem,
                                 const void *fill)
{
    zf__gpu_t *g = zf__gpu_of(dev);
    if (!g) return zf_internal("a GPU gather on %s, not a GPU", dev->name_str);
    ZF_TRY(s_check_rank(r->rank));
    zf__gpu_remap_plan_t plan;
    int64_t n = 0, total = 0;
    zf__gpu_remap_plan(r, src_dims, &plan, &n, &total);
    if (n == 0) return ZF_STATUS_OK;
    return s_launch(g, elem, &plan, r->block, total, src, dst, n, fill);
}

zf_status_t zf__gpu_strided_gather(zf_device_t *dev, int rank, const int64_t *dims,
                                   const int64_t *strides, const void *src, void *dst,
                                   size_t elem)
{
    zf__gpu_t *g = zf__gpu_of(dev);
    if (!g) return zf_internal("a GPU gather on %s, not a GPU", dev->name_str);
    ZF_TRY(s_check_rank(rank));
    zf__gpu_remap_plan_t plan;
    int64_t n = 0;
    zf__gpu_strided_plan(rank, dims, strides, &plan, &n);
    if (n == 0) return ZF_STATUS_OK;
    return s_launch(g, elem, &plan, NULL, 0, src, dst, n, NULL);
}

/* ---- the kernels ------------------------------------------------------------------- */

/* Inputs the definition keeps in host memory must be there (the CPU
 * kernel reads them); the others must be in this GPU's memory. Then the
 * CPU kernel runs with the GPU as its device. */
static zf_status_t s_remap_compute(zf_kernel_ctx_t *ctx)
{
    const zf__gpu_cpu_kernel_t *h = ctx->state;
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    for (int i = 0; i < ctx->num_inputs; i++) {
        if (!ctx->inputs[i]) continue;
        if (!(h->host_inputs >> i & 1u)) {
            ZF_TRY(zf__gpu_check_device_input(ctx, i));
        } else if (zf_tensor_memory_kind(ctx->inputs[i]) == ZF_MEMORY_DEVICE) {
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "input %d is in GPU memory, but this kernel reads it on the "
                                   "host",
                                   i);
        }
    }
    zf_kernel_ctx_t sub = *ctx;
    sub.state = h->state;
    return h->cpu->compute(&sub);
}

#define S_REMAP(op_)                                                                               \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = ZF_TYPES_GPU_DEVICE,                   \
        .create = zf__gpu_cpu_kernel_create, .destroy = zf__gpu_cpu_kernel_destroy,                \
        .compute = s_remap_compute                                                                 \
    }

static const zf_kernel_t s_defs[] = {
    S_REMAP("Slice"), S_REMAP("StridedSlice"), S_REMAP("Tile"),        S_REMAP("Pad"),
    S_REMAP("PadV2"), S_REMAP("MirrorPad"),    S_REMAP("ReverseV2"),   S_REMAP("BroadcastTo"),
    S_REMAP("Transpose"), S_REMAP("GatherV2"),   S_REMAP("Gather"),      S_REMAP("Split"),
    S_REMAP("SplitV"),    S_REMAP("Unpack"),
};

zf_status_t zf__gpu_register_remap(void)
{
    return zf__gpu_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
