/* Tests for the per-process step table (executor/rendezvous/rendezvous.h): claimed and
 * unclaimed steps, the ttl and the caps (steps and bytes) on unclaimed
 * ones, and the counters. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/log.h"
#include "common/tensor_frame.h"
#include "executor/rendezvous/rendezvous.h"
#include "rendezvous_test_util.h"
#include "test_util.h"

#define KEY                                                                                        \
    "/job:l/replica:0/task:0/device:CPU:0;0000000000000001;/job:l/replica:0/"                      \
    "task:0/"                                                                                      \
    "device:CPU:1;a:0;0:0"

#define TTL_MS      30
#define PAST_TTL_US 80000 /* well past TTL_MS, so expiry does not depend on timing */

/* Every step ever added is in the table or left it one way. */
static void s_expect_balanced(const zf_rendezvous_mgr_stats_t *st)
{
    assert_int_equal(st->added, st->steps + st->cleaned + st->expired + st->evicted);
    assert_true(st->unclaimed <= st->steps);
}

static void s_expect_stats(zf_rendezvous_mgr_t *mgr, size_t steps, size_t unclaimed,
                           uint64_t expired, uint64_t evicted)
{
    zf_rendezvous_mgr_stats_t st = zf_rendezvous_mgr_stats(mgr);
    assert_int_equal(st.steps, steps);
    assert_int_equal(st.unclaimed, unclaimed);
    assert_int_equal(st.expired, expired);
    assert_int_equal(st.evicted, evicted);
    s_expect_balanced(&st);
}

static void s_expect_bytes(zf_rendezvous_mgr_t *mgr, size_t unclaimed_bytes)
{
    assert_int_equal(zf_rendezvous_mgr_stats(mgr).unclaimed_bytes, unclaimed_bytes);
}

/* n floats (4n bytes), each equal to v. */
static zf_tensor_t *s_floats(int64_t n, float v)
{
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE(n);
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &t));
    for (int64_t i = 0; i < n; i++) ((float *)zf_tensor_data(t))[i] = v;
    return t;
}

/* The values queued in step_id's rendezvous (found, so it must exist). */
static size_t s_queued(zf_rendezvous_mgr_t *mgr, int64_t step_id)
{
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, step_id, &r));
    size_t values = 0;
    zf_rendezvous_pending(r, &values, NULL);
    zf_rendezvous_unref(&r);
    return values;
}

/* find() for a step the caller does not keep a reference to. */
static void s_touch(zf_rendezvous_mgr_t *mgr, int64_t step_id)
{
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, step_id, &r));
    assert_int_equal(zf_rendezvous_step_id(r), step_id);
    zf_rendezvous_unref(&r);
}

/* Lets the unclaimed steps of mgr, whose cap is max_unclaimed, outlive a
 * ttl of TTL_MS: the next find, claim or deliver expires them. Tests run
 * with the default (long) ttl until they call this, so a slow run cannot
 * expire a step before the test means it to. */
static void s_outlive_a_short_ttl(zf_rendezvous_mgr_t *mgr, int max_unclaimed)
{
    zf_rendezvous_mgr_set_limits(mgr, max_unclaimed, TTL_MS);
    usleep(PAST_TTL_US);
}

/* Gives mgr the default (long) ttl back once the expiry a test waited for
 * has happened, so the steps made after it cannot expire before they are
 * checked. */
