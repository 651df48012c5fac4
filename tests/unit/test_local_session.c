/* Tests for the in-process session (session/local_session.h): the example
 * graphs against independently computed values, partitioned runs through
 * the rendezvous, plan caching, variables, errors, timeouts, and the
 * equivalence property — random graphs partitioned over 1-4 CPU devices
 * give bit for bit what one partition gives. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/tensor_print.h"
#include "executor/kernels/kernel.h"
#include "executor/devices/gpu.h"
#include "session/local_session.h"
#include "test_util.h"

#define EXAMPLES ZF_TEST_DATA_DIR "/../../examples"
#define CPU(k)   "/job:localhost/replica:0/task:0/device:CPU:" #k

static Tensorflow__GraphDef *s_read(const char *path)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_file(path, ZF_FORMAT_AUTO, &gd);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    return gd;
}

static Tensorflow__GraphDef *s_parse(const char *text)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd);
    if (!zf_ok(s)) fail_msg("%s\n%s", zf_status_msg(&s), text);
    return gd;
}

static zf_local_session_t *s_session(Tensorflow__GraphDef *gd, const char *devices)
{
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = devices;
    zf_local_session_t *s = NULL;
    zf_status_t st = zf_local_session_new(gd, &opts, &s);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    return s;
}

static zf_tensor_t *s_floats(const float *v, zf_shape_t shape)
{
    zf_tensor_t *t = NULL;
    int64_t n = 1;
    for (int d = 0; d < shape.rank; d++) n *= shape.dims[d];
    assert_int_equal(
        zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, (size_t)n * sizeof(float), &t).code, ZF_OK);
    return t;
}

/* Runs with one feed and one fetch; fails the test on error. */
static zf_tensor_t *s_run1(zf_local_session_t *s, const char *feed, zf_tensor_t *value,
                           const char *fetch)
{
    zf_tensor_t *out = NULL;
    zf_status_t st = zf_local_session_run(s, &feed, &value, feed ? 1 : 0, &fetch, 1, NULL, 0, &out);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    return out;
}

static void s_assert_close(const zf_tensor_t *t, const double *want, int n, double tol)
{
    assert_int_equal(zf_tensor_dtype(t), ZF_FLOAT);
    assert_int_equal(zf_tensor_num_elements(t), n);
    const float *got = zf_tensor_data(t);
    for (int i = 0; i < n; i++)
        if (!(got[i] >= want[i] - tol && got[i] <= want[i] + tol))
            fail_msg("element %d: got %.9g, want %.9g", i, (double)got[i], want[i]);
}

/* Sets a node's requested device (the string the parser allocated, or
 * protobuf-c's shared empty default, is replaced). */
static void s_pin(Tensorflow__GraphDef *gd, const char *node, const char *device)
{
    for (size_t i = 0; i < gd->n_node; i++) {
        Tensorflow__NodeDef *nd = gd->node[i];
        if (strcmp(nd->name, node) != 0) continue;
        if (nd->device && nd->device != protobuf_c_empty_string) free(nd->device);
        nd->device = strdup(device);
        return;
    }
    fail_msg("no node %s", node);
}

/* ---- the examples ------------------------------------------------------------ */

static const float s_mlp_x[12] = {1, 2, 3, 4, -1, 0.5f, 2, -3, 0.25f, -0.5f, 0.75f, 1};
/* softmax(relu(x W1 + b1) W2 + b2) for s_mlp_x, computed with NumPy 1.24
 * (float32) from the weights in examples/mlp.pbtxt. */
static const double s_mlp_probs[6] = {0.197816104, 0.802183926, 0.483755708,
                                      0.516244292, 0.484380096, 0.515619934};

static void test_local_session_runs_the_mlp_example(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(EXAMPLES "/mlp.pbtxt");
    zf_local_session_t *s = s_session(gd, NULL);
    assert_int_equal(zf_local_session_num_devices(s), 1);
    assert_string_equal(zf_local_session_device_name(s, 0), CPU(0));
    zf_tensor_t *x = s_floats(s_mlp_x, ZF_SHAPE(3, 4));
    zf_tensor_t *probs = s_run1(s, "x", x, "probs");
    assert_int_equal(zf_tensor_shape(probs)->rank, 2);
    assert_int_equal(zf_tensor_shape(probs)->dims[0], 3);
    s_assert_close(probs, s_mlp_probs, 6, 1e-6);
    assert_int_equal(zf_local_session_last_num_partitions(s), 1);
    zf_tensor_unref(&probs);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&s);
    assert_null(s);
    zf_graphdef_free(&gd);
}

