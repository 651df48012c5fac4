/* Placer setup, one node at a time: the device types with kernels for the
 * node (cached per op), its requested spec (parsed once per distinct
 * string), its assigned device, and whether it is a generator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/device_type.h"
#include "common/dtype.h"
#include "common/graph.h"
#include "common/op_registry.h"
#include "common/kernel_def.h"
#include "scheduler/graph/placer_internal.h"

int zf__placer_spec_add(zf__placer_t *p, const zf_device_name_t *spec)
{
    if (p->n_specs == p->cap_specs) {
        int cap = p->cap_specs ? p->cap_specs * 2 : 64;
        zf_device_name_t *specs = realloc(p->specs, (size_t)cap * sizeof *specs);
        if (!specs) return -1;
        p->specs = specs;
        p->cap_specs = cap;
    }
    p->specs[p->n_specs] = *spec;
    return p->n_specs++;
}

/* The map stores id + 1 so that 0 can mean "requests nothing" ("/"). */
zf_status_t zf__placer_node_spec(zf__placer_t *p, int node, int *id)
{
    *id = -1;
    const char *dev = zf_graph_node_device(p->g, node);
    if (!*dev) return ZF_STATUS_OK;
    uintptr_t v = 0;
    if (zf_strmap_get(p->spec_ids, dev, &v)) {
        *id = (int)v - 1;
        return ZF_STATUS_OK;
    }
    zf_device_name_t spec;
    zf_status_t s = zf_device_name_parse(dev, &spec);
    if (!zf_ok(s))
        return zf_status_prefix(s, "Cannot assign a device for operation %s",
                                zf_graph_node_name(p->g, node));
    int added = zf_device_name_is_empty(&spec) ? -1 : zf__placer_spec_add(p, &spec);
    if (added < 0 && !zf_device_name_is_empty(&spec)) return zf_out_of_memory("placer specs");
    if (zf_strmap_insert(p->spec_ids, dev, (uintptr_t)(added + 1), NULL) != 0)
        return zf_out_of_memory("placer specs");
    *id = added;
    return ZF_STATUS_OK;
}

/* ---- kernel masks --------------------------------------------------------- */

/* splitmix64's finaliser: every pointer bit reaches the low bits. */
static size_t s_ptr_slot(const void *key, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)key;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return (size_t)(h ^ (h >> 31)) & (cap - 1);
}

/* The table has room for every distinct op of the graph; a new def gets its
 * kernel mask (bit t: types[t] has a kernel) on first sight. */
size_t zf__placer_op_slot(zf__placer_t *p, const zf_op_def_t *def)
{
    size_t h = s_ptr_slot(def, p->mask_cap);
    while (p->mask_keys[h]) {
        if (p->mask_keys[h] == def) return h;
        h = (h + 1) & (p->mask_cap - 1);
    }
    uint32_t mask = 0;
    for (int t = 0; t < p->n_types; t++)
        if (zf_op_has_kernel(def, p->types[t])) mask |= 1u << t;
    p->mask_keys[h] = def;
    p->mask_values[h] = mask;
    p->op_ref[h] = ZF__OP_REF_UNKNOWN;
    return h;
}

static uint32_t s_kernel_mask(zf__placer_t *p, const zf_op_def_t *def)
{
    return def ? p->mask_values[zf__placer_op_slot(p, def)] : 0;
}

static zf_status_t s_alloc_masks(zf__placer_t *p)
{
    size_t cap = 16;
    while (cap < 2 * ((size_t)zf_graph_num_ops(p->g) + 1)) cap *= 2;
    p->mask_cap = cap;
    p->mask_keys = calloc(cap, sizeof *p->mask_keys);
    p->mask_values = calloc(cap, sizeof *p->mask_values);
    p->op_ref = calloc(cap, sizeof *p->op_ref);
    if (!p->mask_keys || !p->mask_values || !p->op_ref)
        return zf_out_of_memory("placer kernel masks");
    return ZF_STATUS_OK;
}

/* ---- "no kernel" ------------------------------------------------------------ */

static const char *s_support_note(zf_node_support_t support)
{
    switch (support) {
    case ZF_NODE_UNKNOWN_OP: return " (the op is unknown)";
    case ZF_NODE_LIBRARY_FUNCTION:
        return " (the op names a function of the graph's library; zflow does not run library "
               "functions)";
    case ZF_NODE_FUNCTIONAL_OP: return " (zflow does not run functional ops)";
    case ZF_NODE_UNSUPPORTED_OP: return " (zflow does not run this op)";
    default: return "";
    }
}

