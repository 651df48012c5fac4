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
#include "executor/kernels/remap.h"

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
        "IsNan",     "IsInf",
        "IsFinite",  "AddN",
        "BiasAddGrad",
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
    const char *ops[] = {"Add", "Sub",  "Mul",  "Maximum", "Minimum", "Neg",
                         "Sum", "Max",  "Min",  "Prod",    "Pack",    "AddN"};
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
    const char *cpu_only[] = {"Conv2DBackpropInput", "MaxPool", "AvgPool", "StridedSliceGrad",
                              "VariableV2", "OneHot"};
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

/* Creating n's GPU kernel fails with INVALID_ARGUMENT and msg; n taken. */
static void s_expect_create_error(Tensorflow__NodeDef *n, const char *msg)
{
    zf_kernels_register_builtin(true);
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("GPU", n, &def));
    void *st = NULL;
    zf_test_expect_error(def->create(n, &st), ZF_INVALID_ARGUMENT, msg);
    assert_null(st);
    kt_node_free(&n);
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

static void test_gpu_bias_add_grad_checks_its_input_before_needing_a_gpu(void **state)
{
    (void)state;
    zf_tensor_t *in[1] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(4))};
    zf_test_expect_error(s_compute_without_gpu("BiasAddGrad", ZF_FLOAT, in, 1),
                         ZF_INVALID_ARGUMENT,
                         "k (BiasAddGrad): Input tensor must be at least 2D: [4]");
    zf_tensor_unref(&in[0]);
    in[0] = kt_zeros(ZF_INT64, ZF_SHAPE(2, 4));
    zf_test_expect_error(s_compute_without_gpu("BiasAddGrad", ZF_FLOAT, in, 1),
                         ZF_INVALID_ARGUMENT, "k (BiasAddGrad): no GPU kernel for int64 inputs");
    zf_tensor_unref(&in[0]);
    in[0] = kt_zeros(ZF_HALF, ZF_SHAPE(2, 4));
    zf_test_expect_error(s_compute_without_gpu("BiasAddGrad", ZF_HALF, in, 1), ZF_INTERNAL,
                         "k (BiasAddGrad): a GPU kernel needs a GPU device, not none");
    zf_tensor_unref(&in[0]);
    /* data_format is read when the kernel is created */
    Tensorflow__NodeDef *n = kt_node_new("k", "BiasAddGrad", 1);
    kt_attr_type(n, "T", ZF_FLOAT);
    kt_attr_string(n, "data_format", "NDHWC");
    s_expect_create_error(n, "k (BiasAddGrad): data_format must be NHWC or NCHW, got 'NDHWC'");
}

static void test_gpu_add_n_checks_its_inputs_before_needing_a_gpu(void **state)
{
    (void)state;
    zf_tensor_t *in[3] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 2))};
    zf_test_expect_error(s_compute_without_gpu("AddN", ZF_FLOAT, in, 3), ZF_INVALID_ARGUMENT,
                         "k (AddN): Inputs to operation k of type AddN must have the same size "
                         "and shape.  Input 0: [2,3] != input 2: [3,2]");
    zf_tensor_unref(&in[2]);
    in[2] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(2, 3));
    zf_test_expect_error(s_compute_without_gpu("AddN", ZF_FLOAT, in, 3), ZF_INVALID_ARGUMENT,
                         "k (AddN): input 2 must be float, got double");
    zf_test_expect_error(s_compute_without_gpu("AddN", ZF_FLOAT, in, 2), ZF_INTERNAL,
                         "k (AddN): a GPU kernel needs a GPU device, not none");
    kt_unref_all(in, 3);
    zf_tensor_t *b[1] = {kt_zeros(ZF_INT64, ZF_SHAPE(2))};
    zf_test_expect_error(s_compute_without_gpu("AddN", ZF_FLOAT, b, 1), ZF_INVALID_ARGUMENT,
                         "k (AddN): no GPU kernel for int64 inputs");
    zf_tensor_unref(&b[0]);
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
    Tensorflow__NodeDef *n = kt_node_new("k", "ArgMax", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    kt_attr_type(n, "output_type", ZF_FLOAT);
    s_expect_create_error(n, "k (ArgMax): output_type must be int32 or int64, got float");
}

