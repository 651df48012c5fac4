/* Partitioning (docs/design.md, "Pruning and partitioning"): walks the pruned graph of a placed
 * graph in node order and builds one GraphDef per device (or task), cutting every edge between
 * partitions with a _Send/_Recv pair. Owns zf_partition_graph() and the partition set; keys
 * are common/rendezvous_key.h's; the cut itself (memory types, casts, dedup) is in
 * partition_cut.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto_util.h"
#include "common/rendezvous_key.h"
#include "scheduler/graph/functions.h"
#include "scheduler/graph/partition_internal.h"

/* ---- names --------------------------------------------------------------- */

const char *zf__pctx_name(const zf__pctx_t *c, int node)
{
    const zf__pruned_t *p = &c->pruned;
    if (node < p->n_orig) return zf_graph_node_name(c->g, node);
    if (zf__pruned_is_feed(p, node)) return c->feed_names[node - p->n_orig];
    return c->fetch_names[node - p->n_orig - p->n_feeds];
}

/* New names are `<prefix>_S<n>` with n counting up. Such a string splits
 * back into prefix and n in one way only (n is all digits and "_S" is not),
 * so new names never repeat, and `_recv_<node>_<port>` names never end in
 * `_S<digits>`. What remains is an original node called `..._S<digits>`:
 * the graph is searched only when it has one. */
static bool s_ends_like_new_name(const char *name)
{
    size_t len = strlen(name), digits = 0;
    while (digits < len && name[len - 1 - digits] >= '0' && name[len - 1 - digits] <= '9') digits++;
    return digits > 0 && len >= digits + 2 && name[len - digits - 2] == '_' &&
           name[len - digits - 1] == 'S';
}

static bool s_any_like_new_name(const zf_graph_t *g)
{
    int n = g ? zf_graph_num_nodes(g) : 0;
    for (int i = 0; i < n; i++)
        if (s_ends_like_new_name(zf_graph_node_name(g, i))) return true;
    return false;
}

static void s_scan_names(zf__pctx_t *c)
{
    c->names_may_clash = s_any_like_new_name(c->g) || s_any_like_new_name(c->opts->avoid_names);
}

/* Whether a node of the graph, or of the graph whose names to avoid, has name. */
static bool s_name_taken(const zf__pctx_t *c, const char *name)
{
    const zf_graph_t *avoid = c->opts->avoid_names;
    return zf_graph_find_node(c->g, name) >= 0 || (avoid && zf_graph_find_node(avoid, name) >= 0);
}

char *zf__pctx_new_name(zf__pctx_t *c, const char *prefix, const char *suffix)
{
    size_t size = strlen(prefix) + strlen(suffix) + 24;
    for (;;) {
        char *name = malloc(size);
        if (!name) return NULL;
        snprintf(name, size, "%s%s_S%" PRIu64, prefix, suffix, c->next_id++);
        if (!c->names_may_clash || !s_name_taken(c, name)) return name;
        free(name);
    }
}

/* `base` when no original node has it, else a fresh `base_S<n>`. */
static char *s_reserve_name(zf__pctx_t *c, const char *base)
{
    if (!s_name_taken(c, base)) return strdup(base);
    return zf__pctx_new_name(c, base, "");
}

/* ---- partition node lists ------------------------------------------------ */

bool zf__pctx_push(zf__pctx_t *c, int dev, Tensorflow__NodeDef *nd)
{
    zf__ppart_t *part = &c->parts[c->devs[dev].slot];
    if (!nd) return false;
    if (part->n_nodes == part->cap_nodes) {
        int cap = part->cap_nodes ? part->cap_nodes * 2 : 64;
        Tensorflow__NodeDef **nodes = realloc(part->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) {
            zf__node_free(nd);
            return false;
        }
        part->nodes = nodes;
        part->cap_nodes = cap;
    }
    part->nodes[part->n_nodes++] = nd;
    return true;
}

static bool s_push_io(zf_partition_io_t **arr, int *n, const char *tensor, char *key)
{
    zf_partition_io_t *grown = key ? realloc(*arr, (size_t)(*n + 1) * sizeof *grown) : NULL;
    char *name = grown ? strdup(tensor) : NULL;
    if (grown) *arr = grown;
    if (!name) {
        free(key);
        return false;
    }
    (*arr)[(*n)++] = (zf_partition_io_t){name, key};
    return true;
}

