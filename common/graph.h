/* Graph: the in-memory, validated form of a TensorFlow GraphDef — nodes by
 * index, name lookup, data and control edges in flat (CSR) arrays, a
 * deterministic topological order — plus NodeDef attr accessors and tensor
 * name parsing shared by the modules that read graphs.
 *
 * Node i of a graph is gd->node[i]. Node names, ops and devices returned by
 * the accessors point into the GraphDef, which the graph BORROWS unless it
 * was handed over with zf_graph_adopt_graphdef(). Strings are read up to
 * their first NUL byte.
 *
 * Loading completes the GraphDef in place, as TensorFlow's graph
 * constructor completes the nodes it makes: a node of a registered op gets
 * every attr the op declares with a default and the node leaves out
 * (zf_op_add_default_attrs(); SavedModel's strip_default_attrs writes
 * graphs without them). So everything built from the graph, partitions
 * sent to executors included, carries them, while a GraphDef that is only
 * read and written (zflow convert) keeps the form it was read in. A
 * GraphDef that lacks defaults must therefore be allocated as protobuf-c's
 * unpack allocates it (zf_graphdef_read_*() do), and must not be loaded by
 * two threads at once; once complete, loading it again changes nothing.
 * Nodes of unknown ops and of library functions are left as they are.
 *
 * Cost: one pass over the NodeDefs plus passes over flat arrays, one hash
 * insert per node and one lookup per input, no allocation per node (but
 * for the default attrs a node leaves out); loading 1M nodes costs well
 * under protobuf-c's own unpack of them.
 *
 * Loading validates what TensorFlow's graph constructor rejects and answers
 * INVALID_ARGUMENT naming the node: empty names or ops, duplicate names,
 * malformed inputs ("", "^", "x:", "x:-1", "x:abc", ports past INT_MAX,
 * "^x:1"), data inputs after control inputs, inputs naming missing nodes
 * ("Incomplete graph, missing N inputs for X: 'a', ..."), output indices
 * beyond the source's arity where the op registry can resolve it from the
 * source's attrs (output 0 of an op that declares outputs is taken as
 * valid), and cycles that do not pass through a NextIteration node. When a
 * graph has several faults, which one is reported is deterministic but not
 * necessarily the first in node order. Ops that are unknown, that name
 * a library function, or that the registry marks functional or unsupported
 * are NOT load errors: the graph keeps them and reports them
 * (zf_graph_node_support(), zf_graph_op_stat(), zf_graph_unknown_op()).
 *
 * Thread-safety: a graph is immutable once built; any number of threads may
 * query it concurrently. Nothing here blocks. */
#ifndef ZF_GRAPH_H
#define ZF_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/op_registry.h"
#include "common/status.h"
#include "proto/graph.pb-c.h"

typedef struct zf_graph zf_graph_t;

/* The port of a control input: "^name" parses to it, and control edges carry
 * it as their dst_port (and src_port). */
#define ZF_CONTROL_PORT (-1)

/* One edge. A data edge feeds output src_port of node src into input
 * dst_port of node dst; a control edge has src_port == dst_port ==
 * ZF_CONTROL_PORT. */
typedef struct zf_edge {
    int src, src_port;
    int dst, dst_port;
} zf_edge_t;

static inline bool zf_edge_is_control(const zf_edge_t *e)
{
    return e->dst_port == ZF_CONTROL_PORT;
}

/* --- construction ------------------------------------------------------ */

/* Builds and validates the graph of gd, adding to its nodes the default
 * attrs they leave out (see the top of this file: the one change made to
 * gd, which may have happened to some nodes also when loading fails). The
 * graph BORROWS gd: gd must stay alive and otherwise unchanged until
 * zf_graph_destroy() (or be handed over with zf_graph_adopt_graphdef()).
 * On success *out is owned by the caller; on error *out is NULL. Errors:
 * INVALID_ARGUMENT (see the top of this file), RESOURCE_EXHAUSTED when out
 * of memory. Cost is linear in nodes + inputs. */
zf_status_t zf_graph_new_from_graphdef(Tensorflow__GraphDef *gd, zf_graph_t **out);

