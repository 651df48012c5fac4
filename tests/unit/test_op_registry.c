/* Tests for common/op_registry: signatures resolved from real NodeDefs,
 * attr defaults and errors, flags, kernels, and coverage of the ops in
 * TensorFlow's test graphs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>

#include "common/op_registry.h"
#include "common/pbtxt.h"

/* ---- building NodeDefs in place ------------------------------------------ */

#define T_ATTRS_MAX 8

typedef struct {
    Tensorflow__NodeDef node;
    Tensorflow__NodeDef__AttrEntry entries[T_ATTRS_MAX];
    Tensorflow__NodeDef__AttrEntry *entry_ptrs[T_ATTRS_MAX];
    Tensorflow__AttrValue values[T_ATTRS_MAX];
    Tensorflow__AttrValue__ListValue lists[T_ATTRS_MAX];
    Tensorflow__DataType list_types[T_ATTRS_MAX][8];
} t_node_t;

static void t_node_init(t_node_t *t, const char *name, const char *op)
{
    memset(t, 0, sizeof *t);
    tensorflow__node_def__init(&t->node);
    t->node.name = (char *)name;
    t->node.op = (char *)op;
    t->node.attr = t->entry_ptrs;
}

static Tensorflow__AttrValue *t_attr(t_node_t *t, const char *key)
{
    size_t i = t->node.n_attr++;
    assert_true(i < T_ATTRS_MAX);
    tensorflow__node_def__attr_entry__init(&t->entries[i]);
    tensorflow__attr_value__init(&t->values[i]);
    t->entries[i].key = (char *)key;
    t->entries[i].value = &t->values[i];
    t->entry_ptrs[i] = &t->entries[i];
    return &t->values[i];
}

static void t_attr_type(t_node_t *t, const char *key, int dtype)
{
    Tensorflow__AttrValue *v = t_attr(t, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = (Tensorflow__DataType)dtype;
}

static void t_attr_int(t_node_t *t, const char *key, int64_t i)
{
    Tensorflow__AttrValue *v = t_attr(t, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = i;
}

static void t_attr_types(t_node_t *t, const char *key, int n, const int *types)
{
    Tensorflow__AttrValue *v = t_attr(t, key);
    size_t i = t->node.n_attr - 1;
    assert_true(n <= 8);
    tensorflow__attr_value__list_value__init(&t->lists[i]);
    for (int k = 0; k < n; k++) t->list_types[i][k] = (Tensorflow__DataType)types[k];
    t->lists[i].n_type = (size_t)n;
    t->lists[i].type = t->list_types[i];
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = &t->lists[i];
}

static void t_attr_string(t_node_t *t, const char *key, const char *s)
{
    Tensorflow__AttrValue *v = t_attr(t, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)s;
    v->s.len = strlen(s);
}

static const zf_op_def_t *t_def(const char *op)
{
    const zf_op_def_t *def = zf_op_lookup(op);
    if (!def) fail_msg("op %s is not registered", op);
    return def;
}

/* Resolves inputs or outputs and checks them against want[0..n_want). */
static void t_assert_types(bool outputs, const t_node_t *t, const int *want, int n_want)
{
    const zf_op_def_t *def = t_def(t->node.op);
    zf_dtype_t got[16];
    int n = -1;
    zf_status_t s = outputs ? zf_op_output_types(def, &t->node, got, 16, &n)
                            : zf_op_input_types(def, &t->node, got, 16, &n);
    if (!zf_ok(s)) fail_msg("%s: %s", t->node.op, zf_status_msg(&s));
    assert_int_equal(n, n_want);
    for (int i = 0; i < n_want; i++) assert_int_equal(got[i], want[i]);
}

#define T_INPUTS(t, ...)                                                                           \
    t_assert_types(false, (t), (const int[]){__VA_ARGS__},                                         \
                   (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))
#define T_OUTPUTS(t, ...)                                                                          \
    t_assert_types(true, (t), (const int[]){__VA_ARGS__},                                          \
                   (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))

static int t_count(bool outputs, const t_node_t *t)
{
    int n = -1;
    const zf_op_def_t *def = t_def(t->node.op);
    zf_status_t s = outputs ? zf_op_output_types(def, &t->node, NULL, 0, &n)
                            : zf_op_input_types(def, &t->node, NULL, 0, &n);
    if (!zf_ok(s)) fail_msg("%s: %s", t->node.op, zf_status_msg(&s));
    return n;
}

/* Asserts that resolving fails with exactly msg. */
static void t_assert_error(bool outputs, const t_node_t *t, const char *msg)
{
    const zf_op_def_t *def = t_def(t->node.op);
    zf_dtype_t got[4];
    int n = 7;
    zf_status_t s = outputs ? zf_op_output_types(def, &t->node, got, 4, &n)
                            : zf_op_input_types(def, &t->node, got, 4, &n);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), msg);
    zf_status_clear(&s);
}

/* ---- tests ----------------------------------------------------------------- */

static void *t_lookup_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        if (!zf_op_lookup("MatMul") || zf_op_lookup("NoSuchOp")) return (void *)1;
    return NULL;
}

/* Runs first, so the table is parsed under contention. */
static void test_op_registry_initializes_once_across_threads(void **state)
{
    (void)state;
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&th[i], NULL, t_lookup_many, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *ret = (void *)1;
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
}

