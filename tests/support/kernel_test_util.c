/* Definitions of kernel_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static char *kt_strdup(const char *s)
{
    char *d = strdup(s);
    assert_non_null(d);
    return d;
}

Tensorflow__NodeDef *kt_node_new(const char *name, const char *op, int num_inputs)
{
    Tensorflow__NodeDef *n = malloc(sizeof *n);
    assert_non_null(n);
    tensorflow__node_def__init(n);
    n->name = kt_strdup(name);
    n->op = kt_strdup(op);
    if (num_inputs > 0) {
        n->input = calloc((size_t)num_inputs, sizeof *n->input);
        assert_non_null(n->input);
        for (int i = 0; i < num_inputs; i++) {
            char buf[32];
            snprintf(buf, sizeof buf, "in%d", i);
            n->input[i] = kt_strdup(buf);
        }
        n->n_input = (size_t)num_inputs;
    }
    return n;
}

void kt_node_free(Tensorflow__NodeDef **node_p)
{
    if (*node_p) protobuf_c_message_free_unpacked(&(*node_p)->base, NULL);
    *node_p = NULL;
}

Tensorflow__AttrValue *kt_attr_add(Tensorflow__NodeDef *n, const char *key)
{
    Tensorflow__NodeDef__AttrEntry **attrs = realloc(n->attr, (n->n_attr + 1) * sizeof *attrs);
    assert_non_null(attrs);
    n->attr = attrs;
    Tensorflow__NodeDef__AttrEntry *e = malloc(sizeof *e);
    Tensorflow__AttrValue *v = malloc(sizeof *v);
    assert_non_null(e);
    assert_non_null(v);
    tensorflow__node_def__attr_entry__init(e);
    tensorflow__attr_value__init(v);
    e->key = kt_strdup(key);
    e->value = v;
    n->attr[n->n_attr++] = e;
    return v;
}

void kt_attr_type(Tensorflow__NodeDef *n, const char *key, zf_dtype_t t)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = (Tensorflow__DataType)t;
}

void kt_attr_int(Tensorflow__NodeDef *n, const char *key, int64_t i)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = i;
}

void kt_attr_bool(Tensorflow__NodeDef *n, const char *key, bool b)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    v->b = b;
}

void kt_attr_string(Tensorflow__NodeDef *n, const char *key, const char *s)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.len = strlen(s);
    v->s.data = (uint8_t *)kt_strdup(s);
}

void kt_attr_list_int(Tensorflow__NodeDef *n, const char *key, const int64_t *vals, size_t count)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, key);
    Tensorflow__AttrValue__ListValue *l = malloc(sizeof *l);
    assert_non_null(l);
    tensorflow__attr_value__list_value__init(l);
    if (count) {
        l->i = malloc(count * sizeof *l->i);
        assert_non_null(l->i);
        memcpy(l->i, vals, count * sizeof *l->i);
        l->n_i = count;
    }
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = l;
}

void kt_attr_shape(Tensorflow__NodeDef *n, const char *key, const zf_shape_t *s)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    ASSERT_OK(zf_shape_to_proto(s, &v->shape));
}

void kt_attr_tensor(Tensorflow__NodeDef *n, const char *key, const zf_tensor_t *t)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    ASSERT_OK(zf_tensor_to_proto(t, &v->tensor, true));
}

zf_tensor_t *kt_tensor(zf_dtype_t dtype, zf_shape_t shape, const void *vals, size_t count)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(dtype, &shape, &t));
    assert_int_equal((int64_t)count, zf_tensor_num_elements(t));
    if (count) memcpy(zf_tensor_data(t), vals, count * zf_dtype_size(dtype));
    return t;
}

zf_tensor_t *kt_strings(zf_shape_t shape, const char *const *vals)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(ZF_STRING, &shape, &t));
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++)
        ASSERT_OK(zf_tensor_set_string(t, i, vals[i], strlen(vals[i])));
    return t;
}

zf_tensor_t *kt_zeros(zf_dtype_t dtype, zf_shape_t shape)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(dtype, &shape, &t));
    return t;
}

zf_tensor_t *kt_random_f32(zf_shape_t shape, uint32_t seed)
{
    zf_tensor_t *t = kt_zeros(ZF_FLOAT, shape);
    float *p = zf_tensor_data(t);
    uint32_t x = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (float)((double)(x >> 8) / (double)(1u << 23) - 1.0);
    }
    return t;
}

zf_tensor_t *kt_random_float(zf_dtype_t dtype, zf_shape_t shape, uint32_t seed)
{
    zf_tensor_t *f = kt_random_f32(shape, seed);
    if (dtype == ZF_FLOAT) return f;
    assert_int_equal(dtype, ZF_DOUBLE);
    zf_tensor_t *d = kt_zeros(ZF_DOUBLE, shape);
    const float *src = zf_tensor_data(f);
    double *dst = zf_tensor_data(d);
    for (int64_t i = 0; i < zf_tensor_num_elements(f); i++) dst[i] = src[i];
    zf_tensor_unref(&f);
    return d;
}

void kt_unref_all(zf_tensor_t **ts, int n)
{
    for (int i = 0; i < n; i++) zf_tensor_unref(&ts[i]);
}

zf_status_t kt_run_on(const Tensorflow__NodeDef *node, zf_tensor_t *const *inputs, int num_inputs,
                      zf_tensor_t **outputs, int num_outputs, zf_resource_mgr_t *resources,
                      zf_device_t *device)
{
    zf_kernels_register_builtin(false);
    for (int i = 0; i < num_outputs; i++) outputs[i] = NULL;
    const zf_kernel_t *def = NULL;
    ZF_TRY(zf_kernel_find("CPU", node, &def));
    void *state = NULL;
    if (def->create) ZF_TRY(def->create(node, &state));
    zf_kernel_ctx_t ctx = {.node = node,
                           .state = state,
                           .device = device,
                           .inputs = inputs,
                           .num_inputs = num_inputs,
                           .outputs = outputs,
                           .num_outputs = num_outputs,
                           .resources = resources};
    zf_status_t s = def->compute(&ctx);
    if (def->destroy) def->destroy(state);
    if (!zf_ok(s)) kt_unref_all(outputs, num_outputs);
    return s;
}

zf_status_t kt_run(const Tensorflow__NodeDef *node, zf_tensor_t *const *inputs, int num_inputs,
                   zf_tensor_t **outputs, int num_outputs)
{
    return kt_run_on(node, inputs, num_inputs, outputs, num_outputs, NULL, NULL);
}

void kt_expect_shape(const zf_tensor_t *t, zf_shape_t want)
{
    assert_non_null(t);
    if (!zf_shape_equal(zf_tensor_shape(t), &want)) {
        char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
        fail_msg("shape %s, expected %s", zf_shape_to_string(zf_tensor_shape(t), a, sizeof a),
                 zf_shape_to_string(&want, b, sizeof b));
    }
}

void kt_expect_near(const zf_tensor_t *t, zf_shape_t shape, const double *want, double tol)
{
    kt_expect_shape(t, shape);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) {
        double got = zf_tensor_dtype(t) == ZF_FLOAT ? ((const float *)zf_tensor_data(t))[i]
                                                    : ((const double *)zf_tensor_data(t))[i];
        double lim = tol * (fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0);
        bool same_nan = isnan(got) && isnan(want[i]);
        bool same_inf = isinf(got) && isinf(want[i]) && (got > 0) == (want[i] > 0);
        if (!same_nan && !same_inf && !(fabs(got - want[i]) <= lim))
            fail_msg("element %lld: got %.9g, expected %.9g", (long long)i, got, want[i]);
    }
}

void kt_expect_ints(const zf_tensor_t *t, zf_shape_t shape, const int64_t *want)
{
    kt_expect_shape(t, shape);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) {
        int64_t got = 0;
        switch (zf_tensor_dtype(t)) {
        case ZF_INT32: got = ((const int32_t *)zf_tensor_data(t))[i]; break;
        case ZF_INT64: got = ((const int64_t *)zf_tensor_data(t))[i]; break;
        case ZF_BOOL: got = ((const bool *)zf_tensor_data(t))[i]; break;
        default: fail_msg("kt_expect_ints on a %s tensor", zf_dtype_name(zf_tensor_dtype(t)));
        }
        if (got != want[i])
            fail_msg("element %lld: got %lld, expected %lld", (long long)i, (long long)got,
                     (long long)want[i]);
    }
}

void kt_on_done(zf_kernel_ctx_t *ctx, zf_status_t status, void *arg)
{
    (void)ctx;
    kt_done_t *d = arg;
    d->fired = true;
    d->status = status;
}
