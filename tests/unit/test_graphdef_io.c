/* Tests for common/graphdef_io: binary and text GraphDefs, round trips of
 * every TensorFlow test graph, and malformed input. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/graphdef_io.h"

static const char s_two_nodes[] = "# a comment line\n"
                                  "node { name: \"a\" op: \"Const\" attr { key: \"dtype\" "
                                  "value { type: DT_FLOAT } } }\n"
                                  "node { name: \"b\" op: \"Identity\" input: \"a\" }\n"
                                  "versions { producer: 27 }\n";

static uint8_t *s_pack(const Tensorflow__GraphDef *gd, size_t *len)
{
    *len = tensorflow__graph_def__get_packed_size(gd);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    tensorflow__graph_def__pack(gd, buf);
    return buf;
}

static void s_assert_same_message(const Tensorflow__GraphDef *a, const Tensorflow__GraphDef *b)
{
    size_t la, lb;
    uint8_t *pa = s_pack(a, &la), *pb = s_pack(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(pa, pb, la);
    free(pa);
    free(pb);
}

static void test_graphdef_reads_text_and_binary_forms_of_one_graph(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(s_two_nodes, strlen(s_two_nodes), ZF_FORMAT_AUTO, &gd);
    assert_true(zf_ok(s));
    assert_int_equal(gd->n_node, 2);
    assert_string_equal(gd->node[1]->name, "b");
    assert_string_equal(gd->node[1]->input[0], "a");
    assert_int_equal(gd->node[0]->attr[0]->value->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    assert_int_equal(gd->versions->producer, 27);

    void *bin;
    size_t len;
    assert_true(zf_ok(zf_graphdef_write_mem(gd, ZF_FORMAT_PB, &bin, &len)));
    assert_int_equal(zf_graph_format_sniff(bin, len), ZF_FORMAT_PB);
    Tensorflow__GraphDef *back = NULL;
    assert_true(zf_ok(zf_graphdef_read_mem(bin, len, ZF_FORMAT_AUTO, &back)));
    s_assert_same_message(gd, back);
    free(bin);
    zf_graphdef_free(&back);
    zf_graphdef_free(&gd);
    assert_null(gd);
}

/* A binary GraphDef whose node repeats an attr key, written out by hand:
 * node { name: "n" attr { T: type 1 } attr { x: i 5 } attr { T: type 3 } }.
 * Read, the node has T once with the last value (DT_INT32); written back
 * to either format, it says T once. */
static void test_graphdef_binary_keeps_the_last_value_of_a_repeated_attr(void **state)
{
    (void)state;
    static const uint8_t wire[] = {
        0x0a, 0x1e,                                           /* node, 30 bytes */
        0x0a, 0x01, 'n',                                      /* name */
        0x2a, 0x07, 0x0a, 0x01, 'T', 0x12, 0x02, 0x30, 0x01,  /* attr T: type 1 */
        0x2a, 0x07, 0x0a, 0x01, 'x', 0x12, 0x02, 0x18, 0x05,  /* attr x: i 5 */
        0x2a, 0x07, 0x0a, 0x01, 'T', 0x12, 0x02, 0x30, 0x03}; /* attr T: type 3 */
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(wire, sizeof wire, ZF_FORMAT_PB, &gd);
    assert_true(zf_ok(s));
    const Tensorflow__NodeDef *n = gd->node[0];
    assert_int_equal(n->n_attr, 2);
    assert_string_equal(n->attr[0]->key, "x");
    assert_int_equal(n->attr[0]->value->i, 5);
    assert_string_equal(n->attr[1]->key, "T");
    assert_int_equal(n->attr[1]->value->type, TENSORFLOW__DATA_TYPE__DT_INT32);

    void *text;
    size_t len;
    assert_true(zf_ok(zf_graphdef_write_mem(gd, ZF_FORMAT_PBTXT, &text, &len)));
    assert_string_equal(text, "node {\n"
                              "  name: \"n\"\n"
                              "  attr {\n"
                              "    key: \"x\"\n"
                              "    value {\n"
                              "      i: 5\n"
                              "    }\n"
                              "  }\n"
                              "  attr {\n"
                              "    key: \"T\"\n"
                              "    value {\n"
                              "      type: DT_INT32\n"
                              "    }\n"
                              "  }\n"
                              "}\n");
    free(text);
    void *bin;
    assert_true(zf_ok(zf_graphdef_write_mem(gd, ZF_FORMAT_PB, &bin, &len)));
    static const uint8_t once[] = {0x0a, 0x15, 0x0a, 0x01, 'n',  0x2a, 0x07, 0x0a,
                                   0x01, 'x',  0x12, 0x02, 0x18, 0x05, 0x2a, 0x07,
                                   0x0a, 0x01, 'T',  0x12, 0x02, 0x30, 0x03};
    assert_int_equal(len, sizeof once);
    assert_memory_equal(bin, once, sizeof once);
    free(bin);
    zf_graphdef_free(&gd);
}

