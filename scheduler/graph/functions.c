/* The function transform's driver (scheduler/graph/functions.h): which nodes
 * it rewrites and in what order, top-level _Arg/_Retval, the library that
 * stays reachable, and the node builders the other files share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>

#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/op_registry.h"
#include "common/proto_util.h"
#include "scheduler/graph/functions.h"
#include "scheduler/graph/functions_internal.h"
#include "scheduler/graph/nodedef_build.h"

/* ---- node builders ---------------------------------------------------------- */

static char *s_vformat(const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int len = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (len < 0) return NULL;
    char *s = malloc((size_t)len + 1);
    if (s) vsnprintf(s, (size_t)len + 1, fmt, ap);
    return s;
}

char *zf__fn_format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = s_vformat(fmt, ap);
    va_end(ap);
    return s;
}

bool zf__fn_set_string(char **field, const char *s)
{
    char *copy = strdup(s);
    if (!copy) return false;
    if (*field && *field != protobuf_c_empty_string) free(*field);
    *field = copy;
    return true;
}

Tensorflow__NodeDef *zf__fn_node_new(const char *op, const char *device, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *name = s_vformat(fmt, ap);
    va_end(ap);
    return name ? zf__node_new(name, op, device ? device : "") : NULL;
}

bool zf__fn_add_input(Tensorflow__NodeDef *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = s_vformat(fmt, ap);
    va_end(ap);
    return zf__node_add_input(n, s);
}

void zf__fn_attr_remove(Tensorflow__NodeDef *n, const char *key)
{
    size_t k = 0;
    for (size_t i = 0; i < n->n_attr; i++) {
        if (strcmp(n->attr[i]->key, key) == 0)
            protobuf_c_message_free_unpacked(&n->attr[i]->base, NULL);
        else
            n->attr[k++] = n->attr[i];
    }
    n->n_attr = k;
}

bool zf__fn_attr_type(Tensorflow__NodeDef *n, const char *key, int dtype)
{
    return zf__node_add_attr(n, key, zf__attr_type((zf_dtype_t)dtype));
}

bool zf__fn_attr_types(Tensorflow__NodeDef *n, const char *key, const int *types, size_t count)
{
    Tensorflow__AttrValue *v = malloc(sizeof *v);
    Tensorflow__AttrValue__ListValue *l = v ? malloc(sizeof *l) : NULL;
    if (!l) {
        free(v);
        return false;
    }
    tensorflow__attr_value__init(v);
    tensorflow__attr_value__list_value__init(l);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = l;
    if (count && !(l->type = malloc(count * sizeof *l->type))) {
        protobuf_c_message_free_unpacked(&v->base, NULL);
        return false;
    }
    for (size_t i = 0; i < count; i++) l->type[i] = (Tensorflow__DataType)types[i];
    l->n_type = count;
    return zf__node_add_attr(n, key, v);
}

bool zf__fn_attr_copy(Tensorflow__NodeDef *n, const char *key, const Tensorflow__AttrValue *v)
{
    return zf__node_add_attr(n, key, (Tensorflow__AttrValue *)zf_proto_copy(&v->base));
}

/* ---- the node list ----------------------------------------------------------- */

zf_status_t zf__fn_push(zf__fn_ctx_t *c, Tensorflow__NodeDef *node, int origin)
{
    if (!node) return zf_out_of_memory("function inlining");
    if (c->n >= ZF__FN_MAX_NODES) {
        zf_status_t s = zf_invalid_argument(
            "inlining functions makes the graph larger than %d nodes (at node '%s')",
            ZF__FN_MAX_NODES, node->name);
        zf__node_free(node);
        return s;
    }
    size_t size = protobuf_c_message_get_packed_size(&node->base);
    if (size > c->max_bytes || c->bytes > c->max_bytes - size) {
        zf_status_t s = zf_invalid_argument(
            "inlining functions makes the graph larger than %zu bytes (at node '%s')", c->max_bytes,
            node->name);
        zf__node_free(node);
        return s;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        Tensorflow__NodeDef **nodes = realloc(c->nodes, cap * sizeof *nodes);
        if (nodes) c->nodes = nodes;
        int *origin_v = nodes ? realloc(c->origin, cap * sizeof *origin_v) : NULL;
        if (origin_v) c->origin = origin_v;
        if (!nodes || !origin_v) {
            zf__node_free(node);
            return zf_out_of_memory("function inlining");
        }
        c->cap = cap;
    }
    c->nodes[c->n] = node;
    c->origin[c->n++] = origin;
    c->bytes += size;
    return ZF_STATUS_OK;
}

