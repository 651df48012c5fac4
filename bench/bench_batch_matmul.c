/* bench/batch_matmul: zflow's CPU BatchMatMulV2 kernel on [8,128,64] x
 * [8,64,128] float against its baseline in the same run: a loop of 8
 * cblas_sgemm calls on the same data into a buffer allocated once.
 *
 * The kernel runs the way the executor runs it: found in the registry,
 * created once, computed with a real CPU device, its output allocated
 * every step; so the loop is also timed into a new output tensor. The
 * sides take turns within each run so that machine noise hits both; each
 * keeps its best time. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "executor/devices/device.h"
#include "executor/kernels/kernel.h"

#define S_B 8
#define S_M 128
#define S_K 64
#define S_N 128

static double s_direct(const float *x, const float *y, float *out)
{
    double t0 = zf_bench_now();
    for (int b = 0; b < S_B; b++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S_M, S_N, S_K, 1.0f,
                    x + (size_t)b * S_M * S_K, S_K, y + (size_t)b * S_K * S_N, S_N, 0.0f,
                    out + (size_t)b * S_M * S_N, S_N);
    return zf_bench_now() - t0;
}

/* The same into a new output tensor, as a step would get it. */
static double s_direct_fresh(const float *x, const float *y)
{
    zf_shape_t shape = {.rank = 3, .dims = {S_B, S_M, S_N}};
    zf_tensor_t *t = NULL;
    double t0 = zf_bench_now();
    zf_bench_check("batch_matmul", "alloc", zf_tensor_new(ZF_FLOAT, &shape, &t));
    s_direct(x, y, zf_tensor_data(t));
    double t1 = zf_bench_now();
    zf_tensor_unref(&t);
    return t1 - t0;
}

int main(void)
{
    int reps = zf_bench_reps(200);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    zf_status_t s = zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 0, &dev);
    zf_bench_check("batch_matmul", "device", s);
    zf_shape_t xs = {.rank = 3, .dims = {S_B, S_M, S_K}}, ys = {.rank = 3, .dims = {S_B, S_K, S_N}};
    zf_tensor_t *x = NULL, *y = NULL, *out = NULL;
    if (!zf_ok(s = zf_tensor_new(ZF_FLOAT, &xs, &x)) ||
        !zf_ok(s = zf_tensor_new(ZF_FLOAT, &ys, &y)))
        zf_bench_check("batch_matmul", "inputs", s);
    zf_bench_fill(zf_tensor_data(x), (size_t)S_B * S_M * S_K, 1);
    zf_bench_fill(zf_tensor_data(y), (size_t)S_B * S_K * S_N, 2);
    size_t nout = (size_t)S_B * S_M * S_N;
    float *direct = aligned_alloc(64, sizeof(float) * nout);
    if (!direct) return 1;

    zf_bench_node_t n;
    zf_bench_node_init(&n, "bmm", "BatchMatMulV2", 2);
    zf_bench_node_float_type(&n, "T");
    const zf_kernel_t *def = NULL;
    void *state = NULL;
    zf_bench_check("batch_matmul", "find", zf_kernel_find("CPU", &n.node, &def));
    if (def->create) zf_bench_check("batch_matmul", "create", def->create(&n.node, &state));
    zf_tensor_t *inputs[2] = {x, y};

    double best_kernel = 1e30, best_direct = 1e30, best_fresh = 1e30;
    for (int r = -1; r < reps; r++) { /* r = -1 warms up both */
        double t_direct = 0, t_kernel = 0;
        double t_fresh = s_direct_fresh(zf_tensor_data(x), zf_tensor_data(y));
        for (int side = 0; side < 2; side++) {
            if ((side + r) % 2 == 0) {
                t_direct = s_direct(zf_tensor_data(x), zf_tensor_data(y), direct);
                continue;
            }
            zf_tensor_unref(&out);
            zf_kernel_ctx_t ctx = {.node = &n.node,
                                   .state = state,
                                   .device = dev,
                                   .inputs = inputs,
                                   .num_inputs = 2,
                                   .outputs = &out,
                                   .num_outputs = 1};
            double t0 = zf_bench_now();
            if (!zf_ok(s = def->compute(&ctx))) zf_bench_check("batch_matmul", "compute", s);
            t_kernel = zf_bench_now() - t0;
        }
        if (r >= 0) {
            best_direct = zf_bench_min(best_direct, t_direct);
            best_fresh = zf_bench_min(best_fresh, t_fresh);
            best_kernel = zf_bench_min(best_kernel, t_kernel);
        }
    }
    if (memcmp(zf_tensor_data(out), direct, sizeof(float) * nout) != 0) {
        fprintf(stderr, "batch_matmul: kernel and direct sgemm results differ\n");
        return 1;
    }
    double flop = 2.0 * S_B * S_M * S_N * S_K;
    printf("batch_matmul: [%d,%d,%d] x [%d,%d,%d] float, best of %d runs (results identical)\n",
           S_B, S_M, S_K, S_B, S_K, S_N, reps);
    printf("%-34s %10s %10s\n", "", "ms", "GFLOP/s");
    printf("%-34s %10.4f %10.1f\n", "direct cblas_sgemm loop", best_direct * 1e3,
           flop / best_direct * 1e-9);
    printf("%-34s %10.4f %10.1f\n", "the loop into a new output tensor", best_fresh * 1e3,
           flop / best_fresh * 1e-9);
    printf("%-34s %10.4f %10.1f\n", "zflow BatchMatMulV2 kernel", best_kernel * 1e3,
           flop / best_kernel * 1e-9);
    printf("kernel/direct throughput: %.3fx; kernel/(loop into a new tensor): %.3fx\n",
           best_direct / best_kernel, best_fresh / best_kernel);

    zf_tensor_unref(&out);
    if (def->destroy) def->destroy(state);
    free(direct);
    zf_tensor_unref(&x);
    zf_tensor_unref(&y);
    zf_device_destroy(&dev);
    return 0;
}