/* An integer map key left out of one entry and written as 0 in a later one
 * is the same key: library { function { resource_arg_unique_id {
 * value: 5 } resource_arg_unique_id { key: 0 value: 7 } } }. */
static void test_graphdef_binary_integer_keys_left_out_equal_zero(void **state)
{
    (void)state;
    static const uint8_t wire[] = {
        0x12, 0x0c,                        /* library, 12 bytes */
        0x0a, 0x0a,                        /* function, 10 bytes */
        0x42, 0x02, 0x10, 0x05,            /* resource_arg_unique_id { value: 5 } */
        0x42, 0x04, 0x08, 0x00, 0x10, 0x07 /* resource_arg_unique_id { key: 0 value: 7 } */
    };
    Tensorflow__GraphDef *gd = NULL;
    assert_true(zf_ok(zf_graphdef_read_mem(wire, sizeof wire, ZF_FORMAT_PB, &gd)));
    const Tensorflow__FunctionDef *fn = gd->library->function[0];
    assert_int_equal(fn->n_resource_arg_unique_id, 1);
    assert_int_equal(fn->resource_arg_unique_id[0]->key, 0);
    assert_int_equal(fn->resource_arg_unique_id[0]->value, 7);
    zf_graphdef_free(&gd);
}

/* A non-repeated message given twice is merged, maps and all: here the
 * value of a function's arg_attr entry comes twice, each time with attr a
 * (1, then 2), and the merged value has a once, as 2. */
static void test_graphdef_binary_merges_a_message_given_twice_and_collapses_its_map(void **state)
{
    (void)state;
    static const uint8_t wire[] = {
        0x12, 0x1a, /* library, 26 bytes */
        0x0a, 0x18, /* function, 24 bytes */
        0x3a, 0x16, /* arg_attr (key 0), 22 bytes */
        0x12, 0x09, 0x0a, 0x07, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x01, /* value { a: 1 } */
        0x12, 0x09, 0x0a, 0x07, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x02, /* value { a: 2 } */
    };
    Tensorflow__GraphDef *gd = NULL;
    assert_true(zf_ok(zf_graphdef_read_mem(wire, sizeof wire, ZF_FORMAT_PB, &gd)));
    const Tensorflow__FunctionDef *fn = gd->library->function[0];
    assert_int_equal(fn->n_arg_attr, 1);
    const Tensorflow__FunctionDef__ArgAttrs *args = fn->arg_attr[0]->value;
    assert_int_equal(args->n_attr, 1);
    assert_string_equal(args->attr[0]->key, "a");
    assert_int_equal(args->attr[0]->value->i, 2);
    zf_graphdef_free(&gd);
}

/* Builds a node with n attrs k0, k1, ... (attr i holds i), then the attr
 * named again (when again >= 0) with value 1000, packs the graph and reads
 * it back. */
