/* Tests for the function transform (scheduler/graph/functions.h): the exact
 * nodes, inputs and attrs that inlining and control-flow lowering produce,
 * _Arg/_Retval graphs, the reachable part of a library, and the errors for
 * malformed functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graph.h"
#include "common/graphdef_io.h"
#include "scheduler/graph/functions.h"
#include "scheduler/graph/functions_internal.h"
#include "test_util.h"

/* Lowers text; the result must load as a graph. */
static Tensorflow__GraphDef *s_lower(const char *text)
{
    Tensorflow__GraphDef *gd = zf_test_graphdef(text), *out = NULL;
    zf_status_t s = zf_functions_lower(gd, &out);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    assert_non_null(out);
    zf_graphdef_free(&gd);
    zf_graph_t *g = NULL;
    s = zf_graph_new_from_graphdef(out, &g);
    if (!zf_ok(s)) fail_msg("the lowered graph does not load: %s", zf_status_msg(&s));
    zf_graph_destroy(&g);
    return out;
}

static void s_expect_error(const char *text, zf_code_t code, const char *needle)
{
    Tensorflow__GraphDef *gd = zf_test_graphdef(text), *out = NULL;
    zf_status_t s = zf_functions_lower(gd, &out);
    assert_int_equal(s.code, code);
    if (!strstr(zf_status_msg(&s), needle)) fail_msg("'%s' not in '%s'", needle, zf_status_msg(&s));
    assert_null(out);
    zf_status_clear(&s);
    zf_graphdef_free(&gd);
}

static const Tensorflow__NodeDef *s_find(const Tensorflow__GraphDef *gd, const char *name)
{
    for (size_t i = 0; i < gd->n_node; i++)
        if (strcmp(gd->node[i]->name, name) == 0) return gd->node[i];
    return NULL;
}

/* Node name has op and exactly the inputs listed (NULL-terminated). */
static const Tensorflow__NodeDef *s_expect(const Tensorflow__GraphDef *gd, const char *name,
                                           const char *op, ...)
{
    const Tensorflow__NodeDef *n = s_find(gd, name);
    if (!n) fail_msg("no node '%s'", name);
    if (strcmp(n->op, op) != 0) fail_msg("node '%s' is a %s, want %s", name, n->op, op);
    va_list ap;
    va_start(ap, op);
    size_t k = 0;
    for (const char *in; (in = va_arg(ap, const char *)); k++) {
        if (k >= n->n_input) fail_msg("node '%s' has %zu inputs, want more ('%s')", name, k, in);
        if (strcmp(n->input[k], in) != 0)
            fail_msg("node '%s' input %zu is '%s', want '%s'", name, k, n->input[k], in);
    }
    va_end(ap);
    if (k != n->n_input) fail_msg("node '%s' has %zu inputs, want %zu", name, n->n_input, k);
    return n;
}

static int64_t s_int(const Tensorflow__NodeDef *n, const char *key)
{
    int64_t v = 0;
    zf_status_t s = zf_node_attr_int(n, key, &v);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    return v;
}

static zf_dtype_t s_type(const Tensorflow__NodeDef *n, const char *key)
{
    zf_dtype_t v = ZF_INVALID;
    zf_status_t s = zf_node_attr_type(n, key, &v);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    return v;
}

static void s_types(const Tensorflow__NodeDef *n, const char *key, size_t count, ...)
{
    const Tensorflow__DataType *t = NULL;
    size_t got = 0;
    zf_status_t s = zf_node_attr_list_type(n, key, &t, &got);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    assert_int_equal(got, count);
    va_list ap;
    va_start(ap, count);
    for (size_t i = 0; i < count; i++) assert_int_equal((int)t[i], va_arg(ap, int));
    va_end(ap);
}

static void s_string(const Tensorflow__NodeDef *n, const char *key, const char *want)
{
    const uint8_t *d = NULL;
    size_t len = 0;
    zf_status_t s = zf_node_attr_string(n, key, &d, &len);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    if (len != strlen(want) || memcmp(d, want, len) != 0)
        fail_msg("attr %s is '%.*s', want '%s'", key, (int)len, d, want);
}

/* AddOne(x: float) -> (y: float): y = x + 1, a Const without inputs in it. */
#define ADD_ONE                                                                                    \
    "function { signature { name: 'AddOne' input_arg { name: 'x' type: DT_FLOAT }"                 \
    " output_arg { name: 'y' type: DT_FLOAT } }"                                                   \
    " node_def { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"           \
    "   attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }" \
    " node_def { name: 'add' op: 'AddV2' input: 'x' input: 'one:output:0'"                         \
    "   attr { key: 'T' value { type: DT_FLOAT } } }"                                              \
    " ret { key: 'y' value: 'add:z:0' } }"

