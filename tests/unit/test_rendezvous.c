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

/* The order in which put_all's recvs were called, and whether the
 * rendezvous could be used from inside a callback (its lock let go). */
typedef struct {
    zf_rendezvous_t *r;
    float order[100];
    int n;
    int reentered;
} s_put_log_t;

static void s_log_recv(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    s_put_log_t *log = arg;
    assert_int_equal(status.code, ZF_OK);
    assert_false(is_dead);
    log->order[log->n++] = s_value(tensor);
    size_t values = 0, recvs = 0;
    zf_rendezvous_pending(log->r, &values, &recvs); /* takes the lock */
    log->reentered++;
    zf_tensor_unref(&tensor);
}

static void s_put_key(char *out, size_t cap, int i)
{
    snprintf(out, cap,
             "/job:l/replica:0/task:0/device:CPU:0;0000000000000001;/job:l/replica:0/"
             "task:0/device:CPU:1;v%d:0;0:0",
             i);
}

/* put_all: 100 values (more than one chunk of 64) meet waiting recvs, which
 * are called in order, after the lock is let go, with the very tensors
 * put (their references moved in); values with nobody waiting queue; a
 * dead value needs no tensor. */
static void test_rendezvous_put_all_moves_values_to_recvs_in_order(void **state)
{
    (void)state;
    enum { N = 100, WAITING = 90 };
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(3, &r).code, ZF_OK);
    static char keys[N + 1][160];
    zf_rendezvous_value_t v[N + 1];
    zf_tensor_t *t[N];
    s_put_log_t log = {.r = r};
    for (int i = 0; i < N; i++) {
        s_put_key(keys[i], sizeof keys[i], i);
        t[i] = zf_test_scalar((float)i); /* ours, to look at afterwards */
        v[i] = (zf_rendezvous_value_t){keys[i], strlen(keys[i]), zf_tensor_ref(t[i]), false};
        if (i < WAITING)
            assert_int_equal(zf_rendezvous_recv_async(r, keys[i], s_log_recv, &log, NULL).code,
                             ZF_OK);
    }
    s_put_key(keys[N], sizeof keys[N], N);
    v[N] = (zf_rendezvous_value_t){keys[N], strlen(keys[N]), NULL, true};
    zf_status_t st = {ZF_INTERNAL, NULL}; /* put_all sets it */
    assert_int_equal(zf_rendezvous_put_all(r, v, N + 1, &st), N + 1);
    assert_int_equal(st.code, ZF_OK);
    assert_int_equal(zf_rendezvous_put_all(r, v, 0, &st), 0); /* nothing to put */
    assert_int_equal(st.code, ZF_OK);
    assert_int_equal(log.n, WAITING);
    assert_int_equal(log.reentered, WAITING);
    for (int i = 0; i < WAITING; i++) assert_true(log.order[i] == (float)i);
    for (int i = 0; i <= N; i++) assert_null(v[i].tensor);
    size_t values = 0, recvs = 0;
    zf_rendezvous_pending(r, &values, &recvs);
    assert_int_equal(values, N - WAITING + 1);
    assert_int_equal(recvs, 0);
    for (int i = 0; i < N; i++) /* the recv dropped the moved reference: only ours is left */
        assert_int_equal(zf_tensor_refcount(t[i]), i < WAITING ? 1 : 2);
    for (int i = WAITING; i <= N; i++) {
        zf_tensor_t *got = NULL;
        bool dead = false;
        assert_int_equal(zf_rendezvous_recv(r, keys[i], 0, &got, &dead).code, ZF_OK);
        assert_int_equal(dead, i == N);
        if (i < N) assert_ptr_equal(got, t[i]);
        zf_tensor_unref(&got);
    }
    for (int i = 0; i < N; i++) zf_tensor_unref(&t[i]);
    zf_rendezvous_unref(&r);
}

/* put_all into an aborted rendezvous puts nothing, returns the abort
 * status, and leaves every reference with the caller. */
