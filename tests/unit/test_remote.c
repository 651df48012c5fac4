/* Tests for executor/rendezvous/remote: two transports in one process on 127.0.0.1
 * ephemeral ports; tensors pushed by _Send's remote hook land in the right
 * step's rendezvous on the other side, early or late, closed steps drop
 * them, and malformed messages are skipped; CUDA IPC offers are refused
 * across hosts, handed on as placeholders and answered when released; the
 * offers a sender holds are let go by the reply, the step's cleanup or the
 * hold limit (driven through a test hook, so without a GPU too). Hostile
 * batches (an entry as large as a whole batch header, a payload past the
 * cap, a chunk stream whose sizes do not match its header) are refused
 * with a logged reason and the next tensor still comes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <zmq.h>

#include "common/rendezvous_key.h"
#include "common/log.h"
#include "common/tensor_frame.h"
#include "common/transport.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/remote_internal.h"
#include "kernel_test_util.h"
#include "batch_test_util.h"
#include "test_util.h"

#define WAIT_MS 5000

#define DEV_A  "/job:localhost/replica:0/task:0/device:CPU:0"
#define DEV_B  "/job:localhost/replica:0/task:0/device:CPU:1"
#define KEY_AB DEV_A ";0000000000000001;" DEV_B ";x:0;0:0"
#define KEY_BA DEV_B ";0000000000000002;" DEV_A ";x:0;0:0"

typedef struct {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr_a, *mgr_b;
    zf_remote_t *a, *b;
} s_pair_t;

static int s_setup(void **state)
{
    s_pair_t *p = calloc(1, sizeof *p);
    ASSERT_OK(zf_zctx_new(&p->ctx));
    ASSERT_OK(zf_rendezvous_mgr_new(&p->mgr_a));
    ASSERT_OK(zf_rendezvous_mgr_new(&p->mgr_b));
    ASSERT_OK(zf_remote_new(p->ctx, p->mgr_a, NULL, &p->a));
    ASSERT_OK(zf_remote_new(p->ctx, p->mgr_b, "tcp://127.0.0.1:*", &p->b));
    ASSERT_OK(zf_remote_attach(p->a, DEV_A));
    ASSERT_OK(zf_remote_attach(p->b, DEV_B));
    ASSERT_OK(zf_remote_set_peer(p->a, DEV_B, zf_remote_endpoint(p->b)));
    ASSERT_OK(zf_remote_set_peer(p->b, DEV_A, zf_remote_endpoint(p->a)));
    *state = p;
    return 0;
}

static int s_teardown(void **state)
{
    s_pair_t *p = *state;
    zf_remote_destroy(&p->a);
    zf_remote_destroy(&p->b);
    assert_null(p->a);
    zf_rendezvous_mgr_destroy(&p->mgr_a);
    zf_rendezvous_mgr_destroy(&p->mgr_b);
    zf_zctx_destroy(&p->ctx);
    free(p);
    return 0;
}

static zf_tensor_t *s_floats(float a, float b, float c)
{
    zf_tensor_t *t = NULL;
    float v[3] = {a, b, c};
    zf_shape_t shape = ZF_SHAPE(3);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &t));
    return t;
}

static void s_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits until the counter picked by field reaches want; fails after WAIT_MS. */
static void s_wait_stat(zf_remote_t *r, size_t field, uint64_t want)
{
    for (int waited = 0; waited < WAIT_MS; waited += 5) {
        zf_remote_stats_t st = zf_remote_stats(r);
        if (*(uint64_t *)((char *)&st + field) >= want) return;
        s_sleep_ms(5);
    }
    fail_msg("counter at offset %zu never reached %llu", field, (unsigned long long)want);
}

/* Sends a tensor on A's rendezvous of step_id; the hook pushes it to B. */
static void s_send_from_a(s_pair_t *p, int64_t step_id, const char *key, zf_tensor_t *t)
{
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_a, step_id, &r));
    ASSERT_OK(zf_rendezvous_send(r, key, t, false));
    size_t values = 9;
    zf_rendezvous_pending(r, &values, NULL);
    assert_int_equal(values, 0); /* it left; nothing queued on A's side */
    zf_rendezvous_unref(&r);
}

/* After refused messages: a good tensor of step_id still goes from A to
 * B, and B counted malformed messages in all. */
static void s_expect_a_good_tensor(s_pair_t *p, int64_t step_id, uint64_t malformed)
{
    zf_tensor_t *t = s_floats(0.5f, 1.5f, 2.5f);
    s_send_from_a(p, step_id, KEY_AB, t);
    zf_rendezvous_t *rb = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_b, step_id, &rb));
    zf_tensor_t *got = NULL;
    ASSERT_OK(zf_rendezvous_recv(rb, KEY_AB, WAIT_MS, &got, NULL));
    assert_true(zf_tensor_equal(got, t));
    assert_int_equal(zf_remote_stats(p->b).malformed, malformed);
    zf_tensor_unref(&got);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&rb);
}

static void test_remote_delivers_a_pushed_tensor_to_the_waiting_recv_of_its_step(void **state)
{
    s_pair_t *p = *state;
    zf_rendezvous_t *rb = NULL, *other = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_b, 7, &rb));
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_b, 8, &other));
    zf_tensor_t *t = s_floats(1.5f, -2.0f, 3.25f);
    s_send_from_a(p, 7, KEY_AB, t);
    zf_tensor_t *got = NULL;
    bool dead = true;
    ASSERT_OK(zf_rendezvous_recv(rb, KEY_AB, WAIT_MS, &got, &dead));
    assert_false(dead);
    assert_true(zf_tensor_equal(got, t));
    size_t values = 9;
    zf_rendezvous_pending(other, &values, NULL);
    assert_int_equal(values, 0);
    s_wait_stat(p->b, offsetof(zf_remote_stats_t, delivered), 1); /* counted after the hand-over */
    zf_tensor_unref(&got);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&rb);
    zf_rendezvous_unref(&other);
}

