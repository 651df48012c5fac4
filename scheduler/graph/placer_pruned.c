/* TensorFlow's place_pruned_graph (scheduler/graph/placer.h): only the
 * nodes one run needs are placed. The run's nodes are those its fetches
 * and targets reach backwards through data and control edges, an edge out
 * of a fed tensor cut (the feed replaces it, as the partitioner's pruning
 * does). A fed tensor's producer is placed too, as an anchor: the
 * partitioner puts the feed's _Recv on its device; but what it reads is
 * not, unless the run needs it otherwise. The nodes go into a graph of
 * their own — the NodeDefs borrowed; an anchor copied shallowly, each data
 * input renamed to a stand-in Placeholder of that tensor's dtype and its
 * control inputs dropped — and the placer runs on it, the nodes placed
 * already keeping their devices. So a node no run needs (one pinned to a
 * device the cluster lacks, an op without a kernel here) never stops a
 * run, and nothing a run does not use constrains its placement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/graph/nodedef_build.h"
#include "scheduler/graph/placer.h"

#define S_STANDIN_PREFIX "_zf_fed/"

/* The run's fed tensors, resolved once: whether a node has a fed output,
 * and the (node, port) pairs. Names the graph lacks are left out (the
 * partitioner reports them). */
typedef struct {
    bool *node_fed;
    int *node, *port;
    int n;
} s_feeds_t;

static void s_feeds_free(s_feeds_t *f)
{
    free(f->node_fed);
    free(f->node);
    free(f->port);
}

static zf_status_t s_feeds_resolve(const zf_graph_t *g, const zf_placer_prune_t *pr, s_feeds_t *f)
{
    *f = (s_feeds_t){0};
    f->node_fed = calloc((size_t)zf_graph_num_nodes(g) + 1, sizeof *f->node_fed);
    f->node = calloc((size_t)pr->n_feeds + 1, sizeof *f->node);
    f->port = calloc((size_t)pr->n_feeds + 1, sizeof *f->port);
    if (!f->node_fed || !f->node || !f->port) return zf_out_of_memory("placer");
    for (int i = 0; i < pr->n_feeds; i++) {
        int port = 0, v = zf_graph_find_tensor(g, pr->feeds[i], &port);
        if (v < 0) continue;
        f->node_fed[v] = true;
        f->node[f->n] = v;
        f->port[f->n++] = port;
    }
    return ZF_STATUS_OK;
}

/* Whether node:port is a fed tensor. */
static bool s_fed(const s_feeds_t *f, int node, int port)
{
    if (!f->node_fed[node]) return false;
    for (int i = 0; i < f->n; i++)
        if (f->node[i] == node && f->port[i] == port) return true;
    return false;
}

/* Marks node i needed and pushes it, once. */
static void s_push(bool *needed, int *stack, int *top, int i)
{
    if (i < 0 || needed[i]) return;
    needed[i] = true;
    stack[(*top)++] = i;
}

/* needed[] for pr: the fetches' and targets' backward closure, cut at fed
 * tensors; anchor[] the producers of the fed tensors it reads (or fetches);
 * *n_in the count of both. */
static void s_mark_needed(const zf_graph_t *g, const zf_placer_prune_t *pr, const s_feeds_t *fed,
                          bool *needed, bool *anchor, int *stack, int *n_in)
{
    int top = 0;
    for (int i = 0; i < pr->n_fetches; i++) {
        int port = 0, v = zf_graph_find_tensor(g, pr->fetches[i], &port);
        if (v >= 0 && s_fed(fed, v, port))
            anchor[v] = true;
        else
            s_push(needed, stack, &top, v);
    }
    for (int i = 0; i < pr->n_targets; i++) {
        const char *t = pr->targets[i];
        s_push(needed, stack, &top, zf_graph_find_node(g, t[0] == '^' ? t + 1 : t));
    }
    while (top > 0) {
        int v = stack[--top];
        const zf_edge_t *in = NULL;
        int k = zf_graph_in_edges(g, v, &in);
        for (int e = 0; e < k; e++) {
            if (!zf_edge_is_control(&in[e]) && s_fed(fed, in[e].src, in[e].src_port))
                anchor[in[e].src] = true;
            else
                s_push(needed, stack, &top, in[e].src);
        }
    }
    *n_in = 0;
    for (int v = 0; v < zf_graph_num_nodes(g); v++) *n_in += needed[v] || anchor[v];
}