static void test_rendezvous_put_all_after_abort_puts_nothing_and_keeps_the_references(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(4, &r).code, ZF_OK);
    zf_status_t why = zf_status_new(ZF_ABORTED, "the step failed elsewhere");
    zf_rendezvous_start_abort(r, &why);
    zf_status_clear(&why);
    zf_tensor_t *t = zf_test_scalar(1.0f);
    zf_rendezvous_value_t v[2] = {{KEY_A, strlen(KEY_A), t, false},
                                  {KEY_B, strlen(KEY_B), NULL, true}};
    zf_status_t st = ZF_STATUS_OK;
    assert_int_equal(zf_rendezvous_put_all(r, v, 2, &st), 0);
    assert_int_equal(st.code, ZF_ABORTED);
    assert_string_equal(zf_status_msg(&st), "the step failed elsewhere");
    zf_status_clear(&st);
    assert_ptr_equal(v[0].tensor, t);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_tensor_unref(&t);
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

/* A key's queue keeps its first item in place and the rest apart: recvs
 * and values that come and go on one key, the first cancelled and its
 * place taken again, still meet in FIFO order, and an abort fails the
 * ones left whichever place they are in. */
static void test_rendezvous_keeps_fifo_order_as_a_key_reuses_its_first_place(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_test_got_t g[5] = {{0}};
    uint64_t tok[5] = {0};
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g[i], &tok[i]).code, ZF_OK);
    assert_true(zf_rendezvous_cancel_recv(r, KEY_A, tok[0])); /* the first place is free again */
    for (int i = 3; i < 5; i++) /* one of these takes it, behind g[1] and g[2] */
        assert_int_equal(
            zf_rendezvous_recv_async(r, KEY_A, zf_test_record_recv, &g[i], &tok[i]).code, ZF_OK);
    zf_tensor_t *t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = zf_test_scalar((float)(i + 1));
        assert_int_equal(zf_rendezvous_send(r, KEY_A, t[i], false).code, ZF_OK);
    }
    assert_int_equal(g[1].fired, 1);
    assert_int_equal(g[2].fired, 1);
    assert_int_equal(g[3].fired, 1);
    assert_true(s_value(g[1].tensor) == 1.0f);
    assert_true(s_value(g[2].tensor) == 2.0f);
    assert_true(s_value(g[3].tensor) == 3.0f);
    assert_int_equal(g[4].fired, 0);
    /* values queue on another key, two deep, and come out in order */
    assert_int_equal(zf_rendezvous_send(r, KEY_B, t[0], false).code, ZF_OK);
    assert_int_equal(zf_rendezvous_send(r, KEY_B, t[1], false).code, ZF_OK);
    zf_tensor_t *got = NULL;
    assert_int_equal(zf_rendezvous_recv(r, KEY_B, 0, &got, NULL).code, ZF_OK);
    assert_ptr_equal(got, t[0]);
    zf_tensor_unref(&got);
    assert_int_equal(zf_rendezvous_send(r, KEY_B, t[2], false).code, ZF_OK);
    zf_status_t why = zf_status_new(ZF_ABORTED, "stop");
    zf_rendezvous_start_abort(r, &why);
    zf_status_clear(&why);
    assert_int_equal(g[4].fired, 1);
    assert_int_equal(g[4].status.code, ZF_ABORTED);
    for (int i = 0; i < 5; i++) zf_test_got_clear(&g[i]);
    /* the values queued on KEY_B went with the abort */
    for (int i = 0; i < 3; i++) assert_int_equal(zf_tensor_refcount(t[i]), 1);
    for (int i = 0; i < 3; i++) zf_tensor_unref(&t[i]);
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

/* Key i of a run: of 2 to 400 bytes as i goes, so that emptied queues of
 * every size come back to keys longer and shorter than theirs. */
static void s_varied_key(char *key, size_t cap, int i)
{
    int len = 2 + (i * 37) % 399;
    snprintf(key, cap, "k%d;", i);
    size_t at = strlen(key);
    for (; (int)at < len && at + 1 < cap; at++) key[at] = (char)('a' + (i + (int)at) % 26);
    key[at] = '\0';
}

