/* Fuzz target for the broker's message handler (broker/broker.c): each
 * input is one multipart message (input format: fuzz_multipart.h) sent by
 * a DEALER to a broker served in-process, one zf_broker_poll() round at a
 * time. Whatever the message, the broker must keep serving: a Ping sent
 * after it must be answered OK. The broker and the DEALER live across
 * inputs (what an input registers stays, as it would in a real broker). */
#include <stdint.h>
#include <stdlib.h>

#include "broker/broker.h"
#include "common/log.h"
#include "fuzz_multipart.h"

#define S_TARGET "fuzz_broker_handler"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static zf_broker_t *s_broker;
static void *s_zctx, *s_dealer;
static uint64_t s_ping_id = 1u << 30;

static void s_teardown(void)
{
    zmq_close(s_dealer);
    zmq_ctx_term(s_zctx);
    zf_broker_destroy(&s_broker);
}

static void s_setup(void)
{
    zf_log_set_level(ZF_LOG_ERROR); /* every bad message is logged as a warning */
    zf_broker_config_t cfg = {
        .listen = "tcp://127.0.0.1:*", .heartbeat_ms = 60000, .heartbeat_misses = 3};
    zf_status_t s = zf_broker_new(&cfg, &s_broker);
    zf_fuzz_check(zf_ok(s), S_TARGET, "zf_broker_new failed");
    s_zctx = zmq_ctx_new();
    s_dealer = zmq_socket(s_zctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(s_dealer, ZMQ_LINGER, &linger, sizeof linger);
    zf_fuzz_check(zmq_connect(s_dealer, zf_broker_endpoint(s_broker)) == 0, S_TARGET,
                  "cannot connect to the broker");
    atexit(s_teardown);
}

static void s_pump(void *arg)
{
    zf_status_t s = zf_broker_poll(arg, 1);
    zf_fuzz_check(zf_ok(s), S_TARGET, "zf_broker_poll failed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_broker) s_setup();
    zf_fuzz_msg_t m = zf_fuzz_split(data, size);
    zf_fuzz_send(s_dealer, NULL, NULL, 0, &m, S_TARGET);
    uint8_t ping[64];
    uint64_t id = s_ping_id++;
    zf_fuzz_msg_t p = {.n = 1, .data = {ping}, .len = {zf_fuzz_packed_ping(id, ping)}};
    zf_fuzz_send(s_dealer, NULL, NULL, 0, &p, S_TARGET);
    int code = zf_fuzz_await_status(s_dealer, 0, id, 5000, s_pump, s_broker);
    zf_fuzz_check(code == ZF_OK, S_TARGET, "the broker no longer answers a Ping");
    return 0;
}
