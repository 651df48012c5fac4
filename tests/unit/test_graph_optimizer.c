/* The partition graph optimizer: what each pass rewrites and what it must
 * leave alone, checked on the rewritten GraphDef, and values that stay
 * the same with and without it through the in-process session. */
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
#include "common/tensor_proto.h"
#include "executor/engine/graph_optimizer.h"
#include "executor/kernels/kernel.h"
#include "session/local_session.h"
#include "test_util.h"

#define F32 " attr { key: 'T' value { type: DT_FLOAT } }"
#define PH(n)                                                                                      \
    "node { name: '" n "' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
#define CONST2(n, a, b)                                                                            \
    "node { name: '" n "' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"              \
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }"       \
    " float_val: " #a " float_val: " #b " } } } }"

static int s_setup(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    return 0;
}

static zf_optimizer_stats_t s_optimize(Tensorflow__GraphDef *gd, int level, size_t max_bytes)
{
    zf_optimizer_options_t o = {level, max_bytes};
    zf_optimizer_stats_t st;
    ASSERT_OK(zf_optimize_graph(gd, &o, &st));
    return st;
}

static const Tensorflow__NodeDef *s_find(const Tensorflow__GraphDef *gd, const char *name)
{
    for (size_t i = 0; i < gd->n_node; i++)
        if (strcmp(gd->node[i]->name, name) == 0) return gd->node[i];
    return NULL;
}

/* The node's inputs, space-separated. */
static void s_assert_inputs(const Tensorflow__GraphDef *gd, const char *name, const char *want)
{
    const Tensorflow__NodeDef *nd = s_find(gd, name);
    if (!nd) fail_msg("no node %s", name);
    char buf[1024] = "";
    size_t used = 0;
    for (size_t k = 0; k < nd->n_input; k++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", k ? " " : "", nd->input[k]);
    assert_string_equal(buf, want);
}

/* The float elements of Const node name's value. */
static void s_assert_const(const Tensorflow__GraphDef *gd, const char *name, const float *want,
                           int64_t n)
{
    const Tensorflow__NodeDef *nd = s_find(gd, name);
    if (!nd) fail_msg("no node %s", name);
    assert_string_equal(nd->op, "Const");
    assert_int_equal(nd->n_input, 0);
    const Tensorflow__AttrValue *v = zf_node_attr(nd, "value");
    assert_non_null(v);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(v->tensor, &t));
    assert_int_equal(zf_tensor_num_elements(t), n);
    const float *got = zf_tensor_data(t);
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s[%lld] = %g, want %g", name, (long long)i, (double)got[i], (double)want[i]);
    zf_tensor_unref(&t);
}

static void test_constant_subgraphs_fold_into_consts_under_their_names(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(PH("x") CONST2("a", 1, 2) CONST2(
        "b", 3, -4) "node { name: 'c' op: 'Add' input: 'a' input: 'b'" F32 " }"
                    "node { name: 'd' op: 'Square' input: 'c'" F32 " }"
                    "node { name: 'e' op: 'Mul' input: 'd' input: 'x'" F32 " }"
                    "node { name: 'f' op: 'Neg' input: 'a' input: '^x'" F32 " }");
    zf_optimizer_stats_t st = s_optimize(gd, ZF_OPT_L1, 0);
    /* c = [4, -2], d = c * c = [16, 4]; e reads x; f waits for x */
    assert_int_equal(st.folded, 2);
    s_assert_const(gd, "d", (const float[]){16, 4}, 2);
    assert_null(s_find(gd, "c")); /* folded, then read only by d, which folded */
    assert_null(s_find(gd, "b"));     /* its only consumer folded */
    assert_non_null(s_find(gd, "a")); /* f still reads it */
    s_assert_inputs(gd, "e", "d x");
    s_assert_inputs(gd, "f", "a ^x");
    zf_graphdef_free(&gd);
}

static void test_folding_leaves_stateful_large_and_failing_nodes(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'shape' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
        " attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }"
        " int_val: 2048 int_val: 2048 } } } }"
        "node { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
        " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }"
        "node { name: 'big' op: 'Fill' input: 'shape' input: 'one' " F32 " }"
        "node { name: 'rand' op: 'RandomUniform' input: 'shape'"
        " attr { key: 'T' value { type: DT_INT32 } } attr { key: 'dtype' value { type: DT_FLOAT } "
        "} }" CONST2("a", 1, 2) "node { name: 'm' op: 'MatMul' input: 'a' input: 'a'" F32 " }");
    /* 16 MiB of ones is over the 10 MiB bound; RandomUniform is stateful; a
     * MatMul of vectors fails (the step will say so) */
    zf_optimizer_stats_t st = s_optimize(gd, ZF_OPT_L1, 0);
    assert_int_equal(st.folded, 0);
    assert_string_equal(s_find(gd, "big")->op, "Fill");
    assert_string_equal(s_find(gd, "rand")->op, "RandomUniform");
    assert_string_equal(s_find(gd, "m")->op, "MatMul");
    /* with a larger bound the Fill folds */
    st = s_optimize(gd, ZF_OPT_L1, (size_t)32 << 20);
    assert_int_equal(st.folded, 1);
    assert_string_equal(s_find(gd, "big")->op, "Const");
    assert_non_null(s_find(gd, "shape")); /* RandomUniform still reads it */
    assert_null(s_find(gd, "one"));
    zf_graphdef_free(&gd);
}

