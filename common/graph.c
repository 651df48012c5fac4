/* Graph construction from a GraphDef: name table, CSR edge arrays, op
 * classification, validation and the topological order; owns all of them
 * (and the GraphDef once adopted). */
#include "common/graph.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph_internal.h"
#include "common/strmap.h"

/* --- tensor names ------------------------------------------------------- */

typedef enum s_tn_error {
    S_TN_OK = 0,
    S_TN_EMPTY,
    S_TN_CONTROL_NO_NAME,
    S_TN_NO_NAME,
    S_TN_NO_PORT,
    S_TN_BAD_PORT,
    S_TN_PORT_RANGE,
    S_TN_CONTROL_PORT,
    S_TN_COLON_IN_NAME,
    S_TN_TOO_LONG,
} s_tn_error_t;

static const char *s_tn_reason(s_tn_error_t e)
{
    switch (e) {
    case S_TN_OK: return "ok";
    case S_TN_EMPTY: return "it is empty";
    case S_TN_CONTROL_NO_NAME: return "'^' names no node";
    case S_TN_NO_NAME: return "no node name before ':'";
    case S_TN_NO_PORT: return "no output index after ':'";
    case S_TN_BAD_PORT: return "the output index is not a non-negative integer";
    case S_TN_PORT_RANGE: return "the output index is out of range";
    case S_TN_CONTROL_PORT: return "a control input cannot name an output index";
    case S_TN_COLON_IN_NAME: return "the node name contains ':'";
    case S_TN_TOO_LONG: return "the node name is too long";
    }
    return "unknown error";
}

/* The parser behind zf_tensor_name_parse_n(), without allocation. */
static inline s_tn_error_t s_tn_scan(const char *s, size_t slen, const char **name, size_t *len,
                                     int *port)
{
    if (slen == 0) return S_TN_EMPTY;
    size_t start = s[0] == '^' ? 1 : 0;
    if (start == 1 && slen == 1) return S_TN_CONTROL_NO_NAME;
    /* The port is the run of digits after the last ':'; the name before it
     * may not hold another ':'. */
    size_t k = slen;
    while (k > start && (unsigned)(unsigned char)s[k - 1] - '0' <= 9) k--;
    const char *colon_p = k < slen && k > start && s[k - 1] == ':' ? s + k - 1 : NULL;
    if (!colon_p) {
        /* No "name:digits" suffix: any ':' makes the input malformed. */
        const char *c = memchr(s + start, ':', slen - start);
        if (c == s + start) return S_TN_NO_NAME;
        if (c) return c + 1 == s + slen ? S_TN_NO_PORT : S_TN_BAD_PORT;
    }
    size_t colon = colon_p ? (size_t)(colon_p - s) : slen;
    int p = 0;
    if (colon_p) {
        if (colon == start) return S_TN_NO_NAME;
        for (size_t d = colon + 1; d < slen; d++) {
            int digit = s[d] - '0';
            if (p > (INT_MAX - digit) / 10) return S_TN_PORT_RANGE;
            p = p * 10 + digit;
        }
        if (start == 1) return S_TN_CONTROL_PORT;
        if (memchr(s + start, ':', colon - start)) return S_TN_COLON_IN_NAME;
    }
    *name = s + start;
    *len = colon - start;
    *port = start == 1 ? ZF_CONTROL_PORT : p;
    return S_TN_OK;
}

zf_status_t zf_tensor_name_parse_n(const char *s, size_t slen, const char **name, size_t *len,
                                   int *port)
{
    s_tn_error_t e = s_tn_scan(s, slen, name, len, port);
    if (e == S_TN_OK) return ZF_STATUS_OK;
    return zf_invalid_argument("malformed tensor name '%.*s': %s",
                               (int)(slen > INT_MAX ? INT_MAX : slen), s, s_tn_reason(e));
}

zf_status_t zf_tensor_name_parse(const char *s, const char **name, size_t *len, int *port)
{
    return zf_tensor_name_parse_n(s, strlen(s), name, len, port);
}

/* --- small helpers ------------------------------------------------------ */

static inline const char *s_str(const char *s)
{
    return s ? s : "";
}

/* A message built with stdio (open_memstream), turned into a status. */
typedef struct s_msg {
    FILE *f;
    char *buf;
    size_t len;
} s_msg_t;

static bool s_msg_open(s_msg_t *m)
{
    m->buf = NULL;
    m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    return m->f != NULL;
}

