/* The GPU device type behind a plain C interface: device discovery, the GPU
 * device (executor/devices/device.h), its kernels, pinned host tensors and CUDA IPC
 * handles. No CUDA type appears here, so CPU-only code may include it.
 *
 * Design note. With CUDA (ZFLOW_HAVE_CUDA) the implementation lives in
 * executor/devices/cuda/; without it executor/devices/gpu_stub.c answers every call with
 * "zflow was built without CUDA" and registers no kernels.
 *
 * A GPU device owns one CUDA stream, a cuBLAS handle bound to it, two
 * pinned staging buffers and a caching allocator. Kernels enqueue their
 * work on the stream and return without waiting: the stream orders every
 * kernel and copy of the device, so a tensor's memory may be handed to the
 * next allocation as soon as its last reference goes. Anything that reads
 * device memory from the host goes through the device's copy operation,
 * which waits for the stream.
 *
 * Memory types (docs/design.md, "Placement"): device tensors hold their bytes in GPU
 * memory (ZF_MEMORY_DEVICE, tagged with the CUDA ordinal); INT32 tensors,
 * and inputs or outputs a kernel declares host-memory (Reshape's shape,
 * Shape/Size/Rank outputs, ...), stay in host memory. Host tensors that
 * take part in copies are fastest in pinned memory
 * (zf_gpu_alloc_host_tensor()). */
#ifndef ZF_GPU_H
#define ZF_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/devices/device.h"

/* ---- discovery ---------------------------------------------------------- */

/* True when zflow was built with CUDA. */
bool zf_gpu_built_with_cuda(void);

/* The number of visible GPUs. OK with *n >= 1; otherwise *n is 0 and the
 * error says why: UNAVAILABLE "zflow was built without CUDA", or
 * UNAVAILABLE "no GPU visible: <CUDA's reason>" (no driver, no device,
 * CUDA_VISIBLE_DEVICES hides them all). Thread-safe; cheap after the first
 * call. */
zf_status_t zf_gpu_device_count(int *n);

/* ---- devices --------------------------------------------------------------- */

/* A GPU device named name (a full device name of type GPU, INVALID_ARGUMENT
 * otherwise) on CUDA ordinal gpu_index: it creates its stream and cuBLAS
 * handle and reports the memory free at start as memory_limit. Errors:
 * INVALID_ARGUMENT for a name or index that is not valid, UNAVAILABLE
 * without CUDA or without that GPU, INTERNAL for a CUDA failure. Caller
 * owns *out (zf_device_destroy(), which waits for the stream; tensors may
 * outlive their device and free their memory when released).
 *
 * The device's copy operation blocks until the bytes have arrived: host
 * memory in pinned memory moves with one asynchronous copy on the stream,
 * pageable memory goes through the pinned staging buffers in chunks, two
 * at a time. */
zf_status_t zf_device_gpu_new(const char *name, int gpu_index, zf_device_t **out);

/* True when dev is a GPU device made by zf_device_gpu_new(). */
bool zf_device_is_gpu(const zf_device_t *dev);

/* A host tensor (zero-filled, ZF_MEMORY_HOST_PINNED) in page-locked memory,
 * for fast copies to and from GPUs. STRING tensors and empty tensors come
 * from ordinary host memory. Errors as zf_tensor_new(), and UNAVAILABLE
 * without CUDA. Caller owns *out. Thread-safe. */
zf_status_t zf_gpu_alloc_host_tensor(zf_dtype_t dtype, const zf_shape_t *shape, zf_tensor_t **out);

/* Copies a tensor in GPU memory into a new pinned host tensor, or a host
 * tensor into a new tensor in dev's memory (a tensor on another GPU comes
 * over by a peer copy; the work that produced it on that GPU must be
 * finished). Blocks until done. A tensor already where it is asked for,
 * and a STRING tensor (host only), gets a new reference to itself. Errors:
 * INVALID_ARGUMENT when dev is not a GPU, RESOURCE_EXHAUSTED, INTERNAL for
 * a CUDA failure. Caller owns *out. */
zf_status_t zf_gpu_tensor_to_host(zf_device_t *dev, const zf_tensor_t *src, zf_tensor_t **out);
zf_status_t zf_gpu_tensor_to_device(zf_device_t *dev, const zf_tensor_t *src, zf_tensor_t **out);

/* The caching allocator's counters for dev. */
typedef struct zf_gpu_memory_stats {
    uint64_t bytes_in_use; /* held by live tensors (rounded to the allocator's block sizes) */
    uint64_t bytes_cached; /* freed blocks kept for reuse */
    uint64_t num_cuda_mallocs;
} zf_gpu_memory_stats_t;

/* INVALID_ARGUMENT when dev is not a GPU device. Thread-safe. */
zf_status_t zf_gpu_memory_stats(zf_device_t *dev, zf_gpu_memory_stats_t *out);

/* ---- kernels ------------------------------------------------------------- */

