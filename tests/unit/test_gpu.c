/* Tests for the GPU device (executor/devices/gpu.h): attributes, device tensors and
 * their free callbacks through the caching allocator, host<->device copies
 * through pinned and pageable memory, device-to-device copies and IPC
 * export. Every test needs a visible GPU and is skipped, saying why, when
 * there is none; the program then exits 77 so CTest reports it skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"
#include "gpu_test_util.h"

#define S_GPU0 "/job:localhost/replica:0/task:0/device:GPU:0"

/* A host tensor of n floats with distinct values. */
static zf_tensor_t *s_ramp(int64_t n, float scale)
{
    zf_tensor_t *t = kt_zeros(ZF_FLOAT, ZF_SHAPE(n));
    float *p = zf_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)i * scale - 7.0f;
    return t;
}

static void test_gpu_device_reports_its_name_type_and_memory(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    assert_string_equal(dev->name_str, S_GPU0);
    assert_string_equal(dev->type, "GPU");
    assert_true(zf_device_is_gpu(dev));
    assert_false(zf_device_is_cpu(dev));
    assert_true(dev->incarnation != 0);
    assert_true(dev->memory_limit > 0);
    zf_device_t *other = NULL;
    ASSERT_OK(zf_device_gpu_new(S_GPU0, 0, &other));
    assert_true(other->incarnation != dev->incarnation);
    zf_device_destroy(&other);
    zf_device_destroy(&dev);
    assert_null(dev);
}

static void test_gpu_device_refuses_an_index_past_the_visible_gpus(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_device_destroy(&dev);
    zf_test_expect_error(zf_device_gpu_new(S_GPU0, 4096, &dev), ZF_INVALID_ARGUMENT,
                         "GPU index 4096 is out of range");
    assert_null(dev);
    zf_test_expect_error(zf_device_gpu_new(S_GPU0, -1, &dev), ZF_INVALID_ARGUMENT, "out of range");
}

static void test_gpu_tensors_live_in_gpu_memory(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_FLOAT, GT_SHAPE(3, 5), &t));
    assert_int_equal(zf_tensor_memory_kind(t), ZF_MEMORY_DEVICE);
    assert_int_equal(zf_buffer_device_id(zf_tensor_buffer(t)), 0);
    assert_int_equal(zf_tensor_nbytes(t), 60);
    assert_false(zf_tensor_equal(t, t)); /* device bytes are not host-comparable */
    zf_tensor_unref(&t);
    /* STRING tensors stay in host memory; empty tensors own no memory. */
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_STRING, GT_SHAPE(2), &t));
    assert_int_equal(zf_tensor_memory_kind(t), ZF_MEMORY_HOST);
    zf_tensor_unref(&t);
    zf_gpu_memory_stats_t before, after;
    ASSERT_OK(zf_gpu_memory_stats(dev, &before));
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_DOUBLE, GT_SHAPE(0, 4), &t));
    ASSERT_OK(zf_gpu_memory_stats(dev, &after));
    assert_int_equal(after.num_cuda_mallocs, before.num_cuda_mallocs);
    assert_int_equal(zf_tensor_nbytes(t), 0);
    zf_tensor_unref(&t);
    zf_device_destroy(&dev);
}

/* Freeing a tensor hands its block back to the cache; the next tensor of
 * that size gets the same memory without another cudaMalloc. */
static void test_gpu_tensor_free_callback_returns_memory_to_the_cache(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_gpu_memory_stats_t s0, s1, s2, s3;
    ASSERT_OK(zf_gpu_memory_stats(dev, &s0));
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_FLOAT, GT_SHAPE(1000, 1000), &t));
    void *p = zf_tensor_data(t);
    ASSERT_OK(zf_gpu_memory_stats(dev, &s1));
    assert_true(s1.bytes_in_use >= s0.bytes_in_use + 4000000);
    assert_int_equal(s1.num_cuda_mallocs, s0.num_cuda_mallocs + 1);
    zf_tensor_t *view = NULL;
    ASSERT_OK(zf_tensor_reshape(t, GT_SHAPE(1000000), &view));
    zf_tensor_unref(&t);
    ASSERT_OK(zf_gpu_memory_stats(dev, &s2));
    assert_int_equal(s2.bytes_in_use, s1.bytes_in_use); /* the view still holds it */
    zf_tensor_unref(&view);
    ASSERT_OK(zf_gpu_memory_stats(dev, &s2));
    assert_int_equal(s2.bytes_in_use, s0.bytes_in_use);
    assert_true(s2.bytes_cached >= s0.bytes_cached + 4000000);
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_FLOAT, GT_SHAPE(1000000), &t));
    ASSERT_OK(zf_gpu_memory_stats(dev, &s3));
    assert_ptr_equal(zf_tensor_data(t), p);
    assert_int_equal(s3.num_cuda_mallocs, s1.num_cuda_mallocs);
    zf_tensor_unref(&t);
    zf_device_destroy(&dev);
}

