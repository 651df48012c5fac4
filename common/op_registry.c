/* Op registry: parses the built-in op table (op_table.c) once, resolves a
 * node's input and output types from its attrs, and records which device
 * types have kernels for each op. */
#include "common/op_registry.h"

#include "common/graph.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_OP_NAME_MAX      63
#define S_ARGS_MAX         12
#define S_ATTRS_MAX        24
#define S_DEVICE_TYPES_MAX 16
#define S_DEVICE_TYPE_LEN  31
#define S_COUNT_MAX        (1 << 20)

/* A name inside a table string (not NUL-terminated). */
typedef struct {
    const char *s;
    int len;
} s_span_t;

/* Attr kinds: arguments use the first three; the others are declared only
 * for their defaults. */
typedef enum {
    S_ATTR_TYPE,
    S_ATTR_TYPE_LIST,
    S_ATTR_INT,
    S_ATTR_BOOL,
    S_ATTR_FLOAT,
    S_ATTR_STRING,
    S_ATTR_SHAPE,
    S_ATTR_INT_LIST,
    S_ATTR_FLOAT_LIST,
    S_ATTR_STRING_LIST,
    S_ATTR_SHAPE_LIST,
} s_attr_kind_t;

/* The kinds as the table spells them, by s_attr_kind_t. */
static const char *const s_kind_names[] = {
    "type",  "list(type)", "int",         "bool",         "float",       "string",
    "shape", "list(int)",  "list(float)", "list(string)", "list(shape)",
};

typedef struct {
    s_span_t name;
    s_attr_kind_t kind;
    bool has_default;
    bool used;
    int64_t default_value; /* of an S_ATTR_TYPE (a zf_dtype_t) or S_ATTR_INT attr */
    uint8_t *default_pb;   /* the default as a packed AttrValue */
    size_t default_pb_len;
} s_attr_t;

typedef enum { S_ARG_FIXED, S_ARG_TYPE_ATTR, S_ARG_TYPE_LIST } s_arg_kind_t;

typedef struct {
    s_span_t name;
    s_span_t type;   /* as written: a type name or an attr name */
    s_span_t number; /* the N of N*T; len 0 when absent */
    s_arg_kind_t kind;
    zf_dtype_t fixed;
    int type_attr;   /* index in attrs, -1 for fixed types */
    int number_attr; /* index in attrs, -1 without N* */
    bool is_ref;
} s_arg_t;

struct zf_op_def {
    char name[S_OP_NAME_MAX + 1];
    unsigned flags;
    int n_inputs;
    int n_outputs;
    int n_attrs;
    int n_defaults;
    s_arg_t inputs[S_ARGS_MAX];
    s_arg_t outputs[S_ARGS_MAX];
    s_attr_t attrs[S_ATTRS_MAX];
    uint32_t kernels; /* bit i: s_device_types[i] has a kernel */
};

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static zf_op_def_t *s_defs;
static int s_n_defs;
static char s_device_types[S_DEVICE_TYPES_MAX][S_DEVICE_TYPE_LEN + 1];
static int s_n_device_types;

/* TensorFlow's names for types in op signatures. */
static const struct {
    const char *name;
    zf_dtype_t dtype;
} s_type_names[] = {
    {"float", ZF_FLOAT},     {"double", ZF_DOUBLE},       {"int32", ZF_INT32},
    {"uint8", ZF_UINT8},     {"int16", ZF_INT16},         {"int8", ZF_INT8},
    {"string", ZF_STRING},   {"complex64", ZF_COMPLEX64}, {"int64", ZF_INT64},
    {"bool", ZF_BOOL},       {"qint8", ZF_QINT8},         {"quint8", ZF_QUINT8},
    {"qint32", ZF_QINT32},   {"bfloat16", ZF_BFLOAT16},   {"qint16", ZF_QINT16},
    {"quint16", ZF_QUINT16}, {"uint16", ZF_UINT16},       {"complex128", ZF_COMPLEX128},
    {"half", ZF_HALF},       {"resource", ZF_RESOURCE},   {"variant", ZF_VARIANT},
    {"uint32", ZF_UINT32},   {"uint64", ZF_UINT64},
};

