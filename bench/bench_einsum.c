/* bench/einsum: zflow's CPU Einsum kernel on the three-operand chain
 * "ij,jk,kl->il" in float against its baseline in the same run: two
 * cblas_sgemm calls on the same data, the intermediate product and the
 * output in buffers allocated once.
 *
 * Two shapes: square 256x256 operands, where either order costs the same,
 * and [1024,32] x [32,1024] x [1024,32], where multiplying the last two
 * first costs 32x less than going left to right. The baseline multiplies
 * in the cheaper order; the left-to-right pair of calls is timed too.
 *
 * The kernel runs the way the executor runs it: found in the registry,
 * created once, computed with a real CPU device, its output allocated every
 * step; so the baseline is also timed into a new intermediate buffer and a
 * new output tensor. The sides take turns within each run so that machine
 * noise hits both; each keeps its best time. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "executor/devices/device.h"
#include "executor/kernels/kernel.h"

typedef struct {
    int i, j, k, l;
} s_dims_t;

static void s_sgemm(int m, int n, int k, const float *a, const float *b, float *c)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

/* out = (a b) c, or a (b c) with right_first; tmp holds the pair's product. */
static double s_direct(s_dims_t d, bool right_first, const float *a, const float *b, const float *c,
                       float *tmp, float *out)
{
    double t0 = zf_bench_now();
    if (right_first) {
        s_sgemm(d.j, d.l, d.k, b, c, tmp);
        s_sgemm(d.i, d.l, d.j, a, tmp, out);
    } else {
        s_sgemm(d.i, d.k, d.j, a, b, tmp);
        s_sgemm(d.i, d.l, d.k, tmp, c, out);
    }
    return zf_bench_now() - t0;
}

/* The same into a new intermediate and a new output tensor, as a step
 * would get them. */
static double s_direct_fresh(s_dims_t d, bool right_first, const float *a, const float *b,
                             const float *c)
{
    zf_shape_t shape = {.rank = 2, .dims = {d.i, d.l}};
    zf_tensor_t *t = NULL;
    double t0 = zf_bench_now();
    float *tmp = malloc(sizeof(float) * (right_first ? (size_t)d.j * d.l : (size_t)d.i * d.k));
    zf_bench_check("einsum", "alloc", zf_tensor_new(ZF_FLOAT, &shape, &t));
    if (!tmp) exit(1);
    s_direct(d, right_first, a, b, c, tmp, zf_tensor_data(t));
    free(tmp);
    double t1 = zf_bench_now();
    zf_tensor_unref(&t);
    return t1 - t0;
}

static zf_tensor_t *s_input(int rows, int cols, uint32_t seed)
{
    zf_shape_t shape = {.rank = 2, .dims = {rows, cols}};
    zf_tensor_t *t = NULL;
    zf_bench_check("einsum", "inputs", zf_tensor_new(ZF_FLOAT, &shape, &t));
    zf_bench_fill(zf_tensor_data(t), (size_t)rows * cols, seed);
    return t;
}