#define PH_A "node { name: 'a' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"

/* ---- inlining ------------------------------------------------------------- */

static void test_functions_inline_a_call_by_function_name(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd =
        s_lower(PH_A "node { name: 'call' op: 'AddOne' input: 'a' }"
                     "node { name: 'use' op: 'Identity' input: 'call' input: '^call'"
                     " attr { key: 'T' value { type: DT_FLOAT } } }"
                     "library { " ADD_ONE " }");
    assert_int_equal(gd->n_node, 8);
    const Tensorflow__NodeDef *n = s_expect(gd, "call/input/_0", "Identity", "a", NULL);
    assert_int_equal(s_type(n, "T"), ZF_FLOAT);
    s_expect(gd, "call/one", "Const", NULL); /* no control inputs on the call: none here */
    s_expect(gd, "call/add", "AddV2", "call/input/_0", "call/one", NULL);
    n = s_expect(gd, "call/output/_0", "Identity", "call/add", NULL);
    assert_int_equal(s_type(n, "T"), ZF_FLOAT);
    s_expect(gd, "call/output_control_node", "NoOp", "^call/output/_0", NULL);
    n = s_expect(gd, "call", "IdentityN", "call/output/_0", "^call/output_control_node", NULL);
    s_types(n, "T", 1, ZF_FLOAT);
    s_expect(gd, "use", "Identity", "call", "^call", NULL);
    assert_null(gd->library); /* nothing reaches a function any more */
    zf_graphdef_free(&gd);
}

static void test_functions_inline_partitioned_calls_with_attrs_and_devices(void **state)
{
    (void)state;
    /* Two(x: T) -> (a: T, b: T): IdentityN's second output by "node:out:1";
     * the placeholder $T comes from f's attrs; body nodes without a device
     * take the call's, "pinned" keeps its own. */
    Tensorflow__GraphDef *gd = s_lower(
        PH_A "node { name: 'c' op: 'StatefulPartitionedCall' input: 'a' device: '/device:CPU:0'"
             " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
             " attr { key: 'Tout' value { list { type: DT_FLOAT type: DT_FLOAT } } }"
             " attr { key: 'f' value { func { name: 'Two' attr { key: 'T' value { type: "
             "DT_FLOAT } } } } } }"
             "library { function { signature { name: 'Two' input_arg { name: 'x' type_attr: 'T' }"
             " output_arg { name: 'a' type_attr: 'T' } output_arg { name: 'b' type_attr: 'T' }"
             " attr { name: 'T' type: 'type' } }"
             " node_def { name: 'n' op: 'IdentityN' input: 'x' input: 'x:0'"
             "   attr { key: 'T' value { list { type: DT_FLOAT type: DT_FLOAT } } } }"
             " node_def { name: 'pinned' op: 'Neg' input: 'n:output:1' device: '/device:CPU:1'"
             "   attr { key: 'T' value { placeholder: 'T' } }"
             "   attr { key: '_class' value { list { s: 'loc:@n' s: 'loc:@x' s: 'loc:@far' } } } }"
             " ret { key: 'a' value: 'n:output:0' } ret { key: 'b' value: 'pinned:y:0' } } }");
    const Tensorflow__NodeDef *n =
        s_expect(gd, "c/n", "IdentityN", "c/input/_0", "c/input/_0", NULL);
    assert_string_equal(n->device, "/device:CPU:0");
    n = s_expect(gd, "c/pinned", "Neg", "c/n:1", NULL);
    assert_string_equal(n->device, "/device:CPU:1");
    assert_int_equal(s_type(n, "T"), ZF_FLOAT); /* the placeholder, filled */
    const ProtobufCBinaryData *loc = NULL;
    size_t n_loc = 0;
    assert_int_equal(zf_node_attr_list_string(n, "_class", &loc, &n_loc).code, ZF_OK);
    assert_int_equal(n_loc, 3); /* colocation follows body nodes and arguments */
    assert_int_equal(loc[0].len, strlen("loc:@c/n"));
    assert_memory_equal(loc[0].data, "loc:@c/n", loc[0].len);
    assert_int_equal(loc[1].len, strlen("loc:@c/input/_0"));
    assert_memory_equal(loc[1].data, "loc:@c/input/_0", loc[1].len);
    assert_int_equal(loc[2].len, strlen("loc:@far"));
    assert_memory_equal(loc[2].data, "loc:@far", loc[2].len);
    s_expect(gd, "c/output/_0", "Identity", "c/n", NULL);
    s_expect(gd, "c/output/_1", "Identity", "c/pinned", NULL);
    n = s_expect(gd, "c", "IdentityN", "c/output/_0", "c/output/_1", "^c/output_control_node",
                 NULL);
    assert_string_equal(n->device, "/device:CPU:0");
    s_types(n, "T", 2, ZF_FLOAT, ZF_FLOAT);
    zf_graphdef_free(&gd);
}