static const struct {
    const char *word;
    unsigned flag;
} s_flag_words[] = {
    {"stateful", ZF_OP_STATEFUL},         {"metadata", ZF_OP_METADATA},
    {"control_flow", ZF_OP_CONTROL_FLOW}, {"functional", ZF_OP_FUNCTIONAL},
    {"send_recv", ZF_OP_SEND_RECV},       {"unsupported", ZF_OP_UNSUPPORTED},
};

static bool s_span_is(s_span_t span, const char *s)
{
    return strlen(s) == (size_t)span.len && memcmp(span.s, s, (size_t)span.len) == 0;
}

static bool s_span_eq(s_span_t a, s_span_t b)
{
    return a.len == b.len && memcmp(a.s, b.s, (size_t)a.len) == 0;
}

static bool s_fixed_type(s_span_t name, zf_dtype_t *out)
{
    for (size_t i = 0; i < sizeof s_type_names / sizeof s_type_names[0]; i++) {
        if (s_span_is(name, s_type_names[i].name)) {
            *out = s_type_names[i].dtype;
            return true;
        }
    }
    return false;
}

/* ---- table parsing ----------------------------------------------------- */

/* A cursor over one table string. Errors in the table are programming
 * errors: they abort with the offending spot, and every test catches them. */
typedef struct {
    const char *spec;
    const char *p;
} s_cursor_t;

static _Noreturn void s_table_error(const s_cursor_t *c, const char *what)
{
    fprintf(stderr, "op table: %s at offset %d of \"%s\"\n", what, (int)(c->p - c->spec), c->spec);
    abort();
}

static void s_skip_blanks(s_cursor_t *c)
{
    while (*c->p == ' ') c->p++;
}

static bool s_accept(s_cursor_t *c, const char *token)
{
    s_skip_blanks(c);
    size_t n = strlen(token);
    if (strncmp(c->p, token, n) != 0) return false;
    c->p += n;
    return true;
}

static void s_expect(s_cursor_t *c, const char *token)
{
    if (!s_accept(c, token)) s_table_error(c, token);
}

static bool s_ident_char(char ch, bool first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (!first && ch >= '0' && ch <= '9');
}

static s_span_t s_ident(s_cursor_t *c)
{
    s_skip_blanks(c);
    s_span_t span = {c->p, 0};
    while (s_ident_char(c->p[span.len], span.len == 0)) span.len++;
    if (span.len == 0) s_table_error(c, "expected a name");
    c->p += span.len;
    return span;
}

/* arg := name ':' ['Ref(' inner ')' | inner];  inner := [N '*'] type */
static void s_parse_arg(s_cursor_t *c, s_arg_t *arg)
{
    *arg = (s_arg_t){.type_attr = -1, .number_attr = -1};
    arg->name = s_ident(c);
    s_expect(c, ":");
    arg->is_ref = s_accept(c, "Ref(");
    arg->type = s_ident(c);
    if (s_accept(c, "*")) {
        arg->number = arg->type;
        arg->type = s_ident(c);
    }
    if (arg->is_ref) s_expect(c, ")");
}

/* '(' [arg {',' arg}] ')' */
static int s_parse_args(s_cursor_t *c, s_arg_t *args)
{
    int n = 0;
    s_expect(c, "(");
    if (s_accept(c, ")")) return 0;
    do {
        if (n == S_ARGS_MAX) s_table_error(c, "too many arguments");
        s_parse_arg(c, &args[n++]);
    } while (s_accept(c, ","));
    s_expect(c, ")");
    return n;
}

static int s_find_attr(const zf_op_def_t *def, s_span_t name)
{
    for (int i = 0; i < def->n_attrs; i++)
        if (s_span_eq(def->attrs[i].name, name)) return i;
    return -1;
}

static int s_add_attr(zf_op_def_t *def, s_cursor_t *c, s_span_t name, s_attr_kind_t kind)
{
    if (def->n_attrs == S_ATTRS_MAX) s_table_error(c, "too many attrs");
    def->attrs[def->n_attrs] = (s_attr_t){.name = name, .kind = kind};
    return def->n_attrs++;
}

