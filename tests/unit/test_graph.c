/* Tests for common/graph: building graphs from GraphDefs, edges, lookups,
 * topological order, validation errors, op reporting, attr accessors and
 * tensor name parsing. GraphDefs are built in memory with malloc'd parts so
 * protobuf_c_message_free_unpacked() frees them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>

#include "common/graph.h"
#include "common/graphdef_io.h"

/* --- GraphDef builders ---------------------------------------------------- */

static char *s_strdup(const char *s)
{
    char *d = strdup(s);
    assert_non_null(d);
    return d;
}

static Tensorflow__GraphDef *s_gd_new(void)
{
    Tensorflow__GraphDef *gd = malloc(sizeof *gd);
    assert_non_null(gd);
    tensorflow__graph_def__init(gd);
    return gd;
}

static void s_gd_free(Tensorflow__GraphDef **gd_p)
{
    if (*gd_p) protobuf_c_message_free_unpacked(&(*gd_p)->base, NULL);
    *gd_p = NULL;
}

/* Adds a node with the given inputs (a NULL-terminated list). */
static Tensorflow__NodeDef *s_add_node(Tensorflow__GraphDef *gd, const char *name, const char *op,
                                       ...)
{
    Tensorflow__NodeDef *n = malloc(sizeof *n);
    assert_non_null(n);
    tensorflow__node_def__init(n);
    n->name = s_strdup(name);
    n->op = s_strdup(op);
    va_list ap;
    va_start(ap, op);
    const char *in;
    while ((in = va_arg(ap, const char *)) != NULL) {
        n->input = realloc(n->input, (n->n_input + 1) * sizeof *n->input);
        assert_non_null(n->input);
        n->input[n->n_input++] = s_strdup(in);
    }
    va_end(ap);
    gd->node = realloc(gd->node, (gd->n_node + 1) * sizeof *gd->node);
    assert_non_null(gd->node);
    gd->node[gd->n_node++] = n;
    return n;
}

static Tensorflow__AttrValue *s_add_attr(Tensorflow__NodeDef *n, const char *key)
{
    Tensorflow__NodeDef__AttrEntry *e = malloc(sizeof *e);
    assert_non_null(e);
    tensorflow__node_def__attr_entry__init(e);
    e->key = s_strdup(key);
    e->value = malloc(sizeof *e->value);
    assert_non_null(e->value);
    tensorflow__attr_value__init(e->value);
    n->attr = realloc(n->attr, (n->n_attr + 1) * sizeof *n->attr);
    assert_non_null(n->attr);
    n->attr[n->n_attr++] = e;
    return e->value;
}

static void s_set_type(Tensorflow__NodeDef *n, const char *key, zf_dtype_t t)
{
    Tensorflow__AttrValue *v = s_add_attr(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = (Tensorflow__DataType)t;
}

static Tensorflow__AttrValue__ListValue *s_set_list(Tensorflow__NodeDef *n, const char *key)
{
    Tensorflow__AttrValue *v = s_add_attr(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = malloc(sizeof *v->list);
    assert_non_null(v->list);
    tensorflow__attr_value__list_value__init(v->list);
    return v->list;
}

static Tensorflow__NodeDef *s_add_const(Tensorflow__GraphDef *gd, const char *name)
{
    Tensorflow__NodeDef *n = s_add_node(gd, name, "Const", NULL);
    s_set_type(n, "dtype", ZF_FLOAT);
    return n;
}

static zf_graph_t *s_build_ok(Tensorflow__GraphDef *gd)
{
    zf_graph_t *g = NULL;
    zf_status_t s = zf_graph_new_from_graphdef(gd, &g);
    if (!zf_ok(s)) fail_msg("unexpected error: %s", zf_status_msg(&s));
    assert_non_null(g);
    return g;
}

/* Builds gd, expects INVALID_ARGUMENT with exactly msg, and frees gd. */
static void s_expect_error(Tensorflow__GraphDef **gd_p, const char *msg)
{
    zf_graph_t *g = NULL;
    zf_status_t s = zf_graph_new_from_graphdef(*gd_p, &g);
    assert_null(g);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), msg);
    zf_status_clear(&s);
    s_gd_free(gd_p);
}

static void s_assert_edge(const zf_edge_t *e, int src, int src_port, int dst, int dst_port)
{
    assert_int_equal(e->src, src);
    assert_int_equal(e->src_port, src_port);
    assert_int_equal(e->dst, dst);
    assert_int_equal(e->dst_port, dst_port);
}

/* --- structure ------------------------------------------------------------ */

