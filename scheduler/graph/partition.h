/* Pruning and partitioning (docs/design.md, "Pruning and partitioning"): given a placed graph,
 * feeds, fetches and targets, produces one GraphDef per partition (device, or task) that, run
 * together, compute what the original graph computes. Cut edges get `_Send`/`_Recv` pairs
 * (`_HostSend`/`_HostRecv` by memory type) with TensorFlow's attrs, feeds become client-terminated
 * `_Recv` nodes and fetches client-terminated `_Send` nodes. A pure function of its inputs:
 * deterministic output. Thread-safe (no shared state). */
#ifndef ZF_PARTITION_H
#define ZF_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "common/device_name.h"
#include "common/graph.h"
#include "common/status.h"
#include "proto/graph.pb-c.h"

typedef enum zf_partition_by {
    ZF_PARTITION_BY_DEVICE = 0,
    ZF_PARTITION_BY_TASK,
} zf_partition_by_t;

/* One device of the device set: full name, type priority comes from
 * common/device_type.h, incarnation for send_device_incarnation. */
typedef struct zf_partition_device {
    zf_device_name_t name;
    uint64_t incarnation;
} zf_partition_device_t;

/* The cost model of recv scheduling (zf_partition_options_t.recv_scheduling):
 * every node takes ZF_RECV_SCHED_NODE_COST units, and an edge between two
 * devices adds ZF_RECV_SCHED_TRANSFER_COST units for its transfer. */
#define ZF_RECV_SCHED_NODE_COST     1
#define ZF_RECV_SCHED_TRANSFER_COST 2

typedef struct zf_partition_options {
    const char *const *feeds; /* "node" or "node:port" */
    int n_feeds;
    const char *const *fetches; /* "node" or "node:port" */
    int n_fetches;
    const char *const *targets; /* node names run for their effects */
    int n_targets;
    zf_partition_by_t by;
    bool bfloat16_sendrecv;        /* cast FLOAT cross-device edges to BFLOAT16 */
    bool recv_scheduling;          /* ASAP `_start_time` on recvs, control edges that hold
                                      them back (TensorFlow's enable_recv_scheduling) */
    const char *client_device;     /* device named as the client side of feeds and
                                      fetches; NULL: the partition's own device */
    uint64_t first_name_id;        /* the n of the first new `_S<n>` name */
    const zf_graph_t *avoid_names; /* new names also avoid its node names (NULL: none) */
} zf_partition_options_t;

/* A client feed or fetch handled by one partition: the tensor name the
 * client used and the rendezvous key the partition sends or receives on. */
typedef struct zf_partition_io {
    char *tensor_name; /* as the client wrote it: "x" or "x:0" */
    char *key;         /* rendezvous key (common/rendezvous_key.h) */
} zf_partition_io_t;

typedef struct zf_partition {
    char *device;                /* partition key: full device name, or task prefix */
    int device_index;            /* index into the device set (first device of a task) */
    Tensorflow__GraphDef *graph; /* owned */
    zf_partition_io_t *feeds;
    int n_feeds;
    zf_partition_io_t *fetches;
    int n_fetches;
    int n_send, n_recv; /* _Send/_HostSend and _Recv/_HostRecv nodes added for cut edges */
} zf_partition_t;

typedef struct zf_partition_set {
    zf_partition_t *parts; /* sorted by device name */
    int n_parts;
    uint64_t next_name_id; /* the n past the last `_S<n>` name made */
} zf_partition_set_t;

