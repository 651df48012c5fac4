/* Tests for the local rendezvous (executor/rendezvous/rendezvous.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "executor/rendezvous/rendezvous.h"
#include "rendezvous_test_util.h"

#define KEY_A                                                                                      \
    "/job:l/replica:0/task:0/device:CPU:0;0000000000000001;/job:l/replica:0/task:0/"               \
    "device:CPU:1;a:0;0:0"
#define KEY_B                                                                                      \
    "/job:l/replica:0/task:0/device:CPU:0;0000000000000001;/job:l/replica:0/task:0/"               \
    "device:CPU:1;b:0;0:0"

static float s_value(const zf_tensor_t *t)
{
    return *(const float *)zf_tensor_data(t);
}

static void test_rendezvous_recv_after_send_gets_the_value_at_once(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(7, &r).code, ZF_OK);
    assert_int_equal(zf_rendezvous_step_id(r), 7);
    zf_tensor_t *t = zf_test_scalar(1.5f);
    assert_int_equal(zf_rendezvous_send(r, KEY_A, t, false).code, ZF_OK);
    assert_int_equal(zf_tensor_refcount(t), 2); /* the rendezvous holds its own */
    size_t values = 9, recvs = 9;
    zf_rendezvous_pending(r, &values, &recvs);
    assert_int_equal(values, 1);
    assert_int_equal(recvs, 0);
    zf_test_got_t g = {0};
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g, NULL).code, ZF_OK);
    assert_int_equal(g.fired, 1);
    assert_int_equal(g.status.code, ZF_OK);
    assert_ptr_equal(g.tensor, t);
    assert_false(g.is_dead);
    zf_test_got_clear(&g);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_rendezvous_pending(r, &values, &recvs);
    assert_int_equal(values, 0);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&r);
    assert_null(r);
}

static void test_rendezvous_recv_before_send_fires_when_the_value_arrives(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_test_got_t g = {0};
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g, NULL).code, ZF_OK);
    assert_int_equal(g.fired, 0);
    size_t values = 9, recvs = 9;
    zf_rendezvous_pending(r, &values, &recvs);
    assert_int_equal(recvs, 1);
    zf_tensor_t *other = zf_test_scalar(9.0f);
    assert_int_equal(zf_rendezvous_send(r, KEY_B, other, false).code, ZF_OK); /* another key */
    assert_int_equal(g.fired, 0);
    zf_tensor_t *t = zf_test_scalar(2.5f);
    assert_int_equal(zf_rendezvous_send(r, KEY_A, t, false).code, ZF_OK);
    assert_int_equal(g.fired, 1);
    assert_true(s_value(g.tensor) == 2.5f);
    zf_test_got_clear(&g);
    zf_tensor_unref(&t);
    zf_tensor_unref(&other);
    zf_rendezvous_unref(&r);
}

static void test_rendezvous_pairs_sends_and_recvs_in_fifo_order_per_key(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_test_got_t g[4] = {{0}};
    /* Two recvs waiting, then three sends (one dead), then two more recvs. */
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g[0], NULL).code,
                     ZF_OK);
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g[1], NULL).code,
                     ZF_OK);
    for (int i = 0; i < 2; i++) {
        zf_tensor_t *t = zf_test_scalar((float)i);
        assert_int_equal(zf_rendezvous_send(r, KEY_A, t, false).code, ZF_OK);
        zf_tensor_unref(&t);
    }
    assert_int_equal(zf_rendezvous_send(r, KEY_A, NULL, true).code, ZF_OK);
    zf_tensor_t *t = zf_test_scalar(3.0f);
    assert_int_equal(zf_rendezvous_send(r, KEY_A, t, false).code, ZF_OK);
    zf_tensor_unref(&t);
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g[2], NULL).code,
                     ZF_OK);
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g[3], NULL).code,
                     ZF_OK);
    assert_true(s_value(g[0].tensor) == 0.0f);
    assert_true(s_value(g[1].tensor) == 1.0f);
    assert_true(g[2].is_dead);
    assert_null(g[2].tensor);
    assert_true(s_value(g[3].tensor) == 3.0f);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(g[i].fired, 1);
        zf_test_got_clear(&g[i]);
    }
    zf_rendezvous_unref(&r);
}

