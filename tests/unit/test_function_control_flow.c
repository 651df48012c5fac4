/* End-to-end values of lowered functional control flow (If, Case, While)
 * through the in-process session, against results worked out by hand, and
 * a lowered If whose branch spans two devices. The structure of the lowered
 * graphs is tested in test_functions.c.
 */
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

static zf_tensor_t *s_scalar(zf_dtype_t dtype, double v)
{
    zf_tensor_t *t = NULL;
    zf_status_t st = ZF_STATUS_OK;
    switch (dtype) {
    case ZF_FLOAT: st = zf_tensor_new_scalar_float((float)v, &t); break;
    case ZF_INT32: st = zf_tensor_new_scalar_int32((int32_t)v, &t); break;
    case ZF_BOOL: st = zf_tensor_new_scalar_bool(v != 0, &t); break;
    default: fail_msg("unexpected dtype");
    }
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    return t;
}

/* Element i of t as a double. */
static double s_at(const zf_tensor_t *t, int64_t i)
{
    switch (zf_tensor_dtype(t)) {
    case ZF_FLOAT: return ((const float *)zf_tensor_data(t))[i];
    case ZF_INT32: return ((const int32_t *)zf_tensor_data(t))[i];
    default: fail_msg("unexpected dtype %d", (int)zf_tensor_dtype(t));
    }
    return 0;
}

/* Runs with two named feeds (either may be NULL) and checks every element of
 * the fetch against want. */
static void s_expect(zf_local_session_t *s, const char *f1, zf_tensor_t *v1, const char *f2,
                     zf_tensor_t *v2, const char *fetch, double want, int64_t n)
{
    const char *names[2] = {f1, f2};
    zf_tensor_t *values[2] = {v1, v2};
    int nf = f2 ? 2 : f1 ? 1 : 0;
    zf_tensor_t *out = NULL;
    zf_status_t st = zf_local_session_run(s, names, values, nf, &fetch, 1, NULL, 0, &out);
    if (!zf_ok(st)) fail_msg("%s: %s", fetch, zf_status_msg(&st));
    assert_int_equal(zf_tensor_num_elements(out), n);
    for (int64_t i = 0; i < n; i++)
        if (s_at(out, i) != want)
            fail_msg("%s[%lld] = %g, want %g", fetch, (long long)i, s_at(out, i), want);
    zf_tensor_unref(&out);
}

#define FN1(name, op)                                                                              \
    "function { signature { name: '" name "' input_arg { name: 'x' type: DT_FLOAT }"               \
    " output_arg { name: 'y' type: DT_FLOAT } }"                                                   \
    " node_def { name: 'n' op: '" op "' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }"   \
    " ret { key: 'y' value: 'n:y:0' } }"

