/* Recv scheduling (docs/design.md, "Recv scheduling"; TensorFlow's
 * GraphOptions.enable_recv_scheduling): ASAP start times of the pruned,
 * placed graph under a unit cost model, a `_Recv`'s `_start_time` (when its
 * readers need the value), and a control edge into each recv from the node
 * of its partition and frame that finishes just before the transfer has to
 * begin, so that the recv is not activated, and its value not held, long
 * before it is read.
 *
 * Why the edges cannot deadlock a step: ASAP times grow by at least a node's
 * cost along every edge outside loop back edges, an Exit starts after every
 * node of its frame (its frame must finish first), and a recv starts no
 * later than its readers. Whatever a recv leads to in the same iteration
 * therefore starts at or after the recv's start time, and its new control
 * input starts before it, so the edge closes no cycle. Inside a loop frame
 * the node waited for must run in every iteration (one fed by a
 * non-constant Enter runs in the first only, and would stall the recv in
 * the others), and its output must be in the recv's frame. A recv ignores
 * the deadness of its control inputs, so a node of an untaken branch
 * serves. */
#include <stdlib.h>
#include <string.h>

#include "scheduler/graph/partition_internal.h"

static bool s_op(const zf__pctx_t *c, int v, const char *op)
{
    return v < c->pruned.n_orig && zf_op_is(zf_graph_node_op(c->g, v), op); /* not a feed or a fetch */
}

/* ---- ASAP start times ---------------------------------------------------- */

/* One edge of the analysis: dst starts w after src starts. */
typedef struct {
    int src, dst;
    int64_t w;
} s_arc_t;

typedef struct {
    s_arc_t *arcs;
    int n, cap;
} s_arcs_t;

static bool s_arc(s_arcs_t *a, int src, int dst, int64_t w)
{
    if (!zf__grow((void **)&a->arcs, &a->cap, a->n + 1, sizeof *a->arcs)) return false;
    a->arcs[a->n++] = (s_arc_t){src, dst, w};
    return true;
}

/* The arcs of the kept nodes, and of one virtual "end" node per loop frame
 * f (id n + f - 1): every node of f (an Enter's frame is the one it opens)
 * leads to it, and it to f's Exits, which lead to the parent's end node.
 * Back edges (out of NextIteration) are left out. */
static bool s_collect_arcs(const zf__pctx_t *c, s_arcs_t *a)
{
    const zf__pruned_t *p = &c->pruned;
    const int64_t cost = ZF_RECV_SCHED_NODE_COST;
    int n = p->n_nodes;
    for (int v = 0; v < n; v++) {
        if (!p->keep[v]) continue;
        for (int k = 0, m = zf__pruned_num_in(p, v); k < m; k++) {
            zf__pedge_t e = zf__pruned_in_edge(p, v, k);
            if (!p->keep[e.src] || s_op(c, e.src, "NextIteration")) continue;
            bool moves = c->node_dev[e.src] != c->node_dev[v];
            if (!s_arc(a, e.src, v, cost + (moves ? ZF_RECV_SCHED_TRANSFER_COST : 0))) return false;
        }
        int f = c->frame && v < p->n_orig ? c->frame[v] : 0;
        if (f == 0) continue;
        int parent = c->frames[f].parent;
        bool ok = s_op(c, v, "Exit") ? s_arc(a, n + f - 1, v, 0) &&
                                           (parent == 0 || s_arc(a, v, n + parent - 1, cost))
                                     : s_arc(a, v, n + f - 1, cost);
        if (!ok) return false;
    }
    for (int f = 1; f < c->n_frames; f++)
        if (c->frames[f].parent > 0 && !s_arc(a, n + f - 1, n + c->frames[f].parent - 1, 0))
            return false;
    return true;
}

/* Longest paths from the sources (Kahn's order, in queue); returns how
 * many nodes it ordered, *left how many a cycle kept from being ready. */