static void s_restore_the_long_ttl(zf_rendezvous_mgr_t *mgr, int max_unclaimed)
{
    zf_rendezvous_mgr_set_limits(mgr, max_unclaimed, 0);
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
    zf_rendezvous_mgr_set_limits(mgr, 2, 0);
    zf_rendezvous_t *claimed[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) ASSERT_OK(zf_rendezvous_mgr_claim(mgr, i + 1, &claimed[i]));
    for (int id = 10; id < 13; id++) s_touch(mgr, id); /* the third evicts step 10 */
    s_expect_stats(mgr, 5, 2, 0, 1);
    s_outlive_a_short_ttl(mgr, 2);
    s_touch(mgr, 20); /* expires 11 and 12 */
    s_restore_the_long_ttl(mgr, 2);
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
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 42, &r));
    zf_tensor_t *t = zf_test_scalar(4.0f);
    ASSERT_OK(zf_rendezvous_send(r, KEY, t, false));
    zf_test_got_t g = {0};
    ASSERT_OK(zf_rendezvous_recv_async(r, "other-key", zf_test_record_recv, &g, NULL));
    assert_int_equal(zf_tensor_refcount(t), 2);
    s_outlive_a_short_ttl(mgr, 0);
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
    zf_test_got_clear(&g);
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
    zf_rendezvous_mgr_set_limits(mgr, 1, 0);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 7, &r));
    zf_tensor_t *t = zf_test_scalar(2.5f);
    ASSERT_OK(zf_rendezvous_send(r, KEY, t, false));
    zf_rendezvous_unref(&r);
    s_expect_stats(mgr, 1, 1, 0, 0);
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 7, &r));
    s_expect_stats(mgr, 1, 0, 0, 0);
    s_touch(mgr, 8); /* the cap of 1 does not evict a claimed step */
    s_outlive_a_short_ttl(mgr, 1);
    s_touch(mgr, 9); /* expires 8, not 7 */
    s_restore_the_long_ttl(mgr, 1);
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

/* Counts how often the remote-send hook ran. */
static zf_status_t s_counting_hook(void *arg, int64_t step_id, const char *key,
                                   const char *dst_device, zf_tensor_t *tensor, bool is_dead,
                                   bool *sent)
{
    (void)step_id, (void)key, (void)dst_device, (void)tensor, (void)is_dead;
    (*(int *)arg)++;
    *sent = true;
    return ZF_STATUS_OK;
}

/* Only a claimed step is found by find_claimed, which makes nothing; a
 * value put into it stays there even when its key names a device the
 * remote-send hook would take. */
