/* Tests of asynchronous jobs as real processes: `zflow submit` and `zflow
 * wait` against a `zflow up` cluster on 127.0.0.1, zf_client_poll and
 * zf_client_wait_result, multi-step jobs, and the progress line on a
 * terminal (a pseudo-terminal here). */
#define _XOPEN_SOURCE 700 /* posix_openpt */
#include <fcntl.h>
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

#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "process_test_util.h"
#include "test_util.h"

#define ZFLOW   ZF_BIN_DIR "/zflow"
#define MLP     ZF_TEST_DATA_DIR "/../../examples/mlp.pbtxt"
#define COUNTER ZF_TEST_DATA_DIR "/counter.pbtxt"
#define FEED    "x=[[1,2,3,4],[0.5,-1,2,0]]"
#define WAIT_MS 60000

static char s_endpoint[256]; /* the cluster's broker; also $ZFLOW_BROKER */
static pid_t s_up = -1;

/* Runs argv to completion; stdout into out, stderr into err. Exit code. */
static int s_run(const char *const *argv, char *out, size_t out_size, char *err, size_t err_size)
{
    int ofd = -1, efd = -1;
    pid_t pid = zf_test_spawn_piped(argv, &ofd, &efd);
    int64_t deadline = zf_test_now_ms() + WAIT_MS;
    zf_test_drain(ofd, out, out_size, deadline); /* stderr is small: the pipe holds it */
    zf_test_drain(efd, err, err_size, deadline);
    close(ofd);
    close(efd);
    return zf_test_reap(pid, deadline);
}

/* Runs argv on a pseudo-terminal (its stdout and stderr); everything it
 * wrote into out. Exit code. */
static int s_run_on_pty(const char *const *argv, char *out, size_t size)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    const char *slave_name = ptsname(master);
    assert_non_null(slave_name);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setsid();
        int slave = open(slave_name, O_RDWR);
        if (slave < 0) _exit(126);
        dup2(slave, STDOUT_FILENO);
        dup2(slave, STDERR_FILENO);
        close(master);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int64_t deadline = zf_test_now_ms() + WAIT_MS;
    zf_test_drain(master, out, size, deadline); /* read() fails with EIO once the child is gone */
    close(master);
    return zf_test_reap(pid, deadline);
}

/* `zflow submit` with argv's options; the job id it printed (caller
 * frees). */
static char *s_submit(const char *const *argv)
{
    static char out[1024], err[4096];
    int rc = s_run(argv, out, sizeof out, err, sizeof err);
    if (rc != 0) fail_msg("zflow submit exited %d: %s", rc, err);
    size_t len = strlen(out);
    assert_true(len > 1 && out[len - 1] == '\n');
    out[len - 1] = '\0';
    assert_null(strchr(out, '\n'));
    assert_null(strchr(out, ' '));
    assert_non_null(strstr(out, "job-"));
    return strdup(out);
}

/* ---- the cluster ------------------------------------------------------------- */

static int s_setup(void **state)
{
    (void)state;
    s_up = zf_test_up_start(ZFLOW, 2, s_endpoint, sizeof s_endpoint, WAIT_MS);
    if (s_up < 0) return -1;
    return setenv("ZFLOW_BROKER", s_endpoint, 1);
}

static int s_teardown(void **state)
{
    (void)state;
    if (s_up <= 0) return 0;
    kill(s_up, SIGTERM); /* and it exits 0: every process of it stopped cleanly */
    return zf_test_reap(s_up, zf_test_now_ms() + WAIT_MS) == 0 ? 0 : -1;
}

/* ---- tests ------------------------------------------------------------------- */

static void test_cli_wait_prints_what_run_inprocess_prints_and_collects_once(void **state)
{
    (void)state;
    static char want[8192], got[8192], err[4096];
    const char *inproc[] = {ZFLOW, "run",     MLP,           "--inprocess", "--feed",
                            FEED,  "--fetch", "layer1/relu", "probs",       NULL};
    assert_int_equal(s_run(inproc, want, sizeof want, err, sizeof err), 0);
    assert_non_null(strstr(want, "probs =\n[[0.1978161  0.8021839 ]"));
    const char *submit[] = {ZFLOW, "submit",  MLP,           "--broker", s_endpoint, "--feed",
                            FEED,  "--fetch", "layer1/relu", "probs",    NULL};
    char *id = s_submit(submit);
    const char *wait[] = {ZFLOW, "wait", id, NULL}; /* the broker from $ZFLOW_BROKER */
    assert_int_equal(s_run(wait, got, sizeof got, err, sizeof err), 0);
    assert_string_equal(got, want);
    assert_string_equal(err, "");

    assert_int_equal(s_run(wait, got, sizeof got, err, sizeof err), 1);
    assert_string_equal(got, "");
    char expect[512];
    snprintf(expect, sizeof expect, "zflow wait: NOT_FOUND: job '%s' not found: ", id);
    assert_true(strncmp(err, expect, strlen(expect)) == 0);
    assert_non_null(strstr(err, "already collected"));
    free(id);
}