static void test_graph_builds_data_edges_with_ports(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "x");                             /* 0 */
    s_add_const(gd, "p");                             /* 1 */
    s_add_node(gd, "sw", "Switch", "x", "p:0", NULL); /* 2 */
    s_add_node(gd, "y", "Identity", "sw:1", NULL);    /* 3 */
    s_add_node(gd, "z", "Add", "sw", "y", NULL);      /* 4 */
    zf_graph_t *g = s_build_ok(gd);
    assert_int_equal(zf_graph_num_nodes(g), 5);
    assert_int_equal(zf_graph_num_edges(g), 5);
    const zf_edge_t *e;
    assert_int_equal(zf_graph_in_edges(g, 2, &e), 2);
    s_assert_edge(&e[0], 0, 0, 2, 0);
    s_assert_edge(&e[1], 1, 0, 2, 1);
    assert_int_equal(zf_graph_in_edges(g, 3, &e), 1);
    s_assert_edge(&e[0], 2, 1, 3, 0);
    assert_int_equal(zf_graph_in_edges(g, 4, &e), 2);
    s_assert_edge(&e[0], 2, 0, 4, 0);
    s_assert_edge(&e[1], 3, 0, 4, 1);
    assert_int_equal(zf_graph_in_edges(g, 0, &e), 0);
    assert_int_equal(zf_graph_out_edges(g, 2, &e), 2);
    s_assert_edge(&e[0], 2, 1, 3, 0);
    s_assert_edge(&e[1], 2, 0, 4, 0);
    assert_int_equal(zf_graph_out_edges(g, 4, &e), 0);
    assert_int_equal(zf_graph_num_data_inputs(g, 4), 2);
    assert_int_equal(zf_graph_num_control_inputs(g, 4), 0);
    assert_string_equal(zf_graph_node_name(g, 3), "y");
    assert_string_equal(zf_graph_node_op(g, 3), "Identity");
    assert_string_equal(zf_graph_node_device(g, 3), "");
    assert_ptr_equal(zf_graph_node_def(g, 3), gd->node[3]);
    assert_ptr_equal(zf_graph_graphdef(g), gd);
    zf_graph_destroy(&g);
    assert_null(g);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_keeps_control_edges_after_data_edges(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "a");                                      /* 0 */
    s_add_const(gd, "b");                                      /* 1 */
    s_add_node(gd, "init", "NoOp", NULL);                      /* 2 */
    s_add_node(gd, "c", "Add", "a", "b", "^init", "^a", NULL); /* 3 */
    s_add_node(gd, "d", "NoOp", "^c", NULL);                   /* 4 */
    zf_graph_t *g = s_build_ok(gd);
    const zf_edge_t *e;
    assert_int_equal(zf_graph_in_edges(g, 3, &e), 4);
    s_assert_edge(&e[0], 0, 0, 3, 0);
    s_assert_edge(&e[1], 1, 0, 3, 1);
    s_assert_edge(&e[2], 2, ZF_CONTROL_PORT, 3, ZF_CONTROL_PORT);
    s_assert_edge(&e[3], 0, ZF_CONTROL_PORT, 3, ZF_CONTROL_PORT);
    assert_false(zf_edge_is_control(&e[1]));
    assert_true(zf_edge_is_control(&e[2]));
    assert_int_equal(zf_graph_num_data_inputs(g, 3), 2);
    assert_int_equal(zf_graph_num_control_inputs(g, 3), 2);
    assert_int_equal(zf_graph_num_data_inputs(g, 4), 0);
    assert_int_equal(zf_graph_num_control_inputs(g, 4), 1);
    /* a feeds c twice: once as data, once as control, in input order. */
    assert_int_equal(zf_graph_out_edges(g, 0, &e), 2);
    s_assert_edge(&e[0], 0, 0, 3, 0);
    s_assert_edge(&e[1], 0, ZF_CONTROL_PORT, 3, ZF_CONTROL_PORT);
    assert_int_equal(zf_graph_out_edges(g, 2, &e), 1);
    assert_true(zf_edge_is_control(&e[0]));
    assert_int_equal(zf_graph_out_edges(g, 3, &e), 1);
    s_assert_edge(&e[0], 3, ZF_CONTROL_PORT, 4, ZF_CONTROL_PORT);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_out_edges_are_ordered_by_destination(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_node(gd, "m", "Add", "src", "src", NULL); /* 0 */
    s_add_const(gd, "src");                         /* 1 */
    s_add_node(gd, "k", "Identity", "src", NULL);   /* 2 */
    zf_graph_t *g = s_build_ok(gd);
    const zf_edge_t *e;
    assert_int_equal(zf_graph_out_edges(g, 1, &e), 3);
    s_assert_edge(&e[0], 1, 0, 0, 0);
    s_assert_edge(&e[1], 1, 0, 0, 1);
    s_assert_edge(&e[2], 1, 0, 2, 0);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_finds_nodes_by_name_and_by_prefix(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "layer/w");
    s_add_const(gd, "layer/w2");
    s_add_node(gd, "out", "Add", "layer/w", "layer/w2", NULL);
    zf_graph_t *g = s_build_ok(gd);
    assert_int_equal(zf_graph_find_node(g, "layer/w"), 0);
    assert_int_equal(zf_graph_find_node(g, "layer/w2"), 1);
    assert_int_equal(zf_graph_find_node(g, "out"), 2);
    assert_int_equal(zf_graph_find_node(g, "layer"), -1);
    assert_int_equal(zf_graph_find_node(g, ""), -1);
    assert_int_equal(zf_graph_find_node_n(g, "layer/w:3", 7), 0);
    assert_int_equal(zf_graph_find_node_n(g, "layer/w2:1", 8), 1);
    assert_int_equal(zf_graph_find_node_n(g, "outx", 3), 2);
    /* tensor names: the node and its port; -1 for a bad or unknown name */
    int port = -7;
    assert_int_equal(zf_graph_find_tensor(g, "layer/w2", &port), 1);
    assert_int_equal(port, 0);
    assert_int_equal(zf_graph_find_tensor(g, "out:3", &port), 2);
    assert_int_equal(port, 3);
    assert_int_equal(zf_graph_find_tensor(g, "layer:0", &port), -1);
    assert_int_equal(zf_graph_find_tensor(g, "out:x", &port), -1);
    assert_int_equal(zf_graph_find_tensor(g, "", &port), -1);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_loads_an_empty_graphdef(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    zf_graph_t *g = s_build_ok(gd);
    assert_int_equal(zf_graph_num_nodes(g), 0);
    assert_int_equal(zf_graph_num_edges(g), 0);
    assert_int_equal(zf_graph_num_ops(g), 0);
    assert_int_equal(zf_graph_num_unsupported_nodes(g), 0);
    assert_false(zf_graph_has_library(g));
    zf_graph_topo_order(g, NULL);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_adopts_its_graphdef(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "a");
    s_add_node(gd, "b", "Identity", "a", NULL);
    zf_graph_t *g = s_build_ok(gd);
    zf_graph_adopt_graphdef(g, &gd);
    assert_null(gd);
    assert_string_equal(zf_graph_node_name(g, 1), "b");
    zf_graph_destroy(&g); /* frees the GraphDef too (LeakSanitizer checks) */
}

/* --- topological order ------------------------------------------------------ */

static void test_graph_orders_a_diamond_listed_backwards(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_node(gd, "d", "Add", "b", "c", NULL); /* 0 */
    s_add_node(gd, "b", "Identity", "a", NULL); /* 1 */
    s_add_node(gd, "c", "Identity", "a", NULL); /* 2 */
    s_add_const(gd, "a");                       /* 3 */
    zf_graph_t *g = s_build_ok(gd);
    int order[4];
    zf_graph_topo_order(g, order);
    assert_int_equal(order[0], 3);
    assert_int_equal(order[1], 1);
    assert_int_equal(order[2], 2);
    assert_int_equal(order[3], 0);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_topo_order_takes_the_lowest_ready_index_first(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_node(gd, "x", "Identity", "w", NULL); /* 0 */
    s_add_const(gd, "y");                       /* 1 */
    s_add_node(gd, "z", "Identity", "y", NULL); /* 2 */
    s_add_const(gd, "w");                       /* 3 */
    zf_graph_t *g = s_build_ok(gd);
    int order[4];
    zf_graph_topo_order(g, order);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 2);
    assert_int_equal(order[2], 3);
    assert_int_equal(order[3], 0);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_topo_order_of_a_sorted_wide_graph_is_the_identity(void **state)
{
    (void)state;
    enum { WIDTH = 200 };
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "src");
    Tensorflow__NodeDef *sink = NULL;
    char name[32];
    for (int i = 0; i < WIDTH; i++) {
        snprintf(name, sizeof name, "mid%d", i);
        s_add_node(gd, name, "Identity", "src", NULL);
    }
    sink = s_add_node(gd, "sink", "NoOp", NULL);
    for (int i = 0; i < WIDTH; i++) {
        snprintf(name, sizeof name, "^mid%d", i);
        sink->input = realloc(sink->input, (sink->n_input + 1) * sizeof *sink->input);
        sink->input[sink->n_input++] = s_strdup(name);
    }
    zf_graph_t *g = s_build_ok(gd);
    int order[WIDTH + 2];
    zf_graph_topo_order(g, order);
    for (int i = 0; i < WIDTH + 2; i++) assert_int_equal(order[i], i);
    const zf_edge_t *e;
    assert_int_equal(zf_graph_out_edges(g, 0, &e), WIDTH);
    assert_int_equal(zf_graph_in_edges(g, WIDTH + 1, &e), WIDTH);
    assert_int_equal(zf_graph_num_control_inputs(g, WIDTH + 1), WIDTH);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static int s_position(const int *order, int n, int node)
{
    for (int k = 0; k < n; k++)
        if (order[k] == node) return k;
    return -1;
}

static void test_graph_accepts_next_iteration_back_edges(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "init");                                        /* 0 */
    s_add_node(gd, "enter", "Enter", "init", NULL);                 /* 1 */
    s_add_node(gd, "merge", "Merge", "enter", "next", NULL);        /* 2 */
    s_add_node(gd, "cond", "Identity", "merge", NULL);              /* 3 */
    s_add_node(gd, "loop_cond", "LoopCond", "cond", NULL);          /* 4 */
    s_add_node(gd, "switch", "Switch", "merge", "loop_cond", NULL); /* 5 */
    s_add_node(gd, "exit", "Exit", "switch", NULL);                 /* 6 */
    s_add_node(gd, "body", "Identity", "switch:1", NULL);           /* 7 */
    s_add_node(gd, "next", "NextIteration", "body", NULL);          /* 8 */
    zf_graph_t *g = s_build_ok(gd);
    const zf_edge_t *e;
    assert_int_equal(zf_graph_in_edges(g, 2, &e), 2);
    s_assert_edge(&e[1], 8, 0, 2, 1);
    int order[9];
    zf_graph_topo_order(g, order);
    assert_true(s_position(order, 9, 2) < s_position(order, 9, 8));
    assert_true(s_position(order, 9, 7) < s_position(order, 9, 8));
    assert_true(s_position(order, 9, 5) < s_position(order, 9, 6));
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_rejects_a_cycle_and_names_its_nodes(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_node(gd, "a", "Identity", "c", NULL);
    s_add_node(gd, "b", "Identity", "a", NULL);
    s_add_node(gd, "c", "Add", "b", "k", NULL);
    s_add_const(gd, "k");
    s_add_node(gd, "tail", "Identity", "c", NULL);
    s_expect_error(&gd, "Graph contains a cycle involving node 'a': a -> b -> c -> a");
}

static void test_graph_rejects_a_self_loop(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "k");
    s_add_node(gd, "a", "Add", "k", "a", NULL);
    s_expect_error(&gd, "Graph contains a cycle involving node 'a': a -> a");
}

static void test_graph_rejects_a_cycle_through_control_edges(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "k");
    s_add_node(gd, "a", "Identity", "k", "^b", NULL);
    s_add_node(gd, "b", "Identity", "a", NULL);
    s_expect_error(&gd, "Graph contains a cycle involving node 'a': a -> b -> a");
}