static void test_rendezvous_mgr_find_claimed_sees_claimed_steps_only(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    int hooked = 0;
    ASSERT_OK(zf_rendezvous_mgr_set_remote(mgr, "/job:a/device:CPU:9", s_counting_hook, &hooked));
    zf_rendezvous_t *r = NULL;
    assert_false(zf_rendezvous_mgr_find_claimed(mgr, 3, &r)); /* missing: not made */
    assert_null(r);
    s_expect_stats(mgr, 0, 0, 0, 0);
    zf_rendezvous_t *found = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 3, &found));
    assert_false(zf_rendezvous_mgr_find_claimed(mgr, 3, &r)); /* unclaimed */
    assert_null(r);
    zf_rendezvous_t *claimed = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 3, &claimed));
    assert_true(zf_rendezvous_mgr_find_claimed(mgr, 3, &r));
    assert_ptr_equal(r, claimed);
    /* KEY names CPU:1 as its destination; the hook's device is CPU:9 */
    zf_tensor_t *t = zf_test_scalar(4.0f);
    ASSERT_OK(zf_rendezvous_put(r, KEY, t, false));
    assert_int_equal(hooked, 0);
    zf_tensor_t *got = NULL;
    ASSERT_OK(zf_rendezvous_recv(claimed, KEY, 0, &got, NULL));
    assert_ptr_equal(got, t);
    zf_tensor_unref(&got);
    /* a send of the same key goes through the hook */
    ASSERT_OK(zf_rendezvous_send(r, KEY, t, false));
    assert_int_equal(hooked, 1);
    zf_test_expect_error(zf_rendezvous_put(r, KEY, NULL, false), ZF_INVALID_ARGUMENT,
                         "without a tensor");
    zf_rendezvous_unref(&r);
    zf_rendezvous_unref(&claimed);
    zf_rendezvous_unref(&found);
    zf_rendezvous_mgr_cleanup(mgr, 3, NULL);
    assert_false(zf_rendezvous_mgr_find_claimed(mgr, 3, &r)); /* ended */
    zf_tensor_unref(&t);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void test_rendezvous_mgr_stats_count_steps_and_removals_exactly(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_limits(mgr, 2, 0);
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
    s_outlive_a_short_ttl(mgr, 2);
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
    zf_test_got_t g = {0};
    ASSERT_OK(zf_rendezvous_recv_async(r, KEY, zf_test_record_recv, &g, NULL));
    zf_status_t why = zf_status_new(ZF_ABORTED, "step 5 cancelled by the scheduler");
    zf_rendezvous_mgr_cleanup(mgr, 5, &why);
    zf_status_clear(&why);
    s_expect_stats(mgr, 0, 0, 0, 0);
    assert_int_equal(g.fired, 1);
    zf_test_expect_error(g.status, ZF_ABORTED, "step 5 cancelled by the scheduler");
    g.status = ZF_STATUS_OK;
    zf_test_got_clear(&g);
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
    zf_tensor_t *t = zf_test_scalar(1.0f);
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

/* ---- the byte cap ----------------------------------------------------------- */

static void test_rendezvous_mgr_counts_the_bytes_of_unclaimed_steps_exactly(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_tensor_t *t100 = s_floats(25, 1), *t40 = s_floats(10, 2);
    s_expect_bytes(mgr, 0);
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 1, KEY, t100, false)); /* creates step 1 */
    s_expect_bytes(mgr, 100);
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 1, KEY, t40, false));
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 2, KEY, t100, false));
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 2, "dead", NULL, true)); /* no tensor: 0 bytes */
    s_expect_bytes(mgr, 240);
    s_expect_stats(mgr, 2, 2, 0, 0);
    assert_int_equal(s_queued(mgr, 1), 2);
    assert_int_equal(zf_tensor_refcount(t100), 3);
    /* A STRING tensor counts its elements' bytes as well. */
    zf_tensor_t *str = NULL;
    zf_shape_t two = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_new(ZF_STRING, &two, &str));
    char text[70];
    memset(text, 'x', sizeof text);
    ASSERT_OK(zf_tensor_set_string(str, 0, text, 50));
    ASSERT_OK(zf_tensor_set_string(str, 1, text, 70));
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 2, KEY, str, false));
    size_t str_bytes = 2 * sizeof(zf_tstring_t) + 120;
    s_expect_bytes(mgr, 240 + str_bytes);
    /* A claim takes the step's bytes out; what it gets later never counts. */
    s_claim(mgr, 1);
    s_expect_bytes(mgr, 100 + str_bytes);
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 1, KEY, t100, false));
    s_expect_bytes(mgr, 100 + str_bytes);
    assert_int_equal(s_queued(mgr, 1), 3);
    /* A send that fails counts nothing. */
    zf_rendezvous_t *r3 = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 3, &r3));
    zf_status_t why = zf_status_new(ZF_ABORTED, "step 3 aborted by the test");
    zf_rendezvous_start_abort(r3, &why);
    zf_status_clear(&why);
    zf_test_expect_error(zf_rendezvous_mgr_deliver(mgr, 3, KEY, t100, false), ZF_ABORTED,
                         "step 3 aborted by the test");
    zf_rendezvous_unref(&r3);
    s_expect_bytes(mgr, 100 + str_bytes);
    /* Cleanup of an unclaimed step takes its bytes out, and frees them. */
    zf_rendezvous_mgr_cleanup(mgr, 2, NULL);
    s_expect_bytes(mgr, 0);
    assert_int_equal(zf_tensor_refcount(str), 1);
    /* So does expiry. */
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 4, KEY, t40, false));
    s_expect_bytes(mgr, 40);
    s_outlive_a_short_ttl(mgr, 0);
    s_touch(mgr, 5); /* expires 3 and 4 */
    s_expect_bytes(mgr, 0);
    s_expect_stats(mgr, 2, 1, 2, 0);
    assert_int_equal(zf_tensor_refcount(t40), 2); /* the one left is claimed step 1's */
    zf_rendezvous_mgr_cleanup(mgr, 1, NULL);
    zf_rendezvous_mgr_cleanup(mgr, 5, NULL);
    zf_rendezvous_mgr_stats_t st = zf_rendezvous_mgr_stats(mgr);
    assert_int_equal(st.added, 5);
    assert_int_equal(st.cleaned, 3);
    assert_int_equal(st.refused, 0);
    s_expect_stats(mgr, 0, 0, 2, 0);
    s_expect_bytes(mgr, 0);
    assert_int_equal(zf_tensor_refcount(t100), 1);
    assert_int_equal(zf_tensor_refcount(t40), 1);
    zf_tensor_unref(&str);
    zf_tensor_unref(&t100);
    zf_tensor_unref(&t40);
    zf_rendezvous_mgr_destroy(&mgr);
}