const Tensorflow__FunctionDef *zf__fn_find(const zf__fn_ctx_t *c, const char *name)
{
    uintptr_t v = 0;
    if (!c->fns || !name || !zf_strmap_get(c->fns, name, &v)) return NULL;
    return (const Tensorflow__FunctionDef *)v;
}

/* ---- the transform ------------------------------------------------------------- */

static bool s_is(const char *op, const char *a, const char *b)
{
    return strcmp(op, a) == 0 || (b && strcmp(op, b) == 0);
}

bool zf_functions_needed(const Tensorflow__GraphDef *gd)
{
    if (!gd) return false;
    if (gd->library && gd->library->n_function > 0) return true;
    for (size_t i = 0; i < gd->n_node; i++) {
        const char *op = gd->node[i]->op;
        if (op[0] == '_' ? s_is(op, "_Arg", "_Retval")
                         : s_is(op, "If", "StatelessIf") || s_is(op, "While", "StatelessWhile") ||
                               s_is(op, "Case", "StatelessCase") ||
                               s_is(op, "PartitionedCall", "StatefulPartitionedCall"))
            return true;
    }
    return false;
}

static zf_status_t s_index_library(zf__fn_ctx_t *c)
{
    if (!c->lib || c->lib->n_function == 0) return ZF_STATUS_OK;
    c->fns = zf_strmap_new(c->lib->n_function, 0);
    if (!c->fns) return zf_out_of_memory("function library");
    for (size_t i = 0; i < c->lib->n_function; i++) {
        const Tensorflow__FunctionDef *f = c->lib->function[i];
        if (!f->signature || !f->signature->name[0])
            return zf_invalid_argument("function %zu of the library has no name", i);
        if (zf_op_lookup(f->signature->name))
            return zf_invalid_argument("Cannot add function '%s' because an op with the same name "
                                       "already exists.",
                                       f->signature->name);
        int rc = zf_strmap_insert(c->fns, f->signature->name, (uintptr_t)f, NULL);
        if (rc == -EEXIST)
            return zf_invalid_argument("function '%s' is defined more than once in the library",
                                       f->signature->name);
        if (rc != 0) return zf_out_of_memory("function library");
    }
    return ZF_STATUS_OK;
}

/* A call node's attrs as key/value pairs (NodeDef and NameAttrList entries
 * share their layout). */
static zf_status_t s_attrs(Tensorflow__NodeDef__AttrEntry *const *nattr,
                           Tensorflow__NameAttrList__AttrEntry *const *fattr, size_t n,
                           const Tensorflow__OpDef *sig, zf__fn_attrs_t *out)
{
    out->kv = calloc(n + 1, sizeof *out->kv);
    if (!out->kv) return zf_out_of_memory("function inlining");
    for (size_t i = 0; i < n; i++)
        out->kv[i] = nattr ? (zf__fn_kv_t){nattr[i]->key, nattr[i]->value}
                           : (zf__fn_kv_t){fattr[i]->key, fattr[i]->value};
    out->n = n;
    out->sig = sig;
    return ZF_STATUS_OK;
}

static zf_status_t s_missing_function(const Tensorflow__NodeDef *node, const char *fn)
{
    return zf_invalid_argument("node '%s' (%s) calls function '%s', which is not in the graph's "
                               "library",
                               node->name, node->op, fn);
}

