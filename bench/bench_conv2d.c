/* bench/conv2d: zflow's CPU Conv2D and DepthwiseConv2dNative kernels
 * (float, on oneDNN) in GFLOP/s, best of N runs, on four layers: a first
 * layer (1x224x224x3 input, 64 3x3 filters), a deeper one (1x56x56x64, 64
 * 3x3), a 1x1 expansion (1x56x56x64, 256 1x1, where im2col is a plain
 * GEMM) and a MobileNet depthwise layer (1x112x112x32, 3x3, multiplier
 * 1), SAME, stride 1, NHWC.
 *
 * The baseline, measured in the same run: oneDNN's convolution primitive
 * called directly (grouped, one group per channel, for the depthwise
 * layer), on the same NHWC input and output, with its filter already in
 * the primitive's preferred layout (reordered once, untimed). Also timed,
 * for Conv2D: the portable im2col + GEMM path it used before oneDNN (still
 * what double runs on; the depthwise loops are double only). The kernel runs with a real CPU
 * device, found and created through the registry as the executor does,
 * one node over all runs, so its primitive and reordered filter are
 * built on the warm-up run and reused. Each step's kernel writes a new
 * output tensor, so the primitive is also timed into a new one. The
 * kernel and the primitive take turns within each run, so that load from
 * other processes falls on both alike. */
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "executor/devices/device.h"
#include "executor/kernels/kernel.h"
#include "executor/kernels/kernels_conv.h"

/* A Conv2D NodeDef (T=float, strides 1, SAME) built on the stack. */
typedef struct {
    Tensorflow__NodeDef node;
    Tensorflow__NodeDef__AttrEntry entries[3], *entry_ptrs[3];
    Tensorflow__AttrValue values[3];
    Tensorflow__AttrValue__ListValue strides;
    int64_t stride_vals[4];
    char *inputs[2];
} s_node_t;

static void s_node_init(s_node_t *n, bool depthwise)
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
    n->node.op = depthwise ? "DepthwiseConv2dNative" : "Conv2D";
    n->node.input = n->inputs;
    n->node.n_input = 2;
    n->node.attr = n->entry_ptrs;
    n->node.n_attr = 3;
}

typedef struct {
    int h, w, c, k, oc;
    bool dw; /* depthwise: oc == c, a [k, k, c, 1] filter */
} s_layer_t;

static void s_dnnl_check(dnnl_status_t st, const char *what)
{
    if (st == dnnl_success) return;
    fprintf(stderr, "conv2d: oneDNN %s failed (status %d)\n", what, (int)st);
    exit(1);
}

/* oneDNN's own primitive on x (NHWC) and f (HWIO, or [k, k, c, 1] for a
 * depthwise layer) into out (NHWC), with the filter reordered to the
 * primitive's layout once, before timing. */
typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t conv;
    dnnl_memory_desc_t dst_md;
    dnnl_memory_t src, dst, wei;
} s_direct_t;

