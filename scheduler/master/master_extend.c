/* ExtendSession: new nodes (and functions) added to a session's graph,
 * the old ones and their placement untouched (scheduler/master/master.h).
 *
 * Design note. The session's graph grows over a GraphDef holding the old
 * NodeDefs themselves plus copies of the new ones, and its index is the
 * old one copied and extended by the new nodes (zf_graph_extend), so an
 * extend of k nodes onto n copies n pointers and the old index's tables,
 * and reads k nodes; it never copies or parses the old nodes. An extension that brings functions or
 * functional ops, or whose node calls a function of the session's library
 * by name, takes the slow path: the whole graph copied and lowered again
 * over the session's library, as CreateSession lowers it. The session
 * keeps that library apart (s->library), since the lowered graph holds
 * only what its nodes still reach, usually nothing. The new graph replaces the old one
 * under the master's lock, where steps read it to check their feeds; plan
 * building reads it under the session's build lock, which the extend
 * holds throughout. The placement made so far is carried over node by
 * node, the new nodes unplaced: the next plan places them around it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/op_registry.h"
#include "common/proto_util.h"
#include "scheduler/graph/functions.h"
#include "scheduler/master/master_internal.h"

#define S_LOG "master"

/* The checks before anything is built; *bytes is the extension's
 * serialized size. own: the scheduler's own extension (a job's checkpoint
 * graph), which the bounds on a client's graphs do not count. Under
 * build. */
static zf_status_t s_check(zf_master_t *m, const zf__master_session_t *s,
                           const Zflow__ExtendSession *req, bool own, int64_t *bytes)
{
    if (s->graph_version != req->current_graph_version)
        return zf_status_new(ZF_ABORTED,
                             "Current version is %" PRId64 " but caller expected %" PRId64 ".",
                             s->graph_version, req->current_graph_version);
    const Tensorflow__GraphDef *ext = req->graph, *cur = zf_graph_graphdef(s->graph);
    ZF_TRY(zf__master_check_graph(m, ext, "ExtendSession", bytes));
    pthread_mutex_lock(&m->mu);
    int64_t max_nodes = m->limits.max_graph_nodes, max_bytes = m->limits.max_graph_bytes;
    pthread_mutex_unlock(&m->mu);
    int64_t total = (int64_t)cur->n_node + (int64_t)ext->n_node;
    if (!own && total > max_nodes)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "ExtendSession: the graph would have %" PRId64
                             " nodes; this scheduler takes at most %" PRId64
                             " (zflow-scheduler --max-graph-nodes)",
                             total, max_nodes);
    if (!own && s->graph_bytes + *bytes > max_bytes)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "ExtendSession: the session's graph is %" PRId64
                             " bytes serialized and the extension %" PRId64
                             " more; this scheduler takes at most %" PRId64
                             " (zflow-scheduler --max-graph-bytes)",
                             s->graph_bytes, *bytes, max_bytes);
    if (ext->versions && cur->versions && ext->versions->producer != cur->versions->producer)
        return zf_invalid_argument("Versions of graph and extension are different: producer %d "
                                   "and %d",
                                   (int)cur->versions->producer, (int)ext->versions->producer);
    for (size_t i = 0; i < ext->n_node; i++) {
        const char *name = ext->node[i] && ext->node[i]->name ? ext->node[i]->name : "";
        if (zf_graph_find_node(s->graph, name) >= 0)
            return zf_invalid_argument("GraphDef argument to Extend includes node '%s', which "
                                       "was created by a previous call to Create or Extend in "
                                       "this session.",
                                       name);
    }
    return ZF_STATUS_OK;
}

/* The fast path's GraphDef: cur's fields and NodeDefs (shared, not
 * copied) followed by copies of ext's nodes. On failure *out may hold a
 * part of it, for s_shell_free(). */
static zf_status_t s_shell(const Tensorflow__GraphDef *cur, const Tensorflow__GraphDef *ext,
                           Tensorflow__GraphDef **out)
{
    *out = NULL;
    Tensorflow__GraphDef *gd = malloc(sizeof *gd);
    Tensorflow__NodeDef **nodes = malloc((cur->n_node + ext->n_node + 1) * sizeof *nodes);
    if (!gd || !nodes) {
        free(gd);
        free(nodes);
        return zf_out_of_memory("ExtendSession");
    }
    *gd = *cur;
    if (cur->n_node > 0) memcpy(nodes, cur->node, cur->n_node * sizeof *nodes);
    gd->node = nodes;
    gd->n_node = cur->n_node;
    *out = gd;
    for (size_t i = 0; i < ext->n_node; i++) {
        ProtobufCMessage *c = NULL;
        ZF_TRY(zf_proto_clone(&ext->node[i]->base, "ExtendSession: a node", &c));
        gd->node[gd->n_node++] = (Tensorflow__NodeDef *)c;
    }
    return ZF_STATUS_OK;
}

/* Frees a shell and the nodes it added past n_shared. */
static void s_shell_free(Tensorflow__GraphDef *gd, size_t n_shared)
{
    if (!gd) return;
    for (size_t i = n_shared; i < gd->n_node; i++)
        protobuf_c_message_free_unpacked(&gd->node[i]->base, NULL);
    free(gd->node);
    free(gd);
}

