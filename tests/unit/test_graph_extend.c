/* zf_graph_extend: a graph grown by new nodes, its index extended from the
 * old graph's, checked against the graph built from scratch over the same
 * GraphDef (every node, edge, op table entry and the topological order),
 * on random graphs whose nodes name each other forwards and backwards, and
 * the errors an extension can have. */
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
#include "test_util.h"

static uint32_t s_rng = 12345;

static uint32_t s_rand(uint32_t n)
{
    s_rng = s_rng * 1664525u + 1013904223u;
    return (s_rng >> 8) % n;
}

static char *s_dup(const char *s)
{
    char *d = strdup(s);
    assert_non_null(d);
    return d;
}

/* A node of a random op reading some of the nodes before it in rank
 * (rank[] of each listed node), so the graph has no cycle whatever the
 * listing order. Ops: Const (none), Identity (1), AddV2 (2), NoOp (control
 * inputs only), Mystery (unknown; reads any output index). */
static Tensorflow__NodeDef *s_node(int i, const int *rank, const int *ops_of, const int *listed,
                                   int n_listed)
{
    Tensorflow__NodeDef *n = calloc(1, sizeof *n);
    assert_non_null(n);
    tensorflow__node_def__init(n);
    char name[32];
    snprintf(name, sizeof name, "n%d", i);
    n->name = s_dup(name);
    int below[64], nb = 0, outs[64], no = 0; /* before it; those with outputs */
    for (int k = 0; k < n_listed && nb < 64; k++) {
        if (rank[listed[k]] >= rank[i]) continue;
        below[nb++] = listed[k];
        if (ops_of[listed[k]] != 3) outs[no++] = listed[k];
    }
    static const char *const ops[] = {"Const", "Identity", "AddV2", "NoOp", "Mystery"};
    static const int arity[] = {0, 1, 2, 0, 2};
    int op = ops_of[i];
    n->op = s_dup(ops[op]);
    int data = no == 0 ? 0 : arity[op], ctrl = nb ? (int)s_rand(3) : 0;
    n->input = calloc((size_t)(data + ctrl) + 1, sizeof *n->input);
    for (int k = 0; k < data + ctrl; k++) {
        char in[40];
        int src = k < data ? outs[s_rand((uint32_t)no)] : below[s_rand((uint32_t)nb)];
        if (k >= data)
            snprintf(in, sizeof in, "^n%d", src);
        else if (op == 4 && s_rand(2))
            snprintf(in, sizeof in, "n%d:%u", src, s_rand(3));
        else
            snprintf(in, sizeof in, "n%d", src);
        n->input[n->n_input++] = s_dup(in);
    }
    return n;
}

/* A GraphDef of n nodes listed in a random order, every one of the first
 * n_old reading only others of the first n_old. */
static Tensorflow__GraphDef *s_random_graph(int n, int n_old)
{
    Tensorflow__GraphDef *gd = calloc(1, sizeof *gd);
    assert_non_null(gd);
    tensorflow__graph_def__init(gd);
    gd->node = calloc((size_t)n, sizeof *gd->node);
    int *rank = malloc((size_t)n * sizeof *rank), *listed = malloc((size_t)n * sizeof *listed);
    assert_non_null(rank);
    assert_non_null(listed);
    int *ops_of = malloc((size_t)n * sizeof *ops_of);
    assert_non_null(ops_of);
    for (int i = 0; i < n; i++) rank[i] = (int)s_rand(1000000);
    for (int i = 0; i < n; i++)
        ops_of[i] = (int)s_rand(5); /* a node without data sources
                                     * reads none */
    for (int i = 0; i < n; i++) listed[i] = i;
    for (int i = 0; i < n; i++) { /* node ids listed in a random order within each part */
        int lo = i < n_old ? 0 : n_old, hi = i < n_old ? n_old : n;
        int j = lo + (int)s_rand((uint32_t)(hi - lo));
        int t = listed[i];
        listed[i] = listed[j];
        listed[j] = t;
    }
    for (int i = 0; i < n; i++) {
        int id = listed[i];
        /* an old node reads old ones only; a new one any */
        gd->node[gd->n_node++] = s_node(id, rank, ops_of, listed, i < n_old ? n_old : n);
    }
    free(ops_of);
    free(rank);
    free(listed);
    return gd;
}

