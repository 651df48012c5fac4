/* Every TensorFlow test graph in tests/data/tensorflow, run three ways: in
 * one process on one CPU, in one process on two CPUs with the graph's nodes
 * (and the nodes of its library's functions) pinned alternately to CPU:0
 * and CPU:1, and on a service of two executor processes with the same
 * pinned graph. A graph whose ops all have kernels runs, its values checked
 * against results worked out here from its constants and the feeds chosen;
 * one that cannot run fails with an error naming the op or the feature.
 * Each file has one row in s_rows, and a file without a row fails the
 * test. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "session/local_session.h"
#include "service_test_util.h"
#include "test_util.h"

#define WAIT_MS 60000
#define D0      ZF_TEST_CPU(0)
#define D1      ZF_TEST_CPU(1)
#define S_MAX   4 /* feeds, fetches or targets of one step */

/* ---- the service, started once for the file -------------------------------- */

static zf_test_service_t s_svc;
static zf_client_t *s_client;

static int s_setup(void **state)
{
    (void)state;
    return zf_test_service_setup(&s_svc, 2, &s_client, WAIT_MS);
}

static int s_teardown(void **state)
{
    (void)state;
    return zf_test_service_teardown(&s_svc, &s_client, WAIT_MS);
}

/* ---- sessions in the three modes ----------------------------------------------- */

typedef enum { S_CPU1, S_CPU2, S_SERVICE, S_MODES } s_mode_t;

static const char *const s_mode_names[S_MODES] = {"in-process on cpu:1",
                                                  "in-process on cpu:2, pinned", "on the service"};

typedef struct s_sess s_sess_t;

/* One file: a runnable graph has check, which runs steps on a session and
 * checks their values; a graph that cannot run has none, and fails (when
 * loaded, when its session is created or when the step of feed, fetch and
 * target runs) with code and a message containing msg. soft: the graph
 * needs allow_soft_placement, in every mode (the comment of the row says
 * why). */
typedef struct {
    const char *file;
    void (*check)(s_sess_t *s);
    bool soft;
    zf_code_t code;
    const char *msg;
    const char *feed; /* an int32 scalar 1 fed to this name */
    const char *fetch, *target;
} s_row_t;

struct s_sess {
    s_mode_t mode;
    const s_row_t *row;
    Tensorflow__GraphDef *gd;
    zf_local_session_t *local;
    char *remote;
    int max_partitions; /* in-process, the most partitions a run used */
};

static void s_set_device(char **device, size_t k)
{
    if (*device != protobuf_c_empty_string) free(*device);
    *device = strdup(k % 2 ? D1 : D0);
    assert_non_null(*device);
}

/* Pins the graph's nodes alternately to CPU:0 and CPU:1, and so the nodes
 * of each function body. */
static void s_pin(Tensorflow__GraphDef *gd)
{
    for (size_t i = 0; i < gd->n_node; i++) s_set_device(&gd->node[i]->device, i);
    for (size_t f = 0; gd->library && f < gd->library->n_function; f++) {
        Tensorflow__FunctionDef *fn = gd->library->function[f];
        for (size_t k = 0; k < fn->n_node_def; k++) s_set_device(&fn->node_def[k]->device, k);
    }
}

static zf_status_t s_open(s_sess_t *s, const s_row_t *row, s_mode_t mode)
{
    *s = (s_sess_t){.mode = mode, .row = row};
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ZF_TF_DATA_DIR, row->file);
    ZF_TRY(zf_graphdef_read_file(path, ZF_FORMAT_AUTO, &s->gd));
    if (mode != S_CPU1) s_pin(s->gd);
    if (mode == S_SERVICE) {
        zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
        o.allow_soft_placement = row->soft;
        return zf_client_session_create(s_client, s->gd, &o, &s->remote);
    }
    zf_local_session_options_t o = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    o.devices = mode == S_CPU1 ? "cpu:1" : "cpu:2";
    o.allow_soft_placement = row->soft;
    return zf_local_session_new(s->gd, &o, &s->local);
}

static void s_close(s_sess_t *s)
{
    zf_local_session_destroy(&s->local);
    if (s->remote) ASSERT_OK(zf_client_session_close(s_client, s->remote));
    free(s->remote);
    zf_graphdef_free(&s->gd);
}

/* One step; the tensors in value and want are taken (unref'd by s_expect).
 * Counts are those of the leading non-NULL names. */
typedef struct {
    const char *feed[S_MAX];
    zf_tensor_t *value[S_MAX];
    const char *fetch[S_MAX];
    zf_tensor_t *want[S_MAX];
    const char *target[S_MAX];
} s_step_t;

static int s_count(const char *const *names)
{
    int n = 0;
    while (n < S_MAX && names[n]) n++;
    return n;
}

