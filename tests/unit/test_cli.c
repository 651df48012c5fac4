/* Tests for the zflow CLI: runs the real binary and checks its output and
 * exit codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/npy.h"
#include "common/op_registry.h"
#include "common/kernel_def.h"

typedef struct {
    int rc;
    char out[65536];
} s_run_t;

/* Runs "zflow <args>" with stderr folded into the captured output. */
static void s_zflow(s_run_t *r, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/zflow %s 2>&1", ZF_BIN_DIR, args);
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

static void test_cli_inspect_summarises_the_example_mlp(void **state)
{
    (void)state;
    s_run_t r;
    s_zflow(&r, ZF_TEST_DATA_DIR "/../../examples/mlp.pbtxt");
    assert_int_equal(r.rc, 2); /* no command: usage */
    s_zflow(&r, "inspect " ZF_TEST_DATA_DIR "/../../examples/mlp.pbtxt");
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "nodes: 11\n");
    s_assert_contains(&r, "edges: 10 (10 data, 0 control)\n");
    s_assert_contains(&r, "ops (6 distinct):\n");
    s_assert_contains(&r, "  MatMul                                  2\n");
    s_assert_contains(&r, "unknown ops: none\n");
    s_assert_contains(&r, "  x                                float32    [?,4]\n");
    s_assert_contains(&r, "valid: yes\n");
}

static void test_cli_inspect_lists_requested_devices_and_control_edges(void **state)
{
    (void)state;
    s_run_t r;
    s_zflow(&r, "inspect " ZF_TEST_DATA_DIR "/two_devices.pbtxt");
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "edges: 4 (3 data, 1 control)\n");
    s_assert_contains(&r, "  /device:GPU:0                                           2 nodes\n");
    s_assert_contains(&r, "  (no device requested)                                   1 nodes\n");
    s_assert_contains(&r, "versions: producer 1087, min_consumer 12\n");
}

static void test_cli_inspect_fails_on_an_invalid_graph(void **state)
{
    (void)state;
    s_run_t r;
    s_zflow(&r, "inspect " ZF_TEST_DATA_DIR "/missing_input.pbtxt");
    assert_int_equal(r.rc, 1);
    s_assert_contains(&r, "zflow inspect: INVALID_ARGUMENT: ");
    s_assert_contains(&r, "Incomplete graph, missing 1 inputs for sum");
    s_zflow(&r, "inspect " ZF_TF_DATA_DIR "/graph-malformed.pbtxt");
    assert_int_equal(r.rc, 1);
    s_assert_contains(&r, "3:1: unknown field 'this' in tensorflow.GraphDef");
    s_zflow(&r, "inspect /nonexistent.pb");
    assert_int_equal(r.rc, 1);
    s_assert_contains(&r, "NOT_FOUND: cannot open '/nonexistent.pb'");
}

static void test_cli_inspect_reports_library_functions_as_unsupported(void **state)
{
    (void)state;
    s_run_t r;
    s_zflow(&r, "inspect " ZF_TF_DATA_DIR "/graph-function-resource-args.pbtxt");
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "function library: 1 functions (running library functions is not "
                          "supported)\n");
    s_assert_contains(&r, "library function");
}

/* Both GraphDefs pack to the same bytes. */
static void s_assert_same_graph(const Tensorflow__GraphDef *a, const Tensorflow__GraphDef *b)
{
    void *pa, *pb;
    size_t la, lb;
    assert_true(zf_ok(zf_graphdef_write_mem(a, ZF_FORMAT_PB, &pa, &la)));
    assert_true(zf_ok(zf_graphdef_write_mem(b, ZF_FORMAT_PB, &pb, &lb)));
    assert_int_equal(la, lb);
    assert_memory_equal(pa, pb, la);
    free(pa);
    free(pb);
}

/* A node zflow cannot run is one of an op it does not support, or of an op
 * with no kernel on the run's device types: no_kernel.pbtxt has two Sin
 * nodes (no kernel), a While (functional) and a MyOp (unknown). */