/* Queues emptied (more of them, and more bytes of them, than are kept)
 * are made again for keys of every length; each key meets only its own
 * value. */
static void test_rendezvous_keys_of_every_length_meet_their_own_values_again(void **state)
{
    (void)state;
    enum { N = 5000 };
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    static zf_test_got_t got[N];
    static char keys[N][512];
    zf_tensor_t *vals[N];
    for (int round = 0; round < 3; round++) {
        memset(got, 0, sizeof got);
        for (int i = 0; i < N; i++) {
            s_varied_key(keys[i], sizeof keys[i], i + round * 7);
            vals[i] = zf_test_scalar((float)(i + round * N));
            assert_int_equal(
                zf_rendezvous_recv_async(r, keys[i], zf_test_record_recv, &got[i], NULL).code,
                ZF_OK);
        }
        assert_int_equal(zf_rendezvous_num_keys(r), N);
        /* a key that differs from a waiting one in its last byte meets nobody */
        char near[512];
        snprintf(near, sizeof near, "%s", keys[N - 1]);
        near[strlen(near) - 1] ^= 1;
        assert_int_equal(zf_rendezvous_send(r, near, vals[0], false).code, ZF_OK);
        for (int i = N - 1; i >= 0; i--) {
            assert_int_equal(zf_rendezvous_send(r, keys[i], vals[i], false).code, ZF_OK);
            assert_int_equal(got[i].fired, 1);
            assert_true(s_value(got[i].tensor) == (float)(i + round * N));
            zf_test_got_clear(&got[i]);
            zf_tensor_unref(&vals[i]);
        }
        assert_int_equal(zf_rendezvous_num_keys(r), 1); /* near's value waits */
        zf_test_got_t g = {0};
        assert_int_equal(zf_rendezvous_recv_async(r, near, zf_test_record_recv, &g, NULL).code,
                         ZF_OK);
        assert_int_equal(g.fired, 1);
        assert_true(s_value(g.tensor) == (float)(round * N));
        zf_test_got_clear(&g);
        assert_int_equal(zf_rendezvous_num_keys(r), 0);
    }
    /* keys of 3000 bytes, more of them than the room kept holds: each
     * still meets its own value, the first of a key's bytes to differ
     * being its last */
    static char big[600][3001];
    for (int i = 0; i < 600; i++) {
        memset(big[i], 'k', 3000);
        snprintf(big[i] + 2990, 11, "%010d", i);
        vals[i] = zf_test_scalar((float)i);
        assert_int_equal(zf_rendezvous_send(r, big[i], vals[i], false).code, ZF_OK);
    }
    for (int i = 0; i < 600; i++) {
        zf_test_got_t g = {0};
        assert_int_equal(zf_rendezvous_recv_async(r, big[i], zf_test_record_recv, &g, NULL).code,
                         ZF_OK);
        assert_int_equal(g.fired, 1);
        assert_true(s_value(g.tensor) == (float)i);
        zf_test_got_clear(&g);
        zf_tensor_unref(&vals[i]);
    }
    assert_int_equal(zf_rendezvous_num_keys(r), 0);
    zf_rendezvous_unref(&r);
}

/* What the remote hook was handed. */
typedef struct {
    int calls;
    char device[8][128];
    char key[8][256];
} s_hooked_t;

static zf_status_t s_record_hook(void *arg, int64_t step_id, const char *key,
                                 const char *dst_device, zf_tensor_t *tensor, bool is_dead,
                                 bool *handled)
{
    (void)step_id;
    (void)tensor;
    (void)is_dead;
    s_hooked_t *h = arg;
    if (h->calls < 8) {
        snprintf(h->device[h->calls], sizeof h->device[0], "%s", dst_device);
        snprintf(h->key[h->calls], sizeof h->key[0], "%s", key);
    }
    h->calls++;
    *handled = true;
    return ZF_STATUS_OK;
}