static zf_status_t s_run(s_sess_t *s, const s_step_t *st, zf_tensor_t **out)
{
    int nf = s_count(st->feed), no = s_count(st->fetch), nt = s_count(st->target);
    if (s->mode == S_SERVICE) {
        zf_client_step_t step = {st->feed, st->value, nf, st->fetch, no, st->target, nt};
        return zf_client_session_run(s_client, s->remote, &step, WAIT_MS, out);
    }
    ZF_TRY(zf_local_session_run(s->local, st->feed, st->value, nf, st->fetch, no, st->target, nt,
                                out));
    int parts = zf_local_session_last_num_partitions(s->local);
    if (parts > s->max_partitions) s->max_partitions = parts;
    return ZF_STATUS_OK;
}

static void s_step_free(s_step_t *st)
{
    for (int i = 0; i < S_MAX; i++) {
        zf_tensor_unref(&st->value[i]);
        zf_tensor_unref(&st->want[i]);
    }
}

static double s_elem(const zf_tensor_t *t, int64_t i)
{
    const void *d = zf_tensor_data(t);
    switch (zf_tensor_dtype(t)) {
    case ZF_FLOAT: return ((const float *)d)[i];
    case ZF_DOUBLE: return ((const double *)d)[i];
    case ZF_INT32: return ((const int32_t *)d)[i];
    case ZF_INT64: return (double)((const int64_t *)d)[i];
    case ZF_UINT8: return ((const uint8_t *)d)[i];
    case ZF_INT8: return ((const int8_t *)d)[i];
    case ZF_BOOL: return ((const bool *)d)[i];
    default: fail_msg("dtype %s", zf_dtype_name(zf_tensor_dtype(t)));
    }
    return 0;
}

/* got must have want's dtype and shape, and its values: equal for integers
 * and bools, within a relative 1e-5 for floats (sums in another order),
 * with the sign of a zero. */
static void s_assert_tensor(const s_sess_t *s, const char *fetch, const zf_tensor_t *got,
                            const zf_tensor_t *want)
{
    const char *g = s->row->file, *m = s_mode_names[s->mode];
    if (zf_tensor_dtype(got) != zf_tensor_dtype(want))
        fail_msg("%s %s: %s is %s, want %s", g, m, fetch, zf_dtype_name(zf_tensor_dtype(got)),
                 zf_dtype_name(zf_tensor_dtype(want)));
    if (!zf_shape_equal(zf_tensor_shape(got), zf_tensor_shape(want))) {
        char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
        fail_msg("%s %s: %s has shape %s, want %s", g, m, fetch,
                 zf_shape_to_string(zf_tensor_shape(got), a, sizeof a),
                 zf_shape_to_string(zf_tensor_shape(want), b, sizeof b));
    }
    bool exact = zf_tensor_dtype(want) != ZF_FLOAT && zf_tensor_dtype(want) != ZF_DOUBLE;
    for (int64_t i = 0; i < zf_tensor_num_elements(want); i++) {
        double x = s_elem(got, i), y = s_elem(want, i);
        bool close =
            fabs(x - y) <= 1e-5 * fmax(1, fabs(y)) && (y != 0 || !signbit(x) == !signbit(y));
        if (exact ? x != y : !close)
            fail_msg("%s %s: %s[%lld] = %.9g, want %.9g", g, m, fetch, (long long)i, x, y);
    }
}

/* Runs the step and checks each fetch against its want. */
static void s_expect(s_sess_t *s, s_step_t st)
{
    zf_tensor_t *out[S_MAX] = {NULL};
    zf_status_t r = s_run(s, &st, out);
    if (!zf_ok(r)) fail_msg("%s %s: %s", s->row->file, s_mode_names[s->mode], zf_status_msg(&r));
    for (int i = 0; i < s_count(st.fetch); i++) {
        s_assert_tensor(s, st.fetch[i], out[i], st.want[i]);
        zf_tensor_unref(&out[i]);
    }
    s_step_free(&st);
}

/* ---- tensors ------------------------------------------------------------------ */

/* A tensor of dtype and shape holding the n values v (n = 1: every element
 * v[0]). */
static zf_tensor_t *s_tensor(zf_dtype_t dtype, zf_shape_t shape, int n, const double *v)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(dtype, &shape, &t));
    int64_t count = zf_tensor_num_elements(t);
    assert_true(n == 1 || n == count);
    void *d = zf_tensor_data(t);
    for (int64_t i = 0; i < count; i++) {
        double x = v[n == 1 ? 0 : i];
        switch (dtype) {
        case ZF_FLOAT: ((float *)d)[i] = (float)x; break;
        case ZF_DOUBLE: ((double *)d)[i] = x; break;
        case ZF_INT32: ((int32_t *)d)[i] = (int32_t)x; break;
        case ZF_INT64: ((int64_t *)d)[i] = (int64_t)x; break;
        case ZF_UINT8: ((uint8_t *)d)[i] = (uint8_t)x; break;
        case ZF_BOOL: ((bool *)d)[i] = x != 0; break;
        default: fail_msg("dtype %s", zf_dtype_name(dtype));
        }
    }
    return t;
}