static void test_functions_forward_control_inputs_and_control_rets(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_lower(
        PH_A "node { name: 'dep' op: 'NoOp' }"
             "node { name: 'call' op: 'Effect' input: 'a' input: '^dep' }"
             "library { function { signature { name: 'Effect' input_arg { name: 'x' type: "
             "DT_FLOAT } }"
             " node_def { name: 'k' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
             "   attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 2 } } } }"
             " node_def { name: 'p' op: 'Print' input: 'x' input: 'k:output:0' input: '^x'"
             "   attr { key: 'T' value { type: DT_FLOAT } }"
             "   attr { key: 'U' value { list { type: DT_FLOAT } } } }"
             " control_ret { key: 'effect' value: 'p' } } }");
    s_expect(gd, "call/input_control_node", "NoOp", "^dep", NULL);
    s_expect(gd, "call/input/_0", "Identity", "a", "^call/input_control_node", NULL);
    s_expect(gd, "call/k", "Const", "^call/input_control_node", NULL);
    s_expect(gd, "call/p", "Print", "call/input/_0", "call/k", "^call/input/_0", NULL);
    s_expect(gd, "call/output_control_node", "NoOp", "^call/p", NULL);
    s_expect(gd, "call", "NoOp", "^call/output_control_node", NULL);
    zf_graphdef_free(&gd);
}

static void test_functions_inline_nested_calls_and_refuse_recursion(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_lower(
        PH_A "node { name: 'outer' op: 'Twice' input: 'a' }"
             "library { " ADD_ONE " function { signature { name: 'Twice'"
             " input_arg { name: 'x' type: DT_FLOAT } output_arg { name: 'y' type: DT_FLOAT } }"
             " node_def { name: 'first' op: 'AddOne' input: 'x' }"
             " node_def { name: 'second' op: 'AddOne' input: 'first:y:0' }"
             " ret { key: 'y' value: 'second:y:0' } } }");
    s_expect(gd, "outer/first/input/_0", "Identity", "outer/input/_0", NULL);
    s_expect(gd, "outer/first/add", "AddV2", "outer/first/input/_0", "outer/first/one", NULL);
    s_expect(gd, "outer/second/input/_0", "Identity", "outer/first", NULL);
    s_expect(gd, "outer/output/_0", "Identity", "outer/second", NULL);
    s_expect(gd, "outer", "IdentityN", "outer/output/_0", "^outer/output_control_node", NULL);
    assert_null(gd->library);
    zf_graphdef_free(&gd);

    s_expect_error(PH_A "node { name: 'r' op: 'F' input: 'a' }"
                        "library { function { signature { name: 'F' input_arg { name: 'x' type: "
                        "DT_FLOAT } output_arg { name: 'y' type: DT_FLOAT } }"
                        " node_def { name: 'again' op: 'F' input: 'x' }"
                        " ret { key: 'y' value: 'again:y:0' } } }",
                   ZF_INVALID_ARGUMENT, "recursive call to function 'F' (node 'r/again')");
    /* F -> G -> F */
    s_expect_error(PH_A "node { name: 'r' op: 'F' input: 'a' }"
                        "library { function { signature { name: 'F' input_arg { name: 'x' type: "
                        "DT_FLOAT } output_arg { name: 'y' type: DT_FLOAT } }"
                        " node_def { name: 'g' op: 'G' input: 'x' } ret { key: 'y' value: "
                        "'g:y:0' } }"
                        " function { signature { name: 'G' input_arg { name: 'x' type: DT_FLOAT }"
                        " output_arg { name: 'y' type: DT_FLOAT } }"
                        " node_def { name: 'f' op: 'F' input: 'x' } ret { key: 'y' value: "
                        "'f:y:0' } } }",
                   ZF_INVALID_ARGUMENT, "recursive call to function 'F' (node 'r/g/f')");
}

/* F0 passes x through an Identity padded with a 4 KiB attr; each F<k>
 * calls F<k-1> twice, so F10 inlines to 1024 padded nodes (over 4 MiB)
 * from a library of a few KiB. */