/* The batch in out as a receiver gets it: its payload in a frame of its
 * own (returned, one reference for the caller), decoded into *b; out is
 * cleared. */
static zf_buffer_t *s_received_batch(zf_tensor_frame_batch_out_t *out, zf_tensor_frame_batch_t *b)
{
    zf_tensor_frame_batch_prefix(out->n, (uint32_t)out->head_len, out->head);
    zf_buffer_t *frame = NULL;
    ASSERT_OK(zf_buffer_new(out->payload_len, &frame));
    memcpy(zf_buffer_data(frame), out->payload, out->payload_len);
    ASSERT_OK(zf_tensor_frame_decode_batch(out->head, out->head_len, frame, b));
    zf_tensor_frame_batch_out_clear(out);
    return frame;
}

/* A batch entry views the batch's payload frame. Delivered to a step that
 * has not started, it is kept in a buffer of its own, so that the step
 * pins only the bytes counted for it, not the frame; delivered to a
 * claimed step it stays a view (no copy on the common path). */
static void test_rendezvous_mgr_unclaimed_batch_entry_does_not_pin_its_frame(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    s_claim(mgr, 8);
    /* The frame: 64 KiB for claimed step 8, then one float for unclaimed
     * step 7, then three floats for step 7 again. */
    zf_tensor_t *big = s_floats(16384, 0.25f), *one = s_floats(1, -3.5f), *three = NULL;
    float v3[3] = {1.5f, 2.5f, 4.0f};
    zf_shape_t shape3 = ZF_SHAPE(3);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape3, v3, sizeof v3, &three));
    zf_tensor_frame_batch_out_t out = {0};
    bool added = false;
    ASSERT_OK(zf_tensor_frame_batch_out_add(&out, KEY, 8, big, false, 1 << 20, &added));
    assert_true(added);
    ASSERT_OK(zf_tensor_frame_batch_out_add(&out, KEY, 7, one, false, 1 << 20, &added));
    assert_true(added);
    ASSERT_OK(zf_tensor_frame_batch_out_add(&out, "three", 7, three, false, 1 << 20, &added));
    assert_true(added);
    zf_tensor_frame_batch_t b;
    zf_buffer_t *frame = s_received_batch(&out, &b);
    assert_int_equal(b.n, 3);
    for (size_t i = 0; i < b.n; i++) {
        ASSERT_OK(b.entries[i].error);
        assert_ptr_equal(zf_tensor_buffer(b.entries[i].tensor), frame); /* views */
        ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, b.entries[i].step_id, b.entries[i].key,
                                            b.entries[i].tensor, b.entries[i].is_dead));
    }
    zf_tensor_frame_batch_clear(&b);
    /* Step 7 counts its 16 bytes and holds no more: the frame is held by
     * this test and step 8's view alone. */
    s_expect_bytes(mgr, 16);
    assert_int_equal(zf_buffer_refcount(frame), 2);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 8, &r));
    zf_tensor_t *got = NULL;
    bool dead = true;
    ASSERT_OK(zf_rendezvous_recv(r, KEY, 0, &got, &dead));
    assert_false(dead);
    assert_ptr_equal(zf_tensor_buffer(got), frame); /* claimed: still the view */
    assert_true(zf_tensor_equal(got, big));
    zf_tensor_unref(&got);
    zf_rendezvous_unref(&r);
    zf_rendezvous_mgr_cleanup(mgr, 8, NULL);
    assert_int_equal(zf_buffer_refcount(frame), 1);
    /* Step 7's values are intact once it starts. */
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 7, &r));
    s_expect_bytes(mgr, 0);
    ASSERT_OK(zf_rendezvous_recv(r, KEY, 0, &got, &dead));
    assert_true(zf_tensor_equal(got, one));
    assert_true(((const float *)zf_tensor_data(got))[0] == -3.5f);
    assert_ptr_not_equal(zf_tensor_buffer(got), frame);
    zf_tensor_unref(&got);
    ASSERT_OK(zf_rendezvous_recv(r, "three", 0, &got, &dead));
    assert_true(zf_tensor_equal(got, three));
    assert_int_equal(zf_buffer_size(zf_tensor_buffer(got)), sizeof v3);
    zf_tensor_unref(&got);
    zf_rendezvous_unref(&r);
    zf_rendezvous_mgr_cleanup(mgr, 7, NULL);
    assert_int_equal(zf_buffer_refcount(frame), 1);
    zf_buffer_unref(&frame);
    zf_tensor_unref(&big);
    zf_tensor_unref(&one);
    zf_tensor_unref(&three);
    zf_rendezvous_mgr_destroy(&mgr);
}