#define S_T(dtype, shape, ...)                                                                     \
    s_tensor(dtype, shape, (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)),          \
             (const double[]){__VA_ARGS__})
#define S_SCALAR(dtype, v) s_tensor(dtype, zf_shape_scalar(), 1, (const double[]){v})

/* A float tensor of shape with the values v, as many as shape holds. */
static zf_tensor_t *s_floats(zf_shape_t shape, const float *v)
{
    zf_tensor_t *t = NULL;
    int64_t n = 0;
    ASSERT_OK(zf_shape_num_elements(&shape, &n));
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, (size_t)n * sizeof *v, &t));
    return t;
}

/* ---- a reference convolution ---------------------------------------------------- */

/* out[oy][ox][o] = sum over ky, kx, c of in[oy*stride + ky - pad][ox*stride
 * + kx - pad][c] * w[ky][kx][c][o] (zero outside the input): NHWC with one
 * image, square stride and padding before (pad) the same on both axes. */
typedef struct {
    int h, w, c;     /* input */
    int kh, kw, o;   /* filter */
    int stride, pad; /* padding before, on both axes */
    int oh, ow;      /* output */
} s_conv_t;

static float *s_conv(const s_conv_t *p, const float *in, const float *w)
{
    float *out = calloc((size_t)p->oh * p->ow * p->o, sizeof *out);
    assert_non_null(out);
    for (int oy = 0; oy < p->oh; oy++)
        for (int ox = 0; ox < p->ow; ox++)
            for (int o = 0; o < p->o; o++) {
                double sum = 0;
                for (int ky = 0; ky < p->kh; ky++)
                    for (int kx = 0; kx < p->kw; kx++) {
                        int y = oy * p->stride + ky - p->pad, x = ox * p->stride + kx - p->pad;
                        if (y < 0 || y >= p->h || x < 0 || x >= p->w) continue;
                        for (int c = 0; c < p->c; c++)
                            sum += (double)in[((size_t)y * p->w + x) * p->c + c] *
                                   w[((size_t)(ky * p->kw + kx) * p->c + c) * p->o + o];
                    }
                out[((size_t)oy * p->ow + ox) * p->o + o] = (float)sum;
            }
    return out;
}

/* An input image h x w x c whose values are small integers of both signs. */
static float *s_image(int h, int w, int c)
{
    float *in = malloc((size_t)h * w * c * sizeof *in);
    assert_non_null(in);
    for (int i = 0; i < h * w * c; i++) in[i] = (float)((i * 7) % 11 - 5);
    return in;
}

/* The float values of Const node name's tensor_content. */
static const float *s_const_content(const Tensorflow__GraphDef *gd, const char *name, size_t n)
{
    for (size_t i = 0; i < gd->n_node; i++) {
        if (strcmp(gd->node[i]->name, name) != 0) continue;
        for (size_t a = 0; a < gd->node[i]->n_attr; a++) {
            if (strcmp(gd->node[i]->attr[a]->key, "value") != 0) continue;
            const Tensorflow__TensorProto *t = gd->node[i]->attr[a]->value->tensor;
            assert_non_null(t);
            assert_int_equal(t->tensor_content.len, n * sizeof(float));
            return (const float *)(const void *)t->tensor_content.data;
        }
    }
    fail_msg("no Const %s", name);
    return NULL;
}

/* ---- the runnable graphs ---------------------------------------------------------- */

static void s_check_add(s_sess_t *s)
{
    /* Add = input0 + input1, elementwise */
    s_expect(s, (s_step_t){.feed = {"input0", "input1"},
                           .value = {S_T(ZF_INT32, ZF_SHAPE(3), 1, -2, 30),
                                     S_T(ZF_INT32, ZF_SHAPE(3), 10, 20, -5)},
                           .fetch = {"Add"},
                           .want = {S_T(ZF_INT32, ZF_SHAPE(3), 11, 18, 25)}});
}

static void s_check_arg_control_dep(s_sess_t *s)
{
    /* foo returns its argument, the Const 0 */
    s_expect(s, (s_step_t){.fetch = {"_tf.foo"}, .want = {S_SCALAR(ZF_INT32, 0)}});
}

