/* Test helpers for process tests of the whole service: zflow-executor and
 * zflow-scheduler children beside a broker (broker_test_util.h), a
 * broker + scheduler + executors fixture, and the small pinned graphs the
 * tests run on it. Include after cmocka.h. */
#ifndef ZF_SERVICE_TEST_UTIL_H
#define ZF_SERVICE_TEST_UTIL_H

#include <stdio.h>
#include <string.h>

#include "broker_test_util.h"
#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "scheduler/graph/partition.h"
#include "test_util.h"

#define ZF_TEST_CPU(k)    "/job:localhost/replica:0/task:0/device:CPU:" #k
#define ZF_TEST_SCHEDULER ZF_BIN_DIR "/zflow-scheduler"
#define ZF_TEST_EXECUTOR  ZF_BIN_DIR "/zflow-executor"

/* Starts a zflow-executor of the broker at endpoint for device CPU:k,
 * named ZF_TEST_CPU(k), with one thread; fails the test unless its first
 * line (kept in c->line) names it within wait_ms. k is 0 to 9. */
void zf_test_executor_start(zf_test_child_t *c, const char *endpoint, int k, int wait_ms);

/* Starts a zflow-scheduler of the broker at endpoint with extra arguments
 * args (NULL-terminated; may be NULL); fails the test unless it says it
 * connected within wait_ms. */
void zf_test_scheduler_start(zf_test_child_t *c, const char *endpoint, const char *const *args,
                             int wait_ms);

#define ZF_TEST_MAX_EXECUTORS 4

/* A broker, executors for CPU:0 .. CPU:n_executors-1 and one scheduler. */
typedef struct zf_test_service {
    zf_test_broker_t broker;
    zf_test_child_t executors[ZF_TEST_MAX_EXECUTORS];
    int n_executors;
    zf_test_child_t scheduler;
} zf_test_service_t;

/* Starts the broker with broker_args (as zf_test_broker_start), then the
 * executors, then the scheduler; each must start within wait_ms. */
void zf_test_service_start(zf_test_service_t *svc, const char *const *broker_args, int n_executors,
                           int wait_ms);

/* SIGTERMs the scheduler, the executors (SIGKILL after wait_ms each) and
 * the broker; any of them may have stopped already. Returns the
 * scheduler's exit code, 0 when it was not running. */
int zf_test_service_stop(zf_test_service_t *svc, int wait_ms);

/* A test file's group setup: starts svc with n_executors (no broker
 * arguments) and connects *client to its broker, with wait_ms as the
 * client's reply timeout. Returns 0, or -1 when the client cannot connect. */
int zf_test_service_setup(zf_test_service_t *svc, int n_executors, zf_client_t **client,
                          int wait_ms);

/* Its teardown: destroys *client and stops svc. Returns 0 when the
 * scheduler exited with 0, else -1. */
int zf_test_service_teardown(zf_test_service_t *svc, zf_client_t **client, int wait_ms);

/* A float chain of n nodes: with n = 2, Placeholder x on devices[0] and
 * y = -x on devices[1]; with n = 3, y = Square(x) on devices[1] and
 * z = -y = -(x * x) on devices[2], so neither partition can pass its input
 * through unnoticed. Caller frees (zf_graphdef_free). */
Tensorflow__GraphDef *zf_test_neg_chain(const char *const *devices, int n);

/* The one partition of y = x * x (float Placeholder x) on device, fed x
 * and fetching y, for an executor of the given incarnation. Caller
 * destroys it (zf_partition_set_destroy). */
zf_partition_set_t *zf_test_square_partition(const char *device, uint64_t incarnation);

/* Waits until /proc says process pid is stopped (state T), so that what
 * a test sends next finds it stopped; fails the test after wait_ms. */
void zf_test_wait_stopped(pid_t pid, int wait_ms);

/* A RunStep envelope of session with one feed (name = tp) and one fetch,
 * built in m (the caller's storage, which must outlive its use; tp stays
 * the caller's). */
typedef struct {
    Zflow__NamedTensor feed;
    Zflow__NamedTensor *feeds[1];
    char *fetches[1];
    Zflow__RunStep rs;
    Zflow__Envelope env;
} zf_test_step_msg_t;

Zflow__Envelope *zf_test_step_msg(zf_test_step_msg_t *m, const char *session, const char *name,
                                  Tensorflow__TensorProto *tp, const char *fetch, int timeout_ms);

#endif
