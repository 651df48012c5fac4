/* Tests for broker/pending: the broker's table of requests in flight, on
 * its own and in a long random run checked against a plain array that is
 * searched linearly and changed the same way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "broker/pending.h"
#include "test_util.h"

static zf_pending_t *s_new(void)
{
    zf_pending_t *t = NULL;
    ASSERT_OK(zf_pending_new(&t));
    assert_non_null(t);
    return t;
}

static void s_add(zf_pending_t *t, uintptr_t client, uint64_t sched, uint64_t id)
{
    ASSERT_OK(zf_pending_reserve(t, zf_pending_size(t) + 1));
    zf_pending_req_t r = {client, sched, id};
    zf_pending_add(t, &r);
}

static int s_find(const zf_pending_t *t, uintptr_t client, uint64_t sched, uint64_t id)
{
    zf_pending_req_t r = {client, sched, id};
    return zf_pending_find(t, &r);
}

static void test_pending_finds_a_request_by_all_three_fields(void **state)
{
    (void)state;
    zf_pending_t *t = s_new();
    assert_int_equal(zf_pending_size(t), 0);
    assert_int_equal(s_find(t, 1, 1, 1), -1); /* empty, nothing reserved */
    s_add(t, 1, 10, 100);
    s_add(t, 2, 10, 100);
    s_add(t, 1, 20, 100);
    s_add(t, 1, 10, 101);
    assert_int_equal(zf_pending_size(t), 4);
    assert_int_equal(s_find(t, 1, 10, 100), 0);
    assert_int_equal(s_find(t, 2, 10, 100), 1);
    assert_int_equal(s_find(t, 1, 20, 100), 2);
    assert_int_equal(s_find(t, 1, 10, 101), 3);
    assert_int_equal(s_find(t, 2, 20, 100), -1);
    assert_int_equal(s_find(t, 1, 10, 102), -1);
    const zf_pending_req_t *r = zf_pending_at(t, 2);
    assert_int_equal(r->client, 1);
    assert_int_equal(r->sched, 20);
    assert_int_equal(r->request_id, 100);
    zf_pending_destroy(&t);
    assert_null(t);
    zf_pending_destroy(&t);
    zf_pending_destroy(NULL);
}

static void test_pending_moves_the_last_request_into_a_removed_place(void **state)
{
    (void)state;
    zf_pending_t *t = s_new();
    for (uint64_t id = 0; id < 5; id++) s_add(t, 7, 1, id);
    zf_pending_remove_at(t, 1);
    assert_int_equal(zf_pending_size(t), 4);
    assert_int_equal(zf_pending_at(t, 1)->request_id, 4);
    assert_int_equal(s_find(t, 7, 1, 4), 1);
    assert_int_equal(s_find(t, 7, 1, 1), -1);
    zf_pending_remove_at(t, 3); /* the last one: nothing moves */
    assert_int_equal(zf_pending_size(t), 3);
    assert_int_equal(s_find(t, 7, 1, 3), -1);
    assert_int_equal(s_find(t, 7, 1, 0), 0);
    assert_int_equal(s_find(t, 7, 1, 2), 2);
    while (zf_pending_size(t) > 0) zf_pending_remove_at(t, 0);
    assert_int_equal(s_find(t, 7, 1, 0), -1);
    zf_pending_destroy(&t);
}

static void test_pending_keeps_each_copy_of_a_repeated_request(void **state)
{
    (void)state;
    zf_pending_t *t = s_new();
    s_add(t, 3, 1, 9);
    s_add(t, 3, 1, 9);
    s_add(t, 3, 1, 9);
    for (int left = 3; left > 0; left--) {
        int k = s_find(t, 3, 1, 9);
        assert_true(k >= 0 && k < left);
        zf_pending_remove_at(t, k);
        assert_int_equal(zf_pending_size(t), left - 1);
    }
    assert_int_equal(s_find(t, 3, 1, 9), -1);
    zf_pending_destroy(&t);
}

static void test_pending_refuses_room_past_its_limit_and_stays_usable(void **state)
{
    (void)state;
    zf_pending_t *t = s_new();
    s_add(t, 1, 1, 1);
    zf_test_expect_error(zf_pending_reserve(t, 1 << 29), ZF_RESOURCE_EXHAUSTED,
                         "the broker holds at most 268435456 requests in flight, not 536870912");
    assert_int_equal(zf_pending_size(t), 1);
    assert_int_equal(s_find(t, 1, 1, 1), 0);
    ASSERT_OK(zf_pending_reserve(t, 1000)); /* growth keeps what is there */
    assert_int_equal(s_find(t, 1, 1, 1), 0);
    ASSERT_OK(zf_pending_reserve(t, 10)); /* less than there is room for: nothing to do */
    zf_pending_destroy(&t);
}

