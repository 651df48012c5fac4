/* The GPU device: discovery, the device's stream, cuBLAS handle and
 * allocator, host<->device copies (direct from pinned memory, staged
 * through two pinned buffers from pageable memory) and pinned host
 * tensors. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/device_type.h"
#include "executor/devices/cuda/gpu_internal.h"

/* Two staging buffers of this size: one fills while the other moves. */
#define S_STAGING_BYTES ((size_t)4 << 20)
/* Pool workers of a GPU device: its kernels only enqueue work, so the pool
 * serves asynchronous continuations, not computation. */
#define S_POOL_THREADS 2

/* ---- errors ------------------------------------------------------------------ */

zf_status_t zf__gpu_error(cudaError_t err, const char *what)
{
    cudaGetLastError();
    zf_code_t code = ZF_INTERNAL;
    if (err == cudaErrorMemoryAllocation) code = ZF_RESOURCE_EXHAUSTED;
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
        err == cudaErrorInvalidDevice)
        code = ZF_UNAVAILABLE;
    return zf_status_new(code, "%s: %s: %s", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

zf_status_t zf__gpu_blas_error(cublasStatus_t st, const char *what)
{
    zf_code_t code = st == CUBLAS_STATUS_ALLOC_FAILED ? ZF_RESOURCE_EXHAUSTED : ZF_INTERNAL;
    return zf_status_new(code, "%s: %s: %s", what, cublasGetStatusName(st),
                         cublasGetStatusString(st));
}

/* ---- discovery --------------------------------------------------------------- */

static pthread_once_t s_count_once = PTHREAD_ONCE_INIT;
static int s_count;
static cudaError_t s_count_err;

static void s_count_devices(void)
{
    s_count_err = cudaGetDeviceCount(&s_count);
    if (s_count_err != cudaSuccess) {
        cudaGetLastError();
        s_count = 0;
    }
}

bool zf_gpu_built_with_cuda(void)
{
    return true;
}

zf_status_t zf_gpu_device_count(int *n)
{
    pthread_once(&s_count_once, s_count_devices);
    *n = s_count;
    if (s_count_err != cudaSuccess)
        return zf_status_new(ZF_UNAVAILABLE, "no GPU visible: %s: %s",
                             cudaGetErrorName(s_count_err), cudaGetErrorString(s_count_err));
    if (s_count == 0) return zf_status_new(ZF_UNAVAILABLE, "no GPU visible: CUDA found no device");
    return ZF_STATUS_OK;
}

/* ---- the device ---------------------------------------------------------------- */

static const zf_device_ops_t s_gpu_ops;

bool zf_device_is_gpu(const zf_device_t *dev)
{
    return dev && dev->ops == &s_gpu_ops;
}

zf__gpu_t *zf__gpu_of(const zf_device_t *dev)
{
    return zf_device_is_gpu(dev) ? dev->impl : NULL;
}

zf_status_t zf__gpu_use(const zf__gpu_t *g)
{
    cudaError_t err = cudaSetDevice(g->ordinal);
    return err == cudaSuccess ? ZF_STATUS_OK : zf__gpu_error(err, "cudaSetDevice");
}

zf_status_t zf__gpu_alloc_tensor(zf__gpu_t *g, zf_dtype_t dtype, const zf_shape_t *shape,
                                 zf_tensor_t **out)
{
    *out = NULL;
    /* Host-only and invalid types: zf_tensor_new makes them or says why not. */
    if (!zf_dtype_valid((int)dtype) || zf_dtype_host_only(dtype) || zf_dtype_size(dtype) == 0)
        return zf_tensor_new(dtype, shape, out);
    int64_t n = 0;
    ZF_TRY(zf_shape_num_elements(shape, &n));
    size_t elem = zf_dtype_size(dtype);
    if ((uint64_t)n > SIZE_MAX / elem)
        return zf_invalid_argument("%s tensor of %" PRId64 " elements is too large",
                                   zf_dtype_name(dtype), n);
    zf_buffer_t *buf = NULL;
    ZF_TRY(zf__gpu_alloc_buffer(g->alloc, (size_t)n * elem, &buf));
    zf_status_t s = zf_tensor_from_buffer(dtype, shape, buf, 0, out);
    zf_buffer_unref(&buf);
    return s;
}

static zf_status_t s_gpu_alloc_tensor(zf_device_t *dev, zf_dtype_t dtype, const zf_shape_t *shape,
                                      zf_tensor_t **out)
{
    *out = NULL;
    zf__gpu_t *g = dev->impl;
    ZF_TRY(zf__gpu_use(g));
    return zf_status_prefix(zf__gpu_alloc_tensor(g, dtype, shape, out), "%s", dev->name_str);
}

/* ---- copies ------------------------------------------------------------------- */

static bool s_is_pinned(const void *p)
{
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return attr.type == cudaMemoryTypeHost;
}

static zf_status_t s_copy_direct(zf__gpu_t *g, void *dst, const void *src, size_t nbytes,
                                 enum cudaMemcpyKind kind)
{
    cudaError_t err = cudaMemcpyAsync(dst, src, nbytes, kind, g->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(g->stream);
    return err == cudaSuccess ? ZF_STATUS_OK : zf__gpu_error(err, "copy");
}

static zf_status_t s_staging_init(zf__gpu_t *g)
{
    for (int i = 0; i < 2; i++) {
        if (g->staging[i]) continue;
        cudaError_t err = cudaHostAlloc(&g->staging[i], S_STAGING_BYTES, cudaHostAllocPortable);
        if (err == cudaSuccess)
            err = cudaEventCreateWithFlags(&g->staged[i], cudaEventDisableTiming);
        if (err != cudaSuccess) {
            if (g->staging[i]) cudaFreeHost(g->staging[i]);
            g->staging[i] = NULL;
            return zf__gpu_error(err, "pinned staging buffers");
        }
    }
    return ZF_STATUS_OK;
}

/* Pageable to device: fill one staging buffer while the other one's copy
 * runs; before refilling a buffer, wait for the copy out of it. */
static cudaError_t s_stage_in(zf__gpu_t *g, char *dst, const char *src, size_t nbytes)
{
    int k = 0;
    for (size_t off = 0; off < nbytes; off += S_STAGING_BYTES, k ^= 1) {
        size_t len = nbytes - off < S_STAGING_BYTES ? nbytes - off : S_STAGING_BYTES;
        cudaError_t err = cudaEventSynchronize(g->staged[k]);
        if (err != cudaSuccess) return err;
        memcpy(g->staging[k], src + off, len);
        err = cudaMemcpyAsync(dst + off, g->staging[k], len, cudaMemcpyHostToDevice, g->stream);
        if (err == cudaSuccess) err = cudaEventRecord(g->staged[k], g->stream);
        if (err != cudaSuccess) return err;
    }
    return cudaStreamSynchronize(g->stream);
}

/* Chunk j of a device-to-pageable copy into staging buffer j % 2. */
static cudaError_t s_stage_out_chunk(zf__gpu_t *g, const char *src, size_t nbytes, size_t j)
{
    int k = (int)(j & 1);
    size_t off = j * S_STAGING_BYTES;
    size_t len = nbytes - off < S_STAGING_BYTES ? nbytes - off : S_STAGING_BYTES;
    cudaError_t err =
        cudaMemcpyAsync(g->staging[k], src + off, len, cudaMemcpyDeviceToHost, g->stream);
    return err == cudaSuccess ? cudaEventRecord(g->staged[k], g->stream) : err;
}

/* Device to pageable: two chunks in flight; as each lands, copy it out
 * and queue the chunk after next into its buffer. */
static cudaError_t s_stage_out(zf__gpu_t *g, char *dst, const char *src, size_t nbytes)
{
    size_t chunks = (nbytes + S_STAGING_BYTES - 1) / S_STAGING_BYTES;
    cudaError_t err = cudaSuccess;
    for (size_t j = 0; j < 2 && j < chunks && err == cudaSuccess; j++)
        err = s_stage_out_chunk(g, src, nbytes, j);
    for (size_t j = 0; j < chunks && err == cudaSuccess; j++) {
        int k = (int)(j & 1);
        size_t off = j * S_STAGING_BYTES;
        size_t len = nbytes - off < S_STAGING_BYTES ? nbytes - off : S_STAGING_BYTES;
        err = cudaEventSynchronize(g->staged[k]);
        if (err != cudaSuccess) break;
        memcpy(dst + off, g->staging[k], len);
        if (j + 2 < chunks) err = s_stage_out_chunk(g, src, nbytes, j + 2);
    }
    return err;
}

static zf_status_t s_copy_staged(zf__gpu_t *g, void *dst, const void *src, size_t nbytes,
                                 bool to_device)
{
    pthread_mutex_lock(&g->staging_lock);
    zf_status_t s = s_staging_init(g);
    if (zf_ok(s)) {
        cudaError_t err =
            to_device ? s_stage_in(g, dst, src, nbytes) : s_stage_out(g, dst, src, nbytes);
        if (err != cudaSuccess) {
            s = zf__gpu_error(err, to_device ? "copy to GPU" : "copy from GPU");
            /* Nothing may still write to or read from the staging buffers. */
            cudaStreamSynchronize(g->stream);
            cudaGetLastError();
        }
    }
    pthread_mutex_unlock(&g->staging_lock);
    return s;
}

static zf_status_t s_gpu_copy(zf_device_t *dev, void *dst, const void *src, size_t nbytes,
                              zf_copy_kind_t kind)
{
    zf__gpu_t *g = dev->impl;
    if (nbytes == 0) return ZF_STATUS_OK;
    ZF_TRY(zf__gpu_use(g));
    zf_status_t s = ZF_STATUS_OK;
    switch (kind) {
    case ZF_COPY_HOST_TO_DEVICE:
        s = s_is_pinned(src) ? s_copy_direct(g, dst, src, nbytes, cudaMemcpyHostToDevice)
                             : s_copy_staged(g, dst, src, nbytes, true);
        break;
    case ZF_COPY_DEVICE_TO_HOST:
        s = s_is_pinned(dst) ? s_copy_direct(g, dst, src, nbytes, cudaMemcpyDeviceToHost)
                             : s_copy_staged(g, dst, src, nbytes, false);
        break;
    case ZF_COPY_DEVICE_TO_DEVICE:
        /* Unified addressing finds the source's GPU, peer copies included. */
        s = s_copy_direct(g, dst, src, nbytes, cudaMemcpyDefault);
        break;
    default: return zf_invalid_argument("%s: unknown copy kind %d", dev->name_str, (int)kind);
    }
    return zf_status_prefix(s, "%s", dev->name_str);
}

static zf_status_t s_gpu_sync(zf_device_t *dev)
{
    zf__gpu_t *g = dev->impl;
    ZF_TRY(zf__gpu_use(g));
    cudaError_t err = cudaStreamSynchronize(g->stream);
    if (err == cudaSuccess) return ZF_STATUS_OK;
    return zf_status_prefix(zf__gpu_error(err, "stream"), "%s", dev->name_str);
}

/* ---- life cycle ------------------------------------------------------------------ */

static void s_gpu_free(zf__gpu_t *g)
{
    if (!g) return;
    if (cudaSetDevice(g->ordinal) == cudaSuccess && g->stream) cudaStreamSynchronize(g->stream);
    if (g->blas) cublasDestroy(g->blas);
    for (int i = 0; i < 2; i++) {
        if (g->staging[i]) cudaFreeHost(g->staging[i]);
        if (g->staged[i]) cudaEventDestroy(g->staged[i]);
    }
    zf__gpu_alloc_close(&g->alloc);
    if (g->stream) cudaStreamDestroy(g->stream);
    cudaGetLastError();
    pthread_mutex_destroy(&g->blas_lock);
    pthread_mutex_destroy(&g->staging_lock);
    free(g);
}

static void s_gpu_destroy(zf_device_t *dev)
{
    s_gpu_free(dev->impl);
    dev->impl = NULL;
}

static const zf_device_ops_t s_gpu_ops = {
    .alloc_tensor = s_gpu_alloc_tensor,
    .copy = s_gpu_copy,
    .sync = s_gpu_sync,
    .remap_gather = zf__gpu_remap_gather,
    .strided_gather = zf__gpu_strided_gather,
    .destroy = s_gpu_destroy,
};

static zf_status_t s_gpu_init(zf__gpu_t *g, int ordinal)
{
    g->ordinal = ordinal;
    ZF_TRY(zf__gpu_use(g));
    cudaError_t err = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) return zf__gpu_error(err, "creating the stream");
    cublasStatus_t st = cublasCreate(&g->blas);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(g->blas, g->stream);
    if (st != CUBLAS_STATUS_SUCCESS) return zf__gpu_blas_error(st, "creating the cuBLAS handle");
    return zf__gpu_alloc_new(ordinal, &g->alloc);
}

static zf_status_t s_gpu_new_state(int ordinal, zf__gpu_t **out)
{
    *out = NULL;
    zf__gpu_t *g = calloc(1, sizeof *g);
    if (!g) return zf_out_of_memory("GPU device");
    if (pthread_mutex_init(&g->blas_lock, NULL) != 0) {
        free(g);
        return zf_internal("GPU device: cannot create a mutex");
    }
    if (pthread_mutex_init(&g->staging_lock, NULL) != 0) {
        pthread_mutex_destroy(&g->blas_lock);
        free(g);
        return zf_internal("GPU device: cannot create a mutex");
    }
    zf_status_t s = s_gpu_init(g, ordinal);
    if (!zf_ok(s)) {
        s_gpu_free(g);
        return s;
    }
    *out = g;
    return ZF_STATUS_OK;
}

static zf_status_t s_check_index(int gpu_index)
{
    int n = 0;
    ZF_TRY(zf_gpu_device_count(&n));
    if (gpu_index < 0 || gpu_index >= n)
        return zf_invalid_argument("GPU index %d is out of range: %d GPU%s visible", gpu_index, n,
                                   n == 1 ? "" : "s");
    return ZF_STATUS_OK;
}

zf_status_t zf_device_gpu_new(const char *name, int gpu_index, zf_device_t **out)
{
    *out = NULL;
    zf_device_t *dev = NULL;
    ZF_TRY(zf_device_new(&s_gpu_ops, name, S_POOL_THREADS, &dev));
    zf_status_t s = ZF_STATUS_OK;
    if (strcmp(dev->type, ZF_DEVICE_TYPE_GPU) != 0)
        s = zf_invalid_argument("a GPU device needs a GPU device name, not '%s'", dev->name_str);
    if (zf_ok(s)) s = s_check_index(gpu_index);
    zf__gpu_t *g = NULL;
    if (zf_ok(s)) s = s_gpu_new_state(gpu_index, &g);
    if (!zf_ok(s)) {
        s = zf_status_prefix(s, "%s", dev->name_str);
        zf_device_destroy(&dev);
        return s;
    }
    dev->impl = g;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
        dev->memory_limit = (int64_t)free_bytes;
    cudaGetLastError();
    *out = dev;
    return ZF_STATUS_OK;
}

zf_status_t zf_gpu_memory_stats(zf_device_t *dev, zf_gpu_memory_stats_t *out)
{
    *out = (zf_gpu_memory_stats_t){0, 0, 0};
    zf__gpu_t *g = zf__gpu_of(dev);
    if (!g) return zf_invalid_argument("%s is not a GPU device", dev ? dev->name_str : "(null)");
    zf__gpu_alloc_stats(g->alloc, out);
    return ZF_STATUS_OK;
}

/* ---- host tensors and tensor copies ----------------------------------------------- */

static void s_free_host(void *data, void *hint)
{
    (void)hint;
    if (cudaFreeHost(data) != cudaSuccess) cudaGetLastError();
}

zf_status_t zf_gpu_alloc_host_tensor(zf_dtype_t dtype, const zf_shape_t *shape, zf_tensor_t **out)
{
    *out = NULL;
    if (!zf_dtype_valid((int)dtype) || zf_dtype_host_only(dtype) || zf_dtype_size(dtype) == 0)
        return zf_tensor_new(dtype, shape, out);
    int64_t n = 0;
    ZF_TRY(zf_shape_num_elements(shape, &n));
    size_t elem = zf_dtype_size(dtype);
    if (n == 0) return zf_tensor_new(dtype, shape, out);
    if ((uint64_t)n > zf_buffer_alloc_limit() / elem)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "pinned %s tensor of %" PRId64 " elements exceeds the %zu-byte limit",
                             zf_dtype_name(dtype), n, zf_buffer_alloc_limit());
    size_t nbytes = (size_t)n * elem;
    void *p = NULL;
    cudaError_t err = cudaHostAlloc(&p, nbytes, cudaHostAllocPortable);
    if (err != cudaSuccess) return zf__gpu_error(err, "pinned host memory");
    memset(p, 0, nbytes);
    zf_buffer_t *buf = NULL;
    zf_status_t s =
        zf_buffer_wrap_memory(p, nbytes, ZF_MEMORY_HOST_PINNED, 0, s_free_host, NULL, &buf);
    if (!zf_ok(s)) {
        cudaFreeHost(p);
        return s;
    }
    s = zf_tensor_from_buffer(dtype, shape, buf, 0, out);
    zf_buffer_unref(&buf);
    return s;
}