static int s_strcmp_p(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "CPU, GPU": the device set's types in name order. */
static void s_registered_devices(const zf__placer_t *p, char *buf, size_t size)
{
    const char *names[ZF__PLACER_MAX_TYPES];
    memcpy(names, p->types, (size_t)p->n_types * sizeof names[0]);
    qsort(names, (size_t)p->n_types, sizeof names[0], s_strcmp_p);
    size_t used = 0;
    buf[0] = '\0';
    for (int t = 0; t < p->n_types && used < size; t++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", t ? ", " : "", names[t]);
}

/* "device='GPU'" for each type with a kernel: the device set's types plus
 * the built-in CPU and GPU, so a kernel on a type missing from the set shows. */
static void s_registered_kernels(const zf__placer_t *p, const zf_op_def_t *def, char *buf,
                                 size_t size)
{
    const char *cand[ZF__PLACER_MAX_TYPES + 2];
    int n = 0;
    for (int t = 0; t < p->n_types; t++) cand[n++] = p->types[p->type_order[t]];
    const char *builtin[2] = {ZF_DEVICE_TYPE_GPU, ZF_DEVICE_TYPE_CPU};
    for (int b = 0; b < 2; b++) {
        int t = 0;
        while (t < n && strcmp(cand[t], builtin[b]) != 0) t++;
        if (t == n) cand[n++] = builtin[b];
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int t = 0; t < n && used < size; t++)
        if (zf_op_has_kernel(def, cand[t]))
            used += (size_t)snprintf(buf + used, size - used, "%sdevice='%s'", used ? ", " : "",
                                     cand[t]);
    if (used == 0) snprintf(buf, size, "<no registered kernels>");
}

static zf_status_t s_no_kernel(const zf__placer_t *p, int node)
{
    char devices[ZF__PLACER_MAX_TYPES * (ZF_DEVICE_TYPE_MAX + 2) + 1];
    char kernels[(ZF__PLACER_MAX_TYPES + 2) * (ZF_DEVICE_TYPE_MAX + 12) + 32];
    s_registered_devices(p, devices, sizeof devices);
    s_registered_kernels(p, zf_graph_op_def(p->g, node), kernels, sizeof kernels);
    return zf_invalid_argument("No OpKernel was registered to support Op '%s' used by node %s%s; "
                               "registered devices: [%s]; registered kernels: %s",
                               zf_graph_node_op(p->g, node), zf_graph_node_name(p->g, node),
                               s_support_note(zf_graph_node_support(p->g, node)), devices, kernels);
}

/* ---- one node ----------------------------------------------------------------- */

/* Generator (TensorFlow's IsGeneratorNode) or reference/resource source. */
static zf_status_t s_source_flags(zf__placer_t *p, int node)
{
    if (zf_graph_num_data_inputs(p->g, node) != 0) return ZF_STATUS_OK;
    int n_out = 0;
    zf_dtype_t dtype = ZF_INVALID;
    zf_status_t s = zf_graph_num_outputs(p->g, node, &n_out);
    if (zf_ok(s) && n_out == 1) s = zf_graph_output_type(p->g, node, 0, &dtype);
    if (!zf_ok(s))
        return zf_status_prefix(s, "Cannot assign a device for operation %s",
                                zf_graph_node_name(p->g, node));
    if (n_out != 1) return ZF_STATUS_OK;
    bool ref = zf_dtype_is_ref((int)dtype) || dtype == ZF_RESOURCE;
    p->nodes[node].node_flags |= ref ? ZF__NODE_REF_SOURCE : ZF__NODE_GENERATOR;
    return ZF_STATUS_OK;
}

static int s_device_spec(zf__placer_t *p, int device, int *dev_spec)
{
    if (dev_spec[device] < 0) dev_spec[device] = zf__placer_spec_add(p, &p->devices[device].name);
    return dev_spec[device];
}

/* A node that arrives already placed keeps its device, which must exist and
 * have a kernel for it (INTERNAL otherwise: the runtime placed it). */
static zf_status_t s_assigned(zf__placer_t *p, int node, const char *name, uint32_t mask,
                              int *dev_spec)
{
    zf_device_name_t a;
    zf_status_t s = zf_device_name_parse(name, &a);
    if (!zf_ok(s)) {
        zf_status_clear(&s);
        return zf_status_new(ZF_INTERNAL, "Malformed assigned device '%s'", name);
    }
    char full[ZF_DEVICE_NAME_MAX];
    uintptr_t d = 0;
    if (!zf_device_name_is_full(&a) ||
        !zf_strmap_get(p->dev_ids, zf_device_name_format(&a, full, sizeof full), &d))
        return zf_status_new(ZF_INTERNAL, "Assigned device '%s' does not match any device", name);
    if (!(mask & (1u << p->dev_type[d])))
        return zf_status_new(
            ZF_INTERNAL, "Assigned device '%s' does not have registered OpKernel support for %s",
            name, zf_graph_node_op(p->g, node));
    int spec = s_device_spec(p, (int)d, dev_spec);
    if (spec < 0) return zf_out_of_memory("placer specs");
    p->nodes[node].node_flags |= ZF__NODE_ASSIGNED;
    p->nodes[node].device = (int)d;
    p->nodes[node].types = 1u << p->dev_type[d];
    p->nodes[node].spec = spec;
    p->nodes[node].flags |= ZF__GROUP_PINNED;
    return ZF_STATUS_OK;
}

static bool s_ref_type(int dtype)
{
    return zf_dtype_is_ref(dtype) || dtype == ZF_RESOURCE;
}

/* Remembers a `_class` value for the colocation pass, which visits the
 * nodes in the same order (its NodeDef will be out of cache by then). */
static zf_status_t s_keep_class(zf__placer_t *p, const Tensorflow__AttrValue *v)
{
    if (p->n_classes == p->cap_classes) {
        int cap = p->cap_classes ? p->cap_classes * 2 : 256;
        const Tensorflow__AttrValue **grown = realloc(p->classes, (size_t)cap * sizeof *grown);
        if (!grown) return zf_out_of_memory("placer colocation names");
        p->classes = grown;
        p->cap_classes = cap;
    }
    p->classes[p->n_classes++] = v;
    return ZF_STATUS_OK;
}

/* One look at the node's attrs (its NodeDef is in cache now): `_class`
 * (the last one wins, as for any attr), and type attrs holding reference
 * or resource types. */
static zf_status_t s_scan_attrs(zf__placer_t *p, int node)
{
    const Tensorflow__NodeDef *nd = zf_graph_node_def(p->g, node);
    const Tensorflow__AttrValue *cls = NULL;
    for (size_t k = 0; k < nd->n_attr; k++) {
        const Tensorflow__NodeDef__AttrEntry *e = nd->attr[k];
        if (!e || !e->key || !e->value) continue;
        const Tensorflow__AttrValue *v = e->value;
        if (e->key[0] == '_' && strcmp(e->key, "_class") == 0) cls = v;
        if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_TYPE && s_ref_type((int)v->type))
            p->nodes[node].node_flags |= ZF__NODE_REF_ATTR;
        if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && v->list)
            for (size_t t = 0; t < v->list->n_type; t++)
                if (s_ref_type((int)v->list->type[t]))
                    p->nodes[node].node_flags |= ZF__NODE_REF_ATTR;
    }
    if (!cls) return ZF_STATUS_OK;
    p->nodes[node].node_flags |= ZF__NODE_CLASS;
    return s_keep_class(p, cls);
}

