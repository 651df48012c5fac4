/* bench/gpu: zflow's GPU paths against raw CUDA calls on the same device
 * and the same data, in the same run.
 *   MatMul 1024 and 4096 float: the GPU MatMul kernel (output allocated
 *   per call from the device's allocator) against plain cublasSgemm calls;
 *   target (docs/design.md, "Performance targets") zflow >= 0.9x the baseline's throughput.
 *   Host<->device copies of 64 MiB: the device's copy operation from pinned
 *   and from pageable host memory against synchronous cudaMemcpy from
 *   pinned memory; target >= 0.8x (pinned).
 * Without a visible GPU (or without CUDA) it says so and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "executor/devices/gpu.h"
#include "executor/kernels/kernel.h"

#define S_GPU0 "/job:localhost/replica:0/task:0/device:GPU:0"

static void s_check(zf_status_t s, const char *what)
{
    zf_bench_check("gpu", what, s);
}

/* A device tensor of n x n floats in [-1, 1). */
static zf_tensor_t *s_matrix(zf_device_t *dev, int n, unsigned seed)
{
    zf_tensor_t *host = NULL, *d = NULL;
    s_check(zf_tensor_new(ZF_FLOAT, &(zf_shape_t){.rank = 2, .dims = {n, n}}, &host), "matrix");
    float *p = zf_tensor_data(host);
    unsigned x = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < (int64_t)n * n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (float)((double)(x >> 8) / (double)(1u << 23) - 1.0);
    }
    s_check(zf_gpu_tensor_to_device(dev, host, &d), "copy to GPU");
    zf_tensor_unref(&host);
    return d;
}

/* The zflow path: iters MatMul kernel runs, each allocating its output,
 * then one wait for the stream. */
static double s_time_kernel(zf_device_t *dev, const Tensorflow__NodeDef *node, zf_tensor_t *a,
                            zf_tensor_t *b, int iters)
{
    const zf_kernel_t *def = NULL;
    s_check(zf_kernel_find("GPU", node, &def), "MatMul kernel");
    zf_tensor_t *in[2] = {a, b}, *out = NULL;
    zf_kernel_ctx_t ctx = {.node = node,
                           .device = dev,
                           .inputs = in,
                           .num_inputs = 2,
                           .outputs = &out,
                           .num_outputs = 1};
    s_check(dev->ops->sync(dev), "sync");
    double t0 = zf_bench_now();
    for (int i = 0; i < iters; i++) {
        s_check(def->compute(&ctx), "MatMul");
        zf_tensor_unref(&out);
    }
    s_check(dev->ops->sync(dev), "sync");
    return zf_bench_now() - t0;
}

static void s_bench_matmul(zf_device_t *dev, int n, int iters, int reps)
{
    Tensorflow__AttrValue t;
    tensorflow__attr_value__init(&t);
    t.value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    t.type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    Tensorflow__NodeDef__AttrEntry entry;
    tensorflow__node_def__attr_entry__init(&entry);
    entry.key = "T";
    entry.value = &t;
    Tensorflow__NodeDef__AttrEntry *entries[1] = {&entry};
    Tensorflow__NodeDef node;
    tensorflow__node_def__init(&node);
    node.name = "mm";
    node.op = "MatMul";
    node.n_attr = 1;
    node.attr = entries;

    zf_tensor_t *a = s_matrix(dev, n, 1), *b = s_matrix(dev, n, 2), *c = NULL;
    s_check(zf_device_alloc_tensor(dev, ZF_FLOAT, zf_tensor_shape(a), &c), "output");
    double ours = 1e30, base = 1e30, secs = 0;
    (void)s_time_kernel(dev, &node, a, b, 2); /* warm-up: cuBLAS, allocator */
    s_check(zf_gpu_baseline_sgemm(dev, n, n, n, zf_tensor_data(a), zf_tensor_data(b),
                                  zf_tensor_data(c), 2, &secs),
            "cublasSgemm");
    for (int r = 0; r < reps; r++) {
        ours = zf_bench_min(ours, s_time_kernel(dev, &node, a, b, iters));
        s_check(zf_gpu_baseline_sgemm(dev, n, n, n, zf_tensor_data(a), zf_tensor_data(b),
                                      zf_tensor_data(c), iters, &secs),
                "cublasSgemm");
        base = zf_bench_min(base, secs);
    }
    double flops = 2.0 * n * (double)n * n * iters;
    printf("matmul %dx%d float: zflow %.1f GFLOP/s, cublasSgemm %.1f GFLOP/s, ratio %.3f "
           "(target >= 0.9)\n",
           n, n, flops / ours * 1e-9, flops / base * 1e-9, base / ours);
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
    zf_tensor_unref(&c);
}