static void s_check_device_arg_attr(s_sess_t *s)
{
    /* rets_k = IdentityN(args_0, args_1):k */
    s_expect(s, (s_step_t){.feed = {"args_0", "args_1"},
                           .value = {S_T(ZF_FLOAT, ZF_SHAPE(2), 1.5, -2),
                                     S_T(ZF_INT32, ZF_SHAPE(3), 7, -9, 11)},
                           .fetch = {"rets_0", "rets_1"},
                           .want = {S_T(ZF_FLOAT, ZF_SHAPE(2), 1.5, -2),
                                    S_T(ZF_INT32, ZF_SHAPE(3), 7, -9, 11)}});
}

static void s_check_empty_input_shapes(s_sess_t *s)
{
    /* func_name takes a bool and returns nothing: the call runs as a
     * target, and its input Identity passes the fed value on */
    s_expect(s, (s_step_t){.feed = {"input"},
                           .value = {S_SCALAR(ZF_BOOL, 1)},
                           .fetch = {"func0/input/_0"},
                           .want = {S_SCALAR(ZF_BOOL, 1)},
                           .target = {"func0"}});
}

static void s_check_functional_while_ops(s_sess_t *s)
{
    /* while iter > 0 { iter -= 1; val += val }: from (3, 1.5) val doubles
     * three times to 12, and iter ends at 0; both While forms */
    s_expect(s, (s_step_t){.feed = {"iter", "val"},
                           .value = {S_SCALAR(ZF_INT32, 3), S_SCALAR(ZF_FLOAT, 1.5)},
                           .fetch = {"main", "main1", "StatefulWhile:0", "StatelessWhile:0"},
                           .want = {S_SCALAR(ZF_FLOAT, 12), S_SCALAR(ZF_FLOAT, 12),
                                    S_SCALAR(ZF_INT32, 0), S_SCALAR(ZF_INT32, 0)}});
    /* iter 0: no iteration, val as fed */
    s_expect(s, (s_step_t){.feed = {"iter", "val"},
                           .value = {S_SCALAR(ZF_INT32, 0), S_SCALAR(ZF_FLOAT, -2.5)},
                           .fetch = {"main", "main1"},
                           .want = {S_SCALAR(ZF_FLOAT, -2.5), S_SCALAR(ZF_FLOAT, -2.5)}});
}

static void s_check_graph_as_function(s_sess_t *s)
{
    /* rets_0 = Identity(const 0.0); rets_1 = the call of "function", the
     * Identity of its first input, the same 0.0; the resource _Args are not
     * needed for these fetches */
    s_expect(s, (s_step_t){.fetch = {"rets_0", "rets_1"},
                           .want = {S_SCALAR(ZF_FLOAT, 0), S_SCALAR(ZF_FLOAT, 0)}});
}

static void s_check_graph_default_attr(s_sess_t *s)
{
    /* Conv2D (3x3x3x32 weights of the graph, stride 2, SAME: 224 -> 112,
     * padding 0 before and 1 after) then MaxPool 2x2 stride 2 (112 -> 56,
     * no padding), worked out in plain C from the weights' tensor_content */
    const s_conv_t p = {224, 224, 3, 3, 3, 32, 2, 0, 112, 112};
    float *in = s_image(224, 224, 3);
    const float *w = s_const_content(s->gd, "MobilenetV1/Conv2d_0/weights", 3 * 3 * 3 * 32);
    float *conv = s_conv(&p, in, w), *pool = malloc(56 * 56 * 32 * sizeof *pool);
    assert_non_null(pool);
    for (int y = 0; y < 56; y++)
        for (int x = 0; x < 56; x++)
            for (int o = 0; o < 32; o++) {
                float m = -INFINITY;
                for (int dy = 0; dy < 2; dy++)
                    for (int dx = 0; dx < 2; dx++)
                        m = fmaxf(m, conv[((size_t)(2 * y + dy) * 112 + 2 * x + dx) * 32 + o]);
                pool[((size_t)y * 56 + x) * 32 + o] = m;
            }
    s_expect(s, (s_step_t){.feed = {"input"},
                           .value = {s_floats(ZF_SHAPE(1, 224, 224, 3), in)},
                           .fetch = {"MaxPool"},
                           .want = {s_floats(ZF_SHAPE(1, 56, 56, 32), pool)}});
    free(pool);
    free(conv);
    free(in);
}

static void s_check_graph_func_attr(s_sess_t *s)
{
    /* Case on the constant 0 runs its first branch, foo: ten 1.0s */
    s_expect(s, (s_step_t){.fetch = {"Case"}, .want = {S_T(ZF_FLOAT, ZF_SHAPE(10), 1)}});
}

