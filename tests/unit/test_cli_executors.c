/* Tests for `zflow executors`: the real command against a real broker with
 * fake executors registered over DEALER sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "broker_test_util.h"

typedef struct s_run {
    int rc;
    char out[8192];
} s_run_t;

/* Runs "[env] zflow executors <args>" with stderr folded into the output. */
static void s_zflow(s_run_t *r, const char *env, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s/zflow executors %s 2>&1", env, ZF_BIN_DIR, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    int status = pclose(p);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

typedef struct s_fixture {
    zf_test_broker_t tb;
    zf_zctx_t *ctx;
    zf_socket_t *ex[2];
} s_fixture_t;

/* Long heartbeats: the fake executors must not expire during a test. */
static const char *const s_slow_heartbeats[] = {"--heartbeat-ms", "10000", NULL};

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    *state = f;
    zf_test_broker_start(&f->tb, s_slow_heartbeats);
    assert_int_equal(zf_zctx_new(&f->ctx).code, ZF_OK);
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    for (int i = 0; i < 2; i++) zf_socket_destroy(&f->ex[i]);
    zf_zctx_destroy(&f->ctx);
    int rc = zf_test_broker_stop(&f->tb, SIGTERM);
    free(f);
    assert_true(rc == 0 || rc == -1);
    return 0;
}

static void s_register_two(s_fixture_t *f)
{
    f->ex[0] = zf_test_dealer(f->ctx, f->tb.endpoint);
    f->ex[1] = zf_test_dealer(f->ctx, f->tb.endpoint);
    Zflow__Envelope *r = zf_test_register_executor(f->ex[0], 1, "", "CPU", 3,
                                                   "tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002");
    assert_int_equal(r->register_executor_reply->status->code, ZF_OK);
    zflow__envelope__free_unpacked(r, NULL);
    r = zf_test_register_executor(f->ex[1], 1, "/job:localhost/replica:0/task:0/device:GPU:1",
                                  "GPU", 4, "tcp://127.0.0.1:7003", "tcp://127.0.0.1:7004");
    assert_int_equal(r->register_executor_reply->status->code, ZF_OK);
    zflow__envelope__free_unpacked(r, NULL);
    assert_int_equal(
        zf_test_heartbeat(f->ex[1], 2, "/job:localhost/replica:0/task:0/device:GPU:1", 4, 17),
        ZF_OK);
}

/* Checks one output line: line is want with the heartbeat age (which
 * varies) written as "heartbeat=Nms"; the age must be a small number. */
static void s_expect_line(const char *line, size_t len, const char *before, const char *after)
{
    char got[512];
    assert_true(len < sizeof got);
    memcpy(got, line, len);
    got[len] = '\0';
    size_t nb = strlen(before), na = strlen(after);
    if (len < nb + na || memcmp(got, before, nb) != 0 || strcmp(got + len - na, after) != 0)
        fail_msg("line '%s' is not '%sNms%s'", got, before, after);
    char *end = NULL;
    long age = strtol(got + nb, &end, 10);
    assert_ptr_equal(end, got + len - na);
    assert_true(age >= 0 && age < 5000);
}

static void test_cli_executors_prints_one_line_per_live_device(void **state)
{
    s_fixture_t *f = *state;
    s_register_two(f);
    char args[512];
    snprintf(args, sizeof args, "--broker %s", f->tb.endpoint);
    s_run_t r;
    s_zflow(&r, "", args);
    assert_int_equal(r.rc, 0);
    char *nl1 = strchr(r.out, '\n');
    assert_non_null(nl1);
    char *nl2 = strchr(nl1 + 1, '\n');
    assert_non_null(nl2);
    assert_string_equal(nl2 + 1, "");
    s_expect_line(r.out, (size_t)(nl1 - r.out),
                  "/job:worker/replica:0/task:0/device:CPU:0 CPU load=0 heartbeat=",
                  "ms control=tcp://127.0.0.1:7001 rendezvous=tcp://127.0.0.1:7002");
    s_expect_line(nl1 + 1, (size_t)(nl2 - nl1 - 1),
                  "/job:localhost/replica:0/task:0/device:GPU:1 GPU load=17 heartbeat=",
                  "ms control=tcp://127.0.0.1:7003 rendezvous=tcp://127.0.0.1:7004");
}

static void test_cli_executors_reads_the_broker_from_the_environment(void **state)
{
    s_fixture_t *f = *state;
    char env[512];
    snprintf(env, sizeof env, "ZFLOW_BROKER=%s", f->tb.endpoint);
    s_run_t r;
    s_zflow(&r, env, "");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "no executors are registered\n");
}

static void test_cli_executors_exits_1_when_no_broker_answers(void **state)
{
    (void)state;
    s_run_t r;
    s_zflow(&r, "", "--broker tcp://127.0.0.1:1 --timeout-ms 300");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out, "zflow executors: UNAVAILABLE: no answer from the broker at "
                               "tcp://127.0.0.1:1 within 300 ms\n");
}

static void test_cli_executors_answers_bad_usage_with_exit_code_2(void **state)
{
    (void)state;
    s_run_t r;
    s_zflow(&r, "", "--timeout-ms soon");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.out, "--timeout-ms must be a positive number, not 'soon'"));
    s_zflow(&r, "", "--broker");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.out, "unexpected argument '--broker'"));
    s_zflow(&r, "", "--broker not-an-endpoint --timeout-ms 300");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.out, "zflow executors: INVALID_ARGUMENT: cannot connect to "
                                  "'not-an-endpoint'"));
    s_zflow(&r, "", "--help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "usage: zflow executors"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_executors_prints_one_line_per_live_device, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_executors_reads_the_broker_from_the_environment,
                                        s_setup, s_teardown),
        cmocka_unit_test(test_cli_executors_exits_1_when_no_broker_answers),
        cmocka_unit_test(test_cli_executors_answers_bad_usage_with_exit_code_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
