/* CUDA IPC: exporting a device tensor's memory as a handle another process
 * on the same host opens as a tensor, for GPU-to-GPU transfers between
 * executors without a trip through host memory. */
#include <stdlib.h>
#include <string.h>

#include "executor/devices/cuda/gpu_internal.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(((zf_gpu_ipc_handle_t *)0)->handle),
               "zf_gpu_ipc_handle_t.handle holds a cudaIpcMemHandle_t");

zf_status_t zf_gpu_ipc_export(const zf_tensor_t *t, zf_gpu_ipc_handle_t *out)
{
    memset(out, 0, sizeof *out);
    if (zf_tensor_memory_kind(t) != ZF_MEMORY_DEVICE)
        return zf_invalid_argument("only a tensor in GPU memory can be exported over CUDA IPC");
    const zf_buffer_t *buf = zf_tensor_buffer(t);
    if (zf_buffer_size(buf) == 0)
        return zf_invalid_argument("an empty tensor has no GPU memory to export");
    int id = zf_buffer_device_id(buf);
    cudaIpcMemHandle_t h;
    cudaError_t err = cudaSetDevice(id);
    /* The buffer's data is the start of its cudaMalloc allocation, which is
     * what IPC handles name. */
    if (err == cudaSuccess) err = cudaIpcGetMemHandle(&h, zf_buffer_data(buf));
    if (err != cudaSuccess) return zf__gpu_error(err, "cudaIpcGetMemHandle");
    memcpy(out->handle, &h, sizeof h);
    out->offset = zf_tensor_offset(t);
    out->nbytes = zf_tensor_nbytes(t);
    out->device_id = id;
    return ZF_STATUS_OK;
}

typedef struct {
    void *base;
    int ordinal;
} s_mapping_t;

static void s_ipc_close(void *data, void *hint)
{
    (void)data;
    s_mapping_t *m = hint;
    if (cudaSetDevice(m->ordinal) != cudaSuccess || cudaIpcCloseMemHandle(m->base) != cudaSuccess)
        cudaGetLastError();
    free(m);
}

static zf_status_t s_check_import(const zf_gpu_ipc_handle_t *h, zf_dtype_t dtype,
                                  const zf_shape_t *shape)
{
    if (!zf_dtype_valid((int)dtype) || zf_dtype_size(dtype) == 0)
        return zf_invalid_argument("a %s tensor cannot live in GPU memory", zf_dtype_name(dtype));
    int64_t n = 0;
    ZF_TRY(zf_shape_num_elements(shape, &n));
    if ((uint64_t)n > h->nbytes / zf_dtype_size(dtype) || h->nbytes == 0)
        return zf_invalid_argument("the IPC handle covers %llu bytes, too few for %lld %s elements",
                                   (unsigned long long)h->nbytes, (long long)n,
                                   zf_dtype_name(dtype));
    return ZF_STATUS_OK;
}

zf_status_t zf_gpu_ipc_import(zf_device_t *dev, const zf_gpu_ipc_handle_t *h, zf_dtype_t dtype,
                              const zf_shape_t *shape, zf_tensor_t **out)
{
    *out = NULL;
    zf__gpu_t *g = zf__gpu_of(dev);
    if (!g) return zf_invalid_argument("%s is not a GPU device", dev ? dev->name_str : "(null)");
    ZF_TRY(s_check_import(h, dtype, shape));
    s_mapping_t *m = calloc(1, sizeof *m);
    if (!m) return zf_out_of_memory("IPC mapping");
    m->ordinal = g->ordinal;
    cudaIpcMemHandle_t handle;
    memcpy(&handle, h->handle, sizeof handle);
    cudaError_t err = cudaSetDevice(g->ordinal);
    if (err == cudaSuccess)
        err = cudaIpcOpenMemHandle(&m->base, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        free(m);
        return zf__gpu_error(err, "cudaIpcOpenMemHandle");
    }
    zf_buffer_t *buf = NULL;
    zf_status_t s = zf_buffer_wrap_memory((char *)m->base + h->offset, (size_t)h->nbytes,
                                          ZF_MEMORY_DEVICE, g->ordinal, s_ipc_close, m, &buf);
    if (!zf_ok(s)) {
        s_ipc_close(NULL, m);
        return s;
    }
    s = zf_tensor_from_buffer(dtype, shape, buf, 0, out);
    zf_buffer_unref(&buf);
    return s;
}

zf_status_t zf_gpu_ipc_copy(zf_device_t *dev, const zf_gpu_ipc_handle_t *h, zf_dtype_t dtype,
                            const zf_shape_t *shape, zf_tensor_t **out)
{
    *out = NULL;
    zf_tensor_t *mapped = NULL, *copy = NULL;
    ZF_TRY(zf_gpu_ipc_import(dev, h, dtype, shape, &mapped));
    zf__gpu_t *g = zf__gpu_of(dev);
    zf_status_t s = zf__gpu_alloc_tensor(g, dtype, shape, &copy);
    if (zf_ok(s)) {
        /* Default: unified addressing tells a peer copy from a local one. */
        cudaError_t err = cudaMemcpyAsync(zf_tensor_data(copy), zf_tensor_data(mapped),
                                          zf_tensor_nbytes(copy), cudaMemcpyDefault, g->stream);
        if (err == cudaSuccess) err = cudaStreamSynchronize(g->stream);
        if (err != cudaSuccess) s = zf__gpu_error(err, "copying from a CUDA IPC mapping");
    }
    zf_tensor_unref(&mapped); /* closes the mapping: the copy is done */
    if (!zf_ok(s)) {
        zf_tensor_unref(&copy);
        return s;
    }
    *out = copy;
    return ZF_STATUS_OK;
}

zf_status_t zf_gpu_tensor_download(const zf_tensor_t *src, zf_tensor_t **out)
{
    *out = NULL;
    if (zf_tensor_memory_kind(src) != ZF_MEMORY_DEVICE) {
        *out = zf_tensor_ref((zf_tensor_t *)src);
        return ZF_STATUS_OK;
    }
    zf_tensor_t *t = NULL;
    ZF_TRY(zf_tensor_new(zf_tensor_dtype(src), zf_tensor_shape(src), &t));
    cudaError_t err = cudaSetDevice(zf_buffer_device_id(zf_tensor_buffer(src)));
    if (err == cudaSuccess && zf_tensor_nbytes(t) > 0)
        err = cudaMemcpy(zf_tensor_data(t), zf_tensor_data(src), zf_tensor_nbytes(t),
                         cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) {
        zf_tensor_unref(&t);
        return zf__gpu_error(err, "copying a GPU tensor to the host");
    }
    *out = t;
    return ZF_STATUS_OK;
}
