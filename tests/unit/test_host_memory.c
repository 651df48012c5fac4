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

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

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

/* In builds with AddressSanitizer: whether every byte of p[0, n) is
 * poisoned (want true) or none is (want false). Elsewhere true. */
static bool s_poisoned(const void *p, size_t n, bool want)
{
#if defined(__SANITIZE_ADDRESS__)
    if (!want) return __asan_region_is_poisoned((void *)(uintptr_t)p, n) == NULL;
    for (size_t i = 0; i < n; i++)
        if (!__asan_address_is_poisoned((const char *)p + i)) return false;
    return true;
#else
    (void)p, (void)n, (void)want;
    return true;
#endif
}

/* Allocates a block of size bytes (a class size) and fails the test
 * without one. */
static void *s_alloc(size_t size, void **hint)
{
    void *p = zf_host_memory_alloc(size, 64, false, hint);
    assert_non_null(p);
    return p;
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
    void *h[3] = {NULL}, *p[3] = {NULL};
    for (int i = 0; i < 3; i++) p[i] = s_alloc(768 * KiB, &h[i]);
    zf_host_memory_stats_t st = s_stats();
    unsigned long long evictions = st.evictions;
    assert_int_equal(st.mapped_bytes, 3 * 768 * KiB);
    for (int i = 0; i < 3; i++) zf_host_memory_free(h[i]);
    /* each block fits alone but not beside another: each free but the
     * first evicts the block freed before it */
    st = s_stats();
    assert_int_equal(st.cached_blocks, 1);
    assert_int_equal(st.cached_bytes, 768 * KiB);
    assert_int_equal(st.mapped_bytes, 768 * KiB);
    assert_int_equal(st.evictions, evictions + 2);
    void *again = NULL;
    assert_ptr_equal(s_alloc(768 * KiB, &again), p[2]);
    zf_host_memory_free(again);
    /* lowering the limit releases what no longer fits */
    zf_host_memory_set_cache_limit(512 * KiB);
    st = s_stats();
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.mapped_bytes, 0);
    assert_int_equal(st.evictions, evictions + 3);
    /* a limit of 0 turns the cache off */
    zf_host_memory_set_cache_limit(0);
    assert_non_null(zf_host_memory_alloc(MiB, 64, true, &h[0]));
    zf_host_memory_free(h[0]);
    st = s_stats();
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.mapped_bytes, 0);
    assert_int_equal(st.evictions, evictions + 3); /* nothing was cached to make room in */
}

static void test_trim_releases_every_cached_block(void **state)
{
    (void)state;
    void *h[4] = {NULL};
    size_t sizes[4] = {256 * KiB, 300 * KiB, 2 * MiB, 5 * MiB};
    for (int i = 0; i < 4; i++) assert_non_null(zf_host_memory_alloc(sizes[i], 64, true, &h[i]));
    for (int i = 0; i < 4; i++) zf_host_memory_free(h[i]);
    zf_host_memory_stats_t before = s_stats();
    assert_int_equal(before.cached_blocks, 4);
    /* the classes: 256 KiB, 320 KiB, 2 MiB and 5 MiB */
    assert_int_equal(zf_host_memory_trim(), 256 * KiB + 320 * KiB + 2 * MiB + 5 * MiB);
    zf_host_memory_stats_t st = s_stats();
    assert_int_equal(st.cached_blocks, 0);
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.mapped_bytes, 0);
    assert_int_equal(st.evictions, before.evictions); /* a trim is not an eviction */
    assert_int_equal(zf_host_memory_trim(), 0);
}

/* A freed block that does not fit beside the cached ones is cached all
 * the same: the blocks freed longest ago, of any class, are unmapped to
 * make room, however small they are, and the others stay. */
