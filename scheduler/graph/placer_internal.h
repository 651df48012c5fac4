/* Private to scheduler/graph/placer*.c: the placer's working state for one run,
 * shared by the files that set it up, build colocation groups, compute the
 * devices a group may use, and choose devices. Nothing else includes it.
 *
 * Layout: one record per node, indexed by node; group state lives in the
 * record of the root of each union-find tree. Requested device specs are interned in a table
 * (parsed once per distinct NodeDef device string) and nodes refer to them
 * by id, so a node costs a few ints, not a zf_device_name_t. */
#ifndef ZF_PLACER_INTERNAL_H
#define ZF_PLACER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/strmap.h"
#include "scheduler/graph/placer.h"

/* A hint to start loading addr into cache (no effect on results). */
#if defined(__GNUC__)
#define ZF__PREFETCH(addr) __builtin_prefetch(addr)
#else
#define ZF__PREFETCH(addr) ((void)(addr))
#endif

/* Distinct device types a device set may hold: one bit each in a mask. */
#define ZF__PLACER_MAX_TYPES 32

/* Per-node facts (zf__placer_node_t.node_flags). */
enum {
    ZF__NODE_GENERATOR = 1u << 0,  /* no data inputs, one output, not a reference */
    ZF__NODE_REF_SOURCE = 1u << 1, /* no data inputs, one reference or resource output */
    ZF__NODE_ASSIGNED = 1u << 2,   /* came with an assigned device (options.assigned) */
    ZF__NODE_CLASS = 1u << 3,      /* has a `_class` attr */
    ZF__NODE_REF_ATTR = 1u << 4,   /* a type attr holds a reference or resource type */
};

/* Whether an op's signature gives reference/resource inputs by itself
 * (Ref(T), resource), learnt from its first node (zf__placer_t.op_ref). */
enum { ZF__OP_REF_UNKNOWN = 0, ZF__OP_REF_NO, ZF__OP_REF_YES };

/* Group facts, meaningful at a root (zf__placer_node_t.flags). */
enum {
    /* The group's spec comes from a resource/reference source or an assigned
     * node; a reference edge does not override it. */
    ZF__GROUP_PINNED = 1u << 0,
};

/* One node, and its colocation group's state when it is a union-find
 * root: kept together so that a jump to another group touches one cache
 * line, not one per array (the colocation and choice passes jump a lot). */
typedef struct zf__placer_node {
    int parent;
    int spec;       /* root: merged spec id, -1 when the group requests nothing */
    uint32_t types; /* root: device types with kernels for every member */
    int device;     /* root: the device the group is placed on, -1 until known */
    uint8_t rank;
    uint8_t flags;      /* root: ZF__GROUP_* */
    uint8_t node_flags; /* ZF__NODE_* */
} zf__placer_node_t;

/* The devices one (spec, types) pair allows, computed once per pair. */
typedef struct zf__placer_choice {
    int spec;       /* spec the devices match (relaxed when soft), -1: any */
    uint32_t types; /* device types with kernels for the whole group */
    int first;      /* device index: first allowed device in placement order */
    int balanced;   /* least-loaded allowed device of first's type; ties by order */
    bool soft;      /* soft placement relaxed the spec */
} zf__placer_choice_t;

typedef struct zf__placer {
    const zf_graph_t *g;
    const zf_placer_device_t *devices;
    int n_devices;
    zf_placer_options_t opts;
    int n; /* nodes */

    /* The device set: names formatted once, types by index, placement order. */
    char (*names)[ZF_DEVICE_NAME_MAX]; /* by device index */
    uint8_t *dev_type;                 /* by device index: index into types */
    int *sorted;                       /* device indices: priority desc, then name */
    zf_strmap_t *dev_ids;              /* names[i] (borrowed) -> i */
    int n_types;
    const char *types[ZF__PLACER_MAX_TYPES]; /* borrowed from devices[].name.type */
    int type_priority[ZF__PLACER_MAX_TYPES];
    int type_order[ZF__PLACER_MAX_TYPES]; /* type indices, highest priority first */

    /* Interned requested specs; ids index specs. */
    zf_device_name_t *specs;
    int n_specs, cap_specs;
    zf_strmap_t *spec_ids; /* NodeDef device string (borrowed) -> spec id */

    /* Facts by op definition: open addressing on the pointer. */
    const void **mask_keys;
    uint32_t *mask_values; /* device types with kernels */
    uint8_t *op_ref;       /* ZF__OP_REF_* */
    size_t mask_cap;

    /* Choices by (spec, types): open addressing on the packed pair. */
    uint64_t *choice_keys; /* 0 = empty slot */
    int *choice_index;
    size_t choice_cap, n_choices_keys;
    zf__placer_choice_t *choices;
    int n_choices, cap_choices;

    /* Nodes, in processing order (TensorFlow's node-id order: topological,
     * lowest index first among ready nodes). */
    int *order;
    zf__placer_node_t *nodes;              /* by node index */
    const Tensorflow__AttrValue **classes; /* `_class` values of ZF__NODE_CLASS nodes, in order */
    int n_classes, cap_classes;

    int *assignment; /* the caller's output array */
} zf__placer_t;

/* ---- placer_members.c: per-node setup ----------------------------------- */

/* Interns a spec; returns its id or -1 when out of memory. */
int zf__placer_spec_add(zf__placer_t *p, const zf_device_name_t *spec);

/* The slot of def in the per-op tables (mask_values, op_ref). */
size_t zf__placer_op_slot(zf__placer_t *p, const zf_op_def_t *def);

/* The node's own requested spec id (-1 when it requests nothing). */
zf_status_t zf__placer_node_spec(zf__placer_t *p, int node, int *id);

/* Fills node_flags and the singleton groups: kernel masks, requested specs,
 * assigned devices. Errors name the node: no kernel anywhere, malformed
 * device specs, bad assigned devices (INTERNAL, as in TensorFlow). */
zf_status_t zf__placer_init_members(zf__placer_t *p);

/* ---- placer_colocate.c: colocation groups -------------------------------- */

int zf__placer_find(zf__placer_t *p, int node);

/* Joins the groups of reference/resource edges' endpoints. */
zf_status_t zf__placer_colocate_ref_edges(zf__placer_t *p);

/* Joins the groups named by `_class` `loc:@` entries. */
zf_status_t zf__placer_colocate_classes(zf__placer_t *p);

/* ---- placer_choice.c: allowed devices and why none ------------------------ */

/* The allowed devices of node's group (root). On error (no device allowed)
 * the status names the node and says why, in TensorFlow's words. */
zf_status_t zf__placer_choice(zf__placer_t *p, int node, int root, const zf__placer_choice_t **out);

/* True when device is one of the choice's allowed devices. */
bool zf__placer_choice_allows(const zf__placer_t *p, const zf__placer_choice_t *c, int device);

/* Appends TensorFlow-style "Colocation Debug Info" about root's group to the
 * message of s (an error), keeping its code. */
zf_status_t zf__placer_debug_info(zf__placer_t *p, zf_status_t s, int root);

/* Sorted, comma-separated device names (at most a screenful). Caller frees. */
char *zf__placer_device_list(const zf__placer_t *p);

#endif
