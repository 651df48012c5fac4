/* NodeDef building for the partitioner: new nodes, copies of nodes, attrs and
 * input strings (deep copies through common/proto_util.h). Every
 * object built here frees with protobuf_c_message_free_unpacked(.., NULL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto_util.h"
#include "scheduler/graph/partition_internal.h"

void zf__node_free(Tensorflow__NodeDef *nd)
{
    if (nd) protobuf_c_message_free_unpacked(&nd->base, NULL);
}

Tensorflow__NodeDef *zf__node_new(char *name, const char *op, const char *device)
{
    Tensorflow__NodeDef *nd = malloc(sizeof *nd);
    if (!nd) {
        free(name);
        return NULL;
    }
    tensorflow__node_def__init(nd);
    nd->name = name;
    nd->op = strdup(op);
    nd->device = strdup(device);
    if (!nd->name || !nd->op || !nd->device) {
        if (!nd->op) nd->op = (char *)protobuf_c_empty_string;
        if (!nd->device) nd->device = (char *)protobuf_c_empty_string;
        if (!nd->name) nd->name = (char *)protobuf_c_empty_string;
        zf__node_free(nd);
        return NULL;
    }
    return nd;
}

static bool s_copy_attrs(Tensorflow__NodeDef *nd, const Tensorflow__NodeDef *src)
{
    if (src->n_attr == 0) return true;
    nd->attr = calloc(src->n_attr, sizeof *nd->attr);
    if (!nd->attr) return false;
    nd->n_attr = src->n_attr;
    for (size_t i = 0; i < src->n_attr; i++) {
        nd->attr[i] = (Tensorflow__NodeDef__AttrEntry *)zf_proto_copy(&src->attr[i]->base);
        if (!nd->attr[i]) return false;
    }
    return true;
}

Tensorflow__NodeDef *zf__node_copy_shell(const Tensorflow__NodeDef *src, const char *device)
{
    char *name = strdup(src->name);
    if (!name) return NULL;
    Tensorflow__NodeDef *nd = zf__node_new(name, src->op, device);
    if (!nd) return NULL;
    bool ok = s_copy_attrs(nd, src) && zf_proto_copy_unknown(&nd->base, &src->base);
    if (ok && src->experimental_debug_info) {
        nd->experimental_debug_info = (Tensorflow__NodeDef__ExperimentalDebugInfo *)zf_proto_copy(
            &src->experimental_debug_info->base);
        ok = nd->experimental_debug_info != NULL;
    }
    if (ok && src->experimental_type) {
        nd->experimental_type =
            (Tensorflow__FullTypeDef *)zf_proto_copy(&src->experimental_type->base);
        ok = nd->experimental_type != NULL;
    }
    if (!ok) {
        zf__node_free(nd);
        return NULL;
    }
    return nd;
}

bool zf__node_add_attr(Tensorflow__NodeDef *nd, const char *key, Tensorflow__AttrValue *value)
{
    if (!value) return false;
    Tensorflow__NodeDef__AttrEntry *e = malloc(sizeof *e);
    Tensorflow__NodeDef__AttrEntry **arr =
        e ? realloc(nd->attr, (nd->n_attr + 1) * sizeof *arr) : NULL;
    if (arr) nd->attr = arr;
    char *k = arr ? strdup(key) : NULL;
    if (!k) {
        free(e);
        protobuf_c_message_free_unpacked(&value->base, NULL);
        return false;
    }
    tensorflow__node_def__attr_entry__init(e);
    e->key = k;
    e->value = value;
    nd->attr[nd->n_attr++] = e;
    return true;
}

bool zf__node_add_input(Tensorflow__NodeDef *nd, char *input)
{
    char **arr = input ? realloc(nd->input, (nd->n_input + 1) * sizeof *arr) : NULL;
    if (!arr) {
        free(input);
        return false;
    }
    nd->input = arr;
    nd->input[nd->n_input++] = input;
    return true;
}

static Tensorflow__AttrValue *s_attr_new(Tensorflow__AttrValue__ValueCase which)
{
    Tensorflow__AttrValue *v = malloc(sizeof *v);
    if (!v) return NULL;
    tensorflow__attr_value__init(v);
    v->value_case = which;
    return v;
}

Tensorflow__AttrValue *zf__attr_type(zf_dtype_t dtype)
{
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_TYPE);
    if (v) v->type = (Tensorflow__DataType)dtype;
    return v;
}

Tensorflow__AttrValue *zf__attr_string(const char *s)
{
    size_t len = strlen(s);
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_S);
    uint8_t *data = v && len ? malloc(len) : NULL;
    if (!v || (len && !data)) {
        free(v);
        return NULL;
    }
    if (len) memcpy(data, s, len);
    v->s.data = data;
    v->s.len = len;
    return v;
}

Tensorflow__AttrValue *zf__attr_int(int64_t i)
{
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_I);
    if (v) v->i = i;
    return v;
}

Tensorflow__AttrValue *zf__attr_bool(bool b)
{
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_B);
    if (v) v->b = b;
    return v;
}

Tensorflow__AttrValue *zf__attr_empty_float_tensor(void)
{
    Tensorflow__TensorProto *t = malloc(sizeof *t);
    Tensorflow__TensorShapeProto *shape = malloc(sizeof *shape);
    Tensorflow__TensorShapeProto__Dim *dim = malloc(sizeof *dim);
    Tensorflow__TensorShapeProto__Dim **dims = malloc(sizeof *dims);
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_TENSOR);
    if (!t || !shape || !dim || !dims || !v) {
        free(t);
        free(shape);
        free(dim);
        free(dims);
        free(v);
        return NULL;
    }
    tensorflow__tensor_shape_proto__dim__init(dim);
    dim->size = 0;
    dims[0] = dim;
    tensorflow__tensor_shape_proto__init(shape);
    shape->n_dim = 1;
    shape->dim = dims;
    tensorflow__tensor_proto__init(t);
    t->dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    t->tensor_shape = shape;
    v->tensor = t;
    return v;
}

char *zf__input_string(const char *name, int port)
{
    size_t len = strlen(name);
    char *s = malloc(len + 14);
    if (!s) return NULL;
    if (port == ZF_CONTROL_PORT) {
        s[0] = '^';
        memcpy(s + 1, name, len + 1);
    } else if (port == 0) {
        memcpy(s, name, len + 1);
    } else {
        memcpy(s, name, len);
        snprintf(s + len, 14, ":%d", port);
    }
    return s;
}
