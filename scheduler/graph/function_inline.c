/* Inlining one function call (scheduler/graph/functions.h): the body's nodes
 * renamed under the call, their FunctionDef input references turned into
 * GraphDef tensor names, placeholder attrs filled from the call, and the
 * Identity/NoOp/IdentityN nodes that connect the body to the call's edges. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/op_registry.h"
#include "common/proto_util.h"
#include "scheduler/graph/functions_internal.h"

/* Bounds a list argument's length, as the op registry does. */
#define S_MAX_LIST (1 << 20)

static const Tensorflow__AttrValue *s_lookup(const zf__fn_attrs_t *a, const char *key)
{
    const Tensorflow__AttrValue *hit = NULL;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->kv[i].key, key) == 0) hit = a->kv[i].value; /* the last one wins */
    for (size_t i = 0; !hit && a->sig && i < a->sig->n_attr; i++)
        if (strcmp(a->sig->attr[i]->name, key) == 0) hit = a->sig->attr[i]->default_value;
    return hit;
}

static const char *s_fname(const Tensorflow__OpDef *sig)
{
    return sig && sig->name ? sig->name : "";
}

static zf_status_t s_attr_error(const Tensorflow__OpDef *sig, const char *caller,
                                const Tensorflow__OpDef__ArgDef *arg, const char *key,
                                const Tensorflow__AttrValue *v, const char *want)
{
    if (!v)
        return zf_invalid_argument("function '%s' called by node '%s': attr '%s' of argument "
                                   "'%s' is missing",
                                   s_fname(sig), caller, key, arg->name);
    return zf_invalid_argument("function '%s' called by node '%s': attr '%s' of argument '%s' "
                               "has type %s, expected %s",
                               s_fname(sig), caller, key, arg->name, zf_attr_kind_name(v), want);
}

/* Appends the tensor types of one argument to *types. */
static zf_status_t s_one_arg(const Tensorflow__OpDef *sig, const Tensorflow__OpDef__ArgDef *arg,
                             const zf__fn_attrs_t *attrs, const char *caller, int **types,
                             size_t *count)
{
    const Tensorflow__AttrValue *v = NULL;
    const Tensorflow__DataType *list = NULL;
    size_t n = 1;
    int elem = (int)arg->type;
    if (arg->type_list_attr[0]) {
        v = s_lookup(attrs, arg->type_list_attr);
        if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST)
            return s_attr_error(sig, caller, arg, arg->type_list_attr, v, "list(type)");
        list = v->list->type;
        n = v->list->n_type;
    } else {
        if (elem == 0 && arg->type_attr[0]) {
            v = s_lookup(attrs, arg->type_attr);
            if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TYPE)
                return s_attr_error(sig, caller, arg, arg->type_attr, v, "type");
            elem = (int)v->type;
        }
        if (elem == 0)
            return zf_invalid_argument("function '%s' called by node '%s': argument '%s' has no "
                                       "type",
                                       s_fname(sig), caller, arg->name);
        if (arg->number_attr[0]) {
            v = s_lookup(attrs, arg->number_attr);
            if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_I)
                return s_attr_error(sig, caller, arg, arg->number_attr, v, "int");
            if (v->i < 0 || v->i > S_MAX_LIST)
                return zf_invalid_argument("function '%s' called by node '%s': attr '%s' of "
                                           "argument '%s' is %lld",
                                           s_fname(sig), caller, arg->number_attr, arg->name,
                                           (long long)v->i);
            n = (size_t)v->i;
        }
    }
    if (*count + n > S_MAX_LIST)
        return zf_invalid_argument("function '%s' called by node '%s' has too many arguments",
                                   s_fname(sig), caller);
    int *t = realloc(*types, (*count + n + 1) * sizeof *t);
    if (!t) return zf_out_of_memory("function inlining");
    *types = t;
    for (size_t k = 0; k < n; k++) t[*count + k] = list ? (int)list[k] : elem;
    *count += n;
    return ZF_STATUS_OK;
}

