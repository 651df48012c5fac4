/* Step traces (step_trace.h). */
#include "executor/engine/step_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/graph.h"

void zf_step_trace_init(zf_step_trace_t *t)
{
    memset(t, 0, sizeof *t);
    t->max_runs = ZF_STEP_TRACE_MAX_RUNS;
    pthread_mutex_init(&t->mu, NULL);
}

void zf_step_trace_add(zf_step_trace_t *t, const zf_node_run_t *run)
{
    pthread_mutex_lock(&t->mu);
    if (t->n == t->cap && t->n < t->max_runs) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        if (cap > t->max_runs) cap = t->max_runs;
        zf_node_run_t *runs = realloc(t->runs, cap * sizeof *runs);
        if (runs) {
            t->runs = runs;
            t->cap = cap;
        }
    }
    if (t->n < t->cap)
        t->runs[t->n++] = *run;
    else
        t->truncated = true;
    pthread_mutex_unlock(&t->mu);
}

void zf_step_trace_destroy(zf_step_trace_t *t)
{
    free(t->runs);
    pthread_mutex_destroy(&t->mu);
    memset(t, 0, sizeof *t);
}

int64_t zf_step_trace_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static char *s_attr_s(const Tensorflow__NodeDef *nd, const char *key)
{
    const Tensorflow__AttrValue *v = zf_node_attr(nd, key);
    if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S) return strdup("");
    char *s = malloc(v->s.len + 1);
    if (s) {
        memcpy(s, v->s.data, v->s.len);
        s[v->s.len] = '\0';
    }
    return s;
}

/* "tensor_name;send_device;recv_device" for a transfer between partitions,
 * "" for any other node (or one with the client). */
static char *s_transfer(const Tensorflow__NodeDef *nd)
{
    const char *op = nd->op;
    bool transfer = strcmp(op, "_Send") == 0 || strcmp(op, "_HostSend") == 0 ||
                    strcmp(op, "_Recv") == 0 || strcmp(op, "_HostRecv") == 0;
    const Tensorflow__AttrValue *ct = zf_node_attr(nd, "client_terminated");
    if (!transfer || (ct && ct->value_case == TENSORFLOW__ATTR_VALUE__VALUE_B && ct->b))
        return strdup("");
    char *a = s_attr_s(nd, "tensor_name"), *b = s_attr_s(nd, "send_device"),
         *c = s_attr_s(nd, "recv_device");
    char *key = NULL;
    if (a && b && c) {
        size_t size = strlen(a) + strlen(b) + strlen(c) + 3;
        key = malloc(size);
        if (key) snprintf(key, size, "%s;%s;%s", a, b, c);
    }
    free(a);
    free(b);
    free(c);
    return key;
}

static Zflow__NodeRun *s_proto(const zf_node_run_t *r)
{
    Zflow__NodeRun *p = malloc(sizeof *p);
    if (!p) return NULL;
    zflow__node_run__init(p);
    p->device = strdup(r->device);
    p->node = strdup(r->node->name);
    p->op = strdup(r->node->op);
    p->transfer = s_transfer(r->node);
    p->start_us = r->start_us;
    p->end_us = r->end_us;
    p->frame_id = r->frame_id;
    p->iter = r->iter;
    p->output_bytes = r->output_bytes;
    if (!p->device || !p->node || !p->op || !p->transfer) {
        zflow__node_run__free_unpacked(p, NULL);
        return NULL;
    }
    return p;
}

zf_status_t zf_step_trace_to_protos(const zf_step_trace_t *t, Zflow__NodeRun ***out, size_t *n)
{
    Zflow__NodeRun **grown = realloc(*out, (*n + t->n + 1) * sizeof *grown);
    if (!grown) return zf_out_of_memory("step trace");
    *out = grown;
    for (size_t i = 0; i < t->n; i++) {
        Zflow__NodeRun *p = s_proto(&t->runs[i]);
        if (!p) return zf_out_of_memory("step trace");
        (*out)[(*n)++] = p;
    }
    return ZF_STATUS_OK;
}
