/* The master's sessions: a client's graph, its placement and its cache of
 * plans, reference-counted by the steps that use them. */
#include <assert.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/host_memory.h"
#include "common/log.h"
#include "common/proto_util.h"
#include "common/random.h"
#include "scheduler/graph/functions.h"
#include "scheduler/master/master_internal.h"

#define S_LOG "master"

#define S_TICK_MS 100

int64_t zf__master_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Frees what a session holds but its plans (dropped already): its
 * placement, graph and id. A large graph takes a while, so a closed
 * session is freed without m->mu, where the loop thread's steps wait. */
static void s_free_contents(zf__master_session_t *s)
{
    zf__master_placement_free(s);
    zf__master_pruns_free(s);
    zf_strmap_destroy(&s->plans);
    zf_graph_destroy(&s->graph);
    if (s->library) protobuf_c_message_free_unpacked(&s->library->base, NULL);
    pthread_mutex_destroy(&s->build);
    free(s->client);
    free(s->id);
    free(s);
}

void zf__master_session_free(zf_master_t *m, zf__master_session_t *s)
{
    zf__master_pruns_drop(m, s, "its session was freed");
    zf__master_drop_plans(m, s, NULL);
    s_free_contents(s);
}

/* ---- sessions ------------------------------------------------------------------ */

void zf__master_session_unref(zf_master_t *m, zf__master_session_t **s_p)
{
    zf__master_session_t *s = *s_p;
    *s_p = NULL;
    if (!s) return;
    s->used_ms = zf__master_now_ms(); /* a step ended (or never started) */
    if (--s->refs == 0) zf__master_session_free(m, s);
}

zf__master_session_t *zf__master_session_find(zf_master_t *m, const char *id, zf_status_t *st)
{
    uintptr_t v = 0;
    if (id && zf_strmap_get(m->sessions, id, &v)) {
        zf__master_session_t *s = (zf__master_session_t *)v;
        s->refs++;
        s->used_ms = zf__master_now_ms();
        return s;
    }
    for (int i = 0; id && i < ZF__MASTER_IDLE_IDS; i++) {
        if (!m->idle_closed[i] || strcmp(m->idle_closed[i], id) != 0) continue;
        *st = zf_not_found("Session %s is not found: the scheduler closed it after %" PRId64
                           " ms without a step (zflow-scheduler --session-idle-timeout-ms)",
                           id, m->limits.session_idle_ms);
        return NULL;
    }
    *st = zf_not_found("session '%s' not found", id ? id : "");
    return NULL;
}

int64_t zf__master_step_timeout(const zf_master_t *m, const zf__master_session_t *s, int64_t req_ms)
{
    if (req_ms > 0) return req_ms;
    if (s->timeout_ms > 0) return s->timeout_ms;
    return m->limits.step_timeout_ms > 0 ? m->limits.step_timeout_ms : 0;
}

/* ---- limits ---------------------------------------------------------------------- */

void zf_master_set_limits(zf_master_t *m, const zf_master_limits_t *l)
{
    zf_master_limits_t d = l ? *l : (zf_master_limits_t){0};
    if (d.max_sessions <= 0) d.max_sessions = ZF_MASTER_SESSIONS_MAX;
    if (d.max_sessions_per_client <= 0)
        d.max_sessions_per_client = ZF_MASTER_SESSIONS_PER_CLIENT_MAX;
    if (d.session_idle_ms == 0) d.session_idle_ms = ZF_MASTER_SESSION_IDLE_MS;
    if (d.max_graph_nodes <= 0) d.max_graph_nodes = ZF_MASTER_GRAPH_NODES_MAX;
    if (d.max_graph_bytes <= 0) d.max_graph_bytes = ZF_MASTER_GRAPH_BYTES_MAX;
    if (d.step_timeout_ms == 0) d.step_timeout_ms = ZF_MASTER_STEP_TIMEOUT_MS;
    pthread_mutex_lock(&m->mu);
    m->limits = d;
    pthread_mutex_unlock(&m->mu);
}

zf_status_t zf_master_check_graph(zf_master_t *m, const Tensorflow__GraphDef *gd, const char *what)
{
    int64_t bytes = 0;
    return zf__master_check_graph(m, gd, what, &bytes);
}

