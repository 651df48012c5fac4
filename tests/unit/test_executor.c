/* Tests for the dataflow engine (executor/engine/engine.h). Most graphs run on
 * a "TEST" device type with small kernels defined here, so that each test
 * controls exactly what its kernels do (fail, record the order they run
 * in, track when a buffer is freed); the variables test uses the built-in
 * CPU kernels. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rendezvous_key.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "executor/engine/engine.h"
#include "executor/kernels/kernel.h"
#include "executor/kernels/kernels_sendrecv.h"
#include "executor/kernels/resource.h"
#include "scheduler/graph/partition.h"
#include "test_util.h"

#define TEST0 "/job:t/replica:0/task:0/device:TEST:0"
#define TEST1 "/job:t/replica:0/task:0/device:TEST:1"
#define CPU0  "/job:localhost/replica:0/task:0/device:CPU:0"

/* ---- a TEST device ---------------------------------------------------------- */

static zf_status_t s_dev_alloc(zf_device_t *dev, zf_dtype_t dtype, const zf_shape_t *shape,
                               zf_tensor_t **out)
{
    (void)dev;
    return zf_tensor_new(dtype, shape, out);
}

static zf_status_t s_dev_copy(zf_device_t *dev, void *dst, const void *src, size_t n,
                              zf_copy_kind_t kind)
{
    (void)dev;
    (void)kind;
    memcpy(dst, src, n);
    return ZF_STATUS_OK;
}

static zf_status_t s_dev_sync(zf_device_t *dev)
{
    (void)dev;
    return ZF_STATUS_OK;
}

static void s_dev_destroy(zf_device_t *dev)
{
    (void)dev;
}

static const zf_device_ops_t s_test_ops = {
    .alloc_tensor = s_dev_alloc, .copy = s_dev_copy, .sync = s_dev_sync, .destroy = s_dev_destroy};

/* ---- what the kernels record -------------------------------------------- */

static pthread_mutex_t s_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char s_log[8192]; /* names of the nodes that ran, space-separated */
static atomic_int s_tracked_frees[2];
static int s_probe_seen[2];
static pthread_t s_square_thread; /* the one that ran Square last; under s_log_mu */

static void s_log_node(const zf_kernel_ctx_t *ctx)
{
    pthread_mutex_lock(&s_log_mu);
    size_t used = strlen(s_log);
    snprintf(s_log + used, sizeof s_log - used, "%s ", ctx->node->name);
    pthread_mutex_unlock(&s_log_mu);
}

static bool s_ran(const char *name)
{
    char needle[128];
    snprintf(needle, sizeof needle, "%s ", name);
    pthread_mutex_lock(&s_log_mu);
    bool found = strncmp(s_log, needle, strlen(needle)) == 0;
    char within[130];
    snprintf(within, sizeof within, " %s ", name);
    found = found || strstr(s_log, within) != NULL;
    pthread_mutex_unlock(&s_log_mu);
    return found;
}

/* Position of name in the log (-1 if absent). */
static long s_ran_at(const char *name)
{
    char within[130];
    snprintf(within, sizeof within, " %s ", name);
    char padded[sizeof s_log + 1] = " ";
    pthread_mutex_lock(&s_log_mu);
    strcat(padded, s_log);
    pthread_mutex_unlock(&s_log_mu);
    const char *p = strstr(padded, within);
    return p ? p - padded : -1;
}

static void s_reset_log(void)
{
    pthread_mutex_lock(&s_log_mu);
    s_log[0] = '\0';
    pthread_mutex_unlock(&s_log_mu);
    atomic_store(&s_tracked_frees[0], 0);
    atomic_store(&s_tracked_frees[1], 0);
    s_probe_seen[0] = s_probe_seen[1] = -1;
}

/* ---- TEST kernels --------------------------------------------------------- */

static zf_status_t s_const_create(const Tensorflow__NodeDef *node, void **state)
{
    const Tensorflow__TensorProto *proto = NULL;
    ZF_TRY(zf_node_attr_tensor(node, "value", &proto));
    zf_tensor_t *t = NULL;
    ZF_TRY(zf_tensor_from_proto(proto, &t));
    *state = t;
    return ZF_STATUS_OK;
}

static void s_const_destroy(void *state)
{
    zf_tensor_t *t = state;
    zf_tensor_unref(&t);
}

static zf_status_t s_const_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    zf_kernel_set_output(ctx, 0, ctx->state);
    return ZF_STATUS_OK;
}

static zf_status_t s_identity_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    zf_kernel_set_output(ctx, 0, ctx->inputs[0]);
    return ZF_STATUS_OK;
}

static zf_status_t s_add_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    if (!zf_shape_equal(zf_tensor_shape(a), zf_tensor_shape(b)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "shapes differ");
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, ZF_FLOAT, zf_tensor_shape(a), &out));
    const float *x = zf_tensor_data(a), *y = zf_tensor_data(b);
    float *z = zf_tensor_data(out);
    for (int64_t i = 0; i < zf_tensor_num_elements(a); i++) z[i] = x[i] + y[i];
    return ZF_STATUS_OK;
}

static zf_status_t s_sqrt_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    const float *x = zf_tensor_data(ctx->inputs[0]);
    for (int64_t i = 0; i < zf_tensor_num_elements(ctx->inputs[0]); i++)
        if (x[i] < 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Sqrt of negative value %g",
                                   (double)x[i]);
    zf_kernel_set_output(ctx, 0, ctx->inputs[0]);
    return ZF_STATUS_OK;
}

static void s_tracked_free(void *data, void *hint)
{
    free(data);
    atomic_fetch_add(&s_tracked_frees[(intptr_t)hint], 1);
}

/* Square, with its output in a buffer whose freeing the test can see;
 * node names starting with 'a' use counter 0, others counter 1. */
static zf_status_t s_square_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    pthread_mutex_lock(&s_log_mu);
    s_square_thread = pthread_self();
    pthread_mutex_unlock(&s_log_mu);
    const zf_tensor_t *in = ctx->inputs[0];
    size_t n = zf_tensor_nbytes(in);
    float *data = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    const float *x = zf_tensor_data(in);
    for (int64_t i = 0; i < zf_tensor_num_elements(in); i++) data[i] = x[i] * x[i];
    zf_buffer_t *buf = NULL;
    intptr_t which = ctx->node->name[0] == 'a' ? 0 : 1;
    ZF_TRY(zf_buffer_wrap(data, n, s_tracked_free, (void *)which, &buf));
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_tensor_from_buffer(ZF_FLOAT, zf_tensor_shape(in), buf, 0, &t);
    zf_buffer_unref(&buf);
    ZF_TRY(s);
    ctx->outputs[0] = t;
    return ZF_STATUS_OK;
}