static int s_longest(const zf__pctx_t *c, const s_arcs_t *a, int m, int *first, int *out,
                     int *indeg, int *queue, int64_t *t, int *left)
{
    for (int k = 0; k < a->n; k++) {
        first[a->arcs[k].src + 1]++;
        indeg[a->arcs[k].dst]++;
    }
    for (int u = 0; u < m; u++) first[u + 1] += first[u];
    for (int k = 0; k < a->n; k++) out[first[a->arcs[k].src]++] = k;
    for (int u = m; u > 0; u--) first[u] = first[u - 1];
    first[0] = 0;
    int head = 0, tail = 0, included = 0;
    for (int u = 0; u < m; u++) {
        if (u < c->pruned.n_nodes && !c->pruned.keep[u]) continue;
        included++;
        if (indeg[u] == 0) queue[tail++] = u;
    }
    while (head < tail) {
        int u = queue[head++];
        for (int k = first[u]; k < first[u + 1]; k++) {
            const s_arc_t *arc = &a->arcs[out[k]];
            if (t[u] + arc->w > t[arc->dst]) t[arc->dst] = t[u] + arc->w;
            if (--indeg[arc->dst] == 0) queue[tail++] = arc->dst;
        }
    }
    *left = included - tail;
    return tail;
}

zf_status_t zf__pctx_asap(zf__pctx_t *c)
{
    const zf__pruned_t *p = &c->pruned;
    int n = p->n_nodes, m = n + (c->n_frames > 1 ? c->n_frames - 1 : 0);
    size_t sm = (size_t)(m ? m : 1);
    s_arcs_t a = {0};
    zf_status_t s = s_collect_arcs(c, &a) ? ZF_STATUS_OK : zf_out_of_memory("partition");
    int *first = calloc(sm + 1, sizeof *first), *indeg = calloc(sm, sizeof *indeg);
    int *queue = malloc(sm * sizeof *queue);
    int *out = malloc((size_t)(a.n ? a.n : 1) * sizeof *out);
    int64_t *t = calloc(sm, sizeof *t);
    if (zf_ok(s) && (!first || !indeg || !queue || !out || !t)) s = zf_out_of_memory("partition");
    int left = 0, ordered = 0;
    if (zf_ok(s)) ordered = s_longest(c, &a, m, first, out, indeg, queue, t, &left);
    for (int v = 0; zf_ok(s) && left > 0 && v < n; v++)
        if (p->keep[v] && indeg[v] > 0)
            s = zf_invalid_argument("recv scheduling: node '%s' is on or after a cycle that passes "
                                    "no NextIteration (or a while-loop frame entered again after "
                                    "its Exit)",
                                    zf__pctx_name(c, v));
    if (zf_ok(s)) {
        c->asap = t; /* the virtual end nodes' times past n are never read */
        t = NULL;
        c->topo = queue;
        c->n_topo = ordered;
        queue = NULL;
    }
    free(a.arcs);
    free(first);
    free(indeg);
    free(queue);
    free(out);
    free(t);
    return s;
}

/* ---- recvs --------------------------------------------------------------- */

bool zf__pctx_note_recv(zf__pctx_t *c, Tensorflow__NodeDef *recv, int v, int src, int sd, int dd,
                        int *rec)
{
    if (!zf__grow((void **)&c->srecvs, &c->cap_srecvs, c->n_srecvs + 1, sizeof *c->srecvs))
        return false;
    c->srecvs[c->n_srecvs] = (zf__srecv_t){recv, c->devs[dd].slot, zf__pctx_out_frame(c, src),
                                           c->asap[v], sd != dd ? ZF_RECV_SCHED_TRANSFER_COST : 0};
    *rec = c->n_srecvs++;
    return true;
}

void zf__pctx_note_reader(zf__pctx_t *c, int rec, int v)
{
    if (rec >= 0 && c->asap[v] < c->srecvs[rec].start) c->srecvs[rec].start = c->asap[v];
}

/* ---- the control edges --------------------------------------------------- */

/* Which kept nodes run in every iteration of their frame (at the root,
 * all run once): a loop's Merge (its NextIteration input starts each
 * iteration after the first), a constant Enter (it delivers into every
 * iteration), and a node whose inputs all do. A non-constant Enter delivers
 * into the first iteration only, and an Exit of an inner loop only once
 * that loop, whose Enters may not all run every iteration, finishes:
 * neither counts. In Kahn's order, so inputs come first. */