/* The feed of the CNN test: x[i] = ((3 i) mod 17 - 8) / 8 over [2,6,6,2]. */
static zf_tensor_t *s_cnn_feed(void)
{
    float v[144];
    for (int i = 0; i < 144; i++) v[i] = (float)((i * 3) % 17 - 8) / 8.0f;
    return s_floats(v, ZF_SHAPE(2, 6, 6, 2));
}

/* softmax(matmul(reshape(maxpool(relu(conv2d(x) + b))), W) + b) for
 * s_cnn_feed(), computed in float64 with NumPy 1.24 from the float32
 * weights of examples/cnn.pbtxt (SAME padding: one pixel each side). */
static const double s_cnn_probs[6] = {0.1604607199, 0.2562552897, 0.5832839904,
                                      0.1593153585, 0.5447138866, 0.2959707549};
/* The first pooled pixel of batch 0, same computation. */
static const double s_cnn_pool000[4] = {1.7750000143, 0.6499999994, 0.0, 1.0875000171};

static void test_local_session_runs_the_cnn_example(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(EXAMPLES "/cnn.pbtxt");
    zf_local_session_t *s = s_session(gd, NULL);
    zf_tensor_t *x = s_cnn_feed();
    const char *fetches[] = {"probs", "pool"};
    zf_tensor_t *out[2] = {NULL, NULL};
    zf_status_t st =
        zf_local_session_run(s, (const char *[]){"x"}, &x, 1, fetches, 2, NULL, 0, out);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    s_assert_close(out[0], s_cnn_probs, 6, 1e-5);
    const zf_shape_t *ps = zf_tensor_shape(out[1]);
    assert_int_equal(ps->rank, 4);
    assert_int_equal(ps->dims[1], 3);
    assert_int_equal(ps->dims[3], 4);
    const float *pool = zf_tensor_data(out[1]);
    for (int c = 0; c < 4; c++)
        assert_true(pool[c] > s_cnn_pool000[c] - 1e-5 && pool[c] < s_cnn_pool000[c] + 1e-5);
    zf_tensor_unref(&out[0]);
    zf_tensor_unref(&out[1]);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

/* A feed whose bytes the caller changes between runs is read afresh each
 * run, also by Conv2D, which caches its filter reordered for oneDNN keyed
 * on the filter's buffer. */
static void test_local_session_reads_a_feed_changed_in_place_again(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(
        "node { name: 'x' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
        " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 }"
        " dim { size: 1 } dim { size: 2 } dim { size: 1 } } float_val: 1 float_val: 2 } } } }\n"
        "node { name: 'f' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
        "node { name: 'y' op: 'Conv2D' input: 'x' input: 'f'"
        " attr { key: 'T' value { type: DT_FLOAT } }"
        " attr { key: 'strides' value { list { i: 1 i: 1 i: 1 i: 1 } } }"
        " attr { key: 'padding' value { s: 'VALID' } } }\n");
    zf_local_session_t *s = s_session(gd, NULL);
    zf_tensor_t *f = s_floats((const float[]){2}, ZF_SHAPE(1, 1, 1, 1));
    for (int k = 2; k <= 4; k++) {
        *(float *)zf_tensor_data(f) = (float)k;
        zf_tensor_t *y = s_run1(s, "f", f, "y");
        s_assert_close(y, (const double[]){k, 2 * k}, 2, 0);
        zf_tensor_unref(&y);
    }
    zf_tensor_unref(&f);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_local_session_runs_pinned_nodes_as_two_partitions(void **state)
{
    (void)state;
    Tensorflow__GraphDef *one = s_read(EXAMPLES "/mlp.pbtxt");
    Tensorflow__GraphDef *two = s_read(EXAMPLES "/mlp.pbtxt");
    const char *layer1[] = {"x",          "layer1/weights", "layer1/bias", "layer1/matmul",
                            "layer1/add", "layer1/relu"};
    const char *layer2[] = {"layer2/weights", "layer2/bias", "layer2/matmul", "layer2/add",
                            "probs"};
    for (size_t i = 0; i < 6; i++) s_pin(two, layer1[i], "/cpu:0");
    for (size_t i = 0; i < 5; i++) s_pin(two, layer2[i], "/device:CPU:1");
    zf_local_session_t *s1 = s_session(one, "cpu:1");
    zf_local_session_t *s2 = s_session(two, "cpu:2");
    assert_string_equal(zf_local_session_node_device(s2, "layer1/relu"), CPU(0));
    assert_string_equal(zf_local_session_node_device(s2, "layer2/matmul"), CPU(1));
    zf_tensor_t *x = s_floats(s_mlp_x, ZF_SHAPE(3, 4));
    for (int rep = 0; rep < 3; rep++) {
        zf_tensor_t *a = s_run1(s1, "x", x, "probs");
        zf_tensor_t *b = s_run1(s2, "x:0", x, "probs:0");
        assert_int_equal(zf_local_session_last_num_partitions(s1), 1);
        assert_int_equal(zf_local_session_last_num_partitions(s2), 2);
        assert_true(zf_tensor_equal(a, b)); /* bit for bit */
        s_assert_close(b, s_mlp_probs, 6, 1e-6);
        zf_tensor_unref(&a);
        zf_tensor_unref(&b);
    }
    /* An intermediate of partition 0 fetched alongside partition 1's output. */
    const char *fetches[] = {"probs", "layer1/relu"};
    zf_tensor_t *out[2];
    assert_int_equal(
        zf_local_session_run(s2, (const char *[]){"x"}, &x, 1, fetches, 2, NULL, 0, out).code,
        ZF_OK);
    assert_int_equal(zf_tensor_shape(out[1])->dims[1], 3);
    zf_tensor_unref(&out[0]);
    zf_tensor_unref(&out[1]);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&s1);
    zf_local_session_destroy(&s2);
    zf_graphdef_free(&one);
    zf_graphdef_free(&two);
}

static void test_local_session_caches_one_plan_per_signature(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(EXAMPLES "/mlp.pbtxt");
    zf_local_session_t *s = s_session(gd, NULL);
    zf_tensor_t *x = s_floats(s_mlp_x, ZF_SHAPE(3, 4));
    zf_tensor_t *t = s_run1(s, "x", x, "probs");
    zf_tensor_unref(&t);
    t = s_run1(s, "x:0", x, "probs:0"); /* the same signature, spelled differently */
    zf_tensor_unref(&t);
    assert_int_equal(zf_local_session_num_callables(s), 1);
    t = s_run1(s, "x", x, "layer1/relu");
    zf_tensor_unref(&t);
    assert_int_equal(zf_local_session_num_callables(s), 2);
    /* Fetching the same tensor twice gives it twice. */
    const char *fetches[] = {"probs", "layer1/relu", "probs:0"};
    zf_tensor_t *out[3];
    assert_int_equal(
        zf_local_session_run(s, (const char *[]){"x"}, &x, 1, fetches, 3, NULL, 0, out).code,
        ZF_OK);
    assert_true(zf_tensor_equal(out[0], out[2]));
    assert_int_equal(zf_local_session_num_callables(s), 3);
    for (int i = 0; i < 3; i++) zf_tensor_unref(&out[i]);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static const char s_var_graph[] =
    "node { name: 'v' op: 'VariableV2' attr { key: 'dtype' value { type: DT_FLOAT } }"
    "  attr { key: 'shape' value { shape { dim { size: 2 } } } } }\n"
    "node { name: 'init_value' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }"
    "  float_val: 1 float_val: 2 } } } }\n"
    "node { name: 'init' op: 'Assign' input: 'v' input: 'init_value'"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'alpha' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 0.5 } } } }\n"
    "node { name: 'grad' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'train' op: 'ApplyGradientDescent' input: 'v' input: 'alpha' input: 'grad'"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'read' op: 'Identity' input: 'v' attr { key: 'T' value { type: DT_FLOAT } } }\n";

