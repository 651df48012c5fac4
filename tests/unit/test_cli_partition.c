/* Tests for `zflow partition`: runs the real binary on a small two-device
 * graph and checks its summary, the files it writes (per-partition
 * GraphDefs in text and binary form, the Graphviz drawing) and its errors
 * and exit codes. Each test works in its own temporary directory. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/graph.h"
#include "common/graphdef_io.h"

#define CPU0      "/job:localhost/replica:0/task:0/device:CPU:0"
#define CPU1      "/job:localhost/replica:0/task:0/device:CPU:1"
#define CPU0_FILE "_job_localhost_replica_0_task_0_device_CPU_0"
#define CPU1_FILE "_job_localhost_replica_0_task_0_device_CPU_1"

/* x -> m (MatMul with w) on cpu:0, n and y on cpu:1; unused is pruned. */
static const char s_graph[] =
    "node { name: 'x' op: 'Placeholder' device: '/cpu:0'\n"
    "  attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'w' op: 'Const' device: '/cpu:0' attr { key: 'dtype' value { type: DT_FLOAT } }\n"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 }\n"
    "    dim { size: 1 } } float_val: 2 } } } }\n"
    "node { name: 'm' op: 'MatMul' input: 'x' input: 'w' device: '/cpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'n' op: 'Neg' input: 'm' device: '/cpu:1'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'y' op: 'Relu' input: 'n' device: '/cpu:1'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'unused' op: 'Neg' input: 'w' device: '/cpu:1'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n";

typedef struct {
    char dir[64];
    char graph[128];
    int rc;
    char out[65536];
} s_fx_t;

static int s_setup(void **state)
{
    s_fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/zf_cli_partition_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->graph, sizeof f->graph, "%s/g.pbtxt", f->dir);
    FILE *g = fopen(f->graph, "w");
    assert_non_null(g);
    fputs(s_graph, g);
    fclose(g);
    *state = f;
    return 0;
}

/* Removes the directory tree rooted at path (one level of subdirectories). */
static void s_remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            s_remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(path);
}

static int s_teardown(void **state)
{
    s_fx_t *f = *state;
    s_remove_tree(f->dir);
    free(f);
    return 0;
}

/* Runs "[env] zflow partition <graph> <args>" with stderr folded in. */
static void s_zflow(s_fx_t *f, const char *env, const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s/zflow partition %s %s 2>&1", env ? env : "", ZF_BIN_DIR,
             f->graph, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(f->out, 1, sizeof f->out - 1, p);
    f->out[n] = '\0';
    int status = pclose(p);
    f->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void s_assert_contains(const s_fx_t *f, const char *needle)
{
    if (!strstr(f->out, needle)) fail_msg("expected '%s' in output:\n%s", needle, f->out);
}

static char *s_path(const s_fx_t *f, const char *sub, const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s%s%s", f->dir, sub, *sub ? "/" : "", name);
    return buf;
}

/* Loads a written partition, checks it re-imports, and checks its node
 * names (in order) and every node's device. */
static void s_assert_partition(const char *path, const char *device, const char *names)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_file(path, ZF_FORMAT_AUTO, &gd);
    if (!zf_ok(s)) fail_msg("%s: %s", path, zf_status_msg(&s));
    zf_graph_t *g = NULL;
    s = zf_graph_new_from_graphdef(gd, &g);
    if (!zf_ok(s)) fail_msg("%s does not reimport: %s", path, zf_status_msg(&s));
    char got[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < gd->n_node; i++) {
        used += (size_t)snprintf(got + used, sizeof got - used, "%s%s", i ? " " : "",
                                 gd->node[i]->name);
        assert_string_equal(gd->node[i]->device, device);
    }
    assert_string_equal(got, names);
    zf_graph_destroy(&g);
    zf_graphdef_free(&gd);
}

