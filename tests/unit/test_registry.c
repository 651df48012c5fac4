/* Tests for the broker's executor registry: naming, duplicates, restarts,
 * heartbeats and expiry, driven by an injected clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "broker/registry.h"
#include "common/device_name.h"

typedef struct s_event {
    zf_registry_event_t kind;
    char name[ZF_DEVICE_NAME_MAX];
    uint64_t incarnation;
    char reason[128];
} s_event_t;

typedef struct s_fixture {
    int64_t now;
    zf_registry_t *reg;
    s_event_t events[16];
    int n_events;
} s_fixture_t;

static int64_t s_clock(void *arg)
{
    return ((s_fixture_t *)arg)->now;
}

static void s_listen(void *arg, zf_registry_event_t kind, const Zflow__ExecutorInfo *info,
                     const char *reason)
{
    s_fixture_t *f = arg;
    assert_true(f->n_events < 16);
    s_event_t *e = &f->events[f->n_events++];
    e->kind = kind;
    snprintf(e->name, sizeof e->name, "%s", info->device->name);
    e->incarnation = info->device->incarnation;
    snprintf(e->reason, sizeof e->reason, "%s", reason);
}

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    f->now = 1000;
    zf_registry_config_t cfg = {100, 3, s_clock, f, false};
    zf_status_t s = zf_registry_new(&cfg, &f->reg);
    assert_int_equal(s.code, ZF_OK);
    zf_registry_set_listener(f->reg, s_listen, f);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    zf_registry_destroy(&f->reg);
    assert_null(f->reg);
    free(f);
    return 0;
}

/* An ExecutorInfo on the stack; strings are borrowed. */
typedef struct s_info {
    Zflow__ExecutorInfo info;
    Tensorflow__DeviceAttributes dev;
} s_info_t;

static void s_info_init(s_info_t *i, const char *name, const char *type, uint64_t incarnation)
{
    zflow__executor_info__init(&i->info);
    tensorflow__device_attributes__init(&i->dev);
    i->dev.name = (char *)name;
    i->dev.device_type = (char *)type;
    i->dev.incarnation = incarnation;
    i->info.device = &i->dev;
    i->info.host_id = "host-a";
    i->info.control_endpoint = "tcp://127.0.0.1:7001";
    i->info.rendezvous_endpoint = "tcp://127.0.0.1:7002";
}

static zf_code_t s_register(s_fixture_t *f, const char *name, const char *type, uint64_t inc,
                            char *out, char *msg, size_t msg_size)
{
    s_info_t i;
    s_info_init(&i, name, type, inc);
    zf_status_t s = zf_registry_register(f->reg, &i.info, out, ZF_DEVICE_NAME_MAX);
    if (msg) snprintf(msg, msg_size, "%s", zf_status_msg(&s));
    zf_code_t code = s.code;
    zf_status_clear(&s);
    return code;
}

static void test_registry_assigns_a_new_task_to_each_unnamed_executor(void **state)
{
    s_fixture_t *f = *state;
    char a[ZF_DEVICE_NAME_MAX], b[ZF_DEVICE_NAME_MAX];
    assert_int_equal(s_register(f, "", "CPU", 11, a, NULL, 0), ZF_OK);
    assert_int_equal(s_register(f, NULL, "GPU", 12, b, NULL, 0), ZF_OK);
    assert_string_equal(a, "/job:worker/replica:0/task:0/device:CPU:0");
    assert_string_equal(b, "/job:worker/replica:0/task:1/device:GPU:0");
    assert_int_equal(zf_registry_count(f->reg), 2);
    const Zflow__ExecutorInfo *e = zf_registry_find(f->reg, b);
    assert_non_null(e);
    assert_string_equal(e->device->device_type, "GPU");
    assert_string_equal(e->control_endpoint, "tcp://127.0.0.1:7001");
    assert_int_equal(f->n_events, 2);
    assert_int_equal(f->events[1].kind, ZF_REGISTRY_JOINED);
    assert_string_equal(f->events[1].name, b);
}

static void test_registry_keeps_given_names_and_completes_partial_ones(void **state)
{
    s_fixture_t *f = *state;
    char a[ZF_DEVICE_NAME_MAX], b[ZF_DEVICE_NAME_MAX], c[ZF_DEVICE_NAME_MAX];
    assert_int_equal(
        s_register(f, "/job:localhost/replica:0/task:0/device:CPU:0", "CPU", 1, a, NULL, 0), ZF_OK);
    assert_string_equal(a, "/job:localhost/replica:0/task:0/device:CPU:0");
    /* Task 0 of /job:worker is taken by a named executor: the next is 1. */
    assert_int_equal(s_register(f, "/job:worker/task:0/device:CPU:3", "CPU", 2, b, NULL, 0), ZF_OK);
    assert_string_equal(b, "/job:worker/replica:0/task:0/device:CPU:3");
    assert_int_equal(s_register(f, "/device:GPU:1", "GPU", 3, c, NULL, 0), ZF_OK);
    assert_string_equal(c, "/job:worker/replica:0/task:1/device:GPU:1");
}