/* OnesLike that also notes how many tracked buffers were freed so far. */
static zf_status_t s_probe_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    s_probe_seen[0] = atomic_load(&s_tracked_frees[0]);
    s_probe_seen[1] = atomic_load(&s_tracked_frees[1]);
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, ZF_FLOAT, zf_tensor_shape(ctx->inputs[0]), &out));
    float *z = zf_tensor_data(out);
    for (int64_t i = 0; i < zf_tensor_num_elements(out); i++) z[i] = 1.0f;
    return ZF_STATUS_OK;
}

/* Test stand-ins for nodes whose size is not their inputs': Neg makes an
 * [n,1] tensor of ones and Abs a [1,n] one, n the input's first value;
 * Relu does what Neg does but is marked ZF_KERNEL_SIZED_BY_VALUE, as Fill
 * is. Mul records the thread it ran on and passes its first input on. */
static pthread_t s_mul_thread; /* under s_log_mu */

static zf_status_t s_grow(zf_kernel_ctx_t *ctx, bool column)
{
    s_log_node(ctx);
    int64_t n = (int64_t)((const float *)zf_tensor_data(ctx->inputs[0]))[0];
    zf_shape_t shape = {.rank = 2, .dims = {column ? n : 1, column ? 1 : n}};
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, ZF_FLOAT, &shape, &out));
    float *z = zf_tensor_data(out);
    for (int64_t i = 0; i < n; i++) z[i] = 1.0f;
    return ZF_STATUS_OK;
}

static zf_status_t s_grow_column_compute(zf_kernel_ctx_t *ctx)
{
    return s_grow(ctx, true);
}

static zf_status_t s_grow_row_compute(zf_kernel_ctx_t *ctx)
{
    return s_grow(ctx, false);
}

static zf_status_t s_mul_probe_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    pthread_mutex_lock(&s_log_mu);
    s_mul_thread = pthread_self();
    pthread_mutex_unlock(&s_log_mu);
    zf_kernel_set_output(ctx, 0, ctx->inputs[0]);
    return ZF_STATUS_OK;
}

static zf_status_t s_noop_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    return ZF_STATUS_OK;
}

/* _Send and _Recv keyed by the tensor_name attr alone. */
static zf_status_t s_send_compute(zf_kernel_ctx_t *ctx)
{
    s_log_node(ctx);
    const uint8_t *name = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(ctx->node, "tensor_name", &name, &len));
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)len, (const char *)name);
    return zf_rendezvous_send(ctx->rendezvous, key, ctx->inputs[0], ctx->input_is_dead);
}

typedef struct {
    zf_kernel_ctx_t *ctx;
    zf_kernel_done_fn done;
    void *arg;
} s_recv_t;

static void s_recv_done(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    s_recv_t r = *(s_recv_t *)arg;
    free(arg);
    r.ctx->outputs[0] = tensor;
    r.ctx->is_dead_outputs[0] = is_dead;
    r.done(r.ctx, status, r.arg);
}

static void s_recv_compute(zf_kernel_ctx_t *ctx, zf_kernel_done_fn done, void *arg)
{
    s_log_node(ctx);
    const uint8_t *name = NULL;
    size_t len = 0;
    zf_status_t s = zf_node_attr_string(ctx->node, "tensor_name", &name, &len);
    s_recv_t *r = malloc(sizeof *r);
    *r = (s_recv_t){ctx, done, arg};
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)len, (const char *)name);
    if (zf_ok(s)) s = zf_rendezvous_recv_async(ctx->rendezvous, key, s_recv_done, r, NULL);
    if (!zf_ok(s)) {
        free(r);
        done(ctx, s, arg);
    }
}

static const zf_kernel_t s_test_kernels[] = {
    {.op = "Const",
     .device_type = "TEST",
     .create = s_const_create,
     .destroy = s_const_destroy,
     .compute = s_const_compute},
    {.op = "Identity", .device_type = "TEST", .compute = s_identity_compute},
    {.op = "StopGradient",
     .device_type = "TEST",
     .flags = ZF_KERNEL_EXPENSIVE,
     .compute = s_identity_compute},
    {.op = "AddV2", .device_type = "TEST", .compute = s_add_compute},
    {.op = "Sqrt", .device_type = "TEST", .compute = s_sqrt_compute},
    {.op = "Square", .device_type = "TEST", .compute = s_square_compute},
    {.op = "OnesLike", .device_type = "TEST", .compute = s_probe_compute},
    {.op = "NoOp", .device_type = "TEST", .compute = s_noop_compute},
    {.op = "Neg", .device_type = "TEST", .compute = s_grow_column_compute},
    {.op = "Abs", .device_type = "TEST", .compute = s_grow_row_compute},
    {.op = "Relu",
     .device_type = "TEST",
     .flags = ZF_KERNEL_SIZED_BY_VALUE,
     .compute = s_grow_column_compute},
    {.op = "Mul", .device_type = "TEST", .compute = s_mul_probe_compute},
    {.op = "_Send", .device_type = "TEST", .compute = s_send_compute},
    {.op = "_Recv",
     .device_type = "TEST",
     .flags = ZF_KERNEL_ASYNC,
     .compute_async = s_recv_compute},
};

/* ---- graph text helpers ------------------------------------------------- */

typedef struct {
    char *text;
    size_t len, cap;
} s_gb_t;

static void s_gb_add(s_gb_t *gb, const char *fmt, ...) ZF_PRINTF(2, 3);
static void s_gb_add(s_gb_t *gb, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(gb->text + gb->len, gb->cap - gb->len, fmt, ap);
        va_end(ap);
        if ((size_t)n < gb->cap - gb->len) {
            gb->len += (size_t)n;
            return;
        }
        gb->cap = gb->cap * 2 + (size_t)n + 1;
        gb->text = realloc(gb->text, gb->cap);
    }
}

#define T_FLOAT "attr { key: 'T' value { type: DT_FLOAT } }"

