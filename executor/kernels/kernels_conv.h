/* The CPU window kernels' shared parts (kernels_conv.c, kernels_dnnl.c,
 * kernels_batchnorm.c): the geometry of one convolution, pool or batch
 * normalisation, forward or backward, and the oneDNN entry points.
 * Internal to executor/kernels; benchmarks call the im2col path directly.
 *
 * Float convolutions and pools run on oneDNN (kernels_dnnl.c); double runs
 * on the portable loops of kernels_conv.c (im2col + GEMM for Conv2D), as
 * oneDNN has no double primitives on CPU. */
#ifndef ZF_KERNELS_CONV_H
#define ZF_KERNELS_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/kernels/kernel.h"

typedef enum {
    ZF__WIN_CONV,      /* Conv2D: filter [KH, KW, C, OC] */
    ZF__WIN_DEPTHWISE, /* DepthwiseConv2dNative: filter [KH, KW, C, M], OC = C*M */
    ZF__WIN_MAXPOOL,
    ZF__WIN_AVGPOOL, /* the mean of the window's in-bounds pixels */
    /* gradients, with the geometry of the forward op */
    ZF__WIN_CONV_BWD_INPUT,  /* Conv2DBackpropInput: diff_dst, filter -> diff_src */
    ZF__WIN_CONV_BWD_FILTER, /* Conv2DBackpropFilter: src, diff_dst -> diff filter (HWIO) */
    ZF__WIN_MAXPOOL_BWD,     /* MaxPoolGrad: src, diff_dst -> diff_src */
    ZF__WIN_AVGPOOL_BWD,     /* AvgPoolGrad: diff_dst -> diff_src */
    /* batch normalisation over n x c x h (h: the spatial size, w = 1);
     * scale and shift always */
    ZF__WIN_BN_TRAIN,      /* batch statistics, written to mean and variance */
    ZF__WIN_BN_INFER,      /* the given mean and variance */
    ZF__WIN_BN_BWD,        /* gradients of BN_TRAIN */
    ZF__WIN_BN_BWD_FROZEN, /* gradients of BN_INFER (mean and variance constant) */
} zf__win_kind_t;

/* One window op on one input shape: what a primitive is built for. */
typedef struct {
    zf__win_kind_t kind;
    bool nchw;              /* data_format NCHW, else NHWC */
    int64_t n, h, w, c;     /* input */
    int64_t kh, kw;         /* window (filter) */
    int64_t sh, sw, dh, dw; /* strides, dilations */
    int64_t pt, pb, pl, pr; /* padding top, bottom, left, right */
    int64_t oh, ow, oc;     /* output; oc = output channels */
    float epsilon;          /* batch normalisation */
} zf__win_geom_t;

/* The tensors of one oneDNN call; which are used depends on the kind. */
typedef struct {
    const zf_tensor_t *src;      /* forward input (not for CONV_BWD_INPUT, AVGPOOL_BWD) */
    const zf_tensor_t *weights;  /* the filter (CONV, DEPTHWISE, CONV_BWD_INPUT) */
    const zf_tensor_t *diff_dst; /* the output's gradient (backward kinds) */
    zf_tensor_t *out;            /* dst, diff_src or the filter's gradient */
    /* batch normalisation: c floats each */
    const float *scale, *shift;
    float *mean, *variance; /* written by BN_TRAIN, read otherwise */
    float *diff_scale, *diff_shift;
} zf__dnnl_args_t;

/* Per-node oneDNN state: primitives by geometry and thread count, and each
 * one's filter reordered to its preferred layout. Thread-safe. */
typedef struct zf__dnnl_cache zf__dnnl_cache_t;

zf_status_t zf__dnnl_cache_new(zf__dnnl_cache_t **out);
void zf__dnnl_cache_destroy(zf__dnnl_cache_t **cache_p);

/* Runs g on oneDNN for float tensors: x (and the filter f of a convolution,
 * else NULL) into y, already allocated with g's output shape. Errors:
 * UNIMPLEMENTED when oneDNN has no primitive for g, RESOURCE_EXHAUSTED,
 * INTERNAL for other oneDNN failures; each names the node. */
zf_status_t zf__dnnl_run(zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *cache, const zf__win_geom_t *g,
                         const zf_tensor_t *x, const zf_tensor_t *f, zf_tensor_t *y);

/* The same for any kind, its tensors in a (outputs already allocated). */
zf_status_t zf__dnnl_exec(zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *cache, const zf__win_geom_t *g,
                          const zf__dnnl_args_t *a);

/* For other devices' Conv2D kernels: the CPU kernel's state of a Conv2D
 * node (its window attrs, checked with TensorFlow's texts), freed with
 * zf__kernels_window_destroy(); and, on the context's two inputs (float
 * or double), the checked geometry and the output's shape. */
zf_status_t zf__kernels_conv2d_create(const Tensorflow__NodeDef *node, void **state);
void zf__kernels_window_destroy(void *state);
zf_status_t zf__kernels_conv2d_geometry(const zf_kernel_ctx_t *ctx, zf__win_geom_t *g,
                                        zf_shape_t *out_shape);

/* The im2col + GEMM Conv2D (NHWC, float or double) for a Conv2D node's
 * context, whatever its dtype: the portable path, for benchmarks;
 * INVALID_ARGUMENT for another op's node. */
zf_status_t zf__kernels_conv2d_im2col(zf_kernel_ctx_t *ctx);

#endif