static bool s_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void test_cli_partition_writes_one_graphdef_per_device(void **state)
{
    s_fx_t *f = *state;
    s_zflow(f, NULL, "--devices cpu:2 --feed x --fetch y --out %s/out", f->dir);
    assert_int_equal(f->rc, 0);
    char want[1024];
    snprintf(want, sizeof want,
             "partitions: 2 (by device), send/recv pairs: 1\n"
             "  " CPU0 "  nodes=4 sends=1 recvs=0 feeds=1 fetches=0 -> %s/out/" CPU0_FILE ".pbtxt\n"
             "  " CPU1 "  nodes=4 sends=0 recvs=1 feeds=0 fetches=1 -> %s/out/" CPU1_FILE
             ".pbtxt\n",
             f->dir, f->dir);
    assert_string_equal(f->out, want);
    s_assert_partition(s_path(f, "out", CPU0_FILE ".pbtxt"), CPU0, "w m m_S0 _recv_x_0");
    s_assert_partition(s_path(f, "out", CPU1_FILE ".pbtxt"), CPU1, "n m_S1 y _send_y_0");
    /* Binary output. */
    s_zflow(f, NULL, "--devices cpu:2 --feed x --fetch y --format pb --out=%s/pb", f->dir);
    assert_int_equal(f->rc, 0);
    s_assert_contains(f, "-> ");
    s_assert_partition(s_path(f, "pb", CPU0_FILE ".pb"), CPU0, "w m m_S0 _recv_x_0");
    s_assert_partition(s_path(f, "pb", CPU1_FILE ".pb"), CPU1, "n m_S1 y _send_y_0");
    /* Without fetches or targets the whole graph is partitioned. */
    s_zflow(f, NULL, "--devices cpu:2 --out %s/all", f->dir);
    assert_int_equal(f->rc, 0);
    s_assert_contains(f, "  " CPU1 "  nodes=5 sends=0 recvs=2 feeds=0 fetches=0 -> ");
    s_assert_partition(s_path(f, "all", CPU1_FILE ".pbtxt"), CPU1, "n m_S1 y unused w_S3");
    /* The placement flags of 'zflow place' are taken (requests still win). */
    s_zflow(f, NULL,
            "--devices cpu:2 --mode first --soft --load cpu:1=5 --load " CPU0
            "=2 --fetch y --out %s/placed",
            f->dir);
    assert_int_equal(f->rc, 0);
    s_assert_contains(f, "partitions: 2 (by device), send/recv pairs: 1\n");
}

/* Task 0 holds x, w, m and k on two devices; task 1 holds n and y. */
static const char s_tasks_graph[] =
    "node { name: 'x' op: 'Placeholder' device: '/job:localhost/task:0/device:CPU:0'\n"
    "  attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'w' op: 'Const' device: '/job:localhost/task:0/device:CPU:1'\n"
    "  attr { key: 'dtype' value { type: DT_FLOAT } }\n"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 }\n"
    "    dim { size: 1 } } float_val: 2 } } } }\n"
    "node { name: 'm' op: 'MatMul' input: 'x' input: 'w' device: '/job:localhost/task:0/cpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'k' op: 'Neg' input: 'w' device: '/job:localhost/task:0/device:CPU:1'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'n' op: 'Add' input: 'm' input: 'k' device: '/job:localhost/task:1/cpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'y' op: 'Relu' input: 'n' device: '/job:localhost/task:1/cpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n";

static void test_cli_partition_splits_by_task_and_casts_to_bfloat16(void **state)
{
    s_fx_t *f = *state;
    FILE *g = fopen(f->graph, "w");
    assert_non_null(g);
    fputs(s_tasks_graph, g);
    fclose(g);
    s_zflow(f, NULL,
            "--devices /job:localhost/replica:0/task:0/device:CPU:0,"
            "/job:localhost/replica:0/task:0/device:CPU:1,"
            "/job:localhost/replica:0/task:1/device:CPU:0 "
            "--by task --bf16 --feed x --fetch y --out %s",
            f->dir);
    assert_int_equal(f->rc, 0);
    char want[1024];
    snprintf(want, sizeof want,
             "partitions: 2 (by task), send/recv pairs: 2\n"
             "  /job:localhost/replica:0/task:0  nodes=8 sends=2 recvs=0 feeds=1 fetches=0 -> "
             "%s/_job_localhost_replica_0_task_0.pbtxt\n"
             "  /job:localhost/replica:0/task:1  nodes=7 sends=0 recvs=2 feeds=0 fetches=1 -> "
             "%s/_job_localhost_replica_0_task_1.pbtxt\n",
             f->dir, f->dir);
    assert_string_equal(f->out, want);
    Tensorflow__GraphDef *gd = NULL;
    assert_true(zf_ok(zf_graphdef_read_file(s_path(f, "", "_job_localhost_replica_0_task_0.pbtxt"),
                                            ZF_FORMAT_AUTO, &gd)));
    const char *names[] = {"w", "m", "k", "m_S0", "m_S1", "k_S4", "k_S5", "_recv_x_0"};
    const char *ops[] = {"Const", "MatMul", "Neg", "Cast", "_Send", "Cast", "_Send", "_Recv"};
    assert_int_equal(gd->n_node, 8);
    for (int i = 0; i < 8; i++) {
        assert_string_equal(gd->node[i]->name, names[i]);
        assert_string_equal(gd->node[i]->op, ops[i]);
    }
    /* Devices of one task talk directly. */
    assert_string_equal(gd->node[1]->input[1], "w");
    assert_string_equal(gd->node[0]->device, "/job:localhost/replica:0/task:0/device:CPU:1");
    zf_graphdef_free(&gd);
    /* A requested device missing from the list fails placement. */
    s_zflow(f, NULL, "--devices cpu:1 --fetch y --out %s", f->dir);
    assert_int_equal(f->rc, 1);
    s_assert_contains(f, "zflow partition: INVALID_ARGUMENT: Cannot assign a device for operation");
}