static void test_rendezvous_rejects_a_live_send_without_a_tensor(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_status_t s = zf_rendezvous_send(r, "k", NULL, false);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "rendezvous send of 'k' without a tensor"));
    zf_status_clear(&s);
    zf_rendezvous_unref(&r);
}

static void test_rendezvous_cancelled_recv_fires_with_cancelled_and_skips_the_queue(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_test_got_t g0 = {0}, g1 = {0};
    uint64_t tok0 = 0, tok1 = 0;
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g0, &tok0).code,
                     ZF_OK);
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g1, &tok1).code,
                     ZF_OK);
    assert_true(tok0 != tok1);
    assert_true(zf_rendezvous_cancel_recv(r, KEY_A, tok0));
    assert_int_equal(g0.fired, 1);
    assert_int_equal(g0.status.code, ZF_CANCELLED);
    assert_string_equal(zf_status_msg(&g0.status), "RecvAsync is cancelled.");
    assert_false(zf_rendezvous_cancel_recv(r, KEY_A, tok0)); /* already done */
    assert_false(zf_rendezvous_cancel_recv(r, KEY_B, tok1)); /* wrong key */
    zf_tensor_t *t = zf_test_scalar(4.0f);
    assert_int_equal(zf_rendezvous_send(r, KEY_A, t, false).code, ZF_OK);
    assert_int_equal(g1.fired, 1); /* the second recv gets the value */
    assert_ptr_equal(g1.tensor, t);
    assert_false(zf_rendezvous_cancel_recv(r, KEY_A, tok1)); /* completed */
    zf_test_got_clear(&g0);
    zf_test_got_clear(&g1);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&r);
}

/* A loop makes a key per iteration (frame and iteration in its last
 * field): each is forgotten once used, whichever side came first or when
 * its recv is cancelled. */
static void test_rendezvous_forgets_keys_once_used(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_tensor_t *t = zf_test_scalar(1.0f);
    char key[256];
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof key,
                 "/job:l/replica:0/task:0/device:CPU:0;0000000000000001;/job:l/replica:0/task:0/"
                 "device:CPU:1;a:0;77:%d",
                 i);
        zf_test_got_t g = {0};
        if (i % 2) {
            assert_int_equal(zf_rendezvous_send(r, key, t, false).code, ZF_OK);
            assert_int_equal(zf_rendezvous_num_keys(r), 1);
            assert_int_equal(zf_rendezvous_recv_async(r, key, zf_test_record_recv, &g, NULL).code,
                             ZF_OK);
        } else {
            assert_int_equal(zf_rendezvous_recv_async(r, key, zf_test_record_recv, &g, NULL).code,
                             ZF_OK);
            assert_int_equal(zf_rendezvous_num_keys(r), 1);
            assert_int_equal(zf_rendezvous_send(r, key, t, false).code, ZF_OK);
        }
        assert_int_equal(g.fired, 1);
        assert_ptr_equal(g.tensor, t);
        zf_test_got_clear(&g);
        assert_int_equal(zf_rendezvous_num_keys(r), 0);
    }
    zf_test_got_t g = {0};
    uint64_t tok = 0;
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g, &tok).code, ZF_OK);
    assert_true(zf_rendezvous_cancel_recv(r, KEY_A, tok));
    assert_int_equal(zf_rendezvous_num_keys(r), 0);
    zf_test_got_clear(&g);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&r);
}

