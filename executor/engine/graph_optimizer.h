/* The graph optimizer a partition goes through before its engine is built
 * (TensorFlow's GraphOptimizer at level L1, which its workers run on every
 * partition they register). A partition holds exactly what its steps need:
 * its feeds are client _Recv nodes and its fetches client _Send nodes, so
 * a rewrite inside it never changes what a client can feed or fetch.
 *
 * Passes, in order:
 *   - constant folding: a node whose data inputs all come from Const nodes
 *     (without control inputs), with no control inputs itself, one output
 *     and a synchronous CPU kernel, and that is neither stateful, a source,
 *     control flow, a transfer nor a function call, is run once here on the
 *     CPU kernels and becomes a Const of its value under its own name and
 *     device (so "^node" and fetches of it keep their meaning), unless the
 *     value is larger than max_constant_bytes or the kernel fails (the node
 *     is then left for the step, which reports the error). Repeated until
 *     nothing more folds.
 *   - common subexpression elimination: of nodes with the same op, device,
 *     attrs and inputs (control inputs as a set), neither stateful nor
 *     control flow nor transfers, the first in topological order stays and
 *     the others' consumers read it.
 *   - Identity, Snapshot, StopGradient and PreventGradient removal: their
 *     consumers read their input directly, unless the node has control
 *     inputs, or its input is a reference, or it has control consumers and
 *     reads a control-flow node or a _Recv (a Switch's branch pivot, and the
 *     Identity that makes a received dead value a dead node, whose control
 *     edges then carry the deadness, must stay nodes of their own).
 * Nodes left without consumers by these rewrites are removed; nodes that
 * had none (targets) are kept.
 *
 * opt_level follows TensorFlow's OptimizerOptions: 0 (L1, the default)
 * runs the passes, -1 (L0) none. Results are identical either way. */
#ifndef ZF_GRAPH_OPTIMIZER_H
#define ZF_GRAPH_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "proto/graph.pb-c.h"

#define ZF_OPT_L1 0
#define ZF_OPT_L0 (-1)

/* The largest value constant folding puts into a graph (TensorFlow's
 * default for max_constant_size_in_bytes). */
#define ZF_OPT_MAX_CONSTANT_BYTES ((size_t)10 << 20)

typedef struct zf_optimizer_options {
    int opt_level;             /* ZF_OPT_L1 or ZF_OPT_L0 */
    size_t max_constant_bytes; /* 0: ZF_OPT_MAX_CONSTANT_BYTES */
} zf_optimizer_options_t;

typedef struct zf_optimizer_stats {
    int folded;    /* nodes replaced by their value */
    int merged;    /* duplicates of another node removed */
    int forwarded; /* Identity-like nodes removed */
    int removed;   /* nodes removed in all (merged + forwarded + inputs left unused) */
} zf_optimizer_stats_t;

/* Rewrites gd (allocated as protobuf-c's unpack allocates) in place as
 * described above; stats may be NULL. gd must be a graph the engine
 * accepts (inputs naming existing nodes); a graph it cannot read (an input
 * naming no node) is left as it is, for the engine to report. Errors:
 * RESOURCE_EXHAUSTED (gd is then still a valid, equivalent graph). */
zf_status_t zf_optimize_graph(Tensorflow__GraphDef *gd, const zf_optimizer_options_t *opts,
                              zf_optimizer_stats_t *stats);

#endif
