/* The master's sessions: a client's graph, its placement and its cache of
 * plans, reference-counted by the steps that use them. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/proto_util.h"
#include "common/random.h"
#include "scheduler/graph/functions.h"
#include "scheduler/master/master_internal.h"

#define S_LOG "master"

void zf__master_session_free(zf_master_t *m, zf__master_session_t *s)
{
    zf__master_drop_plans(m, s, NULL);
    zf__master_placement_free(s);
    zf_strmap_destroy(&s->plans);
    zf_graph_destroy(&s->graph);
    pthread_mutex_destroy(&s->build);
    free(s->id);
    free(s);
}

/* ---- sessions ------------------------------------------------------------------ */

void zf__master_session_unref(zf_master_t *m, zf__master_session_t **s_p)
{
    zf__master_session_t *s = *s_p;
    *s_p = NULL;
    if (s && --s->refs == 0) zf__master_session_free(m, s);
}

/* A private copy of gd, allocated as protobuf-c's unpack does. */
static zf_status_t s_copy_graphdef(const Tensorflow__GraphDef *gd, Tensorflow__GraphDef **out)
{
    ProtobufCMessage *c = NULL;
    zf_status_t st = zf_proto_clone(&gd->base, "master: graph copy", &c);
    *out = (Tensorflow__GraphDef *)c;
    return st;
}

static zf_status_t s_session_new(const Zflow__CreateSession *req, zf__master_session_t **out)
{
    *out = NULL;
    if (!req || !req->graph) return zf_invalid_argument("CreateSession without a graph");
    zf__master_session_t *s = calloc(1, sizeof *s);
    if (!s) return zf_out_of_memory("master");
    pthread_mutex_init(&s->build, NULL);
    s->refs = 1;
    if (req->options) {
        s->soft = req->options->allow_soft_placement;
        s->place_first = req->options->place_first;
        s->timeout_ms = req->options->step_timeout_ms > 0 ? req->options->step_timeout_ms : 0;
    }
    s->plans = zf_strmap_new(4, ZF_STRMAP_OWN_KEYS);
    zf_status_t st = s->plans ? zf_functions_lower(req->graph, &s->gd) : zf_out_of_memory("master");
    if (zf_ok(st) && !s->gd) st = s_copy_graphdef(req->graph, &s->gd); /* nothing to lower */
    if (zf_ok(st)) st = zf_graph_new_from_graphdef(s->gd, &s->graph);
    if (zf_ok(st)) {
        zf_graph_adopt_graphdef(s->graph, &s->gd);
    } else if (s->gd) {
        tensorflow__graph_def__free_unpacked(s->gd, NULL);
    }
    if (!zf_ok(st)) {
        zf_strmap_destroy(&s->plans);
        pthread_mutex_destroy(&s->build);
        free(s);
        return zf_status_prefix(st, "CreateSession");
    }
    *out = s;
    return ZF_STATUS_OK;
}

zf_status_t zf_master_create_session(zf_master_t *m, const Zflow__CreateSession *req,
                                     char **session)
{
    *session = NULL;
    zf__master_session_t *s = NULL;
    ZF_TRY(s_session_new(req, &s));
    char id[96];
    pthread_mutex_lock(&m->mu);
    snprintf(id, sizeof id, "%ssession-%" PRIu64 "-%08" PRIx64, m->id_prefix, ++m->next_session,
             zf_random_id() & 0xffffffffu);
    s->id = strdup(id);
    *session = strdup(id);
    zf_status_t st = ZF_STATUS_OK;
    if (!s->id || !*session || zf_strmap_insert(m->sessions, id, (uintptr_t)s, NULL) != 0) {
        st = zf_out_of_memory("master");
        free(*session);
        *session = NULL;
        zf__master_session_unref(m, &s);
    }
    pthread_mutex_unlock(&m->mu);
    if (zf_ok(st)) zf_log_info(S_LOG, "created %s", id);
    return st;
}

zf_status_t zf_master_close_session(zf_master_t *m, const char *session)
{
    pthread_mutex_lock(&m->mu);
    uintptr_t v = 0;
    if (!session || !zf_strmap_remove(m->sessions, session, &v)) {
        pthread_mutex_unlock(&m->mu);
        return zf_not_found("session '%s' not found", session ? session : "");
    }
    zf__master_session_t *s = (zf__master_session_t *)v;
    s->closed = true;
    zf__master_drop_plans(m, s, NULL);
    zf__master_session_unref(m, &s);
    pthread_mutex_unlock(&m->mu);
    zf_log_info(S_LOG, "closed %s", session);
    return ZF_STATUS_OK;
}