/* ---- attr defaults ----------------------------------------------------- */

/* Defaults are built once, at start-up, where running out of memory is as
 * fatal as a table error. */
static void *s_alloc(size_t size)
{
    void *p = calloc(1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "op table: out of memory\n");
        abort();
    }
    return p;
}

/* Appends one element of size bytes to a protobuf-c repeated field. */
static void s_push(void *arr_p, size_t *n, size_t size, const void *elem)
{
    void **arr = arr_p;
    void *grown = realloc(*arr, (*n + 1) * size);
    if (!grown) {
        fprintf(stderr, "op table: out of memory\n");
        abort();
    }
    memcpy((char *)grown + *n * size, elem, size);
    *arr = grown;
    (*n)++;
}

static zf_dtype_t s_read_type(s_cursor_t *c)
{
    zf_dtype_t dtype;
    if (!s_fixed_type(s_ident(c), &dtype)) s_table_error(c, "unknown default type");
    return dtype;
}

static int64_t s_read_int(s_cursor_t *c)
{
    s_skip_blanks(c);
    char *end;
    long long v = strtoll(c->p, &end, 10);
    if (end == c->p) s_table_error(c, "expected an int default");
    c->p = end;
    return v;
}

static float s_read_float(s_cursor_t *c)
{
    s_skip_blanks(c);
    char *end;
    double v = strtod(c->p, &end);
    if (end == c->p) s_table_error(c, "expected a float default");
    c->p = end;
    return (float)v;
}

static bool s_read_bool(s_cursor_t *c)
{
    if (s_accept(c, "true")) return true;
    if (!s_accept(c, "false")) s_table_error(c, "expected true or false");
    return false;
}

/* 'text': the bytes between single quotes, as they are. */
static ProtobufCBinaryData s_read_string(s_cursor_t *c)
{
    s_expect(c, "'");
    const char *close = strchr(c->p, '\'');
    if (!close) s_table_error(c, "unterminated string default");
    ProtobufCBinaryData b = {(size_t)(close - c->p), s_alloc((size_t)(close - c->p))};
    memcpy(b.data, c->p, b.len);
    c->p = close + 1;
    return b;
}

/* unknown (rank unknown), or [d, ...] with -1 for a dim of unknown size. */
static Tensorflow__TensorShapeProto *s_read_shape(s_cursor_t *c)
{
    Tensorflow__TensorShapeProto *shape = s_alloc(sizeof *shape);
    tensorflow__tensor_shape_proto__init(shape);
    if (s_accept(c, "unknown")) {
        shape->unknown_rank = true;
        return shape;
    }
    s_expect(c, "[");
    if (s_accept(c, "]")) return shape;
    do {
        Tensorflow__TensorShapeProto__Dim *dim = s_alloc(sizeof *dim);
        tensorflow__tensor_shape_proto__dim__init(dim);
        dim->size = s_read_int(c);
        s_push(&shape->dim, &shape->n_dim, sizeof dim, &dim);
    } while (s_accept(c, ","));
    s_expect(c, "]");
    return shape;
}

/* One element of a list default, appended to l. */
static void s_read_list_item(s_cursor_t *c, s_attr_kind_t kind, Tensorflow__AttrValue__ListValue *l)
{
    switch (kind) {
    case S_ATTR_TYPE_LIST: {
        Tensorflow__DataType t = (Tensorflow__DataType)s_read_type(c);
        s_push(&l->type, &l->n_type, sizeof t, &t);
        break;
    }
    case S_ATTR_INT_LIST: {
        int64_t i = s_read_int(c);
        s_push(&l->i, &l->n_i, sizeof i, &i);
        break;
    }
    case S_ATTR_FLOAT_LIST: {
        float f = s_read_float(c);
        s_push(&l->f, &l->n_f, sizeof f, &f);
        break;
    }
    case S_ATTR_STRING_LIST: {
        ProtobufCBinaryData b = s_read_string(c);
        s_push(&l->s, &l->n_s, sizeof b, &b);
        break;
    }
    default: {
        Tensorflow__TensorShapeProto *shape = s_read_shape(c);
        s_push(&l->shape, &l->n_shape, sizeof shape, &shape);
        break;
    }
    }
}