static void s_direct_init(s_direct_t *d, const s_layer_t *l, const float *x, const float *f,
                          float *out)
{
    s_dnnl_check(dnnl_engine_create(&d->eng, dnnl_cpu, 0), "engine");
    s_dnnl_check(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags), "stream");
    dnnl_dims_t src_dims = {1, l->c, l->h, l->w}, dst_dims = {1, l->oc, l->h, l->w};
    dnnl_dims_t wei_dims = {l->oc, l->c, l->k, l->k};
    /* depthwise: groups (c) x 1 output x 1 input channel x k x k, stored
     * as [k][k][c] */
    dnnl_dims_t gwei_dims = {l->c, 1, 1, l->k, l->k}, gwei_strides = {1, 1, 1, l->k * l->c, l->c};
    dnnl_dims_t strides = {1, 1}, pad = {l->k / 2, l->k / 2}, dil = {0, 0};
    dnnl_memory_desc_t src_md, dst_md, user_md, any_md;
    s_dnnl_check(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nhwc), "md");
    s_dnnl_check(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nhwc), "md");
    d->dst_md = dst_md;
    if (l->dw) {
        s_dnnl_check(
            dnnl_memory_desc_init_by_strides(&user_md, 5, gwei_dims, dnnl_f32, gwei_strides), "md");
        s_dnnl_check(
            dnnl_memory_desc_init_by_tag(&any_md, 5, gwei_dims, dnnl_f32, dnnl_format_tag_any),
            "md");
    } else {
        s_dnnl_check(dnnl_memory_desc_init_by_tag(&user_md, 4, wei_dims, dnnl_f32, dnnl_hwio),
                     "md");
        s_dnnl_check(
            dnnl_memory_desc_init_by_tag(&any_md, 4, wei_dims, dnnl_f32, dnnl_format_tag_any),
            "md");
    }
    dnnl_convolution_desc_t cd;
    s_dnnl_check(dnnl_dilated_convolution_forward_desc_init(
                     &cd, dnnl_forward_inference, dnnl_convolution_direct, &src_md, &any_md, NULL,
                     &dst_md, strides, dil, pad, pad),
                 "convolution desc");
    s_dnnl_check(dnnl_primitive_desc_create(&d->pd, &cd, NULL, d->eng, NULL), "primitive desc");
    const dnnl_memory_desc_t *wei_md =
        dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 0);
    s_dnnl_check(dnnl_primitive_create(&d->conv, d->pd), "primitive");
    s_dnnl_check(dnnl_memory_create(&d->src, &src_md, d->eng, (void *)x), "memory");
    s_dnnl_check(dnnl_memory_create(&d->dst, &dst_md, d->eng, out), "memory");
    s_dnnl_check(dnnl_memory_create(&d->wei, wei_md, d->eng, DNNL_MEMORY_ALLOCATE), "memory");
    dnnl_memory_t user = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    s_dnnl_check(dnnl_memory_create(&user, &user_md, d->eng, (void *)f), "memory");
    s_dnnl_check(dnnl_reorder_primitive_desc_create(&rpd, &user_md, d->eng, wei_md, d->eng, NULL),
                 "reorder desc");
    s_dnnl_check(dnnl_primitive_create(&reorder, rpd), "reorder");
    dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, d->wei}};
    s_dnnl_check(dnnl_primitive_execute(reorder, d->stream, 2, rargs), "reorder");
    s_dnnl_check(dnnl_stream_wait(d->stream), "wait");
    dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(user);
}

static double s_direct_run(s_direct_t *d)
{
    dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei}, {DNNL_ARG_DST, d->dst}};
    double t0 = zf_bench_now();
    s_dnnl_check(dnnl_primitive_execute(d->conv, d->stream, 3, args), "execute");
    s_dnnl_check(dnnl_stream_wait(d->stream), "wait");
    return zf_bench_now() - t0;
}

/* The same into a new output tensor, as a kernel gets it from zflow's
 * allocator (uninitialised, since the primitive writes all of it): what
 * the kernel pays on top of the primitive. */
static double s_direct_fresh_run(s_direct_t *d, const s_layer_t *l)
{
    zf_shape_t shape = {.rank = 4, .dims = {1, l->h, l->w, l->oc}};
    zf_tensor_t *t = NULL;
    dnnl_memory_t dst = NULL;
    double t0 = zf_bench_now();
    zf_bench_check("conv2d", "alloc", zf_tensor_new_uninit(ZF_FLOAT, &shape, &t));
    s_dnnl_check(dnnl_memory_create(&dst, &d->dst_md, d->eng, zf_tensor_data(t)), "memory");
    dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei}, {DNNL_ARG_DST, dst}};
    s_dnnl_check(dnnl_primitive_execute(d->conv, d->stream, 3, args), "execute");
    s_dnnl_check(dnnl_stream_wait(d->stream), "wait");
    double t1 = zf_bench_now();
    dnnl_memory_destroy(dst);
    zf_tensor_unref(&t);
    return t1 - t0;
}

