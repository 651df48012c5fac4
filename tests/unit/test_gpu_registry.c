/* Tests for the GPU interface that need no GPU: which GPU kernels are
 * registered, with which dtypes and host-memory arguments, the host-side
 * broadcast and reduction plans, and the errors of calls that never reach
 * a GPU. In a build without CUDA: that every call says so and no GPU
 * kernel exists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/op_registry.h"
#include "executor/devices/gpu.h"
#include "kernel_test_util.h"

#define S_GPU0 "/job:localhost/replica:0/task:0/device:GPU:0"
#define S_CPU0 "/job:localhost/replica:0/task:0/device:CPU:0"

#ifdef ZFLOW_HAVE_CUDA
#include "executor/devices/cuda/gpu_internal.h"
#include "executor/kernels/kernels_util.h"

/* The GPU kernel for op with its type attr set to t has exactly these
 * host-memory bits and accepts t. */
static void s_expect(const char *op, const char *attr, zf_dtype_t t, uint32_t in, uint32_t out)
{
    Tensorflow__NodeDef *n = kt_node_new("n", op, 0);
    if (attr) kt_attr_type(n, attr, t);
    const zf_kernel_def_t *def = NULL;
    const zf_kernel_t *k = NULL;
    zf_status_t s = zf_kernel_find("GPU", n, &k);
    if (zf_ok(s)) s = zf_kernel_def_find("GPU", n, &def, NULL);
    if (!zf_ok(s)) fail_msg("%s with %s: %s", op, zf_dtype_name(t), zf_status_msg(&s));
    if (def->host_memory_inputs != in || def->host_memory_outputs != out)
        fail_msg("%s with %s: host memory inputs %#x outputs %#x, expected %#x %#x", op,
                 zf_dtype_name(t), def->host_memory_inputs, def->host_memory_outputs, in, out);
    if (attr) assert_true(def->allowed_types == 0 || (def->allowed_types & ZF_TYPE_BIT(t)));
    kt_node_free(&n);
}

static void s_expect_none(const char *op, const char *attr, zf_dtype_t t)
{
    Tensorflow__NodeDef *n = kt_node_new("n", op, 0);
    kt_attr_type(n, attr, t);
    const zf_kernel_t *def = NULL;
    zf_test_expect_error(zf_kernel_find("GPU", n, &def), ZF_NOT_FOUND,
                         "No OpKernel was registered to support Op");
    assert_null(def);
    kt_node_free(&n);
}

#define S_ALL ZF_KERNEL_ALL_HOST

static void s_check_gpu(const zf_kernel_def_t *def, const void *impl, void *arg)
{
    int *n = arg;
    if (strcmp(def->device_type, "GPU") != 0) return;
    if (!impl) fail_msg("the GPU definition of %s has no kernel", def->op);
    n[0]++;
}

/* Every built-in GPU definition has its kernel, and every GPU kernel found
 * its definition (registration needs no GPU). */
static void test_every_gpu_definition_has_its_kernel(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    ASSERT_OK(zf_gpu_register_kernels());
    ASSERT_OK(zf_kernels_builtin_status());
    int n = 0;
    zf_kernel_def_foreach(s_check_gpu, &n);
    assert_true(n > 40);
}