/* Inlines c->nodes[i] when it is a call. */
static zf_status_t s_call(zf__fn_ctx_t *c, size_t i, bool *done)
{
    Tensorflow__NodeDef *node = c->nodes[i];
    const Tensorflow__FunctionDef *f = zf__fn_find(c, node->op);
    zf__fn_attrs_t attrs = {0};
    zf_status_t s = ZF_STATUS_OK;
    *done = true;
    if (f) {
        s = s_attrs(node->attr, NULL, node->n_attr, f->signature, &attrs);
    } else if (s_is(node->op, "PartitionedCall", "StatefulPartitionedCall")) {
        const Tensorflow__NameAttrList *fn = NULL;
        ZF_TRY(zf_node_attr_func(node, "f", &fn));
        if (!(f = zf__fn_find(c, fn->name))) return s_missing_function(node, fn->name);
        s = s_attrs(NULL, fn->attr, fn->n_attr, f->signature, &attrs);
    } else {
        *done = false;
        return ZF_STATUS_OK;
    }
    if (zf_ok(s)) s = zf__fn_inline(c, i, f, &attrs);
    free(attrs.kv);
    return s;
}

static zf_status_t s_rewrite(zf__fn_ctx_t *c, size_t i)
{
    const char *op = c->nodes[i]->op;
    if (s_is(op, "If", "StatelessIf")) return zf__fn_lower_if(c, i);
    if (s_is(op, "Case", "StatelessCase")) return zf__fn_lower_case(c, i);
    if (s_is(op, "While", "StatelessWhile")) return zf__fn_lower_while(c, i);
    bool done = false;
    return s_call(c, i, &done);
}

/* _Arg -> Placeholder, _Retval -> Identity, at the top level; indices must
 * be 0 .. count-1, each once. */
static zf_status_t s_args(zf__fn_ctx_t *c, size_t n_top, const char *op)
{
    size_t count = 0;
    for (size_t i = 0; i < n_top; i++) count += strcmp(c->nodes[i]->op, op) == 0;
    if (count == 0) return ZF_STATUS_OK;
    const char **seen = calloc(count, sizeof *seen);
    if (!seen) return zf_out_of_memory("function inlining");
    zf_status_t s = ZF_STATUS_OK;
    for (size_t i = 0; i < n_top && zf_ok(s); i++) {
        Tensorflow__NodeDef *n = c->nodes[i];
        if (strcmp(n->op, op) != 0) continue;
        int64_t index = 0;
        zf_dtype_t t = ZF_INVALID;
        s = zf_node_attr_int(n, "index", &index);
        if (zf_ok(s)) s = zf_node_attr_type(n, "T", &t);
        if (zf_ok(s) && (index < 0 || (uint64_t)index >= count))
            s = zf_invalid_argument("%s node '%s' has index %lld, but the graph has %zu %s nodes",
                                    op, n->name, (long long)index, count, op);
        if (zf_ok(s) && seen[index])
            s = zf_invalid_argument("%s nodes '%s' and '%s' both have index %lld", op, seen[index],
                                    n->name, (long long)index);
        if (!zf_ok(s)) break;
        seen[index] = n->name;
        bool ok = true;
        zf__fn_attr_remove(n, "index");
        if (strcmp(op, "_Arg") == 0) {
            zf__fn_attr_remove(n, "T");
            zf__fn_attr_remove(n, "dtype");
            ok = zf__fn_set_string(&n->op, "Placeholder") && zf__fn_attr_type(n, "dtype", (int)t);
        } else {
            ok = zf__fn_set_string(&n->op, "Identity");
        }
        if (!ok) s = zf_out_of_memory("function inlining");
    }
    free(seen);
    return s;
}

static zf_status_t s_run(zf__fn_ctx_t *c, Tensorflow__GraphDef *gd)
{
    ZF_TRY(s_index_library(c));
    size_t n_top = c->n;
    ZF_TRY(s_args(c, n_top, "_Arg"));
    ZF_TRY(s_args(c, n_top, "_Retval"));
    /* New nodes land at the end, so nested calls and functional ops in a
     * body are met later in this same walk. */
    for (size_t i = 0; i < c->n; i++) ZF_TRY(s_rewrite(c, i));
    Tensorflow__FunctionDefLibrary *lib = NULL;
    ZF_TRY(zf_functions_reachable(gd->library, c->nodes, c->n, &lib));
    if (gd->library) protobuf_c_message_free_unpacked(&gd->library->base, NULL);
    gd->library = lib;
    return ZF_STATUS_OK;
}

