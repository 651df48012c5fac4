/* The GPU interface (executor/devices/gpu.h) in builds without CUDA: no devices, no
 * kernels, and every call that would need CUDA says why it cannot. */
#include "executor/devices/gpu.h"

#define S_NO_CUDA "zflow was built without CUDA"

static zf_status_t s_no_cuda(const char *what)
{
    return zf_status_new(ZF_UNAVAILABLE, "%s: " S_NO_CUDA, what);
}

bool zf_gpu_built_with_cuda(void)
{
    return false;
}

zf_status_t zf_gpu_device_count(int *n)
{
    *n = 0;
    return zf_status_new(ZF_UNAVAILABLE, S_NO_CUDA);
}

zf_status_t zf_device_gpu_new(const char *name, int gpu_index, zf_device_t **out)
{
    (void)gpu_index;
    *out = NULL;
    return s_no_cuda(name ? name : "GPU device");
}

bool zf_device_is_gpu(const zf_device_t *dev)
{
    (void)dev;
    return false;
}

zf_status_t zf_gpu_alloc_host_tensor(zf_dtype_t dtype, const zf_shape_t *shape, zf_tensor_t **out)
{
    (void)dtype;
    (void)shape;
    *out = NULL;
    return s_no_cuda("pinned host memory");
}

zf_status_t zf_gpu_tensor_to_host(zf_device_t *dev, const zf_tensor_t *src, zf_tensor_t **out)
{
    (void)dev;
    (void)src;
    *out = NULL;
    return s_no_cuda("copy to host");
}

zf_status_t zf_gpu_tensor_to_device(zf_device_t *dev, const zf_tensor_t *src, zf_tensor_t **out)
{
    (void)dev;
    (void)src;
    *out = NULL;
    return s_no_cuda("copy to GPU");
}

zf_status_t zf_gpu_memory_stats(zf_device_t *dev, zf_gpu_memory_stats_t *out)
{
    (void)dev;
    *out = (zf_gpu_memory_stats_t){0, 0, 0};
    return s_no_cuda("GPU memory stats");
}

/* No GPU devices can exist, so the placer never needs GPU kernels. */
zf_status_t zf_gpu_register_kernels(void)
{
    return ZF_STATUS_OK;
}

zf_status_t zf_gpu_ipc_export(const zf_tensor_t *t, zf_gpu_ipc_handle_t *out)
{
    (void)t;
    *out = (zf_gpu_ipc_handle_t){{0}, 0, 0, 0};
    return s_no_cuda("CUDA IPC export");
}

zf_status_t zf_gpu_ipc_import(zf_device_t *dev, const zf_gpu_ipc_handle_t *h, zf_dtype_t dtype,
                              const zf_shape_t *shape, zf_tensor_t **out)
{
    (void)dev;
    (void)h;
    (void)dtype;
    (void)shape;
    *out = NULL;
    return s_no_cuda("CUDA IPC import");
}

zf_status_t zf_gpu_ipc_copy(zf_device_t *dev, const zf_gpu_ipc_handle_t *h, zf_dtype_t dtype,
                            const zf_shape_t *shape, zf_tensor_t **out)
{
    (void)dev;
    (void)h;
    (void)dtype;
    (void)shape;
    *out = NULL;
    return s_no_cuda("CUDA IPC copy");
}

zf_status_t zf_gpu_tensor_download(const zf_tensor_t *src, zf_tensor_t **out)
{
    *out = NULL;
    if (zf_tensor_memory_kind(src) != ZF_MEMORY_DEVICE) {
        *out = zf_tensor_ref((zf_tensor_t *)src);
        return ZF_STATUS_OK;
    }
    return s_no_cuda("copy to host");
}

zf_status_t zf_gpu_baseline_sgemm(zf_device_t *dev, int m, int n, int k, const float *a,
                                  const float *b, float *c, int iters, double *seconds)
{
    (void)dev;
    (void)m;
    (void)n;
    (void)k;
    (void)a;
    (void)b;
    (void)c;
    (void)iters;
    *seconds = 0;
    return s_no_cuda("cublasSgemm");
}

zf_status_t zf_gpu_baseline_memcpy(zf_device_t *dev, void *dst, const void *src, size_t nbytes,
                                   zf_copy_kind_t kind, int iters, double *seconds)
{
    (void)dev;
    (void)dst;
    (void)src;
    (void)nbytes;
    (void)kind;
    (void)iters;
    *seconds = 0;
    return s_no_cuda("cudaMemcpy");
}