static char *s_doubling_graph(void)
{
    size_t cap = 64 * 1024, len = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    char pad[4097];
    memset(pad, 'p', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    len += (size_t)snprintf(t + len, cap - len,
                            PH_A "node { name: 'top' op: 'F10' input: 'a' } library {"
                                 " function { signature { name: 'F0' input_arg { name: 'x' type: "
                                 "DT_FLOAT } output_arg { name: 'y' type: DT_FLOAT } }"
                                 " node_def { name: 'id' op: 'Identity' input: 'x'"
                                 " attr { key: 'T' value { type: DT_FLOAT } }"
                                 " attr { key: '_pad' value { s: '%s' } } }"
                                 " ret { key: 'y' value: 'id:output:0' } }",
                            pad);
    for (int k = 1; k <= 10; k++)
        len += (size_t)snprintf(t + len, cap - len,
                                " function { signature { name: 'F%d' input_arg { name: 'x' type: "
                                "DT_FLOAT } output_arg { name: 'y' type: DT_FLOAT } }"
                                " node_def { name: 'a' op: 'F%d' input: 'x' }"
                                " node_def { name: 'b' op: 'F%d' input: 'a:y:0' }"
                                " ret { key: 'y' value: 'b:y:0' } }",
                                k, k - 1, k - 1);
    len += (size_t)snprintf(t + len, cap - len, " }");
    assert_true(len < cap);
    return t;
}

static void test_functions_bound_the_bytes_that_inlining_makes(void **state)
{
    (void)state;
    char *text = s_doubling_graph();
    Tensorflow__GraphDef *gd = zf_test_graphdef(text), *out = NULL;
    free(text);
    zf_status_t s = zf_functions_lower(gd, &out);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    assert_true(protobuf_c_message_get_packed_size(&out->base) > ((size_t)4 << 20));
    zf_graphdef_free(&out);

    s = zf__functions_lower_bounded(gd, (size_t)1 << 20, &out);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&s), "larger than 1048576 bytes"));
    assert_null(out);
    zf_status_clear(&s);
    zf_graphdef_free(&gd);
}