/* Without memory to copy an entry out of its frame (here: past the
 * allocation limit), the entry is kept as a view, its bytes counted, and
 * its value reaches the step when it starts. */
static void test_rendezvous_mgr_keeps_a_view_when_the_copy_fails(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_tensor_t *pad = s_floats(64, 1.0f), *v = s_floats(4, 2.5f);
    zf_tensor_frame_batch_out_t out = {0};
    bool added = false;
    ASSERT_OK(zf_tensor_frame_batch_out_add(&out, "pad", 9, pad, false, 1 << 20, &added));
    ASSERT_OK(zf_tensor_frame_batch_out_add(&out, KEY, 9, v, false, 1 << 20, &added));
    assert_true(added);
    zf_tensor_frame_batch_t b;
    zf_buffer_t *frame = s_received_batch(&out, &b);
    assert_int_equal(b.n, 2);
    zf_buffer_set_alloc_limit(8); /* no copy of 16 bytes or more */
    zf_status_t st = zf_rendezvous_mgr_deliver(mgr, 9, KEY, b.entries[1].tensor, false);
    zf_buffer_set_alloc_limit(0);
    ASSERT_OK(st);
    zf_tensor_frame_batch_clear(&b);
    s_expect_bytes(mgr, 16);
    assert_int_equal(zf_buffer_refcount(frame), 2); /* the kept view */
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 9, &r));
    zf_tensor_t *got = NULL;
    bool dead = true;
    ASSERT_OK(zf_rendezvous_recv(r, KEY, 0, &got, &dead));
    assert_false(dead);
    assert_true(zf_tensor_equal(got, v));
    assert_ptr_equal(zf_tensor_buffer(got), frame);
    zf_tensor_unref(&got);
    zf_rendezvous_unref(&r);
    zf_rendezvous_mgr_cleanup(mgr, 9, NULL);
    assert_int_equal(zf_buffer_refcount(frame), 1);
    zf_buffer_unref(&frame);
    zf_tensor_unref(&pad);
    zf_tensor_unref(&v);
    zf_rendezvous_mgr_destroy(&mgr);
}