static void test_graph_rejects_a_cycle_that_bypasses_next_iteration(void **state)
{
    (void)state;
    /* A loop with a NextIteration elsewhere still fails when the cycle does
     * not go through it. */
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "k");
    s_add_node(gd, "merge", "Merge", "k", "body", NULL);
    s_add_node(gd, "body", "Identity", "merge", NULL);
    s_add_node(gd, "next", "NextIteration", "body", NULL);
    s_expect_error(&gd, "Graph contains a cycle involving node 'merge': merge -> body -> merge");
}

/* --- validation ------------------------------------------------------------- */

static void test_graph_rejects_duplicate_node_names(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "x");
    s_add_const(gd, "y");
    s_add_const(gd, "x");
    s_expect_error(&gd, "Node 'x' is not unique (nodes #0 and #2)");
}

static void test_graph_rejects_duplicate_names_far_apart_and_at_the_end(void **state)
{
    (void)state;
    char name[32];
    Tensorflow__GraphDef *gd = s_gd_new();
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "n%d", i == 70 ? 10 : i);
        s_add_const(gd, name);
    }
    s_expect_error(&gd, "Node 'n10' is not unique (nodes #10 and #70)");

    gd = s_gd_new();
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "n%d", i == 39 ? 38 : i);
        s_add_const(gd, name);
    }
    s_expect_error(&gd, "Node 'n38' is not unique (nodes #38 and #39)");
}

static void test_graph_reports_missing_inputs_by_count(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "a");
    s_add_node(gd, "c", "Add", "nope:1", "a", "^gone", NULL);
    s_expect_error(&gd, "Incomplete graph, missing 2 inputs for c: 'nope:1', '^gone'");

    gd = s_gd_new();
    s_add_node(gd, "c", "Identity", "a", NULL);
    s_expect_error(&gd, "Incomplete graph, missing 1 inputs for c: 'a'");
}

static void test_graph_rejects_malformed_inputs(void **state)
{
    (void)state;
    static const struct {
        const char *input, *msg;
    } cases[] = {
        {"", "Node 'y': input 0 is empty"},
        {"x:", "Node 'y': malformed input 'x:': no output index after ':'"},
        {"x:-1", "Node 'y': malformed input 'x:-1': the output index is not a non-negative "
                 "integer"},
        {"x:abc", "Node 'y': malformed input 'x:abc': the output index is not a non-negative "
                  "integer"},
        {"x:+1", "Node 'y': malformed input 'x:+1': the output index is not a non-negative "
                 "integer"},
        {"x:99999999999", "Node 'y': malformed input 'x:99999999999': the output index is out "
                          "of range"},
        {"^", "Node 'y': malformed input '^': '^' names no node"},
        {"^x:1", "Node 'y': malformed input '^x:1': a control input cannot name an output index"},
        {":1", "Node 'y': malformed input ':1': no node name before ':'"},
        {"a:x:1", "Node 'y': malformed input 'a:x:1': the node name contains ':'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        Tensorflow__GraphDef *gd = s_gd_new();
        s_add_const(gd, "x");
        s_add_node(gd, "y", "Identity", cases[k].input, NULL);
        s_expect_error(&gd, cases[k].msg);
    }
}

static void test_graph_rejects_data_inputs_after_control_inputs(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "a");
    s_add_const(gd, "b");
    s_add_node(gd, "x", "Add", "a", "^b", "b", NULL);
    s_expect_error(&gd, "Node 'x': Control dependencies must come after regular dependencies");
}

