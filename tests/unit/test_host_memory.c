/* Tests for common/host_memory: size classes, the cache of freed blocks
 * and its limit, zero-fill, and the tensors built on it. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/host_memory.h"
#include "common/tensor.h"

#define KiB ((size_t)1024)
#define MiB (KiB * KiB)

static zf_host_memory_stats_t s_stats(void)
{
    zf_host_memory_stats_t st;
    zf_host_memory_stats(&st);
    return st;
}

static bool s_all(const void *p, size_t n, unsigned char v)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v) return false;
    return true;
}

static int s_setup(void **state)
{
    (void)state;
    zf_host_memory_set_cache_limit(64 * MiB);
    zf_host_memory_trim();
    return 0;
}

/* main() sets ZFLOW_HOST_CACHE_MB=3 before anything allocates. */
static void test_the_environment_sets_the_cache_limit(void **state)
{
    (void)state;
    assert_int_equal(zf_host_memory_cache_limit(), 3 * MiB);
}

static void test_small_blocks_are_aligned_and_zeroed_on_request(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 63, 64, 4096, 100000, ZF_HOST_MEMORY_CACHED_MIN - 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *hint = NULL;
        unsigned char *p = zf_host_memory_alloc(sizes[i], 64, true, &hint);
        assert_non_null(p);
        assert_non_null(hint);
        assert_int_equal((uintptr_t)p % 64, 0);
        assert_true(s_all(p, sizes[i], 0));
        memset(p, 0x33, sizes[i]);
        zf_host_memory_free(hint);
        p = zf_host_memory_alloc(sizes[i], 256, false, &hint);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 256, 0);
        if (zf_host_memory_fills_uninit()) assert_true(s_all(p, sizes[i], 0xff));
        zf_host_memory_free(hint);
    }
    zf_host_memory_stats_t st = s_stats();
    assert_int_equal(st.cached_blocks, 0); /* malloc's, not the cache's */
}

static void test_a_bad_alignment_is_refused(void **state)
{
    (void)state;
    void *hint = (void *)1;
    assert_null(zf_host_memory_alloc(100, 48, true, &hint));
    assert_null(hint);
    assert_null(zf_host_memory_alloc(100, 0, true, &hint));
    /* mapped blocks are aligned to pages, no more */
    assert_null(zf_host_memory_alloc(ZF_HOST_MEMORY_CACHED_MIN, (size_t)1 << 20, true, &hint));
}

/* Four classes per power of two: the class size is the request rounded
 * up to a quarter of the power of two below it. */