/* A tensor may outlive its device: its memory is freed when it goes. */
static void test_gpu_tensor_outlives_its_device(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *t = NULL, *host = s_ramp(1000, 0.5f), *back = NULL;
    ASSERT_OK(zf_gpu_tensor_to_device(dev, host, &t));
    zf_tensor_t *cached = NULL;
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_FLOAT, GT_SHAPE(77), &cached));
    zf_tensor_unref(&cached); /* a cached block for destroy to free */
    ASSERT_OK(zf_gpu_tensor_to_host(dev, t, &back));
    zf_device_destroy(&dev);
    assert_true(zf_tensor_equal(back, host));
    zf_tensor_unref(&t);
    kt_unref_all((zf_tensor_t *[]){host, back}, 2);
}

static void s_round_trip(zf_device_t *dev, int64_t n, bool pinned)
{
    zf_tensor_t *src = s_ramp(n, 0.25f), *host = NULL, *back = NULL, *d = NULL;
    if (pinned) {
        ASSERT_OK(zf_gpu_alloc_host_tensor(ZF_FLOAT, GT_SHAPE(n), &host));
        memcpy(zf_tensor_data(host), zf_tensor_data(src), zf_tensor_nbytes(src));
        ASSERT_OK(zf_gpu_alloc_host_tensor(ZF_FLOAT, GT_SHAPE(n), &back));
    } else {
        host = zf_tensor_ref(src);
        back = kt_zeros(ZF_FLOAT, ZF_SHAPE(n));
    }
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_FLOAT, GT_SHAPE(n), &d));
    ASSERT_OK(dev->ops->copy(dev, zf_tensor_data(d), zf_tensor_data(host), zf_tensor_nbytes(d),
                             ZF_COPY_HOST_TO_DEVICE));
    ASSERT_OK(dev->ops->copy(dev, zf_tensor_data(back), zf_tensor_data(d), zf_tensor_nbytes(d),
                             ZF_COPY_DEVICE_TO_HOST));
    if (!zf_tensor_equal(back, src))
        fail_msg("%lld floats (pinned=%d) came back changed", (long long)n, pinned);
    kt_unref_all((zf_tensor_t *[]){src, host, back, d}, 4);
}

/* Pageable memory goes through the two staging buffers in chunks: sizes
 * below one chunk, of several chunks and with an odd tail. */
static void test_gpu_copies_pageable_memory_through_staging_buffers(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const int64_t sizes[] = {1, 13, 1 << 20, 5 * (1 << 20) + 3, 3 * (1 << 20)};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) s_round_trip(dev, sizes[i], false);
    zf_device_destroy(&dev);
}

static void test_gpu_copies_pinned_memory_directly(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_gpu_alloc_host_tensor(ZF_DOUBLE, GT_SHAPE(4, 4), &t));
    assert_int_equal(zf_tensor_memory_kind(t), ZF_MEMORY_HOST_PINNED);
    for (int i = 0; i < 16; i++) assert_true(((const double *)zf_tensor_data(t))[i] == 0.0);
    zf_tensor_unref(&t);
    s_round_trip(dev, 1000, true);
    s_round_trip(dev, 3 * (1 << 20) + 7, true);
    zf_device_destroy(&dev);
}