static void test_functions_refuse_malformed_functions(void **state)
{
    (void)state;
    s_expect_error(PH_A "node { name: 'c' op: 'PartitionedCall' input: 'a'"
                        " attr { key: 'f' value { func { name: 'Nope' } } } }",
                   ZF_INVALID_ARGUMENT,
                   "node 'c' (PartitionedCall) calls function 'Nope', which is not in the "
                   "graph's library");
    s_expect_error(PH_A "node { name: 'c' op: 'PartitionedCall' input: 'a' }", ZF_INVALID_ARGUMENT,
                   "node 'c' (PartitionedCall): missing attr 'f'");
    s_expect_error(PH_A "node { name: 'c' op: 'AddOne' input: 'a' input: 'a' }"
                        "library { " ADD_ONE " }",
                   ZF_INVALID_ARGUMENT,
                   "function 'AddOne' takes 1 inputs, but node 'c' calls it with 2");
#define BAD_REF(in, t, ret)                                                                        \
    PH_A "node { name: 'c' op: 'F' input: 'a' }"                                                   \
         "library { function { signature { name: 'F' input_arg { name: 'x' type: DT_FLOAT }"       \
         " output_arg { name: 'y' type: DT_FLOAT } }"                                              \
         " node_def { name: 'n' op: 'Neg' input: '" in "' attr { key: 'T' value { " t " } } }"     \
         " ret { key: 'y' value: '" ret "' } } }"
    s_expect_error(BAD_REF("ghost", "type: DT_FLOAT", "n:y:0"), ZF_INVALID_ARGUMENT,
                   "function 'F' (called by node 'c'): node 'n' has input 'ghost', which names "
                   "neither an argument nor a node output");
    s_expect_error(BAD_REF("x:3", "type: DT_FLOAT", "n:y:0"), ZF_INVALID_ARGUMENT,
                   "node 'n' has input 'x:3', past the 1 tensors of argument 'x'");
    s_expect_error(BAD_REF("x", "type: DT_FLOAT", "n:nope:0"), ZF_INVALID_ARGUMENT,
                   "function 'F' (called by node 'c'): ret 'y' is 'n:nope:0', which cannot be "
                   "resolved: op Neg has no argument 'nope'");
    s_expect_error(BAD_REF("x", "type: DT_FLOAT", "n:y:1"), ZF_INVALID_ARGUMENT,
                   "past the 1 tensors of output 'y'");
    s_expect_error(BAD_REF("x", "placeholder: 'T'", "n:y:0"), ZF_INVALID_ARGUMENT,
                   "function 'F' (called by node 'c'): node 'n': attr 'T' is placeholder '$T', "
                   "which the call does not set");
    s_expect_error(PH_A "node { name: 'c' op: 'F' input: 'a' }"
                        "library { function { signature { name: 'F' input_arg { name: 'x' "
                        "type_attr: 'T' } } } }",
                   ZF_INVALID_ARGUMENT,
                   "function 'F' called by node 'c': attr 'T' of argument 'x' is missing");
    s_expect_error(PH_A "node { name: 'c' op: 'F' input: 'a' }"
                        "library { function { signature { name: 'F' input_arg { name: 'x' type: "
                        "DT_FLOAT } output_arg { name: 'y' type: DT_FLOAT } } } }",
                   ZF_INVALID_ARGUMENT, "function 'F' (called by node 'c'): output 'y' has no ret");
    s_expect_error(PH_A "node { name: 'c' op: 'F' input: 'a' }"
                        "library { function { signature { name: 'F' input_arg { name: 'x' type: "
                        "DT_FLOAT } } control_ret { key: 'e' value: 'ghost' } } }",
                   ZF_INVALID_ARGUMENT, "control_ret 'ghost' names no node");
    s_expect_error(PH_A "library { function { signature { name: 'Neg' } } }", ZF_INVALID_ARGUMENT,
                   "Cannot add function 'Neg' because an op with the same name already exists.");
    s_expect_error(PH_A "library { function { signature { name: 'F' } }"
                        " function { signature { name: 'F' } } }",
                   ZF_INVALID_ARGUMENT, "function 'F' is defined more than once in the library");
    s_expect_error(PH_A "library { function { node_def { name: 'n' op: 'NoOp' } } }",
                   ZF_INVALID_ARGUMENT, "function 0 of the library has no name");
    s_expect_error(PH_A "node { name: 'c' op: 'F' }"
                        "library { function { signature { name: 'F' }"
                        " node_def { name: 'n' op: 'NoOp' } node_def { name: 'n' op: 'NoOp' } } }",
                   ZF_INVALID_ARGUMENT,
                   "function 'F' (called by node 'c'): node 'n' is defined more than once");
    s_expect_error(PH_A "node { name: 'c' op: 'F' }"
                        "library { function { signature { name: 'F' }"
                        " node_def { name: 'n' op: 'NoOp' input: '^ghost' } } }",
                   ZF_INVALID_ARGUMENT,
                   "function 'F' (called by node 'c'): node 'n' has input '^ghost', which names "
                   "no node");
    /* recursion through a lowered If inside the function */
    s_expect_error(
        PH_A "node { name: 'c' op: 'F' input: 'a' }"
             "library { function { signature { name: 'F' input_arg { name: 'x' type: DT_FLOAT }"
             " output_arg { name: 'y' type: DT_FLOAT } }"
             " node_def { name: 'p' op: 'Const' attr { key: 'dtype' value { type: DT_BOOL } }"
             "   attr { key: 'value' value { tensor { dtype: DT_BOOL bool_val: true } } } }"
             " node_def { name: 'if' op: 'If' input: 'p:output:0' input: 'x'"
             "   attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
             "   attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
             "   attr { key: 'then_branch' value { func { name: 'F' } } }"
             "   attr { key: 'else_branch' value { func { name: 'F' } } } }"
             " ret { key: 'y' value: 'if:output:0' } } }",
        ZF_INVALID_ARGUMENT, "recursive call to function 'F' (node 'c/if/then')");
}

/* ---- control flow --------------------------------------------------------- */

#define NEG_FN(name)                                                                               \
    "function { signature { name: '" name "' input_arg { name: 'x' type: DT_FLOAT }"               \
    " output_arg { name: 'y' type: DT_FLOAT } }"                                                   \
    " node_def { name: 'n' op: 'Neg' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }"      \
    " ret { key: 'y' value: 'n:y:0' } }"

