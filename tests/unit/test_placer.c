/* Tests for scheduler/graph/placer: the scenarios of TensorFlow's own placer test
 * suite, on FakeCPU/FakeGPU devices with kernels registered per test, plus
 * zflow's balanced choice and the error texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "placer_test_util.h"
#include "test_util.h"

#define S_CPU(i) "/job:a/replica:0/task:0/device:FakeCPU:" #i
#define S_GPU(i) "/job:a/replica:0/task:0/device:FakeGPU:" #i

/* TensorFlow's test ops, as ops of zflow's table: kernels are registered per
 * test, so only the signatures matter. */
#define S_INPUT    "InfeedDequeueTuple" /* no inputs, two float outputs */
#define S_INPUT_T  "dtypes=[float,float]"
#define S_VAR      "VariableV2" /* no inputs, one float ref output */
#define S_VAR_CPU  "Variable"
#define S_VAR_GPU  "TemporaryVariable"
#define S_ASSIGN   "Assign" /* ref input */
#define S_ASSIGN_C "AssignAdd"
#define S_ASSIGN_G "AssignSub"
#define S_RELU     "Relu"
#define S_RELU_CPU "Relu6"
#define S_RELU_GPU "Elu"
#define S_OUTPUT   "Const" /* a generator */
#define S_GPU_OUT  "Placeholder"
#define S_ENFORCE  "IsVariableInitialized" /* ref input, bool output */

static pt_devs_t s_devs; /* 10 FakeCPUs and 10 FakeGPUs */

static int s_setup(void **state)
{
    (void)state;
    pt_reset_registry();
    pt_devs_fake(&s_devs, 10);
    return 0;
}

static void s_assert_ok(const pt_placed_t *r)
{
    if (!zf_ok(r->status)) fail_msg("placement failed: %s", zf_status_msg(&r->status));
}

static void s_assert_error(const pt_placed_t *r, zf_code_t code, const char *needle)
{
    if (r->status.code != code || !strstr(zf_status_msg(&r->status), needle))
        fail_msg("expected %s containing\n  %s\ngot %s: %s", zf_code_name(code), needle,
                 zf_code_name(r->status.code), zf_status_msg(&r->status));
}

/* in -> n1, n2 over an input that only has a CPU kernel. */
static zf_graph_t *s_no_constraints_graph(void)
{
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "n1", S_RELU, "in:0", NULL, "T=float");
    pt_gb_node(&b, "n2", S_RELU, "in:1", NULL, "T=float");
    return pt_gb_graph(&b);
}

static void test_placer_prefers_gpu_over_cpu(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU");
    for (int mode = 0; mode < 2; mode++) {
        zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
        o.mode = mode ? ZF_PLACE_FIRST : ZF_PLACE_BALANCED;
        pt_placed_t r = pt_place_opts(s_no_constraints_graph(), &s_devs, &o);
        s_assert_ok(&r);
        assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
        assert_string_equal(pt_dev(&r, "n1"), S_GPU(0));
        assert_string_equal(pt_dev(&r, "n2"), S_GPU(0));
        pt_placed_free(&r);
    }
}

static void test_placer_puts_a_generator_on_cpu_only_when_gpu_has_no_kernel(void **state)
{
    (void)state;
    pt_kernels(S_GPU_OUT ":FakeCPU " S_OUTPUT ":FakeCPU,FakeGPU " S_RELU ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "cpu_only", S_GPU_OUT, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "both", S_OUTPUT, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "a", S_RELU, "cpu_only", NULL, "T=float");
    pt_gb_node(&b, "b", S_RELU, "both", NULL, "T=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "cpu_only"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "a"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "both"), S_GPU(0));
    pt_placed_free(&r);
}

static void test_placer_colocates_reference_connections_on_the_constrained_type(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_VAR_CPU ":FakeCPU " S_VAR_GPU ":FakeGPU " S_ASSIGN_C
                       ":FakeCPU " S_ASSIGN_G ":FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "var_cpu", S_VAR_CPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "assign_cpu", S_ASSIGN_C, "var_cpu,in", NULL, "T=float");
    pt_gb_node(&b, "var_gpu", S_VAR_GPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "assign_gpu", S_ASSIGN_G, "var_gpu,in", NULL, "T=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, true);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "var_cpu"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "assign_cpu"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "var_gpu"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "assign_gpu"), S_GPU(0));
    pt_placed_free(&r);
}

static void test_placer_keeps_metadata_ops_with_their_input_when_allowed(void **state)
{
    (void)state;
    pt_kernels(S_VAR_CPU ":FakeCPU Shape:FakeCPU,FakeGPU " S_VAR ":FakeCPU Size:FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "var_cpu", S_VAR_CPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "shape_op", "Shape", "var_cpu", NULL, "T=float");
    pt_gb_node(&b, "var2", S_VAR, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "size_op", "Size", "var2", NULL, "T=float"); /* no CPU kernel */
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "shape_op"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "var2"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "size_op"), S_GPU(0));
    pt_placed_free(&r);
}

/* var_cpu -> assign <- in, the generator "in" of op gen_op. */
static zf_graph_t *s_generator_graph(const char *gen_op, const char *gen_device)
{
    pt_gb_t b = {0};
    pt_gb_node(&b, "var_cpu", S_VAR_CPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "in", gen_op, NULL, gen_device, "dtype=float");
    pt_gb_node(&b, "assign", S_ASSIGN, "var_cpu,in", NULL, "T=float");
    return pt_gb_graph(&b);
}

static void test_placer_generator_follows_its_single_consumer(void **state)
{
    (void)state;
    pt_kernels(S_VAR_CPU ":FakeCPU " S_OUTPUT ":FakeCPU,FakeGPU " S_ASSIGN ":FakeCPU,FakeGPU");
    pt_placed_t r = pt_place(s_generator_graph(S_OUTPUT, NULL), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "assign"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "var_cpu"), S_CPU(0));
    pt_placed_free(&r);
}

static void test_placer_ignores_the_generator_heuristic_on_a_wrong_device(void **state)
{
    (void)state;
    pt_kernels(S_VAR_CPU ":FakeCPU " S_GPU_OUT ":FakeGPU " S_OUTPUT ":FakeCPU,FakeGPU " S_ASSIGN
                         ":FakeCPU,FakeGPU");
    pt_placed_t r = pt_place(s_generator_graph(S_GPU_OUT, NULL), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "var_cpu"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "assign"), S_CPU(0));
    pt_placed_free(&r);
    r = pt_place(s_generator_graph(S_OUTPUT, "/device:FakeCPU:1"), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(1));
    assert_string_equal(pt_dev(&r, "var_cpu"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "assign"), S_CPU(0));
    pt_placed_free(&r);
}