static void test_the_blocks_freed_longest_ago_make_room(void **state)
{
    (void)state;
    const size_t a = 256 * KiB, b = 512 * KiB, c = 768 * KiB;
    zf_host_memory_set_cache_limit(a + c + 256 * KiB); /* 1280 KiB: B and C fit, A, B and C not */
    void *ha = NULL, *hb = NULL, *hc = NULL;
    void *pa = s_alloc(a, &ha), *pb = s_alloc(b, &hb), *pc = s_alloc(c, &hc);
    zf_host_memory_stats_t before = s_stats();
    assert_int_equal(before.mapped_bytes, a + b + c);
    zf_host_memory_free(ha);
    zf_host_memory_free(hb);
    zf_host_memory_stats_t st = s_stats();
    assert_int_equal(st.cached_bytes, a + b);
    assert_int_equal(st.evictions, before.evictions);
    zf_host_memory_free(hc); /* 256 + 512 + 768 KiB > 1280 KiB: A goes */
    st = s_stats();
    assert_int_equal(st.cached_blocks, 2);
    assert_int_equal(st.cached_bytes, b + c);
    assert_int_equal(st.mapped_bytes, b + c);
    assert_int_equal(st.evictions, before.evictions + 1);
    assert_true(s_poisoned(pb, b, true));
    assert_true(s_poisoned(pc, c, true));
    /* A's class maps a new block; B's and C's come from the cache */
    void *h1 = NULL, *h2 = NULL, *h3 = NULL;
    assert_non_null(s_alloc(a, &h1));
    assert_ptr_equal(s_alloc(b, &h2), pb);
    assert_ptr_equal(s_alloc(c, &h3), pc);
    assert_true(s_poisoned(pb, b, false));
    assert_true(s_poisoned(pc, c, false));
    zf_host_memory_stats_t after = s_stats();
    assert_int_equal(after.misses, st.misses + 1);
    assert_int_equal(after.hits, st.hits + 2);
    assert_int_equal(after.cached_blocks, 0);
    assert_int_equal(after.cached_bytes, 0);
    assert_int_equal(after.mapped_bytes, a + b + c);
    (void)pa;
    zf_host_memory_free(h1);
    zf_host_memory_free(h2);
    zf_host_memory_free(h3);
}

/* A block that needs more room than the oldest block frees evicts as many
 * of the oldest as it takes, and no more. */
static void test_a_block_evicts_as_many_old_blocks_as_it_needs(void **state)
{
    (void)state;
    zf_host_memory_set_cache_limit(MiB);
    const size_t sizes[4] = {256 * KiB, 320 * KiB, 384 * KiB, 512 * KiB};
    void *h[4] = {NULL}, *p[4] = {NULL};
    for (int i = 0; i < 4; i++) p[i] = s_alloc(sizes[i], &h[i]);
    zf_host_memory_stats_t before = s_stats();
    for (int i = 0; i < 3; i++) zf_host_memory_free(h[i]); /* 960 KiB */
    /* 512 KiB more: the cache must come down to 512 KiB; without the
     * first (704 KiB) it has not, without the second too (384 KiB) it has */
    zf_host_memory_free(h[3]);
    zf_host_memory_stats_t st = s_stats();
    assert_int_equal(st.cached_blocks, 2);
    assert_int_equal(st.cached_bytes, sizes[2] + sizes[3]);
    assert_int_equal(st.mapped_bytes, sizes[2] + sizes[3]);
    assert_int_equal(st.evictions, before.evictions + 2);
    void *h2 = NULL, *h3 = NULL;
    assert_ptr_equal(s_alloc(sizes[2], &h2), p[2]);
    assert_ptr_equal(s_alloc(sizes[3], &h3), p[3]);
    zf_host_memory_free(h2);
    zf_host_memory_free(h3);
}

/* A block larger than the whole limit is unmapped and evicts nothing; one
 * of exactly the limit evicts everything else and is cached. */
static void test_a_block_larger_than_the_limit_evicts_nothing(void **state)
{
    (void)state;
    zf_host_memory_set_cache_limit(MiB);
    void *ha = NULL, *hbig = NULL, *hfit = NULL;
    void *pa = s_alloc(256 * KiB, &ha);
    zf_host_memory_free(ha);
    zf_host_memory_stats_t before = s_stats();
    assert_non_null(s_alloc(MiB + 1, &hbig)); /* a class of 1280 KiB */
    assert_int_equal(s_stats().mapped_bytes, before.mapped_bytes + MiB + 256 * KiB);
    zf_host_memory_free(hbig);
    zf_host_memory_stats_t st = s_stats();
    assert_int_equal(st.cached_blocks, 1);
    assert_int_equal(st.cached_bytes, 256 * KiB);
    assert_int_equal(st.mapped_bytes, 256 * KiB);
    assert_int_equal(st.evictions, before.evictions);
    void *again = NULL;
    assert_ptr_equal(s_alloc(256 * KiB, &again), pa);
    zf_host_memory_free(again);
    void *pfit = s_alloc(MiB, &hfit);
    zf_host_memory_free(hfit);
    st = s_stats();
    assert_int_equal(st.cached_blocks, 1);
    assert_int_equal(st.cached_bytes, MiB);
    assert_int_equal(st.mapped_bytes, MiB);
    assert_int_equal(st.evictions, before.evictions + 1);
    assert_ptr_equal(s_alloc(MiB, &hfit), pfit);
    zf_host_memory_free(hfit);
}