/* The init pass is bound by memory latency: each NodeDef, its attr array
 * and attr entries are separate allocations. Fetching them a few nodes
 * ahead, one level per stage, overlaps the waits. */
#define S_AHEAD 8

static void s_prefetch(const zf__placer_t *p, int k)
{
    if (k + 3 * S_AHEAD < p->n) ZF__PREFETCH(zf_graph_node_def(p->g, p->order[k + 3 * S_AHEAD]));
    if (k + 2 * S_AHEAD < p->n) {
        const Tensorflow__NodeDef *nd = zf_graph_node_def(p->g, p->order[k + 2 * S_AHEAD]);
        ZF__PREFETCH(nd->attr);
        ZF__PREFETCH(nd->device);
    }
    if (k + S_AHEAD < p->n) {
        const Tensorflow__NodeDef *nd = zf_graph_node_def(p->g, p->order[k + S_AHEAD]);
        for (size_t a = 0; a < nd->n_attr && a < 3; a++) ZF__PREFETCH(nd->attr[a]);
    }
}

/* The device types with a kernel for node: the op's types, less those whose
 * registered kernels all reject the node's dtype (TensorFlow matches kernel
 * type constraints against the node's attrs too). */
static uint32_t s_node_kernel_mask(zf__placer_t *p, int node)
{
    uint32_t mask = s_kernel_mask(p, zf_graph_op_def(p->g, node));
    const Tensorflow__NodeDef *nd = zf_graph_node_def(p->g, node);
    for (int t = 0; t < p->n_types; t++)
        if ((mask & (1u << t)) && !zf_kernel_def_accepts_dtype(p->types[t], nd)) mask &= ~(1u << t);
    return mask;
}

static zf_status_t s_init_node(zf__placer_t *p, int node, int *dev_spec)
{
    ZF_TRY(s_scan_attrs(p, node));
    uint32_t mask = s_node_kernel_mask(p, node);
    p->nodes[node].parent = node;
    p->nodes[node].device = -1;
    p->nodes[node].types = mask;
    const char *assigned = p->opts.assigned ? p->opts.assigned[node] : NULL;
    if (assigned && *assigned) {
        ZF_TRY(s_assigned(p, node, assigned, mask, dev_spec));
        return s_source_flags(p, node);
    }
    if (mask == 0) return s_no_kernel(p, node);
    ZF_TRY(s_source_flags(p, node));
    ZF_TRY(zf__placer_node_spec(p, node, &p->nodes[node].spec));
    if ((p->nodes[node].node_flags & ZF__NODE_REF_SOURCE) && p->nodes[node].spec >= 0)
        p->nodes[node].flags |= ZF__GROUP_PINNED;
    return ZF_STATUS_OK;
}

zf_status_t zf__placer_init_members(zf__placer_t *p)
{
    ZF_TRY(s_alloc_masks(p));
    int *dev_spec = malloc((size_t)p->n_devices * sizeof *dev_spec);
    if (!dev_spec) return zf_out_of_memory("placer specs");
    for (int d = 0; d < p->n_devices; d++) dev_spec[d] = -1;
    zf_status_t s = ZF_STATUS_OK;
    for (int k = 0; k < p->n && zf_ok(s); k++) {
        s_prefetch(p, k);
        s = s_init_node(p, p->order[k], dev_spec);
    }
    free(dev_spec);
    return s;
}