/* The first n_old nodes of gd as a GraphDef of its own, sharing them. */
static Tensorflow__GraphDef s_prefix(const Tensorflow__GraphDef *gd, int n_old)
{
    Tensorflow__GraphDef p = *gd;
    p.n_node = (size_t)n_old;
    return p;
}

static void s_expect_same_edges(const zf_edge_t *a, int na, const zf_edge_t *b, int nb)
{
    assert_int_equal(na, nb);
    for (int k = 0; k < na; k++) {
        assert_int_equal(a[k].src, b[k].src);
        assert_int_equal(a[k].src_port, b[k].src_port);
        assert_int_equal(a[k].dst, b[k].dst);
        assert_int_equal(a[k].dst_port, b[k].dst_port);
    }
}

static void s_expect_same_graph(const zf_graph_t *a, const zf_graph_t *b)
{
    int n = zf_graph_num_nodes(a);
    assert_int_equal(n, zf_graph_num_nodes(b));
    assert_int_equal(zf_graph_num_edges(a), zf_graph_num_edges(b));
    assert_int_equal(zf_graph_num_ops(a), zf_graph_num_ops(b));
    assert_int_equal(zf_graph_num_unknown_ops(a), zf_graph_num_unknown_ops(b));
    assert_int_equal(zf_graph_num_unsupported_nodes(a), zf_graph_num_unsupported_nodes(b));
    for (int k = 0; k < zf_graph_num_unsupported_nodes(a); k++)
        assert_int_equal(zf_graph_unsupported_node(a, k), zf_graph_unsupported_node(b, k));
    for (int i = 0; i < n; i++) {
        assert_string_equal(zf_graph_node_name(a, i), zf_graph_node_name(b, i));
        assert_string_equal(zf_graph_node_op(a, i), zf_graph_node_op(b, i));
        assert_int_equal(zf_graph_find_node(a, zf_graph_node_name(b, i)), i);
        assert_int_equal(zf_graph_num_data_inputs(a, i), zf_graph_num_data_inputs(b, i));
        assert_int_equal(zf_graph_num_control_inputs(a, i), zf_graph_num_control_inputs(b, i));
        const zf_edge_t *ea = NULL, *eb = NULL;
        int na = zf_graph_in_edges(a, i, &ea), nb = zf_graph_in_edges(b, i, &eb);
        s_expect_same_edges(ea, na, eb, nb);
        na = zf_graph_out_edges(a, i, &ea);
        nb = zf_graph_out_edges(b, i, &eb);
        s_expect_same_edges(ea, na, eb, nb);
        assert_true(zf_graph_op_def(a, i) == zf_graph_op_def(b, i));
    }
    int *ta = malloc(((size_t)n + 1) * sizeof *ta), *tb = malloc(((size_t)n + 1) * sizeof *tb);
    assert_non_null(ta);
    assert_non_null(tb);
    zf_graph_topo_order(a, ta);
    zf_graph_topo_order(b, tb);
    assert_memory_equal(ta, tb, (size_t)n * sizeof *ta);
    free(ta);
    free(tb);
}

static void test_an_extended_graph_equals_the_graph_built_whole(void **state)
{
    (void)state;
    static const int sizes[][2] = {{1, 0},   {1, 1},     {2, 1},   {10, 3},
                                   {50, 49}, {200, 150}, {300, 1}, {1000, 900}};
    for (int round = 0; round < 3; round++)
        for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
            int n = sizes[c][0], n_old = sizes[c][1];
            Tensorflow__GraphDef *gd = s_random_graph(n, n_old);
            Tensorflow__GraphDef base = s_prefix(gd, n_old);
            zf_graph_t *old = NULL, *grown = NULL, *whole = NULL;
            ASSERT_OK(zf_graph_new_from_graphdef(&base, &old));
            ASSERT_OK(zf_graph_extend(old, gd, &grown));
            ASSERT_OK(zf_graph_new_from_graphdef(gd, &whole));
            s_expect_same_graph(grown, whole);
            /* the old graph is as it was */
            assert_int_equal(zf_graph_num_nodes(old), n_old);
            if (n > n_old)
                assert_int_equal(zf_graph_find_node(old, zf_graph_node_name(whole, n - 1)), -1);
            zf_graph_t *again = NULL;
            ASSERT_OK(zf_graph_new_from_graphdef(&base, &again));
            s_expect_same_graph(old, again);
            zf_graph_destroy(&again);
            zf_graph_destroy(&whole);
            zf_graph_destroy(&grown);
            zf_graph_destroy(&old);
            zf_graphdef_free(&gd);
        }
}

