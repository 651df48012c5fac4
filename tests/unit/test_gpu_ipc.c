/* GPU tests for same-host transfers over CUDA IPC (executor/rendezvous/remote.h): this
 * process sends from GPU:0 through its rendezvous transport; a second
 * process (this program again, run with --ipc-receiver) receives with the
 * GPU _Recv kernel and checks the values. Offers are accepted and released,
 * refused across hosts (the bytes follow), and a receiver that dies pins
 * nothing past the step's cleanup. Every test is skipped without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "broker_test_util.h"
#include "common/rendezvous_key.h"
#include "common/tensor_frame.h"
#include "executor/kernels/kernel.h"
#include "executor/rendezvous/remote.h"
#include "kernel_test_util.h"
#include "test_util.h"
#include "gpu_test_util.h"

#define WAIT_MS 20000
#define STEP    11
#define N       4096 /* floats: 16 KiB */
#define DEV_G0  "/job:localhost/replica:0/task:0/device:GPU:0"
#define DEV_G1  "/job:localhost/replica:0/task:0/device:GPU:1"
#define TENSOR  "edge_7_y"

/* Receiver exit codes. */
enum { RX_OK = 0, RX_WRONG_VALUES = 2, RX_ERROR = 3 };

static float s_value(int i)
{
    return (float)i * 0.5f - 7.0f;
}

/* ---- the receiving process ---------------------------------------------------------- */

static Tensorflow__NodeDef *s_recv_node(void)
{
    Tensorflow__NodeDef *n = kt_node_new("recv", "_Recv", 0);
    kt_attr_type(n, "tensor_type", ZF_FLOAT);
    kt_attr_string(n, "tensor_name", TENSOR);
    kt_attr_string(n, "send_device", DEV_G0);
    kt_attr_int(n, "send_device_incarnation", 1);
    kt_attr_string(n, "recv_device", DEV_G1);
    kt_attr_bool(n, "client_terminated", false);
    return n;
}

typedef struct {
    atomic_bool fired;
    zf_status_t status;
} s_done_t;

static void s_on_done(zf_kernel_ctx_t *ctx, zf_status_t status, void *arg)
{
    (void)ctx;
    s_done_t *d = arg;
    d->status = status;
    atomic_store(&d->fired, true);
}

static bool s_values_ok(zf_device_t *dev, const zf_tensor_t *out)
{
    if (!out || zf_tensor_memory_kind(out) != ZF_MEMORY_DEVICE) return false;
    zf_tensor_t *host = NULL;
    zf_status_t s = zf_gpu_tensor_to_host(dev, out, &host);
    bool ok = zf_ok(s) && zf_tensor_num_elements(host) == N;
    const float *v = ok ? zf_tensor_data(host) : NULL;
    for (int i = 0; ok && i < N; i++) ok = v[i] == s_value(i);
    zf_status_clear(&s);
    zf_tensor_unref(&host);
    return ok;
}

/* Runs the GPU _Recv on dev until the value is in; the exit code. */
static int s_take(zf_device_t *dev, zf_rendezvous_t *r)
{
    Tensorflow__NodeDef *n = s_recv_node();
    const zf_kernel_t *def = NULL;
    void *st = NULL;
    zf_status_t s = zf_kernel_find("GPU", n, &def);
    if (zf_ok(s)) s = def->create(n, &st);
    zf_tensor_t *out = NULL;
    int rc = RX_ERROR;
    if (zf_ok(s)) {
        zf_kernel_ctx_t ctx = {.node = n,
                               .state = st,
                               .device = dev,
                               .outputs = &out,
                               .num_outputs = 1,
                               .rendezvous = r,
                               .step_id = STEP};
        s_done_t done = {false, ZF_STATUS_OK};
        def->compute_async(&ctx, s_on_done, &done);
        int64_t end = zf_test_now_ms() + WAIT_MS;
        while (!atomic_load(&done.fired)) {
            if (zf_test_now_ms() > end) _exit(RX_ERROR); /* the recv still holds ctx */
            usleep(2000);
        }
        if (zf_ok(done.status))
            rc = s_values_ok(dev, out) ? RX_OK : RX_WRONG_VALUES;
        else
            fprintf(stderr, "recv: %s\n", zf_status_msg(&done.status));
        zf_status_clear(&done.status);
        def->destroy(st);
    }
    zf_status_clear(&s);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    return rc;
}

