/* bench/batchnorm: zflow's CPU FusedBatchNormV3 kernel in inference
 * (is_training false: the given mean and variance) on a 16x28x28x64 NHWC
 * float input, against its baseline in the same run: oneDNN's batch
 * normalisation primitive called directly (global statistics, scale and
 * shift) on the same NHWC data, into an output buffer allocated once and,
 * as a step would, into a new output tensor.
 *
 * The kernel runs the way the executor runs it: found in the registry,
 * created once (its primitive is built on the warm-up run and reused),
 * computed with a real CPU device, its outputs allocated every step. The
 * sides take turns within each run so that machine noise hits both; each
 * keeps its best time. */
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "executor/devices/device.h"
#include "executor/kernels/kernel.h"

#define S_N 16
#define S_H 28
#define S_W 28
#define S_C 64

static void s_dnnl_check(dnnl_status_t st, const char *what)
{
    if (st == dnnl_success) return;
    fprintf(stderr, "batchnorm: oneDNN %s failed (status %d)\n", what, (int)st);
    exit(1);
}

/* oneDNN's primitive over x, the statistics and scale/shift (c floats
 * each), writing out. */
typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_t bn;
    dnnl_memory_desc_t data_md;
    dnnl_memory_t src, dst, mean, var, scale, shift;
} s_direct_t;

static void s_direct_init(s_direct_t *d, float *const *in, float *out)
{
    s_dnnl_check(dnnl_engine_create(&d->eng, dnnl_cpu, 0), "engine");
    s_dnnl_check(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags), "stream");
    dnnl_dims_t dims = {S_N, S_C, S_H, S_W}, cdims = {S_C};
    dnnl_memory_desc_t cmd;
    s_dnnl_check(dnnl_memory_desc_init_by_tag(&d->data_md, 4, dims, dnnl_f32, dnnl_nhwc), "md");
    s_dnnl_check(dnnl_memory_desc_init_by_tag(&cmd, 1, cdims, dnnl_f32, dnnl_a), "md");
    dnnl_batch_normalization_desc_t bd;
    s_dnnl_check(dnnl_batch_normalization_forward_desc_init(
                     &bd, dnnl_forward_inference, &d->data_md, 0.001f,
                     dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift),
                 "batch normalization desc");
    dnnl_primitive_desc_t pd = NULL;
    s_dnnl_check(dnnl_primitive_desc_create(&pd, &bd, NULL, d->eng, NULL), "primitive desc");
    s_dnnl_check(dnnl_primitive_create(&d->bn, pd), "primitive");
    dnnl_primitive_desc_destroy(pd);
    s_dnnl_check(dnnl_memory_create(&d->src, &d->data_md, d->eng, in[0]), "memory");
    s_dnnl_check(dnnl_memory_create(&d->scale, &cmd, d->eng, in[1]), "memory");
    s_dnnl_check(dnnl_memory_create(&d->shift, &cmd, d->eng, in[2]), "memory");
    s_dnnl_check(dnnl_memory_create(&d->mean, &cmd, d->eng, in[3]), "memory");
    s_dnnl_check(dnnl_memory_create(&d->var, &cmd, d->eng, in[4]), "memory");
    s_dnnl_check(dnnl_memory_create(&d->dst, &d->data_md, d->eng, out), "memory");
}

static double s_direct_run(s_direct_t *d, dnnl_memory_t dst)
{
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, d->src},     {DNNL_ARG_DST, dst},
                              {DNNL_ARG_MEAN, d->mean},   {DNNL_ARG_VARIANCE, d->var},
                              {DNNL_ARG_SCALE, d->scale}, {DNNL_ARG_SHIFT, d->shift}};
    double t0 = zf_bench_now();
    s_dnnl_check(dnnl_primitive_execute(d->bn, d->stream, 6, args), "execute");
    s_dnnl_check(dnnl_stream_wait(d->stream), "wait");
    return zf_bench_now() - t0;
}

/* The same into a new output tensor, as a kernel gets it (uninitialised:
 * the primitive writes all of it). */
static double s_direct_fresh_run(s_direct_t *d)
{
    zf_shape_t shape = {.rank = 4, .dims = {S_N, S_H, S_W, S_C}};
    zf_tensor_t *t = NULL;
    dnnl_memory_t dst = NULL;
    double t0 = zf_bench_now();
    zf_bench_check("batchnorm", "alloc", zf_tensor_new_uninit(ZF_FLOAT, &shape, &t));
    s_dnnl_check(dnnl_memory_create(&dst, &d->data_md, d->eng, zf_tensor_data(t)), "memory");
    s_direct_run(d, dst);
    double t1 = zf_bench_now();
    dnnl_memory_destroy(dst);
    zf_tensor_unref(&t);
    return t1 - t0;
}

