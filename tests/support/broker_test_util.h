/* Test helpers for the broker: start build/bin/zflow-broker as a child on an
 * ephemeral loopback port, read the endpoint it prints, stop it (SIGKILL if
 * it does not stop), and talk to it with DEALER sockets. Include after
 * cmocka.h. */
#ifndef ZF_BROKER_TEST_UTIL_H
#define ZF_BROKER_TEST_UTIL_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/transport.h"
#include "process_test_util.h"

typedef struct zf_test_broker {
    pid_t pid;
    char endpoint[256];
    char log_path[64]; /* the broker's stderr */
} zf_test_broker_t;

/* Sends sig, waits up to 5 s, then SIGKILLs. Returns the exit code, 128 +
 * the signal for a killed broker, -1 when it was not running. */
int zf_test_broker_stop(zf_test_broker_t *tb, int sig);

/* Starts the broker with the given extra arguments (NULL-terminated) after
 * --listen tcp://127.0.0.1:0 and fills in its endpoint. */
void zf_test_broker_start(zf_test_broker_t *tb, const char *const *args);

/* A fresh directory for a broker's --state (its job store), in dir. */
void zf_test_state_dir(char *dir, size_t size);

/* Removes a state directory and the job store in it. */
void zf_test_state_dir_remove(const char *dir);

/* True when the broker's stderr so far contains text. */
bool zf_test_broker_log_contains(const zf_test_broker_t *tb, const char *text);

/* A DEALER connected to endpoint. */
zf_socket_t *zf_test_dealer(zf_zctx_t *ctx, const char *endpoint);

/* Sends env (optionally after one routing frame). */
void zf_test_send(zf_socket_t *s, const void *frame, size_t len, Zflow__Envelope *env);

/* The next envelope within timeout_ms, or NULL; *route (may be NULL)
 * receives its routing frames. Caller frees the envelope. */
Zflow__Envelope *zf_test_recv(zf_socket_t *s, int timeout_ms, zf_route_t *route);

/* Sends msg, a message of body's type, as the body of an envelope with
 * request_id. */
void zf_test_send_body(zf_socket_t *s, uint64_t request_id, Zflow__Envelope__BodyCase body,
                       void *msg);

/* Expects the next envelope on s within 5 s to be the StatusReply to
 * request_id with code (a missing status is OK) and, when text is not
 * NULL, a message containing text. */
void zf_test_expect_status(zf_socket_t *s, uint64_t request_id, int code, const char *text);

/* Sends env on s with request_id id and returns the reply to it, failing
 * the test when none comes within timeout_ms or it does not echo the id.
 * Caller frees the reply. */
Zflow__Envelope *zf_test_call(zf_socket_t *s, Zflow__Envelope *env, uint64_t id, int timeout_ms);

/* Registers an executor (name may be "") and returns the reply. */
Zflow__Envelope *zf_test_register_executor(zf_socket_t *s, uint64_t request_id, const char *name,
                                           const char *type, uint64_t incarnation,
                                           const char *control, const char *rendezvous);

/* Sends a heartbeat and returns the reply's status code. */
int zf_test_heartbeat(zf_socket_t *s, uint64_t request_id, const char *name, uint64_t incarnation,
                      int64_t load);

/* ---- child processes (zflow-scheduler, zflow-executor) ---------------- */

typedef struct zf_test_child {
    pid_t pid; /* 0 when not running */
    char line[512];
} zf_test_child_t;

/* Starts argv (NULL-terminated) with stderr to /dev/null and reads its first
 * stdout line; fails the test (leaving nothing running) when none comes
 * within wait_ms. */
void zf_test_spawn(zf_test_child_t *c, const char *const *argv, int wait_ms);

/* Sends SIGCONT (so a stopped child can act on sig) and sig, waits up to
 * wait_ms, then SIGKILLs; reaps. Returns the exit code, 128 + the signal
 * when killed by one, -1 when it was not running. */
int zf_test_child_stop(zf_test_child_t *c, int sig, int wait_ms);

#endif
