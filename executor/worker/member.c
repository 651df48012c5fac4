/* The executor's membership client: owns the DEALER to the broker, the
 * heartbeat clock and the registration state. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "executor/worker/member.h"
#include "executor/rendezvous/remote.h"

#define S_DEFAULT_HEARTBEAT_MS 1000
#define S_BROKER_MAX           256
#define S_REGISTER_RETRY_MS    250

struct zf_exec_member {
    zf_exec_service_t *svc;
    zf_device_t *device;
    zf_socket_t *dealer;
    char broker[S_BROKER_MAX];
    bool broker_names;
    int heartbeat_ms; /* 0 until known */
    bool fixed_period;
    char host_id[320];
    char name[ZF_DEVICE_NAME_MAX]; /* confirmed; "" before */
    uint64_t next_id;
    uint64_t pending_register; /* request id of an unanswered registration */
    zf_status_t register_status;
    bool answered;
    uint64_t pending_deregister; /* request id of an unanswered deregistration */
    zf_status_t deregister_status;
    bool deregistered;
    int64_t next_heartbeat_ms;
    int registrations, heartbeats;
};

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

zf_status_t zf_exec_member_new(zf_zctx_t *ctx, zf_exec_service_t *svc, zf_device_t *device,
                               const zf_exec_member_config_t *cfg, zf_exec_member_t **out)
{
    *out = NULL;
    if (!cfg->broker || !*cfg->broker) return zf_invalid_argument("no broker endpoint given");
    if (strlen(cfg->broker) >= S_BROKER_MAX)
        return zf_invalid_argument("broker endpoint '%s' is too long", cfg->broker);
    zf_exec_member_t *m = calloc(1, sizeof *m);
    if (!m) return zf_out_of_memory("membership");
    m->svc = svc;
    m->device = device;
    snprintf(m->broker, sizeof m->broker, "%s", cfg->broker);
    m->broker_names = cfg->broker_names;
    m->heartbeat_ms = cfg->heartbeat_ms > 0 ? cfg->heartbeat_ms : 0;
    m->fixed_period = cfg->heartbeat_ms > 0;
    zf_remote_default_host_id(m->host_id, sizeof m->host_id);
    zf_status_t s = zf_socket_new(ctx, ZF_SOCKET_DEALER, &m->dealer);
    if (zf_ok(s)) s = zf_socket_set_send_timeout(m->dealer, 1000);
    if (zf_ok(s)) s = zf_socket_secure_client(m->dealer, ZF_ROLE_BROKER);
    if (zf_ok(s)) s = zf_socket_connect(m->dealer, cfg->broker);
    if (!zf_ok(s)) {
        zf_exec_member_destroy(&m);
        return s;
    }
    *out = m;
    return ZF_STATUS_OK;
}

void zf_exec_member_destroy(zf_exec_member_t **m_p)
{
    if (!m_p || !*m_p) return;
    zf_exec_member_t *m = *m_p;
    *m_p = NULL;
    zf_socket_destroy(&m->dealer);
    zf_status_clear(&m->register_status);
    zf_status_clear(&m->deregister_status);
    free(m);
}

/* ---- requests ------------------------------------------------------------ */

static zf_status_t s_send(zf_exec_member_t *m, Zflow__Envelope *env)
{
    env->request_id = ++m->next_id;
    zf_status_t s = zf_envelope_send(m->dealer, NULL, env);
    if (s.code == ZF_DEADLINE_EXCEEDED) { /* the broker is away; the next round retries */
        zf_log_warn("executor", "broker %s: %s", m->broker, zf_status_msg(&s));
        zf_status_clear(&s);
    }
    return s;
}

static zf_status_t s_send_register(zf_exec_member_t *m)
{
    Tensorflow__DeviceAttributes attrs;
    tensorflow__device_attributes__init(&attrs);
    /* Once named, ask for that name again: partitions use it in their keys. */
    attrs.name = m->name[0] ? m->name : m->broker_names ? "" : m->device->name_str;
    attrs.device_type = m->device->type;
    attrs.incarnation = m->device->incarnation;
    attrs.memory_limit = m->device->memory_limit;
    Zflow__ExecutorInfo info;
    zflow__executor_info__init(&info);
    info.device = &attrs;
    info.host_id = m->host_id;
    info.control_endpoint = (char *)zf_exec_service_control_endpoint(m->svc);
    info.rendezvous_endpoint = (char *)zf_exec_service_rendezvous_endpoint(m->svc);
    info.load = zf_exec_service_load(m->svc);
    Zflow__RegisterExecutor body;
    zflow__register_executor__init(&body);
    body.info = &info;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR;
    env.register_executor = &body;
    ZF_TRY(s_send(m, &env));
    m->pending_register = m->next_id;
    return ZF_STATUS_OK;
}