static void test_graph_rejects_empty_names_and_ops(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "a");
    s_add_node(gd, "", "Identity", "a", NULL);
    s_expect_error(&gd, "Node #1 has an empty name");

    gd = s_gd_new();
    s_add_node(gd, "a", "", NULL);
    s_expect_error(&gd, "Node 'a' has an empty op");
}

static void test_graph_rejects_output_indices_beyond_a_known_arity(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "x");
    s_add_node(gd, "y", "Identity", "x:5", NULL);
    s_expect_error(&gd, "Node 'y': input 'x:5' refers to output 5 of 'x' (Const), which has 1 "
                        "output");

    gd = s_gd_new();
    s_add_node(gd, "init", "NoOp", NULL);
    s_add_node(gd, "y", "Identity", "init", NULL);
    s_expect_error(&gd, "Node 'y': input 'init' refers to output 0 of 'init' (NoOp), which has 0 "
                        "outputs");
}

static void test_graph_accepts_any_output_index_of_an_unknown_op(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_node(gd, "u", "SomeCustomOp", NULL);
    s_add_node(gd, "y", "Identity", "u:7", NULL);
    zf_graph_t *g = s_build_ok(gd);
    const zf_edge_t *e;
    assert_int_equal(zf_graph_in_edges(g, 1, &e), 1);
    s_assert_edge(&e[0], 0, 7, 1, 0);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

/* --- ops ---------------------------------------------------------------------- */

static void test_graph_keeps_unknown_ops_and_lists_them(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "a");                           /* 0 */
    s_add_node(gd, "u1", "MyCustomOp", "a", NULL);  /* 1 */
    s_add_node(gd, "u2", "OtherOp", "u1:3", NULL);  /* 2 */
    s_add_node(gd, "u3", "MyCustomOp", "u2", NULL); /* 3 */
    s_add_node(gd, "out", "Identity", "u3", NULL);  /* 4 */
    zf_graph_t *g = s_build_ok(gd);
    assert_int_equal(zf_graph_num_unknown_ops(g), 2);
    assert_string_equal(zf_graph_unknown_op(g, 0), "MyCustomOp");
    assert_string_equal(zf_graph_unknown_op(g, 1), "OtherOp");
    assert_int_equal(zf_graph_num_unsupported_nodes(g), 3);
    assert_int_equal(zf_graph_unsupported_node(g, 0), 1);
    assert_int_equal(zf_graph_unsupported_node(g, 1), 2);
    assert_int_equal(zf_graph_unsupported_node(g, 2), 3);
    assert_int_equal(zf_graph_node_support(g, 1), ZF_NODE_UNKNOWN_OP);
    assert_int_equal(zf_graph_node_support(g, 0), ZF_NODE_SUPPORTED);
    assert_null(zf_graph_op_def(g, 1));
    assert_non_null(zf_graph_op_def(g, 0));
    assert_string_equal(zf_op_name(zf_graph_op_def(g, 0)), "Const");
    assert_int_equal(zf_graph_num_ops(g), 4);
    zf_op_stat_t st = zf_graph_op_stat(g, 1);
    assert_string_equal(st.op, "MyCustomOp");
    assert_int_equal(st.count, 2);
    assert_int_equal(st.support, ZF_NODE_UNKNOWN_OP);
    assert_null(st.def);
    st = zf_graph_op_stat(g, 3);
    assert_string_equal(st.op, "Identity");
    assert_int_equal(st.count, 1);
    assert_string_equal(zf_node_support_name(ZF_NODE_UNKNOWN_OP), "unknown op");
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void s_add_function(Tensorflow__GraphDef *gd, const char *name)
{
    if (!gd->library) {
        gd->library = malloc(sizeof *gd->library);
        assert_non_null(gd->library);
        tensorflow__function_def_library__init(gd->library);
    }
    Tensorflow__FunctionDefLibrary *lib = gd->library;
    Tensorflow__FunctionDef *f = malloc(sizeof *f);
    assert_non_null(f);
    tensorflow__function_def__init(f);
    f->signature = malloc(sizeof *f->signature);
    assert_non_null(f->signature);
    tensorflow__op_def__init(f->signature);
    f->signature->name = s_strdup(name);
    lib->function = realloc(lib->function, (lib->n_function + 1) * sizeof *lib->function);
    assert_non_null(lib->function);
    lib->function[lib->n_function++] = f;
}

static zf_node_support_t s_expected_support(const char *op)
{
    const zf_op_def_t *def = zf_op_lookup(op);
    if (!def) return ZF_NODE_UNKNOWN_OP;
    if (zf_op_has_flag(def, ZF_OP_FUNCTIONAL)) return ZF_NODE_FUNCTIONAL_OP;
    if (zf_op_has_flag(def, ZF_OP_UNSUPPORTED)) return ZF_NODE_UNSUPPORTED_OP;
    return ZF_NODE_SUPPORTED;
}

static void test_graph_reports_library_functions_and_functional_ops(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_function(gd, "my_fn");
    s_add_function(gd, "other_fn");
    s_add_const(gd, "a");                                      /* 0 */
    s_add_node(gd, "call", "my_fn", "a", NULL);                /* 1 */
    s_add_node(gd, "w", "While", "call", NULL);                /* 2 */
    s_add_node(gd, "p", "StatefulPartitionedCall", "a", NULL); /* 3 */
    zf_graph_t *g = s_build_ok(gd);
    assert_true(zf_graph_has_library(g));
    assert_int_equal(zf_graph_num_library_functions(g), 2);
    assert_int_equal(zf_graph_node_support(g, 1), ZF_NODE_LIBRARY_FUNCTION);
    assert_null(zf_graph_op_def(g, 1));
    assert_int_equal(zf_graph_node_support(g, 2), s_expected_support("While"));
    assert_int_equal(zf_graph_node_support(g, 3), s_expected_support("StatefulPartitionedCall"));
    assert_int_equal(zf_graph_num_unknown_ops(g),
                     (s_expected_support("While") == ZF_NODE_UNKNOWN_OP) +
                         (s_expected_support("StatefulPartitionedCall") == ZF_NODE_UNKNOWN_OP));
    assert_int_equal(zf_graph_unsupported_node(g, 0), 1);
    assert_true(zf_graph_num_unsupported_nodes(g) >= 1);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static Tensorflow__GraphDef *s_gd_parse(const char *text)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd);
    if (!zf_ok(s)) fail_msg("%s\n%s", zf_status_msg(&s), text);
    return gd;
}

