/* The session option partition_by through real processes (`zflow up` on
 * 127.0.0.1 with two tasks of two CPU executors each): a tensor made on
 * task 0 and read on both devices of task 1 crosses between the tasks once
 * by task and twice by device, as the step's partition graphs show; the
 * values are the same either way and equal arithmetic done here; a while
 * loop whose condition is on task 0 and whose body spans the devices of
 * task 1 sums alike; bfloat16 transfers apply between tasks only by task;
 * an unknown partition_by on the wire is INVALID_ARGUMENT naming it. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "process_test_util.h"
#include "test_util.h"

#define ZFLOW   ZF_BIN_DIR "/zflow"
#define WAIT_MS 60000
#define D00     "/job:w/replica:0/task:0/device:CPU:0"
#define D01     "/job:w/replica:0/task:0/device:CPU:1"
#define D10     "/job:w/replica:0/task:1/device:CPU:0"
#define D11     "/job:w/replica:0/task:1/device:CPU:1"
#define DEVICES D00 "," D01 "," D10 "," D11
#define F32     " attr { key: 'T' value { type: DT_FLOAT } } }\n"
#define I64     " attr { key: 'T' value { type: DT_INT64 } }"
#define FRAME   " attr { key: 'frame_name' value { s: 'w' } } attr { key: 'is_constant' value { b: "
#define END     " } } }\n"

static char s_endpoint[256];
static pid_t s_up = -1;
static zf_client_t *s_client;

static int s_setup(void **state)
{
    (void)state;
    s_up = zf_test_up_start_devices(ZFLOW, DEVICES, s_endpoint, sizeof s_endpoint, WAIT_MS);
    if (s_up < 0) return -1;
    return zf_test_up_client(s_endpoint, WAIT_MS, &s_client);
}

static int s_teardown(void **state)
{
    (void)state;
    return zf_test_up_stop(s_up, &s_client, WAIT_MS);
}

/* ---- helpers ------------------------------------------------------------------ */

/* One step of gd as a job, fetching fetches (their tensors in out) and
 * bringing back the partition graphs; the caller frees *result. */
static void s_run(const Tensorflow__GraphDef *gd, const zf_client_session_options_t *o,
                  const char *feed, zf_tensor_t *value, const char *const *fetches, int n_fetches,
                  zf_client_job_result_t **result)
{
    zf_client_step_t step = {&feed, &value, value ? 1 : 0, fetches, n_fetches, NULL, 0};
    zf_client_job_options_t job = ZF_CLIENT_JOB_OPTIONS_DEFAULT;
    job.partition_graphs = true;
    char *id = NULL;
    ASSERT_OK(zf_client_submit_job(s_client, gd, o, &step, &job, &id));
    ASSERT_OK(zf_client_wait_result(s_client, id, WAIT_MS, NULL, NULL, result));
    free(id);
    assert_int_equal((*result)->n_fetches, n_fetches);
}

static zf_tensor_t *s_floats(int n, const float *values)
{
    int64_t dims[1] = {n};
    zf_shape_t shape;
    ASSERT_OK(zf_shape_make(1, dims, &shape));
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, values, (size_t)n * sizeof *values, &t));
    return t;
}

static void s_expect_floats(const zf_tensor_t *t, int n, const float *want)
{
    assert_int_equal(zf_tensor_dtype(t), ZF_FLOAT);
    assert_int_equal(zf_tensor_num_elements(t), n);
    const float *got = zf_tensor_data(t);
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("element %d: %g, want %g", i, got[i], want[i]);
}

static bool s_attr_has(const Tensorflow__NodeDef *nd, const char *key, const char *text)
{
    for (size_t i = 0; i < nd->n_attr; i++) {
        const Tensorflow__AttrValue *v = nd->attr[i]->value;
        if (strcmp(nd->attr[i]->key, key) != 0) continue;
        char s[256];
        snprintf(s, sizeof s, "%.*s", (int)v->s.len, (const char *)v->s.data);
        return strstr(s, text) != NULL;
    }
    return false;
}

/* The _Send nodes of the result's graphs that read input and go to
 * task 1 from task 0. */
static int s_sends_to_task1(const zf_client_job_result_t *r, const char *input)
{
    int n = 0;
    for (size_t g = 0; g < r->n_graphs; g++)
        for (size_t i = 0; i < r->graphs[g]->n_node; i++) {
            const Tensorflow__NodeDef *nd = r->graphs[g]->node[i];
            n += strcmp(nd->op, "_Send") == 0 && nd->n_input > 0 &&
                 strcmp(nd->input[0], input) == 0 && s_attr_has(nd, "send_device", "task:0/") &&
                 s_attr_has(nd, "recv_device", "task:1/");
        }
    return n;
}