/* The default of attr, read into v (whose parts are heap-allocated, as
 * protobuf-c's unpack allocates them). */
static void s_read_default(s_cursor_t *c, s_attr_t *attr, Tensorflow__AttrValue *v)
{
    switch (attr->kind) {
    case S_ATTR_TYPE:
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
        v->type = (Tensorflow__DataType)s_read_type(c);
        attr->default_value = v->type;
        return;
    case S_ATTR_INT:
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
        attr->default_value = v->i = s_read_int(c);
        return;
    case S_ATTR_BOOL:
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
        v->b = s_read_bool(c);
        return;
    case S_ATTR_FLOAT:
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
        v->f = s_read_float(c);
        return;
    case S_ATTR_STRING:
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
        v->s = s_read_string(c);
        return;
    case S_ATTR_SHAPE:
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
        v->shape = s_read_shape(c);
        return;
    default: break;
    }
    Tensorflow__AttrValue__ListValue *l = s_alloc(sizeof *l);
    tensorflow__attr_value__list_value__init(l);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = l;
    s_expect(c, "[");
    if (s_accept(c, "]")) return;
    do {
        s_read_list_item(c, attr->kind, l);
    } while (s_accept(c, ","));
    s_expect(c, "]");
}

/* Reads attr's default and keeps it packed, ready to be unpacked into a
 * node that leaves the attr out. */
static void s_parse_default(s_cursor_t *c, zf_op_def_t *def, s_attr_t *attr)
{
    Tensorflow__AttrValue *v = s_alloc(sizeof *v);
    tensorflow__attr_value__init(v);
    s_read_default(c, attr, v);
    attr->default_pb_len = tensorflow__attr_value__get_packed_size(v);
    attr->default_pb = s_alloc(attr->default_pb_len);
    tensorflow__attr_value__pack(v, attr->default_pb);
    protobuf_c_message_free_unpacked(&v->base, NULL);
    attr->has_default = true;
    def->n_defaults++;
}