static void test_common_subexpressions_and_identities_go(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        PH("x") PH("y") "node { name: 's1' op: 'Square' input: 'x'" F32 " }"
                        "node { name: 's2' op: 'Square' input: 'x'" F32 " }"
                        "node { name: 's3' op: 'Square' input: 'y'" F32 " }"
                        "node { name: 'n1' op: 'Neg' input: 's1' input: '^y'" F32 " }"
                        "node { name: 'n2' op: 'Neg' input: 's2' input: '^y' input: '^y'" F32 " }"
                        "node { name: 'i1' op: 'Identity' input: 'n1'" F32 " }"
                        "node { name: 'i2' op: 'StopGradient' input: 'i1'" F32 " }"
                        "node { name: 'ic' op: 'Identity' input: 's3' input: '^x'" F32 " }"
                        "node { name: 'sum' op: 'AddN' input: 'i2' input: 'n2' input: 'ic'"
                        " attr { key: 'N' value { i: 3 } }" F32 " }"
                        "node { name: 'r' op: 'RandomUniform' input: 'ic'"
                        " attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'dtype' value { "
                        "type: DT_FLOAT } } }"
                        "node { name: 'r2' op: 'RandomUniform' input: 'ic'"
                        " attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'dtype' value { "
                        "type: DT_FLOAT } } }"
                        "node { name: 'target' op: 'Identity' input: 'x'" F32 " }");
    zf_optimizer_stats_t st = s_optimize(gd, ZF_OPT_L1, 0);
    /* s2 is s1 and n2 (the same control input, once or twice) is n1; i1 and
     * i2 forward n1; ic waits for x, so it stays; stateful nodes never
     * merge; an Identity nobody reads (a target) stays */
    assert_int_equal(st.merged, 2);
    assert_int_equal(st.forwarded, 2);
    assert_null(s_find(gd, "s2"));
    assert_null(s_find(gd, "n2"));
    assert_null(s_find(gd, "i1"));
    assert_null(s_find(gd, "i2"));
    s_assert_inputs(gd, "sum", "n1 n1 ic");
    s_assert_inputs(gd, "n1", "s1 ^y");
    assert_non_null(s_find(gd, "r"));
    assert_non_null(s_find(gd, "r2"));
    assert_non_null(s_find(gd, "target"));
    zf_graphdef_free(&gd);
}

/* A cond's branch pivots (Identity of a Switch output) and the Identity a
 * received control value goes through keep their nodes: control edges
 * from them carry deadness. */
static void test_pivots_and_received_controls_stay(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        PH("x") "node { name: 'p' op: 'Placeholder' attr { key: 'dtype' value { type: DT_BOOL } } }"
                "node { name: 'sw' op: 'Switch' input: 'x' input: 'p'" F32 " }"
                "node { name: 'pivot' op: 'Identity' input: 'sw:1'" F32 " }"
                "node { name: 'k' op: 'Const' input: '^pivot' attr { key: 'dtype' value { type: "
                "DT_FLOAT } }"
                " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: "
                "2 } } } }"
                "node { name: 'rv' op: '_Recv' attr { key: 'tensor_type' value { type: DT_FLOAT } }"
                " attr { key: 'tensor_name' value { s: 'edge' } } attr { key: 'send_device' value "
                "{ s: 'a' } }"
                " attr { key: 'recv_device' value { s: 'b' } }"
                " attr { key: 'send_device_incarnation' value { i: 1 } }"
                " attr { key: 'client_terminated' value { b: false } } }"
                "node { name: 'rid' op: 'Identity' input: 'rv'" F32 " }"
                "node { name: 'out' op: 'Mul' input: 'k' input: 'sw:1' input: '^rid'" F32 " }");
    zf_optimizer_stats_t st = s_optimize(gd, ZF_OPT_L1, 0);
    assert_int_equal(st.forwarded, 0);
    assert_int_equal(st.folded, 0);
    s_assert_inputs(gd, "k", "^pivot");
    s_assert_inputs(gd, "out", "k sw:1 ^rid");
    zf_graphdef_free(&gd);
}

