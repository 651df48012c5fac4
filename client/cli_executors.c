/* zflow executors: asks a broker for its live executors and prints one line
 * per device. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/cli.h"
#include "common/transport.h"

#define S_DEFAULT_BROKER "tcp://127.0.0.1:5555"

static const char s_usage[] =
    "usage: zflow executors [--broker ENDPOINT] [--timeout-ms N] [--keys DIR]\n"
    "\n"
    "Lists the executors registered with the broker at ENDPOINT (default:\n"
    "$ZFLOW_BROKER, else " S_DEFAULT_BROKER "), one line per device:\n"
    "\n"
    "  NAME TYPE load=N heartbeat=Nms control=ENDPOINT rendezvous=ENDPOINT\n"
    "\n"
    "heartbeat is how long ago the broker last heard from the executor.\n"
    "With --keys DIR (or ZFLOW_KEYS=DIR) it connects with the CurveZMQ client\n"
    "keys of DIR; a secure broker lists names, types and loads only.\n"
    "Exits 1 when the broker does not answer within N ms (default 3000), or\n"
    "refuses the handshake (UNAUTHENTICATED).\n";

typedef struct s_args {
    const char *broker, *keys;
    int timeout_ms;
} s_args_t;

static int s_parse(int argc, char **argv, s_args_t *a)
{
    const char *env = getenv("ZFLOW_BROKER");
    a->broker = env && env[0] ? env : S_DEFAULT_BROKER;
    a->timeout_ms = 3000;
    a->keys = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--broker") == 0 && i + 1 < argc) {
            a->broker = argv[++i];
        } else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
            a->keys = argv[++i];
        } else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
            char *end = NULL;
            errno = 0;
            long v = strtol(argv[++i], &end, 10);
            if (!argv[i][0] || *end || errno || v < 1 || v > INT_MAX) {
                fprintf(stderr,
                        "zflow executors: --timeout-ms must be a positive number, not "
                        "'%s'\n",
                        argv[i]);
                return 2;
            }
            a->timeout_ms = (int)v;
        } else {
            fprintf(stderr, "zflow executors: unexpected argument '%s'\n%s", argv[i], s_usage);
            return 2;
        }
    }
    a->keys = zf_keys_dir_from(a->keys);
    return 0;
}

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for the reply to request_id; other messages are skipped. Caller
 * owns *reply. */
static zf_status_t s_await(zf_socket_t *sock, const s_args_t *a, uint64_t request_id,
                           Zflow__Envelope **reply)
{
    int64_t deadline = s_now_ms() + a->timeout_ms;
    for (;;) {
        int64_t left = deadline - s_now_ms();
        zf_route_t route;
        zf_status_t s = zf_envelope_recv(sock,
                                         left > 100 ? 100
                                         : left > 0 ? (int)left
                                                    : 0,
                                         &route, reply);
        if (s.code == ZF_DEADLINE_EXCEEDED) {
            zf_status_clear(&s);
            ZF_TRY(
                zf_status_prefix(zf_socket_handshake_failure(sock), "the broker at %s", a->broker));
            if (s_now_ms() < deadline) continue;
            return zf_status_new(ZF_UNAVAILABLE, "no answer from the broker at %s within %d ms",
                                 a->broker, a->timeout_ms);
        }
        ZF_TRY(zf_status_prefix(s, "reply from the broker at %s", a->broker));
        if ((*reply)->request_id == request_id) return ZF_STATUS_OK;
        zflow__envelope__free_unpacked(*reply, NULL);
        *reply = NULL;
    }
}

/* The reply's status, or INVALID_ARGUMENT for a reply of the wrong kind. */
static zf_status_t s_reply_status(const Zflow__Envelope *reply)
{
    if (reply->body_case == ZFLOW__ENVELOPE__BODY_STATUS_REPLY)
        return zf_status_from_proto(reply->status_reply->status);
    if (reply->body_case != ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS_REPLY)
        return zf_invalid_argument("the broker answered ListExecutors with another message");
    return zf_status_from_proto(reply->list_executors_reply->status);
}

static zf_status_t s_query(zf_socket_t *sock, const s_args_t *a, Zflow__Envelope **reply)
{
    ZF_TRY(zf_socket_set_send_timeout(sock, a->timeout_ms));
    ZF_TRY(zf_socket_secure_client(sock, ZF_ROLE_BROKER));
    ZF_TRY(zf_socket_watch_handshakes(sock));
    ZF_TRY(zf_socket_connect(sock, a->broker));
    Zflow__ListExecutors req = ZFLOW__LIST_EXECUTORS__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = 1;
    env.body_case = ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS;
    env.list_executors = &req;
    zf_status_t s = zf_envelope_send(sock, NULL, &env);
    if (s.code == ZF_DEADLINE_EXCEEDED) {
        zf_status_clear(&s);
        return zf_status_new(ZF_UNAVAILABLE, "cannot reach the broker at %s within %d ms",
                             a->broker, a->timeout_ms);
    }
    ZF_TRY(s);
    ZF_TRY(s_await(sock, a, env.request_id, reply));
    return s_reply_status(*reply);
}

static const char *s_str(const char *s)
{
    return s && s[0] ? s : "-";
}

static void s_print(const Zflow__ListExecutorsReply *r)
{
    if (r->n_executors == 0) printf("no executors are registered\n");
    for (size_t i = 0; i < r->n_executors; i++) {
        const Zflow__ExecutorInfo *e = r->executors[i];
        const char *name = e->device ? e->device->name : NULL;
        const char *type = e->device ? e->device->device_type : NULL;
        printf("%s %s load=%" PRId64 " heartbeat=%" PRId64 "ms control=%s rendezvous=%s\n",
               s_str(name), s_str(type), e->load, e->ms_since_heartbeat, s_str(e->control_endpoint),
               s_str(e->rendezvous_endpoint));
    }
}

static int s_run(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_args_t a;
    int rc = s_parse(argc, argv, &a);
    if (rc) return rc;
    zf_zctx_t *ctx = NULL;
    zf_socket_t *sock = NULL;
    Zflow__Envelope *reply = NULL;
    zf_status_t s = zf_zctx_new(&ctx);
    if (zf_ok(s) && a.keys) s = zf_zctx_set_keys(ctx, a.keys, ZF_ROLE_CLIENT);
    if (zf_ok(s)) s = zf_socket_new(ctx, ZF_SOCKET_DEALER, &sock);
    if (zf_ok(s)) s = s_query(sock, &a, &reply);
    if (zf_ok(s)) s_print(reply->list_executors_reply);
    if (reply) zflow__envelope__free_unpacked(reply, NULL);
    zf_socket_destroy(&sock);
    zf_zctx_destroy(&ctx);
    return zf_ok(s) ? 0 : zf_cli_fail("executors", &s);
}

const zf_cli_command_t zf_cli_executors = {"executors",
                                           "list the executors a broker knows, with load", s_run};