static void test_placer_honours_partial_specs(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_VAR ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, "/job:a", S_INPUT_T);
    pt_gb_node(&b, "var", S_VAR, NULL, "/job:a", "dtype=float");
    pt_gb_node(&b, "wild", S_VAR, NULL, "/device:FakeGPU:*", "dtype=float");
    pt_gb_node(&b, "typed", S_VAR, NULL, "/device:FakeCPU", "dtype=float");
    pt_gb_node(&b, "id_only", S_VAR, NULL, "/device:*:7", "dtype=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "var"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "wild"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "typed"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "id_only"), S_GPU(7));
    pt_placed_free(&r);
}

static void test_placer_honours_full_specs(void **state)
{
    (void)state;
    pt_kernels(S_VAR ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "full", S_VAR, NULL, S_GPU(3), "dtype=float");
    pt_gb_node(&b, "short", S_VAR, NULL, "/device:FakeCPU:4", "dtype=float");
    pt_gb_node(&b, "task", S_VAR, NULL, "/job:a/task:0/device:FakeGPU:9", "dtype=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "full"), S_GPU(3));
    assert_string_equal(pt_dev(&r, "short"), S_CPU(4));
    assert_string_equal(pt_dev(&r, "task"), S_GPU(9));
    pt_placed_free(&r);
}

static void test_placer_accepts_legacy_specs_on_cpu_and_gpu(void **state)
{
    (void)state;
    zf_op_registry_reset_kernels();
    pt_kernels("Relu:CPU,GPU Placeholder:CPU,GPU");
    zf_device_name_t *names = NULL;
    int n = 0;
    assert_true(zf_ok(zf_device_list_parse("cpu:2,gpu:4", &names, &n)));
    pt_devs_t devs = {.n = n};
    for (int i = 0; i < n; i++) devs.d[i] = (zf_placer_device_t){names[i], 0};
    free(names);
    pt_gb_t b = {0};
    pt_gb_node(&b, "x", "Placeholder", NULL, "/cpu:1", "dtype=float");
    pt_gb_node(&b, "y", "Relu", "x", "/gpu:2", "T=float");
    pt_gb_node(&b, "z", "Relu", "y", "/device:GPU:3", "T=float");
    pt_gb_node(&b, "w", "Relu", "z", "/job:localhost/task:0/CPU:0", "T=float");
    pt_gb_node(&b, "v", "Relu", "w", NULL, "T=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "x"), "/job:localhost/replica:0/task:0/device:CPU:1");
    assert_string_equal(pt_dev(&r, "y"), "/job:localhost/replica:0/task:0/device:GPU:2");
    assert_string_equal(pt_dev(&r, "z"), "/job:localhost/replica:0/task:0/device:GPU:3");
    assert_string_equal(pt_dev(&r, "w"), "/job:localhost/replica:0/task:0/device:CPU:0");
    assert_string_equal(pt_dev(&r, "v"), "/job:localhost/replica:0/task:0/device:GPU:0");
    pt_placed_free(&r);
}

static void test_placer_honours_job_and_task_specs(void **state)
{
    (void)state;
    pt_kernels(S_VAR ":FakeCPU,FakeGPU " S_RELU ":FakeCPU,FakeGPU");
    pt_devs_t devs = {0};
    pt_devs_add(&devs, "worker", 0, 1, "FakeCPU", 0);
    pt_devs_add(&devs, "worker", 0, 0, "FakeCPU", 0);
    pt_devs_add(&devs, "ps", 0, 0, "FakeCPU", 0);
    pt_devs_add(&devs, "worker", 0, 1, "FakeGPU", 0);
    pt_gb_t b = {0};
    pt_gb_node(&b, "v", S_VAR, NULL, "/job:ps", "dtype=float");
    pt_gb_node(&b, "t1", S_RELU, "v", "/job:worker/task:1", "T=float");
    pt_gb_node(&b, "t0", S_RELU, "v", "/job:worker/task:0", "T=float");
    pt_gb_node(&b, "t1cpu", S_RELU, "v", "/job:worker/task:1/device:FakeCPU:*", "T=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "v"), "/job:ps/replica:0/task:0/device:FakeCPU:0");
    assert_string_equal(pt_dev(&r, "t1"), "/job:worker/replica:0/task:1/device:FakeGPU:0");
    assert_string_equal(pt_dev(&r, "t0"), "/job:worker/replica:0/task:0/device:FakeCPU:0");
    assert_string_equal(pt_dev(&r, "t1cpu"), "/job:worker/replica:0/task:1/device:FakeCPU:0");
    pt_placed_free(&r);
}

static void test_placer_keeps_assigned_devices(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU");
    const char *assigned[3] = {S_CPU(7), NULL, ""};
    zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
    o.assigned = assigned;
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "n1", S_RELU, "in:0", NULL, "T=float;_class=[loc:@in]");
    pt_gb_node(&b, "n2", S_RELU, "in:1", NULL, "T=float");
    pt_placed_t r = pt_place_opts(pt_gb_graph(&b), &s_devs, &o);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(7));
    assert_string_equal(pt_dev(&r, "n1"), S_CPU(7)); /* its colocation group is pinned there */
    assert_string_equal(pt_dev(&r, "n2"), S_GPU(0));
    pt_placed_free(&r);
}

/* place_pruned_graph: in (CPU only) feeds n1, n2 and bad, n2 feeds m; bad
 * asks for a GPU the set lacks, which fails a placement of the whole graph. */
static zf_graph_t *s_pruned_graph(void)
{
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "n1", S_RELU, "in:0", NULL, "T=float");
    pt_gb_node(&b, "n2", S_RELU, "in:1", NULL, "T=float");
    pt_gb_node(&b, "bad", S_RELU, "in:1", "/job:a/replica:0/task:0/device:FakeGPU:99", "T=float");
    pt_gb_node(&b, "m", S_RELU, "n2:0", NULL, "T=float");
    return pt_gb_graph(&b);
}

static const char *s_dev_name(int d)
{
    static char buf[ZF_DEVICE_NAME_MAX];
    assert_true(d < s_devs.n);
    return zf_device_name_format(&s_devs.d[d].name, buf, sizeof buf);
}