static Tensorflow__GraphDef *s_read_node_with_attrs(int n, int again)
{
    Tensorflow__NodeDef node = TENSORFLOW__NODE_DEF__INIT;
    Tensorflow__NodeDef *nodes[1] = {&node};
    Tensorflow__GraphDef gd = TENSORFLOW__GRAPH_DEF__INIT;
    gd.n_node = 1;
    gd.node = nodes;
    int total = n + (again >= 0);
    Tensorflow__NodeDef__AttrEntry *entries = calloc((size_t)total, sizeof *entries);
    Tensorflow__NodeDef__AttrEntry **ptrs = calloc((size_t)total, sizeof *ptrs);
    Tensorflow__AttrValue *values = calloc((size_t)total, sizeof *values);
    char(*keys)[16] = calloc((size_t)total, sizeof *keys);
    assert_true(entries && ptrs && values && keys);
    for (int i = 0; i < total; i++) {
        int k = i < n ? i : again;
        snprintf(keys[i], sizeof keys[i], "k%d", k);
        tensorflow__node_def__attr_entry__init(&entries[i]);
        tensorflow__attr_value__init(&values[i]);
        values[i].value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
        values[i].i = i < n ? i : 1000;
        entries[i].key = keys[i];
        entries[i].value = &values[i];
        ptrs[i] = &entries[i];
    }
    node.n_attr = (size_t)total;
    node.attr = ptrs;
    size_t len;
    uint8_t *wire = s_pack(&gd, &len);
    Tensorflow__GraphDef *out = NULL;
    assert_true(zf_ok(zf_graphdef_read_mem(wire, len, ZF_FORMAT_PB, &out)));
    free(wire);
    free(entries);
    free(ptrs);
    free(values);
    free(keys);
    return out;
}

/* Maps of every length keep each key once, the last value winning; a map
 * longer than the reader tracks key by key is collapsed all the same. */
static void test_graphdef_binary_collapses_maps_of_every_length(void **state)
{
    (void)state;
    static const int lengths[] = {1, 2, 17, 63, 64, 65, 200};
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        int n = lengths[t];
        Tensorflow__GraphDef *gd = s_read_node_with_attrs(n, -1);
        assert_int_equal(gd->node[0]->n_attr, n);
        for (int i = 0; i < n; i++) assert_int_equal(gd->node[0]->attr[i]->value->i, i);
        zf_graphdef_free(&gd);

        gd = s_read_node_with_attrs(n, n / 2);
        const Tensorflow__NodeDef *node = gd->node[0];
        assert_int_equal(node->n_attr, n);
        char want[16];
        snprintf(want, sizeof want, "k%d", n / 2);
        assert_string_equal(node->attr[n - 1]->key, want);
        assert_int_equal(node->attr[n - 1]->value->i, 1000);
        for (int i = 0; i < n - 1; i++)
            assert_int_equal(node->attr[i]->value->i, i < n / 2 ? i : i + 1);
        zf_graphdef_free(&gd);
    }
}

static void test_graphdef_format_follows_extension(void **state)
{
    (void)state;
    assert_int_equal(zf_graph_format_from_path("x/model.pb"), ZF_FORMAT_PB);
    assert_int_equal(zf_graph_format_from_path("model.pbtxt"), ZF_FORMAT_PBTXT);
    assert_int_equal(zf_graph_format_from_path("model.txt"), ZF_FORMAT_PBTXT);
    assert_int_equal(zf_graph_format_from_path("model"), ZF_FORMAT_AUTO);
    zf_graph_format_t f;
    assert_true(zf_ok(zf_graph_format_parse("pbtxt", &f)));
    assert_int_equal(f, ZF_FORMAT_PBTXT);
    zf_status_t s = zf_graph_format_parse("json", &f);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "unknown graph format 'json'"));
    zf_status_clear(&s);
}

static void test_graphdef_missing_file_is_not_found(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_file("/nonexistent/zflow.pb", ZF_FORMAT_AUTO, &gd);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_non_null(strstr(zf_status_msg(&s), "cannot open '/nonexistent/zflow.pb'"));
    assert_null(gd);
    zf_status_clear(&s);
}