/* Runs graph text: "read" fails FAILED_PRECONDITION with uninit_msg before
 * "init"; then each of `steps` runs of "train" (feeding grad) moves the
 * two-element variable from v0 by delta per step. */
static void s_expect_training(const char *text, const char *uninit_msg, const float grad_v[2],
                              int steps, const float v0[2], const float delta[2])
{
    Tensorflow__GraphDef *gd = s_parse(text);
    zf_local_session_t *s = s_session(gd, NULL);
    zf_tensor_t *out = NULL;
    const char *read = "read";
    zf_status_t st = zf_local_session_run(s, NULL, NULL, 0, &read, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_FAILED_PRECONDITION);
    assert_non_null(strstr(zf_status_msg(&st), uninit_msg));
    assert_null(out);
    zf_status_clear(&st);
    const char *init = "init";
    assert_int_equal(zf_local_session_run(s, NULL, NULL, 0, NULL, 0, &init, 1, NULL).code, ZF_OK);
    zf_tensor_t *grad = s_floats(grad_v, ZF_SHAPE(2));
    for (int step = 1; step <= steps; step++) {
        const char *train = "train";
        assert_int_equal(
            zf_local_session_run(s, (const char *[]){"grad"}, &grad, 1, NULL, 0, &train, 1, NULL)
                .code,
            ZF_OK);
        out = s_run1(s, NULL, NULL, "read");
        const float *v = zf_tensor_data(out);
        assert_true(v[0] == v0[0] + delta[0] * (float)step);
        assert_true(v[1] == v0[1] + delta[1] * (float)step);
        zf_tensor_unref(&out);
    }
    zf_tensor_unref(&grad);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_local_session_variables_persist_across_runs(void **state)
{
    (void)state; /* v -= 0.5 * [2,-4] per step */
    s_expect_training(s_var_graph, "Attempting to use uninitialized value v",
                      (const float[]){2, -4}, 3, (const float[]){1, 2}, (const float[]){-1, 2});
}

static const char s_resource_var_graph[] =
    "node { name: 'h' op: 'VarHandleOp' attr { key: 'dtype' value { type: DT_FLOAT } }"
    "  attr { key: 'shape' value { shape { dim { size: 2 } } } }"
    "  attr { key: 'shared_name' value { s: 'w' } } }\n"
    "node { name: 'init_value' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }"
    "  float_val: 3 float_val: 5 } } } }\n"
    "node { name: 'init' op: 'AssignVariableOp' input: 'h' input: 'init_value'"
    "  attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'alpha' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 0.25 } } } }\n"
    "node { name: 'grad' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'train' op: 'ResourceApplyGradientDescent' input: 'h' input: 'alpha'"
    "  input: 'grad' attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'read' op: 'ReadVariableOp' input: 'h'"
    "  attr { key: 'dtype' value { type: DT_FLOAT } } }\n";

static void test_local_session_resource_variables_persist_across_runs(void **state)
{
    (void)state; /* w -= 0.25 * [4,-8] per step */
    s_expect_training(s_resource_var_graph, "Could not find variable w", (const float[]){4, -8}, 2,
                      (const float[]){3, 5}, (const float[]){-1, 2});
}

/* ---- errors ---------------------------------------------------------------- */

static void s_expect_new_error(const char *text, zf_code_t code, const char *needle)
{
    Tensorflow__GraphDef *gd = s_parse(text);
    zf_local_session_t *s = NULL;
    zf_status_t st = zf_local_session_new(gd, NULL, &s);
    assert_int_equal(st.code, code);
    if (!strstr(zf_status_msg(&st), needle))
        fail_msg("'%s' not in '%s'", needle, zf_status_msg(&st));
    assert_null(s);
    zf_status_clear(&st);
    zf_graphdef_free(&gd);
}

static void test_local_session_refuses_graphs_with_ops_it_cannot_run(void **state)
{
    (void)state;
    s_expect_new_error("node { name: 'odd' op: 'NoSuchOp' }", ZF_INVALID_ARGUMENT,
                       "Op 'NoSuchOp' used by node odd");
    s_expect_new_error(
        "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
        "node { name: 'w' op: 'Sin' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }",
        ZF_INVALID_ARGUMENT, "Sin");
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    Tensorflow__GraphDef *gd = s_parse("node { name: 'n' op: 'NoOp' }");
    zf_local_session_t *s = NULL;
    int gpus = 0;
    zf_status_t st = zf_gpu_device_count(&gpus);
    zf_status_clear(&st);
    if (gpus == 0) { /* no GPU visible here (or no CUDA in the build): the device says so */
        opts.devices = "gpu:1";
        st = zf_local_session_new(gd, &opts, &s);
        assert_int_equal(st.code, ZF_UNAVAILABLE);
        assert_non_null(strstr(zf_status_msg(&st), "/job:localhost/replica:0/task:0/device:GPU:0"));
        assert_null(s);
        zf_status_clear(&st);
    }
    opts.devices = "cpu:0";
    st = zf_local_session_new(gd, &opts, &s);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&st);
    zf_graphdef_free(&gd);
}

