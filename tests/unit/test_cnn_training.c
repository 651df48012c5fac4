/* examples/cnn_train.pbtxt trains end to end: 200 steps of Adam on its
 * in-graph dataset, in this process on two CPU devices and on a local
 * cluster of two executors, with the conv layer on CPU:0 and the dense
 * layer and the loss on CPU:1. The first loss is checked against a forward
 * pass computed here in double from the graph's constants, the last
 * against a tenth of the first; the graph's gradients against finite
 * differences of its loss; and `zflow run` on the example's documented
 * command line. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "client/cluster.h"
#include "client/zflow_client.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/op_registry.h"
#include "common/tensor_proto.h"
#include "test_util.h"

#define EXAMPLE ZF_TEST_DATA_DIR "/../../examples/cnn_train.pbtxt"
#define STEPS   200
#define CPU0    "/job:localhost/replica:0/task:0/device:CPU:0"
#define CPU1    "/job:localhost/replica:0/task:0/device:CPU:1"

static Tensorflow__GraphDef *s_example(void)
{
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(EXAMPLE, ZF_FORMAT_AUTO, &gd));
    return gd;
}

static const Tensorflow__NodeDef *s_node(const Tensorflow__GraphDef *gd, const char *name)
{
    for (size_t i = 0; i < gd->n_node; i++)
        if (strcmp(gd->node[i]->name, name) == 0) return gd->node[i];
    fail_msg("no node %s in the example", name);
    return NULL;
}

/* The value of Const node name, as doubles in *out (caller frees); the
 * shape in *shape. */
static double *s_const(const Tensorflow__GraphDef *gd, const char *name, zf_shape_t *shape)
{
    const Tensorflow__TensorProto *proto = NULL;
    ASSERT_OK(zf_node_attr_tensor(s_node(gd, name), "value", &proto));
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(proto, &t));
    *shape = *zf_tensor_shape(t);
    int64_t n = zf_tensor_num_elements(t);
    double *v = calloc((size_t)n + 1, sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = zf_tensor_dtype(t) == ZF_INT32 ? ((const int32_t *)zf_tensor_data(t))[i]
                                              : ((const float *)zf_tensor_data(t))[i];
    zf_tensor_unref(&t);
    return v;
}

/* The example spells out every attr of every node, defaults included. */
static void test_the_example_spells_every_attr(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_example();
    for (size_t i = 0; i < gd->n_node; i++) {
        const Tensorflow__NodeDef *node = gd->node[i];
        const zf_op_def_t *def = zf_op_lookup(node->op);
        if (!def) fail_msg("%s: unknown op %s", node->name, node->op);
        int added = -1;
        ASSERT_OK(zf_op_add_default_attrs(def, gd->node[i], &added));
        if (added != 0)
            fail_msg("%s (%s) leaves out %d attrs with defaults", node->name, node->op, added);
    }
    zf_graphdef_free(&gd);
}

/* ---- the reference forward pass ------------------------------------------------------ */

/* The example's loss at its initial weights, in double: conv 3x3 SAME,
 * batch normalisation with the batch's biased variance, Relu, 2x2 max
 * pooling, the dense layer and the mean softmax cross-entropy. */
