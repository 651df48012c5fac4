/* Tests for executor/kernels/kernels_basic (Const, Placeholder, identities, NoOp)
 * and executor/kernels/kernels_builtin (registering every CPU kernel once). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <cmocka.h>

#include "common/op_registry.h"
#include "kernel_test_util.h"

/* ---- kernels_builtin ------------------------------------------------------------ */

static const char *const s_cpu_ops[] = {
    "Const",
    "Placeholder",
    "Identity",
    "IdentityN",
    "NoOp",
    "StopGradient",
    "Add",
    "AddV2",
    "Sub",
    "Mul",
    "RealDiv",
    "Maximum",
    "Minimum",
    "Neg",
    "Square",
    "Sqrt",
    "Rsqrt",
    "Exp",
    "Log",
    "Relu",
    "Relu6",
    "Sigmoid",
    "Tanh",
    "Softmax",
    "LogSoftmax",
    "MatMul",
    "BiasAdd",
    "Conv2D",
    "MaxPool",
    "AvgPool",
    "Reshape",
    "Shape",
    "Size",
    "Rank",
    "Cast",
    "Sum",
    "Mean",
    "Max",
    "ArgMax",
    "Fill",
    "ZerosLike",
    "OnesLike",
    "Transpose",
    "ConcatV2",
    "ExpandDims",
    "Squeeze",
    "Pack",
    "VariableV2",
    "Assign",
    "VarHandleOp",
    "ReadVariableOp",
    "AssignVariableOp",
    "ApplyGradientDescent",
    "ResourceApplyGradientDescent",
};

static void *s_register(void *arg)
{
    (void)arg;
    zf_kernels_register_builtin(false);
    return NULL;
}

static void test_builtin_registration_covers_every_cpu_op_once(void **state)
{
    (void)state;
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, s_register, NULL), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    zf_kernels_register_builtin(false); /* again: a no-op */
    for (size_t i = 0; i < sizeof s_cpu_ops / sizeof s_cpu_ops[0]; i++) {
        if (!zf_kernel_exists(s_cpu_ops[i], "CPU")) fail_msg("no CPU kernel for %s", s_cpu_ops[i]);
        if (!zf_op_has_kernel(zf_op_lookup(s_cpu_ops[i]), "CPU"))
            fail_msg("the op registry does not know %s has a CPU kernel", s_cpu_ops[i]);
    }
    assert_false(zf_kernel_exists("Conv2D", "GPU"));
}

static zf_status_t s_stray_compute(zf_kernel_ctx_t *ctx)
{
    (void)ctx;
    return ZF_STATUS_OK;
}

static void s_count_cpu(const zf_kernel_def_t *def, const void *impl, void *arg)
{
    int *n = arg;
    if (strcmp(def->device_type, "CPU") != 0) return;
    if (!impl) fail_msg("the CPU definition of %s has no kernel", def->op);
    n[0]++;
}

/* Every built-in CPU definition has its kernel, and every built-in kernel
 * found its definition. */
static void test_every_cpu_definition_has_its_kernel(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    ASSERT_OK(zf_kernels_builtin_status());
    int n = 0;
    zf_kernel_def_foreach(s_count_cpu, &n);
    assert_true(n >= (int)(sizeof s_cpu_ops / sizeof s_cpu_ops[0]));
    /* a kernel with no definition is refused, naming itself */
    static const zf_kernel_t stray = {.op = "MatMul",
                                      .device_type = "CPU",
                                      .allowed_types = ZF_TYPE_BIT(ZF_INT8),
                                      .compute = NULL,
                                      .compute_async = NULL};
    zf_test_expect_error(zf_kernel_register(&stray), ZF_INVALID_ARGUMENT, "a compute function");
    static const zf_kernel_t stray2 = {.op = "MatMul",
                                       .device_type = "CPU",
                                       .allowed_types = ZF_TYPE_BIT(ZF_INT8),
                                       .compute = s_stray_compute};
    zf_test_expect_error(zf_kernel_register(&stray2), ZF_NOT_FOUND,
                         "the kernel for op 'MatMul' on CPU (allowed types 0x40) has no "
                         "definition");
}

static void test_expensive_kernels_are_flagged(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    const char *expensive[] = {"MatMul", "Conv2D", "MaxPool", "AvgPool", "Sum"};
    for (size_t i = 0; i < 5; i++) {
        Tensorflow__NodeDef *n = kt_node_new("n", expensive[i], 2);
        kt_attr_type(n, "T", ZF_FLOAT);
        const zf_kernel_t *def = NULL;
        ASSERT_OK(zf_kernel_find("CPU", n, &def));
        assert_true(def->flags & ZF_KERNEL_EXPENSIVE);
        kt_node_free(&n);
    }
    Tensorflow__NodeDef *n = kt_node_new("n", "Identity", 1);
    kt_attr_type(n, "T", ZF_FLOAT);
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("CPU", n, &def));
    assert_false(def->flags & ZF_KERNEL_EXPENSIVE);
    kt_node_free(&n);
}