static void test_local_session_checks_feeds_and_fetches(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(EXAMPLES "/mlp.pbtxt");
    zf_local_session_t *s = s_session(gd, NULL);
    zf_tensor_t *x = s_floats(s_mlp_x, ZF_SHAPE(2, 6));
    const char *fetch = "probs";
    zf_tensor_t *out = NULL;
    zf_status_t st =
        zf_local_session_run(s, (const char *[]){"x"}, &x, 1, &fetch, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&st),
                        "Cannot feed value of shape [2,6] for Tensor 'x:0', which has shape [?,4]");
    zf_status_clear(&st);
    zf_tensor_t *i = NULL;
    assert_int_equal(zf_tensor_new_scalar_int32(3, &i).code, ZF_OK);
    st = zf_local_session_run(s, (const char *[]){"x"}, &i, 1, &fetch, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(
        zf_status_msg(&st),
        "Cannot feed value of dtype int32 for Tensor 'x:0', which has dtype float32");
    zf_status_clear(&st);
    zf_tensor_t *none = NULL;
    st = zf_local_session_run(s, (const char *[]){"x"}, &none, 1, &fetch, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&st), "feed 'x:0' has no value");
    zf_status_clear(&st);
    zf_tensor_t *x2[2] = {x, x};
    st = zf_local_session_run(s, (const char *[]){"x", "x:0"}, x2, 2, &fetch, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&st), "feed 'x:0' is given more than once"));
    zf_status_clear(&st);
    const char *bad = "nosuch:0";
    st = zf_local_session_run(s, NULL, NULL, 0, &bad, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&st), "nosuch"));
    zf_status_clear(&st);
    bad = "probs:x";
    st = zf_local_session_run(s, NULL, NULL, 0, &bad, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&st), "fetch 'probs:x'"));
    zf_status_clear(&st);
    /* Not feeding the Placeholder is the Placeholder kernel's error. */
    st = zf_local_session_run(s, NULL, NULL, 0, &fetch, 1, NULL, 0, &out);
    assert_int_not_equal(st.code, ZF_OK);
    assert_non_null(strstr(zf_status_msg(&st), "x"));
    assert_null(out);
    zf_status_clear(&st);
    zf_tensor_unref(&i);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