static s_attr_kind_t s_parse_kind(s_cursor_t *c)
{
    /* Longest names first, so "list(int)" is not read as an "int". */
    static const s_attr_kind_t order[] = {
        S_ATTR_TYPE_LIST,  S_ATTR_INT_LIST, S_ATTR_FLOAT_LIST, S_ATTR_STRING_LIST,
        S_ATTR_SHAPE_LIST, S_ATTR_TYPE,     S_ATTR_INT,        S_ATTR_BOOL,
        S_ATTR_FLOAT,      S_ATTR_STRING,   S_ATTR_SHAPE,
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (s_accept(c, s_kind_names[order[i]])) return order[i];
    s_table_error(c, "unknown attr kind");
}

/* '{' name ':' kind ['=' default] {',' ...} '}' */
static void s_parse_attrs(s_cursor_t *c, zf_op_def_t *def)
{
    if (!s_accept(c, "{")) return;
    do {
        s_span_t name = s_ident(c);
        if (s_find_attr(def, name) >= 0) s_table_error(c, "attr declared twice");
        s_expect(c, ":");
        int i = s_add_attr(def, c, name, s_parse_kind(c));
        if (s_accept(c, "=")) s_parse_default(c, def, &def->attrs[i]);
    } while (s_accept(c, ","));
    s_expect(c, "}");
}

/* Links an argument to its fixed type or attrs, declaring plain type and
 * int attrs on first use. */
static void s_resolve_arg(s_cursor_t *c, zf_op_def_t *def, s_arg_t *arg)
{
    if (arg->number.len > 0) {
        int n = s_find_attr(def, arg->number);
        if (n < 0) n = s_add_attr(def, c, arg->number, S_ATTR_INT);
        if (def->attrs[n].kind != S_ATTR_INT) s_table_error(c, "N in N*T must be an int attr");
        def->attrs[n].used = true;
        arg->number_attr = n;
    }
    if (s_fixed_type(arg->type, &arg->fixed)) {
        arg->kind = S_ARG_FIXED;
        return;
    }
    int t = s_find_attr(def, arg->type);
    if (t < 0) t = s_add_attr(def, c, arg->type, S_ATTR_TYPE);
    s_attr_t *attr = &def->attrs[t];
    if (attr->kind != S_ATTR_TYPE && attr->kind != S_ATTR_TYPE_LIST)
        s_table_error(c, "an attr of another kind used as a type");
    if (attr->kind == S_ATTR_TYPE_LIST && arg->number_attr >= 0)
        s_table_error(c, "N*list(type) is not a thing");
    attr->used = true;
    arg->kind = attr->kind == S_ATTR_TYPE_LIST ? S_ARG_TYPE_LIST : S_ARG_TYPE_ATTR;
    arg->type_attr = t;
}

static void s_parse_flags(s_cursor_t *c, zf_op_def_t *def)
{
    for (s_skip_blanks(c); *c->p; s_skip_blanks(c)) {
        s_span_t word = s_ident(c);
        size_t i = 0, n = sizeof s_flag_words / sizeof s_flag_words[0];
        while (i < n && !s_span_is(word, s_flag_words[i].word)) i++;
        if (i == n) s_table_error(c, "unknown flag");
        def->flags |= s_flag_words[i].flag;
    }
}

static void s_parse_op(const char *spec, zf_op_def_t *def)
{
    s_cursor_t c = {spec, spec};
    s_span_t name = s_ident(&c);
    if (name.len > S_OP_NAME_MAX) s_table_error(&c, "op name too long");
    memcpy(def->name, name.s, (size_t)name.len);
    def->name[name.len] = '\0';
    def->n_inputs = s_parse_args(&c, def->inputs);
    s_expect(&c, "->");
    def->n_outputs = s_parse_args(&c, def->outputs);
    s_parse_attrs(&c, def);
    s_parse_flags(&c, def);
    for (int i = 0; i < def->n_inputs; i++) s_resolve_arg(&c, def, &def->inputs[i]);
    for (int i = 0; i < def->n_outputs; i++) s_resolve_arg(&c, def, &def->outputs[i]);
    for (int i = 0; i < def->n_attrs; i++) {
        const s_attr_t *attr = &def->attrs[i];
        if (!attr->used && !attr->has_default)
            s_table_error(&c, "attr declared without a default and not used by any argument");
        /* Resolving types reads only type and int defaults. */
        if (attr->used && attr->has_default && attr->kind == S_ATTR_TYPE_LIST)
            s_table_error(&c, "a list(type) attr an argument uses takes no default");
    }
    if (def->n_inputs == 0) def->flags |= ZF_OP_SOURCE;
}

static int s_def_cmp(const void *a, const void *b)
{
    return strcmp(((const zf_op_def_t *)a)->name, ((const zf_op_def_t *)b)->name);
}

static void s_init(void)
{
    const char *const *table = zf__op_table();
    int n = 0;
    while (table[n]) n++;
    s_defs = calloc((size_t)n, sizeof *s_defs);
    if (!s_defs) {
        fprintf(stderr, "op table: out of memory\n");
        abort();
    }
    for (int i = 0; i < n; i++) s_parse_op(table[i], &s_defs[i]);
    qsort(s_defs, (size_t)n, sizeof *s_defs, s_def_cmp);
    for (int i = 1; i < n; i++) {
        if (strcmp(s_defs[i - 1].name, s_defs[i].name) == 0) {
            fprintf(stderr, "op table: op %s is listed twice\n", s_defs[i].name);
            abort();
        }
    }
    s_n_defs = n;
}

static void s_ensure_init(void)
{
    pthread_once(&s_once, s_init);
}

/* ---- lookups ----------------------------------------------------------- */

static int s_key_cmp(const void *key, const void *def)
{
    return strcmp((const char *)key, ((const zf_op_def_t *)def)->name);
}

const zf_op_def_t *zf_op_lookup(const char *op)
{
    s_ensure_init();
    if (!op) return NULL;
    return bsearch(op, s_defs, (size_t)s_n_defs, sizeof *s_defs, s_key_cmp);
}

const char *zf_op_name(const zf_op_def_t *def)
{
    return def->name;
}

unsigned zf_op_flags(const zf_op_def_t *def)
{
    return def ? def->flags : 0;
}

int zf_op_num_input_args(const zf_op_def_t *def)
{
    return def->n_inputs;
}

int zf_op_num_output_args(const zf_op_def_t *def)
{
    return def->n_outputs;
}

void zf_op_foreach(void (*fn)(const zf_op_def_t *def, void *arg), void *arg)
{
    s_ensure_init();
    for (int i = 0; i < s_n_defs; i++) fn(&s_defs[i], arg);
}

/* ---- resolving types from a node's attrs -------------------------------- */

static zf_status_t ZF_PRINTF(3, 4)
    s_node_error(const zf_op_def_t *def, const Tensorflow__NodeDef *node, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return zf_invalid_argument("node '%s' (%s): %s", node->name ? node->name : "", def->name, what);
}

/* The node's value for attr, or NULL when the node does not set it;
 * *present tells a missing key from a key without a value. A key repeated
 * on the wire takes its last value, as protobuf maps do. */
static const Tensorflow__AttrValue *s_node_attr(const Tensorflow__NodeDef *node,
                                                const s_attr_t *attr, bool *present)
{
    *present = false;
    for (size_t i = node->n_attr; i-- > 0;) {
        const Tensorflow__NodeDef__AttrEntry *e = node->attr[i];
        if (e && e->key && s_span_is(attr->name, e->key)) {
            *present = true;
            return e->value;
        }
    }
    return NULL;
}

static zf_status_t s_check_dtype(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                                 const s_attr_t *attr, int dtype)
{
    if (zf_dtype_valid(dtype)) return ZF_STATUS_OK;
    return s_node_error(def, node, "attr '%.*s' has invalid type %d", attr->name.len, attr->name.s,
                        dtype);
}

static zf_status_t s_get_type(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                              const s_attr_t *attr, zf_dtype_t *out)
{
    bool present;
    const Tensorflow__AttrValue *v = s_node_attr(node, attr, &present);
    if (!present && attr->has_default) {
        *out = (zf_dtype_t)attr->default_value;
        return ZF_STATUS_OK;
    }
    if (!present)
        return s_node_error(def, node, "missing attr '%.*s'", attr->name.len, attr->name.s);
    if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TYPE)
        return s_node_error(def, node, "attr '%.*s' must be a type, got %s", attr->name.len,
                            attr->name.s, zf_attr_kind_name(v));
    ZF_TRY(s_check_dtype(def, node, attr, (int)v->type));
    *out = (zf_dtype_t)v->type;
    return ZF_STATUS_OK;
}

