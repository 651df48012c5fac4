/* The C entry points of the CUDA kernels for comparisons, logic and
 * selection (compare.cu), called by gpu_kernels_compare.c. Like those of
 * gpu_launch.h, each enqueues on stream and returns the launch's error;
 * pointers are device memory; counts of 0 launch nothing. */
#ifndef ZF_GPU_COMPARE_H
#define ZF_GPU_COMPARE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "executor/devices/cuda/gpu_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zf__gpu_compare {
    ZF__GPU_LESS,
    ZF__GPU_LESS_EQUAL,
    ZF__GPU_GREATER,
    ZF__GPU_GREATER_EQUAL,
    ZF__GPU_EQUAL,
    ZF__GPU_NOT_EQUAL,
    ZF__GPU_LOGICAL_AND, /* bool only */
    ZF__GPU_LOGICAL_OR,  /* bool only */
} zf__gpu_compare_t;

/* Select's three inputs broadcast into its output: the plan of
 * executor/kernels/broadcast.h (rank 0 a single element). */
typedef zf_broadcast_n_t zf__gpu_bcast3_t;

/* out (bool) = op(a, b) over bc, n = the product of bc->dims. dtype is
 * ZF_HALF, ZF_FLOAT, ZF_DOUBLE, ZF_INT8, ZF_INT16, ZF_INT64 or ZF_UINT8,
 * or ZF_BOOL for equality and logic; cudaErrorInvalidValue otherwise. */
cudaError_t zf__gpu_launch_compare(cudaStream_t stream, zf__gpu_compare_t op, zf_dtype_t dtype,
                                   const void *a, const void *b, void *out, int64_t n,
                                   const zf__gpu_bcast_t *bc);

/* out[i] = !in[i] over n bools. */
cudaError_t zf__gpu_launch_logical_not(cudaStream_t stream, const void *in, void *out, int64_t n);

/* out = cond ? t : e over bc (inputs in that order), elements of elem
 * bytes (1, 2, 4, 8 or 16; cudaErrorInvalidValue otherwise). */
cudaError_t zf__gpu_launch_select(cudaStream_t stream, size_t elem, const void *cond, const void *t,
                                  const void *e, void *out, int64_t n, const zf__gpu_bcast3_t *bc);

#ifdef __cplusplus
}
#endif

#endif
