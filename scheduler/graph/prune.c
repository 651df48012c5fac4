/* Pruning (docs/design.md, "Pruning and partitioning"): resolves a client's feeds, fetches and
 * targets against a graph, rewrites fed tensors to come from feed nodes and fetched ones to go to
 * fetch nodes, and keeps only what the fetches and targets reach backwards. Owns the zf__pruned_t
 * that the partitioner walks. */
#include <stdlib.h>
#include <string.h>

#include "scheduler/graph/partition_internal.h"

/* Resolves spec to (node, port) and checks the port against the node's
 * outputs. what is "feed" or "fetch" (the error texts follow TensorFlow's
 * FeedInputs / FetchOutputs). */
static zf_status_t s_endpoint(const zf_graph_t *g, const char *spec, bool is_feed,
                              zf__endpoint_t *ep)
{
    const char *what = is_feed ? "feed" : "fetch";
    const char *name = NULL;
    size_t len = 0;
    int port = 0;
    if (!spec) return zf_invalid_argument("%s is NULL", what);
    zf_status_t s = zf_tensor_name_parse(spec, &name, &len, &port);
    if (!zf_ok(s)) return zf_status_prefix(s, "Invalid %s '%s'", what, spec);
    if (port == ZF_CONTROL_PORT)
        return zf_invalid_argument("Invalid %s '%s': names a control input, not a tensor", what,
                                   spec);
    int node = zf_graph_find_node_n(g, name, len);
    if (node < 0)
        return is_feed ? zf_invalid_argument("FeedInputs: unable to find feed output %s", spec)
                       : zf_invalid_argument("FetchOutputs node %s: not found", spec);
    int n_out = 0;
    s = zf_graph_num_outputs(g, node, &n_out);
    if (!zf_ok(s)) {
        s.code = ZF_INVALID_ARGUMENT; /* the client named a tensor we cannot type */
        return zf_status_prefix(s, "Cannot %s '%s'", what, spec);
    }
    if (is_feed && port >= n_out)
        return zf_invalid_argument("FeedInputs: %s should have output index < %d", spec, n_out);
    if (!is_feed && n_out == 0)
        return zf_invalid_argument(
            "Tried to fetch data for '%s', which produces no output.  To run to a node but not "
            "fetch any data, pass '%s' as an argument to the 'target_node_names' argument of the "
            "Session::Run API.",
            spec, spec);
    if (!is_feed && port >= n_out)
        return zf_invalid_argument("FetchOutputs %s: output index too large, must be < %d", spec,
                                   n_out);
    const char *op = zf_graph_node_op(g, node);
    *ep = (zf__endpoint_t){node, port, spec,
                           is_feed && (!strcmp(op, "Placeholder") || !strcmp(op, "PlaceholderV2"))};
    return ZF_STATUS_OK;
}

typedef struct {
    int node, port, index;
} s_key_t;