static void test_op_registry_looks_up_known_ops_and_not_unknown_ones(void **state)
{
    (void)state;
    const zf_op_def_t *def = zf_op_lookup("MatMul");
    assert_non_null(def);
    assert_string_equal(zf_op_name(def), "MatMul");
    assert_int_equal(zf_op_num_input_args(def), 2);
    assert_int_equal(zf_op_num_output_args(def), 1);
    assert_null(zf_op_lookup("NoSuchOp"));
    assert_null(zf_op_lookup("matmul"));
    assert_null(zf_op_lookup(""));
    assert_null(zf_op_lookup(NULL));
    assert_false(zf_op_has_flag(NULL, ZF_OP_STATEFUL));
}

static void test_op_registry_resolves_a_type_attr(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "mm", "MatMul");
    t_attr_type(&t, "T", ZF_DOUBLE);
    t_attr_string(&t, "_class", "loc:@x"); /* unrelated attrs are ignored */
    T_INPUTS(&t, ZF_DOUBLE, ZF_DOUBLE);
    T_OUTPUTS(&t, ZF_DOUBLE);

    t_node_init(&t, "c", "Cast");
    t_attr_type(&t, "SrcT", ZF_INT32);
    t_attr_type(&t, "DstT", ZF_HALF);
    T_INPUTS(&t, ZF_INT32);
    T_OUTPUTS(&t, ZF_HALF);

    t_node_init(&t, "k", "Const");
    t_attr_type(&t, "dtype", ZF_STRING);
    assert_int_equal(t_count(false, &t), 0);
    T_OUTPUTS(&t, ZF_STRING);
}

static void test_op_registry_takes_the_last_of_repeated_attr_keys(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "id", "Identity");
    t_attr_type(&t, "T", ZF_FLOAT);
    t_attr_type(&t, "T", ZF_INT64);
    T_OUTPUTS(&t, ZF_INT64);
}

static void test_op_registry_uses_fixed_types(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "r", "Rank");
    t_attr_type(&t, "T", ZF_FLOAT);
    T_OUTPUTS(&t, ZF_INT32);

    t_node_init(&t, "and", "LogicalAnd");
    T_INPUTS(&t, ZF_BOOL, ZF_BOOL);
    T_OUTPUTS(&t, ZF_BOOL);

    t_node_init(&t, "sw", "Switch");
    t_attr_type(&t, "T", ZF_INT64);
    T_INPUTS(&t, ZF_INT64, ZF_BOOL);
    T_OUTPUTS(&t, ZF_INT64, ZF_INT64);

    t_node_init(&t, "v", "VarHandleOp");
    t_attr_type(&t, "dtype", ZF_FLOAT);
    T_OUTPUTS(&t, ZF_RESOURCE);
}

static void test_op_registry_expands_n_times_t(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "sum", "AddN");
    t_attr_int(&t, "N", 3);
    t_attr_type(&t, "T", ZF_INT32);
    T_INPUTS(&t, ZF_INT32, ZF_INT32, ZF_INT32);
    T_OUTPUTS(&t, ZF_INT32);

    t_node_init(&t, "cat", "ConcatV2");
    t_attr_int(&t, "N", 2);
    t_attr_type(&t, "T", ZF_FLOAT);
    t_attr_type(&t, "Tidx", ZF_INT64);
    T_INPUTS(&t, ZF_FLOAT, ZF_FLOAT, ZF_INT64);

    t_node_init(&t, "m", "Merge");
    t_attr_int(&t, "N", 2);
    t_attr_type(&t, "T", ZF_FLOAT);
    T_INPUTS(&t, ZF_FLOAT, ZF_FLOAT);
    T_OUTPUTS(&t, ZF_FLOAT, ZF_INT32);

    t_node_init(&t, "u", "Unpack");
    t_attr_int(&t, "num", 4);
    t_attr_type(&t, "T", ZF_BOOL);
    T_OUTPUTS(&t, ZF_BOOL, ZF_BOOL, ZF_BOOL, ZF_BOOL);

    t_node_init(&t, "s", "Split");
    t_attr_int(&t, "num_split", 0);
    t_attr_type(&t, "T", ZF_FLOAT);
    T_INPUTS(&t, ZF_INT32, ZF_FLOAT);
    assert_int_equal(t_count(true, &t), 0);

    /* N times a fixed type */
    t_node_init(&t, "p", "ParseExample");
    t_attr_int(&t, "Nsparse", 2);
    t_attr_int(&t, "Ndense", 1);
    t_attr_types(&t, "sparse_types", 2, (const int[]){ZF_INT64, ZF_STRING});
    t_attr_types(&t, "Tdense", 1, (const int[]){ZF_FLOAT});
    T_INPUTS(&t, ZF_STRING, ZF_STRING, ZF_STRING, ZF_STRING, ZF_STRING, ZF_FLOAT);
    T_OUTPUTS(&t, ZF_INT64, ZF_INT64, ZF_INT64, ZF_STRING, ZF_INT64, ZF_INT64, ZF_FLOAT);
}

static void test_op_registry_expands_list_type_attrs(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "idn", "IdentityN");
    t_attr_types(&t, "T", 3, (const int[]){ZF_FLOAT, ZF_INT64, ZF_BOOL});
    T_INPUTS(&t, ZF_FLOAT, ZF_INT64, ZF_BOOL);
    T_OUTPUTS(&t, ZF_FLOAT, ZF_INT64, ZF_BOOL);

    t_node_init(&t, "if", "If");
    t_attr_type(&t, "Tcond", ZF_BOOL);
    t_attr_types(&t, "Tin", 2, (const int[]){ZF_INT32, ZF_RESOURCE});
    t_attr_types(&t, "Tout", 0, NULL);
    T_INPUTS(&t, ZF_BOOL, ZF_INT32, ZF_RESOURCE);
    assert_int_equal(t_count(true, &t), 0);

    t_node_init(&t, "pr", "Print");
    t_attr_type(&t, "T", ZF_FLOAT);
    t_attr_types(&t, "U", 2, (const int[]){ZF_STRING, ZF_INT32});
    T_INPUTS(&t, ZF_FLOAT, ZF_STRING, ZF_INT32);
    T_OUTPUTS(&t, ZF_FLOAT);
}