/* Each graph's nodes are on one device: the result holds per-device graphs. */
static void s_expect_device_graphs(const zf_client_job_result_t *r, size_t n)
{
    assert_int_equal(r->n_graphs, n);
    for (size_t g = 0; g < r->n_graphs; g++)
        for (size_t i = 1; i < r->graphs[g]->n_node; i++)
            assert_string_equal(r->graphs[g]->node[i]->device, r->graphs[g]->node[0]->device);
}

/* ---- tests ---------------------------------------------------------------------- */

/* y = x * x on task 0 is read by b = -y on task 1's CPU:0 and c = y + y on
 * its CPU:1; d = b + c on CPU:1 reads b across task 1's devices. */
static const char s_fan_out[] =
    "node { name: 'x' op: 'Placeholder' device: '" D00 "'"
    " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'y' op: 'Square' input: 'x' device: '" D00 "'" F32
    "node { name: 'b' op: 'Neg' input: 'y' device: '" D10 "'" F32
    "node { name: 'c' op: 'Add' input: 'y' input: 'y' device: '" D11 "'" F32
    "node { name: 'd' op: 'Add' input: 'b' input: 'c' device: '" D11 "'" F32;

static void test_a_tensor_crosses_between_tasks_once_by_task(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(s_fan_out);
    const float x[3] = {1.5f, -2.0f, 3.0f};
    float y[3], b[3], c[3], d[3];
    for (int i = 0; i < 3; i++) {
        y[i] = x[i] * x[i];
        b[i] = -y[i];
        c[i] = y[i] + y[i];
        d[i] = b[i] + c[i];
    }
    const char *fetches[3] = {"b", "c", "d"};
    const char *modes[2] = {"device", "task"};
    for (int m = 0; m < 2; m++) {
        zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
        o.partition_by = modes[m];
        zf_tensor_t *feed = s_floats(3, x);
        zf_client_job_result_t *r = NULL;
        s_run(gd, &o, "x", feed, fetches, 3, &r);
        zf_tensor_unref(&feed);
        s_expect_floats(r->tensors[0], 3, b);
        s_expect_floats(r->tensors[1], 3, c);
        s_expect_floats(r->tensors[2], 3, d);
        s_expect_device_graphs(r, 3);
        assert_int_equal(s_sends_to_task1(r, "y"), m == 0 ? 2 : 1);
        zf_client_job_result_free(&r);
    }
    zf_graphdef_free(&gd);
}

/* for (i = 0, s = 0; i < n; i++) s += (i + 1) + i: s = n * n. The
 * condition and the loop's state are on task 0; i + 1 is on task 1's
 * CPU:0 and the sum on its CPU:1, which reads i from task 0 and i + 1
 * from CPU:0, so the frame spans both tasks and both devices of task 1. */
static const char s_loop[] =
    "node { name: 'n' op: 'Placeholder' device: '" D00 "'"
    " attr { key: 'dtype' value { type: DT_INT64 } } }\n"
    "node { name: 'zero' op: 'Const' device: '" D00 "'"
    " attr { key: 'dtype' value { type: DT_INT64 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: 0 } } } }\n"
    "node { name: 'one' op: 'Const' device: '" D00 "'"
    " attr { key: 'dtype' value { type: DT_INT64 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: 1 } } } }\n"
    "node { name: 'w/i_enter' op: 'Enter' input: 'zero' device: '" D00 "'" I64 FRAME "false" END
    "node { name: 'w/s_enter' op: 'Enter' input: 'zero' device: '" D00 "'" I64 FRAME "false" END
    "node { name: 'w/n' op: 'Enter' input: 'n' device: '" D00 "'" I64 FRAME "true" END
    "node { name: 'w/one' op: 'Enter' input: 'one' device: '" D10 "'" I64 FRAME "true" END
    "node { name: 'w/i_merge' op: 'Merge' input: 'w/i_enter' input: 'w/i_next'"
    " device: '" D00 "'" I64 " attr { key: 'N' value { i: 2 } } }\n"
    "node { name: 'w/s_merge' op: 'Merge' input: 'w/s_enter' input: 'w/s_next'"
    " device: '" D00 "'" I64 " attr { key: 'N' value { i: 2 } } }\n"
    "node { name: 'w/less' op: 'Less' input: 'w/i_merge' input: 'w/n'"
    " device: '" D00 "'" I64 " }\n"
    "node { name: 'w/cond' op: 'LoopCond' input: 'w/less' device: '" D00 "' }\n"
    "node { name: 'w/i_sw' op: 'Switch' input: 'w/i_merge' input: 'w/cond'"
    " device: '" D00 "'" I64 " }\n"
    "node { name: 'w/s_sw' op: 'Switch' input: 'w/s_merge' input: 'w/cond'"
    " device: '" D00 "'" I64 " }\n"
    "node { name: 'w/i_body' op: 'Add' input: 'w/i_sw:1' input: 'w/one'"
    " device: '" D10 "'" I64 " }\n"
    "node { name: 'w/s_body' op: 'AddN' input: 'w/s_sw:1' input: 'w/i_body' input: 'w/i_sw:1'"
    " device: '" D11 "'" I64 " attr { key: 'N' value { i: 3 } } }\n"
    "node { name: 'w/i_next' op: 'NextIteration' input: 'w/i_body'"
    " device: '" D00 "'" I64 " }\n"
    "node { name: 'w/s_next' op: 'NextIteration' input: 'w/s_body'"
    " device: '" D00 "'" I64 " }\n"
    "node { name: 'w/i_exit' op: 'Exit' input: 'w/i_sw' device: '" D00 "'" I64 " }\n"
    "node { name: 'w/s_exit' op: 'Exit' input: 'w/s_sw' device: '" D00 "'" I64 " }\n";

