/* Graphviz drawing of a partitioning: the pruned, placed graph with one
 * cluster per partition and its cut edges marked (zf_partition_dot()). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/graph/partition_internal.h"

/* Writes s as the inside of a DOT string: quotes and backslashes escaped,
 * control characters dropped. */
static void s_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

static void s_node(FILE *f, zf__pctx_t *c, int v)
{
    const zf__pruned_t *p = &c->pruned;
    fprintf(f, "    n%d [label=\"", v);
    s_escape(f, zf__pctx_name(c, v));
    if (zf__pruned_is_feed(p, v)) {
        fputs("\\nfeed ", f);
        s_escape(f, p->feeds[v - p->n_orig].spec);
        fputs("\", shape=ellipse, fillcolor=\"#dff0d8\"];\n", f);
    } else if (zf__pruned_is_fetch(p, v)) {
        fputs("\\nfetch ", f);
        s_escape(f, p->fetches[v - p->n_orig - p->n_feeds].spec);
        fputs("\", shape=ellipse, fillcolor=\"#d9edf7\"];\n", f);
    } else {
        fputs("\\n", f);
        s_escape(f, zf_graph_node_op(c->g, v));
        fputs("\"];\n", f);
    }
}

static bool s_cluster_used(const zf__pctx_t *c, int k)
{
    for (int v = 0; v < c->pruned.n_nodes; v++)
        if (c->pruned.keep[v] && c->devs[c->node_dev[v]].slot == k) return true;
    return false;
}

static void s_clusters(FILE *f, zf__pctx_t *c)
{
    for (int k = 0; k < c->n_parts; k++) {
        if (!s_cluster_used(c, k)) continue;
        const zf__pdev_t *dev = &c->devs[c->parts[k].first_dev];
        fprintf(f, "  subgraph cluster_%d {\n    label=\"", k);
        s_escape(f, c->by_task ? dev->task : dev->name);
        fputs("\";\n    style=rounded;\n    color=\"#5b7fa6\";\n", f);
        for (int v = 0; v < c->pruned.n_nodes; v++)
            if (c->pruned.keep[v] && c->devs[c->node_dev[v]].slot == k) s_node(f, c, v);
        fputs("  }\n", f);
    }
}

/* Cut edges cross partitions; a memory edge is a same-device transfer
 * between host and device memory. */
static void s_edges(FILE *f, zf__pctx_t *c)
{
    for (int v = 0; v < c->pruned.n_nodes; v++) {
        if (!c->pruned.keep[v]) continue;
        int n = zf__pruned_num_in(&c->pruned, v);
        for (int k = 0; k < n; k++) {
            zf__pedge_t e = zf__pruned_in_edge(&c->pruned, v, k);
            const zf__pdev_t *s = &c->devs[c->node_dev[e.src]], *d = &c->devs[c->node_dev[v]];
            bool control = e.dst_port == ZF_CONTROL_PORT;
            bool memory =
                !control && s == d && !s->cpu &&
                zf__pctx_out_host(c, e.src, e.src_port) != zf__pctx_in_host(c, v, e.dst_port);
            fprintf(f, "  n%d -> n%d", e.src, v);
            const char *attrs = s->slot != d->slot ? "color=\"#d62728\", penwidth=2.5"
                                : memory           ? "color=\"#ff7f0e\", penwidth=2.5"
                                                   : NULL;
            if (attrs || control)
                fprintf(f, " [%s%s%s]", attrs ? attrs : "", attrs && control ? ", " : "",
                        control ? "style=dashed" : "");
            fputs(";\n", f);
        }
    }
}

zf_status_t zf_partition_dot(const zf_graph_t *g, const zf_partition_device_t *devices,
                             int n_devices, const int *assignment,
                             const zf_partition_options_t *opts, char **out, size_t *len)
{
    if (!out || !len) return zf_invalid_argument("zf_partition_dot needs outputs");
    *out = NULL;
    *len = 0;
    zf__pctx_t c;
    zf_status_t s = zf__pctx_setup(&c, g, devices, n_devices, assignment, opts);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = zf_ok(s) ? open_memstream(&buf, &size) : NULL;
    if (zf_ok(s) && !f) s = zf_out_of_memory("graph drawing");
    if (f) {
        fputs("digraph partitions {\n"
              "  graph [fontname=\"Helvetica\", fontsize=11, rankdir=TB];\n"
              "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
              "fontname=\"Helvetica\", fontsize=10];\n",
              f);
        s_clusters(f, &c);
        s_edges(f, &c);
        fputs("}\n", f);
        bool bad = ferror(f) != 0;
        if (fclose(f) != 0 || bad) s = zf_out_of_memory("graph drawing");
    }
    zf__pctx_free(&c);
    if (!zf_ok(s)) {
        free(buf);
        return s;
    }
    *out = buf;
    *len = size;
    return ZF_STATUS_OK;
}
