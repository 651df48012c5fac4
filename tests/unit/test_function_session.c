/* Graphs with functions, run through the in-process session: inlined calls
 * computing values worked out by hand, a body split over two devices, graphs
 * written as functions (_Arg/_Retval), and TensorFlow's own function test
 * graphs in tests/data/tensorflow run with their values checked (those with
 * functional control flow: test_function_control_flow.c). */
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
#include "test_util.h"

#define CPU(k) "/job:localhost/replica:0/task:0/device:CPU:" #k

/* Runs with the feeds given (NULL-terminated name/tensor pairs after the
 * fetches) and returns the fetched tensors; fails the test on error. */
static void s_run(zf_local_session_t *s, const char *const *fetches, int n, zf_tensor_t **out,
                  const char *const *feeds, zf_tensor_t *const *values, int n_feeds)
{
    zf_status_t st = zf_local_session_run(s, feeds, values, n_feeds, fetches, n, NULL, 0, out);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
}

static void s_assert_floats(const zf_tensor_t *t, const float *want, int64_t n)
{
    assert_int_equal(zf_tensor_dtype(t), ZF_FLOAT);
    assert_int_equal(zf_tensor_num_elements(t), n);
    const float *got = zf_tensor_data(t);
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("element %lld: got %g, want %g", (long long)i, (double)got[i],
                     (double)want[i]);
}

static zf_tensor_t *s_floats(const float *v, int64_t n)
{
    zf_shape_t shape = {.rank = 1, .dims = {n}};
    zf_tensor_t *t = NULL;
    assert_int_equal(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, (size_t)n * sizeof *v, &t).code,
                     ZF_OK);
    return t;
}

/* Scale(x: float) -> (y: float): y = (x + 1) * 3, the product pinned. */
#define SCALE_LIB(pin)                                                                             \
    "library { function { signature { name: 'Scale' input_arg { name: 'x' type: DT_FLOAT }"        \
    " output_arg { name: 'y' type: DT_FLOAT } }"                                                   \
    " node_def { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"           \
    "   attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }" \
    " node_def { name: 'three' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"         \
    "   attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 3 } } } }" \
    " node_def { name: 'add' op: 'AddV2' input: 'x' input: 'one:output:0'"                         \
    "   attr { key: 'T' value { type: DT_FLOAT } } }"                                              \
    " node_def { name: 'mul' op: 'Mul' input: 'add:z:0' input: 'three:output:0' " pin              \
    "   attr { key: 'T' value { type: DT_FLOAT } } }"                                              \
    " ret { key: 'y' value: 'mul:z:0' } } }"

#define SCALE_GRAPH(call_device, pin)                                                              \
    "node { name: 'a' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"          \
    "node { name: 'call' op: 'StatefulPartitionedCall' input: 'a' " call_device                    \
    " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"                                       \
    " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"                                      \
    " attr { key: 'f' value { func { name: 'Scale' } } } }"                                        \
    "node { name: 'neg' op: 'Neg' input: 'call' attr { key: 'T' value { type: DT_FLOAT } } "       \
    "}" SCALE_LIB(pin)

static void test_function_session_runs_an_inlined_call(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(SCALE_GRAPH("", ""));
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
    const float x[3] = {0, 1.5f, -4};
    const float want_call[3] = {3, 7.5f, -9}, want_neg[3] = {-3, -7.5f, 9}; /* (x+1)*3 */
    zf_tensor_t *feed = s_floats(x, 3), *out[3] = {0};
    const char *feeds[] = {"a"}, *fetches[] = {"call", "neg", "call/add"};
    s_run(s, fetches, 3, out, feeds, &feed, 1);
    s_assert_floats(out[0], want_call, 3);
    s_assert_floats(out[1], want_neg, 3);
    const float want_add[3] = {1, 2.5f, -3};
    s_assert_floats(out[2], want_add, 3); /* body nodes are fetchable by their inlined names */
    for (int i = 0; i < 3; i++) zf_tensor_unref(&out[i]);
    zf_tensor_unref(&feed);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_function_session_splits_a_body_over_two_devices(void **state)
{
    (void)state;
    /* the call on CPU:0, its product pinned to CPU:1: the placer and the
     * partitioner see the body's nodes, so one call spans two partitions */
    Tensorflow__GraphDef *gd =
        zf_test_graphdef(SCALE_GRAPH("device: '" CPU(0) "'", "device: '" CPU(1) "'"));
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:2");
    assert_string_equal(zf_local_session_node_device(s, "call/add"), CPU(0));
    assert_string_equal(zf_local_session_node_device(s, "call/mul"), CPU(1));
    const float x[2] = {2, -1};
    const float want[2] = {-9, 0};
    zf_tensor_t *feed = s_floats(x, 2), *out = NULL;
    const char *feeds[] = {"a"}, *fetches[] = {"neg"};
    s_run(s, fetches, 1, &out, feeds, &feed, 1);
    s_assert_floats(out, want, 2);
    assert_int_equal(zf_local_session_last_num_partitions(s), 2);
    zf_tensor_unref(&out);
    zf_tensor_unref(&feed);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_function_session_refuses_bad_functions_at_creation(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'c' op: 'PartitionedCall' attr { key: 'f' value { func { name: 'F' } } } }"
        "library { function { signature { name: 'F' output_arg { name: 'y' type: DT_FLOAT } }"
        " node_def { name: 'again' op: 'PartitionedCall'"
        "   attr { key: 'Tin' value { list { } } }"
        "   attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
        "   attr { key: 'f' value { func { name: 'F' } } } }"
        " ret { key: 'y' value: 'again:output:0' } } }");
    zf_local_session_t *s = NULL;
    zf_status_t st = zf_local_session_new(gd, NULL, &s);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&st), "recursive call to function 'F' (node 'c/again'): a "
                                            "function that calls itself cannot be inlined");
    assert_null(s);
    zf_status_clear(&st);
    zf_graphdef_free(&gd);
}

