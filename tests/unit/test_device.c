/* Tests for devices (executor/devices/device.h): the CPU device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/random.h"
#include "executor/devices/device.h"
#include "common/thread_pool.h"

#define CPU0 "/job:localhost/replica:0/task:0/device:CPU:0"

static void test_device_cpu_has_its_name_type_pool_and_a_nonzero_incarnation(void **state)
{
    (void)state;
    zf_device_t *a = NULL, *b = NULL;
    assert_int_equal(zf_device_cpu_new(CPU0, 2, &a).code, ZF_OK);
    assert_int_equal(zf_device_cpu_new("/job:w/replica:0/task:1/cpu:3", 1, &b).code, ZF_OK);
    assert_string_equal(a->name_str, CPU0);
    assert_string_equal(b->name_str, "/job:w/replica:0/task:1/device:CPU:3");
    assert_string_equal(a->type, "CPU");
    assert_true(zf_device_is_cpu(a));
    assert_int_equal(zf_thread_pool_size(a->pool), 2);
    assert_true(a->incarnation != 0);
    assert_true(b->incarnation != 0);
    assert_true(a->incarnation != b->incarnation); /* 2^-64 chance of a false failure */
    assert_true(a->memory_limit > 0);
    zf_device_destroy(&a);
    zf_device_destroy(&b);
    assert_null(a);
    zf_device_destroy(&a);
    zf_device_destroy(NULL);
}

static void test_device_cpu_allocates_zeroed_aligned_tensors_and_copies(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    assert_int_equal(zf_device_cpu_new(CPU0, 1, &dev).code, ZF_OK);
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE(3, 5);
    assert_int_equal(zf_device_alloc_tensor(dev, ZF_FLOAT, &shape, &t).code, ZF_OK);
    assert_int_equal(zf_tensor_num_elements(t), 15);
    assert_int_equal((uintptr_t)zf_tensor_data(t) % 64, 0);
    const float *f = zf_tensor_data(t);
    for (int i = 0; i < 15; i++) assert_true(f[i] == 0.0f);
    float src[15];
    for (int i = 0; i < 15; i++) src[i] = (float)i * 0.5f;
    assert_int_equal(
        dev->ops->copy(dev, zf_tensor_data(t), src, sizeof src, ZF_COPY_HOST_TO_DEVICE).code,
        ZF_OK);
    assert_memory_equal(zf_tensor_data(t), src, sizeof src);
    assert_int_equal(dev->ops->sync(dev).code, ZF_OK);
    zf_tensor_unref(&t);
    zf_device_destroy(&dev);
}

static void test_device_cpu_rejects_partial_and_non_cpu_names(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    zf_status_t s = zf_device_cpu_new("/device:CPU:0", 1, &dev);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "'/device:CPU:0' is not a full device name"));
    assert_null(dev);
    zf_status_clear(&s);
    s = zf_device_cpu_new("/job:a/replica:0/task:0/device:GPU:0", 1, &dev);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "a CPU device needs a CPU device name"));
    assert_null(dev);
    zf_status_clear(&s);
    s = zf_device_cpu_new("/job:a/bogus", 1, &dev);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "Malformed device specification"));
    zf_status_clear(&s);
}

static void test_device_incarnations_are_never_zero(void **state)
{
    (void)state;
    uint64_t prev = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t v = zf_random_id();
        assert_true(v != 0);
        assert_true(v != prev);
        prev = v;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_cpu_has_its_name_type_pool_and_a_nonzero_incarnation),
        cmocka_unit_test(test_device_cpu_allocates_zeroed_aligned_tensors_and_copies),
        cmocka_unit_test(test_device_cpu_rejects_partial_and_non_cpu_names),
        cmocka_unit_test(test_device_incarnations_are_never_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