static zf_status_t s_place_pruned(zf_graph_t *g, const char *feed, const char *fetch, int *assign)
{
    zf_placer_prune_t pr = {&feed, feed ? 1 : 0, &fetch, 1, NULL, 0};
    return zf_placer_run_pruned(g, s_devs.d, s_devs.n, NULL, &pr, assign);
}

static void test_placer_pruned_places_only_what_the_run_needs(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU Placeholder:FakeCPU,FakeGPU");
    pt_placed_t whole = pt_place(s_pruned_graph(), &s_devs, false);
    s_assert_error(&whole, ZF_INVALID_ARGUMENT, "Cannot assign a device for operation bad");
    pt_placed_free(&whole);

    pt_placed_t r = {s_pruned_graph(), &s_devs, calloc(6, sizeof(int)), ZF_STATUS_OK};
    for (int i = 0; i < 5; i++) r.assign[i] = -1;
    ASSERT_OK(s_place_pruned(r.g, NULL, "n1:0", r.assign));
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "n1"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "n2"), "(unplaced)");
    assert_string_equal(pt_dev(&r, "bad"), "(unplaced)");
    /* a later run places around it: in keeps its device, even one it
     * would not be given now */
    int cpu5 = 0;
    while (strcmp(s_dev_name(cpu5), S_CPU(5)) != 0) cpu5++;
    r.assign[zf_graph_find_node(r.g, "in")] = cpu5;
    ASSERT_OK(s_place_pruned(r.g, NULL, "n2:0", r.assign));
    assert_string_equal(pt_dev(&r, "in"), S_CPU(5));
    assert_string_equal(pt_dev(&r, "n1"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "n2"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "bad"), "(unplaced)");
    /* the run that needs bad fails, naming it, and changes nothing */
    zf_test_expect_error(s_place_pruned(r.g, NULL, "bad:0", r.assign), ZF_INVALID_ARGUMENT,
                         "Cannot assign a device for operation bad");
    assert_string_equal(pt_dev(&r, "in"), S_CPU(5));
    assert_string_equal(pt_dev(&r, "bad"), "(unplaced)");
    pt_placed_free(&r);
}

/* A fed tensor cuts the run: its producer is placed (the feed arrives
 * there), but not what the producer reads. */
static void test_placer_pruned_cuts_at_feeds(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU Placeholder:FakeCPU,FakeGPU");
    pt_placed_t r = {s_pruned_graph(), &s_devs, calloc(6, sizeof(int)), ZF_STATUS_OK};
    for (int i = 0; i < 5; i++) r.assign[i] = -1;
    ASSERT_OK(s_place_pruned(r.g, "n2:0", "m:0", r.assign));
    assert_string_equal(pt_dev(&r, "in"), "(unplaced)");
    assert_string_equal(pt_dev(&r, "n2"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "m"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "n1"), "(unplaced)");
    /* nothing left to place: a no-op */
    ASSERT_OK(s_place_pruned(r.g, "n2:0", "m:0", r.assign));
    assert_string_equal(pt_dev(&r, "in"), "(unplaced)");
    pt_placed_free(&r);
}

static void s_check_assigned(const char *name, const char *needle)
{
    const char *assigned[1] = {name};
    zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
    o.assigned = assigned;
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_placed_t r = pt_place_opts(pt_gb_graph(&b), &s_devs, &o);
    s_assert_error(&r, ZF_INTERNAL, needle);
    assert_int_equal(r.assign[0], -1);
    pt_placed_free(&r);
}

static void test_placer_rejects_bad_assigned_devices(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU");
    s_check_assigned(S_GPU(0), "Assigned device '" S_GPU(
                                   0) "' does not have registered OpKernel support for " S_INPUT);
    s_check_assigned("/job:foo", "Assigned device '/job:foo' does not match any device");
    s_check_assigned("/job:a", "Assigned device '/job:a' does not match any device");
    s_check_assigned("/foo:bar", "Malformed assigned device '/foo:bar'");
}

/* TensorFlow's ReferenceTestHelper: ten variable/assign pairs. */
static void s_reference_case(const char *var_op, const char *assign_op, const char *type,
                             const char *error)
{
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    for (int i = 0; i < 10; i++) {
        char var[16], assign[16], inputs[40];
        snprintf(var, sizeof var, "var_%d", i);
        snprintf(assign, sizeof assign, "assign_%d", i);
        snprintf(inputs, sizeof inputs, "%s,in", var);
        pt_gb_node(&b, var, var_op, NULL, NULL, "dtype=float");
        pt_gb_node(&b, assign, assign_op, inputs, NULL, "T=float");
    }
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, true);
    if (error) {
        s_assert_error(&r, ZF_INVALID_ARGUMENT, error);
    } else {
        s_assert_ok(&r);
        for (int i = 0; i < 10; i++) {
            char var[16], assign[16];
            snprintf(var, sizeof var, "var_%d", i);
            snprintf(assign, sizeof assign, "assign_%d", i);
            assert_string_equal(pt_dev(&r, var), pt_dev(&r, assign));
            assert_string_equal(pt_type(&r, var), type);
        }
    }
    pt_placed_free(&r);
}

static void test_placer_colocates_every_kind_of_reference_connection(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_VAR ":FakeCPU,FakeGPU " S_VAR_CPU ":FakeCPU " S_VAR_GPU
                       ":FakeGPU " S_ASSIGN ":FakeCPU,FakeGPU " S_ASSIGN_C ":FakeCPU " S_ASSIGN_G
                       ":FakeGPU");
    const char *no_type = "no device type supports both of those nodes";
    s_reference_case(S_VAR, S_ASSIGN, "FakeGPU", NULL);
    s_reference_case(S_VAR, S_ASSIGN_C, "FakeCPU", NULL);
    s_reference_case(S_VAR, S_ASSIGN_G, "FakeGPU", NULL);
    s_reference_case(S_VAR_CPU, S_ASSIGN, "FakeCPU", NULL);
    s_reference_case(S_VAR_CPU, S_ASSIGN_C, "FakeCPU", NULL);
    s_reference_case(S_VAR_CPU, S_ASSIGN_G, NULL, no_type);
    s_reference_case(S_VAR_GPU, S_ASSIGN, "FakeGPU", NULL);
    s_reference_case(S_VAR_GPU, S_ASSIGN_C, NULL, no_type);
    s_reference_case(S_VAR_GPU, S_ASSIGN_G, "FakeGPU", NULL);
}