static void test_control_flow_if_takes_the_branch_its_predicate_picks(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'p' op: 'Placeholder' attr { key: 'dtype' value { type: DT_BOOL } } }"
        "node { name: 'a' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
        "node { name: 'if' op: 'If' input: 'p' input: 'a'"
        " attr { key: 'Tcond' value { type: DT_BOOL } }"
        " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
        " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
        " attr { key: 'then_branch' value { func { name: 'Sq' } } }"
        " attr { key: 'else_branch' value { func { name: 'Ng' } } } }"
        "library { " FN1("Sq", "Square") " " FN1("Ng", "Neg") " }");
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *t = s_scalar(ZF_BOOL, 1), *f = s_scalar(ZF_BOOL, 0), *a = s_scalar(ZF_FLOAT, 3);
    s_expect(s, "p", t, "a", a, "if", 9, 1);  /* then: 3 * 3 */
    s_expect(s, "p", f, "a", a, "if", -3, 1); /* else: -3 */
    zf_tensor_unref(&t);
    zf_tensor_unref(&f);
    zf_tensor_unref(&a);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);

    /* an int32 predicate: non-zero is true */
    gd = zf_test_graphdef(
        "node { name: 'p' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }"
        "node { name: 'a' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
        "node { name: 'if' op: 'If' input: 'p' input: 'a'"
        " attr { key: 'Tcond' value { type: DT_INT32 } }"
        " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
        " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
        " attr { key: 'then_branch' value { func { name: 'Sq' } } }"
        " attr { key: 'else_branch' value { func { name: 'Ng' } } } }"
        "library { " FN1("Sq", "Square") " " FN1("Ng", "Neg") " }");
    s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *two = s_scalar(ZF_INT32, 2), *zero = s_scalar(ZF_INT32, 0);
    a = s_scalar(ZF_FLOAT, -4);
    s_expect(s, "p", two, "a", a, "if", 16, 1);
    s_expect(s, "p", zero, "a", a, "if", 4, 1);
    zf_tensor_unref(&two);
    zf_tensor_unref(&zero);
    zf_tensor_unref(&a);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_control_flow_case_runs_the_indexed_branch_or_the_last(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'i' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }"
        "node { name: 'a' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
        "node { name: 'case' op: 'Case' input: 'i' input: 'a'"
        " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
        " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
        " attr { key: 'branches' value { list { func { name: 'Ng' } func { name: 'Sq' }"
        " func { name: 'Ab' } } } } }"
        "library { " FN1("Ng", "Neg") " " FN1("Sq", "Square") " " FN1("Ab", "Abs") " }");
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *a = s_scalar(ZF_FLOAT, -5);
    const struct {
        int index;
        double want;
    } cases[] = {{0, 5}, {1, 25}, {2, 5}, {7, 5}, {-1, 5}}; /* out of range: the last branch */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        zf_tensor_t *i = s_scalar(ZF_INT32, cases[k].index);
        s_expect(s, "i", i, "a", a, "case", cases[k].want, 1);
        zf_tensor_unref(&i);
    }
    zf_tensor_unref(&a);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_control_flow_runs_tensorflows_functional_graphs(void **state)
{
    (void)state;
    /* graph-func-attr.pbtxt: Case on the constant 0 runs foo: ten 1.0s */
    Tensorflow__GraphDef *gd = zf_test_tf_graphdef("graph-func-attr.pbtxt");
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
    s_expect(s, NULL, NULL, NULL, NULL, "Case", 1, 10);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);

    /* graph-function-input-shapes.pbtxt: both branches return their input */
    gd = zf_test_tf_graphdef("graph-function-input-shapes.pbtxt");
    s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *t = s_scalar(ZF_BOOL, 1), *f = s_scalar(ZF_BOOL, 0), *v = s_scalar(ZF_INT32, 42);
    s_expect(s, "Placeholder", t, "Placeholder_1", v, "If", 42, 1);
    s_expect(s, "Placeholder", f, "Placeholder_1", v, "If", 42, 1);
    zf_tensor_unref(&t);
    zf_tensor_unref(&f);
    zf_tensor_unref(&v);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);

    /* graph-functional-while-loop.pbtxt: from input 3, add 1 to input and to
     * the counter while input < 10: seven iterations */
    gd = zf_test_tf_graphdef("graph-functional-while-loop.pbtxt");
    s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *in = s_scalar(ZF_INT32, 3);
    s_expect(s, "input", in, NULL, NULL, "while:2", 10, 1);
    s_expect(s, "input", in, NULL, NULL, "while:0", 7, 1);
    s_expect(s, "input", in, NULL, NULL, "while:1", -1, 1);
    zf_tensor_unref(&in);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);

    /* functional-while-ops.pbtxt: while iter > 0 { iter -= 1; val += val }:
     * from (3, 1.5) val doubles three times to 12 */
    gd = zf_test_tf_graphdef("functional-while-ops.pbtxt");
    s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *iter = s_scalar(ZF_INT32, 3), *val = s_scalar(ZF_FLOAT, 1.5);
    s_expect(s, "iter", iter, "val", val, "main", 12, 1);
    s_expect(s, "iter", iter, "val", val, "main1", 12, 1);
    s_expect(s, "iter", iter, "val", val, "StatefulWhile:0", 0, 1);
    zf_tensor_unref(&iter);
    zf_tensor_unref(&val);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

#define CPU(k) "/job:localhost/replica:0/task:0/device:CPU:" #k