static void test_cli_partition_draws_the_placed_graph(void **state)
{
    s_fx_t *f = *state;
    s_zflow(f, NULL, "--devices cpu:2 --feed x --fetch y --format dot --out %s", f->dir);
    assert_int_equal(f->rc, 0);
    s_assert_contains(f, "  " CPU0 "  nodes=4 sends=1 recvs=0 feeds=1 fetches=0\n");
    char want[256];
    snprintf(want, sizeof want, "wrote %s/partitions.dot\n", f->dir);
    s_assert_contains(f, want);
    assert_false(s_exists(s_path(f, "", CPU0_FILE ".pbtxt")));
    char *dot = NULL;
    size_t len = 0;
    assert_true(zf_ok(zf_read_file(s_path(f, "", "partitions.dot"), 1 << 20, &dot, &len)));
    assert_non_null(strstr(dot, "digraph partitions {\n"));
    assert_non_null(strstr(dot, "  subgraph cluster_0 {\n    label=\"" CPU0 "\";\n"));
    assert_non_null(strstr(dot, "  subgraph cluster_1 {\n    label=\"" CPU1 "\";\n"));
    assert_non_null(strstr(dot, "    n2 [label=\"m\\nMatMul\"];\n"));
    assert_non_null(strstr(dot, "    n6 [label=\"_recv_x_0\\nfeed x\", shape=ellipse"));
    assert_non_null(strstr(dot, "  n2 -> n3 [color=\"#d62728\", penwidth=2.5];\n"));
    assert_non_null(strstr(dot, "  n3 -> n4;\n"));
    assert_null(strstr(dot, "unused"));
    free(dot);
    /* --png needs Graphviz: with no 'dot' on PATH the error says so. */
    s_zflow(f, "PATH=/nonexistent", "--devices cpu:2 --fetch y --png --out %s/png", f->dir);
    assert_int_equal(f->rc, 1);
    s_assert_contains(f, "zflow partition: FAILED_PRECONDITION: --png needs Graphviz's 'dot' "
                         "program (Debian package graphviz)");
    assert_true(s_exists(s_path(f, "png", CPU0_FILE ".pbtxt")));
    assert_true(s_exists(s_path(f, "png", "partitions.dot")));
}

