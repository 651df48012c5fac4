/* A scripted stand-in for the broker, for the executor's membership tests:
 * a ROUTER on a 127.0.0.1 ephemeral port served by its own thread. It
 * answers RegisterExecutor (with a fixed name or a refusal), Heartbeat
 * (NOT_FOUND once after a set number, as a restarted broker would) and
 * ListExecutors (the executors that registered, and one made-up peer), and
 * records what it saw. Include after
 * <cmocka.h>. */
#ifndef ZF_FAKE_BROKER_UTIL_H
#define ZF_FAKE_BROKER_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/transport.h"
#include "test_util.h"

#define FAKE_PEER_DEVICE   "/job:worker/replica:0/task:7/device:CPU:0"
#define FAKE_PEER_ENDPOINT "tcp://127.0.0.1:9"

typedef struct {
    zf_zctx_t *ctx;
    zf_socket_t *router;
    char endpoint[128];
    pthread_t thread;
    atomic_bool stop;
    /* script */
    const char *assign_name; /* the name RegisterExecutor gets; NULL: the requested one */
    int refuse_code;         /* non-zero: refuse registrations with this code */
    int forget_after;        /* answer heartbeat number N with NOT_FOUND; 0: never */
    /* what it saw (read after fake_broker_stop or through the atomics) */
    atomic_int registrations, heartbeats, listings;
    char requested_name[192], device_type[16], host_id[320], control[128], rendezvous[128];
    uint64_t incarnation;
    int64_t last_load;
    /* every executor that registered, listed with the made-up peer */
    int n_known;
    char known_name[4][192], known_rendezvous[4][128];
    uint64_t known_incarnation[4];
    pthread_mutex_t mu; /* guards the strings above */
} fake_broker_t;

/* The incarnation name registered with (0 when it did not). */
uint64_t fake_broker_incarnation_of(fake_broker_t *b, const char *name);

/* Binds and starts b, whose script fields the caller has set. */
void fake_broker_start(fake_broker_t *b);

void fake_broker_stop(fake_broker_t *b);

#endif