static void test_gpu_element_moving_kernels_read_their_plans_in_host_memory(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    s_expect("Slice", "T", ZF_FLOAT, 6u, 0);
    s_expect("StridedSlice", "T", ZF_HALF, 0xeu, 0);
    s_expect("StridedSlice", "T", ZF_INT64, 0xeu, 0);
    s_expect("Tile", "T", ZF_DOUBLE, 2u, 0);
    s_expect("Pad", "T", ZF_BOOL, 2u, 0);
    s_expect("PadV2", "T", ZF_FLOAT, 2u, 0); /* constant_values in GPU memory */
    s_expect("MirrorPad", "T", ZF_FLOAT, 2u, 0);
    s_expect("ReverseV2", "T", ZF_UINT8, 2u, 0);
    s_expect("BroadcastTo", "T", ZF_BFLOAT16, 2u, 0);
    s_expect("Transpose", "T", ZF_COMPLEX128, 2u, 0);
    s_expect("GatherV2", "Tparams", ZF_FLOAT, 6u, 0); /* indices and axis on the host */
    s_expect("Gather", "Tparams", ZF_HALF, 2u, 0);    /* indices on the host */
    s_expect("Split", "T", ZF_FLOAT, 1u, 0);          /* split_dim */
    s_expect("SplitV", "T", ZF_DOUBLE, 6u, 0);        /* size_splits and split_dim */
    s_expect("Unpack", "T", ZF_INT64, 0, 0);
    s_expect("Unpack", "T", ZF_INT32, S_ALL, S_ALL);
    s_expect_none("Split", "T", ZF_INT32);
    s_expect("Slice", "T", ZF_INT32, S_ALL, S_ALL);
    s_expect("StridedSlice", "T", ZF_INT32, S_ALL, S_ALL);
    s_expect_none("Tile", "T", ZF_STRING);
    s_expect("Conv2D", "T", ZF_FLOAT, 0, 0);
    s_expect("Conv2D", "T", ZF_DOUBLE, 0, 0);
    s_expect_none("Conv2D", "T", ZF_HALF);
}

/* Conv2D's attrs are checked when it is created, its shapes before it needs
 * a GPU, with the CPU kernel's texts. */
static void test_gpu_conv2d_checks_its_window_before_needing_a_gpu(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    const zf_kernel_t *def = NULL;
    Tensorflow__NodeDef *n = kt_node_new("k", "Conv2D", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    KT_ATTR_INTS(n, "strides", 1, 2, 2, 1);
    kt_attr_string(n, "padding", "SAME");
    ASSERT_OK(zf_kernel_find("GPU", n, &def));
    void *st = NULL;
    ASSERT_OK(def->create(n, &st));
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 5, 5, 3)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 3, 2, 4))};
    zf_tensor_t *out = NULL;
    zf_kernel_ctx_t ctx = {
        .node = n, .state = st, .inputs = in, .num_inputs = 2, .outputs = &out, .num_outputs = 1};
    zf_test_expect_error(def->compute(&ctx), ZF_INVALID_ARGUMENT,
                         "k (Conv2D): input and filter must have the same depth: 3 vs 2");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 3, 3, 4));
    zf_test_expect_error(def->compute(&ctx), ZF_INTERNAL,
                         "k (Conv2D): a GPU kernel needs a GPU device, not none");
    assert_null(out);
    def->destroy(st);
    kt_node_free(&n);
    n = kt_node_new("k", "Conv2D", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    KT_ATTR_INTS(n, "strides", 1, 1, 1, 1);
    kt_attr_string(n, "padding", "VALID");
    kt_attr_string(n, "data_format", "NCHW");
    ASSERT_OK(def->create(n, &st));
    ctx.node = n;
    ctx.state = st;
    zf_tensor_unref(&in[0]);
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 3, 5, 5));
    zf_test_expect_error(def->compute(&ctx), ZF_UNIMPLEMENTED,
                         "k (Conv2D): the GPU Conv2D takes data_format NHWC only, got NCHW");
    def->destroy(st);
    kt_node_free(&n);
    n = kt_node_new("k", "Conv2D", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    KT_ATTR_INTS(n, "strides", 1, 1, 1, 1);
    kt_attr_string(n, "padding", "HALF");
    zf_test_expect_error(def->create(n, &st), ZF_INVALID_ARGUMENT,
                         "k (Conv2D): padding must be SAME, VALID or EXPLICIT, got 'HALF'");
    kt_node_free(&n);
    kt_unref_all(in, 2);
}