static void test_gpu_tensor_helpers_move_tensors_and_keep_ones_already_there(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *host = KT_F64(ZF_SHAPE(2, 2), 1.5, -2.0, 3.25, 0.0), *d = NULL, *d2 = NULL;
    zf_tensor_t *back = NULL, *same = NULL;
    ASSERT_OK(zf_gpu_tensor_to_device(dev, host, &d));
    assert_int_equal(zf_tensor_memory_kind(d), ZF_MEMORY_DEVICE);
    ASSERT_OK(zf_gpu_tensor_to_device(dev, d, &d2));
    assert_ptr_equal(d2, d); /* already there: a new reference */
    ASSERT_OK(zf_gpu_tensor_to_host(dev, d, &back));
    assert_int_equal(zf_tensor_memory_kind(back), ZF_MEMORY_HOST_PINNED);
    assert_true(zf_tensor_equal(back, host));
    ASSERT_OK(zf_gpu_tensor_to_host(dev, host, &same));
    assert_ptr_equal(same, host);
    kt_unref_all((zf_tensor_t *[]){host, d, d2, back, same}, 5);
    zf_device_destroy(&dev);
}

static void test_gpu_copies_device_to_device(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *host = s_ramp(4099, 3.0f), *a = NULL, *b = NULL, *back = NULL;
    ASSERT_OK(zf_gpu_tensor_to_device(dev, host, &a));
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_FLOAT, GT_SHAPE(4099), &b));
    ASSERT_OK(dev->ops->copy(dev, zf_tensor_data(b), zf_tensor_data(a), zf_tensor_nbytes(a),
                             ZF_COPY_DEVICE_TO_DEVICE));
    ASSERT_OK(zf_gpu_tensor_to_host(dev, b, &back));
    assert_true(zf_tensor_equal(back, host));
    ASSERT_OK(dev->ops->sync(dev));
    kt_unref_all((zf_tensor_t *[]){host, a, b, back}, 4);
    zf_device_destroy(&dev);
}

/* Export works in process; opening a handle needs another process (CUDA
 * refuses one's own), so only the handle's contents are checked here. */
static void test_gpu_ipc_export_describes_the_tensor(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *t = NULL, *view = NULL, *empty = NULL;
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_FLOAT, GT_SHAPE(8, 8), &t));
    zf_gpu_ipc_handle_t h;
    ASSERT_OK(zf_gpu_ipc_export(t, &h));
    assert_int_equal(h.offset, 0);
    assert_int_equal(h.nbytes, 256);
    assert_int_equal(h.device_id, 0);
    ASSERT_OK(zf_tensor_reshape(t, GT_SHAPE(64), &view));
    ASSERT_OK(zf_gpu_ipc_export(view, &h));
    assert_int_equal(h.nbytes, 256);
    ASSERT_OK(zf_device_alloc_tensor(dev, ZF_FLOAT, GT_SHAPE(0), &empty));
    zf_test_expect_error(zf_gpu_ipc_export(empty, &h), ZF_INVALID_ARGUMENT, "an empty tensor");
    zf_tensor_t *out = NULL;
    h.nbytes = 8;
    zf_test_expect_error(zf_gpu_ipc_import(dev, &h, ZF_FLOAT, GT_SHAPE(64), &out),
                         ZF_INVALID_ARGUMENT, "covers 8 bytes, too few for 64 float32 elements");
    assert_null(out);
    kt_unref_all((zf_tensor_t *[]){t, view, empty}, 3);
    zf_device_destroy(&dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_device_reports_its_name_type_and_memory),
        cmocka_unit_test(test_gpu_device_refuses_an_index_past_the_visible_gpus),
        cmocka_unit_test(test_gpu_tensors_live_in_gpu_memory),
        cmocka_unit_test(test_gpu_tensor_free_callback_returns_memory_to_the_cache),
        cmocka_unit_test(test_gpu_tensor_outlives_its_device),
        cmocka_unit_test(test_gpu_copies_pageable_memory_through_staging_buffers),
        cmocka_unit_test(test_gpu_copies_pinned_memory_directly),
        cmocka_unit_test(test_gpu_tensor_helpers_move_tensors_and_keep_ones_already_there),
        cmocka_unit_test(test_gpu_copies_device_to_device),
        cmocka_unit_test(test_gpu_ipc_export_describes_the_tensor),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return gt_exit_code(failed, (int)(sizeof tests / sizeof tests[0]));
}