static zf_status_t s_send_heartbeat(zf_exec_member_t *m)
{
    Zflow__Heartbeat hb;
    zflow__heartbeat__init(&hb);
    hb.device_name = m->name;
    hb.incarnation = m->device->incarnation;
    hb.load = zf_exec_service_load(m->svc);
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.body_case = ZFLOW__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    ZF_TRY(s_send(m, &env));
    m->heartbeats++;
    return ZF_STATUS_OK;
}

static zf_status_t s_send_list(zf_exec_member_t *m)
{
    Zflow__ListExecutors body;
    zflow__list_executors__init(&body);
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.body_case = ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS;
    env.list_executors = &body;
    return s_send(m, &env);
}

/* ---- replies --------------------------------------------------------------- */

static void s_on_registered(zf_exec_member_t *m, const Zflow__RegisterExecutorReply *r)
{
    zf_status_t s = zf_status_from_proto(r->status);
    const char *name = r->device_name && *r->device_name ? r->device_name : m->device->name_str;
    if (zf_ok(s) && strcmp(name, m->device->name_str) != 0) {
        if (zf_exec_service_num_graphs(m->svc) > 0)
            s = zf_status_new(ZF_FAILED_PRECONDITION,
                              "the broker renamed %s to %s while graphs are registered",
                              m->device->name_str, name);
        else
            s = zf_exec_service_rename(m->svc, name);
    }
    if (zf_ok(s)) {
        snprintf(m->name, sizeof m->name, "%s", m->device->name_str);
        /* a period from the wire past INT_MAX / 2 would wrap to a negative int */
        if (!m->fixed_period && r->heartbeat_ms > 0 && r->heartbeat_ms <= INT_MAX / 2)
            m->heartbeat_ms = (int)r->heartbeat_ms;
        m->registrations++;
        m->next_heartbeat_ms = s_now_ms() + m->heartbeat_ms;
        zf_log_info("executor", "registered with %s as %s (incarnation %016" PRIx64 ")", m->broker,
                    m->name, m->device->incarnation);
    } else {
        zf_log_error("executor", "registration refused by %s: %s", m->broker, zf_status_msg(&s));
    }
    zf_status_clear(&m->register_status);
    m->register_status = s;
    m->answered = true;
    m->pending_register = 0;
}

static void s_on_listing(zf_exec_member_t *m, const Zflow__ListExecutorsReply *r)
{
    for (size_t i = 0; i < r->n_executors; i++) {
        const Zflow__ExecutorInfo *e = r->executors[i];
        if (!e || !e->device || !e->device->name || !*e->device->name) continue;
        if (strcmp(e->device->name, m->device->name_str) == 0) continue;
        if (!e->rendezvous_endpoint || !*e->rendezvous_endpoint) continue;
        /* A new incarnation or endpoint replaces the peer's socket: tensors
         * must not go on to a process that has gone. */
        bool changed = false;
        zf_status_t s = zf_exec_service_update_peer(m->svc, e->device->name, e->rendezvous_endpoint,
                                                    e->device->incarnation, &changed);
        if (zf_ok(s)) zf_exec_service_set_peer_host(m->svc, e->device->name, e->host_id);
        if (zf_ok(s) && changed)
            zf_log_info("executor", "peer %s at %s (incarnation %016" PRIx64 ")", e->device->name,
                        e->rendezvous_endpoint, e->device->incarnation);
        if (!zf_ok(s)) zf_log_warn("executor", "peer %s: %s", e->device->name, zf_status_msg(&s));
        zf_status_clear(&s);
    }
}

static zf_status_t s_handle(zf_exec_member_t *m, const Zflow__Envelope *env)
{
    zf_status_t s = ZF_STATUS_OK;
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR_REPLY:
        if (env->request_id == m->pending_register)
            s_on_registered(m, env->register_executor_reply);
        break;
    case ZFLOW__ENVELOPE__BODY_HEARTBEAT_REPLY:
        s = zf_status_from_proto(env->heartbeat_reply->status);
        if (s.code == ZF_NOT_FOUND && !m->pending_register) {
            zf_log_warn("executor", "the broker forgot %s (%s): registering again", m->name,
                        zf_status_msg(&s));
            zf_status_clear(&s);
            return s_send_register(m);
        }
        break;
    case ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS_REPLY:
        s_on_listing(m, env->list_executors_reply);
        break;
    case ZFLOW__ENVELOPE__BODY_STATUS_REPLY:
        s = zf_status_from_proto(env->status_reply->status);
        if (m->pending_deregister && env->request_id == m->pending_deregister) {
            zf_status_clear(&m->deregister_status);
            m->deregister_status = s;
            m->deregistered = true;
            return ZF_STATUS_OK;
        }
        break;
    default:
        s = zf_invalid_argument("unexpected message body %d from the broker", (int)env->body_case);
        break;
    }
    if (!zf_ok(s)) zf_log_warn("executor", "broker %s: %s", m->broker, zf_status_msg(&s));
    zf_status_clear(&s);
    return ZF_STATUS_OK;
}

/* Receives and handles what the broker sent, waiting up to timeout_ms for
 * the first message. */
