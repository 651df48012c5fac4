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
#include "broker_test_util.h"
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

/* ---- zflow up's supervision --------------------------------------------------- */

/* The pid of zflow up's child whose command line contains needle, 0 when
 * none (read from /proc: the children of up's main thread). */
static pid_t s_child_with(pid_t up, const char *needle)
{
    char path[64], list[1024] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)up, (int)up);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(list, 1, sizeof list - 1, f);
    list[n] = '\0';
    fclose(f);
    char *save = NULL;
    for (char *tok = strtok_r(list, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        char cmd[1024] = "";
        snprintf(path, sizeof path, "/proc/%s/cmdline", tok);
        FILE *c = fopen(path, "r");
        if (!c) continue;
        size_t len = fread(cmd, 1, sizeof cmd - 1, c);
        fclose(c);
        for (size_t i = 0; i < len; i++)
            if (cmd[i] == '\0') cmd[i] = ' ';
        cmd[len] = '\0';
        if (strstr(cmd, needle)) return (pid_t)atol(tok);
    }
    return 0;
}

/* Waits up to WAIT_MS for a child with needle other than old; 0 if none. */
static pid_t s_new_child_with(pid_t up, const char *needle, pid_t old)
{
    for (int64_t deadline = zf_test_now_ms() + WAIT_MS; zf_test_now_ms() < deadline;) {
        pid_t p = s_child_with(up, needle);
        if (p > 0 && p != old) return p;
        usleep(20000);
    }
    return 0;
}

/* `zflow up --cpu 2` on a free port, with --state state when it is not
 * NULL; *endpoint gets the broker's address. */
static pid_t s_up(int *out_fd, int *err_fd, char *endpoint, size_t size, const char *state)
{
    const char *up[] = {ZFLOW, "up", "--port", "0", "--cpu", "2", "--state", state, NULL};
    if (!state) up[6] = NULL;
    pid_t pid = zf_test_spawn_piped(up, out_fd, err_fd);
    char line[512];
    if (!zf_test_read_line(*out_fd, line, sizeof line, WAIT_MS)) line[0] = '\0';
    const char *prefix = "zflow cluster listening on ";
    endpoint[0] = '\0';
    if (strncmp(line, prefix, strlen(prefix)) == 0) {
        const char *at = line + strlen(prefix);
        size_t len = strcspn(at, " ");
        if (len < size) {
            memcpy(endpoint, at, len);
            endpoint[len] = '\0';
        }
    }
    return pid;
}

/* Stops zflow up with SIGTERM and closes its pipes; its stderr so far into
 * log. Its exit code. */
static int s_stop_up(pid_t up, int out, int err, char *log, size_t size)
{
    kill(up, SIGTERM);
    int rc = zf_test_reap(up, zf_test_now_ms() + WAIT_MS);
    zf_test_drain(err, log, size, zf_test_now_ms() + WAIT_MS);
    close(out);
    close(err);
    return rc;
}

/* TensorFlow's while loop counting to 10, its Exit pinned to CPU:1. */
static void s_pinned_loop(char *path)
{
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(ZF_TF_DATA_DIR "/graph-while-loop.pbtxt", ZF_FORMAT_AUTO, &gd));
    for (size_t i = 0; i < gd->n_node; i++) {
        Tensorflow__NodeDef *n = gd->node[i];
        if (strcmp(n->name, "while/Exit") != 0) continue;
        if (n->device != protobuf_c_empty_string) free(n->device);
        n->device = strdup("/job:localhost/replica:0/task:0/device:CPU:1");
    }
    int fd = mkstemps(path, 6);
    assert_true(fd >= 0);
    close(fd);
    ASSERT_OK(zf_graphdef_write_file(gd, path, ZF_FORMAT_PBTXT));
    zf_graphdef_free(&gd);
}

/* Runs the pinned loop on endpoint until it prints its value (the executor
 * may still be coming back), at most WAIT_MS. */
static bool s_loop_runs(const char *path, const char *endpoint)
{
    const char *run[] = {ZFLOW, "run", path, "--broker", endpoint, "--fetch", "while/Exit", NULL};
    static char out[4096];
    for (int64_t deadline = zf_test_now_ms() + WAIT_MS; zf_test_now_ms() < deadline;) {
        if (s_capture(run, out, sizeof out) == 0 && strcmp(out, "while/Exit =\n10\n") == 0)
            return true;
        usleep(100000);
    }
    return false;
}