static void test_blocks_come_in_four_classes_per_power_of_two(void **state)
{
    (void)state;
    struct {
        size_t want, mapped;
    } cases[] = {
        {256 * KiB, 256 * KiB},     {256 * KiB + 1, 320 * KiB}, {320 * KiB, 320 * KiB},
        {448 * KiB + 1, 512 * KiB}, {MiB + 1, MiB + 256 * KiB}, {3 * MiB + 5, 3 * MiB + 512 * KiB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zf_host_memory_stats_t before = s_stats();
        void *hint = NULL;
        void *p = zf_host_memory_alloc(cases[i].want, 64, true, &hint);
        assert_non_null(p);
        zf_host_memory_stats_t after = s_stats();
        assert_int_equal(after.mapped_bytes - before.mapped_bytes, cases[i].mapped);
        assert_int_equal(after.misses, before.misses + 1);
        assert_true(s_all(p, cases[i].want, 0));
        zf_host_memory_free(hint);
        assert_int_equal(s_stats().cached_bytes, before.cached_bytes + cases[i].mapped);
        zf_host_memory_trim();
    }
}

static void test_a_freed_block_is_reused_and_zeroed_on_request(void **state)
{
    (void)state;
    void *h1 = NULL, *h2 = NULL;
    unsigned char *p = zf_host_memory_alloc(MiB, 64, false, &h1);
    assert_non_null(p);
    memset(p, 0x5a, MiB);
    zf_host_memory_free(h1);
    zf_host_memory_stats_t before = s_stats();
    assert_int_equal(before.cached_blocks, 1);
    /* the same class, asked for uninitialised: the same block as it was */
    unsigned char *q = zf_host_memory_alloc(MiB - 4096, 64, false, &h2);
    assert_ptr_equal(q, p);
    zf_host_memory_stats_t after = s_stats();
    assert_int_equal(after.hits, before.hits + 1);
    assert_int_equal(after.cached_blocks, 0);
    assert_true(s_all(q, MiB - 4096, zf_host_memory_fills_uninit() ? 0xff : 0x5a));
    memset(q, 0x77, MiB - 4096);
    zf_host_memory_free(h2);
    /* asked for zeros: written with zeros */
    q = zf_host_memory_alloc(MiB, 64, true, &h2);
    assert_ptr_equal(q, p);
    assert_true(s_all(q, MiB, 0));
    zf_host_memory_free(h2);
}

/* A freed block serves its own class only: a request of the next class
 * up maps a block of its own and leaves the cached one cached. */
static void test_a_freed_block_serves_only_its_class(void **state)
{
    (void)state;
    void *h1 = NULL, *h2 = NULL;
    void *p = zf_host_memory_alloc(256 * KiB, 64, false, &h1);
    assert_non_null(p);
    zf_host_memory_free(h1);
    zf_host_memory_stats_t before = s_stats();
    assert_int_equal(before.cached_blocks, 1);
    void *q = zf_host_memory_alloc(320 * KiB, 64, true, &h2);
    assert_non_null(q);
    zf_host_memory_stats_t after = s_stats();
    assert_int_equal(after.misses, before.misses + 1);
    assert_int_equal(after.hits, before.hits);
    assert_int_equal(after.cached_blocks, 1);
    assert_int_equal(after.cached_bytes, 256 * KiB);
    assert_int_equal(after.mapped_bytes, before.mapped_bytes + 320 * KiB);
    assert_true(s_all(q, 320 * KiB, 0));
    zf_host_memory_free(h2);
}

/* The most recently freed block of a class is taken first. */
static void test_the_last_block_freed_is_the_first_reused(void **state)
{
    (void)state;
    void *ha = NULL, *hb = NULL;
    void *a = zf_host_memory_alloc(512 * KiB, 64, true, &ha);
    void *b = zf_host_memory_alloc(512 * KiB, 64, true, &hb);
    assert_ptr_not_equal(a, b);
    zf_host_memory_free(ha);
    zf_host_memory_free(hb);
    void *h = NULL;
    assert_ptr_equal(zf_host_memory_alloc(512 * KiB, 64, true, &h), b);
    zf_host_memory_free(h);
}

static void test_the_cache_keeps_to_its_limit(void **state)
{
    (void)state;
    zf_host_memory_set_cache_limit(MiB);
    void *h[3] = {NULL};
    for (int i = 0; i < 3; i++) assert_non_null(zf_host_memory_alloc(768 * KiB, 64, true, &h[i]));
    zf_host_memory_stats_t st = s_stats();
    assert_int_equal(st.mapped_bytes, 3 * 768 * KiB);
    for (int i = 0; i < 3; i++) zf_host_memory_free(h[i]);
    st = s_stats();
    assert_int_equal(st.cached_blocks, 1);
    assert_int_equal(st.cached_bytes, 768 * KiB);
    assert_int_equal(st.mapped_bytes, 768 * KiB);
    /* lowering the limit releases what no longer fits */
    zf_host_memory_set_cache_limit(512 * KiB);
    st = s_stats();
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.mapped_bytes, 0);
    /* a limit of 0 turns the cache off */
    zf_host_memory_set_cache_limit(0);
    assert_non_null(zf_host_memory_alloc(MiB, 64, true, &h[0]));
    zf_host_memory_free(h[0]);
    st = s_stats();
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.mapped_bytes, 0);
}

static void test_trim_releases_every_cached_block(void **state)
{
    (void)state;
    void *h[4] = {NULL};
    size_t sizes[4] = {256 * KiB, 300 * KiB, 2 * MiB, 5 * MiB};
    for (int i = 0; i < 4; i++) assert_non_null(zf_host_memory_alloc(sizes[i], 64, true, &h[i]));
    for (int i = 0; i < 4; i++) zf_host_memory_free(h[i]);
    assert_int_equal(s_stats().cached_blocks, 4);
    zf_host_memory_trim();
    zf_host_memory_stats_t st = s_stats();
    assert_int_equal(st.cached_blocks, 0);
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.mapped_bytes, 0);
}

/* Threads allocating and freeing blocks of many classes at once: each
 * block is its own (a thread's pattern survives until it frees it), and
 * the counts add up when all is freed. */
typedef struct {
    unsigned seed;
    int failures;
} s_worker_t;

static void *s_worker(void *arg)
{
    s_worker_t *w = arg;
    for (int i = 0; i < 300; i++) {
        size_t size = ZF_HOST_MEMORY_CACHED_MIN + (size_t)(rand_r(&w->seed) % (4 * MiB));
        void *hint = NULL;
        unsigned char *p = zf_host_memory_alloc(size, 64, (i & 1) != 0, &hint);
        if (!p) {
            w->failures++;
            continue;
        }
        unsigned char v = (unsigned char)(w->seed & 0xff);
        p[0] = v;
        p[size / 2] = v;
        p[size - 1] = v;
        if (p[0] != v || p[size / 2] != v || p[size - 1] != v) w->failures++;
        zf_host_memory_free(hint);
    }
    return NULL;
}