/* The graph of gd, which is old's GraphDef grown: its first nodes are
 * old's own NodeDefs (the same pointers, in the same order), its library
 * old's, and the nodes after them new. Only the new nodes are read: old's
 * index (names, edges, order) is copied and extended, so the cost is a
 * copy of old's tables plus the new nodes, not a build of the whole graph.
 * The result equals zf_graph_new_from_graphdef(gd) (node order and
 * topological order included); old is not changed and stays valid. gd is
 * borrowed as there. Errors: those of zf_graph_new_from_graphdef about the
 * new nodes; INVALID_ARGUMENT when gd does not extend old. */
zf_status_t zf_graph_extend(const zf_graph_t *old, Tensorflow__GraphDef *gd, zf_graph_t **out);

/* Hands the GraphDef the graph was built from over to the graph, which then
 * frees it with protobuf_c_message_free_unpacked(.., NULL) when destroyed.
 * *gd_p must be the graph's own GraphDef, allocated the way protobuf-c's
 * unpack (default allocator) or zf_graphdef_read_*() allocates it; sets
 * *gd_p to NULL. Typical loader use:
 *     s = zf_graph_new_from_graphdef(gd, &g);
 *     if (zf_ok(s)) zf_graph_adopt_graphdef(g, &gd); else free gd yourself. */
void zf_graph_adopt_graphdef(zf_graph_t *g, Tensorflow__GraphDef **gd_p);

/* Takes back the GraphDef the graph adopted (NULL when it adopted none):
 * the caller owns it again, and it must outlive the graph as a borrowed
 * one does. */
Tensorflow__GraphDef *zf_graph_release_graphdef(zf_graph_t *g);

/* Frees the graph (and its GraphDef if adopted); NULL-safe, sets *g_p NULL. */
void zf_graph_destroy(zf_graph_t **g_p);

/* --- nodes ------------------------------------------------------------- */

/* Node indices are 0 .. zf_graph_num_nodes() - 1, in GraphDef order. The
 * per-node accessors assert that i is in range. */
int zf_graph_num_nodes(const zf_graph_t *g);
const Tensorflow__GraphDef *zf_graph_graphdef(const zf_graph_t *g);
const Tensorflow__NodeDef *zf_graph_node_def(const zf_graph_t *g, int i);
const char *zf_graph_node_name(const zf_graph_t *g, int i);
const char *zf_graph_node_op(const zf_graph_t *g, int i);
/* Whether op is name or its Ref variant ("Enter", "RefEnter"). */
bool zf_op_is(const char *op, const char *name);
const char *zf_graph_node_device(const zf_graph_t *g, int i); /* "" when unset */

/* Index of the node called name (or the len bytes at name), or -1. */
int zf_graph_find_node(const zf_graph_t *g, const char *name);
int zf_graph_find_node_n(const zf_graph_t *g, const char *name, size_t len);

/* --- edges ------------------------------------------------------------- */

int zf_graph_num_edges(const zf_graph_t *g); /* data + control */

/* Node i's incoming edges, in the order of its NodeDef's inputs: its data
 * inputs first (edges[k].dst_port == k), then its control inputs. Returns the
 * count and points *edges into the graph (valid while the graph lives). */
int zf_graph_in_edges(const zf_graph_t *g, int i, const zf_edge_t **edges);

/* Node i's outgoing edges, ordered by destination node, then by the
 * destination's input position. */
int zf_graph_out_edges(const zf_graph_t *g, int i, const zf_edge_t **edges);

int zf_graph_num_data_inputs(const zf_graph_t *g, int i);
int zf_graph_num_control_inputs(const zf_graph_t *g, int i);

/* Writes all num_nodes node indices to order[] in a topological order over
 * data and control edges, ignoring edges out of NextIteration nodes (the back
 * edges of while loops). Deterministic: among ready nodes the lowest index
 * comes first, so a GraphDef already in topological order gives 0, 1, 2, .. */
void zf_graph_topo_order(const zf_graph_t *g, int *order);

/* --- ops --------------------------------------------------------------- */

/* The op registry's definition of node i's op, or NULL when the op is unknown
 * (or names a library function). Looked up once per distinct op at load. */