static void s_handle_case(const char *var_kernels, const char *use_kernels, const char *type)
{
    pt_reset_registry();
    char spec[256];
    snprintf(spec, sizeof spec, S_INPUT ":FakeCPU VarHandleOp:%s AssignVariableOp:%s", var_kernels,
             use_kernels);
    pt_kernels(spec);
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "var", "VarHandleOp", NULL, NULL, "dtype=float");
    pt_gb_node(&b, "assign", "AssignVariableOp", "var,in:0", NULL, "dtype=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, true);
    if (!type) {
        s_assert_error(&r, ZF_INVALID_ARGUMENT,
                       "Cannot colocate nodes var and assign because no "
                       "device type supports both");
    } else {
        s_assert_ok(&r);
        assert_string_equal(pt_dev(&r, "var"), pt_dev(&r, "assign"));
        assert_string_equal(pt_type(&r, "var"), type);
    }
    pt_placed_free(&r);
}

static void test_placer_colocates_resource_handles_with_their_users(void **state)
{
    (void)state;
    s_handle_case("FakeCPU,FakeGPU", "FakeCPU,FakeGPU", "FakeGPU");
    s_handle_case("FakeCPU,FakeGPU", "FakeCPU", "FakeCPU");
    s_handle_case("FakeCPU,FakeGPU", "FakeGPU", "FakeGPU");
    s_handle_case("FakeCPU", "FakeCPU,FakeGPU", "FakeCPU");
    s_handle_case("FakeCPU", "FakeCPU", "FakeCPU");
    s_handle_case("FakeGPU", "FakeGPU", "FakeGPU");
    s_handle_case("FakeGPU", "FakeCPU,FakeGPU", "FakeGPU");
    s_handle_case("FakeGPU", "FakeCPU", NULL);
    s_handle_case("FakeCPU", "FakeGPU", NULL);
}

static void test_placer_rejects_resource_handles_pinned_to_different_devices(void **state)
{
    (void)state;
    pt_kernels("VarHandleOp:FakeCPU,FakeGPU ResourceApplyMomentum:FakeCPU,FakeGPU "
               "Const:FakeCPU,FakeGPU");
    for (int soft = 0; soft < 2; soft++) {
        for (int assigned = 0; assigned < 2; assigned++) {
            pt_gb_t b = {0};
            pt_gb_node(&b, "var_cpu", "VarHandleOp", NULL, assigned ? NULL : S_CPU(0),
                       "dtype=float");
            pt_gb_node(&b, "var_gpu", "VarHandleOp", NULL, assigned ? NULL : S_GPU(0),
                       "dtype=float");
            pt_gb_node(&b, "c", "Const", NULL, NULL, "dtype=float");
            pt_gb_node(&b, "two_handles_in", "ResourceApplyMomentum", "var_cpu,var_gpu,c,c,c", NULL,
                       "T=float");
            const char *pre[4] = {S_CPU(0), S_GPU(0), NULL, NULL};
            zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
            o.allow_soft_placement = soft;
            o.assigned = assigned ? pre : NULL;
            pt_placed_t r = pt_place_opts(pt_gb_graph(&b), &s_devs, &o);
            s_assert_error(&r, ZF_INVALID_ARGUMENT,
                           assigned ? "Cannot place the graph because a reference or resource edge "
                                      "connects colocation groups with incompatible assigned "
                                      "devices: " S_GPU(0) " vs " S_CPU(0)
                                    : "Cannot place the graph because a reference or resource edge "
                                      "connects colocation groups with incompatible resource "
                                      "devices: " S_GPU(0) " vs " S_CPU(0));
            s_assert_error(&r, ZF_INVALID_ARGUMENT,
                           "The edge src node is var_gpu, and the dst node is two_handles_in");
            pt_placed_free(&r);
        }
    }
}

static void test_placer_ignores_an_infeasible_spec_across_a_reference_edge(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeGPU " S_VAR ":FakeCPU,FakeGPU " S_ASSIGN ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, "/job:a/task:0/device:FakeGPU:0", S_INPUT_T);
    pt_gb_node(&b, "var_0", S_VAR, NULL, "/job:a/task:0/device:FakeGPU:0", "dtype=float");
    pt_gb_node(&b, "assign", S_ASSIGN, "var_0,in", "/job:a/task:0/device:FakeCPU:0", "T=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "var_0"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "assign"), S_GPU(0));
    pt_placed_free(&r);
}

static void test_placer_lets_the_more_specific_end_of_a_reference_edge_win(void **state)
{
    (void)state;
    pt_kernels(S_OUTPUT ":FakeCPU,FakeGPU " S_INPUT ":FakeGPU " S_VAR ":FakeCPU,FakeGPU " S_ASSIGN
                        ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_OUTPUT, NULL, "/job:a/task:0", "dtype=float");
    pt_gb_node(&b, "var_0", S_VAR, NULL, "/job:a/task:0", "dtype=float");
    pt_gb_node(&b, "assign", S_ASSIGN, "var_0,in", "/job:a/task:0/device:FakeCPU:0", "T=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "var_0"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "assign"), S_CPU(0));
    pt_placed_free(&r);
    /* No device on the variable: it goes where its assign asks. */
    pt_gb_node(&b, "in", S_INPUT, NULL, "/job:a/task:0/device:FakeGPU:0", S_INPUT_T);
    pt_gb_node(&b, "var_0", S_VAR, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "assign", S_ASSIGN, "var_0,in", "/job:a/task:0/device:FakeCPU:0", "T=float");
    r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "var_0"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "assign"), S_CPU(0));
    pt_placed_free(&r);
}

static void test_placer_colocates_class_groups(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "colocated_1", S_RELU, "in", NULL, "T=float;_class=[loc:@in]");
    pt_gb_node(&b, "foo", S_RELU, "in", NULL, "T=float");
    pt_gb_node(&b, "both", S_RELU, "in", NULL, "T=float;_class=[loc:@in,loc:@colocated_1]");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "colocated_1"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "both"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "foo"), S_GPU(0));
    pt_placed_free(&r);
}

static void test_placer_colocates_with_nodes_named_later_or_absent(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU " S_OUTPUT ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "early", S_OUTPUT, NULL, NULL, "dtype=float;_class=[loc:@late]");
    pt_gb_node(&b, "g1", S_RELU, "early", NULL, "T=float;_class=[loc:@ghost]");
    pt_gb_node(&b, "g2", S_RELU, "early", "/device:FakeGPU:4", "T=float;_class=[loc:@ghost]");
    pt_gb_node(&b, "late", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "other", S_RELU, "late", NULL, "T=float;_class=[misc, loc:other]");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "early"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "late"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "g1"), S_GPU(4));
    assert_string_equal(pt_dev(&r, "g2"), S_GPU(4));
    assert_string_equal(pt_dev(&r, "other"), S_GPU(0));
    pt_placed_free(&r);
}