static zf_status_t s_msg_status(s_msg_t *m)
{
    if (!m->f) return zf_out_of_memory("an error message");
    bool ok = fclose(m->f) == 0 && m->buf;
    zf_status_t s = ok ? zf_invalid_argument("%s", m->buf) : zf_out_of_memory("an error message");
    free(m->buf);
    return s;
}

/* --- ops ---------------------------------------------------------------- */

static zf_node_support_t s_classify(const zf_op_def_t *def, bool is_function)
{
    if (is_function) return ZF_NODE_LIBRARY_FUNCTION;
    if (!def) return ZF_NODE_UNKNOWN_OP;
    if (zf_op_has_flag(def, ZF_OP_FUNCTIONAL)) return ZF_NODE_FUNCTIONAL_OP;
    if (zf_op_has_flag(def, ZF_OP_UNSUPPORTED)) return ZF_NODE_UNSUPPORTED_OP;
    return ZF_NODE_SUPPORTED;
}

/* Index of op in g->ops, adding it on first use; -1 when out of memory. */
static int s_op_index(zf_graph_t *g, zf_strmap_t *op_map, const zf_strmap_t *functions,
                      const char *op)
{
    size_t len = strlen(op);
    uintptr_t k;
    if (zf_strmap_get_n(op_map, op, len, &k)) return (int)k;
    if (g->num_ops == g->cap_ops) {
        int cap = g->cap_ops ? g->cap_ops * 2 : 16;
        zf__graph_op_t *ops = realloc(g->ops, (size_t)cap * sizeof *ops);
        if (!ops) return -1;
        g->ops = ops;
        g->cap_ops = cap;
    }
    if (zf_strmap_insert_n(op_map, op, len, (uintptr_t)g->num_ops, NULL) != 0) return -1;
    zf__graph_op_t *o = &g->ops[g->num_ops];
    bool is_function = functions && zf_strmap_get_n(functions, op, len, NULL);
    o->name = op;
    o->def = is_function ? NULL : zf_op_lookup(op);
    o->count = 0;
    o->support = s_classify(o->def, is_function);
    o->back_edge_source = strcmp(op, "NextIteration") == 0 || strcmp(op, "RefNextIteration") == 0;
    return g->num_ops++;
}

/* Names of the library's functions, or NULL (with OK) when there are none. */
static zf_status_t s_library_functions(const Tensorflow__GraphDef *gd, zf_strmap_t **out,
                                       int *count)
{
    *out = NULL;
    *count = 0;
    const Tensorflow__FunctionDefLibrary *lib = gd->library;
    if (!lib || lib->n_function == 0) return ZF_STATUS_OK;
    *count = lib->n_function > INT_MAX ? INT_MAX : (int)lib->n_function;
    zf_strmap_t *map = zf_strmap_new(lib->n_function, 0);
    if (!map) return zf_out_of_memory("the function library index");
    for (size_t i = 0; i < lib->n_function; i++) {
        const Tensorflow__FunctionDef *f = lib->function[i];
        if (!f || !f->signature || !f->signature->name || !f->signature->name[0]) continue;
        int rc = zf_strmap_insert(map, f->signature->name, 1, NULL);
        if (rc == -ENOMEM) {
            zf_strmap_destroy(&map);
            return zf_out_of_memory("the function library index");
        }
    }
    *out = map;
    return ZF_STATUS_OK;
}

/* --- construction ------------------------------------------------------- */

/* How many nodes (inputs) ahead the load loops hash and prefetch, so the
 * memory waits of consecutive nodes (lookups) overlap. */
#define S_NODE_AHEAD 16
#define S_REF_AHEAD  32

/* A name with its length and hash: a node's name waiting to be inserted
 * into the name table, or an input's node name waiting to be resolved. */
typedef struct s_name {
    const char *name; /* for an input: NULL once resolved */
    uint32_t len;
    uint32_t hash;
} s_name_t;

/* The inputs' names are kept in what becomes the out-edge array. */
_Static_assert(sizeof(s_name_t) <= sizeof(zf_edge_t), "s_name_t must fit in an edge slot");

/* Recently loaded nodes by the low bits of their name's hash. Inputs mostly
 * name nodes just before them, and those resolve here, from the cache,
 * instead of through a random probe of the big name table. */
#define S_RECENT 64

typedef struct s_recent {
    s_name_t name;
    int node; /* -1: empty */
} s_recent_t;

