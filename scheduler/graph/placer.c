/* The placer's entry points: checks the device set, builds the run's state
 * (placer_members.c, placer_colocate.c), then assigns every node in
 * TensorFlow's two passes with the generator and metadata heuristics and
 * the first/balanced choice (placer_choice.c). */
#include "scheduler/graph/placer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/device_type.h"
#include "common/log.h"
#include "common/op_registry.h"
#include "scheduler/graph/placer_internal.h"

#define S_LOG "placer"

/* ---- the device set ---------------------------------------------------------- */

typedef struct {
    int priority;
    const char *name;
    int index;
} s_order_t;

/* Placement order: type priority, highest first, then name. */
static int s_order_cmp(const void *a, const void *b)
{
    const s_order_t *x = a, *y = b;
    if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static zf_status_t s_type_of(zf__placer_t *p, int d)
{
    const char *type = p->devices[d].name.type;
    int t = 0;
    while (t < p->n_types && strcmp(p->types[t], type) != 0) t++;
    if (t == p->n_types) {
        if (t == ZF__PLACER_MAX_TYPES)
            return zf_invalid_argument("the device set has more than %d device types",
                                       ZF__PLACER_MAX_TYPES);
        p->types[t] = type;
        p->type_priority[t] = zf_device_type_priority(type);
        p->n_types++;
    }
    p->dev_type[d] = (uint8_t)t;
    return ZF_STATUS_OK;
}

static zf_status_t s_name_device(zf__placer_t *p, int d)
{
    const zf_device_name_t *name = &p->devices[d].name;
    zf_device_name_format(name, p->names[d], sizeof p->names[d]);
    if (!zf_device_name_is_full(name))
        return zf_invalid_argument("device %d ('%s') is not a full device name", d, p->names[d]);
    int rc = zf_strmap_insert(p->dev_ids, p->names[d], (uintptr_t)d, NULL);
    if (rc == -EEXIST) return zf_invalid_argument("device '%s' is listed twice", p->names[d]);
    if (rc != 0) return zf_out_of_memory("placer devices");
    return s_type_of(p, d);
}

static zf_status_t s_sort_devices(zf__placer_t *p)
{
    s_order_t *order = malloc((size_t)p->n_devices * sizeof *order);
    if (!order) return zf_out_of_memory("placer devices");
    for (int d = 0; d < p->n_devices; d++)
        order[d] = (s_order_t){p->type_priority[p->dev_type[d]], p->names[d], d};
    qsort(order, (size_t)p->n_devices, sizeof *order, s_order_cmp);
    for (int k = 0; k < p->n_devices; k++) p->sorted[k] = order[k].index;
    s_order_t types[ZF__PLACER_MAX_TYPES];
    for (int t = 0; t < p->n_types; t++)
        types[t] = (s_order_t){p->type_priority[t], p->types[t], t};
    qsort(types, (size_t)p->n_types, sizeof types[0], s_order_cmp);
    for (int t = 0; t < p->n_types; t++) p->type_order[t] = types[t].index;
    free(order);
    return ZF_STATUS_OK;
}

static zf_status_t s_prepare_devices(zf__placer_t *p)
{
    size_t nd = (size_t)p->n_devices;
    p->names = malloc(nd * sizeof *p->names);
    p->dev_type = malloc(nd);
    p->sorted = malloc(nd * sizeof *p->sorted);
    p->dev_ids = zf_strmap_new(nd, 0);
    if (!p->names || !p->dev_type || !p->sorted || !p->dev_ids)
        return zf_out_of_memory("placer devices");
    for (int d = 0; d < p->n_devices; d++) ZF_TRY(s_name_device(p, d));
    return s_sort_devices(p);
}

/* ---- run state ------------------------------------------------------------------- */

static zf_status_t s_alloc_nodes(zf__placer_t *p)
{
    size_t n = (size_t)p->n + 1;
    p->order = malloc(n * sizeof *p->order);
    p->nodes = calloc(n, sizeof *p->nodes);
    p->spec_ids = zf_strmap_new(64, 0);
    if (!p->order || !p->nodes || !p->spec_ids) return zf_out_of_memory("placer state");
    zf_graph_topo_order(p->g, p->order);
    return ZF_STATUS_OK;
}

static void s_free(zf__placer_t *p)
{
    free(p->names);
    free(p->dev_type);
    free(p->sorted);
    zf_strmap_destroy(&p->dev_ids);
    free(p->specs);
    zf_strmap_destroy(&p->spec_ids);
    free(p->mask_keys);
    free(p->mask_values);
    free(p->op_ref);
    free(p->choice_keys);
    free(p->choice_index);
    free(p->choices);
    free(p->order);
    free(p->nodes);
    free(p->classes);
}

/* ---- assignment --------------------------------------------------------------------- */

static void s_place(zf__placer_t *p, int node, int device)
{
    p->assignment[node] = device;
    p->nodes[zf__placer_find(p, node)].device = device;
    if (p->opts.log_placement)
        zf_log_info(S_LOG, "%s: (%s): %s", zf_graph_node_name(p->g, node),
                    zf_graph_node_op(p->g, node), p->names[device]);
}

static int s_default(const zf__placer_t *p, const zf__placer_choice_t *c)
{
    return p->opts.mode == ZF_PLACE_FIRST ? c->first : c->balanced;
}

/* Heuristic B: a metadata node (Shape, Size, Rank) goes with its input when
 * the input's device is one the node may use. */
static int s_metadata_device(const zf__placer_t *p, int node, const zf__placer_choice_t *c)
{
    if (!zf_op_has_flag(zf_graph_op_def(p->g, node), ZF_OP_METADATA)) return -1;
    const zf_edge_t *in = NULL;
    if (zf_graph_num_data_inputs(p->g, node) < 1 || zf_graph_in_edges(p->g, node, &in) < 1)
        return -1;
    int d = p->assignment[in[0].src];
    return d >= 0 && zf__placer_choice_allows(p, c, d) ? d : -1;
}

/* Heuristic A: a generator goes with its consumers when they all sit on one
 * device the generator may use. */
static int s_generator_device(const zf__placer_t *p, int node, const zf__placer_choice_t *c)
{
    const zf_edge_t *out = NULL;
    int n = zf_graph_out_edges(p->g, node, &out);
    if (n < 1) return -1;
    int d = p->assignment[out[0].dst];
    for (int k = 1; k < n; k++)
        if (p->assignment[out[k].dst] != d) return -1;
    return d >= 0 && zf__placer_choice_allows(p, c, d) ? d : -1;
}

static zf_status_t s_place_node(zf__placer_t *p, int node, bool generator)
{
    int root = zf__placer_find(p, node);
    if (p->nodes[root].device >= 0) {
        s_place(p, node, p->nodes[root].device);
        return ZF_STATUS_OK;
    }
    const zf__placer_choice_t *c = NULL;
    ZF_TRY(zf__placer_choice(p, node, root, &c));
    int d = generator ? s_generator_device(p, node, c) : s_metadata_device(p, node, c);
    s_place(p, node, d >= 0 ? d : s_default(p, c));
    return ZF_STATUS_OK;
}

/* First pass in node order, generators put off; then the generators. */
static zf_status_t s_assign(zf__placer_t *p)
{
    int *deferred = malloc(((size_t)p->n + 1) * sizeof *deferred);
    if (!deferred) return zf_out_of_memory("placer state");
    int n_deferred = 0;
    zf_status_t s = ZF_STATUS_OK;
    for (int k = 0; k < p->n && zf_ok(s); k++) {
        int node = p->order[k];
        /* Groups joined by name sit anywhere in memory: fetch ahead. */
        if (k + 8 < p->n) ZF__PREFETCH(&p->nodes[p->nodes[p->order[k + 8]].parent]);
        uint8_t flags = p->nodes[node].node_flags;
        if ((flags & ZF__NODE_GENERATOR) && !(flags & ZF__NODE_ASSIGNED))
            deferred[n_deferred++] = node;
        else
            s = s_place_node(p, node, false);
    }
    for (int k = 0; k < n_deferred && zf_ok(s); k++) s = s_place_node(p, deferred[k], true);
    free(deferred);
    return s;
}

static zf_status_t s_run(zf__placer_t *p)
{
    ZF_TRY(s_prepare_devices(p));
    ZF_TRY(s_alloc_nodes(p));
    for (int i = 0; i < p->n; i++) p->assignment[i] = -1;
    ZF_TRY(zf__placer_init_members(p));
    ZF_TRY(zf__placer_colocate_ref_edges(p));
    ZF_TRY(zf__placer_colocate_classes(p));
    return s_assign(p);
}

zf_status_t zf_placer_run(const zf_graph_t *g, const zf_placer_device_t *devices, int n_devices,
                          const zf_placer_options_t *opts, int *assignment)
{
    if (!g || n_devices < 0 || (n_devices > 0 && !devices))
        return zf_invalid_argument("zf_placer_run: no graph or a bad device set");
    if (n_devices == 0) return zf_status_new(ZF_FAILED_PRECONDITION, "No devices are registered");
    int n = zf_graph_num_nodes(g);
    if (n > 0 && !assignment) return zf_invalid_argument("zf_placer_run: no assignment array");
    zf__placer_t p = {.g = g, .devices = devices, .n_devices = n_devices, .n = n};
    p.opts = opts ? *opts : ZF_PLACER_OPTIONS_DEFAULT;
    p.assignment = assignment;
    zf_status_t s = s_run(&p);
    s_free(&p);
    if (!zf_ok(s))
        for (int i = 0; i < n; i++) assignment[i] = -1;
    return s;
}

/* ---- writing devices back ------------------------------------------------------------ */

zf_status_t zf_placer_write_devices(Tensorflow__GraphDef *gd, const zf_placer_device_t *devices,
                                    int n_devices, const int *assignment)
{
    if (!gd || (gd->n_node > 0 && (!devices || !assignment)))
        return zf_invalid_argument("zf_placer_write_devices: missing argument");
    for (size_t i = 0; i < gd->n_node; i++)
        if (assignment[i] < 0 || assignment[i] >= n_devices)
            return zf_invalid_argument("node %zu has no device in the assignment (%d)", i,
                                       assignment[i]);
    const ProtobufCFieldDescriptor *field = protobuf_c_message_descriptor_get_field_by_name(
        &tensorflow__node_def__descriptor, "device");
    for (size_t i = 0; i < gd->n_node; i++) {
        char name[ZF_DEVICE_NAME_MAX];
        zf_device_name_format(&devices[assignment[i]].name, name, sizeof name);
        char *copy = strdup(name);
        if (!copy) return zf_out_of_memory("placer device names");
        Tensorflow__NodeDef *nd = gd->node[i];
        if (nd->device && (const void *)nd->device != field->default_value) free(nd->device);
        nd->device = copy;
    }
    return ZF_STATUS_OK;
}