#define SRC "/job:l/replica:0/task:0/device:CPU:0;0000000000000001;"

/* The hook gets each key's own destination, however the keys before it
 * started: a device whose name extends another's, a key with no fields
 * after its destination, the local device (which stays here). */
static void test_rendezvous_hands_the_remote_hook_each_keys_own_device(void **state)
{
    (void)state;
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    s_hooked_t h = {0};
    assert_int_equal(
        zf_rendezvous_set_remote(r, "/job:l/replica:0/task:0/device:CPU:0", s_record_hook, &h).code,
        ZF_OK);
    static const char *const keys[] = {
        SRC "/job:l/replica:0/task:0/device:CPU:1;a:0;0:0",
        SRC "/job:l/replica:0/task:0/device:CPU:1;b:0;0:0",
        SRC "/job:l/replica:0/task:0/device:CPU:10;c:0;0:0",
        SRC "/job:l/replica:0/task:0/device:CPU:1",
        SRC "/job:l/replica:0/task:0/device:CPU:1;d:0;0:0",
        SRC "/job:l/replica:0/task:0/device:CPU:0;local:0;0:0",
        SRC "/job:l/replica:0/task:0/device:CPU:2;e:0;0:0",
    };
    static const char *const devices[] = {
        "/job:l/replica:0/task:0/device:CPU:1",  "/job:l/replica:0/task:0/device:CPU:1",
        "/job:l/replica:0/task:0/device:CPU:10", "/job:l/replica:0/task:0/device:CPU:1",
        "/job:l/replica:0/task:0/device:CPU:1",  NULL,
        "/job:l/replica:0/task:0/device:CPU:2",
    };
    zf_tensor_t *t = zf_test_scalar(2.0f);
    int want = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        assert_int_equal(zf_rendezvous_send(r, keys[i], t, false).code, ZF_OK);
        if (!devices[i]) continue;
        assert_int_equal(h.calls, want + 1);
        assert_string_equal(h.device[want], devices[i]);
        assert_string_equal(h.key[want], keys[i]);
        want++;
    }
    assert_int_equal(h.calls, 6);
    /* the local one waits here */
    zf_test_got_t g = {0};
    assert_int_equal(zf_rendezvous_recv_async(r, keys[5], zf_test_record_recv, &g, NULL).code,
                     ZF_OK);
    assert_int_equal(g.fired, 1);
    assert_true(s_value(g.tensor) == 2.0f);
    zf_test_got_clear(&g);
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
        cmocka_unit_test(test_rendezvous_put_all_moves_values_to_recvs_in_order),
        cmocka_unit_test(test_rendezvous_put_all_after_abort_puts_nothing_and_keeps_the_references),
        cmocka_unit_test(test_rendezvous_rejects_a_live_send_without_a_tensor),
        cmocka_unit_test(test_rendezvous_cancelled_recv_fires_with_cancelled_and_skips_the_queue),
        cmocka_unit_test(test_rendezvous_keeps_fifo_order_as_a_key_reuses_its_first_place),
        cmocka_unit_test(test_rendezvous_forgets_keys_once_used),
        cmocka_unit_test(test_rendezvous_keys_of_every_length_meet_their_own_values_again),
        cmocka_unit_test(test_rendezvous_hands_the_remote_hook_each_keys_own_device),
        cmocka_unit_test(test_rendezvous_abort_is_sticky_and_fails_pending_and_later_calls),
        cmocka_unit_test(test_rendezvous_frees_unclaimed_values_when_the_step_ends),
        cmocka_unit_test(test_rendezvous_blocking_recv_keeps_order_across_threads),
        cmocka_unit_test(test_rendezvous_blocking_recv_times_out_with_deadline_exceeded),
        cmocka_unit_test(test_rendezvous_blocking_recv_returns_the_abort_status),
        cmocka_unit_test(test_rendezvous_mgr_gives_one_rendezvous_per_step_until_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