static int s_key_cmp(const void *a, const void *b)
{
    const s_key_t *x = a, *y = b;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    if (x->port != y->port) return x->port < y->port ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* INVALID_ARGUMENT naming the first repeat (in the client's order) of a
 * tensor in eps. */
static zf_status_t s_check_unique(const zf__endpoint_t *eps, int n, const char *verb)
{
    if (n < 2) return ZF_STATUS_OK;
    s_key_t *keys = malloc((size_t)n * sizeof *keys);
    if (!keys) return zf_out_of_memory("pruning");
    for (int i = 0; i < n; i++) keys[i] = (s_key_t){eps[i].node, eps[i].port, i};
    qsort(keys, (size_t)n, sizeof *keys, s_key_cmp);
    int dup = -1;
    for (int i = 1; i < n; i++)
        if (keys[i].node == keys[i - 1].node && keys[i].port == keys[i - 1].port &&
            (dup < 0 || keys[i].index < dup))
            dup = keys[i].index;
    free(keys);
    if (dup < 0) return ZF_STATUS_OK;
    return zf_invalid_argument("Endpoint \"%s\" %s more than once.", eps[dup].spec, verb);
}

static zf_status_t s_resolve_feeds(zf__pruned_t *p, const zf_partition_options_t *opts)
{
    if (p->n_feeds == 0) return ZF_STATUS_OK;
    p->feeds = calloc((size_t)p->n_feeds, sizeof *p->feeds);
    p->feed_head = malloc((size_t)p->n_orig * sizeof *p->feed_head);
    p->feed_next = malloc((size_t)p->n_feeds * sizeof *p->feed_next);
    if (!p->feeds || !p->feed_head || !p->feed_next) return zf_out_of_memory("pruning");
    for (int i = 0; i < p->n_feeds; i++)
        ZF_TRY(s_endpoint(p->g, opts->feeds[i], true, &p->feeds[i]));
    ZF_TRY(s_check_unique(p->feeds, p->n_feeds, "fed"));
    memset(p->feed_head, 0xff, (size_t)p->n_orig * sizeof *p->feed_head);
    for (int i = p->n_feeds - 1; i >= 0; i--) {
        p->feed_next[i] = p->feed_head[p->feeds[i].node];
        p->feed_head[p->feeds[i].node] = i;
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_resolve_fetches(zf__pruned_t *p, const zf_partition_options_t *opts)
{
    if (p->n_fetches == 0) return ZF_STATUS_OK;
    p->fetches = calloc((size_t)p->n_fetches, sizeof *p->fetches);
    if (!p->fetches) return zf_out_of_memory("pruning");
    for (int i = 0; i < p->n_fetches; i++)
        ZF_TRY(s_endpoint(p->g, opts->fetches[i], false, &p->fetches[i]));
    for (int i = 0; i < p->n_fetches && p->feed_head; i++)
        for (int f = p->feed_head[p->fetches[i].node]; f >= 0; f = p->feed_next[f])
            if (p->feeds[f].port == p->fetches[i].port)
                return zf_invalid_argument("%s is both fed and fetched.", p->fetches[i].spec);
    return s_check_unique(p->fetches, p->n_fetches, "fetched");
}

/* Target node indices, or an error listing every unknown one. */
static zf_status_t s_resolve_targets(const zf__pruned_t *p, const zf_partition_options_t *opts,
                                     int *targets)
{
    size_t missing_len = 0;
    for (int i = 0; i < opts->n_targets; i++) {
        const char *spec = opts->targets[i], *name = NULL;
        size_t len = 0;
        int port = 0;
        targets[i] = -1;
        if (!spec) return zf_invalid_argument("target is NULL");
        zf_status_t s = zf_tensor_name_parse(spec, &name, &len, &port);
        if (!zf_ok(s)) return zf_status_prefix(s, "Invalid target '%s'", spec);
        targets[i] = zf_graph_find_node_n(p->g, name, len);
        if (targets[i] < 0) missing_len += strlen(spec) + 1;
    }
    if (missing_len == 0) return ZF_STATUS_OK;
    char *missing = malloc(missing_len);
    if (!missing) return zf_out_of_memory("pruning");
    size_t used = 0;
    for (int i = 0; i < opts->n_targets; i++) {
        if (targets[i] >= 0) continue;
        size_t len = strlen(opts->targets[i]);
        if (used) missing[used++] = ' ';
        memcpy(missing + used, opts->targets[i], len);
        used += len;
    }
    missing[used] = '\0';
    zf_status_t s =
        zf_invalid_argument("PruneForTargets: Some target nodes not found: %s", missing);
    free(missing);
    return s;
}

int zf__pruned_num_in(const zf__pruned_t *p, int node)
{
    if (node < p->n_orig) {
        const zf_edge_t *es = NULL;
        return zf_graph_in_edges(p->g, node, &es);
    }
    return zf__pruned_is_fetch(p, node) ? 1 : 0;
}

zf__pedge_t zf__pruned_in_edge(const zf__pruned_t *p, int node, int k)
{
    if (node >= p->n_orig) {
        int f = node - p->n_orig - p->n_feeds;
        return (zf__pedge_t){p->fetches[f].node, p->fetches[f].port, 0, p->n_edges + f};
    }
    const zf_edge_t *es = NULL;
    zf_graph_in_edges(p->g, node, &es);
    zf__pedge_t r = {es[k].src, es[k].src_port, es[k].dst_port, p->in_base[node] + k};
    if (!p->feed_head || p->feed_head[r.src] < 0) return r;
    bool control = r.src_port == ZF_CONTROL_PORT;
    for (int f = p->feed_head[r.src]; f >= 0; f = p->feed_next[f]) {
        if (control ? p->feeds[f].moves_control : p->feeds[f].port == r.src_port) {
            r.src = p->n_orig + f;
            r.src_port = control ? ZF_CONTROL_PORT : 0;
            break;
        }
    }
    return r;
}

int zf__pruned_origin(const zf__pruned_t *p, int node)
{
    if (node < p->n_orig) return node;
    if (zf__pruned_is_feed(p, node)) return p->feeds[node - p->n_orig].node;
    return p->fetches[node - p->n_orig - p->n_feeds].node;
}

static void s_push(zf__pruned_t *p, int *stack, int *top, int node)
{
    if (p->keep[node]) return;
    p->keep[node] = 1;
    p->n_kept++;
    stack[(*top)++] = node;
}

/* Marks everything the roots reach backwards. With no fetches and no
 * targets every original node is a root (nothing is pruned). */
static zf_status_t s_prune(zf__pruned_t *p, const int *targets, int n_targets)
{
    int *stack = malloc((size_t)(p->n_nodes ? p->n_nodes : 1) * sizeof *stack);
    p->keep = calloc((size_t)(p->n_nodes ? p->n_nodes : 1), 1);
    if (!stack || !p->keep) {
        free(stack);
        return zf_out_of_memory("pruning");
    }
    int top = 0;
    if (p->n_fetches == 0 && n_targets == 0)
        for (int i = p->n_orig - 1; i >= 0; i--) s_push(p, stack, &top, i);
    for (int i = 0; i < p->n_fetches; i++) s_push(p, stack, &top, p->n_orig + p->n_feeds + i);
    for (int i = 0; i < n_targets; i++) s_push(p, stack, &top, targets[i]);
    while (top > 0) {
        int v = stack[--top];
        int n = zf__pruned_num_in(p, v);
        for (int k = 0; k < n; k++) s_push(p, stack, &top, zf__pruned_in_edge(p, v, k).src);
    }
    free(stack);
    return ZF_STATUS_OK;
}

static zf_status_t s_edge_ids(zf__pruned_t *p)
{
    p->in_base = malloc((size_t)(p->n_orig ? p->n_orig : 1) * sizeof *p->in_base);
    if (!p->in_base) return zf_out_of_memory("pruning");
    int base = 0;
    for (int i = 0; i < p->n_orig; i++) {
        p->in_base[i] = base;
        base += zf__pruned_num_in(p, i);
    }
    p->n_edges = base;
    return ZF_STATUS_OK;
}

static zf_status_t s_build(zf__pruned_t *p, const zf_partition_options_t *opts)
{
    if (opts->n_feeds < 0 || opts->n_fetches < 0 || opts->n_targets < 0 ||
        (opts->n_feeds && !opts->feeds) || (opts->n_fetches && !opts->fetches) ||
        (opts->n_targets && !opts->targets))
        return zf_invalid_argument("feeds, fetches and targets need non-negative counts and "
                                   "arrays");
    if (p->n_orig > INT32_MAX - opts->n_feeds - opts->n_fetches)
        return zf_invalid_argument("graph too large to partition");
    p->n_feeds = opts->n_feeds;
    p->n_fetches = opts->n_fetches;
    p->n_nodes = p->n_orig + p->n_feeds + p->n_fetches;
    ZF_TRY(s_resolve_feeds(p, opts));
    ZF_TRY(s_resolve_fetches(p, opts));
    ZF_TRY(s_edge_ids(p));
    int *targets = malloc((size_t)(opts->n_targets ? opts->n_targets : 1) * sizeof *targets);
    if (!targets) return zf_out_of_memory("pruning");
    zf_status_t s = s_resolve_targets(p, opts, targets);
    if (zf_ok(s)) s = s_prune(p, targets, opts->n_targets);
    free(targets);
    return s;
}

zf_status_t zf__pruned_build(const zf_graph_t *g, const zf_partition_options_t *opts,
                             zf__pruned_t *pruned)
{
    memset(pruned, 0, sizeof *pruned);
    pruned->g = g;
    pruned->n_orig = zf_graph_num_nodes(g);
    zf_status_t s = s_build(pruned, opts);
    if (!zf_ok(s)) zf__pruned_free(pruned);
    return s;
}

void zf__pruned_free(zf__pruned_t *pruned)
{
    free(pruned->feeds);
    free(pruned->fetches);
    free(pruned->feed_head);
    free(pruned->feed_next);
    free(pruned->in_base);
    free(pruned->keep);
    const zf_graph_t *g = pruned->g;
    memset(pruned, 0, sizeof *pruned);
    pruned->g = g;
}