/* argv: --ipc-receiver <sender endpoint> <gpu ordinal> <host id or -> <mode>; mode "take"
 * runs the _Recv, "die" exits once the offer is in, without answering. */
static int s_receiver_main(char **argv)
{
    zf_kernels_register_builtin(true);
    zf_device_t *dev = NULL;
    zf_zctx_t *ctx = NULL;
    zf_rendezvous_mgr_t *mgr = NULL;
    zf_remote_t *b = NULL;
    zf_rendezvous_t *r = NULL;
    zf_status_t s = zf_device_gpu_new(DEV_G1, atoi(argv[3]), &dev);
    if (zf_ok(s)) s = zf_zctx_new(&ctx);
    if (zf_ok(s)) s = zf_rendezvous_mgr_new(&mgr);
    if (zf_ok(s)) s = zf_remote_new(ctx, mgr, NULL, &b);
    if (zf_ok(s)) s = zf_remote_attach(b, DEV_G1);
    if (zf_ok(s)) s = zf_remote_set_peer(b, DEV_G0, argv[2]);
    if (zf_ok(s)) s = zf_remote_step_rendezvous(b, STEP, &r);
    if (!zf_ok(s)) {
        fprintf(stderr, "receiver: %s\n", zf_status_msg(&s));
        return RX_ERROR;
    }
    if (strcmp(argv[4], "-") != 0) zf_remote_set_host_id(b, argv[4]);
    printf("%s\n", zf_remote_endpoint(b));
    fflush(stdout);
    int rc = RX_ERROR;
    if (strcmp(argv[5], "die") == 0) {
        int64_t end = zf_test_now_ms() + WAIT_MS;
        while (zf_test_now_ms() < end) {
            if (zf_remote_stats(b).ipc_received > 0) _exit(RX_OK); /* without answering */
            usleep(2000);
        }
    } else {
        rc = s_take(dev, r);
    }
    zf_rendezvous_unref(&r);
    zf_remote_cleanup_step(b, STEP, NULL);
    zf_remote_destroy(&b);
    zf_rendezvous_mgr_destroy(&mgr);
    zf_zctx_destroy(&ctx);
    zf_device_destroy(&dev);
    return rc;
}

/* ---- the sending process (the tests) ------------------------------------------------ */

typedef struct {
    zf_device_t *dev;
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr;
    zf_remote_t *a;
    zf_test_child_t child;
} s_sender_t;

/* A sender on GPU:0 and a receiver process on ordinal gpu for DEV_G1. */
static void s_start(s_sender_t *t, int gpu, const char *host, const char *mode)
{
    memset(t, 0, sizeof *t);
    t->dev = gt_gpu_or_skip();
    zf_kernels_register_builtin(true);
    ASSERT_OK(zf_zctx_new(&t->ctx));
    ASSERT_OK(zf_rendezvous_mgr_new(&t->mgr));
    ASSERT_OK(zf_remote_new(t->ctx, t->mgr, NULL, &t->a));
    ASSERT_OK(zf_remote_attach(t->a, DEV_G0));
    char ordinal[16];
    snprintf(ordinal, sizeof ordinal, "%d", gpu);
    const char *argv[] = {
        "/proc/self/exe", "--ipc-receiver", zf_remote_endpoint(t->a), ordinal, host, mode, NULL};
    zf_test_spawn(&t->child, argv, WAIT_MS);
    ASSERT_OK(zf_remote_set_peer(t->a, DEV_G1, t->child.line));
}

static void s_stop(s_sender_t *t)
{
    zf_test_child_stop(&t->child, SIGKILL, 1000);
    zf_remote_destroy(&t->a);
    zf_rendezvous_mgr_destroy(&t->mgr);
    zf_zctx_destroy(&t->ctx);
    zf_device_destroy(&t->dev);
}

/* Sends the test tensor from GPU memory as the _Send of DEV_G0 would. */
static void s_send(s_sender_t *t)
{
    zf_tensor_t *host = NULL, *d = NULL;
    zf_shape_t shape = ZF_SHAPE(N);
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &host));
    float *v = zf_tensor_data(host);
    for (int i = 0; i < N; i++) v[i] = s_value(i);
    ASSERT_OK(zf_gpu_tensor_to_device(t->dev, host, &d));
    char *key = zf_rendezvous_key(DEV_G0, 1, DEV_G1, TENSOR);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_remote_step_rendezvous(t->a, STEP, &r));
    ASSERT_OK(zf_rendezvous_send(r, key, d, false));
    free(key);
    zf_rendezvous_unref(&r);
    zf_tensor_unref(&d);
    zf_tensor_unref(&host);
}