static void test_rendezvous_mgr_byte_cap_evicts_the_oldest_unclaimed_steps_first(void **state)
{
    (void)state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR); /* one warning per dropped step is expected here */
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_max_bytes(mgr, 300);
    zf_tensor_t *t100 = s_floats(25, 1), *t200 = s_floats(50, 2), *t252 = s_floats(63, 3);
    zf_rendezvous_t *r[7] = {NULL};
    for (int id = 1; id <= 3; id++) {
        ASSERT_OK(zf_rendezvous_mgr_find(mgr, id, &r[id]));
        ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, id, KEY, t100, false));
    }
    s_claim(mgr, 100); /* claimed: its tensors do not count */
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 100, KEY, t200, false));
    s_expect_bytes(mgr, 300);
    /* Step 4's tensor makes room by removing step 1, the oldest, only. */
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 4, &r[4]));
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 4, KEY, t100, false));
    s_expect_bytes(mgr, 300);
    s_expect_stats(mgr, 4, 3, 0, 1);
    s_expect_abort(r[1], "step 1 never started on this executor: its tensors were dropped "
                         "because the steps waiting to start held more than 300 bytes");
    for (int id = 2; id <= 4; id++) s_expect_abort(r[id], NULL);
    /* Step 2, now the oldest, cannot take 200 more: it goes itself, with
     * the tensor, and nothing younger is touched. */
    zf_test_expect_error(zf_rendezvous_mgr_deliver(mgr, 2, KEY, t200, false), ZF_ABORTED,
                         "step 2 never started on this executor: its tensors were dropped "
                         "because the steps waiting to start held more than 300 bytes");
    s_expect_abort(r[2], "held more than 300 bytes");
    s_expect_bytes(mgr, 200);
    s_expect_stats(mgr, 3, 2, 0, 2);
    s_expect_abort(r[3], NULL);
    s_expect_abort(r[4], NULL);
    /* A new step's 252 bytes remove 3, then 4, oldest first. */
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 5, KEY, t252, false));
    s_expect_bytes(mgr, 252);
    s_expect_stats(mgr, 2, 1, 0, 4);
    s_expect_abort(r[3], "step 3 never started on this executor");
    s_expect_abort(r[4], "step 4 never started on this executor");
    assert_int_equal(s_queued(mgr, 5), 1);
    assert_int_equal(s_queued(mgr, 100), 1); /* the claimed step kept its tensor */
    /* Removed steps do not come back; their tensors are freed. */
    zf_rendezvous_t *fresh = NULL;
    for (int id = 1; id <= 4; id++)
        zf_test_expect_error(zf_rendezvous_mgr_claim(mgr, id, &fresh), ZF_ABORTED,
                             "never started on this executor in time");
    assert_int_equal(zf_tensor_refcount(t100), 1);
    assert_int_equal(zf_tensor_refcount(t200), 2);
    /* A lower limit applies on the next call: step 5 is over it. */
    zf_rendezvous_mgr_set_max_bytes(mgr, 200);
    s_touch(mgr, 100);
    s_expect_bytes(mgr, 0);
    s_expect_stats(mgr, 1, 0, 0, 5);
    assert_int_equal(zf_tensor_refcount(t252), 1);
    zf_log_set_level(level);
    for (int id = 1; id <= 4; id++) zf_rendezvous_unref(&r[id]);
    zf_rendezvous_mgr_destroy(&mgr);
    assert_int_equal(zf_tensor_refcount(t200), 1);
    zf_tensor_unref(&t100);
    zf_tensor_unref(&t200);
    zf_tensor_unref(&t252);
}