static void test_rendezvous_abort_is_sticky_and_fails_pending_and_later_calls(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_test_got_t g = {0};
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g, NULL).code, ZF_OK);
    zf_tensor_t *t = zf_test_scalar(1.0f);
    assert_int_equal(zf_rendezvous_send(r, KEY_B, t, false).code, ZF_OK);
    zf_status_t cause = zf_invalid_argument("mm (MatMul): shapes [2,3] and [4,5] are incompatible");
    zf_rendezvous_start_abort(r, &cause);
    assert_int_equal(g.fired, 1);
    assert_int_equal(g.status.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&g.status), zf_status_msg(&cause));
    assert_int_equal(zf_tensor_refcount(t), 1); /* the queued value was dropped */
    size_t values = 9, recvs = 9;
    zf_rendezvous_pending(r, &values, &recvs);
    assert_int_equal(values + recvs, 0);
    /* A second abort does not replace the first status. */
    zf_status_t later = zf_status_new(ZF_CANCELLED, "cancelled");
    zf_rendezvous_start_abort(r, &later);
    zf_status_clear(&later);
    zf_status_t s = zf_rendezvous_send(r, KEY_A, t, false);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), zf_status_msg(&cause));
    zf_status_clear(&s);
    zf_test_got_t g2 = {0};
    s = zf_rendezvous_recv_async(r, KEY_B, zf_test_record_recv, &g2, NULL);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_int_equal(g2.fired, 0); /* an error return means no callback */
    zf_status_clear(&s);
    s = zf_rendezvous_status(r);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&s);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_status_clear(&cause);
    zf_test_got_clear(&g);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&r);
}

static void test_rendezvous_frees_unclaimed_values_when_the_step_ends(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(3, &r).code, ZF_OK);
    zf_rendezvous_t *second = zf_rendezvous_ref(r);
    zf_tensor_t *t = zf_test_scalar(1.0f);
    for (int i = 0; i < 5; i++)
        assert_int_equal(zf_rendezvous_send(r, KEY_A, t, false).code, ZF_OK);
    assert_int_equal(zf_tensor_refcount(t), 6);
    zf_rendezvous_unref(&second);
    assert_int_equal(zf_tensor_refcount(t), 6); /* still referenced */
    zf_test_got_t g = {0};
    assert_int_equal(zf_rendezvous_recv_async(r, KEY_B, zf_test_record_recv, &g, NULL).code, ZF_OK);
    zf_rendezvous_unref(&r);
    assert_int_equal(zf_tensor_refcount(t), 1);
    assert_int_equal(g.fired, 1); /* a pending recv is cancelled, not leaked */
    assert_int_equal(g.status.code, ZF_CANCELLED);
    zf_test_got_clear(&g);
    zf_tensor_unref(&t);
}

typedef struct {
    zf_rendezvous_t *r;
    int n;
} s_sender_t;

static void *s_send_many(void *arg)
{
    s_sender_t *s = arg;
    for (int i = 0; i < s->n; i++) {
        zf_tensor_t *t = zf_test_scalar((float)i);
        zf_status_t st = zf_rendezvous_send(s->r, KEY_A, t, false);
        zf_status_clear(&st);
        zf_tensor_unref(&t);
    }
    return NULL;
}

static void test_rendezvous_blocking_recv_keeps_order_across_threads(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    s_sender_t s = {r, 2000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_send_many, &s), 0);
    for (int i = 0; i < s.n; i++) {
        zf_tensor_t *t = NULL;
        bool dead = true;
        assert_int_equal(zf_rendezvous_recv(r, KEY_A, -1, &t, &dead).code, ZF_OK);
        assert_false(dead);
        assert_true(s_value(t) == (float)i);
        zf_tensor_unref(&t);
    }
    pthread_join(th, NULL);
    zf_rendezvous_unref(&r);
}

static void test_rendezvous_blocking_recv_times_out_with_deadline_exceeded(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_rendezvous_recv(r, "k", 20, &t, NULL);
    assert_int_equal(s.code, ZF_DEADLINE_EXCEEDED);
    assert_string_equal(zf_status_msg(&s), "timed out waiting for 'k'");
    assert_null(t);
    zf_status_clear(&s);
    size_t values = 9, recvs = 9;
    zf_rendezvous_pending(r, &values, &recvs);
    assert_int_equal(recvs, 0); /* the timed-out recv left the queue */
    zf_rendezvous_unref(&r);
}

static void *s_abort_later(void *arg)
{
    usleep(20000);
    zf_status_t s = zf_status_new(ZF_ABORTED, "step 5 aborted");
    zf_rendezvous_start_abort(arg, &s);
    zf_status_clear(&s);
    return NULL;
}