/* Registers the GPU kernels (executor/kernels/kernel.h) once: element-wise math
 * with broadcasting, BiasAdd, Sum/Mean/Max, Softmax/LogSoftmax, Cast, Fill,
 * ZerosLike, OnesLike, MatMul (cuBLAS), the kernels that only move data
 * (Const, Identity, IdentityN, NoOp, StopGradient, Reshape, ExpandDims,
 * Squeeze, Shape, Size, Rank) and _Send/_Recv/_HostSend/_HostRecv. Math
 * kernels accept HALF, FLOAT and DOUBLE. INT32 versions of Add, AddV2, Sub, Mul,
 * Maximum, Minimum, Neg, Abs, Square, SquaredDifference, Sum, Max, Mean,
 * Fill, ZerosLike, OnesLike, Pack and ConcatV2 run their CPU kernel on the
 * host with every argument in host memory (TensorFlow's rule for INT32 on
 * GPUs); they, and the Send/Recv kernels, look their CPU kernel up when a
 * partition is built, so the CPU kernels must be registered first
 * (zf_kernels_register_builtin() does that). Ops with no GPU kernel
 * (Conv2D, MaxPool, ArgMax, ...) stay on the CPU. Without CUDA it
 * registers nothing. Needs no GPU. Start-up only; later calls return the
 * first call's status. */
zf_status_t zf_gpu_register_kernels(void);

/* ---- CUDA IPC (same-host transfers between GPU processes) ----------------- */

/* For the transport between GPU executors on one host (docs/design.md, "Devices and GPUs";
 * executor/rendezvous/remote.h): the sender exports, the receiver imports and copies
 * device to device (zf_gpu_ipc_copy()), then tells the sender it may let
 * the memory go. A process cannot open its own handles, so the tests that
 * open one run two processes. */

/* A device tensor's memory as another process on the same host can open
 * it: CUDA's IPC handle for the allocation, the tensor's offset in it and
 * its size in bytes. Plain bytes, safe to send over the wire. */
typedef struct zf_gpu_ipc_handle {
    uint8_t handle[64]; /* cudaIpcMemHandle_t */
    uint64_t offset;
    uint64_t nbytes;
    int32_t device_id; /* CUDA ordinal of the exporting device */
} zf_gpu_ipc_handle_t;

/* Exports t (in GPU memory). The exporter must keep its reference to t
 * until the importer has released its tensor: the memory is reused once t
 * is freed. Errors: INVALID_ARGUMENT for a tensor not in GPU memory,
 * INTERNAL for a CUDA failure, UNAVAILABLE without CUDA. */
zf_status_t zf_gpu_ipc_export(const zf_tensor_t *t, zf_gpu_ipc_handle_t *out);

/* Opens h in another process on dev (same host, same or peer GPU) as a
 * tensor of dtype and shape viewing the exporter's memory; releasing it
 * closes the mapping. A process cannot open its own handles (CUDA refuses).
 * Errors: INVALID_ARGUMENT when the shape needs more bytes than h covers,
 * INTERNAL for a CUDA failure, UNAVAILABLE without CUDA. Caller owns *out. */
zf_status_t zf_gpu_ipc_import(zf_device_t *dev, const zf_gpu_ipc_handle_t *h, zf_dtype_t dtype,
                              const zf_shape_t *shape, zf_tensor_t **out);

/* Opens h on dev, copies the tensor it names into a new tensor in dev's
 * memory (a peer copy when the exporter's GPU is another), waits for the
 * copy and closes the mapping before returning, so the exporter may drop
 * its memory as soon as this returns. Errors as zf_gpu_ipc_import(), and
 * RESOURCE_EXHAUSTED when dev is out of memory. Caller owns *out. */
zf_status_t zf_gpu_ipc_copy(zf_device_t *dev, const zf_gpu_ipc_handle_t *h, zf_dtype_t dtype,
                            const zf_shape_t *shape, zf_tensor_t **out);

/* Copies a tensor in GPU memory into a new (pageable) host tensor without
 * a device object, for transports that fall back to sending bytes: the
 * work that produced src must be finished. A host tensor gets a new
 * reference to itself. Blocks. Errors: INTERNAL for a CUDA failure,
 * UNAVAILABLE without CUDA, RESOURCE_EXHAUSTED. Caller owns *out. */
zf_status_t zf_gpu_tensor_download(const zf_tensor_t *src, zf_tensor_t **out);

/* ---- baselines for bench/bench_gpu.c ---------------------------------------- */

/* What zflow's MatMul kernel is measured against: iters row-major float
 * GEMMs c[m,n] = a[m,k] b[k,n] in dev's memory as plain cublasSgemm calls
 * (a private handle on dev's stream). *seconds is the time from the first
 * call to the stream's end, set-up excluded. */
zf_status_t zf_gpu_baseline_sgemm(zf_device_t *dev, int m, int n, int k, const float *a,
                                  const float *b, float *c, int iters, double *seconds);

/* What the device's copy operation is measured against: iters synchronous
 * cudaMemcpy calls of nbytes, host to device or back; *seconds in all. */
zf_status_t zf_gpu_baseline_memcpy(zf_device_t *dev, void *dst, const void *src, size_t nbytes,
                                   zf_copy_kind_t kind, int iters, double *seconds);

#endif
