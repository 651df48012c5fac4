/* Lowering functional control flow (scheduler/graph/functions.h): If and
 * Case to Switch/_SwitchN and Merge, While to a frame of Enter, Merge,
 * LoopCond, Switch, NextIteration and Exit, each with its branch or loop
 * functions called in place (the calls are inlined afterwards). Names are
 * listed in functions_internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "scheduler/graph/functions_internal.h"

/* n when ok, else NULL (n freed): for building a node in one expression. */
static Tensorflow__NodeDef *s_done(Tensorflow__NodeDef *n, bool ok)
{
    if (n && ok) return n;
    zf__node_free(n);
    return NULL;
}

static size_t s_num_data(const Tensorflow__NodeDef *n)
{
    size_t k = 0;
    while (k < n->n_input && !zf__fn_is_control(n->input[k])) k++;
    return k;
}

/* Copies n's control inputs to dst. */
static bool s_controls(Tensorflow__NodeDef *dst, const Tensorflow__NodeDef *n)
{
    for (size_t i = s_num_data(n); i < n->n_input; i++)
        if (!zf__fn_add_input(dst, "%s", n->input[i])) return false;
    return true;
}

static zf_status_t s_func(const zf__fn_ctx_t *c, const Tensorflow__NodeDef *n, const char *key,
                          const Tensorflow__NameAttrList **out)
{
    ZF_TRY(zf_node_attr_func(n, key, out));
    if (!zf__fn_find(c, (*out)->name))
        return zf_invalid_argument("node '%s' (%s) calls function '%s', which is not in the "
                                   "graph's library",
                                   n->name, n->op, (*out)->name);
    return ZF_STATUS_OK;
}

/* A type list attr as ints (*v malloc'd), checked to have want entries
 * (want < 0: any number). */
static zf_status_t s_types(const Tensorflow__NodeDef *n, const char *key, long want, int **v,
                           size_t *count)
{
    const Tensorflow__DataType *t = NULL;
    *v = NULL;
    ZF_TRY(zf_node_attr_list_type(n, key, &t, count));
    if (want >= 0 && *count != (size_t)want)
        return zf_invalid_argument("node '%s' (%s): attr '%s' lists %zu types for %ld inputs",
                                   n->name, n->op, key, *count, want);
    *v = malloc((*count + 1) * sizeof **v);
    if (!*v) return zf_out_of_memory("lowering control flow");
    for (size_t i = 0; i < *count; i++) (*v)[i] = (int)t[i];
    return ZF_STATUS_OK;
}

/* A call of fn named "<name>/<suffix>" on inputs "<name>/<in>_<k>:<port>"
 * (k < n_in), waiting for control. */
static Tensorflow__NodeDef *s_call(const char *name, const char *dev,
                                   const Tensorflow__NameAttrList *fn, const char *suffix,
                                   size_t n_in, const char *in, int port, const char *control)
{
    Tensorflow__NodeDef *n = zf__fn_node_new(fn->name, dev, "%s/%s", name, suffix);
    bool ok = n != NULL;
    for (size_t k = 0; ok && k < n_in; k++) {
        ok = port ? zf__fn_add_input(n, "%s/%s_%zu:%d", name, in, k, port)
                  : zf__fn_add_input(n, "%s/%s_%zu", name, in, k);
    }
    if (ok && control) ok = zf__fn_add_input(n, "^%s/%s", name, control);
    for (size_t i = 0; ok && i < fn->n_attr; i++)
        ok = zf__fn_attr_copy(n, fn->attr[i]->key, fn->attr[i]->value);
    return s_done(n, ok);
}

/* The node that keeps the lowered node's name: IdentityN of "<name>/<out>_<j>"
 * waiting for "<name>/<control>", or a NoOp when there are no outputs. */
static Tensorflow__NodeDef *s_keeper(const char *name, const char *dev, const int *types,
                                     size_t n_out, const char *out, const char *control)
{
    Tensorflow__NodeDef *n = zf__fn_node_new(n_out ? "IdentityN" : "NoOp", dev, "%s", name);
    bool ok = n != NULL;
    for (size_t j = 0; ok && j < n_out; j++) ok = zf__fn_add_input(n, "%s/%s_%zu", name, out, j);
    if (ok && n_out) ok = zf__fn_attr_types(n, "T", types, n_out);
    if (ok) ok = zf__fn_add_input(n, "^%s/%s", name, control);
    return s_done(n, ok);
}

