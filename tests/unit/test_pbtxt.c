/* Tests for common/pbtxt: the text format reader and writer, against small
 * hand-written graphs, every error the reader reports, and TensorFlow's own
 * test graphs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <math.h>
#include <time.h>
#include <cmocka.h>

#include "common/pbtxt.h"
#include "proto/attr_value.pb-c.h"
#include "proto/device_attributes.pb-c.h"
#include "proto/full_type.pb-c.h"
#include "proto/function.pb-c.h"
#include "proto/graph.pb-c.h"
#include "proto/node_def.pb-c.h"
#include "proto/tensor.pb-c.h"
#include "proto/tensor_shape.pb-c.h"
#include "proto/versions.pb-c.h"

#define S_GRAPH (&tensorflow__graph_def__descriptor)

/* ---- helpers ---- */

static ProtobufCMessage *s_parse_ok(const ProtobufCMessageDescriptor *desc, const char *text)
{
    ProtobufCMessage *m = NULL;
    zf_status_t s = zf_pbtxt_parse(desc, text, strlen(text), &m);
    if (!zf_ok(s)) fail_msg("parse failed: %s\ninput:\n%s", zf_status_msg(&s), text);
    assert_non_null(m);
    return m;
}

static Tensorflow__GraphDef *s_graph(const char *text)
{
    return (Tensorflow__GraphDef *)s_parse_ok(S_GRAPH, text);
}

static void s_free(void *m)
{
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Parses text that must fail, and checks the message holds `want`. */
static void s_expect_error(const ProtobufCMessageDescriptor *desc, const char *text,
                           const char *want)
{
    ProtobufCMessage *m = (ProtobufCMessage *)&m; /* must be reset to NULL */
    zf_status_t s = zf_pbtxt_parse(desc, text, strlen(text), &m);
    assert_null(m);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    if (!strstr(zf_status_msg(&s), want))
        fail_msg("error \"%s\" does not contain \"%s\"\ninput:\n%s", zf_status_msg(&s), want, text);
    zf_status_clear(&s);
}

static uint8_t *s_pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len ? *len : 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(m, buf), *len);
    return buf;
}

static void s_assert_same_message(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
    size_t a_len, b_len;
    uint8_t *pa = s_pack(a, &a_len), *pb = s_pack(b, &b_len);
    assert_int_equal(a_len, b_len);
    assert_memory_equal(pa, pb, a_len);
    free(pa);
    free(pb);
}

static char *s_format(const ProtobufCMessage *m)
{
    char *text = NULL;
    size_t len = 0;
    zf_status_t s = zf_pbtxt_format(m, &text, &len);
    assert_true(zf_ok(s));
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    return text;
}

/* message -> text -> message must give the same bytes; returns the text. */
static char *s_round_trip(const ProtobufCMessage *m)
{
    char *text = s_format(m);
    ProtobufCMessage *again = NULL;
    zf_status_t s = zf_pbtxt_parse(m->descriptor, text, strlen(text), &again);
    if (!zf_ok(s)) fail_msg("formatted text does not parse: %s\n%s", zf_status_msg(&s), text);
    s_assert_same_message(m, again);
    s_free(again);
    return text;
}

static char *s_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static char *s_read_tf(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ZF_TF_DATA_DIR, name);
    char *text = s_read_file(path, len);
    if (!text) fail_msg("cannot read %s", path);
    return text;
}

static const Tensorflow__AttrValue *s_attr(const Tensorflow__NodeDef *n, const char *key)
{
    for (size_t i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i]->key, key) == 0) return n->attr[i]->value;
    fail_msg("node %s has no attr %s", n->name, key);
    return NULL;
}

/* Deterministic pseudo-random numbers for the garbage tests. */
static uint32_t s_rand(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (uint32_t)(*state >> 16);
}

/* Input that must be rejected with a positioned message, or accepted and
 * survive a round trip. Copied to an exact-size buffer so ASan sees any read
 * past the end. */
static bool s_parse_anything(const char *data, size_t len)
{
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len) memcpy(copy, data, len);
    ProtobufCMessage *m = NULL;
    zf_status_t s = zf_pbtxt_parse(S_GRAPH, copy, len, &m);
    free(copy);
    if (!zf_ok(s)) {
        assert_null(m);
        assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
        unsigned long line, col;
        assert_int_equal(sscanf(zf_status_msg(&s), "%lu:%lu:", &line, &col), 2);
        zf_status_clear(&s);
        return false;
    }
    free(s_round_trip(m));
    s_free(m);
    return true;
}

/* ---- reading ---- */

static const char s_const_node[] = "node {\n"
                                   "  name: \"x\"\n"
                                   "  op: \"Const\"\n"
                                   "  attr {\n"
                                   "    key: \"dtype\"\n"
                                   "    value {\n"
                                   "      type: DT_FLOAT\n"
                                   "    }\n"
                                   "  }\n"
                                   "}\n";

static void test_pbtxt_reads_names_ops_and_inputs(void **state)
{
    (void)state;
    Tensorflow__GraphDef *g = s_graph("node { name: \"a\" op: \"Placeholder\" }\n"
                                      "node { name: \"add\" op: \"Add\" input: \"a\" "
                                      "input: \"b:1\" input: \"^c\" device: \"/cpu:0\" }\n"
                                      "versions { producer: 27 min_consumer: 12 }\n");
    assert_int_equal(g->n_node, 2);
    assert_string_equal(g->node[0]->name, "a");
    assert_string_equal(g->node[0]->op, "Placeholder");
    assert_int_equal(g->node[0]->n_input, 0);
    assert_string_equal(g->node[0]->device, "");
    const Tensorflow__NodeDef *add = g->node[1];
    assert_string_equal(add->name, "add");
    assert_int_equal(add->n_input, 3);
    assert_string_equal(add->input[0], "a");
    assert_string_equal(add->input[1], "b:1");
    assert_string_equal(add->input[2], "^c");
    assert_string_equal(add->device, "/cpu:0");
    assert_non_null(g->versions);
    assert_int_equal(g->versions->producer, 27);
    assert_int_equal(g->versions->min_consumer, 12);
    assert_null(g->library);
    s_free(g);
}