/* The state of one load. */
typedef struct s_loader {
    zf_graph_t *g;
    zf_strmap_t *op_map;
    const zf_strmap_t *functions;
    s_name_t *refs; /* one per input, in input order, in slots of sizeof(zf_edge_t) */
    size_t cap;     /* of refs and g->in_edges */
    s_name_t pending[S_NODE_AHEAD];
    s_recent_t recent[S_RECENT];
} s_loader_t;

static inline void s_prefetch(const void *p)
{
#if defined(__GNUC__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
}

/* Prefetches what loading a node reads, in three steps so each step finds
 * the previous one's data arrived: the NodeDef of node i + S_NODE_AHEAD, the
 * name, op and input array of node i + S_NODE_AHEAD / 2, and the first and
 * last input strings of node i + S_NODE_AHEAD / 4. */
static inline void s_prefetch_node(const zf_graph_t *g, int i)
{
    const Tensorflow__NodeDef *const *nodes = (const Tensorflow__NodeDef *const *)g->gd->node;
    const Tensorflow__NodeDef *a;
    if (i + S_NODE_AHEAD < g->n) s_prefetch(nodes[i + S_NODE_AHEAD]);
    if (i + S_NODE_AHEAD / 2 < g->n && (a = nodes[i + S_NODE_AHEAD / 2]) != NULL) {
        s_prefetch(a->name);
        s_prefetch(a->op);
        s_prefetch(a->input);
    }
    if (i + S_NODE_AHEAD / 4 < g->n && (a = nodes[i + S_NODE_AHEAD / 4]) != NULL &&
        a->n_input > 0 && a->input) {
        s_prefetch(a->input[0]);
        s_prefetch(a->input[a->n_input - 1]);
    }
}

/* The per-node ints, and the name table: a new one, or a copy of old's
 * with room for the nodes g adds to it. */
static zf_status_t s_alloc_nodes(zf_graph_t *g, const zf_graph_t *old)
{
    size_t n = (size_t)g->n;
    g->ints = malloc((5 * n + 2) * sizeof *g->ints);
    g->names = old ? zf_strmap_clone(old->names, n - (size_t)old->n) : zf_strmap_new(n, 0);
    if (!g->ints || !g->names) return zf_out_of_memory("the node table");
    g->in_off = g->ints;
    g->out_off = g->in_off + n + 1;
    g->n_data = g->out_off + n + 1;
    g->op_of = g->n_data + n;
    g->topo = g->op_of + n;
    g->in_off[0] = 0;
    return ZF_STATUS_OK;
}

/* Makes room for more inputs in refs and in_edges (doubling). */
static zf_status_t s_reserve_inputs(s_loader_t *L, size_t used, size_t more)
{
    if (used + more <= L->cap) return ZF_STATUS_OK;
    if (used + more > INT_MAX / 2)
        return zf_invalid_argument("Graph has too many inputs (> %d)", INT_MAX / 2);
    size_t cap = L->cap ? 2 * L->cap : 1024;
    if (cap < used + more) cap = used + more;
    zf_edge_t *edges = realloc(L->g->in_edges, cap * sizeof *edges);
    if (!edges) return zf_out_of_memory("the edge table");
    L->g->in_edges = edges;
    s_name_t *refs = realloc(L->refs, cap * sizeof(zf_edge_t));
    if (!refs) return zf_out_of_memory("the edge table");
    L->refs = refs;
    L->cap = cap;
    return ZF_STATUS_OK;
}

/* Parses node i's inputs into in-edges and refs. An input naming a recently
 * loaded node is resolved at once; the others get their source later. */