static void s_gb_const(s_gb_t *gb, const char *name, float v, const char *extra)
{
    s_gb_add(
        gb,
        "node { name: '%s' op: 'Const' %s attr { key: 'dtype' value { type: DT_FLOAT } } "
        "attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } "
        "float_val: %g float_val: %g } } } }\n",
        name, extra ? extra : "", (double)v, (double)v + 1);
}

/* op(name) with the given inputs (a pbtxt fragment such as "input: 'a'"). */
static void s_gb_op(s_gb_t *gb, const char *op, const char *name, const char *inputs)
{
    s_gb_add(gb, "node { name: '%s' op: '%s' %s " T_FLOAT " }\n", name, op, inputs);
}

static void s_gb_send(s_gb_t *gb, const char *name, const char *input, const char *key)
{
    s_gb_add(gb,
             "node { name: '%s' op: '_Send' input: '%s' " T_FLOAT
             " attr { key: 'tensor_name' value { s: '%s' } } }\n",
             name, input, key);
}

static void s_gb_recv(s_gb_t *gb, const char *name, const char *key)
{
    s_gb_add(gb,
             "node { name: '%s' op: '_Recv' attr { key: 'tensor_type' value { type: DT_FLOAT } }"
             " attr { key: 'tensor_name' value { s: '%s' } } }\n",
             name, key);
}

static Tensorflow__GraphDef *s_gb_parse(s_gb_t *gb)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(gb->text, gb->len, ZF_FORMAT_PBTXT, &gd);
    if (!zf_ok(s)) fail_msg("%s\n%s", zf_status_msg(&s), gb->text);
    free(gb->text);
    memset(gb, 0, sizeof *gb);
    return gd;
}

/* ---- fixtures ------------------------------------------------------------- */

typedef struct {
    zf_device_t *dev0, *dev1;
} s_fixture_t;

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    if (!zf_ok(zf_device_new(&s_test_ops, TEST0, 2, &f->dev0))) return -1;
    if (!zf_ok(zf_device_new(&s_test_ops, TEST1, 2, &f->dev1))) return -1;
    s_reset_log();
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    zf_device_destroy(&f->dev0);
    zf_device_destroy(&f->dev1);
    free(f);
    return 0;
}

/* An executor for gd on dev (which it adopts). */
static zf_engine_t *s_executor(zf_device_t *dev, Tensorflow__GraphDef *gd)
{
    zf_engine_t *ex = NULL;
    zf_engine_params_t params = {dev, NULL};
    zf_status_t s = zf_engine_new(gd, &params, &ex);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    zf_engine_adopt_graphdef(ex, &gd);
    return ex;
}

/* Receives key from r and checks its two floats; with sole, that nothing
 * else holds the tensor once the step is over. */
static void s_expect_value(zf_rendezvous_t *r, const char *key, float v0, float v1, bool sole)
{
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_rendezvous_recv(r, key, 5000, &t, NULL);
    if (!zf_ok(s)) fail_msg("%s: %s", key, zf_status_msg(&s));
    assert_int_equal(zf_tensor_num_elements(t), 2);
    const float *f = zf_tensor_data(t);
    if (f[0] != v0 || f[1] != v1)
        fail_msg("%s: got [%g, %g], want [%g, %g]", key, (double)f[0], (double)f[1], (double)v0,
                 (double)v1);
    if (sole) assert_int_equal(zf_tensor_refcount(t), 1);
    zf_tensor_unref(&t);
}

static void s_expect(zf_rendezvous_t *r, const char *key, float v0, float v1)
{
    s_expect_value(r, key, v0, v1, true);
}

static zf_status_t s_run(zf_engine_t *ex, zf_rendezvous_t *r)
{
    zf_engine_args_t args = {1, r, NULL};
    return zf_engine_run(ex, &args);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_executor_runs_a_diamond(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_const(&gb, "a", 1.0f, NULL);
    s_gb_op(&gb, "Identity", "b", "input: 'a'");
    s_gb_op(&gb, "Identity", "c", "input: 'a'");
    s_gb_op(&gb, "AddV2", "d", "input: 'b' input: 'c'");
    s_gb_send(&gb, "out", "d", "d");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    assert_int_equal(zf_engine_num_nodes(ex), 5);
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    for (int step = 0; step < 3; step++) { /* the plan is reused step after step */
        assert_int_equal(s_run(ex, r).code, ZF_OK);
        s_expect(r, "d", 2.0f, 4.0f);
    }
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
    assert_null(ex);
}

static void test_executor_runs_a_wide_graph_with_pool_kernels(void **state)
{
    s_fixture_t *f = *state;
    enum { N = 300 };
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", 1.0f, NULL);
    char name[32], in[96];
    for (int i = 0; i < N; i++) { /* half inline, half on the pool */
        snprintf(name, sizeof name, "w%d", i);
        s_gb_op(&gb, i % 2 ? "StopGradient" : "Identity", name, "input: 'c'");
    }
    s_gb_op(&gb, "AddV2", "s1", "input: 'w0' input: 'w1'");
    for (int i = 2; i < N; i++) {
        snprintf(name, sizeof name, "s%d", i);
        snprintf(in, sizeof in, "input: 's%d' input: 'w%d'", i - 1, i);
        s_gb_op(&gb, "AddV2", name, in);
    }
    snprintf(name, sizeof name, "s%d", N - 1);
    s_gb_send(&gb, "out", name, "sum");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    for (int step = 0; step < 5; step++) {
        assert_int_equal(s_run(ex, r).code, ZF_OK);
        s_expect(r, "sum", (float)N, 2.0f * N);
    }
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
}

static void test_executor_honours_control_edges(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    /* Data flows from b and c to d, but control edges force e1 -> e2 -> c. */
    s_gb_const(&gb, "b", 1.0f, NULL);
    s_gb_add(&gb, "node { name: 'e1' op: 'NoOp' input: '^b' }\n");
    s_gb_add(&gb, "node { name: 'e2' op: 'NoOp' input: '^e1' }\n");
    s_gb_const(&gb, "c", 5.0f, "input: '^e2'");
    s_gb_op(&gb, "AddV2", "d", "input: 'b' input: 'c' input: '^e1'");
    s_gb_send(&gb, "out", "d", "d");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    assert_int_equal(s_run(ex, r).code, ZF_OK);
    s_expect(r, "d", 6.0f, 8.0f);
    assert_true(s_ran_at("b") < s_ran_at("e1"));
    assert_true(s_ran_at("e1") < s_ran_at("e2"));
    assert_true(s_ran_at("e2") < s_ran_at("c"));
    assert_true(s_ran_at("c") < s_ran_at("d"));
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
}

static void test_executor_frees_intermediate_tensors_after_their_last_consumer(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", 2.0f, NULL);
    s_gb_op(&gb, "Square", "a", "input: 'c'");    /* tracked buffer 0 */
    s_gb_op(&gb, "Square", "b", "input: 'c'");    /* tracked buffer 1 */
    s_gb_op(&gb, "Identity", "ia", "input: 'a'"); /* a's last consumer */
    s_gb_op(&gb, "OnesLike", "probe", "input: 'c' input: '^ia'");
    s_gb_op(&gb, "AddV2", "out", "input: 'b' input: 'probe'");
    s_gb_send(&gb, "send", "out", "out");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    assert_int_equal(s_run(ex, r).code, ZF_OK);
    /* When the probe ran, a (consumed only by ia, which had run) was freed;
     * b was not, because out had yet to consume it. */
    assert_int_equal(s_probe_seen[0], 1);
    assert_int_equal(s_probe_seen[1], 0);
    assert_int_equal(atomic_load(&s_tracked_frees[1]), 1); /* freed by the end of the step */
    s_expect(r, "out", 5.0f, 10.0f);                       /* [2,3]^2 + 1 */
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
}

static void test_executor_fails_the_step_with_the_first_kernel_error_and_aborts(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", -1.0f, NULL);
    s_gb_op(&gb, "Identity", "pre", "input: 'c'");
    s_gb_op(&gb, "Sqrt", "bad", "input: 'pre'");
    s_gb_op(&gb, "Identity", "after", "input: 'bad'");
    s_gb_send(&gb, "out", "after", "after");
    s_gb_op(&gb, "Square", "a_side", "input: 'c'"); /* tracked: must not leak */
    s_gb_op(&gb, "AddV2", "join", "input: 'a_side' input: 'after'");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    zf_status_t s = s_run(ex, r);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), TEST0 ": bad (Sqrt): Sqrt of negative value -1");
    zf_status_t aborted = zf_rendezvous_status(r);
    assert_string_equal(zf_status_msg(&aborted), zf_status_msg(&s));
    assert_true(s_ran("bad"));
    assert_false(s_ran("after"));
    assert_false(s_ran("join"));
    assert_int_equal(atomic_load(&s_tracked_frees[0]), s_ran("a_side") ? 1 : 0);
    zf_status_clear(&aborted);
    zf_status_clear(&s);
    zf_rendezvous_unref(&r);
    /* The executor itself is fine: a step with its own rendezvous runs again. */
    s = s_run(ex, NULL);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&s);
    zf_engine_destroy(&ex);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    zf_status_t status;
} s_wait_t;