zf_status_t zf_functions_lower(const Tensorflow__GraphDef *gd, Tensorflow__GraphDef **out)
{
    return zf__functions_lower_bounded(gd, ZF_GRAPHDEF_MAX_BYTES, out);
}

zf_status_t zf__functions_lower_bounded(const Tensorflow__GraphDef *gd, size_t max_bytes,
                                        Tensorflow__GraphDef **out)
{
    *out = NULL;
    if (!zf_functions_needed(gd)) return ZF_STATUS_OK;
    ProtobufCMessage *m = NULL;
    ZF_TRY(zf_proto_clone(&gd->base, "function inlining", &m));
    Tensorflow__GraphDef *copy = (Tensorflow__GraphDef *)m;
    zf__fn_ctx_t c = {.lib = copy->library, .max_bytes = max_bytes};
    /* the node list takes over the copy's nodes */
    c.nodes = copy->node;
    c.n = c.cap = copy->n_node;
    copy->node = NULL;
    copy->n_node = 0;
    c.origin = malloc((c.cap ? c.cap : 1) * sizeof *c.origin);
    zf_status_t s = c.origin ? ZF_STATUS_OK : zf_out_of_memory("function inlining");
    for (size_t i = 0; zf_ok(s) && i < c.n; i++) {
        c.origin[i] = -1;
        c.bytes += protobuf_c_message_get_packed_size(&c.nodes[i]->base);
    }
    if (zf_ok(s)) s = s_run(&c, copy);
    copy->node = c.nodes;
    copy->n_node = c.n;
    free(c.origin);
    free(c.exp);
    zf_strmap_destroy(&c.fns);
    if (!zf_ok(s)) {
        protobuf_c_message_free_unpacked(&copy->base, NULL);
        return s;
    }
    *out = copy;
    return ZF_STATUS_OK;
}

static const char *s_indexed(const Tensorflow__GraphDef *gd, const char *op, int64_t index)
{
    for (size_t i = 0; gd && i < gd->n_node; i++) {
        const Tensorflow__NodeDef *n = gd->node[i];
        int64_t k = -1;
        if (strcmp(n->op, op) != 0) continue;
        zf_status_t s = zf_node_attr_int(n, "index", &k);
        zf_status_clear(&s);
        if (k == index) return n->name;
    }
    return NULL;
}

const char *zf_functions_arg_name(const Tensorflow__GraphDef *gd, int64_t index)
{
    return s_indexed(gd, "_Arg", index);
}

const char *zf_functions_retval_name(const Tensorflow__GraphDef *gd, int64_t index)
{
    return s_indexed(gd, "_Retval", index);
}

/* ---- reachable definitions --------------------------------------------------- */

typedef struct {
    const Tensorflow__FunctionDefLibrary *lib;
    zf_strmap_t *index; /* name -> library position */
    char *mark;         /* per function */
    size_t *stack;
    size_t top;
} s_reach_t;

static void s_reach_name(s_reach_t *r, const char *name)
{
    uintptr_t v = 0;
    if (!zf_strmap_get(r->index, name, &v) || r->mark[v]) return;
    r->mark[v] = 1;
    r->stack[r->top++] = (size_t)v;
}

static void s_reach_value(s_reach_t *r, const Tensorflow__AttrValue *v);

static void s_reach_func(s_reach_t *r, const Tensorflow__NameAttrList *f)
{
    if (!f) return;
    s_reach_name(r, f->name);
    for (size_t i = 0; i < f->n_attr; i++) s_reach_value(r, f->attr[i]->value);
}