static void test_op_registry_gives_ref_types_for_ref_args(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "v", "VariableV2");
    t_attr_type(&t, "dtype", ZF_FLOAT);
    T_OUTPUTS(&t, ZF_FLOAT + ZF_DTYPE_REF_OFFSET);

    t_node_init(&t, "a", "Assign");
    t_attr_type(&t, "T", ZF_INT64);
    T_INPUTS(&t, ZF_INT64 + ZF_DTYPE_REF_OFFSET, ZF_INT64);
    T_OUTPUTS(&t, ZF_INT64 + ZF_DTYPE_REF_OFFSET);

    t_node_init(&t, "rm", "RefMerge");
    t_attr_int(&t, "N", 2);
    t_attr_type(&t, "T", ZF_FLOAT);
    T_INPUTS(&t, ZF_FLOAT + ZF_DTYPE_REF_OFFSET, ZF_FLOAT + ZF_DTYPE_REF_OFFSET);
    T_OUTPUTS(&t, ZF_FLOAT + ZF_DTYPE_REF_OFFSET, ZF_INT32);

    t_node_init(&t, "sgd", "ApplyGradientDescent");
    t_attr_type(&t, "T", ZF_FLOAT);
    T_INPUTS(&t, ZF_FLOAT + ZF_DTYPE_REF_OFFSET, ZF_FLOAT, ZF_FLOAT);
}

static void test_op_registry_applies_attr_defaults(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "sh", "Shape");
    t_attr_type(&t, "T", ZF_FLOAT);
    T_OUTPUTS(&t, ZF_INT32);
    t_attr_type(&t, "out_type", ZF_INT64);
    T_OUTPUTS(&t, ZF_INT64);

    t_node_init(&t, "am", "ArgMax");
    t_attr_type(&t, "T", ZF_FLOAT);
    T_INPUTS(&t, ZF_FLOAT, ZF_INT32);
    T_OUTPUTS(&t, ZF_INT64);

    /* MaxPool's T defaults to float (graph-default-attr.pbtxt leaves it out). */
    t_node_init(&t, "mp", "MaxPool");
    T_INPUTS(&t, ZF_FLOAT);
    T_OUTPUTS(&t, ZF_FLOAT);

    t_node_init(&t, "rs", "Reshape");
    t_attr_type(&t, "T", ZF_UINT8);
    T_INPUTS(&t, ZF_UINT8, ZF_INT32);

    t_node_init(&t, "f", "Fill");
    t_attr_type(&t, "T", ZF_HALF);
    T_INPUTS(&t, ZF_INT32, ZF_HALF);

    t_node_init(&t, "sx", "SparseSoftmaxCrossEntropyWithLogits");
    t_attr_type(&t, "T", ZF_FLOAT);
    T_INPUTS(&t, ZF_FLOAT, ZF_INT64);
    T_OUTPUTS(&t, ZF_FLOAT, ZF_FLOAT);
}

/* ---- default attrs ------------------------------------------------------- */

/* A NodeDef parsed from text, allocated as protobuf-c's unpack allocates. */
static Tensorflow__NodeDef *t_parse_node(const char *text)
{
    ProtobufCMessage *m = NULL;
    zf_status_t s = zf_pbtxt_parse(&tensorflow__node_def__descriptor, text, strlen(text), &m);
    if (!zf_ok(s)) fail_msg("%s\n%s", zf_status_msg(&s), text);
    return (Tensorflow__NodeDef *)m;
}

static void t_free_node(Tensorflow__NodeDef *node)
{
    protobuf_c_message_free_unpacked(&node->base, NULL);
}

/* Adds node's defaults, expecting `want` new entries. */
static void t_add_defaults(Tensorflow__NodeDef *node, int want)
{
    int added = -1;
    zf_status_t s = zf_op_add_default_attrs(zf_op_lookup(node->op), node, &added);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    assert_int_equal(added, want);
}

static void t_assert_text(const Tensorflow__NodeDef *node, const char *want)
{
    char *text = NULL;
    zf_status_t s = zf_pbtxt_format(&node->base, &text, NULL);
    assert_true(zf_ok(s));
    assert_string_equal(text, want);
    free(text);
}

static const Tensorflow__AttrValue *t_value(const Tensorflow__NodeDef *node, const char *key)
{
    for (size_t i = 0; i < node->n_attr; i++)
        if (strcmp(node->attr[i]->key, key) == 0) return node->attr[i]->value;
    fail_msg("node %s has no attr %s", node->name, key);
    return NULL;
}

/* A node of op with no attrs, given its defaults (want of them). */
static Tensorflow__NodeDef *t_defaults_of(const char *op, int want)
{
    char text[128];
    snprintf(text, sizeof text, "name: 'n' op: '%s'", op);
    Tensorflow__NodeDef *n = t_parse_node(text);
    t_add_defaults(n, want);
    return n;
}

static void t_assert_string(const Tensorflow__AttrValue *v, const char *want)
{
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_S);
    assert_int_equal(v->s.len, strlen(want));
    if (v->s.len) assert_memory_equal(v->s.data, want, v->s.len);
}

/* The attrs a node leaves out are appended with TensorFlow's defaults, in
 * the op's order; the ones it has stay as they are, and adding again adds
 * nothing. */
