/* Functions (docs/design.md, "Functions"): the graph transform that makes a
 * GraphDef with a function library runnable as one flat graph, as
 * TensorFlow's graph optimization passes do before placement:
 *
 *   - Calls are inlined: a node whose op names a library function, and
 *     PartitionedCall / StatefulPartitionedCall (attr f), are replaced by the
 *     function's body. Body nodes are named "<call>/<node>"; input k goes
 *     through an Identity "<call>/input/_<k>" and output k leaves through an
 *     Identity "<call>/output/_<k>"; the call's control inputs gather in a NoOp
 *     "<call>/input_control_node" that the input Identities and the body's
 *     nodes without inputs wait for; a NoOp "<call>/output_control_node" waits
 *     for every output and every control_ret node. The call's name stays as an
 *     IdentityN of the outputs (a NoOp when there are none) that waits for
 *     "<call>/output_control_node", so "call:i" and "^call" keep their meaning.
 *     Placeholder attrs ("$T") take the call's attrs (then the signature's
 *     defaults). A body node without a device takes the call's. Nested calls
 *     are inlined in turn; a function that calls itself is refused.
 *   - Functional control flow is lowered to dataflow control flow with the
 *     branch and loop functions called (then inlined) inside it:
 *     If/StatelessIf to Switch/Merge, Case/StatelessCase to _SwitchN/Merge,
 *     While/StatelessWhile to Enter/Merge/LoopCond/Switch/NextIteration/Exit
 *     in a frame named after the While node. Node names and attrs follow
 *     TensorFlow's lowering (see functions_internal.h).
 *   - A top-level graph written as a function (_Arg / _Retval with attr
 *     index) becomes a plain graph: each _Arg a Placeholder of its type under
 *     the same name (fed by that name), each _Retval an Identity of its input
 *     under the same name (fetched by that name). zf_functions_arg_name() and
 *     zf_functions_retval_name() map an index to that name.
 *   - The result keeps only the library functions its nodes still reach
 *     (usually none).
 *
 * Layer 3: pure functions of their inputs, thread-safe, never block. */
#ifndef ZF_FUNCTIONS_H
#define ZF_FUNCTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "proto/graph.pb-c.h"

/* Whether gd needs zf_functions_lower() to change it: a non-empty library,
 * or an _Arg, _Retval or functional op. Linear in the nodes, no allocation. */
bool zf_functions_needed(const Tensorflow__GraphDef *gd);

/* Inlines, lowers and rewrites gd (borrowed) as described above. When gd
 * needs nothing, *out is NULL and OK is returned: use gd itself. Otherwise
 * *out is a new GraphDef owned by the caller, allocated as protobuf-c's
 * unpack does (free with protobuf_c_message_free_unpacked(.., NULL), or hand
 * it to zf_graph_adopt_graphdef()).
 * Errors (INVALID_ARGUMENT, naming the function and the node): a call of a
 * function missing from the library; a call whose number of inputs differs
 * from the signature's; a missing attr the signature or a placeholder needs;
 * a body input that names neither an argument nor a node output ("x",
 * "x:i", "node:out_arg:i" in FunctionDef syntax); a missing or unresolvable
 * ret; a function that calls itself ("recursive call to function 'f'");
 * If/Case/While without their function attrs, a While without loop
 * variables; _Arg/_Retval indices that repeat or leave gaps; a result
 * above 4M nodes or ZF_GRAPHDEF_MAX_BYTES serialized. RESOURCE_EXHAUSTED
 * when out of memory. */
zf_status_t zf_functions_lower(const Tensorflow__GraphDef *gd, Tensorflow__GraphDef **out);

/* The name of the top-level _Arg (or _Retval) node whose attr index is
 * index, or NULL when there is none. Borrowed from gd. */
const char *zf_functions_arg_name(const Tensorflow__GraphDef *gd, int64_t index);
const char *zf_functions_retval_name(const Tensorflow__GraphDef *gd, int64_t index);

/* The part of lib that nodes[0..n) reach (TensorFlow's
 * ReachableDefinitions): functions named by a node's op or by a func or
 * list(func) attr, transitively through their bodies, with the gradients of
 * those functions. *out is NULL when nothing is reached (or lib is NULL);
 * otherwise a new library owned by the caller (protobuf-c allocation).
 * Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_functions_reachable(const Tensorflow__FunctionDefLibrary *lib,
                                   Tensorflow__NodeDef *const *nodes, size_t n,
                                   Tensorflow__FunctionDefLibrary **out);

#endif
