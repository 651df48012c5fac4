/* Fuzz target for the executor's control endpoint (executor/worker/
 * service.c, s_serve_requests and s_serve): each input is one multipart
 * message (input format: fuzz_multipart.h) sent from a DEALER to an
 * executor service for a CPU device, running in-process with its own
 * control thread. Whatever the message, the service must keep serving: a
 * Ping after it (a body the endpoint does not serve) must be answered
 * INVALID_ARGUMENT. The service and the DEALER live across inputs. */
#include <stdint.h>
#include <stdlib.h>

#include "common/log.h"
#include "executor/devices/device.h"
#include "executor/worker/service.h"
#include "fuzz_multipart.h"

#define S_TARGET "fuzz_exec_handler"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static zf_zctx_t *s_ctx;
static zf_device_t *s_dev;
static zf_exec_service_t *s_svc;
static void *s_dealer;
static uint64_t s_ping_id = 1u << 30;

static void s_teardown(void)
{
    zmq_close(s_dealer);
    zf_exec_service_destroy(&s_svc);
    zf_device_destroy(&s_dev);
    zf_zctx_destroy(&s_ctx);
}

static void s_setup(void)
{
    zf_log_set_level(ZF_LOG_ERROR); /* every bad request is logged as a warning */
    zf_exec_service_options_t o = {.control_bind = "inproc://fuzz-exec-control",
                                   .rendezvous_bind = "inproc://fuzz-exec-rendezvous",
                                   .peer_wait_ms = 10};
    zf_status_t s = zf_zctx_new(&s_ctx);
    if (zf_ok(s)) s = zf_device_cpu_new("/job:worker/replica:0/task:0/device:CPU:0", 1, &s_dev);
    if (zf_ok(s)) s = zf_exec_service_new(s_ctx, s_dev, &o, &s_svc);
    zf_fuzz_check(zf_ok(s), S_TARGET, "cannot start the executor service");
    s_dealer = zmq_socket(zf_zctx_handle(s_ctx), ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(s_dealer, ZMQ_LINGER, &linger, sizeof linger);
    zf_fuzz_check(zmq_connect(s_dealer, zf_exec_service_control_endpoint(s_svc)) == 0, S_TARGET,
                  "cannot connect to the control endpoint");
    atexit(s_teardown);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_svc) s_setup();
    zf_fuzz_msg_t m = zf_fuzz_split(data, size);
    zf_fuzz_send(s_dealer, NULL, NULL, 0, &m, S_TARGET);
    uint8_t ping[64];
    uint64_t id = s_ping_id++;
    zf_fuzz_msg_t p = {.n = 1, .data = {ping}, .len = {zf_fuzz_packed_ping(id, ping)}};
    zf_fuzz_send(s_dealer, NULL, NULL, 0, &p, S_TARGET);
    int code = zf_fuzz_await_status(s_dealer, 0, id, 10000, NULL, NULL);
    zf_fuzz_check(code == ZF_INVALID_ARGUMENT, S_TARGET,
                  "the control endpoint no longer answers a Ping");
    return 0;
}