static void test_gpu_math_kernels_take_half_float_and_double_in_gpu_memory(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    static const char *const ops[] = {
        "Neg",       "Abs",
        "Square",    "Sqrt",
        "Rsqrt",     "Exp",
        "Log",       "Relu",
        "Relu6",     "Sigmoid",
        "Tanh",      "Reciprocal",
        "Add",       "AddV2",
        "Sub",       "Mul",
        "RealDiv",   "Maximum",
        "Minimum",   "BiasAdd",
        "Softmax",   "LogSoftmax",
        "MatMul",    "OnesLike",
        "ZerosLike", "SquaredDifference",
        "Elu",       "Selu",
        "Softplus",  "Softsign",
        "LeakyRelu", "Erf",
        "Erfc",      "Floor",
        "Ceil",      "Round",
        "Sign",      "Pow",
        "ReluGrad",  "Relu6Grad",
        "LeakyReluGrad", "EluGrad",
        "SeluGrad",  "SigmoidGrad",
        "TanhGrad",  "SoftplusGrad",
        "SoftsignGrad", "SqrtGrad",
        "RsqrtGrad", "ReciprocalGrad",
    };
    const zf_dtype_t types[] = {ZF_HALF, ZF_FLOAT, ZF_DOUBLE};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (size_t k = 0; k < 3; k++) s_expect(ops[i], "T", types[k], 0, 0);
    s_expect("Cast", "SrcT", ZF_FLOAT, 0, 0);
    s_expect_none("MatMul", "T", ZF_INT64);
    s_expect_none("Softmax", "T", ZF_INT32);
    s_expect_none("Exp", "T", ZF_INT32);
    s_expect_none("Floor", "T", ZF_INT64);
    s_expect_none("ReluGrad", "T", ZF_INT64);
}

static void test_gpu_kernels_keep_shapes_and_axes_in_host_memory(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    s_expect("Reshape", "T", ZF_FLOAT, 1u << 1, 0);
    s_expect("ExpandDims", "T", ZF_FLOAT, 1u << 1, 0);
    s_expect("Squeeze", "T", ZF_FLOAT, 0, 0);
    s_expect("Fill", "T", ZF_FLOAT, 1u << 0, 0);
    s_expect("Sum", "T", ZF_FLOAT, 1u << 1, 0);
    s_expect("Mean", "T", ZF_DOUBLE, 1u << 1, 0);
    s_expect("Max", "T", ZF_HALF, 1u << 1, 0);
    s_expect("Min", "T", ZF_FLOAT, 1u << 1, 0);
    s_expect("Prod", "T", ZF_DOUBLE, 1u << 1, 0);
    s_expect("All", NULL, ZF_BOOL, 1u << 1, 0);
    s_expect("Any", NULL, ZF_BOOL, 1u << 1, 0);
    s_expect("ArgMax", "T", ZF_HALF, 1u << 1, 0);
    s_expect("ArgMin", "T", ZF_DOUBLE, 1u << 1, 0);
    s_expect("Shape", "T", ZF_FLOAT, 0, 1u << 0);
    s_expect("Size", "T", ZF_FLOAT, 0, 1u << 0);
    s_expect("Rank", "T", ZF_FLOAT, 0, 1u << 0);
    s_expect("Const", "dtype", ZF_FLOAT, 0, 0);
    s_expect("Identity", "T", ZF_FLOAT, 0, 0);
    s_expect("StopGradient", "T", ZF_DOUBLE, 0, 0);
    s_expect("IdentityN", NULL, ZF_FLOAT, 0, 0);
    s_expect("NoOp", NULL, ZF_FLOAT, 0, 0);
}