/* a (CPU:0) -> mm (CPU:1) with shapes MatMul rejects at run time. */
static const char s_bad_matmul[] =
    "node { name: 'a' op: 'Placeholder' device: '/cpu:0' attr { key: 'dtype' value { type: "
    "DT_FLOAT } } }\n"
    "node { name: 'b' op: 'Placeholder' device: '/cpu:0' attr { key: 'dtype' value { type: "
    "DT_FLOAT } } }\n"
    "node { name: 'ia' op: 'Identity' input: 'a' device: '/cpu:0' attr { key: 'T' value { type: "
    "DT_FLOAT } } }\n"
    "node { name: 'mm' op: 'MatMul' input: 'ia' input: 'b' device: '/cpu:1'"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'out' op: 'Identity' input: 'mm' device: '/cpu:0' attr { key: 'T' value { type: "
    "DT_FLOAT } } }\n";

static void test_local_session_reports_the_failing_kernel_as_the_root_cause(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(s_bad_matmul);
    zf_local_session_t *s = s_session(gd, "cpu:2");
    zf_tensor_t *a = s_floats((const float[]){1, 2, 3, 4, 5, 6}, ZF_SHAPE(2, 3));
    zf_tensor_t *b = s_floats((const float[]){1, 2, 3, 4}, ZF_SHAPE(2, 2));
    zf_tensor_t *feeds[2] = {a, b};
    const char *fetch = "out";
    zf_tensor_t *out = NULL;
    for (int rep = 0; rep < 5; rep++) {
        zf_status_t st =
            zf_local_session_run(s, (const char *[]){"a", "b"}, feeds, 2, &fetch, 1, NULL, 0, &out);
        assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
        /* CPU:1's MatMul failed; CPU:0's waiting recv saw only the abort. */
        const char *msg = zf_status_msg(&st);
        if (strncmp(msg, CPU(1) ": mm (MatMul): ", strlen(CPU(1) ": mm (MatMul): ")) != 0)
            fail_msg("unexpected error: %s", msg);
        assert_non_null(strstr(msg, "[2,3]"));
        assert_non_null(strstr(msg, "[2,2]"));
        assert_null(out);
        zf_status_clear(&st);
    }
    /* The session is still usable with good inputs. */
    zf_tensor_t *c = s_floats((const float[]){1, 0, 0, 1, 0, 0}, ZF_SHAPE(3, 2));
    feeds[1] = c;
    assert_int_equal(
        zf_local_session_run(s, (const char *[]){"a", "b"}, feeds, 2, &fetch, 1, NULL, 0, &out)
            .code,
        ZF_OK);
    const float *v = zf_tensor_data(out);
    assert_true(v[0] == 1.0f && v[1] == 2.0f && v[2] == 4.0f && v[3] == 5.0f);
    zf_tensor_unref(&out);
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
    zf_tensor_unref(&c);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_local_session_aborts_a_step_past_its_timeout(void **state)
{
    (void)state;
    /* A _Recv nobody sends to: the step can only end by the deadline. */
    Tensorflow__GraphDef *gd =
        s_parse("node { name: 'r' op: '_Recv' attr { key: 'tensor_type' value { type: DT_FLOAT } }"
                "  attr { key: 'tensor_name' value { s: 'nobody' } }"
                "  attr { key: 'send_device' value { s: '" CPU(
                    0) "' } }"
                       "  attr { key: 'send_device_incarnation' value { i: 1 } }"
                       "  attr { key: 'recv_device' value { s: '" CPU(
                           0) "' } }"
                              "  attr { key: 'client_terminated' value { b: false } } }\n"
                              "node { name: 'i' op: 'Identity' input: 'r' attr { key: 'T' value { "
                              "type: DT_FLOAT } } }\n");
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.timeout_ms = 50;
    zf_local_session_t *s = NULL;
    assert_int_equal(zf_local_session_new(gd, &opts, &s).code, ZF_OK);
    const char *fetch = "i";
    zf_tensor_t *out = NULL;
    zf_status_t st = zf_local_session_run(s, NULL, NULL, 0, &fetch, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_DEADLINE_EXCEEDED);
    assert_non_null(strstr(zf_status_msg(&st), "did not finish within 50 ms"));
    zf_status_clear(&st);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

typedef struct {
    zf_local_session_t *s;
    int ok;
} s_thread_t;

static void *s_run_many(void *arg)
{
    s_thread_t *t = arg;
    zf_tensor_t *x = NULL;
    zf_shape_t shape = ZF_SHAPE(3, 4);
    if (!zf_ok(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, s_mlp_x, sizeof s_mlp_x, &x)))
        return NULL;
    for (int i = 0; i < 30; i++) {
        const char *feed = "x", *fetch = "probs";
        zf_tensor_t *out = NULL;
        zf_status_t st = zf_local_session_run(t->s, &feed, &x, 1, &fetch, 1, NULL, 0, &out);
        if (zf_ok(st) && ((const float *)zf_tensor_data(out))[0] > 0.1978f &&
            ((const float *)zf_tensor_data(out))[0] < 0.1979f)
            t->ok++;
        zf_status_clear(&st);
        zf_tensor_unref(&out);
    }
    zf_tensor_unref(&x);
    return NULL;
}

static void test_local_session_runs_steps_from_several_threads(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(EXAMPLES "/mlp.pbtxt");
    s_pin(gd, "layer2/matmul", "/cpu:1");
    zf_local_session_t *s = s_session(gd, "cpu:2");
    s_thread_t t[3] = {{s, 0}, {s, 0}, {s, 0}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, s_run_many, &t[i]), 0);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].ok, 30);
    }
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