static void test_level_zero_and_unreadable_graphs_stay_as_written(void **state)
{
    (void)state;
    const char *text = CONST2("a", 1, 2)
        CONST2("b", 3, 4) "node { name: 'c' op: 'Add' input: 'a' input: 'b'" F32 " }"
                          "node { name: 'i' op: 'Identity' input: 'c'" F32 " }"
                          "node { name: 'j' op: 'Neg' input: 'i'" F32 " }";
    Tensorflow__GraphDef *gd = zf_test_graphdef(text), *same = zf_test_graphdef(text);
    zf_optimizer_stats_t st = s_optimize(gd, ZF_OPT_L0, 0);
    assert_int_equal(st.folded + st.merged + st.forwarded + st.removed, 0);
    void *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    ASSERT_OK(zf_graphdef_write_mem(gd, ZF_FORMAT_PB, &a, &la));
    ASSERT_OK(zf_graphdef_write_mem(same, ZF_FORMAT_PB, &b, &lb));
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
    zf_graphdef_free(&gd);
    /* an input naming no node: left for the engine to report */
    gd = zf_test_graphdef(
        CONST2("a", 1, 2) "node { name: 'c' op: 'Add' input: 'a' input: 'nope'" F32 " }");
    st = s_optimize(gd, ZF_OPT_L1, 0);
    assert_int_equal(st.folded + st.removed, 0);
    s_assert_inputs(gd, "c", "a nope");
    zf_graphdef_free(&gd);
    zf_graphdef_free(&same);
}

/* The same fetches with and without the optimizer, on one and on two
 * devices (where it runs on each partition). */
static void test_values_are_the_same_at_either_level(void **state)
{
    (void)state;
    const char *text = PH("x") CONST2("a", 1, 2)
        CONST2("b", 3, -4) "node { name: 'c' op: 'Add' input: 'a' input: 'b' device: '/cpu:1'" F32
                           " }"
                           "node { name: 'd' op: 'Square' input: 'c'" F32 " }"
                           "node { name: 'e' op: 'Mul' input: 'd' input: 'x'" F32 " }"
                           "node { name: 'e2' op: 'Mul' input: 'd' input: 'x' device: '/cpu:1'" F32
                           " }"
                           "node { name: 'i' op: 'Identity' input: 'e2'" F32 " }"
                           "node { name: 'out' op: 'AddN' input: 'e' input: 'i' input: 'c'"
                           " attr { key: 'N' value { i: 3 } }" F32 " }";
    const char *devices[] = {"cpu:1", "cpu:2"};
    zf_shape_t shape = {.rank = 1, .dims = {2}};
    const float xv[2] = {0.5f, -3.0f};
    zf_tensor_t *x = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, xv, sizeof xv, &x));
    const char *feed = "x", *fetches[] = {"out", "i", "c", "d"};
    for (int dv = 0; dv < 2; dv++) {
        for (int level = ZF_OPT_L0; level <= ZF_OPT_L1; level++) {
            Tensorflow__GraphDef *gd = zf_test_graphdef(text);
            zf_local_session_options_t o = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
            o.devices = devices[dv];
            o.opt_level = level;
            o.allow_soft_placement = true;
            zf_local_session_t *s = NULL;
            ASSERT_OK(zf_local_session_new(gd, &o, &s));
            zf_tensor_t *out[4] = {NULL};
            ASSERT_OK(zf_local_session_run(s, &feed, &x, 1, fetches, 4, NULL, 0, out));
            /* c = [4, -2], d = [16, 4], e = e2 = d * x = [8, -12] */
            const float want[4][2] = {{8 + 8 + 4, -12 - 12 - 2}, {8, -12}, {4, -2}, {16, 4}};
            for (int f = 0; f < 4; f++) {
                const float *got = zf_tensor_data(out[f]);
                for (int k = 0; k < 2; k++)
                    if (got[k] != want[f][k])
                        fail_msg("%s on %s at level %d: [%d] = %g, want %g", fetches[f],
                                 devices[dv], level, k, (double)got[k], (double)want[f][k]);
                zf_tensor_unref(&out[f]);
            }
            zf_local_session_destroy(&s);
            zf_graphdef_free(&gd);
        }
    }
    zf_tensor_unref(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant_subgraphs_fold_into_consts_under_their_names),
        cmocka_unit_test(test_folding_leaves_stateful_large_and_failing_nodes),
        cmocka_unit_test(test_common_subexpressions_and_identities_go),
        cmocka_unit_test(test_pivots_and_received_controls_stay),
        cmocka_unit_test(test_level_zero_and_unreadable_graphs_stay_as_written),
        cmocka_unit_test(test_values_are_the_same_at_either_level),
    };
    return cmocka_run_group_tests(tests, s_setup, NULL);
}