static void test_op_registry_adds_the_defaults_a_node_leaves_out(void **state)
{
    (void)state;
    Tensorflow__NodeDef *mm = t_parse_node("name: 'mm' op: 'MatMul'"
                                           " attr { key: 'T' value { type: DT_FLOAT } }"
                                           " attr { key: 'transpose_b' value { b: true } }");
    t_add_defaults(mm, 3);
    t_assert_text(mm, "name: \"mm\"\n"
                      "op: \"MatMul\"\n"
                      "attr {\n  key: \"T\"\n  value {\n    type: DT_FLOAT\n  }\n}\n"
                      "attr {\n  key: \"transpose_b\"\n  value {\n    b: true\n  }\n}\n"
                      "attr {\n  key: \"transpose_a\"\n  value {\n    b: false\n  }\n}\n"
                      "attr {\n  key: \"grad_a\"\n  value {\n    b: false\n  }\n}\n"
                      "attr {\n  key: \"grad_b\"\n  value {\n    b: false\n  }\n}\n");
    t_add_defaults(mm, 0);
    assert_int_equal(mm->n_attr, 5);
    t_free_node(mm);

    Tensorflow__NodeDef *conv = t_parse_node("name: 'c' op: 'Conv2D'"
                                             " attr { key: 'data_format' value { s: 'NCHW' } }");
    t_add_defaults(conv, 3);
    t_assert_text(conv, "name: \"c\"\n"
                        "op: \"Conv2D\"\n"
                        "attr {\n  key: \"data_format\"\n  value {\n    s: \"NCHW\"\n  }\n}\n"
                        "attr {\n  key: \"use_cudnn_on_gpu\"\n  value {\n    b: true\n  }\n}\n"
                        "attr {\n  key: \"explicit_paddings\"\n  value {\n    list {\n    }\n"
                        "  }\n}\n"
                        "attr {\n  key: \"dilations\"\n  value {\n    list {\n"
                        "      i: 1\n      i: 1\n      i: 1\n      i: 1\n    }\n  }\n}\n");
    t_free_node(conv);
}

/* Defaults of every kind the table uses, checked field by field. */
static void test_op_registry_gives_defaults_of_every_kind(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = t_defaults_of("Placeholder", 1);
    const Tensorflow__AttrValue *v = t_value(n, "shape");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_SHAPE);
    assert_true(v->shape->unknown_rank);
    assert_int_equal(v->shape->n_dim, 0);
    t_free_node(n);

    n = t_defaults_of("MaxPool", 3);
    v = t_value(n, "T");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_TYPE);
    assert_int_equal(v->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    t_assert_string(t_value(n, "data_format"), "NHWC");
    t_free_node(n);

    n = t_defaults_of("LeakyRelu", 2);
    v = t_value(n, "alpha");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_F);
    assert_true(v->f == 0.2f);
    t_free_node(n);

    n = t_defaults_of("FusedBatchNormV3", 4);
    assert_true(t_value(n, "epsilon")->f == 0.0001f);
    assert_true(t_value(n, "exponential_avg_factor")->f == 1.0f);
    assert_true(t_value(n, "is_training")->b);
    t_free_node(n);

    n = t_defaults_of("Print", 3);
    t_assert_string(t_value(n, "message"), "");
    v = t_value(n, "first_n");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_I);
    assert_int_equal(v->i, -1);
    assert_int_equal(t_value(n, "summarize")->i, 3);
    t_free_node(n);

    n = t_defaults_of("PrintV2", 2);
    t_assert_string(t_value(n, "output_stream"), "stderr");
    t_assert_string(t_value(n, "end"), "\n");
    t_free_node(n);

    n = t_defaults_of("VarHandleOp", 4);
    v = t_value(n, "allowed_devices");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_LIST);
    assert_int_equal(v->list->n_s, 0);
    t_assert_string(t_value(n, "debug_name"), "");
    t_free_node(n);

    n = t_defaults_of("While", 2);
    v = t_value(n, "output_shapes");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_LIST);
    assert_int_equal(v->list->n_shape, 0);
    assert_int_equal(t_value(n, "parallel_iterations")->i, 10);
    t_free_node(n);

    n = t_defaults_of("StridedSlice", 5);
    for (size_t i = 0; i < n->n_attr; i++) {
        assert_int_equal(n->attr[i]->value->value_case, TENSORFLOW__ATTR_VALUE__VALUE_I);
        assert_int_equal(n->attr[i]->value->i, 0);
    }
    t_free_node(n);
}

/* A key given without a value counts as given; ops without defaults and
 * unknown ops get nothing. */
static void test_op_registry_adds_no_defaults_where_none_are_missing(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = t_parse_node("name: 'mp' op: 'MaxPool' attr { key: 'T' value { } }"
                                          " attr { key: 'data_format' }");
    t_add_defaults(n, 1);
    assert_int_equal(n->n_attr, 3);
    assert_string_equal(n->attr[2]->key, "explicit_paddings");
    assert_int_equal(n->attr[0]->value->value_case, TENSORFLOW__ATTR_VALUE__VALUE__NOT_SET);
    t_free_node(n);

    n = t_parse_node("name: 'c' op: 'Const'");
    assert_int_equal(zf_op_num_default_attrs(zf_op_lookup("Const")), 0);
    t_add_defaults(n, 0);
    assert_int_equal(n->n_attr, 0);
    int added = -1;
    assert_true(zf_ok(zf_op_add_default_attrs(NULL, n, &added)));
    assert_int_equal(added, 0);
    assert_int_equal(n->n_attr, 0);
    t_free_node(n);
}