static void test_functions_lower_if_to_switch_and_merge(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_lower(
        PH_A "node { name: 'p' op: 'Placeholder' attr { key: 'dtype' value { type: DT_BOOL } } }"
             "node { name: 'dep' op: 'NoOp' }"
             "node { name: 'if' op: 'StatelessIf' input: 'p' input: 'a' input: '^dep'"
             " attr { key: 'Tcond' value { type: DT_BOOL } }"
             " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
             " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
             " attr { key: 'then_branch' value { func { name: 'T' } } }"
             " attr { key: 'else_branch' value { func { name: 'E' } } } }"
             "library { " ADD_ONE " " NEG_FN("T") " " NEG_FN("E") " }");
    const Tensorflow__NodeDef *n = s_expect(gd, "if/switch_pred", "Switch", "p", "p", "^dep", NULL);
    assert_int_equal(s_type(n, "T"), ZF_BOOL);
    s_expect(gd, "if/pivot_f", "Identity", "if/switch_pred", NULL);
    s_expect(gd, "if/pivot_t", "Identity", "if/switch_pred:1", NULL);
    n = s_expect(gd, "if/input_0", "Switch", "a", "p", NULL);
    assert_int_equal(s_type(n, "T"), ZF_FLOAT);
    /* the branch calls, inlined: their entries wait for the pivots */
    s_expect(gd, "if/then/input_control_node", "NoOp", "^if/pivot_t", NULL);
    s_expect(gd, "if/then/input/_0", "Identity", "if/input_0:1", "^if/then/input_control_node",
             NULL);
    s_expect(gd, "if/else/input/_0", "Identity", "if/input_0", "^if/else/input_control_node", NULL);
    s_expect(gd, "if/then/n", "Neg", "if/then/input/_0", NULL);
    n = s_expect(gd, "if/output_0", "Merge", "if/then", "if/else", NULL);
    assert_int_equal(s_int(n, "N"), 2);
    assert_int_equal(s_type(n, "T"), ZF_FLOAT);
    s_expect(gd, "if/branch_executed", "Merge", "if/pivot_t", "if/pivot_f", "^if/then", "^if/else",
             NULL);
    n = s_expect(gd, "if", "IdentityN", "if/output_0", "^if/branch_executed", NULL);
    s_types(n, "T", 1, ZF_FLOAT);
    zf_graphdef_free(&gd);

    /* a non-bool cond goes through ToBool (TensorFlow's truthiness) */
    gd = s_lower(PH_A "node { name: 'if' op: 'If' input: 'a' input: 'a'"
                      " attr { key: 'Tcond' value { type: DT_FLOAT } }"
                      " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
                      " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
                      " attr { key: 'then_branch' value { func { name: 'T' } } }"
                      " attr { key: 'else_branch' value { func { name: 'E' } } } }"
                      "library { " NEG_FN("T") " " NEG_FN("E") " }");
    n = s_expect(gd, "if/cond_bool", "ToBool", "a", NULL);
    assert_int_equal(s_type(n, "T"), ZF_FLOAT);
    s_expect(gd, "if/switch_pred", "Switch", "if/cond_bool", "if/cond_bool", NULL);
    s_expect(gd, "if/input_0", "Switch", "a", "if/cond_bool", NULL);
    zf_graphdef_free(&gd);

    s_expect_error(PH_A "node { name: 'if' op: 'If' input: 'a' input: 'a'"
                        " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
                        " attr { key: 'Tout' value { list { } } } }",
                   ZF_INVALID_ARGUMENT, "node 'if' (If): missing attr 'then_branch'");
}

static void test_functions_lower_case_to_switchn_and_merge(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_lower(
        PH_A "node { name: 'i' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }"
             "node { name: 'case' op: 'Case' input: 'i' input: 'a'"
             " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
             " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
             " attr { key: 'branches' value { list { func { name: 'A' } func { name: 'B' }"
             " func { name: 'AddOne' } } } } }"
             "library { " ADD_ONE " " NEG_FN("A") " " NEG_FN("B") " }");
    const Tensorflow__NodeDef *n = s_expect(gd, "case/branch_index", "_SwitchN", "i", "i", NULL);
    assert_int_equal(s_int(n, "num_outs"), 3);
    s_expect(gd, "case/pivot_0", "Identity", "case/branch_index", NULL);
    s_expect(gd, "case/pivot_2", "Identity", "case/branch_index:2", NULL);
    n = s_expect(gd, "case/input_0", "_SwitchN", "a", "i", NULL);
    assert_int_equal(s_type(n, "T"), ZF_FLOAT);
    s_expect(gd, "case/branch2/input/_0", "Identity", "case/input_0:2",
             "^case/branch2/input_control_node", NULL);
    s_expect(gd, "case/branch2/one", "Const", "^case/branch2/input_control_node", NULL);
    n = s_expect(gd, "case/output_0", "Merge", "case/branch0", "case/branch1", "case/branch2",
                 NULL);
    assert_int_equal(s_int(n, "N"), 3);
    s_expect(gd, "case/branch_executed", "Merge", "case/pivot_0", "case/pivot_1", "case/pivot_2",
             "^case/branch0", "^case/branch1", "^case/branch2", NULL);
    s_expect(gd, "case", "IdentityN", "case/output_0", "^case/branch_executed", NULL);
    zf_graphdef_free(&gd);
}