static zf_status_t s_parse_inputs(s_loader_t *L, int i, const Tensorflow__NodeDef *node)
{
    zf_graph_t *g = L->g;
    size_t base = (size_t)g->in_off[i];
    ZF_TRY(s_reserve_inputs(L, base, node->n_input));
    int n_data = 0;
    bool seen_control = false;
    for (size_t j = 0; j < node->n_input; j++) {
        const char *in = s_str(node->input[j]);
        const char *name;
        size_t len;
        int port;
        s_tn_error_t err = s_tn_scan(in, strlen(in), &name, &len, &port);
        if (err == S_TN_EMPTY)
            return zf_invalid_argument("Node '%s': input %zu is empty", node->name, j);
        if (err == S_TN_OK && len > UINT32_MAX) err = S_TN_TOO_LONG;
        if (err != S_TN_OK)
            return zf_invalid_argument("Node '%s': malformed input '%s': %s", node->name, in,
                                       s_tn_reason(err));
        if (port == ZF_CONTROL_PORT) {
            seen_control = true;
        } else if (seen_control) {
            return zf_invalid_argument(
                "Node '%s': Control dependencies must come after regular dependencies", node->name);
        }
        int dst_port = port == ZF_CONTROL_PORT ? ZF_CONTROL_PORT : n_data++;
        uint32_t hash = (uint32_t)zf_strmap_hash(name, len);
        const s_recent_t *c = &L->recent[hash & (S_RECENT - 1)];
        int src = -1;
        if (c->node >= 0 && c->name.hash == hash && c->name.len == len &&
            memcmp(c->name.name, name, len) == 0)
            src = c->node;
        g->in_edges[base + j] = (zf_edge_t){src, port, i, dst_port};
        L->refs[base + j] = (s_name_t){src >= 0 ? NULL : name, (uint32_t)len, hash};
    }
    g->n_data[i] = n_data;
    g->in_off[i + 1] = (int)(base + node->n_input);
    return ZF_STATUS_OK;
}

/* Checks node i's name and op, finds its op and parses its inputs; hashes
 * its name into *p for insertion a few nodes later. */
static zf_status_t s_load_node(s_loader_t *L, int i, s_name_t *p)
{
    zf_graph_t *g = L->g;
    const Tensorflow__NodeDef *node = g->gd->node[i];
    const char *name = node ? s_str(node->name) : "";
    size_t len = strlen(name);
    if (len == 0) return zf_invalid_argument("Node #%d has an empty name", i);
    if (!node->op || !node->op[0]) return zf_invalid_argument("Node '%s' has an empty op", name);
    if (len > UINT32_MAX) return zf_invalid_argument("Node #%d has a name of %zu bytes", i, len);
    int k = s_op_index(g, L->op_map, L->functions, node->op);
    if (k < 0) return zf_out_of_memory("the op table");
    g->op_of[i] = k;
    g->ops[k].count++;
    if (zf_op_num_default_attrs(g->ops[k].def) > 0)
        ZF_TRY(zf_op_add_default_attrs(g->ops[k].def, (Tensorflow__NodeDef *)node, NULL));
    *p = (s_name_t){name, (uint32_t)len, (uint32_t)zf_strmap_hash(name, len)};
    L->recent[p->hash & (S_RECENT - 1)] = (s_recent_t){*p, i};
    return s_parse_inputs(L, i, node);
}

static zf_status_t s_insert_name(zf_graph_t *g, int i, const s_name_t *p)
{
    uintptr_t other;
    int rc = zf_strmap_insert_hashed(g->names, p->name, p->len, p->hash, (uintptr_t)i, &other);
    if (rc == -EEXIST)
        return zf_invalid_argument("Node '%s' is not unique (nodes #%d and #%d)", p->name,
                                   (int)other, i);
    if (rc != 0) return zf_out_of_memory("the node name table");
    return ZF_STATUS_OK;
}

/* Pass 1, the only one over the NodeDefs: checks and indexes every node and
 * parses its inputs. A node's name goes into the table S_NODE_AHEAD nodes
 * after its slot was prefetched. */
static zf_status_t s_load_nodes(s_loader_t *L, int first)
{
    zf_graph_t *g = L->g;
    if (first > 0) { /* an extension: few nodes, no prefetching pipeline */
        for (int i = first; i < g->n; i++) {
            s_name_t p;
            ZF_TRY(s_load_node(L, i, &p));
            ZF_TRY(s_insert_name(g, i, &p));
        }
        g->num_edges = g->in_off[g->n];
        return ZF_STATUS_OK;
    }
    for (int i = 0; i < g->n; i++) {
        s_prefetch_node(g, i);
        s_name_t *p = &L->pending[i % S_NODE_AHEAD];
        if (i >= S_NODE_AHEAD) ZF_TRY(s_insert_name(g, i - S_NODE_AHEAD, p));
        ZF_TRY(s_load_node(L, i, p));
        zf_strmap_prefetch(g->names, p->hash);
    }
    int last = g->n > S_NODE_AHEAD ? g->n - S_NODE_AHEAD : 0;
    for (int i = last; i < g->n; i++) ZF_TRY(s_insert_name(g, i, &L->pending[i % S_NODE_AHEAD]));
    g->num_edges = g->in_off[g->n];
    return ZF_STATUS_OK;
}