static void test_remote_keeps_a_tensor_that_arrives_before_its_recv(void **state)
{
    s_pair_t *p = *state;
    zf_tensor_t *t = s_floats(4, 5, 6);
    s_send_from_a(p, 21, KEY_AB, t);
    s_wait_stat(p->b, offsetof(zf_remote_stats_t, delivered), 1);
    zf_rendezvous_t *rb = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_b, 21, &rb)); /* made by the receiver */
    size_t values = 0;
    zf_rendezvous_pending(rb, &values, NULL);
    assert_int_equal(values, 1);
    zf_tensor_t *got = NULL;
    ASSERT_OK(zf_rendezvous_recv(rb, KEY_AB, 0, &got, NULL));
    assert_true(zf_tensor_equal(got, t));
    zf_tensor_unref(&got);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&rb);
}

static void test_remote_drops_tensors_of_cleaned_up_and_aborted_steps(void **state)
{
    s_pair_t *p = *state;
    zf_remote_cleanup_step(p->b, 30, NULL);
    zf_rendezvous_t *aborted = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_b, 31, &aborted));
    zf_status_t why = zf_status_new(ZF_ABORTED, "step 31 aborted by the test");
    zf_rendezvous_start_abort(aborted, &why);
    zf_status_clear(&why);
    zf_tensor_t *t = s_floats(7, 8, 9);
    s_send_from_a(p, 30, KEY_AB, t);
    s_send_from_a(p, 31, KEY_AB, t);
    s_wait_stat(p->b, offsetof(zf_remote_stats_t, dropped), 2);
    assert_int_equal(zf_remote_stats(p->b).delivered, 0);
    /* A later step still works after the drops. */
    s_send_from_a(p, 32, KEY_AB, t);
    s_wait_stat(p->b, offsetof(zf_remote_stats_t, delivered), 1);
    zf_remote_cleanup_step(p->b, 32, NULL); /* its queued tensor is freed with it */
    zf_remote_cleanup_step(p->b, 31, NULL);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&aborted);
}

static void test_remote_skips_garbage_and_still_delivers_the_next_good_frame(void **state)
{
    s_pair_t *p = *state;
    void *raw = zmq_socket(zf_zctx_handle(p->ctx), ZMQ_PUSH);
    assert_non_null(raw);
    assert_int_equal(zmq_connect(raw, zf_remote_endpoint(p->b)), 0);
    assert_int_equal(zmq_send(raw, "garbage", 7, 0), 7);                /* one frame only */
    assert_int_equal(zmq_send(raw, "\xc1\xc1\xc1", 3, ZMQ_SNDMORE), 3); /* not msgpack */
    assert_int_equal(zmq_send(raw, "xyz", 3, 0), 3);
    assert_int_equal(zmq_send(raw, "\x81\xa1v\x63", 4, ZMQ_SNDMORE), 4); /* version 99 */
    assert_int_equal(zmq_send(raw, "", 0, 0), 0);
    s_wait_stat(p->b, offsetof(zf_remote_stats_t, malformed), 3);
    zmq_close(raw);
    s_expect_a_good_tensor(p, 40, 3);
}

static void test_remote_carries_dead_tensors_and_keeps_local_keys_local(void **state)
{
    s_pair_t *p = *state;
    zf_rendezvous_t *ra = NULL, *rb = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_a, 50, &ra));
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_b, 50, &rb));
    ASSERT_OK(zf_rendezvous_send(ra, KEY_AB, NULL, true));
    const char *local = DEV_B ";0000000000000002;" DEV_A ";y:0;0:0";
    zf_tensor_t *t = s_floats(0, 0, 1);
    ASSERT_OK(zf_rendezvous_send(ra, local, t, false)); /* A's own device: stays */
    size_t values = 0;
    zf_rendezvous_pending(ra, &values, NULL);
    assert_int_equal(values, 1);
    zf_tensor_t *got = t;
    bool dead = false;
    ASSERT_OK(zf_rendezvous_recv(rb, KEY_AB, WAIT_MS, &got, &dead));
    assert_true(dead);
    assert_null(got);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&ra);
    zf_rendezvous_unref(&rb);
}

static void
test_remote_send_to_an_unknown_device_is_unavailable_but_the_hook_keeps_it_local(void **state)
{
    s_pair_t *p = *state;
    zf_tensor_t *t = s_floats(1, 1, 1);
    zf_test_expect_error(
        zf_remote_send(p->a, "/job:w/replica:0/task:9/device:CPU:0", KEY_AB, 1, t, false),
        ZF_UNAVAILABLE,
        "no rendezvous endpoint is known for device "
        "/job:w/replica:0/task:9/device:CPU:0");
    zf_rendezvous_t *ra = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_a, 60, &ra));
    /* Through the hook, an unknown device (a client's) keeps the value local. */
    const char *key = DEV_A ";0000000000000001;/job:w/replica:0/task:9/device:CPU:0;z:0;0:0";
    ASSERT_OK(zf_rendezvous_send(ra, key, t, false));
    size_t values = 0;
    zf_rendezvous_pending(ra, &values, NULL);
    assert_int_equal(values, 1);
    zf_test_expect_error(zf_remote_set_peer(p->a, "", "tcp://127.0.0.1:1"), ZF_INVALID_ARGUMENT,
                         "device name and a rendezvous endpoint");
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&ra);
}

