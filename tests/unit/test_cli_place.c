/* Tests for `zflow place`: runs the real binary on graphs under tests/data
 * and checks its exact output lines and exit codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

typedef struct {
    int rc;
    char out[65536];
} s_run_t;

/* Runs "zflow place <args>"; with merge, stderr is folded into the output,
 * otherwise it is dropped. */
static void s_place(s_run_t *r, const char *args, bool merge)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/zflow place %s %s", ZF_BIN_DIR, args,
             merge ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    int status = pclose(p);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void s_assert_contains(const s_run_t *r, const char *needle)
{
    if (!strstr(r->out, needle)) fail_msg("expected '%s' in output:\n%s", needle, r->out);
}

#define S_PS    "/job:ps/replica:0/task:0/device:CPU:0"
#define S_W0    "/job:worker/replica:0/task:0/device:CPU:0"
#define S_W1    "/job:worker/replica:0/task:1/device:CPU:0"
#define S_W1B   "/job:worker/replica:0/task:1/device:CPU:1"
#define S_LOCAL "/job:localhost/replica:0/task:0/device:CPU:"
#define S_GRAPH                                                                                    \
    ZF_TEST_DATA_DIR "/placer_colocation.pbtxt --devices " S_PS "," S_W0 "," S_W1 "," S_W1B

static void test_cli_place_prints_one_line_per_node_in_graph_order(void **state)
{
    (void)state;
    s_run_t r;
    s_place(&r, S_GRAPH " --mode first", false);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "v\t" S_PS "\n"
                               "x\t" S_W1 "\n"
                               "w\t" S_W1 "\n"
                               "mm\t" S_W1 "\n"
                               "upd\t" S_PS "\n"
                               "s\t" S_W1 "\n"
                               "id\t" S_PS "\n"
                               "r\t" S_PS "\n");
}

static void test_cli_place_balances_by_reported_loads(void **state)
{
    (void)state;
    s_run_t r;
    s_place(&r,
            S_GRAPH " --load " S_PS
                    "=5 --load /job:worker/task:0=1 --load=/job:worker/task:1/cpu:0=2",
            false);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "v\t" S_PS "\n"
                               "x\t" S_W1B "\n"
                               "w\t" S_W1B "\n"
                               "mm\t" S_W1B "\n"
                               "upd\t" S_PS "\n"
                               "s\t" S_W1B "\n"
                               "id\t" S_PS "\n"
                               "r\t" S_W1B "\n");
    s_place(&r, S_GRAPH " --mode=balanced", false); /* no loads: ties break by name */
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "r\t" S_PS "\n");
}

static void test_cli_place_reports_an_unknown_device_unless_soft(void **state)
{
    (void)state;
    s_run_t r;
    s_place(&r, ZF_TEST_DATA_DIR "/two_devices.pbtxt --devices cpu:2", true);
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out,
                        "zflow place: INVALID_ARGUMENT: Cannot assign a device for operation "
                        "y: y was explicitly assigned to /device:GPU:0 but available "
                        "devices are [ " S_LOCAL "0, " S_LOCAL "1 ]. Make sure the device "
                        "specification refers to a valid device.\n");
    s_place(&r, ZF_TEST_DATA_DIR "/two_devices.pbtxt --devices cpu:2 --soft", false);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "x\t" S_LOCAL "0\n"
                               "w\t" S_LOCAL "0\n"
                               "init\t" S_LOCAL "0\n"
                               "y\t" S_LOCAL "0\n"
                               "out\t" S_LOCAL "0\n");
}

static void test_cli_place_names_a_node_whose_op_has_no_kernel(void **state)
{
    (void)state;
    s_run_t r;
    s_place(&r, ZF_TEST_DATA_DIR "/placer_unknown_op.pbtxt --devices cpu:1", true);
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out, "zflow place: INVALID_ARGUMENT: No OpKernel was registered to "
                               "support Op 'FancyOp' used by node f (the op is unknown); "
                               "registered devices: [CPU]; registered kernels: <no registered "
                               "kernels>\n");
    /* functions are inlined before placement, as a session does: the call's
     * body is placed like any other nodes */
    s_place(&r, ZF_TF_DATA_DIR "/graph-function-resource-args.pbtxt --devices cpu:1", false);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "x\t" S_LOCAL "0\n"
                               "func_call\t" S_LOCAL "0\n"
                               "func_call/input/_0\t" S_LOCAL "0\n"
                               "func_call/input/_1\t" S_LOCAL "0\n"
                               "func_call/output/_0\t" S_LOCAL "0\n"
                               "func_call/output_control_node\t" S_LOCAL "0\n");
}