/* Waits until nothing is held and want offers were answered as released. */
static void s_wait_released(s_sender_t *t, uint64_t released, uint64_t refused)
{
    zf_remote_stats_t st = {0};
    for (int64_t end = zf_test_now_ms() + WAIT_MS; zf_test_now_ms() < end; usleep(2000)) {
        st = zf_remote_stats(t->a);
        if (st.ipc_held == 0 && st.ipc_released == released && st.ipc_refused == refused) return;
    }
    fail_msg("held %llu, released %llu, refused %llu", (unsigned long long)st.ipc_held,
             (unsigned long long)st.ipc_released, (unsigned long long)st.ipc_refused);
}

static int s_child_exit(s_sender_t *t)
{
    return zf_test_child_stop(&t->child, 0, WAIT_MS); /* signal 0: just wait */
}

static void test_gpu_ipc_moves_a_tensor_to_another_process_and_releases_it(void **state)
{
    (void)state;
    s_sender_t t;
    s_start(&t, 0, "-", "take");
    zf_gpu_memory_stats_t before, after;
    ASSERT_OK(zf_gpu_memory_stats(t.dev, &before));
    s_send(&t);
    assert_int_equal(zf_remote_stats(t.a).ipc_offered, 1);
    s_wait_released(&t, 1, 0);
    assert_int_equal(s_child_exit(&t), RX_OK);
    ASSERT_OK(zf_gpu_memory_stats(t.dev, &after));
    assert_int_equal(after.bytes_in_use, before.bytes_in_use); /* the sender let go */
    s_stop(&t);
}

static void test_gpu_ipc_offer_refused_across_hosts_is_followed_by_the_bytes(void **state)
{
    (void)state;
    s_sender_t t;
    s_start(&t, 0, "another-host:boot", "take");
    s_send(&t);
    s_wait_released(&t, 0, 1);
    assert_int_equal(s_child_exit(&t), RX_OK);
    assert_int_equal(zf_remote_stats(t.a).ipc_offered, 1);
    s_stop(&t);
}

static void test_gpu_ipc_receiver_that_dies_pins_nothing_after_the_step_cleanup(void **state)
{
    (void)state;
    s_sender_t t;
    s_start(&t, 0, "-", "die");
    zf_gpu_memory_stats_t before, after;
    ASSERT_OK(zf_gpu_memory_stats(t.dev, &before));
    s_send(&t);
    assert_int_equal(s_child_exit(&t), RX_OK); /* died holding the offer */
    assert_int_equal(zf_remote_stats(t.a).ipc_held, 1);
    zf_status_t why = zf_status_new(ZF_ABORTED, "the receiver died");
    zf_remote_cleanup_step(t.a, STEP, &why);
    zf_status_clear(&why);
    assert_int_equal(zf_remote_stats(t.a).ipc_held, 0);
    ASSERT_OK(zf_gpu_memory_stats(t.dev, &after));
    assert_int_equal(after.bytes_in_use, before.bytes_in_use);
    s_stop(&t);
}

static void test_gpu_ipc_copies_between_two_gpus(void **state)
{
    (void)state;
    int n = 0;
    zf_status_t s = zf_gpu_device_count(&n);
    zf_status_clear(&s);
    if (n == 0) gt_gpu_or_skip(); /* skipped for want of a GPU */
    if (n < 2) {
        print_message("skipped: one GPU visible; a peer copy needs two\n");
        skip();
    }
    s_sender_t t;
    s_start(&t, 1, "-", "take");
    s_send(&t);
    s_wait_released(&t, 1, 0);
    assert_int_equal(s_child_exit(&t), RX_OK);
    s_stop(&t);
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--ipc-receiver") == 0) return s_receiver_main(argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_ipc_moves_a_tensor_to_another_process_and_releases_it),
        cmocka_unit_test(test_gpu_ipc_offer_refused_across_hosts_is_followed_by_the_bytes),
        cmocka_unit_test(test_gpu_ipc_receiver_that_dies_pins_nothing_after_the_step_cleanup),
        cmocka_unit_test(test_gpu_ipc_copies_between_two_gpus),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return gt_exit_code(failed, (int)(sizeof tests / sizeof tests[0]));
}