static void test_placer_ignores_a_class_attr_that_is_not_a_list(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "n", S_RELU, "in", NULL, "T=float;_class='loc:@in'");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "n"), S_GPU(0));
    pt_placed_free(&r);
}

static void test_placer_reports_a_class_group_without_a_common_type(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU_CPU ":FakeCPU " S_RELU_GPU ":FakeGPU");
    for (int soft = 0; soft < 2; soft++) {
        pt_gb_t b = {0};
        pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
        pt_gb_node(&b, "colocated_1", S_RELU_CPU, "in", NULL, "T=float;_class=[loc:@in]");
        pt_gb_node(&b, "foo", S_RELU_GPU, "in", NULL, "T=float;_class=[loc:@in,loc:@colocated_1]");
        pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, soft);
        if (soft) {
            s_assert_ok(&r);
            assert_string_equal(pt_type(&r, "in"), "FakeCPU");
            assert_string_equal(pt_type(&r, "colocated_1"), "FakeCPU");
            assert_string_equal(pt_type(&r, "foo"), "FakeGPU");
        } else {
            s_assert_error(&r, ZF_INVALID_ARGUMENT,
                           "Cannot colocate nodes foo and in because no device type supports both "
                           "of those nodes and the other nodes colocated with them.");
            s_assert_error(&r, ZF_INVALID_ARGUMENT, "\nColocation Debug Info:\n");
            s_assert_error(&r, ZF_INVALID_ARGUMENT, "\n" S_RELU_GPU ": FakeGPU \n");
            s_assert_error(&r, ZF_INVALID_ARGUMENT, "\n" S_RELU_CPU ": FakeCPU \n");
            s_assert_error(&r, ZF_INVALID_ARGUMENT, "\n  colocated_1 (" S_RELU_CPU ") \n");
        }
        pt_placed_free(&r);
    }
}

/* var1, var2 (CPU only) with assigns colocated by name; var3 (GPU only)
 * whose assign asks to join var2's group when unsatisfiable. */
static zf_graph_t *s_class_and_ref_graph(bool with_var3)
{
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "var1", S_VAR_CPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "var2", S_VAR_CPU, NULL, NULL, "dtype=float");
    if (with_var3) pt_gb_node(&b, "var3", S_VAR_GPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "assign1", S_ASSIGN, "var1,in", NULL, "T=float;_class=[loc:@var1]");
    pt_gb_node(&b, "assign2", S_ASSIGN, "var2,in", NULL, "T=float;_class=[loc:@var2]");
    if (with_var3)
        pt_gb_node(&b, "assign3", S_ASSIGN, "var3,in", NULL, "T=float;_class=[loc:@var2]");
    return pt_gb_graph(&b);
}

static void test_placer_combines_class_groups_and_reference_connections(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_VAR_CPU ":FakeCPU " S_VAR_GPU ":FakeGPU " S_ASSIGN
                       ":FakeCPU,FakeGPU");
    pt_placed_t r = pt_place(s_class_and_ref_graph(false), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), pt_dev(&r, "var1"));
    assert_string_equal(pt_dev(&r, "in"), pt_dev(&r, "var2"));
    assert_string_equal(pt_dev(&r, "var1"), pt_dev(&r, "assign2"));
    assert_string_equal(pt_dev(&r, "var2"), pt_dev(&r, "assign1"));
    pt_placed_free(&r);
    for (int soft = 0; soft < 2; soft++) {
        r = pt_place(s_class_and_ref_graph(true), &s_devs, soft);
        if (soft) {
            s_assert_ok(&r);
            assert_string_equal(pt_dev(&r, "assign3"), S_GPU(0));
        } else {
            s_assert_error(&r, ZF_INVALID_ARGUMENT,
                           "Cannot colocate nodes assign3 and var2 because no device type supports "
                           "both of those nodes and the other nodes colocated with them.");
        }
        pt_placed_free(&r);
    }
}

static void test_placer_colocates_many_class_groups_and_reference_connections(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_VAR ":FakeCPU,FakeGPU " S_ASSIGN ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    for (int i = 0; i < 100; i++) {
        char var[16], assign[16], inputs[32], attrs[64];
        snprintf(var, sizeof var, "var_%d", i);
        snprintf(assign, sizeof assign, "assign_%d", i);
        snprintf(inputs, sizeof inputs, "%s,in", var);
        snprintf(attrs, sizeof attrs, "dtype=float;_class=[loc:@var_%d]", i % 6);
        pt_gb_node(&b, var, S_VAR, NULL, NULL, i < 10 ? "dtype=float" : attrs);
        snprintf(attrs, sizeof attrs, "T=float;_class=[loc:@assign_%d]", i % 3);
        pt_gb_node(&b, assign, S_ASSIGN, inputs, NULL, i < 10 ? "T=float" : attrs);
    }
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    for (int i = 0; i < 100; i++) {
        char a[16], v[16];
        snprintf(v, sizeof v, "var_%d", i);
        snprintf(a, sizeof a, "assign_%d", i);
        assert_string_equal(pt_dev(&r, v), pt_dev(&r, a));
        if (i >= 10) {
            char v6[16], a3[16];
            snprintf(v6, sizeof v6, "var_%d", i % 6);
            snprintf(a3, sizeof a3, "assign_%d", i % 3);
            assert_string_equal(pt_dev(&r, v), pt_dev(&r, v6));
            assert_string_equal(pt_dev(&r, a), pt_dev(&r, a3));
        }
    }
    pt_placed_free(&r);
}

static void test_placer_fails_when_no_devices_are_registered(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_devs_t none = {0};
    pt_placed_t r = pt_place(pt_gb_graph(&b), &none, false);
    assert_int_equal(r.status.code, ZF_FAILED_PRECONDITION);
    assert_string_equal(zf_status_msg(&r.status), "No devices are registered");
    pt_placed_free(&r);
}