zf_status_t zf__fn_arg_types(const Tensorflow__OpDef *sig, bool out, const zf__fn_attrs_t *attrs,
                             const char *caller, int **types, size_t *count)
{
    *types = NULL;
    *count = 0;
    size_t n = sig ? (out ? sig->n_output_arg : sig->n_input_arg) : 0;
    for (size_t i = 0; i < n; i++) {
        zf_status_t s = s_one_arg(sig, out ? sig->output_arg[i] : sig->input_arg[i], attrs, caller,
                                  types, count);
        if (!zf_ok(s)) {
            free(*types);
            *types = NULL;
            *count = 0;
            return s;
        }
    }
    return ZF_STATUS_OK;
}

/* ---- one inlining ------------------------------------------------------------ */

typedef struct {
    zf__fn_ctx_t *c;
    const Tensorflow__FunctionDef *f;
    const char *fn;
    const zf__fn_attrs_t *attrs;
    const char *cn;     /* the call's name (borrowed from the call node) */
    const char *device; /* the call's device */
    int *in_types, *out_types;
    size_t n_in, n_out;
    size_t *arg_start, *arg_count;    /* per input arg: its flattened range */
    zf_strmap_t *args;                /* input arg name -> index (the first of a name) */
    zf_strmap_t *body;                /* body node name -> index */
    Tensorflow__NodeDef **copies;     /* per body node; NULL once pushed */
    const Tensorflow__NodeDef **view; /* per body node, pushed or not: its op and attrs */
    bool input_control;
} s_inl_t;

/* A resolved reference: tensors [start, start + count) of an argument (node
 * < 0, start counting in the flattened inputs) or of body node `node`. */
typedef struct {
    int node;
    size_t start, count;
} s_ref_t;