static void test_rendezvous_key_dst_device_is_the_third_field(void **state)
{
    (void)state;
    const char *dst = NULL;
    size_t len = 0;
    assert_true(zf_rendezvous_key_dst_device(KEY_AB, &dst, &len));
    assert_int_equal(len, strlen(DEV_B));
    assert_memory_equal(dst, DEV_B, len);
    assert_false(zf_rendezvous_key_dst_device("a;b", &dst, &len));
    assert_null(dst);
    assert_true(zf_rendezvous_key_dst_device("a;b;c", &dst, &len));
    assert_int_equal(len, 1);
}

/* ---- CUDA IPC offers, seen from the receiving side ------------------------------
 * The test plays a GPU sender G0 on this host: it pushes offers to B (the
 * receiver, a GPU device) and reads B's replies on its own PULL socket,
 * which B knows as G0's rendezvous endpoint. */

#define DEV_G0  "/job:localhost/replica:0/task:0/device:GPU:0"
#define DEV_G1  "/job:localhost/replica:0/task:0/device:GPU:1"
#define KEY_G01 DEV_G0 ";0000000000000001;" DEV_G1 ";y:0;0:0"

typedef struct {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr;
    zf_remote_t *b;
    zf_socket_t *push, *pull; /* the test's, as G0 */
} s_ipc_rig_t;

static int s_ipc_setup(void **state)
{
    s_ipc_rig_t *g = calloc(1, sizeof *g);
    ASSERT_OK(zf_zctx_new(&g->ctx));
    ASSERT_OK(zf_rendezvous_mgr_new(&g->mgr));
    ASSERT_OK(zf_remote_new(g->ctx, g->mgr, NULL, &g->b));
    ASSERT_OK(zf_remote_attach(g->b, DEV_G1));
    ASSERT_OK(zf_socket_new(g->ctx, ZF_SOCKET_PULL, &g->pull));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(g->pull, "tcp://127.0.0.1:*", &ep));
    ASSERT_OK(zf_remote_set_peer(g->b, DEV_G0, ep));
    ASSERT_OK(zf_socket_new(g->ctx, ZF_SOCKET_PUSH, &g->push));
    ASSERT_OK(zf_socket_connect(g->push, zf_remote_endpoint(g->b)));
    *state = g;
    return 0;
}

static int s_ipc_teardown(void **state)
{
    s_ipc_rig_t *g = *state;
    zf_socket_destroy(&g->push);
    zf_socket_destroy(&g->pull);
    zf_remote_destroy(&g->b);
    zf_rendezvous_mgr_destroy(&g->mgr);
    zf_zctx_destroy(&g->ctx);
    free(g);
    return 0;
}

/* Offers a float [2] from host under key for step_id, as offer id. */
static void s_offer(s_ipc_rig_t *g, const char *key, int64_t step_id, uint64_t id, const char *host)
{
    zf_tensor_frame_ipc_t ipc = {.offset = 512, .nbytes = 8, .device = 3, .id = id};
    for (int i = 0; i < ZF_TENSOR_FRAME_IPC_HANDLE; i++) ipc.handle[i] = (uint8_t)(255 - i);
    snprintf(ipc.host, sizeof ipc.host, "%s", host);
    static zf_tensor_frame_header_t h;
    zf_shape_t shape = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_frame_header_for_ipc(key, step_id, ZF_FLOAT, &shape, &ipc, &h));
    ASSERT_OK(zf_tensor_frame_send_ipc(g->push, &h));
}

static void s_expect_reply(s_ipc_rig_t *g, uint64_t id, int64_t step_id, bool accepted,
                           const char *why)
{
    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(g->pull, WAIT_MS, &f));
    assert_non_null(f.reply);
    assert_int_equal(f.reply->id, id);
    assert_int_equal(f.reply->step_id, step_id);
    assert_int_equal(f.reply->accepted, accepted);
    if (!strstr(f.reply->why, why)) fail_msg("reply reason '%s' lacks '%s'", f.reply->why, why);
    zf_tensor_frame_clear(&f);
}

/* Skips the test, saying why, in a build without CUDA, which refuses every
 * offer on arrival. */
static void s_skip_without_cuda(const char *why)
{
    if (zf_gpu_built_with_cuda()) return;
    print_message("skipped: this executor was built without CUDA, so it refuses every offer %s\n",
                  why);
    skip();
}

static void s_expect_no_reply(s_ipc_rig_t *g)
{
    zf_tensor_frame_t f;
    zf_test_expect_error(zf_tensor_frame_recv(g->pull, 200, &f), ZF_DEADLINE_EXCEEDED, NULL);
}

static void test_remote_refuses_an_ipc_offer_from_another_host(void **state)
{
    s_ipc_rig_t *g = *state;
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(g->mgr, 4, &r));
    s_offer(g, KEY_G01, 4, 17, "elsewhere:boot");
    char why[512];
    snprintf(why, sizeof why, "the sender's host 'elsewhere:boot' is not this host '%s'",
             zf_remote_host_id(g->b));
    s_expect_reply(g, 17, 4, false, why);
    size_t values = 9;
    zf_rendezvous_pending(r, &values, NULL);
    assert_int_equal(values, 0);
    zf_remote_stats_t st = zf_remote_stats(g->b);
    assert_int_equal(st.ipc_received, 1);
    assert_int_equal(st.delivered, 0);
    zf_rendezvous_unref(&r);
}