/* The keys of node i's attrs, joined by spaces. */
static const char *s_attr_keys(const Tensorflow__GraphDef *gd, int i)
{
    static char buf[512];
    size_t used = 0;
    buf[0] = '\0';
    const Tensorflow__NodeDef *n = gd->node[i];
    for (size_t k = 0; k < n->n_attr; k++)
        used +=
            (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", k ? " " : "", n->attr[k]->key);
    return buf;
}

/* Loading adds the defaults a registered op's node leaves out to the
 * GraphDef itself; nodes of unknown ops and library functions stay as they
 * are, and loading the completed GraphDef again adds nothing. */
static void test_graph_fills_default_attrs_into_its_graphdef(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_parse(
        "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } }"
        "       attr { key: 'shape' value { shape { dim { size: 2 } } } } }\n"
        "node { name: 'mm' op: 'MatMul' input: 'x' input: 'x'"
        "       attr { key: 'T' value { type: DT_FLOAT } } }\n"
        "node { name: 'mp' op: 'MaxPool' input: 'mm' }\n"
        "node { name: 'u' op: 'MyOp' input: 'mp' }\n"
        "node { name: 'call' op: 'my_fn' input: 'mp' }\n"
        "library { function { signature { name: 'my_fn' } } }\n");
    zf_graph_t *g = s_build_ok(gd);
    assert_ptr_equal(zf_graph_graphdef(g), gd);
    assert_string_equal(s_attr_keys(gd, 0), "dtype shape");
    assert_string_equal(s_attr_keys(gd, 1), "T transpose_a transpose_b grad_a grad_b");
    assert_string_equal(s_attr_keys(gd, 2), "T explicit_paddings data_format");
    assert_string_equal(s_attr_keys(gd, 3), "");
    assert_string_equal(s_attr_keys(gd, 4), "");
    bool b = true;
    assert_true(zf_ok(zf_node_attr_bool(zf_graph_node_def(g, 1), "transpose_a", &b)));
    assert_false(b);
    zf_dtype_t t = ZF_INVALID;
    assert_true(zf_ok(zf_node_attr_type(zf_graph_node_def(g, 2), "T", &t)));
    assert_int_equal(t, ZF_FLOAT);
    const uint8_t *fmt;
    size_t len;
    assert_true(zf_ok(zf_node_attr_string(zf_graph_node_def(g, 2), "data_format", &fmt, &len)));
    assert_int_equal(len, 4);
    assert_memory_equal(fmt, "NHWC", 4);
    assert_true(zf_ok(zf_graph_output_type(g, 2, 0, &t)));
    assert_int_equal(t, ZF_FLOAT);

    zf_graph_t *again = s_build_ok(gd);
    assert_string_equal(s_attr_keys(gd, 1), "T transpose_a transpose_b grad_a grad_b");
    assert_string_equal(s_attr_keys(gd, 2), "T explicit_paddings data_format");
    zf_graph_destroy(&again);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

static void test_graph_resolves_output_types_through_the_op_registry(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_gd_new();
    s_add_const(gd, "c");
    s_add_node(gd, "u", "MyCustomOp", NULL);
    zf_graph_t *g = s_build_ok(gd);
    int n = -1;
    zf_status_t s = zf_graph_num_outputs(g, 0, &n);
    assert_true(zf_ok(s));
    assert_int_equal(n, 1);
    zf_dtype_t t = ZF_INVALID;
    s = zf_graph_output_type(g, 0, 0, &t);
    assert_true(zf_ok(s));
    assert_int_equal(t, ZF_FLOAT);
    s = zf_graph_output_type(g, 0, 1, &t);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), "node 'c' (Const): output 1 out of range (1 output)");
    zf_status_clear(&s);
    s = zf_graph_output_type(g, 1, 0, &t);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_string_equal(zf_status_msg(&s),
                        "node 'u' (MyCustomOp): op 'MyCustomOp' is not registered");
    zf_status_clear(&s);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

/* --- scale ---------------------------------------------------------------------- */

static void test_graph_builds_a_large_graph(void **state)
{
    (void)state;
    enum { N = 100000 };
    Tensorflow__GraphDef *gd = s_gd_new();
    gd->node = malloc(N * sizeof *gd->node);
    assert_non_null(gd->node);
    char buf[32];
    for (int i = 0; i < N; i++) {
        Tensorflow__NodeDef *n = malloc(sizeof *n);
        tensorflow__node_def__init(n);
        snprintf(buf, sizeof buf, "n%d", i);
        n->name = s_strdup(buf);
        n->op = s_strdup(i < 2 ? "Const" : "Add");
        if (i >= 2) {
            n->input = malloc(3 * sizeof *n->input);
            snprintf(buf, sizeof buf, "n%d", i - 1);
            n->input[n->n_input++] = s_strdup(buf);
            snprintf(buf, sizeof buf, "n%d:0", i / 2);
            n->input[n->n_input++] = s_strdup(buf);
            if (i >= 3) {
                snprintf(buf, sizeof buf, "^n%d", i - 3);
                n->input[n->n_input++] = s_strdup(buf);
            }
        }
        gd->node[gd->n_node++] = n;
    }
    zf_graph_t *g = s_build_ok(gd);
    assert_int_equal(zf_graph_num_nodes(g), N);
    assert_int_equal(zf_graph_num_edges(g), 2 * (N - 2) + (N - 3));
    assert_int_equal(zf_graph_find_node(g, "n77777"), 77777);
    int *order = malloc(N * sizeof *order);
    zf_graph_topo_order(g, order);
    for (int i = 0; i < N; i++) assert_int_equal(order[i], i);
    free(order);
    const zf_edge_t *e;
    assert_int_equal(zf_graph_in_edges(g, 5001, &e), 3);
    s_assert_edge(&e[0], 5000, 0, 5001, 0);
    s_assert_edge(&e[1], 2500, 0, 5001, 1);
    s_assert_edge(&e[2], 4998, ZF_CONTROL_PORT, 5001, ZF_CONTROL_PORT);
    /* n50000 feeds n50001 (input 0), n100000/n100001 do not exist, and
     * n50001 (i/2 for i = 100000..) is out of range, so: 50001 and its
     * control successor 50003. */
    assert_int_equal(zf_graph_out_edges(g, 50000, &e), 2);
    s_assert_edge(&e[0], 50000, 0, 50001, 0);
    s_assert_edge(&e[1], 50000, ZF_CONTROL_PORT, 50003, ZF_CONTROL_PORT);
    zf_graph_destroy(&g);
    s_gd_free(&gd);
}

/* --- tensor names ---------------------------------------------------------------- */

static void s_expect_parse(const char *s, const char *name, int port)
{
    const char *n = NULL;
    size_t len = 0;
    int p = -7;
    zf_status_t st = zf_tensor_name_parse(s, &n, &len, &p);
    if (!zf_ok(st)) fail_msg("'%s': %s", s, zf_status_msg(&st));
    assert_int_equal(len, strlen(name));
    assert_memory_equal(n, name, len);
    assert_int_equal(p, port);
}

static void test_tensor_names_parse_names_ports_and_controls(void **state)
{
    (void)state;
    s_expect_parse("a", "a", 0);
    s_expect_parse("a:3", "a", 3);
    s_expect_parse("scope/a_b.c-d:12", "scope/a_b.c-d", 12);
    s_expect_parse("^ctrl", "ctrl", ZF_CONTROL_PORT);
    s_expect_parse("x:0007", "x", 7);
    s_expect_parse("x:2147483647", "x", 2147483647);
    s_expect_parse("123:4", "123", 4);
    s_expect_parse("123", "123", 0);
    s_expect_parse("x1", "x1", 0);
    s_expect_parse("^x1", "x1", ZF_CONTROL_PORT);
    const char *n;
    size_t len;
    int port;
    zf_status_t s = zf_tensor_name_parse_n("node:1 trailing", 6, &n, &len, &port);
    assert_true(zf_ok(s));
    assert_int_equal(len, 4);
    assert_int_equal(port, 1);
}

static void test_tensor_names_reject_malformed_forms(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",     "^",  "x:",  "x:-1",  "x:abc", "x:1a", "x:2147483648", "x:99999999999",
        "^x:1", ":0", "^:0", "a:b:0", ":",     "^:",   "a:b",          "x::1"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *n = NULL;
        size_t len = 99;
        int port = 99;
        zf_status_t s = zf_tensor_name_parse(bad[k], &n, &len, &port);
        if (s.code != ZF_INVALID_ARGUMENT) fail_msg("'%s' was accepted", bad[k]);
        assert_null(n);
        assert_int_equal(len, 99);
        assert_int_equal(port, 99);
        zf_status_clear(&s);
    }
    const char *n;
    size_t len;
    int port;
    zf_status_t s = zf_tensor_name_parse("x:", &n, &len, &port);
    assert_string_equal(zf_status_msg(&s), "malformed tensor name 'x:': no output index after ':'");
    zf_status_clear(&s);
}