zf_status_t zf__master_check_graph(zf_master_t *m, const Tensorflow__GraphDef *gd, const char *what,
                                   int64_t *bytes_out)
{
    *bytes_out = 0;
    if (!gd) return ZF_STATUS_OK;
    pthread_mutex_lock(&m->mu);
    int64_t max_nodes = m->limits.max_graph_nodes, max_bytes = m->limits.max_graph_bytes;
    pthread_mutex_unlock(&m->mu);
    if ((int64_t)gd->n_node > max_nodes)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "%s: the graph has %zu nodes; this scheduler takes at most %" PRId64
                             " (zflow-scheduler --max-graph-nodes)",
                             what, gd->n_node, max_nodes);
    size_t bytes = protobuf_c_message_get_packed_size(&gd->base);
    if ((uint64_t)bytes > (uint64_t)max_bytes)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "%s: the graph is %zu bytes serialized; this scheduler takes at "
                             "most %" PRId64 " (zflow-scheduler --max-graph-bytes)",
                             what, bytes, max_bytes);
    *bytes_out = (int64_t)bytes;
    return ZF_STATUS_OK;
}

/* Whether s may be counted: RESOURCE_EXHAUSTED naming the limit reached.
 * Under m->mu. */
static zf_status_t s_admit(zf_master_t *m, const zf__master_session_t *s)
{
    if (!s->counted) return ZF_STATUS_OK;
    if (m->n_counted >= m->limits.max_sessions)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "CreateSession refused: this scheduler holds %d sessions, the most "
                             "it keeps open (zflow-scheduler --max-sessions %d); close some, or "
                             "they close after %" PRId64 " ms idle (--session-idle-timeout-ms)",
                             m->n_counted, m->limits.max_sessions, m->limits.session_idle_ms);
    uintptr_t n = 0;
    if (s->client[0] && zf_strmap_get(m->per_client, s->client, &n) &&
        (int)n >= m->limits.max_sessions_per_client)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "CreateSession refused: client %s holds %d sessions on this "
                             "scheduler, the most one client may (zflow-scheduler "
                             "--max-sessions-per-client %d); close some first",
                             s->client, (int)n, m->limits.max_sessions_per_client);
    return ZF_STATUS_OK;
}

/* Counts s in (+1) or out (-1). Under m->mu. */
static void s_count(zf_master_t *m, const zf__master_session_t *s, int delta)
{
    if (!s->counted) return;
    m->n_counted += delta;
    if (!s->client[0]) return;
    uintptr_t n = 0;
    zf_strmap_get(m->per_client, s->client, &n);
    n = (uintptr_t)((intptr_t)n + delta);
    if (n == 0)
        zf_strmap_remove(m->per_client, s->client, NULL);
    else if (zf_strmap_put(m->per_client, s->client, n) != 0)
        zf_log_warn(S_LOG, "out of memory counting the sessions of client %s", s->client);
}

/* Takes s out of the session table (found there; under m->mu), closes it
 * and drops the table's reference. Returns s when that was the last one,
 * for the caller to free with s_free_contents() once it has let go of
 * m->mu; NULL when a step still holds it (its last reference frees it). */
static zf__master_session_t *s_close(zf_master_t *m, zf__master_session_t *s)
{
    zf_strmap_remove(m->sessions, s->id, NULL);
    s_count(m, s, -1);
    s->closed = true;
    zf__master_cancel_running(m, s, "its session was closed");
    zf__master_pruns_drop(m, s, "its session was closed");
    zf__master_drop_plans(m, s, NULL);
    return --s->refs == 0 ? s : NULL;
}

/* A private copy of gd, allocated as protobuf-c's unpack does. */
static zf_status_t s_copy_graphdef(const Tensorflow__GraphDef *gd, Tensorflow__GraphDef **out)
{
    ProtobufCMessage *c = NULL;
    zf_status_t st = zf_proto_clone(&gd->base, "master: graph copy", &c);
    *out = (Tensorflow__GraphDef *)c;
    return st;
}

/* SessionOptions.partition_by: "" or "device" (false), "task" (true). */
static zf_status_t s_partition_by(const Zflow__SessionOptions *o, bool *by_task)
{
    const char *by = o && o->partition_by ? o->partition_by : "";
    *by_task = strcmp(by, "task") == 0;
    if (*by_task || !by[0] || strcmp(by, "device") == 0) return ZF_STATUS_OK;
    return zf_invalid_argument("CreateSession: SessionOptions.partition_by '%s' is neither "
                               "'device' nor 'task'",
                               by);
}

