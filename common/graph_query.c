/* Graph queries: nodes, edges, order, op reporting and output types of a
 * built graph. Read-only, so safe from any number of threads. */
#include "common/graph.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph_internal.h"
#include "common/tensor.h"

static inline const char *s_str(const char *s)
{
    return s ? s : "";
}

static const char *s_plural(int n)
{
    return n == 1 ? "" : "s";
}

int zf_graph_num_nodes(const zf_graph_t *g)
{
    return g->n;
}

const Tensorflow__GraphDef *zf_graph_graphdef(const zf_graph_t *g)
{
    return g->gd;
}

const Tensorflow__NodeDef *zf_graph_node_def(const zf_graph_t *g, int i)
{
    assert(i >= 0 && i < g->n);
    return g->gd->node[i];
}

const char *zf_graph_node_name(const zf_graph_t *g, int i)
{
    return zf_graph_node_def(g, i)->name;
}

const char *zf_graph_node_op(const zf_graph_t *g, int i)
{
    return zf_graph_node_def(g, i)->op;
}

const char *zf_graph_node_device(const zf_graph_t *g, int i)
{
    return s_str(zf_graph_node_def(g, i)->device);
}

int zf_graph_find_node_n(const zf_graph_t *g, const char *name, size_t len)
{
    uintptr_t v;
    return zf_strmap_get_n(g->names, name, len, &v) ? (int)v : -1;
}

int zf_graph_find_node(const zf_graph_t *g, const char *name)
{
    return zf_graph_find_node_n(g, name, strlen(name));
}

int zf_graph_num_edges(const zf_graph_t *g)
{
    return g->num_edges;
}

int zf_graph_in_edges(const zf_graph_t *g, int i, const zf_edge_t **edges)
{
    assert(i >= 0 && i < g->n);
    *edges = g->in_edges + g->in_off[i];
    return g->in_off[i + 1] - g->in_off[i];
}

int zf_graph_out_edges(const zf_graph_t *g, int i, const zf_edge_t **edges)
{
    assert(i >= 0 && i < g->n);
    *edges = g->out_edges + g->out_off[i];
    return g->out_off[i + 1] - g->out_off[i];
}

int zf_graph_num_data_inputs(const zf_graph_t *g, int i)
{
    assert(i >= 0 && i < g->n);
    return g->n_data[i];
}

int zf_graph_num_control_inputs(const zf_graph_t *g, int i)
{
    assert(i >= 0 && i < g->n);
    return g->in_off[i + 1] - g->in_off[i] - g->n_data[i];
}

void zf_graph_topo_order(const zf_graph_t *g, int *order)
{
    if (g->n > 0) memcpy(order, g->topo, (size_t)g->n * sizeof *order);
}

const zf_op_def_t *zf_graph_op_def(const zf_graph_t *g, int i)
{
    assert(i >= 0 && i < g->n);
    return g->ops[g->op_of[i]].def;
}

zf_node_support_t zf_graph_node_support(const zf_graph_t *g, int i)
{
    assert(i >= 0 && i < g->n);
    return g->ops[g->op_of[i]].support;
}

const char *zf_node_support_name(zf_node_support_t s)
{
    switch (s) {
    case ZF_NODE_SUPPORTED: return "supported";
    case ZF_NODE_UNKNOWN_OP: return "unknown op";
    case ZF_NODE_LIBRARY_FUNCTION: return "library function";
    case ZF_NODE_FUNCTIONAL_OP: return "functional op";
    case ZF_NODE_UNSUPPORTED_OP: return "unsupported op";
    }
    return "invalid";
}

int zf_graph_num_unsupported_nodes(const zf_graph_t *g)
{
    return g->num_unsupported;
}

int zf_graph_unsupported_node(const zf_graph_t *g, int k)
{
    assert(k >= 0 && k < g->num_unsupported);
    return g->unsupported[k];
}

int zf_graph_num_ops(const zf_graph_t *g)
{
    return g->num_ops;
}

zf_op_stat_t zf_graph_op_stat(const zf_graph_t *g, int k)
{
    assert(k >= 0 && k < g->num_ops);
    const zf__graph_op_t *o = &g->ops[k];
    return (zf_op_stat_t){o->name, o->count, o->support, o->def};
}

int zf_graph_num_unknown_ops(const zf_graph_t *g)
{
    return g->num_unknown_ops;
}