static void s_check_control_ret(s_sess_t *s)
{
    /* test_fn: d = Identity(a) with a = 0.0; b = Neg(a) is a control_ret */
    s_expect(s, (s_step_t){.fetch = {"test_fn_call", "test_fn_call/b"},
                           .want = {S_SCALAR(ZF_FLOAT, 0), S_SCALAR(ZF_FLOAT, -0.0)}});
}

static void s_check_function_input_shapes(s_sess_t *s)
{
    /* both branches of the If return their input */
    for (int p = 0; p < 2; p++)
        s_expect(s, (s_step_t){.feed = {"Placeholder", "Placeholder_1"},
                               .value = {S_SCALAR(ZF_BOOL, p), S_SCALAR(ZF_INT32, 42 - p)},
                               .fetch = {"If"},
                               .want = {S_SCALAR(ZF_INT32, 42 - p)}});
}

static void s_check_function_resource_args(s_sess_t *s)
{
    /* the call passes the VarHandleOp's resource through: it runs as a
     * target, with no value to fetch; as in TensorFlow, the resource edges
     * put the call's Identities on the VarHandleOp's device whatever their
     * own pins say */
    s_expect(s, (s_step_t){.target = {"func_call"}});
}

static void s_check_functional_while_loop(s_sess_t *s)
{
    /* from input 3: while input < 10 { counter += 1; input += 1 }: seven
     * iterations; the maximum_iterations -1 passes through */
    s_expect(s, (s_step_t){.feed = {"input"},
                           .value = {S_SCALAR(ZF_INT32, 3)},
                           .fetch = {"while:0", "while:1", "while:2"},
                           .want = {S_SCALAR(ZF_INT32, 7), S_SCALAR(ZF_INT32, -1),
                                    S_SCALAR(ZF_INT32, 10)}});
    /* from 12: no iteration */
    s_expect(s, (s_step_t){.feed = {"input"},
                           .value = {S_SCALAR(ZF_INT32, 12)},
                           .fetch = {"while:0", "while:2"},
                           .want = {S_SCALAR(ZF_INT32, 0), S_SCALAR(ZF_INT32, 12)}});
}

static void s_check_uint8_return(s_sess_t *s)
{
    /* the function returns Identity(Const 5) as uint8 */
    s_expect(s, (s_step_t){.fetch = {"PartitionedCall"}, .want = {S_SCALAR(ZF_UINT8, 5)}});
}

static void s_check_while_loop(s_sess_t *s)
{
    /* i = 0; while i < 10: i += 1 */
    s_expect(s, (s_step_t){.fetch = {"while/Exit"}, .want = {S_SCALAR(ZF_INT32, 10)}});
}

static void s_check_multi_output_feeds(s_sess_t *s)
{
    /* var = 2 (its initializer); var_add adds 1 to it, and z = IdentityN(w,
     * x, y) = (2, 3, 4) runs after it; a = z:1 + z:2 */
    s_expect(s, (s_step_t){.target = {"var/Assign"}});
    /* var/Assign's reference input overrides its pin to CPU:1, as
     * TensorFlow's placer does: it runs beside var on CPU:0 */
    if (s->mode == S_CPU2)
        assert_string_equal(zf_local_session_node_device(s->local, "var/Assign"), D0);
    s_expect(s, (s_step_t){.fetch = {"var/read"}, .want = {S_SCALAR(ZF_FLOAT, 2)}});
    /* z:1 and z:2 fed: a needs neither z nor var_add */
    s_expect(s, (s_step_t){.feed = {"z:1", "z:2"},
                           .value = {S_SCALAR(ZF_FLOAT, 5), S_SCALAR(ZF_FLOAT, 7)},
                           .fetch = {"a"},
                           .want = {S_SCALAR(ZF_FLOAT, 12)}});
    s_expect(s, (s_step_t){.fetch = {"var/read"}, .want = {S_SCALAR(ZF_FLOAT, 2)}});
    /* z:0 fetched as well: z runs, and var_add before it */
    s_expect(s, (s_step_t){.feed = {"z:1", "z:2"},
                           .value = {S_SCALAR(ZF_FLOAT, 5), S_SCALAR(ZF_FLOAT, 7)},
                           .fetch = {"z:0", "a"},
                           .want = {S_SCALAR(ZF_FLOAT, 2), S_SCALAR(ZF_FLOAT, 12)}});
    s_expect(s, (s_step_t){.fetch = {"var/read"}, .want = {S_SCALAR(ZF_FLOAT, 3)}});
    /* nothing fed: a = 3 + 4, and var_add runs again */
    s_expect(s, (s_step_t){.fetch = {"a"}, .want = {S_SCALAR(ZF_FLOAT, 7)}});
    s_expect(s, (s_step_t){.fetch = {"var/read"}, .want = {S_SCALAR(ZF_FLOAT, 4)}});
}