static zf_status_t s_session_new(zf_master_t *m, const Zflow__CreateSession *req,
                                 zf__master_session_t **out)
{
    *out = NULL;
    if (!req || !req->graph) return zf_invalid_argument("CreateSession without a graph");
    bool by_task = false;
    ZF_TRY(s_partition_by(req->options, &by_task));
    int64_t bytes = 0;
    ZF_TRY(zf__master_check_graph(m, req->graph, "CreateSession", &bytes));
    zf__master_session_t *s = calloc(1, sizeof *s);
    if (!s) return zf_out_of_memory("master");
    s->graph_bytes = bytes;
    pthread_mutex_init(&s->build, NULL);
    s->refs = 1;
    s->by_task = by_task;
    if (req->options) {
        s->soft = req->options->allow_soft_placement;
        s->place_first = req->options->place_first;
        s->opt_level = req->options->opt_level;
        s->bfloat16_sendrecv = req->options->bfloat16_sendrecv;
        s->cost_every = req->options->build_cost_model > 0 ? req->options->build_cost_model : 0;
        s->recv_scheduling = req->options->enable_recv_scheduling;
        s->place_pruned = req->options->place_pruned_graph;
        s->timeout_ms = req->options->step_timeout_ms > 0 ? req->options->step_timeout_ms : 0;
    }
    s->plans = zf_strmap_new(4, ZF_STRMAP_OWN_KEYS);
    zf_status_t st = s->plans ? zf_functions_lower(req->graph, &s->gd) : zf_out_of_memory("master");
    if (zf_ok(st) && !s->gd) st = s_copy_graphdef(req->graph, &s->gd); /* nothing to lower */
    const Tensorflow__FunctionDefLibrary *lib = req->graph->library;
    ProtobufCMessage *c = NULL;
    if (zf_ok(st) && lib && lib->n_function > 0) {
        st = zf_proto_clone(&lib->base, "master: the function library", &c);
        s->library = (Tensorflow__FunctionDefLibrary *)c;
    }
    if (zf_ok(st)) s->nodes = (int64_t)s->gd->n_node;
    if (zf_ok(st)) st = zf_graph_new_from_graphdef(s->gd, &s->graph);
    if (zf_ok(st)) {
        zf_graph_adopt_graphdef(s->graph, &s->gd);
    } else if (s->gd) {
        tensorflow__graph_def__free_unpacked(s->gd, NULL);
    }
    if (!zf_ok(st)) {
        if (s->library) protobuf_c_message_free_unpacked(&s->library->base, NULL);
        zf_strmap_destroy(&s->plans);
        pthread_mutex_destroy(&s->build);
        free(s);
        return zf_status_prefix(st, "CreateSession");
    }
    *out = s;
    return ZF_STATUS_OK;
}

/* A new session for client (NULL: one of a job's, not counted). */
static zf_status_t s_create(zf_master_t *m, const Zflow__CreateSession *req, const char *client,
                            char **session)
{
    *session = NULL;
    zf__master_session_t *s = NULL;
    ZF_TRY(s_session_new(m, req, &s));
    s->counted = client != NULL;
    s->client = strdup(client ? client : "");
    s->used_ms = zf__master_now_ms();
    char id[96];
    pthread_mutex_lock(&m->mu);
    zf_status_t st = s->client ? s_admit(m, s) : zf_out_of_memory("master");
    if (zf_ok(st)) {
        snprintf(id, sizeof id, "%ssession-%" PRIu64 "-%08" PRIx64, m->id_prefix, ++m->next_session,
                 zf_random_id() & 0xffffffffu);
        s->id = strdup(id);
        *session = strdup(id);
        if (!s->id || !*session) st = zf_out_of_memory("master");
    }
    if (zf_ok(st)) st = zf__master_pruns_new(s);
    if (zf_ok(st)) {
        if (zf_strmap_insert(m->sessions, id, (uintptr_t)s, NULL) != 0)
            st = zf_out_of_memory("master");
        else
            s_count(m, s, +1);
    }
    if (!zf_ok(st)) {
        free(*session);
        *session = NULL;
        zf__master_session_unref(m, &s);
    }
    pthread_mutex_unlock(&m->mu);
    if (zf_ok(st)) zf_log_info(S_LOG, "created %s", id);
    return st;
}

