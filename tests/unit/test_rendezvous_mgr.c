/* Tests for the per-process step table (executor/rendezvous.h): claimed and
 * unclaimed steps, the ttl and the cap on unclaimed ones, and the counters. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/log.h"
#include "executor/rendezvous.h"
#include "test_util.h"

#define KEY                                                                                        \
    "/job:l/replica:0/task:0/device:CPU:0;0000000000000001;/job:l/replica:0/"                      \
    "task:0/"                                                                                      \
    "device:CPU:1;a:0;0:0"

#define TTL_MS      30
#define PAST_TTL_US 80000 /* well past TTL_MS, so expiry does not depend on timing */

/* Records what one recv callback saw. */
typedef struct {
    int fired;
    zf_status_t status;
    zf_tensor_t *tensor;
} s_got_t;

static void s_record(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    (void)is_dead;
    s_got_t *g = arg;
    g->fired++;
    g->status = status;
    g->tensor = tensor;
}

static void s_got_clear(s_got_t *g)
{
    zf_status_clear(&g->status);
    zf_tensor_unref(&g->tensor);
    memset(g, 0, sizeof *g);
}

static zf_tensor_t *s_scalar(float v)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(v, &t));
    return t;
}

static void s_expect_stats(zf_rendezvous_mgr_t *mgr, size_t steps, size_t unclaimed,
                           uint64_t expired, uint64_t evicted)
{
    zf_rendezvous_mgr_stats_t st = zf_rendezvous_mgr_stats(mgr);
    assert_int_equal(st.steps, steps);
    assert_int_equal(st.unclaimed, unclaimed);
    assert_int_equal(st.expired, expired);
    assert_int_equal(st.evicted, evicted);
}

/* find() for a step the caller does not keep a reference to. */
static void s_touch(zf_rendezvous_mgr_t *mgr, int64_t step_id)
{
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, step_id, &r));
    assert_int_equal(zf_rendezvous_step_id(r), step_id);
    zf_rendezvous_unref(&r);
}

static void s_claim(zf_rendezvous_mgr_t *mgr, int64_t step_id)
{
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, step_id, &r));
    zf_rendezvous_unref(&r);
}

/* Asserts that r is still live, or was aborted with a message containing
 * text. */
static void s_expect_abort(zf_rendezvous_t *r, const char *text)
{
    zf_status_t s = zf_rendezvous_status(r);
    if (!text) {
        assert_int_equal(s.code, ZF_OK);
        return;
    }
    zf_test_expect_error(s, ZF_ABORTED, text);
}

static void test_rendezvous_mgr_starts_empty_with_zero_counters(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    s_expect_stats(mgr, 0, 0, 0, 0);
    zf_rendezvous_mgr_destroy(&mgr);
    assert_null(mgr);
    zf_rendezvous_mgr_destroy(&mgr); /* NULL-safe */
    zf_rendezvous_mgr_destroy(NULL);
}

