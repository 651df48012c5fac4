/* Devices: the shared constructor and destructor every device type uses,
 * and the CPU device (64-byte aligned host tensors, memcpy copies). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/devices/device.h"

#include "common/host_memory.h"
#include "common/random.h"
#include "common/thread_pool.h"

zf_status_t zf_device_new(const zf_device_ops_t *ops, const char *name, int num_threads,
                          zf_device_t **out)
{
    *out = NULL;
    zf_device_name_t parsed;
    ZF_TRY(zf_device_name_parse(name ? name : "", &parsed));
    if (!zf_device_name_is_full(&parsed))
        return zf_invalid_argument("device name '%s' is not a full device name "
                                   "(/job:<job>/replica:<r>/task:<t>/device:<TYPE>:<id>)",
                                   name ? name : "");
    zf_device_t *dev = calloc(1, sizeof *dev);
    if (!dev) return zf_out_of_memory("device");
    dev->ops = ops;
    dev->name = parsed;
    zf_device_name_format(&parsed, dev->name_str, sizeof dev->name_str);
    snprintf(dev->type, sizeof dev->type, "%s", parsed.type);
    dev->incarnation = zf_random_id();
    zf_status_t s = zf_thread_pool_new(num_threads, &dev->pool);
    if (!zf_ok(s)) {
        free(dev);
        return zf_status_prefix(s, "device %s", name);
    }
    *out = dev;
    return ZF_STATUS_OK;
}

void zf_device_destroy(zf_device_t **dev_p)
{
    if (!dev_p || !*dev_p) return;
    zf_device_t *dev = *dev_p;
    *dev_p = NULL;
    /* Workers may still run kernels touching the device's memory: stop them
     * before the type releases its state. */
    zf_thread_pool_destroy(&dev->pool);
    if (dev->ops && dev->ops->destroy) dev->ops->destroy(dev);
    free(dev);
}

zf_status_t zf_device_alloc_tensor(zf_device_t *dev, zf_dtype_t dtype, const zf_shape_t *shape,
                                   zf_tensor_t **out)
{
    return dev->ops->alloc_tensor(dev, dtype, shape, out);
}

zf_status_t zf_device_alloc_tensor_uninit(zf_device_t *dev, zf_dtype_t dtype,
                                          const zf_shape_t *shape, zf_tensor_t **out)
{
    if (dev->ops->alloc_tensor_uninit) return dev->ops->alloc_tensor_uninit(dev, dtype, shape, out);
    return dev->ops->alloc_tensor(dev, dtype, shape, out);
}

bool zf_device_is_cpu(const zf_device_t *dev)
{
    return strcmp(dev->type, ZF_DEVICE_TYPE_CPU) == 0;
}

/* ---- CPU ---------------------------------------------------------------- */

static zf_status_t s_cpu_alloc_tensor(zf_device_t *dev, zf_dtype_t dtype, const zf_shape_t *shape,
                                      zf_tensor_t **out)
{
    (void)dev;
    return zf_tensor_new(dtype, shape, out);
}

static zf_status_t s_cpu_alloc_tensor_uninit(zf_device_t *dev, zf_dtype_t dtype,
                                             const zf_shape_t *shape, zf_tensor_t **out)
{
    (void)dev;
    return zf_tensor_new_uninit(dtype, shape, out);
}

static zf_status_t s_cpu_copy(zf_device_t *dev, void *dst, const void *src, size_t nbytes,
                              zf_copy_kind_t kind)
{
    (void)dev;
    (void)kind;
    if (nbytes) memcpy(dst, src, nbytes);
    return ZF_STATUS_OK;
}

static zf_status_t s_cpu_sync(zf_device_t *dev)
{
    (void)dev;
    return ZF_STATUS_OK;
}

static void s_cpu_destroy(zf_device_t *dev)
{
    (void)dev;
}

static const zf_device_ops_t s_cpu_ops = {
    .alloc_tensor = s_cpu_alloc_tensor,
    .alloc_tensor_uninit = s_cpu_alloc_tensor_uninit,
    .copy = s_cpu_copy,
    .sync = s_cpu_sync,
    .destroy = s_cpu_destroy,
};

zf_status_t zf_device_cpu_new(const char *name, int num_threads, zf_device_t **out)
{
    *out = NULL;
    /* the type first, from the name alone: zf_device_new checks the rest */
    zf_device_name_t parsed;
    char full[ZF_DEVICE_NAME_MAX];
    zf_status_t st = zf_device_name_parse(name ? name : "", &parsed);
    bool other = zf_ok(st) && parsed.has_type && strcmp(parsed.type, ZF_DEVICE_TYPE_CPU) != 0;
    zf_status_clear(&st);
    if (other)
        return zf_invalid_argument("a CPU device needs a CPU device name, not '%s'",
                                   zf_device_name_format(&parsed, full, sizeof full));
    ZF_TRY(zf_device_new(&s_cpu_ops, name, num_threads, out));
    size_t physical = zf_physical_memory();
    (*out)->memory_limit = physical > (size_t)INT64_MAX ? INT64_MAX : (int64_t)physical;
    return ZF_STATUS_OK;
}