zf_status_t zf_master_create_session_for(zf_master_t *m, const Zflow__CreateSession *req,
                                         const char *client, char **session)
{
    return s_create(m, req, client ? client : "", session);
}

zf_status_t zf_master_create_session(zf_master_t *m, const Zflow__CreateSession *req,
                                     char **session)
{
    return s_create(m, req, "", session);
}

zf_status_t zf__master_create_job_session(zf_master_t *m, const Zflow__CreateSession *req,
                                          char **session)
{
    return s_create(m, req, NULL, session);
}

void zf_master_release_memory(void)
{
    zf_host_memory_trim();
    malloc_trim(0);
}

zf_status_t zf_master_close_session(zf_master_t *m, const char *session)
{
    pthread_mutex_lock(&m->mu);
    uintptr_t v = 0;
    if (!session || !zf_strmap_get(m->sessions, session, &v)) {
        zf_status_t st = ZF_STATUS_OK;
        zf__master_session_t *none = zf__master_session_find(m, session, &st);
        assert(!none);
        pthread_mutex_unlock(&m->mu);
        return st;
    }
    zf__master_session_t *s = (zf__master_session_t *)v;
    bool large = s->nodes >= ZF_MASTER_TRIM_NODES;
    zf__master_session_t *gone = s_close(m, s);
    pthread_mutex_unlock(&m->mu);
    if (gone) s_free_contents(gone);
    if (large) zf_master_release_memory();
    zf_log_info(S_LOG, "closed %s", session);
    return ZF_STATUS_OK;
}

zf_status_t zf_master_cancel_steps(zf_master_t *m, const char *session, int *n)
{
    zf_status_t st = ZF_STATUS_OK;
    pthread_mutex_lock(&m->mu);
    zf__master_session_t *s = zf__master_session_find(m, session, &st);
    int k = s ? zf__master_cancel_running(m, s, "its client cancelled it") : 0;
    zf__master_session_unref(m, &s);
    pthread_mutex_unlock(&m->mu);
    if (n) *n = k;
    if (k) zf_log_info(S_LOG, "cancelled %d step(s) of %s", k, session);
    return st;
}

int zf_master_sessions_tick(zf_master_t *m)
{
    int64_t now = zf__master_now_ms();
    int closed = 0;
    bool large = false;
    zf__master_session_t *gone = NULL; /* to free without the lock */
    pthread_mutex_lock(&m->mu);
    int64_t idle = m->limits.session_idle_ms;
    if (idle > 0 && now - m->sessions_tick_ms >= S_TICK_MS) {
        m->sessions_tick_ms = now;
        size_t iter = 0;
        uintptr_t v = 0;
        while (zf_strmap_next(m->sessions, &iter, NULL, NULL, &v)) {
            zf__master_session_t *s = (zf__master_session_t *)v;
            /* a job's session, or one with a step running, is in use */
            if (!s->counted || s->refs > 1 || now - s->used_ms < idle) continue;
            zf_log_info(S_LOG, "closing %s: no step for %" PRId64 " ms (--session-idle-timeout-ms)",
                        s->id, now - s->used_ms);
            char *id = strdup(s->id);
            if (id) {
                free(m->idle_closed[m->idle_next]);
                m->idle_closed[m->idle_next] = id;
                m->idle_next = (m->idle_next + 1) % ZF__MASTER_IDLE_IDS;
            }
            large |= s->nodes >= ZF_MASTER_TRIM_NODES;
            zf__master_session_t *last = s_close(m, s);
            if (last) {
                last->gone_next = gone;
                gone = last;
            }
            closed++;
            iter = 0; /* the table changed: look again from the start */
        }
    }
    pthread_mutex_unlock(&m->mu);
    while (gone) {
        zf__master_session_t *next = gone->gone_next;
        s_free_contents(gone);
        gone = next;
    }
    if (large) zf_master_release_memory();
    return closed;
}

int zf_master_num_sessions(zf_master_t *m)
{
    pthread_mutex_lock(&m->mu);
    int n = (int)zf_strmap_size(m->sessions);
    pthread_mutex_unlock(&m->mu);
    return n;
}
