/* Tests for the thread pool (common/thread_pool.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/thread_pool.h"

static void s_count(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void test_thread_pool_runs_every_submitted_task_before_destroy_returns(void **state)
{
    (void)state;
    zf_thread_pool_t *pool = NULL;
    assert_int_equal(zf_thread_pool_new(3, &pool).code, ZF_OK);
    assert_int_equal(zf_thread_pool_size(pool), 3);
    atomic_int n;
    atomic_init(&n, 0);
    /* More tasks than the initial queue holds, so the queue must grow. */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(zf_thread_pool_submit(pool, s_count, &n).code, ZF_OK);
    zf_thread_pool_destroy(&pool);
    assert_null(pool);
    assert_int_equal(atomic_load(&n), 1000);
    zf_thread_pool_destroy(&pool); /* NULL-safe */
    zf_thread_pool_destroy(NULL);
}

static void test_thread_pool_size_zero_means_one_thread_per_core(void **state)
{
    (void)state;
    zf_thread_pool_t *pool = NULL;
    assert_int_equal(zf_thread_pool_new(0, &pool).code, ZF_OK);
    assert_int_equal(zf_thread_pool_size(pool), (int)sysconf(_SC_NPROCESSORS_ONLN));
    zf_thread_pool_destroy(&pool);
    assert_int_equal(zf_thread_pool_size(NULL), 0);
}

static void test_thread_pool_rejects_a_negative_size(void **state)
{
    (void)state;
    zf_thread_pool_t *pool = (zf_thread_pool_t *)(uintptr_t)1;
    zf_status_t s = zf_thread_pool_new(-1, &pool);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "thread pool size -1 is outside 0..1024"));
    assert_null(pool);
    zf_status_clear(&s);
}

typedef struct {
    atomic_int *hits;
    atomic_int calls;
    int64_t min_seen;
} s_cover_t;

static void s_cover(void *arg, int64_t begin, int64_t end)
{
    s_cover_t *c = arg;
    atomic_fetch_add(&c->calls, 1);
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void s_check_cover(zf_thread_pool_t *pool, int64_t n, int64_t min_chunk)
{
    s_cover_t c;
    c.hits = calloc((size_t)n + 1, sizeof *c.hits);
    atomic_init(&c.calls, 0);
    zf_thread_pool_parallel_for(pool, n, min_chunk, s_cover, &c);
    for (int64_t i = 0; i < n; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
    if (n > 0) assert_true(atomic_load(&c.calls) >= 1);
    if (n > 0 && min_chunk > 0)
        assert_true(atomic_load(&c.calls) <= (n + min_chunk - 1) / min_chunk);
    free(c.hits);
}

static void test_thread_pool_parallel_for_covers_every_index_exactly_once(void **state)
{
    (void)state;
    zf_thread_pool_t *pool = NULL;
    assert_int_equal(zf_thread_pool_new(4, &pool).code, ZF_OK);
    s_check_cover(pool, 0, 1);
    s_check_cover(pool, 1, 1);
    s_check_cover(pool, 7, 3);
    s_check_cover(pool, 1000, 1);
    s_check_cover(pool, 100003, 1000);
    s_check_cover(pool, 10, 0); /* min_chunk below 1 counts as 1 */
    s_check_cover(NULL, 50, 1); /* no pool: inline */
    zf_thread_pool_destroy(&pool);
}

static void test_thread_pool_parallel_for_respects_min_chunk(void **state)
{
    (void)state;
    zf_thread_pool_t *pool = NULL;
    assert_int_equal(zf_thread_pool_new(4, &pool).code, ZF_OK);
    s_cover_t c;
    c.hits = calloc(100, sizeof *c.hits);
    atomic_init(&c.calls, 0);
    zf_thread_pool_parallel_for(pool, 100, 100, s_cover, &c);
    assert_int_equal(atomic_load(&c.calls), 1); /* one chunk of 100 */
    free(c.hits);
    zf_thread_pool_destroy(&pool);
}

typedef struct {
    zf_thread_pool_t *pool;
    atomic_int inner;
    atomic_int outer_done;
} s_nested_t;

static void s_inner(void *arg, int64_t begin, int64_t end)
{
    s_nested_t *n = arg;
    atomic_fetch_add(&n->inner, (int)(end - begin));
}

static void s_outer_task(void *arg)
{
    s_nested_t *n = arg;
    zf_thread_pool_parallel_for(n->pool, 64, 1, s_inner, n);
    atomic_fetch_add(&n->outer_done, 1);
}

static void test_thread_pool_nested_parallel_for_on_a_busy_pool_does_not_deadlock(void **state)
{
    (void)state;
    s_nested_t n;
    atomic_init(&n.inner, 0);
    atomic_init(&n.outer_done, 0);
    assert_int_equal(zf_thread_pool_new(1, &n.pool).code, ZF_OK);
    /* The only worker runs a task that itself parallelises on the same
     * pool: its helpers can never run, so the caller must do every chunk. */
    assert_int_equal(zf_thread_pool_submit(n.pool, s_outer_task, &n).code, ZF_OK);
    assert_int_equal(zf_thread_pool_submit(n.pool, s_outer_task, &n).code, ZF_OK);
    zf_thread_pool_destroy(&n.pool);
    assert_int_equal(atomic_load(&n.outer_done), 2);
    assert_int_equal(atomic_load(&n.inner), 128);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_pool_runs_every_submitted_task_before_destroy_returns),
        cmocka_unit_test(test_thread_pool_size_zero_means_one_thread_per_core),
        cmocka_unit_test(test_thread_pool_rejects_a_negative_size),
        cmocka_unit_test(test_thread_pool_parallel_for_covers_every_index_exactly_once),
        cmocka_unit_test(test_thread_pool_parallel_for_respects_min_chunk),
        cmocka_unit_test(test_thread_pool_nested_parallel_for_on_a_busy_pool_does_not_deadlock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