/* The rules, written the obvious way: optional '^', then a non-empty name
 * without ':', then optionally ':' and digits (not for a control input). */
static bool s_reference_parse(const char *s, size_t *name_len, int *port)
{
    size_t start = s[0] == '^' ? 1 : 0;
    const char *rest = s + start;
    if (!*rest) return false;
    const char *colon = strrchr(rest, ':');
    if (!colon) {
        *name_len = strlen(rest);
        *port = start ? ZF_CONTROL_PORT : 0;
        return true;
    }
    if (start || colon == rest || !colon[1] || memchr(rest, ':', (size_t)(colon - rest)))
        return false;
    long v = 0;
    for (const char *c = colon + 1; *c; c++) {
        if (*c < '0' || *c > '9') return false;
        v = v * 10 + (*c - '0');
    }
    *name_len = (size_t)(colon - rest);
    *port = (int)v;
    return true;
}

static void test_tensor_names_agree_with_a_simple_reference(void **state)
{
    (void)state;
    static const char alphabet[] = "a:^09";
    char s[8];
    for (int len = 0; len <= 5; len++) {
        int total = 1;
        for (int k = 0; k < len; k++) total *= 5;
        for (int code = 0; code < total; code++) {
            for (int k = 0, c = code; k < len; k++, c /= 5) s[k] = alphabet[c % 5];
            s[len] = '\0';
            size_t ref_len = 0, len_out = 0;
            int ref_port = 0, port = 0;
            const char *name = NULL;
            bool want = s_reference_parse(s, &ref_len, &ref_port);
            zf_status_t st = zf_tensor_name_parse(s, &name, &len_out, &port);
            if (want != zf_ok(st)) fail_msg("'%s': reference %d, parser %d", s, want, zf_ok(st));
            if (want) {
                assert_int_equal(len_out, ref_len);
                assert_int_equal(port, ref_port);
                assert_ptr_equal(name, s + (s[0] == '^'));
            }
            zf_status_clear(&st);
        }
    }
}

/* --- attrs -------------------------------------------------------------------------- */

static Tensorflow__NodeDef *s_attr_node(void)
{
    Tensorflow__NodeDef *n = malloc(sizeof *n);
    assert_non_null(n);
    tensorflow__node_def__init(n);
    n->name = s_strdup("mm");
    n->op = s_strdup("MatMul");
    Tensorflow__AttrValue *v = s_add_attr(n, "i");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = -42;
    v = s_add_attr(n, "f");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
    v->f = 1.5f;
    v = s_add_attr(n, "transpose_a");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    v->b = 1;
    s_set_type(n, "T", ZF_HALF);
    s_set_type(n, "Tref", (zf_dtype_t)(ZF_FLOAT + ZF_DTYPE_REF_OFFSET));
    s_set_type(n, "bad_type", (zf_dtype_t)77);
    v = s_add_attr(n, "s");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)s_strdup("abc");
    v->s.len = 3;
    v = s_add_attr(n, "shape");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    v->shape = malloc(sizeof *v->shape);
    tensorflow__tensor_shape_proto__init(v->shape);
    v->shape->unknown_rank = 1;
    v = s_add_attr(n, "value");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    v->tensor = malloc(sizeof *v->tensor);
    tensorflow__tensor_proto__init(v->tensor);
    v->tensor->dtype = TENSORFLOW__DATA_TYPE__DT_INT32;
    v = s_add_attr(n, "f_attr");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_FUNC;
    v->func = malloc(sizeof *v->func);
    tensorflow__name_attr_list__init(v->func);
    v->func->name = s_strdup("body_fn");
    Tensorflow__AttrValue__ListValue *l = s_set_list(n, "ints");
    l->i = malloc(3 * sizeof *l->i);
    l->n_i = 3;
    l->i[0] = 1;
    l->i[1] = -2;
    l->i[2] = 3;
    l = s_set_list(n, "types");
    l->type = malloc(2 * sizeof *l->type);
    l->n_type = 2;
    l->type[0] = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    l->type[1] = TENSORFLOW__DATA_TYPE__DT_INT64;
    l = s_set_list(n, "strings");
    l->s = malloc(2 * sizeof *l->s);
    l->n_s = 2;
    l->s[0] = (ProtobufCBinaryData){5, (uint8_t *)s_strdup("loc:@")};
    l->s[1] = (ProtobufCBinaryData){1, (uint8_t *)s_strdup("z")};
    l = s_set_list(n, "floats");
    l->f = malloc(sizeof *l->f);
    l->n_f = 1;
    l->f[0] = 0.25f;
    l = s_set_list(n, "shapes");
    l->shape = malloc(sizeof *l->shape);
    l->n_shape = 1;
    l->shape[0] = malloc(sizeof *l->shape[0]);
    tensorflow__tensor_shape_proto__init(l->shape[0]);
    s_set_list(n, "empty");
    v = s_add_attr(n, "unset");
    (void)v;
    v = s_add_attr(n, "dup");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = 1;
    v = s_add_attr(n, "dup");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = 2;
    return n;
}