static zf_status_t s_receive(zf_exec_member_t *m, int timeout_ms)
{
    for (int wait = timeout_ms;; wait = 0) {
        zf_route_t route;
        zf_route_clear(&route);
        Zflow__Envelope *env = NULL;
        zf_status_t s = zf_envelope_recv(m->dealer, wait, &route, &env);
        zf_route_clear(&route);
        if (s.code == ZF_DEADLINE_EXCEEDED) {
            zf_status_clear(&s);
            return ZF_STATUS_OK;
        }
        if (s.code == ZF_CANCELLED) return s;
        if (zf_ok(s)) {
            s = s_handle(m, env);
            zflow__envelope__free_unpacked(env, NULL);
            ZF_TRY(s);
        } else {
            zf_log_warn("executor", "bad message from broker %s: %s", m->broker, zf_status_msg(&s));
            zf_status_clear(&s);
        }
    }
}

/* ---- the loop ------------------------------------------------------------------ */

zf_status_t zf_exec_member_register(zf_exec_member_t *m, int timeout_ms)
{
    int64_t deadline = s_now_ms() + timeout_ms;
    zf_status_t s = ZF_STATUS_OK;
    for (;;) {
        m->answered = false;
        ZF_TRY(s_send_register(m));
        while (!m->answered) {
            int64_t left = timeout_ms < 0 ? 100 : deadline - s_now_ms();
            if (left <= 0)
                return zf_status_new(ZF_DEADLINE_EXCEEDED,
                                     "the broker at %s did not answer within %d ms", m->broker,
                                     timeout_ms);
            ZF_TRY(s_receive(m, (int)(left < 100 ? left : 100)));
        }
        s = m->register_status;
        m->register_status = ZF_STATUS_OK;
        /* a secure broker keeps our name for our previous run until it
         * misses its heartbeats: ask again until then */
        bool held = s.code == ZF_ALREADY_EXISTS && strstr(zf_status_msg(&s), "held by a live");
        if (!held || (timeout_ms >= 0 && s_now_ms() + S_REGISTER_RETRY_MS >= deadline)) break;
        zf_log_info("executor", "%s; asking again in %d ms", zf_status_msg(&s),
                    S_REGISTER_RETRY_MS);
        zf_status_clear(&s);
        struct timespec ts = {0, S_REGISTER_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!m->heartbeat_ms) m->heartbeat_ms = S_DEFAULT_HEARTBEAT_MS;
    if (zf_ok(s)) s = s_send_list(m);
    return s;
}

zf_status_t zf_exec_member_poll(zf_exec_member_t *m, int timeout_ms)
{
    if (!m->heartbeat_ms) m->heartbeat_ms = S_DEFAULT_HEARTBEAT_MS;
    int64_t now = s_now_ms();
    if (m->name[0] && now >= m->next_heartbeat_ms) {
        m->next_heartbeat_ms = now + m->heartbeat_ms;
        ZF_TRY(s_send_heartbeat(m));
        ZF_TRY(s_send_list(m));
    } else if (zf_exec_service_take_peers_wanted(m->svc)) {
        ZF_TRY(s_send_list(m));
    }
    int64_t until_beat = m->next_heartbeat_ms - s_now_ms();
    int wait = timeout_ms;
    if (m->name[0] && until_beat < wait) wait = until_beat > 0 ? (int)until_beat : 0;
    return s_receive(m, wait);
}

zf_status_t zf_exec_member_deregister(zf_exec_member_t *m, int timeout_ms)
{
    if (!m->name[0]) return ZF_STATUS_OK;
    Zflow__DeregisterExecutor body;
    zflow__deregister_executor__init(&body);
    body.device_name = m->name;
    body.incarnation = m->device->incarnation;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.body_case = ZFLOW__ENVELOPE__BODY_DEREGISTER_EXECUTOR;
    env.deregister_executor = &body;
    m->deregistered = false;
    ZF_TRY(s_send(m, &env));
    m->pending_deregister = env.request_id;
    int64_t deadline = s_now_ms() + timeout_ms;
    while (!m->deregistered) {
        int64_t left = deadline - s_now_ms();
        if (left <= 0)
            return zf_status_new(ZF_DEADLINE_EXCEEDED,
                                 "the broker at %s did not confirm the deregistration of %s "
                                 "within %d ms",
                                 m->broker, m->name, timeout_ms);
        ZF_TRY(s_receive(m, (int)(left < 100 ? left : 100)));
    }
    m->pending_deregister = 0;
    zf_status_t s = m->deregister_status;
    m->deregister_status = ZF_STATUS_OK;
    if (zf_ok(s)) m->name[0] = '\0';
    return s;
}

const char *zf_exec_member_device_name(const zf_exec_member_t *m)
{
    return m->name;
}

int zf_exec_member_registrations(const zf_exec_member_t *m)
{
    return m->registrations;
}

int zf_exec_member_heartbeats(const zf_exec_member_t *m)
{
    return m->heartbeats;
}