static void test_threads_share_the_cache(void **state)
{
    (void)state;
    zf_host_memory_set_cache_limit(32 * MiB);
    pthread_t t[4];
    s_worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (s_worker_t){.seed = 17u + (unsigned)i, .failures = 0};
        assert_int_equal(pthread_create(&t[i], NULL, s_worker, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    zf_host_memory_stats_t st = s_stats();
    assert_true(st.cached_bytes <= 32 * MiB);
    assert_int_equal(st.mapped_bytes, st.cached_bytes);
    assert_true(st.hits > 0);
}

/* A tensor from zf_tensor_new is zeros even when its block was an
 * uninitialised tensor's, written and dropped. */
static void test_a_new_tensor_is_zero_in_a_reused_block(void **state)
{
    (void)state;
    zf_shape_t shape = {.rank = 2, .dims = {512, 512}};
    zf_tensor_t *t = NULL;
    assert_true(zf_ok(zf_tensor_new_uninit(ZF_FLOAT, &shape, &t)));
    float *p = zf_tensor_data(t);
    for (int64_t i = 0; i < 512 * 512; i++) p[i] = (float)i + 1.0f;
    zf_tensor_unref(&t);
    zf_host_memory_stats_t before = s_stats();
    assert_true(zf_ok(zf_tensor_new(ZF_FLOAT, &shape, &t)));
    assert_int_equal(s_stats().hits, before.hits + 1);
    assert_ptr_equal(zf_tensor_data(t), p);
    const float *q = zf_tensor_data(t);
    for (int64_t i = 0; i < 512 * 512; i++)
        if (q[i] != 0.0f) fail_msg("element %lld is %g", (long long)i, (double)q[i]);
    zf_tensor_unref(&t);
}

/* An uninitialised STRING tensor is empty strings even in a reused block
 * that a FLOAT tensor filled with other bytes. */
static void test_an_uninitialised_string_tensor_holds_empty_strings(void **state)
{
    (void)state;
    /* 160000 floats, the 640000 bytes of 40000 zf_tstring_t: one class */
    zf_shape_t fshape = {.rank = 1, .dims = {160000}};
    zf_tensor_t *f = NULL;
    assert_true(zf_ok(zf_tensor_new_uninit(ZF_FLOAT, &fshape, &f)));
    assert_int_equal(zf_tensor_nbytes(f), 640000);
    memset(zf_tensor_data(f), 0xab, zf_tensor_nbytes(f));
    zf_tensor_unref(&f);
    zf_host_memory_stats_t before = s_stats();
    zf_shape_t shape = {.rank = 1, .dims = {40000}}; /* 640 KB of zf_tstring_t */
    zf_tensor_t *t = NULL;
    assert_true(zf_ok(zf_tensor_new_uninit(ZF_STRING, &shape, &t)));
    assert_int_equal(zf_tensor_nbytes(t), 640000);
    assert_int_equal(s_stats().hits, before.hits + 1);
    const zf_tstring_t *s = zf_tensor_data(t);
    for (int i = 0; i < 40000; i++) {
        assert_int_equal(s[i].len, 0);
        assert_null(s[i].data);
    }
    zf_tensor_unref(&t);
}

static void test_an_uninitialised_buffer_keeps_the_allocation_limit(void **state)
{
    (void)state;
    zf_buffer_set_alloc_limit(MiB);
    zf_buffer_t *b = NULL;
    zf_status_t s = zf_buffer_new_uninit(MiB + 1, &b);
    zf_buffer_set_alloc_limit(0);
    assert_int_equal(s.code, ZF_RESOURCE_EXHAUSTED);
    assert_string_equal(zf_status_msg(&s),
                        "allocation of 1048577 bytes exceeds the limit of 1048576 bytes");
    assert_null(b);
    zf_status_clear(&s);
}

int main(void)
{
    setenv("ZFLOW_HOST_CACHE_MB", "3", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_environment_sets_the_cache_limit),
        cmocka_unit_test_setup(test_small_blocks_are_aligned_and_zeroed_on_request, s_setup),
        cmocka_unit_test(test_a_bad_alignment_is_refused),
        cmocka_unit_test_setup(test_blocks_come_in_four_classes_per_power_of_two, s_setup),
        cmocka_unit_test_setup(test_a_freed_block_is_reused_and_zeroed_on_request, s_setup),
        cmocka_unit_test_setup(test_a_freed_block_serves_only_its_class, s_setup),
        cmocka_unit_test_setup(test_the_last_block_freed_is_the_first_reused, s_setup),
        cmocka_unit_test_setup(test_the_cache_keeps_to_its_limit, s_setup),
        cmocka_unit_test_setup(test_trim_releases_every_cached_block, s_setup),
        cmocka_unit_test_setup(test_threads_share_the_cache, s_setup),
        cmocka_unit_test_setup(test_a_new_tensor_is_zero_in_a_reused_block, s_setup),
        cmocka_unit_test_setup(test_an_uninitialised_string_tensor_holds_empty_strings, s_setup),
        cmocka_unit_test_setup(test_an_uninitialised_buffer_keeps_the_allocation_limit, s_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