/* A node of a graph that lost its inputs: every kernel that reads inputs
 * must refuse it instead of reading past them. */
static void test_kernels_refuse_nodes_with_missing_inputs(void **state)
{
    (void)state;
    const char *sources[] = {"Const",       "Placeholder", "NoOp", "VariableV2",
                             "VarHandleOp", "IdentityN",   "Pack"};
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    for (size_t i = 0; i < sizeof s_cpu_ops / sizeof s_cpu_ops[0]; i++) {
        bool skip = false;
        for (size_t j = 0; j < sizeof sources / sizeof sources[0]; j++)
            skip = skip || strcmp(s_cpu_ops[i], sources[j]) == 0;
        if (skip) continue;
        Tensorflow__NodeDef *n = kt_node_new("lost", s_cpu_ops[i], 0);
        const char *types[] = {"T", "dtype", "SrcT", "DstT"};
        for (int k = 0; k < 4; k++) kt_attr_type(n, types[k], ZF_FLOAT);
        KT_ATTR_INTS(n, "strides", 1, 1, 1, 1);
        KT_ATTR_INTS(n, "ksize", 1, 1, 1, 1);
        kt_attr_string(n, "padding", "SAME");
        zf_tensor_t *out = NULL;
        zf_status_t s = kt_run_on(n, NULL, 0, &out, 1, mgr, NULL);
        if (s.code != ZF_INVALID_ARGUMENT || !strstr(zf_status_msg(&s), "inputs, got 0"))
            fail_msg("%s: %s", s_cpu_ops[i], zf_status_msg(&s));
        zf_status_clear(&s);
        assert_null(out);
        kt_node_free(&n);
    }
    zf_resource_mgr_destroy(&mgr);
}

/* ---- Const ------------------------------------------------------------------------ */

static Tensorflow__NodeDef *s_const_node(const char *name, const zf_tensor_t *value,
                                         zf_dtype_t dtype)
{
    Tensorflow__NodeDef *n = kt_node_new(name, "Const", 0);
    kt_attr_type(n, "dtype", dtype);
    kt_attr_tensor(n, "value", value);
    return n;
}

static void test_const_outputs_its_value_every_step(void **state)
{
    (void)state;
    zf_tensor_t *v = KT_F32(ZF_SHAPE(2, 2), 1, 2, 3, 4);
    Tensorflow__NodeDef *n = s_const_node("c", v, ZF_FLOAT);
    const zf_kernel_t *def = NULL;
    zf_kernels_register_builtin(false);
    ASSERT_OK(zf_kernel_find("CPU", n, &def));
    void *st = NULL;
    ASSERT_OK(def->create(n, &st));
    zf_tensor_t *out[2] = {NULL, NULL};
    for (int step = 0; step < 2; step++) {
        zf_kernel_ctx_t ctx = {.node = n, .state = st, .outputs = &out[step], .num_outputs = 1};
        ASSERT_OK(def->compute(&ctx));
    }
    assert_ptr_equal(out[0], out[1]); /* decoded once, shared */
    assert_true(zf_tensor_equal(out[0], v));
    def->destroy(st);
    kt_unref_all(out, 2);
    zf_tensor_unref(&v);
    kt_node_free(&n);
}

static void test_const_holds_strings_and_scalars(void **state)
{
    (void)state;
    zf_tensor_t *v = NULL, *out = NULL;
    ASSERT_OK(zf_tensor_new_scalar_string("hi", 2, &v));
    Tensorflow__NodeDef *n = s_const_node("s", v, ZF_STRING);
    ASSERT_OK(kt_run(n, NULL, 0, &out, 1));
    assert_true(zf_tensor_equal(out, v));
    zf_tensor_unref(&out);
    zf_tensor_unref(&v);
    kt_node_free(&n);
}

static void test_const_rejects_a_value_of_another_dtype(void **state)
{
    (void)state;
    zf_tensor_t *v = KT_F32(ZF_SHAPE(1), 1), *out = NULL;
    Tensorflow__NodeDef *n = s_const_node("c", v, ZF_INT32);
    zf_test_expect_error(kt_run(n, NULL, 0, &out, 1), ZF_INVALID_ARGUMENT,
                         "c (Const): Type mismatch between value (float) and dtype (int32)");
    zf_tensor_unref(&v);
    kt_node_free(&n);
    n = kt_node_new("c", "Const", 0);
    kt_attr_type(n, "dtype", ZF_FLOAT);
    zf_test_expect_error(kt_run(n, NULL, 0, &out, 1), ZF_INVALID_ARGUMENT, "missing attr 'value'");
    kt_node_free(&n);
}

/* ---- Placeholder ------------------------------------------------------------------------ */