static void s_wait_done(zf_status_t status, void *arg)
{
    s_wait_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->status = status;
    w->done++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void s_wait_init(s_wait_t *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->done = 0;
    w->status = ZF_STATUS_OK;
}

static zf_status_t s_wait(s_wait_t *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    assert_int_equal(w->done, 1);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    return w->status;
}

static bool s_is_done(s_wait_t *w)
{
    pthread_mutex_lock(&w->mu);
    bool done = w->done != 0;
    pthread_mutex_unlock(&w->mu);
    return done;
}

static zf_tensor_t *s_pair(float v)
{
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE(2);
    float data[2] = {v, v + 1};
    assert_int_equal(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, data, sizeof data, &t).code, ZF_OK);
    return t;
}

static void test_executor_async_recv_arriving_before_and_after_its_consumer_is_ready(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_recv(&gb, "r1", "k1");
    s_gb_recv(&gb, "r2", "k2");
    s_gb_op(&gb, "Identity", "i1", "input: 'r1'");
    s_gb_op(&gb, "AddV2", "sum", "input: 'i1' input: 'r2'");
    s_gb_send(&gb, "out", "sum", "sum");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    for (int step = 0; step < 20; step++) {
        zf_rendezvous_t *r = NULL;
        assert_int_equal(zf_rendezvous_new(step, &r).code, ZF_OK);
        zf_tensor_t *x = s_pair(1.0f), *y = s_pair(10.0f);
        /* k1 is there before the step starts (its recv completes inline);
         * k2 arrives while the step waits, with sum's other input ready. */
        assert_int_equal(zf_rendezvous_send(r, "k1", x, false).code, ZF_OK);
        s_wait_t w;
        s_wait_init(&w);
        zf_engine_args_t args = {step, r, NULL};
        zf_engine_run_async(ex, &args, s_wait_done, &w);
        if (step == 0) {
            usleep(10000);
            assert_false(s_is_done(&w));
        }
        assert_int_equal(zf_rendezvous_send(r, "k2", y, false).code, ZF_OK);
        assert_int_equal(s_wait(&w).code, ZF_OK);
        s_expect(r, "sum", 11.0f, 13.0f);
        zf_tensor_unref(&x);
        zf_tensor_unref(&y);
        zf_rendezvous_unref(&r);
    }
    zf_engine_destroy(&ex);
}

static void test_executor_forwards_dead_tensors_without_running_kernels(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_recv(&gb, "r", "k");
    s_gb_op(&gb, "Identity", "dead_id", "input: 'r'");
    s_gb_send(&gb, "out", "dead_id", "out");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    assert_int_equal(zf_rendezvous_send(r, "k", NULL, true).code, ZF_OK);
    assert_int_equal(s_run(ex, r).code, ZF_OK);
    zf_tensor_t *t = NULL;
    bool dead = false;
    assert_int_equal(zf_rendezvous_recv(r, "out", 1000, &t, &dead).code, ZF_OK);
    assert_true(dead);
    assert_null(t);
    assert_false(s_ran("dead_id"));
    assert_true(s_ran("out"));
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
}

static void test_executor_step_waiting_on_a_recv_ends_with_the_abort_status(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_recv(&gb, "r", "never");
    s_gb_op(&gb, "Identity", "i", "input: 'r'");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    s_wait_t w;
    s_wait_init(&w);
    zf_engine_args_t args = {1, r, NULL};
    zf_engine_run_async(ex, &args, s_wait_done, &w);
    usleep(5000);
    assert_false(s_is_done(&w));
    zf_status_t cause = zf_status_new(ZF_DEADLINE_EXCEEDED, "step 1 timed out");
    zf_rendezvous_start_abort(r, &cause);
    zf_status_t s = s_wait(&w);
    assert_int_equal(s.code, ZF_DEADLINE_EXCEEDED);
    assert_string_equal(zf_status_msg(&s), "step 1 timed out"); /* the cause, not a new error */
    assert_false(s_ran("i"));
    zf_status_clear(&s);
    zf_status_clear(&cause);
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
}