static void test_pbtxt_reads_map_entries(void **state)
{
    (void)state;
    Tensorflow__GraphDef *g = s_graph("node {\n"
                                      "  attr { key: \"T\" value { type: DT_FLOAT } }\n"
                                      "  attr { key: \"N\" value { i: 3 } }\n"
                                      "  attr [ { key: \"a\" value { b: true } },\n"
                                      "         < key: 'b' value < s: 'x' > > ]\n"
                                      "}\n");
    const Tensorflow__NodeDef *n = g->node[0];
    assert_int_equal(n->n_attr, 4);
    assert_string_equal(n->attr[0]->key, "T");
    assert_int_equal(n->attr[0]->value->value_case, TENSORFLOW__ATTR_VALUE__VALUE_TYPE);
    assert_int_equal(n->attr[0]->value->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    assert_string_equal(n->attr[1]->key, "N");
    assert_int_equal(n->attr[1]->value->i, 3);
    assert_string_equal(n->attr[2]->key, "a");
    assert_int_equal(n->attr[2]->value->value_case, TENSORFLOW__ATTR_VALUE__VALUE_B);
    assert_true(n->attr[2]->value->b);
    assert_string_equal(n->attr[3]->key, "b");
    assert_int_equal(n->attr[3]->value->s.len, 1);
    assert_memory_equal(n->attr[3]->value->s.data, "x", 1);
    s_free(g);
}

/* A map key given twice keeps its last value, once, wherever the map is:
 * node attrs, a function's string- and integer-keyed maps, and the attrs of
 * a function value nested in an attr. The kept entries keep their order. */
static void test_pbtxt_keeps_the_last_value_of_a_repeated_map_key(void **state)
{
    (void)state;
    Tensorflow__GraphDef *g =
        s_graph("node {\n"
                "  name: 'n' op: 'Identity'\n"
                "  attr { key: 'T' value { type: DT_FLOAT } }\n"
                "  attr { key: 'x' value { i: 1 } }\n"
                "  attr { key: 'T' value { type: DT_INT32 } }\n"
                "  attr { key: 'f' value { func { name: 'g' attr { key: 'a' value { i: 1 } }\n"
                "                                         attr { key: 'a' value { i: 2 } } } } }\n"
                "}\n"
                "library { function {\n"
                "  signature { name: 'fn' }\n"
                "  ret { key: 'd' value: 'first' }\n"
                "  ret { key: 'e' value: 'e' }\n"
                "  ret { key: 'd' value: 'second' }\n"
                "  resource_arg_unique_id { key: 1 value: 10 }\n"
                "  resource_arg_unique_id { key: 2 value: 20 }\n"
                "  resource_arg_unique_id { key: 1 value: 11 }\n"
                "} }\n");
    const Tensorflow__NodeDef *n = g->node[0];
    assert_int_equal(n->n_attr, 3);
    assert_string_equal(n->attr[0]->key, "x");
    assert_string_equal(n->attr[1]->key, "T");
    assert_int_equal(n->attr[1]->value->type, TENSORFLOW__DATA_TYPE__DT_INT32);
    assert_string_equal(n->attr[2]->key, "f");
    const Tensorflow__NameAttrList *func = n->attr[2]->value->func;
    assert_int_equal(func->n_attr, 1);
    assert_int_equal(func->attr[0]->value->i, 2);
    const Tensorflow__FunctionDef *fn = g->library->function[0];
    assert_int_equal(fn->n_ret, 2);
    assert_string_equal(fn->ret[0]->key, "e");
    assert_string_equal(fn->ret[1]->key, "d");
    assert_string_equal(fn->ret[1]->value, "second");
    assert_int_equal(fn->n_resource_arg_unique_id, 2);
    assert_int_equal(fn->resource_arg_unique_id[0]->key, 2);
    assert_int_equal(fn->resource_arg_unique_id[1]->key, 1);
    assert_int_equal(fn->resource_arg_unique_id[1]->value, 11);

    /* Written back, the node carries T once, with the last value. */
    char *text = s_format(&g->node[0]->base);
    assert_string_equal(text, "name: \"n\"\n"
                              "op: \"Identity\"\n"
                              "attr {\n"
                              "  key: \"x\"\n"
                              "  value {\n"
                              "    i: 1\n"
                              "  }\n"
                              "}\n"
                              "attr {\n"
                              "  key: \"T\"\n"
                              "  value {\n"
                              "    type: DT_INT32\n"
                              "  }\n"
                              "}\n"
                              "attr {\n"
                              "  key: \"f\"\n"
                              "  value {\n"
                              "    func {\n"
                              "      name: \"g\"\n"
                              "      attr {\n"
                              "        key: \"a\"\n"
                              "        value {\n"
                              "          i: 2\n"
                              "        }\n"
                              "      }\n"
                              "    }\n"
                              "  }\n"
                              "}\n");
    free(text);
    s_free(g);
}

/* A long map (sorted by key rather than checked pairwise) follows the same
 * rule: 20 keys given twice, then once more for every third key. */
static void test_pbtxt_collapses_repeated_keys_of_a_long_map(void **state)
{
    (void)state;
    char text[8192];
    size_t len = (size_t)snprintf(text, sizeof text, "node {\n");
    for (int round = 0; round < 3; round++)
        for (int k = 0; k < 20; k++)
            if (round < 2 || k % 3 == 0)
                len +=
                    (size_t)snprintf(text + len, sizeof text - len,
                                     "attr { key: 'k%d' value { i: %d } }\n", k, 100 * round + k);
    snprintf(text + len, sizeof text - len, "}\n");
    Tensorflow__GraphDef *g = s_graph(text);
    const Tensorflow__NodeDef *n = g->node[0];
    assert_int_equal(n->n_attr, 20);
    /* Kept: the second round's entries for keys not given a third time, in
     * their order, then the third round's. */
    int at = 0;
    for (int k = 0; k < 20; k++) {
        if (k % 3 == 0) continue;
        char key[8];
        snprintf(key, sizeof key, "k%d", k);
        assert_string_equal(n->attr[at]->key, key);
        assert_int_equal(n->attr[at]->value->i, 100 + k);
        at++;
    }
    for (int k = 0; k < 20; k += 3) {
        char key[8];
        snprintf(key, sizeof key, "k%d", k);
        assert_string_equal(n->attr[at]->key, key);
        assert_int_equal(n->attr[at]->value->i, 200 + k);
        at++;
    }
    assert_int_equal(at, 20);
    s_free(g);
}

static void test_pbtxt_reads_every_attr_value_kind(void **state)
{
    (void)state;
    Tensorflow__GraphDef *g = s_graph(
        "node {\n"
        "  attr { key: \"list\" value { list { i: [1, 2] s: \"p\" s: \"q\" f: [0.5, -1] "
        "b: [true, false] type: [DT_INT32, DT_HALF] shape { dim { size: 4 } } "
        "tensor { dtype: DT_BOOL } func { name: \"g\" } } } }\n"
        "  attr { key: \"s\" value { s: \"bytes\\000here\" } }\n"
        "  attr { key: \"i\" value { i: -9000000000 } }\n"
        "  attr { key: \"f\" value { f: 0.1 } }\n"
        "  attr { key: \"b\" value { b: false } }\n"
        "  attr { key: \"type\" value { type: DT_STRING_REF } }\n"
        "  attr { key: \"shape\" value { shape { unknown_rank: true } } }\n"
        "  attr { key: \"tensor\" value { tensor { dtype: DT_INT64 int64_val: 7 } } }\n"
        "  attr { key: \"placeholder\" value { placeholder: \"T\" } }\n"
        "  attr { key: \"func\" value { func { name: \"body\" attr { key: \"k\" value { i: 1 } "
        "} } } }\n"
        "}\n");
    const Tensorflow__NodeDef *n = g->node[0];
    const Tensorflow__AttrValue *v = s_attr(n, "list");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_LIST);
    const Tensorflow__AttrValue__ListValue *l = v->list;
    assert_int_equal(l->n_i, 2);
    assert_int_equal(l->i[0], 1);
    assert_int_equal(l->i[1], 2);
    assert_int_equal(l->n_s, 2);
    assert_memory_equal(l->s[1].data, "q", 1);
    assert_int_equal(l->n_f, 2);
    assert_true(l->f[0] == 0.5f && l->f[1] == -1.0f);
    assert_int_equal(l->n_b, 2);
    assert_true(l->b[0] && !l->b[1]);
    assert_int_equal(l->n_type, 2);
    assert_int_equal(l->type[1], TENSORFLOW__DATA_TYPE__DT_HALF);
    assert_int_equal(l->n_shape, 1);
    assert_int_equal(l->shape[0]->dim[0]->size, 4);
    assert_int_equal(l->n_tensor, 1);
    assert_int_equal(l->tensor[0]->dtype, TENSORFLOW__DATA_TYPE__DT_BOOL);
    assert_int_equal(l->n_func, 1);
    assert_string_equal(l->func[0]->name, "g");

    v = s_attr(n, "s");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_S);
    assert_int_equal(v->s.len, 10);
    assert_memory_equal(v->s.data, "bytes\0here", 10);
    assert_int_equal(s_attr(n, "i")->i, -9000000000LL);
    assert_true(s_attr(n, "f")->f == 0.1f);
    v = s_attr(n, "b");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_B);
    assert_false(v->b);
    assert_int_equal(s_attr(n, "type")->type, TENSORFLOW__DATA_TYPE__DT_STRING_REF);
    v = s_attr(n, "shape");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_SHAPE);
    assert_true(v->shape->unknown_rank);
    assert_int_equal(v->shape->n_dim, 0);
    v = s_attr(n, "tensor");
    assert_int_equal(v->tensor->dtype, TENSORFLOW__DATA_TYPE__DT_INT64);
    assert_int_equal(v->tensor->n_int64_val, 1);
    assert_int_equal(v->tensor->int64_val[0], 7);
    v = s_attr(n, "placeholder");
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_PLACEHOLDER);
    assert_string_equal(v->placeholder, "T");
    v = s_attr(n, "func");
    assert_string_equal(v->func->name, "body");
    assert_int_equal(v->func->n_attr, 1);
    assert_string_equal(v->func->attr[0]->key, "k");
    assert_int_equal(v->func->attr[0]->value->i, 1);
    free(s_round_trip(&g->base));
    s_free(g);
}