/* Prunes g to what the fetches and targets need, then partitions it.
 * assignment[i] is node i's index into devices (from zf_placer_run()); only
 * the nodes that survive pruning need a valid one. devices must hold
 * distinct full device names. opts may be NULL (no feeds, fetches or
 * targets: nothing is pruned, the whole graph is partitioned).
 *
 * Rules (docs/design.md, "Pruning and partitioning"; TensorFlow's RewriteGraphForExecution and
 * Partition):
 *   - A feed becomes a client-terminated `_Recv` named `_recv_<node>_<port>`
 *     on the fed node's device (`_HostRecv` when that output lives in host
 *     memory there); its tensor_name attr is the feed string as given. Edges
 *     out of the fed tensor (and, for a fed Placeholder, its control
 *     out-edges) leave from it. A feed nothing needs is pruned and listed by
 *     no partition. A fetch becomes a client-terminated `_Send` named
 *     `_send_<node>_<port>` beside the fetched node.
 *   - Memory types on a non-CPU device: STRING/RESOURCE/VARIANT and INT32
 *     tensors, and what the node's kernel definition (zf_kernel_def_find()) declares, live
 *     in host memory; on a CPU everything does, and plain `_Send`/`_Recv`
 *     are used there.
 *   - Node order in each partition is TensorFlow's: original nodes in graph
 *     order, each followed by the transfer nodes made for its inputs, then
 *     feeds, then fetches. New names are `<src>_S<n>` (`<src>/ctrl_S<n>` for
 *     the dummy Const of a control edge), n counting from 0 in each call.
 *   - The partition io tensor_name is the client's string; keys are
 *     zf_rendezvous_key(send_device, its incarnation, recv_device,
 *     tensor_name) with client_device (incarnation from the device set, 0
 *     when absent from it) on the client side.
 *
 * On success *out is owned by the caller (zf_partition_set_destroy()); on
 * error it is NULL. Errors: INVALID_ARGUMENT, in TensorFlow's words
 * where it has them: an unknown feed ("FeedInputs: unable to find feed
 * output x:0"), fetch ("FetchOutputs node y: not found") or target
 * ("PruneForTargets: Some target nodes not found: t"); a port out of range;
 * fetching a node without outputs; a tensor fed or fetched twice ("Endpoint
 * "x:0" fed more than once."), or both fed and fetched; a malformed tensor
 * name; a node whose op wants more inputs than it has ("Incomplete graph,
 * missing N inputs for X"); a cut edge whose dtype cannot be resolved (an
 * unknown op); an empty or malformed device set; an assignment out of
 * range; a while loop that spans partitions without a LoopCond ("A
 * cross-device loop must have a pivot predicate: F"). UNIMPLEMENTED for a
 * loop that spans partitions through a device other than a CPU.
 * RESOURCE_EXHAUSTED when out of memory.
 *
 * A while loop may span partitions: each partition that receives a value
 * inside a loop's frame gets a control loop that runs the frame's
 * iterations in step with the partition of the loop's LoopCond, whose
 * value it receives every iteration (partition_frames.c); the recvs of the
 * frame hang off it, and their keys carry the frame and iteration. By
 * task, a received predicate goes through a LoopCond of the partition's
 * own, so that the partition can be split again by device (see
 * zf_partition_graph_two_pass()).
 *
 * With recv_scheduling (docs/design.md, "Recv scheduling"; TensorFlow's
 * GraphOptions.enable_recv_scheduling), every kept node gets an ASAP start
 * time from the cost model above over the placed graph (back edges out of
 * NextIteration ignored; an Exit starts after everything in its frame),
 * every `_Recv`/`_HostRecv` made for a cut edge gets the int64 attr
 * `_start_time`: the earliest start of the nodes that read it in its
 * partition; and it takes a control input from the node of its partition
 * and frame (in a loop frame, one that runs in every iteration, not an
 * Enter or NextIteration; never a fetch) that starts last among those done
 * by that time less the edge's transfer cost (none: it is left alone). A
 * frame entered again after its Exit leaves no ASAP times:
 * INVALID_ARGUMENT, naming a node after it.
 * Thread-safe; does not block. Cost is linear in the kept nodes and edges
 * (n log n with recv_scheduling). */
zf_status_t zf_partition_graph(const zf_graph_t *g, const zf_partition_device_t *devices,
                               int n_devices, const int *assignment,
                               const zf_partition_options_t *opts, zf_partition_set_t **out);

/* Partitions as a TensorFlow master and its workers do together: by task
 * first (zf_partition_graph() with opts->by ignored), then each task's
 * partition by device, its transfers being placed nodes like any other, so
 * that a tensor one task sends to several devices of another crosses
 * between the tasks once. The second pass makes no feeds or fetches (each
 * partition io goes to the device partition that holds its client
 * `_Recv` or `_Send`), casts nothing to bfloat16 (opts->bfloat16_sendrecv
 * holds for the edges between tasks only) and schedules recvs with
 * opts->recv_scheduling. Its new names count on from the first pass's and
 * avoid every name of g, so that names are unique across both passes and
 * all tasks. In the first pass a control loop whose predicate is received
 * from another task reads it through a LoopCond of its own
 * (`<LoopCond>/_cloop_cond_S<n>`), the pivot the second pass splits that
 * frame by. The result holds one partition per device, sorted by name,
 * device_index indexing devices. Inputs, errors and cost as
 * zf_partition_graph(), run once per pass. */
zf_status_t zf_partition_graph_two_pass(const zf_graph_t *g, const zf_partition_device_t *devices,
                                        int n_devices, const int *assignment,
                                        const zf_partition_options_t *opts,
                                        zf_partition_set_t **out);

/* Frees the set and everything in it; NULL-safe, sets *set_p to NULL. */
void zf_partition_set_destroy(zf_partition_set_t **set_p);

/* Draws what zf_partition_graph() would build as Graphviz DOT text: the
 * pruned, placed graph with one cluster per partition (labelled with its
 * device or task), nodes labelled "name\nop", feeds and fetches as client
 * endpoints (ellipses), edges between partitions — the cut edges — in bold
 * red, same-device transfers between host and device memory in bold
 * orange, control edges dashed. Same inputs and errors as
 * zf_partition_graph(). On success *out (NUL-terminated, *len bytes) is
 * owned by the caller (free()). */
zf_status_t zf_partition_dot(const zf_graph_t *g, const zf_partition_device_t *devices,
                             int n_devices, const int *assignment,
                             const zf_partition_options_t *opts, char **out, size_t *len);

#endif
