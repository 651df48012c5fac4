/* Tests that placement honours the dtype constraints of registered kernels:
 * a device type whose kernels for an op reject the node's dtype is not a
 * candidate, as in TensorFlow, where kernel type constraints are matched
 * against the node's attrs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/kernel_def.h"
#include "scheduler/graph/placer.h"
#include "test_util.h"

/* MatMul: GPU takes float only; CPU takes float and int64. */
static const zf_kernel_def_t s_defs[] = {
    {.op = "MatMul",
     .device_type = "GPU",
     .type_attr = "T",
     .allowed_types = ZF_TYPE_BIT(ZF_FLOAT)},
    {.op = "MatMul",
     .device_type = "CPU",
     .type_attr = "T",
     .allowed_types = ZF_TYPE_BIT(ZF_FLOAT) | ZF_TYPE_BIT(ZF_INT64)},
    {.op = "Const", .device_type = "CPU"},
    {.op = "Const", .device_type = "GPU"},
};

static int s_setup(void **state)
{
    (void)state;
    zf_kernel_def_registry_reset();
    for (size_t i = 0; i < sizeof s_defs / sizeof s_defs[0]; i++)
        ASSERT_OK(zf_kernel_def_register(&s_defs[i]));
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    zf_kernel_def_registry_reset();
    return 0;
}

static const char *s_graph(const char *dtype, const char *device)
{
    static char text[1024];
    snprintf(text, sizeof text,
             "node { name: 'a' op: 'Const' attr { key: 'dtype' value { type: %s } } }\n"
             "node { name: 'mm' op: 'MatMul' input: 'a' input: 'a' device: '%s'"
             "  attr { key: 'T' value { type: %s } } }\n",
             dtype, device, dtype);
    return text;
}

/* Places text on CPU:0 and GPU:0; returns the status and mm's device index. */
static zf_status_t s_place(const char *text, bool soft, int *mm_device)
{
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    zf_graph_t *g = NULL;
    ASSERT_OK(zf_graph_new_from_graphdef(gd, &g));
    zf_graph_adopt_graphdef(g, &gd);
    zf_placer_device_t devs[2];
    memset(devs, 0, sizeof devs);
    ASSERT_OK(zf_device_name_parse("/job:localhost/replica:0/task:0/device:CPU:0", &devs[0].name));
    ASSERT_OK(zf_device_name_parse("/job:localhost/replica:0/task:0/device:GPU:0", &devs[1].name));
    zf_placer_options_t opts = ZF_PLACER_OPTIONS_DEFAULT;
    opts.allow_soft_placement = soft;
    int assignment[2] = {-1, -1};
    zf_status_t s = zf_placer_run(g, devs, 2, &opts, assignment);
    *mm_device = assignment[1];
    zf_graph_destroy(&g);
    return s;
}

static void test_placer_puts_a_float_matmul_on_the_gpu(void **state)
{
    (void)state;
    int dev = -1;
    ASSERT_OK(s_place(s_graph("DT_FLOAT", ""), false, &dev));
    assert_int_equal(dev, 1);
}

static void test_placer_keeps_an_int64_matmul_off_a_gpu_without_an_int64_kernel(void **state)
{
    (void)state;
    int dev = -1;
    ASSERT_OK(s_place(s_graph("DT_INT64", ""), false, &dev));
    assert_int_equal(dev, 0);
}

static void test_placer_refuses_an_int64_matmul_pinned_to_the_gpu(void **state)
{
    (void)state;
    int dev = -1;
    zf_test_expect_error(s_place(s_graph("DT_INT64", "/device:GPU:0"), false, &dev),
                         ZF_INVALID_ARGUMENT, "Cannot assign a device for operation mm");
    /* Soft placement falls back to the CPU, which has the kernel. */
    ASSERT_OK(s_place(s_graph("DT_INT64", "/device:GPU:0"), true, &dev));
    assert_int_equal(dev, 0);
}

static void test_kernel_accepts_dtype_only_rejects_registered_mismatches(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    const char *text = s_graph("DT_INT64", "");
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    const Tensorflow__NodeDef *mm = gd->node[1];
    assert_false(zf_kernel_def_accepts_dtype("GPU", mm));
    assert_true(zf_kernel_def_accepts_dtype("CPU", mm));
    assert_true(zf_kernel_def_accepts_dtype("TPU", mm)); /* nothing registered there */
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_placer_puts_a_float_matmul_on_the_gpu, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(
            test_placer_keeps_an_int64_matmul_off_a_gpu_without_an_int64_kernel, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_placer_refuses_an_int64_matmul_pinned_to_the_gpu,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_kernel_accepts_dtype_only_rejects_registered_mismatches, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
