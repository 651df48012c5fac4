/* Colocation groups: a union-find forest (union by rank, path compression)
 * whose roots carry each group's merged spec, kernel types and device.
 * Reference/resource edges are joined first, then `_class` `loc:@` names,
 * as TensorFlow's ColocationGraph does. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "common/graph.h"
#include "common/log.h"
#include "scheduler/graph/placer_internal.h"

#define S_LOG         "placer"
#define S_TYPES_SMALL 64

int zf__placer_find(zf__placer_t *p, int node)
{
    int root = node;
    while (p->nodes[root].parent != root) root = p->nodes[root].parent;
    while (p->nodes[node].parent != root) {
        int next = p->nodes[node].parent;
        p->nodes[node].parent = root;
        node = next;
    }
    return root;
}

static const char *s_name(const zf__placer_t *p, int node)
{
    return zf_graph_node_name(p->g, node);
}

/* Merges the specs of new_root (the merge target, as in TensorFlow, which
 * fixes the order the names appear in errors) and old_root. A pinned spec
 * (resource source, assigned node) keeps its type and id under soft
 * placement; two pinned specs must agree, else *soft_ignorable. */
static zf_status_t s_merge_specs(zf__placer_t *p, int new_root, int old_root, int *out,
                                 bool *soft_ignorable)
{
    int a = p->nodes[new_root].spec, b = p->nodes[old_root].spec;
    *out = a < 0 ? b : a;
    if (a < 0 || b < 0 || a == b) return ZF_STATUS_OK;
    bool pa = p->nodes[new_root].flags & ZF__GROUP_PINNED;
    bool pb = p->nodes[old_root].flags & ZF__GROUP_PINNED;
    zf_device_name_t t = p->specs[a];
    zf_status_t s =
        zf_device_name_merge(&t, &p->specs[b], p->opts.allow_soft_placement && !(pa && pb));
    if (!zf_ok(s)) {
        *soft_ignorable = pa && pb;
        return s;
    }
    if (pa || pb) zf_device_name_merge_unset(&t, &p->specs[pa ? a : b]);
    if (zf_device_name_equal(&t, &p->specs[a])) return ZF_STATUS_OK;
    *out = zf_device_name_equal(&t, &p->specs[b]) ? b : zf__placer_spec_add(p, &t);
    return *out < 0 ? zf_out_of_memory("placer specs") : ZF_STATUS_OK;
}

/* How much an error from s_join() should say. The debug info costs a pass
 * over the graph, and even a message costs an allocation: both are skipped
 * for errors that soft placement drops, or a graph with many dropped
 * requests would take quadratic (or merely slow) time. */
typedef enum { S_SAY_NOTHING, S_SAY_MESSAGE, S_SAY_ALL } s_say_t;

/* A message-less error: soft placement drops it unread. */
#define S_SILENT_ERROR ((zf_status_t){ZF_INVALID_ARGUMENT, NULL})

static zf_status_t s_no_common_type(zf__placer_t *p, int x, int rx, int y, int ry, s_say_t say)
{
    if (say == S_SAY_NOTHING) return S_SILENT_ERROR;
    zf_status_t s = zf_invalid_argument(
        "Cannot colocate nodes %s and %s because no device type supports both of those nodes and "
        "the other nodes colocated with them.",
        s_name(p, x), s_name(p, y));
    if (say != S_SAY_ALL) return s;
    s = zf__placer_debug_info(p, s, rx);
    return zf__placer_debug_info(p, s, ry);
}

/* Joins the groups of x (root rx) and y (root ry), TensorFlow's
 * ColocateNodes: on error nothing changes, and *soft_ignorable tells
 * whether a `_class` request may be dropped under soft placement (kernel
 * types or assigned devices disagree; a job/replica/task conflict may not). */
