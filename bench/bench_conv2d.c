/* bench/conv2d: zflow's CPU Conv2D kernel on a 1x224x224x3 float image
 * with 64 3x3 filters (SAME, stride 1): GFLOP/s, best of N runs.
 *
 * For scale, the same run times the kernel's GEMM alone — one cblas_sgemm
 * of the prebuilt [224*224, 27] patch matrix by the [27, 64] filter — so
 * the ratio shows what building patches costs on top of the multiply. The
 * kernel runs with a real CPU device, found and created through the
 * registry as the executor does. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "executor/devices/device.h"
#include "executor/kernels/kernel.h"

#define S_H  224
#define S_W  224
#define S_C  3
#define S_K  3
#define S_OC 64

/* A Conv2D NodeDef (T=float, strides 1, SAME) built on the stack. */
typedef struct {
    Tensorflow__NodeDef node;
    Tensorflow__NodeDef__AttrEntry entries[3], *entry_ptrs[3];
    Tensorflow__AttrValue values[3];
    Tensorflow__AttrValue__ListValue strides;
    int64_t stride_vals[4];
    char *inputs[2];
} s_node_t;

static void s_node_init(s_node_t *n)
{
    tensorflow__node_def__init(&n->node);
    static char *const keys[3] = {"T", "strides", "padding"};
    for (int i = 0; i < 3; i++) {
        tensorflow__node_def__attr_entry__init(&n->entries[i]);
        tensorflow__attr_value__init(&n->values[i]);
        n->entries[i].key = keys[i];
        n->entries[i].value = &n->values[i];
        n->entry_ptrs[i] = &n->entries[i];
    }
    n->values[0].value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    n->values[0].type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tensorflow__attr_value__list_value__init(&n->strides);
    for (int i = 0; i < 4; i++) n->stride_vals[i] = 1;
    n->strides.i = n->stride_vals;
    n->strides.n_i = 4;
    n->values[1].value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    n->values[1].list = &n->strides;
    n->values[2].value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    n->values[2].s.data = (uint8_t *)"SAME";
    n->values[2].s.len = 4;
    n->inputs[0] = "image";
    n->inputs[1] = "filter";
    n->node.name = "conv";
    n->node.op = "Conv2D";
    n->node.input = n->inputs;
    n->node.n_input = 2;
    n->node.attr = n->entry_ptrs;
    n->node.n_attr = 3;
}

/* The patch matrix of a SAME 3x3 stride-1 convolution (pad 1 each side). */
static void s_patches(const float *img, float *p)
{
    for (int y = 0; y < S_H; y++)
        for (int x = 0; x < S_W; x++)
            for (int ky = 0; ky < S_K; ky++)
                for (int kx = 0; kx < S_K; kx++)
                    for (int c = 0; c < S_C; c++) {
                        int iy = y + ky - 1, ix = x + kx - 1;
                        bool in = iy >= 0 && iy < S_H && ix >= 0 && ix < S_W;
                        *p++ = in ? img[(iy * S_W + ix) * S_C + c] : 0.0f;
                    }
}

int main(void)
{
    int reps = zf_bench_reps(20);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    zf_status_t s = zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 0, &dev);
    zf_bench_check("conv2d", "device", s);
    zf_shape_t ishape = {.rank = 4, .dims = {1, S_H, S_W, S_C}};
    zf_shape_t fshape = {.rank = 4, .dims = {S_K, S_K, S_C, S_OC}};
    zf_tensor_t *img = NULL, *filt = NULL, *out = NULL;
    if (!zf_ok(s = zf_tensor_new(ZF_FLOAT, &ishape, &img)) ||
        !zf_ok(s = zf_tensor_new(ZF_FLOAT, &fshape, &filt)))
        zf_bench_check("conv2d", "inputs", s);
    zf_bench_fill(zf_tensor_data(img), (size_t)S_H * S_W * S_C, 1);
    zf_bench_fill(zf_tensor_data(filt), (size_t)S_K * S_K * S_C * S_OC, 2);
    const int m = S_H * S_W, k = S_K * S_K * S_C;
    float *patches = malloc(sizeof(float) * (size_t)m * (size_t)k);
    float *gemm_out = malloc(sizeof(float) * (size_t)m * S_OC);
    if (!patches || !gemm_out) return 1;
    s_patches(zf_tensor_data(img), patches);

    s_node_t n;
    s_node_init(&n);
    const zf_kernel_t *def = NULL;
    void *state = NULL;
    zf_bench_check("conv2d", "find", zf_kernel_find("CPU", &n.node, &def));
    if (def->create) zf_bench_check("conv2d", "create", def->create(&n.node, &state));
    zf_tensor_t *inputs[2] = {img, filt};

    double best_kernel = 1e30, best_gemm = 1e30;
    for (int r = -1; r < reps; r++) { /* r = -1 warms up both */
        double t0 = zf_bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, S_OC, k, 1.0f, patches, k,
                    zf_tensor_data(filt), S_OC, 0.0f, gemm_out, S_OC);
        double t1 = zf_bench_now();
        zf_tensor_unref(&out);
        zf_kernel_ctx_t ctx = {.node = &n.node,
                               .state = state,
                               .device = dev,
                               .inputs = inputs,
                               .num_inputs = 2,
                               .outputs = &out,
                               .num_outputs = 1};
        if (!zf_ok(s = def->compute(&ctx))) zf_bench_check("conv2d", "compute", s);
        double t2 = zf_bench_now();
        if (r >= 0) {
            best_gemm = zf_bench_min(best_gemm, t1 - t0);
            best_kernel = zf_bench_min(best_kernel, t2 - t1);
        }
    }
    double maxdiff = 0;
    for (size_t i = 0; i < (size_t)m * S_OC; i++)
        maxdiff = fmax(maxdiff, fabs((double)((float *)zf_tensor_data(out))[i] - gemm_out[i]));
    double flop = 2.0 * m * S_OC * k;
    printf("conv2d: 1x%dx%dx%d input, %d %dx%d filters, SAME, best of %d runs\n", S_H, S_W, S_C,
           S_OC, S_K, S_K, reps);
    printf("%-32s %10s %10s\n", "", "ms", "GFLOP/s");
    printf("%-32s %10.3f %10.2f\n", "zflow Conv2D kernel", best_kernel * 1e3,
           flop / best_kernel * 1e-9);
    printf("%-32s %10.3f %10.2f\n", "its GEMM alone (prebuilt patches)", best_gemm * 1e3,
           flop / best_gemm * 1e-9);
    printf("kernel/GEMM-alone throughput: %.3fx; max |difference| %.3g\n", best_gemm / best_kernel,
           maxdiff);

    zf_tensor_unref(&out);
    if (def->destroy) def->destroy(state);
    free(patches);
    free(gemm_out);
    zf_tensor_unref(&img);
    zf_tensor_unref(&filt);
    zf_device_destroy(&dev);
    return maxdiff < 1e-4 ? 0 : 1;
}