static const char *s_plural(int n)
{
    return n == 1 ? "" : "s";
}

/* Whether input j of node names a node that is not in the graph. */
static bool s_input_missing(const zf_graph_t *g, const Tensorflow__NodeDef *node, size_t j)
{
    const char *name, *in = s_str(node->input[j]);
    size_t len;
    int port;
    if (s_tn_scan(in, strlen(in), &name, &len, &port) != S_TN_OK) return false;
    return !zf_strmap_get_n(g->names, name, len, NULL);
}

/* "Incomplete graph, missing N inputs for X: 'a', 'b'" for node i. */
static zf_status_t s_missing_inputs_error(const zf_graph_t *g, int i)
{
    const Tensorflow__NodeDef *node = g->gd->node[i];
    int missing = 0, shown = 0;
    for (size_t j = 0; j < node->n_input; j++) missing += s_input_missing(g, node, j);
    s_msg_t m;
    if (!s_msg_open(&m)) return zf_out_of_memory("an error message");
    fprintf(m.f, "Incomplete graph, missing %d inputs for %s:", missing, node->name);
    for (size_t j = 0; j < node->n_input && shown < 10; j++) {
        if (!s_input_missing(g, node, j)) continue;
        fprintf(m.f, "%s '%s'", shown++ ? "," : "", node->input[j]);
    }
    if (missing > shown) fprintf(m.f, ", ...");
    return s_msg_status(&m);
}

/* Pass 2: resolves every ref to its source node, prefetching table slots,
 * then the keys in them, ahead of the lookups; counts out-edges per source
 * in out_off[src + 1] and notes the highest data port read from each. */
static zf_status_t s_resolve_inputs(zf_graph_t *g, const s_name_t *refs, int *max_port)
{
    int ne = g->num_edges;
    memset(g->out_off, 0, ((size_t)g->n + 1) * sizeof *g->out_off);
    for (int i = 0; i < g->n; i++) max_port[i] = -1;
    for (int k = 0; k < ne; k++) {
        if (k + S_REF_AHEAD < ne && refs[k + S_REF_AHEAD].name)
            zf_strmap_prefetch(g->names, refs[k + S_REF_AHEAD].hash);
        if (k + S_REF_AHEAD / 2 < ne && refs[k + S_REF_AHEAD / 2].name)
            zf_strmap_prefetch_key(g->names, refs[k + S_REF_AHEAD / 2].hash);
        const s_name_t *r = &refs[k];
        zf_edge_t *e = &g->in_edges[k];
        if (r->name) {
            uintptr_t found;
            if (!zf_strmap_get_hashed(g->names, r->name, r->len, r->hash, &found))
                return s_missing_inputs_error(g, e->dst);
            e->src = (int)found;
        }
        int src = e->src;
        g->out_off[src + 1]++;
        if (e->src_port > max_port[src]) max_port[src] = e->src_port;
    }
    return ZF_STATUS_OK;
}

/* Pass 3: the out-edges in CSR order, written over the resolved refs by
 * walking the in-edges in order with a cursor per source. */
static void s_fill_out_edges(zf_graph_t *g, s_loader_t *L, int *cursor)
{
    for (int i = 0; i < g->n; i++) g->out_off[i + 1] += g->out_off[i];
    memcpy(cursor, g->out_off, (size_t)g->n * sizeof *cursor);
    g->out_edges = (zf_edge_t *)(void *)L->refs;
    L->refs = NULL;
    for (int k = 0; k < g->num_edges; k++) {
        const zf_edge_t *e = &g->in_edges[k];
        g->out_edges[cursor[e->src]++] = *e;
    }
}

/* Takes over old's nodes 0..old->n into g (an extension of it): their
 * per-node ints, ops and in-edges, the edges resolved already. */
