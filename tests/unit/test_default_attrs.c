/* Tests that graphs written without their default-valued attrs (as
 * SavedModel's strip_default_attrs writes them) run: MatMul without the
 * transpose attrs, MaxPool without T or data_format, Conv2D without
 * dilations or data_format, BiasAdd without data_format, TensorFlow's
 * graph-default-attr test graph, and the partitions made from such a graph
 * carry the attrs. Every expected value is worked out by hand below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graph.h"
#include "common/graphdef_io.h"
#include "scheduler/graph/partition.h"
#include "session/local_session.h"

static Tensorflow__GraphDef *s_parse(const char *text)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd);
    if (!zf_ok(s)) fail_msg("%s\n%s", zf_status_msg(&s), text);
    return gd;
}

static zf_tensor_t *s_floats(const float *v, zf_shape_t shape)
{
    zf_tensor_t *t = NULL;
    int64_t n = 1;
    for (int d = 0; d < shape.rank; d++) n *= shape.dims[d];
    zf_status_t s = zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, (size_t)n * sizeof(float), &t);
    assert_true(zf_ok(s));
    return t;
}

/* A session of gd on one CPU, where the expected values below are exact. */
static zf_local_session_t *s_session(Tensorflow__GraphDef *gd)
{
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = "cpu:1";
    zf_local_session_t *session = NULL;
    zf_status_t s = zf_local_session_new(gd, &opts, &session);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    return session;
}

/* Runs gd in a new session, feeding x to "x" (when x is not NULL), and
 * returns the fetch. */
static zf_tensor_t *s_run(Tensorflow__GraphDef *gd, zf_tensor_t *x, const char *fetch)
{
    zf_local_session_t *session = s_session(gd);
    const char *feed = "x";
    zf_tensor_t *out = NULL;
    zf_status_t s = zf_local_session_run(session, &feed, &x, x ? 1 : 0, &fetch, 1, NULL, 0, &out);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    zf_local_session_destroy(&session);
    return out;
}

static void s_assert_floats(const zf_tensor_t *t, zf_shape_t shape, const float *want)
{
    const zf_shape_t *got = zf_tensor_shape(t);
    assert_int_equal(zf_tensor_dtype(t), ZF_FLOAT);
    assert_int_equal(got->rank, shape.rank);
    int64_t n = 1;
    for (int d = 0; d < shape.rank; d++) {
        assert_int_equal(got->dims[d], shape.dims[d]);
        n *= shape.dims[d];
    }
    const float *v = zf_tensor_data(t);
    for (int64_t i = 0; i < n; i++)
        if (v[i] != want[i])
            fail_msg("element %lld: got %.9g, want %.9g", (long long)i, v[i], want[i]);
}

#define S_CONST_2X2(name, a, b, c, d)                                                              \
    "node { name: '" name "' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"           \
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim {"   \
    " size: 2 } } float_val: " #a " float_val: " #b " float_val: " #c " float_val: " #d            \
    " } } } }\n"

#define S_PLACEHOLDER                                                                              \
    "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"

/* [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]; with b transposed,
 * [[1*5+2*6, 1*7+2*8], [3*5+4*6, 3*7+4*8]] = [[17,23],[39,53]]. */
static void test_default_attrs_matmul_runs_without_its_transpose_attrs(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(S_CONST_2X2("a", 1, 2, 3, 4) S_CONST_2X2(
        "b", 5, 6, 7, 8) "node { name: 'mm' op: 'MatMul' input: 'a' input: 'b'"
                         " attr { key: 'T' value { type: DT_FLOAT } } }\n"
                         "node { name: 'mt' op: 'MatMul' input: 'a' input: 'b'"
                         " attr { key: 'T' value { type: DT_FLOAT } }"
                         " attr { key: 'transpose_b' value { b: true } } }\n");
    zf_tensor_t *mm = s_run(gd, NULL, "mm");
    s_assert_floats(mm, ZF_SHAPE(2, 2), (const float[]){19, 22, 43, 50});
    zf_tensor_t *mt = s_run(gd, NULL, "mt");
    s_assert_floats(mt, ZF_SHAPE(2, 2), (const float[]){17, 23, 39, 53});
    zf_tensor_unref(&mm);
    zf_tensor_unref(&mt);
    zf_graphdef_free(&gd);
}