static void test_cli_wait_on_an_unknown_job_fails_with_not_found(void **state)
{
    (void)state;
    static char out[1024], err[4096];
    const char *wait[] = {ZFLOW, "wait", "job-0-nothing", "--broker", s_endpoint, NULL};
    assert_int_equal(s_run(wait, out, sizeof out, err, sizeof err), 1);
    assert_string_equal(out, "");
    assert_non_null(strstr(err, "NOT_FOUND: job 'job-0-nothing' not found"));
    assert_non_null(strstr(err, "expired"));
}

static void test_cli_multi_step_job_returns_the_counter_after_its_steps(void **state)
{
    (void)state;
    static char want[1024], got[1024], err[4096];
    const char *inproc[] = {ZFLOW,     "run",   COUNTER,   "--inprocess", "--init", "init",
                            "--fetch", "count", "--steps", "7",           NULL};
    assert_int_equal(s_run(inproc, want, sizeof want, err, sizeof err), 0);
    assert_string_equal(want, "count =\n7.0\n");
    const char *submit[] = {ZFLOW,     "submit", COUNTER,   "--init", "init",
                            "--fetch", "count",  "--steps", "7",      NULL};
    char *id = s_submit(submit);
    const char *wait[] = {ZFLOW, "wait", id, NULL};
    assert_int_equal(s_run(wait, got, sizeof got, err, sizeof err), 0);
    assert_string_equal(got, want);
    free(id);

    const char *run[] = {ZFLOW,  "run",     COUNTER, "--broker", s_endpoint, "--init",
                         "init", "--fetch", "count", "--steps",  "7",        NULL};
    assert_int_equal(s_run(run, got, sizeof got, err, sizeof err), 0);
    assert_string_equal(got, want);
}

/* Submits the counter job with steps steps through c; its id. */
static char *s_client_submit(zf_client_t *c, int64_t steps)
{
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(COUNTER, ZF_FORMAT_AUTO, &gd));
    const char *fetches[] = {"count"}, *inits[] = {"init"};
    zf_client_step_t step = {NULL, NULL, 0, fetches, 1, NULL, 0};
    zf_client_job_options_t job = ZF_CLIENT_JOB_OPTIONS_DEFAULT;
    job.steps = steps;
    job.init_targets = inits;
    job.n_init_targets = 1;
    char *id = NULL;
    ASSERT_OK(zf_client_submit_job(c, gd, NULL, &step, &job, &id));
    zf_graphdef_free(&gd);
    return id;
}

static void s_count_progress(void *arg, const char *job_id, const zf_client_job_progress_t *p)
{
    (void)job_id;
    (void)p;
    (*(int *)arg)++;
}

static void test_client_poll_reports_the_state_and_steps_of_a_job(void **state)
{
    (void)state;
    zf_client_t *c = NULL;
    ASSERT_OK(zf_client_connect(s_endpoint, &c));
    char *id = s_client_submit(c, 200);
    zf_client_job_progress_t p = {0};
    int64_t last_done = 0, deadline = zf_test_now_ms() + WAIT_MS;
    do {
        ASSERT_OK(zf_client_poll(c, id, &p));
        assert_int_equal(p.steps_total, 200);
        assert_true(p.steps_done >= last_done && p.steps_done <= 200);
        assert_true(p.partitions_running >= 0 && p.partitions_running <= p.partitions_total);
        last_done = p.steps_done;
        usleep(5000);
    } while (p.state != ZF_CLIENT_JOB_DONE && zf_test_now_ms() < deadline);
    assert_int_equal(p.state, ZF_CLIENT_JOB_DONE);
    assert_int_equal(p.steps_done, 200);
    assert_true(p.partitions_total >= 1);
    assert_int_equal(p.partitions_running, 0);
    assert_true(p.elapsed_ms > 0);

    int calls = 0;
    zf_client_job_result_t *res = NULL;
    ASSERT_OK(zf_client_wait_result(c, id, 0, s_count_progress, &calls, &res));
    assert_true(calls >= 1);
    assert_int_equal(res->n_fetches, 1);
    assert_string_equal(res->names[0], "count");
    assert_true(*(const float *)zf_tensor_data(res->tensors[0]) == 200.0f);
    zf_client_job_result_free(&res);
    assert_null(res);
    zf_test_expect_error(zf_client_poll(c, id, &p), ZF_NOT_FOUND, "already collected");
    zf_test_expect_error(zf_client_poll(c, "", &p), ZF_INVALID_ARGUMENT, "no job id");
    free(id);
    zf_client_destroy(&c);
}