static zf_status_t s_join(zf__placer_t *p, int x, int rx, int y, int ry, bool *soft_ignorable,
                          s_say_t say)
{
    *soft_ignorable = false;
    if (rx == ry) return ZF_STATUS_OK;
    int new_root = p->nodes[rx].rank < p->nodes[ry].rank ? ry : rx;
    int old_root = new_root == rx ? ry : rx;
    int dn = p->nodes[new_root].device, dold = p->nodes[old_root].device;
    if (dn >= 0 && dold >= 0 && dn != dold) {
        *soft_ignorable = true;
        if (say == S_SAY_NOTHING) return S_SILENT_ERROR;
        zf_device_name_t t = p->devices[dn].name;
        zf_status_t s = zf_device_name_merge(&t, &p->devices[dold].name, false);
        return zf_status_prefix(s, "Cannot colocate nodes %s and %s", s_name(p, x), s_name(p, y));
    }
    int spec = -1;
    zf_status_t s = s_merge_specs(p, new_root, old_root, &spec, soft_ignorable);
    if (!zf_ok(s))
        return zf_status_prefix(s, "Cannot colocate nodes %s and %s", s_name(p, x), s_name(p, y));
    uint32_t types = p->nodes[rx].types & p->nodes[ry].types;
    if (!types) {
        *soft_ignorable = true;
        return s_no_common_type(p, x, rx, y, ry, say);
    }
    p->nodes[old_root].parent = new_root;
    if (p->nodes[new_root].rank == p->nodes[old_root].rank) p->nodes[new_root].rank++;
    p->nodes[new_root].spec = spec;
    p->nodes[new_root].types = types;
    p->nodes[new_root].device = dn >= 0 ? dn : dold;
    p->nodes[new_root].flags |= p->nodes[old_root].flags;
    return ZF_STATUS_OK;
}

/* ---- reference and resource edges ---------------------------------------- */

static zf_status_t s_edge_conflict(zf__placer_t *p, const char *what, const char *a, const char *b,
                                   int src, int dst)
{
    return zf_invalid_argument("Cannot place the graph because a reference or resource edge "
                               "connects colocation groups with incompatible %s devices: %s vs "
                               "%s. The edge src node is %s, and the dst node is %s",
                               what, a, b, s_name(p, src), s_name(p, dst));
}

static void s_log_override(zf__placer_t *p, int overridden, int node, int other, int other_spec)
{
    if (!p->opts.log_placement) return;
    char a[ZF_DEVICE_NAME_MAX], b[ZF_DEVICE_NAME_MAX];
    zf_log_info(S_LOG,
                "Ignoring device specification %s for node '%s' because the reference connection "
                "with '%s' already has a device field set to %s",
                zf_device_name_format(&p->specs[overridden], a, sizeof a), s_name(p, node),
                s_name(p, other), zf_device_name_format(&p->specs[other_spec], b, sizeof b));
}

/* When the two ends request incompatible devices, one group gives way: the
 * destination's, as in TensorFlow, unless only it is pinned (a resource
 * source or an assigned node asked for its device); two pinned groups
 * conflict. */
