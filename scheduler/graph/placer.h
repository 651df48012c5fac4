/* The placer: assigns every node of a graph to one device of a device set,
 * with TensorFlow's Placer semantics (docs/design.md, "Placement") and a load-aware choice
 * among equally valid devices.
 *
 * Design note. Nodes are visited in TensorFlow's node-id order (the graph's
 * topological order, lowest index first among ready nodes).
 *   1. Members: each node's device types with kernels (zf_op_has_kernel,
 *      limited to the types of the device set) and its requested spec (the
 *      NodeDef device, parsed once per distinct string). A node with no
 *      kernel on any type of the set fails ("No OpKernel was registered to
 *      support Op '<op>' used by node <node>; ..."), as does an unknown op.
 *   2. Colocation groups (union by rank, path compression): first each
 *      reference- or resource-typed input edge joins source and destination
 *      — when their specs disagree, the destination's spec gives way (it is
 *      logged with log_placement), unless only it is pinned: a group is
 *      pinned by a reference/resource source that requests a device, or an
 *      assigned node; two pinned groups that disagree are an error. Then
 *      every `_class` `loc:@<name>` entry joins the group named <name> (each
 *      node is in the group of its own name); a `_class` that is not a list
 *      is ignored with a warning. Joining merges specs field by field (job,
 *      replica or task conflicts are errors; type and id conflicts are
 *      errors unless soft placement is on) and intersects the kernel types
 *      ("Cannot colocate nodes <a> and <b> because no device type supports
 *      both ..."). Under soft placement a `_class` request that fails on
 *      kernel types, pinned specs or assigned devices is dropped instead.
 *   3. Devices: those matching the group's spec whose type has kernels for
 *      every member, in order of type priority (common/device_type.h),
 *      highest first, then name. None: with soft placement the spec's type
 *      and id are dropped and the fallback is logged; otherwise an error
 *      says why, in TensorFlow's words (docs/design.md, "Placement"). When the node's own
 *      request matches no device at all, the text depends on whether its
 *      job/replica/task exists: "... because no devices matching that
 *      specification are registered in this process; available devices:
 *      ..." when it does not, "<node> was explicitly assigned to <spec> but
 *      available devices are [ ... ]. ..." when only the device is missing.
 *   4. Choice, first pass: a group already placed keeps its device (so a
 *      group always lands on one device); a metadata op (Shape, Size, Rank)
 *      goes with its input when allowed; otherwise ZF_PLACE_FIRST takes the
 *      first device, ZF_PLACE_BALANCED the least-loaded device of the first
 *      device's type (ties by order). Loads are the caller's figures and do
 *      not grow during a run, so one graph's free nodes stay together.
 *      Generators (no data inputs, one non-reference output) wait for the
 *      second pass, where they join their consumers when all of them sit on
 *      one allowed device.
 * No choice ever puts a node on a type without a kernel for it.
 *
 * zf_placer_run() is a pure function of (graph, devices, options): the same
 * inputs give the same assignment, whatever the order of the device set. It
 * does not modify the graph or its GraphDef. Thread-safe (no shared state).
 * Cost: linear in nodes and edges, plus one pass over the devices per
 * distinct (spec, kernel types) pair. */
#ifndef ZF_PLACER_H
#define ZF_PLACER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/device_name.h"
#include "common/graph.h"
#include "common/status.h"
#include "proto/graph.pb-c.h"

typedef enum zf_place_mode {
    ZF_PLACE_BALANCED = 0, /* least-loaded valid device of the best type; ties by name */
    ZF_PLACE_FIRST,        /* TensorFlow's: the first valid device in sorted order */
} zf_place_mode_t;

/* One device the placer may use. name must be a full device name. load is
 * compared between devices only (e.g. nodes placed there by live sessions). */
typedef struct zf_placer_device {
    zf_device_name_t name;
    int64_t load;
} zf_placer_device_t;