static zf_status_t s_check_count(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                                 const s_attr_t *attr, int64_t count)
{
    if (count < 0)
        return s_node_error(def, node, "attr '%.*s' must not be negative, got %lld", attr->name.len,
                            attr->name.s, (long long)count);
    if (count > S_COUNT_MAX)
        return s_node_error(def, node, "attr '%.*s' is too large (%lld > %d)", attr->name.len,
                            attr->name.s, (long long)count, S_COUNT_MAX);
    return ZF_STATUS_OK;
}

static zf_status_t s_get_count(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                               const s_attr_t *attr, int *out)
{
    bool present;
    const Tensorflow__AttrValue *v = s_node_attr(node, attr, &present);
    int64_t count;
    if (!present && attr->has_default) {
        count = attr->default_value;
    } else if (!present) {
        return s_node_error(def, node, "missing attr '%.*s'", attr->name.len, attr->name.s);
    } else if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_I) {
        return s_node_error(def, node, "attr '%.*s' must be an int, got %s", attr->name.len,
                            attr->name.s, zf_attr_kind_name(v));
    } else {
        count = v->i;
    }
    ZF_TRY(s_check_count(def, node, attr, count));
    *out = (int)count;
    return ZF_STATUS_OK;
}

static bool s_list_holds_only_types(const Tensorflow__AttrValue__ListValue *l)
{
    return l->n_s == 0 && l->n_i == 0 && l->n_f == 0 && l->n_b == 0 && l->n_shape == 0 &&
           l->n_tensor == 0 && l->n_func == 0;
}

