/* The training kernels through the in-process session: a graph whose nodes
 * leave out every attr with a default (as exported graphs do), so the op
 * table's defaults, the kernel definitions, placement and the engine all
 * take part. FusedBatchNormV3 and its gradient, BatchMatMulV2,
 * Conv2DBackpropInput and ResourceApplyMomentum over two steps, against
 * values worked out by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "session/local_session.h"

static const char s_graph[] =
    /* batch normalisation of x = [1, 2, 3, 4] (one channel), and its gradient */
    "node { name: 'x' op: 'Placeholder'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'scale' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 } }"
    " float_val: 2 } } } }\n"
    "node { name: 'offset' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 } }"
    " float_val: 1 } } } }\n"
    "node { name: 'none' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 0 } }"
    "  } } } }\n"
    "node { name: 'bn' op: 'FusedBatchNormV3' input: 'x' input: 'scale' input: 'offset'"
    " input: 'none' input: 'none' attr { key: 'T' value { type: DT_FLOAT } }"
    " attr { key: 'U' value { type: DT_FLOAT } } }\n"
    "node { name: 'dy' op: 'Placeholder'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'bn_grad' op: 'FusedBatchNormGradV3' input: 'dy' input: 'x' input: 'scale'"
    " input: 'bn:3' input: 'bn:4' input: 'bn:5' attr { key: 'T' value { type: DT_FLOAT } }"
    " attr { key: 'U' value { type: DT_FLOAT } } }\n"
    /* a batched product */
    "node { name: 'a' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { "
    "size: 2 } }"
    " float_val: 1 float_val: 2 float_val: 3 float_val: 4 } } } }\n"
    "node { name: 'b' op: 'Placeholder'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'bmm' op: 'BatchMatMulV2' input: 'a' input: 'b' attr { key: 'T' value { type: "
    "DT_FLOAT } } }\n"
    /* a convolution's input gradient: 3x3 image, 2x2 filter of ones */
    "node { name: 'sizes' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 4 } }"
    " int_val: 1 int_val: 3 int_val: 3 int_val: 1 } } } }\n"
    "node { name: 'ones' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { "
    "size: 2 } dim { size: 1 } dim { size: 1 } }"
    " float_val: 1 float_val: 1 float_val: 1 float_val: 1 } } } }\n"
    "node { name: 'grads' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 } dim { "
    "size: 2 } dim { size: 2 } dim { size: 1 } }"
    " float_val: 1 float_val: 2 float_val: 3 float_val: 4 } } } }\n"
    "node { name: 'conv_grad' op: 'Conv2DBackpropInput' input: 'sizes' input: 'ones'"
    " input: 'grads' attr { key: 'T' value { type: DT_FLOAT } }"
    " attr { key: 'strides' value { list { i: 1 i: 1 i: 1 i: 1 } } }"
    " attr { key: 'padding' value { s: 'VALID' } } }\n"
    /* momentum on a resource variable */
    "node { name: 'w' op: 'VarHandleOp' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'shape' value { shape { dim { size: 2 } } } } }\n"
    "node { name: 'accum' op: 'VarHandleOp' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'shape' value { shape { dim { size: 2 } } } } }\n"
    "node { name: 'w0' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }"
    " float_val: 1 float_val: 1 } } } }\n"
    "node { name: 'zeros' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }"
    " float_val: 0 float_val: 0 } } } }\n"
    "node { name: 'init_w' op: 'AssignVariableOp' input: 'w' input: 'w0'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'init_accum' op: 'AssignVariableOp' input: 'accum' input: 'zeros'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'init' op: 'NoOp' input: '^init_w' input: '^init_accum' }\n"
    "node { name: 'lr' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {  }"
    " float_val: 0.1 } } } }\n"
    "node { name: 'momentum' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {  }"
    " float_val: 0.9 } } } }\n"
    "node { name: 'g' op: 'Placeholder'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'train' op: 'ResourceApplyMomentum' input: 'w' input: 'accum' input: 'lr'"
    " input: 'g' input: 'momentum' attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'read' op: 'ReadVariableOp' input: 'w'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n";