static void s_direct_fini(s_direct_t *d)
{
    dnnl_memory_destroy(d->src);
    dnnl_memory_destroy(d->dst);
    dnnl_memory_destroy(d->wei);
    dnnl_primitive_destroy(d->conv);
    dnnl_primitive_desc_destroy(d->pd);
    dnnl_stream_destroy(d->stream);
    dnnl_engine_destroy(d->eng);
}

/* One Conv2D node, created through the registry; im2col runs the
 * portable path instead of oneDNN. */
typedef struct {
    s_node_t n;
    const zf_kernel_t *def;
    void *state;
    zf_tensor_t *inputs[2], *out;
    zf_device_t *dev;
    bool im2col;
} s_kernel_t;

static void s_kernel_init(s_kernel_t *k, zf_device_t *dev, zf_tensor_t *img, zf_tensor_t *filt,
                          bool im2col, bool depthwise)
{
    *k = (s_kernel_t){.inputs = {img, filt}, .dev = dev, .im2col = im2col};
    s_node_init(&k->n, depthwise);
    zf_bench_check("conv2d", "find", zf_kernel_find("CPU", &k->n.node, &k->def));
    if (k->def->create) zf_bench_check("conv2d", "create", k->def->create(&k->n.node, &k->state));
}

static double s_kernel_run(s_kernel_t *k)
{
    zf_tensor_unref(&k->out);
    zf_kernel_ctx_t ctx = {.node = &k->n.node,
                           .state = k->state,
                           .device = k->dev,
                           .inputs = k->inputs,
                           .num_inputs = 2,
                           .outputs = &k->out,
                           .num_outputs = 1};
    double t0 = zf_bench_now();
    zf_status_t s = k->im2col ? zf__kernels_conv2d_im2col(&ctx) : k->def->compute(&ctx);
    double t1 = zf_bench_now();
    zf_bench_check("conv2d", "compute", s);
    return t1 - t0;
}

static void s_kernel_fini(s_kernel_t *k)
{
    zf_tensor_unref(&k->out);
    if (k->def->destroy) k->def->destroy(k->state);
}

/* What a step pays for its output before any convolution: a new tensor
 * written once, as the kernel's output is. */
static double s_alloc_run(const s_layer_t *l)
{
    zf_shape_t shape = {.rank = 4, .dims = {1, l->h, l->w, l->oc}};
    zf_tensor_t *t = NULL;
    double t0 = zf_bench_now();
    zf_bench_check("conv2d", "alloc", zf_tensor_new_uninit(ZF_FLOAT, &shape, &t));
    memset(zf_tensor_data(t), 1, zf_tensor_nbytes(t));
    double t1 = zf_bench_now();
    zf_tensor_unref(&t);
    return t1 - t0;
}