/* ToBool, which a lowered If puts before a predicate that is not bool:
 * TensorFlow's truthiness. */
static void test_function_session_to_bool_follows_tensorflows_truthiness(void **state)
{
    (void)state;
    static const struct {
        zf_dtype_t dtype;
        int rank;
        int64_t n;
        double v; /* every element */
        bool want;
    } cases[] = {
        {ZF_FLOAT, 0, 1, 0.0, false}, {ZF_FLOAT, 0, 1, -0.0, false},
        {ZF_FLOAT, 0, 1, 2.5, true},  {ZF_FLOAT, 0, 1, NAN, true},
        {ZF_INT32, 0, 1, 0, false},   {ZF_INT32, 0, 1, -7, true},
        {ZF_UINT8, 0, 1, 200, true},  {ZF_DOUBLE, 0, 1, 1e-300, true},
        {ZF_FLOAT, 1, 1, 0.0, true}, /* not a scalar: true when it has elements */
        {ZF_FLOAT, 1, 0, 0.0, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: %d } } }"
                 "node { name: 'b' op: 'ToBool' input: 'x' attr { key: 'T' value { type: %d } } }",
                 (int)cases[i].dtype, (int)cases[i].dtype);
        Tensorflow__GraphDef *gd = zf_test_graphdef(text);
        zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
        zf_shape_t shape = {.rank = cases[i].rank, .dims = {cases[i].n}};
        zf_tensor_t *x = NULL, *out = NULL;
        assert_int_equal(zf_tensor_new(cases[i].dtype, &shape, &x).code, ZF_OK);
        for (int64_t k = 0; k < cases[i].n; k++) {
            void *d = zf_tensor_data(x);
            switch (cases[i].dtype) {
            case ZF_FLOAT: ((float *)d)[k] = (float)cases[i].v; break;
            case ZF_DOUBLE: ((double *)d)[k] = cases[i].v; break;
            case ZF_INT32: ((int32_t *)d)[k] = (int32_t)cases[i].v; break;
            default: ((uint8_t *)d)[k] = (uint8_t)cases[i].v;
            }
        }
        const char *feed = "x", *fetch = "b";
        s_run(s, &fetch, 1, &out, &feed, &x, 1);
        assert_int_equal(zf_tensor_dtype(out), ZF_BOOL);
        assert_int_equal(zf_tensor_shape(out)->rank, 0);
        if (*(const bool *)zf_tensor_data(out) != cases[i].want)
            fail_msg("case %zu: ToBool gave %d", i, (int)*(const bool *)zf_tensor_data(out));
        zf_tensor_unref(&out);
        zf_tensor_unref(&x);
        zf_local_session_destroy(&s);
        zf_graphdef_free(&gd);
    }
    /* strings: true when not empty */
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_STRING } } }"
        "node { name: 'b' op: 'ToBool' input: 'x' attr { key: 'T' value { type: DT_STRING "
        "} } }");
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
    const char *words[2] = {"", "a"};
    for (int w = 0; w < 2; w++) {
        zf_tensor_t *x = NULL, *out = NULL;
        assert_int_equal(zf_tensor_new_scalar_string(words[w], strlen(words[w]), &x).code, ZF_OK);
        const char *feed = "x", *fetch = "b";
        s_run(s, &fetch, 1, &out, &feed, &x, 1);
        assert_int_equal(*(const bool *)zf_tensor_data(out), w == 1);
        zf_tensor_unref(&out);
        zf_tensor_unref(&x);
    }
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

/* ---- TensorFlow's graphs ------------------------------------------------------ */