/* base's nodes, then those of text, in one GraphDef sharing base's. */
static Tensorflow__GraphDef *s_grow(const Tensorflow__GraphDef *base, const char *text)
{
    Tensorflow__GraphDef *ext = zf_test_graphdef(text);
    Tensorflow__GraphDef *gd = calloc(1, sizeof *gd);
    assert_non_null(gd);
    *gd = *base;
    gd->node = calloc(base->n_node + ext->n_node + 1, sizeof *gd->node);
    memcpy(gd->node, base->node, base->n_node * sizeof *gd->node);
    for (size_t i = 0; i < ext->n_node; i++) gd->node[gd->n_node++] = ext->node[i];
    ext->n_node = 0; /* moved */
    zf_graphdef_free(&ext);
    return gd;
}

static void s_shell_free(Tensorflow__GraphDef *gd, size_t n_shared)
{
    for (size_t i = n_shared; i < gd->n_node; i++)
        tensorflow__node_def__free_unpacked(gd->node[i], NULL);
    free(gd->node);
    free(gd);
}

static void test_an_extension_is_checked_as_a_whole_graph_is(void **state)
{
    (void)state;
    Tensorflow__GraphDef *base =
        zf_test_graphdef("node { name: 'a' op: 'Const' } node { name: 'b' op: 'Identity' input: 'a'"
                         " attr { key: 'T' value { type: DT_FLOAT } } }");
    zf_graph_t *old = NULL, *g = NULL;
    ASSERT_OK(zf_graph_new_from_graphdef(base, &old));
    static const struct {
        const char *text, *error;
    } bad[] = {
        {"node { name: 'b' op: 'NoOp' }", "Node 'b' is not unique (nodes #1 and #2)"},
        {"node { name: 'c' op: 'Identity' input: 'gone' }",
         "Incomplete graph, missing 1 inputs for c: 'gone'"},
        {"node { name: 'c' op: 'Identity' input: 'd' } node { name: 'd' op: 'Identity' input: 'c' "
         "}",
         "Graph contains a cycle involving node 'c'"},
        {"node { name: 'c' op: 'Identity' input: 'b:7' }", "refers to output 7 of 'b'"},
        {"node { name: 'c' op: '' }", "Node 'c' has an empty op"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        Tensorflow__GraphDef *gd = s_grow(base, bad[k].text);
        zf_test_expect_error(zf_graph_extend(old, gd, &g), ZF_INVALID_ARGUMENT, bad[k].error);
        assert_null(g);
        s_shell_free(gd, base->n_node);
    }
    /* not an extension of old: another GraphDef's nodes */
    Tensorflow__GraphDef *other = zf_test_graphdef(
        "node { name: 'a' op: 'Const' } node { name: 'b' op: 'Identity' input: 'a' }");
    zf_test_expect_error(zf_graph_extend(old, other, &g), ZF_INVALID_ARGUMENT,
                         "does not start with the graph's own nodes");
    Tensorflow__GraphDef fewer = *base;
    fewer.n_node = 1;
    zf_test_expect_error(zf_graph_extend(old, &fewer, &g), ZF_INVALID_ARGUMENT,
                         "does not start with the graph's own nodes");
    /* and a good one, on the graph as it still is */
    Tensorflow__GraphDef *gd = s_grow(base, "node { name: 'c' op: 'AddV2' input: 'b' input: 'a' }");
    ASSERT_OK(zf_graph_extend(old, gd, &g));
    assert_int_equal(zf_graph_num_nodes(g), 3);
    assert_int_equal(zf_graph_num_edges(g), 3);
    const zf_edge_t *e = NULL;
    assert_int_equal(zf_graph_out_edges(g, 0, &e), 2); /* a feeds b and c */
    zf_graph_destroy(&g);
    s_shell_free(gd, base->n_node);
    zf_graph_destroy(&old);
    zf_graphdef_free(&other);
    zf_graphdef_free(&base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_an_extended_graph_equals_the_graph_built_whole),
        cmocka_unit_test(test_an_extension_is_checked_as_a_whole_graph_is),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
