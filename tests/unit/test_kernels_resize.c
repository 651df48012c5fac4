/* Tests for executor/kernels/kernels_resize: ResizeBilinear and
 * ResizeNearestNeighbor against TensorFlow's formulas written out here
 * (scale, legacy and half-pixel coordinates, clamping, rounding) for every
 * valid align_corners/half_pixel_centers pair, hand-checked images, empty
 * batches and channels, and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static const bool s_modes[3][2] = {{false, false}, {true, false}, {false, true}};

static Tensorflow__NodeDef *s_node(const char *op, zf_dtype_t t, bool align, bool half)
{
    Tensorflow__NodeDef *n = kt_node_new("resize", op, 2);
    kt_attr_type(n, "T", t);
    kt_attr_bool(n, "align_corners", align);
    kt_attr_bool(n, "half_pixel_centers", half);
    return n;
}

static double s_get(const zf_tensor_t *t, int64_t i)
{
    switch (zf_tensor_dtype(t)) {
    case ZF_FLOAT: return ((const float *)zf_tensor_data(t))[i];
    case ZF_DOUBLE: return ((const double *)zf_tensor_data(t))[i];
    default: return ((const int32_t *)zf_tensor_data(t))[i];
    }
}

/* Images of dtype t with distinct values (integers for INT32). */
static zf_tensor_t *s_images(zf_dtype_t t, zf_shape_t s)
{
    zf_tensor_t *f = kt_random_f32(s, 11), *r = kt_zeros(t, s);
    for (int64_t i = 0; i < zf_tensor_num_elements(f); i++) {
        double v = s_get(f, i);
        if (t == ZF_FLOAT)
            ((float *)zf_tensor_data(r))[i] = (float)v;
        else if (t == ZF_DOUBLE)
            ((double *)zf_tensor_data(r))[i] = v;
        else
            ((int32_t *)zf_tensor_data(r))[i] = (int32_t)(v * 1000);
    }
    zf_tensor_unref(&f);
    return r;
}

/* TensorFlow's scale: (in - 1) / (out - 1) with align_corners and more than
 * one output pixel, in / out otherwise, in float. */
static float s_ref_scale(int64_t in, int64_t out, bool align)
{
    if (align && out > 1) return (float)(in - 1) / (float)(out - 1);
    return (float)in / (float)out;
}

/* Where output pixel i of an axis samples the input, in float, as
 * TensorFlow computes it. */
static float s_ref_coord(int64_t i, float scale, bool half, float shift)
{
    return half ? ((float)i + 0.5f) * scale - shift : (float)i * scale;
}

/* Output element [b, y, x, c] of a resize of img to oh x ow. */
typedef double (*s_ref_fn)(const zf_tensor_t *img, int64_t b, int64_t y, int64_t x, int64_t c,
                           float hs, float ws, bool align, bool half);

static double s_ref_bilinear(const zf_tensor_t *img, int64_t b, int64_t y, int64_t x, int64_t c,
                             float hs, float ws, bool align, bool half)
{
    (void)align;
    const zf_shape_t *s = zf_tensor_shape(img);
    int64_t ih = s->dims[1], iw = s->dims[2], ch = s->dims[3];
    float fy = s_ref_coord(y, hs, half, 0.5f), fx = s_ref_coord(x, ws, half, 0.5f);
    int64_t y0 = (int64_t)floorf(fy), y1 = (int64_t)ceilf(fy);
    int64_t x0 = (int64_t)floorf(fx), x1 = (int64_t)ceilf(fx);
    float ly = fy - floorf(fy), lx = fx - floorf(fx);
    y0 = y0 < 0 ? 0 : y0;
    x0 = x0 < 0 ? 0 : x0;
    y1 = y1 > ih - 1 ? ih - 1 : y1;
    x1 = x1 > iw - 1 ? iw - 1 : x1;
#define PX(yy, xx) ((float)s_get(img, ((b * ih + (yy)) * iw + (xx)) * ch + c))
    float top = PX(y0, x0) + (PX(y0, x1) - PX(y0, x0)) * lx;
    float bot = PX(y1, x0) + (PX(y1, x1) - PX(y1, x0)) * lx;
#undef PX
    return top + (bot - top) * ly;
}