static double s_reference_loss(const Tensorflow__GraphDef *gd)
{
    zf_shape_t xs, fs, ss, os, ws, bs, ls;
    double *x = s_const(gd, "data/images", &xs);
    double *f = s_const(gd, "conv/filter/initial_value", &fs);
    double *scale = s_const(gd, "bn/scale/initial_value", &ss);
    double *offset = s_const(gd, "bn/offset/initial_value", &os);
    double *w = s_const(gd, "dense/weights/initial_value", &ws);
    double *b = s_const(gd, "dense/bias/initial_value", &bs);
    double *labels = s_const(gd, "data/labels", &ls);
    float eps = 0;
    ASSERT_OK(zf_node_attr_float(s_node(gd, "bn/FusedBatchNormV3"), "epsilon", &eps));
    int64_t n = xs.dims[0], h = xs.dims[1], wd = xs.dims[2], ci = xs.dims[3];
    int64_t kh = fs.dims[0], kw = fs.dims[1], co = fs.dims[3], classes = ws.dims[1];
    assert_int_equal(fs.dims[2], ci);
    assert_int_equal(ws.dims[0], (h / 2) * (wd / 2) * co);

    /* conv, SAME: the output pixel (i, j) centred on the input's (i, j) */
    int64_t m = n * h * wd;
    double *y = calloc((size_t)(m * co), sizeof *y);
    assert_non_null(y);
    for (int64_t p = 0; p < m; p++) {
        int64_t in = p / (h * wd), i = p / wd % h, j = p % wd;
        for (int64_t di = 0; di < kh; di++)
            for (int64_t dj = 0; dj < kw; dj++) {
                int64_t r = i + di - (kh - 1) / 2, c = j + dj - (kw - 1) / 2;
                if (r < 0 || r >= h || c < 0 || c >= wd) continue;
                for (int64_t k = 0; k < ci; k++)
                    for (int64_t o = 0; o < co; o++)
                        y[p * co + o] += x[((in * h + r) * wd + c) * ci + k] *
                                         f[((di * kw + dj) * ci + k) * co + o];
            }
    }
    /* batch normalisation over n, h, w, then Relu */
    for (int64_t o = 0; o < co; o++) {
        double mean = 0, var = 0;
        for (int64_t p = 0; p < m; p++) mean += y[p * co + o];
        mean /= (double)m;
        for (int64_t p = 0; p < m; p++) var += (y[p * co + o] - mean) * (y[p * co + o] - mean);
        var /= (double)m;
        for (int64_t p = 0; p < m; p++) {
            double v = (y[p * co + o] - mean) / sqrt(var + eps) * scale[o] + offset[o];
            y[p * co + o] = v > 0 ? v : 0;
        }
    }
    /* 2x2 max pooling, flattened as Reshape [-1, 64] flattens NHWC, then
     * the logits and the loss */
    int64_t ph = h / 2, pw = wd / 2, feat = ph * pw * co;
    double loss = 0;
    for (int64_t in = 0; in < n; in++) {
        double logits[16] = {0};
        assert_true(classes <= 16);
        for (int64_t q = 0; q < feat; q++) {
            int64_t i = q / (pw * co), j = q / co % pw, o = q % co, best = -1;
            double mx = 0;
            for (int64_t d = 0; d < 4; d++) {
                int64_t p = (in * h + 2 * i + d / 2) * wd + 2 * j + d % 2;
                if (best < 0 || y[p * co + o] > mx) mx = y[p * co + o], best = p;
            }
            for (int64_t k = 0; k < classes; k++) logits[k] += mx * w[q * classes + k];
        }
        double top = -INFINITY, sum = 0;
        for (int64_t k = 0; k < classes; k++) top = fmax(top, logits[k] += b[k]);
        for (int64_t k = 0; k < classes; k++) sum += exp(logits[k] - top);
        loss += top + log(sum) - logits[(int64_t)labels[in]];
    }
    free(y);
    double *all[] = {x, f, scale, offset, w, b, labels};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    return loss / (double)n;
}

/* ---- training ------------------------------------------------------------------------ */

static float s_scalar(zf_tensor_t **t)
{
    assert_non_null(*t);
    assert_int_equal(zf_tensor_dtype(*t), ZF_FLOAT);
    assert_int_equal(zf_tensor_num_elements(*t), 1);
    float v = *(const float *)zf_tensor_data(*t);
    zf_tensor_unref(t);
    return v;
}

/* The losses of one training run; the first against the reference. */
static void s_check_curve(const char *where, const float *loss, double reference)
{
    print_message("%s: loss %.6f at step 1, %.6f at 50, %.6f at 100, %.6f at %d (reference %.6f)\n",
                  where, (double)loss[0], (double)loss[49], (double)loss[99],
                  (double)loss[STEPS - 1], STEPS, reference);
    if (!(fabs(loss[0] - reference) <= 1e-4))
        fail_msg("%s: first loss %.7f, the reference forward pass gives %.7f", where,
                 (double)loss[0], reference);
    if (!(loss[STEPS - 1] <= loss[0] / 10))
        fail_msg("%s: loss %.6f after %d steps, not a tenth of the first %.6f", where,
                 (double)loss[STEPS - 1], STEPS, (double)loss[0]);
    for (int k = 0; k < STEPS; k++)
        if (!isfinite(loss[k])) fail_msg("%s: loss %g at step %d", where, (double)loss[k], k + 1);
}

/* After STEPS steps Adam's beta1_power and beta2_power have been
 * multiplied by beta1 and beta2 once a step, from beta1 and beta2. */
static void s_check_powers(zf_tensor_t **powers)
{
    double want[2] = {pow(0.9, STEPS + 1), pow(0.999, STEPS + 1)};
    for (int i = 0; i < 2; i++) {
        double got = s_scalar(&powers[i]);
        if (!(fabs(got - want[i]) <= 1e-4 * want[i]))
            fail_msg("beta%d_power %.9g after %d steps, want %.9g", i + 1, got, STEPS, want[i]);
    }
}

static const char *const s_powers[2] = {"adam/beta1_power/read", "adam/beta2_power/read"};