static void test_executor_failure_in_one_partition_is_the_cause_reported_by_the_other(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", -4.0f, NULL);
    s_gb_op(&gb, "Sqrt", "bad", "input: 'c'");
    s_gb_send(&gb, "send", "bad", "edge");
    zf_engine_t *p0 = s_executor(f->dev0, s_gb_parse(&gb));
    s_gb_recv(&gb, "recv", "edge");
    s_gb_op(&gb, "Identity", "i", "input: 'recv'");
    s_gb_send(&gb, "out", "i", "out");
    zf_engine_t *p1 = s_executor(f->dev1, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    assert_int_equal(zf_rendezvous_new(1, &r).code, ZF_OK);
    s_wait_t w1;
    s_wait_init(&w1);
    zf_engine_args_t args = {1, r, NULL};
    zf_engine_run_async(p1, &args, s_wait_done, &w1);
    zf_status_t s0 = s_run(p0, r);
    zf_status_t s1 = s_wait(&w1);
    assert_int_equal(s0.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s0), TEST0 ": bad (Sqrt): Sqrt of negative value -4");
    assert_int_equal(s1.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s1), zf_status_msg(&s0));
    zf_status_clear(&s0);
    zf_status_clear(&s1);
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&p0);
    zf_engine_destroy(&p1);
}

typedef struct {
    zf_engine_t *ex;
    float base;
    int ok;
} s_concurrent_t;

static void *s_concurrent_steps(void *arg)
{
    s_concurrent_t *c = arg;
    for (int i = 0; i < 50; i++) {
        zf_rendezvous_t *r = NULL;
        if (!zf_ok(zf_rendezvous_new(i, &r))) return NULL;
        zf_tensor_t *x = s_pair(c->base + (float)i);
        zf_status_t s = zf_rendezvous_send(r, "k1", x, false);
        zf_status_clear(&s);
        s = zf_rendezvous_send(r, "k2", x, false);
        zf_status_clear(&s);
        zf_engine_args_t args = {i, r, NULL};
        s = zf_engine_run(c->ex, &args);
        zf_tensor_t *t = NULL;
        if (zf_ok(s)) s = zf_rendezvous_recv(r, "sum", 1000, &t, NULL);
        const float *v = t ? zf_tensor_data(t) : NULL;
        if (zf_ok(s) && v[0] == 2 * (c->base + (float)i)) c->ok++;
        zf_status_clear(&s);
        zf_tensor_unref(&t);
        zf_tensor_unref(&x);
        zf_rendezvous_unref(&r);
    }
    return NULL;
}

static void test_executor_runs_concurrent_steps_independently(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_recv(&gb, "r1", "k1");
    s_gb_recv(&gb, "r2", "k2");
    s_gb_op(&gb, "StopGradient", "i1", "input: 'r1'");
    s_gb_op(&gb, "AddV2", "sum", "input: 'i1' input: 'r2'");
    s_gb_send(&gb, "out", "sum", "sum");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    s_concurrent_t c[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        c[i] = (s_concurrent_t){ex, 1000.0f * (float)i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, s_concurrent_steps, &c[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(c[i].ok, 50);
    }
    zf_engine_destroy(&ex);
}

static void test_executor_new_names_the_op_and_node_without_a_kernel(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_const(&gb, "a", 1.0f, NULL);
    s_gb_add(&gb, "node { name: 'mm' op: 'MatMul' input: 'a' input: 'a' " T_FLOAT " }\n");
    Tensorflow__GraphDef *gd = s_gb_parse(&gb);
    zf_engine_t *ex = NULL;
    zf_engine_params_t params = {f->dev0, NULL};
    zf_status_t s = zf_engine_new(gd, &params, &ex);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_null(ex);
    assert_non_null(strstr(zf_status_msg(&s), TEST0 ": No OpKernel was registered to support Op "
                                                    "'MatMul' used by node mm"));
    zf_status_clear(&s);
    zf_graphdef_free(&gd);
    /* A kernel whose create() fails: Const without a value. */
    s_gb_add(&gb,
             "node { name: 'novalue' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } } }");
    gd = s_gb_parse(&gb);
    s = zf_engine_new(gd, &params, &ex);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "missing attr 'value'"));
    zf_status_clear(&s);
    zf_graphdef_free(&gd);
    /* An invalid graph. */
    s_gb_add(&gb, "node { name: 'x' op: 'Identity' input: 'nowhere' " T_FLOAT " }");
    gd = s_gb_parse(&gb);
    s = zf_engine_new(gd, &params, &ex);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "Incomplete graph, missing 1 inputs for x"));
    zf_status_clear(&s);
    zf_graphdef_free(&gd);
}

static void test_executor_runs_an_empty_graph(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_add(&gb, "versions { producer: 1 }");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    assert_int_equal(zf_engine_num_nodes(ex), 0);
    assert_int_equal(s_run(ex, NULL).code, ZF_OK);
    zf_engine_destroy(&ex);
}

/* ---- variables with the built-in CPU kernels ------------------------------ */

