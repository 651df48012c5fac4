/* Fuzz target for the rendezvous data-plane receiver (executor/rendezvous/
 * remote.c): each input is one multipart message (input format:
 * fuzz_multipart.h; "02 LL HH <msgpack header> <payload>" is a tensor
 * frame, common/tensor_frame.h) pushed to a polled transport
 * (zf_remote_new_polled) in-process, then pumped on this thread. Whatever
 * the message, the receiver must keep working: a valid tensor pushed after
 * it must reach a _Recv waiting in its step. The transport lives across
 * inputs; tensors an input delivers to other steps stay unclaimed, within
 * the table's limits, as they would in an executor. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/tensor.h"
#include "common/tensor_frame.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/rendezvous.h"
#include "fuzz_multipart.h"

#define S_TARGET "fuzz_remote_handler"
#define S_BIND   "inproc://fuzz-remote-handler"
#define S_KEY                                                                                      \
    "/job:worker/replica:0/task:0/device:CPU:0;0000000000000001;"                                  \
    "/job:worker/replica:0/task:1/device:CPU:0;marker;0:0"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static zf_zctx_t *s_ctx;
static zf_rendezvous_mgr_t *s_mgr;
static zf_remote_t *s_remote;
static zf_socket_t *s_push;
static int64_t s_marker_step = (int64_t)1 << 40;

static void s_teardown(void)
{
    zf_socket_destroy(&s_push);
    zf_remote_destroy(&s_remote);
    zf_rendezvous_mgr_destroy(&s_mgr);
    zf_zctx_destroy(&s_ctx);
}

static void s_setup(void)
{
    zf_log_set_level(ZF_LOG_ERROR); /* every malformed message is logged as a warning */
    zf_status_t s = zf_zctx_new(&s_ctx);
    if (zf_ok(s)) s = zf_rendezvous_mgr_new(&s_mgr);
    if (zf_ok(s)) s = zf_remote_new_polled(s_ctx, s_mgr, S_BIND, &s_remote);
    if (zf_ok(s)) s = zf_socket_new(s_ctx, ZF_SOCKET_PUSH, &s_push);
    if (zf_ok(s)) s = zf_socket_connect(s_push, S_BIND);
    zf_fuzz_check(zf_ok(s), S_TARGET, "cannot start the transport");
    atexit(s_teardown);
}

static void s_on_recv(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    (void)is_dead;
    int *got = arg;
    float v = 0;
    if (zf_ok(status) && tensor && zf_tensor_nbytes(tensor) == sizeof v)
        memcpy(&v, zf_tensor_data(tensor), sizeof v);
    *got = zf_ok(status) && v == 42.0f ? 1 : -1;
    zf_status_clear(&status);
    zf_tensor_unref(&tensor);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_remote) s_setup();
    int64_t step = s_marker_step++;
    zf_rendezvous_t *rv = NULL;
    zf_status_t s = zf_remote_claim_step(s_remote, step, &rv);
    zf_fuzz_check(zf_ok(s) && rv, S_TARGET, "cannot claim the marker's step");
    int got = 0;
    uint64_t token = 0;
    s = zf_rendezvous_recv_async(rv, S_KEY, s_on_recv, &got, &token);
    zf_fuzz_check(zf_ok(s), S_TARGET, "cannot wait for the marker");

    zf_fuzz_msg_t m = zf_fuzz_split(data, size);
    zf_fuzz_send(zf_socket_handle(s_push), NULL, NULL, 0, &m, S_TARGET);
    zf_tensor_t *t = NULL;
    s = zf_tensor_new_scalar_float(42.0f, &t);
    if (zf_ok(s)) s = zf_tensor_frame_send(s_push, S_KEY, step, t, false);
    zf_tensor_unref(&t);
    zf_fuzz_check(zf_ok(s), S_TARGET, "cannot send the marker");

    int64_t deadline = zf_fuzz_now_ms() + 10000;
    while (got == 0 && zf_fuzz_now_ms() < deadline) {
        zmq_pollitem_t item = {zf_remote_poll_handle(s_remote), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 10) > 0) zf_remote_pump(s_remote, 64);
    }
    zf_fuzz_check(got == 1, S_TARGET, "a valid tensor after the message never arrived");
    zf_remote_cleanup_step(s_remote, step, NULL);
    zf_rendezvous_unref(&rv);
    return 0;
}
