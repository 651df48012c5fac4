/* Devices: the per-device object an executor owns — attributes, memory, copies, a
 * compute stream and a thread pool.
 *
 * Device types and their placement priorities live in common/device_type.h.
 *
 * A zf_device_t is created by its type's factory (zf_device_cpu_new(),
 * zf_device_gpu_new() in executor/devices/gpu.h) and destroyed with
 * zf_device_destroy(). Its methods are thread-safe. */
#ifndef ZF_DEVICE_H
#define ZF_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/device_name.h"
#include "common/device_type.h"
#include "common/status.h"
#include "common/tensor.h"

/* ---- devices ----------------------------------------------------------- */

typedef struct zf_device zf_device_t;
typedef struct zf_thread_pool zf_thread_pool_t;
struct zf_remap; /* executor/kernels/remap.h */

/* Copy directions between host memory and a device's memory. */
typedef enum zf_copy_kind {
    ZF_COPY_HOST_TO_DEVICE,
    ZF_COPY_DEVICE_TO_HOST,
    ZF_COPY_DEVICE_TO_DEVICE,
} zf_copy_kind_t;

/* The operations a device type implements. CPU's copies are memcpy. */
typedef struct zf_device_ops {
    /* Allocates a tensor in this device's memory (zero-filled on CPU). */
    zf_status_t (*alloc_tensor)(zf_device_t *dev, zf_dtype_t dtype, const zf_shape_t *shape,
                                zf_tensor_t **out);
    /* Optional (NULL: alloc_tensor): as alloc_tensor, contents undefined,
     * for a kernel that writes every element. */
    zf_status_t (*alloc_tensor_uninit)(zf_device_t *dev, zf_dtype_t dtype, const zf_shape_t *shape,
                                       zf_tensor_t **out);
    /* Copies nbytes; blocks until the copy is done (GPU: on the device's
     * stream, then synchronises). */
    zf_status_t (*copy)(zf_device_t *dev, void *dst, const void *src, size_t nbytes,
                        zf_copy_kind_t kind);
    /* Waits for all work queued on the device's stream. */
    zf_status_t (*sync)(zf_device_t *dev);
    /* remap_gather and strided_gather come as a pair: a device sets both
     * or neither (kernels use them only when both are set).
     * Optional (NULL: kernels gather on the host, as on CPU): gathers dst
     * (dense over r's dims) from src (of dims src_dims[0..r->rank))
     * through r's index maps, both in this device's memory, elements of
     * elem bytes (at most 16), the element at fill (in this device's
     * memory; NULL: zeros) where a map says ZF_REMAP_FILL; queued on the
     * device's stream. See zf_remap_gather(). */
    zf_status_t (*remap_gather)(zf_device_t *dev, const struct zf_remap *r, const int64_t *src_dims,
                                const void *src, void *dst, size_t elem, const void *fill);
    /* Optional (NULL: on the host): dst, dense over dims[0..rank) (rank
     * 1 to ZF_MAX_RANK), takes the element of src at the sum over k of
     * i_k * strides[k], i_k its position along dim k (Transpose); both in
     * this device's memory, elements of elem bytes (at most 16); queued on
     * the device's stream. */
    zf_status_t (*strided_gather)(zf_device_t *dev, int rank, const int64_t *dims,
                                  const int64_t *strides, const void *src, void *dst, size_t elem);
    void (*destroy)(zf_device_t *dev);
} zf_device_ops_t;

struct zf_device {
    const zf_device_ops_t *ops;
    zf_device_name_t name;  /* full name */
    char name_str[160];     /* formatted full name */
    char type[32];          /* "CPU", "GPU" */
    uint64_t incarnation;   /* random, non-zero, new on every start */
    int64_t memory_limit;   /* bytes; 0 = unknown */
    zf_thread_pool_t *pool; /* for kernels that parallelise; owned */
    void *impl;             /* the type's private state */
};

/* A CPU device named name (a full device name), with a thread pool of
 * num_threads workers (0: one per online core). */
zf_status_t zf_device_cpu_new(const char *name, int num_threads, zf_device_t **out);

/* The constructor device types build on: parses and checks name (a full
 * device name, INVALID_ARGUMENT otherwise), draws a new incarnation and
 * starts a thread pool of num_threads workers (0: one per online core).
 * The type then fills memory_limit and impl. Caller owns *out. */
zf_status_t zf_device_new(const zf_device_ops_t *ops, const char *name, int num_threads,
                          zf_device_t **out);

/* Frees the device: stops its pool, then calls ops->destroy (which frees
 * the type's impl only), then frees the struct. NULL-safe, sets *dev_p to
 * NULL. */
void zf_device_destroy(zf_device_t **dev_p);

/* Convenience wrappers over dev->ops. */
zf_status_t zf_device_alloc_tensor(zf_device_t *dev, zf_dtype_t dtype, const zf_shape_t *shape,
                                   zf_tensor_t **out);

/* As zf_device_alloc_tensor, the elements left undefined where the device
 * type can save the zero-fill (CPU: zf_tensor_new_uninit). */
zf_status_t zf_device_alloc_tensor_uninit(zf_device_t *dev, zf_dtype_t dtype,
                                          const zf_shape_t *shape, zf_tensor_t **out);
bool zf_device_is_cpu(const zf_device_t *dev);

#endif