static void test_placer_reports_a_group_that_requires_an_incompatible_device(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_VAR_GPU ":FakeGPU " S_ASSIGN ":FakeCPU,FakeGPU");
    pt_devs_t devs = {0};
    pt_devs_add(&devs, "b", 0, 0, "FakeGPU", 0);
    pt_devs_add(&devs, "b", 0, 1, "FakeCPU", 0);
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "var", S_VAR_GPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "assign", S_ASSIGN, "var,in", "/job:b/task:1", "T=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &devs, false);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "Cannot assign a device for operation var: Could not satisfy explicit device "
                   "specification '' because the node var was colocated with a "
                   "group of nodes that required incompatible device '/job:b/task:1'. All "
                   "available devices [/job:b/replica:0/task:0/device:FakeGPU:0, "
                   "/job:b/replica:0/task:1/device:FakeCPU:0].");
    s_assert_error(&r, ZF_INVALID_ARGUMENT, "\n" S_VAR_GPU ": FakeGPU \n");
    s_assert_error(&r, ZF_INVALID_ARGUMENT, "\n" S_ASSIGN ": FakeGPU FakeCPU \n");
    s_assert_error(&r, ZF_INVALID_ARGUMENT, "\n  assign (Assign) /job:b/task:1\n");
    pt_placed_free(&r);
}

static pt_placed_t s_place_one(const char *op, const char *device, const char *attrs, bool soft)
{
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", op, NULL, device, attrs);
    return pt_place(pt_gb_graph(&b), &s_devs, soft);
}

static void test_placer_reports_unknown_devices(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU,FakeGPU " S_VAR_GPU ":FakeGPU");
    for (int soft = 0; soft < 2; soft++) {
        pt_placed_t r = s_place_one(S_INPUT, "/job:foo", S_INPUT_T, soft);
        s_assert_error(
            &r, ZF_INVALID_ARGUMENT,
            "Cannot assign a device for operation in: Could not satisfy explicit device "
            "specification '/job:foo' because no devices matching that specification "
            "are registered in this process; available devices: " S_CPU(0) ", " S_CPU(1) ", ");
        pt_placed_free(&r);
    }
    pt_placed_t r = s_place_one(S_VAR_GPU, "/job:foo/replica:17", "dtype=float", false);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "because no devices matching that specification are "
                   "registered in this process");
    pt_placed_free(&r);
    r = s_place_one(S_INPUT, "/device:FakeGPU:11", S_INPUT_T, false);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "Cannot assign a device for operation in: in was explicitly assigned to "
                   "/device:FakeGPU:11 but available devices are [ " S_CPU(0) ", " S_CPU(1) ", ");
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   S_GPU(9) " ]. Make sure the device specification refers to a valid device.");
    pt_placed_free(&r);
    r = s_place_one(S_INPUT, "/device:FakeGPU:11", S_INPUT_T, true);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_GPU(0));
    pt_placed_free(&r);
}

static void test_placer_reports_ops_without_kernels(void **state)
{
    (void)state;
    pt_placed_t r = s_place_one(S_VAR, NULL, "dtype=float", true);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "No OpKernel was registered to support Op '" S_VAR "' used by node in; "
                   "registered devices: [FakeCPU, FakeGPU]; registered kernels: <no registered "
                   "kernels>");
    pt_placed_free(&r);
    r = s_place_one("NoSuchOp", "/device:FakeCPU:0", NULL, true);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "No OpKernel was registered to support Op 'NoSuchOp' "
                   "used by node in (the op is unknown); ");
    pt_placed_free(&r);
    zf_op_registry_reset_kernels();
    pt_kernels(S_VAR ":GPU");
    pt_devs_t cpu_only = {0};
    pt_devs_add(&cpu_only, "a", 0, 0, "CPU", 0);
    pt_gb_t b = {0};
    pt_gb_node(&b, "var", S_VAR, NULL, NULL, "dtype=float");
    r = pt_place(pt_gb_graph(&b), &cpu_only, false);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "No OpKernel was registered to support Op '" S_VAR "' used by node var; "
                   "registered devices: [CPU]; registered kernels: device='GPU'");
    pt_placed_free(&r);
}

static void test_placer_reports_malformed_specs(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU");
    pt_placed_t r = s_place_one(S_INPUT, "/foo:bar", S_INPUT_T, true);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "Cannot assign a device for operation in: Malformed "
                   "device specification '/foo:bar'");
    pt_placed_free(&r);
}

static void test_placer_reports_a_type_without_a_kernel_unless_soft(void **state)
{
    (void)state;
    pt_kernels(S_VAR_GPU ":FakeGPU " S_INPUT ":FakeCPU");
    pt_placed_t r = s_place_one(S_VAR_GPU, "/device:FakeCPU:0", "dtype=float", false);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "Cannot assign a device for operation in: Could not satisfy explicit device "
                   "specification '/device:FakeCPU:0' because no supported kernel for FakeCPU "
                   "devices is available.\nColocation Debug Info:");
    pt_placed_free(&r);
    r = s_place_one(S_VAR_GPU, "/device:FakeCPU:0", "dtype=float", true);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_GPU(0));
    pt_placed_free(&r);
    r = s_place_one(S_INPUT, "/device:FakeGPU:0", S_INPUT_T, true);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    pt_placed_free(&r);
}

static void test_placer_soft_placement_follows_reference_inputs(void **state)
{
    (void)state;
    pt_kernels(S_VAR_GPU ":FakeGPU " S_VAR_CPU ":FakeCPU " S_ENFORCE ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "var_gpu", S_VAR_GPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "force_gpu", S_ENFORCE, "var_gpu", "/device:FakeCPU:0", "dtype=float");
    pt_gb_node(&b, "var_cpu", S_VAR_CPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "force_cpu", S_ENFORCE, "var_cpu", "/device:FakeGPU:0", "dtype=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, true);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "var_gpu"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "force_gpu"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "var_cpu"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "force_cpu"), S_CPU(0));
    pt_placed_free(&r);
}

static void test_placer_reports_an_unsatisfiable_reference_connection(void **state)
{
    (void)state;
    pt_kernels(S_VAR_GPU ":FakeGPU " S_INPUT ":FakeCPU " S_ASSIGN_C ":FakeCPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "var", S_VAR_GPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "assign", S_ASSIGN_C, "var,in", NULL, "T=float");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, true);
    s_assert_error(&r, ZF_INVALID_ARGUMENT,
                   "Nodes were connected by a reference connection (requiring them to be on the "
                   "same device), but the two nodes were assigned two different devices: Cannot "
                   "colocate nodes var and assign because no device type supports both");
    pt_placed_free(&r);
}

/* var1_cpu, var2_cpu -> assign1, assign2 <- in (a generator on both types). */
static zf_graph_t *s_two_consumers_graph(void)
{
    pt_gb_t b = {0};
    pt_gb_node(&b, "var1_cpu", S_VAR_CPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "var2_cpu", S_VAR_CPU, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "in", S_OUTPUT, NULL, NULL, "dtype=float");
    pt_gb_node(&b, "assign1", S_ASSIGN, "var1_cpu,in", NULL, "T=float");
    pt_gb_node(&b, "assign2", S_ASSIGN, "var2_cpu,in", NULL, "T=float");
    return pt_gb_graph(&b);
}

static void test_placer_generator_follows_consumers_only_on_one_device(void **state)
{
    (void)state;
    pt_kernels(S_VAR_CPU ":FakeCPU " S_OUTPUT ":FakeCPU,FakeGPU " S_ASSIGN ":FakeCPU,FakeGPU");
    pt_placed_t r = pt_place(s_two_consumers_graph(), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "assign1"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "assign2"), S_CPU(0));
    pt_placed_free(&r);
    const char *pre[5] = {S_CPU(1), S_CPU(2), NULL, NULL, NULL};
    zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
    o.assigned = pre;
    r = pt_place_opts(s_two_consumers_graph(), &s_devs, &o);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "assign1"), S_CPU(1));
    assert_string_equal(pt_dev(&r, "assign2"), S_CPU(2));
    assert_string_equal(pt_dev(&r, "in"), S_GPU(0));
    pt_placed_free(&r);
}