const zf_op_def_t *zf_graph_op_def(const zf_graph_t *g, int i);

typedef enum zf_node_support {
    ZF_NODE_SUPPORTED = 0,    /* a registered op zflow can run */
    ZF_NODE_UNKNOWN_OP,       /* neither registered nor a library function */
    ZF_NODE_LIBRARY_FUNCTION, /* op names a function in the graph's library */
    ZF_NODE_FUNCTIONAL_OP,    /* registered with ZF_OP_FUNCTIONAL (While, If, ..) */
    ZF_NODE_UNSUPPORTED_OP,   /* registered with ZF_OP_UNSUPPORTED */
} zf_node_support_t;

zf_node_support_t zf_graph_node_support(const zf_graph_t *g, int i);

/* "supported", "unknown op", "library function", "functional op",
 * "unsupported op". */
const char *zf_node_support_name(zf_node_support_t s);

/* Number of nodes whose support is not ZF_NODE_SUPPORTED; and the k-th such
 * node's index (k < that number), in node order. */
int zf_graph_num_unsupported_nodes(const zf_graph_t *g);
int zf_graph_unsupported_node(const zf_graph_t *g, int k);

/* Distinct ops used by the graph, in order of first use: name, how many
 * nodes use it, and how it is supported. k < zf_graph_num_ops(). The name
 * points into the GraphDef. */
typedef struct zf_op_stat {
    const char *op;
    int count;
    zf_node_support_t support;
    const zf_op_def_t *def; /* NULL unless registered */
} zf_op_stat_t;

int zf_graph_num_ops(const zf_graph_t *g);
zf_op_stat_t zf_graph_op_stat(const zf_graph_t *g, int k);

/* Number of distinct ops that are neither registered nor library functions,
 * and the k-th one's name (in order of first use). */
int zf_graph_num_unknown_ops(const zf_graph_t *g);
const char *zf_graph_unknown_op(const zf_graph_t *g, int k);

/* Whether the GraphDef carries a function library, and how many functions. */
bool zf_graph_has_library(const zf_graph_t *g);
int zf_graph_num_library_functions(const zf_graph_t *g);

/* Number of output tensors of node i, and the dtype of one of them, resolved
 * through the op registry from the node's attrs (computed on each call).
 * Errors: NOT_FOUND when the op is not registered; INVALID_ARGUMENT when the
 * node's attrs do not determine its outputs or port is out of range. */
zf_status_t zf_graph_num_outputs(const zf_graph_t *g, int i, int *n);
zf_status_t zf_graph_output_type(const zf_graph_t *g, int i, int port, zf_dtype_t *dtype);

/* TensorFlow's check of a fed value against the graph, the same on every
 * path that accepts feeds: the fed dtype must be the output's (reference
 * types compare by their base), and a Placeholder's declared shape, where
 * it has one, must admit the fed shape (unknown dims match anything).
 * INVALID_ARGUMENT "Cannot feed value of dtype|shape ..." otherwise. A name
 * that is not in the graph passes: the partitioner names it. shape may be
 * NULL to check the dtype alone. */
struct zf_shape;
zf_status_t zf_graph_check_feed(const zf_graph_t *g, const char *name, zf_dtype_t dtype,
                                const struct zf_shape *shape);

/* --- tensor names ------------------------------------------------------ */

/* Parses a tensor reference as written in NodeDef inputs, feeds and fetches:
 * "name" (port 0), "name:port", or "^name" (control: *port is
 * ZF_CONTROL_PORT). *name points into s (not NUL-terminated), *len is its
 * length. INVALID_ARGUMENT for "", "^", "^x:1", ":0", "x:", "x:-1", "x:abc",
 * "x:+1" and ports above INT_MAX. The _n form reads slen bytes of s. */
zf_status_t zf_tensor_name_parse(const char *s, const char **name, size_t *len, int *port);
zf_status_t zf_tensor_name_parse_n(const char *s, size_t slen, const char **name, size_t *len,
                                   int *port);

/* The node of tensor name ("x" or "x:1") in g, with its port in *port; -1
 * when the name is malformed or names no node of g. */