/* The in-process run's losses, for the cluster run to compare with. */
static float s_inprocess_loss[STEPS];
static bool s_have_inprocess;

static void test_the_example_trains_in_process_on_two_devices(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_example();
    double reference = s_reference_loss(gd);
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:2");
    /* each layer and its variables on its device */
    static const char *const on_cpu0[] = {"conv/filter", "bn/scale", "conv/Conv2D",
                                          "bn/FusedBatchNormV3",
                                          "gradients/conv/Conv2D_grad/Conv2DBackpropFilter"};
    static const char *const on_cpu1[] = {"dense/weights", "dense/bias", "dense/MatMul", "loss",
                                          "adam/update_dense_weights"};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(zf_local_session_node_device(s, on_cpu0[i]), CPU0);
        assert_string_equal(zf_local_session_node_device(s, on_cpu1[i]), CPU1);
    }
    const char *init = "init", *train = "train", *loss = "loss";
    ASSERT_OK(zf_local_session_run(s, NULL, NULL, 0, NULL, 0, &init, 1, NULL));
    for (int k = 0; k < STEPS; k++) {
        zf_tensor_t *out = NULL;
        ASSERT_OK(zf_local_session_run(s, NULL, NULL, 0, &loss, 1, &train, 1, &out));
        s_inprocess_loss[k] = s_scalar(&out);
    }
    s_check_curve("in process", s_inprocess_loss, reference);
    zf_tensor_t *powers[2] = {NULL, NULL};
    ASSERT_OK(zf_local_session_run(s, NULL, NULL, 0, s_powers, 2, NULL, 0, powers));
    s_check_powers(powers);
    s_have_inprocess = true;
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

/* The cluster of the test below; its teardown stops it if the test failed
 * before it could. */
static zf_cluster_t *s_cluster;

static int s_stop_cluster(void **state)
{
    (void)state;
    zf_cluster_destroy(&s_cluster);
    return 0;
}

static void test_the_example_trains_split_over_two_executors(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_example();
    double reference = s_reference_loss(gd);
    zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
    o.bin_dir = ZF_BIN_DIR;
    o.devices = "cpu:2";
    o.quiet = true;
    ASSERT_OK(zf_cluster_start(&o, &s_cluster));
    zf_client_t *c = NULL;
    ASSERT_OK(zf_client_connect(zf_cluster_endpoint(s_cluster), &c));
    zf_client_session_options_t opts = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(c, gd, &opts, &session));

    const char *init = "init", *train = "train", *loss = "loss";
    zf_client_step_t step = {.targets = &init, .n_targets = 1};
    ASSERT_OK(zf_client_session_run(c, session, &step, 0, NULL));
    step = (zf_client_step_t){.fetches = &loss, .n_fetches = 1, .targets = &train, .n_targets = 1};
    float losses[STEPS];
    for (int k = 0; k < STEPS; k++) {
        zf_tensor_t *out = NULL;
        ASSERT_OK(zf_client_session_run(c, session, &step, 0, &out));
        losses[k] = s_scalar(&out);
    }
    s_check_curve("two executors", losses, reference);
    zf_tensor_t *powers[2] = {NULL, NULL};
    step = (zf_client_step_t){.fetches = s_powers, .n_fetches = 2};
    ASSERT_OK(zf_client_session_run(c, session, &step, 0, powers));
    s_check_powers(powers);
    /* the same computation as in process, up to the order of float sums */
    if (s_have_inprocess)
        for (int k = 0; k < STEPS; k += STEPS / 4)
            if (!(fabs(losses[k] - s_inprocess_loss[k]) <= 1e-3 + 0.05 * s_inprocess_loss[k]))
                fail_msg("step %d: loss %.6f on two executors, %.6f in process", k + 1,
                         (double)losses[k], (double)s_inprocess_loss[k]);
    ASSERT_OK(zf_client_session_close(c, session));
    free(session);
    zf_client_destroy(&c);
    ASSERT_OK(zf_cluster_stop(&s_cluster, 5000));
    zf_graphdef_free(&gd);
}

/* ---- gradients against finite differences -------------------------------------------- */

/* The loss with the variable read through read holding value, but for
 * element i, which holds value[i] + delta (fed to the read, as a copy). */
static double s_loss_with(zf_local_session_t *s, const char *read, const zf_tensor_t *value,
                          int64_t i, float delta)
{
    zf_tensor_t *probe = NULL;
    int64_t n = zf_tensor_num_elements(value);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, zf_tensor_shape(value), zf_tensor_data(value),
                                       (size_t)n * sizeof(float), &probe));
    ((float *)zf_tensor_data(probe))[i] += delta;
    const char *loss = "loss";
    zf_tensor_t *out = NULL;
    ASSERT_OK(zf_local_session_run(s, &read, &probe, 1, &loss, 1, NULL, 0, &out));
    zf_tensor_unref(&probe);
    return s_scalar(&out);
}