static void test_cli_wait_that_times_out_leaves_the_result_for_a_later_wait(void **state)
{
    (void)state;
    static char out[1024], err[4096];
    const char *submit[] = {ZFLOW,     "submit", COUNTER,   "--init", "init",
                            "--fetch", "count",  "--steps", "20000",  NULL};
    /* enough steps that the job is still running when the quick wait gives
     * up, even on a loaded machine under the sanitizers */
    char *id = s_submit(submit);
    const char *quick[] = {ZFLOW, "wait", id, "--timeout-ms", "100", NULL};
    assert_int_equal(s_run(quick, out, sizeof out, err, sizeof err), 1);
    assert_string_equal(out, "");
    assert_non_null(strstr(err, "zflow wait: DEADLINE_EXCEEDED: "));
    assert_non_null(strstr(err, "has not finished within 100 ms"));
    const char *wait[] = {ZFLOW, "wait", id, NULL};
    assert_int_equal(s_run(wait, out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "count =\n20000.0\n");
    free(id);
}

static void test_cli_progress_line_is_drawn_on_a_terminal_and_not_with_quiet(void **state)
{
    (void)state;
    static char out[65536];
    const char *submit[] = {ZFLOW,     "submit", COUNTER,   "--init", "init",
                            "--fetch", "count",  "--steps", "500",    NULL};
    char *id = s_submit(submit);
    const char *wait[] = {ZFLOW, "wait", id, NULL};
    assert_int_equal(s_run_on_pty(wait, out, sizeof out), 0);
    char line[256];
    snprintf(line, sizeof line, "\r\033[K%s: ", id);
    assert_non_null(strstr(out, line)); /* a drawn status line */
    const char *erased = strstr(out, "\r\033[Kcount =\r\n500.0\r\n");
    assert_non_null(erased); /* erased before the results */
    assert_string_equal(erased, "\r\033[Kcount =\r\n500.0\r\n");
    free(id);

    id = s_submit(submit);
    const char *quiet[] = {ZFLOW, "wait", id, "--quiet", NULL};
    assert_int_equal(s_run_on_pty(quiet, out, sizeof out), 0);
    assert_string_equal(out, "");
    free(id);
}

static void test_cli_submit_and_wait_answer_bad_usage_with_exit_code_2(void **state)
{
    (void)state;
    static char out[4096], err[8192];
    const char *no_fetch[] = {ZFLOW, "submit", COUNTER, NULL};
    assert_int_equal(s_run(no_fetch, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "nothing to run"));
    const char *zero[] = {ZFLOW, "submit", COUNTER, "--fetch", "count", "--steps", "0", NULL};
    assert_int_equal(s_run(zero, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "--steps must be a number from 1 to 1000000000, not '0'"));
    const char *no_broker[] = {ZFLOW, "submit", COUNTER, "--fetch", "count", "--broker", NULL};
    assert_int_equal(s_run(no_broker, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "zflow submit: --broker needs a value\nusage: zflow submit GRAPH"));
    const char *submit_ms[] = {ZFLOW, "submit",  COUNTER, "--timeout-ms",
                               "0",   "--fetch", "count", NULL};
    assert_int_equal(s_run(submit_ms, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "--timeout-ms must be a number from 1 to 2147483647, not '0'"));
    const char *bogus[] = {ZFLOW, "submit", COUNTER, "--quiet", "--fetch", "count", NULL};
    assert_int_equal(s_run(bogus, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "zflow submit: unknown option '--quiet'"));
    const char *two_graphs[] = {ZFLOW, "submit", COUNTER, COUNTER, "--fetch", "count", NULL};
    assert_int_equal(s_run(two_graphs, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "unexpected argument '" COUNTER "'"));
    const char *no_job[] = {ZFLOW, "wait", NULL};
    assert_int_equal(s_run(no_job, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "need a JOB id"));
    const char *bad_ms[] = {ZFLOW, "wait", "job-1", "--timeout-ms", "soon", NULL};
    assert_int_equal(s_run(bad_ms, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "--timeout-ms must be a number"));
    const char *help[] = {ZFLOW, "wait", "--help", NULL};
    assert_int_equal(s_run(help, out, sizeof out, err, sizeof err), 0);
    assert_true(strncmp(out, "usage: zflow wait JOB", 21) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_wait_prints_what_run_inprocess_prints_and_collects_once),
        cmocka_unit_test(test_cli_wait_on_an_unknown_job_fails_with_not_found),
        cmocka_unit_test(test_cli_multi_step_job_returns_the_counter_after_its_steps),
        cmocka_unit_test(test_client_poll_reports_the_state_and_steps_of_a_job),
        cmocka_unit_test(test_cli_wait_that_times_out_leaves_the_result_for_a_later_wait),
        cmocka_unit_test(test_cli_progress_line_is_drawn_on_a_terminal_and_not_with_quiet),
        cmocka_unit_test(test_cli_submit_and_wait_answer_bad_usage_with_exit_code_2),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