static int64_t s_ref_nearest_index(int64_t i, int64_t in, float scale, bool align, bool half)
{
    float f = s_ref_coord(i, scale, half, 0.0f);
    int64_t j = align ? (int64_t)roundf(f) : (int64_t)floorf(f);
    if (j > in - 1) j = in - 1;
    if (half && j < 0) j = 0;
    return j;
}

static double s_ref_nearest(const zf_tensor_t *img, int64_t b, int64_t y, int64_t x, int64_t c,
                            float hs, float ws, bool align, bool half)
{
    const zf_shape_t *s = zf_tensor_shape(img);
    int64_t ih = s->dims[1], iw = s->dims[2], ch = s->dims[3];
    int64_t sy = s_ref_nearest_index(y, ih, hs, align, half);
    int64_t sx = s_ref_nearest_index(x, iw, ws, align, half);
    return s_get(img, ((b * ih + sy) * iw + sx) * ch + c);
}

/* Resizes random images of dtype t and shape is to oh x ow with op and
 * compares every element with ref (exactly for nearest). */
static void s_check(const char *op, zf_dtype_t t, zf_shape_t is, int64_t oh, int64_t ow, bool align,
                    bool half)
{
    bool bilinear = strcmp(op, "ResizeBilinear") == 0;
    s_ref_fn ref = bilinear ? s_ref_bilinear : s_ref_nearest;
    zf_tensor_t *in[2] = {s_images(t, is), KT_I32(ZF_SHAPE(2), (int32_t)oh, (int32_t)ow)};
    zf_tensor_t *out = NULL;
    Tensorflow__NodeDef *n = s_node(op, t, align, half);
    ASSERT_OK(kt_run(n, in, 2, &out, 1));
    assert_int_equal(zf_tensor_dtype(out), bilinear ? ZF_FLOAT : t);
    int64_t batch = is.dims[0], ch = is.dims[3];
    kt_expect_shape(out, ZF_SHAPE(batch, oh, ow, ch));
    float hs = s_ref_scale(is.dims[1], oh, align), ws = s_ref_scale(is.dims[2], ow, align);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t y = 0; y < oh; y++)
            for (int64_t x = 0; x < ow; x++)
                for (int64_t c = 0; c < ch; c++) {
                    double want = ref(in[0], b, y, x, c, hs, ws, align, half);
                    double got = s_get(out, ((b * oh + y) * ow + x) * ch + c);
                    if (fabs(got - want) > (bilinear ? 1e-6 : 0))
                        fail_msg("%s align=%d half=%d at [%lld,%lld,%lld,%lld]: %.9g vs %.9g", op,
                                 align, half, (long long)b, (long long)y, (long long)x,
                                 (long long)c, got, want);
                }
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], out}, 3);
    kt_node_free(&n);
}

static const struct {
    zf_shape_t in;
    int64_t h, w;
} s_cases[] = {
    {{4, {2, 3, 4, 2}}, 5, 7}, /* up */
    {{4, {1, 6, 5, 2}}, 4, 2}, /* down */
    {{4, {1, 6, 5, 1}}, 1, 1}, /* to one pixel */
    {{4, {1, 1, 1, 3}}, 3, 2}, /* from one pixel */
    {{4, {2, 5, 3, 1}}, 5, 3}, /* same size */
    {{4, {1, 3, 8, 2}}, 7, 3}, /* up one axis, down the other */
};

static void test_resize_bilinear_matches_tf_formulas(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof s_cases / sizeof s_cases[0]; i++)
        for (int m = 0; m < 3; m++)
            for (int t = 0; t < 2; t++)
                s_check("ResizeBilinear", t ? ZF_DOUBLE : ZF_FLOAT, s_cases[i].in, s_cases[i].h,
                        s_cases[i].w, s_modes[m][0], s_modes[m][1]);
}