/* Without a GPU device the kernels fail; they never fall back to computing
 * on the host. */
static void test_gpu_element_moving_kernels_need_a_gpu_device(void **state)
{
    (void)state;
    zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(2), 1, 2), KT_I32(ZF_SHAPE(1), 2)};
    zf_test_expect_error(s_compute_without_gpu("Tile", ZF_FLOAT, in, 2), ZF_INTERNAL,
                         "k (Tile): a GPU kernel needs a GPU device, not none");
    zf_tensor_unref(&in[1]);
    in[1] = KT_I32(ZF_SHAPE(1), 0);
    zf_test_expect_error(s_compute_without_gpu("Transpose", ZF_FLOAT, in, 2), ZF_INTERNAL,
                         "k (Transpose): a GPU kernel needs a GPU device, not none");
    kt_unref_all(in, 2);
}

/* ---- the GPU's gathers, emulated ----------------------------------------------------- */

/* A device whose gathers compute, on the host, what zf__gpu_launch_remap()
 * is documented to compute from the plans the GPU device builds; the CPU
 * kernels run on it must give their plain results. This checks the plans
 * and the kernels' hand-over, not the CUDA code. */
static int s_fake_gathers;

static void s_emulate_remap(size_t elem, const zf__gpu_remap_plan_t *p, const int64_t *idx,
                            const char *src, char *out, int64_t n, const char *fill)
{
    static const char zero[16];
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, off = 0;
        bool filled = false;
        for (int k = p->rank - 1; k >= 0; k--) {
            int64_t c = rest % p->dims[k];
            rest /= p->dims[k];
            int64_t m = idx ? idx[p->offs[k] + c] : c;
            if (m < 0)
                filled = true;
            else
                off += m * p->strides[k];
        }
        memcpy(out + (size_t)i * elem,
               filled ? (fill ? fill : zero) : src + (size_t)off * elem, elem);
    }
}

static zf_status_t s_fake_remap_gather(zf_device_t *dev, const struct zf_remap *r,
                                       const int64_t *src_dims, const void *src, void *dst,
                                       size_t elem, const void *fill)
{
    (void)dev;
    s_fake_gathers++;
    zf__gpu_remap_plan_t plan;
    int64_t n = 0, total = 0;
    zf__gpu_remap_plan(r, src_dims, &plan, &n, &total);
    int64_t sum = 0;
    for (int k = 0; k < r->rank; k++) sum += r->dims[k];
    assert_int_equal(total, sum);
    s_emulate_remap(elem, &plan, r->block, src, dst, n, fill);
    return ZF_STATUS_OK;
}

static zf_status_t s_fake_strided_gather(zf_device_t *dev, int rank, const int64_t *dims,
                                         const int64_t *strides, const void *src, void *dst,
                                         size_t elem)
{
    (void)dev;
    s_fake_gathers++;
    zf__gpu_remap_plan_t plan;
    int64_t n = 0;
    zf__gpu_strided_plan(rank, dims, strides, &plan, &n);
    s_emulate_remap(elem, &plan, NULL, src, dst, n, NULL);
    return ZF_STATUS_OK;
}

static zf_status_t s_fake_alloc(zf_device_t *dev, zf_dtype_t dtype, const zf_shape_t *shape,
                                zf_tensor_t **out)
{
    (void)dev;
    return zf_tensor_new(dtype, shape, out);
}

static const zf_device_ops_t s_fake_ops = {
    .alloc_tensor = s_fake_alloc,
    .remap_gather = s_fake_remap_gather,
    .strided_gather = s_fake_strided_gather,
};

/* Bytes that make every element different (and some floats NaN: the
 * comparison is bitwise). */
static zf_tensor_t *s_pattern(zf_dtype_t t, zf_shape_t shape)
{
    zf_tensor_t *x = kt_zeros(t, shape);
    unsigned char *p = zf_tensor_data(x);
    for (size_t i = 0; i < zf_tensor_nbytes(x); i++) p[i] = (unsigned char)(i * 37 + 11);
    return x;
}

/* node's CPU kernel on the emulating device gives its plain CPU results
 * (nout outputs), having gathered through the device per_output times for
 * each output that is not empty (an empty one gathers nothing). */
