/* Definitions of fake_broker_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_broker_util.h"

/* Remembers (or updates) a registered executor. Caller holds b->mu. */
static void fake_broker_remember(fake_broker_t *b, const char *name, uint64_t incarnation,
                                 const char *rendezvous)
{
    int i = 0;
    while (i < b->n_known && strcmp(b->known_name[i], name) != 0) i++;
    if (i == 4) return;
    if (i == b->n_known) b->n_known++;
    snprintf(b->known_name[i], sizeof b->known_name[i], "%s", name);
    snprintf(b->known_rendezvous[i], sizeof b->known_rendezvous[i], "%s", rendezvous);
    b->known_incarnation[i] = incarnation;
}

uint64_t fake_broker_incarnation_of(fake_broker_t *b, const char *name)
{
    uint64_t inc = 0;
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < b->n_known; i++)
        if (strcmp(b->known_name[i], name) == 0) inc = b->known_incarnation[i];
    pthread_mutex_unlock(&b->mu);
    return inc;
}

static void fake_broker_reply(fake_broker_t *b, const zf_route_t *route, Zflow__Envelope *env)
{
    ASSERT_OK(zf_envelope_send(b->router, route, env));
}

static void fake_broker_on_register(fake_broker_t *b, const zf_route_t *route, uint64_t id,
                                    const Zflow__RegisterExecutor *req)
{
    const Tensorflow__DeviceAttributes *d = req->info->device;
    pthread_mutex_lock(&b->mu);
    snprintf(b->requested_name, sizeof b->requested_name, "%s", d->name);
    snprintf(b->device_type, sizeof b->device_type, "%s", d->device_type);
    snprintf(b->host_id, sizeof b->host_id, "%s", req->info->host_id);
    snprintf(b->control, sizeof b->control, "%s", req->info->control_endpoint);
    snprintf(b->rendezvous, sizeof b->rendezvous, "%s", req->info->rendezvous_endpoint);
    b->incarnation = d->incarnation;
    if (!b->refuse_code)
        fake_broker_remember(b, b->assign_name ? b->assign_name : d->name, d->incarnation,
                             req->info->rendezvous_endpoint);
    pthread_mutex_unlock(&b->mu);
    Zflow__Status st;
    zflow__status__init(&st);
    st.code = b->refuse_code;
    st.message = b->refuse_code ? "refused by the fake broker" : "";
    Zflow__RegisterExecutorReply r;
    zflow__register_executor_reply__init(&r);
    r.status = &st;
    r.device_name = (char *)(b->assign_name ? b->assign_name : d->name);
    r.heartbeat_ms = 50;
    r.heartbeat_misses = 3;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = id;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR_REPLY;
    env.register_executor_reply = &r;
    atomic_fetch_add(&b->registrations, 1);
    fake_broker_reply(b, route, &env);
}

static void fake_broker_on_heartbeat(fake_broker_t *b, const zf_route_t *route, uint64_t id,
                                     const Zflow__Heartbeat *hb)
{
    int n = atomic_fetch_add(&b->heartbeats, 1) + 1;
    pthread_mutex_lock(&b->mu);
    b->last_load = hb->load;
    pthread_mutex_unlock(&b->mu);
    Zflow__Status st;
    zflow__status__init(&st);
    if (n == b->forget_after) {
        st.code = 5; /* NOT_FOUND */
        st.message = "unknown executor";
    }
    Zflow__HeartbeatReply r;
    zflow__heartbeat_reply__init(&r);
    r.status = &st;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = id;
    env.body_case = ZFLOW__ENVELOPE__BODY_HEARTBEAT_REPLY;
    env.heartbeat_reply = &r;
    fake_broker_reply(b, route, &env);
}

static void fake_broker_on_list(fake_broker_t *b, const zf_route_t *route, uint64_t id)
{
    Tensorflow__DeviceAttributes d[5];
    Zflow__ExecutorInfo info[5], *infos[5];
    pthread_mutex_lock(&b->mu);
    int n = b->n_known + 1;
    for (int i = 0; i < n; i++) {
        tensorflow__device_attributes__init(&d[i]);
        zflow__executor_info__init(&info[i]);
        d[i].device_type = "CPU";
        d[i].name = i == 0 ? FAKE_PEER_DEVICE : b->known_name[i - 1];
        d[i].incarnation = i == 0 ? 42 : b->known_incarnation[i - 1];
        info[i].device = &d[i];
        info[i].rendezvous_endpoint = i == 0 ? FAKE_PEER_ENDPOINT : b->known_rendezvous[i - 1];
        infos[i] = &info[i];
    }
    Zflow__ListExecutorsReply r;
    zflow__list_executors_reply__init(&r);
    r.n_executors = (size_t)n;
    r.executors = infos;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = id;
    env.body_case = ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS_REPLY;
    env.list_executors_reply = &r;
    atomic_fetch_add(&b->listings, 1);
    fake_broker_reply(b, route, &env);
    pthread_mutex_unlock(&b->mu);
}

static void *fake_broker_main(void *arg)
{
    fake_broker_t *b = arg;
    while (!atomic_load(&b->stop)) {
        zf_route_t route;
        Zflow__Envelope *env = NULL;
        zf_status_t s = zf_envelope_recv(b->router, 20, &route, &env);
        if (zf_ok(s)) {
            if (env->body_case == ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR)
                fake_broker_on_register(b, &route, env->request_id, env->register_executor);
            else if (env->body_case == ZFLOW__ENVELOPE__BODY_HEARTBEAT)
                fake_broker_on_heartbeat(b, &route, env->request_id, env->heartbeat);
            else if (env->body_case == ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS)
                fake_broker_on_list(b, &route, env->request_id);
            zflow__envelope__free_unpacked(env, NULL);
        }
        zf_status_clear(&s);
        zf_route_clear(&route);
    }
    return NULL;
}

void fake_broker_start(fake_broker_t *b)
{
    pthread_mutex_init(&b->mu, NULL);
    ASSERT_OK(zf_zctx_new(&b->ctx));
    ASSERT_OK(zf_socket_new(b->ctx, ZF_SOCKET_ROUTER, &b->router));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(b->router, "tcp://127.0.0.1:*", &ep));
    snprintf(b->endpoint, sizeof b->endpoint, "%s", ep);
    assert_int_equal(pthread_create(&b->thread, NULL, fake_broker_main, b), 0);
}

void fake_broker_stop(fake_broker_t *b)
{
    atomic_store(&b->stop, true);
    pthread_join(b->thread, NULL);
    zf_socket_destroy(&b->router);
    zf_zctx_destroy(&b->ctx);
    pthread_mutex_destroy(&b->mu);
}