static void test_rendezvous_mgr_keeps_claimed_steps_past_the_ttl_and_the_cap(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 2, TTL_MS);
    zf_rendezvous_t *claimed[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) ASSERT_OK(zf_rendezvous_mgr_claim(mgr, i + 1, &claimed[i]));
    for (int id = 10; id < 13; id++) s_touch(mgr, id); /* the third evicts step 10 */
    s_expect_stats(mgr, 5, 2, 0, 1);
    usleep(PAST_TTL_US);
    s_touch(mgr, 20); /* expires 11 and 12 */
    s_expect_stats(mgr, 4, 1, 2, 1);
    for (int i = 0; i < 3; i++) {
        s_expect_abort(claimed[i], NULL);
        zf_rendezvous_t *again = NULL;
        ASSERT_OK(zf_rendezvous_mgr_find(mgr, i + 1, &again));
        assert_ptr_equal(again, claimed[i]);
        zf_rendezvous_unref(&again);
        zf_rendezvous_unref(&claimed[i]);
    }
    s_expect_stats(mgr, 4, 1, 2, 1);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void test_rendezvous_mgr_removes_an_expired_unclaimed_step_on_the_next_call(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 0, TTL_MS);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 42, &r));
    zf_tensor_t *t = s_scalar(4.0f);
    ASSERT_OK(zf_rendezvous_send(r, KEY, t, false));
    s_got_t g = {0};
    ASSERT_OK(zf_rendezvous_recv_async(r, "other-key", s_record, &g, NULL));
    assert_int_equal(zf_tensor_refcount(t), 2);
    usleep(PAST_TTL_US);
    s_expect_stats(mgr, 1, 1, 0, 0); /* removal is lazy: nothing happened yet */
    assert_int_equal(g.fired, 0);
    s_touch(mgr, 43);
    s_expect_stats(mgr, 1, 1, 1, 0);
    assert_int_equal(zf_tensor_refcount(t), 1); /* the queued tensor was freed */
    assert_int_equal(g.fired, 1);               /* the pending recv saw why */
    zf_test_expect_error(g.status, ZF_ABORTED,
                         "step 42 never started on this executor: its tensors were dropped "
                         "after 30 ms");
    g.status = ZF_STATUS_OK;
    s_got_clear(&g);
    zf_tensor_t *got = NULL;
    zf_status_t s = zf_rendezvous_recv(r, KEY, 0, &got, NULL);
    zf_test_expect_error(s, ZF_ABORTED, "step 42 never started on this executor");
    assert_null(got);
    zf_test_expect_error(zf_rendezvous_send(r, KEY, t, false), ZF_ABORTED, "after 30 ms");
    /* the id does not come back: its tensors are gone, so neither a late
     * tensor nor a late RunGraph gets a fresh, empty step */
    zf_rendezvous_t *fresh = NULL;
    zf_test_expect_error(zf_rendezvous_mgr_find(mgr, 42, &fresh), ZF_ABORTED,
                         "step 42 never started on this executor in time");
    assert_null(fresh);
    zf_test_expect_error(zf_rendezvous_mgr_claim(mgr, 42, &fresh), ZF_ABORTED,
                         "the tensors that came for it were dropped");
    assert_null(fresh);
    zf_rendezvous_unref(&r);
    zf_tensor_unref(&t);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void test_rendezvous_mgr_cap_evicts_the_oldest_unclaimed_step_first(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 3, 0);
    zf_rendezvous_t *r[6] = {NULL};
    for (int id = 1; id <= 3; id++) ASSERT_OK(zf_rendezvous_mgr_find(mgr, id, &r[id]));
    s_claim(mgr, 100); /* claimed: does not count against the cap */
    s_touch(mgr, 1);   /* finding again does not make step 1 any younger */
    for (int id = 4; id <= 5; id++) ASSERT_OK(zf_rendezvous_mgr_find(mgr, id, &r[id]));
    s_expect_stats(mgr, 4, 3, 0, 2);
    s_expect_abort(r[1], "step 1 never started on this executor: its tensors were dropped "
                         "because more than 3 steps waited to start");
    s_expect_abort(r[2], "step 2 never started on this executor");
    for (int id = 3; id <= 5; id++) {
        s_expect_abort(r[id], NULL);
        zf_rendezvous_t *again = NULL;
        ASSERT_OK(zf_rendezvous_mgr_find(mgr, id, &again));
        assert_ptr_equal(again, r[id]);
        zf_rendezvous_unref(&again);
    }
    s_expect_stats(mgr, 4, 3, 0, 2);
    for (int id = 1; id <= 5; id++) zf_rendezvous_unref(&r[id]);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void test_rendezvous_mgr_claim_of_a_waiting_step_keeps_its_tensor_and_its_life(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 1, TTL_MS);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 7, &r));
    zf_tensor_t *t = s_scalar(2.5f);
    ASSERT_OK(zf_rendezvous_send(r, KEY, t, false));
    zf_rendezvous_unref(&r);
    s_expect_stats(mgr, 1, 1, 0, 0);
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 7, &r));
    s_expect_stats(mgr, 1, 0, 0, 0);
    s_touch(mgr, 8); /* the cap of 1 does not evict a claimed step */
    usleep(PAST_TTL_US);
    s_touch(mgr, 9); /* expires 8, not 7 */
    s_expect_stats(mgr, 2, 1, 1, 0);
    zf_tensor_t *got = NULL;
    ASSERT_OK(zf_rendezvous_recv(r, KEY, 0, &got, NULL));
    assert_ptr_equal(got, t);
    assert_true(*(const float *)zf_tensor_data(got) == 2.5f);
    zf_tensor_unref(&got);
    zf_rendezvous_t *again = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 7, &again)); /* claiming twice is harmless */
    assert_ptr_equal(again, r);
    zf_rendezvous_unref(&again);
    s_expect_stats(mgr, 2, 1, 1, 0);
    zf_rendezvous_unref(&r);
    zf_tensor_unref(&t);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void test_rendezvous_mgr_stats_count_steps_and_removals_exactly(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 2, TTL_MS);
    s_touch(mgr, 1);
    s_touch(mgr, 2);
    s_claim(mgr, 3);
    s_expect_stats(mgr, 3, 2, 0, 0);
    s_touch(mgr, 4); /* evicts 1 */
    s_expect_stats(mgr, 3, 2, 0, 1);
    s_touch(mgr, 2); /* already there */
    s_expect_stats(mgr, 3, 2, 0, 1);
    s_claim(mgr, 2);
    s_expect_stats(mgr, 3, 1, 0, 1);
    usleep(PAST_TTL_US);
    s_touch(mgr, 3); /* expires 4 */
    s_expect_stats(mgr, 2, 0, 1, 1);
    zf_status_t ok = ZF_STATUS_OK;
    zf_rendezvous_mgr_cleanup(mgr, 3, &ok);
    s_expect_stats(mgr, 1, 0, 1, 1);
    zf_rendezvous_mgr_cleanup(mgr, 2, NULL);
    zf_rendezvous_mgr_cleanup(mgr, 2, NULL); /* unknown now: nothing happens */
    s_expect_stats(mgr, 0, 0, 1, 1);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void test_rendezvous_mgr_cleanup_of_a_claimed_step_removes_it(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 5, &r));
    s_got_t g = {0};
    ASSERT_OK(zf_rendezvous_recv_async(r, KEY, s_record, &g, NULL));
    zf_status_t why = zf_status_new(ZF_ABORTED, "step 5 cancelled by the scheduler");
    zf_rendezvous_mgr_cleanup(mgr, 5, &why);
    zf_status_clear(&why);
    s_expect_stats(mgr, 0, 0, 0, 0);
    assert_int_equal(g.fired, 1);
    zf_test_expect_error(g.status, ZF_ABORTED, "step 5 cancelled by the scheduler");
    g.status = ZF_STATUS_OK;
    s_got_clear(&g);
    zf_rendezvous_t *fresh = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 5, &fresh));
    assert_ptr_not_equal(fresh, r);
    s_expect_abort(fresh, NULL);
    s_expect_stats(mgr, 1, 0, 0, 0);
    zf_rendezvous_unref(&fresh);
    zf_rendezvous_unref(&r);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void