/* Whether function f is in lib, defined the same; *clash when it is there
 * defined otherwise. */
static bool s_has_function(const Tensorflow__FunctionDefLibrary *lib,
                           const Tensorflow__FunctionDef *f, bool *clash)
{
    *clash = false;
    const char *name = f->signature ? f->signature->name : NULL;
    for (size_t i = 0; lib && name && i < lib->n_function; i++) {
        const Tensorflow__FunctionDef *g = lib->function[i];
        if (!g->signature || !g->signature->name || strcmp(g->signature->name, name) != 0) continue;
        size_t a = protobuf_c_message_get_packed_size(&f->base);
        size_t b = protobuf_c_message_get_packed_size(&g->base);
        uint8_t *pa = malloc(a + 1), *pb = malloc(b + 1);
        bool same = pa && pb && a == b;
        if (same) {
            protobuf_c_message_pack(&f->base, pa);
            protobuf_c_message_pack(&g->base, pb);
            same = memcmp(pa, pb, a) == 0;
        }
        free(pa);
        free(pb);
        *clash = !same;
        return same;
    }
    return false;
}

/* The slow path's GraphDef: cur's nodes and ext's over the session's
 * library (session_lib, may be NULL) with ext's functions added (a
 * different one of the same name refused), lowered. *lib_out gets that
 * library, the session's from then on (NULL: none). */
static zf_status_t s_merged(const Tensorflow__GraphDef *cur,
                            const Tensorflow__FunctionDefLibrary *session_lib,
                            const Tensorflow__GraphDef *ext, Tensorflow__GraphDef **out,
                            Tensorflow__FunctionDefLibrary **lib_out)
{
    *out = NULL;
    *lib_out = NULL;
    ProtobufCMessage *c = NULL;
    ZF_TRY(zf_proto_clone(&cur->base, "ExtendSession: the graph", &c));
    Tensorflow__GraphDef *gd = (Tensorflow__GraphDef *)c;
    zf_status_t st = ZF_STATUS_OK;
    /* what cur's nodes still reach is part of the session's library */
    if (gd->library) protobuf_c_message_free_unpacked(&gd->library->base, NULL);
    gd->library = NULL;
    if (session_lib) {
        st = zf_proto_clone(&session_lib->base, "ExtendSession: the function library", &c);
        gd->library = (Tensorflow__FunctionDefLibrary *)c;
    }
    Tensorflow__NodeDef **nodes = realloc(gd->node, (gd->n_node + ext->n_node + 1) * sizeof *nodes);
    if (!nodes)
        st = zf_out_of_memory("ExtendSession");
    else
        gd->node = nodes;
    for (size_t i = 0; zf_ok(st) && i < ext->n_node; i++) {
        st = zf_proto_clone(&ext->node[i]->base, "ExtendSession: a node", &c);
        if (zf_ok(st)) gd->node[gd->n_node++] = (Tensorflow__NodeDef *)c;
    }
    const Tensorflow__FunctionDefLibrary *lib = ext->library;
    for (size_t i = 0; zf_ok(st) && lib && i < lib->n_function; i++) {
        bool clash = false;
        if (s_has_function(gd->library, lib->function[i], &clash)) continue;
        if (clash) {
            st = zf_invalid_argument("Cannot add function '%s' because a different function with "
                                     "the same name already exists.",
                                     lib->function[i]->signature->name);
            break;
        }
        if (!gd->library) {
            gd->library = malloc(sizeof *gd->library);
            if (gd->library) tensorflow__function_def_library__init(gd->library);
        }
        Tensorflow__FunctionDef **fs =
            gd->library ? realloc(gd->library->function, (gd->library->n_function + 1) * sizeof *fs)
                        : NULL;
        if (fs) gd->library->function = fs;
        st = fs ? zf_proto_clone(&lib->function[i]->base, "ExtendSession: a function", &c)
                : zf_out_of_memory("ExtendSession");
        if (zf_ok(st))
            gd->library->function[gd->library->n_function++] = (Tensorflow__FunctionDef *)c;
    }
    Tensorflow__GraphDef *lowered = NULL;
    if (zf_ok(st)) st = zf_functions_lower(gd, &lowered);
    if (lowered) { /* else gd's library holds no function */
        *lib_out = gd->library;
        gd->library = NULL;
        protobuf_c_message_free_unpacked(&gd->base, NULL);
        gd = lowered;
    }
    if (!zf_ok(st)) {
        protobuf_c_message_free_unpacked(&gd->base, NULL);
        if (*lib_out) protobuf_c_message_free_unpacked(&(*lib_out)->base, NULL);
        *lib_out = NULL;
        return st;
    }
    *out = gd;
    return ZF_STATUS_OK;
}

/* Whether a node of ext calls a function of lib by its op's name. A
 * registered op never names one (such a function is refused), so only
 * unknown ops are looked for. */