static void test_executor_variables_persist_across_steps(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    zf_kernels_register_sendrecv(); /* idempotent */
    zf_device_t *cpu = NULL;
    assert_int_equal(zf_device_cpu_new(CPU0, 1, &cpu).code, ZF_OK);
    zf_resource_mgr_t *res = NULL;
    assert_int_equal(zf_resource_mgr_new(&res).code, ZF_OK);
    const char *var =
        "node { name: 'v' op: 'VariableV2' attr { key: 'dtype' value { type: DT_FLOAT } }"
        " attr { key: 'shape' value { shape { dim { size: 2 } } } } }\n";
    const char *send = "attr { key: 'T' value { type: DT_FLOAT } }"
                       " attr { key: 'tensor_name' value { s: 'out' } }"
                       " attr { key: 'send_device' value { s: '" CPU0 "' } }"
                       " attr { key: 'send_device_incarnation' value { i: 1 } }"
                       " attr { key: 'recv_device' value { s: '" CPU0 "' } }"
                       " attr { key: 'client_terminated' value { b: true } } }\n";
    s_gb_t gb = {0};
    /* Step graph 1 assigns; graph 2 adds to it and reads; both share res. */
    s_gb_add(&gb, "%s", var);
    s_gb_const(&gb, "init", 3.0f, NULL);
    s_gb_add(&gb, "node { name: 'assign' op: 'Assign' input: 'v' input: 'init' " T_FLOAT " }\n");
    Tensorflow__GraphDef *g1 = s_gb_parse(&gb);
    s_gb_add(&gb, "%s", var);
    s_gb_const(&gb, "delta", 1.0f, NULL);
    s_gb_add(&gb, "node { name: 'alpha' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
                  " attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: -1 } } } }\n");
    s_gb_add(&gb, "node { name: 'step' op: 'ApplyGradientDescent' input: 'v' input: 'alpha' "
                  "input: 'delta' " T_FLOAT " }\n");
    s_gb_add(&gb, "node { name: 'read' op: 'Identity' input: 'step' " T_FLOAT " }\n");
    s_gb_add(&gb, "node { name: 'send' op: '_Send' input: 'read' %s", send);
    Tensorflow__GraphDef *g2 = s_gb_parse(&gb);
    zf_engine_params_t params = {cpu, res};
    zf_engine_t *e1 = NULL, *e2 = NULL;
    zf_status_t s = zf_engine_new(g1, &params, &e1);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    zf_engine_adopt_graphdef(e1, &g1);
    s = zf_engine_new(g2, &params, &e2);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    zf_engine_adopt_graphdef(e2, &g2);
    /* Reading before the assignment fails as TensorFlow does. */
    s = s_run(e2, NULL);
    assert_int_equal(s.code, ZF_FAILED_PRECONDITION);
    assert_non_null(strstr(zf_status_msg(&s), "Attempting to use uninitialized value v"));
    zf_status_clear(&s);
    assert_int_equal(s_run(e1, NULL).code, ZF_OK);
    char *key = zf_rendezvous_key(CPU0, 1, CPU0, "out");
    for (int step = 1; step <= 3; step++) { /* v -= -1 * [1,2] each step */
        zf_rendezvous_t *r = NULL;
        assert_int_equal(zf_rendezvous_new(step, &r).code, ZF_OK);
        s = s_run(e2, r);
        if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
        /* read is the variable's own tensor (a ref), still held by res */
        s_expect_value(r, key, 3.0f + (float)step, 4.0f + 2.0f * (float)step, false);
        zf_rendezvous_unref(&r);
    }
    free(key);
    zf_engine_destroy(&e1);
    zf_engine_destroy(&e2);
    zf_resource_mgr_destroy(&res);
    zf_device_destroy(&cpu);
}

/* ---- light partitions and event-loop threads -------------------------------- */

static void test_executor_calls_small_partitions_of_cheap_kernels_light(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_recv(&gb, "r", "k");
    s_gb_op(&gb, "Square", "sq", "input: 'r'");
    s_gb_send(&gb, "s", "sq", "out");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    assert_true(zf_engine_is_light(ex));
    zf_engine_destroy(&ex);
    /* one expensive kernel anywhere makes it heavy */
    s_gb_const(&gb, "c", 1, NULL);
    s_gb_op(&gb, "StopGradient", "g", "input: 'c'");
    ex = s_executor(f->dev0, s_gb_parse(&gb));
    assert_false(zf_engine_is_light(ex));
    zf_engine_destroy(&ex);
    /* as do more than ZF_ENGINE_LIGHT_NODES nodes, even cheap ones */
    for (int n = ZF_ENGINE_LIGHT_NODES; n <= ZF_ENGINE_LIGHT_NODES + 1; n++) {
        s_gb_const(&gb, "i0", 1, NULL);
        for (int k = 1; k < n; k++) {
            char name[16], in[32];
            snprintf(name, sizeof name, "i%d", k);
            snprintf(in, sizeof in, "input: 'i%d'", k - 1);
            s_gb_op(&gb, "Identity", name, in);
        }
        ex = s_executor(f->dev0, s_gb_parse(&gb));
        assert_int_equal(zf_engine_num_nodes(ex), n);
        assert_int_equal(zf_engine_is_light(ex), n <= ZF_ENGINE_LIGHT_NODES);
        zf_engine_destroy(&ex);
    }
}

typedef struct {
    atomic_bool done;
    pthread_t thread; /* the one that ended the step */
    zf_status_t status;
} s_where_t;

static void s_where_done(zf_status_t status, void *arg)
{
    s_where_t *w = arg;
    w->thread = pthread_self();
    w->status = status;
    atomic_store(&w->done, true);
}

/* Starts a step of r -> Square -> out (plus, when heavy, an unrelated
 * expensive node), then sends k (n floats) from this thread, marked as an
 * event loop; returns the thread that ran Square, the node the recv's
 * continuation runs first. What decides it is only where that continuation
 * goes: the recv is already waiting when the value is sent (checked), so
 * its callback fires inside the send, on this thread, and Square runs
 * wherever the continuation is handed; the expensive node, wherever and
 * whenever it runs, cannot change that. */
static pthread_t s_recv_continues_on(s_fixture_t *f, bool heavy, int64_t n)
{
    s_gb_t gb = {0};
    s_gb_recv(&gb, "r", "k");
    s_gb_op(&gb, "Square", "sq", "input: 'r'");
    s_gb_send(&gb, "s", "sq", "out");
    if (heavy) {
        s_gb_const(&gb, "c", 1, NULL);
        s_gb_op(&gb, "StopGradient", "g", "input: 'c'");
    }
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    assert_int_equal(zf_engine_is_light(ex), !heavy);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_new(1, &r));
    s_where_t w = {.status = ZF_STATUS_OK};
    atomic_init(&w.done, false);
    zf_engine_args_t args = {1, r, NULL};
    zf_engine_run_async(ex, &args, s_where_done, &w);
    size_t values = 9, recvs = 0;
    zf_rendezvous_pending(r, &values, &recvs); /* the cheap root ran inside run_async */
    assert_int_equal(recvs, 1);
    assert_int_equal(values, 0);
    zf_shape_t shape = {.rank = 1, .dims = {n}};
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &t));
    float *v = zf_tensor_data(t);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 7) - 3;
    zf_engine_set_inline_thread(true);
    ASSERT_OK(zf_rendezvous_send(r, "k", t, false));
    zf_engine_set_inline_thread(false);
    while (!atomic_load(&w.done)) usleep(1000);
    ASSERT_OK(w.status);
    pthread_mutex_lock(&s_log_mu);
    pthread_t square = s_square_thread;
    pthread_mutex_unlock(&s_log_mu);
    /* Without the expensive node, Square's thread also ran _Send, the last
     * node, and so ended the step. */
    if (!heavy) assert_true(pthread_equal(w.thread, square));
    zf_tensor_t *out = NULL;
    ASSERT_OK(zf_rendezvous_recv(r, "out", 0, &out, NULL));
    assert_int_equal(zf_tensor_num_elements(out), n);
    assert_true(((float *)zf_tensor_data(out))[n - 1] == v[n - 1] * v[n - 1]);
    zf_tensor_unref(&out);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
    return square;
}