/* A Merge "<name>/<suffix>" of N inputs of type t. */
static Tensorflow__NodeDef *s_merge(const char *name, const char *dev, const char *suffix, int t,
                                    size_t n_in)
{
    Tensorflow__NodeDef *n = zf__fn_node_new("Merge", dev, "%s/%s", name, suffix);
    return s_done(n, n && zf__fn_attr_type(n, "T", t) &&
                         zf__node_add_attr(n, "N", zf__attr_int((int64_t)n_in)));
}

/* Replaces c->nodes[idx] by keeper (the old node freed). */
static zf_status_t s_replace(zf__fn_ctx_t *c, size_t idx, Tensorflow__NodeDef *keeper)
{
    if (!keeper) return zf_out_of_memory("lowering control flow");
    zf__node_free(c->nodes[idx]);
    c->nodes[idx] = keeper;
    return ZF_STATUS_OK;
}

/* ---- If ----------------------------------------------------------------------- */

typedef struct {
    const Tensorflow__NodeDef *node;
    const char *name, *dev;
    int origin;
    int *tin, *tout;
    size_t n_in, n_out;
} s_lower_t;

/* The node's two function attrs k1 and k2 and its number of data inputs,
 * which must be at least one (first names it in the error). */
static zf_status_t s_prologue(const zf__fn_ctx_t *c, const s_lower_t *L, const char *k1,
                              const char *k2, const Tensorflow__NameAttrList **f1,
                              const Tensorflow__NameAttrList **f2, const char *first, size_t *nd)
{
    ZF_TRY(s_func(c, L->node, k1, f1));
    ZF_TRY(s_func(c, L->node, k2, f2));
    *nd = s_num_data(L->node);
    if (*nd == 0)
        return zf_invalid_argument("node '%s' (%s) has no %s", L->name, L->node->op, first);
    return ZF_STATUS_OK;
}