/* Checks the graph's gradient grad of the variable read through read
 * against central differences of the loss (step h) at every stride-th
 * element. Where the loss is smooth in the variable (the dense layer's),
 * each element must match; behind Relu and MaxPool a step crosses kinks
 * of the loss now and then, so there the whole gradient must match, in
 * norm, within 10%. */
static void s_check_gradient(zf_local_session_t *s, const char *read, const char *grad, int stride,
                             float h, bool smooth)
{
    const char *fetches[2] = {read, grad};
    zf_tensor_t *got[2] = {NULL, NULL};
    ASSERT_OK(zf_local_session_run(s, NULL, NULL, 0, fetches, 2, NULL, 0, got));
    int64_t n = zf_tensor_num_elements(got[0]);
    assert_int_equal(zf_tensor_num_elements(got[1]), n);
    const float *g = zf_tensor_data(got[1]);
    double err2 = 0, norm2 = 0;
    for (int64_t i = 0; i < n; i += stride) {
        double up = s_loss_with(s, read, got[0], i, h);
        double down = s_loss_with(s, read, got[0], i, -h);
        double fd = (up - down) / (double)(2 * h);
        if (smooth && !(fabs(fd - g[i]) <= 1e-3 + 0.01 * fabs(fd)))
            fail_msg("%s[%lld]: the graph's gradient %.6f, finite differences %.6f", grad,
                     (long long)i, (double)g[i], fd);
        err2 += (fd - g[i]) * (fd - g[i]);
        norm2 += fd * fd;
    }
    print_message("%s: |graph - finite differences| / |finite differences| = %.4f\n", grad,
                  sqrt(err2 / norm2));
    assert_true(norm2 > 0);
    if (!(sqrt(err2 / norm2) <= 0.1))
        fail_msg("%s: the graph's gradient is %.1f%% off finite differences", grad,
                 100 * sqrt(err2 / norm2));
    zf_tensor_unref(&got[0]);
    zf_tensor_unref(&got[1]);
}

static void test_the_example_gradients_match_finite_differences(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_example();
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:2");
    const char *init = "init";
    ASSERT_OK(zf_local_session_run(s, NULL, NULL, 0, NULL, 0, &init, 1, NULL));
    s_check_gradient(s, "conv/filter/read", "gradients/conv/Conv2D_grad/Conv2DBackpropFilter", 1,
                     5e-4f, false);
    s_check_gradient(s, "bn/scale/read", "gradients/bn/FusedBatchNormV3_grad:1", 1, 5e-4f, false);
    s_check_gradient(s, "bn/offset/read", "gradients/bn/FusedBatchNormV3_grad:2", 1, 5e-4f, false);
    s_check_gradient(s, "dense/weights/read", "gradients/dense/MatMul_grad/MatMul_1", 7, 1e-3f,
                     true);
    s_check_gradient(s, "dense/bias/read", "gradients/dense/BiasAdd_grad", 1, 1e-3f, true);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

/* ---- the command line ---------------------------------------------------------------- */

/* `zflow run` with the README's command line prints the last step's loss,
 * the in-process run's. */
static void test_zflow_run_trains_the_example(void **state)
{
    (void)state;
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd,
             "%s/zflow run %s --inprocess --devices cpu:2 --init init --target train "
             "--fetch loss --steps %d 2>&1",
             ZF_BIN_DIR, EXAMPLE, STEPS);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("%s failed:\n%s", cmd, out);
    float last = 0;
    if (sscanf(out, "loss =\n%f", &last) != 1) fail_msg("no loss in the output:\n%s", out);
    Tensorflow__GraphDef *gd = s_example();
    double first = s_reference_loss(gd);
    zf_graphdef_free(&gd);
    if (!(last <= first / 10))
        fail_msg("loss %g after %d steps, first %g", (double)last, STEPS, first);
    if (s_have_inprocess && !(fabs(last - s_inprocess_loss[STEPS - 1]) <= 1e-5))
        fail_msg("zflow run printed loss %g, the in-process session gave %g", (double)last,
                 (double)s_inprocess_loss[STEPS - 1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_example_spells_every_attr),
        cmocka_unit_test(test_the_example_trains_in_process_on_two_devices),
        cmocka_unit_test_teardown(test_the_example_trains_split_over_two_executors, s_stop_cluster),
        cmocka_unit_test(test_the_example_gradients_match_finite_differences),
        cmocka_unit_test(test_zflow_run_trains_the_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