static void test_resize_nearest_matches_tf_formulas(void **state)
{
    (void)state;
    const zf_dtype_t types[] = {ZF_FLOAT, ZF_DOUBLE, ZF_INT32};
    for (size_t i = 0; i < sizeof s_cases / sizeof s_cases[0]; i++)
        for (int m = 0; m < 3; m++)
            for (int t = 0; t < 3; t++)
                s_check("ResizeNearestNeighbor", types[t], s_cases[i].in, s_cases[i].h,
                        s_cases[i].w, s_modes[m][0], s_modes[m][1]);
}

static zf_tensor_t *s_run(const char *op, zf_dtype_t t, bool align, bool half, zf_tensor_t *img,
                          int32_t h, int32_t w)
{
    zf_tensor_t *in[2] = {img, KT_I32(ZF_SHAPE(2), h, w)}, *out = NULL;
    Tensorflow__NodeDef *n = s_node(op, t, align, half);
    ASSERT_OK(kt_run(n, in, 2, &out, 1));
    zf_tensor_unref(&in[1]);
    kt_node_free(&n);
    return out;
}

static void test_resize_of_hand_checked_images(void **state)
{
    (void)state;
    zf_tensor_t *img = KT_F32(ZF_SHAPE(1, 2, 2, 1), 0, 1, 2, 3);
    /* align_corners: sources 0, 0.5, 1 on both axes */
    zf_tensor_t *out = s_run("ResizeBilinear", ZF_FLOAT, true, false, img, 3, 3);
    KT_EXPECT_NEAR(out, ZF_SHAPE(1, 3, 3, 1), 1e-6, 0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3);
    zf_tensor_unref(&out);
    /* legacy: sources 0, 2/3 and 4/3 (clamped to the last pixel) */
    out = s_run("ResizeBilinear", ZF_FLOAT, false, false, img, 1, 3);
    KT_EXPECT_NEAR(out, ZF_SHAPE(1, 1, 3, 1), 1e-6, 0, 2.0 / 3, 1);
    zf_tensor_unref(&out);
    /* half-pixel: row 0.5 (between both rows); columns -0.25 (clamped to
     * column 0), 0.25, 0.75 and 1.25 (clamped to column 1) */
    out = s_run("ResizeBilinear", ZF_FLOAT, false, true, img, 1, 4);
    KT_EXPECT_NEAR(out, ZF_SHAPE(1, 1, 4, 1), 1e-6, 1, 1.25, 1.75, 2);
    zf_tensor_unref(&out);
    out = s_run("ResizeBilinear", ZF_FLOAT, false, true, img, 2, 4);
    KT_EXPECT_NEAR(out, ZF_SHAPE(1, 2, 4, 1), 1e-6, 0, 0.25, 0.75, 1, 2, 2.25, 2.75, 3);
    zf_tensor_unref(&out);
    /* nearest, align_corners: round(0), round(0.5) = 1, round(1) */
    out = s_run("ResizeNearestNeighbor", ZF_FLOAT, true, false, img, 3, 3);
    KT_EXPECT_NEAR(out, ZF_SHAPE(1, 3, 3, 1), 0, 0, 1, 1, 2, 3, 3, 2, 3, 3);
    zf_tensor_unref(&out);
    /* nearest, legacy: floor(0), floor(2/3), floor(4/3) */
    out = s_run("ResizeNearestNeighbor", ZF_FLOAT, false, false, img, 3, 3);
    KT_EXPECT_NEAR(out, ZF_SHAPE(1, 3, 3, 1), 0, 0, 0, 1, 0, 0, 1, 2, 2, 3);
    zf_tensor_unref(&out);
    /* nearest, half-pixel: row floor(0.5 * 2) = 1, columns
     * floor((i + 0.5) / 2) = 0, 0, 1, 1 */
    out = s_run("ResizeNearestNeighbor", ZF_FLOAT, false, true, img, 1, 4);
    KT_EXPECT_NEAR(out, ZF_SHAPE(1, 1, 4, 1), 0, 2, 2, 3, 3);
    zf_tensor_unref(&out);
    zf_tensor_unref(&img);
    zf_tensor_t *ints = KT_I64(ZF_SHAPE(1, 1, 2, 1), 7, -9);
    out = s_run("ResizeNearestNeighbor", ZF_INT64, false, false, ints, 1, 4);
    KT_EXPECT_INTS(out, ZF_SHAPE(1, 1, 4, 1), 7, 7, -9, -9);
    kt_unref_all((zf_tensor_t *[]){ints, out}, 2);
}