test_rendezvous_mgr_cleanup_of_an_unclaimed_step_frees_its_place_under_the_cap(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 2, 0);
    s_touch(mgr, 1);
    s_touch(mgr, 2);
    zf_rendezvous_mgr_cleanup(mgr, 1, NULL);
    s_expect_stats(mgr, 1, 1, 0, 0);
    s_touch(mgr, 3); /* fits: nothing evicted */
    s_expect_stats(mgr, 2, 2, 0, 0);
    s_touch(mgr, 4); /* evicts 2, the oldest left */
    s_expect_stats(mgr, 2, 2, 0, 1);
    zf_rendezvous_mgr_cleanup(mgr, 4, NULL);
    zf_rendezvous_mgr_cleanup(mgr, 3, NULL);
    s_expect_stats(mgr, 0, 0, 0, 1);
    s_touch(mgr, 5); /* the emptied FIFO still works */
    s_expect_stats(mgr, 1, 1, 0, 1);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void test_rendezvous_mgr_bounds_ten_thousand_stray_steps_to_the_cap(void **state)
{
    (void)state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR); /* one warning per dropped step is expected here */
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 16, 0);
    s_claim(mgr, -1);
    zf_tensor_t *t = s_scalar(1.0f);
    for (int64_t id = 0; id < 10000; id++) {
        zf_rendezvous_t *r = NULL;
        ASSERT_OK(zf_rendezvous_mgr_find(mgr, id, &r));
        ASSERT_OK(zf_rendezvous_send(r, KEY, t, false));
        zf_rendezvous_unref(&r);
    }
    zf_log_set_level(level);
    s_expect_stats(mgr, 17, 16, 0, 9984);
    assert_int_equal(zf_tensor_refcount(t), 1 + 16); /* only the survivors' tensors */
    for (int64_t id = 9984; id < 10000; id++) {      /* the 16 newest, each with its tensor */
        zf_rendezvous_t *r = NULL;
        ASSERT_OK(zf_rendezvous_mgr_find(mgr, id, &r));
        size_t values = 0;
        zf_rendezvous_pending(r, &values, NULL);
        assert_int_equal(values, 1);
        zf_rendezvous_unref(&r);
    }
    s_expect_stats(mgr, 17, 16, 0, 9984);
    zf_rendezvous_mgr_destroy(&mgr);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_tensor_unref(&t);
}