/* ---- the device set ------------------------------------------------------ */

typedef struct {
    const zf__pctx_t *c;
    int index;
} s_dev_ref_t;

static const char *s_dev_key(const zf__pctx_t *c, int d)
{
    return c->by_task ? c->devs[d].task : c->devs[d].name;
}

static int s_dev_ref_cmp(const void *a, const void *b)
{
    const s_dev_ref_t *x = a, *y = b;
    int r = strcmp(s_dev_key(x->c, x->index), s_dev_key(y->c, y->index));
    if (r == 0) r = strcmp(x->c->devs[x->index].name, y->c->devs[y->index].name);
    return r ? r : (x->index > y->index) - (x->index < y->index);
}

/* Sorts the devices by partition key (then name); devices with equal keys
 * (one task) share a slot, whose device_index is the task's first device
 * in the set. */
static zf_status_t s_assign_slots(zf__pctx_t *c)
{
    s_dev_ref_t *order = malloc((size_t)c->n_devs * sizeof *order);
    c->parts = calloc((size_t)c->n_devs, sizeof *c->parts);
    if (!order || !c->parts) {
        free(order);
        return zf_out_of_memory("partition");
    }
    for (int d = 0; d < c->n_devs; d++) order[d] = (s_dev_ref_t){c, d};
    qsort(order, (size_t)c->n_devs, sizeof *order, s_dev_ref_cmp);
    zf_status_t s = ZF_STATUS_OK;
    for (int i = 0; i < c->n_devs; i++) {
        int d = order[i].index, prev = i > 0 ? order[i - 1].index : -1;
        if (prev >= 0 && strcmp(c->devs[d].name, c->devs[prev].name) == 0) {
            s = zf_invalid_argument("device '%s' appears twice in the device set", c->devs[d].name);
            break;
        }
        if (prev < 0 || strcmp(s_dev_key(c, d), s_dev_key(c, prev)) != 0)
            c->parts[c->n_parts++].first_dev = d;
        zf__ppart_t *part = &c->parts[c->n_parts - 1];
        if (d < part->first_dev) part->first_dev = d;
        c->devs[d].slot = c->n_parts - 1;
    }
    free(order);
    return s;
}

static uint64_t s_client_incarnation(const zf__pctx_t *c, const zf_partition_device_t *devices)
{
    zf_device_name_t client;
    zf_status_t s = zf_device_name_parse(c->opts->client_device, &client);
    if (!zf_ok(s)) {
        zf_status_clear(&s);
        return 0; /* unknown to the device set: TensorFlow's illegal incarnation */
    }
    for (int d = 0; d < c->n_devs; d++)
        if (zf_device_name_equal(&client, &devices[d].name)) return devices[d].incarnation;
    return 0;
}

static zf_status_t s_load_devices(zf__pctx_t *c, const zf_partition_device_t *devices)
{
    if (c->n_devs <= 0) return zf_invalid_argument("no devices to partition over");
    c->devs = calloc((size_t)c->n_devs, sizeof *c->devs);
    if (!c->devs) return zf_out_of_memory("partition");
    for (int d = 0; d < c->n_devs; d++) {
        zf__pdev_t *dev = &c->devs[d];
        if (!zf_device_name_is_full(&devices[d].name))
            return zf_invalid_argument(
                "device %d of the device set ('%s') is not a full device "
                "name",
                d, zf_device_name_format(&devices[d].name, dev->name, sizeof dev->name));
        zf_device_name_format(&devices[d].name, dev->name, sizeof dev->name);
        ZF_TRY(zf_device_name_task(&devices[d].name, dev->task, sizeof dev->task));
        snprintf(dev->type, sizeof dev->type, "%s", devices[d].name.type);
        dev->cpu = strcmp(dev->type, "CPU") == 0;
        dev->incarnation = devices[d].incarnation;
        c->any_accel |= !dev->cpu;
    }
    if (c->opts->client_device) c->client_incarnation = s_client_incarnation(c, devices);
    return s_assign_slots(c);
}

/* ---- setup --------------------------------------------------------------- */