static void test_registry_rejects_bad_registrations_naming_the_field(void **state)
{
    s_fixture_t *f = *state;
    char name[ZF_DEVICE_NAME_MAX] = "x", msg[256];
    assert_int_equal(s_register(f, "/job:a/task:0/bad:1", "CPU", 1, name, msg, sizeof msg),
                     ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "device name: Malformed device specification"));
    assert_string_equal(name, "");
    assert_int_equal(s_register(f, "/device:GPU:0", "CPU", 1, name, msg, sizeof msg),
                     ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "has type GPU but device_type is CPU"));
    assert_int_equal(s_register(f, "", "9PU", 1, name, msg, sizeof msg), ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "device_type '9PU' is not a device type"));
    assert_int_equal(s_register(f, "", "CPU", 0, name, msg, sizeof msg), ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "incarnation must not be 0"));
    s_info_t i;
    s_info_init(&i, "", "CPU", 5);
    i.info.control_endpoint = "";
    zf_status_t s = zf_registry_register(f->reg, &i.info, name, sizeof name);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), "control_endpoint is empty");
    zf_status_clear(&s);
    char long_endpoint[1100];
    memset(long_endpoint, 'a', sizeof long_endpoint - 1);
    long_endpoint[sizeof long_endpoint - 1] = '\0';
    i.info.control_endpoint = long_endpoint;
    s = zf_registry_register(f->reg, &i.info, name, sizeof name);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s),
                        "an endpoint or the host_id is longer than 1024 characters");
    zf_status_clear(&s);
    i.info.device = NULL;
    s = zf_registry_register(f->reg, &i.info, name, sizeof name);
    assert_string_equal(zf_status_msg(&s), "executor info has no device");
    zf_status_clear(&s);
    assert_int_equal(zf_registry_count(f->reg), 0);
    assert_int_equal(f->n_events, 0);
}

static void test_registry_refuses_a_live_name_with_the_same_incarnation(void **state)
{
    s_fixture_t *f = *state;
    const char *n = "/job:w/replica:0/task:0/device:CPU:0";
    char name[ZF_DEVICE_NAME_MAX], msg[256];
    assert_int_equal(s_register(f, n, "CPU", 7, name, NULL, 0), ZF_OK);
    assert_int_equal(s_register(f, n, "CPU", 7, name, msg, sizeof msg), ZF_ALREADY_EXISTS);
    assert_string_equal(msg, "device '/job:w/replica:0/task:0/device:CPU:0' is already "
                             "registered by a live executor with the same incarnation");
    assert_int_equal(zf_registry_count(f->reg), 1);
    assert_int_equal(f->n_events, 1);
}

static void test_registry_replaces_a_restarted_executor_dying_then_joining(void **state)
{
    s_fixture_t *f = *state;
    const char *n = "/job:w/replica:0/task:0/device:CPU:0";
    char name[ZF_DEVICE_NAME_MAX];
    assert_int_equal(s_register(f, n, "CPU", 7, name, NULL, 0), ZF_OK);
    assert_int_equal(s_register(f, n, "CPU", 8, name, NULL, 0), ZF_OK);
    assert_int_equal(zf_registry_count(f->reg), 1);
    assert_int_equal(zf_registry_find(f->reg, n)->device->incarnation, 8);
    assert_int_equal(f->n_events, 3);
    assert_int_equal(f->events[1].kind, ZF_REGISTRY_DIED);
    assert_int_equal(f->events[1].incarnation, 7);
    assert_string_equal(f->events[1].reason, "restarted with a new incarnation 0x0000000000000008");
    assert_int_equal(f->events[2].kind, ZF_REGISTRY_JOINED);
    assert_int_equal(f->events[2].incarnation, 8);
    /* The old incarnation's heartbeats are refused. */
    zf_status_t s = zf_registry_heartbeat(f->reg, n, 7, 0);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_non_null(strstr(zf_status_msg(&s), "registered with incarnation 0x0000000000000008, "
                                              "not 0x0000000000000007"));
    zf_status_clear(&s);
}

/* keep_live (a secure broker): a live name is never taken over, also when
 * it is asked for in a partial form that completes to it. */