static void test_a_loop_across_tasks_and_devices_runs_by_task(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(s_loop);
    const char *fetches[2] = {"w/s_exit", "w/i_exit"};
    const int64_t ns[2] = {1, 37};
    for (int m = 0; m < 4; m++) {
        zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
        o.partition_by = m % 2 ? "task" : "device";
        o.recv_scheduling = m >= 2;
        for (int k = 0; k < 2; k++) {
            zf_tensor_t *feed = NULL;
            ASSERT_OK(zf_tensor_new_scalar_int64(ns[k], &feed));
            zf_client_job_result_t *r = NULL;
            s_run(gd, &o, "n", feed, fetches, 2, &r);
            zf_tensor_unref(&feed);
            assert_int_equal(*(const int64_t *)zf_tensor_data(r->tensors[0]), ns[k] * ns[k]);
            assert_int_equal(*(const int64_t *)zf_tensor_data(r->tensors[1]), ns[k]);
            /* i leaves task 0 once per iteration for each reader by device */
            assert_int_equal(s_sends_to_task1(r, "w/i_sw:1"), m % 2 ? 1 : 2);
            zf_client_job_result_free(&r);
        }
    }
    zf_graphdef_free(&gd);
}

/* bfloat16 transfers: by device every transfer between devices rounds
 * 1 + 2^-8 to 1; by task only those between tasks do (TensorFlow's
 * master casts, its workers do not), so a value kept within task 1
 * arrives exact. */
static void test_bfloat16_applies_between_tasks_only_by_task(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd =
        zf_test_graphdef("node { name: 'x' op: 'Placeholder' device: '" D10 "'"
                         " attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
                         "node { name: 'within' op: 'Identity' input: 'x' device: '" D11 "'" F32
                         "node { name: 'across' op: 'Identity' input: 'x' device: '" D00 "'" F32);
    const float x[2] = {1.00390625f, -3.5f}, rounded[2] = {1.0f, -3.5f};
    const char *fetches[2] = {"within", "across"};
    for (int m = 0; m < 2; m++) {
        zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
        o.partition_by = m ? "task" : "device";
        o.bfloat16_sendrecv = true;
        zf_tensor_t *feed = s_floats(2, x);
        zf_client_job_result_t *r = NULL;
        s_run(gd, &o, "x", feed, fetches, 2, &r);
        zf_tensor_unref(&feed);
        s_expect_floats(r->tensors[0], 2, m ? x : rounded);
        s_expect_floats(r->tensors[1], 2, rounded);
        zf_client_job_result_free(&r);
    }
    zf_graphdef_free(&gd);
}

static void test_an_unknown_partition_by_is_refused(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(s_fan_out);
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    o.partition_by = "tasks";
    char *sess = NULL;
    zf_test_expect_error(zf_client_session_create(s_client, gd, &o, &sess), ZF_INVALID_ARGUMENT,
                         "SessionOptions.partition_by 'tasks' is neither 'device' nor 'task'");
    assert_null(sess);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_tensor_crosses_between_tasks_once_by_task),
        cmocka_unit_test(test_a_loop_across_tasks_and_devices_runs_by_task),
        cmocka_unit_test(test_bfloat16_applies_between_tasks_only_by_task),
        cmocka_unit_test(test_an_unknown_partition_by_is_refused),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