static zf_status_t s_if(zf__fn_ctx_t *c, s_lower_t *L)
{
    const Tensorflow__NodeDef *node = L->node;
    const char *name = L->name, *dev = L->dev;
    const Tensorflow__NameAttrList *then_fn = NULL, *else_fn = NULL;
    size_t nd = 0;
    ZF_TRY(s_prologue(c, L, "then_branch", "else_branch", &then_fn, &else_fn, "cond input", &nd));
    zf_dtype_t tcond = ZF_BOOL;
    ZF_TRY(zf_node_attr_type_or(node, "Tcond", ZF_BOOL, &tcond));
    ZF_TRY(s_types(node, "Tin", (long)nd - 1, &L->tin, &L->n_in));
    ZF_TRY(s_types(node, "Tout", -1, &L->tout, &L->n_out));
    int o = L->origin;
    char pred[1024];
    snprintf(pred, sizeof pred, "%s", node->input[0]);
    if (tcond != ZF_BOOL) {
        /* TensorFlow's truthiness: a scalar is true when non-zero (a string
         * when non-empty), any other tensor when it has elements */
        Tensorflow__NodeDef *n = zf__fn_node_new("ToBool", dev, "%s/cond_bool", name);
        ZF_TRY(zf__fn_push(c,
                           s_done(n, n && zf__fn_add_input(n, "%s", node->input[0]) &&
                                         zf__fn_attr_type(n, "T", (int)tcond)),
                           o));
        snprintf(pred, sizeof pred, "%s/cond_bool", name);
    }
    Tensorflow__NodeDef *n = zf__fn_node_new("Switch", dev, "%s/switch_pred", name);
    ZF_TRY(zf__fn_push(c,
                       s_done(n, n && zf__fn_add_input(n, "%s", pred) &&
                                     zf__fn_add_input(n, "%s", pred) &&
                                     zf__fn_attr_type(n, "T", ZF_BOOL) && s_controls(n, node)),
                       o));
    const char *pivots[2] = {"pivot_f", "pivot_t"};
    for (int b = 0; b < 2; b++) {
        n = zf__fn_node_new("Identity", dev, "%s/%s", name, pivots[b]);
        ZF_TRY(zf__fn_push(c,
                           s_done(n, n &&
                                         (b ? zf__fn_add_input(n, "%s/switch_pred:1", name)
                                            : zf__fn_add_input(n, "%s/switch_pred", name)) &&
                                         zf__fn_attr_type(n, "T", ZF_BOOL)),
                           o));
    }
    for (size_t k = 0; k < L->n_in; k++) {
        n = zf__fn_node_new("Switch", dev, "%s/input_%zu", name, k);
        ZF_TRY(zf__fn_push(c,
                           s_done(n, n && zf__fn_add_input(n, "%s", node->input[k + 1]) &&
                                         zf__fn_add_input(n, "%s", pred) &&
                                         zf__fn_attr_type(n, "T", L->tin[k])),
                           o));
    }
    ZF_TRY(zf__fn_push(c, s_call(name, dev, then_fn, "then", L->n_in, "input", 1, "pivot_t"), o));
    ZF_TRY(zf__fn_push(c, s_call(name, dev, else_fn, "else", L->n_in, "input", 0, "pivot_f"), o));
    for (size_t j = 0; j < L->n_out; j++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "output_%zu", j);
        n = s_merge(name, dev, suffix, L->tout[j], 2);
        bool ok =
            n && (j ? zf__fn_add_input(n, "%s/then:%zu", name, j) &&
                          zf__fn_add_input(n, "%s/else:%zu", name, j)
                    : zf__fn_add_input(n, "%s/then", name) && zf__fn_add_input(n, "%s/else", name));
        ZF_TRY(zf__fn_push(c, s_done(n, ok), o));
    }
    n = s_merge(name, dev, "branch_executed", ZF_BOOL, 2);
    ZF_TRY(zf__fn_push(c,
                       s_done(n, n && zf__fn_add_input(n, "%s/pivot_t", name) &&
                                     zf__fn_add_input(n, "%s/pivot_f", name) &&
                                     zf__fn_add_input(n, "^%s/then", name) &&
                                     zf__fn_add_input(n, "^%s/else", name)),
                       o));
    return ZF_STATUS_OK;
}

/* Runs one lowering with the node's name and device copied (the node is
 * replaced at the end). */
static zf_status_t s_lower(zf__fn_ctx_t *c, size_t idx,
                           zf_status_t (*fn)(zf__fn_ctx_t *, s_lower_t *), const char *keep_out,
                           const char *keep_control)
{
    s_lower_t L = {.node = c->nodes[idx], .origin = c->origin[idx]};
    char *name = strdup(L.node->name), *dev = strdup(L.node->device);
    L.name = name;
    L.dev = dev;
    zf_status_t s = name && dev ? fn(c, &L) : zf_out_of_memory("lowering control flow");
    if (zf_ok(s))
        s = s_replace(c, idx, s_keeper(name, dev, L.tout, L.n_out, keep_out, keep_control));
    free(L.tin);
    free(L.tout);
    free(name);
    free(dev);
    return s;
}

zf_status_t zf__fn_lower_if(zf__fn_ctx_t *c, size_t idx)
{
    return s_lower(c, idx, s_if, "output", "branch_executed");
}

/* ---- Case --------------------------------------------------------------------- */