/* ---- the equivalence property ------------------------------------------------ */

static uint64_t s_rng;

static uint32_t s_rand(uint32_t n)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t)(s_rng % n);
}

typedef struct {
    char *text;
    size_t len, cap;
} s_text_t;

static void s_add(s_text_t *t, const char *fmt, ...) ZF_PRINTF(2, 3);
static void s_add(s_text_t *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->text + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n + 64;
        t->text = realloc(t->text, t->cap);
    }
}

static const char *const s_unary[] = {"Identity", "Neg",     "Square", "Relu", "Tanh",
                                      "Sigmoid",  "Softmax", "Relu6",  "Exp"};
static const char *const s_binary[] = {"AddV2", "Sub", "Mul", "Maximum", "Minimum", "MatMul"};

/* One random graph of [3,3] float tensors; every node pinned at random to
 * one of ndev CPUs (or left to the placer) when pinned is set. The same
 * seed gives the same graph either way. */
static char *s_random_graph(uint64_t seed, int ndev, bool pinned, int *n_nodes)
{
    s_rng = seed * 2654435761u + 1;
    s_text_t t = {0};
    int n = 4 + (int)s_rand(26);
    *n_nodes = n;
    static const char *const spellings[] = {
        "/job:localhost/replica:0/task:0/device:CPU:", "/cpu:", "/device:CPU:"};
    for (int i = 0; i < n; i++) {
        char dev[96] = "";
        uint32_t which = s_rand(3), k = s_rand((uint32_t)ndev), pin = s_rand(5);
        if (pinned && pin > 0) snprintf(dev, sizeof dev, "%s%u", spellings[which], k);
        s_add(&t, "node { name: 'n%d' device: '%s' ", i, dev);
        if (i == 0) {
            s_add(&t, "op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n");
            continue;
        }
        uint32_t kind = i < 3 ? 0 : 1 + s_rand(3);
        if (kind == 0) { /* a constant */
            s_add(&t, "op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: "
                      "'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } "
                      "dim { size: 3 } }");
            for (int e = 0; e < 9; e++) s_add(&t, " float_val: %g", ((int)s_rand(33) - 16) / 8.0);
            s_add(&t, " } } } }\n");
            continue;
        }
        bool binary = kind >= 2;
        const char *op = binary ? s_binary[s_rand(6)] : s_unary[s_rand(9)];
        uint32_t a = s_rand((uint32_t)i), b = s_rand((uint32_t)i);
        s_add(&t, "op: '%s' input: 'n%u' ", op, a);
        if (binary) s_add(&t, "input: 'n%u' ", b);
        uint32_t c = s_rand((uint32_t)i);
        if (s_rand(4) == 0 && c != a && c != b) s_add(&t, "input: '^n%u' ", c);
        s_add(&t, "attr { key: 'T' value { type: DT_FLOAT } } ");
        if (strcmp(op, "MatMul") == 0)
            s_add(&t, "attr { key: 'transpose_a' value { b: %s } } ", s_rand(2) ? "true" : "false");
        s_add(&t, "}\n");
    }
    return t.text;
}