static void s_expect_pb_error(const uint8_t *data, size_t len, const char *needle)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(data, len, ZF_FORMAT_PB, &gd);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    if (!strstr(zf_status_msg(&s), needle))
        fail_msg("expected '%s' in '%s'", needle, zf_status_msg(&s));
    assert_null(gd);
    zf_status_clear(&s);
}

static void test_graphdef_rejects_truncated_binary_at_every_length(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    assert_true(
        zf_ok(zf_graphdef_read_mem(s_two_nodes, strlen(s_two_nodes), ZF_FORMAT_PBTXT, &gd)));
    size_t len;
    uint8_t *buf = s_pack(gd, &len);
    zf_graphdef_free(&gd);
    int rejected = 0;
    for (size_t cut = 1; cut < len; cut++) {
        Tensorflow__GraphDef *part = NULL;
        zf_status_t s = zf_graphdef_read_mem(buf, cut, ZF_FORMAT_PB, &part);
        if (zf_ok(s)) {
            zf_graphdef_free(&part); /* a cut on a field boundary is a valid shorter graph */
        } else {
            assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
            assert_non_null(strstr(zf_status_msg(&s), "malformed binary GraphDef"));
            rejected++;
            zf_status_clear(&s);
        }
    }
    assert_true(rejected > (int)len / 2);
    free(buf);
}

static void test_graphdef_rejects_absurd_declared_length(void **state)
{
    (void)state;
    /* field 1 (node), wire type 2, length 2^40 */
    const uint8_t data[] = {0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 'x'};
    s_expect_pb_error(data, sizeof data, "field 1 at byte 0 declares 1099511627776 bytes");
}

static void test_graphdef_rejects_bad_wire_type(void **state)
{
    (void)state;
    const uint8_t data[] = {0x0f, 0x00}; /* field 1, wire type 7 */
    s_expect_pb_error(data, sizeof data, "invalid wire type 7 (field 1) at byte 0");
}

/* Packed repeated scalars are checked as protobuf-c's unpack reads them:
 * whole fixed-width values and complete varints pass (and unpack), a
 * partial value or an unterminated or overlong varint is refused, naming
 * the field, and unpack refuses it too. */
