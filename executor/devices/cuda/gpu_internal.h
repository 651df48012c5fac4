/* Internal to the CUDA build (executor/devices/cuda/): the GPU device's private
 * state, its caching allocator, CUDA and cuBLAS error conversion, helpers
 * the GPU kernels share, and the registration function of each GPU kernel
 * file. */
#ifndef ZF_GPU_INTERNAL_H
#define ZF_GPU_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/devices/cuda/gpu_launch.h"
#include "executor/devices/device.h"
#include "executor/devices/gpu.h"
#include "executor/kernels/kernel.h"

/* ---- the caching allocator (gpu_alloc.c) ------------------------------------ */

/* Device memory in blocks of a few size classes (four per power of two),
 * each a cudaMalloc allocation; a freed block waits in its class's list for
 * the next allocation of that class. Blocks are reused without waiting
 * for the GPU: everything that touches them runs on the device's one
 * stream, in order. When cudaMalloc fails the cached blocks are released
 * and it is tried once more. Reference-counted by the device and by every
 * block out, so tensors may outlive the device. Thread-safe. */
typedef struct zf__gpu_alloc zf__gpu_alloc_t;

zf_status_t zf__gpu_alloc_new(int ordinal, zf__gpu_alloc_t **out);

/* Drops the device's reference: cached blocks are freed now, blocks still
 * out when their tensors go. NULL-safe, sets *alloc_p to NULL. */
void zf__gpu_alloc_close(zf__gpu_alloc_t **alloc_p);

/* A buffer (ZF_MEMORY_DEVICE) of at least nbytes (0 allowed: no memory).
 * Errors: RESOURCE_EXHAUSTED when the GPU is out of memory, INTERNAL for
 * other CUDA failures. Caller owns *out. */
zf_status_t zf__gpu_alloc_buffer(zf__gpu_alloc_t *alloc, size_t nbytes, zf_buffer_t **out);

void zf__gpu_alloc_stats(zf__gpu_alloc_t *alloc, zf_gpu_memory_stats_t *out);

/* ---- the device (gpu_device.c) -------------------------------------------- */

typedef struct zf__gpu {
    int ordinal;
    cudaStream_t stream;
    cublasHandle_t blas;
    pthread_mutex_t blas_lock; /* cuBLAS calls on the shared handle */
    zf__gpu_alloc_t *alloc;
    pthread_mutex_t staging_lock; /* one pageable copy at a time */
    void *staging[2];             /* pinned, allocated on first use */
    cudaEvent_t staged[2];        /* the last copy out of / into staging[i] */
} zf__gpu_t;

/* dev's GPU state, or NULL when dev is not a GPU device. */
zf__gpu_t *zf__gpu_of(const zf_device_t *dev);

/* Makes g's GPU current on the calling thread (CUDA keeps it per thread). */
zf_status_t zf__gpu_use(const zf__gpu_t *g);

/* A device tensor from g's allocator (host memory for STRING). */
zf_status_t zf__gpu_alloc_tensor(zf__gpu_t *g, zf_dtype_t dtype, const zf_shape_t *shape,
                                 zf_tensor_t **out);

/* ---- errors ------------------------------------------------------------------ */

/* "<what>: <CUDA error name>: <description>", as RESOURCE_EXHAUSTED for
 * cudaErrorMemoryAllocation, UNAVAILABLE when no device or driver is
 * present, INTERNAL otherwise. Clears CUDA's last error. */
zf_status_t zf__gpu_error(cudaError_t err, const char *what);
zf_status_t zf__gpu_blas_error(cublasStatus_t st, const char *what);

/* ---- for kernels (gpu_kernels_util.c) ------------------------------------------ */

/* The kernel's GPU, made current on this thread; INTERNAL naming the node
 * when the kernel runs on a device that is not a GPU. */
zf_status_t zf__gpu_kernel_gpu(const zf_kernel_ctx_t *ctx, zf__gpu_t **out);