static void test_pbtxt_reads_shape_dims(void **state)
{
    (void)state;
    Tensorflow__TensorShapeProto *sh = (Tensorflow__TensorShapeProto *)s_parse_ok(
        &tensorflow__tensor_shape_proto__descriptor,
        "dim { size: -1 } dim { size: 224 name: \"h\" } dim: { size: 0x10 } dim < >");
    assert_int_equal(sh->n_dim, 4);
    assert_int_equal(sh->dim[0]->size, -1);
    assert_int_equal(sh->dim[1]->size, 224);
    assert_string_equal(sh->dim[1]->name, "h");
    assert_int_equal(sh->dim[2]->size, 16);
    assert_int_equal(sh->dim[3]->size, 0);
    assert_string_equal(sh->dim[3]->name, "");
    assert_false(sh->unknown_rank);
    s_free(sh);
}

static void test_pbtxt_reads_tensor_values_and_escaped_content(void **state)
{
    (void)state;
    Tensorflow__TensorProto *t = (Tensorflow__TensorProto *)s_parse_ok(
        &tensorflow__tensor_proto__descriptor,
        "dtype: DT_FLOAT\n"
        "tensor_shape { dim { size: 2 } }\n"
        "float_val: 0.1 float_val: -2.5f float_val: [1e-3, 1., .5, 7]\n"
        "double_val: 0.1\n"
        "tensor_content: \"\\000\\001\\377\\x7f\\xA\\n\\t\\r\\\\\\'\\\"\\?\\a\\b\\f\\v\"\n"
        "string_val: 'it''s' string_val: \"\"\n"
        "half_val: [15360, 0x3c00] bool_val: [true, 0, 1, f] uint64_val: 18446744073709551615\n");
    assert_int_equal(t->dtype, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    assert_int_equal(t->tensor_shape->dim[0]->size, 2);
    assert_int_equal(t->n_float_val, 6);
    assert_true(t->float_val[0] == 0.1f);
    assert_true(t->float_val[1] == -2.5f);
    assert_true(t->float_val[2] == 1e-3f);
    assert_true(t->float_val[3] == 1.0f);
    assert_true(t->float_val[4] == 0.5f);
    assert_true(t->float_val[5] == 7.0f);
    assert_int_equal(t->n_double_val, 1);
    assert_true(t->double_val[0] == 0.1);
    static const uint8_t content[] = {0,    1,    0xff, 0x7f, 0x0a, '\n', '\t', '\r',
                                      '\\', '\'', '"',  '?',  '\a', '\b', '\f', '\v'};
    assert_int_equal(t->tensor_content.len, sizeof content);
    assert_memory_equal(t->tensor_content.data, content, sizeof content);
    assert_int_equal(t->n_string_val, 2);
    assert_int_equal(t->string_val[0].len, 3);
    assert_memory_equal(t->string_val[0].data, "its", 3);
    assert_int_equal(t->string_val[1].len, 0);
    assert_int_equal(t->n_half_val, 2);
    assert_int_equal(t->half_val[0], 15360);
    assert_int_equal(t->half_val[1], 15360);
    assert_int_equal(t->n_bool_val, 4);
    assert_true(t->bool_val[0] && !t->bool_val[1] && t->bool_val[2] && !t->bool_val[3]);
    assert_int_equal(t->uint64_val[0], UINT64_MAX);
    free(s_round_trip(&t->base));
    s_free(t);
}

static void test_pbtxt_accepts_every_message_syntax(void **state)
{
    (void)state;
    Tensorflow__GraphDef *a = s_graph(s_const_node);
    const char *variants[] = {
        "node: { name: \"x\"; op: \"Const\", attr: { key: \"dtype\" value: { type: DT_FLOAT } } }",
        "node < name: 'x' op: 'Const' attr < key: \"dtype\" value < type: DT_FLOAT > > >",
        "node [ { op: \"Const\" name: \"x\" attr [ { key: \"dtype\" value { type: 1 } } ] } ]",
        "node: [{name:\"x\"op:\"Const\"attr{key:\"dtype\"value{type:DT_FLOAT}}}];",
        ("  # leading comment\nnode {name: \"x\" # trailing comment\n op: \"Co\" \"nst\"\n"
         "attr { key: \"dt\" 'ype' value { type: DT_FLOAT;};};}"),
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        Tensorflow__GraphDef *b = s_graph(variants[i]);
        s_assert_same_message(&a->base, &b->base);
        s_free(b);
    }
    s_free(a);
}

static void test_pbtxt_reads_repeated_fields_as_lists(void **state)
{
    (void)state;
    Tensorflow__GraphDef *g = s_graph("node { input: [\"a\", 'b'] input: \"c\" input: [] "
                                      "input: [\"d\"] }\n"
                                      "versions { bad_consumers: [1, 2] bad_consumers: 3 }");
    const Tensorflow__NodeDef *n = g->node[0];
    assert_int_equal(n->n_input, 4);
    assert_string_equal(n->input[0], "a");
    assert_string_equal(n->input[1], "b");
    assert_string_equal(n->input[2], "c");
    assert_string_equal(n->input[3], "d");
    assert_int_equal(g->versions->n_bad_consumers, 3);
    assert_int_equal(g->versions->bad_consumers[2], 3);
    s_free(g);
}

static void test_pbtxt_reads_enums_by_name_and_number(void **state)
{
    (void)state;
    Tensorflow__TensorProto *t =
        (Tensorflow__TensorProto *)s_parse_ok(&tensorflow__tensor_proto__descriptor, "dtype: 19");
    assert_int_equal(t->dtype, TENSORFLOW__DATA_TYPE__DT_HALF);
    s_free(t);
    /* proto3 enums are open: an unknown number is kept and written back. */
    t = (Tensorflow__TensorProto *)s_parse_ok(&tensorflow__tensor_proto__descriptor, "dtype: 77");
    assert_int_equal((int)t->dtype, 77);
    char *text = s_round_trip(&t->base);
    assert_string_equal(text, "dtype: 77\n");
    free(text);
    s_free(t);
    t = (Tensorflow__TensorProto *)s_parse_ok(&tensorflow__tensor_proto__descriptor,
                                              "dtype: DT_UINT64_REF");
    assert_int_equal(t->dtype, TENSORFLOW__DATA_TYPE__DT_UINT64_REF);
    s_free(t);
}

static void test_pbtxt_reads_integers_in_every_base(void **state)
{
    (void)state;
    Tensorflow__TensorProto *t = (Tensorflow__TensorProto *)s_parse_ok(
        &tensorflow__tensor_proto__descriptor,
        "int_val: [10, 0x1F, 0X1f, 017, 0, -0, -2147483648, 2147483647, - 5]\n"
        "int64_val: [-9223372036854775808, 9223372036854775807, 0x7fffffffffffffff]\n"
        "uint32_val: [4294967295, 0xffffffff, -0]\n"
        "uint64_val: [18446744073709551615, 0xFFFFFFFFFFFFFFFF, 01777777777777777777777]\n"
        "version_number: -7\n");
    static const int32_t want_i[] = {10, 31, 31, 15, 0, 0, INT32_MIN, INT32_MAX, -5};
    assert_int_equal(t->n_int_val, 9);
    for (size_t i = 0; i < 9; i++) assert_int_equal(t->int_val[i], want_i[i]);
    assert_true(t->int64_val[0] == INT64_MIN);
    assert_true(t->int64_val[1] == INT64_MAX);
    assert_true(t->int64_val[2] == INT64_MAX);
    assert_int_equal(t->n_uint32_val, 3);
    assert_true(t->uint32_val[0] == UINT32_MAX && t->uint32_val[1] == UINT32_MAX);
    assert_true(t->uint32_val[2] == 0);
    for (size_t i = 0; i < 3; i++) assert_true(t->uint64_val[i] == UINT64_MAX);
    assert_int_equal(t->version_number, -7);
    free(s_round_trip(&t->base));
    s_free(t);

    Tensorflow__DeviceAttributes *d = (Tensorflow__DeviceAttributes *)s_parse_ok(
        &tensorflow__device_attributes__descriptor,
        "incarnation: 18446744073709551615 memory_limit: 0x100000000");
    assert_true(d->incarnation == UINT64_MAX);
    assert_true(d->memory_limit == INT64_C(0x100000000));
    s_free(d);
}

static void test_pbtxt_rejects_integers_out_of_range(void **state)
{
    (void)state;
    const ProtobufCMessageDescriptor *td = &tensorflow__tensor_proto__descriptor;
    s_expect_error(td, "int_val: 2147483648",
                   "1:10: integer 2147483648 is out of range for int32 field 'int_val'");
    s_expect_error(td, "int_val: -2147483649", "1:10: integer -2147483649 is out of range");
    s_expect_error(td, "int64_val: 9223372036854775808", "out of range for int64");
    s_expect_error(td, "int64_val: -9223372036854775809", "out of range for int64");
    s_expect_error(td, "int64_val: 99999999999999999999999", "out of range");
    s_expect_error(td, "uint32_val: 4294967296", "out of range for uint32 field 'uint32_val'");
    s_expect_error(td, "uint32_val: -1", "1:13: integer -1 is out of range for uint32");
    s_expect_error(td, "uint64_val: 18446744073709551616", "out of range for uint64");
    s_expect_error(td, "uint64_val: 0x10000000000000000", "out of range for uint64");
    s_expect_error(td, "dtype: 2147483648", "out of range for enum field 'dtype'");
    s_expect_error(&tensorflow__device_attributes__descriptor, "incarnation: -3",
                   "out of range for fixed64 field 'incarnation'");
    s_expect_error(td, "int_val: 1.5", "1:10: expected integer for field 'int_val', found '1.5'");
    s_expect_error(td, "int_val: 1e3", "expected integer for field 'int_val', found '1e3'");
    s_expect_error(td, "int_val: 09", "1:10: invalid octal number");
    s_expect_error(td, "int_val: 0x", "1:10: invalid hex number");
    s_expect_error(td, "int_val: 12abc", "1:10: invalid number '12abc'");
    s_expect_error(td, "int_val: abc", "1:10: expected integer for field 'int_val', found 'abc'");
    s_expect_error(td, "float_val: 1e+", "1:12: invalid number: exponent has no digits");
}

static void test_pbtxt_reads_floats_in_every_form(void **state)
{
    (void)state;
    Tensorflow__TensorProto *t = (Tensorflow__TensorProto *)s_parse_ok(
        &tensorflow__tensor_proto__descriptor,
        "float_val: [1.5, 1e-3, -2.5f, inf, -inf, nan, 1., .25, 3F, 1E2, -0,\n"
        "            Infinity, -NaN, 3.4028235e38, 1e39, -1e39, 1e-50, 2.5e+1, 7]\n"
        "double_val: [0.1, 1e308, -inf, 4.9e-324, 0.3333333333333333]\n");
    static const float want[] = {1.5f, 1e-3f, -2.5f,         0, 0, 0, 1.0f,  0.25f, 3.0f, 100.0f, 0,
                                 0,    0,     3.4028235e38f, 0, 0, 0, 25.0f, 7.0f};
    assert_int_equal(t->n_float_val, 19);
    for (size_t i = 0; i < 19; i++)
        if (want[i] != 0) assert_true(t->float_val[i] == want[i]);
    assert_true(isinf(t->float_val[3]) && t->float_val[3] > 0);
    assert_true(isinf(t->float_val[4]) && t->float_val[4] < 0);
    assert_true(isnan(t->float_val[5]));
    assert_true(t->float_val[10] == 0 && signbit(t->float_val[10]));
    assert_true(isinf(t->float_val[11]));
    assert_true(isnan(t->float_val[12]) && signbit(t->float_val[12]));
    /* Beyond the float range is infinity, as protobuf narrows it. */
    assert_true(isinf(t->float_val[14]) && t->float_val[14] > 0);
    assert_true(isinf(t->float_val[15]) && t->float_val[15] < 0);
    assert_true(t->float_val[16] == 0);
    assert_int_equal(t->n_double_val, 5);
    assert_true(t->double_val[0] == 0.1);
    assert_true(t->double_val[1] == 1e308);
    assert_true(isinf(t->double_val[2]));
    assert_true(t->double_val[3] == 4.9e-324);
    assert_true(t->double_val[4] == 0.3333333333333333);
    free(s_round_trip(&t->base));
    s_free(t);
    s_expect_error(&tensorflow__tensor_proto__descriptor, "float_val: infinit",
                   "1:12: expected number for field 'float_val', found 'infinit'");
    s_expect_error(&tensorflow__tensor_proto__descriptor, "float_val: \"1\"",
                   "1:12: expected number for field 'float_val', found a string");
    /* Like protobuf, only decimal integers stand for floating-point values. */
    s_expect_error(&tensorflow__tensor_proto__descriptor, "float_val: 0x10",
                   "1:12: expected a decimal number for field 'float_val', found '0x10'");
    s_expect_error(&tensorflow__tensor_proto__descriptor, "double_val: 017",
                   "1:13: expected a decimal number for field 'double_val', found '017'");
}

static void test_pbtxt_reads_bools_in_every_spelling(void **state)
{
    (void)state;
    Tensorflow__TensorProto *t = (Tensorflow__TensorProto *)s_parse_ok(
        &tensorflow__tensor_proto__descriptor,
        "bool_val: [true, True, t, 1, false, False, f, 0, 0x1]");
    static const protobuf_c_boolean want[] = {1, 1, 1, 1, 0, 0, 0, 0, 1};
    assert_int_equal(t->n_bool_val, 9);
    for (size_t i = 0; i < 9; i++) assert_int_equal(t->bool_val[i], want[i]);
    s_free(t);
    s_expect_error(&tensorflow__tensor_proto__descriptor, "bool_val: 2",
                   "1:11: invalid value '2' for bool field 'bool_val'");
    s_expect_error(&tensorflow__tensor_proto__descriptor, "bool_val: TRUE",
                   "1:11: invalid value 'TRUE' for bool field 'bool_val'");
    s_expect_error(&tensorflow__tensor_proto__descriptor, "bool_val: -1",
                   "1:11: invalid value '-1' for bool field");
}

static void test_pbtxt_reads_string_escapes_and_concatenation(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = (Tensorflow__NodeDef *)s_parse_ok(
        &tensorflow__node_def__descriptor,
        "name: \"a\" 'b' # comment between literals\n \"c\"\n"
        "op: 'say \"hi\"\\t\\x41\\101\\u00e9\\U0001F600\\ud83d\\ude00'\n"
        "device: \"\"\n"
        "input: \"\\303\\251\" input: '\\'' input: \"\\\"\"\n");
    assert_string_equal(n->name, "abc");
    assert_string_equal(n->op, "say \"hi\"\tAA\xc3\xa9\xf0\x9f\x98\x80\xf0\x9f\x98\x80");
    assert_string_equal(n->device, "");
    assert_string_equal(n->input[0], "\xc3\xa9");
    assert_string_equal(n->input[1], "'");
    assert_string_equal(n->input[2], "\"");
    char *text = s_round_trip(&n->base);
    /* Non-ASCII bytes come back as octal, quotes escaped, as protobuf does. */
    assert_non_null(strstr(text, "name: \"abc\"\n"));
    assert_non_null(strstr(text, "op: \"say \\\"hi\\\"\\tAA\\303\\251\\360\\237\\230\\200"));
    assert_non_null(strstr(text, "input: \"\\'\"\n"));
    assert_null(strstr(text, "device"));
    free(text);
    s_free(n);
}

static void test_pbtxt_parses_empty_input_to_empty_message(void **state)
{
    (void)state;
    const char *empties[] = {"", "   \n\t", "# only a comment", "# RUN: x\n# CHECK: y\n"};
    for (size_t i = 0; i < 4; i++) {
        Tensorflow__GraphDef *g = s_graph(empties[i]);
        assert_int_equal(g->n_node, 0);
        assert_null(g->versions);
        char *text = s_format(&g->base);
        assert_string_equal(text, "");
        free(text);
        s_free(g);
    }
    ProtobufCMessage *m = NULL;
    zf_status_t s = zf_pbtxt_parse(S_GRAPH, NULL, 0, &m);
    assert_true(zf_ok(s));
    s_free(m);
}

static void test_pbtxt_rejects_null_arguments(void **state)
{
    (void)state;
    ProtobufCMessage *m = NULL;
    zf_status_t s = zf_pbtxt_parse(NULL, "", 0, &m);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&s);
    s = zf_pbtxt_parse(S_GRAPH, NULL, 3, &m);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_null(m);
    zf_status_clear(&s);
    s = zf_pbtxt_parse(S_GRAPH, "", 0, NULL);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&s);
    char *out = (char *)&out;
    s = zf_pbtxt_format(NULL, &out, NULL);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_null(out);
    zf_status_clear(&s);
}

