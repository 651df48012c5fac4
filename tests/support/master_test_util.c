/* Definitions of master_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "master_test_util.h"

const char *const mt_hop_graph =
    "node { name: 'x' op: 'Placeholder' device: '/job:localhost/replica:0/task:0/device:CPU:0'"
    "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
    "node { name: 'y' op: 'Square' input: 'x' device: "
    "'/job:localhost/replica:0/task:0/device:CPU:1'"
    "  attr { key: 'T' value { type: DT_FLOAT } } }"
    "node { name: 'z' op: 'Neg' input: 'y' device: '/job:localhost/replica:0/task:0/device:CPU:0'"
    "  attr { key: 'T' value { type: DT_FLOAT } } }";

static fake_t *mt_fake_by_device(cluster_t *c, const char *name, size_t len)
{
    for (int i = 0; i < c->n; i++)
        if (strlen(c->fakes[i].device->name_str) == len &&
            strncmp(c->fakes[i].device->name_str, name, len) == 0)
            return &c->fakes[i];
    return NULL;
}

static fake_t *mt_fake_by_endpoint(cluster_t *c, const char *endpoint)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->fakes[i].endpoint, endpoint) == 0) return &c->fakes[i];
    return NULL;
}

/* The "network": a send to another fake's device lands in its table. */
static zf_status_t mt_remote_send(void *arg, int64_t step_id, const char *key,
                                  const char *dst_device, zf_tensor_t *tensor, bool is_dead,
                                  bool *sent)
{
    fake_t *self = arg;
    fake_t *peer = mt_fake_by_device(self->c, dst_device, strlen(dst_device));
    *sent = peer != NULL;
    if (!peer || atomic_load(&peer->dead)) return ZF_STATUS_OK;
    zf_rendezvous_t *r = NULL;
    ZF_TRY(zf_rendezvous_mgr_find(peer->rmgr, step_id, &r));
    zf_status_t st = zf_rendezvous_send(r, key, tensor, is_dead);
    zf_rendezvous_unref(&r);
    return st;
}

/* The master's transport: queue a copy for the worker thread. */
static zf_status_t mt_send(void *arg, const char *device, const char *endpoint,
                           const Zflow__Envelope *env)
{
    cluster_t *c = arg;
    fake_t *f = mt_fake_by_endpoint(c, endpoint);
    if (!f || strcmp(f->device->name_str, device) != 0)
        return zf_status_new(ZF_UNAVAILABLE, "no fake at %s", endpoint);
    size_t len = zflow__envelope__get_packed_size(env);
    uint8_t *buf = malloc(len + 1);
    assert_non_null(buf);
    zflow__envelope__pack(env, buf);
    job_t *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->f = f;
    j->env = zflow__envelope__unpack(NULL, len, buf);
    free(buf);
    assert_non_null(j->env);
    pthread_mutex_lock(&c->mu);
    if (c->tail)
        c->tail->next = j;
    else
        c->head = j;
    c->tail = j;
    c->busy++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return ZF_STATUS_OK;
}

Zflow__Envelope *mt_reply(uint64_t id, Zflow__Envelope__BodyCase body)
{
    Zflow__Envelope *e = malloc(sizeof *e);
    zflow__envelope__init(e);
    e->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    e->request_id = id;
    e->body_case = body;
    return e;
}

Zflow__Status *mt_status(const zf_status_t *st)
{
    Zflow__Status *p = NULL;
    ASSERT_OK(zf_status_to_proto(st, &p));
    return p;
}

static void mt_handle_register(fake_t *f, const Zflow__Envelope *req)
{
    Zflow__Envelope *rep = mt_reply(req->request_id, ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY);
    Zflow__RegisterGraphReply *r = malloc(sizeof *r);
    zflow__register_graph_reply__init(r);
    rep->register_graph_reply = r;
    /* the engine borrows its GraphDef: give it a private copy */
    const Tensorflow__GraphDef *gd = req->register_graph->graph;
    size_t len = tensorflow__graph_def__get_packed_size(gd);
    uint8_t *buf = malloc(len + 1);
    tensorflow__graph_def__pack(gd, buf);
    Tensorflow__GraphDef *mine = tensorflow__graph_def__unpack(NULL, len, buf);
    free(buf);
    zf_engine_params_t params = {f->device, f->c->resources};
    fake_graph_t *g = &f->graphs[f->n_graphs];
    assert_true(f->n_graphs < MAX_GRAPHS);
    zf_status_t st = zf_engine_new(mine, &params, &g->ex);
    if (zf_ok(st)) {
        zf_engine_adopt_graphdef(g->ex, &mine);
        snprintf(g->handle, sizeof g->handle, "h%d", f->n_graphs++);
        r->graph_handle = strdup(g->handle);
    } else {
        tensorflow__graph_def__free_unpacked(mine, NULL);
    }
    r->status = mt_status(&st);
    zf_status_clear(&st);
    zf_master_deliver(f->c->m, &rep);
}