static uint8_t *s_every_iteration(const zf__pctx_t *c)
{
    const zf__pruned_t *p = &c->pruned;
    uint8_t *every = calloc((size_t)(p->n_nodes ? p->n_nodes : 1), 1);
    for (int i = 0; every && i < c->n_topo; i++) {
        int v = c->topo[i];
        if (v >= p->n_nodes) continue; /* a frame's end node */
        bool enter = s_op(c, v, "Enter"), e = !s_op(c, v, "Exit"), loop_merge = false;
        if (enter) {
            zf_status_t s =
                zf_node_attr_bool_or(zf_graph_node_def(c->g, v), "is_constant", false, &e);
            if (!zf_ok(s)) e = false;
            zf_status_clear(&s);
        }
        for (int k = 0, m = enter ? 0 : zf__pruned_num_in(p, v); k < m; k++) {
            int src = zf__pruned_in_edge(p, v, k).src;
            if (s_op(c, src, "NextIteration"))
                loop_merge = true;
            else
                e = e && every[src];
        }
        every[v] = e || (loop_merge && s_op(c, v, "Merge"));
    }
    return every;
}

/* A node a recv may wait for: in partition slot, its outputs in frame. */
typedef struct {
    int slot, frame;
    int64_t t;
    int v;
} s_cand_t;

static int s_cand_cmp(const void *x, const void *y)
{
    const s_cand_t *a = x, *b = y;
    if (a->slot != b->slot) return a->slot < b->slot ? -1 : 1;
    if (a->frame != b->frame) return a->frame < b->frame ? -1 : 1;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->v > b->v) - (a->v < b->v);
}

/* The last candidate of (slot, frame) starting at or before by; -1 when
 * none. */
static int s_last_by(const s_cand_t *cand, int n, int slot, int frame, int64_t by)
{
    const s_cand_t key = {slot, frame, by, INT32_MAX};
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (s_cand_cmp(&cand[mid], &key) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && cand[lo - 1].slot == slot && cand[lo - 1].frame == frame ? lo - 1 : -1;
}

/* The nodes recvs may wait for, sorted: at the root every kept node but a
 * fetch; in a loop frame those that run in every iteration, but an Enter
 * (it belongs to the frame around) and a NextIteration (its output belongs
 * to the next iteration). NULL when out of memory. */
static s_cand_t *s_candidates(const zf__pctx_t *c, int *n)
{
    const zf__pruned_t *p = &c->pruned;
    uint8_t *every = c->frame ? s_every_iteration(c) : NULL;
    s_cand_t *cand = malloc((size_t)(p->n_nodes ? p->n_nodes : 1) * sizeof *cand);
    if (!cand || (c->frame && !every)) {
        free(every);
        free(cand);
        return NULL;
    }
    *n = 0;
    for (int v = 0; v < p->n_nodes; v++) {
        if (!p->keep[v] || zf__pruned_is_fetch(p, v)) continue;
        int f = zf__pctx_out_frame(c, v);
        if (f != 0 && (!every[v] || s_op(c, v, "Enter") || s_op(c, v, "NextIteration"))) continue;
        cand[(*n)++] = (s_cand_t){c->devs[c->node_dev[v]].slot, f, c->asap[v], v};
    }
    free(every);
    qsort(cand, (size_t)*n, sizeof *cand, s_cand_cmp);
    return cand;
}

/* Adds an attr where name order puts it (NodeDefs here keep attrs sorted). */
static bool s_add_attr_sorted(Tensorflow__NodeDef *nd, const char *key, Tensorflow__AttrValue *v)
{
    if (!zf__node_add_attr(nd, key, v)) return false;
    for (size_t i = nd->n_attr - 1; i > 0 && strcmp(nd->attr[i - 1]->key, nd->attr[i]->key) > 0;
         i--) {
        Tensorflow__NodeDef__AttrEntry *e = nd->attr[i];
        nd->attr[i] = nd->attr[i - 1];
        nd->attr[i - 1] = e;
    }
    return true;
}

zf_status_t zf__pctx_schedule_recvs(zf__pctx_t *c)
{
    int n = 0;
    s_cand_t *cand = s_candidates(c, &n);
    if (!cand) return zf_out_of_memory("partition");
    bool ok = true;
    for (int i = 0; ok && i < c->n_srecvs; i++) {
        const zf__srecv_t *r = &c->srecvs[i];
        ok = s_add_attr_sorted(r->recv, "_start_time", zf__attr_int(r->start));
        if (!ok) continue;
        /* The transfer starts by start - lead; the node must be done by then. */
        int q = s_last_by(cand, n, r->slot, r->frame, r->start - r->lead - ZF_RECV_SCHED_NODE_COST);
        if (q >= 0)
            ok = zf__node_add_input(r->recv,
                                    zf__input_string(zf__pctx_name(c, cand[q].v), ZF_CONTROL_PORT));
    }
    free(cand);
    return ok ? ZF_STATUS_OK : zf_out_of_memory("partition");
}
