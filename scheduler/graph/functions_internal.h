/* Shared by the function transform's files (functions.c, function_inline.c,
 * lower_control_flow.c): the growing node list, node builders and the
 * function library index.
 *
 * Names made by the lowering, after TensorFlow's lower_if_op, lower_case_op
 * and lower_while_op (without its uniquifying suffixes):
 *   If <n>:    <n>/switch_pred (Switch of the predicate by itself),
 *              <n>/pivot_f, <n>/pivot_t (Identity of its outputs 0 and 1),
 *              <n>/input_<k> (Switch of input k), <n>/then, <n>/else (calls,
 *              waiting for a pivot), <n>/output_<j> (Merge of then:j, else:j),
 *              <n>/branch_executed (Merge of the pivots), <n> (IdentityN).
 *              A non-bool predicate first goes through <n>/cond_bool (ToBool).
 *   Case <n>:  <n>/branch_index (_SwitchN of the index by itself),
 *              <n>/pivot_<b>, <n>/input_<k> (_SwitchN), <n>/branch<b>,
 *              <n>/output_<j>, <n>/branch_executed, <n>.
 *   While <n>: <n>/LoopControlInputs (NoOp, only with control inputs),
 *              <n>/enter_<i>, <n>/merge_<i>, <n>/cond, <n>/LoopCond,
 *              <n>/switch_<i>, <n>/loop_body_control, <n>/body, <n>/exit_<i>,
 *              <n>/next_iteration_<i>, <n>/LoopExecuted, <n> (IdentityN). */
#ifndef ZF_FUNCTIONS_INTERNAL_H
#define ZF_FUNCTIONS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/status.h"
#include "common/strmap.h"
#include "proto/graph.pb-c.h"
#include "scheduler/graph/nodedef_build.h"

/* Above this many nodes the transform gives up (INVALID_ARGUMENT). */
#define ZF__FN_MAX_NODES (1 << 22)

/* One inlined call: the function and the inlining it happened inside (-1:
 * the top-level graph), for refusing recursion. */
typedef struct {
    const char *fn;
    int parent;
} zf__fn_expansion_t;

typedef struct {
    const Tensorflow__FunctionDefLibrary *lib;
    zf_strmap_t *fns; /* name -> const Tensorflow__FunctionDef * */
    Tensorflow__NodeDef **nodes;
    int *origin; /* per node: the expansion it came from, or -1 */
    size_t n, cap;
    size_t bytes, max_bytes; /* the nodes' serialized size, and its bound */
    zf__fn_expansion_t *exp;
    size_t n_exp, cap_exp;
} zf__fn_ctx_t;

/* A call's attrs: a NodeDef's or a NameAttrList's entries (same layout),
 * then the signature's defaults. */
typedef struct {
    const char *key;
    const Tensorflow__AttrValue *value;
} zf__fn_kv_t;

typedef struct {
    zf__fn_kv_t *kv;
    size_t n;
    const Tensorflow__OpDef *sig; /* defaults; may be NULL */
} zf__fn_attrs_t;

/* --- the node list (functions.c) ---------------------------------------- */

/* Appends node (taken) with its origin. RESOURCE_EXHAUSTED, or
 * INVALID_ARGUMENT past ZF__FN_MAX_NODES nodes or c->max_bytes serialized
 * bytes; node is freed on error. */
zf_status_t zf__fn_push(zf__fn_ctx_t *c, Tensorflow__NodeDef *node, int origin);

/* The library function called name, or NULL. */
const Tensorflow__FunctionDef *zf__fn_find(const zf__fn_ctx_t *c, const char *name);

/* --- node builders (functions.c, over nodedef_build.h) -------------------
 * NULL / false only when out of memory; a node frees with zf__node_free(). */
Tensorflow__NodeDef *zf__fn_node_new(const char *op, const char *device, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool zf__fn_add_input(Tensorflow__NodeDef *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool zf__fn_attr_type(Tensorflow__NodeDef *n, const char *key, int dtype);
bool zf__fn_attr_types(Tensorflow__NodeDef *n, const char *key, const int *types, size_t count);
bool zf__fn_attr_copy(Tensorflow__NodeDef *n, const char *key, const Tensorflow__AttrValue *v);
/* Removes attr key (no-op when absent). */
void zf__fn_attr_remove(Tensorflow__NodeDef *n, const char *key);
/* A malloc'd formatted string, or NULL. */
char *zf__fn_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Replaces a string field of a message with a copy of s. */
bool zf__fn_set_string(char **field, const char *s);

/* Whether input s is a control input ("^x"). */
static inline bool zf__fn_is_control(const char *s)
{
    return s[0] == '^';
}

/* zf_functions_lower() with the result bounded to max_bytes serialized
 * bytes instead of ZF_GRAPHDEF_MAX_BYTES. */
zf_status_t zf__functions_lower_bounded(const Tensorflow__GraphDef *gd, size_t max_bytes,
                                        Tensorflow__GraphDef **out);

/* --- inlining (function_inline.c) ----------------------------------------- */

/* Replaces c->nodes[idx], a call of f with attrs, by f's body (appended to
 * the list) and the nodes that keep the call's name and edges. */
zf_status_t zf__fn_inline(zf__fn_ctx_t *c, size_t idx, const Tensorflow__FunctionDef *f,
                          const zf__fn_attrs_t *attrs);

/* The flattened types of a signature's input (outputs when out) args under
 * attrs: *types (malloc'd, owned by the caller) and *count. INVALID_ARGUMENT
 * naming the function and the caller when an attr is missing. */
zf_status_t zf__fn_arg_types(const Tensorflow__OpDef *sig, bool out, const zf__fn_attrs_t *attrs,
                             const char *caller, int **types, size_t *count);

/* --- lowering (lower_control_flow.c) --------------------------------------- */

/* Lowers c->nodes[idx] (If, StatelessIf, Case, StatelessCase, While,
 * StatelessWhile): appends the control-flow nodes and branch or loop calls
 * and replaces the node by the one that keeps its name. */
zf_status_t zf__fn_lower_if(zf__fn_ctx_t *c, size_t idx);
zf_status_t zf__fn_lower_case(zf__fn_ctx_t *c, size_t idx);
zf_status_t zf__fn_lower_while(zf__fn_ctx_t *c, size_t idx);

#endif