static void s_check_node_locations(s_sess_t *s)
{
    /* two Consts (0 and 2) and a call of foo, whose body is the Const 1 */
    s_expect(
        s, (s_step_t){.fetch = {"node_outside_function", "fused_node_outside_function",
                                "unnamed1/node_inside_function"},
                      .want = {S_SCALAR(ZF_INT32, 0), S_SCALAR(ZF_INT32, 2), S_SCALAR(ZF_INT32, 1)},
                      .target = {"unnamed1"}});
}

static void s_check_net_0001(s_sess_t *s)
{
    /* conv: 2x2x3x2 filter of 1.1, VALID (5x5 -> 4x4); badd: + 1.1; out: a
     * 1x1x2x5 filter of 1.1, so each of its 5 channels is 1.1 (badd0 +
     * badd1) */
    const s_conv_t p = {5, 5, 3, 2, 2, 2, 1, 0, 4, 4};
    float *in = s_image(5, 5, 3), w[2 * 2 * 3 * 2], want[4 * 4 * 5];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = 1.1f;
    float *conv = s_conv(&p, in, w);
    for (int i = 0; i < 16; i++)
        for (int o = 0; o < 5; o++)
            want[i * 5 + o] = 1.1f * ((conv[i * 2] + 1.1f) + (conv[i * 2 + 1] + 1.1f));
    s_expect(s, (s_step_t){.feed = {"in"},
                           .value = {s_floats(ZF_SHAPE(1, 5, 5, 3), in)},
                           .fetch = {"out"},
                           .want = {s_floats(ZF_SHAPE(1, 4, 4, 5), want)}});
    free(conv);
    free(in);
}

static void s_check_net_0025(s_sess_t *s)
{
    /* Relu(Conv2D(3x3x3x4 filter of 1.0, stride 2, VALID: 5x5 -> 2x2) +
     * 1.0): each output is the window's sum plus one, or zero */
    const s_conv_t p = {5, 5, 3, 3, 3, 4, 2, 0, 2, 2};
    float *in = s_image(5, 5, 3), w[3 * 3 * 3 * 4];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = 1.0f;
    float *conv = s_conv(&p, in, w);
    for (int i = 0; i < 2 * 2 * 4; i++) conv[i] = fmaxf(conv[i] + 1.0f, 0.0f);
    s_expect(s, (s_step_t){.feed = {"input"},
                           .value = {s_floats(ZF_SHAPE(1, 5, 5, 3), in)},
                           .fetch = {"InceptionV3/InceptionV3/Conv2d_1a_3x3/Relu"},
                           .want = {s_floats(ZF_SHAPE(1, 2, 2, 4), conv)}});
    free(conv);
    free(in);
}

static void s_check_tpu_rnn(s_sess_t *s)
{
    /* a TPU computation, run on CPUs by soft placement: one step of a cell
     * whose output is its input + 1 (packed with a leading dim of 1) and
     * whose state is ones [batch, 1] */
    s_expect(s,
             (s_step_t){.feed = {"placeholder_0_arg"},
                        .value = {S_T(ZF_FLOAT, ZF_SHAPE(2, 2), 1, 2, 3, 4)},
                        .fetch = {"tpu_identity_0_retval_RetVal", "tpu_identity_1_0_retval_RetVal"},
                        .want = {S_T(ZF_FLOAT, ZF_SHAPE(1, 2, 2), 2, 3, 4, 5),
                                 S_T(ZF_FLOAT, ZF_SHAPE(2, 1), 1, 1)}});
}

static void s_check_softmax(s_sess_t *s)
{
    /* softmax([1, 2]) = [1, e] / (1 + e) */
    const double e = exp(1.0);
    s_expect(s, (s_step_t){.feed = {"Placeholder"},
                           .value = {S_T(ZF_FLOAT, ZF_SHAPE(2), 1, 2)},
                           .fetch = {"Softmax"},
                           .want = {S_T(ZF_FLOAT, ZF_SHAPE(2), 1 / (1 + e), e / (1 + e))}});
}

static void s_check_prune_unused_nodes(s_sess_t *s)
{
    /* Add = input0 + input1; unused_input needs no feed */
    s_expect(s, (s_step_t){.feed = {"input0", "input1"},
                           .value = {S_T(ZF_INT32, ZF_SHAPE(2), 4, -8),
                                     S_T(ZF_INT32, ZF_SHAPE(2), 100, 8)},
                           .fetch = {"Add"},
                           .want = {S_T(ZF_INT32, ZF_SHAPE(2), 104, 0)}});
}