static void test_cli_place_places_the_example_mlp_with_the_shorthand_list(void **state)
{
    (void)state;
    s_run_t r;
    s_place(&r, ZF_TEST_DATA_DIR "/../../examples/mlp.pbtxt --devices cpu:2 --format pbtxt", false);
    assert_int_equal(r.rc, 0);
    const char *head = "x\t" S_LOCAL "0\nlayer1/weights\t" S_LOCAL "0\n";
    assert_true(strncmp(r.out, head, strlen(head)) == 0);
    s_assert_contains(&r, "\nprobs\t" S_LOCAL "0\n");
    int lines = 0;
    for (const char *c = r.out; *c; c++) lines += *c == '\n';
    assert_int_equal(lines, 11);
}

static void s_usage_case(const char *args, int rc, const char *needle)
{
    s_run_t r;
    s_place(&r, args, true);
    if (r.rc != rc) fail_msg("'%s': exit %d, expected %d:\n%s", args, r.rc, rc, r.out);
    s_assert_contains(&r, needle);
}

static void test_cli_place_rejects_bad_usage(void **state)
{
    (void)state;
    const char *g = ZF_TEST_DATA_DIR "/two_devices.pbtxt";
    char args[1024];
    s_usage_case("--help", 0, "usage: zflow place GRAPH --devices LIST");
    s_usage_case("", 2, "zflow place: need a GRAPH file\nusage: zflow place");
    snprintf(args, sizeof args, "%s", g);
    s_usage_case(args, 2, "zflow place: need --devices LIST\n");
    snprintf(args, sizeof args, "%s --devices cpu:1 --mode fast", g);
    s_usage_case(args, 2, "zflow place: --mode must be first or balanced, not 'fast'\n");
    snprintf(args, sizeof args, "%s --devices cpu:0", g);
    s_usage_case(args, 2, "zflow place: INVALID_ARGUMENT: --devices: ");
    snprintf(args, sizeof args, "%s --devices cpu:2 --load gpu:0=1", g);
    s_usage_case(args, 2,
                 "zflow place: INVALID_ARGUMENT: --load 'gpu:0=1' names no device of "
                 "the list\n");
    snprintf(args, sizeof args, "%s --devices cpu:2 --load cpu=1", g);
    s_usage_case(args, 2, "--load 'cpu=1' names more than one device of the list\n");
    snprintf(args, sizeof args, "%s --devices cpu:2 --load cpu:1=-3", g);
    s_usage_case(args, 2, "--load 'cpu:1=-3': N must be a count (0 or more)\n");
    snprintf(args, sizeof args, "%s --devices cpu:2 --load cpu:1", g);
    s_usage_case(args, 2, "--load 'cpu:1' is not DEV=N\n");
    snprintf(args, sizeof args, "%s --devices cpu:1 extra", g);
    s_usage_case(args, 2, "zflow place: unexpected argument 'extra'\n");
    s_usage_case("/nonexistent.pbtxt --devices cpu:1", 1,
                 "zflow place: NOT_FOUND: cannot open '/nonexistent.pbtxt'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_place_prints_one_line_per_node_in_graph_order),
        cmocka_unit_test(test_cli_place_balances_by_reported_loads),
        cmocka_unit_test(test_cli_place_reports_an_unknown_device_unless_soft),
        cmocka_unit_test(test_cli_place_names_a_node_whose_op_has_no_kernel),
        cmocka_unit_test(test_cli_place_places_the_example_mlp_with_the_shorthand_list),
        cmocka_unit_test(test_cli_place_rejects_bad_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
