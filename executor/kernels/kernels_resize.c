/* CPU ResizeBilinear (float and double images, float output) and
 * ResizeNearestNeighbor (any ordered dtype, output of the input's dtype) on
 * NHWC images [batch, height, width, channels] and a size input, int32
 * [new_height, new_width].
 *
 * As in TensorFlow, the scale along an axis is in / out, or
 * (in - 1) / (out - 1) with align_corners and more than one output pixel,
 * computed in float. Bilinear maps output pixel x to x * scale (legacy) or
 * (x + 0.5) * scale - 0.5 (half_pixel_centers), interpolates between the
 * floor and the ceiling of that coordinate clamped into the image, in float.
 * Nearest takes x * scale or (x + 0.5) * scale, rounded half away from
 * zero with align_corners and floored otherwise, clamped to the last pixel
 * (and to the first with half_pixel_centers). align_corners and
 * half_pixel_centers together are INVALID_ARGUMENT. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

typedef struct {
    bool align_corners, half_pixel_centers;
} s_resize_t;

static zf_status_t s_resize_create(const Tensorflow__NodeDef *node, void **state)
{
    s_resize_t st = {false, false};
    ZF_TRY(zf_node_attr_bool_or(node, "align_corners", false, &st.align_corners));
    ZF_TRY(zf_node_attr_bool_or(node, "half_pixel_centers", false, &st.half_pixel_centers));
    if (st.align_corners && st.half_pixel_centers)
        return zf_invalid_argument("%s (%s): If half_pixel_centers is True, align_corners must be "
                                   "False.",
                                   node->name, node->op);
    s_resize_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("Resize kernel");
    *p = st;
    *state = p;
    return ZF_STATUS_OK;
}

static float s_scale(int64_t in, int64_t out, bool align_corners)
{
    return align_corners && out > 1 ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out;
}

/* Checks the inputs as TensorFlow's resizers do and allocates output 0
 * [batch, out_h, out_w, channels] of dtype. */
static zf_status_t s_prepare(zf_kernel_ctx_t *ctx, zf_dtype_t dtype, int64_t *out_h, int64_t *out_w,
                             zf_tensor_t **out)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *images = ctx->inputs[0], *size = ctx->inputs[1];
    char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    const zf_shape_t *is = zf_tensor_shape(images), *ss = zf_tensor_shape(size);
    if (is->rank != 4)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "input must be 4-dimensional%s",
                               zf_kernels_shape_str(images, sa));
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, ZF_INT32));
    if (ss->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "shape_t must be 1-dimensional%s",
                               zf_kernels_shape_str(size, sb));
    if (ss->dims[0] != 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "shape_t must have two elements%s",
                               zf_kernels_shape_str(size, sb));
    const int32_t *sv = zf_tensor_data(size);
    if (sv[0] <= 0 || sv[1] <= 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "output dimensions must be positive, got [%d,%d]", (int)sv[0],
                               (int)sv[1]);
    if (is->dims[1] <= 0 || is->dims[2] <= 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "input image must be of non-zero size%s",
                               zf_kernels_shape_str(images, sa));
    *out_h = sv[0];
    *out_w = sv[1];
    zf_shape_t os = ZF_SHAPE(is->dims[0], *out_h, *out_w, is->dims[3]);
    return zf_kernel_alloc_output(ctx, 0, dtype, &os, out);
}

/* One axis of bilinear interpolation: the two source indices and the
 * weight of the upper one, for every output index. */
typedef struct {
    int64_t lower, upper;
    float lerp;
} s_interp_t;

static void s_bilinear_weights(int64_t in, int64_t out, float scale, bool half_pixel, s_interp_t *w)
{
    for (int64_t i = 0; i < out; i++) {
        float x = half_pixel ? ((float)i + 0.5f) * scale - 0.5f : (float)i * scale;
        float xf = floorf(x);
        int64_t lo = (int64_t)xf, hi = (int64_t)ceilf(x);
        w[i].lower = lo < 0 ? 0 : lo;
        w[i].upper = hi > in - 1 ? in - 1 : hi;
        w[i].lerp = x - xf;
    }
}

