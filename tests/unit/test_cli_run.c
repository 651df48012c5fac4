/* Tests for `zflow run --inprocess`: runs the real binary on the example
 * graphs and checks its output, the .npy files it writes and its exit
 * codes. */
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
#include "test_util.h"
#include "common/tensor.h"

#define EXAMPLES ZF_TEST_DATA_DIR "/../../examples"

typedef struct {
    int rc;
    char out[65536];
} s_run_t;

/* Runs "zflow <args>" with stderr folded into the captured output. */
static void s_zflow(s_run_t *r, const char *fmt, ...) ZF_PRINTF(2, 3);
static void s_zflow(s_run_t *r, const char *fmt, ...)
{
    char args[4096], cmd[4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s/zflow %s 2>&1", ZF_BIN_DIR, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    int status = pclose(p);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void s_contains(const s_run_t *r, const char *needle)
{
    if (!strstr(r->out, needle)) fail_msg("expected '%s' in output:\n%s", needle, r->out);
}

static void s_expect(const s_run_t *r, int rc, const char *needle)
{
    if (r->rc != rc) fail_msg("exit code %d, want %d; output:\n%s", r->rc, rc, r->out);
    if (needle) s_contains(r, needle);
}

typedef struct {
    char dir[64];
} s_tmp_t;

static int s_setup(void **state)
{
    s_tmp_t *t = calloc(1, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/zf_cli_run_XXXXXX");
    if (!mkdtemp(t->dir)) return -1;
    *state = t;
    return 0;
}

static int s_teardown(void **state)
{
    s_tmp_t *t = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    if (system(cmd) != 0) return -1;
    free(t);
    return 0;
}

/* The MLP's output for this feed, as NumPy prints it (values computed with
 * NumPy 1.24 from the example's weights). */
#define MLP_FEED  "'x=[[1,2,3,4],[-1,0.5,2,-3]]'"
#define MLP_PROBS "probs =\n[[0.1978161 0.8021839]\n [0.4837557 0.5162443]]\n"

static void test_cli_run_prints_the_mlp_fetch_like_numpy(void **state)
{
    (void)state;
    s_run_t r;
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --feed " MLP_FEED " --fetch probs");
    s_expect(&r, 0, NULL);
    assert_string_equal(r.out, MLP_PROBS);
    /* Integer literals take the graph's dtype; an explicit :float32 too. */
    s_zflow(&r, "run --inprocess --feed 'x:float32=[[1,2,3,4],[-1,0.5,2,-3]]' " EXAMPLES
                "/mlp.pbtxt --fetch probs:0");
    s_expect(&r, 0, "probs:0 =\n[[0.1978161 0.8021839]\n");
    s_zflow(&r,
            "run " EXAMPLES "/mlp.pbtxt --inprocess --feed 'x=[[0,0,0,0]]' --quiet --fetch probs");
    s_expect(&r, 0, NULL);
    assert_string_equal(r.out, "");
}

static void test_cli_run_writes_one_npy_per_fetch(void **state)
{
    s_tmp_t *t = *state;
    s_run_t r;
    s_zflow(&r,
            "run " EXAMPLES "/mlp.pbtxt --inprocess --feed " MLP_FEED
            " --fetch probs layer1/relu:0 --out-dir %s/out --quiet",
            t->dir);
    s_expect(&r, 0, NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/out/probs.npy", t->dir);
    zf_tensor_t *p = NULL, *h = NULL;
    assert_int_equal(zf_npy_read_file(path, &p).code, ZF_OK);
    snprintf(path, sizeof path, "%s/out/layer1_relu_0.npy", t->dir);
    assert_int_equal(zf_npy_read_file(path, &h).code, ZF_OK);
    assert_int_equal(zf_tensor_dtype(p), ZF_FLOAT);
    assert_int_equal(zf_tensor_shape(p)->dims[0], 2);
    assert_int_equal(zf_tensor_shape(h)->dims[1], 3);
    const float *v = zf_tensor_data(p);
    assert_true(v[0] > 0.1978160f && v[0] < 0.1978162f);
    zf_tensor_unref(&p);
    zf_tensor_unref(&h);
}

static void test_cli_run_feeds_npy_files_to_the_cnn(void **state)
{
    s_tmp_t *t = *state;
    float v[144];
    for (int i = 0; i < 144; i++) v[i] = (float)((i * 3) % 17 - 8) / 8.0f;
    zf_tensor_t *x = NULL;
    zf_shape_t shape = ZF_SHAPE(2, 6, 6, 2);
    assert_int_equal(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &x).code, ZF_OK);
    char path[128];
    snprintf(path, sizeof path, "%s/x.npy", t->dir);
    assert_int_equal(zf_npy_write_file(path, x).code, ZF_OK);
    zf_tensor_unref(&x);
    s_run_t r;
    s_zflow(&r, "run " EXAMPLES "/cnn.pbtxt --inprocess --feed x=@%s --fetch probs --out-dir %s",
            path, t->dir);
    s_expect(&r, 0, "probs =\n[[0.16046");
    snprintf(path, sizeof path, "%s/probs.npy", t->dir);
    zf_tensor_t *p = NULL;
    assert_int_equal(zf_npy_read_file(path, &p).code, ZF_OK);
    /* NumPy 1.24, float64 from the float32 weights of examples/cnn.pbtxt */
    static const double want[6] = {0.1604607199, 0.2562552897, 0.5832839904,
                                   0.1593153585, 0.5447138866, 0.2959707549};
    const float *got = zf_tensor_data(p);
    for (int i = 0; i < 6; i++) assert_true(got[i] > want[i] - 1e-5 && got[i] < want[i] + 1e-5);
    zf_tensor_unref(&p);
    s_zflow(&r, "run " EXAMPLES "/cnn.pbtxt --inprocess --feed x=@%s/missing.npy --fetch probs",
            t->dir);
    s_expect(&r, 1, "zflow run: NOT_FOUND: ");
}

static void test_cli_run_uses_the_devices_it_is_given(void **state)
{
    s_tmp_t *t = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/pinned.pbtxt", t->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("node { name: 'a' op: 'Placeholder' device: '/cpu:0'"
          " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
          "node { name: 'b' op: 'Square' input: 'a' device: '/device:CPU:1'"
          " attr { key: 'T' value { type: DT_FLOAT } } }\n"
          "node { name: 'c' op: 'AddV2' input: 'a' input: 'b' device: '/cpu:0'"
          " attr { key: 'T' value { type: DT_FLOAT } } }\n",
          f);
    fclose(f);
    s_run_t r;
    s_zflow(&r, "run %s --inprocess --devices cpu:2 --feed a=[1.5,-2] --fetch c", path);
    s_expect(&r, 0, NULL);
    assert_string_equal(r.out, "c =\n[3.75 2.  ]\n");
    s_zflow(&r, "run %s --inprocess --feed a=[1.5,-2] --fetch c", path);
    s_expect(&r, 1, "Cannot assign a device for operation b");
}

/* The value of the first "key": in text after from, as a number. */
static long long s_json_num(const char *from, const char *key)
{
    const char *at = strstr(from, key);
    if (!at) fail_msg("no %s in the trace", key);
    return atoll(at + strlen(key));
}

/* Checks a trace zflow run wrote for the MLP of gd (its second layer on
 * CPU:1): a process per device, a complete event for every node (each
 * within the step's wall time), and an arrow for each tensor between the
 * devices, its two ends with one id. */
static void s_check_mlp_trace(const char *trace, const Tensorflow__GraphDef *gd)
{
    FILE *f = fopen(trace, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    assert_true(len > 0 && len < sizeof text - 1);
    long long wall = s_json_num(text, "\"step_wall_us\":");
    assert_true(wall > 0);
    assert_non_null(
        strstr(text, "\"args\":{\"name\":\"/job:localhost/replica:0/task:0/device:CPU:0\"}"));
    assert_non_null(
        strstr(text, "\"args\":{\"name\":\"/job:localhost/replica:0/task:0/device:CPU:1\"}"));
    for (size_t i = 0; i < gd->n_node; i++) {
        if (strcmp(gd->node[i]->name, "x") == 0) continue; /* fed: its _Recv runs instead */
        char needle[256];
        snprintf(needle, sizeof needle, "{\"ph\":\"X\",\"name\":\"%s\",", gd->node[i]->name);
        const char *ev = strstr(text, needle);
        if (!ev) fail_msg("%s: no event for node %s", trace, gd->node[i]->name);
        long long ts = s_json_num(ev, "\"ts\":"), dur = s_json_num(ev, "\"dur\":");
        if (ts < 0 || dur < 0 || ts + dur > wall)
            fail_msg("%s: %s runs from %lld for %lld us, outside the step's %lld us", trace,
                     gd->node[i]->name, ts, dur, wall);
    }
    assert_non_null(strstr(text, "{\"ph\":\"X\",\"name\":\"_recv_x_0\",\"cat\":\"_Recv\""));
    /* layer1/relu goes to CPU:1: at least one arrow, each with both ends */
    int flows = 0;
    for (const char *at = text; (at = strstr(at, "{\"ph\":\"s\",\"id\":")) != NULL; at++) {
        long long id = s_json_num(at, "\"id\":");
        char finish[64];
        snprintf(finish, sizeof finish, "{\"ph\":\"f\",\"bp\":\"e\",\"id\":%lld,", id);
        assert_non_null(strstr(text, finish));
        flows++;
    }
    assert_true(flows >= 1);
}

/* zflow run --trace, in this process and on a local cluster of two
 * executors (the runs come back from both). */
static void test_cli_run_writes_a_chrome_trace_of_the_step(void **state)
{
    s_tmp_t *t = *state;
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(EXAMPLES "/mlp.pbtxt", ZF_FORMAT_AUTO, &gd));
    for (size_t i = 0; i < gd->n_node; i++) {
        Tensorflow__NodeDef *n = gd->node[i];
        if (strncmp(n->name, "layer2/", 7) != 0 && strcmp(n->name, "probs") != 0) continue;
        if (n->device != protobuf_c_empty_string) free(n->device);
        n->device = strdup("/job:localhost/replica:0/task:0/device:CPU:1");
    }
    char path[160], trace[160];
    snprintf(path, sizeof path, "%s/mlp2.pbtxt", t->dir);
    ASSERT_OK(zf_graphdef_write_file(gd, path, ZF_FORMAT_PBTXT));
    const char *modes[] = {"--inprocess", ""};
    for (int m = 0; m < 2; m++) {
        snprintf(trace, sizeof trace, "%s/step%d.json", t->dir, m);
        s_run_t r;
        char parts[160];
        snprintf(parts, sizeof parts, "%s/parts%d", t->dir, m);
        s_zflow(&r,
                "run %s %s --devices cpu:2 --feed " MLP_FEED
                " --fetch probs --trace %s --partition-graphs %s --quiet",
                path, modes[m], trace, parts);
        s_expect(&r, 0, NULL);
        s_check_mlp_trace(trace, gd);
        /* --partition-graphs: one GraphDef per device, each with its layer */
        const char *files[2] = {"_job_localhost_replica_0_task_0_device_CPU_0.pbtxt",
                                "_job_localhost_replica_0_task_0_device_CPU_1.pbtxt"};
        const char *nodes[2] = {"layer1/matmul", "layer2/matmul"};
        for (int d = 0; d < 2; d++) {
            char file[320];
            snprintf(file, sizeof file, "%s/%s", parts, files[d]);
            Tensorflow__GraphDef *pg = NULL;
            ASSERT_OK(zf_graphdef_read_file(file, ZF_FORMAT_PBTXT, &pg));
            bool found = false;
            for (size_t k = 0; k < pg->n_node; k++)
                found |= strcmp(pg->node[k]->name, nodes[d]) == 0;
            if (!found) fail_msg("%s lacks %s", file, nodes[d]);
            zf_graphdef_free(&pg);
        }
    }
    zf_graphdef_free(&gd);
}

/* --bf16: a FLOAT crossing between devices travels as BFLOAT16 (8 bits of
 * mantissa): 1 + 2^-8 arrives as 1, and -3.5 (exact in BFLOAT16) as
 * itself; without it, both arrive exact. In process and on a cluster. */
static void test_cli_run_sends_bfloat16_between_devices_when_asked(void **state)
{
    s_tmp_t *t = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/bf16.pbtxt", t->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("node { name: 'a' op: 'Placeholder' device: '/cpu:0'"
          " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
          "node { name: 'b' op: 'Identity' input: 'a' device: '/device:CPU:1'"
          " attr { key: 'T' value { type: DT_FLOAT } } }\n",
          f);
    fclose(f);
    const char *modes[] = {"--inprocess", ""};
    for (int m = 0; m < 2; m++) {
        s_run_t r;
        s_zflow(&r, "run %s %s --devices cpu:2 --feed a=[1.00390625,-3.5] --fetch b", path,
                modes[m]);
        s_expect(&r, 0, NULL);
        assert_string_equal(r.out, "b =\n[ 1.0039062 -3.5      ]\n");
        s_zflow(&r, "run %s %s --devices cpu:2 --bf16 --feed a=[1.00390625,-3.5] --fetch b", path,
                modes[m]);
        s_expect(&r, 0, NULL);
        assert_string_equal(r.out, "b =\n[ 1.  -3.5]\n");
    }
}

/* --recv-scheduling: the while loop over two devices (tests/data/sum_loop.pbtxt)
 * sums 1..n alike with and without it, in process and on a cluster (whose
 * master gets it through SessionOptions). */
static void test_cli_run_schedules_recvs_when_asked(void **state)
{
    (void)state;
    const char *modes[] = {"--inprocess", ""}, *opts[] = {"", "--recv-scheduling"};
    for (int m = 0; m < 2; m++)
        for (int o = 0; o < 2; o++) {
            s_run_t r;
            s_zflow(&r,
                    "run " ZF_TEST_DATA_DIR "/sum_loop.pbtxt %s --devices cpu:2 %s "
                    "--feed n:int64=100 --fetch w/s_exit",
                    modes[m], opts[o]);
            s_expect(&r, 0, "w/s_exit =\n5050\n");
        }
}

/* --place-pruned-graph: a node the step does not need, pinned to a GPU the
 * local cluster lacks, fails the step unless each step places only what it
 * needs; the flag is the service's (a usage error with --inprocess). */
static void test_cli_run_places_the_pruned_graph_when_asked(void **state)
{
    s_tmp_t *t = *state;
    char path[512];
    snprintf(path, sizeof path, "%s/pruned.pbtxt", t->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("node { name: 'x' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }\n"
          "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 3 } } } }\n"
          "node { name: 'y' op: 'Mul' input: 'x' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }\n"
          "node { name: 'bad' op: 'Identity' input: 'x' device: '/device:GPU:7'\n"
          "  attr { key: 'T' value { type: DT_FLOAT } } }\n",
          f);
    fclose(f);
    s_run_t r;
    s_zflow(&r, "run %s --devices cpu:2 --fetch y", path);
    s_expect(&r, 1, "Cannot assign a device for operation bad");
    s_zflow(&r, "run %s --devices cpu:2 --fetch y --place-pruned-graph", path);
    s_expect(&r, 0, "y =\n9.0\n");
    s_zflow(&r, "run %s --inprocess --fetch y --place-pruned-graph", path);
    s_expect(&r, 2, "--place-pruned-graph is a session option of the service");
}

static void test_cli_run_runs_targets_and_multiple_fetches(void **state)
{
    s_tmp_t *t = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/vars.pbtxt", t->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("node { name: 'v' op: 'VariableV2' attr { key: 'dtype' value { type: DT_INT32 } }"
          " attr { key: 'shape' value { shape { } } } }\n"
          "node { name: 'seven' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
          " attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 7 } } } }\n"
          "node { name: 'init' op: 'Assign' input: 'v' input: 'seven'"
          " attr { key: 'T' value { type: DT_INT32 } } }\n"
          "node { name: 'flag' op: 'Placeholder' attr { key: 'dtype' value { type: DT_BOOL } } }\n"
          "node { name: 'same' op: 'Identity' input: 'flag' attr { key: 'T' value { type: DT_BOOL "
          "} } }\n",
          f);
    fclose(f);
    s_run_t r;
    s_zflow(&r, "run %s --inprocess --target init", path);
    s_expect(&r, 0, NULL);
    assert_string_equal(r.out, "");
    s_zflow(&r,
            "run %s --inprocess --target init --fetch init seven --feed flag=[true,false]"
            " --fetch same",
            path);
    s_expect(&r, 0, "init =\n7\nseven =\n7\nsame =\n[ True False]\n");
    /* --target is not ignored: a target that is not in the graph fails */
    s_zflow(&r, "run %s --inprocess --target nosuch", path);
    s_expect(&r, 1, "nosuch");
}

static void test_cli_run_refuses_what_it_cannot_run(void **state)
{
    s_tmp_t *t = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/odd.pbtxt", t->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("node { name: 'c' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
          " attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
          "node { name: 'weird' op: 'FancyOp' input: 'c' }\n",
          f);
    fclose(f);
    s_run_t r;
    s_zflow(&r, "run %s --inprocess --fetch c", path);
    s_expect(&r, 1, "Op 'FancyOp' used by node weird");
    s_zflow(&r,
            "run " EXAMPLES "/mlp.pbtxt --inprocess --feed 'x:float64=[[1,2,3,4]]' --fetch probs");
    s_expect(&r, 1, "Cannot feed value of dtype float64 for Tensor 'x:0', which has dtype float32");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --fetch nosuch");
    s_expect(&r, 1, "nosuch");
}

/* A Placeholder's declared shape refuses a feed that breaks it, the same
 * in one process and on a local cluster; a fitting feed runs on both. */
static void test_cli_run_checks_a_placeholders_shape_on_both_paths(void **state)
{
    s_tmp_t *t = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/shaped.pbtxt", t->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } }"
          " attr { key: 'shape' value { shape { dim { size: 2 } } } } }\n"
          "node { name: 'y' op: 'Identity' input: 'x'"
          " attr { key: 'T' value { type: DT_FLOAT } } }\n",
          f);
    fclose(f);
    static const char *const modes[2] = {"--inprocess", "--devices cpu:1"};
    for (int m = 0; m < 2; m++) {
        s_run_t r;
        s_zflow(&r, "run %s %s --feed x=[1,2,3] --fetch y", path, modes[m]);
        s_expect(&r, 1, "Cannot feed value of shape [3] for Tensor 'x:0', which has shape [2]");
        if (m == 0) { /* a rank that differs: the same check, once */
            s_zflow(&r, "run %s %s --feed x=[[1,2]] --fetch y", path, modes[m]);
            s_expect(&r, 1,
                     "Cannot feed value of shape [1,2] for Tensor 'x:0', which has shape [2]");
        }
        s_zflow(&r, "run %s %s --feed x=[4,-5] --fetch y", path, modes[m]);
        s_expect(&r, 0, NULL);
        assert_string_equal(r.out, "y =\n[ 4. -5.]\n");
    }
}

static void test_cli_run_answers_bad_usage_with_exit_code_2(void **state)
{
    (void)state;
    s_run_t r;
    s_zflow(&r, "run --help");
    s_expect(&r, 0, "usage: zflow run GRAPH --inprocess");
    s_zflow(&r, "--help");
    s_expect(&r, 0, "  run ");
    /* Without --inprocess the job runs on an embedded local cluster, whose
     * executor reports the missing feed. */
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --fetch probs");
    s_expect(&r, 1, "You must feed a value for placeholder tensor 'x'");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess");
    s_expect(&r, 2, "nothing to run: give --fetch or --target");
    s_zflow(&r, "run --inprocess --fetch probs");
    s_expect(&r, 2, "need a GRAPH file");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --fetch");
    s_expect(&r, 2, "--fetch needs a value");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --bogus --fetch probs");
    s_expect(&r, 2, "unknown option '--bogus'");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --broker tcp://127.0.0.1:1 --fetch probs");
    s_expect(&r, 2, "give --broker or --inprocess, not both");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --timeout-ms 0 --fetch probs");
    s_expect(&r, 2, "--timeout-ms must be a positive number, not '0'");
    s_zflow(&r,
            "run " EXAMPLES "/mlp.pbtxt --broker tcp://127.0.0.1:1 --devices cpu:2 --fetch probs");
    s_expect(&r, 2, "--devices does not apply with --broker: the service has its own");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess -q --steps x --fetch probs");
    s_expect(&r, 2, "--steps must be a number from 1 to 1000000000, not 'x'");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --feed 'x=[[1,2],[3]]' --fetch probs");
    s_expect(&r, 2, "bad value '[[1,2],[3]]' at offset 10: nesting is not rectangular");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --feed 'x=[1,2' --fetch probs");
    s_expect(&r, 2, "expected ',' or ']'");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --feed 'x=[[1,2,3,x]]' --fetch probs");
    s_expect(&r, 2, "expected a number, true, false or '['");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --feed 'x:float99=1' --fetch probs");
    s_expect(&r, 2, "unknown dtype 'float99'");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --feed x --fetch probs");
    s_expect(&r, 2, "--feed 'x': expected NAME=VALUE");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --devices cpu:0 --fetch probs");
    s_expect(&r, 1, "zflow run: INVALID_ARGUMENT: ");
}

/* Writes text to the test's directory as name; path gets its path. */
static void s_write_graph(const s_tmp_t *t, const char *name, const char *text, char *path,
                          size_t size)
{
    snprintf(path, size, "%s/%s", t->dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* A while loop counting n down to 0 and summing n..1 (its condition a Cast
 * to bool), run in one process. */
#define I64 " attr { key: 'T' value { type: DT_INT64 } }"
static const char s_loop_graph[] =
    "node { name: 'n' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT64 } } }\n"
    "node { name: 'zero' op: 'Const' attr { key: 'dtype' value { type: DT_INT64 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: 0 } } } }\n"
    "node { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_INT64 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: 1 } } } }\n"
    "node { name: 'enter_i' op: 'Enter' input: 'n'" I64
    " attr { key: 'frame_name' value { s: 'w' } } }\n"
    "node { name: 'enter_acc' op: 'Enter' input: 'zero'" I64
    " attr { key: 'frame_name' value { s: 'w' } } }\n"
    "node { name: 'enter_one' op: 'Enter' input: 'one'" I64
    " attr { key: 'frame_name' value { s: 'w' } } attr { key: 'is_constant' value { b: true } } "
    "}\n"
    "node { name: 'merge_i' op: 'Merge' input: 'enter_i' input: 'next_i'" I64
    " attr { key: 'N' value { i: 2 } } }\n"
    "node { name: 'merge_acc' op: 'Merge' input: 'enter_acc' input: 'next_acc'" I64
    " attr { key: 'N' value { i: 2 } } }\n"
    "node { name: 'nonzero' op: 'Cast' input: 'merge_i' attr { key: 'SrcT' value { type: "
    "DT_INT64 } } attr { key: 'DstT' value { type: DT_BOOL } } }\n"
    "node { name: 'cond' op: 'LoopCond' input: 'nonzero' }\n"
    "node { name: 'sw_i' op: 'Switch' input: 'merge_i' input: 'cond'" I64 " }\n"
    "node { name: 'sw_acc' op: 'Switch' input: 'merge_acc' input: 'cond'" I64 " }\n"
    "node { name: 'exit_i' op: 'Exit' input: 'sw_i'" I64 " }\n"
    "node { name: 'exit_acc' op: 'Exit' input: 'sw_acc'" I64 " }\n"
    "node { name: 'i' op: 'Identity' input: 'sw_i:1'" I64 " }\n"
    "node { name: 'acc' op: 'Identity' input: 'sw_acc:1'" I64 " }\n"
    "node { name: 'acc1' op: 'AddV2' input: 'acc' input: 'i'" I64 " }\n"
    "node { name: 'i1' op: 'Sub' input: 'i' input: 'enter_one'" I64 " }\n"
    "node { name: 'next_i' op: 'NextIteration' input: 'i1'" I64 " }\n"
    "node { name: 'next_acc' op: 'NextIteration' input: 'acc1'" I64 " }\n";

static void test_cli_run_runs_a_while_loop_in_process(void **state)
{
    s_tmp_t *t = *state;
    char path[128];
    s_write_graph(t, "loop.pbtxt", s_loop_graph, path, sizeof path);
    s_run_t r;
    s_zflow(&r, "run %s --inprocess --feed n:int64=100 --fetch exit_acc exit_i", path);
    s_expect(&r, 0, "exit_acc =\n5050\nexit_i =\n0\n");
    s_zflow(&r, "run %s --inprocess --feed n:int64=0 --fetch exit_acc", path);
    s_expect(&r, 0, "exit_acc =\n0\n");
    /* TensorFlow's own while loop: an int32 counted from 0 while below 10. */
    s_zflow(&r, "run " ZF_TF_DATA_DIR "/graph-while-loop.pbtxt --inprocess --fetch while/Exit");
    s_expect(&r, 0, "while/Exit =\n10\n");
}

/* If(p, a) with then = Square pinned to CPU:1 and else = Neg on CPU:0. */
static const char *const s_if_graph =
    "node { name: 'p' op: 'Placeholder' device: '/device:CPU:0'"
    " attr { key: 'dtype' value { type: DT_BOOL } } }\n"
    "node { name: 'a' op: 'Placeholder' device: '/device:CPU:0'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'if' op: 'If' input: 'p' input: 'a' device: '/device:CPU:0'"
    " attr { key: 'Tcond' value { type: DT_BOOL } }"
    " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
    " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
    " attr { key: 'then_branch' value { func { name: 'Sq' } } }"
    " attr { key: 'else_branch' value { func { name: 'Ng' } } } }\n"
    "library { function { signature { name: 'Sq' input_arg { name: 'x' type: DT_FLOAT }"
    " output_arg { name: 'y' type: DT_FLOAT } }"
    " node_def { name: 'n' op: 'Square' input: 'x' device: '/device:CPU:1'"
    "   attr { key: 'T' value { type: DT_FLOAT } } }"
    " ret { key: 'y' value: 'n:y:0' } }"
    " function { signature { name: 'Ng' input_arg { name: 'x' type: DT_FLOAT }"
    " output_arg { name: 'y' type: DT_FLOAT } }"
    " node_def { name: 'n' op: 'Neg' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }"
    " ret { key: 'y' value: 'n:y:0' } } }\n";

/* Functions through the service: the master inlines and lowers them, a
 * branch runs on another executor than its If, and TensorFlow's functional
 * While runs as a frame. */
static void test_cli_run_runs_functions_on_a_local_cluster(void **state)
{
    s_tmp_t *t = *state;
    char path[128];
    s_write_graph(t, "if.pbtxt", s_if_graph, path, sizeof path);
    s_run_t r;
    s_zflow(&r, "run %s --devices cpu:2 --feed p=true --feed a=3 --fetch if", path);
    s_expect(&r, 0, "if =\n9.0\n");
    s_zflow(&r, "run %s --devices cpu:2 --feed p=false --feed a=3 --fetch if", path);
    s_expect(&r, 0, "if =\n-3.0\n");
    /* while iter > 0 { iter -= 1; val += val }: 1.5 doubled three times */
    s_zflow(&r, "run " ZF_TF_DATA_DIR "/functional-while-ops.pbtxt --devices cpu:1 --feed iter=3"
                " --feed val=1.5 --fetch main main1");
    s_expect(&r, 0, "main =\n12.0\nmain1 =\n12.0\n");
}

static void test_cli_run_places_softly_and_by_mode_when_asked(void **state)
{
    char path[128];
    s_write_graph(
        *state, "soft.pbtxt",
        "node { name: 'a' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
        "node { name: 'b' op: 'Square' input: 'a' device: '/device:CPU:1'"
        " attr { key: 'T' value { type: DT_FLOAT } } }\n",
        path, sizeof path);
    s_run_t r;
    /* CPU:1 does not exist: an error, unless soft placement may move b. */
    s_zflow(&r, "run %s --inprocess --feed a=[3] --fetch b", path);
    s_expect(&r, 1, "Cannot assign a device for operation b");
    s_zflow(&r, "run %s --inprocess --allow-soft-placement --feed a=[3] --fetch b", path);
    s_expect(&r, 0, "soft placement: no device matching '/device:CPU:1'");
    s_contains(&r, "falling back to the best valid device, /job:localhost/replica:0/task:0/"
                   "device:CPU:0\nb =\n[9.]\n");
    /* The same options travel to the service (an embedded local cluster). */
    s_zflow(&r, "run %s --allow-soft-placement --place first --feed a=[3] --fetch b", path);
    s_expect(&r, 0, NULL);
    assert_string_equal(r.out, "b =\n[9.]\n");
    s_zflow(&r, "run %s --place first --feed a=[3] --fetch b", path);
    s_expect(&r, 1, "Cannot assign a device for operation b");
    s_zflow(&r, "run " EXAMPLES
                "/mlp.pbtxt --inprocess --devices cpu:2 --place balanced --feed " MLP_FEED
                " --fetch probs");
    s_expect(&r, 0, NULL);
    assert_string_equal(r.out, MLP_PROBS);
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --place widely --fetch probs");
    s_expect(&r, 2, "--place takes first or balanced, not 'widely'");
    s_zflow(&r, "run " EXAMPLES "/mlp.pbtxt --inprocess --fetch probs --place");
    s_expect(&r, 2, "--place needs a value");
}

/* --partition-by task on a local cluster of two tasks of two CPUs: y on
 * task 0, read on both devices of task 1, leaves task 0 once (twice by
 * device), as the partition graphs show; the values are the same. A bad
 * value, and the flag with --inprocess, are usage errors. */
#define W(t, k) "/job:w/replica:0/task:" #t "/device:CPU:" #k
static void test_cli_run_partitions_by_task_when_asked(void **state)
{
    s_tmp_t *t = *state;
    char path[128];
    s_write_graph(
        t, "fan.pbtxt",
        "node { name: 'x' op: 'Placeholder' device: '" W(
            0, 0) "'"
                  " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
                  "node { name: 'y' op: 'Square' input: 'x' device: '" W(
                      0, 0) "'"
                            " attr { key: 'T' value { type: DT_FLOAT } } }\n"
                            "node { name: 'b' op: 'Neg' input: 'y' device: '" W(
                                1,
                                0) "'"
                                   " attr { key: 'T' value { type: DT_FLOAT } } }\n"
                                   "node { name: 'c' op: 'Add' input: 'y' input: 'y' device: '" W(
                                       1, 1) "'"
                                             " attr { key: 'T' value { type: DT_FLOAT } } }\n",
        path, sizeof path);
    const char *modes[2] = {"device", "task"};
    for (int m = 0; m < 2; m++) {
        s_run_t r;
        char parts[160], file[320];
        snprintf(parts, sizeof parts, "%s/parts_%s", t->dir, modes[m]);
        s_zflow(&r,
                "run %s --devices " W(0, 0) "," W(0, 1) "," W(1, 0) "," W(
                    1, 1) " --partition-by %s --feed x=[1,-2,3] --fetch b c --partition-graphs %s",
                path, modes[m], parts);
        s_expect(&r, 0, NULL);
        assert_string_equal(r.out, "b =\n[-1. -4. -9.]\nc =\n[ 2.  8. 18.]\n");
        snprintf(file, sizeof file, "%s/_job_w_replica_0_task_0_device_CPU_0.pbtxt", parts);
        Tensorflow__GraphDef *pg = NULL;
        ASSERT_OK(zf_graphdef_read_file(file, ZF_FORMAT_PBTXT, &pg));
        int sends = 0;
        for (size_t k = 0; k < pg->n_node; k++)
            sends += strcmp(pg->node[k]->op, "_Send") == 0 && pg->node[k]->n_input == 1 &&
                     strcmp(pg->node[k]->input[0], "y") == 0;
        assert_int_equal(sends, m == 0 ? 2 : 1);
        zf_graphdef_free(&pg);
    }
    s_run_t r;
    s_zflow(&r, "run %s --devices cpu:2 --partition-by tasks --feed x=[1] --fetch b", path);
    s_expect(&r, 2, "--partition-by takes device or task, not 'tasks'");
    s_zflow(&r, "run %s --inprocess --partition-by task --feed x=[1] --fetch b", path);
    s_expect(&r, 2, "--partition-by is a session option of the service (drop --inprocess)");
    s_zflow(&r, "submit %s --partition-by sideways --fetch b", path);
    s_expect(&r, 2, "--partition-by takes device or task, not 'sideways'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_run_prints_the_mlp_fetch_like_numpy),
        cmocka_unit_test_setup_teardown(test_cli_run_writes_one_npy_per_fetch, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_feeds_npy_files_to_the_cnn, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_uses_the_devices_it_is_given, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_runs_targets_and_multiple_fetches, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_refuses_what_it_cannot_run, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_checks_a_placeholders_shape_on_both_paths,
                                        s_setup, s_teardown),
        cmocka_unit_test(test_cli_run_answers_bad_usage_with_exit_code_2),
        cmocka_unit_test_setup_teardown(test_cli_run_sends_bfloat16_between_devices_when_asked,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_writes_a_chrome_trace_of_the_step, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_runs_a_while_loop_in_process, s_setup,
                                        s_teardown),
        cmocka_unit_test(test_cli_run_schedules_recvs_when_asked),
        cmocka_unit_test_setup_teardown(test_cli_run_places_the_pruned_graph_when_asked, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_places_softly_and_by_mode_when_asked, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_runs_functions_on_a_local_cluster, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cli_run_partitions_by_task_when_asked, s_setup,
                                        s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