static void
test_executor_continues_a_light_step_on_the_event_loop_that_completes_its_recv(void **state)
{
    s_fixture_t *f = *state;
    pthread_t me = pthread_self();
    /* light, small value: continues on this thread, inside the send */
    assert_true(pthread_equal(s_recv_continues_on(f, false, 2), me));
    /* a heavy partition, or a value past ZF_ENGINE_INLINE_BYTES: the pool */
    assert_false(pthread_equal(s_recv_continues_on(f, true, 2), me));
    int64_t big = ZF_ENGINE_INLINE_BYTES / (int64_t)sizeof(float) + 1;
    assert_false(pthread_equal(s_recv_continues_on(f, false, big), me));
    /* the last value that still stays */
    assert_true(pthread_equal(
        s_recv_continues_on(f, false, ZF_ENGINE_INLINE_BYTES / (int64_t)sizeof(float)), me));
}

/* Runs gd's step from this thread, marked as an event loop, to its end and
 * returns the thread that ran Square (or, with mul, Mul); checks that out
 * holds elements values. */
static pthread_t s_loop_runs(s_fixture_t *f, s_gb_t *gb, bool mul, int64_t elements)
{
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(gb));
    assert_true(zf_engine_is_light(ex));
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_new(1, &r));
    s_where_t w = {.status = ZF_STATUS_OK};
    atomic_init(&w.done, false);
    zf_engine_args_t args = {1, r, NULL};
    zf_engine_set_inline_thread(true);
    zf_engine_run_async(ex, &args, s_where_done, &w);
    zf_engine_set_inline_thread(false);
    while (!atomic_load(&w.done)) usleep(1000);
    ASSERT_OK(w.status);
    zf_tensor_t *out = NULL;
    ASSERT_OK(zf_rendezvous_recv(r, "out", 0, &out, NULL));
    assert_int_equal(zf_tensor_num_elements(out), elements);
    zf_tensor_unref(&out);
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
    pthread_mutex_lock(&s_log_mu);
    pthread_t t = mul ? s_mul_thread : s_square_thread;
    pthread_mutex_unlock(&s_log_mu);
    return t;
}

/* c (n) -> grow ([n,1]) -> Square -> out */
static pthread_t s_square_of_grown(s_fixture_t *f, const char *grow, int64_t n)
{
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", (float)n, NULL);
    s_gb_op(&gb, grow, "g", "input: 'c'");
    s_gb_op(&gb, "Square", "sq", "input: 'g'");
    s_gb_send(&gb, "s", "sq", "out");
    return s_loop_runs(f, &gb, false, n);
}

/* Mul of an [n,1] and a [1,n] tensor, each made from a small constant. */
static pthread_t s_broadcast_of(s_fixture_t *f, int64_t n)
{
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", (float)n, NULL);
    s_gb_op(&gb, "Neg", "col", "input: 'c'");
    s_gb_op(&gb, "Abs", "row", "input: 'c'");
    s_gb_op(&gb, "Mul", "m", "input: 'col' input: 'row'");
    s_gb_send(&gb, "s", "m", "out");
    return s_loop_runs(f, &gb, true, n);
}

static void
test_executor_sends_nodes_that_may_take_long_from_an_event_loop_to_the_pool(void **state)
{
    s_fixture_t *f = *state;
    pthread_t me = pthread_self();
    int64_t limit = ZF_ENGINE_INLINE_BYTES / (int64_t)sizeof(float);
    /* inputs up to ZF_ENGINE_INLINE_BYTES stay on the loop; past it, the pool */
    assert_true(pthread_equal(s_square_of_grown(f, "Neg", limit), me));
    assert_false(pthread_equal(s_square_of_grown(f, "Neg", limit + 1), me));
    /* small inputs whose shapes broadcast past it: the pool (256*256 floats
     * is exactly the limit) */
    assert_true(pthread_equal(s_broadcast_of(f, 256), me));
    assert_false(pthread_equal(s_broadcast_of(f, 257), me));
    /* a node sized by its input's values never runs on the loop, and what it
     * makes ready goes on where it ran, however small */
    assert_false(pthread_equal(s_square_of_grown(f, "Relu", 2), me));
    /* out of the loop, the same steps run where they start */
    zf_engine_set_inline_thread(false);
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", 2, NULL);
    s_gb_op(&gb, "Relu", "g", "input: 'c'");
    s_gb_op(&gb, "Square", "sq", "input: 'g'");
    s_gb_send(&gb, "s", "sq", "out");
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_new(2, &r));
    zf_engine_args_t args = {2, r, NULL};
    ASSERT_OK(zf_engine_run(ex, &args));
    pthread_mutex_lock(&s_log_mu);
    assert_true(pthread_equal(s_square_thread, me));
    pthread_mutex_unlock(&s_log_mu);
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
}

static void test_executor_cpu_fill_is_sized_by_its_values(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    s_gb_t gb = {0};
    s_gb_add(&gb, "node { name: 'f' op: 'Fill' input: 'd' input: 'v' " T_FLOAT
                  " attr { key: 'index_type' value { type: DT_INT32 } } }\n");
    Tensorflow__GraphDef *gd = s_gb_parse(&gb);
    const zf_kernel_t *k = NULL;
    ASSERT_OK(zf_kernel_find("CPU", gd->node[0], &k));
    assert_string_equal(k->op, "Fill");
    assert_true(k->flags & ZF_KERNEL_SIZED_BY_VALUE);
    assert_false(k->flags & ZF_KERNEL_EXPENSIVE); /* it may still be part of a light step */
    zf_graphdef_free(&gd);
}