static zf_status_t s_assign_nodes(zf__pctx_t *c, const int *assignment)
{
    const zf__pruned_t *p = &c->pruned;
    c->node_dev = malloc((size_t)(p->n_nodes ? p->n_nodes : 1) * sizeof *c->node_dev);
    if (!c->node_dev) return zf_out_of_memory("partition");
    for (int v = 0; v < p->n_nodes; v++) {
        int o = zf__pruned_origin(p, v), d = assignment[o];
        c->node_dev[v] = d;
        if (p->keep[v] && (d < 0 || d >= c->n_devs))
            return zf_invalid_argument("node '%s' is assigned to device index %d, outside the "
                                       "device set of %d devices",
                                       zf_graph_node_name(c->g, o), d, c->n_devs);
    }
    if (c->any_accel) {
        c->kdefs = calloc((size_t)(p->n_orig ? p->n_orig : 1), sizeof *c->kdefs);
        c->kdef_done = calloc((size_t)(p->n_orig ? p->n_orig : 1), 1);
        if (!c->kdefs || !c->kdef_done) return zf_out_of_memory("partition");
    }
    return ZF_STATUS_OK;
}

/* Names and memory placement of the client endpoints. */
static zf_status_t s_name_endpoints(zf__pctx_t *c)
{
    const zf__pruned_t *p = &c->pruned;
    size_t nf = (size_t)p->n_feeds + 1, nt = (size_t)p->n_fetches + 1;
    c->feed_names = calloc(nf, sizeof *c->feed_names);
    c->fetch_names = calloc(nt, sizeof *c->fetch_names);
    c->feed_host = calloc(nf, sizeof *c->feed_host);
    c->fetch_host = calloc(nt, sizeof *c->fetch_host);
    if (!c->feed_names || !c->fetch_names || !c->feed_host || !c->fetch_host)
        return zf_out_of_memory("partition");
    for (int i = 0; i < p->n_feeds + p->n_fetches; i++) {
        bool feed = i < p->n_feeds;
        const zf__endpoint_t *ep = feed ? &p->feeds[i] : &p->fetches[i - p->n_feeds];
        char base[64 + 24];
        const char *node = zf_graph_node_name(c->g, ep->node);
        size_t len = strlen(node) + 32;
        char *buf = len <= sizeof base ? base : malloc(len);
        if (!buf) return zf_out_of_memory("partition");
        snprintf(buf, len, "%s_%s_%d", feed ? "_recv" : "_send", node, ep->port);
        char *name = s_reserve_name(c, buf);
        if (buf != base) free(buf);
        if (!name) return zf_out_of_memory("partition");
        /* A pruned feed's device is never looked at (it may be unassigned). */
        bool kept = p->keep[p->n_orig + i];
        bool host =
            kept && !c->devs[c->node_dev[ep->node]].cpu && zf__pctx_out_host(c, ep->node, ep->port);
        if (feed) {
            c->feed_names[i] = name;
            c->feed_host[i] = host;
        } else {
            c->fetch_names[i - p->n_feeds] = name;
            c->fetch_host[i - p->n_feeds] = host;
        }
    }
    return ZF_STATUS_OK;
}

/* ---- client endpoints ---------------------------------------------------- */

/* The attrs shared by client-terminated endpoints, in name order. */
static bool s_client_attrs(Tensorflow__NodeDef *nd, const char *send_dev, uint64_t inc,
                           const char *recv_dev, const char *tensor)
{
    return zf__node_add_attr(nd, "client_terminated", zf__attr_bool(true)) &&
           zf__node_add_attr(nd, "recv_device", zf__attr_string(recv_dev)) &&
           zf__node_add_attr(nd, "send_device", zf__attr_string(send_dev)) &&
           zf__node_add_attr(nd, "send_device_incarnation", zf__attr_int((int64_t)inc)) &&
           zf__node_add_attr(nd, "tensor_name", zf__attr_string(tensor));
}

static zf_status_t s_base_type(zf__pctx_t *c, const zf__endpoint_t *ep, zf_dtype_t *t)
{
    zf_status_t s = zf_graph_output_type(c->g, ep->node, ep->port, t);
    if (!zf_ok(s)) return zf_status_prefix(s, "Cannot type '%s'", ep->spec);
    *t = zf_dtype_base(*t);
    return ZF_STATUS_OK;
}