int zf_graph_find_tensor(const zf_graph_t *g, const char *name, int *port);

/* --- attrs ------------------------------------------------------------- */

/* The value of node's attr key, or NULL when absent. When a key repeats (as
 * a map on the wire may), the last entry wins. Borrowed from node. */
const Tensorflow__AttrValue *zf_node_attr(const Tensorflow__NodeDef *node, const char *key);

/* "list(int)", "string", "int", "float", "bool", "type", "shape", "tensor",
 * "placeholder", "func", "none" (no value set): the names errors use. */
const char *zf_attr_kind_name(const Tensorflow__AttrValue *v);

/* Typed getters. Each returns INVALID_ARGUMENT naming node, op and attr when
 * the attr is missing ("node 'c' (Const): missing attr 'value'") or of
 * another kind ("node 'mm' (MatMul): attr 'transpose_a' has type int,
 * expected bool"). The *_or forms return def instead of failing when the
 * attr is missing (a wrong kind is still an error). Pointers returned point
 * into node. On error the outputs are untouched. */
zf_status_t zf_node_attr_int(const Tensorflow__NodeDef *node, const char *key, int64_t *out);
zf_status_t zf_node_attr_int_or(const Tensorflow__NodeDef *node, const char *key, int64_t def,
                                int64_t *out);
zf_status_t zf_node_attr_float(const Tensorflow__NodeDef *node, const char *key, float *out);
zf_status_t zf_node_attr_float_or(const Tensorflow__NodeDef *node, const char *key, float def,
                                  float *out);
zf_status_t zf_node_attr_bool(const Tensorflow__NodeDef *node, const char *key, bool *out);
zf_status_t zf_node_attr_bool_or(const Tensorflow__NodeDef *node, const char *key, bool def,
                                 bool *out);
/* A type attr must hold a valid dtype or *_REF dtype (INVALID_ARGUMENT
 * otherwise, e.g. DT_INVALID or an unknown number). */
zf_status_t zf_node_attr_type(const Tensorflow__NodeDef *node, const char *key, zf_dtype_t *out);
zf_status_t zf_node_attr_type_or(const Tensorflow__NodeDef *node, const char *key, zf_dtype_t def,
                                 zf_dtype_t *out);
/* Bytes attr: *data is not NUL-terminated in general; *len is its length. */
zf_status_t zf_node_attr_string(const Tensorflow__NodeDef *node, const char *key,
                                const uint8_t **data, size_t *len);
zf_status_t zf_node_attr_string_or(const Tensorflow__NodeDef *node, const char *key,
                                   const char *def, const uint8_t **data, size_t *len);
zf_status_t zf_node_attr_shape(const Tensorflow__NodeDef *node, const char *key,
                               const Tensorflow__TensorShapeProto **out);
zf_status_t zf_node_attr_tensor(const Tensorflow__NodeDef *node, const char *key,
                                const Tensorflow__TensorProto **out);
zf_status_t zf_node_attr_func(const Tensorflow__NodeDef *node, const char *key,
                              const Tensorflow__NameAttrList **out);

/* List getters: an empty list ("list {}") matches every list kind; a list
 * holding another kind is an error ("has type list(string), expected
 * list(int)"). Types are zf_dtype_t values stored as Tensorflow__DataType. */
zf_status_t zf_node_attr_list_int(const Tensorflow__NodeDef *node, const char *key,
                                  const int64_t **values, size_t *n);
zf_status_t zf_node_attr_list_float(const Tensorflow__NodeDef *node, const char *key,
                                    const float **values, size_t *n);
zf_status_t zf_node_attr_list_type(const Tensorflow__NodeDef *node, const char *key,
                                   const Tensorflow__DataType **values, size_t *n);
zf_status_t zf_node_attr_list_string(const Tensorflow__NodeDef *node, const char *key,
                                     const ProtobufCBinaryData **values, size_t *n);
zf_status_t zf_node_attr_list_shape(const Tensorflow__NodeDef *node, const char *key,
                                    const Tensorflow__TensorShapeProto *const **values, size_t *n);

#endif