static void test_cli_partition_reports_bad_usage_and_errors(void **state)
{
    s_fx_t *f = *state;
    s_zflow(f, NULL, "--help");
    assert_int_equal(f->rc, 0);
    s_assert_contains(f, "usage: zflow partition GRAPH --devices LIST");
    s_zflow(f, NULL, "--fetch y");
    assert_int_equal(f->rc, 2);
    s_assert_contains(f, "zflow partition: need --devices LIST\nusage:");
    s_zflow(f, NULL, "--devices cpu:2 --format svg");
    assert_int_equal(f->rc, 2);
    s_assert_contains(f, "zflow partition: unknown --format 'svg'");
    s_zflow(f, NULL, "--devices cpu:2 --by host");
    assert_int_equal(f->rc, 2);
    s_assert_contains(f, "zflow partition: unknown --by 'host'");
    s_zflow(f, NULL, "--devices cpu:2 --frobnicate");
    assert_int_equal(f->rc, 2);
    s_assert_contains(f, "zflow partition: unexpected argument '--frobnicate'");
    s_zflow(f, NULL, "--devices cpu:2 --feed");
    assert_int_equal(f->rc, 2);
    s_assert_contains(f, "zflow partition: --feed needs a value");
    s_zflow(f, NULL, "--devices cpu:2 --load cpu:7=3");
    assert_int_equal(f->rc, 2);
    s_assert_contains(f, "INVALID_ARGUMENT: --load 'cpu:7=3' names no device of the list");
    s_zflow(f, NULL, "--devices cpu:2 --load cpu:0=x");
    assert_int_equal(f->rc, 2);
    s_assert_contains(f, "--load 'cpu:0=x': N must be a count (0 or more)");
    s_zflow(f, NULL, "--devices cpu:0");
    assert_int_equal(f->rc, 2);
    s_assert_contains(f, "zflow partition: INVALID_ARGUMENT: --devices");
    s_zflow(f, NULL, "--devices cpu:2 --feed nope --fetch y --out %s", f->dir);
    assert_int_equal(f->rc, 1);
    s_assert_contains(f, "zflow partition: INVALID_ARGUMENT: FeedInputs: unable to find feed "
                         "output nope\n");
    s_zflow(f, NULL, "--devices cpu:2 --fetch y --feed y --out %s", f->dir);
    assert_int_equal(f->rc, 1);
    s_assert_contains(f, "INVALID_ARGUMENT: y is both fed and fetched.");
    s_zflow(f, NULL, "--devices cpu:2 --fetch y --out %s/g.pbtxt", f->dir);
    assert_int_equal(f->rc, 1);
    s_assert_contains(f, "is not a directory");
}

/* --recv-scheduling: each recv's _start_time and control inputs in the
 * summary and the files. By hand, one unit per node and two per transfer:
 * _recv_x_0 and w start at 0, m at 1, n at 1 + 1 + 2 = 4, so the recv of m
 * on cpu:1 starts at 4; nothing of cpu:1 is done by 4 - 2, so it waits for
 * nothing. */
static void test_cli_partition_shows_recv_scheduling(void **state)
{
    s_fx_t *f = *state;
    s_zflow(f, NULL, "--devices cpu:2 --recv-scheduling --feed x --fetch y --out %s", f->dir);
    assert_int_equal(f->rc, 0);
    s_assert_contains(f, "fetches=1 -> ");
    s_assert_contains(f, CPU1_FILE ".pbtxt\n    _Recv m_S1 _start_time=4\n");
    Tensorflow__GraphDef *gd = NULL;
    assert_true(
        zf_ok(zf_graphdef_read_file(s_path(f, "", CPU1_FILE ".pbtxt"), ZF_FORMAT_AUTO, &gd)));
    const Tensorflow__NodeDef *recv = NULL;
    for (size_t i = 0; i < gd->n_node; i++)
        if (strcmp(gd->node[i]->name, "m_S1") == 0) recv = gd->node[i];
    assert_non_null(recv);
    const Tensorflow__AttrValue *t = zf_node_attr(recv, "_start_time");
    assert_non_null(t);
    assert_int_equal(t->i, 4);
    zf_graphdef_free(&gd);
    /* Without the option: no times. */
    s_zflow(f, NULL, "--devices cpu:2 --feed x --fetch y --out %s", f->dir);
    assert_int_equal(f->rc, 0);
    assert_null(strstr(f->out, "_start_time"));
}

static void test_cli_partition_fails_on_a_missing_graph(void **state)
{
    s_fx_t *f = *state;
    snprintf(f->graph, sizeof f->graph, "%s/missing.pbtxt", f->dir);
    s_zflow(f, NULL, "--devices cpu:1");
    assert_int_equal(f->rc, 1);
    s_assert_contains(f, "zflow partition: NOT_FOUND: cannot open");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, s_setup, s_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cli_partition_writes_one_graphdef_per_device),
        T(test_cli_partition_splits_by_task_and_casts_to_bfloat16),
        T(test_cli_partition_draws_the_placed_graph),
        T(test_cli_partition_reports_bad_usage_and_errors),
        T(test_cli_partition_fails_on_a_missing_graph),
        T(test_cli_partition_shows_recv_scheduling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