static void test_resize_handles_empty_batches_and_channels(void **state)
{
    (void)state;
    const char *ops[] = {"ResizeBilinear", "ResizeNearestNeighbor"};
    for (int o = 0; o < 2; o++) {
        zf_tensor_t *img = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 2, 2, 3));
        zf_tensor_t *out = s_run(ops[o], ZF_FLOAT, false, false, img, 4, 5);
        kt_expect_shape(out, ZF_SHAPE(0, 4, 5, 3));
        kt_unref_all((zf_tensor_t *[]){img, out}, 2);
        img = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2, 2, 0));
        out = s_run(ops[o], ZF_FLOAT, false, true, img, 3, 1);
        kt_expect_shape(out, ZF_SHAPE(2, 3, 1, 0));
        kt_unref_all((zf_tensor_t *[]){img, out}, 2);
    }
}

static void s_expect(const char *op, bool align, bool half, zf_tensor_t *img, zf_tensor_t *size,
                     zf_code_t code, const char *msg)
{
    zf_tensor_t *in[2] = {img, size}, *out = NULL;
    Tensorflow__NodeDef *n = s_node(op, ZF_FLOAT, align, half);
    zf_test_expect_error(kt_run(n, in, 2, &out, 1), code, msg);
    assert_null(out);
    kt_unref_all(in, 2);
    kt_node_free(&n);
}

static void test_resize_reports_bad_inputs(void **state)
{
    (void)state;
    const char *ops[] = {"ResizeBilinear", "ResizeNearestNeighbor"};
    s_expect("ResizeBilinear", false, false, kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2, 1)),
             KT_I32(ZF_SHAPE(2), 3, 3), ZF_INVALID_ARGUMENT,
             "resize (ResizeBilinear): input must be 4-dimensional[2,2,1]");
    for (int o = 0; o < 2; o++) {
        const char *op = ops[o];
        s_expect(op, true, true, kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2, 2, 1)),
                 KT_I32(ZF_SHAPE(2), 3, 3), ZF_INVALID_ARGUMENT,
                 "If half_pixel_centers is True, align_corners must be False.");
        s_expect(op, false, false, kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2, 1)), KT_I32(ZF_SHAPE(2), 3, 3),
                 ZF_INVALID_ARGUMENT, "input must be 4-dimensional[2,2,1]");
        s_expect(op, false, false, kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2, 2, 1)),
                 KT_I32(ZF_SHAPE(3), 3, 3, 3), ZF_INVALID_ARGUMENT,
                 "shape_t must have two elements[3]");
        s_expect(op, false, false, kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2, 2, 1)),
                 KT_I32(ZF_SHAPE(2, 1), 3, 3), ZF_INVALID_ARGUMENT,
                 "shape_t must be 1-dimensional[2,1]");
        s_expect(op, false, false, kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2, 2, 1)),
                 KT_I64(ZF_SHAPE(2), 3, 3), ZF_INVALID_ARGUMENT,
                 "input 1 must be int32, got int64");
        s_expect(op, false, false, kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2, 2, 1)),
                 KT_I32(ZF_SHAPE(2), 3, 0), ZF_INVALID_ARGUMENT,
                 "output dimensions must be positive, got [3,0]");
        s_expect(op, false, false, kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 0, 2, 1)),
                 KT_I32(ZF_SHAPE(2), 3, 3), ZF_INVALID_ARGUMENT,
                 "input image must be of non-zero size[1,0,2,1]");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_bilinear_matches_tf_formulas),
        cmocka_unit_test(test_resize_nearest_matches_tf_formulas),
        cmocka_unit_test(test_resize_of_hand_checked_images),
        cmocka_unit_test(test_resize_handles_empty_batches_and_channels),
        cmocka_unit_test(test_resize_reports_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