static zf_status_t s_take_old(s_loader_t *L, const zf_graph_t *old)
{
    zf_graph_t *g = L->g;
    int n_old = old->n;
    memcpy(g->in_off, old->in_off, ((size_t)n_old + 1) * sizeof *g->in_off);
    memcpy(g->n_data, old->n_data, (size_t)n_old * sizeof *g->n_data);
    memcpy(g->op_of, old->op_of, (size_t)n_old * sizeof *g->op_of);
    memcpy(g->topo, old->topo, (size_t)n_old * sizeof *g->topo);
    g->ops = malloc(((size_t)old->cap_ops + 1) * sizeof *g->ops);
    if (!g->ops) return zf_out_of_memory("the op table");
    if (old->num_ops > 0) memcpy(g->ops, old->ops, (size_t)old->num_ops * sizeof *g->ops);
    g->num_ops = old->num_ops;
    g->cap_ops = old->cap_ops;
    for (int k = 0; k < g->num_ops; k++)
        if (zf_strmap_insert(L->op_map, g->ops[k].name, (uintptr_t)k, NULL) != 0)
            return zf_out_of_memory("the op table");
    size_t ne = (size_t)old->num_edges;
    ZF_TRY(s_reserve_inputs(L, 0, ne + 2 * (size_t)(g->n - n_old)));
    if (ne > 0) memcpy(g->in_edges, old->in_edges, ne * sizeof *g->in_edges);
    for (size_t k = 0; k < ne; k++) L->refs[k] = (s_name_t){NULL, 0, 0}; /* resolved */
    return ZF_STATUS_OK;
}

/* Builds nodes and edges — of every node, or, when old is not NULL, of
 * the nodes g adds to it (old's taken over). max_port and cursor are
 * scratch arrays of n ints; max_port comes back filled. */
static zf_status_t s_load(zf_graph_t *g, const zf_graph_t *old, const zf_strmap_t *functions,
                          int *max_port, int *cursor)
{
    s_loader_t L = {.g = g, .functions = functions};
    for (int k = 0; k < S_RECENT; k++) L.recent[k].node = -1;
    L.op_map = zf_strmap_new(64, 0);
    zf_status_t s = L.op_map ? ZF_STATUS_OK : zf_out_of_memory("the op table");
    if (zf_ok(s) && old) s = s_take_old(&L, old);
    /* Room for two inputs per node up front; more doubles. */
    if (zf_ok(s) && !old) s = s_reserve_inputs(&L, 0, 2 * (size_t)g->n);
    if (zf_ok(s)) s = s_load_nodes(&L, old ? old->n : 0);
    zf_strmap_destroy(&L.op_map);
    if (zf_ok(s)) s = s_resolve_inputs(g, L.refs, max_port);
    if (zf_ok(s)) s_fill_out_edges(g, &L, cursor);
    free(L.refs);
    return s;
}

/* Checks each data edge's output index against the source op's arity, where
 * the op registry can tell it from the source's attrs. */
static zf_status_t s_check_ports(const zf_graph_t *g, const int *max_port)
{
    for (int i = 0; i < g->n; i++) {
        const zf_op_def_t *def = g->ops[g->op_of[i]].def;
        if (max_port[i] < 0 || !def) continue;
        /* Reading output 0 of an op with output arguments is taken as fine
         * without resolving its attrs: that is almost every edge, and only
         * list outputs that come out empty would make it wrong. */
        if (max_port[i] == 0 && zf_op_num_output_args(def) > 0) continue;
        int nout = 0;
        zf_status_t s = zf_op_output_types(def, g->gd->node[i], NULL, 0, &nout);
        if (!zf_ok(s)) {
            /* The attrs do not settle the arity; later stages report it. */
            zf_status_clear(&s);
            continue;
        }
        if (max_port[i] < nout) continue;
        for (int k = g->out_off[i]; k < g->out_off[i + 1]; k++) {
            const zf_edge_t *e = &g->out_edges[k];
            if (e->src_port < nout) continue;
            const Tensorflow__NodeDef *dst = g->gd->node[e->dst];
            const Tensorflow__NodeDef *src = g->gd->node[i];
            return zf_invalid_argument(
                "Node '%s': input '%s' refers to output %d of '%s' (%s), which has %d output%s",
                dst->name, s_str(dst->input[e->dst_port]), e->src_port, src->name, src->op, nout,
                s_plural(nout));
        }
    }
    return ZF_STATUS_OK;
}

/* --- topological order -------------------------------------------------- */

static void s_heap_push(int *heap, int *hn, int v)
{
    int k = (*hn)++;
    while (k > 0) {
        int parent = (k - 1) / 2;
        if (heap[parent] <= v) break;
        heap[k] = heap[parent];
        k = parent;
    }
    heap[k] = v;
}