/* A feed: a client-terminated _Recv (or _HostRecv) on the fed node's device. */
static zf_status_t s_make_feed(zf__pctx_t *c, int k, Tensorflow__NodeDef **out)
{
    const zf__endpoint_t *ep = &c->pruned.feeds[k];
    int d = c->node_dev[ep->node];
    const zf__pdev_t *dev = &c->devs[d];
    const char *client = c->opts->client_device ? c->opts->client_device : dev->name;
    uint64_t inc = c->opts->client_device ? c->client_incarnation : dev->incarnation;
    zf_dtype_t t = ZF_INVALID;
    ZF_TRY(s_base_type(c, ep, &t));
    char *name = strdup(c->feed_names[k]);
    Tensorflow__NodeDef *nd =
        name ? zf__node_new(name, c->feed_host[k] ? "_HostRecv" : "_Recv", dev->name) : NULL;
    bool ok = nd && s_client_attrs(nd, client, inc, dev->name, ep->spec) &&
              zf__node_add_attr(nd, "tensor_type", zf__attr_type(t));
    zf__ppart_t *part = &c->parts[dev->slot];
    ok = ok && s_push_io(&part->feeds, &part->n_feeds, ep->spec,
                         zf_rendezvous_key(client, inc, dev->name, ep->spec));
    if (!ok) {
        zf__node_free(nd);
        return zf_out_of_memory("partition");
    }
    *out = nd;
    return ZF_STATUS_OK;
}

/* A fetch: a client-terminated _Send (or _HostSend) beside the fetched node. */
static zf_status_t s_make_fetch(zf__pctx_t *c, int k, Tensorflow__NodeDef **out)
{
    const zf__endpoint_t *ep = &c->pruned.fetches[k];
    const zf__pdev_t *dev = &c->devs[c->node_dev[ep->node]];
    const char *client = c->opts->client_device ? c->opts->client_device : dev->name;
    zf_dtype_t t = ZF_INVALID;
    ZF_TRY(s_base_type(c, ep, &t));
    char *name = strdup(c->fetch_names[k]);
    Tensorflow__NodeDef *nd =
        name ? zf__node_new(name, c->fetch_host[k] ? "_HostSend" : "_Send", dev->name) : NULL;
    bool ok = nd && zf__node_add_attr(nd, "T", zf__attr_type(t)) &&
              s_client_attrs(nd, dev->name, dev->incarnation, client, ep->spec);
    zf__ppart_t *part = &c->parts[dev->slot];
    ok = ok && s_push_io(&part->fetches, &part->n_fetches, ep->spec,
                         zf_rendezvous_key(dev->name, dev->incarnation, client, ep->spec));
    if (!ok) {
        zf__node_free(nd);
        return zf_out_of_memory("partition");
    }
    *out = nd;
    return ZF_STATUS_OK;
}

/* ---- the walk ------------------------------------------------------------ */

static zf_status_t s_make_node(zf__pctx_t *c, int v, Tensorflow__NodeDef **out)
{
    const zf__pruned_t *p = &c->pruned;
    if (zf__pruned_is_feed(p, v)) return s_make_feed(c, v - p->n_orig, out);
    if (zf__pruned_is_fetch(p, v)) return s_make_fetch(c, v - p->n_orig - p->n_feeds, out);
    ZF_TRY(zf__pctx_check_arity(c, v));
    *out = zf__node_copy_shell(zf_graph_node_def(c->g, v), c->devs[c->node_dev[v]].name);
    return *out ? ZF_STATUS_OK : zf_out_of_memory("partition");
}

/* Hands the collected inputs over to nd. */
static zf_status_t s_set_inputs(zf__pctx_t *c, Tensorflow__NodeDef *nd)
{
    if (c->n_inputs == 0) return ZF_STATUS_OK;
    nd->input = malloc((size_t)c->n_inputs * sizeof *nd->input);
    if (!nd->input) return zf_out_of_memory("partition");
    memcpy(nd->input, c->inputs, (size_t)c->n_inputs * sizeof *nd->input);
    nd->n_input = (size_t)c->n_inputs;
    c->n_inputs = 0;
    return ZF_STATUS_OK;
}