/* a, b: resource _Args pinned to GPU and CPU; id1 asks to join id2's group. */
static void test_placer_keeps_resource_sources_on_their_requested_devices(void **state)
{
    (void)state;
    pt_kernels("_Arg:FakeCPU,FakeGPU Identity:FakeCPU,FakeGPU");
    for (int soft = 0; soft < 2; soft++) {
        pt_gb_t b = {0};
        pt_gb_node(&b, "a", "_Arg", NULL, "/device:FakeGPU:0", "T=resource");
        pt_gb_node(&b, "b", "_Arg", NULL, "/device:FakeCPU:0", "T=resource");
        pt_gb_node(&b, "id1", "Identity", "a", NULL, "T=resource;_class=[loc:@id2]");
        pt_gb_node(&b, "id2", "Identity", "b", NULL, "T=resource");
        pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, soft);
        if (soft) {
            s_assert_ok(&r);
            assert_string_equal(pt_dev(&r, "a"), S_GPU(0));
            assert_string_equal(pt_dev(&r, "id1"), S_GPU(0));
            assert_string_equal(pt_dev(&r, "b"), S_CPU(0));
            assert_string_equal(pt_dev(&r, "id2"), S_CPU(0));
        } else {
            s_assert_error(&r, ZF_INVALID_ARGUMENT,
                           "Cannot colocate nodes id2 and id1: Cannot merge devices with "
                           "incompatible types: '/device:FakeCPU:0' and '/device:FakeGPU:0'");
        }
        pt_placed_free(&r);
    }
}

static void test_placer_lets_soft_placement_override_requested_devices(void **state)
{
    (void)state;
    pt_kernels("_Arg:FakeCPU,FakeGPU Identity:FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "a", "_Arg", NULL, NULL, "T=resource");
    pt_gb_node(&b, "b", "_Arg", NULL, NULL, "T=resource");
    pt_gb_node(&b, "id_a", "Identity", "a", "/device:FakeGPU:0", "T=resource");
    pt_gb_node(&b, "id_b", "Identity", "b", "/device:FakeCPU:0", "T=resource");
    pt_gb_node(&b, "id1", "Identity", "id_a", NULL, "T=resource;_class=[loc:@id2]");
    pt_gb_node(&b, "id2", "Identity", "id_b", NULL, "T=resource");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, true);
    s_assert_ok(&r);
    const char *all[] = {"a", "b", "id_a", "id_b", "id1", "id2"};
    for (int i = 1; i < 6; i++) assert_string_equal(pt_dev(&r, all[i]), pt_dev(&r, "a"));
    pt_placed_free(&r);
}

/* The first Identity of the graph takes floats; later ones forward
 * resources, which only their attrs say. */
static void test_placer_finds_resource_inputs_given_by_type_attrs(void **state)
{
    (void)state;
    pt_kernels("Const:FakeCPU,FakeGPU Identity:FakeCPU,FakeGPU IdentityN:FakeCPU,FakeGPU "
               "VarHandleOp:FakeCPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "c", "Const", NULL, NULL, "dtype=float");
    pt_gb_node(&b, "f", "Identity", "c", NULL, "T=float");
    pt_gb_node(&b, "v", "VarHandleOp", NULL, NULL, "dtype=float");
    pt_gb_node(&b, "r", "Identity", "v", NULL, "T=resource");
    pt_gb_node(&b, "n", "IdentityN", "c,v", NULL, "T=[float,resource]");
    pt_placed_t r = pt_place(pt_gb_graph(&b), &s_devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "f"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "r"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "n"), S_CPU(0));
    pt_placed_free(&r);
}

/* log_placement logs each device, each dropped colocation request and each
 * overridden spec; the placement itself does not change. */
static void test_placer_places_the_same_when_logging(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU_CPU ":FakeCPU " S_RELU_GPU ":FakeGPU " S_VAR
                       ":FakeCPU,FakeGPU " S_ASSIGN ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_gb_node(&b, "foo", S_RELU_GPU, "in", NULL, "T=float;_class=[loc:@in]");
    pt_gb_node(&b, "var", S_VAR, NULL, "/device:FakeGPU:2", "dtype=float");
    pt_gb_node(&b, "assign", S_ASSIGN, "var,in", "/device:FakeCPU:1", "T=float");
    zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
    o.allow_soft_placement = true;
    o.log_placement = true;
    pt_placed_t r = pt_place_opts(pt_gb_graph(&b), &s_devs, &o);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "foo"), S_GPU(0));
    assert_string_equal(pt_dev(&r, "var"), S_GPU(2));
    assert_string_equal(pt_dev(&r, "assign"), S_GPU(2));
    pt_placed_free(&r);
}

/* ---- zflow's balanced choice -------------------------------------------- */