static void test_op_registry_counts_each_ops_defaults(void **state)
{
    (void)state;
    assert_int_equal(zf_op_num_default_attrs(t_def("MatMul")), 4);
    assert_int_equal(zf_op_num_default_attrs(t_def("Conv2D")), 4);
    assert_int_equal(zf_op_num_default_attrs(t_def("Conv2DBackpropInput")), 4);
    assert_int_equal(zf_op_num_default_attrs(t_def("MaxPool")), 3);
    assert_int_equal(zf_op_num_default_attrs(t_def("BiasAdd")), 1);
    assert_int_equal(zf_op_num_default_attrs(t_def("Sum")), 2); /* keep_dims, Tidx */
    assert_int_equal(zf_op_num_default_attrs(t_def("BatchFunction")), 12);
    assert_int_equal(zf_op_num_default_attrs(t_def("Where")), 1);
    assert_int_equal(zf_op_num_default_attrs(t_def("Relu")), 0);
    assert_int_equal(zf_op_num_default_attrs(NULL), 0);
}

/* Every op's defaults make well-formed entries, once. */
static void t_check_op_defaults(const zf_op_def_t *def, void *arg)
{
    int *ops_with_defaults = arg;
    int want = zf_op_num_default_attrs(def);
    Tensorflow__NodeDef *n = t_defaults_of(zf_op_name(def), want);
    assert_int_equal(n->n_attr, want);
    for (size_t i = 0; i < n->n_attr; i++) {
        assert_true(n->attr[i]->key[0] != '\0');
        if (n->attr[i]->value->value_case == TENSORFLOW__ATTR_VALUE__VALUE__NOT_SET)
            fail_msg("%s: default of %s has no value", zf_op_name(def), n->attr[i]->key);
        for (size_t j = 0; j < i; j++)
            if (strcmp(n->attr[i]->key, n->attr[j]->key) == 0)
                fail_msg("%s: %s added twice", zf_op_name(def), n->attr[i]->key);
    }
    t_add_defaults(n, 0);
    *ops_with_defaults += want > 0;
    t_free_node(n);
}

static void test_op_registry_gives_every_op_well_formed_defaults(void **state)
{
    (void)state;
    int ops_with_defaults = 0;
    zf_op_foreach(t_check_op_defaults, &ops_with_defaults);
    assert_true(ops_with_defaults >= 90);
}

static void test_op_registry_reports_missing_attrs_naming_node_and_attr(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "x", "MatMul");
    t_assert_error(false, &t, "node 'x' (MatMul): missing attr 'T'");
    t_assert_error(true, &t, "node 'x' (MatMul): missing attr 'T'");

    t_node_init(&t, "n", "AddN");
    t_attr_type(&t, "T", ZF_FLOAT);
    t_assert_error(false, &t, "node 'n' (AddN): missing attr 'N'");

    t_node_init(&t, "id", "IdentityN");
    t_assert_error(true, &t, "node 'id' (IdentityN): missing attr 'T'");

    t_node_init(&t, "c", "Const");
    t_assert_error(true, &t, "node 'c' (Const): missing attr 'dtype'");
}

static void test_op_registry_reports_attrs_of_the_wrong_kind(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "n", "AddN");
    t_attr_type(&t, "N", ZF_FLOAT);
    t_attr_type(&t, "T", ZF_FLOAT);
    t_assert_error(false, &t, "node 'n' (AddN): attr 'N' must be an int, got type");

    t_node_init(&t, "m", "MatMul");
    t_attr_int(&t, "T", 1);
    t_assert_error(false, &t, "node 'm' (MatMul): attr 'T' must be a type, got int");

    t_node_init(&t, "m", "MatMul");
    t_attr_types(&t, "T", 1, (const int[]){ZF_FLOAT});
    t_assert_error(true, &t, "node 'm' (MatMul): attr 'T' must be a type, got list(type)");

    t_node_init(&t, "m", "MatMul");
    t_attr(&t, "T"); /* a key without a value */
    t_assert_error(true, &t, "node 'm' (MatMul): attr 'T' must be a type, got none");

    t_node_init(&t, "i", "IdentityN");
    t_attr_type(&t, "T", ZF_FLOAT);
    t_assert_error(false, &t, "node 'i' (IdentityN): attr 'T' must be a list of types, got type");

    t_node_init(&t, "i", "IdentityN");
    Tensorflow__AttrValue *v = t_attr(&t, "T");
    static int64_t ints[] = {1, 2};
    tensorflow__attr_value__list_value__init(&t.lists[0]);
    t.lists[0].n_i = 2;
    t.lists[0].i = ints;
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = &t.lists[0];
    t_assert_error(false, &t,
                   "node 'i' (IdentityN): attr 'T' must be a list of types, "
                   "got a list of other values");

    /* A defaulted attr that is present must still be right. */
    t_node_init(&t, "s", "Shape");
    t_attr_type(&t, "T", ZF_FLOAT);
    t_attr_string(&t, "out_type", "int32");
    t_assert_error(true, &t, "node 's' (Shape): attr 'out_type' must be a type, got string");
}

static void test_op_registry_rejects_negative_and_absurd_counts(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "n", "AddN");
    t_attr_int(&t, "N", -1);
    t_attr_type(&t, "T", ZF_FLOAT);
    t_assert_error(false, &t, "node 'n' (AddN): attr 'N' must not be negative, got -1");

    t_node_init(&t, "u", "Unpack");
    t_attr_int(&t, "num", (int64_t)1 << 40);
    t_attr_type(&t, "T", ZF_FLOAT);
    t_assert_error(true, &t,
                   "node 'u' (Unpack): attr 'num' is too large (1099511627776 > 1048576)");

    t_node_init(&t, "u", "Unpack");
    t_attr_int(&t, "num", 1 << 20); /* the limit itself is fine, counted without storing */
    t_attr_type(&t, "T", ZF_FLOAT);
    assert_int_equal(t_count(true, &t), 1 << 20);
}

