/* The raw CUDA calls bench/bench_gpu.c measures zflow's GPU paths against:
 * plain cublasSgemm calls and synchronous cudaMemcpy. */
#include <time.h>

#include "executor/devices/cuda/gpu_internal.h"

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

zf_status_t zf_gpu_baseline_sgemm(zf_device_t *dev, int m, int n, int k, const float *a,
                                  const float *b, float *c, int iters, double *seconds)
{
    *seconds = 0;
    zf__gpu_t *g = zf__gpu_of(dev);
    if (!g) return zf_invalid_argument("%s is not a GPU device", dev ? dev->name_str : "(null)");
    ZF_TRY(zf__gpu_use(g));
    cublasHandle_t h = NULL;
    cublasStatus_t st = cublasCreate(&h);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(h, g->stream);
    cudaError_t err = cudaStreamSynchronize(g->stream);
    const float one = 1.0f, zero = 0.0f;
    double t0 = s_now();
    /* Row-major c = a b, as column-major c^T = b^T a^T. */
    for (int i = 0; i < iters && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n);
    if (err == cudaSuccess) err = cudaStreamSynchronize(g->stream);
    *seconds = s_now() - t0;
    if (h) cublasDestroy(h);
    if (st != CUBLAS_STATUS_SUCCESS) return zf__gpu_blas_error(st, "cublasSgemm");
    return err == cudaSuccess ? ZF_STATUS_OK : zf__gpu_error(err, "cublasSgemm");
}

zf_status_t zf_gpu_baseline_memcpy(zf_device_t *dev, void *dst, const void *src, size_t nbytes,
                                   zf_copy_kind_t kind, int iters, double *seconds)
{
    *seconds = 0;
    zf__gpu_t *g = zf__gpu_of(dev);
    if (!g) return zf_invalid_argument("%s is not a GPU device", dev ? dev->name_str : "(null)");
    if (kind != ZF_COPY_HOST_TO_DEVICE && kind != ZF_COPY_DEVICE_TO_HOST)
        return zf_invalid_argument("the memcpy baseline copies between host and device");
    ZF_TRY(zf__gpu_use(g));
    enum cudaMemcpyKind k =
        kind == ZF_COPY_HOST_TO_DEVICE ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    cudaError_t err = cudaSuccess;
    double t0 = s_now();
    for (int i = 0; i < iters && err == cudaSuccess; i++) err = cudaMemcpy(dst, src, nbytes, k);
    *seconds = s_now() - t0;
    return err == cudaSuccess ? ZF_STATUS_OK : zf__gpu_error(err, "cudaMemcpy");
}