static void test_proto_check_wire_reads_packed_values_as_unpack_does(void **state)
{
    (void)state;
    static const struct {
        uint8_t bytes[16];
        size_t len;
        const char *error; /* NULL: well-formed */
    } cases[] = {
        {{0x2a, 0x08, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}, 10, NULL}, /* float_val 1, 2 */
        {{0x3a, 0x03, 0x01, 0x81, 0x01}, 5, NULL},                 /* int_val 1, 129 */
        {{0x5a, 0x02, 0x02, 0x05}, 4, NULL}, /* bool_val: any varint is a bool */
        {{0x2a, 0x03, 1, 2, 3},
         5,
         "packed field 'float_val' (5) of tensorflow.TensorProto at byte 0 holds 3 bytes, not a "
         "whole number of 4-byte values"},
        {{0x32, 0x04, 0, 0, 0, 0},
         6,
         "packed field 'double_val' (6) of tensorflow.TensorProto at byte 0 holds 4 bytes, not a "
         "whole number of 8-byte values"},
        {{0x08, 0x01, 0x3a, 0x02, 0x01, 0x81},
         6,
         "packed field 'int_val' (7) of tensorflow.TensorProto at byte 2 holds a truncated "
         "varint"},
        {{0x52, 0x0b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
         13,
         "packed field 'int64_val' (10) of tensorflow.TensorProto at byte 0 holds a too long "
         "varint"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        zf_status_t s = zf_proto_check_wire(&tensorflow__tensor_proto__descriptor, cases[k].bytes,
                                            cases[k].len);
        Tensorflow__TensorProto *t =
            tensorflow__tensor_proto__unpack(NULL, cases[k].len, cases[k].bytes);
        if (!cases[k].error) {
            if (!zf_ok(s)) fail_msg("case %zu: %s", k, zf_status_msg(&s));
            assert_non_null(t);
        } else {
            assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
            if (strcmp(zf_status_msg(&s), cases[k].error) != 0)
                fail_msg("case %zu: '%s', not '%s'", k, zf_status_msg(&s), cases[k].error);
            assert_null(t);
        }
        if (t) tensorflow__tensor_proto__free_unpacked(t, NULL);
        zf_status_clear(&s);
    }
}

/* Returns a new buffer holding field `field` (wire type 2) around payload. */
static uint8_t *s_wrap(int field, uint8_t *payload, size_t len, size_t *out_len)
{
    uint8_t *out = malloc(len + 16);
    assert_non_null(out);
    size_t n = 0;
    out[n++] = (uint8_t)(field << 3 | 2);
    for (size_t v = len;; v >>= 7) {
        out[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80) break;
    }
    if (len) memcpy(out + n, payload, len);
    free(payload);
    *out_len = n + len;
    return out;
}

/* A uint32 map key keeps the low 32 bits of its varint: keys 1 and
 * 2^32 + 1 are one key, the later value kept. */
static void test_graphdef_collapses_uint32_map_keys_as_unpacked(void **state)
{
    (void)state;
    static const uint8_t pb[] = {
        0x12, 0x12,                   /* GraphDef.library */
        0x0a, 0x10,                   /* FunctionDefLibrary.function */
        0x42, 0x04, 0x08, 0x01, 0x10, /* resource_arg_unique_id {1: 5} */
        0x05, 0x42, 0x08, 0x08, 0x81, /* resource_arg_unique_id {2^32 + 1: 7} */
        0x80, 0x80, 0x80, 0x10, 0x10, 0x07,
    };
    Tensorflow__GraphDef *gd = NULL;
    assert_true(zf_ok(zf_graphdef_read_mem(pb, sizeof pb, ZF_FORMAT_PB, &gd)));
    assert_non_null(gd->library);
    assert_int_equal(gd->library->n_function, 1);
    const Tensorflow__FunctionDef *fn = gd->library->function[0];
    assert_int_equal(fn->n_resource_arg_unique_id, 1);
    assert_int_equal(fn->resource_arg_unique_id[0]->key, 1);
    assert_int_equal(fn->resource_arg_unique_id[0]->value, 7);
    zf_graphdef_free(&gd);
}

static void test_graphdef_rejects_deep_nesting(void **state)
{
    (void)state;
    /* AttrEntry.value(2) -> AttrValue.func(10) -> NameAttrList.attr(2) -> AttrEntry ...,
     * 200 levels deep inside GraphDef.node(1) -> NodeDef.attr(5). protobuf-c
     * would recurse once per level; the wire check refuses first. */
    size_t len = 0;
    uint8_t *msg = NULL;
    for (int i = 0; i < 200; i++) {
        msg = s_wrap(2, msg, len, &len);  /* NameAttrList.attr */
        msg = s_wrap(10, msg, len, &len); /* AttrValue.func */
        msg = s_wrap(2, msg, len, &len);  /* AttrEntry.value */
    }
    msg = s_wrap(5, msg, len, &len); /* NodeDef.attr */
    msg = s_wrap(1, msg, len, &len); /* GraphDef.node */
    s_expect_pb_error(msg, len, "nesting deeper than 100");
    free(msg);
}

static void test_proto_varints_are_written_as_protobuf_reads_them(void **state)
{
    (void)state;
    /* bytes by hand: 7 bits a byte, low first, the top bit set on all but the last */
    const struct {
        uint64_t v;
        size_t n;
        uint8_t bytes[ZF_PROTO_VARINT_MAX];
    } cases[] = {
        {0, 1, {0x00}},
        {1, 1, {0x01}},
        {127, 1, {0x7f}},
        {128, 2, {0x80, 0x01}},
        {300, 2, {0xac, 0x02}},
        {UINT64_MAX, 10, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint8_t buf[ZF_PROTO_VARINT_MAX + 1] = {0};
        buf[0] = 0x10; /* a field 2 varint key, then the value */
        size_t n = zf_proto_put_varint(buf + 1, cases[k].v);
        assert_int_equal(n, cases[k].n);
        assert_memory_equal(buf + 1, cases[k].bytes, n);
        const uint8_t *p = buf;
        zf_proto_field_t f;
        assert_true(zf_proto_next_field(&p, buf + 1 + n, &f));
        assert_int_equal(f.number, 2);
        assert_true(f.value == cases[k].v);
    }
}

static void test_graphdef_survives_random_bytes(void **state)
{
    (void)state;
    uint32_t x = 12345;
    uint8_t buf[512];
    for (int iter = 0; iter < 2000; iter++) {
        size_t len = (size_t)(x % sizeof buf);
        for (size_t i = 0; i < len; i++) {
            x = x * 1664525u + 1013904223u;
            buf[i] = (uint8_t)(x >> 24);
        }
        Tensorflow__GraphDef *gd = NULL;
        zf_status_t s = zf_graphdef_read_mem(buf, len, ZF_FORMAT_PB, &gd);
        if (zf_ok(s)) {
            assert_non_null(gd);
            zf_graphdef_free(&gd);
        } else {
            assert_null(gd);
            assert_true(strlen(zf_status_msg(&s)) > 0);
            zf_status_clear(&s);
        }
    }
}

typedef struct {
    int loaded, failed;
} s_tally_t;

/* pbtxt -> message -> pb -> message -> pbtxt -> message: all equal. */
static void s_round_trip_file(const char *path, s_tally_t *tally)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_file(path, ZF_FORMAT_AUTO, &gd);
    if (!zf_ok(s)) {
        /* Must be a clear error naming the file, never a crash. */
        assert_non_null(strstr(zf_status_msg(&s), path));
        printf("  does not load: %s\n", zf_status_msg(&s));
        tally->failed++;
        zf_status_clear(&s);
        return;
    }
    void *bin, *text;
    size_t bin_len, text_len;
    assert_true(zf_ok(zf_graphdef_write_mem(gd, ZF_FORMAT_PB, &bin, &bin_len)));
    Tensorflow__GraphDef *from_bin = NULL, *from_text = NULL;
    assert_true(zf_ok(zf_graphdef_read_mem(bin, bin_len, ZF_FORMAT_PB, &from_bin)));
    assert_true(zf_ok(zf_graphdef_write_mem(from_bin, ZF_FORMAT_PBTXT, &text, &text_len)));
    s = zf_graphdef_read_mem(text, text_len, ZF_FORMAT_PBTXT, &from_text);
    if (!zf_ok(s)) fail_msg("%s: re-reading our own text failed: %s", path, zf_status_msg(&s));
    s_assert_same_message(gd, from_bin);
    s_assert_same_message(gd, from_text);
    free(bin);
    free(text);
    zf_graphdef_free(&from_bin);
    zf_graphdef_free(&from_text);
    zf_graphdef_free(&gd);
    tally->loaded++;
}

static s_tally_t s_round_trip_dir(const char *dir)
{
    s_tally_t tally = {0, 0};
    DIR *d = opendir(dir);
    if (!d) return tally;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 ||
            (strcmp(e->d_name + n - 6, ".pbtxt") != 0 && strcmp(e->d_name + n - 3, ".pb") != 0))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        s_round_trip_file(path, &tally);
    }
    closedir(d);
    return tally;
}