static void test_op_registry_rejects_invalid_type_values(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "m", "MatMul");
    t_attr_type(&t, "T", 0);
    t_assert_error(false, &t, "node 'm' (MatMul): attr 'T' has invalid type 0");

    t_node_init(&t, "m", "MatMul");
    t_attr_type(&t, "T", ZF_FLOAT + ZF_DTYPE_REF_OFFSET);
    t_assert_error(false, &t, "node 'm' (MatMul): attr 'T' has invalid type 101");

    t_node_init(&t, "i", "IdentityN");
    t_attr_types(&t, "T", 2, (const int[]){ZF_FLOAT, 999});
    t_assert_error(true, &t, "node 'i' (IdentityN): attr 'T' has invalid type 999");
}

static void test_op_registry_counts_and_truncates_to_max(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "sum", "AddN");
    t_attr_int(&t, "N", 5);
    t_attr_type(&t, "T", ZF_INT8);
    const zf_op_def_t *def = t_def("AddN");
    int n = -1;
    assert_true(zf_ok(zf_op_input_types(def, &t.node, NULL, 0, &n)));
    assert_int_equal(n, 5);
    zf_dtype_t got[3] = {ZF_INVALID, ZF_INVALID, ZF_INVALID};
    assert_true(zf_ok(zf_op_input_types(def, &t.node, got, 2, &n)));
    assert_int_equal(n, 5);
    assert_int_equal(got[0], ZF_INT8);
    assert_int_equal(got[1], ZF_INT8);
    assert_int_equal(got[2], ZF_INVALID);
}

static void test_op_registry_reads_nodes_unpacked_from_the_wire(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "cat", "ConcatV2");
    t_attr_int(&t, "N", 3);
    t_attr_type(&t, "T", ZF_BFLOAT16);
    size_t len = tensorflow__node_def__get_packed_size(&t.node);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    tensorflow__node_def__pack(&t.node, buf);
    Tensorflow__NodeDef *node = tensorflow__node_def__unpack(NULL, len, buf);
    free(buf);
    assert_non_null(node);
    zf_dtype_t got[8];
    int n = 0;
    assert_true(zf_ok(zf_op_input_types(t_def(node->op), node, got, 8, &n)));
    assert_int_equal(n, 4);
    assert_int_equal(got[0], ZF_BFLOAT16);
    assert_int_equal(got[2], ZF_BFLOAT16);
    assert_int_equal(got[3], ZF_INT32);
    tensorflow__node_def__free_unpacked(node, NULL);
}

static void test_op_registry_resolves_argument_ranges(void **state)
{
    (void)state;
    t_node_t t;
    t_node_init(&t, "cat", "ConcatV2");
    t_attr_int(&t, "N", 3);
    t_attr_type(&t, "T", ZF_FLOAT);
    const zf_op_def_t *def = t_def("ConcatV2");
    int start = -1, stop = -1;
    assert_true(zf_ok(zf_op_input_range(def, &t.node, "values", &start, &stop)));
    assert_int_equal(start, 0);
    assert_int_equal(stop, 3);
    assert_true(zf_ok(zf_op_input_range(def, &t.node, "axis", &start, &stop)));
    assert_int_equal(start, 3);
    assert_int_equal(stop, 4);
    assert_true(zf_ok(zf_op_output_range(def, &t.node, "output", &start, &stop)));
    assert_int_equal(start, 0);
    assert_int_equal(stop, 1);

    zf_status_t s = zf_op_input_range(def, &t.node, "output", &start, &stop);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_string_equal(zf_status_msg(&s), "op ConcatV2 has no argument 'output'");
    zf_status_clear(&s);
    s = zf_op_input_range(def, &t.node, "val", &start, &stop);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    zf_status_clear(&s);

    t_node_init(&t, "sw", "Switch");
    t_attr_type(&t, "T", ZF_FLOAT);
    assert_true(zf_ok(zf_op_output_range(t_def("Switch"), &t.node, "output_true", &start, &stop)));
    assert_int_equal(start, 1);
    assert_int_equal(stop, 2);

    t_node_init(&t, "bad", "ConcatV2");
    s = zf_op_input_range(def, &t.node, "axis", &start, &stop);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&s);
}