/* Adds node v to its partition, then its inputs (TensorFlow's order: the
 * node precedes the recvs made for it). */
static zf_status_t s_place_node(zf__pctx_t *c, int v)
{
    Tensorflow__NodeDef *nd = NULL;
    ZF_TRY(s_make_node(c, v, &nd));
    if (!zf__pctx_push(c, c->node_dev[v], nd)) return zf_out_of_memory("partition");
    c->n_refc = 0;
    c->n_ref_recvs = 0;
    int n = zf__pruned_num_in(&c->pruned, v);
    for (int k = 0; k < n; k++) {
        zf__pedge_t e = zf__pruned_in_edge(&c->pruned, v, k);
        ZF_TRY(zf__pctx_input(c, v, &e));
    }
    ZF_TRY(zf__pctx_read_controls(c));
    return s_set_inputs(c, nd);
}

/* ---- the result ---------------------------------------------------------- */

static void s_part_clear(zf__ppart_t *part)
{
    for (int i = 0; i < part->n_nodes; i++) zf__node_free(part->nodes[i]);
    free(part->nodes);
    for (int i = 0; i < part->n_feeds; i++) {
        free(part->feeds[i].tensor_name);
        free(part->feeds[i].key);
    }
    for (int i = 0; i < part->n_fetches; i++) {
        free(part->fetches[i].tensor_name);
        free(part->fetches[i].key);
    }
    free(part->feeds);
    free(part->fetches);
    memset(part, 0, sizeof *part);
}

static Tensorflow__GraphDef *s_graphdef(const zf__pctx_t *c, zf__ppart_t *part)
{
    const Tensorflow__GraphDef *src = zf_graph_graphdef(c->g);
    Tensorflow__GraphDef *gd = malloc(sizeof *gd);
    if (!gd) return NULL;
    tensorflow__graph_def__init(gd);
    bool ok = true;
    if (src->versions) {
        gd->versions = (Tensorflow__VersionDef *)zf_proto_copy(&src->versions->base);
        ok = gd->versions != NULL;
    }
    if (ok && src->library) { /* only the functions the partition's nodes reach */
        zf_status_t s =
            zf_functions_reachable(src->library, part->nodes, (size_t)part->n_nodes, &gd->library);
        ok = zf_ok(s);
        zf_status_clear(&s);
    }
    if (!ok) {
        protobuf_c_message_free_unpacked(&gd->base, NULL);
        return NULL;
    }
    gd->node = part->nodes;
    gd->n_node = (size_t)part->n_nodes;
    part->nodes = NULL;
    part->n_nodes = 0;
    return gd;
}

static zf_status_t s_collect(zf__pctx_t *c, zf_partition_set_t **out)
{
    zf_partition_set_t *set = calloc(1, sizeof *set);
    int used = 0;
    for (int i = 0; i < c->n_parts; i++) used += c->parts[i].n_nodes > 0;
    if (set) set->parts = calloc((size_t)(used ? used : 1), sizeof *set->parts);
    if (!set || !set->parts) {
        free(set);
        return zf_out_of_memory("partition");
    }
    for (int i = 0; i < c->n_parts; i++) {
        zf__ppart_t *part = &c->parts[i];
        if (part->n_nodes == 0) continue;
        zf_partition_t *r = &set->parts[set->n_parts];
        r->device = strdup(s_dev_key(c, part->first_dev));
        r->graph = r->device ? s_graphdef(c, part) : NULL;
        if (!r->graph) {
            free(r->device);
            zf_partition_set_destroy(&set);
            return zf_out_of_memory("partition");
        }
        set->n_parts++;
        r->device_index = part->first_dev;
        r->feeds = part->feeds;
        r->n_feeds = part->n_feeds;
        r->fetches = part->fetches;
        r->n_fetches = part->n_fetches;
        r->n_send = part->n_send;
        r->n_recv = part->n_recv;
        part->feeds = part->fetches = NULL;
        part->n_feeds = part->n_fetches = 0;
    }
    set->next_name_id = c->next_id;
    *out = set;
    return ZF_STATUS_OK;
}