/* ---- errors ---- */

static void test_pbtxt_reports_unknown_field_with_position(void **state)
{
    (void)state;
    s_expect_error(S_GRAPH, "# header\n\n      nodes {\n}\n",
                   "3:7: unknown field 'nodes' in tensorflow.GraphDef");
    s_expect_error(S_GRAPH, "node {\n  name: \"a\"\n  opp: \"b\"\n}",
                   "3:3: unknown field 'opp' in tensorflow.NodeDef");
    s_expect_error(S_GRAPH, "node { attr { key: \"a\" value { lst { } } } }",
                   "1:32: unknown field 'lst' in tensorflow.AttrValue");
    s_expect_error(S_GRAPH, "[tensorflow.ext]: 1",
                   "1:1: extension and Any fields ('[...]') are not supported");
    s_expect_error(S_GRAPH, "node { 5: 1 }", "1:8: expected field name, found '5'");
}

static void test_pbtxt_reports_unknown_enum_value(void **state)
{
    (void)state;
    s_expect_error(S_GRAPH,
                   "node {\n"
                   "  attr {\n"
                   "    key: \"T\"\n"
                   "    value {\n"
                   "     type: DT_FLOOT\n"
                   "    }\n"
                   "  }\n"
                   "}\n",
                   "5:12: unknown enum value 'DT_FLOOT' for field 'type' of type "
                   "tensorflow.DataType");
    s_expect_error(S_GRAPH, "node { attr { value { type: \"DT_FLOAT\" } } }",
                   "1:29: expected enum value (name or number) for field 'type', found a string");
}