static zf_status_t s_reconcile_specs(zf__placer_t *p, int src, int rs, int dst, int rd)
{
    int a = p->nodes[rs].spec, b = p->nodes[rd].spec;
    if (a < 0 || b < 0 || zf_device_name_is_compatible(&p->specs[a], &p->specs[b]))
        return ZF_STATUS_OK;
    bool pin_s = p->nodes[rs].flags & ZF__GROUP_PINNED,
         pin_d = p->nodes[rd].flags & ZF__GROUP_PINNED;
    if (pin_s && pin_d) {
        char x[ZF_DEVICE_NAME_MAX], y[ZF_DEVICE_NAME_MAX];
        return s_edge_conflict(p, "resource", zf_device_name_format(&p->specs[a], x, sizeof x),
                               zf_device_name_format(&p->specs[b], y, sizeof y), src, dst);
    }
    if (pin_d) {
        s_log_override(p, a, src, dst, b);
        p->nodes[rs].spec = b;
    } else {
        s_log_override(p, b, dst, src, a);
        p->nodes[rd].spec = a;
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_ref_edge(zf__placer_t *p, int src, int dst)
{
    int rs = zf__placer_find(p, src), rd = zf__placer_find(p, dst);
    if (rs == rd) return ZF_STATUS_OK;
    int ds = p->nodes[rs].device, dd = p->nodes[rd].device;
    if (ds >= 0 && dd >= 0 && ds != dd)
        return s_edge_conflict(p, "assigned", p->names[ds], p->names[dd], src, dst);
    ZF_TRY(s_reconcile_specs(p, src, rs, dst, rd));
    bool ignorable;
    zf_status_t s = s_join(p, src, rs, dst, rd, &ignorable, S_SAY_ALL);
    return zf_status_prefix(s,
                            "Nodes were connected by a reference connection (requiring them to be "
                            "on the same device), but the two nodes were assigned two different "
                            "devices");
}

static bool s_ref_type(zf_dtype_t dtype)
{
    return zf_dtype_is_ref((int)dtype) || dtype == ZF_RESOURCE;
}

static zf_status_t s_input_types(zf__placer_t *p, int node, zf_dtype_t *types, int max, int *n)
{
    zf_status_t s = zf_op_input_types(zf_graph_op_def(p->g, node), zf_graph_node_def(p->g, node),
                                      types, max, n);
    return zf_status_prefix(s, "Cannot assign a device for operation %s", s_name(p, node));
}

/* Whether the node may have reference/resource inputs: its op's signature
 * has them (learnt from the op's first node whose attrs hold no such type),
 * or its own type attrs hold such a type. Resolving every node's input
 * types would cost a walk over its attrs per node. This relies on no type
 * attr defaulting to a reference or resource type (true of every op). */
static zf_status_t s_may_have_ref_inputs(zf__placer_t *p, int node, bool *may)
{
    *may = true;
    if (p->nodes[node].node_flags & ZF__NODE_REF_ATTR) return ZF_STATUS_OK;
    size_t slot = zf__placer_op_slot(p, zf_graph_op_def(p->g, node));
    if (p->op_ref[slot] == ZF__OP_REF_UNKNOWN) {
        zf_dtype_t types[S_TYPES_SMALL];
        int n = 0;
        ZF_TRY(s_input_types(p, node, types, S_TYPES_SMALL, &n));
        bool ref = n > S_TYPES_SMALL; /* too many to tell here: look at every node */
        for (int k = 0; k < n && k < S_TYPES_SMALL; k++) ref = ref || s_ref_type(types[k]);
        p->op_ref[slot] = ref ? ZF__OP_REF_YES : ZF__OP_REF_NO;
    }
    *may = p->op_ref[slot] == ZF__OP_REF_YES;
    return ZF_STATUS_OK;
}

static zf_status_t s_node_ref_edges(zf__placer_t *p, int node, zf_dtype_t *types, int max)
{
    int n_data = zf_graph_num_data_inputs(p->g, node);
    bool may = false;
    if (n_data == 0) return ZF_STATUS_OK;
    ZF_TRY(s_may_have_ref_inputs(p, node, &may));
    if (!may) return ZF_STATUS_OK;
    int n = 0;
    ZF_TRY(s_input_types(p, node, types, max, &n));
    if (n > max) {
        zf_dtype_t *big = malloc((size_t)n * sizeof *big);
        if (!big) return zf_out_of_memory("placer input types");
        zf_status_t s = s_node_ref_edges(p, node, big, n);
        free(big);
        return s;
    }
    const zf_edge_t *edges = NULL;
    zf_graph_in_edges(p->g, node, &edges);
    for (int k = 0; k < n_data && k < n; k++)
        if (s_ref_type(types[k])) ZF_TRY(s_ref_edge(p, edges[k].src, node));
    return ZF_STATUS_OK;
}

zf_status_t zf__placer_colocate_ref_edges(zf__placer_t *p)
{
    zf_dtype_t types[S_TYPES_SMALL];
    for (int k = 0; k < p->n; k++) ZF_TRY(s_node_ref_edges(p, p->order[k], types, S_TYPES_SMALL));
    return ZF_STATUS_OK;
}

/* ---- `_class` colocation names ------------------------------------------------ */

/* One `loc:@<name>` entry: the name and the node it names (-1: none). */
typedef struct {
    const char *name;
    size_t len;
    int target;
} s_loc_t;

/* The first node that used each colocation name: for a name that is a node's,
 * first[node]; for a name of no node, the strmap. A later user joins it.
 * The `loc:@` entries are read out of the NodeDefs first, in one tight loop
 * where the name lookups' cache misses overlap (locs, in node order;
 * n_locs[k] entries for the k-th `_class`, -1 when it is not a list). */
typedef struct {
    int *first;
    zf_strmap_t *others;
    s_loc_t *locs;
    int *n_locs;
    int n_all;
    int next_class;
    int next_loc;
} s_names_t;

static zf_status_t s_class_join(zf__placer_t *p, int x, int y, const char *group, size_t len)
{
    bool ignorable;
    bool soft = p->opts.allow_soft_placement;
    s_say_t say = !soft ? S_SAY_ALL : p->opts.log_placement ? S_SAY_MESSAGE : S_SAY_NOTHING;
    zf_status_t s = s_join(p, x, zf__placer_find(p, x), y, zf__placer_find(p, y), &ignorable, say);
    if (zf_ok(s) || !ignorable || !soft) return s;
    if (p->opts.log_placement)
        zf_log_info(S_LOG,
                    "Ignoring request to colocate node '%s' with nodes in colocation group '%.*s' "
                    "because soft placement is on and an attempt at doing so resulted in the "
                    "following error: %s",
                    s_name(p, x), (int)len, group, zf_status_msg(&s));
    zf_status_clear(&s);
    return ZF_STATUS_OK;
}

static bool s_is_loc(const ProtobufCBinaryData *c)
{
    return c->len >= 5 && memcmp(c->data, "loc:@", 5) == 0;
}

static bool s_is_list(const Tensorflow__AttrValue *v)
{
    return v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && v->list;
}

static zf_status_t s_read_locs(zf__placer_t *p, s_names_t *names)
{
    size_t n = 0;
    for (int k = 0; k < p->n_classes; k++)
        if (s_is_list(p->classes[k])) n += p->classes[k]->list->n_s;
    names->locs = malloc((n + 1) * sizeof *names->locs);
    names->n_locs = malloc(((size_t)p->n_classes + 1) * sizeof *names->n_locs);
    if (!names->locs || !names->n_locs) return zf_out_of_memory("placer colocation names");
    for (int k = 0; k < p->n_classes; k++) {
        const Tensorflow__AttrValue *v = p->classes[k];
        names->n_locs[k] = s_is_list(v) ? 0 : -1;
        for (size_t j = 0; s_is_list(v) && j < v->list->n_s; j++) {
            const ProtobufCBinaryData *c = &v->list->s[j];
            if (!s_is_loc(c)) continue;
            s_loc_t *loc = &names->locs[names->n_all++];
            loc->name = (const char *)c->data + 5;
            loc->len = c->len - 5;
            loc->target = zf_graph_find_node_n(p->g, loc->name, loc->len);
            names->n_locs[k]++;
        }
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_use_loc(zf__placer_t *p, s_names_t *names, int x, const s_loc_t *loc)
{
    int ahead = names->next_loc + 8;
    if (ahead < names->n_all && names->locs[ahead].target >= 0) {
        ZF__PREFETCH(&names->first[names->locs[ahead].target]);
        ZF__PREFETCH(&p->nodes[names->locs[ahead].target]);
    }
    int v = loc->target;
    if (v >= 0) {
        if (names->first[v] < 0) {
            names->first[v] = x;
            return ZF_STATUS_OK;
        }
        return s_class_join(p, x, names->first[v], loc->name, loc->len);
    }
    uintptr_t y = 0;
    int rc = zf_strmap_insert_n(names->others, loc->name, loc->len, (uintptr_t)x, &y);
    if (rc == 0) return ZF_STATUS_OK;
    if (rc != -EEXIST) return zf_out_of_memory("placer colocation names");
    return s_class_join(p, x, (int)y, loc->name, loc->len);
}

static void s_warn_not_a_list(const zf__placer_t *p, int x, const Tensorflow__AttrValue *v)
{
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE__NOT_SET) return;
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_S && v->s.len == 0) return;
    zf_log_warn(S_LOG,
                "The value for colocation attribute '_class' must be a list of strings, not %s; "
                "ignoring it on node %s",
                v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_S ? "a single string"
                                                                 : zf_attr_kind_name(v),
                s_name(p, x));
}

static zf_status_t s_node_classes(zf__placer_t *p, s_names_t *names, int x)
{
    if (p->nodes[x].node_flags & ZF__NODE_CLASS) {
        int k = names->next_class++;
        if (names->n_locs[k] < 0) s_warn_not_a_list(p, x, p->classes[k]);
        for (int j = 0; j < names->n_locs[k]; j++) {
            ZF_TRY(s_use_loc(p, names, x, &names->locs[names->next_loc]));
            names->next_loc++;
        }
    }
    /* Every node is in the group named after itself. */
    if (names->first[x] < 0) names->first[x] = x;
    if (names->first[x] == x) return ZF_STATUS_OK;
    return s_class_join(p, x, names->first[x], s_name(p, x), strlen(s_name(p, x)));
}

zf_status_t zf__placer_colocate_classes(zf__placer_t *p)
{
    s_names_t names = {.first = malloc((size_t)p->n * sizeof(int) + 1),
                       .others = zf_strmap_new(0, 0)};
    zf_status_t s = ZF_STATUS_OK;
    if (!names.first || !names.others) s = zf_out_of_memory("placer colocation names");
    if (zf_ok(s)) s = s_read_locs(p, &names);
    for (int k = 0; k < p->n && zf_ok(s); k++) names.first[k] = -1;
    for (int k = 0; k < p->n && zf_ok(s); k++) s = s_node_classes(p, &names, p->order[k]);
    free(names.first);
    free(names.locs);
    free(names.n_locs);
    zf_strmap_destroy(&names.others);
    return s;
}