static void test_functions_lower_while_to_a_frame(void **state)
{
    (void)state;
    /* while (i < n) i = i + 1, over (i, n) */
    Tensorflow__GraphDef *gd = s_lower(
        "node { name: 'i0' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
        " attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 0 } } } }"
        "node { name: 'n' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
        " attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 5 } } } }"
        "node { name: 'dep' op: 'NoOp' }"
        "node { name: 'w' op: 'While' input: 'i0' input: 'n' input: '^dep'"
        " attr { key: 'T' value { list { type: DT_INT32 type: DT_INT32 } } }"
        " attr { key: 'parallel_iterations' value { i: 4 } }"
        " attr { key: 'cond' value { func { name: 'C' } } }"
        " attr { key: 'body' value { func { name: 'B' } } } }"
        "library { function { signature { name: 'C' input_arg { name: 'i' type: DT_INT32 }"
        " input_arg { name: 'n' type: DT_INT32 } output_arg { name: 'b' type: DT_BOOL } }"
        " node_def { name: 'lt' op: 'Less' input: 'i' input: 'n' attr { key: 'T' value { type: "
        "DT_INT32 } } }"
        " ret { key: 'b' value: 'lt:z:0' } }"
        " function { signature { name: 'B' input_arg { name: 'i' type: DT_INT32 }"
        " input_arg { name: 'n' type: DT_INT32 } output_arg { name: 'i2' type: DT_INT32 }"
        " output_arg { name: 'n2' type: DT_INT32 } }"
        " node_def { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
        "   attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 1 } } } }"
        " node_def { name: 'add' op: 'AddV2' input: 'i' input: 'one:output:0'"
        "   attr { key: 'T' value { type: DT_INT32 } } }"
        " ret { key: 'i2' value: 'add:z:0' } ret { key: 'n2' value: 'n' } } }");
    s_expect(gd, "w/LoopControlInputs", "NoOp", "^dep", NULL);
    const Tensorflow__NodeDef *n =
        s_expect(gd, "w/enter_1", "Enter", "n", "^w/LoopControlInputs", NULL);
    s_string(n, "frame_name", "w");
    assert_int_equal(s_int(n, "parallel_iterations"), 4);
    assert_int_equal(s_type(n, "T"), ZF_INT32);
    n = s_expect(gd, "w/merge_0", "Merge", "w/enter_0", "w/next_iteration_0", NULL);
    assert_int_equal(s_int(n, "N"), 2);
    s_expect(gd, "w/cond/input_control_node", "NoOp", "^w/merge_0", NULL);
    s_expect(gd, "w/cond/input/_1", "Identity", "w/merge_1", "^w/cond/input_control_node", NULL);
    s_expect(gd, "w/cond/lt", "Less", "w/cond/input/_0", "w/cond/input/_1", NULL);
    s_expect(gd, "w/LoopCond", "LoopCond", "w/cond", NULL);
    s_expect(gd, "w/switch_1", "Switch", "w/merge_1", "w/LoopCond", NULL);
    s_expect(gd, "w/loop_body_control", "Identity", "w/switch_0:1", NULL);
    s_expect(gd, "w/body/input_control_node", "NoOp", "^w/loop_body_control", NULL);
    s_expect(gd, "w/body/one", "Const", "^w/body/input_control_node", NULL); /* in the frame */
    s_expect(gd, "w/body/output/_1", "Identity", "w/body/input/_1", NULL);
    s_expect(gd, "w/exit_0", "Exit", "w/switch_0", NULL);
    s_expect(gd, "w/next_iteration_1", "NextIteration", "w/body:1", NULL);
    s_expect(gd, "w/LoopExecuted", "NoOp", "^w/exit_0", "^w/exit_1", NULL);
    n = s_expect(gd, "w", "IdentityN", "w/exit_0", "w/exit_1", "^w/LoopExecuted", NULL);
    s_types(n, "T", 2, ZF_INT32, ZF_INT32);
    zf_graphdef_free(&gd);

    s_expect_error("node { name: 'w' op: 'StatelessWhile' attr { key: 'T' value { list { } } }"
                   " attr { key: 'cond' value { func { name: 'C' } } }"
                   " attr { key: 'body' value { func { name: 'C' } } } }"
                   "library { " NEG_FN("C") " }",
                   ZF_INVALID_ARGUMENT, "node 'w' (StatelessWhile) has no loop variables");
}

/* ---- graphs as functions, libraries ---------------------------------------- */