/* ---- the run's own graph --------------------------------------------------------- */

typedef struct {
    Tensorflow__GraphDef gd;
    int *map;                    /* full node -> sub node, -1 */
    Tensorflow__NodeDef **owned; /* shallow copies (own input arrays) and stand-ins */
    bool *standin;               /* per owned: a stand-in (freed whole) */
    int n_owned;
    char **strs; /* the copies' renamed inputs */
    int n_strs;
} s_sub_t;

static void s_sub_free(s_sub_t *sub)
{
    for (int i = 0; i < sub->n_owned; i++) {
        Tensorflow__NodeDef *nd = sub->owned[i];
        if (sub->standin[i]) {
            zf__node_free(nd);
            continue;
        }
        free(nd->input);
        free(nd);
    }
    for (int i = 0; i < sub->n_strs; i++) free(sub->strs[i]);
    free(sub->strs);
    free(sub->owned);
    free(sub->standin);
    free(sub->gd.node);
    free(sub->map);
}

/* The stand-in for fed tensor src:port in sub (made on first use). */
static zf_status_t s_standin(const zf_graph_t *g, s_sub_t *sub, int src, int port, char **name)
{
    const char *node = zf_graph_node_name(g, src);
    size_t cap = strlen(S_STANDIN_PREFIX) + strlen(node) + 16;
    if (!(*name = malloc(cap))) return zf_out_of_memory("placer");
    snprintf(*name, cap, S_STANDIN_PREFIX "%s_%d", node, port);
    sub->strs[sub->n_strs++] = *name;
    const char *buf = *name;
    for (int i = 0; i < sub->n_owned; i++)
        if (sub->standin[i] && strcmp(sub->owned[i]->name, buf) == 0) return ZF_STATUS_OK;
    zf_dtype_t dt = ZF_FLOAT;
    ZF_TRY(zf_graph_output_type(g, src, port, &dt));
    char *own = strdup(buf);
    Tensorflow__NodeDef *nd = own ? zf__node_new(own, "Placeholder", "") : NULL;
    Tensorflow__AttrValue *v = nd ? zf__attr_type(zf_dtype_base(dt)) : NULL;
    if (!v || !zf__node_add_attr(nd, "dtype", v)) {
        if (nd) zf__node_free(nd);
        return zf_out_of_memory("placer");
    }
    sub->owned[sub->n_owned] = nd;
    sub->standin[sub->n_owned++] = true;
    sub->gd.node[sub->gd.n_node++] = nd;
    return ZF_STATUS_OK;
}

/* Node v of g for sub: borrowed when needed, else (an anchor) copied with
 * stand-ins for its data inputs and without its control inputs. */
static zf_status_t s_sub_node(const zf_graph_t *g, bool needed, s_sub_t *sub, int v)
{
    const Tensorflow__NodeDef *nd = zf_graph_node_def(g, v);
    const zf_edge_t *in = NULL;
    int k = zf_graph_in_edges(g, v, &in);
    sub->map[v] = (int)sub->gd.n_node;
    if (needed) {
        sub->gd.node[sub->gd.n_node++] = (Tensorflow__NodeDef *)nd;
        return ZF_STATUS_OK;
    }
    Tensorflow__NodeDef *c = malloc(sizeof *c);
    char **input = calloc(nd->n_input + 1, sizeof *input);
    if (!c || !input) {
        free(c);
        free(input);
        return zf_out_of_memory("placer");
    }
    *c = *nd;
    c->input = input;
    c->n_input = 0;
    sub->owned[sub->n_owned] = c;
    sub->standin[sub->n_owned++] = false;
    sub->gd.node[sub->gd.n_node++] = c;
    for (int e = 0; e < k; e++)
        if (!zf_edge_is_control(&in[e]))
            ZF_TRY(s_standin(g, sub, in[e].src, in[e].src_port, &c->input[c->n_input++]));
    return ZF_STATUS_OK;
}