const char *zf_graph_unknown_op(const zf_graph_t *g, int k)
{
    assert(k >= 0 && k < g->num_unknown_ops);
    return g->ops[g->unknown_ops[k]].name;
}

bool zf_graph_has_library(const zf_graph_t *g)
{
    return g->gd->library != NULL;
}

int zf_graph_num_library_functions(const zf_graph_t *g)
{
    return g->num_functions;
}

zf_status_t zf_graph_num_outputs(const zf_graph_t *g, int i, int *n)
{
    const zf_op_def_t *def = zf_graph_op_def(g, i);
    const Tensorflow__NodeDef *node = g->gd->node[i];
    if (!def)
        return zf_not_found("node '%s' (%s): op '%s' is not registered", node->name, node->op,
                            node->op);
    return zf_op_output_types(def, node, NULL, 0, n);
}

zf_status_t zf_graph_output_type(const zf_graph_t *g, int i, int port, zf_dtype_t *dtype)
{
    int n;
    ZF_TRY(zf_graph_num_outputs(g, i, &n));
    const Tensorflow__NodeDef *node = g->gd->node[i];
    if (port < 0 || port >= n)
        return zf_invalid_argument("node '%s' (%s): output %d out of range (%d output%s)",
                                   node->name, node->op, port, n, s_plural(n));
    zf_dtype_t small[16];
    zf_dtype_t *types = port < 16 ? small : malloc(((size_t)port + 1) * sizeof *types);
    if (!types) return zf_out_of_memory("output types");
    int got;
    zf_status_t s = zf_op_output_types(zf_graph_op_def(g, i), node, types, port + 1, &got);
    if (zf_ok(s)) *dtype = types[port];
    if (types != small) free(types);
    return s;
}

/* A Placeholder's declared shape admits got: unknown rank, or the same rank
 * with every known dim equal. */
static zf_status_t s_check_feed_shape(const Tensorflow__NodeDef *nd, const char *name,
                                      const zf_shape_t *got)
{
    const Tensorflow__TensorShapeProto *proto = NULL;
    zf_shape_t want;
    if (strcmp(nd->op, "Placeholder") != 0 || !zf_node_attr(nd, "shape")) return ZF_STATUS_OK;
    zf_status_t st = zf_node_attr_shape(nd, "shape", &proto);
    if (zf_ok(st)) st = zf_shape_from_proto(proto, &want);
    if (!zf_ok(st)) { /* a malformed attr is the Placeholder kernel's business */
        zf_status_clear(&st);
        return ZF_STATUS_OK;
    }
    bool ok = want.rank < 0 || want.rank == got->rank;
    for (int d = 0; ok && d < want.rank; d++) ok = want.dims[d] < 0 || want.dims[d] == got->dims[d];
    if (ok) return ZF_STATUS_OK;
    char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
    return zf_invalid_argument("Cannot feed value of shape %s for Tensor '%s', which has shape %s",
                               zf_shape_to_string(got, a, sizeof a), name,
                               zf_shape_to_string(&want, b, sizeof b));
}

int zf_graph_find_tensor(const zf_graph_t *g, const char *name, int *port)
{
    const char *node = NULL;
    size_t len = 0;
    *port = 0;
    zf_status_t s = zf_tensor_name_parse(name, &node, &len, port);
    int id = zf_ok(s) ? zf_graph_find_node_n(g, node, len) : -1;
    zf_status_clear(&s);
    return id;
}

zf_status_t zf_graph_check_feed(const zf_graph_t *g, const char *name, zf_dtype_t dtype,
                                const zf_shape_t *shape)
{
    const char *node = NULL;
    size_t len = 0;
    int port = 0;
    ZF_TRY(zf_tensor_name_parse(name, &node, &len, &port));
    int id = zf_graph_find_node_n(g, node, len);
    if (id < 0) return ZF_STATUS_OK; /* the partitioner names it */
    zf_dtype_t want = ZF_INVALID;
    ZF_TRY(zf_graph_output_type(g, id, port, &want));
    want = zf_dtype_base(want);
    if (want != dtype)
        return zf_invalid_argument("Cannot feed value of dtype %s for Tensor '%s', which has "
                                   "dtype %s",
                                   zf_dtype_name(dtype), name, zf_dtype_name(want));
    return shape ? s_check_feed_shape(zf_graph_node_def(g, id), name, shape) : ZF_STATUS_OK;
}