/* Fetches the last node and two others; feeds n0. */
static void s_run_random(zf_local_session_t *s, int n, zf_tensor_t *feed, zf_tensor_t **out,
                         int *n_out)
{
    char names[3][16];
    const char *fetches[3];
    snprintf(names[0], 16, "n%d", n - 1);
    snprintf(names[1], 16, "n%d", n / 2);
    snprintf(names[2], 16, "n%d", 1 + n / 3);
    for (int i = 0; i < 3; i++) fetches[i] = names[i];
    const char *feed_name = "n0";
    zf_status_t st = zf_local_session_run(s, &feed_name, &feed, 1, fetches, 3, NULL, 0, out);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    *n_out = 3;
}

static void test_local_session_partitioned_runs_equal_unpartitioned_runs(void **state)
{
    (void)state;
    float xv[9] = {0.5f, -1, 2, 0, 1.5f, -0.25f, 3, -2, 1};
    zf_tensor_t *x = s_floats(xv, ZF_SHAPE(3, 3));
    int max_parts = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        int ndev = 1 + (int)(seed % 4), n = 0;
        char *plain = s_random_graph(seed, ndev, false, &n);
        char *pinned = s_random_graph(seed, ndev, true, &n);
        Tensorflow__GraphDef *g1 = s_parse(plain), *g2 = s_parse(pinned);
        char devices[16];
        snprintf(devices, sizeof devices, "cpu:%d", ndev);
        zf_local_session_t *s1 = s_session(g1, "cpu:1"), *s2 = s_session(g2, devices);
        zf_tensor_t *a[3], *b[3];
        int na = 0, nb = 0;
        s_run_random(s1, n, x, a, &na);
        s_run_random(s2, n, x, b, &nb);
        assert_int_equal(zf_local_session_last_num_partitions(s1), 1);
        if (zf_local_session_last_num_partitions(s2) > max_parts)
            max_parts = zf_local_session_last_num_partitions(s2);
        for (int i = 0; i < na; i++) {
            if (!zf_tensor_equal(a[i], b[i])) {
                char *ta = NULL, *tb = NULL;
                zf_tensor_format(a[i], &ta);
                zf_tensor_format(b[i], &tb);
                fail_msg("seed %llu fetch %d differs:\n%s\nvs\n%s\ngraph:\n%s",
                         (unsigned long long)seed, i, ta, tb, pinned);
            }
            zf_tensor_unref(&a[i]);
            zf_tensor_unref(&b[i]);
        }
        zf_local_session_destroy(&s1);
        zf_local_session_destroy(&s2);
        zf_graphdef_free(&g1);
        zf_graphdef_free(&g2);
        free(plain);
        free(pinned);
    }
    assert_true(max_parts >= 3); /* the property was exercised across partitions */
    zf_tensor_unref(&x);
}