static void test_rendezvous_mgr_refuses_a_tensor_over_the_byte_cap_on_its_own(void **state)
{
    (void)state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR); /* the refusal is logged */
    zf_rendezvous_mgr_t *mgr = NULL;
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    zf_rendezvous_mgr_set_max_bytes(mgr, 100);
    zf_tensor_t *t40 = s_floats(10, 1), *t140 = s_floats(35, 2), *t100 = s_floats(25, 3);
    zf_rendezvous_t *r7 = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, 7, &r7));
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 7, KEY, t40, false));
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 8, KEY, t40, false));
    s_expect_bytes(mgr, 80);
    const char *why = "step 7 has not started on this executor and cannot hold '" KEY
                      "': its 140 bytes are more than the 100 bytes allowed for the tensors of "
                      "steps waiting to start";
    zf_status_t s = zf_rendezvous_mgr_deliver(mgr, 7, KEY, t140, false);
    assert_int_equal(s.code, ZF_RESOURCE_EXHAUSTED);
    assert_string_equal(zf_status_msg(&s), why);
    zf_status_clear(&s);
    /* Nobody else was evicted for it; step 7 lost its tensors and is
     * aborted with the reason, which its RunGraph will meet. */
    zf_rendezvous_mgr_stats_t st = zf_rendezvous_mgr_stats(mgr);
    assert_int_equal(st.refused, 1);
    s_expect_stats(mgr, 2, 2, 0, 0);
    s_expect_bytes(mgr, 40);
    assert_int_equal(zf_tensor_refcount(t140), 1);
    assert_int_equal(zf_tensor_refcount(t40), 2); /* step 8's */
    s = zf_rendezvous_status(r7);
    assert_int_equal(s.code, ZF_RESOURCE_EXHAUSTED);
    assert_string_equal(zf_status_msg(&s), why);
    zf_status_clear(&s);
    /* Later tensors for it fail with the same status and count nothing,
     * even ones that would fit. */
    zf_test_expect_error(zf_rendezvous_mgr_deliver(mgr, 7, KEY, t40, false), ZF_RESOURCE_EXHAUSTED,
                         "its 140 bytes are more than the 100 bytes");
    s_expect_bytes(mgr, 40);
    assert_int_equal(zf_tensor_refcount(t40), 2);
    zf_rendezvous_t *claimed = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(mgr, 7, &claimed));
    assert_ptr_equal(claimed, r7);
    zf_test_expect_error(zf_rendezvous_status(claimed), ZF_RESOURCE_EXHAUSTED, why);
    zf_rendezvous_unref(&claimed);
    /* Exactly the cap fits: step 8's 40 bytes make room by going. */
    ASSERT_OK(zf_rendezvous_mgr_deliver(mgr, 9, KEY, t100, false));
    s_expect_bytes(mgr, 100);
    s_expect_stats(mgr, 2, 1, 0, 1);
    assert_int_equal(zf_rendezvous_mgr_stats(mgr).refused, 1);
    zf_log_set_level(level);
    zf_rendezvous_unref(&r7);
    zf_rendezvous_mgr_destroy(&mgr);
    assert_int_equal(zf_tensor_refcount(t40), 1);
    assert_int_equal(zf_tensor_refcount(t100), 1);
    zf_tensor_unref(&t40);
    zf_tensor_unref(&t140);
    zf_tensor_unref(&t100);
}

/* ---- concurrency --------------------------------------------------------- */

enum { S_THREADS = 4, S_OPS = 3000, S_IDS = 97 };

/* What a churning thread shares with the test: the table and the one
 * tensor every thread sends, which the test holds a reference to. */
typedef struct {
    zf_rendezvous_mgr_t *mgr;
    zf_tensor_t *t;
} s_churn_t;

static void *s_churn(void *arg)
{
    s_churn_t *c = arg;
    for (int i = 0; i < S_OPS; i++) {
        int64_t id = (i * 7919) % S_IDS;
        zf_rendezvous_t *r = NULL;
        zf_status_t s = ZF_STATUS_OK;
        if (i % 3 == 0) {
            s = zf_rendezvous_mgr_claim(c->mgr, id, &r);
            if (zf_ok(s)) s = zf_rendezvous_send(r, KEY, c->t, false);
        } else {
            s = zf_rendezvous_mgr_deliver(c->mgr, id, KEY, c->t, false);
        }
        zf_status_clear(&s); /* an abort is expected now and then */
        zf_rendezvous_unref(&r);
        if (i % 5 == 0) zf_rendezvous_mgr_cleanup(c->mgr, id, NULL);
    }
    return NULL;
}