static void test_pbtxt_reports_unterminated_string(void **state)
{
    (void)state;
    s_expect_error(S_GRAPH, "node { name:\n\"abc\n}", "2:1: unterminated string");
    s_expect_error(S_GRAPH, "node { name: 'abc", "1:14: unterminated string");
    s_expect_error(S_GRAPH, "node { name: \"abc\\", "1:14: unterminated string");
    s_expect_error(S_GRAPH, "node { name: \"ok\" 'abc\" }", "1:19: unterminated string");
}

static void test_pbtxt_reports_invalid_escape(void **state)
{
    (void)state;
    s_expect_error(S_GRAPH, "node {\n  name: \"a\"\n  op: \"b\"\n  input: \"x\\q\"\n}",
                   "4:12: invalid escape '\\q'");
    s_expect_error(S_GRAPH, "node { name: \"\\x\" }", "1:15: invalid escape '\\x' without hex");
    s_expect_error(S_GRAPH, "node { name: \"\\400\" }",
                   "1:15: octal escape '\\400' is out of range");
    s_expect_error(S_GRAPH, "node { name: \"\\u12\" }", "1:15: invalid unicode escape '\\u'");
    s_expect_error(S_GRAPH, "node { name: \"\\U00110000\" }", "invalid unicode escape '\\U'");
    s_expect_error(S_GRAPH, "node { name: \"a\\000b\" }",
                   "1:14: string field 'name' cannot hold a NUL byte");
}

static void test_pbtxt_reports_missing_close_brace(void **state)
{
    (void)state;
    s_expect_error(S_GRAPH, "node {\n  name: \"a\"\n",
                   "3:1: expected '}' but reached end of input");
    s_expect_error(S_GRAPH, "node {\n  attr <\n",
                   "the '<' at 2:8 opening a tensorflow.NodeDef.AttrEntry is not closed");
    s_expect_error(S_GRAPH, "node { name: \"a\" >", "1:18: expected '}' but found '>'");
    s_expect_error(S_GRAPH, "node { }\n}", "2:1: unexpected '}' outside any message");
    s_expect_error(S_GRAPH, "node { input: [\"a\", \"b\"", "1:24: expected ']' but reached end");
    s_expect_error(S_GRAPH, "node { input: [\"a\" \"b\" name: \"x\" }",
                   "1:24: expected ',' or ']' in the list for field 'input', found 'name'");
    s_expect_error(S_GRAPH, "node { input: [\"a\",] }",
                   "1:20: expected string for field 'input', found ']'");
}

static void test_pbtxt_reports_syntax_errors(void **state)
{
    (void)state;
    s_expect_error(S_GRAPH, "node { name \"a\" }",
                   "1:13: expected ':' after field 'name', found a string");
    s_expect_error(S_GRAPH, "node { name: }", "1:14: expected string for field 'name', found '}'");
    s_expect_error(S_GRAPH, "node { name: [\"a\"] }",
                   "1:14: field 'name' is not repeated and cannot take a list");
    s_expect_error(S_GRAPH, "node: \"a\"",
                   "1:7: expected '{' or '<' for message field 'node', found a string");
    s_expect_error(S_GRAPH, "node",
                   "1:5: expected '{' or '<' for message field 'node', found "
                   "end of input");
    s_expect_error(S_GRAPH, "node {} \x01", "1:9: expected field name, found byte 0x01");
}

static void test_pbtxt_rejects_non_repeated_field_set_twice(void **state)
{
    (void)state;
    s_expect_error(S_GRAPH, "node {\n  name: \"a\"\n  name: \"b\"\n}",
                   "3:3: non-repeated field 'name' is set twice in tensorflow.NodeDef");
    s_expect_error(S_GRAPH, "versions { }\nversions { }",
                   "2:1: non-repeated field 'versions' is set twice in tensorflow.GraphDef");
    /* A zero value still counts as set, as in protobuf. */
    s_expect_error(S_GRAPH, "versions { producer: 0 producer: 0 }",
                   "1:24: non-repeated field 'producer' is set twice");
    s_expect_error(S_GRAPH, "node { attr { value { i: 1 i: 2 } } }",
                   "1:28: non-repeated field 'i' is set twice in tensorflow.AttrValue");
}

static void test_pbtxt_rejects_two_members_of_one_oneof(void **state)
{
    (void)state;
    s_expect_error(S_GRAPH, "node { attr { key: \"a\" value { s: \"x\"\n i: 3 } } }",
                   "2:2: fields 's' and 'i' of tensorflow.AttrValue are in the same oneof; only "
                   "one may be set");
    s_expect_error(S_GRAPH, "node { attr { value { list { } type: DT_FLOAT } } }",
                   "fields 'list' and 'type' of tensorflow.AttrValue are in the same oneof");
}

/* Builds `args { ` nested `depth` times inside a FullTypeDef. */
static char *s_nested_text(int depth)
{
    size_t cap = (size_t)depth * 8 + 1;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t n = 0;
    for (int i = 0; i < depth; i++) n += (size_t)snprintf(text + n, cap - n, "args {");
    for (int i = 0; i < depth; i++) text[n++] = '}';
    text[n] = '\0';
    return text;
}

static void test_pbtxt_rejects_nesting_deeper_than_100(void **state)
{
    (void)state;
    const ProtobufCMessageDescriptor *fd = &tensorflow__full_type_def__descriptor;
    char *ok = s_nested_text(ZF_PBTXT_MAX_DEPTH);
    ProtobufCMessage *m = s_parse_ok(fd, ok);
    free(s_round_trip(m));
    s_free(m);
    free(ok);
    char *deep = s_nested_text(ZF_PBTXT_MAX_DEPTH + 1);
    s_expect_error(fd, deep, "1:606: nesting deeper than 100 levels");
    free(deep);
    /* A long run of opening braces stops at the limit, without recursing on. */
    size_t n = 100000;
    char *braces = malloc(n * 7 + 1);
    assert_non_null(braces);
    for (size_t i = 0; i < n; i++) memcpy(braces + i * 7, "args {\n", 7);
    braces[n * 7] = '\0';
    s_expect_error(fd, braces, "101:6: nesting deeper than 100 levels");
    free(braces);
}

static void test_pbtxt_fails_savedmodel_as_graphdef(void **state)
{
    (void)state;
    size_t len;
    char *text = s_read_tf("batch_use_same_function__saved_model.pbtxt", &len);
    s_expect_error(S_GRAPH, text, "17:1: unknown field 'meta_graphs' in tensorflow.GraphDef");
    free(text);
}

static void test_pbtxt_fails_malformed_graph_clearly(void **state)
{
    (void)state;
    size_t len;
    char *text = s_read_tf("graph-malformed.pbtxt", &len);
    s_expect_error(S_GRAPH, text, "3:1: unknown field 'this' in tensorflow.GraphDef");
    free(text);
}

/* ---- writing ---- */

