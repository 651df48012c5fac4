/* Definitions of gpu_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpu_test_util.h"

int gt_skipped;

zf_device_t *gt_gpu_or_skip(void)
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

int gt_exit_code(int failed, int total)
{
    if (failed == 0 && gt_skipped == total) {
        printf("all %d tests skipped: no GPU visible\n", total);
        return GT_SKIP_EXIT_CODE;
    }
    return failed;
}

/* Input i as the kernel takes it: host tensors stay where the kernel
 * reads host memory (and INT32 always does); others go to dev. */
static zf_tensor_t *gt_input(zf_device_t *dev, const zf_kernel_def_t *def, int i, zf_tensor_t *t)
{
    if ((def->host_memory_inputs >> i & 1u) || zf_tensor_dtype(t) == ZF_INT32)
        return zf_tensor_ref(t);
    zf_tensor_t *d = NULL;
    ASSERT_OK(zf_gpu_tensor_to_device(dev, t, &d));
    return d;
}

/* Output i checked to be where the kernel declares it, brought to host. */
static zf_tensor_t *gt_output(zf_device_t *dev, const zf_kernel_def_t *def, int i,
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

zf_status_t gt_run(zf_device_t *dev, const Tensorflow__NodeDef *node, zf_tensor_t *const *inputs,
                   int num_inputs, zf_tensor_t **outputs, int num_outputs)
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