/* ---- a random run against a plain array ------------------------------------------ */

static uint64_t s_rng = 0x9e3779b97f4a7c15u;

static uint64_t s_next(void)
{
    s_rng ^= s_rng << 13; /* xorshift64: the same run every time */
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

/* A key from a small space, so that repeats and shared probe runs are common. */
static zf_pending_req_t s_random_req(void)
{
    zf_pending_req_t r = {(uintptr_t)(1 + s_next() % 40), 1 + s_next() % 3, s_next() % 50};
    return r;
}

static bool s_same(const zf_pending_req_t *a, const zf_pending_req_t *b)
{
    return a->client == b->client && a->sched == b->sched && a->request_id == b->request_id;
}

/* The plain array's answer: whether key is in list[0 .. n). */
static bool s_list_has(const zf_pending_req_t *list, int n, const zf_pending_req_t *key)
{
    for (int k = 0; k < n; k++)
        if (s_same(&list[k], key)) return true;
    return false;
}

/* Every position holds what the array holds there, and is found. */
static void s_check_all(const zf_pending_t *t, const zf_pending_req_t *list, int n)
{
    assert_int_equal(zf_pending_size(t), n);
    for (int k = 0; k < n; k++) {
        assert_true(s_same(zf_pending_at(t, k), &list[k]));
        int found = zf_pending_find(t, &list[k]);
        assert_true(found >= 0 && found < n);
        assert_true(s_same(zf_pending_at(t, found), &list[k]));
    }
}

static void test_pending_agrees_with_a_plain_array_over_100k_random_operations(void **state)
{
    (void)state;
    enum { OPS = 100000, MAX = 4000 };
    zf_pending_req_t *list = calloc(MAX, sizeof *list);
    assert_non_null(list);
    int n = 0, found_some = 0, missed_some = 0, max_n = 0;
    zf_pending_t *t = s_new();
    for (int op = 0; op < OPS; op++) {
        /* Adds win in the first half and lose in the second, so the table
         * grows through several sizes and then empties again. */
        int add_pct = op < OPS / 2 ? 60 : 30;
        int dice = (int)(s_next() % 100);
        if (dice < add_pct && n < MAX) {
            zf_pending_req_t r = s_random_req();
            ASSERT_OK(zf_pending_reserve(t, n + 1));
            zf_pending_add(t, &r);
            list[n++] = r;
        } else if (dice < add_pct + 25) { /* find a random key and remove it when there */
            zf_pending_req_t key = s_random_req();
            int k = zf_pending_find(t, &key);
            assert_int_equal(k >= 0, s_list_has(list, n, &key));
            if (k < 0) {
                missed_some++;
                continue;
            }
            found_some++;
            assert_true(k < n && s_same(zf_pending_at(t, k), &key));
            assert_true(s_same(&list[k], &key)); /* the same place in both */
            zf_pending_remove_at(t, k);
            list[k] = list[--n];
        } else if (n > 0) { /* remove at a random place */
            int k = (int)(s_next() % (uint64_t)n);
            zf_pending_remove_at(t, k);
            list[k] = list[--n];
        }
        if (n > max_n) max_n = n;
        if (op % 997 == 0) s_check_all(t, list, n);
    }
    s_check_all(t, list, n);
    while (n > 0) {
        zf_pending_req_t key = list[n - 1];
        int k = zf_pending_find(t, &key);
        assert_true(k >= 0);
        zf_pending_remove_at(t, k);
        list[k] = list[--n];
        if (n <= 50) s_check_all(t, list, n); /* a full check near the end only */
        assert_int_equal(zf_pending_size(t), n);
    }
    assert_int_equal(zf_pending_size(t), 0);
    for (int k = 0; k < 100; k++) {
        zf_pending_req_t key = s_random_req();
        assert_int_equal(zf_pending_find(t, &key), -1);
    }
    assert_true(max_n > 1000); /* the run did grow the table */
    assert_true(found_some > 1000 && missed_some > 1000);
    zf_pending_destroy(&t);
    free(list);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pending_finds_a_request_by_all_three_fields),
        cmocka_unit_test(test_pending_moves_the_last_request_into_a_removed_place),
        cmocka_unit_test(test_pending_keeps_each_copy_of_a_repeated_request),
        cmocka_unit_test(test_pending_refuses_room_past_its_limit_and_stays_usable),
        cmocka_unit_test(test_pending_agrees_with_a_plain_array_over_100k_random_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