static void test_pbtxt_writes_tensorflow_layout(void **state)
{
    (void)state;
    Tensorflow__GraphDef *g = s_graph(s_const_node);
    char *text = s_format(&g->base);
    assert_string_equal(text, s_const_node);
    free(text);
    s_free(g);
    /* Fields come out in field-number order whatever order they came in. */
    g = s_graph("versions { producer: 3 } library { } node { op: \"B\" input: 'x' name: \"a\" }");
    text = s_format(&g->base);
    assert_string_equal(text, "node {\n"
                              "  name: \"a\"\n"
                              "  op: \"B\"\n"
                              "  input: \"x\"\n"
                              "}\n"
                              "library {\n"
                              "}\n"
                              "versions {\n"
                              "  producer: 3\n"
                              "}\n");
    free(text);
    s_free(g);
}

static void test_pbtxt_writes_escapes_and_shortest_floats(void **state)
{
    (void)state;
    Tensorflow__TensorProto *t = (Tensorflow__TensorProto *)s_parse_ok(
        &tensorflow__tensor_proto__descriptor,
        "float_val: [0.1, 1e-3, -2.5, 1.0, 3.4028235e38, 1e-45, inf, -inf, nan, 100000000, "
        "0.30000001192092896]\n"
        "double_val: [0.1, 0.3333333333333333, 1e300, -0.5]\n"
        "string_val: \"a\\n\\t\\r\\\"'\\\\\\001\\177\\377 ~\"\n");
    char *text = s_format(&t->base);
    assert_string_equal(text, "float_val: 0.1\n"
                              "float_val: 0.001\n"
                              "float_val: -2.5\n"
                              "float_val: 1\n"
                              "float_val: 3.4028235e+38\n"
                              "float_val: 1.4013e-45\n"
                              "float_val: inf\n"
                              "float_val: -inf\n"
                              "float_val: nan\n"
                              "float_val: 1e+08\n"
                              "float_val: 0.3\n"
                              "double_val: 0.1\n"
                              "double_val: 0.3333333333333333\n"
                              "double_val: 1e+300\n"
                              "double_val: -0.5\n"
                              "string_val: \"a\\n\\t\\r\\\"\\'\\\\\\001\\177\\377 ~\"\n");
    free(text);
    free(s_round_trip(&t->base));
    s_free(t);
}

static void test_pbtxt_writes_set_oneof_member_even_when_zero(void **state)
{
    (void)state;
    Tensorflow__GraphDef *g = s_graph("node { attr { key: \"i\" value { i: 0 } } "
                                      "attr { key: \"b\" value { b: false } } "
                                      "attr { key: \"s\" value { s: \"\" } } "
                                      "attr { key: \"\" value { } } }\n"
                                      "versions { producer: 0 min_consumer: 5 }\n"
                                      "version: 0\n");
    char *text = s_round_trip(&g->base);
    assert_string_equal(text, "node {\n"
                              "  attr {\n"
                              "    key: \"i\"\n"
                              "    value {\n"
                              "      i: 0\n"
                              "    }\n"
                              "  }\n"
                              "  attr {\n"
                              "    key: \"b\"\n"
                              "    value {\n"
                              "      b: false\n"
                              "    }\n"
                              "  }\n"
                              "  attr {\n"
                              "    key: \"s\"\n"
                              "    value {\n"
                              "      s: \"\"\n"
                              "    }\n"
                              "  }\n"
                              "  attr {\n"
                              "    value {\n"
                              "    }\n"
                              "  }\n"
                              "}\n"
                              "versions {\n"
                              "  min_consumer: 5\n"
                              "}\n");
    free(text);
    s_free(g);
}

/* The parsed message has the layout protobuf-c's own unpacker produces:
 * packing it and unpacking the bytes gives a message that prints and packs
 * the same. */
static void test_pbtxt_matches_protobuf_c_unpack(void **state)
{
    (void)state;
    size_t len;
    char *text = s_read_tf("graph-1383300d74bd0b22.pbtxt", &len);
    ProtobufCMessage *m = NULL;
    zf_status_t s = zf_pbtxt_parse(S_GRAPH, text, len, &m);
    assert_true(zf_ok(s));
    size_t packed_len;
    uint8_t *packed = s_pack(m, &packed_len);
    ProtobufCMessage *u = protobuf_c_message_unpack(S_GRAPH, NULL, packed_len, packed);
    assert_non_null(u);
    s_assert_same_message(m, u);
    char *a = s_format(m), *b = s_format(u);
    assert_string_equal(a, b);
    free(a);
    free(b);
    free(packed);
    s_free(u);
    s_free(m);
    free(text);
}

/* Unknown fields (from binary input) have no text form; they are left out. */
static void test_pbtxt_writer_skips_unknown_fields(void **state)
{
    (void)state;
    /* versions { producer: 5 } followed by field 99 (varint 1), unknown. */
    static const uint8_t wire[] = {0x22, 0x02, 0x08, 0x05, 0x98, 0x06, 0x01};
    ProtobufCMessage *m = protobuf_c_message_unpack(S_GRAPH, NULL, sizeof wire, wire);
    assert_non_null(m);
    assert_int_equal(m->n_unknown_fields, 1);
    char *text = s_format(m);
    assert_string_equal(text, "versions {\n  producer: 5\n}\n");
    free(text);
    s_free(m);
}

/* ---- proto2 semantics, on a hand-built descriptor ---- */

/* Our schemas are all proto3; this message covers what they lack: has_ flags,
 * a required field, a NULL-default optional string, sint32 and sfixed64. */
typedef struct s_p2 {
    ProtobufCMessage base;
    int32_t id;  /* required int32 id = 1 */
    char *label; /* optional string label = 2 */
    protobuf_c_boolean has_blob;
    ProtobufCBinaryData blob; /* optional bytes blob = 3 */
    protobuf_c_boolean has_score;
    double score; /* optional double score = 4 */
    size_t n_deltas;
    int32_t *deltas; /* repeated sint32 deltas = 5 */
    protobuf_c_boolean has_big;
    int64_t big;    /* optional sfixed64 big = 6 */
    float ratio;    /* float ratio = 7 (no presence, as in proto3) */
    uint32_t small; /* fixed32 small = 8 (no presence) */
} s_p2_t;

static void s_p2_init(ProtobufCMessage *m);

static const ProtobufCFieldDescriptor s_p2_fields[] = {
    {"id", 1, PROTOBUF_C_LABEL_REQUIRED, PROTOBUF_C_TYPE_INT32, 0, offsetof(s_p2_t, id), NULL, NULL,
     0, 0, NULL, NULL},
    {"label", 2, PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_STRING, 0, offsetof(s_p2_t, label),
     NULL, NULL, 0, 0, NULL, NULL},
    {"blob", 3, PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_BYTES, offsetof(s_p2_t, has_blob),
     offsetof(s_p2_t, blob), NULL, NULL, 0, 0, NULL, NULL},
    {"score", 4, PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_DOUBLE, offsetof(s_p2_t, has_score),
     offsetof(s_p2_t, score), NULL, NULL, 0, 0, NULL, NULL},
    {"deltas", 5, PROTOBUF_C_LABEL_REPEATED, PROTOBUF_C_TYPE_SINT32, offsetof(s_p2_t, n_deltas),
     offsetof(s_p2_t, deltas), NULL, NULL, 0, 0, NULL, NULL},
    {"big", 6, PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_SFIXED64, offsetof(s_p2_t, has_big),
     offsetof(s_p2_t, big), NULL, NULL, 0, 0, NULL, NULL},
    {"ratio", 7, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_FLOAT, 0, offsetof(s_p2_t, ratio), NULL,
     NULL, 0, 0, NULL, NULL},
    {"small", 8, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_FIXED32, 0, offsetof(s_p2_t, small), NULL,
     NULL, 0, 0, NULL, NULL},
};
static const unsigned s_p2_by_name[] = {5, 2, 4, 0, 1, 6, 3, 7};
static const ProtobufCIntRange s_p2_ranges[] = {{1, 0}, {0, 8}};
static const ProtobufCMessageDescriptor s_p2_desc = {PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
                                                     "test.P2",
                                                     "P2",
                                                     "Test__P2",
                                                     "test",
                                                     sizeof(s_p2_t),
                                                     8,
                                                     s_p2_fields,
                                                     s_p2_by_name,
                                                     1,
                                                     s_p2_ranges,
                                                     s_p2_init,
                                                     NULL,
                                                     NULL,
                                                     NULL};