static void test_rendezvous_mgr_survives_threads_finding_claiming_and_cleaning_up(void **state)
{
    (void)state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR);
    s_churn_t c = {NULL, zf_test_scalar(3.0f)};
    ASSERT_OK(zf_rendezvous_mgr_new(&c.mgr));
    zf_rendezvous_mgr_set_limits(c.mgr, 8, 1);
    zf_rendezvous_mgr_set_max_bytes(c.mgr, 6 * sizeof(float)); /* the byte cap bites too */
    pthread_t th[S_THREADS];
    for (int i = 0; i < S_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, s_churn, &c), 0);
    for (int i = 0; i < S_THREADS; i++) pthread_join(th[i], NULL);
    zf_rendezvous_mgr_stats_t st = zf_rendezvous_mgr_stats(c.mgr);
    s_expect_balanced(&st);
    assert_true(st.unclaimed <= 8);
    assert_true(st.steps <= S_IDS);
    assert_true(st.unclaimed_bytes <= 6 * sizeof(float));
    assert_int_equal(st.unclaimed_bytes % sizeof(float), 0);
    assert_int_equal(st.refused, 0);
    assert_true(st.evicted + st.expired > 0);
    /* Every tensor still referenced is queued in a step of the table:
     * claiming each id accounts for all of them (a removed one is refused,
     * an absent one made empty), and takes every byte out of the count. */
    size_t queued = 0;
    for (int64_t id = 0; id < S_IDS; id++) {
        zf_rendezvous_t *r = NULL;
        zf_status_t s = zf_rendezvous_mgr_claim(c.mgr, id, &r);
        if (s.code == ZF_ABORTED) {
            zf_test_expect_error(s, ZF_ABORTED, "never started on this executor in time");
            continue;
        }
        ASSERT_OK(s);
        size_t values = 0;
        zf_rendezvous_pending(r, &values, NULL);
        queued += values;
        zf_rendezvous_unref(&r);
    }
    assert_int_equal(zf_tensor_refcount(c.t), 1 + (int)queued);
    st = zf_rendezvous_mgr_stats(c.mgr);
    s_expect_balanced(&st);
    assert_int_equal(st.unclaimed, 0);
    assert_int_equal(st.unclaimed_bytes, 0);
    /* Cleaning every id up empties the table and frees every tensor. */
    for (int64_t id = 0; id < S_IDS; id++) zf_rendezvous_mgr_cleanup(c.mgr, id, NULL);
    st = zf_rendezvous_mgr_stats(c.mgr);
    s_expect_balanced(&st);
    assert_int_equal(st.steps, 0);
    assert_int_equal(st.unclaimed_bytes, 0);
    assert_int_equal(zf_tensor_refcount(c.t), 1);
    zf_log_set_level(level);
    zf_rendezvous_mgr_destroy(&c.mgr);
    zf_tensor_unref(&c.t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rendezvous_mgr_starts_empty_with_zero_counters),
        cmocka_unit_test(test_rendezvous_mgr_keeps_claimed_steps_past_the_ttl_and_the_cap),
        cmocka_unit_test(test_rendezvous_mgr_removes_an_expired_unclaimed_step_on_the_next_call),
        cmocka_unit_test(test_rendezvous_mgr_cap_evicts_the_oldest_unclaimed_step_first),
        cmocka_unit_test(test_rendezvous_mgr_claim_of_a_waiting_step_keeps_its_tensor_and_its_life),
        cmocka_unit_test(test_rendezvous_mgr_find_claimed_sees_claimed_steps_only),
        cmocka_unit_test(test_rendezvous_mgr_stats_count_steps_and_removals_exactly),
        cmocka_unit_test(test_rendezvous_mgr_cleanup_of_a_claimed_step_removes_it),
        cmocka_unit_test(
            test_rendezvous_mgr_cleanup_of_an_unclaimed_step_frees_its_place_under_the_cap),
        cmocka_unit_test(test_rendezvous_mgr_bounds_ten_thousand_stray_steps_to_the_cap),
        cmocka_unit_test(test_rendezvous_mgr_finds_every_step_after_many_cleanups),
        cmocka_unit_test(test_rendezvous_mgr_counts_the_bytes_of_unclaimed_steps_exactly),
        cmocka_unit_test(test_rendezvous_mgr_unclaimed_batch_entry_does_not_pin_its_frame),
        cmocka_unit_test(test_rendezvous_mgr_keeps_a_view_when_the_copy_fails),
        cmocka_unit_test(test_rendezvous_mgr_byte_cap_evicts_the_oldest_unclaimed_steps_first),
        cmocka_unit_test(test_rendezvous_mgr_refuses_a_tensor_over_the_byte_cap_on_its_own),
        cmocka_unit_test(test_rendezvous_mgr_survives_threads_finding_claiming_and_cleaning_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