/* The copy kind for bytes of t on the way to or from g: the given one for
 * g's own memory, else unified addressing's (peer copies). */
static zf_copy_kind_t s_kind_for(const zf__gpu_t *g, const zf_tensor_t *t, zf_copy_kind_t kind)
{
    if (zf_tensor_memory_kind(t) != ZF_MEMORY_DEVICE) return kind;
    return zf_buffer_device_id(zf_tensor_buffer(t)) == g->ordinal ? kind : ZF_COPY_DEVICE_TO_DEVICE;
}

zf_status_t zf_gpu_tensor_to_host(zf_device_t *dev, const zf_tensor_t *src, zf_tensor_t **out)
{
    *out = NULL;
    zf__gpu_t *g = zf__gpu_of(dev);
    if (!g) return zf_invalid_argument("%s is not a GPU device", dev ? dev->name_str : "(null)");
    if (zf_tensor_memory_kind(src) != ZF_MEMORY_DEVICE) {
        *out = zf_tensor_ref((zf_tensor_t *)src);
        return ZF_STATUS_OK;
    }
    zf_tensor_t *host = NULL;
    ZF_TRY(zf_gpu_alloc_host_tensor(zf_tensor_dtype(src), zf_tensor_shape(src), &host));
    zf_status_t s = s_gpu_copy(dev, zf_tensor_data(host), zf_tensor_data(src),
                               zf_tensor_nbytes(src), s_kind_for(g, src, ZF_COPY_DEVICE_TO_HOST));
    if (!zf_ok(s)) zf_tensor_unref(&host);
    *out = host;
    return s;
}

zf_status_t zf_gpu_tensor_to_device(zf_device_t *dev, const zf_tensor_t *src, zf_tensor_t **out)
{
    *out = NULL;
    zf__gpu_t *g = zf__gpu_of(dev);
    if (!g) return zf_invalid_argument("%s is not a GPU device", dev ? dev->name_str : "(null)");
    bool on_device = zf_tensor_memory_kind(src) == ZF_MEMORY_DEVICE;
    if ((on_device && zf_buffer_device_id(zf_tensor_buffer(src)) == g->ordinal) ||
        zf_dtype_host_only(zf_tensor_dtype(src))) {
        *out = zf_tensor_ref((zf_tensor_t *)src); /* here already, or STRING: host only */
        return ZF_STATUS_OK;
    }
    zf_tensor_t *t = NULL;
    ZF_TRY(s_gpu_alloc_tensor(dev, zf_tensor_dtype(src), zf_tensor_shape(src), &t));
    zf_status_t s = s_gpu_copy(dev, zf_tensor_data(t), zf_tensor_data(src), zf_tensor_nbytes(src),
                               s_kind_for(g, src, ZF_COPY_HOST_TO_DEVICE));
    if (!zf_ok(s)) zf_tensor_unref(&t);
    *out = t;
    return s;
}