static void s_reach_value(s_reach_t *r, const Tensorflow__AttrValue *v)
{
    if (!v) return;
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_FUNC) s_reach_func(r, v->func);
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && v->list)
        for (size_t i = 0; i < v->list->n_func; i++) s_reach_func(r, v->list->func[i]);
}

static void s_reach_node(s_reach_t *r, const Tensorflow__NodeDef *n)
{
    s_reach_name(r, n->op);
    for (size_t i = 0; i < n->n_attr; i++) s_reach_value(r, n->attr[i]->value);
}

static zf_status_t s_reach_copy(const s_reach_t *r, Tensorflow__FunctionDefLibrary **out)
{
    const Tensorflow__FunctionDefLibrary *lib = r->lib;
    Tensorflow__FunctionDefLibrary *o = malloc(sizeof *o);
    if (!o) return zf_out_of_memory("function library");
    tensorflow__function_def_library__init(o);
    o->function = calloc(lib->n_function + 1, sizeof *o->function);
    o->gradient = calloc(lib->n_gradient + 1, sizeof *o->gradient);
    bool ok = o->function && o->gradient;
    for (size_t i = 0; ok && i < lib->n_function; i++) {
        if (!r->mark[i]) continue;
        o->function[o->n_function] =
            (Tensorflow__FunctionDef *)zf_proto_copy(&lib->function[i]->base);
        ok = o->function[o->n_function++] != NULL;
    }
    for (size_t i = 0; ok && i < lib->n_gradient; i++) {
        uintptr_t v = 0;
        if (!zf_strmap_get(r->index, lib->gradient[i]->function_name, &v) || !r->mark[v]) continue;
        o->gradient[o->n_gradient] =
            (Tensorflow__GradientDef *)zf_proto_copy(&lib->gradient[i]->base);
        ok = o->gradient[o->n_gradient++] != NULL;
    }
    if (!ok) {
        protobuf_c_message_free_unpacked(&o->base, NULL);
        return zf_out_of_memory("function library");
    }
    *out = o;
    return ZF_STATUS_OK;
}

zf_status_t zf_functions_reachable(const Tensorflow__FunctionDefLibrary *lib,
                                   Tensorflow__NodeDef *const *nodes, size_t n,
                                   Tensorflow__FunctionDefLibrary **out)
{
    *out = NULL;
    if (!lib || lib->n_function == 0) return ZF_STATUS_OK;
    s_reach_t r = {.lib = lib};
    r.index = zf_strmap_new(lib->n_function, 0);
    r.mark = calloc(lib->n_function, 1);
    r.stack = malloc(lib->n_function * sizeof *r.stack);
    zf_status_t s =
        r.index && r.mark && r.stack ? ZF_STATUS_OK : zf_out_of_memory("function library");
    for (size_t i = 0; zf_ok(s) && i < lib->n_function; i++) {
        const Tensorflow__OpDef *sig = lib->function[i]->signature;
        if (sig && zf_strmap_insert(r.index, sig->name, i, NULL) == -ENOMEM)
            s = zf_out_of_memory("function library");
    }
    for (size_t i = 0; zf_ok(s) && i < n; i++) s_reach_node(&r, nodes[i]);
    bool any = false;
    for (bool more = zf_ok(s); more;) {
        while (r.top > 0) {
            const Tensorflow__FunctionDef *f = lib->function[r.stack[--r.top]];
            for (size_t k = 0; k < f->n_node_def; k++) s_reach_node(&r, f->node_def[k]);
            any = true;
        }
        /* a reached function's gradient is reached too */
        for (size_t i = 0; i < lib->n_gradient; i++) {
            uintptr_t v = 0;
            if (zf_strmap_get(r.index, lib->gradient[i]->function_name, &v) && r.mark[v])
                s_reach_name(&r, lib->gradient[i]->gradient_func);
        }
        more = r.top > 0;
    }
    if (zf_ok(s) && any) s = s_reach_copy(&r, out);
    zf_strmap_destroy(&r.index);
    free(r.mark);
    free(r.stack);
    return s;
}