static bool s_calls_library(const Tensorflow__FunctionDefLibrary *lib,
                            const Tensorflow__GraphDef *ext)
{
    for (size_t i = 0; lib && i < ext->n_node; i++) {
        const char *op = ext->node[i]->op;
        if (zf_op_lookup(op)) continue;
        for (size_t j = 0; j < lib->n_function; j++) {
            const Tensorflow__OpDef *sig = lib->function[j]->signature;
            if (sig && sig->name && strcmp(sig->name, op) == 0) return true;
        }
    }
    return false;
}

/* The session's placement carried over to graph g: old node i is new node
 * i on the fast path, found by name otherwise; new nodes unplaced (-1).
 * NULL when there is no placement yet (or out of memory: the graph is then
 * placed again as a whole). */
static int *s_placement_carry(const zf__master_session_t *s, const zf_graph_t *g, bool same_order)
{
    if (!s->placed_on) return NULL;
    int n = zf_graph_num_nodes(g), n_old = zf_graph_num_nodes(s->graph);
    int *on = malloc(((size_t)n + 1) * sizeof *on);
    for (int i = 0; on && i < n; i++) {
        int old = same_order ? (i < n_old ? i : -1)
                             : zf_graph_find_node(s->graph, zf_graph_node_name(g, i));
        on[i] = old >= 0 ? s->placed_on[old] : -1;
    }
    return on;
}

/* Extends s (held, under build). */
static zf_status_t s_extend(zf_master_t *m, zf__master_session_t *s,
                            const Zflow__ExtendSession *req, bool own, int64_t *new_version)
{
    int64_t bytes = 0;
    ZF_TRY(s_check(m, s, req, own, &bytes));
    const Tensorflow__GraphDef *cur = zf_graph_graphdef(s->graph), *ext = req->graph;
    bool fast = !zf_functions_needed(ext) && !s_calls_library(s->library, ext);
    Tensorflow__GraphDef *gd = NULL;
    Tensorflow__FunctionDefLibrary *lib = NULL; /* the slow path's */
    zf_status_t st = fast ? s_shell(cur, ext, &gd) : s_merged(cur, s->library, ext, &gd, &lib);
    zf_graph_t *g = NULL;
    if (zf_ok(st))
        st = fast ? zf_graph_extend(s->graph, gd, &g) : zf_graph_new_from_graphdef(gd, &g);
    if (!zf_ok(st)) {
        if (fast)
            s_shell_free(gd, cur->n_node);
        else if (gd)
            protobuf_c_message_free_unpacked(&gd->base, NULL);
        if (lib) protobuf_c_message_free_unpacked(&lib->base, NULL);
        return zf_status_prefix(st, "ExtendSession");
    }
    if (!fast) {
        if (s->library) protobuf_c_message_free_unpacked(&s->library->base, NULL);
        s->library = lib;
    }
    zf_graph_adopt_graphdef(g, &gd);
    int *placed_on = s_placement_carry(s, g, fast);
    pthread_mutex_lock(&m->mu);
    zf_graph_t *old = s->graph;
    s->graph = g;
    if (s->placed_on) {
        free(s->placed_on);
        s->placed_on = placed_on;
        if (!placed_on) zf__master_placement_free(s);
    }
    s->nodes = zf_graph_num_nodes(g);
    if (!own) s->graph_bytes += bytes;
    *new_version = ++s->graph_version;
    pthread_mutex_unlock(&m->mu);
    if (fast) { /* its NodeDefs, library and versions are the new graph's now */
        Tensorflow__GraphDef *shell = zf_graph_release_graphdef(old);
        free(shell->node);
        free(shell);
    }
    zf_graph_destroy(&old);
    return ZF_STATUS_OK;
}

static zf_status_t s_extend_session(zf_master_t *m, const Zflow__ExtendSession *req, bool own,
                                    int64_t *new_version)
{
    *new_version = 0;
    if (!req || !req->graph) return zf_invalid_argument("ExtendSession without a graph");
    zf_status_t st = ZF_STATUS_OK;
    pthread_mutex_lock(&m->mu);
    zf__master_session_t *s = zf__master_session_find(m, req->session, &st);
    pthread_mutex_unlock(&m->mu);
    if (!s) return st;
    pthread_mutex_lock(&s->build);
    pthread_mutex_lock(&m->mu);
    bool closed = s->closed;
    pthread_mutex_unlock(&m->mu);
    st = closed ? zf_not_found("session '%s' not found", req->session)
                : s_extend(m, s, req, own, new_version);
    pthread_mutex_unlock(&s->build);
    if (zf_ok(st))
        zf_log_info(S_LOG, "extended %s by %zu nodes (version %" PRId64 ")", req->session,
                    req->graph->n_node, *new_version);
    pthread_mutex_lock(&m->mu);
    zf__master_session_unref(m, &s);
    pthread_mutex_unlock(&m->mu);
    return st;
}

zf_status_t zf_master_extend_session(zf_master_t *m, const Zflow__ExtendSession *req,
                                     int64_t *new_version)
{
    return s_extend_session(m, req, false, new_version);
}

zf_status_t zf__master_extend_own(zf_master_t *m, const Zflow__ExtendSession *req,
                                  int64_t *new_version)
{
    return s_extend_session(m, req, true, new_version);
}