/* ---- entry points -------------------------------------------------------- */

void zf__pctx_free(zf__pctx_t *c)
{
    for (int i = 0; i < c->n_parts; i++) s_part_clear(&c->parts[i]);
    for (int i = 0; i < c->pruned.n_feeds && c->feed_names; i++) free(c->feed_names[i]);
    for (int i = 0; i < c->pruned.n_fetches && c->fetch_names; i++) free(c->fetch_names[i]);
    for (int i = 0; i < c->n_inputs; i++) free(c->inputs[i]);
    free(c->feed_names);
    free(c->fetch_names);
    free(c->feed_host);
    free(c->fetch_host);
    free(c->parts);
    free(c->devs);
    free(c->node_dev);
    free(c->kdefs);
    free(c->kdef_done);
    free(c->inputs);
    free(c->refc);
    free(c->ref_recvs);
    free(c->frame);
    free(c->frames);
    free(c->cloops);
    free(c->asap);
    free(c->topo);
    free(c->srecvs);
    zf__pctx_cut_free(c);
    zf__pruned_free(&c->pruned);
}

zf_status_t zf__pctx_setup(zf__pctx_t *c, const zf_graph_t *g, const zf_partition_device_t *devices,
                           int n_devices, const int *assignment, const zf_partition_options_t *opts)
{
    static const zf_partition_options_t defaults = {0};
    memset(c, 0, sizeof *c);
    if (!g || (n_devices > 0 && !devices) || !assignment)
        return zf_invalid_argument("partitioning needs a graph, devices and an assignment");
    c->g = g;
    c->opts = opts ? opts : &defaults;
    c->by_task = c->opts->by == ZF_PARTITION_BY_TASK;
    c->next_id = c->opts->first_name_id;
    c->n_devs = n_devices;
    ZF_TRY(s_load_devices(c, devices));
    ZF_TRY(zf__pruned_build(c->g, c->opts, &c->pruned));
    ZF_TRY(s_assign_nodes(c, assignment));
    ZF_TRY(zf__pctx_frames_init(c));
    s_scan_names(c);
    ZF_TRY(zf__pctx_cut_init(c));
    return s_name_endpoints(c);
}

static zf_status_t s_run(zf__pctx_t *c, const zf_partition_device_t *devices, int n_devices,
                         const int *assignment, const zf_partition_options_t *opts,
                         zf_partition_set_t **out)
{
    ZF_TRY(zf__pctx_setup(c, c->g, devices, n_devices, assignment, opts));
    if (c->opts->recv_scheduling) ZF_TRY(zf__pctx_asap(c));
    for (int v = 0; v < c->pruned.n_nodes; v++)
        if (c->pruned.keep[v]) ZF_TRY(s_place_node(c, v));
    if (c->asap) ZF_TRY(zf__pctx_schedule_recvs(c));
    return s_collect(c, out);
}

zf_status_t zf_partition_graph(const zf_graph_t *g, const zf_partition_device_t *devices,
                               int n_devices, const int *assignment,
                               const zf_partition_options_t *opts, zf_partition_set_t **out)
{
    if (!out) return zf_invalid_argument("zf_partition_graph needs an output");
    *out = NULL;
    zf__pctx_t c;
    memset(&c, 0, sizeof c);
    c.g = g;
    zf_status_t s = s_run(&c, devices, n_devices, assignment, opts, out);
    zf__pctx_free(&c);
    return s;
}

void zf_partition_set_destroy(zf_partition_set_t **set_p)
{
    if (!set_p || !*set_p) return;
    zf_partition_set_t *set = *set_p;
    for (int i = 0; i < set->n_parts; i++) {
        zf_partition_t *r = &set->parts[i];
        free(r->device);
        if (r->graph) protobuf_c_message_free_unpacked(&r->graph->base, NULL);
        for (int k = 0; k < r->n_feeds; k++) {
            free(r->feeds[k].tensor_name);
            free(r->feeds[k].key);
        }
        for (int k = 0; k < r->n_fetches; k++) {
            free(r->fetches[k].tensor_name);
            free(r->fetches[k].key);
        }
        free(r->feeds);
        free(r->fetches);
    }
    free(set->parts);
    free(set);
    *set_p = NULL;
}