static void test_rendezvous_blocking_recv_returns_the_abort_status(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(5, &r).code, ZF_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_abort_later, r), 0);
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_rendezvous_recv(r, "k", -1, &t, NULL);
    pthread_join(th, NULL);
    assert_int_equal(s.code, ZF_ABORTED);
    assert_string_equal(zf_status_msg(&s), "step 5 aborted");
    zf_status_clear(&s);
    zf_rendezvous_unref(&r);
}

static void test_rendezvous_mgr_gives_one_rendezvous_per_step_until_cleanup(void **state)
{
    (void)state;
    zf_rendezvous_mgr_t *mgr = NULL;
    assert_int_equal(zf_rendezvous_mgr_new(&mgr).code, ZF_OK);
    zf_rendezvous_t *a = NULL, *a2 = NULL, *b = NULL;
    assert_int_equal(zf_rendezvous_mgr_find(mgr, 10, &a).code, ZF_OK);
    assert_int_equal(zf_rendezvous_mgr_find(mgr, 10, &a2).code, ZF_OK);
    assert_int_equal(zf_rendezvous_mgr_find(mgr, 11, &b).code, ZF_OK);
    assert_ptr_equal(a, a2);
    assert_ptr_not_equal(a, b);
    assert_int_equal(zf_rendezvous_step_id(b), 11);
    /* A value pushed before the step's recv runs waits in the table. */
    zf_tensor_t *t = zf_test_scalar(8.0f);
    assert_int_equal(zf_rendezvous_send(a, KEY_A, t, false).code, ZF_OK);
    zf_rendezvous_unref(&a2);
    zf_test_got_t g = {0};
    assert_int_equal(zf_rendezvous_recv_async(b, KEY_A, zf_test_record_recv, &g, NULL).code, ZF_OK);
    zf_status_t err = zf_status_new(ZF_ABORTED, "step 11 cancelled by the scheduler");
    zf_rendezvous_mgr_cleanup(mgr, 11, &err);
    zf_status_clear(&err);
    assert_int_equal(g.fired, 1);
    assert_int_equal(g.status.code, ZF_ABORTED);
    zf_test_got_clear(&g);
    zf_rendezvous_unref(&b);
    zf_rendezvous_t *b2 = NULL;
    assert_int_equal(zf_rendezvous_mgr_find(mgr, 11, &b2).code, ZF_OK); /* a fresh one */
    zf_status_t st = zf_rendezvous_status(b2);
    assert_int_equal(st.code, ZF_OK);
    zf_rendezvous_unref(&b2);
    zf_status_t ok = ZF_STATUS_OK;
    zf_rendezvous_mgr_cleanup(mgr, 10, &ok);
    zf_rendezvous_mgr_cleanup(mgr, 99, &ok);    /* unknown: nothing happens */
    assert_int_equal(zf_tensor_refcount(t), 2); /* a is still held here */
    zf_rendezvous_unref(&a);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_tensor_unref(&t);
    zf_rendezvous_mgr_destroy(&mgr);
    assert_null(mgr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rendezvous_recv_after_send_gets_the_value_at_once),
        cmocka_unit_test(test_rendezvous_recv_before_send_fires_when_the_value_arrives),
        cmocka_unit_test(test_rendezvous_pairs_sends_and_recvs_in_fifo_order_per_key),
        cmocka_unit_test(test_rendezvous_rejects_a_live_send_without_a_tensor),
        cmocka_unit_test(test_rendezvous_cancelled_recv_fires_with_cancelled_and_skips_the_queue),
        cmocka_unit_test(test_rendezvous_forgets_keys_once_used),
        cmocka_unit_test(test_rendezvous_abort_is_sticky_and_fails_pending_and_later_calls),
        cmocka_unit_test(test_rendezvous_frees_unclaimed_values_when_the_step_ends),
        cmocka_unit_test(test_rendezvous_blocking_recv_keeps_order_across_threads),
        cmocka_unit_test(test_rendezvous_blocking_recv_times_out_with_deadline_exceeded),
        cmocka_unit_test(test_rendezvous_blocking_recv_returns_the_abort_status),
        cmocka_unit_test(test_rendezvous_mgr_gives_one_rendezvous_per_step_until_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
