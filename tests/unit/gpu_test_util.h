/* GPU test helpers (header-only, for tests/unit/test_gpu*.c): skipping a
 * test, with the reason printed, when no GPU is visible; the exit code
 * that tells CTest a program skipped everything (77, the tests'
 * SKIP_RETURN_CODE); and running one GPU kernel on host tensors.
 *
 * Include after <cmocka.h> and kernel_test_util.h. */
#ifndef ZF_GPU_TEST_UTIL_H
#define ZF_GPU_TEST_UTIL_H

#include <stdio.h>

#include "executor/devices/gpu.h"

#define GT_SKIP_EXIT_CODE 77

/* A pointer to a shape literal, for the APIs that take const zf_shape_t *. */
#define GT_SHAPE(...) (&(zf_shape_t[1]){ZF_SHAPE(__VA_ARGS__)}[0])

/* Tests skipped because no GPU is visible. */
static int gt_skipped;

/* The first GPU as a device, or the test is skipped (cmocka's skip(),
 * which leaves the test at once) after printing why. */
static inline zf_device_t *gt_gpu_or_skip(void)
{
    int n = 0;
    zf_status_t s = zf_gpu_device_count(&n);
    if (!zf_ok(s)) {
        print_message("skipped: %s\n", zf_status_msg(&s));
        zf_status_clear(&s);
        gt_skipped++;
        skip();
    }
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_gpu_new("/job:localhost/replica:0/task:0/device:GPU:0", 0, &dev));
    return dev;
}

/* main's return value: 77 when every one of total tests was skipped for
 * want of a GPU, else the number of failures. */
static inline int gt_exit_code(int failed, int total)
{
    if (failed == 0 && gt_skipped == total) {
        printf("all %d tests skipped: no GPU visible\n", total);
        return GT_SKIP_EXIT_CODE;
    }
    return failed;
}

/* Input i as the kernel takes it: host tensors stay where the kernel
 * reads host memory (and INT32 always does); others go to dev. */
static inline zf_tensor_t *gt_input(zf_device_t *dev, const zf_kernel_def_t *def, int i,
                                    zf_tensor_t *t)
{
    if ((def->host_memory_inputs >> i & 1u) || zf_tensor_dtype(t) == ZF_INT32)
        return zf_tensor_ref(t);
    zf_tensor_t *d = NULL;
    ASSERT_OK(zf_gpu_tensor_to_device(dev, t, &d));
    return d;
}

/* Output i checked to be where the kernel declares it, brought to host. */
static inline zf_tensor_t *gt_output(zf_device_t *dev, const zf_kernel_def_t *def, int i,
                                     const zf_tensor_t *t)
{
    bool host = def->host_memory_outputs >> i & 1u;
    zf_memory_kind_t kind = zf_tensor_memory_kind(t);
    if (host && kind == ZF_MEMORY_DEVICE) fail_msg("output %d should be in host memory", i);
    if (!host && zf_tensor_dtype(t) != ZF_INT32 && zf_tensor_nbytes(t) > 0 &&
        kind != ZF_MEMORY_DEVICE)
        fail_msg("output %d should be in GPU memory", i);
    zf_tensor_t *h = NULL;
    ASSERT_OK(zf_gpu_tensor_to_host(dev, t, &h));
    return h;
}

/* Runs node's GPU kernel on dev once (create, compute, destroy) with host
 * tensors in and out: see gt_input() and gt_output(). outputs start NULL
 * and receive owned references (NULL on error). */
static inline zf_status_t gt_run(zf_device_t *dev, const Tensorflow__NodeDef *node,
                                 zf_tensor_t *const *inputs, int num_inputs, zf_tensor_t **outputs,
                                 int num_outputs)
{
    zf_kernels_register_builtin(true);
    for (int i = 0; i < num_outputs; i++) outputs[i] = NULL;
    const zf_kernel_t *k = NULL;
    const zf_kernel_def_t *def = NULL;
    ZF_TRY(zf_kernel_find("GPU", node, &k));
    ZF_TRY(zf_kernel_def_find("GPU", node, &def, NULL));
    zf_tensor_t *in[8] = {NULL}, *out[8] = {NULL};
    assert_true(num_inputs <= 8 && num_outputs <= 8);
    for (int i = 0; i < num_inputs; i++) in[i] = gt_input(dev, def, i, inputs[i]);
    void *state = NULL;
    zf_status_t s = k->create ? k->create(node, &state) : ZF_STATUS_OK;
    if (zf_ok(s)) {
        zf_kernel_ctx_t ctx = {.node = node,
                               .state = state,
                               .device = dev,
                               .inputs = in,
                               .num_inputs = num_inputs,
                               .outputs = out,
                               .num_outputs = num_outputs};
        s = k->compute(&ctx);
        if (k->destroy) k->destroy(state);
    }
    for (int i = 0; i < num_outputs && zf_ok(s); i++)
        if (out[i]) outputs[i] = gt_output(dev, def, i, out[i]);
    kt_unref_all(in, num_inputs);
    kt_unref_all(out, num_outputs);
    return s;
}

#endif