static void s_case(zf_device_t *dev, s_dims_t d, int reps)
{
    bool right_first = (double)d.j * d.l * (d.k + d.i) < (double)d.i * d.k * (d.j + d.l);
    zf_tensor_t *in[3] = {s_input(d.i, d.j, 1), s_input(d.j, d.k, 2), s_input(d.k, d.l, 3)};
    const float *a = zf_tensor_data(in[0]), *b = zf_tensor_data(in[1]), *c = zf_tensor_data(in[2]);
    size_t nout = (size_t)d.i * d.l, ntmp = (size_t)d.i * d.k + (size_t)d.j * d.l;
    float *direct = malloc(sizeof(float) * nout), *other = malloc(sizeof(float) * nout);
    float *tmp = malloc(sizeof(float) * ntmp);
    if (!direct || !other || !tmp) exit(1);

    zf_bench_node_t n;
    zf_bench_node_init(&n, "es", "Einsum", 3);
    zf_bench_node_float_type(&n, "T");
    zf_bench_node_int(&n, "N", 3);
    zf_bench_node_string(&n, "equation", "ij,jk,kl->il");
    const zf_kernel_t *def = NULL;
    void *state = NULL;
    zf_bench_check("einsum", "find", zf_kernel_find("CPU", &n.node, &def));
    if (def->create) zf_bench_check("einsum", "create", def->create(&n.node, &state));
    zf_tensor_t *out = NULL;

    double best_kernel = 1e30, best_direct = 1e30, best_fresh = 1e30, best_other = 1e30;
    for (int r = -1; r < reps; r++) { /* r = -1 warms up every side */
        double t_direct = 0, t_kernel = 0;
        double t_fresh = s_direct_fresh(d, right_first, a, b, c);
        double t_other = s_direct(d, !right_first, a, b, c, tmp, other);
        for (int side = 0; side < 2; side++) {
            if ((side + r) % 2 == 0) {
                t_direct = s_direct(d, right_first, a, b, c, tmp, direct);
                continue;
            }
            zf_tensor_unref(&out);
            zf_kernel_ctx_t ctx = {.node = &n.node,
                                   .state = state,
                                   .device = dev,
                                   .inputs = in,
                                   .num_inputs = 3,
                                   .outputs = &out,
                                   .num_outputs = 1};
            double t0 = zf_bench_now();
            zf_bench_check("einsum", "compute", def->compute(&ctx));
            t_kernel = zf_bench_now() - t0;
        }
        if (r >= 0) {
            best_direct = zf_bench_min(best_direct, t_direct);
            best_fresh = zf_bench_min(best_fresh, t_fresh);
            best_other = zf_bench_min(best_other, t_other);
            best_kernel = zf_bench_min(best_kernel, t_kernel);
        }
    }
    double max_diff = 0;
    const float *got = zf_tensor_data(out);
    for (size_t e = 0; e < nout; e++) max_diff = fmax(max_diff, fabs((double)got[e] - direct[e]));
    if (max_diff > 1e-3) {
        fprintf(stderr, "einsum: kernel and direct sgemm results differ by %g\n", max_diff);
        exit(1);
    }
    double flop = right_first ? 2.0 * d.j * d.l * (d.k + d.i) : 2.0 * d.i * d.k * (d.j + d.l);
    printf("einsum: ij,jk,kl->il on [%d,%d] x [%d,%d] x [%d,%d] float, best of %d runs "
           "(results %s)\n",
           d.i, d.j, d.j, d.k, d.k, d.l, reps, max_diff == 0 ? "identical" : "within 1e-3");
    printf("%-42s %10s %10s\n", "", "ms", "GFLOP/s");
    printf("%-42s %10.4f %10.1f\n",
           right_first ? "two cblas_sgemm, a (b c)" : "two cblas_sgemm, (a b) c", best_direct * 1e3,
           flop / best_direct * 1e-9);
    printf("%-42s %10.4f %10.1f\n", "the same into a new product and output", best_fresh * 1e3,
           flop / best_fresh * 1e-9);
    printf("%-42s %10.4f\n",
           right_first ? "two cblas_sgemm, (a b) c (costlier order)" : "two cblas_sgemm, a (b c)",
           best_other * 1e3);
    printf("%-42s %10.4f %10.1f\n", "zflow Einsum kernel", best_kernel * 1e3,
           flop / best_kernel * 1e-9);
    printf("kernel/direct throughput: %.3fx; kernel/(into a new product and output): %.3fx\n\n",
           best_direct / best_kernel, best_fresh / best_kernel);

    zf_tensor_unref(&out);
    if (def->destroy) def->destroy(state);
    free(direct);
    free(other);
    free(tmp);
    for (int i = 0; i < 3; i++) zf_tensor_unref(&in[i]);
}

int main(void)
{
    int reps = zf_bench_reps(100);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    zf_bench_check("einsum", "device",
                   zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 0, &dev));
    s_case(dev, (s_dims_t){256, 256, 256, 256}, reps);
    s_case(dev, (s_dims_t){1024, 32, 1024, 32}, reps);
    zf_device_destroy(&dev);
    return 0;
}
