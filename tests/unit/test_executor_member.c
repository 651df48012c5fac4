/* Tests for executor/member: an executor service registering with a
 * scripted broker on 127.0.0.1 (tests/support/fake_broker_util.h) — the
 * attributes it sends, the name it is given, heartbeats with the load, the
 * peers from the listing, registering again after NOT_FOUND, refusals and
 * a silent broker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "executor/devices/device.h"
#include "executor/worker/member.h"
#include "executor/worker/service.h"
#include "fake_broker_util.h"
#include "test_util.h"

#define PROVISIONAL "/job:worker/replica:0/task:0/device:CPU:0"
#define ASSIGNED    "/job:worker/replica:0/task:3/device:CPU:0"

typedef struct {
    fake_broker_t broker;
    zf_zctx_t *ctx;
    zf_device_t *dev;
    zf_exec_service_t *svc;
    zf_exec_member_t *member;
} s_fixture_t;

static void s_open(s_fixture_t *f, bool broker_names)
{
    fake_broker_start(&f->broker);
    ASSERT_OK(zf_zctx_new(&f->ctx));
    ASSERT_OK(zf_device_cpu_new(PROVISIONAL, 1, &f->dev));
    ASSERT_OK(zf_exec_service_new(f->ctx, f->dev, NULL, &f->svc));
    zf_exec_member_config_t cfg = {f->broker.endpoint, broker_names, 0};
    ASSERT_OK(zf_exec_member_new(f->ctx, f->svc, f->dev, &cfg, &f->member));
}

static void s_close(s_fixture_t *f)
{
    zf_exec_member_destroy(&f->member);
    assert_null(f->member);
    zf_exec_service_destroy(&f->svc);
    zf_device_destroy(&f->dev);
    zf_zctx_destroy(&f->ctx);
    fake_broker_stop(&f->broker);
}

/* Polls the member until cond holds; fails after 5 s. */
#define POLL_UNTIL(f, cond)                                                                        \
    do {                                                                                           \
        for (int i_ = 0; i_ < 500 && !(cond); i_++)                                                \
            ASSERT_OK(zf_exec_member_poll((f)->member, 10));                                       \
        if (!(cond)) fail_msg("never true: %s", #cond);                                            \
    } while (0)

static void test_member_registers_and_takes_the_name_the_broker_gives(void **state)
{
    (void)state;
    s_fixture_t f = {0};
    f.broker.assign_name = ASSIGNED;
    s_open(&f, true);
    assert_string_equal(zf_exec_member_device_name(f.member), "");
    ASSERT_OK(zf_exec_member_register(f.member, 5000));
    assert_string_equal(zf_exec_member_device_name(f.member), ASSIGNED);
    assert_string_equal(f.dev->name_str, ASSIGNED);
    assert_int_equal(zf_exec_member_registrations(f.member), 1);
    pthread_mutex_lock(&f.broker.mu);
    assert_string_equal(f.broker.requested_name, ""); /* the broker was asked to pick */
    assert_string_equal(f.broker.device_type, "CPU");
    assert_int_equal(f.broker.incarnation, f.dev->incarnation);
    assert_string_equal(f.broker.control, zf_exec_service_control_endpoint(f.svc));
    assert_string_equal(f.broker.rendezvous, zf_exec_service_rendezvous_endpoint(f.svc));
    assert_non_null(strchr(f.broker.host_id, ':')); /* hostname:boot id */
    pthread_mutex_unlock(&f.broker.mu);
    s_close(&f);
}

static void test_member_heartbeats_learns_peers_and_registers_again_after_not_found(void **state)
{
    (void)state;
    s_fixture_t f = {0};
    f.broker.forget_after = 2;
    s_open(&f, false);
    ASSERT_OK(zf_exec_member_register(f.member, 5000));
    assert_string_equal(zf_exec_member_device_name(f.member), PROVISIONAL);
    POLL_UNTIL(&f, zf_exec_service_has_peer(f.svc, FAKE_PEER_DEVICE));
    POLL_UNTIL(&f, atomic_load(&f.broker.heartbeats) >= 4);
    /* Heartbeat 2 was answered NOT_FOUND: a second registration, same name. */
    assert_int_equal(atomic_load(&f.broker.registrations), 2);
    assert_int_equal(zf_exec_member_registrations(f.member), 2);
    pthread_mutex_lock(&f.broker.mu);
    assert_string_equal(f.broker.requested_name, PROVISIONAL);
    assert_int_equal(f.broker.last_load, 0);
    pthread_mutex_unlock(&f.broker.mu);
    assert_true(zf_exec_member_heartbeats(f.member) >= 4);
    s_close(&f);
}

static void test_member_reports_a_refused_registration(void **state)
{
    (void)state;
    s_fixture_t f = {0};
    f.broker.refuse_code = ZF_ALREADY_EXISTS;
    s_open(&f, false);
    zf_test_expect_error(zf_exec_member_register(f.member, 5000), ZF_ALREADY_EXISTS,
                         "refused by the fake broker");
    assert_int_equal(zf_exec_member_registrations(f.member), 0);
    s_close(&f);
}

static void test_member_gives_up_on_a_silent_broker(void **state)
{
    (void)state;
    zf_zctx_t *ctx = NULL;
    zf_device_t *dev = NULL;
    zf_exec_service_t *svc = NULL;
    zf_exec_member_t *m = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_device_cpu_new(PROVISIONAL, 1, &dev));
    ASSERT_OK(zf_exec_service_new(ctx, dev, NULL, &svc));
    /* Bound by nobody: ZeroMQ keeps trying to connect in the background. */
    zf_exec_member_config_t cfg = {"tcp://127.0.0.1:1", false, 0};
    ASSERT_OK(zf_exec_member_new(ctx, svc, dev, &cfg, &m));
    zf_test_expect_error(zf_exec_member_register(m, 200), ZF_DEADLINE_EXCEEDED,
                         "the broker at tcp://127.0.0.1:1 did not answer within 200 ms");
    zf_exec_member_config_t none = {"", false, 0};
    zf_exec_member_t *bad = NULL;
    zf_test_expect_error(zf_exec_member_new(ctx, svc, dev, &none, &bad), ZF_INVALID_ARGUMENT,
                         "no broker endpoint given");
    assert_null(bad);
    zf_exec_member_destroy(&m);
    zf_exec_service_destroy(&svc);
    zf_device_destroy(&dev);
    zf_zctx_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_registers_and_takes_the_name_the_broker_gives),
        cmocka_unit_test(test_member_heartbeats_learns_peers_and_registers_again_after_not_found),
        cmocka_unit_test(test_member_reports_a_refused_registration),
        cmocka_unit_test(test_member_gives_up_on_a_silent_broker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
