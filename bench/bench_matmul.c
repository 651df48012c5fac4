/* bench/matmul: zflow's CPU MatMul kernel against a direct cblas_sgemm on
 * the same 1024x1024 float data, in the same run.
 *
 * The kernel runs the way the executor runs it: found in the registry,
 * created once, computed with a real CPU device (its output allocated on
 * the device every step). Runs alternate between the two so that machine
 * noise hits both; each side keeps its best time.
 * Target (docs/design.md, "Performance targets"): kernel throughput >= 0.9x direct sgemm. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "executor/devices/device.h"
#include "executor/kernels/kernel.h"

#define S_N 1024

/* A MatMul NodeDef with T=float and no transposes, built on the stack. */
typedef struct {
    Tensorflow__NodeDef node;
    Tensorflow__NodeDef__AttrEntry entry, *entries[1];
    Tensorflow__AttrValue value;
    char *inputs[2];
} s_node_t;

static void s_node_init(s_node_t *n)
{
    tensorflow__node_def__init(&n->node);
    tensorflow__node_def__attr_entry__init(&n->entry);
    tensorflow__attr_value__init(&n->value);
    n->value.value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    n->value.type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    n->entry.key = "T";
    n->entry.value = &n->value;
    n->entries[0] = &n->entry;
    n->inputs[0] = "a";
    n->inputs[1] = "b";
    n->node.name = "mm";
    n->node.op = "MatMul";
    n->node.input = n->inputs;
    n->node.n_input = 2;
    n->node.attr = n->entries;
    n->node.n_attr = 1;
}

int main(void)
{
    int reps = zf_bench_reps(20);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    zf_status_t s = zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 0, &dev);
    zf_bench_check("matmul", "device", s);
    zf_shape_t shape = {.rank = 2, .dims = {S_N, S_N}};
    zf_tensor_t *a = NULL, *b = NULL;
    if (!zf_ok(s = zf_tensor_new(ZF_FLOAT, &shape, &a)) ||
        !zf_ok(s = zf_tensor_new(ZF_FLOAT, &shape, &b)))
        zf_bench_check("matmul", "inputs", s);
    zf_bench_fill(zf_tensor_data(a), (size_t)S_N * S_N, 1);
    zf_bench_fill(zf_tensor_data(b), (size_t)S_N * S_N, 2);
    float *direct = aligned_alloc(64, sizeof(float) * S_N * S_N);
    if (!direct) return 1;

    s_node_t n;
    s_node_init(&n);
    const zf_kernel_t *def = NULL;
    void *state = NULL;
    zf_bench_check("matmul", "find", zf_kernel_find("CPU", &n.node, &def));
    if (def->create) zf_bench_check("matmul", "create", def->create(&n.node, &state));
    zf_tensor_t *inputs[2] = {a, b}, *out = NULL;

    double best_kernel = 1e30, best_direct = 1e30;
    /* r = -1 warms up both; the order alternates so neither side always
     * runs right after the other's threads. */
    for (int r = -1; r < reps; r++) {
        double t_direct = 0, t_kernel = 0;
        for (int side = 0; side < 2; side++) {
            double t0 = zf_bench_now();
            if ((side + r) % 2 == 0) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S_N, S_N, S_N, 1.0f,
                            zf_tensor_data(a), S_N, zf_tensor_data(b), S_N, 0.0f, direct, S_N);
                t_direct = zf_bench_now() - t0;
            } else {
                zf_tensor_unref(&out);
                zf_kernel_ctx_t ctx = {.node = &n.node,
                                       .state = state,
                                       .device = dev,
                                       .inputs = inputs,
                                       .num_inputs = 2,
                                       .outputs = &out,
                                       .num_outputs = 1};
                if (!zf_ok(s = def->compute(&ctx))) zf_bench_check("matmul", "compute", s);
                t_kernel = zf_bench_now() - t0;
            }
        }
        if (r >= 0) {
            best_direct = zf_bench_min(best_direct, t_direct);
            best_kernel = zf_bench_min(best_kernel, t_kernel);
        }
    }
    if (memcmp(zf_tensor_data(out), direct, sizeof(float) * S_N * S_N) != 0) {
        fprintf(stderr, "matmul: kernel and direct sgemm results differ\n");
        return 1;
    }
    double flop = 2.0 * S_N * S_N * S_N;
    printf("matmul: %dx%d float, best of %d runs (results identical)\n", S_N, S_N, reps);
    printf("%-22s %10s %10s\n", "", "ms", "GFLOP/s");
    printf("%-22s %10.2f %10.1f\n", "direct cblas_sgemm", best_direct * 1e3,
           flop / best_direct * 1e-9);
    printf("%-22s %10.2f %10.1f\n", "zflow MatMul kernel", best_kernel * 1e3,
           flop / best_kernel * 1e-9);
    printf("kernel/direct throughput: %.3fx (target >= 0.9)\n", best_direct / best_kernel);

    zf_tensor_unref(&out);
    if (def->destroy) def->destroy(state);
    free(direct);
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
    zf_device_destroy(&dev);
    return 0;
}