static zf_status_t s_case(zf__fn_ctx_t *c, s_lower_t *L)
{
    const Tensorflow__NodeDef *node = L->node;
    const char *name = L->name, *dev = L->dev;
    const Tensorflow__AttrValue *v = zf_node_attr(node, "branches");
    if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST || v->list->n_func == 0)
        return zf_invalid_argument("node '%s' (%s): attr 'branches' must list at least one "
                                   "function",
                                   name, node->op);
    size_t nb = v->list->n_func;
    for (size_t b = 0; b < nb; b++)
        if (!zf__fn_find(c, v->list->func[b]->name))
            return zf_invalid_argument("node '%s' (%s) calls function '%s', which is not in the "
                                       "graph's library",
                                       name, node->op, v->list->func[b]->name);
    size_t nd = s_num_data(node);
    if (nd == 0)
        return zf_invalid_argument("node '%s' (%s) has no branch_index input", name, node->op);
    ZF_TRY(s_types(node, "Tin", (long)nd - 1, &L->tin, &L->n_in));
    ZF_TRY(s_types(node, "Tout", -1, &L->tout, &L->n_out));
    int o = L->origin;
    const char *index = node->input[0];
    Tensorflow__NodeDef *n = zf__fn_node_new("_SwitchN", dev, "%s/branch_index", name);
    ZF_TRY(zf__fn_push(c,
                       s_done(n, n && zf__fn_add_input(n, "%s", index) &&
                                     zf__fn_add_input(n, "%s", index) &&
                                     zf__fn_attr_type(n, "T", ZF_INT32) &&
                                     zf__node_add_attr(n, "num_outs", zf__attr_int((int64_t)nb)) &&
                                     s_controls(n, node)),
                       o));
    for (size_t b = 0; b < nb; b++) {
        n = zf__fn_node_new("Identity", dev, "%s/pivot_%zu", name, b);
        bool ok = n && (b ? zf__fn_add_input(n, "%s/branch_index:%zu", name, b)
                          : zf__fn_add_input(n, "%s/branch_index", name));
        ZF_TRY(zf__fn_push(c, s_done(n, ok && zf__fn_attr_type(n, "T", ZF_INT32)), o));
    }
    for (size_t k = 0; k < L->n_in; k++) {
        n = zf__fn_node_new("_SwitchN", dev, "%s/input_%zu", name, k);
        ZF_TRY(zf__fn_push(
            c,
            s_done(n, n && zf__fn_add_input(n, "%s", node->input[k + 1]) &&
                          zf__fn_add_input(n, "%s", index) && zf__fn_attr_type(n, "T", L->tin[k]) &&
                          zf__node_add_attr(n, "num_outs", zf__attr_int((int64_t)nb))),
            o));
    }
    for (size_t b = 0; b < nb; b++) {
        char suffix[32], pivot[32];
        snprintf(suffix, sizeof suffix, "branch%zu", b);
        snprintf(pivot, sizeof pivot, "pivot_%zu", b);
        ZF_TRY(zf__fn_push(
            c, s_call(name, dev, v->list->func[b], suffix, L->n_in, "input", (int)b, pivot), o));
    }
    for (size_t j = 0; j < L->n_out; j++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "output_%zu", j);
        n = s_merge(name, dev, suffix, L->tout[j], nb);
        bool ok = n != NULL;
        for (size_t b = 0; ok && b < nb; b++)
            ok = j ? zf__fn_add_input(n, "%s/branch%zu:%zu", name, b, j)
                   : zf__fn_add_input(n, "%s/branch%zu", name, b);
        ZF_TRY(zf__fn_push(c, s_done(n, ok), o));
    }
    n = s_merge(name, dev, "branch_executed", ZF_INT32, nb);
    bool ok = n != NULL;
    for (size_t b = 0; ok && b < nb; b++) ok = zf__fn_add_input(n, "%s/pivot_%zu", name, b);
    for (size_t b = 0; ok && b < nb; b++) ok = zf__fn_add_input(n, "^%s/branch%zu", name, b);
    return zf__fn_push(c, s_done(n, ok), o);
}

zf_status_t zf__fn_lower_case(zf__fn_ctx_t *c, size_t idx)
{
    return s_lower(c, idx, s_case, "output", "branch_executed");
}

/* ---- While -------------------------------------------------------------------- */

/* A one-input node "<name>/<prefix>_<i>" of op reading in. */
static Tensorflow__NodeDef *s_unary(const char *op, const char *name, const char *dev,
                                    const char *prefix, size_t i, const char *in, int t)
{
    Tensorflow__NodeDef *n = zf__fn_node_new(op, dev, "%s/%s_%zu", name, prefix, i);
    return s_done(n, n && zf__fn_add_input(n, "%s", in) && zf__fn_attr_type(n, "T", t));
}