static void
test_remote_hands_an_accepted_offer_to_the_rendezvous_and_answers_on_release(void **state)
{
    s_ipc_rig_t *g = *state;
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(g->mgr, 6, &r));
    s_offer(g, KEY_G01, 6, 23, zf_remote_host_id(g->b));
    if (!zf_gpu_built_with_cuda()) { /* the stub build cannot open handles */
        s_expect_reply(g, 23, 6, false, "this executor was built without CUDA");
        zf_rendezvous_unref(&r);
        return;
    }
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_rendezvous_recv(r, KEY_G01, WAIT_MS, &t, NULL));
    zf_gpu_ipc_handle_t h;
    const char *src = NULL;
    assert_true(zf_remote_ipc_offer(t, &h, &src));
    assert_string_equal(src, DEV_G0);
    assert_int_equal(h.offset, 512);
    assert_int_equal(h.nbytes, 8);
    assert_int_equal(h.device_id, 3);
    for (int i = 0; i < ZF_TENSOR_FRAME_IPC_HANDLE; i++) assert_int_equal(h.handle[i], 255 - i);
    assert_int_equal(zf_tensor_dtype(t), ZF_FLOAT);
    assert_int_equal(zf_tensor_memory_kind(t), ZF_MEMORY_DEVICE);
    assert_int_equal(zf_tensor_num_elements(t), 2);
    s_expect_no_reply(g); /* the sender's memory is still in use */
    zf_tensor_unref(&t);
    s_expect_reply(g, 23, 6, true, "");
    zf_rendezvous_unref(&r);
}

/* With CUDA the offer is accepted and, its step being closed, dropped and
 * so released at once; without CUDA it is refused on arrival, before its
 * step is looked at. Either way no rendezvous is made for the step. */
static void test_remote_releases_an_offer_for_a_closed_step_at_once(void **state)
{
    s_ipc_rig_t *g = *state;
    zf_remote_cleanup_step(g->b, 8, NULL);
    s_offer(g, KEY_G01, 8, 31, zf_remote_host_id(g->b));
    zf_remote_stats_t st;
    if (zf_gpu_built_with_cuda()) {
        s_expect_reply(g, 31, 8, true, ""); /* accepted, dropped and so released */
        st = zf_remote_stats(g->b);
        assert_int_equal(st.dropped, 1);
    } else {
        s_expect_reply(g, 31, 8, false, "this executor was built without CUDA");
        s_expect_no_reply(g); /* one answer per offer */
        st = zf_remote_stats(g->b);
        assert_int_equal(st.dropped, 0); /* refused before it could reach the step */
        assert_int_equal(st.malformed, 0);
    }
    assert_int_equal(st.ipc_received, 1);
    assert_int_equal(st.delivered, 0);
    zf_rendezvous_mgr_stats_t ms = zf_rendezvous_mgr_stats(g->mgr);
    assert_int_equal(ms.steps, 0); /* no rendezvous was made for the closed step */
    assert_int_equal(ms.added, 0);
}

static void test_remote_releases_a_queued_offer_when_its_step_is_aborted(void **state)
{
    s_ipc_rig_t *g = *state;
    s_skip_without_cuda("instead of queueing it");
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(g->mgr, 9, &r));
    s_offer(g, KEY_G01, 9, 37, zf_remote_host_id(g->b));
    s_wait_stat(g->b, offsetof(zf_remote_stats_t, delivered), 1);
    s_expect_no_reply(g);
    zf_status_t why = zf_status_new(ZF_ABORTED, "peer died");
    zf_remote_cleanup_step(g->b, 9, &why);
    zf_status_clear(&why);
    s_expect_reply(g, 37, 9, true, "");
    zf_rendezvous_unref(&r);
}

static void test_remote_counts_an_offer_whose_key_names_no_sender_as_malformed(void **state)
{
    s_ipc_rig_t *g = *state;
    s_offer(g, "no-fields-here", 2, 5, zf_remote_host_id(g->b));
    s_wait_stat(g->b, offsetof(zf_remote_stats_t, malformed), 1);
    s_expect_no_reply(g);
    assert_int_equal(zf_remote_stats(g->b).delivered, 0);
}

static void test_remote_ignores_replies_to_offers_it_no_longer_holds(void **state)
{
    s_ipc_rig_t *g = *state;
    zf_socket_t *to_b = g->push;
    zf_tensor_frame_reply_t reply = {.id = 99, .step_id = 1, .accepted = false};
    ASSERT_OK(zf_tensor_frame_send_reply(to_b, &reply));
    zf_tensor_t *t = s_floats(1, 2, 3);
    ASSERT_OK(zf_tensor_frame_send(to_b, KEY_G01, 1, t, false));
    s_wait_stat(g->b, offsetof(zf_remote_stats_t, delivered), 1);
    zf_remote_stats_t st = zf_remote_stats(g->b);
    assert_int_equal(st.malformed, 0);
    assert_int_equal(st.ipc_refused, 0);
    assert_int_equal(st.ipc_released, 0);
    assert_int_equal(st.ipc_held, 0);
    zf_tensor_unref(&t);
}

static void test_remote_ipc_offer_is_false_for_ordinary_tensors(void **state)
{
    (void)state;
    zf_tensor_t *t = s_floats(1, 2, 3);
    zf_gpu_ipc_handle_t h;
    const char *src = "unset";
    assert_false(zf_remote_ipc_offer(t, &h, &src));
    assert_false(zf_remote_ipc_offer(NULL, NULL, NULL));
    assert_string_equal(src, "unset");
    zf_tensor_unref(&t);
}

/* Without a GPU a tensor claiming GPU memory can be neither exported nor
 * copied: the send fails cleanly, naming the key and device, and holds
 * nothing. */