static void test_op_registry_reports_flags_for_sample_ops(void **state)
{
    (void)state;
    static const struct {
        const char *op;
        unsigned set;
        unsigned unset;
    } cases[] = {
        {"Const", ZF_OP_SOURCE, ZF_OP_STATEFUL | ZF_OP_METADATA},
        {"Placeholder", ZF_OP_SOURCE, ZF_OP_STATEFUL},
        {"MatMul", 0, ZF_OP_SOURCE | ZF_OP_STATEFUL | ZF_OP_UNSUPPORTED},
        {"VariableV2", ZF_OP_STATEFUL | ZF_OP_SOURCE, ZF_OP_UNSUPPORTED},
        {"VarHandleOp", ZF_OP_STATEFUL | ZF_OP_SOURCE, 0},
        {"Assign", ZF_OP_STATEFUL, ZF_OP_SOURCE},
        {"AssignVariableOp", ZF_OP_STATEFUL, ZF_OP_SOURCE},
        {"RandomUniform", ZF_OP_STATEFUL, 0},
        {"StatelessRandomUniform", 0, ZF_OP_STATEFUL},
        {"Print", ZF_OP_STATEFUL, 0},
        {"Assert", ZF_OP_STATEFUL, 0},
        {"Shape", ZF_OP_METADATA, ZF_OP_STATEFUL | ZF_OP_SOURCE},
        {"Size", ZF_OP_METADATA, 0},
        {"Rank", ZF_OP_METADATA, 0},
        {"ShapeN", 0, ZF_OP_METADATA},
        {"Switch", ZF_OP_CONTROL_FLOW, ZF_OP_UNSUPPORTED},
        {"Merge", ZF_OP_CONTROL_FLOW, ZF_OP_UNSUPPORTED},
        {"Enter", ZF_OP_CONTROL_FLOW, ZF_OP_STATEFUL | ZF_OP_UNSUPPORTED},
        {"Exit", ZF_OP_CONTROL_FLOW, ZF_OP_UNSUPPORTED},
        {"NextIteration", ZF_OP_CONTROL_FLOW, ZF_OP_UNSUPPORTED},
        {"LoopCond", ZF_OP_CONTROL_FLOW, ZF_OP_UNSUPPORTED},
        {"While", ZF_OP_FUNCTIONAL | ZF_OP_UNSUPPORTED | ZF_OP_STATEFUL, ZF_OP_CONTROL_FLOW},
        {"StatelessWhile", ZF_OP_FUNCTIONAL | ZF_OP_UNSUPPORTED, ZF_OP_STATEFUL},
        {"If", ZF_OP_FUNCTIONAL | ZF_OP_STATEFUL, 0},
        {"StatelessIf", ZF_OP_FUNCTIONAL, ZF_OP_STATEFUL},
        {"PartitionedCall", ZF_OP_FUNCTIONAL, ZF_OP_STATEFUL},
        {"StatefulPartitionedCall", ZF_OP_FUNCTIONAL | ZF_OP_STATEFUL, 0},
        {"_Send", ZF_OP_SEND_RECV | ZF_OP_STATEFUL, ZF_OP_SOURCE},
        {"_Recv", ZF_OP_SEND_RECV | ZF_OP_STATEFUL | ZF_OP_SOURCE, 0},
        {"_HostSend", ZF_OP_SEND_RECV, 0},
        {"_HostRecv", ZF_OP_SEND_RECV, 0},
        {"_Arg", ZF_OP_STATEFUL | ZF_OP_SOURCE, ZF_OP_SEND_RECV},
        {"_Retval", ZF_OP_STATEFUL, ZF_OP_SOURCE},
        {"NoOp", ZF_OP_SOURCE, ZF_OP_STATEFUL},
        {"Identity", 0, ZF_OP_STATEFUL | ZF_OP_SOURCE | ZF_OP_CONTROL_FLOW},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned flags = zf_op_flags(t_def(cases[i].op));
        if ((flags & cases[i].set) != cases[i].set || (flags & cases[i].unset) != 0)
            fail_msg("%s has flags 0x%x", cases[i].op, flags);
    }
    assert_true(zf_op_has_flag(t_def("Shape"), ZF_OP_METADATA));
    assert_false(zf_op_has_flag(t_def("Shape"), ZF_OP_STATEFUL));
}

static void test_op_registry_registers_and_finds_kernels(void **state)
{
    (void)state;
    zf_op_registry_reset_kernels();
    const zf_op_def_t *mm = t_def("MatMul"), *add = t_def("Add");
    assert_false(zf_op_has_kernel(mm, "CPU"));
    assert_true(zf_ok(zf_op_register_kernel("MatMul", "CPU")));
    assert_true(zf_ok(zf_op_register_kernel("MatMul", "GPU")));
    assert_true(zf_ok(zf_op_register_kernel("MatMul", "CPU"))); /* again: no change */
    assert_true(zf_ok(zf_op_register_kernel("Add", "GPU")));
    assert_true(zf_op_has_kernel(mm, "CPU"));
    assert_true(zf_op_has_kernel(mm, "GPU"));
    assert_false(zf_op_has_kernel(mm, "TPU"));
    assert_false(zf_op_has_kernel(mm, "cpu"));
    assert_true(zf_op_has_kernel(add, "GPU"));
    assert_false(zf_op_has_kernel(add, "CPU"));
    assert_false(zf_op_has_kernel(NULL, "CPU"));
    assert_false(zf_op_has_kernel(mm, NULL));

    zf_status_t s = zf_op_register_kernel("NoSuchOp", "CPU");
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_non_null(strstr(zf_status_msg(&s), "NoSuchOp"));
    zf_status_clear(&s);
    s = zf_op_register_kernel("MatMul", "");
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&s);

    zf_op_registry_reset_kernels();
    assert_false(zf_op_has_kernel(mm, "CPU"));
    assert_false(zf_op_has_kernel(add, "GPU"));
}

static void test_op_registry_limits_device_types_to_sixteen(void **state)
{
    (void)state;
    zf_op_registry_reset_kernels();
    char type[16];
    for (int i = 0; i < 16; i++) {
        snprintf(type, sizeof type, "DEV%d", i);
        assert_true(zf_ok(zf_op_register_kernel("Identity", type)));
    }
    zf_status_t s = zf_op_register_kernel("Identity", "ONE_TOO_MANY");
    assert_int_equal(s.code, ZF_RESOURCE_EXHAUSTED);
    zf_status_clear(&s);
    /* Known types still register for more ops. */
    assert_true(zf_ok(zf_op_register_kernel("NoOp", "DEV15")));
    assert_true(zf_op_has_kernel(t_def("NoOp"), "DEV15"));
    assert_false(zf_op_has_kernel(t_def("NoOp"), "DEV14"));
    zf_op_registry_reset_kernels();
    assert_true(zf_ok(zf_op_register_kernel("Identity", "ONE_TOO_MANY")));
    zf_op_registry_reset_kernels();
}