#define S_BILINEAR(name_, T)                                                                       \
    static void name_(const void *src, float *dst, int64_t batch, int64_t in_h, int64_t in_w,      \
                      int64_t chans, const s_interp_t *ys, int64_t out_h, const s_interp_t *xs,    \
                      int64_t out_w)                                                               \
    {                                                                                              \
        const T *in = src;                                                                         \
        for (int64_t b = 0; b < batch; b++)                                                        \
            for (int64_t y = 0; y < out_h; y++) {                                                  \
                const T *top = in + (b * in_h + ys[y].lower) * in_w * chans;                       \
                const T *bottom = in + (b * in_h + ys[y].upper) * in_w * chans;                    \
                for (int64_t x = 0; x < out_w; x++) {                                              \
                    const s_interp_t *wx = &xs[x];                                                 \
                    for (int64_t c = 0; c < chans; c++) {                                          \
                        float tl = (float)top[wx->lower * chans + c];                              \
                        float tr = (float)top[wx->upper * chans + c];                              \
                        float bl = (float)bottom[wx->lower * chans + c];                           \
                        float br = (float)bottom[wx->upper * chans + c];                           \
                        float t = tl + (tr - tl) * wx->lerp;                                       \
                        float d = bl + (br - bl) * wx->lerp;                                       \
                        *dst++ = t + (d - t) * ys[y].lerp;                                         \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
    }
S_BILINEAR(s_bilinear_f32, float)
S_BILINEAR(s_bilinear_f64, double)

static zf_status_t s_bilinear_compute(zf_kernel_ctx_t *ctx)
{
    const s_resize_t *st = ctx->state;
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    zf_dtype_t dtype = zf_tensor_dtype(ctx->inputs[0]);
    if (dtype != ZF_FLOAT && dtype != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s images",
                               zf_kernels_dtype_name((int)dtype));
    int64_t out_h = 0, out_w = 0;
    zf_tensor_t *out = NULL;
    ZF_TRY(s_prepare(ctx, ZF_FLOAT, &out_h, &out_w, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    const zf_shape_t *is = zf_tensor_shape(ctx->inputs[0]);
    int64_t in_h = is->dims[1], in_w = is->dims[2];
    s_interp_t *ys = malloc((size_t)(out_h + out_w) * sizeof *ys);
    if (!ys) return zf_out_of_memory("ResizeBilinear weights");
    s_interp_t *xs = ys + out_h;
    s_bilinear_weights(in_h, out_h, s_scale(in_h, out_h, st->align_corners), st->half_pixel_centers,
                       ys);
    s_bilinear_weights(in_w, out_w, s_scale(in_w, out_w, st->align_corners), st->half_pixel_centers,
                       xs);
    (dtype == ZF_FLOAT ? s_bilinear_f32 : s_bilinear_f64)(zf_tensor_data(ctx->inputs[0]),
                                                          zf_tensor_data(out), is->dims[0], in_h,
                                                          in_w, is->dims[3], ys, out_h, xs, out_w);
    free(ys);
    return ZF_STATUS_OK;
}

/* The source index of every output index along one axis. */
static void s_nearest_index(int64_t in, int64_t out, float scale, const s_resize_t *st,
                            int64_t *idx)
{
    for (int64_t i = 0; i < out; i++) {
        float x = st->half_pixel_centers ? ((float)i + 0.5f) * scale : (float)i * scale;
        int64_t j = st->align_corners ? (int64_t)roundf(x) : (int64_t)floorf(x);
        if (j > in - 1) j = in - 1;
        if (st->half_pixel_centers && j < 0) j = 0;
        idx[i] = j;
    }
}

static zf_status_t s_nearest_compute(zf_kernel_ctx_t *ctx)
{
    const s_resize_t *st = ctx->state;
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    zf_dtype_t dtype = zf_tensor_dtype(ctx->inputs[0]);
    int64_t out_h = 0, out_w = 0;
    zf_tensor_t *out = NULL;
    ZF_TRY(s_prepare(ctx, dtype, &out_h, &out_w, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    const zf_shape_t *is = zf_tensor_shape(ctx->inputs[0]);
    int64_t batch = is->dims[0], in_h = is->dims[1], in_w = is->dims[2], chans = is->dims[3];
    int64_t *ys = malloc((size_t)(out_h + out_w) * sizeof *ys);
    if (!ys) return zf_out_of_memory("ResizeNearestNeighbor indices");
    int64_t *xs = ys + out_h;
    s_nearest_index(in_h, out_h, s_scale(in_h, out_h, st->align_corners), st, ys);
    s_nearest_index(in_w, out_w, s_scale(in_w, out_w, st->align_corners), st, xs);
    size_t pixel = (size_t)chans * zf_dtype_size(dtype);
    const char *in = zf_tensor_data(ctx->inputs[0]);
    char *dst = zf_tensor_data(out);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t y = 0; y < out_h; y++) {
            const char *row = in + (size_t)((b * in_h + ys[y]) * in_w) * pixel;
            for (int64_t x = 0; x < out_w; x++, dst += pixel)
                memcpy(dst, row + (size_t)xs[x] * pixel, pixel);
        }
    free(ys);
    return ZF_STATUS_OK;
}

static const zf_kernel_t s_defs[] = {
    {.op = "ResizeBilinear",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_FLOAT,
     .flags = ZF_KERNEL_EXPENSIVE,
     .create = s_resize_create,
     .destroy = free,
     .compute = s_bilinear_compute},
    {.op = "ResizeNearestNeighbor",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_ORDERED,
     .flags = ZF_KERNEL_EXPENSIVE,
     .create = s_resize_create,
     .destroy = free,
     .compute = s_nearest_compute},
};

zf_status_t zf__kernels_register_resize(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