static zf_status_t s_sub_build(const zf_graph_t *g, const bool *needed, const bool *anchor,
                               int n_in, s_sub_t *sub)
{
    int n = zf_graph_num_nodes(g);
    const Tensorflow__GraphDef *full = zf_graph_graphdef(g);
    tensorflow__graph_def__init(&sub->gd);
    sub->gd.library = full->library;
    sub->gd.versions = full->versions;
    /* the nodes, and at most one stand-in per anchor's input */
    size_t cap = (size_t)n_in + 1;
    for (int v = 0; v < n; v++)
        if (anchor[v] && !needed[v]) cap += zf_graph_node_def(g, v)->n_input;
    sub->gd.node = calloc(cap, sizeof *sub->gd.node);
    sub->owned = calloc(cap, sizeof *sub->owned);
    sub->standin = calloc(cap, sizeof *sub->standin);
    sub->map = malloc(((size_t)n + 1) * sizeof *sub->map);
    sub->strs = calloc(cap, sizeof *sub->strs);
    if (!sub->gd.node || !sub->owned || !sub->standin || !sub->map || !sub->strs)
        return zf_out_of_memory("placer");
    for (int v = 0; v < n; v++) sub->map[v] = -1;
    for (int v = 0; v < n; v++)
        if (needed[v] || anchor[v]) ZF_TRY(s_sub_node(g, needed[v], sub, v));
    return ZF_STATUS_OK;
}

/* ---- placing it ------------------------------------------------------------------ */

/* Places sg's nodes, the needed nodes of g placed already keeping their
 * devices; the result goes back into assignment. */
static zf_status_t s_place_sub(const zf_graph_t *g, const zf_graph_t *sg, const s_sub_t *sub,
                               const zf_placer_device_t *devices, int n_devices,
                               const zf_placer_options_t *opts, int *assignment)
{
    int n = zf_graph_num_nodes(g), sn = zf_graph_num_nodes(sg);
    char(*names)[ZF_DEVICE_NAME_MAX] = calloc((size_t)n_devices + 1, sizeof *names);
    const char **assigned = calloc((size_t)sn + 1, sizeof *assigned);
    int *sub_assign = calloc((size_t)sn + 1, sizeof *sub_assign);
    zf_status_t st = names && assigned && sub_assign ? ZF_STATUS_OK : zf_out_of_memory("placer");
    for (int d = 0; zf_ok(st) && d < n_devices; d++)
        zf_device_name_format(&devices[d].name, names[d], sizeof names[d]);
    for (int v = 0; zf_ok(st) && v < n; v++) {
        int a = assignment[v];
        if (sub->map[v] >= 0 && a >= 0 && a < n_devices) assigned[sub->map[v]] = names[a];
    }
    zf_placer_options_t o = opts ? *opts : ZF_PLACER_OPTIONS_DEFAULT;
    o.assigned = assigned;
    if (zf_ok(st)) st = zf_placer_run(sg, devices, n_devices, &o, sub_assign);
    for (int v = 0; zf_ok(st) && v < n; v++)
        if (sub->map[v] >= 0) assignment[v] = sub_assign[sub->map[v]];
    free(sub_assign);
    free(assigned);
    free(names);
    return st;
}

zf_status_t zf_placer_run_pruned(const zf_graph_t *g, const zf_placer_device_t *devices,
                                 int n_devices, const zf_placer_options_t *opts,
                                 const zf_placer_prune_t *prune, int *assignment)
{
    if (!g || !prune || !assignment)
        return zf_invalid_argument("zf_placer_run_pruned: missing argument");
    int n = zf_graph_num_nodes(g), n_in = 0;
    bool *needed = calloc((size_t)n + 1, sizeof *needed);
    bool *anchor = calloc((size_t)n + 1, sizeof *anchor);
    int *stack = malloc(((size_t)n + 1) * sizeof *stack);
    s_feeds_t fed;
    zf_status_t st = s_feeds_resolve(g, prune, &fed);
    if (zf_ok(st) && (!needed || !anchor || !stack)) st = zf_out_of_memory("placer");
    if (zf_ok(st)) s_mark_needed(g, prune, &fed, needed, anchor, stack, &n_in);
    s_feeds_free(&fed);
    free(stack);
    bool unplaced = false;
    for (int v = 0; zf_ok(st) && v < n && !unplaced; v++)
        unplaced = (needed[v] || anchor[v]) && assignment[v] < 0;
    if (unplaced) {
        s_sub_t sub = {0};
        zf_graph_t *sg = NULL;
        st = s_sub_build(g, needed, anchor, n_in, &sub);
        if (zf_ok(st)) st = zf_graph_new_from_graphdef(&sub.gd, &sg);
        if (zf_ok(st)) st = s_place_sub(g, sg, &sub, devices, n_devices, opts, assignment);
        zf_graph_destroy(&sg);
        s_sub_free(&sub);
    }
    free(needed);
    free(anchor);
    return st;
}