static void test_cli_inspect_counts_nodes_without_a_kernel(void **state)
{
    (void)state;
    /* The premise: Sin is a known op without a kernel. */
    zf_kernel_defs_register_builtin();
    const zf_op_def_t *sin = zf_op_lookup("Sin");
    assert_non_null(sin);
    assert_false(zf_op_has_flag(sin, ZF_OP_UNSUPPORTED));
    assert_false(zf_op_has_kernel(sin, "CPU"));
    assert_false(zf_op_has_kernel(sin, "GPU"));
    assert_true(zf_op_has_kernel(zf_op_lookup("Relu"), "CPU"));

    s_run_t r;
    s_zflow(&r, "inspect " ZF_TEST_DATA_DIR "/no_kernel.pbtxt --devices cpu:2");
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "  Sin                                     2  no kernel on CPU\n");
    s_assert_contains(&r, "  While                                   1  functional op\n");
    s_assert_contains(&r, "  MyOp                                    1  unknown op\n");
    s_assert_contains(&r, "  Relu                                    1\n");
    s_assert_contains(&r, "nodes zflow cannot run yet: 4\n");
    s_zflow(&r, "inspect " ZF_TEST_DATA_DIR "/no_kernel.pbtxt");
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "nodes zflow cannot run yet: 4\n");
    s_zflow(&r, "inspect " ZF_TEST_DATA_DIR "/no_kernel.pbtxt --devices cpu:1,gpu:1");
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "  Sin                                     2  no kernel on CPU, GPU\n");
    s_assert_contains(&r, "nodes zflow cannot run yet: 4\n");
    s_zflow(&r, "inspect " ZF_TEST_DATA_DIR "/../../examples/mlp.pbtxt --devices cpu:1");
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "nodes zflow cannot run yet: 0\n");
    s_zflow(&r, "inspect " ZF_TEST_DATA_DIR "/no_kernel.pbtxt --devices cpu");
    assert_int_equal(r.rc, 2);
    s_assert_contains(&r, "zflow inspect: INVALID_ARGUMENT: --devices: device list entry 'cpu' "
                          "is neither a full device name nor <type>:<count>\n");
}

/* convert writes what it read: a graph exported without its default attrs
 * stays without them (loading it to run is what fills them in). */
static void test_cli_convert_keeps_a_graph_without_default_attrs_as_it_is(void **state)
{
    (void)state;
    char dir[] = "/tmp/zflow-cli-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char args[1024], pb[256];
    snprintf(pb, sizeof pb, "%s/g.pb", dir);
    snprintf(args, sizeof args, "convert %s/graph-default-attr.pbtxt %s", ZF_TF_DATA_DIR, pb);
    s_run_t r;
    s_zflow(&r, args);
    assert_int_equal(r.rc, 0);
    Tensorflow__GraphDef *a = NULL, *b = NULL;
    assert_true(zf_ok(zf_graphdef_read_file(ZF_TF_DATA_DIR "/graph-default-attr.pbtxt", 0, &a)));
    assert_true(zf_ok(zf_graphdef_read_file(pb, 0, &b)));
    const Tensorflow__NodeDef *pool = b->node[4];
    assert_string_equal(pool->op, "MaxPool");
    assert_int_equal(pool->n_attr, 3);       /* strides, ksize, padding: no T, no data_format */
    assert_int_equal(b->node[3]->n_attr, 3); /* Conv2D: T, padding, strides */
    s_assert_same_graph(a, b);
    zf_graphdef_free(&a);
    zf_graphdef_free(&b);
    unlink(pb);
    rmdir(dir);
}

/* zflow run on TensorFlow's graph-default-attr.pbtxt, whose Conv2D and
 * MaxPool leave their defaults out. The input is 1 at pixel (0,0), channel
 * 0, and 0 elsewhere: the convolution's output (0,0) is then the filter's
 * first 32 values w[0][0][0][k], every other output is 0, and the pool's
 * output (0,0) is max(w[0][0][0][k], 0). The filter's first values, from
 * the bytes of its tensor_content (d1 4b 0e 38, 92 06 c1 be, 98 4a 1a 3e,
 * 4c e4 41 37 as little-endian floats), are 3.39260478e-05, -0.377003253,
 * 0.150675178 and 1.1556851e-05. */
