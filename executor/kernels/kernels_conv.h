/* The CPU window kernels' shared parts (kernels_conv.c, kernels_dnnl.c):
 * the geometry of one convolution or pool, and the oneDNN entry points.
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
} zf__win_geom_t;

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

/* The im2col + GEMM Conv2D (NHWC, float or double) for a Conv2D node's
 * context, whatever its dtype: the portable path, for benchmarks. */
zf_status_t zf__kernels_conv2d_im2col(zf_kernel_ctx_t *ctx);

#endif