static double s_time_copy(zf_device_t *dev, void *dst, const void *src, size_t nbytes,
                          zf_copy_kind_t kind, int iters)
{
    double t0 = zf_bench_now();
    for (int i = 0; i < iters; i++) s_check(dev->ops->copy(dev, dst, src, nbytes, kind), "copy");
    return zf_bench_now() - t0;
}

static void s_report_copy(const char *what, size_t nbytes, int iters, double ours, double base)
{
    double gb = (double)nbytes * iters * 1e-9;
    printf("%s %zu MiB: zflow %.2f GB/s, cudaMemcpy (pinned) %.2f GB/s, ratio %.3f\n", what,
           nbytes >> 20, gb / ours, gb / base, base / ours);
}

static void s_bench_copies(zf_device_t *dev, size_t nbytes, int iters, int reps)
{
    zf_shape_t shape = {.rank = 1, .dims = {(int64_t)nbytes}};
    zf_tensor_t *pinned = NULL, *pageable = NULL, *d = NULL;
    s_check(zf_gpu_alloc_host_tensor(ZF_UINT8, &shape, &pinned), "pinned memory");
    s_check(zf_tensor_new(ZF_UINT8, &shape, &pageable), "pageable memory");
    s_check(zf_device_alloc_tensor(dev, ZF_UINT8, &shape, &d), "GPU memory");
    memset(zf_tensor_data(pageable), 0x5a, nbytes);
    void *h = zf_tensor_data(pinned), *p = zf_tensor_data(pageable), *g = zf_tensor_data(d);
    const zf_copy_kind_t kinds[2] = {ZF_COPY_HOST_TO_DEVICE, ZF_COPY_DEVICE_TO_HOST};
    const char *names[2] = {"H2D", "D2H"};
    for (int k = 0; k < 2; k++) {
        bool in = kinds[k] == ZF_COPY_HOST_TO_DEVICE;
        double pin = 1e30, page = 1e30, base = 1e30, secs = 0;
        (void)s_time_copy(dev, in ? g : h, in ? h : g, nbytes, kinds[k], 1);
        (void)s_time_copy(dev, in ? g : p, in ? p : g, nbytes, kinds[k], 1);
        for (int r = 0; r < reps; r++) {
            pin = zf_bench_min(pin,
                               s_time_copy(dev, in ? g : h, in ? h : g, nbytes, kinds[k], iters));
            page = zf_bench_min(page,
                                s_time_copy(dev, in ? g : p, in ? p : g, nbytes, kinds[k], iters));
            s_check(
                zf_gpu_baseline_memcpy(dev, in ? g : h, in ? h : g, nbytes, kinds[k], iters, &secs),
                "cudaMemcpy");
            base = zf_bench_min(base, secs);
        }
        char what[64];
        snprintf(what, sizeof what, "%s from pinned (target >= 0.8)", names[k]);
        s_report_copy(what, nbytes, iters, pin, base);
        snprintf(what, sizeof what, "%s from pageable (staged)", names[k]);
        s_report_copy(what, nbytes, iters, page, base);
    }
    zf_tensor_unref(&pinned);
    zf_tensor_unref(&pageable);
    zf_tensor_unref(&d);
}

int main(void)
{
    int n = 0;
    zf_status_t s = zf_gpu_device_count(&n);
    if (!zf_ok(s)) {
        printf("gpu: %s; nothing to measure\n", zf_status_msg(&s));
        zf_status_clear(&s);
        return 0;
    }
    zf_device_t *dev = NULL;
    s_check(zf_device_gpu_new(S_GPU0, 0, &dev), "GPU device");
    zf_kernels_register_builtin(true);
    int reps = zf_bench_reps(3);
    printf("gpu: %d GPU%s visible; best of %d runs\n", n, n == 1 ? "" : "s", reps);
    s_bench_matmul(dev, 1024, 200, reps);
    s_bench_matmul(dev, 4096, 10, reps);
    s_bench_copies(dev, (size_t)64 << 20, 10, reps);
    zf_device_destroy(&dev);
    return 0;
}
