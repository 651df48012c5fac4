/* Registers the built-in kernels: every CPU kernel family (the Send/Recv
 * family included) once, then the families of other device types (GPU)
 * when asked for. */
#include <pthread.h>
#include <stddef.h>

#include "common/log.h"
#include "executor/devices/gpu.h"
#include "executor/kernels/kernel.h"
#include "executor/kernels/kernels_sendrecv.h"
#include "executor/kernels/kernels_util.h"

/* The CPU kernel families, one registration function per kernels_*.c. */
static zf_status_t (*const s_cpu_families[])(void) = {
    zf__kernels_register_basic,       zf__kernels_register_state,
    zf__kernels_register_cwise,       zf__kernels_register_matmul,
    zf__kernels_register_shape,       zf__kernels_register_cast,
    zf__kernels_register_reduce,      zf__kernels_register_nn,
    zf__kernels_register_conv,        zf__kernels_register_compare,
    zf__kernels_register_control,     zf__kernels_register_activation,
    zf__kernels_register_loss,        zf__kernels_register_random,
    zf__kernels_register_slice,       zf__kernels_register_pad,
    zf__kernels_register_gather,      zf__kernels_register_order,
    zf__kernels_register_batchnorm,   zf__kernels_register_batch_matmul,
    zf__kernels_register_optimizers,  zf__kernels_register_checkpoint,
    zf__kernels_register_train_extra, zf__kernels_register_einsum,
    zf__kernels_register_resize,
};

/* GPU kernel families: the GPU kernels add their registration function
 * (zf_status_t zf_gpu_register_kernels(void)) to this list. Run after the
 * CPU families, and only when zf_kernels_register_builtin() is asked for
 * GPU kernels. */
static zf_status_t (*const s_gpu_families[])(void) = {
    zf_gpu_register_kernels,
};

static pthread_once_t s_cpu_once = PTHREAD_ONCE_INIT;
static pthread_once_t s_gpu_once = PTHREAD_ONCE_INIT;
static zf_status_t s_first_failure; /* written under the pthread_once calls */

/* A family that fails to register is logged and skipped: its ops keep
 * their definitions (the placer still places them) but have no
 * implementation, so an engine built for a partition that uses one fails
 * with NOT_FOUND naming the op and the node. */
static void s_run(zf_status_t (*const *families)(void), size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (!families[i]) continue;
        zf_status_t s = families[i]();
        if (!zf_ok(s))
            zf_log(ZF_LOG_ERROR, "kernels", "registering %s kernels: %s", what, zf_status_msg(&s));
        if (!zf_ok(s) && zf_ok(s_first_failure))
            s_first_failure = s;
        else
            zf_status_clear(&s);
    }
}

static void s_register_cpu(void)
{
    s_run(s_cpu_families, sizeof s_cpu_families / sizeof s_cpu_families[0], "CPU");
    zf_kernels_register_sendrecv(); /* idempotent; logs its own failures */
}

static void s_register_gpu(void)
{
    s_run(s_gpu_families, sizeof s_gpu_families / sizeof s_gpu_families[0], "GPU");
}

zf_status_t zf_kernels_builtin_status(void)
{
    return zf_ok(s_first_failure)
               ? ZF_STATUS_OK
               : zf_status_new(s_first_failure.code, "%s", zf_status_msg(&s_first_failure));
}

void zf_kernels_register_builtin(bool with_gpu)
{
    zf_kernel_defs_register_builtin();
    pthread_once(&s_cpu_once, s_register_cpu);
    if (with_gpu) pthread_once(&s_gpu_once, s_register_gpu);
}