static void s_check_switch_n(s_sess_t *s)
{
    /* branch index 0: _SwitchN sends input_0 = 1.0 to branch 0, which
     * multiplies it by 2; branch 1 is dead and Merge takes branch 0 */
    s_expect(s,
             (s_step_t){.fetch = {"__inference_run_240_RetVal"}, .want = {S_SCALAR(ZF_FLOAT, 2)}});
}

static void s_check_tfadd(s_sess_t *s)
{
    /* [1] + [2] */
    s_expect(s, (s_step_t){.fetch = {"x_y_sum"}, .want = {S_T(ZF_INT32, ZF_SHAPE(1), 3)}});
}

static void s_check_merge_without_loops(s_sess_t *s)
{
    /* Less(7, 5) is false: the false branch concatenates ones [1,1,1] with
     * itself on axis 1 ([1,2,1]); concat then doubles axis 2: [1,2,2] */
    s_expect(s, (s_step_t){.fetch = {"cond/Merge", "concat"},
                           .want = {S_T(ZF_FLOAT, ZF_SHAPE(1, 2, 1), 1),
                                    S_T(ZF_FLOAT, ZF_SHAPE(1, 2, 2), 1)}});
}

static void s_check_grappler_while_loop(s_sess_t *s)
{
    /* i from 0 while i < 10, each iteration concatenating the 2x2 ones with
     * themselves on axis 0: 2 * 2^10 rows of two ones */
    s_expect(s, (s_step_t){.fetch = {"while/Exit", "while/Exit_1"},
                           .want = {S_SCALAR(ZF_INT32, 10), S_T(ZF_FLOAT, ZF_SHAPE(2048, 2), 1)}});
}

/* ---- the table ------------------------------------------------------------------ */

#define NO_KERNEL "No OpKernel was registered to support Op "

static const s_row_t s_rows[] = {
    {"add.pbtxt", .check = s_check_add},
    {"arg-control-dep.pbtxt", .check = s_check_arg_control_dep},
    /* only Placeholders: the harness feeds and fetches the same tensors */
    {"arg-multi-data-type-with-subtype.pbtxt", .code = ZF_INVALID_ARGUMENT,
     .msg = "p:0 is both fed and fetched.", .feed = "p", .fetch = "p"},
    /* a SavedModel, not a GraphDef */
    {"batch_use_same_function__saved_model.pbtxt", .code = ZF_INVALID_ARGUMENT,
     .msg = "unknown field 'meta_graphs' in tensorflow.GraphDef"},
    {"device-arg-attr.pbtxt", .check = s_check_device_arg_attr},
    {"empty-input-shapes.pbtxt", .check = s_check_empty_input_shapes},
    {"feed-as-fetch.pbtxt", .code = ZF_INVALID_ARGUMENT, .msg = "input:0 is both fed and fetched.",
     .feed = "input", .fetch = "input"},
    {"force_shared_name_for_resource_ops.pbtxt", .code = ZF_INVALID_ARGUMENT,
     .msg = NO_KERNEL "'HashTableV2'", .target = "hash_table_node"},
    {"functional-while-ops.pbtxt", .check = s_check_functional_while_ops},
    /* its nodes are pinned to TPU_REPLICATED_CORE, and its cond's nodes are
     * colocated (loc:@) across the pinned CPUs: soft placement */
    {"graph-1383300d74bd0b22.pbtxt", .check = s_check_tpu_rnn, .soft = true},
    {"graph-as-function.pbtxt", .check = s_check_graph_as_function},
    /* the weights' read Identity is colocated with them (loc:@), and pinned
     * to the other CPU: strict pinning fails, "Cannot colocate nodes" */
    {"graph-default-attr.pbtxt", .check = s_check_graph_default_attr, .soft = true},
    {"graph-func-attr.pbtxt", .check = s_check_graph_func_attr},
    {"graph-function-control-ret-diff-island.pbtxt", .check = s_check_control_ret},
    {"graph-function-input-shapes.pbtxt", .check = s_check_function_input_shapes},
    {"graph-function-resource-args.pbtxt", .check = s_check_function_resource_args},
    {"graph-functional-while-loop.pbtxt", .check = s_check_functional_while_loop},
    {"graph-human-readable-shard-to-mlir.pbtxt", .code = ZF_INVALID_ARGUMENT,
     .msg = "_Arg nodes 'arg' and 'arg2' both have index 0", .fetch = "arg"},
    {"graph-malformed.pbtxt", .code = ZF_INVALID_ARGUMENT,
     .msg = "unknown field 'this' in tensorflow.GraphDef"},
    {"graph-uint8-return.pbtxt", .check = s_check_uint8_return},
    {"graph-while-loop.pbtxt", .check = s_check_while_loop},
    {"legacy-fed-input-without-inputs.pbtxt", .code = ZF_INVALID_ARGUMENT,
     .msg = NO_KERNEL "'LegacyFedInput'", .fetch = "input"},
    {"multi-output-feeds.pbtxt", .check = s_check_multi_output_feeds},
    {"node-locations.pbtxt", .check = s_check_node_locations},
    {"one_NET_0001.pbtxt", .check = s_check_net_0001},
    {"one_NET_0025.pbtxt", .check = s_check_net_0025},
    {"one_UNIT_Softmax_000.pbtxt", .check = s_check_softmax},
    /* one Placeholder, not fed */
    {"output-shapes-attr.pbtxt", .code = ZF_INVALID_ARGUMENT,
     .msg = "You must feed a value for placeholder tensor 'input0' with dtype int32",
     .fetch = "input0"},
    {"parse_example.pbtxt", .code = ZF_INVALID_ARGUMENT, .msg = NO_KERNEL "'ParseExample'",
     .fetch = "result"},
    {"prune_unused_nodes.pbtxt", .check = s_check_prune_unused_nodes},
    {"shape-attrs.pbtxt", .code = ZF_INVALID_ARGUMENT, .msg = NO_KERNEL "'IteratorGetNext'",
     .target = "IteratorGetNext"},
    {"switch_n.pbtxt", .check = s_check_switch_n},
    {"tensor-list.pbtxt", .code = ZF_INVALID_ARGUMENT, .msg = NO_KERNEL "'TensorListReserve'",
     .fetch = "TensorListStack"},
    {"tf_aot_test_graph_tfadd.pbtxt", .check = s_check_tfadd},
    /* the branches' Switches are colocated (loc:@) with their input ones,
     * pinned to the other CPU */
    {"tf_grappler_merge_without_loops.pbtxt", .check = s_check_merge_without_loops, .soft = true},
    /* the loop's Switches are colocated (loc:@) with their Merges, pinned
     * to the other CPU */
    {"tf_grappler_while_loop.pbtxt", .check = s_check_grappler_while_loop, .soft = true},
};