static void test_functions_turn_args_and_retvals_into_placeholders_and_identities(void **state)
{
    (void)state;
    const char *text = "node { name: 'x' op: '_Arg' attr { key: 'T' value { type: DT_FLOAT } }"
                       " attr { key: 'index' value { i: 0 } } }"
                       "node { name: 'out' op: '_Retval' input: 'x'"
                       " attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'index' value { "
                       "i: 0 } } }";
    Tensorflow__GraphDef *src = zf_test_graphdef(text);
    assert_string_equal(zf_functions_arg_name(src, 0), "x");
    assert_null(zf_functions_arg_name(src, 1));
    assert_string_equal(zf_functions_retval_name(src, 0), "out");
    zf_graphdef_free(&src);
    Tensorflow__GraphDef *gd = s_lower(text);
    const Tensorflow__NodeDef *n = s_expect(gd, "x", "Placeholder", NULL);
    assert_int_equal(s_type(n, "dtype"), ZF_FLOAT);
    assert_null(zf_node_attr(n, "index"));
    n = s_expect(gd, "out", "Identity", "x", NULL);
    assert_int_equal(s_type(n, "T"), ZF_FLOAT);
    zf_graphdef_free(&gd);

    s_expect_error("node { name: 'x' op: '_Arg' attr { key: 'T' value { type: DT_FLOAT } }"
                   " attr { key: 'index' value { i: 1 } } }",
                   ZF_INVALID_ARGUMENT,
                   "_Arg node 'x' has index 1, but the graph has 1 _Arg nodes");
    s_expect_error("node { name: 'x' op: '_Arg' attr { key: 'T' value { type: DT_FLOAT } }"
                   " attr { key: 'index' value { i: 0 } } }"
                   "node { name: 'y' op: '_Retval' input: 'x' attr { key: 'T' value { type: "
                   "DT_FLOAT } } attr { key: 'index' value { i: 0 } } }"
                   "node { name: 'z' op: '_Retval' input: 'x' attr { key: 'T' value { type: "
                   "DT_FLOAT } } attr { key: 'index' value { i: 0 } } }",
                   ZF_INVALID_ARGUMENT, "_Retval nodes 'y' and 'z' both have index 0");
    s_expect_error("node { name: 'x' op: '_Arg' attr { key: 'index' value { i: 0 } } }",
                   ZF_INVALID_ARGUMENT, "node 'x' (_Arg): missing attr 'T'");
}

static void test_functions_keep_only_reachable_definitions(void **state)
{
    (void)state;
    /* F's body names H through a func attr; G is reached by nothing. */
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'c' op: 'F' }"
        "library { function { signature { name: 'F' }"
        "  node_def { name: 'k' op: 'PartitionedCall' attr { key: 'f' value { func { name: 'H' "
        "} } } } }"
        " function { signature { name: 'G' } } function { signature { name: 'H' } }"
        " gradient { function_name: 'H' gradient_func: 'G' } }");
    Tensorflow__FunctionDefLibrary *lib = NULL;
    zf_status_t s = zf_functions_reachable(gd->library, gd->node, gd->n_node, &lib);
    assert_int_equal(s.code, ZF_OK);
    assert_non_null(lib);
    assert_int_equal(lib->n_function, 3); /* F, H, and G as H's gradient */
    assert_string_equal(lib->function[0]->signature->name, "F");
    assert_string_equal(lib->function[1]->signature->name, "G");
    assert_string_equal(lib->function[2]->signature->name, "H");
    assert_int_equal(lib->n_gradient, 1);
    protobuf_c_message_free_unpacked(&lib->base, NULL);
    s = zf_functions_reachable(gd->library, gd->node, 0, &lib);
    assert_int_equal(s.code, ZF_OK);
    assert_null(lib);
    zf_graphdef_free(&gd);

    /* a graph without functions needs nothing */
    gd = zf_test_graphdef(PH_A);
    assert_false(zf_functions_needed(gd));
    Tensorflow__GraphDef *out = NULL;
    s = zf_functions_lower(gd, &out);
    assert_int_equal(s.code, ZF_OK);
    assert_null(out);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_functions_inline_a_call_by_function_name),
        cmocka_unit_test(test_functions_inline_partitioned_calls_with_attrs_and_devices),
        cmocka_unit_test(test_functions_forward_control_inputs_and_control_rets),
        cmocka_unit_test(test_functions_inline_nested_calls_and_refuse_recursion),
        cmocka_unit_test(test_functions_bound_the_bytes_that_inlining_makes),
        cmocka_unit_test(test_functions_refuse_malformed_functions),
        cmocka_unit_test(test_functions_lower_if_to_switch_and_merge),
        cmocka_unit_test(test_functions_lower_case_to_switchn_and_merge),
        cmocka_unit_test(test_functions_lower_while_to_a_frame),
        cmocka_unit_test(test_functions_turn_args_and_retvals_into_placeholders_and_identities),
        cmocka_unit_test(test_functions_keep_only_reachable_definitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