static void test_function_session_runs_graphs_written_as_functions(void **state)
{
    (void)state;
    /* graph-as-function.pbtxt: rets_0 = Identity(0.0); rets_1 = the
     * StatefulPartitionedCall of "function", Identity of its first input,
     * the same 0.0; the resource _Args need no value for these fetches */
    Tensorflow__GraphDef *gd = zf_test_tf_graphdef("graph-as-function.pbtxt");
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *out[2] = {0};
    const char *fetches[] = {"rets_0", "rets_1"};
    s_run(s, fetches, 2, out, NULL, NULL, 0);
    const float zero = 0;
    s_assert_floats(out[0], &zero, 1);
    s_assert_floats(out[1], &zero, 1);
    for (int i = 0; i < 2; i++) zf_tensor_unref(&out[i]);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);

    /* device-arg-attr.pbtxt: _Arg nodes fed by name, _Retval nodes fetched
     * by name, through an IdentityN */
    gd = zf_test_tf_graphdef("device-arg-attr.pbtxt");
    s = zf_test_local_session(gd, "cpu:1");
    const float f[2] = {1.5f, -2};
    zf_shape_t shape = {.rank = 1, .dims = {3}};
    const int32_t iv[3] = {7, -9, 11};
    zf_tensor_t *ints = NULL, *feeds[2] = {s_floats(f, 2), NULL};
    assert_int_equal(zf_tensor_new_from_bytes(ZF_INT32, &shape, iv, sizeof iv, &ints).code, ZF_OK);
    feeds[1] = ints;
    const char *feed_names[] = {"args_0", "args_1"};
    s_run(s, fetches, 2, out, feed_names, feeds, 2);
    s_assert_floats(out[0], f, 2);
    assert_int_equal(zf_tensor_dtype(out[1]), ZF_INT32);
    assert_int_equal(zf_tensor_num_elements(out[1]), 3);
    assert_memory_equal(zf_tensor_data(out[1]), iv, sizeof iv);
    for (int i = 0; i < 2; i++) {
        zf_tensor_unref(&out[i]);
        zf_tensor_unref(&feeds[i]);
    }
    /* an _Arg left unfed fails as an unfed Placeholder does */
    zf_status_t st = zf_local_session_run(s, NULL, NULL, 0, fetches, 1, NULL, 0, out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    if (!strstr(zf_status_msg(&st), "args_0"))
        fail_msg("the error does not name the _Arg: %s", zf_status_msg(&st));
    zf_status_clear(&st);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_function_session_runs_tensorflows_function_graphs(void **state)
{
    (void)state;
    /* graph-uint8-return.pbtxt: PartitionedCall of a function returning
     * Identity(Const 5) as uint8 */
    Tensorflow__GraphDef *gd = zf_test_tf_graphdef("graph-uint8-return.pbtxt");
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *out = NULL;
    const char *fetch = "PartitionedCall";
    s_run(s, &fetch, 1, &out, NULL, NULL, 0);
    assert_int_equal(zf_tensor_dtype(out), ZF_UINT8);
    assert_int_equal(zf_tensor_num_elements(out), 1);
    assert_int_equal(((const uint8_t *)zf_tensor_data(out))[0], 5);
    zf_tensor_unref(&out);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);

    /* graph-function-control-ret-diff-island.pbtxt: d = Identity(a) with
     * a = 0.0; Neg(a) is a control_ret that must run before the call is done */
    gd = zf_test_tf_graphdef("graph-function-control-ret-diff-island.pbtxt");
    s = zf_test_local_session(gd, "cpu:1");
    fetch = "test_fn_call";
    s_run(s, &fetch, 1, &out, NULL, NULL, 0);
    const float zero = 0;
    s_assert_floats(out, &zero, 1);
    zf_tensor_unref(&out);
    fetch = "test_fn_call/b"; /* the control_ret ran: -0.0 */
    s_run(s, &fetch, 1, &out, NULL, NULL, 0);
    assert_true(((const float *)zf_tensor_data(out))[0] == 0.0f);
    zf_tensor_unref(&out);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);

    /* arg-control-dep.pbtxt: foo returns its argument, Constant = 0 */
    gd = zf_test_tf_graphdef("arg-control-dep.pbtxt");
    s = zf_test_local_session(gd, "cpu:1");
    fetch = "_tf.foo";
    s_run(s, &fetch, 1, &out, NULL, NULL, 0);
    assert_int_equal(zf_tensor_dtype(out), ZF_INT32);
    assert_int_equal(((const int32_t *)zf_tensor_data(out))[0], 0);
    zf_tensor_unref(&out);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);

    /* graph-function-resource-args.pbtxt: a call passing a resource handle
     * through, run as a target */
    gd = zf_test_tf_graphdef("graph-function-resource-args.pbtxt");
    s = zf_test_local_session(gd, "cpu:1");
    const char *target = "func_call";
    zf_status_t st = zf_local_session_run(s, NULL, NULL, 0, NULL, 0, &target, 1, NULL);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_function_session_runs_an_inlined_call),
        cmocka_unit_test(test_function_session_splits_a_body_over_two_devices),
        cmocka_unit_test(test_function_session_refuses_bad_functions_at_creation),
        cmocka_unit_test(test_function_session_to_bool_follows_tensorflows_truthiness),
        cmocka_unit_test(test_function_session_runs_graphs_written_as_functions),
        cmocka_unit_test(test_function_session_runs_tensorflows_function_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