static void test_rendezvous_mgr_finds_every_step_after_many_cleanups(void **state)
{
    (void)state;
    enum { N = 2000 };
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    static zf_rendezvous_t *r[N];
    /* Ids that collide in few low bits, and the extremes. */
    for (int i = 0; i < N; i++) {
        int64_t id = i == 0 ? INT64_MIN : i == 1 ? INT64_MAX : (int64_t)i << 20;
        ASSERT_OK(zf_rendezvous_mgr_claim(mgr, id, &r[i]));
    }
    for (int i = 1; i < N; i += 2)
        zf_rendezvous_mgr_cleanup(mgr, zf_rendezvous_step_id(r[i]), NULL);
    s_expect_stats(mgr, N / 2, 0, 0, 0);
    for (int i = 0; i < N; i += 2) {
        zf_rendezvous_t *again = NULL;
        ASSERT_OK(zf_rendezvous_mgr_find(mgr, zf_rendezvous_step_id(r[i]), &again));
        assert_ptr_equal(again, r[i]);
        zf_rendezvous_unref(&again);
    }
    s_expect_stats(mgr, N / 2, 0, 0, 0);
    for (int i = 0; i < N; i++) zf_rendezvous_unref(&r[i]);
    zf_rendezvous_mgr_destroy(&mgr);
}

/* ---- concurrency --------------------------------------------------------- */

enum { S_THREADS = 4, S_OPS = 3000 };

static void *s_churn(void *arg)
{
    zf_rendezvous_mgr_t *mgr = arg;
    zf_tensor_t *t = s_scalar(3.0f);
    for (int i = 0; i < S_OPS; i++) {
        int64_t id = (i * 7919) % 97;
        zf_rendezvous_t *r = NULL;
        zf_status_t s =
            i % 3 == 0 ? zf_rendezvous_mgr_claim(mgr, id, &r) : zf_rendezvous_mgr_find(mgr, id, &r);
        if (zf_ok(s)) s = zf_rendezvous_send(r, KEY, t, false);
        zf_status_clear(&s); /* an abort is expected now and then */
        zf_rendezvous_unref(&r);
        if (i % 5 == 0) zf_rendezvous_mgr_cleanup(mgr, id, NULL);
    }
    zf_tensor_unref(&t);
    return NULL;
}

static void test_rendezvous_mgr_survives_threads_finding_claiming_and_cleaning_up(void **state)
{
    (void)state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR);
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 8, 1);
    pthread_t th[S_THREADS];
    for (int i = 0; i < S_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, s_churn, mgr), 0);
    for (int i = 0; i < S_THREADS; i++) pthread_join(th[i], NULL);
    zf_log_set_level(level);
    zf_rendezvous_mgr_stats_t st = zf_rendezvous_mgr_stats(mgr);
    assert_true(st.unclaimed <= 8);
    assert_true(st.unclaimed <= st.steps);
    assert_true(st.steps <= 97);
    zf_rendezvous_mgr_destroy(&mgr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rendezvous_mgr_starts_empty_with_zero_counters),
        cmocka_unit_test(test_rendezvous_mgr_keeps_claimed_steps_past_the_ttl_and_the_cap),
        cmocka_unit_test(test_rendezvous_mgr_removes_an_expired_unclaimed_step_on_the_next_call),
        cmocka_unit_test(test_rendezvous_mgr_cap_evicts_the_oldest_unclaimed_step_first),
        cmocka_unit_test(test_rendezvous_mgr_claim_of_a_waiting_step_keeps_its_tensor_and_its_life),
        cmocka_unit_test(test_rendezvous_mgr_stats_count_steps_and_removals_exactly),
        cmocka_unit_test(test_rendezvous_mgr_cleanup_of_a_claimed_step_removes_it),
        cmocka_unit_test(
            test_rendezvous_mgr_cleanup_of_an_unclaimed_step_frees_its_place_under_the_cap),
        cmocka_unit_test(test_rendezvous_mgr_bounds_ten_thousand_stray_steps_to_the_cap),
        cmocka_unit_test(test_rendezvous_mgr_finds_every_step_after_many_cleanups),
        cmocka_unit_test(test_rendezvous_mgr_survives_threads_finding_claiming_and_cleaning_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