static void s_same_outputs_gathered(zf_device_t *dev, Tensorflow__NodeDef *n, zf_tensor_t **in,
                                    int nin, int nout, int per_output)
{
    zf_tensor_t *want[8] = {NULL}, *got[8] = {NULL};
    assert_true(nout >= 1 && nout <= 8);
    ASSERT_OK(kt_run(n, in, nin, want, nout));
    int before = s_fake_gathers;
    ASSERT_OK(kt_run_on(n, in, nin, got, nout, NULL, dev));
    int nonempty = 0;
    for (int i = 0; i < nout; i++) {
        if (zf_tensor_num_elements(want[i]) > 0) nonempty++;
        if (!zf_tensor_equal(got[i], want[i]))
            fail_msg("%s: the device's gather differs in output %d", n->op, i);
    }
    if (s_fake_gathers - before != per_output * nonempty)
        fail_msg("%s gathered %d times through the device, not %d", n->op, s_fake_gathers - before,
                 per_output * nonempty);
    kt_unref_all(want, nout);
    kt_unref_all(got, nout);
    kt_unref_all(in, nin);
    kt_node_free(&n);
}

static void s_same_outputs_through_the_device(zf_device_t *dev, Tensorflow__NodeDef *n,
                                              zf_tensor_t **in, int nin, int nout)
{
    s_same_outputs_gathered(dev, n, in, nin, nout, 1);
}

static void s_same_through_the_device(zf_device_t *dev, Tensorflow__NodeDef *n, zf_tensor_t **in,
                                      int nin)
{
    s_same_outputs_through_the_device(dev, n, in, nin, 1);
}

static Tensorflow__NodeDef *s_typed(const char *op, int nin, zf_dtype_t t)
{
    Tensorflow__NodeDef *n = kt_node_new("k", op, nin);
    kt_attr_type(n, "T", t);
    return n;
}