/* Blocks of a class are handed out most recently freed first even with
 * blocks of other classes freed between them, and a block taken from the
 * middle of the recency order leaves the order of the rest as it was: a
 * lower limit evicts the least recently freed of those that stay. */
static void test_a_class_is_lifo_and_a_lower_limit_evicts_the_oldest(void **state)
{
    (void)state;
    const size_t a = 256 * KiB, b = 512 * KiB, c = 320 * KiB, d = 384 * KiB;
    void *ha1 = NULL, *ha2 = NULL, *hb = NULL, *hc = NULL, *hd = NULL;
    void *pa1 = s_alloc(a, &ha1), *pa2 = s_alloc(a, &ha2);
    void *pb = s_alloc(b, &hb), *pc = s_alloc(c, &hc), *pd = s_alloc(d, &hd);
    /* freed: A1, B, A2, C, D */
    zf_host_memory_free(ha1);
    zf_host_memory_free(hb);
    zf_host_memory_free(ha2);
    zf_host_memory_free(hc);
    zf_host_memory_free(hd);
    assert_int_equal(s_stats().cached_bytes, 2 * a + b + c + d);
    void *h = NULL;
    assert_ptr_equal(s_alloc(a, &h), pa2); /* the last A freed, not the first */
    assert_ptr_equal(s_alloc(c, &hc), pc); /* C, from the middle of the order */
    zf_host_memory_stats_t before = s_stats();
    assert_int_equal(before.cached_bytes, a + b + d); /* A1, B, D, oldest first */
    zf_host_memory_set_cache_limit(b + d);
    zf_host_memory_stats_t st = s_stats();
    assert_int_equal(st.cached_blocks, 2);
    assert_int_equal(st.cached_bytes, b + d);
    assert_int_equal(st.mapped_bytes, a + c + b + d); /* A2 and C in use */
    assert_int_equal(st.evictions, before.evictions + 1);
    zf_host_memory_set_cache_limit(d);
    st = s_stats();
    assert_int_equal(st.cached_bytes, d);
    assert_int_equal(st.evictions, before.evictions + 2);
    void *hd2 = NULL;
    assert_ptr_equal(s_alloc(d, &hd2), pd);
    zf_host_memory_free(hd2);
    /* C fits alone under the limit, not beside D: D goes */
    zf_host_memory_free(hc);
    st = s_stats();
    assert_int_equal(st.cached_blocks, 1);
    assert_int_equal(st.cached_bytes, c);
    assert_int_equal(st.mapped_bytes, a + c);
    assert_int_equal(st.evictions, before.evictions + 3);
    /* A2 does not fit beside C: C goes */
    zf_host_memory_free(h);
    st = s_stats();
    assert_int_equal(st.cached_bytes, a);
    assert_int_equal(st.mapped_bytes, a);
    assert_int_equal(st.evictions, before.evictions + 4);
    (void)pa1, (void)pb;
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
    assert_int_equal(zf_host_memory_trim(), st.cached_bytes);
    st = s_stats();
    assert_int_equal(st.cached_blocks, 0);
    assert_int_equal(st.mapped_bytes, 0);
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
        cmocka_unit_test_setup(test_the_blocks_freed_longest_ago_make_room, s_setup),
        cmocka_unit_test_setup(test_a_block_evicts_as_many_old_blocks_as_it_needs, s_setup),
        cmocka_unit_test_setup(test_a_block_larger_than_the_limit_evicts_nothing, s_setup),
        cmocka_unit_test_setup(test_a_class_is_lifo_and_a_lower_limit_evicts_the_oldest, s_setup),
        cmocka_unit_test_setup(test_threads_share_the_cache, s_setup),
        cmocka_unit_test_setup(test_a_new_tensor_is_zero_in_a_reused_block, s_setup),
        cmocka_unit_test_setup(test_an_uninitialised_string_tensor_holds_empty_strings, s_setup),
        cmocka_unit_test_setup(test_an_uninitialised_buffer_keeps_the_allocation_limit, s_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