static void s_direct_fini(s_direct_t *d)
{
    dnnl_memory_t *mems[] = {&d->src, &d->dst, &d->mean, &d->var, &d->scale, &d->shift};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) dnnl_memory_destroy(*mems[i]);
    dnnl_primitive_destroy(d->bn);
    dnnl_stream_destroy(d->stream);
    dnnl_engine_destroy(d->eng);
}

int main(void)
{
    int reps = zf_bench_reps(100);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    zf_status_t s = zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 0, &dev);
    zf_bench_check("batchnorm", "device", s);
    zf_shape_t xs = {.rank = 4, .dims = {S_N, S_H, S_W, S_C}}, cs = {.rank = 1, .dims = {S_C}};
    zf_tensor_t *in[5] = {NULL};
    float *data[5];
    for (int i = 0; i < 5; i++) {
        zf_bench_check("batchnorm", "inputs", zf_tensor_new(ZF_FLOAT, i ? &cs : &xs, &in[i]));
        data[i] = zf_tensor_data(in[i]);
        zf_bench_fill(data[i], (size_t)zf_tensor_num_elements(in[i]), (uint32_t)i + 1);
    }
    for (int c = 0; c < S_C; c++) data[4][c] += 1.0f; /* variances in [0.5, 1.5) */
    size_t nx = (size_t)S_N * S_H * S_W * S_C;
    float *base_out = aligned_alloc(64, sizeof(float) * nx);
    if (!base_out) return 1;
    s_direct_t direct;
    s_direct_init(&direct, data, base_out);

    zf_bench_node_t n;
    zf_bench_node_init(&n, "bn", "FusedBatchNormV3", 5);
    zf_bench_node_float_type(&n, "T");
    zf_bench_node_float_type(&n, "U");
    zf_bench_node_bool(&n, "is_training", false);
    Tensorflow__AttrValue *eps = zf_bench_node_attr(&n, "epsilon");
    eps->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
    eps->f = 0.001f;
    const zf_kernel_t *def = NULL;
    void *state = NULL;
    zf_bench_check("batchnorm", "find", zf_kernel_find("CPU", &n.node, &def));
    if (def->create) zf_bench_check("batchnorm", "create", def->create(&n.node, &state));
    zf_tensor_t *out[6] = {NULL};

    double t_base = 1e30, t_fresh = 1e30, t_kernel = 1e30;
    for (int r = -1; r < reps; r++) { /* r = -1 builds the kernel's primitive */
        double a = s_direct_run(&direct, direct.dst), b = s_direct_fresh_run(&direct);
        for (int i = 0; i < 6; i++) zf_tensor_unref(&out[i]);
        zf_kernel_ctx_t ctx = {.node = &n.node,
                               .state = state,
                               .device = dev,
                               .inputs = in,
                               .num_inputs = 5,
                               .outputs = out,
                               .num_outputs = 6};
        double t0 = zf_bench_now();
        if (!zf_ok(s = def->compute(&ctx))) zf_bench_check("batchnorm", "compute", s);
        double c = zf_bench_now() - t0;
        if (r < 0) continue;
        t_base = zf_bench_min(t_base, a);
        t_fresh = zf_bench_min(t_fresh, b);
        t_kernel = zf_bench_min(t_kernel, c);
    }
    double diff = 0;
    const float *y = zf_tensor_data(out[0]);
    for (size_t i = 0; i < nx; i++) diff = fmax(diff, fabs((double)y[i] - base_out[i]));
    double bytes = 2.0 * (double)nx * sizeof(float);
    printf("batchnorm: FusedBatchNormV3 inference, %dx%dx%dx%d NHWC float, best of %d runs\n", S_N,
           S_H, S_W, S_C, reps);
    printf("%-44s %10s %10s %8s\n", "", "ms", "GB/s", "ratio");
    printf("%-44s %10.4f %10.2f %8.3f\n", "oneDNN primitive, direct (baseline)", t_base * 1e3,
           bytes / t_base * 1e-9, 1.0);
    printf("%-44s %10.4f %10.2f %8.3f\n", "oneDNN primitive into a new output tensor",
           t_fresh * 1e3, bytes / t_fresh * 1e-9, t_base / t_fresh);
    printf("%-44s %10.4f %10.2f %8.3f\n", "zflow FusedBatchNormV3 kernel", t_kernel * 1e3,
           bytes / t_kernel * 1e-9, t_base / t_kernel);
    printf("max |difference| %.3g\n", diff);

    for (int i = 0; i < 6; i++) zf_tensor_unref(&out[i]);
    if (def->destroy) def->destroy(state);
    s_direct_fini(&direct);
    for (int i = 0; i < 5; i++) zf_tensor_unref(&in[i]);
    free(base_out);
    zf_device_destroy(&dev);
    return diff < 1e-4 ? 0 : 1;
}