typedef struct zf_placer_options {
    bool allow_soft_placement;
    zf_place_mode_t mode;
    bool log_placement; /* log each node's device at info level */
    /* Optional, NULL or one entry per node: a device the node is already
     * placed on (TensorFlow's assigned device), e.g. kept from an earlier
     * placement; NULL or "" entries are unplaced. Such a node keeps its
     * device and pins its colocation group there; the name must be a
     * device of the set with a kernel for the node (INTERNAL otherwise,
     * as in TensorFlow: "Assigned device '<name>' does not match any
     * device", "... does not have registered OpKernel support for <op>",
     * "Malformed assigned device '<name>'"). Borrowed for the call. */
    const char *const *assigned;
} zf_placer_options_t;

#define ZF_PLACER_OPTIONS_DEFAULT ((zf_placer_options_t){false, ZF_PLACE_BALANCED, false, NULL})

/* Places every node of g on one of devices[0..n_devices) (full, distinct
 * names; at most 32 device types). opts may be NULL for the defaults. On
 * success assignment[i] (caller-allocated, zf_graph_num_nodes(g) entries)
 * is the index into devices of node i's device; on error every entry is -1.
 * Errors, naming the node:
 *   FAILED_PRECONDITION "No devices are registered" when n_devices is 0;
 *   INVALID_ARGUMENT "Cannot assign a device for operation <node>:
 *     <reason>" with TensorFlow's reasons (docs/design.md, "Placement"), a malformed
 *     spec, or a node whose input types its attrs do not determine;
 *   INVALID_ARGUMENT "Cannot colocate nodes <a> and <b>: ..." and
 *     "Cannot place the graph because a reference or resource edge ...";
 *   INVALID_ARGUMENT "No OpKernel was registered to support Op '<op>' used
 *     by node <node>; registered devices: [...]; registered kernels: ...";
 *   INVALID_ARGUMENT for a bad device set (partial or repeated names);
 *   INTERNAL for a bad assigned device (see zf_placer_options_t.assigned);
 *   RESOURCE_EXHAUSTED when out of memory.
 * Messages about a group end with TensorFlow's "Colocation Debug Info"
 * (its ops with their kernel types, its members with their requests). */
zf_status_t zf_placer_run(const zf_graph_t *g, const zf_placer_device_t *devices, int n_devices,
                          const zf_placer_options_t *opts, int *assignment);

/* One run's names, for zf_placer_run_pruned: fed and fetched tensors
 * ("node:port" or "node"), target nodes. */
typedef struct zf_placer_prune {
    const char *const *feeds;
    int n_feeds;
    const char *const *fetches;
    int n_fetches;
    const char *const *targets;
    int n_targets;
} zf_placer_prune_t;

/* TensorFlow's place_pruned_graph: places only the nodes the run of prune
 * needs — what its fetches and targets reach backwards, cut at fed tensors
 * (a node reading a fed tensor sees a Placeholder of its dtype instead) —
 * as zf_placer_run places a graph of just them. assignment (one entry per
 * node of g) is read and written: a needed node with an entry >= 0 keeps
 * that device (an earlier run's placement); the needed nodes without one
 * are placed around them; every other entry is left as it is. Nothing is
 * placed when every needed node is. Errors as zf_placer_run's, naming the
 * needed node at fault; on error assignment is unchanged. */
zf_status_t zf_placer_run_pruned(const zf_graph_t *g, const zf_placer_device_t *devices,
                                 int n_devices, const zf_placer_options_t *opts,
                                 const zf_placer_prune_t *prune, int *assignment);

/* Writes the placement into gd when asked: sets every NodeDef's device to
 * the full name of devices[assignment[i]] (the old string is freed; gd must
 * be allocated the way protobuf-c's unpack or zf_graphdef_read_*() does).
 * A zf_graph_t built from gd reads the new devices afterwards. Errors:
 * INVALID_ARGUMENT when an assignment entry is out of range (gd unchanged),
 * RESOURCE_EXHAUSTED when out of memory (some nodes may be updated). */
zf_status_t zf_placer_write_devices(Tensorflow__GraphDef *gd, const zf_placer_device_t *devices,
                                    int n_devices, const int *assignment);

#endif