static void mt_run_done(zf_status_t status, void *arg)
{
    run_t *run = arg;
    Zflow__Envelope *rep = mt_reply(run->request_id, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
    Zflow__RunGraphReply *r = malloc(sizeof *r);
    zflow__run_graph_reply__init(r);
    rep->run_graph_reply = r;
    r->fetches = calloc(run->n_fetch_keys + 1, sizeof *r->fetches);
    for (size_t k = 0; zf_ok(status) && k < run->n_fetch_keys; k++) {
        zf_tensor_t *t = NULL;
        bool dead = false;
        status = zf_rendezvous_recv(run->r, run->fetch_keys[k], 0, &t, &dead);
        if (!zf_ok(status)) break;
        Zflow__NamedTensor *nt = malloc(sizeof *nt);
        zflow__named_tensor__init(nt);
        nt->name = strdup(run->fetch_keys[k]);
        status = zf_tensor_to_proto(t, &nt->tensor, true);
        zf_tensor_unref(&t);
        r->fetches[r->n_fetches++] = nt;
    }
    r->status = mt_status(&status);
    zf_status_clear(&status);
    for (size_t k = 0; k < run->n_fetch_keys; k++) free(run->fetch_keys[k]);
    free(run->fetch_keys);
    zf_rendezvous_unref(&run->r);
    cluster_t *c = run->f->c;
    free(run);
    zf_master_deliver(c->m, &rep);
    pthread_mutex_lock(&c->mu);
    c->busy--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void mt_handle_run(fake_t *f, const Zflow__Envelope *req)
{
    const Zflow__RunGraph *rg = req->run_graph;
    fake_graph_t *g = NULL;
    for (int i = 0; i < f->n_graphs; i++)
        if (strcmp(f->graphs[i].handle, rg->graph_handle) == 0) g = &f->graphs[i];
    run_t *run = calloc(1, sizeof *run);
    run->f = f;
    run->request_id = req->request_id;
    run->fetch_keys = calloc(rg->n_fetch_keys + 1, sizeof(char *));
    run->n_fetch_keys = rg->n_fetch_keys;
    for (size_t k = 0; k < rg->n_fetch_keys; k++) run->fetch_keys[k] = strdup(rg->fetch_keys[k]);
    pthread_mutex_lock(&f->c->mu);
    f->c->busy++;
    pthread_mutex_unlock(&f->c->mu);
    zf_status_t st = zf_rendezvous_mgr_find(f->rmgr, rg->step_id, &run->r);
    if (zf_ok(st) && (!g || rg->incarnation != f->device->incarnation))
        st = zf_status_new(ZF_ABORTED, "graph handle not found; the executor restarted");
    for (size_t k = 0; zf_ok(st) && k < rg->n_feeds; k++) {
        zf_tensor_t *t = NULL;
        st = zf_tensor_from_proto(rg->feeds[k]->tensor, &t);
        if (zf_ok(st)) st = zf_rendezvous_send(run->r, rg->feeds[k]->name, t, false);
        zf_tensor_unref(&t);
    }
    if (!zf_ok(st)) {
        mt_run_done(st, run);
        return;
    }
    zf_engine_args_t args = {rg->step_id, run->r, NULL};
    zf_engine_run_async(g->ex, &args, mt_run_done, run);
}

static void mt_handle(fake_t *f, const Zflow__Envelope *req)
{
    pthread_mutex_lock(&f->c->mu);
    switch (req->body_case) {
    case ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH: f->n_register++; break;
    case ZFLOW__ENVELOPE__BODY_RUN_GRAPH: f->n_run++; break;
    case ZFLOW__ENVELOPE__BODY_ABORT_STEP: f->n_abort++; break;
    case ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH: f->n_cleanup++; break;
    case ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH: f->n_deregister++; break;
    default: fail_msg("unexpected message body %d", (int)req->body_case);
    }
    pthread_mutex_unlock(&f->c->mu);
    if (atomic_load(&f->dead)) return;
    if (req->body_case == ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH) {
        mt_handle_register(f, req);
    } else if (req->body_case == ZFLOW__ENVELOPE__BODY_RUN_GRAPH) {
        if (!atomic_load(&f->hang)) mt_handle_run(f, req);
    } else if (req->body_case == ZFLOW__ENVELOPE__BODY_ABORT_STEP) {
        zf_rendezvous_t *r = NULL;
        ASSERT_OK(zf_rendezvous_mgr_find(f->rmgr, req->abort_step->step_id, &r));
        zf_status_t st = zf_status_from_proto(req->abort_step->status);
        if (zf_ok(st)) st = zf_status_new(ZF_CANCELLED, "step aborted");
        zf_rendezvous_start_abort(r, &st);
        zf_status_clear(&st);
        zf_rendezvous_unref(&r);
    } else if (req->body_case == ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH) {
        zf_status_t ok = ZF_STATUS_OK;
        zf_rendezvous_mgr_cleanup(f->rmgr, req->cleanup_graph->step_id, &ok);
    } else {
        for (int i = 0; i < f->n_graphs; i++)
            if (strcmp(f->graphs[i].handle, req->deregister_graph->graph_handle) == 0)
                f->graphs[i].deregistered = true; /* freed at teardown: steps may run */
    }
}

static void *mt_worker(void *arg)
{
    cluster_t *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->stop) pthread_cond_wait(&c->cv, &c->mu);
        if (!c->head) break;
        job_t *j = c->head;
        c->head = j->next;
        if (!c->head) c->tail = NULL;
        pthread_mutex_unlock(&c->mu);
        mt_handle(j->f, j->env);
        zflow__envelope__free_unpacked(j->env, NULL);
        free(j);
        pthread_mutex_lock(&c->mu);
        c->busy--;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

Zflow__ExecutorInfo *mt_info(const fake_t *f, Tensorflow__DeviceAttributes *attrs)
{
    static Zflow__ExecutorInfo info;
    tensorflow__device_attributes__init(attrs);
    attrs->name = (char *)f->device->name_str;
    attrs->device_type = (char *)"CPU";
    attrs->incarnation = f->device->incarnation;
    zflow__executor_info__init(&info);
    info.device = attrs;
    info.control_endpoint = (char *)f->endpoint;
    return &info;
}

cluster_t *mt_cluster(int n, int64_t abort_grace_ms)
{
    cluster_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    zf_kernels_register_builtin(false); /* the fake executors run partitions here */
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    ASSERT_OK(zf_resource_mgr_new(&c->resources));
    zf_master_transport_t t = {mt_send, c};
    zf_master_options_t opts = {.register_timeout_ms = 5000, .abort_grace_ms = abort_grace_ms};
    ASSERT_OK(zf_master_new(&t, &opts, &c->m));
    for (int i = 0; i < n; i++) {
        fake_t *f = &c->fakes[i];
        char name[64];
        snprintf(name, sizeof name, "/job:localhost/replica:0/task:0/device:CPU:%d", i);
        ASSERT_OK(zf_device_cpu_new(name, 1, &f->device));
        snprintf(f->endpoint, sizeof f->endpoint, "fake://%d", i);
        f->c = c;
        ASSERT_OK(zf_rendezvous_mgr_new(&f->rmgr));
        ASSERT_OK(zf_rendezvous_mgr_set_remote(f->rmgr, name, mt_remote_send, f));
        c->n++;
    }
    for (int i = 0; i < n; i++) {
        Tensorflow__DeviceAttributes attrs;
        ASSERT_OK(zf_master_device_joined(c->m, mt_info(&c->fakes[i], &attrs)));
    }
    assert_int_equal(zf_master_num_devices(c->m), n);
    assert_int_equal(pthread_create(&c->worker, NULL, mt_worker, c), 0);
    return c;
}

void mt_quiesce(cluster_t *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->busy > 0) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

int mt_count(cluster_t *c, const int *field)
{
    pthread_mutex_lock(&c->mu);
    int v = *field;
    pthread_mutex_unlock(&c->mu);
    return v;
}

void mt_cluster_destroy(cluster_t *c)
{
    mt_quiesce(c);
    zf_master_destroy(&c->m);
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->worker, NULL);
    for (int i = 0; i < c->n; i++) {
        fake_t *f = &c->fakes[i];
        zf_rendezvous_mgr_destroy(&f->rmgr);
        for (int k = 0; k < f->n_graphs; k++) zf_engine_destroy(&f->graphs[k].ex);
        zf_device_destroy(&f->device);
    }
    zf_resource_mgr_destroy(&c->resources);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void zf_test_counter_job(zf_test_counter_job_t *cj, int64_t steps, const char *init)
{
    memset(cj, 0, sizeof *cj);
    ASSERT_OK(zf_graphdef_read_file(ZF_TEST_COUNTER_GRAPH, ZF_FORMAT_AUTO, &cj->gd));
    zflow__create_session__init(&cj->cs);
    cj->cs.graph = cj->gd;
    zflow__run_step__init(&cj->step);
    cj->fetches[0] = "count";
    cj->step.n_fetches = 1;
    cj->step.fetches = cj->fetches;
    zflow__submit_job__init(&cj->job);
    cj->job.session = &cj->cs;
    cj->job.step = &cj->step;
    cj->job.steps = steps;
    if (init) {
        cj->inits[0] = (char *)init;
        cj->job.n_init_targets = 1;
        cj->job.init_targets = cj->inits;
    }
}

void zf_test_on_job_result(void *arg, Zflow__RunStepReply *reply)
{
    zf_test_job_result_t *r = arg;
    r->calls++;
    if (r->reply) zflow__run_step_reply__free_unpacked(r->reply, NULL);
    r->reply = reply;
}