static bool s_parse_index(const char *s, size_t len, size_t *out)
{
    if (len == 0 || len > 9) return false;
    size_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (size_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

static int s_arg_index(const s_inl_t *s, const char *name, size_t len)
{
    uintptr_t i = 0;
    return zf_strmap_get_n(s->args, name, len, &i) ? (int)i : -1;
}

/* The positions of output arg out_arg of body node k (resolved with its
 * substituted attrs). */
static zf_status_t s_output_range(const s_inl_t *s, int k, const char *out_arg, size_t len,
                                  size_t *start, size_t *count)
{
    const Tensorflow__NodeDef *n = s->view[k];
    char *arg = strndup(out_arg, len);
    if (!arg) return zf_out_of_memory("function inlining");
    zf_status_t st = ZF_STATUS_OK;
    const Tensorflow__FunctionDef *callee = zf__fn_find(s->c, n->op);
    if (callee) {
        zf__fn_attrs_t a = {calloc(n->n_attr + 1, sizeof *a.kv), n->n_attr, callee->signature};
        if (!a.kv) st = zf_out_of_memory("function inlining");
        for (size_t i = 0; a.kv && i < n->n_attr; i++)
            a.kv[i] = (zf__fn_kv_t){n->attr[i]->key, n->attr[i]->value};
        size_t pos = 0;
        bool found = false;
        const Tensorflow__OpDef *sig = callee->signature;
        for (size_t i = 0; zf_ok(st) && !found && i < sig->n_output_arg; i++) {
            int *t = NULL;
            size_t c = 0;
            st = s_one_arg(sig, sig->output_arg[i], &a, n->name, &t, &c);
            free(t);
            if (zf_ok(st) && strcmp(sig->output_arg[i]->name, arg) == 0) {
                *start = pos;
                *count = c;
                found = true;
            }
            pos += c;
        }
        free(a.kv);
        if (zf_ok(st) && !found) st = zf_not_found("function %s has no argument '%s'", n->op, arg);
    } else {
        const zf_op_def_t *def = zf_op_lookup(n->op);
        int a = 0, b = 0;
        if (!def)
            st = zf_not_found("op '%s' is not registered", n->op);
        else
            st = zf_op_output_range(def, n, arg, &a, &b);
        *start = (size_t)a;
        *count = (size_t)(b - a);
    }
    free(arg);
    return st;
}

static zf_status_t s_bad_ref(const s_inl_t *s, const char *node, const char *ret, const char *why)
{
    if (node)
        return zf_invalid_argument("function '%s' (called by node '%s'): node '%s' has input %s",
                                   s->fn, s->cn, node, why);
    return zf_invalid_argument("function '%s' (called by node '%s'): ret '%s' is %s", s->fn, s->cn,
                               ret, why);
}

/* Resolves a data reference ("arg", "arg:i", "node:out", "node:out:i") of
 * body node `node`, or of ret `ret` when node is NULL. */
static zf_status_t s_resolve(const s_inl_t *s, const char *node, const char *ret, const char *ref,
                             s_ref_t *r)
{
    const char *c1 = strchr(ref, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    size_t len1 = c1 ? (size_t)(c1 - ref) : strlen(ref);
    char why[512];
    int a = s_arg_index(s, ref, len1);
    if (a >= 0 && !c2) {
        *r = (s_ref_t){-1, s->arg_start[a], s->arg_count[a]};
        if (!c1) return ZF_STATUS_OK;
        size_t i = 0;
        if (s_parse_index(c1 + 1, strlen(c1 + 1), &i) && i < s->arg_count[a]) {
            *r = (s_ref_t){-1, s->arg_start[a] + i, 1};
            return ZF_STATUS_OK;
        }
        snprintf(why, sizeof why, "'%s', past the %zu tensors of argument '%.*s'", ref,
                 s->arg_count[a], (int)len1, ref);
        return s_bad_ref(s, node, ret, why);
    }
    uintptr_t k = 0;
    if (!c1 || !zf_strmap_get_n(s->body, ref, len1, &k)) {
        snprintf(why, sizeof why,
                 "'%s', which names neither an argument nor a node output "
                 "(\"node:out_arg:index\")",
                 ref);
        return s_bad_ref(s, node, ret, why);
    }
    size_t out_len = c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1);
    size_t start = 0, count = 0;
    zf_status_t st = s_output_range(s, (int)k, c1 + 1, out_len, &start, &count);
    if (!zf_ok(st)) {
        snprintf(why, sizeof why, "'%s', which cannot be resolved: %s", ref, st.msg ? st.msg : "");
        zf_status_clear(&st);
        return s_bad_ref(s, node, ret, why);
    }
    *r = (s_ref_t){(int)k, start, count};
    if (!c2) return ZF_STATUS_OK;
    size_t i = 0;
    if (s_parse_index(c2 + 1, strlen(c2 + 1), &i) && i < count) {
        *r = (s_ref_t){(int)k, start + i, 1};
        return ZF_STATUS_OK;
    }
    snprintf(why, sizeof why, "'%s', past the %zu tensors of output '%.*s'", ref, count,
             (int)out_len, c1 + 1);
    return s_bad_ref(s, node, ret, why);
}

/* Adds tensor j of r as an input of n. */
static bool s_add_tensor(const s_inl_t *s, Tensorflow__NodeDef *n, const s_ref_t *r, size_t j)
{
    size_t pos = r->start + j;
    if (r->node < 0) return zf__fn_add_input(n, "%s/input/_%zu", s->cn, pos);
    const char *name = s->f->node_def[r->node]->name;
    if (pos == 0) return zf__fn_add_input(n, "%s/%s", s->cn, name);
    return zf__fn_add_input(n, "%s/%s:%zu", s->cn, name, pos);
}

/* Replaces placeholder attrs (also inside func attrs) with the call's. */
static zf_status_t s_subst(const s_inl_t *s, const char *node, const char *key,
                           Tensorflow__AttrValue **slot)
{
    Tensorflow__AttrValue *v = *slot;
    if (!v) return ZF_STATUS_OK;
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_PLACEHOLDER) {
        const char *ph = v->placeholder[0] == '$' ? v->placeholder + 1 : v->placeholder;
        const Tensorflow__AttrValue *val = s_lookup(s->attrs, ph);
        if (!val)
            return zf_invalid_argument("function '%s' (called by node '%s'): node '%s': attr "
                                       "'%s' is placeholder '$%s', which the call does not set",
                                       s->fn, s->cn, node, key, ph);
        Tensorflow__AttrValue *copy = (Tensorflow__AttrValue *)zf_proto_copy(&val->base);
        if (!copy) return zf_out_of_memory("function inlining");
        protobuf_c_message_free_unpacked(&v->base, NULL);
        *slot = copy;
        return ZF_STATUS_OK;
    }
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_FUNC && v->func)
        for (size_t i = 0; i < v->func->n_attr; i++)
            ZF_TRY(s_subst(s, node, v->func->attr[i]->key, &v->func->attr[i]->value));
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && v->list)
        for (size_t f = 0; f < v->list->n_func; f++)
            for (size_t i = 0; i < v->list->func[f]->n_attr; i++)
                ZF_TRY(s_subst(s, node, v->list->func[f]->attr[i]->key,
                               &v->list->func[f]->attr[i]->value));
    return ZF_STATUS_OK;
}