static zf_status_t s_while(zf__fn_ctx_t *c, s_lower_t *L)
{
    const Tensorflow__NodeDef *node = L->node;
    const char *name = L->name, *dev = L->dev;
    const Tensorflow__NameAttrList *cond = NULL, *body = NULL;
    size_t nd = 0;
    ZF_TRY(s_prologue(c, L, "cond", "body", &cond, &body, "loop variables", &nd));
    ZF_TRY(s_types(node, "T", (long)nd, &L->tout, &L->n_out));
    int64_t parallel = 10;
    ZF_TRY(zf_node_attr_int_or(node, "parallel_iterations", 10, &parallel));
    int o = L->origin;
    const int *t = L->tout;
    bool controls = nd < node->n_input;
    Tensorflow__NodeDef *n = NULL;
    if (controls) {
        n = zf__fn_node_new("NoOp", dev, "%s/LoopControlInputs", name);
        ZF_TRY(zf__fn_push(c, s_done(n, n && s_controls(n, node)), o));
    }
    char buf[1200];
    for (size_t i = 0; i < nd; i++) {
        n = s_unary("Enter", name, dev, "enter", i, node->input[i], t[i]);
        bool ok = n && zf__node_add_attr(n, "frame_name", zf__attr_string(name)) &&
                  zf__node_add_attr(n, "is_constant", zf__attr_bool(false)) &&
                  zf__node_add_attr(n, "parallel_iterations", zf__attr_int(parallel)) &&
                  (!controls || zf__fn_add_input(n, "^%s/LoopControlInputs", name));
        ZF_TRY(zf__fn_push(c, s_done(n, ok), o));
        n = s_merge(name, dev, "merge", t[i], 2);
        /* s_merge names it "<name>/merge": give it its index */
        ok = n && zf__fn_add_input(n, "%s/enter_%zu", name, i) &&
             zf__fn_add_input(n, "%s/next_iteration_%zu", name, i);
        snprintf(buf, sizeof buf, "%s/merge_%zu", name, i);
        ok = ok && zf__fn_set_string(&n->name, buf);
        ZF_TRY(zf__fn_push(c, s_done(n, ok), o));
    }
    ZF_TRY(zf__fn_push(c, s_call(name, dev, cond, "cond", nd, "merge", 0, "merge_0"), o));
    n = zf__fn_node_new("LoopCond", dev, "%s/LoopCond", name);
    ZF_TRY(zf__fn_push(c, s_done(n, n && zf__fn_add_input(n, "%s/cond", name)), o));
    snprintf(buf, sizeof buf, "%s/LoopCond", name);
    for (size_t i = 0; i < nd; i++) {
        char in[1200];
        snprintf(in, sizeof in, "%s/merge_%zu", name, i);
        n = s_unary("Switch", name, dev, "switch", i, in, t[i]);
        ZF_TRY(zf__fn_push(c, s_done(n, n && zf__fn_add_input(n, "%s", buf)), o));
    }
    n = zf__fn_node_new("Identity", dev, "%s/loop_body_control", name);
    ZF_TRY(zf__fn_push(c,
                       s_done(n, n && zf__fn_add_input(n, "%s/switch_0:1", name) &&
                                     zf__fn_attr_type(n, "T", t[0])),
                       o));
    ZF_TRY(
        zf__fn_push(c, s_call(name, dev, body, "body", nd, "switch", 1, "loop_body_control"), o));
    for (size_t i = 0; i < nd; i++) {
        snprintf(buf, sizeof buf, "%s/switch_%zu", name, i);
        ZF_TRY(zf__fn_push(c, s_unary("Exit", name, dev, "exit", i, buf, t[i]), o));
        if (i)
            snprintf(buf, sizeof buf, "%s/body:%zu", name, i);
        else
            snprintf(buf, sizeof buf, "%s/body", name);
        ZF_TRY(
            zf__fn_push(c, s_unary("NextIteration", name, dev, "next_iteration", i, buf, t[i]), o));
    }
    n = zf__fn_node_new("NoOp", dev, "%s/LoopExecuted", name);
    bool ok = n != NULL;
    for (size_t i = 0; ok && i < nd; i++) ok = zf__fn_add_input(n, "^%s/exit_%zu", name, i);
    return zf__fn_push(c, s_done(n, ok), o);
}

zf_status_t zf__fn_lower_while(zf__fn_ctx_t *c, size_t idx)
{
    return s_lower(c, idx, s_while, "exit", "LoopExecuted");
}