typedef struct {
    int count;
    char last[128];
    bool ordered;
    bool saw_const;
} t_walk_t;

static void t_visit(const zf_op_def_t *def, void *arg)
{
    t_walk_t *w = arg;
    if (w->count > 0 && strcmp(w->last, zf_op_name(def)) >= 0) w->ordered = false;
    snprintf(w->last, sizeof w->last, "%s", zf_op_name(def));
    if (strcmp(zf_op_name(def), "Const") == 0) w->saw_const = true;
    if (zf_op_lookup(zf_op_name(def)) != def) w->ordered = false;
    w->count++;
}

static void test_op_registry_visits_ops_in_name_order(void **state)
{
    (void)state;
    t_walk_t w = {.ordered = true};
    zf_op_foreach(t_visit, &w);
    assert_true(w.ordered);
    assert_true(w.saw_const);
    assert_true(w.count > 150);
}

/* Ops in the test graphs that are not op types at all: calls of functions
 * from the graph's library (foo, func_name, test_func_name), and an op that
 * only ever existed inside Google (LegacyFedInput). */
static const char *const t_known_unknown[] = {"foo", "func_name", "test_func_name",
                                              "LegacyFedInput"};

static bool t_is_known_unknown(const char *op, bool *seen)
{
    for (size_t i = 0; i < sizeof t_known_unknown / sizeof t_known_unknown[0]; i++) {
        if (strcmp(op, t_known_unknown[i]) == 0) {
            seen[i] = true;
            return true;
        }
    }
    return false;
}

/* Checks each `op: "..."` line of one .pbtxt file; returns the ops seen. */
static int t_scan_pbtxt(const char *path, bool *seen_unknown)
{
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    char line[4096];
    int ops = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, "op: \"", 5) != 0) continue;
        p += 5;
        const char *end = strchr(p, '"');
        if (!end || end == p) continue;
        char op[256];
        snprintf(op, sizeof op, "%.*s", (int)(end - p), p);
        ops++;
        if (!zf_op_lookup(op) && !t_is_known_unknown(op, seen_unknown))
            fail_msg("%s uses op '%s', which is neither registered nor known to be unknown", path,
                     op);
    }
    fclose(f);
    return ops;
}

static void test_op_registry_knows_every_op_in_tensorflow_testdata(void **state)
{
    (void)state;
    DIR *dir = opendir(ZF_TF_DATA_DIR);
    if (!dir) fail_msg("cannot open %s", ZF_TF_DATA_DIR);
    bool seen_unknown[sizeof t_known_unknown / sizeof t_known_unknown[0]] = {false};
    int files = 0, ops = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".pbtxt") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", ZF_TF_DATA_DIR, e->d_name);
        ops += t_scan_pbtxt(path, seen_unknown);
        files++;
    }
    closedir(dir);
    assert_true(files >= 30);
    assert_true(ops >= 250);
    /* Keep the list honest: every entry must still be needed. */
    for (size_t i = 0; i < sizeof seen_unknown / sizeof seen_unknown[0]; i++)
        if (!seen_unknown[i])
            fail_msg("'%s' no longer appears in the test graphs", t_known_unknown[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_registry_initializes_once_across_threads),
        cmocka_unit_test(test_op_registry_looks_up_known_ops_and_not_unknown_ones),
        cmocka_unit_test(test_op_registry_resolves_a_type_attr),
        cmocka_unit_test(test_op_registry_takes_the_last_of_repeated_attr_keys),
        cmocka_unit_test(test_op_registry_uses_fixed_types),
        cmocka_unit_test(test_op_registry_expands_n_times_t),
        cmocka_unit_test(test_op_registry_expands_list_type_attrs),
        cmocka_unit_test(test_op_registry_gives_ref_types_for_ref_args),
        cmocka_unit_test(test_op_registry_applies_attr_defaults),
        cmocka_unit_test(test_op_registry_adds_the_defaults_a_node_leaves_out),
        cmocka_unit_test(test_op_registry_gives_defaults_of_every_kind),
        cmocka_unit_test(test_op_registry_adds_no_defaults_where_none_are_missing),
        cmocka_unit_test(test_op_registry_counts_each_ops_defaults),
        cmocka_unit_test(test_op_registry_gives_every_op_well_formed_defaults),
        cmocka_unit_test(test_op_registry_reports_missing_attrs_naming_node_and_attr),
        cmocka_unit_test(test_op_registry_reports_attrs_of_the_wrong_kind),
        cmocka_unit_test(test_op_registry_rejects_negative_and_absurd_counts),
        cmocka_unit_test(test_op_registry_rejects_invalid_type_values),
        cmocka_unit_test(test_op_registry_counts_and_truncates_to_max),
        cmocka_unit_test(test_op_registry_reads_nodes_unpacked_from_the_wire),
        cmocka_unit_test(test_op_registry_resolves_argument_ranges),
        cmocka_unit_test(test_op_registry_reports_flags_for_sample_ops),
        cmocka_unit_test(test_op_registry_registers_and_finds_kernels),
        cmocka_unit_test(test_op_registry_limits_device_types_to_sixteen),
        cmocka_unit_test(test_op_registry_visits_ops_in_name_order),
        cmocka_unit_test(test_op_registry_knows_every_op_in_tensorflow_testdata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