/* Colocation names (`_class` "loc:@x") of a body node that name a body node
 * or an argument follow them to their inlined names. */
static zf_status_t s_colocation(const s_inl_t *s, Tensorflow__NodeDef *n)
{
    const Tensorflow__AttrValue *v = zf_node_attr(n, "_class");
    if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST || !v->list) return ZF_STATUS_OK;
    for (size_t j = 0; j < v->list->n_s; j++) {
        ProtobufCBinaryData *c = &v->list->s[j];
        if (c->len < 5 || memcmp(c->data, "loc:@", 5) != 0) continue;
        const char *name = (const char *)c->data + 5;
        size_t len = c->len - 5;
        int a = s_arg_index(s, name, len);
        char *to = NULL;
        if (a >= 0 && s->arg_count[a] > 0)
            to = zf__fn_format("loc:@%s/input/_%zu", s->cn, s->arg_start[a]);
        else if (a < 0 && zf_strmap_get_n(s->body, name, len, NULL))
            to = zf__fn_format("loc:@%s/%.*s", s->cn, (int)len, name);
        else
            continue;
        if (!to) return zf_out_of_memory("function inlining");
        free(c->data);
        c->data = (uint8_t *)to;
        c->len = strlen(to);
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_index_body(s_inl_t *s)
{
    const Tensorflow__FunctionDef *f = s->f;
    s->body = zf_strmap_new(f->n_node_def, 0);
    s->copies = calloc(f->n_node_def + 1, sizeof *s->copies);
    s->view = calloc(f->n_node_def + 1, sizeof *s->view);
    if (!s->body || !s->copies || !s->view) return zf_out_of_memory("function inlining");
    for (size_t k = 0; k < f->n_node_def; k++) {
        const Tensorflow__NodeDef *n = f->node_def[k];
        if (!n->name[0])
            return zf_invalid_argument("function '%s' (called by node '%s'): node %zu has no "
                                       "name",
                                       s->fn, s->cn, k);
        int rc = zf_strmap_insert(s->body, n->name, k, NULL);
        if (rc == -EEXIST)
            return zf_invalid_argument("function '%s' (called by node '%s'): node '%s' is "
                                       "defined more than once",
                                       s->fn, s->cn, n->name);
        if (rc != 0) return zf_out_of_memory("function inlining");
        if (!(s->copies[k] = (Tensorflow__NodeDef *)zf_proto_copy(&n->base)))
            return zf_out_of_memory("function inlining");
        s->view[k] = s->copies[k];
        for (size_t i = 0; i < s->copies[k]->n_attr; i++)
            ZF_TRY(s_subst(s, n->name, s->copies[k]->attr[i]->key, &s->copies[k]->attr[i]->value));
    }
    /* with every body name known */
    for (size_t k = 0; k < f->n_node_def; k++) ZF_TRY(s_colocation(s, s->copies[k]));
    return ZF_STATUS_OK;
}

static zf_status_t s_signature(s_inl_t *s, const Tensorflow__NodeDef *call)
{
    const Tensorflow__OpDef *sig = s->f->signature;
    ZF_TRY(zf__fn_arg_types(sig, false, s->attrs, s->cn, &s->in_types, &s->n_in));
    ZF_TRY(zf__fn_arg_types(sig, true, s->attrs, s->cn, &s->out_types, &s->n_out));
    s->arg_start = calloc(sig->n_input_arg + 1, sizeof *s->arg_start);
    s->arg_count = calloc(sig->n_input_arg + 1, sizeof *s->arg_count);
    s->args = zf_strmap_new(sig->n_input_arg, 0);
    if (!s->arg_start || !s->arg_count || !s->args) return zf_out_of_memory("function inlining");
    size_t pos = 0;
    for (size_t i = 0; i < sig->n_input_arg; i++) {
        int rc = zf_strmap_insert(s->args, sig->input_arg[i]->name, i, NULL);
        if (rc != 0 && rc != -EEXIST) return zf_out_of_memory("function inlining");
        int *t = NULL;
        ZF_TRY(s_one_arg(sig, sig->input_arg[i], s->attrs, s->cn, &t, &s->arg_count[i]));
        free(t);
        s->arg_start[i] = pos;
        pos += s->arg_count[i];
    }
    size_t data = 0;
    while (data < call->n_input && !zf__fn_is_control(call->input[data])) data++;
    s->input_control = data < call->n_input;
    if (data != s->n_in)
        return zf_invalid_argument("function '%s' takes %zu inputs, but node '%s' calls it with "
                                   "%zu",
                                   s->fn, s->n_in, s->cn, data);
    return ZF_STATUS_OK;
}

/* "<call>/input_control_node" and "<call>/input/_<k>". */
static zf_status_t s_inputs(s_inl_t *s, const Tensorflow__NodeDef *call, int origin)
{
    if (s->input_control) {
        Tensorflow__NodeDef *n = zf__fn_node_new("NoOp", s->device, "%s/input_control_node", s->cn);
        for (size_t i = s->n_in; n && i < call->n_input; i++)
            if (!zf__fn_add_input(n, "%s", call->input[i])) {
                zf__node_free(n);
                n = NULL;
            }
        ZF_TRY(zf__fn_push(s->c, n, origin));
    }
    for (size_t k = 0; k < s->n_in; k++) {
        Tensorflow__NodeDef *n = zf__fn_node_new("Identity", s->device, "%s/input/_%zu", s->cn, k);
        bool ok = n && zf__fn_add_input(n, "%s", call->input[k]) &&
                  zf__fn_attr_type(n, "T", s->in_types[k]) &&
                  (!s->input_control || zf__fn_add_input(n, "^%s/input_control_node", s->cn));
        if (!ok) {
            zf__node_free(n);
            n = NULL;
        }
        ZF_TRY(zf__fn_push(s->c, n, origin));
    }
    return ZF_STATUS_OK;
}

/* The body node k's inputs, name and device (its op and attrs stay, for
 * resolving the references of the nodes after it). */
static zf_status_t s_body_node(s_inl_t *s, size_t k)
{
    Tensorflow__NodeDef *n = s->copies[k];
    const Tensorflow__NodeDef *orig = s->f->node_def[k];
    char **inputs = n->input;
    size_t n_inputs = n->n_input;
    n->input = NULL;
    n->n_input = 0;
    zf_status_t st = ZF_STATUS_OK;
    bool ok = true, has_control = false;
    for (size_t i = 0; ok && zf_ok(st) && i < n_inputs; i++) {
        const char *ref = inputs[i];
        if (zf__fn_is_control(ref)) {
            has_control = true;
            int a = s_arg_index(s, ref + 1, strlen(ref + 1));
            uintptr_t b = 0;
            if (a >= 0) {
                for (size_t j = 0; ok && j < s->arg_count[a]; j++)
                    ok = zf__fn_add_input(n, "^%s/input/_%zu", s->cn, s->arg_start[a] + j);
            } else if (zf_strmap_get(s->body, ref + 1, &b)) {
                ok = zf__fn_add_input(n, "^%s/%s", s->cn, ref + 1);
            } else {
                char why[256];
                snprintf(why, sizeof why, "'%s', which names no node", ref);
                st = s_bad_ref(s, orig->name, ref, why);
            }
            continue;
        }
        s_ref_t r;
        st = s_resolve(s, orig->name, NULL, ref, &r);
        for (size_t j = 0; zf_ok(st) && ok && j < r.count; j++) ok = s_add_tensor(s, n, &r, j);
    }
    for (size_t i = 0; i < n_inputs; i++) free(inputs[i]);
    free(inputs);
    bool is_call = zf__fn_find(s->c, n->op) || !strcmp(n->op, "PartitionedCall") ||
                   !strcmp(n->op, "StatefulPartitionedCall");
    if (ok && zf_ok(st) && s->input_control && (n_inputs == 0 || (is_call && !has_control)))
        ok = zf__fn_add_input(n, "^%s/input_control_node", s->cn);
    if (ok && zf_ok(st)) {
        char *name = zf__fn_format("%s/%s", s->cn, orig->name);
        ok = name != NULL;
        if (ok && n->name != protobuf_c_empty_string) free(n->name);
        if (ok) n->name = name;
    }
    if (ok && zf_ok(st) && !n->device[0] && s->device[0])
        ok = zf__fn_set_string(&n->device, s->device);
    if (zf_ok(st) && !ok) st = zf_out_of_memory("function inlining");
    return st;
}

static const char *s_ret(const Tensorflow__FunctionDef *f, const char *arg, bool control)
{
    size_t n = control ? f->n_control_ret : f->n_ret;
    for (size_t i = 0; i < n; i++) {
        const char *key = control ? f->control_ret[i]->key : f->ret[i]->key;
        if (strcmp(key, arg) == 0) return control ? f->control_ret[i]->value : f->ret[i]->value;
    }
    return NULL;
}

/* "<call>/output/_<j>" and "<call>/output_control_node". */
static zf_status_t s_outputs(s_inl_t *s, int origin)
{
    const Tensorflow__OpDef *sig = s->f->signature;
    size_t j = 0;
    for (size_t a = 0; a < sig->n_output_arg; a++) {
        const char *name = sig->output_arg[a]->name;
        const char *ref = s_ret(s->f, name, false);
        if (!ref)
            return zf_invalid_argument("function '%s' (called by node '%s'): output '%s' has no "
                                       "ret",
                                       s->fn, s->cn, name);
        s_ref_t r;
        ZF_TRY(s_resolve(s, NULL, name, ref, &r));
        int *t = NULL;
        size_t want = 0;
        ZF_TRY(s_one_arg(sig, sig->output_arg[a], s->attrs, s->cn, &t, &want));
        free(t);
        if (r.count != want)
            return zf_invalid_argument("function '%s' (called by node '%s'): ret '%s' is '%s', "
                                       "%zu tensors for an output of %zu",
                                       s->fn, s->cn, name, ref, r.count, want);
        for (size_t k = 0; k < r.count; k++, j++) {
            Tensorflow__NodeDef *n =
                zf__fn_node_new("Identity", s->device, "%s/output/_%zu", s->cn, j);
            if (n && (!s_add_tensor(s, n, &r, k) || !zf__fn_attr_type(n, "T", s->out_types[j]))) {
                zf__node_free(n);
                n = NULL;
            }
            ZF_TRY(zf__fn_push(s->c, n, origin));
        }
    }
    Tensorflow__NodeDef *n = zf__fn_node_new("NoOp", s->device, "%s/output_control_node", s->cn);
    bool ok = n != NULL;
    for (size_t k = 0; ok && k < s->n_out; k++)
        ok = zf__fn_add_input(n, "^%s/output/_%zu", s->cn, k);
    for (size_t k = 0; ok && k < s->f->n_control_ret; k++) {
        const char *v = s->f->control_ret[k]->value;
        if (!zf_strmap_get(s->body, v, NULL)) {
            zf__node_free(n);
            return zf_invalid_argument("function '%s' (called by node '%s'): control_ret '%s' "
                                       "names no node",
                                       s->fn, s->cn, v);
        }
        ok = zf__fn_add_input(n, "^%s/%s", s->cn, v);
    }
    if (ok && n->n_input == 0 && s->input_control)
        ok = zf__fn_add_input(n, "^%s/input_control_node", s->cn);
    if (!ok) {
        zf__node_free(n);
        n = NULL;
    }
    return zf__fn_push(s->c, n, origin);
}

/* The node that keeps the call's name: IdentityN of the outputs, or NoOp. */
static Tensorflow__NodeDef *s_substitute(const s_inl_t *s)
{
    Tensorflow__NodeDef *n =
        zf__fn_node_new(s->n_out ? "IdentityN" : "NoOp", s->device, "%s", s->cn);
    bool ok = n != NULL;
    for (size_t j = 0; ok && j < s->n_out; j++)
        ok = zf__fn_add_input(n, "%s/output/_%zu", s->cn, j);
    if (ok && s->n_out) ok = zf__fn_attr_types(n, "T", s->out_types, s->n_out);
    if (ok) ok = zf__fn_add_input(n, "^%s/output_control_node", s->cn);
    if (!ok) {
        zf__node_free(n);
        return NULL;
    }
    return n;
}

static zf_status_t s_expansion(zf__fn_ctx_t *c, size_t idx, const char *fn, int *id)
{
    for (int e = c->origin[idx]; e >= 0; e = c->exp[e].parent)
        if (strcmp(c->exp[e].fn, fn) == 0)
            return zf_invalid_argument("recursive call to function '%s' (node '%s'): a function "
                                       "that calls itself cannot be inlined",
                                       fn, c->nodes[idx]->name);
    if (c->n_exp == c->cap_exp) {
        size_t cap = c->cap_exp ? 2 * c->cap_exp : 16;
        zf__fn_expansion_t *e = realloc(c->exp, cap * sizeof *e);
        if (!e) return zf_out_of_memory("function inlining");
        c->exp = e;
        c->cap_exp = cap;
    }
    if (c->n_exp >= ZF__FN_MAX_NODES)
        return zf_invalid_argument("too many function calls to inline (at node '%s')",
                                   c->nodes[idx]->name);
    c->exp[c->n_exp] = (zf__fn_expansion_t){fn, c->origin[idx]};
    *id = (int)c->n_exp++;
    return ZF_STATUS_OK;
}

static zf_status_t s_inline(s_inl_t *s, size_t idx)
{
    zf__fn_ctx_t *c = s->c;
    Tensorflow__NodeDef *call = c->nodes[idx];
    int origin = -1;
    ZF_TRY(s_expansion(c, idx, s->fn, &origin));
    ZF_TRY(s_signature(s, call));
    ZF_TRY(s_index_body(s));
    ZF_TRY(s_inputs(s, call, origin));
    for (size_t k = 0; k < s->f->n_node_def; k++) ZF_TRY(s_body_node(s, k));
    for (size_t k = 0; k < s->f->n_node_def; k++) {
        Tensorflow__NodeDef *n = s->copies[k];
        s->copies[k] = NULL;
        ZF_TRY(zf__fn_push(c, n, origin));
    }
    ZF_TRY(s_outputs(s, origin));
    Tensorflow__NodeDef *sub = s_substitute(s);
    if (!sub) return zf_out_of_memory("function inlining");
    c->nodes[idx] = sub; /* the call's origin stays */
    zf__node_free(call);
    return ZF_STATUS_OK;
}

zf_status_t zf__fn_inline(zf__fn_ctx_t *c, size_t idx, const Tensorflow__FunctionDef *f,
                          const zf__fn_attrs_t *attrs)
{
    const Tensorflow__NodeDef *call = c->nodes[idx];
    if (!f->signature)
        return zf_invalid_argument("node '%s' calls a function without a signature", call->name);
    /* s borrows the call's name and device until the call is replaced, so
     * keep copies */
    char *cn = strdup(call->name), *dev = strdup(call->device);
    if (!cn || !dev) {
        free(cn);
        free(dev);
        return zf_out_of_memory("function inlining");
    }
    s_inl_t s = {.c = c, .f = f, .fn = f->signature->name, .attrs = attrs, .cn = cn, .device = dev};
    zf_status_t st = s_inline(&s, idx);
    for (size_t k = 0; s.copies && k < f->n_node_def; k++) zf__node_free(s.copies[k]);
    free(s.copies);
    free(s.view);
    zf_strmap_destroy(&s.body);
    zf_strmap_destroy(&s.args);
    free(s.in_types);
    free(s.out_types);
    free(s.arg_start);
    free(s.arg_count);
    free(cn);
    free(dev);
    return st;
}