static void test_gpu_gather_plans_give_the_cpu_kernels_results(void **state)
{
    (void)state;
    zf_kernels_register_builtin(true);
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_new(&s_fake_ops, "/job:localhost/replica:0/task:0/device:GPU:7", 1, &dev));
    /* Slice, and a 0-sized one */
    s_same_through_the_device(dev, s_typed("Slice", 3, ZF_FLOAT),
                              (zf_tensor_t *[]){s_pattern(ZF_FLOAT, ZF_SHAPE(3, 4, 5)),
                                                KT_I32(ZF_SHAPE(3), 1, 0, 2),
                                                KT_I32(ZF_SHAPE(3), 2, -1, 2)},
                              3);
    s_same_through_the_device(dev, s_typed("Slice", 3, ZF_FLOAT),
                              (zf_tensor_t *[]){s_pattern(ZF_FLOAT, ZF_SHAPE(3, 4)),
                                                KT_I32(ZF_SHAPE(2), 1, 0), KT_I32(ZF_SHAPE(2), 0, 4)},
                              3);
    /* StridedSlice: negative strides; shrink and new axis; ellipsis */
    s_same_through_the_device(dev, s_typed("StridedSlice", 4, ZF_DOUBLE),
                              (zf_tensor_t *[]){s_pattern(ZF_DOUBLE, ZF_SHAPE(4, 6)),
                                                KT_I32(ZF_SHAPE(2), 3, -1), KT_I32(ZF_SHAPE(2), 0, 0),
                                                KT_I32(ZF_SHAPE(2), -1, -2)},
                              4);
    Tensorflow__NodeDef *n = s_typed("StridedSlice", 4, ZF_HALF);
    kt_attr_int(n, "shrink_axis_mask", 1);
    kt_attr_int(n, "new_axis_mask", 4);
    s_same_through_the_device(dev, n,
                              (zf_tensor_t *[]){s_pattern(ZF_HALF, ZF_SHAPE(4, 6, 2)),
                                                KT_I32(ZF_SHAPE(3), 2, 1, 0), KT_I32(ZF_SHAPE(3), 3, 5, 0),
                                                KT_I32(ZF_SHAPE(3), 1, 2, 1)},
                              4);
    n = s_typed("StridedSlice", 4, ZF_INT64);
    kt_attr_int(n, "ellipsis_mask", 1);
    s_same_through_the_device(dev, n,
                              (zf_tensor_t *[]){s_pattern(ZF_INT64, ZF_SHAPE(2, 3, 4)),
                                                KT_I32(ZF_SHAPE(2), 0, 1), KT_I32(ZF_SHAPE(2), 0, 3),
                                                KT_I32(ZF_SHAPE(2), 1, 1)},
                              4);
    /* Tile, Pad, PadV2 (its fill from input 2), MirrorPad */
    s_same_through_the_device(dev, s_typed("Tile", 2, ZF_INT64),
                              (zf_tensor_t *[]){s_pattern(ZF_INT64, ZF_SHAPE(2, 3)),
                                                KT_I32(ZF_SHAPE(2), 2, 3)},
                              2);
    s_same_through_the_device(dev, s_typed("Pad", 2, ZF_DOUBLE),
                              (zf_tensor_t *[]){s_pattern(ZF_DOUBLE, ZF_SHAPE(2, 3)),
                                                KT_I32(ZF_SHAPE(2, 2), 1, 0, 2, 1)},
                              2);
    s_same_through_the_device(dev, s_typed("PadV2", 3, ZF_FLOAT),
                              (zf_tensor_t *[]){s_pattern(ZF_FLOAT, ZF_SHAPE(2, 3)),
                                                KT_I32(ZF_SHAPE(2, 2), 0, 2, 1, 1),
                                                KT_F32(zf_shape_scalar(), 7.5f)},
                              3);
    n = s_typed("MirrorPad", 2, ZF_FLOAT);
    kt_attr_string(n, "mode", "REFLECT");
    s_same_through_the_device(dev, n,
                              (zf_tensor_t *[]){s_pattern(ZF_FLOAT, ZF_SHAPE(3, 3)),
                                                KT_I32(ZF_SHAPE(2, 2), 1, 2, 2, 1)},
                              2);
    /* ReverseV2 (1-byte elements), BroadcastTo (2-byte), Transpose (16-byte) */
    s_same_through_the_device(dev, s_typed("ReverseV2", 2, ZF_UINT8),
                              (zf_tensor_t *[]){s_pattern(ZF_UINT8, ZF_SHAPE(2, 3, 4)),
                                                KT_I32(ZF_SHAPE(2), 0, -1)},
                              2);
    s_same_through_the_device(dev, s_typed("BroadcastTo", 2, ZF_HALF),
                              (zf_tensor_t *[]){s_pattern(ZF_HALF, ZF_SHAPE(3, 1)),
                                                KT_I32(ZF_SHAPE(3), 2, 3, 4)},
                              2);
    s_same_through_the_device(dev, s_typed("Transpose", 2, ZF_COMPLEX128),
                              (zf_tensor_t *[]){s_pattern(ZF_COMPLEX128, ZF_SHAPE(2, 3, 4)),
                                                KT_I32(ZF_SHAPE(3), 2, 0, 1)},
                              2);
    s_same_through_the_device(dev, s_typed("Transpose", 2, ZF_FLOAT),
                              (zf_tensor_t *[]){s_pattern(ZF_FLOAT, zf_shape_scalar()),
                                                kt_zeros(ZF_INT32, ZF_SHAPE(0))},
                              2);
    /* GatherV2 along a middle axis with 2-d indices, with batch dims (a
     * gather per batch), and of a scalar index */
    for (int bd = 0; bd < 2; bd++) {
        n = kt_node_new("k", "GatherV2", 3);
        kt_attr_type(n, "Tparams", ZF_DOUBLE);
        kt_attr_int(n, "batch_dims", bd); /* one gather per batch */
        s_same_outputs_gathered(dev, n,
                                (zf_tensor_t *[]){s_pattern(ZF_DOUBLE, ZF_SHAPE(2, 5, 3)),
                                                  KT_I64(ZF_SHAPE(2, 3), 4, 0, 4, 1, 2, 3),
                                                  KT_I32(zf_shape_scalar(), 1)},
                                3, 1, bd ? 2 : 1);
    }
    n = kt_node_new("k", "GatherV2", 3);
    kt_attr_type(n, "Tparams", ZF_HALF);
    s_same_through_the_device(dev, n,
                              (zf_tensor_t *[]){s_pattern(ZF_HALF, ZF_SHAPE(4, 3)),
                                                KT_I32(zf_shape_scalar(), 2),
                                                KT_I32(zf_shape_scalar(), 0)},
                              3);
    /* Gather (axis 0) of a matrix by a matrix of indices */
    n = kt_node_new("k", "Gather", 2);
    kt_attr_type(n, "Tparams", ZF_COMPLEX64);
    s_same_through_the_device(dev, n,
                              (zf_tensor_t *[]){s_pattern(ZF_COMPLEX64, ZF_SHAPE(5, 3)),
                                                KT_I64(ZF_SHAPE(2, 2), 4, 0, 0, 3)},
                              2);
    /* Split along a middle axis, the last and the first (one strided
     * gather per output) */
    for (int axis = -1; axis < 2; axis++) {
        n = s_typed("Split", 2, ZF_FLOAT);
        kt_attr_int(n, "num_split", 3);
        s_same_outputs_through_the_device(dev, n,
                                          (zf_tensor_t *[]){KT_I32(zf_shape_scalar(), axis),
                                                            s_pattern(ZF_FLOAT, ZF_SHAPE(3, 6, 3))},
                                          2, 3);
    }
    /* SplitV with a size to infer and an empty piece; int64 sizes */
    n = s_typed("SplitV", 3, ZF_HALF);
    kt_attr_int(n, "num_split", 3);
    kt_attr_type(n, "Tlen", ZF_INT64);
    s_same_outputs_through_the_device(dev, n,
                                      (zf_tensor_t *[]){s_pattern(ZF_HALF, ZF_SHAPE(2, 7)),
                                                        KT_I64(ZF_SHAPE(3), 2, 0, -1),
                                                        KT_I32(zf_shape_scalar(), 1)},
                                      3, 3);
    /* errors come from the host-side plans, before anything is gathered */
    int before = s_fake_gathers;
    zf_tensor_t *outs[3] = {NULL};
    n = s_typed("Split", 2, ZF_FLOAT);
    kt_attr_int(n, "num_split", 3);
    zf_tensor_t *bad[3] = {KT_I32(zf_shape_scalar(), 1), kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 4)), NULL};
    zf_test_expect_error(kt_run_on(n, bad, 2, outs, 3, NULL, dev), ZF_INVALID_ARGUMENT,
                         "k (Split): Number of ways to split should evenly divide the split "
                         "dimension, but got split_dim 1 (size = 4) and num_split 3");
    kt_node_free(&n);
    n = s_typed("SplitV", 3, ZF_FLOAT);
    kt_attr_int(n, "num_split", 3);
    bad[2] = bad[0];
    bad[0] = bad[1];
    bad[1] = KT_I32(ZF_SHAPE(3), -1, 2, -1);
    zf_test_expect_error(kt_run_on(n, bad, 3, outs, 3, NULL, dev), ZF_INVALID_ARGUMENT,
                         "k (SplitV): There can only be one -1 in the input.");
    kt_node_free(&n);
    n = kt_node_new("k", "Gather", 2);
    kt_attr_type(n, "Tparams", ZF_FLOAT);
    zf_tensor_unref(&bad[1]);
    bad[1] = KT_I32(ZF_SHAPE(2), 0, -1);
    zf_test_expect_error(kt_run_on(n, bad, 2, outs, 1, NULL, dev), ZF_INVALID_ARGUMENT,
                         "k (Gather): indices[1] = -1 is not in [0, 2)");
    kt_node_free(&n);
    for (int i = 0; i < 3; i++) assert_null(outs[i]);
    assert_int_equal(s_fake_gathers, before);
    kt_unref_all(bad, 3);
    /* Unpack along the last axis and the first */
    for (int axis = -1; axis < 1; axis++) {
        n = s_typed("Unpack", 1, ZF_DOUBLE);
        kt_attr_int(n, "num", axis ? 4 : 2);
        kt_attr_int(n, "axis", axis);
        s_same_outputs_through_the_device(
            dev, n, (zf_tensor_t *[]){s_pattern(ZF_DOUBLE, ZF_SHAPE(2, 3, 4))}, 1, axis ? 4 : 2);
    }
    zf_device_destroy(&dev);
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
        cmocka_unit_test(test_gpu_add_n_checks_its_inputs_before_needing_a_gpu),
        cmocka_unit_test(test_gpu_bias_add_grad_checks_its_input_before_needing_a_gpu),
        cmocka_unit_test(test_gpu_reductions_check_their_inputs_before_needing_a_gpu),
        cmocka_unit_test(test_gpu_element_moving_kernels_read_their_plans_in_host_memory),
        cmocka_unit_test(test_gpu_element_moving_kernels_need_a_gpu_device),
        cmocka_unit_test(test_gpu_conv2d_checks_its_window_before_needing_a_gpu),
        cmocka_unit_test(test_gpu_gather_plans_give_the_cpu_kernels_results),
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