static void s_expect_attr_error(zf_status_t s, const char *msg)
{
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), msg);
    zf_status_clear(&s);
}

#define S_OK(expr) assert_true(zf_ok(expr))

static void test_attrs_read_each_scalar_kind(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_attr_node();
    int64_t i = 0;
    S_OK(zf_node_attr_int(n, "i", &i));
    assert_int_equal(i, -42);
    float f = 0;
    S_OK(zf_node_attr_float(n, "f", &f));
    assert_true(f == 1.5f);
    bool b = false;
    S_OK(zf_node_attr_bool(n, "transpose_a", &b));
    assert_true(b);
    zf_dtype_t t = ZF_INVALID;
    S_OK(zf_node_attr_type(n, "T", &t));
    assert_int_equal(t, ZF_HALF);
    S_OK(zf_node_attr_type(n, "Tref", &t));
    assert_int_equal(t, ZF_FLOAT + ZF_DTYPE_REF_OFFSET);
    const uint8_t *data;
    size_t len;
    S_OK(zf_node_attr_string(n, "s", &data, &len));
    assert_int_equal(len, 3);
    assert_memory_equal(data, "abc", 3);
    const Tensorflow__TensorShapeProto *shape = NULL;
    S_OK(zf_node_attr_shape(n, "shape", &shape));
    assert_true(shape->unknown_rank);
    const Tensorflow__TensorProto *tensor = NULL;
    S_OK(zf_node_attr_tensor(n, "value", &tensor));
    assert_int_equal(tensor->dtype, ZF_INT32);
    const Tensorflow__NameAttrList *fn = NULL;
    S_OK(zf_node_attr_func(n, "f_attr", &fn));
    assert_string_equal(fn->name, "body_fn");
    S_OK(zf_node_attr_int(n, "dup", &i));
    assert_int_equal(i, 2);
    assert_non_null(zf_node_attr(n, "s"));
    assert_null(zf_node_attr(n, "nope"));
    assert_string_equal(zf_attr_kind_name(zf_node_attr(n, "ints")), "list(int)");
    assert_string_equal(zf_attr_kind_name(zf_node_attr(n, "empty")), "list");
    assert_string_equal(zf_attr_kind_name(zf_node_attr(n, "unset")), "none");
    protobuf_c_message_free_unpacked(&n->base, NULL);
}

static void test_attrs_use_defaults_only_when_missing(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_attr_node();
    bool b = true;
    S_OK(zf_node_attr_bool_or(n, "transpose_b", false, &b));
    assert_false(b);
    S_OK(zf_node_attr_bool_or(n, "transpose_a", false, &b));
    assert_true(b);
    int64_t i = 0;
    S_OK(zf_node_attr_int_or(n, "missing", 9, &i));
    assert_int_equal(i, 9);
    float f = 0;
    S_OK(zf_node_attr_float_or(n, "missing", 2.5f, &f));
    assert_true(f == 2.5f);
    zf_dtype_t t = ZF_INVALID;
    S_OK(zf_node_attr_type_or(n, "missing", ZF_INT64, &t));
    assert_int_equal(t, ZF_INT64);
    const uint8_t *data;
    size_t len;
    S_OK(zf_node_attr_string_or(n, "missing", "NHWC", &data, &len));
    assert_int_equal(len, 4);
    assert_memory_equal(data, "NHWC", 4);
    s_expect_attr_error(zf_node_attr_bool_or(n, "i", false, &b),
                        "node 'mm' (MatMul): attr 'i' has type int, expected bool");
    protobuf_c_message_free_unpacked(&n->base, NULL);
}

static void test_attrs_report_missing_and_wrong_kinds(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_attr_node();
    int64_t i = 5;
    bool b;
    float f;
    zf_dtype_t t;
    const uint8_t *data;
    size_t len;
    const Tensorflow__TensorShapeProto *shape;
    const Tensorflow__TensorProto *tensor;
    const Tensorflow__NameAttrList *fn;
    s_expect_attr_error(zf_node_attr_bool(n, "i", &b),
                        "node 'mm' (MatMul): attr 'i' has type int, expected bool");
    s_expect_attr_error(zf_node_attr_int(n, "transpose_a", &i),
                        "node 'mm' (MatMul): attr 'transpose_a' has type bool, expected int");
    assert_int_equal(i, 5);
    s_expect_attr_error(zf_node_attr_int(n, "missing", &i),
                        "node 'mm' (MatMul): missing attr 'missing'");
    s_expect_attr_error(zf_node_attr_float(n, "s", &f),
                        "node 'mm' (MatMul): attr 's' has type string, expected float");
    s_expect_attr_error(zf_node_attr_type(n, "ints", &t),
                        "node 'mm' (MatMul): attr 'ints' has type list(int), expected type");
    s_expect_attr_error(zf_node_attr_type(n, "bad_type", &t),
                        "node 'mm' (MatMul): attr 'bad_type' holds invalid type 77");
    s_expect_attr_error(zf_node_attr_type(n, "missing", &t),
                        "node 'mm' (MatMul): missing attr 'missing'");
    s_expect_attr_error(zf_node_attr_string(n, "T", &data, &len),
                        "node 'mm' (MatMul): attr 'T' has type type, expected string");
    s_expect_attr_error(zf_node_attr_string(n, "missing", &data, &len),
                        "node 'mm' (MatMul): missing attr 'missing'");
    s_expect_attr_error(zf_node_attr_shape(n, "value", &shape),
                        "node 'mm' (MatMul): attr 'value' has type tensor, expected shape");
    s_expect_attr_error(zf_node_attr_tensor(n, "shape", &tensor),
                        "node 'mm' (MatMul): attr 'shape' has type shape, expected tensor");
    s_expect_attr_error(zf_node_attr_func(n, "unset", &fn),
                        "node 'mm' (MatMul): attr 'unset' has type none, expected func");
    s_expect_attr_error(zf_node_attr_int(n, "f", &i),
                        "node 'mm' (MatMul): attr 'f' has type float, expected int");
    s_expect_attr_error(zf_node_attr_bool_or(n, "f_attr", true, &b),
                        "node 'mm' (MatMul): attr 'f_attr' has type func, expected bool");
    protobuf_c_message_free_unpacked(&n->base, NULL);
}