static void test_registry_keeping_live_names_refuses_another_incarnation(void **state)
{
    s_fixture_t *f = *state;
    zf_registry_destroy(&f->reg);
    zf_registry_config_t cfg = {100, 3, s_clock, f, true};
    assert_int_equal(zf_registry_new(&cfg, &f->reg).code, ZF_OK);
    zf_registry_set_listener(f->reg, s_listen, f);
    const char *n = "/job:w/replica:0/task:0/device:CPU:0";
    const char *forms[] = {n, "/job:w/task:0/device:CPU:0"};
    char name[ZF_DEVICE_NAME_MAX], msg[256];
    assert_int_equal(s_register(f, n, "CPU", 7, name, NULL, 0), ZF_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(s_register(f, forms[i], "CPU", 8, name, msg, sizeof msg),
                         ZF_ALREADY_EXISTS);
        assert_string_equal(msg, "device '/job:w/replica:0/task:0/device:CPU:0' is held by a "
                                 "live executor (incarnation 0x0000000000000007); it can be "
                                 "registered again once that one has missed 3 heartbeats");
        assert_string_equal(name, "");
    }
    assert_int_equal(zf_registry_find(f->reg, n)->device->incarnation, 7);
    assert_int_equal(f->n_events, 1);
    /* once the holder is dead the name is free again */
    f->now += 301;
    assert_int_equal(zf_registry_expire(f->reg), 1);
    assert_int_equal(s_register(f, forms[1], "CPU", 8, name, NULL, 0), ZF_OK);
    assert_string_equal(name, n);
}

static void test_registry_heartbeats_update_load_and_keep_executors_alive(void **state)
{
    s_fixture_t *f = *state;
    char name[ZF_DEVICE_NAME_MAX];
    assert_int_equal(s_register(f, "", "CPU", 9, name, NULL, 0), ZF_OK);
    for (int i = 0; i < 5; i++) {
        f->now += 250;
        zf_status_t s = zf_registry_heartbeat(f->reg, name, 9, 40 + i);
        assert_int_equal(s.code, ZF_OK);
        assert_int_equal(zf_registry_expire(f->reg), 0);
    }
    f->now += 20;
    Zflow__ExecutorInfo **list = NULL;
    size_t n = 0;
    assert_int_equal(zf_registry_list(f->reg, &list, &n).code, ZF_OK);
    assert_int_equal(n, 1);
    assert_string_equal(list[0]->device->name, name);
    assert_int_equal(list[0]->load, 44);
    assert_int_equal(list[0]->ms_since_heartbeat, 20);
    zf_registry_list_free(list, n);
    zf_status_t s = zf_registry_heartbeat(f->reg, "/job:x/replica:0/task:0/device:CPU:0", 9, 0);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_string_equal(zf_status_msg(&s),
                        "device '/job:x/replica:0/task:0/device:CPU:0' is not registered");
    zf_status_clear(&s);
}

static void test_registry_expires_an_executor_after_the_missed_heartbeats(void **state)
{
    s_fixture_t *f = *state;
    char a[ZF_DEVICE_NAME_MAX], b[ZF_DEVICE_NAME_MAX];
    assert_int_equal(zf_registry_next_expiry_ms(f->reg), -1);
    assert_int_equal(s_register(f, "", "CPU", 1, a, NULL, 0), ZF_OK);
    f->now += 100;
    assert_int_equal(s_register(f, "", "CPU", 2, b, NULL, 0), ZF_OK);
    assert_int_equal(zf_registry_next_expiry_ms(f->reg), 201);
    f->now += 200; /* a silent for exactly 300 ms: still alive */
    assert_int_equal(zf_registry_expire(f->reg), 0);
    f->now += 5;
    assert_int_equal(zf_registry_expire(f->reg), 1);
    assert_null(zf_registry_find(f->reg, a));
    assert_non_null(zf_registry_find(f->reg, b));
    assert_int_equal(f->events[2].kind, ZF_REGISTRY_DIED);
    assert_string_equal(f->events[2].name, a);
    assert_string_equal(f->events[2].reason, "no heartbeat for 305 ms");
    assert_int_equal(zf_registry_next_expiry_ms(f->reg), 96);
    zf_status_t s = zf_registry_heartbeat(f->reg, a, 1, 0);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    zf_status_clear(&s);
    /* The expired executor registers again under its assigned name. */
    assert_int_equal(s_register(f, a, "CPU", 1, a, NULL, 0), ZF_OK);
    assert_int_equal(zf_registry_count(f->reg), 2);
}

static void test_registry_refuses_bad_settings(void **state)
{
    (void)state;
    zf_registry_t *reg = (zf_registry_t *)1;
    zf_registry_config_t cfg = {0, 3, NULL, NULL, false};
    zf_status_t s = zf_registry_new(&cfg, &reg);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_null(reg);
    zf_status_clear(&s);
    zf_registry_destroy(&reg);
    zf_registry_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
        T(test_registry_assigns_a_new_task_to_each_unnamed_executor),
        T(test_registry_keeps_given_names_and_completes_partial_ones),
        T(test_registry_rejects_bad_registrations_naming_the_field),
        T(test_registry_refuses_a_live_name_with_the_same_incarnation),
        T(test_registry_replaces_a_restarted_executor_dying_then_joining),
        T(test_registry_keeping_live_names_refuses_another_incarnation),
        T(test_registry_heartbeats_update_load_and_keep_executors_alive),
        T(test_registry_expires_an_executor_after_the_missed_heartbeats),
        cmocka_unit_test(test_registry_refuses_bad_settings),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