static void test_graphdef_round_trips_every_tensorflow_test_graph(void **state)
{
    (void)state;
    if (access(ZF_TF_DATA_DIR, R_OK) != 0) {
        print_message("TensorFlow test graphs not found at %s\n", ZF_TF_DATA_DIR);
        skip();
    }
    s_tally_t t = s_round_trip_dir(ZF_TF_DATA_DIR);
    printf("  TensorFlow graphs: %d load and round-trip, %d fail with an error\n", t.loaded,
           t.failed);
    /* graph-malformed.pbtxt (invalid on purpose) and the SavedModel wrapper
     * (not a GraphDef) are the two that must fail. */
    assert_int_equal(t.failed, 2);
    assert_true(t.loaded >= 30);
}

static void test_graphdef_round_trips_our_test_graphs(void **state)
{
    (void)state;
    s_tally_t t = s_round_trip_dir(ZF_TEST_DATA_DIR);
    assert_int_equal(t.failed, 0);
    assert_true(t.loaded >= 1);
}

/* tests/data/reference holds the TensorFlow test graphs encoded by Google's
 * protobuf (scripts/make-reference-pb.sh). Reading the binary must work, and
 * our text parser must produce the same message. */
static void test_graphdef_matches_reference_binaries_from_googles_protobuf(void **state)
{
    (void)state;
    if (access(ZF_TF_DATA_DIR, R_OK) != 0) {
        print_message("TensorFlow test graphs not found at %s\n", ZF_TF_DATA_DIR);
        skip();
    }
    DIR *d = opendir(ZF_TEST_DATA_DIR "/reference");
    assert_non_null(d);
    int compared = 0, identical = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".pb") != 0) continue;
        char bin_path[4096], text_path[4096];
        snprintf(bin_path, sizeof bin_path, "%s/reference/%s", ZF_TEST_DATA_DIR, e->d_name);
        snprintf(text_path, sizeof text_path, "%s/%.*s.pbtxt", ZF_TF_DATA_DIR, (int)(n - 3),
                 e->d_name);
        Tensorflow__GraphDef *from_bin = NULL, *from_text = NULL;
        zf_status_t s = zf_graphdef_read_file(bin_path, ZF_FORMAT_AUTO, &from_bin);
        if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
        s = zf_graphdef_read_file(text_path, ZF_FORMAT_AUTO, &from_text);
        if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
        /* Byte equality holds except where Google writes zero-valued map
         * keys and values that protobuf-c omits; both decode the same. */
        char *ref;
        size_t ref_len, ours_len;
        assert_true(zf_ok(zf_read_file(bin_path, 1 << 24, &ref, &ref_len)));
        uint8_t *ours = s_pack(from_text, &ours_len);
        identical += ours_len == ref_len && memcmp(ours, ref, ref_len) == 0;
        s_assert_same_message(from_bin, from_text);
        free(ours);
        free(ref);
        zf_graphdef_free(&from_bin);
        zf_graphdef_free(&from_text);
        compared++;
    }
    closedir(d);
    printf("  %d reference binaries decode equal, %d byte-identical\n", compared, identical);
    assert_int_equal(compared, 34);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graphdef_reads_text_and_binary_forms_of_one_graph),
        cmocka_unit_test(test_graphdef_binary_keeps_the_last_value_of_a_repeated_attr),
        cmocka_unit_test(test_graphdef_binary_integer_keys_left_out_equal_zero),
        cmocka_unit_test(test_graphdef_binary_collapses_maps_of_every_length),
        cmocka_unit_test(test_graphdef_binary_merges_a_message_given_twice_and_collapses_its_map),
        cmocka_unit_test(test_graphdef_format_follows_extension),
        cmocka_unit_test(test_graphdef_missing_file_is_not_found),
        cmocka_unit_test(test_graphdef_rejects_truncated_binary_at_every_length),
        cmocka_unit_test(test_graphdef_rejects_absurd_declared_length),
        cmocka_unit_test(test_graphdef_rejects_bad_wire_type),
        cmocka_unit_test(test_graphdef_collapses_uint32_map_keys_as_unpacked),
        cmocka_unit_test(test_proto_check_wire_reads_packed_values_as_unpack_does),
        cmocka_unit_test(test_graphdef_rejects_deep_nesting),
        cmocka_unit_test(test_proto_varints_are_written_as_protobuf_reads_them),
        cmocka_unit_test(test_graphdef_survives_random_bytes),
        cmocka_unit_test(test_graphdef_round_trips_every_tensorflow_test_graph),
        cmocka_unit_test(test_graphdef_round_trips_our_test_graphs),
        cmocka_unit_test(test_graphdef_matches_reference_binaries_from_googles_protobuf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