static int s_heap_pop(int *heap, int *hn)
{
    int top = heap[0];
    int v = heap[--(*hn)];
    int k = 0, n = *hn;
    for (;;) {
        int c = 2 * k + 1;
        if (c >= n) break;
        if (c + 1 < n && heap[c + 1] < heap[c]) c++;
        if (v <= heap[c]) break;
        heap[k] = heap[c];
        k = c;
    }
    if (n > 0) heap[k] = v;
    return top;
}

static inline bool s_is_back_edge(const zf_graph_t *g, const zf_edge_t *e)
{
    return g->ops[g->op_of[e->src]].back_edge_source;
}

/* Reports a cycle among the nodes Kahn's algorithm could not order (those
 * with indeg[] != -1): walks back along unordered in-edges from the first
 * such node until a node repeats. path[] has room for n entries. */
static zf_status_t s_cycle_error(const zf_graph_t *g, int *indeg, int *path)
{
    int v = 0;
    while (indeg[v] == -1) v++;
    int len = 0, start = -1;
    while (start < 0) {
        path[len] = v;
        indeg[v] = -(len + 2);
        len++;
        int next = -1;
        for (int k = g->in_off[v]; k < g->in_off[v + 1] && next < 0; k++) {
            const zf_edge_t *e = &g->in_edges[k];
            if (!s_is_back_edge(g, e) && indeg[e->src] != -1) next = e->src;
        }
        if (next < 0) return zf_internal("cycle search lost its way at node %d", v);
        if (indeg[next] < -1) start = -indeg[next] - 2;
        v = next;
    }
    /* path[start .. len) runs against the edges: path[k + 1] -> path[k], and
     * path[start] -> path[len - 1]. Print it forwards from its lowest index. */
    int cycle_len = len - start, lowest = len - 1;
    for (int k = start; k < len; k++)
        if (path[k] < path[lowest]) lowest = k;
    s_msg_t m;
    if (!s_msg_open(&m)) return zf_out_of_memory("an error message");
    const char *first = g->gd->node[path[lowest]]->name;
    fprintf(m.f, "Graph contains a cycle involving node '%s': ", first);
    int shown = 0;
    for (int k = lowest; shown < cycle_len && shown < 16; shown++) {
        fprintf(m.f, "%s -> ", g->gd->node[path[k]]->name);
        k = k == start ? len - 1 : k - 1;
    }
    if (cycle_len > shown) fprintf(m.f, "... -> ");
    fprintf(m.f, "%s", first);
    return s_msg_status(&m);
}

/* Kahn's algorithm, lowest ready index first: a cursor sweeps the nodes in
 * index order and a min-heap holds nodes that became ready behind it, so an
 * already sorted graph never touches the heap. indeg and heap are scratch
 * arrays of n ints. Nodes before first are in g->topo already (an
 * extension's old nodes, which never read a new one). Once the cursor has
 * passed the old nodes, every one of them has been emitted (they read only
 * each other), so sorting the new nodes after them gives the order sorting
 * the whole graph gives. */
static zf_status_t s_sort(zf_graph_t *g, int first, int *indeg, int *heap)
{
    int n = g->n;
    for (int v = 0; v < first; v++) indeg[v] = -1; /* ordered already */
    for (int v = first; v < n; v++) {
        int d = 0;
        for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++)
            d += !s_is_back_edge(g, &g->in_edges[k]) && g->in_edges[k].src >= first;
        indeg[v] = d;
    }
    int cursor = first, hn = 0, emitted = first;
    for (;;) {
        while (cursor < n && indeg[cursor] != 0) cursor++;
        int v;
        if (hn > 0 && (cursor >= n || heap[0] < cursor))
            v = s_heap_pop(heap, &hn);
        else if (cursor < n)
            v = cursor++;
        else
            break;
        g->topo[emitted++] = v;
        indeg[v] = -1;
        if (g->ops[g->op_of[v]].back_edge_source) continue;
        for (int k = g->out_off[v]; k < g->out_off[v + 1]; k++) {
            int w = g->out_edges[k].dst;
            if (--indeg[w] == 0 && w < cursor) s_heap_push(heap, &hn, w);
        }
    }
    if (emitted < n) return s_cycle_error(g, indeg, heap);
    return ZF_STATUS_OK;
}

/* --- graph -------------------------------------------------------------- */