static zf_status_t s_get_type_list(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                                   const s_attr_t *attr, const Tensorflow__DataType **types, int *n)
{
    bool present;
    const Tensorflow__AttrValue *v = s_node_attr(node, attr, &present);
    if (!present)
        return s_node_error(def, node, "missing attr '%.*s'", attr->name.len, attr->name.s);
    if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST || !v->list)
        return s_node_error(def, node, "attr '%.*s' must be a list of types, got %s",
                            attr->name.len, attr->name.s, zf_attr_kind_name(v));
    if (!s_list_holds_only_types(v->list))
        return s_node_error(def, node,
                            "attr '%.*s' must be a list of types, got a list of other values",
                            attr->name.len, attr->name.s);
    if (v->list->n_type > S_COUNT_MAX)
        return s_node_error(def, node, "attr '%.*s' is too long (%zu types > %d)", attr->name.len,
                            attr->name.s, v->list->n_type, S_COUNT_MAX);
    for (size_t i = 0; i < v->list->n_type; i++)
        ZF_TRY(s_check_dtype(def, node, attr, (int)v->list->type[i]));
    *types = v->list->type;
    *n = (int)v->list->n_type;
    return ZF_STATUS_OK;
}

/* Where resolved types go: the first max of them into types[]. */
typedef struct {
    zf_dtype_t *types;
    int max;
    int n;
} s_sink_t;

static void s_sink_put(s_sink_t *sink, zf_dtype_t dtype, int count)
{
    for (; count > 0 && sink->n < sink->max; count--) sink->types[sink->n++] = dtype;
    sink->n += count;
}

/* Appends the tensors one argument expands to. */
static zf_status_t s_expand_arg(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                                const s_arg_t *arg, s_sink_t *sink)
{
    int ref = arg->is_ref ? ZF_DTYPE_REF_OFFSET : 0;
    if (arg->kind == S_ARG_TYPE_LIST) {
        const Tensorflow__DataType *types = NULL;
        int n = 0;
        ZF_TRY(s_get_type_list(def, node, &def->attrs[arg->type_attr], &types, &n));
        for (int i = 0; i < n; i++) s_sink_put(sink, (zf_dtype_t)((int)types[i] + ref), 1);
        return ZF_STATUS_OK;
    }
    int count = 1;
    if (arg->number_attr >= 0)
        ZF_TRY(s_get_count(def, node, &def->attrs[arg->number_attr], &count));
    zf_dtype_t dtype = arg->fixed;
    if (arg->kind == S_ARG_TYPE_ATTR)
        ZF_TRY(s_get_type(def, node, &def->attrs[arg->type_attr], &dtype));
    s_sink_put(sink, (zf_dtype_t)((int)dtype + ref), count);
    return ZF_STATUS_OK;
}

static zf_status_t s_expand_args(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                                 const s_arg_t *args, int n_args, zf_dtype_t *types, int max,
                                 int *n)
{
    *n = 0;
    s_sink_t sink = {types, types ? (max > 0 ? max : 0) : 0, 0};
    for (int i = 0; i < n_args; i++) ZF_TRY(s_expand_arg(def, node, &args[i], &sink));
    *n = sink.n;
    return ZF_STATUS_OK;
}

zf_status_t zf_op_input_types(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                              zf_dtype_t *types, int max, int *n)
{
    return s_expand_args(def, node, def->inputs, def->n_inputs, types, max, n);
}

zf_status_t zf_op_output_types(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                               zf_dtype_t *types, int max, int *n)
{
    return s_expand_args(def, node, def->outputs, def->n_outputs, types, max, n);
}

static zf_status_t s_arg_range(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                               const s_arg_t *args, int n_args, const char *name, int *start,
                               int *stop)
{
    *start = *stop = 0;
    s_sink_t sink = {NULL, 0, 0};
    for (int i = 0; i < n_args; i++) {
        int before = sink.n;
        ZF_TRY(s_expand_arg(def, node, &args[i], &sink));
        if (s_span_is(args[i].name, name)) {
            *start = before;
            *stop = sink.n;
            return ZF_STATUS_OK;
        }
    }
    return zf_not_found("op %s has no argument '%s'", def->name, name);
}