static void test_gpu_int32_kernels_keep_everything_in_host_memory(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    s_expect("Const", "dtype", ZF_INT32, 0, 1u << 0);
    s_expect("Identity", "T", ZF_INT32, S_ALL, S_ALL);
    s_expect("Reshape", "T", ZF_INT32, S_ALL, S_ALL);
    s_expect("ExpandDims", "T", ZF_INT32, S_ALL, S_ALL);
    s_expect("Squeeze", "T", ZF_INT32, S_ALL, S_ALL);
    /* Integer arithmetic on shapes runs the CPU kernel in host memory. */
    const char *ops[] = {"Add",  "Sub", "Mul", "Maximum", "Minimum", "Neg",
                         "Sum",  "Max", "Min", "Prod",    "Pack"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (zf_kernel_exists(ops[i], "CPU")) s_expect(ops[i], "T", ZF_INT32, S_ALL, S_ALL);
}

static void test_gpu_send_and_recv_declare_where_their_tensor_lives(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    s_expect("_Send", "T", ZF_FLOAT, 0, 0);
    s_expect("_Send", "T", ZF_INT32, 1u << 0, 0);
    s_expect("_HostSend", "T", ZF_FLOAT, 1u << 0, 0);
    s_expect("_Recv", "tensor_type", ZF_FLOAT, 0, 0);
    s_expect("_Recv", "tensor_type", ZF_INT32, 0, 1u << 0);
    s_expect("_HostRecv", "tensor_type", ZF_DOUBLE, 0, 1u << 0);
}

static void test_ops_without_gpu_kernels_stay_on_cpu(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    const char *cpu_only[] = {"Conv2D", "MaxPool", "AvgPool", "Transpose", "VariableV2"};
    for (size_t i = 0; i < sizeof cpu_only / sizeof cpu_only[0]; i++) {
        assert_false(zf_kernel_exists(cpu_only[i], "GPU"));
        assert_false(zf_op_has_kernel(zf_op_lookup(cpu_only[i]), "GPU"));
    }
    /* What the placer reads: the op registry knows which ops have one. */
    assert_true(zf_op_has_kernel(zf_op_lookup("MatMul"), "GPU"));
    assert_true(zf_op_has_kernel(zf_op_lookup("Softmax"), "GPU"));
    assert_true(zf_op_has_kernel(zf_op_lookup("_Recv"), "GPU"));
}

static void test_gpu_cast_refuses_a_conversion_it_cannot_do_when_created(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    Tensorflow__NodeDef *n = kt_node_new("c", "Cast", 1);
    kt_attr_type(n, "SrcT", ZF_FLOAT);
    kt_attr_type(n, "DstT", ZF_INT32);
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("GPU", n, &def));
    void *st = NULL;
    zf_test_expect_error(def->create(n, &st), ZF_UNIMPLEMENTED,
                         "c (Cast): no GPU kernel casts float to int32");
    kt_node_free(&n);
    n = kt_node_new("c", "Cast", 1);
    kt_attr_type(n, "SrcT", ZF_FLOAT);
    kt_attr_type(n, "DstT", ZF_HALF);
    ASSERT_OK(def->create(n, &st));
    kt_node_free(&n);
}

/* A GPU kernel handed to a context without a GPU fails instead of
 * touching CUDA. */
static void test_gpu_kernel_without_a_gpu_device_fails_cleanly(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    Tensorflow__NodeDef *n = kt_node_new("mm", "MatMul", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("GPU", n, &def));
    zf_tensor_t *a = KT_F32(ZF_SHAPE(1, 1), 2.0f), *out = NULL;
    zf_tensor_t *in[2] = {a, a};
    zf_kernel_ctx_t ctx = {
        .node = n, .inputs = in, .num_inputs = 2, .outputs = &out, .num_outputs = 1};
    zf_test_expect_error(def->compute(&ctx), ZF_INTERNAL,
                         "mm (MatMul): a GPU kernel needs a GPU device, not none");
    zf_device_t *cpu = NULL;
    ASSERT_OK(zf_device_cpu_new(S_CPU0, 1, &cpu));
    ctx.device = cpu;
    zf_test_expect_error(def->compute(&ctx), ZF_INTERNAL, "not " S_CPU0);
    assert_null(out);
    zf_device_destroy(&cpu);
    zf_tensor_unref(&a);
    kt_node_free(&n);
}

/* Runs op's GPU kernel with no device: its checks of inputs run on the
 * host before it needs one. */
static zf_status_t s_compute_without_gpu(const char *op, zf_dtype_t t, zf_tensor_t **in, int n)
{
    zf_kernels_register_builtin(true);
    Tensorflow__NodeDef *node = kt_node_new("k", op, n);
    kt_attr_type(node, "T", t);
    const zf_kernel_t *def = NULL;
    zf_status_t s = zf_kernel_find("GPU", node, &def);
    void *st = NULL;
    if (zf_ok(s) && def->create) s = def->create(node, &st);
    zf_tensor_t *out = NULL;
    if (zf_ok(s)) {
        zf_kernel_ctx_t ctx = {
            .node = node, .state = st, .inputs = in, .num_inputs = n, .outputs = &out,
            .num_outputs = 1};
        s = def->compute(&ctx);
        if (def->destroy) def->destroy(st);
    }
    assert_null(out);
    kt_node_free(&node);
    return s;
}

