/* Tests of the zflow CLI's service paths as real processes: `zflow run`
 * with an embedded local cluster and with --broker against `zflow up`,
 * compared with `zflow run --inprocess`. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/cluster.h"
#include "common/graphdef_io.h"
#include "process_test_util.h"
#include "test_util.h"

#define ZFLOW   ZF_BIN_DIR "/zflow"
#define MLP     ZF_TEST_DATA_DIR "/../../examples/mlp.pbtxt"
#define FEED    "x=[[1,2,3,4],[0.5,-1,2,0]]"
#define WAIT_MS 30000

/* Runs argv to completion within WAIT_MS; its stdout into out. Exit code. */
static int s_capture(const char *const *argv, char *out, size_t size)
{
    int fd = -1;
    pid_t pid = zf_test_spawn_piped(argv, &fd, NULL);
    int64_t deadline = zf_test_now_ms() + WAIT_MS;
    zf_test_drain(fd, out, size, deadline);
    close(fd);
    return zf_test_reap(pid, deadline);
}

static void test_cli_run_on_an_embedded_cluster_prints_what_inprocess_prints(void **state)
{
    (void)state;
    static char want[8192], got[8192];
    const char *inproc[] = {ZFLOW, "run",     MLP,           "--inprocess", "--feed",
                            FEED,  "--fetch", "layer1/relu", "probs",       NULL};
    const char *cluster[] = {ZFLOW,     "run",         MLP,     "--feed", FEED,
                             "--fetch", "layer1/relu", "probs", NULL};
    assert_int_equal(s_capture(inproc, want, sizeof want), 0);
    assert_non_null(strstr(want, "probs =\n[[0.1978161  0.8021839 ]"));
    assert_int_equal(s_capture(cluster, got, sizeof got), 0);
    assert_string_equal(got, want);
}

static void test_cli_run_on_two_devices_with_pinned_nodes_prints_what_inprocess_prints(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(MLP, ZF_FORMAT_AUTO, &gd));
    for (size_t i = 0; i < gd->n_node; i++) { /* layer2 and probs on the second CPU */
        Tensorflow__NodeDef *n = gd->node[i];
        if (strncmp(n->name, "layer2/", 7) != 0 && strcmp(n->name, "probs") != 0) continue;
        if (n->device != protobuf_c_empty_string) free(n->device);
        n->device = strdup("/job:localhost/replica:0/task:0/device:CPU:1");
        assert_non_null(n->device);
    }
    char path[] = "/tmp/zflow-cli-cluster-XXXXXX.pbtxt";
    int fd = mkstemps(path, 6);
    assert_true(fd >= 0);
    close(fd);
    ASSERT_OK(zf_graphdef_write_file(gd, path, ZF_FORMAT_PBTXT));
    zf_graphdef_free(&gd);
    static char want[8192], got[8192];
    const char *inproc[] = {ZFLOW,    "run", path,      "--inprocess", "--devices", "cpu:2",
                            "--feed", FEED,  "--fetch", "probs",       NULL};
    const char *cluster[] = {ZFLOW,    "run", path,      "--devices", "cpu:2",
                             "--feed", FEED,  "--fetch", "probs",     NULL};
    int rc_want = s_capture(inproc, want, sizeof want);
    int rc_got = s_capture(cluster, got, sizeof got);
    unlink(path);
    assert_int_equal(rc_want, 0);
    assert_int_equal(rc_got, 0);
    assert_non_null(strstr(want, "probs =\n"));
    assert_string_equal(got, want);
}

/* `zflow up --port 0`: serves `zflow run --broker`, and stops on SIGTERM
 * with exit 0, after which its broker no longer answers. */