zf_status_t zf_op_input_range(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                              const char *arg, int *start, int *stop)
{
    return s_arg_range(def, node, def->inputs, def->n_inputs, arg, start, stop);
}

zf_status_t zf_op_output_range(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                               const char *arg, int *start, int *stop)
{
    return s_arg_range(def, node, def->outputs, def->n_outputs, arg, start, stop);
}

/* ---- default attrs ----------------------------------------------------- */

/* Appends attr's default to node as a new entry. */
static zf_status_t s_add_default(Tensorflow__NodeDef *node, const s_attr_t *attr)
{
    Tensorflow__NodeDef__AttrEntry **grown =
        realloc(node->attr, (node->n_attr + 1) * sizeof *node->attr);
    if (!grown) return zf_out_of_memory("a default attr");
    node->attr = grown;
    Tensorflow__NodeDef__AttrEntry *e = malloc(sizeof *e);
    char *key = malloc((size_t)attr->name.len + 1);
    Tensorflow__AttrValue *v =
        tensorflow__attr_value__unpack(NULL, attr->default_pb_len, attr->default_pb);
    if (!e || !key || !v) {
        free(e);
        free(key);
        if (v) tensorflow__attr_value__free_unpacked(v, NULL);
        return zf_out_of_memory("a default attr");
    }
    memcpy(key, attr->name.s, (size_t)attr->name.len);
    key[attr->name.len] = '\0';
    tensorflow__node_def__attr_entry__init(e);
    e->key = key;
    e->value = v;
    node->attr[node->n_attr++] = e;
    return ZF_STATUS_OK;
}

int zf_op_num_default_attrs(const zf_op_def_t *def)
{
    return def ? def->n_defaults : 0;
}

zf_status_t zf_op_add_default_attrs(const zf_op_def_t *def, Tensorflow__NodeDef *node, int *added)
{
    if (added) *added = 0;
    if (!def || def->n_defaults == 0) return ZF_STATUS_OK;
    for (int i = 0; i < def->n_attrs; i++) {
        const s_attr_t *attr = &def->attrs[i];
        bool present;
        if (!attr->has_default) continue;
        s_node_attr(node, attr, &present);
        if (present) continue;
        ZF_TRY(s_add_default(node, attr));
        if (added) (*added)++;
    }
    return ZF_STATUS_OK;
}

/* ---- kernels ----------------------------------------------------------- */

static int s_device_type_index(const char *device_type)
{
    for (int i = 0; i < s_n_device_types; i++)
        if (strcmp(s_device_types[i], device_type) == 0) return i;
    return -1;
}

zf_status_t zf_op_register_kernel(const char *op, const char *device_type)
{
    zf_op_def_t *def = (zf_op_def_t *)zf_op_lookup(op);
    if (!def) return zf_not_found("cannot register a kernel for unknown op '%s'", op ? op : "");
    size_t len = device_type ? strlen(device_type) : 0;
    if (len == 0 || len > S_DEVICE_TYPE_LEN)
        return zf_invalid_argument("invalid device type '%s' for a kernel of %s",
                                   device_type ? device_type : "", def->name);
    int i = s_device_type_index(device_type);
    if (i < 0) {
        if (s_n_device_types == S_DEVICE_TYPES_MAX)
            return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                                 "cannot register device type '%s': %d device types at most",
                                 device_type, S_DEVICE_TYPES_MAX);
        i = s_n_device_types++;
        memcpy(s_device_types[i], device_type, len + 1);
    }
    def->kernels |= 1u << i;
    return ZF_STATUS_OK;
}

bool zf_op_has_kernel(const zf_op_def_t *def, const char *device_type)
{
    if (!def || !device_type) return false;
    int i = s_device_type_index(device_type);
    return i >= 0 && (def->kernels & (1u << i)) != 0;
}

void zf_op_registry_reset_kernels(void)
{
    s_ensure_init();
    for (int i = 0; i < s_n_defs; i++) s_defs[i].kernels = 0;
    memset(s_device_types, 0, sizeof s_device_types);
    s_n_device_types = 0;
}