static double s_maxdiff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Runs one layer; returns its largest difference between the three. */
static double s_layer(zf_device_t *dev, const s_layer_t *l, int reps)
{
    zf_shape_t ishape = {.rank = 4, .dims = {1, l->h, l->w, l->c}};
    zf_shape_t fshape = {.rank = 4, .dims = {l->k, l->k, l->c, l->dw ? 1 : l->oc}};
    zf_tensor_t *img = NULL, *filt = NULL;
    zf_status_t s;
    if (!zf_ok(s = zf_tensor_new(ZF_FLOAT, &ishape, &img)) ||
        !zf_ok(s = zf_tensor_new(ZF_FLOAT, &fshape, &filt)))
        zf_bench_check("conv2d", "inputs", s);
    size_t nout = (size_t)l->h * l->w * l->oc;
    zf_bench_fill(zf_tensor_data(img), (size_t)l->h * l->w * l->c, 1);
    zf_bench_fill(zf_tensor_data(filt), (size_t)zf_tensor_num_elements(filt), 2);
    float *base_out = malloc(sizeof(float) * nout);
    if (!base_out) exit(1);

    /* The kernel and the baseline take turns within each run, so that load
     * from elsewhere falls on both alike; r = -1 builds primitives and
     * filters. The im2col path runs apart: OpenBLAS's threads and
     * OpenMP's, each spinning after its work, would slow the other. */
    s_direct_t direct;
    s_kernel_t zf, old;
    s_direct_init(&direct, l, zf_tensor_data(img), zf_tensor_data(filt), base_out);
    s_kernel_init(&zf, dev, img, filt, false, l->dw);
    if (!l->dw) s_kernel_init(&old, dev, img, filt, true, false);
    double t_base = 1e30, t_fresh = 1e30, t_zf = 1e30, t_old = 1e30, t_alloc = 1e30;
    for (int r = -1; r < reps; r++) {
        double a = s_direct_run(&direct), b = s_kernel_run(&zf), c = s_alloc_run(l);
        double e = s_direct_fresh_run(&direct, l);
        if (r < 0) continue;
        t_base = zf_bench_min(t_base, a);
        t_zf = zf_bench_min(t_zf, b);
        t_alloc = zf_bench_min(t_alloc, c);
        t_fresh = zf_bench_min(t_fresh, e);
    }
    for (int r = -1; r < reps && !l->dw; r++) {
        double c = s_kernel_run(&old);
        if (r >= 0) t_old = zf_bench_min(t_old, c);
    }
    double diff = s_maxdiff(zf_tensor_data(zf.out), base_out, nout);
    if (!l->dw) diff = fmax(diff, s_maxdiff(zf_tensor_data(old.out), base_out, nout));
    s_kernel_fini(&zf);
    if (!l->dw) s_kernel_fini(&old);
    s_direct_fini(&direct);

    double flop = 2.0 * l->h * l->w * l->oc * l->k * l->k * (l->dw ? 1 : l->c);
    if (l->dw)
        printf("\n1x%dx%dx%d input, depthwise %dx%d, multiplier 1, SAME, stride 1, NHWC\n", l->h,
               l->w, l->c, l->k, l->k);
    else
        printf("\n1x%dx%dx%d input, %d %dx%d filters, SAME, stride 1, NHWC\n", l->h, l->w, l->c,
               l->oc, l->k, l->k);
    printf("%-44s %10s %10s %8s\n", "", "ms", "GFLOP/s", "ratio");
    printf("%-44s %10.3f %10.2f %8.3f\n", "oneDNN primitive, direct (baseline)", t_base * 1e3,
           flop / t_base * 1e-9, 1.0);
    printf("%-44s %10.3f %10.2f %8.3f\n", "oneDNN primitive into a new output tensor",
           t_fresh * 1e3, flop / t_fresh * 1e-9, t_base / t_fresh);
    printf("%-44s %10.3f %10.2f %8.3f\n",
           l->dw ? "zflow depthwise kernel (oneDNN)" : "zflow Conv2D kernel (oneDNN)", t_zf * 1e3,
           flop / t_zf * 1e-9, t_base / t_zf);
    if (!l->dw)
        printf("%-44s %10.3f %10.2f %8.3f\n", "zflow im2col + GEMM (before oneDNN)", t_old * 1e3,
               flop / t_old * 1e-9, t_base / t_old);
    printf("%-44s %10.3f\n", "a new output tensor, written once (1 thread)", t_alloc * 1e3);
    printf("max |difference| %.3g\n", diff);

    zf_tensor_unref(&img);
    zf_tensor_unref(&filt);
    free(base_out);
    return diff;
}

int main(void)
{
    int reps = zf_bench_reps(20);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    zf_status_t s = zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 0, &dev);
    zf_bench_check("conv2d", "device", s);
    printf("conv2d: float, best of %d runs; ratio = throughput / the direct oneDNN primitive's\n",
           reps);
    const s_layer_t layers[] = {{224, 224, 3, 3, 64, false},
                                {56, 56, 64, 3, 64, false},
                                {56, 56, 64, 1, 256, false},
                                {112, 112, 32, 3, 32, true}};
    double diff = 0;
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        diff = fmax(diff, s_layer(dev, &layers[i], reps));
    zf_device_destroy(&dev);
    return diff < 1e-3 ? 0 : 1;
}