/* The then-branch squares on CPU:1 while the If and its else-branch stay on
 * CPU:0: the branch's value crosses devices, and so does the deadness of
 * the branch not taken. */
static void test_control_flow_if_branch_spans_two_devices(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef("node { name: 'p' op: 'Placeholder' device: '" CPU(
        0) "'"
           " attr { key: 'dtype' value { type: DT_BOOL } } }"
           "node { name: 'a' op: 'Placeholder' device: '" CPU(
               0) "'"
                  " attr { key: 'dtype' value { type: DT_FLOAT } } }"
                  "node { name: 'if' op: 'If' input: 'p' input: 'a' device: '" CPU(
                      0) "'"
                         " attr { key: 'Tcond' value { type: DT_BOOL } }"
                         " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
                         " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
                         " attr { key: 'then_branch' value { func { name: 'Sq' } } }"
                         " attr { key: 'else_branch' value { func { name: 'Ng' } } } }"
                         "library { function { signature { name: 'Sq' input_arg { name: 'x' type: "
                         "DT_FLOAT }"
                         " output_arg { name: 'y' type: DT_FLOAT } }"
                         " node_def { name: 'n' op: 'Square' input: 'x' device: '" CPU(
                             1) "'"
                                "   attr { key: 'T' value { type: DT_FLOAT } } }"
                                " ret { key: 'y' value: 'n:y:0' } } " FN1("Ng", "Neg") " }");
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:2");
    assert_string_equal(zf_local_session_node_device(s, "if/then/n"), CPU(1));
    assert_string_equal(zf_local_session_node_device(s, "if/else/n"), CPU(0));
    zf_tensor_t *t = s_scalar(ZF_BOOL, 1), *f = s_scalar(ZF_BOOL, 0), *a = s_scalar(ZF_FLOAT, 3);
    s_expect(s, "p", t, "a", a, "if", 9, 1);
    assert_int_equal(zf_local_session_last_num_partitions(s), 2);
    s_expect(s, "p", f, "a", a, "if", -3, 1);
    s_expect(s, "p", t, "a", a, "if", 9, 1);
    zf_tensor_unref(&t);
    zf_tensor_unref(&f);
    zf_tensor_unref(&a);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

/* A loop body pinned to another device than its loop: the frame is cut,
 * and the partition of the body runs the frame's iterations through a
 * control loop driven by the LoopCond on CPU:0. */
static void test_control_flow_runs_a_loop_cut_across_devices(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_tf_graphdef("functional-while-ops.pbtxt");
    for (size_t i = 0; i < gd->library->n_function; i++) {
        Tensorflow__FunctionDef *fn = gd->library->function[i];
        if (strcmp(fn->signature->name, "body") != 0) continue;
        for (size_t k = 0; k < fn->n_node_def; k++) {
            if (strcmp(fn->node_def[k]->name, "tf.Add") != 0) continue;
            if (fn->node_def[k]->device != protobuf_c_empty_string) free(fn->node_def[k]->device);
            fn->node_def[k]->device = strdup(CPU(1));
        }
    }
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:2");
    /* while iter > 0 { iter -= 1; val += val }, the addition on CPU:1 */
    for (int n = 0; n <= 5; n++) {
        zf_tensor_t *iter = s_scalar(ZF_INT32, n), *val = s_scalar(ZF_FLOAT, 1.5);
        double want = 1.5;
        for (int k = 0; k < n; k++) want += want;
        s_expect(s, "iter", iter, "val", val, "main", want, 1);
        assert_int_equal(zf_local_session_last_num_partitions(s), 2);
        zf_tensor_unref(&iter);
        zf_tensor_unref(&val);
    }
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_flow_if_takes_the_branch_its_predicate_picks),
        cmocka_unit_test(test_control_flow_case_runs_the_indexed_branch_or_the_last),
        cmocka_unit_test(test_control_flow_runs_tensorflows_functional_graphs),
        cmocka_unit_test(test_control_flow_if_branch_spans_two_devices),
        cmocka_unit_test(test_control_flow_runs_a_loop_cut_across_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