static zf_tensor_t *s_floats(zf_shape_t shape, const float *v)
{
    zf_tensor_t *t = NULL;
    int64_t n = 1;
    for (int d = 0; d < shape.rank; d++) n *= shape.dims[d];
    assert_int_equal(
        zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, (size_t)n * sizeof(float), &t).code, ZF_OK);
    return t;
}

static void s_expect(const zf_tensor_t *t, const double *want, int n, double tol)
{
    assert_int_equal(zf_tensor_num_elements(t), n);
    const float *got = zf_tensor_data(t);
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol))
            fail_msg("element %d: got %.9g, want %.9g", i, (double)got[i], want[i]);
}

static void s_ok(zf_status_t st)
{
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
}

static void test_a_graph_without_default_attrs_trains(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    s_ok(zf_graphdef_read_mem(s_graph, strlen(s_graph), ZF_FORMAT_PBTXT, &gd));
    zf_local_session_t *s = NULL;
    s_ok(zf_local_session_new(gd, NULL, &s));

    const char *feeds[3] = {"x", "dy", "b"};
    zf_tensor_t *values[3] = {
        s_floats(ZF_SHAPE(4, 1, 1, 1), (const float[]){1, 2, 3, 4}),
        s_floats(ZF_SHAPE(4, 1, 1, 1), (const float[]){1, 0, 0, 0}),
        s_floats(ZF_SHAPE(2, 2, 2), (const float[]){1, 0, 0, 1, 2, 0, 0, 2}),
    };
    const char *fetches[6] = {"bn:0", "bn:2", "bn_grad:1", "bn_grad:2", "bmm", "conv_grad"};
    zf_tensor_t *out[6] = {NULL};
    s_ok(zf_local_session_run(s, feeds, values, 3, fetches, 6, NULL, 0, out));
    /* mean 2.5, variance 1.25 (5/3 corrected), epsilon 0.0001 by default */
    double inv = 1 / sqrt(1.25 + 0.0001);
    s_expect(out[0], (const double[]){1 - 3 * inv, 1 - inv, 1 + inv, 1 + 3 * inv}, 4, 1e-5);
    s_expect(out[1], (const double[]){5.0 / 3.0}, 1, 1e-6);
    s_expect(out[2], (const double[]){-1.5 * inv}, 1, 1e-5); /* sum(dy * normalised x) */
    s_expect(out[3], (const double[]){1}, 1, 1e-6);          /* sum(dy) */
    s_expect(out[4], (const double[]){1, 2, 3, 4, 2, 4, 6, 8}, 8, 0);
    s_expect(out[5], (const double[]){1, 3, 2, 4, 10, 6, 3, 7, 4}, 9, 0);
    for (int i = 0; i < 6; i++) zf_tensor_unref(&out[i]);
    for (int i = 0; i < 3; i++) zf_tensor_unref(&values[i]);

    const char *init = "init", *train = "train", *read = "read", *g = "g";
    s_ok(zf_local_session_run(s, NULL, NULL, 0, NULL, 0, &init, 1, NULL));
    zf_tensor_t *grad = s_floats(ZF_SHAPE(2), (const float[]){1, -1}), *w = NULL;
    /* accum 1, then 1.9; w 1 - 0.1 * 1 = 0.9, then 0.9 - 0.19 = 0.71 */
    const double want[2][2] = {{0.9, 1.1}, {0.71, 1.29}};
    for (int step = 0; step < 2; step++) {
        s_ok(zf_local_session_run(s, &g, &grad, 1, NULL, 0, &train, 1, NULL));
        s_ok(zf_local_session_run(s, NULL, NULL, 0, &read, 1, NULL, 0, &w));
        s_expect(w, want[step], 2, 1e-6);
        zf_tensor_unref(&w);
    }
    zf_tensor_unref(&grad);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_graph_without_default_attrs_trains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