static void s_p2_init(ProtobufCMessage *m)
{
    memset(m, 0, sizeof(s_p2_t));
    m->descriptor = &s_p2_desc;
}

static void test_pbtxt_handles_proto2_presence_and_required_fields(void **state)
{
    (void)state;
    s_p2_t *p = (s_p2_t *)s_parse_ok(&s_p2_desc, "id: 7 label: \"x\" blob: \"\\001\" score: 0 "
                                                 "deltas: [-1, 2147483647] big: -5 ratio: 0 "
                                                 "small: 0xffffffff");
    assert_int_equal(p->id, 7);
    assert_string_equal(p->label, "x");
    assert_true(p->has_blob && p->blob.len == 1 && p->blob.data[0] == 1);
    assert_true(p->has_score && p->score == 0); /* present although zero */
    assert_int_equal(p->n_deltas, 2);
    assert_int_equal(p->deltas[0], -1);
    assert_true(p->has_big && p->big == -5);
    assert_true(p->small == UINT32_MAX);
    char *text = s_round_trip(&p->base);
    assert_string_equal(text, "id: 7\n"
                              "label: \"x\"\n"
                              "blob: \"\\001\"\n"
                              "score: 0\n"
                              "deltas: -1\n"
                              "deltas: 2147483647\n"
                              "big: -5\n"
                              "small: 4294967295\n");
    free(text);
    /* protobuf-c's unpacker agrees on the layout. */
    size_t len;
    uint8_t *wire = s_pack(&p->base, &len);
    ProtobufCMessage *u = protobuf_c_message_unpack(&s_p2_desc, NULL, len, wire);
    assert_non_null(u);
    s_assert_same_message(&p->base, u);
    free(wire);
    s_free(u);
    s_free(p);

    p = (s_p2_t *)s_parse_ok(&s_p2_desc, "id: 0");
    assert_null(p->label);
    assert_false(p->has_blob || p->has_score || p->has_big);
    text = s_round_trip(&p->base);
    assert_string_equal(text, "id: 0\n");
    free(text);
    s_free(p);

    s_expect_error(&s_p2_desc, "label: \"x\"", "1:11: missing required field 'id' in test.P2");
    s_expect_error(&s_p2_desc, "id: 1 deltas: 2147483648",
                   "1:15: integer 2147483648 is out of range for sint32 field 'deltas'");
    s_expect_error(&s_p2_desc, "id: 1 big: 9223372036854775808", "out of range for sfixed64");
    s_expect_error(&s_p2_desc, "id: 1 small: 4294967296", "out of range for fixed32");
}

/* ---- real graphs ---- */

static int s_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Parses every *.pbtxt in dir as a GraphDef; those that load must round trip
 * to identical bytes, the others must fail with a positioned message. */
static void s_round_trip_dir(const char *dir, int *loaded, int *failed, char *failures,
                             size_t failures_cap)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256) {
        size_t l = strlen(e->d_name);
        if (l > 6 && strcmp(e->d_name + l - 6, ".pbtxt") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], s_cmp_names);
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len;
        char *text = s_read_file(path, &len);
        assert_non_null(text);
        ProtobufCMessage *m = NULL;
        zf_status_t s = zf_pbtxt_parse(S_GRAPH, text, len, &m);
        if (zf_ok(s)) {
            (*loaded)++;
            char *out = s_round_trip(m);
            ProtobufCMessage *again = s_parse_ok(S_GRAPH, out);
            char *out2 = s_format(again);
            assert_string_equal(out, out2); /* text -> msg -> text is stable */
            free(out2);
            free(out);
            s_free(again);
            s_free(m);
        } else {
            (*failed)++;
            assert_null(m);
            size_t used = strlen(failures);
            snprintf(failures + used, failures_cap - used, "%s: %s\n", names[i], zf_status_msg(&s));
            zf_status_clear(&s);
        }
        free(text);
        free(names[i]);
    }
}

static void test_pbtxt_round_trips_every_tensorflow_graph(void **state)
{
    (void)state;
    int loaded = 0, failed = 0;
    char failures[4096] = "";
    s_round_trip_dir(ZF_TF_DATA_DIR, &loaded, &failed, failures, sizeof failures);
    print_message("loaded %d TensorFlow graphs; failed %d:\n%s", loaded, failed, failures);
    /* All but the SavedModel wrapper and the deliberately malformed file. */
    assert_int_equal(loaded, 34);
    assert_int_equal(failed, 2);
    assert_non_null(strstr(failures, "batch_use_same_function__saved_model.pbtxt: 17:1: unknown "
                                     "field 'meta_graphs' in tensorflow.GraphDef"));
    assert_non_null(strstr(failures, "graph-malformed.pbtxt: 3:1: unknown field 'this'"));

    /* Our own test data, when there is any, must load or fail cleanly. */
    int own_loaded = 0, own_failed = 0;
    char own_failures[4096] = "";
    s_round_trip_dir(ZF_TEST_DATA_DIR, &own_loaded, &own_failed, own_failures, sizeof own_failures);
    print_message("tests/data: loaded %d, failed %d\n%s", own_loaded, own_failed, own_failures);
}

static void test_pbtxt_fills_function_library(void **state)
{
    (void)state;
    Tensorflow__GraphDef *g = s_graph("library {\n"
                                      "  function {\n"
                                      "    signature {\n"
                                      "      name: \"test_fn\"\n"
                                      "      input_arg { name: \"a\" type: DT_FLOAT }\n"
                                      "      output_arg { name: \"d\" type_attr: \"T\" }\n"
                                      "      control_output: \"must_execute\"\n"
                                      "      is_stateful: true\n"
                                      "    }\n"
                                      "    node_def { name: \"b\" op: \"Neg\" input: \"a\" }\n"
                                      "    ret { key: \"d\" value: \"b:y:0\" }\n"
                                      "    control_ret { key: \"must_execute\" value: \"b\" }\n"
                                      "    arg_attr { key: 0 value { attr { key: \"_a\" value { "
                                      "i: 1 } } } }\n"
                                      "    resource_arg_unique_id { key: 1 value: 2 }\n"
                                      "  }\n"
                                      "  gradient { function_name: \"f\" gradient_func: \"g\" }\n"
                                      "}\n");
    const Tensorflow__FunctionDefLibrary *lib = g->library;
    assert_non_null(lib);
    assert_int_equal(lib->n_function, 1);
    const Tensorflow__FunctionDef *fn = lib->function[0];
    assert_string_equal(fn->signature->name, "test_fn");
    assert_int_equal(fn->signature->n_input_arg, 1);
    assert_string_equal(fn->signature->input_arg[0]->name, "a");
    assert_int_equal(fn->signature->input_arg[0]->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    assert_string_equal(fn->signature->output_arg[0]->type_attr, "T");
    assert_string_equal(fn->signature->control_output[0], "must_execute");
    assert_true(fn->signature->is_stateful);
    assert_int_equal(fn->n_node_def, 1);
    assert_string_equal(fn->node_def[0]->op, "Neg");
    assert_int_equal(fn->n_ret, 1);
    assert_string_equal(fn->ret[0]->key, "d");
    assert_string_equal(fn->ret[0]->value, "b:y:0");
    assert_string_equal(fn->control_ret[0]->value, "b");
    assert_int_equal(fn->n_arg_attr, 1);
    assert_int_equal(fn->arg_attr[0]->key, 0);
    assert_int_equal(fn->arg_attr[0]->value->attr[0]->value->i, 1);
    assert_int_equal(fn->resource_arg_unique_id[0]->value, 2);
    assert_int_equal(lib->n_gradient, 1);
    assert_string_equal(lib->gradient[0]->gradient_func, "g");
    free(s_round_trip(&g->base));
    s_free(g);

    /* And from a real file. */
    size_t len;
    char *text = s_read_tf("graph-function-control-ret-diff-island.pbtxt", &len);
    g = (Tensorflow__GraphDef *)s_parse_ok(S_GRAPH, text);
    assert_non_null(g->library);
    assert_int_equal(g->library->n_function, 1);
    fn = g->library->function[0];
    assert_string_equal(fn->signature->name, "test_fn");
    assert_true(fn->n_node_def >= 1);
    assert_string_equal(fn->node_def[0]->name, "b");
    assert_string_equal(fn->signature->control_output[0], "must_execute");
    s_free(g);
    free(text);
}

/* ---- robustness ---- */

static void test_pbtxt_survives_truncation_at_every_prefix(void **state)
{
    (void)state;
    const char *files[] = {"add.pbtxt", "graph-1383300d74bd0b22.pbtxt",
                           "functional-while-ops.pbtxt", "graph-func-attr.pbtxt"};
    int ok = 0, errors = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t len;
        char *text = s_read_tf(files[f], &len);
        size_t limit = len < 6000 ? len : 6000;
        for (size_t cut = 0; cut <= limit; cut++) {
            if (s_parse_anything(text, cut))
                ok++;
            else
                errors++;
        }
        free(text);
    }
    print_message("prefixes: %d parsed, %d rejected\n", ok, errors);
    assert_true(ok > 0 && errors > 0);
}