static void test_cli_run_runs_a_graph_without_its_default_attrs(void **state)
{
    (void)state;
    char dir[] = "/tmp/zflow-cli-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char in[256], out[256], args[1024];
    snprintf(in, sizeof in, "%s/in.npy", dir);
    snprintf(out, sizeof out, "%s/MaxPool.npy", dir);
    zf_tensor_t *x = NULL;
    zf_shape_t shape = ZF_SHAPE(1, 224, 224, 3);
    assert_true(zf_ok(zf_tensor_new(ZF_FLOAT, &shape, &x)));
    ((float *)zf_tensor_data(x))[0] = 1;
    assert_true(zf_ok(zf_npy_write_file(in, x)));
    zf_tensor_unref(&x);
    snprintf(args, sizeof args,
             "run %s/graph-default-attr.pbtxt --inprocess --devices cpu:1 --feed input=@%s "
             "--fetch MaxPool --out-dir %s --quiet",
             ZF_TF_DATA_DIR, in, dir);
    s_run_t r;
    s_zflow(&r, args);
    if (r.rc != 0) fail_msg("%s", r.out);
    zf_tensor_t *pool = NULL;
    assert_true(zf_ok(zf_npy_read_file(out, &pool)));
    const zf_shape_t *ps = zf_tensor_shape(pool);
    assert_int_equal(ps->rank, 4);
    assert_int_equal(ps->dims[0], 1);
    assert_int_equal(ps->dims[1], 56);
    assert_int_equal(ps->dims[2], 56);
    assert_int_equal(ps->dims[3], 32);
    const float *v = zf_tensor_data(pool);
    assert_true(v[0] == 3.39260478e-05f);
    assert_true(v[1] == 0.0f);
    assert_true(v[2] == 0.150675178f);
    assert_true(v[3] == 1.1556851e-05f);
    for (int i = 0; i < 32; i++) assert_true(v[i] >= 0);
    for (int i = 32; i < 56 * 56 * 32; i++)
        if (v[i] != 0) fail_msg("element %d is %g, not 0", i, (double)v[i]);
    zf_tensor_unref(&pool);
    unlink(in);
    unlink(out);
    rmdir(dir);
}

static void test_cli_convert_round_trips_text_and_binary(void **state)
{
    (void)state;
    char dir[] = "/tmp/zflow-cli-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char args[1024], pb[256], txt[256];
    snprintf(pb, sizeof pb, "%s/g.pb", dir);
    snprintf(txt, sizeof txt, "%s/g.pbtxt", dir);
    s_run_t r;
    snprintf(args, sizeof args, "convert %s/two_devices.pbtxt %s", ZF_TEST_DATA_DIR, pb);
    s_zflow(&r, args);
    assert_int_equal(r.rc, 0);
    snprintf(args, sizeof args, "convert %s %s", pb, txt);
    s_zflow(&r, args);
    assert_int_equal(r.rc, 0);

    Tensorflow__GraphDef *a = NULL, *b = NULL;
    assert_true(zf_ok(zf_graphdef_read_file(ZF_TEST_DATA_DIR "/two_devices.pbtxt", 0, &a)));
    assert_true(zf_ok(zf_graphdef_read_file(txt, 0, &b)));
    s_assert_same_graph(a, b);
    /* The octal-escaped tensor_content survived both conversions. */
    const ProtobufCBinaryData *content = &b->node[1]->attr[1]->value->tensor->tensor_content;
    const float want[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    assert_string_equal(b->node[1]->attr[1]->key, "value");
    assert_int_equal(content->len, sizeof want);
    assert_memory_equal(content->data, want, sizeof want);
    zf_graphdef_free(&a);
    zf_graphdef_free(&b);

    snprintf(args, sizeof args, "convert %s %s/g.unknown", pb, dir);
    s_zflow(&r, args);
    assert_int_equal(r.rc, 2);
    s_assert_contains(&r, "cannot tell the format");
    unlink(pb);
    unlink(txt);
    rmdir(dir);
}

static void test_cli_every_command_has_help(void **state)
{
    (void)state;
    static const char *const commands[] = {"inspect", "convert"};
    s_run_t r;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", commands[i]);
        s_zflow(&r, args);
        assert_int_equal(r.rc, 0);
        char want[64];
        snprintf(want, sizeof want, "usage: zflow %s", commands[i]);
        s_assert_contains(&r, want);
    }
    s_zflow(&r, "--help");
    assert_int_equal(r.rc, 0);
    s_assert_contains(&r, "commands:");
    s_zflow(&r, "frobnicate");
    assert_int_equal(r.rc, 2);
    s_assert_contains(&r, "zflow: unknown command 'frobnicate'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_inspect_summarises_the_example_mlp),
        cmocka_unit_test(test_cli_inspect_lists_requested_devices_and_control_edges),
        cmocka_unit_test(test_cli_inspect_fails_on_an_invalid_graph),
        cmocka_unit_test(test_cli_inspect_reports_library_functions_as_unsupported),
        cmocka_unit_test(test_cli_inspect_counts_nodes_without_a_kernel),
        cmocka_unit_test(test_cli_convert_keeps_a_graph_without_default_attrs_as_it_is),
        cmocka_unit_test(test_cli_run_runs_a_graph_without_its_default_attrs),
        cmocka_unit_test(test_cli_convert_round_trips_text_and_binary),
        cmocka_unit_test(test_cli_every_command_has_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