static void test_remote_send_of_a_gpu_tensor_without_a_gpu_fails_and_holds_nothing(void **state)
{
    s_ipc_rig_t *g = *state;
    int n = 0;
    zf_status_t s = zf_gpu_device_count(&n);
    if (zf_ok(s)) {
        print_message("skipped: %d GPU(s) visible, where the send would copy the tensor\n", n);
        skip();
    }
    zf_status_clear(&s);
    static float bytes[2] = {1, 2};
    zf_buffer_t *buf = NULL;
    ASSERT_OK(zf_buffer_wrap_memory(bytes, sizeof bytes, ZF_MEMORY_DEVICE, 0, NULL, NULL, &buf));
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_from_buffer(ZF_FLOAT, &shape, buf, 0, &t));
    zf_buffer_unref(&buf);
    const char *ep = zf_socket_endpoint(g->pull);
    ASSERT_OK(zf_remote_set_peer(g->b, DEV_G0, ep));
    s = zf_remote_send(g->b, DEV_G0, KEY_G01, 3, t, false);
    assert_false(zf_ok(s));
    if (!strstr(zf_status_msg(&s), "sending '" KEY_G01 "' to " DEV_G0))
        fail_msg("message '%s' names neither key nor device", zf_status_msg(&s));
    zf_status_clear(&s);
    zf_remote_stats_t st = zf_remote_stats(g->b);
    assert_int_equal(st.ipc_offered, 0);
    assert_int_equal(st.ipc_held, 0);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_tensor_unref(&t);
    s_expect_no_reply(g);
}

/* A placeholder has no bytes: a CPU _Recv that finds one fails, naming the
 * sender and itself, instead of reading it. */
static void test_remote_offer_reaching_a_cpu_recv_fails_naming_both_devices(void **state)
{
    s_ipc_rig_t *g = *state;
    s_skip_without_cuda("instead of handing it to a _Recv");
    zf_kernels_register_builtin(false);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(g->mgr, 12, &r));
    s_offer(g, KEY_G01, 12, 41, zf_remote_host_id(g->b));
    s_wait_stat(g->b, offsetof(zf_remote_stats_t, delivered), 1);
    Tensorflow__NodeDef *n = kt_node_new("recv", "_Recv", 0);
    kt_attr_type(n, "tensor_type", ZF_FLOAT);
    kt_attr_string(n, "tensor_name", "y:0");
    kt_attr_string(n, "send_device", DEV_G0);
    kt_attr_int(n, "send_device_incarnation", 1);
    kt_attr_string(n, "recv_device", DEV_G1);
    kt_attr_bool(n, "client_terminated", false);
    zf_device_t *cpu = NULL;
    ASSERT_OK(zf_device_cpu_new(DEV_A, 1, &cpu));
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("CPU", n, &def));
    void *st = NULL;
    ASSERT_OK(def->create(n, &st));
    zf_tensor_t *out = NULL;
    zf_kernel_ctx_t ctx = {.node = n,
                           .state = st,
                           .device = cpu,
                           .outputs = &out,
                           .num_outputs = 1,
                           .rendezvous = r,
                           .step_id = 12};
    kt_done_t done = {false, ZF_STATUS_OK};
    def->compute_async(&ctx, kt_on_done, &done);
    assert_true(done.fired); /* the value was already there */
    zf_test_expect_error(done.status, ZF_FAILED_PRECONDITION,
                         DEV_G0 " offered this tensor over CUDA IPC, which only a GPU device can "
                                "receive, not " DEV_A);
    assert_null(out);
    s_expect_reply(g, 41, 12, true, ""); /* released with the refusal */
    def->destroy(st);
    zf_device_destroy(&cpu);
    kt_node_free(&n);
    zf_rendezvous_unref(&r);
}

/* ---- CUDA IPC offers, seen from the sending side ---------------------------------
 * zf__remote_hold_offer() holds a tensor as a sent offer would be held, so
 * the bookkeeping runs in every build; the hold limit is far longer than
 * the test takes unless a test sets a short one, so the receiver thread's
 * own calls of zf_remote_expire() (with the real clock) never interfere. */

#define HOLD_MS 1000000

/* Holds t for step_id at held_at_ms on p->a; returns the offer id. */
static uint64_t s_hold(s_pair_t *p, int64_t step_id, zf_tensor_t *t, int64_t held_at_ms)
{
    uint64_t id = 0;
    ASSERT_OK(zf__remote_hold_offer(p->a, DEV_B, KEY_AB, step_id, t, held_at_ms, &id));
    assert_true(id > 0);
    return id;
}

/* Sends A a reply to offer id, then a tensor, and waits for the tensor:
 * the reply, sent first on the same socket, has been handled by then. */
static void s_reply_to_a(s_pair_t *p, uint64_t id, int64_t step_id, bool accepted,
                         uint64_t delivered_before)
{
    zf_socket_t *push = NULL;
    ASSERT_OK(zf_socket_new(p->ctx, ZF_SOCKET_PUSH, &push));
    ASSERT_OK(zf_socket_connect(push, zf_remote_endpoint(p->a)));
    zf_tensor_frame_reply_t reply = {.id = id, .step_id = step_id, .accepted = accepted};
    ASSERT_OK(zf_tensor_frame_send_reply(push, &reply));
    zf_tensor_t *t = s_floats(0, 0, 0);
    ASSERT_OK(zf_tensor_frame_send(push, KEY_BA, 900, t, false));
    s_wait_stat(p->a, offsetof(zf_remote_stats_t, delivered), delivered_before + 1);
    zf_remote_cleanup_step(p->a, 900, NULL);
    zf_tensor_unref(&t);
    zf_socket_destroy(&push);
}