static void test_pbtxt_survives_random_garbage(void **state)
{
    (void)state;
    static const char *const tokens[] = {"node",      "attr",        "key",
                                         "value",     "list",        "i",
                                         "f",         "s",           "type",
                                         "shape",     "dim",         "size",
                                         "tensor",    "float_val",   "tensor_content",
                                         "name",      "op",          "input",
                                         "versions",  "library",     "function",
                                         "signature", "DT_FLOAT",    "{",
                                         "}",         "<",           ">",
                                         "[",         "]",           ":",
                                         ";",         ",",           "\"",
                                         "'",         "\\",          "\\x",
                                         "\\u00",     "\\3",         "#",
                                         "\n",        " ",           "-",
                                         ".",         "0x",          "1",
                                         "0",         "9",           "e",
                                         "inf",       "nan",         "true",
                                         "producer",  "placeholder", "func",
                                         "b",         "\"a\"",       "1.5",
                                         "\xff",      "\0",          "unknown_rank",
                                         "half_val",  "int64_val",   "bad_consumers",
                                         "07",        "1e5"};
    size_t n_tokens = sizeof tokens / sizeof tokens[0];
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    char buf[512];
    int ok = 0;
    for (int iter = 0; iter < 30000; iter++) {
        size_t len = 0, want = s_rand(&rng) % 400;
        while (len < want) {
            if (s_rand(&rng) % 4 == 0) {
                buf[len++] = (char)(s_rand(&rng) & 0xff);
                continue;
            }
            const char *t = tokens[s_rand(&rng) % n_tokens];
            size_t tl = t[0] ? strlen(t) : 1;
            if (len + tl > sizeof buf) break;
            memcpy(buf + len, t, tl);
            len += tl;
        }
        ok += s_parse_anything(buf, len);
    }
    /* Mutations of a real graph: most stay close to valid. */
    size_t flen;
    char *file = s_read_tf("shape-attrs.pbtxt", &flen);
    char *mut = malloc(flen + 64);
    assert_non_null(mut);
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(mut, file, flen);
        size_t mlen = flen;
        for (int k = s_rand(&rng) % 4; k >= 0; k--) {
            size_t at = s_rand(&rng) % mlen;
            switch (s_rand(&rng) % 3) {
            case 0: mut[at] = (char)(s_rand(&rng) & 0xff); break;
            case 1: memmove(mut + at, mut + at + 1, mlen - at - 1), mlen--; break;
            default: mut[at] = "{}<>[]:\"'\\#,;-"[s_rand(&rng) % 14]; break;
            }
        }
        ok += s_parse_anything(mut, mlen);
    }
    print_message("garbage: %d inputs parsed\n", ok);
    free(mut);
    free(file);
}

/* Large inputs go through in linear time: a quadratic step would take
 * minutes here, not a fraction of a second. */
static void test_pbtxt_handles_large_inputs_in_linear_time(void **state)
{
    (void)state;
    const size_t n = 300000;
    size_t cap = n * 32 + 256;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = (size_t)snprintf(text, cap, "float_val: [");
    for (size_t i = 0; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "%zu.5, ", i);
    len += (size_t)snprintf(text + len, cap - len, "1]\n");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "int_val: %zu\n", i);
    len += (size_t)snprintf(text + len, cap - len, "tensor_content: \"");
    size_t body = len;
    while (len < body + n * 4) len += (size_t)snprintf(text + len, cap - len, "\\377");
    len += (size_t)snprintf(text + len, cap - len, "\"\n");
    clock_t start = clock();
    ProtobufCMessage *m = NULL;
    zf_status_t s = zf_pbtxt_parse(&tensorflow__tensor_proto__descriptor, text, len, &m);
    assert_true(zf_ok(s));
    char *out = s_format(m);
    double secs = (double)(clock() - start) / CLOCKS_PER_SEC;
    const Tensorflow__TensorProto *t = (const Tensorflow__TensorProto *)m;
    assert_int_equal(t->n_float_val, n + 1);
    assert_true(t->float_val[n - 1] == (float)(n - 1) + 0.5f);
    assert_int_equal(t->n_int_val, n);
    assert_int_equal(t->int_val[n - 1], (int32_t)(n - 1));
    assert_int_equal(t->tensor_content.len, n);
    print_message("parsed and wrote %zu bytes in %.3f s\n", len, secs);
    assert_true(secs < 20.0);
    free(out);
    s_free(m);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pbtxt_reads_names_ops_and_inputs),
        cmocka_unit_test(test_pbtxt_reads_map_entries),
        cmocka_unit_test(test_pbtxt_keeps_the_last_value_of_a_repeated_map_key),
        cmocka_unit_test(test_pbtxt_collapses_repeated_keys_of_a_long_map),
        cmocka_unit_test(test_pbtxt_reads_every_attr_value_kind),
        cmocka_unit_test(test_pbtxt_reads_shape_dims),
        cmocka_unit_test(test_pbtxt_reads_tensor_values_and_escaped_content),
        cmocka_unit_test(test_pbtxt_accepts_every_message_syntax),
        cmocka_unit_test(test_pbtxt_reads_repeated_fields_as_lists),
        cmocka_unit_test(test_pbtxt_reads_enums_by_name_and_number),
        cmocka_unit_test(test_pbtxt_reads_integers_in_every_base),
        cmocka_unit_test(test_pbtxt_rejects_integers_out_of_range),
        cmocka_unit_test(test_pbtxt_reads_floats_in_every_form),
        cmocka_unit_test(test_pbtxt_reads_bools_in_every_spelling),
        cmocka_unit_test(test_pbtxt_reads_string_escapes_and_concatenation),
        cmocka_unit_test(test_pbtxt_parses_empty_input_to_empty_message),
        cmocka_unit_test(test_pbtxt_rejects_null_arguments),
        cmocka_unit_test(test_pbtxt_reports_unknown_field_with_position),
        cmocka_unit_test(test_pbtxt_reports_unknown_enum_value),
        cmocka_unit_test(test_pbtxt_reports_unterminated_string),
        cmocka_unit_test(test_pbtxt_reports_invalid_escape),
        cmocka_unit_test(test_pbtxt_reports_missing_close_brace),
        cmocka_unit_test(test_pbtxt_reports_syntax_errors),
        cmocka_unit_test(test_pbtxt_rejects_non_repeated_field_set_twice),
        cmocka_unit_test(test_pbtxt_rejects_two_members_of_one_oneof),
        cmocka_unit_test(test_pbtxt_rejects_nesting_deeper_than_100),
        cmocka_unit_test(test_pbtxt_fails_savedmodel_as_graphdef),
        cmocka_unit_test(test_pbtxt_fails_malformed_graph_clearly),
        cmocka_unit_test(test_pbtxt_writes_tensorflow_layout),
        cmocka_unit_test(test_pbtxt_writes_escapes_and_shortest_floats),
        cmocka_unit_test(test_pbtxt_writes_set_oneof_member_even_when_zero),
        cmocka_unit_test(test_pbtxt_matches_protobuf_c_unpack),
        cmocka_unit_test(test_pbtxt_writer_skips_unknown_fields),
        cmocka_unit_test(test_pbtxt_handles_proto2_presence_and_required_fields),
        cmocka_unit_test(test_pbtxt_round_trips_every_tensorflow_graph),
        cmocka_unit_test(test_pbtxt_fills_function_library),
        cmocka_unit_test(test_pbtxt_survives_truncation_at_every_prefix),
        cmocka_unit_test(test_pbtxt_survives_random_garbage),
        cmocka_unit_test(test_pbtxt_handles_large_inputs_in_linear_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