static void test_gpu_gradients_check_their_inputs_before_needing_a_gpu(void **state)
{
    (void)state;
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3))};
    zf_test_expect_error(s_compute_without_gpu("ReluGrad", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
                         "k (ReluGrad): gradients and features must have the same shape: [2] vs. "
                         "[3]");
    zf_test_expect_error(s_compute_without_gpu("EluGrad", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
                         "gradients and outputs must have the same shape");
    zf_test_expect_error(s_compute_without_gpu("SigmoidGrad", ZF_FLOAT, in, 2),
                         ZF_INVALID_ARGUMENT, "y and dy must have the same shape: [2] vs. [3]");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(2));
    zf_test_expect_error(s_compute_without_gpu("TanhGrad", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
                         "k (TanhGrad): input 1 must be float, got double");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2));
    zf_test_expect_error(s_compute_without_gpu("LeakyReluGrad", ZF_FLOAT, in, 2), ZF_INTERNAL,
                         "k (LeakyReluGrad): a GPU kernel needs a GPU device, not none");
    kt_unref_all(in, 2);
    zf_tensor_t *ints[2] = {KT_I32(ZF_SHAPE(1), 1), KT_I32(ZF_SHAPE(1), 2)};
    zf_test_expect_error(s_compute_without_gpu("ReluGrad", ZF_INT32, ints, 2), ZF_NOT_FOUND,
                         "No OpKernel was registered to support Op 'ReluGrad'");
    kt_unref_all(ints, 2);
}