/* A traced step records a run per kernel, up to the trace's bound: past
 * it the runs are dropped and the trace says it is truncated. */
static void test_local_session_trace_records_each_run_up_to_its_bound(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'a' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
        "node { name: 'b' op: 'Neg' input: 'a' attr { key: 'T' value { type: DT_FLOAT } } }"
        "node { name: 'c' op: 'Neg' input: 'b' attr { key: 'T' value { type: DT_FLOAT } } }"
        "node { name: 'd' op: 'Neg' input: 'c' attr { key: 'T' value { type: DT_FLOAT } } }");
    zf_local_session_options_t o = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    o.opt_level = -1; /* every node runs as written */
    zf_local_session_t *s = NULL;
    ASSERT_OK(zf_local_session_new(gd, &o, &s));
    zf_tensor_t *a = NULL, *out = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(2.0f, &a));
    const char *feed = "a", *fetch = "d";
    /* the feed's _Recv, b, c, d and the fetch's _Send */
    size_t bounds[2] = {ZF_STEP_TRACE_MAX_RUNS, 3};
    for (int k = 0; k < 2; k++) {
        zf_step_trace_t t;
        zf_step_trace_init(&t);
        t.max_runs = bounds[k];
        ASSERT_OK(zf_local_session_run_traced(s, &feed, &a, 1, &fetch, 1, NULL, 0, &out, &t));
        assert_true(*(const float *)zf_tensor_data(out) == -2.0f);
        zf_tensor_unref(&out);
        assert_int_equal(t.n, k == 0 ? 5 : 3);
        assert_int_equal(t.truncated, k == 1);
        for (size_t i = 0; i < t.n; i++) assert_true(t.runs[i].end_us >= t.runs[i].start_us);
        zf_step_trace_destroy(&t);
    }
    zf_tensor_unref(&a);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_session_runs_the_mlp_example),
        cmocka_unit_test(test_local_session_runs_the_cnn_example),
        cmocka_unit_test(test_local_session_reads_a_feed_changed_in_place_again),
        cmocka_unit_test(test_local_session_runs_pinned_nodes_as_two_partitions),
        cmocka_unit_test(test_local_session_caches_one_plan_per_signature),
        cmocka_unit_test(test_local_session_variables_persist_across_runs),
        cmocka_unit_test(test_local_session_resource_variables_persist_across_runs),
        cmocka_unit_test(test_local_session_refuses_graphs_with_ops_it_cannot_run),
        cmocka_unit_test(test_local_session_checks_feeds_and_fetches),
        cmocka_unit_test(test_local_session_reports_the_failing_kernel_as_the_root_cause),
        cmocka_unit_test(test_local_session_aborts_a_step_past_its_timeout),
        cmocka_unit_test(test_local_session_runs_steps_from_several_threads),
        cmocka_unit_test(test_local_session_partitioned_runs_equal_unpartitioned_runs),
        cmocka_unit_test(test_local_session_trace_records_each_run_up_to_its_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