static void test_attrs_read_lists_and_check_their_kind(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_attr_node();
    const int64_t *ints;
    size_t count;
    S_OK(zf_node_attr_list_int(n, "ints", &ints, &count));
    assert_int_equal(count, 3);
    assert_int_equal(ints[1], -2);
    const Tensorflow__DataType *types;
    S_OK(zf_node_attr_list_type(n, "types", &types, &count));
    assert_int_equal(count, 2);
    assert_int_equal(types[1], ZF_INT64);
    const ProtobufCBinaryData *strs;
    S_OK(zf_node_attr_list_string(n, "strings", &strs, &count));
    assert_int_equal(count, 2);
    assert_memory_equal(strs[0].data, "loc:@", 5);
    const float *floats;
    S_OK(zf_node_attr_list_float(n, "floats", &floats, &count));
    assert_int_equal(count, 1);
    assert_true(floats[0] == 0.25f);
    const Tensorflow__TensorShapeProto *const *shapes;
    S_OK(zf_node_attr_list_shape(n, "shapes", &shapes, &count));
    assert_int_equal(count, 1);
    assert_int_equal(shapes[0]->n_dim, 0);
    /* An empty list matches any list kind. */
    count = 9;
    S_OK(zf_node_attr_list_int(n, "empty", &ints, &count));
    assert_int_equal(count, 0);
    S_OK(zf_node_attr_list_string(n, "empty", &strs, &count));
    assert_int_equal(count, 0);
    s_expect_attr_error(zf_node_attr_list_int(n, "strings", &ints, &count),
                        "node 'mm' (MatMul): attr 'strings' has type list(string), expected "
                        "list(int)");
    s_expect_attr_error(zf_node_attr_list_type(n, "T", &types, &count),
                        "node 'mm' (MatMul): attr 'T' has type type, expected list(type)");
    s_expect_attr_error(zf_node_attr_list_string(n, "missing", &strs, &count),
                        "node 'mm' (MatMul): missing attr 'missing'");
    protobuf_c_message_free_unpacked(&n->base, NULL);
}

/* --- real graphs ------------------------------------------------------------------- */

/* Every TensorFlow test graph that parses also loads: while loops, function
 * libraries and unknown ops are kept and reported, not rejected. */
static void test_graph_loads_the_tensorflow_test_graphs(void **state)
{
    (void)state;
    DIR *d = opendir(ZF_TF_DATA_DIR);
    assert_non_null(d);
    int loaded = 0, with_loops = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 6, ".pbtxt") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", ZF_TF_DATA_DIR, e->d_name);
        Tensorflow__GraphDef *gd = NULL;
        zf_status_t s = zf_graphdef_read_file(path, ZF_FORMAT_AUTO, &gd);
        if (!zf_ok(s)) {
            zf_status_clear(&s);
            continue;
        }
        zf_graph_t *g = NULL;
        s = zf_graph_new_from_graphdef(gd, &g);
        if (!zf_ok(s)) fail_msg("%s: %s", e->d_name, zf_status_msg(&s));
        for (int i = 0; i < zf_graph_num_nodes(g); i++)
            with_loops += strcmp(zf_graph_node_op(g, i), "NextIteration") == 0;
        zf_graph_adopt_graphdef(g, &gd);
        zf_graph_destroy(&g);
        loaded++;
    }
    closedir(d);
    assert_true(loaded >= 20);
    assert_true(with_loops >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_builds_data_edges_with_ports),
        cmocka_unit_test(test_graph_keeps_control_edges_after_data_edges),
        cmocka_unit_test(test_graph_out_edges_are_ordered_by_destination),
        cmocka_unit_test(test_graph_finds_nodes_by_name_and_by_prefix),
        cmocka_unit_test(test_graph_loads_an_empty_graphdef),
        cmocka_unit_test(test_graph_adopts_its_graphdef),
        cmocka_unit_test(test_graph_orders_a_diamond_listed_backwards),
        cmocka_unit_test(test_graph_topo_order_takes_the_lowest_ready_index_first),
        cmocka_unit_test(test_graph_topo_order_of_a_sorted_wide_graph_is_the_identity),
        cmocka_unit_test(test_graph_accepts_next_iteration_back_edges),
        cmocka_unit_test(test_graph_rejects_a_cycle_and_names_its_nodes),
        cmocka_unit_test(test_graph_rejects_a_self_loop),
        cmocka_unit_test(test_graph_rejects_a_cycle_through_control_edges),
        cmocka_unit_test(test_graph_rejects_a_cycle_that_bypasses_next_iteration),
        cmocka_unit_test(test_graph_rejects_duplicate_node_names),
        cmocka_unit_test(test_graph_rejects_duplicate_names_far_apart_and_at_the_end),
        cmocka_unit_test(test_graph_reports_missing_inputs_by_count),
        cmocka_unit_test(test_graph_rejects_malformed_inputs),
        cmocka_unit_test(test_graph_rejects_data_inputs_after_control_inputs),
        cmocka_unit_test(test_graph_rejects_empty_names_and_ops),
        cmocka_unit_test(test_graph_rejects_output_indices_beyond_a_known_arity),
        cmocka_unit_test(test_graph_accepts_any_output_index_of_an_unknown_op),
        cmocka_unit_test(test_graph_keeps_unknown_ops_and_lists_them),
        cmocka_unit_test(test_graph_reports_library_functions_and_functional_ops),
        cmocka_unit_test(test_graph_fills_default_attrs_into_its_graphdef),
        cmocka_unit_test(test_graph_resolves_output_types_through_the_op_registry),
        cmocka_unit_test(test_graph_builds_a_large_graph),
        cmocka_unit_test(test_tensor_names_parse_names_ports_and_controls),
        cmocka_unit_test(test_tensor_names_reject_malformed_forms),
        cmocka_unit_test(test_tensor_names_agree_with_a_simple_reference),
        cmocka_unit_test(test_attrs_read_each_scalar_kind),
        cmocka_unit_test(test_attrs_use_defaults_only_when_missing),
        cmocka_unit_test(test_attrs_report_missing_and_wrong_kinds),
        cmocka_unit_test(test_attrs_read_lists_and_check_their_kind),
        cmocka_unit_test(test_graph_loads_the_tensorflow_test_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