static void test_placer_balanced_picks_the_least_loaded_device_of_the_best_type(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU");
    pt_devs_t devs = s_devs;
    for (int i = 0; i < devs.n; i++) devs.d[i].load = 10;
    devs.d[0].load = 12; /* FakeCPU:0 */
    devs.d[2].load = 3;  /* FakeCPU:1 */
    devs.d[3].load = 3;  /* FakeGPU:8 */
    devs.d[5].load = 3;  /* FakeGPU:7 */
    pt_placed_t r = pt_place(s_no_constraints_graph(), &devs, false);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(1));
    assert_string_equal(pt_dev(&r, "n1"), S_GPU(7)); /* ties break by name */
    assert_string_equal(pt_dev(&r, "n2"), S_GPU(7)); /* the graph stays together */
    pt_placed_free(&r);
    zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
    o.mode = ZF_PLACE_FIRST;
    r = pt_place_opts(s_no_constraints_graph(), &devs, &o);
    s_assert_ok(&r);
    assert_string_equal(pt_dev(&r, "in"), S_CPU(0));
    assert_string_equal(pt_dev(&r, "n1"), S_GPU(0));
    pt_placed_free(&r);
}

static void test_placer_is_deterministic(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU");
    pt_placed_t a = pt_place(s_no_constraints_graph(), &s_devs, false);
    pt_placed_t b = pt_place(s_no_constraints_graph(), &s_devs, false);
    s_assert_ok(&a);
    s_assert_ok(&b);
    assert_memory_equal(a.assign, b.assign, 3 * sizeof(int));
    pt_placed_t c = pt_place(a.g, &s_devs, false);
    a.g = NULL;
    assert_memory_equal(b.assign, c.assign, 3 * sizeof(int));
    pt_placed_free(&a);
    pt_placed_free(&b);
    pt_placed_free(&c);
}

static void test_placer_rejects_a_bad_device_set(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU");
    pt_devs_t devs = {0};
    pt_devs_add(&devs, "a", 0, 0, "FakeCPU", 0);
    pt_devs_add(&devs, "a", 0, 0, "FakeCPU", 0);
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    pt_placed_t r = pt_place(pt_gb_graph(&b), &devs, false);
    s_assert_error(&r, ZF_INVALID_ARGUMENT, "device '" S_CPU(0) "' is listed twice");
    pt_placed_free(&r);
    devs.d[1].name.has_id = false;
    pt_gb_node(&b, "in", S_INPUT, NULL, NULL, S_INPUT_T);
    r = pt_place(pt_gb_graph(&b), &devs, false);
    s_assert_error(
        &r, ZF_INVALID_ARGUMENT,
        "device 1 ('/job:a/replica:0/task:0/device:FakeCPU:*') is not a full device name");
    pt_placed_free(&r);
}

static void test_placer_writes_devices_into_the_graphdef_when_asked(void **state)
{
    (void)state;
    pt_kernels(S_INPUT ":FakeCPU " S_RELU ":FakeCPU,FakeGPU");
    pt_gb_t b = {0};
    pt_gb_node(&b, "in", S_INPUT, NULL, "/device:FakeCPU:3", S_INPUT_T);
    pt_gb_node(&b, "n1", S_RELU, "in:0", NULL, "T=float");
    Tensorflow__GraphDef *gd = NULL;
    zf_graph_t *g = NULL;
    assert_true(zf_ok(zf_graphdef_read_mem(b.text, b.len, ZF_FORMAT_PBTXT, &gd)));
    free(b.text);
    assert_true(zf_ok(zf_graph_new_from_graphdef(gd, &g)));
    int assign[2];
    assert_true(zf_ok(zf_placer_run(g, s_devs.d, s_devs.n, NULL, assign)));
    assert_string_equal(zf_graph_node_device(g, 1), ""); /* not written unless asked */
    int bad[2] = {assign[0], s_devs.n};
    zf_status_t s = zf_placer_write_devices(gd, s_devs.d, s_devs.n, bad);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&s);
    assert_true(zf_ok(zf_placer_write_devices(gd, s_devs.d, s_devs.n, assign)));
    assert_string_equal(gd->node[0]->device, S_CPU(3));
    assert_string_equal(gd->node[1]->device, S_GPU(0));
    zf_graph_destroy(&g);
    zf_graphdef_free(&gd);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, s_setup)
    const struct CMUnitTest tests[] = {
        T(test_placer_prefers_gpu_over_cpu),
        T(test_placer_puts_a_generator_on_cpu_only_when_gpu_has_no_kernel),
        T(test_placer_colocates_reference_connections_on_the_constrained_type),
        T(test_placer_keeps_metadata_ops_with_their_input_when_allowed),
        T(test_placer_generator_follows_its_single_consumer),
        T(test_placer_ignores_the_generator_heuristic_on_a_wrong_device),
        T(test_placer_honours_partial_specs),
        T(test_placer_honours_full_specs),
        T(test_placer_accepts_legacy_specs_on_cpu_and_gpu),
        T(test_placer_honours_job_and_task_specs),
        T(test_placer_keeps_assigned_devices),
        T(test_placer_pruned_places_only_what_the_run_needs),
        T(test_placer_pruned_cuts_at_feeds),
        T(test_placer_rejects_bad_assigned_devices),
        T(test_placer_colocates_every_kind_of_reference_connection),
        T(test_placer_colocates_resource_handles_with_their_users),
        T(test_placer_rejects_resource_handles_pinned_to_different_devices),
        T(test_placer_ignores_an_infeasible_spec_across_a_reference_edge),
        T(test_placer_lets_the_more_specific_end_of_a_reference_edge_win),
        T(test_placer_colocates_class_groups),
        T(test_placer_colocates_with_nodes_named_later_or_absent),
        T(test_placer_ignores_a_class_attr_that_is_not_a_list),
        T(test_placer_reports_a_class_group_without_a_common_type),
        T(test_placer_combines_class_groups_and_reference_connections),
        T(test_placer_colocates_many_class_groups_and_reference_connections),
        T(test_placer_fails_when_no_devices_are_registered),
        T(test_placer_reports_a_group_that_requires_an_incompatible_device),
        T(test_placer_reports_unknown_devices),
        T(test_placer_reports_ops_without_kernels),
        T(test_placer_reports_malformed_specs),
        T(test_placer_reports_a_type_without_a_kernel_unless_soft),
        T(test_placer_soft_placement_follows_reference_inputs),
        T(test_placer_reports_an_unsatisfiable_reference_connection),
        T(test_placer_generator_follows_consumers_only_on_one_device),
        T(test_placer_keeps_resource_sources_on_their_requested_devices),
        T(test_placer_lets_soft_placement_override_requested_devices),
        T(test_placer_finds_resource_inputs_given_by_type_attrs),
        T(test_placer_places_the_same_when_logging),
        T(test_placer_balanced_picks_the_least_loaded_device_of_the_best_type),
        T(test_placer_is_deterministic),
        T(test_placer_rejects_a_bad_device_set),
        T(test_placer_writes_devices_into_the_graphdef_when_asked),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