static void test_gpu_reductions_check_their_inputs_before_needing_a_gpu(void **state)
{
    (void)state;
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), KT_I32(ZF_SHAPE(2), 0, -2)};
    zf_test_expect_error(s_compute_without_gpu("Min", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
                         "k (Min): Invalid reduction arguments: Axes contains duplicate "
                         "dimension: 0");
    zf_tensor_unref(&in[1]);
    in[1] = KT_I32(ZF_SHAPE(1), 2);
    zf_test_expect_error(s_compute_without_gpu("Prod", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
                         "Invalid reduction dimension (2 for input with 2 dimension(s)");
    zf_test_expect_error(s_compute_without_gpu("All", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
                         "k (All): no GPU kernel for float inputs");
    zf_tensor_unref(&in[1]);
    in[1] = KT_I32(zf_shape_scalar(), -3);
    zf_test_expect_error(s_compute_without_gpu("ArgMin", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
                         "k (ArgMin): Expected dimension in the range [-2, 2), but got -3");
    zf_tensor_unref(&in[1]);
    in[1] = KT_I32(zf_shape_scalar(), 1);
    zf_test_expect_error(s_compute_without_gpu("ArgMax", ZF_FLOAT, in, 2), ZF_INTERNAL,
                         "k (ArgMax): a GPU kernel needs a GPU device, not none");
    kt_unref_all(in, 2);
    /* output_type is checked when the kernel is created */
    zf_kernels_register_builtin(true);
    Tensorflow__NodeDef *n = kt_node_new("k", "ArgMax", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    kt_attr_type(n, "output_type", ZF_FLOAT);
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("GPU", n, &def));
    void *st = NULL;
    zf_test_expect_error(def->create(n, &st), ZF_INVALID_ARGUMENT,
                         "k (ArgMax): output_type must be int32 or int64, got float");
    kt_node_free(&n);
}

static zf__gpu_reduce_plan_t s_plan(zf_shape_t shape, const bool *reduced, int64_t count)
{
    zf__gpu_reduce_plan_t p;
    int64_t got = -1;
    zf__gpu_reduce_plan(&shape, reduced, &p, &got);
    assert_int_equal(got, count);
    return p;
}

static void s_expect_plan(zf__gpu_reduce_plan_t p, zf__gpu_reduce_kind_t kind, int64_t outer,
                          int64_t reduce, int64_t inner)
{
    assert_int_equal(p.kind, kind);
    assert_int_equal(p.outer, outer);
    assert_int_equal(p.reduce, reduce);
    assert_int_equal(p.inner, inner);
}

static void test_gpu_reduce_plan_picks_rows_middle_or_general(void **state)
{
    (void)state;
    const bool t = true, f = false;
    s_expect_plan(s_plan(ZF_SHAPE(4, 5), (bool[]){f, t}, 5), ZF__GPU_REDUCE_ROWS, 4, 5, 1);
    s_expect_plan(s_plan(ZF_SHAPE(6), (bool[]){t}, 6), ZF__GPU_REDUCE_ROWS, 1, 6, 1);
    s_expect_plan(s_plan(ZF_SHAPE(4, 5), (bool[]){t, f}, 4), ZF__GPU_REDUCE_MIDDLE, 1, 4, 5);
    s_expect_plan(s_plan(ZF_SHAPE(2, 3, 4), (bool[]){f, t, f}, 3), ZF__GPU_REDUCE_MIDDLE, 2, 3, 4);
    /* Dims of 1 drop out: [2,1,3] over {0,1} reduces the leading 2. */
    s_expect_plan(s_plan(ZF_SHAPE(2, 1, 3), (bool[]){t, t, f}, 2), ZF__GPU_REDUCE_MIDDLE, 1, 2, 3);
    /* Adjacent reduced dims merge: [2,3,4,5] over {1,2} is [2,12,5]. */
    s_expect_plan(s_plan(ZF_SHAPE(2, 3, 4, 5), (bool[]){f, t, t, f}, 12), ZF__GPU_REDUCE_MIDDLE, 2,
                  12, 5);
    zf__gpu_reduce_plan_t g = s_plan(ZF_SHAPE(2, 3, 4), (bool[]){t, f, t}, 8);
    assert_int_equal(g.kind, ZF__GPU_REDUCE_GENERAL);
    assert_int_equal(g.nk, 1);
    assert_int_equal(g.kdims[0], 3);
    assert_int_equal(g.kstrides[0], 4);
    assert_int_equal(g.nr, 2);
    assert_int_equal(g.rdims[0], 2);
    assert_int_equal(g.rstrides[0], 12);
    assert_int_equal(g.rdims[1], 4);
    assert_int_equal(g.rstrides[1], 1);
    /* An empty reduced dim: nothing to combine. */
    (void)s_plan(ZF_SHAPE(0, 3), (bool[]){t, f}, 0);
}

static void test_gpu_calls_that_need_no_gpu_check_their_arguments(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    zf_test_expect_error(zf_device_gpu_new(S_CPU0, 0, &dev), ZF_INVALID_ARGUMENT,
                         "a GPU device needs a GPU device name, not '" S_CPU0 "'");
    assert_null(dev);
    zf_test_expect_error(zf_device_gpu_new("gpu please", 0, &dev), ZF_INVALID_ARGUMENT, NULL);
    assert_null(dev);
    zf_device_t *cpu = NULL;
    ASSERT_OK(zf_device_cpu_new(S_CPU0, 1, &cpu));
    assert_false(zf_device_is_gpu(cpu));
    zf_gpu_memory_stats_t stats;
    zf_test_expect_error(zf_gpu_memory_stats(cpu, &stats), ZF_INVALID_ARGUMENT,
                         S_CPU0 " is not a GPU device");
    zf_tensor_t *t = KT_F32(ZF_SHAPE(2), 1.0f, 2.0f), *out = NULL;
    zf_test_expect_error(zf_gpu_tensor_to_host(cpu, t, &out), ZF_INVALID_ARGUMENT,
                         "is not a GPU device");
    assert_null(out);
    zf_gpu_ipc_handle_t h;
    zf_test_expect_error(zf_gpu_ipc_export(t, &h), ZF_INVALID_ARGUMENT,
                         "only a tensor in GPU memory can be exported");
    zf_tensor_unref(&t);
    zf_device_destroy(&cpu);
}

static void test_gpu_device_count_says_why_none_is_visible(void **state)
{
    (void)state;
    assert_true(zf_gpu_built_with_cuda());
    int n = -1;
    zf_status_t s = zf_gpu_device_count(&n);
    if (zf_ok(s)) {
        assert_true(n >= 1);
        return;
    }
    assert_int_equal(n, 0);
    print_message("no GPU here: %s\n", zf_status_msg(&s));
    zf_test_expect_error(s, ZF_UNAVAILABLE, "no GPU visible: ");
    zf_device_t *dev = NULL;
    zf_test_expect_error(zf_device_gpu_new(S_GPU0, 0, &dev), ZF_UNAVAILABLE,
                         S_GPU0 ": no GPU visible");
    assert_null(dev);
}

#else /* built without CUDA */

static void test_gpu_calls_say_zflow_was_built_without_cuda(void **state)
{
    (void)state;
    assert_false(zf_gpu_built_with_cuda());
    int n = -1;
    zf_test_expect_error(zf_gpu_device_count(&n), ZF_UNAVAILABLE, "zflow was built without CUDA");
    assert_int_equal(n, 0);
    zf_device_t *dev = NULL;
    zf_test_expect_error(zf_device_gpu_new(S_GPU0, 0, &dev), ZF_UNAVAILABLE,
                         S_GPU0 ": zflow was built without CUDA");
    assert_null(dev);
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_gpu_alloc_host_tensor(ZF_FLOAT, &(zf_shape_t){.rank = 0}, &t),
                         ZF_UNAVAILABLE, "zflow was built without CUDA");
    assert_null(t);
    zf_gpu_ipc_handle_t h;
    zf_tensor_t *host = KT_F32(ZF_SHAPE(1), 1.0f);
    zf_test_expect_error(zf_gpu_ipc_export(host, &h), ZF_UNAVAILABLE,
                         "zflow was built without CUDA");
    zf_tensor_unref(&host);
}

static void test_no_gpu_kernels_are_registered_without_cuda(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    ASSERT_OK(zf_gpu_register_kernels());
    assert_true(zf_kernel_exists("MatMul", "CPU"));
    assert_false(zf_kernel_exists("MatMul", "GPU"));
    assert_false(zf_kernel_exists("Const", "GPU"));
    /* the definitions hold in every build: a scheduler built without CUDA
     * still places onto GPU executors */
    assert_true(zf_kernel_def_exists("MatMul", "GPU"));
    assert_true(zf_op_has_kernel(zf_op_lookup("MatMul"), "GPU"));
    Tensorflow__NodeDef *n = kt_node_new("m", "MatMul", 0);
    kt_attr_type(n, "T", ZF_FLOAT);
    const zf_kernel_t *k = NULL;
    zf_test_expect_error(zf_kernel_find("GPU", n, &k), ZF_NOT_FOUND,
                         "No OpKernel was registered to support Op 'MatMul' used by node m on "
                         "GPU: its definition exists, but this build has no implementation");
    kt_node_free(&n);
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef ZFLOW_HAVE_CUDA
        cmocka_unit_test(test_every_gpu_definition_has_its_kernel),
        cmocka_unit_test(test_gpu_math_kernels_take_half_float_and_double_in_gpu_memory),
        cmocka_unit_test(test_gpu_kernels_keep_shapes_and_axes_in_host_memory),
        cmocka_unit_test(test_gpu_int32_kernels_keep_everything_in_host_memory),
        cmocka_unit_test(test_gpu_send_and_recv_declare_where_their_tensor_lives),
        cmocka_unit_test(test_ops_without_gpu_kernels_stay_on_cpu),
        cmocka_unit_test(test_gpu_cast_refuses_a_conversion_it_cannot_do_when_created),
        cmocka_unit_test(test_gpu_kernel_without_a_gpu_device_fails_cleanly),
        cmocka_unit_test(test_gpu_gradients_check_their_inputs_before_needing_a_gpu),
        cmocka_unit_test(test_gpu_reductions_check_their_inputs_before_needing_a_gpu),
        cmocka_unit_test(test_gpu_reduce_plan_picks_rows_middle_or_general),
        cmocka_unit_test(test_gpu_calls_that_need_no_gpu_check_their_arguments),
        cmocka_unit_test(test_gpu_device_count_says_why_none_is_visible),
#else
        cmocka_unit_test(test_gpu_calls_say_zflow_was_built_without_cuda),
        cmocka_unit_test(test_no_gpu_kernels_are_registered_without_cuda),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