static void test_cli_up_starts_a_killed_executor_again_under_its_name(void **state)
{
    (void)state;
    int out = -1, err = -1;
    char endpoint[256], path[] = "/tmp/zflow-up-loop-XXXXXX.pbtxt";
    s_pinned_loop(path);
    pid_t up = s_up(&out, &err, endpoint, sizeof endpoint, NULL);
    bool before = endpoint[0] && s_loop_runs(path, endpoint);
    pid_t ex = s_child_with(up, "--device CPU:1");
    bool killed = ex > 0 && kill(ex, SIGKILL) == 0;
    pid_t again = killed ? s_new_child_with(up, "--device CPU:1", ex) : 0;
    bool after = again > 0 && s_loop_runs(path, endpoint);
    static char log[1 << 16];
    int rc = s_stop_up(up, out, err, log, sizeof log);
    unlink(path);
    assert_true(before);
    assert_true(killed);
    assert_true(again > 0);
    assert_true(after);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(log, "zflow up: zflow-executor CPU:1 was killed by signal 9; starting "
                                "it again in 100 ms (restart 1 of 5 within 60 s)"));
    assert_non_null(strstr(log, "zflow up: zflow-executor CPU:1 started again: zflow-executor "
                                "/job:localhost/replica:0/task:0/device:CPU:1 control"));
    /* the broker took the dead one out at once, not after missed heartbeats */
    assert_non_null(strstr(log, "executor /job:localhost/replica:0/task:0/device:CPU:1 died: its "
                                "connection to the broker closed"));
    assert_null(strstr(log, "no heartbeat for"));
}

/* zflow up --state: a job accepted before its broker is killed is returned
 * by the broker zflow up starts again, under the same id. */
static void test_cli_up_with_a_state_directory_keeps_jobs_through_a_killed_broker(void **state)
{
    (void)state;
    char dir[64], endpoint[256], id[128] = "";
    zf_test_state_dir(dir, sizeof dir);
    int out = -1, err = -1;
    pid_t up = s_up(&out, &err, endpoint, sizeof endpoint, dir);
    static char got[8192];
    const char *submit[] = {ZFLOW,    "submit", MLP,       "--broker", endpoint,
                            "--feed", FEED,     "--fetch", "probs",    NULL};
    int rc_submit = endpoint[0] ? s_capture(submit, got, sizeof got) : -1;
    sscanf(got, "%127s", id);
    pid_t broker = s_child_with(up, "zflow-broker");
    bool killed = broker > 0 && kill(broker, SIGKILL) == 0;
    pid_t again = killed ? s_new_child_with(up, "zflow-broker", broker) : 0;
    const char *wait[] = {ZFLOW, "wait", id, "--broker", endpoint, NULL};
    int rc_wait = -1; /* UNAVAILABLE while the new broker starts */
    for (int64_t end = zf_test_now_ms() + WAIT_MS;
         again > 0 && rc_wait != 0 && zf_test_now_ms() < end; usleep(200000))
        rc_wait = s_capture(wait, got, sizeof got);
    static char log[1 << 16];
    int rc = s_stop_up(up, out, err, log, sizeof log);
    zf_test_state_dir_remove(dir);
    assert_int_equal(rc_submit, 0);
    assert_memory_equal(id, "job-", 4);
    assert_true(killed);
    assert_true(again > 0);
    assert_int_equal(rc_wait, 0);
    assert_non_null(strstr(got, "probs =\n[[0.1978161  0.8021839 ]"));
    assert_int_equal(rc, 0);
    assert_non_null(strstr(log, "zflow up: zflow-broker was killed by signal 9"));
}

/* A process that keeps dying stops the cluster: the sixth death within a
 * minute is not restarted, and zflow up exits 1 saying so. */
static void test_cli_up_gives_up_on_a_process_that_keeps_dying(void **state)
{
    (void)state;
    int out = -1, err = -1;
    char endpoint[256];
    pid_t up = s_up(&out, &err, endpoint, sizeof endpoint, NULL);
    pid_t ex = endpoint[0] ? s_child_with(up, "--device CPU:0") : 0;
    int kills = 0;
    for (; ex > 0 && kills < 6; kills++) {
        kill(ex, SIGKILL);
        ex = kills < 5 ? s_new_child_with(up, "--device CPU:0", ex) : 0;
    }
    int rc = zf_test_reap(up, zf_test_now_ms() + WAIT_MS);
    static char log[1 << 16];
    zf_test_drain(err, log, sizeof log, zf_test_now_ms() + WAIT_MS);
    close(out);
    close(err);
    assert_int_equal(kills, 6);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(log, "(restart 5 of 5 within 60 s)"));
    assert_non_null(strstr(log, "zflow up: zflow-executor CPU:0 keeps dying: it was killed by "
                                "signal 9 after 5 restarts within 60 s; stopping the cluster"));
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
        cmocka_unit_test(test_cli_up_starts_a_killed_executor_again_under_its_name),
        cmocka_unit_test(test_cli_up_with_a_state_directory_keeps_jobs_through_a_killed_broker),
        cmocka_unit_test(test_cli_up_gives_up_on_a_process_that_keeps_dying),
        cmocka_unit_test(test_cli_run_rejects_broker_with_inprocess_or_devices),
        cmocka_unit_test(test_cli_run_without_a_broker_fails_after_its_timeout),
        cmocka_unit_test(test_cluster_start_failing_midway_leaves_no_process_behind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