static void test_unfed_placeholder_fails_with_tensorflow_text(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("x", "Placeholder", 0);
    kt_attr_type(n, "dtype", ZF_FLOAT);
    zf_shape_t shape = {.rank = 2, .dims = {-1, 3}};
    kt_attr_shape(n, "shape", &shape);
    zf_tensor_t *out = NULL;
    zf_test_expect_error(
        kt_run(n, NULL, 0, &out, 1), ZF_INVALID_ARGUMENT,
        "You must feed a value for placeholder tensor 'x' with dtype float and shape "
        "[?,3]");
    assert_null(out);
    kt_node_free(&n);
    n = kt_node_new("y", "Placeholder", 0);
    kt_attr_type(n, "dtype", ZF_INT32);
    zf_test_expect_error(kt_run(n, NULL, 0, &out, 1), ZF_INVALID_ARGUMENT,
                         "You must feed a value for placeholder tensor 'y' with dtype int32");
    kt_node_free(&n);
}

static void test_placeholder_with_default_forwards_its_input(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("p", "PlaceholderWithDefault", 1);
    kt_attr_type(n, "dtype", ZF_FLOAT);
    zf_tensor_t *in = KT_F32(ZF_SHAPE(1), 5), *out = NULL;
    ASSERT_OK(kt_run(n, &in, 1, &out, 1));
    assert_ptr_equal(out, in);
    kt_unref_all((zf_tensor_t *[]){in, out}, 2);
    kt_node_free(&n);
}

/* ---- identities ------------------------------------------------------------------------ */

static void test_identity_and_stop_gradient_forward_without_copying(void **state)
{
    (void)state;
    const char *ops[] = {"Identity", "StopGradient", "PreventGradient"};
    zf_tensor_t *in = KT_F32(ZF_SHAPE(2, 1, 1, 2), 1, 2, 3, 4);
    for (int i = 0; i < 3; i++) {
        Tensorflow__NodeDef *n = kt_node_new("i", ops[i], 1);
        kt_attr_type(n, "T", ZF_FLOAT);
        zf_tensor_t *out = NULL;
        ASSERT_OK(kt_run(n, &in, 1, &out, 1));
        assert_ptr_equal(out, in);
        assert_int_equal(zf_tensor_refcount(in), 2);
        zf_tensor_unref(&out);
        kt_node_free(&n);
    }
    zf_tensor_unref(&in);
}

static void test_identity_n_forwards_each_input(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("ids", "IdentityN", 3);
    zf_tensor_t *in[3] = {KT_F32(zf_shape_scalar(), 1), KT_I64(ZF_SHAPE(2), 2, 3),
                          kt_zeros(ZF_BOOL, ZF_SHAPE(0))};
    zf_tensor_t *out[3];
    ASSERT_OK(kt_run(n, in, 3, out, 3));
    for (int i = 0; i < 3; i++) assert_ptr_equal(out[i], in[i]);
    kt_unref_all(out, 3);
    zf_test_expect_error(kt_run(n, in, 3, out, 2), ZF_INVALID_ARGUMENT, "3 inputs but 2 outputs");
    kt_unref_all(in, 3);
    kt_node_free(&n);
}

static void test_snapshot_copies_its_input(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("snap", "Snapshot", 1);
    kt_attr_type(n, "T", ZF_DOUBLE);
    zf_tensor_t *in = KT_F64(ZF_SHAPE(3), 1, 2, 3), *out = NULL;
    ASSERT_OK(kt_run(n, &in, 1, &out, 1));
    assert_ptr_not_equal(out, in);
    assert_true(zf_tensor_equal(out, in));
    kt_unref_all((zf_tensor_t *[]){in, out}, 2);
    kt_node_free(&n);
}

static void test_noop_produces_nothing(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("nop", "NoOp", 0);
    ASSERT_OK(kt_run(n, NULL, 0, NULL, 0));
    kt_node_free(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_registration_covers_every_cpu_op_once),
        cmocka_unit_test(test_every_cpu_definition_has_its_kernel),
        cmocka_unit_test(test_expensive_kernels_are_flagged),
        cmocka_unit_test(test_kernels_refuse_nodes_with_missing_inputs),
        cmocka_unit_test(test_const_outputs_its_value_every_step),
        cmocka_unit_test(test_const_holds_strings_and_scalars),
        cmocka_unit_test(test_const_rejects_a_value_of_another_dtype),
        cmocka_unit_test(test_unfed_placeholder_fails_with_tensorflow_text),
        cmocka_unit_test(test_placeholder_with_default_forwards_its_input),
        cmocka_unit_test(test_identity_and_stop_gradient_forward_without_copying),
        cmocka_unit_test(test_identity_n_forwards_each_input),
        cmocka_unit_test(test_snapshot_copies_its_input),
        cmocka_unit_test(test_noop_produces_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