static void test_remote_releases_held_offers_past_the_hold_limit_and_counts_them(void **state)
{
    s_pair_t *p = *state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR); /* the release is logged */
    zf_remote_set_ipc_hold_ms(p->a, HOLD_MS);
    int64_t base = zf_remote_now_ms();
    zf_tensor_t *t[3] = {s_floats(1, 1, 1), s_floats(2, 2, 2), s_floats(3, 3, 3)};
    uint64_t first = s_hold(p, 70, t[0], base);
    s_hold(p, 71, t[1], base + 100);
    s_hold(p, 72, t[2], base + 200);
    /* A step that ends well keeps its offers: the receiver may be copying. */
    zf_remote_finish_step(p->a, 70);
    zf_remote_stats_t st = zf_remote_stats(p->a);
    assert_int_equal(st.ipc_held, 3);
    assert_int_equal(st.ipc_expired, 0);
    for (int i = 0; i < 3; i++) assert_int_equal(zf_tensor_refcount(t[i]), 2);
    /* Nothing is due before the limit; each goes once it is reached. */
    assert_int_equal(zf_remote_expire(p->a, base + HOLD_MS - 1), 0);
    assert_int_equal(zf_remote_stats(p->a).ipc_held, 3);
    assert_int_equal(zf_remote_expire(p->a, base + HOLD_MS), 1);
    assert_int_equal(zf_tensor_refcount(t[0]), 1);
    assert_int_equal(zf_tensor_refcount(t[1]), 2);
    st = zf_remote_stats(p->a);
    assert_int_equal(st.ipc_held, 2);
    assert_int_equal(st.ipc_expired, 1);
    assert_int_equal(zf_remote_expire(p->a, base + HOLD_MS + 200), 2);
    assert_int_equal(zf_remote_expire(p->a, base + 2 * HOLD_MS), 0);
    st = zf_remote_stats(p->a);
    assert_int_equal(st.ipc_held, 0);
    assert_int_equal(st.ipc_expired, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(zf_tensor_refcount(t[i]), 1);
    /* A receiver answering after the release is ignored. */
    s_reply_to_a(p, first, 70, true, 0);
    st = zf_remote_stats(p->a);
    assert_int_equal(st.ipc_released, 0);
    assert_int_equal(st.ipc_refused, 0);
    assert_int_equal(st.ipc_expired, 3);
    zf_log_set_level(level);
    for (int i = 0; i < 3; i++) zf_tensor_unref(&t[i]);
}

static void test_remote_held_offers_go_with_their_reply_or_cleanup_and_are_not_expired(void **state)
{
    s_pair_t *p = *state;
    zf_remote_set_ipc_hold_ms(p->a, HOLD_MS);
    int64_t now = zf_remote_now_ms();
    zf_tensor_t *t = s_floats(4, 5, 6);
    uint64_t id = s_hold(p, 80, t, now);
    s_reply_to_a(p, id, 80, true, 0); /* the receiver is done with it */
    zf_remote_stats_t st = zf_remote_stats(p->a);
    assert_int_equal(st.ipc_released, 1);
    assert_int_equal(st.ipc_held, 0);
    assert_int_equal(zf_tensor_refcount(t), 1);
    s_hold(p, 81, t, now);
    zf_status_t why = zf_status_new(ZF_ABORTED, "step 81 failed elsewhere");
    zf_remote_cleanup_step(p->a, 81, &why);
    zf_status_clear(&why);
    assert_int_equal(zf_remote_stats(p->a).ipc_held, 0);
    assert_int_equal(zf_tensor_refcount(t), 1);
    /* A step already cleaned up holds nothing more. */
    uint64_t late = 0;
    zf_test_expect_error(zf__remote_hold_offer(p->a, DEV_B, KEY_AB, 81, t, now, &late),
                         ZF_CANCELLED, "step 81 has ended here");
    assert_int_equal(zf_tensor_refcount(t), 1);
    assert_int_equal(zf_remote_expire(p->a, now + 2 * HOLD_MS), 0);
    st = zf_remote_stats(p->a);
    assert_int_equal(st.ipc_expired, 0);
    assert_int_equal(st.ipc_held, 0);
    zf_tensor_unref(&t);
}

static void test_remote_hold_limit_defaults_to_sixty_seconds(void **state)
{
    s_pair_t *p = *state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR);
    zf_remote_set_ipc_hold_ms(p->a, 0); /* the default */
    int64_t now = zf_remote_now_ms();
    zf_tensor_t *t = s_floats(7, 8, 9);
    s_hold(p, 90, t, now);
    assert_int_equal(ZF_REMOTE_IPC_HOLD_MS, 60000);
    assert_int_equal(zf_remote_expire(p->a, now + ZF_REMOTE_IPC_HOLD_MS - 1), 0);
    assert_int_equal(zf_tensor_refcount(t), 2);
    assert_int_equal(zf_remote_expire(p->a, now + ZF_REMOTE_IPC_HOLD_MS), 1);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_log_set_level(level);
    zf_tensor_unref(&t);
}

/* Nobody calls zf_remote_expire() here: the receiver thread does, with the
 * real clock, between its waits. */
static void test_remote_receiver_thread_releases_offers_past_the_limit_by_itself(void **state)
{
    s_pair_t *p = *state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR);
    zf_remote_set_ipc_hold_ms(p->a, 20);
    zf_tensor_t *t = s_floats(1, 2, 3);
    s_hold(p, 95, t, zf_remote_now_ms());
    s_wait_stat(p->a, offsetof(zf_remote_stats_t, ipc_expired), 1);
    zf_remote_stats_t st = zf_remote_stats(p->a);
    assert_int_equal(st.ipc_expired, 1);
    assert_int_equal(st.ipc_held, 0);
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_log_set_level(level);
    zf_tensor_unref(&t);
}

/* ---- the byte limit on steps not started here ------------------------------------ */