static zf_status_t s_list_unsupported(zf_graph_t *g)
{
    int count = 0, unknown = 0;
    for (int k = 0; k < g->num_ops; k++) {
        if (g->ops[k].support != ZF_NODE_SUPPORTED) count += g->ops[k].count;
        if (g->ops[k].support == ZF_NODE_UNKNOWN_OP) unknown++;
    }
    g->unsupported = malloc(((size_t)count + 1) * sizeof *g->unsupported);
    g->unknown_ops = malloc(((size_t)unknown + 1) * sizeof *g->unknown_ops);
    if (!g->unsupported || !g->unknown_ops) return zf_out_of_memory("the unsupported node list");
    for (int k = 0; k < g->num_ops; k++)
        if (g->ops[k].support == ZF_NODE_UNKNOWN_OP) g->unknown_ops[g->num_unknown_ops++] = k;
    if (count == 0) return ZF_STATUS_OK;
    for (int i = 0; i < g->n; i++)
        if (g->ops[g->op_of[i]].support != ZF_NODE_SUPPORTED)
            g->unsupported[g->num_unsupported++] = i;
    return ZF_STATUS_OK;
}

static zf_status_t s_build(zf_graph_t *g, const zf_graph_t *old)
{
    zf_strmap_t *functions = NULL;
    ZF_TRY(s_library_functions(g->gd, &functions, &g->num_functions));
    int *scratch = malloc((2 * (size_t)g->n + 1) * sizeof *scratch);
    zf_status_t s = scratch ? s_alloc_nodes(g, old) : zf_out_of_memory("graph scratch space");
    int *max_port = scratch, *heap = scratch + g->n;
    if (zf_ok(s)) s = s_load(g, old, functions, max_port, heap);
    zf_strmap_destroy(&functions);
    if (zf_ok(s)) s = s_check_ports(g, max_port);
    if (zf_ok(s)) s = s_sort(g, old ? old->n : 0, max_port, heap);
    free(scratch);
    ZF_TRY(s);
    return s_list_unsupported(g);
}

/* The graph of gd, built whole or (old not NULL) as old's extension. */
static zf_status_t s_new(Tensorflow__GraphDef *gd, const zf_graph_t *old, zf_graph_t **out)
{
    *out = NULL;
    if (gd->n_node > (size_t)INT_MAX / 8)
        return zf_invalid_argument("Graph has too many nodes (%zu)", gd->n_node);
    zf_graph_t *g = calloc(1, sizeof *g);
    if (!g) return zf_out_of_memory("a graph");
    g->gd = gd;
    g->n = (int)gd->n_node;
    zf_status_t s = s_build(g, old);
    if (!zf_ok(s)) {
        zf_graph_destroy(&g);
        return s;
    }
    *out = g;
    return ZF_STATUS_OK;
}

zf_status_t zf_graph_new_from_graphdef(Tensorflow__GraphDef *gd, zf_graph_t **out)
{
    assert(gd && out);
    return s_new(gd, NULL, out);
}

zf_status_t zf_graph_extend(const zf_graph_t *old, Tensorflow__GraphDef *gd, zf_graph_t **out)
{
    assert(old && gd && out);
    *out = NULL;
    bool extends = gd->n_node >= (size_t)old->n && gd->library == old->gd->library;
    for (int i = 0; extends && i < old->n; i++) extends = gd->node[i] == old->gd->node[i];
    if (!extends)
        return zf_invalid_argument("zf_graph_extend: the GraphDef does not start with the "
                                   "graph's own nodes and library");
    return s_new(gd, old, out);
}

void zf_graph_adopt_graphdef(zf_graph_t *g, Tensorflow__GraphDef **gd_p)
{
    assert(g && gd_p && *gd_p == g->gd && !g->owned);
    g->owned = *gd_p;
    *gd_p = NULL;
}

Tensorflow__GraphDef *zf_graph_release_graphdef(zf_graph_t *g)
{
    Tensorflow__GraphDef *gd = g->owned;
    g->owned = NULL;
    return gd;
}

void zf_graph_destroy(zf_graph_t **g_p)
{
    if (!g_p || !*g_p) return;
    zf_graph_t *g = *g_p;
    zf_strmap_destroy(&g->names);
    free(g->ints);
    free(g->in_edges);
    free(g->out_edges);
    free(g->ops);
    free(g->unsupported);
    free(g->unknown_ops);
    if (g->owned) protobuf_c_message_free_unpacked(&g->owned->base, NULL);
    free(g);
    *g_p = NULL;
}

bool zf_op_is(const char *op, const char *name)
{
    if (strncmp(op, "Ref", 3) == 0 && strcmp(op + 3, name) == 0) return true;
    return strcmp(op, name) == 0;
}
