/* Fuzz target for the scheduler's message handlers (scheduler/server/
 * server.c): each input is one multipart message (input format:
 * fuzz_multipart.h) for a scheduler served in-process on a thread. With
 * byte 0's high bit clear it goes to the client endpoint (s_read_clients,
 * s_on_direct) from a DEALER; with it set, to the broker-facing socket
 * (s_read_broker, s_on_message) from the harness's ROUTER, which stands in
 * for the broker, behind the scheduler's routing id. Whatever the message,
 * the scheduler must keep serving both sides: a Ping on the client
 * endpoint is answered OK, and a Ping from a client through the broker
 * socket UNIMPLEMENTED (the broker answers those itself). The scheduler
 * and the sockets live across inputs. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "fuzz_multipart.h"
#include "scheduler/server/server.h"

#define S_TARGET "fuzz_sched_handler"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static zf_sched_server_t *s_srv;
static pthread_t s_thread;
static void *s_zctx, *s_broker, *s_client;
static uint8_t s_sched_rid[256]; /* the scheduler's routing id at the broker ROUTER */
static size_t s_sched_rid_len;
static char s_client_path[128];
static uint64_t s_ping_id = 1u << 30;

static void *s_serve(void *arg)
{
    (void)arg;
    zf_status_t s = zf_sched_server_register(s_srv, 0); /* sends RegisterScheduler */
    zf_status_clear(&s);
    s = zf_sched_server_run(s_srv);
    zf_fuzz_check(zf_ok(s), S_TARGET, "the scheduler's loop stopped");
    return NULL;
}

static void s_teardown(void)
{
    zf_sched_server_stop(s_srv);
    pthread_join(s_thread, NULL);
    zf_sched_server_destroy(&s_srv);
    zmq_close(s_client);
    zmq_close(s_broker);
    zmq_ctx_term(s_zctx);
    unlink(s_client_path + strlen("ipc://"));
}

static void *s_socket(int type)
{
    void *s = zmq_socket(s_zctx, type);
    int linger = 0;
    zf_fuzz_check(s != NULL, S_TARGET, "zmq_socket failed");
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    return s;
}

/* The scheduler's RegisterScheduler names its routing id at the broker. */
static void s_learn_routing_id(void)
{
    zmq_pollitem_t item = {s_broker, 0, ZMQ_POLLIN, 0};
    zf_fuzz_check(zmq_poll(&item, 1, 10000) == 1, S_TARGET, "the scheduler never registered");
    int rc = zmq_recv(s_broker, s_sched_rid, sizeof s_sched_rid, 0);
    zf_fuzz_check(rc > 0 && rc <= (int)sizeof s_sched_rid, S_TARGET, "bad routing id");
    s_sched_rid_len = (size_t)rc;
    int more = 0;
    size_t more_len = sizeof more;
    uint8_t sink[4096];
    do {
        zmq_recv(s_broker, sink, sizeof sink, 0);
        zmq_getsockopt(s_broker, ZMQ_RCVMORE, &more, &more_len);
    } while (more);
}

static void s_setup(void)
{
    zf_log_set_level(ZF_LOG_ERROR); /* every bad message is logged as a warning */
    s_zctx = zmq_ctx_new();
    s_broker = s_socket(ZMQ_ROUTER);
    zf_fuzz_check(zmq_bind(s_broker, "tcp://127.0.0.1:*") == 0, S_TARGET, "cannot bind");
    char broker_ep[256];
    size_t ep_len = sizeof broker_ep;
    zmq_getsockopt(s_broker, ZMQ_LAST_ENDPOINT, broker_ep, &ep_len);
    snprintf(s_client_path, sizeof s_client_path, "ipc:///tmp/zflow-fuzz-sched-%d", (int)getpid());
    zf_sched_server_config_t cfg = {
        .broker = broker_ep, .workers = 2, .job_workers = 1, .listen = s_client_path};
    zf_status_t s = zf_sched_server_new(&cfg, &s_srv);
    zf_fuzz_check(zf_ok(s), S_TARGET, "zf_sched_server_new failed");
    zf_fuzz_check(pthread_create(&s_thread, NULL, s_serve, NULL) == 0, S_TARGET, "no thread");
    s_learn_routing_id();
    s_client = s_socket(ZMQ_DEALER);
    zf_fuzz_check(zmq_connect(s_client, s_client_path) == 0, S_TARGET, "cannot connect");
    atexit(s_teardown);
}

static void s_expect_alive(void)
{
    uint8_t ping[64];
    uint64_t id = s_ping_id++;
    zf_fuzz_msg_t p = {.n = 1, .data = {ping}, .len = {zf_fuzz_packed_ping(id, ping)}};
    zf_fuzz_send(s_client, NULL, NULL, 0, &p, S_TARGET);
    zf_fuzz_check(zf_fuzz_await_status(s_client, 0, id, 10000, NULL, NULL) == ZF_OK, S_TARGET,
                  "the client endpoint no longer answers a Ping");
    id = s_ping_id++;
    p.len[0] = zf_fuzz_packed_ping(id, ping);
    static const char client[] = "fuzz-client";
    const void *route[2] = {s_sched_rid, client};
    size_t route_len[2] = {s_sched_rid_len, sizeof client - 1};
    zf_fuzz_send(s_broker, route, route_len, 2, &p, S_TARGET);
    zf_fuzz_check(zf_fuzz_await_status(s_broker, 2, id, 10000, NULL, NULL) == ZF_UNIMPLEMENTED,
                  S_TARGET, "the broker socket no longer answers a client's Ping");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_srv) s_setup();
    zf_fuzz_msg_t m = zf_fuzz_split(data, size);
    if (m.high_bit) {
        const void *route[1] = {s_sched_rid};
        size_t route_len[1] = {s_sched_rid_len};
        if (m.n > 0) zf_fuzz_send(s_broker, route, route_len, 1, &m, S_TARGET);
    } else {
        zf_fuzz_send(s_client, NULL, NULL, 0, &m, S_TARGET);
    }
    s_expect_alive();
    return 0;
}