#define S_ROWS (sizeof s_rows / sizeof s_rows[0])

/* ---- the tests -------------------------------------------------------------------- */

/* One row, in the three modes. */
static void test_tf_graph(void **state)
{
    const s_row_t *row = *state;
    for (int m = 0; m < S_MODES; m++) {
        s_sess_t s;
        zf_status_t st = s_open(&s, row, (s_mode_t)m);
        if (row->check) {
            if (!zf_ok(st)) fail_msg("%s %s: %s", row->file, s_mode_names[m], zf_status_msg(&st));
            row->check(&s);
            row->check(&s); /* again, on the cached plans */
            /* the pinned graph runs in two partitions */
            if (m == S_CPU2) assert_int_equal(s.max_partitions, 2);
        } else {
            if (zf_ok(st)) {
                zf_tensor_t *one = NULL, *out = NULL;
                ASSERT_OK(zf_tensor_new_scalar_int32(1, &one));
                s_step_t step = {.feed = {row->feed},
                                 .value = {one},
                                 .fetch = {row->fetch},
                                 .target = {row->target}};
                st = s_run(&s, &step, &out);
                zf_tensor_unref(&out);
                zf_tensor_unref(&one);
            }
            if (st.code != row->code || !strstr(zf_status_msg(&st), row->msg))
                fail_msg("%s %s: got %s: %s; want %s containing \"%s\"", row->file, s_mode_names[m],
                         zf_code_name(st.code), zf_status_msg(&st), zf_code_name(row->code),
                         row->msg);
            zf_status_clear(&st);
        }
        s_close(&s);
    }
}

/* Every .pbtxt file of the folder has exactly one row, and every row a
 * file. */
static void test_every_graph_has_a_row(void **state)
{
    (void)state;
    DIR *d = opendir(ZF_TF_DATA_DIR);
    assert_non_null(d);
    int seen[S_ROWS] = {0};
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 6, ".pbtxt") != 0) continue;
        size_t i = 0;
        while (i < S_ROWS && strcmp(s_rows[i].file, e->d_name) != 0) i++;
        if (i == S_ROWS) fail_msg("%s has no row in s_rows", e->d_name);
        seen[i]++;
    }
    closedir(d);
    for (size_t i = 0; i < S_ROWS; i++)
        if (seen[i] != 1) fail_msg("row %s: %d files", s_rows[i].file, seen[i]);
}

int main(void)
{
    struct CMUnitTest tests[S_ROWS + 1];
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_every_graph_has_a_row);
    for (size_t i = 0; i < S_ROWS; i++)
        tests[i + 1] =
            (struct CMUnitTest){s_rows[i].file, test_tf_graph, NULL, NULL, (void *)&s_rows[i]};
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