static void
test_remote_drops_a_tensor_over_the_unclaimed_byte_limit_and_fails_its_step(void **state)
{
    s_pair_t *p = *state;
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR); /* the refusal is logged */
    zf_rendezvous_mgr_set_max_bytes(p->mgr_b, 8);
    zf_tensor_t *t = s_floats(1, 2, 3); /* 12 bytes */
    s_send_from_a(p, 33, KEY_AB, t);
    s_wait_stat(p->b, offsetof(zf_remote_stats_t, dropped), 1);
    zf_remote_stats_t st = zf_remote_stats(p->b);
    assert_int_equal(st.delivered, 0);
    zf_rendezvous_mgr_stats_t ms = zf_rendezvous_mgr_stats(p->mgr_b);
    assert_int_equal(ms.refused, 1);
    assert_int_equal(ms.unclaimed_bytes, 0);
    /* The step's RunGraph meets the reason: step, size and limit. */
    zf_rendezvous_t *rb = NULL;
    ASSERT_OK(zf_remote_claim_step(p->b, 33, &rb));
    zf_test_expect_error(zf_rendezvous_status(rb), ZF_RESOURCE_EXHAUSTED,
                         "step 33 has not started on this executor and cannot hold '" KEY_AB
                         "': its 12 bytes are more than the 8 bytes allowed for the tensors of "
                         "steps waiting to start");
    zf_rendezvous_unref(&rb);
    zf_remote_cleanup_step(p->b, 33, NULL);
    /* A tensor within the limit still waits for its step, counted. */
    zf_tensor_t *small = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(5, &small));
    s_send_from_a(p, 34, KEY_AB, small);
    s_wait_stat(p->b, offsetof(zf_remote_stats_t, delivered), 1);
    assert_int_equal(zf_rendezvous_mgr_stats(p->mgr_b).unclaimed_bytes, 4);
    ASSERT_OK(zf_remote_claim_step(p->b, 34, &rb));
    assert_int_equal(zf_rendezvous_mgr_stats(p->mgr_b).unclaimed_bytes, 0);
    zf_tensor_t *got = NULL;
    ASSERT_OK(zf_rendezvous_recv(rb, KEY_AB, 0, &got, NULL));
    assert_true(zf_tensor_equal(got, small));
    zf_tensor_unref(&got);
    zf_rendezvous_unref(&rb);
    zf_log_set_level(level);
    zf_tensor_unref(&small);
    zf_tensor_unref(&t);
}

/* ---- hostile batches -------------------------------------------------------------- */

/* stderr redirected to a temporary file while a test runs. */
typedef struct {
    int saved;
    FILE *f;
    zf_log_level_t level; /* the log level before */
} s_capture_t;

static void s_capture_begin(s_capture_t *c)
{
    fflush(stderr);
    c->f = tmpfile();
    assert_non_null(c->f);
    c->saved = dup(STDERR_FILENO);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->f), STDERR_FILENO) >= 0);
}

/* Restores stderr; returns what was written to it meanwhile (caller frees). */
static char *s_capture_end(s_capture_t *c)
{
    fflush(stderr);
    assert_true(dup2(c->saved, STDERR_FILENO) >= 0);
    close(c->saved);
    long n = lseek(fileno(c->f), 0, SEEK_END);
    assert_true(n >= 0);
    char *text = calloc(1, (size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(pread(fileno(c->f), text, (size_t)n, 0), n);
    fclose(c->f);
    return text;
}

/* A raw PUSH socket connected to B, with warnings logged and stderr
 * captured into *cap. */
static void *s_hostile_begin(s_pair_t *p, s_capture_t *cap)
{
    void *raw = zmq_socket(zf_zctx_handle(p->ctx), ZMQ_PUSH);
    assert_non_null(raw);
    assert_int_equal(zmq_connect(raw, zf_remote_endpoint(p->b)), 0);
    cap->level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_WARN);
    s_capture_begin(cap);
    return raw;
}

/* Once B counts malformed messages: closes raw, restores stderr and the
 * log level; returns what was logged meanwhile (caller frees). */
static char *s_hostile_end(s_pair_t *p, void *raw, s_capture_t *cap, uint64_t malformed)
{
    s_wait_stat(p->b, offsetof(zf_remote_stats_t, malformed), malformed);
    char *log = s_capture_end(cap);
    zf_log_set_level(cap->level);
    zmq_close(raw);
    return log;
}

/* Pushes the batch hb (freed here) on raw, its payloads payload_len zero
 * bytes. */
static void s_push_raw_batch(void *raw, zf_test_batch_t *hb, size_t payload_len)
{
    uint8_t *payload = calloc(1, payload_len + 1);
    assert_non_null(payload);
    zf_test_batch_payloads(hb, payload, payload_len);
    assert_int_equal(zmq_send(raw, hb->bytes, hb->len, 0), (int)hb->len);
    free(payload);
    zf_test_batch_free(hb);
}

static void test_remote_refuses_hostile_batches_naming_why_and_keeps_receiving(void **state)
{
    s_pair_t *p = *state;
    s_capture_t cap;
    void *raw = s_hostile_begin(p, &cap);

    /* A 200 KB batch whose keys, made of one 4000-byte prefix named by
     * every entry, would take 16 MB. */
    char big[4000];
    memset(big, 'p', sizeof big);
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, ZF_TENSOR_FRAME_MAX_BATCH);
    zf_test_batch_add(
        &hb, &(zf_test_batch_entry_t){.flags = ZF_TEST_BATCH_NEW_PREFIX | ZF_TEST_BATCH_DEAD,
                                      .key = big,
                                      .key_len = sizeof big,
                                      .plen = sizeof big,
                                      .step = 50});
    for (int i = 1; i < ZF_TENSOR_FRAME_MAX_BATCH; i++)
        zf_test_batch_add(&hb,
                          &(zf_test_batch_entry_t){
                              .flags = ZF_TEST_BATCH_DEAD, .prefix = 1, .key = "k", .step = 50});
    s_push_raw_batch(raw, &hb, 0);

    /* A sound batch of one float tensor whose payload is past the cap. */
    int64_t n = ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD / 4 + 2;
    zf_test_batch_begin(&hb, 1);
    zf_test_batch_vec(&hb, KEY_AB, 50, ZF_FLOAT, n, (uint64_t)n * 4);
    s_push_raw_batch(raw, &hb, (size_t)n * 4);

    char *log = s_hostile_end(p, raw, &cap, 2);
    char want[512];
    snprintf(want, sizeof want,
             "dropped a message on %s: tensor frame batch: the keys take %d bytes; a batch's may "
             "take at most %d",
             zf_remote_endpoint(p->b), 4001 + (ZF_TENSOR_FRAME_MAX_BATCH - 1) * 4002,
             ZF_TENSOR_FRAME_MAX_BATCH_HEADER);
    if (!strstr(log, want)) fail_msg("expected '%s' in the log:\n%s", want, log);
    snprintf(want, sizeof want,
             "dropped a message on %s: tensor frame batch: the payloads take %lld bytes; a "
             "batch carries at most %d",
             zf_remote_endpoint(p->b), (long long)n * 4, ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD);
    if (!strstr(log, want)) fail_msg("expected '%s' in the log:\n%s", want, log);
    free(log);

    /* nothing of them was delivered; a good tensor still arrives */
    zf_remote_stats_t st = zf_remote_stats(p->b);
    assert_int_equal(st.delivered, 0);
    assert_int_equal(st.batches_received, 0);
    s_expect_a_good_tensor(p, 51, 2);
}