/* x = [[1,9,2],[4,3,8],[7,5,6]] (one channel); 2x2 windows, stride 1,
 * VALID: max(1,9,4,3) = 9, max(9,2,3,8) = 9, max(4,3,7,5) = 7,
 * max(3,8,5,6) = 8. */
static void test_default_attrs_maxpool_runs_without_t_or_data_format(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd =
        s_parse(S_PLACEHOLDER "node { name: 'mp' op: 'MaxPool' input: 'x'"
                              " attr { key: 'ksize' value { list { i: 1 i: 2 i: 2 i: 1 } } }"
                              " attr { key: 'strides' value { list { i: 1 i: 1 i: 1 i: 1 } } }"
                              " attr { key: 'padding' value { s: 'VALID' } } }\n");
    zf_tensor_t *x = s_floats((const float[]){1, 9, 2, 4, 3, 8, 7, 5, 6}, ZF_SHAPE(1, 3, 3, 1));
    zf_tensor_t *mp = s_run(gd, x, "mp");
    s_assert_floats(mp, ZF_SHAPE(1, 2, 2, 1), (const float[]){9, 9, 7, 8});
    /* Running filled in what the node left out. */
    const Tensorflow__NodeDef *node = gd->node[1];
    assert_int_equal(node->n_attr, 6);
    assert_string_equal(node->attr[3]->key, "T");
    assert_int_equal(node->attr[3]->value->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    assert_string_equal(node->attr[4]->key, "explicit_paddings");
    assert_string_equal(node->attr[5]->key, "data_format");
    zf_tensor_unref(&mp);
    zf_tensor_unref(&x);
    zf_graphdef_free(&gd);
}

/* x = [[1,2,3],[4,5,6],[7,8,9]], a 2x2 filter with two output channels:
 * [[1,2],[3,4]] and [[0,0],[0,1]], stride 1, VALID. Channel 0:
 * 1+4+12+20 = 37, 2+6+15+24 = 47, 4+10+21+32 = 67, 5+12+24+36 = 77;
 * channel 1 picks the window's bottom-right value: 5, 6, 8, 9. */
static void test_default_attrs_conv2d_runs_without_dilations_or_data_format(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(
        S_PLACEHOLDER "node { name: 'w' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
                      " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {"
                      " dim { size: 2 } dim { size: 2 } dim { size: 1 } dim { size: 2 } }"
                      " float_val: [1, 0, 2, 0, 3, 0, 4, 1] } } } }\n"
                      "node { name: 'conv' op: 'Conv2D' input: 'x' input: 'w'"
                      " attr { key: 'T' value { type: DT_FLOAT } }"
                      " attr { key: 'strides' value { list { i: 1 i: 1 i: 1 i: 1 } } }"
                      " attr { key: 'padding' value { s: 'VALID' } } }\n");
    zf_tensor_t *x = s_floats((const float[]){1, 2, 3, 4, 5, 6, 7, 8, 9}, ZF_SHAPE(1, 3, 3, 1));
    zf_tensor_t *conv = s_run(gd, x, "conv");
    s_assert_floats(conv, ZF_SHAPE(1, 2, 2, 2), (const float[]){37, 5, 47, 6, 67, 8, 77, 9});
    zf_tensor_unref(&conv);
    zf_tensor_unref(&x);
    zf_graphdef_free(&gd);
}

/* [[1,2,3],[4,5,6]] + [10,20,30] along the last (NHWC) dimension. */
static void test_default_attrs_biasadd_runs_without_data_format(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(
        S_PLACEHOLDER
        "node { name: 'b' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
        " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } }"
        " float_val: [10, 20, 30] } } } }\n"
        "node { name: 'ba' op: 'BiasAdd' input: 'x' input: 'b'"
        " attr { key: 'T' value { type: DT_FLOAT } } }\n");
    zf_tensor_t *x = s_floats((const float[]){1, 2, 3, 4, 5, 6}, ZF_SHAPE(2, 3));
    zf_tensor_t *ba = s_run(gd, x, "ba");
    s_assert_floats(ba, ZF_SHAPE(2, 3), (const float[]){11, 22, 33, 14, 25, 36});
    zf_tensor_unref(&ba);
    zf_tensor_unref(&x);
    zf_graphdef_free(&gd);
}

/* ---- TensorFlow's graph-default-attr.pbtxt -------------------------------- */

/* The graph: input [?,224,224,3] -> Conv2D with a 3x3x3x32 filter, strides
 * 2, SAME (no data_format, dilations, ...) -> MaxPool 2x2, strides 2, SAME
 * (no T, no data_format) -> [1,56,56,32].
 *
 * The input is zero but for four pixels: (0,0,c0) = 1, (3,5,c1) = 2,
 * (4,4,c0) = 1 and (223,223,c2) = -1. With SAME padding the 224 rows give
 * 112 outputs and one row of padding, all of it after the last row, so
 * conv output row r reads input rows 2r .. 2r+2 (and columns alike), with
 * filter row ky = input row - 2r. Writing w[ky][kx][c] for the filter's 32
 * output channels:
 *   conv(0,0)     = w[0][0][0]               from (0,0)
 *   conv(1,1)     = w[2][2][0]               from (4,4)
 *   conv(1,2)     = w[2][0][0] + 2 w[1][1][1] from (4,4) and (3,5)
 *   conv(2,1)     = w[0][2][0]               from (4,4)
 *   conv(2,2)     = w[0][0][0]               from (4,4)
 *   conv(111,111) = -w[1][1][2]              from (223,223)
 * and every other output is 0. The pool takes the max of each 2x2 block of
 * these, zeros included:
 *   pool(0,0)   = max(w[0][0][0], w[2][2][0], 0)
 *   pool(0,1)   = max(w[2][0][0] + 2 w[1][1][1], 0)
 *   pool(1,0)   = max(w[0][2][0], 0)
 *   pool(1,1)   = max(w[0][0][0], 0)
 *   pool(55,55) = max(-w[1][1][2], 0)
 * and 0 elsewhere. The filter values are the graph's own, read from the
 * Const's little-endian bytes. */

enum { S_IN = 224, S_OUT = 56, S_CH = 32 };

static float s_max0(float a)
{
    return a > 0 ? a : 0;
}

/* filter[ky][kx][c][k] from the weights Const. */
static void s_read_filter(const Tensorflow__GraphDef *gd, float filter[3][3][3][S_CH])
{
    const Tensorflow__NodeDef *w = NULL;
    for (size_t i = 0; i < gd->n_node; i++)
        if (strcmp(gd->node[i]->name, "MobilenetV1/Conv2d_0/weights") == 0) w = gd->node[i];
    assert_non_null(w);
    const Tensorflow__AttrValue *value = zf_node_attr(w, "value");
    assert_non_null(value);
    const ProtobufCBinaryData *bytes = &value->tensor->tensor_content;
    assert_int_equal(bytes->len, 3 * 3 * 3 * S_CH * 4);
    float *flat = &filter[0][0][0][0];
    for (size_t i = 0; i < bytes->len / 4; i++) {
        const uint8_t *b = bytes->data + 4 * i;
        uint32_t bits =
            (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        memcpy(&flat[i], &bits, sizeof bits);
    }
}

static void s_expected_pool(float w[3][3][3][S_CH], float *want)
{
    memset(want, 0, (size_t)S_OUT * S_OUT * S_CH * sizeof *want);
    for (int k = 0; k < S_CH; k++) {
        float a = w[0][0][0][k] > w[2][2][0][k] ? w[0][0][0][k] : w[2][2][0][k];
        want[(0 * S_OUT + 0) * S_CH + k] = s_max0(a);
        want[(0 * S_OUT + 1) * S_CH + k] = s_max0(w[2][0][0][k] + 2 * w[1][1][1][k]);
        want[(1 * S_OUT + 0) * S_CH + k] = s_max0(w[0][2][0][k]);
        want[(1 * S_OUT + 1) * S_CH + k] = s_max0(w[0][0][0][k]);
        want[((S_OUT - 1) * S_OUT + S_OUT - 1) * S_CH + k] = s_max0(-w[1][1][2][k]);
    }
}

static void test_default_attrs_run_tensorflows_graph_default_attr(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s =
        zf_graphdef_read_file(ZF_TF_DATA_DIR "/graph-default-attr.pbtxt", ZF_FORMAT_AUTO, &gd);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    float w[3][3][3][S_CH];
    s_read_filter(gd, w);
    float *want = malloc((size_t)S_OUT * S_OUT * S_CH * sizeof *want);
    assert_non_null(want);
    s_expected_pool(w, want);

    zf_tensor_t *x = NULL;
    zf_shape_t in_shape = ZF_SHAPE(1, S_IN, S_IN, 3);
    assert_true(zf_ok(zf_tensor_new(ZF_FLOAT, &in_shape, &x)));
    float *in = zf_tensor_data(x);
    in[(0 * S_IN + 0) * 3 + 0] = 1;
    in[(3 * S_IN + 5) * 3 + 1] = 2;
    in[(4 * S_IN + 4) * 3 + 0] = 1;
    in[((S_IN - 1) * S_IN + S_IN - 1) * 3 + 2] = -1;
    zf_local_session_t *session = s_session(gd);
    const char *feed = "input", *fetch = "MaxPool";
    zf_tensor_t *out = NULL;
    s = zf_local_session_run(session, &feed, &x, 1, &fetch, 1, NULL, 0, &out);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    s_assert_floats(out, ZF_SHAPE(1, S_OUT, S_OUT, S_CH), want);
    /* The expected values are not all zero: the test sees the filter. */
    int nonzero = 0;
    for (int i = 0; i < S_OUT * S_OUT * S_CH; i++) nonzero += want[i] != 0;
    assert_true(nonzero > 32);

    zf_tensor_unref(&out);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&session);
    free(want);
    zf_graphdef_free(&gd);
}

/* ---- partitions ------------------------------------------------------------- */

/* Partitions are made from the loaded graph, so the NodeDefs sent to an
 * executor spell out the defaults their source left out. */
static void test_default_attrs_are_in_the_partitions_of_a_graph(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd =
        s_parse(S_CONST_2X2("a", 1, 2, 3, 4) "node { name: 'mm' op: 'MatMul' input: 'a' input: 'a'"
                                             " attr { key: 'T' value { type: DT_FLOAT } } }\n");
    zf_graph_t *g = NULL;
    assert_true(zf_ok(zf_graph_new_from_graphdef(gd, &g)));
    zf_partition_device_t dev = {.incarnation = 1};
    assert_true(
        zf_ok(zf_device_name_parse("/job:localhost/replica:0/task:0/device:CPU:0", &dev.name)));
    const int assignment[2] = {0, 0};
    zf_partition_set_t *set = NULL;
    zf_status_t s = zf_partition_graph(g, &dev, 1, assignment, NULL, &set);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    assert_int_equal(set->n_parts, 1);
    const Tensorflow__GraphDef *part = set->parts[0].graph;
    const Tensorflow__NodeDef *mm = NULL;
    for (size_t i = 0; i < part->n_node; i++)
        if (strcmp(part->node[i]->name, "mm") == 0) mm = part->node[i];
    assert_non_null(mm);
    bool b = true;
    assert_true(zf_ok(zf_node_attr_bool(mm, "transpose_a", &b)));
    assert_false(b);
    b = true;
    assert_true(zf_ok(zf_node_attr_bool(mm, "transpose_b", &b)));
    assert_false(b);
    zf_partition_set_destroy(&set);
    zf_graph_destroy(&g);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_attrs_matmul_runs_without_its_transpose_attrs),
        cmocka_unit_test(test_default_attrs_maxpool_runs_without_t_or_data_format),
        cmocka_unit_test(test_default_attrs_conv2d_runs_without_dilations_or_data_format),
        cmocka_unit_test(test_default_attrs_biasadd_runs_without_data_format),
        cmocka_unit_test(test_default_attrs_run_tensorflows_graph_default_attr),
        cmocka_unit_test(test_default_attrs_are_in_the_partitions_of_a_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