static void test_cli_up_serves_runs_and_stops_cleanly_on_sigterm(void **state)
{
    (void)state;
    const char *up[] = {ZFLOW, "up", "--port", "0", "--cpu", "2", NULL};
    int fd = -1;
    pid_t pid = zf_test_spawn_piped(up, &fd, NULL);
    char line[512];
    if (!zf_test_read_line(fd, line, sizeof line, WAIT_MS)) line[0] = '\0';
    const char *prefix = "zflow cluster listening on ";
    char endpoint[256] = "";
    if (strncmp(line, prefix, strlen(prefix)) == 0)
        sscanf(line + strlen(prefix), "%255s", endpoint);
    static char want[8192], got[8192];
    const char *inproc[] = {ZFLOW, "run",     MLP,     "--inprocess", "--feed",
                            FEED,  "--fetch", "probs", NULL};
    const char *remote[] = {ZFLOW,    "run", MLP,       "--broker", endpoint,
                            "--feed", FEED,  "--fetch", "probs",    NULL};
    int rc_got = endpoint[0] ? s_capture(remote, got, sizeof got) : -1;
    kill(pid, SIGTERM);
    int rc_up = zf_test_reap(pid, zf_test_now_ms() + WAIT_MS);
    char rest[256];
    ssize_t r = read(fd, rest, sizeof rest - 1);
    rest[r > 0 ? r : 0] = '\0';
    close(fd);
    assert_non_null(strstr(line, "(cpu:2, 4 processes)"));
    assert_int_equal(rc_got, 0);
    assert_int_equal(s_capture(inproc, want, sizeof want), 0);
    assert_string_equal(got, want);
    assert_int_equal(rc_up, 0);
    assert_string_equal(rest, "zflow cluster stopped\n");
    const char *list[] = {ZFLOW, "executors", "--broker", endpoint, "--timeout-ms", "300", NULL};
    assert_int_equal(s_capture(list, got, sizeof got), 1);
}

static void test_cli_run_rejects_broker_with_inprocess_or_devices(void **state)
{
    (void)state;
    static char out[1024];
    const char *both[] = {ZFLOW,         "run",     MLP,     "--broker", "tcp://127.0.0.1:1",
                          "--inprocess", "--fetch", "probs", NULL};
    assert_int_equal(s_capture(both, out, sizeof out), 2);
    const char *devs[] = {ZFLOW,       "run",   MLP,       "--broker", "tcp://127.0.0.1:1",
                          "--devices", "cpu:2", "--fetch", "probs",    NULL};
    assert_int_equal(s_capture(devs, out, sizeof out), 2);
    const char *zero[] = {ZFLOW, "run", MLP, "--timeout-ms", "0", "--fetch", "probs", NULL};
    assert_int_equal(s_capture(zero, out, sizeof out), 2);
    const char *bad_up[] = {ZFLOW, "up", "--port", "99999", NULL};
    assert_int_equal(s_capture(bad_up, out, sizeof out), 2);
}

/* No broker at --broker: exit 1 after --timeout-ms, not the default 60 s. */
static void test_cli_run_without_a_broker_fails_after_its_timeout(void **state)
{
    (void)state;
    static char out[1024];
    const char *argv[] = {
        ZFLOW, "run",     MLP,     "--broker", "tcp://127.0.0.1:1", "--feed", FEED, "--timeout-ms",
        "300", "--fetch", "probs", NULL};
    int64_t t0 = zf_test_now_ms();
    assert_int_equal(s_capture(argv, out, sizeof out), 1);
    int64_t took = zf_test_now_ms() - t0;
    assert_true(took >= 250 && took < 10000);
    assert_string_equal(out, "");
}

/* An executor that cannot start (a device type no build has) fails the
 * start, and the broker and the executor started before it are stopped and
 * reaped: this process has no child left. */
static void test_cluster_start_failing_midway_leaves_no_process_behind(void **state)
{
    (void)state;
    zf_cluster_t *c = NULL;
    zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
    o.bin_dir = ZF_BIN_DIR;
    o.devices = "cpu:1,tpu:1";
    o.quiet = true;
    zf_test_expect_error(zf_cluster_start(&o, &c), ZF_UNAVAILABLE,
                         "starting a local cluster: zflow-executor TPU:0 exited while starting");
    assert_null(c);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_run_on_an_embedded_cluster_prints_what_inprocess_prints),
        cmocka_unit_test(
            test_cli_run_on_two_devices_with_pinned_nodes_prints_what_inprocess_prints),
        cmocka_unit_test(test_cli_up_serves_runs_and_stops_cleanly_on_sigterm),
        cmocka_unit_test(test_cli_run_rejects_broker_with_inprocess_or_devices),
        cmocka_unit_test(test_cli_run_without_a_broker_fails_after_its_timeout),
        cmocka_unit_test(test_cluster_start_failing_midway_leaves_no_process_behind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