/* The kernel's error for a failed launch (OK for cudaSuccess). */
zf_status_t zf__gpu_kernel_launched(const zf_kernel_ctx_t *ctx, cudaError_t err);

/* INVALID_ARGUMENT unless input i is in GPU memory (a host tensor reaching
 * a GPU kernel's device-memory input is a partitioning bug; reading it on
 * the GPU would crash). */
zf_status_t zf__gpu_check_device_input(const zf_kernel_ctx_t *ctx, int i);

/* A device scratch buffer of nbytes for one kernel run (NULL for 0). */
zf_status_t zf__gpu_kernel_scratch(const zf_kernel_ctx_t *ctx, zf__gpu_t *g, size_t nbytes,
                                   zf_buffer_t **out);

/* A GPU kernel that runs the op's CPU kernel (gpu_kernels_host.c): the
 * CPU kernel and its state, and which inputs the GPU definition keeps in
 * host memory. create() finds both; destroy() frees. */
typedef struct zf__gpu_cpu_kernel {
    const zf_kernel_t *cpu;
    void *state;
    uint32_t host_inputs;
} zf__gpu_cpu_kernel_t;

zf_status_t zf__gpu_cpu_kernel_create(const Tensorflow__NodeDef *node, void **state);
void zf__gpu_cpu_kernel_destroy(void *state);

/* ---- moving elements (gpu_kernels_remap.c): the device's gathers ------------------- */

zf_status_t zf__gpu_remap_gather(zf_device_t *dev, const struct zf_remap *r,
                                 const int64_t *src_dims, const void *src, void *dst, size_t elem,
                                 const void *fill);
zf_status_t zf__gpu_strided_gather(zf_device_t *dev, int rank, const int64_t *dims,
                                   const int64_t *strides, const void *src, void *dst,
                                   size_t elem);

/* ---- host-side plans (exposed for tests) -------------------------------------------- */

/* The plan reducing shape over the dims with reduced[k] set; *count gets
 * the number of input elements per output element (0 when a reduced dim
 * is empty). Meaningful for launching when *count >= 2. */
void zf__gpu_reduce_plan(const zf_shape_t *shape, const bool *reduced, zf__gpu_reduce_plan_t *plan,
                         int64_t *count);

/* The plan zf__gpu_launch_remap() gathers r's dense space from a source
 * of dims src_dims[0..r->rank) with, taking r's maps as one array from
 * r->block; *n gets the number of outputs, *total the maps' length. */
void zf__gpu_remap_plan(const struct zf_remap *r, const int64_t *src_dims,
                        zf__gpu_remap_plan_t *plan, int64_t *n, int64_t *total);

/* The plan (no maps: idx NULL) of a strided gather over dims[0..rank) with
 * the source strides strides; *n gets the number of outputs. */
void zf__gpu_strided_plan(int rank, const int64_t *dims, const int64_t *strides,
                          zf__gpu_remap_plan_t *plan, int64_t *n);

/* ---- kernel families ------------------------------------------------------------ */

/* Registers defs[0..n) (static), going on past failures; returns the
 * first error. */
zf_status_t zf__gpu_register_defs(const zf_kernel_t *defs, int n);

/* A GPU kernel (its definition constrains attr "T"). */
#define ZF__GPU_KERNEL(op_, types_, compute_)                                                      \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = (types_), .compute = (compute_)        \
    }

zf_status_t zf__gpu_register_cwise(void);    /* gpu_kernels_cwise.c */
zf_status_t zf__gpu_register_nn(void);       /* gpu_kernels_nn.c */
zf_status_t zf__gpu_register_data(void);     /* gpu_kernels_data.c */
zf_status_t zf__gpu_register_host(void);     /* gpu_kernels_host.c */
zf_status_t zf__gpu_register_sendrecv(void); /* gpu_kernels_sendrecv.c */
zf_status_t zf__gpu_register_compare(void);  /* gpu_kernels_compare.c */
zf_status_t zf__gpu_register_remap(void);    /* gpu_kernels_remap.c */

#endif