/* ---- send batches ------------------------------------------------------------ */

static void s_log_word(const char *word)
{
    pthread_mutex_lock(&s_log_mu);
    size_t used = strlen(s_log);
    snprintf(s_log + used, sizeof s_log - used, "%s ", word);
    pthread_mutex_unlock(&s_log_mu);
}

static void s_batch_flush(void *arg)
{
    (void)arg;
    s_log_word("flush");
}

/* A remote-send hook that holds a value back whenever a batch is open, as
 * the network transport does, and logs which it did. */
static zf_status_t s_batch_hook(void *arg, int64_t step_id, const char *key, const char *dst,
                                zf_tensor_t *tensor, bool is_dead, bool *sent)
{
    (void)step_id, (void)key, (void)dst, (void)tensor, (void)is_dead;
    bool held = zf_rendezvous_batch_is_open() && zf_rendezvous_batch_defer(s_batch_flush, arg);
    s_log_word(held ? "held" : "direct");
    *sent = true;
    return ZF_STATUS_OK;
}

#define BATCH_KEY(k) TEST0 ";0000000000000001;" TEST1 ";" k ";0:0"

static void test_executor_sends_ready_together_leave_in_a_batch_ended_before_the_last(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", 1.0f, NULL);
    s_gb_op(&gb, "Identity", "i", "input: 'c'");
    char name[16], key[160];
    for (int k = 1; k <= 4; k++) { /* ready together once c has run */
        snprintf(name, sizeof name, "s%d", k);
        snprintf(key, sizeof key, BATCH_KEY("k%d"), k);
        s_gb_send(&gb, name, "c", key);
    }
    s_gb_send(&gb, "s5", "i", BATCH_KEY("k5")); /* alone, after i */
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_new(1, &r));
    ASSERT_OK(zf_rendezvous_set_remote(r, TEST0, s_batch_hook, NULL));
    ASSERT_OK(s_run(ex, r));
    assert_false(zf_rendezvous_batch_is_open());
    /* Every send ran; those held back were flushed before anything else
     * ran, and the last of each run of sends went directly after the
     * flush, so the step could not end with a value held. */
    char log[sizeof s_log];
    pthread_mutex_lock(&s_log_mu);
    snprintf(log, sizeof log, "%s", s_log);
    pthread_mutex_unlock(&s_log_mu);
    int held = 0, direct = 0, flushes = 0, pending = 0;
    char *save = NULL;
    for (char *w = strtok_r(log, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (strcmp(w, "held") == 0) {
            held++;
            pending++;
        } else if (strcmp(w, "flush") == 0) {
            flushes++;
            pending = 0;
        } else if (strcmp(w, "direct") == 0) {
            direct++;
            if (pending) fail_msg("a send went directly with values held: %s", s_log);
        } else if (pending && w[0] != 's') {
            fail_msg("%s ran with values held: %s", w, s_log);
        }
    }
    assert_int_equal(pending, 0);
    assert_int_equal(held + direct, 5);
    assert_int_equal(held, 3); /* s1..s4: all but the last */
    assert_int_equal(flushes, 1);
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
}

static void test_executor_lone_send_is_never_held_back(void **state)
{
    s_fixture_t *f = *state;
    s_gb_t gb = {0};
    s_gb_const(&gb, "c", 1.0f, NULL);
    s_gb_op(&gb, "Identity", "i", "input: 'c'");
    s_gb_send(&gb, "s1", "c", BATCH_KEY("k1"));
    s_gb_send(&gb, "s2", "i", BATCH_KEY("k2"));
    zf_engine_t *ex = s_executor(f->dev0, s_gb_parse(&gb));
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_new(1, &r));
    ASSERT_OK(zf_rendezvous_set_remote(r, TEST0, s_batch_hook, NULL));
    ASSERT_OK(s_run(ex, r));
    pthread_mutex_lock(&s_log_mu);
    bool any_held = strstr(s_log, "held") != NULL || strstr(s_log, "flush") != NULL;
    pthread_mutex_unlock(&s_log_mu);
    if (any_held) fail_msg("a lone send was held back: %s", s_log);
    zf_rendezvous_unref(&r);
    zf_engine_destroy(&ex);
}

int main(void)
{
    zf_status_t s = ZF_STATUS_OK;
    enum { N_TEST = sizeof s_test_kernels / sizeof s_test_kernels[0] };
    static zf_kernel_def_t defs[N_TEST]; /* the TEST device's: no constraint, no host memory */
    for (size_t i = 0; i < N_TEST && zf_ok(s); i++) {
        defs[i] = (zf_kernel_def_t){.op = s_test_kernels[i].op, .device_type = "TEST"};
        s = zf_kernel_register_with_def(&defs[i], &s_test_kernels[i]);
    }
    if (!zf_ok(s)) {
        fprintf(stderr, "registering test kernels: %s\n", zf_status_msg(&s));
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_executor_runs_a_diamond, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_executor_sends_nodes_that_may_take_long_from_an_event_loop_to_the_pool, s_setup,
            s_teardown),
        cmocka_unit_test(test_executor_cpu_fill_is_sized_by_its_values),
        cmocka_unit_test_setup_teardown(test_executor_runs_a_wide_graph_with_pool_kernels, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_executor_honours_control_edges, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_executor_frees_intermediate_tensors_after_their_last_consumer, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_executor_fails_the_step_with_the_first_kernel_error_and_aborts, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_executor_async_recv_arriving_before_and_after_its_consumer_is_ready, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_executor_forwards_dead_tensors_without_running_kernels,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_executor_step_waiting_on_a_recv_ends_with_the_abort_status, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_executor_failure_in_one_partition_is_the_cause_reported_by_the_other, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_executor_runs_concurrent_steps_independently, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_executor_new_names_the_op_and_node_without_a_kernel,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_executor_runs_an_empty_graph, s_setup, s_teardown),
        cmocka_unit_test(test_executor_variables_persist_across_steps),
        cmocka_unit_test_setup_teardown(test_executor_calls_small_partitions_of_cheap_kernels_light,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_executor_continues_a_light_step_on_the_event_loop_that_completes_its_recv, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_executor_sends_ready_together_leave_in_a_batch_ended_before_the_last, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_executor_lone_send_is_never_held_back, s_setup,
                                        s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