static void test_remote_refuses_a_chunk_stream_that_lies_and_keeps_receiving(void **state)
{
    s_pair_t *p = *state;
    s_capture_t cap;
    void *raw = s_hostile_begin(p, &cap);
    /* float [49152] in three 64 KiB chunks, the second 4 KiB short */
    zf_shape_t shape = ZF_SHAPE(3 * ZF_TENSOR_FRAME_MIN_CHUNK / 4);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &t));
    zf_tensor_frame_header_t h;
    ASSERT_OK(zf_tensor_frame_header_from_tensor(KEY_AB, 52, t, false, &h));
    h.chunk = ZF_TENSOR_FRAME_MIN_CHUNK;
    uint8_t enc[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t enc_len = 0;
    ASSERT_OK(zf_tensor_frame_encode_header(&h, enc, sizeof enc, &enc_len));
    const uint8_t *bytes = zf_tensor_data(t);
    const size_t c = ZF_TENSOR_FRAME_MIN_CHUNK, sizes[3] = {c, c - 4096, c};
    assert_int_equal(zmq_send(raw, enc, enc_len, ZMQ_SNDMORE), (int)enc_len);
    for (int i = 0; i < 3; i++)
        assert_int_equal(zmq_send(raw, bytes + i * c, sizes[i], i < 2 ? ZMQ_SNDMORE : 0),
                         (int)sizes[i]);
    char *log = s_hostile_end(p, raw, &cap, 1);
    char want[512];
    snprintf(want, sizeof want,
             "dropped a message on %s: tensor '%s' (step 52): chunk 2 of 3 has 61440 bytes; "
             "expected 65536",
             zf_remote_endpoint(p->b), KEY_AB);
    if (!strstr(log, want)) fail_msg("expected '%s' in the log:\n%s", want, log);
    free(log);
    zf_tensor_unref(&t);
    assert_int_equal(zf_remote_stats(p->b).delivered, 0);
    s_expect_a_good_tensor(p, 53, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_remote_delivers_a_pushed_tensor_to_the_waiting_recv_of_its_step, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_remote_keeps_a_tensor_that_arrives_before_its_recv,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_remote_drops_tensors_of_cleaned_up_and_aborted_steps,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_skips_garbage_and_still_delivers_the_next_good_frame, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_remote_carries_dead_tensors_and_keeps_local_keys_local,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_send_to_an_unknown_device_is_unavailable_but_the_hook_keeps_it_local,
            s_setup, s_teardown),
        cmocka_unit_test(test_rendezvous_key_dst_device_is_the_third_field),
        cmocka_unit_test_setup_teardown(
            test_remote_releases_held_offers_past_the_hold_limit_and_counts_them, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_held_offers_go_with_their_reply_or_cleanup_and_are_not_expired, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_remote_hold_limit_defaults_to_sixty_seconds, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_receiver_thread_releases_offers_past_the_limit_by_itself, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_drops_a_tensor_over_the_unclaimed_byte_limit_and_fails_its_step, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_refuses_hostile_batches_naming_why_and_keeps_receiving, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_refuses_a_chunk_stream_that_lies_and_keeps_receiving, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_remote_refuses_an_ipc_offer_from_another_host,
                                        s_ipc_setup, s_ipc_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_hands_an_accepted_offer_to_the_rendezvous_and_answers_on_release,
            s_ipc_setup, s_ipc_teardown),
        cmocka_unit_test_setup_teardown(test_remote_releases_an_offer_for_a_closed_step_at_once,
                                        s_ipc_setup, s_ipc_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_releases_a_queued_offer_when_its_step_is_aborted, s_ipc_setup,
            s_ipc_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_counts_an_offer_whose_key_names_no_sender_as_malformed, s_ipc_setup,
            s_ipc_teardown),
        cmocka_unit_test_setup_teardown(test_remote_ignores_replies_to_offers_it_no_longer_holds,
                                        s_ipc_setup, s_ipc_teardown),
        cmocka_unit_test(test_remote_ipc_offer_is_false_for_ordinary_tensors),
        cmocka_unit_test_setup_teardown(
            test_remote_offer_reaching_a_cpu_recv_fails_naming_both_devices, s_ipc_setup,
            s_ipc_teardown),
        cmocka_unit_test_setup_teardown(
            test_remote_send_of_a_gpu_tensor_without_a_gpu_fails_and_holds_nothing, s_ipc_setup,
            s_ipc_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
